//! CLI arguments: unknown flags on every subcommand, missing and extra arguments, bad values for
//! every option (`--since`, `--until`, `--by`, `--limit`, `--state`, `--nodeset`, `--sort`, `-o/--format`, node names). Each must exit 2
//! with one line on stderr that names what is wrong, and leave the store as it was.

use super::common::{World, BIN};
use super::tally::{changed_tables, refusal_problem, runtime, snapshot, Kind, Tally};
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::process::Command;

const SUBCOMMANDS: &[&str] = &[
    "check-config",
    "version",
    "daemon",
    "resume",
    "suspend",
    "resume-fail",
    "status",
    "nodes",
    "requests",
    "migs",
    "events",
    "explain",
    "usage",
    "gc",
    "reconcile",
];

/// (argv after `--config C`, words the error must contain).
fn cases() -> Vec<(Vec<OsString>, Vec<&'static str>)> {
    let s = |v: &[&str]| v.iter().map(OsString::from).collect::<Vec<_>>();
    let mut cs: Vec<(Vec<OsString>, Vec<&'static str>)> = Vec::new();
    for sub in SUBCOMMANDS {
        cs.push((s(&[sub, "--bogus"]), vec!["--bogus"]));
        cs.push((s(&[sub, "-Z"]), vec!["-Z"]));
    }
    for sub in ["nodes", "requests", "migs", "events"] {
        cs.push((s(&[sub, "--sort", "nope"]), vec!["nope"]));
        cs.push((s(&[sub, "--sort"]), vec!["--sort"]));
        cs.push((s(&[sub, "--json=maybe"]), vec!["--json"]));
        cs.push((s(&[sub, "-o", "nope"]), vec!["unknown field 'nope'"]));
        cs.push((s(&[sub, "--format=,,nope"]), vec!["'nope'"]));
        cs.push((s(&[sub, "-o", ""]), vec!["--format"]));
        cs.push((s(&[sub, "-o"]), vec!["--format"]));
    }
    let since_bad = [
        "yesterday",
        "15x",
        "-5m",
        "1.5h",
        "",
        "99999999999999999999d",
        "9999999999999d",
        "999999999999999s",
        "2026-13-01T00:00:00Z",
        "2026-11-23 12:00",
        "1e3s",
        "15 m",
        "٣m",
    ];
    for v in since_bad {
        cs.push((s(&["events", &format!("--since={v}")]), vec!["--since"]));
        cs.push((s(&["usage", &format!("--since={v}")]), vec!["--since"]));
        cs.push((s(&["usage", &format!("--until={v}")]), vec!["--until"]));
    }
    for v in ["users", "JOB", "", "node"] {
        cs.push((s(&["usage", &format!("--by={v}")]), vec!["--by"]));
    }
    cs.push((s(&["usage", "--json", "--csv"]), vec!["--csv"]));
    cs.push((s(&["usage", "--since", "1d", "--until", "2d"]), vec!["not before --until"]));
    cs.push((
        s(&["usage", "--since", "2026-11-02T00:00:00Z", "--until", "2026-11-02T00:00:00Z"]),
        vec!["not before --until"],
    ));
    for v in ["x", "1.5", "99999999999999999999", ""] {
        cs.push((s(&["events", &format!("--limit={v}")]), vec!["--limit"]));
    }
    for v in ["bogus", "UP", ""] {
        cs.push((s(&["nodes", &format!("--state={v}")]), vec!["state"]));
    }
    for v in ["nope", "A3U", ""] {
        cs.push((s(&["nodes", &format!("--nodeset={v}")]), vec!["nodeset"]));
    }
    for v in ["hpc-a-[1-", "hpc-a-[2-1]", "x]", "a\nb"] {
        cs.push((s(&["nodes", v]), vec!["hostlist"]));
    }
    for v in ["other-a-1", "hpc-a-99", "hpc-a-01", "hpc-zz-1", "hpc-a-[1-2]", "", "hpc-a-1\nhpc-a-2"] {
        cs.push((s(&["explain", v]), vec!["slurm-dws node"]));
    }
    // Missing and extra arguments.
    for (argv, words) in [
        (vec!["explain"], vec!["NODE"]),
        (vec!["resume"], vec!["HOSTLIST"]),
        (vec!["suspend", "hpc-a-1", "hpc-a-2"], vec!["hpc-a-2"]),
        (vec!["status", "extra"], vec!["extra"]),
        (vec!["gc", "--dry-run", "now"], vec!["now"]),
        (vec![], vec!["subcommand"]),
        (vec!["no-such-command"], vec!["no-such-command"]),
        (vec!["--log-format", "xml", "status"], vec!["xml"]),
        (vec!["status", "--config"], vec!["--config"]),
    ] {
        cs.push((s(&argv), words));
    }
    // Not UTF-8.
    cs.push((vec!["explain".into(), OsString::from_vec(b"hpc-a-\xff".to_vec())], vec!["UTF-8"]));
    cs.push((vec!["resume".into(), OsString::from_vec(b"hpc-a-[1-\xfe]".to_vec())], vec!["UTF-8"]));
    cs
}

pub fn run() -> Vec<Tally> {
    let mut t = Tally::new("CLI arguments", Kind::Input);
    let rt = runtime();
    let w = rt.block_on(World::new(&[("a", 0, 16, "")], ""));
    assert!(w.hook("resume", "hpc-a-[0-1]", None).status.success(), "setup hook");
    let mut next_before = None;
    for (argv, words) in cases() {
        // The last case's "after" is this one's "before" (one snapshot per case).
        let before = match next_before.take() {
            Some(s) => s,
            None => rt.block_on(snapshot(&w.state_dir())),
        };
        let out = Command::new(BIN).arg("--config").arg(&w.config).args(&argv).output().unwrap();
        t.tried += 1;
        let shown: Vec<String> = argv.iter().map(|a| a.to_string_lossy().into_owned()).collect();
        if out.status.success() {
            t.accepted_wrongly(format!("slurm-dws {shown:?} exited 0"));
            continue;
        }
        if let Some(p) = refusal_problem(&out, 2, &words) {
            t.fail(format!("slurm-dws {shown:?}: {p}"));
        }
        let after = rt.block_on(snapshot(&w.state_dir()));
        let changed = changed_tables(&before, &after);
        next_before = Some(after);
        if !changed.is_empty() {
            t.state_changed(format!("slurm-dws {shown:?} changed {changed:?}"));
        }
    }
    // --help and --version are not errors: exit 0 (clap prints them in full).
    for argv in [&["--help"][..], &["nodes", "--help"], &["--version"]] {
        t.tried += 1;
        let out = Command::new(BIN).args(argv).output().unwrap();
        if out.status.code() != Some(0) || out.stdout.is_empty() {
            t.fail(format!("slurm-dws {argv:?}: exit {:?}, want 0 with output", out.status.code()));
        }
    }
    vec![t]
}
