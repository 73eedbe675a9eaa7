//! `slurm-dws status`: the daemon's health, the last pass, and the work waiting, as labelled rows or JSON.

use super::{now, open, to_json, trigger_name};
use crate::cli::table::{self, age, rfc3339, when};
use crate::cli::CliError;
use crate::config::Config;
use crate::model::*;
use crate::protocol::{self, Liveness, Request as Ask, Response};
use crate::reconcile::gce_edge::step_retry::MAX_STEP_ATTEMPTS;
use crate::reconcile::PassReport;
use chrono::{DateTime, Utc};
use serde_json::json;
use std::collections::BTreeMap;
use std::time::Duration;

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
        .filter_map(|r| crate::cli::waiting_view::estimate(cfg, &waits, r, now).map(|e| (r, e.2)))
        .collect();
    let outbox = store.outbox_depth().await?;
    let given_up: Vec<StepFailures> =
        store.step_failures().await?.into_iter().filter(|f| f.failed >= MAX_STEP_ATTEMPTS).collect();
    let inbox = store.inbox_depth().await?;
    let backoffs: Vec<Backoff> = store.backoffs().await?.into_iter().filter(|b| b.until > now).collect();
    let unsched = crate::cli::unschedulable::now(cfg, &backoffs, &requests, now);
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
        "controller": live.as_ref().and_then(|l| l.controller.as_ref()),
        "version": env!("CARGO_PKG_VERSION"),
        "config": cfg.source.display().to_string(),
        "state_dir": cfg.state_dir.display().to_string(),
        "unreachable_zones": last_pass.as_ref().map(|p| p.unreachable_zones.clone()).unwrap_or_default(),
        "refused_nodesets": last_pass.as_ref().map(|p| p.refused_nodesets.clone()).unwrap_or_default(),
        "reserved": last_pass.as_ref().map(|p| p.reserved.clone()).unwrap_or_default(),
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
    if let Some(c) = live.as_ref().and_then(|l| l.controller.as_ref()) {
        let in_charge = c.in_charge.as_deref();
        rows.push((
            "role:",
            vec![match (c.role.as_str(), in_charge) {
                ("in_charge", _) => format!("in charge (controller {})", c.controller),
                (_, Some(other)) => format!(
                    "standby: controller {other} is in charge, not ours ({}); this daemon changes nothing",
                    c.controller
                ),
                (_, None) => format!(
                    "standby: no controller answers `scontrol ping`, so nobody acts (ours is {})",
                    c.controller
                ),
            }],
        ));
    }
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
    for (ns, c) in last_pass.iter().flat_map(|p| &p.reserved) {
        rows.push(("reserved:", vec![format!("nodeset {ns}: {}", crate::reconcile::capacity_line(c, now))]));
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
    rows.extend(crate::cli::unschedulable::status_rows(&unsched));
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
