//! Nodesets in several regions, through the real daemon and the simulator over HTTP: a nodeset in a
//! second region runs its MIGs there, and a region that fails degrades only its own nodesets.

mod common;

use common::*;
use serde_json::Value;

/// A world with nodeset `a` in gcp.region (us-central1) and `b` in us-east5.
async fn two_regions() -> World {
    let w = World::new(&[("a", 0, 8, ""), ("b", 0, 8, "")], "").await;
    let text = std::fs::read_to_string(&w.config).unwrap();
    let text = text.replace(
        "instance_template = \"projects/test-project/regions/us-central1/instanceTemplates/b-flex\"\nzones = [\"us-central1-a\"]",
        "region = \"us-east5\"\ninstance_template = \"projects/test-project/regions/us-east5/instanceTemplates/b-flex\"\nzones = [\"us-east5-b\"]",
    );
    assert!(text.contains("us-east5-b"), "{text}");
    std::fs::write(&w.config, text).unwrap();
    w
}

fn up(w: &World, nodes: &[&str]) -> bool {
    let states = w.node_states();
    nodes.iter().all(|n| states.get(*n).map(String::as_str) == Some("up"))
}

fn mig_regions(w: &World) -> Vec<(String, String)> {
    let migs = w.cli_json(&["migs"]);
    migs.as_array()
        .unwrap()
        .iter()
        .map(|m| (m["nodeset"].as_str().unwrap().to_string(), m["region"].as_str().unwrap().to_string()))
        .collect()
}

fn sim_mig_links(migs: &[Value]) -> String {
    migs.iter().map(|m| m.to_string()).collect::<Vec<_>>().join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nodeset_in_a_second_region_runs_there_and_a_failing_region_holds_back_only_its_own() {
    let mut w = two_regions().await;
    let rf = resume_file(&[(7, "hpc-a-[0-1]"), (8, "hpc-b-[0-1]")], "hpc-a-[0-1],hpc-b-[0-1]");
    assert!(w.hook("resume", "hpc-a-[0-1],hpc-b-[0-1]", Some(&rf)).status.success());
    w.start_daemon();
    w.wait_for("both nodesets up", 60, || {
        up(&w, &["hpc-a-0", "hpc-a-1", "hpc-b-0", "hpc-b-1"]).then_some(())
    });

    // b's MIG is in us-east5, its VMs in us-east5-b; a's in us-central1.
    let migs = w.sim_migs().await;
    let all = sim_mig_links(&migs);
    assert!(all.contains("regions/us-east5/instanceGroupManagers/hpc-b-"), "{all}");
    assert!(all.contains("regions/us-central1/instanceGroupManagers/hpc-a-"), "{all}");
    assert!(all.contains("zones/us-east5-b"), "{all}");
    let mut regions = mig_regions(&w);
    regions.sort();
    assert_eq!(
        regions,
        vec![("a".to_string(), "us-central1".to_string()), ("b".to_string(), "us-east5".to_string())],
        "migs --json says each MIG's region"
    );

    // us-east5 fails: a goes on, b waits, nothing of b is judged gone.
    w.sim_post("regions/us-east5/unreachable", serde_json::json!({})).await;
    let rf = resume_file(&[(9, "hpc-a-2"), (10, "hpc-b-2")], "hpc-a-2,hpc-b-2");
    assert!(w.hook("resume", "hpc-a-2,hpc-b-2", Some(&rf)).status.success());
    w.wait_for("a-2 up while us-east5 fails", 60, || up(&w, &["hpc-a-2"]).then_some(()));
    w.wait_passes(2, 30);
    let states = w.node_states();
    assert_ne!(states["hpc-b-2"], "up", "{states:?}");
    assert!(up(&w, &["hpc-b-0", "hpc-b-1"]), "b's running nodes stay up: {states:?}");
    let status = w.cli_json(&["status"]);
    assert!(status.to_string().contains("listing MIGs in us-east5"), "{status}");
    let migs = w.cli_json(&["migs"]);
    assert!(
        migs.as_array().unwrap().iter().all(|m| m["state"] != "deleted"),
        "no MIG of the failing region is judged gone: {migs}"
    );

    // Back: b-2 comes up in us-east5.
    w.sim_delete("regions/us-east5/unreachable").await;
    w.wait_for("b-2 up once us-east5 answers", 60, || up(&w, &["hpc-b-2"]).then_some(()));
    let vms = w.sim_state().await["instances"].to_string();
    assert!(vms.contains("us-east5-b"), "{vms}");
}
