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
use super::template_check::{flex_template_problems, TemplateProblem, FLEX};
use super::types::InstanceTemplate;
use crate::config::{ProvisioningModel, ReservationRef};

const SPOT: &str = "a spot nodeset";
const STANDARD: &str = "a standard nodeset";
const RESERVED: &str = "a reservation nodeset";

/// What a template must consume: `Some(r)` for a reservation nodeset whose reservation is known
/// (`r`), `None` for every other model, and for a calendar-mode nodeset before GCE has named the
/// reservation it will deliver (then only the affinity's form is checked).
pub type Consumes<'a> = Option<&'a ReservationRef>;

/// The fields of `t` that do not fit `model` (consuming `reservation`, for a reservation nodeset);
/// empty when it fits.
pub fn template_problems(
    t: &InstanceTemplate,
    model: ProvisioningModel,
    reservation: Consumes<'_>,
) -> Vec<TemplateProblem> {
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
                    needed: "SPOT".into(),
                    model: SPOT,
                });
            }
            if sched.instance_termination_action != "DELETE" {
                problems.push(TemplateProblem {
                    field: "properties.scheduling.instanceTerminationAction",
                    found: found(&sched.instance_termination_action),
                    needed: "DELETE".into(),
                    model: SPOT,
                });
            }
        }
        ProvisioningModel::Reservation => return reservation_problems(t, reservation),
        ProvisioningModel::Standard => {
            if matches!(sched.provisioning_model.as_str(), "FLEX_START" | "SPOT") {
                problems.push(TemplateProblem {
                    field: "properties.scheduling.provisioningModel",
                    found: found(&sched.provisioning_model),
                    needed: "STANDARD (or not set)".into(),
                    model: STANDARD,
                });
            }
        }
    }
    problems
}

/// A reservation nodeset's template consumes exactly its reservation: `provisioningModel`
/// RESERVATION_BOUND (or STANDARD, or not set: GCE then takes the reservation for on-demand VMs),
/// and a `SPECIFIC_RESERVATION` affinity whose one value names the reservation, block or sub-block
/// (docs/gce-facts.md, "Reserved capacity"). Any other affinity would let GCE make VMs outside the
/// reservation (ANY_RESERVATION falls back to on-demand capacity) or none at all.
fn reservation_problems(t: &InstanceTemplate, reservation: Consumes<'_>) -> Vec<TemplateProblem> {
    let props = t.properties.clone().unwrap_or_default();
    let sched = props.scheduling.clone().unwrap_or_default();
    let found = |v: &str| (!v.is_empty()).then(|| v.to_string());
    let mut problems = Vec::new();
    if matches!(sched.provisioning_model.as_str(), "FLEX_START" | "SPOT") {
        problems.push(TemplateProblem {
            field: "properties.scheduling.provisioningModel",
            found: found(&sched.provisioning_model),
            needed: "RESERVATION_BOUND (or STANDARD)".into(),
            model: RESERVED,
        });
    }
    let affinity = props.reservation_affinity.unwrap_or_default();
    if affinity.consume_reservation_type != "SPECIFIC_RESERVATION" {
        problems.push(TemplateProblem {
            field: "properties.reservationAffinity.consumeReservationType",
            found: found(&affinity.consume_reservation_type),
            needed: "SPECIFIC_RESERVATION".into(),
            model: RESERVED,
        });
        return problems;
    }
    if affinity.key != RESERVATION_NAME_KEY {
        problems.push(TemplateProblem {
            field: "properties.reservationAffinity.key",
            found: found(&affinity.key),
            needed: RESERVATION_NAME_KEY.into(),
            model: RESERVED,
        });
    }
    let named = match (reservation, affinity.values.as_slice()) {
        (Some(r), [one]) => r.is_named_by(one),
        (None, [_]) => true,
        _ => false,
    };
    if !named {
        problems.push(TemplateProblem {
            field: "properties.reservationAffinity.values",
            found: (!affinity.values.is_empty()).then(|| format!("{:?}", affinity.values)),
            needed: match reservation {
                Some(r) => format!("[\"{}\"] (the configured reservation)", r.affinity_value()).into(),
                None => "one value, the reservation the future reservation delivers".into(),
            },
            model: RESERVED,
        });
    }
    problems
}

/// The `reservationAffinity.key` of a specific reservation.
pub const RESERVATION_NAME_KEY: &str = "compute.googleapis.com/reservation-name";

/// Reads the template `reference` names and checks it against `model` (a 404 is one problem, any
/// other failure to read it the error); a Flex template is judged by [`flex_template_problems`].
pub async fn check_template(
    client: &Client,
    reference: &str,
    model: ProvisioningModel,
    reservation: Consumes<'_>,
) -> Result<Vec<TemplateProblem>, GceError> {
    Ok(read_and_check_template(client, reference, model, reservation).await?.0)
}

/// [`check_template`] with the template it read (`None` when GCE does not have it), for a caller
/// that needs more of it (the daemon's usage spans take the machine type): one read, not two.
pub async fn read_and_check_template(
    client: &Client,
    reference: &str,
    model: ProvisioningModel,
    reservation: Consumes<'_>,
) -> Result<(Vec<TemplateProblem>, Option<InstanceTemplate>), GceError> {
    match client.get_instance_template_ref(reference).await {
        Ok(t) => {
            let problems = if model.is_flex() {
                flex_template_problems(&t)
            } else {
                template_problems(&t, model, reservation)
            };
            Ok((problems, Some(t)))
        }
        Err(e) if e.is_not_found() => Ok((
            vec![TemplateProblem {
                field: "instance_template",
                found: Some(format!("{reference}, which GCE does not have (404)")),
                needed: "an existing instance template".into(),
                model: match model {
                    ProvisioningModel::Flex => FLEX,
                    ProvisioningModel::Spot => SPOT,
                    ProvisioningModel::Reservation => RESERVED,
                    ProvisioningModel::Standard => STANDARD,
                },
            }],
            None,
        )),
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
            template_problems(t, m, None).iter().map(ToString::to_string).collect()
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

    #[test]
    fn a_reservation_template_consumes_exactly_its_reservation() {
        let r =
            crate::config::parse_reservation_url("projects/p/zones/us-central1-a/reservations/res").unwrap();
        let block = crate::config::parse_reservation_url(
            "projects/p/zones/us-central1-a/reservations/res/reservationBlocks/b1",
        )
        .unwrap();
        let t = |model: &str, affinity: serde_json::Value| -> InstanceTemplate {
            serde_json::from_value(json!({"name": "t", "properties": {"machineType": "a4-highgpu-8g",
                "scheduling": {"provisioningModel": model}, "reservationAffinity": affinity}}))
            .unwrap()
        };
        let specific = |v: &str| {
            json!({"consumeReservationType": "SPECIFIC_RESERVATION",
                   "key": "compute.googleapis.com/reservation-name", "values": [v]})
        };
        let printed = |t: &InstanceTemplate, r| -> Vec<String> {
            template_problems(t, ProvisioningModel::Reservation, r).iter().map(ToString::to_string).collect()
        };
        let table: Vec<(&str, InstanceTemplate, Option<&ReservationRef>, Vec<&str>)> = vec![
            ("bound, by name", t("RESERVATION_BOUND", specific("res")), Some(&r), vec![]),
            ("bound, by project path", t("RESERVATION_BOUND", specific("projects/p/reservations/res")), Some(&r), vec![]),
            ("standard, specific", t("STANDARD", specific("res")), Some(&r), vec![]),
            ("a block", t("RESERVATION_BOUND", specific("projects/p/reservations/res/reservationBlocks/b1")), Some(&block), vec![]),
            ("calendar mode before delivery: the form only", t("RESERVATION_BOUND", specific("anything")), None, vec![]),
            (
                "another reservation",
                t("RESERVATION_BOUND", specific("other")),
                Some(&r),
                vec!["properties.reservationAffinity.values is [\"other\"], a reservation nodeset needs [\"projects/p/reservations/res\"] (the configured reservation)"],
            ),
            (
                "the whole reservation where a block is configured",
                t("RESERVATION_BOUND", specific("res")),
                Some(&block),
                vec!["properties.reservationAffinity.values is [\"res\"], a reservation nodeset needs [\"projects/p/reservations/res/reservationBlocks/b1\"] (the configured reservation)"],
            ),
            (
                "any reservation",
                t("STANDARD", json!({"consumeReservationType": "ANY_RESERVATION"})),
                Some(&r),
                vec!["properties.reservationAffinity.consumeReservationType is ANY_RESERVATION, a reservation nodeset needs SPECIFIC_RESERVATION"],
            ),
            (
                "flex start",
                t("FLEX_START", specific("res")),
                Some(&r),
                vec!["properties.scheduling.provisioningModel is FLEX_START, a reservation nodeset needs RESERVATION_BOUND (or STANDARD)"],
            ),
            (
                "no affinity at all",
                serde_json::from_value(json!({"name": "t", "properties": {}})).unwrap(),
                Some(&r),
                vec!["properties.reservationAffinity.consumeReservationType is not set, a reservation nodeset needs SPECIFIC_RESERVATION"],
            ),
        ];
        for (what, template, r, want) in table {
            assert_eq!(printed(&template, r), want, "{what}");
        }
    }
}
