//! The planner's inputs and outputs: what the store wants, what GCE and Slurm show, and the steps to take.

use crate::config::Config;
use crate::model::*;
use crate::naming::Naming;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// The slice of the configuration the planner decides with, built once from `config::Config` (and
/// again on a reload) and held by the [`Reconciler`](super::Reconciler).
#[derive(Debug, Clone)]
pub struct PlanConfig {
    /// Node names ↔ (nodeset, index) and the nodesets' sizes: the one classifier of node names that
    /// ingest, the planner and the GCE edge use.
    pub naming: Naming,
    pub region: String,
    pub orphan_grace: i64,
    pub mig_gc_grace: i64,
    pub backoff_initial: i64,
    pub backoff_max: i64,
    pub internal_ip: bool,
    pub nodesets: BTreeMap<String, NodesetPlan>,
}

/// Per-nodeset settings the planner needs (its node counts are in [`PlanConfig::naming`]).
#[derive(Debug, Clone)]
pub struct NodesetPlan {
    pub name: String,
    /// The region of its MIGs (`[[nodeset]] region`, by default `gcp.region`).
    pub region: String,
    /// The zones its MIGs spread over: where its nodes' VMs can be.
    pub zones: Vec<String>,
    pub max_run_duration: u64,
    pub use_job_duration: bool,
    pub boot_allowance: u64,
    pub queue_timeout: u64,
    pub eol_grace: u64,
    /// Flex (resize requests) or standard / spot (`createInstances` by name, no run duration).
    pub model: crate::config::ProvisioningModel,
    /// `exclusive`: a dynamic node's VM goes as soon as the job it was resumed for ends (`release.rs`).
    pub exclusive: bool,
    /// `fallback_after`: seconds a request may stay queued before the nodeset's powered-down nodes
    /// are made unschedulable; 0 = only on a failure (`fallback.rs`).
    pub fallback_after: u64,
    /// The name of the workload policy slurm-dws owns for it (`[nodeset.placement]` with a
    /// distance or accelerator topology), created before its first MIG.
    pub owned_policy: Option<String>,
    /// A `reservation` nodeset's reservation (or future reservation) URL, as configured.
    pub reservation: Option<String>,
    /// `maintenance_reservation`: a Slurm reservation over a maintenance window GCE announces for
    /// one of its nodes' VMs (`plan/maintenance.rs`).
    pub maintenance_reservation: bool,
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
    /// Each node's last repair, by node (`plan/repair.rs`).
    pub repairs: BTreeMap<String, Repair>,
}

/// A VM as GCE lists it (only VMs whose name starts with `{cluster}-`).
#[derive(Debug, Clone, PartialEq)]
pub struct ObservedVm {
    pub name: String,
    /// The zone it runs in (from the aggregated list's scope `zones/{zone}` or the VM's `zone`).
    pub zone: String,
    pub status: VmStatus,
    /// The MIG that created it (from the `created-by` metadata), by name.
    pub mig: Option<String>,
    pub created: Option<DateTime<Utc>>,
    /// GCE's `id` (tells two VMs of one name apart: the usage spans); `None` when GCE gave none.
    /// A number, not its decimal string: 8 bytes a VM, no allocation.
    pub id: Option<std::num::NonZeroU64>,
    pub termination: Option<DateTime<Utc>>,
    pub network_ip: Option<String>,
    /// `resourceStatus.physicalHostTopology` as `CLUSTER/BLOCK/SUBBLOCK/HOST` (null parts empty).
    pub topology: Option<String>,
    /// `scheduling.provisioningModel` is RESERVATION_BOUND: a repair reports its host faulty
    /// instead of replacing it (`plan/repair.rs`).
    pub reservation_bound: bool,
    /// `resourceStatus.upcomingMaintenance`: the maintenance GCE announced for it (boxed: most VMs
    /// have none, and this keeps every other VM as small as before).
    pub maintenance: Option<Box<Maintenance>>,
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
    /// The name of its workload policy (`resourcePolicies.workloadPolicy`), if any.
    pub workload_policy: Option<String>,
}

/// What a `get` of a resize request found.
#[derive(Debug, Clone, PartialEq)]
pub enum PolledRequest {
    Found(ObservedRequest),
    /// GCE answered 404: the request does not exist (its insert never took effect, or its MIG is gone).
    NotFound,
}

impl From<ObservedRequest> for PolledRequest {
    fn from(r: ObservedRequest) -> PolledRequest {
        PolledRequest::Found(r)
    }
}

/// A resize request as GCE reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct ObservedRequest {
    pub state: GceRequestState,
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

impl ObservedRequest {
    /// A request in `state` with nothing else known (what a finished step tells the next round).
    pub fn in_state(state: GceRequestState) -> ObservedRequest {
        ObservedRequest {
            state,
            error: None,
            capacity_error: false,
            last_attempt: None,
            instances: Vec::new(),
            run_duration: None,
        }
    }
}

/// The Slurm node flags the planner decides on (docs/slurm-facts.md, "Node states").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlurmFlag {
    /// No VM: Slurm expects none (`~` in `sinfo`).
    PoweredDown,
    /// Slurm ran SuspendProgram and waits `SuspendTimeout` before the node counts as powered down.
    PoweringDown,
    /// Slurm ran ResumeProgram and waits for the node to register (`#` in `sinfo`).
    PoweringUp,
}

impl SlurmFlag {
    /// The flag as `sinfo --json` spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            SlurmFlag::PoweredDown => "POWERED_DOWN",
            SlurmFlag::PoweringDown => "POWERING_DOWN",
            SlurmFlag::PoweringUp => "POWERING_UP",
        }
    }
}

/// A node's state flags as a set: upper case, sorted, kept as one comma-separated string, because a
/// collection of a few short words per node is one small allocation per word, and at 10,000 nodes
/// those add up to megabytes of a pass's peak memory (`make bench`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Flags(String);

impl Flags {
    pub fn contains(&self, flag: SlurmFlag) -> bool {
        self.iter().any(|f| f == flag.as_str())
    }

    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.0.split(',').filter(|f| !f.is_empty())
    }
}

impl<S: AsRef<str>> FromIterator<S> for Flags {
    fn from_iter<I: IntoIterator<Item = S>>(iter: I) -> Flags {
        // Slurm prints its flags in upper case already: copied only when they are not (10,000 nodes'
        // flags are made every pass).
        let items: Vec<S> = iter.into_iter().collect();
        let mut words: Vec<std::borrow::Cow<str>> = items
            .iter()
            .map(|f| {
                let w = f.as_ref().trim();
                if w.bytes().all(|b| b.is_ascii() && !b.is_ascii_lowercase()) {
                    std::borrow::Cow::Borrowed(w)
                } else {
                    std::borrow::Cow::Owned(w.to_uppercase())
                }
            })
            .collect();
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
    pub fn has(&self, flag: SlurmFlag) -> bool {
        self.flags.contains(flag)
    }
    /// Any flag, as Slurm spells it upper case (`DRAIN`, `COMPLETING`, ...).
    pub fn has_flag(&self, flag: &str) -> bool {
        self.flags.iter().any(|f| f == flag)
    }
    /// Slurm believes the node is powered down (or about to be) — it expects no VM.
    pub fn powered_down(&self) -> bool {
        self.has(SlurmFlag::PoweredDown) || self.has(SlurmFlag::PoweringDown)
    }
    pub fn powering_up(&self) -> bool {
        self.has(SlurmFlag::PoweringUp)
    }
    pub fn is_down(&self) -> bool {
        self.state == "down"
    }
    /// Slurm hears from the node's slurmd: neither powering up or down, nor powered down, nor
    /// not responding (a DOWN node may be responding).
    pub fn responding(&self) -> bool {
        !self.powering_up() && !self.powered_down() && !self.has_flag("NOT_RESPONDING")
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
    /// Zones the VM list left out this pass (GCE's partial success: `UNREACHABLE`). A VM there is
    /// unknown, not gone: nothing is decided from its absence ([`Observed::vm_zone_unknown`]).
    pub unreachable_zones: BTreeSet<String>,
    /// VMs this pass had GCE delete (learnt from the steps done, not listed): their names stay taken
    /// until a list no longer shows them, so none is requested again in the same pass.
    pub deleting: BTreeSet<String>,
    /// Nodesets whose instance template cannot work for DWS Flex Start, with why
    /// (`gce::flex_template_problems`): nothing is requested for their nodes.
    pub refused_nodesets: BTreeMap<String, String>,
    /// Owned MIGs by name; `None` when the list failed this pass. With nodesets in several regions
    /// it is one list per region: a region whose list failed ([`Observed::unlisted_regions`]) has
    /// its recorded MIGs carried here as last recorded, so it degrades only its own nodesets.
    pub migs: Option<BTreeMap<String, ObservedMig>>,
    /// The region each MIG of [`Observed::migs`] was listed (or is recorded) in.
    pub mig_regions: BTreeMap<String, String>,
    /// Regions whose MIG list failed this pass: their MIGs are carried, not listed, so nothing
    /// is decided from a MIG's absence there and nothing is collected as stale.
    pub unlisted_regions: BTreeSet<String>,
    /// Resize requests by MIG name: the active request of each recorded group, and the request of each
    /// owned MIG the store has no record of (so that it can be adopted) — as polled this pass, or, for
    /// a request the poll schedule did not ask about (`poll.rs`), carried: the state it was last seen
    /// in. A MIG whose request was never seen by this process, or whose poll failed, is absent:
    /// nothing is decided about it.
    pub requests: BTreeMap<String, PolledRequest>,
    /// Slurm's nodes by name; `None` when Slurm did not answer.
    pub slurm: Option<BTreeMap<String, SlurmNode>>,
    /// When this daemon took charge from another controller's (`daemon::role`), if it did: a node
    /// Slurm shows powering up that slurm-dws has had no request for since before then lost its
    /// hook record with the old controller's host, and is provisioned without the drift grace.
    pub took_charge_at: Option<DateTime<Utc>>,
    /// Time limits of the jobs that resume nodes, from `squeue --json`.
    pub job_limits: BTreeMap<u32, JobLimit>,
    /// Names of Slurm reservations slurm-dws made (prefixes `slurm-dws-eol-` and `slurm-dws-maint-`)
    /// that exist now.
    pub reservations: Option<BTreeSet<String>>,
    /// The jobs the up nodes of `exclusive` nodesets were resumed for, as `squeue` shows them (a
    /// job that has ended and left Slurm's memory is absent); `None` when squeue was not asked or
    /// did not answer: then no node is released (`release.rs`).
    pub exclusive_jobs: Option<BTreeMap<u32, ObservedJob>>,
    /// An inbox-first pass's observation (`Reconciler::pass`): the VMs and MIGs are the last full
    /// pass's, as that pass left them; Slurm is unknown and no request was polled. A waiting node
    /// whose name it shows a VM under waits for a fresh list, and nothing is deleted as stale.
    pub reused: bool,
    /// The MIG list is an earlier pass's, kept because nothing could have changed it
    /// (docs/architecture.md, "Reads a pass skips"): nothing is deleted as stale this pass.
    pub migs_reused: bool,
    /// The workload policies slurm-dws owns in the regions listed, by name; `None` when no region
    /// was listed this pass (then none is created or deleted).
    pub policies: Option<BTreeMap<String, ObservedPolicy>>,
    /// Regions whose policy list failed this pass: no policy there is created or deleted.
    pub unlisted_policy_regions: BTreeSet<String>,
    /// `slurm-dws repair` asks recorded since the last pass took them (`plan/repair.rs`).
    pub repair_asks: Vec<RepairAsk>,
    /// The reserved capacity of each `reservation` nodeset, as GCE shows it this pass; a nodeset
    /// absent here was not read (its reads failed): nothing is concluded about its window.
    pub capacity: BTreeMap<String, ObservedCapacity>,
    /// The jobs Slurm shows (for the usage spans: who runs on which node); `None` when not read
    /// this pass (then no job span opens or closes).
    pub jobs: Option<Vec<SlurmJob>>,
    /// slurmdbd's runs (`sacct`) of the jobs of spans restored at start that Slurm no longer shows
    /// (`plan/usage.rs`); `None` when not asked (no slurmdbd, nothing to ask, or `sacct` failed).
    pub job_runs: Option<Vec<JobRun>>,
}

/// A reservation nodeset's capacity and window as GCE shows it (`gce_edge/reserved.rs`); the pass
/// report carries it as is (`PassReport::reserved`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObservedCapacity {
    /// The reservation (or block, or sub-block) the VMs consume, as configured or as the future
    /// reservation delivered it; `None` while a calendar-mode booking has delivered none.
    pub reservation: Option<String>,
    /// How many VMs it holds, and how many are in use (ours and anyone else's).
    pub count: u32,
    pub in_use: u32,
    /// When the VMs may start consuming it (a calendar-mode window's start); `None`: already.
    pub window_start: Option<DateTime<Utc>>,
    /// When GCE deletes it and every VM on it; `None`: never (an ordinary reservation).
    pub window_end: Option<DateTime<Utc>>,
    /// Why it cannot be consumed now, in GCE's words: not there, not READY, another machine type
    /// or zone, a booking that failed or was cancelled. `None`: usable (inside its window).
    pub unusable: Option<String>,
}

impl ObservedCapacity {
    /// VMs that could be made on it now.
    pub fn free(&self) -> u32 {
        self.count.saturating_sub(self.in_use)
    }
}

/// A workload policy slurm-dws owns (`policies.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedPolicy {
    pub name: String,
    /// The nodeset it was made for (from its description; it may be gone from the config).
    pub nodeset: String,
    /// The region it is in.
    pub region: String,
}

/// A job as the release rule reads it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ObservedJob {
    /// Upper case, as squeue prints it (`RUNNING`, `PENDING`, `COMPLETED`, `CONFIGURING`...).
    pub state: String,
    /// The nodes it holds now (empty while pending); `None` when Slurm's hostlist could not be read
    /// (then the job is taken to hold every node it was resumed on).
    pub nodes: Option<BTreeSet<String>>,
}

impl ObservedJob {
    /// The job still holds `node`: running (or starting, or completing) there.
    pub fn holds(&self, node: &str) -> bool {
        let live = matches!(
            self.state.as_str(),
            "RUNNING" | "CONFIGURING" | "COMPLETING" | "SUSPENDED" | "STOPPED" | "SIGNALING" | "STAGE_OUT"
        );
        live && self.nodes.as_ref().is_none_or(|n| n.contains(node))
    }
}

impl Observed {
    /// Whether a VM of nodeset `nodeset` (with `zones`, `None` when the nodeset is not configured)
    /// could be in a zone the VM list left out: then its absence means nothing. A zone no configured
    /// nodeset names (one a reload removed) may hold any node's VM.
    pub fn vm_zone_unknown(&self, zones: Option<&[String]>, all: &BTreeMap<String, NodesetPlan>) -> bool {
        if self.unreachable_zones.is_empty() {
            return false;
        }
        let in_zones = zones.is_some_and(|z| z.iter().any(|z| self.unreachable_zones.contains(z)));
        let unclaimed = self.unreachable_zones.iter().any(|u| !all.values().any(|n| n.zones.contains(u)));
        in_zones || unclaimed || zones.is_none()
    }
}

/// A VM to delete from its MIG: its name and the zone the pass saw it in. A regional MIG's
/// `deleteInstances` takes instance URLs only, never bare names (docs/gce-facts.md, "MIGs").
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct VmRef {
    pub name: String,
    pub zone: String,
}

impl VmRef {
    /// The VM of an observation.
    pub fn of(vm: &ObservedVm) -> VmRef {
        VmRef { name: vm.name.clone(), zone: vm.zone.clone() }
    }

    /// The partial URL `zones/{zone}/instances/{name}` a regional `deleteInstances` takes.
    pub fn url(&self) -> String {
        format!("zones/{}/instances/{}", self.zone, self.name)
    }
}

/// A GCE mutation to make. The executor finds or writes its outbox entry first.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "step", rename_all = "snake_case")]
pub enum GceStep {
    InsertMig {
        request: i64,
        mig: String,
        nodeset: String,
    },
    InsertResizeRequest {
        request: i64,
        mig: String,
    },
    /// Standard and spot groups: `createInstances` of the group's node names in its MIG (a group
    /// holds at most [`MAX_GROUP`](super::plan::MAX_GROUP) nodes: one call, within GCE's limit).
    CreateInstances {
        request: i64,
        mig: String,
    },
    CancelResizeRequest {
        request: i64,
        mig: String,
    },
    DeleteInstances {
        mig: String,
        instances: Vec<VmRef>,
    },
    DeleteMig {
        mig: String,
        reason: String,
    },
    /// Create the workload policy slurm-dws owns for `nodeset` (before its first MIG).
    InsertPolicy {
        policy: String,
        nodeset: String,
        /// The nodeset's region.
        region: String,
    },
    /// Delete an owned workload policy no MIG uses, of a nodeset gone from the config.
    DeletePolicy {
        policy: String,
        /// The region it is in (as listed: its nodeset may be gone from the config).
        region: String,
        reason: String,
    },
    /// `instances.reportHostAsFaulty` of a reservation-bound VM (`plan/repair.rs`):
    /// disruptionSchedule IMMEDIATE, one fault reason.
    ReportHostAsFaulty {
        node: String,
        vm: VmRef,
        behavior: FaultBehavior,
        description: String,
    },
}

/// Which kind of [`GceStep`] (the pass report's `step`), named as the step serializes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GceStepKind {
    InsertMig,
    InsertResizeRequest,
    CreateInstances,
    CancelResizeRequest,
    DeleteInstances,
    DeleteMig,
    InsertPolicy,
    DeletePolicy,
    ReportHostAsFaulty,
}

impl GceStepKind {
    pub fn as_str(self) -> &'static str {
        match self {
            GceStepKind::InsertMig => "insert_mig",
            GceStepKind::InsertResizeRequest => "insert_resize_request",
            GceStepKind::CreateInstances => "create_instances",
            GceStepKind::CancelResizeRequest => "cancel_resize_request",
            GceStepKind::DeleteInstances => "delete_instances",
            GceStepKind::DeleteMig => "delete_mig",
            GceStepKind::InsertPolicy => "insert_policy",
            GceStepKind::DeletePolicy => "delete_policy",
            GceStepKind::ReportHostAsFaulty => "report_host_as_faulty",
        }
    }
}

impl std::fmt::Display for GceStepKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl GceStep {
    pub fn kind(&self) -> GceStepKind {
        match self {
            GceStep::InsertMig { .. } => GceStepKind::InsertMig,
            GceStep::InsertResizeRequest { .. } => GceStepKind::InsertResizeRequest,
            GceStep::CreateInstances { .. } => GceStepKind::CreateInstances,
            GceStep::CancelResizeRequest { .. } => GceStepKind::CancelResizeRequest,
            GceStep::DeleteInstances { .. } => GceStepKind::DeleteInstances,
            GceStep::DeleteMig { .. } => GceStepKind::DeleteMig,
            GceStep::InsertPolicy { .. } => GceStepKind::InsertPolicy,
            GceStep::DeletePolicy { .. } => GceStepKind::DeletePolicy,
            GceStep::ReportHostAsFaulty { .. } => GceStepKind::ReportHostAsFaulty,
        }
    }

    /// The MIG the step is about (for a policy step: the policy; for a host report: the VM).
    pub fn mig(&self) -> &str {
        match self {
            GceStep::InsertMig { mig, .. }
            | GceStep::InsertResizeRequest { mig, .. }
            | GceStep::CreateInstances { mig, .. }
            | GceStep::CancelResizeRequest { mig, .. }
            | GceStep::DeleteInstances { mig, .. }
            | GceStep::DeleteMig { mig, .. } => mig,
            GceStep::InsertPolicy { policy, .. } | GceStep::DeletePolicy { policy, .. } => policy,
            GceStep::ReportHostAsFaulty { vm, .. } => &vm.name,
        }
    }

    /// The request group the step is for, when it is for one.
    pub fn request(&self) -> Option<i64> {
        match self {
            GceStep::InsertMig { request, .. }
            | GceStep::InsertResizeRequest { request, .. }
            | GceStep::CreateInstances { request, .. }
            | GceStep::CancelResizeRequest { request, .. } => Some(*request),
            GceStep::DeleteInstances { .. }
            | GceStep::DeleteMig { .. }
            | GceStep::InsertPolicy { .. }
            | GceStep::DeletePolicy { .. }
            | GceStep::ReportHostAsFaulty { .. } => None,
        }
    }
}

/// The `state=` of an `scontrol update nodename=...` slurm-dws makes (docs/slurm-facts.md,
/// "Changing Slurm's state"). Declared in the order a round runs them whatever the reasons: the
/// first four in the order of their names, then the release of exclusive nodes, then drains and
/// undrains, which mark nodes whose power state the earlier updates settled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeStateChange {
    /// Out of service with a reason (a static node being re-provisioned, a node that is not ours).
    Down,
    /// Back to powered-down at once, requeueing its job.
    PowerDownForce,
    /// Power the node up (Slurm runs the resume hook).
    PowerUp,
    /// Clear a DOWN state slurm-dws set: usable again.
    Resume,
    /// Power an idle node down once nothing runs on it, taking no new job meanwhile (an
    /// `exclusive` node whose job ended; `release.rs`, docs/slurm-facts.md).
    PowerDownAsap,
    /// Keep the scheduler off a powered-down node of a nodeset that cannot get capacity now
    /// (`fallback.rs`). After the power updates of the round.
    Drain,
    /// Clear a drain slurm-dws set for a fallback: schedulable again.
    Undrain,
}

impl NodeStateChange {
    /// As `scontrol` spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            NodeStateChange::Down => "down",
            NodeStateChange::PowerDownForce => "power_down_force",
            NodeStateChange::PowerUp => "power_up",
            NodeStateChange::Resume => "resume",
            NodeStateChange::PowerDownAsap => "power_down_asap",
            NodeStateChange::Drain => "drain",
            NodeStateChange::Undrain => "undrain",
        }
    }
}

impl std::fmt::Display for NodeStateChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A Slurm change to make (batched by the executor: one call per distinct action).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(tag = "step", rename_all = "snake_case")]
pub enum SlurmStep {
    /// `scontrol update nodename=... state=STATE reason=...`
    UpdateState {
        nodes: Vec<String>,
        state: NodeStateChange,
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
    /// `scontrol requeue` of the jobs running on `nodes` (a repair: `plan/repair.rs`). After the
    /// node updates of the round, which drain the nodes first.
    RequeueJobsOn {
        nodes: Vec<String>,
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
    pub gce_state: GceRequestState,
}

/// An event to append.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NewEvent {
    pub kind: EventKind,
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
    /// Repairs whose record changes (full new values).
    pub repairs: Vec<Repair>,
    /// The repair asks of [`Observed::repair_asks`] the round took.
    pub repair_asks_taken: Vec<i64>,
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
            && self.repairs.is_empty()
            && self.repair_asks_taken.is_empty()
    }

    pub(crate) fn event(&mut self, kind: EventKind, nodes: Vec<String>, message: impl Into<String>) {
        self.events.push(NewEvent { kind, nodes, message: message.into() });
    }
}

impl PlanConfig {
    /// The region of `nodeset`'s MIGs; `gcp.region` for a nodeset no longer configured.
    pub fn region_of(&self, nodeset: &str) -> &str {
        self.nodesets.get(nodeset).map_or(self.region.as_str(), |n| n.region.as_str())
    }

    /// The planner's view of `cfg`.
    pub fn new(cfg: &Config) -> PlanConfig {
        PlanConfig {
            naming: Naming::new(cfg),
            region: cfg.gcp.region.clone(),
            orphan_grace: cfg.reconcile.orphan_grace as i64,
            mig_gc_grace: cfg.reconcile.mig_gc_grace as i64,
            backoff_initial: cfg.reconcile.backoff_initial as i64,
            backoff_max: cfg.reconcile.backoff_max as i64,
            internal_ip: cfg.slurm.node_addr == crate::config::NodeAddr::InternalIp,
            nodesets: cfg
                .nodesets
                .iter()
                .map(|n| {
                    let plan = NodesetPlan {
                        name: n.name.clone(),
                        region: n.region.clone(),
                        zones: n.zones.clone(),
                        max_run_duration: n.dws_flex.max_run_duration,
                        use_job_duration: n.dws_flex.use_job_duration,
                        boot_allowance: n.dws_flex.boot_allowance,
                        queue_timeout: n.dws_flex.queue_timeout,
                        eol_grace: n.reservation.as_ref().map_or(n.dws_flex.eol_grace, |r| r.eol_grace),
                        model: n.provisioning_model,
                        exclusive: n.exclusive,
                        fallback_after: n.fallback_after,
                        owned_policy: matches!(n.placement, Some(crate::config::Placement::Owned { .. }))
                            .then(|| crate::naming::policy_name(&cfg.cluster_name, &n.name)),
                        reservation: n.reservation.as_ref().map(|r| r.source.url()),
                        maintenance_reservation: n.maintenance_reservation,
                    };
                    (n.name.clone(), plan)
                })
                .collect(),
        }
    }
}

/// A job as `squeue` shows it, for the usage rule.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SlurmJob {
    pub job_id: u64,
    /// Upper case, the base state (`RUNNING`, `COMPLETED`, ...; on 22.05 a flag such as
    /// `CONFIGURING` may stand in its place).
    pub state: String,
    /// The job waits for its nodes to boot (`CONFIGURING`): not busy yet.
    pub configuring: bool,
    /// The nodes it holds, as Slurm's hostlist expression.
    pub nodes: String,
    pub user: String,
    pub account: String,
    pub partition: String,
    pub start: Option<DateTime<Utc>>,
    pub end: Option<DateTime<Utc>>,
}

impl SlurmJob {
    /// Running on its nodes (its nodes up): busy time.
    pub fn runs(&self) -> bool {
        !self.configuring
            && matches!(self.state.as_str(), "RUNNING" | "COMPLETING" | "SUSPENDED" | "STOPPED" | "SIGNALING")
    }
}

/// One run of a job as slurmdbd's accounting (`sacct`) keeps it, for the usage rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobRun {
    pub job_id: u64,
    pub start: Option<DateTime<Utc>>,
    /// `None` while it waits or runs.
    pub end: Option<DateTime<Utc>>,
}
