//! Table tests of the planner: one case per rule, including the Slurm states peers get stuck in.

use super::*;
use crate::naming::Naming;
use crate::reconcile::types::*;
use chrono::{DateTime, Duration, TimeZone, Utc};
use std::collections::{BTreeMap, BTreeSet};

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 23, 12, 0, 0).unwrap()
}

/// Nodesets a (2000 nodes), b (5, queue_timeout 1h), gpu and gpu2 (20 each); with `static_b`, b's
/// first node is static.
fn naming(static_b: bool) -> Naming {
    let b = if static_b { ("b", 1, 4) } else { ("b", 0, 5) };
    Naming::with_nodesets("hpc", [("a", 0, 2000), b, ("gpu", 0, 20), ("gpu2", 0, 20)])
}

/// `(nodeset, index, is_static)` of one of our node names.
fn node_ref(c: &PlanConfig, name: &str) -> Option<(String, u32, bool)> {
    c.naming.parse(name).ok().map(|r| (r.nodeset, r.index, r.is_static))
}

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
        exclusive: name == "gpu2",
        fallback_after: 0,
        maintenance_reservation: name != "b",
    };
    PlanConfig {
        naming: naming(false),
        region: "us-central1".into(),
        orphan_grace: 300,
        mig_gc_grace: 300,
        backoff_initial: 60,
        backoff_max: 1800,
        internal_ip: false,
        nodesets: [ns("a", 0), ns("b", 3600), ns("gpu", 0), ns("gpu2", 0)]
            .into_iter()
            .map(|n| (n.name.clone(), n))
            .collect(),
    }
}

fn node(name: &str, state: NodeState) -> Node {
    let (ns, idx, st) = node_ref(&cfg(), name).expect("test node is ours");
    let mut n = new_node(name, &ns, idx, st, t0() - Duration::hours(1));
    n.state = state;
    n
}

fn request(id: i64, nodes: &[&str], phase: RequestPhase) -> Request {
    Request {
        id,
        nodeset: node_ref(&cfg(), nodes[0]).unwrap().0,
        job_id: Some(7),
        tag: format!("t{id:07}"),
        mig: format!("hpc-a-j7-t{id:07}"),
        name: format!("rr-t{id:07}"),
        nodes: nodes.iter().map(|s| s.to_string()).collect(),
        run_duration: 6000,
        phase,
        gce_state: None,
        created_at: t0() - Duration::minutes(5),
        updated_at: t0() - Duration::minutes(5),
        last_error: None,
        zone_choice: None,
        zone: None,
    }
}

fn mig(name: &str, state: MigState) -> Mig {
    Mig {
        name: name.into(),
        nodeset: "a".into(),
        region: "us-central1".into(),
        target_size: 0,
        state,
        created_at: t0() - Duration::hours(1),
        empty_since: None,
    }
}

fn vm(name: &str, mig: &str) -> ObservedVm {
    ObservedVm {
        topology: None,
        maintenance: None,
        name: name.into(),
        zone: "us-central1-a".into(),
        status: "RUNNING".into(),
        mig: Some(mig.into()),
        created: Some(t0() - Duration::minutes(30)),
        id: None,
        termination: Some(t0() + Duration::hours(2)),
        network_ip: Some("10.0.0.2".into()),
        reservation_bound: false,
    }
}

/// A VM of [`vm`] to delete.
fn vm_ref(name: &str) -> VmRef {
    VmRef { name: name.into(), zone: "us-central1-a".into() }
}

fn slurm(state: &str, flags: &[&str], reason: &str) -> SlurmNode {
    SlurmNode { state: state.into(), flags: flags.iter().collect(), reason: reason.into() }
}

struct World {
    d: Desired,
    o: Observed,
    c: PlanConfig,
}

impl World {
    fn new() -> World {
        World {
            d: Desired::default(),
            o: Observed {
                vms: Some(BTreeMap::new()),
                migs: Some(BTreeMap::new()),
                slurm: Some(BTreeMap::new()),
                reservations: Some(BTreeSet::new()),
                ..Default::default()
            },
            c: cfg(),
        }
    }
    /// Nodeset b with one static node (hpc-b-0).
    fn with_static(mut self) -> World {
        self.c.naming = naming(true);
        self
    }
    fn node(mut self, n: Node) -> World {
        self.d.nodes.insert(n.name.clone(), n);
        self
    }
    fn req(mut self, r: Request) -> World {
        self.d.requests.insert(r.id, r);
        self
    }
    fn mig(mut self, m: Mig, observed_size: Option<u32>) -> World {
        if let Some(size) = observed_size {
            self.o.migs.as_mut().unwrap().insert(
                m.name.clone(),
                ObservedMig {
                    workload_policy: None,
                    name: m.name.clone(),
                    nodeset: m.nodeset.clone(),
                    tag: "x".into(),
                    job_id: None,
                    target_size: size,
                    created: None,
                },
            );
        }
        self.d.migs.insert(m.name.clone(), m);
        self
    }
    fn vm(mut self, v: ObservedVm) -> World {
        self.o.vms.as_mut().unwrap().insert(v.name.clone(), v);
        self
    }
    fn slurm(mut self, name: &str, s: SlurmNode) -> World {
        self.o.slurm.as_mut().unwrap().insert(name.into(), s);
        self
    }
    fn rr(mut self, mig: &str, state: &str, error: Option<(&str, &str)>, capacity: bool) -> World {
        self.o.requests.insert(
            mig.into(),
            ObservedRequest {
                error: error.map(|(c, m)| (c.into(), m.into())),
                capacity_error: capacity,
                ..ObservedRequest::in_state(state.into())
            }
            .into(),
        );
        self
    }
    fn plan(&self) -> Plan {
        plan(&self.c, &self.d, &self.o, t0())
    }
}

fn node_after<'a>(p: &'a Plan, name: &str) -> Option<&'a Node> {
    p.nodes.iter().find(|n| n.name == name)
}

fn has_update(p: &Plan, node: &str, state: &str) -> bool {
    p.slurm.iter().any(|s| {
        matches!(s, SlurmStep::UpdateState { nodes, state: st, .. } if st.as_str() == state && nodes.iter().any(|n| n == node))
    })
}

#[test]
fn run_durations() {
    let c = cfg();
    let ns = &c.nodesets["a"];
    let cases: &[(Option<u32>, JobLimit, u64, bool)] = &[
        (Some(1), JobLimit::Minutes(90), 90 * 60 + 600, false),
        (Some(1), JobLimit::Unlimited, 604_800, true),
        (Some(1), JobLimit::Unknown, 604_800, true),
        (None, JobLimit::Unknown, 604_800, true),
        (Some(1), JobLimit::Minutes(10 * 24 * 60), 604_800, true),
        (Some(1), JobLimit::Minutes(0), 600, false), // 0 + boot_allowance 600 = 600: in range
    ];
    for (job, limit, want, noted) in cases {
        let rd = run_duration(ns, *job, *limit);
        assert_eq!(rd.seconds, *want, "{job:?} {limit:?}");
        assert_eq!(rd.note.is_some(), *noted, "{job:?} {limit:?}: {:?}", rd.note);
    }
    let mut short = ns.clone();
    short.boot_allowance = 0;
    let rd = run_duration(&short, Some(1), JobLimit::Minutes(1));
    assert_eq!(rd.seconds, 600);
    assert!(rd.note.unwrap().contains("clamped"));
    let mut fixed = ns.clone();
    fixed.use_job_duration = false;
    fixed.max_run_duration = 7200;
    assert_eq!(
        run_duration(&fixed, Some(1), JobLimit::Minutes(90)),
        RunDuration { seconds: 7200, note: None }
    );
}

#[test]
fn node_names_never_confused() {
    let c = World::new().with_static().c;
    assert_eq!(node_ref(&c, "hpc-gpu-1"), Some(("gpu".into(), 1, false)));
    assert_eq!(node_ref(&c, "hpc-gpu-10"), Some(("gpu".into(), 10, false)));
    assert_eq!(node_ref(&c, "hpc-gpu2-1"), Some(("gpu2".into(), 1, false)));
    assert_eq!(node_ref(&c, "hpc-b-0"), Some(("b".into(), 0, true)));
    for bad in
        ["hpc-gpu-20", "hpc-gpu-01", "hpc-gpu-", "hpc-gpu-x", "other-a-1", "hpc-a", "hpcx-a-1", "hpc-c-1"]
    {
        assert_eq!(node_ref(&c, bad), None, "{bad}");
    }
}

#[test]
fn pending_nodes_group_by_nodeset_and_job_and_split_at_1000() {
    let mut w = World::new();
    for i in 0..1500 {
        let mut n = node(&format!("hpc-a-{i}"), NodeState::ResumePending);
        n.job_id = Some(if i < 1200 { 1 } else { 2 });
        w = w.node(n);
    }
    for i in 0..3 {
        w = w.node(node(&format!("hpc-gpu-{i}"), NodeState::ResumePending));
    }
    w.o.job_limits.insert(1, JobLimit::Minutes(90));
    w.o.job_limits.insert(2, JobLimit::Unlimited);
    let p = w.plan();
    let sizes: Vec<(String, Option<u32>, usize, u64)> =
        p.new_groups.iter().map(|g| (g.nodeset.clone(), g.job_id, g.nodes.len(), g.run_duration)).collect();
    assert_eq!(
        sizes,
        vec![
            ("a".into(), Some(1), 1000, 6000),
            ("a".into(), Some(1), 200, 6000),
            ("a".into(), Some(2), 300, 604_800),
            ("gpu".into(), None, 3, 604_800),
        ]
    );
    assert!(p
        .events
        .iter()
        .any(|e| e.kind.as_str() == "run_duration" && e.message.contains("no time limit")));
    assert!(p.gce.is_empty(), "groups are recorded before anything is sent");
}

#[test]
fn nothing_is_requested_when_vms_cannot_be_listed() {
    let mut w = World::new().node(node("hpc-a-1", NodeState::ResumePending));
    w.o.vms = None;
    assert!(w.plan().new_groups.is_empty());
}

/// A node resumed again while the request it was suspended out of is still open (being cancelled,
/// or provisioning anyway) is not requested a second time: two requests would race for one VM
/// name. Once the earlier request is final, the node is requested (or the VM it brought is reused).
#[test]
fn a_name_an_open_request_may_still_create_is_not_requested_twice() {
    let mut old = request(1, &["hpc-a-3", "hpc-a-4"], RequestPhase::Active);
    old.last_error = Some("cancelled: every node of the request was suspended".into());
    let mut member = node("hpc-a-4", NodeState::Suspending);
    member.request_id = Some(1);
    let w = World::new()
        .node(node("hpc-a-3", NodeState::ResumePending))
        .node(member.clone())
        .req(old.clone())
        .mig(mig("hpc-a-j7-t0000001", MigState::Active), Some(2))
        .rr("hpc-a-j7-t0000001", "ACCEPTED", None, false);
    let p = w.plan();
    assert!(p.new_groups.is_empty(), "the open request may still create hpc-a-3: {:?}", p.new_groups);
    let w = World::new()
        .node(node("hpc-a-3", NodeState::ResumePending))
        .req(Request { phase: RequestPhase::Releasing, ..old.clone() })
        .mig(mig("hpc-a-j7-t0000001", MigState::Active), Some(2))
        .rr("hpc-a-j7-t0000001", "ACCEPTED", None, false);
    assert!(w.plan().new_groups.is_empty(), "releasing");
    // A request with no member left that was never sent ends in this pass; final ones are final:
    // the node is requested again.
    for phase in [RequestPhase::Planned, RequestPhase::Succeeded, RequestPhase::Failed, RequestPhase::Done] {
        let w = World::new()
            .node(node("hpc-a-3", NodeState::ResumePending))
            .req(Request { phase, ..old.clone() });
        let p = w.plan();
        assert_eq!(p.new_groups.len(), 1, "{phase:?}: {:?}", p.new_groups);
        assert_eq!(p.new_groups[0].nodes, vec!["hpc-a-3".to_string()]);
    }
}

#[test]
fn request_lifecycle_steps() {
    let mut n = node("hpc-a-1", NodeState::Requested);
    n.request_id = Some(1);
    // planned → insert the MIG
    let w = World::new().node(n.clone()).req(request(1, &["hpc-a-1"], RequestPhase::Planned));
    assert!(matches!(w.plan().gce.as_slice(), [GceStep::InsertMig { request: 1, .. }]));
    // planned, MIG seen → MIG ready → insert the resize request in the same round
    let r = request(1, &["hpc-a-1"], RequestPhase::Planned);
    let w = World::new().node(n.clone()).req(r.clone()).mig(mig(&r.mig, MigState::Creating), Some(0));
    let p = w.plan();
    assert!(matches!(p.gce.as_slice(), [GceStep::InsertResizeRequest { request: 1, .. }]), "{:?}", p.gce);
    assert_eq!(p.requests[0].phase, RequestPhase::MigReady);
    // active, ACCEPTED → nothing but the state
    let r = request(1, &["hpc-a-1"], RequestPhase::Active);
    let w = World::new()
        .node(n.clone())
        .req(r.clone())
        .mig(mig(&r.mig, MigState::Active), Some(1))
        .rr(&r.mig, "ACCEPTED", None, false);
    let p = w.plan();
    assert!(p.gce.is_empty());
    assert_eq!(p.requests[0].gce_state.as_ref().map(GceRequestState::as_str), Some("ACCEPTED"));
    // SUCCEEDED → node up
    let w = World::new()
        .node(n.clone())
        .req(r.clone())
        .mig(mig(&r.mig, MigState::Active), Some(1))
        .rr(&r.mig, "SUCCEEDED", None, false)
        .vm(vm("hpc-a-1", &r.mig));
    let p = w.plan();
    assert_eq!(node_after(&p, "hpc-a-1").unwrap().state, NodeState::Up);
    assert_eq!(p.requests[0].phase, RequestPhase::Succeeded);
    // the end-of-life reservation starts eol_grace before the VM's real termination time
    let res = p.slurm.iter().find_map(|s| match s {
        SlurmStep::CreateReservation { start, node, .. } => Some((node.clone(), *start)),
        _ => None,
    });
    assert_eq!(res, Some(("hpc-a-1".into(), t0() + Duration::hours(2) - Duration::seconds(600))));
}

/// (phase and zone before, GCE's state of the request, the zones of the two nodes' VMs in the
/// group's MIG (None: no VM listed), zone and phase after, the request written).
type ZoneCase<'a> =
    ((RequestPhase, Option<&'a str>), &'a str, [Option<&'a str>; 2], (Option<&'a str>, RequestPhase), bool);

/// A group's zone is where GCE put its VMs: unset while queued, set by the pass that first lists a
/// VM its MIG made for one of its nodes (even the pass it succeeds or ends in), the distinct zones
/// sorted and joined with "," when GCE spread them, and kept once the group succeeded.
#[test]
fn a_request_records_the_zone_its_vms_are_in_once_they_are_listed() {
    use RequestPhase::{Active, Done, Succeeded};
    let (b, c) = (Some("us-central1-b"), Some("us-central1-c"));
    let both = Some("us-central1-b,us-central1-c");
    // GCE's state "": not polled (a succeeded group); GONE: its MIG is no longer listed (its VMs
    // expired, its nodes powered down) while the list still shows them.
    const GONE: &str = "gone";
    let cases: [ZoneCase; 8] = [
        ((Active, None), "ACCEPTED", [None, None], (None, Active), true), // queued: none yet
        ((Active, None), "SUCCEEDED", [b, b], (b, Succeeded), true),      // listed as it succeeds
        ((Succeeded, None), "", [b, b], (b, Succeeded), true),            // listed a pass later
        ((Succeeded, b), "", [b, b], (b, Succeeded), false),              // steady: not written
        ((Succeeded, b), "", [c, None], (b, Succeeded), false),           // kept, whatever GCE lists
        ((Active, None), "SUCCEEDED", [c, b], (both, Succeeded), true),   // spread: sorted
        ((Active, c), "ACCEPTED", [c, b], (both, Active), true),          // in flight: one added
        ((Succeeded, None), GONE, [b, b], (b, Done), true),               // done as it is listed
    ];
    let nodes = ["hpc-a-1", "hpc-a-2"];
    let world = |phase, zone: Option<&str>, gce: &str| {
        let r = Request { zone: zone.map(str::to_string), ..request(1, &nodes, phase) };
        let state = match (phase, gce) {
            (_, GONE) => NodeState::PoweredDown,
            (Active, _) => NodeState::Requested,
            _ => NodeState::Up,
        };
        let mut w = World::new().req(r.clone());
        for n in nodes {
            w = w.node(Node { request_id: Some(1), ..node(n, state) });
        }
        if gce != GONE {
            w = w.mig(mig(&r.mig, MigState::Active), Some(2));
        }
        if !gce.is_empty() && gce != GONE {
            w = w.rr(&r.mig, gce, None, false);
        }
        (w, r)
    };
    for (i, ((phase, before), gce, zones, after, written)) in cases.into_iter().enumerate() {
        let (mut w, r) = world(phase, before, gce);
        for (n, z) in nodes.iter().zip(zones) {
            if let Some(z) = z {
                w = w.vm(ObservedVm { zone: z.to_string(), ..vm(n, &r.mig) });
            }
        }
        let p = w.plan();
        let out = p.requests.iter().find(|x| x.id == 1);
        assert_eq!(out.is_some(), written, "case {i}: {:?}", p.requests);
        let out = out.unwrap_or(&r);
        assert_eq!((out.zone.as_deref(), out.phase), after, "case {i}");
    }
    // The node's VM from another group's MIG (hpc-a-1's previous group) is not this group's.
    let (w, _) = world(Active, None, "ACCEPTED");
    let p = w.vm(ObservedVm { zone: "us-central1-b".into(), ..vm("hpc-a-1", "hpc-a-j7-t0000009") }).plan();
    assert_eq!(p.requests[0].zone, None);
}

#[test]
fn failed_request_requeues_releases_and_backs_off() {
    let mut n = node("hpc-a-1", NodeState::Requested);
    n.request_id = Some(1);
    n.job_id = Some(7);
    let r = request(1, &["hpc-a-1"], RequestPhase::Active);
    let w = World::new()
        .node(n)
        .req(r.clone())
        .mig(mig(&r.mig, MigState::Active), Some(0))
        .rr(&r.mig, "FAILED", Some(("ZONE_RESOURCE_POOL_EXHAUSTED", "no a3u in us-central1-a")), true)
        .slurm("hpc-a-1", slurm("allocated", &["CLOUD", "NOT_RESPONDING", "POWERING_UP"], ""));
    let p = w.plan();
    let after = node_after(&p, "hpc-a-1").unwrap();
    assert_eq!(after.state, NodeState::PoweredDown);
    assert!(after.last_error.as_ref().unwrap().contains("ZONE_RESOURCE_POOL_EXHAUSTED"));
    assert!(
        has_update(&p, "hpc-a-1", "power_down_force"),
        "the job is requeued through Slurm: {:?}",
        p.slurm
    );
    let reason = p.slurm.iter().find_map(|s| match s {
        SlurmStep::UpdateState { reason, .. } => reason.clone(),
        _ => None,
    });
    assert!(reason.unwrap().contains(&r.name), "the Slurm reason names the request");
    assert!(p.gce.iter().any(|s| matches!(s, GceStep::DeleteMig { mig, .. } if *mig == r.mig)));
    assert_eq!(p.backoffs_set.len(), 1);
    assert_eq!(p.backoffs_set[0].until, t0() + Duration::seconds(60));
    assert!(p.events.iter().any(|e| e.kind.as_str() == "request_failed" && e.message.contains("no a3u")));
    // The requeued job may start again now (a's nodes are drained for the backoff instead, so it
    // starts in another of its partitions, or here when the drain is lifted), after the node
    // update that requeued it.
    assert_eq!(
        p.slurm.last(),
        Some(&SlurmStep::SetJobsBegin { jobs: vec![7], begin: t0() }),
        "{:?}",
        p.slurm
    );
}

#[test]
fn backoff_grows_and_caps() {
    let c = cfg();
    let mut prev: Option<Backoff> = None;
    let mut secs = vec![];
    for _ in 0..8 {
        let b = next_backoff(&c, prev.as_ref(), "x", t0());
        secs.push((b.until - t0()).num_seconds());
        prev = Some(b);
    }
    assert_eq!(secs, vec![60, 120, 240, 480, 960, 1800, 1800, 1800]);
}

#[test]
fn nodes_in_backoff_are_answered_at_once() {
    let mut n = node("hpc-a-3", NodeState::ResumePending);
    n.job_id = Some(9);
    let mut w = World::new().node(n).slurm("hpc-a-3", slurm("allocated", &["CLOUD", "POWERING_UP"], ""));
    w.d.backoffs.insert(
        "a".into(),
        Backoff {
            nodeset: "a".into(),
            until: t0() + Duration::minutes(5),
            level: 0,
            reason: "stockout".into(),
            ended: false,
        },
    );
    let p = w.plan();
    assert!(p.new_groups.is_empty());
    assert_eq!(node_after(&p, "hpc-a-3").unwrap().state, NodeState::PoweredDown);
    assert!(has_update(&p, "hpc-a-3", "power_down_force"));
    // Not held until the backoff ends: a's powered-down nodes are drained instead (fallback.rs), so
    // a job that names another partition starts there now.
    assert_eq!(p.slurm.last(), Some(&SlurmStep::SetJobsBegin { jobs: vec![9], begin: t0() }));
    assert!(has_update(&p, "hpc-a-3", "drain"));
    // ...and the backoff ends by itself
    let mut w = World::new();
    w.d.backoffs.insert(
        "a".into(),
        Backoff { nodeset: "a".into(), until: t0(), level: 3, reason: "x".into(), ended: false },
    );
    let p = w.plan();
    // ...kept, for its level, and announced once
    assert!(p.backoffs_cleared.is_empty());
    assert_eq!(p.backoffs_set, vec![Backoff { ended: true, ..w.d.backoffs["a"].clone() }]);
    assert!(p.events.iter().any(|e| e.kind == EventKind::BackoffEnded && e.message.contains("level 3")));
    w.d.backoffs.insert("a".into(), p.backoffs_set[0].clone());
    let p = w.plan();
    assert!(p.backoffs_set.is_empty() && p.events.is_empty(), "{:?}", p.events);
}

/// A failed request of a nodeset whose backoff ends in the same round: the new, deeper backoff is
/// what the round records (it was listed as set and cleared, and lost). Then a success forgets it.
#[test]
fn a_backoff_that_ends_and_starts_again_in_one_round_is_kept_one_level_deeper() {
    let mut n = node("hpc-a-1", NodeState::Requested);
    n.request_id = Some(1);
    let r = request(1, &["hpc-a-1"], RequestPhase::Active);
    let ending = Backoff { nodeset: "a".into(), until: t0(), level: 2, reason: "x".into(), ended: false };
    let mut w = World::new().node(n.clone()).req(r.clone()).mig(mig(&r.mig, MigState::Active), Some(0)).rr(
        &r.mig,
        "FAILED",
        Some(("ZONE_RESOURCE_POOL_EXHAUSTED", "no a3u")),
        true,
    );
    w.d.backoffs.insert("a".into(), ending.clone());
    let p = w.plan();
    assert!(p.backoffs_cleared.is_empty(), "{:?}", p.backoffs_cleared);
    assert_eq!(p.backoffs_set.len(), 1, "{:?}", p.backoffs_set);
    let b = &p.backoffs_set[0];
    assert_eq!((b.level, b.ended, b.until), (3, false, t0() + Duration::seconds(480)));
    assert!(b.reason.starts_with("capacity backoff") && b.reason.contains("ZONE_RESOURCE_POOL_EXHAUSTED"));
    // The same when the backoff had ended in an earlier pass: the level stays until a success.
    w.d.backoffs.insert("a".into(), Backoff { ended: true, ..ending.clone() });
    assert_eq!(w.plan().backoffs_set[0].level, 3);
    // A success forgets the level.
    let mut w = World::new().node(n).req(r.clone()).mig(mig(&r.mig, MigState::Active), Some(1)).rr(
        &r.mig,
        "SUCCEEDED",
        None,
        false,
    );
    w.d.backoffs.insert("a".into(), Backoff { ended: true, ..ending });
    assert_eq!(w.plan().backoffs_cleared, vec!["a".to_string()]);
}

/// A MIG GCE refused for its workload policy (missing, another region: `gce::PolicyFailure`)
/// fails its request with a `policy_refused` event and a placement backoff, each failure one level
/// deeper: the nodeset waits, it does not ask again at once.
#[test]
fn a_refused_workload_policy_backs_the_nodeset_off_with_a_placement_backoff() {
    use crate::model::PolicyFailure;
    for f in [PolicyFailure::Missing, PolicyFailure::WrongRegion] {
        let mut n = node("hpc-a-1", NodeState::Requested);
        n.request_id = Some(1);
        let r = request(1, &["hpc-a-1"], RequestPhase::Active);
        let msg = "regionInstanceGroupManagers.insert: 404 notFound: The resource 'projects/p/regions/us-central1/resourcePolicies/wp' was not found";
        let w = World::new().node(n.clone()).req(r.clone()).mig(mig(&r.mig, MigState::Active), Some(0)).rr(
            &r.mig,
            "FAILED",
            Some((f.code(), msg)),
            false,
        );
        let p = w.plan();
        assert_eq!(p.backoffs_set.len(), 1, "{f:?}");
        let b = &p.backoffs_set[0];
        assert!(b.reason.starts_with("placement backoff") && b.reason.contains(f.code()), "{}", b.reason);
        assert_eq!(b.until, t0() + Duration::seconds(w.c.backoff_initial), "{f:?}");
        let refused: Vec<_> = p.events.iter().filter(|e| e.kind == EventKind::PolicyRefused).collect();
        assert_eq!(refused.len(), 1, "{f:?}: {:?}", p.events);
        assert!(refused[0].message.contains("nodeset a") && refused[0].message.contains(f.code()));
        assert!(p.requests.iter().any(|x| x.id == 1 && x.phase == RequestPhase::Failed), "{f:?}");
        // A second failure after the first backoff ended: one level deeper.
        let mut w2 = w;
        w2.d.backoffs.insert("a".into(), Backoff { ended: true, ..p.backoffs_set[0].clone() });
        let p2 = w2.plan();
        let b2 = p2.backoffs_set.iter().find(|b| b.nodeset == "a").expect("a backoff");
        assert_eq!(b2.level, 1, "{f:?}");
    }
}

/// Every failure GCE gives a reason for backs the nodeset off, each class in its own words: a bad
/// image is not a stockout. A cancel slurm-dws made does not back off.
#[test]
fn failures_that_are_not_capacity_back_off_with_their_own_message() {
    let mut n = node("hpc-a-1", NodeState::Requested);
    n.request_id = Some(1);
    let r = request(1, &["hpc-a-1"], RequestPhase::Active);
    let w = World::new().node(n.clone()).req(r.clone()).mig(mig(&r.mig, MigState::Active), Some(0)).rr(
        &r.mig,
        "FAILED",
        Some(("RESOURCE_NOT_FOUND", "The resource 'projects/p/global/images/x' was not found")),
        false,
    );
    let p = w.plan();
    assert_eq!(p.backoffs_set.len(), 1);
    let reason = &p.backoffs_set[0].reason;
    assert!(
        reason.starts_with("error backoff")
            && reason.contains("image")
            && reason.contains("RESOURCE_NOT_FOUND"),
        "{reason}"
    );
    assert!(p.events.iter().any(|e| e.kind == EventKind::Backoff && e.message.contains("error backoff")));
    // cancelled because its nodes were suspended: no backoff
    let w = World::new().node(n).req(r.clone()).mig(mig(&r.mig, MigState::Active), Some(0)).rr(
        &r.mig,
        "CANCELLED",
        None,
        false,
    );
    assert!(w.plan().backoffs_set.is_empty());
}

#[test]
fn queued_past_timeout_is_cancelled_and_then_released() {
    let mut n = node("hpc-b-2", NodeState::Requested);
    n.request_id = Some(1);
    let mut r = request(1, &["hpc-b-2"], RequestPhase::Active);
    r.nodeset = "b".into();
    r.created_at = t0() - Duration::seconds(3601);
    let w = World::new()
        .node(n.clone())
        .req(r.clone())
        .mig(mig(&r.mig, MigState::Active), Some(1))
        .rr(&r.mig, "ACCEPTED", None, false);
    let p = w.plan();
    assert!(matches!(p.gce.as_slice(), [GceStep::CancelResizeRequest { request: 1, .. }]), "{:?}", p.gce);
    assert!(p.events.iter().any(|e| e.kind.as_str() == "queue_timeout"));
    // when GCE says CANCELLED the cause recorded is the timeout
    let mut r2 = p.requests[0].clone();
    r2.gce_state = Some("ACCEPTED".into());
    let w = World::new().node(n).req(r2.clone()).mig(mig(&r.mig, MigState::Active), Some(0)).rr(
        &r.mig,
        "CANCELLED",
        None,
        false,
    );
    let p = w.plan();
    assert!(node_after(&p, "hpc-b-2").unwrap().last_error.as_ref().unwrap().contains("queue_timeout"));
}

#[test]
fn suspend_of_queued_request_cancels_it() {
    let mut n = node("hpc-a-1", NodeState::Suspending);
    n.request_id = Some(1);
    let r = request(1, &["hpc-a-1"], RequestPhase::Active);
    let w = World::new()
        .node(n)
        .req(r.clone())
        .mig(mig(&r.mig, MigState::Active), Some(1))
        .rr(&r.mig, "ACCEPTED", None, false);
    let p = w.plan();
    assert!(matches!(p.gce.as_slice(), [GceStep::CancelResizeRequest { .. }]));
    assert!(node_after(&p, "hpc-a-1").is_none(), "the node waits, suspending, for the cancel");
}

/// Some nodes of a queued request are suspended while others are still wanted: a regional MIG's
/// queued VMs have no URL for deleteInstances, so the request is cancelled; once CANCELLED the
/// suspended node is powered down and the wanted one is requested again for the same job, with no
/// word to Slurm and no backoff.
#[test]
fn suspending_part_of_a_queued_request_cancels_it_and_requests_the_rest_again() {
    let mut gone = node("hpc-a-5", NodeState::Suspending);
    gone.request_id = Some(1);
    gone.job_id = Some(7);
    let mut kept = node("hpc-a-4", NodeState::Requested);
    kept.request_id = Some(1);
    kept.job_id = Some(7);
    kept.mig = Some("hpc-a-j7-t0000001".into());
    let r = request(1, &["hpc-a-4", "hpc-a-5"], RequestPhase::Active);
    let world = |r: &Request, state: &str| {
        World::new()
            .node(gone.clone())
            .node(kept.clone())
            .req(r.clone())
            .mig(mig(&r.mig, MigState::Active), Some(2))
            .rr(&r.mig, state, None, false)
    };
    let p = world(&r, "ACCEPTED").plan();
    assert_eq!(p.gce, vec![GceStep::CancelResizeRequest { request: 1, mig: r.mig.clone() }]);
    assert_eq!(p.requests[0].phase, RequestPhase::Releasing);
    assert!(p.events.iter().any(|e| e.kind == EventKind::RequestReleasing), "{:?}", p.events);
    assert!(p.nodes.is_empty(), "both nodes wait for the cancel: {:?}", p.nodes);
    assert!(p.slurm.is_empty(), "{:?}", p.slurm);

    // Still ACCEPTED next pass (the cancel's Operation was slow): the same cancel again, the reason
    // kept over GCE's last attempt.
    let mut releasing = p.requests[0].clone();
    let mut w = world(&releasing, "ACCEPTED");
    if let Some(PolledRequest::Found(rr)) = w.o.requests.get_mut(&r.mig) {
        rr.last_attempt = Some("ZONE_RESOURCE_POOL_EXHAUSTED: waiting".into());
    }
    let p = w.plan();
    assert_eq!(p.gce, vec![GceStep::CancelResizeRequest { request: 1, mig: r.mig.clone() }]);
    assert!(p.requests.iter().all(|x| x.last_error == releasing.last_error), "{:?}", p.requests);

    // CANCELLED: hpc-a-5 powered down, hpc-a-4 in a new group for job 7, the old MIG deleted.
    releasing.gce_state = Some("ACCEPTED".into());
    let p = world(&releasing, "CANCELLED").plan();
    assert_eq!(node_after(&p, "hpc-a-5").unwrap().state, NodeState::PoweredDown);
    let again = node_after(&p, "hpc-a-4").unwrap();
    assert_eq!((again.state, again.request_id, again.mig.as_deref()), (NodeState::ResumePending, None, None));
    assert_eq!(
        p.new_groups,
        vec![NewGroup {
            nodeset: "a".into(),
            job_id: Some(7),
            nodes: vec!["hpc-a-4".into()],
            run_duration: 604_800
        }]
    );
    assert!(
        p.gce.iter().any(|s| matches!(s, GceStep::DeleteMig { mig, .. } if *mig == r.mig)),
        "{:?}",
        p.gce
    );
    assert_eq!(p.requests[0].phase, RequestPhase::Failed);
    assert!(p.slurm.is_empty(), "Slurm is told nothing: the job keeps waiting: {:?}", p.slurm);
    assert!(p.backoffs_set.is_empty());
}

#[test]
fn suspend_deletes_exactly_the_nodes_vms_batched_per_mig() {
    let mut w = World::new().mig(mig("hpc-a-j7-t0000001", MigState::Active), Some(3));
    for i in 0..3 {
        let mut n = node(&format!("hpc-a-{i}"), if i < 2 { NodeState::Suspending } else { NodeState::Up });
        n.mig = Some("hpc-a-j7-t0000001".into());
        w = w.node(n).vm(vm(&format!("hpc-a-{i}"), "hpc-a-j7-t0000001"));
    }
    let p = w.plan();
    assert_eq!(
        p.gce,
        vec![GceStep::DeleteInstances {
            mig: "hpc-a-j7-t0000001".into(),
            instances: vec![vm_ref("hpc-a-0"), vm_ref("hpc-a-1")]
        }]
    );
    // once the VM is gone the node is powered down
    let w = World::new().node(node("hpc-a-0", NodeState::Suspending));
    assert_eq!(node_after(&w.plan(), "hpc-a-0").unwrap().state, NodeState::PoweredDown);
}

#[test]
fn a_vm_that_appears_for_a_suspended_node_is_deleted() {
    let mut n = node("hpc-a-1", NodeState::PoweredDown);
    n.request_id = Some(1);
    let w = World::new()
        .node(n)
        .mig(mig("hpc-a-j7-t0000001", MigState::Active), Some(1))
        .vm(vm("hpc-a-1", "hpc-a-j7-t0000001"))
        .slurm("hpc-a-1", slurm("idle", &["CLOUD", "POWERED_DOWN"], ""));
    let p = w.plan();
    assert!(p.gce.iter().any(
        |s| matches!(s, GceStep::DeleteInstances { instances, .. } if instances == &vec![vm_ref("hpc-a-1")])
    ));
}

/// A VM GCE is already deleting (STOPPING) is left to go: not deleted again, whether its node is
/// suspending or already powered down, and never adopted even when Slurm wants the node.
#[test]
fn a_vm_being_deleted_is_neither_deleted_again_nor_adopted() {
    let stopping = |name: &str| ObservedVm { status: "STOPPING".into(), ..vm(name, "hpc-a-j7-t0000001") };
    let mut down = node("hpc-a-1", NodeState::PoweredDown);
    down.request_id = Some(1);
    let mut suspending = node("hpc-a-2", NodeState::Suspending);
    suspending.request_id = Some(1);
    suspending.mig = Some("hpc-a-j7-t0000001".into());
    let w = World::new()
        .node(down)
        .node(suspending)
        .node(node("hpc-a-3", NodeState::PoweredDown))
        .mig(mig("hpc-a-j7-t0000001", MigState::Active), Some(1))
        .vm(stopping("hpc-a-1"))
        .vm(stopping("hpc-a-2"))
        .vm(stopping("hpc-a-3"))
        .slurm("hpc-a-1", slurm("idle", &["CLOUD", "POWERED_DOWN"], ""))
        .slurm("hpc-a-2", slurm("idle", &["CLOUD", "POWERING_DOWN"], ""))
        .slurm("hpc-a-3", slurm("allocated", &["CLOUD", "POWERING_UP"], ""));
    let p = w.plan();
    assert!(!p.gce.iter().any(|s| matches!(s, GceStep::DeleteInstances { .. })), "{:?}", p.gce);
    assert!(node_after(&p, "hpc-a-3").is_none_or(|n| n.state != NodeState::Up), "a dying VM is not adopted");
}

#[test]
fn expiry_of_a_dynamic_node_takes_it_out_of_service() {
    let mut n = node("hpc-a-1", NodeState::Up);
    n.job_id = Some(7);
    n.termination_time = Some(t0() - Duration::seconds(5));
    n.vm_status = Some("RUNNING".into());
    n.reservation = Some(eol_reservation("hpc-a-1"));
    let w = World::new().node(n).slurm("hpc-a-1", slurm("allocated", &["CLOUD"], ""));
    let p = w.plan();
    let after = node_after(&p, "hpc-a-1").unwrap();
    assert_eq!(after.state, NodeState::PoweredDown);
    assert!(has_update(&p, "hpc-a-1", "power_down_force"));
    assert!(p.slurm.iter().any(|s| matches!(s, SlurmStep::DeleteReservation { .. })));
    assert!(p.events.iter().any(|e| e.kind.as_str() == "expired"));
    assert!(
        p.events.iter().any(|e| e.kind == EventKind::ReservationDeleted
            && e.nodes == ["hpc-a-1"]
            && e.message == "end-of-life reservation slurm-dws-eol-hpc-a-1 removed: the node's VM is gone"),
        "{:?}",
        p.events
    );
    // No VM, no stale step: the requeued job need not sit out Slurm's requeue hold.
    assert_eq!(p.slurm.last(), Some(&SlurmStep::SetJobsBegin { jobs: vec![7], begin: t0() }));
}

#[test]
fn expiry_of_a_static_node_reprovisions_in_the_same_pass() {
    let mut n = node("hpc-b-0", NodeState::Up);
    n.is_static = true;
    n.termination_time = Some(t0() - Duration::seconds(5));
    n.vm_status = Some("RUNNING".into());
    let w = World::new().with_static().node(n).slurm("hpc-b-0", slurm("idle", &["CLOUD"], ""));
    let p = w.plan();
    assert_eq!(node_after(&p, "hpc-b-0").unwrap().state, NodeState::ResumePending);
    assert!(has_update(&p, "hpc-b-0", "down"), "out of service while re-provisioning");
    assert_eq!(p.new_groups.len(), 1, "re-provisioned in the same pass");
    assert_eq!(p.new_groups[0].nodes, vec!["hpc-b-0".to_string()]);
}

#[test]
fn a_static_node_back_up_returns_to_service() {
    let mut n = node("hpc-b-0", NodeState::Up);
    n.is_static = true;
    n.vm_status = Some("STAGING".into());
    n.mig = Some("hpc-b-t1".into());
    let w = World::new()
        .node(n)
        .mig(mig("hpc-b-t1", MigState::Active), Some(1))
        .vm(vm("hpc-b-0", "hpc-b-t1"))
        .slurm("hpc-b-0", slurm("down", &["CLOUD"], "slurm-dws: run duration ended; re-provisioning"));
    assert!(has_update(&w.plan(), "hpc-b-0", "resume"));
    // Slurm's ResumeTimeout set it DOWN while it waited for its VM (a reservation's window not yet
    // open, a long queue): once the VM runs and slurmd registers, it is back in service too. An
    // admin's DOWN is left alone.
    for (reason, resumed) in [("ResumeTimeout reached", true), ("bad GPU, ticket 123", false)] {
        let mut n = node("hpc-b-0", NodeState::Up);
        n.is_static = true;
        n.vm_status = Some("RUNNING".into());
        n.mig = Some("hpc-b-t1".into());
        let w = World::new()
            .node(n)
            .mig(mig("hpc-b-t1", MigState::Active), Some(1))
            .vm(vm("hpc-b-0", "hpc-b-t1"))
            .slurm("hpc-b-0", slurm("down", &["CLOUD"], reason));
        assert_eq!(has_update(&w.plan(), "hpc-b-0", "resume"), resumed, "{reason}");
    }
}

#[test]
fn static_nodes_are_provisioned_from_startup() {
    let w = World::new().with_static().slurm("hpc-b-0", slurm("idle", &["CLOUD", "POWERED_DOWN"], ""));
    let p = w.plan();
    assert_eq!(p.new_groups.len(), 1);
    assert_eq!(p.new_groups[0].nodes, vec!["hpc-b-0".to_string()]);
    assert!(has_update(&p, "hpc-b-0", "power_up"), "Slurm is told to expect the node");
}

#[test]
fn odd_slurm_states_peers_get_stuck_in() {
    // down~ after ResumeTimeout, no VM: back to powered-down and usable
    let w = World::new().node(node("hpc-a-4", NodeState::PoweredDown)).slurm(
        "hpc-a-4",
        slurm("down", &["CLOUD", "POWERED_DOWN", "NOT_RESPONDING"], "ResumeTimeout reached"),
    );
    assert!(has_update(&w.plan(), "hpc-a-4", "resume"));
    // an admin's own DOWN is left alone
    let w = World::new()
        .node(node("hpc-a-4", NodeState::PoweredDown))
        .slurm("hpc-a-4", slurm("down", &["CLOUD", "POWERED_DOWN"], "bad GPU, ticket 123"));
    assert!(w.plan().slurm.is_empty());
    // IDLE+CLOUD+POWERED_DOWN+NOT_RESPONDING: Slurm can resume it; nothing to do, nothing harmful done
    let w = World::new()
        .node(node("hpc-a-5", NodeState::PoweredDown))
        .slurm("hpc-a-5", slurm("idle", &["CLOUD", "POWERED_DOWN", "NOT_RESPONDING"], ""));
    let p = w.plan();
    assert!(p.slurm.is_empty() && p.gce.is_empty() && p.new_groups.is_empty());
}

#[test]
fn drift_powering_up_without_record_is_requested_after_grace() {
    let mut n = node("hpc-a-6", NodeState::PoweredDown);
    n.state_since = t0() - Duration::seconds(DRIFT_GRACE_SECS + 1);
    let w = World::new().node(n.clone()).slurm("hpc-a-6", slurm("allocated", &["CLOUD", "POWERING_UP"], ""));
    assert_eq!(w.plan().new_groups.len(), 1);
    n.state_since = t0() - Duration::seconds(5);
    let w = World::new().node(n).slurm("hpc-a-6", slurm("allocated", &["CLOUD", "POWERING_UP"], ""));
    assert!(w.plan().new_groups.is_empty(), "a hook may be committing right now");
}

#[test]
fn drift_node_in_service_without_vm_leaves_service() {
    let mut n = node("hpc-a-7", NodeState::PoweredDown);
    n.state_since = t0() - Duration::hours(1);
    let w = World::new().node(n).slurm("hpc-a-7", slurm("idle", &["CLOUD"], ""));
    assert!(has_update(&w.plan(), "hpc-a-7", "power_down_force"));
}

#[test]
fn orphans_are_deleted_only_after_grace_and_only_in_owned_migs() {
    let mut old = vm("hpc-a-9", "hpc-a-t1");
    old.created = Some(t0() - Duration::seconds(301));
    let mut young = vm("hpc-a-8", "hpc-a-t1");
    young.created = Some(t0() - Duration::seconds(60));
    let mut foreign = vm("hpc-a-7", "someone-elses-mig");
    foreign.created = Some(t0() - Duration::days(1));
    let w = World::new().mig(mig("hpc-a-t1", MigState::Active), Some(2)).vm(old).vm(young).vm(foreign);
    let p = w.plan();
    assert_eq!(
        p.gce,
        vec![GceStep::DeleteInstances { mig: "hpc-a-t1".into(), instances: vec![vm_ref("hpc-a-9")] }]
    );
}

#[test]
fn empty_migs_are_collected_after_grace() {
    let w = World::new().mig(mig("hpc-a-t1", MigState::Active), Some(0));
    let p = w.plan();
    assert_eq!(p.migs[0].empty_since, Some(t0()));
    assert!(p.gce.is_empty());
    let mut m = mig("hpc-a-t1", MigState::Active);
    m.empty_since = Some(t0() - Duration::seconds(300));
    let p = World::new().mig(m.clone(), Some(0)).plan();
    assert!(matches!(p.gce.as_slice(), [GceStep::DeleteMig { .. }]));
    assert!(
        p.events.iter().any(|e| e.kind == EventKind::MigCollected
            && e.message.starts_with("MIG hpc-a-t1 is empty with no active request since")),
        "every deletion has an event: {:?}",
        p.events
    );
    // a MIG with an active request is never empty
    let mut n = node("hpc-a-1", NodeState::Requested);
    n.request_id = Some(1);
    let mut r = request(1, &["hpc-a-1"], RequestPhase::Active);
    r.mig = "hpc-a-t1".into();
    let p = World::new().node(n).req(r).mig(m, Some(0)).plan();
    assert!(!p.gce.iter().any(|s| matches!(s, GceStep::DeleteMig { .. })));
    // a MIG that disappeared is recorded as deleted
    let p = World::new().mig(mig("hpc-a-t2", MigState::Deleting), None).plan();
    assert_eq!(p.migs[0].state, MigState::Deleted);
}

/// A MIG list reused from an earlier pass (nothing could have changed it) deletes nothing as stale:
/// the empty MIG waits for a pass that reads the list again. Everything else is planned as usual.
#[test]
fn a_reused_mig_list_collects_nothing() {
    let mut m = mig("hpc-a-t1", MigState::Active);
    m.empty_since = Some(t0() - Duration::seconds(300));
    let mut w = World::new().mig(m, Some(0)).node(node("hpc-a-3", NodeState::ResumePending));
    w.o.migs_reused = true;
    let p = w.plan();
    assert!(!p.gce.iter().any(|s| matches!(s, GceStep::DeleteMig { .. })), "{:?}", p.gce);
    assert!(!p.events.iter().any(|e| e.kind == EventKind::MigCollected), "{:?}", p.events);
    assert_eq!(p.new_groups.len(), 1, "a waiting node is still requested: {:?}", p.new_groups);
    w.o.migs_reused = false;
    assert!(w.plan().gce.iter().any(|s| matches!(s, GceStep::DeleteMig { .. })), "read again: collected");
}

/// An inbox-first pass plans on the last pass's lists: a waiting node they show no VM for is
/// requested at once; one they show a VM under (which may be gone by now) waits for the full pass;
/// an orphan VM or an empty MIG is never deleted on them.
#[test]
fn an_inbox_first_pass_requests_only_names_its_reused_list_shows_free() {
    let mut m = mig("hpc-a-t1", MigState::Active);
    m.empty_since = Some(t0() - Duration::seconds(300));
    let mut orphan = vm("hpc-a-9", "hpc-a-t1");
    orphan.created = Some(t0() - Duration::seconds(3600));
    let mut w = World::new()
        .node(node("hpc-a-1", NodeState::ResumePending))
        .node(node("hpc-a-2", NodeState::ResumePending))
        .mig(m, Some(0))
        .vm(vm("hpc-a-2", "hpc-a-t1"))
        .vm(orphan);
    w.o.reused = true;
    w.o.slurm = None;
    w.o.reservations = None;
    let p = w.plan();
    assert_eq!(p.new_groups.len(), 1, "{:?}", p.new_groups);
    assert_eq!(p.new_groups[0].nodes, vec!["hpc-a-1".to_string()]);
    assert!(node_after(&p, "hpc-a-2").is_none_or(|n| n.state == NodeState::ResumePending), "waits");
    assert!(p.gce.is_empty(), "nothing deleted on a reused list: {:?}", p.gce);
    // The full pass after it, on fresh lists: the VM under hpc-a-2's name is reused.
    w.o.reused = false;
    let p = w.plan();
    assert_eq!(node_after(&p, "hpc-a-2").map(|n| n.state), Some(NodeState::Up));
}

#[test]
fn failed_lists_decide_nothing_from_absence() {
    let mut n = node("hpc-a-1", NodeState::Up);
    n.vm_status = Some("RUNNING".into());
    let mut w = World::new().node(n).mig(mig("hpc-a-t1", MigState::Active), None);
    w.o.vms = None;
    w.o.migs = None;
    w.o.slurm = None;
    let p = w.plan();
    assert!(p.nodes.is_empty() && p.gce.is_empty() && p.slurm.is_empty() && p.migs.is_empty(), "{p:?}");
}

#[test]
fn owned_migs_unknown_to_the_store_are_adopted() {
    let mut w = World::new();
    w.o.migs.as_mut().unwrap().insert(
        "hpc-a-j3-deadbeef".into(),
        ObservedMig {
            workload_policy: None,
            name: "hpc-a-j3-deadbeef".into(),
            nodeset: "a".into(),
            tag: "deadbeef".into(),
            job_id: Some(3),
            target_size: 2,
            created: None,
        },
    );
    let w = w.vm(vm("hpc-a-1", "hpc-a-j3-deadbeef")).slurm("hpc-a-1", slurm("allocated", &["CLOUD"], ""));
    let p = w.plan();
    assert!(p.migs.iter().any(|m| m.name == "hpc-a-j3-deadbeef" && m.state == MigState::Active));
    assert_eq!(
        node_after(&p, "hpc-a-1").unwrap().state,
        NodeState::Up,
        "Slurm uses it: adopted, not deleted"
    );
    assert!(p.gce.is_empty());
}

#[test]
fn planning_is_idempotent_once_applied() {
    // Apply a plan's node/request/mig changes and plan again with the same observation: no new steps.
    let mut n = node("hpc-a-1", NodeState::Up);
    n.mig = Some("hpc-a-t1".into());
    let w = World::new()
        .node(n)
        .mig(mig("hpc-a-t1", MigState::Active), Some(1))
        .vm(vm("hpc-a-1", "hpc-a-t1"))
        .slurm("hpc-a-1", slurm("idle", &["CLOUD"], ""));
    let p1 = w.plan();
    let mut w2 = World { d: w.d.clone(), o: w.o.clone(), c: w.c.clone() };
    for n in &p1.nodes {
        w2.d.nodes.insert(n.name.clone(), n.clone());
    }
    for m in &p1.migs {
        w2.d.migs.insert(m.name.clone(), m.clone());
    }
    w2.o.reservations.as_mut().unwrap().insert(eol_reservation("hpc-a-1"));
    let p2 = w2.plan();
    assert!(p2.is_empty(), "second plan: {p2:?}");
}

#[test]
fn a_request_in_flight_in_an_unrecorded_mig_is_adopted_not_collected() {
    // The database was lost while a request was queued: its MIG is empty, and would be collected
    // after mig_gc_grace, cancelling the request. It is adopted and followed instead.
    let mut w = World::new();
    let om = ObservedMig {
        workload_policy: None,
        name: "hpc-a-j4-cafe0001".into(),
        nodeset: "a".into(),
        tag: "cafe0001".into(),
        job_id: Some(4),
        target_size: 0,
        created: None,
    };
    w.o.migs.as_mut().unwrap().insert(om.name.clone(), om);
    w.o.requests.insert(
        "hpc-a-j4-cafe0001".into(),
        ObservedRequest {
            instances: vec!["hpc-a-2".into(), "hpc-a-3".into(), "not-ours-1".into()],
            run_duration: Some(4200),
            ..ObservedRequest::in_state("ACCEPTED".into())
        }
        .into(),
    );
    let p = w.plan();
    assert_eq!(
        p.adopted_requests,
        vec![AdoptedRequest {
            nodeset: "a".into(),
            job_id: Some(4),
            tag: "cafe0001".into(),
            mig: "hpc-a-j4-cafe0001".into(),
            name: "rr-cafe0001".into(),
            nodes: vec!["hpc-a-2".into(), "hpc-a-3".into()],
            run_duration: 4200,
            gce_state: "ACCEPTED".into(),
        }]
    );
    let m = p.migs.iter().find(|m| m.name == "hpc-a-j4-cafe0001").unwrap();
    assert_eq!(m.empty_since, None, "busy with the adopted request: never collected");
    // A finished request is not adopted: its VMs (if any) are judged node by node.
    let mut w2 = World::new();
    w2.o.migs = w.o.migs.clone();
    w2.o.requests.insert(
        "hpc-a-j4-cafe0001".into(),
        ObservedRequest {
            instances: vec!["hpc-a-2".into()],
            ..ObservedRequest::in_state("SUCCEEDED".into())
        }
        .into(),
    );
    assert!(w2.plan().adopted_requests.is_empty());
}

/// A regional `deleteInstances` takes `zones/{zone}/instances/{name}` only: each deleted VM is named
/// by the zone the pass listed it in, whatever zone that is.
#[test]
fn deleted_vms_are_named_by_the_zone_they_were_listed_in() {
    let mut a = vm("hpc-a-8", "hpc-a-t1");
    let mut b = vm("hpc-a-9", "hpc-a-t1");
    b.zone = "us-central1-b".into();
    for v in [&mut a, &mut b] {
        v.created = Some(t0() - Duration::days(1));
    }
    let p = World::new().mig(mig("hpc-a-t1", MigState::Active), Some(2)).vm(a).vm(b).plan();
    let [GceStep::DeleteInstances { mig, instances }] = p.gce.as_slice() else { panic!("{:?}", p.gce) };
    assert_eq!(mig, "hpc-a-t1");
    let urls: Vec<String> = instances.iter().map(VmRef::url).collect();
    assert_eq!(urls, ["zones/us-central1-a/instances/hpc-a-8", "zones/us-central1-b/instances/hpc-a-9"]);
}

/// A node whose VM is up (RUNNING, recorded), in MIG `mig`; hpc-b-0 is static (as with
/// [`World::with_static`]).
fn up_node(name: &str, mig: &str) -> Node {
    let mut n = node(name, NodeState::Up);
    n.is_static = name == "hpc-b-0";
    n.vm_status = Some(VmStatus::Running);
    n.mig = Some(mig.into());
    n.job_id = Some(7);
    n
}

/// The physical host of an up node's VM is recorded as GCE lists it, only when it changes, and goes
/// with the VM.
#[test]
fn an_up_node_records_where_its_vm_runs() {
    let placed = |t: Option<&str>| ObservedVm { topology: t.map(str::to_string), ..vm("hpc-a-1", "m1") };
    // Steady otherwise: its termination time and end-of-life reservation are recorded already.
    let recorded = |t: Option<&str>| Node {
        topology: t.map(str::to_string),
        termination_time: vm("hpc-a-1", "m1").termination,
        reservation: Some(eol_reservation("hpc-a-1")),
        ..up_node("hpc-a-1", "m1")
    };
    let on = |w: World| {
        w.mig(mig("m1", MigState::Active), Some(1)).slurm("hpc-a-1", slurm("allocated", &["CLOUD"], ""))
    };
    // (recorded before, GCE now, recorded after: None = the node is not written)
    type Case<'a> = (Option<&'a str>, Option<&'a str>, Option<Option<&'a str>>);
    let cases: [Case; 5] = [
        (None, Some("c1/b1/s1/h1"), Some(Some("c1/b1/s1/h1"))), // GCE placed it
        (Some("c1/b1/s1/h1"), Some("c1/b1/s1/h1"), None),       // steady: nothing written
        (Some("c1/b1/s1/h1"), Some("c1/b2/s3/h4"), Some(Some("c1/b2/s3/h4"))),
        (Some("c1/b1/s1/h1"), None, Some(None)), // GCE no longer says
        (None, None, None),                      // no policy: nothing to record
    ];
    for (before, now, after) in cases {
        let p = on(World::new().node(recorded(before)).vm(placed(now))).plan();
        let written = node_after(&p, "hpc-a-1").map(|n| n.topology.as_deref());
        assert_eq!(written, after, "recorded {before:?}, GCE {now:?}");
        assert!(p.gce.is_empty() && p.events.is_empty(), "{:?} {:?}", p.gce, p.events);
    }
    // The VM is gone: the node is powered down and no longer says where it ran.
    let p = on(World::new().node(recorded(Some("c1/b1/s1/h1")))).plan();
    let n = node_after(&p, "hpc-a-1").unwrap();
    assert_eq!((n.state, n.topology.as_deref()), (NodeState::PoweredDown, None));
}

/// A partial VM list (zone us-central1-a unreachable) is a failed list for every node whose VM could
/// be there: nothing is judged gone, expired or orphaned, nothing is requested; nodesets in zones that
/// answered go on as usual.
#[test]
fn a_partial_vm_list_judges_nothing_gone_in_the_zones_it_left_out() {
    let mut pending = node("hpc-a-5", NodeState::ResumePending);
    pending.job_id = Some(8);
    let mut expired = up_node("hpc-a-6", "m1");
    expired.termination_time = Some(t0() - Duration::minutes(5));
    let mut suspending = node("hpc-a-7", NodeState::Suspending);
    suspending.mig = Some("m1".into());
    let mut w = World::new()
        .with_static()
        .node(up_node("hpc-a-1", "m1"))
        .node(expired)
        .node(pending)
        .node(suspending)
        .node(up_node("hpc-b-0", "m2")) // static
        .node(node("hpc-a-9", NodeState::PoweredDown))
        .node(up_node("hpc-gpu-1", "m3"))
        .mig(mig("m1", MigState::Active), Some(3))
        .slurm("hpc-a-1", slurm("allocated", &["CLOUD"], ""))
        .slurm("hpc-a-9", slurm("idle", &["CLOUD"], ""))
        .slurm("hpc-gpu-1", slurm("allocated", &["CLOUD"], ""));
    w.c.nodesets.get_mut("gpu").unwrap().zones = vec!["us-central1-b".into()];
    w.o.unreachable_zones.insert("us-central1-a".into());
    let p = w.plan();
    for n in ["hpc-a-1", "hpc-a-5", "hpc-a-6", "hpc-a-7", "hpc-b-0", "hpc-a-9"] {
        assert!(node_after(&p, n).is_none(), "{n} keeps its state: {:?}", node_after(&p, n));
        assert!(!p.events.iter().any(|e| e.nodes.iter().any(|x| x == n)), "{n}: {:?}", p.events);
        for st in ["down", "power_down_force", "power_up"] {
            assert!(!has_update(&p, n, st), "{n} {st}: {:?}", p.slurm);
        }
    }
    assert!(p.new_groups.is_empty(), "no VM is requested while its name may exist: {:?}", p.new_groups);
    assert!(p.gce.is_empty(), "{:?}", p.gce);
    // gpu's zone answered: its node whose VM is missing is judged as always.
    assert_eq!(node_after(&p, "hpc-gpu-1").unwrap().state, NodeState::PoweredDown);
    assert!(has_update(&p, "hpc-gpu-1", "down"));
    assert!(p.events.iter().any(|e| e.kind == EventKind::VmLost && e.nodes == ["hpc-gpu-1"]));

    // A zone no nodeset names (a reload removed it) may hold any node's VM: nothing is judged.
    let mut w = World::new().node(up_node("hpc-gpu-1", "m3"));
    w.o.unreachable_zones.insert("us-central1-z".into());
    let p = w.plan();
    assert!(node_after(&p, "hpc-gpu-1").is_none() && p.events.is_empty(), "{:?}", p.events);

    // The zone answers again and the VM is not there: now it is gone.
    let w = World::new().node(up_node("hpc-a-1", "m1")).slurm("hpc-a-1", slurm("allocated", &["CLOUD"], ""));
    let p = w.plan();
    assert_eq!(node_after(&p, "hpc-a-1").unwrap().state, NodeState::PoweredDown);
    assert!(p.events.iter().any(|e| e.kind == EventKind::VmLost));
}

/// A failed MIG list decides nothing about MIGs: none is marked gone or collected.
#[test]
fn a_failed_mig_list_collects_nothing() {
    let mut m = mig("hpc-a-j1-t0000001", MigState::Active);
    m.empty_since = Some(t0() - Duration::hours(1));
    let mut w = World::new().mig(m, None);
    w.o.migs = None;
    let p = w.plan();
    assert!(p.gce.is_empty() && p.migs.is_empty() && p.events.is_empty(), "{:?} {:?}", p.gce, p.migs);
}

fn vm_in(name: &str, mig: &str, status: &str) -> ObservedVm {
    ObservedVm { status: status.into(), ..vm(name, mig) }
}

/// A VM that will not run again (a host failure leaves a Flex VM TERMINATED: its MIG does nothing on
/// failure) is handled in one pass: the node leaves service with the reason, the VM is deleted through
/// its MIG by URL, a dynamic node's job is requeued, a static node is re-provisioned — its new request
/// waits until the old VM no longer holds the name.
#[test]
fn a_vm_that_will_not_run_again_fails_its_node_in_one_pass() {
    for status in ["TERMINATED", "STOPPED", "SUSPENDED", "SUSPENDING"] {
        // dynamic, a job running on it
        let w = World::new()
            .node(up_node("hpc-a-1", "m1"))
            .mig(mig("m1", MigState::Active), Some(1))
            .vm(vm_in("hpc-a-1", "m1", status))
            .slurm("hpc-a-1", slurm("allocated", &["CLOUD"], ""));
        let p = w.plan();
        let after = node_after(&p, "hpc-a-1").unwrap();
        assert_eq!(after.state, NodeState::Suspending, "{status}");
        assert!(after.last_error.as_deref().unwrap().contains(status), "{status}: {after:?}");
        assert!(has_update(&p, "hpc-a-1", "down") && has_update(&p, "hpc-a-1", "power_down_force"));
        assert!(p
            .gce
            .contains(&GceStep::DeleteInstances { mig: "m1".into(), instances: vec![vm_ref("hpc-a-1")] }));
        assert!(p.slurm.contains(&SlurmStep::SetJobsBegin { jobs: vec![7], begin: t0() }), "{:?}", p.slurm);
        let ev: Vec<_> = p.events.iter().filter(|e| e.kind == EventKind::VmFailed).collect();
        assert_eq!(ev.len(), 1, "{status}: {:?}", p.events);
        assert!(ev[0].message.contains("node leaves service"));
    }
    // static: re-provisioned, DOWN in Slurm meanwhile; no new VM while the old one holds the name
    let w = World::new()
        .with_static()
        .node(up_node("hpc-b-0", "m2"))
        .mig(mig("m2", MigState::Active), Some(1))
        .vm(vm_in("hpc-b-0", "m2", "TERMINATED"))
        .slurm("hpc-b-0", slurm("idle", &["CLOUD"], ""));
    let p = w.plan();
    let after = node_after(&p, "hpc-b-0").unwrap();
    assert_eq!((after.state, after.request_id), (NodeState::ResumePending, None));
    assert!(has_update(&p, "hpc-b-0", "down") && !has_update(&p, "hpc-b-0", "power_down_force"));
    assert!(p
        .gce
        .contains(&GceStep::DeleteInstances { mig: "m2".into(), instances: vec![vm_ref("hpc-b-0")] }));
    assert!(p.new_groups.is_empty(), "the old VM holds the name: {:?}", p.new_groups);
    assert!(p.events.iter().any(|e| e.kind == EventKind::VmFailed && e.message.contains("re-provisioning")));
    // the next pass, the VM still TERMINATED (the delete did not take): deleted again, no request
    let mut n = after.clone();
    n.state_since = t0();
    let w = World::new().with_static().node(n.clone()).mig(mig("m2", MigState::Active), Some(1)).vm(vm_in(
        "hpc-b-0",
        "m2",
        "TERMINATED",
    ));
    let p = w.plan();
    assert!(p
        .gce
        .contains(&GceStep::DeleteInstances { mig: "m2".into(), instances: vec![vm_ref("hpc-b-0")] }));
    assert!(p.new_groups.is_empty() && p.events.is_empty(), "{:?}", p.events);
    // ... STOPPING: wait; deleted this pass: wait; gone: requested
    let w = World::new().with_static().node(n.clone()).vm(vm_in("hpc-b-0", "m2", "STOPPING"));
    assert!(w.plan().new_groups.is_empty() && w.plan().gce.is_empty());
    let mut w = World::new().with_static().node(n.clone());
    w.o.deleting.insert("hpc-b-0".into());
    assert!(w.plan().new_groups.is_empty());
    let w = World::new().with_static().node(n);
    assert_eq!(w.plan().new_groups.len(), 1);
}

/// PENDING, PROVISIONING and STAGING are "coming up": the node is neither lost nor put back into
/// Slurm's service; REPAIRING may run again and is left alone too.
#[test]
fn a_vm_coming_up_is_neither_lost_nor_ready() {
    for status in ["PENDING", "PROVISIONING", "STAGING", "REPAIRING"] {
        let mut n = up_node("hpc-b-0", "m2");
        n.vm_status = Some(status.into());
        let w = World::new()
            .with_static()
            .node(n)
            .mig(mig("m2", MigState::Active), Some(1))
            .vm(vm_in("hpc-b-0", "m2", status))
            .slurm("hpc-b-0", slurm("down", &["CLOUD"], "slurm-dws: its VM is TERMINATED; re-provisioning"));
        let p = w.plan();
        assert!(
            node_after(&p, "hpc-b-0").is_none_or(|n| n.state == NodeState::Up),
            "{status}: {:?}",
            p.nodes
        );
        assert!(
            p.slurm.iter().all(|s| !matches!(s, SlurmStep::UpdateState { .. })),
            "{status}: {:?}",
            p.slurm
        );
        assert!(p.events.is_empty() && p.gce.is_empty(), "{status}: {:?} {:?}", p.events, p.gce);
        // Slurm has it powered down: not powered up before the VM runs
        let mut n = up_node("hpc-b-0", "m2");
        n.vm_status = Some(status.into());
        let w = World::new()
            .with_static()
            .node(n)
            .vm(vm_in("hpc-b-0", "m2", status))
            .slurm("hpc-b-0", slurm("idle", &["CLOUD", "POWERED_DOWN"], ""));
        assert!(!has_update(&w.plan(), "hpc-b-0", "power_up"), "{status}");
    }
    // ...and once RUNNING the static node returns to service
    let w = World::new()
        .with_static()
        .node(up_node("hpc-b-0", "m2"))
        .vm(vm("hpc-b-0", "m2"))
        .slurm("hpc-b-0", slurm("down", &["CLOUD"], "slurm-dws: its VM is TERMINATED; re-provisioning"));
    assert!(has_update(&w.plan(), "hpc-b-0", "resume"));
}

/// A static node slurm-dws returned to service when its new VM's slurmd registered, that Slurm then
/// set DOWN "Node unexpectedly rebooted" (22.05 cleared slurm-dws's reason on the resume, and slurmd
/// registered again with a boot time a second later): the first boot of a VM made moments ago is
/// no reboot, and the node is resumed again. A VM made long ago, a node not responding, or a
/// dynamic node: left to the admin (or to the repair's own rule).
#[test]
fn a_new_vms_first_boot_taken_for_a_reboot_is_no_reason_to_keep_a_static_node_down() {
    use crate::reconcile::plan::nodes::FIRST_BOOT_SECS;
    let made = |ago: i64| ObservedVm { created: Some(t0() - Duration::seconds(ago)), ..vm("hpc-b-0", "m2") };
    for (name, ago, flags, resumed) in [
        ("hpc-b-0", 5, &["CLOUD"][..], true),
        ("hpc-b-0", FIRST_BOOT_SECS - 1, &["CLOUD"], true),
        ("hpc-b-0", FIRST_BOOT_SECS + 1, &["CLOUD"], false),
        ("hpc-b-0", 5, &["CLOUD", "NOT_RESPONDING"], false),
        ("hpc-a-1", 5, &["CLOUD"], false),
    ] {
        let case = format!("{name}, VM made {ago}s ago, {flags:?}");
        let p = World::new()
            .with_static()
            .node(up_node(name, "m2"))
            .mig(mig("m2", MigState::Active), Some(1))
            .vm(ObservedVm { name: name.into(), ..made(ago) })
            .slurm(name, slurm("down", flags, UNEXPECTED_REBOOT))
            .plan();
        assert_eq!(has_update(&p, name, "resume"), resumed, "{case}: {:?}", p.slurm);
        let returned: Vec<_> = p.events.iter().filter(|e| e.kind == EventKind::Returned).collect();
        assert_eq!(returned.len(), usize::from(resumed), "{case}: {:?}", p.events);
        assert!(returned.iter().all(|e| e.message.contains("first boot")), "{case}: {returned:?}");
    }
}

/// A nodeset whose template cannot work for DWS Flex Start gets no request: a dynamic node's resume
/// is answered at once (powered down with the reason, job requeued), a static node is set DOWN; the
/// other nodesets go on.
#[test]
fn a_refused_nodeset_answers_its_resumes_and_the_others_go_on() {
    let mut dynamic = node("hpc-a-1", NodeState::ResumePending);
    dynamic.job_id = Some(4);
    let mut w = World::new()
        .with_static()
        .node(dynamic)
        .node(node("hpc-gpu-1", NodeState::ResumePending))
        .slurm("hpc-a-1", slurm("allocated", &["CLOUD", "POWERING_UP"], ""))
        .slurm("hpc-b-0", slurm("idle", &["CLOUD", "POWERED_DOWN"], ""));
    let why = "instance template t: properties.scheduling.provisioningModel is STANDARD, DWS Flex Start needs FLEX_START";
    w.o.refused_nodesets.insert("a".into(), why.into());
    w.o.refused_nodesets.insert("b".into(), why.into());
    let p = w.plan();
    let groups: Vec<&str> = p.new_groups.iter().map(|g| g.nodeset.as_str()).collect();
    assert_eq!(groups, ["gpu"], "only the fitting nodeset asks GCE");
    let a1 = node_after(&p, "hpc-a-1").unwrap();
    assert_eq!(a1.state, NodeState::PoweredDown);
    assert!(
        a1.last_error.as_deref().unwrap().contains("nodeset a refused")
            && a1.last_error.as_deref().unwrap().contains("FLEX_START")
    );
    assert!(has_update(&p, "hpc-a-1", "power_down_force"), "the job is requeued: {:?}", p.slurm);
    assert!(
        !p.slurm.iter().any(|s| matches!(s, SlurmStep::SetJobsBegin { .. })),
        "Slurm's requeue hold stays"
    );
    let b0 = node_after(&p, "hpc-b-0").unwrap();
    assert_eq!(b0.state, NodeState::ResumePending);
    assert!(has_update(&p, "hpc-b-0", "down") && !has_update(&p, "hpc-b-0", "power_up"), "{:?}", p.slurm);
    let refused: Vec<&str> = p
        .events
        .iter()
        .filter(|e| e.kind == EventKind::NodesetRefused)
        .flat_map(|e| e.nodes.iter().map(String::as_str))
        .collect();
    assert_eq!(refused, ["hpc-a-1", "hpc-b-0"]);
}

/// A node no hook ever named (fresh cluster, Slurm shows it powered down) gets a record: tracked as
/// powered down, with nothing to do.
#[test]
fn nodes_nobody_touched_are_tracked_as_powered_down() {
    let w = World::new()
        .slurm("hpc-a-3", slurm("idle", &["CLOUD", "POWERED_DOWN"], ""))
        .slurm("other-x-1", slurm("idle", &[], ""));
    let p = w.plan();
    let n = node_after(&p, "hpc-a-3").expect("a record for the untouched node");
    assert_eq!((n.state, n.nodeset.as_str(), n.index, n.is_static), (NodeState::PoweredDown, "a", 3, false));
    assert!(node_after(&p, "other-x-1").is_none(), "not ours");
    assert!(p.gce.is_empty() && p.slurm.is_empty() && p.new_groups.is_empty(), "{p:?}");
}

/// The observation after the database was lost while a 2-node job runs: nothing on record, an
/// owned MIG made for job 3, its two VMs, Slurm running the job there, their end-of-life
/// reservations.
fn database_lost_world() -> World {
    let mut w = World::new();
    w.o.migs.as_mut().unwrap().insert(
        "hpc-a-j3-deadbeef".into(),
        ObservedMig {
            workload_policy: None,
            name: "hpc-a-j3-deadbeef".into(),
            nodeset: "a".into(),
            tag: "deadbeef".into(),
            job_id: Some(3),
            target_size: 2,
            created: None,
        },
    );
    for name in ["hpc-a-1", "hpc-a-2"] {
        w = w.vm(vm(name, "hpc-a-j3-deadbeef")).slurm(name, slurm("allocated", &["CLOUD"], ""));
        w.o.reservations.as_mut().unwrap().insert(eol_reservation(name));
    }
    w
}

#[test]
fn after_the_database_is_lost_nodes_running_a_job_are_adopted_with_vm_job_and_reservation() {
    let p = database_lost_world().plan();
    for name in ["hpc-a-1", "hpc-a-2"] {
        let n = node_after(&p, name).unwrap();
        assert_eq!(n.state, NodeState::Up, "{name}");
        assert_eq!(n.mig.as_deref(), Some("hpc-a-j3-deadbeef"), "{name}");
        assert_eq!(n.job_id, Some(3), "{name}: the job the MIG was made for");
        assert_eq!(n.vm_status, Some("RUNNING".into()), "{name}");
        assert_eq!(n.reservation, Some(eol_reservation(name)), "{name}: Slurm's reservation is the node's");
        assert!(p.events.iter().any(|e| e.kind == EventKind::Adopted
            && e.nodes == [name]
            && e.message.contains("(made for job 3)")));
    }
    assert!(p.gce.is_empty(), "nothing deleted: {:?}", p.gce);
    assert!(p.slurm.is_empty(), "no reservation deleted, none made twice: {:?}", p.slurm);
    assert!(!p.events.iter().any(|e| e.kind == EventKind::ReservationDeleted));
    // The next pass, with the adoption on record, has nothing to do.
    let mut w2 = database_lost_world();
    for n in &p.nodes {
        w2.d.nodes.insert(n.name.clone(), n.clone());
    }
    for m in &p.migs {
        w2.d.migs.insert(m.name.clone(), m.clone());
    }
    assert!(w2.plan().is_empty(), "{:?}", w2.plan());
}

/// With Slurm's nodes, the VMs or the MIGs unread, nothing is deleted because nothing on record
/// explains it: not the reservations, not a powered-down node's VM, not an orphan VM, not an empty
/// MIG — the record may simply be gone (database lost).
#[test]
fn nothing_is_deleted_as_stale_unless_slurm_and_gce_were_read_in_the_same_pass() {
    let world = || {
        let mut old_empty = mig("hpc-a-t9", MigState::Active);
        old_empty.empty_since = Some(t0() - Duration::hours(1));
        let mut orphan = vm("hpc-a-9", "hpc-a-j3-deadbeef");
        orphan.created = Some(t0() - Duration::hours(1));
        let mut suspended = node("hpc-a-5", NodeState::PoweredDown);
        suspended.request_id = Some(1);
        let mut w = database_lost_world().mig(old_empty, Some(0)).vm(orphan).node(suspended);
        w = w.vm(vm("hpc-a-5", "hpc-a-j3-deadbeef"));
        w.o.reservations.as_mut().unwrap().insert(eol_reservation("hpc-a-7"));
        w
    };
    let deletes = |p: &Plan| -> Vec<String> {
        let gce = p.gce.iter().filter_map(|s| match s {
            GceStep::DeleteInstances { instances, .. } => {
                Some(instances.iter().map(|i| i.name.as_str()).collect::<Vec<_>>().join(","))
            }
            GceStep::DeleteMig { mig, .. } => Some(mig.clone()),
            _ => None,
        });
        let slurm = p.slurm.iter().filter_map(|s| match s {
            SlurmStep::DeleteReservation { name } => Some(name.clone()),
            _ => None,
        });
        let mut all: Vec<String> = gce.chain(slurm).collect();
        all.sort();
        all
    };
    type Forget = fn(&mut Observed);
    let unread: [(&str, Forget); 3] = [
        ("Slurm's nodes", |o| o.slurm = None),
        ("the VMs", |o| o.vms = None),
        ("the MIGs", |o| o.migs = None),
    ];
    for (what, forget) in unread {
        let mut w = world();
        forget(&mut w.o);
        let p = w.plan();
        assert_eq!(deletes(&p), Vec::<String>::new(), "{what} unread: {p:?}");
    }
    // Everything read: the suspended node's VM, the orphan, the empty MIG and the reservation of a
    // node with no VM go, each with an event; the adopted nodes' reservations stay.
    let p = world().plan();
    assert_eq!(deletes(&p), vec!["hpc-a-5,hpc-a-9", "hpc-a-t9", "slurm-dws-eol-hpc-a-7"], "{:?}", p.events);
    let said = |kind: EventKind, node: &str| p.events.iter().any(|e| e.kind == kind && e.nodes == [node]);
    assert!(said(EventKind::Drift, "hpc-a-5"), "{:?}", p.events);
    assert!(said(EventKind::Orphan, "hpc-a-9"), "{:?}", p.events);
    assert!(said(EventKind::ReservationDeleted, "hpc-a-7"), "{:?}", p.events);
    assert!(p.events.iter().any(|e| e.kind == EventKind::MigCollected && e.message.contains("hpc-a-t9")));
}

/// An end-of-life reservation whose node has a VM GCE lists is not stale, even with no record.
#[test]
fn a_reservation_of_a_node_with_a_vm_is_not_stale() {
    let mut w = World::new().mig(mig("hpc-a-t1", MigState::Active), Some(1)).vm(vm("hpc-a-4", "hpc-a-t1"));
    w.o.reservations.as_mut().unwrap().insert(eol_reservation("hpc-a-4"));
    let p = w.plan();
    assert!(!p.slurm.iter().any(|s| matches!(s, SlurmStep::DeleteReservation { .. })), "{p:?}");
}

/// Slurm's ResumeTimeout fired while the request waited for capacity (the resume-fail hook made the
/// node suspending and the request was cancelled): once GCE says CANCELLED the node is released
/// keeping Slurm's cause, the MIG goes, and Slurm's `down~` node is resumed to `idle~`, usable.
#[test]
fn a_node_past_resume_timeout_ends_powered_down_and_usable() {
    let mut n = node("hpc-a-1", NodeState::Suspending);
    n.request_id = Some(1);
    n.job_id = Some(7);
    n.last_error = Some("Slurm's ResumeTimeout expired before the node registered".into());
    let mut r = request(1, &["hpc-a-1"], RequestPhase::Active);
    r.last_error = Some("cancelled: every node of the request was suspended".into());
    let w = World::new()
        .node(n)
        .req(r.clone())
        .mig(mig(&r.mig, MigState::Active), Some(1))
        .rr(&r.mig, "CANCELLED", None, false)
        .slurm(
            "hpc-a-1",
            slurm("down", &["CLOUD", "NOT_RESPONDING", "POWERED_DOWN"], "ResumeTimeout reached"),
        );
    let p = w.plan();
    let after = node_after(&p, "hpc-a-1").unwrap();
    assert_eq!(after.state, NodeState::PoweredDown);
    assert_eq!(
        after.last_error.as_deref(),
        Some("Slurm's ResumeTimeout expired before the node registered"),
        "the cause stays Slurm's"
    );
    assert!(matches!(p.gce.as_slice(), [GceStep::DeleteMig { .. }]), "{:?}", p.gce);
    assert!(has_update(&p, "hpc-a-1", "resume"), "down~ → idle~: {:?}", p.slurm);
    assert!(!has_update(&p, "hpc-a-1", "power_down_force"), "Slurm requeued the job already");
    assert!(p.events.iter().any(|e| e.kind == EventKind::Returned && e.nodes == ["hpc-a-1"]));
    assert!(p.events.iter().any(|e| e.kind == EventKind::RequestFailed));
}

#[path = "tests_capacity.rs"]
mod capacity;
#[path = "repair_tests.rs"]
mod repair_tests;
#[path = "reserved_tests.rs"]
mod reserved_capacity;

#[path = "maintenance_tests.rs"]
mod maintenance;
#[path = "standard_tests.rs"]
mod standard;
#[path = "usage_tests.rs"]
mod usage_rule;

/// A MIG whose members have no VM (GCE deleted a preempted spot VM and the MIG, doing nothing on
/// failure, kept the member and its targetSize) is empty whatever its size says: collected after
/// the grace when the VM list is complete and nothing holds it; the group behind it then ends.
#[test]
fn a_mig_whose_members_have_no_vm_is_collected_whatever_its_size() {
    let since = t0() - Duration::seconds(300);
    let aged = |size: u32| {
        let mut m = mig("hpc-a-t1", MigState::Active);
        m.target_size = size;
        m.empty_since = Some(since);
        m
    };
    let deletes =
        |p: &Plan| p.gce.iter().any(|s| matches!(s, GceStep::DeleteMig { mig, .. } if mig == "hpc-a-t1"));
    // First seen with no VM: empty from now.
    let p = World::new().mig(mig("hpc-a-t1", MigState::Active), Some(1)).plan();
    assert_eq!(p.migs[0].empty_since, Some(t0()));
    assert!(p.gce.is_empty(), "{:?}", p.gce);
    // Past the grace: deleted, with an event that says why.
    for size in [1, 3] {
        let p = World::new().mig(aged(size), Some(size)).plan();
        assert!(deletes(&p), "size {size}: {:?}", p.gce);
        assert!(
            p.events.iter().any(|e| e.kind == EventKind::MigCollected
                && e.message.contains(&format!("holding no VM (targetSize {size}"))),
            "{:?}",
            p.events
        );
    }
    // Cases that keep it: (why, world, empty_since after).
    // Just SUCCEEDED: its VM may not be in the list yet (LIST_LAG_SECS), and the node holds it.
    let mut up = node("hpc-a-1", NodeState::Up);
    up.mig = Some("hpc-a-t1".into());
    up.state_since = t0();
    let mut requested = node("hpc-a-2", NodeState::Requested);
    requested.request_id = Some(1);
    let mut open = request(1, &["hpc-a-2"], RequestPhase::Active);
    open.mig = "hpc-a-t1".into();
    let mut partial = World::new().mig(aged(1), Some(1));
    partial.o.unreachable_zones.insert("us-central1-a".into());
    let mut unlisted = World::new().mig(aged(1), Some(1));
    unlisted.o.vms = None;
    let mut reused = World::new().mig(aged(1), Some(1));
    reused.o.reused = true;
    let cases: Vec<(&str, World, Option<DateTime<Utc>>)> = vec![
        ("a VM of it is listed", World::new().mig(aged(1), Some(1)).vm(vm("hpc-a-9", "hpc-a-t1")), None),
        ("an up node holds it", World::new().mig(aged(1), Some(1)).node(up), None),
        ("an open group holds it", World::new().mig(aged(1), Some(1)).node(requested).req(open), None),
        ("a zone was left out of the VM list", partial, Some(since)),
        ("the VM list failed", unlisted, Some(since)),
        ("the VM list is an earlier pass's", reused, Some(since)),
    ];
    for (why, w, empty_since) in cases {
        let p = w.plan();
        assert!(!deletes(&p), "{why}: {:?}", p.gce);
        let after = p.migs.iter().find(|m| m.name == "hpc-a-t1").map_or(since.into(), |m| m.empty_since);
        assert_eq!(after, empty_since, "{why}");
    }
    // The succeeded group behind it ends once the MIG is gone and none of its nodes is up.
    let mut pd = node("hpc-a-1", NodeState::PoweredDown);
    pd.request_id = Some(1);
    let mut done = request(1, &["hpc-a-1"], RequestPhase::Succeeded);
    done.mig = "hpc-a-t1".into();
    let mut gone = aged(1);
    gone.state = MigState::Deleting;
    let p = World::new().node(pd).req(done).mig(gone, None).plan();
    assert_eq!(p.requests[0].phase, RequestPhase::Done, "{:?}", p.requests);
}

/// Issue 28: a static node whose re-provisioning FAILED stays wanted and DOWN in Slurm (never
/// powered down: its next VM's slurmd must find Slurm expecting it), is asked for again only when
/// its nodeset's backoff ends, and is never powered up inside the backoff.
#[test]
fn a_static_node_whose_reprovisioning_fails_waits_for_the_backoff_and_stays_expected() {
    let mut n = node("hpc-b-0", NodeState::Requested);
    n.is_static = true;
    n.request_id = Some(1);
    let r = request(1, &["hpc-b-0"], RequestPhase::Active);
    let w = World::new()
        .with_static()
        .node(n)
        .req(r.clone())
        .mig(mig(&r.mig, MigState::Active), Some(0))
        .rr(&r.mig, "FAILED", Some(("ZONE_RESOURCE_POOL_EXHAUSTED", "no capacity")), true)
        .slurm("hpc-b-0", slurm("down", &["CLOUD"], "slurm-dws: run duration ended; re-provisioning"));
    let p = w.plan();
    let after = node_after(&p, "hpc-b-0").unwrap();
    assert_eq!(after.state, NodeState::ResumePending, "still wanted");
    assert!(after.last_error.as_deref().unwrap().contains("ZONE_RESOURCE_POOL_EXHAUSTED"));
    assert!(!has_update(&p, "hpc-b-0", "power_down_force"), "never powered down: {:?}", p.slurm);
    assert!(p.new_groups.is_empty(), "not asked again inside the backoff: {:?}", p.new_groups);
    assert_eq!(p.backoffs_set.len(), 1);
    // The same failure while Slurm had the node in service: DOWN with the cause.
    let mut n = node("hpc-b-0", NodeState::Requested);
    n.is_static = true;
    n.request_id = Some(1);
    let p = World::new()
        .with_static()
        .node(n)
        .req(r.clone())
        .mig(mig(&r.mig, MigState::Active), Some(0))
        .rr(&r.mig, "FAILED", Some(("ZONE_RESOURCE_POOL_EXHAUSTED", "no capacity")), true)
        .slurm("hpc-b-0", slurm("idle", &["CLOUD", "POWERING_UP"], ""))
        .plan();
    assert!(has_update(&p, "hpc-b-0", "down"), "{:?}", p.slurm);

    // Inside the backoff: a waiting static node is neither requested nor powered up, whatever
    // order Slurm acted in (powered down by an older release, or DOWN).
    let backoff = |until: DateTime<Utc>| Backoff {
        nodeset: "b".into(),
        until,
        level: 0,
        reason: "capacity backoff".into(),
        ended: false,
    };
    for (state, flags) in [("idle", &["CLOUD", "POWERED_DOWN"][..]), ("down", &["CLOUD"][..])] {
        for node_state in [NodeState::ResumePending, NodeState::PoweredDown] {
            let mut n = node("hpc-b-0", node_state);
            n.is_static = true;
            let mut w =
                World::new().with_static().node(n).slurm("hpc-b-0", slurm(state, flags, "slurm-dws: x"));
            w.d.backoffs.insert("b".into(), backoff(t0() + Duration::seconds(30)));
            let p = w.plan();
            assert!(p.new_groups.is_empty(), "{state} {node_state:?}: {:?}", p.new_groups);
            assert!(!has_update(&p, "hpc-b-0", "power_up"), "{state} {node_state:?}: {:?}", p.slurm);
            // Once it ends: requested (and Slurm told to expect it, if it had it powered down).
            w.d.backoffs.insert("b".into(), backoff(t0() - Duration::seconds(1)));
            let p = w.plan();
            assert_eq!(p.new_groups.len(), 1, "{state} {node_state:?}");
            if state == "idle" && node_state == NodeState::PoweredDown {
                assert!(has_update(&p, "hpc-b-0", "power_up"), "{:?}", p.slurm);
            }
        }
    }
}

/// Issue 28: a node slurm-dws holds up, its VM running, that Slurm shows powering up (`idle#`) or
/// not responding for longer than STUCK_SECS is drift: an event and a repair (a static node's VM
/// is replaced, a dynamic node leaves service); within that time it is left to boot.
#[test]
fn a_node_slurm_never_sees_register_is_drift_and_repaired() {
    use super::nodes::STUCK_SECS;
    type Case<'a> = (&'a str, &'a str, &'a [&'a str], i64, Option<&'a str>);
    let cases: &[Case] = &[
        // (node, slurm state, flags, seconds up, expected repair)
        ("hpc-b-0", "idle", &["CLOUD", "POWERING_UP"], STUCK_SECS + 10, Some("static")),
        ("hpc-b-0", "idle", &["CLOUD", "NOT_RESPONDING"], STUCK_SECS + 10, Some("static")),
        ("hpc-b-0", "down", &["CLOUD", "NOT_RESPONDING", "POWERING_UP"], STUCK_SECS + 10, Some("static")),
        ("hpc-b-0", "idle", &["CLOUD", "POWERING_UP"], STUCK_SECS - 10, None),
        ("hpc-b-0", "idle", &["CLOUD"], STUCK_SECS + 10, None),
        ("hpc-b-1", "idle", &["CLOUD", "POWERING_UP"], STUCK_SECS + 10, Some("dynamic")),
        ("hpc-b-1", "allocated", &["CLOUD", "NOT_RESPONDING"], STUCK_SECS + 10, Some("dynamic")),
        ("hpc-b-1", "idle", &["CLOUD", "POWERING_UP"], 30, None),
    ];
    for (name, state, flags, up_for, repair) in cases {
        let mut n = node(name, NodeState::Up);
        n.is_static = *name == "hpc-b-0";
        n.mig = Some("hpc-b-t1".into());
        n.vm_status = Some("RUNNING".into());
        n.state_since = t0() - Duration::seconds(*up_for);
        let mut v = vm(name, "hpc-b-t1");
        v.termination = None;
        let mut m = mig("hpc-b-t1", MigState::Active);
        m.nodeset = "b".into();
        let w = World::new().with_static().node(n).mig(m, Some(1)).vm(v).slurm(name, slurm(state, flags, ""));
        let p = w.plan();
        let drift =
            p.events.iter().any(|e| e.kind == EventKind::Drift && e.nodes.contains(&name.to_string()));
        let deleted = p.gce.iter().any(
            |s| matches!(s, GceStep::DeleteInstances { instances, .. } if instances.iter().any(|v| v.name == *name)),
        );
        let what = format!("{name} {state} {flags:?} up {up_for}s");
        match repair {
            None => {
                assert!(!drift && !deleted, "{what}: {:?} {:?}", p.events, p.gce);
            }
            Some("static") => {
                assert!(drift && deleted, "{what}: {:?} {:?}", p.events, p.gce);
                assert_eq!(node_after(&p, name).unwrap().state, NodeState::ResumePending, "{what}");
                if *state != "down" {
                    assert!(has_update(&p, name, "down"), "{what}: {:?}", p.slurm);
                }
            }
            Some(_) => {
                assert!(drift, "{what}: {:?}", p.events);
                assert!(has_update(&p, name, "power_down_force"), "{what}: {:?}", p.slurm);
                assert_eq!(node_after(&p, name).unwrap().state, NodeState::Suspending, "{what}");
            }
        }
    }
}

/// Owned workload policies: created before the first MIG of their nodeset (the insert waits for
/// it), nothing while the policies are unknown; deleted only when unused and not wanted, never
/// while a MIG (even one being deleted) uses it, nor on a reused MIG list.
#[test]
fn owned_policies_come_before_their_migs_and_go_only_when_unused() {
    let owned = |mut w: World| {
        w.c.nodesets.get_mut("a").unwrap().owned_policy = Some("hpc-a-wp".into());
        w
    };
    let policy = |nodeset: &str| ObservedPolicy {
        name: format!("hpc-{nodeset}-wp"),
        nodeset: nodeset.into(),
        region: "us-central1".into(),
    };
    let with_policies = |mut w: World, ps: &[ObservedPolicy]| {
        w.o.policies = Some(ps.iter().map(|p| (p.name.clone(), p.clone())).collect());
        w
    };
    let mut n = node("hpc-a-1", NodeState::Requested);
    n.request_id = Some(1);
    let base = || World::new().node(n.clone()).req(request(1, &["hpc-a-1"], RequestPhase::Planned));

    // (world, the GCE steps expected)
    let insert_policy = GceStep::InsertPolicy {
        policy: "hpc-a-wp".into(),
        nodeset: "a".into(),
        region: "us-central1".into(),
    };
    let w = with_policies(owned(base()), &[]);
    assert_eq!(w.plan().gce, vec![insert_policy.clone()], "the policy first");
    let w = with_policies(owned(base()), &[policy("a")]);
    assert!(matches!(w.plan().gce.as_slice(), [GceStep::InsertMig { request: 1, .. }]), "then the MIG");
    assert!(owned(base()).plan().gce.is_empty(), "policies unknown this pass: wait");
    let w = with_policies(base(), &[]);
    assert!(matches!(w.plan().gce.as_slice(), [GceStep::InsertMig { .. }]), "no placement: as before");

    // A policy of a nodeset gone from the config: deleted when no MIG uses it.
    let gone = || with_policies(World::new(), &[policy("old")]);
    assert!(matches!(gone().plan().gce.as_slice(), [GceStep::DeletePolicy { policy, reason, .. }]
        if policy == "hpc-old-wp" && reason.contains("gone from the config")));
    let mut in_use = gone();
    in_use.o.migs.as_mut().unwrap().insert(
        "hpc-old-t1".into(),
        ObservedMig {
            name: "hpc-old-t1".into(),
            nodeset: "old".into(),
            tag: "t1".into(),
            job_id: None,
            target_size: 0,
            created: None,
            workload_policy: Some("hpc-old-wp".into()),
        },
    );
    assert!(!in_use.plan().gce.iter().any(|s| matches!(s, GceStep::DeletePolicy { .. })), "in use");
    let mut reused = gone();
    reused.o.migs_reused = true;
    assert!(reused.plan().gce.is_empty(), "a reused MIG list proves nothing");
    let mut unknown = gone();
    unknown.o.migs = None;
    assert!(unknown.plan().gce.is_empty(), "MIGs unknown");
    // Wanted by its nodeset: kept, used or not.
    assert!(owned(with_policies(World::new(), &[policy("a")])).plan().gce.is_empty());
    // The nodeset is still there but no longer asks for an owned policy: deleted when unused.
    assert!(matches!(with_policies(World::new(), &[policy("a")]).plan().gce.as_slice(),
        [GceStep::DeletePolicy { reason, .. }] if reason.contains("no longer asks")));
}

/// Up nodes that lack their end-of-life reservation get one, at most
/// `MAX_RESERVATIONS_PER_ROUND` a round, the soonest to start first; the next round makes the rest
/// and nothing twice.
#[test]
fn end_of_life_reservations_are_made_at_most_a_thousand_a_round_soonest_first() {
    let total = MAX_RESERVATIONS_PER_ROUND + 7;
    // Node i's VM ends i minutes after the others' earliest, in reverse name order, so the soonest
    // are not the first names.
    let ends = |i: usize| t0() + Duration::hours(2) + Duration::minutes((total - i) as i64);
    let mut w = World::new().mig(mig("m1", MigState::Active), Some(total as u32));
    for i in 0..total {
        let name = format!("hpc-a-{i}");
        let n = Node { termination_time: Some(ends(i)), ..up_node(&name, "m1") };
        w = w
            .node(n)
            .vm(ObservedVm { termination: Some(ends(i)), ..vm(&name, "m1") })
            .slurm(&name, slurm("allocated", &["CLOUD"], ""));
    }
    let made = |p: &Plan| -> Vec<String> {
        p.slurm
            .iter()
            .filter_map(|s| match s {
                SlurmStep::CreateReservation { node, name, start, .. } => {
                    assert_eq!(name, &eol_reservation(node));
                    assert!(*start < ends(node.strip_prefix("hpc-a-").unwrap().parse().unwrap()));
                    Some(node.clone())
                }
                _ => None,
            })
            .collect()
    };
    let p = w.plan();
    let first = made(&p);
    assert_eq!(first.len(), MAX_RESERVATIONS_PER_ROUND);
    // The soonest to end are the last names: the seven first names wait.
    let waiting: Vec<String> = (0..7).map(|i| format!("hpc-a-{i}")).collect();
    assert!(waiting.iter().all(|n| !first.contains(n)), "{waiting:?}");
    for n in &waiting {
        assert_eq!(node_after(&p, n).and_then(|n| n.reservation.clone()), None, "{n} has none on record yet");
    }
    assert_eq!(
        node_after(&p, "hpc-a-7").and_then(|n| n.reservation.clone()),
        Some(eol_reservation("hpc-a-7"))
    );
    // The next round, with this one's records and Slurm's reservations: the seven, and only them.
    for n in &p.nodes {
        w.d.nodes.insert(n.name.clone(), n.clone());
    }
    for n in &first {
        w.o.reservations.as_mut().unwrap().insert(eol_reservation(n));
    }
    let mut second = made(&w.plan());
    second.sort();
    assert_eq!(second, waiting);
}

#[test]
fn drift_powering_up_without_record_after_a_takeover_is_requested_at_once() {
    // The old controller's host died with the hook's record: Slurm powers the node up, the state
    // (adopted from the shared copy) has it powered down since before this daemon took charge.
    let mut n = node("hpc-a-6", NodeState::PoweredDown);
    n.state_since = t0() - Duration::seconds(5);
    let mut w =
        World::new().node(n.clone()).slurm("hpc-a-6", slurm("allocated", &["CLOUD", "POWERING_UP"], ""));
    w.o.took_charge_at = Some(t0() - Duration::seconds(2));
    assert_eq!(w.plan().new_groups.len(), 1, "no drift grace: the hook record died with the old host");
    // A node whose state changed after the takeover keeps the grace (a hook here may be committing).
    n.state_since = t0() - Duration::seconds(1);
    let mut w = World::new().node(n).slurm("hpc-a-6", slurm("allocated", &["CLOUD", "POWERING_UP"], ""));
    w.o.took_charge_at = Some(t0() - Duration::seconds(2));
    assert!(w.plan().new_groups.is_empty());
}
