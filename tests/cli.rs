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

/// `slurm-dws ARGS` on a terminal `columns` wide (`$COLUMNS`).
fn run_at_width(w: &World, columns: usize, args: &[&str]) -> String {
    let out = std::process::Command::new(BIN)
        .arg("--config")
        .arg(&w.config)
        .args(args)
        .env("COLUMNS", columns.to_string())
        .output()
        .unwrap();
    assert!(
        out.status.success() || args[0] == "status",
        "slurm-dws {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// Every time in a JSON output is RFC 3339 UTC with a `Z` (docs/json.md): keys naming a time.
fn times_are_rfc3339_utc(v: &Value, path: &str) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let is_time =
                    k.ends_with("_at") || k.ends_with("time") || k.ends_with("since") || k == "until";
                if let (true, Value::String(s)) = (is_time, x) {
                    assert!(
                        chrono::DateTime::parse_from_rfc3339(s).is_ok() && s.ends_with('Z'),
                        "{path}.{k} = {s:?}: not RFC 3339 UTC"
                    );
                }
                times_are_rfc3339_utc(x, &format!("{path}.{k}"));
            }
        }
        Value::Array(a) => a.iter().for_each(|x| times_are_rfc3339_utc(x, path)),
        _ => {}
    }
}

/// `text` with its line breaks and runs of spaces made single spaces: `explain` and `status` wrap
/// their sentences to the terminal.
fn words(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
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
                "topology",
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

    // Listings as Slurm's: -o/--format with the JSON field names, -h/--noheader, -l/--long, --summarize.
    let t = ok_table(&w, &["nodes", "-o", "name,state,static", "-h", "--sort", "name"]);
    assert_eq!(t, "hpc-a-0  up  no\nhpc-a-1  up  no\nhpc-s-0  up  yes\n");
    let t = ok_table(&w, &["nodes", "--format=job_id,name", "--noheader", "hpc-a-0"]);
    assert_eq!(t, "42  hpc-a-0\n");
    fails_with(
        &w,
        &["nodes", "-o", "name,colour"],
        2,
        "unknown field 'colour' for nodes (fields: name, nodeset, static, state,",
    );
    fails_with(&w, &["nodes", "--sort", "created"], 2, "unknown field 'created' for nodes");
    let picked = w.cli_json(&["nodes", "-o", "name,state"]);
    assert_eq!(picked[0].as_object().unwrap().keys().collect::<Vec<_>>(), ["name", "state"], "{picked}");
    let long = ok_table(&w, &["nodes", "-l"]);
    let header = long.lines().next().unwrap();
    for h in ["NAME", "NODESET", "STATIC", "MIG", "RESIZE_REQUEST", "VM", "TERMINATION", "LAST_ERROR"] {
        assert!(header.contains(h), "--long shows {h}: {header}");
    }
    let short = ok_table(&w, &["nodes"]);
    assert!(!short.lines().next().unwrap().contains("RESIZE_REQUEST"), "{short}");
    let summary = ok_table(&w, &["nodes", "--summarize"]);
    let rows: Vec<Vec<&str>> = summary.lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(
        rows,
        [
            vec!["NODESET", "STATE", "NODES", "NODELIST"],
            vec!["a", "up", "2", "hpc-a-[0-1]"],
            vec!["s", "up", "1", "hpc-s-0"]
        ],
        "{summary}"
    );
    assert_eq!(
        w.cli_json(&["nodes", "-s"]),
        json!([{"nodeset": "a", "state": "up", "count": 2, "nodes": "hpc-a-[0-1]"}, {"nodeset": "s", "state": "up", "count": 1, "nodes": "hpc-s-0"}])
    );
    // -h is --noheader for listings, so help is --help there, and it offers only what nodes takes.
    let help = ok_table(&w, &["nodes", "--help"]);
    for needle in ["-o, --format", "-h, --noheader", "-l, --long", "-s, --summarize", "--sort <FIELD>"] {
        assert!(help.contains(needle), "help shows {needle}: {help}");
    }
    assert!(!help.contains("created"), "nodes has no created field to sort by: {help}");
    assert!(!ok_table(&w, &["nodes", "-h"]).contains("NAME"));

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

    // Default tables fit the terminal: the free text is cut (…), never a name.
    for args in [&["nodes"][..], &["requests"], &["migs"], &["events"], &["status"], &["explain", "hpc-a-0"]]
    {
        let t = run_at_width(&w, 80, args);
        for line in t.lines() {
            assert!(line.chars().count() <= 80, "{args:?} at 80 columns: {line:?}\n{t}");
        }
        eprintln!("$ COLUMNS=80 slurm-dws {}\n{t}", args.join(" "));
    }
    assert!(run_at_width(&w, 80, &["events"]).lines().any(|l| l.ends_with('…')), "long messages are cut");
    let narrow = run_at_width(&w, 20, &["nodes"]);
    for name in ["hpc-a-0", "hpc-a-1", "hpc-s-0"] {
        assert!(narrow.lines().any(|l| l.starts_with(name)), "{name} whole at 20 columns:\n{narrow}");
    }
    let wide = run_at_width(&w, 400, &["events", "-l"]);
    assert!(!wide.contains('…') && wide.lines().next().unwrap().contains("COUNT"), "{wide}");
    // One time convention in every JSON output.
    for args in [&["status"][..], &["nodes"], &["requests"], &["migs"], &["events"], &["explain", "hpc-a-0"]]
    {
        times_are_rfc3339_utc(&w.cli_json(args), &args.join(" "));
    }

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
    let story = words(&ok_table(&w, &["explain", "hpc-a-0"]));
    eprintln!("$ slurm-dws explain hpc-a-0\n{story}");
    // Powered down: job 42 is history, not the node's live job (issue 28).
    let a0 = w.cli_json(&["nodes", "hpc-a-0"]);
    assert_eq!(a0[0]["job_id"], serde_json::Value::Null, "{a0}");
    for needle in [
        "hpc-a-0",
        "nodeset a",
        "Earlier: it was last resumed for job 42",
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
    fails_with(
        &w,
        &["explain", "hpc-z-9"],
        2,
        "not a slurm-dws node: hpc-z-9: no nodeset 'z' in cluster hpc",
    );
    let err = String::from_utf8_lossy(&run(&w, &["explain", "hpc-z-9"]).stderr).to_string();
    assert_eq!(err.matches("hpc-z-9").count(), 1, "the node is named once: {err}");
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
    let story = words(&ok_table(&w, &["explain", "hpc-a-0"]));
    assert!(story.contains("Job 7") && story.contains("Slurm could not be asked"), "{story}");

    // Identical events of one pass are one event with a count (the store coalesces them).
    let store = slurm_dws::store::Store::open(&w.state_dir()).await.unwrap();
    let mut tx = store.begin().await.unwrap();
    let at =
        chrono::DateTime::parse_from_rfc3339("2026-11-24T10:00:00Z").unwrap().with_timezone(&chrono::Utc);
    for _ in 0..6 {
        tx.add_event(at, "drift", &["hpc-a-0".to_string()], "Slurm has it down, its VM runs").await.unwrap();
    }
    tx.commit().await.unwrap();
    store.close().await;
    let drift: Vec<Value> = w
        .cli_json(&["events", "--node", "hpc-a-0"])
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "drift")
        .cloned()
        .collect();
    assert_eq!(
        drift,
        [
            json!({"time": "2026-11-24T10:00:00Z", "kind": "drift", "nodes": "hpc-a-0", "count": 6, "message": "Slurm has it down, its VM runs"})
        ]
    );
    let table = run_at_width(&w, 200, &["events", "--node", "hpc-a-0"]);
    assert!(table.contains("Slurm has it down, its VM runs (6 times)"), "{table}");
    let long = run_at_width(&w, 200, &["events", "--node", "hpc-a-0", "-l", "-o", "kind,count"]);
    assert!(long.lines().any(|l| l.split_whitespace().collect::<Vec<_>>() == ["drift", "6"]), "{long}");

    // explain puts Slurm's view beside slurm-dws's: here slurmctld (a fake 22.05 printing what it
    // prints) has the node completing job 7 and being powered down, while slurm-dws has it up.
    use std::os::unix::fs::PermissionsExt;
    let node = r#"{"name":"hpc-a-0","state":"completing","state_flags":["CLOUD","POWER_DOWN"],"reason":"Kill task failed","address":"hpc-a-0","hostname":"hpc-a-0","partitions":["a"]}"#;
    let jobs = r#"[{"job_id":7,"job_state":"COMPLETING","nodes":"hpc-a-0","partition":"a","time_limit":60},{"job_id":8,"job_state":"RUNNING","nodes":"hpc-a-[1-2]","partition":"a","time_limit":60}]"#;
    for (cmd, text) in [
        ("scontrol", "#!/bin/sh\n[ \"$1\" = --version ] && echo 'slurm 22.05.8'\nexit 0\n".to_string()),
        ("sinfo", format!("#!/bin/sh\necho '{{\"meta\":{{}},\"errors\":[],\"nodes\":[{node}]}}'\n")),
        ("squeue", format!("#!/bin/sh\necho '{{\"meta\":{{}},\"errors\":[],\"jobs\":{jobs}}}'\n")),
    ] {
        let p = w.path().join("slurm-bin").join(cmd);
        std::fs::write(&p, text).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let story = words(&ok_table(&w, &["explain", "hpc-a-0"]));
    assert!(
        story.contains("slurm-dws has it up")
            && story.contains("Slurm has it completing! (reason: Kill task failed), job 7 COMPLETING on it."),
        "{story}"
    );
    assert_eq!(
        w.cli_json(&["explain", "hpc-a-0"])["slurm"],
        json!({"state": "completing!", "reason": "Kill task failed", "jobs": [{"job_id": 7, "state": "COMPLETING"}], "error": null})
    );
    let story = words(&ok_table(&w, &["explain", "hpc-a-3"]));
    assert!(story.contains("never been asked") && story.contains("Slurm does not list it."), "{story}");
    let out = run(&w, &["reconcile"]);
    assert_eq!(out.status.code(), Some(1), "the daemon is needed for a pass");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("daemon") && err.trim().lines().count() == 1, "{err}");
}

/// `nodes --json` gives each node's physical host (`topology`: `CLUSTER/BLOCK/SUBBLOCK/HOST`, null
/// without one) and `explain` names its block, from what the daemon's passes read of GCE's instance
/// list: a 2-node job on an A3 Ultra nodeset with `max_topology_distance = "BLOCK"` lands in one
/// block of the simulator's zone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_json_gives_the_physical_host_and_explain_names_the_block() {
    let mut w = World::new(
        &[("gpu", 0, 4, "\n[nodeset.placement]\nmax_topology_distance = \"BLOCK\""), ("cpu", 0, 2, "")],
        "",
    )
    .await;
    // Workload policies are for GPU families: the nodeset's template is an A3 Ultra one.
    let mut t = devcluster::stack::flex_template("gpu-flex");
    t["properties"]["machineType"] = json!("a3-ultragpu-8g");
    w.sim_post("templates", t).await;
    w.sim_post(
        "zones/us-central1-a/topology",
        json!({"blocks": 3, "subblocks_per_block": 2, "hosts_per_subblock": 2}),
    )
    .await;
    w.start_daemon();
    let rf = resume_file(&[(51, "hpc-gpu-[0-1]"), (52, "hpc-cpu-0")], "hpc-gpu-[0-1],hpc-cpu-0");
    assert!(w.hook("resume", "hpc-gpu-[0-1],hpc-cpu-0", Some(&rf)).status.success());
    let nodes = w.wait_for("both GPU nodes up with a physical host", 60, || {
        let nodes = w.nodes();
        let placed = nodes.iter().filter(|n| n["state"] == "up" && n["topology"].is_string()).count();
        let cpu_up = nodes.iter().any(|n| n["name"] == "hpc-cpu-0" && n["state"] == "up");
        (placed == 2 && cpu_up).then_some(nodes)
    });
    let topo = |name: &str| -> Vec<String> {
        let n = nodes.iter().find(|n| n["name"] == name).unwrap_or_else(|| panic!("{name}: {nodes:?}"));
        n["topology"].as_str().unwrap().split('/').map(str::to_string).collect()
    };
    let (g0, g1) = (topo("hpc-gpu-0"), topo("hpc-gpu-1"));
    assert_eq!((g0.len(), g1.len()), (4, 4), "CLUSTER/BLOCK/SUBBLOCK/HOST: {g0:?} {g1:?}");
    assert!(g0.iter().all(|p| !p.is_empty()), "{g0:?}");
    assert_eq!((&g0[0], &g0[1]), (&g1[0], &g1[1]), "one job's VMs in one block: {g0:?} {g1:?}");
    assert_ne!(g0[3], g1[3], "one VM per host");
    // The CPU nodeset has no workload policy: GCE reports no physical host for its VMs.
    let cpu = nodes.iter().find(|n| n["name"] == "hpc-cpu-0").unwrap();
    assert_eq!(cpu["topology"], Value::Null, "{cpu}");

    // The table takes it as a field.
    let t = ok_table(&w, &["nodes", "-o", "name,topology", "hpc-gpu-0"]);
    assert!(t.contains("TOPOLOGY") && t.contains(&g0.join("/")), "{t}");

    let story = words(&ok_table(&w, &["explain", "hpc-gpu-0"]));
    assert!(
        story.contains(&format!(
            "Its VM runs in block {} (cluster {}, subblock {}, host {})",
            g0[1], g0[0], g0[2], g0[3]
        )),
        "{story}"
    );
    let story = words(&ok_table(&w, &["explain", "hpc-cpu-0"]));
    assert!(
        story.contains("GCE reports no physical host for its VM: its nodeset has no [nodeset.placement]"),
        "{story}"
    );
}

/// The same read from the database file alone (the daemon down), with `[slurm] topology` on:
/// `explain` says where the topology file puts the node, and a node whose VM is not placed (yet) is
/// under `unplaced`. A node without a VM says nothing of a host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(clippy::disallowed_methods)] // stamps the seeded nodes with the real present
async fn explain_says_where_the_topology_file_puts_a_node_from_the_store_alone() {
    use slurm_dws::model::{NodeState, VmStatus};
    for (kind, placed_words) in [
        ("tree", "The topology file puts it under switch sb-2 of block switch blk-7."),
        ("block", "The topology file puts it in Slurm block blk-7."),
    ] {
        let w = World::with_endpoint(
            "http://127.0.0.1:9/compute/v1/",
            &[("gpu", 0, 4, "\n[nodeset.placement]\nmax_topology_distance = \"BLOCK\"")],
            "",
        );
        let text = std::fs::read_to_string(&w.config).unwrap();
        std::fs::write(
            &w.config,
            text.replacen("[slurm]\n", &format!("[slurm]\ntopology = \"{kind}\"\n"), 1),
        )
        .unwrap();
        let store = slurm_dws::store::Store::open(&w.state_dir()).await.unwrap();
        let node = |i: u32, topology: Option<&str>, vm: bool| {
            let mut n = slurm_dws::reconcile::plan::new_node(
                &format!("hpc-gpu-{i}"),
                "gpu",
                i,
                false,
                chrono::Utc::now(),
            );
            n.state = if vm { NodeState::Up } else { NodeState::PoweredDown };
            n.vm_status = vm.then_some(VmStatus::Running);
            n.topology = topology.map(str::to_string);
            n
        };
        let mut tx = store.begin().await.unwrap();
        tx.upsert_nodes(&[
            node(0, Some("us-central1-cluster-1/blk-7/sb-2/host-5"), true),
            node(1, None, true),
            node(2, None, false),
        ])
        .await
        .unwrap();
        tx.commit().await.unwrap();
        store.close().await;

        let nodes = w.cli_json(&["nodes"]);
        let got: Vec<(&str, &Value)> =
            nodes.as_array().unwrap().iter().map(|n| (n["name"].as_str().unwrap(), &n["topology"])).collect();
        assert_eq!(
            got,
            [
                ("hpc-gpu-0", &json!("us-central1-cluster-1/blk-7/sb-2/host-5")),
                ("hpc-gpu-1", &Value::Null),
                ("hpc-gpu-2", &Value::Null)
            ],
            "{kind}"
        );
        let story = words(&ok_table(&w, &["explain", "hpc-gpu-0"]));
        assert!(
            story.contains(
                "Its VM runs in block blk-7 (cluster us-central1-cluster-1, subblock sb-2, host host-5)."
            ),
            "{kind}: {story}"
        );
        assert!(story.contains(placed_words), "{kind}: {story}");
        let story = words(&ok_table(&w, &["explain", "hpc-gpu-1"]));
        assert!(
            story.contains("GCE reports no physical host for its VM yet (it is given once the VM has a host); the topology file has it under 'unplaced'."),
            "{kind}: {story}"
        );
        let story = words(&ok_table(&w, &["explain", "hpc-gpu-2"]));
        assert!(!story.contains("physical host") && !story.contains("block"), "{kind}: {story}");
    }
}

/// `repair` refuses bad input before asking anything: a node that is not ours, an unknown
/// behaviour, a bad hostlist exit 2 with one line naming what is wrong, and nothing is recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repair_refuses_a_node_not_ours_or_an_unknown_behaviour_and_changes_nothing() {
    let w = World::new(&[("a", 0, 4, "")], "").await;
    fails_with(&w, &["repair", "other-node-1"], 2, "other-node-1: not a node of slurm-dws");
    fails_with(&w, &["repair", "hpc-a-[0-9]"], 2, "hpc-a-4: not a node of slurm-dws");
    fails_with(
        &w,
        &["repair", "hpc-a-1", "--reason", "XID"],
        2,
        "--reason XID: not a fault behaviour GCE knows",
    );
    fails_with(&w, &["repair", "hpc-a-[1"], 2, "not a hostlist expression");
    let db = slurm_dws::store::Store::open(&w.state_dir()).await.unwrap();
    assert!(db.unprocessed_repair_asks().await.unwrap().is_empty(), "nothing recorded");
    assert!(db.repairs().await.unwrap().is_empty());
}

/// `explain` says when and why GCE will maintain a node's VM and which reservation keeps jobs off
/// it, and a failed request's error, which is also the node's, is said once.
#[tokio::test]
#[allow(clippy::disallowed_methods)] // the records' times are the wall clock's, as a daemon writes them
async fn explain_says_when_and_why_a_node_is_maintained_and_an_error_once() {
    use slurm_dws::model::{Maintenance, NodeState, RequestPhase, VmStatus};
    let w = World::with_endpoint("http://127.0.0.1:9/compute/v1/", &[("gpu", 0, 4, "")], "");
    let store = slurm_dws::store::Store::open(&w.state_dir()).await.unwrap();
    let now = chrono::Utc::now();
    let t = |s: &str| chrono::DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&chrono::Utc);
    let mut tx = store.begin().await.unwrap();
    let names = vec!["hpc-gpu-1".to_string()];
    let mut r =
        tx.insert_request("gpu", Some(9), "0a1b2c3d", "hpc-gpu-j9", "rr-1", &names, 3600, now).await.unwrap();
    let error = "ZONE_RESOURCE_POOL_EXHAUSTED: no capacity in us-central1-a";
    r.phase = RequestPhase::Failed;
    r.last_error = Some(error.into());
    tx.update_request(&r).await.unwrap();
    let mut up = slurm_dws::reconcile::plan::new_node("hpc-gpu-0", "gpu", 0, false, now);
    up.state = NodeState::Up;
    up.vm_status = Some(VmStatus::Running);
    up.maintenance = Some(Box::new(Maintenance {
        kind: "UNSCHEDULED".into(),
        window_start_time: Some(t("2099-01-01T10:00:00Z")),
        window_end_time: None,
        latest_window_start_time: None,
        can_reschedule: false,
        maintenance_status: "PENDING".into(),
        maintenance_reasons: vec!["FAILURE_GPU_XID".into()],
    }));
    let mut failed = slurm_dws::reconcile::plan::new_node("hpc-gpu-1", "gpu", 1, false, now);
    failed.request_id = Some(r.id);
    failed.last_error = Some(error.into());
    tx.upsert_nodes(&[up, failed]).await.unwrap();
    tx.commit().await.unwrap();
    store.close().await;

    let story = words(&ok_table(&w, &["explain", "hpc-gpu-0"]));
    assert!(story.contains("GCE will maintain its VM from "), "{story}");
    assert!(
        story.contains(
            ": UNSCHEDULED from 2099-01-01T10:00:00Z to an end GCE did not give, PENDING, reasons FAILURE_GPU_XID; Slurm reservation slurm-dws-maint-hpc-gpu-0 (maint,ignore_jobs) keeps jobs off it until 2099-01-01T13:00:00Z (GCE gave no end: 3 hours reserved)."
        ),
        "{story}"
    );
    let story = words(&ok_table(&w, &["explain", "hpc-gpu-1"]));
    assert_eq!(story.matches(error).count(), 1, "the error is said once:\n{story}");
    assert!(story.contains(&format!("Last error: {error}")), "{story}");
}

/// `explain` shows a node's repair: one under way (behaviour, text, since when, how far, the last
/// word) and a finished one's outcome, a failure in GCE's words.
#[tokio::test]
#[allow(clippy::disallowed_methods)] // the records' times are the wall clock's, as a daemon writes them
async fn explain_shows_a_repair_under_way_and_its_outcome() {
    use slurm_dws::model::{FaultBehavior, NodeState, Repair, RepairPhase, VmStatus};
    let w = World::with_endpoint("http://127.0.0.1:9/compute/v1/", &[("gpu", 0, 4, "")], "");
    let store = slurm_dws::store::Store::open(&w.state_dir()).await.unwrap();
    let now = chrono::Utc::now();
    let mut tx = store.begin().await.unwrap();
    let mut nodes = Vec::new();
    for i in 0..3 {
        let mut n = slurm_dws::reconcile::plan::new_node(&format!("hpc-gpu-{i}"), "gpu", i, false, now);
        n.state = NodeState::Up;
        n.vm_status = Some(VmStatus::Running);
        nodes.push(n);
    }
    tx.upsert_nodes(&nodes).await.unwrap();
    let repair = |node: &str, phase: RepairPhase, source: &str, outcome: &str| Repair {
        node: node.into(),
        behavior: FaultBehavior::UnrecoverableGpuError,
        description: "xid 79".into(),
        source: source.into(),
        phase,
        requested_at: now - chrono::Duration::seconds(90),
        updated_at: now - chrono::Duration::seconds(30),
        outcome: Some(outcome.into()),
    };
    let refused = "GCE refused the host report: 400 BAD_REQUEST: the instance is not reservation-bound";
    tx.upsert_repair(&repair(
        "hpc-gpu-0",
        RepairPhase::Replacing,
        "cli",
        "repair UNRECOVERABLE_GPU_ERROR: VM hpc-gpu-0 is replaced: a new VM is requested",
    ))
    .await
    .unwrap();
    tx.upsert_repair(&repair("hpc-gpu-1", RepairPhase::Failed, "drain", refused)).await.unwrap();
    tx.upsert_repair(&repair(
        "hpc-gpu-2",
        RepairPhase::Repaired,
        "cli",
        "its VM runs again on another host: back in service",
    ))
    .await
    .unwrap();
    tx.commit().await.unwrap();
    store.close().await;

    let story = words(&ok_table(&w, &["explain", "hpc-gpu-0"]));
    assert!(
        story.contains("A repair UNRECOVERABLE_GPU_ERROR: xid 79, asked by slurm-dws repair ")
            && story.contains(" is under way (replacing, since ")
            && story.contains(
                "its VM was deleted and a new one requested for the node; the drain is lifted once it runs. \
                 Last: repair UNRECOVERABLE_GPU_ERROR: VM hpc-gpu-0 is replaced: a new VM is requested."
            ),
        "{story}"
    );
    let story = words(&ok_table(&w, &["explain", "hpc-gpu-1"]));
    assert!(
        story.contains("Its last repair UNRECOVERABLE_GPU_ERROR: xid 79, asked by a drain reason ")
            && story.contains(": FAILED ")
            && story.contains(&format!("the node stays drained until the drain is lifted or a repair is asked again. Last: {refused}.")),
        "{story}"
    );
    let story = words(&ok_table(&w, &["explain", "hpc-gpu-2"]));
    assert!(
        story.contains(": repaired ")
            && story.contains("Last: its VM runs again on another host: back in service."),
        "{story}"
    );
    let story = words(&ok_table(&w, &["explain", "hpc-gpu-3"]));
    assert!(!story.contains("repair"), "a node never repaired says nothing of it: {story}");
    let ex = w.cli_json(&["explain", "hpc-gpu-1"]);
    assert!(ex["story"].as_array().unwrap().iter().any(|l| l.as_str().unwrap().contains(refused)), "{ex}");
}
