//! API calls of one job's life per provisioning model, against the simulator (in this process) and
//! the real daemon (its own process), with a Slurm that answers and lists no node: a 2-node job is
//! resumed, its VMs come up, it is suspended, its VMs are deleted and its MIG collected.
//!
//! Counted by the simulator, by method. The lists every pass makes whatever happens
//! (`regionInstanceGroupManagers.list`, `instances.aggregatedList`, and `resourcePolicies.list` in
//! each region in use since workload policies came) are left out: they do not grow with jobs. What is left is what one job costs: writes (MIG insert, resize request insert or
//! `createInstances`, `deleteInstances`, MIG delete) and the reads that follow them (operation
//! waits, resize-request gets or `listManagedInstances` polls).

use crate::table::Table;
use crate::Ctx;
use anyhow::{bail, Result};
use serde_json::{json, Value};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Methods called every pass whatever the jobs do.
const PER_PASS: [&str; 3] =
    ["regionInstanceGroupManagers.list", "instances.aggregatedList", "resourcePolicies.list"];

/// The `spot` section.
pub fn run(ctx: &Ctx, t: &mut Table) {
    for model in ["flex", "spot"] {
        match one_job(ctx, model) {
            Ok((writes, reads, by_method)) => {
                t.count(
                    &format!("API calls per {model} job (2 nodes: resume → up → suspend → MIG collected)"),
                    (writes + reads) as f64,
                    &format!("{writes} writes + {reads} reads"),
                    Some(12.0),
                    "≤ 12 calls",
                );
                t.note(format!(
                    "{model} job, calls by method (lists every pass makes left out): {by_method}"
                ));
            }
            Err(e) => t.failed(&format!("API calls per {model} job"), &format!("{e:#}"), "≤ 12 calls"),
        }
    }
}

fn one_job(ctx: &Ctx, model: &str) -> Result<(u64, u64, Value)> {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build()?;
    let sim = rt.block_on(gce_sim::start(gce_sim::SimOptions {
        listen: "127.0.0.1:0".parse()?,
        boot_cmd: None,
        stop_cmd: None,
        time_scale: 1.0,
    }))?;
    let dir = tempfile::tempdir()?;
    let d = dir.path();
    let control = |method: reqwest::Method, path: &str, body: Option<Value>| -> Result<Value> {
        let url = format!("http://{}/_sim/{path}", sim.addr());
        rt.block_on(async {
            let mut req = reqwest::Client::new().request(method, url);
            if let Some(b) = body {
                req = req.json(&b);
            }
            Ok(req.send().await?.error_for_status()?.json().await.unwrap_or(Value::Null))
        })
    };
    let scheduling = match model {
        "spot" => json!({"provisioningModel": "SPOT", "instanceTerminationAction": "DELETE"}),
        _ => json!({"provisioningModel": "FLEX_START", "instanceTerminationAction": "DELETE",
                     "onHostMaintenance": "TERMINATE", "automaticRestart": false}),
    };
    control(
        reqwest::Method::POST,
        "templates",
        Some(json!({"name": "t", "properties": {"machineType": "n2-standard-4", "scheduling": scheduling}})),
    )?;
    let config = write_config(d, &sim.base_url(), model)?;
    let mut daemon = Daemon(
        Command::new(&ctx.bin)
            .arg("--config")
            .arg(&config)
            .arg("daemon")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?,
    );
    let state = || control(reqwest::Method::GET, "state", None);
    let until = |what: &str, f: &dyn Fn(&Value) -> bool| -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if f(&state()?) {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("{what}: not within 60 s");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    let vms = |s: &Value| s["instances"].as_array().map_or(0, Vec::len);
    let migs = |s: &Value| s["migs"].as_array().map_or(0, Vec::len);
    std::thread::sleep(Duration::from_secs(1));
    control(reqwest::Method::POST, "calls/reset", Some(json!({})))?;
    let resume = json!({"jobs": [{"job_id": 7, "nodes": "hpc-a-[0-1]"}], "all_nodes": "hpc-a-[0-1]"});
    hook(ctx, d, &config, "resume", "hpc-a-[0-1]", Some(&resume.to_string()))?;
    until("both VMs RUNNING", &|s| {
        s["instances"].as_array().is_some_and(|a| a.len() == 2 && a.iter().all(|i| i["status"] == "RUNNING"))
    })?;
    // Let the pass that sees them running record the nodes up before Slurm suspends them.
    std::thread::sleep(Duration::from_secs(3));
    hook(ctx, d, &config, "suspend", "hpc-a-[0-1]", None)?;
    until("VMs deleted and the MIG collected", &|s| vms(s) == 0 && migs(s) == 0)?;
    let calls = control(reqwest::Method::GET, "calls", None)?;
    daemon.stop();
    let mut by_method = calls["by_method"].clone();
    if let Some(m) = by_method.as_object_mut() {
        m.retain(|k, _| !PER_PASS.contains(&k.as_str()));
    }
    let (mut writes, mut reads) = (0, 0);
    for (method, n) in by_method.as_object().into_iter().flatten() {
        let n = n.as_u64().unwrap_or(0);
        let read = ["get", "list", "listManagedInstances", "wait"]
            .iter()
            .any(|r| method.ends_with(&format!(".{r}")));
        if read {
            reads += n;
        } else {
            writes += n;
        }
    }
    rt.block_on(sim.shutdown());
    Ok((writes, reads, by_method))
}

/// The daemon, stopped (killed) when dropped.
struct Daemon(Child);

impl Daemon {
    fn stop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.stop();
    }
}

fn hook(
    ctx: &Ctx,
    d: &Path,
    config: &Path,
    name: &str,
    hostlist: &str,
    resume_file: Option<&str>,
) -> Result<()> {
    let link = d.join(format!("slurm-dws-{name}"));
    if !link.exists() {
        std::os::unix::fs::symlink(&ctx.bin, &link)?;
    }
    let mut cmd = Command::new(&link);
    cmd.arg(hostlist).env_clear().env("SLURM_DWS_CONFIG", config);
    if let Some(text) = resume_file {
        let f = d.join("resume.json");
        std::fs::write(&f, text)?;
        cmd.env("SLURM_RESUME_FILE", f);
    }
    let status = cmd.status()?;
    if !status.success() {
        bail!("the {name} hook failed: {status}");
    }
    Ok(())
}

/// A config with one dynamic nodeset `a` of `model`, a Slurm that answers with no node (so empty
/// MIGs may be collected), and short intervals.
fn write_config(d: &Path, endpoint: &str, model: &str) -> Result<std::path::PathBuf> {
    let bin = d.join("slurm-bin");
    devcluster::write_empty_slurm(&bin)?;
    let text = format!(
        r#"cluster_name = "hpc"
state_dir = "{state}"
socket = "{sock}"
log_file = "{log}"

[gcp]
project = "bench-project"
region = "us-central1"
endpoint = "{endpoint}"
credentials = "none"

[slurm]
bin_dir = "{bin}"

[reconcile]
interval = 2
mig_gc_grace = 2

[[nodeset]]
name = "a"
instance_template = "projects/bench-project/global/instanceTemplates/t"
zones = ["us-central1-a"]
node_count_dynamic_max = 2
provisioning_model = "{model}"
"#,
        state = d.join("state").display(),
        sock = d.join("slurm-dws.sock").display(),
        log = d.join("slurm-dws.log").display(),
        bin = bin.display(),
    );
    let path = d.join("slurm-dws.toml");
    std::fs::write(&path, text)?;
    Ok(path)
}
