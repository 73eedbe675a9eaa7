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
//! - After a restart, a span restored from the store whose job Slurm no longer shows ended some
//!   time while the daemon was down. Where slurmdbd keeps accounting, the reconciler asks `sacct`
//!   for those jobs ([`jobs_to_account`], one call, at the first pass that reads Slurm's jobs) and
//!   the span closes at the end of the job's first run that ended at or after the span's start
//!   (`Observed::job_runs`), no later than its node's VM's recorded life and never before its
//!   start. Without slurmdbd, or when `sacct` failed or does not know the run's end, it closes as
//!   above: its error is then the downtime, at most.
//! - Busy seconds are a VM's seconds while a job span on its node is open; idle the rest:
//!   busy + idle = the VM's seconds.
//!
//! Not part of [`plan`](super::plan): it runs once a full pass, on that pass's observation, not
//! once a round.

use crate::model::Node;
use crate::reconcile::types::*;
use chrono::{DateTime, Utc};
use rustc_hash::{FxHashMap, FxHashSet};
use std::collections::{BTreeMap, BTreeSet};
use std::num::NonZeroU64;

// ---- the rule's words ---------------------------------------------------------------------------

/// The machine type recorded for a nodeset whose template could not be read.
const UNKNOWN_MACHINE_TYPE: &str = "unknown";

/// A nodeset's machine type and GPUs, read from its instance template once a run
/// (`gce::read_node_shape`); `unknown` / 0 when that read failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodesetShape {
    pub machine_type: String,
    pub gpus: u32,
}

impl NodesetShape {
    /// What a nodeset whose template could not be read is recorded with.
    pub fn unknown() -> NodesetShape {
        NodesetShape { machine_type: UNKNOWN_MACHINE_TYPE.into(), gpus: 0 }
    }
}

/// An open VM span as the usage rule keeps it between passes: what judging it gone and counting
/// its seconds need. Its row in the store (`vm_spans`) holds the rest: the machine type, the job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageVm {
    pub id: NonZeroU64,
    /// The node's name, its VM's too.
    pub node: String,
    pub nodeset: String,
    /// The provisioning model as the config spells it.
    pub model: &'static str,
    pub gpus: u32,
    pub created_at: DateTime<Utc>,
    pub last_seen: DateTime<Utc>,
    /// Read back from the store at start, not seen by this run yet: if it is gone, it went some
    /// time after `last_seen` (while the daemon was down) and is closed there.
    pub restored: bool,
    /// Its seconds are counted in the metrics up to here (`None`: not counted yet this run).
    pub counted_to: Option<DateTime<Utc>>,
}

/// A VM span a pass opens: the span kept from now on, and what its row records besides (the
/// machine type borrowed from the nodeset's shape).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenedVm<'a> {
    pub span: UsageVm,
    pub machine_type: &'a str,
    /// The job the node was resumed for.
    pub job_id: Option<u64>,
}

/// A job span a pass opens: the time one job runs on one node, from `started_at`; who ran it
/// borrowed from Slurm's job, for its row (the open span keeps only its start).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageJob<'a> {
    pub job_id: u64,
    pub node: String,
    pub user: &'a str,
    pub account: &'a str,
    pub partition: &'a str,
    pub started_at: DateTime<Utc>,
}

/// An open job span as the rule keeps it between passes: its start, and whether it was read back
/// from the store at start with no pass having read Slurm's jobs since (if Slurm no longer shows
/// its job, that job ended while the daemon was down).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenJob {
    pub started_at: DateTime<Utc>,
    pub restored: bool,
}

/// The open spans, as the last pass left them (kept by the reconciler, read from the store at
/// start): VMs by instance id, jobs' starts by (job, node).
#[derive(Debug, Clone, Default)]
pub struct OpenUsage {
    pub vms: OpenVms,
    pub jobs: BTreeMap<(u64, String), OpenJob>,
    /// [`running_jobs_digest`] of the jobs the last pass that read them saw, while the open spans
    /// are those it left: `None` at start, and after a pass changed the VM spans without reading
    /// Slurm's jobs.
    pub jobs_digest: Option<u128>,
}

/// The open VM spans, sorted by instance id in one buffer: the daemon keeps one a VM between
/// passes, 10,000 at scale, where a B-tree map's half-full nodes took ~2.8 MB for ~1.2 MB of spans
/// (heaptrack). A pass changes them in batches ([`apply_usage`]): what it closes goes in one sweep,
/// what it opens is added and the buffer sorted once.
#[derive(Debug, Clone, Default)]
pub struct OpenVms(Vec<UsageVm>);

impl OpenVms {
    pub fn len(&self) -> usize {
        self.0.len()
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    /// In instance id order.
    pub fn values(&self) -> std::slice::Iter<'_, UsageVm> {
        self.0.iter()
    }
    pub fn values_mut(&mut self) -> std::slice::IterMut<'_, UsageVm> {
        self.0.iter_mut()
    }
    pub fn get(&self, id: &NonZeroU64) -> Option<&UsageVm> {
        self.0.binary_search_by_key(id, |v| v.id).ok().map(|i| &self.0[i])
    }
    pub fn contains_key(&self, id: &NonZeroU64) -> bool {
        self.get(id).is_some()
    }
    /// Drops the spans whose ids `gone` holds, in one sweep.
    pub(super) fn remove_all(&mut self, gone: &FxHashSet<NonZeroU64>) {
        if !gone.is_empty() {
            self.0.retain(|v| !gone.contains(&v.id));
        }
    }
    /// Adds `spans` (one whose id is open replaces that span), sorted once.
    pub(super) fn add_all(&mut self, spans: impl IntoIterator<Item = UsageVm>) {
        let before = self.0.len();
        self.0.extend(spans);
        if self.0.len() == before {
            return;
        }
        // Stable: of two spans of one id, the one added comes second, and is the one kept.
        self.0.sort_by_key(|v| v.id);
        self.0.dedup_by(|added, open| {
            let same = added.id == open.id;
            if same {
                std::mem::swap(added, open);
            }
            same
        });
    }
}

impl FromIterator<UsageVm> for OpenVms {
    fn from_iter<I: IntoIterator<Item = UsageVm>>(spans: I) -> Self {
        let mut open = OpenVms::default();
        open.add_all(spans);
        open
    }
}

/// What one pass changes in the usage spans; what it opens borrows from the pass's observation
/// and the nodesets' shapes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UsageChange<'a> {
    pub vms_opened: Vec<OpenedVm<'a>>,
    /// Instance ids and their end.
    pub vms_closed: Vec<(NonZeroU64, DateTime<Utc>)>,
    pub jobs_opened: Vec<UsageJob<'a>>,
    /// (job, node) and the end.
    pub jobs_closed: Vec<((u64, String), DateTime<Utc>)>,
    /// Slurm's jobs were read this pass: the job spans are no longer restored ones.
    pub jobs_seen: bool,
    /// [`running_jobs_digest`] of the jobs read this pass.
    pub jobs_digest: Option<u128>,
}

impl UsageChange<'_> {
    pub fn is_empty(&self) -> bool {
        self.vms_opened.is_empty()
            && self.vms_closed.is_empty()
            && self.jobs_opened.is_empty()
            && self.jobs_closed.is_empty()
    }
}

/// VM and GPU seconds of one (nodeset, model, busy or idle), counted by one pass.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct UsageSeconds {
    pub vm: f64,
    pub gpu: f64,
}

// ---- the rule --------------------------------------------------------------------------------------

/// (nodeset, model, `busy` or `idle`).
pub type UsageKey = (String, &'static str, &'static str);

/// A time interval, start to end.
type Interval = (DateTime<Utc>, DateTime<Utc>);

/// What a full pass changes in the open spans (module docs). `nodes` are the desired nodes (for a
/// new VM's job); `shapes` each nodeset's machine type and GPUs.
pub fn usage_change<'a>(
    cfg: &PlanConfig,
    shapes: &'a BTreeMap<String, NodesetShape>,
    nodes: &BTreeMap<String, Node>,
    open: &OpenUsage,
    o: &'a Observed,
    now: DateTime<Utc>,
) -> UsageChange<'a> {
    let mut change = UsageChange::default();
    let Some(vms) = o.vms.as_ref().filter(|_| !o.reused) else { return change };
    // Room for the VMs listed beyond the spans open, taken once: the pass that turns 10,000 nodes
    // up opens 10,000 spans, which grown by doubling would take room for 16,384 (`make bench`).
    change.vms_opened.reserve(vms.len().saturating_sub(open.vms.len()));
    // The instance ids listed: a span whose id is among them is still there (an instance keeps its
    // name), found by a hash, not by comparing names that share their prefix (10,000 a pass).
    let mut listed: FxHashSet<NonZeroU64> =
        FxHashSet::with_capacity_and_hasher(vms.len(), Default::default());
    listed.extend(vms.values().filter_map(|v| v.id));
    for span in open.vms.values() {
        if listed.contains(&span.id) {
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
        let (machine_type, gpus) =
            shapes.get(&ns.name).map_or((UNKNOWN_MACHINE_TYPE, 0), |s| (s.machine_type.as_str(), s.gpus));
        change.vms_opened.push(OpenedVm {
            span: UsageVm {
                id,
                node: vm.name.clone(),
                nodeset: ns.name.clone(),
                model: ns.model.as_str(),
                gpus,
                // As GCE wrote it, even a little after `now` (a VM made while this pass listed).
                created_at: vm.created.unwrap_or(now),
                last_seen: now,
                restored: false,
                counted_to: None,
            },
            machine_type,
            job_id: nodes.get(&vm.name).and_then(|n| n.job_id).map(u64::from),
        });
    }
    if let Some(jobs) = o.jobs.as_ref() {
        let digest = running_jobs_digest(jobs);
        // The same jobs running on the same nodes as the last pass that read them, on the same
        // VMs: every open job span still runs and none opens (a steady pass at 10,000 nodes: no
        // name looked up or expanded; `make bench`). No span is restored then: spans are restored
        // only into an `OpenUsage` without a digest, and the pass that sets one clears them.
        let same =
            open.jobs_digest == Some(digest) && change.vms_opened.is_empty() && change.vms_closed.is_empty();
        if !same {
            let (opened, closed) =
                jobs_change(open, jobs, o.job_runs.as_deref().unwrap_or_default(), &change, now);
            change.jobs_opened = opened;
            change.jobs_closed = closed;
        }
        change.jobs_seen = true;
        change.jobs_digest = Some(digest);
    }
    change
}

/// A 128-bit hash of which jobs run (`SlurmJob::runs`) and on which nodes, in Slurm's order: two
/// reads with the same digest open and close the same job spans.
pub fn running_jobs_digest(jobs: &[SlurmJob]) -> u128 {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    for j in jobs.iter().filter(|j| j.runs()) {
        h.update(&j.job_id.to_le_bytes());
        h.update(&j.start.map_or(i64::MIN, |t| t.timestamp_millis()).to_le_bytes());
        h.update(j.nodes.as_bytes());
        h.update(&[0]);
    }
    h.digest128()
}

/// The jobs whose end slurmdbd is worth asking (module docs): those of the spans restored from the
/// store that `change` closes, sorted, each once.
pub fn jobs_to_account(open: &OpenUsage, change: &UsageChange) -> Vec<u64> {
    let ids: BTreeSet<u64> = change
        .jobs_closed
        .iter()
        .filter(|(key, _)| open.jobs.get(key).is_some_and(|j| j.restored))
        .map(|((job, _), _)| *job)
        .collect();
    ids.into_iter().collect()
}

/// The job spans `jobs` open and close, given the VM spans as `vms` leaves them and slurmdbd's
/// `runs` of the jobs of restored spans.
#[allow(clippy::type_complexity)]
fn jobs_change<'a>(
    open: &OpenUsage,
    jobs: &'a [SlurmJob],
    runs: &[JobRun],
    vms: &UsageChange<'_>,
    now: DateTime<Utc>,
) -> (Vec<UsageJob<'a>>, Vec<((u64, String), DateTime<Utc>)>) {
    let (mut opened, mut closed_jobs) = (Vec::new(), Vec::new());
    // Each node's VM as this pass leaves it: when it was made.
    let mut created: FxHashMap<&str, DateTime<Utc>> =
        FxHashMap::with_capacity_and_hasher(open.vms.len() + vms.vms_opened.len(), Default::default());
    let closed: FxHashSet<_> = vms.vms_closed.iter().map(|(id, _)| *id).collect();
    let opened_vms = vms.vms_opened.iter().map(|v| &v.span);
    for v in open.vms.values().filter(|v| !closed.contains(&v.id)).chain(opened_vms) {
        created.insert(&v.node, v.created_at);
    }
    let mut running: FxHashSet<(u64, &str)> =
        FxHashSet::with_capacity_and_hasher(open.jobs.len(), Default::default());
    for job in jobs.iter().filter(|j| j.runs()) {
        let Ok(names) = crate::hostlist::expand(&job.nodes) else { continue };
        for name in names {
            // Busy time is a VM's: a node with no VM on record has none to count.
            let Some((node, made)) = created.get_key_value(name.as_str()) else { continue };
            running.insert((job.job_id, node));
            let key = (job.job_id, name);
            if open.jobs.contains_key(&key) {
                continue;
            }
            let name = key.1;
            let start = job.start.unwrap_or(now).min(now).max(*made);
            opened.push(UsageJob {
                job_id: job.job_id,
                node: name,
                user: &job.user,
                account: &job.account,
                partition: &job.partition,
                started_at: start,
            });
        }
    }
    let by_id: FxHashMap<u64, &SlurmJob> = jobs.iter().map(|j| (j.job_id, j)).collect();
    for (key, span) in &open.jobs {
        if running.contains(&(key.0, key.1.as_str())) {
            continue;
        }
        let end = by_id.get(&key.0).filter(|j| !j.runs()).and_then(|j| j.end).filter(|e| *e <= now);
        let accounted = || {
            // The first run that ended at or after the span began, within its VM's life.
            let ended = runs
                .iter()
                .filter(|r| r.job_id == key.0)
                .filter_map(|r| r.end)
                .filter(|e| *e >= span.started_at)
                .min()?;
            Some(ended.min(vm_end(open, vms, &key.1, now)))
        };
        let end = end.or_else(|| span.restored.then(accounted).flatten());
        closed_jobs.push((key.clone(), end.unwrap_or(now).min(now).max(span.started_at)));
    }
    (opened, closed_jobs)
}

/// When the VM life on record of `node` ends as `vms` leaves the spans: `now` while one of its
/// spans stays open (or none is on record), else the latest end `vms` gives them.
fn vm_end(open: &OpenUsage, vms: &UsageChange, node: &str, now: DateTime<Utc>) -> DateTime<Utc> {
    let mut latest = None;
    for v in open.vms.values().filter(|v| v.node == node) {
        match vms.vms_closed.iter().find(|(id, _)| *id == v.id) {
            Some((_, at)) => latest = latest.max(Some(*at)),
            None => return now,
        }
    }
    latest.unwrap_or(now)
}

/// Applies `change` to `open` (the spans as this pass leaves them: the open ones seen now, none of
/// those closed) and returns the seconds gained since the last pass by (nodeset, model, use):
/// each VM from where it was last counted (its creation for a new one) to its end or `now`, busy
/// while a job span on its node is open. A span restored from the store is not counted before
/// this run's first pass (the metrics restart at zero).
pub fn apply_usage(
    open: &mut OpenUsage,
    change: &UsageChange<'_>,
    now: DateTime<Utc>,
) -> BTreeMap<UsageKey, UsageSeconds> {
    let out = seconds_gained(open, change, now);
    // The spans as the pass leaves them (the seconds' working sets are freed by now: the turn-up
    // pass of 10,000 nodes grows the map of open spans here, the heap's peak at that scale).
    open.vms.remove_all(&change.vms_closed.iter().map(|(id, _)| *id).collect());
    for v in open.vms.values_mut() {
        v.last_seen = now;
        v.counted_to = Some(now);
        v.restored = false;
    }
    open.vms.add_all(change.vms_opened.iter().map(|v| UsageVm { counted_to: Some(now), ..v.span.clone() }));
    for (key, _) in &change.jobs_closed {
        open.jobs.remove(key);
    }
    if change.jobs_seen {
        open.jobs.values_mut().for_each(|j| j.restored = false);
        open.jobs_digest = change.jobs_digest;
    } else if !(change.vms_opened.is_empty() && change.vms_closed.is_empty()) {
        // A node's VM came or went: the next read of the same jobs may open or close spans.
        open.jobs_digest = None;
    }
    for j in &change.jobs_opened {
        open.jobs.insert((j.job_id, j.node.clone()), OpenJob { started_at: j.started_at, restored: false });
    }
    out
}

/// The seconds of [`apply_usage`], before `open` moves on.
fn seconds_gained(
    open: &OpenUsage,
    change: &UsageChange<'_>,
    now: DateTime<Utc>,
) -> BTreeMap<UsageKey, UsageSeconds> {
    // Each node's job intervals, as this pass leaves them, sorted by the hash of the node's name:
    // one buffer (not a map of a vector a node), looked up by halving once a VM. Node names share
    // their prefix (`hpc-a-`), so sorting and halving by the names themselves compared their bytes
    // (`memcmp` was the top symbol of a steady pass at 10,000 nodes, `make bench`); the hashes are
    // numbers, and the names in a hash's run are compared once each ([`covered`]).
    let closed_jobs: FxHashMap<&(u64, String), DateTime<Utc>> =
        change.jobs_closed.iter().map(|(k, at)| (k, *at)).collect();
    let mut busy: Vec<Busy<'_>> = Vec::with_capacity(open.jobs.len() + change.jobs_opened.len());
    for (key, span) in &open.jobs {
        let end = closed_jobs.get(key).copied().unwrap_or(now);
        busy.push((name_key(&key.1), key.1.as_str(), (span.started_at, end)));
    }
    busy.extend(change.jobs_opened.iter().map(|j| (name_key(&j.node), j.node.as_str(), (j.started_at, now))));
    busy.sort_unstable_by_key(|b| b.0);
    let on = |node: &str| {
        let key = name_key(node);
        let from = busy.partition_point(|b| b.0 < key);
        let to = from + busy[from..].partition_point(|b| b.0 == key);
        &busy[from..to]
    };
    let closed_vms: FxHashMap<_, _> = change.vms_closed.iter().copied().collect();
    // Keyed by the nodeset's name borrowed: no copy a VM a pass.
    let mut sums: FxHashMap<(&str, &'static str, &'static str), UsageSeconds> = FxHashMap::default();
    for v in open.vms.values().chain(change.vms_opened.iter().map(|v| &v.span)) {
        let end = closed_vms.get(&v.id).copied().unwrap_or(now);
        let from = match (v.counted_to, v.restored) {
            (Some(t), _) => t.max(v.created_at),
            (None, true) => continue,
            (None, false) => v.created_at,
        };
        if end <= from {
            continue;
        }
        let total = secs(end - from);
        let busy_secs = covered(on(&v.node), &v.node, from, end);
        for (use_, s) in [("busy", busy_secs), ("idle", total - busy_secs)] {
            let e = sums.entry((v.nodeset.as_str(), v.model, use_)).or_default();
            e.vm += s;
            e.gpu += s * f64::from(v.gpus);
        }
    }
    sums.into_iter().map(|((ns, model, use_), s)| ((ns.to_string(), model, use_), s)).collect()
}

fn secs(d: chrono::Duration) -> f64 {
    d.num_milliseconds() as f64 / 1000.0
}

/// A job's interval on a node, with the node's name and its [`name_key`].
type Busy<'a> = (u64, &'a str, Interval);

/// A node name's sort key in [`seconds_gained`]: its hash (two names may share one; their
/// intervals are told apart by name).
fn name_key(name: &str) -> u64 {
    use std::hash::Hasher;
    let mut h = rustc_hash::FxHasher::default();
    h.write(name.as_bytes());
    h.finish()
}

/// Seconds of `[from, to)` that the union of `node`'s intervals among `spans` covers.
fn covered(spans: &[Busy<'_>], node: &str, from: DateTime<Utc>, to: DateTime<Utc>) -> f64 {
    if let [(_, n, (a, b))] = spans {
        // One job on the node, the usual case: no sorting, no allocation.
        if *n != node {
            return 0.0;
        }
        let (a, b) = ((*a).max(from), (*b).min(to));
        return if a < b { secs(b - a) } else { 0.0 };
    }
    let mut clipped: Vec<_> = spans
        .iter()
        .filter(|(_, n, _)| *n == node)
        .map(|(_, _, (a, b))| ((*a).max(from), (*b).min(to)))
        .filter(|(a, b)| a < b)
        .collect();
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
