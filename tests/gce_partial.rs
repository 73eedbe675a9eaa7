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
    assert!(w.hook("resume", "hpc-a-1", Some(&resume_file(&[(5, "hpc-a-1")], "hpc-a-1"))).status.success());
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
