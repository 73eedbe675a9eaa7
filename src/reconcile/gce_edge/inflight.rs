//! Calls in flight across passes: a GCE step that has not answered within [`STEP_WAIT`] goes on in
//! the background, the pass ends without it, and the first pass after its answer arrives records it.
//!
//! A step is sent with its outbox entry (its `requestId`) written first, so a call in flight is
//! always on record. While it is in flight no pass sends it again, nor anything it would race on
//! the same MIG ([`held_back`], pure and table-tested); its answer — Done, Failed, Refused, or the
//! call's own budget (`gcp.request_timeout`) run out — is judged as if the pass had waited, only
//! later (`execute.rs`). The daemon is woken when an answer arrives ([`InFlight::notifier`]).
//! Dropping the set (a reload builds a new reconciler, shutdown past its grace) aborts the calls:
//! their outbox entries stay pending and the next pass re-sends them with the same `requestId`,
//! which GCE answers with the original Operation.

use super::answers::StepResult;
use crate::model::{MutationKind, OutboxEntry};
use crate::reconcile::types::{GceStep, GceStepKind};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// How long a pass waits for a GCE step (its call and its Operation) before it leaves the step in
/// flight and goes on. GCE answers a call in well under a second and most Operations of our calls
/// end within a second or two, so a step that answers normally is still judged in its own pass (a
/// later round builds on it: the MIG made, its resize request sent); a step that does not costs
/// the pass that sent it this long once, and no pass after it anything. Short beside
/// `reconcile.interval` (≥ 1 s, 30 s by default): a hook's resume waits at most this, plus a pass.
pub const STEP_WAIT: Duration = Duration::from_secs(2);

/// A step's identity for [`held_back`]: its outbox kind and target (what makes two steps the same
/// call), and the MIG it acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallKey {
    pub kind: MutationKind,
    pub target: String,
    pub mig: String,
}

/// The call in flight that keeps a planned step from being sent this pass, if any: the same call
/// (its answer is awaited, not asked for twice), or a call on the same MIG when either makes or
/// deletes that MIG (what the MIG is is unknown until that answers; the other would race it).
pub fn held_back<'a>(step: &CallKey, in_flight: &'a [CallKey]) -> Option<&'a CallKey> {
    let makes_or_deletes = |k: &MutationKind| matches!(k, MutationKind::MigInsert | MutationKind::MigDelete);
    in_flight.iter().find(|c| {
        (c.kind == step.kind && c.target == step.target)
            || (c.mig == step.mig && (makes_or_deletes(&c.kind) || makes_or_deletes(&step.kind)))
    })
}

/// A call in flight, as the pass report, `status` and the metrics show it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct InFlightCall {
    pub step: GceStepKind,
    /// The MIG (or `mig/request`, `mig:hostlist`) it is about, as the outbox names it.
    pub target: String,
    pub request_id: String,
    /// How long it has been waiting for GCE's answer, in seconds, when the report was made.
    pub age_secs: u64,
}

/// A call's answer, taken from the background.
pub(in crate::reconcile) struct Answer {
    pub step: GceStep,
    pub entry: OutboxEntry,
    pub result: StepResult,
}

struct Call {
    key: CallKey,
    step: GceStep,
    entry: OutboxEntry,
    sent: Instant,
    handle: JoinHandle<StepResult>,
}

/// The GCE steps in flight across passes, owned by the `Reconciler`.
#[derive(Default)]
pub struct InFlight {
    calls: Vec<Call>,
    answered: Arc<Notify>,
}

impl InFlight {
    /// Notified each time a call in flight answers (the daemon runs a pass to record it).
    pub fn notifier(&self) -> Arc<Notify> {
        self.answered.clone()
    }

    pub fn len(&self) -> usize {
        self.calls.len()
    }

    pub fn is_empty(&self) -> bool {
        self.calls.is_empty()
    }

    /// Takes over a step still running after [`STEP_WAIT`]; `handle` ends with its result.
    pub(in crate::reconcile) fn keep(
        &mut self,
        key: CallKey,
        step: GceStep,
        entry: OutboxEntry,
        sent: Instant,
        handle: JoinHandle<StepResult>,
    ) {
        self.calls.push(Call { key, step, entry, sent, handle });
    }

    /// What [`held_back`] compares a planned step with.
    pub(in crate::reconcile) fn keys(&self) -> Vec<CallKey> {
        self.calls.iter().map(|c| c.key.clone()).collect()
    }

    /// The outbox entries of the calls in flight (not abandoned: they are being sent).
    pub(in crate::reconcile) fn entry_ids(&self) -> impl Iterator<Item = i64> + '_ {
        self.calls.iter().map(|c| c.entry.id)
    }

    /// The calls that have answered since they went in flight, out of the set.
    pub(in crate::reconcile) async fn take_answered(&mut self) -> Vec<Answer> {
        let (done, running): (Vec<Call>, Vec<Call>) =
            std::mem::take(&mut self.calls).into_iter().partition(|c| c.handle.is_finished());
        self.calls = running;
        let mut answers = Vec::with_capacity(done.len());
        for c in done {
            answers.push(answer(c).await);
        }
        answers
    }

    /// Waits until every call has answered or `until`, whichever is first (shutdown's drain): the
    /// answers, and the calls still running, aborted (their outbox entries stay pending).
    pub(in crate::reconcile) async fn drain(&mut self, until: Instant) -> (Vec<Answer>, Vec<InFlightCall>) {
        let mut answers = Vec::new();
        let mut abandoned = Vec::new();
        let now = Instant::now();
        for mut c in std::mem::take(&mut self.calls) {
            match tokio::time::timeout_at(until, &mut c.handle).await {
                Ok(joined) => {
                    answers.push(Answer { result: joined_result(joined), step: c.step, entry: c.entry })
                }
                Err(_) => {
                    c.handle.abort();
                    abandoned.push(describe(&c, now));
                }
            }
        }
        (answers, abandoned)
    }

    /// The calls in flight, oldest first, with their age at `now`.
    pub fn report(&self, now: Instant) -> Vec<InFlightCall> {
        let mut calls: Vec<InFlightCall> = self.calls.iter().map(|c| describe(c, now)).collect();
        calls.sort_by_key(|c| std::cmp::Reverse(c.age_secs));
        calls
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        for c in &self.calls {
            c.handle.abort();
        }
    }
}

fn describe(c: &Call, now: Instant) -> InFlightCall {
    InFlightCall {
        step: c.step.kind(),
        target: c.key.target.clone(),
        request_id: c.entry.request_id.clone(),
        age_secs: now.saturating_duration_since(c.sent).as_secs(),
    }
}

async fn answer(c: Call) -> Answer {
    let joined = c.handle.await;
    Answer { result: joined_result(joined), step: c.step, entry: c.entry }
}

fn joined_result(joined: Result<StepResult, tokio::task::JoinError>) -> StepResult {
    joined.unwrap_or_else(|e| StepResult::Retry(format!("the call in flight ended without an answer: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(kind: MutationKind, target: &str, mig: &str) -> CallKey {
        CallKey { kind, target: target.into(), mig: mig.into() }
    }

    #[test]
    fn what_is_in_flight_holds_back_the_same_call_and_whatever_would_race_a_mig_made_or_deleted() {
        use MutationKind::*;
        let rr = |mig: &str| key(ResizeRequestInsert, &format!("{mig}/r1"), mig);
        let mig_insert = |mig: &str| key(MigInsert, mig, mig);
        let mig_delete = |mig: &str| key(MigDelete, mig, mig);
        let del = |mig: &str, nodes: &str| key(DeleteInstances, &format!("{mig}:{nodes}"), mig);
        let cancel = |mig: &str| key(ResizeRequestCancel, &format!("{mig}/r1"), mig);
        // (in flight, planned, held back?)
        let table: Vec<(Vec<CallKey>, CallKey, bool)> = vec![
            (vec![], rr("a"), false),
            // the same call: its answer is awaited
            (vec![rr("a")], rr("a"), true),
            (vec![mig_insert("a")], mig_insert("a"), true),
            (vec![del("a", "x-[1-2]")], del("a", "x-[1-2]"), true),
            // another nodeset's MIG: never held
            (vec![rr("a")], rr("b"), false),
            (vec![mig_insert("a")], mig_insert("b"), false),
            (vec![mig_delete("a")], rr("b"), false),
            // the same MIG, neither makes nor deletes it: sent
            (vec![rr("a")], cancel("a"), false),
            (vec![del("a", "x-1")], del("a", "x-2"), false),
            // the MIG being made or deleted: nothing else on it until that answers
            (vec![mig_insert("a")], rr("a"), true),
            (vec![mig_delete("a")], del("a", "x-1"), true),
            (vec![mig_delete("a")], mig_insert("a"), true),
            // nor is the MIG deleted under a call on it
            (vec![rr("a")], mig_delete("a"), true),
            (vec![del("a", "x-1")], mig_delete("a"), true),
        ];
        for (flying, planned, held) in table {
            assert_eq!(
                held_back(&planned, &flying).is_some(),
                held,
                "in flight {flying:?}, planned {planned:?}"
            );
        }
    }
}
