//! When a GCE step that failed may be sent again: a pure function of its recent failures and `now`.
//!
//! A step's `requestId` is reused only while the call may not have been acted on (no answer, 429,
//! 5xx, an Operation still running at the deadline: [`GceError::reuses_request_id`](crate::gce::GceError::reuses_request_id)).
//! When GCE acted and the Operation ended DONE with an error (or refused the call with a 4xx that is
//! neither a rate limit nor a final refusal), sending the same `requestId` again only returns the
//! same failed Operation (docs/gce-facts.md, "Operations and idempotency"): the outbox entry is
//! closed as `failed`, and the next attempt gets a new `requestId`, after a backoff of
//! `reconcile.interval × 2^(failures−1)`, at most `reconcile.backoff_max`. After
//! [`MAX_STEP_ATTEMPTS`] consecutive failures of the same step, slurm-dws gives up on it: the pass is
//! degraded and says so (`status`, `explain`, `slurm_dws_gce_steps_given_up`) until a restart or a
//! reload gives it a fresh start, or the step succeeds another way. One exception: the delete of a
//! workload policy a MIG still uses (`WORKLOAD_POLICY_IN_USE`) waits with the same backoff for as
//! long as it takes, and is never given up on.

use crate::gce::PolicyFailure;
use crate::model::MutationKind;
pub use crate::model::StepFailures;
use chrono::{DateTime, Duration, Utc};
use std::collections::BTreeMap;

/// Consecutive failed attempts after which a step is not sent again.
pub const MAX_STEP_ATTEMPTS: u32 = 5;

/// Each step's failures, by (kind, target) as the outbox names it.
pub type FailureMap = BTreeMap<(MutationKind, String), StepFailures>;

/// The store's list of failures, keyed.
pub fn failure_map(list: Vec<StepFailures>) -> FailureMap {
    list.into_iter().map(|f| ((f.kind, f.target.clone()), f)).collect()
}

/// Whether a step may be sent now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    Send,
    /// Failed recently: the next attempt (with a new requestId) waits until then.
    Wait(DateTime<Utc>),
    /// Failed [`MAX_STEP_ATTEMPTS`] times in a row: not sent again.
    GaveUp,
}

/// How long after its `failed`-th consecutive failure a step waits: `interval × 2^(failed−1)`, at most
/// `max` (and at least one second).
pub fn step_backoff(failed: u32, interval: i64, max: i64) -> Duration {
    let secs = interval.max(1).saturating_mul(1i64 << failed.saturating_sub(1).min(20)).min(max.max(1));
    Duration::seconds(secs)
}

/// Decides whether a step with these failures may be sent at `now`.
pub fn gate(f: Option<&StepFailures>, interval: i64, max: i64, now: DateTime<Utc>) -> Gate {
    let Some(f) = f.filter(|f| f.failed > 0) else { return Gate::Send };
    // A policy delete refused because a MIG uses it waits for that MIG, however long: it is
    // never given up on (the backoff stops growing at `max`).
    let waits_for_a_mig = f.kind == MutationKind::PolicyDelete
        && PolicyFailure::of_recorded(&f.last_error) == Some(PolicyFailure::InUse);
    if f.failed >= MAX_STEP_ATTEMPTS && !waits_for_a_mig {
        return Gate::GaveUp;
    }
    let until = f.last_at + step_backoff(f.failed, interval, max);
    if until > now {
        Gate::Wait(until)
    } else {
        Gate::Send
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn failed_steps_wait_longer_each_time_then_give_up() {
        let t0 = Utc.with_ymd_and_hms(2026, 11, 24, 12, 0, 0).unwrap();
        let f = |failed| StepFailures {
            kind: MutationKind::MigDelete,
            target: "m".into(),
            failed,
            last_at: t0,
            last_error: "E: m".into(),
        };
        assert_eq!(gate(None, 30, 1800, t0), Gate::Send);
        // (failures, seconds after the last one, expected)
        let table = [
            (1, 0, Gate::Wait(t0 + Duration::seconds(30))),
            (1, 30, Gate::Send),
            (2, 59, Gate::Wait(t0 + Duration::seconds(60))),
            (3, 119, Gate::Wait(t0 + Duration::seconds(120))),
            (4, 240, Gate::Send),
            (MAX_STEP_ATTEMPTS, 86_400, Gate::GaveUp),
        ];
        for (failed, after, want) in table {
            assert_eq!(
                gate(Some(&f(failed)), 30, 1800, t0 + Duration::seconds(after)),
                want,
                "{failed} {after}"
            );
        }
        // capped at backoff_max
        assert_eq!(step_backoff(4, 30, 100), Duration::seconds(100));
        assert_eq!(step_backoff(30, 30, 100), Duration::seconds(100));
    }

    #[test]
    fn a_policy_in_use_is_waited_for_never_given_up() {
        let t0 = Utc.with_ymd_and_hms(2026, 11, 24, 12, 0, 0).unwrap();
        let f = |kind, failed, last_error: &str| StepFailures {
            kind,
            target: "hpc-gpu-wp".into(),
            failed,
            last_at: t0,
            last_error: last_error.into(),
        };
        let in_use =
            "WORKLOAD_POLICY_IN_USE: resourcePolicies.delete: 400 RESOURCE_IN_USE_BY_ANOTHER_RESOURCE: ...";
        // (kind, failures, error, seconds after the last one, expected)
        let table = [
            (MutationKind::PolicyDelete, 1, in_use, 0, Gate::Wait(t0 + Duration::seconds(30))),
            (
                MutationKind::PolicyDelete,
                MAX_STEP_ATTEMPTS,
                in_use,
                0,
                Gate::Wait(t0 + Duration::seconds(480)),
            ),
            (MutationKind::PolicyDelete, 12, in_use, 1799, Gate::Wait(t0 + Duration::seconds(1800))),
            (MutationKind::PolicyDelete, 12, in_use, 1800, Gate::Send),
            // Any other failure of the delete, or that code on another step: given up as usual.
            (MutationKind::PolicyDelete, MAX_STEP_ATTEMPTS, "invalid: x", 86_400, Gate::GaveUp),
            (MutationKind::MigDelete, MAX_STEP_ATTEMPTS, in_use, 86_400, Gate::GaveUp),
        ];
        for (kind, failed, error, after, want) in table {
            assert_eq!(
                gate(Some(&f(kind, failed, error)), 30, 1800, t0 + Duration::seconds(after)),
                want,
                "{kind:?} {failed} {error} {after}"
            );
        }
    }
}
