//! Aggregate counts for metrics: one `GROUP BY` per table instead of loading every row.

use super::{from_ms, Result, Store};
use chrono::{DateTime, Utc};
use sqlx::Row;

/// What the store holds, counted (the metrics endpoint's view of the state).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Counts {
    /// `(nodeset, node state, count)`.
    pub nodes: Vec<(String, String, i64)>,
    /// `(phase, count)` over every request group ever recorded (`done` included).
    pub requests_by_phase: Vec<(String, i64)>,
    /// `(nodeset, GCE state or "", count)` of the groups that are not `done`.
    pub open_requests_by_gce_state: Vec<(String, String, i64)>,
    /// When the oldest request still queued in GCE (`ACCEPTED`) was recorded.
    pub oldest_queued: Option<DateTime<Utc>>,
    /// `(MIG state, count)`.
    pub migs_by_state: Vec<(String, i64)>,
    /// `(mutation kind, count)` of outbox entries still pending.
    pub outbox_pending: Vec<(String, i64)>,
    /// Hook calls the daemon has not processed yet.
    pub inbox_pending: i64,
}

impl Store {
    /// Counts of nodes, requests, MIGs and pending work, in one read transaction (a consistent snapshot).
    pub async fn counts(&self) -> Result<Counts> {
        let mut tx = self.pool.begin().await?;
        let nodes = sqlx::query(
            "SELECT nodeset, state, count(*) FROM nodes GROUP BY nodeset, state ORDER BY nodeset, state",
        )
        .fetch_all(&mut *tx)
        .await?
        .iter()
        .map(|r| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?)))
        .collect::<Result<_>>()?;
        let pairs = |rows: Vec<sqlx::sqlite::SqliteRow>| -> Result<Vec<(String, i64)>> {
            rows.iter().map(|r| Ok((r.try_get(0)?, r.try_get(1)?))).collect()
        };
        let requests_by_phase = pairs(
            sqlx::query("SELECT phase, count(*) FROM requests GROUP BY phase ORDER BY phase")
                .fetch_all(&mut *tx)
                .await?,
        )?;
        let open_requests_by_gce_state = sqlx::query(
            "SELECT nodeset, coalesce(gce_state, ''), count(*) FROM requests WHERE phase <> 'done' \
             GROUP BY nodeset, coalesce(gce_state, '') ORDER BY 1, 2",
        )
        .fetch_all(&mut *tx)
        .await?
        .iter()
        .map(|r| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?)))
        .collect::<Result<_>>()?;
        let oldest: Option<i64> = sqlx::query(
            "SELECT min(created_at) FROM requests WHERE phase <> 'done' AND gce_state = 'ACCEPTED'",
        )
        .fetch_one(&mut *tx)
        .await?
        .try_get(0)?;
        let migs_by_state = pairs(
            sqlx::query("SELECT state, count(*) FROM migs GROUP BY state ORDER BY state")
                .fetch_all(&mut *tx)
                .await?,
        )?;
        let outbox_pending = pairs(
            sqlx::query(
                "SELECT kind, count(*) FROM outbox WHERE state = 'pending' GROUP BY kind ORDER BY kind",
            )
            .fetch_all(&mut *tx)
            .await?,
        )?;
        let inbox_pending: i64 = sqlx::query("SELECT count(*) FROM inbox WHERE processed_at IS NULL")
            .fetch_one(&mut *tx)
            .await?
            .try_get(0)?;
        tx.rollback().await?;
        Ok(Counts {
            nodes,
            requests_by_phase,
            open_requests_by_gce_state,
            oldest_queued: oldest.map(from_ms),
            migs_by_state,
            outbox_pending,
            inbox_pending,
        })
    }
}
