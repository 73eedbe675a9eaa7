//! The Unix-socket protocol shared by hooks, the CLI and the daemon: one JSON request, one JSON response.
//!
//! Framing is one JSON object per line, both ways. Every request carries the protocol version, so an old
//! CLI talking to a new daemon gets a clear refusal rather than a misread. Messages are small; the reader
//! refuses lines over [`MAX_MESSAGE`] so garbage on the socket cannot exhaust the daemon's memory.

use crate::reconcile::{GcReport, PassReport};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

/// The protocol version this build speaks.
pub const VERSION: u32 = 1;
/// The longest request the daemon accepts.
pub const MAX_MESSAGE: usize = 1 << 20;
/// The longest answer a client accepts: a read of every node of a 100,000-node cluster fits.
pub const MAX_ANSWER: usize = 256 << 20;

/// A request on the socket.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    pub v: u32,
    #[serde(flatten)]
    pub request: Request,
}

/// What a client can ask.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "request", rename_all = "snake_case")]
pub enum Request {
    /// A hook recorded something: run a pass soon. (Mutating: root or the service user only.)
    Wake,
    /// Liveness and the last pass report. (Read-only: any local user.)
    Status,
    /// Run one pass now and return its report. (Mutating.)
    Reconcile,
    /// Garbage collection: with `dry_run`, what a pass would delete and why; else delete it now. (Mutating
    /// unless `dry_run`.)
    Gc { dry_run: bool },
    /// A read of the store, for a caller who cannot open the database file. (Read-only: root, the
    /// service user and members of `daemon.readers`.)
    Read { query: Query },
    /// `slurm-dws repair`: record an ask to repair `nodes` (their names, checked by the CLI) with
    /// GCE's fault `behavior` and a `description`; a pass carries it out. (Mutating.)
    Repair { nodes: Vec<String>, behavior: String, description: String },
}

/// What a [`Request::Read`] reads: the store's reads the read-only commands make, one each.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "query", rename_all = "snake_case")]
pub enum Query {
    Nodes,
    /// One node; `null` when it is not tracked.
    Node {
        name: String,
    },
    Requests {
        open_only: bool,
    },
    Request {
        id: i64,
    },
    Migs {
        live_only: bool,
    },
    Events {
        node: Option<String>,
        since: Option<chrono::DateTime<chrono::Utc>>,
        limit: i64,
    },
    Backoffs,
    Meta {
        key: String,
    },
    /// How many GCE mutations wait in the outbox.
    OutboxDepth,
    /// GCE steps that failed since they last succeeded (`Store::step_failures`).
    StepFailures,
    InboxDepth,
    /// How long succeeded request groups waited, by nodeset (`Store::request_waits`).
    RequestWaits,
    /// A node's last repair; `null` when it was never repaired (`Store::repair`).
    Repair {
        node: String,
    },
    /// The usage spans overlapping `[since, until)`, their names interned, and when the kept data
    /// starts (`Store::usage_spans`), for `slurm-dws usage`.
    UsageSpans {
        since: chrono::DateTime<chrono::Utc>,
        until: chrono::DateTime<chrono::Utc>,
    },
}

pub use crate::usage::read::UsageSpans;

impl Request {
    /// Whether the request changes anything (and so needs a privileged peer).
    pub fn is_mutating(&self) -> bool {
        !matches!(self, Request::Status | Request::Gc { dry_run: true } | Request::Read { .. })
    }

    /// Whether the request reads the store (and so needs root, the service user or a reader).
    pub fn is_read(&self) -> bool {
        matches!(self, Request::Read { .. })
    }
}

/// The daemon's answer: one variant per kind of answer, its fields beside the `response` tag.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "response", rename_all = "snake_case")]
pub enum Response {
    /// `wake`: noted.
    Ok,
    /// `status`: the daemon's liveness and its last pass.
    Status(Liveness),
    /// `reconcile`: the report of the pass it ran.
    Pass(PassReport),
    /// `gc`: what it would delete (dry run) or deleted.
    Gc(GcReport),
    /// `read`: what the query read, as JSON of the store's types.
    Rows {
        rows: serde_json::Value,
    },
    Error {
        message: String,
    },
}

/// The daemon's liveness, answered at once (without waiting for a pass).
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
pub struct Liveness {
    pub version: String,
    pub pid: u32,
    /// RFC 3339.
    pub started_at: String,
    /// The config file the daemon runs with.
    pub config: String,
    pub pass_running: bool,
    pub last_pass: Option<PassReport>,
    /// With several controllers (`SlurmctldHost`), this daemon's role as last asked; `None` with one.
    #[serde(default)]
    pub controller: Option<ControllerRole>,
}

/// Whether this daemon acts: only the one beside the controller Slurm has in charge does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControllerRole {
    /// `in_charge` or `standby` (also when no controller answers: then nobody acts).
    pub role: String,
    /// This daemon's controller (`daemon.controller`).
    pub controller: String,
    /// The controller in charge, as `scontrol ping` showed it; `None` when none answered.
    pub in_charge: Option<String>,
    /// RFC 3339: when the role was last asked.
    pub asked_at: String,
}

/// Why a client call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("daemon not reachable at {path}: {source}")]
    Connect { path: String, source: std::io::Error },
    #[error("daemon at {path} did not answer within {secs}s")]
    Timeout { path: String, secs: u64 },
    #[error("talking to the daemon: {0}")]
    Io(#[from] std::io::Error),
    #[error("daemon sent a bad answer: {0}")]
    Decode(#[from] serde_json::Error),
    #[error("daemon closed the connection without answering")]
    Closed,
}

/// The line of a [`Response::Rows`] answer whose rows are the JSON text `rows` (a read's answer,
/// written without building a `serde_json::Value` of rows that can be tens of megabytes).
pub fn rows_line(rows: &[u8]) -> Vec<u8> {
    const HEAD: &[u8] = br#"{"response":"rows","rows":"#;
    let mut line = Vec::with_capacity(HEAD.len() + rows.len() + 2);
    line.extend_from_slice(HEAD);
    line.extend_from_slice(rows);
    line.extend_from_slice(b"}\n");
    line
}

/// The rows' JSON text of an answer line that is a [`Response::Rows`], unparsed, so a client reads
/// them into its own types without a `serde_json::Value` between; `None` for any other answer.
pub fn rows_text(line: &str) -> Option<&str> {
    #[derive(Deserialize)]
    struct Rows<'a> {
        response: &'a str,
        #[serde(borrow)]
        rows: &'a serde_json::value::RawValue,
    }
    match serde_json::from_str::<Rows>(line) {
        Ok(r) if r.response == "rows" => Some(r.rows.get()),
        _ => None,
    }
}

/// Sends one request and waits at most `timeout` for the answer.
pub async fn call(socket: &Path, request: Request, timeout: Duration) -> Result<Response, ClientError> {
    Ok(serde_json::from_str(&call_line(socket, request, timeout).await?)?)
}

/// Sends one request and waits at most `timeout` for the answer's line, unparsed.
pub async fn call_line(socket: &Path, request: Request, timeout: Duration) -> Result<String, ClientError> {
    let path = socket.display().to_string();
    let fut = async {
        let mut stream = UnixStream::connect(socket)
            .await
            .map_err(|source| ClientError::Connect { path: path.clone(), source })?;
        let mut line = serde_json::to_vec(&Envelope { v: VERSION, request })?;
        line.push(b'\n');
        stream.write_all(&line).await?;
        let mut reader = BufReader::new(stream);
        read_line_within(&mut reader, MAX_ANSWER).await?.ok_or(ClientError::Closed)
    };
    tokio::time::timeout(timeout, fut)
        .await
        .unwrap_or_else(|_| Err(ClientError::Timeout { path: path.clone(), secs: timeout.as_secs() }))
}

/// Reads one line of at most [`MAX_MESSAGE`] bytes; `None` at end of stream.
pub async fn read_line<R: tokio::io::AsyncBufRead + Unpin>(r: &mut R) -> std::io::Result<Option<String>> {
    read_line_within(r, MAX_MESSAGE).await
}

/// Reads one line of at most `max` bytes; `None` at end of stream.
async fn read_line_within<R: tokio::io::AsyncBufRead + Unpin>(
    r: &mut R,
    max: usize,
) -> std::io::Result<Option<String>> {
    let mut buf = Vec::new();
    let mut limited = r.take(max as u64 + 1);
    let n = limited.read_until(b'\n', &mut buf).await?;
    if n == 0 {
        return Ok(None);
    }
    if buf.len() > max {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "message too long"));
    }
    String::from_utf8(buf)
        .map(|s| Some(s.trim_end().to_string()))
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "message is not UTF-8"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_shapes_are_stable() {
        let e = Envelope { v: 1, request: Request::Gc { dry_run: true } };
        assert_eq!(serde_json::to_string(&e).unwrap(), r#"{"v":1,"request":"gc","dry_run":true}"#);
        let back: Envelope = serde_json::from_str(r#"{"v":1,"request":"wake"}"#).unwrap();
        assert_eq!(back.request, Request::Wake);
        assert!(serde_json::from_str::<Envelope>(r#"{"v":1,"request":"format_disk"}"#).is_err());
    }

    #[test]
    fn responses_round_trip_with_their_fields_beside_the_tag() {
        use crate::reconcile::{GcItem, GcItemKind, Trigger};
        let pass = PassReport::new(7, Trigger::Cli, chrono::DateTime::UNIX_EPOCH, 30);
        let item = GcItem {
            kind: GcItemKind::Vm,
            name: "hpc-a-1".into(),
            mig: Some("m".into()),
            reason: "r".into(),
        };
        let live =
            Liveness { version: "0.1.0".into(), pid: 9, last_pass: Some(pass.clone()), ..Default::default() };
        let cases = [
            (Response::Ok, r#"{"response":"ok"}"#.to_string()),
            (Response::Error { message: "no".into() }, r#"{"response":"error","message":"no"}"#.to_string()),
            (
                Response::Gc(GcReport::DryRun { would_delete: vec![item.clone()], errors: vec![] }),
                r#"{"response":"gc","dry_run":true,"would_delete":[{"kind":"vm","name":"hpc-a-1","mig":"m","reason":"r"}],"errors":[]}"#.to_string(),
            ),
        ];
        for (response, wire) in cases {
            assert_eq!(serde_json::to_string(&response).unwrap(), wire);
            assert_eq!(serde_json::from_str::<Response>(&wire).unwrap(), response);
        }
        for response in [
            Response::Status(live),
            Response::Pass(pass.clone()),
            Response::Gc(GcReport::Deleted { deleted: vec![item], pass: Box::new(pass) }),
        ] {
            let wire = serde_json::to_string(&response).unwrap();
            assert_eq!(serde_json::from_str::<Response>(&wire).unwrap(), response, "{wire}");
        }
    }

    #[test]
    fn reads_carry_their_query() {
        let e = Envelope { v: 1, request: Request::Read { query: Query::Requests { open_only: true } } };
        let wire = serde_json::to_string(&e).unwrap();
        assert_eq!(wire, r#"{"v":1,"request":"read","query":{"query":"requests","open_only":true}}"#);
        assert_eq!(serde_json::from_str::<Envelope>(&wire).unwrap(), e);
        let r = Response::Rows { rows: serde_json::json!([1]) };
        assert_eq!(serde_json::to_string(&r).unwrap(), r#"{"response":"rows","rows":[1]}"#);
        // The daemon writes reads' answers itself, the client reads their rows unparsed: both are
        // the same wire as the derived serialisation.
        let line = rows_line(br#"[1,{"a":"b"}]"#);
        let line = std::str::from_utf8(&line).unwrap();
        assert!(line.ends_with('\n'), "{line}");
        assert_eq!(
            serde_json::from_str::<Response>(line).unwrap(),
            Response::Rows { rows: serde_json::json!([1, {"a": "b"}]) }
        );
        assert_eq!(rows_text(line), Some(r#"[1,{"a":"b"}]"#));
        assert_eq!(rows_text(r#"{"response":"error","message":"no"}"#), None);
        assert_eq!(rows_text(r#"{"response":"status","rows":[1]}"#), None);
        assert_eq!(rows_text("not json"), None);
    }

    #[test]
    fn only_reads_are_unprivileged() {
        assert!(Request::Read { query: Query::Nodes }.is_read());
        assert!(!Request::Read { query: Query::Nodes }.is_mutating());
        assert!(!Request::Status.is_read());
        assert!(!Request::Status.is_mutating());
        assert!(!Request::Gc { dry_run: true }.is_mutating());
        assert!(Request::Gc { dry_run: false }.is_mutating());
        assert!(Request::Wake.is_mutating());
        assert!(Request::Reconcile.is_mutating());
    }
}
