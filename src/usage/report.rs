//! The usage report: VM and job spans, a period `[since, until)`, a grouping and the prices → rows
//! of VM hours (busy and idle), GPU hours and estimated cost. Pure: the present is a parameter.
//!
//! - A VM counts from GCE's creation to its deletion (`deleted_at`, the first pass that no longer
//!   saw it). A VM still open counts to the last pass that saw it (`last_seen`), within a pass of
//!   now while the daemon runs: a VM that went while the daemon was down (a Flex VM at the end of
//!   its run duration) is not counted past what is known. A job still running counts to `now`.
//!   Every span is clipped to the period.
//! - Busy is the time a job ran on the VM's node while the VM lived: the union of the node's job
//!   spans, so two jobs sharing a node at once count that time once. Idle is the rest of the VM's
//!   time (booting, waiting for a job, waiting for SuspendTime). busy + idle = total, in whole
//!   milliseconds, per row and in total.
//! - By job, user, account or partition: busy time goes to the job that ran (shared equally, to the
//!   millisecond, among jobs that ran on the node at the same time). Idle time goes to the job the
//!   VM was made for (`VmSpan::job_id`): the job's row, or its user's, account's or partition's
//!   when a span of that job is known, else [`JOB_NOT_SEEN`]; a VM made for no job (a static node's)
//!   charges its idle time to [`NO_JOB`].
//! - By nodeset or model: the VM's own.
//! - Cost: hours × the price of one VM-hour of the VM's machine type and provisioning model; a row
//!   with hours of a machine type and model without a price has no cost (`None`), and says which.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::pricing::{Price, PriceBook};
use super::read::{JobRef, UsageSpans, VmRef};
#[cfg(test)]
use super::{JobSpan, VmSpan};

/// The row of idle time of VMs made for no job (static nodes).
pub const NO_JOB: &str = "(no job)";
/// The row of idle time of VMs made for a job of which no span is known (its user, account and
/// partition are not known).
pub const JOB_NOT_SEEN: &str = "(job not seen)";

const MS_PER_HOUR: f64 = 3_600_000.0;

/// What the rows are grouped by (`--by`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum By {
    Job,
    User,
    Account,
    Partition,
    Nodeset,
    Model,
}

impl By {
    pub const ALL: [By; 6] = [By::Job, By::User, By::Account, By::Partition, By::Nodeset, By::Model];

    /// As `--by` spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            By::Job => "job",
            By::User => "user",
            By::Account => "account",
            By::Partition => "partition",
            By::Nodeset => "nodeset",
            By::Model => "model",
        }
    }

    /// The column header of the key.
    pub fn header(self) -> &'static str {
        match self {
            By::Job => "JOB",
            By::User => "USER",
            By::Account => "ACCOUNT",
            By::Partition => "PARTITION",
            By::Nodeset => "NODESET",
            By::Model => "MODEL",
        }
    }

    pub fn parse(s: &str) -> Option<By> {
        By::ALL.into_iter().find(|b| b.as_str() == s)
    }

    /// The row a job's busy time goes to.
    fn key_of<'a>(self, j: &JobRef, spans: &'a UsageSpans) -> Key<'a> {
        match self {
            By::Job => Key::Job(j.job_id),
            By::User => Key::Name(spans.name(j.user)),
            By::Account => Key::Name(spans.name(j.account)),
            By::Partition => Key::Name(spans.name(j.partition)),
            By::Nodeset | By::Model => unreachable!("busy time by VM"),
        }
    }
}

/// A row's key while the rows add up, borrowed from the spans (no allocation per span).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Key<'a> {
    Job(u64),
    Name(&'a str),
}

impl Key<'_> {
    /// Named rows first, by key (jobs by number); the rows in parentheses last.
    fn rank(self) -> (bool, u64) {
        match self {
            Key::Job(id) => (false, id),
            Key::Name(k) => (k.starts_with('('), k.parse::<u64>().unwrap_or(u64::MAX)),
        }
    }

    fn text(self) -> String {
        match self {
            Key::Job(id) => id.to_string(),
            Key::Name(k) => k.to_string(),
        }
    }
}

/// The period of a report: `[since, until)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Period {
    pub since: DateTime<Utc>,
    pub until: DateTime<Utc>,
}

/// One row as `usage --json` prints it (the first six fields are the fixed ones).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UsageRow {
    pub key: String,
    pub vm_hours: f64,
    pub busy_vm_hours: f64,
    pub idle_vm_hours: f64,
    pub gpu_hours: f64,
    /// `None` when some of the row's hours have no price.
    pub cost: Option<f64>,
    /// The GPU hours of idle VMs.
    pub idle_gpu_hours: f64,
    /// `machine_type/model` of the hours without a price.
    pub unpriced: Vec<String>,
}

/// The report.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    pub period: Period,
    pub by: By,
    pub rows: Vec<UsageRow>,
    /// Every row together.
    pub total: UsageRow,
    /// VMs that ran in the period.
    pub vms: usize,
    /// The latest pass that saw a VM still running (they are counted to it), if any ran.
    pub last_seen: Option<DateTime<Utc>>,
    /// The prices used, by (machine type, model).
    pub prices_used: BTreeMap<(String, String), Price>,
}

/// The (machine type, model) pairs without a price that a row has hours of, as indexes into the
/// report's [`Unpriced`] list: a bit each for the first 64, the rest listed. No allocation for a
/// row (by job, a few hundred thousand of them, each with at most one or two such pairs).
#[derive(Debug, Default, Clone, PartialEq)]
struct UnpricedSet {
    bits: u64,
    more: Vec<u32>,
}

impl UnpricedSet {
    fn insert(&mut self, id: u32) {
        if id < 64 {
            self.bits |= 1 << id;
        } else if !self.more.contains(&id) {
            self.more.push(id);
        }
    }

    fn is_empty(&self) -> bool {
        self.bits == 0 && self.more.is_empty()
    }

    fn merge(&mut self, o: &UnpricedSet) {
        self.bits |= o.bits;
        for &id in &o.more {
            self.insert(id);
        }
    }

    fn ids(&self) -> impl Iterator<Item = u32> + '_ {
        (0..64u32).filter(|i| self.bits & (1 << i) != 0).chain(self.more.iter().copied())
    }
}

/// The (machine type, model) pairs of the report's VMs that have no price, in the order they were
/// met: what an [`UnpricedSet`] indexes. Each row prints its pairs as `machine_type/model`, sorted
/// by (machine type, model).
#[derive(Debug, Default)]
struct Unpriced {
    /// `machine_type/model` of each pair.
    text: Vec<String>,
    /// Each pair's place in (machine type, model) order.
    rank: Vec<u32>,
}

impl Unpriced {
    fn new(pairs: &[(u32, u32)], spans: &UsageSpans) -> Unpriced {
        let names = |&(m, p): &(u32, u32)| (spans.name(m), spans.name(p));
        let mut order: Vec<usize> = (0..pairs.len()).collect();
        order.sort_by(|&a, &b| names(&pairs[a]).cmp(&names(&pairs[b])));
        let mut rank = vec![0; pairs.len()];
        for (r, &i) in order.iter().enumerate() {
            rank[i] = r as u32;
        }
        let text = pairs.iter().map(|pair| {
            let (m, p) = names(pair);
            format!("{m}/{p}")
        });
        Unpriced { text: text.collect(), rank }
    }

    /// A row's pairs as it prints them.
    fn of(&self, set: &UnpricedSet) -> Vec<String> {
        let mut ids: Vec<u32> = set.ids().collect();
        ids.sort_unstable_by_key(|&i| self.rank[i as usize]);
        ids.iter().map(|&i| self.text[i as usize].clone()).collect()
    }
}

/// A price of one VM-hour, or the index of the (machine type, model) pair without one.
type Priced = Result<Price, u32>;

/// Hours of one row as whole milliseconds, and their cost so far.
#[derive(Debug, Default, Clone)]
struct Acc {
    busy_ms: i64,
    idle_ms: i64,
    busy_gpu_ms: i64,
    idle_gpu_ms: i64,
    /// Σ ms × price of one hour.
    cost_ms: f64,
    /// The pairs of hours without a price.
    unpriced: UnpricedSet,
}

impl Acc {
    fn add(&mut self, busy: bool, ms: i64, vm: &VmRef, price: Priced) {
        if ms <= 0 {
            return;
        }
        let gpu_ms = ms * i64::from(vm.gpus);
        if busy {
            self.busy_ms += ms;
            self.busy_gpu_ms += gpu_ms;
        } else {
            self.idle_ms += ms;
            self.idle_gpu_ms += gpu_ms;
        }
        match price {
            Ok(p) => self.cost_ms += ms as f64 * p.per_hour,
            Err(pair) => self.unpriced.insert(pair),
        }
    }

    fn merge(&mut self, o: &Acc) {
        self.busy_ms += o.busy_ms;
        self.idle_ms += o.idle_ms;
        self.busy_gpu_ms += o.busy_gpu_ms;
        self.idle_gpu_ms += o.idle_gpu_ms;
        self.cost_ms += o.cost_ms;
        self.unpriced.merge(&o.unpriced);
    }

    fn row(&self, key: String, unpriced: &Unpriced) -> UsageRow {
        let (busy, idle) = (self.busy_ms as f64 / MS_PER_HOUR, self.idle_ms as f64 / MS_PER_HOUR);
        let (busy_gpu, idle_gpu) =
            (self.busy_gpu_ms as f64 / MS_PER_HOUR, self.idle_gpu_ms as f64 / MS_PER_HOUR);
        UsageRow {
            key,
            // The sum of the two printed figures, so that busy + idle = total holds in the output too.
            vm_hours: busy + idle,
            busy_vm_hours: busy,
            idle_vm_hours: idle,
            gpu_hours: busy_gpu + idle_gpu,
            cost: self.unpriced.is_empty().then(|| self.cost_ms / MS_PER_HOUR),
            idle_gpu_hours: idle_gpu,
            unpriced: unpriced.of(&self.unpriced),
        }
    }
}

/// The report over `period` at `now`, by `by`, priced from `prices`, of spans as the daemon
/// records them ([`report_spans`] of [`UsageSpans::from_spans`]). The tables of the unit tests are
/// written in spans; the command and the bench read `UsageSpans` from the store.
#[cfg(test)]
pub fn report(
    vms: &[VmSpan],
    jobs: &[JobSpan],
    period: Period,
    now: DateTime<Utc>,
    by: By,
    prices: &PriceBook,
) -> Report {
    report_spans(&UsageSpans::from_spans(vms, jobs), period, now, by, prices)
}

/// The report over `period` at `now`, by `by`, priced from `prices`, of spans as the store reads
/// them for `slurm-dws usage`.
pub fn report_spans(
    spans: &UsageSpans,
    period: Period,
    now: DateTime<Utc>,
    by: By,
    prices: &PriceBook,
) -> Report {
    let since = period.since.timestamp_millis();
    let until = period.until.timestamp_millis();
    // Where a running job's span ends: the period's end, or the present when that is earlier.
    let open_end = until.min(now.timestamp_millis());
    let jobs = &spans.jobs;
    let mut last_seen: Option<i64> = None;
    // The jobs' spans clipped to the period, by node then start: (node, start, end, job id, index).
    let mut clipped: Vec<(u32, i64, i64, u64, u32)> = Vec::with_capacity(jobs.len());
    let mut job_seen: FxHashMap<u64, u32> = FxHashMap::default();
    for (i, j) in jobs.iter().enumerate() {
        job_seen.entry(j.job_id).or_insert(i as u32);
        let s = j.started_at.max(since);
        let e = j.ended_at.unwrap_or(open_end).min(until);
        if e > s {
            clipped.push((j.node, s, e, j.job_id, i as u32));
        }
    }
    clipped.sort_unstable();
    // Each node's run of `clipped`.
    let mut node_jobs: FxHashMap<u32, (usize, usize)> = FxHashMap::default();
    let mut at = 0;
    while at < clipped.len() {
        let node = clipped[at].0;
        let end = at + clipped[at..].partition_point(|c| c.0 == node);
        node_jobs.insert(node, (at, end));
        at = end;
    }
    // By job, about a row per job span: sized once rather than grown through every power of two.
    let expected_rows = if by == By::Job { jobs.len() } else { 0 };
    let mut rows: FxHashMap<Key, Acc> =
        FxHashMap::with_capacity_and_hasher(expected_rows, Default::default());
    let mut prices_used = BTreeMap::new();
    let mut price_cache: FxHashMap<(u32, u32), Priced> = FxHashMap::default();
    let mut unpriced_pairs: Vec<(u32, u32)> = Vec::new();
    let mut counted = 0;
    // Indexes of the jobs running together, by job id.
    let mut active: Vec<u32> = Vec::new();
    let mut points: Vec<(i64, bool, usize)> = Vec::new();
    for vm in &spans.vms {
        let start = vm.created_at.max(since);
        let end = match vm.deleted_at {
            Some(t) => t,
            None => {
                last_seen = last_seen.max(Some(vm.last_seen));
                vm.last_seen
            }
        }
        .min(until);
        if end <= start {
            continue;
        }
        counted += 1;
        // Looked up once per (machine type, model), not once per VM.
        let price = *price_cache.entry((vm.machine_type, vm.model)).or_insert_with(|| {
            let (mt, model) = (spans.name(vm.machine_type), spans.name(vm.model));
            match prices.price(mt, model) {
                Some(p) => {
                    prices_used.insert((mt.to_string(), model.to_string()), p);
                    Ok(p)
                }
                None => {
                    unpriced_pairs.push((vm.machine_type, vm.model));
                    Err(unpriced_pairs.len() as u32 - 1)
                }
            }
        });
        // The node's jobs within the VM's life, as start (true) and end (false) points.
        points.clear();
        let node_jobs = node_jobs.get(&vm.node).map_or(&[][..], |&(a, b)| &clipped[a..b]);
        // Sorted by start: every span that starts before the VM ends may overlap it.
        for (i, &(_, s, e, _, _)) in node_jobs.iter().enumerate() {
            if s >= end {
                break;
            }
            let (s, e) = (s.max(start), e.min(end));
            if e > s {
                points.push((s, true, i));
                points.push((e, false, i));
            }
        }
        // Ends before starts at the same instant: a job ending as another starts does not overlap it.
        points.sort_unstable();
        let mut busy = 0i64;
        let mut at = start;
        active.clear();
        for &(t, starts, i) in points.iter() {
            if t > at && !active.is_empty() {
                let len = t - at;
                busy += len;
                if matches!(by, By::Job | By::User | By::Account | By::Partition) {
                    // Shared equally among the jobs running together, the odd milliseconds to the first.
                    let n = active.len() as i64;
                    for (k, &j) in active.iter().enumerate() {
                        let share = len / n + i64::from((k as i64) < len % n);
                        rows.entry(by.key_of(&jobs[j as usize], spans))
                            .or_default()
                            .add(true, share, vm, price);
                    }
                }
            }
            at = at.max(t);
            let j = node_jobs[i].4;
            if starts {
                let id = jobs[j as usize].job_id;
                let pos = active.partition_point(|&a| jobs[a as usize].job_id <= id);
                active.insert(pos, j);
            } else if let Some(pos) = active.iter().position(|&a| a == j) {
                active.remove(pos);
            }
        }
        let idle = (end - start) - busy;
        let idle_key = match (by, vm.job_id) {
            (By::Nodeset, _) => Key::Name(spans.name(vm.nodeset)),
            (By::Model, _) => Key::Name(spans.name(vm.model)),
            (_, None) => Key::Name(NO_JOB),
            (By::Job, Some(id)) => Key::Job(id),
            (By::User | By::Account | By::Partition, Some(id)) => match job_seen.get(&id) {
                Some(&j) => by.key_of(&jobs[j as usize], spans),
                None => Key::Name(JOB_NOT_SEEN),
            },
        };
        let row = rows.entry(idle_key).or_default();
        if matches!(by, By::Nodeset | By::Model) {
            row.add(true, busy, vm, price);
        }
        row.add(false, idle, vm, price);
    }
    // Named rows first, by key (jobs by number); the rows in parentheses last. Each key ranked
    // once (by job, a few hundred thousand rows: not a parse per comparison); the keys are sorted
    // with their row's index, not with the row.
    let mut accs: Vec<Acc> = Vec::with_capacity(rows.len());
    let mut out: Vec<((bool, u64), Key, u32)> = Vec::with_capacity(rows.len());
    for (k, acc) in rows {
        out.push((k.rank(), k, accs.len() as u32));
        accs.push(acc);
    }
    out.sort_unstable_by(|(ra, a, _), (rb, b, _)| {
        ra.cmp(rb).then_with(|| match (a, b) {
            (Key::Name(a), Key::Name(b)) => a.cmp(b),
            // Two job rows of one rank are the same job; a job row and a name row of one rank
            // (a name that is a number): by their text.
            _ => a.text().cmp(&b.text()),
        })
    });
    // The total in the rows' order (a sum of floats: the same rows, the same figure).
    let mut total = Acc::default();
    for &(_, _, i) in &out {
        total.merge(&accs[i as usize]);
    }
    let unpriced = Unpriced::new(&unpriced_pairs, spans);
    Report {
        period,
        by,
        rows: out.into_iter().map(|(_, k, i)| accs[i as usize].row(k.text(), &unpriced)).collect(),
        total: total.row("total".into(), &unpriced),
        vms: counted,
        last_seen: last_seen.map(|ms| DateTime::from_timestamp_millis(ms).unwrap_or_default()),
        prices_used,
    }
}

/// How long the resize requests of one nodeset that got their capacity in the period waited for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueTime {
    pub nodeset: String,
    pub requests: usize,
    /// Nodes of those requests.
    pub nodes: u64,
    /// Seconds.
    pub mean_wait: i64,
    pub max_wait: i64,
    pub total_wait: i64,
}

/// The queue time of the requests (groups) that succeeded in `period`, by nodeset.
pub fn queue_times(
    waits: &BTreeMap<String, Vec<crate::store::RequestWait>>,
    period: Period,
) -> Vec<QueueTime> {
    waits
        .iter()
        .filter_map(|(nodeset, ws)| {
            let ws: Vec<_> = ws
                .iter()
                .filter(|w| w.succeeded_at >= period.since && w.succeeded_at < period.until)
                .collect();
            let total: i64 = ws.iter().map(|w| w.waited).sum();
            (!ws.is_empty()).then(|| QueueTime {
                nodeset: nodeset.clone(),
                requests: ws.len(),
                nodes: ws.iter().map(|w| u64::from(w.size)).sum(),
                mean_wait: total / ws.len() as i64,
                max_wait: ws.iter().map(|w| w.waited).max().unwrap_or(0),
                total_wait: total,
            })
        })
        .collect()
}

#[cfg(test)]
#[path = "report_tests.rs"]
mod tests;
