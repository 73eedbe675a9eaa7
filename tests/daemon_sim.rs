//! The resume / suspend path through real processes: hooks spawned like slurmctld spawns them, the real
//! daemon, the real simulator over HTTP, the real SQLite store. (Slurm itself is in tests/e2e.rs.)

mod common;

use common::*;
use serde_json::{json, Value};
use std::os::unix::process::CommandExt;
use std::process::Command;

fn requests_by_state(w: &World) -> std::collections::BTreeMap<String, usize> {
    let mut m = std::collections::BTreeMap::new();
    for r in w.cli_json(&["requests"]).as_array().unwrap() {
        *m.entry(r["state"].as_str().unwrap_or("none").to_string()).or_insert(0) += 1;
    }
    m
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn big_resume_makes_one_mig_and_one_request_per_group_and_no_per_node_calls() {
    let mut w = World::new(&[("a", 0, 12000, "")], "").await;
    // 10,000 nodes, 1,000 jobs of 10 nodes each, one hostlist the way slurmctld compresses it.
    let jobs: Vec<(u32, String)> =
        (0..1000).map(|j| (j + 1, format!("hpc-a-[{}-{}]", j * 10, j * 10 + 9))).collect();
    let jobs_ref: Vec<(u32, &str)> = jobs.iter().map(|(j, n)| (*j, n.as_str())).collect();
    let rf = resume_file(&jobs_ref, "hpc-a-[0-9999]");
    let out = w.hook("resume", "hpc-a-[0-9999]", Some(&rf));
    assert!(out.status.success(), "hook: {}", String::from_utf8_lossy(&out.stderr));
    let again = w.hook("resume", "hpc-a-[0-9999]", Some(&rf));
    assert!(again.status.success());

    w.start_daemon();
    let done = w.wait_for("10,000 nodes up", 240, || {
        let states = w.node_states();
        (states.len() == 10_000 && states.values().all(|s| s == "up")).then_some(states)
    });
    assert_eq!(done.len(), 10_000);
    let calls = w.sim_calls().await;
    assert_eq!(count(&calls, "regionInstanceGroupManagers.insert"), 1000, "{calls}");
    assert_eq!(count(&calls, "regionInstanceGroupManagerResizeRequests.insert"), 1000, "{calls}");
    for per_node in ["instances.get", "instances.delete", "regionInstanceGroupManagers.listManagedInstances"]
    {
        assert_eq!(count(&calls, per_node), 0, "no per-node calls: {calls}");
    }
    // Every group holds one job's 10 nodes and is sized by its job.
    let reqs = w.cli_json(&["requests"]);
    let reqs = reqs.as_array().unwrap();
    assert_eq!(reqs.len(), 1000);
    assert!(reqs.iter().all(|r| r["nodes"].as_array().unwrap().len() == 10 && r["job_id"].is_u64()));
    assert_eq!(w.sim_vms().await.len(), 10_000, "one VM per node, no duplicates");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hooks_work_with_fds_closed_and_signals_blocked() {
    let w = World::new(&[("a", 0, 16, "")], "").await;
    let link = w.path().join("slurm-dws-resume");
    std::os::unix::fs::symlink(BIN, &link).unwrap();
    let mut cmd = Command::new(&link);
    cmd.arg("hpc-a-[0-3]").env_clear().env("SLURM_DWS_CONFIG", &w.config);
    unsafe {
        cmd.pre_exec(|| {
            // As slurmctld leaves them: 0-2 closed, most signals blocked.
            let mut set = nix::sys::signal::SigSet::empty();
            for s in [
                nix::sys::signal::SIGTERM,
                nix::sys::signal::SIGINT,
                nix::sys::signal::SIGHUP,
                nix::sys::signal::SIGPIPE,
                nix::sys::signal::SIGUSR1,
            ] {
                set.add(s);
            }
            nix::sys::signal::sigprocmask(nix::sys::signal::SigmaskHow::SIG_BLOCK, Some(&set), None)?;
            for fd in 0..3 {
                libc::close(fd);
            }
            Ok(())
        });
    }
    let status = cmd.status().unwrap();
    assert!(status.success(), "hook with closed fds exits 0");
    // The request is durable and the database is intact (nothing was printed into it).
    let store = slurm_dws::store::Store::open(&w.state_dir()).await.unwrap();
    let inbox = store.unprocessed_inbox().await.unwrap();
    assert_eq!(inbox.len(), 1);
    assert_eq!(inbox[0].hostlist, "hpc-a-[0-3]");
    let log = std::fs::read_to_string(w.path().join("slurm-dws.log")).unwrap();
    assert!(log.contains("resume hpc-a-[0-3]: 4 nodes"), "the hook logs for itself: {log}");
    assert!(log.contains("SLURM_RESUME_FILE not set"), "{log}");
    // And a process that inherits the mask is killable: the hook cleared it before doing anything.
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_exits_2_and_records_nothing() {
    let w = World::new(&[("a", 0, 16, "")], "").await;
    for bad in ["hpc-a-[1-3", "hpc-a-[3-1]", "", "hpc-a-[1-2]x"] {
        let out = w.hook("resume", bad, None);
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.lines().last().unwrap_or("").contains("hostlist"), "{bad:?}: {err}");
    }
    let store = slurm_dws::store::Store::open(&w.state_dir()).await.unwrap();
    assert_eq!(store.inbox_depth().await.unwrap(), 0, "nothing recorded");
    // A corrupt resume file is not bad input: the nodes are resumed without a job, and it is said.
    let out = w.hook("resume", "hpc-a-1", Some("{\"jobs\": [ {\"job_id\": "));
    assert!(out.status.success());
    let events = w.cli_json(&["events"]);
    assert!(events.to_string().contains("SLURM_RESUME_FILE is corrupt"), "{events}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_recorded_while_the_daemon_is_down_are_carried_out_once() {
    let mut w = World::new(&[("a", 0, 16, ""), ("b", 0, 8, "")], "").await;
    let rf = resume_file(&[(7, "hpc-a-[0-1]"), (8, "hpc-b-[0-2]")], "hpc-a-[0-1],hpc-b-[0-2]");
    for _ in 0..3 {
        assert!(w.hook("resume", "hpc-a-[0-1],hpc-b-[0-2]", Some(&rf)).status.success());
    }
    assert!(w.sim_migs().await.is_empty(), "hooks never talk to GCE");
    w.start_daemon();
    w.wait_for("5 nodes up", 60, || {
        let s = w.node_states();
        (s.len() == 5 && s.values().all(|v| v == "up")).then_some(())
    });
    let calls = w.sim_calls().await;
    assert_eq!(count(&calls, "regionInstanceGroupManagers.insert"), 2, "one MIG per (nodeset, job): {calls}");
    assert_eq!(count(&calls, "regionInstanceGroupManagerResizeRequests.insert"), 2);
    assert_eq!(w.sim_vms().await, vec!["hpc-a-0", "hpc-a-1", "hpc-b-0", "hpc-b-1", "hpc-b-2"]);
    // A clean stop, a restart, two passes: nothing is done twice.
    assert!(w.stop_daemon().success());
    w.start_daemon();
    let iteration = || w.cli_json(&["status"])["last_pass"]["iteration"].as_u64().unwrap_or(0);
    let before = iteration();
    w.wait_for("two passes after the restart", 30, || (iteration() >= before + 2).then_some(()));
    let calls = w.sim_calls().await;
    assert_eq!(count(&calls, "regionInstanceGroupManagers.insert"), 2);
    assert_eq!(w.sim_vms().await.len(), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_daemon_on_the_same_state_dir_is_refused_by_name() {
    let mut w = World::new(&[("a", 0, 4, "")], "").await;
    w.start_daemon();
    let first = w.daemon.as_ref().unwrap().id();
    // The same config but another socket: only the state directory is shared.
    let text = std::fs::read_to_string(&w.config).unwrap();
    let sock = w.path().join("slurm-dws.sock");
    let other = w.path().join("other.toml");
    let second_sock = w.path().join("second.sock");
    std::fs::write(&other, text.replace(sock.to_str().unwrap(), second_sock.to_str().unwrap())).unwrap();
    let out = Command::new(BIN)
        .args(["--config", other.to_str().unwrap(), "daemon"])
        .output()
        .expect("second daemon runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a second daemon must not run: {stderr}");
    assert!(
        stderr.contains(&format!("another slurm-dws daemon (pid {first}) uses state_dir"))
            && stderr.contains(w.state_dir().to_str().unwrap()),
        "{stderr}"
    );
    assert!(!second_sock.exists(), "the refused daemon bound nothing");
    // The first one still answers, and after it stops the next one starts.
    assert!(answers(&w));
    assert!(w.stop_daemon().success());
    w.start_daemon();
    assert!(answers(&w));
}

/// SIGTERM while a pass waits on GCE (the resize request's insert answers after 5 s): the pass is let
/// finish, and the call it left in flight is drained, so the mutation it sent is committed with its
/// outcome and nothing is left half done; the
/// clients in flight are answered, not cut off; the daemon exits 0 well inside systemd's
/// `TimeoutStopSec=30s`. A restart carries the work to its end without sending anything twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_during_a_pass_lets_it_commit_answers_every_client_and_exits_0() {
    use std::io::{BufRead, BufReader, Write};
    use std::os::unix::net::UnixStream;
    use std::time::Duration;
    let mut w = World::new(&[("a", 0, 8, "")], "").await;
    let insert = "regionInstanceGroupManagerResizeRequests.insert";
    w.sim_post("faults", json!({"method": insert, "status": 200, "delay_ms": 5000, "count": 1})).await;
    w.start_daemon();
    let rf = resume_file(&[(7, "hpc-a-[0-1]")], "hpc-a-[0-1]");
    assert!(w.hook("resume", "hpc-a-[0-1]", Some(&rf)).status.success());
    // The insert has reached GCE: the pass that sent it now waits for the answer.
    w.wait_for("the resize request's insert", 30, || {
        (count(&futures_lite_block(w.sim_calls()), insert) > 0).then_some(())
    });
    // Two clients in flight: one that has not sent its request yet, one waiting for a pass of its own.
    let sock = w.path().join("slurm-dws.sock");
    let silent = UnixStream::connect(&sock).unwrap();
    let mut asking = UnixStream::connect(&sock).unwrap();
    asking.write_all(b"{\"v\":1,\"request\":\"reconcile\"}\n").unwrap();
    // Connections are accepted in order: once a later one is answered, both are the daemon's.
    assert!(answers(&w));

    #[allow(clippy::disallowed_methods)] // times a real process's exit
    let t = std::time::Instant::now();
    let exit = w.stop_daemon();
    let took = t.elapsed();
    let log = w.daemon_log();
    assert!(exit.success(), "exit {exit:?}\n{}", tail(&log, 40));
    assert!(took < Duration::from_secs(15), "stopping took {took:?}\n{}", tail(&log, 40));
    // The pass waits for the insert STEP_WAIT (2 s), then leaves it in flight: SIGTERM finds it in
    // the pass or in flight, and either way its answer (at 5 s) is recorded before the exit.
    assert!(
        log.contains("letting it finish") || log.contains("answered during shutdown: recorded"),
        "SIGTERM came during the pass or with the insert in flight\n{}",
        tail(&log, 40)
    );
    assert!(!log.contains("was dropped"), "{}", tail(&log, 40));
    assert!(!sock.exists(), "the socket file is removed");
    for (who, client) in [("silent", silent), ("asking", asking)] {
        client.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut line = String::new();
        BufReader::new(client).read_line(&mut line).unwrap();
        assert!(line.contains("daemon is shutting down"), "{who} client: {line:?}");
    }

    // Nothing half done: the insert the pass waited for is committed with its outcome.
    let store = slurm_dws::store::Store::open(&w.state_dir()).await.unwrap();
    let pending = store.pending_outbox().await.unwrap();
    assert!(pending.is_empty(), "mutations left unresolved: {pending:?}");
    assert!(store.unprocessed_inbox().await.unwrap().is_empty());
    assert_eq!(store.requests(false).await.unwrap().len(), 1);
    store.close().await;

    w.start_daemon();
    wait_converged(&w, &["hpc-a-0".to_string(), "hpc-a-1".to_string()].into(), 60).await;
    let calls = w.sim_calls().await;
    assert_eq!(count(&calls, "regionInstanceGroupManagers.insert"), 1, "{calls}");
    assert_eq!(count(&calls, insert), 1, "{calls}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspend_cancels_a_queued_request_and_the_mig_is_collected() {
    let mut w = World::new(&[("a", 0, 16, "")], "").await;
    w.capacity(json!({"match": "", "hold": true})).await;
    w.start_daemon();
    let rf = resume_file(&[(3, "hpc-a-[0-3]")], "hpc-a-[0-3]");
    assert!(w.hook("resume", "hpc-a-[0-3]", Some(&rf)).status.success());
    w.wait_for("request ACCEPTED", 30, || (requests_by_state(&w).get("ACCEPTED") == Some(&1)).then_some(()));
    assert!(w.hook("suspend", "hpc-a-[0-3]", None).status.success());
    w.wait_for("request CANCELLED and nodes powered down", 30, || {
        let s = w.node_states();
        (requests_by_state(&w).get("CANCELLED") == Some(&1) && s.values().all(|v| v == "powered_down"))
            .then_some(())
    });
    let calls = w.sim_calls().await;
    assert_eq!(count(&calls, "regionInstanceGroupManagerResizeRequests.cancel"), 1, "{calls}");
    w.wait_for("MIG deleted", 30, || {
        let migs = futures_lite_block(w.sim_migs());
        migs.is_empty().then_some(())
    });
    assert!(w.sim_vms().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspend_deletes_exactly_the_suspended_nodes_vms() {
    let mut w = World::new(&[("a", 0, 16, "")], "").await;
    w.start_daemon();
    let rf = resume_file(&[(5, "hpc-a-[0-2]")], "hpc-a-[0-2]");
    assert!(w.hook("resume", "hpc-a-[0-2]", Some(&rf)).status.success());
    w.wait_for("3 up", 30, || (w.node_states().values().filter(|s| *s == "up").count() == 3).then_some(()));
    assert!(w.hook("suspend", "hpc-a-[0-1]", None).status.success());
    // Slurm does send suspends twice.
    assert!(w.hook("suspend", "hpc-a-[0-1]", None).status.success());
    w.wait_for("2 VMs deleted", 30, || {
        let vms = futures_lite_block(w.sim_vms());
        (vms == vec!["hpc-a-2".to_string()]).then_some(())
    });
    // The VMs go with the deleteInstances operation; the store says so after the next look.
    let s = w.wait_for("nodes powered down", 30, || {
        let s = w.node_states();
        (s["hpc-a-0"] == "powered_down" && s["hpc-a-1"] == "powered_down").then_some(s)
    });
    assert_eq!(s["hpc-a-2"], "up");
    let calls = w.sim_calls().await;
    assert_eq!(count(&calls, "regionInstanceGroupManagers.deleteInstances"), 1, "one batched call: {calls}");
}

/// Part of a queued request is suspended: its VMs have no URL yet and a regional MIG's
/// deleteInstances takes URLs only, so the request is cancelled and the node still wanted is asked
/// for again in a new request; the suspended node never gets a VM.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspending_part_of_a_queued_request_cancels_it_and_requests_the_rest_again() {
    let mut w = World::new(&[("a", 0, 16, "")], "").await;
    w.capacity(json!({"match": "", "hold": true})).await;
    w.start_daemon();
    let rf = resume_file(&[(9, "hpc-a-[4-5]")], "hpc-a-[4-5]");
    assert!(w.hook("resume", "hpc-a-[4-5]", Some(&rf)).status.success());
    w.wait_for("request ACCEPTED", 30, || (requests_by_state(&w).get("ACCEPTED") == Some(&1)).then_some(()));
    assert!(w.hook("suspend", "hpc-a-5", None).status.success());
    w.wait_for("first request CANCELLED, a second one ACCEPTED", 30, || {
        let r = requests_by_state(&w);
        (r.get("CANCELLED") == Some(&1) && r.get("ACCEPTED") == Some(&1)).then_some(())
    });
    // GCE holds one queued request, for hpc-a-4 alone.
    let queued: Vec<Value> = w
        .sim_migs()
        .await
        .iter()
        .flat_map(|m| m["resizeRequests"].as_array().cloned().unwrap_or_default())
        .filter(|r| r["state"] == "ACCEPTED")
        .collect();
    assert_eq!(queued.len(), 1, "{queued:?}");
    assert_eq!(queued[0]["instances"], json!([{"name": "hpc-a-4"}]), "{:?}", queued[0]);
    let events = w.cli_json(&["events", "--node", "hpc-a-5"]).to_string();
    assert!(events.contains("request_releasing") && events.contains("suspended while queued"), "{events}");
    assert_eq!(w.node_states()["hpc-a-5"], "powered_down");

    w.sim_delete("capacity").await;
    w.wait_for("hpc-a-4 up, the first MIG gone", 40, || {
        let vms = futures_lite_block(w.sim_vms());
        let migs = futures_lite_block(w.sim_migs());
        let s = w.node_states();
        (vms == vec!["hpc-a-4".to_string()] && s["hpc-a-4"] == "up" && migs.len() == 1).then_some(())
    });
    let calls = w.sim_calls().await;
    assert_eq!(count(&calls, "regionInstanceGroupManagerResizeRequests.cancel"), 1, "{calls}");
    assert_eq!(count(&calls, "regionInstanceGroupManagers.deleteInstances"), 0, "no VM to delete: {calls}");
    assert_eq!(w.node_states()["hpc-a-5"], "powered_down");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stockout_fails_the_request_visibly_and_backs_off_the_nodeset() {
    let mut w = World::new(&[("a", 0, 16, "")], "").await;
    w.capacity(json!({"match": "", "fail": {"code": "ZONE_RESOURCE_POOL_EXHAUSTED", "message": "The zone 'us-central1-a' does not have enough resources available"}})).await;
    w.start_daemon();
    let rf = resume_file(&[(11, "hpc-a-[0-1]")], "hpc-a-[0-1]");
    assert!(w.hook("resume", "hpc-a-[0-1]", Some(&rf)).status.success());
    w.wait_for("request FAILED", 30, || (requests_by_state(&w).get("FAILED") == Some(&1)).then_some(()));
    let nodes = w.nodes();
    for n in &nodes {
        assert_eq!(n["state"], "powered_down");
        assert!(n["last_error"].as_str().unwrap().contains("ZONE_RESOURCE_POOL_EXHAUSTED"), "{n}");
    }
    let status = w.cli_json(&["status"]);
    assert_eq!(status["backoffs"][0]["nodeset"], "a", "{status}");
    let explain = String::from_utf8(w.cli(&["explain", "hpc-a-0"]).stdout).unwrap();
    assert!(explain.contains("ZONE_RESOURCE_POOL_EXHAUSTED") && explain.contains("rr-"), "{explain}");
    w.wait_for("failed MIG deleted", 30, || futures_lite_block(w.sim_migs()).is_empty().then_some(()));
    // While the backoff lasts a new resume is answered at once, with no request to GCE.
    let before = count(&w.sim_calls().await, "regionInstanceGroupManagers.insert");
    w.resume_for_job(12, "hpc-a-2");
    w.wait_for("refused by backoff", 20, || {
        w.cli_json(&["events", "--node", "hpc-a-2"]).to_string().contains("capacity backoff").then_some(())
    });
    assert_eq!(count(&w.sim_calls().await, "regionInstanceGroupManagers.insert"), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_that_are_not_ours_are_reported_and_the_rest_proceed() {
    let mut w = World::new(&[("a", 0, 4, "")], "").await;
    w.start_daemon();
    assert!(w.hook("resume", "hpc-a-[2-5],other-1", None).status.success());
    w.wait_for("the two valid nodes up", 30, || {
        let s = w.node_states();
        (s.get("hpc-a-2").map(String::as_str) == Some("up")
            && s.get("hpc-a-3").map(String::as_str) == Some("up"))
        .then_some(())
    });
    let ev = w.cli_json(&["events"]).to_string();
    assert!(ev.contains("hpc-a-4: index '4' is outside nodeset a"), "{ev}");
    assert!(ev.contains("other-1 is not a node of cluster hpc"), "{ev}");
    assert_eq!(w.sim_vms().await, vec!["hpc-a-2", "hpc-a-3"]);
}

/// `status` got its answer from the running daemon (it exits 1 here all the same: this world has no
/// Slurm, so its passes are degraded).
fn answers(w: &World) -> bool {
    String::from_utf8_lossy(&w.cli(&["status"]).stdout).contains("running (pid")
}

/// Blocks on a future from inside a sync closure (the tests' wait loops are sync).
fn futures_lite_block<F: std::future::Future>(f: F) -> F::Output {
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(f))
}

/// A nodeset backs off after any failure GCE gives a reason for, not only stockouts, in words that
/// say which; the level grows across failures, survives the end of a backoff and a daemon restart,
/// and is forgotten only when a request of the nodeset succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backoff_levels_grow_across_failures_and_restarts_and_reset_on_success() {
    let mut w = World::new(&[("a", 0, 16, "")], "backoff_initial = 1\nbackoff_max = 8").await;
    let bad_image = json!({"match": "", "fail": {"code": "RESOURCE_NOT_FOUND",
        "message": "The resource 'projects/test-project/global/images/bad' was not found"}});
    w.capacity(bad_image.clone()).await;
    w.start_daemon();
    let kinds = |w: &World, kind: &str| {
        w.cli_json(&["events"]).as_array().unwrap().iter().filter(|e| e["kind"] == kind).count()
    };
    // One failed resume; then the level the status shows once its backoff starts, and the wait for it to end.
    let fail_once = |w: &World, node: &str, job: u32| {
        let ended = kinds(w, "backoff_ended");
        w.resume_for_job(job, node);
        let b = w.wait_for("a backoff", 30, || {
            let s = w.cli_json(&["status"]);
            s["backoffs"].as_array().and_then(|a| a.first().cloned())
        });
        w.wait_for("the backoff ended", 30, || (kinds(w, "backoff_ended") > ended).then_some(()));
        b
    };
    let b = fail_once(&w, "hpc-a-0", 1);
    assert_eq!(b["level"], 0, "{b}");
    let reason = b["reason"].as_str().unwrap();
    assert!(reason.starts_with("error backoff") && reason.contains("RESOURCE_NOT_FOUND"), "{reason}");

    // The level survives the end of the backoff and a restart.
    w.kill_daemon();
    w.start_daemon();
    assert_eq!(fail_once(&w, "hpc-a-1", 2)["level"], 1);
    assert_eq!(fail_once(&w, "hpc-a-2", 3)["level"], 2);

    // A success forgets it: the next failure starts again at level 0.
    w.sim_delete("capacity").await;
    w.resume_for_job(4, "hpc-a-3");
    w.wait_for("hpc-a-3 up", 30, || {
        (w.node_states().get("hpc-a-3").map(String::as_str) == Some("up")).then_some(())
    });
    w.capacity(bad_image).await;
    assert_eq!(fail_once(&w, "hpc-a-4", 5)["level"], 0);
}

/// The pass log lines of a daemon log, in order: (skipped reads, whether it was inbox-first, the
/// whole line).
fn pass_lines(log: &str) -> Vec<(Vec<String>, bool, String)> {
    log.lines()
        .filter(|l| l.contains("reconcile pass") && l.contains("iteration="))
        .map(|l| {
            let skipped = l
                .split_whitespace()
                .find_map(|f| f.strip_prefix("skipped_reads="))
                .map(|v| v.split(',').filter(|s| !s.is_empty()).map(String::from).collect())
                .unwrap_or_default();
            (skipped, l.contains("reused_observation_ms=Some("), l.to_string())
        })
        .collect()
}

/// A hook that wakes the daemon while its last observation is fresh is planned on that observation:
/// the pass reads the inbox and the job's time limit, sends the MIG and its resize request without
/// listing VMs or MIGs or reading Slurm's nodes, says in its report which reads it skipped, and a full
/// pass follows at once. The nodes come up as with any pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_on_a_fresh_observation_is_planned_first_and_a_full_pass_follows() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut w =
        World::new(&[("a", 0, 8, "")], &format!("[daemon]\nmetrics_listen = \"127.0.0.1:{port}\"\n")).await;
    w.healthy_slurm();
    w.start_daemon();
    let report = w.cli_json(&["reconcile"]);
    assert_eq!(report["outcome"], "ok", "{report}");
    let before = w.sim_calls().await;
    // Right after a full pass: its observation is fresh.
    let rf = resume_file(&[(7, "hpc-a-[0-1]")], "hpc-a-[0-1]");
    assert!(w.hook("resume", "hpc-a-[0-1]", Some(&rf)).status.success());
    w.wait_for("2 up", 30, || (w.node_states().values().filter(|s| *s == "up").count() == 2).then_some(()));
    let log = w.daemon_log();
    let passes = pass_lines(&log);
    let i = passes
        .iter()
        .position(|(_, first, _)| *first)
        .unwrap_or_else(|| panic!("no inbox-first pass in the log:\n{}", tail(&log, 30)));
    let (skipped, _, line) = &passes[i];
    assert_eq!(
        skipped,
        &["migs", "reservations", "resize_requests", "slurm_nodes", "vms"].map(String::from).to_vec(),
        "{line}"
    );
    assert!(line.contains("trigger=Hook") && line.contains("ingested=1"), "{line}");
    assert!(line.contains("requests_created=1") && line.contains("outcome=ok"), "{line}");
    let (next_skipped, next_first, next) =
        passes.get(i + 1).unwrap_or_else(|| panic!("no pass after it:\n{}", tail(&log, 30)));
    assert!(!next_first && !next_skipped.contains(&"vms".to_string()), "a full pass follows: {next}");
    // Its GCE calls: the MIG and the resize request, and no list between the hook and them (the
    // full pass after it lists once).
    let after = w.sim_calls().await;
    let grew = |m: &str| count(&after, m) - count(&before, m);
    assert_eq!(grew("regionInstanceGroupManagers.insert"), 1, "{after}");
    assert_eq!(grew("regionInstanceGroupManagerResizeRequests.insert"), 1, "{after}");
    let requests = w.cli_json(&["requests"]);
    assert_eq!(requests.as_array().map(Vec::len), Some(1), "one request, not two: {requests}");
    // The metrics count it: one inbox-first pass, and each read it skipped.
    let text = reqwest::get(format!("http://127.0.0.1:{port}/metrics")).await.unwrap().text().await.unwrap();
    let inbox_first = passes.iter().filter(|(_, first, _)| *first).count();
    assert!(text.contains(&format!("\nslurm_dws_inbox_first_passes_total {inbox_first}\n")), "{text}");
    assert!(text.contains("slurm_dws_skipped_reads_total{read=\"slurm_nodes\"}"), "{text}");
}

/// A MIG list nothing could have changed (no GCE step sent, no request open, every MIG active) is
/// reused by at most two passes in a row, each saying so in its report: GCE is asked for it exactly
/// by the passes that do not say they skipped it. The MIG is still collected once it is empty.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mig_list_nothing_could_change_is_reused_twice_at_most_and_each_pass_says_so() {
    let mut w = World::new(&[("a", 0, 8, "")], "").await;
    w.healthy_slurm();
    w.start_daemon();
    let rf = resume_file(&[(9, "hpc-a-[0-1]")], "hpc-a-[0-1]");
    assert!(w.hook("resume", "hpc-a-[0-1]", Some(&rf)).status.success());
    w.wait_for("2 up", 30, || (w.node_states().values().filter(|s| *s == "up").count() == 2).then_some(()));
    let mut reused = 0;
    for _ in 0..8 {
        let r = w.cli_json(&["reconcile"]);
        assert_eq!(r["outcome"], "ok", "{r}");
        if let Some(why) = r["skipped_reads"]["migs"].as_str() {
            assert!(why.contains("no GCE step was sent"), "{why}");
            reused += 1;
        }
    }
    assert!(reused >= 2, "steady passes reuse the MIG list: {reused} of 8");
    // Once empty, the MIG is collected: the suspend's deletion makes the next pass read the list.
    assert!(w.hook("suspend", "hpc-a-[0-1]", None).status.success());
    w.wait_for("MIG collected", 60, || futures_lite_block(w.sim_migs()).is_empty().then_some(()));
    assert!(w.stop_daemon().success());
    let passes = pass_lines(&w.daemon_log());
    let read = passes.iter().filter(|(s, _, _)| !s.contains(&"migs".to_string())).count();
    let calls = w.sim_calls().await;
    assert_eq!(count(&calls, "regionInstanceGroupManagers.list") as usize, read, "{calls}");
    let mut run = 0;
    for (skipped, _, line) in &passes {
        run = if skipped.contains(&"migs".to_string()) { run + 1 } else { 0 };
        assert!(run <= 2 || line.contains("reused_observation_ms=Some("), "three passes in a row: {line}");
    }
}
