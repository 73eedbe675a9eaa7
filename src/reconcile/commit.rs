//! Commit: what a round decided is written to the store in one transaction, and the desired state
//! the reconciler keeps between passes follows from the same value.
//!
//! Every change to the desired state — a round's plan, the ingested inbox, a refused insert — is
//! first made a [`ChangeSet`]. [`commit`] writes it to the store and applies it to the kept state;
//! nothing else changes either. `write` and `apply` each take the change set apart field by field
//! (a field added to one and not the other does not compile), and debug builds still read the
//! state back after every pass and compare (`Reconciler::check_kept_state`).

use super::error::ReconcileError;
use super::gce_edge;
use super::ingest::Ingested;
use super::plan::{new_node, OpenedVm, UsageChange};
use super::types::*;
use crate::config::Config;
use crate::model::*;
use crate::naming;
use crate::store::{Store, StoreError, StoreTx};
use chrono::{DateTime, Utc};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

/// Changes to the desired state and the events that explain them: full new records, each at most once.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChangeSet {
    pub nodes: Vec<Node>,
    /// Changed request groups; a group whose phase is `done` leaves the kept state.
    pub requests: Vec<Request>,
    /// Changed MIGs; a MIG whose state is `deleted` leaves the kept state.
    pub migs: Vec<Mig>,
    pub backoffs_set: Vec<Backoff>,
    /// Nodesets whose backoff ends (after `backoffs_set`, as the store applies them).
    pub backoffs_cleared: Vec<String>,
    /// Events to append (the log is not part of the kept state).
    pub events: Vec<NewEvent>,
    /// Changed repairs (`plan/repair.rs`).
    pub repairs: Vec<Repair>,
    /// Repair asks taken (marked processed; not part of the kept state).
    pub repair_asks_taken: Vec<i64>,
}

impl ChangeSet {
    pub fn is_empty(&self) -> bool {
        *self == ChangeSet::default()
    }

    /// Only events.
    pub fn events(events: Vec<NewEvent>) -> ChangeSet {
        ChangeSet { events, ..ChangeSet::default() }
    }

    /// Adds `other`'s changes after this one's (a record in both: `other`'s wins).
    pub fn merge(&mut self, other: ChangeSet) {
        let ChangeSet {
            nodes,
            requests,
            migs,
            backoffs_set,
            backoffs_cleared,
            events,
            repairs,
            repair_asks_taken,
        } = other;
        self.repairs.retain(|r| !repairs.iter().any(|o| o.node == r.node));
        self.repairs.extend(repairs);
        self.repair_asks_taken.extend(repair_asks_taken);
        self.nodes.retain(|n| !nodes.iter().any(|o| o.name == n.name));
        self.nodes.extend(nodes);
        self.requests.retain(|r| !requests.iter().any(|o| o.id == r.id));
        self.requests.extend(requests);
        self.migs.retain(|m| !migs.iter().any(|o| o.name == m.name));
        self.migs.extend(migs);
        self.backoffs_set.extend(backoffs_set);
        self.backoffs_cleared.extend(backoffs_cleared);
        self.events.extend(events);
    }

    /// Writes the change set in `tx` (events at `now`).
    async fn write(&self, tx: &mut StoreTx, now: DateTime<Utc>) -> Result<(), StoreError> {
        let ChangeSet {
            nodes,
            requests,
            migs,
            backoffs_set,
            backoffs_cleared,
            events,
            repairs,
            repair_asks_taken,
        } = self;
        for r in repairs {
            tx.upsert_repair(r).await?;
        }
        tx.mark_repair_asks_processed(repair_asks_taken, now).await?;
        tx.upsert_nodes(nodes).await?;
        for r in requests {
            tx.update_request(r).await?;
            if r.phase == RequestPhase::Succeeded {
                tx.record_wait(r, now).await?; // the first time only: how long it waited
            }
        }
        for m in migs {
            tx.upsert_mig(m).await?;
        }
        for e in events {
            tx.add_event(now, e.kind.as_str(), &e.nodes, &e.message).await?;
        }
        for b in backoffs_set {
            tx.set_backoff(b).await?;
        }
        for ns in backoffs_cleared {
            tx.clear_backoff(ns).await?;
        }
        Ok(())
    }

    /// Applies the change set to `desired` (records are moved, not copied).
    fn apply(self, desired: &mut Desired) {
        let ChangeSet {
            nodes,
            requests,
            migs,
            backoffs_set,
            backoffs_cleared,
            events: _,
            repairs,
            repair_asks_taken: _,
        } = self;
        for r in repairs {
            desired.repairs.insert(r.node.clone(), r);
        }
        for n in nodes {
            match desired.nodes.get_mut(&n.name) {
                Some(slot) => *slot = n,
                None => {
                    desired.nodes.insert(n.name.clone(), n);
                }
            }
        }
        for r in requests {
            if r.phase == RequestPhase::Done {
                desired.requests.remove(&r.id);
            } else {
                desired.requests.insert(r.id, r);
            }
        }
        for m in migs {
            if m.state == MigState::Deleted {
                desired.migs.remove(&m.name);
            } else {
                desired.migs.insert(m.name.clone(), m);
            }
        }
        for b in backoffs_set {
            desired.backoffs.insert(b.nodeset.clone(), b);
        }
        for ns in backoffs_cleared {
            desired.backoffs.remove(&ns);
        }
    }
}

/// Writes `changes` in `tx` and applies them to `desired`: the one way the kept desired state changes.
pub(super) async fn commit(
    tx: &mut StoreTx,
    changes: ChangeSet,
    desired: &mut Desired,
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    changes.write(tx, now).await?;
    changes.apply(desired);
    Ok(())
}

/// The desired state as the store holds it.
pub(super) async fn read_desired(store: &Store) -> Result<Desired, StoreError> {
    Ok(Desired {
        nodes: store.nodes().await?.into_iter().map(|n| (n.name.clone(), n)).collect(),
        requests: store.requests(true).await?.into_iter().map(|r| (r.id, r)).collect(),
        migs: store.migs(true).await?.into_iter().map(|m| (m.name.clone(), m)).collect(),
        backoffs: store.backoffs().await?.into_iter().map(|b| (b.nodeset.clone(), b)).collect(),
        repairs: store.repairs().await?.into_iter().map(|r| (r.node.clone(), r)).collect(),
    })
}

/// The first entry where two desired states differ, described; `None` when they are equal.
pub(super) fn first_difference(a: &Desired, b: &Desired) -> Option<String> {
    fn diff<K: Ord + std::fmt::Debug, V: PartialEq + std::fmt::Debug>(
        what: &str,
        a: &BTreeMap<K, V>,
        b: &BTreeMap<K, V>,
    ) -> Option<String> {
        let keys: BTreeSet<&K> = a.keys().chain(b.keys()).collect();
        keys.into_iter().find_map(|k| match (a.get(k), b.get(k)) {
            (x, y) if x == y => None,
            (x, y) => Some(format!("{what} {k:?}: kept {x:?}, stored {y:?}")),
        })
    }
    diff("node", &a.nodes, &b.nodes)
        .or_else(|| diff("request", &a.requests, &b.requests))
        .or_else(|| diff("MIG", &a.migs, &b.migs))
        .or_else(|| diff("backoff", &a.backoffs, &b.backoffs))
        .or_else(|| diff("repair", &a.repairs, &b.repairs))
}

/// Commits the inbox entries a pass ingested: the nodes' new records and the events, with the
/// entries marked processed, in one transaction.
pub(super) async fn commit_ingest(
    store: &Store,
    ing: &mut Ingested,
    desired: &mut Desired,
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    let mut events = std::mem::take(&mut ing.events);
    events.extend(ing.not_ours.iter().map(|n| NewEvent {
        kind: EventKind::NotOurs,
        nodes: vec![n.node().to_string()],
        message: format!("{n}: set DOWN in Slurm"),
    }));
    let changes = ChangeSet { nodes: std::mem::take(&mut ing.nodes), events, ..ChangeSet::default() };
    let mut tx = store.begin().await?;
    commit(&mut tx, changes, desired, now).await?;
    tx.mark_inbox_processed(&ing.processed, now).await?;
    tx.prune_inbox(now - chrono::Duration::days(1)).await?;
    tx.commit().await
}

/// What [`commit_round`] needs besides the store: the config the outbox payloads are written from,
/// and the planner's view of it (names, region).
pub(super) struct RoundContext<'a> {
    pub cfg: &'a Config,
    pub plan_cfg: &'a PlanConfig,
}

/// Writes a round's decisions in one transaction — its record changes, its new request groups (their
/// tags chosen and persisted before anything is sent to GCE, so a crash or a retry reuses the same MIG
/// name instead of making a second MIG), the requests it adopted, and the outbox intents of `steps` —
/// and applies the same changes to `desired`. Returns the outbox entries of `steps`, in order.
pub(super) async fn commit_round(
    store: &Store,
    ctx: &RoundContext<'_>,
    plan: &mut Plan,
    steps: &[GceStep],
    desired: &mut Desired,
    now: DateTime<Utc>,
) -> Result<Vec<OutboxEntry>, ReconcileError> {
    let mut tx = store.begin().await?;
    // A new group's id is the store's: its row is inserted first, then it is a record like any other.
    let mut created = Vec::with_capacity(plan.new_groups.len());
    let mut taken = HashSet::new();
    for g in &plan.new_groups {
        let tag = unused_tag(desired, &taken, g);
        taken.insert(tag.clone());
        let mig = ctx.plan_cfg.naming.mig_name(&g.nodeset, g.job_id, &tag);
        let name = naming::resize_request_name(&tag);
        created.push(
            tx.insert_request(&g.nodeset, g.job_id, &tag, &mig, &name, &g.nodes, g.run_duration, now).await?,
        );
    }
    let mut adopted = Vec::with_capacity(plan.adopted_requests.len());
    for a in &plan.adopted_requests {
        adopted.push(
            tx.insert_request(&a.nodeset, a.job_id, &a.tag, &a.mig, &a.name, &a.nodes, a.run_duration, now)
                .await?,
        );
    }
    let changes = round_changes(plan, created, adopted, desired, ctx.plan_cfg, now);
    commit(&mut tx, changes, desired, now).await?;
    let mut entries = Vec::with_capacity(steps.len());
    for s in steps {
        let (kind, target, payload) = gce_edge::intent(s, desired, ctx.cfg, &ctx.plan_cfg.naming)?;
        entries.push(tx.outbox_intent(kind, &target, &payload, now).await?);
    }
    tx.commit().await?;
    Ok(entries)
}

/// The change set of a round: the plan's changed records (taken from it, not copied), plus, for each
/// new group (`created`: its row as inserted) and each adopted request (`adopted`), the request, its
/// MIG, its nodes now `requested`, and the event that says so.
pub(super) fn round_changes(
    plan: &mut Plan,
    created: Vec<Request>,
    adopted: Vec<Request>,
    desired: &Desired,
    cfg: &PlanConfig,
    now: DateTime<Utc>,
) -> ChangeSet {
    let mut nodes = RoundNodes::new(std::mem::take(&mut plan.nodes));
    let mut requests = std::mem::take(&mut plan.requests);
    let mut migs = std::mem::take(&mut plan.migs);
    let mut events = std::mem::take(&mut plan.events);
    let request_node = |node: &mut Node, r: &Request| {
        node.state = NodeState::Requested;
        node.state_since = now;
        node.request_id = Some(r.id);
        node.mig = Some(r.mig.clone());
        node.job_id = r.job_id;
    };
    for (g, r) in plan.new_groups.iter().zip(created) {
        migs.push(Mig {
            name: r.mig.clone(),
            nodeset: g.nodeset.clone(),
            region: cfg.region_of(&g.nodeset).to_string(),
            target_size: 0,
            state: MigState::Creating,
            created_at: now,
            empty_since: None,
        });
        for n in &g.nodes {
            if let Some(node) = nodes.record(desired, n) {
                request_node(node, &r);
            }
        }
        let job = g.job_id.map(|j| format!(" for job {j}")).unwrap_or_default();
        events.push(NewEvent {
            kind: EventKind::RequestPlanned,
            nodes: g.nodes.clone(),
            // Standard and spot VMs are created by name; Flex and reserved ones come from a resize
            // request (reserved ones with no run duration: they live until the window ends).
            message: if !cfg.nodesets.get(&g.nodeset).is_none_or(|n| n.model.uses_resize_requests()) {
                format!(
                    "VMs to create by name in new MIG {}{job}: {}, no run duration",
                    r.mig,
                    count_of(g.nodes.len(), "node")
                )
            } else if g.run_duration == 0 {
                format!(
                    "resize request {} in new MIG {}{job}: {}, no run duration (the VMs end with the reservation's window)",
                    r.name,
                    r.mig,
                    count_of(g.nodes.len(), "node")
                )
            } else {
                format!(
                    "resize request {} in new MIG {}{job}: {}, run duration {}s",
                    r.name,
                    r.mig,
                    count_of(g.nodes.len(), "node"),
                    g.run_duration
                )
            },
        });
        requests.push(r);
    }
    for (a, mut r) in plan.adopted_requests.iter().zip(adopted) {
        r.phase = RequestPhase::Active;
        r.gce_state = Some(a.gce_state.clone());
        for n in &a.nodes {
            let node = match nodes.record(desired, n) {
                Some(node) => node,
                None => {
                    let Ok(at) = cfg.naming.parse(n) else { continue };
                    nodes.add(new_node(n, &at.nodeset, at.index, at.is_static, now))
                }
            };
            request_node(node, &r);
        }
        events.push(NewEvent {
            kind: EventKind::Adopted,
            nodes: a.nodes.clone(),
            message: format!(
                "resize request {} in MIG {} ({}, {} nodes) was in GCE but not on record: adopted and followed",
                a.name,
                a.mig,
                a.gce_state,
                a.nodes.len()
            ),
        });
        requests.push(r);
    }
    ChangeSet {
        nodes: nodes.into_vec(),
        requests,
        migs,
        backoffs_set: std::mem::take(&mut plan.backoffs_set),
        backoffs_cleared: std::mem::take(&mut plan.backoffs_cleared),
        events,
        repairs: std::mem::take(&mut plan.repairs),
        repair_asks_taken: std::mem::take(&mut plan.repair_asks_taken),
    }
}

/// The node records of a round's change set: the plan's changed records, one per name in name
/// order (as the planner's overlay gives them), plus the records the round's new and adopted groups
/// add. Kept in the plan's own Vec and searched in place: at 10,000 nodes a map of them beside the
/// Vec was ~2.5 MB of the daemon's peak heap (the pass that requests them all).
struct RoundNodes {
    /// Unique names, in name order.
    planned: Vec<Node>,
    /// Records added by this round, and where each is in `added`.
    added: Vec<Node>,
    added_at: HashMap<String, usize>,
}

impl RoundNodes {
    fn new(mut planned: Vec<Node>) -> RoundNodes {
        if !planned.is_sorted_by(|a, b| a.name < b.name) {
            // One record per name, the last one given (as a map built from them would keep).
            planned.reverse();
            planned.sort_by(|a, b| a.name.cmp(&b.name));
            planned.dedup_by(|later, first| later.name == first.name);
        }
        RoundNodes { planned, added: Vec::new(), added_at: HashMap::new() }
    }

    fn get_mut(&mut self, name: &str) -> Option<&mut Node> {
        match self.planned.binary_search_by(|n| n.name.as_str().cmp(name)) {
            Ok(i) => Some(&mut self.planned[i]),
            Err(_) => self.added_at.get(name).map(|&i| &mut self.added[i]),
        }
    }

    /// The record of node `name` in the change set, copied from `desired` the first time; `None`
    /// when neither has it.
    fn record(&mut self, desired: &Desired, name: &str) -> Option<&mut Node> {
        if self.get_mut(name).is_none() {
            let node = desired.nodes.get(name)?.clone();
            return Some(self.add(node));
        }
        self.get_mut(name)
    }

    /// Adds a record no one has yet.
    fn add(&mut self, node: Node) -> &mut Node {
        self.added_at.insert(node.name.clone(), self.added.len());
        self.added.push(node);
        self.added.last_mut().expect("just pushed")
    }

    /// Every record, in name order.
    fn into_vec(self) -> Vec<Node> {
        let RoundNodes { mut planned, added, .. } = self;
        if !added.is_empty() {
            planned.extend(added);
            planned.sort_unstable_by(|a, b| a.name.cmp(&b.name));
        }
        planned
    }
}

/// Closes the pending outbox entries this pass neither sent nor resent (`used`): the daemon died
/// between writing one and learning how it went, and GCE has since reached the state it aimed at, or
/// the step was superseded. Each gets an `outbox_abandoned` event. The caller makes sure both GCE
/// lists answered, so that nothing is concluded from a partial view; if the step is still needed
/// the planner plans it again, and every mutation is idempotent by name. Returns how many.
pub(super) async fn abandon_unused_outbox(
    store: &Store,
    used: &HashSet<i64>,
    desired: &mut Desired,
    now: DateTime<Utc>,
) -> Result<usize, StoreError> {
    let stale: Vec<OutboxEntry> =
        store.pending_outbox().await?.into_iter().filter(|e| !used.contains(&e.id)).collect();
    if stale.is_empty() {
        return Ok(0);
    }
    let why = "no longer needed: GCE already shows the state it aimed at, or it was superseded";
    let mut tx = store.begin().await?;
    for e in &stale {
        tx.outbox_update(e.id, OutboxState::Abandoned, Some(why), now).await?;
    }
    let events = stale
        .iter()
        .map(|e| NewEvent {
            kind: EventKind::OutboxAbandoned,
            nodes: vec![],
            message: format!("{} {} (requestId {}): {why}", e.kind.as_str(), e.target, e.request_id),
        })
        .collect();
    commit(&mut tx, ChangeSet::events(events), desired, now).await?;
    tx.commit().await?;
    Ok(stale.len())
}

/// The tag of new group `g`, which no request group or MIG on record (or chosen this round) uses:
/// [`naming::tag_for`] its nodeset, job, nodes and the earliest time one of them was asked for
/// (the hook's time), so that the same group gets the same name wherever it is planned.
fn unused_tag(desired: &Desired, taken: &HashSet<String>, g: &NewGroup) -> String {
    let since = g
        .nodes
        .iter()
        .filter_map(|n| desired.nodes.get(n).map(|n| n.state_since))
        .min()
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true))
        .unwrap_or_default();
    let mut nodes = g.nodes.clone();
    nodes.sort();
    let key = format!("{}/{:?}/{}/{since}", g.nodeset, g.job_id, nodes.join(","));
    let free = |tag: &String| {
        !taken.contains(tag)
            && !desired.requests.values().any(|r| &r.tag == tag)
            && !desired.migs.keys().any(|m| m.ends_with(tag.as_str()))
    };
    (0..1000).map(|attempt| naming::tag_for(&key, attempt)).find(free).unwrap_or_else(|| loop {
        let tag = naming::new_tag(&mut rand::thread_rng());
        if free(&tag) {
            break tag;
        }
    })
}

/// Writes a pass's usage changes (`plan/usage.rs`) in one transaction with the mark that the pass
/// saw every span left open (`StoreTx::usage_seen`): a steady pass writes that one row. `seen` is
/// the last full pass before this one (a span closed now was last seen then).
pub async fn commit_usage(
    store: &Store,
    change: &UsageChange<'_>,
    seen: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    use crate::store::{JobSpanEnd, VmSpanEnd};
    let mut tx = store.begin().await?;
    // The rows are owned copies: a thousand at a time, not one per VM of a pass that turns
    // 10,000 nodes up (the statement takes a thousand anyway).
    for chunk in change.vms_opened.chunks(1000) {
        let spans: Vec<crate::usage::VmSpan> = chunk.iter().map(vm_span).collect();
        tx.open_vm_spans(&spans).await?;
    }
    if !change.vms_closed.is_empty() {
        let ends: Vec<VmSpanEnd> = change
            .vms_closed
            .iter()
            .map(|(id, at)| VmSpanEnd { instance_id: id.to_string(), deleted_at: *at })
            .collect();
        tx.close_vm_spans(&ends, seen).await?;
    }
    for chunk in change.jobs_opened.chunks(1000) {
        let spans: Vec<crate::usage::JobSpan> = chunk
            .iter()
            .map(|j| crate::usage::JobSpan {
                job_id: j.job_id,
                node: j.node.clone(),
                user: j.user.into(),
                account: j.account.into(),
                partition: j.partition.into(),
                started_at: j.started_at,
                ended_at: None,
            })
            .collect();
        tx.open_job_spans(&spans).await?;
    }
    if !change.jobs_closed.is_empty() {
        let ends: Vec<JobSpanEnd> = change
            .jobs_closed
            .iter()
            .map(|((job, node), at)| JobSpanEnd { job_id: *job, node: node.clone(), ended_at: *at })
            .collect();
        tx.close_job_spans(&ends).await?;
    }
    tx.usage_seen(now).await?;
    tx.commit().await
}

fn vm_span(v: &OpenedVm<'_>) -> crate::usage::VmSpan {
    let s = &v.span;
    crate::usage::VmSpan {
        instance_id: s.id.to_string(),
        vm: s.node.clone(),
        node: s.node.clone(),
        nodeset: s.nodeset.clone(),
        model: s.model.to_string(),
        machine_type: v.machine_type.into(),
        gpus: s.gpus,
        job_id: v.job_id,
        created_at: s.created_at,
        last_seen: s.last_seen,
        deleted_at: None,
    }
}

#[cfg(test)]
#[path = "commit_tests.rs"]
mod tests;
