//! Commit, on a real store in a temporary directory and without GCE: whatever a change set does to
//! the kept desired state is exactly what the store holds afterwards.

use super::*;
use crate::reconcile::ingest::ingest;
use chrono::{Duration, TimeZone};

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 23, 12, 0, 0).unwrap()
}

fn config() -> Config {
    let text = r#"
cluster_name = "hpc"
[gcp]
project = "p"
region = "us-central1"
[[nodeset]]
name = "a"
instance_template = "projects/p/global/instanceTemplates/t"
zones = ["us-central1-a"]
node_count_static = 1
node_count_dynamic_max = 9
"#;
    Config::from_toml_str(text, std::path::Path::new("t.toml")).unwrap()
}

async fn store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).await.unwrap();
    (dir, store)
}

fn node(name: &str, index: u32, state: NodeState) -> Node {
    let mut n = new_node(name, "a", index, index == 0, t0() - Duration::hours(1));
    n.state = state;
    n
}

fn mig(name: &str, state: MigState) -> Mig {
    Mig {
        name: name.into(),
        nodeset: "a".into(),
        region: "us-central1".into(),
        target_size: 1,
        state,
        created_at: t0() - Duration::hours(1),
        empty_since: None,
    }
}

/// A store with two up nodes of one request group and its MIG, a backoff, and the desired state read
/// back from it.
async fn seeded(store: &Store) -> Desired {
    let mut tx = store.begin().await.unwrap();
    let nodes = ["hpc-a-1".to_string(), "hpc-a-2".to_string()];
    let mut r = tx
        .insert_request("a", Some(7), "0a1b2c3d", "hpc-a-j7-0a1b2c3d", "rr-0a1b2c3d", &nodes, 600, t0())
        .await
        .unwrap();
    r.phase = RequestPhase::Succeeded;
    r.gce_state = Some(GceRequestState::Succeeded);
    tx.update_request(&r).await.unwrap();
    let mut up = vec![node("hpc-a-1", 1, NodeState::Up), node("hpc-a-2", 2, NodeState::Up)];
    for n in &mut up {
        n.request_id = Some(r.id);
        n.mig = Some(r.mig.clone());
        n.vm_status = Some(VmStatus::Running);
    }
    tx.upsert_nodes(&up).await.unwrap();
    tx.upsert_mig(&mig("hpc-a-j7-0a1b2c3d", MigState::Active)).await.unwrap();
    tx.set_backoff(&Backoff {
        nodeset: "a".into(),
        until: t0(),
        level: 0,
        reason: "stockout".into(),
        ended: false,
    })
    .await
    .unwrap();
    tx.commit().await.unwrap();
    read_desired(store).await.unwrap()
}

async fn assert_kept_is_stored(kept: &Desired, store: &Store) {
    let stored = read_desired(store).await.unwrap();
    assert_eq!(first_difference(kept, &stored), None);
}

#[tokio::test]
async fn a_committed_change_set_is_what_the_store_holds() {
    let (_dir, store) = store().await;
    let mut desired = seeded(&store).await;
    let r = desired.requests.values().next().unwrap().clone();
    let mut gone = desired.nodes["hpc-a-1"].clone();
    gone.state = NodeState::PoweredDown;
    gone.vm_status = None;
    gone.state_since = t0();
    let mut done = r.clone();
    done.phase = RequestPhase::Done;
    let changes = ChangeSet {
        nodes: vec![gone, node("hpc-a-5", 5, NodeState::ResumePending)],
        requests: vec![done],
        migs: vec![mig("hpc-a-j7-0a1b2c3d", MigState::Deleted), mig("hpc-a-cafe0001", MigState::Creating)],
        backoffs_set: vec![Backoff {
            nodeset: "b".into(),
            until: t0(),
            level: 1,
            reason: "quota".into(),
            ended: false,
        }],
        backoffs_cleared: vec!["a".into()],
        events: vec![NewEvent {
            kind: EventKind::Expired,
            nodes: vec!["hpc-a-1".into()],
            message: "gone".into(),
        }],
        repairs: vec![Repair {
            node: "hpc-a-5".into(),
            behavior: FaultBehavior::SilentDataCorruption,
            description: "bad sums".into(),
            source: "cli".into(),
            phase: RepairPhase::Replacing,
            requested_at: t0(),
            updated_at: t0(),
            outcome: Some("VM replaced".into()),
        }],
        repair_asks_taken: vec![],
    };
    let mut tx = store.begin().await.unwrap();
    commit(&mut tx, changes, &mut desired, t0()).await.unwrap();
    tx.commit().await.unwrap();
    assert_kept_is_stored(&desired, &store).await;
    assert!(desired.requests.is_empty(), "a done group leaves the kept state");
    assert_eq!(desired.migs.keys().collect::<Vec<_>>(), ["hpc-a-cafe0001"], "a deleted MIG too");
    assert_eq!(desired.backoffs.keys().collect::<Vec<_>>(), ["b"]);
    assert_eq!(desired.repairs["hpc-a-5"].phase, RepairPhase::Replacing, "kept, and stored the same");
    assert_eq!(desired.nodes["hpc-a-1"].state, NodeState::PoweredDown);
    let events = store.events(None, None, 10).await.unwrap();
    assert_eq!(
        events.iter().map(|e| (e.kind.as_str(), e.nodes.as_str())).collect::<Vec<_>>(),
        [("expired", "hpc-a-1")]
    );
}

fn group(nodeset: &str, job: Option<u32>, nodes: &[&str]) -> NewGroup {
    NewGroup {
        nodeset: nodeset.into(),
        job_id: job,
        nodes: nodes.iter().map(|n| n.to_string()).collect(),
        run_duration: 3600,
    }
}

#[tokio::test]
async fn a_round_is_written_once_and_kept_as_written() {
    let (_dir, store) = store().await;
    let cfg = config();
    let plan_cfg = PlanConfig::new(&cfg);
    let ctx = RoundContext { cfg: &cfg, plan_cfg: &plan_cfg };
    let mut desired = seeded(&store).await;
    let mut pending =
        vec![node("hpc-a-3", 3, NodeState::ResumePending), node("hpc-a-4", 4, NodeState::ResumePending)];
    pending[0].job_id = Some(9);
    let mut tx = store.begin().await.unwrap();
    tx.upsert_nodes(&pending).await.unwrap();
    tx.commit().await.unwrap();
    desired.nodes.extend(pending.into_iter().map(|n| (n.name.clone(), n)));
    let old = desired.requests.values().next().unwrap().clone();

    let mut p = Plan::default();
    // A node only this round knows (the static node, seeded by the planner) goes into a new group.
    p.nodes.push(node("hpc-a-0", 0, NodeState::ResumePending));
    let mut succeeded = old.clone();
    succeeded.last_error = Some("checked".into());
    p.requests.push(succeeded);
    p.new_groups = vec![group("a", Some(9), &["hpc-a-3"]), group("a", None, &["hpc-a-0", "hpc-a-4"])];
    p.adopted_requests.push(AdoptedRequest {
        nodeset: "a".into(),
        job_id: Some(4),
        tag: "cafe0001".into(),
        mig: "hpc-a-j4-cafe0001".into(),
        name: "rr-cafe0001".into(),
        nodes: vec!["hpc-a-6".into(), "hpc-a-2".into(), "other-1".into()],
        run_duration: 4200,
        gce_state: GceRequestState::Accepted,
    });
    p.event(EventKind::Drift, vec!["hpc-a-0".into()], "seeded");
    let steps = vec![
        GceStep::CancelResizeRequest { request: old.id, mig: old.mig.clone() },
        GceStep::DeleteMig { mig: "hpc-a-j1-00000000".into(), reason: "empty".into() },
    ];
    let entries = commit_round(&store, &ctx, &mut p.clone(), &steps, &mut desired, t0()).await.unwrap();
    assert_kept_is_stored(&desired, &store).await;
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[0].target, format!("{}/{}", old.mig, old.name));
    assert_eq!(desired.requests[&old.id].last_error.as_deref(), Some("checked"));

    // Each new group: a fresh tag, its MIG being created, its nodes requested.
    let new: Vec<&Request> =
        desired.requests.values().filter(|r| r.id != old.id && r.tag != "cafe0001").collect();
    assert_eq!(new.len(), 2);
    assert_ne!(new[0].tag, new[1].tag);
    for r in &new {
        assert_eq!(r.phase, RequestPhase::Planned);
        assert_eq!(desired.migs[&r.mig].state, MigState::Creating);
        assert_eq!(r.mig, plan_cfg.naming.mig_name("a", r.job_id, &r.tag));
        for n in &r.nodes {
            let n = &desired.nodes[n];
            assert_eq!(
                (n.state, n.request_id, n.mig.as_deref(), n.job_id),
                (NodeState::Requested, Some(r.id), Some(r.mig.as_str()), r.job_id)
            );
        }
    }
    assert_eq!(desired.nodes["hpc-a-0"].request_id, new.iter().find(|r| r.job_id.is_none()).map(|r| r.id));
    // The adopted request: followed (active) with GCE's state; its nodes of ours requested, a node
    // not on record made, one of another cluster left out.
    let adopted = desired.requests.values().find(|r| r.tag == "cafe0001").unwrap();
    assert_eq!(
        (adopted.phase, adopted.gce_state.clone()),
        (RequestPhase::Active, Some(GceRequestState::Accepted))
    );
    assert_eq!(desired.nodes["hpc-a-6"].request_id, Some(adopted.id));
    assert_eq!(desired.nodes["hpc-a-2"].request_id, Some(adopted.id));
    assert!(!desired.nodes.contains_key("other-1"));

    let kinds: Vec<String> =
        store.events(None, None, 10).await.unwrap().into_iter().map(|e| e.kind).collect();
    assert_eq!(kinds, ["drift", "request_planned", "request_planned", "adopted"]);

    // The same steps in a later round reuse their pending outbox entries (and requestIds).
    let again = commit_round(&store, &ctx, &mut Plan::default(), &steps, &mut desired, t0()).await.unwrap();
    assert_eq!(
        again.iter().map(|e| &e.request_id).collect::<Vec<_>>(),
        entries.iter().map(|e| &e.request_id).collect::<Vec<_>>()
    );
    assert_kept_is_stored(&desired, &store).await;
}

#[tokio::test]
async fn ingested_hook_calls_are_committed_with_their_events() {
    let (_dir, store) = store().await;
    let cfg = config();
    let plan_cfg = PlanConfig::new(&cfg);
    let mut desired = seeded(&store).await;
    store
        .record_hook(HookKind::Resume, "hpc-a-[3-4],other-1", &[(5, "hpc-a-[3-4]".into())], None, t0())
        .await
        .unwrap();
    store.record_hook(HookKind::Suspend, "hpc-a-1", &[], None, t0()).await.unwrap();
    let inbox = store.unprocessed_inbox().await.unwrap();
    let mut ing = ingest(&plan_cfg, &desired.nodes, &inbox, t0());
    commit_ingest(&store, &mut ing, &mut desired, t0()).await.unwrap();
    assert_kept_is_stored(&desired, &store).await;
    assert!(store.unprocessed_inbox().await.unwrap().is_empty());
    assert_eq!(desired.nodes["hpc-a-3"].state, NodeState::ResumePending);
    assert_eq!(desired.nodes["hpc-a-3"].job_id, Some(5));
    assert_eq!(desired.nodes["hpc-a-1"].state, NodeState::Suspending);
    let events = store.events(None, None, 10).await.unwrap();
    let kinds: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(kinds, ["resume", "suspend", "not_ours"]);
    assert_eq!(events[2].message, "other-1 is not a node of cluster hpc: set DOWN in Slurm");
    assert_eq!(ing.not_ours.iter().map(|n| n.node()).collect::<Vec<_>>(), ["other-1"]);
}

#[tokio::test]
async fn outbox_entries_no_pass_used_are_abandoned_with_an_event() {
    let (_dir, store) = store().await;
    let mut desired = seeded(&store).await;
    let mut tx = store.begin().await.unwrap();
    let used = tx.outbox_intent(MutationKind::MigDelete, "m1", &serde_json::json!({}), t0()).await.unwrap();
    tx.outbox_intent(MutationKind::MigDelete, "m2", &serde_json::json!({}), t0()).await.unwrap();
    tx.commit().await.unwrap();
    let n = abandon_unused_outbox(&store, &HashSet::from([used.id]), &mut desired, t0()).await.unwrap();
    assert_eq!(n, 1);
    let pending = store.pending_outbox().await.unwrap();
    assert_eq!(pending.iter().map(|e| e.target.as_str()).collect::<Vec<_>>(), ["m1"]);
    let events = store.events(None, None, 10).await.unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].kind, "outbox_abandoned");
    assert!(events[0].message.starts_with("mig_delete m2 (requestId "), "{}", events[0].message);
    assert_eq!(
        abandon_unused_outbox(&store, &HashSet::from([used.id]), &mut desired, t0()).await.unwrap(),
        0
    );
    assert_kept_is_stored(&desired, &store).await;
}

#[test]
fn merged_change_sets_keep_one_record_each_the_later_winning() {
    let mut a = ChangeSet {
        nodes: vec![node("hpc-a-1", 1, NodeState::Up), node("hpc-a-2", 2, NodeState::Up)],
        events: vec![NewEvent { kind: EventKind::Drift, nodes: vec![], message: "1".into() }],
        ..ChangeSet::default()
    };
    a.merge(ChangeSet {
        nodes: vec![node("hpc-a-1", 1, NodeState::Suspending)],
        events: vec![NewEvent { kind: EventKind::Drift, nodes: vec![], message: "2".into() }],
        ..ChangeSet::default()
    });
    let states: Vec<(&str, NodeState)> = a.nodes.iter().map(|n| (n.name.as_str(), n.state)).collect();
    assert_eq!(states, [("hpc-a-2", NodeState::Up), ("hpc-a-1", NodeState::Suspending)]);
    assert_eq!(a.events.len(), 2);
    assert!(!a.is_empty() && ChangeSet::default().is_empty());
}

/// A round's node records: the plan's (one per name, the last given winning, whatever their order),
/// a record copied from the kept state the first time a group names it, records added, and all of
/// them in name order at the end.
#[test]
fn round_nodes_keep_one_record_per_name_in_name_order() {
    let mut desired = Desired::default();
    for (name, i) in [("hpc-a-3", 3), ("hpc-a-9", 9)] {
        desired.nodes.insert(name.to_string(), node(name, i, NodeState::PoweredDown));
    }
    let up = |name: &str, i| node(name, i, NodeState::Up);
    let cases: [(&str, Vec<Node>); 3] = [
        ("planned in name order", vec![up("hpc-a-1", 1), up("hpc-a-5", 5)]),
        (
            "planned out of order, one name twice",
            vec![node("hpc-a-5", 5, NodeState::Suspending), up("hpc-a-1", 1), up("hpc-a-5", 5)],
        ),
        ("nothing planned", vec![]),
    ];
    for (case, planned) in cases {
        let want_planned: Vec<(String, NodeState)> = if planned.is_empty() {
            vec![]
        } else {
            vec![("hpc-a-1".into(), NodeState::Up), ("hpc-a-5".into(), NodeState::Up)]
        };
        let mut nodes = RoundNodes::new(planned);
        // Kept, not planned: copied once, then the same record is changed.
        nodes.record(&desired, "hpc-a-9").unwrap().state = NodeState::Requested;
        assert_eq!(nodes.record(&desired, "hpc-a-9").unwrap().state, NodeState::Requested, "{case}");
        // Neither planned nor kept: nothing to change, until added.
        assert!(nodes.record(&desired, "hpc-a-7").is_none(), "{case}");
        nodes.add(node("hpc-a-7", 7, NodeState::Requested));
        assert_eq!(nodes.record(&desired, "hpc-a-7").unwrap().name, "hpc-a-7", "{case}");
        let mut want = want_planned;
        want.push(("hpc-a-7".into(), NodeState::Requested));
        want.push(("hpc-a-9".into(), NodeState::Requested));
        let got: Vec<(String, NodeState)> = nodes.into_vec().into_iter().map(|n| (n.name, n.state)).collect();
        assert_eq!(got, want, "{case}");
    }
}
