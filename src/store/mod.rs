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
//!
//! | file         | job                                                                     |
//! |--------------|-------------------------------------------------------------------------|
//! | `mod.rs`     | [`StoreError`], opening the database (WAL, permissions, migrations)     |
//! | `migrate.rs` | the embedded migrations of `migrations/`                                |
//! | `reads.rs`   | one [`Store`] method per question the daemon, CLI and metrics ask       |
//! | `writes.rs`  | the hook's inbox row and the daemon's [`StoreTx`]                       |
//! | `repairs.rs` | the repair asks and each node's last repair                            |
//! | `rows.rs`    | column lists and row decoding into the model's types                    |
//! | `counts.rs`  | [`Counts`]: one `GROUP BY` per table for the metrics endpoint           |
//! | `copy.rs`    | a consistent copy of the whole state out, and a copy taken in           |
//! | `usage.rs`   | usage spans (VM lives, job runs): the pass's writes, the report's reads |

mod copy;
mod counts;
mod migrate;
mod reads;
mod repairs;
mod rows;
mod usage;
mod waits;
mod writes;

pub use counts::Counts;
pub use migrate::LATEST as SCHEMA_VERSION;
pub use reads::NodeContext;
pub use usage::{JobSpanEnd, VmSpanEnd, USAGE_SEEN_AT, USAGE_STARTED_AT};
pub use waits::{RequestWait, WaitsCache};
pub use writes::{HookNote, Pruned, StoreTx};

use crate::model::*;
use chrono::{DateTime, TimeZone, Utc};
use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Row, SqlitePool};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::time::Instant;

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
    /// Like the hooks, it never migrates an existing schema: only the daemon does
    /// ([`Store::open_for_daemon`]), so an upgraded binary's CLI run before the daemon's restart
    /// changes nothing under the old daemon.
    pub async fn open(state_dir: &Path) -> Result<Store> {
        Self::open_with(state_dir, 4, migrate::Schema::AsIs).await
    }

    /// Opens the database for the daemon, migrating an older schema to this build's: the one place
    /// migrations run.
    pub async fn open_for_daemon(state_dir: &Path) -> Result<Store> {
        Self::open_with(state_dir, 4, migrate::Schema::Migrate).await
    }

    /// Opens the database with a single connection: what a short-lived hook process needs. It never
    /// migrates: an existing schema older than this build's is used as it is (the daemon migrates it
    /// when it starts), one newer is refused (`SchemaTooNew`).
    pub async fn open_for_hook(state_dir: &Path) -> Result<Store> {
        Self::open_with(state_dir, 1, migrate::Schema::AsIs).await
    }

    async fn open_with(state_dir: &Path, connections: u32, schema: migrate::Schema) -> Result<Store> {
        ensure_private_dir(state_dir)?;
        let path = state_dir.join(DB_FILE);
        // No `journal_mode` here: sqlx would set it on every new connection (see `enable_wal`).
        let opts = SqliteConnectOptions::new()
            .filename(&path)
            .create_if_missing(true)
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true)
            .busy_timeout(BUSY_TIMEOUT)
            // 512 KiB of page cache per connection, not SQLite's 2 MiB: the daemon's pool keeps
            // four, and at 10,000 nodes full caches would be megabytes of its peak memory; pages the
            // cache lacks come from the kernel's file cache (`make bench`: a pass rewriting all
            // 10,000 node rows took no longer with 512 KiB than with 1 MiB).
            .pragma("cache_size", "-512");
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
        migrate::run(&pool, &path, schema).await?;
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
