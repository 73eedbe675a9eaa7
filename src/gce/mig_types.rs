//! Managed instance groups on the wire: the MIG and its policies, its managed instances, and the
//! body of `deleteInstances`.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::operation_types::{OperationErrorItem, OperationErrorList};
use super::wire::{last_segment, parse_timestamp};

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

/// Body of `deleteInstances` (zonal and regional have the same shape).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DeleteInstancesRequest {
    /// Instance URLs (`zones/{zone}/instances/{name}`; the only form a regional MIG takes), or, for a
    /// zonal MIG, names (the only way to name a queued instance); never both in one call.
    pub instances: Vec<String>,
    pub skip_instances_on_validation_error: bool,
}
