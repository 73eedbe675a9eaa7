//! Compares `hostlist::expand` and `hostlist::compress` with Slurm itself.
//!
//! `scontrol show hostnames EXPR` and `scontrol show hostlist LIST` need no running
//! controller, only a `slurm.conf` naming a cluster and a controller host (without one,
//! scontrol tries a DNS SRV lookup for "configless" mode and dies), so the test writes a
//! two-line one into a temporary directory and points `SLURM_CONF` at it.
//!
//! The expressions come from a seeded generator, so a failure is reproducible: zero
//! padding, mixed widths within a range and between ranges, several bracket groups,
//! several prefixes, duplicates, empty items, blanks as separators, and invalid forms. An
//! invalid expression passes when both sides reject it, or when we reject what Slurm
//! accepts in one of the ways `src/hostlist.rs` documents as deliberately stricter.

use std::path::{Path, PathBuf};
use std::process::Command;

use slurm_dws::hostlist::{compress, expand, HostlistError, RangeProblem};

/// How many expressions to compare; each costs two `scontrol` runs of a few milliseconds.
const EXPRESSIONS: usize = 700;

/// The oracle: `scontrol` with a throwaway `slurm.conf`.
struct Scontrol {
    bin: PathBuf,
    _dir: tempfile::TempDir,
    conf: PathBuf,
}

/// What `scontrol show hostnames` said about an expression. It exits 0 even when it
/// rejects one, so rejection is read from stderr ("Invalid hostlist: ...").
enum Verdict {
    Names(Vec<String>),
    Rejected(String),
}

impl Scontrol {
    fn find() -> Option<Self> {
        let path = std::env::var_os("PATH")?;
        let bin = std::env::split_paths(&path).map(|dir| dir.join("scontrol")).find(|p| p.is_file())?;
        let dir = tempfile::tempdir().expect("temp dir");
        let conf = dir.path().join("slurm.conf");
        std::fs::write(&conf, "ClusterName=oracle\nSlurmctldHost=localhost\n").expect("write slurm.conf");
        Some(Scontrol { bin, _dir: dir, conf })
    }

    fn run(&self, what: &str, arg: &str) -> (bool, String, String) {
        let out = Command::new(&self.bin)
            .args(["show", what, arg])
            .env("SLURM_CONF", &self.conf)
            .output()
            .expect("run scontrol");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    fn hostnames(&self, expr: &str) -> Verdict {
        let (ok, stdout, stderr) = self.run("hostnames", expr);
        if !ok || !stderr.trim().is_empty() {
            return Verdict::Rejected(stderr.trim().replace('\n', " | "));
        }
        Verdict::Names(stdout.lines().map(str::to_owned).collect())
    }

    fn hostlist(&self, names: &[String]) -> String {
        let (ok, stdout, stderr) = self.run("hostlist", &names.join(","));
        assert!(ok && stderr.is_empty(), "scontrol show hostlist failed: {stderr}");
        stdout.trim_end_matches('\n').to_owned()
    }
}

/// splitmix64: tiny, seedable, and the same on every platform and crate version.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn pick<'a>(&mut self, options: &[&'a str]) -> &'a str {
        options[self.below(options.len() as u64) as usize]
    }
}

const PREFIXES: &[&str] = &["n", "gpu-", "hpc-a3u-", "rack1-n", "n01-", "n1-", "", "A.b_", "x", "node"];
const BETWEEN: &[&str] = &["-", "x", "", "-r", "0"];

/// A number with `width` digits at least (zero padded), or fewer when `width` is 0.
fn padded(rng: &mut Rng, value: u64, min_width: usize) -> String {
    let extra = if rng.chance(30) { rng.below(3) as usize } else { 0 };
    format!("{value:0w$}", w = min_width + extra)
}

/// One range: `N` or `LO-HI`, with padding that sometimes differs between LO and HI.
fn range(rng: &mut Rng, max_hosts: u64) -> String {
    let lo = match rng.below(4) {
        0 => rng.below(10),
        1 => rng.below(120),
        2 => 95 + rng.below(10),
        _ => 990 + rng.below(20),
    };
    let lo_text = padded(rng, lo, 0);
    if rng.chance(35) {
        return lo_text;
    }
    let hi = lo + rng.below(max_hosts);
    let hi_text = if rng.chance(70) { format!("{hi:0w$}", w = lo_text.len()) } else { padded(rng, hi, 0) };
    format!("{lo_text}-{hi_text}")
}

fn group(rng: &mut Rng, max_hosts: u64) -> String {
    let n = 1 + rng.below(3);
    let ranges: Vec<String> = (0..n).map(|_| range(rng, max_hosts)).collect();
    format!("[{}]", ranges.join(","))
}

/// One valid item: a plain name or text with one to three bracket groups.
fn item(rng: &mut Rng) -> String {
    let prefix = rng.pick(PREFIXES);
    match rng.below(10) {
        0 => format!("{prefix}{}", rng.pick(&["login", "a", "b-c"])),
        1 | 2 => {
            let n = rng.below(130);
            format!("{prefix}{}", padded(rng, n, 0))
        }
        3..=6 => format!("{prefix}{}", group(rng, 12)),
        7 | 8 => {
            let g1 = group(rng, 4);
            let between = rng.pick(BETWEEN);
            format!("{prefix}{g1}{between}{}", group(rng, 4))
        }
        _ => format!(
            "{prefix}{}{}{}{}{}",
            group(rng, 3),
            rng.pick(BETWEEN),
            group(rng, 3),
            rng.pick(BETWEEN),
            group(rng, 3)
        ),
    }
}

/// A valid expression: items joined by commas (sometimes blanks or doubled commas), with
/// duplicated items, and leading or trailing separators now and then.
fn valid_expression(rng: &mut Rng) -> String {
    let n = 1 + rng.below(4);
    let mut items: Vec<String> = Vec::new();
    for _ in 0..n {
        if !items.is_empty() && rng.chance(15) {
            let again = items[rng.below(items.len() as u64) as usize].clone();
            items.push(again);
        } else {
            items.push(item(rng));
        }
    }
    let mut expr = String::new();
    if rng.chance(5) {
        expr.push(',');
    }
    for (i, it) in items.iter().enumerate() {
        if i > 0 {
            expr.push_str(rng.pick(&[",", ",", ",", ",", ",,", " ", ", ", "\t"]));
        }
        expr.push_str(it);
    }
    if rng.chance(5) {
        expr.push_str(rng.pick(&[",", " "]));
    }
    expr
}

/// An invalid (or oddly lenient) expression: a valid one with one defect put in.
fn invalid_expression(rng: &mut Rng) -> String {
    let base = valid_expression(rng);
    let prefix = rng.pick(PREFIXES);
    let defect = match rng.below(16) {
        0 => format!("{prefix}[7-3]"),
        1 => format!("{prefix}[]"),
        2 => format!("{prefix}[1-3]x"),
        3 => format!("{prefix}[[1-2]]"),
        4 => format!("{prefix}[1-3"),
        5 => format!("{prefix}1]"),
        6 => format!("{prefix}[a-c]"),
        7 => format!("{prefix}[1-]"),
        8 => format!("{prefix}[+1-3]"),
        9 => format!("{prefix}[1, 2]"),
        10 => format!("{prefix}[1-100000]"),
        11 => format!("{prefix}[1,,2]"),
        12 => format!("{prefix}[-1]"),
        13 => format!("{prefix}[1-2]]"),
        14 => format!("{prefix}[2-1,4]"),
        _ => format!("{prefix}[0-9]y[1-2]z"),
    };
    if rng.chance(50) {
        format!("{base},{defect}")
    } else {
        format!("{defect},{base}")
    }
}

/// The inputs Slurm accepts and `src/hostlist.rs` documents that we refuse.
fn documented_stricter(err: &HostlistError) -> bool {
    match err {
        HostlistError::UnclosedBracket { .. }
        | HostlistError::UnmatchedBracket { .. }
        | HostlistError::InvalidCharacter { .. }
        | HostlistError::NumberTooLarge { .. }
        | HostlistError::TooManyNames { .. } => true,
        HostlistError::InvalidRange { range, problem: RangeProblem::NotNumeric, .. } => {
            range.ends_with('-') || range.contains(['+', ' ', '\t'])
        }
        _ => false,
    }
}

#[test]
fn expand_and_compress_agree_with_scontrol() {
    let Some(scontrol) = Scontrol::find() else {
        eprintln!();
        eprintln!("!!!!!!!!!! hostlist oracle NOT RUN: `scontrol` is not on PATH !!!!!!!!!!");
        eprintln!("!!!!!!!!!! install slurm-client (make test does) to compare with Slurm !!!!!!!!!!");
        eprintln!();
        return;
    };
    #[allow(clippy::disallowed_methods)] // reports how long the real scontrol took
    let start = std::time::Instant::now();
    let mut rng = Rng(0x5EED_2205);
    let mut failures: Vec<String> = Vec::new();
    let (mut expand_ok, mut compress_ok, mut compress_total, mut both_reject, mut stricter) = (0, 0, 0, 0, 0);

    // A few fixed cases first, then the generated ones.
    let mut exprs: Vec<String> = [
        "n1,n2,n3,n05,n06,m1",
        "x-[01-03,7],y-9",
        "n[1-2]-[5-6]",
        "a[1-2]b[1-2]c[1-2]d[1-2]",
        "a,b,,c",
        "n[0-0]",
        "a[3-1]",
        "n[1-010]",
        "n[1-65536]",
        "",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    while exprs.len() < EXPRESSIONS {
        let expr = if rng.chance(20) { invalid_expression(&mut rng) } else { valid_expression(&mut rng) };
        exprs.push(expr);
    }

    for expr in &exprs {
        match (expand(expr), scontrol.hostnames(expr)) {
            (Ok(ours), Verdict::Names(theirs)) => {
                if ours == theirs {
                    expand_ok += 1;
                } else {
                    failures.push(format!(
                        "expand({expr:?}): ours {} names {:?}..., scontrol {} names {:?}...",
                        ours.len(),
                        &ours[..ours.len().min(8)],
                        theirs.len(),
                        &theirs[..theirs.len().min(8)]
                    ));
                    continue;
                }
                compress_total += 1;
                // One argv string may not exceed 128 KiB (Linux MAX_ARG_STRLEN): compress
                // the longest head of a very long list that still fits.
                let mut fits = 0;
                let mut len = 0;
                for name in &ours {
                    len += name.len() + 1;
                    if len > 100_000 {
                        break;
                    }
                    fits += 1;
                }
                let ours = &ours[..fits];
                let ours_c = compress(ours);
                let theirs_c = scontrol.hostlist(ours);
                if ours_c != theirs_c {
                    failures
                        .push(format!("compress(expand({expr:?})): ours {ours_c:?}, scontrol {theirs_c:?}"));
                } else if expand(&ours_c).as_deref() != Ok(ours) {
                    failures.push(format!("compress({expr:?}) = {ours_c:?} does not expand back"));
                } else {
                    compress_ok += 1;
                }
            }
            (Err(_), Verdict::Rejected(_)) => {
                expand_ok += 1;
                both_reject += 1;
            }
            (Err(err), Verdict::Names(_)) if documented_stricter(&err) => {
                expand_ok += 1;
                stricter += 1;
            }
            (Err(err), Verdict::Names(theirs)) => failures.push(format!(
                "expand({expr:?}): we reject ({err}), scontrol accepts: {:?}",
                &theirs[..theirs.len().min(8)]
            )),
            (Ok(ours), Verdict::Rejected(why)) => failures
                .push(format!("expand({expr:?}): we accept ({} names), scontrol rejects: {why}", ours.len())),
        }
    }

    println!(
        "hostlist oracle: {} expressions compared with scontrol (expand {expand_ok}/{}, \
         compress {compress_ok}/{compress_total}); {both_reject} rejected by both, \
         {stricter} rejected only by us as documented; {:.1}s",
        exprs.len(),
        exprs.len(),
        start.elapsed().as_secs_f64()
    );
    assert!(failures.is_empty(), "{} disagreements with scontrol:\n{}", failures.len(), failures.join("\n"));
    assert!(both_reject > 0 && stricter > 0, "the generator must exercise invalid input");
}

#[test]
fn scontrol_runs_without_a_controller() {
    // The oracle is only meaningful if scontrol really answers; check one known case so a
    // broken setup fails loudly instead of comparing against empty output.
    let Some(scontrol) = Scontrol::find() else {
        eprintln!("!!!!!!!!!! hostlist oracle NOT RUN: `scontrol` is not on PATH !!!!!!!!!!");
        return;
    };
    match scontrol.hostnames("x-[01-03,7],y-9") {
        Verdict::Names(names) => assert_eq!(names, ["x-01", "x-02", "x-03", "x-7", "y-9"]),
        Verdict::Rejected(why) => panic!("scontrol does not work here: {why}"),
    }
    assert!(Path::new(&scontrol.conf).is_file());
}
