//! The hook benchmark's baseline (`make bench`): the least a process can do to make one request durable
//! the way the hook does — open the hook's SQLite database with the store's connection settings (WAL,
//! synchronous=NORMAL, foreign keys, busy timeout; see `Store::open_with`), commit one row in an immediate
//! transaction, exit. Same sqlx + current-thread tokio stack as the hook, nothing else.
//!
//! Usage: `sqlite_commit STATE_DIR [full]` (the directory holding `slurm-dws.db`). With `full`, the commit
//! uses synchronous=FULL: it waits for an fsync of the WAL, which is what surviving a power loss would
//! cost each hook.

// A binary at the edge, like the hook it stands in for: it stamps its row with the wall clock.
#![allow(clippy::disallowed_methods)]

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use std::time::Duration;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args_os().nth(1).ok_or("usage: sqlite_commit STATE_DIR")?;
    let path = std::path::Path::new(&dir).join("slurm-dws.db");
    let sync = match std::env::args().nth(2).as_deref() {
        Some("full") => SqliteSynchronous::Full,
        _ => SqliteSynchronous::Normal,
    };
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(async {
        let opts = SqliteConnectOptions::new()
            .filename(&path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(sync)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(10));
        let pool = SqlitePoolOptions::new().max_connections(1).min_connections(0).connect_with(opts).await?;
        sqlx::query(
            "CREATE TABLE IF NOT EXISTS bench_baseline (id INTEGER PRIMARY KEY, at INTEGER NOT NULL)",
        )
        .execute(&pool)
        .await?;
        let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
        sqlx::query("INSERT INTO bench_baseline (at) VALUES (?)")
            .bind(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_millis() as i64)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        pool.close().await;
        Ok(())
    })
}
