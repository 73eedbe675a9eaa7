//! Capacity advice through the real daemon and the simulator over HTTP: a request group's MIG goes to
//! the zone GCE scores best, the event says so, and `requests` shows its VMs there (no zone while
//! queued); a burst of groups of one size makes one call; a failing or hanging advice call never
//! holds a request back (every zone, in the same pass).

mod common;

use common::*;
use serde_json::{json, Value};
use tokio::time::Instant;

const ZONES: &str = "zones = [\"us-central1-a\", \"us-central1-b\", \"us-central1-c\"]";

/// Nodeset `a` over three zones of us-central1, with capacity advice on.
async fn three_zones() -> World {
    let w = World::new(&[("a", 0, 8, "capacity_advice = true")], "").await;
    let text = std::fs::read_to_string(&w.config).unwrap().replace("zones = [\"us-central1-a\"]", ZONES);
    std::fs::write(&w.config, text).unwrap();
    w
}

fn events(w: &World, kind: &str) -> Vec<Value> {
    w.events_of(kind)
}

fn up(w: &World, nodes: &[&str]) -> bool {
    let states = w.node_states();
    nodes.iter().all(|n| states.get(*n).map(String::as_str) == Some("up"))
}

/// Job `job`'s request group as `requests --json` prints it.
fn request_of(w: &World, job: u64) -> Option<Value> {
    w.cli_json(&["requests"]).as_array()?.iter().find(|r| r["job_id"] == job).cloned()
}

async fn advice_calls(w: &World) -> u64 {
    let calls = w.sim_calls().await;
    calls["by_method"]["advice.capacity"].as_u64().unwrap_or(0)
}

/// The zones of the simulator's MIG whose name starts with `prefix`.
async fn mig_zones(w: &World, prefix: &str) -> Vec<String> {
    let migs = w.sim_migs().await;
    let m = migs.iter().find(|m| m["name"].as_str().is_some_and(|n| n.starts_with(prefix))).expect("the MIG");
    m["distributionPolicy"]["zones"]
        .as_array()
        .unwrap()
        .iter()
        .map(|z| z["zone"].as_str().unwrap().rsplit('/').next().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_goes_to_the_zone_gce_scores_best_and_the_event_says_so() {
    let mut w = three_zones().await;
    w.sim_post("advice", json!({"zone": "us-central1-b", "obtainability": 0.9})).await;
    w.sim_post("advice", json!({"zone": "us-central1-c", "obtainability": 0.2})).await;
    // GCE holds the first request queued: it has no zone yet.
    w.sim_post("capacity", json!({"match": "", "hold": true})).await;
    let rf = resume_file(&[(7, "hpc-a-[0-1]")], "hpc-a-[0-1]");
    assert!(w.hook("resume", "hpc-a-[0-1]", Some(&rf)).status.success());
    w.start_daemon();
    let queued = w.wait_for("job 7's request queued", 60, || {
        request_of(&w, 7).filter(|r| r["state"] == "ACCEPTED" && r["phase"] == "active")
    });
    assert!(queued["zone"].is_null(), "no zone while queued: {queued}");
    w.sim_delete("capacity").await;
    w.wait_for("job 7's nodes up", 60, || up(&w, &["hpc-a-0", "hpc-a-1"]).then_some(()));

    // The MIG was created in us-central1-b alone, and its VMs are there.
    assert_eq!(mig_zones(&w, "hpc-a-j7-").await, vec!["us-central1-b"]);
    let vms = w.sim_state().await["instances"].clone();
    let zones: Vec<&str> = vms.as_array().unwrap().iter().filter_map(|v| v["zone"].as_str()).collect();
    assert!(!zones.is_empty() && zones.iter().all(|z| z.ends_with("us-central1-b")), "{vms}");
    // requests records where its VMs are (the pass after the success may be the one that lists them).
    let zone = w.wait_for("job 7's request's zone", 30, || {
        request_of(&w, 7).and_then(|r| r["zone"].as_str().map(str::to_string))
    });
    assert_eq!(zone, "us-central1-b");
    let table = String::from_utf8(w.cli(&["requests", "-o", "job_id,zone"]).stdout).unwrap();
    assert!(table.lines().any(|l| l.split_whitespace().eq(["7", "us-central1-b"])), "{table}");

    // The event, explain and the advice call itself.
    let chosen = events(&w, "zone_chosen");
    assert_eq!(chosen.len(), 1, "{chosen:?}");
    let message = chosen[0]["message"].as_str().unwrap();
    assert!(
        message.contains("us-central1-b (capacity advice: us-central1-b best (obtainability 0.90) of us-central1-a, us-central1-b, us-central1-c)"),
        "{message}"
    );
    let explain = String::from_utf8(w.cli(&["explain", "hpc-a-0"]).stdout).unwrap();
    assert!(explain.contains("Its MIG's zone(s): us-central1-b (capacity advice"), "{explain}");
    assert_eq!(advice_calls(&w).await, 1);

    // A second group of the same size within a minute: the answer is reused, no second call.
    let rf = resume_file(&[(8, "hpc-a-[2-3]")], "hpc-a-[2-3]");
    assert!(w.hook("resume", "hpc-a-[2-3]", Some(&rf)).status.success());
    w.wait_for("job 8's nodes up", 60, || up(&w, &["hpc-a-2", "hpc-a-3"]).then_some(()));
    assert_eq!(mig_zones(&w, "hpc-a-j8-").await, vec!["us-central1-b"]);
    assert_eq!(advice_calls(&w).await, 1, "one call per (nodeset, size) a minute");
    assert_eq!(events(&w, "zone_chosen").len(), 2);

    // Scores tie: the MIG gets every zone as good as the best (GCE picks one of them).
    w.sim_delete("advice").await;
    w.sim_post("advice", json!({"zone": "us-central1-a", "obtainability": 0.1})).await;
    let rf = resume_file(&[(9, "hpc-a-[4-6]")], "hpc-a-[4-6]");
    assert!(w.hook("resume", "hpc-a-[4-6]", Some(&rf)).status.success());
    w.wait_for("job 9's nodes up", 60, || up(&w, &["hpc-a-4", "hpc-a-5", "hpc-a-6"]).then_some(()));
    assert_eq!(mig_zones(&w, "hpc-a-j9-").await, vec!["us-central1-b", "us-central1-c"]);
    assert_eq!(advice_calls(&w).await, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_or_hanging_advice_never_holds_a_request_back() {
    let mut w = three_zones().await;
    // Every advice call fails.
    w.sim_post("faults", json!({"method": "advice.capacity", "status": 403, "count": 100})).await;
    w.start_daemon();
    let rf = resume_file(&[(7, "hpc-a-[0-1]")], "hpc-a-[0-1]");
    assert!(w.hook("resume", "hpc-a-[0-1]", Some(&rf)).status.success());
    w.wait_for("job 7's nodes up", 60, || up(&w, &["hpc-a-0", "hpc-a-1"]).then_some(()));
    assert_eq!(mig_zones(&w, "hpc-a-j7-").await, vec!["us-central1-a", "us-central1-b", "us-central1-c"]);
    let chosen = events(&w, "zone_chosen");
    let message = chosen[0]["message"].as_str().unwrap();
    assert!(message.contains("no capacity advice (") && message.ends_with("all zones)"), "{message}");

    // Advice hangs for 20 s: the MIG insert follows at most one call's time (2 s) after the resume.
    w.sim_delete("faults").await;
    w.sim_post(
        "faults",
        json!({"method": "advice.capacity", "status": 200, "delay_ms": 20000, "count": 100}),
    )
    .await;
    let began = Instant::now();
    let rf = resume_file(&[(8, "hpc-a-[2-3]")], "hpc-a-[2-3]");
    assert!(w.hook("resume", "hpc-a-[2-3]", Some(&rf)).status.success());
    let j8 = |w: &World| {
        events(w, "zone_chosen").into_iter().find(|e| e["message"].as_str().unwrap().contains("hpc-a-j8-"))
    };
    let event = w.wait_for("job 8's zone decided", 30, || j8(&w));
    let took = began.elapsed();
    assert!(took.as_secs() < 12, "the MIG's zones waited {took:?} for advice that hangs");
    let message = event["message"].as_str().unwrap();
    // Whichever ends the call first at 2 s (the client's call budget or the pass's timeout) says so.
    assert!(
        message.contains("no capacity advice (")
            && message.ends_with("all zones)")
            && (message.contains("no answer within 2 s") || message.contains("timed out")),
        "{message}"
    );
    w.wait_for("job 8's nodes up", 60, || up(&w, &["hpc-a-2", "hpc-a-3"]).then_some(()));
    assert_eq!(mig_zones(&w, "hpc-a-j8-").await, vec!["us-central1-a", "us-central1-b", "us-central1-c"]);
}
