//! Black-box tests of the Compute Engine simulator over raw HTTP (reqwest + serde_json, no client types).

// Test rig: these drive a real simulator server and wait for its ticker in real time.
#![allow(clippy::disallowed_methods)]

mod common;

use common::*;
use gce_sim as sim;
use std::time::{Duration, Instant};

#[tokio::test]
async fn bad_requests_get_google_style_400s_naming_the_field() {
    let (sim, api) = start(1.0).await;
    api.insert_mig("hpc-a3u-g1").await;
    let rr_path = format!("{REGION}/instanceGroupManagers/hpc-a3u-g1/resizeRequests");
    let cases = [
        (
            json!({"name": "rr", "instances": [{"name": "n-0"}], "requested_run_duration": {"seconds": "3600"}}),
            "badRequest",
            "requested_run_duration",
        ),
        (
            json!({"name": "rr", "instances": [{"name": "n-0"}], "requestedRunDuration": {"seconds": "599"}}),
            "invalid",
            "requestedRunDuration.seconds",
        ),
        (
            json!({"name": "rr", "instances": [{"name": "n-0"}], "requestedRunDuration": {"seconds": "604801"}}),
            "invalid",
            "requestedRunDuration.seconds",
        ),
        (
            json!({"name": "rr", "instances": [{"name": "n-0"}], "requestedRunDuration": {"seconds": "3600"}, "resizeBy": 1}),
            "invalid",
            "resizeBy",
        ),
        (
            json!({"name": "rr", "resizeBy": "2", "requestedRunDuration": {"seconds": "3600"}}),
            "badRequest",
            "resizeBy",
        ),
        (json!({"name": "rr", "instances": [{"name": "n-0"}]}), "invalid", "requestedRunDuration"),
        (
            json!({"name": "RR", "instances": [{"name": "n-0"}], "requestedRunDuration": {"seconds": "3600"}}),
            "invalid",
            "name",
        ),
    ];
    for (body, reason, field) in cases {
        let (status, v) = api.post(&rr_path, body).await;
        assert_eq!(status, 400, "{v}");
        assert_google_error(&v, 400, reason, field);
    }
    // A bad enum value and an unknown query parameter.
    let mut mig = mig_body("hpc-a3u-g2");
    mig["distributionPolicy"]["targetShape"] = json!("SINGLE_ZONE");
    let (status, v) = api.post(&format!("{REGION}/instanceGroupManagers"), mig).await;
    assert_eq!(status, 400);
    assert_google_error(&v, 400, "badRequest", "targetShape");
    let (status, v) = api.get(&format!("{REGION}/instanceGroupManagers?max_results=5")).await;
    assert_eq!(status, 400);
    assert_google_error(&v, 400, "badRequest", "max_results");
    let (status, v) = api.get(&format!("{REGION}/instanceGroupManagers?maxResults=501")).await;
    assert_eq!(status, 400);
    assert_google_error(&v, 400, "invalid", "maxResults");
    let (status, v) =
        api.post(&format!("{REGION}/instanceGroupManagers?requestId=not-a-uuid"), mig_body("x")).await;
    assert_eq!(status, 400);
    assert_google_error(&v, 400, "invalid", "requestId");
    // Missing resources are Google-style 404s.
    let (status, v) = api.get(&format!("{REGION}/instanceGroupManagers/nope")).await;
    assert_eq!(status, 404);
    assert_google_error(&v, 404, "notFound", "nope");
    // Nothing was created by the rejected requests.
    assert_eq!(api.target_size("hpc-a3u-g1").await, 0);
    sim.shutdown().await;
}

#[test]
fn request_bodies_can_be_validated_directly() {
    let good =
        json!({"name": "rr", "instances": [{"name": "n-0"}], "requestedRunDuration": {"seconds": "3600"}});
    assert_eq!(sim::validate_request_body("regionInstanceGroupManagerResizeRequests.insert", &good), Ok(()));
    assert_eq!(
        sim::validate_request_body("compute.instanceGroupManagerResizeRequests.insert", &good),
        Ok(())
    );
    let bad = json!({"name": "rr", "requested_run_duration": {"seconds": "3600"}});
    let errs =
        sim::validate_request_body("regionInstanceGroupManagerResizeRequests.insert", &bad).unwrap_err();
    assert!(errs.iter().any(|e| e.contains("requested_run_duration")), "{errs:?}");
    let del = json!({"instances": ["a", "b"], "skipInstancesOnValidationError": true});
    assert_eq!(sim::validate_request_body("regionInstanceGroupManagers.deleteInstances", &del), Ok(()));
    assert_eq!(sim::validate_request_body("regionInstanceGroupManagers.insert", &mig_body("m")), Ok(()));
}

#[tokio::test]
async fn resize_request_walks_creating_accepted_succeeded_and_vms_appear_together() {
    let (sim, api) = start(1.0).await;
    api.control(
        reqwest::Method::POST,
        "capacity",
        Some(json!({"match": "hpc-a3u-", "delay_seconds": 2.0, "fail": null, "hold": false})),
    )
    .await;
    api.insert_mig("hpc-a3u-g1").await;
    // Slow operations keep the request CREATING long enough to see it on a busy machine.
    api.control(reqwest::Method::POST, "latency", Some(json!({"operation_ms": 1000}))).await;
    let op = api.insert_request("hpc-a3u-g1", "rr1", &["hpc-a3u-0", "hpc-a3u-1"], "3600").await;
    assert_eq!(op["status"], "RUNNING");
    assert!(op["targetLink"]
        .as_str()
        .unwrap()
        .ends_with("/instanceGroupManagers/hpc-a3u-g1/resizeRequests/rr1"));
    assert_eq!(api.request("hpc-a3u-g1", "rr1").await["state"], "CREATING");
    api.control(reqwest::Method::POST, "latency", Some(json!({"operation_ms": 100}))).await;
    // targetSize grows at once; the instances are queued with no URL.
    assert_eq!(api.target_size("hpc-a3u-g1").await, 2);
    let done = api.wait(&op).await;
    assert!(done.get("error").is_none(), "{done}");
    let accepted = api.until_state("hpc-a3u-g1", "rr1", "ACCEPTED").await;
    assert_eq!(accepted["requestedRunDuration"]["seconds"], "3600");
    // While it waits for capacity, the last attempt's error says why.
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let v = api.request("hpc-a3u-g1", "rr1").await;
        assert_eq!(v["state"], "ACCEPTED", "{v}");
        if v["status"]["lastAttempt"]["error"]["errors"][0]["code"].is_string() {
            break;
        }
        assert!(Instant::now() < deadline, "{v}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let queued = api.managed("hpc-a3u-g1").await;
    assert_eq!(queued.len(), 2);
    for mi in &queued {
        assert_eq!(mi["currentAction"], "CREATING", "{mi}");
        assert_eq!(mi["instanceStatus"], "PENDING", "{mi}");
        assert!(mi.get("instance").is_none(), "{mi}");
    }
    assert!(api.instances().await.is_empty());
    let done = api.until_state("hpc-a3u-g1", "rr1", "SUCCEEDED").await;
    assert!(done["status"].get("lastAttempt").is_none(), "{done}");
    let vms = api.instances().await;
    assert_eq!(vms.len(), 2, "all VMs of the request exist together");
    assert_eq!(vms[0]["creationTimestamp"], vms[1]["creationTimestamp"]);
    assert_ne!(vms[0]["networkInterfaces"][0]["networkIP"], vms[1]["networkInterfaces"][0]["networkIP"]);
    for vm in &vms {
        assert_eq!(vm["status"], "RUNNING");
        assert_eq!(vm["scheduling"]["provisioningModel"], "FLEX_START");
        let created =
            chrono::DateTime::parse_from_rfc3339(vm["creationTimestamp"].as_str().unwrap()).unwrap();
        let ends = chrono::DateTime::parse_from_rfc3339(
            vm["resourceStatus"]["scheduling"]["terminationTimestamp"].as_str().unwrap(),
        )
        .unwrap();
        assert_eq!((ends - created).num_seconds(), 3600);
        let created_by =
            vm["metadata"]["items"].as_array().unwrap().iter().find(|i| i["key"] == "created-by").unwrap();
        assert!(created_by["value"]
            .as_str()
            .unwrap()
            .ends_with("/regions/us-central1/instanceGroupManagers/hpc-a3u-g1"));
        assert!(vm["networkInterfaces"][0]["networkIP"].as_str().unwrap().starts_with("10."));
    }
    let (status, vm) = api.get(&format!("{ZONE}/instances/hpc-a3u-0")).await;
    assert_eq!(status, 200, "{vm}");
    let managed = api.managed("hpc-a3u-g1").await;
    assert!(managed.iter().all(|m| m["instanceStatus"] == "RUNNING" && m["currentAction"] == "NONE"));
    assert!(managed
        .iter()
        .all(|m| m["instance"].as_str().unwrap().contains("/zones/us-central1-a/instances/")));
    assert!(managed.iter().all(|m| m["scheduling"]["terminationTimestamp"].is_string()));
    sim.shutdown().await;
}

#[tokio::test]
async fn failed_request_rolls_back() {
    let (sim, api) = start(1.0).await;
    let fail =
        json!({"code": "ZONE_RESOURCE_POOL_EXHAUSTED", "message": "The zone does not have enough resources"});
    api.control(
        reqwest::Method::POST,
        "capacity",
        Some(json!({"match": "", "delay_seconds": 0.3, "fail": fail})),
    )
    .await;
    api.insert_mig("hpc-a3u-g1").await;
    api.insert_request("hpc-a3u-g1", "rr1", &["hpc-a3u-0", "hpc-a3u-1", "hpc-a3u-2"], "3600").await;
    assert_eq!(api.target_size("hpc-a3u-g1").await, 3);
    let failed = api.until_state("hpc-a3u-g1", "rr1", "FAILED").await;
    assert_eq!(failed["status"]["error"]["errors"][0]["code"], "ZONE_RESOURCE_POOL_EXHAUSTED", "{failed}");
    assert!(failed["status"].get("lastAttempt").is_none());
    assert_eq!(api.target_size("hpc-a3u-g1").await, 0);
    assert!(api.managed("hpc-a3u-g1").await.is_empty());
    assert!(api.instances().await.is_empty());
    // A final request can be deleted.
    let (status, op) =
        api.delete(&format!("{REGION}/instanceGroupManagers/hpc-a3u-g1/resizeRequests/rr1")).await;
    assert_eq!(status, 200, "{op}");
    assert!(api.wait(&op).await.get("error").is_none());
    sim.shutdown().await;
}

#[tokio::test]
async fn cancel_only_while_accepted_and_delete_only_when_final() {
    let (sim, api) = start(1.0).await;
    api.control(reqwest::Method::POST, "capacity", Some(json!({"match": "hpc-a3u-held", "hold": true})))
        .await;
    api.insert_mig("hpc-a3u-held").await;
    api.insert_mig("hpc-a3u-free").await;
    let rr_path = |mig: &str, rr: &str| format!("{REGION}/instanceGroupManagers/{mig}/resizeRequests/{rr}");

    // A held request stays ACCEPTED; it cannot be deleted, only cancelled.
    let op = api.insert_request("hpc-a3u-held", "rr1", &["hpc-a3u-0", "hpc-a3u-1"], "3600").await;
    api.wait(&op).await;
    api.until_state("hpc-a3u-held", "rr1", "ACCEPTED").await;
    let (status, v) = api.delete(&rr_path("hpc-a3u-held", "rr1")).await;
    assert_eq!(status, 400, "{v}");
    assert_google_error(&v, 400, "invalid", "ACCEPTED");
    let (status, op) = api.post_empty(&format!("{}/cancel", rr_path("hpc-a3u-held", "rr1"))).await;
    assert_eq!(status, 200, "{op}");
    let done = api.wait(&op).await;
    assert!(done.get("error").is_none(), "{done}");
    assert_eq!(api.request("hpc-a3u-held", "rr1").await["state"], "CANCELLED");
    assert_eq!(api.target_size("hpc-a3u-held").await, 0);
    assert!(api.managed("hpc-a3u-held").await.is_empty());
    // Cancelling a final request: the Operation ends DONE with CONDITION_NOT_MET.
    let (_, op) = api.post_empty(&format!("{}/cancel", rr_path("hpc-a3u-held", "rr1"))).await;
    let done = api.wait(&op).await;
    assert_eq!(done["error"]["errors"][0]["code"], "CONDITION_NOT_MET", "{done}");
    assert!(done["httpErrorStatusCode"].is_number());

    // SUCCEEDED: cancel fails inside the Operation, delete keeps the VMs.
    api.insert_request("hpc-a3u-free", "rr2", &["hpc-a3u-5"], "3600").await;
    api.until_state("hpc-a3u-free", "rr2", "SUCCEEDED").await;
    let (_, op) = api.post_empty(&format!("{}/cancel", rr_path("hpc-a3u-free", "rr2"))).await;
    let done = api.wait(&op).await;
    assert_eq!(done["status"], "DONE");
    assert_eq!(done["error"]["errors"][0]["code"], "CONDITION_NOT_MET", "{done}");
    let (status, op) = api.delete(&rr_path("hpc-a3u-free", "rr2")).await;
    assert_eq!(status, 200, "{op}");
    api.wait(&op).await;
    let (status, _) = api.get(&rr_path("hpc-a3u-free", "rr2")).await;
    assert_eq!(status, 404);
    assert_eq!(api.instances().await.len(), 1, "deleting a request does not delete its VMs");
    assert_eq!(api.target_size("hpc-a3u-free").await, 1);
    sim.shutdown().await;
}

#[tokio::test]
async fn expiry_deletes_the_vms_and_lowers_target_size() {
    // 600 s of run duration pass in one real second.
    let (sim, api) = start(600.0).await;
    api.insert_mig("hpc-a3u-g1").await;
    api.insert_request("hpc-a3u-g1", "rr1", &["hpc-a3u-0", "hpc-a3u-1"], "600").await;
    api.until_state("hpc-a3u-g1", "rr1", "SUCCEEDED").await;
    assert_eq!(api.instances().await.len(), 2);
    assert_eq!(api.target_size("hpc-a3u-g1").await, 2);
    let deadline = Instant::now() + Duration::from_secs(5);
    while !api.instances().await.is_empty() {
        assert!(Instant::now() < deadline, "VMs outlived their run duration");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(api.target_size("hpc-a3u-g1").await, 0);
    assert!(api.managed("hpc-a3u-g1").await.is_empty());
    assert_eq!(api.request("hpc-a3u-g1", "rr1").await["state"], "SUCCEEDED");
    sim.shutdown().await;
}

#[tokio::test]
async fn control_api_expires_one_vm_now() {
    let (sim, api) = start(1.0).await;
    api.insert_mig("hpc-a3u-g1").await;
    api.insert_request("hpc-a3u-g1", "rr1", &["hpc-a3u-0", "hpc-a3u-1"], "3600").await;
    api.until_state("hpc-a3u-g1", "rr1", "SUCCEEDED").await;
    api.control(reqwest::Method::POST, "instances/hpc-a3u-1/expire", None).await;
    let names: Vec<Value> = api.instances().await.iter().map(|v| v["name"].clone()).collect();
    assert_eq!(names, vec![json!("hpc-a3u-0")]);
    assert_eq!(api.target_size("hpc-a3u-g1").await, 1);
    let (status, _) =
        api.call(reqwest::Method::POST, format!("{}_sim/instances/nope/expire", api.root), None).await;
    assert_eq!(status, 404);
    sim.shutdown().await;
}

#[tokio::test]
async fn request_id_reuse_returns_the_same_operation() {
    let (sim, api) = start(1.0).await;
    let rid = "6a1f4f0e-8a55-4b43-9d33-0c0a7e2c3b10";
    let path = format!("{REGION}/instanceGroupManagers?requestId={rid}");
    let (s1, op1) = api.post(&path, mig_body("hpc-a3u-g1")).await;
    let (s2, op2) = api.post(&path, mig_body("hpc-a3u-g1")).await;
    assert_eq!((s1, s2), (200, 200), "{op1} {op2}");
    assert_eq!(op1["name"], op2["name"]);
    assert_eq!(op1["id"], op2["id"]);
    // The same name without that requestId is a duplicate.
    let (status, v) = api.post(&format!("{REGION}/instanceGroupManagers"), mig_body("hpc-a3u-g1")).await;
    assert_eq!(status, 409);
    assert_google_error(&v, 409, "alreadyExists", "hpc-a3u-g1");
    let (_, list) = api.get(&format!("{REGION}/instanceGroupManagers")).await;
    assert_eq!(list["items"].as_array().unwrap().len(), 1);

    // Resize requests: a retried insert does not grow the MIG twice.
    let rr_path = format!("{REGION}/instanceGroupManagers/hpc-a3u-g1/resizeRequests?requestId=0f7c7c43-1d1e-4a5e-b5a6-4f2d6d0c9e01");
    let body = json!({"name": "rr1", "instances": [{"name": "hpc-a3u-0"}], "requestedRunDuration": {"seconds": "3600"}});
    let (_, a) = api.post(&rr_path, body.clone()).await;
    let done = api.wait(&a).await;
    let (status, b) = api.post(&rr_path, body).await;
    assert_eq!(status, 200, "{b}");
    assert_eq!(a["name"], b["name"]);
    assert_eq!(b["status"], "DONE", "the original operation, as it is now");
    assert_eq!(done["name"], b["name"]);
    assert_eq!(api.target_size("hpc-a3u-g1").await, 1);
    let (status, v) = api
        .post(
            &format!("{REGION}/instanceGroupManagers?requestId=00000000-0000-0000-0000-000000000000"),
            mig_body("x"),
        )
        .await;
    assert_eq!(status, 400, "{v}");
    sim.shutdown().await;
}

/// Follows nextPageToken to the end and returns everything, checking each page's size.
async fn all_pages(api: &Api, path: &str, field: &str, max: usize) -> (Vec<Value>, usize) {
    let mut items = Vec::new();
    let mut token: Option<String> = None;
    let mut pages = 0;
    loop {
        let sep = if path.contains('?') { '&' } else { '?' };
        let url = match &token {
            Some(t) => format!("{path}{sep}maxResults={max}&pageToken={t}"),
            None => format!("{path}{sep}maxResults={max}"),
        };
        let (status, v) =
            if field == "managedInstances" { api.post_empty(&url).await } else { api.get(&url).await };
        assert_eq!(status, 200, "{v}");
        let page = v[field].as_array().cloned().unwrap_or_default();
        assert!(page.len() <= max || field == "managedInstances", "{v}");
        items.extend(page);
        pages += 1;
        match v.get("nextPageToken").and_then(Value::as_str) {
            Some(t) => token = Some(t.to_string()),
            None => return (items, pages),
        }
    }
}

#[tokio::test]
async fn lists_page_with_max_results_and_page_tokens() {
    let (sim, api) = start(1.0).await;
    for i in 0..7 {
        api.insert_mig(&format!("hpc-a3u-g{i}")).await;
    }
    let (migs, pages) = all_pages(&api, &format!("{REGION}/instanceGroupManagers"), "items", 3).await;
    assert_eq!((migs.len(), pages), (7, 3));
    let names: Vec<&str> = migs.iter().map(|m| m["name"].as_str().unwrap()).collect();
    assert_eq!(names, (0..7).map(|i| format!("hpc-a3u-g{i}")).collect::<Vec<_>>());

    for i in 0..5 {
        api.insert_request("hpc-a3u-g0", &format!("rr{i}"), &[&format!("hpc-a3u-{i}")], "3600").await;
    }
    let (rrs, pages) =
        all_pages(&api, &format!("{REGION}/instanceGroupManagers/hpc-a3u-g0/resizeRequests"), "items", 2)
            .await;
    assert_eq!((rrs.len(), pages), (5, 3));
    api.until_state("hpc-a3u-g0", "rr4", "SUCCEEDED").await;
    for i in 0..4 {
        api.until_state("hpc-a3u-g0", &format!("rr{i}"), "SUCCEEDED").await;
    }
    let (vms, pages) = all_pages(&api, &format!("{ZONE}/instances"), "items", 2).await;
    assert_eq!((vms.len(), pages), (5, 3));
    let (agg, pages) = all_pages(&api, "projects/p/aggregated/instances", "items", 500).await;
    assert_eq!(pages, 1);
    assert_eq!(agg.len(), 0, "aggregated items is a map, not an array");
    let (_, v) = api.get("projects/p/aggregated/instances").await;
    assert_eq!(v["items"]["zones/us-central1-a"]["instances"].as_array().unwrap().len(), 5);

    // Filters, in both styles.
    let (_, v) = api.get(&format!("{ZONE}/instances?filter=name%20eq%20%27hpc-a3u-%5B12%5D%27")).await;
    assert_eq!(v["items"].as_array().unwrap().len(), 2, "{v}");
    let (_, v) =
        api.get(&format!("{REGION}/instanceGroupManagers?filter=name%20%3D%20%22hpc-a3u-g6%22")).await;
    assert_eq!(v["items"].as_array().unwrap().len(), 1, "{v}");
    let (status, _) = api.get(&format!("{ZONE}/instances?pageToken=garbage")).await;
    assert_eq!(status, 400);

    // listManagedInstances pages only when the MIG asks for it.
    let (mis, pages) = all_pages(
        &api,
        &format!("{REGION}/instanceGroupManagers/hpc-a3u-g0/listManagedInstances"),
        "managedInstances",
        2,
    )
    .await;
    assert_eq!((mis.len(), pages), (5, 1));
    let mut paged = mig_body("hpc-a3u-paged");
    paged["listManagedInstancesResults"] = json!("PAGINATED");
    let (_, op) = api.post(&format!("{REGION}/instanceGroupManagers"), paged).await;
    api.wait(&op).await;
    api.insert_request("hpc-a3u-paged", "rr", &["p-0", "p-1", "p-2"], "3600").await;
    let (mis, pages) = all_pages(
        &api,
        &format!("{REGION}/instanceGroupManagers/hpc-a3u-paged/listManagedInstances"),
        "managedInstances",
        2,
    )
    .await;
    assert_eq!((mis.len(), pages), (3, 2));
    sim.shutdown().await;
}

#[tokio::test]
async fn mig_delete_cascades_to_requests_and_vms() {
    let (sim, api) = start(1.0).await;
    api.control(reqwest::Method::POST, "capacity", Some(json!({"match": "hpc-a3u-g1", "hold": true}))).await;
    api.insert_mig("hpc-a3u-g1").await;
    api.insert_request("hpc-a3u-g1", "queued", &["hpc-a3u-9"], "3600").await;
    api.control(reqwest::Method::POST, "capacity", Some(json!({"match": "hpc-a3u-g1", "hold": false}))).await;
    api.insert_request("hpc-a3u-g1", "rr1", &["hpc-a3u-0", "hpc-a3u-1"], "3600").await;
    api.until_state("hpc-a3u-g1", "rr1", "SUCCEEDED").await;
    // The latest rule released the first request too.
    api.until_state("hpc-a3u-g1", "queued", "SUCCEEDED").await;
    api.control(reqwest::Method::POST, "capacity", Some(json!({"match": "hpc-a3u-g1", "hold": true}))).await;
    api.insert_request("hpc-a3u-g1", "held", &["hpc-a3u-5"], "3600").await;
    assert_eq!(api.instances().await.len(), 3);

    // While busy, the delete is refused; afterwards it goes through.
    api.control(reqwest::Method::POST, "migs/hpc-a3u-g1/busy", Some(json!({"seconds": 30}))).await;
    let (status, v) = api.delete(&format!("{REGION}/instanceGroupManagers/hpc-a3u-g1")).await;
    assert_eq!(status, 400);
    assert_google_error(&v, 400, "resourceNotReady", "active transformation");
    api.control(reqwest::Method::POST, "migs/hpc-a3u-g1/busy", Some(json!({"seconds": 0}))).await;
    let (status, op) = api.delete(&format!("{REGION}/instanceGroupManagers/hpc-a3u-g1")).await;
    assert_eq!(status, 200, "{op}");
    assert_eq!(op["operationType"], "delete");
    let done = api.wait(&op).await;
    assert!(done.get("error").is_none(), "{done}");
    let (status, _) = api.get(&format!("{REGION}/instanceGroupManagers/hpc-a3u-g1")).await;
    assert_eq!(status, 404);
    assert!(api.instances().await.is_empty());
    let (status, _) = api.get(&format!("{REGION}/instanceGroupManagers/hpc-a3u-g1/resizeRequests/rr1")).await;
    assert_eq!(status, 404);
    sim.shutdown().await;
}

/// Zonal MIGs take bare names for queued instances (the discovery document: "Queued instances do
/// not have URL and can be deleted only by name"); the request shrinks.
#[tokio::test]
async fn zonal_delete_instances_by_name_removes_queued_instances() {
    let (sim, api) = start(1.0).await;
    api.control(reqwest::Method::POST, "capacity", Some(json!({"match": "", "hold": true}))).await;
    api.insert_zonal_mig("hpc-z1").await;
    let mig = format!("{ZONE}/instanceGroupManagers/hpc-z1");
    api.insert_request_at(&mig, "rr1", &["hpc-a3u-0", "hpc-a3u-1", "hpc-a3u-2"], "3600").await;
    let path = format!("{mig}/deleteInstances");
    let target = || async { api.get(&mig).await.1["targetSize"].as_i64().unwrap() };

    // Names and URLs are not mixed (a synchronous 400).
    let mixed = json!({"instances": ["hpc-a3u-0", "https://www.googleapis.com/compute/v1/projects/p/zones/us-central1-a/instances/hpc-a3u-1"]});
    let (status, v) = api.post(&path, mixed).await;
    assert_eq!(status, 400, "{v}");
    assert_google_error(&v, 400, "invalid", "mixed");
    // An unknown name fails the Operation unless skipped.
    let (status, op) = api.post(&path, json!({"instances": ["hpc-a3u-0", "nope"]})).await;
    assert_eq!(status, 200, "{op}");
    let done = api.wait(&op).await;
    assert_eq!(done["error"]["errors"][0]["code"], "RESOURCE_NOT_FOUND", "{done}");
    assert!(done["error"]["errors"][0]["message"].as_str().unwrap().contains("instances/nope"), "{done}");
    assert_eq!(done["httpErrorStatusCode"], 404, "{done}");
    assert_eq!(target().await, 3, "a failed deleteInstances deletes nothing");

    let (status, op) = api
        .post(&path, json!({"instances": ["hpc-a3u-1", "nope"], "skipInstancesOnValidationError": true}))
        .await;
    assert_eq!(status, 200, "{op}");
    let done = api.wait(&op).await;
    assert!(done.get("error").is_none(), "{done}");
    assert_eq!(target().await, 2);
    let names: Vec<Value> = api.managed_at(&mig).await.iter().map(|m| m["name"].clone()).collect();
    assert_eq!(names, vec![json!("hpc-a3u-0"), json!("hpc-a3u-2")]);

    // Capacity arrives: only the remaining names are created.
    api.control(reqwest::Method::DELETE, "capacity", None).await;
    api.until_state_at(&mig, "rr1", "SUCCEEDED").await;
    let vms: Vec<Value> = api.instances().await.iter().map(|v| v["name"].clone()).collect();
    assert_eq!(vms, vec![json!("hpc-a3u-0"), json!("hpc-a3u-2")]);

    // A created VM by URL: DELETING for a moment, then gone.
    let url = api.managed_at(&mig).await[0]["instance"].as_str().unwrap().to_string();
    let (status, op) = api.post(&path, json!({"instances": [url]})).await;
    assert_eq!(status, 200, "{op}");
    assert_eq!(target().await, 1);
    let deadline = Instant::now() + Duration::from_secs(5);
    while api.instances().await.len() != 1 {
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let too_many: Vec<String> = (0..1001).map(|i| format!("n-{i}")).collect();
    let (status, _) =
        api.post(&path, json!({"instances": too_many, "skipInstancesOnValidationError": true})).await;
    assert_eq!(status, 400);
    sim.shutdown().await;
}

#[tokio::test]
async fn faults_are_injected_and_calls_are_counted() {
    let (sim, api) = start(1.0).await;
    api.insert_mig("hpc-a3u-g1").await;
    let get = format!("{REGION}/instanceGroupManagers/hpc-a3u-g1");
    api.control(reqwest::Method::POST, "faults", Some(json!({"method": "regionInstanceGroupManagers.get", "status": 503, "reason": "backendError", "probability": 1.0, "count": 2}))).await;
    for _ in 0..2 {
        let (status, v) = api.get(&get).await;
        assert_eq!(status, 503);
        assert_google_error(&v, 503, "backendError", "");
    }
    assert_eq!(api.get(&get).await.0, 200, "count exhausted");

    api.control(
        reqwest::Method::POST,
        "faults",
        Some(json!({"method": "*", "status": 403, "reason": "rateLimitExceeded", "count": 1})),
    )
    .await;
    let (status, v) = api.get(&get).await;
    assert_eq!(status, 403);
    assert_google_error(&v, 403, "rateLimitExceeded", "Quota");
    assert_eq!(v["error"]["errors"][0]["domain"], "usageLimits");
    api.control(reqwest::Method::POST, "faults", Some(json!({"method": "*", "status": 429}))).await;
    assert_eq!(api.get(&get).await.0, 429);
    api.control(reqwest::Method::DELETE, "faults", None).await;

    // Pure slowness: status 200 answers normally, late.
    api.control(
        reqwest::Method::POST,
        "faults",
        Some(
            json!({"method": "regionInstanceGroupManagers.get", "status": 200, "delay_ms": 300, "count": 1}),
        ),
    )
    .await;
    let t = Instant::now();
    assert_eq!(api.get(&get).await.0, 200);
    assert!(t.elapsed() >= Duration::from_millis(300));

    let calls = api.control(reqwest::Method::GET, "calls", None).await;
    assert_eq!(calls["by_method"]["regionInstanceGroupManagers.get"], 6, "{calls}");
    assert_eq!(calls["by_method"]["regionInstanceGroupManagers.insert"], 1, "{calls}");
    assert!(calls["by_method"]["regionOperations.wait"].as_u64().unwrap() >= 1);
    let total: u64 = calls["by_method"].as_object().unwrap().values().map(|v| v.as_u64().unwrap()).sum();
    assert_eq!(calls["total"], total);
    api.control(reqwest::Method::POST, "calls/reset", None).await;
    assert_eq!(api.control(reqwest::Method::GET, "calls", None).await["total"], 0);
    let (status, _) = api
        .call(
            reqwest::Method::POST,
            format!("{}_sim/faults", api.root),
            Some(json!({"method": "nope.get", "status": 500})),
        )
        .await;
    assert_eq!(status, 400);
    sim.shutdown().await;
}

#[tokio::test]
async fn templates_zonal_migs_operations_and_state() {
    let (sim, api) = start(1.0).await;
    // A template that was never loaded is not found, unless the simulator is told to serve defaults.
    let (status, v) = api.get("projects/p/regions/us-central1/instanceTemplates/anything").await;
    assert_eq!(status, 404, "{v}");
    assert_google_error(&v, 404, "notFound", "projects/p/regions/us-central1/instanceTemplates/anything");
    api.control(reqwest::Method::POST, "templates/defaults", Some(json!({"serve": true}))).await;
    let (status, t) = api.get("projects/p/regions/us-central1/instanceTemplates/anything").await;
    assert_eq!(status, 200, "{t}");
    let s = &t["properties"]["scheduling"];
    assert_eq!(
        (s["provisioningModel"].as_str(), s["instanceTerminationAction"].as_str()),
        (Some("FLEX_START"), Some("DELETE"))
    );
    assert_eq!(
        (s["onHostMaintenance"].as_str(), s["automaticRestart"].as_bool()),
        (Some("TERMINATE"), Some(false))
    );
    let spot = json!({"name": "spot", "properties": {"scheduling": {"provisioningModel": "SPOT"}, "labels": {"env": "test"}}});
    api.control(reqwest::Method::POST, "templates", Some(spot)).await;
    let (_, t) = api.get("projects/p/global/instanceTemplates/spot").await;
    assert_eq!(t["properties"]["scheduling"]["provisioningModel"], "SPOT");
    let labelled = json!({"name": "labelled", "properties": {"scheduling": {"provisioningModel": "FLEX_START"}, "labels": {"env": "test"}}});
    api.control(reqwest::Method::POST, "templates", Some(labelled)).await;

    // A zonal MIG and zonal resize request, with zonal operations.
    let mut body = mig_body("hpc-z");
    body.as_object_mut().unwrap().remove("distributionPolicy");
    body["versions"][0]["instanceTemplate"] = json!("projects/p/global/instanceTemplates/labelled");
    let (status, op) = api.post(&format!("{ZONE}/instanceGroupManagers"), body).await;
    assert_eq!(status, 200, "{op}");
    assert!(op["zone"].as_str().unwrap().ends_with("/zones/us-central1-a"));
    let (status, got) = api.get(&format!("{ZONE}/operations/{}", op["name"].as_str().unwrap())).await;
    assert_eq!(status, 200, "{got}");
    api.wait(&op).await;
    let body = json!({"name": "rr", "resizeBy": 2, "requestedRunDuration": {"seconds": "600"}});
    let (status, op) = api.post(&format!("{ZONE}/instanceGroupManagers/hpc-z/resizeRequests"), body).await;
    assert_eq!(status, 200, "{op}");
    api.wait(&op).await;
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (_, rr) = api.get(&format!("{ZONE}/instanceGroupManagers/hpc-z/resizeRequests/rr")).await;
        if rr["state"] == "SUCCEEDED" {
            break;
        }
        assert!(Instant::now() < deadline, "{rr}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (_, v) = api.get(&format!("{ZONE}/instances?filter=labels.env%20%3D%20%22test%22")).await;
    assert_eq!(v["items"].as_array().unwrap().len(), 2, "{v}");
    let (status, _) = api.get(&format!("{REGION}/operations/operation-nope")).await;
    assert_eq!(status, 404);

    let state = api.control(reqwest::Method::GET, "state", None).await;
    assert_eq!(state["migs"][0]["name"], "hpc-z");
    assert_eq!(state["migs"][0]["resizeRequests"][0]["state"], "SUCCEEDED");
    assert_eq!(state["instances"].as_array().unwrap().len(), 2);
    assert!(state["operations"].as_array().unwrap().len() >= 2);
    sim.shutdown().await;
}

/// The binary: prints its address, runs boot and stop commands, exits on SIGTERM.
#[tokio::test]
async fn binary_runs_boot_and_stop_commands() {
    use tokio::io::AsyncBufReadExt;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_slurm-dws-sim"))
        .args(["--listen", "127.0.0.1:0", "--time-scale", "300"])
        .args(["--boot-cmd", &format!("touch {d}/{{name}}")])
        .args(["--stop-cmd", &format!("rm {d}/{{name}}")])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next_line().await.unwrap().unwrap();
    let addr = first.strip_prefix("listening on ").expect("first line names the address");
    let api = Api {
        http: reqwest::Client::new(),
        base: format!("http://{addr}/compute/v1/"),
        root: format!("http://{addr}/"),
    };
    api.insert_mig("hpc-a3u-g1").await;
    api.insert_request("hpc-a3u-g1", "rr1", &["hpc-a3u-0", "hpc-a3u-1"], "600").await;
    api.until_state("hpc-a3u-g1", "rr1", "SUCCEEDED").await;
    wait_for_files(dir.path(), true).await;
    // The run duration (600 s at time scale 300) ends after two seconds: the stop command removes the files.
    wait_for_files(dir.path(), false).await;
    let pid = nix::unistd::Pid::from_raw(child.id().unwrap() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let status =
        tokio::time::timeout(Duration::from_secs(5), child.wait()).await.expect("exits on SIGTERM").unwrap();
    assert!(status.success(), "{status}");
}

/// The binary names itself as installed: `slurm-dws-sim --version`.
#[test]
fn binary_version_names_the_binary() {
    let out =
        std::process::Command::new(env!("CARGO_BIN_EXE_slurm-dws-sim")).arg("--version").output().unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("slurm-dws-sim {}\n", env!("CARGO_PKG_VERSION"))
    );
}

async fn wait_for_files(dir: &std::path::Path, want: bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while dir.join("hpc-a3u-0").exists() != want || dir.join("hpc-a3u-1").exists() != want {
        assert!(Instant::now() < deadline, "boot/stop commands did not run (want files: {want})");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn quota_failures_carry_quota_info_and_operations_can_be_slow() {
    let (sim, api) = start(1.0).await;
    api.control(reqwest::Method::POST, "latency", Some(json!({"operation_ms": 600}))).await;
    let t = Instant::now();
    let (_, op) = api.post(&format!("{REGION}/instanceGroupManagers"), mig_body("hpc-a3u-g1")).await;
    let (_, got) = api.get(&format!("{REGION}/operations/{}", op["name"].as_str().unwrap())).await;
    assert_eq!(got["status"], "RUNNING");
    api.wait(&op).await;
    assert!(t.elapsed() >= Duration::from_millis(600));
    api.control(reqwest::Method::POST, "latency", Some(json!({"operation_ms": 100}))).await;

    let fail = json!({"code": "QUOTA_EXCEEDED", "message": "Quota 'NVIDIA_H200_GPUS' exceeded. Limit: 8.0 in region us-central1."});
    api.control(reqwest::Method::POST, "capacity", Some(json!({"match": "hpc-", "fail": fail}))).await;
    api.insert_request("hpc-a3u-g1", "rr1", &["hpc-a3u-0"], "3600").await;
    let failed = api.until_state("hpc-a3u-g1", "rr1", "FAILED").await;
    let e = &failed["status"]["error"]["errors"][0];
    assert_eq!(e["code"], "QUOTA_EXCEEDED", "{failed}");
    assert!(e["errorDetails"][0]["quotaInfo"]["metricName"].is_string(), "{failed}");
    // A rule whose error would not fit GCE's schema is refused.
    let bad = json!({"match": "", "fail": {"code": "X", "errorDetails": [{"quota": 1}]}});
    let (status, _) = api.call(reqwest::Method::POST, format!("{}_sim/capacity", api.root), Some(bad)).await;
    assert_eq!(status, 400);
    sim.shutdown().await;
}
