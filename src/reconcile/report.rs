//! What a pass tells the operator: the pass report (`status`, `reconcile`, the store's `last_pass`,
//! the metrics) and the garbage-collection report (`gc`), both typed and serialized with the field
//! names docs/operations.md and the `--json` output use.

use super::types::*;
use crate::model::{NodeState, RequestPhase};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Why a pass ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Trigger {
    Startup,
    Interval,
    Hook,
    Cli,
}

/// How a pass went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PassOutcome {
    /// Everything it read answered and every step it sent was done.
    Ok,
    /// Something failed (a list, a command, a step, the store); the next pass decides again.
    Degraded,
}

impl PassOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            PassOutcome::Ok => "ok",
            PassOutcome::Degraded => "degraded",
        }
    }
}

impl std::fmt::Display for PassOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One GCE mutation a pass attempted.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StepReport {
    pub step: GceStepKind,
    /// The MIG (or `mig/request`, `mig: hostlist`) it was about.
    pub target: String,
    /// Done, or nothing left to do.
    pub ok: bool,
    pub error: Option<String>,
}

/// What one pass did: printed by `status` and `reconcile`, kept in the store as the last pass.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PassReport {
    pub iteration: u64,
    pub trigger: Trigger,
    pub started_at: DateTime<Utc>,
    pub duration_ms: u64,
    pub outcome: PassOutcome,
    pub hook_calls_ingested: usize,
    pub rounds: usize,
    pub requests_created: usize,
    /// Resize requests this pass asked GCE about (`get`).
    #[serde(default)]
    pub requests_polled: usize,
    /// Resize requests it did not ask about (queued a while, not due): planned from the state they
    /// were last seen in.
    #[serde(default)]
    pub requests_carried: usize,
    pub gce_steps: Vec<StepReport>,
    pub slurm_commands: usize,
    pub events: usize,
    /// Spot nodes whose VM this pass found preempted (each with a `preempted` event); left out of
    /// the JSON when none.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub preempted: usize,
    pub errors: Vec<String>,
    pub next_pass_in_secs: u64,
    /// While passes are degraded: when the first degraded pass of this daemon's run started (`None`
    /// when this pass was ok). `status` shows it and exits 1 while it is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub degraded_since: Option<DateTime<Utc>>,
    /// Zones GCE's VM list left out this pass (a partial answer): nothing in them was judged gone,
    /// expired or orphaned. The pass is degraded while there are any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unreachable_zones: Vec<String>,
    /// Nodesets refused because their instance template cannot work for DWS Flex Start, with why
    /// (the field and the value it needs). Their nodes get no VM; the pass is degraded.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub refused_nodesets: std::collections::BTreeMap<String, String>,
    /// Fallbacks this pass: nodesets whose powered-down nodes it drained because they cannot get
    /// capacity now (`plan/fallback.rs`).
    #[serde(default)]
    pub fallbacks: usize,
    /// Nodes of `exclusive` nodesets it powered down because their job ended (`plan/release.rs`).
    #[serde(default)]
    pub released_nodes: usize,
    /// Where the pass's wall time went (see [`PassPhases`]).
    #[serde(default)]
    pub phases: PassPhases,
    /// The reads this pass did not make, each with what it planned from instead and why that is
    /// safe (docs/architecture.md, "Reads a pass skips"); left out of the JSON when it read everything.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub skipped_reads: std::collections::BTreeMap<String, String>,
    /// An inbox-first pass (woken by a hook while the last observation was fresh): the age of the
    /// observation it planned on, in milliseconds. A full pass follows it at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reused_observation_ms: Option<u64>,
    /// GCE steps still waiting for GCE's answer in the background when the pass ended, oldest
    /// first, each with its age (`inflight.rs`); left out of the JSON when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub in_flight: Vec<crate::reconcile::gce_edge::inflight::InFlightCall>,
    /// Each reservation nodeset's reserved capacity as this pass read it (`gce_edge/reserved.rs`),
    /// by nodeset; left out of the JSON when none is configured.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub reserved: std::collections::BTreeMap<String, ObservedCapacity>,
    /// VM and GPU seconds this pass counted (`plan/usage.rs`), by nodeset, model and use, every
    /// configured nodeset's busy and idle included: what `slurm_dws_vm_seconds_total` and
    /// `slurm_dws_gpu_seconds_total` add. Empty on a pass that recorded no usage (its VM list
    /// failed, or an inbox-first pass): the next full pass counts the time.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub usage: Vec<UsageCount>,
}

/// One (nodeset, model, use) of [`PassReport::usage`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UsageCount {
    pub nodeset: String,
    pub model: String,
    /// `busy` (a job ran on the node) or `idle`.
    #[serde(rename = "use")]
    pub use_: String,
    pub vm_seconds: f64,
    pub gpu_seconds: f64,
}

/// One line for people of a reservation nodeset's capacity: the reservation, its use, its window as
/// seen at `now`.
pub fn capacity_line(c: &ObservedCapacity, now: DateTime<Utc>) -> String {
    let t = |x: DateTime<Utc>| x.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let what = c.reservation.as_deref().unwrap_or("(no reservation delivered yet)");
    let window = match (c.window_start, c.window_end) {
        (Some(s), _) if now < s => {
            format!("window opens {} (in {})", t(s), crate::waiting::words((s - now).num_seconds()))
        }
        (_, Some(e)) if now >= e => format!("window ended {}", t(e)),
        (_, Some(e)) => {
            format!("window open until {} (ends in {})", t(e), crate::waiting::words((e - now).num_seconds()))
        }
        (_, None) => "no window end".to_string(),
    };
    let mut line = format!(
        "{what}: {} of {} in use, {} free; {window}",
        c.in_use,
        c.count,
        c.count.saturating_sub(c.in_use)
    );
    if let Some(why) = &c.unusable {
        line.push_str(&format!("; unusable: {why}"));
    }
    line
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Where a pass's wall time went, in milliseconds. Slurm's and GCE's reads run at the same time, so
/// `slurm_read_ms` and `gce_read_ms` overlap; the other phases follow one another. The `*_answer_ms`
/// figures are the time the other side took to start answering (GCE: request sent → response
/// headers, summed over the pass's calls; Slurm: command started → its first byte of output, summed
/// over its commands): slurmctld's and GCE's own time, which the pass only waits for.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct PassPhases {
    /// Slurm's nodes and reservations, and `squeue` when jobs wait for nodes.
    pub slurm_read_ms: f64,
    /// GCE's lists, the resize-request polls and the template reads.
    pub gce_read_ms: f64,
    /// `plan()` of every round.
    pub plan_ms: f64,
    /// Store transactions: the ingested inbox, each round's changes and outbox intents, the outbox
    /// tidied, the pass report saved.
    pub commit_ms: f64,
    /// GCE steps sent and Slurm commands run.
    pub act_ms: f64,
    pub slurm_answer_ms: f64,
    pub gce_answer_ms: f64,
}

impl PassPhases {
    /// A duration in milliseconds, to the tenth.
    pub fn ms(d: std::time::Duration) -> f64 {
        (d.as_secs_f64() * 10_000.0).round() / 10.0
    }
}

impl PassReport {
    /// A report of a pass that has done nothing yet.
    pub fn new(iteration: u64, trigger: Trigger, now: DateTime<Utc>, next_pass_in_secs: u64) -> PassReport {
        PassReport {
            iteration,
            trigger,
            started_at: now,
            duration_ms: 0,
            outcome: PassOutcome::Ok,
            hook_calls_ingested: 0,
            rounds: 0,
            requests_created: 0,
            requests_polled: 0,
            requests_carried: 0,
            gce_steps: Vec::new(),
            slurm_commands: 0,
            events: 0,
            preempted: 0,
            errors: Vec::new(),
            next_pass_in_secs,
            degraded_since: None,
            unreachable_zones: Vec::new(),
            refused_nodesets: Default::default(),
            fallbacks: 0,
            released_nodes: 0,
            phases: PassPhases::default(),
            skipped_reads: Default::default(),
            reused_observation_ms: None,
            in_flight: Vec::new(),
            reserved: Default::default(),
            usage: Vec::new(),
        }
    }

    /// Sets the outcome from what was recorded: degraded when anything failed.
    pub fn judge(&mut self) {
        self.outcome = if !self.errors.is_empty() || self.gce_steps.iter().any(|s| !s.ok) {
            PassOutcome::Degraded
        } else {
            PassOutcome::Ok
        };
    }

    /// Why the pass was degraded: its errors and the GCE steps that failed (empty when ok).
    pub fn degraded_reasons(&self) -> Vec<String> {
        let mut reasons = self.errors.clone();
        for s in self.gce_steps.iter().filter(|s| !s.ok) {
            reasons.push(format!("{} {}: {}", s.step, s.target, s.error.as_deref().unwrap_or("failed")));
        }
        reasons
    }

    /// Writes the report to the log: one line. Its errors are logged by the reconciler once per change
    /// of the degraded state (`Reconciler::note_health`), not once per pass; here only at debug level.
    pub fn log(&self) {
        tracing::info!(
            iteration = self.iteration,
            trigger = ?self.trigger,
            duration_ms = self.duration_ms,
            outcome = %self.outcome,
            ingested = self.hook_calls_ingested,
            requests_created = self.requests_created,
            requests_polled = self.requests_polled,
            requests_carried = self.requests_carried,
            gce_steps = self.gce_steps.len(),
            slurm_commands = self.slurm_commands,
            slurm_read_ms = self.phases.slurm_read_ms,
            gce_read_ms = self.phases.gce_read_ms,
            plan_ms = self.phases.plan_ms,
            commit_ms = self.phases.commit_ms,
            act_ms = self.phases.act_ms,
            slurm_answer_ms = self.phases.slurm_answer_ms,
            gce_answer_ms = self.phases.gce_answer_ms,
            skipped_reads = %self.skipped_reads.keys().cloned().collect::<Vec<_>>().join(","),
            reused_observation_ms = ?self.reused_observation_ms,
            in_flight = self.in_flight.len(),
            "reconcile pass"
        );
        for c in &self.in_flight {
            tracing::warn!(
                iteration = self.iteration,
                step = %c.step.as_str(),
                target = %c.target,
                request_id = %c.request_id,
                age_secs = c.age_secs,
                "GCE call in flight: no answer yet"
            );
        }
        for e in &self.errors {
            tracing::debug!(iteration = self.iteration, error = %e, "reconcile pass error");
        }
    }
}

/// What a deletion is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GcItemKind {
    Mig,
    Vm,
    /// A workload policy slurm-dws owns.
    Policy,
}

/// One deletion `gc` reports, with its reason.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GcItem {
    pub kind: GcItemKind,
    pub name: String,
    /// The VM's MIG (VMs only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mig: Option<String>,
    pub reason: String,
}

/// What `gc` found: with `--dry-run` what a pass would delete now, else what the pass it ran deleted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(into = "GcJson", try_from = "GcJson")]
pub enum GcReport {
    DryRun {
        would_delete: Vec<GcItem>,
        /// What could not be read (the list is then partial: nothing is concluded from absence).
        errors: Vec<String>,
    },
    Deleted {
        deleted: Vec<GcItem>,
        /// The pass that deleted them.
        pass: Box<PassReport>,
    },
}

impl GcReport {
    pub fn dry_run(&self) -> bool {
        matches!(self, GcReport::DryRun { .. })
    }

    /// The deletions, planned or done.
    pub fn items(&self) -> &[GcItem] {
        match self {
            GcReport::DryRun { would_delete, .. } => would_delete,
            GcReport::Deleted { deleted, .. } => deleted,
        }
    }
}

/// The JSON `gc --json` prints: `{dry_run: true, would_delete, errors}` or `{dry_run: false,
/// deleted, pass}`.
#[derive(Serialize, Deserialize)]
struct GcJson {
    dry_run: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    would_delete: Option<Vec<GcItem>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    errors: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    deleted: Option<Vec<GcItem>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pass: Option<Box<PassReport>>,
}

impl From<GcReport> for GcJson {
    fn from(r: GcReport) -> GcJson {
        match r {
            GcReport::DryRun { would_delete, errors } => GcJson {
                dry_run: true,
                would_delete: Some(would_delete),
                errors: Some(errors),
                deleted: None,
                pass: None,
            },
            GcReport::Deleted { deleted, pass } => GcJson {
                dry_run: false,
                would_delete: None,
                errors: None,
                deleted: Some(deleted),
                pass: Some(pass),
            },
        }
    }
}

impl TryFrom<GcJson> for GcReport {
    type Error = String;
    fn try_from(j: GcJson) -> Result<GcReport, String> {
        match j {
            GcJson { dry_run: true, would_delete: Some(would_delete), errors, .. } => {
                Ok(GcReport::DryRun { would_delete, errors: errors.unwrap_or_default() })
            }
            GcJson { dry_run: false, deleted: Some(deleted), pass: Some(pass), .. } => {
                Ok(GcReport::Deleted { deleted, pass })
            }
            _ => Err("a gc report has either would_delete (dry run) or deleted and pass".into()),
        }
    }
}

/// The deletions in a plan, each with its reason, for `gc`.
pub fn gc_items(p: &Plan) -> Vec<GcItem> {
    let reason_for = |node: &str| {
        p.events
            .iter()
            .rev()
            .find(|e| e.nodes.iter().any(|n| n == node))
            .map(|e| e.message.clone())
            .unwrap_or_else(|| "the node is powered down: its VM must not exist".into())
    };
    p.gce
        .iter()
        .flat_map(|s| match s {
            GceStep::DeleteMig { mig, reason } => {
                vec![GcItem { kind: GcItemKind::Mig, name: mig.clone(), mig: None, reason: reason.clone() }]
            }
            GceStep::DeletePolicy { policy, reason, .. } => vec![GcItem {
                kind: GcItemKind::Policy,
                name: policy.clone(),
                mig: None,
                reason: reason.clone(),
            }],
            GceStep::DeleteInstances { mig, instances } => instances
                .iter()
                .map(|i| GcItem {
                    kind: GcItemKind::Vm,
                    name: i.name.clone(),
                    mig: Some(mig.clone()),
                    reason: reason_for(&i.name),
                })
                .collect(),
            _ => vec![],
        })
        .collect()
}

/// When the next pass should run: soon while requests are young or work is in flight, else `interval`.
pub fn next_pass_in(interval: u64, d: &Desired, now: DateTime<Utc>) -> u64 {
    let interval = interval.max(1);
    let young = d.requests.values().any(|r| r.phase.is_open() && (now - r.created_at).num_seconds() < 120);
    let busy = d.nodes.values().any(|n| matches!(n.state, NodeState::Suspending | NodeState::ResumePending))
        || d.requests.values().any(|r| r.phase != RequestPhase::Succeeded);
    if young {
        interval.min(2)
    } else if busy {
        interval.min(10)
    } else {
        interval
    }
}

#[cfg(test)]
#[path = "report_tests.rs"]
mod tests;
