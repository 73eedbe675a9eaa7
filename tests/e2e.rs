//! End to end with the real slurmctld: jobs really run on "VMs" that are real slurmds started by the GCE
//! simulator when slurm-dws's resize requests succeed. Needs root and Debian's Slurm (`make test`
//! installs it); outside CI the tests say so and skip, under CI=true they fail.

use serde_json::{json, Value};
use slurm_dws::devcluster::stack::{Stack, StackNodeset, StackSpec};
use slurm_dws::devcluster::{self};
use std::time::{Duration, Instant};

fn slurm_available() -> bool {
    let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    let problem = if !nix::unistd::geteuid().is_root() {
        Some("not root".to_string())
    } else {
        devcluster::ensure_installed().err().map(|e| e.to_string())
    };
    match problem {
        None => true,
        Some(why) if ci => panic!("CI=true but a real Slurm cluster cannot run here: {why}"),
        Some(why) => {
            eprintln!("SKIPPED: end-to-end tests need root and Debian's Slurm: {why}");
            false
        }
    }
}

fn spec(nodesets: Vec<StackNodeset>, reconcile: &str) -> StackSpec {
    StackSpec {
        bin: env!("CARGO_BIN_EXE_slurm-dws").into(),
        sim_bin: env!("CARGO_BIN_EXE_slurm-dws-sim").into(),
        nodesets,
        reconcile: reconcile.into(),
        slurm_conf: vec![],
        time_scale: 1.0,
    }
}

fn wait<T>(s: &Stack, what: &str, secs: u64, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f() {
            return v;
        }
        if Instant::now() > deadline {
            panic!(
                "timed out after {secs}s waiting for {what}\n--- nodes ---\n{}\n--- slurm-dws nodes ---\n{}\n--- events ---\n{}\n--- daemon log ---\n{}\n--- slurmctld ---\n{}",
                s.cluster.node_states().map(|m| format!("{m:?}")).unwrap_or_default(),
                s.cli(&["nodes"]),
                s.cli(&["events"]),
                tail(&s.daemon_log(), 30),
                s.cluster.slurmctld_log_tail(30)
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

fn job_state(s: &Stack, job: u32) -> Option<String> {
    let q = s.cluster.squeue_json().ok()?;
    q["jobs"].as_array()?.iter().find(|j| j["job_id"].as_u64() == Some(job as u64))?["job_state"]
        .as_str()
        .map(String::from)
}

fn sacct_like_state(s: &Stack, job: u32) -> String {
    // Finished jobs leave squeue after MinJobAge; scontrol still knows them for a while.
    job_state(s, job)
        .or_else(|| {
            let out = s.cluster.scontrol(&["show", "job", &job.to_string()]).ok()?;
            out.split_whitespace().find_map(|w| w.strip_prefix("JobState=")).map(String::from)
        })
        .unwrap_or_default()
}

fn node_state(s: &Stack, node: &str) -> String {
    s.cluster.node_states().ok().and_then(|m| m.get(node).cloned()).unwrap_or_default()
}

fn requests(s: &Stack) -> Vec<Value> {
    s.cli_json(&["requests"]).as_array().cloned().unwrap_or_default()
}

/// Scenario 1: a 2-node job with --time=90 on powered-down nodes runs and completes; its resize request
/// asked for 90 min + boot_allowance; after SuspendTime the nodes are idle~ and the VMs gone; after
/// mig_gc_grace the MIG is gone.
#[test]
fn e2e_1_two_node_job_runs_and_everything_is_cleaned_up() {
    if !slurm_available() {
        return;
    }
    let s = Stack::start(spec(vec![StackNodeset::new("a", 0, 4)], "mig_gc_grace = 5")).unwrap();
    assert_eq!(node_state(&s, "hpc-a-0"), "idle~");
    let started = Instant::now();
    let out = s.cluster.dir().join("jobs").join("e2e1.out");
    let job = s
        .cluster
        .sbatch(&[
            "-N2",
            "--time=90",
            "-p",
            "a",
            "-o",
            out.to_str().unwrap(),
            "--wrap",
            "srun printenv SLURMD_NODENAME; sleep 3",
        ])
        .unwrap();
    wait(&s, "job RUNNING", 60, || (job_state(&s, job).as_deref() == Some("RUNNING")).then_some(()));
    eprintln!("[e2e-1] sbatch -> RUNNING in {:?}", started.elapsed());
    let rs = requests(&s);
    assert_eq!(rs.len(), 1, "{rs:?}");
    assert_eq!(rs[0]["run_duration"], 90 * 60 + 600, "TimeLimit + boot_allowance");
    assert_eq!(rs[0]["job_id"], job);
    assert_eq!(rs[0]["nodes"], json!(["hpc-a-0", "hpc-a-1"]));
    wait(&s, "job COMPLETED", 60, || (sacct_like_state(&s, job) == "COMPLETED").then_some(()));
    let mut ran: Vec<String> = std::fs::read_to_string(&out).unwrap().lines().map(String::from).collect();
    ran.sort();
    assert_eq!(ran, vec!["hpc-a-0", "hpc-a-1"], "the job really ran on both nodes");
    wait(&s, "nodes idle~ and VMs gone", 90, || {
        (node_state(&s, "hpc-a-0") == "idle~" && node_state(&s, "hpc-a-1") == "idle~" && s.vms().is_empty())
            .then_some(())
    });
    wait(&s, "MIG deleted after mig_gc_grace", 60, || s.migs().is_empty().then_some(()));
    eprintln!("[e2e-1] complete cycle in {:?}", started.elapsed());
}
