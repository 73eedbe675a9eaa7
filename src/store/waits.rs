//! How long request groups waited for capacity (`request_waits`): written once per group when it
//! succeeds, read for the expected-start estimates (`crate::waiting`).

use super::writes::StoreTx;
use super::{from_ms, to_ms, Result, Store};
use crate::model::Request;
use chrono::{DateTime, Utc};
use sqlx::Row;

/// One group that got its capacity: its size, run duration and how long it waited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RequestWait {
    pub size: u32,
    pub run_duration: u64,
    /// Seconds from the group's creation to its success.
    pub waited: i64,
    pub succeeded_at: DateTime<Utc>,
}

impl StoreTx {
    /// Records that `r` succeeded at `now`, unless it is on record already (a later update of a
    /// succeeded group keeps the first time).
    pub async fn record_wait(&mut self, r: &Request, now: DateTime<Utc>) -> Result<()> {
        sqlx::query(
            "INSERT OR IGNORE INTO request_waits (request_id, nodeset, size, run_duration, created_at, succeeded_at) \
             VALUES (?, ?, ?, ?, ?, ?)",
        )
        .bind(r.id)
        .bind(&r.nodeset)
        .bind(r.nodes.len() as i64)
        .bind(r.run_duration as i64)
        .bind(to_ms(r.created_at))
        .bind(to_ms(now))
        .execute(&mut *self.tx)
        .await?;
        Ok(())
    }
}

impl Store {
    /// Every recorded wait, by nodeset, oldest success first (one statement; `history_days` prunes
    /// the groups, and this table with them).
    pub async fn request_waits(&self) -> Result<std::collections::BTreeMap<String, Vec<RequestWait>>> {
        let rows = sqlx::query(
            "SELECT nodeset, size, run_duration, created_at, succeeded_at FROM request_waits ORDER BY succeeded_at",
        )
        .fetch_all(&self.pool)
        .await?;
        let mut out: std::collections::BTreeMap<String, Vec<RequestWait>> = Default::default();
        for r in rows {
            let (created, succeeded): (i64, i64) = (r.try_get("created_at")?, r.try_get("succeeded_at")?);
            out.entry(r.try_get("nodeset")?).or_default().push(RequestWait {
                size: r.try_get::<i64, _>("size")?.max(0) as u32,
                run_duration: r.try_get::<i64, _>("run_duration")?.max(0) as u64,
                waited: ((succeeded - created) / 1000).max(0),
                succeeded_at: from_ms(succeeded),
            });
        }
        Ok(out)
    }
}
