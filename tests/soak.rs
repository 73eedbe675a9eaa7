//! The soak (issue 28): a seeded workload of dozens of jobs on real Slurm (22.05, the host's) and the
//! simulator, across a flex nodeset with a static node (`a`), an exclusive flex nodeset (`b`) and a
//! spot nodeset (`sp`), with jobs for one partition and for two (`-p a,b`); while it runs: a stockout,
//! an error storm (429/503/403 on a quarter of the calls for 20 s), a SIGKILL of the daemon and its
//! restart, a slurmctld restart, a spot preemption and the static node's VM expiring. It ends with
//! every invariant checked (see `invariants`) and prints its figures.
//!
//! `SOAK_SEED=N` reruns a seed (it is printed at the start and on failure); `SOAK_JOBS=N` sets the
//! workload (default 24: about three minutes on 2 cores); `make soak SOAK_MINUTES=M` runs a longer one
//! (`SOAK_JOBS` = 12 a minute). Needs root, as the other real-Slurm tests; skipped with a message
//! outside CI when Slurm cannot run here, a failure with `CI=true`.

// Real slurmctld, slurmds and daemon: this waits for them in real time.
#![allow(clippy::disallowed_methods)]

use devcluster::stack::{Stack, StackNodeset, StackSpec};
use devcluster::wait::poll;
use devcluster::SlurmGeneration;
use rand::{rngs::StdRng, Rng, SeedableRng};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// How long the end's quiet window lasts: 15 passes at the stack's 2 s interval. A minute would
/// take a quarter of `make test`'s soak budget; 15 passes of nothing to do show the same thing
/// (every pass reads, none writes), and `make soak` keeps the minute (`SOAK_QUIET_SECS`).
const QUIET_SECS_DEFAULT: u64 = 30;

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// How often the soak's waits poll.
const POLL: Duration = Duration::from_millis(300);

/// A timed-out wait's panic message: `timed_out` (from [`poll`]) with the seed to rerun and the
/// stack's state.
fn seeded(s: &Stack, seed: u64, timed_out: String) -> String {
    format!("soak seed {seed}: {timed_out}\n{}\nrerun: SOAK_SEED={seed}", s.state_dump(Some(40)))
}

fn node_state(s: &Stack, node: &str) -> String {
    s.cluster.node_states().ok().and_then(|m| m.get(node).cloned()).unwrap_or_default()
}

/// GCE calls that change something, by method, from the simulator's counts.
fn writes(s: &Stack) -> u64 {
    let calls = s.sim_get("calls");
    calls["by_method"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter(|(k, _)| {
                    let verb = k.rsplit('.').next().unwrap_or_default();
                    !matches!(verb, "get" | "list" | "aggregatedList" | "listManagedInstances" | "wait")
                })
                .filter_map(|(_, v)| v.as_u64())
                .sum()
        })
        .unwrap_or(0)
}

fn all_calls(s: &Stack) -> u64 {
    let calls = s.sim_get("calls");
    calls["by_method"].as_object().map(|m| m.values().filter_map(Value::as_u64).sum()).unwrap_or(0)
}

#[test]
fn soak_22_05() {
    soak(SlurmGeneration::Bookworm)
}

fn soak(slurm: SlurmGeneration) {
    if !slurm.available_for_tests("the soak") {
        return;
    }
    let seed = env_u64("SOAK_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_secs())
    });
    let jobs_wanted =
        env_u64("SOAK_JOBS").or_else(|| env_u64("SOAK_MINUTES").map(|m| m * 12)).unwrap_or(24).max(6)
            as usize;
    let quiet_secs = env_u64("SOAK_QUIET_SECS").unwrap_or(QUIET_SECS_DEFAULT);
    eprintln!("[soak] seed {seed} ({jobs_wanted} jobs on {slurm}); rerun with SOAK_SEED={seed}");
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        eprintln!("[soak] FAILED with seed {seed}: rerun with SOAK_SEED={seed}");
        previous(info)
    }));
    let mut rng = StdRng::seed_from_u64(seed);
    let started = Instant::now();

    let bin = env!("CARGO_BIN_EXE_slurm-dws");
    let nodesets = vec![
        StackNodeset::new("a", 1, 3),
        StackNodeset::new("b", 0, 3).with_lines("exclusive = true"),
        StackNodeset::new("sp", 0, 3).model("spot"),
    ];
    let spec = StackSpec {
        reconcile: "mig_gc_grace = 5\nbackoff_initial = 10\nbackoff_max = 20".into(),
        slurm,
        ..StackSpec::new(bin, devcluster::sim_bin(bin.as_ref()), nodesets)
    };
    let mut s = Stack::start(spec).unwrap();
    poll(
        "the static node provisioned and idle",
        90,
        POLL,
        |m| seeded(&s, seed, m),
        || (node_state(&s, "hpc-a-0") == "idle").then_some(()),
    );
    s.sim_post("calls/reset", &json!({}));

    // The workload: each job one or two nodes, for one partition or two, a few seconds long.
    let partitions = ["a", "b", "sp", "a,b", "a,sp"];
    let mut jobs: Vec<u32> = Vec::new();
    let mut faults: BTreeMap<&str, u32> = BTreeMap::new();
    let submit = |s: &Stack, rng: &mut StdRng, n: usize, jobs: &mut Vec<u32>| {
        for _ in 0..n {
            let p = partitions[rng.gen_range(0..partitions.len())];
            let nodes = if rng.gen_bool(0.25) { "2" } else { "1" };
            let secs = rng.gen_range(1..=4);
            let id = s
                .cluster
                .sbatch(&["-N", nodes, "--time=5", "--requeue", "-p", p, "--wrap", &format!("sleep {secs}")])
                .unwrap();
            jobs.push(id);
        }
    };
    let wave = jobs_wanted / 4;

    // 1: a wave, and a stockout on flex nodeset a for 10 s.
    submit(&s, &mut rng, wave, &mut jobs);
    s.sim_post(
        "capacity",
        &json!({"match": "hpc-a-", "fail": {"code": "ZONE_RESOURCE_POOL_EXHAUSTED", "message": "soak stockout"}}),
    );
    *faults.entry("stockout").or_default() += 1;
    std::thread::sleep(Duration::from_secs(10));
    s.sim_delete("capacity");

    // 2: a wave under an error storm: 429, 503 and 403 rateLimitExceeded on a quarter of the calls.
    submit(&s, &mut rng, wave, &mut jobs);
    for (status, reason) in [(429, "rateLimitExceeded"), (503, "backendError"), (403, "rateLimitExceeded")] {
        s.sim_post(
            "faults",
            &json!({"method": "*", "status": status, "reason": reason, "probability": 0.08}),
        );
    }
    *faults.entry("error storm (20 s)").or_default() += 1;
    std::thread::sleep(Duration::from_secs(rng.gen_range(8..=12)));
    // ... the daemon is SIGKILLed in the middle of it, and restarted.
    s.kill_daemon();
    *faults.entry("daemon SIGKILL").or_default() += 1;
    std::thread::sleep(Duration::from_secs(1));
    s.start_daemon().unwrap();
    std::thread::sleep(Duration::from_secs(10));
    s.sim_delete("faults");

    // 3: a wave, a slurmctld restart, a spot preemption and the static node's VM expiring. The wave
    // holds a spot job whatever the seed, so a spot VM is there to preempt (seed 1795849288 drew no
    // `sp` job for this wave, and wave 2's spot VMs were suspended by then).
    submit(&s, &mut rng, wave - 1, &mut jobs);
    let spot_job =
        s.cluster.sbatch(&["-N", "1", "--time=5", "--requeue", "-p", "sp", "--wrap", "sleep 4"]).unwrap();
    jobs.push(spot_job);
    std::thread::sleep(Duration::from_secs(3));
    s.cluster.restart_slurmctld().unwrap();
    *faults.entry("slurmctld restart").or_default() += 1;
    let spot = poll(
        "a spot VM to preempt",
        90,
        POLL,
        |m| seeded(&s, seed, m),
        || s.vms().into_iter().find(|v| v.starts_with("hpc-sp-")),
    );
    s.sim_post(&format!("instances/{spot}/preempt"), &json!({}));
    *faults.entry("spot preemption").or_default() += 1;
    s.sim_post("instances/hpc-a-0/expire", &json!({}));
    *faults.entry("static VM expiry").or_default() += 1;

    // 4: the rest.
    submit(&s, &mut rng, jobs_wanted - 3 * wave, &mut jobs);

    // Every job completes.
    let budget = 120 + 6 * jobs.len() as u64;
    poll(
        "every job COMPLETED",
        budget,
        POLL,
        |m| seeded(&s, seed, m),
        || jobs.iter().all(|j| s.cluster.job_state(*j).as_deref() == Some("COMPLETED")).then_some(()),
    );
    let jobs_done = Instant::now();
    eprintln!("[soak] {} jobs completed in {:?}", jobs.len(), started.elapsed());

    // Converged: only the static VM, its node in service; nothing of ours left behind.
    poll(
        "only the static VM left, its node idle, nothing open",
        150,
        POLL,
        |m| seeded(&s, seed, m),
        || {
            let vms = s.vms();
            let open = s.cli_json(&["requests", "--active"]).as_array().map_or(1, Vec::len);
            let migs = s.migs();
            (vms == ["hpc-a-0"] && node_state(&s, "hpc-a-0") == "idle" && open == 0 && migs.len() == 1)
                .then_some(())
        },
    );
    invariants(&s, seed, quiet_secs);

    let calls = all_calls(&s);
    // What the daemon did, by event kind (the story behind the wall time).
    let mut kinds: BTreeMap<String, u64> = BTreeMap::new();
    for e in s.cli_json(&["events", "--limit", "100000"]).as_array().into_iter().flatten() {
        *kinds.entry(e["kind"].as_str().unwrap_or_default().to_string()).or_default() += 1;
    }
    eprintln!("[soak] events by kind: {kinds:?}");
    let restarts: u64 =
        jobs.iter().filter_map(|j| s.cluster.job_info(*j)?.get("Restarts")?.parse::<u64>().ok()).sum();
    eprintln!("[soak] job restarts (requeues): {restarts}");
    eprintln!(
        "[soak] FIGURES seed={seed} slurm={slurm} jobs={} faults={} ({}) gce_calls={calls} calls_per_job={:.1} \
         wall={:?} (jobs done after {:?})",
        jobs.len(),
        faults.values().sum::<u32>(),
        faults.iter().map(|(k, v)| format!("{k} x{v}")).collect::<Vec<_>>().join(", "),
        calls as f64 / jobs.len() as f64,
        started.elapsed(),
        jobs_done - started,
    );
}

/// The end's invariants, once every job completed and the VMs converged.
fn invariants(s: &Stack, seed: u64, quiet_secs: u64) {
    let fail = |why: String| -> ! { panic!("soak seed {seed}: {why}\nrerun: SOAK_SEED={seed}") };
    // Only the static node's MIG, and it holds its VM.
    let state = s.sim_get("state");
    let migs = state["migs"].as_array().cloned().unwrap_or_default();
    let holding: BTreeSet<String> = state["instances"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i["metadata"]["items"].as_array())
        .flatten()
        .filter(|m| m["key"] == "created-by")
        .filter_map(|m| m["value"].as_str().and_then(|u| u.rsplit('/').next()).map(String::from))
        .collect();
    for m in &migs {
        let name = m["name"].as_str().unwrap_or_default();
        if !holding.contains(name) {
            fail(format!("MIG {name} is left behind holding no VM: {m}"));
        }
        let open: Vec<&Value> = m["resizeRequests"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|r| !matches!(r["state"].as_str(), Some("SUCCEEDED" | "FAILED" | "CANCELLED")))
            .collect();
        if !open.is_empty() {
            fail(format!("MIG {name} has resize requests still open: {open:?}"));
        }
    }
    // No reservation but the static node's end-of-life one.
    let res = s.cluster.scontrol(&["-o", "show", "reservation"]).unwrap_or_default();
    for line in res.lines().filter(|l| l.contains("slurm-dws-eol-")) {
        if !line.contains("ReservationName=slurm-dws-eol-hpc-a-0 ") {
            fail(format!("a reservation is left behind: {line}"));
        }
    }
    // No VM name asked for while a VM of that name existed or was being made (GCE would have said
    // it exists).
    let ops = state["operations"].as_array().cloned().unwrap_or_default();
    let dup: Vec<&Value> = ops
        .iter()
        .filter(|o| o.to_string().contains("ALREADY_EXISTS") || o["httpErrorStatusCode"] == 409)
        .collect();
    if !dup.is_empty() {
        fail(format!("a name was requested twice while open: {dup:?}"));
    }
    // A quiet window: passes read, none writes.
    let before = writes(s);
    std::thread::sleep(Duration::from_secs(quiet_secs));
    let after = writes(s);
    if after != before {
        fail(format!(
            "{} GCE writes in the quiet {quiet_secs}s at the end: {}",
            after - before,
            s.sim_get("calls")
        ));
    }
    // Healthy, nothing open, the static node in service.
    let status = s.cli_json(&["status"]);
    if status["healthy"] != true
        || status["pending_work"]["outbox"] != 0
        || status["pending_work"]["inbox"] != 0
    {
        fail(format!("status is not healthy with nothing pending: {status}"));
    }
    let active = s.cli_json(&["requests", "--active"]);
    if active.as_array().is_none_or(|a| !a.is_empty()) {
        fail(format!("requests still open: {active}"));
    }
    if node_state(s, "hpc-a-0") != "idle" {
        fail(format!("the static node is {} in Slurm", node_state(s, "hpc-a-0")));
    }
    let up: Vec<Value> = s.cli_json(&["nodes"]).as_array().cloned().unwrap_or_default();
    let ours_up: Vec<&str> =
        up.iter().filter(|n| n["state"] == "up").filter_map(|n| n["name"].as_str()).collect();
    if ours_up != ["hpc-a-0"] {
        fail(format!("slurm-dws holds up {ours_up:?}, expected only the static node"));
    }
}
