//! GCE faults (issue 9), through real processes: the daemon against the simulator over real HTTP, hooks
//! spawned as slurmctld spawns them, the store on disk. Each fault the way production shows it — hanging
//! calls, operations that never finish, requests stuck ACCEPTED, FAILED requests, MIG deletes refused
//! during "an active transformation", 404 for a MIG we believed in, 409 and lost responses for what we
//! create — and then all of it at once at 30% under a 100-node workload. The end state is always checked
//! with the same invariants as the crash test (`common::converged`): one VM per wanted node, nothing in GCE
//! that is not on record, no empty MIG left, nothing in flight.

// The real daemon against a real simulator, faults in real time: these wait for them.
#![allow(clippy::disallowed_methods)]

mod common;

use common::*;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

fn names(range: std::ops::Range<u32>) -> BTreeSet<String> {
    range.map(|n| format!("hpc-a-{n}")).collect()
}

/// Sets a `[gcp]` key of the world's config (the shared config fixes them for every test).
fn set_gcp(w: &World, key: &str, value: &str) {
    let text = std::fs::read_to_string(&w.config).unwrap();
    let line = text.lines().find(|l| l.starts_with(&format!("{key} = "))).expect("key in config").to_string();
    std::fs::write(&w.config, text.replace(&line, &format!("{key} = {value}"))).unwrap();
}

/// `status --json` must answer promptly however GCE behaves: the socket never waits for a pass.
fn status_answers_quickly(w: &World) {
    let t = Instant::now();
    let s = w.cli_json(&["status"]);
    assert_eq!(s["daemon"]["running"], json!(true), "{s}");
    assert!(t.elapsed() < Duration::from_secs(3), "status took {:?}", t.elapsed());
}

fn events(w: &World) -> String {
    String::from_utf8_lossy(&w.cli(&["events"]).stdout).to_string()
}

/// No VM name twice in GCE (a set would hide a duplicate).
async fn no_duplicate_vms(w: &World) {
    let vms = w.sim_vms().await;
    let set: BTreeSet<&String> = vms.iter().collect();
    assert_eq!(set.len(), vms.len(), "a VM name appears twice: {vms:?}");
}

async fn mig_url(w: &World, mig: &str) -> String {
    format!("{}projects/test-project/regions/us-central1/instanceGroupManagers/{mig}", w.sim_url)
}

/// A call that hangs far beyond `request_timeout` is cut by the client's deadline and retried; the daemon
/// answers `status` throughout, and the nodes come up with one MIG and one request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_call_is_cut_by_the_client_deadline_and_retried() {
    let mut w = World::new(&[("a", 0, 8, "")], "").await;
    set_gcp(&w, "request_timeout", "2");
    w.sim_post(
        "faults",
        json!({"method": "regionInstanceGroupManagers.insert", "status": 200, "delay_ms": 60_000, "count": 1}),
    )
    .await;
    w.start_daemon();
    let started = Instant::now();
    assert!(w.hook("resume", "hpc-a-[0-1]", None).status.success());
    // While the insert hangs, the daemon answers.
    tokio::time::sleep(Duration::from_millis(800)).await;
    status_answers_quickly(&w);
    wait_converged(&w, &names(0..2), 60).await;
    assert!(
        started.elapsed() < Duration::from_secs(50),
        "the 60 s hang was not cut: {:?}",
        started.elapsed()
    );
    assert_eq!(w.sim_migs().await.len(), 1);
    let calls = w.sim_calls().await;
    assert!(count(&calls, "regionInstanceGroupManagers.insert") >= 2, "retried after the timeout: {calls}");
    no_duplicate_vms(&w).await;
}

/// Operations that stay RUNNING for ever: the daemon keeps serving, creates nothing twice while it
/// waits, and finishes the work once GCE's operations complete again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operations_that_never_finish_stall_nothing_and_duplicate_nothing() {
    let mut w = World::new(&[("a", 0, 8, "")], "").await;
    w.sim_post("latency", json!({"operation_ms": 3_600_000})).await;
    w.start_daemon();
    w.resume_for_job(7, "hpc-a-[0-3]");
    // Several passes go by with the MIG's insert operation RUNNING.
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_secs(2)).await;
        status_answers_quickly(&w);
    }
    let migs = w.sim_migs().await;
    assert!(migs.len() <= 1, "one MIG at most while its operation runs: {migs:?}");
    let rrs = sim_requests(&w).await;
    assert!(rrs.len() <= 1, "one resize request at most: {rrs:?}");
    w.sim_post("latency", json!({"operation_ms": 100})).await;
    // Operations already RUNNING keep their hour; the daemon must get on without them.
    wait_converged(&w, &names(0..4), 90).await;
    assert_eq!(w.sim_migs().await.len(), 1);
    assert_eq!(sim_requests(&w).await.len(), 1);
    no_duplicate_vms(&w).await;
}

/// A request GCE keeps ACCEPTED past the nodeset's `queue_timeout` is cancelled; its nodes return to
/// powered-down and usable, the MIG is collected, and the cause is in the event log and `explain`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_stuck_accepted_past_queue_timeout_is_cancelled_and_its_nodes_released() {
    let mut w = World::new(&[("a", 0, 8, "queue_timeout = 60")], "").await;
    w.capacity(json!({"match": "", "hold": true})).await;
    w.start_daemon();
    let started = Instant::now();
    w.resume_for_job(9, "hpc-a-[0-1]");
    w.wait_for("the request to be ACCEPTED", 30, || {
        let r = w.cli_json(&["requests", "--active"]);
        (r.as_array()?.first()?["state"] == json!("ACCEPTED")).then_some(())
    });
    wait_converged(&w, &BTreeSet::new(), 120).await;
    assert!(started.elapsed() >= Duration::from_secs(59), "cancelled before queue_timeout");
    let states = w.node_states();
    assert_eq!(states["hpc-a-0"], "powered_down", "{states:?}");
    let ev = events(&w);
    assert!(ev.contains("queue_timeout"), "the cause is in the event log: {ev}");
    let explain = String::from_utf8_lossy(&w.cli(&["explain", "hpc-a-0"]).stdout).to_string();
    assert!(explain.contains("queue_timeout") || explain.contains("queued"), "{explain}");
    let rrs = sim_requests(&w).await;
    assert!(rrs.is_empty(), "the MIG and its cancelled request are gone: {rrs:?}");
}

/// GCE refuses to delete a MIG while it is busy ("an active transformation"); the daemon tries again on
/// later passes and the MIG goes once GCE allows it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mig_delete_refused_during_an_active_transformation_is_retried() {
    let mut w = World::new(&[("a", 0, 8, "")], "").await;
    // Slurm answers (with no nodes): an empty MIG is collected only by a pass that read Slurm
    // and GCE both.
    w.healthy_slurm();
    w.start_daemon();
    assert!(w.hook("resume", "hpc-a-[0-1]", None).status.success());
    wait_converged(&w, &names(0..2), 60).await;
    let mig = w.sim_migs().await[0]["name"].as_str().unwrap().to_string();
    w.sim_post(&format!("migs/{mig}/busy"), json!({"seconds": 8})).await;
    assert!(w.hook("suspend", "hpc-a-[0-1]", None).status.success());
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(w.sim_migs().await.len(), 1, "GCE refused the delete so far");
    wait_converged(&w, &BTreeSet::new(), 60).await;
    let calls = w.sim_calls().await;
    assert!(count(&calls, "regionInstanceGroupManagers.delete") >= 2, "refused, then retried: {calls}");
    let log = w.daemon_log();
    assert!(log.contains("transformation") || log.contains("resourceNotReady"), "the refusal is logged");
}

/// A MIG deleted behind our back (an admin in the console): every call about it answers 404. The nodes
/// leave service, nothing stays "up" without a VM, and the same nodes can be resumed again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mig_deleted_behind_our_back_releases_its_nodes_and_they_resume_again() {
    let mut w = World::new(&[("a", 0, 8, "")], "").await;
    w.start_daemon();
    assert!(w.hook("resume", "hpc-a-[0-2]", None).status.success());
    wait_converged(&w, &names(0..3), 60).await;
    let mig = w.sim_migs().await[0]["name"].as_str().unwrap().to_string();
    let r = reqwest::Client::new().delete(mig_url(&w, &mig).await).send().await.unwrap();
    assert!(r.status().is_success(), "{}", r.text().await.unwrap());
    w.wait_for("the nodes to leave service", 60, || {
        let s = w.node_states();
        (0..3).all(|n| s[&format!("hpc-a-{n}")] != "up").then_some(())
    });
    wait_converged(&w, &BTreeSet::new(), 60).await;
    let migs = w.cli_json(&["migs"]);
    let rec = migs.as_array().unwrap().iter().find(|m| m["name"] == json!(mig)).cloned();
    assert!(rec.is_none_or(|m| m["state"] == json!("deleted")), "the MIG is recorded as gone: {migs}");
    assert!(events(&w).contains(&format!("MIG {mig} is gone")));
    assert!(w.hook("resume", "hpc-a-[0-2]", None).status.success());
    wait_converged(&w, &names(0..3), 60).await;
    no_duplicate_vms(&w).await;
}

/// GCE acts but its answer is lost (500 after the fact), or it answers 409 for what we are creating: the
/// retry reuses the requestId or takes the 409 as done; nothing is created twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_responses_and_409_on_create_duplicate_nothing() {
    let mut w = World::new(&[("a", 0, 32, "")], "").await;
    for method in ["regionInstanceGroupManagers.insert", "regionInstanceGroupManagerResizeRequests.insert"] {
        w.sim_post("faults", json!({"method": method, "status": 500, "after": true, "probability": 0.5}))
            .await;
        w.sim_post("faults", json!({"method": method, "status": 409, "after": true, "count": 2})).await;
    }
    w.start_daemon();
    let jobs: Vec<(u32, String)> =
        (0..5).map(|j| (300 + j, format!("hpc-a-[{}-{}]", j * 4, j * 4 + 3))).collect();
    let jobs_ref: Vec<(u32, &str)> = jobs.iter().map(|(j, n)| (*j, n.as_str())).collect();
    assert!(w.hook("resume", "hpc-a-[0-19]", Some(&resume_file(&jobs_ref, "hpc-a-[0-19]"))).status.success());
    wait_converged(&w, &names(0..20), 90).await;
    assert_eq!(w.sim_migs().await.len(), 5, "one MIG per job");
    assert_eq!(sim_requests(&w).await.len(), 5, "one resize request per job");
    assert_eq!(store_requests(&w).len(), 5);
    no_duplicate_vms(&w).await;
}

/// Everything at once, each fault drawn at random so that 30% of all calls go wrong, under a 100-node
/// workload of 20 jobs: error storms (403 rateLimitExceeded, 429, 500, 503), hanging calls past the
/// deadline, lost responses after GCE acted, slow operations, requests held ACCEPTED for a while, one
/// job's request FAILED (stockout, rollback), MIG deletes refused. Every node gets exactly one VM or a
/// recorded failure; the failed job's nodes resume once capacity returns; at the end nothing is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_gce_faults_at_once_at_thirty_percent_a_hundred_node_workload_finishes() {
    let mut w = World::new(&[("a", 0, 128, "")], "backoff_initial = 1\nbackoff_max = 2").await;
    // Slurm answers (with no nodes): an empty MIG is collected only by a pass that read Slurm
    // and GCE both.
    w.healthy_slurm();
    set_gcp(&w, "request_timeout", "2");
    // Six independent rules: 1 - (1-p)^6 = 30% of calls with p = 5.77%.
    let p = 0.0577;
    for rule in [
        json!({"status": 403, "reason": "rateLimitExceeded"}),
        json!({"status": 429}),
        json!({"status": 500}),
        json!({"status": 503}),
        json!({"status": 500, "after": true}),
        json!({"status": 200, "delay_ms": 3_000}),
    ] {
        let mut rule = rule;
        rule["method"] = json!("*");
        rule["probability"] = json!(p);
        w.sim_post("faults", rule).await;
    }
    w.sim_post("latency", json!({"operation_ms": 1_500})).await;
    w.capacity(json!({"match": "", "delay_seconds": 4.0})).await;
    let jobs: Vec<(u32, String)> =
        (0..20).map(|j| (500 + j, format!("hpc-a-[{}-{}]", j * 5, j * 5 + 4))).collect();
    let jobs_ref: Vec<(u32, &str)> = jobs.iter().map(|(j, n)| (*j, n.as_str())).collect();
    w.start_daemon();
    assert!(w.hook("resume", "hpc-a-[0-99]", Some(&resume_file(&jobs_ref, "hpc-a-[0-99]"))).status.success());

    // One job's request fails with a stockout once its MIG exists (GCE rolls back what it had).
    let failing_mig = w.wait_for("job 519's resize request", 120, || {
        let requests = w.cli_json(&["requests"]);
        requests.as_array()?.iter().find(|r| r["job_id"] == json!(519))?["mig"].as_str().map(String::from)
    });
    w.capacity(json!({"match": failing_mig, "fail": {"code": "ZONE_RESOURCE_POOL_EXHAUSTED",
        "message": "The zone 'projects/test-project/zones/us-central1-a' does not have enough resources available to fulfill the request."}}))
        .await;
    let failed = names(95..100);
    let wanted: BTreeSet<String> = names(0..100).difference(&failed).cloned().collect();
    // The failing job either failed (its nodes released) or was already provisioned before the rule.
    let got_capacity_first = w.wait_for("every job to be provisioned or failed", 240, || {
        let states = w.node_states();
        let up = wanted.iter().all(|n| states.get(n).map(String::as_str) == Some("up"));
        let f: Vec<&str> = failed.iter().map(|n| states.get(n).map(String::as_str).unwrap_or("")).collect();
        if !up {
            return None;
        }
        if f.iter().all(|s| *s == "up") {
            Some(true)
        } else if f.iter().all(|s| *s == "powered_down") {
            Some(false)
        } else {
            None
        }
    });
    if !got_capacity_first {
        let ev = events(&w);
        assert!(ev.contains("ZONE_RESOURCE_POOL_EXHAUSTED"), "the stockout is recorded: {}", tail(&ev, 30));
        // Slurm requeues the job and resumes its nodes again; capacity is back.
        w.capacity(json!({"match": failing_mig, "delay_seconds": 1.0})).await;
        w.wait_for("the backoff to end", 30, || {
            let s = w.cli_json(&["status"]);
            s["backoffs"].as_array().is_none_or(|b| b.is_empty()).then_some(())
        });
        let again = resume_file(&[(519, "hpc-a-[95-99]")], "hpc-a-[95-99]");
        assert!(w.hook("resume", "hpc-a-[95-99]", Some(&again)).status.success());
    }
    wait_converged(&w, &names(0..100), 240).await;
    no_duplicate_vms(&w).await;
    let requests: Vec<Value> = store_requests(&w);
    let succeeded: Vec<&Value> = requests.iter().filter(|r| r["state"] == json!("SUCCEEDED")).collect();
    let mut jobs_served: Vec<u64> = succeeded.iter().filter_map(|r| r["job_id"].as_u64()).collect();
    jobs_served.sort();
    jobs_served.dedup();
    assert_eq!(succeeded.len(), 20, "one successful request per job: {requests:?}");
    assert_eq!(jobs_served.len(), 20, "every job served once: {jobs_served:?}");
    assert_eq!(requests.len(), if got_capacity_first { 20 } else { 21 }, "{requests:?}");

    // Release everything while GCE refuses MIG deletes for a while.
    for m in w.sim_migs().await {
        let name = m["name"].as_str().unwrap();
        w.sim_post(&format!("migs/{name}/busy"), json!({"seconds": 6})).await;
    }
    assert!(w.hook("suspend", "hpc-a-[0-99]", None).status.success());
    wait_converged(&w, &BTreeSet::new(), 240).await;
    let calls = w.sim_calls().await;
    let total = calls["total"].as_u64().unwrap();
    eprintln!(
        "all GCE faults at 30%: {total} calls, stockout hit the request: {}; by method {}",
        !got_capacity_first, calls["by_method"]
    );
    let ev = events(&w);
    let failures: Vec<&str> = ev.lines().filter(|l| l.contains("request_failed")).collect();
    assert!(
        failures.iter().all(|l| l.contains("ZONE_RESOURCE_POOL_EXHAUSTED")),
        "only the stockout fails a request, never a transient error: {failures:?}"
    );
}

/// The requestIds of the `gce_step_failed` / `gce_step_gave_up` events, in order.
fn failed_request_ids(w: &World) -> Vec<String> {
    let events = w.cli_json(&["events"]);
    events
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "gce_step_failed" || e["kind"] == "gce_step_gave_up")
        .filter_map(|e| {
            let m = e["message"].as_str()?;
            let rid = m.split("(requestId ").nth(1)?;
            Some(rid.split([',', ')']).next()?.to_string())
        })
        .collect()
}

/// An Operation that ends DONE with an error closes its outbox entry: GCE replays a failed Operation
/// for the same requestId, so the next attempt, after a backoff, carries a new one — and goes through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_operation_is_tried_again_with_a_new_request_id_after_a_backoff() {
    let mut w = World::new(&[("a", 0, 8, "")], "backoff_initial = 1\nbackoff_max = 4\n").await;
    w.start_daemon();
    assert!(w.hook("resume", "hpc-a-[0-1]", None).status.success());
    wait_converged(&w, &names(0..2), 60).await;
    w.sim_post(
        "operation-faults",
        json!({"method": "regionInstanceGroupManagers.deleteInstances", "code": "RESOURCE_IN_USE_BY_ANOTHER_RESOURCE",
               "message": "The instance is in use", "count": 2}),
    )
    .await;
    assert!(w.hook("suspend", "hpc-a-0", None).status.success());
    wait_converged(&w, &names(1..2), 60).await;
    let calls = w.sim_calls().await;
    assert_eq!(
        count(&calls, "regionInstanceGroupManagers.deleteInstances"),
        3,
        "two failed, one went: {calls}"
    );
    let rids = failed_request_ids(&w);
    assert_eq!(rids.len(), 2, "{}", events(&w));
    assert_ne!(rids[0], rids[1], "each attempt after a failed Operation has its own requestId");
    let story = String::from_utf8_lossy(&w.cli(&["events", "--node", "hpc-a-0"]).stdout).to_string();
    assert!(
        story.contains("gce_step_failed")
            && story.contains("RESOURCE_IN_USE_BY_ANOTHER_RESOURCE: The instance is in use"),
        "{story}"
    );
    no_duplicate_vms(&w).await;
}

/// A step that keeps failing is tried a bounded number of times, each with a new requestId after a
/// growing backoff, then given up: status says so (and exits 1), explain names it, metrics count it.
/// A restart gives it a fresh start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_that_keeps_failing_is_given_up_visibly_and_a_restart_retries_it() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let extra =
        format!("backoff_initial = 1\nbackoff_max = 2\n[daemon]\nmetrics_listen = \"127.0.0.1:{port}\"\n");
    let mut w = World::new(&[("a", 0, 8, "")], &extra).await;
    w.start_daemon();
    assert!(w.hook("resume", "hpc-a-[0-1]", None).status.success());
    wait_converged(&w, &names(0..2), 60).await;
    w.sim_post(
        "operation-faults",
        json!({"method": "regionInstanceGroupManagers.deleteInstances", "code": "RESOURCE_IN_USE_BY_ANOTHER_RESOURCE",
               "message": "The instance is in use"}),
    )
    .await;
    assert!(w.hook("suspend", "hpc-a-0", None).status.success());
    w.wait_for("the step given up", 90, || {
        w.cli_json(&["events"]).to_string().contains("gce_step_gave_up").then_some(())
    });
    let rids = failed_request_ids(&w);
    assert_eq!(rids.len(), 5, "{}", events(&w));
    assert_eq!(rids.iter().collect::<BTreeSet<_>>().len(), 5, "a new requestId each time: {rids:?}");
    // No sixth attempt.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let calls = w.sim_calls().await;
    assert_eq!(count(&calls, "regionInstanceGroupManagers.deleteInstances"), 5, "{calls}");

    let out = w.cli(&["status"]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("DEGRADED") && text.contains("GAVE UP:       delete_instances"), "{text}");
    let status = w.cli_json(&["status"]);
    assert_eq!(status["gce_steps_given_up"][0]["failed"], 5, "{status}");
    let explain = String::from_utf8_lossy(&w.cli(&["explain", "hpc-a-0"]).stdout).to_string();
    assert!(
        explain.contains("GAVE UP") && explain.contains("RESOURCE_IN_USE_BY_ANOTHER_RESOURCE"),
        "{explain}"
    );
    let metrics =
        reqwest::get(format!("http://127.0.0.1:{port}/metrics")).await.unwrap().text().await.unwrap();
    assert!(metrics.lines().any(|l| l == "slurm_dws_gce_steps_given_up 1"), "{metrics}");
    assert_eq!(w.sim_vms().await, vec!["hpc-a-0".to_string(), "hpc-a-1".to_string()]);

    // The cause goes away; a restart gives the step a fresh start.
    w.sim_delete("operation-faults").await;
    w.kill_daemon();
    w.start_daemon();
    wait_converged(&w, &names(1..2), 60).await;
    let status = w.cli_json(&["status"]);
    assert_eq!(status["gce_steps_given_up"], json!([]), "{status}");
}

/// A create answered 409 "already exists" is checked against what GCE holds under that name: a
/// resize request someone else made there, for other instances and another run duration, is not
/// taken as ours. The group fails visibly with ALREADY_EXISTS_MISMATCH and its nodes are released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_409_on_create_for_something_that_is_not_what_we_meant_fails_visibly() {
    let mut w = World::new(&[("a", 0, 8, "")], "").await;
    // The first three resize-request inserts are refused (403, not retried with the same requestId),
    // so the test has time to make a different request under the group's name.
    w.sim_post(
        "faults",
        json!({"method": "regionInstanceGroupManagerResizeRequests.insert", "status": 403, "reason": "forbidden", "count": 3}),
    )
    .await;
    w.start_daemon();
    w.resume_for_job(41, "hpc-a-[0-1]");
    w.wait_for("the third refusal", 60, || {
        w.cli_json(&["events"]).to_string().contains("attempt 3 of 5").then_some(())
    });
    let group = store_requests(&w).into_iter().next().expect("the group is recorded");
    let (mig, name) =
        (group["mig"].as_str().unwrap().to_string(), group["name"].as_str().unwrap().to_string());
    let url = format!(
        "{}projects/test-project/regions/us-central1/instanceGroupManagers/{mig}/resizeRequests",
        w.sim_url
    );
    let body =
        json!({"name": name, "instances": [{"name": "hpc-a-0"}], "requestedRunDuration": {"seconds": "600"}});
    let r = reqwest::Client::new().post(&url).json(&body).send().await.unwrap();
    assert!(r.status().is_success(), "{}", r.text().await.unwrap());

    w.wait_for("the group failed with the mismatch", 60, || {
        let n = w.nodes();
        n.iter()
            .all(|n| {
                n["state"] == "powered_down"
                    && n["last_error"].as_str().is_some_and(|e| e.contains("ALREADY_EXISTS_MISMATCH"))
            })
            .then_some(())
    });
    let events = w.cli_json(&["events"]).to_string();
    assert!(events.contains("already exists and is not the one slurm-dws meant to create"), "{events}");
    assert!(events.contains("it asks for hpc-a-0, not hpc-a-[0-1]"), "{events}");
    let explain = String::from_utf8_lossy(&w.cli(&["explain", "hpc-a-1"]).stdout).to_string();
    assert!(explain.contains("ALREADY_EXISTS_MISMATCH"), "{explain}");
    assert!(w.sim_vms().await.iter().all(|v| v != "hpc-a-1"), "no VM taken as ours for hpc-a-1");
}
