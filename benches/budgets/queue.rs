//! A long queue and a stuck call, against the simulator (its own process) and the real daemon (its
//! own process):
//! - 10,000 nodes in 2,000 (then 1,000) resize requests that DWS keeps ACCEPTED for over 10 minutes:
//!   the daemon's GCE read calls per minute (counted by the simulator) and its pass wall time (its
//!   pass reports), with the periodic passes alone (`reconcile.interval` = 30 s, the default);
//! - a resize-request insert of nodeset `a` that hangs: how long and how many passes until nodeset
//!   `b`'s resize request is sent, and how long passes are, with and without the stuck call.
//!
//! "Queued for over 10 minutes": the requests are made and left ACCEPTED (the simulator holds all
//! capacity), the daemon is stopped, the requests' `created_at` in its database is set 11 minutes
//! back (the time it would have waited), and the daemon started again. The new process polls every
//! request once; the window measured starts after that pass.

use crate::fake_slurm::FakeSlurm;
use crate::process::Proc;
use crate::table::{Samples, Table};
use crate::Ctx;
use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const NODES: u32 = 10_000;
/// How far back the requests are set: "ACCEPTED for over 10 minutes".
const QUEUED_FOR: Duration = Duration::from_secs(11 * 60);
/// The window the reads are counted in.
const WINDOW: Duration = Duration::from_secs(180);
/// Resumes of nodeset `b` with nothing stuck, and again while `a`'s call hangs.
const STUCK_SAMPLES: u32 = 5;
/// `reconcile.interval` of the `stuck` rig.
const STUCK_INTERVAL: u64 = 5;
const RR_INSERT: &str = "regionInstanceGroupManagerResizeRequests.insert";

/// The `queue` section: queues of 2,000 and 1,000 requests.
pub fn run(ctx: &Ctx, t: &mut Table) {
    for requests in [2_000, 1_000] {
        if let Err(e) = queue(ctx, t, requests) {
            t.failed(&format!("queue of {requests} requests"), &format!("{e:#}"), "≤ 300 reads/min, ≤ 2 s");
        }
    }
}

/// The `stuck` section: a stuck call on one nodeset, another nodeset's resume.
pub fn run_stuck(ctx: &Ctx, t: &mut Table) {
    if let Err(e) = stuck(ctx, t) {
        t.failed("stuck call on one nodeset", &format!("{e:#}"), "≤ 2 passes");
    }
}

/// The bench's HTTP and CLI helpers around one simulator and one config.
struct Rig<'a> {
    ctx: &'a Ctx,
    rt: tokio::runtime::Runtime,
    http: reqwest::Client,
    sim: String,
    config: PathBuf,
}

impl Rig<'_> {
    fn control(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Result<Value> {
        let url = format!("http://{}/_sim/{path}", self.sim);
        self.rt.block_on(async {
            let mut req = self.http.request(method, url);
            if let Some(b) = body {
                req = req.json(&b);
            }
            let resp = req.send().await?.error_for_status()?;
            Ok(resp.json().await.unwrap_or(Value::Null))
        })
    }

    fn get(&self, path: &str) -> Result<Value> {
        self.control(reqwest::Method::GET, path, None)
    }

    fn post(&self, path: &str, body: Value) -> Result<Value> {
        self.control(reqwest::Method::POST, path, Some(body))
    }

    fn cli(&self, args: &[&str]) -> Result<Value> {
        let out = Command::new(&self.ctx.bin)
            .arg("--config")
            .arg(&self.config)
            .args(args)
            .arg("--json")
            .output()?;
        // `status` exits 1 while passes are degraded (the stuck rig has no Slurm) and still answers.
        match serde_json::from_slice(&out.stdout) {
            Ok(v) => Ok(v),
            Err(_) => bail!("slurm-dws {args:?} ({}): {}", out.status, String::from_utf8_lossy(&out.stderr)),
        }
    }

    /// Runs a hook as slurmctld does (`slurm-dws-resume HOSTLIST`, the resume file in the environment).
    fn hook(&self, d: &Path, name: &str, hostlist: &str, resume_file: Option<&str>) -> Result<()> {
        let link = d.join(format!("slurm-dws-{name}"));
        if !link.exists() {
            std::os::unix::fs::symlink(&self.ctx.bin, &link)?;
        }
        let mut cmd = Command::new(&link);
        cmd.arg(hostlist).env_clear().env("SLURM_DWS_CONFIG", &self.config);
        if let Some(text) = resume_file {
            let f = d.join(format!("resume-{}.json", hostlist.replace(['[', ']', ','], "_")));
            std::fs::write(&f, text)?;
            cmd.env("SLURM_RESUME_FILE", f);
        }
        let status = cmd.status()?;
        if !status.success() {
            bail!("the {name} hook failed for {hostlist}: {status}");
        }
        Ok(())
    }

    fn last_iteration(&self) -> Result<u64> {
        Ok(self.cli(&["status"])?["last_pass"]["iteration"].as_u64().unwrap_or(0))
    }
}

fn rig<'a>(ctx: &'a Ctx, sim: &Proc, config: PathBuf) -> Result<Rig<'a>> {
    Ok(Rig {
        ctx,
        rt: tokio::runtime::Builder::new_current_thread().enable_all().build()?,
        http: reqwest::Client::new(),
        sim: sim.addr.clone(),
        config,
    })
}

/// Read calls in a `/_sim/calls` answer, as GCE's read quota counts them.
fn reads(calls: &Value) -> f64 {
    calls["by_method"].as_object().map_or(0.0, |m| {
        m.iter()
            .filter(|(k, _)| {
                matches!(
                    k.rsplit('.').next(),
                    // `advice.capacity` is a read too (no requestId).
                    Some("get" | "list" | "aggregatedList" | "listManagedInstances" | "wait" | "capacity")
                )
            })
            .filter_map(|(_, v)| v.as_f64())
            .sum()
    })
}

/// Every pass's (iteration, duration in ms) from the daemon's log.
fn passes(log: &Path) -> Vec<(u64, f64)> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let field = |l: &str, k: &str| -> Option<String> {
        Some(l.split(&format!("{k}=")).nth(1)?.split_whitespace().next()?.to_string())
    };
    text.lines()
        .filter(|l| l.contains("reconcile pass") && l.contains("duration_ms="))
        .filter_map(|l| Some((field(l, "iteration")?.parse().ok()?, field(l, "duration_ms")?.parse().ok()?)))
        .collect()
}

fn queue(ctx: &Ctx, t: &mut Table, requests: u32) -> Result<()> {
    let per_job = NODES / requests;
    let dir = tempfile::tempdir()?;
    let d = dir.path();
    let sim = Proc::sim(&ctx.sim_bin, d)?;
    let slurm = FakeSlurm::create(&d.join("slurm"), NODES, per_job)?;
    let extra = format!(
        "# The client-side limits are not what is measured: the daemon's own demand is.\n\
         calls_per_minute = 100000\n\n[slurm]\nbin_dir = \"{}\"\ncommand_timeout = 60\n\n\
         [reconcile]\ninterval = 30\n",
        slurm.bin_dir.display()
    );
    let config = crate::write_config(d, &format!("http://{}/compute/v1/", sim.addr), NODES, &extra);
    // Capacity advice on: every new group would ask GCE where to go.
    let text = std::fs::read_to_string(&config)?;
    std::fs::write(&config, format!("{text}capacity_advice = true\n"))?;
    let r = rig(ctx, &sim, config.clone())?;
    r.post("capacity", json!({"match": "", "hold": true}))?;
    let resume = crate::hook::resume_file_22_05(requests, per_job);
    r.hook(d, "resume", &format!("hpc-a-[0-{}]", NODES - 1), Some(&resume))?;

    // The requests are made and left ACCEPTED.
    let daemon = Proc::daemon(&ctx.bin, &config, d)?;
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let active = r.cli(&["requests", "--active"])?;
        let accepted =
            active.as_array().map_or(0, |a| a.iter().filter(|x| x["state"] == json!("ACCEPTED")).count());
        if accepted == requests as usize {
            break;
        }
        if Instant::now() > deadline {
            bail!("{accepted} of {requests} requests ACCEPTED after 600 s\n{}", daemon.log_tail(20));
        }
        std::thread::sleep(Duration::from_secs(2));
    }
    let advice_calls = r.get("calls")?["by_method"]["advice.capacity"].as_f64().unwrap_or(0.0);
    if advice_calls < 1.0 {
        bail!(
            "capacity advice is on but no advice.capacity call reached the simulator\n{}",
            daemon.log_tail(20)
        );
    }
    t.count(
        &format!("capacity advice calls for {requests} new request groups (advice on)"),
        advice_calls,
        &format!("{requests} groups of {per_job} nodes: one call per (nodeset, size) a minute"),
        Some(f64::from(requests)),
        "≤ one per new group",
    );
    drop(daemon); // SIGTERM, then the database is edited while nobody holds it.
    r.rt.block_on(backdate(&d.join("state").join("slurm-dws.db"), QUEUED_FOR))?;

    // The daemon again: its first pass polls every request once; the window starts after it. (The
    // iteration count survives a restart: the pass is looked for in the new process's log.)
    let daemon = Proc::daemon(&ctx.bin, &config, d)?;
    let deadline = Instant::now() + Duration::from_secs(120);
    while passes(&daemon.log).is_empty() {
        if Instant::now() > deadline {
            bail!("no pass after the restart\n{}", daemon.log_tail(20));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let first_pass = passes(&daemon.log);
    let first_iteration = first_pass.iter().map(|p| p.0).max().unwrap_or(0);
    r.post("calls/reset", json!({}))?;
    let started = Instant::now();
    std::thread::sleep(WINDOW);
    let calls = r.get("calls")?;
    let window = started.elapsed();
    let still = r.cli(&["requests", "--active"])?.as_array().map_or(0, Vec::len);
    let mut wall = Samples::default();
    for (i, ms) in passes(&daemon.log) {
        if i > first_iteration {
            wall.push_ms(ms);
        }
    }
    drop(daemon);
    if still != requests as usize {
        bail!("{still} requests active at the end, not {requests}");
    }
    let per_minute = reads(&calls) / window.as_secs_f64() * 60.0;
    let by = |m: &str| calls["by_method"][m].as_f64().unwrap_or(0.0);
    let label = format!("{requests}");
    t.count(
        &format!("GCE reads/min, 10k nodes, {label} requests ACCEPTED > 10 min"),
        per_minute,
        &format!(
            "{:.0} reads in {:.0} s: {} request gets, {} VM list pages, {} MIG list pages",
            reads(&calls),
            window.as_secs_f64(),
            by("regionInstanceGroupManagerResizeRequests.get"),
            by("instances.aggregatedList"),
            by("regionInstanceGroupManagers.list")
        ),
        Some(300.0),
        "≤ 300",
    );
    t.timed(
        &format!("pass wall time, 10k nodes, {label} requests ACCEPTED > 10 min"),
        &wall,
        Some(2000.0),
        None,
    );
    t.note(format!(
        "queue of {requests} requests ({per_job} nodes each): requests created, left ACCEPTED, set {} min \
         back in the daemon's database, daemon restarted; after its first pass (iteration {}: every request \
         polled once) the daemon's own passes (interval = 30 s; it passes every 10 s while requests are in \
         flight) of {:.0} s were measured; GCE calls by method: {}",
        QUEUED_FOR.as_secs() / 60,
        first_iteration,
        window.as_secs_f64(),
        calls["by_method"]
    ));
    drop(sim);
    Ok(())
}

/// Sets every request's `created_at` `by` earlier: the daemon then sees requests that have been
/// waiting that long. A bench fixture, on a database no process holds.
async fn backdate(db: &Path, by: Duration) -> Result<()> {
    use sqlx::Connection;
    let url = format!("sqlite://{}", db.display());
    let mut conn = sqlx::SqliteConnection::connect(&url).await.context("opening the daemon's database")?;
    sqlx::query("UPDATE requests SET created_at = created_at - ?")
        .bind(by.as_millis() as i64)
        .execute(&mut conn)
        .await?;
    conn.close().await?;
    Ok(())
}

/// Nodeset `b` is resumed [`STUCK_SAMPLES`] times with nothing stuck, then [`STUCK_SAMPLES`] times
/// while nodeset `a`'s resize-request insert hangs (90 s a call, as the user measured; the default
/// `request_timeout` of 30 s): how long after its hook does each of `b`'s resize requests reach GCE,
/// in how many passes, and how long are the passes meanwhile — with and without the stuck call, in
/// the same run.
fn stuck(ctx: &Ctx, t: &mut Table) -> Result<()> {
    let dir = tempfile::tempdir()?;
    let d = dir.path();
    let sim = Proc::sim(&ctx.sim_bin, d)?;
    // A Slurm that answers (no nodes, no reservations, no jobs, every update accepted): with none,
    // every pass is degraded.
    devcluster::write_empty_slurm(&d.join("slurm-bin"))?;
    let extra = format!(
        "calls_per_minute = 100000\n\n[slurm]\nbin_dir = \"{}\"\ncommand_timeout = 5\n\n\
         [reconcile]\ninterval = {STUCK_INTERVAL}\nmig_gc_grace = 2\n\n\
         [[nodeset]]\nname = \"b\"\ninstance_template = \"projects/bench-project/regions/us-central1/instanceTemplates/b-flex\"\n\
         zones = [\"us-central1-a\"]\nnode_count_dynamic_max = 100\n[nodeset.dws_flex]\n",
        d.join("slurm-bin").display()
    );
    let config = crate::write_config(d, &format!("http://{}/compute/v1/", sim.addr), 8, &extra);
    let r = rig(ctx, &sim, config.clone())?;
    let daemon = Proc::daemon(&ctx.bin, &config, d)?;
    let wait = |what: &str, secs: u64, f: &dyn Fn() -> Result<bool>| -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(secs);
        while !f()? {
            if Instant::now() > deadline {
                bail!("{what}: not after {secs} s\n{}", daemon.log_tail(20));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(())
    };
    let vms = |r: &Rig| -> Result<usize> { Ok(r.get("state")?["instances"].as_array().map_or(0, Vec::len)) };
    r.hook(d, "resume", "hpc-a-[0-1]", Some(&resume_json(99, "hpc-a-[0-1]")))?;
    wait("a's 2 VMs", 60, &|| Ok(vms(&r)? == 2))?;
    let inserts =
        |r: &Rig| -> Result<u64> { Ok(r.get("calls")?["by_method"][RR_INSERT].as_u64().unwrap_or(0)) };
    // b's MIGs that have a resize request in GCE.
    let b_sent = |r: &Rig| -> Result<usize> {
        Ok(r.get("state")?["migs"].as_array().map_or(0, |m| {
            m.iter()
                .filter(|m| m["name"].as_str().is_some_and(|n| n.starts_with("hpc-b-")))
                .filter(|m| m["resizeRequests"].as_array().is_some_and(|a| !a.is_empty()))
                .count()
        }))
    };
    // One phase: b resumed STUCK_SAMPLES times; (passes taken each, hook → insert, passes' iterations).
    let phase = |first_job: u32| -> Result<(Vec<u64>, Samples, (u64, u64))> {
        let (mut taken, mut latency) = (Vec::new(), Samples::default());
        let from = r.last_iteration()?;
        for i in first_job..first_job + STUCK_SAMPLES {
            std::thread::sleep(Duration::from_millis(700)); // land somewhere inside a pass or between
            let before = r.last_iteration()?;
            let had = b_sent(&r)?;
            let asked = Instant::now();
            let nodes = format!("hpc-b-[{}-{}]", i * 2, i * 2 + 1);
            r.hook(d, "resume", &nodes, Some(&resume_json(100 + i, &nodes)))?;
            wait("b's resize request", 120, &|| Ok(b_sent(&r)? > had))?;
            latency.push(asked.elapsed());
            // Passes that had finished since the hook, plus the one that sent it.
            taken.push(r.last_iteration()?.saturating_sub(before) + 1);
        }
        Ok((taken, latency, (from + 1, r.last_iteration()?)))
    };
    let pass_samples = |range: (u64, u64)| -> Samples {
        let mut s = Samples::default();
        for (it, ms) in passes(&daemon.log) {
            if it >= range.0 && it <= range.1 {
                s.push_ms(ms);
            }
        }
        s
    };

    let (_, calm_latency, calm_range) = phase(0)?;
    let calm_passes = pass_samples(calm_range);

    // Every resize-request insert of a's MIGs now hangs 90 s; a's next job sends one.
    r.post(
        "faults",
        json!({"method": RR_INSERT, "status": 200, "delay_ms": 90_000,
               "path_contains": "instanceGroupManagers/hpc-a-"}),
    )?;
    let had = inserts(&r)?;
    r.hook(d, "resume", "hpc-a-[2-3]", Some(&resume_json(98, "hpc-a-[2-3]")))?;
    wait("a's resize-request insert sent (and hanging)", 60, &|| Ok(inserts(&r)? > had))?;
    let hung_at = Instant::now();
    let (taken, stuck_latency, stuck_range) = phase(STUCK_SAMPLES)?;
    let stuck_passes = pass_samples(stuck_range);
    let hung_for = hung_at.elapsed();
    let a_sent = inserts(&r)? - had - u64::from(STUCK_SAMPLES);
    drop(daemon);
    drop(sim);

    let normal_pass = calm_passes.median();
    t.timed("stuck: pass wall time, nothing stuck", &calm_passes, None, None);
    t.timed(
        "stuck: pass wall time, a's resize-request insert hanging",
        &stuck_passes,
        Some(2.0 * normal_pass),
        Some(("nothing stuck", normal_pass)),
    );
    let interval_ms = STUCK_INTERVAL as f64 * 1000.0;
    t.timed("stuck: b's hook → its resize request in GCE, nothing stuck", &calm_latency, None, None);
    t.timed(
        "stuck: b's hook → its resize request in GCE, a's insert hanging",
        &stuck_latency,
        Some(2.0 * interval_ms),
        Some(("nothing stuck", calm_latency.median())),
    );
    let worst = taken.iter().copied().max().unwrap_or(0) as f64;
    t.count(
        "stuck: passes until b's resize request is sent, a's insert hanging",
        worst,
        &format!("worst of {STUCK_SAMPLES}: {taken:?}"),
        Some(2.0),
        "≤ 2 passes",
    );
    t.note(format!(
        "stuck: every resize-request insert of nodeset a's MIGs hangs 90 s; request_timeout = 30 s (default), \
         interval = {STUCK_INTERVAL} s; budgets: passes ≤ 2× the median pass with nothing stuck, b's resume ≤ 2 \
         intervals. In the {:.0} s measured with a's insert hanging it was sent {a_sent} time(s) (in flight, not \
         resent by the passes in between); longest pass with it hanging {:.0} ms (the pass that sends a hanging \
         call waits STEP_WAIT = 2 s for it), {} passes",
        hung_for.as_secs_f64(),
        stuck_passes.max(),
        stuck_passes.len()
    ));
    Ok(())
}

fn resume_json(job: u32, nodes: &str) -> String {
    json!({"jobs": [{"job_id": job, "nodes": nodes}], "all_nodes": nodes}).to_string()
}
