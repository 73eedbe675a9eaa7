//! VMs and instance templates: get, list, rendering, and deletion at the end of the run duration.

use super::*;

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
    /// Set by `deleteInstances`: the VM is STOPPING and disappears at that time.
    pub(super) deleting_at: Option<DateTime<Utc>>,
}

impl Instance {
    pub fn url(&self) -> String {
        format!("{GCE_BASE}projects/{}/zones/{}/instances/{}", self.project, self.zone, self.name)
    }
}

impl State {
    // ----- instances and templates -----------------------------------------------------------

    pub fn instance_json(&self, project: &str, zone: &str, name: &str) -> Result<Value, ApiError> {
        self.instances
            .get(&(project.to_string(), zone.to_string(), name.to_string()))
            .map(|vm| self.render_instance(vm))
            .ok_or_else(|| ApiError::not_found(&format!("projects/{project}/zones/{zone}/instances/{name}")))
    }

    /// VMs of a project, optionally of one zone, by zone then name.
    pub fn list_instances(&self, project: &str, zone: Option<&str>) -> Vec<(String, Value)> {
        self.instances
            .values()
            .filter(|vm| vm.project == project && zone.is_none_or(|z| z == vm.zone))
            .map(|vm| (vm.zone.clone(), self.render_instance(vm)))
            .collect()
    }

    pub(super) fn render_instance(&self, vm: &Instance) -> Value {
        let template = self.template_json(&vm.project, &Scope::Global, last_segment(&vm.template));
        let props = template.get("properties").cloned().unwrap_or_else(|| json!({}));
        let machine = props.get("machineType").and_then(Value::as_str).unwrap_or("a3-ultragpu-8g");
        let mut scheduling = props.get("scheduling").cloned().unwrap_or_else(|| json!({}));
        scheduling["provisioningModel"] = json!("FLEX_START");
        scheduling["maxRunDuration"] = json!({"seconds": vm.run_seconds.to_string()});
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
            "lastStartTimestamp": ts(vm.created),
            "name": vm.name,
            "machineType": format!("{GCE_BASE}projects/{}/zones/{}/machineTypes/{}", vm.project, vm.zone, last_segment(machine)),
            "status": if vm.deleting_at.is_some() { "STOPPING" } else { "RUNNING" },
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
            "resourceStatus": {"scheduling": {"terminationTimestamp": ts(vm.termination)}},
            "selfLink": vm.url(),
        });
        if let Some(labels) = props.get("labels") {
            o["labels"] = labels.clone();
        }
        o
    }

    /// A loaded template, or a FLEX_START template of that name.
    pub fn template_json(&self, project: &str, scope: &Scope, name: &str) -> Value {
        let mut t = self.templates.get(name).cloned().unwrap_or_else(|| {
            json!({
                "name": name,
                "properties": {
                    "machineType": "a3-ultragpu-8g",
                    "scheduling": {
                        "provisioningModel": "FLEX_START",
                        "instanceTerminationAction": "DELETE",
                        "onHostMaintenance": "TERMINATE",
                        "automaticRestart": false,
                    },
                    "reservationAffinity": {"consumeReservationType": "NO_RESERVATION"},
                    "networkInterfaces": [{"network": format!("{GCE_BASE}projects/{project}/global/networks/default")}],
                },
            })
        });
        let obj = t.as_object_mut().expect("templates are objects");
        obj.insert("kind".into(), json!("compute#instanceTemplate"));
        obj.entry("id").or_insert_with(|| json!(project_number(name).to_string()));
        obj.entry("creationTimestamp").or_insert_with(|| json!("2026-01-01T00:00:00.000+00:00"));
        obj.insert(
            "selfLink".into(),
            json!(format!("{GCE_BASE}projects/{project}/{}/instanceTemplates/{name}", scope.path())),
        );
        if let Scope::Region(_) = scope {
            scope.annotate(project, obj);
        }
        t
    }

    /// Control API: GCE deletes the VM now, as at the end of its run duration.
    pub fn expire(&mut self, name: &str) -> Vec<Effect> {
        let keys: Vec<InstanceKey> = self.instances.keys().filter(|k| k.2 == name).cloned().collect();
        keys.into_iter().filter_map(|k| self.expire_key(&k)).collect()
    }

    pub(super) fn expire_key(&mut self, key: &InstanceKey) -> Option<Effect> {
        let vm = self.instances.remove(key)?;
        if vm.deleting_at.is_none() {
            if let Some(mig) = self.migs.get_mut(&vm.mig) {
                mig.target_size -= 1;
            }
        }
        Some(Effect::Stop(vm.name))
    }
}
