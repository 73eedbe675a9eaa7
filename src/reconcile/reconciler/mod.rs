//! The `Reconciler`: owns the store handle and the clients of GCE and Slurm, keeps the desired state
//! between passes, and sequences a pass — the only place that orders side effects.
//!
//! A pass has two halves, both public so that a caller can time or drive them separately:
//! 1. [`Reconciler::observe`]: the hook calls waiting in the inbox, and what GCE and Slurm show now
//!    (`observe.rs`). Changes nothing.
//! 2. [`Reconciler::pass_on`]: on one observation, ingest the inbox, then up to [`MAX_ROUNDS`] rounds
//!    of plan (`plan/`, pure) + commit (`commit.rs`, one transaction with the outbox intents) +
//!    execute (`execute.rs`, GCE then Slurm); close the outbox entries nobody needs; report
//!    (`report.rs`).
//!
//! [`Reconciler::pass`] is the one after the other; `make bench` times the second half alone on one
//! observation, so that GCE's and Slurm's round trips are not in the figure. A pass may skip a read
//! that cannot have changed or that a hook's pass need not wait for (an inbox-first pass, a MIG list
//! reused), and its report then says which (docs/architecture.md, "Reads a pass skips").

mod rounds;
mod usage;

use crate::config::Config;
use crate::gce;
use crate::model::EventKind;
use crate::reconcile::commit;
use crate::reconcile::error::ReconcileError;
use crate::reconcile::execute::Executor;
use crate::reconcile::gce_edge::inflight::{self, InFlight};
use crate::reconcile::gce_edge::poll::PollSchedule;
use crate::reconcile::gce_edge::step_retry::{self, FailureMap};
use crate::reconcile::gce_edge::templates::Templates;
use crate::reconcile::gce_edge::{self, advice::Advisor};
use crate::reconcile::observe::{self, Observation, Sources};
use crate::reconcile::plan::plan;
use crate::reconcile::report::{gc_items, GcReport, PassOutcome, PassPhases, PassReport, Trigger};
use crate::reconcile::slurm_edge::{admin_comment::AdminComments, topology::TopologyFile};
use crate::reconcile::types::*;
use crate::slurm::Slurm;
use crate::store::{Store, StoreError};
use chrono::{DateTime, SubsecRound, Utc};
use std::sync::Arc;

/// The most planning rounds in one pass (each round acts on what the previous one achieved).
pub const MAX_ROUNDS: usize = 6;
/// The desired state kept between passes is read back from the store after this many passes anyway:
/// whatever went unnoticed cannot outlive a few minutes.
const RELOAD_EVERY_PASSES: u64 = 30;

/// Runs passes. Owns the store handle and the clients of GCE and Slurm.
pub struct Reconciler {
    /// The config, the store and the clients.
    clients: Clients,
    /// When this daemon took charge from another controller's (see [`Reconciler::took_charge`]).
    took_charge_at: Option<DateTime<Utc>>,
    iteration: u64,
    /// The desired state as this process last committed it. The daemon is the only writer of nodes,
    /// requests, MIGs and backoffs (hooks write only the inbox and events; the state directory's lock
    /// keeps a second daemon out), so a pass does not read 10,000 rows back: it starts from this.
    /// Dropped when a pass fails (the store is then the truth), read again every
    /// [`RELOAD_EVERY_PASSES`]; debug builds check it against the store after every pass.
    desired: Option<Desired>,
    /// The `slurm-dws:` AdminComments of waiting jobs (`admin_comment.rs`).
    admin_comments: AdminComments,
    /// Capacity advice: answers kept briefly, template machine types.
    advisor: Advisor,
    /// The wait history behind the expected-start lines, re-read only when it changed.
    waits: crate::store::WaitsCache,
    /// The iteration at which `desired` was last read from the store.
    desired_loaded_at: u64,
    /// While passes are degraded: when the first degraded pass of this run started, and the reasons
    /// last logged (the log and the event log say it once per change, not once per pass).
    degraded: Option<(DateTime<Utc>, Vec<String>)>,
    /// Each nodeset's instance template, once read this run (`gce_edge/templates.rs`).
    templates: Templates,
    /// Events to record with the next pass report (a nodeset refused).
    pending_events: Vec<NewEvent>,
    /// Which resize requests to poll, and the last state of those not polled (`poll.rs`).
    polls: PollSchedule,
    /// GCE's and Slurm's answer time in all when the last observation began (the report's
    /// `phases.*_answer_ms` are the differences).
    answers_at: (std::time::Duration, std::time::Duration),
    /// The last full observation, as its pass left it: an inbox-first pass plans on it, and the next
    /// full pass may take its MIG list ("Reads a pass skips" in docs/architecture.md). Dropped
    /// before the next observation reads anything, so that two are never held at once.
    kept: Option<Kept>,
    /// GCE steps still running after [`inflight::STEP_WAIT`], across passes: no pass waits for
    /// them or sends them again; the first pass after one answers records it.
    in_flight: InFlight,
    /// The Slurm topology file (`[slurm] topology`), once Slurm's release says which form it takes.
    topology: TopologyFile,
    /// What the reads remember between passes.
    read_memory: ReadMemory,
    /// The usage spans open as the last full pass left them (`usage.rs`).
    recording: usage::Recording,
}

/// What the GCE reads remember between passes.
#[derive(Default)]
struct ReadMemory {
    /// The VM list as the last pass read it (`gce::VmRecall`): the VMs unchanged since are not
    /// decoded again.
    vm_recall: std::sync::Mutex<gce::VmRecall>,
    /// Which regions' workload policies are worth listing (`gce_edge::policies::PolicyRegions`).
    policy_regions: std::sync::Mutex<gce_edge::policies::PolicyRegions>,
    /// The calendar-mode bookings read lately (`gce_edge::reserved::FutureReads`).
    future_reads: std::sync::Mutex<gce_edge::reserved::FutureReads>,
}

/// The config and what a pass works through (the store, the clients of GCE and Slurm), apart from
/// the state the `Reconciler` keeps between passes, so that a phase can borrow them while that
/// state changes.
struct Clients {
    cfg: Arc<Config>,
    plan_cfg: PlanConfig,
    store: Store,
    gce: gce::Client,
    slurm: Slurm,
}

impl Clients {
    /// What executing a round needs, with each GCE step's failed attempts as the pass began.
    fn executor<'a>(&'a self, failures: &'a FailureMap) -> Executor<'a> {
        Executor {
            cfg: &self.cfg,
            naming: &self.plan_cfg.naming,
            store: &self.store,
            gce: &self.gce,
            slurm: &self.slurm,
            failures,
        }
    }

    /// What observing needs, with the VM list's recall.
    fn sources<'a>(&'a self, memory: &'a ReadMemory, usage_jobs_open: bool) -> Sources<'a> {
        Sources {
            cfg: &self.cfg,
            naming: &self.plan_cfg.naming,
            gce: &self.gce,
            slurm: &self.slurm,
            vm_recall: &memory.vm_recall,
            policy_regions: &memory.policy_regions,
            future_reads: &memory.future_reads,
            usage_jobs_open,
        }
    }
}

/// A full observation kept after its pass ([`Reconciler::pass`]): only one whose pass read
/// everything and was not degraded. Slurm's part is not kept (an inbox-first pass never plans on
/// it: the hook that wakes it says Slurm changed).
struct Kept {
    /// When its observation began.
    at: tokio::time::Instant,
    /// The VMs, the MIGs and the rest, with what its pass did learnt into them.
    observed: Observed,
    /// When its MIG list was read from GCE, and how many passes in a row have reused it.
    migs_read_at: tokio::time::Instant,
    mig_reuses: u32,
    /// Whether nothing can have changed a MIG since its list was read: its pass sent no GCE step
    /// and left none waiting for a retry, no request group is open, every MIG on record is active
    /// and every MIG listed is on record.
    migs_unchanged: bool,
}

/// An inbox-first pass plans on an observation at most this old (and at most `reconcile.interval`).
const INBOX_FIRST_MAX_AGE: std::time::Duration = std::time::Duration::from_secs(30);
/// A MIG list nothing could have changed is reused by at most this many passes in a row, and only
/// while it is younger than [`MIG_LIST_MAX_AGE`]: what changes a MIG outside slurm-dws (a VM GCE
/// deletes at the end of its run duration, an admin's hand) is seen that late at most.
const MIG_LIST_MAX_REUSES: u32 = 2;
const MIG_LIST_MAX_AGE: std::time::Duration = std::time::Duration::from_secs(60);

/// The time a pass starts at, in milliseconds as the store keeps time: the state kept between
/// passes then equals what is stored.
#[allow(clippy::disallowed_methods)] // an edge: a pass reads the clock once; all it decides takes this `now`
fn pass_clock() -> DateTime<Utc> {
    Utc::now().trunc_subsecs(3)
}

impl Reconciler {
    pub async fn new(cfg: Config, store: Store) -> Result<Reconciler, ReconcileError> {
        // No call or operation wait holds a pass longer than about `request_timeout`: what did not
        // finish is carried to the next pass (docs/architecture.md, "Bounded passes").
        let gce = gce_edge::client(&cfg)?.with_call_budget(gce_edge::step_budget(&cfg));
        let slurm = Slurm::new(
            cfg.slurm.bin_dir.clone(),
            cfg.slurm.conf.clone(),
            std::time::Duration::from_secs(cfg.slurm.command_timeout),
        );
        let iteration = store.meta("iteration").await?.and_then(|s| s.parse().ok()).unwrap_or(0);
        // A start or a reload (the admin may have fixed the cause) gives every failed step a fresh start.
        let mut tx = store.begin().await?;
        let forgiven = tx.forgive_failed_steps(pass_clock()).await?;
        tx.commit().await?;
        if forgiven > 0 {
            tracing::info!(forgiven, "failed GCE steps get a fresh start");
        }
        Ok(Reconciler {
            clients: Clients { plan_cfg: PlanConfig::new(&cfg), cfg: Arc::new(cfg), store, gce, slurm },
            took_charge_at: None,
            iteration,
            desired: None,
            desired_loaded_at: 0,
            degraded: None,
            templates: Templates::default(),
            pending_events: Vec::new(),
            polls: PollSchedule::default(),
            answers_at: Default::default(),
            kept: None,
            in_flight: InFlight::default(),
            topology: TopologyFile::default(),
            read_memory: Default::default(),
            admin_comments: Default::default(),
            advisor: Default::default(),
            waits: Default::default(),
            recording: Default::default(),
        })
    }

    /// Refreshes the waiting jobs' AdminComment (`admin_comment.rs`); the wait history is read only
    /// when a job waits or carries a line.
    async fn waiting_jobs_comments(
        &mut self,
        desired: &Desired,
        capacity: &std::collections::BTreeMap<String, ObservedCapacity>,
        report: &mut PassReport,
    ) {
        let queued = desired.requests.values().any(|r| r.job_id.is_some() && crate::waiting::is_queued(r));
        let window_closed = capacity.values().any(|c| c.window_start.is_some_and(|s| report.started_at < s));
        if !queued && !window_closed && !self.admin_comments.any_written() {
            return;
        }
        let waits = match self.waits.get(&self.clients.store).await {
            Ok(w) => w,
            Err(e) => return report.errors.push(format!("reading the wait history: {e}")),
        };
        let now = report.started_at;
        self.admin_comments
            .refresh(&self.clients.cfg, &self.clients.slurm, waits, desired, capacity, now)
            .await;
    }

    /// This daemon took charge from another controller's at `at` (`daemon::role`): the passes of the
    /// next few minutes provision the nodes Slurm was already powering up with no request on record.
    pub fn took_charge(&mut self, at: DateTime<Utc>) {
        self.took_charge_at = Some(at);
    }

    /// The GCE client (its call statistics feed the metrics).
    pub fn gce(&self) -> &gce::Client {
        &self.clients.gce
    }

    /// Notified when a GCE call in flight answers: the daemon runs a pass to record it.
    pub fn in_flight_answered(&self) -> Arc<tokio::sync::Notify> {
        self.in_flight.notifier()
    }

    /// Shutdown: waits until every GCE call in flight has answered, or `grace`, and records the
    /// answers; the calls still running are abandoned (their outbox entries stay pending: the
    /// next start re-sends them with the same `requestId`). Returns the abandoned calls.
    pub async fn drain_in_flight(&mut self, grace: std::time::Duration) -> Vec<inflight::InFlightCall> {
        if self.in_flight.is_empty() {
            return Vec::new();
        }
        let (answers, abandoned) = self.in_flight.drain(tokio::time::Instant::now() + grace).await;
        if !answers.is_empty() {
            match self.record_answers(answers).await {
                Ok(n) => {
                    tracing::info!(recorded = n, "GCE calls in flight answered during shutdown: recorded")
                }
                Err(e) => {
                    self.desired = None;
                    tracing::warn!(error = %e, "could not record the answers of GCE calls in flight; the next start re-sends them")
                }
            }
        }
        for c in &abandoned {
            tracing::warn!(step = %c.step.as_str(), target = %c.target, request_id = %c.request_id, age_secs = c.age_secs, "GCE call in flight abandoned at shutdown: its outbox entry stays pending and the next start re-sends it with the same requestId");
        }
        abandoned
    }

    /// One pass: [`observe`](Self::observe), then [`pass_on`](Self::pass_on) what it saw. Never fails:
    /// what went wrong is in the report, and the next pass tries again.
    ///
    /// A pass a hook wakes while the last full observation is younger than [`INBOX_FIRST_MAX_AGE`]
    /// (and `reconcile.interval`) is inbox-first: it reads only the inbox and the waiting jobs' time
    /// limits, and plans on that observation, so that a resume's request is sent without waiting
    /// for GCE's and Slurm's lists; its report names the reads it skipped, and the daemon runs a
    /// full pass right after it. Any other pass observes everything, except a MIG list nothing
    /// could have changed, which it may take from the last pass.
    pub async fn pass(&mut self, trigger: Trigger) -> PassReport {
        let mut begun = Observation::begin(pass_clock());
        let (started_at, started) = (begun.started_at, begun.started);
        let observed = match self.observe_inbox_first(trigger, &mut begun).await {
            Ok(true) => Ok(begun),
            Ok(false) => self.observe_from(begun, true).await,
            Err(e) => Err(e),
        };
        match observed {
            Ok(observation) => self.pass_on(trigger, observation).await,
            Err(e) => {
                let mut report = self.begin_report(trigger, started_at);
                report.errors.push(e.to_string());
                self.finish(report, started).await
            }
        }
    }

    /// The first half of a pass: the hook calls waiting in the inbox, and GCE's and Slurm's answers
    /// for the desired state on record. What GCE or Slurm did not answer is in the observation's
    /// errors; an error here means the store could not be read. Everything is read: nothing is
    /// reused from an earlier pass (`gc` and `make bench` observe this way).
    pub async fn observe(&mut self) -> Result<Observation, ReconcileError> {
        self.observe_from(Observation::begin(pass_clock()), false).await
    }

    /// An inbox-first observation into `o`, when `trigger` is a hook, the inbox holds calls and the
    /// last full observation is fresh ([`Reconciler::pass`]): its VMs and MIGs as its pass left
    /// them, Slurm unknown, no request polled, the waiting jobs' time limits read now. `false` when
    /// the pass must observe everything.
    async fn observe_inbox_first(
        &mut self,
        trigger: Trigger,
        o: &mut Observation,
    ) -> Result<bool, ReconcileError> {
        let max_age =
            INBOX_FIRST_MAX_AGE.min(std::time::Duration::from_secs(self.clients.cfg.reconcile.interval));
        let fresh = self.kept.as_ref().is_some_and(|k| k.at.elapsed() <= max_age);
        if trigger != Trigger::Hook || !fresh || crate::reconcile::bench_baseline() {
            return Ok(false);
        }
        self.answers_at = (self.clients.gce.answer_time(), crate::slurm::answer_time());
        let inbox = self.clients.store.unprocessed_inbox().await?;
        if inbox.is_empty() {
            return Ok(false); // a pass already took the call that woke this one
        }
        let Some(kept) = self.kept.take() else { return Ok(false) };
        let desired = self.take_desired().await?;
        let age = kept.at.elapsed();
        let mut observed = kept.observed;
        observed.reused = true;
        observed.slurm = None;
        observed.reservations = None;
        observed.exclusive_jobs = None;
        observed.requests.clear();
        observed.job_limits.clear();
        let sources = self.clients.sources(&self.read_memory, self.recording.jobs_open());
        observed.jobs = None;
        let took = observe::read_jobs(
            &sources,
            &desired,
            &inbox,
            Default::default(),
            false,
            &mut observed,
            &mut o.errors,
        )
        .await;
        o.phases.slurm_read_ms += PassPhases::ms(took);
        let ms = age.as_millis();
        for (read, why) in [
            (
                "slurm_nodes",
                "not read: an inbox-first pass decides nothing from Slurm's view (the hook says it changed)",
            ),
            ("reservations", "not read: an inbox-first pass decides nothing about reservations"),
            ("resize_requests", "not polled: an inbox-first pass decides nothing about requests in flight"),
        ] {
            o.skipped.insert(read.into(), why.into());
        }
        o.skipped.insert(
            "vms".into(),
            format!(
                "the list of {ms} ms ago, as its pass left it: a waiting node is requested only when it \
                 showed no VM under the node's name (any VM made since comes from a request still open, \
                 which the node waits for); nothing is deleted as stale"
            ),
        );
        o.skipped.insert("migs".into(), format!("the list of {ms} ms ago, as its pass left it"));
        o.reused_age = Some(age); // never kept after its pass: its MIG list's age is not followed
        o.observed = observed;
        o.inbox = inbox;
        self.desired = Some(desired);
        Ok(true)
    }

    /// Observes into `o`; with `reuse`, takes the kept MIG list when nothing can have changed it.
    async fn observe_from(&mut self, mut o: Observation, reuse: bool) -> Result<Observation, ReconcileError> {
        self.answers_at = (self.clients.gce.answer_time(), crate::slurm::answer_time());
        let kept = self.kept.take();
        let reused_migs = kept.filter(|k| {
            reuse
                && !crate::reconcile::bench_baseline()
                && k.migs_unchanged
                && k.mig_reuses < MIG_LIST_MAX_REUSES
                && k.migs_read_at.elapsed() <= MIG_LIST_MAX_AGE
        });
        let reused_migs = reused_migs.and_then(|k| {
            let age = k.migs_read_at.elapsed();
            o.migs_read_at = k.migs_read_at;
            o.mig_reuses = k.mig_reuses + 1;
            o.skipped.insert(
                "migs".into(),
                format!(
                    "the list of {} ms ago: since then no GCE step was sent or waits for a retry, no \
                     request group was open and every MIG was active, so only GCE's end-of-run \
                     deletions or an admin could have changed it; nothing is deleted as stale this pass",
                    age.as_millis()
                ),
            );
            k.observed.migs
        });
        let desired = self.take_desired().await?;
        // A failure here leaves `desired` dropped, as after any failed pass: the next reads the store.
        let inbox = self.clients.store.unprocessed_inbox().await?;
        let sources = self.clients.sources(&self.read_memory, self.recording.jobs_open());
        let (observed, polls) = observe::gce_and_slurm(
            &sources,
            &desired,
            &inbox,
            &mut self.polls,
            o.started_at,
            reused_migs,
            &mut o.errors,
            &mut o.phases,
        )
        .await;
        if !observed.migs_reused {
            o.skipped.remove("migs");
            o.migs_read_at = o.started;
            o.mig_reuses = 0;
        }
        o.observed = observed;
        o.polls = polls;
        o.observed.repair_asks = self.clients.store.unprocessed_repair_asks().await?;
        if o.observed.vms.is_some() || o.observed.migs.is_some() {
            // GCE answers: read the templates not read yet (with GCE down they would only add
            // their retry deadline to this pass).
            let reading = tokio::time::Instant::now();
            let refused = self.templates.check(&self.clients.gce, &self.clients.cfg, &mut o.errors).await;
            self.pending_events.extend(refused);
            o.phases.gce_read_ms += PassPhases::ms(reading.elapsed());
        }
        o.observed.refused_nodesets = self.templates.refused();
        o.observed.took_charge_at = self.took_charge_at;
        for (ns, why) in &o.observed.refused_nodesets {
            o.errors.push(format!("nodeset {ns} refused: {why}"));
        }
        o.inbox = inbox;
        self.desired = Some(desired);
        Ok(o)
    }

    /// The second half of a pass, on `observation`: ingest its hook calls, plan and act in rounds,
    /// close the outbox entries no longer needed, and report. Plans with `now` = when the observation
    /// began. Never fails: what went wrong is in the report.
    pub async fn pass_on(&mut self, trigger: Trigger, observation: Observation) -> PassReport {
        let started = observation.started;
        let mut report = self.begin_report(trigger, observation.started_at);
        report.phases = observation.phases.clone();
        report.skipped_reads = observation.skipped.clone();
        report.reused_observation_ms = observation.reused_age.map(|a| a.as_millis() as u64);
        let (at, migs_read_at, mig_reuses) =
            (observation.started, observation.migs_read_at, observation.mig_reuses);
        match self.plan_commit_execute(observation, &mut report).await {
            Ok((desired, mut observed, failures_waiting)) => {
                // Slurm's nodes and reservations are never read after the plan: freed before the
                // usage recording, whose turn-up pass at 10,000 nodes is the heap's peak.
                let slurm_read = observed.slurm.take().is_some();
                observed.reservations = None;
                self.record_usage(&desired, &mut observed, &mut report).await;
                let capacity = observed.capacity.clone();
                if report.reused_observation_ms.is_none() {
                    if let Some(vms) = observed.vms.as_ref() {
                        let (cfg, naming) = (&self.clients.cfg, &self.clients.plan_cfg.naming);
                        self.topology
                            .keep(
                                cfg,
                                naming,
                                &self.clients.slurm,
                                vms,
                                report.started_at,
                                &mut report.errors,
                            )
                            .await;
                    }
                }
                if cfg!(debug_assertions) {
                    self.check_kept_state(&desired).await;
                }
                if report.reused_observation_ms.is_some() {
                    report.next_pass_in_secs = 0; // the full pass, at once
                } else if report.errors.is_empty()
                    && report.gce_steps.iter().all(|s| s.ok)
                    && observed.vms.is_some()
                    && observed.migs.is_some()
                    && slurm_read
                    && observed.unreachable_zones.is_empty()
                {
                    let migs_unchanged = report.gce_steps.is_empty()
                        && self.in_flight.is_empty()
                        && !failures_waiting
                        && !desired.requests.values().any(|r| r.phase.is_open())
                        && desired.migs.values().all(|m| m.state == crate::model::MigState::Active)
                        && observed
                            .migs
                            .as_ref()
                            .is_some_and(|m| m.keys().all(|k| desired.migs.contains_key(k)));
                    let mut observed = observed;
                    observed.jobs = None; // never planned on again: freed now
                    self.kept = Some(Kept { at, observed, migs_read_at, mig_reuses, migs_unchanged });
                }
                self.waiting_jobs_comments(&desired, &capacity, &mut report).await;
                self.desired = Some(desired);
            }
            Err(e) => {
                // The store is the truth now: the next pass reads the desired state from it.
                self.desired = None;
                report.errors.push(e.to_string());
            }
        }
        self.finish(report, started).await
    }

    /// GCE's and Slurm's answer time since the observation began.
    fn report_answers(&self, report: &mut PassReport) {
        let (gce, slurm) = self.answers_at;
        report.phases.gce_answer_ms = PassPhases::ms(self.clients.gce.answer_time().saturating_sub(gce));
        report.phases.slurm_answer_ms = PassPhases::ms(crate::slurm::answer_time().saturating_sub(slurm));
    }

    fn begin_report(&mut self, trigger: Trigger, now: DateTime<Utc>) -> PassReport {
        self.iteration += 1;
        PassReport::new(self.iteration, trigger, now, self.clients.cfg.reconcile.interval)
    }

    /// Judges, times, stores and logs the report.
    async fn finish(&mut self, mut report: PassReport, started: tokio::time::Instant) -> PassReport {
        report.judge();
        let mut events = std::mem::take(&mut self.pending_events);
        events.extend(self.note_health(&mut report));
        let saving = tokio::time::Instant::now();
        // The report is stored with the time taken so far; the log line and the answer have it all.
        report.duration_ms = started.elapsed().as_millis() as u64;
        self.report_answers(&mut report);
        match serde_json::to_string(&report) {
            Ok(json) => {
                if let Err(e) = self.save_report(&json, &events, report.started_at).await {
                    tracing::warn!(error = %e, "could not record the pass report");
                }
            }
            Err(e) => tracing::warn!(error = %e, "could not encode the pass report"),
        }
        report.phases.commit_ms += PassPhases::ms(saving.elapsed());
        report.duration_ms = started.elapsed().as_millis() as u64;
        report.log();
        report
    }

    /// Follows the degraded state from pass to pass: sets the report's `degraded_since`, logs a change
    /// (degraded, other reasons, recovered) once, and returns the event a change of state records.
    fn note_health(&mut self, report: &mut PassReport) -> Option<NewEvent> {
        let reasons = report.degraded_reasons();
        match (report.outcome, self.degraded.take()) {
            (PassOutcome::Degraded, None) => {
                let since = report.started_at;
                tracing::warn!(
                    iteration = report.iteration,
                    reasons = %reasons.join("; "),
                    "reconcile passes are DEGRADED"
                );
                let message = format!("reconcile passes are degraded: {}", reasons.join("; "));
                report.degraded_since = Some(since);
                self.degraded = Some((since, reasons));
                Some(NewEvent { kind: EventKind::Degraded, nodes: vec![], message })
            }
            (PassOutcome::Degraded, Some((since, last))) => {
                if last != reasons {
                    tracing::warn!(
                        iteration = report.iteration,
                        reasons = %reasons.join("; "),
                        since = %since.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
                        "reconcile passes are still DEGRADED, for other reasons"
                    );
                }
                report.degraded_since = Some(since);
                self.degraded = Some((since, reasons));
                None
            }
            (PassOutcome::Ok, Some((since, _))) => {
                tracing::info!(
                    iteration = report.iteration,
                    since = %since.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
                    "reconcile passes recovered: no longer degraded"
                );
                let message = format!(
                    "reconcile passes are healthy again (degraded since {})",
                    since.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
                );
                Some(NewEvent { kind: EventKind::Recovered, nodes: vec![], message })
            }
            (PassOutcome::Ok, None) => None,
        }
    }

    async fn save_report(
        &self,
        json: &str,
        events: &[NewEvent],
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let mut tx = self.clients.store.begin().await?;
        for e in events {
            tx.add_event(now, e.kind.as_str(), &e.nodes, &e.message).await?;
        }
        tx.set_meta("last_pass", json).await?;
        tx.set_meta("iteration", &self.iteration.to_string()).await?;
        tx.commit().await
    }

    /// The desired state kept from the last pass, or read from the store (at start, after a failed
    /// pass, every [`RELOAD_EVERY_PASSES`]).
    async fn take_desired(&mut self) -> Result<Desired, StoreError> {
        if let Some(d) = self.desired.take() {
            if self.iteration.saturating_sub(self.desired_loaded_at) < RELOAD_EVERY_PASSES {
                return Ok(d);
            }
        }
        let d = commit::read_desired(&self.clients.store).await?;
        self.desired_loaded_at = self.iteration;
        Ok(d)
    }

    /// Records answers of calls in flight outside a pass (shutdown's drain); how many.
    async fn record_answers(&mut self, answers: Vec<inflight::Answer>) -> Result<usize, ReconcileError> {
        let now = pass_clock();
        let mut desired = self.take_desired().await?;
        let failures = step_retry::failure_map(self.clients.store.step_failures().await?);
        let exec = self.clients.executor(&failures);
        let mut report =
            PassReport::new(self.iteration, Trigger::Cli, now, self.clients.cfg.reconcile.interval);
        exec.record(answers, &mut desired, &mut Observed::default(), &mut report, now).await?;
        self.desired = Some(desired);
        Ok(report.gce_steps.len())
    }

    /// Debug builds: the state kept between passes must be exactly what the store holds, or a pass
    /// would plan from something that is not on record. Every test that runs the daemon checks this.
    async fn check_kept_state(&self, kept: &Desired) {
        let stored = match commit::read_desired(&self.clients.store).await {
            Ok(d) => d,
            Err(e) => {
                tracing::warn!(error = %e, "could not read the desired state back to check it");
                return;
            }
        };
        if let Some(diff) = commit::first_difference(kept, &stored) {
            panic!("the desired state kept in memory differs from the store: {diff}");
        }
    }

    /// What a pass would delete and why (`gc --dry-run`), or delete it now (`gc`): one observation,
    /// the deletions a plan makes of it, and (unless a dry run) the pass on that observation.
    pub async fn gc(&mut self, dry_run: bool) -> GcReport {
        let observation = match self.observe().await {
            Ok(o) => o,
            Err(e) if dry_run => {
                return GcReport::DryRun { would_delete: vec![], errors: vec![e.to_string()] }
            }
            Err(_) => {
                return GcReport::Deleted { deleted: vec![], pass: Box::new(self.pass(Trigger::Cli).await) }
            }
        };
        let deletions = match &self.desired {
            Some(d) => {
                gc_items(&plan(&self.clients.plan_cfg, d, &observation.observed, observation.started_at))
            }
            None => vec![],
        };
        if dry_run {
            return GcReport::DryRun { would_delete: deletions, errors: observation.errors };
        }
        let pass = self.pass_on(Trigger::Cli, observation).await;
        GcReport::Deleted { deleted: deletions, pass: Box::new(pass) }
    }
}
