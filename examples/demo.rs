//! `make demo`: slurm-dws end to end on this machine, narrated.
//!
//! A real slurmctld with DWS Flex cloud nodes; the bundled Compute Engine simulator as GCE, whose
//! "VMs" are real slurmds; the slurm-dws daemon and hooks in between. Two jobs go through the whole
//! lifecycle (queued → provisioning → running → done → powered down → MIG deleted), then a stockout
//! shows what a failure looks like, how a job that names a second partition falls back to it at
//! once, and how a job for the failing partition alone recovers. Everything it starts is stopped at the
//! end, pass or fail. Needs root and Debian's Slurm (`make demo` installs it); `SLURM=24.11 make demo`
//! runs it on Debian trixie's Slurm 24.11 (`SLURM=26.05`: forky's 26.05) from a root of
//! scripts/slurm-root.sh instead.

// A live show of real processes, narrated with the time they take.
#![allow(clippy::disallowed_methods)]

use devcluster::stack::{Stack, StackNodeset, StackSpec};
use devcluster::SlurmGeneration;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

struct Narrator {
    t0: Instant,
    nodes: BTreeMap<String, String>,
    requests: BTreeMap<String, String>,
    migs: Vec<String>,
}

impl Narrator {
    fn say(&self, msg: &str) {
        println!("[{:>6.1}s] {msg}", self.t0.elapsed().as_secs_f64());
    }

    fn step(&self, title: &str) {
        println!("\n== {title}");
    }

    /// Prints what changed since the last look: slurm-dws's node states (with Slurm's), requests, MIGs.
    fn look(&mut self, s: &Stack) {
        let slurm = s.cluster.node_states().unwrap_or_default();
        if let Some(nodes) = s.cli_json(&["nodes"]).as_array() {
            for n in nodes {
                let name = n["name"].as_str().unwrap_or_default().to_string();
                let line = format!(
                    "{} (Slurm: {}){}",
                    n["state"].as_str().unwrap_or("?"),
                    slurm.get(&name).map(String::as_str).unwrap_or("?"),
                    n["job_id"].as_u64().map(|j| format!(", job {j}")).unwrap_or_default()
                );
                if self.nodes.get(&name) != Some(&line) {
                    self.say(&format!("node {name:<8} {line}"));
                    self.nodes.insert(name, line);
                }
            }
        }
        if let Some(rs) = s.cli_json(&["requests"]).as_array() {
            for r in rs {
                let name = r["name"].as_str().unwrap_or_default().to_string();
                let line = format!(
                    "{} in MIG {} for {} (run duration {} s){}",
                    r["state"].as_str().unwrap_or("not yet sent"),
                    r["mig"].as_str().unwrap_or("?"),
                    r["nodes"].as_array().map(|a| a.len()).unwrap_or(0).to_string() + " node(s)",
                    r["run_duration"],
                    r["last_error"].as_str().map(|e| format!(" — {e}")).unwrap_or_default()
                );
                if self.requests.get(&name) != Some(&line) {
                    self.say(&format!("resize request {name}: {line}"));
                    self.requests.insert(name, line);
                }
            }
        }
        let migs = s.migs();
        if migs != self.migs {
            self.say(&format!(
                "MIGs in GCE: {}",
                if migs.is_empty() { "none".to_string() } else { migs.join(", ") }
            ));
            self.migs = migs;
        }
    }

    /// Looks every 250 ms until `done` holds; returns how long it took.
    fn until(&mut self, s: &Stack, what: &str, secs: u64, mut done: impl FnMut(&Stack) -> bool) -> Duration {
        let start = Instant::now();
        loop {
            self.look(s);
            if done(s) {
                return start.elapsed();
            }
            if start.elapsed() > Duration::from_secs(secs) {
                println!("\n{}", s.cli(&["status"]));
                println!("{}", s.cli(&["events"]));
                panic!("the demo timed out after {secs} s waiting for {what}");
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

fn job_state(s: &Stack, job: u32) -> String {
    s.cluster.job_state(job).unwrap_or_default()
}

fn bin_dir() -> PathBuf {
    // target/<profile>/examples/demo → target/<profile>
    let exe = std::env::current_exe().expect("own path");
    exe.parent().and_then(|p| p.parent()).expect("target dir").to_path_buf()
}

fn main() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("make demo: needs root (it runs slurmctld, slurmd and munged on this machine)");
        std::process::exit(2);
    }
    // `SLURM=24.11 make demo` runs it on Debian trixie's Slurm 24.11, `SLURM=26.05` on forky's 26.05
    // (the roots of scripts/slurm-root.sh, built when missing), instead of the host's 22.05.
    let slurm = match std::env::var("SLURM") {
        Ok(v) if !v.is_empty() => SlurmGeneration::parse(&v).unwrap_or_else(|| {
            eprintln!(
                "make demo: SLURM={v}: say 22.05 (the host's), 24.11 (the trixie root) or 26.05 (the forky root)"
            );
            std::process::exit(2);
        }),
        _ => SlurmGeneration::Bookworm,
    };
    if let Err(e) = slurm.ensure_ready() {
        eprintln!("make demo: {slurm} is not usable here: {e}");
        std::process::exit(2);
    }
    let bins = bin_dir();
    let spec = StackSpec {
        reconcile: "mig_gc_grace = 5\nbackoff_initial = 20\nbackoff_max = 20".into(),
        slurm,
        ..StackSpec::new(
            bins.join("slurm-dws"),
            bins.join("slurm-dws-sim"),
            vec![StackNodeset::new("a", 0, 4), StackNodeset::new("b", 0, 2)],
        )
    };
    let mut n =
        Narrator { t0: Instant::now(), nodes: BTreeMap::new(), requests: BTreeMap::new(), migs: vec![] };
    n.step("Starting a local Slurm cluster, the Compute Engine simulator and the slurm-dws daemon");
    let s = match Stack::start(spec) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("make demo: could not start the stack: {e}");
            std::process::exit(1);
        }
    };
    n.say(&format!("{slurm}: slurmctld on port {}, simulator at {}", s.cluster.slurmctld_port(), s.sim_url));
    n.say("nodeset a: 4 DWS Flex nodes hpc-a-[0-3], nodeset b: 2 hpc-b-[0-1], all powered down (no VMs)");
    n.look(&s);

    n.step("Submitting two jobs: a 2-node job (--time=30) and a 1-node job (--time=10)");
    let jobs_dir = s.cluster.dir().join("jobs");
    let submit = |name: &str, args: &[&str]| -> u32 {
        let out = jobs_dir.join(format!("{name}.out"));
        let mut a: Vec<&str> = args.to_vec();
        if !a.contains(&"-p") {
            a.extend(["-p", "a"]);
        }
        let o = out.to_str().unwrap().to_string();
        a.extend(["-o", &o, "--wrap", "srun printenv SLURMD_NODENAME; sleep 4"]);
        s.cluster.sbatch(&a).expect("sbatch")
    };
    let j1 = submit("big", &["-N2", "--time=30"]);
    let j2 = submit("small", &["-N1", "--time=10"]);
    n.say(&format!("sbatch: job {j1} (2 nodes), job {j2} (1 node)"));
    let to_running = n.until(&s, "both jobs running", 90, |s| {
        [j1, j2].iter().all(|j| ["RUNNING", "COMPLETING", "COMPLETED"].contains(&job_state(s, *j).as_str()))
    });
    n.say(&format!("both jobs RUNNING {:.1} s after sbatch", to_running.as_secs_f64()));
    let to_done =
        n.until(&s, "both jobs completed", 90, |s| [j1, j2].iter().all(|j| job_state(s, *j) == "COMPLETED"));
    for (name, j) in [("big", j1), ("small", j2)] {
        let ran = std::fs::read_to_string(jobs_dir.join(format!("{name}.out"))).unwrap_or_default();
        let mut ran: Vec<&str> = ran.lines().collect();
        ran.sort();
        n.say(&format!("job {j} COMPLETED; it ran on {}", ran.join(", ")));
    }

    n.step("Idle nodes power down after SuspendTime; slurm-dws deletes their VMs, then the empty MIGs");
    let to_down = n.until(&s, "the VMs deleted", 120, |s| {
        s.vms().is_empty() && s.cluster.node_states().unwrap_or_default().values().all(|st| st == "idle~")
    });
    n.say(&format!(
        "all nodes idle~ and every VM gone {:.1} s after the jobs completed",
        to_down.as_secs_f64()
    ));
    let to_gc = n.until(&s, "the MIGs deleted", 120, |s| s.migs().is_empty());
    n.say(&format!("empty MIGs deleted {:.1} s later (mig_gc_grace = 5 s)", to_gc.as_secs_f64()));

    n.step("A stockout in nodeset a: GCE fails its resize requests with ZONE_RESOURCE_POOL_EXHAUSTED");
    s.sim_post(
        "capacity",
        &json!({"match": "hpc-a-", "fail": {"code": "ZONE_RESOURCE_POOL_EXHAUSTED",
            "message": "The zone 'projects/demo-project/zones/us-central1-a' does not have enough resources available to fulfill the request."}}),
    );
    let j3 = submit("stockout", &["-N1", "--time=10"]);
    let j4 = submit("fallback", &["-N1", "--time=10", "-p", "a,b"]);
    n.say(&format!("sbatch: job {j3} for partition a; job {j4} for partitions a,b"));
    let to_fail = n.until(&s, "the failure", 60, |s| {
        s.cli_json(&["requests"]).as_array().is_some_and(|rs| rs.iter().any(|r| r["state"] == "FAILED"))
    });
    n.say(&format!(
        "the request FAILED and job {j3} was requeued {:.1} s after sbatch",
        to_fail.as_secs_f64()
    ));
    let to_fallback = n.until(&s, "the fallback to b", 60, |s| {
        ["RUNNING", "COMPLETING", "COMPLETED"].contains(&job_state(s, j4).as_str())
    });
    let where4 = s.cluster.job_info(j4).and_then(|j| j.get("Partition").cloned()).unwrap_or_default();
    n.say(&format!(
        "job {j4} started in partition {where4} {:.1} s after the failure: a's nodes are drained while it backs off",
        to_fallback.as_secs_f64()
    ));
    let sinfo = s.cluster.client("sinfo").args(["-N", "-o", "%N %T %E"]).output().expect("sinfo");
    println!("\n$ sinfo -N -o \"%N %T %E\"\n{}", String::from_utf8_lossy(&sinfo.stdout));
    let node = s
        .cli_json(&["nodes"])
        .as_array()
        .and_then(|a| a.iter().find(|x| x["last_error"].is_string()).cloned())
        .unwrap_or(Value::Null);
    let node = node["name"].as_str().unwrap_or("hpc-a-0").to_string();
    println!("\n$ slurm-dws explain {node}\n{}", s.cli(&["explain", &node]));
    println!("$ slurm-dws status\n{}", s.cli(&["status"]));
    n.say("capacity is back (the simulator's stockout rule is removed)");
    s.sim_delete("capacity");
    let to_recover = n.until(&s, "the requeued job to complete", 120, |s| job_state(s, j3) == "COMPLETED");
    n.say(&format!(
        "job {j3} COMPLETED on a {:.1} s after capacity returned (it waited for a's backoff to end)",
        to_recover.as_secs_f64()
    ));

    n.step("Summary");
    println!("  sbatch → both jobs RUNNING        {:>6.1} s", to_running.as_secs_f64());
    println!("  RUNNING → both jobs COMPLETED      {:>6.1} s", to_done.as_secs_f64());
    println!(
        "  COMPLETED → nodes down, VMs gone  {:>6.1} s  (SuspendTime 15 s + SuspendTimeout 5 s)",
        to_down.as_secs_f64()
    );
    println!("  → empty MIGs deleted              {:>6.1} s", to_gc.as_secs_f64());
    println!(
        "  stockout: sbatch → job requeued   {:>6.1} s  (Slurm alone: ResumeTimeout, up to 18 h)",
        to_fail.as_secs_f64()
    );
    println!("  stockout → job for a,b runs on {where4:<2} {:>6.1} s  (fallback)", to_fallback.as_secs_f64());
    println!("  capacity back → job COMPLETED     {:>6.1} s", to_recover.as_secs_f64());
    let calls = s.sim_get("calls");
    println!("  GCE API calls in all              {:>6}", calls["total"]);
    println!("  whole demo                        {:>6.1} s", n.t0.elapsed().as_secs_f64());
    println!("\nStopping everything the demo started.");
}
