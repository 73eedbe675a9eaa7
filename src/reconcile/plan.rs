//! The pure planner: `plan(config, desired, observed, now) -> Plan`. No I/O, no clock, table-tested.
//!
//! The rules, in the order they are applied (docs/architecture.md explains each):
//! 1. Backoffs that ran out end.
//! 2. Every open request group walks its lifecycle: planned → MIG → resize request → SUCCEEDED, or
//!    FAILED / CANCELLED / queued past `queue_timeout` → nodes back to powered-down and usable, job
//!    requeued through Slurm (and allowed to start again when the nodeset may ask GCE again, not after
//!    Slurm's two-minute requeue hold), MIG deleted, cause recorded, capacity backoff started.
//! 3. Every node is compared with its VM and with Slurm: expiry, vanished VMs, suspends to carry out,
//!    VMs that must not exist, static nodes to keep provisioned, drift between Slurm and the store.
//! 4. Nodes waiting for a VM are grouped by (nodeset, job) into new request groups of at most 1000.
//! 5. Owned MIGs: seen, gone, empty long enough to delete; owned MIGs the store does not know are adopted,
//!    with their resize request when it is still in flight (so that it is followed, not collected).
//! 6. VMs in owned MIGs that back no node are deleted after `orphan_grace` (never one named like a node
//!    of ours while Slurm cannot be asked whether a job runs there).
//! 7. End-of-life reservations that no longer belong to an up node are removed.
//!
//! Absence is only believed when the list that would show the thing succeeded this pass
//! (`Observed::vms` / `migs` / `slurm` are `None` otherwise): a failed list never deletes anything.

use super::types::*;
use crate::model::*;
use chrono::{DateTime, Duration, Utc};
use std::borrow::{Borrow, Cow};
use std::collections::{BTreeMap, BTreeSet, HashSet};

/// GCE's hard cap on instances per resize request we use (and per `deleteInstances` call).
pub const MAX_GROUP: usize = 1000;
/// Run durations GCE accepts.
pub const MIN_RUN_DURATION: u64 = 600;
pub const MAX_RUN_DURATION: u64 = 604_800;
/// How long Slurm may show a node powering up that slurm-dws has no record of before slurm-dws acts:
/// a hook that is committing right now must not race the pass into a second request.
pub const DRIFT_GRACE_SECS: i64 = 60;
/// How long after a request SUCCEEDED a VM may be missing from a list before it counts as gone.
pub const LIST_LAG_SECS: i64 = 30;
/// Prefix of the end-of-life maintenance reservations slurm-dws makes.
pub const EOL_PREFIX: &str = "slurm-dws-eol-";
/// Prefix of every node reason slurm-dws sets, so it knows which DOWN states are its own.
pub const REASON_PREFIX: &str = "slurm-dws:";

/// The end-of-life reservation's name for a node.
pub fn eol_reservation(node: &str) -> String {
    format!("{EOL_PREFIX}{node}")
}

/// Why a run duration is what it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunDuration {
    pub seconds: u64,
    /// Set when the value is a fallback or was clamped: the event to record.
    pub note: Option<String>,
}

/// Run duration for a group: job TimeLimit + `boot_allowance` when `use_job_duration` and the limit is
/// known and finite, else `max_run_duration`; clamped to what GCE accepts. Every fallback or clamp says so.
pub fn run_duration(ns: &NodesetPlan, job: Option<u32>, limit: JobLimit) -> RunDuration {
    let (raw, mut note) = match (ns.use_job_duration, job, limit) {
        (false, _, _) => (ns.max_run_duration, None),
        (true, None, _) => (
            ns.max_run_duration,
            Some(format!("no job: run duration is max_run_duration {}s", ns.max_run_duration)),
        ),
        (true, Some(j), JobLimit::Minutes(m)) => (m.saturating_mul(60).saturating_add(ns.boot_allowance), {
            let _ = j;
            None
        }),
        (true, Some(j), JobLimit::Unlimited) => (
            ns.max_run_duration,
            Some(format!(
                "job {j} has no time limit: run duration is max_run_duration {}s",
                ns.max_run_duration
            )),
        ),
        (true, Some(j), JobLimit::Unknown) => (
            ns.max_run_duration,
            Some(format!(
                "job {j}'s time limit is unknown: run duration is max_run_duration {}s",
                ns.max_run_duration
            )),
        ),
    };
    let seconds =
        raw.clamp(MIN_RUN_DURATION, MAX_RUN_DURATION.min(ns.max_run_duration.max(MIN_RUN_DURATION)));
    if seconds != raw {
        note = Some(format!(
            "run duration {raw}s clamped to {seconds}s (allowed {MIN_RUN_DURATION}..{})",
            MAX_RUN_DURATION.min(ns.max_run_duration)
        ));
    }
    RunDuration { seconds, note }
}

/// The next backoff after a capacity or quota failure: `initial * 2^level`, at most `max`.
pub fn next_backoff(
    cfg: &PlanConfig,
    previous: Option<&Backoff>,
    reason: &str,
    now: DateTime<Utc>,
) -> Backoff {
    let level = previous.map_or(0, |b| b.level + 1);
    let secs = cfg.backoff_initial.saturating_mul(1i64 << level.min(20)).min(cfg.backoff_max).max(1);
    Backoff {
        nodeset: String::new(),
        until: now + Duration::seconds(secs),
        level,
        reason: reason.to_string(),
    }
}

fn secs_since(now: DateTime<Utc>, t: DateTime<Utc>) -> i64 {
    (now - t).num_seconds()
}

/// Decides one round. See the module docs for the rules.
pub fn plan(cfg: &PlanConfig, d: &Desired, o: &Observed, now: DateTime<Utc>) -> Plan {
    let mut p = Planner {
        cfg,
        o,
        now,
        nodes: Overlay::new(&d.nodes),
        requests: Overlay::new(&d.requests),
        migs: Overlay::new(&d.migs),
        backoffs: d.backoffs.clone(),
        plan: Plan::default(),
        delete_instances: BTreeMap::new(),
        slurm_updates: BTreeMap::new(),
        job_begins: BTreeMap::new(),
    };
    p.expire_backoffs();
    p.request_lifecycle();
    p.adopt_untracked_slurm_nodes();
    p.seed_static();
    p.node_rules();
    p.group_pending();
    p.migs_and_gc();
    p.orphans();
    p.reservations();
    p.finish()
}

/// One map of the desired state as the planner sees it: the record, with this round's changes over
/// it. Reading never copies; changing an entry copies that one entry. Planning used to clone the whole
/// desired state first, and at 10,000 nodes that copy and its drop were most of a pass's CPU
/// (`make bench`, the reconcile pass row).
struct Overlay<'a, K, V> {
    base: &'a BTreeMap<K, V>,
    /// Entries changed or added this round (an entry is never removed).
    changed: BTreeMap<K, V>,
}

impl<'a, K: Ord + Clone, V: Clone + PartialEq> Overlay<'a, K, V> {
    fn new(base: &'a BTreeMap<K, V>) -> Self {
        Overlay { base, changed: BTreeMap::new() }
    }

    fn get<Q: Ord + ?Sized>(&self, k: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
    {
        self.changed.get(k).or_else(|| self.base.get(k))
    }

    /// The entry as it is now: borrowed from the record while unchanged, so holding it does not
    /// borrow the planner.
    fn current<Q: Ord + ?Sized>(&self, k: &Q) -> Option<Cow<'a, V>>
    where
        K: Borrow<Q>,
    {
        match self.changed.get(k) {
            Some(v) => Some(Cow::Owned(v.clone())),
            None => self.base.get(k).map(Cow::Borrowed),
        }
    }

    fn contains_key<Q: Ord + ?Sized>(&self, k: &Q) -> bool
    where
        K: Borrow<Q>,
    {
        self.changed.contains_key(k) || self.base.contains_key(k)
    }

    /// The entry to change (copied from the record the first time).
    fn get_mut<Q: Ord + ?Sized>(&mut self, k: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
    {
        if !self.changed.contains_key(k) {
            let (key, v) = self.base.get_key_value(k)?;
            self.changed.insert(key.clone(), v.clone());
        }
        self.changed.get_mut(k)
    }

    fn insert(&mut self, k: K, v: V) {
        self.changed.insert(k, v);
    }

    /// Every entry as it is now, in key order.
    fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        let mut base = self.base.iter().peekable();
        let mut changed = self.changed.iter().peekable();
        std::iter::from_fn(move || match (base.peek(), changed.peek()) {
            (Some((kb, _)), Some((kc, _))) => match kb.cmp(kc) {
                std::cmp::Ordering::Less => base.next(),
                std::cmp::Ordering::Greater => changed.next(),
                std::cmp::Ordering::Equal => {
                    base.next();
                    changed.next()
                }
            },
            (Some(_), None) => base.next(),
            (None, _) => changed.next(),
        })
    }

    fn values(&self) -> impl Iterator<Item = &V> {
        self.iter().map(|(_, v)| v)
    }

    /// Every key, in order, to walk while entries change: borrowed from the record where it can be.
    fn keys_now(&self) -> Vec<Cow<'a, K>> {
        let base = self.base;
        let mut keys: Vec<Cow<'a, K>> = base.keys().map(Cow::Borrowed).collect();
        let added: Vec<&K> = self.changed.keys().filter(|k| !base.contains_key(k)).collect();
        if !added.is_empty() {
            keys.extend(added.into_iter().map(|k| Cow::Owned(k.clone())));
            keys.sort();
        }
        keys
    }

    /// The entries that differ from the record, in key order.
    fn into_changes(self) -> Vec<V> {
        let base = self.base;
        self.changed.into_iter().filter(|(k, v)| base.get(k) != Some(v)).map(|(_, v)| v).collect()
    }
}

struct Planner<'a> {
    cfg: &'a PlanConfig,
    o: &'a Observed,
    now: DateTime<Utc>,
    nodes: Overlay<'a, String, Node>,
    requests: Overlay<'a, i64, Request>,
    migs: Overlay<'a, String, Mig>,
    backoffs: BTreeMap<String, Backoff>,
    plan: Plan,
    /// MIG → instances to delete (batched at the end).
    delete_instances: BTreeMap<String, BTreeSet<String>>,
    /// (state, reason) → nodes (batched at the end).
    slurm_updates: BTreeMap<(String, Option<String>), BTreeSet<String>>,
    /// Begin time → jobs whose nodes were released before they got a VM (after the node updates).
    job_begins: BTreeMap<DateTime<Utc>, BTreeSet<u32>>,
}

impl Planner<'_> {
    fn slurm_node(&self, name: &str) -> Option<&SlurmNode> {
        self.o.slurm.as_ref().and_then(|s| s.get(name))
    }

    fn vm(&self, name: &str) -> Option<&ObservedVm> {
        self.o.vms.as_ref().and_then(|v| v.get(name))
    }

    fn in_backoff(&self, nodeset: &str) -> Option<&Backoff> {
        self.backoffs.get(nodeset).filter(|b| b.until > self.now)
    }

    fn set_state(&mut self, name: &str, state: NodeState) {
        let now = self.now;
        if self.nodes.get(name).is_some_and(|n| n.state != state) {
            if let Some(n) = self.nodes.get_mut(name) {
                n.state = state;
                n.state_since = now;
            }
        }
    }

    fn slurm_update(&mut self, node: &str, state: &str, reason: Option<String>) {
        self.slurm_updates.entry((state.to_string(), reason)).or_default().insert(node.to_string());
    }

    /// Tell Slurm to take a node out of service and back to powered-down (requeueing its job), unless
    /// Slurm already has it powered down.
    fn power_down_force(&mut self, node: &str, reason: &str) {
        let needed = self.slurm_node(node).is_none_or(|s| !s.powered_down());
        if needed {
            self.slurm_update(node, "power_down_force", Some(format!("{REASON_PREFIX} {reason}")));
        }
    }

    /// The job that was waiting for `node` was requeued by slurm-dws before the node got a VM: let it start
    /// again as soon as its nodeset may ask GCE again (now, or when the capacity backoff ends), not after
    /// Slurm's requeue hold.
    fn job_may_start_again(&mut self, node: &str) {
        let Some(n) = self.nodes.get(node) else { return };
        let Some(job) = n.job_id else { return };
        let begin = self.in_backoff(&n.nodeset).map_or(self.now, |b| b.until);
        self.job_begins.entry(begin).or_default().insert(job);
    }

    fn drop_reservation(&mut self, name: &str) {
        if self.nodes.get(name).is_some_and(|n| n.reservation.is_some()) {
            if let Some(r) = self.nodes.get_mut(name).and_then(|n| n.reservation.take()) {
                self.plan.slurm.push(SlurmStep::DeleteReservation { name: r });
            }
        }
    }

    fn clear_vm(&mut self, name: &str) {
        if self.nodes.get(name).is_some_and(|n| n.vm_status.is_some() || n.termination_time.is_some()) {
            if let Some(n) = self.nodes.get_mut(name) {
                n.vm_status = None;
                n.termination_time = None;
            }
        }
    }

    // 1 ------------------------------------------------------------------------------------------------
    fn expire_backoffs(&mut self) {
        // No backoff is ever set longer than backoff_max: one that ends further away than that was
        // set before the wall clock went back, and would block the nodeset for the size of the jump.
        let ended: Vec<(String, bool)> = self
            .backoffs
            .values()
            .filter_map(|b| {
                let clock_went_back = secs_since(b.until, self.now) > self.cfg.backoff_max;
                (b.until <= self.now || clock_went_back).then(|| (b.nodeset.clone(), clock_went_back))
            })
            .collect();
        for (ns, clock_went_back) in ended {
            self.backoffs.remove(&ns);
            self.plan.backoffs_cleared.push(ns.clone());
            let why = if clock_went_back {
                " (it ended further away than backoff_max: the clock went back)"
            } else {
                ""
            };
            self.plan.event("backoff_ended", vec![], format!("nodeset {ns}: capacity backoff ended{why}"));
        }
    }

    // 2 ------------------------------------------------------------------------------------------------
    fn request_lifecycle(&mut self) {
        for id in self.requests.keys_now() {
            self.one_request(*id);
        }
    }

    /// The nodes still bound to a request, with their states (names borrowed from the request).
    fn members<'r>(&self, r: &'r Request) -> Vec<(&'r str, NodeState)> {
        r.nodes
            .iter()
            .filter_map(|n| self.nodes.get(n).map(|node| (n.as_str(), node)))
            .filter(|(_, node)| node.request_id == Some(r.id))
            .map(|(n, node)| (n, node.state))
            .collect()
    }

    fn one_request(&mut self, id: i64) {
        let Some(r) = self.requests.current(&id) else { return };
        let members = self.members(&r);
        let wanted: Vec<&str> =
            members.iter().filter(|(_, s)| *s == NodeState::Requested).map(|(n, _)| *n).collect();
        let mig_seen = self.o.migs.as_ref().map(|m| m.contains_key(&r.mig));
        match r.phase {
            RequestPhase::Planned => {
                if wanted.is_empty() {
                    self.release_members(&r, None);
                    self.update_request(id, |r| r.phase = RequestPhase::Done);
                } else if mig_seen == Some(true) {
                    self.update_request(id, |r| r.phase = RequestPhase::MigReady);
                    self.one_request(id);
                } else {
                    self.plan.gce.push(GceStep::InsertMig {
                        request: id,
                        mig: r.mig.clone(),
                        nodeset: r.nodeset.clone(),
                    });
                }
            }
            RequestPhase::MigReady => {
                if wanted.is_empty() {
                    let why = "nodes no longer wanted before the resize request was sent".to_string();
                    self.release_members(&r, None);
                    self.update_request(id, |r| {
                        r.phase = RequestPhase::Failed;
                        r.last_error = Some(why.clone());
                    });
                    self.delete_mig(&r.mig, &why);
                } else if self.o.requests.get(&r.mig).is_some_and(|rr| rr.state != "NOT_FOUND") {
                    self.update_request(id, |r| r.phase = RequestPhase::Active);
                    self.one_request(id);
                } else {
                    self.plan.gce.push(GceStep::InsertResizeRequest { request: id, mig: r.mig.clone() });
                }
            }
            RequestPhase::Active => self.active_request(&r, &wanted),
            RequestPhase::Succeeded => {
                if mig_seen == Some(false) && members.iter().all(|(_, s)| *s != NodeState::Up) {
                    self.update_request(id, |r| r.phase = RequestPhase::Done);
                }
            }
            RequestPhase::Failed => {
                if mig_seen == Some(false) {
                    self.update_request(id, |r| r.phase = RequestPhase::Done);
                } else if mig_seen == Some(true) {
                    let why = r.last_error.clone().unwrap_or_else(|| "request failed".into());
                    self.delete_mig(&r.mig, &why);
                }
            }
            RequestPhase::Done => {}
        }
    }

    fn update_request(&mut self, id: i64, f: impl FnOnce(&mut Request)) {
        if let Some(r) = self.requests.get_mut(&id) {
            f(r);
            r.updated_at = self.now;
        }
    }

    fn delete_mig(&mut self, mig: &str, reason: &str) {
        let deleting = self.migs.get(mig).is_some_and(|m| m.state == MigState::Deleting);
        let seen = self.o.migs.as_ref().is_none_or(|m| m.contains_key(mig));
        if !deleting
            && seen
            && !self.plan.gce.iter().any(|s| matches!(s, GceStep::DeleteMig { mig: m, .. } if m == mig))
        {
            self.plan.gce.push(GceStep::DeleteMig { mig: mig.to_string(), reason: reason.to_string() });
        }
    }

    /// The request will bring no VM: its nodes go back to powered-down (usable), Slurm is told.
    fn release_members(&mut self, r: &Request, error: Option<&str>) {
        for (name, state) in self.members(r) {
            match state {
                NodeState::Requested | NodeState::Suspending => {
                    let was_requested = state == NodeState::Requested;
                    self.set_state(name, NodeState::PoweredDown);
                    if let Some(n) = self.nodes.get_mut(name) {
                        n.mig = None;
                        if let Some(e) = error {
                            n.last_error = Some(e.to_string());
                        }
                    }
                    self.clear_vm(name);
                    if was_requested {
                        if let Some(e) = error {
                            self.power_down_force(name, e);
                            self.job_may_start_again(name);
                        }
                    }
                }
                _ => {}
            }
        }
    }

    fn active_request(&mut self, r: &Request, wanted: &[&str]) {
        let Some(rr) = self.o.requests.get(&r.mig).cloned() else {
            return; // not polled this pass (list failed): nothing is decided
        };
        if rr.state == "NOT_FOUND" {
            if self.o.migs.as_ref().is_some_and(|m| !m.contains_key(&r.mig)) {
                let why = format!("MIG {} was deleted outside slurm-dws", r.mig);
                self.fail_request(r, &why, false);
            } else {
                // The insert never took effect (or GCE forgot it): send it again.
                self.update_request(r.id, |r| r.phase = RequestPhase::MigReady);
            }
            return;
        }
        if rr.state != r.gce_state.clone().unwrap_or_default() {
            self.update_request(r.id, |x| x.gce_state = Some(rr.state.clone()));
        }
        match rr.state.as_str() {
            "SUCCEEDED" => {
                self.update_request(r.id, |x| {
                    x.phase = RequestPhase::Succeeded;
                    x.last_error = None;
                });
                for n in wanted {
                    self.set_state(n, NodeState::Up);
                    if let Some(node) = self.nodes.get_mut(*n) {
                        node.last_error = None;
                    }
                }
                if self.backoffs.remove(&r.nodeset).is_some() {
                    self.plan.backoffs_cleared.push(r.nodeset.clone());
                }
                self.plan.event(
                    "request_succeeded",
                    r.nodes.clone(),
                    format!("resize request {} in MIG {} SUCCEEDED: {} VMs", r.name, r.mig, r.nodes.len()),
                );
            }
            "FAILED" | "CANCELLED" => {
                let cause = match (&rr.error, rr.state.as_str(), &r.last_error) {
                    (Some((code, msg)), _, _) => format!("{code}: {msg}"),
                    (None, "CANCELLED", Some(why)) => why.clone(),
                    (None, state, _) => format!("{state} without an error from GCE"),
                };
                let why = format!("resize request {} in MIG {} {}: {}", r.name, r.mig, rr.state, cause);
                self.fail_request(r, &why, rr.capacity_error);
            }
            _ => {
                if rr.last_attempt.is_some() && rr.last_attempt != r.last_error {
                    let la = rr.last_attempt.clone();
                    self.update_request(r.id, |x| x.last_error = la);
                }
                let ns = self.cfg.nodesets.get(&r.nodeset);
                let queue_timeout = ns.map_or(0, |n| n.queue_timeout) as i64;
                if wanted.is_empty() {
                    self.update_request(r.id, |x| {
                        x.last_error = Some("cancelled: every node of the request was suspended".into())
                    });
                    self.plan.gce.push(GceStep::CancelResizeRequest { request: r.id, mig: r.mig.clone() });
                } else if queue_timeout > 0 && secs_since(self.now, r.created_at) > queue_timeout {
                    let why = format!(
                        "queued for longer than queue_timeout ({queue_timeout}s){}",
                        rr.last_attempt
                            .as_deref()
                            .map(|l| format!("; last attempt: {l}"))
                            .unwrap_or_default()
                    );
                    if r.last_error.as_deref() != Some(why.as_str()) {
                        self.plan.event(
                            "queue_timeout",
                            r.nodes.clone(),
                            format!("resize request {} in MIG {}: {why}; cancelling", r.name, r.mig),
                        );
                    }
                    self.update_request(r.id, |x| x.last_error = Some(why));
                    self.plan.gce.push(GceStep::CancelResizeRequest { request: r.id, mig: r.mig.clone() });
                }
            }
        }
    }

    fn fail_request(&mut self, r: &Request, why: &str, capacity: bool) {
        self.update_request(r.id, |x| {
            x.phase = RequestPhase::Failed;
            x.last_error = Some(why.to_string());
        });
        self.plan.event("request_failed", r.nodes.clone(), why.to_string());
        if capacity {
            let mut b = next_backoff(self.cfg, self.backoffs.get(&r.nodeset), why, self.now);
            b.nodeset = r.nodeset.clone();
            self.plan.event(
                "backoff",
                vec![],
                format!(
                    "nodeset {}: capacity backoff until {} (level {}) after: {why}",
                    r.nodeset,
                    b.until.to_rfc3339(),
                    b.level
                ),
            );
            self.backoffs.insert(r.nodeset.clone(), b.clone());
            self.plan.backoffs_set.push(b);
        }
        // After the backoff is set: the requeued jobs may start again when it ends.
        self.release_members(r, Some(why));
        self.delete_mig(&r.mig, why);
    }

    // 3 ------------------------------------------------------------------------------------------------
    /// Slurm nodes of ours that the store has never seen get a record, so the node rules can judge them.
    fn adopt_untracked_slurm_nodes(&mut self) {
        let Some(slurm) = self.o.slurm.as_ref() else { return };
        for name in slurm.keys() {
            if self.nodes.contains_key(name) {
                continue;
            }
            if let Some((nodeset, index, is_static)) = self.cfg.node_ref(name) {
                self.nodes.insert(name.clone(), new_node(name, &nodeset, index, is_static, self.now));
            }
        }
    }

    /// Static nodes are kept provisioned from start-up on: each gets a record the moment it is missing.
    fn seed_static(&mut self) {
        for ns in self.cfg.nodesets.values() {
            for index in 0..ns.node_count_static {
                let name = format!("{}-{}-{}", self.cfg.cluster_name, ns.name, index);
                if !self.nodes.contains_key(&name) {
                    self.nodes.insert(name.clone(), new_node(&name, &ns.name, index, true, self.now));
                }
            }
        }
    }

    fn node_rules(&mut self) {
        for name in self.nodes.keys_now() {
            let name: &str = &name;
            let Some(node) = self.nodes.get(name) else { continue };
            let (state, rid) = (node.state, node.request_id);
            match state {
                NodeState::Up => self.up_node(name),
                NodeState::Suspending => self.suspending_node(name),
                NodeState::PoweredDown => self.powered_down_node(name),
                NodeState::Requested => {
                    let open = rid.and_then(|id| self.requests.get(&id)).is_some_and(|r| {
                        matches!(
                            r.phase,
                            RequestPhase::Planned | RequestPhase::MigReady | RequestPhase::Active
                        )
                    });
                    if !open {
                        // Its request group is gone (it can only be a bug or a hand-edited database).
                        self.set_state(name, NodeState::ResumePending);
                    }
                }
                NodeState::ResumePending => {}
            }
        }
    }

    fn up_node(&mut self, name: &str) {
        // Observations are borrowed, not cloned, and fields are written only when they change: this runs
        // for every up node on every pass (`make bench`, the reconcile pass row).
        let o = self.o;
        let Some(vms) = o.vms.as_ref() else { return };
        let Some(node) = self.nodes.current(name) else { return };
        match vms.get(name) {
            Some(vm) => {
                let became_running = vm.status == "RUNNING" && node.vm_status.as_deref() != Some("RUNNING");
                let status_changed = node.vm_status.as_deref() != Some(vm.status.as_str());
                let termination_changed = vm.termination.is_some() && node.termination_time != vm.termination;
                let mig_changed = vm.mig.is_some() && node.mig != vm.mig;
                if status_changed || termination_changed || mig_changed {
                    if let Some(n) = self.nodes.get_mut(name) {
                        if status_changed {
                            n.vm_status = Some(vm.status.clone());
                        }
                        if termination_changed {
                            n.termination_time = vm.termination;
                        }
                        if mig_changed {
                            n.mig = vm.mig.clone();
                        }
                    }
                }
                if became_running && self.cfg.internal_ip {
                    if let Some(ip) = &vm.network_ip {
                        self.plan.slurm.push(SlurmStep::SetAddr { node: name.to_string(), addr: ip.clone() });
                    }
                }
                if let (Some(term), None) = (vm.termination, node.reservation.as_ref()) {
                    let grace = self.cfg.nodesets.get(&node.nodeset).map_or(600, |n| n.eol_grace) as i64;
                    let start = (term - Duration::seconds(grace)).max(self.now + Duration::seconds(60));
                    if start < term {
                        let res = eol_reservation(name);
                        self.plan.slurm.push(SlurmStep::CreateReservation {
                            name: res.clone(),
                            node: name.to_string(),
                            start,
                            end: term + Duration::seconds(3600),
                        });
                        if let Some(n) = self.nodes.get_mut(name) {
                            n.reservation = Some(res);
                        }
                    }
                }
                if let Some(s) = o.slurm.as_ref().and_then(|s| s.get(name)) {
                    let ours_down = s.is_down() && s.reason.starts_with(REASON_PREFIX);
                    if node.is_static && vm.status == "RUNNING" && ours_down && !s.powered_down() {
                        // A static node slurm-dws took out of service while re-provisioning is back.
                        self.slurm_update(name, "resume", None);
                        self.plan.event(
                            "returned",
                            vec![name.to_string()],
                            "static node's new VM is running: back in service",
                        );
                    } else if s.has("POWERED_DOWN")
                        && !s.powering_up()
                        && secs_since(self.now, node.state_since) > DRIFT_GRACE_SECS
                    {
                        if node.is_static {
                            self.slurm_update(name, "power_up", None);
                        } else {
                            self.plan.event(
                                "drift",
                                vec![name.to_string()],
                                "Slurm has the node powered down but its VM runs: deleting the VM",
                            );
                            self.set_state(name, NodeState::Suspending);
                            self.suspending_node(name);
                        }
                    }
                }
            }
            None => {
                if secs_since(self.now, node.state_since) < LIST_LAG_SECS && node.vm_status.is_none() {
                    return; // just SUCCEEDED: the list may lag behind
                }
                let expired = node.termination_time.is_some_and(|t| self.now >= t - Duration::seconds(120));
                let msg = match (expired, node.termination_time) {
                    (true, Some(t)) => {
                        format!("run duration ended at {}: GCE deleted the VM", t.to_rfc3339())
                    }
                    _ => "the VM is gone (deleted outside slurm-dws, or GCE removed it)".to_string(),
                };
                let kind = if expired { "expired" } else { "vm_lost" };
                self.drop_reservation(name);
                self.clear_vm(name);
                if let Some(n) = self.nodes.get_mut(name) {
                    n.last_error = Some(msg.clone());
                    n.mig = None;
                }
                if node.is_static {
                    self.set_state(name, NodeState::ResumePending);
                    if let Some(n) = self.nodes.get_mut(name) {
                        n.request_id = None;
                        n.job_id = None;
                    }
                    let in_service = self.slurm_node(name).is_none_or(|s| !s.powered_down() && !s.is_down());
                    if in_service {
                        self.slurm_update(
                            name,
                            "down",
                            Some(format!("{REASON_PREFIX} {msg}; re-provisioning")),
                        );
                    }
                    self.plan.event(
                        kind,
                        vec![name.to_string()],
                        format!("{msg}; static node: re-provisioning"),
                    );
                } else {
                    self.set_state(name, NodeState::PoweredDown);
                    self.power_down_force(name, &msg);
                    // Its job is requeued; with the VM gone no stale step can reach it, so no hold.
                    self.job_may_start_again(name);
                    self.plan.event(kind, vec![name.to_string()], format!("{msg}; node leaves service"));
                }
            }
        }
    }

    fn suspending_node(&mut self, name: &str) {
        let Some(vms) = self.o.vms.as_ref() else { return };
        let Some(node) = self.nodes.current(name) else { return };
        match vms.get(name) {
            Some(vm) if being_deleted(vm) => {}
            Some(vm) => match vm.mig.clone().or(node.mig.clone()) {
                Some(mig) if self.owned_mig(&mig) => {
                    self.delete_instances.entry(mig).or_default().insert(name.to_string());
                }
                _ => {
                    if node.last_error.as_deref()
                        != Some("VM is not in a MIG slurm-dws owns: not deleting it")
                    {
                        self.plan.event(
                            "not_owned",
                            vec![name.to_string()],
                            "the node's VM is not in a MIG slurm-dws owns: not deleting it",
                        );
                        if let Some(n) = self.nodes.get_mut(name) {
                            n.last_error = Some("VM is not in a MIG slurm-dws owns: not deleting it".into());
                        }
                    }
                }
            },
            None => {
                let request_open = node.request_id.and_then(|id| self.requests.get(&id)).is_some_and(|r| {
                    matches!(r.phase, RequestPhase::Planned | RequestPhase::MigReady | RequestPhase::Active)
                });
                if !request_open {
                    self.set_state(name, NodeState::PoweredDown);
                    self.clear_vm(name);
                    self.drop_reservation(name);
                    if let Some(n) = self.nodes.get_mut(name) {
                        n.mig = None;
                    }
                }
            }
        }
    }

    fn owned_mig(&self, mig: &str) -> bool {
        self.migs.contains_key(mig) || self.o.migs.as_ref().is_some_and(|m| m.contains_key(mig))
    }

    fn powered_down_node(&mut self, name: &str) {
        let Some(node) = self.nodes.current(name) else { return };
        let o = self.o;
        let slurm = o.slurm.as_ref().and_then(|s| s.get(name));
        if let Some(vm) = o.vms.as_ref().and_then(|v| v.get(name)) {
            if being_deleted(vm) {
                return; // neither adopted nor deleted again: it is going
            }
            let mig = vm.mig.clone();
            let slurm_wants = slurm.as_ref().is_some_and(|s| s.in_service() || s.powering_up());
            match mig {
                Some(m) if self.owned_mig(&m) => {
                    if slurm_wants {
                        self.set_state(name, NodeState::Up);
                        if let Some(n) = self.nodes.get_mut(name) {
                            n.mig = Some(m.clone());
                        }
                        self.plan.event(
                            "adopted",
                            vec![name.to_string()],
                            format!("Slurm uses the node and its VM runs in MIG {m}: adopted"),
                        );
                        self.up_node(name);
                    } else if node.request_id.is_some()
                        || vm.created.is_some_and(|c| secs_since(self.now, c) > self.cfg.orphan_grace)
                    {
                        // Known to be suspended (or an orphan past its grace): the VM must not exist.
                        self.delete_instances.entry(m).or_default().insert(name.to_string());
                    }
                }
                _ => {}
            }
            return;
        }
        if self.o.vms.is_none() {
            return;
        }
        if node.is_static {
            if self.in_backoff(&node.nodeset).is_none() {
                self.set_state(name, NodeState::ResumePending);
            }
            if slurm.as_ref().is_some_and(|s| s.has("POWERED_DOWN") && !s.powering_up() && !s.is_down()) {
                self.slurm_update(name, "power_up", None);
            }
        }
        let Some(s) = slurm else { return };
        if s.is_down()
            && s.has("POWERED_DOWN")
            && (s.reason.starts_with(REASON_PREFIX) || s.reason.contains("ResumeTimeout"))
        {
            // down~ after a failed resume that slurm-dws has cleaned up: usable again.
            self.slurm_update(name, "resume", None);
            self.plan.event(
                "returned",
                vec![name.to_string()],
                format!("node was DOWN ({}) with no VM: returned to powered-down and usable", s.reason),
            );
        } else if s.powering_up()
            && !node.is_static
            && secs_since(self.now, node.state_since) > DRIFT_GRACE_SECS
        {
            self.set_state(name, NodeState::ResumePending);
            self.plan.event(
                "drift",
                vec![name.to_string()],
                "Slurm is powering the node up but slurm-dws had no request for it: requesting a VM",
            );
        } else if s.in_service()
            && !s.has("POWERED_DOWN")
            && secs_since(self.now, node.state_since) > DRIFT_GRACE_SECS
        {
            self.power_down_force(name, "no VM backs this node");
            self.plan.event(
                "drift",
                vec![name.to_string()],
                "Slurm has the node in service but no VM backs it: taking it out",
            );
        }
    }

    // 4 ------------------------------------------------------------------------------------------------
    fn group_pending(&mut self) {
        if self.o.vms.is_none() {
            return; // cannot tell whether a VM already exists
        }
        let pending: Vec<Node> =
            self.nodes.values().filter(|n| n.state == NodeState::ResumePending).cloned().collect();
        let mut groups: BTreeMap<(String, Option<u32>), Vec<Node>> = BTreeMap::new();
        for n in pending {
            if let Some(vm) = self.vm(&n.name).cloned() {
                // A VM already exists (a resume raced a suspend, or the VM was never deleted): use it
                // when it is ours, else wait for it to go.
                if let Some(m) = vm.mig.filter(|m| self.owned_mig(m)) {
                    self.set_state(&n.name, NodeState::Up);
                    if let Some(x) = self.nodes.get_mut(&n.name) {
                        x.mig = Some(m);
                    }
                    self.plan.event(
                        "adopted",
                        vec![n.name.clone()],
                        "resume: the node's VM already exists: reused",
                    );
                }
                continue;
            }
            if let Some(b) = self.in_backoff(&n.nodeset).cloned() {
                if !n.is_static {
                    let why = format!(
                        "nodeset {} is in capacity backoff until {}: {}",
                        n.nodeset,
                        b.until.to_rfc3339(),
                        b.reason
                    );
                    self.set_state(&n.name, NodeState::PoweredDown);
                    if let Some(x) = self.nodes.get_mut(&n.name) {
                        x.last_error = Some(why.clone());
                    }
                    self.power_down_force(
                        &n.name,
                        &format!("capacity backoff until {}", b.until.to_rfc3339()),
                    );
                    self.job_may_start_again(&n.name);
                    self.plan.event("backoff_refused", vec![n.name.clone()], why);
                }
                continue;
            }
            groups.entry((n.nodeset.clone(), n.job_id)).or_default().push(n);
        }
        for ((nodeset, job), mut members) in groups {
            let Some(ns) = self.cfg.nodesets.get(&nodeset) else { continue };
            members.sort_by_key(|n| n.index);
            let limit = job.map_or(JobLimit::Unknown, |j| {
                self.o.job_limits.get(&j).copied().unwrap_or(JobLimit::Unknown)
            });
            let rd = run_duration(ns, job, limit);
            for chunk in members.chunks(MAX_GROUP) {
                let names: Vec<String> = chunk.iter().map(|n| n.name.clone()).collect();
                if let Some(note) = &rd.note {
                    self.plan.event("run_duration", names.clone(), note.clone());
                }
                self.plan.new_groups.push(NewGroup {
                    nodeset: nodeset.clone(),
                    job_id: job,
                    nodes: names,
                    run_duration: rd.seconds,
                });
            }
        }
    }

    // 5 ------------------------------------------------------------------------------------------------
    fn migs_and_gc(&mut self) {
        let Some(observed) = self.o.migs.as_ref() else { return };
        // Each MIG name once (10,000 up nodes share 1,000 MIGs: no copy per node).
        let mut busy: HashSet<String> = HashSet::new();
        let open_requests = self.requests.values().filter(|r| {
            matches!(r.phase, RequestPhase::Planned | RequestPhase::MigReady | RequestPhase::Active)
        });
        let holding_nodes = self
            .nodes
            .values()
            .filter(|n| matches!(n.state, NodeState::Up | NodeState::Suspending | NodeState::Requested));
        for mig in open_requests.map(|r| &r.mig).chain(holding_nodes.filter_map(|n| n.mig.as_ref())) {
            if !busy.contains(mig) {
                busy.insert(mig.clone());
            }
        }
        for name in self.migs.keys_now() {
            let name: &str = &name;
            let Some(m) = self.migs.current(name) else { continue };
            match observed.get(name) {
                Some(om) => {
                    let mut nm = m.clone().into_owned();
                    if nm.state == MigState::Creating {
                        nm.state = MigState::Active;
                    }
                    nm.target_size = om.target_size;
                    let empty = om.target_size == 0 && !busy.contains(name);
                    nm.empty_since = if empty { Some(m.empty_since.unwrap_or(self.now)) } else { None };
                    if let Some(since) = nm.empty_since {
                        if secs_since(self.now, since) >= self.cfg.mig_gc_grace
                            && nm.state != MigState::Deleting
                        {
                            self.delete_mig(
                                name,
                                &format!("empty with no active request since {}", since.to_rfc3339()),
                            );
                        }
                    }
                    if nm != *m {
                        self.migs.insert(name.to_string(), nm);
                    }
                }
                None => {
                    if matches!(m.state, MigState::Active | MigState::Deleting) {
                        let mut nm = m.into_owned();
                        nm.state = MigState::Deleted;
                        nm.target_size = 0;
                        self.migs.insert(name.to_string(), nm);
                        self.plan.event("mig_deleted", vec![], format!("MIG {name} is gone"));
                    }
                }
            }
        }
        for (name, om) in observed {
            if self.migs.contains_key(name) {
                continue;
            }
            // Its request still in flight: adopt it too, and follow it to its end.
            let in_flight = self.o.requests.get(name).filter(|rr| {
                matches!(rr.state.as_str(), "CREATING" | "ACCEPTED" | "PROVISIONING")
                    && !rr.instances.is_empty()
            });
            let adopted = in_flight.map(|rr| AdoptedRequest {
                nodeset: om.nodeset.clone(),
                job_id: om.job_id,
                tag: om.tag.clone(),
                mig: name.clone(),
                name: crate::naming::resize_request_name(&om.tag),
                nodes: rr.instances.iter().filter(|n| self.cfg.node_ref(n).is_some()).cloned().collect(),
                run_duration: rr.run_duration.unwrap_or(0),
                gce_state: rr.state.clone(),
            });
            let busy = busy.contains(name) || adopted.is_some();
            if let Some(a) = adopted {
                self.plan.adopted_requests.push(a);
            }
            self.plan.event(
                "adopted",
                vec![],
                format!(
                    "MIG {name} (nodeset {}, tag {}) is ours but was not on record: adopted",
                    om.nodeset, om.tag
                ),
            );
            self.migs.insert(
                name.clone(),
                Mig {
                    name: name.clone(),
                    nodeset: om.nodeset.clone(),
                    region: self.cfg.region.clone(),
                    target_size: om.target_size,
                    state: MigState::Active,
                    created_at: om.created.unwrap_or(self.now),
                    empty_since: (om.target_size == 0 && !busy).then_some(self.now),
                },
            );
        }
    }

    // 6 ------------------------------------------------------------------------------------------------
    fn orphans(&mut self) {
        let Some(vms) = self.o.vms.as_ref() else { return };
        for (name, vm) in vms {
            if self.nodes.contains_key(name) {
                continue; // a node's VM: the node rules decide
            }
            if self.o.slurm.is_none() && self.cfg.node_ref(name).is_some() {
                // Named like one of our nodes but not on record (database lost?): only Slurm can say
                // whether a job runs there, and Slurm did not answer. Never guess a VM away.
                continue;
            }
            let Some(mig) = vm.mig.as_ref().filter(|m| self.owned_mig(m)) else { continue };
            let old = vm.created.is_none_or(|c| secs_since(self.now, c) > self.cfg.orphan_grace);
            if old {
                self.plan.event(
                    "orphan",
                    vec![name.clone()],
                    format!("VM {name} in MIG {mig} backs no node of this cluster: deleting it"),
                );
                self.delete_instances.entry(mig.clone()).or_default().insert(name.clone());
            }
        }
    }

    // 7 ------------------------------------------------------------------------------------------------
    fn reservations(&mut self) {
        let Some(existing) = self.o.reservations.as_ref() else { return };
        let kept: HashSet<&String> = self.nodes.values().filter_map(|n| n.reservation.as_ref()).collect();
        let planned: BTreeSet<String> = self
            .plan
            .slurm
            .iter()
            .filter_map(|s| match s {
                SlurmStep::DeleteReservation { name } => Some(name.clone()),
                _ => None,
            })
            .collect();
        let stale: Vec<String> = existing
            .iter()
            .filter(|r| r.starts_with(EOL_PREFIX) && !kept.contains(r) && !planned.contains(*r))
            .cloned()
            .collect();
        for name in stale {
            self.plan.slurm.push(SlurmStep::DeleteReservation { name });
        }
        // A reservation on record that Slurm lost (slurmctld state wiped): make it again.
        let lost: Vec<String> = self
            .nodes
            .values()
            .filter(|n| n.state == NodeState::Up)
            .filter(|n| n.reservation.as_ref().is_some_and(|r| !existing.contains(r)))
            .filter(|n| {
                !self
                    .plan
                    .slurm
                    .iter()
                    .any(|s| matches!(s, SlurmStep::CreateReservation { node, .. } if node == &n.name))
            })
            .map(|n| n.name.clone())
            .collect();
        for name in lost {
            if let Some(n) = self.nodes.get_mut(&name) {
                n.reservation = None;
            }
            self.up_node(&name);
        }
    }

    fn finish(mut self) -> Plan {
        for (mig, names) in std::mem::take(&mut self.delete_instances) {
            let names: Vec<String> = names.into_iter().collect();
            for chunk in names.chunks(MAX_GROUP) {
                self.plan.gce.push(GceStep::DeleteInstances { mig: mig.clone(), instances: chunk.to_vec() });
            }
        }
        for ((state, reason), nodes) in std::mem::take(&mut self.slurm_updates) {
            self.plan.slurm.push(SlurmStep::UpdateState {
                nodes: nodes.into_iter().collect(),
                state,
                reason,
            });
        }
        for (begin, jobs) in std::mem::take(&mut self.job_begins) {
            self.plan.slurm.push(SlurmStep::SetJobsBegin { jobs: jobs.into_iter().collect(), begin });
        }
        self.plan.nodes = self.nodes.into_changes();
        self.plan.requests = self.requests.into_changes();
        self.plan.migs = self.migs.into_changes();
        self.plan
    }
}

/// GCE shows a VM whose deletion is under way as STOPPING until it is gone: asking again would only
/// repeat the call every pass (and a dying VM must not be adopted). A VM that stops and stays stopped
/// (TERMINATED) is handled as any other.
fn being_deleted(vm: &ObservedVm) -> bool {
    vm.status == "STOPPING"
}

/// A fresh record for a node slurm-dws has not tracked before.
pub fn new_node(name: &str, nodeset: &str, index: u32, is_static: bool, now: DateTime<Utc>) -> Node {
    Node {
        name: name.to_string(),
        nodeset: nodeset.to_string(),
        index,
        is_static,
        state: NodeState::PoweredDown,
        job_id: None,
        request_id: None,
        mig: None,
        vm_status: None,
        termination_time: None,
        last_error: None,
        reservation: None,
        state_since: now,
    }
}
