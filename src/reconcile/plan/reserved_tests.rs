//! Table tests of reserved capacity (`reserved.rs`): nodeset `gpu` consumes a reservation here
//! (`projects/p/zones/us-central1-a/reservations/res`), `a` is a Flex one.

use super::*;
use crate::config::ProvisioningModel;

const RES: &str = "projects/p/zones/us-central1-a/reservations/res";

/// `gpu` on reservation `res` of `count` VMs, `in_use` of them used, with its window.
fn reserved(count: u32, in_use: u32, start: Option<DateTime<Utc>>, end: Option<DateTime<Utc>>) -> World {
    let mut w = World::new();
    let ns = w.c.nodesets.get_mut("gpu").unwrap();
    ns.model = ProvisioningModel::Reservation;
    ns.reservation = Some(RES.into());
    w.o.capacity.insert(
        "gpu".into(),
        ObservedCapacity {
            reservation: Some(RES.into()),
            count,
            in_use,
            window_start: start,
            window_end: end,
            unusable: None,
        },
    );
    w
}

fn resumed(name: &str, job: u32) -> Node {
    let mut n = node(name, NodeState::ResumePending);
    n.job_id = Some(job);
    n
}

fn holds(p: &Plan) -> Vec<(String, String, DateTime<Utc>)> {
    p.slurm
        .iter()
        .filter_map(|s| match s {
            SlurmStep::CreateReservation { name, node, end, .. }
                if name.starts_with(reserved::WINDOW_PREFIX) =>
            {
                Some((name.clone(), node.clone(), *end))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn before_the_window_the_nodes_are_held_until_it_opens_and_a_resume_is_answered() {
    let start = t0() + Duration::hours(2);
    let w = reserved(4, 0, Some(start), Some(start + Duration::days(3))).node(resumed("hpc-gpu-0", 7));
    let p = w.plan();
    // No group, no GCE write: the node is answered and its job may start at the window's start.
    assert!(p.new_groups.is_empty() && p.gce.is_empty(), "{:?} {:?}", p.new_groups, p.gce);
    assert!(has_update(&p, "hpc-gpu-0", "power_down_force"));
    assert!(p.events.iter().any(|e| e.kind == EventKind::WindowClosed && e.message.contains(RES)));
    assert!(p
        .slurm
        .iter()
        .any(|s| matches!(s, SlurmStep::SetJobsBegin { jobs, begin } if jobs == &[7] && *begin == start)));
    // Every node of the nodeset is held until the start, under a name that carries it.
    let hold = reserved::window_hold("gpu", start);
    let h = holds(&p);
    assert_eq!(h.len(), 1, "{h:?}");
    assert_eq!((h[0].0.as_str(), h[0].2), (hold.as_str(), start));
    assert!(h[0].1.starts_with("hpc-gpu-["), "{}", h[0].1);
    // Made already: not again. Moved by GCE: the old hold goes and a new one comes.
    let mut w2 = reserved(4, 0, Some(start), Some(start + Duration::days(3)));
    w2.o.reservations.as_mut().unwrap().insert(hold.clone());
    assert!(holds(&w2.plan()).is_empty());
    let later = start + Duration::hours(1);
    w2.o.capacity.get_mut("gpu").unwrap().window_start = Some(later);
    let p = w2.plan();
    assert_eq!(holds(&p)[0].0, reserved::window_hold("gpu", later));
    assert!(p.slurm.contains(&SlurmStep::DeleteReservation { name: hold.clone() }));
    // Open: the hold goes (Slurm also ends it by itself at its end time) and a resume is grouped.
    let mut w3 = reserved(4, 0, Some(t0() - Duration::minutes(1)), None).node(resumed("hpc-gpu-0", 7));
    w3.o.reservations.as_mut().unwrap().insert(hold.clone());
    let p = w3.plan();
    assert!(p.slurm.contains(&SlurmStep::DeleteReservation { name: hold }));
    assert_eq!(p.new_groups.len(), 1);
    assert_eq!(p.new_groups[0].run_duration, 0, "reserved VMs run until the window ends");
    assert!(holds(&p).is_empty());
}

#[test]
fn a_group_larger_than_the_reservation_fails_at_once_and_one_that_fits_waits_whole_in_gce() {
    // 4 VMs, 2 used elsewhere: a group of 2 and a group of 4 are both asked of GCE (it queues the
    // 4 whole); a group of 6 can never fit.
    for (size, asked) in [(2, true), (4, true), (6, false)] {
        let mut w = reserved(4, 2, None, None);
        w.c.naming = Naming::with_nodesets("hpc", [("a", 0, 4), ("b", 0, 4), ("gpu", 0, 8), ("gpu2", 0, 4)]);
        for i in 0..size {
            w = w.node(resumed(&format!("hpc-gpu-{i}"), 9));
        }
        let p = w.plan();
        assert_eq!(p.new_groups.len(), usize::from(asked), "size {size}");
        if asked {
            assert_eq!(p.new_groups[0].nodes.len(), size);
        } else {
            let e = p.events.iter().find(|e| e.kind == EventKind::ReservationTooSmall).expect("an event");
            assert!(e.message.contains("holds 4 VMs") && e.message.contains(RES), "{}", e.message);
            assert_eq!(e.nodes.len(), 6);
            assert!(has_update(&p, "hpc-gpu-5", "power_down_force"), "the job is requeued");
            assert_eq!(node_after(&p, "hpc-gpu-0").map(|n| n.state), Some(NodeState::PoweredDown));
        }
    }
}

#[test]
fn an_unusable_reservation_refuses_the_nodeset_and_an_unread_one_decides_nothing() {
    let mut w = reserved(4, 0, None, None).node(resumed("hpc-gpu-0", 7));
    w.o.capacity.get_mut("gpu").unwrap().unusable = Some("GCE has no reservation res (404)".into());
    let p = w.plan();
    assert!(p.new_groups.is_empty());
    let e = p.events.iter().find(|e| e.kind == EventKind::NodesetRefused).expect("refused");
    assert!(
        e.message.contains("GCE has no reservation res (404)") && e.message.contains(RES),
        "{}",
        e.message
    );
    // Not read this pass: the group goes to GCE, which decides.
    let mut w = reserved(4, 0, None, None).node(resumed("hpc-gpu-0", 7));
    w.o.capacity.clear();
    assert_eq!(w.plan().new_groups.len(), 1);
}

#[test]
fn an_up_reserved_node_ends_with_its_window_and_leaves_service_when_it_ends() {
    let end = t0() + Duration::hours(5);
    let mut up = node("hpc-gpu-0", NodeState::Up);
    up.vm_status = Some(VmStatus::Running);
    up.mig = Some("m1".into());
    up.job_id = Some(7);
    let running = ObservedVm { termination: None, ..vm("hpc-gpu-0", "m1") };
    let p = reserved(4, 1, None, Some(end)).node(up.clone()).vm(running.clone()).plan();
    // Its termination is the window's end, and jobs that would outlive end − eol_grace stay off it.
    assert_eq!(node_after(&p, "hpc-gpu-0").and_then(|n| n.termination_time), Some(end));
    assert!(p.slurm.iter().any(|s| matches!(s, SlurmStep::CreateReservation { node, start, .. }
        if node == "hpc-gpu-0" && *start == end - Duration::seconds(600))));
    // GCE deleted the VM at the end: the node leaves service, with the window's words.
    let mut gone = up;
    gone.termination_time = Some(t0() - Duration::minutes(1));
    gone.state_since = t0() - Duration::hours(1);
    let p = reserved(4, 0, None, Some(t0() - Duration::minutes(1))).node(gone).plan();
    let e = p.events.iter().find(|e| e.kind == EventKind::WindowEnded).expect("window_ended");
    assert!(e.message.contains("the reservation's window ended"), "{}", e.message);
    // A resume after the end is answered at once, and no job is told to start again.
    let p = reserved(4, 0, None, Some(t0() - Duration::minutes(1))).node(resumed("hpc-gpu-1", 8)).plan();
    assert!(p.new_groups.is_empty());
    assert!(p.events.iter().any(|e| e.kind == EventKind::WindowClosed && e.message.contains("ended")));
    assert!(!p.slurm.iter().any(|s| matches!(s, SlurmStep::SetJobsBegin { .. })));
}

#[test]
fn a_static_reserved_node_waits_for_the_window_quietly() {
    let start = t0() + Duration::hours(1);
    let mut w = reserved(4, 0, Some(start), None);
    w.c.naming = Naming::with_nodesets("hpc", [("a", 0, 4), ("b", 0, 4), ("gpu", 2, 2), ("gpu2", 0, 4)]);
    let mut n = node("hpc-gpu-0", NodeState::ResumePending);
    n.is_static = true;
    let p = w.node(n.clone()).plan();
    assert!(p.new_groups.is_empty() && p.gce.is_empty());
    assert!(!has_update(&p, "hpc-gpu-0", "power_down_force"));
    assert!(p.events.iter().all(|e| e.kind != EventKind::WindowClosed), "{:?}", p.events);
    // Slurm has it in service (it resumes static nodes at start): DOWN with our reason, once, so
    // Slurm does not wait ResumeTimeout on it and the node rules resume it when its VM runs.
    let mut w = reserved(4, 0, Some(start), None);
    w.c.naming = Naming::with_nodesets("hpc", [("a", 0, 4), ("b", 0, 4), ("gpu", 2, 2), ("gpu2", 0, 4)]);
    let p = w.node(n.clone()).slurm("hpc-gpu-0", slurm("idle", &["CLOUD", "POWERING_UP"], "")).plan();
    assert!(has_update(&p, "hpc-gpu-0", "down"), "{:?}", p.slurm);
    assert!(p
        .events
        .iter()
        .any(|e| e.kind == EventKind::WindowClosed && e.message.starts_with("static node set DOWN")));
    let mut w = reserved(4, 0, Some(start), None);
    w.c.naming = Naming::with_nodesets("hpc", [("a", 0, 4), ("b", 0, 4), ("gpu", 2, 2), ("gpu2", 0, 4)]);
    let p = w.node(n).slurm("hpc-gpu-0", slurm("down", &["CLOUD"], "slurm-dws: the window ...")).plan();
    assert!(!has_update(&p, "hpc-gpu-0", "down"));
    assert!(p.events.iter().all(|e| e.kind != EventKind::WindowClosed), "{:?}", p.events);
    assert!(node_after(&p, "hpc-gpu-0")
        .and_then(|n| n.last_error.clone())
        .is_some_and(|e| e.contains("opens at")));
}

#[test]
fn an_open_window_with_an_end_holds_every_node_over_its_last_eol_grace() {
    // Up or powered down, no node of the nodeset takes a job that would outlive the window: a
    // powered-down node has no VM (no end-of-life reservation of its own) until Slurm resumes it.
    let end = t0() + Duration::hours(2);
    let p = reserved(4, 0, Some(t0() - Duration::hours(1)), Some(end)).plan();
    let hold = reserved::window_end_hold("gpu", end);
    let made: Vec<_> = p
        .slurm
        .iter()
        .filter_map(|s| match s {
            SlurmStep::CreateReservation { name, node, start, end } if *name == hold => {
                Some((node.clone(), *start, *end))
            }
            _ => None,
        })
        .collect();
    assert_eq!(made.len(), 1, "{:?}", p.slurm);
    assert!(made[0].0.starts_with("hpc-gpu-["), "every node: {}", made[0].0);
    assert_eq!((made[0].1, made[0].2), (end - Duration::seconds(600), end));
    assert!(p.events.iter().any(|e| e.kind == EventKind::WindowHold && e.message.contains(&hold)));
    // Made already: kept, not made again. Within eol_grace of the end: from a minute from now.
    let mut w = reserved(4, 0, None, Some(end));
    w.o.reservations.as_mut().unwrap().insert(hold.clone());
    let p = w.plan();
    assert!(!p.slurm.iter().any(|s| matches!(s, SlurmStep::CreateReservation { name, .. } if *name == hold)));
    assert!(!p.slurm.contains(&SlurmStep::DeleteReservation { name: hold.clone() }));
    let soon = t0() + Duration::minutes(5);
    let p = reserved(4, 0, None, Some(soon)).plan();
    assert!(p.slurm.iter().any(|s| matches!(s, SlurmStep::CreateReservation { name, start, .. }
        if *name == reserved::window_end_hold("gpu", soon) && *start == t0() + Duration::seconds(60))));
    // No end (an ordinary long reservation): no hold. Ended: the hold goes.
    assert!(holds(&reserved(4, 0, None, None).plan()).is_empty());
    let mut w = reserved(4, 0, None, Some(t0() - Duration::minutes(1)));
    w.o.reservations.as_mut().unwrap().insert(hold.clone());
    assert!(w.plan().slurm.contains(&SlurmStep::DeleteReservation { name: hold }));
}

/// A static node Slurm set "down and power_save" at ResumeTimeout before its window (its reason is
/// ours, or Slurm's) is resumed once its VM runs in the window, and powered up after that.
#[test]
fn a_static_node_down_and_powered_down_before_its_window_returns_once_its_vm_runs() {
    let mut up = node("hpc-gpu-0", NodeState::Up);
    up.is_static = true;
    up.vm_status = Some(VmStatus::Running);
    up.mig = Some("m1".into());
    up.state_since = t0() - Duration::minutes(5);
    let running = ObservedVm { termination: None, ..vm("hpc-gpu-0", "m1") };
    for (reason, flags) in [
        ("slurm-dws: the window of x opens at y", &["CLOUD", "POWERED_DOWN"][..]),
        ("ResumeTimeout reached", &["CLOUD", "POWERED_DOWN"]),
        ("slurm-dws: the window of x opens at y", &["CLOUD"]),
        // 22.05: ResumeTimeout's down~ node whose slurmd registered later: DOWN+CLOUD, no reason.
        ("", &["CLOUD"]),
    ] {
        let p = reserved(4, 1, Some(t0() - Duration::minutes(1)), Some(t0() + Duration::hours(1)))
            .node(up.clone())
            .vm(running.clone())
            .slurm("hpc-gpu-0", slurm("down", flags, reason))
            .plan();
        assert!(
            has_update(&p, "hpc-gpu-0", "resume"),
            "{reason}: {:?} {:?} {:?}",
            p.slurm,
            p.events,
            p.nodes
        );
        assert!(p.events.iter().any(|e| e.kind == EventKind::Returned), "{reason}");
        // Resumed (idle~): the drift rule powers it up.
        let p = reserved(4, 1, None, None)
            .node(up.clone())
            .vm(running.clone())
            .slurm("hpc-gpu-0", slurm("idle", &["CLOUD", "POWERED_DOWN"], ""))
            .plan();
        assert!(has_update(&p, "hpc-gpu-0", "power_up"), "{:?}", p.slurm);
    }
}
