//! Managed instance groups: insert, get, list, delete (cascading), deleteInstances, listManagedInstances.

use super::*;

#[derive(Clone, Debug)]
pub struct Mig {
    pub(super) key: MigKey,
    pub(super) id: u64,
    pub(super) created: DateTime<Utc>,
    /// The insert body (validated), normalized; output fields are added when rendered.
    pub(super) body: Value,
    pub target_size: i64,
    /// The zone its VMs are created in (a regional MIG's single zone).
    pub(super) zone: String,
    pub(super) template: String,
    pub(super) requests: BTreeMap<String, ResizeRequest>,
    /// Delete operations waiting for a provisioning request to finish.
    pub(super) deleting: Vec<String>,
    pub(super) busy_until: Option<DateTime<Utc>>,
}

impl Mig {
    pub(super) fn limit(&self) -> i64 {
        if self.key.scope.is_regional() {
            2000
        } else {
            1000
        }
    }
}

impl State {
    // ----- MIGs ------------------------------------------------------------------------------

    pub(super) fn mig(&self, key: &MigKey) -> Result<&Mig, ApiError> {
        self.migs.get(key).ok_or_else(|| ApiError::not_found(&key.path()))
    }

    pub(super) fn mig_mut(&mut self, key: &MigKey) -> Result<&mut Mig, ApiError> {
        self.migs.get_mut(key).ok_or_else(|| ApiError::not_found(&key.path()))
    }

    /// `instanceGroupManagers.insert` / `regionInstanceGroupManagers.insert`.
    pub fn insert_mig(
        &mut self,
        project: &str,
        scope: Scope,
        body: &Value,
        now: DateTime<Utc>,
    ) -> Result<String, ApiError> {
        let name = body.get("name").and_then(Value::as_str).unwrap_or_default();
        if name.is_empty() {
            return Err(ApiError::invalid("Required field 'resource.name' not specified"));
        }
        if !is_rfc1035(name) {
            return Err(ApiError::invalid(format!(
                "Invalid value for field 'resource.name': '{name}'. Must be a match of regex '[a-z](?:[-a-z0-9]{{0,61}}[a-z0-9])?'"
            )));
        }
        let template = body
            .get("instanceTemplate")
            .and_then(Value::as_str)
            .or_else(|| body.pointer("/versions/0/instanceTemplate").and_then(Value::as_str))
            .ok_or_else(|| ApiError::invalid("Required field 'resource.instanceTemplate' not specified"))?
            .to_string();
        let target_size = body
            .get("targetSize")
            .and_then(Value::as_i64)
            .ok_or_else(|| ApiError::invalid("Required field 'resource.targetSize' not specified"))?;
        if target_size != 0 {
            return Err(ApiError::invalid(format!(
                "Invalid value for field 'resource.targetSize': '{target_size}'. Flex-start VMs are created only through resize requests: create the MIG with targetSize 0."
            )));
        }
        let key = MigKey { project: project.to_string(), scope: scope.clone(), name: name.to_string() };
        let mut body = body.clone();
        let zone = match &scope {
            Scope::Zone(z) => z.clone(),
            Scope::Region(r) => {
                let zones: Vec<String> = body
                    .pointer("/distributionPolicy/zones")
                    .and_then(Value::as_array)
                    .map(|zs| {
                        zs.iter()
                            .filter_map(|z| z.get("zone").and_then(Value::as_str))
                            .map(|z| last_segment(z).to_string())
                            .collect()
                    })
                    .unwrap_or_default();
                if let Some(bad) = zones.iter().find(|z| !z.starts_with(&format!("{r}-"))) {
                    return Err(ApiError::invalid(format!(
                        "Invalid value for field 'resource.distributionPolicy.zones': 'zones/{bad}'. Zone is not in region {r}."
                    )));
                }
                let shape = body.pointer("/distributionPolicy/targetShape").and_then(Value::as_str);
                let redistribution =
                    body.pointer("/updatePolicy/instanceRedistributionType").and_then(Value::as_str);
                if matches!(shape, Some("ANY_SINGLE_ZONE" | "ANY" | "BALANCED"))
                    && redistribution != Some("NONE")
                {
                    return Err(ApiError::invalid(format!(
                        "Invalid value for field 'resource.updatePolicy.instanceRedistributionType': '{}'. Target distribution shape {} requires instanceRedistributionType NONE.",
                        redistribution.unwrap_or("PROACTIVE"),
                        shape.unwrap_or_default()
                    )));
                }
                let zones = if zones.is_empty() { vec![format!("{r}-a")] } else { zones };
                // Normalize the zones to URLs, as GCE returns them.
                let dp = json!({
                    "zones": zones.iter().map(|z| json!({"zone": format!("{GCE_BASE}projects/{project}/zones/{z}")})).collect::<Vec<_>>(),
                    "targetShape": shape.unwrap_or("EVEN"),
                });
                body["distributionPolicy"] = dp;
                zones[0].clone()
            }
            Scope::Global => return Err(ApiError::invalid("MIGs are zonal or regional")),
        };
        if self.migs.contains_key(&key) {
            return Err(ApiError::already_exists(&key.path()));
        }
        let id = new_id();
        let url = key.url();
        self.migs.insert(
            key.clone(),
            Mig {
                key,
                id,
                created: now,
                body,
                target_size: 0,
                zone,
                template,
                requests: BTreeMap::new(),
                deleting: Vec::new(),
                busy_until: None,
            },
        );
        Ok(self.new_op(project, scope, "insert", url, id, now, Some(now + ms(self.op_latency_ms))))
    }

    pub fn mig_json(&self, key: &MigKey, now: DateTime<Utc>) -> Result<Value, ApiError> {
        let mig = self.mig(key)?;
        Ok(self.render_mig(mig, self.vm_counts(Some(key)).get(key).copied().unwrap_or_default(), now))
    }

    /// (deleting, running) VMs per MIG, of one MIG or of all, in one walk over the VMs (a list of
    /// 1,000 MIGs over 10,000 VMs must not walk them once per MIG).
    pub(super) fn vm_counts(
        &self,
        only: Option<&MigKey>,
    ) -> std::collections::HashMap<&MigKey, (usize, usize)> {
        let mut counts: std::collections::HashMap<&MigKey, (usize, usize)> = std::collections::HashMap::new();
        for vm in self.instances.values().filter(|i| only.is_none_or(|k| &i.mig == k)) {
            let c = counts.entry(&vm.mig).or_default();
            if vm.deleting_at.is_some() {
                c.0 += 1;
            } else {
                c.1 += 1;
            }
        }
        counts
    }

    /// A MIG as GCE shows it; `(deleting, none)` counts its VMs (see [`State::vm_counts`]).
    pub(super) fn render_mig(
        &self,
        mig: &Mig,
        (deleting, none): (usize, usize),
        now: DateTime<Utc>,
    ) -> Value {
        let mut o = mig.body.clone();
        let obj = o.as_object_mut().expect("validated object");
        let mut creating = 0;
        for rr in mig.requests.values().filter(|r| r.is_queued()) {
            creating += rr.remaining().count();
        }
        let template = &mig.template;
        obj.insert("kind".into(), json!("compute#instanceGroupManager"));
        obj.insert("id".into(), json!(mig.id.to_string()));
        obj.insert("creationTimestamp".into(), json!(ts(mig.created)));
        obj.insert("targetSize".into(), json!(mig.target_size));
        obj.insert("selfLink".into(), json!(mig.key.url()));
        obj.insert("instanceTemplate".into(), json!(template));
        obj.entry("versions").or_insert_with(|| json!([{"instanceTemplate": template}]));
        obj.entry("baseInstanceName").or_insert_with(|| json!(mig.key.name));
        obj.entry("listManagedInstancesResults").or_insert_with(|| json!("PAGELESS"));
        obj.insert("fingerprint".into(), json!("c2ltdWxhdG9y"));
        obj.insert(
            "instanceGroup".into(),
            json!(format!(
                "{GCE_BASE}projects/{}/{}/instanceGroups/{}",
                mig.key.project,
                mig.key.scope.path(),
                mig.key.name
            )),
        );
        obj.insert(
            "currentActions".into(),
            json!({"abandoning": 0, "creating": creating, "creatingWithoutRetries": 0, "deleting": deleting,
                   "none": none, "recreating": 0, "refreshing": 0, "restarting": 0, "resuming": 0,
                   "starting": 0, "stopping": 0, "suspending": 0, "verifying": 0}),
        );
        let stable = creating == 0 && deleting == 0 && mig.deleting.is_empty();
        obj.insert("status".into(), json!({"isStable": stable}));
        mig.key.scope.annotate(&mig.key.project, obj);
        let _ = now;
        o
    }

    /// All MIGs of a project in one zone or region, by name.
    pub fn list_migs(&self, project: &str, scope: &Scope, now: DateTime<Utc>) -> Vec<Value> {
        let counts = self.vm_counts(None);
        self.migs
            .values()
            .filter(|m| m.key.project == project && &m.key.scope == scope)
            .map(|m| self.render_mig(m, counts.get(&m.key).copied().unwrap_or_default(), now))
            .collect()
    }

    /// Deletes a MIG with its resize requests and VMs; waits while a request is provisioning.
    pub fn delete_mig(&mut self, key: &MigKey, now: DateTime<Utc>) -> Result<String, ApiError> {
        let mig = self.mig(key)?;
        if mig.busy_until.is_some_and(|t| now < t) {
            return Err(ApiError::resource_not_ready(
                &key.path(),
                "the instance group manager is undergoing an active transformation; retry later",
            ));
        }
        let id = mig.id;
        let op = self.new_op(&key.project, key.scope.clone(), "delete", key.url(), id, now, None);
        self.mig_mut(key)?.deleting.push(op.clone());
        Ok(op)
    }

    /// Control API: make deletes of this MIG fail for a while.
    pub fn set_busy(&mut self, name: &str, until: DateTime<Utc>) -> bool {
        let mut found = false;
        for mig in self.migs.values_mut().filter(|m| m.key.name == name) {
            mig.busy_until = Some(until);
            found = true;
        }
        found
    }

    /// `deleteInstances`: by names (queued or created) or by instance URLs (created only).
    pub fn delete_instances(
        &mut self,
        key: &MigKey,
        body: &Value,
        now: DateTime<Utc>,
    ) -> Result<String, ApiError> {
        let mig = self.mig(key)?;
        let entries: Vec<&str> = body
            .get("instances")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let skip = body.get("skipInstancesOnValidationError").and_then(Value::as_bool).unwrap_or(false);
        if entries.len() > MAX_PER_CALL {
            return Err(ApiError::invalid(format!(
                "Invalid value for field 'resource.instances': too many instances ({}); at most {MAX_PER_CALL} per call.",
                entries.len()
            )));
        }
        let urls = entries.iter().filter(|e| e.contains('/')).count();
        if urls != 0 && urls != entries.len() {
            return Err(ApiError::invalid(
                "Invalid value for field 'resource.instances': instance names and instance URLs cannot be mixed in one request.",
            ));
        }
        // Resolve every entry first, so a validation error changes nothing.
        let mut vms = Vec::new();
        let mut queued = Vec::new();
        let mut invalid = Vec::new();
        for e in &entries {
            let (zone, name) = if e.contains('/') {
                let parts: Vec<&str> = e.trim_end_matches('/').rsplit('/').take(4).collect();
                match parts.as_slice() {
                    [name, "instances", zone, "zones"] => (Some(*zone), *name),
                    _ => {
                        invalid.push(*e);
                        continue;
                    }
                }
            } else {
                (None, *e)
            };
            let vm_key = (key.project.clone(), zone.unwrap_or(&mig.zone).to_string(), name.to_string());
            match self.instances.get(&vm_key) {
                // Already being deleted: a validation error, as for a non-member.
                Some(vm) if vm.mig == *key && vm.deleting_at.is_some() => invalid.push(*e),
                Some(vm) if vm.mig == *key => {
                    if !vms.contains(&vm_key) {
                        vms.push(vm_key);
                    }
                }
                _ if zone.is_none() => {
                    match mig.requests.values().find(|r| r.is_queued() && r.remaining().any(|n| n == name)) {
                        Some(rr) => {
                            let pair = (rr.name.clone(), name.to_string());
                            if !queued.contains(&pair) {
                                queued.push(pair);
                            }
                        }
                        None => invalid.push(*e),
                    }
                }
                _ => invalid.push(*e),
            }
        }
        if !invalid.is_empty() && !skip {
            return Err(ApiError::invalid(format!(
                "Invalid value for field 'resource.instances': {}. Not a member of the instance group manager {}, or already being deleted.",
                invalid.join(", "),
                key.name
            )));
        }
        let id = mig.id;
        let lowered = (vms.len() + queued.len()) as i64;
        for vm_key in vms {
            if let Some(vm) = self.instances.get_mut(&vm_key) {
                vm.deleting_at = Some(now + ms(DELETE_MS));
            }
        }
        let mig = self.mig_mut(key)?;
        mig.target_size -= lowered;
        for (rr_name, vm) in queued {
            if let Some(rr) = mig.requests.get_mut(&rr_name) {
                rr.removed.insert(vm);
                if rr.remaining().next().is_none() {
                    // Nothing left to create: the request ends as if cancelled.
                    rr.state = RrState::Cancelled;
                    rr.last_attempt = None;
                    rr.provisioning_until = None;
                }
            }
        }
        Ok(self.new_op(
            &key.project,
            key.scope.clone(),
            "compute.instanceGroupManagers.deleteInstances",
            key.url(),
            id,
            now,
            Some(now + ms(self.op_latency_ms)),
        ))
    }

    /// `listManagedInstances`: queued names, provisioning VMs and VMs, by name.
    pub fn managed_instances(&self, key: &MigKey) -> Result<(Vec<Value>, bool), ApiError> {
        let mig = self.mig(key)?;
        let mut items: Vec<Value> = Vec::new();
        let version = json!({"instanceTemplate": mig.template});
        for rr in mig.requests.values().filter(|r| r.is_queued()) {
            for name in rr.remaining() {
                let mut mi = json!({"name": name, "currentAction": "CREATING", "targetStatus": "RUNNING",
                                    "version": version});
                if rr.provisioning_until.is_some() {
                    mi["instanceStatus"] = json!("PROVISIONING");
                    mi["instance"] = json!(format!(
                        "{GCE_BASE}projects/{}/zones/{}/instances/{name}",
                        key.project, mig.zone
                    ));
                } else {
                    mi["instanceStatus"] = json!("PENDING");
                }
                if let Some(err) = &rr.last_attempt {
                    mi["lastAttempt"] = json!({"errors": err});
                }
                items.push(mi);
            }
        }
        for vm in self.instances.values().filter(|i| i.mig == *key) {
            let (status, action) =
                if vm.deleting_at.is_some() { ("STOPPING", "DELETING") } else { ("RUNNING", "NONE") };
            items.push(json!({
                "name": vm.name, "id": vm.id.to_string(), "instance": vm.url(), "instanceStatus": status,
                "currentAction": action, "targetStatus": "RUNNING", "version": version,
                "scheduling": {"terminationTimestamp": ts(vm.termination)},
            }));
        }
        items.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
        let paginated =
            mig.body.get("listManagedInstancesResults").and_then(Value::as_str) == Some("PAGINATED");
        Ok((items, paginated))
    }
}
