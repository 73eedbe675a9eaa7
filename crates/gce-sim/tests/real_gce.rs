//! Black-box tests of the behaviours that make the simulator GCE as it really behaves (issue 16):
//! strict delete forms, failed operations and requestId replay, unreachable zones, the VM lifecycle
//! and host failures, templates and machine types, rate quotas, partial responses.

// Test rig: these drive a real simulator server and wait for its ticker in real time.
#![allow(clippy::disallowed_methods)]

mod common;

use common::*;
use gce_sim::SimOptions;
use reqwest::Method;
use std::time::{Duration, Instant};

const MIG: &str = "projects/p/regions/us-central1/instanceGroupManagers/hpc-a3u-g1";

/// A regional MIG `hpc-a3u-g1` with `names` RUNNING.
async fn running(api: &Api, names: &[&str]) {
    api.insert_mig("hpc-a3u-g1").await;
    api.insert_request("hpc-a3u-g1", "rr1", names, "3600").await;
    api.until_state("hpc-a3u-g1", "rr1", "SUCCEEDED").await;
}

/// Posts a `deleteInstances` body to the regional MIG and waits for its Operation.
async fn delete_instances(api: &Api, body: Value) -> Value {
    let (status, op) = api.post(&format!("{MIG}/deleteInstances"), body).await;
    assert_eq!(status, 200, "{op}");
    api.wait(&op).await
}

fn op_error(done: &Value) -> (&str, &str) {
    let e = &done["error"]["errors"][0];
    (e["code"].as_str().unwrap_or_default(), e["message"].as_str().unwrap_or_default())
}

async fn until_gone(api: &Api, name: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while api.instance(name).await.0 != 404 {
        assert!(Instant::now() < deadline, "{name} was never deleted");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

// ----- 1. strict regional deleteInstances ---------------------------------------------------------

#[tokio::test]
async fn regional_delete_instances_takes_instance_urls_only() {
    let (sim, api) = start(1.0).await;
    let names = ["hpc-a3u-0", "hpc-a3u-1", "hpc-a3u-2", "hpc-a3u-3", "hpc-a3u-4"];
    running(&api, &names).await;

    // Refused forms: the Operation fails, with or without skipInstancesOnValidationError, and
    // nothing is deleted.
    let refused = [
        ("hpc-a3u-0", "The URL is malformed"),
        ("zones/us-central1-a/hpc-a3u-0", "The URL is malformed"),
        ("us-central1-a/instances/hpc-a3u-0", "The URL is malformed"),
        ("https://example.com/compute/v1/projects/p/zones/us-central1-a/instances/hpc-a3u-0", "malformed"),
        ("zones/us-central1-b/instances/hpc-a3u-0", "not a zone of the instance group manager"),
        ("projects/other/zones/us-central1-a/instances/hpc-a3u-0", "not in project 'p'"),
    ];
    for (entry, why) in refused {
        for skip in [false, true] {
            let done =
                delete_instances(&api, json!({"instances": [entry], "skipInstancesOnValidationError": skip}))
                    .await;
            let (code, message) = op_error(&done);
            assert_eq!(code, "INVALID_FIELD_VALUE", "{entry}: {done}");
            assert!(message.contains(entry) && message.contains(why), "{entry}: {done}");
            assert_eq!(done["httpErrorStatusCode"], 400, "{done}");
            assert_eq!(done["httpErrorMessage"], "BAD REQUEST", "{done}");
        }
    }
    // One bad entry fails the whole call.
    let done = delete_instances(
        &api,
        json!({"instances": ["zones/us-central1-a/instances/hpc-a3u-0", "hpc-a3u-1"]}),
    )
    .await;
    assert_eq!(op_error(&done).0, "INVALID_FIELD_VALUE", "{done}");
    assert_eq!(api.target_size("hpc-a3u-g1").await, 5);
    assert_eq!(api.instance("hpc-a3u-0").await.1["status"], "RUNNING");

    // Accepted forms: each deletes its VM (STOPPING, then gone) and lowers targetSize at once.
    let accepted = [
        "https://www.googleapis.com/compute/v1/projects/p/zones/us-central1-a/instances/hpc-a3u-0",
        "https://compute.googleapis.com/compute/v1/projects/p/zones/us-central1-a/instances/hpc-a3u-1",
        "projects/p/zones/us-central1-a/instances/hpc-a3u-2",
        "zones/us-central1-a/instances/hpc-a3u-3",
    ];
    for (i, url) in accepted.iter().enumerate() {
        let done = delete_instances(&api, json!({"instances": [url]})).await;
        assert!(done.get("error").is_none(), "{url}: {done}");
        assert_eq!(done["operationType"], "compute.instanceGroupManagers.deleteInstances");
        assert_eq!(api.target_size("hpc-a3u-g1").await, 4 - i as i64);
        until_gone(&api, names[i]).await;
    }

    // A well-formed URL of an instance that does not exist (or is already being deleted): the
    // Operation fails unless skipInstancesOnValidationError.
    let missing = "zones/us-central1-a/instances/hpc-a3u-9";
    let done = delete_instances(&api, json!({"instances": [missing]})).await;
    assert_eq!(op_error(&done).0, "RESOURCE_NOT_FOUND", "{done}");
    assert_eq!(done["httpErrorStatusCode"], 404, "{done}");
    // Twice in a row: the second finds it being deleted (it is gone DELETE_MS later).
    let last = "zones/us-central1-a/instances/hpc-a3u-4";
    let (_, first) = api.post(&format!("{MIG}/deleteInstances"), json!({"instances": [last]})).await;
    let (_, second) = api.post(&format!("{MIG}/deleteInstances"), json!({"instances": [last]})).await;
    let done = api.wait(&first).await;
    assert!(done.get("error").is_none(), "{done}");
    let done = api.wait(&second).await;
    let (code, message) = op_error(&done);
    assert_eq!((code, done["httpErrorStatusCode"].as_u64()), ("CONDITION_NOT_MET", Some(412)), "{done}");
    assert!(message.contains("already being deleted"), "{done}");
    let done =
        delete_instances(&api, json!({"instances": [missing, last], "skipInstancesOnValidationError": true}))
            .await;
    assert!(done.get("error").is_none(), "{done}");
    assert_eq!(api.target_size("hpc-a3u-g1").await, 0, "skipped entries are not counted twice");
    sim.shutdown().await;
}

#[tokio::test]
async fn a_queued_vm_of_a_regional_mig_is_released_by_cancelling_its_request() {
    let (sim, api) = start(1.0).await;
    api.control(Method::POST, "capacity", Some(json!({"match": "", "hold": true}))).await;
    api.insert_mig("hpc-a3u-g1").await;
    let op = api.insert_request("hpc-a3u-g1", "rr1", &["hpc-a3u-0", "hpc-a3u-1"], "3600").await;
    api.wait(&op).await;
    api.until_state("hpc-a3u-g1", "rr1", "ACCEPTED").await;
    let queued = api.managed("hpc-a3u-g1").await;
    assert_eq!(queued.len(), 2);
    assert!(
        queued.iter().all(|m| m["instanceStatus"] == "PENDING" && m.get("instance").is_none()),
        "{queued:?}"
    );

    // A queued instance has no VM yet: by URL it is not found; by name the request is malformed.
    let url = "zones/us-central1-a/instances/hpc-a3u-0";
    let done = delete_instances(&api, json!({"instances": [url]})).await;
    assert_eq!(op_error(&done).0, "RESOURCE_NOT_FOUND", "{done}");
    let done =
        delete_instances(&api, json!({"instances": [url], "skipInstancesOnValidationError": true})).await;
    assert!(done.get("error").is_none(), "{done}");
    let done =
        delete_instances(&api, json!({"instances": ["hpc-a3u-0"], "skipInstancesOnValidationError": true}))
            .await;
    assert_eq!(op_error(&done).0, "INVALID_FIELD_VALUE", "{done}");
    assert_eq!(api.target_size("hpc-a3u-g1").await, 2, "nothing was released");
    assert_eq!(api.managed("hpc-a3u-g1").await.len(), 2);

    // The route: cancel the ACCEPTED request. Its queued instances go, targetSize drops, and the
    // names are free for a new request (the members still wanted are asked for again).
    let (status, op) = api.post_empty(&format!("{MIG}/resizeRequests/rr1/cancel")).await;
    assert_eq!(status, 200, "{op}");
    assert!(api.wait(&op).await.get("error").is_none());
    assert_eq!(api.request("hpc-a3u-g1", "rr1").await["state"], "CANCELLED");
    assert_eq!(api.target_size("hpc-a3u-g1").await, 0);
    assert!(api.managed("hpc-a3u-g1").await.is_empty());
    api.control(Method::DELETE, "capacity", None).await;
    api.insert_request("hpc-a3u-g1", "rr2", &["hpc-a3u-1"], "3600").await;
    api.until_state("hpc-a3u-g1", "rr2", "SUCCEEDED").await;
    let vms: Vec<Value> = api.instances().await.iter().map(|v| v["name"].clone()).collect();
    assert_eq!(vms, vec![json!("hpc-a3u-1")]);
    sim.shutdown().await;
}

// ----- 2. failed Operations and requestId replay ---------------------------------------------------

#[tokio::test]
async fn a_failed_operation_is_replayed_by_its_request_id_until_the_id_is_forgotten() {
    let (sim, api) = start(1.0).await;
    api.insert_mig("hpc-a3u-g1").await;
    let fault = json!({"method": "regionInstanceGroupManagerResizeRequests.insert", "code": "QUOTA_EXCEEDED",
                       "message": "Quota 'NVIDIA_H200_GPUS' exceeded. Limit: 8.0 in region us-central1.", "count": 1});
    api.control(Method::POST, "operation-faults", Some(fault)).await;
    let rid = "2b1f7c4e-9d0a-4f5b-8c3e-6a7d9e0f1a2b";
    let body = json!({"name": "rr1", "instances": [{"name": "hpc-a3u-0"}], "requestedRunDuration": {"seconds": "3600"}});
    let path = format!("{MIG}/resizeRequests?requestId={rid}");
    let (status, first) = api.post(&path, body.clone()).await;
    assert_eq!(status, 200, "{first}");
    let done = api.wait(&first).await;
    assert_eq!(done["status"], "DONE");
    assert_eq!(
        op_error(&done),
        ("QUOTA_EXCEEDED", "Quota 'NVIDIA_H200_GPUS' exceeded. Limit: 8.0 in region us-central1.")
    );
    assert_eq!(
        (done["httpErrorStatusCode"].as_u64(), done["httpErrorMessage"].as_str()),
        (Some(403), Some("FORBIDDEN"))
    );
    assert!(done["targetLink"]
        .as_str()
        .unwrap()
        .ends_with("/instanceGroupManagers/hpc-a3u-g1/resizeRequests/rr1"));
    assert_eq!(api.get(&format!("{MIG}/resizeRequests/rr1")).await.0, 404, "a failed insert created nothing");

    // The same requestId, with the fault gone: the original, failed Operation; nothing acts.
    for _ in 0..2 {
        let (status, again) = api.post(&path, body.clone()).await;
        assert_eq!(status, 200, "{again}");
        assert_eq!(
            (again["name"].as_str(), again["id"].as_str()),
            (first["name"].as_str(), first["id"].as_str())
        );
        assert_eq!(again["status"], "DONE");
        assert_eq!(op_error(&again).0, "QUOTA_EXCEEDED", "failed stays failed: {again}");
    }
    assert_eq!(api.get(&format!("{MIG}/resizeRequests/rr1")).await.0, 404);
    assert_eq!(api.target_size("hpc-a3u-g1").await, 0);
    // A new requestId acts.
    let (_, fresh) = api
        .post(&format!("{MIG}/resizeRequests?requestId=5c0e8f6a-1b2d-4e3f-9a8b-7c6d5e4f3a2b"), body.clone())
        .await;
    assert_ne!(fresh["name"], first["name"]);
    assert!(api.wait(&fresh).await.get("error").is_none());
    assert_eq!(api.target_size("hpc-a3u-g1").await, 1);

    // requestIds are remembered for the retention window (default an hour), then forgotten.
    assert_eq!(api.control(Method::GET, "request-ids", None).await["retention_seconds"], 3600.0);
    api.control(Method::POST, "request-ids", Some(json!({"retention_seconds": 1.0}))).await;
    let fault =
        json!({"method": "regionInstanceGroupManagers.insert", "code": "RESOURCE_NOT_READY", "count": 1});
    api.control(Method::POST, "operation-faults", Some(fault)).await;
    let insert = format!("{REGION}/instanceGroupManagers?requestId=8d7c6b5a-4e3f-4a1b-9c8d-0e1f2a3b4c5d");
    let (_, failed) = api.post(&insert, mig_body("hpc-a3u-g2")).await;
    let done = api.wait(&failed).await;
    assert_eq!(op_error(&done).0, "RESOURCE_NOT_READY", "{done}");
    assert_eq!(done["httpErrorStatusCode"], 400);
    let (_, replay) = api.post(&insert, mig_body("hpc-a3u-g2")).await;
    assert_eq!(replay["name"], failed["name"], "within the window");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let (_, after) = api.post(&insert, mig_body("hpc-a3u-g2")).await;
    assert_ne!(after["name"], failed["name"], "after the window the requestId acts again");
    assert!(api.wait(&after).await.get("error").is_none());
    assert_eq!(api.get(&format!("{REGION}/instanceGroupManagers/hpc-a3u-g2")).await.0, 200);

    // Rules are checked: only mutations, with a code.
    for bad in [
        json!({"method": "regionInstanceGroupManagers.get", "code": "X"}),
        json!({"method": "*", "code": ""}),
    ] {
        let (status, v) = api.control_status(Method::POST, "operation-faults", Some(bad)).await;
        assert_eq!(status, 400, "{v}");
    }
    sim.shutdown().await;
}

// ----- 3. unreachable zones -------------------------------------------------------------------------

#[tokio::test]
async fn an_unreachable_zone_makes_aggregated_lists_partial_and_zonal_calls_fail() {
    let (sim, api) = start(1.0).await;
    running(&api, &["hpc-a3u-0", "hpc-a3u-1"]).await;
    let mut in_b = mig_body("hpc-b");
    in_b["distributionPolicy"]["zones"] = json!([{"zone": "zones/us-central1-b"}]);
    let (_, op) = api.post(&format!("{REGION}/instanceGroupManagers"), in_b).await;
    api.wait(&op).await;
    api.insert_request("hpc-b", "rr1", &["hpc-b-0"], "3600").await;
    api.until_state("hpc-b", "rr1", "SUCCEEDED").await;

    api.control(Method::POST, "zones/us-central1-a/unreachable", None).await;
    let (status, v) = api.get("projects/p/aggregated/instances").await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        v["items"]["zones/us-central1-a"],
        json!({"warning": {"code": "UNREACHABLE",
                           "message": "Scope 'zones/us-central1-a' is unreachable: its instances are missing from this list.",
                           "data": [{"key": "scope", "value": "zones/us-central1-a"}]}}),
        "{v}"
    );
    let b: Vec<&str> = v["items"]["zones/us-central1-b"]["instances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].as_str().unwrap())
        .collect();
    assert_eq!(b, ["hpc-b-0"]);
    assert_eq!(v["unreachables"], json!(["zones/us-central1-a"]));
    // A client that asks for a partial response must ask for the warnings too to see them.
    let fields = "items/*/instances(name,status),items/*/warning/code,unreachables,nextPageToken";
    let (_, v) = api.get(&format!("projects/p/aggregated/instances?fields={fields}")).await;
    assert_eq!(
        v,
        json!({"items": {"zones/us-central1-a": {"warning": {"code": "UNREACHABLE"}},
                         "zones/us-central1-b": {"instances": [{"name": "hpc-b-0", "status": "RUNNING"}]}},
               "unreachables": ["zones/us-central1-a"]})
    );
    // returnPartialSuccess is not a parameter of instances.aggregatedList in the v1 document.
    let (status, v) = api.get("projects/p/aggregated/instances?returnPartialSuccess=true").await;
    assert_eq!(status, 400, "{v}");
    assert_google_error(&v, 400, "badRequest", "returnPartialSuccess");

    // Zonal calls into the zone, and regional calls that need it, answer 503.
    for path in [
        format!("{ZONE}/instances/hpc-a3u-0"),
        format!("{ZONE}/instances"),
        format!("{ZONE}/instanceGroupManagers"),
    ] {
        let (status, v) = api.get(&path).await;
        assert_eq!(status, 503, "{path}: {v}");
        assert_google_error(&v, 503, "backendError", "us-central1-a");
    }
    let (status, v) = api.post_empty(&format!("{MIG}/listManagedInstances")).await;
    assert_eq!(status, 503, "{v}");
    let (status, v) = api
        .post(
            &format!("{MIG}/deleteInstances"),
            json!({"instances": ["zones/us-central1-a/instances/hpc-a3u-0"]}),
        )
        .await;
    assert_eq!(status, 503, "{v}");
    assert_eq!(api.managed("hpc-b").await.len(), 1, "other zones answer");
    assert_eq!(api.target_size("hpc-a3u-g1").await, 2, "regional MIG gets answer");

    // The other mode: the whole aggregated list fails.
    api.control(Method::POST, "zones/us-central1-a/unreachable", Some(json!({"aggregated": "error"}))).await;
    let (status, v) = api.get("projects/p/aggregated/instances").await;
    assert_eq!(status, 503, "{v}");
    // Reachable again: complete answers.
    api.control(Method::DELETE, "zones/us-central1-a/unreachable", None).await;
    let (_, v) = api.get("projects/p/aggregated/instances").await;
    assert!(v.get("unreachables").is_none(), "{v}");
    assert_eq!(v["items"]["zones/us-central1-a"]["instances"].as_array().unwrap().len(), 2);
    assert_eq!(api.managed("hpc-a3u-g1").await.len(), 2);
    sim.shutdown().await;
}

// ----- 4. VM lifecycle and host failures -------------------------------------------------------------

fn commands(dir: &std::path::Path) -> SimOptions {
    let d = dir.display();
    SimOptions {
        boot_cmd: Some(format!("touch {d}/{{name}}")),
        stop_cmd: Some(format!("rm {d}/{{name}}")),
        ..SimOptions::default()
    }
}

async fn until_file(path: &std::path::Path, exists: bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while path.exists() != exists {
        assert!(Instant::now() < deadline, "{} exists should be {exists}", path.display());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn vms_pass_provisioning_and_staging_before_running_and_booting() {
    let dir = tempfile::tempdir().unwrap();
    let (sim, api) = start_with(commands(dir.path())).await;
    assert_eq!(
        api.control(Method::GET, "lifecycle", None).await,
        json!({"provisioning_ms": 50, "staging_ms": 50, "host_repair_ms": 1000})
    );
    api.control(Method::POST, "lifecycle", Some(json!({"provisioning_ms": 600, "staging_ms": 600}))).await;
    api.insert_mig("hpc-a3u-g1").await;
    api.insert_request("hpc-a3u-g1", "rr1", &["hpc-a3u-0"], "3600").await;
    let vm = api.until_vm_status("hpc-a3u-0", "PROVISIONING").await;
    assert!(vm.get("lastStartTimestamp").is_none(), "{vm}");
    assert_eq!(api.request("hpc-a3u-g1", "rr1").await["state"], "ACCEPTED", "not SUCCEEDED until RUNNING");
    let mi = &api.managed("hpc-a3u-g1").await[0];
    assert_eq!(
        (mi["instanceStatus"].as_str(), mi["currentAction"].as_str()),
        (Some("PROVISIONING"), Some("CREATING"))
    );
    assert!(mi["instance"].as_str().unwrap().ends_with("/zones/us-central1-a/instances/hpc-a3u-0"));
    assert!(!dir.path().join("hpc-a3u-0").exists(), "no boot before RUNNING");
    api.until_vm_status("hpc-a3u-0", "STAGING").await;
    assert_eq!(api.managed("hpc-a3u-g1").await[0]["instanceStatus"], "STAGING");
    assert!(!dir.path().join("hpc-a3u-0").exists(), "no boot before RUNNING");
    let vm = api.until_vm_status("hpc-a3u-0", "RUNNING").await;
    assert!(vm["lastStartTimestamp"].is_string(), "{vm}");
    until_file(&dir.path().join("hpc-a3u-0"), true).await;
    api.until_state("hpc-a3u-g1", "rr1", "SUCCEEDED").await;
    let mi = &api.managed("hpc-a3u-g1").await[0];
    assert_eq!(
        (mi["instanceStatus"].as_str(), mi["currentAction"].as_str()),
        (Some("RUNNING"), Some("NONE"))
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn a_host_failure_leaves_a_do_nothing_vm_terminated_until_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let (sim, api) = start_with(commands(dir.path())).await;
    running(&api, &["hpc-a3u-0", "hpc-a3u-1"]).await;
    until_file(&dir.path().join("hpc-a3u-0"), true).await;
    let before = api.instance("hpc-a3u-0").await.1;

    api.control(Method::POST, "instances/hpc-a3u-0/fail", None).await;
    until_file(&dir.path().join("hpc-a3u-0"), false).await;
    // DO_NOTHING (the MIG body says so): it stays TERMINATED, same VM, no repair.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let vm = api.instance("hpc-a3u-0").await.1;
    assert_eq!((vm["status"].as_str(), vm["id"].as_str()), (Some("TERMINATED"), before["id"].as_str()));
    let managed = api.managed("hpc-a3u-g1").await;
    let mi = managed.iter().find(|m| m["name"] == "hpc-a3u-0").unwrap();
    assert_eq!(
        (mi["instanceStatus"].as_str(), mi["currentAction"].as_str()),
        (Some("TERMINATED"), Some("NONE"))
    );
    assert_eq!(api.target_size("hpc-a3u-g1").await, 2);
    assert!(!dir.path().join("hpc-a3u-0").exists(), "not booted again");
    assert!(dir.path().join("hpc-a3u-1").exists(), "the other VM is untouched");
    let (_, agg) = api.get("projects/p/aggregated/instances?fields=items/*/instances(name,status)").await;
    assert_eq!(
        agg["items"]["zones/us-central1-a"]["instances"][0],
        json!({"name": "hpc-a3u-0", "status": "TERMINATED"})
    );

    // Deleting a TERMINATED VM works.
    let done = delete_instances(&api, json!({"instances": [mi["instance"]]})).await;
    assert!(done.get("error").is_none(), "{done}");
    until_gone(&api, "hpc-a3u-0").await;
    assert_eq!(api.target_size("hpc-a3u-g1").await, 1);
    let (status, _) = api.control_status(Method::POST, "instances/nope/fail", None).await;
    assert_eq!(status, 404);
    sim.shutdown().await;
}

#[tokio::test]
async fn a_repairing_mig_recreates_a_failed_vm() {
    let dir = tempfile::tempdir().unwrap();
    let (sim, api) = start_with(commands(dir.path())).await;
    let mut body = mig_body("hpc-a3u-g1");
    body.as_object_mut().unwrap().remove("instanceLifecyclePolicy"); // GCE's default: REPAIR
    let (_, op) = api.post(&format!("{REGION}/instanceGroupManagers"), body).await;
    api.wait(&op).await;
    api.insert_request("hpc-a3u-g1", "rr1", &["hpc-a3u-0"], "3600").await;
    api.until_state("hpc-a3u-g1", "rr1", "SUCCEEDED").await;
    until_file(&dir.path().join("hpc-a3u-0"), true).await;
    let id = api.instance("hpc-a3u-0").await.1["id"].clone();
    api.control(Method::POST, "instances/hpc-a3u-0/fail", None).await;
    until_file(&dir.path().join("hpc-a3u-0"), false).await;
    let vm = api.until_vm_status("hpc-a3u-0", "RUNNING").await;
    assert_ne!(vm["id"], id, "recreated");
    until_file(&dir.path().join("hpc-a3u-0"), true).await;
    sim.shutdown().await;
}

// ----- 5. templates and machine types ------------------------------------------------------------------

#[tokio::test]
async fn vms_take_their_scheduling_from_the_template() {
    let (sim, api) = start(1.0).await;
    let templates = [
        json!({"name": "h100-flex", "properties": {"machineType": "a3-highgpu-8g", "labels": {"team": "ml"},
               "scheduling": {"provisioningModel": "FLEX_START", "instanceTerminationAction": "DELETE",
                              "onHostMaintenance": "TERMINATE", "automaticRestart": false}}}),
        json!({"name": "plain", "properties": {"machineType": "n2-standard-4"}}),
        json!({"name": "spot", "properties": {"scheduling": {"provisioningModel": "SPOT"}}}),
    ];
    for t in templates {
        api.control(Method::POST, "templates", Some(t)).await;
    }
    let (status, t) = api.get("projects/p/regions/us-central1/instanceTemplates/h100-flex").await;
    assert_eq!(status, 200, "{t}");
    assert!(t["region"].as_str().unwrap().ends_with("/regions/us-central1"), "{t}");
    assert!(t["selfLink"]
        .as_str()
        .unwrap()
        .ends_with("projects/p/regions/us-central1/instanceTemplates/h100-flex"));
    let (status, t) = api.get("projects/p/global/instanceTemplates/plain").await;
    assert_eq!((status, t["properties"]["machineType"].as_str()), (200, Some("n2-standard-4")));
    assert_eq!(api.get("projects/p/global/instanceTemplates/missing").await.0, 404);

    let mig = |name: &str, template: &str| {
        let mut b = mig_body(name);
        b["versions"][0]["instanceTemplate"] =
            json!(format!("projects/p/regions/us-central1/instanceTemplates/{template}"));
        b
    };
    for (name, template) in [("m-flex", "h100-flex"), ("m-plain", "plain"), ("m-spot", "spot")] {
        let (status, op) = api.post(&format!("{REGION}/instanceGroupManagers"), mig(name, template)).await;
        assert_eq!(status, 200, "{op}");
        api.wait(&op).await;
    }
    api.insert_request("m-flex", "rr", &["flex-0"], "3600").await;
    api.insert_request("m-plain", "rr", &["plain-0"], "3600").await;
    api.until_state("m-flex", "rr", "SUCCEEDED").await;
    api.until_state("m-plain", "rr", "SUCCEEDED").await;
    let (_, vm) = api.instance("flex-0").await;
    let s = &vm["scheduling"];
    assert_eq!(
        (
            s["provisioningModel"].as_str(),
            s["instanceTerminationAction"].as_str(),
            s["onHostMaintenance"].as_str()
        ),
        (Some("FLEX_START"), Some("DELETE"), Some("TERMINATE"))
    );
    assert_eq!(s["maxRunDuration"]["seconds"], "3600");
    assert!(vm["machineType"].as_str().unwrap().ends_with("/zones/us-central1-a/machineTypes/a3-highgpu-8g"));
    assert_eq!(vm["labels"], json!({"team": "ml"}));
    // A template that does not name the model gives STANDARD VMs (reference/GCE.md).
    let (_, vm) = api.instance("plain-0").await;
    assert_eq!(vm["scheduling"]["provisioningModel"], "STANDARD", "{vm}");
    assert!(vm["scheduling"].get("instanceTerminationAction").is_none(), "{vm}");
    // A SPOT template cannot serve a resize request.
    let body =
        json!({"name": "rr", "instances": [{"name": "spot-0"}], "requestedRunDuration": {"seconds": "3600"}});
    let (status, v) = api.post(&format!("{REGION}/instanceGroupManagers/m-spot/resizeRequests"), body).await;
    assert_eq!(status, 400, "{v}");
    assert_google_error(&v, 400, "invalid", "scheduling.provisioningModel SPOT");
    assert_eq!(api.target_size("m-spot").await, 0);
    sim.shutdown().await;
}

#[tokio::test]
async fn machine_types_have_their_real_shapes() {
    let (sim, api) = start(1.0).await;
    let cases = [
        ("a3-ultragpu-8g", 224, 3_022_848, Some(("nvidia-h200-141gb", 8))),
        ("a3-highgpu-8g", 208, 1_916_928, Some(("nvidia-h100-80gb", 8))),
        ("a2-highgpu-1g", 12, 87_040, Some(("nvidia-tesla-a100", 1))),
        ("g2-standard-4", 4, 16_384, Some(("nvidia-l4", 1))),
        ("n2-standard-4", 4, 16_384, None),
    ];
    for (name, cpus, memory, accelerator) in cases {
        let (status, m) = api.get(&format!("{ZONE}/machineTypes/{name}")).await;
        assert_eq!(status, 200, "{m}");
        assert_eq!(
            (m["name"].as_str(), m["guestCpus"].as_u64(), m["memoryMb"].as_u64()),
            (Some(name), Some(cpus), Some(memory))
        );
        assert_eq!(m["kind"], "compute#machineType");
        assert_eq!(m["zone"], "us-central1-a");
        match accelerator {
            Some((kind, n)) => {
                assert_eq!(
                    m["accelerators"],
                    json!([{"guestAcceleratorType": kind, "guestAcceleratorCount": n}])
                )
            }
            None => assert!(m.get("accelerators").is_none(), "{m}"),
        }
    }
    let (status, v) = api.get(&format!("{ZONE}/machineTypes/a3-megagpu-9g")).await;
    assert_eq!(status, 404, "{v}");
    assert_google_error(&v, 404, "notFound", "machineTypes/a3-megagpu-9g");
    let (_, m) =
        api.get(&format!("{ZONE}/machineTypes/g2-standard-4?fields=guestCpus,memoryMb,accelerators")).await;
    assert_eq!(
        m,
        json!({"guestCpus": 4, "memoryMb": 16384, "accelerators": [{"guestAcceleratorType": "nvidia-l4", "guestAcceleratorCount": 1}]})
    );
    sim.shutdown().await;
}

// ----- 6. rate quotas ----------------------------------------------------------------------------------

#[tokio::test]
async fn rate_quotas_answer_403_rate_limit_exceeded_per_group() {
    let (sim, api) = start(1.0).await;
    api.insert_mig("hpc-a3u-g1").await;
    api.control(Method::POST, "calls/reset", None).await;
    // A long window, so the test cannot straddle a refill.
    api.control(
        Method::POST,
        "quotas",
        Some(json!({"read_per_minute": 3, "write_per_minute": 1, "window_seconds": 3600})),
    )
    .await;
    let get = MIG.to_string();
    for _ in 0..3 {
        assert_eq!(api.get(&get).await.0, 200);
    }
    let (status, v) = api.get(&get).await;
    assert_eq!(status, 403, "{v}");
    assert_google_error(&v, 403, "rateLimitExceeded", "Quota exceeded for quota metric 'Read requests'");
    assert_eq!(
        (v["error"]["errors"][0]["domain"].as_str(), v["error"]["status"].as_str()),
        (Some("usageLimits"), Some("PERMISSION_DENIED"))
    );
    // Reads also cover lists, listManagedInstances and operation waits; writes are counted apart.
    assert_eq!(api.post_empty(&format!("{MIG}/listManagedInstances")).await.0, 403);
    let (status, op) = api.post(&format!("{REGION}/instanceGroupManagers"), mig_body("hpc-a3u-g2")).await;
    assert_eq!(status, 200, "{op}");
    let (status, v) = api.post(&format!("{REGION}/instanceGroupManagers"), mig_body("hpc-a3u-g3")).await;
    assert_eq!(status, 403, "{v}");
    assert_google_error(&v, 403, "rateLimitExceeded", "'Write requests per minute'");
    let quotas = api.control(Method::GET, "quotas", None).await;
    assert_eq!(quotas["usage"]["p"], json!({"read": 3, "write": 1}), "{quotas}");
    // Refused calls are counted by method, and apart.
    let calls = api.control(Method::GET, "calls", None).await;
    assert_eq!(calls["by_method"]["regionInstanceGroupManagers.get"], 4, "{calls}");
    assert_eq!(calls["by_method"]["regionInstanceGroupManagers.insert"], 2, "{calls}");
    assert_eq!(
        calls["rate_limited"]["by_method"],
        json!({"regionInstanceGroupManagers.get": 1,
        "regionInstanceGroupManagers.listManagedInstances": 1, "regionInstanceGroupManagers.insert": 1}),
        "{calls}"
    );
    assert_eq!(calls["rate_limited"]["total"], 3);

    // The quota refills at the start of the next window.
    api.control(Method::POST, "quotas", Some(json!({"read_per_minute": 1, "window_seconds": 0.3}))).await;
    let deadline = Instant::now() + Duration::from_secs(5);
    while api.get(&get).await.0 != 403 {
        assert!(Instant::now() < deadline);
    }
    tokio::time::sleep(Duration::from_millis(350)).await;
    assert_eq!(api.get(&get).await.0, 200, "refilled");
    // Unlimited again.
    api.control(Method::DELETE, "quotas", None).await;
    for _ in 0..10 {
        assert_eq!(api.get(&get).await.0, 200);
    }
    sim.shutdown().await;
}

// ----- 7. partial responses ----------------------------------------------------------------------------

#[tokio::test]
async fn fields_shrink_responses_and_bad_selections_are_named() {
    let (sim, api) = start(1.0).await;
    running(&api, &["hpc-a3u-0", "hpc-a3u-1", "hpc-a3u-2"]).await;
    let (_, v) =
        api.get(&format!("{ZONE}/instances?maxResults=2&fields=items(name,status),nextPageToken")).await;
    assert_eq!(
        v["items"],
        json!([{"name": "hpc-a3u-0", "status": "RUNNING"}, {"name": "hpc-a3u-1", "status": "RUNNING"}])
    );
    let token = v["nextPageToken"].as_str().unwrap();
    assert_eq!(v.as_object().unwrap().len(), 2, "{v}");
    let (_, v) = api.get(&format!("{ZONE}/instances?maxResults=2&pageToken={token}&fields=items/name")).await;
    assert_eq!(v, json!({"items": [{"name": "hpc-a3u-2"}]}));
    let (_, v) = api
        .get("projects/p/aggregated/instances?fields=nextPageToken,items/*/instances(name,networkInterfaces/networkIP)")
        .await;
    let vms = v["items"]["zones/us-central1-a"]["instances"].as_array().unwrap();
    assert_eq!(vms.len(), 3);
    assert_eq!(vms[0].as_object().unwrap().len(), 2, "{v}");
    assert!(vms[0]["networkInterfaces"][0]["networkIP"].as_str().unwrap().starts_with("10."));
    let (_, v) = api.get(&format!("{REGION}/instanceGroupManagers?fields=items(name,targetSize)")).await;
    assert_eq!(v, json!({"items": [{"name": "hpc-a3u-g1", "targetSize": 3}]}));
    let (_, v) = api
        .post_empty(&format!("{MIG}/listManagedInstances?fields=managedInstances(name,instanceStatus)"))
        .await;
    assert_eq!(v["managedInstances"][0], json!({"name": "hpc-a3u-0", "instanceStatus": "RUNNING"}));
    let (_, v) =
        api.get(&format!("{ZONE}/instances/hpc-a3u-1?fields=status,scheduling/provisioningModel")).await;
    assert_eq!(v, json!({"status": "RUNNING", "scheduling": {"provisioningModel": "FLEX_START"}}));
    let (_, v) = api.get(&format!("{MIG}/resizeRequests/rr1?fields=state")).await;
    assert_eq!(v, json!({"state": "SUCCEEDED"}));

    let bad = [
        (format!("{ZONE}/instances?fields=items(name,stauts)"), "items/stauts"),
        (format!("{ZONE}/instances?fields=items(name"), "missing ')'"),
        ("projects/p/aggregated/instances?fields=items/zones/instances".to_string(), "use '*'"),
        (format!("{ZONE}/instances?fields=items[0]"), "unexpected '['"),
    ];
    for (path, mentions) in bad {
        let (status, v) = api.get(&path).await;
        assert_eq!(status, 400, "{path}: {v}");
        assert_google_error(&v, 400, "invalidParameter", mentions);
        assert_eq!(v["error"]["errors"][0]["location"], "fields", "{v}");
    }
    // A bad selection on a mutation refuses it before it acts.
    let (status, _) =
        api.post(&format!("{REGION}/instanceGroupManagers?fields=nmae"), mig_body("hpc-a3u-g2")).await;
    assert_eq!(status, 400);
    assert_eq!(api.get(&format!("{REGION}/instanceGroupManagers/hpc-a3u-g2")).await.0, 404);
    sim.shutdown().await;
}
