//! The pure planner: `plan(config, desired, observed, now) -> Plan`. No I/O, no clock, table-tested
//! (`tests.rs`).
//!
//! The rules, in the order they are applied, one file per family (docs/architecture.md explains each):
//! 1. Backoffs that ran out end, keeping their level until a success (`requests.rs`).
//! 2. Every open request group walks its lifecycle (`requests.rs`): planned → MIG → resize request →
//!    SUCCEEDED, or FAILED / CANCELLED / queued past `queue_timeout` → nodes back to powered-down and
//!    usable, job requeued through Slurm (and allowed to start again when the nodeset may ask GCE
//!    again, not after Slurm's two-minute requeue hold), MIG deleted, cause recorded, nodeset
//!    backoff started (capacity or error, one level deeper than the last). A group records the
//!    zone(s) its VMs are in from the first pass that lists one (`Request::zone`).
//! 3. Repairs first (`repair.rs`): asks and `repair ...` drain reasons become repairs; a repaired
//!    node is drained, its jobs requeued, its reservation-bound VM's host reported faulty or its VM
//!    replaced, and its drain lifted when its VM runs again (a dynamic node Slurm set DOWN for the
//!    VM's unexpected reboot is resumed). Then every node is compared with its VM
//!    and with Slurm (`nodes.rs`): expiry, vanished VMs, suspends
//!    to carry out, VMs that must not exist, static nodes to keep provisioned, drift between Slurm
//!    and the store.
//! 4. Nodes waiting for a VM are grouped by (nodeset, job) into new request groups of at most 1000
//!    (`groups.rs`, with the run duration of each group). A standard or spot nodeset's group creates
//!    its VMs by name instead of a resize request (`standard.rs`). A reservation nodeset's node whose
//!    window is closed gets none, and a group larger than its reservation fails at once
//!    (`reserved.rs`).
//! 5. Owned MIGs (`migs.rs`): seen, gone, empty (a `targetSize` of 0, or no VM left whatever the
//!    size: a preempted spot VM's member stays in its MIG) long enough to delete; owned MIGs the store does not
//!    know are adopted, with their resize request when it is still in flight (so that it is
//!    followed, not collected).
//! 6. VMs in owned MIGs that back no node are deleted after `orphan_grace` (`orphans.rs`).
//! 7. End-of-life reservations that no longer belong to an up node are removed, and ones Slurm lost
//!    are made again (`reservations.rs`).
//!    7b. A node whose VM GCE will maintain gets a Slurm reservation over the window, which follows
//!    the window and goes when the maintenance is over or cancelled (`maintenance.rs`).
//!    7c. A reservation nodeset whose window has not opened has its nodes held by a Slurm
//!    reservation until it opens (`reserved.rs`).
//! 8. Up nodes of `exclusive` nodesets whose job ended are powered down at once (`release.rs`).
//! 9. Nodesets that cannot get capacity now have their powered-down nodes drained, so jobs fall
//!    back to their other partitions; drains whose cause ended are lifted (`fallback.rs`).
//!
//! Where the next rule goes: a capability (reserved capacity, maintenance, repair, …) is a file
//! here named for it, with its table test beside it (`NAME_tests.rs`, included from the rule's file
//! under `#[cfg(test)]`), one call in [`plan`] at its place in the order above, and the words it
//! needs in `../types.rs`: what it reads is a field of [`Observed`] an edge fills (`../gce_edge/`,
//! `../slurm_edge/`, read by `../observe.rs`), what it decides is a [`GceStep`], a [`SlurmStep`] or
//! an event. A rule takes only the planner's vocabulary, the model and the config: no I/O, no clock
//! (`tests/architecture.rs` fails the build otherwise).
//!
//! Absence is only believed when the list that would show the thing succeeded this pass
//! (`Observed::vms` / `migs` / `slurm` are `None` otherwise): a failed list never deletes anything.
//! A partial VM list (a zone GCE could not reach, `Observed::unreachable_zones`) is a failed list
//! for the nodes whose VMs could be in that zone ([`Sight::Unknown`]): they keep their state, and no
//! VM is requested for them, until a complete answer says where their VMs are.
//! Nothing is deleted because nothing explains it (a VM, an empty MIG, a reservation) unless Slurm's
//! nodes, the VMs and the MIGs were all read in the same pass (`Planner::saw_everything`): after
//! the database is lost, what explains it (a node in use) is only learned from both. Every deletion
//! has an event.
//!
//! Each rule reads the desired state through an [`Overlay`](overlay) that copies only what it
//! changes, and records what it decides in the [`Planner`]; [`Planner::finish`] batches the GCE and
//! Slurm steps and returns the changed records.

mod fallback;
mod groups;
mod maintenance;
mod migs;
mod nodes;
mod orphans;
mod overlay;
mod policies;
mod release;
mod repair;
mod requests;
mod reservations;
mod reserved;
mod standard;
#[cfg(test)]
mod tests;
mod usage;

pub use fallback::{unschedulable, FALLBACK_REASON};
pub use groups::{run_duration, RunDuration};
pub use maintenance::{maint_reservation, reservation_span, DEFAULT_WINDOW_SECS, MAINT_PREFIX};
pub use release::RELEASE_REASON;
pub use repair::{repair_drain_reason, repair_reason, HOST_REPORTED, REBOOT_SETTLE_SECS, UNEXPECTED_REBOOT};
pub use requests::next_backoff;
pub use reserved::{window_hold, WINDOW_PREFIX};
pub use usage::{
    apply_usage, jobs_to_account, usage_change, NodesetShape, OpenJob, OpenUsage, OpenVms, OpenedVm,
    UsageChange, UsageJob, UsageKey, UsageSeconds, UsageVm,
};

use super::types::*;
use crate::model::*;
use chrono::{DateTime, Utc};
use overlay::Overlay;
use std::collections::{BTreeMap, BTreeSet};

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
/// End-of-life reservations a round makes at most, the soonest to start first; the next rounds make
/// the rest. A 10,000-node turn-up would otherwise make 10,000 in one pass, one `scontrol` each
/// (~2 ms apiece: ~20 s in which the daemon serves no resume and reads nothing), with every one of
/// them held in the pass's plan meanwhile. A reservation starts `eol_grace` before its VM's end,
/// hours away for any run worth reserving, so a few passes' wait costs nothing.
pub const MAX_RESERVATIONS_PER_ROUND: usize = 1000;
/// Prefix of the end-of-life maintenance reservations slurm-dws makes.
pub const EOL_PREFIX: &str = "slurm-dws-eol-";
/// Prefix of every node reason slurm-dws sets, so it knows which DOWN states are its own.
pub const REASON_PREFIX: &str = "slurm-dws:";

/// The end-of-life reservation's name for a node.
pub fn eol_reservation(node: &str) -> String {
    format!("{EOL_PREFIX}{node}")
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
        backoffs_before: &d.backoffs,
        backoffs: d.backoffs.clone(),
        plan: Plan::default(),
        delete_instances: BTreeMap::new(),
        slurm_updates: BTreeMap::new(),
        job_begins: BTreeMap::new(),
        here: Here::default(),
        eol_wanted: Vec::new(),
        repairs_before: &d.repairs,
        repairs: d.repairs.clone(),
    };
    p.expire_backoffs();
    p.request_lifecycle();
    p.adopt_untracked_slurm_nodes();
    p.seed_static();
    p.repairs();
    p.node_rules();
    p.group_pending();
    p.migs_and_gc();
    p.orphans();
    p.unused_policies();
    p.reservations();
    p.make_reservations();
    p.maintenance();
    p.window_holds();
    p.release_exclusive();
    p.fallback();
    p.finish()
}

/// One round's planning: the inputs, the desired state with this round's changes over it, and what
/// has been decided so far. The rules (one file per family) are its methods.
struct Planner<'a> {
    cfg: &'a PlanConfig,
    o: &'a Observed,
    now: DateTime<Utc>,
    nodes: Overlay<'a, String, Node>,
    requests: Overlay<'a, i64, Request>,
    migs: Overlay<'a, String, Mig>,
    /// The backoffs as the round began, and as the rules leave them: [`Planner::finish`] lists the
    /// difference (a backoff that ended and one that started again in the same round is one change).
    backoffs_before: &'a BTreeMap<String, Backoff>,
    backoffs: BTreeMap<String, Backoff>,
    plan: Plan,
    /// MIG → instances to delete (batched at the end).
    delete_instances: BTreeMap<String, BTreeSet<VmRef>>,
    /// (state, reason) → nodes (batched at the end).
    slurm_updates: BTreeMap<(NodeStateChange, Option<String>), BTreeSet<String>>,
    /// Begin time → jobs whose nodes were released before they got a VM (after the node updates).
    job_begins: BTreeMap<DateTime<Utc>, BTreeSet<u32>>,
    /// The node [`Planner::node_rules`] is judging, with its VM and Slurm node.
    here: Here<'a>,
    /// The end-of-life reservations the up nodes lack, made by [`Planner::make_reservations`].
    eol_wanted: Vec<EolWanted>,
    /// The repairs as the round began, and as the rules leave them (`repair.rs`; a few rows).
    repairs_before: &'a BTreeMap<String, Repair>,
    repairs: BTreeMap<String, Repair>,
}

/// An end-of-life reservation an up node lacks.
struct EolWanted {
    node: String,
    start: DateTime<Utc>,
    end: DateTime<Utc>,
}

/// A node with its VM and Slurm node, found by walking the sorted node, VM and Slurm lists
/// together: [`Planner::vm`], [`Planner::sight`] and [`Planner::slurm_node`] of this node need no
/// lookup (at 10,000 nodes each costs ~20 string comparisons).
#[derive(Default)]
struct Here<'a> {
    name: String,
    vm: Option<&'a ObservedVm>,
    slurm: Option<&'a SlurmNode>,
}

impl<'a> Planner<'a> {
    fn slurm_node(&self, name: &str) -> Option<&'a SlurmNode> {
        if self.here.name == name {
            return self.here.slurm;
        }
        self.o.slurm.as_ref().and_then(|s| s.get(name))
    }

    fn vm(&self, name: &str) -> Option<&'a ObservedVm> {
        if self.here.name == name {
            return self.here.vm;
        }
        self.o.vms.as_ref().and_then(|v| v.get(name))
    }

    /// What this pass knows of a node's VM: seen (in a zone that answered), gone (the list answered
    /// for every zone it could be in), or unknown (the list failed, or left out one of those zones).
    fn sight(&self, name: &str) -> Sight<'a> {
        let o: &'a Observed = self.o;
        if o.vms.is_none() {
            return Sight::Unknown;
        }
        if let Some(vm) = self.vm(name) {
            return Sight::Seen(vm);
        }
        if o.unreachable_zones.is_empty() {
            return Sight::Gone; // every zone answered (this runs for every node, every pass)
        }
        let nodeset = self.nodes.get(name).map(|n| n.nodeset.as_str());
        let zones = nodeset.and_then(|ns| self.cfg.nodesets.get(ns)).map(|n| n.zones.as_slice());
        if o.vm_zone_unknown(zones, &self.cfg.nodesets) {
            Sight::Unknown
        } else {
            Sight::Gone
        }
    }
}

impl Planner<'_> {
    fn in_backoff(&self, nodeset: &str) -> Option<&Backoff> {
        self.backoffs.get(nodeset).filter(|b| !b.ended && b.until > self.now)
    }

    fn owned_mig(&self, mig: &str) -> bool {
        self.migs.contains_key(mig) || self.o.migs.as_ref().is_some_and(|m| m.contains_key(mig))
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

    fn slurm_update(&mut self, node: &str, state: NodeStateChange, reason: Option<String>) {
        self.slurm_updates.entry((state, reason)).or_default().insert(node.to_string());
    }

    /// Tell Slurm to take a node out of service and back to powered-down (requeueing its job), unless
    /// Slurm already has it powered down.
    fn power_down_force(&mut self, node: &str, reason: &str) {
        let needed = self.slurm_node(node).is_none_or(|s| !s.powered_down());
        if needed {
            self.slurm_update(
                node,
                NodeStateChange::PowerDownForce,
                Some(format!("{REASON_PREFIX} {reason}")),
            );
        }
    }

    /// Take a node Slurm has in service (a job may be running on it) out at once: DOWN first, then
    /// `power_down_force` (a round runs its DOWN updates first). A lone `power_down_force` on a node
    /// whose VM vanished under a running job leaves it COMPLETING; a second one then requeues the
    /// job again, and Slurm 24.11 sets its BeginTime two minutes ahead. DOWN requeues the job once
    /// and lets the node power down, on 22.05 and 24.11 alike (docs/slurm-facts.md).
    fn take_out_of_service(&mut self, node: &str, reason: &str) {
        if self.slurm_node(node).is_some_and(|s| s.in_service()) {
            self.slurm_update(node, NodeStateChange::Down, Some(format!("{REASON_PREFIX} {reason}")));
        }
        self.power_down_force(node, reason);
    }

    /// The job that was waiting for `node` was requeued by slurm-dws before the node got a VM: let it start
    /// again now, not after Slurm's requeue hold. While the nodeset backs off its powered-down nodes
    /// are drained (`fallback.rs`): a job that names another partition starts there at once, and
    /// one that names only this nodeset's waits for the drain to be lifted at the backoff's end.
    fn job_may_start_again(&mut self, node: &str) {
        let Some(n) = self.nodes.get(node) else { return };
        let Some(job) = n.job_id else { return };
        self.job_begins.entry(self.now).or_default().insert(job);
    }

    /// Deletes an observed VM from its MIG (batched per MIG in [`Planner::finish`]).
    fn delete_vm(&mut self, mig: &str, vm: &ObservedVm) {
        self.delete_instances.entry(mig.to_string()).or_default().insert(VmRef::of(vm));
    }

    /// The node's VM is gone: its end-of-life reservation goes too.
    fn drop_reservation(&mut self, name: &str) {
        if self.nodes.get(name).is_some_and(|n| n.reservation.is_some()) {
            if let Some(r) = self.nodes.get_mut(name).and_then(|n| n.reservation.take()) {
                self.delete_reservation(&r, name, "the node's VM is gone");
            }
        }
    }

    /// Deletes an end-of-life reservation, with an event saying why.
    fn delete_reservation(&mut self, reservation: &str, node: &str, why: &str) {
        self.plan.slurm.push(SlurmStep::DeleteReservation { name: reservation.to_string() });
        self.plan.event(
            EventKind::ReservationDeleted,
            vec![node.to_string()],
            format!("end-of-life reservation {reservation} removed: {why}"),
        );
    }

    /// Whether both Slurm's nodes and GCE's VMs and MIGs were read this pass (none reused from an
    /// earlier one): only then may
    /// something be deleted because nothing explains it (a VM, a MIG, a reservation). With one of
    /// them unread, a node running a job may simply not be on record yet (database lost).
    fn saw_everything(&self) -> bool {
        self.o.slurm.is_some()
            && self.o.vms.is_some()
            && self.o.migs.is_some()
            && !self.o.reused
            && !self.o.migs_reused
            && self.o.unlisted_regions.is_empty()
    }

    fn clear_vm(&mut self, name: &str) {
        if self
            .nodes
            .get(name)
            .is_some_and(|n| n.vm_status.is_some() || n.termination_time.is_some() || n.topology.is_some())
        {
            if let Some(n) = self.nodes.get_mut(name) {
                n.vm_status = None;
                n.termination_time = None;
                n.topology = None;
            }
        }
    }

    /// Whether `mig` is being deleted already, is known to be gone, or is planned for deletion.
    fn deleting_mig(&self, mig: &str) -> bool {
        let deleting = self.migs.get(mig).is_some_and(|m| m.state == MigState::Deleting);
        let seen = self.o.migs.as_ref().is_none_or(|m| m.contains_key(mig));
        deleting
            || !seen
            || self.plan.gce.iter().any(|s| matches!(s, GceStep::DeleteMig { mig: m, .. } if m == mig))
    }

    /// Deletes `mig` unless it is being deleted already, is known to be gone, or is planned for deletion.
    fn delete_mig(&mut self, mig: &str, reason: &str) {
        if !self.deleting_mig(mig) {
            self.plan.gce.push(GceStep::DeleteMig { mig: mig.to_string(), reason: reason.to_string() });
        }
    }

    /// Batches the steps the rules collected and returns the round's plan: only records that changed.
    fn finish(mut self) -> Plan {
        for (mig, names) in std::mem::take(&mut self.delete_instances) {
            let names: Vec<VmRef> = names.into_iter().collect();
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
        for (ns, b) in &self.backoffs {
            if self.backoffs_before.get(ns) != Some(b) {
                self.plan.backoffs_set.push(b.clone());
            }
        }
        for ns in self.backoffs_before.keys().filter(|ns| !self.backoffs.contains_key(*ns)) {
            self.plan.backoffs_cleared.push(ns.clone());
        }
        for (node, r) in std::mem::take(&mut self.repairs) {
            if self.repairs_before.get(&node) != Some(&r) {
                self.plan.repairs.push(r);
            }
        }
        self.plan.nodes = self.nodes.into_changes();
        self.plan.requests = self.requests.into_changes();
        self.plan.migs = self.migs.into_changes();
        self.plan
    }
}

/// What a pass knows of one node's VM ([`Planner::sight`]).
#[derive(Debug, Clone, Copy)]
enum Sight<'a> {
    Seen(&'a ObservedVm),
    /// Not in a list that answered for every zone the VM could be in.
    Gone,
    /// The list failed, or a zone the VM could be in did not answer: nothing is concluded.
    Unknown,
}

/// GCE shows a VM whose deletion is under way as STOPPING until it is gone: asking again would only
/// repeat the call every pass (and a dying VM must not be adopted). PENDING_STOP and DEPROVISIONING
/// are on the same way out. A VM that stops and stays stopped (TERMINATED) has failed
/// ([`VmStatus::stays_down`]): it is deleted.
fn being_deleted(vm: &ObservedVm) -> bool {
    vm.status.going_away()
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
        topology: None,
        maintenance: None,
    }
}
