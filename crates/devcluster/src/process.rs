//! Processes of a local cluster: child daemons stopped by PID on drop, slurmds by pid file.

use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// How long a daemon gets to exit after SIGTERM before SIGKILL.
const GRACE: Duration = Duration::from_secs(5);

/// A daemon we started as our own child (run in the foreground, so its PID is the child's).
/// Dropping it stops it: SIGTERM, then SIGKILL after [`GRACE`], and reaps it.
#[derive(Debug)]
pub(crate) struct Daemon {
    pub name: &'static str,
    child: Child,
    stopped: bool,
}

impl Daemon {
    pub fn new(name: &'static str, child: Child) -> Self {
        Daemon { name, child, stopped: false }
    }

    pub fn pid(&self) -> Pid {
        Pid::from_raw(self.child.id() as i32)
    }

    /// The exit status if it has exited already.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    pub fn signal(&self, signal: Signal) {
        if !self.stopped {
            let _ = kill(self.pid(), signal);
        }
    }

    /// Stops and reaps the daemon; idempotent.
    pub fn stop(&mut self) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        if self.exited().is_some() {
            return;
        }
        // A SIGSTOPped daemon (tests pause slurmctld) must be continued to act on TERM.
        let _ = kill(self.pid(), Signal::SIGCONT);
        let _ = kill(self.pid(), Signal::SIGTERM);
        let deadline = Instant::now() + GRACE;
        while Instant::now() < deadline {
            if self.exited().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        tracing::warn!(daemon = self.name, pid = %self.pid(), "no exit after SIGTERM; killing");
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Whether `pid` is a live process (a zombie is not: nobody may reap a daemonized slurmd if
/// PID 1 does not, and we must not wait for it forever).
pub(crate) fn alive(pid: Pid) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            stat.rsplit_once(") ").and_then(|(_, rest)| rest.chars().next()).is_some_and(|state| state != 'Z')
        }
        Err(_) => false,
    }
}

fn cmdline(pid: Pid) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        .unwrap_or_default()
}

/// Stops the process named by `pid_file` if it is alive and its command line contains
/// `must_contain` (so a recycled PID is never killed): SIGTERM, SIGKILL after [`GRACE`]. The
/// pid file is removed. Returns whether a process was stopped.
pub(crate) fn stop_by_pid_file(pid_file: &Path, must_contain: &str) -> bool {
    let Ok(text) = std::fs::read_to_string(pid_file) else {
        return false;
    };
    let _ = std::fs::remove_file(pid_file);
    let Ok(raw) = text.trim().parse::<i32>() else {
        return false;
    };
    let pid = Pid::from_raw(raw);
    if raw <= 1 || !alive(pid) || !cmdline(pid).contains(must_contain) {
        return false;
    }
    terminate(pid);
    true
}

fn terminate(pid: Pid) {
    let _ = kill(pid, Signal::SIGCONT);
    let _ = kill(pid, Signal::SIGTERM);
    let deadline = Instant::now() + GRACE;
    while Instant::now() < deadline && alive(pid) {
        std::thread::sleep(Duration::from_millis(20));
    }
    if alive(pid) {
        let _ = kill(pid, Signal::SIGKILL);
    }
}

/// Stops every slurmd whose pid file (`slurmd-*.pid`) is in `run_dir` and whose command line
/// names `conf`. Returns how many were stopped.
pub(crate) fn stop_slurmds(run_dir: &Path, conf: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(run_dir) else {
        return 0;
    };
    let conf = conf.display().to_string();
    entries
        .flatten()
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.starts_with("slurmd-") && name.ends_with(".pid")
        })
        .filter(|e| stop_by_pid_file(&e.path(), &conf))
        .count()
}

/// SIGKILLs every process (but us) whose environment holds one of `needles` (e.g.
/// `SLURM_CONF=/tmp/x/slurm.conf`): slurmstepd and job processes left by a slurmd that was
/// stopped, hook programs still running. Returns the PIDs it killed.
pub(crate) fn kill_marked(needles: &[String]) -> Vec<Pid> {
    let me = std::process::id() as i32;
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut killed = Vec::new();
    for entry in entries.flatten() {
        let Some(raw) = entry.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if raw == me || raw <= 1 {
            continue;
        }
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        let marked = environ.split(|b| *b == 0).any(|var| needles.iter().any(|n| var == n.as_bytes()));
        if marked && kill(Pid::from_raw(raw), Signal::SIGKILL).is_ok() {
            killed.push(Pid::from_raw(raw));
        }
    }
    killed
}

/// SIGKILLs every process (but us and `spare`) that sees a mount at `dir` (field 5 of
/// /proc/PID/mountinfo): on 24.11 every process of a cluster lives in a mount namespace in which
/// the cluster directory is bind-mounted, and nothing else does (the host has no such mount). This
/// finds what an environment marker cannot: 24.11's slurmstepd overwrites its environment with
/// its process title. Returns the PIDs it killed.
pub(crate) fn kill_in_mounts_of(dir: &Path, spare: &[Pid]) -> Vec<Pid> {
    let me = std::process::id() as i32;
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let want = dir.display().to_string();
    let mut killed = Vec::new();
    for entry in entries.flatten() {
        let Some(raw) = entry.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if raw == me || raw <= 1 || spare.contains(&Pid::from_raw(raw)) {
            continue;
        }
        let Ok(mountinfo) = std::fs::read_to_string(entry.path().join("mountinfo")) else {
            continue;
        };
        let sees = mountinfo.lines().any(|l| l.split(' ').nth(4) == Some(want.as_str()));
        if sees && kill(Pid::from_raw(raw), Signal::SIGKILL).is_ok() {
            killed.push(Pid::from_raw(raw));
        }
    }
    killed
}

/// Waits up to [`GRACE`] until none of `pids` is alive (a SIGKILLed process still has to be
/// scheduled to exit; a loaded machine takes a while).
pub(crate) fn wait_gone(pids: &[Pid]) {
    let deadline = Instant::now() + GRACE;
    while pids.iter().any(|p| alive(*p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn daemon_is_stopped_on_drop() {
        let child = Command::new("sleep").arg("60").spawn().unwrap();
        let pid = Pid::from_raw(child.id() as i32);
        assert!(alive(pid));
        drop(Daemon::new("sleep", child));
        assert!(!alive(pid));
    }

    #[test]
    fn pid_file_stop_checks_the_command_line() {
        let dir = tempfile::tempdir().unwrap();
        let mut child = Command::new("sleep").arg("61").spawn().unwrap();
        // Right after spawn, /proc/PID/cmdline can still be empty (seen on a loaded machine); a real
        // slurmd has long finished exec when it is stopped.
        let deadline = Instant::now() + Duration::from_secs(5);
        while !cmdline(Pid::from_raw(child.id() as i32)).contains("sleep 61") && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let pid_file = dir.path().join("slurmd-x.pid");
        std::fs::write(&pid_file, format!("{}\n", child.id())).unwrap();
        // Not ours by command line: left alone.
        assert!(!stop_by_pid_file(&pid_file, "slurmd -N x"));
        assert!(child.try_wait().unwrap().is_none());
        std::fs::write(&pid_file, format!("{}\n", child.id())).unwrap();
        let pid = Pid::from_raw(child.id() as i32);
        let seen = format!("alive {}, command line {:?}", alive(pid), cmdline(pid));
        assert!(stop_by_pid_file(&pid_file, "sleep 61"), "not stopped: {seen}");
        assert!(child.wait().is_ok());
        assert!(!pid_file.exists());
        assert!(!stop_by_pid_file(&pid_file, "sleep"));
    }
}
