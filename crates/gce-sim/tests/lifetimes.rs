//! `GET /_sim/lifetimes`: every VM's life in the simulator's clock, from its creation to its
//! deletion, kept after it is gone — over raw HTTP.
// Test rig: waits for the simulator's ticker in real time.
#![allow(clippy::disallowed_methods)]

mod common;
use common::*;
use reqwest::Method;
use std::time::{Duration, Instant};

fn at(v: &Value) -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::parse_from_rfc3339(v.as_str().unwrap()).unwrap().into()
}

#[tokio::test]
async fn a_vm_made_and_deleted_has_its_life_reported_with_its_id() {
    let (_sim, api) = start(1.0).await;
    api.insert_mig("hpc-a-j1-t0000001").await;
    let before = chrono::Utc::now();
    api.insert_request("hpc-a-j1-t0000001", "rr1", &["hpc-a-0", "hpc-a-1"], "600").await;
    api.until_state("hpc-a-j1-t0000001", "rr1", "SUCCEEDED").await;
    let vms = api.instances().await;
    let id_of = |name: &str| vms.iter().find(|v| v["name"] == name).unwrap()["id"].clone();
    let (id0, id1) = (id_of("hpc-a-0"), id_of("hpc-a-1"));
    assert_ne!(id0, id1);

    let lives = api.control(Method::GET, "lifetimes", None).await;
    let vms0 = lives["vms"].as_array().unwrap();
    assert_eq!(vms0.len(), 2, "{lives}");
    for v in vms0 {
        assert!(v["deleted"].is_null(), "alive: {v}");
        assert!(at(&v["created"]) >= before - chrono::Duration::seconds(1), "{v}");
        assert_eq!(v["zone"], "us-central1-a");
    }

    // Delete one; its life ends then, the other's goes on.
    let (status, op) = api
        .post(
            &format!("{REGION}/instanceGroupManagers/hpc-a-j1-t0000001/deleteInstances"),
            json!({"instances": ["zones/us-central1-a/instances/hpc-a-0"]}),
        )
        .await;
    assert_eq!(status, 200, "{op}");
    api.wait(&op).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    let gone = loop {
        let lives = api.control(Method::GET, "lifetimes", None).await;
        let l0 = lives["vms"].as_array().unwrap().iter().find(|v| v["id"] == id0).cloned().unwrap();
        if !l0["deleted"].is_null() {
            break (l0, lives);
        }
        assert!(Instant::now() < deadline, "never deleted: {lives}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let (l0, lives) = gone;
    assert_eq!(l0["name"], "hpc-a-0");
    assert!(at(&l0["deleted"]) > at(&l0["created"]));
    assert!(at(&l0["deleted"]) <= at(&lives["time"]));
    assert!(api.instances().await.iter().all(|v| v["name"] != "hpc-a-0"), "gone from the list");
    let l1 = lives["vms"].as_array().unwrap().iter().find(|v| v["id"] == id1).unwrap();
    assert!(l1["deleted"].is_null(), "{l1}");
}
