//! The release binary as installed: stripped, at most 20 MB. `make bench` builds the shipped profile
//! (fat LTO, one codegen unit); the binary is stripped into a temporary file, as `make install` and the
//! package install it, and its size is the row. `make test`'s package check builds a quicker profile
//! whose binary is larger (scripts/deb-test.sh), so the budget is measured here.

use crate::table::{Row, Table, Verdict};
use crate::Ctx;

const BUDGET_MB: f64 = 20.0;

pub fn run(ctx: &Ctx, t: &mut Table) {
    let what = "release binary, stripped as installed";
    let dir = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => return t.failed(what, &format!("a temporary directory: {e}"), "≤ 20 MB"),
    };
    let out = dir.path().join("slurm-dws");
    let status = std::process::Command::new("strip").arg("-o").arg(&out).arg(&ctx.bin).status();
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => return t.failed(what, &format!("strip {} exited {s}", ctx.bin.display()), "≤ 20 MB"),
        Err(e) => return t.failed(what, &format!("strip: {e}"), "≤ 20 MB"),
    }
    let size =
        |p: &std::path::Path| std::fs::metadata(p).map(|m| m.len() as f64 / (1024.0 * 1024.0)).unwrap_or(0.0);
    let (stripped, whole) = (size(&out), size(&ctx.bin));
    t.add(Row {
        what: what.into(),
        measured: format!("{stripped:.1} MB"),
        spread: format!("{whole:.1} MB with line tables"),
        budget: format!("≤ {BUDGET_MB:.0} MB"),
        baseline: "-".into(),
        ratio: "-".into(),
        verdict: if stripped <= BUDGET_MB { Verdict::Pass } else { Verdict::Fail },
    });
}
