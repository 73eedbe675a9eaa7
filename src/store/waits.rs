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

/// The wait history as last read. A pass reads one row (`COUNT`, `MAX`); when groups succeeded
/// since, only their rows are read (ids only grow); when the history was pruned, all of it.
#[derive(Debug, Default)]
pub struct WaitsCache {
    version: Option<(i64, i64)>,
    waits: std::collections::BTreeMap<String, Vec<RequestWait>>,
}

impl WaitsCache {
    /// The history, fresh as of this call.
    pub async fn get(
        &mut self,
        store: &Store,
    ) -> Result<&std::collections::BTreeMap<String, Vec<RequestWait>>> {
        let version = store.request_waits_version().await?;
        match self.version {
            Some(v) if v == version => {}
            Some((rows, newest)) if version.1 > newest => {
                let (added, n) = store.request_waits_after(newest).await?;
                if rows + n == version.0 {
                    for (nodeset, mut w) in added {
                        let history = self.waits.entry(nodeset).or_default();
                        history.append(&mut w);
                        history.sort_by_key(|w| w.succeeded_at);
                    }
                } else {
                    self.waits = store.request_waits().await?; // pruned meanwhile too
                }
            }
            _ => self.waits = store.request_waits().await?,
        }
        self.version = Some(version);
        Ok(&self.waits)
    }
}

impl Store {
    /// What identifies the history's content: (rows, the newest group's id). Rows are only
    /// inserted (newer groups, higher ids) or pruned (fewer rows).
    pub async fn request_waits_version(&self) -> Result<(i64, i64)> {
        let row =
            sqlx::query("SELECT COUNT(*) AS n, COALESCE(MAX(request_id), 0) AS newest FROM request_waits")
                .fetch_one(&self.pool)
                .await?;
        Ok((row.try_get("n")?, row.try_get("newest")?))
    }

    /// Every recorded wait, by nodeset, oldest success first (one statement; `history_days` prunes
    /// the groups, and this table with them).
    pub async fn request_waits(&self) -> Result<std::collections::BTreeMap<String, Vec<RequestWait>>> {
        Ok(self.request_waits_after(i64::MIN).await?.0)
    }

    /// The waits of the groups whose id is above `after`, by nodeset, oldest success first, and
    /// how many.
    pub async fn request_waits_after(
        &self,
        after: i64,
    ) -> Result<(std::collections::BTreeMap<String, Vec<RequestWait>>, i64)> {
        let rows = sqlx::query(
            "SELECT nodeset, size, run_duration, created_at, succeeded_at FROM request_waits \
             WHERE request_id > ? ORDER BY succeeded_at",
        )
        .bind(after)
        .fetch_all(&self.pool)
        .await?;
        let n = rows.len() as i64;
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
        Ok((out, n))
    }
}
