//! The daemon's log: `SLURM_DWS_LOG` checked (a filter that says nothing useful is an error, not a
//! silent `info`), lines on stderr, and under systemd each line led by its syslog priority (`<3>` for
//! ERROR, `<4>` WARN, `<6>` INFO, `<7>` DEBUG and TRACE), which journald reads as the entry's priority
//! (`SyslogLevelPrefix=`, on by default) so `journalctl -p warning` finds the warnings.

use super::{CliError, LogFormat};
use std::io::Write;
use tracing::{Level, Metadata};
use tracing_subscriber::fmt::MakeWriter;

/// The variable that holds the log filter.
pub const LOG_ENV: &str = "SLURM_DWS_LOG";

/// The levels a filter directive may name.
const LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];

/// Checks a filter: comma-separated directives, each `LEVEL` or `TARGET=LEVEL`, LEVEL one of
/// [`LEVELS`]. tracing alone would take `verbose` for a target name and log nothing of ours.
pub fn check_filter(filter: &str) -> Result<(), String> {
    let bad = |why: String| {
        Err(format!(
            "bad {LOG_ENV} '{}': {why} (use a level: {}, or TARGET=LEVEL, comma-separated)",
            crate::hostlist::escape_control(filter),
            LEVELS.join(", ")
        ))
    };
    if filter.trim().is_empty() {
        return bad("it is empty".into());
    }
    for directive in filter.split(',').map(str::trim) {
        let level = directive.rsplit_once('=').map_or(directive, |(_, level)| level);
        if !LEVELS.iter().any(|l| l.eq_ignore_ascii_case(level)) {
            return bad(format!("'{}' is not a level", crate::hostlist::escape_control(level)));
        }
    }
    tracing_subscriber::EnvFilter::try_new(filter).map(|_| ()).or_else(|e| bad(e.to_string()))
}

/// Sets up logging to stderr: text for people, JSON for log pipelines; `SLURM_DWS_LOG` (default `info`)
/// filters. Under journald ([`stderr_is_journal`]) text lines carry their priority and no colours.
pub fn init(format: LogFormat) -> Result<(), CliError> {
    let filter = match std::env::var(LOG_ENV) {
        Ok(f) => {
            check_filter(&f).map_err(CliError::usage)?;
            f
        }
        Err(_) => "info".to_string(),
    };
    let filter = tracing_subscriber::EnvFilter::new(filter);
    let journal = stderr_is_journal();
    // Colours only on a terminal: journald and log files would store the escape codes.
    let ansi = !journal && std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder =
        tracing_subscriber::fmt().with_env_filter(filter).with_writer(Stderr { journal }).with_ansi(ansi);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
    Ok(())
}

/// Whether stderr is connected to journald: systemd sets `JOURNAL_STREAM=DEV:INODE` to the stream it
/// connected, and a process whose stderr is still that stream logs to the journal
/// (systemd.exec(5), `$JOURNAL_STREAM`).
pub fn stderr_is_journal() -> bool {
    let Ok(stream) = std::env::var("JOURNAL_STREAM") else { return false };
    let Some((dev, ino)) = stream.split_once(':') else { return false };
    let (Ok(dev), Ok(ino)) = (dev.parse::<u64>(), ino.parse::<u64>()) else { return false };
    // SAFETY: fstat writes into the zeroed struct we own; fd 2 is open (prepare_process sees to it).
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(libc::STDERR_FILENO, &mut st) } != 0 {
        return false;
    }
    st.st_dev as u64 == dev && st.st_ino as u64 == ino
}

/// The syslog priority prefix journald reads at the start of a line.
pub fn priority_prefix(level: &Level) -> &'static str {
    match *level {
        Level::ERROR => "<3>",
        Level::WARN => "<4>",
        Level::INFO => "<6>",
        _ => "<7>",
    }
}

/// Makes one [`Line`] per log event.
struct Stderr {
    journal: bool,
}

impl<'a> MakeWriter<'a> for Stderr {
    type Writer = Line;

    fn make_writer(&'a self) -> Line {
        Line { prefix: if self.journal { Some("<6>") } else { None }, buf: Vec::new() }
    }

    fn make_writer_for(&'a self, meta: &Metadata<'_>) -> Line {
        Line { prefix: self.journal.then(|| priority_prefix(meta.level())), buf: Vec::new() }
    }
}

/// One log event, written to stderr in one write when dropped; with a prefix, every line gets it (a
/// message with a newline is two journal entries, both at the event's priority).
struct Line {
    prefix: Option<&'static str>,
    buf: Vec<u8>,
}

impl Write for Line {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for Line {
    fn drop(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        let out = match self.prefix {
            None => std::mem::take(&mut self.buf),
            Some(prefix) => prefixed(prefix, &self.buf),
        };
        let _ = std::io::stderr().lock().write_all(&out);
    }
}

/// `text` with `prefix` before each of its lines.
fn prefixed(prefix: &str, text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() + prefix.len());
    for line in text.split_inclusive(|&b| b == b'\n') {
        out.extend_from_slice(prefix.as_bytes());
        out.extend_from_slice(line);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_name_levels() {
        for good in ["info", "debug", "info,slurm_dws=debug", "slurm_dws::gce=TRACE,warn", "off"] {
            assert_eq!(check_filter(good), Ok(()), "{good}");
        }
        for (bad, named) in
            [("verbose", "'verbose'"), ("", "empty"), ("slurm_dws=loud", "'loud'"), ("info,", "''")]
        {
            let e = check_filter(bad).unwrap_err();
            assert!(e.contains(named) && e.contains("SLURM_DWS_LOG"), "{bad}: {e}");
        }
    }

    #[test]
    fn every_line_carries_the_priority() {
        assert_eq!(prefixed("<4>", b"a\nb\n"), b"<4>a\n<4>b\n");
        assert_eq!(priority_prefix(&Level::ERROR), "<3>");
        assert_eq!(priority_prefix(&Level::WARN), "<4>");
        assert_eq!(priority_prefix(&Level::INFO), "<6>");
        assert_eq!(priority_prefix(&Level::TRACE), "<7>");
    }
}
