//! The simulator at the size of the benchmarks: 10,000 VMs in 1,000 regional MIGs, plus 2,000
//! resize requests ACCEPTED (held for capacity). Lists and gets must stay cheap: a page or a get
//! costs the same as on an empty project. Timings are printed (`--no-capture`) and bounded loosely,
//! since this runs as a debug build on a shared machine.

// Test rig: these drive a real simulator server and wait for its ticker in real time.
#![allow(clippy::disallowed_methods)]

mod common;

use common::*;
use reqwest::Method;
use std::sync::Arc;
use std::time::{Duration, Instant};

const MIGS: usize = 1000;
const PER_MIG: usize = 10;
const QUEUED_PER_MIG: usize = 2;

fn mig_name(i: usize) -> String {
    format!("hpc-s-{i:04}")
}

/// Runs `f(i)` for `0..n`, `width` at a time.
async fn fan_out<F, Fut>(n: usize, width: usize, f: F)
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let mut set = tokio::task::JoinSet::new();
    for i in 0..n {
        if set.len() >= width {
            set.join_next().await.expect("a task").expect("task ok");
        }
        set.spawn(f(i));
    }
    while let Some(r) = set.join_next().await {
        r.expect("task ok");
    }
}

/// Walks a list to its end: (items seen, pages, time of each page).
async fn walk(api: &Api, path: &str, count: impl Fn(&Value) -> usize) -> (usize, usize, Vec<Duration>) {
    let (mut seen, mut times) = (0, Vec::new());
    let mut token: Option<String> = None;
    loop {
        let sep = if path.contains('?') { '&' } else { '?' };
        let url = match &token {
            Some(t) => format!("{path}{sep}pageToken={t}"),
            None => path.to_string(),
        };
        let t = Instant::now();
        let (status, v) = api.get(&url).await;
        times.push(t.elapsed());
        assert_eq!(status, 200, "{v}");
        seen += count(&v);
        match v.get("nextPageToken").and_then(Value::as_str) {
            Some(t) => token = Some(t.to_string()),
            None => return (seen, times.len(), times),
        }
    }
}

fn median(mut d: Vec<Duration>) -> Duration {
    d.sort();
    d[d.len() / 2]
}

fn max(d: &[Duration]) -> Duration {
    d.iter().copied().max().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_and_gets_stay_cheap_at_10k_vms_1k_migs_2k_queued_requests() {
    let (sim, api) = start(1.0).await;
    let started = Instant::now();
    api.control(Method::POST, "lifecycle", Some(json!({"provisioning_ms": 0, "staging_ms": 0}))).await;
    api.control(Method::POST, "latency", Some(json!({"operation_ms": 0}))).await;
    let api = Arc::new(api);
    fan_out(MIGS, 32, |i| {
        let api = api.clone();
        async move {
            let (status, op) =
                api.post(&format!("{REGION}/instanceGroupManagers"), mig_body(&mig_name(i))).await;
            assert_eq!(status, 200, "{op}");
        }
    })
    .await;
    fan_out(MIGS, 32, |i| {
        let api = api.clone();
        async move {
            let names: Vec<String> = (0..PER_MIG).map(|j| format!("{}-{j}", mig_name(i))).collect();
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            api.insert_request(&mig_name(i), "run", &names, "604800").await;
        }
    })
    .await;
    // Every VM RUNNING (so every first request is SUCCEEDED before capacity is held).
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let fields = "fields=nextPageToken,items/*/instances/status";
        let (running, _, _) = walk(&api, &format!("projects/p/aggregated/instances?{fields}"), |v| {
            v["items"]["zones/us-central1-a"]["instances"]
                .as_array()
                .map_or(0, |a| a.iter().filter(|i| i["status"] == "RUNNING").count())
        })
        .await;
        if running == MIGS * PER_MIG {
            break;
        }
        assert!(Instant::now() < deadline, "only {running} VMs RUNNING");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    api.control(Method::POST, "capacity", Some(json!({"match": "hpc-s-", "hold": true}))).await;
    fan_out(MIGS * QUEUED_PER_MIG, 32, |k| {
        let api = api.clone();
        async move {
            let (i, j) = (k / QUEUED_PER_MIG, k % QUEUED_PER_MIG);
            let name = format!("{}-q{j}", mig_name(i));
            api.insert_request(&mig_name(i), &format!("q{j}"), &[&name], "3600").await;
        }
    })
    .await;
    let populated = started.elapsed();
    tokio::time::sleep(Duration::from_millis(200)).await; // CREATING → ACCEPTED

    // Lists, walked to the end, asking only for the fields a client uses.
    let (vms, pages, agg) = walk(
        &api,
        "projects/p/aggregated/instances?fields=nextPageToken,items/*/instances(name,status,networkInterfaces/networkIP),items/*/warning,unreachables",
        |v| v["items"]["zones/us-central1-a"]["instances"].as_array().map_or(0, Vec::len),
    )
    .await;
    assert_eq!((vms, pages), (MIGS * PER_MIG, MIGS * PER_MIG / 500));
    let (vms, _, zonal) =
        walk(&api, &format!("{ZONE}/instances?fields=nextPageToken,items(name,status)"), |v| {
            v["items"].as_array().map_or(0, Vec::len)
        })
        .await;
    assert_eq!(vms, MIGS * PER_MIG);
    let (migs, pages, mig_pages) = walk(
        &api,
        &format!("{REGION}/instanceGroupManagers?fields=nextPageToken,items(name,targetSize)"),
        |v| {
            v["items"].as_array().map_or(0, |a| {
                a.iter().filter(|m| m["targetSize"] == (PER_MIG + QUEUED_PER_MIG) as i64).count()
            })
        },
    )
    .await;
    assert_eq!((migs, pages), (MIGS, 2));
    let (full, _, full_pages) = walk(&api, "projects/p/aggregated/instances", |v| {
        v["items"]["zones/us-central1-a"]["instances"].as_array().map_or(0, Vec::len)
    })
    .await;
    assert_eq!(full, MIGS * PER_MIG);

    // Gets, spread over the project.
    let mut rr_gets = Vec::new();
    let mut managed = Vec::new();
    let mut vm_gets = Vec::new();
    let mut accepted = 0;
    for k in 0..100 {
        let i = (k * 7919) % MIGS;
        let mig = format!("{REGION}/instanceGroupManagers/{}", mig_name(i));
        let t = Instant::now();
        let (status, rr) = api.get(&format!("{mig}/resizeRequests/q{}", k % QUEUED_PER_MIG)).await;
        rr_gets.push(t.elapsed());
        assert_eq!(status, 200, "{rr}");
        accepted += usize::from(rr["state"] == "ACCEPTED");
        let t = Instant::now();
        let items = api.managed_at(&mig).await;
        managed.push(t.elapsed());
        assert_eq!(items.len(), PER_MIG + QUEUED_PER_MIG);
        let t = Instant::now();
        let (status, _) = api.instance(&format!("{}-{}", mig_name(i), k % PER_MIG)).await;
        vm_gets.push(t.elapsed());
        assert_eq!(status, 200);
    }
    assert_eq!(accepted, 100, "the queued requests are ACCEPTED");
    let (rrs, _, _) =
        walk(&api, &format!("{REGION}/instanceGroupManagers/{}/resizeRequests", mig_name(3)), |v| {
            v["items"].as_array().map_or(0, Vec::len)
        })
        .await;
    assert_eq!(rrs, 1 + QUEUED_PER_MIG);

    eprintln!(
        "populated {MIGS} MIGs, {} VMs, {} queued requests in {populated:.1?}",
        MIGS * PER_MIG,
        MIGS * QUEUED_PER_MIG
    );
    let rows = [
        ("aggregatedList page (fields=)", agg),
        ("aggregatedList page (full Instances)", full_pages),
        ("instances.list page (fields=)", zonal),
        ("regional MIG list page (fields=)", mig_pages),
        ("resize request get", rr_gets),
        ("listManagedInstances (12 items)", managed),
        ("instances.get", vm_gets),
    ];
    for (what, times) in rows {
        let (med, worst) = (median(times.clone()), max(&times));
        eprintln!("{what:<40} median {med:>10.2?}  max {worst:>10.2?}  ({} calls)", times.len());
        // Loose bounds for a debug build on a shared 2-core machine: a page of 500 Instances is
        // rendered (and schema-checked) at most once; a get touches only its resource.
        let bound =
            if what.contains("page") { Duration::from_millis(1500) } else { Duration::from_millis(250) };
        assert!(med < bound, "{what}: median {med:?} over {bound:?}");
    }
    sim.shutdown().await;
}
