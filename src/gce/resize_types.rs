//! MIG resize requests (DWS Flex Start) on the wire: the request, its state machine and its status.

use serde::{Deserialize, Serialize};

use super::operation_types::{OperationErrorItem, OperationErrorList};
use super::wire::GceDuration;

/// State of a resize request (v1). Unknown values (beta's `PROVISIONING`, alpha's `DELETING`)
/// parse as `Unknown`: opaque, not final.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ResizeRequestState {
    Creating,
    /// Queued: waiting for capacity and quota, possibly for hours.
    Accepted,
    Succeeded,
    /// Final; VMs it made were rolled back. `status.error` says why.
    Failed,
    Cancelled,
    StateUnspecified,
    #[serde(other)]
    Unknown,
}

impl ResizeRequestState {
    /// True for SUCCEEDED, FAILED and CANCELLED: GCE will not change the request any more.
    pub fn is_final(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed | Self::Cancelled)
    }
}

/// `instances[]` of a resize request: the exact VM names to create.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PerInstanceConfig {
    pub name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub status: String,
}

/// `status.lastAttempt` of a resize request.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ResizeRequestLastAttempt {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<OperationErrorList>,
}

/// `status` of a resize request.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ResizeRequestStatus {
    /// Final errors (set on FAILED, never removed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<OperationErrorList>,
    /// Transient errors of the last provisioning attempt while ACCEPTED; may be stale.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_attempt: Option<ResizeRequestLastAttempt>,
}

/// A MIG resize request (DWS Flex Start): N named VMs for a run duration, all at once.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct InstanceGroupManagerResizeRequest {
    pub name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub description: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub id: String,
    /// Exact VM names (mutually exclusive with `resize_by`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub instances: Vec<PerInstanceConfig>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resize_by: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requested_run_duration: Option<GceDuration>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<ResizeRequestState>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<ResizeRequestStatus>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub zone: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub region: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub self_link: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub creation_timestamp: String,
}

impl InstanceGroupManagerResizeRequest {
    /// The body of a resize-request insert for exact VM names.
    pub fn for_instances(
        name: impl Into<String>,
        description: impl Into<String>,
        instances: impl IntoIterator<Item = String>,
        run_duration_secs: i64,
    ) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            instances: instances
                .into_iter()
                .map(|name| PerInstanceConfig { name, status: String::new() })
                .collect(),
            // 0: none (a reservation-bound template's VMs run until the reservation ends).
            requested_run_duration: (run_duration_secs > 0)
                .then(|| GceDuration::from_secs(run_duration_secs)),
            ..Self::default()
        }
    }

    /// Final errors (`status.error.errors[]`), empty unless FAILED.
    pub fn errors(&self) -> &[OperationErrorItem] {
        self.status.as_ref().and_then(|s| s.error.as_ref()).map_or(&[], |e| e.errors.as_slice())
    }

    /// Transient errors of the last attempt (`status.lastAttempt.error.errors[]`).
    pub fn last_attempt_errors(&self) -> &[OperationErrorItem] {
        self.status
            .as_ref()
            .and_then(|s| s.last_attempt.as_ref())
            .and_then(|a| a.error.as_ref())
            .map_or(&[], |e| e.errors.as_slice())
    }
}
