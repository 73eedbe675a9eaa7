//! The SQLite state store: nodes, resize-request groups, MIGs, the outbox, the event log. All SQL lives here.
//!
//! Why SQLite, and why like this:
//! - A hook must make a request durable in milliseconds and survive a crash of anything: one `INSERT` into
//!   the `inbox` in WAL mode is one fsync-free commit that a power loss cannot half-write.
//! - The daemon is the only process that changes anything but the inbox. It writes with `BEGIN IMMEDIATE`,
//!   so a hook's concurrent insert waits on the busy timeout instead of failing a pass with `SQLITE_BUSY`.
//! - Bulk writes (10,000 nodes) go through one statement over `json_each(?)`, not 10,000 round trips.
//! - Migrations are plain SQL files in `migrations/`, embedded at build time and applied inside an immediate
//!   transaction, so a hook and the daemon starting at the same moment cannot apply one twice.
//! - The database file is 0600 in a 0700 directory: it names every node and request of the cluster.

mod counts;
mod migrate;

pub use counts::Counts;
pub use migrate::LATEST as SCHEMA_VERSION;

use crate::model::*;
use chrono::{DateTime, TimeZone, Utc};
use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions, SqliteRow, SqliteSynchronous};
use sqlx::{Row, Sqlite, SqlitePool, Transaction};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The database's file name inside `state_dir`.
pub const DB_FILE: &str = "slurm-dws.db";

/// What can go wrong with the store. Callers branch on `NotFound`; everything else is reported.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("state directory {path}: {source}")]
    Dir { path: PathBuf, source: std::io::Error },
    #[error("database {path}: {source}")]
    Open { path: PathBuf, source: sqlx::Error },
    #[error("database migration {version}: {source}")]
    Migrate { version: i64, source: sqlx::Error },
    /// The database was written by a newer slurm-dws. Nothing is changed: a downgrade never runs.
    #[error(
        "database {path} has schema version {found}, newer than this slurm-dws knows ({known}); \
         upgrade slurm-dws"
    )]
    SchemaTooNew { path: PathBuf, found: i64, known: i64 },
    #[error("{what} not found")]
    NotFound { what: String },
    #[error("database: {0}")]
    Sql(#[from] sqlx::Error),
    #[error("database holds a bad value: {0}")]
    Corrupt(String),
}

impl From<UnknownValue> for StoreError {
    fn from(e: UnknownValue) -> Self {
        StoreError::Corrupt(e.to_string())
    }
}

impl From<serde_json::Error> for StoreError {
    fn from(e: serde_json::Error) -> Self {
        StoreError::Corrupt(e.to_string())
    }
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// A handle on the database. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Store {
    pool: SqlitePool,
    path: PathBuf,
}

/// Milliseconds since the epoch: how every time is stored.
pub fn to_ms(t: DateTime<Utc>) -> i64 {
    t.timestamp_millis()
}

/// The inverse of [`to_ms`].
pub fn from_ms(ms: i64) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(ms).single().unwrap_or_default()
}

fn opt_ms(ms: Option<i64>) -> Option<DateTime<Utc>> {
    ms.map(from_ms)
}

impl Store {
    /// Opens (creating if needed) the database in `state_dir`, for the daemon and the CLI.
    pub async fn open(state_dir: &Path) -> Result<Store> {
        Self::open_with(state_dir, 4).await
    }

    /// Opens the database with a single connection: what a short-lived hook process needs.
    pub async fn open_for_hook(state_dir: &Path) -> Result<Store> {
        Self::open_with(state_dir, 1).await
    }

    async fn open_with(state_dir: &Path, connections: u32) -> Result<Store> {
        ensure_private_dir(state_dir)?;
        let path = state_dir.join(DB_FILE);
        // No `journal_mode` here: sqlx would set it on every new connection (see `enable_wal`).
        let opts = SqliteConnectOptions::new()
            .filename(&path)
            .create_if_missing(true)
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true)
            .busy_timeout(BUSY_TIMEOUT)
            // 1 MiB of page cache per connection, not SQLite's 2 MiB: the daemon's pool keeps four,
            // and at 10,000 nodes they held megabytes of its peak memory; pages the cache lacks come
            // from the kernel's file cache.
            .pragma("cache_size", "-1024");
        let pool = SqlitePoolOptions::new()
            .max_connections(connections)
            .min_connections(0)
            .connect_with(opts)
            .await
            .map_err(|source| StoreError::Open { path: path.clone(), source })?;
        enable_wal(&pool).await.map_err(|source| StoreError::Open { path: path.clone(), source })?;
        // Created with the process umask; tighten before anything sensitive is written.
        for p in [path.clone(), path.with_extension("db-wal"), path.with_extension("db-shm")] {
            if p.exists() {
                let _ = std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600));
            }
        }
        migrate::run(&pool, &path).await?;
        Ok(Store { pool, path })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Closes the pool, waiting for connections to finish.
    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// Starts a write transaction (`BEGIN IMMEDIATE`).
    pub async fn begin(&self) -> Result<StoreTx> {
        Ok(StoreTx { tx: self.pool.begin_with("BEGIN IMMEDIATE").await? })
    }

    // ---- inbox ----------------------------------------------------------------------------------------

    /// Records one hook call, and the note about it if any (an event), in one commit: the commit that
    /// makes the call durable. Returns the inbox id.
    pub async fn record_hook(
        &self,
        kind: HookKind,
        hostlist: &str,
        jobs: &[(u32, String)],
        note: Option<(&str, &str)>,
        now: DateTime<Utc>,
    ) -> Result<i64> {
        let jobs = serde_json::to_string(jobs)?;
        let mut tx = self.begin().await?;
        let id = sqlx::query("INSERT INTO inbox (received_at, kind, hostlist, jobs) VALUES (?, ?, ?, ?)")
            .bind(to_ms(now))
            .bind(kind.as_str())
            .bind(hostlist)
            .bind(jobs)
            .execute(&mut *tx.tx)
            .await?
            .last_insert_rowid();
        if let Some((event_kind, message)) = note {
            tx.add_event(now, event_kind, &[], message).await?;
        }
        tx.commit().await?;
        Ok(id)
    }

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
             mig, vm_status, termination_time, last_error, reservation, state_since)) \
             FROM (SELECT * FROM nodes ORDER BY nodeset, idx)",
        )
        .fetch_one(&self.pool)
        .await?
        .try_get(0)?;
        let rows: Vec<NodeJsonRow> = serde_json::from_str(json.as_deref().unwrap_or("[]"))?;
        rows.into_iter().map(node_from_json).collect()
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
                    "SELECT * FROM (SELECT e.id, e.time, e.kind, e.nodes, e.message FROM events e \
                     JOIN event_nodes n ON n.event_id = e.id WHERE n.node = ? AND e.time >= ? \
                     ORDER BY e.id DESC LIMIT ?) ORDER BY id",
                )
                .bind(node)
                .bind(since)
                .bind(limit)
                .fetch_all(&self.pool)
                .await?
            }
            None => {
                sqlx::query(
                    "SELECT * FROM (SELECT id, time, kind, nodes, message FROM events WHERE time >= ? \
                     ORDER BY id DESC LIMIT ?) ORDER BY id",
                )
                .bind(since)
                .bind(limit)
                .fetch_all(&self.pool)
                .await?
            }
        };
        rows.iter().map(event_from_row).collect()
    }

    // ---- backoffs and meta ----------------------------------------------------------------------------

    /// Every per-nodeset backoff on record (expired ones included; the caller compares with `now`).
    pub async fn backoffs(&self) -> Result<Vec<Backoff>> {
        let rows = sqlx::query("SELECT nodeset, until, level, reason FROM backoffs ORDER BY nodeset")
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| {
                Ok(Backoff {
                    nodeset: r.try_get("nodeset")?,
                    until: from_ms(r.try_get("until")?),
                    level: r.try_get::<i64, _>("level")? as u32,
                    reason: r.try_get("reason")?,
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

/// A write transaction. Dropping it without [`StoreTx::commit`] rolls everything back.
pub struct StoreTx {
    tx: Transaction<'static, Sqlite>,
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

    /// Inserts or replaces nodes, all in one statement.
    pub async fn upsert_nodes(&mut self, nodes: &[Node]) -> Result<()> {
        if nodes.is_empty() {
            return Ok(());
        }
        // JSON arrays of row arrays, written straight from the nodes, 1,000 rows per statement: no
        // intermediate values, and SQLite's copy and parse of the text stay small (10,000 rows as one
        // statement of `serde_json::Value`s were many MB of the daemon's peak memory: `make bench`).
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
                    )
                }))
            }
        }
        for chunk in nodes.chunks(1000) {
            sqlx::query(
                "INSERT OR REPLACE INTO nodes (name, nodeset, idx, is_static, state, job_id, request_id, mig, \
                 vm_status, termination_time, last_error, reservation, state_since) \
                 SELECT value->>0, value->>1, value->>2, value->>3, value->>4, value->>5, value->>6, value->>7, \
                 value->>8, value->>9, value->>10, value->>11, value->>12 FROM json_each(?)",
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
        })
    }

    /// Writes a request group's mutable fields (phase, GCE state, error, update time).
    pub async fn update_request(&mut self, r: &Request) -> Result<()> {
        let done = sqlx::query(
            "UPDATE requests SET phase = ?, gce_state = ?, last_error = ?, updated_at = ? WHERE id = ?",
        )
        .bind(r.phase.as_str())
        .bind(&r.gce_state)
        .bind(&r.last_error)
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
        let id = sqlx::query(
            "INSERT INTO outbox (request_id, kind, target, payload, state, created_at, updated_at) \
             VALUES (?, ?, ?, ?, 'pending', ?, ?)",
        )
        .bind(&request_id)
        .bind(kind.as_str())
        .bind(target)
        .bind(payload.to_string())
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
            payload: payload.clone(),
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

    /// Appends an event about `nodes` (node names; the event keeps them as a hostlist expression).
    pub async fn add_event(
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

    /// Starts or extends a nodeset's capacity backoff.
    pub async fn set_backoff(&mut self, b: &Backoff) -> Result<()> {
        sqlx::query("INSERT OR REPLACE INTO backoffs (nodeset, until, level, reason) VALUES (?, ?, ?, ?)")
            .bind(&b.nodeset)
            .bind(to_ms(b.until))
            .bind(b.level as i64)
            .bind(&b.reason)
            .execute(&mut *self.tx)
            .await?;
        Ok(())
    }

    /// Ends a nodeset's backoff.
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

/// How long a statement waits for another connection's lock before failing with `SQLITE_BUSY`.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Puts the database in WAL mode (a property of the file: after the first open this is a no-op).
///
/// Switching a brand-new file to WAL needs an exclusive lock, and SQLite answers `SQLITE_BUSY` at once,
/// without the busy handler, when another connection holds any lock at that moment: a hook and the daemon
/// opening a fresh database together would see one of them fail. So the switch waits out the busy timeout
/// here, as every other statement does.
async fn enable_wal(pool: &SqlitePool) -> std::result::Result<(), sqlx::Error> {
    let deadline = Instant::now() + BUSY_TIMEOUT;
    loop {
        match sqlx::query("PRAGMA journal_mode = WAL").fetch_one(pool).await {
            Ok(row) => {
                let mode: String = row.try_get(0)?;
                if mode.eq_ignore_ascii_case("wal") {
                    return Ok(());
                }
                return Err(sqlx::Error::Protocol(format!("journal_mode is {mode}, not wal")));
            }
            Err(e) if is_busy(&e) && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(10)).await
            }
            Err(e) => return Err(e),
        }
    }
}

/// SQLITE_BUSY, plain or extended (the primary result code is the low byte).
fn is_busy(e: &sqlx::Error) -> bool {
    let code = e.as_database_error().and_then(|d| d.code()).and_then(|c| c.parse::<i32>().ok());
    code.is_some_and(|c| c & 0xff == 5)
}

/// Creates `dir` (and parents) as 0700, or tightens an existing one to 0700.
fn ensure_private_dir(dir: &Path) -> Result<()> {
    let err = |source| StoreError::Dir { path: dir.to_path_buf(), source };
    if !dir.exists() {
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir).map_err(err)?;
    }
    let meta = std::fs::metadata(dir).map_err(err)?;
    if !meta.is_dir() {
        return Err(err(std::io::Error::other("not a directory")));
    }
    if meta.permissions().mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(err)?;
    }
    // Said plainly here, or SQLite's "unable to open database file" is all the caller learns.
    use nix::unistd::{access, geteuid, AccessFlags};
    if access(dir, AccessFlags::W_OK | AccessFlags::X_OK).is_err() {
        return Err(err(std::io::Error::other(format!(
            "not writable by uid {}: the hooks and the daemon must run as root or the service user",
            geteuid()
        ))));
    }
    Ok(())
}

const NODE_COLUMNS: &str = "name, nodeset, idx, is_static, state, job_id, request_id, mig, vm_status, \
                            termination_time, last_error, reservation, state_since";
const REQUEST_COLUMNS: &str = "id, nodeset, job_id, tag, mig, name, nodes, run_duration, phase, gce_state, \
                               created_at, updated_at, last_error";
const MIG_COLUMNS: &str = "name, nodeset, region, target_size, state, created_at, empty_since";
const OUTBOX_COLUMNS: &str =
    "id, request_id, kind, target, payload, state, attempts, created_at, updated_at, last_error";

fn node_from_row(r: &SqliteRow) -> Result<Node> {
    Ok(Node {
        name: r.try_get("name")?,
        nodeset: r.try_get("nodeset")?,
        index: r.try_get::<i64, _>("idx")? as u32,
        is_static: r.try_get("is_static")?,
        state: r.try_get::<String, _>("state")?.parse()?,
        job_id: r.try_get::<Option<i64>, _>("job_id")?.map(|j| j as u32),
        request_id: r.try_get("request_id")?,
        mig: r.try_get("mig")?,
        vm_status: r.try_get("vm_status")?,
        termination_time: opt_ms(r.try_get("termination_time")?),
        last_error: r.try_get("last_error")?,
        reservation: r.try_get("reservation")?,
        state_since: from_ms(r.try_get("state_since")?),
    })
}

/// A `nodes` row as `json_array(...)` in [`Store::nodes`] spells it, in `NODE_COLUMNS` order.
type NodeJsonRow = (
    String,
    String,
    i64,
    i64,
    String,
    Option<i64>,
    Option<i64>,
    Option<String>,
    Option<String>,
    Option<i64>,
    Option<String>,
    Option<String>,
    i64,
);

fn node_from_json(r: NodeJsonRow) -> Result<Node> {
    let (
        name,
        nodeset,
        idx,
        is_static,
        state,
        job_id,
        request_id,
        mig,
        vm_status,
        term,
        last_error,
        res,
        since,
    ) = r;
    Ok(Node {
        name,
        nodeset,
        index: idx as u32,
        is_static: is_static != 0,
        state: state.parse()?,
        job_id: job_id.map(|j| j as u32),
        request_id,
        mig,
        vm_status,
        termination_time: opt_ms(term),
        last_error,
        reservation: res,
        state_since: from_ms(since),
    })
}

fn request_from_row(r: &SqliteRow) -> Result<Request> {
    Ok(Request {
        id: r.try_get("id")?,
        nodeset: r.try_get("nodeset")?,
        job_id: r.try_get::<Option<i64>, _>("job_id")?.map(|j| j as u32),
        tag: r.try_get("tag")?,
        mig: r.try_get("mig")?,
        name: r.try_get("name")?,
        nodes: serde_json::from_str(&r.try_get::<String, _>("nodes")?)?,
        run_duration: r.try_get::<i64, _>("run_duration")? as u64,
        phase: r.try_get::<String, _>("phase")?.parse()?,
        gce_state: r.try_get("gce_state")?,
        created_at: from_ms(r.try_get("created_at")?),
        updated_at: from_ms(r.try_get("updated_at")?),
        last_error: r.try_get("last_error")?,
    })
}

fn mig_from_row(r: &SqliteRow) -> Result<Mig> {
    Ok(Mig {
        name: r.try_get("name")?,
        nodeset: r.try_get("nodeset")?,
        region: r.try_get("region")?,
        target_size: r.try_get::<i64, _>("target_size")? as u32,
        state: r.try_get::<String, _>("state")?.parse()?,
        created_at: from_ms(r.try_get("created_at")?),
        empty_since: opt_ms(r.try_get("empty_since")?),
    })
}

fn outbox_from_row(r: &SqliteRow) -> Result<OutboxEntry> {
    Ok(OutboxEntry {
        id: r.try_get("id")?,
        request_id: r.try_get("request_id")?,
        kind: r.try_get::<String, _>("kind")?.parse()?,
        target: r.try_get("target")?,
        payload: serde_json::from_str(&r.try_get::<String, _>("payload")?)?,
        state: r.try_get::<String, _>("state")?.parse()?,
        attempts: r.try_get::<i64, _>("attempts")? as u32,
        created_at: from_ms(r.try_get("created_at")?),
        updated_at: from_ms(r.try_get("updated_at")?),
        last_error: r.try_get("last_error")?,
    })
}

fn event_from_row(r: &SqliteRow) -> Result<Event> {
    Ok(Event {
        id: r.try_get("id")?,
        time: from_ms(r.try_get("time")?),
        kind: r.try_get("kind")?,
        nodes: r.try_get("nodes")?,
        message: r.try_get("message")?,
    })
}

fn inbox_from_row(r: &SqliteRow) -> Result<InboxEntry> {
    Ok(InboxEntry {
        id: r.try_get("id")?,
        received_at: from_ms(r.try_get("received_at")?),
        kind: r.try_get::<String, _>("kind")?.parse()?,
        hostlist: r.try_get("hostlist")?,
        jobs: serde_json::from_str(&r.try_get::<String, _>("jobs")?)?,
    })
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
