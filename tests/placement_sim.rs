//! Workload policies through the daemon and the simulator: what GCE refuses anyway (a policy
//! missing, in another region, in use) is a typed failure with its own event and backoff, never a
//! loop; an owned policy is deleted once its nodeset is gone, and never while a MIG uses it; a spot
//! A4X nodeset with an accelerator topology gets its VMs in one NVLink domain, and one without is
//! refused by GCE at the MIG insert, once.
// These worlds run the real daemon and wait for it in real time.
#![allow(clippy::disallowed_methods)]

mod common;
use common::*;
use serde_json::{json, Value};
use std::time::Duration;

/// An A3 Ultra DWS Flex Start template named `name` (workload policies are for GPU families).
async fn a3_ultra_template(w: &World, name: &str) {
    w.sim_post(
        "templates",
        json!({"name": name, "properties": {"machineType": "a3-ultragpu-8g",
            "scheduling": {"provisioningModel": "FLEX_START", "instanceTerminationAction": "DELETE",
                "onHostMaintenance": "TERMINATE", "automaticRestart": false},
            "reservationAffinity": {"consumeReservationType": "NO_RESERVATION"}}}),
    )
    .await;
}

fn events(w: &World, kind: &str) -> Vec<Value> {
    w.events_of(kind)
}

/// Whether GCE has the policy (`resourcePolicies.get`).
async fn policy_exists(w: &World, name: &str) -> bool {
    let base = w.sim_url.trim_end_matches('/');
    let r = reqwest::get(format!("{base}/projects/test-project/regions/us-central1/resourcePolicies/{name}"))
        .await
        .unwrap();
    r.status().is_success()
}

/// A MIG naming a policy that does not exist (a policy of another region is refused by the config
/// already; GCE's answer to one is table-tested in `gce::policy_error`): the request fails once
/// with the failure's code, a `policy_refused` event and a placement backoff;
/// the MIG insert is not sent again while the backoff lasts, and a resume then is answered at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_policy_fails_the_request_once_and_backs_off() {
    let missing = "\n[nodeset.placement]\nworkload_policy = \"projects/test-project/regions/us-central1/resourcePolicies/nope\"\n";
    let mut w = World::new(&[("a", 0, 4, missing)], "backoff_initial = 60").await;
    a3_ultra_template(&w, "a-flex").await;
    w.healthy_slurm();
    w.start_daemon();
    w.resume_for_job(11, "hpc-a-[0-1]");
    w.wait_for("a policy_refused event", 30, || (!events(&w, "policy_refused").is_empty()).then_some(()));
    let refused = events(&w, "policy_refused");
    let text = Value::Array(refused.clone()).to_string();
    assert!(text.contains("nodeset a") && text.contains("WORKLOAD_POLICY_MISSING"), "{text}");
    let backoffs = events(&w, "backoff");
    assert_eq!(backoffs.len(), 1, "{backoffs:?}");
    assert!(
        backoffs.iter().all(|b| b["message"].as_str().unwrap().contains("placement backoff")),
        "{backoffs:?}"
    );
    // No loop: over several passes, one MIG insert per nodeset and one event each.
    let inserts = count(&w.sim_calls().await, "regionInstanceGroupManagers.insert");
    assert_eq!(inserts, 1, "{}", w.sim_calls().await);
    let it = w.iteration();
    w.wait_passes(it + 4, 30);
    assert_eq!(count(&w.sim_calls().await, "regionInstanceGroupManagers.insert"), inserts);
    assert_eq!(events(&w, "policy_refused").len(), 1);
    // A resume during the backoff is answered at once, without a call.
    w.resume_for_job(13, "hpc-a-2");
    w.wait_for("the resume refused by the backoff", 20, || {
        w.cli_json(&["events", "--node", "hpc-a-2"]).to_string().contains("placement backoff").then_some(())
    });
    assert_eq!(count(&w.sim_calls().await, "regionInstanceGroupManagers.insert"), inserts);
    let status = w.cli_json(&["status"]);
    assert!(status.to_string().contains("placement backoff"), "{status}");
}

/// An owned policy outlives its nodeset while a MIG (here one slurm-dws does not own, so the
/// planner cannot see it) uses it: GCE refuses the delete, the daemon records `policy_in_use` and
/// waits with a growing backoff (a few deletes, not one a pass); once that MIG is gone the policy
/// is deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owned_policy_is_deleted_when_its_nodeset_is_gone_and_never_while_in_use() {
    let placement = "\n[nodeset.placement]\nmax_topology_distance = \"BLOCK\"\n";
    let mut w = World::new(&[("a", 0, 4, placement), ("b", 0, 4, "")], "").await;
    a3_ultra_template(&w, "a-flex").await;
    w.healthy_slurm();
    w.start_daemon();
    // A job on `a`: the policy first, then the MIG carrying it, its VMs placed.
    w.resume_for_job(11, "hpc-a-[0-1]");
    let placed = |s: &Value| {
        s["instances"].as_array().map_or(0, |a| {
            a.iter().filter(|vm| vm["resourceStatus"]["physicalHostTopology"]["block"].is_string()).count()
        })
    };
    let state = w.wait_for("the 2 VMs placed", 30, || {
        let s = futures_block(w.sim_state());
        (placed(&s) == 2).then_some(s)
    });
    let url = "projects/test-project/regions/us-central1/resourcePolicies/hpc-a-wp";
    assert!(state["migs"].to_string().contains(url), "the MIG carries the policy: {}", state["migs"]);
    // Another MIG, not slurm-dws's, uses the policy too.
    let gce = reqwest::Client::new();
    let base = w.sim_url.trim_end_matches('/').to_string();
    let r = gce
        .post(format!("{base}/projects/test-project/regions/us-central1/instanceGroupManagers"))
        .json(&json!({"name": "someone-elses", "baseInstanceName": "someone-elses",
            "instanceTemplate": "projects/test-project/regions/us-central1/instanceTemplates/a-flex",
            "targetSize": 0,
            "distributionPolicy": {"zones": [{"zone": "zones/us-central1-a"}], "targetShape": "ANY_SINGLE_ZONE"},
            "updatePolicy": {"instanceRedistributionType": "NONE"},
            "resourcePolicies": {"workloadPolicy": url}}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.text().await.unwrap());
    // The job ends: its VMs and MIG go.
    assert!(w.hook("suspend", "hpc-a-[0-1]", None).status.success());
    w.wait_for("our MIG collected", 60, || {
        futures_block(w.sim_migs()).iter().all(|m| m["name"] == "someone-elses").then_some(())
    });
    // Nodeset `a` leaves the config; the daemon restarts on it.
    w.stop_daemon();
    let text = std::fs::read_to_string(&w.config).unwrap();
    let start = text.find("\n[[nodeset]]\nname = \"a\"").unwrap();
    let end = start + 1 + text[start + 1..].find("\n[[nodeset]]").unwrap();
    std::fs::write(&w.config, format!("{}{}", &text[..start], &text[end..])).unwrap();
    w.start_daemon();
    w.wait_for("policy_in_use", 30, || (!events(&w, "policy_in_use").is_empty()).then_some(()));
    let e = &events(&w, "policy_in_use")[0];
    assert!(e["message"].as_str().unwrap().contains("WORKLOAD_POLICY_IN_USE"), "{e}");
    // It waits: over 12 s of 2 s passes, a growing backoff (2, 4, 8 s) sends at most 4 deletes.
    std::thread::sleep(Duration::from_secs(12));
    let deletes = count(&w.sim_calls().await, "resourcePolicies.delete");
    assert!((1..=4).contains(&deletes), "{deletes} deletes in 12 s: {}", w.sim_calls().await);
    assert!(policy_exists(&w, "hpc-a-wp").await, "still there while in use");
    assert!(events(&w, "gce_step_gave_up").is_empty());
    // The other MIG goes: the policy is deleted.
    let r = gce
        .delete(format!(
            "{base}/projects/test-project/regions/us-central1/instanceGroupManagers/someone-elses"
        ))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    w.wait_for("the policy deleted", 90, || (!futures_block(policy_exists(&w, "hpc-a-wp"))).then_some(()));
}

fn futures_block<F: std::future::Future>(f: F) -> F::Output {
    let rt = tokio::runtime::Handle::current();
    tokio::task::block_in_place(|| rt.block_on(f))
}

/// A world with one spot A4X nodeset `a4x` (template `a4x-spot`: a4x-highgpu-4g, SPOT, deleted
/// on preemption) with `placement` after its tables, the way an admin writes it.
async fn a4x_spot_world(dynamic: u32, placement: &str) -> World {
    let w = World::new(&[("a4x", 0, dynamic, placement)], "").await;
    let text = std::fs::read_to_string(&w.config).unwrap();
    let line = "instanceTemplates/a4x-flex\"\n";
    assert!(text.contains(line), "{text}");
    let text = text.replace(line, "instanceTemplates/a4x-spot\"\nprovisioning_model = \"spot\"\n");
    std::fs::write(&w.config, text).unwrap();
    w.sim_post(
        "templates",
        json!({"name": "a4x-spot", "properties": {"machineType": "a4x-highgpu-4g",
            "scheduling": {"provisioningModel": "SPOT", "instanceTerminationAction": "DELETE",
                "onHostMaintenance": "TERMINATE", "automaticRestart": false}}}),
    )
    .await;
    w
}

/// The VM `name` as the simulator shows it (`instances.get`'s shape).
fn sim_vm(state: &Value, name: &str) -> Value {
    state["instances"]
        .as_array()
        .and_then(|a| a.iter().find(|vm| vm["name"] == name))
        .cloned()
        .unwrap_or(Value::Null)
}

/// A spot A4X nodeset with `accelerator_topology = "1x72"`: slurm-dws creates its own workload
/// policy (HIGH_THROUGHPUT, acceleratorTopology 1x72, provably its own), then the job's MIG carrying
/// it, then the VMs by name; they come up SPOT, all in one NVLink domain (one block and subblock of
/// `physicalHostTopology`), the nodes are up, and Slurm's tree topology file puts them under that
/// subblock's switch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spot_a4x_nodeset_with_an_accelerator_topology_is_provisioned_in_one_nvlink_domain() {
    let mut w = a4x_spot_world(8, "\n[nodeset.placement]\naccelerator_topology = \"1x72\"\n").await;
    w.healthy_slurm();
    // Slurm's tree topology kept from the VMs' physical hosts (the fake Slurm takes the reconfigure).
    let topology_file = w.path().join("topology.conf");
    let text = std::fs::read_to_string(&w.config).unwrap().replace(
        "command_timeout = 5\n",
        &format!(
            "command_timeout = 5\ntopology = \"tree\"\ntopology_file = \"{}\"\n",
            topology_file.display()
        ),
    );
    std::fs::write(&w.config, text).unwrap();
    w.start_daemon();
    let nodes = ["hpc-a4x-0", "hpc-a4x-1", "hpc-a4x-2", "hpc-a4x-3"];
    w.resume_for_job(41, "hpc-a4x-[0-3]");
    w.wait_for("the four A4X nodes up", 40, || {
        let s = w.node_states();
        nodes.iter().all(|n| s.get(*n).map(String::as_str) == Some("up")).then_some(())
    });
    let wanted: std::collections::BTreeSet<String> = nodes.iter().map(|n| n.to_string()).collect();
    wait_converged(&w, &wanted, 30).await;

    // The policy slurm-dws owns: what GCE holds.
    let base = w.sim_url.trim_end_matches('/');
    let policy: Value =
        reqwest::get(format!("{base}/projects/test-project/regions/us-central1/resourcePolicies/hpc-a4x-wp"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
    assert_eq!(policy["workloadPolicy"]["type"], "HIGH_THROUGHPUT", "{policy}");
    assert_eq!(policy["workloadPolicy"]["acceleratorTopology"], "1x72", "{policy}");
    assert!(policy["workloadPolicy"].get("maxTopologyDistance").is_none(), "{policy}");
    let description = policy["description"].as_str().unwrap_or_default();
    assert!(description.contains("slurm-dws/v1 cluster=hpc nodeset=a4x"), "{policy}");

    // One MIG, carrying the policy.
    let state = w.sim_state().await;
    let migs = state["migs"].as_array().unwrap();
    assert_eq!(migs.len(), 1, "{migs:?}");
    let url = "projects/test-project/regions/us-central1/resourcePolicies/hpc-a4x-wp";
    let attached = migs[0]["resourcePolicies"]["workloadPolicy"].as_str().unwrap_or_default();
    assert!(attached.ends_with(url), "the MIG carries the policy: {}", migs[0]);

    // The VMs: SPOT, no run duration, one block and one subblock (the NVLink domain), four hosts.
    let mut blocks = std::collections::BTreeSet::new();
    let mut subblocks = std::collections::BTreeSet::new();
    let mut hosts = std::collections::BTreeSet::new();
    for n in nodes {
        let vm = sim_vm(&state, n);
        assert_eq!(vm["scheduling"]["provisioningModel"], "SPOT", "{vm}");
        assert!(vm["scheduling"].get("maxRunDuration").is_none(), "{vm}");
        let t = &vm["resourceStatus"]["physicalHostTopology"];
        blocks.insert(t["block"].as_str().unwrap_or_else(|| panic!("{n} has no block: {vm}")).to_string());
        subblocks.insert(t["subblock"].as_str().expect("a subblock").to_string());
        hosts.insert(t["host"].as_str().expect("a host").to_string());
    }
    assert_eq!((blocks.len(), subblocks.len(), hosts.len()), (1, 1, 4), "{blocks:?} {subblocks:?} {hosts:?}");

    // slurm-dws sees where they are: the tree topology file puts the four nodes under one switch,
    // that subblock, under the block's switch.
    let (block, subblock) = (blocks.first().unwrap(), subblocks.first().unwrap());
    let file = w.wait_for("the topology file names the subblock", 30, || {
        let f = std::fs::read_to_string(&topology_file).ok()?;
        f.contains(&format!("SwitchName={subblock} Nodes=hpc-a4x-[0-3]\n")).then_some(f)
    });
    assert!(file.contains(&format!("SwitchName={block} Switches={subblock}\n")), "{file}");
    // GCE calls: one policy, one MIG, one createInstances, no resize request; nothing refused.
    let calls = w.sim_calls().await;
    assert_eq!(count(&calls, "resourcePolicies.insert"), 1, "{calls}");
    assert_eq!(count(&calls, "regionInstanceGroupManagers.insert"), 1, "{calls}");
    assert_eq!(count(&calls, "regionInstanceGroupManagers.createInstances"), 1, "{calls}");
    assert_eq!(count(&calls, "regionInstanceGroupManagerResizeRequests.insert"), 0, "{calls}");
    for kind in ["policy_refused", "request_failed", "backoff", "nodeset_refused", "gce_refused"] {
        assert!(events(&w, kind).is_empty(), "{kind}: {:?}", events(&w, kind));
    }
}

/// The same nodeset without `accelerator_topology`, started anyway (`check-config --online`
/// refuses it: tests/cli_check_config.rs): GCE refuses the MIG insert (an A4X MIG needs a policy
/// with an acceleratorTopology), the job's request fails once with GCE's words, the nodeset backs off
/// and its nodes are powered down and usable; the insert is not sent again while the backoff lasts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spot_a4x_nodeset_without_an_accelerator_topology_fails_visibly_once() {
    let mut w = a4x_spot_world(8, "").await;
    w.healthy_slurm();
    w.start_daemon();
    w.resume_for_job(42, "hpc-a4x-[0-1]");
    w.wait_for("the request failed", 30, || (!events(&w, "request_failed").is_empty()).then_some(()));
    let failed = events(&w, "request_failed");
    assert_eq!(failed.len(), 1, "{failed:?}");
    let message = failed[0]["message"].as_str().unwrap();
    assert!(
        message.contains("require a workload policy with acceleratorTopology")
            && message.contains("a4x-highgpu-4g"),
        "{message}"
    );
    let backoffs = events(&w, "backoff");
    assert_eq!(backoffs.len(), 1, "{backoffs:?}");
    assert!(backoffs[0]["message"].as_str().unwrap().contains("error backoff"), "{backoffs:?}");
    // Not a policy failure: there is no policy to be missing, in use or in another region.
    assert!(events(&w, "policy_refused").is_empty());
    w.wait_for("the nodes powered down", 20, || {
        let s = w.node_states();
        ["hpc-a4x-0", "hpc-a4x-1"]
            .iter()
            .all(|n| s.get(*n).map(String::as_str) == Some("powered_down"))
            .then_some(())
    });
    // The failure is on the nodes, in GCE's words.
    let story = String::from_utf8_lossy(&w.cli(&["explain", "hpc-a4x-0"]).stdout).to_string();
    assert!(story.contains("acceleratorTopology"), "{story}");
    // No loop: over several passes one MIG insert, no policy, no VM asked for.
    let it = w.iteration();
    w.wait_passes(it + 4, 30);
    let calls = w.sim_calls().await;
    assert_eq!(count(&calls, "regionInstanceGroupManagers.insert"), 1, "{calls}");
    assert_eq!(count(&calls, "resourcePolicies.insert"), 0, "{calls}");
    assert_eq!(count(&calls, "regionInstanceGroupManagers.createInstances"), 0, "{calls}");
    assert_eq!(events(&w, "request_failed").len(), 1);
    assert!(w.sim_vms().await.is_empty());
    let status = w.cli_json(&["status"]);
    assert!(status.to_string().contains("error backoff"), "{status}");
}
