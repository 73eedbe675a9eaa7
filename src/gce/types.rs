//! Compute Engine v1 resources as they travel on the wire (the subset slurm-dws reads and sends).
//!
//! Every field name and type here was checked against the Compute v1 discovery document (which
//! revision, and where to get it: docs/gce-facts.md; the simulator validates against its trimmed
//! copy, `crates/gce-sim/data/compute.v1.trimmed.json`).
//! The rules that keep these types honest against a real GCE:
//! - camelCase on the wire, and `#[serde(default)]` on every struct: GCE omits empty fields.
//! - int64/uint64 fields are JSON strings on the wire (`requestedRunDuration.seconds`); int32
//!   fields (`targetSize`, `httpErrorStatusCode`) are numbers. [`int64_string`] reads either.
//! - Enum-valued fields are `String`s, except the two state machines callers branch on
//!   ([`OperationStatus`], [`ResizeRequestState`]), which keep an `Unknown` catch-all: GCE adds
//!   values over time (beta's `PROVISIONING`), and an unknown value must never fail a whole list.
//! - Output-only and empty fields are skipped on serialization, so a request body carries only
//!   what the caller set (the simulator rejects unknown or misspelt fields).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

pub use super::template_types::*;

/// Serde helpers for int64 fields, which the Compute API encodes as JSON strings.
///
/// Serializes as a string (what GCE sends and expects); deserializes from a string or a
/// number, because being lenient on input costs nothing and some proxies re-encode.
pub mod int64_string {
    use serde::{de, Deserialize, Deserializer, Serializer};

    /// Writes `v` as a JSON string.
    pub fn serialize<S: Serializer>(v: &i64, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(v)
    }

    /// Reads a JSON string or number.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Repr {
            Num(i64),
            Str(String),
        }
        match Repr::deserialize(d)? {
            Repr::Num(n) => Ok(n),
            Repr::Str(s) => s.trim().parse().map_err(de::Error::custom),
        }
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// Last path segment of a resource URL (`.../zones/us-central1-a` → `us-central1-a`).
pub fn last_segment(url: &str) -> &str {
    url.rsplit('/').next().unwrap_or(url)
}

/// Parses a GCE RFC 3339 timestamp (`2025-01-02T03:04:05.678-08:00`).
pub fn parse_timestamp(s: &str) -> Option<DateTime<Utc>> {
    gce_timestamp(s).or_else(|| DateTime::parse_from_rfc3339(s).ok().map(|t| t.with_timezone(&Utc)))
}

/// The form GCE writes, `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`, read by position (a pass reads
/// two for each of 10,000 VMs, and chrono's RFC 3339 parser took ~2% of its CPU). `None` for
/// anything else, which [`parse_timestamp`] hands to chrono: what this reads, chrono reads the same.
fn gce_timestamp(s: &str) -> Option<DateTime<Utc>> {
    let b = s.as_bytes();
    let number = |from: usize, to: usize| -> Option<u32> {
        b.get(from..to)?
            .iter()
            .try_fold(0u32, |n, &c| c.is_ascii_digit().then(|| n * 10 + u32::from(c - b'0')))
    };
    let separators = [(4, b'-'), (7, b'-'), (10, b'T'), (13, b':'), (16, b':')];
    if separators.iter().any(|&(at, c)| b.get(at) != Some(&c)) {
        return None;
    }
    let date = chrono::NaiveDate::from_ymd_opt(number(0, 4)? as i32, number(5, 7)?, number(8, 10)?)?;
    let (hour, minute, second) = (number(11, 13)?, number(14, 16)?, number(17, 19)?);
    let mut at = 19;
    let mut nanos = 0;
    if b.get(at) == Some(&b'.') {
        let digits = b[at + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
        if !(1..=9).contains(&digits) {
            return None;
        }
        nanos = number(at + 1, at + 1 + digits)? * 10u32.pow(9 - digits as u32);
        at += 1 + digits;
    }
    let offset = match b.get(at..)? {
        b"Z" | b"z" => 0,
        [sign @ (b'+' | b'-'), _, _, b':', _, _] => {
            let (hours, minutes) = (number(at + 1, at + 3)?, number(at + 4, at + 6)?);
            if hours > 23 || minutes > 59 {
                return None;
            }
            let secs = i64::from(hours * 3600 + minutes * 60);
            if *sign == b'-' {
                -secs
            } else {
                secs
            }
        }
        _ => return None,
    };
    let local = date.and_hms_nano_opt(hour, minute, second, nanos)?;
    Some(local.and_utc() - chrono::TimeDelta::seconds(offset))
}

/// `Duration` (protobuf): `seconds` is int64 (a string on the wire), `nanos` int32.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GceDuration {
    #[serde(with = "int64_string")]
    pub seconds: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nanos: Option<i32>,
}

impl GceDuration {
    /// A whole number of seconds, as slurm-dws always sends.
    pub fn from_secs(seconds: i64) -> Self {
        Self { seconds, nanos: None }
    }
}

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

/// `versions[]` of a MIG: which template its VMs are made from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct InstanceGroupManagerVersion {
    pub instance_template: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
}

/// `instanceLifecyclePolicy` of a MIG.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct InstanceLifecyclePolicy {
    /// `DO_NOTHING` for DWS Flex Start (a failed VM is not recreated behind our back).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub default_action_on_failure: String,
}

/// One zone of a regional MIG's `distributionPolicy.zones[]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DistributionPolicyZone {
    /// `zones/us-central1-a` (or a full URL as GCE returns it).
    pub zone: String,
}

/// `distributionPolicy` of a regional MIG.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DistributionPolicy {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub zones: Vec<DistributionPolicyZone>,
    /// `ANY_SINGLE_ZONE` for DWS Flex Start (all VMs of a request in one zone).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub target_shape: String,
}

/// `updatePolicy` of a MIG.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct UpdatePolicy {
    /// `NONE` for DWS Flex Start: GCE must not move VMs between zones.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub instance_redistribution_type: String,
}

/// `resourcePolicies` of a MIG.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct InstanceGroupManagerResourcePolicies {
    /// URL of a workload policy (compact placement, `HIGH_THROUGHPUT`).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub workload_policy: String,
}

/// `currentActions` of a MIG: how many managed instances are in each action (all int32).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct InstanceGroupManagerActionsSummary {
    pub abandoning: i32,
    pub creating: i32,
    pub creating_without_retries: i32,
    pub deleting: i32,
    pub none: i32,
    pub recreating: i32,
    pub refreshing: i32,
    pub restarting: i32,
    pub resuming: i32,
    pub starting: i32,
    pub stopping: i32,
    pub suspending: i32,
    pub verifying: i32,
}

/// `status` of a MIG (an object, not a string). Only what slurm-dws reads.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct InstanceGroupManagerStatus {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub is_stable: Option<bool>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub autoscaler: String,
}

/// A managed instance group (zonal or regional).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct InstanceGroupManager {
    pub name: String,
    /// Free text; slurm-dws writes its ownership proof here (MIGs have no labels).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub description: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub id: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub base_instance_name: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub versions: Vec<InstanceGroupManagerVersion>,
    /// int32 on the wire. Must be sent (as 0) on insert.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_size: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instance_lifecycle_policy: Option<InstanceLifecyclePolicy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub distribution_policy: Option<DistributionPolicy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub update_policy: Option<UpdatePolicy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource_policies: Option<InstanceGroupManagerResourcePolicies>,
    /// `PAGELESS` (default) or `PAGINATED`: whether listManagedInstances pages.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub list_managed_instances_results: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<InstanceGroupManagerStatus>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub current_actions: Option<InstanceGroupManagerActionsSummary>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub instance_group: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub zone: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub region: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub self_link: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub creation_timestamp: String,
}

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
            requested_run_duration: Some(GceDuration::from_secs(run_duration_secs)),
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

/// `lastAttempt` of a managed instance: `{ "errors": { "errors": [...] } }`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ManagedInstanceLastAttempt {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub errors: Option<OperationErrorList>,
}

/// `scheduling` of a managed instance.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ManagedInstanceScheduling {
    /// When GCE will delete the VM (end of the run duration).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub termination_timestamp: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub graceful_shutdown_timestamp: String,
}

/// One entry of listManagedInstances. A queued instance has a `name` but no `instance` URL yet.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ManagedInstance {
    pub name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub id: String,
    /// URL of the VM; empty while the instance is still queued.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub instance: String,
    /// PENDING, PROVISIONING, STAGING, RUNNING, STOPPING, TERMINATED, DEPROVISIONING, ...
    #[serde(skip_serializing_if = "String::is_empty")]
    pub instance_status: String,
    /// CREATING, DELETING, NONE, ...
    #[serde(skip_serializing_if = "String::is_empty")]
    pub current_action: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub target_status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_attempt: Option<ManagedInstanceLastAttempt>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheduling: Option<ManagedInstanceScheduling>,
}

impl ManagedInstance {
    /// The VM's name: `name` when GCE sent it, else the last segment of `instance`.
    pub fn vm_name(&self) -> &str {
        if self.name.is_empty() {
            last_segment(&self.instance)
        } else {
            &self.name
        }
    }

    /// Errors of the last create/delete attempt.
    pub fn last_attempt_errors(&self) -> &[OperationErrorItem] {
        self.last_attempt.as_ref().and_then(|a| a.errors.as_ref()).map_or(&[], |e| e.errors.as_slice())
    }

    /// When GCE will delete the VM, if it said so.
    pub fn termination_time(&self) -> Option<DateTime<Utc>> {
        parse_timestamp(&self.scheduling.as_ref()?.termination_timestamp)
    }
}

/// One `metadata.items[]` entry.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MetadataItem {
    pub key: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

/// `metadata` of an instance or template.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Metadata {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<MetadataItem>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub fingerprint: String,
}

/// `networkInterfaces[]` of an instance.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct NetworkInterface {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(rename = "networkIP", skip_serializing_if = "String::is_empty")]
    pub network_ip: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub network: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub subnetwork: String,
}

/// `scheduling` of an instance or instance template.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Scheduling {
    /// `FLEX_START` for DWS Flex Start (must be explicit, else STANDARD).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub provisioning_model: String,
    /// `DELETE` for DWS Flex Start.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub instance_termination_action: String,
    /// `TERMINATE` for DWS Flex Start.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub on_host_maintenance: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub automatic_restart: Option<bool>,
    #[serde(skip_serializing_if = "is_false")]
    pub preemptible: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_run_duration: Option<GceDuration>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub termination_time: String,
}

/// `resourceStatus.scheduling` of an instance.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ResourceStatusScheduling {
    /// When GCE will delete the VM (RFC 3339).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub termination_timestamp: String,
}

/// `resourceStatus` of an instance.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ResourceStatus {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheduling: Option<ResourceStatusScheduling>,
}

/// A VM.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Instance {
    pub name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub id: String,
    /// PROVISIONING, STAGING, RUNNING, STOPPING, TERMINATED, ...
    #[serde(skip_serializing_if = "String::is_empty")]
    pub status: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub status_message: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub zone: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub machine_type: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub creation_timestamp: String,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub network_interfaces: Vec<NetworkInterface>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheduling: Option<Scheduling>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource_status: Option<ResourceStatus>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub self_link: String,
}

impl Instance {
    /// Value of a metadata key (a MIG-made VM has `created-by` = the MIG's URL).
    pub fn metadata_value(&self, key: &str) -> Option<&str> {
        self.metadata.as_ref()?.items.iter().find(|i| i.key == key)?.value.as_deref()
    }

    /// URL of the MIG that made this VM (`created-by` metadata).
    pub fn created_by(&self) -> Option<&str> {
        self.metadata_value("created-by")
    }

    /// Internal IP of the first network interface.
    pub fn internal_ip(&self) -> Option<&str> {
        self.network_interfaces.first().map(|n| n.network_ip.as_str()).filter(|ip| !ip.is_empty())
    }

    /// When GCE will delete the VM (`resourceStatus.scheduling.terminationTimestamp`).
    pub fn termination_time(&self) -> Option<DateTime<Utc>> {
        parse_timestamp(&self.resource_status.as_ref()?.scheduling.as_ref()?.termination_timestamp)
    }

    /// When the VM was created.
    pub fn created_at(&self) -> Option<DateTime<Utc>> {
        parse_timestamp(&self.creation_timestamp)
    }
}

/// Body of `deleteInstances` (zonal and regional have the same shape).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DeleteInstancesRequest {
    /// Instance URLs (`zones/{zone}/instances/{name}`; the only form a regional MIG takes), or, for a
    /// zonal MIG, names (the only way to name a queued instance); never both in one call.
    pub instances: Vec<String>,
    pub skip_instances_on_validation_error: bool,
}

/// One page of a list call. GCE names the item array `items`, except listManagedInstances
/// (`managedInstances`).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
#[serde(bound(deserialize = "T: Deserialize<'de>"))]
pub(crate) struct Page<T> {
    #[serde(default, alias = "managedInstances")]
    pub items: Vec<T>,
    #[serde(default)]
    pub next_page_token: String,
}

/// `warning` of a list or of one scope of an aggregated list: `code` (`NO_RESULTS_ON_PAGE`,
/// `UNREACHABLE`, `PARTIAL_SUCCESS`, ...), `message`, and `data` as key/value pairs (`scope`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ListWarning {
    pub code: String,
    pub message: String,
    pub data: Vec<WarningData>,
}

/// One `warning.data[]` entry.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct WarningData {
    pub key: String,
    pub value: String,
}

impl ListWarning {
    /// The warning says the answer is partial: a scope did not answer (docs/gce-facts.md,
    /// "Instances").
    pub fn is_partial(&self) -> bool {
        matches!(self.code.as_str(), "UNREACHABLE" | "PARTIAL_SUCCESS")
    }

    /// The scopes its `data` names (`key: "scope"`).
    pub fn scopes(&self) -> impl Iterator<Item = &str> {
        self.data.iter().filter(|d| d.key == "scope").map(|d| d.value.as_str())
    }
}

/// What an aggregated list did not see: the zones GCE did not answer for. Their resources are
/// missing from the answer, which says nothing about whether they exist.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Unreachable {
    /// Zones (`us-central1-b`) left out of the answer.
    pub zones: std::collections::BTreeSet<String>,
    /// Set when the answer is partial but does not say which zones it left out (an entry that is
    /// not a zone, or a list-level warning without a scope): then no absence in it can be believed.
    pub unscoped: Option<String>,
}

impl Unreachable {
    /// The answer was complete.
    pub fn is_empty(&self) -> bool {
        self.zones.is_empty() && self.unscoped.is_none()
    }

    /// Records one scope GCE did not answer for (`zones/Z`, `projects/P/zones/Z` or a full URL);
    /// anything else makes the whole answer partial without a zone to blame.
    pub fn add_scope(&mut self, scope: &str, why: &str) {
        let mut parts = scope.split('/');
        let zone =
            parts.by_ref().find(|p| *p == "zones").and_then(|_| parts.next()).filter(|z| !z.is_empty());
        match zone {
            Some(z) => {
                self.zones.insert(z.to_string());
            }
            None => {
                self.unscoped.get_or_insert_with(|| format!("{scope}: {why}"));
            }
        }
    }

    /// Reads one page: scopes whose warning says partial, the list's `unreachables`, and a
    /// list-level partial warning (by the scopes its data names, or none).
    pub(crate) fn add_page(&mut self, page: &InstanceAggregatedPage) {
        self.add_parts(
            page.items.iter().map(|(scope, list)| (scope.as_str(), list.warning.as_ref())),
            &page.unreachables,
            page.warning.as_ref(),
        );
    }

    /// [`Unreachable::add_page`] from a page's parts: each scope's warning, the list's
    /// `unreachables` and its warning.
    pub(crate) fn add_parts<'s>(
        &mut self,
        scopes: impl Iterator<Item = (&'s str, Option<&'s ListWarning>)>,
        unreachables: &[String],
        warning: Option<&ListWarning>,
    ) {
        for (scope, warning) in scopes {
            if let Some(w) = warning.filter(|w| w.is_partial()) {
                self.add_scope(scope, &w.code);
            }
        }
        for scope in unreachables {
            self.add_scope(scope, "listed in unreachables");
        }
        if let Some(w) = warning.filter(|w| w.is_partial()) {
            let mut named = false;
            for scope in w.scopes() {
                named = true;
                self.add_scope(scope, &w.code);
            }
            if !named {
                self.unscoped.get_or_insert_with(|| format!("{}: {}", w.code, w.message));
            }
        }
    }
}

/// One `items` value of an aggregated list.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct InstancesScopedList {
    pub instances: Vec<Instance>,
    /// Replaces `instances` when the scope has none to show: `NO_RESULTS_ON_PAGE` (nothing there)
    /// or `UNREACHABLE` (the zone did not answer: its VMs are unknown).
    pub warning: Option<ListWarning>,
}

/// One page of `instances.aggregatedList`: `items` maps `zones/x` to a scoped list.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct InstanceAggregatedPage {
    pub items: BTreeMap<String, InstancesScopedList>,
    pub next_page_token: String,
    /// Scopes that did not answer (a partial success).
    pub unreachables: Vec<String>,
    pub warning: Option<ListWarning>,
}

#[cfg(test)]
#[path = "types_tests.rs"]
mod tests;
