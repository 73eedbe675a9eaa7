//! Instance templates and machine types on the wire: what `check-config --online` and the daemon's
//! template check read (the same rules as every wire type, `types.rs`: camelCase, `#[serde(default)]`,
//! enums as strings).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::instance_types::{Metadata, Scheduling};

/// `reservationAffinity` of an instance template.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ReservationAffinity {
    /// `NO_RESERVATION` for DWS Flex Start.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub consume_reservation_type: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub key: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

/// `properties` of an instance template (what `check-config` verifies).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct InstanceProperties {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub machine_type: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub description: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheduling: Option<Scheduling>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reservation_affinity: Option<ReservationAffinity>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub resource_policies: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub guest_accelerators: Vec<serde_json::Value>,
    /// Only `network` and `subnetwork` are read (`template_region`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub network_interfaces: Vec<TemplateNetworkInterface>,
}

/// `properties.networkInterfaces[]` of a template: where its VMs attach.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TemplateNetworkInterface {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub network: String,
    /// `regions/R/subnetworks/S` (relative or full URL): a subnetwork is regional.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub subnetwork: String,
}

/// An instance template (global or regional).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct InstanceTemplate {
    pub name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub description: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub properties: Option<InstanceProperties>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub region: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub self_link: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub creation_timestamp: String,
}

impl InstanceTemplate {
    /// `properties.scheduling`, if the template has one.
    pub fn scheduling(&self) -> Option<&Scheduling> {
        self.properties.as_ref()?.scheduling.as_ref()
    }
}

/// One kind of accelerator a machine type comes with (`MachineType.accelerators[]`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MachineTypeAccelerator {
    /// `nvidia-h200-141gb`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub guest_accelerator_type: String,
    /// int32: a number on the wire.
    pub guest_accelerator_count: u32,
}

/// A machine type (`machineTypes.get`): what a VM of it has, read by `check-config --online
/// --print-slurm-conf` for a nodeset's NodeName line.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MachineType {
    pub name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub zone: String,
    /// int32: vCPUs.
    pub guest_cpus: u32,
    /// int32: memory in MB (GCE's MB: a GB of the machine-type tables is 1024 of them).
    pub memory_mb: u64,
    /// Accelerators attached by the machine type itself (A3, A2, G2); empty for the others.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub accelerators: Vec<MachineTypeAccelerator>,
}
