//! The expected-start lines (`crate::waiting`) as `status`, `requests` and `explain` show them.

use crate::config::Config;
use crate::model::Request;
use crate::store::RequestWait;
use crate::waiting;
use chrono::{DateTime, Utc};
use std::collections::BTreeMap;

/// The region of a group's MIG: its nodeset's (`gcp.region` for a nodeset no longer configured).
pub fn region(cfg: &Config, r: &Request) -> String {
    cfg.nodesets
        .iter()
        .find(|n| n.name == r.nodeset)
        .map_or_else(|| cfg.gcp.region.clone(), |n| n.region.clone())
}

/// For a group still queued: seconds waited, what similar groups waited, and the one-line summary.
pub fn estimate(
    cfg: &Config,
    waits: &BTreeMap<String, Vec<RequestWait>>,
    r: &Request,
    now: DateTime<Utc>,
) -> Option<(i64, Option<waiting::Similar>, String)> {
    if !waiting::is_queued(r) {
        return None;
    }
    let waited = waiting::waited(r, now);
    let history = waits.get(&r.nodeset).map(Vec::as_slice).unwrap_or_default();
    let similar = waiting::similar(history, r.nodes.len() as u32, r.run_duration);
    let score = r.zone_choice.as_ref().and_then(|c| c.obtainability);
    Some((waited, similar, waiting::summary(waited, &region(cfg, r), similar, score)))
}
