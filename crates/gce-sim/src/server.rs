//! The HTTP edge of the Compute API: routes GCE paths to method ids, counts calls, injects faults,
//! validates against the discovery document, and renders lists with filters and pages.

use super::error::ApiError;
use super::fields::Fields;
use super::filter::Filter;
use super::schema;
use super::server_reservations::{self as reservations, Reply};
use super::state::{machine_type_json, MigKey, Mutation, QuotaGroup, Scope, Unreachable, GCE_BASE};
use super::Shared;
use axum::body::Bytes;
use axum::extract::{ConnectInfo, Query, State};
use axum::http::{Method, Uri};
use axum::response::{IntoResponse, Response};
use axum::Json;
use chrono::Utc;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// The API's path prefix; everything after it is GCE's method `path`.
pub const PREFIX: &str = "/compute/v1/";
/// `operations.wait` returns DONE operations at once, others after at most this long.
const WAIT_MAX: Duration = Duration::from_secs(2);
/// Default and largest `maxResults`.
const MAX_RESULTS: usize = 500;

/// What a request addresses, once its path is understood.
#[derive(Debug, Clone)]
struct Call {
    /// Discovery method id without the `compute.` prefix, e.g. `regionInstanceGroupManagers.insert`.
    method_id: &'static str,
    project: String,
    scope: Scope,
    /// The MIG, template, instance, operation or reservation name (the path's resource name).
    name: Option<String>,
    /// The resize request name (a reservation's block, or `block/sub-block`).
    sub: Option<String>,
}

impl Call {
    fn mig_key(&self) -> MigKey {
        MigKey {
            project: self.project.clone(),
            scope: self.scope.clone(),
            name: self.name.clone().unwrap_or_default(),
        }
    }
}

/// Maps an HTTP method and path (after [`PREFIX`]) to the discovery method it calls.
fn route(method: &Method, path: &str) -> Option<Call> {
    let segs: Vec<&str> = path.trim_end_matches('/').split('/').collect();
    if let Some(r) = reservations::route(method, &segs) {
        return Some(Call {
            method_id: r.method_id,
            project: r.project,
            scope: r.scope,
            name: r.name,
            sub: r.sub,
        });
    }
    let (project, scope, rest) = match segs.as_slice() {
        ["projects", p, "regions", r, rest @ ..] => (*p, Scope::Region(r.to_string()), rest),
        ["projects", p, "zones", z, rest @ ..] => (*p, Scope::Zone(z.to_string()), rest),
        ["projects", p, "global", rest @ ..] => (*p, Scope::Global, rest),
        ["projects", p, "aggregated", "instances"] if method == Method::GET => {
            return Some(Call {
                method_id: "instances.aggregatedList",
                project: p.to_string(),
                scope: Scope::Global,
                name: None,
                sub: None,
            })
        }
        _ => return None,
    };
    let region = matches!(scope, Scope::Region(_));
    let zone = matches!(scope, Scope::Zone(_));
    let pick = |r: &'static str, z: &'static str| {
        if region {
            Some(r)
        } else if zone {
            Some(z)
        } else {
            None
        }
    };
    let m = method.as_str();
    let (method_id, name, sub) = match (m, rest) {
        ("GET", ["instanceGroupManagers"]) => {
            (pick("regionInstanceGroupManagers.list", "instanceGroupManagers.list")?, None, None)
        }
        ("POST", ["instanceGroupManagers"]) => {
            (pick("regionInstanceGroupManagers.insert", "instanceGroupManagers.insert")?, None, None)
        }
        ("GET", ["instanceGroupManagers", mig]) => {
            (pick("regionInstanceGroupManagers.get", "instanceGroupManagers.get")?, Some(*mig), None)
        }
        ("DELETE", ["instanceGroupManagers", mig]) => {
            (pick("regionInstanceGroupManagers.delete", "instanceGroupManagers.delete")?, Some(*mig), None)
        }
        ("POST", ["instanceGroupManagers", mig, "deleteInstances"]) => (
            pick("regionInstanceGroupManagers.deleteInstances", "instanceGroupManagers.deleteInstances")?,
            Some(*mig),
            None,
        ),
        ("POST", ["instanceGroupManagers", mig, "createInstances"]) => (
            pick("regionInstanceGroupManagers.createInstances", "instanceGroupManagers.createInstances")?,
            Some(*mig),
            None,
        ),
        ("POST", ["instanceGroupManagers", mig, "listManagedInstances"]) => (
            pick(
                "regionInstanceGroupManagers.listManagedInstances",
                "instanceGroupManagers.listManagedInstances",
            )?,
            Some(*mig),
            None,
        ),
        ("POST", ["instanceGroupManagers", mig, "resizeRequests"]) => (
            pick(
                "regionInstanceGroupManagerResizeRequests.insert",
                "instanceGroupManagerResizeRequests.insert",
            )?,
            Some(*mig),
            None,
        ),
        ("GET", ["instanceGroupManagers", mig, "resizeRequests"]) => (
            pick("regionInstanceGroupManagerResizeRequests.list", "instanceGroupManagerResizeRequests.list")?,
            Some(*mig),
            None,
        ),
        ("GET", ["instanceGroupManagers", mig, "resizeRequests", rr]) => (
            pick("regionInstanceGroupManagerResizeRequests.get", "instanceGroupManagerResizeRequests.get")?,
            Some(*mig),
            Some(*rr),
        ),
        ("DELETE", ["instanceGroupManagers", mig, "resizeRequests", rr]) => (
            pick(
                "regionInstanceGroupManagerResizeRequests.delete",
                "instanceGroupManagerResizeRequests.delete",
            )?,
            Some(*mig),
            Some(*rr),
        ),
        ("POST", ["instanceGroupManagers", mig, "resizeRequests", rr, "cancel"]) => (
            pick(
                "regionInstanceGroupManagerResizeRequests.cancel",
                "instanceGroupManagerResizeRequests.cancel",
            )?,
            Some(*mig),
            Some(*rr),
        ),
        ("POST", ["advice", "capacity"]) if region => ("advice.capacity", None, None),
        ("POST", ["resourcePolicies"]) if region => ("resourcePolicies.insert", None, None),
        ("GET", ["resourcePolicies"]) if region => ("resourcePolicies.list", None, None),
        ("GET", ["resourcePolicies", p]) if region => ("resourcePolicies.get", Some(*p), None),
        ("DELETE", ["resourcePolicies", p]) if region => ("resourcePolicies.delete", Some(*p), None),
        ("GET", ["instances"]) if zone => ("instances.list", None, None),
        ("GET", ["instances", vm]) if zone => ("instances.get", Some(*vm), None),
        ("POST", ["instances", vm, "reportHostAsFaulty"]) if zone => {
            ("instances.reportHostAsFaulty", Some(*vm), None)
        }
        ("GET", ["machineTypes", m]) if zone => ("machineTypes.get", Some(*m), None),
        ("GET", ["instanceTemplates", t]) if region => ("regionInstanceTemplates.get", Some(*t), None),
        ("GET", ["instanceTemplates", t]) if !zone => ("instanceTemplates.get", Some(*t), None),
        ("GET", ["operations", op]) => (
            if region {
                "regionOperations.get"
            } else if zone {
                "zoneOperations.get"
            } else {
                "globalOperations.get"
            },
            Some(*op),
            None,
        ),
        ("POST", ["operations", op, "wait"]) => (
            if region {
                "regionOperations.wait"
            } else if zone {
                "zoneOperations.wait"
            } else {
                "globalOperations.wait"
            },
            Some(*op),
            None,
        ),
        _ => return None,
    };
    Some(Call {
        method_id,
        project: project.to_string(),
        scope,
        name: name.map(str::to_string),
        sub: sub.map(str::to_string),
    })
}

/// The handler for every path under [`PREFIX`].
///
/// In order: route (404 for a path GCE does not have here), count the call, rate quotas (403
/// `rateLimitExceeded`), injected HTTP faults, then `handle`.
pub async fn api(
    State(sim): State<Arc<Shared>>,
    ConnectInfo(peer): ConnectInfo<std::net::SocketAddr>,
    method: Method,
    uri: Uri,
    body: Bytes,
) -> Response {
    let path = uri.path().strip_prefix(PREFIX).unwrap_or_default();
    let Some(call) = route(&method, path) else {
        return ApiError::new(
            404,
            "notFound",
            format!("The requested URL {} was not found on this server.", uri.path()),
        )
        .into_response();
    };
    let group = QuotaGroup::of(call.method_id);
    let (fault, limited) = {
        let mut st = sim.lock();
        *st.calls.entry(call.method_id.to_string()).or_default() += 1;
        *st.calls_by_peer
            .entry(peer.ip().to_string())
            .or_default()
            .entry(call.method_id.to_string())
            .or_default() += 1;
        match st.quotas.admit(&call.project, group, Utc::now()) {
            Err(limit) => {
                *st.rate_limited.entry(call.method_id.to_string()).or_default() += 1;
                (None, Some(limit))
            }
            Ok(()) => (super::control::pick_fault(&mut st.faults, call.method_id, path), None),
        }
    };
    if let Some(limit) = limited {
        return rate_limit_error(group, &call.project, limit).into_response();
    }
    if let Some(fault) = fault {
        if fault.delay_ms > 0 {
            tokio::time::sleep(Duration::from_millis(fault.delay_ms)).await;
        }
        if fault.status != 200 {
            if fault.after {
                let _ = handle(&sim, &call, &uri, &body).await;
            }
            return super::control::fault_error(&fault).into_response();
        }
    }
    match handle(&sim, &call, &uri, &body).await {
        Ok(v) => Json(v).into_response(),
        Err(e) => e.into_response(),
    }
}

/// 403 `rateLimitExceeded`, as GCE answers a call over a rate quota.
fn rate_limit_error(group: QuotaGroup, project: &str, limit: u64) -> ApiError {
    let (metric, limit_name) = group.names();
    ApiError::new(
        403,
        "rateLimitExceeded",
        format!(
            "Quota exceeded for quota metric '{metric}' and limit '{limit_name}' of service 'compute.googleapis.com' for consumer 'project_number:{}' (limit {limit}).",
            super::state::project_number(project)
        ),
    )
}

/// 503 for a call into a zone the control API marked unreachable.
fn unreachable(project: &str, zone: &str) -> ApiError {
    ApiError::new(
        503,
        "backendError",
        format!(
            "The zone 'projects/{project}/zones/{zone}' is currently unreachable. Please try again later."
        ),
    )
}

/// Validates the query and body, runs the call, then checks the response against the discovery
/// document (debug builds: a response that does not fit is a simulator bug, answered as a 500
/// instead of being passed on) and applies `fields`.
async fn handle(sim: &Shared, call: &Call, uri: &Uri, body: &Bytes) -> Result<Value, ApiError> {
    let query: Vec<(String, String)> = Query::try_from_uri(uri)
        .map(|Query(q)| q)
        .map_err(|e| ApiError::bad_request(vec![format!("Invalid query string: {e}")]))?;
    schema::validate_query(call.method_id, &query).map_err(ApiError::bad_request)?;
    let fields = match query.iter().find(|(k, _)| k == "fields") {
        Some((_, text)) => Some(Fields::parse(text, call.method_id)?),
        None => None,
    };
    let body: Value = if body.iter().all(u8::is_ascii_whitespace) {
        Value::Null
    } else {
        serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(vec![format!("Invalid JSON payload received. {e}")]))?
    };
    schema::validate_request_body(call.method_id, &body).map_err(ApiError::bad_request)?;
    let v = run(sim, call, &query, &body).await?;
    if cfg!(debug_assertions) {
        if let Some(schema_name) = schema::response_schema(call.method_id) {
            if let Err(errs) = schema::validate_value(schema_name, &v, schema::Direction::Response) {
                return Err(ApiError::new(
                    500,
                    "backendError",
                    format!("simulator bug: response does not fit {schema_name}: {errs:?}"),
                ));
            }
        }
    }
    Ok(match fields {
        Some(f) => f.apply(v),
        None => v,
    })
}

/// What a mutation's Operation says it acts on (for an Operation failed by a fault rule).
fn mutation<'a>(call: &'a Call, request_id: Option<&'a str>, body: &Value) -> Mutation<'a> {
    let key = call.mig_key();
    let (_, op) = call.method_id.split_once('.').expect("ids have a dot");
    let named = body.get("name").and_then(Value::as_str).unwrap_or_default();
    let is_rr = call.method_id.contains("ResizeRequests");
    let policies = format!("{GCE_BASE}projects/{}/{}/resourcePolicies", call.project, call.scope.path());
    let (op_type, target_link) = match (is_rr, op) {
        _ if call.method_id == "instances.reportHostAsFaulty" => (
            "compute.instances.reportHostAsFaulty",
            format!(
                "{GCE_BASE}projects/{}/{}/instances/{}",
                call.project,
                call.scope.path(),
                call.name.as_deref().unwrap_or_default()
            ),
        ),
        _ if call.method_id.starts_with("resourcePolicies.") => match op {
            "insert" => ("insert", format!("{policies}/{named}")),
            _ => ("delete", format!("{policies}/{}", call.name.as_deref().unwrap_or_default())),
        },
        (false, "insert") => (
            "insert",
            format!(
                "{GCE_BASE}projects/{}/{}/instanceGroupManagers/{named}",
                call.project,
                call.scope.path()
            ),
        ),
        (false, "delete") => ("delete", key.url()),
        (false, "createInstances") => ("compute.instanceGroupManagers.createInstances", key.url()),
        (false, _) => ("compute.instanceGroupManagers.deleteInstances", key.url()),
        (true, "insert") => ("insert", format!("{}/resizeRequests/{named}", key.url())),
        (true, other) => (
            if other == "cancel" { "cancel" } else { "delete" },
            format!("{}/resizeRequests/{}", key.url(), call.sub.as_deref().unwrap_or_default()),
        ),
    };
    Mutation {
        project: &call.project,
        scope: call.scope.clone(),
        method_id: call.method_id,
        request_id,
        op_type,
        target_link,
    }
}

async fn run(sim: &Shared, call: &Call, query: &[(String, String)], body: &Value) -> Result<Value, ApiError> {
    let q = |k: &str| query.iter().find(|(name, _)| name == k).map(|(_, v)| v.as_str());
    let request_id = q("requestId");
    let project = call.project.as_str();
    let name = call.name.as_deref().unwrap_or_default();
    let sub = call.sub.as_deref().unwrap_or_default();
    let (_, op) = call.method_id.split_once('.').expect("ids have a dot");
    let resource = call.method_id.split('.').next().unwrap_or_default();
    let now = Utc::now();
    let filter = parse_filter(q("filter"))?;
    if let Scope::Zone(z) = &call.scope {
        if sim.lock().unreachable_zone(z) {
            return Err(unreachable(project, z));
        }
    }
    if let Scope::Region(r) = &call.scope {
        if sim.lock().unreachable_regions.contains(r) {
            return Err(ApiError::new(
                503,
                "backendError",
                format!("The region 'projects/{project}/regions/{r}' is currently unreachable. Please try again later."),
            ));
        }
    }
    let m = || mutation(call, request_id, body);
    match (resource, op) {
        (r, _) if reservations::serves(r) => {
            let st = sim.lock();
            match reservations::run(&st, call.method_id, project, &call.scope, name, sub)? {
                Reply::One(v) => Ok(v),
                Reply::List(items, schema) => {
                    let (items, next) = page_keyed(items.into_iter(), query, filter.as_ref(), |v| v)?;
                    Ok(list_json(items, next, schema))
                }
                Reply::Aggregated(items, field, kind) => {
                    let (items, next) = page_keyed(items.into_iter(), query, filter.as_ref(), |v| v)?;
                    Ok(reservations::aggregated(&st, project, field, kind, items, next))
                }
            }
        }
        ("regionInstanceGroupManagers" | "instanceGroupManagers", "insert") => {
            let scope = call.scope.clone();
            sim.lock().mutate(m(), now, |s| s.insert_mig(project, scope, body, now))
        }
        ("regionInstanceGroupManagers" | "instanceGroupManagers", "get") => {
            sim.lock().mig_json(&call.mig_key(), now)
        }
        ("regionInstanceGroupManagers" | "instanceGroupManagers", "list") => {
            let st = sim.lock();
            let items = st.migs_of(project, &call.scope).map(|m| (m.name().to_string(), m));
            let (items, next) = page_keyed(items, query, filter.as_ref(), |m| st.render_mig(m, now))?;
            let kind = if resource == "regionInstanceGroupManagers" {
                "RegionInstanceGroupManagerList"
            } else {
                "InstanceGroupManagerList"
            };
            Ok(list_json(items, next, kind))
        }
        ("regionInstanceGroupManagers" | "instanceGroupManagers", "delete") => {
            let key = call.mig_key();
            sim.lock().mutate(m(), now, |s| s.delete_mig(&key, now))
        }
        ("regionInstanceGroupManagers" | "instanceGroupManagers", "deleteInstances") => {
            let key = call.mig_key();
            let mut st = sim.lock();
            if let Some(z) = st.mig_zone(&key).filter(|z| st.unreachable_zone(z)) {
                return Err(unreachable(project, z));
            }
            st.mutate(m(), now, |s| s.delete_instances(&key, body, now))
        }
        ("regionInstanceGroupManagers" | "instanceGroupManagers", "createInstances") => {
            let key = call.mig_key();
            sim.lock().mutate(m(), now, |s| s.create_instances(&key, body, now))
        }
        ("regionInstanceGroupManagers" | "instanceGroupManagers", "listManagedInstances") => {
            if q("orderBy").is_some() {
                return Err(ApiError::invalid(
                    "Invalid value for field 'orderBy': listManagedInstances does not support orderBy.",
                ));
            }
            let key = call.mig_key();
            let (items, paginated) = {
                let st = sim.lock();
                // A regional MIG whose VMs live in an unreachable zone: what GCE answers is not
                // documented; the simulator takes the conservative view and fails the call.
                if let Some(z) = st.mig_zone(&key).filter(|z| st.unreachable_zone(z)) {
                    return Err(unreachable(project, z));
                }
                st.managed_instances(&key)?
            };
            let keyed = items.into_iter().map(|v| (v["name"].as_str().unwrap_or_default().to_string(), v));
            let (items, next) = if paginated {
                page_keyed(keyed, query, filter.as_ref(), |v| v)?
            } else {
                let all = keyed.filter(|(_, v)| filter.as_ref().is_none_or(|f| f.matches(v))).collect();
                (all, None)
            };
            let items = items.into_iter().map(|(_, v)| v).collect();
            Ok(with_next(items_or_nothing("managedInstances", items), next))
        }
        ("advice", "capacity") => {
            let Scope::Region(region) = &call.scope else { unreachable!("routed as regional") };
            sim.lock().capacity_advice(project, region, body)
        }
        ("resourcePolicies", op) => {
            let Scope::Region(region) = &call.scope else { unreachable!("routed as regional") };
            match op {
                "insert" => sim.lock().mutate(m(), now, |s| s.insert_policy(project, region, body, now)),
                "get" => sim.lock().policy_json(project, region, name),
                "delete" => sim.lock().mutate(m(), now, |s| s.delete_policy(project, region, name, now)),
                _ => {
                    let st = sim.lock();
                    let items = st
                        .policies_of(project, region)
                        .map(|p| (p["name"].as_str().unwrap_or_default().to_string(), p));
                    let (items, next) = page_keyed(items, query, filter.as_ref(), |p| p)?;
                    Ok(list_json(items, next, "ResourcePolicyList"))
                }
            }
        }
        (_, "insert") => {
            let key = call.mig_key();
            sim.lock().mutate(m(), now, |s| s.insert_resize_request(&key, body, now))
        }
        ("instances", "reportHostAsFaulty") => {
            let Scope::Zone(zone) = &call.scope else { unreachable!("routed as zonal") };
            sim.lock().mutate(m(), now, |s| s.report_host_as_faulty(project, zone, name, body, now))
        }
        ("instances", "get") => {
            let Scope::Zone(zone) = &call.scope else { unreachable!("routed as zonal") };
            sim.lock().instance_json(project, zone, name)
        }
        ("instances", "list") => {
            let Scope::Zone(zone) = &call.scope else { unreachable!("routed as zonal") };
            let st = sim.lock();
            let items = st.instances_of(project, Some(zone)).map(|vm| (vm.name.clone(), vm));
            let (items, next) = page_keyed(items, query, filter.as_ref(), |vm| st.render_instance(vm))?;
            Ok(list_json(items, next, "InstanceList"))
        }
        ("instances", "aggregatedList") => {
            let st = sim.lock();
            if let Some((z, _)) = st.unreachable.iter().find(|(_, mode)| **mode == Unreachable::Error) {
                return Err(unreachable(project, z));
            }
            let items = st
                .instances_of(project, None)
                .filter(|vm| !st.unreachable.contains_key(&vm.zone))
                .map(|vm| (format!("{} {}", vm.zone, vm.name), vm));
            let (pairs, next) = page_keyed(items, query, filter.as_ref(), |vm| st.render_instance(vm))?;
            let mut items = serde_json::Map::new();
            for (key, vm) in pairs {
                let zone = key.split(' ').next().unwrap_or_default();
                let scoped = items.entry(format!("zones/{zone}")).or_insert_with(|| json!({"instances": []}));
                scoped["instances"].as_array_mut().expect("array").push(vm);
            }
            let mut out = json!({"kind": "compute#instanceAggregatedList",
                                 "id": format!("projects/{project}/aggregated/instances"),
                                 "selfLink": format!("{GCE_BASE}projects/{project}/aggregated/instances")});
            // Partial success: every unreachable zone is a scope with a warning instead of instances,
            // and is listed in `unreachables`, on every page.
            if !st.unreachable.is_empty() {
                let scopes: Vec<String> = st.unreachable.keys().map(|z| format!("zones/{z}")).collect();
                for scope in &scopes {
                    items.insert(
                        scope.clone(),
                        json!({"warning": {"code": "UNREACHABLE",
                                           "message": format!("Scope '{scope}' is unreachable: its instances are missing from this list."),
                                           "data": [{"key": "scope", "value": scope}]}}),
                    );
                }
                out["unreachables"] = json!(scopes);
            }
            out["items"] = Value::Object(items);
            Ok(with_next(out, next))
        }
        ("machineTypes", "get") => {
            let Scope::Zone(zone) = &call.scope else { unreachable!("routed as zonal") };
            machine_type_json(project, zone, name)
        }
        ("instanceTemplates" | "regionInstanceTemplates", "get") => {
            sim.lock().template_json(project, &call.scope, name)
        }
        (_, "get") if resource.ends_with("Operations") => {
            sim.lock().operation(project, &call.scope, name).map(|o| o.to_json(now))
        }
        (_, "wait") => {
            let deadline = tokio::time::Instant::now() + WAIT_MAX;
            loop {
                let now = Utc::now();
                let (done, json) = {
                    let st = sim.lock();
                    let o = st.operation(project, &call.scope, name)?;
                    (o.is_done(now), o.to_json(now))
                };
                if done || tokio::time::Instant::now() >= deadline {
                    return Ok(json);
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        (_, "get") => sim.lock().resize_request_json(&call.mig_key(), sub),
        (_, "list") => {
            let items = sim.lock().list_resize_requests(&call.mig_key())?;
            let keyed = items.into_iter().map(|v| (v["name"].as_str().unwrap_or_default().to_string(), v));
            let (items, next) = page_keyed(keyed, query, filter.as_ref(), |v| v)?;
            let kind = if resource.starts_with("region") {
                "RegionInstanceGroupManagerResizeRequestsListResponse"
            } else {
                "InstanceGroupManagerResizeRequestsListResponse"
            };
            Ok(list_json(items, next, kind))
        }
        (_, "cancel") => {
            let key = call.mig_key();
            sim.lock().mutate(m(), now, |s| s.cancel_resize_request(&key, sub, now))
        }
        (_, "delete") => {
            let key = call.mig_key();
            sim.lock().mutate(m(), now, |s| s.delete_resize_request(&key, sub, now))
        }
        _ => Err(ApiError::new(501, "notImplemented", format!("{} is not simulated", call.method_id))),
    }
}

fn parse_filter(text: Option<&str>) -> Result<Option<Filter>, ApiError> {
    match text.filter(|t| !t.trim().is_empty()) {
        None => Ok(None),
        Some(t) => Filter::parse(t).map(Some).map_err(ApiError::invalid),
    }
}

/// A list response: `kind`, `items` (left out when empty) and `nextPageToken`.
fn list_json(items: Vec<(String, Value)>, next: Option<String>, list_schema: &str) -> Value {
    let mut out = items_or_nothing("items", items.into_iter().map(|(_, v)| v).collect());
    out["kind"] = json!(schema::kind_of(list_schema).unwrap_or_default());
    with_next(out, next)
}

/// GCE leaves an empty list out of the response altogether (`{}` rather than `{"items": []}`), so a
/// client must cope with the field missing; the simulator does the same so that it has to.
fn items_or_nothing(field: &str, items: Vec<Value>) -> Value {
    if items.is_empty() {
        json!({})
    } else {
        json!({ field: items })
    }
}

fn with_next(mut v: Value, next: Option<String>) -> Value {
    if let Some(token) = next {
        v["nextPageToken"] = json!(token);
    }
    v
}

/// A page of keyed, rendered items and the token of the next page.
type Page = (Vec<(String, Value)>, Option<String>);

/// One page of a list whose items come in increasing `key` order: the first `maxResults` (≤ 500)
/// items after the page token's key that pass the filter, rendered, and the next token if more
/// follow. Only the items of the page (and those the filter looks at) are rendered, so a page
/// costs the same at 10,000 VMs as at 10.
fn page_keyed<T>(
    items: impl Iterator<Item = (String, T)>,
    query: &[(String, String)],
    filter: Option<&Filter>,
    mut render: impl FnMut(T) -> Value,
) -> Result<Page, ApiError> {
    let q = |k: &str| query.iter().find(|(name, _)| name == k).map(|(_, v)| v.as_str());
    let max = match q("maxResults").map(str::parse::<usize>) {
        None | Some(Ok(0)) => MAX_RESULTS,
        Some(Ok(n)) if n <= MAX_RESULTS => n,
        Some(_) => {
            return Err(ApiError::invalid(format!(
                "Invalid value for field 'maxResults': '{}'. Must be less than or equal to {MAX_RESULTS}",
                q("maxResults").unwrap_or_default()
            )))
        }
    };
    let after = match q("pageToken").filter(|t| !t.is_empty()) {
        None => None,
        Some(t) => Some(
            decode_token(t)
                .ok_or_else(|| ApiError::invalid(format!("Invalid value for field 'pageToken': '{t}'")))?,
        ),
    };
    let mut page = Vec::new();
    for (key, item) in items {
        if after.as_ref().is_some_and(|a| key.as_str() <= a.as_str()) {
            continue;
        }
        let v = render(item);
        if filter.is_some_and(|f| !f.matches(&v)) {
            continue;
        }
        if page.len() == max {
            let next = page.last().map(|(k, _): &(String, Value)| encode_token(k));
            return Ok((page, next));
        }
        page.push((key, v));
    }
    Ok((page, None))
}

/// Page tokens are opaque to clients; here they carry the key of the last item of the page.
fn encode_token(key: &str) -> String {
    let hex: String = key.bytes().map(|b| format!("{b:02x}")).collect();
    format!("sim2.{hex}")
}

fn decode_token(token: &str) -> Option<String> {
    let hex = token.strip_prefix("sim2.")?;
    if hex.len() % 2 != 0 {
        return None;
    }
    let bytes: Option<Vec<u8>> =
        (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok()).collect();
    String::from_utf8(bytes?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_map_to_discovery_method_ids() {
        let cases = [
            ("POST", "projects/p/regions/r/instanceGroupManagers", "regionInstanceGroupManagers.insert"),
            (
                "POST",
                "projects/p/zones/z/instanceGroupManagers/m/resizeRequests",
                "instanceGroupManagerResizeRequests.insert",
            ),
            (
                "POST",
                "projects/p/regions/r/instanceGroupManagers/m/resizeRequests/rr/cancel",
                "regionInstanceGroupManagerResizeRequests.cancel",
            ),
            (
                "POST",
                "projects/p/regions/r/instanceGroupManagers/m/listManagedInstances",
                "regionInstanceGroupManagers.listManagedInstances",
            ),
            ("GET", "projects/p/aggregated/instances", "instances.aggregatedList"),
            ("GET", "projects/p/global/instanceTemplates/t", "instanceTemplates.get"),
            ("GET", "projects/p/zones/z/machineTypes/a3-ultragpu-8g", "machineTypes.get"),
            ("GET", "projects/p/regions/r/instanceTemplates/t", "regionInstanceTemplates.get"),
            ("POST", "projects/p/zones/z/operations/o/wait", "zoneOperations.wait"),
            ("GET", "projects/p/global/operations/o", "globalOperations.get"),
        ];
        for (m, path, id) in cases {
            let call = route(&Method::from_bytes(m.as_bytes()).unwrap(), path).unwrap();
            assert_eq!(call.method_id, id, "{m} {path}");
            assert!(schema::method(id).is_some(), "{id} is in the trimmed document");
        }
        assert!(route(&Method::GET, "projects/p/regions/r/instances").is_none());
        assert!(route(&Method::PUT, "projects/p/regions/r/instanceGroupManagers/m").is_none());
    }

    #[test]
    fn pages_cover_everything_once() {
        let items: Vec<String> = (0..7).map(|i| format!("n-{i}")).collect();
        let mut q = vec![("maxResults".to_string(), "3".to_string())];
        let mut seen = Vec::new();
        loop {
            let keyed = items.iter().map(|k| (k.clone(), json!(k)));
            let (page, next) = page_keyed(keyed, &q, None, |v| v).unwrap();
            assert!(page.len() <= 3);
            seen.extend(page.into_iter().map(|(k, _)| k));
            match next {
                Some(t) => {
                    q.retain(|(k, _)| k != "pageToken");
                    q.push(("pageToken".into(), t));
                }
                None => break,
            }
        }
        assert_eq!(seen, items);
        let bogus = [("pageToken".to_string(), "bogus".to_string())];
        assert!(page_keyed(items.iter().map(|k| (k.clone(), ())), &bogus, None, |_| json!(1)).is_err());
        assert_eq!(
            decode_token(&encode_token("us-central1-a hpc-0")).as_deref(),
            Some("us-central1-a hpc-0")
        );
    }
}
