//! Resize requests: insert, get, list, cancel, delete, and their state machine (CREATING → ACCEPTED → SUCCEEDED | FAILED | CANCELLED).

use super::consume::Verdict;
use super::*;
use serde::Serialize;

/// The v1 states of a resize request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum RrState {
    Creating,
    Accepted,
    Succeeded,
    Failed,
    Cancelled,
}

impl RrState {
    pub(super) fn name(self) -> &'static str {
        match self {
            RrState::Creating => "CREATING",
            RrState::Accepted => "ACCEPTED",
            RrState::Succeeded => "SUCCEEDED",
            RrState::Failed => "FAILED",
            RrState::Cancelled => "CANCELLED",
        }
    }

    pub(super) fn is_final(self) -> bool {
        matches!(self, RrState::Succeeded | RrState::Failed | RrState::Cancelled)
    }
}

#[derive(Clone, Debug)]
pub struct ResizeRequest {
    pub(super) name: String,
    pub(super) id: u64,
    pub(super) created: DateTime<Utc>,
    /// The request body as sent (after validation): echoed back in `get`.
    pub(super) body: Value,
    pub state: RrState,
    /// The VM names this request creates (generated for `resizeBy`).
    pub(super) names: Vec<String>,
    /// Names removed with `deleteInstances` while queued: they will not be created.
    pub(super) removed: BTreeSet<String>,
    pub(super) run_seconds: i64,
    /// When CREATING turns ACCEPTED (when the insert Operation is DONE).
    pub(super) accept_at: DateTime<Utc>,
    pub(super) accepted_at: Option<DateTime<Utc>>,
    /// Capacity was found and its VMs exist, but not all are RUNNING yet (the request is still
    /// ACCEPTED; it turns SUCCEEDED when they are).
    pub(super) provisioning: bool,
    /// The VMs it created.
    pub(super) created_vms: Vec<String>,
    pub(super) error: Option<Value>,
    pub(super) last_attempt: Option<Value>,
}

impl ResizeRequest {
    pub(super) fn remaining(&self) -> impl Iterator<Item = &String> {
        self.names.iter().filter(|n| !self.removed.contains(*n))
    }
}

impl State {
    // ----- resize requests -------------------------------------------------------------------

    /// Resize request insert: validates, grows targetSize at once, starts CREATING.
    pub fn insert_resize_request(
        &mut self,
        key: &MigKey,
        body: &Value,
        now: DateTime<Utc>,
    ) -> Result<String, ApiError> {
        let mig = self.mig(key)?;
        if !mig.deleting.is_empty() {
            return Err(ApiError::resource_not_ready(
                &key.path(),
                "the instance group manager is being deleted",
            ));
        }
        let name = body.get("name").and_then(Value::as_str).unwrap_or_default();
        if name.is_empty() {
            return Err(ApiError::invalid("Required field 'resource.name' not specified"));
        }
        if !is_rfc1035(name) {
            return Err(ApiError::invalid(format!(
                "Invalid value for field 'resource.name': '{name}'. Must be a match of regex '[a-z](?:[-a-z0-9]{{0,61}}[a-z0-9])?'"
            )));
        }
        let instances = body.get("instances").and_then(Value::as_array).filter(|a| !a.is_empty());
        let resize_by = body.get("resizeBy").and_then(Value::as_i64);
        let names: Vec<String> = match (instances, resize_by) {
            (Some(_), Some(_)) => {
                return Err(ApiError::invalid(
                    "Invalid value for field 'resource.resizeBy': resizeBy and instances are mutually exclusive; set exactly one.",
                ))
            }
            (None, None) => {
                return Err(ApiError::invalid(
                    "Required field 'resource.resizeBy' or 'resource.instances' not specified",
                ))
            }
            (Some(list), None) => {
                let mut names = Vec::new();
                for (i, item) in list.iter().enumerate() {
                    let n = item.get("name").and_then(Value::as_str).unwrap_or_default();
                    if !is_rfc1035(n) {
                        return Err(ApiError::invalid(format!(
                            "Invalid value for field 'resource.instances[{i}].name': '{n}'. Must be a match of regex '[a-z](?:[-a-z0-9]{{0,61}}[a-z0-9])?'"
                        )));
                    }
                    if names.iter().any(|x| x == n) {
                        return Err(ApiError::invalid(format!(
                            "Invalid value for field 'resource.instances[{i}].name': '{n}'. Duplicate instance name."
                        )));
                    }
                    names.push(n.to_string());
                }
                names
            }
            (None, Some(n)) => {
                if n < 1 || n as usize > MAX_PER_CALL {
                    return Err(ApiError::invalid(format!(
                        "Invalid value for field 'resource.resizeBy': '{n}'. Must be between 1 and {MAX_PER_CALL}."
                    )));
                }
                let base = mig.body.get("baseInstanceName").and_then(Value::as_str).unwrap_or(&mig.key.name).to_string();
                (0..n).map(|_| format!("{base}-{}", &uuid::Uuid::new_v4().simple().to_string()[..4])).collect()
            }
        };
        if names.len() > MAX_PER_CALL {
            return Err(ApiError::invalid(format!(
                "Invalid value for field 'resource.instances': {} instances; at most {MAX_PER_CALL} per resize request.",
                names.len()
            )));
        }
        let props = self.template_properties(&key.project, &mig.template);
        check_template_for_resize(&key.name, &mig.template, &props)?;
        // Reservation-bound VMs run until the reservation ends: no run duration needed.
        let bound = super::consume::check_template(&mig.template, &key.project, &props)?;
        let seconds_value = body.pointer("/requestedRunDuration/seconds");
        let seconds = match seconds_value {
            Some(Value::String(s)) => s.parse::<i64>().ok(),
            Some(Value::Number(n)) => n.as_i64(),
            None if bound && body.get("requestedRunDuration").is_none() => Some(0),
            _ => None,
        }
        .ok_or_else(|| ApiError::invalid("Required field 'resource.requestedRunDuration' not specified"))?;
        if !((MIN_RUN_SECONDS..=MAX_RUN_SECONDS).contains(&seconds) || bound && seconds == 0) {
            return Err(ApiError::invalid(format!(
                "Invalid value for field 'resource.requestedRunDuration.seconds': '{seconds}'. Must be between {MIN_RUN_SECONDS} and {MAX_RUN_SECONDS}."
            )));
        }
        if body.pointer("/requestedRunDuration/nanos").and_then(Value::as_i64).unwrap_or(0) != 0 {
            return Err(ApiError::invalid(
                "Invalid value for field 'resource.requestedRunDuration.nanos': must be 0.",
            ));
        }
        if key.scope.is_regional() {
            let shape = mig.body.pointer("/distributionPolicy/targetShape").and_then(Value::as_str);
            if shape != Some("ANY_SINGLE_ZONE") {
                return Err(ApiError::invalid(format!(
                    "Resize requests in a regional MIG require distributionPolicy.targetShape ANY_SINGLE_ZONE; {} has {}.",
                    key.name,
                    shape.unwrap_or("EVEN")
                )));
            }
        }
        if mig.requests.contains_key(name) {
            return Err(ApiError::already_exists(&format!("{}/resizeRequests/{name}", key.path())));
        }
        if mig.target_size + names.len() as i64 > mig.limit() {
            return Err(ApiError::invalid(format!(
                "Resize request would grow {} to {} instances; the limit is {}.",
                key.name,
                mig.target_size + names.len() as i64,
                mig.limit()
            )));
        }
        let zone = mig.zone.clone();
        if let Some(taken) = names.iter().find(|n| self.name_in_use(&key.project, &zone, n)) {
            return Err(ApiError::already_exists(&format!(
                "projects/{}/zones/{zone}/instances/{taken}",
                key.project
            )));
        }
        let id = new_id();
        let url = format!("{}/resizeRequests/{name}", key.url());
        let latency = self.op_latency_ms;
        let mig = self.mig_mut(key)?;
        mig.target_size += names.len() as i64;
        for n in &names {
            mig.queued.insert(n.clone(), name.to_string());
        }
        mig.requests.insert(
            name.to_string(),
            ResizeRequest {
                name: name.to_string(),
                id,
                created: now,
                body: body.clone(),
                state: RrState::Creating,
                names,
                removed: BTreeSet::new(),
                run_seconds: seconds,
                accept_at: now + ms(latency),
                accepted_at: None,
                provisioning: false,
                created_vms: Vec::new(),
                error: None,
                last_attempt: None,
            },
        );
        Ok(self.new_op(
            &key.project,
            key.scope.clone(),
            "insert",
            url,
            id,
            now,
            Some(now + ms(self.op_latency_ms)),
        ))
    }

    /// Whether a VM name is taken in a zone: by a VM or by a queued request of any MIG there.
    pub(super) fn name_in_use(&self, project: &str, zone: &str, name: &str) -> bool {
        self.instances.contains_key(&(project.to_string(), zone.to_string(), name.to_string()))
            || self
                .migs
                .values()
                .any(|m| m.key.project == project && m.zone == zone && m.queued.contains_key(name))
    }

    pub(super) fn request(&self, key: &MigKey, name: &str) -> Result<&ResizeRequest, ApiError> {
        self.mig(key)?
            .requests
            .get(name)
            .ok_or_else(|| ApiError::not_found(&format!("{}/resizeRequests/{name}", key.path())))
    }

    pub fn resize_request_json(&self, key: &MigKey, name: &str) -> Result<Value, ApiError> {
        Ok(render_request(key, self.request(key, name)?))
    }

    pub fn list_resize_requests(&self, key: &MigKey) -> Result<Vec<Value>, ApiError> {
        Ok(self.mig(key)?.requests.values().map(|r| render_request(key, r)).collect())
    }

    /// Cancel: ACCEPTED (still waiting) → CANCELLED with targetSize lowered; otherwise the Operation
    /// fails with CONDITION_NOT_MET (also while the request's VMs are being created).
    pub fn cancel_resize_request(
        &mut self,
        key: &MigKey,
        name: &str,
        now: DateTime<Utc>,
    ) -> Result<String, ApiError> {
        let rr = self.request(key, name)?;
        let (id, state, provisioning) = (rr.id, rr.state, rr.provisioning);
        let url = format!("{}/resizeRequests/{name}", key.url());
        let op = self.new_op(
            &key.project,
            key.scope.clone(),
            "cancel",
            url,
            id,
            now,
            Some(now + ms(self.op_latency_ms)),
        );
        if state == RrState::Accepted && !provisioning {
            let mig = self.mig_mut(key)?;
            let rr = mig.requests.get_mut(name).expect("checked above");
            let names: Vec<String> = rr.remaining().cloned().collect();
            rr.state = RrState::Cancelled;
            rr.last_attempt = None;
            mig.target_size -= names.len() as i64;
            for n in names {
                mig.queued.remove(&n);
            }
        } else {
            let o = self.operations.get_mut(&op).expect("just inserted");
            o.error = Some(status_error(
                "CONDITION_NOT_MET",
                &if provisioning {
                    format!(
                        "Resize request '{name}' is creating its instances; it can no longer be cancelled."
                    )
                } else {
                    format!(
                        "Resize request '{name}' is {}; only an ACCEPTED resize request can be cancelled.",
                        state.name()
                    )
                },
            ));
            o.http_error = Some((412, "PRECONDITION FAILED"));
        }
        Ok(op)
    }

    /// Delete: only a request in a final state; its VMs stay.
    pub fn delete_resize_request(
        &mut self,
        key: &MigKey,
        name: &str,
        now: DateTime<Utc>,
    ) -> Result<String, ApiError> {
        let rr = self.request(key, name)?;
        if !rr.state.is_final() || rr.provisioning {
            return Err(ApiError::invalid(format!(
                "Resize request '{name}' is {}; only a SUCCEEDED, FAILED or CANCELLED resize request can be deleted. Cancel it first.",
                rr.state.name()
            )));
        }
        let id = rr.id;
        self.mig_mut(key)?.requests.remove(name);
        let url = format!("{}/resizeRequests/{name}", key.url());
        Ok(self.new_op(
            &key.project,
            key.scope.clone(),
            "delete",
            url,
            id,
            now,
            Some(now + ms(self.op_latency_ms)),
        ))
    }
}

impl State {
    /// Moves resize requests on: CREATING → ACCEPTED; then, by the capacity rule of their MIG, stay
    /// waiting (with a `lastAttempt` error), fail (rolling back their share of targetSize), or get
    /// capacity: all their VMs are created at once (PROVISIONING) and the request stays ACCEPTED
    /// until they are all RUNNING ([`State::finish_provisioning`]).
    pub(super) fn advance_requests(&mut self, now: DateTime<Utc>) {
        let mut created: Vec<(MigKey, String, i64, Option<Consumed>)> = Vec::new();
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
        // What a waiting request's lastAttempt says under each rule: built once a tick, not once
        // per request (2,000 queued requests are the benchmark's steady state).
        let waiting = CapacityFailure {
            code: "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS".into(),
            message: "Waiting for resources: the zone does not have enough resources available to fulfill the request. The request stays queued.".into(),
            error_details: None,
        };
        let waiting: Vec<Value> =
            capacity.iter().map(|r| capacity_error(r.fail.as_ref().unwrap_or(&waiting))).collect();
        for mig in migs.values_mut() {
            if mig.requests.is_empty() {
                continue;
            }
            let rule_index = capacity.iter().rposition(|r| mig.key.name.starts_with(&r.prefix));
            let rule = rule_index.map(|i| &capacity[i]);
            let Mig { requests, queued, target_size, key, zone, vms, placement, template, .. } = mig;
            for rr in requests.values_mut() {
                if rr.state == RrState::Creating && now >= rr.accept_at {
                    rr.state = RrState::Accepted;
                    rr.accepted_at = Some(now);
                }
                if rr.state != RrState::Accepted || rr.provisioning {
                    continue;
                }
                let accepted = rr.accepted_at.unwrap_or(now);
                let delay = rule.map_or(0.0, |r| r.delay_seconds.max(0.0));
                let ready = now >= later(accepted, (delay * 1000.0) as i64);
                match rule {
                    Some(r) if r.hold || !ready => {
                        let err = &waiting[rule_index.expect("a rule")];
                        if rr.last_attempt.as_ref() != Some(err) {
                            rr.last_attempt = Some(err.clone());
                        }
                    }
                    Some(CapacityRule { fail: Some(f), .. }) => {
                        let names: Vec<String> = rr.remaining().cloned().collect();
                        *target_size -= names.len() as i64;
                        for n in &names {
                            queued.remove(n);
                        }
                        rr.state = RrState::Failed;
                        rr.last_attempt = None;
                        rr.error = Some(capacity_error(f));
                    }
                    _ => {
                        let names: Vec<String> = rr.remaining().cloned().collect();
                        // A request on a reservation gets all its units, waits whole, or fails.
                        let props = super::instance::properties(templates, &key.project, template);
                        let verdict = super::consume::judge(
                            reservations,
                            future_reservations,
                            instances,
                            &mut ledger,
                            &key.project,
                            zone,
                            &props,
                            names.len(),
                            now,
                        );
                        let grant = match verdict {
                            Verdict::Unreserved => Vec::new(),
                            Verdict::Grant(g) => g,
                            Verdict::Wait(err) => {
                                if rr.last_attempt != err {
                                    rr.last_attempt = err;
                                }
                                continue;
                            }
                            Verdict::Fail(err) => {
                                *target_size -= names.len() as i64;
                                for n in &names {
                                    queued.remove(n);
                                }
                                rr.state = RrState::Failed;
                                rr.last_attempt = None;
                                rr.error = Some(err);
                                continue;
                            }
                        };
                        // A request its policy cannot place waits, as for a stockout.
                        if !super::placement::reserve(
                            hosts, reserved, instances, key, zone, vms, placement, &names,
                        ) {
                            ledger.release(&grant);
                            if rr.last_attempt.as_ref() != Some(&placement_wait) {
                                rr.last_attempt = Some(placement_wait.clone());
                            }
                            continue;
                        }
                        let mut grant = grant.into_iter();
                        for n in &names {
                            queued.remove(n);
                            created.push((key.clone(), n.clone(), rr.run_seconds, grant.next()));
                        }
                        rr.provisioning = true;
                        rr.last_attempt = None;
                        rr.created_vms = names;
                    }
                }
            }
        }
        for (mig, name, run_seconds, consumed) in created {
            let zone = self.create_vm(&mig, &name, run_seconds, now);
            if let (Some(c), Some(zone)) = (consumed, zone) {
                self.consume(&(mig.project.clone(), zone, name), c);
            }
        }
    }

    /// A provisioning request whose VMs are all up (or gone) is SUCCEEDED.
    pub(super) fn finish_provisioning(&mut self, _now: DateTime<Utc>) {
        let State { migs, instances, .. } = self;
        for mig in migs.values_mut() {
            for rr in mig.requests.values_mut().filter(|r| r.provisioning) {
                let up = rr.created_vms.iter().all(|n| {
                    instances
                        .get(&(mig.key.project.clone(), mig.zone.clone(), n.clone()))
                        .is_none_or(|vm| vm.mig != mig.key || !vm.is_coming_up())
                });
                if up {
                    rr.provisioning = false;
                    rr.state = RrState::Succeeded;
                }
            }
        }
    }
}

/// Which templates a resize request can use. FLEX_START is what DWS Flex Start is for, and
/// RESERVATION_BOUND consumes a reservation (`consume.rs`). A template without
/// `scheduling.provisioningModel`, or with STANDARD, is accepted and gives STANDARD VMs (GCE: the
/// model "must be explicit, or VMs come up STANDARD"). SPOT templates are refused at insert: GCE's
/// documentation says resize requests use the flex-start or reservation-bound models and no spot;
/// the simulator refuses it, naming the field (an assumption: GCE's exact error is not documented).
fn check_template_for_resize(mig: &str, template: &str, props: &Value) -> Result<(), ApiError> {
    let model = props.pointer("/scheduling/provisioningModel").and_then(Value::as_str).unwrap_or("STANDARD");
    match model {
        "FLEX_START" | "STANDARD" | "RESERVATION_BOUND" => Ok(()),
        other => Err(ApiError::invalid(format!(
            "Invalid value for field 'resource': the instance template '{template}' of instance group manager '{mig}' has scheduling.provisioningModel {other}; resize requests need FLEX_START or RESERVATION_BOUND."
        ))),
    }
}

pub(super) fn render_request(key: &MigKey, rr: &ResizeRequest) -> Value {
    let mut o = json!({});
    let obj = o.as_object_mut().expect("object");
    for field in ["description", "instances", "resizeBy"] {
        if let Some(v) = rr.body.get(field).filter(|v| !v.is_null()) {
            obj.insert(field.into(), v.clone());
        }
    }
    let url = format!("{}/resizeRequests/{}", key.url(), rr.name);
    obj.insert("kind".into(), json!("compute#instanceGroupManagerResizeRequest"));
    obj.insert("id".into(), json!(rr.id.to_string()));
    obj.insert("creationTimestamp".into(), json!(ts(rr.created)));
    obj.insert("name".into(), json!(rr.name));
    if rr.run_seconds > 0 {
        obj.insert("requestedRunDuration".into(), json!({"seconds": rr.run_seconds.to_string()}));
    }
    obj.insert("state".into(), json!(rr.state.name()));
    obj.insert("selfLink".into(), json!(url));
    obj.insert("selfLinkWithId".into(), json!(format!("{}/resizeRequests/{}", key.url(), rr.id)));
    let mut status = json!({});
    if let Some(e) = &rr.error {
        status["error"] = e.clone();
    }
    if let Some(e) = &rr.last_attempt {
        status["lastAttempt"] = json!({"error": e});
    }
    // Like GCE, no `status` at all while there is nothing to report.
    if status.as_object().is_some_and(|o| !o.is_empty()) {
        obj.insert("status".into(), status);
    }
    key.scope.annotate(&key.project, obj);
    o
}
