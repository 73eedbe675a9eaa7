//! The whole product on one machine: a real local Slurm cluster whose ResumeProgram / SuspendProgram /
//! ResumeFailProgram are the `slurm-dws-*` hooks, the GCE simulator whose "VMs" are real slurmds of that
//! cluster, and the `slurm-dws` daemon between them. Used by the end-to-end tests and `make demo`.
//!
//! Every process started here is stopped by PID when the [`Stack`] is dropped, pass or fail.

use super::{ClusterSpec, DevclusterError, LocalCluster, SlurmGeneration};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One nodeset of a stack: `name`, static and dynamic counts, extra `[nodeset.dws_flex]` lines, and
/// the `ResumeTimeout` of its partition when the test wants another than the printed lines' one.
#[derive(Debug, Clone)]
pub struct StackNodeset {
    pub name: String,
    pub node_count_static: u32,
    pub node_count_dynamic_max: u32,
    pub dws_flex: String,
    /// Replaces the `ResumeTimeout=` of the nodeset's partition line (`check-config` prints 65533 on
    /// DWS Flex partitions), so a test can see Slurm give up on a resume in seconds.
    pub partition_resume_timeout: Option<u32>,
    /// `provisioning_model` ("standard", "spot"); `None`: Flex. The simulator gets a template of
    /// that model (`{name}-{model}`).
    pub provisioning_model: Option<String>,
    /// Extra lines for the `[[nodeset]]` table itself (e.g. `exclusive = true`).
    pub nodeset_lines: String,
    /// `region` of the nodeset (its template and zone `{region}-b` there); `None`: gcp.region
    /// (us-central1, zone us-central1-a).
    pub region: Option<String>,
    /// Its zones; `None`: the one zone of its region above.
    pub zones: Option<Vec<String>>,
    /// Reserved capacity: the lines of its `[nodeset.reservation]` table and the value its
    /// template's `reservationAffinity` names (`projects/P/reservations/R`); see
    /// [`StackNodeset::reserved`].
    pub reservation: Option<(String, String)>,
}

impl StackNodeset {
    pub fn new(name: &str, node_count_static: u32, node_count_dynamic_max: u32) -> Self {
        StackNodeset {
            name: name.into(),
            node_count_static,
            node_count_dynamic_max,
            dws_flex: String::new(),
            partition_resume_timeout: None,
            provisioning_model: None,
            nodeset_lines: String::new(),
            region: None,
            zones: None,
            reservation: None,
        }
    }

    /// The same nodeset on reserved capacity: `provisioning_model = "reservation"`, `table` the
    /// lines of its `[nodeset.reservation]`, and a RESERVATION_BOUND template consuming `affinity`
    /// (`projects/P/reservations/R`, the reservation itself or the one a booking delivers).
    pub fn reserved(mut self, table: &str, affinity: &str) -> Self {
        self.provisioning_model = Some("reservation".into());
        self.reservation = Some((table.to_string(), affinity.to_string()));
        self
    }

    /// The same nodeset over `zones` (of its region).
    pub fn in_zones(mut self, zones: &[&str]) -> Self {
        self.zones = Some(zones.iter().map(|z| z.to_string()).collect());
        self
    }

    /// The same nodeset with `lines` in its `[nodeset.dws_flex]` table.
    pub fn with_flex_lines(mut self, lines: &str) -> Self {
        self.dws_flex = lines.to_string();
        self
    }

    /// The same nodeset with `provisioning_model = model` ("standard" or "spot").
    pub fn model(mut self, model: &str) -> Self {
        self.provisioning_model = Some(model.into());
        self
    }

    /// The name of its instance template in the simulator.
    fn template(&self) -> String {
        format!("{}-{}", self.name, self.provisioning_model.as_deref().unwrap_or("flex"))
    }

    /// The same nodeset with `lines` in its `[[nodeset]]` table.
    pub fn with_lines(mut self, lines: &str) -> Self {
        self.nodeset_lines = lines.to_string();
        self
    }

    /// The same nodeset in `region` (its own regional template there, zone `{region}-b`).
    pub fn in_region(mut self, region: &str) -> Self {
        self.region = Some(region.to_string());
        self
    }

    /// The same nodeset with its partition's `ResumeTimeout` set to `secs`.
    pub fn resume_timeout(mut self, secs: u32) -> Self {
        self.partition_resume_timeout = Some(secs);
        self
    }
}

/// A `PartitionName=` line with the `ResumeTimeout` its nodeset asks for (added when absent).
fn partition_line(line: &str, nodesets: &[StackNodeset]) -> String {
    let name = line.split_whitespace().next().and_then(|w| w.strip_prefix("PartitionName=")).unwrap_or("");
    let Some(secs) = nodesets.iter().find(|n| n.name == name).and_then(|n| n.partition_resume_timeout) else {
        return line.to_string();
    };
    let timeout = format!("ResumeTimeout={secs}");
    let mut words: Vec<String> = line.split_whitespace().map(String::from).collect();
    match words.iter_mut().find(|w| w.starts_with("ResumeTimeout=")) {
        Some(w) => *w = timeout,
        None => words.insert(1.min(words.len()), timeout),
    }
    words.join(" ")
}

/// What to run.
#[derive(Debug, Clone)]
pub struct StackSpec {
    /// The `slurm-dws` binary (its directory gets the hook links).
    pub bin: PathBuf,
    /// The `slurm-dws-sim` binary.
    pub sim_bin: PathBuf,
    pub nodesets: Vec<StackNodeset>,
    /// Extra lines for the slurm-dws config's `[reconcile]` table.
    pub reconcile: String,
    /// Extra slurm.conf lines (they replace the harness defaults of the same key).
    pub slurm_conf: Vec<String>,
    /// Extra lines for the slurm-dws config's `[slurm]` table (e.g. `delegate_resume = "..."`).
    pub slurm_table: String,
    /// slurm.conf `NodeName=` lines of nodes that are not slurm-dws's (e.g. `NodeName=legacy-[0-1]
    /// State=CLOUD CPUs=1 RealMemory=500`): the ones another power-saving program would manage.
    pub other_nodes: Vec<String>,
    /// slurm.conf `PartitionName=` lines for them.
    pub other_partitions: Vec<String>,
    /// More directories that programs run by slurmctld must see (see `ClusterSpec::bind_dirs`).
    pub bind_dirs: Vec<PathBuf>,
    /// The simulator's `--time-scale`.
    pub time_scale: f64,
    /// Which Slurm the cluster runs. On 24.11 and 26.05 the hooks run inside its root: the
    /// directory of `bin` and the stack's directory (config, state, log, socket) are bind-mounted
    /// there at the same paths.
    pub slurm: SlurmGeneration,
}

impl StackSpec {
    /// A spec with no extra config, real time and the host's Slurm 22.05.
    pub fn new(bin: impl Into<PathBuf>, sim_bin: impl Into<PathBuf>, nodesets: Vec<StackNodeset>) -> Self {
        StackSpec {
            bin: bin.into(),
            sim_bin: sim_bin.into(),
            nodesets,
            reconcile: String::new(),
            slurm_conf: Vec::new(),
            slurm_table: String::new(),
            other_nodes: Vec::new(),
            other_partitions: Vec::new(),
            bind_dirs: Vec::new(),
            time_scale: 1.0,
            slurm: SlurmGeneration::default(),
        }
    }
}

/// A running stack.
pub struct Stack {
    pub cluster: LocalCluster,
    pub dir: tempfile::TempDir,
    pub config: PathBuf,
    pub sim_url: String,
    spec: StackSpec,
    sim: Option<Child>,
    daemon: Option<Child>,
}

fn err(what: &str, e: impl std::fmt::Display) -> DevclusterError {
    DevclusterError::Spec(format!("{what}: {e}"))
}

impl Stack {
    /// Starts Slurm, the simulator and the daemon. The slurm.conf node, partition and hook lines come from
    /// `slurm-dws check-config --print-slurm-conf --slurm-version V` for the cluster's Slurm, as an
    /// admin's would (the cluster does not exist yet, so its version is given rather than asked).
    pub fn start(spec: StackSpec) -> Result<Stack, DevclusterError> {
        let mut dir = tempfile::tempdir().map_err(|e| err("temp dir", e))?;
        // Kept with the cluster's for a post-mortem (daemon log, state, hook log).
        dir.disable_cleanup(std::env::var("SLURM_DWS_KEEP_DEVCLUSTER").is_ok_and(|v| v == "1"));
        let hooks = dir.path().join("hooks");
        std::fs::create_dir_all(&hooks).map_err(|e| err("hook dir", e))?;
        // Canonical, so that the link resolves inside the root too (where the binary's directory is
        // bind-mounted at its canonical path).
        let bin = spec.bin.canonicalize().map_err(|e| err(&format!("{}", spec.bin.display()), e))?;
        for h in ["resume", "suspend", "resume-fail"] {
            std::os::unix::fs::symlink(&bin, hooks.join(format!("slurm-dws-{h}")))
                .map_err(|e| err("hook link", e))?;
        }
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755));
        let config = dir.path().join("slurm-dws.toml");
        let bin_dir = Path::new("/usr/bin");
        std::fs::write(
            &config,
            config_text(&spec, dir.path(), "http://127.0.0.1:9/compute/v1/", bin_dir, None),
        )
        .map_err(|e| err("config", e))?;
        let lines = Command::new(&spec.bin)
            .args([
                "check-config",
                // The file only: its Slurm and hooks are made from these lines, after this call.
                "--config-only",
                "--print-slurm-conf",
                "--slurm-version",
                spec.slurm.version(),
                "--hook-dir",
            ])
            .arg(&hooks)
            .arg(&config)
            .output()
            .map_err(|e| err("check-config", e))?;
        if !lines.status.success() {
            return Err(err("check-config", String::from_utf8_lossy(&lines.stderr)));
        }
        let mut cspec = ClusterSpec::new("dws").slurm(spec.slurm).bind(dir.path());
        if let Some(bin_dir) = spec.bin.parent() {
            cspec.bind_dirs.push(bin_dir.to_path_buf());
        }
        for l in String::from_utf8_lossy(&lines.stdout).lines() {
            let key = l.split('=').next().unwrap_or("");
            match key {
                "NodeName" => cspec.node_lines.push(l.to_string()),
                "PartitionName" => cspec.partition_lines.push(partition_line(l, &spec.nodesets)),
                "ResumeProgram" | "SuspendProgram" | "ResumeFailProgram" | "SuspendExcNodes"
                | "PrivateData" => cspec.extra_conf.push(l.to_string()),
                _ => {} // timings: the harness's fast ones
            }
        }
        cspec.extra_conf.extend(spec.slurm_conf.iter().cloned());
        cspec.node_lines.extend(spec.other_nodes.iter().cloned());
        cspec.partition_lines.extend(spec.other_partitions.iter().cloned());
        cspec.bind_dirs.extend(spec.bind_dirs.iter().cloned());
        let cluster = LocalCluster::start(cspec)?;

        // The simulator's VMs are this cluster's slurmds.
        let mut sim = Command::new(&spec.sim_bin)
            .args(["--listen", "127.0.0.1:0", "--boot-cmd"])
            .arg(cluster.slurmd_start_command("{name}"))
            .arg("--stop-cmd")
            .arg(cluster.slurmd_stop_command())
            .arg("--time-scale")
            .arg(spec.time_scale.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| err("simulator", e))?;
        let mut first = String::new();
        BufReader::new(sim.stdout.take().expect("piped"))
            .read_line(&mut first)
            .map_err(|e| err("simulator", e))?;
        let addr = first.trim().rsplit(' ').next().unwrap_or_default().to_string();
        let sim_url = format!("http://{addr}/compute/v1/");
        // The project has each nodeset's template, as a real one must: GCE answers 404 for a
        // template that does not exist.
        for ns in &spec.nodesets {
            let url = format!("http://{addr}/_sim/templates");
            let name = ns.template();
            let template = match (ns.provisioning_model.as_deref(), &ns.reservation) {
                (_, Some((_, affinity))) => reservation_template(&name, "n2-standard-4", affinity),
                (Some(model), _) => model_template(&name, model),
                (None, _) => flex_template(&name),
            };
            if !http(&url, "POST", Some(&template)).is_object() {
                let _ = sim.kill();
                let _ = sim.wait();
                return Err(err("simulator", format!("could not load the instance template {name}")));
            }
        }

        // The hooks find their config beside $SLURM_CONF (slurmctld passes nothing else).
        let text =
            config_text(&spec, dir.path(), &sim_url, &cluster.client_bin_dir(), Some(&cluster.conf_path()));
        std::fs::write(&config, &text).map_err(|e| err("config", e))?;
        let beside = cluster.conf_path().with_file_name("slurm-dws.toml");
        std::fs::write(&beside, &text).map_err(|e| err("config", e))?;
        let mut stack = Stack { cluster, dir, config, sim_url, spec, sim: Some(sim), daemon: None };
        stack.start_daemon()?;
        Ok(stack)
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Starts the daemon and waits for its socket.
    pub fn start_daemon(&mut self) -> Result<(), DevclusterError> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.path().join("daemon.log"))
            .map_err(|e| err("daemon log", e))?;
        let child = Command::new(&self.spec.bin)
            .arg("--config")
            .arg(&self.config)
            .arg("daemon")
            .env("SLURM_DWS_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| err("daemon", e))?;
        self.daemon = Some(child);
        let sock = self.path().join("slurm-dws.sock");
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if std::os::unix::net::UnixStream::connect(&sock).is_ok() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(err("daemon", format!("no socket after 30 s:\n{}", self.daemon_log())))
    }

    /// SIGKILL: a crash.
    pub fn kill_daemon(&mut self) {
        if let Some(mut c) = self.daemon.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn daemon_log(&self) -> String {
        std::fs::read_to_string(self.path().join("daemon.log")).unwrap_or_default()
    }

    /// Runs `slurm-dws ARGS` against this stack's config; stdout.
    pub fn cli(&self, args: &[&str]) -> String {
        let out = Command::new(&self.spec.bin).arg("--config").arg(&self.config).args(args).output();
        match out {
            Ok(o) => String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr),
            Err(e) => format!("slurm-dws {args:?}: {e}"),
        }
    }

    /// Runs `slurm-dws ARGS --json` and parses it (Null when it fails).
    pub fn cli_json(&self, args: &[&str]) -> Value {
        let out =
            Command::new(&self.spec.bin).arg("--config").arg(&self.config).args(args).arg("--json").output();
        out.ok().and_then(|o| serde_json::from_slice(&o.stdout).ok()).unwrap_or(Value::Null)
    }

    fn control_url(&self, path: &str) -> String {
        format!("{}_sim/{path}", self.sim_url.trim_end_matches("compute/v1/"))
    }

    /// GET a simulator control path.
    pub fn sim_get(&self, path: &str) -> Value {
        http(&self.control_url(path), "GET", None)
    }

    /// POST to a simulator control path.
    pub fn sim_post(&self, path: &str, body: &Value) -> Value {
        http(&self.control_url(path), "POST", Some(body))
    }

    /// DELETE a simulator control path.
    pub fn sim_delete(&self, path: &str) -> Value {
        http(&self.control_url(path), "DELETE", None)
    }

    /// Names of the simulator's VMs, sorted.
    pub fn vms(&self) -> Vec<String> {
        let mut v: Vec<String> = self.sim_get("state")["instances"]
            .as_array()
            .map(|a| a.iter().filter_map(|i| i["name"].as_str().map(String::from)).collect())
            .unwrap_or_default();
        v.sort();
        v
    }

    /// Names of the simulator's MIGs, sorted.
    pub fn migs(&self) -> Vec<String> {
        let mut v: Vec<String> = self.sim_get("state")["migs"]
            .as_array()
            .map(|a| a.iter().filter_map(|i| i["name"].as_str().map(String::from)).collect())
            .unwrap_or_default();
        v.sort();
        v
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        self.kill_daemon();
        if let Some(mut s) = self.sim.take() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(s.id() as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline && matches!(s.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = s.kill();
            let _ = s.wait();
        }
        // The cluster's own Drop stops slurmctld, munged and every slurmd.
    }
}

/// A tiny blocking HTTP/1.1 client for the simulator's control API on loopback (no async runtime needed
/// in a synchronous test or the demo).
/// A DWS Flex Start instance template as an admin makes one for a nodeset (docs/gce-facts.md,
/// "Instance templates"), to load into the simulator (`POST /_sim/templates`).
/// A standard or spot template (`model` as the config spells it) of a test nodeset: SPOT ones
/// delete their VMs when GCE preempts them.
pub fn model_template(name: &str, model: &str) -> Value {
    let scheduling = match model {
        "spot" => serde_json::json!({"provisioningModel": "SPOT", "instanceTerminationAction": "DELETE",
                                     "onHostMaintenance": "TERMINATE", "automaticRestart": false}),
        _ => serde_json::json!({"provisioningModel": "STANDARD", "onHostMaintenance": "MIGRATE"}),
    };
    serde_json::json!({
        "name": name,
        "description": format!("{model} template of a test nodeset"),
        "properties": {"machineType": "n2-standard-4", "scheduling": scheduling}
    })
}

/// A reservation-bound template of `machine` whose VMs consume `affinity` (GCE's
/// `reservationAffinity` value: `projects/P/reservations/R[/reservationBlocks/B...]`).
pub fn reservation_template(name: &str, machine: &str, affinity: &str) -> Value {
    serde_json::json!({
        "name": name,
        "description": "reservation-bound template of a test nodeset",
        "properties": {
            "machineType": machine,
            "scheduling": {"provisioningModel": "RESERVATION_BOUND", "instanceTerminationAction": "DELETE",
                           "onHostMaintenance": "TERMINATE", "automaticRestart": false},
            "reservationAffinity": {"consumeReservationType": "SPECIFIC_RESERVATION",
                "key": "compute.googleapis.com/reservation-name", "values": [affinity]}
        }
    })
}

pub fn flex_template(name: &str) -> Value {
    serde_json::json!({
        "name": name,
        "description": "DWS Flex Start template of a test nodeset",
        "properties": {
            "machineType": "n2-standard-4",
            "scheduling": {
                "provisioningModel": "FLEX_START",
                "instanceTerminationAction": "DELETE",
                "onHostMaintenance": "TERMINATE",
                "automaticRestart": false
            },
            "reservationAffinity": {"consumeReservationType": "NO_RESERVATION"}
        }
    })
}

/// A blocking HTTP call to the simulator (its control API or GCE paths): the JSON answer, Null on
/// any failure.
pub fn http(url: &str, method: &str, body: Option<&Value>) -> Value {
    use std::io::{Read, Write};
    let Some(rest) = url.strip_prefix("http://") else { return Value::Null };
    let (host, path) = rest.split_once('/').map(|(h, p)| (h, format!("/{p}"))).unwrap_or((rest, "/".into()));
    let Ok(mut s) = std::net::TcpStream::connect(host) else { return Value::Null };
    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
    let payload = body.map(|b| b.to_string()).unwrap_or_default();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{payload}",
        payload.len()
    );
    if s.write_all(req.as_bytes()).is_err() {
        return Value::Null;
    }
    let mut resp = Vec::new();
    let _ = s.read_to_end(&mut resp);
    let text = String::from_utf8_lossy(&resp);
    let Some((head, body)) = text.split_once("\r\n\r\n") else { return Value::Null };
    let body = if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        dechunk(body)
    } else {
        body.to_string()
    };
    serde_json::from_str(&body).unwrap_or(Value::Null)
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else { break };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}

fn config_text(
    spec: &StackSpec,
    dir: &Path,
    endpoint: &str,
    bin_dir: &Path,
    slurm_conf: Option<&Path>,
) -> String {
    let mut t = format!(
        r#"cluster_name = "hpc"
state_dir = "{state}"
socket = "{sock}"
log_file = "{log}"

[gcp]
project = "demo-project"
region = "us-central1"
endpoint = "{endpoint}"
credentials = "none"
calls_per_minute = 6000

[slurm]
bin_dir = "{bin_dir}"
{conf}
command_timeout = 10
{slurm_table}

[reconcile]
interval = 5
{reconcile}
"#,
        state = dir.join("state").display(),
        sock = dir.join("slurm-dws.sock").display(),
        log = dir.join("slurm-dws.log").display(),
        bin_dir = bin_dir.display(),
        conf = slurm_conf.map(|c| format!("conf = \"{}\"", c.display())).unwrap_or_default(),
        reconcile = spec.reconcile,
        slurm_table = spec.slurm_table,
    );
    for ns in &spec.nodesets {
        t.push_str(&format!(
            r#"
[[nodeset]]
name = "{name}"
{region_line}
instance_template = "projects/demo-project/regions/{region}/instanceTemplates/{template}"
zones = [{zones}]
node_count_static = {st}
node_count_dynamic_max = {dy}
node_conf = "CPUs=1 RealMemory=500"
{model}
{lines}
[nodeset.dws_flex]
{flex}
{reservation}
"#,
            lines = ns.nodeset_lines,
            name = ns.name,
            region_line = ns.region.as_ref().map(|r| format!("region = \"{r}\"")).unwrap_or_default(),
            region = ns.region.as_deref().unwrap_or("us-central1"),
            zones = ns
                .zones
                .clone()
                .unwrap_or_else(|| {
                    vec![ns.region.as_ref().map_or("us-central1-a".to_string(), |r| format!("{r}-b"))]
                })
                .iter()
                .map(|z| format!("\"{z}\""))
                .collect::<Vec<_>>()
                .join(", "),
            template = ns.template(),
            model = ns
                .provisioning_model
                .as_ref()
                .map(|m| format!("provisioning_model = \"{m}\""))
                .unwrap_or_default(),
            st = ns.node_count_static,
            dy = ns.node_count_dynamic_max,
            flex = ns.dws_flex,
            reservation = ns
                .reservation
                .as_ref()
                .map(|(table, _)| format!("[nodeset.reservation]\n{table}"))
                .unwrap_or_default(),
        ));
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partition_gets_the_resume_timeout_its_nodeset_asks_for() {
        let nodesets = vec![StackNodeset::new("a", 0, 2).resume_timeout(20), StackNodeset::new("b", 0, 2)];
        assert_eq!(
            partition_line("PartitionName=a Nodes=hpc-a-[0-1] ResumeTimeout=65533 State=UP", &nodesets),
            "PartitionName=a Nodes=hpc-a-[0-1] ResumeTimeout=20 State=UP"
        );
        assert_eq!(
            partition_line("PartitionName=a Nodes=hpc-a-[0-1] State=UP", &nodesets),
            "PartitionName=a ResumeTimeout=20 Nodes=hpc-a-[0-1] State=UP"
        );
        // Another partition, or one whose name only starts like it, keeps its line.
        for line in [
            "PartitionName=b Nodes=hpc-b-[0-1] ResumeTimeout=65533 State=UP",
            "PartitionName=ab Nodes=hpc-ab-[0-1] ResumeTimeout=65533 State=UP",
        ] {
            assert_eq!(partition_line(line, &nodesets), line);
        }
    }
}
