//! Table tests of rules 8 and 9: exclusive nodes released at their job's end (`release.rs`), and
//! nodesets that cannot get capacity drained so that jobs fall back (`fallback.rs`).

use super::*;

fn up(name: &str, job: u32) -> Node {
    let mut n = node(name, NodeState::Up);
    n.job_id = Some(job);
    n
}

fn idle() -> SlurmNode {
    slurm("idle", &["CLOUD"], "")
}

fn idle_down() -> SlurmNode {
    slurm("idle", &["CLOUD", "POWERED_DOWN"], "")
}

fn job(state: &str, nodes: &[&str]) -> ObservedJob {
    ObservedJob { state: state.into(), nodes: Some(nodes.iter().map(|n| n.to_string()).collect()) }
}

fn updates(p: &Plan, state: &str) -> Vec<(Vec<String>, Option<String>)> {
    p.slurm
        .iter()
        .filter_map(|s| match s {
            SlurmStep::UpdateState { nodes, state: st, reason } if st.as_str() == state => {
                Some((nodes.clone(), reason.clone()))
            }
            _ => None,
        })
        .collect()
}

fn released(p: &Plan) -> Vec<String> {
    updates(p, "power_down_asap").into_iter().flat_map(|(n, _)| n).collect()
}

/// gpu2 is the exclusive nodeset of [`cfg`]: two up nodes of job 7 (and whatever `jobs` says).
fn exclusive_world(jobs: Option<Vec<(u32, ObservedJob)>>, s0: SlurmNode, s1: SlurmNode) -> World {
    let mut w = World::new()
        .node(up("hpc-gpu2-0", 7))
        .node(up("hpc-gpu2-1", 7))
        .vm(vm("hpc-gpu2-0", "m"))
        .vm(vm("hpc-gpu2-1", "m"))
        .slurm("hpc-gpu2-0", s0)
        .slurm("hpc-gpu2-1", s1);
    w.o.exclusive_jobs = jobs.map(|j| j.into_iter().collect());
    w
}

#[test]
fn an_exclusive_jobs_nodes_are_released_together_when_it_ends() {
    let both = ["hpc-gpu2-0", "hpc-gpu2-1"];
    // (case, jobs squeue shows, Slurm's two nodes, released)
    type Case<'a> = (&'a str, Option<Vec<(u32, ObservedJob)>>, SlurmNode, SlurmNode, Vec<&'a str>);
    let cases: Vec<Case> = vec![
        ("job gone from squeue", Some(vec![]), idle(), idle(), both.to_vec()),
        ("job COMPLETED", Some(vec![(7, job("COMPLETED", &both))]), idle(), idle(), both.to_vec()),
        ("requeued, pending", Some(vec![(7, job("PENDING", &[]))]), idle(), idle(), both.to_vec()),
        (
            "requeued, runs elsewhere",
            Some(vec![(7, job("RUNNING", &["hpc-gpu2-5"]))]),
            idle(),
            idle(),
            both.to_vec(),
        ),
        (
            "still running",
            Some(vec![(7, job("RUNNING", &both))]),
            slurm("allocated", &["CLOUD"], ""),
            slurm("allocated", &["CLOUD"], ""),
            vec![],
        ),
        (
            "one node still completing: none yet",
            Some(vec![]),
            idle(),
            slurm("idle", &["CLOUD", "COMPLETING"], ""),
            vec![],
        ),
        (
            "a second job has one node: the other goes",
            Some(vec![]),
            idle(),
            slurm("allocated", &["CLOUD"], ""),
            vec!["hpc-gpu2-0"],
        ),
        ("squeue not read: nothing", None, idle(), idle(), vec![]),
        (
            "Slurm already powering down",
            Some(vec![]),
            slurm("idle", &["CLOUD", "DRAIN", "POWER_DOWN"], "slurm-dws: exclusive: job 7 ended"),
            slurm("idle", &["CLOUD", "POWERING_DOWN"], ""),
            vec![],
        ),
        (
            "an admin drained one",
            Some(vec![]),
            slurm("idle", &["CLOUD", "DRAIN"], "maintenance"),
            idle(),
            vec!["hpc-gpu2-1"],
        ),
    ];
    for (case, jobs, s0, s1, want) in cases {
        let p = exclusive_world(jobs, s0, s1).plan();
        assert_eq!(released(&p), want, "{case}: {:?}", p.slurm);
        if !want.is_empty() {
            let reasons = updates(&p, "power_down_asap");
            assert_eq!(reasons[0].1.as_deref(), Some("slurm-dws: exclusive: job 7 ended"), "{case}");
            assert!(p
                .events
                .iter()
                .any(|e| e.kind == EventKind::Released && e.message.contains("job 7 ended")));
        }
        // The VM itself goes through Slurm's suspend, never behind its back.
        assert!(p.gce.is_empty(), "{case}: {:?}", p.gce);
    }
}

#[test]
fn only_dynamic_nodes_of_exclusive_nodesets_are_released() {
    // gpu is not exclusive
    let mut w = World::new().node(up("hpc-gpu-0", 7)).vm(vm("hpc-gpu-0", "m")).slurm("hpc-gpu-0", idle());
    w.o.exclusive_jobs = Some(BTreeMap::new());
    assert!(released(&w.plan()).is_empty());
    // b's static node, with b exclusive
    let mut w = World::new().with_static().node(up("hpc-b-0", 7)).node(up("hpc-b-1", 7));
    w = w.slurm("hpc-b-0", idle()).slurm("hpc-b-1", idle()).vm(vm("hpc-b-0", "m")).vm(vm("hpc-b-1", "m"));
    w.c.nodesets.get_mut("b").unwrap().exclusive = true;
    w.o.exclusive_jobs = Some(BTreeMap::new());
    let mut n = w.d.nodes["hpc-b-0"].clone();
    n.is_static = true;
    w = w.node(n);
    assert_eq!(released(&w.plan()), vec!["hpc-b-1"]);
    // a jobless node is not released (nothing to follow)
    let mut w = World::new()
        .node(node("hpc-gpu2-3", NodeState::Up))
        .vm(vm("hpc-gpu2-3", "m"))
        .slurm("hpc-gpu2-3", idle());
    w.o.exclusive_jobs = Some(BTreeMap::new());
    assert!(released(&w.plan()).is_empty());
}

fn backoff(ns: &str, until: DateTime<Utc>, ended: bool) -> Backoff {
    Backoff {
        nodeset: ns.into(),
        until,
        level: 0,
        reason: "capacity backoff after a stockout or quota error: x".into(),
        ended,
    }
}

const A_REASON: &str = "slurm-dws: unschedulable: capacity backoff of nodeset a until 2026-11-23T12:05:00Z";

#[test]
fn a_nodeset_in_backoff_has_its_powered_down_nodes_drained() {
    let mut w = World::new()
        .slurm("hpc-a-0", idle_down())
        .slurm("hpc-a-1", slurm("idle", &["CLOUD", "POWERING_DOWN"], ""))
        .slurm("hpc-a-2", slurm("idle", &["CLOUD", "POWERED_DOWN", "DRAIN"], "admin: bad disk"))
        .slurm("hpc-a-3", slurm("down", &["CLOUD", "POWERED_DOWN"], "ResumeTimeout reached"))
        .slurm("hpc-a-4", slurm("allocated", &["CLOUD"], ""))
        .slurm("hpc-a-5", slurm("idle", &["CLOUD", "POWERED_DOWN", "DRAIN"], A_REASON))
        .slurm("hpc-gpu-0", idle_down());
    w.d.backoffs.insert("a".into(), backoff("a", t0() + Duration::minutes(5), false));
    let p = w.plan();
    assert_eq!(updates(&p, "drain"), vec![(vec!["hpc-a-0".into(), "hpc-a-1".into()], Some(A_REASON.into()))]);
    assert!(updates(&p, "undrain").is_empty());
    let e = p.events.iter().find(|e| e.kind == EventKind::NodesetUnschedulable).expect("event");
    assert!(
        e.message.contains("nodeset a") && e.message.contains("until 2026-11-23T12:05:00Z"),
        "{}",
        e.message
    );
    // A renewed backoff (a new end) is written over our own drain.
    let mut w2 = World::new().slurm("hpc-a-5", slurm("idle", &["CLOUD", "POWERED_DOWN", "DRAIN"], A_REASON));
    w2.d.backoffs.insert("a".into(), backoff("a", t0() + Duration::minutes(10), false));
    let drains = updates(&w2.plan(), "drain");
    assert_eq!(drains.len(), 1);
    assert!(drains[0].1.as_deref().unwrap().ends_with("until 2026-11-23T12:10:00Z"));
}

#[test]
fn the_drain_is_lifted_when_the_cause_ends_or_is_found_stale() {
    // (case, backoff of a, lifted)
    let cases: Vec<(&str, Option<Backoff>, bool)> = vec![
        ("ended now", Some(backoff("a", t0(), false)), true),
        ("ended before", Some(backoff("a", t0() - Duration::minutes(1), true)), true),
        ("forgotten after a success, or a restart with no record", None, true),
        ("still on", Some(backoff("a", t0() + Duration::minutes(5), false)), false),
    ];
    for (case, b, lifted) in cases {
        let mut w = World::new()
            .slurm("hpc-a-0", slurm("idle", &["CLOUD", "POWERED_DOWN", "DRAIN"], A_REASON))
            .slurm("hpc-a-1", slurm("idle", &["CLOUD", "POWERED_DOWN", "DRAIN"], "admin: keep off"))
            .slurm(
                "hpc-a-2",
                slurm("idle", &["CLOUD", "POWERED_DOWN", "DRAIN"], "slurm-dws: something else"),
            );
        if let Some(b) = b {
            w.d.backoffs.insert("a".into(), b);
        }
        let p = w.plan();
        let undrained: Vec<String> = updates(&p, "undrain").into_iter().flat_map(|(n, _)| n).collect();
        let want: Vec<String> = if lifted { vec!["hpc-a-0".into()] } else { vec![] };
        assert_eq!(undrained, want, "{case}: only our own fallback drain is ever lifted");
        assert_eq!(p.events.iter().any(|e| e.kind == EventKind::NodesetSchedulable), lifted, "{case}");
    }
}

#[test]
fn a_failed_request_drains_its_own_nodes_in_the_same_round_and_frees_the_job() {
    let mut n = node("hpc-a-1", NodeState::Requested);
    n.request_id = Some(1);
    n.job_id = Some(7);
    let r = request(1, &["hpc-a-1"], RequestPhase::Active);
    let w = World::new()
        .node(n)
        .req(r.clone())
        .mig(mig(&r.mig, MigState::Active), Some(0))
        .rr(&r.mig, "FAILED", Some(("ZONE_RESOURCE_POOL_EXHAUSTED", "no")), true)
        .slurm("hpc-a-1", slurm("allocated", &["CLOUD", "POWERING_UP"], ""))
        .slurm("hpc-a-0", idle_down());
    let p = w.plan();
    let pos = |st: &str| {
        p.slurm.iter().position(|s| matches!(s, SlurmStep::UpdateState { state, .. } if state.as_str() == st))
    };
    assert!(pos("power_down_force") < pos("drain"), "the drain follows the power-down: {:?}", p.slurm);
    let drained: Vec<String> = updates(&p, "drain").into_iter().flat_map(|(n, _)| n).collect();
    assert_eq!(drained, vec!["hpc-a-0", "hpc-a-1"]);
    assert_eq!(p.slurm.last(), Some(&SlurmStep::SetJobsBegin { jobs: vec![7], begin: t0() }));
}

#[test]
fn a_request_queued_past_fallback_after_makes_its_nodeset_unschedulable() {
    // (fallback_after, queued for, GCE state, drained)
    let cases: &[(u64, i64, &str, bool)] = &[
        (0, 3600, "ACCEPTED", false),
        (600, 599, "ACCEPTED", false),
        (600, 600, "ACCEPTED", true),
        (600, 900, "CREATING", true),
        (600, 900, "SUCCEEDED", false),
    ];
    for &(after, age, state, want) in cases {
        let mut n = node("hpc-a-1", NodeState::Requested);
        n.request_id = Some(1);
        let mut r = request(1, &["hpc-a-1"], RequestPhase::Active);
        r.created_at = t0() - Duration::seconds(age);
        r.gce_state = Some(state.into());
        let mut w = World::new().node(n).req(r.clone()).slurm("hpc-a-0", idle_down());
        w.c.nodesets.get_mut("a").unwrap().fallback_after = after;
        let u = unschedulable(&w.c, [], [&r], t0());
        assert_eq!(u.contains_key("a"), want, "{after} {age} {state}");
        if want {
            assert!(u["a"].contains("queued since") && u["a"].contains(&format!("fallback_after {after}s")));
            // the planner drains with the same words (the request itself is left to GCE)
            let w = w.mig(mig(&r.mig, MigState::Active), Some(1)).rr(&r.mig, state, None, false);
            let drains = updates(&w.plan(), "drain");
            assert_eq!(drains.len(), 1, "{drains:?}");
            assert_eq!(drains[0].0, vec!["hpc-a-0"]);
        }
    }
}

#[test]
fn a_request_cancelled_past_queue_timeout_backs_its_nodeset_off() {
    let mut n = node("hpc-b-2", NodeState::Requested);
    n.request_id = Some(1);
    n.job_id = Some(7);
    let mut r = request(1, &["hpc-b-2"], RequestPhase::Active);
    r.nodeset = "b".into();
    r.created_at = t0() - Duration::seconds(3601);
    r.last_error = Some("queued for longer than queue_timeout (3600s)".into());
    let w = World::new()
        .node(n)
        .req(r.clone())
        .mig(mig(&r.mig, MigState::Active), Some(0))
        .rr(&r.mig, "CANCELLED", None, false)
        .slurm("hpc-b-3", idle_down());
    let p = w.plan();
    assert_eq!(p.backoffs_set.len(), 1, "{:?}", p.backoffs_set);
    assert!(p.backoffs_set[0].reason.contains("queue_timeout"), "{}", p.backoffs_set[0].reason);
    let drained: Vec<String> = updates(&p, "drain").into_iter().flat_map(|(n, _)| n).collect();
    assert!(drained.contains(&"hpc-b-3".to_string()), "{:?}", p.slurm);
    assert_eq!(p.slurm.last(), Some(&SlurmStep::SetJobsBegin { jobs: vec![7], begin: t0() }));
}
