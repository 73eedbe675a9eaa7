//! The simulated project: MIGs, resize requests, instances and operations, and how they change in time.
//!
//! Everything here is synchronous and takes `now` as an argument: the server and the ticker (the edges)
//! read the clock, lock the one [`State`], call a method, and carry out the returned [`Effect`]s (boot
//! and stop commands) after unlocking. Mutations apply at once and return an [`Operation`] that reports
//! RUNNING for [`OP_LATENCY_MS`] and then DONE; resize requests advance in [`State::tick`].

use super::error::{status_error, ApiError};
use chrono::{DateTime, Duration, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Links in resources point at the real API, as GCE's do, whatever endpoint the client used.
pub const GCE_BASE: &str = "https://www.googleapis.com/compute/v1/";
/// How long an Operation stays RUNNING (and a resize request CREATING) unless the control API changes it.
pub const OP_LATENCY_MS: i64 = 100;
/// How long a resize request with capacity spends creating its VMs (PROVISIONING) before SUCCEEDED.
pub const PROVISION_MS: i64 = 150;
/// How long a VM removed with `deleteInstances` shows STOPPING / DELETING before it is gone.
pub const DELETE_MS: i64 = 100;
/// `requestedRunDuration.seconds` bounds (10 minutes .. 7 days).
pub const MIN_RUN_SECONDS: i64 = 600;
pub const MAX_RUN_SECONDS: i64 = 604_800;
/// At most this many instances per resize request and per `deleteInstances` call.
pub const MAX_PER_CALL: usize = 1000;

/// Where a resource lives: a zone, a region, or global.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scope {
    Zone(String),
    Region(String),
    Global,
}

impl Scope {
    /// `zones/us-central1-a`, `regions/us-central1` or `global`.
    pub fn path(&self) -> String {
        match self {
            Scope::Zone(z) => format!("zones/{z}"),
            Scope::Region(r) => format!("regions/{r}"),
            Scope::Global => "global".to_string(),
        }
    }

    fn is_regional(&self) -> bool {
        matches!(self, Scope::Region(_))
    }

    /// Adds `zone` or `region` (a URL, as GCE does) to a resource's JSON.
    fn annotate(&self, project: &str, obj: &mut Map<String, Value>) {
        match self {
            Scope::Zone(z) => {
                obj.insert(
                    "zone".into(),
                    json!(format!("{GCE_BASE}projects/{project}/zones/{z}")),
                );
            }
            Scope::Region(r) => {
                obj.insert(
                    "region".into(),
                    json!(format!("{GCE_BASE}projects/{project}/regions/{r}")),
                );
            }
            Scope::Global => {}
        }
    }
}

/// A MIG's identity: project, zone or region, name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MigKey {
    pub project: String,
    pub scope: Scope,
    pub name: String,
}

impl MigKey {
    /// `projects/p/regions/r/instanceGroupManagers/name`.
    pub fn path(&self) -> String {
        format!(
            "projects/{}/{}/instanceGroupManagers/{}",
            self.project,
            self.scope.path(),
            self.name
        )
    }

    pub fn url(&self) -> String {
        format!("{GCE_BASE}{}", self.path())
    }
}

/// Side effects the edges carry out after a state change, outside the lock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// A VM became RUNNING: run the boot command.
    Boot(String),
    /// A VM was deleted: run the stop command.
    Stop(String),
}

/// A capacity rule of the control API (`POST /_sim/capacity`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CapacityRule {
    /// MIG name prefix; "" matches every MIG.
    #[serde(rename = "match", default)]
    pub prefix: String,
    /// Real seconds a resize request stays ACCEPTED before capacity (or the failure) arrives.
    #[serde(default)]
    pub delay_seconds: f64,
    /// Make the request FAILED (after the delay) with this error.
    #[serde(default)]
    pub fail: Option<CapacityFailure>,
    /// Keep the request ACCEPTED until the rule is replaced or cleared.
    #[serde(default)]
    pub hold: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CapacityFailure {
    pub code: String,
    #[serde(default)]
    pub message: String,
    /// `errorDetails[]` as GCE sends them (`errorInfo`, `quotaInfo`, `help`, `localizedMessage`);
    /// absent: a `quotaInfo` for `QUOTA_EXCEEDED`, none otherwise.
    #[serde(
        default,
        rename = "errorDetails",
        skip_serializing_if = "Option::is_none"
    )]
    pub error_details: Option<Value>,
}

/// The `{errors:[{code, message, errorDetails}]}` a capacity failure puts in a resize request's status.
pub fn capacity_error(f: &CapacityFailure) -> Value {
    let message = if f.message.is_empty() {
        format!("Resize request failed: {}", f.code)
    } else {
        f.message.clone()
    };
    let mut e = status_error(&f.code, &message);
    let details = f.error_details.clone().or_else(|| {
        (f.code == "QUOTA_EXCEEDED").then(|| {
            json!([{"quotaInfo": {"metricName": "compute.googleapis.com/preemptible_nvidia_h200_gpus",
                                  "limitName": "PREEMPTIBLE-NVIDIA-H200-GPUS-per-project-region",
                                  "dimensions": {"region": "us-central1"}, "limit": 8.0}}])
        })
    });
    if let Some(d) = details {
        e["errors"][0]["errorDetails"] = d;
    }
    e
}

/// An HTTP fault injection rule of the control API (`POST /_sim/faults`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FaultRule {
    /// A method id such as `regionInstanceGroupManagers.insert`, or `*` for every API call.
    #[serde(default = "any_method")]
    pub method: String,
    /// HTTP status to answer with; 200 means "no error" (only `delay_ms` applies).
    pub status: u16,
    /// `errors[0].reason`; defaults from the status (`rateLimitExceeded`, `backendError`, ...).
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default = "one")]
    pub probability: f64,
    /// How many calls it may still hit; absent = unlimited.
    #[serde(default)]
    pub count: Option<u64>,
    /// Delay before answering (or before the real answer when status is 200).
    #[serde(default)]
    pub delay_ms: u64,
}

fn any_method() -> String {
    "*".to_string()
}

fn one() -> f64 {
    1.0
}

/// An Operation: the handle GCE returns for every mutation.
#[derive(Clone, Debug)]
pub struct Operation {
    pub name: String,
    id: u64,
    pub project: String,
    pub scope: Scope,
    op_type: String,
    target_link: String,
    target_id: u64,
    inserted: DateTime<Utc>,
    /// When it turns DONE; `None` while it waits for something (a MIG delete behind a provisioning request).
    done_at: Option<DateTime<Utc>>,
    error: Option<Value>,
    http_error: Option<(u16, &'static str)>,
}

impl Operation {
    pub fn is_done(&self, now: DateTime<Utc>) -> bool {
        self.done_at.is_some_and(|t| now >= t)
    }

    pub fn to_json(&self, now: DateTime<Utc>) -> Value {
        let done = self.is_done(now);
        let mut o = json!({
            "kind": "compute#operation",
            "id": self.id.to_string(),
            "name": self.name,
            "operationType": self.op_type,
            "targetLink": self.target_link,
            "targetId": self.target_id.to_string(),
            "status": if done { "DONE" } else { "RUNNING" },
            "user": "slurm-dws-sim@example.iam.gserviceaccount.com",
            "progress": if done { 100 } else { 0 },
            "insertTime": ts(self.inserted),
            "startTime": ts(self.inserted),
            "selfLink": format!("{GCE_BASE}projects/{}/{}/operations/{}", self.project, self.scope.path(), self.name),
        });
        let obj = o.as_object_mut().expect("object");
        self.scope.annotate(&self.project, obj);
        if done {
            obj.insert("endTime".into(), json!(ts(self.done_at.unwrap_or(now))));
            if let Some(e) = &self.error {
                obj.insert("error".into(), e.clone());
            }
            if let Some((code, msg)) = self.http_error {
                obj.insert("httpErrorStatusCode".into(), json!(code));
                obj.insert("httpErrorMessage".into(), json!(msg));
            }
        }
        o
    }
}

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
    fn name(self) -> &'static str {
        match self {
            RrState::Creating => "CREATING",
            RrState::Accepted => "ACCEPTED",
            RrState::Succeeded => "SUCCEEDED",
            RrState::Failed => "FAILED",
            RrState::Cancelled => "CANCELLED",
        }
    }

    fn is_final(self) -> bool {
        matches!(
            self,
            RrState::Succeeded | RrState::Failed | RrState::Cancelled
        )
    }
}

#[derive(Clone, Debug)]
pub struct ResizeRequest {
    name: String,
    id: u64,
    created: DateTime<Utc>,
    /// The request body as sent (after validation): echoed back in `get`.
    body: Value,
    pub state: RrState,
    /// The VM names this request creates (generated for `resizeBy`).
    names: Vec<String>,
    /// Names removed with `deleteInstances` while queued: they will not be created.
    removed: BTreeSet<String>,
    run_seconds: i64,
    /// When CREATING turns ACCEPTED (when the insert Operation is DONE).
    accept_at: DateTime<Utc>,
    accepted_at: Option<DateTime<Utc>>,
    /// Capacity was found: the VMs are being created until then.
    provisioning_until: Option<DateTime<Utc>>,
    error: Option<Value>,
    last_attempt: Option<Value>,
}

impl ResizeRequest {
    fn remaining(&self) -> impl Iterator<Item = &String> {
        self.names.iter().filter(|n| !self.removed.contains(*n))
    }

    fn is_queued(&self) -> bool {
        matches!(self.state, RrState::Creating | RrState::Accepted)
    }
}

#[derive(Clone, Debug)]
pub struct Mig {
    key: MigKey,
    id: u64,
    created: DateTime<Utc>,
    /// The insert body (validated), normalized; output fields are added when rendered.
    body: Value,
    pub target_size: i64,
    /// The zone its VMs are created in (a regional MIG's single zone).
    zone: String,
    template: String,
    requests: BTreeMap<String, ResizeRequest>,
    /// Delete operations waiting for a provisioning request to finish.
    deleting: Vec<String>,
    busy_until: Option<DateTime<Utc>>,
}

impl Mig {
    fn limit(&self) -> i64 {
        if self.key.scope.is_regional() {
            2000
        } else {
            1000
        }
    }
}

/// A VM created by a resize request.
#[derive(Clone, Debug)]
pub struct Instance {
    pub project: String,
    pub zone: String,
    pub name: String,
    id: u64,
    mig: MigKey,
    template: String,
    created: DateTime<Utc>,
    run_seconds: i64,
    pub termination: DateTime<Utc>,
    network_ip: String,
    /// Set by `deleteInstances`: the VM is STOPPING and disappears at that time.
    deleting_at: Option<DateTime<Utc>>,
}

impl Instance {
    pub fn url(&self) -> String {
        format!(
            "{GCE_BASE}projects/{}/zones/{}/instances/{}",
            self.project, self.zone, self.name
        )
    }
}

type InstanceKey = (String, String, String);

/// The whole simulated world, behind one mutex.
pub struct State {
    time_scale: f64,
    migs: BTreeMap<MigKey, Mig>,
    instances: BTreeMap<InstanceKey, Instance>,
    operations: HashMap<String, Operation>,
    /// (project, requestId) → operation name, for idempotent retries.
    request_ids: HashMap<(String, String), String>,
    pub capacity: Vec<CapacityRule>,
    pub faults: Vec<FaultRule>,
    pub templates: BTreeMap<String, Value>,
    /// API calls by method id.
    pub calls: BTreeMap<String, u64>,
    next_ip: u32,
    /// How long Operations stay RUNNING (control API: `POST /_sim/latency`).
    pub op_latency_ms: i64,
}

pub fn ts(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, false)
}

fn new_id() -> u64 {
    rand::random::<u64>() >> 1 | 1 << 62
}

/// RFC 1035 label: `[a-z]([-a-z0-9]*[a-z0-9])?`, 1..63 characters.
pub fn is_rfc1035(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_lowercase()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && *b.last().expect("non-empty") != b'-'
}

/// The last path segment of a URL or partial URL (`zones/us-central1-a` → `us-central1-a`).
fn last_segment(s: &str) -> &str {
    s.rsplit('/').next().unwrap_or(s)
}

/// A number that identifies the project, as GCE's `created-by` metadata uses project numbers.
pub fn project_number(project: &str) -> u64 {
    // FNV-1a: stable across runs, unlike the std hasher.
    let h = project.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    });
    100_000_000_000 + h % 900_000_000_000
}

impl State {
    pub fn new(time_scale: f64) -> State {
        State {
            time_scale,
            migs: BTreeMap::new(),
            instances: BTreeMap::new(),
            operations: HashMap::new(),
            request_ids: HashMap::new(),
            capacity: Vec::new(),
            faults: Vec::new(),
            templates: BTreeMap::new(),
            calls: BTreeMap::new(),
            next_ip: 2,
            op_latency_ms: OP_LATENCY_MS,
        }
    }

    // ----- operations and idempotency -------------------------------------------------------

    /// Runs a mutation once per `(project, requestId)`: a retry returns the original Operation.
    pub fn mutate(
        &mut self,
        project: &str,
        request_id: Option<&str>,
        now: DateTime<Utc>,
        act: impl FnOnce(&mut State) -> Result<String, ApiError>,
    ) -> Result<Value, ApiError> {
        if let Some(rid) = request_id {
            check_request_id(rid)?;
            if let Some(op) = self
                .request_ids
                .get(&(project.to_string(), rid.to_string()))
            {
                if let Some(op) = self.operations.get(op) {
                    return Ok(op.to_json(now));
                }
            }
        }
        let op = act(self)?;
        if let Some(rid) = request_id {
            self.request_ids
                .insert((project.to_string(), rid.to_string()), op.clone());
        }
        Ok(self.operations[&op].to_json(now))
    }

    #[allow(clippy::too_many_arguments)]
    fn new_op(
        &mut self,
        project: &str,
        scope: Scope,
        op_type: &str,
        target_link: String,
        target_id: u64,
        now: DateTime<Utc>,
        done_at: Option<DateTime<Utc>>,
    ) -> String {
        let name = format!(
            "operation-{}-{}",
            now.timestamp_millis(),
            uuid::Uuid::new_v4().simple()
        );
        self.operations.insert(
            name.clone(),
            Operation {
                name: name.clone(),
                id: new_id(),
                project: project.to_string(),
                scope,
                op_type: op_type.to_string(),
                target_link,
                target_id,
                inserted: now,
                done_at,
                error: None,
                http_error: None,
            },
        );
        name
    }

    pub fn operation(
        &self,
        project: &str,
        scope: &Scope,
        name: &str,
    ) -> Result<&Operation, ApiError> {
        self.operations
            .get(name)
            .filter(|o| o.project == project && &o.scope == scope)
            .ok_or_else(|| {
                ApiError::not_found(&format!(
                    "projects/{project}/{}/operations/{name}",
                    scope.path()
                ))
            })
    }

    // ----- MIGs ------------------------------------------------------------------------------

    fn mig(&self, key: &MigKey) -> Result<&Mig, ApiError> {
        self.migs
            .get(key)
            .ok_or_else(|| ApiError::not_found(&key.path()))
    }

    fn mig_mut(&mut self, key: &MigKey) -> Result<&mut Mig, ApiError> {
        self.migs
            .get_mut(key)
            .ok_or_else(|| ApiError::not_found(&key.path()))
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
            return Err(ApiError::invalid(
                "Required field 'resource.name' not specified",
            ));
        }
        if !is_rfc1035(name) {
            return Err(ApiError::invalid(format!(
                "Invalid value for field 'resource.name': '{name}'. Must be a match of regex '[a-z](?:[-a-z0-9]{{0,61}}[a-z0-9])?'"
            )));
        }
        let template = body
            .get("instanceTemplate")
            .and_then(Value::as_str)
            .or_else(|| {
                body.pointer("/versions/0/instanceTemplate")
                    .and_then(Value::as_str)
            })
            .ok_or_else(|| {
                ApiError::invalid("Required field 'resource.instanceTemplate' not specified")
            })?
            .to_string();
        let target_size = body
            .get("targetSize")
            .and_then(Value::as_i64)
            .ok_or_else(|| {
                ApiError::invalid("Required field 'resource.targetSize' not specified")
            })?;
        if target_size != 0 {
            return Err(ApiError::invalid(format!(
                "Invalid value for field 'resource.targetSize': '{target_size}'. Flex-start VMs are created only through resize requests: create the MIG with targetSize 0."
            )));
        }
        let key = MigKey {
            project: project.to_string(),
            scope: scope.clone(),
            name: name.to_string(),
        };
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
                let shape = body
                    .pointer("/distributionPolicy/targetShape")
                    .and_then(Value::as_str);
                let redistribution = body
                    .pointer("/updatePolicy/instanceRedistributionType")
                    .and_then(Value::as_str);
                if matches!(shape, Some("ANY_SINGLE_ZONE" | "ANY" | "BALANCED"))
                    && redistribution != Some("NONE")
                {
                    return Err(ApiError::invalid(format!(
                        "Invalid value for field 'resource.updatePolicy.instanceRedistributionType': '{}'. Target distribution shape {} requires instanceRedistributionType NONE.",
                        redistribution.unwrap_or("PROACTIVE"),
                        shape.unwrap_or_default()
                    )));
                }
                let zones = if zones.is_empty() {
                    vec![format!("{r}-a")]
                } else {
                    zones
                };
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
        Ok(self.new_op(
            project,
            scope,
            "insert",
            url,
            id,
            now,
            Some(now + ms(self.op_latency_ms)),
        ))
    }

    pub fn mig_json(&self, key: &MigKey, now: DateTime<Utc>) -> Result<Value, ApiError> {
        Ok(self.render_mig(self.mig(key)?, now))
    }

    fn render_mig(&self, mig: &Mig, now: DateTime<Utc>) -> Value {
        let mut o = mig.body.clone();
        let obj = o.as_object_mut().expect("validated object");
        let (mut creating, mut deleting, mut none) = (0, 0, 0);
        for rr in mig.requests.values().filter(|r| r.is_queued()) {
            creating += rr.remaining().count();
        }
        for vm in self.instances.values().filter(|i| i.mig == mig.key) {
            if vm.deleting_at.is_some() {
                deleting += 1;
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
        obj.entry("versions")
            .or_insert_with(|| json!([{"instanceTemplate": template}]));
        obj.entry("baseInstanceName")
            .or_insert_with(|| json!(mig.key.name));
        obj.entry("listManagedInstancesResults")
            .or_insert_with(|| json!("PAGELESS"));
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
        self.migs
            .values()
            .filter(|m| m.key.project == project && &m.key.scope == scope)
            .map(|m| self.render_mig(m, now))
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
        let op = self.new_op(
            &key.project,
            key.scope.clone(),
            "delete",
            key.url(),
            id,
            now,
            None,
        );
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
        let skip = body
            .get("skipInstancesOnValidationError")
            .and_then(Value::as_bool)
            .unwrap_or(false);
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
            let vm_key = (
                key.project.clone(),
                zone.unwrap_or(&mig.zone).to_string(),
                name.to_string(),
            );
            match self.instances.get(&vm_key) {
                Some(vm) if vm.mig == *key => {
                    if vm.deleting_at.is_none() && !vms.contains(&vm_key) {
                        vms.push(vm_key);
                    }
                }
                _ if zone.is_none() => {
                    match mig
                        .requests
                        .values()
                        .find(|r| r.is_queued() && r.remaining().any(|n| n == name))
                    {
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
                "Invalid value for field 'resource.instances': {}. Instance is not a member of the instance group manager {}.",
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
            let (status, action) = if vm.deleting_at.is_some() {
                ("STOPPING", "DELETING")
            } else {
                ("RUNNING", "NONE")
            };
            items.push(json!({
                "name": vm.name, "id": vm.id.to_string(), "instance": vm.url(), "instanceStatus": status,
                "currentAction": action, "targetStatus": "RUNNING", "version": version,
                "scheduling": {"terminationTimestamp": ts(vm.termination)},
            }));
        }
        items.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
        let paginated = mig
            .body
            .get("listManagedInstancesResults")
            .and_then(Value::as_str)
            == Some("PAGINATED");
        Ok((items, paginated))
    }

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
            return Err(ApiError::invalid(
                "Required field 'resource.name' not specified",
            ));
        }
        if !is_rfc1035(name) {
            return Err(ApiError::invalid(format!(
                "Invalid value for field 'resource.name': '{name}'. Must be a match of regex '[a-z](?:[-a-z0-9]{{0,61}}[a-z0-9])?'"
            )));
        }
        let instances = body
            .get("instances")
            .and_then(Value::as_array)
            .filter(|a| !a.is_empty());
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
        let seconds_value = body.pointer("/requestedRunDuration/seconds");
        let seconds = match seconds_value {
            Some(Value::String(s)) => s.parse::<i64>().ok(),
            Some(Value::Number(n)) => n.as_i64(),
            _ => None,
        }
        .ok_or_else(|| {
            ApiError::invalid("Required field 'resource.requestedRunDuration' not specified")
        })?;
        if !(MIN_RUN_SECONDS..=MAX_RUN_SECONDS).contains(&seconds) {
            return Err(ApiError::invalid(format!(
                "Invalid value for field 'resource.requestedRunDuration.seconds': '{seconds}'. Must be between {MIN_RUN_SECONDS} and {MAX_RUN_SECONDS}."
            )));
        }
        if body
            .pointer("/requestedRunDuration/nanos")
            .and_then(Value::as_i64)
            .unwrap_or(0)
            != 0
        {
            return Err(ApiError::invalid(
                "Invalid value for field 'resource.requestedRunDuration.nanos': must be 0.",
            ));
        }
        if key.scope.is_regional() {
            let shape = mig
                .body
                .pointer("/distributionPolicy/targetShape")
                .and_then(Value::as_str);
            if shape != Some("ANY_SINGLE_ZONE") {
                return Err(ApiError::invalid(format!(
                    "Resize requests in a regional MIG require distributionPolicy.targetShape ANY_SINGLE_ZONE; {} has {}.",
                    key.name,
                    shape.unwrap_or("EVEN")
                )));
            }
        }
        if mig.requests.contains_key(name) {
            return Err(ApiError::already_exists(&format!(
                "{}/resizeRequests/{name}",
                key.path()
            )));
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
        if let Some(taken) = names
            .iter()
            .find(|n| self.name_in_use(&key.project, &zone, n))
        {
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
                provisioning_until: None,
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
    fn name_in_use(&self, project: &str, zone: &str, name: &str) -> bool {
        self.instances
            .contains_key(&(project.to_string(), zone.to_string(), name.to_string()))
            || self.migs.values().any(|m| {
                m.key.project == project
                    && m.zone == zone
                    && m.requests
                        .values()
                        .any(|r| r.is_queued() && r.remaining().any(|n| n == name))
            })
    }

    fn request(&self, key: &MigKey, name: &str) -> Result<&ResizeRequest, ApiError> {
        self.mig(key)?
            .requests
            .get(name)
            .ok_or_else(|| ApiError::not_found(&format!("{}/resizeRequests/{name}", key.path())))
    }

    pub fn resize_request_json(&self, key: &MigKey, name: &str) -> Result<Value, ApiError> {
        Ok(render_request(key, self.request(key, name)?))
    }

    pub fn list_resize_requests(&self, key: &MigKey) -> Result<Vec<Value>, ApiError> {
        Ok(self
            .mig(key)?
            .requests
            .values()
            .map(|r| render_request(key, r))
            .collect())
    }

    /// Cancel: ACCEPTED → CANCELLED with targetSize lowered; otherwise the Operation fails.
    pub fn cancel_resize_request(
        &mut self,
        key: &MigKey,
        name: &str,
        now: DateTime<Utc>,
    ) -> Result<String, ApiError> {
        let rr = self.request(key, name)?;
        let (id, state) = (rr.id, rr.state);
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
        if state == RrState::Accepted {
            let mig = self.mig_mut(key)?;
            let rr = mig.requests.get_mut(name).expect("checked above");
            let n = rr.remaining().count() as i64;
            rr.state = RrState::Cancelled;
            rr.last_attempt = None;
            rr.provisioning_until = None;
            mig.target_size -= n;
        } else {
            let o = self.operations.get_mut(&op).expect("just inserted");
            o.error = Some(status_error(
                "CONDITION_NOT_MET",
                &format!("Resize request '{name}' is {}; only an ACCEPTED resize request can be cancelled.", state.name()),
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
        if !rr.state.is_final() {
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

    // ----- instances and templates -----------------------------------------------------------

    pub fn instance_json(&self, project: &str, zone: &str, name: &str) -> Result<Value, ApiError> {
        self.instances
            .get(&(project.to_string(), zone.to_string(), name.to_string()))
            .map(|vm| self.render_instance(vm))
            .ok_or_else(|| {
                ApiError::not_found(&format!("projects/{project}/zones/{zone}/instances/{name}"))
            })
    }

    /// VMs of a project, optionally of one zone, by zone then name.
    pub fn list_instances(&self, project: &str, zone: Option<&str>) -> Vec<(String, Value)> {
        self.instances
            .values()
            .filter(|vm| vm.project == project && zone.is_none_or(|z| z == vm.zone))
            .map(|vm| (vm.zone.clone(), self.render_instance(vm)))
            .collect()
    }

    fn render_instance(&self, vm: &Instance) -> Value {
        let template = self.template_json(&vm.project, &Scope::Global, last_segment(&vm.template));
        let props = template
            .get("properties")
            .cloned()
            .unwrap_or_else(|| json!({}));
        let machine = props
            .get("machineType")
            .and_then(Value::as_str)
            .unwrap_or("a3-ultragpu-8g");
        let mut scheduling = props
            .get("scheduling")
            .cloned()
            .unwrap_or_else(|| json!({}));
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
        obj.entry("id")
            .or_insert_with(|| json!(project_number(name).to_string()));
        obj.entry("creationTimestamp")
            .or_insert_with(|| json!("2026-01-01T00:00:00.000+00:00"));
        obj.insert(
            "selfLink".into(),
            json!(format!(
                "{GCE_BASE}projects/{project}/{}/instanceTemplates/{name}",
                scope.path()
            )),
        );
        if let Scope::Region(_) = scope {
            scope.annotate(project, obj);
        }
        t
    }

    /// Control API: GCE deletes the VM now, as at the end of its run duration.
    pub fn expire(&mut self, name: &str) -> Vec<Effect> {
        let keys: Vec<InstanceKey> = self
            .instances
            .keys()
            .filter(|k| k.2 == name)
            .cloned()
            .collect();
        keys.into_iter()
            .filter_map(|k| self.expire_key(&k))
            .collect()
    }

    fn expire_key(&mut self, key: &InstanceKey) -> Option<Effect> {
        let vm = self.instances.remove(key)?;
        if vm.deleting_at.is_none() {
            if let Some(mig) = self.migs.get_mut(&vm.mig) {
                mig.target_size -= 1;
            }
        }
        Some(Effect::Stop(vm.name))
    }

    // ----- time ------------------------------------------------------------------------------

    /// Advances everything to `now`: requests through their states, deletions, expiries, MIG deletes.
    pub fn tick(&mut self, now: DateTime<Utc>) -> Vec<Effect> {
        let mut effects = Vec::new();
        let mut created = Vec::new();
        let State { migs, capacity, .. } = self;
        for mig in migs.values_mut() {
            let rule = capacity
                .iter()
                .rev()
                .find(|r| mig.key.name.starts_with(&r.prefix))
                .cloned();
            for rr in mig.requests.values_mut() {
                if let Some(vms) = advance_request(rr, rule.as_ref(), &mut mig.target_size, now) {
                    created.extend(vms.into_iter().map(|n| {
                        (
                            mig.key.clone(),
                            mig.zone.clone(),
                            mig.template.clone(),
                            n,
                            rr.run_seconds,
                        )
                    }));
                }
            }
        }
        for (mig, zone, template, name, run_seconds) in created {
            let real_ms = (run_seconds as f64 * 1000.0 / self.time_scale).round() as i64;
            let n = self.next_ip;
            self.next_ip += 1;
            let vm = Instance {
                project: mig.project.clone(),
                zone: zone.clone(),
                name: name.clone(),
                id: new_id(),
                mig,
                template,
                created: now,
                run_seconds,
                termination: now + ms(real_ms),
                network_ip: format!("10.{}.{}.{}", (n >> 16) & 255, (n >> 8) & 255, n & 255),
                deleting_at: None,
            };
            self.instances
                .insert((vm.project.clone(), zone, name.clone()), vm);
            effects.push(Effect::Boot(name));
        }
        let gone: Vec<InstanceKey> = self
            .instances
            .iter()
            .filter(|(_, vm)| vm.deleting_at.is_some_and(|t| now >= t) || now >= vm.termination)
            .map(|(k, _)| k.clone())
            .collect();
        effects.extend(gone.iter().filter_map(|k| self.expire_key(k)));
        effects.extend(self.finish_mig_deletes(now));
        effects
    }

    /// Completes MIG deletes that no longer wait for a provisioning request.
    fn finish_mig_deletes(&mut self, now: DateTime<Utc>) -> Vec<Effect> {
        let ready: Vec<MigKey> = self
            .migs
            .values()
            .filter(|m| {
                !m.deleting.is_empty()
                    && m.requests.values().all(|r| r.provisioning_until.is_none())
            })
            .map(|m| m.key.clone())
            .collect();
        let mut effects = Vec::new();
        for key in ready {
            let mig = self.migs.remove(&key).expect("listed above");
            for op in &mig.deleting {
                if let Some(op) = self.operations.get_mut(op) {
                    op.done_at = Some(now);
                }
            }
            let vms: Vec<InstanceKey> = self
                .instances
                .iter()
                .filter(|(_, vm)| vm.mig == key)
                .map(|(k, _)| k.clone())
                .collect();
            for k in vms {
                if let Some(vm) = self.instances.remove(&k) {
                    effects.push(Effect::Stop(vm.name));
                }
            }
        }
        effects
    }

    /// Everything, for `GET /_sim/state`.
    pub fn dump(&self, now: DateTime<Utc>) -> Value {
        let migs: Vec<Value> = self
            .migs
            .values()
            .map(|m| {
                let mut v = self.render_mig(m, now);
                v["resizeRequests"] = json!(m
                    .requests
                    .values()
                    .map(|r| render_request(&m.key, r))
                    .collect::<Vec<_>>());
                v["managedInstances"] = json!(self
                    .managed_instances(&m.key)
                    .map(|(items, _)| items)
                    .unwrap_or_default());
                v
            })
            .collect();
        let instances: Vec<Value> = self
            .instances
            .values()
            .map(|vm| self.render_instance(vm))
            .collect();
        let mut ops: Vec<&Operation> = self.operations.values().collect();
        ops.sort_by_key(|o| (o.inserted, o.name.clone()));
        json!({
            "time": ts(now),
            "time_scale": self.time_scale,
            "migs": migs,
            "instances": instances,
            "operations": ops.iter().map(|o| o.to_json(now)).collect::<Vec<_>>(),
            "capacity": self.capacity,
            "faults": self.faults,
            "templates": self.templates.keys().collect::<Vec<_>>(),
            "calls": self.calls,
        })
    }
}

fn ms(n: i64) -> Duration {
    Duration::milliseconds(n)
}

/// GCE's rule for `requestId`: a UUID, not all zeros.
fn check_request_id(rid: &str) -> Result<(), ApiError> {
    match uuid::Uuid::parse_str(rid) {
        Ok(u) if !u.is_nil() => Ok(()),
        _ => Err(ApiError::invalid(format!(
            "Invalid value for field 'requestId': '{rid}'. The request id must be a valid UUID with the exception that zero UUID is not supported (00000000-0000-0000-0000-000000000000)."
        ))),
    }
}

/// One step of a resize request's state machine; returns the VM names to create when it succeeds.
fn advance_request(
    rr: &mut ResizeRequest,
    rule: Option<&CapacityRule>,
    target_size: &mut i64,
    now: DateTime<Utc>,
) -> Option<Vec<String>> {
    if rr.state == RrState::Creating && now >= rr.accept_at {
        rr.state = RrState::Accepted;
        rr.accepted_at = Some(now);
    }
    if rr.state != RrState::Accepted {
        return None;
    }
    if let Some(until) = rr.provisioning_until {
        if now >= until {
            rr.state = RrState::Succeeded;
            rr.provisioning_until = None;
            rr.last_attempt = None;
            return Some(rr.remaining().cloned().collect());
        }
        return None;
    }
    let accepted = rr.accepted_at.unwrap_or(now);
    let delay = rule.map_or(0.0, |r| r.delay_seconds.max(0.0));
    let ready = now >= accepted + ms((delay * 1000.0) as i64);
    match rule {
        Some(r) if r.hold || !ready => {
            let waiting = CapacityFailure {
                code: "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS".into(),
                message: "Waiting for resources: the zone does not have enough resources available to fulfill the request. The request stays queued.".into(),
                error_details: None,
            };
            rr.last_attempt = Some(capacity_error(r.fail.as_ref().unwrap_or(&waiting)));
        }
        Some(CapacityRule { fail: Some(f), .. }) => {
            *target_size -= rr.remaining().count() as i64;
            rr.state = RrState::Failed;
            rr.last_attempt = None;
            rr.error = Some(capacity_error(f));
        }
        _ => rr.provisioning_until = Some(now + ms(PROVISION_MS)),
    }
    None
}

fn render_request(key: &MigKey, rr: &ResizeRequest) -> Value {
    let mut o = json!({});
    let obj = o.as_object_mut().expect("object");
    for field in ["description", "instances", "resizeBy"] {
        if let Some(v) = rr.body.get(field).filter(|v| !v.is_null()) {
            obj.insert(field.into(), v.clone());
        }
    }
    let url = format!("{}/resizeRequests/{}", key.url(), rr.name);
    obj.insert(
        "kind".into(),
        json!("compute#instanceGroupManagerResizeRequest"),
    );
    obj.insert("id".into(), json!(rr.id.to_string()));
    obj.insert("creationTimestamp".into(), json!(ts(rr.created)));
    obj.insert("name".into(), json!(rr.name));
    obj.insert(
        "requestedRunDuration".into(),
        json!({"seconds": rr.run_seconds.to_string()}),
    );
    obj.insert("state".into(), json!(rr.state.name()));
    obj.insert("selfLink".into(), json!(url));
    obj.insert(
        "selfLinkWithId".into(),
        json!(format!("{}/resizeRequests/{}", key.url(), rr.id)),
    );
    let mut status = json!({});
    if let Some(e) = &rr.error {
        status["error"] = e.clone();
    }
    if let Some(e) = &rr.last_attempt {
        status["lastAttempt"] = json!({"error": e});
    }
    obj.insert("status".into(), status);
    key.scope.annotate(&key.project, obj);
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t0() -> DateTime<Utc> {
        "2026-11-23T10:00:00Z".parse().unwrap()
    }

    fn setup(state: &mut State) -> MigKey {
        let mig = json!({"name": "hpc-a3u-x", "targetSize": 0,
            "versions": [{"instanceTemplate": "projects/p/regions/r1/instanceTemplates/t"}],
            "distributionPolicy": {"zones": [{"zone": "zones/r1-b"}], "targetShape": "ANY_SINGLE_ZONE"},
            "updatePolicy": {"instanceRedistributionType": "NONE"}});
        state
            .insert_mig("p", Scope::Region("r1".into()), &mig, t0())
            .unwrap();
        MigKey {
            project: "p".into(),
            scope: Scope::Region("r1".into()),
            name: "hpc-a3u-x".into(),
        }
    }

    fn rr(names: &[&str], seconds: &str) -> Value {
        json!({"name": "rr", "instances": names.iter().map(|n| json!({"name": n})).collect::<Vec<_>>(),
               "requestedRunDuration": {"seconds": seconds}})
    }

    #[test]
    fn request_without_rules_succeeds_all_together_then_expires() {
        let mut s = State::new(100.0);
        let key = setup(&mut s);
        s.insert_resize_request(&key, &rr(&["n-0", "n-1"], "3600"), t0())
            .unwrap();
        assert_eq!(s.migs[&key].target_size, 2);
        let t1 = t0() + ms(OP_LATENCY_MS);
        assert!(s.tick(t1).is_empty());
        assert_eq!(s.migs[&key].requests["rr"].state, RrState::Accepted);
        let t2 = t1 + ms(PROVISION_MS);
        let fx = s.tick(t2);
        assert_eq!(
            fx,
            vec![Effect::Boot("n-0".into()), Effect::Boot("n-1".into())]
        );
        assert_eq!(s.instances.len(), 2);
        assert!(s.instances.keys().all(|k| k.1 == "r1-b"));
        // 3600 s at time scale 100 is 36 real seconds.
        let fx = s.tick(t2 + ms(36_000));
        assert_eq!(fx.len(), 2);
        assert_eq!(s.migs[&key].target_size, 0);
    }

    #[test]
    fn failing_rule_rolls_back() {
        let mut s = State::new(1.0);
        let key = setup(&mut s);
        s.capacity.push(CapacityRule {
            prefix: "hpc-".into(),
            delay_seconds: 1.0,
            fail: Some(CapacityFailure {
                code: "ZONE_RESOURCE_POOL_EXHAUSTED".into(),
                message: String::new(),
                error_details: None,
            }),
            hold: false,
        });
        s.insert_resize_request(&key, &rr(&["n-0"], "600"), t0())
            .unwrap();
        s.tick(t0() + ms(OP_LATENCY_MS));
        s.tick(t0() + ms(500));
        assert!(s.migs[&key].requests["rr"].last_attempt.is_some());
        s.tick(t0() + ms(1200));
        let r = &s.migs[&key].requests["rr"];
        assert_eq!(r.state, RrState::Failed);
        assert!(r.last_attempt.is_none());
        assert_eq!(s.migs[&key].target_size, 0);
        assert!(s.instances.is_empty());
    }

    #[test]
    fn mig_delete_waits_for_a_provisioning_request_then_cascades() {
        let mut s = State::new(1.0);
        let key = setup(&mut s);
        s.insert_resize_request(&key, &rr(&["n-0"], "3600"), t0())
            .unwrap();
        let t1 = t0() + ms(OP_LATENCY_MS);
        s.tick(t1);
        s.tick(t1 + ms(1));
        assert!(s.migs[&key].requests["rr"].provisioning_until.is_some());
        let op = s.delete_mig(&key, t1 + ms(2)).unwrap();
        assert!(s.tick(t1 + ms(3)).is_empty());
        assert!(
            !s.operations[&op].is_done(t1 + ms(3)),
            "waits while provisioning"
        );
        let t2 = t1 + ms(1 + PROVISION_MS);
        // The VMs are made, then deleted with the MIG, in the same step.
        let fx = s.tick(t2);
        assert_eq!(
            fx,
            vec![Effect::Boot("n-0".into()), Effect::Stop("n-0".into())]
        );
        assert!(s.operations[&op].is_done(t2));
        assert!(s.migs.is_empty() && s.instances.is_empty());
    }

    #[test]
    fn mig_delete_of_queued_requests_is_immediate() {
        let mut s = State::new(1.0);
        let key = setup(&mut s);
        s.capacity.push(CapacityRule {
            prefix: String::new(),
            delay_seconds: 0.0,
            fail: None,
            hold: true,
        });
        s.insert_resize_request(&key, &rr(&["n-0"], "3600"), t0())
            .unwrap();
        s.tick(t0() + ms(OP_LATENCY_MS));
        let op = s.delete_mig(&key, t0() + ms(200)).unwrap();
        assert!(s.tick(t0() + ms(250)).is_empty());
        assert!(s.operations[&op].is_done(t0() + ms(250)));
        assert!(s.migs.is_empty());
    }

    #[test]
    fn run_duration_bounds() {
        let mut s = State::new(1.0);
        let key = setup(&mut s);
        assert!(s
            .insert_resize_request(&key, &rr(&["n-0"], "599"), t0())
            .is_err());
        assert!(s
            .insert_resize_request(&key, &rr(&["n-0"], "604801"), t0())
            .is_err());
        assert!(s
            .insert_resize_request(&key, &rr(&["n-0"], "604800"), t0())
            .is_ok());
    }

    #[test]
    fn names_must_be_rfc1035() {
        assert!(is_rfc1035("hpc-a3u-0"));
        assert!(!is_rfc1035("Hpc"));
        assert!(!is_rfc1035("0hpc"));
        assert!(!is_rfc1035("hpc-"));
        assert!(!is_rfc1035(&"a".repeat(64)));
    }
}
