//! Table tests of the maintenance rule (`maintenance.rs`): nodeset `a` wants maintenance
//! reservations, nodeset `b` says `maintenance_reservation = false`.

use super::*;

fn at(hours: i64) -> DateTime<Utc> {
    t0() + Duration::hours(hours)
}

/// A window GCE announces, `start` to `end` hours from now (`None`: no end given).
fn window(start: i64, end: Option<i64>) -> Maintenance {
    Maintenance {
        kind: "SCHEDULED".into(),
        window_start_time: Some(at(start)),
        window_end_time: end.map(at),
        latest_window_start_time: Some(at(start + 48)),
        can_reschedule: true,
        maintenance_status: "PENDING".into(),
        maintenance_reasons: vec!["FAILURE_GPU_XID".into()],
    }
}

/// What GCE shows of the node's VM: none, or a VM with or without a maintenance.
#[derive(Clone)]
enum Gce {
    NoVm,
    Vm(Option<Maintenance>),
    ListFailed,
}

struct Case {
    what: &'static str,
    node: &'static str,
    recorded: Option<Maintenance>,
    gce: Gce,
    /// Whether Slurm has the node's maintenance reservation (`None`: Slurm's reservations unread).
    in_slurm: Option<bool>,
    /// The reservation steps wanted, in order: `Some((start, end))` a create, `None` a delete.
    steps: Vec<Option<(DateTime<Utc>, DateTime<Utc>)>>,
    event: Option<(EventKind, &'static str)>,
    /// The node's maintenance after the round (`None`: unchanged).
    recorded_after: Option<Option<Maintenance>>,
}

fn run(c: &Case) -> Plan {
    let mut w = World::new().node(node(c.node, NodeState::Up));
    if let Some(n) = w.d.nodes.get_mut(c.node) {
        n.maintenance = c.recorded.clone().map(Box::new);
    }
    match &c.gce {
        Gce::NoVm => {}
        Gce::Vm(m) => w = w.vm(ObservedVm { maintenance: m.clone().map(Box::new), ..vm(c.node, "m1") }),
        Gce::ListFailed => w.o.vms = None,
    }
    match c.in_slurm {
        None => w.o.reservations = None,
        Some(true) => {
            w.o.reservations.as_mut().unwrap().insert(maint_reservation(c.node));
        }
        Some(false) => {}
    }
    w.plan()
}

#[test]
fn a_maintenance_window_gets_a_reservation_that_follows_it_and_goes_with_it() {
    let soon = window(2, Some(3));
    let moved = window(5, Some(7));
    let ongoing = Maintenance { maintenance_status: "ONGOING".into(), ..soon.clone() };
    let begun = window(-1, Some(1));
    let cases = vec![
        Case {
            what: "announced: recorded, told, reserved over GCE's window",
            node: "hpc-a-1",
            recorded: None,
            gce: Gce::Vm(Some(soon.clone())),
            in_slurm: Some(false),
            steps: vec![Some((at(2), at(3)))],
            event: Some((EventKind::MaintenanceScheduled, "SCHEDULED from 2026-11-23T14:00:00Z to 2026-11-23T15:00:00Z, PENDING, reasons FAILURE_GPU_XID")),
            recorded_after: Some(Some(soon.clone())),
        },
        Case {
            what: "no end given: the documented length",
            node: "hpc-a-1",
            recorded: None,
            gce: Gce::Vm(Some(window(2, None))),
            in_slurm: Some(false),
            steps: vec![Some((at(2), at(2) + Duration::seconds(DEFAULT_WINDOW_SECS)))],
            event: Some((EventKind::MaintenanceScheduled, "an end GCE did not give")),
            recorded_after: Some(Some(window(2, None))),
        },
        Case {
            what: "already begun: reserved from a minute from now",
            node: "hpc-a-1",
            recorded: None,
            gce: Gce::Vm(Some(begun.clone())),
            in_slurm: Some(false),
            steps: vec![Some((t0() + Duration::seconds(60), at(1)))],
            event: Some((EventKind::MaintenanceScheduled, "reservation slurm-dws-maint-hpc-a-1")),
            recorded_after: Some(Some(begun.clone())),
        },
        Case {
            what: "steady: nothing to do",
            node: "hpc-a-1",
            recorded: Some(soon.clone()),
            gce: Gce::Vm(Some(soon.clone())),
            in_slurm: Some(true),
            steps: vec![],
            event: None,
            recorded_after: None,
        },
        Case {
            what: "Slurm lost the reservation: made again, no new event",
            node: "hpc-a-1",
            recorded: Some(soon.clone()),
            gce: Gce::Vm(Some(soon.clone())),
            in_slurm: Some(false),
            steps: vec![Some((at(2), at(3)))],
            event: None,
            recorded_after: None,
        },
        Case {
            what: "status only changed: recorded, nothing else",
            node: "hpc-a-1",
            recorded: Some(soon.clone()),
            gce: Gce::Vm(Some(ongoing.clone())),
            in_slurm: Some(true),
            steps: vec![],
            event: None,
            recorded_after: Some(Some(ongoing.clone())),
        },
        Case {
            what: "GCE moved the window: the reservation follows",
            node: "hpc-a-1",
            recorded: Some(soon.clone()),
            gce: Gce::Vm(Some(moved.clone())),
            in_slurm: Some(true),
            steps: vec![None, Some((at(5), at(7)))],
            event: Some((EventKind::MaintenanceScheduled, "moved from 2026-11-23T14:00:00Z to 2026-11-23T15:00:00Z")),
            recorded_after: Some(Some(moved.clone())),
        },
        Case {
            what: "a reservation in Slurm with no record of its window: made again over GCE's",
            node: "hpc-a-1",
            recorded: None,
            gce: Gce::Vm(Some(soon.clone())),
            in_slurm: Some(true),
            steps: vec![None, Some((at(2), at(3)))],
            event: Some((EventKind::MaintenanceScheduled, "SCHEDULED")),
            recorded_after: Some(Some(soon.clone())),
        },
        Case {
            what: "cancelled before it began",
            node: "hpc-a-1",
            recorded: Some(soon.clone()),
            gce: Gce::Vm(None),
            in_slurm: Some(true),
            steps: vec![None],
            event: Some((EventKind::MaintenanceDone, "GCE cancelled the maintenance")),
            recorded_after: Some(None),
        },
        Case {
            what: "over",
            node: "hpc-a-1",
            recorded: Some(begun.clone()),
            gce: Gce::Vm(None),
            in_slurm: Some(true),
            steps: vec![None],
            event: Some((EventKind::MaintenanceDone, "the maintenance is over")),
            recorded_after: Some(None),
        },
        Case {
            what: "the VM is gone",
            node: "hpc-a-1",
            recorded: Some(soon.clone()),
            gce: Gce::NoVm,
            in_slurm: Some(true),
            steps: vec![None],
            event: Some((EventKind::MaintenanceDone, "the node's VM is gone")),
            recorded_after: Some(None),
        },
        Case {
            what: "over, and Slurm had already ended the reservation",
            node: "hpc-a-1",
            recorded: Some(begun.clone()),
            gce: Gce::Vm(None),
            in_slurm: Some(false),
            steps: vec![],
            event: Some((EventKind::MaintenanceDone, "the maintenance is over")),
            recorded_after: Some(None),
        },
        Case {
            what: "the VM list failed: nothing concluded",
            node: "hpc-a-1",
            recorded: Some(soon.clone()),
            gce: Gce::ListFailed,
            in_slurm: Some(true),
            steps: vec![],
            event: None,
            recorded_after: None,
        },
        Case {
            what: "Slurm's reservations unread: recorded and told, no reservation step",
            node: "hpc-a-1",
            recorded: None,
            gce: Gce::Vm(Some(soon.clone())),
            in_slurm: None,
            steps: vec![],
            event: Some((EventKind::MaintenanceScheduled, "SCHEDULED")),
            recorded_after: Some(Some(soon.clone())),
        },
        Case {
            what: "maintenance_reservation = false: told, not reserved",
            node: "hpc-b-1",
            recorded: None,
            gce: Gce::Vm(Some(soon.clone())),
            in_slurm: Some(false),
            steps: vec![],
            event: Some((EventKind::MaintenanceScheduled, "no reservation: maintenance_reservation = false")),
            recorded_after: Some(Some(soon.clone())),
        },
        Case {
            what: "maintenance_reservation = false: one made before goes",
            node: "hpc-b-1",
            recorded: Some(soon.clone()),
            gce: Gce::Vm(Some(soon.clone())),
            in_slurm: Some(true),
            steps: vec![None],
            event: None,
            recorded_after: None,
        },
        Case {
            what: "the window is over but GCE still lists it: no reservation",
            node: "hpc-a-1",
            recorded: None,
            gce: Gce::Vm(Some(window(-5, Some(-4)))),
            in_slurm: Some(false),
            steps: vec![],
            event: Some((EventKind::MaintenanceScheduled, "no reservation: the window has no start or is over")),
            recorded_after: Some(Some(window(-5, Some(-4)))),
        },
        Case {
            what: "a reservation no window explains (record lost, no maintenance): removed",
            node: "hpc-a-1",
            recorded: None,
            gce: Gce::Vm(None),
            in_slurm: Some(true),
            steps: vec![None],
            event: None,
            recorded_after: None,
        },
    ];
    for c in &cases {
        let p = run(c);
        let name = maint_reservation(c.node);
        let steps: Vec<Option<(DateTime<Utc>, DateTime<Utc>)>> = p
            .slurm
            .iter()
            .filter_map(|s| match s {
                SlurmStep::CreateReservation { name: r, node, start, end } if *r == name => {
                    assert_eq!(node, c.node, "{}", c.what);
                    Some(Some((*start, *end)))
                }
                SlurmStep::DeleteReservation { name: r } if *r == name => Some(None),
                _ => None,
            })
            .collect();
        assert_eq!(steps, c.steps, "{}: {:?}", c.what, p.slurm);
        let events: Vec<&NewEvent> = p
            .events
            .iter()
            .filter(|e| matches!(e.kind, EventKind::MaintenanceScheduled | EventKind::MaintenanceDone))
            .collect();
        match c.event {
            None => assert!(events.is_empty(), "{}: {events:?}", c.what),
            Some((kind, says)) => {
                assert_eq!(events.len(), 1, "{}: {events:?}", c.what);
                assert_eq!(events[0].kind, kind, "{}", c.what);
                assert_eq!(events[0].nodes, vec![c.node.to_string()], "{}", c.what);
                assert!(
                    events[0].message.contains(says),
                    "{}: {:?} says {says:?}",
                    c.what,
                    events[0].message
                );
            }
        }
        // (Other rules may change the node too: only its maintenance is compared.)
        let after =
            node_after(&p, c.node).map_or_else(|| c.recorded.clone(), |n| n.maintenance.as_deref().cloned());
        assert_eq!(after, c.recorded_after.clone().unwrap_or_else(|| c.recorded.clone()), "{}", c.what);
    }
}

/// A window whose zone did not answer is unknown: the record and the reservation stay.
#[test]
fn a_node_whose_zone_did_not_answer_keeps_its_maintenance() {
    let mut w = World::new()
        .node(Node { maintenance: Some(Box::new(window(2, Some(3)))), ..node("hpc-a-1", NodeState::Up) });
    w.o.reservations.as_mut().unwrap().insert(maint_reservation("hpc-a-1"));
    w.o.unreachable_zones.insert("us-central1-a".into());
    let p = w.plan();
    assert!(!p.slurm.iter().any(|s| matches!(s, SlurmStep::DeleteReservation { .. })), "{:?}", p.slurm);
    assert!(p.events.iter().all(|e| e.kind != EventKind::MaintenanceDone), "{:?}", p.events);
}

/// A maintenance announced for many VMs at once: at most a thousand reservations a round (each one
/// `scontrol`), every window recorded and told at once; the next round makes the rest.
fn maint_creates(p: &Plan) -> usize {
    p.slurm
        .iter()
        .filter(|s| matches!(s, SlurmStep::CreateReservation { name, .. } if name.starts_with(MAINT_PREFIX)))
        .count()
}

#[test]
fn many_windows_at_once_are_reserved_a_thousand_a_round() {
    let mut w = World::new();
    for i in 0..1200 {
        let name = format!("hpc-a-{i}");
        w = w.node(node(&name, NodeState::Up));
        w = w.vm(ObservedVm { maintenance: Some(Box::new(window(2, Some(3)))), ..vm(&name, "m1") });
    }
    let p = w.plan();
    let creates = maint_creates(&p);
    assert_eq!(creates, MAX_RESERVATIONS_PER_ROUND);
    assert_eq!(p.events.iter().filter(|e| e.kind == EventKind::MaintenanceScheduled).count(), 1200);
    // The next round: the records written, a thousand reservations made.
    for n in &p.nodes {
        w.d.nodes.insert(n.name.clone(), n.clone());
    }
    for s in &p.slurm {
        if let SlurmStep::CreateReservation { name, .. } = s {
            w.o.reservations.as_mut().unwrap().insert(name.clone());
        }
    }
    let p = w.plan();
    let creates = maint_creates(&p);
    assert_eq!(creates, 200);
    assert!(p.events.iter().all(|e| e.kind != EventKind::MaintenanceScheduled));
}

/// GCE stops a GPU VM for its host maintenance (GPU VMs cannot be live-migrated). slurm-dws takes
/// the stop as it takes any VM that stopped: it does not wait for a restart GCE may make outside
/// the window, or never (a Flex VM is not restarted). The node leaves service, its job is requeued
/// and its VM deleted; the maintenance stays on record, and its reservation in Slurm, while GCE
/// lists the stopped VM, and both go with it.
#[test]
fn a_vm_stopped_for_its_maintenance_is_replaced_and_its_reservation_goes_with_it() {
    let ongoing = Maintenance { maintenance_status: "ONGOING".into(), ..window(-1, Some(1)) };
    let stopped =
        ObservedVm { maintenance: Some(Box::new(ongoing.clone())), ..vm_in("hpc-a-1", "m1", "TERMINATED") };
    let mut w = World::new()
        .node(Node { maintenance: Some(Box::new(ongoing.clone())), ..up_node("hpc-a-1", "m1") })
        .mig(mig("m1", MigState::Active), Some(1))
        .vm(stopped)
        .slurm("hpc-a-1", slurm("allocated", &["CLOUD"], ""));
    w.o.reservations.as_mut().unwrap().insert(maint_reservation("hpc-a-1"));
    let p = w.plan();
    assert!(
        p.gce.contains(&GceStep::DeleteInstances { mig: "m1".into(), instances: vec![vm_ref("hpc-a-1")] }),
        "{:?}",
        p.gce
    );
    assert!(has_update(&p, "hpc-a-1", "down"), "{:?}", p.slurm);
    assert!(p.slurm.contains(&SlurmStep::SetJobsBegin { jobs: vec![7], begin: t0() }), "{:?}", p.slurm);
    assert!(
        p.events.iter().any(|e| e.kind == EventKind::VmFailed && e.message.contains("TERMINATED")),
        "{:?}",
        p.events
    );
    assert!(!p.slurm.iter().any(|s| matches!(s, SlurmStep::DeleteReservation { .. })), "{:?}", p.slurm);
    assert!(p.events.iter().all(|e| e.kind != EventKind::MaintenanceDone), "{:?}", p.events);
    let after = node_after(&p, "hpc-a-1").unwrap().clone();
    assert_eq!(after.maintenance.as_deref(), Some(&ongoing));

    // The next pass, the VM gone: the record and the reservation go.
    let mut w = World::new().node(after).mig(mig("m1", MigState::Active), Some(0));
    w.o.reservations.as_mut().unwrap().insert(maint_reservation("hpc-a-1"));
    let p = w.plan();
    assert!(
        p.slurm.contains(&SlurmStep::DeleteReservation { name: maint_reservation("hpc-a-1") }),
        "{:?}",
        p.slurm
    );
    let done: Vec<_> = p.events.iter().filter(|e| e.kind == EventKind::MaintenanceDone).collect();
    assert!(done.len() == 1 && done[0].message.contains("the node's VM is gone"), "{:?}", p.events);
    assert_eq!(node_after(&p, "hpc-a-1").and_then(|n| n.maintenance.clone()), None);
}
