//! Process faults: hooks SIGKILLed mid-commit, a full disk under the state directory, a database
//! locked by another process, slurmctld hanging or refusing while the daemon needs it.
//! (Clock jumps are planner table tests: `tests/clock_jumps.rs`. Daemon SIGKILL at random points is
//! the reconciler's own crash test.)

use super::common::World;
use super::resume_files::run_with_deadline;
use super::tally::{rows, runtime, snapshot, Kind, Rng, Tally};
use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

pub fn run() -> Vec<Tally> {
    type Fault = (&'static str, fn(&mut Tally));
    let parts: Vec<Fault> = vec![
        ("hooks killed mid-commit", kill_hooks_mid_commit),
        ("disk full (state dir)", disk_full),
        ("database locked", database_locked),
        ("slurmctld down", slurmctld_down),
    ];
    std::thread::scope(|s| {
        let hs: Vec<_> = parts
            .into_iter()
            .map(|(name, f)| {
                s.spawn(move || {
                    let mut t = Tally::new(name, Kind::Fault);
                    let started = Instant::now();
                    if let Err(p) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&mut t))) {
                        let msg = p
                            .downcast_ref::<String>()
                            .cloned()
                            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                            .unwrap_or_default();
                        t.fail(format!("panicked: {msg}"));
                    }
                    t.elapsed = started.elapsed();
                    t
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

fn hook_cmd(w: &World, kind: &str, hostlist: &str) -> Command {
    let link = w.path().join(format!("slurm-dws-{kind}"));
    if !link.exists() {
        let _ = std::os::unix::fs::symlink(super::common::BIN, &link);
    }
    let mut cmd = Command::new(link);
    cmd.arg(hostlist).env_clear().env("SLURM_DWS_CONFIG", &w.config).current_dir(w.path());
    cmd
}

async fn integrity(state_dir: &Path) -> String {
    use sqlx::{ConnectOptions, Row};
    let mut c = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(state_dir.join(slurm_dws::store::DB_FILE))
        .connect()
        .await
        .expect("open for integrity_check");
    let r = sqlx::query("PRAGMA integrity_check").fetch_one(&mut c).await.unwrap();
    r.get::<String, _>(0)
}

/// Hostlists (column 3) of the inbox rows.
fn inbox_hostlists(s: &super::tally::Snapshot) -> Vec<String> {
    rows(s, "inbox").iter().filter_map(|r| r.get(3).and_then(|h| h.as_str()).map(String::from)).collect()
}

// ---- SIGKILL while many hooks commit -----------------------------------------------------------------

const HOOKS: usize = 240;
const WAVE: usize = 16;

fn kill_hooks_mid_commit(t: &mut Tally) {
    let rt = runtime();
    let mut w = rt.block_on(World::new(&[("a", 0, HOOKS as u32, "")], ""));
    let mut rng = Rng(0x0C0F_FEE5);
    let mut completed: Vec<String> = Vec::new();
    let mut killed = 0usize;
    // No database yet: the first wave also races its creation and the migration.
    for wave in 0..HOOKS / WAVE {
        let mut children = Vec::new();
        for j in 0..WAVE {
            let i = wave * WAVE + j;
            let kind = if i % 3 == 2 { "suspend" } else { "resume" };
            let hostlist = format!("hpc-a-{i}");
            let child =
                hook_cmd(&w, kind, &hostlist).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
            let kill_after = rng.chance(50).then(|| Duration::from_micros(rng.below(25_000)));
            children.push((hostlist, child, kill_after));
        }
        let started = Instant::now();
        let mut pending: Vec<_> = children.into_iter().collect();
        while !pending.is_empty() {
            let mut still = Vec::new();
            for (h, mut c, k) in pending {
                if let Some(after) = k {
                    if started.elapsed() >= after {
                        let _ = c.kill();
                        let status = c.wait().unwrap();
                        if status.success() {
                            completed.push(h);
                        } else {
                            killed += 1;
                        }
                        continue;
                    }
                }
                match c.try_wait().unwrap() {
                    Some(s) if s.success() => completed.push(h),
                    Some(s) => t.fail(format!("hook {h} failed without being killed: {s}")),
                    None => still.push((h, c, k)),
                }
            }
            pending = still;
            std::thread::sleep(Duration::from_micros(500));
        }
    }
    t.tried += killed;
    let snap = rt.block_on(snapshot(&w.state_dir()));
    let check = rt.block_on(integrity(&w.state_dir()));
    if check != "ok" {
        t.fail(format!("integrity_check after {killed} kills: {check}"));
    }
    let recorded = inbox_hostlists(&snap);
    let unique: BTreeSet<&String> = recorded.iter().collect();
    if unique.len() != recorded.len() {
        t.fail("a hook's request is recorded twice");
    }
    for h in &completed {
        if !unique.contains(h) {
            t.fail(format!("hook {h} exited 0 but its request is not in the store"));
        }
    }
    // The note event and the inbox row are one commit: as many "not set" notes as resume rows. Two
    // hooks that commit the same note in the same millisecond share one row with count 2.
    let resumes =
        rows(&snap, "inbox").iter().filter(|r| r.get(2).and_then(|k| k.as_str()) == Some("resume")).count();
    let notes: usize = rows(&snap, "events")
        .iter()
        .filter(|e| e.get(2).and_then(|k| k.as_str()) == Some("resume_file"))
        .map(|e| e.get(5).and_then(|c| c.as_u64()).unwrap_or(1) as usize)
        .sum();
    if resumes != notes {
        t.fail(format!("{resumes} resume rows but {notes} resume_file events: a half-written commit"));
    }
    for r in rows(&snap, "inbox") {
        if r.get(4).and_then(|j| j.as_str()) != Some("[]") || r.get(1).is_none_or(|v| v.is_null()) {
            t.fail(format!("an inbox row is incomplete: {r:?}"));
        }
    }
    // And the daemon carries out every recorded request.
    w.start_daemon();
    let drained = (0..300).any(|_| {
        std::thread::sleep(Duration::from_millis(200));
        let s = rt.block_on(snapshot(&w.state_dir()));
        rows(&s, "inbox").iter().all(|r| !r.get(5).is_none_or(|p| p.is_null()))
    });
    if !drained {
        t.fail("the daemon did not process the inbox left by the killed hooks");
    }
    println!(
        "  hooks killed mid-commit: {} hooks, {killed} SIGKILLed, {} completed, {} recorded",
        HOOKS,
        completed.len(),
        recorded.len()
    );
}

// ---- disk full -------------------------------------------------------------------------------------

/// A tmpfs mounted for the test and unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: &Path, size: &str) -> Option<Tmpfs> {
        std::fs::create_dir_all(at).ok()?;
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size},mode=0700"), "tmpfs"])
            .arg(at)
            .status()
            .ok()?
            .success();
        ok.then(|| Tmpfs(at.to_path_buf()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let ok = Command::new("umount").arg(&self.0).status().is_ok_and(|s| s.success());
        if !ok {
            let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
}

/// Fills the file system holding `dir` with one file; returns its path.
fn fill(dir: &Path) -> PathBuf {
    use std::io::Write;
    let path = dir.join("filler");
    let mut f = std::fs::File::create(&path).unwrap();
    let chunk = vec![0u8; 4096];
    while f.write_all(&chunk).is_ok() {}
    let _ = f.sync_all();
    path
}

fn disk_full(t: &mut Tally) {
    if unsafe { libc::geteuid() } != 0 {
        t.skipped.push("not root: cannot mount a tmpfs to fill".into());
        return;
    }
    let rt = runtime();
    let w = rt.block_on(World::new(&[("a", 0, 64, "")], ""));
    let state = w.state_dir();
    {
        let Some(_mount) = Tmpfs::mount(&state, "2m") else {
            t.skipped.push("mount -t tmpfs failed (no CAP_SYS_ADMIN?)".into());
            return;
        };
        let first = hook_cmd(&w, "resume", "hpc-a-0").output().unwrap();
        assert!(
            first.status.success(),
            "hook before the disk fills: {}",
            String::from_utf8_lossy(&first.stderr)
        );
        let filler = fill(&state);
        let mut ok_rows = vec!["hpc-a-0".to_string()];
        let mut failed = 0;
        for i in 1..=12 {
            let h = format!("hpc-a-{i}");
            let kind = if i % 2 == 0 { "suspend" } else { "resume" };
            let out = run_with_deadline(hook_cmd(&w, kind, &h), Duration::from_secs(20));
            t.tried += 1;
            let Some(out) = out else {
                t.fail(format!("{kind} {h} on a full disk hung"));
                continue;
            };
            if out.status.success() {
                ok_rows.push(h);
            } else {
                failed += 1;
                check_loud(t, &out, &format!("{kind} {h} on a full disk"), &["full"]);
            }
        }
        if failed == 0 {
            t.fail("no hook failed on a full disk: the fault was not injected");
        }
        std::fs::remove_file(filler).unwrap();
        let after = hook_cmd(&w, "resume", "hpc-a-20").output().unwrap();
        t.check(after.status.success(), || {
            format!("a hook after the disk was freed: {}", String::from_utf8_lossy(&after.stderr))
        });
        ok_rows.push("hpc-a-20".into());
        let check = rt.block_on(integrity(&state));
        t.check(check == "ok", || format!("integrity_check after the disk was full: {check}"));
        let recorded = inbox_hostlists(&rt.block_on(snapshot(&state)));
        t.check(recorded == ok_rows, || {
            format!("recorded {recorded:?}, want exactly the hooks that exited 0: {ok_rows:?}")
        });
    }
    // Full before the database exists: the hook fails loudly, and leaves nothing that breaks the next.
    let _ = std::fs::remove_dir_all(&state);
    let Some(_mount) = Tmpfs::mount(&state, "2m") else {
        t.skipped.push("second tmpfs mount failed".into());
        return;
    };
    let filler = fill(&state);
    let out = run_with_deadline(hook_cmd(&w, "resume", "hpc-a-30"), Duration::from_secs(20));
    t.tried += 1;
    match out {
        None => t.fail("a hook creating its database on a full disk hung"),
        Some(out) if out.status.success() => t.fail("a hook creating its database on a full disk exited 0"),
        Some(out) => check_loud(t, &out, "creating the database on a full disk", &["full"]),
    }
    std::fs::remove_file(filler).unwrap();
    let again = hook_cmd(&w, "resume", "hpc-a-31").output().unwrap();
    t.check(again.status.success(), || {
        format!("the first hook after freeing the disk: {}", String::from_utf8_lossy(&again.stderr))
    });
    let recorded = inbox_hostlists(&rt.block_on(snapshot(&state)));
    t.check(recorded == ["hpc-a-31"], || format!("after a failed creation the store holds {recorded:?}"));
}

/// A run-time failure said loudly: exit 1, one error line naming `words`.
fn check_loud(t: &mut Tally, out: &Output, what: &str, words: &[&str]) {
    if let Some(p) = super::tally::refusal_problem(out, 1, words) {
        t.fail(format!("{what}: {p}"));
    }
}

// ---- database locked ---------------------------------------------------------------------------------

/// Holds `BEGIN EXCLUSIVE` on the database, from its own thread (another process as far as SQLite's
/// locks go: its own connection), until `hold` passes or the returned sender is dropped. Returns
/// once the lock is held.
fn hold_lock(state_dir: &Path, hold: Duration) -> (std::sync::mpsc::Sender<()>, std::thread::JoinHandle<()>) {
    let db = state_dir.join(slurm_dws::store::DB_FILE);
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let h = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            use sqlx::{ConnectOptions, Connection};
            let mut c = sqlx::sqlite::SqliteConnectOptions::new().filename(&db).connect().await.unwrap();
            sqlx::query("BEGIN EXCLUSIVE").execute(&mut c).await.unwrap();
            sqlx::query("INSERT OR REPLACE INTO meta (key, value) VALUES ('campaign_lock', 'held')")
                .execute(&mut c)
                .await
                .unwrap();
            ready_tx.send(()).unwrap();
            // Released on time, or early when the test says so (or drops the sender).
            let _ = tokio::task::spawn_blocking(move || release_rx.recv_timeout(hold)).await;
            sqlx::query("ROLLBACK").execute(&mut c).await.unwrap();
            c.close().await.unwrap();
        });
    });
    ready_rx.recv_timeout(Duration::from_secs(20)).expect("the lock is taken");
    (release_tx, h)
}

fn database_locked(t: &mut Tally) {
    let rt = runtime();
    let w = rt.block_on(World::new(&[("a", 0, 64, "")], ""));
    assert!(hook_cmd(&w, "resume", "hpc-a-0").output().unwrap().status.success(), "setup hook");
    // Locked briefly: the hook waits for it and succeeds.
    let (_release, holder) = hold_lock(&w.state_dir(), Duration::from_millis(1500));
    let started = Instant::now();
    let out = hook_cmd(&w, "resume", "hpc-a-1").output().unwrap();
    let took = started.elapsed();
    holder.join().unwrap();
    t.tried += 1;
    if !out.status.success() || took < Duration::from_millis(1000) {
        t.fail(format!(
            "a hook under a 1.5 s lock: exit {:?} after {took:?}: {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    // Locked for as long as the hook runs: past its busy timeout it gives up loudly, records nothing.
    let (release, holder) = hold_lock(&w.state_dir(), Duration::from_secs(40));
    let started = Instant::now();
    let out = run_with_deadline(hook_cmd(&w, "suspend", "hpc-a-2"), Duration::from_secs(30));
    let took = started.elapsed();
    drop(release);
    holder.join().unwrap();
    t.tried += 1;
    match out {
        None => t.fail("a hook under a lock hung for 30 s (its busy timeout is 10 s)"),
        Some(out) if out.status.success() => {
            t.fail("a hook exited 0 while the database was locked throughout")
        }
        Some(out) => {
            check_loud(t, &out, "a hook under a lock", &["locked"]);
            if took < Duration::from_secs(5) {
                t.fail(format!("a hook under a lock gave up after {took:?}: it must wait its busy timeout"));
            }
        }
    }
    let recorded = inbox_hostlists(&rt.block_on(snapshot(&w.state_dir())));
    t.check(recorded == ["hpc-a-0", "hpc-a-1"], || format!("after the locks the store holds {recorded:?}"));
}

// ---- slurmctld down ----------------------------------------------------------------------------------

fn write_script(path: &Path, body: &str) {
    let tmp = path.with_extension("new");
    std::fs::write(&tmp, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// Children of `pid` (processes whose parent it is).
fn children(pid: u32) -> usize {
    let Ok(dir) = std::fs::read_dir("/proc") else { return 0 };
    dir.filter_map(|e| e.ok())
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .filter(|s| {
            s.rsplit_once(')')
                .and_then(|(_, r)| r.split_whitespace().nth(1))
                .and_then(|p| p.parse::<u32>().ok())
                == Some(pid)
        })
        .count()
}

fn slurmctld_down(t: &mut Tally) {
    let rt = runtime();
    let mut w = rt.block_on(World::new(&[("a", 0, 16, "")], ""));
    let text =
        std::fs::read_to_string(&w.config).unwrap().replace("command_timeout = 5", "command_timeout = 1");
    std::fs::write(&w.config, text).unwrap();
    let bin = w.path().join("slurm-bin");
    let calls = w.path().join("slurm-calls.log");
    // slurmctld hangs: every Slurm command blocks (scontrol waits MessageTimeout and more).
    for p in ["scontrol", "squeue", "sinfo"] {
        write_script(&bin.join(p), &format!("echo \"hang $0 $*\" >> {}\nexec sleep 30", calls.display()));
    }
    w.start_daemon();
    let sock = w.path().join("slurm-dws.sock");
    assert!(w.hook("resume", "hpc-a-[0-1]", None).status.success());
    t.tried += 1;
    // The daemon answers while its Slurm calls hang, and GCE work goes on.
    let mut slow = 0;
    for _ in 0..10 {
        let started = Instant::now();
        let ok = slurm_dws_status(&sock);
        if !ok || started.elapsed() > Duration::from_secs(3) {
            slow += 1;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    if slow > 0 {
        t.fail(format!("{slow} of 10 status requests were slow or unanswered while Slurm hung"));
    }
    let up = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        w.wait_for("nodes up while Slurm hangs", 90, || {
            let s = w.node_states();
            (s.len() == 2 && s.values().all(|v| v == "up")).then_some(())
        })
    }));
    if up.is_err() {
        t.fail("a resume did not complete while slurmctld hung");
    }
    let status = w.cli_json(&["status"]);
    let errors = status["last_pass"]["errors"].to_string();
    if !errors.contains("did not finish within") {
        t.fail(format!("the last pass does not say Slurm timed out: {errors}"));
    }
    let pid = w.daemon.as_ref().unwrap().id();
    let kids = children(pid);
    if kids > 1 {
        t.fail(format!("the daemon has {kids} child processes: timed-out Slurm commands are left behind"));
    }
    // A clean stop is not held up by a hanging Slurm command.
    t.tried += 1;
    let started = Instant::now();
    let stopped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| w.stop_daemon()));
    if stopped.is_err() || started.elapsed() > Duration::from_secs(10) {
        t.fail(format!("SIGTERM while Slurm hangs: stopped in {:?}", started.elapsed()));
    }
    // slurmctld refuses (down): commands fail at once; each pass tries again.
    t.tried += 1;
    let calls2 = w.path().join("slurm-calls-2.log");
    for p in ["scontrol", "squeue", "sinfo"] {
        write_script(
            &bin.join(p),
            &format!(
                "echo \"$0 $*\" >> {}\necho 'slurm_load_jobs error: Unable to contact slurm controller (connect failure)' >&2\nexit 1",
                calls2.display()
            ),
        );
    }
    w.start_daemon();
    let passes = |w: &World| w.cli_json(&["status"])["last_pass"]["iteration"].as_u64().unwrap_or(0);
    let first = passes(&w);
    let retried = (0..100).any(|_| {
        std::thread::sleep(Duration::from_millis(200));
        passes(&w) >= first + 2
    });
    let n_calls = std::fs::read_to_string(&calls2).unwrap_or_default().lines().count();
    if !retried || n_calls < 2 {
        t.fail(format!("with slurmctld refusing, passes did not go on retrying ({n_calls} Slurm calls)"));
    }
    let status = w.cli_json(&["status"]);
    let errors = status["last_pass"]["errors"].to_string();
    if !errors.contains("Unable to contact slurm controller") {
        t.fail(format!("the pass report does not carry Slurm's error: {errors}"));
    }
}

fn slurm_dws_status(sock: &Path) -> bool {
    use std::io::{BufRead, BufReader, Write};
    let Ok(mut s) = std::os::unix::net::UnixStream::connect(sock) else { return false };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    if s.write_all(b"{\"v\":1,\"request\":\"status\"}\n").is_err() {
        return false;
    }
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line).is_ok() && line.contains("\"response\":\"status\"")
}
