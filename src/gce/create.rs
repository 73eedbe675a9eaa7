//! Bodies of `regionInstanceGroupManagers.createInstances` (standard and spot VMs created by name).

use serde::{Deserialize, Serialize};

/// Instances per `createInstances` call slurm-dws sends. GCE's description of the method gives no
/// limit of its own; a regional MIG holds at most 2000 VMs and `deleteInstances` takes at most 1000,
/// so one call never names more than 1000 (docs/gce-facts.md, "Standard and spot VMs").
pub const MAX_CREATE_INSTANCES: usize = 1000;

/// Body of `createInstances`: one per-instance config per VM, named as its Slurm node.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CreateInstancesRequest {
    pub instances: Vec<PerInstanceConfig>,
}

/// One per-instance config: slurm-dws sets only the VM's `name`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PerInstanceConfig {
    pub name: String,
}

impl CreateInstancesRequest {
    /// The body naming `names`, in order.
    pub fn for_names(names: impl IntoIterator<Item = String>) -> CreateInstancesRequest {
        CreateInstancesRequest {
            instances: names.into_iter().map(|name| PerInstanceConfig { name }).collect(),
        }
    }
}
