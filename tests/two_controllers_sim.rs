//! Two controllers against one simulator, with Slurm's answer to `scontrol ping` set by the test: the
//! standby makes no GCE call, a takeover starts from the shared state (history kept, nothing
//! duplicated), two daemons acting at once still leave one MIG and one request, and bad
//! `daemon.controller` / `daemon.shared_state_dir` values exit 2 by name. (Real slurmctlds in
//! tests/two_controllers.rs.)

// Real daemons in real time: the test reads the clock.
#![allow(clippy::disallowed_methods)]

mod common;

use common::*;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// Fake Slurm for one controller's host: `scontrol show config` names ctla and ctlb, `scontrol ping`
/// prints `dir/ping` (the test writes who is up), everything else is an empty Slurm.
fn two_controller_slurm(w: &World, ping: &Path) {
    use std::os::unix::fs::PermissionsExt;
    w.healthy_slurm();
    let bin = w.path().join("slurm-bin");
    let scontrol = format!(
        "#!/bin/sh\ncase \"$*\" in\n  --version) echo 'slurm 22.05.8' ;;\n  ping) cat {ping} ;;\n  \
         'show config') printf 'SlurmctldHost[0]        = ctla(10.0.0.1)\\nSlurmctldHost[1]        = ctlb(10.0.0.2)\\n' ;;\n  \
         *reservation*) echo 'No reservations in the system' ;;\nesac\nexit 0\n",
        ping = ping.display()
    );
    let tmp = bin.join("scontrol.tmp");
    std::fs::write(&tmp, scontrol).unwrap();
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::rename(&tmp, bin.join("scontrol")).unwrap();
}

fn set_ping(ping: &Path, a_up: bool, b_up: bool) {
    let s = |up| if up { "UP" } else { "DOWN" };
    let text =
        format!("Slurmctld(primary) at ctla is {}\nSlurmctld(backup) at ctlb is {}\n", s(a_up), s(b_up));
    let tmp = ping.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, ping).unwrap();
}

/// Controller `name`'s world on `endpoint`, sharing `shared` and reading `ping`.
fn controller(endpoint: &str, name: &str, shared: &Path, ping: &Path) -> World {
    let extra = format!("[daemon]\ncontroller = \"{name}\"\nshared_state_dir = \"{}\"\n", shared.display());
    let w = World::with_endpoint(endpoint, &[("a", 0, 16, "")], &extra);
    two_controller_slurm(&w, ping);
    // Slurm is asked only when its slurm.conf exists; the hooks check-config wants are there too.
    let conf = w.path().join("slurm.conf");
    std::fs::write(&conf, "SlurmctldHost=ctla\nSlurmctldHost=ctlb\n").unwrap();
    let text = std::fs::read_to_string(&w.config).unwrap();
    let text =
        text.replace("command_timeout = 5", &format!("command_timeout = 5\nconf = \"{}\"", conf.display()));
    std::fs::write(&w.config, text).unwrap();
    for hook in ["resume", "suspend", "resume-fail"] {
        std::os::unix::fs::symlink(BIN, w.path().join(format!("slurm-dws-{hook}"))).unwrap();
    }
    w
}

fn role(w: &World) -> (String, Option<String>) {
    let s = w.cli_json(&["status"]);
    let c = &s["controller"];
    (c["role"].as_str().unwrap_or("").to_string(), c["in_charge"].as_str().map(String::from))
}

async fn writes(w: &World) -> u64 {
    let calls = w.sim_calls().await;
    ["regionInstanceGroupManagers.insert", "regionInstanceGroupManagerResizeRequests.insert"]
        .iter()
        .map(|m| count(&calls, m))
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_daemon_in_charge_acts_and_a_takeover_continues_from_the_shared_state() {
    let sim = World::new(&[("a", 0, 16, "")], "").await;
    let shared = tempfile::tempdir().unwrap();
    let ping = shared.path().join("ping.txt");
    set_ping(&ping, true, true);
    let mut a = controller(&sim.sim_url, "ctla", shared.path(), &ping);
    let mut b = controller(&sim.sim_url, "ctlb", shared.path(), &ping);
    a.start_daemon();
    b.start_daemon();
    a.wait_for("ctla in charge", 20, || (role(&a).0 == "in_charge").then_some(()));
    b.wait_for("ctlb standby", 20, || (role(&b) == ("standby".into(), Some("ctla".into()))).then_some(()));
    let text = String::from_utf8_lossy(&b.cli(&["status"]).stdout).to_string();
    assert!(text.contains("standby: controller ctla is in charge"), "{text}");
    assert!(b.cli(&["status"]).status.success(), "a standby is healthy: exit 0");

    // A job's resume on the primary: one MIG, one request, its VMs; the standby writes nothing.
    a.resume_for_job(7, "hpc-a-[0-1]");
    a.wait_for("2 nodes up on ctla", 60, || {
        let s = a.node_states();
        (s.values().filter(|v| *v == "up").count() == 2).then_some(())
    });
    assert_eq!(writes(&sim).await, 2);
    assert!(b.node_states().values().all(|s| s != "up"), "the standby's own state is untouched");
    // The copy is in the shared directory, one file, no WAL there.
    a.wait_for("a shared copy", 20, || shared.path().join("slurm-dws-state.db").exists().then_some(()));
    tokio::time::sleep(std::time::Duration::from_secs(6)).await; // one more copy, after the nodes came up
    let names: Vec<String> = std::fs::read_dir(shared.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.ends_with("-wal") && !n.ends_with("-shm")), "{names:?}");

    // The primary's host dies: its daemon with it (SIGKILL), Slurm's backup takes over.
    let calls_before = sim.sim_calls().await["total"].as_u64().unwrap();
    a.kill_daemon();
    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    assert_eq!(
        sim.sim_calls().await["total"].as_u64().unwrap(),
        calls_before,
        "the standby makes no GCE call at all"
    );
    set_ping(&ping, false, true);
    b.wait_for("ctlb in charge", 20, || (role(&b).0 == "in_charge").then_some(()));
    // It took the shared state: the primary's nodes and history are its own now.
    b.wait_for("the primary's nodes on ctlb", 30, || {
        let s = b.node_states();
        (s.values().filter(|v| *v == "up").count() == 2).then_some(())
    });
    let events = b.cli_json(&["events"]).to_string();
    assert!(events.contains("hpc-a-[0-1]") || events.contains("hpc-a-0"), "history kept: {events}");
    assert!(events.contains("\"took_charge\"") && events.contains("controller ctlb in charge"), "{events}");
    // A new job on the backup; nothing of the first is asked again.
    b.resume_for_job(8, "hpc-a-[2-3]");
    b.wait_for("2 more nodes up on ctlb", 60, || {
        let s = b.node_states();
        (s.values().filter(|v| *v == "up").count() == 4).then_some(())
    });
    assert_eq!(writes(&sim).await, 4, "one MIG and one request per job, none duplicated");
    assert_eq!(sim.sim_vms().await, vec!["hpc-a-0", "hpc-a-1", "hpc-a-2", "hpc-a-3"]);

    // The primary back (later than the next copy: a takeover loses at most the passes since the
    // last copy): roles follow Slurm's.
    let copy = shared.path().join("slurm-dws-state.db");
    let up_at = std::time::SystemTime::now();
    b.wait_for("a shared copy with job 8", 20, || {
        let m = std::fs::metadata(&copy).and_then(|m| m.modified()).ok()?;
        (m > up_at).then_some(())
    });
    set_ping(&ping, true, true);
    a.start_daemon();
    a.wait_for("ctla in charge again", 20, || (role(&a).0 == "in_charge").then_some(()));
    b.wait_for("ctlb standby again", 20, || (role(&b).0 == "standby").then_some(()));
    a.wait_for("ctla took ctlb's state", 30, || {
        let s = a.node_states();
        (s.values().filter(|v| *v == "up").count() == 4).then_some(())
    });
    // The role changes are in the events: ctla's (whose state holds ctlb's takeover too) and ctlb's.
    let kinds = |w: &World| -> Vec<String> {
        w.cli_json(&["events"])
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|e| e["kind"].as_str().map(String::from))
            .collect()
    };
    let a_kinds = kinds(&a);
    assert!(a_kinds.iter().filter(|k| *k == "took_charge").count() >= 2, "{a_kinds:?}");
    b.wait_for("ctlb's standby event", 20, || kinds(&b).contains(&"standby".to_string()).then_some(()));
    assert_eq!(writes(&sim).await, 4);
}

/// Split brain: both daemons believe their controller is in charge, on the same state (the backup
/// took the shared copy while the primary's MIG insert was still unanswered). Both send the same
/// MIG name and requestIds; GCE's answers (already exists, the same operation for the same
/// requestId) keep one MIG, one request, one VM per node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_daemons_acting_at_once_leave_one_mig_one_request_and_no_duplicate_vm() {
    let sim = World::new(&[("a", 0, 16, "")], "").await;
    let shared = tempfile::tempdir().unwrap();
    let (ping_a, ping_b) = (shared.path().join("ping-a.txt"), shared.path().join("ping-b.txt"));
    set_ping(&ping_a, true, false); // A's Slurm: ctla in charge
    set_ping(&ping_b, false, true); // B's Slurm: ctlb in charge
    let mut a = controller(&sim.sim_url, "ctla", shared.path(), &ping_a);
    let mut b = controller(&sim.sim_url, "ctlb", shared.path(), &ping_b);
    let insert = "regionInstanceGroupManagers.insert";
    sim.sim_post(
        "faults",
        serde_json::json!({"method": insert, "status": 200, "delay_ms": 15000, "count": 1}),
    )
    .await;
    a.start_daemon();
    a.resume_for_job(9, "hpc-a-[0-2]");
    a.wait_for("the MIG insert sent", 30, || {
        (count(&futures_block(sim.sim_calls()), insert) > 0).then_some(())
    });
    // A copy written after the insert was sent: it carries the request and its requestIds.
    let copy = shared.path().join("slurm-dws-state.db");
    let sent_at = std::time::SystemTime::now();
    a.wait_for("a shared copy after the insert", 20, || {
        let m = std::fs::metadata(&copy).and_then(|m| m.modified()).ok()?;
        (m > sent_at).then_some(())
    });
    b.start_daemon();
    b.wait_for("ctlb in charge", 20, || (role(&b).0 == "in_charge").then_some(()));
    assert_eq!(role(&a).0, "in_charge", "both act");
    both_converge(&sim, &a, &b).await;
}

/// Split brain before any request: both daemons in charge start from one shared state holding the
/// hook's resume (its nodes wanted, no request planned yet: GCE's VM list did not answer) and plan
/// it at the same moment. The group's names come from the group itself (nodeset, job, nodes, the
/// hook's time), so both send the same MIG and resize request names: one MIG, one request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_daemons_planning_the_same_resume_at_once_name_it_alike() {
    let sim = World::new(&[("a", 0, 16, "")], "").await;
    let shared = tempfile::tempdir().unwrap();
    let (ping_a, ping_b) = (shared.path().join("ping-a.txt"), shared.path().join("ping-b.txt"));
    set_ping(&ping_a, true, false);
    set_ping(&ping_b, false, true);
    let mut a = controller(&sim.sim_url, "ctla", shared.path(), &ping_a);
    let mut b = controller(&sim.sim_url, "ctlb", shared.path(), &ping_b);
    // No VM list: a pass ingests the hook but plans no request (it cannot tell which VMs exist).
    sim.sim_post(
        "faults",
        serde_json::json!({"method": "instances.aggregatedList", "status": 503, "count": 100000}),
    )
    .await;
    a.start_daemon();
    a.resume_for_job(9, "hpc-a-[0-2]");
    a.wait_for("the resume ingested", 30, || {
        (a.node_states().values().filter(|s| *s == "resume_pending").count() == 3).then_some(())
    });
    let copy = shared.path().join("slurm-dws-state.db");
    let ingested_at = std::time::SystemTime::now();
    a.wait_for("a shared copy after the ingest", 20, || {
        let m = std::fs::metadata(&copy).and_then(|m| m.modified()).ok()?;
        (m > ingested_at).then_some(())
    });
    b.start_daemon();
    b.wait_for("ctlb in charge, the resume taken", 20, || {
        (role(&b).0 == "in_charge"
            && b.node_states().values().filter(|s| *s == "resume_pending").count() == 3)
            .then_some(())
    });
    assert_eq!(role(&a).0, "in_charge", "both act");
    assert_eq!(count(&sim.sim_calls().await, "regionInstanceGroupManagers.insert"), 0);
    // The MIG inserts hang long enough that both daemons plan and send before either sees a MIG.
    sim.sim_delete("faults").await;
    sim.sim_post(
        "faults",
        serde_json::json!({"method": "regionInstanceGroupManagers.insert", "status": 200, "delay_ms": 5000, "count": 2}),
    )
    .await;
    a.wait_for("both MIG inserts sent", 30, || {
        (count(&futures_block(sim.sim_calls()), "regionInstanceGroupManagers.insert") == 2).then_some(())
    });
    both_converge(&sim, &a, &b).await;
    let names = |w: &World| -> Vec<Value> { w.nodes().iter().map(|n| n["mig"].clone()).collect() };
    assert_eq!(names(&a), names(&b), "both daemons named the group alike");
}

/// Both daemons see the 3 nodes up, and GCE holds one MIG, one resize request, one VM per node.
async fn both_converge(sim: &World, a: &World, b: &World) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    loop {
        let up = |w: &World| w.node_states().values().filter(|v| *v == "up").count();
        if up(a) == 3 && up(b) == 3 {
            break;
        }
        if std::time::Instant::now() > deadline {
            panic!(
                "not 3 nodes up on both\nA: {:?}\nB: {:?}\nGCE: {}\n--- A's log ---\n{}\n--- B's log ---\n{}",
                a.nodes(),
                b.nodes(),
                sim.sim_state().await,
                tail(&a.daemon_log(), 60),
                tail(&b.daemon_log(), 60)
            );
        }
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    }
    let migs = sim.sim_migs().await;
    assert_eq!(migs.len(), 1, "{migs:?}");
    let requests = sim_requests(sim).await;
    assert_eq!(requests.len(), 1, "{requests:?}");
    assert_eq!(sim.sim_vms().await, vec!["hpc-a-0", "hpc-a-1", "hpc-a-2"]);
}

fn futures_block<F: std::future::Future>(f: F) -> F::Output {
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(f))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_not_in_slurm_conf_or_a_bad_shared_dir_exits_2_by_name() {
    let shared = tempfile::tempdir().unwrap();
    let ping = shared.path().join("ping.txt");
    set_ping(&ping, true, true);
    let w = controller("http://127.0.0.1:9/compute/v1/", "ctlz", shared.path(), &ping);
    let with_conf = std::fs::read_to_string(&w.config).unwrap();
    let hook_dir = w.path().display().to_string();
    for args in [vec!["check-config", "--hook-dir", &hook_dir], vec!["daemon"]] {
        let out = Command::new(BIN).arg("--config").arg(&w.config).args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("daemon.controller") && err.contains("\"ctlz\""), "{args:?}: {err}");
    }
    let out = Command::new(BIN)
        .arg("--config")
        .arg(&w.config)
        .args(["check-config", "--hook-dir", &hook_dir])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stdout)
        .contains("not among slurm.conf's SlurmctldHost entries (ctla, ctlb)"));

    // ctla is fine; a shared_state_dir that is a file is not.
    let file = shared.path().join("not-a-dir");
    std::fs::write(&file, "").unwrap();
    let bad = with_conf.replace("\"ctlz\"", "\"ctla\"").replace(
        &format!("shared_state_dir = \"{}\"", shared.path().display()),
        &format!("shared_state_dir = \"{}\"", file.display()),
    );
    std::fs::write(&w.config, bad).unwrap();
    for args in [vec!["check-config", "--hook-dir", &hook_dir], vec!["daemon"]] {
        let out = Command::new(BIN).arg("--config").arg(&w.config).args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("daemon.shared_state_dir") && err.contains("not a directory"),
            "{args:?}: {err}"
        );
    }
    assert!(!w.state_dir().join("slurm-dws.db").exists(), "a daemon refused at start changed nothing");
}
