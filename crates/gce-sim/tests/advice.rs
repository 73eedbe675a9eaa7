//! `advice.capacity` over raw HTTP: the best-scoring zone wins, ties give several shards (ANY) or
//! one (ANY_SINGLE_ZONE), a stockout lowers a zone, malformed bodies are 400s naming the field, and
//! the call is counted and takes injected faults like any other.
// Test rig: waits for the simulator's ticker in real time.
#![allow(clippy::disallowed_methods)]

mod common;
use common::*;
use reqwest::Method;
use std::time::{Duration, Instant};

const ADVICE: &str = "projects/p/regions/us-central1/advice/capacity";

fn advice_body(size: i64, shape: &str, zones: &[&str]) -> Value {
    json!({
        "size": size,
        "instanceProperties": {"scheduling": {"provisioningModel": "FLEX_START"}},
        "distributionPolicy": {"targetShape": shape,
                               "zones": zones.iter().map(|z| json!({"zone": z})).collect::<Vec<_>>()},
        "instanceFlexibilityPolicy": {"instanceSelections": {
            "fallback": {"rank": "1", "machineTypes": ["a3-highgpu-8g"]},
            "a3u": {"rank": "0", "machineTypes": ["a3-ultragpu-8g", "a3-highgpu-8g"]}}},
    })
}

async fn score(api: &Api, zone: &str, machine_type: Option<&str>, obtainability: f64) {
    let mut b = json!({"zone": zone, "obtainability": obtainability});
    if let Some(m) = machine_type {
        b["machine_type"] = json!(m);
    }
    api.control(Method::POST, "advice", Some(b)).await;
}

async fn advise(api: &Api, body: Value) -> Value {
    let (status, v) = api.post(ADVICE, body).await;
    assert_eq!(status, 200, "{v}");
    let recs = v["recommendations"].as_array().expect("recommendations");
    assert_eq!(recs.len(), 1, "one recommendation: {v}");
    recs[0].clone()
}

/// `(zone, instanceCount)` of each shard, checking the echoed fields on the way.
fn shards(rec: &Value) -> Vec<(String, i64)> {
    rec["shards"]
        .as_array()
        .expect("shards")
        .iter()
        .map(|s| {
            assert_eq!(s["machineType"], "a3-ultragpu-8g", "first machine type of the rank-0 selection: {s}");
            assert_eq!(s["provisioningModel"], "FLEX_START", "{s}");
            (s["zone"].as_str().expect("zone").to_string(), s["instanceCount"].as_i64().expect("count"))
        })
        .collect()
}

#[tokio::test]
async fn the_best_scoring_zone_gets_the_whole_size() {
    let (sim, api) = start(1.0).await;
    score(&api, "us-central1-b", Some("a3-ultragpu-8g"), 0.8).await;
    // A zone-wide score loses to the machine type's own: c is 0.9 for everything but a3-ultragpu-8g.
    score(&api, "us-central1-c", None, 0.9).await;
    score(&api, "us-central1-c", Some("a3-ultragpu-8g"), 0.2).await;
    let rec = advise(
        &api,
        advice_body(
            6,
            "ANY",
            &[
                "zones/us-central1-a",
                "projects/p/zones/us-central1-b",
                "https://www.googleapis.com/compute/v1/projects/p/zones/us-central1-c",
            ],
        ),
    )
    .await;
    assert_eq!(rec["scores"]["obtainability"], 0.8, "{rec}");
    assert_eq!(shards(&rec), vec![("us-central1-b".to_string(), 6)]);

    // Cleared, every zone is back to 0.5 and they tie.
    api.control(Method::DELETE, "advice", None).await;
    let rec = advise(&api, advice_body(6, "ANY", &["zones/us-central1-b", "zones/us-central1-c"])).await;
    assert_eq!(rec["scores"]["obtainability"], 0.5, "{rec}");
    assert_eq!(shards(&rec).len(), 2, "{rec}");
    sim.shutdown().await;
}

#[tokio::test]
async fn ties_give_a_shard_per_zone_or_one_for_any_single_zone() {
    let (sim, api) = start(1.0).await;
    score(&api, "us-central1-a", None, 0.7).await;
    score(&api, "us-central1-b", None, 0.3).await;
    score(&api, "us-central1-c", None, 0.7).await;
    score(&api, "us-central1-f", None, 0.7).await;
    let zones = ["zones/us-central1-f", "zones/us-central1-a", "zones/us-central1-b", "zones/us-central1-c"];

    let rec = advise(&api, advice_body(8, "ANY", &zones)).await;
    assert_eq!(rec["scores"]["obtainability"], 0.7);
    // 8 over three tied zones, larger shares first, in the request's order; b (0.3) gets nothing.
    assert_eq!(
        shards(&rec),
        vec![
            ("us-central1-f".to_string(), 3),
            ("us-central1-a".to_string(), 3),
            ("us-central1-c".to_string(), 2)
        ]
    );

    let rec = advise(&api, advice_body(8, "BALANCED", &zones)).await;
    assert_eq!(shards(&rec).iter().map(|(_, n)| n).sum::<i64>(), 8, "{rec}");
    assert_eq!(shards(&rec).len(), 3, "{rec}");

    let rec = advise(&api, advice_body(8, "ANY_SINGLE_ZONE", &zones)).await;
    assert_eq!(rec["scores"]["obtainability"], 0.7);
    assert_eq!(shards(&rec), vec![("us-central1-f".to_string(), 8)], "first best zone in request order");
    sim.shutdown().await;
}

#[tokio::test]
async fn a_stockout_lowers_a_zone() {
    let (sim, api) = start(1.0).await;
    score(&api, "us-central1-a", None, 0.9).await;
    score(&api, "us-central1-b", None, 0.6).await;
    let both = advice_body(4, "ANY", &["zones/us-central1-a", "zones/us-central1-b"]);
    assert_eq!(shards(&advise(&api, both.clone()).await), vec![("us-central1-a".to_string(), 4)]);

    // A resize request in us-central1-a waits for capacity: the zone is in a stockout.
    api.control(Method::POST, "capacity", Some(json!({"match": "", "hold": true}))).await;
    api.insert_mig("hpc-a3u").await;
    api.insert_request("hpc-a3u", "rr-1", &["hpc-a3u-0"], "3600").await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let rec = advise(&api, advice_body(4, "ANY", &["zones/us-central1-a"])).await;
        let s = rec["scores"]["obtainability"].as_f64().expect("a score");
        if s <= 0.05 {
            assert_eq!(s, 0.05, "lowered to at most 0.05: {rec}");
            break;
        }
        assert_eq!(s, 0.9, "{rec}");
        assert!(Instant::now() < deadline, "the stockout never lowered us-central1-a: {rec}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let rec = advise(&api, both.clone()).await;
    assert_eq!(rec["scores"]["obtainability"], 0.6, "{rec}");
    assert_eq!(shards(&rec), vec![("us-central1-b".to_string(), 4)]);

    // Capacity arrives: the stockout is over.
    api.control(Method::DELETE, "capacity", None).await;
    api.until_state("hpc-a3u", "rr-1", "SUCCEEDED").await;
    assert_eq!(shards(&advise(&api, both.clone()).await), vec![("us-central1-a".to_string(), 4)]);

    // An unreachable zone is in a stockout too, and a zone set below 0.05 stays where it is.
    api.control(Method::POST, "zones/us-central1-a/unreachable", None).await;
    score(&api, "us-central1-b", None, 0.01).await;
    let rec = advise(&api, both).await;
    assert_eq!(rec["scores"]["obtainability"], 0.05, "{rec}");
    assert_eq!(shards(&rec), vec![("us-central1-a".to_string(), 4)]);
    sim.shutdown().await;
}

#[tokio::test]
async fn malformed_bodies_are_400s_naming_the_field() {
    let (sim, api) = start(1.0).await;
    let good = advice_body(2, "ANY", &["zones/us-central1-a"]);
    let cases: Vec<(Value, &str)> = vec![
        (
            {
                let mut b = good.clone();
                b["count"] = json!(2);
                b
            },
            "count",
        ),
        (
            {
                let mut b = good.clone();
                b["size"] = json!("two");
                b
            },
            "size",
        ),
        (
            {
                let mut b = good.clone();
                b["size"] = json!(0);
                b
            },
            "resource.size",
        ),
        (
            {
                let mut b = good.clone();
                b.as_object_mut().unwrap().remove("size");
                b
            },
            "resource.size",
        ),
        (
            {
                let mut b = good.clone();
                b["instanceProperties"]["scheduling"]["provisioningModel"] = json!("PREEMPTIBLE");
                b
            },
            "provisioningModel",
        ),
        (
            {
                let mut b = good.clone();
                b["distributionPolicy"]["targetShape"] = json!("EVEN");
                b
            },
            "targetShape",
        ),
        (
            {
                let mut b = good.clone();
                b["instanceFlexibilityPolicy"]["instanceSelections"]["a3u"]["machineTypes"] = json!([]);
                b
            },
            "instanceSelections.a3u.machineTypes",
        ),
        (
            {
                let mut b = good.clone();
                b["instanceFlexibilityPolicy"] = json!({});
                b
            },
            "instanceFlexibilityPolicy.instanceSelections",
        ),
        (
            {
                let mut b = good.clone();
                b["distributionPolicy"]["zones"] = json!([{"zone": "zones/europe-west4-a"}]);
                b
            },
            "distributionPolicy.zones[0].zone",
        ),
        (
            {
                let mut b = good.clone();
                b["distributionPolicy"]["zones"] = json!([{"zone": "us-central1-a"}]);
                b
            },
            "distributionPolicy.zones[0].zone",
        ),
        (
            {
                let mut b = good.clone();
                b["distributionPolicy"]["zones"] = json!([{"zone": "projects/other/zones/us-central1-a"}]);
                b
            },
            "distributionPolicy.zones[0].zone",
        ),
    ];
    for (body, field) in cases {
        let (status, v) = api.post(ADVICE, body.clone()).await;
        assert_eq!(status, 400, "{body} -> {v}");
        assert_eq!(v["error"]["code"], 400, "{v}");
        assert_eq!(v["error"]["status"], "INVALID_ARGUMENT", "{v}");
        assert!(v["error"]["errors"][0]["reason"].is_string(), "{v}");
        assert!(v["error"]["message"].as_str().unwrap().contains(field), "should name {field}: {v}");
    }
    // The zone-not-in-region one, in full.
    let mut b = good.clone();
    b["distributionPolicy"]["zones"] = json!([{"zone": "zones/europe-west4-a"}]);
    let (_, v) = api.post(ADVICE, b).await;
    assert_google_error(&v, 400, "invalid", "Zone is not in region us-central1");
    // Only POST on a region: a zonal path is not GCE's.
    let (status, _) = api.post("projects/p/zones/us-central1-a/advice/capacity", good.clone()).await;
    assert_eq!(status, 404);
    // The control API refuses bad scores.
    for bad in [
        json!({"zone": "us-central1-a", "obtainability": 1.5}),
        json!({"zone": "us-central1-a"}),
        json!({"zone": "us-central1-a", "obtainability": 0.5, "machine": "x"}),
    ] {
        let (status, v) = api.control_status(Method::POST, "advice", Some(bad.clone())).await;
        assert_eq!(status, 400, "{bad} -> {v}");
    }
    sim.shutdown().await;
}

#[tokio::test]
async fn calls_are_counted_and_faults_apply() {
    let (sim, api) = start(1.0).await;
    let body = advice_body(2, "ANY", &["zones/us-central1-a"]);
    advise(&api, body.clone()).await;
    api.control(
        Method::POST,
        "faults",
        Some(json!({"method": "advice.capacity", "status": 503, "count": 1})),
    )
    .await;
    let (status, v) = api.post(ADVICE, body.clone()).await;
    assert_eq!(status, 503, "{v}");
    assert_google_error(&v, 503, "backendError", "Internal error");
    // count 1: the next call answers.
    advise(&api, body.clone()).await;

    // A hang: status 200 with a delay, then the real answer.
    api.control(
        Method::POST,
        "faults",
        Some(json!({"method": "compute.advice.capacity", "status": 200, "delay_ms": 300, "count": 1})),
    )
    .await;
    let t = Instant::now();
    advise(&api, body).await;
    assert!(t.elapsed() >= Duration::from_millis(300), "the fault's delay applies: {:?}", t.elapsed());

    let calls = api.control(Method::GET, "calls", None).await;
    assert_eq!(calls["by_method"]["advice.capacity"], 4, "{calls}");
    sim.shutdown().await;
}
