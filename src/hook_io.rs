//! What hooks and their delegate supervisor share: the clock, a bounded read of the resume file, the hook log.

use crate::model::HookKind;
use chrono::Utc;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// When slurmctld's call reached us: the time stamped on the inbox row and the log line.
#[allow(clippy::disallowed_methods)] // an edge: a hook records when it was called
pub(crate) fn received_now() -> chrono::DateTime<Utc> {
    Utc::now()
}

/// The largest resume file read. Slurm writes ~100 bytes per job: 32 MiB is far beyond any real
/// one, and a path to something endless (a device, a FIFO kept open) cannot hang the hook.
pub const MAX_RESUME_FILE: usize = 32 << 20;

/// Reads up to `limit + 1` bytes of a regular file (anything else is an error, so a device or a
/// FIFO cannot block or flood the hook).
pub(crate) fn read_at_most(path: &Path, limit: usize) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    let mut bytes = Vec::new();
    file.take(limit as u64 + 1).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Appends one line to the hook log, and to stderr (which goes nowhere under slurmctld, but shows
/// when an admin runs a hook by hand).
pub(crate) fn log_line(path: &Path, kind: HookKind, line: &str) {
    let text = log_text(&kind.as_str().replace('_', "-"), line);
    let _ = std::io::stderr().write_all(text.as_bytes());
    append_text(path, &text);
}

/// Appends `line` to the hook log as program `slurm-dws-{name}`.
pub(crate) fn append_log(path: &Path, name: &str, line: &str) {
    append_text(path, &log_text(name, line));
}

fn log_text(name: &str, line: &str) -> String {
    let stamp = received_now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    format!("{stamp} slurm-dws-{}[{}]: {line}\n", name.replace('_', "-"), std::process::id())
}

fn append_text(path: &Path, text: &str) {
    if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).mode(0o640).open(path) {
        let _ = f.write_all(text.as_bytes());
    }
}
