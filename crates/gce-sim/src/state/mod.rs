//! The simulated project: MIGs, resize requests, instances and operations, and how they change in time.
//!
//! Everything here is synchronous and takes `now` as an argument: the server and the ticker (the edges)
//! read the clock, lock the one [`State`], call a method, and carry out the returned [`Effect`]s (boot
//! and stop commands) after unlocking. Mutations apply at once and return an [`Operation`] that reports
//! RUNNING for [`OP_LATENCY_MS`] and then DONE; resize requests advance in [`State::tick`].
//!
//! One file per kind of resource: `mig`, `resize_request`, `instance`, plus `operation` and
//! the control API's `rules`; this file holds the world ([`State`]), idempotency and the clock step.

mod instance;
mod mig;
mod operation;
mod resize_request;
mod rules;
#[cfg(test)]
mod tests;

pub use instance::Instance;
pub use mig::Mig;
pub use operation::Operation;
use resize_request::{advance_request, render_request};
pub use resize_request::{ResizeRequest, RrState};
pub use rules::{capacity_error, CapacityFailure, CapacityRule, FaultRule};

use super::error::{status_error, ApiError};
use chrono::{DateTime, Duration, SecondsFormat, Utc};
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
    /// A VM was deleted: run the stop command.
    Stop(String),
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
            if let Some(op) = self.request_ids.get(&(project.to_string(), rid.to_string())) {
                if let Some(op) = self.operations.get(op) {
                    return Ok(op.to_json(now));
                }
            }
        }
        let op = act(self)?;
        if let Some(rid) = request_id {
            self.request_ids.insert((project.to_string(), rid.to_string()), op.clone());
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

    pub fn operation(&self, project: &str, scope: &Scope, name: &str) -> Result<&Operation, ApiError> {
        self.operations.get(name).filter(|o| o.project == project && &o.scope == scope).ok_or_else(|| {
            ApiError::not_found(&format!("projects/{project}/{}/operations/{name}", scope.path()))
        })
    }

    // ----- time ------------------------------------------------------------------------------

    /// Advances everything to `now`: requests through their states, deletions, expiries, MIG deletes.
    pub fn tick(&mut self, now: DateTime<Utc>) -> Vec<Effect> {
        let mut effects = Vec::new();
        let mut created = Vec::new();
        let State { migs, capacity, .. } = self;
        for mig in migs.values_mut() {
            let rule = capacity.iter().rev().find(|r| mig.key.name.starts_with(&r.prefix)).cloned();
            for rr in mig.requests.values_mut() {
                if let Some(vms) = advance_request(rr, rule.as_ref(), &mut mig.target_size, now) {
                    created.extend(vms.into_iter().map(|n| {
                        (mig.key.clone(), mig.zone.clone(), mig.template.clone(), n, rr.run_seconds)
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
                termination: later(now, real_ms),
                network_ip: format!("10.{}.{}.{}", (n >> 16) & 255, (n >> 8) & 255, n & 255),
                deleting_at: None,
            };
            self.instances.insert((vm.project.clone(), zone, name.clone()), vm);
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
            .filter(|m| !m.deleting.is_empty() && m.requests.values().all(|r| r.provisioning_until.is_none()))
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
            let vms: Vec<InstanceKey> =
                self.instances.iter().filter(|(_, vm)| vm.mig == key).map(|(k, _)| k.clone()).collect();
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
        let counts = self.vm_counts(None);
        let migs: Vec<Value> = self
            .migs
            .values()
            .map(|m| {
                let mut v = self.render_mig(m, counts.get(&m.key).copied().unwrap_or_default(), now);
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
            "templates": self.templates.keys().collect::<Vec<_>>(),
            "calls": self.calls,
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
