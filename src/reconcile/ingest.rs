//! Turning hook calls recorded in the inbox into per-node desired state. Pure.
//!
//! Idempotent by construction: a resume of a node that is already wanted, requested or up changes
//! nothing; a suspend of a node that is already powered down changes nothing. Slurm does send both.

use super::plan::new_node;
use super::types::{NewEvent, PlanConfig};
use crate::hostlist;
use crate::model::*;
use crate::naming::NotOurs;
use chrono::{DateTime, Utc};
use std::collections::BTreeMap;

/// What ingesting a batch of inbox entries decided.
#[derive(Debug, Default)]
pub struct Ingested {
    /// Nodes whose record changes (full new values).
    pub nodes: Vec<Node>,
    pub events: Vec<NewEvent>,
    /// Nodes named by a hook that are not ours, each once, with the reason (they are set DOWN in Slurm).
    pub not_ours: Vec<NotOurs>,
    /// Inbox ids consumed.
    pub processed: Vec<i64>,
}

/// Applies `inbox` (oldest first) to `nodes`.
pub fn ingest(
    cfg: &PlanConfig,
    nodes: &BTreeMap<String, Node>,
    inbox: &[InboxEntry],
    now: DateTime<Utc>,
) -> Ingested {
    let mut work: BTreeMap<String, Node> = BTreeMap::new();
    let mut out = Ingested::default();
    for entry in inbox {
        out.processed.push(entry.id);
        let names = match hostlist::expand(&entry.hostlist) {
            Ok(n) => n,
            Err(e) => {
                out.events.push(NewEvent {
                    kind: EventKind::BadInput,
                    nodes: vec![],
                    message: format!("{} hook entry {}: {e}: ignored", entry.kind, entry.id),
                });
                continue;
            }
        };
        let mut job_of: BTreeMap<String, u32> = BTreeMap::new();
        for (job, expr) in &entry.jobs {
            if let Ok(list) = hostlist::expand(expr) {
                for n in list {
                    job_of.insert(n, *job);
                }
            }
        }
        let mut changed = Vec::new();
        for name in names {
            let at = match cfg.naming.parse(&name) {
                Ok(at) => at,
                Err(why) => {
                    if !out.not_ours.iter().any(|n| n.node() == name) {
                        out.not_ours.push(why);
                    }
                    continue;
                }
            };
            let node = work.entry(name.clone()).or_insert_with(|| {
                nodes
                    .get(&name)
                    .cloned()
                    .unwrap_or_else(|| new_node(&name, &at.nodeset, at.index, at.is_static, now))
            });
            let before = node.state;
            // A resume dates from the hook (when slurmctld ran it), not from the pass that reads it:
            // two daemons reading the same inbox entry (two controllers) name its MIG alike.
            let at = if entry.kind == HookKind::Resume { entry.received_at.min(now) } else { now };
            apply(node, entry.kind, job_of.get(&name).copied(), at);
            if node.state != before {
                changed.push(name);
            }
        }
        if !changed.is_empty() {
            let jobs: Vec<String> = entry.jobs.iter().map(|(j, _)| j.to_string()).collect();
            let message = match entry.kind {
                HookKind::Resume if jobs.is_empty() => {
                    format!("Slurm resumed {} (no job)", crate::model::count_of(changed.len(), "node"))
                }
                HookKind::Resume => {
                    format!(
                        "Slurm resumed {} for job(s) {}",
                        crate::model::count_of(changed.len(), "node"),
                        jobs.join(",")
                    )
                }
                HookKind::Suspend => {
                    format!("Slurm suspended {}", crate::model::count_of(changed.len(), "node"))
                }
                HookKind::ResumeFail => {
                    format!(
                        "Slurm gave up resuming {} (ResumeTimeout): cleaning up",
                        crate::model::count_of(changed.len(), "node")
                    )
                }
            };
            out.events.push(NewEvent { kind: entry.kind.into(), nodes: changed, message });
        }
    }
    out.nodes = work.into_values().filter(|n| nodes.get(&n.name) != Some(n)).collect();
    out
}

fn apply(node: &mut Node, kind: HookKind, job: Option<u32>, now: DateTime<Utc>) {
    let to = |node: &mut Node, s: NodeState| {
        if node.state != s {
            node.state = s;
            node.state_since = now;
        }
    };
    match (kind, node.state) {
        (HookKind::Resume, NodeState::PoweredDown | NodeState::Suspending) => {
            to(node, NodeState::ResumePending);
            node.job_id = job;
            node.last_error = None;
        }
        (HookKind::Resume, NodeState::ResumePending) => node.job_id = job.or(node.job_id),
        (HookKind::Resume, _) => {}
        (HookKind::Suspend | HookKind::ResumeFail, NodeState::Up | NodeState::Requested) => {
            to(node, NodeState::Suspending);
        }
        (HookKind::Suspend | HookKind::ResumeFail, NodeState::ResumePending) => {
            to(node, NodeState::PoweredDown)
        }
        (HookKind::Suspend | HookKind::ResumeFail, _) => {}
    }
    if kind == HookKind::ResumeFail {
        let prior = node.last_error.take().map(|e| format!("; last error: {e}")).unwrap_or_default();
        node.last_error = Some(format!("Slurm's ResumeTimeout expired before the node registered{prior}"));
    }
}
