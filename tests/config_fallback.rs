//! No lost hook call: with the config file broken, a hook records the call through the copy of the
//! config the daemon last accepted, the daemon carries it out, and the admin is told (event, hook log,
//! syslog, `status`). Through the real binary, the daemon and the simulator.

// Real processes, waited for in real time.
#![allow(clippy::disallowed_methods)]

mod common;

use common::*;
use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

/// A syslog socket of the test's own, as `/dev/log` is the system's.
fn syslog(dir: &Path) -> (UnixDatagram, std::path::PathBuf) {
    let path = dir.join("syslog.sock");
    let sock = UnixDatagram::bind(&path).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    (sock, path)
}

fn received(sock: &UnixDatagram) -> String {
    let mut buf = vec![0u8; 8192];
    let n = sock.recv(&mut buf).expect("a syslog line");
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// The resume hook as slurmctld runs it (by its name, almost no environment), logging to `syslog`.
fn resume(w: &World, hostlist: &str, syslog: &Path) -> Output {
    let link = w.path().join("slurm-dws-resume");
    if !link.exists() {
        std::os::unix::fs::symlink(BIN, &link).unwrap();
    }
    let file = w.path().join("resume-file");
    std::fs::write(&file, resume_file(&[(41, hostlist)], hostlist)).unwrap();
    Command::new(&link)
        .arg(hostlist)
        .env_clear()
        .env("SLURM_DWS_CONFIG", &w.config)
        .env("SLURM_RESUME_FILE", &file)
        .env("SLURM_DWS_SYSLOG", syslog)
        .current_dir(w.path())
        .output()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_with_a_broken_config_records_the_call_through_the_last_accepted_copy() {
    let mut w = World::new(&[("a", 0, 4, "")], "").await;
    w.start_daemon();
    let copy = w.state_dir().join("last-accepted.toml");
    w.wait_for("the daemon's copy of its config", 10, || copy.exists().then_some(()));
    // An accepted reload rewrites it.
    let good = std::fs::read_to_string(&w.config).unwrap();
    std::fs::write(&w.config, good.replace("interval = 2", "interval = 3")).unwrap();
    let pid = nix::unistd::Pid::from_raw(w.daemon.as_ref().unwrap().id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP).unwrap();
    w.wait_for("the copy of the reloaded config", 10, || {
        std::fs::read_to_string(&copy).unwrap().contains("interval = 3").then_some(())
    });

    // A typo: the file is not TOML any more. The daemon refuses nothing yet (no reload asked).
    std::fs::write(&w.config, good.replace("[gcp]", "[gcp")).unwrap();
    let (log_sock, log_path) = syslog(w.path());
    let out = resume(&w, "hpc-a-[0-1]", &log_path);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let line = received(&log_sock);
    assert!(line.starts_with("<28>"), "a warning, facility daemon: {line}");
    assert!(line.contains("slurm-dws-resume[") && line.contains("CONFIG FALLBACK"), "{line}");
    assert!(line.contains(&copy.display().to_string()) && line.contains("inbox entry"), "{line}");
    let hook_log = std::fs::read_to_string(w.path().join("slurm-dws.log")).unwrap();
    assert!(
        hook_log.contains("CONFIG FALLBACK") && hook_log.contains("resume hpc-a-[0-1]: 2 nodes, 1 job"),
        "{hook_log}"
    );

    // Read through the copy (the file named by --config is the broken one): the event, and the call
    // carried out by the daemon.
    let with_copy = |args: &[&str]| -> serde_json::Value {
        let out = Command::new(BIN).arg("--config").arg(&copy).args(args).arg("--json").output().unwrap();
        serde_json::from_slice(&out.stdout).unwrap_or_default()
    };
    let events = with_copy(&["events"]);
    let fallback: Vec<&serde_json::Value> =
        events.as_array().unwrap().iter().filter(|e| e["kind"] == "config_fallback").collect();
    assert_eq!(fallback.len(), 1, "{events:#}");
    assert_eq!(fallback[0]["nodes"], "hpc-a-[0-1]");
    assert!(fallback[0]["message"].as_str().unwrap().contains("does not load"), "{events:#}");
    w.wait_for("the daemon to ask GCE for the nodes", 20, || {
        let rs = with_copy(&["requests"]);
        rs.as_array()
            .and_then(|a| a.iter().find(|r| r["nodes"] == serde_json::json!(["hpc-a-0", "hpc-a-1"])))
            .map(|r| assert_eq!(r["job_id"], 41))
    });

    // status: the file is broken, since when, and what the hooks do; exit 1 with the status itself.
    let out = w.cli(&["status"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("BROKEN config") && err.contains("broken since it was changed at"), "{err}");
    assert!(err.contains(&format!("hooks use {}", copy.display())), "{err}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("daemon"), "the status is printed too");

    // With no copy anywhere, the hook fails as before (exit 2, nothing recorded) and syslog says so.
    w.kill_daemon();
    std::fs::remove_file(&copy).unwrap();
    let out = resume(&w, "hpc-a-2", &log_path);
    assert_eq!(out.status.code(), Some(2));
    let line = received(&log_sock);
    assert!(line.starts_with("<27>") && line.contains("FAILED (exit 2)"), "an error: {line}");
    assert!(line.contains("nothing recorded") && line.contains("hpc-a-2"), "{line}");
    let out = w.cli(&["status"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(err.contains("hooks FAIL (exit 2)"), "{err}");
}

/// A hook that fails at run time (here: its state directory is a file) tells syslog, not only the hook log.
#[tokio::test]
async fn a_failing_hook_tells_syslog() {
    let w = World::new(&[("a", 0, 4, "")], "").await;
    std::fs::write(w.state_dir(), "not a directory").unwrap();
    let (log_sock, log_path) = syslog(w.path());
    let out = resume(&w, "hpc-a-0", &log_path);
    assert_eq!(out.status.code(), Some(1));
    let line = received(&log_sock);
    assert!(
        line.starts_with("<27>") && line.contains("slurm-dws-resume[") && line.contains("FAILED (exit 1)"),
        "{line}"
    );
}
