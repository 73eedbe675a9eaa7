//! Hostlists: a mutational fuzz loop on `expand`/`compress`, garbage and edge cases compared with
//! Slurm's own `scontrol show hostnames`, and malformed hostlists given to the real hooks.
//!
//! `tests/hostlist_oracle.rs` already compares 700 mostly-valid expressions with scontrol and
//! `tests/hostlist_roundtrip.rs` has the basic round-trip properties; this part goes after the
//! edges: mutated garbage, numbers at Slurm's limits, control characters, and what a hook does
//! with them (exit 2, one line, nothing recorded). `fuzz/` holds the same loop as a cargo-fuzz target
//! for longer runs on nightly.

use super::common::World;
use super::tally::{changed_tables, refusal_problem, runtime, snapshot, Kind, Rng, Tally};
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config as PtConfig, TestRunner};
use slurm_dws::hostlist::{compress, expand, HostlistError, RangeProblem, MAX_NAMES};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

/// Fuzz iterations (bounded by [`FUZZ_BUDGET`] as well).
const FUZZ_ITERATIONS: usize = 60_000;
const FUZZ_BUDGET: Duration = Duration::from_secs(25);
/// Garbage expressions compared with scontrol (two short scontrol runs each).
const ORACLE_GARBAGE: usize = 300;
/// Property cases at Slurm's numeric limits compared with scontrol.
const ORACLE_EDGE_CASES: u32 = 80;

pub fn run() -> Vec<Tally> {
    let mut fuzz = Tally::new("hostlist: fuzz (expand/compress)", Kind::Input);
    fuzz_loop(&mut fuzz);
    let mut oracle = Tally::new("hostlist: vs scontrol", Kind::Input);
    match Scontrol::find() {
        Some(sc) => {
            garbage_vs_scontrol(&sc, &mut oracle);
            edges_vs_scontrol(&sc, &mut oracle);
        }
        None => oracle.skipped.push("scontrol not on PATH (make test installs it)".into()),
    }
    let mut hooks = Tally::new("hostlist: hook argument", Kind::Input);
    bad_hostlists_to_hooks(&mut hooks);
    vec![fuzz, oracle, hooks]
}

// ---- the fuzz loop ----------------------------------------------------------------------------------

const SEEDS: &[&str] = &[
    "hpc-a3u-[0-3,7],hpc-g2-12",
    "n[1-2]-[5-6]",
    "a[1-2]b[1-2]c[1-2]",
    "x-[01-03,7],y-9",
    "n[1-010]",
    "rack[1-2]-node[01-16]",
    "a,,b  c\td",
    "n[0-65535]",
    "n18446744073709551614",
    "n[3-1]",
    "n[1-3",
    "n1]",
    "",
];

const TOKENS: &[&str] = &[
    "[",
    "]",
    "-",
    ",",
    " ",
    "\t",
    "0",
    "1",
    "9",
    "00",
    "010",
    "65535",
    "65536",
    "99999",
    "18446744073709551614",
    "18446744073709551615",
    "99999999999999999999",
    "a",
    "x-",
    "n",
    ".",
    "_",
    "\n",
    "\r",
    "\0",
    "\u{7f}",
    "\u{85}",
    "é",
    "Ω",
    "\u{1F680}",
    "[0-3]",
    "[1,3-5]",
    "[]",
    "[[",
    "]]",
    "+",
    "\u{1b}[31m",
    "%s",
    "'",
    "\"",
];

fn mutate(rng: &mut Rng, s: &str) -> String {
    let mut chars: Vec<char> = s.chars().collect();
    let ops = 1 + rng.below(4);
    for _ in 0..ops {
        let at = rng.below(chars.len() as u64 + 1) as usize;
        match rng.below(6) {
            0 | 1 => {
                let t: Vec<char> = rng.pick(TOKENS).chars().collect();
                chars.splice(at..at, t);
            }
            2 if !chars.is_empty() => {
                let at = at.min(chars.len() - 1);
                let len = (1 + rng.below(3) as usize).min(chars.len() - at);
                chars.drain(at..at + len);
            }
            3 if !chars.is_empty() => {
                let at = at.min(chars.len() - 1);
                let len = (1 + rng.below(6) as usize).min(chars.len() - at);
                let dup: Vec<char> = chars[at..at + len].to_vec();
                chars.splice(at..at, dup);
            }
            4 => {
                let other: Vec<char> = rng.pick(SEEDS).chars().collect();
                let from = rng.below(other.len() as u64 + 1) as usize;
                chars.splice(at..at, other[from..].iter().copied());
            }
            _ => {
                if let Some(c) = chars.get_mut(at) {
                    *c = rng.pick(TOKENS).chars().next().unwrap_or('x');
                }
            }
        }
    }
    chars.into_iter().collect()
}

/// What must hold for any input: no panic; an error is one printable line; an expansion has at most
/// MAX_NAMES names, none empty or holding a separator, bracket or control character; and
/// `compress` of it expands back to exactly the same list.
fn invariants(expr: &str) -> Result<bool, String> {
    let result =
        std::panic::catch_unwind(|| expand(expr)).map_err(|_| format!("expand({expr:?}) panicked"))?;
    match result {
        Err(e) => {
            let msg = e.to_string();
            if msg.contains(|c: char| c.is_control()) {
                return Err(format!("expand({expr:?}) error is not one printable line: {msg:?}"));
            }
            Ok(false)
        }
        Ok(names) => {
            if names.len() > MAX_NAMES {
                return Err(format!("expand({expr:?}) gave {} names", names.len()));
            }
            if let Some(bad) = names.iter().find(|n| {
                n.is_empty()
                    || n.contains(|c: char| matches!(c, ',' | '[' | ']' | ' ' | '\t') || c.is_control())
            }) {
                return Err(format!("expand({expr:?}) gave the name {bad:?}"));
            }
            if names.len() <= 20_000 {
                let c = std::panic::catch_unwind(|| compress(&names))
                    .map_err(|_| format!("compress(expand({expr:?})) panicked"))?;
                if expand(&c).as_ref() != Ok(&names) {
                    return Err(format!("compress(expand({expr:?})) = {c:?} does not expand back"));
                }
            }
            Ok(true)
        }
    }
}

fn fuzz_loop(t: &mut Tally) {
    // Panics are caught and reported as failures; keep their messages off stderr.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let mut rng = Rng(0xF0F0_2205);
    let started = Instant::now();
    let mut corpus: Vec<String> = SEEDS.iter().map(|s| s.to_string()).collect();
    let (mut accepted, mut rejected) = (0usize, 0usize);
    for i in 0..FUZZ_ITERATIONS {
        if started.elapsed() > FUZZ_BUDGET {
            t.skipped.push(format!("fuzz stopped at the time budget after {i} of {FUZZ_ITERATIONS} inputs"));
            break;
        }
        let base = corpus[rng.below(corpus.len() as u64) as usize].clone();
        let expr = mutate(&mut rng, &base);
        t.tried += 1;
        match invariants(&expr) {
            Ok(true) => {
                accepted += 1;
                // Valid inputs are the interesting parents: their mutations reach deeper.
                if corpus.len() < 2000 && expr.len() < 200 {
                    corpus.push(expr);
                }
            }
            Ok(false) => rejected += 1,
            Err(what) => t.fail(what),
        }
    }
    std::panic::set_hook(hook);
    println!(
        "  hostlist fuzz: seed 0xF0F02205, {} inputs, {accepted} accepted, {rejected} rejected",
        t.tried
    );
}

// ---- against scontrol -------------------------------------------------------------------------------

/// `scontrol` with a throwaway two-line slurm.conf (it needs no controller to expand hostlists).
struct Scontrol {
    bin: PathBuf,
    _dir: tempfile::TempDir,
    conf: PathBuf,
}

enum Verdict {
    Names(Vec<String>),
    Rejected(String),
}

impl Scontrol {
    fn find() -> Option<Scontrol> {
        let path = std::env::var_os("PATH")?;
        let bin = std::env::split_paths(&path).map(|d| d.join("scontrol")).find(|p| p.is_file())?;
        let dir = tempfile::tempdir().ok()?;
        let conf = dir.path().join("slurm.conf");
        std::fs::write(&conf, "ClusterName=oracle\nSlurmctldHost=localhost\n").ok()?;
        Some(Scontrol { bin, _dir: dir, conf })
    }

    /// Time-boxed: scontrol loops for ever on some ranges that end at u64::MAX (we refuse those).
    fn hostnames(&self, expr: &str) -> Verdict {
        let mut cmd = Command::new(&self.bin);
        cmd.args(["show", "hostnames", expr]).env("SLURM_CONF", &self.conf);
        let Some(out) = super::resume_files::run_with_deadline(cmd, Duration::from_secs(5)) else {
            return Verdict::Rejected("scontrol did not finish within 5 s".into());
        };
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
        if !out.status.success() || !stderr.is_empty() {
            return Verdict::Rejected(stderr.replace('\n', " | "));
        }
        Verdict::Names(String::from_utf8_lossy(&out.stdout).lines().map(str::to_owned).collect())
    }
}

/// What `src/hostlist.rs` documents as deliberately stricter than Slurm (among them nested
/// brackets and junk inside a range, which Slurm accepts).
fn documented_stricter(err: &HostlistError) -> bool {
    matches!(
        err,
        HostlistError::UnclosedBracket { .. }
            | HostlistError::UnmatchedBracket { .. }
            | HostlistError::NestedBracket { .. }
            | HostlistError::InvalidCharacter { .. }
            | HostlistError::NumberTooLarge { .. }
            | HostlistError::TooManyNames { .. }
            | HostlistError::InvalidRange { problem: RangeProblem::NotNumeric, .. }
    )
}

/// Compares one expression; `None` when we agree with Slurm (or are stricter as documented).
fn compare(sc: &Scontrol, expr: &str, t: &mut Tally) {
    if expr.starts_with('-') {
        // scontrol would read it as an option: the oracle cannot be asked.
        return;
    }
    t.tried += 1;
    // scontrol cannot take a NUL in argv, and prints what it cannot expand in ways that are not
    // verdicts; both sides must at least not crash on it.
    match (expand(expr), sc.hostnames(expr)) {
        (Ok(ours), Verdict::Names(theirs)) if ours == theirs => {}
        (Ok(ours), Verdict::Names(theirs)) => t.fail(format!(
            "expand({expr:?}): ours {} names {:?}.., scontrol {} names {:?}..",
            ours.len(),
            &ours[..ours.len().min(5)],
            theirs.len(),
            &theirs[..theirs.len().min(5)]
        )),
        (Err(_), Verdict::Rejected(_)) => {}
        (Err(e), Verdict::Names(_)) if documented_stricter(&e) => {}
        (Err(e), Verdict::Names(theirs)) => t.fail(format!(
            "expand({expr:?}): we reject ({e}), scontrol accepts {:?}..",
            &theirs[..theirs.len().min(5)]
        )),
        (Ok(ours), Verdict::Rejected(why)) => t.accepted_wrongly(format!(
            "expand({expr:?}) gave {} names; scontrol rejects it: {why}",
            ours.len()
        )),
    }
}

fn garbage_vs_scontrol(sc: &Scontrol, t: &mut Tally) {
    let mut rng = Rng(0x0AC1_E5EE);
    // Printable garbage only: argv cannot hold NUL, and control characters are documented as ours
    // to refuse (covered by the fuzz loop and the hook cases).
    const PRINTABLE: &[&str] = &[
        "[", "]", "-", ",", " ", "0", "1", "7", "9", "00", "010", "65535", "65536", "99999", "a", "x-", "n",
        ".", "_", "[0-3]", "[1,3-5]", "[]", "+",
    ];
    for _ in 0..ORACLE_GARBAGE {
        let expr = if rng.chance(50) {
            let base = rng.pick(SEEDS).to_string();
            let mut e = mutate(&mut rng, &base);
            e.retain(|c| !c.is_control() && c.is_ascii());
            e
        } else {
            let n = 1 + rng.below(12);
            (0..n).map(|_| *rng.pick(PRINTABLE)).collect::<String>()
        };
        compare(sc, &expr, t);
    }
}

/// Property cases at the limits: ranges around Slurm's 65,536-host maximum, zero padding wider than
/// the number, numbers near u64::MAX, several groups, and separators around them.
fn edges_vs_scontrol(sc: &Scontrol, t: &mut Tally) {
    let number = proptest::prop_oneof![
        0u64..20,
        65_530u64..65_540,
        99_990u64..100_010,
        Just(u64::MAX - 2),
        Just(u64::MAX - 1),
        Just(u64::MAX),
    ];
    let range =
        (number.clone(), 0u64..5, proptest::prop_oneof![Just(0u64), Just(65_535), Just(65_536)], 0usize..8)
            .prop_map(|(lo, span, big, width)| {
                // Not up to u64::MAX itself: scontrol loops for ever there (see `hostnames`).
                let hi = lo.saturating_add(span).saturating_add(big).min(u64::MAX - 1);
                let lo = lo.min(hi);
                if span == 0 && big == 0 {
                    format!("{lo:0width$}")
                } else {
                    format!("{lo:0width$}-{hi}")
                }
            });
    let group = proptest::collection::vec(range, 1..3).prop_map(|r| format!("[{}]", r.join(",")));
    let item = ("[a-c]{1,2}-?", proptest::option::of(group.clone()), proptest::option::of(group), number)
        .prop_map(|(p, g1, g2, n)| match (g1, g2) {
            (None, None) => format!("{p}{n}"),
            (Some(a), None) => format!("{p}{a}"),
            (Some(a), Some(b)) => format!("{p}{a}x{b}"),
            (None, Some(b)) => format!("{p}{b}"),
        });
    let expr =
        (proptest::collection::vec(item, 1..3), proptest::prop_oneof![Just(","), Just(" "), Just(",,")])
            .prop_map(|(items, sep)| items.join(sep));
    let mut runner = TestRunner::new_with_rng(
        PtConfig { cases: ORACLE_EDGE_CASES, ..PtConfig::default() },
        proptest::test_runner::TestRng::deterministic_rng(proptest::test_runner::RngAlgorithm::ChaCha),
    );
    for _ in 0..ORACLE_EDGE_CASES {
        let tree = expr.new_tree(&mut runner).expect("strategy");
        compare(sc, &tree.current(), t);
    }
}

use proptest::strategy::Just;

// ---- through the hooks ------------------------------------------------------------------------------

pub const BAD_HOSTLISTS: &[&str] = &[
    "",
    ",",
    " \t ",
    "hpc-a-[1-3",
    "hpc-a-[3-1]",
    "hpc-a-[1-2]x",
    "hpc-a-]",
    "hpc-a-1]",
    "hpc-a-[]",
    "hpc-a-[a-b]",
    "hpc-a-[1,,2]",
    "hpc-a-[-1]",
    "hpc-a-[1-]",
    "hpc-a-[+1]",
    "hpc-a-[ 1]",
    "hpc-a-[[1]]",
    "hpc-a-[1-2]]",
    "hpc-a-[0-99999999]",
    "hpc-a-[0-65535]x[0-65535]",
    "hpc-a-99999999999999999999",
    "hpc-a-[18446744073709551615]",
    "hpc-a-\n1",
    "hpc-a-1\nhpc-a-2 FAKE LOG LINE",
    "hpc-a-1\r",
    "hpc-a-\u{7}",
    "\u{1b}[31mhpc-a-1",
    "hpc-a-\u{7f}",
    "hpc-a-\u{85}1",
    "hpc-a-[1-2],hpc-a-[",
];

fn bad_hostlists_to_hooks(t: &mut Tally) {
    let rt = runtime();
    let w = rt.block_on(World::new(&[("a", 0, 16, "")], ""));
    // A store that holds something, so "nothing changed" is a real comparison.
    let first = w.hook("resume", "hpc-a-0", None);
    assert!(first.status.success(), "setup hook: {}", String::from_utf8_lossy(&first.stderr));
    let log = w.path().join("slurm-dws.log");
    let mut next_before = None;
    for (i, bad) in BAD_HOSTLISTS.iter().enumerate() {
        let kind = ["resume", "suspend", "resume-fail"][i % 3];
        // The last case's "after" is this one's "before" (one snapshot per case).
        let before = match next_before.take() {
            Some(s) => s,
            None => rt.block_on(snapshot(&w.state_dir())),
        };
        let log_lines = std::fs::read_to_string(&log).unwrap_or_default().lines().count();
        let out = w.hook(kind, bad, None);
        t.tried += 1;
        if out.status.success() {
            t.accepted_wrongly(format!("{kind} {bad:?} exited 0"));
            continue;
        }
        if let Some(p) = refusal_problem(&out, 2, &["hostlist"]) {
            t.fail(format!("{kind} {bad:?}: {p}"));
        }
        let after = rt.block_on(snapshot(&w.state_dir()));
        let changed = changed_tables(&before, &after);
        next_before = Some(after);
        if !changed.is_empty() {
            t.state_changed(format!("{kind} {bad:?} changed {changed:?}"));
        }
        // The hook log gets exactly one line per call: a newline in the argument cannot forge lines.
        let now = std::fs::read_to_string(&log).unwrap_or_default().lines().count();
        if now != log_lines + 1 {
            t.fail(format!(
                "{kind} {bad:?}: the hook log grew by {} lines, want 1",
                now as i64 - log_lines as i64
            ));
        }
    }
}
