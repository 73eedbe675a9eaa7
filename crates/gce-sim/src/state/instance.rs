//! VMs and instance templates: the VM lifecycle (PROVISIONING → STAGING → RUNNING, TERMINATED on a
//! host failure), get, list, rendering, and deletion at the end of the run duration.

use super::*;

/// The `status` of a VM that is not being deleted (a VM being deleted shows STOPPING).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VmStatus {
    Provisioning,
    Staging,
    Running,
    /// Down after a host failure (or stopped at the end of its run duration when its template says
    /// `instanceTerminationAction: STOP`); stays until deleted or repaired.
    Terminated,
    /// Its host was reported faulty (`instances.reportHostAsFaulty`): it moves to another host and
    /// starts again (STAGING, then RUNNING).
    Repairing,
}

impl VmStatus {
    pub fn name(self) -> &'static str {
        match self {
            VmStatus::Provisioning => "PROVISIONING",
            VmStatus::Staging => "STAGING",
            VmStatus::Running => "RUNNING",
            VmStatus::Terminated => "TERMINATED",
            VmStatus::Repairing => "REPAIRING",
        }
    }
}

/// A VM created by a resize request.
#[derive(Clone, Debug)]
pub struct Instance {
    pub project: String,
    pub zone: String,
    pub name: String,
    pub(super) id: u64,
    pub(super) mig: MigKey,
    pub(super) template: String,
    pub(super) created: DateTime<Utc>,
    pub(super) run_seconds: i64,
    pub termination: DateTime<Utc>,
    pub(super) network_ip: String,
    /// Copied from the template when the VM was created.
    pub(super) machine_type: String,
    pub(super) scheduling: Value,
    pub(super) labels: Option<Value>,
    pub status: VmStatus,
    /// When the next lifecycle step happens (PROVISIONING → STAGING → RUNNING, or a repair starts).
    pub(super) next_at: Option<DateTime<Utc>>,
    /// The boot command ran and the stop command has not.
    pub(super) booted: bool,
    pub(super) last_start: Option<DateTime<Utc>>,
    /// The MIG is recreating it after a failure (policy REPAIR).
    pub(super) repairing: bool,
    /// Set by `deleteInstances`: the VM is STOPPING and disappears at that time.
    pub(super) deleting_at: Option<DateTime<Utc>>,
    /// The host it runs on (`placement.rs`); `None` when its zone had no free host.
    pub(super) host: Option<super::Slot>,
    /// The reservation unit it consumes (`consume.rs`).
    pub(super) consumed: Option<super::Consumed>,
    /// The Operation of a `reportHostAsFaulty` under way: DONE when the VM runs again.
    pub(super) host_report: Option<String>,
    /// How many times a host report moved it to another host (its reserved host changes with it).
    pub(super) host_moves: u32,
    /// `resourceStatus.upcomingMaintenance` as the control API set it (an `UpcomingMaintenance`,
    /// checked against the discovery document); `None`: GCE plans no maintenance for the VM.
    pub(super) upcoming_maintenance: Option<Value>,
}

impl Instance {
    pub fn url(&self) -> String {
        format!("{GCE_BASE}projects/{}/zones/{}/instances/{}", self.project, self.zone, self.name)
    }

    /// `status` as GCE shows it.
    pub fn status_name(&self) -> &'static str {
        if self.deleting_at.is_some() {
            "STOPPING"
        } else {
            self.status.name()
        }
    }

    /// Still coming up (or being recreated): the MIG's action on it is CREATING / RECREATING.
    pub(super) fn is_coming_up(&self) -> bool {
        matches!(self.status, VmStatus::Provisioning | VmStatus::Staging) || self.repairing
    }

    fn termination_action(&self) -> &str {
        self.scheduling.get("instanceTerminationAction").and_then(Value::as_str).unwrap_or("DELETE")
    }
}

/// The properties of the template a MIG or VM uses when it was never loaded: a FLEX_START template
/// as slurm-dws wants them (see reference/GCE.md).
pub(super) fn default_template_properties(project: &str) -> Value {
    json!({
        "machineType": "a3-ultragpu-8g",
        "scheduling": {
            "provisioningModel": "FLEX_START",
            "instanceTerminationAction": "DELETE",
            "onHostMaintenance": "TERMINATE",
            "automaticRestart": false,
        },
        "reservationAffinity": {"consumeReservationType": "NO_RESERVATION"},
        "networkInterfaces": [{"network": format!("{GCE_BASE}projects/{project}/global/networks/default")}],
    })
}

/// The properties of the template a URL names among `templates`, else the FLEX_START default.
pub(super) fn properties(templates: &BTreeMap<String, Value>, project: &str, url: &str) -> Value {
    templates
        .get(last_segment(url))
        .and_then(|t| t.get("properties"))
        .cloned()
        .unwrap_or_else(|| default_template_properties(project))
}

impl State {
    // ----- instances and templates -----------------------------------------------------------

    pub fn instance_json(&self, project: &str, zone: &str, name: &str) -> Result<Value, ApiError> {
        self.instances
            .get(&(project.to_string(), zone.to_string(), name.to_string()))
            .map(|vm| self.render_instance(vm))
            .ok_or_else(|| ApiError::not_found(&format!("projects/{project}/zones/{zone}/instances/{name}")))
    }

    /// VMs of a project, optionally of one zone, in key order (zone, then name), not rendered.
    pub fn instances_of<'a>(
        &'a self,
        project: &'a str,
        zone: Option<&'a str>,
    ) -> impl Iterator<Item = &'a Instance> + 'a {
        self.instances.values().filter(move |vm| vm.project == project && zone.is_none_or(|z| z == vm.zone))
    }

    pub fn render_instance(&self, vm: &Instance) -> Value {
        let mut scheduling = vm.scheduling.clone();
        if vm.run_seconds > 0 {
            scheduling["maxRunDuration"] = json!({"seconds": vm.run_seconds.to_string()});
        }
        let creator = format!(
            "projects/{}/{}/instanceGroupManagers/{}",
            project_number(&vm.project),
            vm.mig.scope.path(),
            vm.mig.name
        );
        let mut o = json!({
            "kind": "compute#instance",
            "id": vm.id.to_string(),
            "creationTimestamp": ts(vm.created),
            "name": vm.name,
            "machineType": format!("{GCE_BASE}projects/{}/zones/{}/machineTypes/{}", vm.project, vm.zone, last_segment(&vm.machine_type)),
            "status": vm.status_name(),
            "zone": format!("{GCE_BASE}projects/{}/zones/{}", vm.project, vm.zone),
            "networkInterfaces": [{
                "kind": "compute#networkInterface",
                "name": "nic0",
                "network": format!("{GCE_BASE}projects/{}/global/networks/default", vm.project),
                "networkIP": vm.network_ip,
                "stackType": "IPV4_ONLY",
            }],
            "metadata": {
                "kind": "compute#metadata",
                "fingerprint": "c2ltdWxhdG9y",
                "items": [
                    {"key": "created-by", "value": creator},
                    {"key": "instance-template", "value": vm.template},
                ],
            },
            "scheduling": scheduling,
            "selfLink": vm.url(),
        });
        if vm.run_seconds > 0 {
            o["resourceStatus"] = json!({"scheduling": {"terminationTimestamp": ts(vm.termination)}});
        }
        // GCE reports where a VM runs once it has a host (not while PROVISIONING), for VMs of a MIG
        // with a HIGH_THROUGHPUT workload policy ("About workload policies for MIGs").
        let placed = self.migs.get(&vm.mig).is_some_and(|m| m.placement.is_some());
        if let (Some(slot), false, true) = (vm.host, vm.status == VmStatus::Provisioning, placed) {
            let t = super::topology_json(&vm.zone, slot);
            o["resourceStatus"]["physicalHost"] = json!(format!(
                "/{}/{}/{}",
                t["block"].as_str().unwrap_or_default(),
                t["subblock"].as_str().unwrap_or_default(),
                t["host"].as_str().unwrap_or_default()
            ));
            o["resourceStatus"]["physicalHostTopology"] = t;
        }
        // A VM on a reservation says which (and, in a reservation with blocks, where it runs:
        // the block's and sub-block's topology, as GCE shows for dense reservations).
        if let Some(c) = &vm.consumed {
            if let Some(r) = self.reservations.get(&c.res) {
                o["resourceStatus"]["reservationConsumptionInfo"] = r.consumption_info(c.bucket);
                if let (Some(t), false) =
                    (r.vm_topology(c.bucket, &vm.name, vm.host_moves), vm.status == VmStatus::Provisioning)
                {
                    o["resourceStatus"]["physicalHost"] = json!(format!(
                        "/{}/{}/{}",
                        t["block"].as_str().unwrap_or_default(),
                        t["subblock"].as_str().unwrap_or_default(),
                        t["host"].as_str().unwrap_or_default()
                    ));
                    o["resourceStatus"]["physicalHostTopology"] = t;
                }
            }
        }
        if let Some(m) = &vm.upcoming_maintenance {
            o["resourceStatus"]["upcomingMaintenance"] = m.clone();
        }
        if let Some(t) = vm.last_start {
            o["lastStartTimestamp"] = json!(ts(t));
        }
        if let Some(labels) = &vm.labels {
            o["labels"] = labels.clone();
        }
        o
    }

    /// The properties of the template a URL names: the loaded one, else the FLEX_START default.
    pub(super) fn template_properties(&self, project: &str, url: &str) -> Value {
        properties(&self.templates, project, url)
    }

    /// `instanceTemplates.get` / `regionInstanceTemplates.get`: a loaded template (by name, whatever
    /// the project or scope); one never loaded is a 404 unless the control API says to serve defaults.
    pub fn template_json(&self, project: &str, scope: &Scope, name: &str) -> Result<Value, ApiError> {
        let path = format!("projects/{project}/{}/instanceTemplates/{name}", scope.path());
        let mut t = match self.templates.get(name) {
            Some(t) => t.clone(),
            None if self.serve_default_templates => {
                json!({"name": name, "properties": default_template_properties(project)})
            }
            None => return Err(ApiError::not_found(&path)),
        };
        let obj = t.as_object_mut().expect("templates are objects");
        obj.insert("kind".into(), json!("compute#instanceTemplate"));
        obj.entry("id").or_insert_with(|| json!(project_number(name).to_string()));
        obj.entry("creationTimestamp").or_insert_with(|| json!("2026-01-01T00:00:00.000+00:00"));
        obj.insert("selfLink".into(), json!(format!("{GCE_BASE}{path}")));
        if let Scope::Region(_) = scope {
            scope.annotate(project, obj);
        }
        Ok(t)
    }

    /// Makes a VM for a MIG from its template, PROVISIONING from `now`; returns its zone.
    pub(super) fn create_vm(
        &mut self,
        mig: &MigKey,
        name: &str,
        run_seconds: i64,
        now: DateTime<Utc>,
    ) -> Option<String> {
        let m = self.migs.get(mig)?;
        let (zone, template) = (m.zone.clone(), m.template.clone());
        let props = self.template_properties(&mig.project, &template);
        let real_ms = (run_seconds as f64 * 1000.0 / self.time_scale).round() as i64;
        let n = self.next_ip;
        self.next_ip += 1;
        let mut scheduling = props.get("scheduling").cloned().unwrap_or_else(|| json!({}));
        if scheduling.get("provisioningModel").is_none() {
            // GCE: a template that does not name the model gets STANDARD VMs (reference/GCE.md).
            scheduling["provisioningModel"] = json!("STANDARD");
        }
        let vm = Instance {
            project: mig.project.clone(),
            zone: zone.clone(),
            name: name.to_string(),
            id: new_id(),
            mig: mig.clone(),
            template,
            created: now,
            run_seconds,
            // No run duration (standard and spot VMs, `createInstances`): it runs until deleted.
            termination: if run_seconds > 0 { later(now, real_ms) } else { DateTime::<Utc>::MAX_UTC },
            network_ip: format!("10.{}.{}.{}", (n >> 16) & 255, (n >> 8) & 255, n & 255),
            machine_type: props
                .get("machineType")
                .and_then(Value::as_str)
                .unwrap_or("a3-ultragpu-8g")
                .to_string(),
            scheduling,
            labels: props.get("labels").cloned(),
            status: VmStatus::Provisioning,
            next_at: Some(now + ms(self.lifecycle.provisioning_ms)),
            booted: false,
            last_start: None,
            repairing: false,
            deleting_at: None,
            host: None,
            consumed: None,
            host_report: None,
            host_moves: 0,
            upcoming_maintenance: None,
        };
        let mut vm = vm;
        vm.host = self.take_slot(&(vm.project.clone(), zone.clone(), name.to_string()));
        self.wake(vm.next_at.unwrap_or(now).min(vm.termination));
        self.vm_made(&vm);
        self.instances.insert((vm.project.clone(), zone.clone(), name.to_string()), vm);
        if let Some(m) = self.migs.get_mut(mig) {
            m.vms.insert(name.to_string());
        }
        Some(zone)
    }

    /// Lifecycle steps that are due: PROVISIONING → STAGING → RUNNING (the boot command runs), and
    /// repairs that start (TERMINATED → PROVISIONING, as a new VM of the same name).
    pub(super) fn advance_vms(&mut self, now: DateTime<Utc>, effects: &mut Vec<Effect>) {
        let Lifecycle { provisioning_ms, staging_ms, .. } = self.lifecycle;
        let mut reports_done = Vec::new();
        for vm in self.instances.values_mut().filter(|vm| vm.deleting_at.is_none()) {
            if vm.status == VmStatus::Repairing && std::mem::take(&mut vm.booted) {
                effects.push(Effect::Stop(vm.name.clone())); // it left its faulty host
            }
            while let Some(at) = vm.next_at.filter(|t| now >= *t) {
                match vm.status {
                    VmStatus::Provisioning => {
                        vm.status = VmStatus::Staging;
                        vm.next_at = Some(at + ms(staging_ms));
                    }
                    VmStatus::Staging => {
                        vm.status = VmStatus::Running;
                        vm.next_at = None;
                        vm.repairing = false;
                        vm.booted = true;
                        vm.last_start = Some(now);
                        effects.push(Effect::Boot(vm.name.clone()));
                        reports_done.extend(vm.host_report.take());
                    }
                    VmStatus::Repairing => {
                        vm.status = VmStatus::Staging;
                        vm.next_at = Some(at + ms(staging_ms));
                    }
                    VmStatus::Terminated if vm.repairing => {
                        vm.status = VmStatus::Provisioning;
                        vm.id = new_id();
                        vm.next_at = Some(at + ms(provisioning_ms));
                    }
                    VmStatus::Running | VmStatus::Terminated => vm.next_at = None,
                }
            }
        }
        for op in reports_done {
            if let Some(o) = self.operations.get_mut(&op) {
                o.done_at = Some(now);
            }
        }
    }

    /// Control API: GCE announces (or moves) a maintenance window of the VM named `name`
    /// (`Some`, an `UpcomingMaintenance`), or no longer plans one (`None`: cancelled or done).
    /// `false` if there is no such VM.
    pub fn set_upcoming_maintenance(&mut self, name: &str, maintenance: Option<Value>) -> bool {
        let mut found = false;
        for vm in self.instances.values_mut().filter(|vm| vm.name == name) {
            vm.upcoming_maintenance = maintenance.clone();
            found = true;
        }
        found
    }

    /// Control API: the host of this VM fails. The VM goes TERMINATED (the stop command runs if it
    /// had booted); a MIG with `defaultActionOnFailure: DO_NOTHING` leaves it so, any other MIG
    /// recreates it (REPAIR, GCE's default). `None` if there is no such VM.
    pub fn fail(&mut self, name: &str, now: DateTime<Utc>) -> Option<Vec<Effect>> {
        let keys: Vec<InstanceKey> = self.instances.keys().filter(|k| k.2 == name).cloned().collect();
        if keys.is_empty() {
            return None;
        }
        let mut effects = Vec::new();
        for k in keys {
            let repair = {
                let vm = &self.instances[&k];
                self.migs.get(&vm.mig).is_some_and(|m| !m.do_nothing_on_failure())
            };
            let vm = self.instances.get_mut(&k).expect("listed above");
            if vm.deleting_at.is_some() || vm.status == VmStatus::Terminated {
                continue;
            }
            vm.status = VmStatus::Terminated;
            vm.repairing = repair;
            vm.next_at = repair.then(|| now + ms(DELETE_MS));
            if std::mem::take(&mut vm.booted) {
                effects.push(Effect::Stop(vm.name.clone()));
            }
            if repair {
                self.wake(now + ms(DELETE_MS));
            }
        }
        Some(effects)
    }

    /// Control API: GCE deletes the VM now, as at the end of its run duration.
    pub fn expire(&mut self, name: &str, now: DateTime<Utc>) -> Option<Vec<Effect>> {
        let keys: Vec<InstanceKey> = self.instances.keys().filter(|k| k.2 == name).cloned().collect();
        if keys.is_empty() {
            return None;
        }
        let mut effects = Vec::new();
        for k in keys {
            if let Some(vm) = self.instances.get_mut(&k) {
                vm.termination = now;
            }
            effects.extend(self.end_of_vm(&k, now));
        }
        Some(effects)
    }

    /// A VM whose deletion finished or whose run duration ended: gone (or TERMINATED, if its
    /// template's `instanceTerminationAction` is STOP and nobody is deleting it).
    pub(super) fn end_of_vm(&mut self, key: &InstanceKey, now: DateTime<Utc>) -> Option<Effect> {
        let vm = self.instances.get_mut(key)?;
        if vm.deleting_at.is_none() && vm.termination_action() == "STOP" {
            vm.status = VmStatus::Terminated;
            vm.next_at = None;
            vm.repairing = false;
            vm.termination = DateTime::<Utc>::MAX_UTC;
            return std::mem::take(&mut vm.booted).then(|| Effect::Stop(vm.name.clone()));
        }
        let vm = self.instances.remove(key)?;
        self.vm_gone(vm.id, now);
        self.free_slot(&vm.zone, vm.host);
        if let Some(mig) = self.migs.get_mut(&vm.mig) {
            mig.vms.remove(&vm.name);
            if vm.deleting_at.is_none() {
                if vm.run_seconds == 0 && mig.do_nothing_on_failure() {
                    // GCE deleted a VM with no run duration (a preempted spot VM): a MIG that does
                    // nothing on failure neither recreates it nor forgets it. The member stays,
                    // with no VM, and so does the targetSize.
                    mig.vanished.insert(vm.name.clone());
                } else {
                    // The end of a Flex VM's run duration: the VM leaves its MIG.
                    mig.target_size -= 1;
                }
            }
        }
        vm.booted.then_some(Effect::Stop(vm.name))
    }
}
