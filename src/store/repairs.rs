//! Node repairs: the asks `slurm-dws repair` leaves for the daemon (recorded by the daemon, taken
//! by a pass), and each node's last repair (desired state, written by a pass's commit).

use super::writes::StoreTx;
use super::{from_ms, to_ms, Result, Store};
use crate::model::*;
use chrono::{DateTime, Utc};
use sqlx::Row;

impl Store {
    /// Records asks to repair `nodes` in one commit; the next pass takes them. An ask for a node
    /// whose repair is open, or asked already and not taken, is the same repair: not recorded
    /// again. Returns the nodes recorded.
    pub async fn ask_repair(
        &self,
        nodes: &[String],
        behavior: FaultBehavior,
        description: &str,
        now: DateTime<Utc>,
    ) -> Result<Vec<String>> {
        let mut tx = self.begin().await?;
        let mut recorded = Vec::new();
        for node in nodes {
            let open: i64 = sqlx::query(
                "SELECT (SELECT count(*) FROM repair_asks WHERE node = ?1 AND processed_at IS NULL) + \
                 (SELECT count(*) FROM repairs WHERE node = ?1 AND phase IN ('requested', 'reporting', 'replacing'))",
            )
            .bind(node)
            .fetch_one(&mut *tx.tx)
            .await?
            .try_get(0)?;
            if open > 0 {
                continue;
            }
            sqlx::query(
                "INSERT INTO repair_asks (received_at, node, behavior, description) VALUES (?, ?, ?, ?)",
            )
            .bind(to_ms(now))
            .bind(node)
            .bind(behavior.as_str())
            .bind(description)
            .execute(&mut *tx.tx)
            .await?;
            recorded.push(node.clone());
        }
        tx.commit().await?;
        Ok(recorded)
    }

    /// Asks no pass has taken yet, oldest first.
    pub async fn unprocessed_repair_asks(&self) -> Result<Vec<RepairAsk>> {
        let rows = sqlx::query(
            "SELECT id, node, behavior, description FROM repair_asks WHERE processed_at IS NULL ORDER BY id",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(RepairAsk {
                    id: r.try_get("id")?,
                    node: r.try_get("node")?,
                    behavior: r.try_get::<String, _>("behavior")?.parse()?,
                    description: r.try_get("description")?,
                })
            })
            .collect()
    }

    /// Every node's last repair, by node.
    pub async fn repairs(&self) -> Result<Vec<Repair>> {
        let rows = sqlx::query(&format!("SELECT {REPAIR_COLUMNS} FROM repairs ORDER BY node"))
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(repair_of).collect()
    }

    /// A node's last repair; `None` when it was never repaired.
    pub async fn repair(&self, node: &str) -> Result<Option<Repair>> {
        let row = sqlx::query(&format!("SELECT {REPAIR_COLUMNS} FROM repairs WHERE node = ?"))
            .bind(node)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(repair_of).transpose()
    }
}

const REPAIR_COLUMNS: &str = "node, behavior, description, source, phase, requested_at, updated_at, outcome";

fn repair_of(r: &sqlx::sqlite::SqliteRow) -> Result<Repair> {
    Ok(Repair {
        node: r.try_get("node")?,
        behavior: r.try_get::<String, _>("behavior")?.parse()?,
        description: r.try_get("description")?,
        source: r.try_get("source")?,
        phase: r.try_get::<String, _>("phase")?.parse()?,
        requested_at: from_ms(r.try_get("requested_at")?),
        updated_at: from_ms(r.try_get("updated_at")?),
        outcome: r.try_get("outcome")?,
    })
}

impl StoreTx {
    /// Writes a node's repair (its last one: a new repair of the node replaces a finished one).
    pub async fn upsert_repair(&mut self, r: &Repair) -> Result<()> {
        sqlx::query(
            "INSERT OR REPLACE INTO repairs (node, behavior, description, source, phase, requested_at, \
             updated_at, outcome) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(&r.node)
        .bind(r.behavior.as_str())
        .bind(&r.description)
        .bind(&r.source)
        .bind(r.phase.as_str())
        .bind(to_ms(r.requested_at))
        .bind(to_ms(r.updated_at))
        .bind(&r.outcome)
        .execute(&mut *self.tx)
        .await?;
        Ok(())
    }

    /// Marks repair asks taken.
    pub async fn mark_repair_asks_processed(&mut self, ids: &[i64], now: DateTime<Utc>) -> Result<()> {
        for id in ids {
            sqlx::query("UPDATE repair_asks SET processed_at = ? WHERE id = ?")
                .bind(to_ms(now))
                .bind(id)
                .execute(&mut *self.tx)
                .await?;
        }
        Ok(())
    }
}
