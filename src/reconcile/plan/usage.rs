//! Usage (`slurm-dws usage`, the VM and GPU seconds metrics): which VM spans and job spans a full
//! pass opens and closes ([`usage_change`]), and the seconds each (nodeset, model, busy or idle) gained
//! since the last pass ([`apply_usage`]).
//!
//! - A VM span opens at the first full pass that lists a VM of one of our nodes under an instance
//!   id not open, from GCE's `creationTimestamp` (GCE bills from there), with its nodeset's machine
//!   type and GPUs and the job its node was resumed for. It closes at the first full pass whose
//!   list no longer shows that id under its name: at that pass's start, so a VM's recorded life is
//!   longer than GCE's by less than a pass interval. A VM listed in a zone the list left out is not
//!   judged gone; an inbox-first pass (an earlier pass's list) never runs this rule.
//! - After a restart, an open span whose VM is gone at the first pass closes at its `last_seen`
//!   (the last full pass before the stop): its VM went some time while the daemon was down, and the
//!   span is shorter than GCE's life by at most that downtime.
//! - A job span opens when Slurm shows a job running (not `CONFIGURING`: its nodes still boot, which
//!   is idle time) on one of our nodes, from the job's start, or from the node's VM's creation when
//!   that is later; it closes when Slurm no longer shows it running there: at its end time when
//!   Slurm still remembers the job, else at the pass's start. Jobs not read this pass
//!   (`Observed::jobs` `None`) change nothing.
//! - Busy seconds are a VM's seconds while a job span on its node is open; idle the rest:
//!   busy + idle = the VM's seconds.
//!
//! Not part of [`plan`](super::plan): it runs once a full pass, on that pass's observation, not
//! once a round.

use crate::model::Node;
use crate::reconcile::types::*;
use chrono::{DateTime, Utc};
use std::collections::{BTreeMap, BTreeSet};

/// (nodeset, model, `busy` or `idle`).
pub type UsageKey = (String, &'static str, &'static str);

/// A time interval, start to end.
type Interval = (DateTime<Utc>, DateTime<Utc>);

/// What a full pass changes in the open spans (module docs). `nodes` are the desired nodes (for a
/// new VM's job); `shapes` each nodeset's machine type and GPUs.
pub fn usage_change(
    cfg: &PlanConfig,
    shapes: &BTreeMap<String, NodesetShape>,
    nodes: &BTreeMap<String, Node>,
    open: &OpenUsage,
    o: &Observed,
    now: DateTime<Utc>,
) -> UsageChange {
    let mut change = UsageChange::default();
    let Some(vms) = o.vms.as_ref().filter(|_| !o.reused) else { return change };
    for span in open.vms.values() {
        if vms.get(&span.vm).is_some_and(|v| v.id == Some(span.id)) {
            continue;
        }
        let zones = cfg.nodesets.get(&span.nodeset).map(|n| n.zones.as_slice());
        if o.vm_zone_unknown(zones, &cfg.nodesets) {
            continue; // its zone did not answer: unknown, not gone
        }
        let at = if span.restored { span.last_seen } else { now };
        change.vms_closed.push((span.id, at.max(span.created_at)));
    }
    for vm in vms.values() {
        let Some(id) = vm.id else { continue };
        if open.vms.contains_key(&id) {
            continue;
        }
        let Ok(node) = cfg.naming.parse(&vm.name) else { continue };
        let Some(ns) = cfg.nodesets.get(&node.nodeset) else { continue };
        let shape = shapes.get(&ns.name).cloned().unwrap_or_else(NodesetShape::unknown);
        change.vms_opened.push(UsageVm {
            id,
            vm: vm.name.clone(),
            node: vm.name.clone(),
            nodeset: ns.name.clone(),
            model: ns.model.as_str(),
            machine_type: shape.machine_type,
            gpus: shape.gpus,
            job_id: nodes.get(&vm.name).and_then(|n| n.job_id).map(u64::from),
            created_at: vm.created.unwrap_or(now).min(now),
            last_seen: now,
            deleted_at: None,
            restored: false,
            counted_to: None,
        });
    }
    if let Some(jobs) = o.jobs.as_ref() {
        let (opened, closed) = jobs_change(open, jobs, &change, now);
        change.jobs_opened = opened;
        change.jobs_closed = closed;
    }
    change
}

/// The job spans `jobs` open and close, given the VM spans as `vms` leaves them.
#[allow(clippy::type_complexity)]
fn jobs_change(
    open: &OpenUsage,
    jobs: &[SlurmJob],
    vms: &UsageChange,
    now: DateTime<Utc>,
) -> (Vec<UsageJob>, Vec<((u64, String), DateTime<Utc>)>) {
    let (mut opened, mut closed_jobs) = (Vec::new(), Vec::new());
    // Each node's VM as this pass leaves it: when it was made.
    let mut created: BTreeMap<&str, DateTime<Utc>> = BTreeMap::new();
    let closed: BTreeSet<_> = vms.vms_closed.iter().map(|(id, _)| *id).collect();
    for v in open.vms.values().filter(|v| !closed.contains(&v.id)).chain(&vms.vms_opened) {
        created.insert(&v.node, v.created_at);
    }
    let mut running: BTreeSet<(u64, &str)> = BTreeSet::new();
    for job in jobs.iter().filter(|j| j.runs()) {
        let Ok(names) = crate::hostlist::expand(&job.nodes) else { continue };
        for name in names {
            // Busy time is a VM's: a node with no VM on record has none to count.
            let Some((node, made)) = created.get_key_value(name.as_str()) else { continue };
            running.insert((job.job_id, node));
            if open.jobs.contains_key(&(job.job_id, name.clone())) {
                continue;
            }
            let start = job.start.unwrap_or(now).max(*made).min(now);
            opened.push(UsageJob {
                job_id: job.job_id,
                node: name,
                user: job.user.clone(),
                account: job.account.clone(),
                partition: job.partition.clone(),
                started_at: start,
                ended_at: None,
            });
        }
    }
    let by_id: BTreeMap<u64, &SlurmJob> = jobs.iter().map(|j| (j.job_id, j)).collect();
    for (key, span) in &open.jobs {
        if running.contains(&(key.0, key.1.as_str())) {
            continue;
        }
        let end = by_id.get(&key.0).filter(|j| !j.runs()).and_then(|j| j.end).filter(|e| *e <= now);
        closed_jobs.push((key.clone(), end.unwrap_or(now).max(span.started_at)));
    }
    (opened, closed_jobs)
}

/// Applies `change` to `open` (the spans as this pass leaves them: the open ones seen now, none of
/// those closed) and returns the seconds gained since the last pass by (nodeset, model, use):
/// each VM from where it was last counted (its creation for a new one) to its end or `now`, busy
/// while a job span on its node is open. A span restored from the store is not counted before
/// this run's first pass (the metrics restart at zero).
pub fn apply_usage(
    open: &mut OpenUsage,
    change: &UsageChange,
    now: DateTime<Utc>,
) -> BTreeMap<UsageKey, UsageSeconds> {
    // Each node's job intervals, as this pass leaves them.
    let mut busy: BTreeMap<&str, Vec<Interval>> = BTreeMap::new();
    let closed_jobs: BTreeMap<&(u64, String), DateTime<Utc>> =
        change.jobs_closed.iter().map(|(k, at)| (k, *at)).collect();
    for (key, j) in &open.jobs {
        let end = closed_jobs.get(key).copied().unwrap_or(now);
        busy.entry(j.node.as_str()).or_default().push((j.started_at, end));
    }
    for j in &change.jobs_opened {
        busy.entry(j.node.as_str()).or_default().push((j.started_at, now));
    }
    let closed_vms: BTreeMap<_, _> = change.vms_closed.iter().copied().collect();
    let mut out: BTreeMap<UsageKey, UsageSeconds> = BTreeMap::new();
    for v in open.vms.values().chain(&change.vms_opened) {
        let end = closed_vms.get(&v.id).copied().unwrap_or(now);
        let from = match (v.counted_to, v.restored) {
            (Some(t), _) => t,
            (None, true) => continue,
            (None, false) => v.created_at,
        };
        if end <= from {
            continue;
        }
        let total = secs(end - from);
        let busy_secs = busy.get(v.node.as_str()).map_or(0.0, |spans| covered(spans, from, end));
        for (use_, s) in [("busy", busy_secs), ("idle", total - busy_secs)] {
            let e = out.entry((v.nodeset.clone(), v.model, use_)).or_default();
            e.vm += s;
            e.gpu += s * f64::from(v.gpus);
        }
    }
    // The spans as the pass leaves them.
    for (id, _) in &change.vms_closed {
        open.vms.remove(id);
    }
    for v in open.vms.values_mut() {
        v.last_seen = now;
        v.counted_to = Some(now);
        v.restored = false;
    }
    for v in &change.vms_opened {
        open.vms.insert(v.id, UsageVm { counted_to: Some(now), ..v.clone() });
    }
    for (key, _) in &change.jobs_closed {
        open.jobs.remove(key);
    }
    for j in &change.jobs_opened {
        open.jobs.insert((j.job_id, j.node.clone()), j.clone());
    }
    out
}

fn secs(d: chrono::Duration) -> f64 {
    d.num_milliseconds() as f64 / 1000.0
}

/// Seconds of `[from, to)` that the union of `spans` covers.
fn covered(spans: &[Interval], from: DateTime<Utc>, to: DateTime<Utc>) -> f64 {
    let mut clipped: Vec<_> =
        spans.iter().map(|(a, b)| ((*a).max(from), (*b).min(to))).filter(|(a, b)| a < b).collect();
    clipped.sort();
    let (mut total, mut reach) = (0.0, from);
    for (a, b) in clipped {
        let a = a.max(reach);
        if b > a {
            total += secs(b - a);
            reach = b;
        }
    }
    total
}
