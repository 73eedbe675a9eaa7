//! A pass's rounds, on one observation: ingest the hook calls, record the answers of calls in
//! flight, then up to [`MAX_ROUNDS`](super::MAX_ROUNDS) rounds of plan (pure) + commit (one
//! transaction with the outbox intents) + execute (GCE, then Slurm), and close the outbox entries
//! nobody needs. A round acts on what the one before achieved; no step is sent twice in a pass.

use super::{Reconciler, MAX_ROUNDS};
use crate::model::EventKind;
use crate::reconcile::commit::{self, RoundContext};
use crate::reconcile::error::ReconcileError;
use crate::reconcile::gce_edge::inflight::{self, CallKey};
use crate::reconcile::gce_edge::{self, step_retry};
use crate::reconcile::ingest::ingest;
use crate::reconcile::observe::Observation;
use crate::reconcile::plan::plan;
use crate::reconcile::report::{next_pass_in, PassPhases, PassReport};
use crate::reconcile::slurm_edge;
use crate::reconcile::types::*;
use serde::Serialize;
use std::collections::HashSet;

impl Reconciler {
    /// Plans, commits and executes on `observation`; returns the desired state and observation as
    /// the pass left them, and whether failed GCE steps wait for a retry.
    pub(super) async fn plan_commit_execute(
        &mut self,
        observation: Observation,
        report: &mut PassReport,
    ) -> Result<(Desired, Observed, bool), ReconcileError> {
        let Observation { started_at: now, inbox, mut observed, errors, polls, .. } = observation;
        report.errors.extend(errors);
        report.unreachable_zones = observed.unreachable_zones.iter().cloned().collect();
        report.refused_nodesets = observed.refused_nodesets.clone();
        report.reserved = observed.capacity.clone();
        report.requests_polled = polls.polled;
        report.requests_carried = polls.carried;
        let mut desired = self.take_desired().await?;
        let failures = step_retry::failure_map(self.clients.store.step_failures().await?);
        let exec = self.clients.executor(&failures);

        // Ingest the hooks' calls.
        let mut timer = PhaseTimer::default();
        if !inbox.is_empty() {
            let t = tokio::time::Instant::now();
            let mut ing = ingest(&self.clients.plan_cfg, &desired.nodes, &inbox, now);
            timer.plan += t.elapsed();
            report.hook_calls_ingested = ing.processed.len();
            report.events += ing.events.len() + ing.not_ours.len();
            let t = tokio::time::Instant::now();
            commit::commit_ingest(&self.clients.store, &mut ing, &mut desired, now).await?;
            timer.commit += t.elapsed();
            let t = tokio::time::Instant::now();
            exec.refuse_not_ours(&ing.not_ours, report).await;
            timer.act += t.elapsed();
        }

        // The answers of calls in flight that arrived since the last pass: recorded before planning,
        // as if their pass had waited for them.
        let answers = self.in_flight.take_answered().await;
        if !answers.is_empty() {
            let t = tokio::time::Instant::now();
            for a in &answers {
                self.polls.forget(a.step.mig()); // what was sent about a MIG is read back next pass
            }
            exec.record(answers, &mut desired, &mut observed, report, now).await?;
            timer.commit += t.elapsed();
        }

        // Plan, commit and execute, a few rounds.
        let ctx = RoundContext { cfg: &self.clients.cfg, plan_cfg: &self.clients.plan_cfg };
        let mut attempted: HashSet<u64> = HashSet::new();
        let mut slurm_done: HashSet<u64> = HashSet::new();
        let mut outbox_used: HashSet<i64> = HashSet::new();
        let mut told: HashSet<u64> = HashSet::new();
        for round in 0..MAX_ROUNDS {
            let t = tokio::time::Instant::now();
            let mut p = plan(&self.clients.plan_cfg, &desired, &observed, now);
            timer.plan += t.elapsed();
            // A later round plans on the same Slurm observation (a Slurm step it already ran is
            // skipped, not re-observed): an event it would repeat word for word was told already.
            p.events.retain(|e| told.insert(event_key(e)));
            // The steps this pass has not done yet, taken from the plan (not copied), and of them the
            // ones that failed recently wait for their backoff, or were given up on.
            let mut fresh_gce: Vec<GceStep> = std::mem::take(&mut p.gce)
                .into_iter()
                .filter(|s| !attempted.contains(&step_key(s)))
                .collect();
            let flying = self.in_flight.keys();
            fresh_gce.retain(|s| {
                let Ok((kind, target, _)) = gce_edge::intent(s, &desired, &self.clients.cfg, &self.clients.plan_cfg.naming)
                else {
                    return true; // the commit reports it
                };
                let key = CallKey { kind, target, mig: s.mig().to_string() };
                if let Some(c) = inflight::held_back(&key, &flying) {
                    tracing::debug!(step = %s.kind(), target = %key.target, in_flight = %c.target, "a GCE step waits for a call in flight");
                    attempted.insert(step_key(s)); // decided for this pass
                    return false;
                }
                let CallKey { kind, target, .. } = key;
                let f = failures.get(&(kind, target));
                let (interval, max) = (self.clients.cfg.reconcile.interval as i64, self.clients.cfg.reconcile.backoff_max as i64);
                let gate = step_retry::gate(f, interval, max, now);
                if gate != step_retry::Gate::Send {
                    attempted.insert(step_key(s)); // decided for this pass
                }
                match gate {
                    step_retry::Gate::Send => true,
                    step_retry::Gate::Wait(until) => {
                        tracing::debug!(step = %s.kind(), until = %until, "a failed GCE step waits for its backoff");
                        false
                    }
                    step_retry::Gate::GaveUp => {
                        if let Some(f) = f {
                            report.errors.push(format!(
                                "gave up on {} {} after {} failed attempts (last: {}); a restart or reload retries it",
                                s.kind(),
                                f.target,
                                f.failed,
                                f.last_error
                            ));
                        }
                        false
                    }
                }
            });
            let fresh_slurm: Vec<SlurmStep> = std::mem::take(&mut p.slurm)
                .into_iter()
                .filter(|s| !slurm_done.contains(&step_key(s)))
                .collect();
            if p.is_empty() && fresh_gce.is_empty() && fresh_slurm.is_empty() {
                break;
            }
            report.rounds = round + 1;
            report.events += p.events.len();
            report.preempted += p
                .events
                .iter()
                .filter(|e| e.kind == EventKind::Preempted)
                .map(|e| e.nodes.len())
                .sum::<usize>();
            report.requests_created += p.new_groups.len();
            for e in &p.events {
                match e.kind {
                    EventKind::NodesetUnschedulable => report.fallbacks += 1,
                    EventKind::Released => report.released_nodes += e.nodes.len(),
                    _ => {}
                }
            }
            // Capacity advice decides a new MIG's zone(s) before its insert is written.
            let t = tokio::time::Instant::now();
            gce_edge::advice::advise_zones(
                &mut self.advisor,
                &self.clients.gce,
                &self.clients.cfg,
                &fresh_gce,
                &mut p,
                &desired,
                now,
            )
            .await;
            timer.act += t.elapsed();
            let t = tokio::time::Instant::now();
            let outbox =
                commit::commit_round(&self.clients.store, &ctx, &mut p, &fresh_gce, &mut desired, now)
                    .await?;
            observed.repair_asks.clear(); // taken: the next rounds plan from the repairs they made
            timer.commit += t.elapsed();
            let t = tokio::time::Instant::now();
            outbox_used.extend(outbox.iter().map(|e| e.id));
            attempted.extend(fresh_gce.iter().map(step_key));
            for s in &fresh_gce {
                self.polls.forget(s.mig()); // what was sent about a MIG is read back next pass
            }
            exec.gce_steps(&fresh_gce, outbox, &mut self.in_flight, &mut desired, &mut observed, report, now)
                .await?;
            slurm_done.extend(fresh_slurm.iter().map(step_key));
            exec.slurm_steps(&fresh_slurm, report, &mut desired, now).await;
            for s in &fresh_slurm {
                slurm_edge::reservations::learn(s, &mut observed);
            }
            timer.act += t.elapsed();
        }

        // Close the outbox entries this pass neither sent nor resent (a call in flight is being sent),
        // only when both GCE lists answered in full.
        outbox_used.extend(self.in_flight.entry_ids());
        // Not on an earlier pass's lists either: a step they leave unplanned may still be in flight.
        if observed.vms.is_some()
            && observed.unreachable_zones.is_empty()
            && observed.migs.is_some()
            && !observed.reused
            && !observed.migs_reused
            && observed.unlisted_regions.is_empty()
        {
            let t = tokio::time::Instant::now();
            report.events +=
                commit::abandon_unused_outbox(&self.clients.store, &outbox_used, &mut desired, now).await?;
            timer.commit += t.elapsed();
        }
        report.phases.plan_ms += PassPhases::ms(timer.plan);
        report.phases.commit_ms += PassPhases::ms(timer.commit);
        report.phases.act_ms += PassPhases::ms(timer.act);

        report.next_pass_in_secs = next_pass_in(self.clients.cfg.reconcile.interval, &desired, now);
        report.in_flight = self.in_flight.report(tokio::time::Instant::now());
        Ok((desired, observed, !failures.is_empty()))
    }
}

/// The time a pass's second half spent planning, committing and acting.
#[derive(Default)]
struct PhaseTimer {
    plan: std::time::Duration,
    commit: std::time::Duration,
    act: std::time::Duration,
}

/// An event's identity within a pass: a 64-bit hash of its kind, nodes and message.
fn event_key(e: &NewEvent) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (e.kind.as_str(), &e.nodes, &e.message).hash(&mut h);
    h.finish()
}

/// A step's identity within a pass: a 64-bit hash of its JSON form, to skip what a pass already did.
/// A hash, not the JSON itself, because 10,000 steps kept as strings would be megabytes of a pass's
/// peak memory; two different steps colliding (about 1 in 10^11 at that size) would only postpone one
/// of them to the next pass.
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
