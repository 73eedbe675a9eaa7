//! The simulated project: MIGs, resize requests, instances and operations, and how they change in time.
//!
//! Everything here is synchronous and takes `now` as an argument: the server and the ticker (the edges)
//! read the clock, lock the one [`State`], call a method, and carry out the returned [`Effect`]s (boot
//! and stop commands) after unlocking. Mutations apply at once and return an [`Operation`] that reports
//! RUNNING for [`OP_LATENCY_MS`] and then DONE; resize requests and VMs advance in [`State::tick`].
//!
//! One file per kind of resource: `mig`, `resize_request`, `instance`, `machine_type`, `advice`,
//! `reservation`, `future_reservation` (and `consume`: how VMs use reservations), plus
//! `operation` and the control API's `rules` (capacity, HTTP faults, operation faults, rate quotas);
//! this file holds the world ([`State`]), idempotency (`requestId`) and the clock step.
//!
//! What the simulator models, and where GCE's documentation was silent, what it assumes, is listed in
//! the crate's documentation (`lib.rs`).

mod advice;
mod consume;
mod create;
mod faulty_host;
mod future_reservation;
mod instance;
mod machine_type;
mod mig;
mod operation;
mod placement;
mod reservation;
mod resize_request;
mod rules;
#[cfg(test)]
mod tests;

pub use advice::{AdviceScore, DEFAULT_SCORE, STOCKOUT_SCORE};
pub use consume::{target_of, Target};
pub use future_reservation::{FutureReservation, FutureSpec};
pub use instance::{Instance, VmStatus};
pub use machine_type::machine_type_json;
pub use mig::Mig;
pub use operation::Operation;
pub use placement::{topology_json, Distance, Policy, PolicyKey, Slot, ZoneShape, POLICY_FAMILIES};
pub use reservation::{
    BlockSpec, Consumed, ResKey, Reservation, ReservationPatch, ReservationSpec, SubBlockSpec,
};
use resize_request::render_request;
pub use resize_request::{ResizeRequest, RrState};
pub use rules::{
    capacity_error, CapacityFailure, CapacityRule, FaultRule, OpFaultRule, QuotaConfig, QuotaGroup, Quotas,
};

use super::error::{status_error, ApiError};
use chrono::{DateTime, Duration, SecondsFormat, Utc};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Links in resources point at the real API, as GCE's do, whatever endpoint the client used.
pub const GCE_BASE: &str = "https://www.googleapis.com/compute/v1/";
/// How long an Operation stays RUNNING (and a resize request CREATING) unless the control API changes it.
pub const OP_LATENCY_MS: i64 = 100;
/// How long a new VM shows PROVISIONING, then STAGING, before RUNNING (control API: `/_sim/lifecycle`).
pub const PROVISIONING_MS: i64 = 50;
pub const STAGING_MS: i64 = 50;
/// How long a VM whose host was reported faulty shows REPAIRING (control API: `/_sim/lifecycle`).
pub const HOST_REPAIR_MS: i64 = 1000;
/// How long a VM removed with `deleteInstances` shows STOPPING / DELETING before it is gone; also how
/// long a MIG that repairs failed VMs waits before recreating one.
pub const DELETE_MS: i64 = 100;
/// `requestedRunDuration.seconds` bounds (10 minutes .. 7 days).
pub const MIN_RUN_SECONDS: i64 = 600;
pub const MAX_RUN_SECONDS: i64 = 604_800;
/// At most this many instances per resize request and per `deleteInstances` call.
pub const MAX_PER_CALL: usize = 1000;
/// How long a `requestId` is remembered (control API: `/_sim/request-ids`). Compute's own reference
/// gives no figure; Google's other Cloud APIs document the same `requestId` text with "the server will
/// guarantee that for at least 60 minutes since the first request", which the simulator takes.
pub const REQUEST_ID_RETENTION_SECONDS: i64 = 3600;

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
                obj.insert("zone".into(), json!(format!("{GCE_BASE}projects/{project}/zones/{z}")));
            }
            Scope::Region(r) => {
                obj.insert("region".into(), json!(format!("{GCE_BASE}projects/{project}/regions/{r}")));
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
        format!("projects/{}/{}/instanceGroupManagers/{}", self.project, self.scope.path(), self.name)
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
    /// A VM that had booted was deleted or went down (TERMINATED): run the stop command.
    Stop(String),
}

/// (project, zone, VM name).
pub type InstanceKey = (String, String, String);

/// How a zone marked unreachable shows in `instances.aggregatedList` (control API).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Unreachable {
    /// The zone's scope carries `warning.code = UNREACHABLE`, no instances, and is listed in
    /// `unreachables` (a partial success).
    Partial,
    /// The whole aggregated list fails with 503.
    Error,
}

/// How long new VMs stay PROVISIONING and STAGING (control API: `/_sim/lifecycle`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lifecycle {
    pub provisioning_ms: i64,
    pub staging_ms: i64,
    /// How long a VM whose host was reported faulty shows REPAIRING before it starts again on
    /// another host (`faulty_host.rs`).
    #[serde(default = "default_host_repair_ms")]
    pub host_repair_ms: i64,
}

fn default_host_repair_ms() -> i64 {
    HOST_REPAIR_MS
}

impl Default for Lifecycle {
    fn default() -> Self {
        Lifecycle { provisioning_ms: PROVISIONING_MS, staging_ms: STAGING_MS, host_repair_ms: HOST_REPAIR_MS }
    }
}

/// What a mutation is, for its Operation when a fault rule fails it before it acts.
pub struct Mutation<'a> {
    pub project: &'a str,
    pub scope: Scope,
    /// Discovery method id without `compute.`.
    pub method_id: &'a str,
    pub request_id: Option<&'a str>,
    pub op_type: &'static str,
    pub target_link: String,
}

/// The whole simulated world, behind one mutex.
pub struct State {
    time_scale: f64,
    migs: BTreeMap<MigKey, Mig>,
    instances: BTreeMap<InstanceKey, Instance>,
    operations: HashMap<String, Operation>,
    /// (project, requestId) → (operation name, when the request was first seen), for idempotent retries.
    request_ids: HashMap<(String, String), (String, DateTime<Utc>)>,
    /// How long a requestId is remembered (control API: `POST /_sim/request-ids`).
    pub request_id_retention_ms: i64,
    pub capacity: Vec<CapacityRule>,
    pub faults: Vec<FaultRule>,
    pub op_faults: Vec<OpFaultRule>,
    pub templates: BTreeMap<String, Value>,
    /// `instanceTemplates.get` of a template that was never loaded answers a FLEX_START template
    /// instead of 404 (control API: `POST /_sim/templates/defaults`).
    pub serve_default_templates: bool,
    /// API calls by method id (refused ones included).
    pub calls: BTreeMap<String, u64>,
    /// API calls by the caller's IP address, then by method id: which client made them (two
    /// daemons on two hosts tell apart by their addresses).
    pub calls_by_peer: BTreeMap<String, BTreeMap<String, u64>>,
    /// API calls refused by a rate quota (403 `rateLimitExceeded`), by method id.
    pub rate_limited: BTreeMap<String, u64>,
    pub quotas: Quotas,
    /// Zones marked unreachable (control API: `/_sim/zones/{zone}/unreachable`).
    pub unreachable: BTreeMap<String, Unreachable>,
    /// Regions marked unreachable (control API: `/_sim/regions/{region}/unreachable`): every
    /// regional call there answers 503.
    pub unreachable_regions: std::collections::BTreeSet<String>,
    pub lifecycle: Lifecycle,
    next_ip: u32,
    /// How long Operations stay RUNNING (control API: `POST /_sim/latency`).
    pub op_latency_ms: i64,
    last_prune: DateTime<Utc>,
    /// Workload policies (`resourcePolicies`).
    policies: BTreeMap<PolicyKey, Policy>,
    /// Each zone's hosts and which are taken (`placement.rs`).
    hosts: BTreeMap<String, placement::ZoneHosts>,
    /// Hosts set aside for VMs about to be created.
    reserved: BTreeMap<InstanceKey, Slot>,
    /// The earliest time any VM has something due (a lifecycle step, the end of a deletion or of its
    /// run duration): the ticker looks at the VMs only then, not 20 times a second.
    vm_wakeup: DateTime<Utc>,
    /// `advice.capacity` obtainability scores by (zone, machine type; `None`: all of the zone's)
    /// (control API: `POST /_sim/advice`).
    advice: BTreeMap<(String, Option<String>), f64>,
    /// Reservations (`reservation.rs`) and calendar-mode future reservations
    /// (`future_reservation.rs`), by (project, zone, name).
    reservations: BTreeMap<ResKey, Reservation>,
    future_reservations: BTreeMap<ResKey, FutureReservation>,
    /// Every VM's life (control API: `GET /_sim/lifetimes`), by instance id: kept after the VM is
    /// gone, so that a test can compare what it billed with what the daemon recorded.
    lifetimes: BTreeMap<u64, Lifetime>,
}

/// One VM's life in the simulator's clock: from its creation to its deletion.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Lifetime {
    pub name: String,
    /// GCE's `id`, as the API prints it (a decimal string).
    pub id: String,
    pub zone: String,
    pub created: String,
    /// `None` while it lives.
    pub deleted: Option<String>,
}

impl State {
    /// A VM was made: its life begins.
    pub(super) fn vm_made(&mut self, vm: &Instance) {
        let life = Lifetime {
            name: vm.name.clone(),
            id: vm.id.to_string(),
            zone: vm.zone.clone(),
            created: ts(vm.created),
            deleted: None,
        };
        self.lifetimes.insert(vm.id, life);
    }

    /// A VM is gone (deleted, by a caller or by GCE): its life ends `now`.
    pub(super) fn vm_gone(&mut self, id: u64, now: DateTime<Utc>) {
        if let Some(l) = self.lifetimes.get_mut(&id) {
            l.deleted.get_or_insert_with(|| ts(now));
        }
    }

    /// Every VM's life, made first first.
    pub fn lifetimes(&self) -> Vec<Lifetime> {
        let mut all: Vec<Lifetime> = self.lifetimes.values().cloned().collect();
        all.sort_by(|a, b| (&a.created, &a.name).cmp(&(&b.created, &b.name)));
        all
    }
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
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && *b.last().expect("non-empty") != b'-'
}

/// The last path segment of a URL or partial URL (`zones/us-central1-a` → `us-central1-a`).
fn last_segment(s: &str) -> &str {
    s.rsplit('/').next().unwrap_or(s)
}

/// A number that identifies the project, as GCE's `created-by` metadata uses project numbers.
pub fn project_number(project: &str) -> u64 {
    // FNV-1a: stable across runs, unlike the std hasher.
    let h =
        project.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3));
    100_000_000_000 + h % 900_000_000_000
}

/// The reason phrase GCE puts in `httpErrorMessage` beside `httpErrorStatusCode`.
pub fn http_reason(code: u16) -> &'static str {
    match code {
        400 => "BAD REQUEST",
        403 => "FORBIDDEN",
        404 => "NOT FOUND",
        409 => "CONFLICT",
        412 => "PRECONDITION FAILED",
        429 => "TOO MANY REQUESTS",
        500 => "INTERNAL SERVER ERROR",
        503 => "SERVICE UNAVAILABLE",
        _ => "ERROR",
    }
}

impl State {
    pub fn new(time_scale: f64) -> State {
        State {
            lifetimes: BTreeMap::new(),
            time_scale,
            migs: BTreeMap::new(),
            instances: BTreeMap::new(),
            operations: HashMap::new(),
            request_ids: HashMap::new(),
            request_id_retention_ms: REQUEST_ID_RETENTION_SECONDS * 1000,
            capacity: Vec::new(),
            faults: Vec::new(),
            op_faults: Vec::new(),
            templates: BTreeMap::new(),
            serve_default_templates: false,
            calls: BTreeMap::new(),
            calls_by_peer: BTreeMap::new(),
            rate_limited: BTreeMap::new(),
            quotas: Quotas::default(),
            unreachable: BTreeMap::new(),
            unreachable_regions: Default::default(),
            lifecycle: Lifecycle::default(),
            next_ip: 2,
            op_latency_ms: OP_LATENCY_MS,
            last_prune: DateTime::<Utc>::MIN_UTC,
            policies: BTreeMap::new(),
            hosts: BTreeMap::new(),
            reserved: BTreeMap::new(),
            vm_wakeup: DateTime::<Utc>::MAX_UTC,
            advice: BTreeMap::new(),
            reservations: BTreeMap::new(),
            future_reservations: BTreeMap::new(),
        }
    }

    /// Simulated durations pass this many times faster than real time.
    pub fn time_scale(&self) -> f64 {
        self.time_scale
    }

    // ----- operations and idempotency -------------------------------------------------------

    /// Runs a mutation once per `(project, requestId)`: a retry within the retention window returns
    /// the original Operation as it is now (a failed one stays failed), and never acts again.
    ///
    /// An operation-fault rule (`/_sim/operation-faults`) that fires makes the Operation end DONE
    /// with its error instead of acting; that failed Operation is what a retry with the same
    /// requestId gets back.
    pub fn mutate(
        &mut self,
        m: Mutation<'_>,
        now: DateTime<Utc>,
        act: impl FnOnce(&mut State) -> Result<String, ApiError>,
    ) -> Result<Value, ApiError> {
        let key = m.request_id.map(|rid| (m.project.to_string(), rid.to_string()));
        if let (Some(rid), Some(key)) = (m.request_id, &key) {
            check_request_id(rid)?;
            if let Some((op, first)) = self.request_ids.get(key) {
                if now < later(*first, self.request_id_retention_ms) {
                    if let Some(op) = self.operations.get(op) {
                        return Ok(op.to_json(now));
                    }
                }
                self.request_ids.remove(key);
            }
        }
        let op = match rules::pick_op_fault(&mut self.op_faults, m.method_id) {
            Some(rule) => {
                let done = now + ms(self.op_latency_ms);
                let op = self.new_op(m.project, m.scope, m.op_type, m.target_link, 0, now, Some(done));
                let o = self.operations.get_mut(&op).expect("just inserted");
                o.error = Some(rule.error());
                o.http_error = Some(rule.http_status());
                op
            }
            None => act(self)?,
        };
        if let Some(key) = key {
            self.request_ids.insert(key, (op.clone(), now));
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
        let name = format!("operation-{}-{}", now.timestamp_millis(), uuid::Uuid::new_v4().simple());
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

    /// An Operation that ends DONE with these errors (`[(code, message)]`) and HTTP status.
    #[allow(clippy::too_many_arguments)]
    fn failed_op(
        &mut self,
        project: &str,
        scope: Scope,
        op_type: &str,
        target_link: String,
        target_id: u64,
        now: DateTime<Utc>,
        errors: &[(&str, String)],
        http: u16,
    ) -> String {
        let done = now + ms(self.op_latency_ms);
        let op = self.new_op(project, scope, op_type, target_link, target_id, now, Some(done));
        let o = self.operations.get_mut(&op).expect("just inserted");
        o.error = Some(
            json!({"errors": errors.iter().map(|(c, m)| json!({"code": c, "message": m})).collect::<Vec<_>>()}),
        );
        o.http_error = Some((http, http_reason(http)));
        op
    }

    pub fn operation(&self, project: &str, scope: &Scope, name: &str) -> Result<&Operation, ApiError> {
        self.operations.get(name).filter(|o| o.project == project && &o.scope == scope).ok_or_else(|| {
            ApiError::not_found(&format!("projects/{project}/{}/operations/{name}", scope.path()))
        })
    }

    /// Something about a VM is due at `t`: make sure the ticker looks then.
    pub(super) fn wake(&mut self, t: DateTime<Utc>) {
        self.vm_wakeup = self.vm_wakeup.min(t);
    }

    /// The unreachable zone a call into `scope` (or a regional MIG's zone) would touch, if any.
    pub fn unreachable_zone(&self, zone: &str) -> bool {
        self.unreachable.contains_key(zone)
    }

    // ----- time ------------------------------------------------------------------------------

    /// Advances everything to `now`: requests through their states, VMs through their lifecycle,
    /// deletions, expiries, MIG deletes.
    pub fn tick(&mut self, now: DateTime<Utc>) -> Vec<Effect> {
        let mut effects = Vec::new();
        if !self.future_reservations.is_empty() || !self.reservations.is_empty() {
            self.advance_windows(now, &mut effects);
            self.expire_reservations(now, &mut effects);
        }
        self.advance_requests(now);
        self.advance_creations(now);
        if now >= self.vm_wakeup {
            self.advance_vms(now, &mut effects);
            let gone: Vec<InstanceKey> = self
                .instances
                .iter()
                .filter(|(_, vm)| vm.deleting_at.is_some_and(|t| now >= t) || now >= vm.termination)
                .map(|(k, _)| k.clone())
                .collect();
            for k in gone {
                effects.extend(self.end_of_vm(&k, now));
            }
            self.vm_wakeup = self
                .instances
                .values()
                .flat_map(|vm| [vm.next_at, vm.deleting_at, Some(vm.termination)])
                .flatten()
                .min()
                .unwrap_or(DateTime::<Utc>::MAX_UTC);
        }
        self.finish_provisioning(now);
        effects.extend(self.finish_mig_deletes(now));
        if now >= later(self.last_prune, 1000) {
            self.last_prune = now;
            let keep = self.request_id_retention_ms;
            self.request_ids.retain(|_, (_, first)| now < later(*first, keep));
        }
        effects
    }

    /// Completes MIG deletes that no longer wait for a provisioning request.
    fn finish_mig_deletes(&mut self, now: DateTime<Utc>) -> Vec<Effect> {
        let ready: Vec<MigKey> = self
            .migs
            .values()
            .filter(|m| !m.deleting.is_empty() && m.requests.values().all(|r| !r.provisioning))
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
            for name in &mig.vms {
                let k = (key.project.clone(), mig.zone.clone(), name.clone());
                if let Some(vm) = self.instances.remove(&k) {
                    self.vm_gone(vm.id, now);
                    self.free_slot(&vm.zone, vm.host);
                    if vm.booted {
                        effects.push(Effect::Stop(vm.name));
                    }
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
                v["resizeRequests"] =
                    json!(m.requests.values().map(|r| render_request(&m.key, r)).collect::<Vec<_>>());
                v["managedInstances"] =
                    json!(self.managed_instances(&m.key).map(|(items, _)| items).unwrap_or_default());
                v
            })
            .collect();
        let instances: Vec<Value> = self.instances.values().map(|vm| self.render_instance(vm)).collect();
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
            "operation_faults": self.op_faults,
            "templates": self.templates.keys().collect::<Vec<_>>(),
            "serve_default_templates": self.serve_default_templates,
            "unreachable": self.unreachable,
            "unreachable_regions": self.unreachable_regions,
            "lifecycle": self.lifecycle,
            "quotas": self.quotas.config,
            "request_id_retention_seconds": self.request_id_retention_ms as f64 / 1000.0,
            "calls": self.calls,
            "rate_limited": self.rate_limited,
            "advice": self.advice_json(),
            "reservations": self.reservations_dump(),
            "future_reservations": self.future_reservations_dump(),
        })
    }
}

fn ms(n: i64) -> Duration {
    Duration::milliseconds(n)
}

/// `t` plus `n` milliseconds, saturating: a huge delay or a tiny time scale means "never", not a panic.
pub fn later(t: DateTime<Utc>, n: i64) -> DateTime<Utc> {
    Duration::try_milliseconds(n).and_then(|d| t.checked_add_signed(d)).unwrap_or(DateTime::<Utc>::MAX_UTC)
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
