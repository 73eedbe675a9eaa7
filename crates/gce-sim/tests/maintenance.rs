//! Upcoming maintenance: `resourceStatus.upcomingMaintenance` set, moved and cleared through the
//! control API, shown by `instances.get` and `instances.aggregatedList` (through a `fields` mask) —
//! over raw HTTP.
// Test rig: waits for the simulator's ticker in real time.
#![allow(clippy::disallowed_methods)]

mod common;
use common::*;
use reqwest::Method;
use std::time::{Duration, Instant};

async fn one_running_vm(api: &Api) -> String {
    api.insert_mig("hpc-a3u-m1").await;
    api.insert_request("hpc-a3u-m1", "rr-1", &["hpc-a3u-0"], "3600").await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while !api.instances().await.iter().any(|v| v["status"] == "RUNNING") {
        assert!(Instant::now() < deadline, "the VM never ran");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    "hpc-a3u-0".to_string()
}

const FIELDS: &str = "items/*/instances(name,resourceStatus/upcomingMaintenance),nextPageToken";

async fn listed_maintenance(api: &Api) -> Value {
    let (status, v) = api.get(&format!("projects/p/aggregated/instances?fields={FIELDS}")).await;
    assert_eq!(status, 200, "{v}");
    let vm = &v["items"]["zones/us-central1-a"]["instances"][0];
    assert_eq!(vm.as_object().map(|o| o.len() <= 2), Some(true), "only the fields asked for: {vm}");
    vm.pointer("/resourceStatus/upcomingMaintenance").cloned().unwrap_or(Value::Null)
}

#[tokio::test]
async fn maintenance_is_set_moved_and_cleared() {
    let (_sim, api) = start(1.0).await;
    let vm = one_running_vm(&api).await;
    assert_eq!(listed_maintenance(&api).await, Value::Null, "no maintenance planned at first");
    let window = json!({"type": "SCHEDULED", "windowStartTime": "2030-01-01T10:00:00Z",
        "windowEndTime": "2030-01-01T11:00:00Z", "latestWindowStartTime": "2030-01-02T10:00:00Z",
        "canReschedule": true, "maintenanceStatus": "PENDING", "maintenanceReasons": ["FAILURE_GPU_XID"]});
    api.control(Method::POST, &format!("instances/{vm}/maintenance"), Some(window.clone())).await;
    assert_eq!(listed_maintenance(&api).await, window);
    let (status, got) = api.get(&format!("{ZONE}/instances/{vm}")).await;
    assert_eq!(status, 200, "{got}");
    assert_eq!(got["resourceStatus"]["upcomingMaintenance"], window, "instances.get shows it too");
    assert!(
        got["resourceStatus"]["scheduling"]["terminationTimestamp"].is_string(),
        "beside the rest: {got}"
    );
    // GCE moves the window.
    let mut moved = window.clone();
    moved["windowStartTime"] = json!("2030-01-01T12:00:00Z");
    moved["windowEndTime"] = json!("2030-01-01T13:00:00Z");
    api.control(Method::POST, &format!("instances/{vm}/maintenance"), Some(moved.clone())).await;
    assert_eq!(listed_maintenance(&api).await, moved);
    // Over, or cancelled.
    api.control(Method::DELETE, &format!("instances/{vm}/maintenance"), None).await;
    assert_eq!(listed_maintenance(&api).await, Value::Null);
}

#[tokio::test]
async fn a_maintenance_body_is_held_to_the_schema() {
    let (_sim, api) = start(1.0).await;
    let vm = one_running_vm(&api).await;
    let url = |vm: &str| format!("{}_sim/instances/{vm}/maintenance", api.root);
    let bad = [
        (json!({"type": "SOMETIME"}), "type"),
        (json!({"window_start_time": "2030-01-01T10:00:00Z"}), "window_start_time"),
        (json!({"canReschedule": "yes"}), "canReschedule"),
        (json!({"maintenanceReasons": ["FAILURE_GPU_XID", "BORED"]}), "maintenanceReasons"),
        (json!({"windowStartTime": "tomorrow"}), "windowStartTime"),
        (json!(["SCHEDULED"]), "object"),
    ];
    for (body, named) in bad {
        let (status, v) = api.call(Method::POST, url(&vm), Some(body.clone())).await;
        assert_eq!(status, 400, "{body}: {v}");
        assert!(
            v["error"].as_str().is_some_and(|e| e.contains(named)),
            "{body}: the error names {named}: {v}"
        );
    }
    assert_eq!(listed_maintenance(&api).await, Value::Null, "a refused body changes nothing");
    let (status, v) = api.call(Method::POST, url("hpc-a3u-9"), Some(json!({"type": "SCHEDULED"}))).await;
    assert_eq!(status, 404, "{v}");
    let (status, v) = api.call(Method::DELETE, url("hpc-a3u-9"), None).await;
    assert_eq!(status, 404, "{v}");
}
