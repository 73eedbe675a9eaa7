//! Table tests of the rules that differ for standard and spot nodesets (`standard.rs`): nodeset
//! `gpu2` is a spot nodeset here, `gpu` a standard one, `a` a Flex one.

use super::*;
use crate::config::ProvisioningModel;

fn models(mut w: World) -> World {
    w.c.nodesets.get_mut("gpu2").unwrap().model = ProvisioningModel::Spot;
    w.c.nodesets.get_mut("gpu").unwrap().model = ProvisioningModel::Standard;
    w
}

fn requested(name: &str, rid: i64) -> Node {
    let mut n = node(name, NodeState::Requested);
    n.request_id = Some(rid);
    n.job_id = Some(7);
    n
}

#[test]
fn a_standard_or_spot_group_creates_its_vms_by_name_and_never_a_resize_request() {
    for (nodeset, model) in [("gpu2", "spot"), ("gpu", "standard")] {
        let n0 = format!("hpc-{nodeset}-0");
        let r = request(1, &[&n0], RequestPhase::MigReady);
        let w = models(World::new())
            .node(requested(&n0, 1))
            .mig(mig(&r.mig, MigState::Active), Some(0))
            .req(r.clone());
        let p = w.plan();
        assert_eq!(p.gce, vec![GceStep::CreateInstances { request: 1, mig: r.mig.clone() }], "{model}");
        // Once the managed instances show the creation, the group follows it (no second call).
        let w = w.rr(&r.mig, "CREATING", None, false);
        let p = w.plan();
        assert!(p.gce.is_empty(), "{model}: {:?}", p.gce);
        assert_eq!(p.requests[0].phase, RequestPhase::Active, "{model}");
    }
    // A Flex group in the same state asks for a resize request.
    let r = request(2, &["hpc-a-0"], RequestPhase::MigReady);
    let w = models(World::new())
        .node(requested("hpc-a-0", 2))
        .mig(mig(&r.mig, MigState::Active), Some(0))
        .req(r.clone());
    assert_eq!(w.plan().gce, vec![GceStep::InsertResizeRequest { request: 2, mig: r.mig }]);
}

#[test]
fn new_spot_groups_have_no_run_duration() {
    let mut n = node("hpc-gpu2-0", NodeState::ResumePending);
    n.job_id = Some(7);
    let w = models(World::new()).node(n);
    let p = w.plan();
    assert_eq!(p.new_groups.len(), 1);
    assert_eq!(p.new_groups[0].run_duration, 0);
    assert!(p.events.iter().all(|e| e.kind != EventKind::RunDuration), "{:?}", p.events);
}

/// (case, observed state, error, capacity, nodes after, backoff words, MIG deleted).
type Case<'a> = (&'a str, &'a str, Option<(&'a str, &'a str)>, bool, NodeState, Option<&'a str>, bool);

#[test]
fn a_spot_group_walks_to_success_or_backs_off_on_a_stockout() {
    let r = request(1, &["hpc-gpu2-0", "hpc-gpu2-1"], RequestPhase::Active);
    let base = || {
        models(World::new())
            .node(requested("hpc-gpu2-0", 1))
            .node(requested("hpc-gpu2-1", 1))
            .mig(mig(&r.mig, MigState::Active), Some(2))
            .req(r.clone())
    };
    let table: &[Case] = &[
        ("created", "SUCCEEDED", None, false, NodeState::Up, None, false),
        (
            "stockout",
            "FAILED",
            Some(("ZONE_RESOURCE_POOL_EXHAUSTED", "hpc-gpu2-1: no room")),
            true,
            NodeState::PoweredDown,
            Some("capacity backoff"),
            true,
        ),
        (
            "quota",
            "FAILED",
            Some(("QUOTA_EXCEEDED", "hpc-gpu2-0: CPUS")),
            true,
            NodeState::PoweredDown,
            Some("capacity backoff"),
            true,
        ),
        (
            "bad image",
            "FAILED",
            Some(("RESOURCE_NOT_FOUND", "hpc-gpu2-0: image")),
            false,
            NodeState::PoweredDown,
            Some("error backoff"),
            true,
        ),
    ];
    for (case, state, error, capacity, after, backoff, deleted) in table {
        let p = base().rr(&r.mig, state, *error, *capacity).plan();
        for n in ["hpc-gpu2-0", "hpc-gpu2-1"] {
            assert_eq!(node_after(&p, n).map(|x| x.state), Some(*after), "{case}: {n}");
        }
        match backoff {
            Some(words) => {
                assert_eq!(p.backoffs_set.len(), 1, "{case}");
                assert!(p.backoffs_set[0].reason.contains(words), "{case}: {}", p.backoffs_set[0].reason);
                assert_eq!(p.backoffs_set[0].nodeset, "gpu2");
                let failed = p.events.iter().find(|e| e.kind == EventKind::RequestFailed).unwrap();
                assert!(failed.message.contains("creating VMs in MIG"), "{case}: {}", failed.message);
                assert!(has_update(&p, "hpc-gpu2-0", "power_down_force"), "{case}: job requeued");
            }
            None => {
                assert!(p.backoffs_set.is_empty(), "{case}");
                let ok = p.events.iter().find(|e| e.kind == EventKind::RequestSucceeded).unwrap();
                assert!(ok.message.contains("spot VMs created in MIG"), "{case}: {}", ok.message);
            }
        }
        let mig_deleted = p.gce.iter().any(|s| matches!(s, GceStep::DeleteMig { .. }));
        assert_eq!(mig_deleted, *deleted, "{case}: {:?}", p.gce);
        assert!(
            !p.gce.iter().any(|s| matches!(s, GceStep::CancelResizeRequest { .. })),
            "{case}: nothing to cancel"
        );
    }
}

#[test]
fn suspending_a_spot_group_while_its_vms_are_created_deletes_its_mig_or_waits() {
    let r = request(1, &["hpc-gpu2-0", "hpc-gpu2-1"], RequestPhase::Active);
    let mut s0 = requested("hpc-gpu2-0", 1);
    s0.state = NodeState::Suspending;
    let mut s1 = requested("hpc-gpu2-1", 1);
    s1.state = NodeState::Suspending;
    // Every node suspended: the group ends and its MIG (with what it was creating) goes. No backoff,
    // Slurm is not told (it suspended them).
    let w = models(World::new())
        .node(s0.clone())
        .node(s1)
        .mig(mig(&r.mig, MigState::Active), Some(2))
        .req(r.clone())
        .rr(&r.mig, "CREATING", None, false);
    let p = w.plan();
    assert_eq!(
        p.gce,
        vec![GceStep::DeleteMig {
            mig: r.mig.clone(),
            reason: "cancelled: every node of the request was suspended".into()
        }]
    );
    assert_eq!(p.requests[0].phase, RequestPhase::Failed);
    assert!(p.backoffs_set.is_empty());
    assert!(p.slurm.is_empty(), "{:?}", p.slurm);
    assert_eq!(node_after(&p, "hpc-gpu2-0").map(|n| n.state), Some(NodeState::PoweredDown));
    // One node still wanted: nothing is cancelled, nothing released; its VM is deleted by URL once
    // the creation is done.
    let w = models(World::new())
        .node(s0)
        .node(requested("hpc-gpu2-1", 1))
        .mig(mig(&r.mig, MigState::Active), Some(2))
        .req(r.clone())
        .rr(&r.mig, "CREATING", None, false);
    let p = w.plan();
    assert!(p.gce.is_empty(), "{:?}", p.gce);
    assert!(p.events.iter().all(|e| e.kind != EventKind::RequestReleasing));
}

#[test]
fn a_spot_group_past_queue_timeout_fails_without_a_backoff() {
    let mut w = models(World::new());
    w.c.nodesets.get_mut("gpu2").unwrap().queue_timeout = 60;
    let r = request(1, &["hpc-gpu2-0"], RequestPhase::Active);
    let p = w
        .node(requested("hpc-gpu2-0", 1))
        .mig(mig(&r.mig, MigState::Active), Some(1))
        .req(r.clone())
        .rr(&r.mig, "CREATING", None, false)
        .plan();
    assert_eq!(p.requests[0].phase, RequestPhase::Failed);
    assert!(p.requests[0].last_error.as_deref().unwrap().contains("queue_timeout"));
    assert!(p.backoffs_set.is_empty());
    assert!(p.gce.iter().any(|s| matches!(s, GceStep::DeleteMig { .. })));
    assert!(has_update(&p, "hpc-gpu2-0", "power_down_force"), "the job is requeued");
}

#[test]
fn a_spot_vm_that_stops_or_vanishes_was_preempted() {
    let up = |name: &str| {
        let mut n = node(name, NodeState::Up);
        n.mig = Some("hpc-gpu2-j7-t0000001".into());
        n.vm_status = Some("RUNNING".into());
        n.job_id = Some(7);
        n
    };
    let in_service = slurm("allocated", &[], "");
    // (case, node, VM status or gone, event)
    let table: &[(&str, &str, Option<&str>, EventKind)] = &[
        ("spot VM TERMINATED", "hpc-gpu2-0", Some("TERMINATED"), EventKind::Preempted),
        ("spot VM deleted by GCE", "hpc-gpu2-0", None, EventKind::Preempted),
        ("standard VM TERMINATED", "hpc-gpu-0", Some("TERMINATED"), EventKind::VmFailed),
        ("standard VM gone", "hpc-gpu-0", None, EventKind::VmLost),
        ("flex VM gone early", "hpc-a-0", None, EventKind::VmLost),
    ];
    for (case, name, status, kind) in table {
        let mut n = up(name);
        n.termination_time = None;
        let mut w = models(World::new()).node(n).slurm(name, in_service.clone());
        if let Some(st) = status {
            let mut v = vm(name, "hpc-gpu2-j7-t0000001");
            v.status = (*st).into();
            v.termination = None;
            w = w.vm(v).mig(mig("hpc-gpu2-j7-t0000001", MigState::Active), Some(1));
        }
        let p = w.plan();
        let ev: Vec<_> = p.events.iter().filter(|e| e.nodes.contains(&name.to_string())).collect();
        assert!(ev.iter().any(|e| e.kind == *kind), "{case}: {ev:?}");
        if *kind == EventKind::Preempted {
            assert!(ev.iter().any(|e| e.message.contains("preempted")), "{case}: {ev:?}");
        }
        // Out of service in this pass: DOWN (the job is requeued once), then powered down.
        assert!(has_update(&p, name, "down"), "{case}: {:?}", p.slurm);
        assert!(has_update(&p, name, "power_down_force"), "{case}: {:?}", p.slurm);
        if status.is_some() {
            assert!(
                p.gce.iter().any(|s| matches!(s, GceStep::DeleteInstances { .. })),
                "{case}: the VM is deleted"
            );
        }
    }
}

/// Every provisioning model, every way a VM disappears: once the node's VM is gone and nothing
/// holds the MIG any more, the MIG is empty even though its targetSize still counts the member.
#[test]
fn a_mig_left_with_a_member_and_no_vm_is_empty_for_every_model() {
    for nodeset in ["a", "gpu", "gpu2"] {
        let name = format!("hpc-{nodeset}-1");
        let mut r = request(1, &[&name], RequestPhase::Succeeded);
        r.nodeset = nodeset.into();
        let mut n = node(&name, NodeState::Up);
        n.request_id = Some(1);
        n.mig = Some(r.mig.clone());
        n.vm_status = Some("RUNNING".into());
        n.state_since = t0() - Duration::minutes(10);
        n.termination_time = None;
        let mut m = mig(&r.mig, MigState::Active);
        m.nodeset = nodeset.into();
        m.target_size = 1;
        // The VM vanished (preempted, deleted by GCE): the node leaves; the MIG keeps its size.
        let w = models(World::new()).node(n).req(r.clone()).mig(m, Some(1));
        let p = w.plan();
        let after = node_after(&p, &name).expect("node changed");
        assert_eq!(after.state, NodeState::PoweredDown, "{nodeset}");
        let mig_after = p.migs.iter().find(|x| x.name == r.mig).expect("mig changed");
        assert_eq!(mig_after.empty_since, Some(t0()), "{nodeset}: empty in the same pass");
    }
}
