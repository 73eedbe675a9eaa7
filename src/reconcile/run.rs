//! The pass itself: ingest, observe, plan, act, report. The only place that sequences side effects.

use super::gce_edge::{self, StepResult};
use super::ingest::ingest;
use super::plan::{self, plan};
use super::types::*;
use crate::config::Config;
use crate::gce;
use crate::model::*;
use crate::naming::Naming;
use crate::slurm::{self, NodeUpdate, Slurm};
use crate::store::{Store, StoreError};
use chrono::{DateTime, SubsecRound, Utc};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;
use std::time::Instant;

/// The most planning rounds in one pass (each round acts on what the previous one achieved).
const MAX_ROUNDS: usize = 6;
/// GCE mutations in flight at once during a pass.
const GCE_CONCURRENCY: usize = 16;
/// The desired state kept between passes is read back from the store after this many passes anyway:
/// whatever went unnoticed cannot outlive a few minutes.
const RELOAD_EVERY_PASSES: u64 = 30;

/// Why a pass ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Trigger {
    Startup,
    Interval,
    Hook,
    Cli,
}

/// One GCE mutation a pass attempted.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub struct StepReport {
    pub step: String,
    pub target: String,
    pub ok: bool,
    pub error: Option<String>,
}

/// What one pass did: printed by `status` and `reconcile`, kept in the store as the last pass.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub struct PassReport {
    pub iteration: u64,
    pub trigger: Trigger,
    pub started_at: DateTime<Utc>,
    pub duration_ms: u64,
    /// `ok`, or `degraded` when something failed (the next pass retries it).
    pub outcome: String,
    pub hook_calls_ingested: usize,
    pub rounds: usize,
    pub requests_created: usize,
    pub gce_steps: Vec<StepReport>,
    pub slurm_commands: usize,
    pub events: usize,
    pub errors: Vec<String>,
    pub next_pass_in_secs: u64,
}

impl PassReport {
    /// A report of a pass that has done nothing yet.
    fn new(iteration: u64, trigger: Trigger, now: DateTime<Utc>, next_pass_in_secs: u64) -> PassReport {
        PassReport {
            iteration,
            trigger,
            started_at: now,
            duration_ms: 0,
            outcome: "ok".into(),
            hook_calls_ingested: 0,
            rounds: 0,
            requests_created: 0,
            gce_steps: Vec::new(),
            slurm_commands: 0,
            events: 0,
            errors: Vec::new(),
            next_pass_in_secs,
        }
    }

    /// A report nothing is recorded from (observations outside a pass).
    fn scratch(now: DateTime<Utc>) -> PassReport {
        PassReport::new(0, Trigger::Cli, now, 0)
    }
}

/// Runs passes. Owns the store handle and the clients of GCE and Slurm.
pub struct Reconciler {
    cfg: Arc<Config>,
    plan_cfg: PlanConfig,
    naming: Naming,
    store: Store,
    gce: gce::Client,
    slurm: Slurm,
    iteration: u64,
    /// The desired state as this process last committed it. The
    /// daemon is the only writer of nodes, requests, MIGs and backoffs (hooks write only the inbox and
    /// events; the state directory's lock keeps a second daemon out), so a pass does not read 10,000
    /// rows back: it starts from this. Dropped when a pass fails (the store is then the truth), read
    /// again every [`RELOAD_EVERY_PASSES`]; debug builds check it against the store after every pass.
    desired: Option<Desired>,
    /// The iteration at which `desired` was last read from the store.
    desired_loaded_at: u64,
}

impl Reconciler {
    pub async fn new(cfg: Config, store: Store) -> anyhow::Result<Reconciler> {
        let gce = gce_edge::client(&cfg)?;
        let slurm = Slurm::new(
            cfg.slurm.bin_dir.clone(),
            cfg.slurm.conf.clone(),
            std::time::Duration::from_secs(cfg.slurm.command_timeout),
        );
        let iteration = store.meta("iteration").await?.and_then(|s| s.parse().ok()).unwrap_or(0);
        Ok(Reconciler {
            plan_cfg: plan_config(&cfg),
            naming: Naming::new(&cfg),
            cfg: Arc::new(cfg),
            store,
            gce,
            slurm,
            iteration,
            desired: None,
            desired_loaded_at: 0,
        })
    }

    /// The GCE client (its call statistics feed the metrics).
    pub fn gce(&self) -> &gce::Client {
        &self.gce
    }

    /// One pass. Never fails: what went wrong is in the report, and the next pass tries again.
    pub async fn pass(&mut self, trigger: Trigger) -> PassReport {
        self.pass_with(trigger, None).await
    }

    /// A pass with GCE's and Slurm's answers given instead of fetched: everything else a pass does
    /// (`make bench` times a pass's planning and store work this way).
    pub async fn pass_observed(&mut self, trigger: Trigger, observed: Observed) -> PassReport {
        self.pass_with(trigger, Some(observed)).await
    }

    /// GCE's and Slurm's answers as a pass would fetch them now, or the first thing that failed.
    pub async fn observe_now(&mut self) -> anyhow::Result<Observed> {
        let desired = self.take_desired().await?;
        let mut scratch = PassReport::scratch(Utc::now());
        let observed = self.observe(&desired, &mut scratch).await;
        self.desired = Some(desired);
        match scratch.errors.first() {
            Some(e) => Err(anyhow::anyhow!("{e}")),
            None => Ok(observed),
        }
    }

    async fn pass_with(&mut self, trigger: Trigger, given: Option<Observed>) -> PassReport {
        let started = Instant::now();
        // Milliseconds, as the store keeps time: the state kept between passes equals what is stored.
        let now = Utc::now().trunc_subsecs(3);
        self.iteration += 1;
        let mut report = PassReport::new(self.iteration, trigger, now, self.cfg.reconcile.interval);
        match self.pass_inner(now, &mut report, given).await {
            Ok(desired) => {
                if cfg!(debug_assertions) {
                    self.check_kept_state(&desired).await;
                }
                self.desired = Some(desired);
            }
            Err(e) => report.errors.push(e.to_string()),
        }
        if !report.errors.is_empty() || report.gce_steps.iter().any(|s| !s.ok) {
            report.outcome = "degraded".into();
        }
        report.duration_ms = started.elapsed().as_millis() as u64;
        match serde_json::to_string(&report) {
            Ok(json) => {
                if let Err(e) = self.save_report(&json).await {
                    tracing::warn!(error = %e, "could not record the pass report");
                }
            }
            Err(e) => tracing::warn!(error = %e, "could not encode the pass report"),
        }
        tracing::info!(
            iteration = report.iteration,
            trigger = ?report.trigger,
            duration_ms = report.duration_ms,
            outcome = %report.outcome,
            ingested = report.hook_calls_ingested,
            requests_created = report.requests_created,
            gce_steps = report.gce_steps.len(),
            slurm_commands = report.slurm_commands,
            "reconcile pass"
        );
        for e in &report.errors {
            tracing::warn!(iteration = report.iteration, error = %e, "reconcile pass error");
        }
        report
    }

    async fn save_report(&self, json: &str) -> Result<(), StoreError> {
        let mut tx = self.store.begin().await?;
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
        let d = self.load_desired().await?;
        self.desired_loaded_at = self.iteration;
        Ok(d)
    }

    /// Debug builds: the state kept between passes must be exactly what the store holds, or a pass
    /// would plan from something that is not on record. Every test that runs the daemon checks this.
    async fn check_kept_state(&self, kept: &Desired) {
        let stored = match self.load_desired().await {
            Ok(d) => d,
            Err(e) => {
                tracing::warn!(error = %e, "could not read the desired state back to check it");
                return;
            }
        };
        if let Some(diff) = first_difference(kept, &stored) {
            panic!("the desired state kept in memory differs from the store: {diff}");
        }
    }

    async fn pass_inner(
        &mut self,
        now: DateTime<Utc>,
        report: &mut PassReport,
        given: Option<Observed>,
    ) -> anyhow::Result<Desired> {
        // 1. Ingest the hooks' inbox.
        let mut desired = self.take_desired().await?;
        let inbox = self.store.unprocessed_inbox().await?;
        if !inbox.is_empty() {
            let ing = ingest(&self.plan_cfg, &desired.nodes, &inbox, now);
            report.hook_calls_ingested = ing.processed.len();
            let mut tx = self.store.begin().await?;
            tx.upsert_nodes(&ing.nodes).await?;
            for e in &ing.events {
                tx.add_event(now, &e.kind, &e.nodes, &e.message).await?;
            }
            for (node, why) in &ing.not_ours {
                tx.add_event(
                    now,
                    "not_ours",
                    std::slice::from_ref(node),
                    &format!("{why}: set DOWN in Slurm"),
                )
                .await?;
            }
            tx.mark_inbox_processed(&ing.processed, now).await?;
            tx.prune_inbox(now - chrono::Duration::days(1)).await?;
            tx.commit().await?;
            report.events += ing.events.len() + ing.not_ours.len();
            for n in ing.nodes {
                desired.nodes.insert(n.name.clone(), n);
            }
            self.refuse_not_ours(&ing.not_ours, report).await;
        }

        // 2. Observe GCE and Slurm.
        let mut observed = match given {
            Some(o) => o,
            None => self.observe(&desired, report).await,
        };

        // 3. Plan and act, a few rounds.
        let mut attempted: HashSet<u64> = HashSet::new();
        let mut slurm_done: HashSet<u64> = HashSet::new();
        let mut outbox_used: HashSet<i64> = HashSet::new();
        for round in 0..MAX_ROUNDS {
            let mut p = plan(&self.plan_cfg, &desired, &observed, now);
            // The steps this pass has not done yet, taken from the plan (not copied).
            let fresh_gce: Vec<GceStep> = std::mem::take(&mut p.gce)
                .into_iter()
                .filter(|s| !attempted.contains(&step_key(s)))
                .collect();
            let fresh_slurm: Vec<SlurmStep> = std::mem::take(&mut p.slurm)
                .into_iter()
                .filter(|s| !slurm_done.contains(&step_key(s)))
                .collect();
            let writes = !(p.nodes.is_empty()
                && p.requests.is_empty()
                && p.migs.is_empty()
                && p.new_groups.is_empty()
                && p.adopted_requests.is_empty()
                && p.events.is_empty()
                && p.backoffs_set.is_empty()
                && p.backoffs_cleared.is_empty());
            if !writes && fresh_gce.is_empty() && fresh_slurm.is_empty() {
                break;
            }
            report.rounds = round + 1;
            report.events += p.events.len();
            report.requests_created += p.new_groups.len();
            let outbox = self.commit_plan(&mut p, &fresh_gce, &mut desired, now).await?;
            outbox_used.extend(outbox.iter().map(|e| e.id));
            for s in &fresh_gce {
                attempted.insert(step_key(s));
            }
            self.execute_gce(&fresh_gce, outbox, &mut desired, &mut observed, report, now).await?;
            for s in &fresh_slurm {
                slurm_done.insert(step_key(s));
            }
            self.execute_slurm(&fresh_slurm, report, now).await;
        }

        // 4. Resolve the outbox: an entry this pass neither sent nor resent (the daemon died between
        // writing it and learning how it went, and since then GCE moved to where the step would have
        // taken it, or the step was superseded) is abandoned with an event. Only when both lists
        // answered, so that nothing is concluded from a partial view; if the step is still needed the
        // planner plans it again, and every mutation is idempotent by name.
        if observed.vms.is_some() && observed.migs.is_some() {
            let stale: Vec<OutboxEntry> = self
                .store
                .pending_outbox()
                .await?
                .into_iter()
                .filter(|e| !outbox_used.contains(&e.id))
                .collect();
            if !stale.is_empty() {
                let mut tx = self.store.begin().await?;
                for e in &stale {
                    let why =
                        "no longer needed: GCE already shows the state it aimed at, or it was superseded";
                    tx.outbox_update(e.id, OutboxState::Abandoned, Some(why), now).await?;
                    tx.add_event(
                        now,
                        "outbox_abandoned",
                        &[],
                        &format!("{} {} (requestId {}): {why}", e.kind.as_str(), e.target, e.request_id),
                    )
                    .await?;
                }
                tx.commit().await?;
                report.events += stale.len();
            }
        }

        report.next_pass_in_secs = next_pass_in(&self.cfg, &desired, now);
        Ok(desired)
    }

    async fn load_desired(&self) -> Result<Desired, StoreError> {
        Ok(Desired {
            nodes: self.store.nodes().await?.into_iter().map(|n| (n.name.clone(), n)).collect(),
            requests: self.store.requests(true).await?.into_iter().map(|r| (r.id, r)).collect(),
            migs: self.store.migs(true).await?.into_iter().map(|m| (m.name.clone(), m)).collect(),
            backoffs: self.store.backoffs().await?.into_iter().map(|b| (b.nodeset.clone(), b)).collect(),
        })
    }

    async fn observe(&self, desired: &Desired, report: &mut PassReport) -> Observed {
        let mut o = Observed::default();
        let (vms, migs, nodes, reservations) = tokio::join!(
            gce_edge::observe_vms(&self.gce, &self.cfg),
            gce_edge::observe_migs(&self.gce, &self.cfg, &self.naming),
            self.slurm.nodes(),
            self.slurm.reservations(),
        );
        match vms {
            Ok(v) => o.vms = Some(v),
            Err(e) => report.errors.push(format!("listing VMs: {e}")),
        }
        match migs {
            Ok(m) => o.migs = Some(m),
            Err(e) => report.errors.push(format!("listing MIGs: {e}")),
        }
        match nodes {
            Ok(n) => {
                let ours = format!("{}-", self.cfg.cluster_name);
                o.slurm = Some(
                    n.into_iter()
                        .filter(|n| n.name.starts_with(&ours))
                        .map(|n| {
                            let s = SlurmNode {
                                state: n.state.to_lowercase(),
                                flags: n.flags.iter().collect(),
                                reason: n.reason.clone(),
                            };
                            (n.name, s)
                        })
                        .collect(),
                )
            }
            Err(e) => report.errors.push(format!("reading Slurm's nodes: {e}")),
        }
        match reservations {
            Ok(r) => {
                o.reservations =
                    Some(r.into_iter().map(|r| r.name).filter(|n| n.starts_with(plan::EOL_PREFIX)).collect())
            }
            Err(e) => report.errors.push(format!("reading Slurm's reservations: {e}")),
        }
        // One get per MIG whose request is not final; finished requests are never polled again.
        let active: Vec<&Request> =
            desired.requests.values().filter(|r| r.phase == RequestPhase::Active).collect();
        for r in active {
            match gce_edge::observe_request(&self.gce, &self.cfg, &r.mig, &r.name).await {
                Ok(rr) => {
                    o.requests.insert(r.mig.clone(), rr);
                }
                Err(e) => report.errors.push(format!("reading resize request {} in {}: {e}", r.name, r.mig)),
            }
        }
        // An owned MIG the store has no record of (database lost, backup controller): one get of its
        // request, so that a request still in flight is adopted and followed rather than its MIG
        // collected. Once adopted the MIG is on record and this is not asked again.
        let unrecorded: Vec<(String, String)> = o
            .migs
            .iter()
            .flat_map(|m| m.values())
            .filter(|m| !desired.migs.contains_key(&m.name))
            .map(|m| (m.name.clone(), crate::naming::resize_request_name(&m.tag)))
            .collect();
        for (mig, name) in unrecorded {
            match gce_edge::observe_request(&self.gce, &self.cfg, &mig, &name).await {
                Ok(rr) => {
                    o.requests.insert(mig, rr);
                }
                Err(e) => report.errors.push(format!("reading resize request {name} in {mig}: {e}")),
            }
        }
        // Time limits of the jobs whose nodes wait for a request: one squeue for all of them.
        let jobs: BTreeSet<u32> = desired
            .nodes
            .values()
            .filter(|n| n.state == NodeState::ResumePending)
            .filter_map(|n| n.job_id)
            .collect();
        if !jobs.is_empty() {
            let ids: Vec<u32> = jobs.iter().copied().collect();
            match self.slurm.jobs(&ids).await {
                Ok(infos) => {
                    for j in infos {
                        let limit = match j.time_limit {
                            slurm::TimeLimit::Minutes(m) => JobLimit::Minutes(m),
                            slurm::TimeLimit::Unlimited => JobLimit::Unlimited,
                            _ => JobLimit::Unknown,
                        };
                        o.job_limits.insert(j.job_id, limit);
                    }
                }
                Err(e) => report.errors.push(format!("reading job time limits: {e}")),
            }
        }
        o
    }

    /// Writes a plan's state changes, new request groups and outbox intents in one transaction, and
    /// moves the state changes into `desired` (the plan's records are taken, not copied).
    /// Returns the outbox entries of `steps`, in order.
    async fn commit_plan(
        &self,
        p: &mut Plan,
        steps: &[GceStep],
        desired: &mut Desired,
        now: DateTime<Utc>,
    ) -> anyhow::Result<Vec<OutboxEntry>> {
        let mut tx = self.store.begin().await?;
        tx.upsert_nodes(&p.nodes).await?;
        for r in &p.requests {
            tx.update_request(r).await?;
        }
        for m in &p.migs {
            tx.upsert_mig(m).await?;
        }
        for e in &p.events {
            tx.add_event(now, &e.kind, &e.nodes, &e.message).await?;
        }
        for b in &p.backoffs_set {
            tx.set_backoff(b).await?;
        }
        for ns in &p.backoffs_cleared {
            tx.clear_backoff(ns).await?;
        }
        for n in std::mem::take(&mut p.nodes) {
            match desired.nodes.get_mut(&n.name) {
                Some(slot) => *slot = n,
                None => {
                    desired.nodes.insert(n.name.clone(), n);
                }
            }
        }
        for r in std::mem::take(&mut p.requests) {
            if r.phase == RequestPhase::Done {
                desired.requests.remove(&r.id);
            } else {
                desired.requests.insert(r.id, r);
            }
        }
        for m in std::mem::take(&mut p.migs) {
            if m.state == MigState::Deleted {
                desired.migs.remove(&m.name);
            } else {
                desired.migs.insert(m.name.clone(), m);
            }
        }
        for b in &p.backoffs_set {
            desired.backoffs.insert(b.nodeset.clone(), b.clone());
        }
        for ns in &p.backoffs_cleared {
            desired.backoffs.remove(ns);
        }
        // New request groups: choose the tag now and persist it before anything is sent to GCE, so a
        // crash or a retry reuses the same MIG name instead of making a second MIG.
        for g in &p.new_groups {
            let tag = self.unused_tag(desired);
            let mig = self.naming.mig_name(&g.nodeset, g.job_id, &tag);
            let name = crate::naming::resize_request_name(&tag);
            let r = tx
                .insert_request(&g.nodeset, g.job_id, &tag, &mig, &name, &g.nodes, g.run_duration, now)
                .await?;
            let m = Mig {
                name: mig.clone(),
                nodeset: g.nodeset.clone(),
                region: self.cfg.gcp.region.clone(),
                target_size: 0,
                state: MigState::Creating,
                created_at: now,
                empty_since: None,
            };
            tx.upsert_mig(&m).await?;
            let mut members = Vec::new();
            for n in &g.nodes {
                if let Some(node) = desired.nodes.get_mut(n) {
                    node.state = NodeState::Requested;
                    node.state_since = now;
                    node.request_id = Some(r.id);
                    node.mig = Some(mig.clone());
                    node.job_id = g.job_id;
                    members.push(node.clone());
                }
            }
            tx.upsert_nodes(&members).await?;
            let job = g.job_id.map(|j| format!(" for job {j}")).unwrap_or_default();
            tx.add_event(
                now,
                "request_planned",
                &g.nodes,
                &format!(
                    "resize request {name} in new MIG {mig}{job}: {}, run duration {}s",
                    crate::model::count_of(g.nodes.len(), "node"),
                    g.run_duration
                ),
            )
            .await?;
            desired.migs.insert(mig, m);
            desired.requests.insert(r.id, r);
        }
        for a in &p.adopted_requests {
            let mut r = tx
                .insert_request(&a.nodeset, a.job_id, &a.tag, &a.mig, &a.name, &a.nodes, a.run_duration, now)
                .await?;
            r.phase = RequestPhase::Active;
            r.gce_state = Some(a.gce_state.clone());
            tx.update_request(&r).await?;
            let mut members = Vec::new();
            for n in &a.nodes {
                let node = match desired.nodes.get_mut(n) {
                    Some(node) => node,
                    None => {
                        let Some((nodeset, index, is_static)) = self.plan_cfg.node_ref(n) else { continue };
                        desired.nodes.insert(n.clone(), plan::new_node(n, &nodeset, index, is_static, now));
                        desired.nodes.get_mut(n).expect("just inserted")
                    }
                };
                node.state = NodeState::Requested;
                node.state_since = now;
                node.request_id = Some(r.id);
                node.mig = Some(a.mig.clone());
                node.job_id = a.job_id;
                members.push(node.clone());
            }
            tx.upsert_nodes(&members).await?;
            tx.add_event(
                now,
                "adopted",
                &a.nodes,
                &format!(
                    "resize request {} in MIG {} ({}, {} nodes) was in GCE but not on record: adopted and followed",
                    a.name,
                    a.mig,
                    a.gce_state,
                    a.nodes.len()
                ),
            )
            .await?;
            desired.requests.insert(r.id, r);
        }
        let mut entries = Vec::with_capacity(steps.len());
        for s in steps {
            let (kind, target, payload) = gce_edge::intent(s, desired, &self.cfg)?;
            entries.push(tx.outbox_intent(kind, &target, &payload, now).await?);
        }
        tx.commit().await?;
        Ok(entries)
    }

    fn unused_tag(&self, desired: &Desired) -> String {
        loop {
            let tag = crate::naming::new_tag(&mut rand::thread_rng());
            if !desired.requests.values().any(|r| r.tag == tag)
                && !desired.migs.keys().any(|m| m.ends_with(&tag))
            {
                return tag;
            }
        }
    }

    /// Sends the GCE mutations (a bounded number at once), then records how each went.
    async fn execute_gce(
        &self,
        steps: &[GceStep],
        outbox: Vec<OutboxEntry>,
        desired: &mut Desired,
        observed: &mut Observed,
        report: &mut PassReport,
        now: DateTime<Utc>,
    ) -> anyhow::Result<()> {
        if steps.is_empty() {
            return Ok(());
        }
        let sem = Arc::new(tokio::sync::Semaphore::new(GCE_CONCURRENCY));
        let mut set = tokio::task::JoinSet::new();
        for (i, (step, entry)) in steps.iter().cloned().zip(outbox).enumerate() {
            // A task is made only when it may run: a round of 1,000 steps never holds 1,000 futures.
            let permit = sem.clone().acquire_owned().await;
            let gce = self.gce.clone();
            let cfg = self.cfg.clone();
            let request = match &step {
                GceStep::InsertMig { request, .. }
                | GceStep::InsertResizeRequest { request, .. }
                | GceStep::CancelResizeRequest { request, .. } => desired.requests.get(request).cloned(),
                _ => None,
            };
            set.spawn(async move {
                let _permit = permit;
                let result = gce_edge::execute(&gce, &cfg, &step, request.as_ref(), &entry).await;
                (i, step, entry, result)
            });
        }
        let mut results = Vec::new();
        while let Some(joined) = set.join_next().await {
            match joined {
                Ok(r) => results.push(r),
                Err(e) => report.errors.push(format!("a GCE step panicked: {e}")),
            }
        }
        results.sort_by_key(|r| r.0);
        let mut tx = self.store.begin().await?;
        for (_, step, entry, result) in results {
            let (kind, target) = step_label(&step);
            match &result {
                StepResult::Done => {
                    tx.outbox_update(entry.id, OutboxState::Done, None, now).await?;
                    gce_edge::learn(&step, observed, desired);
                }
                StepResult::Moot(e) => {
                    tx.outbox_update(entry.id, OutboxState::Done, Some(e), now).await?;
                    if let GceStep::CancelResizeRequest { mig, .. } = &step {
                        observed.requests.remove(mig); // stale: decide after the next poll
                    }
                }
                StepResult::Retry(e) => {
                    tx.outbox_update(entry.id, OutboxState::Pending, Some(e), now).await?;
                    tracing::warn!(step = kind, target = %target, request_id = %entry.request_id, error = %e, "GCE step failed; the next pass retries it");
                }
                StepResult::Refused { error, capacity } => {
                    tx.outbox_update(entry.id, OutboxState::Abandoned, Some(error), now).await?;
                    tracing::warn!(step = kind, target = %target, request_id = %entry.request_id, error = %error, "GCE refused the step");
                    // A refused insert fails its request group through the usual path.
                    if let GceStep::InsertMig { request, mig, .. }
                    | GceStep::InsertResizeRequest { request, mig } = &step
                    {
                        if let Some(r) = desired.requests.get_mut(request) {
                            r.phase = RequestPhase::Active;
                            r.updated_at = now;
                            tx.update_request(r).await?;
                        }
                        let (code, message) =
                            error.split_once(": ").map_or(("ERROR".to_string(), error.clone()), |(c, m)| {
                                (c.to_string(), m.to_string())
                            });
                        observed.requests.insert(
                            mig.clone(),
                            ObservedRequest {
                                state: "FAILED".into(),
                                error: Some((code, message)),
                                capacity_error: *capacity,
                                ..Default::default()
                            },
                        );
                    } else {
                        tx.add_event(now, "gce_refused", &[], &format!("{kind} {target}: {error}")).await?;
                    }
                }
            }
            report.gce_steps.push(StepReport {
                step: kind.to_string(),
                target,
                ok: matches!(result, StepResult::Done | StepResult::Moot(_)),
                error: match result {
                    StepResult::Done | StepResult::Moot(_) => None,
                    StepResult::Retry(e) => Some(e),
                    StepResult::Refused { error, .. } => Some(error),
                },
            });
        }
        tx.commit().await?;
        Ok(())
    }

    /// Runs the Slurm commands of a round (each one batched over a hostlist), recording failures.
    async fn execute_slurm(&self, steps: &[SlurmStep], report: &mut PassReport, now: DateTime<Utc>) {
        for s in steps {
            report.slurm_commands += 1;
            let result = match s {
                SlurmStep::UpdateState { nodes, state, reason } => {
                    let hl = crate::hostlist::compress(nodes);
                    self.slurm
                        .update_nodes(
                            &hl,
                            &NodeUpdate {
                                state: Some(state),
                                reason: reason.as_deref(),
                                ..Default::default()
                            },
                        )
                        .await
                }
                SlurmStep::SetAddr { node, addr } => {
                    self.slurm
                        .update_nodes(
                            node,
                            &NodeUpdate {
                                node_addr: Some(addr),
                                node_hostname: Some(node),
                                ..Default::default()
                            },
                        )
                        .await
                }
                SlurmStep::CreateReservation { name, node, start, end } => {
                    self.slurm.create_reservation(name, node, *start, *end, "maint,ignore_jobs").await
                }
                SlurmStep::DeleteReservation { name } => {
                    self.slurm.delete_reservation(name).await.map(|_| ())
                }
                SlurmStep::SetJobsBegin { jobs, begin } => self.slurm.set_jobs_begin(jobs, *begin).await,
            };
            if let Err(e) = result {
                let msg = format!("Slurm {}: {e}", serde_json::to_string(s).unwrap_or_default());
                tracing::warn!(error = %e, "Slurm command failed; the next pass decides again");
                report.errors.push(msg.clone());
                if let Ok(mut tx) = self.store.begin().await {
                    let _ = tx.add_event(now, "slurm_error", &[], &msg).await;
                    let _ = tx.commit().await;
                }
            }
        }
    }

    /// Nodes a hook named that are not ours: DOWN in Slurm with the reason (one call per reason).
    async fn refuse_not_ours(&self, not_ours: &[(String, String)], report: &mut PassReport) {
        for (node, why) in not_ours {
            tracing::warn!(node = %node, reason = %why, "hook named a node slurm-dws does not manage");
            let reason = format!("{} not managed by slurm-dws: {why}", plan::REASON_PREFIX);
            if let Err(e) = self
                .slurm
                .update_nodes(
                    node,
                    &NodeUpdate { state: Some("down"), reason: Some(&reason), ..Default::default() },
                )
                .await
            {
                report.errors.push(format!("setting {node} DOWN: {e}"));
            }
            report.slurm_commands += 1;
        }
    }

    /// What a pass would delete and why (`gc --dry-run`), or do it now (`gc`).
    pub async fn gc(&mut self, dry_run: bool) -> serde_json::Value {
        let now = Utc::now();
        let desired = match self.take_desired().await {
            Ok(d) => d,
            Err(e) => return serde_json::json!({ "error": e.to_string() }),
        };
        let mut scratch = PassReport::scratch(now);
        let observed = self.observe(&desired, &mut scratch).await;
        let p = plan(&self.plan_cfg, &desired, &observed, now);
        self.desired = Some(desired);
        let deletions = gc_items(&p);
        if dry_run {
            return serde_json::json!({ "dry_run": true, "would_delete": deletions, "errors": scratch.errors });
        }
        let report = self.pass(Trigger::Cli).await;
        serde_json::json!({ "dry_run": false, "deleted": deletions, "pass": report })
    }
}

/// The deletions in a plan, each with its reason, for `gc`.
pub fn gc_items(p: &Plan) -> Vec<serde_json::Value> {
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
                vec![serde_json::json!({"kind": "mig", "name": mig, "reason": reason})]
            }
            GceStep::DeleteInstances { mig, instances } => instances
                .iter()
                .map(|i| serde_json::json!({"kind": "vm", "name": i, "mig": mig, "reason": reason_for(i)}))
                .collect(),
            _ => vec![],
        })
        .collect()
}

/// A step's identity within a pass: a 64-bit hash of its JSON form, to skip what a pass already did.
/// (10,000 steps kept as JSON strings were megabytes of a pass's peak memory; two different steps
/// colliding — about 1 in 10^11 at that size — would only postpone one of them to the next pass.)
fn step_key(s: &impl Serialize) -> u64 {
    use std::hash::Hasher;
    struct Hashing<'a>(&'a mut std::collections::hash_map::DefaultHasher);
    impl std::io::Write for Hashing<'_> {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.write(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut h = std::collections::hash_map::DefaultHasher::new();
    let _ = serde_json::to_writer(Hashing(&mut h), s);
    h.finish()
}

fn step_label(s: &GceStep) -> (&'static str, String) {
    match s {
        GceStep::InsertMig { mig, .. } => ("insert_mig", mig.clone()),
        GceStep::InsertResizeRequest { mig, .. } => ("insert_resize_request", mig.clone()),
        GceStep::CancelResizeRequest { mig, .. } => ("cancel_resize_request", mig.clone()),
        GceStep::DeleteInstances { mig, instances } => {
            ("delete_instances", format!("{mig}: {}", crate::hostlist::compress(instances)))
        }
        GceStep::DeleteMig { mig, .. } => ("delete_mig", mig.clone()),
    }
}

/// When the next pass should run: soon while requests are young or work is in flight, else `interval`.
pub fn next_pass_in(cfg: &Config, d: &Desired, now: DateTime<Utc>) -> u64 {
    let interval = cfg.reconcile.interval.max(1);
    let young = d.requests.values().any(|r| {
        matches!(r.phase, RequestPhase::Planned | RequestPhase::MigReady | RequestPhase::Active)
            && (now - r.created_at).num_seconds() < 120
    });
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

/// The planner's view of the configuration.
pub fn plan_config(cfg: &Config) -> PlanConfig {
    PlanConfig {
        cluster_name: cfg.cluster_name.clone(),
        region: cfg.gcp.region.clone(),
        orphan_grace: cfg.reconcile.orphan_grace as i64,
        mig_gc_grace: cfg.reconcile.mig_gc_grace as i64,
        backoff_initial: cfg.reconcile.backoff_initial as i64,
        backoff_max: cfg.reconcile.backoff_max as i64,
        internal_ip: cfg.slurm.node_addr == crate::config::NodeAddr::InternalIp,
        nodesets: cfg
            .nodesets
            .iter()
            .map(|n| {
                (
                    n.name.clone(),
                    NodesetPlan {
                        name: n.name.clone(),
                        node_count_static: n.node_count_static,
                        node_count_dynamic_max: n.node_count_dynamic_max,
                        max_run_duration: n.dws_flex.max_run_duration,
                        use_job_duration: n.dws_flex.use_job_duration,
                        boot_allowance: n.dws_flex.boot_allowance,
                        queue_timeout: n.dws_flex.queue_timeout,
                        eol_grace: n.dws_flex.eol_grace,
                    },
                )
            })
            .collect::<BTreeMap<_, _>>(),
    }
}

/// The first entry where two desired states differ, described; `None` when they are equal.
fn first_difference(a: &Desired, b: &Desired) -> Option<String> {
    fn diff<K: Ord + std::fmt::Debug, V: PartialEq + std::fmt::Debug>(
        what: &str,
        a: &BTreeMap<K, V>,
        b: &BTreeMap<K, V>,
    ) -> Option<String> {
        let keys: BTreeSet<&K> = a.keys().chain(b.keys()).collect();
        keys.into_iter().find_map(|k| match (a.get(k), b.get(k)) {
            (x, y) if x == y => None,
            (x, y) => Some(format!("{what} {k:?}: kept {x:?}, stored {y:?}")),
        })
    }
    diff("node", &a.nodes, &b.nodes)
        .or_else(|| diff("request", &a.requests, &b.requests))
        .or_else(|| diff("MIG", &a.migs, &b.migs))
        .or_else(|| diff("backoff", &a.backoffs, &b.backoffs))
}
