//! Capacity advice (`advice.capacity`): for a machine type, a provisioning model, a size and a set
//! of zones, GCE's obtainability score (0..1) and where it would put the VMs (shards: zone, machine
//! type, instance count). A read, not a mutation: no `requestId`, counted in the read budget
//! (docs/gce-facts.md, "Capacity advice").

use super::client::{Call, Client};
use super::endpoints::to_body;
use super::GceError;
use reqwest::Method;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `CapacityAdviceRequest`, the fields slurm-dws sends.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CapacityAdviceRequest {
    pub size: u32,
    pub instance_properties: AdviceInstanceProperties,
    pub distribution_policy: AdviceDistributionPolicy,
    pub instance_flexibility_policy: AdviceFlexibilityPolicy,
}

/// `CapacityAdviceRequestInstanceProperties`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdviceInstanceProperties {
    pub scheduling: AdviceScheduling,
}

/// `CapacityAdviceRequestInstancePropertiesScheduling`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdviceScheduling {
    /// `FLEX_START` for a DWS Flex Start nodeset.
    pub provisioning_model: String,
}

/// `CapacityAdviceRequestDistributionPolicy`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdviceDistributionPolicy {
    /// `ANY` (see [`CapacityAdviceRequest::new`]).
    pub target_shape: String,
    pub zones: Vec<AdviceZone>,
}

/// `CapacityAdviceRequestDistributionPolicyZoneConfiguration`: `zones/Z` (a partial URL).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AdviceZone {
    pub zone: String,
}

/// `CapacityAdviceRequestInstanceFlexibilityPolicy`: one selection, the template's machine type.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdviceFlexibilityPolicy {
    pub instance_selections: BTreeMap<String, AdviceSelection>,
}

/// `CapacityAdviceRequestInstanceFlexibilityPolicyInstanceSelection`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdviceSelection {
    pub machine_types: Vec<String>,
}

/// `CapacityAdviceResponse`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CapacityAdviceResponse {
    pub recommendations: Vec<AdviceRecommendation>,
}

/// `CapacityAdviceResponseRecommendation`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AdviceRecommendation {
    pub scores: Option<AdviceScores>,
    pub shards: Vec<AdviceShard>,
}

/// `CapacityAdviceResponseRecommendationScores`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AdviceScores {
    pub obtainability: Option<f64>,
}

/// `CapacityAdviceResponseRecommendationShard`: one zone, one machine type.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AdviceShard {
    /// The zone's name (a URL is accepted too: its last segment is the zone).
    pub zone: String,
    pub machine_type: String,
    pub instance_count: Option<u32>,
}

impl CapacityAdviceRequest {
    /// The question slurm-dws asks for a request group: `size` VMs of `machine_type` under
    /// `provisioning_model` in any one of `zones`.
    pub fn new(size: u32, machine_type: &str, provisioning_model: &str, zones: &[String]) -> Self {
        CapacityAdviceRequest {
            size,
            instance_properties: AdviceInstanceProperties {
                scheduling: AdviceScheduling { provisioning_model: provisioning_model.to_string() },
            },
            distribution_policy: AdviceDistributionPolicy {
                // ANY, not the MIG's ANY_SINGLE_ZONE: the shards then name every zone as good
                // as the best, and the MIG is given all of them (GCE picks one at resize).
                target_shape: "ANY".into(),
                zones: zones.iter().map(|z| AdviceZone { zone: format!("zones/{z}") }).collect(),
            },
            instance_flexibility_policy: AdviceFlexibilityPolicy {
                instance_selections: BTreeMap::from([(
                    "template".to_string(),
                    AdviceSelection { machine_types: vec![machine_type.to_string()] },
                )]),
            },
        }
    }
}

impl Client {
    /// `advice.capacity` in `region`: a read (no `requestId`), retried as reads are.
    pub async fn capacity_advice(
        &self,
        region: &str,
        request: &CapacityAdviceRequest,
    ) -> Result<CapacityAdviceResponse, GceError> {
        let path = format!("{}/regions/{region}/advice/capacity", self.project_path());
        let mut call = Call::new("advice.capacity".into(), Method::POST, path);
        call.body = Some(to_body(request)?);
        self.execute(&call).await
    }
}
