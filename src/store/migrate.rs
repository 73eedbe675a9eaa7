//! Embedded, timestamped SQL migrations applied inside one immediate transaction.
//!
//! sqlx's own migrator takes no lock on SQLite, so a hook and the daemon opening a fresh database at the
//! same moment could both create the schema. Here the check and the apply happen under
//! `BEGIN IMMEDIATE`: the second opener waits, then sees the version recorded and does nothing.
//!
//! Only the daemon migrates an existing schema ([`Schema::Migrate`]). The hooks and the admin CLI
//! ([`Schema::AsIs`]) create the schema in an empty database, so that a hook can record before the
//! daemon ever ran, but never change one that exists: during an upgrade the new binary's hooks run
//! while the old daemon still does, and a hook that migrated would change the tables under it. A hook
//! newer than the schema records into it as it is (migrations keep `inbox` writable by the hooks of
//! the releases before them); a hook older than the schema refuses it, untouched.

use super::{Result, StoreError};
use sqlx::{Row, SqlitePool};
use std::path::Path;

/// (version, SQL): the files of `migrations/`, oldest first. `build.rs` reruns the build when they change.
const MIGRATIONS: &[(i64, &str)] = &[
    (20261123000000, include_str!("../../migrations/20261123000000_initial.sql")),
    (20261124000000, include_str!("../../migrations/20261124000000_event_count_history.sql")),
    (20261124000001, include_str!("../../migrations/20261124000001_outbox_failed.sql")),
    (20261124000002, include_str!("../../migrations/20261124000002_backoff_level_kept.sql")),
    (20261125260000, include_str!("../../migrations/20261125260000_request_waits.sql")),
    (20261125261000, include_str!("../../migrations/20261125261000_request_zone_choice.sql")),
    (20261125270000, include_str!("../../migrations/20261125270000_node_topology.sql")),
    (20261126260000, include_str!("../../migrations/20261126260000_request_zone.sql")),
    (20261127390000, include_str!("../../migrations/20261127390000_repairs.sql")),
    (20261127390001, include_str!("../../migrations/20261127390001_node_maintenance.sql")),
    (20261128410000, include_str!("../../migrations/20261128410000_usage.sql")),
];

/// The newest schema version this build knows.
pub const LATEST: i64 = MIGRATIONS[MIGRATIONS.len() - 1].0;

/// What an opener may do to the schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Schema {
    /// Apply every migration the database has not seen (the daemon, the admin CLI).
    Migrate,
    /// Create the schema in an empty database, else use it as it is (the hooks).
    AsIs,
}

/// Applies every migration the database has not seen yet (`Schema::Migrate`), or only creates the schema
/// of an empty one (`Schema::AsIs`). A database from a newer slurm-dws is refused untouched
/// (`SchemaTooNew`): an older binary must never write to a schema it does not know.
pub(super) async fn run(pool: &SqlitePool, path: &Path, schema: Schema) -> Result<()> {
    let too_new = |found| StoreError::SchemaTooNew { path: path.to_path_buf(), found, known: LATEST };
    // Fast path for the hook: one read when the schema is current (or newer: refused without a write lock).
    match current(pool).await? {
        Some(v) if v == LATEST => return Ok(()),
        Some(v) if v > LATEST => return Err(too_new(v)),
        Some(_) if schema == Schema::AsIs => return Ok(()),
        _ => {}
    }
    let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)",
    )
    .execute(&mut *tx)
    .await?;
    let applied: Option<i64> =
        sqlx::query("SELECT max(version) FROM schema_migrations").fetch_one(&mut *tx).await?.try_get(0)?;
    let applied = applied.unwrap_or(0);
    if applied > LATEST {
        return Err(too_new(applied));
    }
    if applied > 0 && schema == Schema::AsIs {
        // Another opener created it meanwhile: the hook uses it as it is.
        return Ok(());
    }
    for (version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > applied) {
        sqlx::raw_sql(sql)
            .execute(&mut *tx)
            .await
            .map_err(|source| StoreError::Migrate { version: *version, source })?;
        sqlx::query("INSERT INTO schema_migrations (version, applied_at) VALUES (?, datetime('now'))")
            .bind(version)
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(())
}

async fn current(pool: &SqlitePool) -> Result<Option<i64>> {
    let exists: i64 =
        sqlx::query("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'")
            .fetch_one(pool)
            .await?
            .try_get(0)?;
    if exists == 0 {
        return Ok(None);
    }
    Ok(sqlx::query("SELECT max(version) FROM schema_migrations").fetch_one(pool).await?.try_get(0)?)
}
