//! Usage spans (`vm_spans`, `job_spans`): the daemon's writes of what a pass saw open, extend and
//! close, and the reads of `slurm-dws usage` (the spans overlapping a period, and when the data
//! starts).
//!
//! Writes are changes only: a pass that saw the same VMs and jobs as the last one writes one row,
//! the meta key [`USAGE_SEEN_AT`] (the time of the last full pass that recorded usage), in the
//! pass's transaction. An open span's `last_seen` column is the pass that opened it; the span was
//! seen by every full pass since (one that did not see it would have closed it in the same
//! transaction), so its real last sighting is the later of the column and `USAGE_SEEN_AT`: the reads
//! return that. At 10,000 VMs this keeps a steady pass at one statement instead of rewriting 10,000
//! rows.

use super::writes::StoreTx;
use super::{from_ms, opt_ms, to_ms, Result, Store};
use crate::usage::{JobSpan, VmSpan};
use chrono::{DateTime, Utc};
use serde::Deserialize;
use sqlx::Row;

/// Meta key: when the last full pass that recorded usage began (unix ms).
pub const USAGE_SEEN_AT: &str = "usage_seen_at";
/// Meta key: when usage recording began in this database (unix ms): VMs that came and went before
/// it are unknown.
pub const USAGE_STARTED_AT: &str = "usage_started_at";
/// Meta key: the cut-off of the last pruning of usage history (unix ms): spans that ended before
/// it are gone.
pub const USAGE_PRUNED_BEFORE: &str = "usage_pruned_before";

/// A VM span's end: its instance id and the first pass that no longer saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmSpanEnd {
    pub instance_id: String,
    pub deleted_at: DateTime<Utc>,
}

/// A job span's end: the open span of (job, node) (one at a time) and when the job stopped
/// running there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobSpanEnd {
    pub job_id: u64,
    pub node: String,
    pub ended_at: DateTime<Utc>,
}

/// Rowids a chunk of [`Store::usage_spans`]'s reads covers.
const USAGE_CHUNK: i64 = 16_384;

/// Column order of a VM span as the JSON reads return it.
const VM_SPAN_JSON: &str = "json_array(instance_id, vm, node, nodeset, model, machine_type, gpus, job_id, \
     created_at, last_seen, deleted_at)";
const JOB_SPAN_JSON: &str = "json_array(job_id, node, user, account, partition, started_at, ended_at)";

type VmRow = (String, String, String, String, String, String, u32, Option<u64>, i64, i64, Option<i64>);
type JobRow = (u64, String, String, String, String, i64, Option<i64>);

fn vm_span(r: VmRow, seen_at: Option<i64>) -> VmSpan {
    let (instance_id, vm, node, nodeset, model, machine_type, gpus, job_id, created, last_seen, deleted) = r;
    // An open span was seen by every full pass since it opened (see the module docs).
    let last_seen = match (deleted, seen_at) {
        (None, Some(s)) => last_seen.max(s),
        _ => last_seen,
    };
    VmSpan {
        instance_id,
        vm,
        node,
        nodeset,
        model,
        machine_type,
        gpus,
        job_id,
        created_at: from_ms(created),
        last_seen: from_ms(last_seen),
        deleted_at: opt_ms(deleted),
    }
}

fn job_span(r: JobRow) -> JobSpan {
    let (job_id, node, user, account, partition, started, ended) = r;
    JobSpan { job_id, node, user, account, partition, started_at: from_ms(started), ended_at: opt_ms(ended) }
}

/// Decodes a `json_group_array` of rows (several times cheaper than row-by-row decoding at scale,
/// as `Store::nodes` measures).
fn rows<T: for<'de> Deserialize<'de>>(json: Option<String>) -> Result<Vec<T>> {
    Ok(serde_json::from_str(json.as_deref().unwrap_or("[]"))?)
}

impl Store {
    async fn meta_ms(&self, key: &str) -> Result<Option<i64>> {
        Ok(self.meta(key).await?.and_then(|v| v.parse().ok()))
    }

    /// The VM spans that overlap `[since, until)`: created before `until` and not deleted before
    /// `since` (open ones included), oldest first. An open span's `last_seen` is the last full pass
    /// that recorded usage (module docs).
    pub async fn vm_spans_between(&self, since: DateTime<Utc>, until: DateTime<Utc>) -> Result<Vec<VmSpan>> {
        let json: Option<String> = sqlx::query(&format!(
            "SELECT json_group_array({VM_SPAN_JSON}) FROM (SELECT * FROM vm_spans \
             WHERE created_at < ? AND (deleted_at IS NULL OR deleted_at > ?) ORDER BY created_at, instance_id)"
        ))
        .bind(to_ms(until))
        .bind(to_ms(since))
        .fetch_one(&self.pool)
        .await?
        .try_get(0)?;
        let seen = self.meta_ms(USAGE_SEEN_AT).await?;
        Ok(rows::<VmRow>(json)?.into_iter().map(|r| vm_span(r, seen)).collect())
    }

    /// The job spans that overlap `[since, until)`: started before `until` and not ended before
    /// `since` (running ones included), oldest first.
    pub async fn job_spans_between(
        &self,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<Vec<JobSpan>> {
        let json: Option<String> = sqlx::query(&format!(
            "SELECT json_group_array({JOB_SPAN_JSON}) FROM (SELECT * FROM job_spans \
             WHERE started_at < ? AND (ended_at IS NULL OR ended_at > ?) ORDER BY started_at, job_id, node)"
        ))
        .bind(to_ms(until))
        .bind(to_ms(since))
        .fetch_one(&self.pool)
        .await?
        .try_get(0)?;
        Ok(rows::<JobRow>(json)?.into_iter().map(job_span).collect())
    }

    /// The VM spans still open (the daemon's start), by creation.
    pub async fn open_vm_spans(&self) -> Result<Vec<VmSpan>> {
        let json: Option<String> = sqlx::query(&format!(
            "SELECT json_group_array({VM_SPAN_JSON}) FROM (SELECT * FROM vm_spans \
             WHERE deleted_at IS NULL ORDER BY created_at, instance_id)"
        ))
        .fetch_one(&self.pool)
        .await?
        .try_get(0)?;
        let seen = self.meta_ms(USAGE_SEEN_AT).await?;
        Ok(rows::<VmRow>(json)?.into_iter().map(|r| vm_span(r, seen)).collect())
    }

    /// The job spans still open (the daemon's start).
    pub async fn open_job_spans(&self) -> Result<Vec<JobSpan>> {
        let json: Option<String> = sqlx::query(&format!(
            "SELECT json_group_array({JOB_SPAN_JSON}) FROM (SELECT * FROM job_spans \
             WHERE ended_at IS NULL ORDER BY started_at, job_id, node)"
        ))
        .fetch_one(&self.pool)
        .await?
        .try_get(0)?;
        Ok(rows::<JobRow>(json)?.into_iter().map(job_span).collect())
    }

    /// What `slurm-dws usage` reads for `[since, until)`: the spans that overlap it and when the
    /// kept data starts. Lean, as 30 days at 10,000 nodes is a few hundred thousand spans (`make
    /// bench`, usage section): in no particular order, without the VMs' `instance_id` and `vm` (the
    /// report needs neither), each name allocated once (the JSON's rows are read borrowing their
    /// text).
    ///
    /// Both reads scan their table in rowid chunks (`NOT INDEXED`, [`Store::chunks`]): the index on
    /// the start (`created_at`, `started_at`) bounds only `start < until`, which for a period
    /// ending now is every row, and through it each row costs a table lookup, in the small page
    /// cache a read of the file (at 30 days × 10,000 nodes, 0.4 s a table against 0.1 s for the
    /// scan, which reads each page once; a one-day period: 0.37 s against 0.02 s).
    pub async fn usage_spans(
        &self,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<crate::usage::read::UsageSpans> {
        use crate::usage::read::{Interner, JobRef, UsageSpans, VmRef};
        use std::borrow::Cow;
        /// A row as the JSON holds it, its names borrowed from the text.
        #[derive(Deserialize)]
        struct LeanVm<'a>(
            #[serde(borrow)] Cow<'a, str>,
            #[serde(borrow)] Cow<'a, str>,
            #[serde(borrow)] Cow<'a, str>,
            #[serde(borrow)] Cow<'a, str>,
            u32,
            Option<u64>,
            i64,
            i64,
            Option<i64>,
        );
        #[derive(Deserialize)]
        struct LeanJob<'a>(
            u64,
            #[serde(borrow)] Cow<'a, str>,
            #[serde(borrow)] Cow<'a, str>,
            #[serde(borrow)] Cow<'a, str>,
            #[serde(borrow)] Cow<'a, str>,
            i64,
            Option<i64>,
        );
        let names = std::sync::Mutex::new(Interner::default());
        let seen = self.meta_ms(USAGE_SEEN_AT).await?;
        let vms = async {
            let mut vms = Vec::new();
            let sql = "SELECT json_group_array(json_array(node, nodeset, model, machine_type, gpus, job_id, \
                       created_at, last_seen, deleted_at)) FROM vm_spans NOT INDEXED \
                       WHERE rowid >= r.lo AND rowid < r.lo + ?3 \
                       AND created_at < ?1 AND (deleted_at IS NULL OR deleted_at > ?2)";
            self.chunks("vm_spans", sql, since, until, |json| {
                let mut n = names.lock().unwrap_or_else(|e| e.into_inner());
                for LeanVm(node, nodeset, model, machine_type, gpus, job_id, created, last_seen, deleted) in
                    serde_json::from_str::<Vec<LeanVm>>(json)?
                {
                    vms.push(VmRef {
                        node: n.id(&node),
                        nodeset: n.id(&nodeset),
                        model: n.id(&model),
                        machine_type: n.id(&machine_type),
                        gpus,
                        job_id,
                        created_at: created,
                        // An open span was seen by every full pass since it opened (module docs).
                        last_seen: match (deleted, seen) {
                            (None, Some(s)) => last_seen.max(s),
                            _ => last_seen,
                        },
                        deleted_at: deleted,
                    });
                }
                Ok(())
            })
            .await?;
            Ok::<_, super::StoreError>(vms)
        };
        let jobs = async {
            let mut jobs = Vec::new();
            let sql = format!(
                "SELECT json_group_array({JOB_SPAN_JSON}) FROM job_spans NOT INDEXED \
                 WHERE rowid >= r.lo AND rowid < r.lo + ?3 \
                 AND started_at < ?1 AND (ended_at IS NULL OR ended_at > ?2)"
            );
            self.chunks("job_spans", &sql, since, until, |json| {
                let mut n = names.lock().unwrap_or_else(|e| e.into_inner());
                for LeanJob(job_id, node, user, account, partition, started, ended) in
                    serde_json::from_str::<Vec<LeanJob>>(json)?
                {
                    jobs.push(JobRef {
                        job_id,
                        node: n.id(&node),
                        user: n.id(&user),
                        account: n.id(&account),
                        partition: n.id(&partition),
                        started_at: started,
                        ended_at: ended,
                    });
                }
                Ok(())
            })
            .await?;
            Ok::<_, super::StoreError>(jobs)
        };
        // Side by side: SQLite builds each table's chunks on its own connection's thread while
        // this one reads the chunks already built.
        let (vms, jobs, data_since) = tokio::try_join!(vms, jobs, self.usage_data_since())?;
        let n = names.into_inner().unwrap_or_else(|e| e.into_inner());
        Ok(UsageSpans { names: n.names, vms, jobs, data_since, catalog: None })
    }

    /// Runs `sql` (a `json_group_array` of the rows of `table` with `rowid >= r.lo AND rowid <
    /// r.lo + ?3` that overlap `[?2, ?1)`) over the table in rowid ranges of [`USAGE_CHUNK`], as one
    /// statement (one snapshot) with a row a range, and hands each range's JSON to `each`. The
    /// table is scanned in order, a page read once; and in chunks, no answer is a string of tens of
    /// MB that SQLite and sqlx grow and copy, fresh memory each time (at 30 days × 10,000 nodes,
    /// `usage --by nodeset` peaked at 96 MB, not 135).
    async fn chunks(
        &self,
        table: &str,
        sql: &str,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
        mut each: impl FnMut(&str) -> Result<()>,
    ) -> Result<()> {
        let rows = sqlx::query(&format!(
            "WITH RECURSIVE r(lo) AS (SELECT min(rowid) FROM {table} \
             UNION ALL SELECT lo + ?3 FROM r WHERE lo + ?3 <= (SELECT max(rowid) FROM {table})) \
             SELECT ({sql}) FROM r WHERE lo IS NOT NULL"
        ))
        .bind(to_ms(until))
        .bind(to_ms(since))
        .bind(USAGE_CHUNK)
        .fetch_all(&self.pool)
        .await?;
        for row in rows {
            let json: Option<String> = row.try_get(0)?;
            if let Some(json) = json.filter(|j| j != "[]") {
                each(&json)?;
            }
        }
        Ok(())
    }

    /// The oldest time the kept spans cover completely: when recording began, or the cut-off of the
    /// last pruning if later (spans that ended before it are gone). `None` before any recording.
    pub async fn usage_data_since(&self) -> Result<Option<DateTime<Utc>>> {
        let Some(started) = self.meta_ms(USAGE_STARTED_AT).await? else { return Ok(None) };
        let pruned = self.meta_ms(USAGE_PRUNED_BEFORE).await?.unwrap_or(i64::MIN);
        Ok(Some(from_ms(started.max(pruned))))
    }
}

/// Spans a batch write carries in one statement.
const WRITE_BATCH: usize = 1000;

impl StoreTx {
    /// Runs `sql` once a [`WRITE_BATCH`] of `rows`: its last parameter is the batch as one JSON
    /// array that `sql` reads with `json_each`; `lead`, when given, is bound before it.
    async fn in_batches<R: serde::Serialize>(
        &mut self,
        sql: &str,
        lead: Option<i64>,
        rows: &[R],
    ) -> Result<()> {
        for batch in rows.chunks(WRITE_BATCH) {
            let rows = serde_json::to_string(batch)?;
            let mut q = sqlx::query(sql);
            if let Some(lead) = lead {
                q = q.bind(lead);
            }
            q.bind(rows).execute(&mut *self.tx).await?;
        }
        Ok(())
    }

    /// Records new VM spans (a statement a batch). A span of an instance already recorded keeps its
    /// row (a pass never opens one twice; this makes a repeat harmless).
    pub async fn open_vm_spans(&mut self, spans: &[VmSpan]) -> Result<()> {
        let sql =
            "INSERT OR IGNORE INTO vm_spans (instance_id, vm, node, nodeset, model, machine_type, gpus, \
                   job_id, created_at, last_seen, deleted_at) \
                   SELECT value->>0, value->>1, value->>2, value->>3, value->>4, value->>5, value->>6, \
                   value->>7, value->>8, value->>9, value->>10 FROM json_each(?)";
        let rows: Vec<_> = spans
            .iter()
            .map(|s| {
                (
                    &s.instance_id,
                    &s.vm,
                    &s.node,
                    &s.nodeset,
                    &s.model,
                    &s.machine_type,
                    s.gpus,
                    s.job_id,
                    to_ms(s.created_at),
                    to_ms(s.last_seen),
                    s.deleted_at.map(to_ms),
                )
            })
            .collect();
        self.in_batches(sql, None, &rows).await
    }

    /// Closes VM spans (a statement a batch): `deleted_at` set, `last_seen` brought to the last
    /// full pass that saw them (`seen`, the [`USAGE_SEEN_AT`] before this pass) when later.
    pub async fn close_vm_spans(&mut self, ends: &[VmSpanEnd], seen: Option<DateTime<Utc>>) -> Result<()> {
        let sql = "UPDATE vm_spans SET deleted_at = j.value->>1, \
                   last_seen = max(last_seen, min(?, j.value->>1)) \
                   FROM json_each(?) AS j WHERE vm_spans.instance_id = j.value->>0 AND deleted_at IS NULL";
        let seen = seen.map_or(i64::MIN, to_ms);
        let rows: Vec<_> = ends.iter().map(|e| (&e.instance_id, to_ms(e.deleted_at))).collect();
        self.in_batches(sql, Some(seen), &rows).await
    }

    /// Records new job spans (a statement a batch); a repeat of one recorded is ignored.
    pub async fn open_job_spans(&mut self, spans: &[JobSpan]) -> Result<()> {
        let sql =
            "INSERT OR IGNORE INTO job_spans (job_id, node, user, account, partition, started_at, ended_at) \
                   SELECT value->>0, value->>1, value->>2, value->>3, value->>4, value->>5, value->>6 \
                   FROM json_each(?)";
        let rows: Vec<_> = spans
            .iter()
            .map(|s| {
                (
                    s.job_id,
                    &s.node,
                    &s.user,
                    &s.account,
                    &s.partition,
                    to_ms(s.started_at),
                    s.ended_at.map(to_ms),
                )
            })
            .collect();
        self.in_batches(sql, None, &rows).await
    }

    /// Closes job spans (a statement a batch).
    pub async fn close_job_spans(&mut self, ends: &[JobSpanEnd]) -> Result<()> {
        let sql = "UPDATE job_spans SET ended_at = max(started_at, j.value->>2) FROM json_each(?) AS j \
                   WHERE job_spans.job_id = j.value->>0 AND job_spans.node = j.value->>1 AND ended_at IS NULL";
        let rows: Vec<_> = ends.iter().map(|e| (e.job_id, &e.node, to_ms(e.ended_at))).collect();
        self.in_batches(sql, None, &rows).await
    }

    /// Records that a full pass beginning at `now` recorded usage: every open span was seen then
    /// (one row). The first call also marks when recording began.
    pub async fn usage_seen(&mut self, now: DateTime<Utc>) -> Result<()> {
        let ms = to_ms(now).to_string();
        sqlx::query("INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)")
            .bind(USAGE_STARTED_AT)
            .bind(&ms)
            .execute(&mut *self.tx)
            .await?;
        self.set_meta(USAGE_SEEN_AT, &ms).await
    }

    /// Deletes up to `batch` spans of each kind that ended before `before`, and records the
    /// cut-off ([`Store::usage_data_since`]). Returns the rows deleted.
    pub async fn prune_usage(&mut self, before: DateTime<Utc>, batch: i64) -> Result<u64> {
        let ms = to_ms(before);
        let vms = sqlx::query(
            "DELETE FROM vm_spans WHERE instance_id IN \
             (SELECT instance_id FROM vm_spans WHERE deleted_at < ? LIMIT ?)",
        )
        .bind(ms)
        .bind(batch)
        .execute(&mut *self.tx)
        .await?
        .rows_affected();
        let jobs = sqlx::query(
            "DELETE FROM job_spans WHERE rowid IN (SELECT rowid FROM job_spans WHERE ended_at < ? LIMIT ?)",
        )
        .bind(ms)
        .bind(batch)
        .execute(&mut *self.tx)
        .await?
        .rows_affected();
        sqlx::query(
            "INSERT INTO meta (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO UPDATE \
             SET value = CAST(max(CAST(value AS INTEGER), CAST(?2 AS INTEGER)) AS TEXT)",
        )
        .bind(USAGE_PRUNED_BEFORE)
        .bind(ms.to_string())
        .execute(&mut *self.tx)
        .await?;
        Ok(vms.max(jobs))
    }
}

#[cfg(test)]
#[path = "usage_tests.rs"]
mod tests;
