//! Whole-state copies for a second controller: one consistent file out (`VACUUM INTO`), and a copy's
//! rows taken in, in one transaction.

use super::{Result, Store, StoreError};
use sqlx::Row;
use std::path::Path;

/// Tables that are not state: SQLite's own and the migrations' record (equal on both sides, checked).
const NOT_STATE: &str = "name NOT LIKE 'sqlite_%' AND name <> 'schema_migrations'";

impl Store {
    /// Writes a consistent copy of the whole database to `path` (which must not exist): one
    /// `VACUUM INTO`, a read transaction that hooks and passes write beside (WAL). The copy is a
    /// single file with no WAL of its own.
    pub async fn copy_into(&self, path: &Path) -> Result<()> {
        sqlx::query("VACUUM INTO ?")
            .bind(path.display().to_string())
            .execute(&self.pool)
            .await
            .map_err(|source| StoreError::Open { path: path.to_path_buf(), source })?;
        Ok(())
    }

    /// Replaces every row of the state with the rows of the copy at `path` (written by
    /// [`Store::copy_into`] of the same schema version), in one immediate transaction, keeping the
    /// hook requests of this store that no pass has taken yet (hooks that ran here before this
    /// daemon took charge). A copy of another schema version is refused, nothing changed.
    pub async fn adopt_copy(&self, path: &Path) -> Result<()> {
        let open = |source| StoreError::Open { path: path.to_path_buf(), source };
        let mut conn = self.pool.acquire().await.map_err(open)?;
        sqlx::query("ATTACH DATABASE ? AS shared")
            .bind(path.display().to_string())
            .execute(&mut *conn)
            .await
            .map_err(open)?;
        let result = adopt_attached(&mut conn).await;
        if result.is_err() {
            let _ = sqlx::query("ROLLBACK").execute(&mut *conn).await;
        }
        let _ = sqlx::query("PRAGMA foreign_keys = ON").execute(&mut *conn).await;
        let _ = sqlx::query("DETACH DATABASE shared").execute(&mut *conn).await;
        result.map_err(|e| match e {
            Adopt::Sql(source) => open(source),
            Adopt::Version { found, known } => {
                StoreError::SchemaTooNew { path: path.to_path_buf(), found, known }
            }
        })
    }
}

enum Adopt {
    Sql(sqlx::Error),
    Version { found: i64, known: i64 },
}

impl From<sqlx::Error> for Adopt {
    fn from(e: sqlx::Error) -> Self {
        Adopt::Sql(e)
    }
}

async fn adopt_attached(conn: &mut sqlx::SqliteConnection) -> std::result::Result<(), Adopt> {
    let version = |schema: &str| format!("SELECT COALESCE(MAX(version), 0) FROM {schema}.schema_migrations");
    let found: i64 = sqlx::query(&version("shared")).fetch_one(&mut *conn).await?.try_get(0)?;
    let known: i64 = sqlx::query(&version("main")).fetch_one(&mut *conn).await?.try_get(0)?;
    if found != known {
        return Err(Adopt::Version { found, known });
    }
    let tables: Vec<String> =
        sqlx::query(&format!("SELECT name FROM main.sqlite_master WHERE type = 'table' AND {NOT_STATE}"))
            .fetch_all(&mut *conn)
            .await?
            .iter()
            .map(|r| r.try_get::<String, _>(0))
            .collect::<std::result::Result<_, _>>()?;
    // The copy is consistent by itself: its rows replace ours whole, so no foreign key is checked
    // (or acted on: ON DELETE actions would fire on rows about to be replaced anyway) meanwhile.
    sqlx::query("PRAGMA foreign_keys = OFF").execute(&mut *conn).await?;
    sqlx::query("BEGIN IMMEDIATE").execute(&mut *conn).await?;
    sqlx::query(
        "CREATE TEMP TABLE own_inbox AS SELECT received_at, kind, hostlist, jobs FROM main.inbox \
         WHERE processed_at IS NULL",
    )
    .execute(&mut *conn)
    .await?;
    for t in &tables {
        sqlx::query(&format!("DELETE FROM main.\"{t}\"")).execute(&mut *conn).await?;
        sqlx::query(&format!("INSERT INTO main.\"{t}\" SELECT * FROM shared.\"{t}\""))
            .execute(&mut *conn)
            .await?;
    }
    sqlx::query(
        "INSERT INTO main.inbox (received_at, kind, hostlist, jobs) \
         SELECT received_at, kind, hostlist, jobs FROM temp.own_inbox",
    )
    .execute(&mut *conn)
    .await?;
    sqlx::query("DROP TABLE temp.own_inbox").execute(&mut *conn).await?;
    sqlx::query("COMMIT").execute(&mut *conn).await?;
    Ok(())
}
