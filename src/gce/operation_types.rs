//! Long-running operations on the wire: what every mutation returns, its status and its errors.

use serde::{Deserialize, Serialize};

/// One error inside an Operation, a resize request status or a managed instance's last attempt.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct OperationErrorItem {
    /// The error type identifier, e.g. `ZONE_RESOURCE_POOL_EXHAUSTED`, `QUOTA_EXCEEDED`.
    pub code: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub location: String,
    /// `errorInfo` / `quotaInfo` / `help` / `localizedMessage`, kept as GCE sent them so no
    /// detail is lost on the way to the event log.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub error_details: Vec<serde_json::Value>,
}

impl OperationErrorItem {
    /// `errorDetails[].errorInfo.reason` values, which sometimes carry the precise stockout code.
    pub fn error_info_reasons(&self) -> impl Iterator<Item = &str> {
        self.error_details.iter().filter_map(|d| d.get("errorInfo")?.get("reason")?.as_str())
    }
}

/// `{ "errors": [...] }`, the shape of `Operation.error` and `status.error`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct OperationErrorList {
    pub errors: Vec<OperationErrorItem>,
}

/// State of an Operation. Unknown values are kept as `Unknown` instead of failing to parse.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum OperationStatus {
    #[default]
    Pending,
    Running,
    Done,
    #[serde(other)]
    Unknown,
}

/// A long-running Compute Engine operation, returned by every mutation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Operation {
    pub name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub id: String,
    pub status: OperationStatus,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub status_message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<OperationErrorList>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_error_status_code: Option<i32>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub http_error_message: String,
    /// e.g. `compute.regionInstanceGroupManagers.insert` or `insert`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub operation_type: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub target_link: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub target_id: String,
    /// URL of the zone, for a zonal operation.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub zone: String,
    /// URL of the region, for a regional operation.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub region: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub self_link: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub progress: Option<i32>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub insert_time: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub start_time: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub end_time: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub client_operation_id: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub user: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<serde_json::Value>,
}

impl Operation {
    /// True once GCE will not change the operation any more.
    pub fn is_done(&self) -> bool {
        self.status == OperationStatus::Done
    }

    /// The errors of a finished operation (empty when it succeeded or is still running).
    pub fn errors(&self) -> &[OperationErrorItem] {
        self.error.as_ref().map_or(&[], |e| e.errors.as_slice())
    }
}
