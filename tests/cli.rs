//! The admin CLI against a live daemon and the simulator: every command in table and JSON form, the JSON
//! fields scripts rely on, errors as one line with the project's exit codes (0 / 1 / 2, see
//! `src/cli/mod.rs`), and `explain` telling a node's story through resume → run → expiry.

mod common;

use common::*;
use serde_json::{json, Value};
use std::process::Output;

fn run(w: &World, args: &[&str]) -> Output {
    w.cli(args)
}

fn ok_table(w: &World, args: &[&str]) -> String {
    let out = run(w, args);
    assert!(
        out.status.success(),
        "slurm-dws {args:?} exited {:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(!text.trim().is_empty(), "slurm-dws {args:?} printed nothing");
    text
}

fn has_fields(v: &Value, fields: &[&str], what: &str) {
    for f in fields {
        assert!(v.get(f).is_some(), "{what}: field `{f}` missing in {v}");
    }
}

fn fails_with(w: &World, args: &[&str], code: i32, needle: &str) {
    let out = run(w, args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "slurm-dws {args:?}: {err}");
    assert!(err.contains(needle), "slurm-dws {args:?} should name `{needle}`: {err}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_command_in_table_and_json_and_explain_tells_the_story() {
    // Nodeset a's VMs live 600 s of GCE time = 20 s here (the simulator runs 30 times faster), so the
    // story can end with a real expiry.
    let mut w =
        World::scaled(&[("a", 0, 8, "max_run_duration = 600\neol_grace = 300"), ("s", 1, 0, "")], "", 30.0)
            .await;
    w.start_daemon();
    let rf = resume_file(&[(42, "hpc-a-[0-1]")], "hpc-a-[0-1]");
    assert!(w.hook("resume", "hpc-a-[0-1]", Some(&rf)).status.success());
    w.wait_for("hpc-a-[0-1] and the static node up", 30, || {
        let s = w.node_states();
        (s.get("hpc-a-0").map(String::as_str) == Some("up")
            && s.get("hpc-a-1").map(String::as_str) == Some("up")
            && s.get("hpc-s-0").map(String::as_str) == Some("up"))
        .then_some(())
    });
    w.wait_for("termination times recorded", 30, || {
        w.nodes().iter().all(|n| n["state"] != "up" || n["termination_time"].is_string()).then_some(())
    });

    // status
    let status = w.cli_json(&["status"]);
    has_fields(
        &status,
        &["daemon", "version", "config", "last_pass", "nodes", "pending_work", "backoffs"],
        "status",
    );
    assert_eq!(status["daemon"]["running"], true);
    assert_eq!(status["nodes"]["up"], 3);
    has_fields(
        &status["last_pass"],
        &["iteration", "trigger", "started_at", "duration_ms", "outcome"],
        "last pass",
    );
    // This world has no Slurm: its passes are degraded, so status says so and exits 1.
    let out = run(&w, &["status"]);
    let t = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(out.status.code(), Some(1), "{t}");
    assert!(t.contains("running") && t.contains("last pass") && t.contains("health:        DEGRADED"), "{t}");

    // nodes, with every filter
    let nodes = w.cli_json(&["nodes"]);
    let nodes = nodes.as_array().unwrap();
    assert_eq!(nodes.len(), 3, "tracked: the two resumed and the static one: {nodes:?}");
    for n in nodes {
        has_fields(
            n,
            &[
                "name",
                "nodeset",
                "static",
                "state",
                "job_id",
                "mig",
                "resize_request",
                "termination_time",
                "last_error",
            ],
            "nodes",
        );
    }
    let a0 = nodes.iter().find(|n| n["name"] == "hpc-a-0").unwrap();
    assert_eq!(a0["job_id"], 42);
    assert_eq!(a0["static"], false);
    assert!(chrono::DateTime::parse_from_rfc3339(a0["termination_time"].as_str().unwrap()).is_ok());
    let only_a = w.cli_json(&["nodes", "--nodeset", "a"]);
    assert_eq!(only_a.as_array().unwrap().len(), 2);
    let statics = w.cli_json(&["nodes", "--nodeset", "s"]);
    assert_eq!(statics[0]["static"], true);
    assert_eq!(w.cli_json(&["nodes", "--state", "up"]).as_array().unwrap().len(), 3);
    assert_eq!(w.cli_json(&["nodes", "hpc-a-[1-5]"]).as_array().unwrap().len(), 1);
    let t = ok_table(&w, &["nodes"]);
    assert!(t.lines().next().unwrap().contains("NAME") && t.contains("hpc-a-0"), "{t}");
    let t = ok_table(&w, &["nodes", "--sort", "state"]);
    assert!(t.contains("hpc-s-0"), "{t}");

    // requests
    let reqs = w.cli_json(&["requests"]);
    let reqs = reqs.as_array().unwrap();
    assert_eq!(reqs.len(), 2, "one for job 42, one for the static node: {reqs:?}");
    for r in reqs {
        has_fields(
            r,
            &[
                "name",
                "mig",
                "nodeset",
                "nodes",
                "state",
                "run_duration",
                "job_id",
                "created_at",
                "last_error",
            ],
            "requests",
        );
    }
    let r42 = reqs.iter().find(|r| r["job_id"] == 42).unwrap();
    assert_eq!(r42["nodes"], json!(["hpc-a-0", "hpc-a-1"]));
    assert_eq!(r42["state"], "SUCCEEDED");
    assert!(w.cli_json(&["requests", "--active"]).as_array().unwrap().is_empty());
    let t = ok_table(&w, &["requests"]);
    assert!(
        t.contains(r42["name"].as_str().unwrap()) && t.contains("hpc-a-[0-1]"),
        "hostlist-compressed: {t}"
    );

    // migs
    let migs = w.cli_json(&["migs"]);
    for m in migs.as_array().unwrap() {
        has_fields(m, &["name", "nodeset", "region", "target_size", "state", "created_at"], "migs");
    }
    assert!(ok_table(&w, &["migs"]).contains(r42["mig"].as_str().unwrap()));

    // events, with filters
    let events = w.cli_json(&["events"]);
    for e in events.as_array().unwrap() {
        has_fields(e, &["time", "kind", "nodes", "message"], "events");
    }
    let for_a0 = w.cli_json(&["events", "--node", "hpc-a-0"]);
    assert!(for_a0.as_array().unwrap().iter().any(|e| e["kind"] == "request_succeeded"), "{for_a0}");
    assert!(
        !for_a0
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["message"].as_str().unwrap_or_default().contains("hpc-s-0")),
        "only hpc-a-0's events: {for_a0}"
    );
    assert!(w.cli_json(&["events", "--since", "2999-01-01T00:00:00Z"]).as_array().unwrap().is_empty());
    assert!(ok_table(&w, &["events"]).contains("request_succeeded"));

    // gc, reconcile, version, check-config
    let gc = w.cli_json(&["gc", "--dry-run"]);
    assert!(gc.is_array() || gc.is_object(), "{gc}");
    ok_table(&w, &["gc", "--dry-run"]);
    let pass = w.cli_json(&["reconcile"]);
    has_fields(&pass, &["iteration", "trigger", "outcome", "duration_ms"], "reconcile");
    assert_eq!(pass["trigger"], "cli");
    ok_table(&w, &["reconcile"]);
    assert!(ok_table(&w, &["version"]).contains(env!("CARGO_PKG_VERSION")));
    ok_table(&w, &["check-config", "--config-only"]);

    let up = ok_table(&w, &["explain", "hpc-a-1"]);
    eprintln!("$ slurm-dws explain hpc-a-1\n{up}");
    assert!(up.contains("will") || up.contains("delete"), "an up node says when its VM goes:\n{up}");

    // Expiry: GCE deletes hpc-a-0's VM at the end of its run duration.
    w.wait_for("hpc-a-0 out of service", 60, || {
        (w.node_states().get("hpc-a-0").map(String::as_str) == Some("powered_down")).then_some(())
    });
    let story = ok_table(&w, &["explain", "hpc-a-0"]);
    eprintln!("$ slurm-dws explain hpc-a-0\n{story}");
    for needle in [
        "hpc-a-0",
        "nodeset a",
        "Job 42",
        r42["mig"].as_str().unwrap(),
        r42["name"].as_str().unwrap(),
        "SUCCEEDED",
    ] {
        assert!(story.contains(needle), "explain should mention `{needle}`:\n{story}");
    }
    assert!(
        story.contains("expired") && story.contains("GCE deleted the VM"),
        "the expiry is in the story:\n{story}"
    );
    let ex = w.cli_json(&["explain", "hpc-a-0"]);
    assert!(ex.is_object(), "{ex}");
    // Errors: one line, the object named, the project's exit codes.
    fails_with(&w, &["explain", "hpc-z-9"], 2, "hpc-z-9");
    fails_with(&w, &["nodes", "hpc-a-[3-1]"], 2, "hpc-a-[3-1]");
    fails_with(&w, &["nodes", "--state", "sleeping"], 2, "sleeping");
    fails_with(&w, &["events", "--since", "yesterday-ish"], 2, "yesterday-ish");
    let out = run(&w, &["no-such-command"]);
    assert_eq!(out.status.code(), Some(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_commands_work_with_the_daemon_down_and_mutating_ones_say_why() {
    let mut w = World::new(&[("a", 0, 4, "")], "").await;
    w.start_daemon();
    let rf = resume_file(&[(7, "hpc-a-0")], "hpc-a-0");
    assert!(w.hook("resume", "hpc-a-0", Some(&rf)).status.success());
    w.wait_for("hpc-a-0 up", 30, || {
        (w.node_states().get("hpc-a-0").map(String::as_str) == Some("up")).then_some(())
    });
    w.stop_daemon();
    let status = w.cli_json(&["status"]);
    assert_eq!(status["daemon"]["running"], false);
    assert!(status["last_pass"].is_object(), "the last pass is read from the store: {status}");
    assert_eq!(w.cli_json(&["nodes"]).as_array().unwrap().len(), 1);
    assert!(ok_table(&w, &["explain", "hpc-a-0"]).contains("Job 7"));
    let out = run(&w, &["reconcile"]);
    assert_eq!(out.status.code(), Some(1), "the daemon is needed for a pass");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("daemon") && err.trim().lines().count() == 1, "{err}");
}
