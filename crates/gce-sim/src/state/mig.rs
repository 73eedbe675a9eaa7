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
    /// Every zone of the MIG: a regional MIG's distribution policy, or a zonal MIG's zone.
    pub(super) zones: Vec<String>,
    pub(super) template: String,
    pub(super) requests: BTreeMap<String, ResizeRequest>,
    /// Names of its VMs (in `zone`).
    pub(super) vms: BTreeSet<String>,
    /// Names queued in its requests that are still waiting (not yet VMs) → the request's name.
    pub(super) queued: BTreeMap<String, String>,
    /// Names `createInstances` asked for that are not VMs yet (`create.rs`).
    pub(super) creating: BTreeMap<String, super::create::Creating>,
    /// Members whose VM GCE deleted outside the MIG's own actions (a preempted spot VM, a VM with no
    /// run duration that GCE removed) while the MIG does nothing on failure: still members, still
    /// counted in `targetSize`, listed with their URL and no `instanceStatus`, until
    /// `deleteInstances` names them or the MIG is deleted (`instance.rs`, `end_of_vm`).
    pub(super) vanished: BTreeSet<String>,
    /// Delete operations waiting for a provisioning request to finish.
    pub(super) deleting: Vec<String>,
    pub(super) busy_until: Option<DateTime<Utc>>,
    /// Its workload policy (`resourcePolicies.workloadPolicy`) and how close that keeps its VMs.
    pub(super) placement: Option<(PolicyKey, Distance)>,
}

impl Mig {
    pub(super) fn limit(&self) -> i64 {
        if self.key.scope.is_regional() {
            2000
        } else {
            1000
        }
    }

    /// `instanceLifecyclePolicy.defaultActionOnFailure: DO_NOTHING` (GCE's default is REPAIR).
    pub(super) fn do_nothing_on_failure(&self) -> bool {
        self.body.pointer("/instanceLifecyclePolicy/defaultActionOnFailure").and_then(Value::as_str)
            == Some("DO_NOTHING")
    }

    pub fn zone(&self) -> &str {
        &self.zone
    }

    pub fn name(&self) -> &str {
        &self.key.name
    }
}

/// One entry of a `deleteInstances` request, as understood.
#[derive(Debug, PartialEq)]
enum InstanceRef<'a> {
    /// A bare name (only for queued instances of a zonal MIG).
    Name(&'a str),
    /// `https://www.googleapis.com/compute/v1/projects/P/zones/Z/instances/N` (or
    /// `https://compute.googleapis.com/...`, or `beta`/`alpha`), `projects/P/zones/Z/instances/N`,
    /// `zones/Z/instances/N`.
    Url {
        project: Option<&'a str>,
        zone: &'a str,
        name: &'a str,
    },
    Malformed,
}

fn parse_instance_ref(s: &str) -> InstanceRef<'_> {
    if !s.contains('/') {
        return InstanceRef::Name(s);
    }
    let rest = ["https://www.googleapis.com/compute/", "https://compute.googleapis.com/compute/"]
        .iter()
        .find_map(|p| s.strip_prefix(p))
        .map(|r| ["v1/", "beta/", "alpha/"].iter().find_map(|v| r.strip_prefix(v)))
        .unwrap_or(Some(s));
    let Some(rest) = rest else { return InstanceRef::Malformed };
    let segs: Vec<&str> = rest.split('/').collect();
    let zone_ok = |z: &str| {
        !z.is_empty() && z.bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
    };
    match segs.as_slice() {
        ["projects", p, "zones", z, "instances", n] if !p.is_empty() && zone_ok(z) && is_rfc1035(n) => {
            InstanceRef::Url { project: Some(p), zone: z, name: n }
        }
        ["zones", z, "instances", n] if zone_ok(z) && is_rfc1035(n) && !s.starts_with("http") => {
            InstanceRef::Url { project: None, zone: z, name: n }
        }
        _ => InstanceRef::Malformed,
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

    /// The zone a MIG's VMs live in (for the edge's unreachable-zone check).
    pub fn mig_zone(&self, key: &MigKey) -> Option<&str> {
        self.migs.get(key).map(|m| m.zone.as_str())
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
        // A regional template works in its own region only (a global one anywhere).
        if let Scope::Region(r) = &scope {
            let mut parts = template.split('/');
            let tr = parts.by_ref().find(|p| *p == "regions").and_then(|_| parts.next());
            if let Some(tr) = tr.filter(|tr| tr != r) {
                return Err(ApiError::invalid(format!(
                    "Invalid value for field 'resource.instanceTemplate': '{template}'. The regional instance template must be in the same region as the instance group manager ({r}), not {tr}."
                )));
            }
        }
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
        let zones = match &scope {
            Scope::Zone(z) => vec![z.clone()],
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
                zones
            }
            Scope::Global => return Err(ApiError::invalid("MIGs are zonal or regional")),
        };
        if self.migs.contains_key(&key) {
            return Err(ApiError::already_exists(&key.path()));
        }
        let placement = self.mig_policy(project, &scope, &body, &template)?;
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
                zone: zones[0].clone(),
                zones,
                template,
                requests: BTreeMap::new(),
                vms: BTreeSet::new(),
                queued: BTreeMap::new(),
                creating: BTreeMap::new(),
                vanished: BTreeSet::new(),
                deleting: Vec::new(),
                busy_until: None,
                placement,
            },
        );
        Ok(self.new_op(project, scope, "insert", url, id, now, Some(now + ms(self.op_latency_ms))))
    }

    pub fn mig_json(&self, key: &MigKey, now: DateTime<Utc>) -> Result<Value, ApiError> {
        Ok(self.render_mig(self.mig(key)?, now))
    }

    /// A MIG as GCE shows it.
    pub fn render_mig(&self, mig: &Mig, now: DateTime<Utc>) -> Value {
        let mut o = mig.body.clone();
        let obj = o.as_object_mut().expect("validated object");
        let (mut creating, mut deleting, mut recreating, mut none) =
            (mig.queued.len() + mig.creating.len(), 0, 0, mig.vanished.len());
        for name in &mig.vms {
            let Some(vm) = self.instances.get(&(mig.key.project.clone(), mig.zone.clone(), name.clone()))
            else {
                continue;
            };
            if vm.deleting_at.is_some() {
                deleting += 1;
            } else if vm.repairing {
                recreating += 1;
            } else if vm.is_coming_up() {
                creating += 1;
            } else {
                none += 1;
            }
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
                   "none": none, "recreating": recreating, "refreshing": 0, "restarting": 0, "resuming": 0,
                   "starting": 0, "stopping": 0, "suspending": 0, "verifying": 0}),
        );
        let stable = creating == 0 && deleting == 0 && recreating == 0 && mig.deleting.is_empty();
        obj.insert("status".into(), json!({"isStable": stable}));
        mig.key.scope.annotate(&mig.key.project, obj);
        let _ = now;
        o
    }

    /// All MIGs of a project in one zone or region, by name (not rendered).
    pub fn migs_of<'a>(&'a self, project: &'a str, scope: &'a Scope) -> impl Iterator<Item = &'a Mig> + 'a {
        self.migs.values().filter(move |m| m.key.project == project && &m.key.scope == scope)
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

    /// `deleteInstances`.
    ///
    /// * Regional MIGs take instance URLs only (full, `projects/P/zones/Z/instances/N` or
    ///   `zones/Z/instances/N`), as the discovery document describes; zonal MIGs also take bare
    ///   names, which is the only way to name a queued instance ("Queued instances do not have URL
    ///   and can be deleted only by name"). A queued instance of a regional MIG cannot be deleted:
    ///   it is released by cancelling its resize request.
    /// * Synchronous 400s: more than 1000 entries; names mixed with URLs (zonal).
    /// * The Operation fails (DONE with `error`, nothing deleted), whatever
    ///   `skipInstancesOnValidationError` says, for a malformed URL (a bare name given to a regional
    ///   MIG included: `INVALID_FIELD_VALUE`) or a URL in another project or in a zone that is not
    ///   one of the group's (`INVALID_FIELD_VALUE`).
    /// * It fails too, unless `skipInstancesOnValidationError`, for an instance that does not exist
    ///   (`RESOURCE_NOT_FOUND`), belongs to another group or is already being deleted
    ///   (`CONDITION_NOT_MET`); with the flag those entries are skipped.
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
        let regional = key.scope.is_regional();
        let refs: Vec<InstanceRef> = entries.iter().map(|e| parse_instance_ref(e)).collect();
        let names = refs.iter().filter(|r| matches!(r, InstanceRef::Name(_))).count();
        if !regional && names != 0 && names != refs.len() {
            return Err(ApiError::invalid(
                "Invalid value for field 'resource.instances': instance names and instance URLs cannot be mixed in one request.",
            ));
        }
        // Resolve every entry first, so a failure changes nothing.
        let mut always: Vec<(&str, String)> = Vec::new();
        let mut invalid: Vec<(&str, String)> = Vec::new();
        let mut vms: Vec<InstanceKey> = Vec::new();
        let mut queued: Vec<(String, String)> = Vec::new();
        let mut vanished: Vec<String> = Vec::new();
        let field = |i: usize, e: &str| format!("Invalid value for field 'instances[{i}]': '{e}'.");
        for (i, (e, r)) in entries.iter().zip(&refs).enumerate() {
            let (zone, name) = match r {
                InstanceRef::Malformed => {
                    always.push(("INVALID_FIELD_VALUE", format!("{} The URL is malformed.", field(i, e))));
                    continue;
                }
                InstanceRef::Name(_) if regional => {
                    always.push((
                        "INVALID_FIELD_VALUE",
                        format!(
                            "{} The URL is malformed: a regional managed instance group takes instance URLs such as zones/[ZONE]/instances/[INSTANCE_NAME], not names.",
                            field(i, e)
                        ),
                    ));
                    continue;
                }
                InstanceRef::Name(n) => (mig.zone.as_str(), *n),
                InstanceRef::Url { project, zone, name } => {
                    if project.is_some_and(|p| p != key.project) {
                        always.push((
                            "INVALID_FIELD_VALUE",
                            format!("{} The instance is not in project '{}'.", field(i, e), key.project),
                        ));
                        continue;
                    }
                    if !mig.zones.iter().any(|z| z == zone) {
                        always.push((
                            "INVALID_FIELD_VALUE",
                            format!(
                                "{} The instance is in zone '{zone}', which is not a zone of the instance group manager '{}'.",
                                field(i, e),
                                key.name
                            ),
                        ));
                        continue;
                    }
                    (*zone, *name)
                }
            };
            let vm_key = (key.project.clone(), zone.to_string(), name.to_string());
            match self.instances.get(&vm_key) {
                Some(vm) if vm.mig == *key && vm.deleting_at.is_some() => invalid.push((
                    "CONDITION_NOT_MET",
                    format!("Instance '{}' is already being deleted.", vm.url()),
                )),
                Some(vm) if vm.mig == *key => {
                    if !vms.contains(&vm_key) {
                        vms.push(vm_key);
                    }
                }
                Some(vm) => invalid.push((
                    "CONDITION_NOT_MET",
                    format!(
                        "Instance '{}' is not a member of the instance group manager '{}'.",
                        vm.url(),
                        key.name
                    ),
                )),
                None => match (r, mig.queued.get(name)) {
                    (InstanceRef::Name(_), Some(rr)) => {
                        let pair = (rr.clone(), name.to_string());
                        if !queued.contains(&pair) {
                            queued.push(pair);
                        }
                    }
                    // A member whose VM GCE deleted: named, it leaves the group.
                    _ if zone == mig.zone && mig.vanished.contains(name) => {
                        if !vanished.iter().any(|v| v == name) {
                            vanished.push(name.to_string());
                        }
                    }
                    _ => invalid.push((
                        "RESOURCE_NOT_FOUND",
                        format!(
                            "The resource 'projects/{}/zones/{zone}/instances/{name}' was not found",
                            key.project
                        ),
                    )),
                },
            }
        }
        let (id, url) = (mig.id, key.url());
        let op_type = "compute.instanceGroupManagers.deleteInstances";
        if !always.is_empty() || (!invalid.is_empty() && !skip) {
            let mut errors = always;
            if !skip {
                errors.extend(invalid);
            }
            let http = match errors[0].0 {
                "RESOURCE_NOT_FOUND" => 404,
                "CONDITION_NOT_MET" => 412,
                _ => 400,
            };
            return Ok(self.failed_op(&key.project, key.scope.clone(), op_type, url, id, now, &errors, http));
        }
        let lowered = (vms.len() + queued.len() + vanished.len()) as i64;
        for vm_key in vms {
            if let Some(vm) = self.instances.get_mut(&vm_key) {
                vm.deleting_at = Some(now + ms(DELETE_MS));
            }
        }
        self.wake(now + ms(DELETE_MS));
        let mig = self.mig_mut(key)?;
        mig.target_size -= lowered;
        for name in &vanished {
            mig.vanished.remove(name);
        }
        for (rr_name, vm) in queued {
            mig.queued.remove(&vm);
            if let Some(rr) = mig.requests.get_mut(&rr_name) {
                rr.removed.insert(vm);
                if rr.remaining().next().is_none() {
                    // Nothing left to create: the request ends as if cancelled.
                    rr.state = RrState::Cancelled;
                    rr.last_attempt = None;
                }
            }
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

    /// `listManagedInstances`: queued names and VMs, by name; and whether the MIG pages them.
    pub fn managed_instances(&self, key: &MigKey) -> Result<(Vec<Value>, bool), ApiError> {
        let mig = self.mig(key)?;
        let mut items: Vec<(String, Value)> = Vec::new();
        let version = json!({"instanceTemplate": mig.template});
        for (name, rr_name) in &mig.queued {
            let mut mi = json!({"name": name, "currentAction": "CREATING", "targetStatus": "RUNNING",
                                "instanceStatus": "PENDING", "version": version});
            if let Some(err) = mig.requests.get(rr_name).and_then(|rr| rr.last_attempt.as_ref()) {
                mi["lastAttempt"] = json!({"errors": err});
            }
            items.push((name.clone(), mi));
        }
        items.extend(self.creating_managed_instances(mig));
        for name in &mig.vanished {
            // Its VM is gone: the member keeps its URL, and has no status.
            let url = format!("{GCE_BASE}projects/{}/zones/{}/instances/{name}", key.project, mig.zone);
            items.push((
                name.clone(),
                json!({"name": name, "instance": url, "currentAction": "NONE", "targetStatus": "RUNNING",
                       "version": version}),
            ));
        }
        for name in &mig.vms {
            let Some(vm) = self.instances.get(&(key.project.clone(), mig.zone.clone(), name.clone())) else {
                continue;
            };
            let action = if vm.deleting_at.is_some() {
                "DELETING"
            } else if vm.repairing {
                "RECREATING"
            } else if vm.is_coming_up() {
                "CREATING"
            } else {
                "NONE"
            };
            let mut mi = json!({
                "name": vm.name, "id": vm.id.to_string(), "instance": vm.url(),
                "instanceStatus": vm.status_name(), "currentAction": action, "targetStatus": "RUNNING",
                "version": version,
            });
            if vm.run_seconds > 0 {
                mi["scheduling"] = json!({"terminationTimestamp": ts(vm.termination)});
            }
            items.push((name.clone(), mi));
        }
        items.sort_by(|a, b| a.0.cmp(&b.0));
        let paginated =
            mig.body.get("listManagedInstancesResults").and_then(Value::as_str) == Some("PAGINATED");
        Ok((items.into_iter().map(|(_, v)| v).collect(), paginated))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instance_references() {
        let url = |p, z, n| InstanceRef::Url { project: p, zone: z, name: n };
        let cases = [
            ("hpc-a3u-0", InstanceRef::Name("hpc-a3u-0")),
            ("zones/us-central1-a/instances/n-1", url(None, "us-central1-a", "n-1")),
            ("projects/p/zones/us-central1-a/instances/n-1", url(Some("p"), "us-central1-a", "n-1")),
            (
                "https://www.googleapis.com/compute/v1/projects/p/zones/us-central1-a/instances/n-1",
                url(Some("p"), "us-central1-a", "n-1"),
            ),
            (
                "https://compute.googleapis.com/compute/v1/projects/p/zones/us-central1-a/instances/n-1",
                url(Some("p"), "us-central1-a", "n-1"),
            ),
            (
                "https://compute.googleapis.com/compute/v2/projects/p/zones/z/instances/n",
                InstanceRef::Malformed,
            ),
            ("https://example.com/projects/p/zones/z/instances/n", InstanceRef::Malformed),
            ("us-central1-a/n-1", InstanceRef::Malformed),
            ("zones/us-central1-a/instances/N_1", InstanceRef::Malformed),
            ("regions/us-central1/instances/n-1", InstanceRef::Malformed),
            ("zones/us-central1-a/instances/n-1/", InstanceRef::Malformed),
            ("/zones/us-central1-a/instances/n-1", InstanceRef::Malformed),
        ];
        for (text, want) in cases {
            assert_eq!(parse_instance_ref(text), want, "{text}");
        }
    }
}
