//! The admin commands: `status`, `nodes`, `requests`, `migs`, `events`, `explain`, `gc`, `reconcile`.
//!
//! Read-only commands read the store directly, so they work whether or not the daemon runs (and say so);
//! `gc` and `reconcile` change things and go through the daemon's socket, where the peer is checked.

use super::table::{age, opt, when, Table};
use super::CliError;
use crate::config::Config;
use crate::model::*;
use crate::protocol::{self, Liveness, Request as Ask, Response};
use crate::reconcile::{GcItemKind, GcReport, PassReport};
use crate::store::Store;
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

/// Options every listing takes.
#[derive(Debug, Clone, Default)]
pub struct Listing {
    pub json: bool,
    pub sort: Option<String>,
}

async fn open(cfg: &Config) -> Result<Store, CliError> {
    let db = cfg.state_dir.join(crate::store::DB_FILE);
    if let Err(e) = std::fs::metadata(&db) {
        if e.kind() == std::io::ErrorKind::PermissionDenied {
            // 0600 in a 0700 directory: only root and the service user read the store.
            return Err(CliError::runtime(format!(
                "permission denied reading {}: run this as root or as the service user",
                db.display()
            )));
        }
    }
    if !db.exists() {
        return Err(CliError::runtime(format!(
            "no state database in {} (the daemon has not run yet, or state_dir is wrong)",
            cfg.state_dir.display()
        )));
    }
    Store::open(&cfg.state_dir).await.map_err(|e| CliError::runtime(e.to_string()))
}

fn rt(e: impl std::fmt::Display) -> CliError {
    CliError::runtime(e.to_string())
}

fn ts(t: Option<DateTime<Utc>>) -> Value {
    t.map_or(Value::Null, |t| Value::String(t.to_rfc3339()))
}

fn finish(mut t: Table, l: &Listing) -> Result<String, CliError> {
    if let Some(col) = &l.sort {
        t.sort_by(col).map_err(CliError::usage)?;
    }
    Ok(t.render())
}

fn to_json(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default() + "\n"
}

/// `slurm-dws nodes [--nodeset N] [--state S] [NODES...]`
pub async fn nodes(
    cfg: &Config,
    nodeset: Option<&str>,
    state: Option<&str>,
    names: &[String],
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
    let store = open(cfg).await?;
    let requests: BTreeMap<i64, Request> =
        store.requests(false).await.map_err(rt)?.into_iter().map(|r| (r.id, r)).collect();
    let nodes: Vec<Node> = store
        .nodes()
        .await
        .map_err(rt)?
        .into_iter()
        .filter(|n| nodeset.is_none_or(|ns| n.nodeset == ns))
        .filter(|n| state.is_none_or(|s| n.state == s))
        .filter(|n| wanted.is_empty() || wanted.contains(&n.name))
        .collect();
    let now = now();
    let rr_name = |n: &Node| n.request_id.and_then(|id| requests.get(&id)).map(|r| r.name.clone());
    if l.json {
        let v: Vec<Value> = nodes
            .iter()
            .map(|n| {
                json!({
                    "name": n.name, "nodeset": n.nodeset, "static": n.is_static, "state": n.state,
                    "job_id": n.job_id, "mig": n.mig, "resize_request": rr_name(n),
                    "termination_time": ts(n.termination_time), "last_error": n.last_error,
                    "vm_status": n.vm_status, "reservation": n.reservation, "state_since": ts(Some(n.state_since)),
                })
            })
            .collect();
        return Ok(to_json(&Value::Array(v)));
    }
    let mut t = Table::new(&[
        "NAME",
        "NODESET",
        "STATIC",
        "STATE",
        "SINCE",
        "JOB",
        "MIG",
        "VM",
        "TERMINATION",
        "LAST_ERROR",
    ]);
    for n in &nodes {
        t.push(vec![
            n.name.clone(),
            n.nodeset.clone(),
            if n.is_static { "yes" } else { "no" }.into(),
            n.state.to_string(),
            age((now - n.state_since).num_seconds()),
            opt(&n.job_id),
            opt(&n.mig),
            opt(&n.vm_status),
            when(n.termination_time, now),
            opt(&n.last_error),
        ]);
    }
    finish(t, l)
}

/// `slurm-dws requests [--active]`
pub async fn requests(cfg: &Config, active: bool, l: &Listing) -> Result<String, CliError> {
    let store = open(cfg).await?;
    let rs: Vec<Request> = store
        .requests(false)
        .await
        .map_err(rt)?
        .into_iter()
        .filter(|r| {
            !active
                || matches!(r.phase, RequestPhase::Planned | RequestPhase::MigReady | RequestPhase::Active)
        })
        .collect();
    let now = now();
    if l.json {
        let v: Vec<Value> = rs
            .iter()
            .map(|r| {
                json!({
                    "name": r.name, "mig": r.mig, "nodeset": r.nodeset, "nodes": r.nodes, "state": r.gce_state,
                    "phase": r.phase, "run_duration": r.run_duration, "job_id": r.job_id,
                    "created_at": ts(Some(r.created_at)), "updated_at": ts(Some(r.updated_at)), "last_error": r.last_error,
                })
            })
            .collect();
        return Ok(to_json(&Value::Array(v)));
    }
    let mut t = Table::new(&[
        "NAME",
        "MIG",
        "NODESET",
        "JOB",
        "NODES",
        "COUNT",
        "STATE",
        "PHASE",
        "RUN_DURATION",
        "CREATED",
        "LAST_ERROR",
    ]);
    for r in &rs {
        t.push(vec![
            r.name.clone(),
            r.mig.clone(),
            r.nodeset.clone(),
            opt(&r.job_id),
            crate::hostlist::compress(&r.nodes),
            r.nodes.len().to_string(),
            opt(&r.gce_state),
            r.phase.to_string(),
            age(r.run_duration as i64),
            when(Some(r.created_at), now),
            opt(&r.last_error),
        ]);
    }
    finish(t, l)
}

/// `slurm-dws migs`
pub async fn migs(cfg: &Config, l: &Listing) -> Result<String, CliError> {
    let store = open(cfg).await?;
    let ms = store.migs(false).await.map_err(rt)?;
    let now = now();
    if l.json {
        let v: Vec<Value> = ms
            .iter()
            .map(|m| {
                json!({
                    "name": m.name, "nodeset": m.nodeset, "region": m.region, "target_size": m.target_size,
                    "state": m.state, "created_at": ts(Some(m.created_at)), "empty_since": ts(m.empty_since),
                })
            })
            .collect();
        return Ok(to_json(&Value::Array(v)));
    }
    let mut t = Table::new(&["NAME", "NODESET", "REGION", "TARGET_SIZE", "STATE", "CREATED", "EMPTY_SINCE"]);
    for m in &ms {
        t.push(vec![
            m.name.clone(),
            m.nodeset.clone(),
            m.region.clone(),
            m.target_size.to_string(),
            m.state.to_string(),
            when(Some(m.created_at), now),
            when(m.empty_since, now),
        ]);
    }
    finish(t, l)
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
    let store = open(cfg).await?;
    let es = store.events(node, since, limit).await.map_err(rt)?;
    if l.json {
        let v: Vec<Value> = es
            .iter()
            .map(|e| json!({"time": e.time.to_rfc3339(), "kind": e.kind, "nodes": e.nodes, "message": e.message}))
            .collect();
        return Ok(to_json(&Value::Array(v)));
    }
    let mut t = Table::new(&["TIME", "KIND", "NODES", "MESSAGE"]);
    for e in &es {
        t.push(vec![when(Some(e.time), now), e.kind.clone(), e.nodes.clone(), e.message.clone()]);
    }
    finish(t, l)
}

/// Asks the daemon for its liveness; `None` when it is not running.
async fn daemon_status(cfg: &Config) -> Option<Liveness> {
    match protocol::call(&cfg.socket, Ask::Status, Duration::from_secs(3)).await {
        Ok(Response::Status(live)) => Some(live),
        _ => None,
    }
}

/// `slurm-dws status`: the text (or JSON) to print, and the error to exit with when the daemon is not
/// running or its last pass was degraded (SPEC: exit 1; the status is printed all the same).
pub async fn status(cfg: &Config, l: &Listing) -> Result<(String, Option<CliError>), CliError> {
    let now = now();
    let live = daemon_status(cfg).await;
    let store = open(cfg).await?;
    let nodes = store.nodes().await.map_err(rt)?;
    let requests = store.requests(true).await.map_err(rt)?;
    let outbox = store.pending_outbox().await.map_err(rt)?;
    let inbox = store.inbox_depth().await.map_err(rt)?;
    let backoffs: Vec<Backoff> =
        store.backoffs().await.map_err(rt)?.into_iter().filter(|b| b.until > now).collect();
    let last_pass: Option<PassReport> = match live.as_ref().and_then(|l| l.last_pass.clone()) {
        Some(p) => Some(p),
        None => store.meta("last_pass").await.map_err(rt)?.and_then(|s| serde_json::from_str(&s).ok()),
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
    let unhealthy = if live.is_none() {
        Some(CliError::runtime(format!("the daemon is not running (no answer on {})", cfg.socket.display())))
    } else {
        since.map(|t| CliError::runtime(format!("DEGRADED since {}: {}", t.to_rfc3339(), reasons.join("; "))))
    };
    let v = json!({
        "healthy": unhealthy.is_none(),
        "degraded": since.map(|t| json!({"since": t.to_rfc3339(), "reasons": reasons})),
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
        "last_pass": last_pass,
        "nodes": counts,
        "requests_open": requests.len(),
        "requests_queued": queued.len(),
        "oldest_queued_request": oldest.map(|r| json!({"name": r.name, "mig": r.mig, "created_at": r.created_at.to_rfc3339(), "age_seconds": (now - r.created_at).num_seconds()})),
        "pending_work": { "inbox": inbox, "outbox": outbox.len() },
        "backoffs": backoffs.iter().map(|b| json!({"nodeset": b.nodeset, "until": b.until.to_rfc3339(), "level": b.level, "reason": b.reason})).collect::<Vec<_>>(),
    });
    if l.json {
        return Ok((to_json(&v), unhealthy));
    }
    let mut s = String::new();
    s.push_str(&format!(
        "health:        {}\n",
        match (&live, since) {
            (None, _) => "DOWN: the daemon is not running".to_string(),
            (Some(_), Some(t)) => format!(
                "DEGRADED since {} ({} ago): {}",
                t.to_rfc3339(),
                age((now - t).num_seconds()),
                reasons.join("; ")
            ),
            (Some(_), None) => "ok".to_string(),
        }
    ));
    s.push_str(&format!(
        "daemon:        {}\n",
        match &live {
            Some(l) => format!("running (pid {}, since {})", l.pid, l.started_at),
            None => format!(
                "NOT RUNNING (no answer on {}); hook requests wait in the inbox",
                cfg.socket.display()
            ),
        }
    ));
    s.push_str(&format!(
        "version:       {}\nconfig:        {}\n",
        env!("CARGO_PKG_VERSION"),
        cfg.source.display()
    ));
    match &last_pass {
        Some(p) => {
            s.push_str(&format!(
                "last pass:     #{} ({}) {} took {} ms: {}{}\n",
                p.iteration,
                trigger_name(p),
                when(Some(p.started_at), now),
                p.duration_ms,
                p.outcome,
                if p.errors.is_empty() { String::new() } else { format!(" ({})", p.errors.join("; ")) }
            ));
        }
        None => s.push_str("last pass:     none yet\n"),
    }
    if let Some(p) = last_pass.as_ref().filter(|p| !p.unreachable_zones.is_empty()) {
        s.push_str(&format!(
            "unreachable:   zone {} (GCE did not list its VMs: nothing there is judged gone until it answers)\n",
            p.unreachable_zones.join(", ")
        ));
    }
    for (ns, why) in last_pass.iter().flat_map(|p| &p.refused_nodesets) {
        s.push_str(&format!("refused:       nodeset {ns}: {why}; its nodes get no VM\n"));
    }
    s.push_str(&format!(
        "nodes:         {}\n",
        counts.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ")
    ));
    s.push_str(&format!("requests:      {} open, {} queued in GCE\n", requests.len(), queued.len()));
    if let Some(r) = oldest {
        s.push_str(&format!(
            "oldest queued: {} in {} ({} old)\n",
            r.name,
            r.mig,
            age((now - r.created_at).num_seconds())
        ));
    }
    s.push_str(&format!(
        "pending work:  {} hook calls in the inbox, {} GCE mutations in the outbox\n",
        inbox,
        outbox.len()
    ));
    if backoffs.is_empty() {
        s.push_str("backoffs:      none\n");
    }
    for b in &backoffs {
        s.push_str(&format!(
            "backoff:       nodeset {} until {} (level {}): {}\n",
            b.nodeset,
            when(Some(b.until), now),
            b.level,
            b.reason
        ));
    }
    Ok((s, unhealthy))
}

/// `slurm-dws explain NODE`: the node's story in plain sentences.
pub async fn explain(cfg: &Config, name: &str, json_out: bool) -> Result<String, CliError> {
    let naming = crate::naming::Naming::new(cfg);
    if let Err(e) = naming.parse(name) {
        return Err(CliError::usage(format!("{name} is not a slurm-dws node: {e}")));
    }
    let store = open(cfg).await?;
    let now = now();
    let node = match store.node(name).await {
        Ok(n) => Some(n),
        Err(crate::store::StoreError::NotFound { .. }) => None,
        Err(e) => return Err(rt(e)),
    };
    let request = match node.as_ref().and_then(|n| n.request_id) {
        Some(id) => Some(store.request(id).await.map_err(rt)?),
        None => None,
    };
    let events = store.events(Some(name), None, 200).await.map_err(rt)?;
    let backoffs = store.backoffs().await.map_err(rt)?;
    let mut lines: Vec<String> = Vec::new();
    let Some(n) = &node else {
        lines.push(format!("{name} is a slurm-dws node, but slurm-dws has never been asked for it: it is powered down and has no VM."));
        return Ok(render_story(name, &lines, &events, json_out, now));
    };
    lines.push(format!(
        "{name} is a {} node of nodeset {}. slurm-dws has it {} since {}.",
        if n.is_static { "static" } else { "dynamic" },
        n.nodeset,
        describe_state(n.state),
        when(Some(n.state_since), now)
    ));
    if let Some(j) = n.job_id {
        lines.push(format!("Job {j} asked for it."));
    }
    if let Some(r) = &request {
        lines.push(format!(
            "It belongs to resize request {} in MIG {} ({}, run duration {}), created {}.",
            r.name,
            r.mig,
            crate::model::count_of(r.nodes.len(), "node"),
            age(r.run_duration as i64),
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
    }
    if let Some(s) = &n.vm_status {
        lines.push(format!("Its VM is {s}."));
    }
    if let Some(t) = n.termination_time {
        lines.push(format!("GCE will delete its VM at {} (end of the run duration).", when(Some(t), now)));
    }
    if let Some(r) = &n.reservation {
        lines.push(format!("Slurm reservation {r} keeps new jobs from outliving the VM."));
    }
    if let Some(e) = &n.last_error {
        lines.push(format!("Last error: {e}"));
    }
    let backoff = backoffs.iter().find(|b| b.nodeset == n.nodeset && b.until > now);
    lines.push(format!("Next: {}", next_step(cfg, n, request.as_ref(), backoff, now)));
    Ok(render_story(name, &lines, &events, json_out, now))
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
            Some(b) => format!("a static node: re-provisioned when the capacity backoff of nodeset {} ends, {}.", b.nodeset, when(Some(b.until), now)),
            None => format!("a static node: re-provisioned by the next pass (within {interval}s)."),
        },
        NodeState::PoweredDown => "nothing until Slurm resumes it.".into(),
        NodeState::ResumePending => match backoff {
            Some(b) => format!("nodeset {} is in capacity backoff until {}: the resume will be answered at once and the job requeued.", b.nodeset, when(Some(b.until), now)),
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
    json_out: bool,
    now: DateTime<Utc>,
) -> String {
    if json_out {
        let v = json!({
            "node": name,
            "story": lines,
            "events": events.iter().map(|e| json!({"time": e.time.to_rfc3339(), "kind": e.kind, "nodes": e.nodes, "message": e.message})).collect::<Vec<_>>(),
        });
        return to_json(&v);
    }
    let mut s = lines.join("\n") + "\n";
    if !events.is_empty() {
        s.push_str("\nHistory:\n");
        for e in events {
            s.push_str(&format!("  {}  {:<18} {}\n", when(Some(e.time), now), e.kind, e.message));
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
