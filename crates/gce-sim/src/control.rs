//! The control API under `/_sim/`: what tests use to inspect the simulator and to script GCE's behaviour.
//!
//! All bodies and answers are JSON; a bad body is a 400 `{"error": "..."}`, an unknown name a 404.
//!
//! | call | body | effect |
//! |---|---|---|
//! | `GET /_sim/state` | | everything: `migs` (each with `resizeRequests` and `managedInstances`), `instances`, `operations`, `capacity`, `faults`, `operation_faults`, `templates`, `serve_default_templates`, `unreachable`, `lifecycle`, `quotas`, `request_id_retention_seconds`, `calls`, `rate_limited`, `advice` (`[{zone, machine_type?, obtainability}]`), `time`, `time_scale` |
//! | `GET /_sim/lifetimes` | | `{"time", "vms": [{"name", "id", "zone", "created", "deleted"}]}`: every VM the simulator made, gone ones included, with its creation and deletion time (`null` while it lives) in the simulator's clock, oldest first: what GCE would bill |
//! | `GET /_sim/calls` | | `{"total": N, "by_method": {"regionInstanceGroupManagers.insert": 3, ...}, "by_peer": {"10.0.0.2": {METHOD: N}}, "rate_limited": {"total": N, "by_method": {...}}}`: GCE API calls (faulted and rate-limited ones included) by discovery method id, and those refused by a rate quota |
//! | `POST /_sim/calls/reset` | | zero the counts |
//! | `POST /_sim/capacity` | `{"match": "hpc-a3u-", "delay_seconds": 5.0, "fail": {"code", "message", "errorDetails"?} \| null, "hold": false}` | a rule for MIGs whose name starts with `match` ("" = all; the latest matching rule wins, and applies to requests already queued); no rule = capacity at once |
//! | `DELETE /_sim/capacity` | | clear the rules (held requests then get capacity) |
//! | `POST /_sim/faults` | `{"method": "regionInstanceGroupManagers.insert" \| "*", "status": 503, "reason"?, "probability": 1.0, "count"?, "delay_ms"?, "after"?, "path_contains"?}` | HTTP fault injection; status 200 with `delay_ms` = slowness only (a call that hangs that long, then acts and answers); `path_contains` limits the rule to calls whose URL path contains it (one MIG's calls); `after: true` carries the call out, then answers the error (a lost response) |
//! | `DELETE /_sim/faults` | | clear the fault rules |
//! | `POST /_sim/operation-faults` | `{"method": "regionInstanceGroupManagers.deleteInstances" \| "*", "code": "RESOURCE_NOT_READY", "message"?, "http_status"?, "errorDetails"?, "probability"?: 1.0, "count"?}` | the next matching mutations do not act: each returns an Operation that ends DONE with `error.errors[0] = {code, message}` and `httpErrorStatusCode`; a retry with the same `requestId` gets that failed Operation back |
//! | `DELETE /_sim/operation-faults` | | clear them |
//! | `GET`/`POST /_sim/request-ids` | `{"retention_seconds": 3600}` | how long a `requestId` is remembered (default 3600 s); after that the same requestId acts again |
//! | `POST /_sim/zones/{zone}/unreachable` | `{"aggregated": "partial" \| "error"}` (optional, default partial) | the zone is unreachable: zonal calls into it answer 503, `listManagedInstances` and `deleteInstances` of a regional MIG whose VMs are there answer 503, and `instances.aggregatedList` shows its scope as `{"warning": {"code": "UNREACHABLE", ...}}` and lists it in `unreachables` (partial) or fails with 503 (error) |
//! | `DELETE /_sim/zones/{zone}/unreachable` | | reachable again |
//! | `POST /_sim/regions/{region}/unreachable` | | every regional call into the region (MIGs, resize requests, operations, regional templates) answers 503 `backendError`; other regions and the aggregated VM list are untouched |
//! | `DELETE /_sim/regions/{region}/unreachable` | | reachable again |
//! | `POST /_sim/instances/{name}/expire` | | GCE deletes the VM now, as at the end of its run duration |
//! | `POST /_sim/instances/{name}/preempt` | | GCE preempts the SPOT VM: the stop command runs; with `instanceTerminationAction: DELETE` it is deleted and leaves its MIG, with STOP it stays TERMINATED (409 if the VM is not SPOT) |
//! | `POST /_sim/instances/{name}/fail` | | the VM's host fails: it goes TERMINATED (stop command runs); a MIG with `defaultActionOnFailure: DO_NOTHING` leaves it so, any other recreates it |
//! | `POST /_sim/instances/{name}/maintenance` | an `UpcomingMaintenance` (`{"type": "SCHEDULED", "windowStartTime", "windowEndTime"?, "latestWindowStartTime"?, "canReschedule"?, "maintenanceStatus"?: "PENDING", "maintenanceReasons"?: ["FAILURE_GPU_XID"]}`, checked against the discovery document) | GCE plans maintenance of the VM: `resourceStatus.upcomingMaintenance` is this object (posting again moves the window) |
//! | `DELETE /_sim/instances/{name}/maintenance` | | the maintenance is over or cancelled: the VM has no `upcomingMaintenance` |
//! | `GET`/`POST /_sim/lifecycle` | `{"provisioning_ms": 50, "staging_ms": 50, "host_repair_ms": 1000}` | how long new VMs stay PROVISIONING and STAGING before RUNNING (the boot command runs at RUNNING), and how long a VM whose host was reported faulty stays REPAIRING (`host_repair_ms` optional) |
//! | `POST /_sim/templates` | an InstanceTemplate (`name` required) | `instanceTemplates.get` / `regionInstanceTemplates.get` of that name (any project, scope) returns it; MIGs using it give their VMs its `machineType`, `labels` and `scheduling` |
//! | `POST /_sim/templates/defaults` | `{"serve": true}` | `instanceTemplates.get` of a template never loaded returns a FLEX_START template instead of 404 (MIGs always treat an unloaded template as one) |
//! | `GET`/`POST /_sim/quotas` | `{"read_per_minute": N \| null, "write_per_minute": N \| null, "window_seconds"?: 60}` | rate quotas per project (default unlimited): over one, a call answers 403 `rateLimitExceeded`; `GET` shows `{"config", "usage"}`; `DELETE` makes them unlimited |
//! | `POST /_sim/migs/{name}/busy` | `{"seconds": N}` | deletes of that MIG fail (400 `resourceNotReady`, "active transformation") for N seconds |
//! | `POST /_sim/latency` | `{"operation_ms": N}` | slow operations: new Operations stay RUNNING N ms (default 100) |
//! | `POST /_sim/advice` | `{"zone": "us-central1-a", "machine_type"?: "a3-ultragpu-8g", "obtainability": 0.8}` | the zone's `advice.capacity` obtainability score (0..1) for that machine type, or without `machine_type` for all of them (a machine type's own score wins); unset: 0.5; a zone in a stockout (unreachable, hosts all taken, or a resize request there waiting with `*RESOURCE_POOL_EXHAUSTED*`) scores at most 0.05 |
//! | `DELETE /_sim/advice` | | clear the scores (every zone 0.5 again) |
//! | `/_sim/reservations...`, `/_sim/future-reservations...` | | reserved capacity: see `control_reservations.rs` |

use super::error::ApiError;
use super::state::{AdviceScore, CapacityRule, FaultRule, Lifecycle, OpFaultRule, QuotaConfig, Unreachable};
use super::Shared;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use chrono::Utc;
use rand::Rng;
use serde::de::DeserializeOwned;
use serde_json::{json, Value};
use std::sync::Arc;

pub fn routes() -> Router<Arc<Shared>> {
    Router::new()
        .route("/_sim/state", get(state))
        .route("/_sim/lifetimes", get(lifetimes))
        .route("/_sim/calls", get(calls))
        .route("/_sim/calls/reset", post(reset_calls))
        .route("/_sim/capacity", post(add_capacity).delete(clear_capacity))
        .route("/_sim/faults", post(add_fault).delete(clear_faults))
        .route("/_sim/operation-faults", post(add_op_fault).delete(clear_op_faults))
        .route("/_sim/request-ids", get(request_ids).post(set_request_ids))
        .route("/_sim/zones/{zone}/unreachable", post(set_unreachable).delete(clear_unreachable))
        .route("/_sim/zones/{zone}/topology", post(set_topology))
        .route(
            "/_sim/regions/{region}/unreachable",
            post(set_region_unreachable).delete(clear_region_unreachable),
        )
        .route("/_sim/instances/{name}/expire", post(expire))
        .route("/_sim/instances/{name}/fail", post(fail))
        .route("/_sim/instances/{name}/preempt", post(preempt))
        .route("/_sim/instances/{name}/maintenance", post(set_maintenance).delete(clear_maintenance))
        .route("/_sim/lifecycle", get(lifecycle).post(set_lifecycle))
        .route("/_sim/templates", post(load_template))
        .route("/_sim/templates/defaults", post(template_defaults))
        .route("/_sim/quotas", get(quotas).post(set_quotas).delete(clear_quotas))
        .route("/_sim/migs/{name}/busy", post(busy))
        .route("/_sim/latency", post(latency))
        .route("/_sim/advice", post(set_advice).delete(clear_advice))
        .merge(super::control_reservations::routes())
}

/// A control-API error: `{"error": "..."}` with a 4xx status.
fn bad(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(json!({"error": message.into()}))).into_response()
}

fn parse<T: DeserializeOwned>(body: &Bytes) -> Result<T, String> {
    serde_json::from_slice(body).map_err(|e| format!("invalid body: {e}"))
}

async fn state(State(sim): State<Arc<Shared>>) -> Json<Value> {
    Json(sim.lock().dump(Utc::now()))
}

async fn lifetimes(State(sim): State<Arc<Shared>>) -> Json<Value> {
    let now = Utc::now();
    Json(json!({"time": crate::state::ts(now), "vms": sim.lock().lifetimes()}))
}

async fn calls(State(sim): State<Arc<Shared>>) -> Json<Value> {
    let st = sim.lock();
    Json(json!({"total": st.calls.values().sum::<u64>(), "by_method": st.calls, "by_peer": st.calls_by_peer,
                "rate_limited": {"total": st.rate_limited.values().sum::<u64>(), "by_method": st.rate_limited}}))
}

async fn reset_calls(State(sim): State<Arc<Shared>>) -> Json<Value> {
    let mut st = sim.lock();
    st.calls.clear();
    st.calls_by_peer.clear();
    st.rate_limited.clear();
    Json(json!({}))
}

async fn add_capacity(State(sim): State<Arc<Shared>>, body: Bytes) -> Response {
    let rule: CapacityRule = match parse(&body) {
        Ok(r) => r,
        Err(e) => return bad(StatusCode::BAD_REQUEST, e),
    };
    if !rule.delay_seconds.is_finite() || rule.delay_seconds < 0.0 {
        return bad(StatusCode::BAD_REQUEST, "delay_seconds must be a finite number >= 0");
    }
    if let Some(f) = &rule.fail {
        // What the rule will put in a resize request's status must fit GCE's schema.
        let status = json!({"error": super::state::capacity_error(f)});
        let fits = super::schema::validate_value(
            "InstanceGroupManagerResizeRequestStatus",
            &status,
            super::schema::Direction::Response,
        );
        if let Err(errs) = fits {
            return bad(StatusCode::BAD_REQUEST, errs.join("; "));
        }
    }
    sim.lock().capacity.push(rule);
    Json(json!({})).into_response()
}

async fn clear_capacity(State(sim): State<Arc<Shared>>) -> Json<Value> {
    sim.lock().capacity.clear();
    Json(json!({}))
}

async fn add_fault(State(sim): State<Arc<Shared>>, body: Bytes) -> Response {
    let rule: FaultRule = match parse(&body) {
        Ok(r) => r,
        Err(e) => return bad(StatusCode::BAD_REQUEST, e),
    };
    if rule.method != "*" && super::schema::method(&rule.method).is_none() {
        return bad(StatusCode::BAD_REQUEST, format!("unknown method id {:?}", rule.method));
    }
    if !(200..=599).contains(&rule.status) || !(0.0..=1.0).contains(&rule.probability) {
        return bad(StatusCode::BAD_REQUEST, "status must be 200..599 and probability 0..1");
    }
    sim.lock().faults.push(rule);
    Json(json!({})).into_response()
}

async fn clear_faults(State(sim): State<Arc<Shared>>) -> Json<Value> {
    sim.lock().faults.clear();
    Json(json!({}))
}

async fn expire(State(sim): State<Arc<Shared>>, Path(name): Path<String>) -> Response {
    let Some(effects) = sim.lock().expire(&name, Utc::now()) else {
        return bad(StatusCode::NOT_FOUND, format!("no instance named {name}"));
    };
    sim.run_effects(effects);
    Json(json!({})).into_response()
}

async fn fail(State(sim): State<Arc<Shared>>, Path(name): Path<String>) -> Response {
    let Some(effects) = sim.lock().fail(&name, Utc::now()) else {
        return bad(StatusCode::NOT_FOUND, format!("no instance named {name}"));
    };
    sim.run_effects(effects);
    Json(json!({})).into_response()
}

async fn preempt(State(sim): State<Arc<Shared>>, Path(name): Path<String>) -> Response {
    let effects = match sim.lock().preempt(&name, Utc::now()) {
        None => return bad(StatusCode::NOT_FOUND, format!("no instance named {name}")),
        Some(Err(why)) => return bad(StatusCode::CONFLICT, why),
        Some(Ok(effects)) => effects,
    };
    sim.run_effects(effects);
    Json(json!({})).into_response()
}

/// The body: an `UpcomingMaintenance` as GCE shows it, held to the discovery document's schema.
async fn set_maintenance(State(sim): State<Arc<Shared>>, Path(name): Path<String>, body: Bytes) -> Response {
    let m: Value = match parse(&body) {
        Ok(m) => m,
        Err(e) => return bad(StatusCode::BAD_REQUEST, e),
    };
    if !m.is_object() {
        return bad(StatusCode::BAD_REQUEST, "an UpcomingMaintenance object is expected");
    }
    if let Err(errors) =
        crate::schema::validate_value("UpcomingMaintenance", &m, crate::schema::Direction::Response)
    {
        return bad(StatusCode::BAD_REQUEST, errors.join("; "));
    }
    for field in ["windowStartTime", "windowEndTime", "latestWindowStartTime"] {
        if let Some(t) = m.get(field).and_then(Value::as_str) {
            if chrono::DateTime::parse_from_rfc3339(t).is_err() {
                return bad(StatusCode::BAD_REQUEST, format!("{field} {t:?} is not an RFC 3339 time"));
            }
        }
    }
    if !sim.lock().set_upcoming_maintenance(&name, Some(m)) {
        return bad(StatusCode::NOT_FOUND, format!("no instance named {name}"));
    }
    Json(json!({})).into_response()
}

async fn clear_maintenance(State(sim): State<Arc<Shared>>, Path(name): Path<String>) -> Response {
    if !sim.lock().set_upcoming_maintenance(&name, None) {
        return bad(StatusCode::NOT_FOUND, format!("no instance named {name}"));
    }
    Json(json!({})).into_response()
}

async fn add_op_fault(State(sim): State<Arc<Shared>>, body: Bytes) -> Response {
    let rule: OpFaultRule = match parse(&body) {
        Ok(r) => r,
        Err(e) => return bad(StatusCode::BAD_REQUEST, e),
    };
    let mutation = |m: &str| {
        let id = m.strip_prefix("compute.").unwrap_or(m);
        super::schema::method(id).is_some()
            && super::state::QuotaGroup::of(id) == super::state::QuotaGroup::Write
    };
    if rule.method != "*" && !mutation(&rule.method) {
        return bad(
            StatusCode::BAD_REQUEST,
            format!("{:?} is not the method id of a simulated mutation", rule.method),
        );
    }
    if rule.code.is_empty() || !(0.0..=1.0).contains(&rule.probability) {
        return bad(StatusCode::BAD_REQUEST, "code must be set and probability be 0..1");
    }
    if rule.http_status.is_some_and(|s| !(400..=599).contains(&s)) {
        return bad(StatusCode::BAD_REQUEST, "http_status must be 400..599");
    }
    let fits = super::schema::validate_value(
        "Operation",
        &json!({"error": rule.error()}),
        super::schema::Direction::Response,
    );
    if let Err(errs) = fits {
        return bad(StatusCode::BAD_REQUEST, errs.join("; "));
    }
    sim.lock().op_faults.push(rule);
    Json(json!({})).into_response()
}

async fn clear_op_faults(State(sim): State<Arc<Shared>>) -> Json<Value> {
    sim.lock().op_faults.clear();
    Json(json!({}))
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct RequestIds {
    retention_seconds: f64,
}

async fn request_ids(State(sim): State<Arc<Shared>>) -> Json<Value> {
    Json(json!({"retention_seconds": sim.lock().request_id_retention_ms as f64 / 1000.0}))
}

async fn set_request_ids(State(sim): State<Arc<Shared>>, body: Bytes) -> Response {
    let r: RequestIds = match parse(&body) {
        Ok(r) => r,
        Err(e) => return bad(StatusCode::BAD_REQUEST, e),
    };
    if !(r.retention_seconds.is_finite() && r.retention_seconds >= 0.0) {
        return bad(StatusCode::BAD_REQUEST, "retention_seconds must be a finite number >= 0");
    }
    sim.lock().request_id_retention_ms = (r.retention_seconds * 1000.0).min(1e15) as i64;
    Json(json!({})).into_response()
}

#[derive(serde::Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct UnreachableBody {
    #[serde(default)]
    aggregated: Option<Unreachable>,
}

async fn set_unreachable(State(sim): State<Arc<Shared>>, Path(zone): Path<String>, body: Bytes) -> Response {
    let b: UnreachableBody = if body.iter().all(u8::is_ascii_whitespace) {
        UnreachableBody::default()
    } else {
        match parse(&body) {
            Ok(b) => b,
            Err(e) => return bad(StatusCode::BAD_REQUEST, e),
        }
    };
    sim.lock().unreachable.insert(zone, b.aggregated.unwrap_or(Unreachable::Partial));
    Json(json!({})).into_response()
}

async fn clear_unreachable(State(sim): State<Arc<Shared>>, Path(zone): Path<String>) -> Json<Value> {
    sim.lock().unreachable.remove(&zone);
    Json(json!({}))
}

/// `{"blocks": B, "subblocks_per_block": S, "hosts_per_subblock": H}`: the zone's hosts, one VM each.
async fn set_topology(State(sim): State<Arc<Shared>>, Path(zone): Path<String>, body: Bytes) -> Response {
    let shape: crate::state::ZoneShape = match parse(&body) {
        Ok(s) => s,
        Err(e) => return bad(StatusCode::BAD_REQUEST, e),
    };
    sim.lock().set_zone_shape(&zone, shape);
    Json(json!({})).into_response()
}

async fn set_region_unreachable(State(sim): State<Arc<Shared>>, Path(region): Path<String>) -> Json<Value> {
    sim.lock().unreachable_regions.insert(region);
    Json(json!({}))
}

async fn clear_region_unreachable(State(sim): State<Arc<Shared>>, Path(region): Path<String>) -> Json<Value> {
    sim.lock().unreachable_regions.remove(&region);
    Json(json!({}))
}

async fn lifecycle(State(sim): State<Arc<Shared>>) -> Json<Value> {
    Json(json!(sim.lock().lifecycle))
}

async fn set_lifecycle(State(sim): State<Arc<Shared>>, body: Bytes) -> Response {
    let l: Lifecycle = match parse(&body) {
        Ok(l) => l,
        Err(e) => return bad(StatusCode::BAD_REQUEST, e),
    };
    if ![l.provisioning_ms, l.staging_ms, l.host_repair_ms].iter().all(|v| (0..=3_600_000).contains(v)) {
        return bad(
            StatusCode::BAD_REQUEST,
            "provisioning_ms, staging_ms and host_repair_ms must be 0..3600000",
        );
    }
    sim.lock().lifecycle = l;
    Json(json!({})).into_response()
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct TemplateDefaults {
    serve: bool,
}

async fn template_defaults(State(sim): State<Arc<Shared>>, body: Bytes) -> Response {
    let d: TemplateDefaults = match parse(&body) {
        Ok(d) => d,
        Err(e) => return bad(StatusCode::BAD_REQUEST, e),
    };
    sim.lock().serve_default_templates = d.serve;
    Json(json!({})).into_response()
}

async fn quotas(State(sim): State<Arc<Shared>>) -> Json<Value> {
    Json(sim.lock().quotas.to_json(Utc::now()))
}

async fn set_quotas(State(sim): State<Arc<Shared>>, body: Bytes) -> Response {
    let c: QuotaConfig = match parse(&body) {
        Ok(c) => c,
        Err(e) => return bad(StatusCode::BAD_REQUEST, e),
    };
    if !(c.window_seconds.is_finite() && c.window_seconds > 0.0 && c.window_seconds <= 86_400.0) {
        return bad(StatusCode::BAD_REQUEST, "window_seconds must be in (0, 86400]");
    }
    sim.lock().quotas.set(c);
    Json(json!({})).into_response()
}

async fn clear_quotas(State(sim): State<Arc<Shared>>) -> Json<Value> {
    sim.lock().quotas.set(QuotaConfig::default());
    Json(json!({}))
}

async fn load_template(State(sim): State<Arc<Shared>>, body: Bytes) -> Response {
    let template: Value = match parse(&body) {
        Ok(t) => t,
        Err(e) => return bad(StatusCode::BAD_REQUEST, e),
    };
    if let Err(errs) =
        super::schema::validate_value("InstanceTemplate", &template, super::schema::Direction::Request)
    {
        return bad(StatusCode::BAD_REQUEST, errs.join("; "));
    }
    let Some(name) = template.get("name").and_then(Value::as_str) else {
        return bad(StatusCode::BAD_REQUEST, "a template needs a name");
    };
    sim.lock().templates.insert(name.to_string(), template.clone());
    Json(json!({})).into_response()
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Busy {
    seconds: f64,
}

async fn busy(State(sim): State<Arc<Shared>>, Path(name): Path<String>, body: Bytes) -> Response {
    let b: Busy = match parse(&body) {
        Ok(b) => b,
        Err(e) => return bad(StatusCode::BAD_REQUEST, e),
    };
    let until = super::state::later(Utc::now(), (b.seconds.max(0.0) * 1000.0) as i64);
    if !sim.lock().set_busy(&name, until) {
        return bad(StatusCode::NOT_FOUND, format!("no MIG named {name}"));
    }
    Json(json!({})).into_response()
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Latency {
    operation_ms: u64,
}

/// Slow operations: every Operation created from now on stays RUNNING this long (default 100 ms),
/// and a resize request stays CREATING as long.
async fn latency(State(sim): State<Arc<Shared>>, body: Bytes) -> Response {
    let l: Latency = match parse(&body) {
        Ok(l) => l,
        Err(e) => return bad(StatusCode::BAD_REQUEST, e),
    };
    sim.lock().op_latency_ms = l.operation_ms.min(3_600_000) as i64;
    Json(json!({})).into_response()
}

/// `advice.capacity` scores: one zone's, for one machine type or (no `machine_type`) all of them.
async fn set_advice(State(sim): State<Arc<Shared>>, body: Bytes) -> Response {
    let score: AdviceScore = match parse(&body) {
        Ok(s) => s,
        Err(e) => return bad(StatusCode::BAD_REQUEST, e),
    };
    if let Err(e) = score.check() {
        return bad(StatusCode::BAD_REQUEST, e);
    }
    sim.lock().set_advice(score);
    Json(json!({})).into_response()
}

async fn clear_advice(State(sim): State<Arc<Shared>>) -> Json<Value> {
    sim.lock().clear_advice();
    Json(json!({}))
}

/// Picks the latest fault rule that applies to this call, if the dice say so, and uses up one of its count.
pub fn pick_fault(faults: &mut Vec<FaultRule>, method_id: &str, path: &str) -> Option<FaultRule> {
    let mut rng = rand::thread_rng();
    let i = faults.iter().rposition(|f| {
        (f.method == "*" || f.method.strip_prefix("compute.").unwrap_or(&f.method) == method_id)
            && f.path_contains.as_deref().is_none_or(|p| path.contains(p))
            && f.count != Some(0)
            && rng.gen::<f64>() < f.probability
    })?;
    let rule = faults[i].clone();
    if let Some(n) = faults[i].count.as_mut() {
        *n -= 1;
        if *n == 0 {
            faults.remove(i);
        }
    }
    Some(rule)
}

/// The HTTP error a fault rule answers with, in Google's format.
pub fn fault_error(f: &FaultRule) -> ApiError {
    let reason = f.reason.clone().unwrap_or_else(|| {
        match f.status {
            403 | 429 => "rateLimitExceeded",
            404 => "notFound",
            409 => "alreadyExists",
            400 => "badRequest",
            _ => "backendError",
        }
        .to_string()
    });
    let message = match reason.as_str() {
        "rateLimitExceeded" => "Quota exceeded for quota metric 'Queries' and limit 'Queries per minute' of service 'compute.googleapis.com'.".to_string(),
        "backendError" => "Internal error. Please try again or contact Google Support.".to_string(),
        other => format!("Injected fault: {other}"),
    };
    ApiError::new(f.status, &reason, message)
}
