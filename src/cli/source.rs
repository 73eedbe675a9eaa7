//! Where the read-only commands read the state: the database file when the caller may open it (root,
//! the service user: it works with the daemon down), else the daemon over its socket, which answers
//! members of `daemon.readers` after checking who asks (see `daemon/server.rs`).

use super::CliError;
use crate::config::Config;
use crate::model::*;
use crate::protocol::{self, Query, Request as Ask, Response};
use crate::store::{Store, StoreError};
use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use std::path::PathBuf;
use std::time::Duration;

/// How long a read through the daemon may take.
const READ_TIMEOUT: Duration = Duration::from_secs(60);

/// The state, read from the file or through the daemon.
pub enum Source {
    Store(Store),
    /// The caller may not open `db`: the daemon on `socket` reads it.
    Daemon {
        socket: PathBuf,
        db: PathBuf,
    },
}

fn rt(e: impl std::fmt::Display) -> CliError {
    CliError::runtime(e.to_string())
}

impl Source {
    /// The database file when it can be opened; through the daemon when permission is denied.
    pub async fn open(cfg: &Config) -> Result<Source, CliError> {
        let db = cfg.state_dir.join(crate::store::DB_FILE);
        // 0600 in a 0700 directory: only root and the service user open the file.
        let denied =
            |r: std::io::Result<_>| matches!(r, Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied);
        if denied(std::fs::metadata(&db).map(|_| ())) || denied(std::fs::File::open(&db).map(|_| ())) {
            return Ok(Source::Daemon { socket: cfg.socket.clone(), db });
        }
        if !db.exists() {
            return Err(CliError::runtime(format!(
                "no state database in {} (the daemon has not run yet, or state_dir is wrong)",
                cfg.state_dir.display()
            )));
        }
        Store::open(&cfg.state_dir).await.map(Source::Store).map_err(rt)
    }

    async fn ask<T: DeserializeOwned>(&self, query: Query) -> Result<T, CliError> {
        let Source::Daemon { socket, db } = self else { unreachable!("asked only through the daemon") };
        let denied = format!("permission denied reading {}", db.display());
        let bad = |e: serde_json::Error| CliError::runtime(format!("the daemon sent a bad answer: {e}"));
        let line = protocol::call_line(socket, Ask::Read { query }, READ_TIMEOUT).await.map_err(|e| {
            CliError::runtime(format!(
                "{denied}, and the daemon cannot read it for you ({e}): run this as root, as the service user, \
                 or as a member of daemon.readers while the daemon runs"
            ))
        })?;
        // The rows straight into `T`: a month of usage is tens of megabytes of them.
        if let Some(rows) = protocol::rows_text(&line) {
            return serde_json::from_str(rows).map_err(bad);
        }
        match serde_json::from_str::<Response>(&line).map_err(bad)? {
            Response::Error { message } => {
                Err(CliError::runtime(format!("{denied}; the daemon says: {message}")))
            }
            other => Err(CliError::runtime(format!("the daemon sent an unexpected answer: {other:?}"))),
        }
    }

    pub async fn nodes(&self) -> Result<Vec<Node>, CliError> {
        match self {
            Source::Store(s) => s.nodes().await.map_err(rt),
            _ => self.ask(Query::Nodes).await,
        }
    }

    /// One node; `None` when slurm-dws does not track it.
    pub async fn node(&self, name: &str) -> Result<Option<Node>, CliError> {
        match self {
            Source::Store(s) => match s.node(name).await {
                Ok(n) => Ok(Some(n)),
                Err(StoreError::NotFound { .. }) => Ok(None),
                Err(e) => Err(rt(e)),
            },
            _ => self.ask(Query::Node { name: name.to_string() }).await,
        }
    }

    /// How long succeeded groups waited, by nodeset.
    pub async fn request_waits(
        &self,
    ) -> Result<std::collections::BTreeMap<String, Vec<crate::store::RequestWait>>, CliError> {
        match self {
            Source::Store(s) => s.request_waits().await.map_err(rt),
            _ => self.ask(Query::RequestWaits).await,
        }
    }

    pub async fn requests(&self, open_only: bool) -> Result<Vec<Request>, CliError> {
        match self {
            Source::Store(s) => s.requests(open_only).await.map_err(rt),
            _ => self.ask(Query::Requests { open_only }).await,
        }
    }

    pub async fn request(&self, id: i64) -> Result<Request, CliError> {
        match self {
            Source::Store(s) => s.request(id).await.map_err(rt),
            _ => self.ask(Query::Request { id }).await,
        }
    }

    pub async fn migs(&self, live_only: bool) -> Result<Vec<Mig>, CliError> {
        match self {
            Source::Store(s) => s.migs(live_only).await.map_err(rt),
            _ => self.ask(Query::Migs { live_only }).await,
        }
    }

    pub async fn events(
        &self,
        node: Option<&str>,
        since: Option<DateTime<Utc>>,
        limit: i64,
    ) -> Result<Vec<Event>, CliError> {
        match self {
            Source::Store(s) => s.events(node, since, limit).await.map_err(rt),
            _ => self.ask(Query::Events { node: node.map(str::to_string), since, limit }).await,
        }
    }

    pub async fn backoffs(&self) -> Result<Vec<Backoff>, CliError> {
        match self {
            Source::Store(s) => s.backoffs().await.map_err(rt),
            _ => self.ask(Query::Backoffs).await,
        }
    }

    pub async fn meta(&self, key: &str) -> Result<Option<String>, CliError> {
        match self {
            Source::Store(s) => s.meta(key).await.map_err(rt),
            _ => self.ask(Query::Meta { key: key.to_string() }).await,
        }
    }

    /// GCE mutations waiting in the outbox.
    pub async fn outbox_depth(&self) -> Result<usize, CliError> {
        match self {
            Source::Store(s) => s.pending_outbox().await.map(|o| o.len()).map_err(rt),
            _ => self.ask(Query::OutboxDepth).await,
        }
    }

    /// GCE steps that failed since they last succeeded.
    pub async fn step_failures(&self) -> Result<Vec<StepFailures>, CliError> {
        match self {
            Source::Store(s) => s.step_failures().await.map_err(rt),
            _ => self.ask(Query::StepFailures).await,
        }
    }

    /// Hook calls not yet processed.
    pub async fn inbox_depth(&self) -> Result<i64, CliError> {
        match self {
            Source::Store(s) => s.inbox_depth().await.map_err(rt),
            _ => self.ask(Query::InboxDepth).await,
        }
    }

    /// The usage spans overlapping `[since, until)` and when the kept data starts.
    pub async fn usage_spans(
        &self,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<protocol::UsageSpans, CliError> {
        match self {
            Source::Store(s) => s.usage_spans(since, until).await.map_err(rt),
            _ => self.ask(Query::UsageSpans { since, until }).await,
        }
    }

    /// A node's last repair; `None` when it was never repaired.
    pub async fn repair(&self, node: &str) -> Result<Option<Repair>, CliError> {
        match self {
            Source::Store(s) => s.repair(node).await.map_err(rt),
            _ => self.ask(Query::Repair { node: node.to_string() }).await,
        }
    }
}
