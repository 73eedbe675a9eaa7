//! `make bench`: measures every performance budget of slurm-dws (set for a 2-core CI machine) and
//! prints one table — median with min/max, the budget, a baseline measured in the same run, and their
//! ratio.
//!
//! Sections (run all, or name some: `cargo bench --bench budgets -- hook scale queue stuck spot usage binary e2e`):
//! - `hook`:  whole-process hook latency (spawn to exit, as slurmctld sees it) against `/bin/true` and a
//!   minimal program that opens the same SQLite database and commits one row (`examples/sqlite_commit.rs`).
//! - `scale`: 10,000 nodes in 1,000 jobs against the simulator (its own process) and the real daemon (its
//!   own process) with a fake Slurm that answers like 22.05 for 10,000 nodes: GCE calls of the resume and
//!   of 10 steady passes (counted by the simulator), the daemon's peak RSS, its CPU per steady pass, and
//!   the pass's planning + store CPU in this process on the daemon's own 10k-node database.
//! - `queue`: 10,000 nodes in 2,000 (and 1,000) resize requests ACCEPTED for over 10 minutes: GCE
//!   read calls per minute and pass wall time.
//! - `stuck`: one nodeset's resize-request insert hangs: pass wall time and another nodeset's resume latency, with and without it.
//! - `spot`:  API calls of one 2-node job's life (resume → up → suspend → MIG collected) per provisioning
//!   model, flex and spot, against the simulator and the real daemon.
//! - `usage`: `slurm-dws usage` over 30 days of history at 10,000 nodes (VMs coming and going, jobs of
//!   20 users): the store's reads and the report in this process, and the whole command by every `--by`.
//! - `binary`: the release binary's size as installed (stripped), built with the shipped profile.
//! - `e2e`:   real slurmctld + simulator + daemon (devcluster `Stack`): sbatch of a 2-node job → RUNNING.
//!
//! Not part of `make test`: timings on a shared machine are measurements, not assertions.

// Measuring real time is what a benchmark is for.
#![allow(clippy::disallowed_methods)]

mod binary;
mod e2e;
mod fake_slurm;
mod hook;
mod process;
mod queue;
mod scale;
mod spot;
mod table;
mod usage;
mod waiting;
mod whole_pass;

use std::path::PathBuf;
use std::time::Instant;
use table::Table;

/// Paths every section needs.
pub struct Ctx {
    pub bin: PathBuf,
    pub sim_bin: PathBuf,
    /// The baseline program (`examples/sqlite_commit.rs`), built by `make bench`.
    pub baseline_bin: PathBuf,
}

fn main() {
    // `cargo bench` passes `--bench`; anything else not starting with `-` names a section.
    let wanted: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    let run = |s: &str| wanted.is_empty() || wanted.iter().any(|w| w == s);
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_slurm-dws"));
    let ctx = Ctx {
        baseline_bin: bin.with_file_name("examples").join("sqlite_commit"),
        sim_bin: devcluster::sim_bin(env!("CARGO_BIN_EXE_slurm-dws").as_ref()),
        bin,
    };
    let started = Instant::now();
    let mut t = Table::default();
    t.note(format!(
        "machine: {} CPUs, {}; binaries: {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        kernel(),
        ctx.bin.display()
    ));
    if run("hook") {
        hook::run(&ctx, &mut t);
    }
    if run("scale") {
        scale::run(&ctx, &mut t);
    }
    if run("queue") {
        queue::run(&ctx, &mut t);
    }
    if run("stuck") {
        queue::run_stuck(&ctx, &mut t);
    }
    if run("spot") {
        spot::run(&ctx, &mut t);
    }
    if run("waiting") {
        waiting::run(&ctx, &mut t);
    }
    if run("usage") {
        usage::run(&ctx, &mut t);
    }
    if run("binary") {
        binary::run(&ctx, &mut t);
    }
    if run("e2e") {
        e2e::run(&ctx, &mut t);
    }
    t.note(format!("total bench time {:.0} s", started.elapsed().as_secs_f64()));
    t.print();
}

fn kernel() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| format!("Linux {}", s.trim()))
        .unwrap_or_else(|_| "unknown kernel".into())
}

/// A bench config in `d` (cluster `hpc`, one dynamic nodeset `a` of `dynamic_max` nodes, GCE at
/// `endpoint`); `extra` goes right after `[gcp]`'s keys, so it may add to `[gcp]` and then open tables.
pub fn write_config(d: &std::path::Path, endpoint: &str, dynamic_max: u32, extra: &str) -> PathBuf {
    let text = format!(
        r#"cluster_name = "hpc"
state_dir = "{state}"
socket = "{sock}"
log_file = "{log}"

[gcp]
project = "bench-project"
region = "us-central1"
endpoint = "{endpoint}"
credentials = "none"
{extra}
[[nodeset]]
name = "a"
instance_template = "projects/bench-project/regions/us-central1/instanceTemplates/a-flex"
zones = ["us-central1-a"]
node_count_dynamic_max = {dynamic_max}
[nodeset.dws_flex]
"#,
        state = d.join("state").display(),
        sock = d.join("slurm-dws.sock").display(),
        log = d.join("slurm-dws.log").display(),
    );
    let path = d.join("slurm-dws.toml");
    std::fs::write(&path, text).expect("writing the bench config");
    path
}

/// CPU time of this whole process (every thread), for in-process measurements.
pub fn process_cpu() -> std::time::Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    std::time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}
