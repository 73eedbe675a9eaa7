//! `[slurm] delegate_*` through the real binary, without Slurm: what the hook records when every node
//! goes to the delegate, and how a program that cannot run is reported. (With real Slurm, both
//! versions: `e2e_7_*` in tests/e2e.rs.)

// Real processes, waited for in real time.
#![allow(clippy::disallowed_methods)]

mod common;

use common::*;
use serde_json::Value;
use std::path::Path;

fn with_delegate(w: &World, program: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(program, std::fs::Permissions::from_mode(0o755)).unwrap();
    let text = std::fs::read_to_string(&w.config).unwrap();
    let text = text.replace(
        "command_timeout = 5\n",
        &format!("command_timeout = 5\ndelegate_resume = \"{}\"\n", program.display()),
    );
    std::fs::write(&w.config, text).unwrap();
}

fn events(w: &World) -> Vec<(String, String, String)> {
    w.cli_json(&["events"])
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|e| {
            let s = |k: &str| e[k].as_str().unwrap_or_default().to_string();
            (s("kind"), s("nodes"), s("message"))
        })
        .collect()
}

fn inbox(w: &World) -> Value {
    w.cli_json(&["status"])["pending_work"]["inbox"].clone()
}

/// Every node of the call is the other program's: no inbox entry (nothing for the daemon), one
/// hand-off event; the program gets argv[1] and a copy of the resume file, which is removed after.
#[tokio::test]
async fn a_call_with_none_of_our_nodes_is_an_event_only() {
    let w = World::new(&[("a", 0, 4, "")], "").await;
    let program = w.path().join("other-resume");
    let seen = w.path().join("seen");
    std::fs::write(
        &program,
        format!(
            "#!/bin/sh\n{{ echo \"$#|$1|$SLURM_RESUME_FILE\"; /bin/cat \"$SLURM_RESUME_FILE\"; }} > {}\n",
            seen.display()
        ),
    )
    .unwrap();
    with_delegate(&w, &program);
    let out = w.hook("resume", "gcp-n-[3-4]", Some(&resume_file(&[(9, "gcp-n-[3-4]")], "gcp-n-[3-4]")));
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let ev = w.wait_for("the program's end recorded", 10, || {
        let ev = events(&w);
        (ev.len() == 2).then_some(ev)
    });
    assert_eq!(ev[0].0, "delegated");
    assert_eq!(ev[0].1, "gcp-n-[3-4]");
    assert!(ev[1].0 == "delegated" && ev[1].2.contains("exited 0"), "{ev:?}");
    assert_eq!(inbox(&w), 0, "nothing for the daemon");
    let seen = std::fs::read_to_string(&seen).unwrap();
    let (head, content) = seen.split_once('\n').unwrap();
    let copy = head.split('|').nth(2).unwrap();
    assert!(
        head.starts_with("1|gcp-n-[3-4]|") && copy.starts_with(&w.state_dir().display().to_string()),
        "{seen}"
    );
    assert!(content.contains("\"job_id\":9"), "{seen}");
    assert!(!Path::new(copy).exists(), "the copy is removed when the program ends");
    let log = std::fs::read_to_string(w.path().join("slurm-dws.log")).unwrap();
    assert!(
        log.contains(
            "resume gcp-n-[3-4]: no node of slurm-dws's; 2 nodes that are not slurm-dws's handed to"
        ),
        "{log}"
    );
}

/// A program that cannot be run (its interpreter is missing) is a `delegate_failed` event naming why;
/// our nodes of the same call are recorded as usual and the others are not (they were handed off).
#[tokio::test]
async fn a_program_that_cannot_run_is_reported() {
    let w = World::new(&[("a", 0, 4, "")], "").await;
    let program = w.path().join("broken-resume");
    std::fs::write(&program, "#!/nonexistent/python3\n").unwrap();
    with_delegate(&w, &program);
    let out = w.hook("resume", "hpc-a-1,gcp-n-7", None);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let ev = w.wait_for("the failure recorded", 10, || {
        let ev = events(&w);
        ev.iter().any(|e| e.0 == "delegate_failed").then_some(ev)
    });
    let failed = ev.iter().find(|e| e.0 == "delegate_failed").unwrap();
    assert_eq!(failed.1, "gcp-n-7");
    assert!(failed.2.contains("could not be run") && failed.2.contains("No such file"), "{failed:?}");
    assert_eq!(inbox(&w), 1, "our node's call is in the inbox");
    assert!(!ev.iter().any(|e| e.0 == "not_ours"), "{ev:?}");
}
