//! Whether an instance template fits its nodeset's provisioning model: Flex (`template_check.rs`),
//! spot, or standard (docs/gce-facts.md, "Instance templates").
//!
//! A spot nodeset's template must say `provisioningModel: SPOT` (else its VMs come up STANDARD,
//! billed as such) and `instanceTerminationAction: DELETE` (STOP would leave every preempted VM
//! TERMINATED, holding its name and disk). A standard nodeset's must not say FLEX_START (a
//! `createInstances` of a Flex Start template is not how DWS capacity is obtained) nor SPOT (its
//! VMs would be preempted while the admin asked for on-demand ones).

use super::client::Client;
use super::error::GceError;
use super::template_check::{check_flex_template, flex_template_problems, TemplateProblem};
use super::types::InstanceTemplate;
use crate::config::ProvisioningModel;

const SPOT: &str = "a spot nodeset";
const STANDARD: &str = "a standard nodeset";

/// The fields of `t` that do not fit `model`; empty when it fits.
pub fn template_problems(t: &InstanceTemplate, model: ProvisioningModel) -> Vec<TemplateProblem> {
    let sched = t.properties.as_ref().and_then(|p| p.scheduling.clone()).unwrap_or_default();
    let found = |v: &str| (!v.is_empty()).then(|| v.to_string());
    let mut problems = Vec::new();
    match model {
        ProvisioningModel::Flex => return flex_template_problems(t),
        ProvisioningModel::Spot => {
            if sched.provisioning_model != "SPOT" {
                problems.push(TemplateProblem {
                    field: "properties.scheduling.provisioningModel",
                    found: found(&sched.provisioning_model),
                    needed: "SPOT",
                    model: SPOT,
                });
            }
            if sched.instance_termination_action != "DELETE" {
                problems.push(TemplateProblem {
                    field: "properties.scheduling.instanceTerminationAction",
                    found: found(&sched.instance_termination_action),
                    needed: "DELETE",
                    model: SPOT,
                });
            }
        }
        ProvisioningModel::Standard => {
            if matches!(sched.provisioning_model.as_str(), "FLEX_START" | "SPOT") {
                problems.push(TemplateProblem {
                    field: "properties.scheduling.provisioningModel",
                    found: found(&sched.provisioning_model),
                    needed: "STANDARD (or not set)",
                    model: STANDARD,
                });
            }
        }
    }
    problems
}

/// Reads the template `reference` names and checks it against `model` (a 404 is one problem, any
/// other failure to read it the error), as [`check_flex_template`] does for Flex.
pub async fn check_template(
    client: &Client,
    reference: &str,
    model: ProvisioningModel,
) -> Result<Vec<TemplateProblem>, GceError> {
    if model.is_flex() {
        return check_flex_template(client, reference).await;
    }
    match client.get_instance_template_ref(reference).await {
        Ok(t) => Ok(template_problems(&t, model)),
        Err(e) if e.is_not_found() => Ok(vec![TemplateProblem {
            field: "instance_template",
            found: Some(format!("{reference}, which GCE does not have (404)")),
            needed: "an existing instance template",
            model: if model == ProvisioningModel::Spot { SPOT } else { STANDARD },
        }]),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn template(scheduling: serde_json::Value) -> InstanceTemplate {
        serde_json::from_value(
            json!({"name": "t", "properties": {"machineType": "n2-standard-8", "scheduling": scheduling}}),
        )
        .unwrap()
    }

    #[test]
    fn each_model_checks_what_its_vms_need() {
        let spot = template(json!({"provisioningModel": "SPOT", "instanceTerminationAction": "DELETE"}));
        let spot_stop = template(json!({"provisioningModel": "SPOT", "instanceTerminationAction": "STOP"}));
        let flex = template(json!({"provisioningModel": "FLEX_START", "instanceTerminationAction": "DELETE",
                                   "onHostMaintenance": "TERMINATE"}));
        let plain = template(json!({}));
        let std = template(json!({"provisioningModel": "STANDARD"}));
        let printed = |t: &InstanceTemplate, m| -> Vec<String> {
            template_problems(t, m).iter().map(ToString::to_string).collect()
        };
        let table: Vec<(&str, &InstanceTemplate, ProvisioningModel, Vec<&str>)> = vec![
            ("spot fits spot", &spot, ProvisioningModel::Spot, vec![]),
            (
                "a spot VM that stops",
                &spot_stop,
                ProvisioningModel::Spot,
                vec!["properties.scheduling.instanceTerminationAction is STOP, a spot nodeset needs DELETE"],
            ),
            (
                "a standard template for spot",
                &plain,
                ProvisioningModel::Spot,
                vec![
                    "properties.scheduling.provisioningModel is not set, a spot nodeset needs SPOT",
                    "properties.scheduling.instanceTerminationAction is not set, a spot nodeset needs DELETE",
                ],
            ),
            ("not set fits standard", &plain, ProvisioningModel::Standard, vec![]),
            ("STANDARD fits standard", &std, ProvisioningModel::Standard, vec![]),
            (
                "flex start for standard",
                &flex,
                ProvisioningModel::Standard,
                vec!["properties.scheduling.provisioningModel is FLEX_START, a standard nodeset needs STANDARD (or not set)"],
            ),
            (
                "spot for standard",
                &spot,
                ProvisioningModel::Standard,
                vec!["properties.scheduling.provisioningModel is SPOT, a standard nodeset needs STANDARD (or not set)"],
            ),
            ("flex fits flex", &flex, ProvisioningModel::Flex, vec![]),
            (
                "spot for flex",
                &spot,
                ProvisioningModel::Flex,
                vec![
                    "properties.scheduling.provisioningModel is SPOT, DWS Flex Start needs FLEX_START",
                    "properties.scheduling.onHostMaintenance is not set, DWS Flex Start needs TERMINATE",
                ],
            ),
        ];
        for (case, t, m, want) in table {
            assert_eq!(printed(t, m), want, "{case}");
        }
    }
}
