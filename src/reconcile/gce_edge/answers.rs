//! What GCE's answer means for a step: Done, Retry, Refused, Moot, Failed or Carried
//! ([`StepResult`]), judged from the step and the typed error alone ([`judge`], pure). The pass
//! records what a judged step changes (`execute.rs`); a call in flight keeps its result here too.

use super::sends::SendError;
use crate::gce::{ErrorClass, GceError, PolicyFailure};
use crate::reconcile::types::GceStep;

/// How one step went.
#[derive(Debug, Clone, PartialEq)]
pub enum StepResult {
    /// GCE did it (its Operation is DONE without error, or the effect already existed).
    Done,
    /// Not done, for a reason that may pass (rate limit, timeout, transient error): the next pass resends
    /// the same requestId.
    Retry(String),
    /// Refused for good. `code` is GCE's (e.g. `ZONE_RESOURCE_POOL_EXHAUSTED`) when it gave one.
    Refused { code: Option<String>, message: String, class: ErrorClass },
    /// Nothing left to do, but nothing learned either (cancel of a request that is final already: the
    /// next poll says how it ended).
    Moot(String),
    /// GCE acted and failed (an Operation DONE with an error, or a 4xx that may pass): the same
    /// requestId would only return the same failure, so the outbox entry is closed and the step's
    /// next attempt, after a backoff, gets a new one (`step_retry`).
    Failed { code: Option<String>, message: String },
    /// Under way, nothing wrong: its Operation is still running, or GCE asked the daemon to slow down
    /// (rate limit). Not waited for: the outbox entry stays pending with its requestId and the next
    /// pass carries on (resends it, or finds the result in its lists).
    Carried(String),
}

impl StepResult {
    /// Done, nothing left to do, or under way: nothing went wrong.
    pub fn ok(&self) -> bool {
        matches!(self, StepResult::Done | StepResult::Moot(_) | StepResult::Carried(_))
    }

    /// A stockout or an exhausted quota: the nodeset backs off.
    pub fn is_capacity(&self) -> bool {
        matches!(self, StepResult::Refused { class: ErrorClass::Capacity | ErrorClass::Quota, .. })
    }

    /// What went wrong, as the event log, the outbox and the node reason say it: `CODE: message` for
    /// a refusal with a code.
    pub fn error(&self) -> Option<String> {
        match self {
            StepResult::Done => None,
            StepResult::Moot(e) | StepResult::Retry(e) | StepResult::Carried(e) => Some(e.clone()),
            StepResult::Refused { code: Some(code), message, .. } => Some(format!("{code}: {message}")),
            StepResult::Refused { code: None, message, .. } | StepResult::Failed { code: None, message } => {
                Some(message.clone())
            }
            StepResult::Failed { code: Some(code), message } => Some(format!("{code}: {message}")),
        }
    }
}

/// Decides what an answer means for a step.
pub fn judge(step: &GceStep, e: &SendError) -> StepResult {
    let e = match e {
        SendError::RequestVanished => {
            return StepResult::Refused { code: None, message: e.to_string(), class: ErrorClass::Invalid }
        }
        SendError::Config(c) => {
            return StepResult::Refused {
                code: Some("CONFIG".into()),
                message: c.to_string(),
                class: ErrorClass::Invalid,
            }
        }
        SendError::Mismatch(m) => {
            return StepResult::Refused {
                code: Some("ALREADY_EXISTS_MISMATCH".into()),
                message: m.clone(),
                class: ErrorClass::AlreadyExists,
            }
        }
        SendError::Gce(e) => e,
    };
    if let GceError::OperationTimeout(op) = e {
        return StepResult::Carried(format!(
            "operation {} still {:?} after gcp.request_timeout: carried to the next pass",
            op.name, op.status
        ));
    }
    if e.is_rate_limit() {
        return StepResult::Carried(format!("GCE's rate limit, slowing down: {e}"));
    }
    let class = e.class();
    let refused = || StepResult::Refused { code: gce_code(e), message: e.to_string(), class };
    // A workload policy GCE refuses anyway (`gce::PolicyFailure`): typed, never retried at once.
    match (step, e.policy_failure()) {
        // The MIG's request group fails with the failure's code; the planner backs the nodeset off.
        (GceStep::InsertMig { .. }, Some(f @ (PolicyFailure::Missing | PolicyFailure::WrongRegion))) => {
            return StepResult::Refused { code: Some(f.code().into()), message: e.to_string(), class };
        }
        // A MIG still uses it: the delete waits (its step backoff, never given up: `step_retry`).
        (GceStep::DeletePolicy { .. }, Some(f @ PolicyFailure::InUse)) => {
            return StepResult::Failed { code: Some(f.code().into()), message: e.to_string() };
        }
        _ => {}
    }
    match (step, class) {
        // `send` compares what exists under our name with what was meant (Done or Mismatch): a 409
        // that reaches here could not be compared. The next pass tries again.
        (GceStep::InsertMig { .. } | GceStep::InsertResizeRequest { .. }, ErrorClass::AlreadyExists) => {
            StepResult::Retry(format!("{e}; what exists could not be read to compare"))
        }
        // The thing to remove is gone already.
        (GceStep::InsertPolicy { .. }, ErrorClass::AlreadyExists) => {
            StepResult::Retry(format!("{e}; what exists could not be read to compare"))
        }
        (
            GceStep::DeleteMig { .. } | GceStep::DeleteInstances { .. } | GceStep::DeletePolicy { .. },
            ErrorClass::NotFound,
        ) => StepResult::Done,
        // Some of the names exist already (an earlier attempt made them): the next poll of the MIG's
        // managed instances says which, and the planner goes on from there.
        (GceStep::CreateInstances { .. }, ErrorClass::AlreadyExists) => StepResult::Moot(e.to_string()),
        // Cancel of a request that is final already: nothing left to cancel; the next poll says how it ended.
        (GceStep::CancelResizeRequest { .. }, ErrorClass::ConditionNotMet | ErrorClass::NotFound) => {
            StepResult::Moot(e.to_string())
        }
        (_, ErrorClass::Capacity | ErrorClass::Quota) => refused(),
        // GCE will not take the report (not a reservation-bound VM, not running, one under way):
        // the repair fails with GCE's words.
        (
            GceStep::ReportHostAsFaulty { .. },
            ErrorClass::Invalid | ErrorClass::NotFound | ErrorClass::ConditionNotMet,
        ) => refused(),
        (
            GceStep::InsertMig { .. } | GceStep::InsertResizeRequest { .. } | GceStep::CreateInstances { .. },
            ErrorClass::Invalid | ErrorClass::NotFound,
        ) => refused(),
        // Not acted on, or maybe still running: the same requestId again.
        _ if e.reuses_request_id() => StepResult::Retry(e.to_string()),
        _ => StepResult::Failed { code: gce_code(e), message: e.to_string() },
    }
}

/// GCE's code for an error, when it gave one (an HTTP answer's most telling reason, an Operation's
/// first error).
fn gce_code(e: &GceError) -> Option<String> {
    let code = match e {
        GceError::Api(a) => Some(a.headline_code().to_string()),
        GceError::Operation(o) => o.operation.errors().first().map(|x| x.code.clone()),
        _ => None,
    };
    code.filter(|c| !c.is_empty())
}
