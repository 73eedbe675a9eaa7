//! What the daemon, the CLI and the metrics read: one method per question, each one statement.

use super::rows::*;
use super::{from_ms, to_ms, Result, Store, StoreError};
use crate::model::*;
use chrono::{DateTime, Utc};
use sqlx::Row;

/// A node as an event's log line names it (`Store::node_contexts`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct NodeContext {
    pub name: String,
    pub job_id: Option<u32>,
    pub mig: Option<String>,
    /// The name of its resize request, when it has one the store still holds.
    pub request: Option<String>,
}

impl Store {
    // ---- inbox ----------------------------------------------------------------------------------------

    /// Hook calls the daemon has not processed yet, oldest first.
    pub async fn unprocessed_inbox(&self) -> Result<Vec<InboxEntry>> {
        let rows = sqlx::query(
            "SELECT id, received_at, kind, hostlist, jobs FROM inbox WHERE processed_at IS NULL ORDER BY id",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(inbox_from_row).collect()
    }

    /// How many hook calls wait for the daemon.
    pub async fn inbox_depth(&self) -> Result<i64> {
        Ok(sqlx::query("SELECT count(*) FROM inbox WHERE processed_at IS NULL")
            .fetch_one(&self.pool)
            .await?
            .try_get(0)?)
    }

    // ---- nodes ----------------------------------------------------------------------------------------

    /// Every node slurm-dws tracks, by nodeset and index.
    ///
    /// Every pass reads every node, so this is the hot read at scale. SQLite builds one JSON array of
    /// all rows and serde decodes it: at 10,000 nodes that is several times cheaper than sqlx's
    /// row-by-row decoding (each row a message between threads, each value copied, each column found by
    /// name). `make bench` measures it (the reconcile pass row).
    pub async fn nodes(&self) -> Result<Vec<Node>> {
        let json: Option<String> = sqlx::query(
            "SELECT json_group_array(json_array(name, nodeset, idx, is_static, state, job_id, request_id, \
             mig, vm_status, termination_time, last_error, reservation, state_since, topology, maintenance)) \
             FROM (SELECT * FROM nodes ORDER BY nodeset, idx)",
        )
        .fetch_one(&self.pool)
        .await?
        .try_get(0)?;
        let rows: Vec<NodeJsonRow> = serde_json::from_str(json.as_deref().unwrap_or("[]"))?;
        rows.into_iter().map(node_from_json).collect()
    }

    /// Of each named node the store holds, what an event's log line tells: its job, its MIG and
    /// its resize request's name. One statement however many names; only those columns are read
    /// (the daemon's log of a 10,000-node pass's events reads this, not every whole record).
    pub async fn node_contexts(&self, names: &[&str]) -> Result<Vec<NodeContext>> {
        if names.is_empty() {
            return Ok(Vec::new());
        }
        let json: Option<String> = sqlx::query(
            "SELECT json_group_array(json_array(n.name, n.job_id, n.mig, r.name)) \
             FROM nodes AS n LEFT JOIN requests AS r ON r.id = n.request_id \
             WHERE n.name IN (SELECT value FROM json_each(?))",
        )
        .bind(serde_json::to_string(names)?)
        .fetch_one(&self.pool)
        .await?
        .try_get(0)?;
        // Each row an array in the fields' order (serde reads a struct from a sequence).
        Ok(serde_json::from_str(json.as_deref().unwrap_or("[]"))?)
    }

    /// One node, or `NotFound`.
    pub async fn node(&self, name: &str) -> Result<Node> {
        let row = sqlx::query(&format!("SELECT {NODE_COLUMNS} FROM nodes WHERE name = ?"))
            .bind(name)
            .fetch_optional(&self.pool)
            .await?
            .ok_or_else(|| StoreError::NotFound { what: format!("node {name}") })?;
        node_from_row(&row)
    }

    // ---- requests -------------------------------------------------------------------------------------

    /// Request groups; with `open_only`, those not `done`.
    pub async fn requests(&self, open_only: bool) -> Result<Vec<Request>> {
        let sql = if open_only {
            format!("SELECT {REQUEST_COLUMNS} FROM requests WHERE phase <> 'done' ORDER BY id")
        } else {
            format!("SELECT {REQUEST_COLUMNS} FROM requests ORDER BY id")
        };
        let rows = sqlx::query(&sql).fetch_all(&self.pool).await?;
        rows.iter().map(request_from_row).collect()
    }

    /// One request group, or `NotFound`.
    pub async fn request(&self, id: i64) -> Result<Request> {
        let row = sqlx::query(&format!("SELECT {REQUEST_COLUMNS} FROM requests WHERE id = ?"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?
            .ok_or_else(|| StoreError::NotFound { what: format!("request {id}") })?;
        request_from_row(&row)
    }

    // ---- migs -----------------------------------------------------------------------------------------

    /// MIGs slurm-dws owns; with `live_only`, those not deleted.
    pub async fn migs(&self, live_only: bool) -> Result<Vec<Mig>> {
        let sql = if live_only {
            format!("SELECT {MIG_COLUMNS} FROM migs WHERE state <> 'deleted' ORDER BY name")
        } else {
            format!("SELECT {MIG_COLUMNS} FROM migs ORDER BY name")
        };
        let rows = sqlx::query(&sql).fetch_all(&self.pool).await?;
        rows.iter().map(mig_from_row).collect()
    }

    // ---- outbox ---------------------------------------------------------------------------------------

    /// Each GCE step's consecutive failed attempts (outbox entries closed as `failed` since the step's
    /// last entry that was done or abandoned), by (kind, target), with the last one's time and error.
    pub async fn step_failures(&self) -> Result<Vec<StepFailures>> {
        let rows = sqlx::query(
            "SELECT f.kind, f.target, count(*), max(f.updated_at), \
               (SELECT x.last_error FROM outbox x WHERE x.kind = f.kind AND x.target = f.target \
                  AND x.state = 'failed' ORDER BY x.id DESC LIMIT 1) \
             FROM outbox f WHERE f.state = 'failed' AND f.id > coalesce((SELECT max(d.id) FROM outbox d \
               WHERE d.kind = f.kind AND d.target = f.target AND d.state IN ('done', 'abandoned')), 0) \
             GROUP BY f.kind, f.target ORDER BY f.kind, f.target",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(StepFailures {
                    kind: r.try_get::<String, _>(0)?.parse()?,
                    target: r.try_get(1)?,
                    failed: r.try_get::<i64, _>(2)? as u32,
                    last_at: from_ms(r.try_get(3)?),
                    last_error: r.try_get::<Option<String>, _>(4)?.unwrap_or_default(),
                })
            })
            .collect()
    }

    /// Outbox entries still pending, oldest first.
    pub async fn pending_outbox(&self) -> Result<Vec<OutboxEntry>> {
        let rows =
            sqlx::query(&format!("SELECT {OUTBOX_COLUMNS} FROM outbox WHERE state = 'pending' ORDER BY id"))
                .fetch_all(&self.pool)
                .await?;
        rows.iter().map(outbox_from_row).collect()
    }

    /// Every outbox entry about `target`, oldest first (for `explain`).
    pub async fn outbox_for_target(&self, target: &str) -> Result<Vec<OutboxEntry>> {
        let rows = sqlx::query(&format!("SELECT {OUTBOX_COLUMNS} FROM outbox WHERE target = ? ORDER BY id"))
            .bind(target)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(outbox_from_row).collect()
    }

    // ---- events ---------------------------------------------------------------------------------------

    /// Events, oldest first, optionally about one node and/or since a time, at most `limit` (the newest).
    pub async fn events(
        &self,
        node: Option<&str>,
        since: Option<DateTime<Utc>>,
        limit: i64,
    ) -> Result<Vec<Event>> {
        let since = since.map(to_ms).unwrap_or(i64::MIN);
        let rows = match node {
            Some(node) => {
                sqlx::query(
                    "SELECT * FROM (SELECT e.id, e.time, e.kind, e.nodes, e.message, e.count FROM events e \
                     JOIN event_nodes n ON n.event_id = e.id WHERE n.node = ? AND e.time >= ? \
                     ORDER BY e.id DESC LIMIT ?) ORDER BY id",
                )
                .bind(node)
                .bind(since)
                .bind(limit)
                .fetch_all(&self.pool)
                .await?
            }
            None => sqlx::query(
                "SELECT * FROM (SELECT id, time, kind, nodes, message, count FROM events WHERE time >= ? \
                     ORDER BY id DESC LIMIT ?) ORDER BY id",
            )
            .bind(since)
            .bind(limit)
            .fetch_all(&self.pool)
            .await?,
        };
        rows.iter().map(event_from_row).collect()
    }

    // ---- backoffs and meta ----------------------------------------------------------------------------

    /// Every per-nodeset backoff on record (expired ones included; the caller compares with `now`).
    pub async fn backoffs(&self) -> Result<Vec<Backoff>> {
        let rows = sqlx::query("SELECT nodeset, until, level, reason, ended FROM backoffs ORDER BY nodeset")
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| {
                Ok(Backoff {
                    nodeset: r.try_get("nodeset")?,
                    until: from_ms(r.try_get("until")?),
                    level: r.try_get::<i64, _>("level")? as u32,
                    reason: r.try_get("reason")?,
                    ended: r.try_get::<i64, _>("ended")? != 0,
                })
            })
            .collect()
    }

    /// A named value, if set.
    pub async fn meta(&self, key: &str) -> Result<Option<String>> {
        Ok(sqlx::query("SELECT value FROM meta WHERE key = ?")
            .bind(key)
            .fetch_optional(&self.pool)
            .await?
            .map(|r| r.try_get(0))
            .transpose()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, index: u32, state: NodeState, full: bool) -> Node {
        let t = from_ms(1_795_000_000_123);
        Node {
            name: name.into(),
            nodeset: "a".into(),
            index,
            is_static: full,
            state,
            job_id: full.then_some(4_000_000_000),
            request_id: None,
            mig: full.then(|| "hpc-a-x1".into()),
            vm_status: full.then(|| "RUNNING".into()),
            termination_time: full.then_some(t),
            last_error: full.then(|| "quote \" backslash \\ newline \n unicode é ✓".into()),
            reservation: full.then(|| "slurm-dws-eol-hpc-a-1".into()),
            state_since: t,
            topology: full.then(|| "us-central1-cluster-1/b1/s1/h1".into()),
            maintenance: full.then(|| {
                Box::new(Maintenance {
                    kind: "SCHEDULED".into(),
                    window_start_time: Some(t),
                    window_end_time: None,
                    latest_window_start_time: Some(t + chrono::Duration::days(2)),
                    can_reschedule: true,
                    maintenance_status: "PENDING".into(),
                    maintenance_reasons: vec!["FAILURE_GPU_XID".into(), "FAILURE_NVLINK".into()],
                })
            }),
        }
    }

    /// `nodes()` reads through one JSON document; it must give back exactly what was written, the same
    /// as the row-by-row read of `node()`, in (nodeset, index) order.
    #[tokio::test]
    async fn nodes_read_back_exactly_what_was_written() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).await.unwrap();
        assert!(store.nodes().await.unwrap().is_empty());
        let written = vec![
            node("hpc-a-10", 10, NodeState::PoweredDown, false),
            node("hpc-a-1", 1, NodeState::Up, true),
            node("hpc-a-2", 2, NodeState::ResumePending, false),
        ];
        let mut tx = store.begin().await.unwrap();
        tx.upsert_nodes(&written).await.unwrap();
        tx.commit().await.unwrap();
        let read = store.nodes().await.unwrap();
        let names: Vec<&str> = read.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["hpc-a-1", "hpc-a-2", "hpc-a-10"]);
        for n in &read {
            assert_eq!(Some(n), written.iter().find(|w| w.name == n.name));
            assert_eq!(n, &store.node(&n.name).await.unwrap());
        }
    }
}
