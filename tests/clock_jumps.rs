//! Clock jumps (fault campaign, issue 9): the planner takes `now` as a parameter, so a wall clock
//! that jumps backwards (NTP step, a VM restored from a snapshot) or forwards is a table of `now`s.
//!
//! What must hold at every jump, in every scenario:
//! - planning does not panic, even a century away;
//! - going back in time never makes the planner more destructive than at the true time: the
//!   deletions, cancellations and forced power-downs it plans are a subset of those at jump 0;
//! - no node gets a second request, and a VM that backs an up node is never deleted;
//! - every maintenance reservation it creates starts before it ends;
//! - a capacity backoff never keeps a nodeset blocked for longer than `backoff_max` from now.

use chrono::{DateTime, Duration, TimeZone, Utc};
use slurm_dws::model::*;
use slurm_dws::naming::Naming;
use slurm_dws::reconcile::plan::{new_node, plan};
use slurm_dws::reconcile::*;
use std::collections::{BTreeMap, BTreeSet};

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 23, 12, 0, 0).unwrap()
}

/// Jumps of the wall clock, in seconds, from the time the state was written at.
const JUMPS: &[i64] = &[
    -100 * 365 * 86_400,
    -365 * 86_400,
    -86_400,
    -3_600,
    -301,
    -61,
    -1,
    0,
    1,
    61,
    301,
    3_600,
    86_400,
    365 * 86_400,
    100 * 365 * 86_400,
];

fn cfg() -> PlanConfig {
    let ns = |name: &str, qt: u64| NodesetPlan {
        owned_policy: None,
        reservation: None,
        name: name.into(),
        region: "us-central1".into(),
        zones: vec!["us-central1-a".into()],
        max_run_duration: 604_800,
        use_job_duration: true,
        boot_allowance: 600,
        queue_timeout: qt,
        eol_grace: 600,
        model: Default::default(),
        exclusive: false,
        fallback_after: 0,
        maintenance_reservation: true,
    };
    PlanConfig {
        naming: Naming::with_nodesets("hpc", [("a", 1, 20), ("b", 1, 20)]),
        region: "us-central1".into(),
        orphan_grace: 300,
        mig_gc_grace: 300,
        backoff_initial: 60,
        backoff_max: 1800,
        internal_ip: false,
        nodesets: [ns("a", 0), ns("b", 3600)].into_iter().map(|n| (n.name.clone(), n)).collect(),
    }
}

fn node(name: &str, state: NodeState, request: Option<i64>, mig: Option<&str>) -> Node {
    let at = cfg().naming.parse(name).unwrap();
    let mut n = new_node(name, &at.nodeset, at.index, at.is_static, t0() - Duration::hours(1));
    n.state = state;
    n.request_id = request;
    n.mig = mig.map(String::from);
    n
}

fn request(id: i64, nodeset: &str, nodes: &[&str], phase: RequestPhase, gce: Option<&str>) -> Request {
    Request {
        id,
        nodeset: nodeset.into(),
        job_id: Some(7),
        tag: format!("t{id:07}"),
        mig: format!("hpc-{nodeset}-j7-t{id:07}"),
        name: format!("rr-t{id:07}"),
        nodes: nodes.iter().map(|s| s.to_string()).collect(),
        run_duration: 6000,
        phase,
        gce_state: gce.map(GceRequestState::from),
        created_at: t0() - Duration::minutes(10),
        updated_at: t0() - Duration::minutes(10),
        last_error: None,
        zone_choice: None,
        zone: None,
    }
}

fn mig(name: &str, nodeset: &str, empty_since: Option<DateTime<Utc>>) -> (Mig, ObservedMig) {
    (
        Mig {
            name: name.into(),
            nodeset: nodeset.into(),
            region: "us-central1".into(),
            target_size: 0,
            state: MigState::Active,
            created_at: t0() - Duration::hours(1),
            empty_since,
        },
        ObservedMig {
            workload_policy: None,
            name: name.into(),
            nodeset: nodeset.into(),
            tag: "x".into(),
            job_id: Some(7),
            target_size: 0,
            created: Some(t0() - Duration::hours(1)),
        },
    )
}

fn vm(name: &str, mig: &str, created: DateTime<Utc>) -> ObservedVm {
    ObservedVm {
        topology: None,
        maintenance: None,
        name: name.into(),
        zone: "us-central1-a".into(),
        status: "RUNNING".into(),
        mig: Some(mig.into()),
        created: Some(created),
        id: None,
        termination: Some(t0() + Duration::hours(2)),
        network_ip: Some("10.0.0.2".into()),
        reservation_bound: false,
    }
}

fn slurm_node(state: &str, flags: &[&str]) -> SlurmNode {
    SlurmNode {
        state: state.into(),
        flags: flags.iter().map(|f| f.to_string()).collect(),
        reason: String::new(),
    }
}

/// One cluster state holding every kind of thing a clock can matter to.
fn world() -> (Desired, Observed) {
    let mut d = Desired::default();
    let mut o = Observed {
        vms: Some(BTreeMap::new()),
        migs: Some(BTreeMap::new()),
        slurm: Some(BTreeMap::new()),
        reservations: Some(BTreeSet::new()),
        ..Default::default()
    };
    let slurm = o.slurm.as_mut().unwrap();
    // hpc-a-1: up, its VM listed, no reservation yet (the planner will make one).
    let (m1, om1) = mig("hpc-a-j7-t0000001", "a", None);
    d.requests.insert(1, request(1, "a", &["hpc-a-1"], RequestPhase::Succeeded, Some("SUCCEEDED")));
    d.nodes.insert("hpc-a-1".into(), node("hpc-a-1", NodeState::Up, Some(1), Some(&m1.name)));
    o.vms.as_mut().unwrap().insert("hpc-a-1".into(), vm("hpc-a-1", &m1.name, t0() - Duration::minutes(30)));
    slurm.insert("hpc-a-1".into(), slurm_node("idle", &[]));
    // hpc-a-2: an orphan VM (no node record) in the same MIG, 10 minutes old.
    o.vms.as_mut().unwrap().insert("hpc-a-2".into(), vm("hpc-a-2", &m1.name, t0() - Duration::minutes(10)));
    slurm.insert("hpc-a-2".into(), slurm_node("idle", &["POWERED_DOWN"]));
    d.migs.insert(m1.name.clone(), m1);
    o.migs.as_mut().unwrap().insert(om1.name.clone(), om1);
    // hpc-b-3: requested, the request queued (ACCEPTED) for 10 minutes; nodeset b has queue_timeout 1h.
    let (m2, om2) = mig("hpc-b-j7-t0000002", "b", None);
    d.requests.insert(2, request(2, "b", &["hpc-b-3"], RequestPhase::Active, Some("ACCEPTED")));
    d.nodes.insert("hpc-b-3".into(), node("hpc-b-3", NodeState::Requested, Some(2), Some(&m2.name)));
    o.requests.insert(m2.name.clone(), ObservedRequest::in_state(GceRequestState::Accepted).into());
    slurm.insert("hpc-b-3".into(), slurm_node("idle", &["POWERING_UP"]));
    d.migs.insert(m2.name.clone(), m2);
    o.migs.as_mut().unwrap().insert(om2.name.clone(), om2);
    // An owned MIG empty for 10 minutes (mig_gc_grace 5 minutes).
    let (m3, om3) = mig("hpc-a-j8-t0000003", "a", Some(t0() - Duration::minutes(10)));
    d.migs.insert(m3.name.clone(), m3);
    o.migs.as_mut().unwrap().insert(om3.name.clone(), om3);
    // Nodeset a's static node hpc-a-0 is up too, so nothing is seeded; hpc-b-0 (static) waits.
    d.nodes.insert("hpc-a-0".into(), node("hpc-a-0", NodeState::Up, Some(1), Some("hpc-a-j7-t0000001")));
    o.vms
        .as_mut()
        .unwrap()
        .insert("hpc-a-0".into(), vm("hpc-a-0", "hpc-a-j7-t0000001", t0() - Duration::minutes(30)));
    slurm.insert("hpc-a-0".into(), slurm_node("idle", &[]));
    // hpc-a-5: a resume just recorded.
    d.nodes.insert("hpc-a-5".into(), node("hpc-a-5", NodeState::ResumePending, None, None));
    slurm.insert("hpc-a-5".into(), slurm_node("idle", &["POWERING_UP"]));
    // Nodeset b is in a capacity backoff that ends a minute after the state was written.
    d.backoffs.insert(
        "b".into(),
        Backoff {
            nodeset: "b".into(),
            until: t0() + Duration::seconds(60),
            level: 0,
            reason: "stockout".into(),
            ended: false,
        },
    );
    (d, o)
}

/// What a plan destroys: deleted VMs and MIGs, cancelled requests, nodes forced down in Slurm.
fn destructive(p: &Plan) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for s in &p.gce {
        match s {
            GceStep::DeleteInstances { instances, .. } => {
                out.extend(instances.iter().map(|i| format!("delete VM {}", i.name)))
            }
            GceStep::DeleteMig { mig, .. } => {
                out.insert(format!("delete MIG {mig}"));
            }
            GceStep::CancelResizeRequest { mig, .. } => {
                out.insert(format!("cancel request in {mig}"));
            }
            _ => {}
        }
    }
    for s in &p.slurm {
        if let SlurmStep::UpdateState { nodes, state, .. } = s {
            if state.as_str().starts_with("power_down") || state.as_str() == "down" {
                out.extend(nodes.iter().map(|n| format!("{state} {n}")));
            }
        }
    }
    out
}

#[test]
fn the_planner_is_safe_whatever_the_clock_says() {
    let (d, o) = world();
    let c = cfg();
    let at = |jump: i64| plan(&c, &d, &o, t0() + Duration::seconds(jump));
    let baseline = destructive(&at(0));
    let mut failures = Vec::new();
    for &jump in JUMPS {
        let now = t0() + Duration::seconds(jump);
        let p = match std::panic::catch_unwind(|| at(jump)) {
            Ok(p) => p,
            Err(_) => {
                failures.push(format!("jump {jump}s: plan panicked"));
                continue;
            }
        };
        let destroys = destructive(&p);
        if jump < 0 {
            let extra: Vec<&String> = destroys.difference(&baseline).collect();
            if !extra.is_empty() {
                failures.push(format!(
                    "jump {jump}s (backwards): more destructive than at the true time: {extra:?}"
                ));
            }
        }
        for up in ["hpc-a-0", "hpc-a-1"] {
            if destroys.iter().any(|x| x.ends_with(&format!(" {up}"))) {
                failures.push(format!(
                    "jump {jump}s: {up} is up with its VM, and the plan destroys it: {destroys:?}"
                ));
            }
        }
        let grouped: Vec<&String> = p.new_groups.iter().flat_map(|g| g.nodes.iter()).collect();
        for n in ["hpc-a-0", "hpc-a-1", "hpc-b-3"] {
            if grouped.iter().any(|g| *g == n) {
                failures.push(format!("jump {jump}s: {n} already has a request, and gets a second one"));
            }
        }
        for s in &p.slurm {
            if let SlurmStep::CreateReservation { name, start, end, .. } = s {
                if start >= end {
                    failures
                        .push(format!("jump {jump}s: reservation {name} starts {start} after it ends {end}"));
                }
            }
        }
        // The backoff after the plan: kept (not cleared) ones must end within backoff_max of now.
        let cleared = p.backoffs_cleared.iter().any(|b| b == "b");
        let set = p.backoffs_set.iter().find(|b| b.nodeset == "b").map(|b| b.until);
        let until = set.or_else(|| (!cleared).then(|| d.backoffs["b"].until));
        if let Some(until) = until.filter(|u| *u > now) {
            if (until - now).num_seconds() > c.backoff_max {
                failures.push(format!(
                    "jump {jump}s: nodeset b stays in capacity backoff for {}s (backoff_max {}s)",
                    (until - now).num_seconds(),
                    c.backoff_max
                ));
            }
        }
    }
    // At the true time the planner does what the state calls for, so the table is not vacuous.
    for want in ["delete VM hpc-a-2", "delete MIG hpc-a-j8-t0000003"] {
        assert!(baseline.contains(want), "at jump 0 the plan should {want}: {baseline:?}");
    }
    assert!(failures.is_empty(), "{} clock-jump failures:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn forward_jumps_time_out_queued_requests_and_backward_ones_never_do() {
    let (d, o) = world();
    let c = cfg();
    for &jump in JUMPS {
        let p = plan(&c, &d, &o, t0() + Duration::seconds(jump));
        let cancels = p.gce.iter().any(|s| matches!(s, GceStep::CancelResizeRequest { .. }));
        // Queued 10 minutes at jump 0; queue_timeout is an hour.
        let age = 600 + jump;
        assert_eq!(cancels, age > 3600, "jump {jump}s: queued {age}s, cancel = {cancels}");
    }
}
