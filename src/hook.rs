//! The Slurm hooks (`resume`, `suspend`, `resume-fail`): validate, record durably, wake the daemon, exit.
//!
//! slurmctld runs these with fds 0–2 closed, most signals blocked, an almost empty environment, and does
//! not log their output (docs/slurm-facts.md, "How slurmctld runs the hooks"). So the first thing any invocation does is
//! [`prepare_process`]; a hook logs to the configured log file itself; and exit 0 means exactly one thing:
//! the request is committed to SQLite. A hook never talks to GCE and never waits for the daemon: if the
//! daemon is down the request stays in the inbox and is carried out when it starts.

use crate::config::Config;
use crate::model::HookKind;
use crate::store::Store;
use crate::{hostlist, protocol, slurm};
use chrono::Utc;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::Duration;

/// How long a hook waits for the daemon to take its wake-up call (it never waits for the work).
const WAKE_TIMEOUT: Duration = Duration::from_millis(250);

/// When slurmctld's call reached us: the time stamped on the inbox row and the log line.
#[allow(clippy::disallowed_methods)] // an edge: a hook records when it was called
fn received_now() -> chrono::DateTime<Utc> {
    Utc::now()
}

/// Why a hook failed. `BadInput` exits 2 (nothing recorded); `Runtime` exits 1.
#[derive(Debug, thiserror::Error)]
pub enum HookError {
    #[error("{0}")]
    BadInput(String),
    #[error("{0}")]
    Runtime(String),
}

impl HookError {
    pub fn exit_code(&self) -> u8 {
        match self {
            HookError::BadInput(_) => 2,
            HookError::Runtime(_) => 1,
        }
    }
}

/// Makes the process safe to run under slurmctld: reopens /dev/null on closed fds 0–2 (else the first
/// file opened — the database — would become stdout), and clears the inherited blocked-signal mask (else
/// SIGTERM never reaches this process or anything it starts). Call it first, before anything opens a file.
pub fn prepare_process() {
    loop {
        // open() returns the lowest free descriptor: this fills 0, 1, 2 in turn if they are closed.
        let fd = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR) };
        if fd < 0 {
            break;
        }
        if fd > 2 {
            unsafe { libc::close(fd) };
            break;
        }
    }
    let empty = nix::sys::signal::SigSet::empty();
    let _ = nix::sys::signal::sigprocmask(nix::sys::signal::SigmaskHow::SIG_SETMASK, Some(&empty), None);
}

/// The hook a program name stands for: `slurm-dws-resume` etc. (slurm.conf cannot pass arguments).
pub fn kind_from_argv0(argv0: &str) -> Option<HookKind> {
    let name = Path::new(argv0).file_name()?.to_str()?;
    match name {
        "slurm-dws-resume" => Some(HookKind::Resume),
        "slurm-dws-suspend" => Some(HookKind::Suspend),
        "slurm-dws-resume-fail" => Some(HookKind::ResumeFail),
        _ => None,
    }
}

/// What a hook recorded.
#[derive(Debug)]
pub struct Recorded {
    pub inbox_id: i64,
    pub nodes: usize,
    pub jobs: usize,
    pub daemon_woken: bool,
    /// What was odd about the call (resume file missing or corrupt), also recorded as an event.
    pub note: Option<String>,
}

/// Runs one hook: the whole job of `slurm-dws-resume HOSTLIST` and friends.
pub async fn run(cfg: &Config, kind: HookKind, hostlist_arg: &str) -> Result<Recorded, HookError> {
    #[allow(clippy::disallowed_methods)] // an edge: the hook's log line says how long it took
    let started = std::time::Instant::now();
    let result = record(cfg, kind, hostlist_arg).await;
    // The argument is quoted with control characters escaped: one call, one log line.
    let hostlist_arg = &hostlist::escape_control(hostlist_arg);
    let line = match &result {
        Ok(r) => {
            format!(
                "{} {}: {}, {} recorded as inbox entry {} in {:.1} ms; daemon {}",
                kind,
                hostlist_arg,
                crate::model::count_of(r.nodes, "node"),
                crate::model::count_of(r.jobs, "job"),
                r.inbox_id,
                started.elapsed().as_secs_f64() * 1e3,
                if r.daemon_woken { "woken" } else { "not running: the request waits for it" }
            ) + &r.note.as_deref().map(|n| format!("; note: {n}")).unwrap_or_default()
        }
        Err(e) => format!("{kind} {hostlist_arg}: FAILED (exit {}): {e}", e.exit_code()),
    };
    log_line(&cfg.log_file, kind, &line);
    result
}

async fn record(cfg: &Config, kind: HookKind, hostlist_arg: &str) -> Result<Recorded, HookError> {
    let shown = hostlist::escape_control(hostlist_arg);
    let nodes = hostlist::expand(hostlist_arg)
        .map_err(|e| HookError::BadInput(format!("bad hostlist '{shown}': {e}")))?;
    if nodes.is_empty() {
        return Err(HookError::BadInput(format!("hostlist '{shown}' names no node")));
    }
    let (jobs, note) = match kind {
        HookKind::Resume => read_resume_file(std::env::var_os("SLURM_RESUME_FILE").as_deref().map(Path::new)),
        _ => (Vec::new(), None),
    };
    let store = Store::open_for_hook(&cfg.state_dir)
        .await
        .map_err(|e| store_failure(&cfg.state_dir, e.to_string()))?;
    let note_ref = note.as_deref().map(|m| (crate::model::EventKind::ResumeFile.as_str(), m));
    let inbox_id = store
        .record_hook(kind, hostlist_arg, &jobs, note_ref, received_now())
        .await
        .map_err(|e| store_failure(&cfg.state_dir, format!("recording the request: {e}")))?;
    store.close().await;
    let daemon_woken = matches!(
        protocol::call(&cfg.socket, protocol::Request::Wake, WAKE_TIMEOUT).await,
        Ok(protocol::Response::Ok)
    );
    Ok(Recorded { inbox_id, nodes: nodes.len(), jobs: jobs.len(), daemon_woken, note })
}

/// A store failure, with the likeliest cause said when SQLite's words do not: on a full file
/// system SQLite often reports "disk I/O error" (it could not grow the WAL index).
fn store_failure(state_dir: &Path, what: String) -> HookError {
    let free = nix::sys::statvfs::statvfs(state_dir).map(|s| s.blocks_available() * s.fragment_size()).ok();
    match free {
        Some(bytes) if bytes < 256 << 10 => HookError::Runtime(format!(
            "{what} (the file system holding {} is full: {} KiB free)",
            state_dir.display(),
            bytes >> 10
        )),
        _ => HookError::Runtime(what),
    }
}

/// Reads SLURM_RESUME_FILE now (it vanishes when the hook exits). Missing or corrupt → no jobs, and a
/// note for the event log saying so; a job whose node list is malformed is dropped with a note.
pub fn read_resume_file(path: Option<&Path>) -> (Vec<(u32, String)>, Option<String>) {
    let Some(path) = path else {
        return (Vec::new(), Some("SLURM_RESUME_FILE not set: the nodes are resumed without a job".into()));
    };
    let bytes = match read_at_most(path, MAX_RESUME_FILE) {
        Ok(b) if b.len() > MAX_RESUME_FILE => {
            return (
                Vec::new(),
                Some(format!(
                "SLURM_RESUME_FILE {} is larger than {} MiB: not read; the nodes are resumed without a job",
                path.display(),
                MAX_RESUME_FILE >> 20
            )),
            )
        }
        Ok(b) => b,
        Err(e) => {
            return (
                Vec::new(),
                Some(format!(
                    "SLURM_RESUME_FILE {}: {e}: the nodes are resumed without a job",
                    path.display()
                )),
            )
        }
    };
    match slurm::resume_file::parse(&bytes) {
        Ok(file) => {
            let mut bad = Vec::new();
            let jobs = file
                .jobs
                .into_iter()
                .filter(|j| {
                    let ok = hostlist::expand(&j.nodes).is_ok();
                    if !ok {
                        let shown = hostlist::escape_control(&j.nodes);
                        bad.push(format!("job {} has a bad node list '{shown}'", j.job_id));
                    }
                    ok
                })
                .map(|j| (j.job_id, j.nodes))
                .collect();
            let note = (!bad.is_empty())
                .then(|| format!("SLURM_RESUME_FILE: {}: those nodes have no job", bad.join("; ")));
            (jobs, note)
        }
        Err(e) => (
            Vec::new(),
            Some(format!("SLURM_RESUME_FILE is corrupt ({e}): the nodes are resumed without a job")),
        ),
    }
}

/// The largest resume file read. Slurm writes ~100 bytes per job: 32 MiB is far beyond any real
/// one, and a path to something endless (a device, a FIFO kept open) cannot hang the hook.
pub const MAX_RESUME_FILE: usize = 32 << 20;

/// Reads up to `limit + 1` bytes of a regular file (anything else is an error, so a device or a
/// FIFO cannot block or flood the hook).
fn read_at_most(path: &Path, limit: usize) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    let mut bytes = Vec::new();
    file.take(limit as u64 + 1).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Appends one line to the hook log (stdout and stderr go nowhere under slurmctld).
fn log_line(path: &Path, kind: HookKind, line: &str) {
    let stamp = received_now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let text =
        format!("{stamp} slurm-dws-{}[{}]: {line}\n", kind.as_str().replace('_', "-"), std::process::id());
    let _ = std::io::stderr().write_all(text.as_bytes());
    if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).mode(0o640).open(path) {
        let _ = f.write_all(text.as_bytes());
    }
}
