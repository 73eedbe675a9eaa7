//! The usage rule's words (`plan/usage.rs`): the spans open as the last pass left them, the jobs
//! Slurm shows on our nodes, each nodeset's shape, and what a pass changes.

use chrono::{DateTime, Utc};
use std::collections::BTreeMap;
use std::num::NonZeroU64;

/// A nodeset's machine type and GPUs, read from its instance template once a run
/// (`gce::read_node_shape`); `unknown` / 0 when that read failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodesetShape {
    pub machine_type: String,
    pub gpus: u32,
}

impl NodesetShape {
    /// What a nodeset whose template could not be read is recorded with.
    pub fn unknown() -> NodesetShape {
        NodesetShape { machine_type: "unknown".into(), gpus: 0 }
    }
}

/// A VM's life as the usage rule keeps it: the store's `vm_spans` row, with the instance id as
/// GCE's number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageVm {
    pub id: NonZeroU64,
    pub vm: String,
    pub node: String,
    pub nodeset: String,
    /// The provisioning model as the config spells it.
    pub model: &'static str,
    pub machine_type: String,
    pub gpus: u32,
    pub job_id: Option<u64>,
    pub created_at: DateTime<Utc>,
    pub last_seen: DateTime<Utc>,
    pub deleted_at: Option<DateTime<Utc>>,
    /// Read back from the store at start, not seen by this run yet: if it is gone, it went some
    /// time after `last_seen` (while the daemon was down) and is closed there.
    pub restored: bool,
    /// Its seconds are counted in the metrics up to here (`None`: not counted yet this run).
    pub counted_to: Option<DateTime<Utc>>,
}

/// The time one job ran on one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageJob {
    pub job_id: u64,
    pub node: String,
    pub user: String,
    pub account: String,
    pub partition: String,
    pub started_at: DateTime<Utc>,
    pub ended_at: Option<DateTime<Utc>>,
}

/// The open spans, as the last pass left them (kept by the reconciler, read from the store at
/// start): VMs by instance id, jobs by (job, node).
#[derive(Debug, Clone, Default)]
pub struct OpenUsage {
    pub vms: BTreeMap<NonZeroU64, UsageVm>,
    pub jobs: BTreeMap<(u64, String), UsageJob>,
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

/// What one pass changes in the usage spans.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UsageChange {
    pub vms_opened: Vec<UsageVm>,
    /// Instance ids and their end.
    pub vms_closed: Vec<(NonZeroU64, DateTime<Utc>)>,
    pub jobs_opened: Vec<UsageJob>,
    /// (job, node) and the end.
    pub jobs_closed: Vec<((u64, String), DateTime<Utc>)>,
}

impl UsageChange {
    pub fn is_empty(&self) -> bool {
        self.vms_opened.is_empty()
            && self.vms_closed.is_empty()
            && self.jobs_opened.is_empty()
            && self.jobs_closed.is_empty()
    }
}

/// VM and GPU seconds of one (nodeset, model, busy or idle), counted by one pass.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct UsageSeconds {
    pub vm: f64,
    pub gpu: f64,
}
