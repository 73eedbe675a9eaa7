//! Compact placement and topology-aware scheduling end to end, with the real slurmctld: a 4-node job
//! on an A3 Ultra nodeset with an owned HIGH_THROUGHPUT policy gets one MIG carrying the policy, its
//! VMs in one GCE block; slurm-dws writes the topology file naming that block and Slurm shows it
//! (`scontrol show topology`). 22.05: topology/tree (topology.conf); 24.11: topology/block
//! (topology.conf); 26.05: topology/block (topology.yaml). Needs root and the
//! Slurms of tests/e2e.rs; outside CI the tests say so and skip, under CI=true they fail.

// Real slurmctld, slurmds and jobs: these wait for them in real time.
#![allow(clippy::disallowed_methods)]

use devcluster::stack::{Stack, StackNodeset, StackSpec};
use devcluster::wait::poll;
use devcluster::SlurmGeneration;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

#[test]
fn slurm_22_05_tree() {
    four_node_job_lands_in_one_block_and_slurm_knows_it(SlurmGeneration::Bookworm, "tree");
}

#[test]
fn slurm_24_11_block() {
    four_node_job_lands_in_one_block_and_slurm_knows_it(SlurmGeneration::Trixie, "block");
}

#[test]
fn slurm_26_05_block() {
    four_node_job_lands_in_one_block_and_slurm_knows_it(SlurmGeneration::Forky, "block");
}

/// How often the waits below poll.
const POLL: Duration = Duration::from_millis(250);

fn four_node_job_lands_in_one_block_and_slurm_knows_it(slurm: SlurmGeneration, kind: &str) {
    if !slurm.available_for_tests("topology end-to-end tests") {
        return;
    }
    let bin = env!("CARGO_BIN_EXE_slurm-dws");
    let mut ns = StackNodeset::new("gpu", 0, 6);
    ns.dws_flex = "\n[nodeset.placement]\nmax_topology_distance = \"BLOCK\"\n".into();
    let spec = StackSpec {
        reconcile: "mig_gc_grace = 5".into(),
        slurm_table: format!("topology = \"{kind}\""),
        slurm,
        ..StackSpec::new(bin, devcluster::sim_bin(bin.as_ref()), vec![ns])
    };
    let mut s = Stack::start(spec).unwrap();
    // The nodeset's template is an A3 Ultra flex-start one (workload policies are for GPU families),
    // and the zone has 4 blocks of 2 subblocks of 4 hosts.
    let mut t = devcluster::stack::flex_template("gpu-flex");
    t["properties"]["machineType"] = json!("a3-ultragpu-8g");
    s.sim_post("templates", &t);
    s.sim_post(
        "zones/us-central1-a/topology",
        &json!({"blocks": 4, "subblocks_per_block": 2, "hosts_per_subblock": 4}),
    );

    // The daemon writes the file at once (every node unplaced); then Slurm is told to use it.
    let yaml = slurm.release() >= (25, 5);
    let file = s.cluster.conf_path().with_file_name(if yaml { "topology.yaml" } else { "topology.conf" });
    poll("the topology file", 60, POLL, |m| m, || file.exists().then_some(()));
    let mut conf = std::fs::read_to_string(s.cluster.conf_path()).unwrap();
    conf.push_str(&format!("TopologyPlugin=topology/{kind}\n"));
    std::fs::write(s.cluster.conf_path(), conf).unwrap();
    s.cluster.restart_slurmctld().unwrap();

    let out = s.cluster.dir().join("jobs").join("topo.out");
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    let job = s
        .cluster
        .sbatch(&[
            "-N4",
            "--time=10",
            "-p",
            "gpu",
            "-o",
            out.to_str().unwrap(),
            "--wrap",
            "srun hostname; sleep 100",
        ])
        .unwrap();
    poll(
        "the 4-node job RUNNING",
        180,
        POLL,
        |m| m,
        || (s.cluster.job_state(job).as_deref() == Some("RUNNING")).then_some(()),
    );

    let calls = s.sim_get("calls");
    assert_eq!(calls["by_method"]["resourcePolicies.insert"], 1, "{calls}");
    assert_eq!(calls["by_method"]["regionInstanceGroupManagers.insert"], 1, "one MIG: {calls}");
    let state = s.sim_get("state");
    let migs = state["migs"].as_array().cloned().unwrap_or_default();
    eprintln!("[topology] MIGs: {}", Value::Array(migs.clone()));
    let policy = "projects/demo-project/regions/us-central1/resourcePolicies/hpc-gpu-wp";
    assert!(migs.iter().any(|m| m.to_string().contains(policy)), "the MIG carries the policy: {migs:?}");

    // The VMs' blocks, from GCE: one.
    let instances = state["instances"].as_array().cloned().unwrap_or_default();
    let blocks: BTreeSet<String> = instances
        .iter()
        .filter_map(|vm| vm["resourceStatus"]["physicalHostTopology"]["block"].as_str().map(str::to_string))
        .collect();
    assert_eq!(instances.len(), 4, "{instances:?}");
    assert_eq!(blocks.len(), 1, "the job's VMs are in one block: {blocks:?}");
    let block = blocks.into_iter().next().unwrap();

    // The file names the block, with the job's nodes in it; Slurm shows it.
    let text = poll(
        "the topology file naming the block",
        120,
        POLL,
        |m| m,
        || {
            let t = std::fs::read_to_string(&file).unwrap_or_default();
            t.contains(&block).then_some(t)
        },
    );
    eprintln!("[topology] {}:\n{text}", file.display());
    let deadline = Instant::now() + Duration::from_secs(120);
    let shown = loop {
        let o = match s.cluster.scontrol(&["show", "topology"]) {
            Ok(o) => o,
            Err(e) => format!("{e}"),
        };
        if o.contains(&block) {
            break o;
        }
        assert!(
            Instant::now() < deadline,
            "scontrol show topology never named {block}: {o}\nslurmctld: {}\ndaemon: {}",
            s.cluster.slurmctld_log_tail(30),
            s.daemon_log().lines().filter(|l| l.contains("topology")).take(5).collect::<Vec<_>>().join("\n")
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    eprintln!("[topology] scontrol show topology:\n{shown}");

    // slurm-dws says the same: each of the job's nodes has the block in `topology`, and `explain`
    // names it.
    let nodes = poll(
        "the job's nodes with their physical host",
        60,
        POLL,
        |m| m,
        || {
            let nodes = s.cli_json(&["nodes"]);
            let placed: Vec<(String, String)> = nodes
                .as_array()?
                .iter()
                .filter_map(|n| Some((n["name"].as_str()?.to_string(), n["topology"].as_str()?.to_string())))
                .collect();
            (placed.len() == 4).then_some(placed)
        },
    );
    for (name, topology) in &nodes {
        assert_eq!(topology.split('/').nth(1), Some(block.as_str()), "{name}: {topology}");
    }
    let story = s.cli(&["explain", &nodes[0].0]).split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(story.contains(&format!("Its VM runs in block {block}")), "{story}");
    s.kill_daemon();
}
