//! The daemon's Unix socket: peer-credential checks, one request per connection, forwarded to the pass loop.
//!
//! Anyone on the host may ask for status (liveness, like `sinfo`); reads of the store (what `nodes`,
//! `requests`, `migs`, `events`, `explain` and `status` show, for a caller who cannot open the database
//! file) are answered for root, the daemon's own user, the service user and members of the
//! `daemon.readers` group; a hook's wake-up, `reconcile` and `gc` change things and are accepted only
//! from root, the daemon's own user and the service user. Who asks is SO_PEERCRED, which the kernel
//! fills in: it cannot be forged by the client.

use super::{Command, Liveness};
use crate::protocol::{self, Envelope, Query, Request, Response};
use crate::store::{Store, StoreError};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// How long the accept loop pauses after a failed accept (e.g. out of file descriptors).
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// How long one client may take to send its request.
const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// Binds the socket, replacing a stale one (a socket file nobody listens on) but refusing to steal the
/// socket of a daemon that is running.
pub(super) fn bind(path: &Path) -> std::io::Result<UnixListener> {
    if path.exists() {
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AddrInUse,
                "another slurm-dws daemon is listening on this socket",
            ));
        }
        std::fs::remove_file(path)?;
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let listener = UnixListener::bind(path)?;
    // Anyone may connect; what they may ask is decided per request from their credentials.
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666))?;
    Ok(listener)
}

/// The uids allowed to send mutating requests: root, ourselves, and the service user if it exists.
pub(super) fn allowed_uids(service_user: Option<&str>) -> Vec<u32> {
    let mut uids = vec![0, nix::unistd::geteuid().as_raw()];
    if let Some(user) = service_user {
        if let Ok(Some(u)) = nix::unistd::User::from_name(user) {
            uids.push(u.uid.as_raw());
        }
    }
    uids.sort_unstable();
    uids.dedup();
    uids
}

/// Accepts clients until `stopping` is cancelled, each handled in a task of `handlers` (so the daemon can
/// wait for the ones in flight when it stops).
pub(super) async fn serve(
    listener: UnixListener,
    tx: mpsc::Sender<Command>,
    liveness: Arc<Mutex<Liveness>>,
    access: Access,
    store: Store,
    stopping: CancellationToken,
    handlers: TaskTracker,
) {
    loop {
        let accepted = tokio::select! {
            _ = stopping.cancelled() => return,
            a = listener.accept() => a,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of file descriptors (EMFILE/ENFILE) or memory: the error repeats until a
                // client goes away, so retrying at once would spin a CPU. Pause; clients wait
                // in the listen backlog meanwhile.
                tracing::warn!(error = %e, "socket: cannot accept a client; retrying in 100 ms");
                tokio::select! {
                    _ = stopping.cancelled() => return,
                    _ = tokio::time::sleep(ACCEPT_PAUSE) => continue,
                }
            }
        };
        let tx = tx.clone();
        let liveness = liveness.clone();
        let access = access.clone();
        let store = store.clone();
        let stopping = stopping.clone();
        handlers.spawn(async move {
            if let Err(e) = handle(stream, tx, liveness, &access, &store, stopping).await {
                tracing::debug!(error = %e, "socket client");
            }
        });
    }
}

/// Who may do what over the socket.
#[derive(Debug, Clone)]
pub(super) struct Access {
    /// Root, the daemon's own user, the service user: everything.
    pub allowed: Vec<u32>,
    /// `daemon.readers`: its members may read the store.
    pub readers: Option<String>,
}

impl Access {
    fn may_read(&self, uid: u32, gid: u32) -> bool {
        self.allowed.contains(&uid) || self.readers.as_deref().is_some_and(|group| is_member(group, uid, gid))
    }

    fn refusal(&self, uid: u32) -> String {
        match &self.readers {
            Some(g) => format!(
                "permission denied: uid {uid} may not read the state (root, the service user and members of \
                 group {g} may)"
            ),
            None => format!(
                "permission denied: uid {uid} may not read the state (root and the service user may; \
                 daemon.readers names a group that may too)"
            ),
        }
    }
}

/// Whether the peer (`uid`, primary group `gid`) is a member of `group`: its primary group, or a
/// member listed in the group database. Looked up per request, so a change of membership counts at
/// once.
fn is_member(group: &str, uid: u32, gid: u32) -> bool {
    let Ok(Some(g)) = nix::unistd::Group::from_name(group) else { return false };
    if g.gid.as_raw() == gid {
        return true;
    }
    match nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)) {
        Ok(Some(user)) => user.gid == g.gid || g.mem.contains(&user.name),
        _ => false,
    }
}

async fn handle(
    stream: UnixStream,
    tx: mpsc::Sender<Command>,
    liveness: Arc<Mutex<Liveness>>,
    access: &Access,
    store: &Store,
    stopping: CancellationToken,
) -> std::io::Result<()> {
    let cred = stream.peer_cred()?;
    let (uid, gid) = (cred.uid(), cred.gid());
    let allowed = &access.allowed;
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    // A client still sending its request when the daemon stops is answered, not cut off.
    let request = tokio::select! {
        r = tokio::time::timeout(READ_TIMEOUT, protocol::read_line(&mut reader)) => Some(r),
        _ = stopping.cancelled() => None,
    };
    let response = match request {
        None => Response::Error { message: SHUTTING_DOWN.into() },
        Some(Err(_)) => Response::Error { message: "no request within 5 s".into() },
        Some(Ok(Err(e))) => Response::Error { message: format!("bad request: {e}") },
        Some(Ok(Ok(None))) => return Ok(()),
        Some(Ok(Ok(Some(line)))) => match serde_json::from_str::<Envelope>(&line) {
            Err(e) => Response::Error { message: format!("bad request: {e}") },
            Ok(env) if env.v != protocol::VERSION => Response::Error {
                message: format!(
                    "protocol version {} not supported (daemon speaks {})",
                    env.v,
                    protocol::VERSION
                ),
            },
            Ok(env) if env.request.is_mutating() && !allowed.contains(&uid) => {
                tracing::warn!(uid, request = ?env.request, "refused: not root or the service user");
                Response::Error {
                    message: format!("permission denied: uid {uid} may only read status (root or the service user may change things)"),
                }
            }
            Ok(env) if env.request.is_read() && !access.may_read(uid, gid) => {
                tracing::warn!(uid, "refused a read: not root, the service user or a reader");
                Response::Error { message: access.refusal(uid) }
            }
            Ok(Envelope { request: Request::Read { query }, .. }) => {
                let out = match read_state(store, query).await {
                    Ok(rows) => protocol::rows_line(&rows),
                    Err(e) => answer_line(&Response::Error { message: format!("reading the state: {e}") }),
                };
                return write.write_all(&out).await;
            }
            Ok(Envelope { request: Request::Repair { nodes, behavior, description }, .. }) => {
                ask_repair(store, &tx, &nodes, &behavior, &description).await
            }
            Ok(env) => answer(env.request, &tx, &liveness).await,
        },
    };
    write.write_all(&answer_line(&response)).await
}

/// An answer as its line on the socket.
fn answer_line(response: &Response) -> Vec<u8> {
    let mut out = serde_json::to_vec(response).unwrap_or_default();
    out.push(b'\n');
    out
}

/// Answers a read from the store (SQLite lets it run beside a pass): the rows' JSON text, written
/// straight from the store's types (30 days of usage at 10,000 nodes is tens of megabytes of it; a
/// `serde_json::Value` of it would be several times that in the daemon's memory).
async fn read_state(store: &Store, query: Query) -> Result<Vec<u8>, String> {
    fn rows<T: serde::Serialize>(r: Result<T, StoreError>) -> Result<Vec<u8>, String> {
        r.map_err(|e| e.to_string()).and_then(|v| serde_json::to_vec(&v).map_err(|e| e.to_string()))
    }
    match query {
        Query::Nodes => rows(store.nodes().await),
        Query::Node { name } => match store.node(&name).await {
            Err(StoreError::NotFound { .. }) => Ok(b"null".to_vec()),
            r => rows(r),
        },
        Query::Requests { open_only } => rows(store.requests(open_only).await),
        Query::Request { id } => rows(store.request(id).await),
        Query::Migs { live_only } => rows(store.migs(live_only).await),
        Query::Events { node, since, limit } => rows(store.events(node.as_deref(), since, limit).await),
        Query::Backoffs => rows(store.backoffs().await),
        Query::Meta { key } => rows(store.meta(&key).await),
        Query::OutboxDepth => rows(store.pending_outbox().await.map(|o| o.len())),
        Query::InboxDepth => rows(store.inbox_depth().await),
        Query::StepFailures => rows(store.step_failures().await),
        Query::RequestWaits => rows(store.request_waits().await),
        Query::Repair { node } => rows(store.repair(&node).await),
        Query::UsageSpans { since, until } => rows(store.usage_spans(since, until).await.map(|mut u| {
            // The reader cannot read state_dir: the daemon reads the catalog cache for it.
            let dir = store.path().parent().unwrap_or(std::path::Path::new("/"));
            u.catalog = crate::usage::pricing::read_catalog_for_reader(dir);
            u
        })),
    }
}

/// Records a repair ask in the store (durable before the answer) and wakes the pass that carries it
/// out. Answers the nodes recorded (a node whose repair is open already is the same repair).
async fn ask_repair(
    store: &Store,
    tx: &mpsc::Sender<Command>,
    nodes: &[String],
    behavior: &str,
    description: &str,
) -> Response {
    let Ok(behavior) = behavior.parse::<crate::model::FaultBehavior>() else {
        return Response::Error { message: format!("unknown fault behaviour '{behavior}'") };
    };
    #[allow(clippy::disallowed_methods)] // an edge: the ask is recorded when it arrives
    let now = chrono::Utc::now();
    match store.ask_repair(nodes, behavior, description, now).await {
        Ok(recorded) => {
            let _ = tx.try_send(Command::Wake); // a full queue already holds a wake-up
            Response::Rows { rows: serde_json::json!({ "recorded": recorded }) }
        }
        Err(e) => Response::Error { message: format!("recording the repair: {e}") },
    }
}

/// What a client is told when the pass loop that would answer it has stopped.
const SHUTTING_DOWN: &str = "daemon is shutting down";

async fn answer(request: Request, tx: &mpsc::Sender<Command>, liveness: &Arc<Mutex<Liveness>>) -> Response {
    let gone = || Response::Error { message: "daemon is shutting down".into() };
    match request {
        Request::Wake => match tx.try_send(Command::Wake) {
            // A full queue already holds wake-ups: this one is served by the same pass.
            Ok(()) | Err(mpsc::error::TrySendError::Full(_)) => Response::Ok,
            Err(_) => gone(),
        },
        Request::Status => {
            let l = liveness.lock().unwrap().clone();
            Response::Status(l)
        }
        Request::Reconcile => {
            let (reply, rx) = oneshot::channel();
            if tx.send(Command::Reconcile(reply)).await.is_err() {
                return gone();
            }
            match rx.await {
                Ok(r) => Response::Pass(r),
                Err(_) => gone(),
            }
        }
        Request::Read { .. } | Request::Repair { .. } => {
            Response::Error { message: "answered by the socket server".into() }
        }
        Request::Gc { dry_run } => {
            let (reply, rx) = oneshot::channel();
            if tx.send(Command::Gc { dry_run, reply }).await.is_err() {
                return gone();
            }
            match rx.await {
                Ok(report) => Response::Gc(report),
                Err(_) => gone(),
            }
        }
    }
}
