//! Workload policies (`resourcePolicies` with a `workloadPolicy`): the types and calls slurm-dws
//! uses to create, read, list and delete the policies that place a MIG's VMs close together
//! (docs/gce-facts.md, "Workload policies").

use super::client::{Call, Client};
use super::endpoints::to_body;
use super::{GceError, Operation};
use reqwest::Method;
use serde::{Deserialize, Serialize};

/// A resource policy as slurm-dws writes and reads it (only the workload policy kind).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ResourcePolicy {
    pub name: String,
    /// slurm-dws writes its ownership proof here, as for MIGs.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub description: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workload_policy: Option<WorkloadPolicy>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub self_link: String,
}

/// `ResourcePolicyWorkloadPolicy`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct WorkloadPolicy {
    /// `HIGH_THROUGHPUT` (the only type slurm-dws creates).
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub max_topology_distance: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub accelerator_topology: String,
}

impl Client {
    fn policies_base(&self, region: &str) -> String {
        format!("{}/regions/{region}/resourcePolicies", self.project_path())
    }

    /// Creates a resource policy in `region`.
    pub async fn insert_policy(
        &self,
        region: &str,
        policy: &ResourcePolicy,
        request_id: &str,
    ) -> Result<Operation, GceError> {
        let mut call = self.mutation(
            "resourcePolicies.insert".into(),
            Method::POST,
            self.policies_base(region),
            request_id,
        )?;
        call.body = Some(to_body(policy)?);
        self.execute(&call).await
    }

    /// Reads one resource policy.
    pub async fn get_policy(&self, region: &str, name: &str) -> Result<ResourcePolicy, GceError> {
        let path = format!("{}/{name}", self.policies_base(region));
        self.execute(&Call::new("resourcePolicies.get".into(), Method::GET, path)).await
    }

    /// Lists the region's resource policies (all pages), optionally filtered, asking for `fields`.
    pub async fn list_policies(
        &self,
        region: &str,
        filter: Option<&str>,
        fields: Option<&str>,
    ) -> Result<Vec<ResourcePolicy>, GceError> {
        self.list_all("resourcePolicies.list".into(), Method::GET, self.policies_base(region), filter, fields)
            .await
    }

    /// Deletes a resource policy (GCE refuses while a MIG uses it).
    pub async fn delete_policy(
        &self,
        region: &str,
        name: &str,
        request_id: &str,
    ) -> Result<Operation, GceError> {
        let path = format!("{}/{name}", self.policies_base(region));
        let call = self.mutation("resourcePolicies.delete".into(), Method::DELETE, path, request_id)?;
        self.execute(&call).await
    }
}
