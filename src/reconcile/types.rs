//! The planner's inputs and outputs: what the store wants, what GCE and Slurm show, and the steps to take.

use crate::model::*;
use chrono::{DateTime, Utc};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// The slice of the configuration the planner decides with (built from `config::Config`).
#[derive(Debug, Clone)]
pub struct PlanConfig {
    pub cluster_name: String,
    pub region: String,
    pub orphan_grace: i64,
    pub mig_gc_grace: i64,
    pub backoff_initial: i64,
    pub backoff_max: i64,
    pub internal_ip: bool,
    pub nodesets: BTreeMap<String, NodesetPlan>,
}

/// Per-nodeset settings the planner needs.
#[derive(Debug, Clone)]
pub struct NodesetPlan {
    pub name: String,
    pub node_count_static: u32,
    pub node_count_dynamic_max: u32,
    pub max_run_duration: u64,
    pub use_job_duration: bool,
    pub boot_allowance: u64,
    pub queue_timeout: u64,
    pub eol_grace: u64,
}

/// A job's time limit as Slurm reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobLimit {
    Minutes(u64),
    Unlimited,
    /// Slurm did not say (job gone, squeue failed, partition default unknown).
    Unknown,
}

/// What slurm-dws has recorded: the desired state.
#[derive(Debug, Clone, Default)]
pub struct Desired {
    pub nodes: BTreeMap<String, Node>,
    /// Request groups that are not `done`, by id.
    pub requests: BTreeMap<i64, Request>,
    /// MIGs not deleted, by name.
    pub migs: BTreeMap<String, Mig>,
    pub backoffs: BTreeMap<String, Backoff>,
}

/// A VM as GCE lists it (only VMs whose name starts with `{cluster}-`).
#[derive(Debug, Clone, PartialEq)]
pub struct ObservedVm {
    pub name: String,
    pub status: String,
    /// The MIG that created it (from the `created-by` metadata), by name.
    pub mig: Option<String>,
    pub created: Option<DateTime<Utc>>,
    pub termination: Option<DateTime<Utc>>,
    pub network_ip: Option<String>,
}

/// A MIG as GCE lists it, already proven ours (name prefix and description).
#[derive(Debug, Clone, PartialEq)]
pub struct ObservedMig {
    pub name: String,
    pub nodeset: String,
    pub tag: String,
    pub job_id: Option<u32>,
    pub target_size: u32,
    pub created: Option<DateTime<Utc>>,
}

/// A resize request as GCE reports it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ObservedRequest {
    pub state: String,
    /// The final error (`status.error.errors[0]`): (code, message), set on FAILED.
    pub error: Option<(String, String)>,
    /// Capacity or quota (decides the backoff).
    pub capacity_error: bool,
    /// The transient `status.lastAttempt` error while ACCEPTED.
    pub last_attempt: Option<String>,
    /// The VM names it asks for (read only when adopting a request the store lost).
    pub instances: Vec<String>,
    /// `requestedRunDuration` in seconds.
    pub run_duration: Option<u64>,
}

/// A node's state flags as a set: upper case, sorted, kept as one comma-separated string. (A set of
/// a few short words per node, at 10,000 nodes, was megabytes of small allocations: `make bench`.)
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Flags(String);

impl Flags {
    pub fn contains(&self, flag: &str) -> bool {
        self.iter().any(|f| f == flag)
    }

    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.0.split(',').filter(|f| !f.is_empty())
    }
}

impl<S: AsRef<str>> FromIterator<S> for Flags {
    fn from_iter<I: IntoIterator<Item = S>>(iter: I) -> Flags {
        let mut words: Vec<String> = iter.into_iter().map(|f| f.as_ref().trim().to_uppercase()).collect();
        words.retain(|w| !w.is_empty() && !w.contains(','));
        words.sort();
        words.dedup();
        Flags(words.join(","))
    }
}

/// A node as Slurm shows it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SlurmNode {
    /// Base state, lower case: idle, allocated, mixed, down, ...
    pub state: String,
    /// Upper-case flags: CLOUD, POWERED_DOWN, POWERING_UP, POWERING_DOWN, NOT_RESPONDING, DRAIN, ...
    pub flags: Flags,
    pub reason: String,
}

impl SlurmNode {
    pub fn has(&self, flag: &str) -> bool {
        self.flags.contains(flag)
    }
    /// Slurm believes the node is powered down (or about to be) — it expects no VM.
    pub fn powered_down(&self) -> bool {
        self.has("POWERED_DOWN") || self.has("POWERING_DOWN")
    }
    pub fn powering_up(&self) -> bool {
        self.has("POWERING_UP")
    }
    pub fn is_down(&self) -> bool {
        self.state == "down"
    }
    /// Up and usable or in use, as far as Slurm is concerned.
    pub fn in_service(&self) -> bool {
        !self.powered_down() && !self.powering_up() && !self.is_down()
    }
}

/// What GCE and Slurm show now.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    /// GCE's VMs by name; `None` when the list failed this pass (then nothing is decided from absence).
    pub vms: Option<BTreeMap<String, ObservedVm>>,
    /// Owned MIGs by name; `None` when the list failed this pass.
    pub migs: Option<BTreeMap<String, ObservedMig>>,
    /// Resize requests polled this pass, by MIG name: the active request of each recorded group, and
    /// the request of each owned MIG the store has no record of (so that it can be adopted).
    pub requests: BTreeMap<String, ObservedRequest>,
    /// Slurm's nodes by name; `None` when Slurm did not answer.
    pub slurm: Option<BTreeMap<String, SlurmNode>>,
    /// Time limits of the jobs that resume nodes, from `squeue --json`.
    pub job_limits: BTreeMap<u32, JobLimit>,
    /// Names of Slurm reservations slurm-dws made (prefix `slurm-dws-eol-`) that exist now.
    pub reservations: Option<BTreeSet<String>>,
}

/// A GCE mutation to make. The executor finds or writes its outbox entry first.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "step", rename_all = "snake_case")]
pub enum GceStep {
    InsertMig { request: i64, mig: String, nodeset: String },
    InsertResizeRequest { request: i64, mig: String },
    CancelResizeRequest { request: i64, mig: String },
    DeleteInstances { mig: String, instances: Vec<String> },
    DeleteMig { mig: String, reason: String },
}

/// A Slurm change to make (batched by the executor: one call per distinct action).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(tag = "step", rename_all = "snake_case")]
pub enum SlurmStep {
    /// `scontrol update nodename=... state=STATE reason=...`
    UpdateState {
        nodes: Vec<String>,
        state: String,
        reason: Option<String>,
    },
    /// `scontrol update nodename=N nodeaddr=IP nodehostname=N`
    SetAddr {
        node: String,
        addr: String,
    },
    CreateReservation {
        name: String,
        node: String,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
    },
    DeleteReservation {
        name: String,
    },
    /// `scontrol update jobid=... starttime=BEGIN`: jobs Slurm requeued because slurm-dws released their
    /// nodes before any VM came may start again at `begin` (now, or when the capacity backoff ends)
    /// instead of after Slurm's two-minute requeue hold. Always after the node updates of the round.
    SetJobsBegin {
        jobs: Vec<u32>,
        begin: DateTime<Utc>,
    },
}

/// A new request group to record (MIG and request names derive from the tag the executor chooses).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NewGroup {
    pub nodeset: String,
    pub job_id: Option<u32>,
    pub nodes: Vec<String>,
    pub run_duration: u64,
}

/// A resize request found in GCE, in an owned MIG, that the store has no record of (the database was
/// lost or restored from an old backup, or a backup controller took over): recorded and followed
/// like one of ours, its nodes `requested`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AdoptedRequest {
    pub nodeset: String,
    pub job_id: Option<u32>,
    pub tag: String,
    pub mig: String,
    pub name: String,
    pub nodes: Vec<String>,
    pub run_duration: u64,
    pub gce_state: String,
}

/// An event to append.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NewEvent {
    pub kind: String,
    pub nodes: Vec<String>,
    pub message: String,
}

/// Everything one planning round decided.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// Nodes whose record changes (full new values).
    pub nodes: Vec<Node>,
    pub requests: Vec<Request>,
    pub migs: Vec<Mig>,
    pub new_groups: Vec<NewGroup>,
    pub adopted_requests: Vec<AdoptedRequest>,
    pub gce: Vec<GceStep>,
    pub slurm: Vec<SlurmStep>,
    pub events: Vec<NewEvent>,
    pub backoffs_set: Vec<Backoff>,
    pub backoffs_cleared: Vec<String>,
}

impl Plan {
    /// Nothing to write and nothing to do.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
            && self.requests.is_empty()
            && self.migs.is_empty()
            && self.new_groups.is_empty()
            && self.adopted_requests.is_empty()
            && self.gce.is_empty()
            && self.slurm.is_empty()
            && self.events.is_empty()
            && self.backoffs_set.is_empty()
            && self.backoffs_cleared.is_empty()
    }

    pub(crate) fn event(&mut self, kind: &str, nodes: Vec<String>, message: impl Into<String>) {
        self.events.push(NewEvent { kind: kind.to_string(), nodes, message: message.into() });
    }
}

impl PlanConfig {
    /// `(nodeset, index, is_static)` when `name` is `{cluster}-{nodeset}-{index}` of a configured
    /// nodeset with the index in range. Nodeset names hold no `-`, so the last `-` splits exactly:
    /// `x-gpu-1` is never mistaken for `x-gpu-10`, nor `gpu` for `gpu2`.
    pub fn node_ref(&self, name: &str) -> Option<(String, u32, bool)> {
        let rest = name.strip_prefix(&self.cluster_name)?.strip_prefix('-')?;
        let (nodeset, index) = rest.rsplit_once('-')?;
        if index.is_empty()
            || !index.bytes().all(|b| b.is_ascii_digit())
            || (index.len() > 1 && index.starts_with('0'))
        {
            return None;
        }
        let index: u32 = index.parse().ok()?;
        let ns = self.nodesets.get(nodeset)?;
        (index < ns.node_count_static + ns.node_count_dynamic_max)
            .then(|| (nodeset.to_string(), index, index < ns.node_count_static))
    }
}
