//! One line to the system log (`/dev/log`: journald or a syslog daemon), for what must be seen even
//! when the hook log cannot be: a hook that fails, or that runs on the fallback config.
//!
//! slurmctld discards the hooks' stderr, and the hook log's path is in the config file, which may be
//! what is broken; `journalctl -t slurm-dws-resume` (or `/var/log/syslog`) always shows these. A
//! datagram in the classic BSD format (`<PRI>TIMESTAMP TAG[PID]: MESSAGE`, RFC 3164), facility
//! `daemon`; nothing happens when no system logger listens. `$SLURM_DWS_SYSLOG` names another
//! socket (tests bind their own).

use std::os::unix::net::{UnixDatagram, UnixStream};
use std::path::PathBuf;

/// The environment variable naming the socket instead of `/dev/log`.
pub const ENV_SOCKET: &str = "SLURM_DWS_SYSLOG";
/// Where the system logger listens.
pub const DEFAULT_SOCKET: &str = "/dev/log";

/// Severities used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    Err = 3,
    Warning = 4,
}

/// Facility `daemon` (3), as in syslog(3).
const FACILITY_DAEMON: u8 = 3;
/// Longer messages are cut: many syslog daemons drop datagrams over ~2 KiB.
const MAX_MESSAGE: usize = 1800;

/// The datagram for `message` from `tag` (e.g. `slurm-dws-resume`) at `severity`.
pub fn format(severity: Severity, tag: &str, pid: u32, stamp: &str, message: &str) -> String {
    let pri = FACILITY_DAEMON * 8 + severity as u8;
    let mut message = message.replace('\n', " ");
    if message.len() > MAX_MESSAGE {
        let cut = (0..=MAX_MESSAGE).rev().find(|i| message.is_char_boundary(*i)).unwrap_or(0);
        message.truncate(cut);
        message.push_str("...");
    }
    format!("<{pri}>{stamp} {tag}[{pid}]: {message}")
}

/// Sends one line; errors are ignored (there is nowhere left to report them).
pub fn send(severity: Severity, tag: &str, message: &str) {
    let socket = std::env::var_os(ENV_SOCKET).map(PathBuf::from).unwrap_or_else(|| DEFAULT_SOCKET.into());
    #[allow(clippy::disallowed_methods)] // an edge: a syslog line carries its local time
    let stamp = chrono::Local::now().format("%b %e %H:%M:%S").to_string();
    let line = format(severity, tag, std::process::id(), &stamp, message);
    let sent = UnixDatagram::unbound().and_then(|s| s.send_to(line.as_bytes(), &socket));
    if let Err(e) = sent {
        // A syslog daemon that listens on a stream socket takes newline-terminated lines.
        if e.raw_os_error() == Some(libc::EPROTOTYPE) {
            use std::io::Write;
            let _ =
                UnixStream::connect(&socket).and_then(|mut s| s.write_all(format!("{line}\n").as_bytes()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_bsd_syslog_with_facility_daemon() {
        assert_eq!(
            format(Severity::Err, "slurm-dws-resume", 42, "Nov 24 16:00:00", "a\nb"),
            "<27>Nov 24 16:00:00 slurm-dws-resume[42]: a b"
        );
        assert!(format(Severity::Warning, "t", 1, "s", "m").starts_with("<28>"));
        let long = format(Severity::Err, "t", 1, "s", &"é".repeat(2000));
        assert!(long.len() < 2000 && long.ends_with("..."));
    }

    #[test]
    fn a_line_reaches_a_bound_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let server = UnixDatagram::bind(&path).unwrap();
        std::env::set_var(ENV_SOCKET, &path);
        send(Severity::Warning, "slurm-dws-test", "hello");
        let mut buf = [0u8; 4096];
        let n = server.recv(&mut buf).unwrap();
        let got = String::from_utf8_lossy(&buf[..n]);
        assert!(
            got.starts_with("<28>")
                && got.ends_with(&format!("slurm-dws-test[{}]: hello", std::process::id())),
            "{got}"
        );
    }
}
