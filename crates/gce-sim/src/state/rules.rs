//! The control API's capacity and fault rules, and the errors a capacity failure produces.

use super::*;
use serde::{Deserialize, Serialize};

/// A capacity rule of the control API (`POST /_sim/capacity`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CapacityRule {
    /// MIG name prefix; "" matches every MIG.
    #[serde(rename = "match", default)]
    pub prefix: String,
    /// Real seconds a resize request stays ACCEPTED before capacity (or the failure) arrives.
    #[serde(default)]
    pub delay_seconds: f64,
    /// Make the request FAILED (after the delay) with this error.
    #[serde(default)]
    pub fail: Option<CapacityFailure>,
    /// Keep the request ACCEPTED until the rule is replaced or cleared.
    #[serde(default)]
    pub hold: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CapacityFailure {
    pub code: String,
    #[serde(default)]
    pub message: String,
    /// `errorDetails[]` as GCE sends them (`errorInfo`, `quotaInfo`, `help`, `localizedMessage`);
    /// absent: a `quotaInfo` for `QUOTA_EXCEEDED`, none otherwise.
    #[serde(default, rename = "errorDetails", skip_serializing_if = "Option::is_none")]
    pub error_details: Option<Value>,
}

/// The `{errors:[{code, message, errorDetails}]}` a capacity failure puts in a resize request's status.
pub fn capacity_error(f: &CapacityFailure) -> Value {
    let message =
        if f.message.is_empty() { format!("Resize request failed: {}", f.code) } else { f.message.clone() };
    let mut e = status_error(&f.code, &message);
    let details = f.error_details.clone().or_else(|| {
        (f.code == "QUOTA_EXCEEDED").then(|| {
            json!([{"quotaInfo": {"metricName": "compute.googleapis.com/preemptible_nvidia_h200_gpus",
                                  "limitName": "PREEMPTIBLE-NVIDIA-H200-GPUS-per-project-region",
                                  "dimensions": {"region": "us-central1"}, "limit": 8.0}}])
        })
    });
    if let Some(d) = details {
        e["errors"][0]["errorDetails"] = d;
    }
    e
}

/// An HTTP fault injection rule of the control API (`POST /_sim/faults`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FaultRule {
    /// A method id such as `regionInstanceGroupManagers.insert`, or `*` for every API call.
    #[serde(default = "any_method")]
    pub method: String,
    /// HTTP status to answer with; 200 means "no error" (only `delay_ms` applies).
    pub status: u16,
    /// `errors[0].reason`; defaults from the status (`rateLimitExceeded`, `backendError`, ...).
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default = "one")]
    pub probability: f64,
    /// How many calls it may still hit; absent = unlimited.
    #[serde(default)]
    pub count: Option<u64>,
    /// Delay before answering (or before the real answer when status is 200).
    #[serde(default)]
    pub delay_ms: u64,
    /// Carry the call out, then answer the error instead of its result: a response lost on the way
    /// back, after GCE acted (a retry must not act twice).
    #[serde(default)]
    pub after: bool,
}

fn any_method() -> String {
    "*".to_string()
}

fn one() -> f64 {
    1.0
}
