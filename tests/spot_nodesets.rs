//! Standard and spot nodesets through the daemon against the simulator: VMs created by name with
//! `createInstances` (no resize request), preemption, capacity backoff on create, and adoption of a
//! spot MIG after the database is lost.
// These worlds run the real daemon and wait for it in real time.
#![allow(clippy::disallowed_methods)]

mod common;
use common::*;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::time::Duration;

/// A world whose nodeset `spot` is a spot nodeset (its template SPOT, `instanceTerminationAction:
/// DELETE`), beside the flex nodesets of `flex`.
async fn spot_world(spot: (u32, u32), flex: &[NodesetSpec<'_>]) -> World {
    let scheduling = json!({"provisioningModel": "SPOT", "instanceTerminationAction": "DELETE",
                            "onHostMaintenance": "TERMINATE", "automaticRestart": false});
    model_world("spot", "spot", spot, flex, scheduling).await
}

/// A world whose nodeset `name` has `provisioning_model = model` and a template with `scheduling`.
async fn model_world(
    name: &str,
    model: &str,
    counts: (u32, u32),
    flex: &[NodesetSpec<'_>],
    scheduling: Value,
) -> World {
    let mut specs: Vec<NodesetSpec> = flex.to_vec();
    specs.push((name, counts.0, counts.1, ""));
    let w = World::new(&specs, "").await;
    let text = std::fs::read_to_string(&w.config).unwrap();
    let block = format!("instanceTemplates/{name}-flex\"\n");
    assert!(text.contains(&block));
    let text =
        text.replace(&block, &format!("instanceTemplates/{name}-vms\"\nprovisioning_model = \"{model}\"\n"));
    std::fs::write(&w.config, text).unwrap();
    let template = json!({"name": format!("{name}-vms"), "properties": {"machineType": "n2-standard-4",
        "scheduling": scheduling}});
    w.sim_post("templates", template).await;
    w
}

fn events(w: &World) -> Vec<Value> {
    w.cli_json(&["events"]).as_array().cloned().unwrap_or_default()
}

fn has_event(w: &World, kind: &str, node: &str) -> bool {
    events(w).iter().any(|e| {
        let nodes = match &e["nodes"] {
            Value::Array(a) => a.iter().filter_map(Value::as_str).map(String::from).collect(),
            Value::String(s) => slurm_dws::hostlist::expand(s).unwrap_or_default(),
            _ => vec![],
        };
        e["kind"] == kind && nodes.iter().any(|n| n == node)
    })
}

async fn vm_scheduling(w: &World, name: &str) -> Value {
    let s = w.sim_state().await;
    s["instances"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == name)
        .map_or(Value::Null, |i| i["scheduling"].clone())
}

fn block<T>(f: impl std::future::Future<Output = T>) -> T {
    let rt = tokio::runtime::Handle::current();
    tokio::task::block_in_place(|| rt.block_on(f))
}

/// A static spot node is kept provisioned and a job's spot nodes get VMs by name (no resize request,
/// no run duration); a preempted VM takes its node out in the pass that sees it (a `preempted`
/// event; the static node gets a new VM); suspended nodes' VMs are deleted by URL and empty MIGs
/// are collected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spot_nodes_are_created_by_name_preempted_and_released() {
    let mut w = spot_world((1, 4), &[]).await;
    w.healthy_slurm();
    w.start_daemon();
    let out =
        w.hook("resume", "hpc-spot-[1-2]", Some(&resume_file(&[(7, "hpc-spot-[1-2]")], "hpc-spot-[1-2]")));
    assert!(out.status.success());
    w.wait_for("three spot nodes up", 40, || {
        let s = w.node_states();
        ["hpc-spot-0", "hpc-spot-1", "hpc-spot-2"]
            .iter()
            .all(|n| s.get(*n).map(String::as_str) == Some("up"))
            .then_some(())
    });
    let wanted: BTreeSet<String> = ["hpc-spot-0", "hpc-spot-1", "hpc-spot-2"].map(String::from).into();
    wait_converged(&w, &wanted, 30).await;
    let sched = vm_scheduling(&w, "hpc-spot-1").await;
    assert_eq!(sched["provisioningModel"], "SPOT", "{sched}");
    assert!(sched.get("maxRunDuration").is_none(), "no run duration: {sched}");
    let calls = w.sim_calls().await;
    assert_eq!(count(&calls, "regionInstanceGroupManagerResizeRequests.insert"), 0, "{calls}");
    assert_eq!(count(&calls, "regionInstanceGroupManagers.createInstances"), 2, "static + job: {calls}");
    assert_eq!(sim_migs(&w).await.len(), 2, "one MIG per group");
    let story = String::from_utf8_lossy(&w.cli(&["explain", "hpc-spot-1"]).stdout).to_string();
    assert!(
        story.contains("It belongs to a group of VMs created by name in MIG hpc-spot-j7-")
            && story.contains("no run duration"),
        "{story}"
    );

    // GCE preempts the dynamic node's VM (DELETE): it leaves service, its job is requeued.
    w.sim_post("instances/hpc-spot-1/preempt", json!({})).await;
    w.wait_for("hpc-spot-1 preempted", 20, || has_event(&w, "preempted", "hpc-spot-1").then_some(()));
    w.wait_for("hpc-spot-1 powered down", 20, || {
        (w.node_states().get("hpc-spot-1").map(String::as_str) == Some("powered_down")).then_some(())
    });
    // The static node's VM is preempted: a new VM is made under its name.
    let creates = count(&w.sim_calls().await, "regionInstanceGroupManagers.createInstances");
    w.sim_post("instances/hpc-spot-0/preempt", json!({})).await;
    w.wait_for("hpc-spot-0 preempted", 20, || has_event(&w, "preempted", "hpc-spot-0").then_some(()));
    w.wait_for("hpc-spot-0 re-provisioned", 40, || {
        let again = count(&block(w.sim_calls()), "regionInstanceGroupManagers.createInstances") > creates;
        let up = w.node_states().get("hpc-spot-0").map(String::as_str) == Some("up");
        (again && up && block(w.sim_vms()).contains(&"hpc-spot-0".to_string())).then_some(())
    });
    let ev = events(&w);
    let preempted: Vec<&Value> = ev.iter().filter(|e| e["kind"] == "preempted").collect();
    assert!(preempted.iter().all(|e| e["message"].as_str().unwrap().contains("preempted")), "{preempted:?}");

    // Slurm suspends the job's other node: its VM is deleted, the job's MIG collected.
    assert!(w.hook("suspend", "hpc-spot-2", None).status.success());
    let wanted: BTreeSet<String> = ["hpc-spot-0".to_string()].into();
    wait_converged(&w, &wanted, 60).await;
    assert_eq!(sim_migs(&w).await.len(), 1, "only the static node's new MIG is left");
}

/// The spot MIG leak (issue 28): GCE deletes a preempted spot VM, and its MIG — doing nothing on
/// failure — keeps the member with no VM and its targetSize 1. Nothing holds the MIG any more, so it
/// is collected all the same, its group ends, and `status` has nothing open on the idle cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preempted_spot_vms_mig_is_collected() {
    let mut w = spot_world((0, 4), &[]).await;
    w.healthy_slurm();
    w.start_daemon();
    let out = w.hook("resume", "hpc-spot-1", Some(&resume_file(&[(7, "hpc-spot-1")], "hpc-spot-1")));
    assert!(out.status.success());
    w.wait_for("hpc-spot-1 up", 40, || {
        (w.node_states().get("hpc-spot-1").map(String::as_str) == Some("up")).then_some(())
    });
    let migs = w.sim_migs().await;
    assert_eq!(migs.len(), 1, "{migs:?}");
    let mig = migs[0]["name"].as_str().unwrap().to_string();
    w.sim_post("instances/hpc-spot-1/preempt", json!({})).await;
    // The simulator keeps the member as GCE does: targetSize 1, no VM.
    let after = w.sim_migs().await;
    assert_eq!(after[0]["targetSize"], 1, "{after:?}");
    assert!(!w.sim_vms().await.contains(&"hpc-spot-1".to_string()));
    w.wait_for("hpc-spot-1 preempted", 20, || has_event(&w, "preempted", "hpc-spot-1").then_some(()));
    w.wait_for("the preempted VM's MIG deleted", 30, || block(w.sim_migs()).is_empty().then_some(()));
    assert!(has_event_kind(&w, "mig_collected", &mig), "{:?}", events(&w));
    w.wait_for("no request open", 20, || {
        let st = w.cli_json(&["status"]);
        (st["requests_open"] == 0).then_some(())
    });
    let st = w.cli_json(&["status"]);
    assert_eq!(st["healthy"], true, "{st}");
}

fn has_event_kind(w: &World, kind: &str, text: &str) -> bool {
    events(w).iter().any(|e| e["kind"] == kind && e["message"].as_str().is_some_and(|m| m.contains(text)))
}

/// A stockout on create (ZONE_RESOURCE_POOL_EXHAUSTED in the managed instances' lastAttempt) fails
/// the group in one pass and backs the nodeset off exactly as a failed Flex request does: a
/// `capacity backoff`, the nodes powered down and usable, the MIG (with what it was creating) deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stockout_on_create_backs_the_spot_nodeset_off() {
    let mut w = spot_world((0, 4), &[]).await;
    w.healthy_slurm();
    w.capacity(json!({"match": "hpc-spot-", "fail": {"code": "ZONE_RESOURCE_POOL_EXHAUSTED",
        "message": "The zone 'projects/test-project/zones/us-central1-a' does not have enough resources available to fulfill the request."}}))
        .await;
    w.start_daemon();
    let out =
        w.hook("resume", "hpc-spot-[0-1]", Some(&resume_file(&[(8, "hpc-spot-[0-1]")], "hpc-spot-[0-1]")));
    assert!(out.status.success());
    w.wait_for("a capacity backoff", 30, || {
        events(&w)
            .iter()
            .any(|e| e["kind"] == "backoff" && e["message"].as_str().unwrap().contains("capacity backoff"))
            .then_some(())
    });
    let failed: Vec<Value> = events(&w).into_iter().filter(|e| e["kind"] == "request_failed").collect();
    assert!(failed[0]["message"].as_str().unwrap().contains("ZONE_RESOURCE_POOL_EXHAUSTED"), "{failed:?}");
    let status = w.cli_json(&["status"]);
    assert!(status.to_string().contains("spot"), "the nodeset's backoff shows: {status}");
    wait_converged(&w, &BTreeSet::new(), 30).await;
    let states = w.node_states();
    assert!(["hpc-spot-0", "hpc-spot-1"].iter().all(|n| states[*n] == "powered_down"), "{states:?}");
    // A resume during the backoff is answered at once, without a GCE call.
    let creates = count(&w.sim_calls().await, "regionInstanceGroupManagers.createInstances");
    w.resume_for_job(9, "hpc-spot-2");
    w.wait_for("the resume refused by the backoff", 20, || {
        has_event(&w, "backoff_refused", "hpc-spot-2").then_some(())
    });
    assert_eq!(count(&w.sim_calls().await, "regionInstanceGroupManagers.createInstances"), creates);
}

/// The database is deleted while spot VMs are being created: the restarted daemon adopts the spot
/// MIGs and their groups in flight from GCE (job ids from the ownership line) and the work finishes
/// without a VM created twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spot_group_in_flight_is_adopted_after_the_database_is_lost() {
    let mut w = spot_world((0, 16), &[]).await;
    w.capacity(json!({"match": "", "delay_seconds": 6.0})).await;
    w.start_daemon();
    let jobs = [(21, "hpc-spot-[0-3]"), (22, "hpc-spot-[4-5]")];
    assert!(w.hook("resume", "hpc-spot-[0-5]", Some(&resume_file(&jobs, "hpc-spot-[0-5]"))).status.success());
    w.wait_for("both groups' VMs being created", 30, || {
        let migs = block(sim_migs(&w));
        (migs.len() == 2 && migs.values().all(|(size, _)| *size > 0)).then_some(())
    });
    w.kill_daemon();
    for e in std::fs::read_dir(w.state_dir()).unwrap() {
        let p = e.unwrap().path();
        if p.file_name().unwrap().to_string_lossy().starts_with("slurm-dws.db") {
            std::fs::remove_file(&p).unwrap();
        }
    }
    let creates_before = count(&w.sim_calls().await, "regionInstanceGroupManagers.createInstances");
    w.start_daemon();
    let wanted: BTreeSet<String> = (0..6).map(|n| format!("hpc-spot-{n}")).collect();
    wait_converged(&w, &wanted, 60).await;
    let reqs = store_requests(&w);
    let mut jobs_seen: Vec<u64> = reqs.iter().map(|r| r["job_id"].as_u64().unwrap()).collect();
    jobs_seen.sort();
    assert_eq!(jobs_seen, vec![21, 22], "job ids recovered from the MIGs' ownership: {reqs:?}");
    assert_eq!(
        count(&w.sim_calls().await, "regionInstanceGroupManagers.createInstances"),
        creates_before,
        "nothing created twice"
    );
    let states = w.node_states();
    assert!(wanted.iter().all(|n| states.get(n).map(String::as_str) == Some("up")), "{states:?}");
    tokio::time::sleep(Duration::from_millis(10)).await;
}

/// A standard nodeset's job gets STANDARD VMs by name, and they are deleted when Slurm suspends the
/// nodes; a spot nodeset whose template is not SPOT is refused at start (`nodeset_refused`, naming
/// the field), and its resumes are answered without a GCE call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standard_vms_by_name_and_a_spot_nodeset_with_the_wrong_template_is_refused() {
    let mut w = model_world("std", "standard", (0, 4), &[], json!({"provisioningModel": "STANDARD"})).await;
    w.healthy_slurm();
    w.start_daemon();
    w.resume_for_job(5, "hpc-std-[0-1]");
    let wanted: BTreeSet<String> = ["hpc-std-0", "hpc-std-1"].map(String::from).into();
    wait_converged(&w, &wanted, 40).await;
    assert_eq!(vm_scheduling(&w, "hpc-std-0").await["provisioningModel"], "STANDARD");
    let calls = w.sim_calls().await;
    assert_eq!(count(&calls, "regionInstanceGroupManagers.createInstances"), 1, "{calls}");
    assert_eq!(count(&calls, "regionInstanceGroupManagerResizeRequests.insert"), 0, "{calls}");
    assert!(w.hook("suspend", "hpc-std-[0-1]", None).status.success());
    wait_converged(&w, &BTreeSet::new(), 40).await;
    drop(w);

    // A spot nodeset whose template would give STANDARD VMs that stop instead of being deleted.
    let mut w = model_world("spot", "spot", (0, 4), &[], json!({"instanceTerminationAction": "STOP"})).await;
    w.healthy_slurm();
    w.start_daemon();
    w.wait_for("the nodeset refused", 20, || {
        events(&w)
            .iter()
            .find(|e| e["kind"] == "nodeset_refused")
            .map(|e| e["message"].as_str().unwrap_or_default().to_string())
    });
    let refused: Vec<Value> = events(&w).into_iter().filter(|e| e["kind"] == "nodeset_refused").collect();
    let message = refused[0]["message"].as_str().unwrap();
    assert!(
        message.contains("provisioningModel is not set, a spot nodeset needs SPOT")
            && message.contains("instanceTerminationAction is STOP, a spot nodeset needs DELETE"),
        "{message}"
    );
    w.resume_for_job(6, "hpc-spot-0");
    w.wait_for("the resume answered", 20, || {
        (w.node_states().get("hpc-spot-0").map(String::as_str) == Some("powered_down")
            && events(&w).iter().filter(|e| e["kind"] == "nodeset_refused").count() >= 2)
            .then_some(())
    });
    assert_eq!(count(&w.sim_calls().await, "regionInstanceGroupManagers.createInstances"), 0);
}

/// SIGKILLs at random points while spot groups are made and released: every mutation is resumed
/// from the outbox with its requestId, so each job ends with one MIG and its VMs, and after the
/// suspend nothing is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spot_groups_survive_sigkills_without_duplicates_or_leaks() {
    let mut w = spot_world((0, 16), &[]).await;
    w.healthy_slurm();
    w.capacity(json!({"match": "", "delay_seconds": 1.0})).await;
    w.start_daemon();
    let jobs = [(31, "hpc-spot-[0-3]"), (32, "hpc-spot-[4-7]")];
    assert!(w.hook("resume", "hpc-spot-[0-7]", Some(&resume_file(&jobs, "hpc-spot-[0-7]"))).status.success());
    for i in 0..6u64 {
        tokio::time::sleep(Duration::from_millis(150 + (rand::random::<u64>() % 900) + i * 50)).await;
        w.kill_daemon();
        w.start_daemon();
    }
    let wanted: BTreeSet<String> = (0..8).map(|n| format!("hpc-spot-{n}")).collect();
    wait_converged(&w, &wanted, 90).await;
    let migs = sim_migs(&w).await;
    assert_eq!(migs.len(), 2, "one MIG per job: {migs:?}");
    assert!(migs.values().all(|(size, _)| *size == 4), "each MIG holds its 4 VMs: {migs:?}");
    let states = w.node_states();
    assert!(wanted.iter().all(|n| states.get(n).map(String::as_str) == Some("up")), "{states:?}");

    assert!(w.hook("suspend", "hpc-spot-[0-7]", None).status.success());
    tokio::time::sleep(Duration::from_millis(300)).await;
    w.kill_daemon();
    w.start_daemon();
    wait_converged(&w, &BTreeSet::new(), 90).await;
    assert!(sim_migs(&w).await.is_empty(), "every MIG collected");
}
