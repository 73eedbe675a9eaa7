//! The domain's nouns: nodes, resize-request groups, MIGs, events — shared by store, reconciler and CLI.
//!
//! These are plain values. The store persists them, the reconciler decides on them, the CLI prints them.
//! Every state of slurm-dws's own is a closed enum with a stable lower-case name, because the names
//! appear in the database, in `--json` output and in the docs, and must never drift between them.
//! The states GCE reports ([`VmStatus`], [`GceRequestState`]) are enums too, spelled as GCE spells them,
//! with one `Other` variant that keeps a value this version does not know as GCE sent it: GCE adds
//! states, and an unknown one must be shown and stored, never refused.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

macro_rules! string_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum $name { $($(#[$vmeta])* $variant),+ }

        impl $name {
            /// Every value, in declaration order (for listings and tests).
            pub const ALL: &'static [$name] = &[$($name::$variant),+];
            /// The stable name used in the database, JSON and docs.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result { f.write_str(self.as_str()) }
        }

        impl FromStr for $name {
            type Err = UnknownValue;
            fn from_str(s: &str) -> Result<Self, UnknownValue> {
                match s {
                    $($text => Ok($name::$variant),)+
                    other => Err(UnknownValue { kind: stringify!($name), value: other.to_string() }),
                }
            }
        }
    };
}

macro_rules! open_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $($(#[$vmeta])* $variant,)+
            /// A value this version does not know, kept as GCE sent it.
            Other(String),
        }

        impl $name {
            /// GCE's spelling, used in the database, JSON and docs.
            pub fn as_str(&self) -> &str {
                match self { $($name::$variant => $text,)+ $name::Other(s) => s }
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> $name {
                match s { $($text => $name::$variant,)+ other => $name::Other(other.to_string()) }
            }
        }

        impl From<String> for $name {
            fn from(s: String) -> $name {
                match $name::from(s.as_str()) { $name::Other(_) => $name::Other(s), known => known }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result { f.write_str(self.as_str()) }
        }

        impl Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<$name, D::Error> {
                String::deserialize(d).map($name::from)
            }
        }
    };
}

/// A stored value that is not one of the enum's names (a newer schema, or a corrupted row).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {kind} value '{value}'")]
pub struct UnknownValue {
    pub kind: &'static str,
    pub value: String,
}

string_enum! {
    /// slurm-dws's own view of a node: what it wants for the node and how far it got.
    NodeState {
        /// No VM, none wanted. The node is usable: Slurm may resume it at any time.
        PoweredDown => "powered_down",
        /// A VM is wanted (resume hook or static node) and no resize request covers it yet.
        ResumePending => "resume_pending",
        /// A resize request for the node exists and is not final (CREATING / ACCEPTED).
        Requested => "requested",
        /// The node's VM exists (its request SUCCEEDED or it was adopted).
        Up => "up",
        /// Slurm suspended the node (or its resume failed); its VM is being deleted.
        Suspending => "suspending",
    }
}

string_enum! {
    /// What a hook recorded in the inbox.
    HookKind {
        Resume => "resume",
        Suspend => "suspend",
        ResumeFail => "resume_fail",
    }
}

string_enum! {
    /// How far slurm-dws got with a resize-request group (one MIG + one resize request).
    RequestPhase {
        /// Recorded; the MIG is not known to exist yet.
        Planned => "planned",
        /// The MIG exists; the resize request is not known to exist yet.
        MigReady => "mig_ready",
        /// The resize request exists in GCE and is not final.
        Active => "active",
        /// The resize request is queued and some of its nodes were suspended: it is being cancelled
        /// (the only way to release a queued VM of a regional MIG), and its nodes still wanted are
        /// requested again in a new group once it is CANCELLED.
        Releasing => "releasing",
        /// The resize request SUCCEEDED: its VMs exist (or existed).
        Succeeded => "succeeded",
        /// FAILED, CANCELLED, queued past `queue_timeout`, or refused on insert.
        Failed => "failed",
        /// Every node of the group is gone and the MIG was deleted (or never made).
        Done => "done",
    }
}

impl RequestPhase {
    /// The group may still bring VMs: its MIG or resize request is being made, or the request is
    /// not final.
    pub fn is_open(&self) -> bool {
        matches!(
            self,
            RequestPhase::Planned | RequestPhase::MigReady | RequestPhase::Active | RequestPhase::Releasing
        )
    }

    /// The group's resize request exists in GCE and is not final: it is polled every pass.
    pub fn is_polled(&self) -> bool {
        matches!(self, RequestPhase::Active | RequestPhase::Releasing)
    }
}

string_enum! {
    /// slurm-dws's view of a MIG it owns.
    MigState {
        /// Insert sent (or about to be); not yet seen in GCE.
        Creating => "creating",
        /// Seen in GCE.
        Active => "active",
        /// Delete sent.
        Deleting => "deleting",
        /// Gone from GCE.
        Deleted => "deleted",
    }
}

string_enum! {
    /// The kinds of GCE mutation the outbox tracks.
    MutationKind {
        MigInsert => "mig_insert",
        ResizeRequestInsert => "resize_request_insert",
        ResizeRequestCancel => "resize_request_cancel",
        /// Standard and spot VMs created by name in a regional MIG.
        CreateInstances => "create_instances",
        DeleteInstances => "delete_instances",
        MigDelete => "mig_delete",
        /// A workload policy slurm-dws owns.
        PolicyInsert => "policy_insert",
        PolicyDelete => "policy_delete",
        /// `instances.reportHostAsFaulty` of a reservation-bound VM (`slurm-dws repair`).
        ReportHostAsFaulty => "report_host_as_faulty",
    }
}

string_enum! {
    /// The state of one outbox entry.
    OutboxState {
        /// Recorded, not yet known to have taken effect: a pass (re)sends it with the same requestId.
        Pending => "pending",
        /// GCE accepted it (its Operation finished, or the effect was observed).
        Done => "done",
        /// GCE refused it for good, or the intent became moot; an event says why.
        Abandoned => "abandoned",
        /// GCE acted and the Operation ended DONE with an error (or answered a 4xx that may pass):
        /// closed; the step's next attempt gets a new requestId after a backoff
        /// (`reconcile::gce_edge::step_retry`).
        Failed => "failed",
    }
}

string_enum! {
    /// What an event in the log is about. The names are what the store keeps and `events --json`
    /// prints; a name, once written, never changes meaning.
    EventKind {
        /// Slurm resumed nodes (the resume hook), and for which jobs.
        Resume => "resume",
        /// Slurm suspended nodes (the suspend hook).
        Suspend => "suspend",
        /// Slurm gave up resuming nodes (the resume-fail hook).
        ResumeFail => "resume_fail",
        /// The resume hook's `SLURM_RESUME_FILE` was absent or unreadable: the nodes are jobless.
        ResumeFile => "resume_file",
        /// A recorded hook call could not be read (a malformed hostlist): ignored.
        BadInput => "bad_input",
        /// A hook named a node that is not slurm-dws's: set DOWN in Slurm.
        NotOurs => "not_ours",
        /// A new request group: its MIG and resize request are about to be made.
        RequestPlanned => "request_planned",
        /// A resize request SUCCEEDED: its VMs exist.
        RequestSucceeded => "request_succeeded",
        /// A resize request FAILED, was CANCELLED, or was refused: its nodes are released.
        RequestFailed => "request_failed",
        /// Some nodes of a queued resize request were suspended: the request is cancelled to release
        /// them, and its other nodes are requested again.
        RequestReleasing => "request_releasing",
        /// A resize request was queued past `queue_timeout`: cancelled.
        QueueTimeout => "queue_timeout",
        /// A nodeset entered (or deepened) its backoff after a failed request.
        Backoff => "backoff",
        /// A nodeset's backoff ended (its level stays until a success).
        BackoffEnded => "backoff_ended",
        /// Nodes resumed during a nodeset backoff were answered at once.
        BackoffRefused => "backoff_refused",
        /// A nodeset's instance template cannot work for DWS Flex Start: the nodeset is refused (its
        /// nodes get no VM; resumes are answered at once), naming the field and the value it needs.
        NodesetRefused => "nodeset_refused",
        /// A run duration fell back to `max_run_duration` or was clamped.
        RunDuration => "run_duration",
        /// A VM, MIG or resize request found in GCE but not on record was taken over.
        Adopted => "adopted",
        /// Slurm and the record disagreed about a node; slurm-dws acted.
        Drift => "drift",
        /// A node that slurm-dws had taken out of service is usable again.
        Returned => "returned",
        /// A node's VM reached the end of its run duration and GCE deleted it.
        Expired => "expired",
        /// A node's VM vanished before the end of its run duration.
        VmLost => "vm_lost",
        /// A node's VM stopped and will not run again (TERMINATED after a host failure, STOPPED,
        /// SUSPENDED): the node left service and the VM is deleted.
        VmFailed => "vm_failed",
        /// A node's VM is not in a MIG slurm-dws owns: slurm-dws leaves it alone.
        NotOwned => "not_owned",
        /// A VM in an owned MIG backed no node: deleted.
        Orphan => "orphan",
        /// An owned MIG is gone from GCE.
        MigDeleted => "mig_deleted",
        /// GCE refused a mutation for good.
        GceRefused => "gce_refused",
        /// A Slurm command failed (the next pass decides again).
        SlurmError => "slurm_error",
        /// A GCE step failed (its Operation ended DONE with an error): its next attempt gets a new
        /// requestId after a backoff.
        GceStepFailed => "gce_step_failed",
        /// A GCE step failed too many times in a row: slurm-dws does not send it again until a
        /// restart or a reload.
        GceStepGaveUp => "gce_step_gave_up",
        /// An outbox entry no longer needed was closed without being sent again.
        OutboxAbandoned => "outbox_abandoned",
        /// Reconcile passes became degraded (GCE or Slurm could not be read, or a step failed): why.
        Degraded => "degraded",
        /// Reconcile passes are healthy again after being degraded.
        Recovered => "recovered",
        /// An end-of-life reservation was removed: its node's VM is gone, or no VM backs it.
        ReservationDeleted => "reservation_deleted",
        /// An owned MIG empty for longer than `mig_gc_grace`, with no request in flight: deleted.
        MigCollected => "mig_collected",
        /// A hook handed nodes that are not slurm-dws's to `[slurm] delegate_*`, or the program it
        /// started for them exited 0.
        Delegated => "delegated",
        /// The program a hook handed nodes to could not be started, or exited non-zero or on a signal.
        DelegateFailed => "delegate_failed",
        /// A hook could not load the config file and used the copy of the config the daemon last
        /// accepted (`state_dir/last-accepted.toml`).
        ConfigFallback => "config_fallback",
        /// The job an `exclusive` node was resumed for ended: the node is powered down at once
        /// (its VM deleted) instead of after SuspendTime.
        Released => "released",
        /// A nodeset cannot get capacity now (a backoff, or a request queued past `fallback_after`):
        /// its powered-down nodes are drained, so jobs that name other partitions run there.
        NodesetUnschedulable => "nodeset_unschedulable",
        /// The drain slurm-dws set for a fallback was lifted: the nodeset's nodes are schedulable.
        NodesetSchedulable => "nodeset_schedulable",
        /// A spot node's VM was preempted by GCE (TERMINATED, or deleted): the node left service
        /// in that pass, its job was requeued, and the node is usable again at once.
        Preempted => "preempted",
        /// GCE refused a MIG because of its workload policy (missing, or in another region than
        /// the MIG): the request failed and the nodeset backs off with a placement backoff.
        PolicyRefused => "policy_refused",
        /// A workload policy slurm-dws owns could not be deleted because a MIG still uses it: the
        /// delete waits (a backoff) until that MIG is gone, and is never given up on.
        PolicyInUse => "policy_in_use",
        /// Capacity advice (`[nodeset.dws_flex] capacity_advice`) chose the zone(s) of a request
        /// group's MIG: which, GCE's obtainability score, and why (or why all zones).
        ZoneChosen => "zone_chosen",
        /// A node of a `reservation` nodeset was resumed while its reservation's window is closed
        /// (not open yet, ended, or the reservation not usable): answered at once, its job may
        /// start again when the window opens.
        WindowClosed => "window_closed",
        /// The Slurm reservation that holds a `reservation` nodeset's nodes until its window opens
        /// was made, moved with the window, or removed.
        WindowHold => "window_hold",
        /// A reservation's window ended (GCE deletes its VMs): the nodeset's nodes left service
        /// and their jobs were requeued.
        WindowEnded => "window_ended",
        /// A job group cannot fit the reservation it must consume (more nodes than it holds): the
        /// group fails at once, never provisioned in part, and its job is requeued.
        ReservationTooSmall => "reservation_too_small",
        /// A repair of a node was asked (`slurm-dws repair`, or a drain reason `repair ...`).
        RepairRequested => "repair_requested",
        /// GCE took the report of a reservation-bound VM's host as faulty (or refused it: why).
        HostReportedFaulty => "host_reported_faulty",
        /// A repaired node's VM was deleted and a new one requested for the node.
        VmReplaced => "vm_replaced",
        /// A repaired node's VM runs again and the node is back in service.
        Repaired => "repaired",
        /// GCE announced (or moved) a maintenance window of a node's VM
        /// (`resourceStatus.upcomingMaintenance`): when, of which type, why, and the node's
        /// `slurm-dws-maint-{node}` reservation over it.
        MaintenanceScheduled => "maintenance_scheduled",
        /// A node's maintenance is over, was cancelled, or its VM is gone: its maintenance
        /// reservation was removed.
        MaintenanceDone => "maintenance_done",
        /// Two controllers: Slurm put this daemon's controller in charge (at start, after a
        /// takeover, or the primary back): it acts from now on, from the newest shared state.
        TookCharge => "took_charge",
        /// Two controllers: another controller is in charge (or none answers): this daemon stands
        /// by, making no GCE or Slurm change.
        Standby => "standby",
    }
}

impl From<HookKind> for EventKind {
    fn from(k: HookKind) -> EventKind {
        match k {
            HookKind::Resume => EventKind::Resume,
            HookKind::Suspend => EventKind::Suspend,
            HookKind::ResumeFail => EventKind::ResumeFail,
        }
    }
}

open_enum! {
    /// GCE's status of a VM (an instance's `status`), as last observed: every value of the v1
    /// discovery document's `Instance.status` enum (docs/gce-facts.md, "Instances").
    VmStatus {
        /// Flex Start: waiting for capacity from DWS.
        Pending => "PENDING",
        /// Resources are being allocated.
        Provisioning => "PROVISIONING",
        /// Resources are acquired; the VM is booting.
        Staging => "STAGING",
        Running => "RUNNING",
        /// Shutting down gracefully (on its way to STOPPING).
        PendingStop => "PENDING_STOP",
        /// Stopping, or being deleted: a VM under deletion shows STOPPING until it is gone
        /// (docs/gce-facts.md, "Instances").
        Stopping => "STOPPING",
        /// Halted; GCE is tearing it down (network, quota, disks).
        Deprovisioning => "DEPROVISIONING",
        /// Stopped successfully; stays so until someone starts it.
        Stopped => "STOPPED",
        Suspending => "SUSPENDING",
        Suspended => "SUSPENDED",
        /// Being repaired by GCE (host error); it may run again.
        Repairing => "REPAIRING",
        /// Stopped (by an action or a failure of its host), and staying stopped.
        Terminated => "TERMINATED",
    }
}

impl VmStatus {
    /// PENDING, PROVISIONING or STAGING: the VM is coming up and becomes RUNNING by itself. Its node
    /// is neither lost nor ready.
    pub fn coming_up(&self) -> bool {
        matches!(self, VmStatus::Pending | VmStatus::Provisioning | VmStatus::Staging)
    }

    /// PENDING_STOP, STOPPING or DEPROVISIONING: on its way out (a deletion under way shows
    /// STOPPING); neither to be adopted nor to be deleted again.
    pub fn going_away(&self) -> bool {
        matches!(self, VmStatus::PendingStop | VmStatus::Stopping | VmStatus::Deprovisioning)
    }

    /// TERMINATED, STOPPED, SUSPENDING or SUSPENDED: the VM will not be RUNNING again unless someone
    /// starts or resumes it, and nobody does for a Flex Start VM (its MIG does nothing on failure:
    /// `defaultActionOnFailure: DO_NOTHING`). Its node has failed.
    pub fn stays_down(&self) -> bool {
        matches!(self, VmStatus::Terminated | VmStatus::Stopped | VmStatus::Suspending | VmStatus::Suspended)
    }
}

open_enum! {
    /// GCE's state of a resize request, as last observed. v1 knows these five (docs/gce-facts.md,
    /// "Resize requests"); anything else (`STATE_UNSPECIFIED`, other API versions' states) is
    /// `Other`: not final, and not known to be in flight.
    GceRequestState {
        /// Being validated.
        Creating => "CREATING",
        /// Queued: waiting for capacity and quota, possibly for hours.
        Accepted => "ACCEPTED",
        /// Final: every VM exists.
        Succeeded => "SUCCEEDED",
        /// Final: no VM; `status.error` says why.
        Failed => "FAILED",
        /// Final: cancelled before it was fulfilled.
        Cancelled => "CANCELLED",
    }
}

impl GceRequestState {
    /// SUCCEEDED, FAILED or CANCELLED: GCE will not change the request any more.
    pub fn is_final(&self) -> bool {
        matches!(self, GceRequestState::Succeeded | GceRequestState::Failed | GceRequestState::Cancelled)
    }

    /// CREATING or ACCEPTED: GCE is still working on it.
    pub fn in_flight(&self) -> bool {
        matches!(self, GceRequestState::Creating | GceRequestState::Accepted)
    }
}

/// One Slurm node slurm-dws manages.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Node {
    pub name: String,
    pub nodeset: String,
    pub index: u32,
    pub is_static: bool,
    pub state: NodeState,
    /// The job whose resume asked for the node, when Slurm said.
    pub job_id: Option<u32>,
    /// The request group (`requests.id`) that provisions or provisioned the node.
    pub request_id: Option<i64>,
    pub mig: Option<String>,
    /// GCE's status of the node's VM, as last observed.
    pub vm_status: Option<VmStatus>,
    /// When GCE will delete the node's VM (its real `terminationTimestamp`).
    pub termination_time: Option<DateTime<Utc>>,
    pub last_error: Option<String>,
    /// The name of the end-of-life maintenance reservation slurm-dws made for the node, if any.
    pub reservation: Option<String>,
    /// When `state` last changed.
    pub state_since: DateTime<Utc>,
    /// Where its VM runs: GCE's `resourceStatus.physicalHostTopology` as `CLUSTER/BLOCK/SUBBLOCK/HOST`
    /// (a part GCE left out is empty), as the last pass listed it; `None` without a VM, or when GCE
    /// reports no physical host (a MIG without a workload policy).
    #[serde(default)]
    pub topology: Option<String>,
    /// The maintenance GCE announced for its VM (`resourceStatus.upcomingMaintenance`), as the pass
    /// that last saw it changed recorded it; `None` while none is announced. Boxed: few nodes
    /// have one, and inline it made every record ~130 bytes larger (the desired state and the
    /// planner's overlay hold 10,000 of them in the pass that turns every node up).
    #[serde(default)]
    pub maintenance: Option<Box<Maintenance>>,
}

/// GCE's upcoming maintenance of a VM (`resourceStatus.upcomingMaintenance`; docs/gce-facts.md):
/// decoded from GCE's own JSON, and kept in the store in the same shape.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Maintenance {
    /// `SCHEDULED`, `UNSCHEDULED`, `MULTIPLE` or `UNKNOWN_TYPE`.
    #[serde(rename = "type")]
    pub kind: String,
    /// When the window starts (GCE may move it, up to `latest_window_start_time`).
    pub window_start_time: Option<DateTime<Utc>>,
    /// When the maintenance's disruption will be over; GCE may leave it out.
    pub window_end_time: Option<DateTime<Utc>>,
    /// The latest the window may be moved to.
    pub latest_window_start_time: Option<DateTime<Utc>>,
    /// Whether the maintenance can be started earlier by the customer (`instances.performMaintenance`).
    pub can_reschedule: bool,
    /// `PENDING` or `ONGOING`.
    pub maintenance_status: String,
    /// Why, such as `FAILURE_GPU_XID` or `PLANNED_UPDATE`.
    pub maintenance_reasons: Vec<String>,
}

impl Maintenance {
    /// One line for `explain` and the events: type, window and reasons.
    pub fn describe(&self) -> String {
        let t = |t: Option<DateTime<Utc>>| {
            t.map_or_else(|| "?".to_string(), |t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string())
        };
        let end = match self.window_end_time {
            Some(end) => t(Some(end)),
            None => "an end GCE did not give".to_string(),
        };
        let kind = if self.kind.is_empty() { "maintenance" } else { self.kind.as_str() };
        let mut s = format!("{kind} from {} to {end}", t(self.window_start_time));
        if !self.maintenance_status.is_empty() {
            s.push_str(&format!(", {}", self.maintenance_status));
        }
        if !self.maintenance_reasons.is_empty() {
            s.push_str(&format!(", reasons {}", self.maintenance_reasons.join(",")));
        }
        if self.can_reschedule {
            s.push_str(", can be started earlier (gcloud compute instances perform-maintenance)");
        }
        s
    }
}

/// A resize-request group: the nodes of one (nodeset, job) chunk, one MIG and one resize request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    pub id: i64,
    pub nodeset: String,
    pub job_id: Option<u32>,
    /// 8 hex chars chosen when the group is recorded; MIG and request names derive from it.
    pub tag: String,
    pub mig: String,
    /// The resize request's name inside its MIG.
    pub name: String,
    pub nodes: Vec<String>,
    pub run_duration: u64,
    pub phase: RequestPhase,
    /// GCE's state of the resize request as last observed.
    pub gce_state: Option<GceRequestState>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub last_error: Option<String>,
    /// The zone(s) capacity advice chose for the group's MIG (`crate::capacity_advice`); `None`:
    /// not asked (the MIG gets every zone of its nodeset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone_choice: Option<crate::capacity_advice::ZoneChoice>,
    /// Where GCE put the group's VMs: the zone of the first of them a pass lists (a VM its MIG
    /// created, of one of its nodes); when they are in several zones (a MIG GCE may spread), the
    /// distinct zones in sorted order joined with `,`. `None` until a VM is seen (queued); kept once
    /// the group succeeded. Set by the planner (`plan/requests.rs`, `Planner::note_zone`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
}

/// A MIG slurm-dws owns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Mig {
    pub name: String,
    pub nodeset: String,
    pub region: String,
    pub target_size: u32,
    pub state: MigState,
    pub created_at: DateTime<Utc>,
    /// Since when the MIG has been observed empty with no active request (garbage collection clock).
    pub empty_since: Option<DateTime<Utc>>,
}

/// The consecutive failed attempts of one GCE step (outbox entries closed as `failed` since the
/// step last succeeded or was abandoned), as `Store::step_failures` counts them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepFailures {
    pub kind: MutationKind,
    /// The outbox target: a MIG name, `mig/request`, or `mig:hostlist`.
    pub target: String,
    pub failed: u32,
    pub last_at: DateTime<Utc>,
    pub last_error: String,
}

/// One intended GCE mutation, recorded with its requestId before it is sent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutboxEntry {
    pub id: i64,
    /// The GCE `requestId` (a UUID), reused on every retry.
    pub request_id: String,
    pub kind: MutationKind,
    /// What the mutation is about: a MIG name, or `mig/request` for resize requests.
    pub target: String,
    /// The request body as recorded, JSON text: kept as text, because a thousand entries of one
    /// round held as `serde_json::Value` trees were megabytes of the daemon's peak memory (`make
    /// bench`); the executor builds the body it sends from the desired state.
    pub payload: String,
    pub state: OutboxState,
    pub attempts: u32,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub last_error: Option<String>,
}

/// One line of the append-only event log, as read back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub id: i64,
    pub time: DateTime<Utc>,
    /// An [`EventKind`] name. Kept as the stored text: the log outlives versions, and a line written
    /// by another version is still shown.
    pub kind: String,
    /// The nodes concerned, as a hostlist expression ("" when none).
    pub nodes: String,
    pub message: String,
    /// How many identical events this row stands for: identical events of one pass are recorded once.
    pub count: i64,
}

/// A request recorded by a hook, waiting for the daemon.
#[derive(Debug, Clone, PartialEq)]
pub struct InboxEntry {
    pub id: i64,
    pub received_at: DateTime<Utc>,
    pub kind: HookKind,
    /// The hostlist expression slurmctld passed.
    pub hostlist: String,
    /// The resume file's content, normalised to `[(job_id, hostlist)]`, for resume hooks.
    pub jobs: Vec<(u32, String)>,
}

/// A per-nodeset backoff after a failed request (capacity, quota, or any other GCE error): no new
/// requests until `until`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Backoff {
    pub nodeset: String,
    pub until: DateTime<Utc>,
    /// How many failures in a row led here (the exponent).
    pub level: u32,
    pub reason: String,
    /// Its time is over and that was announced (`backoff_ended`). The record stays, for its level,
    /// until a request of the nodeset succeeds: the next failure backs off twice as long.
    pub ended: bool,
}

string_enum! {
    /// GCE's fault behaviours of `instances.reportHostAsFaulty` that `slurm-dws repair --reason`
    /// takes (docs/gce-facts.md, "Faulty hosts"), spelled as GCE spells them.
    FaultBehavior {
        Performance => "PERFORMANCE",
        SilentDataCorruption => "SILENT_DATA_CORRUPTION",
        UnrecoverableGpuError => "UNRECOVERABLE_GPU_ERROR",
    }
}

string_enum! {
    /// How far a node's repair got (`plan/repair.rs`).
    RepairPhase {
        /// Asked: the node is drained and its job requeued in the next round.
        Requested => "requested",
        /// A reservation-bound VM's host is being reported faulty: GCE moves the VM to another host.
        Reporting => "reporting",
        /// The VM was deleted and a new one requested for the node.
        Replacing => "replacing",
        /// The node's VM runs again and the node is back in service.
        Repaired => "repaired",
        /// GCE refused the report (in its words), or the node had nothing to repair.
        Failed => "failed",
    }
}

impl RepairPhase {
    /// Still being carried out.
    pub fn is_open(self) -> bool {
        matches!(self, RepairPhase::Requested | RepairPhase::Reporting | RepairPhase::Replacing)
    }
}

/// A node's repair: the last one asked for it (one row a node; a new ask while one is open is the
/// same repair).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Repair {
    pub node: String,
    pub behavior: FaultBehavior,
    pub description: String,
    /// `cli` (slurm-dws repair) or `drain` (a drain reason `repair ...`).
    pub source: String,
    pub phase: RepairPhase,
    pub requested_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// What happened last: GCE's answer, the replacement, why it failed.
    pub outcome: Option<String>,
}

/// A `slurm-dws repair` the daemon recorded and a pass has not taken yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepairAsk {
    pub id: i64,
    pub node: String,
    pub behavior: FaultBehavior,
    pub description: String,
}

/// "1 node", "2 nodes": a count with its noun, for messages people read.
pub fn count_of(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// What GCE said about a workload policy (`gce::policy_error` reads it from an answer), as slurm-dws
/// records it: the planner backs a nodeset off on a recorded `Missing` / `WrongRegion`, the step
/// backoff waits out a recorded `InUse`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PolicyFailure {
    /// The policy named does not exist.
    Missing,
    /// A MIG still uses the policy, so it cannot be deleted.
    InUse,
    /// The policy is in another region than the MIG that names it.
    WrongRegion,
}

impl PolicyFailure {
    pub const ALL: [PolicyFailure; 3] =
        [PolicyFailure::Missing, PolicyFailure::InUse, PolicyFailure::WrongRegion];

    /// The code slurm-dws records for it (outbox, events, a failed request's error).
    pub fn code(self) -> &'static str {
        match self {
            PolicyFailure::Missing => "WORKLOAD_POLICY_MISSING",
            PolicyFailure::InUse => "WORKLOAD_POLICY_IN_USE",
            PolicyFailure::WrongRegion => "WORKLOAD_POLICY_WRONG_REGION",
        }
    }

    /// The failure an error text recorded as `CODE: message` (or the bare code) starts with.
    pub fn of_recorded(text: &str) -> Option<PolicyFailure> {
        let code = text.split(':').next().unwrap_or_default().trim();
        PolicyFailure::ALL.into_iter().find(|f| f.code() == code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names stored in existing databases and printed by `events --json`: never renamed.
    #[test]
    fn event_kind_names_are_stable() {
        let names: Vec<&str> = EventKind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(
            names,
            [
                "resume",
                "suspend",
                "resume_fail",
                "resume_file",
                "bad_input",
                "not_ours",
                "request_planned",
                "request_succeeded",
                "request_failed",
                "request_releasing",
                "queue_timeout",
                "backoff",
                "backoff_ended",
                "backoff_refused",
                "nodeset_refused",
                "run_duration",
                "adopted",
                "drift",
                "returned",
                "expired",
                "vm_lost",
                "vm_failed",
                "not_owned",
                "orphan",
                "mig_deleted",
                "gce_refused",
                "slurm_error",
                "gce_step_failed",
                "gce_step_gave_up",
                "outbox_abandoned",
                "degraded",
                "recovered",
                "reservation_deleted",
                "mig_collected",
                "delegated",
                "delegate_failed",
                "config_fallback",
                "released",
                "nodeset_unschedulable",
                "nodeset_schedulable",
                "preempted",
                "policy_refused",
                "policy_in_use",
                "zone_chosen",
                "window_closed",
                "window_hold",
                "window_ended",
                "reservation_too_small",
                "repair_requested",
                "host_reported_faulty",
                "vm_replaced",
                "repaired",
                "maintenance_scheduled",
                "maintenance_done",
                "took_charge",
                "standby",
            ]
        );
        for k in EventKind::ALL {
            assert_eq!(k.as_str().parse::<EventKind>(), Ok(*k));
            assert_eq!(serde_json::to_value(k).unwrap(), serde_json::json!(k.as_str()));
        }
        for h in HookKind::ALL {
            assert_eq!(EventKind::from(*h).as_str(), h.as_str(), "a hook's event is named as the hook");
        }
    }

    /// GCE's states read and write as GCE spells them; one this version does not know is kept.
    #[test]
    fn gce_states_keep_unknown_values() {
        for s in [
            "PROVISIONING",
            "STAGING",
            "RUNNING",
            "STOPPING",
            "SUSPENDING",
            "SUSPENDED",
            "REPAIRING",
            "TERMINATED",
            "PENDING",
            "PENDING_STOP",
            "DEPROVISIONING",
            "STOPPED",
        ] {
            let v = VmStatus::from(s);
            assert!(!matches!(v, VmStatus::Other(_)), "{s}");
            assert_eq!(v.as_str(), s);
        }
        // Each known status is in exactly one class, or none (RUNNING, REPAIRING).
        for (s, class) in [
            ("PENDING", "coming up"),
            ("PROVISIONING", "coming up"),
            ("STAGING", "coming up"),
            ("RUNNING", ""),
            ("REPAIRING", ""),
            ("PENDING_STOP", "going away"),
            ("STOPPING", "going away"),
            ("DEPROVISIONING", "going away"),
            ("TERMINATED", "stays down"),
            ("STOPPED", "stays down"),
            ("SUSPENDING", "stays down"),
            ("SUSPENDED", "stays down"),
            ("SOMETHING_NEW", ""),
        ] {
            let v = VmStatus::from(s);
            let got = [
                (v.coming_up(), "coming up"),
                (v.going_away(), "going away"),
                (v.stays_down(), "stays down"),
            ]
            .iter()
            .filter(|(yes, _)| *yes)
            .map(|(_, c)| *c)
            .collect::<Vec<_>>()
            .join(",");
            assert_eq!(got, class, "{s}");
        }
        assert_eq!(VmStatus::from("HIBERNATED"), VmStatus::Other("HIBERNATED".into()));
        assert_eq!(VmStatus::from("RUNNING".to_string()), VmStatus::Running);
        let unknown: GceRequestState = serde_json::from_str("\"PROVISIONING\"").unwrap();
        assert_eq!(unknown, GceRequestState::Other("PROVISIONING".into()));
        assert_eq!(serde_json::to_string(&unknown).unwrap(), "\"PROVISIONING\"");
        assert!(!unknown.is_final() && !unknown.in_flight());
        assert!(
            GceRequestState::from("ACCEPTED").in_flight() && GceRequestState::from("CREATING").in_flight()
        );
        for s in ["SUCCEEDED", "FAILED", "CANCELLED"] {
            assert!(GceRequestState::from(s).is_final(), "{s}");
        }
        assert_eq!(GceRequestState::Failed.to_string(), "FAILED");
    }
}
