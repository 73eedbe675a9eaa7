//! The Slurm hooks (`resume`, `suspend`, `resume-fail`): validate, record durably, wake the daemon, exit.
//!
//! slurmctld runs these with fds 0–2 closed, most signals blocked, an almost empty environment, and does
//! not log their output (docs/slurm-facts.md, "How slurmctld runs the hooks"). So the first thing any invocation does is
//! [`prepare_process`]; a hook logs to the configured log file itself; and exit 0 means exactly one thing:
//! the request is committed to SQLite. A hook never talks to GCE and never waits for the daemon: if the
//! daemon is down the request stays in the inbox and is carried out when it starts.

use crate::config::Config;
use crate::hook_io::{log_line, read_at_most, received_now};
use crate::model::EventKind;
use crate::model::HookKind;
use crate::store::{HookNote, Store};
use crate::{hostlist, protocol, slurm};
use std::path::Path;
use std::time::Duration;

pub use crate::hook_io::MAX_RESUME_FILE;

/// How long a hook waits for the daemon to take its wake-up call (it never waits for the work).
const WAKE_TIMEOUT: Duration = Duration::from_millis(250);

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
    /// `None` when every node went to a delegate program (the call is then an event only).
    pub inbox_id: Option<i64>,
    /// Our nodes, recorded in the inbox.
    pub nodes: usize,
    /// Nodes that are not ours handed to `[slurm] delegate_*`: how many, and to what.
    pub delegated: Option<(usize, std::path::PathBuf)>,
    pub jobs: usize,
    pub daemon_woken: bool,
    /// What was odd about the call (resume file missing or corrupt, a delegate program that could not
    /// be started or given the resume file), also recorded as an event.
    pub note: Option<String>,
}

/// Runs one hook: the whole job of `slurm-dws-resume HOSTLIST` and friends. `config_fallback` says
/// why `cfg` is the copy of the last accepted config rather than the config file (recorded as a
/// `config_fallback` event with the call, and sent to syslog with the log line).
pub async fn run(
    cfg: &Config,
    kind: HookKind,
    hostlist_arg: &str,
    config_fallback: Option<&str>,
) -> Result<Recorded, HookError> {
    #[allow(clippy::disallowed_methods)] // an edge: the hook's log line says how long it took
    let started = std::time::Instant::now();
    let result = record(cfg, kind, hostlist_arg, config_fallback).await;
    // The argument is quoted with control characters escaped: one call, one log line.
    let hostlist_arg = &hostlist::escape_control(hostlist_arg);
    let line = match &result {
        Ok(r) => {
            let recorded = match r.inbox_id {
                Some(id) => format!(
                    "{}, {} recorded as inbox entry {id}",
                    crate::model::count_of(r.nodes, "node"),
                    crate::model::count_of(r.jobs, "job"),
                ),
                None => "no node of slurm-dws's".to_string(),
            };
            let delegated = match &r.delegated {
                Some((n, program)) => format!(
                    "; {} that are not slurm-dws's handed to {}",
                    crate::model::count_of(*n, "node"),
                    program.display()
                ),
                None => String::new(),
            };
            let daemon = match (r.inbox_id, r.daemon_woken) {
                (None, _) => "",
                (Some(_), true) => "; daemon woken",
                (Some(_), false) => "; daemon not running: the request waits for it",
            };
            format!(
                "{kind} {hostlist_arg}: {recorded}{delegated} in {:.1} ms{daemon}",
                started.elapsed().as_secs_f64() * 1e3,
            ) + &r.note.as_deref().map(|n| format!("; note: {n}")).unwrap_or_default()
        }
        Err(e) => format!("{kind} {hostlist_arg}: FAILED (exit {}): {e}", e.exit_code()),
    };
    let line = match config_fallback {
        Some(why) => format!("{line}; CONFIG FALLBACK: {why}"),
        None => line,
    };
    log_line(&cfg.log_file, kind, &line);
    // What an admin must see even where the hook log is not looked at.
    match (&result, config_fallback) {
        (Err(_), _) => crate::syslog::send(crate::syslog::Severity::Err, &tag(kind), &line),
        (Ok(_), Some(_)) => crate::syslog::send(crate::syslog::Severity::Warning, &tag(kind), &line),
        (Ok(_), None) => {}
    }
    result
}

/// The program name a hook logs as: `slurm-dws-resume`, `slurm-dws-suspend`, `slurm-dws-resume-fail`.
pub fn tag(kind: HookKind) -> String {
    format!("slurm-dws-{}", kind.as_str().replace('_', "-"))
}

async fn record(
    cfg: &Config,
    kind: HookKind,
    hostlist_arg: &str,
    config_fallback: Option<&str>,
) -> Result<Recorded, HookError> {
    let shown = hostlist::escape_control(hostlist_arg);
    let nodes = hostlist::expand(hostlist_arg)
        .map_err(|e| HookError::BadInput(format!("bad hostlist '{shown}': {e}")))?;
    if nodes.is_empty() {
        return Err(HookError::BadInput(format!("hostlist '{shown}' names no node")));
    }
    let resume_file = match kind {
        HookKind::Resume => std::env::var_os("SLURM_RESUME_FILE").map(std::path::PathBuf::from),
        _ => None,
    };
    let (jobs, mut note) = match kind {
        HookKind::Resume => read_resume_file(resume_file.as_deref()),
        _ => (Vec::new(), None),
    };
    let mut notes: Vec<(EventKind, Vec<String>, String)> = Vec::new();
    if let Some(why) = config_fallback {
        notes.push((EventKind::ConfigFallback, nodes.clone(), format!("{kind} hook: {why}")));
    }
    if let Some(n) = &note {
        notes.push((EventKind::ResumeFile, Vec::new(), n.clone()));
    }
    // Nodes that are not ours go to the delegate program when there is one (before the store is
    // opened: the supervisor is forked from a process with no database threads yet).
    let mut to_record = Some(hostlist_arg.to_string());
    let mut ours = nodes.len();
    let mut delegated = None;
    if let Some(program) = cfg.slurm.delegate(kind) {
        let (mine, others) = crate::delegate::split(&crate::naming::Naming::new(cfg), nodes);
        if !others.is_empty() {
            match crate::delegate::hand_off(cfg, kind, program, &others, resume_file.as_deref()) {
                Ok(h) => {
                    let mut message = format!("{} handed to {} ({kind})", h.hostlist, program.display());
                    if let Some(n) = h.note {
                        message.push_str(&format!("; {n}"));
                        note = Some(note.map_or(n.clone(), |o| format!("{o}; {n}")));
                    }
                    ours = mine.len();
                    to_record = (!mine.is_empty()).then(|| hostlist::compress(&mine));
                    delegated = Some((others.len(), program.to_path_buf()));
                    notes.push((EventKind::Delegated, others, message));
                }
                Err(e) => {
                    // As without a delegate: the daemon reports the nodes and sets them DOWN.
                    let message = format!(
                        "{} could not be handed to {} ({kind}): {e}; they are set DOWN as nodes that are not slurm-dws's",
                        hostlist::compress(&others),
                        program.display()
                    );
                    note = Some(note.map_or(message.clone(), |o| format!("{o}; {message}")));
                    notes.push((EventKind::DelegateFailed, others, message));
                }
            }
        }
    }
    let store = Store::open_for_hook(&cfg.state_dir)
        .await
        .map_err(|e| store_failure(&cfg.state_dir, e.to_string()))?;
    let hook_notes: Vec<HookNote> =
        notes.iter().map(|(k, n, m)| HookNote { kind: k.as_str(), nodes: n, message: m }).collect();
    let inbox_id = store
        .record_hook_call(kind, to_record.as_deref(), &jobs, &hook_notes, received_now())
        .await
        .map_err(|e| store_failure(&cfg.state_dir, format!("recording the request: {e}")))?;
    store.close().await;
    let daemon_woken = inbox_id.is_some()
        && matches!(
            protocol::call(&cfg.socket, protocol::Request::Wake, WAKE_TIMEOUT).await,
            Ok(protocol::Response::Ok)
        );
    Ok(Recorded { inbox_id, nodes: ours, delegated, jobs: jobs.len(), daemon_woken, note })
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
