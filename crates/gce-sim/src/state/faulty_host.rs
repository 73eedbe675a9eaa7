//! `instances.reportHostAsFaulty`: a RUNNING reservation-bound VM leaves its host and starts again on
//! another (REPAIRING, then STAGING, then RUNNING; its Operation is DONE when it runs again). Any other
//! VM is refused as GCE refuses it (docs/gce-facts.md, "Faulty hosts").

use super::*;

/// The error GCE gives a VM that is not reservation-bound (flex, spot, standard).
pub const NOT_RESERVATION_BOUND: &str = "INSTANCES_WITHOUT_RESERVATION_NOT_SUPPORTED";

impl State {
    /// Reports the host of VM `name` faulty. The body was checked against the schema already; here
    /// what the schema cannot say: `disruptionSchedule` IMMEDIATE, at least one fault reason with a
    /// behaviour, a RUNNING reservation-bound VM with no report under way. Returns the Operation.
    pub fn report_host_as_faulty(
        &mut self,
        project: &str,
        zone: &str,
        name: &str,
        body: &Value,
        now: DateTime<Utc>,
    ) -> Result<String, ApiError> {
        let key = (project.to_string(), zone.to_string(), name.to_string());
        let path = format!("projects/{project}/zones/{zone}/instances/{name}");
        let vm = self.instances.get(&key).ok_or_else(|| ApiError::not_found(&path))?;
        if body.get("disruptionSchedule").and_then(Value::as_str) != Some("IMMEDIATE") {
            return Err(ApiError::invalid(
                "Invalid value for field 'resource.disruptionSchedule': only IMMEDIATE is supported.",
            ));
        }
        let reasons = body.get("faultReasons").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
        let behaviors: Vec<&str> =
            reasons.iter().filter_map(|r| r.get("behavior").and_then(Value::as_str)).collect();
        if behaviors.is_empty() || behaviors.contains(&"BEHAVIOR_UNSPECIFIED") {
            return Err(ApiError::invalid(
                "Invalid value for field 'resource.faultReasons': at least one fault reason with a behavior is required.",
            ));
        }
        let model = vm.scheduling.get("provisioningModel").and_then(Value::as_str).unwrap_or("STANDARD");
        if model != "RESERVATION_BOUND" {
            return Err(ApiError::new(
                400,
                NOT_RESERVATION_BOUND,
                format!(
                    "Instance '{name}' is not supported for this operation: reporting a host as faulty is supported only for reservation-bound instances (its provisioning model is {model})."
                ),
            ));
        }
        if vm.host_report.is_some() {
            return Err(ApiError::new(
                400,
                "FAILED_WITH_UNEXPECTED_STATUS",
                format!("The resource '{path}' has a report of its host as faulty under way."),
            ));
        }
        if vm.deleting_at.is_some() || vm.status != VmStatus::Running {
            return Err(ApiError::new(
                400,
                "INSTANCE_SHOULD_BE_RUNNING",
                format!("The resource '{path}' is {}, not RUNNING.", vm.status_name()),
            ));
        }
        let target = vm.url();
        let target_id = vm.id;
        let op = self.new_op(
            project,
            Scope::Zone(zone.to_string()),
            "compute.instances.reportHostAsFaulty",
            target,
            target_id,
            now,
            None,
        );
        // A new host first (the old one is faulty: never taken again for this VM), then the old one freed.
        let new_host = self.take_slot(&key);
        let repair_ms = self.lifecycle.host_repair_ms;
        let vm = self.instances.get_mut(&key).expect("found above");
        let old_host = vm.host;
        vm.host = new_host.or(old_host);
        vm.host_moves += 1;
        vm.status = VmStatus::Repairing;
        vm.next_at = Some(now + ms(repair_ms));
        vm.host_report = Some(op.clone());
        if new_host.is_some() {
            self.free_slot(zone, old_host);
        }
        // The next tick stops what ran on the old host (`advance_vms`).
        self.wake(now);
        Ok(op)
    }
}
