//! `createInstances` on regional MIGs (standard and spot VMs by name), capacity failures on create,
//! and spot preemption — over raw HTTP.
// Test rig: waits for the simulator's ticker in real time.
#![allow(clippy::disallowed_methods)]

mod common;
use common::*;
use reqwest::Method;
use std::time::{Duration, Instant};

/// A MIG whose template is the SPOT template `spot` (loaded by [`load_spot_template`]).
fn spot_mig_body(name: &str) -> Value {
    let mut b = mig_body(name);
    b["versions"] = json!([{"instanceTemplate": "projects/p/global/instanceTemplates/spot"}]);
    b
}

async fn load_spot_template(api: &Api, action: &str) {
    let t = json!({"name": "spot", "properties": {"machineType": "n2-standard-8",
        "scheduling": {"provisioningModel": "SPOT", "instanceTerminationAction": action}}});
    api.control(Method::POST, "templates", Some(t)).await;
}

async fn insert_spot_mig(api: &Api, name: &str) {
    let (status, op) = api.post(&format!("{REGION}/instanceGroupManagers"), spot_mig_body(name)).await;
    assert_eq!(status, 200, "{op}");
    assert!(api.wait(&op).await.get("error").is_none());
}

fn create_body(names: &[&str]) -> Value {
    json!({"instances": names.iter().map(|n| json!({"name": n})).collect::<Vec<_>>()})
}

async fn create(api: &Api, mig: &str, names: &[&str], rid: &str) -> (u16, Value) {
    api.post(
        &format!("{REGION}/instanceGroupManagers/{mig}/createInstances?requestId={rid}"),
        create_body(names),
    )
    .await
}

async fn until_running(api: &Api, names: &[&str]) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let vms = api.instances().await;
        let running = vms.iter().filter(|v| v["status"] == "RUNNING").count();
        if running == names.len() {
            return vms;
        }
        assert!(Instant::now() < deadline, "VMs never ran: {vms:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

const RID: &str = "8d6f1a52-1b7e-4c1e-9a53-0c3f5b1f0a11";

#[tokio::test]
async fn spot_vms_are_created_by_name_without_a_run_duration() {
    let (sim, api) = start(1.0).await;
    load_spot_template(&api, "DELETE").await;
    insert_spot_mig(&api, "hpc-spot-g1").await;
    let (status, op) = create(&api, "hpc-spot-g1", &["hpc-spot-0", "hpc-spot-1"], RID).await;
    assert_eq!(status, 200, "{op}");
    assert_eq!(op["operationType"], "compute.instanceGroupManagers.createInstances", "{op}");
    let done = api.wait(&op).await;
    assert!(done.get("error").is_none(), "{done}");
    assert_eq!(api.target_size("hpc-spot-g1").await, 2, "targetSize grows at once");
    let vms = until_running(&api, &["hpc-spot-0", "hpc-spot-1"]).await;
    for vm in &vms {
        assert_eq!(vm["scheduling"]["provisioningModel"], "SPOT", "{vm}");
        assert!(vm["scheduling"].get("maxRunDuration").is_none(), "no run duration: {vm}");
        assert!(vm.get("resourceStatus").is_none(), "no termination time: {vm}");
        let created_by = vm["metadata"]["items"][0]["value"].as_str().unwrap();
        assert!(created_by.ends_with("instanceGroupManagers/hpc-spot-g1"), "{vm}");
    }
    let managed = api.managed("hpc-spot-g1").await;
    assert!(managed.iter().all(|m| m["currentAction"] == "NONE" && m["instance"].is_string()), "{managed:?}");
    // The same requestId again: the same Operation, nothing made twice.
    let (_, again) = create(&api, "hpc-spot-g1", &["hpc-spot-0", "hpc-spot-1"], RID).await;
    assert_eq!(again["name"], op["name"]);
    assert_eq!(api.target_size("hpc-spot-g1").await, 2);
    // A new requestId for names that exist: the Operation fails, nothing changes.
    let (_, dup) = create(&api, "hpc-spot-g1", &["hpc-spot-1"], "1f4b3c2d-5e6f-4a7b-8c9d-0e1f2a3b4c5d").await;
    let dup = api.wait(&dup).await;
    assert_eq!(dup["error"]["errors"][0]["code"], "RESOURCE_ALREADY_EXISTS", "{dup}");
    assert_eq!(dup["httpErrorStatusCode"], 409, "{dup}");
    assert_eq!(api.target_size("hpc-spot-g1").await, 2);
    let calls = api.control(Method::GET, "calls", None).await;
    assert!(calls.to_string().contains("regionInstanceGroupManagers.createInstances"), "{calls}");
    sim.shutdown().await;
}

#[tokio::test]
async fn create_instances_validates_its_body_strictly() {
    let (sim, api) = start(1.0).await;
    load_spot_template(&api, "DELETE").await;
    insert_spot_mig(&api, "hpc-spot-g1").await;
    let path = format!("{REGION}/instanceGroupManagers/hpc-spot-g1/createInstances");
    let (status, v) = api.post(&path, json!({"instances": []})).await;
    assert_google_error(&v, 400, "invalid", "instances");
    assert_eq!(status, 400);
    let (_, v) = api.post(&path, json!({"instances": [{"name": "Bad_Name"}]})).await;
    assert_google_error(&v, 400, "invalid", "instances[0].name");
    let (_, v) =
        api.post(&path, json!({"instances": [{"name": "hpc-spot-0"}, {"name": "hpc-spot-0"}]})).await;
    assert_google_error(&v, 400, "invalid", "twice");
    let (_, v) = api.post(&path, json!({"instances": [{"nam": "hpc-spot-0"}]})).await;
    assert_eq!(v["error"]["code"], 400, "an unknown field is refused by the schema: {v}");
    let too_many: Vec<String> = (0..2001).map(|i| format!("hpc-spot-{i}")).collect();
    let names: Vec<&str> = too_many.iter().map(String::as_str).collect();
    let (_, v) = api.post(&path, create_body(&names)).await;
    assert_google_error(&v, 400, "invalid", "limit of 2000");
    // A Flex Start template (an unloaded one is): VMs only through resize requests.
    api.insert_mig("hpc-a3u-g1").await;
    let (_, v) = api
        .post(
            &format!("{REGION}/instanceGroupManagers/hpc-a3u-g1/createInstances"),
            create_body(&["hpc-a3u-0"]),
        )
        .await;
    assert_google_error(&v, 400, "invalid", "FLEX_START");
    assert_eq!(api.target_size("hpc-spot-g1").await, 0);
    sim.shutdown().await;
}

#[tokio::test]
async fn a_stockout_on_create_shows_in_last_attempt_and_the_instances_wait() {
    let (sim, api) = start(1.0).await;
    load_spot_template(&api, "DELETE").await;
    api.control(
        Method::POST,
        "capacity",
        Some(json!({"match": "hpc-spot-", "fail": {"code": "ZONE_RESOURCE_POOL_EXHAUSTED",
                                                 "message": "The zone does not have enough resources"}})),
    )
    .await;
    insert_spot_mig(&api, "hpc-spot-g1").await;
    let (_, op) = create(&api, "hpc-spot-g1", &["hpc-spot-0"], RID).await;
    let done = api.wait(&op).await;
    assert!(done.get("error").is_none(), "the call itself succeeds: {done}");
    let deadline = Instant::now() + Duration::from_secs(5);
    let mi = loop {
        let m = api.managed("hpc-spot-g1").await;
        if m.first().is_some_and(|m| m.get("lastAttempt").is_some()) {
            break m[0].clone();
        }
        assert!(Instant::now() < deadline, "no lastAttempt error: {m:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(mi["currentAction"], "CREATING", "{mi}");
    assert!(mi.get("instance").is_none(), "no VM, no URL: {mi}");
    assert_eq!(mi["lastAttempt"]["errors"]["errors"][0]["code"], "ZONE_RESOURCE_POOL_EXHAUSTED", "{mi}");
    assert!(api.instances().await.is_empty());
    assert_eq!(api.target_size("hpc-spot-g1").await, 1);
    // Capacity comes back: the VM is made.
    api.control(Method::DELETE, "capacity", None).await;
    until_running(&api, &["hpc-spot-0"]).await;
    // Deleting the MIG takes the instances being created with it.
    api.control(Method::POST, "capacity", Some(json!({"match": "", "hold": true}))).await;
    insert_spot_mig(&api, "hpc-spot-g2").await;
    let (_, op) = create(&api, "hpc-spot-g2", &["hpc-spot-5"], "2f4b3c2d-5e6f-4a7b-8c9d-0e1f2a3b4c5d").await;
    api.wait(&op).await;
    let (_, del) = api.delete(&format!("{REGION}/instanceGroupManagers/hpc-spot-g2")).await;
    assert!(api.wait(&del).await.get("error").is_none());
    let (status, _) = api.get(&format!("{REGION}/instanceGroupManagers/hpc-spot-g2")).await;
    assert_eq!(status, 404);
    sim.shutdown().await;
}

#[tokio::test]
async fn preemption_deletes_or_stops_a_spot_vm_as_its_template_says() {
    let (sim, api) = start(1.0).await;
    load_spot_template(&api, "DELETE").await;
    insert_spot_mig(&api, "hpc-spot-g1").await;
    let (_, op) = create(&api, "hpc-spot-g1", &["hpc-spot-0", "hpc-spot-1"], RID).await;
    api.wait(&op).await;
    until_running(&api, &["hpc-spot-0", "hpc-spot-1"]).await;
    api.control(Method::POST, "instances/hpc-spot-1/preempt", None).await;
    let names: Vec<Value> = api.instances().await.iter().map(|v| v["name"].clone()).collect();
    assert_eq!(names, vec![json!("hpc-spot-0")], "DELETE: the preempted VM is gone");
    // A MIG that does nothing on failure keeps the member, with no VM, and its targetSize.
    assert_eq!(api.target_size("hpc-spot-g1").await, 2, "the member stays in its MIG");
    let managed = api.managed("hpc-spot-g1").await;
    let gone: Vec<&Value> = managed.iter().filter(|m| m["name"] == "hpc-spot-1").collect();
    assert_eq!(gone.len(), 1, "{managed:?}");
    assert_eq!(gone[0]["currentAction"], "NONE", "{managed:?}");
    assert!(gone[0].get("instanceStatus").is_none(), "no VM, no status: {managed:?}");
    let url = gone[0]["instance"].as_str().expect("the member keeps its URL").to_string();
    // deleteInstances in its documented form removes it.
    let (_, op) = api
        .post(
            &format!("{REGION}/instanceGroupManagers/hpc-spot-g1/deleteInstances"),
            json!({"instances": [url], "skipInstancesOnValidationError": true}),
        )
        .await;
    assert!(api.wait(&op).await.get("error").is_none());
    assert_eq!(api.target_size("hpc-spot-g1").await, 1, "the member left with deleteInstances");
    assert_eq!(api.managed("hpc-spot-g1").await.len(), 1);
    // STOP: the VM stays TERMINATED (a VM keeps the scheduling its template had when it was made).
    let t = json!({"name": "spotstop", "properties": {"machineType": "n2-standard-8",
        "scheduling": {"provisioningModel": "SPOT", "instanceTerminationAction": "STOP"}}});
    api.control(Method::POST, "templates", Some(t)).await;
    let mut body = spot_mig_body("hpc-spot-g2");
    body["versions"] = json!([{"instanceTemplate": "projects/p/global/instanceTemplates/spotstop"}]);
    let (_, op) = api.post(&format!("{REGION}/instanceGroupManagers"), body).await;
    api.wait(&op).await;
    let (_, op) = create(&api, "hpc-spot-g2", &["hpc-spot-7"], "3f4b3c2d-5e6f-4a7b-8c9d-0e1f2a3b4c5d").await;
    api.wait(&op).await;
    until_running(&api, &["hpc-spot-0", "hpc-spot-7"]).await;
    api.control(Method::POST, "instances/hpc-spot-7/preempt", None).await;
    let vms = api.instances().await;
    let stopped: Vec<&Value> = vms.iter().filter(|v| v["name"] == "hpc-spot-7").collect();
    assert_eq!(stopped[0]["status"], "TERMINATED", "{vms:?}");
    assert_eq!(api.target_size("hpc-spot-g2").await, 1, "a stopped VM stays in its MIG");
    // Only spot VMs are preempted.
    api.insert_mig("hpc-a3u-g1").await;
    api.insert_request("hpc-a3u-g1", "rr1", &["hpc-a3u-0"], "3600").await;
    api.until_state("hpc-a3u-g1", "rr1", "SUCCEEDED").await;
    let (status, v) =
        api.call(Method::POST, format!("{}_sim/instances/hpc-a3u-0/preempt", api.root), None).await;
    assert_eq!(status, 409, "{v}");
    let (status, _) = api.call(Method::POST, format!("{}_sim/instances/nope/preempt", api.root), None).await;
    assert_eq!(status, 404);
    sim.shutdown().await;
}
