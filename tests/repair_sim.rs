//! Node repairs through real processes: the daemon against the simulator over real HTTP, the real
//! store, the real CLI, and a fake Slurm whose nodes the test sets (drained as the daemon asked) and
//! which records every `scontrol` call. A flex node's VM is replaced (a new VM under the node's
//! name, from a new resize request); a reservation-bound VM's host is reported faulty and GCE moves
//! it. (Real Slurm's view of the same repairs, requeued jobs included, is in tests/repair_e2e.rs.)

// The real daemon against a real simulator, in real time: these wait for it.
#![allow(clippy::disallowed_methods)]

mod common;

use common::*;
use serde_json::{json, Value};
use std::collections::BTreeSet;

const PROJECT: &str = "test-project";
const ZONE: &str = "us-central1-a";
const MACHINE: &str = "n2-standard-4";

/// What the fake Slurm shows of its nodes from now on: `(name, state, flags, reason)`.
fn show(w: &World, nodes: &[(&str, &str, &[&str], &str)]) {
    let nodes: Vec<Value> = nodes
        .iter()
        .map(|(name, state, flags, reason)| {
            json!({"name": name, "state": state, "state_flags": flags, "reason": reason})
        })
        .collect();
    let p = w.path().join("slurm-bin").join("sinfo.json");
    let tmp = p.with_extension("tmp");
    std::fs::write(&tmp, json!({"meta": {}, "errors": [], "nodes": nodes}).to_string()).unwrap();
    std::fs::rename(&tmp, &p).unwrap();
}

/// The reason of the last `scontrol update ... state=drain` for `node`, once there is one.
fn drained_with(w: &World, node: &str) -> Option<String> {
    let line = w.updates_of(node).into_iter().rfind(|l| l.contains("state=drain"))?;
    Some(line.split_once("reason=")?.1.trim_matches(['"', '\'']).to_string())
}

/// The simulator's VM named `name`, as `instances.get` shows it.
async fn sim_vm(w: &World, name: &str) -> Option<Value> {
    w.sim_state().await["instances"].as_array()?.iter().find(|v| v["name"] == name).cloned()
}

/// Runs `slurm-dws repair ARGS` twice at the same time, as two admins would; both succeed.
fn repair_twice(w: &World, args: &[&str]) {
    let spawn = || {
        std::process::Command::new(BIN)
            .arg("--config")
            .arg(&w.config)
            .arg("repair")
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn(), spawn());
    for c in [a, b] {
        let out = c.wait_with_output().unwrap();
        assert!(out.status.success(), "repair {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
}

fn explain(w: &World, node: &str) -> String {
    String::from_utf8_lossy(&w.cli(&["explain", node]).stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

/// `slurm-dws repair` of a running flex node: the node is drained, its VM deleted and a new VM
/// requested under the same name by a new resize request (`vm_replaced`); when the new VM runs
/// and Slurm has the node responding, the drain is lifted (`repaired`). Two concurrent asks make
/// one repair; GCE is never asked to report the host of a VM that is not reservation-bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flex_node_is_repaired_by_a_new_vm_under_its_name() {
    let mut w = World::new(&[("a", 0, 4, "")], "").await;
    w.recording_slurm(&[
        ("hpc-a-0", "idle", &["CLOUD", "POWERED_DOWN"]),
        ("hpc-a-1", "allocated", &["CLOUD"]),
    ]);
    w.start_daemon();
    w.resume_for_job(5, "hpc-a-1");
    wait_converged(&w, &set(&["hpc-a-1"]), 60).await;
    let old = sim_vm(&w, "hpc-a-1").await.unwrap();
    let requests_before = sim_requests(&w).await;
    assert_eq!(requests_before.len(), 1, "{requests_before:?}");

    repair_twice(&w, &["hpc-a-1", "--reason", "UNRECOVERABLE_GPU_ERROR", "--description", "xid 79"]);
    let reason = w.wait_for("the node drained", 30, || drained_with(&w, "hpc-a-1"));
    assert_eq!(reason, "slurm-dws: repair UNRECOVERABLE_GPU_ERROR: xid 79");
    // Slurm drains it as asked (its job requeued, the node idle).
    show(
        &w,
        &[
            ("hpc-a-0", "idle", &["CLOUD", "POWERED_DOWN"], ""),
            ("hpc-a-1", "idle", &["CLOUD", "DRAIN"], &reason),
        ],
    );

    let replaced = w.wait_for("vm_replaced", 30, || w.events_of("vm_replaced").into_iter().next());
    assert!(replaced["message"].as_str().unwrap().contains("VM hpc-a-1 is replaced"), "{replaced}");
    // A new VM under the node's name (another id), from a new resize request of its own.
    let new = w.wait_for("a new VM hpc-a-1 running", 60, || {
        futures_block(sim_vm(&w, "hpc-a-1")).filter(|v| v["id"] != old["id"] && v["status"] == "RUNNING")
    });
    assert_ne!(new["id"], old["id"]);
    let requests = sim_requests(&w).await;
    assert_eq!(requests.len(), 2, "a new request for the node: {requests:?}");
    assert!(requests.iter().any(|r| !requests_before.contains(r)), "{requests:?}");

    // The new VM runs and slurmd registered (the node responds): the drain is lifted.
    let repaired = w.wait_for("repaired", 30, || w.events_of("repaired").into_iter().next());
    assert!(repaired["message"].as_str().unwrap().starts_with("repaired: its new VM runs"), "{repaired}");
    // The event is committed before the round's Slurm steps run: the undrain follows it.
    w.wait_for("the undrain", 10, || {
        w.updates_of("hpc-a-1").iter().any(|l| l.contains("state=undrain")).then_some(())
    });
    show(&w, &[("hpc-a-0", "idle", &["CLOUD", "POWERED_DOWN"], ""), ("hpc-a-1", "idle", &["CLOUD"], "")]);
    wait_converged(&w, &set(&["hpc-a-1"]), 60).await;

    // One repair for the two asks, one replacement, no host report.
    assert_eq!(w.events_of("repair_requested").len(), 1, "{:?}", w.events_of("repair_requested"));
    assert_eq!(w.events_of("vm_replaced").len(), 1);
    assert_eq!(w.events_of("repaired").len(), 1);
    assert_eq!(count(&w.sim_calls().await, "instances.reportHostAsFaulty"), 0);
    let story = explain(&w, "hpc-a-1");
    assert!(
        story.contains("Its last repair UNRECOVERABLE_GPU_ERROR: xid 79, asked by slurm-dws repair"),
        "{story}"
    );
    assert!(story.contains("Last: its new VM runs: back in service."), "{story}");
}

/// A node of a `provisioning_model = "reservation"` nodeset (its VMs reservation-bound on a dense
/// reservation) asks for a repair through its drain reason, as a health check writes it: its host
/// is reported faulty once (IMMEDIATE, the behaviour and text given), GCE moves the VM to another
/// host (REPAIRING, then RUNNING; the Operation DONE), `host_reported_faulty` then `repaired`, and
/// the VM is the same one (not replaced). A `slurm-dws repair` of the node while the report is
/// under way is the same repair.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reservation_bound_node_is_repaired_by_reporting_its_host() {
    let table =
        format!("\n[nodeset.reservation]\nname = \"projects/{PROJECT}/zones/{ZONE}/reservations/dense\"\n");
    let mut w = World::new(&[("r", 0, 2, &table)], "").await;
    w.sim_post(
        "templates",
        json!({"name": "r-res", "properties": {
            "machineType": MACHINE,
            "scheduling": {"provisioningModel": "RESERVATION_BOUND", "instanceTerminationAction": "DELETE",
                           "onHostMaintenance": "TERMINATE", "automaticRestart": false},
            "reservationAffinity": {"consumeReservationType": "SPECIFIC_RESERVATION",
                "key": "compute.googleapis.com/reservation-name",
                "values": [format!("projects/{PROJECT}/reservations/dense")]}}}),
    )
    .await;
    let text = std::fs::read_to_string(&w.config).unwrap();
    std::fs::write(
        &w.config,
        text.replace(
            "instanceTemplates/r-flex\"\n",
            "instanceTemplates/r-res\"\nprovisioning_model = \"reservation\"\n",
        ),
    )
    .unwrap();
    w.sim_post(
        "reservations",
        json!({"project": PROJECT, "zone": ZONE, "name": "dense", "count": 4, "machine_type": MACHINE,
               "deployment_type": "DENSE",
               "blocks": [{"name": "b1", "count": 4, "sub_blocks": [{"name": "s1", "count": 4}]}]}),
    )
    .await;
    // A slow host repair, so that the second ask comes while the report is under way.
    w.sim_post("lifecycle", json!({"provisioning_ms": 50, "staging_ms": 50, "host_repair_ms": 3000})).await;
    w.recording_slurm(&[
        ("hpc-r-0", "allocated", &["CLOUD"]),
        ("hpc-r-1", "idle", &["CLOUD", "POWERED_DOWN"]),
    ]);
    w.start_daemon();
    w.resume_for_job(7, "hpc-r-0");
    wait_converged(&w, &set(&["hpc-r-0"]), 60).await;
    let old = sim_vm(&w, "hpc-r-0").await.unwrap();
    assert_eq!(old["scheduling"]["provisioningModel"], "RESERVATION_BOUND", "{old}");
    let old_host = old["resourceStatus"]["physicalHostTopology"]["host"].clone();
    assert!(old_host.is_string(), "{old}");

    // The health check drains the node asking for a repair.
    let asked = "repair UNRECOVERABLE_GPU_ERROR xid 79";
    show(
        &w,
        &[
            ("hpc-r-0", "mixed", &["CLOUD", "DRAIN"], asked),
            ("hpc-r-1", "idle", &["CLOUD", "POWERED_DOWN"], ""),
        ],
    );
    w.wait_for("the report sent", 30, || {
        let calls = futures_block(w.sim_calls());
        (count(&calls, "instances.reportHostAsFaulty") > 0).then_some(())
    });
    // While GCE repairs the host: an admin asks again; the same repair.
    let out = w.cli(&["repair", "hpc-r-0", "--reason", "UNRECOVERABLE_GPU_ERROR"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let reported =
        w.wait_for("host_reported_faulty", 60, || w.events_of("host_reported_faulty").into_iter().next());
    assert!(
        reported["message"]
            .as_str()
            .unwrap()
            .contains("GCE reported the host of VM hpc-r-0 faulty (UNRECOVERABLE_GPU_ERROR)"),
        "{reported}"
    );
    // The same VM (not replaced), RUNNING on another host; the report's Operation DONE.
    let vm = sim_vm(&w, "hpc-r-0").await.unwrap();
    assert_eq!((&vm["id"], &vm["status"]), (&old["id"], &json!("RUNNING")), "{vm}");
    assert_ne!(vm["resourceStatus"]["physicalHostTopology"]["host"], old_host, "{vm}");
    let state = w.sim_state().await;
    let ops: Vec<&Value> = state["operations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["operationType"] == "compute.instances.reportHostAsFaulty")
        .collect();
    assert_eq!(ops.len(), 1, "one report: {ops:?}");
    assert_eq!(ops[0]["status"], "DONE", "{:?}", ops[0]);

    // The drain is lifted: the health check's, by the repair's end.
    let repaired = w.wait_for("repaired", 30, || w.events_of("repaired").into_iter().next());
    assert!(
        repaired["message"].as_str().unwrap().contains("its VM runs again on another host"),
        "{repaired}"
    );
    // The event is committed before the round's Slurm steps run: the undrain follows it.
    w.wait_for("the undrain", 10, || {
        w.updates_of("hpc-r-0").iter().any(|l| l.contains("state=undrain")).then_some(())
    });
    show(&w, &[("hpc-r-0", "mixed", &["CLOUD"], ""), ("hpc-r-1", "idle", &["CLOUD", "POWERED_DOWN"], "")]);
    w.wait_passes(2, 30);
    assert_eq!(w.events_of("repair_requested").len(), 1, "{:?}", w.events_of("repair_requested"));
    assert_eq!(count(&w.sim_calls().await, "instances.reportHostAsFaulty"), 1);
    assert!(w.events_of("vm_replaced").is_empty(), "{:?}", w.events_of("vm_replaced"));
    assert_eq!(sim_requests(&w).await.len(), 1, "no new request: {:?}", sim_requests(&w).await);
    let story = explain(&w, "hpc-r-0");
    assert!(
        story.contains("Its last repair UNRECOVERABLE_GPU_ERROR: xid 79, asked by a drain reason"),
        "{story}"
    );
    assert!(story.contains("Last: its VM runs again on another host: back in service."), "{story}");
}

/// Blocks on a future from a synchronous poll closure (the test runs on a multi-thread runtime).
fn futures_block<F: std::future::Future>(f: F) -> F::Output {
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(f))
}
