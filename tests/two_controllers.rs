//! Two real slurmctlds (Slurm 22.05, the host's), each on its own "host" — its own network, UTS
//! and mount namespaces, made by the test (devcluster's `HostNet`: private 10.X addresses on veth
//! pairs, nothing else touched) — with a slurm-dws daemon beside each, one GCE simulator both reach,
//! and slurmd nodes on the machine that both controllers reach. The simulator records each call's
//! peer address, so the writes of each daemon are told apart.
//!
//! Shown: only the daemon beside the controller in charge writes to GCE; the primary's host dies
//! (slurmctld and daemon SIGKILLed by PID) right after a job's resume hook ran and its daemon sent
//! the MIG insert, before any VM exists: the backup takes over, its daemon takes the shared state
//! and the job completes long before ResumeTimeout, with one MIG and one resize request; the
//! history from before the takeover is in the new daemon's `events`; the primary back, the roles
//! follow Slurm's and a new job runs; at the end no VM or MIG is left. Every process and namespace
//! the test made goes on drop, pass or fail.

// Real slurmctlds, slurmds and daemons: the test waits for them in real time.
#![allow(clippy::disallowed_methods)]

use devcluster::stack::{flex_template, http};
use devcluster::{ClusterSpec, HostNet, LocalCluster, SlurmGeneration};
use serde_json::{json, Value};
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

const BIN: &str = env!("CARGO_BIN_EXE_slurm-dws");

/// A child process killed (SIGKILL, by PID) and reaped on drop.
struct Proc(Option<Child>);

impl Proc {
    fn kill(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The pieces, dropped in this order (fields drop as declared): the daemons, the cluster (its
/// slurmctlds, slurmds and munged), the simulator, the directory, and last the namespaces.
struct TwoHosts {
    daemons: Vec<(String, Proc)>,
    cluster: LocalCluster,
    _sim: Proc,
    /// The loopback ports of each host that lead to the simulator.
    _forwards: Vec<devcluster::LoopbackForward>,
    sim_url: String,
    dir: tempfile::TempDir,
    config: PathBuf,
    net: HostNet,
}

impl TwoHosts {
    fn host_dir(&self) -> PathBuf {
        self.cluster.dir().join("host")
    }

    /// `name`'s own state directory etc., as seen from the machine.
    fn own(&self, name: &str) -> PathBuf {
        devcluster::own_dir(&self.host_dir(), name)
    }

    fn start_daemon(&mut self, name: &str) {
        let log = std::fs::File::create(self.dir.path().join(format!("daemon-{name}.log"))).unwrap();
        let child = self
            .cluster
            .on_host(name, Path::new(BIN))
            .unwrap()
            .arg("--config")
            .arg(&self.config)
            .arg("daemon")
            .env("SLURM_DWS_LOG", "info,slurm_dws=debug")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.daemons.retain(|(n, _)| n != name);
        self.daemons.push((name.to_string(), Proc(Some(child))));
        let sock = self.own(name).join("slurm-dws.sock");
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::os::unix::net::UnixStream::connect(&sock).is_err() {
            assert!(Instant::now() < deadline, "daemon {name}: no socket\n{}", self.log(name));
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn kill_daemon(&mut self, name: &str) {
        for (n, d) in &mut self.daemons {
            if n == name {
                d.kill();
            }
        }
    }

    fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(format!("daemon-{name}.log"))).unwrap_or_default()
    }

    /// `slurm-dws ARGS --json` on `name`'s host.
    fn cli_json(&self, name: &str, args: &[&str]) -> Value {
        let out = self
            .cluster
            .on_host(name, Path::new(BIN))
            .unwrap()
            .arg("--config")
            .arg(&self.config)
            .args(args)
            .arg("--json")
            .output()
            .unwrap();
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
    }

    fn role(&self, name: &str) -> String {
        self.cli_json(name, &["status"])["controller"]["role"].as_str().unwrap_or("").to_string()
    }

    fn sim(&self, method: &str, path: &str, body: Option<&Value>) -> Value {
        let base = self.sim_url.trim_end_matches("compute/v1/");
        http(&format!("{base}_sim/{path}"), method, body)
    }

    /// GCE writes (anything but reads and operation waits) by the caller at `addr`.
    fn writes_by(&self, addr: &str) -> u64 {
        let calls = self.sim("GET", "calls", None);
        let Some(by) = calls["by_peer"][addr].as_object() else { return 0 };
        by.iter()
            .filter(|(m, _)| {
                let verb = m.rsplit('.').next().unwrap_or("");
                !(verb.starts_with("get")
                    || verb.starts_with("list")
                    || verb == "aggregatedList"
                    || verb == "wait")
            })
            .map(|(_, n)| n.as_u64().unwrap_or(0))
            .sum()
    }

    fn names(&self, what: &str) -> Vec<String> {
        let mut v: Vec<String> = self.sim("GET", "state", None)[what]
            .as_array()
            .map(|a| a.iter().filter_map(|i| i["name"].as_str().map(String::from)).collect())
            .unwrap_or_default();
        v.sort();
        v
    }

    fn resize_requests(&self) -> usize {
        self.sim("GET", "state", None)["migs"]
            .as_array()
            .map(|a| a.iter().map(|m| m["resizeRequests"].as_array().map_or(0, Vec::len)).sum())
            .unwrap_or(0)
    }

    fn wait<T>(&self, what: &str, secs: u64, f: impl FnMut() -> Option<T>) -> T {
        devcluster::wait::poll(
            what,
            secs,
            Duration::from_millis(300),
            |seen| {
                format!(
                    "{seen}\n--- ctla ---\n{}\n--- ctlb ---\n{}\n--- slurmctld ---\n{}\n--- GCE ---\n{}",
                    tail(&self.log("ctla"), 40),
                    tail(&self.log("ctlb"), 40),
                    self.cluster.slurmctld_log_tail(30),
                    self.sim("GET", "state", None)
                )
            },
            f,
        )
    }
}

fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Starts it all: the hosts ctla and ctlb, the cluster (node and partition lines from `check-config
/// --print-slurm-conf`, the nodes at the machine's address), the simulator there, one config for
/// both daemons (its host-local paths in `host/`, `controller` left to the host name), the daemons.
fn start() -> TwoHosts {
    let net = HostNet::create(&["ctla", "ctlb"]).expect("controller hosts");
    let dir = tempfile::tempdir().unwrap();
    let hooks = dir.path().join("hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    for h in ["resume", "suspend", "resume-fail"] {
        std::os::unix::fs::symlink(BIN, hooks.join(format!("slurm-dws-{h}"))).unwrap();
    }
    let shared = dir.path().join("shared");
    std::fs::create_dir_all(&shared).unwrap();
    let config_for = |host: &Path, endpoint: &str, conf: Option<&Path>| {
        format!(
            r#"cluster_name = "hpc"
state_dir = "{host}/state"
socket = "{host}/slurm-dws.sock"
log_file = "{host}/slurm-dws.log"

[daemon]
shared_state_dir = "{shared}"

[gcp]
project = "demo-project"
region = "us-central1"
endpoint = "{endpoint}"
credentials = "none"
calls_per_minute = 6000

[slurm]
bin_dir = "/usr/bin"
{conf}
command_timeout = 10

[reconcile]
interval = 2
mig_gc_grace = 5

[[nodeset]]
name = "a"
instance_template = "projects/demo-project/regions/us-central1/instanceTemplates/a-flex"
zones = ["us-central1-a"]
node_count_static = 0
node_count_dynamic_max = 4
node_conf = "CPUs=1 RealMemory=500"
[nodeset.dws_flex]
"#,
            host = host.display(),
            shared = shared.display(),
            conf = conf.map(|c| format!("conf = \"{}\"", c.display())).unwrap_or_default(),
        )
    };
    let draft = dir.path().join("draft.toml");
    std::fs::write(&draft, config_for(dir.path(), "http://127.0.0.1:9/compute/v1/", None)).unwrap();
    let lines = Command::new(BIN)
        .args([
            "check-config",
            "--config-only",
            "--print-slurm-conf",
            "--slurm-version",
            "22.05",
            "--hook-dir",
        ])
        .arg(&hooks)
        .arg(&draft)
        .output()
        .unwrap();
    assert!(lines.status.success(), "{}", String::from_utf8_lossy(&lines.stderr));
    let mut spec = ClusterSpec::new("dws2c").slurm(SlurmGeneration::Bookworm);
    spec.controllers = net.hosts.clone();
    for l in String::from_utf8_lossy(&lines.stdout).lines() {
        match l.split('=').next().unwrap_or("") {
            "NodeName" => spec.node_lines.push(format!("{l} NodeAddr={}", net.machine_addr)),
            "PartitionName" => spec.partition_lines.push(l.to_string()),
            "ResumeProgram" | "SuspendProgram" | "ResumeFailProgram" | "SuspendExcNodes" | "PrivateData" => {
                spec.extra_conf.push(l.to_string())
            }
            _ => {}
        }
    }
    let cluster = LocalCluster::start(spec).expect("two slurmctlds");

    let mut sim = Command::new(devcluster::sim_bin(BIN.as_ref()))
        .args(["--listen", &format!("{}:0", net.machine_addr), "--boot-cmd"])
        .arg(cluster.slurmd_start_command("{name}"))
        .arg("--stop-cmd")
        .arg(cluster.slurmd_stop_command())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufReader::new(sim.stdout.take().unwrap()).read_line(&mut first).unwrap();
    let addr = first.trim().rsplit(' ').next().unwrap_or_default().to_string();
    // The daemons reach it at their own loopback (`credentials = "none"` wants a loopback
    // endpoint), carried to the machine's address: the simulator sees each host's address.
    let sim_addr: std::net::SocketAddr = addr.parse().unwrap();
    let forwards: Vec<_> = net
        .hosts
        .iter()
        .map(|h| devcluster::forward_loopback(h, sim_addr).expect("loopback forward"))
        .collect();
    let sim_url = format!("http://{addr}/compute/v1/");
    let daemon_url = format!("http://127.0.0.1:{}/compute/v1/", sim_addr.port());
    let config = cluster.conf_path().with_file_name("slurm-dws.toml");
    std::fs::write(&config, config_for(&cluster.dir().join("host"), &daemon_url, Some(&cluster.conf_path())))
        .unwrap();
    let mut w = TwoHosts {
        daemons: Vec::new(),
        cluster,
        _sim: Proc(Some(sim)),
        _forwards: forwards,
        sim_url,
        dir,
        config,
        net,
    };
    assert!(w.sim("POST", "templates", Some(&flex_template("a-flex"))).is_object());
    w.start_daemon("ctla");
    w.start_daemon("ctlb");
    w
}

fn job_state(w: &TwoHosts, job: u32) -> String {
    w.cluster.job_state(job).unwrap_or_default()
}

#[test]
fn a_takeover_mid_resume_on_real_slurm_finishes_the_job_with_one_mig_and_one_request() {
    if !SlurmGeneration::Bookworm.available_for_tests("two-controller tests") {
        return;
    }
    let mut w = start();
    let (a_addr, b_addr) = (w.net.hosts[0].addr.clone(), w.net.hosts[1].addr.clone());
    w.wait("ctla in charge, ctlb standby", 30, || {
        (w.role("ctla") == "in_charge" && w.role("ctlb") == "standby").then_some(())
    });
    let b_status = w.cli_json("ctlb", &["status"]);
    assert_eq!(b_status["controller"]["in_charge"], "ctla", "{b_status}");

    // The MIG insert hangs: the primary dies after its daemon recorded the resume and sent it, before
    // any VM exists.
    let insert = "regionInstanceGroupManagers.insert";
    w.sim("POST", "faults", Some(&json!({"method": insert, "status": 200, "delay_ms": 15000, "count": 1})));
    let out = w.cluster.dir().join("jobs").join("one.out");
    let started = Instant::now();
    let job = w
        .cluster
        .sbatch(&["-N2", "--time=10", "-p", "a", "-o", out.to_str().unwrap(), "--wrap", "srun hostname"])
        .unwrap();
    w.wait("ctla's daemon sent the MIG insert", 60, || {
        (w.sim("GET", "calls", None)["by_peer"][&a_addr][insert].as_u64() == Some(1)).then_some(())
    });
    let sent = SystemTime::now();
    let copy = w.dir.path().join("shared").join("slurm-dws-state.db");
    w.wait("a shared copy after the insert", 20, || {
        let m = std::fs::metadata(&copy).and_then(|m| m.modified()).ok()?;
        (m > sent).then_some(())
    });
    assert_eq!(w.writes_by(&b_addr), 0, "the standby wrote nothing");
    assert!(w.names("instances").is_empty(), "no VM yet");
    w.cluster.kill_controller("ctla").unwrap();
    w.kill_daemon("ctla");
    eprintln!("[two-controllers] primary killed {:?} after sbatch", started.elapsed());

    w.wait("ctlb in charge", 60, || (w.role("ctlb") == "in_charge").then_some(()));
    w.wait("the job COMPLETED", 120, || (job_state(&w, job) == "COMPLETED").then_some(()));
    let took = started.elapsed();
    eprintln!("[two-controllers] job completed {took:?} after sbatch");
    assert!(took < Duration::from_secs(180), "long before ResumeTimeout: {took:?}");
    let mut ran: Vec<String> = std::fs::read_to_string(&out).unwrap().lines().map(String::from).collect();
    ran.sort();
    assert_eq!(ran.len(), 2, "{ran:?}");
    assert_eq!(w.names("migs").len(), 1, "one MIG: {:?}", w.names("migs"));
    assert_eq!(w.resize_requests(), 1, "one resize request");
    assert!(w.writes_by(&b_addr) > 0, "the new daemon in charge finished it");
    let events = w.cli_json("ctlb", &["events"]).to_string();
    assert!(events.contains("\"took_charge\"") && events.contains("controller ctlb in charge"), "{events}");
    assert!(events.contains("\"request_planned\""), "the primary's history came with the state: {events}");

    // The primary back: Slurm puts it in charge again, and the daemons follow.
    w.cluster.start_controller("ctla").unwrap();
    w.start_daemon("ctla");
    w.wait("ctla in charge again, ctlb standby", 60, || {
        (w.role("ctla") == "in_charge" && w.role("ctlb") == "standby").then_some(())
    });
    let b_writes = w.writes_by(&b_addr);
    let job2 = w
        .cluster
        .sbatch(&["-N1", "--time=10", "-p", "a", "-o", "/dev/null", "--wrap", "srun hostname"])
        .unwrap();
    w.wait("the new job COMPLETED", 120, || (job_state(&w, job2) == "COMPLETED").then_some(()));
    assert_eq!(w.writes_by(&b_addr), b_writes, "the standby wrote nothing after the primary came back");
    let a_events = w.cli_json("ctla", &["events"]).to_string();
    assert!(a_events.contains("controller ctlb in charge"), "ctlb's history came back: {a_events}");

    // At the end nothing owned is left: VMs gone after SuspendTime, MIGs after mig_gc_grace.
    w.wait("no VM and no MIG left", 180, || {
        (w.names("instances").is_empty() && w.names("migs").is_empty()).then_some(())
    });
}
