//! Workload policies and physical host topology over raw HTTP: policies inserted, read, refused for
//! the machine families and provisioning models GCE refuses (and an A4X MIG without one), never deleted while a MIG uses one; a
//! MIG with a policy gets the VMs of a request in one block, one without spreads them; a request
//! that cannot be placed within its policy's distance waits like a stockout.
// Test rig: waits for the simulator's ticker in real time.
#![allow(clippy::disallowed_methods)]

mod common;
use common::*;
use reqwest::Method;
use std::collections::BTreeSet;

const POLICY: &str = "projects/p/regions/us-central1/resourcePolicies/hpc-a3u-wp";

async fn insert_policy(api: &Api, name: &str, wp: Value) -> Value {
    let (status, op) = api
        .post(&format!("{REGION}/resourcePolicies?requestId=6d0c7a1e-1b7e-4c1e-9a53-{:012x}", name.len()), json!({
            "name": name, "description": "slurm-dws/v1 cluster=hpc nodeset=a3u workload-policy", "workloadPolicy": wp}))
        .await;
    assert_eq!(status, 200, "{op}");
    api.wait(&op).await
}

async fn template(api: &Api, name: &str, machine_type: &str, model: &str) {
    let t = json!({"name": name, "properties": {"machineType": machine_type,
        "scheduling": {"provisioningModel": model, "instanceTerminationAction": "DELETE"}}});
    api.control(Method::POST, "templates", Some(t)).await;
}

fn mig_with(name: &str, template: &str, policy: &str) -> Value {
    let mut b = mig_body(name);
    b["versions"] = json!([{"instanceTemplate": format!("projects/p/global/instanceTemplates/{template}")}]);
    b["resourcePolicies"] = json!({"workloadPolicy": policy});
    b
}

async fn blocks_of(api: &Api, names: &[&str]) -> BTreeSet<String> {
    let vms = api.instances().await;
    names
        .iter()
        .map(|n| {
            let vm = vms.iter().find(|v| v["name"] == *n).unwrap_or_else(|| panic!("{n} in {vms:?}"));
            vm["resourceStatus"]["physicalHostTopology"]["block"].as_str().expect("a block").to_string()
        })
        .collect()
}

#[tokio::test]
async fn policies_place_a_request_in_one_block_and_are_never_deleted_in_use() {
    let (sim, api) = start(1.0).await;
    template(&api, "a3u", "a3-ultragpu-8g", "FLEX_START").await;
    let done =
        insert_policy(&api, "hpc-a3u-wp", json!({"type": "HIGH_THROUGHPUT", "maxTopologyDistance": "BLOCK"}))
            .await;
    assert!(done.get("error").is_none(), "{done}");
    let (status, p) = api.get(&format!("{REGION}/resourcePolicies/hpc-a3u-wp")).await;
    assert_eq!(status, 200);
    assert_eq!(p["workloadPolicy"]["maxTopologyDistance"], "BLOCK");
    let (_, list) = api.get(&format!("{REGION}/resourcePolicies")).await;
    assert_eq!(list["items"].as_array().map(Vec::len), Some(1), "{list}");

    // 4 blocks of 2 x 2 hosts: 4 VMs fit in one block only when it is empty.
    api.control(
        Method::POST,
        "zones/us-central1-a/topology",
        Some(json!({"blocks": 4, "subblocks_per_block": 2, "hosts_per_subblock": 2})),
    )
    .await;
    let (status, op) =
        api.post(&format!("{REGION}/instanceGroupManagers"), mig_with("hpc-a3u-t1", "a3u", POLICY)).await;
    assert_eq!(status, 200, "{op}");
    assert!(api.wait(&op).await.get("error").is_none());
    api.insert_request("hpc-a3u-t1", "r1", &["hpc-a3u-0", "hpc-a3u-1", "hpc-a3u-2", "hpc-a3u-3"], "3600")
        .await;
    api.until_state("hpc-a3u-t1", "r1", "SUCCEEDED").await;
    assert_eq!(blocks_of(&api, &["hpc-a3u-0", "hpc-a3u-1", "hpc-a3u-2", "hpc-a3u-3"]).await.len(), 1);

    // Without a policy: spread over the blocks (one host in each of 3 blocks), and no topology
    // reported (GCE shows it for VMs of MIGs with a HIGH_THROUGHPUT policy).
    api.insert_mig("hpc-a3u-t2").await;
    api.insert_request("hpc-a3u-t2", "r1", &["hpc-a3u-4", "hpc-a3u-5", "hpc-a3u-6"], "3600").await;
    api.until_state("hpc-a3u-t2", "r1", "SUCCEEDED").await;
    let vms = api.instances().await;
    assert!(
        vms.iter()
            .filter(|v| v["name"] == "hpc-a3u-4")
            .all(|v| v["resourceStatus"].get("physicalHostTopology").is_none()),
        "{vms:?}"
    );

    // Now no block has 4 free hosts: the next request of 4 waits, like a stockout.
    let (_, op) =
        api.post(&format!("{REGION}/instanceGroupManagers"), mig_with("hpc-a3u-t3", "a3u", POLICY)).await;
    api.wait(&op).await;
    api.insert_request("hpc-a3u-t3", "r1", &["hpc-a3u-7", "hpc-a3u-8", "hpc-a3u-9", "hpc-a3u-10"], "3600")
        .await;
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let rr = api.request("hpc-a3u-t3", "r1").await;
    assert_eq!(rr["state"], "ACCEPTED", "{rr}");
    let attempt = rr["status"]["lastAttempt"]["error"]["errors"][0]["code"].as_str().unwrap_or_default();
    assert!(attempt.contains("RESOURCE_POOL_EXHAUSTED"), "{rr}");

    // In use: refused. Unused (its MIGs gone): deleted.
    let (status, e) = api.delete(&format!("{REGION}/resourcePolicies/hpc-a3u-wp")).await;
    assert_google_error(&e, 400, "resourceInUseByAnotherResource", "hpc-a3u-t1");
    assert_eq!(status, 400);
    for mig in ["hpc-a3u-t1", "hpc-a3u-t3"] {
        let (_, op) = api.delete(&format!("{REGION}/instanceGroupManagers/{mig}")).await;
        api.wait(&op).await;
    }
    let (status, op) = api.delete(&format!("{REGION}/resourcePolicies/hpc-a3u-wp")).await;
    assert_eq!(status, 200, "{op}");
    assert!(api.wait(&op).await.get("error").is_none());
    assert_eq!(api.get(&format!("{REGION}/resourcePolicies/hpc-a3u-wp")).await.0, 404);
    sim.shutdown().await;
}

#[tokio::test]
async fn machine_families_and_provisioning_models_gce_refuses() {
    let (sim, api) = start(1.0).await;
    insert_policy(&api, "d", json!({"type": "HIGH_THROUGHPUT", "maxTopologyDistance": "BLOCK"})).await;
    insert_policy(&api, "a4x", json!({"type": "HIGH_THROUGHPUT", "acceleratorTopology": "1x72"})).await;
    let d = "projects/p/regions/us-central1/resourcePolicies/d";
    let a4x = "projects/p/regions/us-central1/resourcePolicies/a4x";
    for (t, mt, model) in [
        ("n2", "n2-standard-8", "SPOT"),
        ("h4dflex", "h4d-highmem-192", "FLEX_START"),
        ("a4xspot", "a4x-highgpu-4g", "SPOT"),
        ("a4xflex", "a4x-highgpu-4g", "FLEX_START"),
        ("a3uflex", "a3-ultragpu-8g", "FLEX_START"),
        ("h4dspot", "h4d-highmem-192", "SPOT"),
    ] {
        template(&api, t, mt, model).await;
    }
    for (mig, t, policy, ok, words) in [
        ("m-n2", "n2", d, false, "not supported for machine type"),
        ("m-h4dflex", "h4dflex", d, false, "H4D instances with provisioning model FLEX_START"),
        ("m-a4xd", "a4xspot", d, false, "must specify acceleratorTopology"),
        ("m-a4xflex", "a4xflex", a4x, false, "A4X instances with provisioning model FLEX_START"),
        (
            "m-missing",
            "a3uflex",
            "projects/p/regions/us-central1/resourcePolicies/nope",
            false,
            "was not found",
        ),
        ("m-region", "a3uflex", "projects/p/regions/europe-west4/resourcePolicies/d", false, "same region"),
        ("m-a4x", "a4xspot", a4x, true, ""),
        ("m-a3u", "a3uflex", d, true, ""),
        ("m-h4d", "h4dspot", d, true, ""),
    ] {
        let (status, v) =
            api.post(&format!("{REGION}/instanceGroupManagers"), mig_with(mig, t, policy)).await;
        if ok {
            assert_eq!(status, 200, "{mig}: {v}");
        } else {
            assert!(status == 400 || status == 404, "{mig}: {status} {v}");
            assert!(v.to_string().contains(words), "{mig}: {v}");
        }
    }
    // An A4X MIG without any workload policy is refused as well; an A3 Ultra one is not.
    for (mig, t, ok) in [("m-a4x-none", "a4xspot", false), ("m-a3u-none", "a3uflex", true)] {
        let mut b = mig_with(mig, t, "");
        b.as_object_mut().unwrap().remove("resourcePolicies");
        let (status, v) = api.post(&format!("{REGION}/instanceGroupManagers"), b).await;
        if ok {
            assert_eq!(status, 200, "{mig}: {v}");
        } else {
            assert_google_error(&v, 400, "invalid", "require a workload policy with acceleratorTopology");
            assert!(v.to_string().contains("a4x-highgpu-4g"), "{v}");
        }
    }
    // Spot A4X VMs by name land in one subblock (the NVLink domain).
    let (status, op) = api
        .post(&format!("{REGION}/instanceGroupManagers/m-a4x/createInstances?requestId=8d6f1a52-1b7e-4c1e-9a53-0c3f5b1f0a99"),
            json!({"instances": [{"name": "x-0"}, {"name": "x-1"}, {"name": "x-2"}]}))
        .await;
    assert_eq!(status, 200, "{op}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let subblocks: BTreeSet<String> = loop {
        let vms = api.instances().await;
        let subs: Vec<String> = vms
            .iter()
            .filter(|v| v["name"].as_str().unwrap_or_default().starts_with("x-"))
            .filter_map(|v| {
                v["resourceStatus"]["physicalHostTopology"]["subblock"].as_str().map(str::to_string)
            })
            .collect();
        if subs.len() == 3 {
            break subs.into_iter().collect();
        }
        assert!(std::time::Instant::now() < deadline, "{vms:?}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert_eq!(subblocks.len(), 1);
    sim.shutdown().await;
}
