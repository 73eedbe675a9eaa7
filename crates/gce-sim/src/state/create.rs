//! `createInstances` on MIGs (standard and spot VMs made by name from the MIG's template), how
//! their creation goes under the capacity rules, and spot preemption.
//!
//! What is modelled, from the discovery document's description of the method ("The create instances
//! operation is marked DONE if the createInstances request is successful. The underlying actions
//! take additional time. You must separately verify the status of the creating actions with the
//! listmanagedinstances method"):
//! * The call validates its body synchronously (400): at least one instance, each with an RFC 1035
//!   `name`, no name twice, and room in the MIG (a regional MIG holds 2000, a zonal one 1000). A
//!   MIG whose template is FLEX_START (or was never loaded: the default template is FLEX_START) is
//!   refused: Flex Start VMs come through resize requests only.
//! * The Operation fails (`RESOURCE_ALREADY_EXISTS`, nothing made) when a name is already a
//!   managed instance of the group or a VM of the project in one of its zones.
//! * Otherwise targetSize grows at once and each name is a managed instance with `currentAction`
//!   CREATING and no URL. Under the MIG's capacity rule (`POST /_sim/capacity`, by name prefix):
//!   none → the VMs are made on the next tick (PROVISIONING); `delay_seconds` → after that long;
//!   `hold` → they stay CREATING; `fail` → they stay CREATING with the error in
//!   `lastAttempt.errors` (GCE keeps retrying for as long as the instance is wanted), and are made
//!   once the rule is cleared.
//! * A VM created this way has no run duration (no `terminationTimestamp`).
//! * Preemption (`POST /_sim/instances/{name}/preempt`, SPOT VMs only): the stop command runs; a VM
//!   whose template says `instanceTerminationAction: DELETE` is deleted, one that says STOP stays
//!   TERMINATED. A MIG with `defaultActionOnFailure: DO_NOTHING` neither recreates the deleted VM
//!   nor forgets it: the member stays with no VM and keeps its place in `targetSize` until
//!   `deleteInstances` names it (by URL) or the MIG is deleted (assumption: GCE documents that such
//!   a MIG "does not repair a failed VM"; slurm-dws's MIGs all say so). Unlike a Flex VM at the end
//!   of its run duration, which leaves its MIG.

use super::consume::Verdict;
use super::*;

/// A name `createInstances` asked for that is not a VM yet.
#[derive(Clone, Debug, PartialEq)]
pub struct Creating {
    pub(super) since: DateTime<Utc>,
    /// `{errors: [...]}` of the last failed attempt (a capacity rule with `fail`).
    pub(super) last_attempt: Option<Value>,
}

impl State {
    /// `createInstances`.
    pub fn create_instances(
        &mut self,
        key: &MigKey,
        body: &Value,
        now: DateTime<Utc>,
    ) -> Result<String, ApiError> {
        let mig = self.mig(key)?;
        let entries = body.get("instances").and_then(Value::as_array).cloned().unwrap_or_default();
        if entries.is_empty() {
            return Err(ApiError::invalid("Required field 'resource.instances' not specified"));
        }
        let mut names: Vec<String> = Vec::new();
        for (i, e) in entries.iter().enumerate() {
            let name = e.get("name").and_then(Value::as_str).unwrap_or_default();
            if name.is_empty() {
                return Err(ApiError::invalid(format!(
                    "Required field 'resource.instances[{i}].name' not specified"
                )));
            }
            if !is_rfc1035(name) {
                return Err(ApiError::invalid(format!(
                    "Invalid value for field 'resource.instances[{i}].name': '{name}'. Must be a match of regex '[a-z](?:[-a-z0-9]{{0,61}}[a-z0-9])?'"
                )));
            }
            if names.iter().any(|n| n == name) {
                return Err(ApiError::invalid(format!(
                    "Invalid value for field 'resource.instances[{i}].name': '{name}'. The name appears twice in the request."
                )));
            }
            names.push(name.to_string());
        }
        if mig.target_size + names.len() as i64 > mig.limit() {
            return Err(ApiError::invalid(format!(
                "Invalid value for field 'resource.instances': the group would hold {} instances, above its limit of {}.",
                mig.target_size + names.len() as i64,
                mig.limit()
            )));
        }
        let props = self.template_properties(&key.project, &mig.template);
        if props.pointer("/scheduling/provisioningModel").and_then(Value::as_str) == Some("FLEX_START") {
            return Err(ApiError::invalid(format!(
                "Invalid value for field 'resource.instances': the instance template '{}' uses the FLEX_START provisioning model; Flex-start VMs are created only through resize requests.",
                mig.template
            )));
        }
        super::consume::check_template(&mig.template, &key.project, &props)?;
        let taken: Vec<(&'static str, String)> = names
            .iter()
            .filter(|n| {
                mig.creating.contains_key(*n)
                    || mig.vms.contains(*n)
                    || mig.vanished.contains(*n)
                    || mig.queued.contains_key(*n)
                    || mig.zones.iter().any(|z| {
                        self.instances.contains_key(&(key.project.clone(), z.clone(), n.to_string()))
                    })
            })
            .map(|n| {
                (
                    "RESOURCE_ALREADY_EXISTS",
                    format!(
                        "The resource 'projects/{}/zones/{}/instances/{n}' already exists",
                        key.project, mig.zone
                    ),
                )
            })
            .collect();
        let (id, url) = (mig.id, key.url());
        let op_type = "compute.instanceGroupManagers.createInstances";
        if !taken.is_empty() {
            return Ok(self.failed_op(&key.project, key.scope.clone(), op_type, url, id, now, &taken, 409));
        }
        let mig = self.mig_mut(key)?;
        mig.target_size += names.len() as i64;
        for n in names {
            mig.creating.insert(n, Creating { since: now, last_attempt: None });
        }
        Ok(self.new_op(
            &key.project,
            key.scope.clone(),
            op_type,
            url,
            id,
            now,
            Some(now + ms(self.op_latency_ms)),
        ))
    }

    /// Names waiting to be created become VMs, unless the MIG's capacity rule holds or fails them.
    pub(super) fn advance_creations(&mut self, now: DateTime<Utc>) {
        let mut made: Vec<(MigKey, String, Option<Consumed>)> = Vec::new();
        let State {
            migs,
            capacity,
            hosts,
            reserved,
            instances,
            templates,
            reservations,
            future_reservations,
            ..
        } = self;
        let mut ledger = super::consume::Ledger::default();
        let placement_wait = capacity_error(&super::placement::placement_waiting());
        for mig in migs.values_mut().filter(|m| !m.creating.is_empty() && m.deleting.is_empty()) {
            let rule = capacity.iter().rev().find(|r| mig.key.name.starts_with(&r.prefix));
            let Mig { key, zone, vms, placement, creating, template, .. } = mig;
            for (name, c) in creating.iter_mut() {
                let delay = rule.map_or(0.0, |r| r.delay_seconds.max(0.0));
                let ready = now >= later(c.since, (delay * 1000.0) as i64);
                match rule {
                    Some(r) if r.hold || !ready => {}
                    Some(CapacityRule { fail: Some(f), .. }) => {
                        let err = capacity_error(f);
                        if c.last_attempt.as_ref() != Some(&err) {
                            c.last_attempt = Some(err);
                        }
                    }
                    _ => {
                        // A VM on a reservation needs a free unit; GCE retries until it gets one.
                        let props = super::instance::properties(templates, &key.project, template);
                        let verdict = super::consume::judge(
                            reservations,
                            future_reservations,
                            instances,
                            &mut ledger,
                            &key.project,
                            zone,
                            &props,
                            1,
                            now,
                        );
                        let grant = match verdict {
                            Verdict::Unreserved => None,
                            Verdict::Grant(g) => g.into_iter().next(),
                            Verdict::Wait(err) => {
                                if c.last_attempt != err {
                                    c.last_attempt = err;
                                }
                                continue;
                            }
                            Verdict::Fail(err) => {
                                if c.last_attempt.as_ref() != Some(&err) {
                                    c.last_attempt = Some(err);
                                }
                                continue;
                            }
                        };
                        if !super::placement::reserve(
                            hosts,
                            reserved,
                            instances,
                            key,
                            zone,
                            vms,
                            placement,
                            std::slice::from_ref(name),
                        ) {
                            ledger.release(grant.as_slice());
                            if c.last_attempt.as_ref() != Some(&placement_wait) {
                                c.last_attempt = Some(placement_wait.clone());
                            }
                            continue;
                        }
                        made.push((key.clone(), name.clone(), grant));
                    }
                }
            }
        }
        for (key, name, consumed) in made {
            if let Some(m) = self.migs.get_mut(&key) {
                m.creating.remove(&name);
            }
            let zone = self.create_vm(&key, &name, 0, now);
            if let (Some(c), Some(zone)) = (consumed, zone) {
                self.consume(&(key.project.clone(), zone, name), c);
            }
        }
    }

    /// Control API: GCE preempts this spot VM. `None` if there is no such VM; `Some(Err)` if it is
    /// not a SPOT VM (only those are preempted).
    pub fn preempt(&mut self, name: &str, now: DateTime<Utc>) -> Option<Result<Vec<Effect>, String>> {
        let keys: Vec<InstanceKey> = self.instances.keys().filter(|k| k.2 == name).cloned().collect();
        if keys.is_empty() {
            return None;
        }
        let mut effects = Vec::new();
        for k in keys {
            let vm = &self.instances[&k];
            let model = vm.scheduling.get("provisioningModel").and_then(Value::as_str).unwrap_or("STANDARD");
            if model != "SPOT" {
                return Some(Err(format!("VM {name} is {model}, not SPOT: only spot VMs are preempted")));
            }
            if vm.deleting_at.is_some() || vm.status == VmStatus::Terminated {
                continue;
            }
            // Preempted: its end comes now, and `end_of_vm` applies the termination action.
            if let Some(vm) = self.instances.get_mut(&k) {
                vm.termination = now;
            }
            effects.extend(self.end_of_vm(&k, now));
        }
        Some(Ok(effects))
    }

    /// The managed instances still being created, as `listManagedInstances` shows them.
    pub(super) fn creating_managed_instances(&self, mig: &Mig) -> Vec<(String, Value)> {
        let version = json!({"instanceTemplate": mig.template});
        mig.creating
            .iter()
            .map(|(name, c)| {
                let mut mi = json!({"name": name, "currentAction": "CREATING", "targetStatus": "RUNNING",
                                    "version": version});
                if let Some(err) = &c.last_attempt {
                    mi["lastAttempt"] = json!({"errors": err});
                }
                (name.clone(), mi)
            })
            .collect()
    }
}
