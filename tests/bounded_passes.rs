//! Bounded passes and polling that scales (issue 16), through real processes: the daemon against the
//! simulator over real HTTP. A stuck call on one nodeset does not hold another nodeset's resume; 403
//! `rateLimitExceeded` slows the daemon down instead of failing its steps; requests queued for minutes
//! are polled less often, carried in between, and asked about again at once when the lists show a change.

// The real daemon against a real simulator, faults in real time: these wait for them.
#![allow(clippy::disallowed_methods)]

mod common;

use common::*;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

fn names(nodeset: &str, range: std::ops::Range<u32>) -> BTreeSet<String> {
    range.map(|n| format!("hpc-{nodeset}-{n}")).collect()
}

/// Sets a `[gcp]` key of the world's config (the shared config fixes them for every test).
fn set_gcp(w: &World, key: &str, value: &str) {
    let text = std::fs::read_to_string(&w.config).unwrap();
    let line = text.lines().find(|l| l.starts_with(&format!("{key} = "))).expect("key in config").to_string();
    std::fs::write(&w.config, text.replace(&line, &format!("{key} = {value}"))).unwrap();
}

/// Adds `lines` to the world's `[gcp]` table.
fn add_gcp(w: &World, lines: &str) {
    let text = std::fs::read_to_string(&w.config).unwrap();
    std::fs::write(&w.config, text.replacen("[gcp]\n", &format!("[gcp]\n{lines}\n"), 1)).unwrap();
}

fn last_iteration(w: &World) -> u64 {
    w.cli_json(&["status"])["last_pass"]["iteration"].as_u64().unwrap_or(0)
}

/// Every pass's duration, from the daemon's log lines.
fn pass_durations_ms(w: &World) -> Vec<u64> {
    w.daemon_log()
        .lines()
        .filter(|l| l.contains("reconcile pass") && l.contains("duration_ms="))
        .filter_map(|l| l.split("duration_ms=").nth(1)?.split_whitespace().next()?.parse().ok())
        .collect()
}

async fn rate_limited(w: &World) -> u64 {
    let calls = w.sim_calls().await;
    calls["rate_limited"]["by_method"].as_object().map_or(0, |m| m.values().filter_map(Value::as_u64).sum())
}

/// Nodeset `a`'s MIG delete hangs (each call far beyond `request_timeout`) while nodeset `b` is
/// resumed: `b`'s resize request is planned and sent within 2 passes, every pass stays within about
/// `request_timeout`, and the stuck delete is carried from pass to pass until GCE answers again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_call_on_one_nodeset_delays_another_nodesets_resume_by_at_most_two_passes() {
    let mut w = World::new(&[("a", 0, 8, ""), ("b", 0, 8, "")], "").await;
    // An empty MIG is collected only in a pass that read Slurm too.
    w.healthy_slurm();
    set_gcp(&w, "request_timeout", "3");
    w.start_daemon();
    assert!(w.hook("resume", "hpc-a-[0-1]", None).status.success());
    wait_converged(&w, &names("a", 0..2), 60).await;

    // Every delete of a MIG now hangs for ten minutes: only a's MIG is being deleted.
    w.sim_post(
        "faults",
        json!({"method": "regionInstanceGroupManagers.delete", "status": 200, "delay_ms": 600_000}),
    )
    .await;
    assert!(w.hook("suspend", "hpc-a-[0-1]", None).status.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    while count(&w.sim_calls().await, "regionInstanceGroupManagers.delete") == 0 {
        assert!(Instant::now() < deadline, "a's MIG delete was never sent:\n{}", tail(&w.daemon_log(), 30));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A pass is now held by the stuck delete; b's resume arrives.
    let before = last_iteration(&w);
    let asked = Instant::now();
    let resume = resume_file(&[(21, "hpc-b-[0-1]")], "hpc-b-[0-1]");
    assert!(w.hook("resume", "hpc-b-[0-1]", Some(&resume)).status.success());
    let deadline = Instant::now() + Duration::from_secs(60);
    let (sent_by, took) = loop {
        if sim_requests(&w).await.iter().any(|(mig, _)| mig.starts_with("hpc-b-")) {
            break (last_iteration(&w), asked.elapsed());
        }
        assert!(Instant::now() < deadline, "b's resize request was not sent:\n{}", tail(&w.daemon_log(), 40));
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // The pass running when the hook came (before + 1) and the next (before + 2): by then b's
    // request is in GCE, so at most the first of them had finished when it appeared.
    assert!(
        sent_by <= before + 1,
        "b's resize request was sent after pass {sent_by}; pass {before} had finished when b's hook came"
    );
    assert!(took < Duration::from_secs(16), "b's resize request took {took:?} (request_timeout = 3 s)");
    eprintln!("b's resize request sent {took:?} after its hook, passes {before} → {sent_by}");

    // The delete is carried and resent on later passes; no pass is held much longer than the budget.
    let deadline = Instant::now() + Duration::from_secs(30);
    while count(&w.sim_calls().await, "regionInstanceGroupManagers.delete") < 3 {
        assert!(Instant::now() < deadline, "the stuck delete is not resent by later passes");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let durations = pass_durations_ms(&w);
    let longest = durations.iter().copied().max().unwrap_or(0);
    assert!(longest <= 9_000, "a pass took {longest} ms with request_timeout = 3 s: {durations:?}");
    assert!(
        w.cli_json(&["requests", "--active"])
            .as_array()
            .is_some_and(|a| a.iter().all(|r| r["nodeset"] != "a")),
        "a's request is not active"
    );

    // GCE answers again: everything finishes, nothing twice.
    w.sim_delete("faults").await;
    wait_converged(&w, &names("b", 0..2), 60).await;
    assert_eq!(w.sim_migs().await.len(), 1, "a's MIG is gone, b's remains");
}

/// A project whose read quota is smaller than what the daemon would use: GCE answers 403
/// `rateLimitExceeded`, the daemon lowers its read rate for a while (the refusals die down), and no
/// step fails for it: every job still gets exactly one request, which succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limit_answers_slow_the_daemon_down_instead_of_failing_steps() {
    let mut w = World::new(&[("a", 0, 32, "")], "").await;
    add_gcp(&w, "read_calls_per_minute = 600\nwrite_calls_per_minute = 600");
    // 20 reads per 10 s (120 a minute): fewer than fresh requests polled every 2 s pass need.
    w.sim_post("quotas", json!({"read_per_minute": 20, "write_per_minute": 60, "window_seconds": 10.0}))
        .await;
    w.capacity(json!({"match": "", "hold": true})).await;
    w.start_daemon();
    let jobs: Vec<(u32, String)> =
        (0..4).map(|j| (40 + j, format!("hpc-a-[{}-{}]", j * 4, j * 4 + 3))).collect();
    let jobs_ref: Vec<(u32, &str)> = jobs.iter().map(|(j, n)| (*j, n.as_str())).collect();
    assert!(w.hook("resume", "hpc-a-[0-15]", Some(&resume_file(&jobs_ref, "hpc-a-[0-15]"))).status.success());

    // The first 30 s: the quota is hit and the daemon slows down.
    tokio::time::sleep(Duration::from_secs(30)).await;
    let early = rate_limited(&w).await;
    assert!(early > 0, "the quota was never hit: {}", w.sim_calls().await);
    assert!(w.daemon_log().contains("slowing this kind of call down"), "{}", tail(&w.daemon_log(), 30));
    // The next 30 s: the same load, few refusals.
    tokio::time::sleep(Duration::from_secs(30)).await;
    let late = rate_limited(&w).await - early;
    eprintln!("403 rateLimitExceeded: {early} in the first 30 s, {late} in the next 30 s");
    assert!(late * 2 <= early || late <= 2, "the daemon did not slow down: {early} then {late} refusals");

    // Capacity comes: every job's request succeeds, once, and no step was failed by a rate limit.
    w.sim_delete("capacity").await;
    wait_converged(&w, &names("a", 0..16), 120).await;
    let requests = store_requests(&w);
    assert_eq!(requests.len(), 4, "one request per job: {requests:?}");
    assert!(requests.iter().all(|r| r["state"] == json!("SUCCEEDED")), "{requests:?}");
    let events = String::from_utf8_lossy(&w.cli(&["events"]).stdout).to_string();
    assert!(!events.contains("gce_refused") && !events.contains("request_failed"), "{}", tail(&events, 20));
}

/// Requests DWS keeps queued: polled every pass while fresh, then at a growing interval, carried in
/// between (the pass report counts them); when capacity comes the VMs in the list bring them back at
/// once, so the nodes are up within a few passes, not an interval later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_queued_for_minutes_are_polled_less_carried_between_and_asked_again_at_once() {
    let mut w = World::new(&[("a", 0, 16, "")], "").await;
    w.capacity(json!({"match": "", "hold": true})).await;
    w.start_daemon();
    let created = Instant::now();
    let jobs: Vec<(u32, String)> =
        (0..4).map(|j| (60 + j, format!("hpc-a-[{}-{}]", j * 2, j * 2 + 1))).collect();
    let jobs_ref: Vec<(u32, &str)> = jobs.iter().map(|(j, n)| (*j, n.as_str())).collect();
    assert!(w.hook("resume", "hpc-a-[0-7]", Some(&resume_file(&jobs_ref, "hpc-a-[0-7]"))).status.success());
    w.wait_for("4 requests ACCEPTED", 30, || {
        let r = w.cli_json(&["requests", "--active"]);
        let a = r.as_array()?;
        (a.len() == 4 && a.iter().all(|r| r["state"] == json!("ACCEPTED"))).then_some(())
    });
    let get = "regionInstanceGroupManagerResizeRequests.get";

    // Fresh: every pass asks about every request.
    w.sim_post("calls/reset", json!({})).await;
    tokio::time::sleep(Duration::from_secs(20)).await;
    let fresh = count(&w.sim_calls().await, get);

    // Queued for over two minutes: each is asked about every minute or so.
    let at = created + Duration::from_secs(135);
    tokio::time::sleep(at.saturating_duration_since(Instant::now())).await;
    w.sim_post("calls/reset", json!({})).await;
    tokio::time::sleep(Duration::from_secs(20)).await;
    let queued = count(&w.sim_calls().await, get);
    let report = w.cli_json(&["status"])["last_pass"].clone();
    eprintln!("resize-request gets in 20 s: {fresh} while fresh, {queued} after 2 minutes queued; {report}");
    assert!(fresh >= 16, "fresh requests are polled every pass: {fresh} gets in 20 s");
    assert!(queued <= 8, "requests queued for minutes are polled less: {queued} gets in 20 s");
    assert!(report["requests_carried"].as_u64().unwrap_or(0) > 0, "the pass knows what it carried: {report}");
    assert!(
        w.cli_json(&["requests", "--active"]).as_array().is_some_and(|a| a.len() == 4),
        "a carried request is still followed, not concluded from not asking"
    );

    // Capacity comes: the VMs appear in the list, the requests are asked about at once.
    w.sim_delete("capacity").await;
    let released = Instant::now();
    wait_converged(&w, &names("a", 0..8), 30).await;
    let took = released.elapsed();
    eprintln!("all nodes up {took:?} after capacity came");
    assert!(took < Duration::from_secs(20), "the carried requests waited for their interval: {took:?}");
}

const RR_INSERT: &str = "regionInstanceGroupManagerResizeRequests.insert";

/// Every call of `method` on nodeset `a`'s MIGs hangs `secs` (the simulator then carries it out and
/// answers), once.
async fn hang_a(w: &World, method: &str, secs: u64) {
    w.sim_post(
        "faults",
        json!({"method": method, "status": 200, "delay_ms": secs * 1000, "count": 1,
               "path_contains": "instanceGroupManagers/hpc-a-"}),
    )
    .await;
}

async fn wait_calls(w: &World, method: &str, n: u64, secs: u64) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while count(&w.sim_calls().await, method) < n {
        assert!(Instant::now() < deadline, "{method} never reached GCE:\n{}", tail(&w.daemon_log(), 30));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The outbox entries still pending for nodeset `a`'s resize-request insert.
async fn pending_a_inserts(w: &World) -> Vec<slurm_dws::model::OutboxEntry> {
    let store = slurm_dws::store::Store::open(&w.state_dir()).await.unwrap();
    let pending = store.pending_outbox().await.unwrap();
    store.close().await;
    pending
        .into_iter()
        .filter(|e| {
            e.kind == slurm_dws::model::MutationKind::ResizeRequestInsert && e.target.starts_with("hpc-a-")
        })
        .collect()
}

/// Nodeset a's resize-request insert hangs 12 s (then GCE acts and answers): the pass that sent it
/// leaves it in flight after `STEP_WAIT` and ends; later passes neither wait for it nor send it
/// again, `status` shows it hanging, b's resume reaches its own insert within 2 passes, and the
/// first pass after the answer arrives records it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_insert_stays_in_flight_while_passes_go_on_and_the_next_pass_records_its_answer() {
    let mut w = World::new(&[("a", 0, 8, ""), ("b", 0, 8, "")], "").await;
    // The client's own budget outlasts the hang: the call is answered, not cut.
    set_gcp(&w, "retry_deadline", "60");
    set_gcp(&w, "request_timeout", "30");
    hang_a(&w, RR_INSERT, 12).await;
    w.start_daemon();
    let ra = resume_file(&[(31, "hpc-a-[0-1]")], "hpc-a-[0-1]");
    assert!(w.hook("resume", "hpc-a-[0-1]", Some(&ra)).status.success());
    wait_calls(&w, RR_INSERT, 1, 30).await;
    let hung_at = Instant::now();

    // The pass that sent it ends without it: the call is in its report, in flight.
    let in_flight = w.wait_for("a's insert reported in flight", 15, || {
        let s = w.cli_json(&["status"]);
        let calls = s["gce_calls_in_flight"].as_array()?.clone();
        calls.iter().any(|c| c["target"].as_str().is_some_and(|t| t.starts_with("hpc-a-"))).then_some(calls)
    });
    assert_eq!(in_flight[0]["step"], json!("insert_resize_request"), "{in_flight:?}");
    let text = String::from_utf8_lossy(&w.cli(&["status"]).stdout).to_string();
    assert!(text.contains("in flight:") && text.contains("hanging for"), "{text}");

    // b's resume comes while a's insert hangs.
    let before = last_iteration(&w);
    let asked = Instant::now();
    let rb = resume_file(&[(32, "hpc-b-[0-1]")], "hpc-b-[0-1]");
    assert!(w.hook("resume", "hpc-b-[0-1]", Some(&rb)).status.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    let (sent_by, took) = loop {
        if sim_requests(&w).await.iter().any(|(mig, _)| mig.starts_with("hpc-b-")) {
            break (last_iteration(&w), asked.elapsed());
        }
        assert!(Instant::now() < deadline, "b's resize request was not sent:\n{}", tail(&w.daemon_log(), 40));
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    eprintln!(
        "b's resize request sent {took:?} after its hook, passes {before} → {sent_by}, a's insert hanging"
    );
    assert!(
        sent_by <= before + 2,
        "b's resize request was sent after pass {sent_by}; the hook came after {before}"
    );
    // Waiting for a's answer would have taken the rest of its 12 s.
    assert!(took < Duration::from_secs(6), "b's resize request took {took:?} while a's insert hung");
    assert!(hung_at.elapsed() < Duration::from_secs(11), "the hang ended before b was checked: not a test");

    // Passes go on at their normal length while the call hangs, and none sends it again.
    let passes_at_hang = last_iteration(&w);
    let answered_at = hung_at + Duration::from_secs(12);
    tokio::time::sleep(answered_at.saturating_duration_since(Instant::now())).await;
    let during = last_iteration(&w) - passes_at_hang;
    assert!(during >= 2, "only {during} passes while a's insert hung");
    assert_eq!(count(&w.sim_calls().await, RR_INSERT), 2, "a's insert sent twice, or b's not sent");

    // The answer has come: the first pass after it records it (the daemon is woken by it).
    let answered_iter = last_iteration(&w);
    let recorded_by = w.wait_for("a's insert recorded", 30, || {
        let it = last_iteration(&w);
        futures_block(pending_a_inserts(&w)).is_empty().then_some(it)
    });
    assert!(
        recorded_by <= answered_iter + 2,
        "recorded by pass {recorded_by}; answered after pass {answered_iter}"
    );
    wait_converged(&w, &names("a", 0..2).union(&names("b", 0..2)).cloned().collect(), 60).await;
    assert_eq!(count(&w.sim_calls().await, RR_INSERT), 2, "nothing sent twice");
    assert_eq!(sim_requests(&w).await.len(), 2, "one resize request per job");
    let durations = pass_durations_ms(&w);
    let longest = durations.iter().copied().max().unwrap_or(0);
    // The pass that sent the insert waited STEP_WAIT (2 s) for it; none waited for the 12 s hang.
    assert!(longest <= 6_000, "a pass took {longest} ms while a call hung 12 s: {durations:?}");
    assert!(w.daemon_log().contains("left in flight"), "{}", tail(&w.daemon_log(), 30));
}

/// SIGTERM with a call in flight that does not answer within the shutdown grace: the daemon stops
/// within its bound, abandoning the call with its outbox entry still pending; the next start sends
/// it again with the same requestId, and one resize request results.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_in_flight_at_shutdown_is_abandoned_within_the_bound_and_resent_with_its_request_id() {
    let mut w = World::new(&[("a", 0, 8, "")], "").await;
    set_gcp(&w, "retry_deadline", "120");
    set_gcp(&w, "request_timeout", "60");
    hang_a(&w, RR_INSERT, 50).await;
    w.start_daemon();
    let ra = resume_file(&[(41, "hpc-a-[0-1]")], "hpc-a-[0-1]");
    assert!(w.hook("resume", "hpc-a-[0-1]", Some(&ra)).status.success());
    wait_calls(&w, RR_INSERT, 1, 30).await;
    w.wait_for("a's insert in flight", 15, || {
        w.cli_json(&["status"])["gce_calls_in_flight"].as_array().filter(|a| !a.is_empty()).map(|_| ())
    });

    let t = Instant::now();
    let exit = w.stop_daemon();
    let took = t.elapsed();
    let log = w.daemon_log();
    assert!(exit.success(), "exit {exit:?}\n{}", tail(&log, 30));
    // IN_FLIGHT_GRACE (5 s) and the handlers' grace; far from the 50 s hang.
    assert!(took < Duration::from_secs(15), "stopping took {took:?}\n{}", tail(&log, 30));
    assert!(log.contains("abandoned at shutdown"), "{}", tail(&log, 30));
    let pending = pending_a_inserts(&w).await;
    assert_eq!(pending.len(), 1, "the abandoned insert stays pending: {pending:?}");
    let request_id = pending[0].request_id.clone();
    assert!(log.contains(&request_id), "the log names the abandoned requestId {request_id}");

    // The next start re-sends it (the hang was for one call only) with the same requestId.
    w.start_daemon();
    wait_converged(&w, &names("a", 0..2), 60).await;
    assert_eq!(count(&w.sim_calls().await, RR_INSERT), 2, "the hung call and its resend");
    assert_eq!(sim_requests(&w).await.len(), 1, "one resize request");
    let store = slurm_dws::store::Store::open(&w.state_dir()).await.unwrap();
    let entries = store.outbox_for_target(&pending[0].target).await.unwrap();
    store.close().await;
    assert_eq!(entries.len(), 1, "one outbox entry, resent, not a new one: {entries:?}");
    assert_eq!(entries[0].request_id, request_id, "the same requestId: {entries:?}");
    assert_eq!(entries[0].state, slurm_dws::model::OutboxState::Done, "{entries:?}");
}

fn futures_block<F: std::future::Future>(f: F) -> F::Output {
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(f))
}
