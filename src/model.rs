//! The domain's nouns: nodes, resize-request groups, MIGs, events — shared by store, reconciler and CLI.
//!
//! These are plain values. The store persists them, the reconciler decides on them, the CLI prints them.
//! Every state is a closed enum with a stable lower-case name, because the names appear in the database,
//! in `--json` output and in the docs, and must never drift between them.

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
        /// The resize request SUCCEEDED: its VMs exist (or existed).
        Succeeded => "succeeded",
        /// FAILED, CANCELLED, queued past `queue_timeout`, or refused on insert.
        Failed => "failed",
        /// Every node of the group is gone and the MIG was deleted (or never made).
        Done => "done",
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
        DeleteInstances => "delete_instances",
        MigDelete => "mig_delete",
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
    /// GCE's instance status, as last observed.
    pub vm_status: Option<String>,
    /// When GCE will delete the node's VM (its real `terminationTimestamp`).
    pub termination_time: Option<DateTime<Utc>>,
    pub last_error: Option<String>,
    /// The name of the end-of-life maintenance reservation slurm-dws made for the node, if any.
    pub reservation: Option<String>,
    /// When `state` last changed.
    pub state_since: DateTime<Utc>,
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
    /// GCE's state of the resize request as last observed (CREATING, ACCEPTED, SUCCEEDED, ...).
    pub gce_state: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub last_error: Option<String>,
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

/// One intended GCE mutation, recorded with its requestId before it is sent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutboxEntry {
    pub id: i64,
    /// The GCE `requestId` (a UUID), reused on every retry.
    pub request_id: String,
    pub kind: MutationKind,
    /// What the mutation is about: a MIG name, or `mig/request` for resize requests.
    pub target: String,
    pub payload: serde_json::Value,
    pub state: OutboxState,
    pub attempts: u32,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub last_error: Option<String>,
}

/// One line of the append-only event log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub id: i64,
    pub time: DateTime<Utc>,
    pub kind: String,
    /// The nodes concerned, as a hostlist expression ("" when none).
    pub nodes: String,
    pub message: String,
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

/// A per-nodeset capacity backoff: no new requests until `until`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Backoff {
    pub nodeset: String,
    pub until: DateTime<Utc>,
    /// How many failures in a row led here (the exponent).
    pub level: u32,
    pub reason: String,
}

/// "1 node", "2 nodes": a count with its noun, for messages people read.
pub fn count_of(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}
