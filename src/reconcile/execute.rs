//! Execute: a round's GCE steps are sent (a bounded number at once) and each answer is judged —
//! Done, Retry, Refused or Moot — and recorded; a round's Slurm steps are run, each batched over a
//! hostlist.
//!
//! Judging is a pure function of the step and the typed error ([`judge`], at the GCE edge), and so is what a judged
//! step changes ([`settle`]): the outbox entry, the kept state (a refused insert fails its group
//! through the usual path), what the next round may assume, and the pass report's line.

use super::commit::{self, ChangeSet};
use super::error::ReconcileError;
use super::gce_edge::inflight::{Answer, CallKey, InFlight, STEP_WAIT};
use super::gce_edge::step_retry::{FailureMap, MAX_STEP_ATTEMPTS};
use super::gce_edge::{self, judge, StepResult};
use super::report::{PassReport, StepReport};
use super::slurm_edge;
use super::types::*;
use crate::config::Config;
use crate::gce::{self, PolicyFailure};
use crate::model::*;
use crate::naming::{Naming, NotOurs};
use crate::slurm::Slurm;
use crate::store::Store;
use chrono::{DateTime, Utc};
use std::sync::Arc;

/// GCE mutations in flight at once during a pass.
const GCE_CONCURRENCY: usize = 16;
/// What a step may take beyond its budget (`gce_edge::step_budget`) before it is cut.
const STEP_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// How one judged step is recorded.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Settled {
    /// The outbox entry's new state, and the error to keep with it.
    pub outbox: (OutboxState, Option<String>),
    /// What the step changes in the desired state (a refused insert: its group goes on to fail).
    pub changes: ChangeSet,
    pub report: StepReport,
}

/// What a judged step means: for the outbox, for the desired state and the next round's
/// observations (`observed`), and for the pass report.
pub(super) fn settle(
    step: &GceStep,
    result: &StepResult,
    desired: &Desired,
    observed: &mut Observed,
    now: DateTime<Utc>,
) -> Settled {
    let target = step_target(step);
    let report = StepReport {
        step: step.kind(),
        target: target.clone(),
        ok: result.ok(),
        error: match result {
            StepResult::Carried(e) => Some(e.clone()),
            _ if result.ok() => None,
            _ => result.error(),
        },
    };
    let mut changes = ChangeSet::default();
    if let GceStep::ReportHostAsFaulty { node, vm, behavior, .. } = step {
        host_report_answer(node, &vm.name, *behavior, result, desired, &mut changes, now);
    }
    let outbox = match result {
        StepResult::Done => {
            learn(step, observed, desired);
            // A request made is followed from now on (polled), as the planner would make it in its
            // next round: recorded here, it holds even when no round follows (an answer taken
            // from the background at shutdown), and a restart does not send the insert again.
            if let GceStep::InsertResizeRequest { request, .. } | GceStep::CreateInstances { request, .. } =
                step
            {
                if let Some(r) = desired.requests.get(request).filter(|r| r.phase == RequestPhase::MigReady) {
                    let mut r = r.clone();
                    r.phase = RequestPhase::Active;
                    r.updated_at = now;
                    changes.requests.push(r);
                }
            }
            (OutboxState::Done, None)
        }
        StepResult::Moot(e) => {
            if let GceStep::CancelResizeRequest { mig, .. } | GceStep::CreateInstances { mig, .. } = step {
                observed.requests.remove(mig); // stale: decide after the next poll
            }
            (OutboxState::Done, Some(e.clone()))
        }
        StepResult::Retry(e) | StepResult::Carried(e) => (OutboxState::Pending, Some(e.clone())),
        // The executor records the event: it knows the requestId and how many attempts failed.
        StepResult::Failed { .. } => (OutboxState::Failed, result.error()),
        StepResult::Refused { code, message, .. } => {
            let error = result.error().unwrap_or_default();
            // A refused insert fails its request group through the usual path: the next round sees
            // the request FAILED with GCE's code.
            if let GceStep::ReportHostAsFaulty { .. } = step {
                // Said by `host_report_answer`: the repair failed with GCE's words.
            } else if let GceStep::InsertMig { request, mig, .. }
            | GceStep::InsertResizeRequest { request, mig }
            | GceStep::CreateInstances { request, mig } = step
            {
                if let Some(r) = desired.requests.get(request) {
                    let mut r = r.clone();
                    r.phase = RequestPhase::Active;
                    r.updated_at = now;
                    changes.requests.push(r);
                }
                let code = code.clone().unwrap_or_else(|| "ERROR".into());
                observed.requests.insert(
                    mig.clone(),
                    PolledRequest::Found(ObservedRequest {
                        error: Some((code, message.clone())),
                        capacity_error: result.is_capacity(),
                        ..ObservedRequest::in_state(GceRequestState::Failed)
                    }),
                );
            } else {
                changes.events.push(NewEvent {
                    kind: EventKind::GceRefused,
                    nodes: vec![],
                    message: format!("{} {target}: {error}", step.kind()),
                });
            }
            (OutboxState::Abandoned, Some(error))
        }
    };
    Settled { outbox, changes, report }
}

/// A host report GCE finished or refused: the node's repair records it, with an event.
fn host_report_answer(
    node: &str,
    vm: &str,
    behavior: FaultBehavior,
    result: &StepResult,
    desired: &Desired,
    changes: &mut ChangeSet,
    now: DateTime<Utc>,
) {
    let Some(mut r) = desired.repairs.get(node).filter(|r| r.phase == RepairPhase::Reporting).cloned() else {
        return;
    };
    let message = match result {
        StepResult::Done => {
            r.outcome = Some(format!(
                "{} ({behavior}): VM {vm} restarted on another host",
                super::plan::HOST_REPORTED
            ));
            format!(
                "GCE reported the host of VM {vm} faulty ({behavior}) and restarted the VM on another host"
            )
        }
        StepResult::Refused { .. } => {
            let words = result.error().unwrap_or_default();
            r.phase = RepairPhase::Failed;
            r.outcome = Some(format!("GCE refused the host report: {words}"));
            format!("GCE refused to report the host of VM {vm} faulty: {words}; the node stays drained")
        }
        _ => return, // carried or retried: the next answer says
    };
    r.updated_at = now;
    changes.repairs.push(r);
    changes.events.push(NewEvent {
        kind: EventKind::HostReportedFaulty,
        nodes: vec![node.to_string()],
        message,
    });
}

/// What a finished step tells the next planning round (the list would show it next pass).
pub(super) fn learn(step: &GceStep, observed: &mut Observed, desired: &Desired) {
    match step {
        GceStep::ReportHostAsFaulty { .. } => {}
        GceStep::InsertMig { request, mig, nodeset } => {
            if let Some(m) = observed.migs.as_mut() {
                let r = desired.requests.get(request);
                m.insert(
                    mig.clone(),
                    ObservedMig {
                        name: mig.clone(),
                        nodeset: nodeset.clone(),
                        tag: r.map(|r| r.tag.clone()).unwrap_or_default(),
                        job_id: r.and_then(|r| r.job_id),
                        target_size: 0,
                        created: None,
                        workload_policy: None,
                    },
                );
            }
        }
        GceStep::InsertResizeRequest { mig, .. } | GceStep::CreateInstances { mig, .. } => {
            observed
                .requests
                .insert(mig.clone(), ObservedRequest::in_state(GceRequestState::Creating).into());
        }
        GceStep::CancelResizeRequest { mig, .. } => {
            if let Some(PolledRequest::Found(rr)) = observed.requests.get_mut(mig) {
                if !matches!(rr.state, GceRequestState::Succeeded | GceRequestState::Failed) {
                    rr.state = GceRequestState::Cancelled;
                }
            }
        }
        GceStep::DeleteInstances { instances, .. } => {
            if let Some(vms) = observed.vms.as_mut() {
                for i in instances {
                    vms.remove(&i.name);
                }
            }
            observed.deleting.extend(instances.iter().map(|i| i.name.clone()));
        }
        GceStep::InsertPolicy { policy, nodeset, region } => {
            if let Some(p) = observed.policies.as_mut() {
                let region = region.clone();
                p.insert(
                    policy.clone(),
                    ObservedPolicy { name: policy.clone(), nodeset: nodeset.clone(), region },
                );
            }
        }
        GceStep::DeletePolicy { policy, .. } => {
            if let Some(p) = observed.policies.as_mut() {
                p.remove(policy);
            }
        }
        GceStep::DeleteMig { mig, .. } => {
            if let Some(m) = observed.migs.as_mut() {
                m.remove(mig);
            }
            if let Some(vms) = observed.vms.as_mut() {
                let deleting = &mut observed.deleting;
                vms.retain(|name, v| {
                    let kept = v.mig.as_deref() != Some(mig.as_str());
                    if !kept {
                        deleting.insert(name.clone());
                    }
                    kept
                });
            }
        }
    }
}

/// The event of a step whose attempt number `failed` (counted since it last succeeded) failed:
/// `gce_step_failed` with GCE's code and message and the requestId used, or `gce_step_gave_up` at
/// [`MAX_STEP_ATTEMPTS`].
fn failed_event(
    step: &GceStep,
    target: &str,
    result: &StepResult,
    entry: &OutboxEntry,
    failed: u32,
) -> NewEvent {
    let error = result.error().unwrap_or_default();
    let nodes = match step {
        GceStep::DeleteInstances { instances, .. } => instances.iter().map(|i| i.name.clone()).collect(),
        _ => vec![],
    };
    if let (GceStep::DeletePolicy { .. }, Some(PolicyFailure::InUse)) =
        (step, PolicyFailure::of_recorded(&error))
    {
        return NewEvent {
            kind: EventKind::PolicyInUse,
            nodes,
            message: format!(
                "{} {target}: {error} (requestId {}, attempt {failed}); waits for the MIG that uses it to go, then tries again after a backoff",
                step.kind(),
                entry.request_id
            ),
        };
    }
    if failed >= MAX_STEP_ATTEMPTS {
        NewEvent {
            kind: EventKind::GceStepGaveUp,
            nodes,
            message: format!(
                "{} {target}: {error} (requestId {}); failed {failed} times in a row: not sent again until the daemon restarts or reloads",
                step.kind(),
                entry.request_id
            ),
        }
    } else {
        NewEvent {
            kind: EventKind::GceStepFailed,
            nodes,
            message: format!(
                "{} {target}: {error} (requestId {}, attempt {failed} of {MAX_STEP_ATTEMPTS}); the next attempt uses a new requestId after a backoff",
                step.kind(),
                entry.request_id
            ),
        }
    }
}

/// What a step is about, for the pass report and the log.
fn step_target(s: &GceStep) -> String {
    match s {
        GceStep::DeleteInstances { mig, instances } => {
            format!(
                "{mig}: {}",
                crate::hostlist::compress(&instances.iter().map(|i| i.name.as_str()).collect::<Vec<_>>())
            )
        }
        _ => s.mig().to_string(),
    }
}

/// What executing a round needs.
pub(super) struct Executor<'a> {
    pub cfg: &'a Arc<Config>,
    pub naming: &'a Naming,
    pub store: &'a Store,
    pub gce: &'a gce::Client,
    pub slurm: &'a Slurm,
    /// Each GCE step's failed attempts as the pass began (`step_retry`).
    pub failures: &'a FailureMap,
}

impl Executor<'_> {
    /// Sends the GCE steps of a round (at most [`GCE_CONCURRENCY`] waited for at once) with their
    /// outbox entries, waits for each up to [`STEP_WAIT`], then records how those that answered went
    /// in one transaction. A step that has not answered by then goes on in the background, in
    /// `in_flight` (its outbox entry stays pending): a later pass records its answer
    /// ([`Executor::record`]).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn gce_steps(
        &self,
        steps: &[GceStep],
        outbox: Vec<OutboxEntry>,
        in_flight: &mut InFlight,
        desired: &mut Desired,
        observed: &mut Observed,
        report: &mut PassReport,
        now: DateTime<Utc>,
    ) -> Result<(), ReconcileError> {
        if steps.is_empty() {
            return Ok(());
        }
        // A permit is held while the pass waits for a step, not while the step is in flight: calls
        // that hang never keep the others from being sent.
        let sem = Arc::new(tokio::sync::Semaphore::new(GCE_CONCURRENCY));
        let cfg = Arc::new(self.cfg.clone());
        let naming = Arc::new(self.naming.clone());
        let notify = in_flight.notifier();
        let mut sending = Vec::with_capacity(steps.len());
        for (step, entry) in steps.iter().cloned().zip(outbox) {
            let permit = sem.clone().acquire_owned().await;
            let gce = self.gce.clone();
            let (cfg, naming, notify) = (cfg.clone(), naming.clone(), notify.clone());
            let request = step.request().and_then(|id| desired.requests.get(&id)).cloned();
            let region = gce_edge::step_region(&cfg, desired, &step);
            let (left, left_rx) = tokio::sync::oneshot::channel::<()>();
            let (task_step, task_entry) = (step.clone(), entry.clone());
            let sent = tokio::time::Instant::now();
            let handle = tokio::spawn(async move {
                // Belt and braces: whatever waits inside (the rate limiter, a token), a step ends
                // within its budget and a little.
                let budget = gce_edge::step_budget(&cfg);
                let call = async {
                    let sent = gce_edge::send(
                        &gce,
                        &cfg,
                        &naming,
                        &task_step,
                        request.as_ref(),
                        &region,
                        &task_entry,
                    );
                    match tokio::time::timeout(budget + STEP_GRACE, sent).await {
                        Ok(Ok(())) => StepResult::Done,
                        Ok(Err(e)) => judge(&task_step, &e),
                        Err(_) => StepResult::Retry(format!(
                            "no answer within gcp.request_timeout ({} s): the next pass resends it",
                            budget.as_secs()
                        )),
                    }
                };
                tokio::pin!(call);
                tokio::select! {
                    result = &mut call => result,
                    _ = tokio::time::sleep(STEP_WAIT) => {
                        // The pass goes on without it; the daemon is woken when it answers.
                        drop(permit);
                        let _ = left.send(());
                        let result = call.await;
                        notify.notify_one();
                        result
                    }
                }
            });
            sending.push((step, entry, sent, handle, left_rx));
        }
        let mut results = Vec::with_capacity(sending.len());
        for (step, entry, sent, mut handle, mut left_rx) in sending {
            let joined = tokio::select! {
                biased;
                joined = &mut handle => Some(joined),
                left = &mut left_rx => match left {
                    Ok(()) => None,
                    Err(_) => Some((&mut handle).await), // it answered: the sender went with the task
                },
            };
            match joined {
                Some(Ok(result)) => results.push(Answer { step, entry, result }),
                Some(Err(e)) => report.errors.push(format!("a GCE step panicked: {e}")),
                None => {
                    let target = step_target(&step);
                    tracing::warn!(step = %step.kind(), target = %target, request_id = %entry.request_id, wait_secs = STEP_WAIT.as_secs(), "GCE step has not answered: left in flight; a later pass takes its answer");
                    report.gce_steps.push(StepReport {
                        step: step.kind(),
                        target,
                        ok: true,
                        error: Some(format!(
                            "no answer within {} s: in flight in the background (requestId {}); a later pass takes its answer",
                            STEP_WAIT.as_secs(),
                            entry.request_id
                        )),
                    });
                    let key = CallKey {
                        kind: entry.kind,
                        target: entry.target.clone(),
                        mig: step.mig().to_string(),
                    };
                    in_flight.keep(key, step, entry, sent, handle);
                }
            }
        }
        self.record(results, desired, observed, report, now).await
    }

    /// Records how answered steps went — this round's, or calls in flight that answered since an
    /// earlier pass — in one transaction: their outbox entries, the changes they make, the events
    /// of failures, the pass report's lines.
    pub(super) async fn record(
        &self,
        answers: Vec<Answer>,
        desired: &mut Desired,
        observed: &mut Observed,
        report: &mut PassReport,
        now: DateTime<Utc>,
    ) -> Result<(), ReconcileError> {
        if answers.is_empty() {
            return Ok(());
        }
        let mut tx = self.store.begin().await?;
        let mut changes = ChangeSet::default();
        for Answer { step, entry, result } in answers {
            let mut settled = settle(&step, &result, desired, observed, now);
            if matches!(result, StepResult::Failed { .. }) {
                let failed =
                    self.failures.get(&(entry.kind, entry.target.clone())).map_or(0, |f| f.failed) + 1;
                settled.changes.events.push(failed_event(
                    &step,
                    &settled.report.target,
                    &result,
                    &entry,
                    failed,
                ));
            }
            let (state, error) = &settled.outbox;
            match &result {
                StepResult::Retry(e) => {
                    tracing::warn!(step = %step.kind(), target = %settled.report.target, request_id = %entry.request_id, error = %e, "GCE step failed; the next pass retries it")
                }
                StepResult::Failed { .. } => {
                    tracing::warn!(step = %step.kind(), target = %settled.report.target, request_id = %entry.request_id, error = %error.as_deref().unwrap_or_default(), "GCE step failed; its next attempt gets a new requestId after a backoff")
                }
                StepResult::Refused { .. } => {
                    tracing::warn!(step = %step.kind(), target = %settled.report.target, request_id = %entry.request_id, error = %error.as_deref().unwrap_or_default(), "GCE refused the step")
                }
                StepResult::Carried(e) => {
                    tracing::info!(step = %step.kind(), target = %settled.report.target, request_id = %entry.request_id, note = %e, "GCE step under way; the next pass carries on")
                }
                StepResult::Done | StepResult::Moot(_) => {}
            }
            tx.outbox_update(entry.id, *state, error.as_deref(), now).await?;
            changes.merge(settled.changes);
            report.gce_steps.push(settled.report);
        }
        commit::commit(&mut tx, changes, desired, now).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Runs the Slurm commands of a round (each one batched over a hostlist), recording failures.
    pub(super) async fn slurm_steps(
        &self,
        steps: &[SlurmStep],
        report: &mut PassReport,
        desired: &mut Desired,
        now: DateTime<Utc>,
    ) {
        for s in steps {
            report.slurm_commands += 1;
            let result = slurm_edge::run(self.slurm, s).await;
            if let Err(e) = result {
                let msg = format!("Slurm {}: {e}", serde_json::to_string(s).unwrap_or_default());
                tracing::warn!(error = %e, "Slurm command failed; the next pass decides again");
                report.errors.push(msg.clone());
                let event = NewEvent { kind: EventKind::SlurmError, nodes: vec![], message: msg };
                if let Ok(mut tx) = self.store.begin().await {
                    if commit::commit(&mut tx, ChangeSet::events(vec![event]), desired, now).await.is_ok() {
                        let _ = tx.commit().await;
                    }
                }
            }
        }
    }

    /// Nodes a hook named that are not ours: DOWN in Slurm with the reason.
    pub(super) async fn refuse_not_ours(&self, not_ours: &[NotOurs], report: &mut PassReport) {
        let (errors, commands) = slurm_edge::node_updates::refuse_not_ours(self.slurm, not_ours).await;
        report.errors.extend(errors);
        report.slurm_commands += commands;
    }
}

#[cfg(test)]
#[path = "execute_tests.rs"]
mod tests;
