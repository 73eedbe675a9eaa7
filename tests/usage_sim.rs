//! Usage spans through real processes: the daemon against the simulator over real HTTP, time
//! accelerated (a Flex VM's 600 s run duration passes in 10 s), the store on disk, and a fake Slurm
//! whose `squeue` shows a job running on two of the nodes. The spans the daemon records match the
//! VM lifetimes the simulator reports (`GET /_sim/lifetimes`) within a pass interval each, and the
//! seconds counters add up: busy + idle = the VMs' lives.

// The real daemon against a real simulator, in real time: these wait for it.
#![allow(clippy::disallowed_methods)]

mod common;

use chrono::{DateTime, Utc};
use common::*;
use serde_json::{json, Value};

/// The config's `reconcile.interval` (tests/common), in milliseconds.
const INTERVAL_MS: i64 = 2000;

fn at(v: &Value) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(v.as_str().unwrap()).unwrap().into()
}

/// A fake `squeue --json` (22.05's shape) that prints `jobs.json`, which the test rewrites.
fn fake_squeue(w: &World, jobs: Value) {
    use std::os::unix::fs::PermissionsExt;
    let bin = w.path().join("slurm-bin");
    let file = bin.join("jobs.json");
    std::fs::write(file.with_extension("tmp"), json!({"meta": {}, "errors": [], "jobs": jobs}).to_string())
        .unwrap();
    std::fs::rename(file.with_extension("tmp"), &file).unwrap();
    let p = bin.join("squeue");
    std::fs::write(p.with_extension("tmp"), format!("#!/bin/sh\ncat {}\n", file.display())).unwrap();
    std::fs::set_permissions(p.with_extension("tmp"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::rename(p.with_extension("tmp"), &p).unwrap();
}

fn job(state: &str, start: i64, end: i64) -> Value {
    json!({"job_id": 5, "job_state": state, "nodes": "hpc-a-[0-1]", "partition": "p", "user_name": "alice",
           "account": "physics", "time_limit": 10, "start_time": start, "end_time": end})
}

/// One sample of the metrics text, 0 when absent.
fn sample(text: &str, name: &str, use_: &str) -> f64 {
    let prefix = format!("{name}{{nodeset=\"a\",model=\"flex\",use=\"{use_}\"}} ");
    text.lines().find_map(|l| l.strip_prefix(&prefix)).map_or(0.0, |v| v.parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recorded_spans_match_the_simulators_vm_lifetimes() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let extra = format!("[daemon]\nmetrics_listen = \"127.0.0.1:{port}\"\n");
    let mut w = World::scaled(&[("a", 0, 4, "max_run_duration = 600\neol_grace = 60")], &extra, 60.0).await;
    w.recording_slurm(&[
        ("hpc-a-0", "idle", &["CLOUD", "POWERED_DOWN"]),
        ("hpc-a-1", "idle", &["CLOUD", "POWERED_DOWN"]),
        ("hpc-a-2", "idle", &["CLOUD", "POWERED_DOWN"]),
    ]);
    fake_squeue(&w, json!([]));
    w.start_daemon();
    w.resume_for_job(5, "hpc-a-[0-1]");
    w.resume_for_job(6, "hpc-a-2");
    w.wait_for("3 up", 30, || (w.node_states().values().filter(|s| *s == "up").count() == 3).then_some(()));
    // Job 5 runs on hpc-a-0 and hpc-a-1; hpc-a-2 waits idle.
    let start = Utc::now().timestamp();
    w.set_slurm_nodes(&[
        ("hpc-a-0", "allocated", &["CLOUD"]),
        ("hpc-a-1", "allocated", &["CLOUD"]),
        ("hpc-a-2", "idle", &["CLOUD"]),
    ]);
    fake_squeue(&w, json!([job("RUNNING", start, start + 600)]));
    let store = slurm_dws::store::Store::open(&w.state_dir()).await.unwrap();
    let far = (Utc::now() - chrono::Duration::hours(1), Utc::now() + chrono::Duration::hours(1));
    w.wait_for("job 5's spans", 20, || {
        let spans = futures_block(store.job_spans_between(far.0, far.1)).unwrap();
        (spans.len() == 2).then_some(())
    });
    // It ends 2 s later (Slurm still shows it, with its end time); the VMs reach their run's end.
    std::thread::sleep(std::time::Duration::from_secs(2));
    let end = Utc::now().timestamp();
    fake_squeue(&w, json!([job("COMPLETED", start, end)]));
    w.set_slurm_nodes(&[
        ("hpc-a-0", "idle", &["CLOUD"]),
        ("hpc-a-1", "idle", &["CLOUD"]),
        ("hpc-a-2", "idle", &["CLOUD"]),
    ]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let lives = loop {
        let lives = w.sim_get("lifetimes").await;
        let vms = lives["vms"].as_array().cloned().unwrap_or_default();
        let spans = store.vm_spans_between(far.0, far.1).await.unwrap();
        let done = vms.len() >= 3
            && vms.iter().all(|v| !v["deleted"].is_null())
            && spans.len() == vms.len()
            && spans.iter().all(|s| s.deleted_at.is_some());
        if done {
            break vms;
        }
        assert!(std::time::Instant::now() < deadline, "VMs not all gone and closed: {lives}\n{spans:?}");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };

    // Each VM's span: the simulator's id and creation, its deletion within a pass interval.
    let spans = store.vm_spans_between(far.0, far.1).await.unwrap();
    let mut life_secs = 0.0;
    for v in &lives {
        let s = spans
            .iter()
            .find(|s| s.instance_id == v["id"].as_str().unwrap())
            .unwrap_or_else(|| panic!("no span for {v}: {spans:?}"));
        assert_eq!(s.vm, v["name"].as_str().unwrap());
        assert_eq!((s.nodeset.as_str(), s.model.as_str()), ("a", "flex"));
        assert_eq!(s.created_at, at(&v["created"]), "GCE's creationTimestamp: {v}");
        let late = (s.deleted_at.unwrap() - at(&v["deleted"])).num_milliseconds();
        // At the start of the first pass whose list no longer shows it: after the VM went, unless it
        // went in the moment between that pass's start and its list (then just before).
        assert!(
            (-1000..=INTERVAL_MS + 1000).contains(&late),
            "closed {late} ms after the VM went: {v} {s:?}"
        );
        life_secs += (at(&v["deleted"]) - at(&v["created"])).num_milliseconds() as f64 / 1000.0;
    }
    let jobs = store.job_spans_between(far.0, far.1).await.unwrap();
    assert_eq!(jobs.len(), 2, "{jobs:?}");
    for j in &jobs {
        assert_eq!((j.job_id, j.user.as_str(), j.account.as_str()), (5, "alice", "physics"));
        assert_eq!(j.ended_at.map(|t| t.timestamp()), Some(end), "Slurm's end time: {j:?}");
    }
    let data_since = store.usage_data_since().await.unwrap().expect("recording began");
    assert!(spans.iter().all(|s| s.created_at >= data_since - chrono::Duration::seconds(5)));

    // The counters: busy + idle = the VMs' lives (within a pass interval each); busy ≈ the jobs'.
    let text = reqwest::get(format!("http://127.0.0.1:{port}/metrics")).await.unwrap().text().await.unwrap();
    let (busy, idle) = (
        sample(&text, "slurm_dws_vm_seconds_total", "busy"),
        sample(&text, "slurm_dws_vm_seconds_total", "idle"),
    );
    let recorded: f64 =
        spans.iter().map(|s| (s.deleted_at.unwrap() - s.created_at).num_milliseconds() as f64).sum();
    assert!(
        (busy + idle - recorded / 1000.0).abs() < 0.01,
        "busy {busy} + idle {idle} vs spans {recorded} ms\n{text}"
    );
    let slack = lives.len() as f64 * (INTERVAL_MS as f64 + 1000.0) / 1000.0;
    let early = lives.len() as f64;
    assert!(
        busy + idle >= life_secs - early && busy + idle <= life_secs + slack,
        "{busy} + {idle} vs {life_secs}"
    );
    let job_secs: f64 =
        jobs.iter().map(|j| (j.ended_at.unwrap() - j.started_at).num_milliseconds() as f64).sum();
    // A job span starts at Slurm's start time, which a pass learns later (the seconds before that
    // pass were counted idle already): the counter's busy is the spans' within a pass interval each.
    let tolerance = jobs.len() as f64 * INTERVAL_MS as f64 / 1000.0;
    assert!((busy - job_secs / 1000.0).abs() <= tolerance, "busy {busy} vs job spans {job_secs} ms");
    assert!(busy > 0.0 && idle > 0.0, "{text}");
    // The template serves no GPUs here (the default Flex template's machine type has none).
    assert!(
        text.contains("slurm_dws_gpu_seconds_total{nodeset=\"a\",model=\"flex\",use=\"busy\"}"),
        "{text}"
    );
}

/// Runs a future to completion from a synchronous closure (inside `wait_for`).
fn futures_block<F: std::future::Future>(f: F) -> F::Output {
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(f))
}

/// After a restart, a span whose VM went while the daemon was down closes at its last sighting
/// (the last full pass before the stop): short of the VM's life by at most the downtime and a pass
/// interval, never longer. A VM still there stays open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_restart_a_vm_gone_meanwhile_closes_at_its_last_sighting() {
    let mut w = World::new(&[("a", 0, 4, "")], "").await;
    w.recording_slurm(&[
        ("hpc-a-0", "idle", &["CLOUD", "POWERED_DOWN"]),
        ("hpc-a-1", "idle", &["CLOUD", "POWERED_DOWN"]),
    ]);
    fake_squeue(&w, json!([]));
    w.start_daemon();
    w.resume_for_job(5, "hpc-a-[0-1]");
    w.wait_for("2 up", 30, || (w.node_states().values().filter(|s| *s == "up").count() == 2).then_some(()));
    let store = slurm_dws::store::Store::open(&w.state_dir()).await.unwrap();
    w.wait_for("2 spans open", 20, || {
        (futures_block(store.open_vm_spans()).unwrap().len() == 2).then_some(())
    });
    w.wait_passes(1, 20);
    w.kill_daemon();
    let stopped = Utc::now();
    w.sim_post("instances/hpc-a-0/expire", json!({})).await;
    std::thread::sleep(std::time::Duration::from_secs(3));
    w.start_daemon();
    let far = (Utc::now() - chrono::Duration::hours(1), Utc::now() + chrono::Duration::hours(1));
    let spans = w.wait_for("hpc-a-0's span closed", 30, || {
        let spans = futures_block(store.vm_spans_between(far.0, far.1)).unwrap();
        spans.iter().any(|s| s.vm == "hpc-a-0" && s.deleted_at.is_some()).then_some(spans)
    });
    let lives = w.sim_get("lifetimes").await;
    let life = lives["vms"].as_array().unwrap().iter().find(|v| v["name"] == "hpc-a-0").unwrap().clone();
    let gone = spans.iter().find(|s| s.vm == "hpc-a-0").unwrap();
    let closed = gone.deleted_at.unwrap();
    assert_eq!(closed, gone.last_seen, "closed at its last sighting: {gone:?}");
    assert!(closed <= at(&life["deleted"]), "never longer than the VM's life: {gone:?} {life}");
    let short = (at(&life["deleted"]) - closed).num_milliseconds();
    let bound = (at(&life["deleted"]) - stopped).num_milliseconds() + INTERVAL_MS + 1000;
    assert!(short <= bound, "short by {short} ms, more than the downtime and a pass: {gone:?} {life}");
    let kept = spans.iter().find(|s| s.vm == "hpc-a-1").unwrap();
    assert!(kept.deleted_at.is_none(), "the VM still there stays open: {kept:?}");
}
