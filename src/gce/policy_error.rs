//! `PolicyFailure`: a failure GCE gives for a workload policy although `check-config --online`
//! passed the nodeset — the policy is missing, in use, or in another region than the MIG.
//!
//! `check-config` judges the machine family and provisioning model; these three depend on GCE's
//! state at the moment of the call, so only the call can tell. Each has its own answer in the
//! reconciler, never an immediate retry (docs/gce-facts.md, "Workload policies"; docs/incidents.md):
//! - `Missing` / `WrongRegion` at a MIG insert: the request group fails with the failure's code and
//!   the nodeset backs off with a placement backoff (`plan/requests.rs`), event `policy_refused`.
//! - `InUse` at a policy delete: the delete waits (the step's backoff, never given up on) until
//!   the MIG that holds the policy is gone, event `policy_in_use`.
//!
//! The shapes, as GCE answers them (and `gce-sim` does): a MIG insert naming a policy that does not
//! exist, 404 `notFound` "The resource 'projects/P/regions/R/resourcePolicies/N' was not found"; one
//! in another region, 400 `invalid` "Invalid value for field
//! 'resource.resourcePolicies.workloadPolicy': '…'. The workload policy must be in the same region as
//! the instance group manager (R)."; a delete of a policy a MIG uses, 400
//! `resourceInUseByAnotherResource` "The resource_policy resource '…' is already being used by '…'"
//! (or an Operation ending DONE with `RESOURCE_IN_USE_BY_ANOTHER_RESOURCE`).

use super::error::{classify_code, normalize_code, ErrorClass, GceError};

pub use crate::model::PolicyFailure;

/// Whether a message names a resource policy (GCE words it `resourcePolicies/NAME`,
/// `resource_policy resource`, or the MIG's `resourcePolicies.workloadPolicy` field).
fn names_policy(message: &str) -> bool {
    message.contains("resourcePolicies")
        || message.contains("resource_policy")
        || message.contains("workloadPolicy")
}

/// A message without its quoted parts (`'projects/P/regions/R/...'`): what it says, not what it names.
fn unquoted(message: &str) -> String {
    message.split('\'').step_by(2).collect()
}

/// Classifies one (code or reason, message) of an answer.
fn classify_one(class: ErrorClass, code: &str, message: &str) -> Option<PolicyFailure> {
    if !names_policy(message) {
        return None;
    }
    if normalize_code(code) == "RESOURCE_IN_USE_BY_ANOTHER_RESOURCE" {
        return Some(PolicyFailure::InUse);
    }
    match class {
        ErrorClass::NotFound => Some(PolicyFailure::Missing),
        ErrorClass::Invalid if unquoted(message).contains("region") => Some(PolicyFailure::WrongRegion),
        _ => None,
    }
}

impl GceError {
    /// The workload-policy failure this error is, if it is one (see the module's notes). Only an
    /// answer that names a resource policy counts: a MIG insert's 404 for a missing template is not
    /// one.
    pub fn policy_failure(&self) -> Option<PolicyFailure> {
        match self {
            GceError::Api(a) => {
                let class = a.class();
                std::iter::once((a.status.as_str(), a.message.as_str()))
                    .chain(a.errors.iter().map(|e| (e.reason.as_str(), e.message.as_str())))
                    .find_map(|(code, msg)| classify_one(class, code, msg))
            }
            GceError::Operation(o) => o.operation.errors().iter().find_map(|e| {
                let class = classify_code(&e.code).unwrap_or(ErrorClass::Other);
                classify_one(class, &e.code, &e.message)
            }),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gce::error::{ApiError, OperationFailed};
    use crate::gce::types::{Operation, OperationErrorItem, OperationErrorList};
    use serde_json::json;

    fn api(method: &str, status: u16, reason: &str, message: &str) -> GceError {
        let http = match status {
            404 => "NOT_FOUND",
            400 => "INVALID_ARGUMENT",
            _ => "",
        };
        let body = json!({"error": {"code": status, "message": message, "status": http,
            "errors": [{"reason": reason, "domain": "global", "message": message}]}});
        GceError::Api(Box::new(ApiError::from_response(
            method,
            "POST",
            "projects/p/regions/us-central1/instanceGroupManagers",
            status,
            body.to_string().as_bytes(),
            None,
        )))
    }

    fn op(code: &str, message: &str) -> GceError {
        GceError::Operation(Box::new(OperationFailed {
            operation: Operation {
                error: Some(OperationErrorList {
                    errors: vec![OperationErrorItem {
                        code: code.into(),
                        message: message.into(),
                        ..Default::default()
                    }],
                }),
                ..Default::default()
            },
        }))
    }

    const P: &str = "projects/p/regions/us-central1/resourcePolicies/hpc-gpu-wp";

    #[test]
    fn policy_failures_are_told_apart() {
        use PolicyFailure::*;
        let insert = "regionInstanceGroupManagers.insert";
        let table: Vec<(GceError, Option<PolicyFailure>)> = vec![
            // A MIG naming a policy that does not exist.
            (api(insert, 404, "notFound", &format!("The resource '{P}' was not found")), Some(Missing)),
            // A MIG naming a policy of another region.
            (
                api(
                    insert,
                    400,
                    "invalid",
                    &format!("Invalid value for field 'resource.resourcePolicies.workloadPolicy': '{P}'. The workload policy must be in the same region as the instance group manager (europe-west4)."),
                ),
                Some(WrongRegion),
            ),
            // A delete of a policy a MIG uses: the HTTP answer, and an Operation's.
            (
                api(
                    "resourcePolicies.delete",
                    400,
                    "resourceInUseByAnotherResource",
                    &format!("The resource_policy resource '{P}' is already being used by 'projects/p/regions/us-central1/instanceGroupManagers/m'"),
                ),
                Some(InUse),
            ),
            (op("RESOURCE_IN_USE_BY_ANOTHER_RESOURCE", &format!("The resource_policy resource '{P}' is already being used by 'm'")), Some(InUse)),
            // Not about a policy: a missing template, another MIG in use, a bad field, a stockout.
            (
                api(insert, 404, "notFound", "The resource 'projects/p/global/instanceTemplates/t' was not found"),
                None,
            ),
            (
                api(
                    "instanceTemplates.delete",
                    400,
                    "resourceInUseByAnotherResource",
                    "The instance_template resource 't' is already being used by 'm'",
                ),
                None,
            ),
            (api(insert, 400, "invalid", "Invalid value for field 'resource.targetSize': '-1'."), None),
            (
                api(insert, 400, "invalid", &format!("Invalid value for field 'resource.resourcePolicies.workloadPolicy': '{P}'.")),
                None,
            ),
            (op("ZONE_RESOURCE_POOL_EXHAUSTED", "The zone 'z' does not have enough resources"), None),
            (GceError::Auth("no token".into()), None),
        ];
        for (e, want) in table {
            assert_eq!(e.policy_failure(), want, "{e}");
            // The client never repeats a call GCE refused for a policy: the reconciler decides.
            if want.is_some() {
                assert!(!e.is_retryable(), "{e}");
            }
        }
    }

    #[test]
    fn recorded_codes_come_back() {
        for f in PolicyFailure::ALL {
            assert_eq!(PolicyFailure::of_recorded(&format!("{}: the message", f.code())), Some(f));
            assert_eq!(PolicyFailure::of_recorded(f.code()), Some(f));
        }
        assert_eq!(PolicyFailure::of_recorded("notFound: The resource 'x' was not found"), None);
        assert_eq!(PolicyFailure::of_recorded(""), None);
    }
}
