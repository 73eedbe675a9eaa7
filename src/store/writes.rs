//! Every write: the hook's inbox row, and the daemon's [`StoreTx`] (one `BEGIN IMMEDIATE` transaction
//! per commit of a pass).

use super::rows::{outbox_from_row, OUTBOX_COLUMNS};
use super::{to_ms, Result, Store, StoreError};
use crate::model::*;
use chrono::{DateTime, Utc};
use sqlx::{Sqlite, Transaction};

/// What one [`StoreTx::prune_history`] deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pruned {
    pub events: u64,
    pub requests: u64,
    pub migs: u64,
    /// Usage spans (VM or job, the more of the two) that ended before the cut-off.
    pub spans: u64,
}

impl Pruned {
    /// The most rows of one kind deleted.
    pub fn most(&self) -> u64 {
        self.events.max(self.requests).max(self.migs).max(self.spans)
    }
}

impl Store {
    /// Deletes the history older than `before` in transactions of at most `batch` rows of each kind,
    /// until none is left. Returns the totals.
    pub async fn prune_history(&self, before: DateTime<Utc>, batch: i64) -> Result<Pruned> {
        let mut total = Pruned::default();
        loop {
            let mut tx = self.begin().await?;
            let p = tx.prune_history(before, batch).await?;
            tx.commit().await?;
            total.events += p.events;
            total.requests += p.requests;
            total.migs += p.migs;
            total.spans += p.spans;
            if p.most() < batch as u64 {
                return Ok(total);
            }
            // Hooks and the CLI get the database between two batches.
            tokio::task::yield_now().await;
        }
    }

    /// Starts a write transaction (`BEGIN IMMEDIATE`).
    pub async fn begin(&self) -> Result<StoreTx> {
        Ok(StoreTx { tx: self.pool.begin_with("BEGIN IMMEDIATE").await? })
    }

    /// Records one hook call, and the note about it if any (an event), in one commit: the commit that
    /// makes the call durable. Returns the inbox id.
    ///
    /// A hook may run against the schema of an earlier release (it never migrates, see `migrate.rs`):
    /// these statements must only name `inbox` and `events` columns that every released schema has.
    pub async fn record_hook(
        &self,
        kind: HookKind,
        hostlist: &str,
        jobs: &[(u32, String)],
        note: Option<(&str, &str)>,
        now: DateTime<Utc>,
    ) -> Result<i64> {
        let notes: Vec<HookNote> =
            note.iter().map(|(k, m)| HookNote { kind: k, nodes: &[], message: m }).collect();
        let id = self.record_hook_call(kind, Some(hostlist), jobs, &notes, now).await?;
        Ok(id.expect("a hostlist was given"))
    }

    /// [`Store::record_hook`] with any number of events, and no inbox entry when `hostlist` is `None`
    /// (every node of the call went to a delegate program): one commit. Returns the inbox id, if any.
    pub async fn record_hook_call(
        &self,
        kind: HookKind,
        hostlist: Option<&str>,
        jobs: &[(u32, String)],
        notes: &[HookNote<'_>],
        now: DateTime<Utc>,
    ) -> Result<Option<i64>> {
        let mut tx = self.begin().await?;
        let id = match hostlist {
            Some(hostlist) => Some(
                sqlx::query("INSERT INTO inbox (received_at, kind, hostlist, jobs) VALUES (?, ?, ?, ?)")
                    .bind(to_ms(now))
                    .bind(kind.as_str())
                    .bind(hostlist)
                    .bind(serde_json::to_string(jobs)?)
                    .execute(&mut *tx.tx)
                    .await?
                    .last_insert_rowid(),
            ),
            None => None,
        };
        for n in notes {
            // A plain insert, not `add_event`: its merging of identical events names `events.count`,
            // which the schema of 0.1.0 lacks, and a note is one hook call's own event anyway.
            tx.insert_event(now, n.kind, n.nodes, n.message).await?;
        }
        tx.commit().await?;
        Ok(id)
    }
}

/// An event a hook records with its call.
#[derive(Debug, Clone, Copy)]
pub struct HookNote<'a> {
    pub kind: &'a str,
    pub nodes: &'a [String],
    pub message: &'a str,
}

/// A write transaction. Dropping it without [`StoreTx::commit`] rolls everything back.
pub struct StoreTx {
    pub(super) tx: Transaction<'static, Sqlite>,
}

impl StoreTx {
    /// Makes everything written in the transaction durable at once.
    pub async fn commit(self) -> Result<()> {
        Ok(self.tx.commit().await?)
    }

    /// Marks inbox entries as processed.
    pub async fn mark_inbox_processed(&mut self, ids: &[i64], now: DateTime<Utc>) -> Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        sqlx::query("UPDATE inbox SET processed_at = ? WHERE id IN (SELECT value FROM json_each(?))")
            .bind(to_ms(now))
            .bind(serde_json::to_string(ids)?)
            .execute(&mut *self.tx)
            .await?;
        Ok(())
    }

    /// Deletes processed inbox rows older than `before` (the inbox is a queue, not a history: events are).
    pub async fn prune_inbox(&mut self, before: DateTime<Utc>) -> Result<u64> {
        Ok(sqlx::query("DELETE FROM inbox WHERE processed_at IS NOT NULL AND processed_at < ?")
            .bind(to_ms(before))
            .execute(&mut *self.tx)
            .await?
            .rows_affected())
    }

    /// Deletes up to `batch` rows each of the history older than `before`: events (with their
    /// `event_nodes` rows), usage spans that ended before it, resize requests finished (`done`) and updated before it that no node
    /// points at any more, and MIGs deleted and empty since before it. Returns the rows deleted; a
    /// caller repeats while it is `batch` of any kind, so one call never holds the write lock long.
    pub async fn prune_history(&mut self, before: DateTime<Utc>, batch: i64) -> Result<Pruned> {
        let before = to_ms(before);
        let old_events = "SELECT id FROM events WHERE time < ? ORDER BY id LIMIT ?";
        sqlx::query(&format!("DELETE FROM event_nodes WHERE event_id IN ({old_events})"))
            .bind(before)
            .bind(batch)
            .execute(&mut *self.tx)
            .await?;
        let events = sqlx::query(&format!("DELETE FROM events WHERE id IN ({old_events})"))
            .bind(before)
            .bind(batch)
            .execute(&mut *self.tx)
            .await?
            .rows_affected();
        let requests = sqlx::query(
            "DELETE FROM requests WHERE id IN (SELECT r.id FROM requests r WHERE r.phase = 'done' \
             AND r.updated_at < ? AND NOT EXISTS (SELECT 1 FROM nodes n WHERE n.request_id = r.id) \
             ORDER BY r.id LIMIT ?)",
        )
        .bind(before)
        .bind(batch)
        .execute(&mut *self.tx)
        .await?
        .rows_affected();
        let migs = sqlx::query(
            "DELETE FROM migs WHERE name IN (SELECT name FROM migs WHERE state = 'deleted' \
             AND COALESCE(empty_since, created_at) < ? LIMIT ?)",
        )
        .bind(before)
        .bind(batch)
        .execute(&mut *self.tx)
        .await?
        .rows_affected();
        // The wait history ages out with the rest (expected-start estimates read `history_days`).
        sqlx::query(
            "DELETE FROM request_waits WHERE request_id IN \
             (SELECT request_id FROM request_waits WHERE succeeded_at < ? LIMIT ?)",
        )
        .bind(before)
        .bind(batch)
        .execute(&mut *self.tx)
        .await?;
        // Usage spans that ended before the cut-off go with the rest (`usage.rs`).
        let spans = self.prune_usage(super::from_ms(before), batch).await?;
        Ok(Pruned { events, requests, migs, spans })
    }

    /// Inserts or replaces nodes, all in one statement.
    pub async fn upsert_nodes(&mut self, nodes: &[Node]) -> Result<()> {
        if nodes.is_empty() {
            return Ok(());
        }
        // JSON arrays of row arrays, written straight from the nodes, 1,000 rows per statement: no
        // intermediate values, and SQLite's copy and parse of the text stay small (10,000 rows as one
        // statement of `serde_json::Value`s would cost many MB of the daemon's peak memory; `make bench`
        // measures it).
        struct Rows<'a>(&'a [Node]);
        impl serde::Serialize for Rows<'_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
                s.collect_seq(self.0.iter().map(|n| {
                    (
                        &n.name,
                        &n.nodeset,
                        n.index,
                        n.is_static,
                        n.state.as_str(),
                        n.job_id,
                        n.request_id,
                        &n.mig,
                        &n.vm_status,
                        n.termination_time.map(to_ms),
                        &n.last_error,
                        &n.reservation,
                        to_ms(n.state_since),
                        &n.topology,
                        super::rows::maintenance_text(n.maintenance.as_ref()),
                    )
                }))
            }
        }
        for chunk in nodes.chunks(1000) {
            sqlx::query(
                "INSERT OR REPLACE INTO nodes (name, nodeset, idx, is_static, state, job_id, request_id, mig, \
                 vm_status, termination_time, last_error, reservation, state_since, topology, maintenance) \
                 SELECT value->>0, value->>1, value->>2, value->>3, value->>4, value->>5, value->>6, value->>7, \
                 value->>8, value->>9, value->>10, value->>11, value->>12, value->>13, value->>14 FROM json_each(?)",
            )
            .bind(serde_json::to_string(&Rows(chunk))?)
            .execute(&mut *self.tx)
            .await?;
        }
        Ok(())
    }

    /// Records a new request group and returns it with its id.
    #[allow(clippy::too_many_arguments)]
    pub async fn insert_request(
        &mut self,
        nodeset: &str,
        job_id: Option<u32>,
        tag: &str,
        mig: &str,
        name: &str,
        nodes: &[String],
        run_duration: u64,
        now: DateTime<Utc>,
    ) -> Result<Request> {
        let id = sqlx::query(
            "INSERT INTO requests (nodeset, job_id, tag, mig, name, nodes, run_duration, phase, created_at, \
             updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, 'planned', ?, ?)",
        )
        .bind(nodeset)
        .bind(job_id)
        .bind(tag)
        .bind(mig)
        .bind(name)
        .bind(serde_json::to_string(nodes)?)
        .bind(run_duration as i64)
        .bind(to_ms(now))
        .bind(to_ms(now))
        .execute(&mut *self.tx)
        .await?
        .last_insert_rowid();
        Ok(Request {
            id,
            nodeset: nodeset.to_string(),
            job_id,
            tag: tag.to_string(),
            mig: mig.to_string(),
            name: name.to_string(),
            nodes: nodes.to_vec(),
            run_duration,
            phase: RequestPhase::Planned,
            gce_state: None,
            created_at: now,
            updated_at: now,
            last_error: None,
            zone_choice: None,
            zone: None,
        })
    }

    /// Writes a request group's mutable fields (phase, GCE state, error, zone choice, zone, update
    /// time).
    pub async fn update_request(&mut self, r: &Request) -> Result<()> {
        let done = sqlx::query(
            "UPDATE requests SET phase = ?, gce_state = ?, last_error = ?, zone_choice = ?, zone = ?, \
             updated_at = ? WHERE id = ?",
        )
        .bind(r.phase.as_str())
        .bind(r.gce_state.as_ref().map(GceRequestState::as_str))
        .bind(&r.last_error)
        .bind(r.zone_choice.as_ref().map(serde_json::to_string).transpose()?)
        .bind(&r.zone)
        .bind(to_ms(r.updated_at))
        .bind(r.id)
        .execute(&mut *self.tx)
        .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound { what: format!("request {}", r.id) });
        }
        Ok(())
    }

    /// Inserts or replaces a MIG.
    pub async fn upsert_mig(&mut self, m: &Mig) -> Result<()> {
        sqlx::query(
            "INSERT OR REPLACE INTO migs (name, nodeset, region, target_size, state, created_at, empty_since) \
             VALUES (?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(&m.name)
        .bind(&m.nodeset)
        .bind(&m.region)
        .bind(m.target_size as i64)
        .bind(m.state.as_str())
        .bind(to_ms(m.created_at))
        .bind(m.empty_since.map(to_ms))
        .execute(&mut *self.tx)
        .await?;
        Ok(())
    }

    /// The pending outbox entry for (kind, target), or a new one with a fresh requestId: the caller sends
    /// the mutation only after this transaction commits, so the requestId is durable before GCE sees it.
    pub async fn outbox_intent(
        &mut self,
        kind: MutationKind,
        target: &str,
        payload: &serde_json::Value,
        now: DateTime<Utc>,
    ) -> Result<OutboxEntry> {
        let existing = sqlx::query(&format!(
            "SELECT {OUTBOX_COLUMNS} FROM outbox WHERE kind = ? AND target = ? AND state = 'pending' \
             ORDER BY id LIMIT 1"
        ))
        .bind(kind.as_str())
        .bind(target)
        .fetch_optional(&mut *self.tx)
        .await?;
        if let Some(row) = existing {
            return outbox_from_row(&row);
        }
        let request_id = uuid::Uuid::new_v4().to_string();
        let payload = payload.to_string();
        let id = sqlx::query(
            "INSERT INTO outbox (request_id, kind, target, payload, state, created_at, updated_at) \
             VALUES (?, ?, ?, ?, 'pending', ?, ?)",
        )
        .bind(&request_id)
        .bind(kind.as_str())
        .bind(target)
        .bind(&payload)
        .bind(to_ms(now))
        .bind(to_ms(now))
        .execute(&mut *self.tx)
        .await?
        .last_insert_rowid();
        Ok(OutboxEntry {
            id,
            request_id,
            kind,
            target: target.to_string(),
            payload,
            state: OutboxState::Pending,
            attempts: 0,
            created_at: now,
            updated_at: now,
            last_error: None,
        })
    }

    /// Records one attempt at sending an outbox entry and where it stands now.
    pub async fn outbox_update(
        &mut self,
        id: i64,
        state: OutboxState,
        error: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<()> {
        sqlx::query(
            "UPDATE outbox SET state = ?, attempts = attempts + 1, last_error = coalesce(?, last_error), \
             updated_at = ? WHERE id = ?",
        )
        .bind(state.as_str())
        .bind(error)
        .bind(to_ms(now))
        .bind(id)
        .execute(&mut *self.tx)
        .await?;
        Ok(())
    }

    /// Gives every step that failed a fresh start (at daemon start and on reload): its `failed`
    /// entries are closed as `abandoned`, so its attempts count from zero again. Returns how many.
    pub async fn forgive_failed_steps(&mut self, now: DateTime<Utc>) -> Result<u64> {
        Ok(sqlx::query(
            "UPDATE outbox SET state = 'abandoned', updated_at = ?, \
               last_error = coalesce(last_error, '') || ' (failed; given a fresh start at daemon start or reload)' \
             WHERE state = 'failed'",
        )
        .bind(to_ms(now))
        .execute(&mut *self.tx)
        .await?
        .rows_affected())
    }

    /// Appends an event about `nodes` (node names; the event keeps them as a hostlist expression).
    /// An event identical to one already recorded at the same instant counts once more instead: a
    /// pass stamps all its events with its one clock read, so a pass that notices the same thing in
    /// several rounds (or for several reasons) records it once, with a count.
    pub async fn add_event(
        &mut self,
        now: DateTime<Utc>,
        kind: &str,
        nodes: &[String],
        message: &str,
    ) -> Result<i64> {
        let hostlist = crate::hostlist::compress(nodes);
        let same: Option<i64> = sqlx::query_scalar(
            "SELECT id FROM events WHERE time = ? AND kind = ? AND nodes = ? AND message = ? \
             ORDER BY id DESC LIMIT 1",
        )
        .bind(to_ms(now))
        .bind(kind)
        .bind(&hostlist)
        .bind(message)
        .fetch_optional(&mut *self.tx)
        .await?;
        if let Some(id) = same {
            sqlx::query("UPDATE events SET count = count + 1 WHERE id = ?")
                .bind(id)
                .execute(&mut *self.tx)
                .await?;
            return Ok(id);
        }
        self.insert_event(now, kind, nodes, message).await
    }

    /// Appends an event as it is, merging nothing: names only the `events` and `event_nodes`
    /// columns every released schema has (hooks write through it, see `record_hook`).
    pub async fn insert_event(
        &mut self,
        now: DateTime<Utc>,
        kind: &str,
        nodes: &[String],
        message: &str,
    ) -> Result<i64> {
        let id = sqlx::query("INSERT INTO events (time, kind, nodes, message) VALUES (?, ?, ?, ?)")
            .bind(to_ms(now))
            .bind(kind)
            .bind(crate::hostlist::compress(nodes))
            .bind(message)
            .execute(&mut *self.tx)
            .await?
            .last_insert_rowid();
        if !nodes.is_empty() {
            sqlx::query("INSERT INTO event_nodes (event_id, node) SELECT ?, value FROM json_each(?)")
                .bind(id)
                .bind(serde_json::to_string(nodes)?)
                .execute(&mut *self.tx)
                .await?;
        }
        Ok(id)
    }

    /// Starts, extends or ends (keeping its level) a nodeset's backoff.
    pub async fn set_backoff(&mut self, b: &Backoff) -> Result<()> {
        sqlx::query(
            "INSERT OR REPLACE INTO backoffs (nodeset, until, level, reason, ended) VALUES (?, ?, ?, ?, ?)",
        )
        .bind(&b.nodeset)
        .bind(to_ms(b.until))
        .bind(b.level as i64)
        .bind(&b.reason)
        .bind(b.ended as i64)
        .execute(&mut *self.tx)
        .await?;
        Ok(())
    }

    /// Forgets a nodeset's backoff and its level (a request of the nodeset succeeded).
    pub async fn clear_backoff(&mut self, nodeset: &str) -> Result<()> {
        sqlx::query("DELETE FROM backoffs WHERE nodeset = ?").bind(nodeset).execute(&mut *self.tx).await?;
        Ok(())
    }

    /// Sets a named value.
    pub async fn set_meta(&mut self, key: &str, value: &str) -> Result<()> {
        sqlx::query("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)")
            .bind(key)
            .bind(value)
            .execute(&mut *self.tx)
            .await?;
        Ok(())
    }
}
