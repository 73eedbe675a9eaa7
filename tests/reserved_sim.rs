//! Reserved capacity through real processes: the daemon against the simulator over real HTTP (its
//! reservations and calendar-mode future reservations booked, freed and ended through the control
//! API), the real store and the hooks as slurmctld runs them. Real Slurm's view of the same window
//! is in tests/reserved_e2e.rs.

// The real daemon against a real simulator, in real time: these wait for it.
#![allow(clippy::disallowed_methods)]

mod common;

use chrono::{DateTime, Utc};
use common::*;
use serde_json::{json, Value};
use std::collections::BTreeSet;

const PROJECT: &str = "test-project";
const ZONE: &str = "us-central1-a";
const MACHINE: &str = "n2-standard-4";

/// The `[nodeset.dws_flex]` lines of [`World`]'s nodeset spec that put the nodeset's own
/// `[nodeset.reservation]` table after it (`table`: its lines).
fn reservation_table(table: &str) -> String {
    format!("\n[nodeset.reservation]\n{table}\n")
}

/// Puts nodeset `name` of `w` on reserved capacity: its template becomes `{name}-res`, loaded into
/// the simulator consuming `affinity` with `machine`, and `provisioning_model = "reservation"`.
async fn reserve(w: &World, name: &str, machine: &str, affinity: &str) {
    w.sim_post(
        "templates",
        devcluster::stack::reservation_template(&format!("{name}-res"), machine, affinity),
    )
    .await;
    let text = std::fs::read_to_string(&w.config).unwrap();
    let from = format!("instanceTemplates/{name}-flex\"\n");
    assert!(text.contains(&from), "{text}");
    let text = text
        .replace(&from, &format!("instanceTemplates/{name}-res\"\nprovisioning_model = \"reservation\"\n"));
    std::fs::write(&w.config, text).unwrap();
}

async fn sim_reservation(w: &World, name: &str) -> Value {
    let all = w.sim_get("reservations").await;
    all.as_array().unwrap().iter().find(|r| r["name"] == name).cloned().unwrap_or(Value::Null)
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

/// `explain NODE` as one line (its words, whitespace folded).
fn explain(w: &World, node: &str) -> String {
    String::from_utf8_lossy(&w.cli(&["explain", node]).stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// A reservation of 4 with 2 units used elsewhere, a nodeset of 4 nodes: a job of 2 is provisioned
/// on the 2 free units; once they are given back, a job of 4 waits whole (its one request queued
/// in GCE, no VM of it) while only 2 are free; when the other units are freed the 4 come up. GCE
/// never holds more than 4 VMs on the reservation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_waits_whole_for_free_reserved_units_and_never_exceeds_the_reservation() {
    let table = reservation_table(&format!("name = \"projects/{PROJECT}/zones/{ZONE}/reservations/res4\""));
    let mut w = World::new(&[("r", 0, 4, &table)], "").await;
    reserve(&w, "r", MACHINE, &format!("projects/{PROJECT}/reservations/res4")).await;
    w.sim_post(
        "reservations",
        json!({"project": PROJECT, "zone": ZONE, "name": "res4", "count": 4, "machine_type": MACHINE,
               "in_use_elsewhere": 2}),
    )
    .await;
    // A Slurm that answers (with no nodes): MIGs are collected only when Slurm was read.
    w.healthy_slurm();
    w.start_daemon();

    // A job of 2: on the 2 free units.
    w.resume_for_job(1, "hpc-r-[0-1]");
    wait_converged(&w, &set(&["hpc-r-0", "hpc-r-1"]), 60).await;
    let r = sim_reservation(&w, "res4").await;
    assert_eq!(r["consuming_vms"], 2, "{r}");
    assert_eq!(r["in_use_count"], 4, "{r}");
    let vms = w.sim_state().await["instances"].clone();
    for vm in vms.as_array().unwrap() {
        assert_eq!(vm["scheduling"]["provisioningModel"], "RESERVATION_BOUND", "{vm}");
        assert!(
            vm["resourceStatus"]["reservationConsumptionInfo"].is_object(),
            "consumes the reservation: {vm}"
        );
    }
    // Its run done: Slurm suspends the nodes, the units go back to the reservation.
    let out = w.hook("suspend", "hpc-r-[0-1]", None);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    wait_converged(&w, &set(&[]), 60).await;

    // A job of 4 while 2 are free: one request of 4, queued in GCE; no VM of it.
    w.resume_for_job(2, "hpc-r-[0-3]");
    w.wait_for("the request of 4 queued in GCE", 30, || {
        let reqs = store_requests(&w);
        reqs.iter().any(|r| r["state"] == "ACCEPTED" || r["state"] == "accepted").then_some(())
    });
    w.wait_passes(3, 30);
    assert!(w.sim_vms().await.is_empty(), "never part of a job: {:?}", w.sim_vms().await);
    let requests = sim_requests(&w).await;
    assert_eq!(requests.len(), 1, "one request for the job: {requests:?}");
    let story = explain(&w, "hpc-r-2");
    eprintln!("explain hpc-r-2 while it waits: {story}");

    // The units used elsewhere are freed: the 4 come up.
    w.sim_post(&format!("reservations/{ZONE}/res4"), json!({"in_use_elsewhere": 0})).await;
    wait_converged(&w, &set(&["hpc-r-0", "hpc-r-1", "hpc-r-2", "hpc-r-3"]), 60).await;
    let r = sim_reservation(&w, "res4").await;
    assert_eq!(r["consuming_vms"], 4, "{r}");
    assert!(r["max_consuming_vms"].as_u64().unwrap() <= 4, "never more than the reservation: {r}");
    assert_eq!(w.events_of("reservation_too_small").len(), 0);
}

fn slurm_time(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%S").to_string()
}

/// The future reservation `name` as `futureReservations.get` shows it (the control API's list).
async fn booking(w: &World, name: &str) -> Value {
    let all = w.sim_get("future-reservations").await;
    all.as_array().unwrap().iter().find(|f| f["name"] == name).cloned().unwrap_or(Value::Null)
}

/// A calendar-mode booking whose window opens about 70 s after the daemon starts and lasts 100 s (the
/// simulator ten times faster: 700 and 1000 simulated seconds): before it opens, the nodeset's nodes are held by a
/// Slurm reservation until the start and a resume is answered at once with its job's start moved
/// to the window (`window_closed`), with no GCE write; once it opens, a job's nodes get VMs that
/// consume the reservation the booking delivered; at the window's end GCE deletes them, the nodes
/// leave service (`window_ended`) and nothing owned is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_calendar_booking_holds_its_nodes_until_the_window_and_ends_with_it() {
    let table = reservation_table(&format!(
        "future_reservation = \"projects/{PROJECT}/zones/{ZONE}/futureReservations/book\"\neol_grace = 10"
    ));
    let mut w = World::scaled(&[("c", 0, 2, &table)], "", 10.0).await;
    reserve(&w, "c", MACHINE, &format!("projects/{PROJECT}/reservations/book-res")).await;
    w.sim_post(
        "future-reservations",
        json!({"project": PROJECT, "zone": ZONE, "name": "book", "machine_type": MACHINE, "total_count": 2,
               "starts_in_seconds": 700, "duration_seconds": 1000, "reservation_name": "book-res"}),
    )
    .await;
    let window = booking(&w, "book").await["timeWindow"].clone();
    let start: DateTime<Utc> = window["startTime"].as_str().unwrap().parse().unwrap();
    let end: DateTime<Utc> = window["endTime"].as_str().unwrap().parse().unwrap();
    w.recording_slurm(&[
        ("hpc-c-0", "idle", &["CLOUD", "POWERED_DOWN"]),
        ("hpc-c-1", "idle", &["CLOUD", "POWERED_DOWN"]),
    ]);
    w.keep_reservations();
    w.start_daemon();

    // Before the window: a hold over every node of the nodeset, from now until the start.
    let hold = format!("slurm-dws-window-c-{}", start.timestamp());
    w.wait_for("the window hold", 30, || w.slurm_reservations().contains(&hold).then_some(()));
    let made: Vec<String> =
        w.scontrol_log().lines().filter(|l| l.contains(&hold)).map(String::from).collect();
    assert_eq!(made.len(), 1, "{made:?}");
    assert!(
        made[0]
            .starts_with(&format!("create reservation reservationname={hold} nodes=hpc-c-[0-1] starttime="))
            && made[0].contains(&format!("endtime={} ", slurm_time(start))),
        "{made:?}"
    );
    let held = w.events_of("window_hold");
    assert_eq!(held.len(), 1, "{held:?}");
    assert!(held[0]["message"].as_str().unwrap().contains("futureReservations/book"), "{held:?}");

    // A resume anyway (e.g. an admin's): answered at once, its job to start at the window's start.
    w.resume_for_job(7, "hpc-c-0");
    let closed = w.wait_for("window_closed", 30, || w.events_of("window_closed").first().cloned());
    assert!(closed["message"].as_str().unwrap().contains("opens at"), "{closed}");
    w.wait_for("the job's start moved to the window", 30, || {
        w.scontrol_log()
            .lines()
            .any(|l| l == format!("update jobid=7 starttime={}", slurm_time(start)))
            .then_some(())
    });
    let calls = w.sim_calls().await;
    assert_eq!(
        count(&calls, "regionInstanceGroupManagers.insert"),
        0,
        "no GCE write before the window: {calls}"
    );
    assert_eq!(count(&calls, "regionInstanceGroupManagerResizeRequests.insert"), 0, "{calls}");
    assert_eq!(w.node_states()["hpc-c-0"], "powered_down");

    // The window opens: the hold goes, and a job's nodes get VMs on the delivered reservation.
    let wait = (start - Utc::now()).num_seconds().max(0) as u64;
    w.wait_for("the window open and its hold gone", wait + 30, || {
        (Utc::now() >= start && !w.slurm_reservations().contains(&hold)).then_some(())
    });
    w.set_slurm_nodes(&[("hpc-c-0", "allocated", &["CLOUD"]), ("hpc-c-1", "allocated", &["CLOUD"])]);
    w.resume_for_job(8, "hpc-c-[0-1]");
    wait_converged(&w, &set(&["hpc-c-0", "hpc-c-1"]), 60).await;
    let r = sim_reservation(&w, "book-res").await;
    assert_eq!(r["delivered_by"].as_str().map(|s| s.contains("book")), Some(true), "{r}");
    let mut on: Vec<String> =
        r["vms"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect();
    on.sort();
    assert_eq!(on, ["hpc-c-0", "hpc-c-1"], "{r}");
    // No job starts that would outlive the window: every node is held from end − eol_grace, and
    // each up node's VM ends with the window (its end-of-life reservation).
    let end_hold = format!("slurm-dws-window-c-end-{}", end.timestamp());
    let made: Vec<String> =
        w.scontrol_log().lines().filter(|l| l.contains(&end_hold)).map(String::from).collect();
    assert_eq!(made.len(), 1, "{made:?}");
    assert!(
        made[0].contains("nodes=hpc-c-[0-1]")
            && made[0].contains(&format!(
                "starttime={} endtime={} ",
                slurm_time(end - chrono::Duration::seconds(10)),
                slurm_time(end)
            )),
        "{made:?}"
    );
    w.wait_for("the end-of-life reservations", 30, || {
        let eol = w.slurm_reservations().iter().filter(|r| r.starts_with("slurm-dws-eol-hpc-c-")).count();
        (eol == 2).then_some(())
    });
    let eol: Vec<String> = w
        .scontrol_log()
        .lines()
        .filter(|l| l.contains("reservationname=slurm-dws-eol-hpc-c-0"))
        .map(String::from)
        .collect();
    assert!(
        eol[0].contains(&format!("starttime={}", slurm_time(end - chrono::Duration::seconds(10)))),
        "{eol:?}"
    );

    // The window ends: GCE deletes the VMs, the nodes leave service, nothing owned is left.
    let wait = (end - Utc::now()).num_seconds().max(0) as u64;
    w.wait_for("window_ended for both nodes", wait + 30, || {
        (w.events_of("window_ended").len() == 2).then_some(())
    });
    let ended = w.events_of("window_ended");
    assert!(ended[0]["message"].as_str().unwrap().contains("node leaves service"), "{ended:?}");
    w.set_slurm_nodes(&[
        ("hpc-c-0", "idle", &["CLOUD", "POWERED_DOWN"]),
        ("hpc-c-1", "idle", &["CLOUD", "POWERED_DOWN"]),
    ]);
    wait_converged(&w, &set(&[]), 60).await;
    assert!(w.sim_migs().await.is_empty(), "MIGs collected: {:?}", w.sim_migs().await);
    let states = w.node_states();
    assert!(states.values().all(|s| s == "powered_down"), "{states:?}");
    // A resume after the end is answered at once, as before the window.
    w.resume_for_job(9, "hpc-c-1");
    w.wait_for("window_closed after the end", 30, || {
        w.events_of("window_closed")
            .iter()
            .any(|e| e["message"].as_str().unwrap().contains("ended at"))
            .then_some(())
    });
    assert!(w.sim_vms().await.is_empty());
}

/// Waits until a node of nodeset `ns` has an event of `kind` and returns its message; on a timeout, says every event.
fn wait_event(w: &World, kind: &str, ns: &str, secs: u64) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    loop {
        if let Some(m) = events_on(w, kind, ns).into_iter().next() {
            return m;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no {kind} on nodeset {ns} after {secs}s; events:\n{}\nnodes:\n{}\n--- daemon log ---\n{}",
            String::from_utf8_lossy(&w.cli(&["events"]).stdout),
            String::from_utf8_lossy(&w.cli(&["nodes"]).stdout),
            tail(&w.daemon_log(), 30)
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// The messages of the events of `kind` whose nodes (a hostlist) are of nodeset `ns`.
fn events_on(w: &World, kind: &str, ns: &str) -> Vec<String> {
    w.events_of(kind)
        .into_iter()
        .filter(|e| e["nodes"].as_str().is_some_and(|n| n.starts_with(&format!("hpc-{ns}-"))))
        .map(|e| e["message"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// Three nodesets whose reservation cannot serve them: one names a reservation GCE does not have,
/// one a reservation of 2 for a job of 3, one a reservation of another machine type. Each resume
/// fails once, visibly, in GCE's words (an event, the node's reason), and nothing is asked again:
/// over a minute of passes, no more than the one request (of the wrong machine type) reaches GCE,
/// and reads stay at one reservation list a pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_a_too_small_and_a_wrong_reservation_each_fail_once_visibly() {
    let res = |name: &str| {
        reservation_table(&format!("name = \"projects/{PROJECT}/zones/{ZONE}/reservations/{name}\""))
    };
    let (m, s, t) = (res("nope"), res("small2"), res("bigger"));
    let mut w = World::new(&[("m", 0, 4, &m), ("s", 0, 4, &s), ("t", 0, 4, &t)], "").await;
    for (ns, r) in [("m", "nope"), ("s", "small2"), ("t", "bigger")] {
        reserve(&w, ns, MACHINE, &format!("projects/{PROJECT}/reservations/{r}")).await;
    }
    w.sim_post(
        "reservations",
        json!({"project": PROJECT, "zone": ZONE, "name": "small2", "count": 2, "machine_type": MACHINE}),
    )
    .await;
    w.sim_post("reservations", json!({"project": PROJECT, "zone": ZONE, "name": "bigger", "count": 4, "machine_type": "a3-highgpu-8g"})).await;
    // Slurm's view: every node powered down, then those it resumes powering up (as slurmctld shows
    // them while ResumeProgram's answer is awaited).
    let slurm_nodes = |resumed: &[&str]| -> Vec<(String, &'static str, &'static [&'static str])> {
        ["m", "s", "t"]
            .iter()
            .flat_map(|ns| (0..4).map(move |i| format!("hpc-{ns}-{i}")))
            .map(|n| {
                let flags: &'static [&'static str] = if resumed.contains(&n.as_str()) {
                    &["CLOUD", "POWERING_UP"]
                } else {
                    &["CLOUD", "POWERED_DOWN"]
                };
                (n, "idle", flags)
            })
            .collect()
    };
    let show = |nodes: Vec<(String, &'static str, &'static [&'static str])>| {
        nodes.iter().map(|(n, s, f)| (n.clone(), *s, *f)).collect::<Vec<_>>()
    };
    let before = show(slurm_nodes(&[]));
    w.recording_slurm(&before.iter().map(|(n, s, f)| (n.as_str(), *s, *f)).collect::<Vec<_>>());
    w.start_daemon();
    w.wait_passes(1, 30);
    let _ = w.sim_post("calls/reset", json!({})).await;
    let started = w.iteration();

    let resumed = ["hpc-m-0", "hpc-m-1", "hpc-s-0", "hpc-s-1", "hpc-s-2", "hpc-t-0", "hpc-t-1"];
    let after = show(slurm_nodes(&resumed));
    w.set_slurm_nodes(&after.iter().map(|(n, s, f)| (n.as_str(), *s, *f)).collect::<Vec<_>>());
    w.resume_for_job(11, "hpc-m-[0-1]");
    w.resume_for_job(12, "hpc-s-[0-2]");
    w.resume_for_job(13, "hpc-t-[0-1]");

    let missing = wait_event(&w, "nodeset_refused", "m", 30);
    assert!(missing.contains("GCE has no reservation nope in zone us-central1-a"), "{missing}");
    let small = wait_event(&w, "reservation_too_small", "s", 30);
    assert!(small.contains("a group of 3 nodes cannot fit") && small.contains("holds 2 VMs"), "{small}");
    let failed = w.wait_for("the wrong machine type's request failed", 60, || {
        store_requests(&w).into_iter().find(|r| r["nodeset"] == "t" && r["state"] == "FAILED")
    });
    eprintln!("the failed request: {failed}");
    // Each resume answered with the reason on the nodes (Slurm requeues the job).
    for (ns, words) in [
        ("m", "GCE has no reservation nope"),
        ("s", "cannot fit"),
        ("t", "No available resources in specified reservations 'bigger'"),
    ] {
        w.wait_for(&format!("hpc-{ns} answered: {words}"), 30, || {
            w.scontrol_log()
                .lines()
                .any(|l| l.starts_with(&format!("update nodename=hpc-{ns}-")) && l.contains(words))
                .then_some(())
        });
    }
    // Slurm as it is once the answers are taken (`power_down_force`): every node powered down
    // again. A view left POWERING_UP would be a resume slurm-dws never got, which it takes for
    // drift after a minute and answers again (a second refusal event per node, as seen under load).
    w.set_slurm_nodes(&before.iter().map(|(n, s, f)| (n.as_str(), *s, *f)).collect::<Vec<_>>());
    assert!(
        failed["state"] == "FAILED"
            && events_on(&w, "request_failed", "t")[0].contains("No available resources"),
        "{failed}"
    );

    // A minute of passes: nothing is asked again.
    let since = std::time::Instant::now();
    while since.elapsed() < std::time::Duration::from_secs(60) {
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    }
    let passes = w.iteration() - started;
    let calls = w.sim_calls().await;
    eprintln!("{passes} passes, calls: {calls}");
    assert_eq!(
        count(&calls, "regionInstanceGroupManagerResizeRequests.insert"),
        1,
        "one request, of t: {calls}"
    );
    assert!(count(&calls, "regionInstanceGroupManagers.insert") <= 1, "{calls}");
    assert!(count(&calls, "reservations.list") <= passes + 1, "one list a pass: {calls}");
    // One event a resumed node (the refusal), one a group (too small, the failed request).
    assert_eq!(events_on(&w, "nodeset_refused", "m").len(), 2);
    assert_eq!(events_on(&w, "reservation_too_small", "s").len(), 1);
    assert_eq!(events_on(&w, "request_failed", "t").len(), 1);
    assert!(w.sim_vms().await.is_empty());
}
