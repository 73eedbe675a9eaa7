//! The daemon's Unix socket: garbage, oversized, truncated and wrong-version messages, many
//! concurrent clients, clients that connect and never write, a daemon out of file descriptors, and
//! peers that are not root or the service user. The daemon must answer each bad message with one
//! error line (or close), keep serving, never die, and change nothing.

use super::common::World;
use super::tally::{changed_tables, runtime, snapshot, Kind, Snapshot, Tally};
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// The uid/gid of `nobody`: a local user that is neither root nor the service user.
const NOBODY: u32 = 65534;

/// Sends `bytes` and reads one response line. `Ok(None)`: closed without an answer.
fn send(sock: &Path, bytes: &[u8], wait: Duration) -> std::io::Result<Option<String>> {
    let mut s = UnixStream::connect(sock)?;
    s.set_read_timeout(Some(wait))?;
    s.set_write_timeout(Some(wait))?;
    // The daemon may answer (and close) before it has read everything: a failed write is fine.
    let _ = s.write_all(bytes);
    let _ = s.shutdown(std::net::Shutdown::Write);
    let mut line = String::new();
    let n = BufReader::new(s).read_line(&mut line)?;
    Ok((n > 0).then(|| line.trim_end().to_string()))
}

fn status_ok(sock: &Path, wait: Duration) -> bool {
    matches!(send(sock, b"{\"v\":1,\"request\":\"status\"}\n", wait), Ok(Some(l)) if l.contains("\"response\":\"status\""))
}

/// Store tables that a message could change (the daemon's own pass bookkeeping aside).
fn durable(s: &Snapshot) -> Snapshot {
    s.iter().filter(|(k, _)| k.as_str() != "meta").map(|(k, v)| (k.clone(), v.clone())).collect()
}

fn daemon_alive(w: &mut World) -> bool {
    w.daemon.as_mut().is_some_and(|c| c.try_wait().ok().flatten().is_none())
}

/// CPU seconds the process has used (user + system).
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = f.get(11).and_then(|u| u.parse::<f64>().ok()).unwrap_or(0.0)
        + f.get(12).and_then(|s| s.parse::<f64>().ok()).unwrap_or(0.0);
    ticks / 100.0
}

pub fn run() -> Vec<Tally> {
    let mut t = Tally::new("socket messages", Kind::Input);
    let mut sec = Tally::new("socket: peer credentials", Kind::Security);
    let rt = runtime();
    let mut w = rt.block_on(World::new(&[("a", 0, 16, "")], ""));
    w.start_daemon();
    let sock = w.path().join("slurm-dws.sock");
    assert!(w.hook("resume", "hpc-a-[0-1]", None).status.success(), "setup hook");
    w.wait_for("the hook's nodes up", 60, || {
        let s = w.node_states();
        (s.len() == 2 && s.values().all(|v| v == "up")).then_some(())
    });
    // The store settles first: the passes after the nodes came up still record (the request's end,
    // its events). Two snapshots three passes apart (`interval = 2`) that agree are the state the
    // socket part must leave as it is; a pass that still changes something after that is a finding.
    let mut before = durable(&rt.block_on(snapshot(&w.state_dir())));
    let settle_by = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        std::thread::sleep(Duration::from_secs(6));
        let now = durable(&rt.block_on(snapshot(&w.state_dir())));
        if now == before {
            break;
        }
        assert!(
            std::time::Instant::now() < settle_by,
            "the store did not settle within 60 s after the setup: {:?} still change",
            changed_tables(&before, &now)
        );
        before = now;
    }

    // ---- bad messages ------------------------------------------------------------------------------
    let big = |n: usize, end: &[u8]| {
        let mut v = vec![b'x'; n];
        v.extend_from_slice(end);
        v
    };
    let mut padded = vec![b' '; (1 << 20) + 10];
    padded.extend_from_slice(b"{\"v\":1,\"request\":\"status\"}\n");
    let cases: Vec<(&str, Vec<u8>, &[&str])> = vec![
        ("garbage", b"hello daemon\n".to_vec(), &["bad request"]),
        ("empty line", b"\n".to_vec(), &["bad request"]),
        ("empty object", b"{}\n".to_vec(), &["bad request"]),
        ("version only", b"{\"v\":1}\n".to_vec(), &["bad request"]),
        ("no version", b"{\"request\":\"status\"}\n".to_vec(), &["bad request"]),
        ("version 2", b"{\"v\":2,\"request\":\"status\"}\n".to_vec(), &["protocol version 2"]),
        ("version 0", b"{\"v\":0,\"request\":\"wake\"}\n".to_vec(), &["protocol version 0"]),
        ("version as text", b"{\"v\":\"1\",\"request\":\"status\"}\n".to_vec(), &["bad request"]),
        ("version 2^64", b"{\"v\":18446744073709551616,\"request\":\"status\"}\n".to_vec(), &["bad request"]),
        ("unknown request", b"{\"v\":1,\"request\":\"format_disk\"}\n".to_vec(), &["bad request"]),
        ("gc without dry_run", b"{\"v\":1,\"request\":\"gc\"}\n".to_vec(), &["bad request"]),
        (
            "gc dry_run as text",
            b"{\"v\":1,\"request\":\"gc\",\"dry_run\":\"no\"}\n".to_vec(),
            &["bad request"],
        ),
        ("a JSON array", b"[1,2,3]\n".to_vec(), &["bad request"]),
        ("not UTF-8", b"{\"v\":1,\"request\":\"\xff\xfe\"}\n".to_vec(), &["bad request"]),
        ("NUL bytes", b"\0\0\0\0\n".to_vec(), &["bad request"]),
        (
            "deep nesting",
            [vec![b'['; 100_000], vec![b']'; 100_000], b"\n".to_vec()].concat(),
            &["bad request"],
        ),
        ("truncated JSON then close", b"{\"v\":1,\"requ".to_vec(), &[]),
        ("2 MiB without a newline", big(2 << 20, b""), &["too long"]),
        ("2 MiB line", big(2 << 20, b"\n"), &["too long"]),
        ("1 MiB of blanks before a request", padded, &["too long"]),
        (
            "two requests on one line",
            b"{\"v\":1,\"request\":\"status\"}{\"v\":1,\"request\":\"wake\"}\n".to_vec(),
            &["bad request"],
        ),
        ("HTTP", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(), &["bad request"]),
    ];
    for (what, bytes, words) in &cases {
        t.tried += 1;
        match send(&sock, bytes, Duration::from_secs(8)) {
            Err(e) => t.fail(format!("{what}: {e}")),
            Ok(None) if words.is_empty() => {}
            Ok(None) => t.fail(format!("{what}: closed without an answer")),
            Ok(Some(line)) => match serde_json::from_str::<Value>(&line) {
                Ok(v) if v["response"] == "error" => {
                    let m = v["message"].as_str().unwrap_or("");
                    for wd in words.iter() {
                        if !m.contains(wd) {
                            t.fail(format!("{what}: the error does not say {wd:?}: {m}"));
                        }
                    }
                }
                _ => t.accepted_wrongly(format!("{what}: answered {:?}", &line[..line.len().min(200)])),
            },
        }
        if !daemon_alive(&mut w) {
            t.fail(format!("the daemon died after: {what}"));
            return vec![t, sec];
        }
    }

    // ---- many clients at once ------------------------------------------------------------------------
    t.tried += 1;
    let answered = std::thread::scope(|s| {
        let hs: Vec<_> = (0..200).map(|_| s.spawn(|| status_ok(&sock, Duration::from_secs(10)))).collect();
        hs.into_iter().map(|h| h.join().unwrap()).filter(|ok| *ok).count()
    });
    if answered != 200 {
        t.fail(format!("200 concurrent status requests: {answered} answered"));
    }

    // ---- clients that connect and never write ---------------------------------------------------------
    t.tried += 1;
    let idle: Vec<UnixStream> = (0..300).filter_map(|_| UnixStream::connect(&sock).ok()).collect();
    let started = Instant::now();
    let ok = status_ok(&sock, Duration::from_secs(5));
    if idle.len() != 300 || !ok || started.elapsed() > Duration::from_secs(4) {
        t.fail(format!(
            "with {} idle clients a status request took {:?} (answered: {ok})",
            idle.len(),
            started.elapsed()
        ));
    }
    // An idle client is told off after the read timeout rather than held for ever.
    t.tried += 1;
    let mut first = idle.into_iter().next().unwrap();
    first.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = String::new();
    let _ = first.read_to_string(&mut buf);
    if !buf.contains("no request within") {
        t.fail(format!("an idle client got {buf:?}, want a timeout error"));
    }
    drop(first);

    // ---- out of file descriptors --------------------------------------------------------------------
    // Lower the daemon's descriptor limit, exhaust it with idle clients, and watch: the accept loop
    // must not spin, and once the clients go the daemon must serve again.
    t.tried += 1;
    let pid = w.daemon.as_ref().unwrap().id();
    let lim = libc::rlimit { rlim_cur: 96, rlim_max: 96 };
    let mut old = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    let set = unsafe { libc::prlimit(pid as i32, libc::RLIMIT_NOFILE, &lim, &mut old) } == 0;
    if set {
        let flood: Vec<UnixStream> = (0..400).filter_map(|_| UnixStream::connect(&sock).ok()).collect();
        let cpu0 = cpu_seconds(pid);
        std::thread::sleep(Duration::from_secs(3));
        let busy = (cpu_seconds(pid) - cpu0) / 3.0;
        if busy > 0.5 {
            t.fail(format!(
                "out of file descriptors, the daemon used {:.0}% of a CPU doing nothing",
                busy * 100.0
            ));
        }
        drop(flood);
        unsafe { libc::prlimit(pid as i32, libc::RLIMIT_NOFILE, &old, std::ptr::null_mut()) };
        let deadline = Instant::now() + Duration::from_secs(15);
        while !status_ok(&sock, Duration::from_secs(2)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(200));
        }
        if !status_ok(&sock, Duration::from_secs(2)) {
            t.fail("after running out of file descriptors the daemon does not serve again");
        }
    } else {
        t.skipped.push("prlimit on the daemon failed: descriptor exhaustion not tried".into());
    }

    // ---- peers that are not root or the service user -------------------------------------------------
    // `nobody` needs to reach the socket (it is 0666 by design) and read the config.
    std::fs::set_permissions(w.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let as_nobody = |line: &str| -> Result<String, String> {
        let out = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "socket_client_helper", "--nocapture", "--test-threads=1"])
            .env("FAULTS_SOCKET_CLIENT", &sock)
            .env("FAULTS_SOCKET_SEND", line)
            .uid(NOBODY)
            .gid(NOBODY)
            .output()
            .map_err(|e| e.to_string())?;
        // libtest prints "test socket_client_helper ... " before the helper's own line.
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        stdout
            .lines()
            .find_map(|l| l.split_once("FAULTS-ANSWER=").map(|(_, a)| a.to_string()))
            .ok_or_else(|| format!("{} | {}", stdout.trim(), String::from_utf8_lossy(&out.stderr).trim()))
    };
    for (what, line, allowed) in [
        ("wake", r#"{"v":1,"request":"wake"}"#, false),
        ("reconcile", r#"{"v":1,"request":"reconcile"}"#, false),
        ("gc", r#"{"v":1,"request":"gc","dry_run":false}"#, false),
        ("status", r#"{"v":1,"request":"status"}"#, true),
        ("gc --dry-run", r#"{"v":1,"request":"gc","dry_run":true}"#, true),
    ] {
        sec.tried += 1;
        let resp = match as_nobody(line) {
            Ok(r) => r,
            Err(out) => {
                sec.fail(format!("{what} as nobody: the helper client got no answer: {out}"));
                continue;
            }
        };
        let v: Value = serde_json::from_str(&resp).unwrap_or_default();
        let refused =
            v["response"] == "error" && v["message"].as_str().unwrap_or("").contains("permission denied");
        if allowed && refused {
            sec.fail(format!("{what} as nobody was refused: {resp}"));
        } else if !allowed && !refused {
            sec.fail(format!("{what} as nobody was not refused: {resp}"));
        }
    }
    // The CLI as nobody: `reconcile` is refused by the daemon; a hook cannot even open the store.
    for (args, code, words) in [
        (vec!["reconcile"], 1, "permission denied"),
        (vec!["gc"], 1, "permission denied"),
        (vec!["resume", "hpc-a-5"], 1, "not writable"),
    ] {
        sec.tried += 1;
        let out = Command::new(super::common::BIN)
            .arg("--config")
            .arg(&w.config)
            .args(&args)
            .uid(NOBODY)
            .gid(NOBODY)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        if out.status.code() != Some(code) || !err.contains(words) {
            sec.fail(format!("slurm-dws {args:?} as nobody: exit {:?}, stderr {err:?}", out.status.code()));
        }
    }
    sec.tried += 1;
    if !w.daemon_log().contains("refused: not root or the service user") {
        sec.fail("the daemon did not log the refused peers");
    }

    // ---- and after all of it --------------------------------------------------------------------------
    t.tried += 1;
    if !daemon_alive(&mut w) || !status_ok(&sock, Duration::from_secs(5)) {
        t.fail("the daemon is not serving at the end of the socket part");
    }
    let after = durable(&rt.block_on(snapshot(&w.state_dir())));
    let changed = changed_tables(&before, &after);
    if !changed.is_empty() {
        t.state_changed(format!("bad socket messages changed {changed:?}"));
    }
    // The daemon still works: a resume goes through.
    t.tried += 1;
    assert!(w.hook("resume", "hpc-a-5", None).status.success());
    let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        w.wait_for("hpc-a-5 up after the socket abuse", 60, || {
            (w.node_states().get("hpc-a-5").map(String::as_str) == Some("up")).then_some(())
        })
    }));
    if ok.is_err() {
        t.fail("a resume after the socket abuse did not complete");
    }
    vec![t, sec]
}

/// The client side of a socket test under another uid (see `main.rs`).
pub fn client_helper() {
    let (Some(path), Some(line)) =
        (std::env::var_os("FAULTS_SOCKET_CLIENT"), std::env::var("FAULTS_SOCKET_SEND").ok())
    else {
        return;
    };
    let resp = send(Path::new(&path), format!("{line}\n").as_bytes(), Duration::from_secs(10));
    match resp {
        Ok(Some(l)) => println!("FAULTS-ANSWER={l}"),
        other => println!("no answer: {other:?}"),
    }
}
