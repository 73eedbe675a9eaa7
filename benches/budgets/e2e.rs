//! End to end on a real slurmctld (devcluster `Stack`: real Slurm, the simulator with no capacity delay
//! whose VMs are real slurmds, the daemon): sbatch of a 2-node job on powered-down nodes → RUNNING.
//!
//! One stack, several jobs in a row: each job sleeps on, so the next one must power up two fresh nodes.
//! The time is from just before `sbatch` to the first `squeue` that shows the job RUNNING (polled every
//! 20 ms, so the figure is at most that late).

use crate::table::{Samples, Table};
use crate::Ctx;
use devcluster::stack::{Stack, StackNodeset, StackSpec};
use std::time::{Duration, Instant};

const JOBS: u32 = 5;

pub fn run(ctx: &Ctx, t: &mut Table) {
    let budget = "≤ 5000 ms";
    if !nix::unistd::geteuid().is_root() {
        t.failed("e2e sbatch 2 nodes → RUNNING", "needs root (a real slurmctld and slurmds)", budget);
        return;
    }
    if let Err(e) = devcluster::ensure_installed() {
        t.failed("e2e sbatch 2 nodes → RUNNING", &format!("Slurm not installed: {e}"), budget);
        return;
    }
    // The host's Slurm 22.05 (the budget is measured on one Slurm; tests/e2e.rs covers 24.11).
    let spec =
        StackSpec::new(ctx.bin.clone(), ctx.sim_bin.clone(), vec![StackNodeset::new("a", 0, 2 * JOBS)]);
    let started = Instant::now();
    let stack = match Stack::start(spec) {
        Ok(s) => s,
        Err(e) => {
            t.failed("e2e sbatch 2 nodes → RUNNING", &format!("stack: {e}"), budget);
            return;
        }
    };
    let stack_up = started.elapsed();
    let mut s = Samples::default();
    let mut jobs = Vec::new();
    for _ in 0..JOBS {
        let t0 = Instant::now();
        let job = match stack.cluster.sbatch(&["-N2", "--time=10", "-p", "a", "--wrap", "sleep 600"]) {
            Ok(j) => j,
            Err(e) => {
                t.failed("e2e sbatch 2 nodes → RUNNING", &format!("sbatch: {e}"), budget);
                return;
            }
        };
        jobs.push(job.to_string());
        loop {
            if job_state(&stack, job).as_deref() == Some("RUNNING") {
                s.push(t0.elapsed());
                break;
            }
            if t0.elapsed() > Duration::from_secs(90) {
                t.failed(
                    "e2e sbatch 2 nodes → RUNNING",
                    &format!("job {job} not RUNNING after 90 s; daemon log:\n{}", tail(&stack.daemon_log())),
                    budget,
                );
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let _ = stack.cluster.client("scancel").args(&jobs).status();
    t.timed("e2e real Slurm + sim: sbatch 2-node job → RUNNING", &s, Some(5000.0), None);
    t.note(format!(
        "e2e: {JOBS} jobs in a row on one stack (each on 2 powered-down nodes; the stack took {:.1} s to \
         start); Slurm's own timings are the devcluster's (power_save_interval=1)",
        stack_up.as_secs_f64()
    ));
}

fn job_state(stack: &Stack, job: u32) -> Option<String> {
    let out =
        stack.cluster.client("squeue").args(["-h", "-j", &job.to_string(), "-o", "%T"]).output().ok()?;
    Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn tail(s: &str) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}
