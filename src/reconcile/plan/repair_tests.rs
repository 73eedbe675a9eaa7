//! Table tests of the repair rule (`repair.rs`): asks and drain reasons become one repair a node;
//! a reservation-bound VM's host is reported, any other VM replaced; the drain is lifted when the
//! VM runs again and Slurm has the node responding.

use super::*;
use crate::reconcile::plan::{repair_reason, HOST_REPORTED};

fn up(name: &str) -> Node {
    let mut n = node(name, NodeState::Up);
    n.mig = Some("m1".into());
    n.request_id = Some(1);
    n.job_id = Some(7);
    n.vm_status = Some(VmStatus::Running);
    n.state_since = t0() - Duration::minutes(20);
    n
}

fn repair(name: &str, phase: RepairPhase, outcome: Option<&str>) -> Repair {
    Repair {
        node: name.into(),
        behavior: FaultBehavior::UnrecoverableGpuError,
        description: "xid 79".into(),
        source: "cli".into(),
        phase,
        requested_at: t0() - Duration::minutes(5),
        updated_at: t0() - Duration::minutes(5),
        outcome: outcome.map(str::to_string),
    }
}

fn ask(name: &str) -> RepairAsk {
    RepairAsk {
        id: 3,
        node: name.into(),
        behavior: FaultBehavior::UnrecoverableGpuError,
        description: "xid 79".into(),
    }
}

fn world(reservation_bound: bool, s: SlurmNode) -> World {
    World::new()
        .node(up("hpc-a-1"))
        .mig(mig("m1", MigState::Active), Some(1))
        .vm(ObservedVm { reservation_bound, ..vm("hpc-a-1", "m1") })
        .slurm("hpc-a-1", s)
}

fn repair_after<'a>(p: &'a Plan, name: &str) -> Option<&'a Repair> {
    p.repairs.iter().find(|r| r.node == name)
}

#[test]
fn drain_reasons_that_ask_for_a_repair() {
    let b = FaultBehavior::UnrecoverableGpuError;
    for (reason, want) in [
        ("repair UNRECOVERABLE_GPU_ERROR xid 79", Some((b, "xid 79"))),
        ("Repair: unrecoverable_gpu_error", Some((b, ""))),
        ("REPAIR", Some((FaultBehavior::Performance, ""))),
        ("repair slow allreduce", Some((FaultBehavior::Performance, "slow allreduce"))),
        ("repair SILENT_DATA_CORRUPTION", Some((FaultBehavior::SilentDataCorruption, ""))),
        ("repairing the fan", None),
        ("Kill task failed", None),
        ("slurm-dws: repair PERFORMANCE", None),
        ("", None),
    ] {
        let got = repair_reason(reason);
        assert_eq!(got.as_ref().map(|(b, t)| (*b, t.as_str())), want, "{reason:?}");
    }
}

/// One table: what the first round does with a repair asked of a running node, by how it was asked
/// and by the VM's provisioning model.
#[test]
fn an_asked_repair_drains_requeues_and_reports_or_replaces() {
    for (how, reservation_bound) in [("cli", true), ("cli", false), ("drain", true), ("drain", false)] {
        let mut w = if how == "cli" {
            world(reservation_bound, slurm("allocated", &[], ""))
        } else {
            world(reservation_bound, slurm("allocated", &["DRAIN"], "repair UNRECOVERABLE_GPU_ERROR xid 79"))
        };
        if how == "cli" {
            w.o.repair_asks.push(ask("hpc-a-1"));
        }
        let p = w.plan();
        let case = format!("{how}, reservation-bound {reservation_bound}");
        assert!(p.events.iter().any(|e| e.kind == EventKind::RepairRequested), "{case}");
        assert_eq!(p.repair_asks_taken, if how == "cli" { vec![3] } else { vec![] }, "{case}");
        assert_eq!(
            has_update(&p, "hpc-a-1", "drain"),
            how == "cli",
            "{case}: drained unless drained already"
        );
        assert!(p.slurm.contains(&SlurmStep::RequeueJobsOn { nodes: vec!["hpc-a-1".into()] }), "{case}");
        let r = repair_after(&p, "hpc-a-1").expect("recorded");
        assert_eq!(r.behavior, FaultBehavior::UnrecoverableGpuError, "{case}");
        assert_eq!(r.source, how, "{case}");
        if reservation_bound {
            assert_eq!(r.phase, RepairPhase::Reporting, "{case}");
            assert_eq!(
                p.gce,
                vec![GceStep::ReportHostAsFaulty {
                    node: "hpc-a-1".into(),
                    vm: vm_ref("hpc-a-1"),
                    behavior: FaultBehavior::UnrecoverableGpuError,
                    description: "xid 79".into(),
                }],
                "{case}"
            );
        } else {
            assert_eq!(r.phase, RepairPhase::Replacing, "{case}");
            assert_eq!(
                p.gce,
                vec![GceStep::DeleteInstances { mig: "m1".into(), instances: vec![vm_ref("hpc-a-1")] }],
                "{case}"
            );
            let n = node_after(&p, "hpc-a-1").unwrap();
            assert_eq!(n.state, NodeState::ResumePending, "{case}: a new VM is requested for the node");
            assert!(p.events.iter().any(|e| e.kind == EventKind::VmReplaced), "{case}");
        }
    }
}

/// Idempotent: an ask or a drain reason for a node whose repair is open is the same repair.
#[test]
fn a_second_ask_while_a_repair_is_open_is_the_same_repair() {
    for phase in [RepairPhase::Reporting, RepairPhase::Replacing] {
        let mut w = world(true, slurm("idle", &["DRAIN"], "repair xid"));
        w.d.repairs.insert("hpc-a-1".into(), repair("hpc-a-1", phase, None));
        w.o.repair_asks.push(ask("hpc-a-1"));
        let p = w.plan();
        assert_eq!(p.repair_asks_taken, vec![3]);
        assert!(!p.events.iter().any(|e| e.kind == EventKind::RepairRequested), "{phase}");
        assert!(!p.gce.iter().any(|s| matches!(s, GceStep::ReportHostAsFaulty { .. })), "{phase}");
    }
}

/// The repair ends when the VM runs and Slurm has the node responding; not before; a failed one
/// keeps the node drained and is not started again from the same drain reason.
#[test]
fn the_drain_is_lifted_once_the_vm_runs_and_slurmd_responds() {
    let reported = format!("{HOST_REPORTED} (UNRECOVERABLE_GPU_ERROR)");
    for (phase, outcome, vm_status, flags, lifted) in [
        (RepairPhase::Reporting, Some(reported.as_str()), "RUNNING", vec!["DRAIN"], true),
        (RepairPhase::Reporting, Some(reported.as_str()), "RUNNING", vec!["DRAIN", "NOT_RESPONDING"], false),
        (RepairPhase::Reporting, Some(reported.as_str()), "REPAIRING", vec!["DRAIN"], false),
        (RepairPhase::Reporting, None, "RUNNING", vec!["DRAIN"], false),
        (RepairPhase::Replacing, None, "RUNNING", vec!["DRAIN"], true),
        (RepairPhase::Replacing, None, "STAGING", vec!["DRAIN"], false),
    ] {
        let mut w = world(true, slurm("idle", &flags, "slurm-dws: repair UNRECOVERABLE_GPU_ERROR: xid 79"));
        w.o.vms.as_mut().unwrap().get_mut("hpc-a-1").unwrap().status = vm_status.into();
        w.d.repairs.insert("hpc-a-1".into(), repair("hpc-a-1", phase, outcome));
        let p = w.plan();
        let case = format!("{phase} {outcome:?} {vm_status} {flags:?}");
        assert_eq!(has_update(&p, "hpc-a-1", "undrain"), lifted, "{case}");
        let done = repair_after(&p, "hpc-a-1").is_some_and(|r| r.phase == RepairPhase::Repaired);
        assert_eq!(done, lifted, "{case}");
        assert_eq!(p.events.iter().any(|e| e.kind == EventKind::Repaired), lifted, "{case}");
        assert!(p.gce.is_empty(), "{case}: nothing sent again");
    }
    let mut w = world(true, slurm("idle", &["DRAIN"], "repair xid 79"));
    w.d.repairs.insert("hpc-a-1".into(), repair("hpc-a-1", RepairPhase::Failed, Some("GCE refused")));
    let p = w.plan();
    assert!(p.repairs.is_empty() && p.gce.is_empty() && !has_update(&p, "hpc-a-1", "undrain"));
}

/// The VM started again under a node Slurm kept in service: its slurmd's registration is an
/// unexpected reboot, and Slurm sets the node DOWN (keeping the drain's reason). A dynamic node is
/// resumed (DOWN and drain lifted at once) and the repair ends; a static node's DOWN waits for the
/// node rule; a DOWN node not responding yet waits.
#[test]
fn a_node_slurm_set_down_for_the_restart_is_resumed() {
    let reported = format!("{HOST_REPORTED} (UNRECOVERABLE_GPU_ERROR)");
    for (phase, outcome, is_static, flags, resumed) in [
        (RepairPhase::Reporting, Some(reported.as_str()), false, vec!["DRAIN"], true),
        (RepairPhase::Replacing, None, false, vec!["DRAIN"], true),
        (RepairPhase::Replacing, None, false, vec!["DRAIN", "NOT_RESPONDING"], false),
        (RepairPhase::Reporting, Some(reported.as_str()), true, vec!["DRAIN"], false),
    ] {
        let mut w = world(true, slurm("down", &flags, "repair UNRECOVERABLE_GPU_ERROR xid 79"));
        w.d.nodes.get_mut("hpc-a-1").unwrap().is_static = is_static;
        w.d.repairs.insert("hpc-a-1".into(), repair("hpc-a-1", phase, outcome));
        let p = w.plan();
        let case = format!("{phase} static={is_static} {flags:?}");
        assert_eq!(has_update(&p, "hpc-a-1", "resume"), resumed, "{case}");
        assert!(!has_update(&p, "hpc-a-1", "undrain"), "{case}: resume lifts the drain too");
        let done = repair_after(&p, "hpc-a-1").is_some_and(|r| r.phase == RepairPhase::Repaired);
        assert_eq!(done, resumed, "{case}");
        assert_eq!(p.events.iter().any(|e| e.kind == EventKind::Repaired), resumed, "{case}");
        assert!(
            !p.gce.iter().any(|g| matches!(g, GceStep::ReportHostAsFaulty { .. })),
            "{case}: no report again"
        );
    }
}

/// slurmd registered again just after a repair resumed its node, with a boot time past the node's
/// last answer: Slurm set it DOWN "Node unexpectedly rebooted". Within REBOOT_SETTLE_SECS of the
/// repair's end, a responding dynamic node whose VM runs is resumed again (one `repaired` event
/// saying why); later, or another reason, or a static node, or not responding: left alone.
#[test]
fn a_node_slurm_set_down_for_a_reboot_just_after_its_repair_is_resumed_again() {
    use crate::reconcile::plan::{REBOOT_SETTLE_SECS, UNEXPECTED_REBOOT};
    let settle = REBOOT_SETTLE_SECS;
    for (ended_ago, reason, is_static, flags, resumed) in [
        (5, UNEXPECTED_REBOOT, false, vec![], true),
        (settle - 1, UNEXPECTED_REBOOT, false, vec![], true),
        (settle + 1, UNEXPECTED_REBOOT, false, vec![], false),
        (5, "an admin's reason", false, vec![], false),
        (5, UNEXPECTED_REBOOT, true, vec![], false),
        (5, UNEXPECTED_REBOOT, false, vec!["NOT_RESPONDING"], false),
    ] {
        let mut w = world(true, slurm("down", &flags, reason));
        w.d.nodes.get_mut("hpc-a-1").unwrap().is_static = is_static;
        let mut r = repair("hpc-a-1", RepairPhase::Repaired, Some("its VM runs again on another host"));
        r.updated_at = t0() - Duration::seconds(ended_ago);
        w.d.repairs.insert("hpc-a-1".into(), r);
        let p = w.plan();
        let case = format!("ended {ended_ago}s ago, {reason:?}, static={is_static} {flags:?}");
        assert_eq!(has_update(&p, "hpc-a-1", "resume"), resumed, "{case}");
        let said = p.events.iter().filter(|e| e.kind == EventKind::Repaired).collect::<Vec<_>>();
        assert_eq!(said.len(), usize::from(resumed), "{case}");
        assert!(said.iter().all(|e| e.message.contains(UNEXPECTED_REBOOT)), "{case}: {said:?}");
        assert!(
            !p.gce.iter().any(|g| matches!(g, GceStep::ReportHostAsFaulty { .. })),
            "{case}: no report again"
        );
    }
}

/// A VM whose host is being reported may show a stopped status meanwhile: it is not failed.
#[test]
fn a_vm_whose_host_is_reported_is_not_replaced_as_failed() {
    let mut w = world(true, slurm("idle", &["DRAIN"], "slurm-dws: repair PERFORMANCE"));
    w.o.vms.as_mut().unwrap().get_mut("hpc-a-1").unwrap().status = "TERMINATED".into();
    w.d.repairs.insert("hpc-a-1".into(), repair("hpc-a-1", RepairPhase::Reporting, None));
    let p = w.plan();
    assert!(p.gce.is_empty(), "{:?}", p.gce);
    assert!(!p.events.iter().any(|e| e.kind == EventKind::VmFailed));
}
