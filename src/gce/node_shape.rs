//! What a nodeset's VMs have, from its instance template and the machine type the template names:
//! the CPUs, RealMemory, Gres and Features of its slurm.conf NodeName line, as slurm-gcp derives
//! them (`check-config --online --print-slurm-conf`).
//!
//! [`node_shape`] is a pure function of the template and the machine type; [`read_node_shape`]
//! makes the two GCE reads (`instanceTemplates.get` / `regionInstanceTemplates.get`, then
//! `machineTypes.get` in the nodeset's first zone).
//!
//! RealMemory is not the machine type's `memoryMb`: the kernel and the firmware keep part of it,
//! and a node whose slurmd reports less memory than RealMemory is drained by Slurm ("Low
//! RealMemory"). slurm-gcp keeps 400 MB plus 30 MB per GB back (it measured about 16 MB per GB
//! and took 30 to be safe); so does slurm-dws: [`real_memory`].

use super::client::Client;
use super::error::GceError;
use super::types::{last_segment, InstanceTemplate, MachineType};

/// The slurm.conf shape of one nodeset's VMs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeShape {
    /// The machine type's name (`a3-ultragpu-8g`): the node's Features tag.
    pub machine_type: String,
    /// `CPUs=`: the machine type's `guestCpus`.
    pub cpus: u32,
    /// `RealMemory=` in MB: [`real_memory`] of the machine type's `memoryMb`.
    pub real_memory: u64,
    /// `Gres=gpu:N` when more than 0: the machine type's accelerators, or else the template's.
    pub gpus: u32,
}

impl NodeShape {
    /// The NodeName keys and values, in slurm.conf's usual order: CPUs, RealMemory, Gres (only
    /// with GPUs), Features.
    pub fn slurm_keys(&self) -> Vec<(String, String)> {
        let mut keys = vec![
            ("CPUs".to_string(), self.cpus.to_string()),
            ("RealMemory".to_string(), self.real_memory.to_string()),
        ];
        if self.gpus > 0 {
            keys.push(("Gres".to_string(), format!("gpu:{}", self.gpus)));
        }
        keys.push(("Features".to_string(), self.machine_type.clone()));
        keys
    }
}

/// The memory Slurm may count on, in MB, of a machine type with `memory_mb`: 400 MB plus 30 MB per
/// (whole) GB of it are left to the OS, as slurm-gcp does. Never below 1.
pub fn real_memory(memory_mb: u64) -> u64 {
    let reserve = 400 + 30 * (memory_mb / 1024);
    memory_mb.saturating_sub(reserve).max(1)
}

/// The machine type a template names, by its bare name (a URL form is cut to its last segment);
/// `None` when the template sets none.
pub fn template_machine_type(t: &InstanceTemplate) -> Option<&str> {
    let m = t.properties.as_ref()?.machine_type.as_str();
    (!m.is_empty()).then(|| last_segment(m))
}

/// GPUs the template attaches itself (`properties.guestAccelerators[].acceleratorCount`, summed).
fn template_gpus(t: &InstanceTemplate) -> u32 {
    let Some(props) = &t.properties else { return 0 };
    props
        .guest_accelerators
        .iter()
        .filter_map(|a| a.get("acceleratorCount")?.as_u64())
        .map(|n| u32::try_from(n).unwrap_or(u32::MAX))
        .fold(0, u32::saturating_add)
}

/// The shape of VMs made from template `t` of machine type `m`. GPUs come from the machine type
/// (A3, A2, G2 carry theirs) or, when it has none, from the template's `guestAccelerators` (an N1
/// with attached GPUs).
pub fn node_shape(t: &InstanceTemplate, m: &MachineType) -> NodeShape {
    let from_type = m.accelerators.iter().map(|a| a.guest_accelerator_count).fold(0, u32::saturating_add);
    let gpus = if from_type > 0 { from_type } else { template_gpus(t) };
    let name = template_machine_type(t).unwrap_or(&m.name);
    NodeShape {
        machine_type: name.to_string(),
        cpus: m.guest_cpus,
        real_memory: real_memory(m.memory_mb),
        gpus,
    }
}

/// Why a nodeset's shape could not be read.
#[derive(Debug)]
pub enum ShapeError {
    /// `instanceTemplates.get` / `regionInstanceTemplates.get` failed (404 included).
    Template(GceError),
    /// The template sets no `properties.machineType`.
    NoMachineType,
    /// `machineTypes.get` of this name in this zone failed (404 included).
    MachineType { name: String, zone: String, error: GceError },
}

impl std::fmt::Display for ShapeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ShapeError::Template(e) => write!(f, "reading the instance template: {e}"),
            ShapeError::NoMachineType => write!(f, "the instance template sets no properties.machineType"),
            ShapeError::MachineType { name, zone, error } => {
                write!(f, "reading machine type {name} in zone {zone}: {error}")
            }
        }
    }
}

/// Reads the template `reference` names and its machine type in `zone`, and derives the shape.
pub async fn read_node_shape(client: &Client, reference: &str, zone: &str) -> Result<NodeShape, ShapeError> {
    let t = client.get_instance_template_ref(reference).await.map_err(ShapeError::Template)?;
    shape_of_template(client, &t, zone).await
}

/// The shape of VMs made from template `t` (read already): one `machineTypes.get` in `zone`.
pub async fn shape_of_template(
    client: &Client,
    t: &InstanceTemplate,
    zone: &str,
) -> Result<NodeShape, ShapeError> {
    let name = template_machine_type(t).ok_or(ShapeError::NoMachineType)?;
    let m = client.get_machine_type(zone, name).await.map_err(|error| ShapeError::MachineType {
        name: name.to_string(),
        zone: zone.to_string(),
        error,
    })?;
    Ok(node_shape(t, &m))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn template(properties: Value) -> InstanceTemplate {
        serde_json::from_value(json!({"name": "t", "properties": properties})).unwrap()
    }

    fn machine(name: &str, cpus: u32, memory_mb: u64, gpus: &[(&str, u32)]) -> MachineType {
        let accelerators: Vec<Value> = gpus
            .iter()
            .map(|(k, n)| json!({"guestAcceleratorType": k, "guestAcceleratorCount": n}))
            .collect();
        serde_json::from_value(json!({"name": name, "guestCpus": cpus, "memoryMb": memory_mb,
                                      "accelerators": accelerators}))
        .unwrap()
    }

    #[test]
    fn real_memory_keeps_400_mb_and_30_mb_per_gb_back() {
        // (memoryMb, RealMemory)
        for (mb, want) in [
            (16 * 1024, 16384 - 400 - 480),
            (85 * 1024, 87040 - 400 - 2550),
            (1872 * 1024, 1_916_928 - 400 - 56_160),
            (2952 * 1024, 3_022_848 - 400 - 88_560),
            (1500, 1500 - 400 - 30),
            (300, 1),
            (0, 1),
        ] {
            assert_eq!(real_memory(mb), want, "{mb}");
        }
    }

    /// (case, template properties, machine type, CPUs, RealMemory, GPUs, Features).
    type Case = (&'static str, Value, MachineType, u32, u64, u32, &'static str);

    #[test]
    fn shape_from_template_and_machine_type() {
        let table: Vec<Case> = vec![
            (
                "a3 ultra: GPUs of the machine type",
                json!({"machineType": "a3-ultragpu-8g"}),
                machine("a3-ultragpu-8g", 224, 2952 * 1024, &[("nvidia-h200-141gb", 8)]),
                224,
                2_933_888,
                8,
                "a3-ultragpu-8g",
            ),
            (
                "cpu only",
                json!({"machineType": "n2-standard-4"}),
                machine("n2-standard-4", 4, 16 * 1024, &[]),
                4,
                15_504,
                0,
                "n2-standard-4",
            ),
            (
                "n1 with attached GPUs: from the template",
                json!({"machineType": "n1-standard-8", "guestAccelerators": [
                    {"acceleratorType": "nvidia-tesla-t4", "acceleratorCount": 2},
                    {"acceleratorType": "nvidia-tesla-t4", "acceleratorCount": 2}]}),
                machine("n1-standard-8", 8, 30 * 1024, &[]),
                8,
                30_720 - 400 - 900,
                4,
                "n1-standard-8",
            ),
            (
                "both say: the machine type wins",
                json!({"machineType": "g2-standard-4",
                       "guestAccelerators": [{"acceleratorType": "nvidia-l4", "acceleratorCount": 1}]}),
                machine("g2-standard-4", 4, 16 * 1024, &[("nvidia-l4", 1)]),
                4,
                15_504,
                1,
                "g2-standard-4",
            ),
            (
                "machine type given as a URL: the bare name is the feature",
                json!({"machineType": "zones/us-central1-a/machineTypes/a2-highgpu-1g"}),
                machine("a2-highgpu-1g", 12, 85 * 1024, &[("nvidia-tesla-a100", 1)]),
                12,
                87_040 - 400 - 2_550,
                1,
                "a2-highgpu-1g",
            ),
        ];
        for (case, props, m, cpus, mem, gpus, feature) in table {
            let got = node_shape(&template(props), &m);
            let want = NodeShape { machine_type: feature.into(), cpus, real_memory: mem, gpus };
            assert_eq!(got, want, "{case}");
        }
    }

    #[test]
    fn slurm_keys_leave_out_gres_without_gpus() {
        let cpu = NodeShape { machine_type: "n2-standard-4".into(), cpus: 4, real_memory: 15_504, gpus: 0 };
        let gpu = NodeShape { gpus: 8, ..cpu.clone() };
        let line = |s: &NodeShape| {
            s.slurm_keys().iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ")
        };
        assert_eq!(line(&cpu), "CPUs=4 RealMemory=15504 Features=n2-standard-4");
        assert_eq!(line(&gpu), "CPUs=4 RealMemory=15504 Gres=gpu:8 Features=n2-standard-4");
    }

    #[test]
    fn machine_type_of_a_template() {
        assert_eq!(
            template_machine_type(&template(json!({"machineType": "a3-ultragpu-8g"}))),
            Some("a3-ultragpu-8g")
        );
        assert_eq!(template_machine_type(&template(json!({}))), None);
        let empty: InstanceTemplate = serde_json::from_value(json!({"name": "t"})).unwrap();
        assert_eq!(template_machine_type(&empty), None);
    }
}
