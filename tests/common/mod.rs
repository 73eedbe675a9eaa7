//! Test support: a real simulator (in-process, real HTTP), the real `slurm-dws` daemon as a child process,
//! hooks spawned the way slurmctld spawns them, and reads of the real SQLite store.
#![allow(dead_code)]
// These worlds run real processes (the daemon, hooks) and wait for them in real time.
#![allow(clippy::disallowed_methods)]

use gce_sim::{self as sim, SimHandle, SimOptions};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_slurm-dws");

/// One isolated world: temp dir, config, simulator, maybe a daemon.
pub struct World {
    pub dir: tempfile::TempDir,
    pub sim: Option<SimHandle>,
    pub sim_url: String,
    pub config: PathBuf,
    pub daemon: Option<Child>,
    http: reqwest::Client,
}

/// Nodesets of a test world: `(name, static, dynamic, extra dws_flex lines)`.
pub type NodesetSpec<'a> = (&'a str, u32, u32, &'a str);

impl World {
    /// Starts a simulator and writes a config for `nodesets` (cluster `hpc`). Slurm commands point at an
    /// empty directory: no Slurm here (the end-to-end tests have a real one), and the daemon must cope.
    pub async fn new(nodesets: &[NodesetSpec<'_>], extra: &str) -> World {
        World::scaled(nodesets, extra, 1.0).await
    }

    /// Like [`World::new`], with the simulator's run durations passing `time_scale` times faster.
    pub async fn scaled(nodesets: &[NodesetSpec<'_>], extra: &str, time_scale: f64) -> World {
        let sim = sim::start(SimOptions {
            listen: "127.0.0.1:0".parse().unwrap(),
            boot_cmd: None,
            stop_cmd: None,
            time_scale,
        })
        .await
        .expect("simulator starts");
        let sim_url = sim.base_url();
        let mut w = World::with_endpoint(&sim_url, nodesets, extra);
        w.sim = Some(sim);
        // The project has each nodeset's template, as a real one must (GCE answers 404 for a
        // template that does not exist).
        for (name, ..) in nodesets {
            w.sim_post("templates", devcluster::stack::flex_template(&format!("{name}-flex"))).await;
        }
        w
    }

    /// A world whose config points at `endpoint` (no simulator of its own).
    pub fn with_endpoint(endpoint: &str, nodesets: &[NodesetSpec<'_>], extra: &str) -> World {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir_all(d.join("slurm-bin")).unwrap();
        let mut text = format!(
            r#"cluster_name = "hpc"
state_dir = "{state}"
socket = "{sock}"
log_file = "{log}"

[gcp]
project = "test-project"
region = "us-central1"
endpoint = "{endpoint}"
credentials = "none"
calls_per_minute = 100000
request_timeout = 10
retry_deadline = 20

[slurm]
bin_dir = "{bin}"
command_timeout = 5

[reconcile]
interval = 2
orphan_grace = 300
mig_gc_grace = 2
{extra}
"#,
            state = d.join("state").display(),
            sock = d.join("slurm-dws.sock").display(),
            log = d.join("slurm-dws.log").display(),
            bin = d.join("slurm-bin").display(),
        );
        for (name, st, dy, flex) in nodesets {
            text.push_str(&format!(
                r#"
[[nodeset]]
name = "{name}"
instance_template = "projects/test-project/regions/us-central1/instanceTemplates/{name}-flex"
zones = ["us-central1-a"]
node_count_static = {st}
node_count_dynamic_max = {dy}
[nodeset.dws_flex]
{flex}
"#
            ));
        }
        let config = d.join("slurm-dws.toml");
        std::fs::write(&config, text).unwrap();
        World {
            dir,
            sim: None,
            sim_url: endpoint.to_string(),
            config,
            daemon: None,
            http: reqwest::Client::new(),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn state_dir(&self) -> PathBuf {
        self.path().join("state")
    }

    /// Starts `slurm-dws daemon` and waits until its socket answers.
    pub fn start_daemon(&mut self) {
        let log = std::fs::File::create(self.path().join("daemon.log")).unwrap();
        let child = Command::new(BIN)
            .args(["--config", self.config.to_str().unwrap(), "daemon"])
            .env("SLURM_DWS_LOG", "info,slurm_dws=debug")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("daemon starts");
        self.daemon = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if std::os::unix::net::UnixStream::connect(self.path().join("slurm-dws.sock")).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("daemon did not bind its socket:\n{}", self.daemon_log());
    }

    /// SIGKILL, as a crash would.
    pub fn kill_daemon(&mut self) {
        if let Some(mut c) = self.daemon.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM and wait: a clean stop.
    pub fn stop_daemon(&mut self) -> std::process::ExitStatus {
        let mut c = self.daemon.take().expect("daemon running");
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(c.id() as i32), nix::sys::signal::Signal::SIGTERM)
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(s) = c.try_wait().unwrap() {
                return s;
            }
            assert!(Instant::now() < deadline, "daemon did not stop on SIGTERM");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn daemon_log(&self) -> String {
        std::fs::read_to_string(self.path().join("daemon.log")).unwrap_or_default()
    }

    /// Runs a hook the way slurmctld does: by its `slurm-dws-*` name, with only SLURM_CONF-style env.
    pub fn hook(&self, name: &str, hostlist: &str, resume_file: Option<&str>) -> Output {
        let link = self.path().join(format!("slurm-dws-{name}"));
        if !link.exists() {
            std::os::unix::fs::symlink(BIN, &link).unwrap();
        }
        let mut cmd = Command::new(&link);
        cmd.arg(hostlist).env_clear().env("SLURM_DWS_CONFIG", &self.config).current_dir(self.path());
        if let Some(content) = resume_file {
            let f = self.path().join(format!("resume-file-{}", rand_suffix()));
            std::fs::write(&f, content).unwrap();
            cmd.env("SLURM_RESUME_FILE", &f);
        }
        cmd.output().expect("hook runs")
    }

    /// Slurm resumes `nodes` for job `job` alone: the resume hook runs with a resume file naming
    /// that job and those nodes, and succeeds.
    pub fn resume_for_job(&self, job: u32, nodes: &str) {
        let out = self.hook("resume", nodes, Some(&resume_file(&[(job, nodes)], nodes)));
        assert!(out.status.success(), "resume hook for job {job}: {}", String::from_utf8_lossy(&out.stderr));
    }

    /// Runs an admin command and parses its `--json` output.
    pub fn cli_json(&self, args: &[&str]) -> Value {
        let out =
            Command::new(BIN).arg("--config").arg(&self.config).args(args).arg("--json").output().unwrap();
        // `status` exits 1 when the daemon is down or its last pass was degraded (as with this world's
        // empty Slurm bin_dir) and prints its JSON all the same.
        let answered =
            out.status.success() || (args.first() == Some(&"status") && out.status.code() == Some(1));
        assert!(answered, "slurm-dws {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{args:?}: not JSON ({e})"))
    }

    /// Writes fake `scontrol`, `sinfo` and `squeue` into this world's Slurm bin_dir that fail like a
    /// slurmctld that does not answer (exit 1, Slurm's message on stderr).
    pub fn break_slurm(&self) {
        use std::os::unix::fs::PermissionsExt;
        for cmd in ["scontrol", "sinfo", "squeue"] {
            let p = self.path().join("slurm-bin").join(cmd);
            let tmp = p.with_extension("tmp");
            std::fs::write(
                &tmp,
                "#!/bin/sh\necho \"slurm_load_node error: Unable to contact slurm controller (connect failure)\" >&2\nexit 1\n",
            )
            .unwrap();
            std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755)).unwrap();
            std::fs::rename(&tmp, &p).unwrap();
        }
    }

    /// Writes fake `scontrol`, `sinfo` and `squeue` that answer like a Slurm 22.05 with no nodes, no
    /// reservations and no jobs, and accept every update: passes read Slurm and are not degraded.
    pub fn healthy_slurm(&self) {
        devcluster::write_empty_slurm(&self.path().join("slurm-bin")).unwrap();
    }

    /// Writes fake `scontrol`, `sinfo` and `squeue` that answer like a Slurm 22.05 whose nodes are
    /// `nodes` — `(name, state, flags)`, as `sinfo --json` spells them — with no reservations and no
    /// jobs, and that record every `scontrol` call, one line each ([`World::scontrol_log`]).
    pub fn recording_slurm(&self, nodes: &[(&str, &str, &[&str])]) {
        use std::os::unix::fs::PermissionsExt;
        let bin = self.path().join("slurm-bin");
        self.set_slurm_nodes(nodes);
        let scontrol = format!(
            "#!/bin/sh\necho \"$*\" >> {log}\ncase \"$*\" in\n  --version) echo 'slurm 22.05.8' ;;\n  *show*reservation*) echo 'No reservations in the system' ;;\nesac\nexit 0\n",
            log = bin.join("scontrol.log").display()
        );
        let sinfo = format!("#!/bin/sh\ncat {}\n", bin.join("sinfo.json").display());
        let scripts = [
            ("scontrol", scontrol),
            ("sinfo", sinfo),
            ("squeue", "#!/bin/sh\necho '{\"meta\":{},\"errors\":[],\"jobs\":[]}'\n".to_string()),
        ];
        for (cmd, text) in scripts {
            let p = bin.join(cmd);
            let tmp = p.with_extension("tmp");
            std::fs::write(&tmp, text).unwrap();
            std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755)).unwrap();
            std::fs::rename(&tmp, &p).unwrap();
        }
    }

    /// Replaces the fake `scontrol` of [`World::recording_slurm`] with one that also keeps the
    /// reservations it creates and deletes (one name a line), and shows them as `scontrol -o show
    /// reservation` does.
    pub fn keep_reservations(&self) {
        use std::os::unix::fs::PermissionsExt;
        let bin = self.path().join("slurm-bin");
        let (log, res) = (bin.join("scontrol.log"), bin.join("reservations"));
        let script = format!(
            r#"#!/bin/sh
echo "$*" >> {log}
touch {res}
case "$*" in
  --version) echo 'slurm 22.05.8' ;;
  create\ reservation*)
    name=$(echo "$*" | sed -n 's/.*reservationname=\([^ ]*\).*/\1/p')
    if grep -qx "$name" {res}; then echo 'Error creating the reservation: Duplicate reservation name' >&2; exit 1; fi
    echo "$name" >> {res}
    echo "Reservation created: $name" ;;
  delete\ reservation=*)
    name=${{2#reservation=}}
    if ! grep -qx "$name" {res}; then echo 'Error deleting reservation: Requested reservation is invalid' >&2; exit 1; fi
    grep -vx "$name" {res} > {res}.tmp; mv {res}.tmp {res} ;;
  *show\ reservation*)
    if [ -s {res} ]; then sed 's/.*/ReservationName=& Nodes=x Flags=MAINT,IGNORE_JOBS/' {res}; else echo 'No reservations in the system'; fi ;;
esac
exit 0
"#,
            log = log.display(),
            res = res.display()
        );
        let p = bin.join("scontrol");
        let tmp = p.with_extension("tmp");
        std::fs::write(&tmp, script).unwrap();
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::rename(&tmp, &p).unwrap();
    }

    /// The reservations the fake Slurm of [`World::keep_reservations`] holds now.
    pub fn slurm_reservations(&self) -> Vec<String> {
        let text =
            std::fs::read_to_string(self.path().join("slurm-bin").join("reservations")).unwrap_or_default();
        text.lines().map(String::from).collect()
    }

    /// What the fake Slurm of [`World::recording_slurm`] shows from now on (a node "down" has a
    /// `slurm-dws:` reason).
    pub fn set_slurm_nodes(&self, nodes: &[(&str, &str, &[&str])]) {
        let nodes: Vec<Value> = nodes
            .iter()
            .map(|(name, state, flags)| {
                // A DOWN node carries a reason as slurm-dws sets it.
                let reason = if *state == "down" { "slurm-dws: set by the test" } else { "" };
                json!({"name": name, "state": state, "state_flags": flags, "reason": reason})
            })
            .collect();
        let p = self.path().join("slurm-bin").join("sinfo.json");
        let tmp = p.with_extension("tmp");
        std::fs::write(&tmp, json!({"meta": {}, "errors": [], "nodes": nodes}).to_string()).unwrap();
        std::fs::rename(&tmp, &p).unwrap();
    }

    /// The `scontrol` calls the fake Slurm of [`World::recording_slurm`] got, one per line.
    pub fn scontrol_log(&self) -> String {
        std::fs::read_to_string(self.path().join("slurm-bin").join("scontrol.log")).unwrap_or_default()
    }

    /// The `scontrol update` calls that named `node` (alone or in a hostlist that is just it).
    pub fn updates_of(&self, node: &str) -> Vec<String> {
        self.scontrol_log()
            .lines()
            .filter(|l| l.starts_with("update") && l.contains(&format!("nodename={node} ")))
            .map(String::from)
            .collect()
    }

    /// The last pass's iteration, as `status` reports it.
    pub fn iteration(&self) -> u64 {
        self.cli_json(&["status"])["last_pass"]["iteration"].as_u64().unwrap_or(0)
    }

    /// Waits until `n` more passes have run.
    pub fn wait_passes(&self, n: u64, secs: u64) {
        let before = self.iteration();
        self.wait_for(&format!("{n} more passes"), secs, || (self.iteration() >= before + n).then_some(()));
    }

    pub fn cli(&self, args: &[&str]) -> Output {
        Command::new(BIN).arg("--config").arg(&self.config).args(args).output().unwrap()
    }

    /// `cli` as on a terminal `columns` wide (`$COLUMNS`); piped output is otherwise not cut.
    pub fn cli_columns(&self, columns: usize, args: &[&str]) -> Output {
        Command::new(BIN)
            .env("COLUMNS", columns.to_string())
            .arg("--config")
            .arg(&self.config)
            .args(args)
            .output()
            .unwrap()
    }

    pub fn nodes(&self) -> Vec<Value> {
        self.cli_json(&["nodes"]).as_array().cloned().unwrap_or_default()
    }

    /// The events of `kind` (`events --json`), newest first.
    pub fn events_of(&self, kind: &str) -> Vec<Value> {
        self.cli_json(&["events"])
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|e| e["kind"] == kind)
            .collect()
    }

    pub fn node_states(&self) -> std::collections::BTreeMap<String, String> {
        self.nodes()
            .into_iter()
            .map(|n| (n["name"].as_str().unwrap().to_string(), n["state"].as_str().unwrap().to_string()))
            .collect()
    }

    /// Polls `f` until it returns Some or `secs` pass.
    pub fn wait_for<T>(&self, what: &str, secs: u64, mut f: impl FnMut() -> Option<T>) -> T {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            if let Some(v) = f() {
                return v;
            }
            if Instant::now() > deadline {
                panic!(
                    "timed out after {secs}s waiting for {what}\n--- daemon log (tail) ---\n{}",
                    tail(&self.daemon_log(), 40)
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    // ---- the simulator's control API --------------------------------------------------------------------

    fn control(&self, path: &str) -> String {
        let base = self.sim_url.trim_end_matches('/').trim_end_matches("/compute/v1");
        format!("{base}/_sim/{path}")
    }

    pub async fn sim_state(&self) -> Value {
        self.http.get(self.control("state")).send().await.unwrap().json().await.unwrap()
    }

    /// GET a control path (`reservations`, `future-reservations`, ...), parsed.
    pub async fn sim_get(&self, path: &str) -> Value {
        self.http.get(self.control(path)).send().await.unwrap().json().await.unwrap()
    }

    pub async fn sim_calls(&self) -> Value {
        self.http.get(self.control("calls")).send().await.unwrap().json().await.unwrap()
    }

    pub async fn sim_post(&self, path: &str, body: Value) {
        let r = self.http.post(self.control(path)).json(&body).send().await.unwrap();
        assert!(r.status().is_success(), "sim {path}: {}", r.text().await.unwrap());
    }

    /// POST that may be refused (e.g. expiring a VM that is being deleted right now): whether it took.
    pub async fn sim_try_post(&self, path: &str, body: Value) -> bool {
        let r = self.http.post(self.control(path)).json(&body).send().await.unwrap();
        r.status().is_success()
    }

    pub async fn sim_delete(&self, path: &str) {
        self.http.delete(self.control(path)).send().await.unwrap();
    }

    pub async fn capacity(&self, rule: Value) {
        self.sim_post("capacity", rule).await;
    }

    /// Names of the VMs the simulator has, sorted.
    pub async fn sim_vms(&self) -> Vec<String> {
        let s = self.sim_state().await;
        let mut v: Vec<String> = s["instances"]
            .as_array()
            .map(|a| a.iter().filter_map(|i| i["name"].as_str().map(String::from)).collect())
            .unwrap_or_default();
        v.sort();
        v
    }

    pub async fn sim_migs(&self) -> Vec<Value> {
        self.sim_state().await["migs"].as_array().cloned().unwrap_or_default()
    }
}

impl Drop for World {
    fn drop(&mut self) {
        self.kill_daemon();
    }
}

/// Whether a log line names `name` as a whole word (`hpc-a-3`, not `hpc-a-30`).
fn mentions(line: &str, name: &str) -> bool {
    line.match_indices(name).any(|(i, _)| {
        let after = line[i + name.len()..].chars().next();
        !matches!(after, Some(c) if c.is_ascii_alphanumeric())
    })
}

pub fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

pub fn rand_suffix() -> String {
    format!("{:x}", rand::random::<u64>())
}

/// A 22.05-shaped resume file.
pub fn resume_file(jobs: &[(u32, &str)], all: &str) -> String {
    json!({
        "jobs": jobs.iter().map(|(j, n)| json!({"job_id": j, "nodes": n})).collect::<Vec<_>>(),
        "all_nodes": all,
    })
    .to_string()
}

pub fn count(calls: &Value, method: &str) -> u64 {
    calls["by_method"][method].as_u64().unwrap_or(0)
}

// ---- convergence: the invariants the stress tests check ----------------------------------------------

/// The simulator's MIGs: name → (target size, non-final resize requests).
pub async fn sim_migs(w: &World) -> BTreeMap<String, (u64, usize)> {
    w.sim_migs()
        .await
        .into_iter()
        .map(|m| {
            let open = m["resizeRequests"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter(|r| {
                            !matches!(r["state"].as_str(), Some("SUCCEEDED" | "FAILED" | "CANCELLED"))
                        })
                        .count()
                })
                .unwrap_or(0);
            let size =
                m["targetSize"].as_u64().or_else(|| m["targetSize"].as_str()?.parse().ok()).unwrap_or(0);
            (m["name"].as_str().unwrap_or_default().to_string(), (size, open))
        })
        .collect()
}

/// Every resize request name the simulator holds, with its MIG.
pub async fn sim_requests(w: &World) -> Vec<(String, String)> {
    let mut out = vec![];
    for m in w.sim_migs().await {
        for r in m["resizeRequests"].as_array().cloned().unwrap_or_default() {
            out.push((
                m["name"].as_str().unwrap_or_default().into(),
                r["name"].as_str().unwrap_or_default().into(),
            ));
        }
    }
    out
}

pub fn store_requests(w: &World) -> Vec<Value> {
    w.cli_json(&["requests"]).as_array().cloned().unwrap_or_default()
}

/// The crash-safety invariants (docs/architecture.md, "What the rules guarantee"), once the daemon has
/// had time to converge:
/// - every node Slurm wants has exactly one VM, and no other node has one;
/// - no MIG or resize request in GCE that the store does not know (no duplicate, nothing leaked);
/// - no empty owned MIG without an open request (after mig_gc_grace), nor one whose members have no VM;
/// - nothing left half-done: no open request, no pending outbox entry.
pub async fn converged(w: &World, wanted: &BTreeSet<String>) -> Result<(), String> {
    let vms: BTreeSet<String> = w.sim_vms().await.into_iter().collect();
    if &vms != wanted {
        let missing: Vec<_> = wanted.difference(&vms).collect();
        let extra: Vec<_> = vms.difference(wanted).collect();
        return Err(format!("VMs differ: missing {missing:?}, extra {extra:?}"));
    }
    let migs = sim_migs(w).await;
    if let Some((m, _)) = migs.iter().find(|(_, (size, open))| *size == 0 && *open == 0) {
        return Err(format!("empty MIG {m} still there"));
    }
    // A MIG whose members have no VM (a preempted spot VM's member stays, with the targetSize) is
    // empty too.
    for m in w.sim_migs().await {
        let managed = m["managedInstances"].as_array().cloned().unwrap_or_default();
        let (name, open) =
            (m["name"].as_str().unwrap_or_default(), migs.get(m["name"].as_str().unwrap_or_default()));
        if !managed.is_empty()
            && managed.iter().all(|mi| mi.get("instanceStatus").is_none() && mi["currentAction"] == "NONE")
            && open.is_some_and(|(_, open)| *open == 0)
        {
            return Err(format!("MIG {name} holds only members with no VM: {managed:?}"));
        }
    }
    let known_migs: BTreeSet<String> = w
        .cli_json(&["migs"])
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap().to_string())
        .collect();
    if let Some(m) = migs.keys().find(|m| !known_migs.contains(*m)) {
        return Err(format!("MIG {m} in GCE is not on record"));
    }
    let reqs = store_requests(w);
    let known_rrs: BTreeSet<(String, String)> = reqs
        .iter()
        .map(|r| (r["mig"].as_str().unwrap().to_string(), r["name"].as_str().unwrap().to_string()))
        .collect();
    for rr in sim_requests(w).await {
        if !known_rrs.contains(&rr) {
            return Err(format!("resize request {rr:?} in GCE is not on record"));
        }
    }
    let active = w.cli_json(&["requests", "--active"]);
    if let Some(r) = active.as_array().and_then(|a| a.first()) {
        return Err(format!("a request is still in flight: {r}"));
    }
    let status = w.cli_json(&["status"]);
    if status["pending_work"]["outbox"].as_u64() != Some(0)
        || status["pending_work"]["inbox"].as_u64() != Some(0)
    {
        return Err(format!("work pending: {}", status["pending_work"]));
    }
    Ok(())
}

pub async fn wait_converged(w: &World, wanted: &BTreeSet<String>, secs: u64) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        match converged(w, wanted).await {
            Ok(()) => return,
            Err(why) if Instant::now() > deadline => {
                // The daemon's whole story of each VM that differs: what it did to it and why.
                let vms: BTreeSet<String> = w.sim_vms().await.into_iter().collect();
                let log = w.daemon_log();
                let mut story = String::new();
                for vm in wanted.symmetric_difference(&vms) {
                    let lines: Vec<&str> = log.lines().filter(|l| mentions(l, vm)).collect();
                    story.push_str(&format!(
                        "--- daemon log lines naming {vm} ---\n{}\n",
                        tail(&lines.join("\n"), 60)
                    ));
                }
                panic!(
                    // `why` comes first and again last: a CI log shows only the tail of a long message.
                    "not converged after {secs}s: {why}\n--- nodes ---\n{}\n--- events (tail) ---\n{}\n--- daemon log (tail) ---\n{}\n{story}--- not converged after {secs}s: {why}",
                    String::from_utf8_lossy(&w.cli(&["nodes"]).stdout),
                    tail(&String::from_utf8_lossy(&w.cli(&["events"]).stdout), 40),
                    tail(&w.daemon_log(), 20)
                )
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(300)).await,
        }
    }
}
