//! Usage and cost: where the VM and GPU hours went (`slurm-dws usage`, the seconds metrics).
//!
//! The daemon records two kinds of spans in the store (`vm_spans`, `job_spans`): the life of every VM
//! that ran for one of our nodes, from GCE's `creationTimestamp` to the first pass that no longer sees
//! it, and the time each job ran on each node, with its user, account and partition. A VM's hours
//! are busy while a job runs on its node and idle otherwise (booting, waiting for a job, waiting for
//! SuspendTime); busy + idle = the VM's whole life. Everything here is plain data; the store reads
//! and writes it, the report turns it into rows.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// One VM's life, as GCE reports it (within a pass).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VmSpan {
    /// GCE's `id` of the instance: two VMs of one name (a node re-provisioned) are two spans.
    pub instance_id: String,
    /// The instance's name.
    pub vm: String,
    pub node: String,
    pub nodeset: String,
    /// The nodeset's provisioning model as the config spells it: flex, standard, spot, reservation.
    pub model: String,
    /// The machine type's bare name (`a3-ultragpu-8g`).
    pub machine_type: String,
    /// GPUs of one such VM (0 for a machine type without any).
    pub gpus: u32,
    /// The job the VM's resize request was made for; `None` for a static node's VM.
    pub job_id: Option<u64>,
    /// GCE's `creationTimestamp`: GCE bills from here.
    pub created_at: DateTime<Utc>,
    /// The last pass that saw the VM.
    pub last_seen: DateTime<Utc>,
    /// The first pass that no longer saw it; `None` while it lives.
    pub deleted_at: Option<DateTime<Utc>>,
}

/// The time one job ran on one node (its busy time), with who ran it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobSpan {
    pub job_id: u64,
    pub node: String,
    pub user: String,
    pub account: String,
    pub partition: String,
    pub started_at: DateTime<Utc>,
    /// `None` while the job runs.
    pub ended_at: Option<DateTime<Utc>>,
}

/// List prices read from Cloud Billing's Catalog API (`[pricing] catalog = true`), as the daemon
/// caches them in `state_dir` ([`CATALOG_CACHE`]): the price of one VM-hour by machine type and
/// provisioning model, in `currency`, with the date they were fetched.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CatalogPrices {
    pub fetched_at: DateTime<Utc>,
    pub currency: String,
    /// Machine type (bare name) → provisioning model as the config spells it → price of one VM-hour.
    pub per_hour: std::collections::BTreeMap<String, std::collections::BTreeMap<String, f64>>,
}

/// The file in `state_dir` that holds the [`CatalogPrices`] last fetched (JSON).
pub const CATALOG_CACHE: &str = "catalog-prices.json";

pub mod pricing;
pub mod read;
pub mod report;

pub use pricing::{Price, PriceBook, PriceSource};
pub use report::{By, Period, Report, UsageRow};
