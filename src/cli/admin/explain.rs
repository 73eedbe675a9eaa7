//! `slurm-dws explain NODE`: the node's story in plain sentences, next to what Slurm says of it.

use super::{event_json, now, open, rt, to_json};
use crate::cli::table::{self, age, when};
use crate::cli::CliError;
use crate::config::Config;
use crate::model::*;
use crate::reconcile::gce_edge::step_retry::MAX_STEP_ATTEMPTS;
use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use std::time::Duration;

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
    let repair = store.repair(name).await?;
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
    if let Some(line) = reserved_sentence(cfg, &store, &n.nodeset, now).await? {
        lines.push(line);
    }
    let live = crate::cli::live::live(n, backoffs.iter().find(|b| b.nodeset == n.nodeset), now);
    let (old_job, old_error) = crate::cli::live::history(n, &live);
    if let Some(j) = live.job_id {
        lines.push(format!("Job {j} asked for it."));
    }
    let model = cfg.nodeset(&n.nodeset).map_or_else(Default::default, |x| x.provisioning_model);
    if let Some(r) = &request {
        lines.push(format!(
            "It belongs to {} in MIG {} ({}, {}), created {}.",
            crate::reconcile::gce_edge::vm_create::group_words(&r.name, model),
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
        // The node's own last error is said below; the request's only when it says something else.
        if let Some(e) = r.last_error.as_deref().filter(|e| Some(*e) != n.last_error.as_deref()) {
            lines.push(format!("The request's last error: {e}"));
        }
        if let Some(c) = &r.zone_choice {
            lines.push(format!("Its MIG's zone(s): {} ({}).", c.zones.join(", "), c.why));
        }
        let waits = store.request_waits().await?;
        if let Some((_, _, line)) = crate::cli::waiting_view::estimate(cfg, &waits, r, now) {
            lines.push(format!("Expected start: {line}"));
        }
    }
    if let Some(s) = &n.vm_status {
        lines.push(format!("Its VM is {s}."));
    }
    if let Some(t) = n.termination_time {
        let why = if model.is_reservation() {
            "end of its reservation's window"
        } else {
            "end of the run duration"
        };
        lines.push(format!("GCE will delete its VM at {} ({why}).", when(Some(t), now)));
    }
    if let Some(line) = placement_sentence(cfg, n) {
        lines.push(line);
    }
    if let Some(r) = &n.reservation {
        lines.push(format!("Slurm reservation {r} keeps new jobs from outliving the VM."));
    }
    if let Some(m) = &n.maintenance {
        lines.push(maintenance_sentence(cfg, n, m, now));
    }
    if let Some(r) = &repair {
        lines.push(repair_sentence(r, now));
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
    lines.extend(crate::cli::unschedulable::explain_line(
        cfg,
        &backoffs,
        &store.requests(true).await?,
        n,
        now,
    ));
    let backoff = backoffs.iter().find(|b| b.nodeset == n.nodeset && b.until > now);
    lines.push(format!("Next: {}", next_step(cfg, n, request.as_ref(), backoff, now)));
    Ok(render_story(name, &lines, &events, &slurm, json_out, now, width))
}

/// For a node of a reservation nodeset: what it consumes, how much of it is in use and its window,
/// as the last pass read them, and what that means for a job (`plan/reserved.rs`).
async fn reserved_sentence(
    cfg: &Config,
    store: &crate::cli::source::Source,
    nodeset: &str,
    now: DateTime<Utc>,
) -> Result<Option<String>, CliError> {
    let Some(r) = cfg.nodeset(nodeset).and_then(|ns| ns.reservation.as_ref()) else { return Ok(None) };
    let last: Option<crate::reconcile::PassReport> =
        store.meta("last_pass").await?.and_then(|s| serde_json::from_str(&s).ok());
    let Some(c) = last.as_ref().and_then(|p| p.reserved.get(nodeset)) else {
        return Ok(Some(format!("Its nodeset consumes {} (no pass has read it yet).", r.source.url())));
    };
    let means = match (c.window_start, c.window_end, &c.unusable) {
        (Some(s), _, _) if now < s => format!(
            "its jobs wait until the window opens (Slurm reservation {} holds the nodeset's nodes until then)",
            crate::reconcile::plan::window_hold(nodeset, s)
        ),
        (_, Some(e), _) if now >= e => "the window is over: its nodes take no job until the next one".to_string(),
        (_, _, Some(_)) => "its resumes are answered at once until GCE can give the reservation".to_string(),
        (_, end, None) => {
            let free = c.count.saturating_sub(c.in_use);
            let ending = end.map_or(String::new(), |e| {
                format!(
                    "; no job starts on it that would run past {} (end − eol_grace {} s)",
                    (e - chrono::Duration::seconds(r.eol_grace as i64)).format("%Y-%m-%dT%H:%M:%SZ"),
                    r.eol_grace
                )
            });
            format!(
                "a job group of up to {free} nodes is made at once; a larger one (up to {}) waits whole in GCE until \
                 enough of it is free{ending}",
                c.count
            )
        }
    };
    Ok(Some(format!("Its nodeset consumes {}: {}.", crate::reconcile::capacity_line(c, now), means)))
}

/// The node's repair: under way (behaviour, text, since when, how far) or its outcome (reported,
/// replaced, repaired, or failed in GCE's words).
fn repair_sentence(r: &Repair, now: DateTime<Utc>) -> String {
    let by = if r.source == "cli" { "slurm-dws repair" } else { "a drain reason" };
    let text = if r.description.is_empty() { String::new() } else { format!(": {}", r.description) };
    let outcome = r.outcome.as_deref().map(|o| format!(" Last: {o}.")).unwrap_or_default();
    let head = format!("repair {}{text}, asked by {by} {}", r.behavior, when(Some(r.requested_at), now));
    let doing = match r.phase {
        RepairPhase::Requested => "the node is being drained and its jobs requeued; its VM is reported or replaced next",
        RepairPhase::Reporting => "GCE is asked to report the host of its reservation-bound VM as faulty and restart the VM on another host; the drain is lifted once it runs again",
        RepairPhase::Replacing => "its VM was deleted and a new one requested for the node; the drain is lifted once it runs",
        RepairPhase::Repaired => {
            return format!("Its last {head}: repaired {}.{outcome}", when(Some(r.updated_at), now))
        }
        RepairPhase::Failed => {
            return format!(
                "Its last {head}: FAILED {}; the node stays drained until the drain is lifted or a repair is asked again.{outcome}",
                when(Some(r.updated_at), now)
            )
        }
    };
    format!("A {head} is under way ({}, since {}): {doing}.{outcome}", r.phase, when(Some(r.updated_at), now))
}

/// When and why GCE will maintain the node's VM, and the Slurm reservation over the window.
fn maintenance_sentence(cfg: &Config, n: &Node, m: &Maintenance, now: DateTime<Utc>) -> String {
    let reserve =
        cfg.nodesets.iter().find(|ns| ns.name == n.nodeset).is_some_and(|ns| ns.maintenance_reservation);
    let reservation = crate::reconcile::plan::maint_reservation(&n.name);
    let starts =
        m.window_start_time.map_or_else(|| "at a time GCE did not give".to_string(), |t| when(Some(t), now));
    let then = match (reserve, crate::reconcile::plan::reservation_span(m, now)) {
        (false, _) => "no reservation is made (maintenance_reservation = false)".to_string(),
        (true, None) => "no reservation: the window has no start or is over".to_string(),
        (true, Some((s, e))) => format!(
            "Slurm reservation {reservation} ({}) keeps jobs off it until {}{}",
            crate::reconcile::slurm_edge::reservations::FLAGS,
            e.format("%Y-%m-%dT%H:%M:%SZ"),
            if m.window_end_time.is_none() && s < e {
                format!(
                    " (GCE gave no end: {} hours reserved)",
                    crate::reconcile::plan::DEFAULT_WINDOW_SECS / 3600
                )
            } else {
                String::new()
            }
        ),
    };
    format!("GCE will maintain its VM from {starts}: {}; {then}.", m.describe())
}

/// Where the node's VM runs (GCE's physical host topology) and so which Slurm block / switch the
/// topology file puts it in; for a node with a VM but no physical host, why. `None` without a VM.
fn placement_sentence(cfg: &Config, n: &Node) -> Option<String> {
    n.vm_status.as_ref()?;
    let slurm_topology = cfg.slurm.topology.kind != crate::config::TopologyKind::None;
    let Some(t) = n.topology.as_deref() else {
        // Placed VMs (a workload policy) and reserved ones (dense reservations) report a host.
        let policy =
            cfg.nodeset(&n.nodeset).is_some_and(|ns| ns.placement.is_some() || ns.reservation.is_some());
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
    let reserved = cfg.nodeset(&n.nodeset).is_some_and(|ns| ns.provisioning_model.is_reservation());
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
            Some(t) if n.is_static && reserved => format!("when the reservation's window ends at {}, GCE deletes the VM and the node waits for the next window.", when(Some(t), now)),
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
