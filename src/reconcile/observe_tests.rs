//! What a pass asks GCE and Slurm, decided from the desired state and the inbox (no I/O here).

use super::*;
use crate::model::*;
use crate::reconcile::plan::new_node;
use chrono::TimeZone;

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 23, 12, 0, 0).unwrap()
}

fn request(id: i64, phase: RequestPhase) -> Request {
    Request {
        id,
        nodeset: "a".into(),
        job_id: Some(7),
        tag: format!("0000000{id}"),
        mig: format!("hpc-a-j7-0000000{id}"),
        name: format!("rr-0000000{id}"),
        nodes: vec![format!("hpc-a-{id}")],
        run_duration: 600,
        phase,
        gce_state: None,
        created_at: t0(),
        updated_at: t0(),
        last_error: None,
        zone_choice: None,
        zone: None,
    }
}

fn owned(name: &str, tag: &str) -> ObservedMig {
    ObservedMig {
        workload_policy: None,
        name: name.into(),
        nodeset: "a".into(),
        tag: tag.into(),
        job_id: None,
        target_size: 1,
        created: None,
    }
}

#[test]
fn only_active_requests_and_unrecorded_migs_are_polled() {
    let mut d = Desired::default();
    for (id, phase) in [
        (1, RequestPhase::Planned),
        (2, RequestPhase::MigReady),
        (3, RequestPhase::Active),
        (4, RequestPhase::Succeeded),
        (5, RequestPhase::Failed),
    ] {
        let r = request(id, phase);
        d.migs.insert(
            r.mig.clone(),
            Mig {
                name: r.mig.clone(),
                nodeset: "a".into(),
                region: "r".into(),
                target_size: 1,
                state: MigState::Active,
                created_at: t0(),
                empty_since: None,
            },
        );
        d.requests.insert(id, r);
    }
    assert_eq!(
        requests_to_poll(&d, None),
        vec![("hpc-a-j7-00000003".to_string(), "rr-00000003".to_string())]
    );
    let listed: BTreeMap<String, ObservedMig> =
        [owned("hpc-a-j7-00000004", "00000004"), owned("hpc-a-cafe0001", "cafe0001")]
            .into_iter()
            .map(|m| (m.name.clone(), m))
            .collect();
    assert_eq!(
        requests_to_poll(&d, Some(&listed)),
        vec![
            ("hpc-a-j7-00000003".to_string(), "rr-00000003".to_string()),
            ("hpc-a-cafe0001".to_string(), "rr-cafe0001".to_string()),
        ],
        "an owned MIG not on record: its request, so that one in flight is adopted"
    );
}

#[test]
fn time_limits_are_asked_for_pending_nodes_and_resumes_about_to_be_ingested() {
    let mut d = Desired::default();
    let mut pending = new_node("hpc-a-1", "a", 1, false, t0());
    pending.state = NodeState::ResumePending;
    pending.job_id = Some(20);
    let mut up = new_node("hpc-a-2", "a", 2, false, t0());
    up.state = NodeState::Up;
    up.job_id = Some(30);
    for n in [pending, up] {
        d.nodes.insert(n.name.clone(), n);
    }
    let entry = |id, kind, jobs: Vec<(u32, &str)>| InboxEntry {
        id,
        received_at: t0(),
        kind,
        hostlist: "hpc-a-[3-4]".into(),
        jobs: jobs.into_iter().map(|(j, h)| (j, h.to_string())).collect(),
    };
    let inbox = [
        entry(1, HookKind::Resume, vec![(10, "hpc-a-3"), (20, "hpc-a-4")]),
        entry(2, HookKind::Suspend, vec![(40, "hpc-a-3")]),
    ];
    assert_eq!(jobs_waiting(&d, &inbox), vec![10, 20], "each job once; not an up node's, not a suspend's");
    assert!(jobs_waiting(&Desired::default(), &[]).is_empty());
}

#[test]
fn slurm_nodes_of_other_clusters_are_not_observed() {
    let node = |name: &str, state: &str, flags: &[&str]| NodeInfo {
        name: name.into(),
        state: state.into(),
        flags: flags.iter().map(|f| f.to_string()).collect(),
        reason: "r".into(),
        address: String::new(),
        hostname: String::new(),
        partitions: vec![],
    };
    let view = slurm_view(
        vec![
            node("hpc-a-1", "IDLE", &["POWERED_DOWN", "CLOUD"]),
            node("hpcx-a-1", "idle", &[]),
            node("login1", "idle", &[]),
        ],
        "hpc",
    );
    assert_eq!(view.keys().collect::<Vec<_>>(), ["hpc-a-1"]);
    let n = &view["hpc-a-1"];
    assert_eq!(n.state, "idle");
    assert!(n.has(SlurmFlag::PoweredDown) && n.powered_down() && !n.powering_up());
    assert_eq!(n.reason, "r");
}
