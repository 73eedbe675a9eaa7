//! `machineTypes.get` for the few machine types slurm-dws clusters use, with GCE's real shapes.
//!
//! vCPUs and memory as Google publishes them (memory in GB of 1024 MB: `memoryMb` = GB × 1024):
//! a3-ultragpu-8g 224 vCPUs, 2952 GB, 8 × nvidia-h200-141gb; a3-highgpu-8g 208 vCPUs, 1872 GB,
//! 8 × nvidia-h100-80gb; a2-highgpu-1g 12 vCPUs, 85 GB, 1 × nvidia-tesla-a100; g2-standard-4
//! 4 vCPUs, 16 GB, 1 × nvidia-l4; n2-standard-4 4 vCPUs, 16 GB, no accelerator.

use super::*;

struct MachineType {
    name: &'static str,
    cpus: u32,
    memory_gb: u32,
    accelerator: Option<(&'static str, u32)>,
}

const MACHINE_TYPES: &[MachineType] = &[
    MachineType {
        name: "a3-ultragpu-8g",
        cpus: 224,
        memory_gb: 2952,
        accelerator: Some(("nvidia-h200-141gb", 8)),
    },
    MachineType {
        name: "a3-highgpu-8g",
        cpus: 208,
        memory_gb: 1872,
        accelerator: Some(("nvidia-h100-80gb", 8)),
    },
    MachineType {
        name: "a2-highgpu-1g",
        cpus: 12,
        memory_gb: 85,
        accelerator: Some(("nvidia-tesla-a100", 1)),
    },
    MachineType { name: "g2-standard-4", cpus: 4, memory_gb: 16, accelerator: Some(("nvidia-l4", 1)) },
    MachineType { name: "n2-standard-4", cpus: 4, memory_gb: 16, accelerator: None },
];

/// A `MachineType` resource, or 404 for a type the simulator does not know.
pub fn machine_type_json(project: &str, zone: &str, name: &str) -> Result<Value, ApiError> {
    let path = format!("projects/{project}/zones/{zone}/machineTypes/{name}");
    let m = MACHINE_TYPES.iter().find(|m| m.name == name).ok_or_else(|| ApiError::not_found(&path))?;
    let mut description = format!("{} vCPUs, {} GB RAM", m.cpus, m.memory_gb);
    let mut o = json!({
        "kind": "compute#machineType",
        "id": project_number(m.name).to_string(),
        "creationTimestamp": "1969-12-31T16:00:00.000-08:00",
        "name": m.name,
        "guestCpus": m.cpus,
        "memoryMb": m.memory_gb * 1024,
        "maximumPersistentDisks": 128,
        "maximumPersistentDisksSizeGb": "263168",
        "zone": zone,
        "selfLink": format!("{GCE_BASE}{path}"),
        "isSharedCpu": false,
    });
    if let Some((kind, count)) = m.accelerator {
        o["accelerators"] = json!([{"guestAcceleratorType": kind, "guestAcceleratorCount": count}]);
        description = format!("Accelerator Optimized: {count} x {kind}, {description}");
    }
    o["description"] = json!(description);
    Ok(o)
}
