//! Whether an instance template can work for DWS Flex Start: a pure check of the template, and the
//! read of a nodeset's template by the URL form its config gives.
//!
//! A resize request in a MIG whose template is not a Flex Start one does not fail cleanly: a template
//! without `provisioningModel: FLEX_START` gives STANDARD VMs (billed as such, no run duration), one
//! that stops instead of deleting leaves TERMINATED VMs behind, and a reservation affinity makes GCE
//! look for a reservation (docs/gce-facts.md, "Instance templates"). So slurm-dws reads each
//! nodeset's template (daemon start, reload, `check-config --online`) and refuses one that cannot work,
//! naming the field and the value it needs.

use super::client::Client;
use super::error::GceError;
use super::types::InstanceTemplate;

/// The [`TemplateProblem::model`] of a Flex nodeset's problems.
pub const FLEX: &str = "DWS Flex Start";

/// One field of a template that does not fit DWS Flex Start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateProblem {
    /// The field, as the template's JSON spells it (`properties.scheduling.provisioningModel`).
    pub field: &'static str,
    /// What the template has (`None`: not set).
    pub found: Option<String>,
    /// What the nodeset's provisioning model needs.
    pub needed: std::borrow::Cow<'static, str>,
    /// Who needs it: "DWS Flex Start", "a spot nodeset", "a standard nodeset".
    pub model: &'static str,
}

impl std::fmt::Display for TemplateProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.found {
            Some(v) => write!(f, "{} is {v}, {} needs {}", self.field, self.model, self.needed),
            None => write!(f, "{} is not set, {} needs {}", self.field, self.model, self.needed),
        }
    }
}

/// The fields of `t` that cannot work for DWS Flex Start, in the order the template lists them;
/// empty when it fits. Needs `scheduling.provisioningModel: FLEX_START`,
/// `scheduling.instanceTerminationAction: DELETE`, `scheduling.onHostMaintenance: TERMINATE`, and
/// no reservation affinity (`reservationAffinity` absent, or `consumeReservationType:
/// NO_RESERVATION`; when the object is there its type's default is ANY_RESERVATION).
pub fn flex_template_problems(t: &InstanceTemplate) -> Vec<TemplateProblem> {
    let props = t.properties.clone().unwrap_or_default();
    let sched = props.scheduling.unwrap_or_default();
    let mut problems = Vec::new();
    let mut need = |field: &'static str, value: &str, needed: &'static str| {
        if value != needed {
            let found = (!value.is_empty()).then(|| value.to_string());
            problems.push(TemplateProblem { field, found, needed: needed.into(), model: FLEX });
        }
    };
    need("properties.scheduling.provisioningModel", &sched.provisioning_model, "FLEX_START");
    need("properties.scheduling.instanceTerminationAction", &sched.instance_termination_action, "DELETE");
    need("properties.scheduling.onHostMaintenance", &sched.on_host_maintenance, "TERMINATE");
    if let Some(r) = &props.reservation_affinity {
        need(
            "properties.reservationAffinity.consumeReservationType",
            &r.consume_reservation_type,
            "NO_RESERVATION",
        );
    }
    problems
}

/// Reads the template `reference` names (a URL or partial URL, global or regional, as a nodeset's
/// `instance_template` gives it) and checks it. A template GCE does not have (404) is one problem of
/// field `instance_template`; any other failure to read it is the error (nothing is concluded).
pub async fn check_flex_template(client: &Client, reference: &str) -> Result<Vec<TemplateProblem>, GceError> {
    match client.get_instance_template_ref(reference).await {
        Ok(t) => Ok(flex_template_problems(&t)),
        Err(e) if e.is_not_found() => Ok(vec![TemplateProblem {
            field: "instance_template",
            found: Some(format!("{reference}, which GCE does not have (404)")),
            needed: "an existing instance template".into(),
            model: FLEX,
        }]),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn template(scheduling: Value, extra: Value) -> InstanceTemplate {
        let mut props = json!({"machineType": "a3-ultragpu-8g", "scheduling": scheduling});
        if let (Some(p), Some(e)) = (props.as_object_mut(), extra.as_object()) {
            p.extend(e.clone());
        }
        serde_json::from_value(json!({"name": "t", "properties": props})).unwrap()
    }

    fn flex() -> Value {
        json!({"provisioningModel": "FLEX_START", "instanceTerminationAction": "DELETE",
               "onHostMaintenance": "TERMINATE", "automaticRestart": false})
    }

    /// (case, scheduling, other properties, problems as printed).
    type Case = (&'static str, Value, Value, Vec<&'static str>);

    #[test]
    fn only_a_flex_start_template_fits() {
        let with = |k: &str, v: Value| {
            let mut s = flex();
            s[k] = v;
            s
        };
        let without = |k: &str| {
            let mut s = flex();
            s.as_object_mut().unwrap().remove(k);
            s
        };
        let no_res = json!({"reservationAffinity": {"consumeReservationType": "NO_RESERVATION"}});
        let table: Vec<Case> = vec![
            ("flex start", flex(), json!({}), vec![]),
            ("flex start, no reservation", flex(), no_res, vec![]),
            (
                "standard",
                with("provisioningModel", json!("STANDARD")),
                json!({}),
                vec!["properties.scheduling.provisioningModel is STANDARD, DWS Flex Start needs FLEX_START"],
            ),
            (
                "model not set (VMs would come up STANDARD)",
                without("provisioningModel"),
                json!({}),
                vec!["properties.scheduling.provisioningModel is not set, DWS Flex Start needs FLEX_START"],
            ),
            (
                "spot",
                with("provisioningModel", json!("SPOT")),
                json!({}),
                vec!["properties.scheduling.provisioningModel is SPOT, DWS Flex Start needs FLEX_START"],
            ),
            (
                "stops at the end",
                with("instanceTerminationAction", json!("STOP")),
                json!({}),
                vec!["properties.scheduling.instanceTerminationAction is STOP, DWS Flex Start needs DELETE"],
            ),
            (
                "migrates on maintenance",
                with("onHostMaintenance", json!("MIGRATE")),
                json!({}),
                vec!["properties.scheduling.onHostMaintenance is MIGRATE, DWS Flex Start needs TERMINATE"],
            ),
            (
                "any reservation",
                flex(),
                json!({"reservationAffinity": {"consumeReservationType": "ANY_RESERVATION"}}),
                vec!["properties.reservationAffinity.consumeReservationType is ANY_RESERVATION, DWS Flex Start needs NO_RESERVATION"],
            ),
            (
                "a specific reservation",
                flex(),
                json!({"reservationAffinity": {"consumeReservationType": "SPECIFIC_RESERVATION",
                        "key": "compute.googleapis.com/reservation-name", "values": ["r1"]}}),
                vec!["properties.reservationAffinity.consumeReservationType is SPECIFIC_RESERVATION, DWS Flex Start needs NO_RESERVATION"],
            ),
            (
                "reservation affinity without a type (GCE's default: ANY_RESERVATION)",
                flex(),
                json!({"reservationAffinity": {}}),
                vec!["properties.reservationAffinity.consumeReservationType is not set, DWS Flex Start needs NO_RESERVATION"],
            ),
            (
                "no scheduling at all",
                json!(null),
                json!({}),
                vec![
                    "properties.scheduling.provisioningModel is not set, DWS Flex Start needs FLEX_START",
                    "properties.scheduling.instanceTerminationAction is not set, DWS Flex Start needs DELETE",
                    "properties.scheduling.onHostMaintenance is not set, DWS Flex Start needs TERMINATE",
                ],
            ),
        ];
        for (case, scheduling, extra, want) in table {
            let got: Vec<String> = flex_template_problems(&template(scheduling, extra))
                .iter()
                .map(ToString::to_string)
                .collect();
            assert_eq!(got, want, "{case}");
        }
        let empty: InstanceTemplate = serde_json::from_value(json!({"name": "t"})).unwrap();
        assert_eq!(flex_template_problems(&empty).len(), 3, "a template without properties");
    }
}
