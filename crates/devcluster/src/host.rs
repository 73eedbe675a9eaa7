//! The harness's small host chores: directories and files with modes, log tails, short commands
//! run to completion, and polling.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::DevclusterError;

pub(crate) fn mkdir(path: &Path, mode: u32) -> Result<(), DevclusterError> {
    std::fs::create_dir_all(path).map_err(|e| DevclusterError::io(path, e))?;
    set_mode(path, mode)
}

pub(crate) fn set_mode(path: &Path, mode: u32) -> Result<(), DevclusterError> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|e| DevclusterError::io(path, e))
}

pub(crate) fn write_file(path: &Path, text: &str, mode: u32) -> Result<(), DevclusterError> {
    std::fs::write(path, text).map_err(|e| DevclusterError::io(path, e))?;
    set_mode(path, mode)
}

pub(crate) fn log_file(path: &Path) -> Result<std::fs::File, DevclusterError> {
    std::fs::OpenOptions::new().create(true).append(true).open(path).map_err(|e| DevclusterError::io(path, e))
}

pub(crate) fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Runs a short command to completion and returns its stdout, or its stderr as the error.
pub(crate) fn run_capture(cmd: &mut Command) -> Result<String, DevclusterError> {
    let describe = |cmd: &Command| {
        std::iter::once(cmd.get_program())
            .chain(cmd.get_args())
            .map(|s| s.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    };
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| DevclusterError::Command { command: describe(cmd), message: e.to_string() })?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(DevclusterError::Command {
            command: describe(cmd),
            message: format!("{}: {}", out.status, String::from_utf8_lossy(&out.stderr).trim()),
        })
    }
}

/// Polls `done` every 20 ms until it holds or `timeout` passes; returns whether it held.
pub(crate) fn wait_for(timeout: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if done() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
