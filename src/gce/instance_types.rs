//! VMs on the wire: the instance, and the metadata and scheduling it shares with instance templates.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::wire::{is_false, parse_timestamp, GceDuration};

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
