//! Table tests of the usage rule (`usage.rs`): which spans a full pass opens and closes, and the
//! busy and idle seconds it counts. Nodeset `a` (flex, no GPUs recorded: `unknown`), `gpu` with a
//! shape of 8 GPUs.

use super::*;
use std::num::NonZeroU64;

fn id(n: u64) -> NonZeroU64 {
    NonZeroU64::new(n).unwrap()
}

fn at(mins: i64) -> DateTime<Utc> {
    t0() + Duration::minutes(mins)
}

fn shapes() -> BTreeMap<String, NodesetShape> {
    [("gpu".to_string(), NodesetShape { machine_type: "a3-highgpu-8g".into(), gpus: 8 })].into()
}

/// A VM of node `name` with instance id `n`, made `created` minutes from t0.
fn listed(name: &str, n: u64, created: i64) -> ObservedVm {
    ObservedVm { id: Some(id(n)), created: Some(at(created)), ..vm(name, "m1") }
}

/// The span a pass at `seen` left open for `listed(name, n, created)`.
fn span(name: &str, n: u64, created: i64, seen: i64) -> UsageVm {
    let ns = cfg().naming.parse(name).unwrap().nodeset;
    let shape = shapes().get(&ns).cloned().unwrap_or_else(NodesetShape::unknown);
    UsageVm {
        id: id(n),
        node: name.into(),
        nodeset: ns,
        model: "flex",
        gpus: shape.gpus,
        created_at: at(created),
        last_seen: at(seen),
        restored: false,
        counted_to: Some(at(seen)),
    }
}

fn running(job: u64, nodes: &str, start: i64) -> SlurmJob {
    SlurmJob {
        job_id: job,
        state: "RUNNING".into(),
        configuring: false,
        nodes: nodes.into(),
        user: "alice".into(),
        account: "physics".into(),
        partition: "p".into(),
        start: Some(at(start)),
        end: None,
    }
}

/// An open job span: (job, node), its start, not restored.
fn job_span(job: u64, node: &str, start: i64) -> ((u64, String), OpenJob) {
    ((job, node.into()), OpenJob { started_at: at(start), restored: false })
}

/// A job span read back from the store at start.
fn restored_job(job: u64, node: &str, start: i64) -> ((u64, String), OpenJob) {
    let (key, span) = job_span(job, node, start);
    (key, OpenJob { restored: true, ..span })
}

/// A VM span read back from the store at start, last seen at `seen`.
fn restored_vm(name: &str, n: u64, created: i64, seen: i64) -> UsageVm {
    UsageVm { restored: true, counted_to: None, ..span(name, n, created, seen) }
}

/// A run of `job` as slurmdbd keeps it.
fn run(job: u64, start: Option<i64>, end: Option<i64>) -> JobRun {
    JobRun { job_id: job, start: start.map(at), end: end.map(at) }
}

struct Case {
    what: &'static str,
    open: Vec<UsageVm>,
    open_jobs: Vec<((u64, String), OpenJob)>,
    /// `None`: the VM list failed.
    listed: Option<Vec<ObservedVm>>,
    jobs: Option<Vec<SlurmJob>>,
    /// slurmdbd's runs (`sacct`), when asked.
    runs: Option<Vec<JobRun>>,
    unreachable: Option<&'static str>,
    reused: bool,
    /// (instance id) opened, (instance id, minute) closed, (job, node, start) opened,
    /// (job, node, minute) closed.
    opened: Vec<u64>,
    closed: Vec<(u64, i64)>,
    jobs_opened: Vec<(u64, &'static str, i64)>,
    jobs_closed: Vec<(u64, &'static str, i64)>,
    /// The jobs worth asking slurmdbd (`jobs_to_account`), asked or not.
    asked: Vec<u64>,
    /// (nodeset, use, VM seconds, GPU seconds) counted by a pass at minute 10.
    seconds: Vec<(&'static str, &'static str, f64, f64)>,
}

fn base(what: &'static str) -> Case {
    Case {
        what,
        open: vec![],
        open_jobs: vec![],
        listed: Some(vec![]),
        jobs: Some(vec![]),
        runs: None,
        unreachable: None,
        reused: false,
        opened: vec![],
        closed: vec![],
        jobs_opened: vec![],
        jobs_closed: vec![],
        asked: vec![],
        seconds: vec![],
    }
}

#[test]
fn usage_spans_open_extend_and_close() {
    let now = at(10);
    let cases = vec![
        Case {
            listed: Some(vec![listed("hpc-gpu-1", 11, 2), listed("hpc-x-1", 12, 2)]),
            opened: vec![11],
            seconds: vec![("gpu", "busy", 0.0, 0.0), ("gpu", "idle", 480.0, 3840.0)],
            ..base("a new VM of ours opens a span from its creation; a VM that is no node of ours does not")
        },
        Case {
            open: vec![span("hpc-gpu-1", 11, 2, 5)],
            listed: Some(vec![listed("hpc-gpu-1", 11, 2)]),
            seconds: vec![("gpu", "busy", 0.0, 0.0), ("gpu", "idle", 300.0, 2400.0)],
            ..base("a VM still listed: nothing written, its seconds since the last pass counted")
        },
        Case {
            open: vec![span("hpc-gpu-1", 11, 2, 5)],
            closed: vec![(11, 10)],
            seconds: vec![("gpu", "busy", 0.0, 0.0), ("gpu", "idle", 300.0, 2400.0)],
            ..base("a VM gone: closed at the first pass that does not list it")
        },
        Case {
            open: vec![span("hpc-gpu-1", 11, 2, 5)],
            listed: Some(vec![listed("hpc-gpu-1", 13, 8)]),
            opened: vec![13],
            closed: vec![(11, 10)],
            seconds: vec![("gpu", "busy", 0.0, 0.0), ("gpu", "idle", 420.0, 3360.0)],
            ..base("a node's VM made again under the same name: two spans")
        },
        Case {
            open: vec![UsageVm { restored: true, counted_to: None, ..span("hpc-gpu-1", 11, 2, 4) }],
            closed: vec![(11, 4)],
            ..base("after a restart, a VM gone closes at its last sighting, and is not counted")
        },
        Case {
            open: vec![span("hpc-gpu-1", 11, 2, 5)],
            listed: None,
            jobs: None,
            ..base("the VM list failed: nothing closes, nothing is counted")
        },
        Case {
            open: vec![span("hpc-gpu-1", 11, 2, 5)],
            reused: true,
            ..base("an inbox-first pass (an earlier list): nothing closes")
        },
        Case {
            open: vec![span("hpc-gpu-1", 11, 2, 5)],
            unreachable: Some("us-central1-a"),
            seconds: vec![("gpu", "busy", 0.0, 0.0), ("gpu", "idle", 300.0, 2400.0)],
            ..base("its zone did not answer: unknown, not gone")
        },
        Case {
            open: vec![span("hpc-gpu-1", 11, 2, 5), span("hpc-gpu-2", 12, 2, 5)],
            listed: Some(vec![listed("hpc-gpu-1", 11, 2), listed("hpc-gpu-2", 12, 2)]),
            jobs: Some(vec![
                running(7, "hpc-gpu-[1-2]", 7),
                SlurmJob { configuring: true, ..running(8, "hpc-gpu-1", 7) },
                running(9, "hpc-a-5", 7),
            ]),
            jobs_opened: vec![(7, "hpc-gpu-1", 7), (7, "hpc-gpu-2", 7)],
            seconds: vec![("gpu", "busy", 360.0, 2880.0), ("gpu", "idle", 240.0, 1920.0)],
            ..base("a job running on two nodes opens a span on each; one still configuring, or on a node without a VM, none")
        },
        Case {
            open: vec![span("hpc-gpu-1", 11, 2, 5)],
            open_jobs: vec![job_span(7, "hpc-gpu-1", 3)],
            listed: Some(vec![listed("hpc-gpu-1", 11, 2)]),
            jobs: Some(vec![SlurmJob { state: "COMPLETED".into(), end: Some(at(8)), ..running(7, "hpc-gpu-1", 3) }]),
            jobs_closed: vec![(7, "hpc-gpu-1", 8)],
            seconds: vec![("gpu", "busy", 180.0, 1440.0), ("gpu", "idle", 120.0, 960.0)],
            ..base("a job Slurm shows ended closes at its end time")
        },
        Case {
            open: vec![span("hpc-gpu-1", 11, 2, 5)],
            open_jobs: vec![job_span(7, "hpc-gpu-1", 3)],
            listed: Some(vec![listed("hpc-gpu-1", 11, 2)]),
            jobs_closed: vec![(7, "hpc-gpu-1", 10)],
            seconds: vec![("gpu", "busy", 300.0, 2400.0), ("gpu", "idle", 0.0, 0.0)],
            ..base("a job Slurm forgot closes at the pass")
        },
        Case {
            open: vec![span("hpc-gpu-1", 11, 2, 5)],
            open_jobs: vec![job_span(7, "hpc-gpu-1", 3)],
            listed: Some(vec![listed("hpc-gpu-1", 11, 2)]),
            jobs: None,
            seconds: vec![("gpu", "busy", 300.0, 2400.0), ("gpu", "idle", 0.0, 0.0)],
            ..base("jobs not read this pass: job spans stay as they are")
        },
        Case {
            listed: Some(vec![listed("hpc-a-1", 21, 4)]),
            jobs: Some(vec![running(7, "hpc-a-1", 1)]),
            opened: vec![21],
            jobs_opened: vec![(7, "hpc-a-1", 4)],
            seconds: vec![("a", "busy", 360.0, 0.0), ("a", "idle", 0.0, 0.0)],
            ..base("a job that started before its node's VM was made is busy from the VM's creation")
        },
        // After a restart, with slurmdbd: the jobs that ended while the daemon was down.
        Case {
            open: vec![restored_vm("hpc-gpu-1", 11, 2, 4)],
            open_jobs: vec![restored_job(7, "hpc-gpu-1", 3)],
            listed: Some(vec![listed("hpc-gpu-1", 11, 2)]),
            runs: Some(vec![run(7, Some(3), Some(6))]),
            jobs_closed: vec![(7, "hpc-gpu-1", 6)],
            asked: vec![7],
            ..base("a restored span whose job Slurm forgot closes at slurmdbd's end")
        },
        Case {
            open: vec![restored_vm("hpc-gpu-1", 11, 2, 4)],
            open_jobs: vec![restored_job(7, "hpc-gpu-1", 3)],
            runs: Some(vec![run(7, Some(3), Some(8))]),
            closed: vec![(11, 4)],
            jobs_closed: vec![(7, "hpc-gpu-1", 4)],
            asked: vec![7],
            ..base("no later than its VM's recorded life (the VM gone too: its last sighting)")
        },
        Case {
            open: vec![restored_vm("hpc-gpu-1", 11, 2, 4), restored_vm("hpc-gpu-2", 12, 2, 4)],
            open_jobs: vec![restored_job(7, "hpc-gpu-1", 3), restored_job(9, "hpc-gpu-2", 3)],
            listed: Some(vec![listed("hpc-gpu-1", 11, 2), listed("hpc-gpu-2", 12, 2)]),
            runs: Some(vec![run(7, Some(1), Some(2)), run(7, Some(3), Some(7)), run(9, Some(3), Some(12))]),
            jobs_closed: vec![(7, "hpc-gpu-1", 7), (9, "hpc-gpu-2", 10)],
            asked: vec![7, 9],
            ..base("a requeued job: the first run that ended after the span began; an end past the pass is the pass")
        },
        Case {
            open: vec![restored_vm("hpc-gpu-1", 11, 2, 4)],
            open_jobs: vec![restored_job(7, "hpc-gpu-1", 3)],
            listed: Some(vec![listed("hpc-gpu-1", 11, 2)]),
            runs: Some(vec![run(7, Some(0), Some(1)), run(7, None, None)]),
            jobs_closed: vec![(7, "hpc-gpu-1", 10)],
            asked: vec![7],
            ..base("slurmdbd knows no end after the span began (requeued, pending): at the pass")
        },
        Case {
            open: vec![restored_vm("hpc-gpu-1", 11, 2, 4)],
            open_jobs: vec![restored_job(7, "hpc-gpu-1", 3)],
            listed: Some(vec![listed("hpc-gpu-1", 11, 2)]),
            jobs_closed: vec![(7, "hpc-gpu-1", 10)],
            asked: vec![7],
            ..base("no slurmdbd, or sacct failed: at the pass, as before")
        },
        Case {
            open: vec![restored_vm("hpc-gpu-1", 11, 2, 4)],
            open_jobs: vec![restored_job(7, "hpc-gpu-1", 3)],
            listed: Some(vec![listed("hpc-gpu-1", 11, 2)]),
            jobs: Some(vec![SlurmJob { state: "COMPLETED".into(), end: Some(at(8)), ..running(7, "hpc-gpu-1", 3) }]),
            runs: Some(vec![run(7, Some(3), Some(9))]),
            jobs_closed: vec![(7, "hpc-gpu-1", 8)],
            asked: vec![7],
            ..base("Slurm still remembers the job: its end time first")
        },
        Case {
            open: vec![restored_vm("hpc-gpu-1", 11, 2, 4)],
            open_jobs: vec![restored_job(7, "hpc-gpu-1", 3)],
            listed: Some(vec![listed("hpc-gpu-1", 11, 2)]),
            jobs: Some(vec![running(7, "hpc-gpu-1", 3)]),
            runs: Some(vec![run(7, Some(3), None)]),
            ..base("a restored span whose job still runs: nothing to ask")
        },
        Case {
            open: vec![span("hpc-gpu-1", 11, 2, 5)],
            open_jobs: vec![job_span(7, "hpc-gpu-1", 3)],
            listed: Some(vec![listed("hpc-gpu-1", 11, 2)]),
            runs: Some(vec![run(7, Some(3), Some(6))]),
            jobs_closed: vec![(7, "hpc-gpu-1", 10)],
            seconds: vec![("gpu", "busy", 300.0, 2400.0), ("gpu", "idle", 0.0, 0.0)],
            ..base("a span this run saw open is no restored one: slurmdbd is not its source")
        },
    ];
    for c in cases {
        let mut o = Observed {
            vms: c.listed.map(|l| l.into_iter().map(|v| (v.name.clone(), v)).collect()),
            jobs: c.jobs,
            job_runs: c.runs,
            reused: c.reused,
            ..Default::default()
        };
        o.unreachable_zones.extend(c.unreachable.map(String::from));
        let mut open = OpenUsage {
            vms: c.open.into_iter().collect(),
            jobs: c.open_jobs.into_iter().collect(),
            ..Default::default()
        };
        let shapes = shapes();
        let change = usage_change(&cfg(), &shapes, &BTreeMap::new(), &open, &o, now);
        let opened: Vec<u64> = change.vms_opened.iter().map(|v| v.span.id.get()).collect();
        assert_eq!(opened, c.opened, "{}: VM spans opened", c.what);
        let closed: Vec<(u64, DateTime<Utc>)> =
            change.vms_closed.iter().map(|(i, t)| (i.get(), *t)).collect();
        let want: Vec<_> = c.closed.iter().map(|(i, m)| (*i, at(*m))).collect();
        assert_eq!(closed, want, "{}: VM spans closed", c.what);
        let jobs: Vec<_> =
            change.jobs_opened.iter().map(|j| (j.job_id, j.node.as_str(), j.started_at)).collect();
        let want: Vec<_> = c.jobs_opened.iter().map(|(j, n, m)| (*j, *n, at(*m))).collect();
        assert_eq!(jobs, want, "{}: job spans opened", c.what);
        let jobs: Vec<_> = change.jobs_closed.iter().map(|((j, n), t)| (*j, n.as_str(), *t)).collect();
        let want: Vec<_> = c.jobs_closed.iter().map(|(j, n, m)| (*j, *n, at(*m))).collect();
        assert_eq!(jobs, want, "{}: job spans closed", c.what);
        assert_eq!(jobs_to_account(&open, &change), c.asked, "{}: asked of slurmdbd", c.what);
        if o.vms.is_none() || o.reused {
            assert!(change.is_empty(), "{}", c.what);
            continue; // the reconciler counts nothing on such a pass
        }
        let secs = apply_usage(&mut open, &change, now);
        let got: Vec<_> = secs.iter().map(|((ns, _, u), s)| (ns.as_str(), *u, s.vm, s.gpu)).collect();
        assert_eq!(got, c.seconds, "{}: seconds counted", c.what);
        // The spans as the pass leaves them: every one open is seen now and counted to now.
        let after: BTreeSet<u64> = open.vms.values().map(|v| v.id.get()).collect();
        let mut want: BTreeSet<u64> = opened.iter().copied().collect();
        want.extend(
            open.vms
                .values()
                .filter(|v| !change.vms_opened.iter().any(|o| o.span.id == v.id))
                .map(|v| v.id.get()),
        );
        assert_eq!(after, want, "{}", c.what);
        assert!(open.vms.values().all(|v| v.counted_to == Some(now) && v.last_seen == now && !v.restored));
        if o.jobs.is_some() {
            assert!(open.jobs.values().all(|j| !j.restored), "{}: jobs read: none restored now", c.what);
        }
    }
}

/// A second pass counts only what came after the first: over a VM's life, busy + idle = its life.
#[test]
fn busy_plus_idle_is_the_life_of_the_vm() {
    let mut open = OpenUsage::default();
    let c = cfg();
    let mut total: BTreeMap<&str, f64> = BTreeMap::new();
    let mut pass =
        |listed: Vec<ObservedVm>, jobs: Vec<SlurmJob>, now: DateTime<Utc>, open: &mut OpenUsage| {
            let o = Observed {
                vms: Some(listed.into_iter().map(|v| (v.name.clone(), v)).collect()),
                jobs: Some(jobs),
                ..Default::default()
            };
            let shapes = shapes();
            let change = usage_change(&c, &shapes, &BTreeMap::new(), open, &o, now);
            for ((_, _, u), s) in apply_usage(open, &change, now) {
                *total.entry(u).or_default() += s.vm;
            }
        };
    let v = || listed("hpc-gpu-1", 11, 0);
    pass(vec![v()], vec![], at(1), &mut open);
    pass(vec![v()], vec![running(7, "hpc-gpu-1", 2)], at(3), &mut open);
    pass(
        vec![v()],
        vec![SlurmJob { state: "COMPLETED".into(), end: Some(at(5)), ..running(7, "hpc-gpu-1", 2) }],
        at(6),
        &mut open,
    );
    pass(vec![], vec![], at(9), &mut open);
    assert!(open.vms.is_empty() && open.jobs.is_empty());
    assert_eq!(total["busy"], 180.0, "minutes 2 to 5");
    assert_eq!(
        total["busy"] + total["idle"],
        540.0,
        "creation at 0 to the pass at 9 that no longer lists it"
    );
}

/// A node's busy time is the union of its own jobs' time on it: two jobs sharing a node count once
/// where they overlap, and another node's jobs never count on it.
#[test]
fn a_nodes_busy_time_is_the_union_of_its_own_jobs() {
    let mut open = OpenUsage::default();
    let c = cfg();
    let shapes = shapes();
    let vms = || [listed("hpc-gpu-1", 11, 0), listed("hpc-gpu-2", 12, 0)];
    let pass = |jobs: Vec<SlurmJob>, now: DateTime<Utc>, open: &mut OpenUsage| {
        let o = Observed {
            vms: Some(vms().into_iter().map(|v| (v.name.clone(), v)).collect()),
            jobs: Some(jobs),
            ..Default::default()
        };
        let change = usage_change(&c, &shapes, &BTreeMap::new(), open, &o, now);
        let mut total: BTreeMap<&str, f64> = BTreeMap::new();
        for ((_, _, u), s) in apply_usage(open, &change, now) {
            *total.entry(u).or_default() += s.vm;
        }
        total
    };
    pass(vec![], at(1), &mut open);
    let jobs = vec![running(7, "hpc-gpu-1", 2), running(8, "hpc-gpu-[1-2]", 3), running(9, "hpc-gpu-2", 4)];
    let total = pass(jobs, at(6), &mut open);
    // hpc-gpu-1: jobs 7 and 8, minutes 2 to 6; hpc-gpu-2: jobs 8 and 9, minutes 3 to 6.
    assert_eq!(total["busy"], 240.0 + 180.0, "{total:?}");
    assert_eq!(total["busy"] + total["idle"], 2.0 * 300.0, "{total:?}");
}

/// A read of the same running jobs as the last one changes no job span (it is not worked out
/// again), unless a VM came or went since: a job on a node whose VM came in a pass that did not read
/// Slurm's jobs opens its span at the next read of the same jobs.
#[test]
fn the_same_jobs_read_again_change_nothing_unless_a_vm_came_meanwhile() {
    let mut open = OpenUsage::default();
    let c = cfg();
    let shapes = shapes();
    let pass =
        |open: &mut OpenUsage, vms: Vec<ObservedVm>, jobs: Option<Vec<SlurmJob>>, now: DateTime<Utc>| {
            let o = Observed {
                vms: Some(vms.into_iter().map(|v| (v.name.clone(), v)).collect()),
                jobs,
                ..Default::default()
            };
            let change = usage_change(&c, &shapes, &BTreeMap::new(), open, &o, now);
            let opened: Vec<_> = change.jobs_opened.iter().map(|j| (j.job_id, j.node.clone())).collect();
            let closed: Vec<_> = change.jobs_closed.iter().map(|(k, _)| k.clone()).collect();
            apply_usage(open, &change, now);
            (opened, closed)
        };
    let jobs = || Some(vec![running(7, "hpc-gpu-1", 0)]);
    let vm = || vec![listed("hpc-gpu-1", 11, 1)];
    // No VM yet: the job's node has no busy time to count.
    assert_eq!(pass(&mut open, vec![], jobs(), at(1)), (vec![], vec![]));
    // The VM comes in a pass that does not read the jobs ...
    assert_eq!(pass(&mut open, vm(), None, at(2)), (vec![], vec![]));
    // ... and the same jobs read next open the span.
    assert_eq!(pass(&mut open, vm(), jobs(), at(3)), (vec![(7, "hpc-gpu-1".to_string())], vec![]));
    assert_eq!(pass(&mut open, vm(), jobs(), at(4)), (vec![], vec![]), "the same again: nothing");
    assert_eq!(open.jobs.len(), 1);
    assert_eq!(pass(&mut open, vm(), Some(vec![]), at(5)), (vec![], vec![(7, "hpc-gpu-1".to_string())]));
    assert!(open.jobs.is_empty());
}

/// At 10,000 VMs a steady pass (every VM listed as before, nobody's job changed) changes nothing:
/// nothing is written but the one row of `StoreTx::usage_seen` (`make bench`'s scale section times
/// the whole pass with it).
#[test]
fn a_steady_pass_at_10k_vms_changes_nothing() {
    let c = PlanConfig { naming: crate::naming::Naming::with_nodesets("hpc", [("a", 0, 10_000)]), ..cfg() };
    let mut c = c;
    c.nodesets.retain(|k, _| k == "a");
    let vms: BTreeMap<String, ObservedVm> = (0..10_000u64)
        .map(|i| {
            let name = format!("hpc-a-{i}");
            (name.clone(), listed(&name, i + 1, 0))
        })
        .collect();
    let jobs: Vec<SlurmJob> = (0..5_000u64).map(|i| running(i + 1, &format!("hpc-a-{i}"), 1)).collect();
    let o = Observed { vms: Some(vms), jobs: Some(jobs), ..Default::default() };
    let mut open = OpenUsage::default();
    let shapes = shapes();
    let change = usage_change(&c, &shapes, &BTreeMap::new(), &open, &o, at(2));
    assert_eq!((change.vms_opened.len(), change.jobs_opened.len()), (10_000, 5_000));
    apply_usage(&mut open, &change, at(2));
    let change = usage_change(&c, &shapes, &BTreeMap::new(), &open, &o, at(3));
    let secs = apply_usage(&mut open, &change, at(3));
    assert!(change.is_empty(), "a steady pass changes nothing");
    let s = &secs[&("a".to_string(), "flex", "busy")];
    assert_eq!(s.vm, 5_000.0 * 60.0);
}

/// What a pass opens carries the rest of its row, borrowed: the nodeset's machine type (`unknown`
/// when its template was not read), who ran the job, on which account and partition.
#[test]
fn opened_spans_carry_their_rows() {
    let o = Observed {
        vms: Some([listed("hpc-gpu-1", 11, 2), listed("hpc-a-1", 12, 2)].map(|v| (v.name.clone(), v)).into()),
        jobs: Some(vec![running(7, "hpc-gpu-1", 3)]),
        ..Default::default()
    };
    let shapes = shapes();
    let change = usage_change(&cfg(), &shapes, &BTreeMap::new(), &OpenUsage::default(), &o, at(10));
    let vms: Vec<_> =
        change.vms_opened.iter().map(|v| (v.span.node.as_str(), v.machine_type, v.span.gpus)).collect();
    assert_eq!(vms, [("hpc-a-1", "unknown", 0), ("hpc-gpu-1", "a3-highgpu-8g", 8)]);
    let jobs: Vec<_> =
        change.jobs_opened.iter().map(|j| (j.node.as_str(), j.user, j.account, j.partition)).collect();
    assert_eq!(jobs, [("hpc-gpu-1", "alice", "physics", "p")]);
}

#[test]
fn the_open_vm_spans_stay_sorted_by_id_through_batches_and_an_added_span_replaces_its_id() {
    let mut open: OpenVms = [span("hpc-a-3", 30, 0, 1), span("hpc-a-1", 10, 0, 1)].into_iter().collect();
    open.add_all([span("hpc-a-2", 20, 0, 1), span("hpc-gpu-1", 10, 5, 5)]);
    let ids: Vec<u64> = open.values().map(|v| v.id.get()).collect();
    assert_eq!(ids, [10, 20, 30]);
    assert_eq!(
        open.get(&id(10)).unwrap().node,
        "hpc-gpu-1",
        "the span added replaces the open one of its id"
    );
    assert!(open.contains_key(&id(20)) && !open.contains_key(&id(15)));
    open.remove_all(&[id(10), id(30)].into_iter().collect());
    let ids: Vec<u64> = open.values().map(|v| v.id.get()).collect();
    assert_eq!(ids, [20]);
    open.remove_all(&rustc_hash::FxHashSet::default());
    assert_eq!(open.len(), 1);
}
