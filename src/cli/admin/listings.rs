//! `nodes`, `requests`, `migs` and `events`: one JSON record per row, keyed by its `--json` fields.

use super::{check, event_json, now, open, print};
use crate::cli::table::{ts, Field, Kind, Listing};
use crate::cli::CliError;
use crate::config::Config;
use crate::model::*;
use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// The fields of `nodes` (the `--json` keys), in table order.
pub const NODE_FIELDS: &[Field] = &[
    Field::both("name", "NAME", Kind::Text),
    Field::long("nodeset", "NODESET", Kind::Text),
    Field::long("static", "STATIC", Kind::Bool),
    Field::both("state", "STATE", Kind::Text),
    Field::both("state_since", "SINCE", Kind::Age),
    Field::both("job_id", "JOB", Kind::Text),
    Field::long("mig", "MIG", Kind::Text),
    Field::long("resize_request", "RESIZE_REQUEST", Kind::Text),
    Field::long("vm_status", "VM", Kind::Text),
    Field::both("termination_time", "TERMINATION", Kind::Time),
    Field::long("reservation", "RESERVATION", Kind::Text),
    Field::long("slurm_reservation", "SLURM_RESERVATION", Kind::Text),
    Field::long("topology", "TOPOLOGY", Kind::Text),
    Field::both("last_error", "LAST_ERROR", Kind::Text).elastic(),
];

/// The fields of `nodes --summarize`.
pub const SUMMARY_FIELDS: &[Field] = &[
    Field::both("nodeset", "NODESET", Kind::Text),
    Field::both("state", "STATE", Kind::Text),
    Field::both("count", "NODES", Kind::Text),
    Field::both("nodes", "NODELIST", Kind::Text),
];

/// The fields of `requests`.
pub const REQUEST_FIELDS: &[Field] = &[
    Field::both("name", "NAME", Kind::Text),
    Field::long("mig", "MIG", Kind::Text),
    Field::long("nodeset", "NODESET", Kind::Text),
    Field::both("job_id", "JOB", Kind::Text),
    Field::both("nodes", "NODES", Kind::Hostlist),
    Field::both("state", "STATE", Kind::Text),
    Field::both("phase", "PHASE", Kind::Text),
    Field::long("run_duration", "RUN_DURATION", Kind::Duration),
    Field::both("created_at", "CREATED", Kind::Time),
    Field::long("updated_at", "UPDATED", Kind::Time),
    Field::long("region", "REGION", Kind::Text),
    Field::long("zone", "ZONE", Kind::Text),
    Field::long("queued_for", "QUEUED_FOR", Kind::Duration),
    Field::long("waiting", "WAITING", Kind::Text),
    Field::both("last_error", "LAST_ERROR", Kind::Text).elastic(),
];

/// The fields of `migs`.
pub const MIG_FIELDS: &[Field] = &[
    Field::both("name", "NAME", Kind::Text),
    Field::both("nodeset", "NODESET", Kind::Text),
    Field::long("region", "REGION", Kind::Text),
    Field::both("target_size", "TARGET_SIZE", Kind::Text),
    Field::both("state", "STATE", Kind::Text),
    Field::both("created_at", "CREATED", Kind::Time),
    Field::both("empty_since", "EMPTY_SINCE", Kind::Time),
];

/// The fields of `events`.
pub const EVENT_FIELDS: &[Field] = &[
    Field::both("time", "TIME", Kind::Time),
    Field::both("kind", "KIND", Kind::Text),
    Field::both("nodes", "NODES", Kind::Text),
    Field::long("count", "COUNT", Kind::Text),
    Field::both("message", "MESSAGE", Kind::Text).elastic(),
];

/// `slurm-dws nodes [--nodeset N] [--state S] [--summarize] [NODES...]`
pub async fn nodes(
    cfg: &Config,
    nodeset: Option<&str>,
    state: Option<&str>,
    names: &[String],
    summarize: bool,
    l: &Listing,
) -> Result<String, CliError> {
    let state = state
        .map(|s| {
            s.parse::<NodeState>().map_err(|_| {
                CliError::usage(format!(
                    "unknown node state '{s}' (states: {})",
                    NodeState::ALL.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
                ))
            })
        })
        .transpose()?;
    let mut wanted = Vec::new();
    for n in names {
        wanted.extend(
            crate::hostlist::expand(n).map_err(|e| CliError::usage(format!("bad hostlist '{n}': {e}")))?,
        );
    }
    if let Some(ns) = nodeset {
        if cfg.nodeset(ns).is_none() {
            return Err(CliError::usage(format!("no nodeset '{ns}' in {}", cfg.source.display())));
        }
    }
    match summarize {
        true => check("nodes --summarize", SUMMARY_FIELDS, l)?,
        false => check("nodes", NODE_FIELDS, l)?,
    }
    let store = open(cfg).await?;
    let requests: BTreeMap<i64, Request> =
        store.requests(false).await?.into_iter().map(|r| (r.id, r)).collect();
    let nodes: Vec<Node> = store
        .nodes()
        .await?
        .into_iter()
        .filter(|n| nodeset.is_none_or(|ns| n.nodeset == ns))
        .filter(|n| state.is_none_or(|s| n.state == s))
        .filter(|n| wanted.is_empty() || wanted.contains(&n.name))
        .collect();
    if summarize {
        return print("nodes --summarize", SUMMARY_FIELDS, summary(&nodes), l);
    }
    let rr_name = |n: &Node| n.request_id.and_then(|id| requests.get(&id)).map(|r| r.name.clone());
    // The job and error columns are the live ones; past ones are in `explain` and `events`.
    let backoffs = store.backoffs().await?;
    let now = now();
    let records: Vec<Value> = nodes
        .iter()
        .map(|n| {
            let live = crate::cli::live::live(n, backoffs.iter().find(|b| b.nodeset == n.nodeset), now);
            json!({
                "name": n.name, "nodeset": n.nodeset, "static": n.is_static, "state": n.state,
                "job_id": live.job_id, "mig": n.mig, "resize_request": rr_name(n),
                "termination_time": ts(n.termination_time), "last_error": live.last_error,
                "vm_status": n.vm_status, "slurm_reservation": n.reservation, "state_since": ts(Some(n.state_since)),
                "reservation": cfg.nodeset(&n.nodeset).and_then(|ns| ns.reservation.as_ref()).map(|r| r.source.url()),
                "topology": n.topology,
            })
        })
        .collect();
    print("nodes", NODE_FIELDS, records, l)
}

/// Nodes grouped by nodeset and state, each group's nodes as one hostlist, as `sinfo` summarizes.
fn summary(nodes: &[Node]) -> Vec<Value> {
    let mut groups: BTreeMap<(&str, &str), Vec<String>> = BTreeMap::new();
    for n in nodes {
        groups.entry((n.nodeset.as_str(), n.state.as_str())).or_default().push(n.name.clone());
    }
    groups
        .into_iter()
        .map(|((nodeset, state), names)| {
            json!({"nodeset": nodeset, "state": state, "count": names.len(), "nodes": crate::hostlist::compress(&names)})
        })
        .collect()
}

/// `slurm-dws requests [--active]`
pub async fn requests(cfg: &Config, active: bool, l: &Listing) -> Result<String, CliError> {
    check("requests", REQUEST_FIELDS, l)?;
    let store = open(cfg).await?;
    let rs: Vec<Request> =
        store.requests(false).await?.into_iter().filter(|r| !active || r.phase.is_open()).collect();
    let waits = store.request_waits().await?;
    let now = now();
    let records: Vec<Value> = rs
        .iter()
        .map(|r| {
            let estimate = crate::cli::waiting_view::estimate(cfg, &waits, r, now);
            json!({
                "name": r.name, "mig": r.mig, "nodeset": r.nodeset, "nodes": r.nodes, "state": r.gce_state,
                "phase": r.phase, "run_duration": r.run_duration, "job_id": r.job_id,
                "created_at": ts(Some(r.created_at)), "updated_at": ts(Some(r.updated_at)),
                "region": crate::cli::waiting_view::region(cfg, r),
                "zone": r.zone,
                "queued_for": estimate.as_ref().map(|e| e.0),
                "waiting": estimate.as_ref().map(|e| e.2.clone()),
                "last_error": r.last_error,
            })
        })
        .collect();
    print("requests", REQUEST_FIELDS, records, l)
}

/// `slurm-dws migs`
pub async fn migs(cfg: &Config, l: &Listing) -> Result<String, CliError> {
    check("migs", MIG_FIELDS, l)?;
    let store = open(cfg).await?;
    let ms = store.migs(false).await?;
    let records: Vec<Value> = ms
        .iter()
        .map(|m| {
            json!({
                "name": m.name, "nodeset": m.nodeset, "region": m.region, "target_size": m.target_size,
                "state": m.state, "created_at": ts(Some(m.created_at)), "empty_since": ts(m.empty_since),
            })
        })
        .collect();
    print("migs", MIG_FIELDS, records, l)
}

/// Parses `--since`: RFC3339, or an age like `90s`, `15m`, `2h`, `1d`. An age reaching back
/// before what a timestamp can hold is an error, not a crash.
pub fn parse_since(s: &str, now: DateTime<Utc>) -> Result<DateTime<Utc>, CliError> {
    parse_time("--since", s, now)
}

/// Parses a time option (`flag`, for the error): RFC3339, or an age back from `now` like `90s`,
/// `15m`, `2h`, `7d`.
pub fn parse_time(flag: &str, s: &str, now: DateTime<Utc>) -> Result<DateTime<Utc>, CliError> {
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Ok(t.with_timezone(&Utc));
    }
    let bad =
        |why: &str| CliError::usage(format!("bad {flag} '{}': {why}", crate::hostlist::escape_control(s)));
    let (num, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: i64 = num.parse().map_err(|_| bad("use RFC3339 or an age like 15m, 2h, 1d"))?;
    let scale = match unit {
        "s" | "" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(bad("unit must be s, m, h or d")),
    };
    n.checked_mul(scale)
        .and_then(chrono::Duration::try_seconds)
        .and_then(|age| now.checked_sub_signed(age))
        .ok_or_else(|| bad("that is too long ago"))
}

/// `slurm-dws events [--node N] [--since T] [--limit N]`
pub async fn events(
    cfg: &Config,
    node: Option<&str>,
    since: Option<&str>,
    limit: i64,
    l: &Listing,
) -> Result<String, CliError> {
    let now = now();
    let since = since.map(|s| parse_since(s, now)).transpose()?;
    check("events", EVENT_FIELDS, l)?;
    let store = open(cfg).await?;
    let es = store.events(node, since, limit).await?;
    let default_table = !l.json && !l.long && l.format.is_none();
    let records: Vec<Value> = es
        .iter()
        .map(|e| {
            let mut v = event_json(e);
            // The default table has no COUNT column: a repeated event says so in its message.
            if default_table && e.count > 1 {
                v["message"] = Value::String(format!("{} ({} times)", e.message, e.count));
            }
            v
        })
        .collect();
    print("events", EVENT_FIELDS, records, l)
}
