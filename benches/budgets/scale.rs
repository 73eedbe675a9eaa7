//! 10,000 nodes in 1,000 jobs: GCE calls (counted by the simulator), the daemon's peak RSS and CPU per
//! steady pass (a real daemon process), and the pass's planning + store CPU (in this process, on the
//! daemon's own database, with GCE's and Slurm's answers fetched once beforehand).
//!
//! The simulator and the daemon each run as their own process, so neither's CPU or memory is mixed
//! with this one's. Slurm is [`FakeSlurm`]: 22.05-shaped answers for 10,000 nodes.

use crate::fake_slurm::{FakeSlurm, NodeView};
use crate::process::{memory, quiet, task_cpu, Mem, Proc};
use crate::table::{Samples, Table};
use crate::{process_cpu, Ctx};
use anyhow::{anyhow, bail, Result};
use serde_json::Value;
use slurm_dws::config::Config;
use slurm_dws::model::RequestPhase;
use slurm_dws::reconcile::{self, Desired, PlanConfig, Reconciler, Trigger};
use slurm_dws::store::Store;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const NODES: u32 = 10_000;
const PER_JOB: u32 = 10;
const STEADY_PASSES: usize = 10;
const PLAN_ROUNDS: usize = 21;
/// Nodes beyond the 10,000, powered down, that the whole-pass section resumes one at a time.
const SPARES: u32 = 8;

/// Steady passes measured: [`STEADY_PASSES`], or `BENCH_STEADY_PASSES` (longer runs, e.g. to profile
/// the daemon with `perf record -p`).
fn steady_passes() -> usize {
    std::env::var("BENCH_STEADY_PASSES").ok().and_then(|v| v.parse().ok()).unwrap_or(STEADY_PASSES)
}

pub fn run(ctx: &Ctx, t: &mut Table) {
    if let Err(e) = scale(ctx, t) {
        t.failed("scale section (10k nodes)", &format!("{e:#}"), "see SPEC budgets");
    }
}

fn scale(ctx: &Ctx, t: &mut Table) -> Result<()> {
    let dir = tempfile::tempdir()?;
    let d = dir.path();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let sim = Proc::sim(&ctx.sim_bin, d)?;
    if with_topology() {
        sim.control_post("zones/us-central1-a/topology", ZONE_SHAPE)?;
    }
    // Nodeset r consumes a reservation (issue 38's budget: its reads every pass, beside the 10,000
    // flex nodes): the reservation and its reservation-bound template.
    sim.control_post("reservations", RESERVATION)?;
    sim.control_post("templates", RESERVED_TEMPLATE)?;
    let http = reqwest::Client::new();
    let control = |path: &str| format!("http://{}/_sim/{path}", sim.addr);
    let get = |path: &str| -> Result<Value> {
        rt.block_on(async { Ok(http.get(control(path)).send().await?.error_for_status()?.json().await?) })
    };
    let post = |path: &str| -> Result<Value> {
        rt.block_on(async { Ok(http.post(control(path)).send().await?.error_for_status()?.json().await?) })
    };
    let slurm = FakeSlurm::with_spares(&d.join("slurm"), NODES, PER_JOB, SPARES)?;
    let config = write_config(d, &format!("http://{}/compute/v1/", sim.addr), &slurm.bin_dir)?;
    let cli = |args: &[&str]| -> Result<Value> {
        let out = Command::new(&ctx.bin).arg("--config").arg(&config).args(args).arg("--json").output()?;
        if !out.status.success() {
            bail!("slurm-dws {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        }
        Ok(serde_json::from_slice(&out.stdout)?)
    };

    // 1. The resume: one hook call of 10,000 nodes in 1,000 jobs, then the daemon carries it out.
    let link = d.join("slurm-dws-resume");
    std::os::unix::fs::symlink(&ctx.bin, &link)?;
    let resume_file = d.join("resume-file.json");
    std::fs::write(&resume_file, crate::hook::resume_file_22_05(NODES / PER_JOB, PER_JOB))?;
    let status = Command::new(&link)
        .arg(format!("hpc-a-[0-{}]", NODES - 1))
        .env_clear()
        .env("SLURM_DWS_CONFIG", &config)
        .env("SLURM_RESUME_FILE", &resume_file)
        .status()?;
    if !status.success() {
        bail!("the resume hook failed: {status}");
    }
    post("calls/reset")?;
    let started = Instant::now();
    let daemon = Proc::daemon(&ctx.bin, &config, d)?;
    let idle_rss = memory(daemon.pid())?.rss;
    let mut sampled = Mem::default();
    let deadline = started + Duration::from_secs(300);
    loop {
        let s = cli(&["status"])?;
        sampled = sampled.max(memory(daemon.pid())?);
        if s["nodes"]["up"].as_u64() == Some(NODES as u64) {
            break;
        }
        if Instant::now() > deadline {
            bail!("10,000 nodes not up after 300 s: {s}\n{}", daemon.log_tail(20));
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    let all_up = started.elapsed();
    let up_hwm = memory(daemon.pid())?.hwm;
    // slurmd registers on every VM: Slurm shows the nodes allocated and responding.
    slurm.set_nodes(NodeView::Running)?;
    let mut settle_passes = 0;
    loop {
        let report = cli(&["reconcile"])?;
        sampled = sampled.max(memory(daemon.pid())?);
        settle_passes += 1;
        if quiet(&report) {
            break;
        }
        if settle_passes > 20 {
            bail!("no quiet pass after 20 passes; last report: {report}");
        }
    }
    let settled = started.elapsed();
    // Every VM reports its physical host (its MIG has the nodeset's workload policy), and the node
    // records it: the steady passes below keep a topology file of 10,000 placed nodes.
    let placed =
        cli(&["nodes"])?.as_array().map_or(0, |a| a.iter().filter(|n| n["topology"].is_string()).count());
    if with_topology() && placed != NODES as usize {
        bail!("{placed} of {NODES} nodes have a physical host after settling");
    }
    let settled_hwm = memory(daemon.pid())?.hwm;
    let resume_calls = get("calls")?;

    // 2. Steady state: 10 passes with 10,000 VMs up and nothing changing.
    post("calls/reset")?;
    let mut pass_cpu = Samples::default();
    let mut pass_wall = Samples::default();
    for _ in 0..steady_passes() {
        let before = task_cpu(daemon.pid())?;
        let report = cli(&["reconcile"])?;
        let cpu = task_cpu(daemon.pid())? - before;
        sampled = sampled.max(memory(daemon.pid())?);
        if !quiet(&report) {
            bail!("a steady pass did something: {report}");
        }
        pass_cpu.push(cpu);
        pass_wall.push_ms(report["duration_ms"].as_f64().unwrap_or(f64::NAN));
    }
    let steady_calls = get("calls")?;
    let Mem { hwm, rss, .. } = memory(daemon.pid())?;
    let vms = get("state")?["instances"].as_array().map_or(0, Vec::len);
    drop(daemon); // SIGTERM: the database is closed cleanly before it is read here.

    // The whole pass, the old way and as it is, each by a daemon started on this steady state.
    let whole = (|| -> Result<_> {
        let topology = with_topology().then(|| topology_file(d));
        let topology = topology.as_deref();
        let base = crate::whole_pass::measure(&ctx.bin, &config, d, &slurm, &sim.addr, true, 0, topology)?;
        let now =
            crate::whole_pass::measure(&ctx.bin, &config, d, &slurm, &sim.addr, false, SPARES / 2, topology)?;
        Ok((base, now))
    })();

    // The rows: GCE calls of the resume.
    let by = |calls: &Value, m: &str| calls["by_method"][m].as_f64().unwrap_or(0.0);
    let groups = (NODES / PER_JOB) as f64;
    t.count(
        "GCE, resume 10k nodes/1k jobs: MIG inserts",
        by(&resume_calls, "regionInstanceGroupManagers.insert"),
        "",
        Some(groups),
        "≤ 1000 (1 per group)",
    );
    t.count(
        "GCE, resume 10k nodes/1k jobs: resize-request inserts",
        by(&resume_calls, "regionInstanceGroupManagerResizeRequests.insert"),
        "",
        Some(groups),
        "≤ 1000 (1 per group)",
    );
    let per_node: f64 = PER_NODE_METHODS.iter().map(|m| by(&resume_calls, m)).sum();
    t.count("GCE, resume: per-node calls", per_node, PER_NODE_METHODS.join(", ").as_str(), Some(0.0), "0");
    t.count(
        "  context: resume operation polls (regionOperations.get)",
        by(&resume_calls, "regionOperations.get") + by(&resume_calls, "regionOperations.wait"),
        "",
        None,
        "-",
    );
    t.count(
        "  context: resume, all calls",
        resume_calls["total"].as_f64().unwrap_or(0.0),
        &format!("{settle_passes} settling passes after all up"),
        None,
        "-",
    );
    t.note(format!("GCE calls of the resume, by method: {}", resume_calls["by_method"]));

    // GCE calls of the steady passes.
    let lists: f64 = LIST_METHODS.iter().map(|m| by(&steady_calls, m)).sum();
    let ceiling = (vms as f64 / 500.0).ceil() + 2.0;
    t.count(
        &format!("GCE, steady pass with {vms} VMs: list calls per pass"),
        lists / steady_passes() as f64,
        &format!("{lists} in {} passes", steady_passes()),
        Some(ceiling),
        &format!("≤ {ceiling} (ceil(VMs/500)+2)"),
    );
    t.count(
        "GCE, steady pass: resize-request polls (finished requests)",
        by(&steady_calls, "regionInstanceGroupManagerResizeRequests.get"),
        &format!("in {} passes", steady_passes()),
        Some(0.0),
        "0",
    );
    t.count(
        "  context: steady pass, all GCE calls per pass",
        steady_calls["total"].as_f64().unwrap_or(0.0) / steady_passes() as f64,
        "",
        None,
        "-",
    );
    t.note(format!(
        "GCE calls of {} steady passes, by method: {}",
        steady_passes(),
        steady_calls["by_method"]
    ));

    // Memory and CPU of the daemon process.
    t.add(crate::table::Row {
        what: "daemon peak RSS (VmHWM), 10k nodes tracked".into(),
        measured: format!("{:.1} MB", hwm as f64 / 1024.0),
        spread: format!("VmRSS now {:.1} MB", rss as f64 / 1024.0),
        budget: "≤ 50 MB".into(),
        baseline: "-".into(),
        ratio: "-".into(),
        verdict: if hwm as f64 / 1024.0 <= 50.0 {
            crate::table::Verdict::Pass
        } else {
            crate::table::Verdict::Fail
        },
    });
    t.timed("  context: daemon CPU per steady pass (whole pass, every thread)", &pass_cpu, None, None);
    t.timed("  context: daemon steady pass wall time (pass report)", &pass_wall, None, None);
    t.note(format!(
        "daemon memory: VmRSS {:.1} MB at start; VmHWM {:.1} MB when all nodes were up, {:.1} MB when \
         settled, {:.1} MB after the steady passes; largest sampled (every status call and pass) RssAnon \
         {:.1} MB (heap, stacks) and RssFile {:.1} MB (the binary's code and libraries, mapped from disk)",
        idle_rss as f64 / 1024.0,
        up_hwm as f64 / 1024.0,
        settled_hwm as f64 / 1024.0,
        hwm as f64 / 1024.0,
        sampled.anon as f64 / 1024.0,
        sampled.file as f64 / 1024.0,
    ));
    t.note(format!(
        "10k resume with zero capacity delay: all nodes up {:.1} s after the daemon started, settled \
         (reservations made, a quiet pass) at {:.1} s; {} reservations; sinfo --json is {:.1} MB",
        all_up.as_secs_f64(),
        settled.as_secs_f64(),
        slurm.reservations(),
        slurm.sinfo_bytes() as f64 / 1e6
    ));

    match whole {
        Ok((base, now)) => crate::whole_pass::rows(t, &base, &now, with_topology()),
        Err(e) => t.failed("whole pass at 10k nodes", &format!("{e:#}"), "see SPEC budgets"),
    }

    // 3. The pass's planning + store CPU in this process, on the daemon's database.
    plan_and_store(&rt, &config, t)?;
    drop(sim);
    Ok(())
}

/// GCE methods that would be calls per node.
const PER_NODE_METHODS: &[&str] = &[
    "instances.get",
    "instances.insert",
    "instances.delete",
    "instances.list",
    "regionInstanceGroupManagers.listManagedInstances",
    "regionInstanceGroupManagers.createInstances",
];

/// List calls of a pass.
const LIST_METHODS: &[&str] = &[
    "instances.aggregatedList",
    "instances.list",
    "regionInstanceGroupManagers.list",
    "regionInstanceGroupManagers.listManagedInstances",
    "regionInstanceGroupManagerResizeRequests.list",
];

/// Planning + store work of one steady pass, timed in this process: the second half of the daemon's
/// own pass ([`Reconciler::pass_on`]: ingest, plan, commit, outbox, pass report) on one observation
/// ([`Reconciler::observe`], the first half) made once beforehand. The figure the budget speaks of; GCE and Slurm round trips are not
/// in it. Loading the desired state from the store (at start, after a failed pass, every 30 passes)
/// and `plan()` alone are timed beside it, as context.
fn plan_and_store(rt: &tokio::runtime::Runtime, config: &Path, t: &mut Table) -> Result<()> {
    let cfg = Config::load(Some(config)).map_err(|e| anyhow!("{e}"))?;
    let plan_cfg = PlanConfig::new(&cfg);
    let (store, mut reconciler, observation) = rt.block_on(async {
        let store = Store::open(&cfg.state_dir).await?;
        let mut reconciler = Reconciler::new(cfg.clone(), store.clone()).await?;
        let observation = reconciler.observe().await?;
        if let Some(e) = observation.errors.first() {
            bail!("observing: {e}");
        }
        // Every request is final in a steady state: nothing to poll (checked, not assumed).
        let active = store.requests(true).await?.iter().filter(|r| r.phase == RequestPhase::Active).count();
        if active > 0 {
            bail!("{active} requests still active: not a steady state");
        }
        anyhow::Ok((store, reconciler, observation))
    })?;
    let observed = &observation.observed;
    let mut pass = Samples::default();
    let mut plan_only = Samples::default();
    let mut load = Samples::default();
    let mut heavy = Samples::default();
    let mut last = (0, 0, 0);
    for round in 0..PLAN_ROUNDS + 1 {
        let given = observation.clone();
        let c0 = process_cpu();
        let report = rt.block_on(reconciler.pass_on(Trigger::Interval, given));
        let c1 = process_cpu();
        let report = serde_json::to_value(&report)?;
        if !quiet(&report) {
            bail!("a steady pass did something: {report}");
        }
        // Context: reading the desired state back from the store, and plan() alone on it.
        let (desired, load_cpu) = rt.block_on(load_desired(&store))?;
        let p0 = process_cpu();
        let p = reconcile::plan::plan(&plan_cfg, &desired, observed, chrono::Utc::now());
        let plan_cpu = process_cpu() - p0;
        if !(p.nodes.is_empty() && p.requests.is_empty() && p.migs.is_empty() && p.events.is_empty()) {
            bail!("the steady plan changes records: {} nodes, {} requests", p.nodes.len(), p.requests.len());
        }
        // Context: the same pass, had every node changed (each row rewritten): the worst write a pass
        // can have.
        let c2 = process_cpu();
        rt.block_on(async {
            let all: Vec<_> = desired.nodes.values().cloned().collect();
            let mut tx = store.begin().await?;
            tx.upsert_nodes(&all).await?;
            tx.commit().await?;
            anyhow::Ok(())
        })?;
        let c3 = process_cpu();
        if round > 0 {
            pass.push(c1 - c0);
            plan_only.push(plan_cpu);
            load.push(load_cpu);
            heavy.push((c1 - c0) + (c3 - c2));
        }
        last = (desired.nodes.len(), desired.requests.len(), desired.migs.len());
    }
    // The usage recording is on in these passes: every VM listed has its span open (the first,
    // untimed pass opened them; the timed ones found nothing to change and wrote one row each).
    let open = rt.block_on(store.open_vm_spans())?.len();
    let listed = observed.vms.as_ref().map_or(0, BTreeMap::len);
    if open != listed {
        bail!("usage recording: {open} VM spans open for {listed} VMs listed");
    }
    rt.block_on(store.close());
    t.timed("reconcile pass CPU at 10k nodes: plan + store (steady)", &pass, Some(50.0), None);
    t.timed("  context: of which plan() alone", &plan_only, None, None);
    t.timed("  context: reading the desired state from the store", &load, None, None);
    t.timed("  context: a pass that rewrites all 10k node rows", &heavy, None, None);
    t.note(format!(
        "plan + store: the daemon's pass (Reconciler::pass_on) on its own database, {} nodes, {} \
         request groups not done, {} MIGs on record; observed {} VMs, {} MIGs, {} Slurm nodes; every pass \
         quiet, usage recording on (every VM's span open); CPU is this process's (every thread: sqlx runs \
         SQLite on its own thread). A pass starts \
         from the desired state the previous one committed; the first after start, the first after a \
         failed pass and one in 30 read it from the store instead, which costs the 'reading the desired \
         state' row on top",
        last.0,
        last.1,
        last.2,
        observed.vms.as_ref().map_or(0, BTreeMap::len),
        observed.migs.as_ref().map_or(0, BTreeMap::len),
        observed.slurm.as_ref().map_or(0, BTreeMap::len),
    ));
    Ok(())
}

/// The desired state as a pass reads it from the store, and the CPU that took.
async fn load_desired(store: &Store) -> Result<(Desired, Duration)> {
    let l0 = process_cpu();
    let desired = Desired {
        nodes: store.nodes().await?.into_iter().map(|n| (n.name.clone(), n)).collect(),
        requests: store.requests(true).await?.into_iter().map(|r| (r.id, r)).collect(),
        migs: store.migs(true).await?.into_iter().map(|m| (m.name.clone(), m)).collect(),
        backoffs: store.backoffs().await?.into_iter().map(|b| (b.nodeset.clone(), b)).collect(),
        repairs: store.repairs().await?.into_iter().map(|r| (r.node.clone(), r)).collect(),
    };
    Ok((desired, process_cpu() - l0))
}

/// The reservation nodeset r consumes, booked in the simulator.
const RESERVATION: &str = r#"{"project": "bench-project", "zone": "us-central1-a", "name": "bench-res", "count": 16,
    "machine_type": "n2-standard-4"}"#;

/// Nodeset r's reservation-bound template.
const RESERVED_TEMPLATE: &str = r#"{"name": "r-bound", "properties": {"machineType": "n2-standard-4",
    "scheduling": {"provisioningModel": "RESERVATION_BOUND", "instanceTerminationAction": "DELETE",
                   "onHostMaintenance": "TERMINATE"},
    "reservationAffinity": {"consumeReservationType": "SPECIFIC_RESERVATION",
                            "key": "compute.googleapis.com/reservation-name", "values": ["bench-res"]}}}"#;

/// Nodeset r: 16 dynamic nodes on reservation bench-res (never resumed by the bench: its reads are
/// what is measured).
const RESERVED_NODESET: &str = "\n[[nodeset]]\nname = \"r\"\n\
    instance_template = \"projects/bench-project/global/instanceTemplates/r-bound\"\n\
    zones = [\"us-central1-a\"]\nnode_count_dynamic_max = 16\nprovisioning_model = \"reservation\"\n\
    [nodeset.reservation]\nname = \"projects/bench-project/zones/us-central1-a/reservations/bench-res\"\n";

/// The scale bench's config: the simulator at `endpoint`, the fake Slurm in `slurm_bin`; a Slurm
/// topology file (`tree`, as 22.05 takes) kept in `d`, and nodeset a's MIGs with an owned
/// HIGH_THROUGHPUT workload policy (BLOCK), so that every VM reports its physical host.
fn write_config(d: &Path, endpoint: &str, slurm_bin: &Path) -> Result<PathBuf> {
    if !with_topology() {
        let extra = format!(
            "calls_per_minute = 100000\n\n[slurm]\nbin_dir = \"{}\"\ncommand_timeout = 60\n\n\
             [reconcile]\ninterval = 30\n",
            slurm_bin.display()
        );
        let path = crate::write_config(d, endpoint, NODES + SPARES, &extra);
        let mut text = std::fs::read_to_string(&path)?;
        text.push_str(RESERVED_NODESET);
        std::fs::write(&path, text)?;
        return Ok(path);
    }
    let extra = format!(
        "# The bench counts calls; it does not wait out the default client-side rate limit.\n\
         calls_per_minute = 100000\n\n[slurm]\nbin_dir = \"{}\"\ncommand_timeout = 60\n\
         topology = \"tree\"\ntopology_file = \"{}\"\n\n\
         [reconcile]\ninterval = 30\n",
        slurm_bin.display(),
        topology_file(d).display()
    );
    let path = crate::write_config(d, endpoint, NODES + SPARES, &extra);
    let mut text = std::fs::read_to_string(&path)?;
    text.push_str("\n[nodeset.placement]\nmax_topology_distance = \"BLOCK\"\n");
    text.push_str(RESERVED_NODESET);
    std::fs::write(&path, text)?;
    Ok(path)
}

/// `BENCH_TOPOLOGY=0`: the scale section without `[slurm] topology` and without a workload policy
/// (no VM reports a physical host), to compare with the default in the same conditions.
fn with_topology() -> bool {
    std::env::var("BENCH_TOPOLOGY").map_or(true, |v| v != "0")
}

/// The topology file the scale bench's daemon keeps.
fn topology_file(d: &Path) -> PathBuf {
    d.join("topology.conf")
}

/// The simulator's zone for 10,000 placed VMs (one a host): 8 blocks of 16 subblocks of 80 hosts
/// (10,240 hosts; the default zone has 288).
const ZONE_SHAPE: &str = r#"{"blocks": 8, "subblocks_per_block": 16, "hosts_per_subblock": 80}"#;
