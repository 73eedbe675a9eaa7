//! Which machine families GCE takes a workload policy for, with which provisioning model, and what
//! A4X needs (docs/gce-facts.md, "Workload policies"): the pure rule `check-config --online` applies
//! to each nodeset's template and `[nodeset.placement]`.

use crate::config::{Placement, ProvisioningModel};

/// (machine type prefix, family, flex-start allowed with a workload policy). Longest prefixes first.
///
/// The simulator keeps its own copy (`gce_sim::state::POLICY_FAMILIES`) on purpose: it stands in for
/// GCE and depends on nothing of slurm-dws. `tests::the_simulator_takes_policies_for_the_same_families`
/// keeps the two equal.
pub const POLICY_FAMILIES: &[(&str, &str, bool)] = &[
    ("a4x-max", "A4X Max", false),
    ("a4x-", "A4X", false),
    ("a4-", "A4", true),
    ("a3-ultragpu-", "A3 Ultra", true),
    ("a3-megagpu-", "A3 Mega", false),
    ("a3-highgpu-8g", "A3 High (8 GPUs)", false),
    ("h4d-", "H4D", false),
];

/// The family of a machine type (name or URL) that takes workload policies, and whether flex-start
/// VMs of it may have one.
pub fn policy_family(machine_type: &str) -> Option<(&'static str, bool)> {
    let mt = machine_type.rsplit('/').next().unwrap_or(machine_type);
    POLICY_FAMILIES.iter().find(|(p, _, _)| mt.starts_with(p)).map(|(_, f, flex)| (*f, *flex))
}

/// What GCE would refuse for a nodeset of `machine_type` and `model` with `placement`: each as
/// `(field, message)`, the field under `[nodeset.placement]`.
pub fn placement_problems(
    machine_type: &str,
    model: ProvisioningModel,
    placement: Option<&Placement>,
) -> Vec<(&'static str, String)> {
    let mt = machine_type.rsplit('/').next().unwrap_or(machine_type);
    let family = policy_family(mt);
    let mut out = Vec::new();
    let a4x = family.is_some_and(|(f, _)| f.starts_with("A4X"));
    let Some(p) = placement else {
        if a4x {
            out.push((
                "placement.accelerator_topology",
                format!("is not set: GCE requires a workload policy with an acceleratorTopology for {mt} MIGs of more than one VM (e.g. accelerator_topology = \"1x72\")"),
            ));
        }
        return out;
    };
    let field = match p {
        Placement::Existing { .. } => "placement.workload_policy",
        Placement::Owned { max_topology_distance: Some(_), .. } => "placement.max_topology_distance",
        Placement::Owned { .. } => "placement.accelerator_topology",
    };
    match family {
        None => out.push((
            field,
            format!("is set, but GCE takes workload policies only for A4X Max, A4X, A4, A3 Ultra, A3 Mega, A3 High (8 GPUs) and H4D, not {mt}"),
        )),
        Some((f, flex_ok)) => {
            if model == ProvisioningModel::Flex && !flex_ok {
                out.push((
                    field,
                    format!("is set, but GCE takes a workload policy for flex-start VMs only on A4 and A3 Ultra, not {f} ({mt}): use provisioning_model = \"spot\" or a reservation, or no placement"),
                ));
            }
            if a4x && matches!(p, Placement::Owned { accelerator_topology: None, .. }) {
                out.push((
                    "placement.accelerator_topology",
                    format!("is not set: GCE requires acceleratorTopology in the workload policy of {mt} MIGs (e.g. \"1x72\")"),
                ));
            }
            if !a4x && p.accelerator_topology().is_some() {
                out.push((
                    "placement.accelerator_topology",
                    format!("is for A4X and A4X Max only, not {f} ({mt}): use max_topology_distance"),
                ));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TopologyDistance;

    #[test]
    fn what_gce_refuses() {
        let dist = Placement::Owned {
            max_topology_distance: Some(TopologyDistance::Block),
            accelerator_topology: None,
        };
        let accel =
            Placement::Owned { max_topology_distance: None, accelerator_topology: Some("1x72".into()) };
        use ProvisioningModel::*;
        // (machine type, model, placement, fields refused)
        let table: &[(&str, ProvisioningModel, Option<&Placement>, &[&str])] = &[
            ("a3-ultragpu-8g", Flex, Some(&dist), &[]),
            ("a4-highgpu-8g", Flex, Some(&dist), &[]),
            ("a3-megagpu-8g", Flex, Some(&dist), &["placement.max_topology_distance"]),
            ("a3-megagpu-8g", Spot, Some(&dist), &[]),
            ("h4d-highmem-192", Flex, Some(&dist), &["placement.max_topology_distance"]),
            ("h4d-highmem-192", Standard, Some(&dist), &[]),
            ("n2-standard-8", Spot, Some(&dist), &["placement.max_topology_distance"]),
            ("n2-standard-8", Spot, None, &[]),
            ("a4x-highgpu-4g", Spot, Some(&accel), &[]),
            ("a4x-highgpu-4g", Spot, None, &["placement.accelerator_topology"]),
            ("a4x-highgpu-4g", Spot, Some(&dist), &["placement.accelerator_topology"]),
            ("a4x-highgpu-4g", Flex, Some(&accel), &["placement.accelerator_topology"]),
            ("a3-ultragpu-8g", Flex, Some(&accel), &["placement.accelerator_topology"]),
        ];
        for (mt, model, p, fields) in table {
            let got: Vec<&str> = placement_problems(mt, *model, *p).into_iter().map(|(f, _)| f).collect();
            assert_eq!(&got, fields, "{mt} {model} {p:?}");
        }
    }

    /// The simulator's copy of the table: the same prefixes in the same order, each with the same
    /// flex-start answer. The family names only go into messages, and ours may say more of what the
    /// prefix matches ("A3 High (8 GPUs)" where GCE's errors, and so the simulator's, say "A3 High").
    #[test]
    fn the_simulator_takes_policies_for_the_same_families() {
        let sim = gce_sim::state::POLICY_FAMILIES;
        let rule = |t: &[(&'static str, &'static str, bool)]| -> Vec<(&'static str, bool)> {
            t.iter().map(|&(prefix, _, flex)| (prefix, flex)).collect()
        };
        assert_eq!(rule(POLICY_FAMILIES), rule(sim));
        for ((_, ours, _), (_, theirs, _)) in POLICY_FAMILIES.iter().zip(sim) {
            assert!(ours.starts_with(theirs), "{ours} / {theirs}");
        }
    }
}
