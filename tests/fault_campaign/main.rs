//! The fault campaign (issue 9): bad input to every entry point, process faults, security.
//!
//! One test, [`fault_campaign`], runs every part on its own thread (they share nothing but the
//! machine), collects what each tried and what held, and ends with ONE summary line, e.g.
//!
//! ```text
//! fault campaign: 1432 inputs tried across 5 entry points, 0 accepted wrongly, 0 state changes on rejection; ...
//! ```
//!
//! The line is also written to `target/tmp/fault-campaign.txt`, which `make test` prints last (test
//! runners hide a passing test's output). Every part is seeded and bounded: the whole campaign stays
//! well under five minutes on a 2-core machine. `docs/fault-campaign.md` is the table of what is
//! injected and what slurm-dws does about it.
//!
//! The GCE-fault storm (error storms, hanging calls, stuck requests against the daemon) is not here:
//! it lives with the reconciler's own tests.

// Real processes (hooks, the daemon, scontrol), real sockets and a time-boxed fuzzer: real time.
#![allow(clippy::disallowed_methods)]

#[path = "../common/mod.rs"]
mod common;

mod cli_args;
mod configs;
mod hostlists;
mod process;
mod resume_files;
mod security;
mod socket;
mod tally;

use std::time::{Duration, Instant};
use tally::Tally;

/// Runs one part, turning a panic into a failure of that part (so the others still report).
fn part(name: &'static str, f: fn() -> Vec<Tally>) -> std::thread::JoinHandle<Vec<Tally>> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let started = Instant::now();
            let mut ts = match std::panic::catch_unwind(f) {
                Ok(ts) => ts,
                Err(p) => {
                    let msg = p
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default();
                    let mut t = Tally::new(name, tally::Kind::Fault);
                    t.fail(format!("part panicked: {msg}"));
                    vec![t]
                }
            };
            for t in &mut ts {
                t.elapsed = started.elapsed();
            }
            ts
        })
        .unwrap()
}

/// The whole campaign must end well within `make test`'s budget; a part still running after this
/// is reported by name (a hang is a finding, not a reason to wait for ever).
const WATCHDOG: Duration = Duration::from_secs(280);

#[test]
fn fault_campaign() {
    let started = Instant::now();
    // `FAULTS_PARTS=socket,configs` runs only those parts (while working on one).
    let only = std::env::var("FAULTS_PARTS").ok();
    type Part = (&'static str, fn() -> Vec<Tally>);
    let all: Vec<Part> = vec![
        // The daemon-backed parts go first so their waits overlap the CPU-bound ones.
        ("socket", socket::run),
        ("process", process::run),
        ("security", security::run),
        ("resume files", resume_files::run),
        ("configs", configs::run),
        ("cli args", cli_args::run),
        ("hostlists", hostlists::run),
    ];
    let mut running: Vec<(&'static str, std::thread::JoinHandle<Vec<Tally>>)> = all
        .into_iter()
        .filter(|(name, _)| only.as_deref().is_none_or(|o| o.split(',').any(|p| p.trim() == *name)))
        .map(|(name, f)| (name, part(name, f)))
        .collect();
    let mut tallies: Vec<Tally> = Vec::new();
    while !running.is_empty() {
        if started.elapsed() > WATCHDOG {
            let stuck: Vec<&str> = running.iter().map(|(n, _)| *n).collect();
            panic!("fault campaign: parts still running after {WATCHDOG:?}: {stuck:?}");
        }
        let (done, still): (Vec<_>, Vec<_>) = running.into_iter().partition(|(_, h)| h.is_finished());
        for (name, h) in done {
            let ts = h.join().unwrap();
            eprintln!("fault campaign: part {name:?} done after {:.1}s", started.elapsed().as_secs_f64());
            tallies.extend(ts);
        }
        running = still;
        std::thread::sleep(Duration::from_millis(50));
    }
    let summary = tally::summary(&tallies, started.elapsed());
    for t in &tallies {
        println!("{}", t.line());
    }
    println!("{summary}");
    let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("fault-campaign.txt");
    let _ = std::fs::write(&out, format!("{summary}\n"));
    let failures: Vec<String> =
        tallies.iter().flat_map(|t| t.failures.iter().map(move |f| format!("[{}] {f}", t.name))).collect();
    assert!(failures.is_empty(), "{} campaign failures:\n{}\n{summary}", failures.len(), failures.join("\n"));
}

/// Not a test of its own: the socket part re-runs this binary under another uid to act as a
/// client of the daemon (`FAULTS_SOCKET_CLIENT` = socket path, `FAULTS_SOCKET_SEND` = the line).
#[test]
fn socket_client_helper() {
    socket::client_helper();
}
