//! The pass and gc reports: their JSON is what `status`, `reconcile --json`, `gc --json` and the store's
//! `last_pass` show, so the field names and values are pinned here.

use super::*;
use crate::model::*;
use crate::reconcile::plan::new_node;
use chrono::{Duration, TimeZone};
use serde_json::json;

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 23, 12, 0, 0).unwrap()
}

#[test]
fn pass_report_json_keeps_its_names() {
    let mut r = PassReport::new(3, Trigger::Hook, t0(), 30);
    r.gce_steps.push(StepReport {
        step: GceStepKind::InsertResizeRequest,
        target: "hpc-a-j1-0a1b2c3d/rr-0a1b2c3d".into(),
        ok: true,
        error: None,
    });
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(
        v,
        json!({
            "iteration": 3, "trigger": "hook", "started_at": "2026-11-23T12:00:00Z", "duration_ms": 0,
            "outcome": "ok", "hook_calls_ingested": 0, "rounds": 0, "requests_created": 0,
            "requests_polled": 0, "requests_carried": 0,
            "gce_steps": [{"step": "insert_resize_request", "target": "hpc-a-j1-0a1b2c3d/rr-0a1b2c3d",
                           "ok": true, "error": null}],
            "slurm_commands": 0, "events": 0, "errors": [], "next_pass_in_secs": 30,
            "fallbacks": 0, "released_nodes": 0,
            "phases": {"slurm_read_ms": 0.0, "gce_read_ms": 0.0, "plan_ms": 0.0, "commit_ms": 0.0,
                       "act_ms": 0.0, "slurm_answer_ms": 0.0, "gce_answer_ms": 0.0},
        })
    );
    assert_eq!(serde_json::from_value::<PassReport>(v).unwrap(), r);
    r.preempted = 2;
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(v["preempted"], 2, "a pass that found preempted spot VMs says how many");
    assert_eq!(serde_json::from_value::<PassReport>(v).unwrap(), r);
    for (t, name) in [(Trigger::Startup, "startup"), (Trigger::Interval, "interval"), (Trigger::Cli, "cli")] {
        assert_eq!(serde_json::to_value(t).unwrap(), json!(name));
    }
}

#[test]
fn a_pass_is_degraded_by_an_error_or_a_failed_step() {
    let mut r = PassReport::new(1, Trigger::Interval, t0(), 30);
    r.judge();
    assert_eq!(r.outcome, PassOutcome::Ok);
    r.gce_steps.push(StepReport { step: GceStepKind::DeleteMig, target: "m".into(), ok: true, error: None });
    r.judge();
    assert_eq!(r.outcome, PassOutcome::Ok, "a step that was done (or moot) does not degrade");
    r.gce_steps.push(StepReport {
        step: GceStepKind::InsertMig,
        target: "m".into(),
        ok: false,
        error: Some("503".into()),
    });
    r.judge();
    assert_eq!(r.outcome, PassOutcome::Degraded);
    let mut r = PassReport::new(1, Trigger::Interval, t0(), 30);
    r.errors.push("listing VMs: timed out".into());
    r.judge();
    assert_eq!(r.outcome, PassOutcome::Degraded);
    assert_eq!(serde_json::to_value(r.outcome).unwrap(), json!("degraded"));
    assert_eq!(PassOutcome::Degraded.to_string(), "degraded");
}

fn plan_with_deletions() -> Plan {
    let mut p = Plan::default();
    p.event(EventKind::Orphan, vec!["hpc-a-7".into()], "VM hpc-a-7 in MIG m1 backs no node");
    p.gce.push(GceStep::DeleteMig { mig: "m2".into(), reason: "empty since noon".into() });
    p.gce.push(GceStep::DeleteInstances {
        mig: "m1".into(),
        instances: ["hpc-a-7", "hpc-a-8"]
            .map(|n| VmRef { name: n.into(), zone: "us-central1-a".into() })
            .to_vec(),
    });
    p.gce.push(GceStep::InsertMig { request: 1, mig: "m3".into(), nodeset: "a".into() });
    p
}

#[test]
fn gc_items_say_why_each_thing_goes() {
    let items = gc_items(&plan_with_deletions());
    assert_eq!(
        items,
        vec![
            GcItem { kind: GcItemKind::Mig, name: "m2".into(), mig: None, reason: "empty since noon".into() },
            GcItem {
                kind: GcItemKind::Vm,
                name: "hpc-a-7".into(),
                mig: Some("m1".into()),
                reason: "VM hpc-a-7 in MIG m1 backs no node".into(),
            },
            GcItem {
                kind: GcItemKind::Vm,
                name: "hpc-a-8".into(),
                mig: Some("m1".into()),
                reason: "the node is powered down: its VM must not exist".into(),
            },
        ]
    );
}

#[test]
fn gc_report_json_is_what_gc_prints() {
    let items = gc_items(&plan_with_deletions());
    let dry = GcReport::DryRun { would_delete: items[..2].to_vec(), errors: vec!["listing VMs: 503".into()] };
    assert_eq!(
        serde_json::to_value(&dry).unwrap(),
        json!({
            "dry_run": true,
            "would_delete": [
                {"kind": "mig", "name": "m2", "reason": "empty since noon"},
                {"kind": "vm", "name": "hpc-a-7", "mig": "m1", "reason": "VM hpc-a-7 in MIG m1 backs no node"},
            ],
            "errors": ["listing VMs: 503"],
        })
    );
    assert!(dry.dry_run());
    assert_eq!(dry.items().len(), 2);
    let pass = PassReport::new(4, Trigger::Cli, t0(), 30);
    let done = GcReport::Deleted { deleted: items[..1].to_vec(), pass: Box::new(pass.clone()) };
    let v = serde_json::to_value(&done).unwrap();
    assert_eq!(v["dry_run"], json!(false));
    assert_eq!(v["deleted"], json!([{"kind": "mig", "name": "m2", "reason": "empty since noon"}]));
    assert_eq!(v["pass"], serde_json::to_value(&pass).unwrap());
    assert_eq!(v.as_object().unwrap().len(), 3);
    assert!(!done.dry_run());
    for r in [dry, done] {
        let back: GcReport = serde_json::from_value(serde_json::to_value(&r).unwrap()).unwrap();
        assert_eq!(back, r);
    }
    assert!(serde_json::from_value::<GcReport>(json!({"dry_run": false, "would_delete": []})).is_err());
}

#[test]
fn the_next_pass_comes_sooner_while_work_is_in_flight() {
    let mut d = Desired::default();
    assert_eq!(next_pass_in(30, &d, t0()), 30, "nothing in flight");
    assert_eq!(next_pass_in(0, &d, t0()), 1, "never a busy loop");
    let mut n = new_node("hpc-a-1", "a", 1, false, t0());
    n.state = NodeState::Suspending;
    d.nodes.insert(n.name.clone(), n);
    assert_eq!(next_pass_in(30, &d, t0()), 10, "a VM to delete");
    d.requests.insert(
        1,
        Request {
            id: 1,
            nodeset: "a".into(),
            job_id: None,
            tag: "0a1b2c3d".into(),
            mig: "hpc-a-0a1b2c3d".into(),
            name: "rr-0a1b2c3d".into(),
            nodes: vec!["hpc-a-1".into()],
            run_duration: 600,
            phase: RequestPhase::Active,
            gce_state: Some(GceRequestState::Accepted),
            created_at: t0() - Duration::seconds(30),
            updated_at: t0(),
            last_error: None,
            zone_choice: None,
            zone: None,
        },
    );
    assert_eq!(next_pass_in(30, &d, t0()), 2, "a young request");
    assert_eq!(next_pass_in(30, &d, t0() + Duration::minutes(5)), 10, "a request still queued");
}
