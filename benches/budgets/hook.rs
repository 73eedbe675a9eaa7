//! Hook latency as a whole process, spawn to exit, the way slurmctld sees it: `slurm-dws-resume` run by
//! its argv0 link with nothing but the config in its environment, stdio on /dev/null.
//!
//! The daemon is stood in for by what the hook can notice of it: the database is held open (the daemon's
//! pool keeps a connection), and the socket answers the wake-up with `ok` at once (what the daemon's
//! socket task does). So the hook pays its wake-up round trip, but the figure does not depend on a pass
//! running on the other core. Runs are interleaved (true, baselines, 1 node, 10k nodes, repeat) so drift
//! on a shared machine hits every figure alike.
//!
//! Holding the database open matters: the last connection to close a WAL database checkpoints it and
//! deletes the WAL, with four fsyncs. With the daemon down every hook is that last connection; that case
//! is measured too, after the main rounds.

use crate::table::{Samples, Table};
use crate::Ctx;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

const WARMUP: usize = 3;
const ROUNDS: usize = 41;

pub fn run(ctx: &Ctx, t: &mut Table) {
    if !ctx.baseline_bin.exists() {
        t.failed(
            "hook latency",
            &format!("{} missing: run `make bench` (it builds the example)", ctx.baseline_bin.display()),
            "≤ 10 ms",
        );
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let config = crate::write_config(d, "http://127.0.0.1:9/compute/v1/", 12_000, "");
    let link = d.join("slurm-dws-resume");
    std::os::unix::fs::symlink(&ctx.bin, &link).expect("hook link");
    // What slurmctld 22.05 hands over: one job of one node, and 1,000 jobs of 10 nodes.
    let resume_one = d.join("resume-file-1.json");
    std::fs::write(&resume_one, r#"{"jobs":[{"job_id":1,"nodes":"hpc-a-1"}],"all_nodes":"hpc-a-1"}"#)
        .expect("resume file");
    let resume_big = d.join("resume-file-10k.json");
    std::fs::write(&resume_big, resume_file_22_05(1000, 10)).expect("resume file");
    let _responder = WakeResponder::start(&d.join("slurm-dws.sock"));
    let state = d.join("state");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    // The database exists (migrations applied) before anything is measured, and stays open, as it does
    // while the daemon runs.
    let held = rt.block_on(async {
        let store = slurm_dws::store::Store::open(&state).await.expect("store opens");
        store.close().await;
        let opts = sqlx::sqlite::SqliteConnectOptions::new().filename(state.join(slurm_dws::store::DB_FILE));
        let mut conn: sqlx::SqliteConnection =
            sqlx::ConnectOptions::connect(&opts).await.expect("hold the database open");
        // A read maps the WAL index: from now on this connection counts as a user of the WAL.
        sqlx::query("SELECT count(*) FROM inbox").fetch_one(&mut conn).await.expect("read");
        conn
    });

    let true_cmd = || Command::new("/bin/true");
    let baseline_cmd = |mode: &str| {
        let mut c = Command::new(&ctx.baseline_bin);
        c.arg(&state).arg(mode);
        c
    };
    let hook_cmd = |hostlist: &str, resume_file: Option<&Path>| {
        let mut c = Command::new(&link);
        c.arg(hostlist).env_clear().env("SLURM_DWS_CONFIG", &config).current_dir(d);
        if let Some(f) = resume_file {
            c.env("SLURM_RESUME_FILE", f);
        }
        c
    };
    let log = d.join("slurm-dws.log");
    let mut m_true = Measured::default();
    let mut m_base = Measured::default();
    let mut m_full = Measured::default();
    let mut m_one = Measured::default();
    let mut m_big = Measured::default();
    for round in 0..WARMUP + ROUNDS {
        let keep = round >= WARMUP;
        m_true.run(true_cmd(), keep, &log);
        m_base.run(baseline_cmd("normal"), keep, &log);
        m_full.run(baseline_cmd("full"), keep, &log);
        m_one.run(hook_cmd("hpc-a-1", Some(&resume_one)), keep, &log);
        m_big.run(hook_cmd("hpc-a-[0-9999]", Some(&resume_big)), keep, &log);
    }
    // The daemon down: nobody else holds the database, so each process checkpoints it as it exits.
    rt.block_on(async { sqlx::Connection::close(held).await.expect("close") });
    let mut m_down_base = Measured::default();
    let mut m_down_one = Measured::default();
    for round in 0..WARMUP + ROUNDS / 2 {
        m_down_base.run(baseline_cmd("normal"), round >= WARMUP, &log);
        m_down_one.run(hook_cmd("hpc-a-1", Some(&resume_one)), round >= WARMUP, &log);
    }
    check_recorded(d);

    let base = m_base.wall.median();
    t.timed("baseline: spawn /bin/true", &m_true.wall, None, None);
    t.timed("baseline: open the DB, commit 1 row (examples/sqlite_commit)", &m_base.wall, None, None);
    t.timed("hook slurm-dws-resume, 1 node", &m_one.wall, Some(10.0), Some(("sqlite", base)));
    t.timed(
        "hook slurm-dws-resume, 10k nodes + 1k-job resume file",
        &m_big.wall,
        Some(100.0),
        Some(("sqlite", base)),
    );
    t.timed(
        "  context: hook, 1 node — its own CPU time",
        &m_one.cpu,
        None,
        Some(("sqlite", m_base.cpu.median())),
    );
    t.timed(
        "  context: hook, 10k nodes — its own CPU time",
        &m_big.cpu,
        None,
        Some(("sqlite", m_base.cpu.median())),
    );
    t.timed("  context: baseline commit with synchronous=FULL", &m_full.wall, None, Some(("sqlite", base)));
    t.timed("  context: daemon down — baseline (last close checkpoints)", &m_down_base.wall, None, None);
    t.timed(
        "  context: daemon down — hook, 1 node",
        &m_down_one.wall,
        None,
        Some(("sqlite", m_down_base.wall.median())),
    );
    t.note(format!(
        "hook / spawning /bin/true ({:.2} ms): 1 node {:.1}×, 10k nodes {:.1}×. The sqlite baseline is a \
         process that opens the hook's database with the store's pragmas and commits one row; CPU rows \
         are the child's user+system time (wait4), less sensitive to other load than wall time",
        m_true.wall.median(),
        m_one.wall.median() / m_true.wall.median(),
        m_big.wall.median() / m_true.wall.median()
    ));
}

/// Spawn to exit (wall), and the child's own CPU time (user + system). The child is reaped by `wait4`
/// (std's `wait` cannot report its rusage).
#[allow(clippy::zombie_processes)]
fn time(mut cmd: Command) -> Timing {
    cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
    let start = Instant::now();
    let child = cmd.spawn().expect("spawn");
    let mut status = 0;
    // SAFETY: an all-zero rusage is valid; wait4 fills it and the status for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    let wall = start.elapsed();
    assert_eq!(pid, child.id() as i32, "wait4: {}", std::io::Error::last_os_error());
    let tv = |t: libc::timeval| t.tv_sec as f64 * 1e3 + t.tv_usec as f64 / 1e3;
    Timing {
        wall,
        cpu_ms: tv(usage.ru_utime) + tv(usage.ru_stime),
        ok: libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
    }
}

struct Timing {
    wall: std::time::Duration,
    cpu_ms: f64,
    ok: bool,
}

/// Wall and CPU samples of one program.
#[derive(Default)]
struct Measured {
    wall: Samples,
    cpu: Samples,
}

impl Measured {
    fn run(&mut self, cmd: Command, keep: bool, log: &Path) {
        let t = time(cmd);
        assert!(t.ok, "a measured program failed: see {}", log.display());
        if keep {
            self.wall.push(t.wall);
            self.cpu.push_ms(t.cpu_ms);
        }
    }
}

/// The hooks really recorded what they were given (a bench of a hook that fails early means nothing).
fn check_recorded(d: &Path) {
    let log = std::fs::read_to_string(d.join("slurm-dws.log")).unwrap_or_default();
    assert!(
        log.contains("10000 nodes, 1000 jobs recorded") && log.contains("1 node, 1 job recorded"),
        "the hook log does not show the recorded requests:\n{}",
        log.lines().rev().take(5).collect::<Vec<_>>().join("\n")
    );
    assert!(log.contains("daemon woken"), "the wake-up stand-in was not reached");
}

/// A 22.05-shaped SLURM_RESUME_FILE: `jobs` jobs of `per_job` nodes each, `hpc-a-0` onwards.
pub fn resume_file_22_05(jobs: u32, per_job: u32) -> String {
    let list: Vec<serde_json::Value> = (0..jobs)
        .map(|j| {
            serde_json::json!({
                "job_id": j + 1,
                "nodes": format!("hpc-a-[{}-{}]", j * per_job, j * per_job + per_job - 1),
            })
        })
        .collect();
    serde_json::json!({"jobs": list, "all_nodes": format!("hpc-a-[0-{}]", jobs * per_job - 1)}).to_string()
}

/// Answers every connection on the daemon's socket path with `{"response":"ok"}`, as the daemon does to a
/// wake-up. Stops when dropped (the socket file goes with the temp dir).
struct WakeResponder {
    _thread: std::thread::JoinHandle<()>,
}

impl WakeResponder {
    fn start(path: &Path) -> WakeResponder {
        let listener = std::os::unix::net::UnixListener::bind(path).expect("bind the wake-up stand-in");
        let thread = std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                let mut line = String::new();
                let Ok(reader) = conn.try_clone() else { continue };
                if BufReader::new(reader).read_line(&mut line).is_ok() {
                    let _ = conn.write_all(b"{\"response\":\"ok\"}\n");
                }
            }
        });
        WakeResponder { _thread: thread }
    }
}
