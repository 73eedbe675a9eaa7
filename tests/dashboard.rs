//! The Grafana dashboard and the Prometheus rules in conf/ name only metrics the daemon exports: every
//! `slurm_dws_*` name in their queries (and in the rules' test series) is in the exposition a real
//! daemon serves, scraped over HTTP while it runs against the simulator with nodes up, a nodeset in a
//! backoff and passes done (so the families that only show with such state show).

mod common;

use common::World;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::Path;

fn repo(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).unwrap()
}

/// The `slurm_dws_*` names in `text`.
fn names(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let b = text.as_bytes();
    let mut i = 0;
    while let Some(k) = text[i..].find("slurm_dws_") {
        let start = i + k;
        let mut end = start;
        while end < b.len() && (b[end].is_ascii_alphanumeric() || b[end] == b'_') {
            end += 1;
        }
        if start == 0 || !(b[start - 1].is_ascii_alphanumeric() || b[start - 1] == b'_') {
            out.insert(text[start..end].to_string());
        }
        i = end;
    }
    out
}

/// Every query of the dashboard (its panels' targets, wherever they are nested).
fn dashboard_exprs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                match (k.as_str(), x) {
                    ("expr", Value::String(s)) => out.push(s.clone()),
                    _ => dashboard_exprs(x, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| dashboard_exprs(x, out)),
        _ => {}
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_dashboard_and_rule_metric_is_one_the_daemon_exports() {
    let dashboard: Value = serde_json::from_str(&repo("conf/grafana/slurm-dws.json")).unwrap();
    let mut exprs = Vec::new();
    dashboard_exprs(&dashboard, &mut exprs);
    assert!(exprs.len() >= 10, "the dashboard has its queries: {exprs:?}");
    let mut wanted: BTreeSet<(String, String)> = BTreeSet::new();
    for e in &exprs {
        let n = names(e);
        assert!(!n.is_empty(), "a dashboard query names no slurm-dws metric: {e}");
        wanted.extend(n.into_iter().map(|n| (n, "conf/grafana/slurm-dws.json".to_string())));
    }
    for file in ["conf/prometheus/slurm-dws.rules.yml", "conf/prometheus/slurm-dws.rules.test.yml"] {
        let n = names(&repo(file));
        assert!(!n.is_empty(), "{file} names no metric");
        wanted.extend(n.into_iter().map(|n| (n, file.to_string())));
    }

    // A daemon with nodes up and a nodeset out of capacity (its backoff), scraped after its passes.
    let port = free_port();
    let mut w = World::new(
        &[("a", 1, 4, "max_run_duration = 3600"), ("b", 0, 4, "")],
        &format!("[daemon]\nmetrics_listen = \"127.0.0.1:{port}\"\n"),
    )
    .await;
    w.capacity(json!({"match": "hpc-b-", "fail": {"code": "ZONE_RESOURCE_POOL_EXHAUSTED", "message": "no capacity"}}))
        .await;
    w.start_daemon();
    assert!(w
        .hook("resume", "hpc-a-1", Some(&common::resume_file(&[(7, "hpc-a-1")], "hpc-a-1")))
        .status
        .success());
    assert!(w
        .hook("resume", "hpc-b-0", Some(&common::resume_file(&[(8, "hpc-b-0")], "hpc-b-0")))
        .status
        .success());
    w.wait_for("a-0, a-1 up and b backing off", 60, || {
        let s = w.node_states();
        let up = ["hpc-a-0", "hpc-a-1"].iter().all(|n| s.get(*n).map(String::as_str) == Some("up"));
        let backoff = !w.cli_json(&["status"])["backoffs"].as_array().unwrap().is_empty();
        (up && backoff).then_some(())
    });
    // Two more passes, so that counters of time have moved.
    for _ in 0..2 {
        assert!(w.cli(&["reconcile"]).status.success());
    }
    let text = reqwest::get(format!("http://127.0.0.1:{port}/metrics")).await.unwrap().text().await.unwrap();
    // What the daemon exports: the families it declares and the series it writes (histograms'
    // `_bucket`, `_sum`, `_count` included).
    let mut exported = BTreeSet::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            exported.extend(rest.split_whitespace().next().map(str::to_string));
        } else if !line.starts_with('#') && !line.is_empty() {
            let name = line.split(['{', ' ']).next().unwrap();
            exported.insert(name.to_string());
        }
    }
    let unknown: Vec<String> =
        wanted.iter().filter(|(n, _)| !exported.contains(n)).map(|(n, f)| format!("{n} (in {f})")).collect();
    assert!(unknown.is_empty(), "metrics the daemon does not export: {unknown:?}\nit exports: {exported:?}");
}
