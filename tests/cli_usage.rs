//! `slurm-dws usage` against a real store on disk: spans written through the store's own writes (as
//! the daemon records them), the binary run in every form (text, --json, --csv) and grouping, the
//! numbers checked by hand, the prices' sources, and bad input refused with exit 2.

use chrono::{DateTime, Duration, Utc};
use serde_json::Value;
use slurm_dws::model::{Request, RequestPhase};
use slurm_dws::store::{JobSpanEnd, Store, VmSpanEnd};
use slurm_dws::usage::{JobSpan, VmSpan};
use std::path::{Path, PathBuf};
use std::process::Output;

const BIN: &str = env!("CARGO_BIN_EXE_slurm-dws");
const T0: &str = "2026-03-02T00:00:00Z";

fn at(h: f64) -> DateTime<Utc> {
    T0.parse::<DateTime<Utc>>().unwrap() + Duration::milliseconds((h * 3_600_000.0) as i64)
}

fn vm(
    id: &str,
    node: &str,
    nodeset: &str,
    model: &str,
    (mt, gpus): (&str, u32),
    job: Option<u64>,
    h: f64,
) -> VmSpan {
    VmSpan {
        instance_id: id.into(),
        vm: format!("{node}-x"),
        node: node.into(),
        nodeset: nodeset.into(),
        model: model.into(),
        machine_type: mt.into(),
        gpus,
        job_id: job,
        created_at: at(h),
        last_seen: at(h),
        deleted_at: None,
    }
}

fn job(id: u64, node: &str, user: &str, account: &str, h: f64) -> JobSpan {
    JobSpan {
        job_id: id,
        node: node.into(),
        user: user.into(),
        account: account.into(),
        partition: "gpu".into(),
        started_at: at(h),
        ended_at: None,
    }
}

/// A state directory with the known workload, recorded as a pass would: spans opened, then closed.
/// - hpc-a-0 (flex, a3-ultragpu-8g, made for job 7): 0h..10h; job 7 (ann, phys) 1h..5h, job 8 (bob,
///   chem) 3h..6h: busy 1h..6h = 5h, idle 5h.
/// - hpc-s-0 (spot, a3-ultragpu-8g, static): 0h..4h; job 9 (bob, chem) 1h..3h: busy 2h, idle 2h.
/// - hpc-c-0 (standard, c3-standard-8, no GPU, static): 0h..1h, idle; no price in the config.
async fn record(state: &Path) {
    let store = Store::open_for_daemon(state).await.unwrap();
    let mut tx = store.begin().await.unwrap();
    tx.usage_seen(at(0.0)).await.unwrap();
    tx.open_vm_spans(&[
        vm("1", "hpc-a-0", "a", "flex", ("a3-ultragpu-8g", 8), Some(7), 0.0),
        vm("2", "hpc-s-0", "s", "spot", ("a3-ultragpu-8g", 8), None, 0.0),
        vm("3", "hpc-c-0", "c", "standard", ("c3-standard-8", 0), None, 0.0),
    ])
    .await
    .unwrap();
    tx.open_job_spans(&[
        job(7, "hpc-a-0", "ann", "phys", 1.0),
        job(8, "hpc-a-0", "bob", "chem", 3.0),
        job(9, "hpc-s-0", "bob", "chem", 1.0),
    ])
    .await
    .unwrap();
    let end = |job_id, node: &str, e| JobSpanEnd { job_id, node: node.into(), ended_at: at(e) };
    tx.close_job_spans(&[end(7, "hpc-a-0", 5.0), end(8, "hpc-a-0", 6.0), end(9, "hpc-s-0", 3.0)])
        .await
        .unwrap();
    let gone = |id: &str, h| VmSpanEnd { instance_id: id.into(), deleted_at: at(h) };
    tx.close_vm_spans(&[gone("1", 10.0), gone("2", 4.0), gone("3", 1.0)], Some(at(10.0))).await.unwrap();
    tx.usage_seen(at(10.0)).await.unwrap();
    // One flex request group that waited 20 minutes for its capacity.
    let r = Request {
        id: 1,
        nodeset: "a".into(),
        job_id: Some(7),
        tag: "0000abcd".into(),
        mig: "hpc-a-0000abcd".into(),
        name: "hpc-a-0000abcd".into(),
        nodes: vec!["hpc-a-0".into()],
        run_duration: 36_000,
        phase: RequestPhase::Active,
        gce_state: None,
        created_at: at(-1.0 / 3.0),
        updated_at: at(0.0),
        last_error: None,
        zone_choice: None,
        zone: None,
    };
    tx.record_wait(&r, at(0.0)).await.unwrap();
    tx.commit().await.unwrap();
}

struct W {
    _dir: tempfile::TempDir,
    config: PathBuf,
    state: PathBuf,
}

fn world(pricing: &str) -> W {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let config = dir.path().join("slurm-dws.toml");
    std::fs::write(
        &config,
        format!(
            "cluster_name = \"hpc\"\nstate_dir = \"{}\"\nsocket = \"{}/s.sock\"\n[gcp]\nproject = \"p\"\nregion = \"us-central1\"\n\
             [[nodeset]]\nname = \"a\"\ninstance_template = \"global/instanceTemplates/t\"\nzones = [\"us-central1-a\"]\nnode_count_dynamic_max = 2\n\
             [[nodeset]]\nname = \"s\"\ninstance_template = \"global/instanceTemplates/t\"\nzones = [\"us-central1-a\"]\nnode_count_static = 1\nprovisioning_model = \"spot\"\n\
             {pricing}",
            state.display(),
            dir.path().display()
        ),
    )
    .unwrap();
    tokio::runtime::Runtime::new().unwrap().block_on(record(&state));
    W { _dir: dir, config, state }
}

const PRICES: &str = "[pricing.per_hour]\n\"a3-ultragpu-8g\" = { flex = 40.0, spot = 30.0 }\n";

fn run(w: &W, args: &[&str]) -> Output {
    std::process::Command::new(BIN).arg("--config").arg(&w.config).args(args).output().unwrap()
}

fn ok(w: &W, args: &[&str]) -> String {
    let out = run(w, args);
    assert!(out.status.success(), "usage {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

const DAY: [&str; 4] = ["--since", "2026-03-02T00:00:00Z", "--until", "2026-03-03T00:00:00Z"];

fn usage(extra: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = ["usage"].iter().chain(DAY.iter()).map(|s| s.to_string()).collect();
    a.extend(extra.iter().map(|s| s.to_string()));
    a
}

fn json(w: &W, extra: &[&str]) -> Value {
    let args = usage(&[extra, &["--json"]].concat());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    serde_json::from_str(&ok(w, &args)).unwrap()
}

/// (key, vm_hours, busy, idle, gpu_hours, cost)
type Row = (String, f64, f64, f64, f64, Option<f64>);
type WantRow<'a> = (&'a str, f64, f64, f64, f64, Option<f64>);

fn rows(v: &Value) -> Vec<Row> {
    v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let f = |k: &str| r[k].as_f64().unwrap();
            (
                r["key"].as_str().unwrap().to_string(),
                f("vm_hours"),
                f("busy_vm_hours"),
                f("idle_vm_hours"),
                f("gpu_hours"),
                r["cost"].as_f64(),
            )
        })
        .collect()
}

fn want(rows: &[WantRow]) -> Vec<Row> {
    rows.iter().map(|&(k, a, b, c, d, e)| (k.to_string(), a, b, c, d, e)).collect()
}

#[test]
fn usage_by_every_key_in_json_and_csv_with_the_same_numbers() {
    let w = world(PRICES);
    let v = json(&w, &[]);
    // The fixed fields, exactly.
    for k in ["since", "until", "by", "data_since", "currency", "rows"] {
        assert!(v.get(k).is_some(), "{k} missing: {v}");
    }
    assert_eq!(
        (v["since"].as_str(), v["until"].as_str()),
        (Some("2026-03-02T00:00:00Z"), Some("2026-03-03T00:00:00Z"))
    );
    assert_eq!((v["by"].as_str(), v["currency"].as_str()), (Some("nodeset"), Some("USD")));
    assert_eq!(v["data_since"].as_str(), Some(T0));
    for r in v["rows"].as_array().unwrap() {
        let keys: Vec<&str> = r.as_object().unwrap().keys().map(String::as_str).collect();
        for k in ["key", "vm_hours", "busy_vm_hours", "idle_vm_hours", "gpu_hours", "cost"] {
            assert!(keys.contains(&k), "{k} missing in {r}");
        }
    }
    assert_eq!(
        rows(&v),
        want(&[
            ("a", 10.0, 5.0, 5.0, 80.0, Some(400.0)),
            ("c", 1.0, 0.0, 1.0, 0.0, None),
            ("s", 4.0, 2.0, 2.0, 32.0, Some(120.0)),
        ])
    );
    assert_eq!(v["rows"][1]["unpriced"][0].as_str(), Some("c3-standard-8/standard"));
    assert_eq!(v["total"]["vm_hours"].as_f64(), Some(15.0));
    assert_eq!(v["queue"][0]["mean_wait_seconds"].as_i64(), Some(1200));
    // --csv: the same rows, the same numbers, a header line.
    let args = usage(&["--csv"]);
    let csv = ok(&w, &args.iter().map(String::as_str).collect::<Vec<_>>());
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some("key,vm_hours,busy_vm_hours,idle_vm_hours,gpu_hours,cost"));
    let from_csv: Vec<_> = lines
        .map(|l| {
            let c: Vec<&str> = l.split(',').collect();
            let f = |i: usize| c[i].parse::<f64>().unwrap();
            (c[0].to_string(), f(1), f(2), f(3), f(4), c[5].parse::<f64>().ok())
        })
        .collect();
    assert_eq!(from_csv, rows(&v));
    // By job: busy to the job, shared where two ran at once; idle to the job the VM was made for.
    assert_eq!(
        rows(&json(&w, &["--by", "job"])),
        want(&[
            ("7", 8.0, 3.0, 5.0, 64.0, Some(320.0)),
            ("8", 2.0, 2.0, 0.0, 16.0, Some(80.0)),
            ("9", 2.0, 2.0, 0.0, 16.0, Some(60.0)),
            ("(no job)", 3.0, 0.0, 3.0, 16.0, None),
        ])
    );
    assert_eq!(
        rows(&json(&w, &["--by", "user"])),
        want(&[
            ("ann", 8.0, 3.0, 5.0, 64.0, Some(320.0)),
            ("bob", 4.0, 4.0, 0.0, 32.0, Some(140.0)),
            ("(no job)", 3.0, 0.0, 3.0, 16.0, None),
        ])
    );
    let by_account = rows(&json(&w, &["--by", "account"]));
    assert_eq!(by_account.iter().map(|r| r.0.as_str()).collect::<Vec<_>>(), ["chem", "phys", "(no job)"]);
    assert_eq!(rows(&json(&w, &["--by", "partition"]))[0].0, "gpu");
    assert_eq!(
        rows(&json(&w, &["--by", "model"])),
        want(&[
            ("flex", 10.0, 5.0, 5.0, 80.0, Some(400.0)),
            ("spot", 4.0, 2.0, 2.0, 32.0, Some(120.0)),
            ("standard", 1.0, 0.0, 1.0, 0.0, None),
        ])
    );
    // A period inside the day clips: 2h..5h.
    let v: Value = serde_json::from_str(&ok(
        &w,
        &["usage", "--since", "2026-03-02T02:00:00Z", "--until", "2026-03-02T05:00:00Z", "--json"],
    ))
    .unwrap();
    assert_eq!(
        rows(&v),
        want(&[("a", 3.0, 3.0, 0.0, 24.0, Some(120.0)), ("s", 2.0, 1.0, 1.0, 16.0, Some(60.0))])
    );
}

#[test]
fn the_text_says_which_prices_it_used_that_costs_are_estimates_and_when_data_starts() {
    let w = world(PRICES);
    let args = usage(&[]);
    let text = ok(&w, &args.iter().map(String::as_str).collect::<Vec<_>>());
    for needle in [
        "by nodeset, costs in USD",
        "Data kept since 2026-03-02T00:00:00Z",
        "a3-ultragpu-8g flex: 40.0000 (config [pricing.per_hour])",
        "no price for c3-standard-8/standard: the cost of c is unknown",
        "not an invoice",
        "catalog prices: not used",
        "a (flex): 1 request (1 nodes), waited 20m on average",
        "unknown (no price)",
    ] {
        assert!(text.contains(needle), "{needle:?} not in:\n{text}");
    }
    // The default period (the last 7 days, before any of this data) works and is by nodeset.
    assert!(ok(&w, &["usage"]).contains("by nodeset"));
    assert!(ok(&w, &["usage", "--since", "30d", "--until", "1h"]).contains("by nodeset"));
}

#[test]
fn catalog_prices_from_the_cache_with_their_date_and_the_config_wins() {
    let w = world(&format!("[pricing]\ncatalog = true\n{PRICES}"));
    let v = json(&w, &[]);
    assert!(v["catalog"].as_str().unwrap().contains("does not exist"), "{}", v["catalog"]);
    assert!(v["rows"][1]["cost"].is_null());
    std::fs::write(
        w.state.join(slurm_dws::usage::CATALOG_CACHE),
        r#"{"fetched_at":"2026-03-01T00:00:00Z","currency":"USD","per_hour":{"c3-standard-8":{"standard":0.5},"a3-ultragpu-8g":{"flex":99.0}}}"#,
    )
    .unwrap();
    let v = json(&w, &[]);
    assert_eq!(rows(&v)[0].5, Some(400.0), "the config's flex price wins");
    assert_eq!(rows(&v)[1].5, Some(0.5));
    let standard = v["prices"].as_array().unwrap().iter().find(|p| p["model"] == "standard").unwrap();
    assert_eq!(
        (standard["source"].as_str(), standard["fetched_at"].as_str()),
        (Some("catalog"), Some("2026-03-01T00:00:00Z"))
    );
    let args = usage(&[]);
    let text = ok(&w, &args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(
        text.contains("c3-standard-8 standard: 0.5000 (catalog list price of 2026-03-01T00:00:00Z)"),
        "{text}"
    );
    std::fs::write(w.state.join(slurm_dws::usage::CATALOG_CACHE), "garbage").unwrap();
    assert!(json(&w, &[])["catalog"].as_str().unwrap().contains("cannot be read"));
}

#[test]
fn bad_input_exits_2_naming_what_is_wrong() {
    let w = world(PRICES);
    for (args, needle) in [
        (&["usage", "--since", "yesterday"][..], "--since"),
        (&["usage", "--until", "5x"], "--until"),
        (
            &["usage", "--since", "2026-03-03T00:00:00Z", "--until", "2026-03-02T00:00:00Z"],
            "not before --until",
        ),
        (&["usage", "--since", "1h", "--until", "1h"], "not before --until"),
        (&["usage", "--by", "users"], "--by"),
        (&["usage", "--json", "--csv"], "--csv"),
    ] {
        let out = run(&w, args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle) && err.trim().lines().count() == 1, "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}
