//! Compute Engine as it really behaves (issue 16), through real processes: the daemon against the
//! simulator over real HTTP, hooks spawned as slurmctld spawns them, a fake Slurm that shows chosen node
//! states and records every `scontrol` call. Partial lists (an unreachable zone), VMs that fail on their
//! host, and instance templates that cannot work for DWS Flex Start.

// The real daemon against a real simulator, in real time: these wait for it.
#![allow(clippy::disallowed_methods)]

mod common;

use common::*;
use serde_json::json;

const ZONE: &str = "us-central1-a";

/// `scontrol update` calls that take nodes out of service (DOWN, or power_down_force).
fn takes_out(w: &World) -> Vec<String> {
    w.scontrol_log()
        .lines()
        .filter(|l| l.starts_with("update") && (l.contains("state=down") || l.contains("power_down")))
        .map(String::from)
        .collect()
}

fn events_of(w: &World, node: &str) -> String {
    w.cli_json(&["events", "--node", node]).to_string()
}

/// While a zone is unreachable (GCE's aggregated list answers a partial success), nothing in it is
/// judged gone: a running job's node stays in service, a static node is not re-provisioned, and the
/// pass says which zone did not answer (`status` degraded). When the zone answers again its VMs are
/// seen again, and a VM really deleted during the outage is acted on then, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_zone_judges_nothing_gone_until_it_answers() {
    let mut w = World::new(&[("a", 1, 4, "")], "").await;
    w.recording_slurm(&[("hpc-a-0", "idle", &["CLOUD"]), ("hpc-a-1", "allocated", &["CLOUD"])]);
    w.start_daemon();
    w.resume_for_job(5, "hpc-a-1");
    wait_converged(&w, &["hpc-a-0".to_string(), "hpc-a-1".to_string()].into(), 60).await;
    let inserts = || {
        let calls = futures_block(w.sim_calls());
        count(&calls, "regionInstanceGroupManagerResizeRequests.insert")
    };
    let inserts_before = inserts();

    w.sim_post(&format!("zones/{ZONE}/unreachable"), json!({"aggregated": "partial"})).await;
    let status = w.wait_for("a pass that saw the zone unreachable", 30, || {
        let s = w.cli_json(&["status"]);
        (s["unreachable_zones"] == json!([ZONE])).then_some(s)
    });
    assert_eq!(status["healthy"], json!(false), "{status}");
    let reasons = status["degraded"]["reasons"].to_string();
    assert!(reasons.contains(&format!("zone {ZONE} unreachable")), "{reasons}");
    let text = String::from_utf8_lossy(&w.cli(&["status"]).stdout).to_string();
    assert!(text.contains(&format!("unreachable:   zone {ZONE}")), "{text}");

    // A real deletion during the outage: the list cannot show it yet.
    w.sim_post("instances/hpc-a-1/expire", json!({})).await;
    w.wait_passes(3, 30);
    let states = w.node_states();
    assert_eq!((states["hpc-a-0"].as_str(), states["hpc-a-1"].as_str()), ("up", "up"), "{states:?}");
    assert_eq!(takes_out(&w), Vec::<String>::new(), "no node taken out of service");
    for n in ["hpc-a-0", "hpc-a-1"] {
        let ev = events_of(&w, n);
        assert!(!ev.contains("vm_lost") && !ev.contains("expired"), "{n}: {ev}");
    }
    assert_eq!(inserts(), inserts_before, "nothing re-provisioned while its VM may exist");

    // The zone answers: hpc-a-0's VM is seen again, hpc-a-1's deletion is acted on, once.
    w.sim_delete(&format!("zones/{ZONE}/unreachable")).await;
    w.wait_for("hpc-a-1 to leave service", 30, || {
        (w.node_states()["hpc-a-1"] == "powered_down").then_some(())
    });
    w.set_slurm_nodes(&[("hpc-a-0", "idle", &["CLOUD"]), ("hpc-a-1", "idle", &["CLOUD", "POWERED_DOWN"])]);
    w.wait_passes(2, 30);
    let status = w.cli_json(&["status"]);
    assert_eq!(status["unreachable_zones"], json!([]), "{status}");
    assert_eq!(w.node_states()["hpc-a-0"], "up");
    assert!(!events_of(&w, "hpc-a-0").contains("vm_lost"));
    let ev = events_of(&w, "hpc-a-1");
    assert_eq!(ev.matches("node leaves service").count(), 1, "{ev}");
    let out = w.updates_of("hpc-a-1");
    assert!(out.iter().any(|l| l.contains("state=down")), "the job's node is set DOWN: {out:?}");
    assert_eq!(out.iter().filter(|l| l.contains("state=down")).count(), 1, "{out:?}");
    assert_eq!(w.sim_vms().await, vec!["hpc-a-0"]);
}

/// Blocks on a future from inside a sync closure (the tests' wait loops are sync).
fn futures_block<F: std::future::Future>(f: F) -> F::Output {
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(f))
}

/// The simulator's status of a VM, if it exists.
async fn sim_status(w: &World, name: &str) -> Option<String> {
    let s = w.sim_state().await;
    s["instances"].as_array()?.iter().find(|i| i["name"] == json!(name))?["status"].as_str().map(String::from)
}

/// A Flex VM that fails on its host stays TERMINATED (its MIG does nothing on failure). In one pass
/// the node leaves service with the reason, the VM is deleted through its MIG by URL, the dynamic
/// node's job is requeued, the static node is set DOWN and re-provisioned; the new VM's node returns
/// to service only once the VM is RUNNING, not while it is PROVISIONING or STAGING.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vm_that_fails_on_its_host_is_replaced_or_its_job_requeued_in_one_pass() {
    let mut w = World::new(&[("a", 1, 4, "")], "").await;
    w.recording_slurm(&[("hpc-a-0", "idle", &["CLOUD"]), ("hpc-a-1", "allocated", &["CLOUD"])]);
    w.start_daemon();
    w.resume_for_job(5, "hpc-a-1");
    wait_converged(&w, &["hpc-a-0".to_string(), "hpc-a-1".to_string()].into(), 60).await;
    w.sim_post("lifecycle", json!({"provisioning_ms": 1500, "staging_ms": 1500})).await;

    w.sim_post("instances/hpc-a-0/fail", json!({})).await;
    w.sim_post("instances/hpc-a-1/fail", json!({})).await;
    // Until the pass's last step for them is in the log (the DOWNs come first, hpc-a-1's
    // power_down_force after them: read between the two, the log missed it under load).
    w.wait_for("both failures acted on", 30, || {
        let out = takes_out(&w);
        (out.iter().any(|l| l.contains("hpc-a-0"))
            && out.iter().any(|l| l.contains("hpc-a-1") && l.contains("power_down_force")))
        .then_some(out)
    });
    // One pass did it all: DOWN for both (the running job's node first), power_down_force for the
    // dynamic one (its job requeued), never for the static one.
    let log = w.scontrol_log();
    let a1 = w.updates_of("hpc-a-1");
    assert!(a1.iter().any(|l| l.contains("state=down") && l.contains("TERMINATED")), "{log}");
    assert!(a1.iter().any(|l| l.contains("state=power_down_force")), "{log}");
    let a0 = w.updates_of("hpc-a-0");
    assert!(a0.iter().any(|l| l.contains("state=down") && l.contains("re-provisioning")), "{log}");
    assert!(!a0.iter().any(|l| l.contains("power_down_force")), "{log}");
    for n in ["hpc-a-0", "hpc-a-1"] {
        let ev = events_of(&w, n);
        assert_eq!(ev.matches("\"vm_failed\"").count(), 1, "{n}: {ev}");
    }
    w.set_slurm_nodes(&[("hpc-a-0", "down", &["CLOUD"]), ("hpc-a-1", "idle", &["CLOUD", "POWERED_DOWN"])]);

    // The failed VMs are deleted (through their MIG: a regional deleteInstances takes URLs only, the
    // simulator fails a name), the dynamic node is powered down.
    w.wait_for("hpc-a-1 powered down", 30, || (w.node_states()["hpc-a-1"] == "powered_down").then_some(()));
    // The static node's new VM comes up; Slurm hears nothing until it runs.
    let coming = w.wait_for("hpc-a-0's new VM coming up", 30, || {
        let s = futures_block(sim_status(&w, "hpc-a-0"))?;
        matches!(s.as_str(), "PROVISIONING" | "STAGING").then_some(s)
    });
    assert!(!w.updates_of("hpc-a-0").iter().any(|l| l.contains("state=resume")), "resumed while {coming}");
    w.wait_for("hpc-a-0 back in service", 30, || {
        w.updates_of("hpc-a-0").iter().any(|l| l.contains("state=resume")).then_some(())
    });
    assert_eq!(sim_status(&w, "hpc-a-0").await.as_deref(), Some("RUNNING"));
    w.set_slurm_nodes(&[("hpc-a-0", "idle", &["CLOUD"]), ("hpc-a-1", "idle", &["CLOUD", "POWERED_DOWN"])]);
    wait_converged(&w, &["hpc-a-0".to_string()].into(), 60).await;
    let calls = w.sim_calls().await;
    assert_eq!(
        count(&calls, "regionInstanceGroupManagerResizeRequests.insert"),
        3,
        "one new request: {calls}"
    );
    let ev = w.cli_json(&["events"]).to_string();
    assert!(!ev.contains("gce_refused"), "no refused step: {ev}");
}

/// A nodeset whose instance template cannot work for DWS Flex Start is refused at start: the daemon
/// says which and why (status, an event, the log), a resume for its nodes is answered (powered down
/// again with the reason, the job requeued by Slurm, not lost), nothing is asked of GCE for it; the
/// other nodeset works. A reload re-reads the templates: fixed, the nodeset works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nodeset_with_a_template_that_cannot_work_is_refused_and_the_other_works() {
    let mut w = World::new(&[("a", 0, 4, ""), ("b", 0, 4, "")], "").await;
    let mut bad = devcluster::stack::flex_template("b-flex");
    bad["properties"]["scheduling"]["provisioningModel"] = json!("STANDARD");
    w.sim_post("templates", bad).await;
    w.recording_slurm(&[
        ("hpc-a-0", "allocated", &["CLOUD", "NOT_RESPONDING", "POWERING_UP"]),
        ("hpc-b-0", "allocated", &["CLOUD", "NOT_RESPONDING", "POWERING_UP"]),
    ]);
    w.start_daemon();
    let rf = resume_file(&[(1, "hpc-a-0"), (2, "hpc-b-0")], "hpc-a-0,hpc-b-0");
    assert!(w.hook("resume", "hpc-a-0,hpc-b-0", Some(&rf)).status.success());
    wait_converged(&w, &["hpc-a-0".to_string()].into(), 60).await;
    let need = "properties.scheduling.provisioningModel is STANDARD, DWS Flex Start needs FLEX_START";

    let b0 = w.nodes().into_iter().find(|n| n["name"] == json!("hpc-b-0")).unwrap();
    assert_eq!(b0["state"], json!("powered_down"), "{b0}");
    let err = b0["last_error"].as_str().unwrap();
    assert!(err.contains("nodeset b refused") && err.contains(need), "{err}");
    let out = w.updates_of("hpc-b-0");
    assert!(out.iter().any(|l| l.contains("state=power_down_force") && l.contains("FLEX_START")), "{out:?}");
    let status = w.cli_json(&["status"]);
    assert_eq!(status["healthy"], json!(false), "{status}");
    assert!(status["last_pass"]["refused_nodesets"]["b"].as_str().unwrap().contains(need), "{status}");
    assert!(status["degraded"]["reasons"].to_string().contains("nodeset b refused"), "{status}");
    assert!(status["refused_nodesets"]["b"].as_str().unwrap().contains(need), "{status}");
    let text = String::from_utf8_lossy(&w.cli(&["status"]).stdout).to_string();
    assert!(text.contains("refused:       nodeset b: instance template") && text.contains(need), "{text}");
    let events = w.cli_json(&["events"]);
    let refused: Vec<&serde_json::Value> =
        events.as_array().unwrap().iter().filter(|e| e["kind"] == json!("nodeset_refused")).collect();
    // In either order: the resume may be taken in by the pass that first reads the template (its
    // events are stored first), or by a later one.
    let mut nodes: Vec<&str> = refused.iter().map(|e| e["nodes"].as_str().unwrap()).collect();
    nodes.sort();
    assert_eq!(nodes, ["", "hpc-b-0"], "once for the nodeset, once for the node: {events}");
    let template = "projects/test-project/regions/us-central1/instanceTemplates/b-flex";
    assert!(
        refused.iter().all(|e| e["message"]
            .as_str()
            .unwrap()
            .contains(&format!("nodeset b refused: instance template {template}: {need}"))),
        "{events}"
    );
    assert!(w.daemon_log().contains("nodeset refused"), "{}", tail(&w.daemon_log(), 20));
    let calls = w.sim_calls().await;
    assert_eq!(count(&calls, "regionInstanceGroupManagers.insert"), 1, "nothing asked of GCE for b: {calls}");
    assert_eq!(count(&calls, "regionInstanceTemplates.get"), 2, "each template read once: {calls}");

    // Fixed in GCE and reloaded: the nodeset works.
    w.sim_post("templates", devcluster::stack::flex_template("b-flex")).await;
    let pid = w.daemon.as_ref().unwrap().id() as i32;
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGHUP).unwrap();
    w.wait_for("b no longer refused", 30, || {
        let s = w.cli_json(&["status"]);
        (s["last_pass"]["iteration"].as_u64().is_some() && s["last_pass"].get("refused_nodesets").is_none())
            .then_some(())
    });
    let rf = resume_file(&[(2, "hpc-b-0")], "hpc-b-0");
    assert!(w.hook("resume", "hpc-b-0", Some(&rf)).status.success());
    wait_converged(&w, &["hpc-a-0".to_string(), "hpc-b-0".to_string()].into(), 60).await;
}
