//! Handing the nodes of a hook call that are not slurm-dws's to another program (`[slurm] delegate_*`).
//!
//! Slurm has one ResumeProgram (and one SuspendProgram, one ResumeFailProgram) per cluster. When
//! slurm-dws runs beside another power-saving program — slurm-gcp's `resume.py` for the nodesets it
//! still manages — the hook splits its hostlist: our nodes are recorded as usual, and the others go,
//! in the same call, to the program configured for that hook, in the shape slurmctld gave them to
//! us: argv[1] a hostlist of only those nodes, the same environment, and `SLURM_RESUME_FILE`
//! pointing at a copy of the resume file in `state_dir/delegate/` (slurmctld's file is gone as soon
//! as our hook exits, docs/slurm-facts.md).
//!
//! The hook cannot wait for the program (hooks return in milliseconds). It starts a supervisor —
//! this binary in its hidden `run-delegate` mode — detached from slurmctld: forked twice (nobody
//! has to reap it), in a session of its own (24.11's slurmscriptd kills the hook's process group
//! when the hook exits, docs/slurm-facts.md), stdin and stdout on `/dev/null`, stderr on the hook
//! log. The supervisor runs the program, copies its output into the hook log, records how it ended
//! as an event (`delegated`, or `delegate_failed` with the exit status and the tail of its stderr)
//! and removes the copy of the resume file.

use crate::config::Config;
use crate::model::{EventKind, HookKind};
use crate::naming::Naming;
use crate::store::Store;
use std::collections::VecDeque;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The directory under `state_dir` holding copies of resume files while their program runs.
pub const DIR: &str = "delegate";

/// How many lines of the program's stderr the end-of-run event keeps.
const STDERR_TAIL_LINES: usize = 5;
/// The longest line of the program's output copied (a longer one is cut, with `...`).
const MAX_LINE: usize = 2000;

/// Splits a hook's nodes into (ours, not ours), each in the hook's order.
pub fn split(naming: &Naming, nodes: Vec<String>) -> (Vec<String>, Vec<String>) {
    nodes.into_iter().partition(|n| naming.is_ours(n))
}

/// A delegation started by a hook.
#[derive(Debug)]
pub struct HandedOff {
    /// The hostlist given to the program as argv[1].
    pub hostlist: String,
    /// The copy of `SLURM_RESUME_FILE` the program reads, when there is one.
    pub resume_file: Option<PathBuf>,
    /// Why the program does not get a copy of the resume file although the hook had one.
    pub note: Option<String>,
}

/// Starts `program` for `nodes` (not ours), detached, through a supervisor; returns at once.
/// `resume_file` is the hook's `SLURM_RESUME_FILE`, copied first. An error means nothing was started.
pub fn hand_off(
    cfg: &Config,
    kind: HookKind,
    program: &Path,
    nodes: &[String],
    resume_file: Option<&Path>,
) -> Result<HandedOff, String> {
    let hostlist = crate::hostlist::compress(nodes);
    let (copy, note) = match resume_file {
        Some(original) => match copy_resume_file(&cfg.state_dir, original) {
            Ok(copy) => (Some(copy), None),
            // The program still gets slurmctld's path, valid while slurmctld keeps the file.
            Err(e) => {
                (None, Some(format!("SLURM_RESUME_FILE could not be copied ({e}): it gets slurmctld's")))
            }
        },
        None => (None, None),
    };
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let mut cmd = Command::new(exe);
    cmd.arg0("slurm-dws")
        .arg("run-delegate")
        .arg("--kind")
        .arg(kind.as_str())
        .arg("--state-dir")
        .arg(&cfg.state_dir)
        .arg("--log-file")
        .arg(&cfg.log_file)
        .arg("--hook-pid")
        .arg(std::process::id().to_string())
        .arg(program)
        .arg(&hostlist)
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    if let Some(copy) = &copy {
        cmd.arg("--resume-file").arg(copy).env("SLURM_RESUME_FILE", copy);
    }
    let log = std::fs::OpenOptions::new().create(true).append(true).mode(0o640).open(&cfg.log_file);
    cmd.stderr(log.map(Stdio::from).unwrap_or_else(|_| Stdio::null()));
    // SAFETY: between fork and exec only async-signal-safe calls (fork, setsid, _exit).
    unsafe {
        cmd.pre_exec(|| {
            // Fork again and let the middle process exit at once: the supervisor is nobody's child
            // that anybody must reap, and it is not a process-group leader, so setsid succeeds.
            match libc::fork() {
                -1 => return Err(std::io::Error::last_os_error()),
                0 => {}
                _ => libc::_exit(0),
            }
            if libc::setsid() == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let started = cmd.spawn().and_then(|mut middle| middle.wait());
    match started {
        Ok(status) if status.success() => Ok(HandedOff { hostlist, resume_file: copy, note }),
        Ok(status) => {
            remove(copy.as_deref());
            Err(format!("the supervisor could not be started ({status})"))
        }
        Err(e) => {
            remove(copy.as_deref());
            Err(format!("the supervisor could not be started: {e}"))
        }
    }
}

fn remove(path: Option<&Path>) {
    if let Some(p) = path {
        let _ = std::fs::remove_file(p);
    }
}

/// Copies the resume file to a new file `state_dir/delegate/resume-PID-NANOS.json` (0600).
fn copy_resume_file(state_dir: &Path, original: &Path) -> std::io::Result<PathBuf> {
    let bytes = crate::hook_io::read_at_most(original, crate::hook_io::MAX_RESUME_FILE)?;
    if bytes.len() > crate::hook_io::MAX_RESUME_FILE {
        return Err(std::io::Error::other("larger than the largest resume file read"));
    }
    let dir = state_dir.join(DIR);
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&dir)?;
    #[allow(clippy::disallowed_methods)] // an edge: a unique name for the copy
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let path = dir.join(format!("resume-{}-{nanos}.json", std::process::id()));
    let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&path)?;
    f.write_all(&bytes)?;
    Ok(path)
}

/// How old a file in `state_dir/delegate/` must be before the daemon removes it: far longer than any
/// program runs, so only what a killed supervisor (a reboot) left behind goes.
pub const STALE_AFTER: std::time::Duration = std::time::Duration::from_secs(7 * 86_400);

/// Removes the files in `state_dir/delegate/` last modified before `before`; returns how many.
pub fn prune_stale(state_dir: &Path, before: std::time::SystemTime) -> usize {
    let Ok(entries) = std::fs::read_dir(state_dir.join(DIR)) else { return 0 };
    entries
        .flatten()
        .filter(|e| e.metadata().is_ok_and(|m| m.is_file() && m.modified().is_ok_and(|t| t < before)))
        .filter(|e| std::fs::remove_file(e.path()).is_ok())
        .count()
}

/// The arguments of the hidden `run-delegate` mode (given by [`hand_off`], not by people).
#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// The hook the nodes came from: resume, suspend, resume_fail.
    #[arg(long)]
    pub kind: HookKind,
    /// Where the store is (the event is recorded there).
    #[arg(long)]
    pub state_dir: PathBuf,
    /// The hook log (the program's output is copied there).
    #[arg(long)]
    pub log_file: PathBuf,
    /// The copy of the resume file to remove when the program ends.
    #[arg(long)]
    pub resume_file: Option<PathBuf>,
    /// The hook that started this: its hand-off event is committed when it exits, and the end of
    /// the program is recorded after it.
    #[arg(long)]
    pub hook_pid: Option<i32>,
    /// The program.
    pub program: PathBuf,
    /// Its argv[1].
    pub hostlist: String,
}

/// How the program ended.
#[derive(Debug)]
enum Ended {
    NotStarted(std::io::Error),
    Exited(std::process::ExitStatus),
}

/// The supervisor: runs the program, waits for it, records how it ended. Runs detached, so its
/// outcome goes to the hook log and the store; returns whether the program exited 0 and that was
/// recorded.
///
/// The program's stdout and stderr are files (`state_dir/delegate/PID.stdout`, `.stderr`), not
/// pipes: a program that leaves something running in the background with them open (slurm-gcp's
/// wrapper starts `resume.py` with `&`) neither keeps the supervisor waiting nor gets EPIPE when it
/// ends. When the program exits they are copied into the hook log, line by line, and removed.
pub fn supervise(a: &RunArgs) -> bool {
    #[allow(clippy::disallowed_methods)] // an edge: how long the program ran
    let started = std::time::Instant::now();
    let label = format!("{} {} ({})", a.program.display(), a.hostlist, a.kind);
    let dir = a.state_dir.join(DIR);
    let _ = std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&dir);
    let out_path = dir.join(format!("{}.stdout", std::process::id()));
    let err_path = dir.join(format!("{}.stderr", std::process::id()));
    let output = |p: &Path| -> Stdio {
        std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .mode(0o600)
            .open(p)
            .map(Stdio::from)
            .unwrap_or_else(|_| Stdio::null())
    };
    let ended = match Command::new(&a.program)
        .arg(&a.hostlist)
        .stdin(Stdio::null())
        .stdout(output(&out_path))
        .stderr(output(&err_path))
        .spawn()
        .and_then(|mut child| child.wait())
    {
        Ok(status) => Ended::Exited(status),
        Err(e) => Ended::NotStarted(e),
    };
    remove(a.resume_file.as_deref());
    let name = format!("delegate-{}", a.kind);
    copy_lines(&out_path, &a.log_file, &name, "stdout");
    let tail = copy_lines(&err_path, &a.log_file, &name, "stderr");
    let secs = started.elapsed().as_secs_f64();
    let (kind, mut message) = match &ended {
        Ended::NotStarted(e) => (EventKind::DelegateFailed, format!("{label} could not be run: {e}")),
        Ended::Exited(s) if s.success() => {
            (EventKind::Delegated, format!("{label} exited 0 after {secs:.1} s"))
        }
        Ended::Exited(s) => match (s.code(), s.signal()) {
            (Some(code), _) => {
                (EventKind::DelegateFailed, format!("{label} exited {code} after {secs:.1} s"))
            }
            (None, Some(sig)) => {
                (EventKind::DelegateFailed, format!("{label} was killed by signal {sig} after {secs:.1} s"))
            }
            (None, None) => (EventKind::DelegateFailed, format!("{label} ended ({s}) after {secs:.1} s")),
        },
    };
    if kind == EventKind::DelegateFailed && !tail.is_empty() {
        message.push_str(&format!("; stderr: {}", tail.join(" | ")));
    }
    if let Some(pid) = a.hook_pid {
        wait_for_exit(pid, std::time::Duration::from_secs(5));
    }
    let nodes = crate::hostlist::expand(&a.hostlist).unwrap_or_default();
    let recorded = record_event(&a.state_dir, kind, &nodes, &message);
    let line = match &recorded {
        Ok(()) => format!("{kind}: {message}"),
        Err(e) => format!("{kind}: {message} (not recorded in the store: {e})"),
    };
    crate::hook_io::append_log(&a.log_file, &name, &line);
    matches!((&ended, recorded), (Ended::Exited(s), Ok(())) if s.success())
}

/// Waits until process `pid` is gone, at most `limit` (a hook takes milliseconds).
fn wait_for_exit(pid: i32, limit: std::time::Duration) {
    #[allow(clippy::disallowed_methods)] // an edge: a bounded wait for the hook
    let deadline = std::time::Instant::now() + limit;
    #[allow(clippy::disallowed_methods)] // an edge: a bounded wait for the hook
    while nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok()
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// The most of one output file copied into the hook log (its end, when it is longer).
const MAX_OUTPUT: u64 = 64 << 10;

/// Copies the lines of the output file `path` into the hook log and removes it; returns its last
/// [`STDERR_TAIL_LINES`] lines.
fn copy_lines(path: &Path, log_file: &Path, name: &str, stream: &str) -> Vec<String> {
    use std::io::{Read, Seek, SeekFrom};
    let mut bytes = Vec::new();
    if let Ok(mut f) = std::fs::File::open(path) {
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        if len > MAX_OUTPUT {
            let _ = f.seek(SeekFrom::Start(len - MAX_OUTPUT));
            crate::hook_io::append_log(
                log_file,
                name,
                &format!("{stream}: ({} bytes before this cut)", len - MAX_OUTPUT),
            );
        }
        let _ = f.take(MAX_OUTPUT).read_to_end(&mut bytes);
    }
    let _ = std::fs::remove_file(path);
    let mut tail = VecDeque::new();
    for raw in bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        let mut line = crate::hostlist::escape_control(String::from_utf8_lossy(raw).trim_end());
        if line.len() > MAX_LINE {
            let cut = (0..=MAX_LINE).rev().find(|i| line.is_char_boundary(*i)).unwrap_or(0);
            line.truncate(cut);
            line.push_str("...");
        }
        crate::hook_io::append_log(log_file, name, &format!("{stream}: {line}"));
        tail.push_back(line);
        if tail.len() > STDERR_TAIL_LINES {
            tail.pop_front();
        }
    }
    tail.into()
}

/// Records one event in the store (one commit).
pub(crate) fn record_event(
    state_dir: &Path,
    kind: EventKind,
    nodes: &[String],
    message: &str,
) -> Result<(), String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    rt.block_on(async {
        let store = Store::open_for_hook(state_dir).await.map_err(|e| e.to_string())?;
        let mut tx = store.begin().await.map_err(|e| e.to_string())?;
        tx.add_event(crate::hook_io::received_now(), kind.as_str(), nodes, message)
            .await
            .map_err(|e| e.to_string())?;
        tx.commit().await.map_err(|e| e.to_string())?;
        store.close().await;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naming() -> Naming {
        Naming::with_nodesets("hpc", [("a", 1, 3), ("gpu", 0, 2)])
    }

    fn names(s: &str) -> Vec<String> {
        crate::hostlist::expand(s).unwrap()
    }

    /// (hostlist of the hook call, ours, not ours): order kept, nothing lost or doubled.
    #[test]
    fn a_hook_call_splits_into_ours_and_the_rest() {
        for (call, ours, others) in [
            ("hpc-a-[0-3]", "hpc-a-[0-3]", ""),
            ("legacy-[0-1]", "", "legacy-[0-1]"),
            ("hpc-a-[2-5],legacy-0,hpc-gpu-1", "hpc-a-[2-3],hpc-gpu-1", "hpc-a-[4-5],legacy-0"),
            // A prefix of ours, another cluster, a nodeset that does not exist, an index out of range.
            ("hpc-a-1,hpc-a-10,hpcx-a-1,hpc-b-0,hpc-gpu-2", "hpc-a-1", "hpc-a-10,hpcx-a-1,hpc-b-0,hpc-gpu-2"),
            ("hpc-gpu-0,hpc-gpu-01", "hpc-gpu-0", "hpc-gpu-01"),
        ] {
            let (o, n) = split(&naming(), names(call));
            assert_eq!(o, if ours.is_empty() { vec![] } else { names(ours) }, "{call}");
            assert_eq!(n, if others.is_empty() { vec![] } else { names(others) }, "{call}");
        }
    }

    #[test]
    fn only_stale_leftovers_are_pruned() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(prune_stale(dir.path(), std::time::SystemTime::UNIX_EPOCH), 0, "no directory yet");
        std::fs::create_dir(dir.path().join(DIR)).unwrap();
        let file = dir.path().join(DIR).join("resume-1-2.json");
        std::fs::write(&file, "{}").unwrap();
        let written = std::fs::metadata(&file).unwrap().modified().unwrap();
        assert_eq!(prune_stale(dir.path(), written), 0, "not older than the cut");
        assert!(file.exists());
        assert_eq!(prune_stale(dir.path(), written + std::time::Duration::from_secs(1)), 1);
        assert!(!file.exists());
    }

    /// What the program gets as argv[1]: only the nodes that are not ours, compressed.
    #[test]
    fn the_program_gets_a_compressed_hostlist_of_the_rest() {
        let (_, others) = split(&naming(), names("hpc-a-0,legacy-[0-3],legacy-7,hpc-a-1"));
        assert_eq!(crate::hostlist::compress(&others), "legacy-[0-3,7]");
    }
}
