//! Node repairs end to end with the real slurmctld, on one cluster: a job runs on each of three
//! nodes; `slurm-dws repair` of a flex node, a health check's drain reason `repair ...` on another,
//! and `slurm-dws repair` of a reservation-bound node (a `provisioning_model = "reservation"`
//! nodeset on a reservation booked in the simulator). Each job is requeued and completes on its
//! node; the flex nodes get new VMs under their names, the reservation-bound node's host is
//! reported faulty (GCE moves the VM); every node is back in service, not drained, within two
//! minutes. Runs on Debian bookworm's 22.05 (the host's) and, when its root is there, forky's
//! 26.05 (scripts/slurm-root.sh); outside CI a Slurm that is missing is said and skipped, under
//! CI=true it fails.

// Real slurmctld, slurmds and jobs: these wait for them in real time.
#![allow(clippy::disallowed_methods)]

use devcluster::stack::{Stack, StackNodeset, StackSpec};
use devcluster::SlurmGeneration;
use serde_json::{json, Value};
use std::time::Instant;

mod slurm_22_05 {
    #[test]
    fn a_repair_requeues_the_job_replaces_or_reports_and_the_node_returns_to_service() {
        super::repairs(devcluster::SlurmGeneration::Bookworm)
    }
}

mod slurm_26_05 {
    #[test]
    fn a_repair_requeues_the_job_replaces_or_reports_and_the_node_returns_to_service() {
        super::repairs(devcluster::SlurmGeneration::Forky)
    }
}

const PROJECT: &str = "demo-project";
const ZONE: &str = "us-central1-a";
/// Repaired by `slurm-dws repair`: a flex node, replaced.
const BY_CLI: &str = "hpc-a-0";
/// Repaired by its drain reason: a flex node, replaced.
const BY_DRAIN: &str = "hpc-a-1";
/// Repaired by `slurm-dws repair`: reservation-bound, its host reported.
const BOUND: &str = "hpc-r-0";

fn spec(slurm: SlurmGeneration) -> StackSpec {
    let bin = env!("CARGO_BIN_EXE_slurm-dws");
    let reservation =
        format!("\n[nodeset.reservation]\nname = \"projects/{PROJECT}/zones/{ZONE}/reservations/gpu-res\"\n");
    StackSpec {
        slurm,
        ..StackSpec::new(
            bin,
            devcluster::sim_bin(bin.as_ref()),
            vec![
                StackNodeset::new("a", 0, 2),
                StackNodeset::new("r", 0, 1).model("reservation").with_flex_lines(&reservation),
            ],
        )
    }
}

/// The simulator gets the reservation and the reservation-bound template the `r` nodeset consumes
/// it with (the stack loaded a plain one under the same name).
fn book_reservation(s: &Stack) {
    let template = json!({"name": "r-reservation", "properties": {
        "machineType": "n2-standard-4",
        "scheduling": {"provisioningModel": "RESERVATION_BOUND", "instanceTerminationAction": "DELETE",
                       "onHostMaintenance": "TERMINATE", "automaticRestart": false},
        "reservationAffinity": {"consumeReservationType": "SPECIFIC_RESERVATION",
            "key": "compute.googleapis.com/reservation-name",
            "values": [format!("projects/{PROJECT}/reservations/gpu-res")]}}});
    assert!(s.sim_post("templates", &template).is_object());
    let reservation = json!({"project": PROJECT, "zone": ZONE, "name": "gpu-res", "count": 2,
        "machine_type": "n2-standard-4", "deployment_type": "DENSE",
        "blocks": [{"name": "b1", "count": 2, "sub_blocks": [{"name": "s1", "count": 2}]}]});
    assert!(s.sim_post("reservations", &reservation).is_object());
}

/// A job pinned to `node` that runs until it is requeued once, then prints its node and ends.
fn job(s: &Stack, node: &str, partition: &str) -> (u32, std::path::PathBuf) {
    let out = s.cluster.dir().join("jobs").join(format!("repair-{node}.out"));
    let script =
        "if [ \"${SLURM_RESTART_COUNT:-0}\" = 0 ]; then sleep 600; fi; srun printenv SLURMD_NODENAME";
    let o = out.to_str().unwrap().to_string();
    let args = ["-N1", "-w", node, "-p", partition, "--time=10", "--requeue", "-o", &o, "--wrap", script];
    (s.cluster.sbatch(&args).unwrap(), out)
}

fn restarts(s: &Stack, job: u32) -> u64 {
    s.cluster.job_info(job).and_then(|j| j.get("Restarts")?.parse().ok()).unwrap_or(0)
}

fn node_state(s: &Stack, node: &str) -> String {
    s.cluster.node_states().ok().and_then(|m| m.get(node).cloned()).unwrap_or_default()
}

/// The simulator's VM `name` as `instances.get` shows it.
fn vm(s: &Stack, name: &str) -> Value {
    let state = s.sim_get("state");
    state["instances"]
        .as_array()
        .and_then(|a| a.iter().find(|v| v["name"] == name).cloned())
        .unwrap_or_default()
}

fn events_of(s: &Stack, kind: &str, node: &str) -> Vec<Value> {
    let all = s.cli_json(&["events"]);
    all.as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e["kind"] == kind && e["nodes"] == node)
        .collect()
}

fn repairs(slurm: SlurmGeneration) {
    if !slurm.available_for_tests("repair end-to-end tests") {
        return;
    }
    let mut s = Stack::start(spec(slurm)).unwrap();
    book_reservation(&s);
    s.sim_post("lifecycle", &json!({"provisioning_ms": 50, "staging_ms": 50, "host_repair_ms": 2000}));
    // The daemon started with the plain template and no reservation (a pass may have read them,
    // and it keeps a template it read): it starts again on what GCE has now.
    s.kill_daemon();
    s.start_daemon().unwrap();
    let jobs =
        [(BY_CLI, job(&s, BY_CLI, "a")), (BY_DRAIN, job(&s, BY_DRAIN, "a")), (BOUND, job(&s, BOUND, "r"))];
    for (node, (id, _)) in &jobs {
        s.wait(&format!("job {id} RUNNING on {node}"), 90, || {
            (s.cluster.job_state(*id).as_deref() == Some("RUNNING")).then_some(())
        });
    }
    let before: Vec<Value> = [BY_CLI, BY_DRAIN, BOUND].iter().map(|n| vm(&s, n)).collect();
    assert_eq!(before[2]["scheduling"]["provisioningModel"], "RESERVATION_BOUND", "{}", before[2]);
    assert!(before.iter().all(|v| v["status"] == "RUNNING"), "{before:?}");

    // The three repairs, asked at once.
    let t0 = Instant::now();
    let said = s.cli(&["repair", BY_CLI, "--reason", "UNRECOVERABLE_GPU_ERROR", "--description", "xid 79"]);
    eprintln!("$ slurm-dws repair {BY_CLI} ...\n{said}");
    s.cluster
        .scontrol(&[
            "update",
            &format!("nodename={BY_DRAIN}"),
            "state=drain",
            "reason=repair UNRECOVERABLE_GPU_ERROR xid 79",
        ])
        .unwrap();
    let said = s.cli(&["repair", BOUND, "--reason", "PERFORMANCE", "--description", "slow allreduce"]);
    eprintln!("$ slurm-dws repair {BOUND} ...\n{said}");

    // Every node back in service (not drained), within two minutes of the asks; its VM as then.
    let mut after = Vec::new();
    for node in [BY_CLI, BY_DRAIN, BOUND] {
        s.wait(&format!("{node} repaired"), 120u64.saturating_sub(t0.elapsed().as_secs()).max(1), || {
            events_of(&s, "repaired", node).into_iter().next()
        });
        let state = s.wait(
            &format!("{node} in service"),
            120u64.saturating_sub(t0.elapsed().as_secs()).max(1),
            || {
                let state = node_state(&s, node);
                ["idle", "allocated", "mixed", "completing"].contains(&state.as_str()).then_some(state)
            },
        );
        eprintln!("[repair-e2e] {node} {state} after {:?}", t0.elapsed());
        after.push(vm(&s, node));
    }
    eprintln!("[repair-e2e] three repairs done, every node back in service in {:?}", t0.elapsed());
    // Each job requeued, and it completes on its node. (A requeued job is eligible about two
    // minutes later on 24.11 and newer; the idle nodes may be powered down meanwhile and resumed
    // for it.)
    for (node, (id, out)) in &jobs {
        s.wait(&format!("job {id} on {node} requeued"), 60, || (restarts(&s, *id) >= 1).then_some(()));
        s.wait(&format!("job {id} on {node} COMPLETED"), 240, || {
            (s.cluster.job_state(*id).as_deref() == Some("COMPLETED")).then_some(())
        });
        let ran = std::fs::read_to_string(out).unwrap_or_default();
        assert_eq!(ran.trim(), *node, "job {id} ran again on {node}");
    }

    // The flex nodes: a new VM each under the node's name, from a new request; no host report.
    for (i, node) in [BY_CLI, BY_DRAIN].iter().enumerate() {
        let now = &after[i];
        assert_ne!(now["id"], before[i]["id"], "{node} has a new VM: {now}");
        assert_eq!(events_of(&s, "vm_replaced", node).len(), 1, "{}", s.cli(&["events"]));
        let story = s.cli(&["explain", node]);
        assert!(story.contains("Its last repair UNRECOVERABLE_GPU_ERROR"), "{story}");
    }
    let asked = events_of(&s, "repair_requested", BY_DRAIN);
    assert!(asked[0]["message"].as_str().unwrap().contains("asked by the drain reason"), "{asked:?}");
    // The reservation-bound node: the same VM, its host reported once and moved.
    let now = &after[2];
    assert_eq!(now["id"], before[2]["id"], "the same VM: {now}\n{}", s.state_dump(None));
    assert_ne!(
        now["resourceStatus"]["physicalHostTopology"]["host"],
        before[2]["resourceStatus"]["physicalHostTopology"]["host"],
        "on another host: {now}"
    );
    let reported = events_of(&s, "host_reported_faulty", BOUND);
    assert_eq!(reported.len(), 1, "{reported:?}");
    assert!(reported[0]["message"].as_str().unwrap().contains("(PERFORMANCE)"), "{reported:?}");
    assert!(events_of(&s, "vm_replaced", BOUND).is_empty());
    assert_eq!(s.sim_get("calls")["by_method"]["instances.reportHostAsFaulty"], 1);
    for node in [BY_CLI, BY_DRAIN, BOUND] {
        assert_eq!(events_of(&s, "repair_requested", node).len(), 1, "one repair of {node}");
    }
}
