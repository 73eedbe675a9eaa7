//! Embedded, timestamped SQL migrations applied inside one immediate transaction.
//!
//! sqlx's own migrator takes no lock on SQLite, so a hook and the daemon opening a fresh database at the
//! same moment could both apply the first migration. Here the check and the apply happen under
//! `BEGIN IMMEDIATE`: the second opener waits, then sees the version recorded and does nothing.

use super::{Result, StoreError};
use sqlx::{Row, SqlitePool};
use std::path::Path;

/// (version, SQL): the files of `migrations/`, oldest first. `build.rs` reruns the build when they change.
const MIGRATIONS: &[(i64, &str)] = &[
    (20261123000000, include_str!("../../migrations/20261123000000_initial.sql")),
    (20261124000000, include_str!("../../migrations/20261124000000_outbox_failed.sql")),
    (20261124000001, include_str!("../../migrations/20261124000001_backoff_level_kept.sql")),
];

/// The newest schema version this build knows.
pub const LATEST: i64 = MIGRATIONS[MIGRATIONS.len() - 1].0;

/// Applies every migration the database has not seen yet. A database from a newer slurm-dws is refused
/// untouched (`SchemaTooNew`): an older binary must never write to a schema it does not know.
pub(super) async fn run(pool: &SqlitePool, path: &Path) -> Result<()> {
    let too_new = |found| StoreError::SchemaTooNew { path: path.to_path_buf(), found, known: LATEST };
    // Fast path for the hook: one read when the schema is current (or newer: refused without a write lock).
    match current(pool).await? {
        Some(v) if v == LATEST => return Ok(()),
        Some(v) if v > LATEST => return Err(too_new(v)),
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
