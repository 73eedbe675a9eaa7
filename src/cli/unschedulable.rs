//! Which nodesets are unschedulable now (their powered-down nodes drained so that jobs fall back to
//! their other partitions), for `status` and `explain`: the planner's own rule
//! (`reconcile::plan::unschedulable`) applied to what the store holds.

use crate::config::Config;
use crate::model::{Backoff, Node, Request};
use crate::reconcile::{plan::unschedulable, PlanConfig};
use chrono::{DateTime, Utc};
use std::collections::BTreeMap;

/// Nodeset → why it is unschedulable (backoff and its end, or the request queued too long).
pub fn now(
    cfg: &Config,
    backoffs: &[Backoff],
    requests: &[Request],
    now: DateTime<Utc>,
) -> BTreeMap<String, String> {
    unschedulable(&PlanConfig::new(cfg), backoffs, requests, now)
}

/// `status` rows: one per unschedulable nodeset.
pub fn status_rows(u: &BTreeMap<String, String>) -> Vec<(&'static str, Vec<String>)> {
    u.iter()
        .map(|(ns, why)| {
            ("unschedulable:", vec![format!("nodeset {ns}: its powered-down nodes are drained ({why}); jobs that name another partition run there")])
        })
        .collect()
}

/// `explain`'s sentence for a node whose nodeset is unschedulable.
pub fn explain_line(
    cfg: &Config,
    backoffs: &[Backoff],
    requests: &[Request],
    n: &Node,
    t: DateTime<Utc>,
) -> Option<String> {
    let u = now(cfg, backoffs, requests, t);
    let why = u.get(&n.nodeset)?;
    let what = if n.is_static {
        "static nodes are not drained"
    } else {
        "Slurm starts no job on it while it is powered down"
    };
    Some(format!(
        "Nodeset {} is unschedulable ({why}): {what}; jobs that name another partition run there, the drain is lifted when this ends.",
        n.nodeset
    ))
}
