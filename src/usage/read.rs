//! What `slurm-dws usage` reads from the store for a period: the spans that overlap it, their names
//! interned (30 days at 10,000 nodes is a few hundred thousand spans over a few thousand names),
//! when the kept data starts, and (through the daemon) the catalog cache.

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

#[cfg(test)]
use super::{JobSpan, VmSpan};

/// What `slurm-dws usage` reads for a period (`Store::usage_spans`; the answer to
/// `protocol::Query::UsageSpans` for a reader). Names are indexes into `names`; times are unix ms.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UsageSpans {
    /// Every name the spans use (nodes, nodesets, models, machine types, users, accounts,
    /// partitions), once.
    pub names: Vec<String>,
    pub vms: Vec<VmRef>,
    pub jobs: Vec<JobRef>,
    pub data_since: Option<chrono::DateTime<chrono::Utc>>,
    /// Through the daemon only (a reader cannot read `state_dir`): the cached catalog prices as the
    /// daemon read them, `Err` with why when it could not, `None` when there is no cache.
    #[serde(default)]
    pub catalog: Option<Result<super::CatalogPrices, String>>,
}

/// A [`VmSpan`] as the report reads it: names by index, times in unix ms, without the instance's
/// id and name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct VmRef {
    pub node: u32,
    pub nodeset: u32,
    pub model: u32,
    pub machine_type: u32,
    pub gpus: u32,
    pub job_id: Option<u64>,
    pub created_at: i64,
    /// The last pass that saw the VM (for an open span, the last full pass that recorded usage).
    pub last_seen: i64,
    pub deleted_at: Option<i64>,
}

/// A [`JobSpan`] as the report reads it: names by index, times in unix ms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobRef {
    pub job_id: u64,
    pub node: u32,
    pub user: u32,
    pub account: u32,
    pub partition: u32,
    pub started_at: i64,
    pub ended_at: Option<i64>,
}

/// Gives each distinct name its index in `names` (one allocation per distinct name, not one per
/// span).
#[derive(Default)]
pub struct Interner {
    ids: FxHashMap<String, u32>,
    pub names: Vec<String>,
}

impl Interner {
    pub fn id(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.ids.get(name) {
            return id;
        }
        let id = self.names.len() as u32;
        self.ids.insert(name.to_string(), id);
        self.names.push(name.to_string());
        id
    }
}

impl UsageSpans {
    /// The name of index `i`.
    pub fn name(&self, i: u32) -> &str {
        &self.names[i as usize]
    }

    /// The spans in the report's form, in the same order.
    #[cfg(test)]
    pub fn from_spans(vms: &[VmSpan], jobs: &[JobSpan]) -> UsageSpans {
        let mut n = Interner::default();
        let vms = vms
            .iter()
            .map(|v| VmRef {
                node: n.id(&v.node),
                nodeset: n.id(&v.nodeset),
                model: n.id(&v.model),
                machine_type: n.id(&v.machine_type),
                gpus: v.gpus,
                job_id: v.job_id,
                created_at: v.created_at.timestamp_millis(),
                last_seen: v.last_seen.timestamp_millis(),
                deleted_at: v.deleted_at.map(|t| t.timestamp_millis()),
            })
            .collect();
        let jobs = jobs
            .iter()
            .map(|j| JobRef {
                job_id: j.job_id,
                node: n.id(&j.node),
                user: n.id(&j.user),
                account: n.id(&j.account),
                partition: n.id(&j.partition),
                started_at: j.started_at.timestamp_millis(),
                ended_at: j.ended_at.map(|t| t.timestamp_millis()),
            })
            .collect();
        UsageSpans { names: n.names, vms, jobs, data_since: None, catalog: None }
    }
}
