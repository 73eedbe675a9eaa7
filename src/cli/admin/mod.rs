//! The admin commands: `status`, `nodes`, `requests`, `migs`, `events`, `explain`, `gc`, `reconcile`.
//!
//! Read-only commands read the store directly when the caller may open it, so they work whether or not
//! the daemon runs (and say so), else through the daemon ([`Source`]: members of `daemon.readers`);
//! `gc` and `reconcile` change things and go through the daemon's socket, where the peer is checked.
//! Listings build one JSON record per row, whose keys are the `--json` fields (docs/json.md); the
//! table, `-o/--format` and `--sort` are made from the same records by [`table::print`].

use super::source::Source;
use super::table::{self, age, rfc3339, ts, when, Field, Kind, Listing, Table};
use super::CliError;
use crate::config::Config;
use crate::model::*;
use crate::protocol::{self, Liveness, Request as Ask, Response};
use crate::reconcile::gce_edge::step_retry::MAX_STEP_ATTEMPTS;
use crate::reconcile::{GcItemKind, GcReport, PassReport};
use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::Duration;

/// The time the report is made for: a command's output is read now, so the CLI reads the clock once
/// per command and hands it down.
#[allow(clippy::disallowed_methods)] // an edge: an admin command reports the present
fn now() -> DateTime<Utc> {
    Utc::now()
}

async fn open(cfg: &Config) -> Result<Source, CliError> {
    Source::open(cfg).await
}

fn rt(e: impl std::fmt::Display) -> CliError {
    CliError::runtime(e.to_string())
}

fn print(what: &str, fields: &[Field], records: Vec<Value>, l: &Listing) -> Result<String, CliError> {
    table::print(what, fields, records, l, now()).map_err(CliError::usage)
}

fn check(what: &str, fields: &[Field], l: &Listing) -> Result<(), CliError> {
    table::check(what, fields, l).map_err(CliError::usage)
}

fn to_json(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default() + "\n"
}

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
            let live = super::live::live(n, backoffs.iter().find(|b| b.nodeset == n.nodeset), now);
            json!({
                "name": n.name, "nodeset": n.nodeset, "static": n.is_static, "state": n.state,
                "job_id": live.job_id, "mig": n.mig, "resize_request": rr_name(n),
                "termination_time": ts(n.termination_time), "last_error": live.last_error,
                "vm_status": n.vm_status, "reservation": n.reservation, "state_since": ts(Some(n.state_since)),
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
            let estimate = super::waiting_view::estimate(cfg, &waits, r, now);
            json!({
                "name": r.name, "mig": r.mig, "nodeset": r.nodeset, "nodes": r.nodes, "state": r.gce_state,
                "phase": r.phase, "run_duration": r.run_duration, "job_id": r.job_id,
                "created_at": ts(Some(r.created_at)), "updated_at": ts(Some(r.updated_at)),
                "region": super::waiting_view::region(cfg, r),
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
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Ok(t.with_timezone(&Utc));
    }
    let bad =
        |why: &str| CliError::usage(format!("bad --since '{}': {why}", crate::hostlist::escape_control(s)));
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

/// An event as `events --json` and `explain --json` print it.
fn event_json(e: &Event) -> Value {
    json!({"time": rfc3339(e.time), "kind": e.kind, "nodes": e.nodes, "count": e.count, "message": e.message})
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
/// Where `status` values start: after the longest label, `oldest queued:`, and a space.
const STATUS_INDENT: usize = 15;

/// Asks the daemon for its liveness; `None` when it is not running.
async fn daemon_status(cfg: &Config) -> Option<Liveness> {
    match protocol::call(&cfg.socket, Ask::Status, Duration::from_secs(3)).await {
        Ok(Response::Status(live)) => Some(live),
        _ => None,
    }
}

/// `slurm-dws status`: the text (or JSON) to print, and the error to exit with when the daemon is not
/// running or its last pass was degraded (SPEC: exit 1; the status is printed all the same).
pub async fn status(
    cfg: &Config,
    json_out: bool,
    width: usize,
) -> Result<(String, Option<CliError>), CliError> {
    let now = now();
    let live = daemon_status(cfg).await;
    let store = open(cfg).await?;
    let nodes = store.nodes().await?;
    let requests = store.requests(true).await?;
    let waits = store.request_waits().await?;
    let waiting_lines: Vec<(&Request, String)> = requests
        .iter()
        .filter_map(|r| super::waiting_view::estimate(cfg, &waits, r, now).map(|e| (r, e.2)))
        .collect();
    let outbox = store.outbox_depth().await?;
    let given_up: Vec<StepFailures> =
        store.step_failures().await?.into_iter().filter(|f| f.failed >= MAX_STEP_ATTEMPTS).collect();
    let inbox = store.inbox_depth().await?;
    let backoffs: Vec<Backoff> = store.backoffs().await?.into_iter().filter(|b| b.until > now).collect();
    let unsched = super::unschedulable::now(cfg, &backoffs, &requests, now);
    let last_pass: Option<PassReport> = match live.as_ref().and_then(|l| l.last_pass.clone()) {
        Some(p) => Some(p),
        None => store.meta("last_pass").await?.and_then(|s| serde_json::from_str(&s).ok()),
    };
    let mut counts: BTreeMap<&str, usize> = NodeState::ALL.iter().map(|s| (s.as_str(), 0)).collect();
    for n in &nodes {
        *counts.entry(n.state.as_str()).or_default() += 1;
    }
    let queued: Vec<&Request> =
        requests.iter().filter(|r| r.gce_state == Some(GceRequestState::Accepted)).collect();
    let oldest = queued.iter().min_by_key(|r| r.created_at);
    let degraded = last_pass.as_ref().filter(|p| p.outcome == crate::reconcile::PassOutcome::Degraded);
    let reasons = degraded.map(|p| p.degraded_reasons()).unwrap_or_default();
    let since = degraded.map(|p| p.degraded_since.unwrap_or(p.started_at));
    // GCE calls in flight as the last pass left them, aged to now.
    let in_flight: Vec<(&crate::reconcile::InFlightCall, i64)> = last_pass
        .iter()
        .flat_map(|p| {
            let since_end = (now - p.started_at).num_seconds() - (p.duration_ms / 1000) as i64;
            p.in_flight.iter().map(move |c| (c, c.age_secs as i64 + since_end.max(0)))
        })
        .collect();
    let unhealthy = if live.is_none() {
        Some(CliError::runtime(format!("the daemon is not running (no answer on {})", cfg.socket.display())))
    } else {
        since.map(|t| CliError::runtime(format!("DEGRADED since {}: {}", rfc3339(t), reasons.join("; "))))
    };
    let v = json!({
        "healthy": unhealthy.is_none(),
        "degraded": since.map(|t| json!({"since": rfc3339(t), "reasons": reasons})),
        "daemon": {
            "running": live.is_some(),
            "pid": live.as_ref().map(|l| l.pid),
            "started_at": live.as_ref().map(|l| l.started_at.as_str()),
            "pass_running": live.as_ref().map(|l| l.pass_running),
        },
        "version": env!("CARGO_PKG_VERSION"),
        "config": cfg.source.display().to_string(),
        "state_dir": cfg.state_dir.display().to_string(),
        "unreachable_zones": last_pass.as_ref().map(|p| p.unreachable_zones.clone()).unwrap_or_default(),
        "refused_nodesets": last_pass.as_ref().map(|p| p.refused_nodesets.clone()).unwrap_or_default(),
        "gce_calls_in_flight": in_flight.iter().map(|(c, age)| json!({"step": c.step.as_str(), "target": c.target, "request_id": c.request_id, "age_seconds": age})).collect::<Vec<_>>(),
        "last_pass": last_pass,
        "nodes": counts,
        "requests_open": requests.len(),
        "requests_queued": queued.len(),
        "waiting": waiting_lines.iter().map(|(r, line)| json!({"request": r.name, "nodeset": r.nodeset, "job_id": r.job_id, "queued_for": (now - r.created_at).num_seconds().max(0), "line": line})).collect::<Vec<_>>(),
        "oldest_queued_request": oldest.map(|r| json!({"name": r.name, "mig": r.mig, "created_at": rfc3339(r.created_at), "age_seconds": (now - r.created_at).num_seconds()})),
        "pending_work": { "inbox": inbox, "outbox": outbox },
        "gce_steps_given_up": given_up.iter().map(|f| json!({"kind": f.kind.as_str(), "target": f.target, "failed": f.failed, "last_at": rfc3339(f.last_at), "last_error": f.last_error})).collect::<Vec<_>>(),
        "backoffs": backoffs.iter().map(|b| json!({"nodeset": b.nodeset, "until": rfc3339(b.until), "level": b.level, "reason": b.reason})).collect::<Vec<_>>(),
        "unschedulable": unsched,
    });
    if json_out {
        return Ok((to_json(&v), unhealthy));
    }
    // (label, lines): each line wrapped to the terminal under its label, so nothing is cut.
    let mut rows: Vec<(&str, Vec<String>)> = Vec::new();
    let wrap_errors = |head: String, errors: &[String]| {
        std::iter::once(head).chain(errors.iter().cloned()).collect::<Vec<_>>()
    };
    rows.push((
        "health:",
        match (&live, since) {
            (None, _) => vec!["DOWN: the daemon is not running".to_string()],
            (Some(_), Some(t)) => wrap_errors(
                format!("DEGRADED since {} ({} ago):", rfc3339(t), age((now - t).num_seconds())),
                &reasons,
            ),
            (Some(_), None) => vec!["ok".to_string()],
        },
    ));
    rows.push((
        "daemon:",
        vec![match &live {
            Some(l) => {
                let since = DateTime::parse_from_rfc3339(&l.started_at).ok().map(|t| t.with_timezone(&Utc));
                format!("running (pid {}, since {})", l.pid, when(since, now))
            }
            None => format!(
                "NOT RUNNING (no answer on {}); hook requests wait in the inbox",
                cfg.socket.display()
            ),
        }],
    ));
    rows.push(("version:", vec![env!("CARGO_PKG_VERSION").to_string()]));
    rows.push(("config:", vec![cfg.source.display().to_string()]));
    rows.push((
        "last pass:",
        match &last_pass {
            Some(p) => {
                let head = format!(
                    "#{} ({}) {} took {} ms: {}",
                    p.iteration,
                    trigger_name(p),
                    when(Some(p.started_at), now),
                    p.duration_ms,
                    p.outcome
                );
                // A degraded daemon's reasons are under health already.
                if since.is_some() && live.is_some() {
                    vec![head]
                } else {
                    wrap_errors(head, &p.errors)
                }
            }
            None => vec!["none yet".to_string()],
        },
    ));
    if let Some(p) = last_pass.as_ref().filter(|p| !p.unreachable_zones.is_empty()) {
        rows.push((
            "unreachable:",
            vec![format!(
                "zone {} (GCE did not list its VMs: nothing there is judged gone until it answers)",
                p.unreachable_zones.join(", ")
            )],
        ));
    }
    for (r, line) in &waiting_lines {
        let job = r.job_id.map_or(String::new(), |j| format!("job {j}, "));
        rows.push(("waiting:", vec![format!("{} ({job}{}): {line}", r.name, r.nodeset)]));
    }
    for (ns, why) in last_pass.iter().flat_map(|p| &p.refused_nodesets) {
        rows.push(("refused:", vec![format!("nodeset {ns}: {why}; its nodes get no VM")]));
    }
    for (c, secs) in &in_flight {
        rows.push((
            "in flight:",
            vec![format!(
                "{} of {} hanging for {secs} s (requestId {}): no answer from GCE yet; passes go on without it",
                c.step.as_str(),
                c.target,
                c.request_id
            )],
        ));
    }
    rows.push(("nodes:", vec![counts.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ")]));
    rows.push(("requests:", vec![format!("{} open, {} queued in GCE", requests.len(), queued.len())]));
    if let Some(r) = oldest {
        rows.push((
            "oldest queued:",
            vec![format!("{} in {} ({} old)", r.name, r.mig, age((now - r.created_at).num_seconds()))],
        ));
    }
    rows.push((
        "pending work:",
        vec![format!("{inbox} hook calls in the inbox, {} GCE mutations in the outbox", outbox)],
    ));
    for f in &given_up {
        rows.push((
            "GAVE UP:",
            vec![format!(
                "{} {} after {} failed attempts, last {}: {} (a restart or reload retries it)",
                f.kind.as_str(),
                f.target,
                f.failed,
                when(Some(f.last_at), now),
                f.last_error
            )],
        ));
    }
    if backoffs.is_empty() {
        rows.push(("backoffs:", vec!["none".to_string()]));
    }
    for b in &backoffs {
        rows.push((
            "backoff:",
            vec![format!(
                "nodeset {} until {} (level {}): {}",
                b.nodeset,
                when(Some(b.until), now),
                b.level,
                b.reason
            )],
        ));
    }
    rows.extend(super::unschedulable::status_rows(&unsched));
    // A row's first line follows its label; the lines after it are a list ("- "), each wrapped.
    let mut s = String::new();
    for (label, lines) in rows {
        for (i, line) in lines.iter().enumerate() {
            let bullet = if i == 0 { 0 } else { 2 };
            for (j, part) in
                table::wrap(line, width.saturating_sub(STATUS_INDENT + bullet)).iter().enumerate()
            {
                let label = if i == 0 && j == 0 { label } else { "" };
                let lead = match (i, j) {
                    (0, _) => "",
                    (_, 0) => "- ",
                    _ => "  ",
                };
                s.push_str(&format!("{label:<STATUS_INDENT$}{lead}{part}\n"));
            }
        }
    }
    Ok((s, unhealthy))
}

/// `slurm-dws explain NODE`: the node's story in plain sentences, wrapped to `width` columns.
pub async fn explain(cfg: &Config, name: &str, json_out: bool, width: usize) -> Result<String, CliError> {
    let naming = crate::naming::Naming::new(cfg);
    if let Err(e) = naming.parse(name) {
        // The error names the node already.
        return Err(CliError::usage(format!("not a slurm-dws node: {e}")));
    }
    let store = open(cfg).await?;
    let now = now();
    let node = store.node(name).await?;
    let request = match node.as_ref().and_then(|n| n.request_id) {
        Some(id) => Some(store.request(id).await?),
        None => None,
    };
    let events = store.events(Some(name), None, 200).await?;
    let backoffs = store.backoffs().await?;
    let slurm = SlurmView::ask(cfg, name).await;
    let mut lines: Vec<String> = Vec::new();
    let Some(n) = &node else {
        lines.push(format!("{name} is a slurm-dws node, but slurm-dws has never been asked for it: it is powered down and has no VM."));
        lines.push(slurm.sentence());
        return Ok(render_story(name, &lines, &events, &slurm, json_out, now, width));
    };
    lines.push(format!(
        "{name} is a {} node of nodeset {}. slurm-dws has it {} since {}.",
        if n.is_static { "static" } else { "dynamic" },
        n.nodeset,
        describe_state(n.state),
        when(Some(n.state_since), now)
    ));
    lines.push(slurm.sentence());
    let live = super::live::live(n, backoffs.iter().find(|b| b.nodeset == n.nodeset), now);
    let (old_job, old_error) = super::live::history(n, &live);
    if let Some(j) = live.job_id {
        lines.push(format!("Job {j} asked for it."));
    }
    if let Some(r) = &request {
        lines.push(format!(
            "It belongs to {} in MIG {} ({}, {}), created {}.",
            crate::reconcile::gce_edge::vm_create::group_words(&r.name, r.run_duration),
            r.mig,
            crate::model::count_of(r.nodes.len(), "node"),
            crate::reconcile::gce_edge::vm_create::run_duration_words(r.run_duration, age),
            when(Some(r.created_at), now)
        ));
        lines.push(format!(
            "GCE's state of the request: {} (slurm-dws phase: {}).",
            r.gce_state.as_ref().map_or("not seen yet", GceRequestState::as_str),
            r.phase
        ));
        if let Some(e) = &r.last_error {
            lines.push(format!("The request's last error: {e}"));
        }
        if let Some(c) = &r.zone_choice {
            lines.push(format!("Its MIG's zone(s): {} ({}).", c.zones.join(", "), c.why));
        }
        let waits = store.request_waits().await?;
        if let Some((_, _, line)) = super::waiting_view::estimate(cfg, &waits, r, now) {
            lines.push(format!("Expected start: {line}"));
        }
    }
    if let Some(s) = &n.vm_status {
        lines.push(format!("Its VM is {s}."));
    }
    if let Some(t) = n.termination_time {
        lines.push(format!("GCE will delete its VM at {} (end of the run duration).", when(Some(t), now)));
    }
    if let Some(line) = placement_sentence(cfg, n) {
        lines.push(line);
    }
    if let Some(r) = &n.reservation {
        lines.push(format!("Slurm reservation {r} keeps new jobs from outliving the VM."));
    }
    if let Some(e) = live.last_error {
        lines.push(format!("Last error: {e}"));
    }
    // What no longer holds (the history below tells the whole story).
    if let Some(j) = old_job {
        lines.push(format!("Earlier: it was last resumed for job {j}."));
    }
    if let Some(e) = old_error {
        lines.push(format!("Earlier: its last error, which no longer holds: {e}"));
    }
    // GCE steps about the node's MIG (or its VM) that keep failing.
    let mig = request.as_ref().map(|r| r.mig.clone()).or_else(|| n.mig.clone());
    for f in store.step_failures().await.map_err(rt)? {
        let about_node =
            mig.as_deref().is_some_and(|m| f.target == m || f.target.starts_with(&format!("{m}/")))
                || (f.kind == MutationKind::DeleteInstances
                    && mig.as_deref().is_some_and(|m| f.target.starts_with(&format!("{m}:"))));
        if about_node {
            lines.push(format!(
                "GCE step {} {} failed {} time(s) in a row, last {}: {}{}",
                f.kind.as_str(),
                f.target,
                f.failed,
                when(Some(f.last_at), now),
                f.last_error,
                if f.failed >= MAX_STEP_ATTEMPTS {
                    "; slurm-dws GAVE UP on it (a restart or reload retries it)".to_string()
                } else {
                    "; retried with a new requestId after a backoff".to_string()
                }
            ));
        }
    }
    lines.extend(super::unschedulable::explain_line(cfg, &backoffs, &store.requests(true).await?, n, now));
    let backoff = backoffs.iter().find(|b| b.nodeset == n.nodeset && b.until > now);
    lines.push(format!("Next: {}", next_step(cfg, n, request.as_ref(), backoff, now)));
    Ok(render_story(name, &lines, &events, &slurm, json_out, now, width))
}

/// Where the node's VM runs (GCE's physical host topology) and so which Slurm block / switch the
/// topology file puts it in; for a node with a VM but no physical host, why. `None` without a VM.
fn placement_sentence(cfg: &Config, n: &Node) -> Option<String> {
    n.vm_status.as_ref()?;
    let slurm_topology = cfg.slurm.topology.kind != crate::config::TopologyKind::None;
    let Some(t) = n.topology.as_deref() else {
        let policy = cfg.nodeset(&n.nodeset).is_some_and(|ns| ns.placement.is_some());
        return Some(
            if policy {
                "GCE reports no physical host for its VM yet (it is given once the VM has a host)".to_string()
            } else {
                "GCE reports no physical host for its VM: its nodeset has no [nodeset.placement] (no workload policy)"
                .to_string()
            } + if slurm_topology { "; the topology file has it under 'unplaced'." } else { "." },
        );
    };
    let mut parts = t.split('/');
    let (cluster, block, subblock, host) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    );
    let or_unknown = |s: &str| if s.is_empty() { "unknown".to_string() } else { s.to_string() };
    let mut s = format!(
        "Its VM runs in block {} (cluster {}, subblock {}, host {}).",
        or_unknown(block),
        or_unknown(cluster),
        or_unknown(subblock),
        or_unknown(host)
    );
    use crate::config::TopologyKind;
    match (cfg.slurm.topology.kind, crate::topology::block_of(t)) {
        (TopologyKind::None, _) => {}
        (_, None) => s.push_str(&format!(
            " Without a cluster and block the topology file has it under '{}'.",
            crate::topology::UNPLACED
        )),
        (TopologyKind::Block, Some(b)) => {
            s.push_str(&format!(" The topology file puts it in Slurm block {b}."))
        }
        (TopologyKind::Tree, Some(b)) => s.push_str(&format!(
            " The topology file puts it under switch {} of block switch {b}.",
            if subblock.is_empty() { b } else { subblock }
        )),
    }
    Some(s)
}

/// What Slurm says of a node, next to slurm-dws's own view: its state as `sinfo` prints it, its
/// reason and its jobs; or why Slurm could not be asked.
#[derive(Debug, Default)]
struct SlurmView {
    /// `None` when Slurm does not list the node.
    state: Option<String>,
    reason: String,
    jobs: Vec<(u32, String)>,
    error: Option<String>,
}

impl SlurmView {
    async fn ask(cfg: &Config, name: &str) -> SlurmView {
        let slurm = crate::slurm::Slurm::new(
            cfg.slurm.bin_dir.clone(),
            cfg.slurm.conf.clone(),
            Duration::from_secs(cfg.slurm.command_timeout),
        );
        let node = match slurm.nodes().await {
            Ok(nodes) => nodes.into_iter().find(|n| n.name == name),
            Err(e) => return SlurmView { error: Some(e.to_string()), ..SlurmView::default() },
        };
        let mut view = SlurmView {
            state: node.as_ref().map(|n| n.compact_state()),
            reason: node.map(|n| n.reason).unwrap_or_default(),
            ..SlurmView::default()
        };
        match slurm.jobs_on_node(name).await {
            Ok(jobs) => view.jobs = jobs.into_iter().map(|j| (j.job_id, j.state)).collect(),
            Err(e) => view.error = Some(e.to_string()),
        }
        view
    }

    fn sentence(&self) -> String {
        let mut s = match &self.state {
            Some(state) => format!("Slurm has it {state}"),
            None if self.error.is_some() => "Slurm could not be asked".to_string(),
            None => "Slurm does not list it".to_string(),
        };
        if !self.reason.is_empty() {
            s.push_str(&format!(" (reason: {})", self.reason));
        }
        if self.state.is_some() || !self.jobs.is_empty() {
            let jobs: Vec<String> = self.jobs.iter().map(|(id, state)| format!("{id} {state}")).collect();
            s.push_str(&match jobs.len() {
                0 => ", no job on it".to_string(),
                1 => format!(", job {} on it", jobs[0]),
                _ => format!(", jobs {} on it", jobs.join(", ")),
            });
        }
        if let Some(e) = &self.error {
            s.push_str(&format!(": {e}"));
        }
        s + "."
    }

    fn json(&self) -> Value {
        json!({
            "state": self.state,
            "reason": self.reason,
            "jobs": self.jobs.iter().map(|(id, state)| json!({"job_id": id, "state": state})).collect::<Vec<_>>(),
            "error": self.error,
        })
    }
}

fn describe_state(s: NodeState) -> &'static str {
    match s {
        NodeState::PoweredDown => "powered down (no VM, none wanted)",
        NodeState::ResumePending => "waiting for a resize request to be made",
        NodeState::Requested => "requested from GCE (the request is not final yet)",
        NodeState::Up => "up (its VM exists)",
        NodeState::Suspending => "suspending (its VM is being deleted)",
    }
}

fn next_step(
    cfg: &Config,
    n: &Node,
    r: Option<&Request>,
    backoff: Option<&Backoff>,
    now: DateTime<Utc>,
) -> String {
    let interval = cfg.reconcile.interval;
    match n.state {
        NodeState::PoweredDown if n.is_static => match backoff {
            Some(b) => format!("a static node: re-provisioned when the backoff of nodeset {} ends, {}.", b.nodeset, when(Some(b.until), now)),
            None => format!("a static node: re-provisioned by the next pass (within {interval}s)."),
        },
        NodeState::PoweredDown => "nothing until Slurm resumes it.".into(),
        NodeState::ResumePending => match backoff {
            Some(b) => format!("nodeset {} is in backoff until {}: the resume will be answered at once and the job requeued.", b.nodeset, when(Some(b.until), now)),
            None => format!("the next pass (within {interval}s) makes its MIG and resize request."),
        },
        NodeState::Requested => {
            let qt = cfg.nodeset(&n.nodeset).map_or(0, |ns| ns.dws_flex.queue_timeout);
            let cancel = match (qt, r) {
                (0, _) | (_, None) => "it waits for capacity for as long as it takes (queue_timeout = 0)".to_string(),
                (qt, Some(r)) => format!("it is cancelled if still queued at {}", when(Some(r.created_at + chrono::Duration::seconds(qt as i64)), now)),
            };
            format!("slurm-dws polls the request every pass until it ends; {cancel}.")
        }
        NodeState::Up => match n.termination_time {
            Some(t) if n.is_static => format!("when the VM is deleted at {}, slurm-dws re-provisions the node in the same pass.", when(Some(t), now)),
            Some(t) => format!("when the VM is deleted at {}, the node leaves service (its job requeued if still running).", when(Some(t), now)),
            None => "nothing: the node is in service.".into(),
        },
        NodeState::Suspending => format!("the VM is deleted by the next pass (within {interval}s); if its request is still queued it is cancelled."),
    }
}

fn render_story(
    name: &str,
    lines: &[String],
    events: &[Event],
    slurm: &SlurmView,
    json_out: bool,
    now: DateTime<Utc>,
    width: usize,
) -> String {
    if json_out {
        let v = json!({
            "node": name,
            "slurm": slurm.json(),
            "story": lines,
            "events": events.iter().map(event_json).collect::<Vec<_>>(),
        });
        return to_json(&v);
    }
    let mut s = String::new();
    for line in lines {
        for part in table::wrap(line, width) {
            s.push_str(&part);
            s.push('\n');
        }
    }
    if !events.is_empty() {
        s.push_str("\nHistory:\n");
        for e in events {
            let times = if e.count > 1 { format!(" ({} times)", e.count) } else { String::new() };
            let head = format!("  {}  {:<18}", when(Some(e.time), now), e.kind);
            let one_line = format!("{head} {}{times}", e.message);
            if one_line.chars().count() <= width {
                s.push_str(&one_line);
                s.push('\n');
                continue;
            }
            // Too long for the terminal: the message goes under its time and kind, wrapped.
            s.push_str(head.trim_end());
            s.push('\n');
            for part in table::wrap(&format!("{}{times}", e.message), width.saturating_sub(6)) {
                s.push_str(&format!("      {part}\n"));
            }
        }
    }
    s
}

/// `slurm-dws reconcile` and `slurm-dws gc [--dry-run]`: through the daemon.
pub async fn ask_daemon(cfg: &Config, ask: Ask, json_out: bool) -> Result<String, CliError> {
    let response = match protocol::call(&cfg.socket, ask, Duration::from_secs(600)).await {
        Ok(Response::Error { message }) => return Err(CliError::runtime(format!("daemon: {message}"))),
        Ok(r) => r,
        Err(e) => {
            return Err(CliError::runtime(format!(
                "{e}; is the daemon running? (systemctl status slurm-dws)"
            )))
        }
    };
    // The report goes through a JSON value so that `--json` prints its keys sorted, as every listing.
    let json = |report: Result<Value, serde_json::Error>| report.map(|v| to_json(&v)).map_err(rt);
    match response {
        Response::Pass(p) if json_out => json(serde_json::to_value(&p)),
        Response::Gc(g) if json_out => json(serde_json::to_value(&g)),
        Response::Pass(p) => Ok(render_pass(&p)),
        Response::Gc(g) => Ok(render_gc(&g)),
        other => Err(CliError::runtime(format!("daemon sent an unexpected answer: {other:?}"))),
    }
}

fn trigger_name(p: &PassReport) -> String {
    serde_json::to_value(p.trigger).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
}

fn render_pass(p: &PassReport) -> String {
    let mut s = format!(
        "pass #{} ({}) took {} ms: {}\n  hook calls ingested: {}\n  request groups created: {}\n  Slurm commands: {}\n  events: {}\n",
        p.iteration, trigger_name(p), p.duration_ms, p.outcome,
        p.hook_calls_ingested, p.requests_created, p.slurm_commands, p.events
    );
    for st in &p.gce_steps {
        s.push_str(&format!(
            "  GCE {} {}: {}\n",
            st.step,
            st.target,
            if st.ok {
                "done".to_string()
            } else {
                format!("FAILED: {}", st.error.as_deref().unwrap_or("?"))
            }
        ));
    }
    for e in &p.errors {
        s.push_str(&format!("  error: {e}\n"));
    }
    s
}

fn render_gc(r: &GcReport) -> String {
    let list = r.items();
    if list.is_empty() {
        return "nothing to delete: every owned MIG is in use or within mig_gc_grace, every VM backs a node\n".into();
    }
    let mut t = Table::new(&["KIND", "NAME", "MIG", "REASON"]);
    for i in list {
        let kind = match i.kind {
            GcItemKind::Mig => "mig",
            GcItemKind::Vm => "vm",
            GcItemKind::Policy => "policy",
        };
        t.push(vec![
            kind.into(),
            i.name.clone(),
            i.mig.clone().unwrap_or_else(|| "-".into()),
            i.reason.clone(),
        ]);
    }
    format!("{}{}", if r.dry_run() { "a pass would delete:\n" } else { "deleted:\n" }, t.render())
}
