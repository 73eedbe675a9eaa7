//! The HTTP edge of the Compute API: routes GCE paths to method ids, counts calls, injects faults,
//! validates against the discovery document, and renders lists with filters and pages.

use super::error::ApiError;
use super::filter::Filter;
use super::schema;
use super::state::{MigKey, Scope};
use super::Shared;
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{Method, StatusCode, Uri};
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
    /// The MIG, template, instance or operation name (the path's resource name).
    name: Option<String>,
    /// The resize request name.
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
        ("GET", ["instances"]) if zone => ("instances.list", None, None),
        ("GET", ["instances", vm]) if zone => ("instances.get", Some(*vm), None),
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
pub async fn api(State(sim): State<Arc<Shared>>, method: Method, uri: Uri, body: Bytes) -> Response {
    let path = uri.path().strip_prefix(PREFIX).unwrap_or_default();
    let Some(call) = route(&method, path) else {
        return ApiError::new(
            404,
            "notFound",
            format!("The requested URL {} was not found on this server.", uri.path()),
        )
        .into_response();
    };
    let fault = {
        let mut st = sim.lock();
        *st.calls.entry(call.method_id.to_string()).or_default() += 1;
        super::control::pick_fault(&mut st.faults, call.method_id)
    };
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
        Ok(v) => respond(&call, v),
        Err(e) => e.into_response(),
    }
}

/// Debug builds check their own responses against the discovery document: a response that does not
/// fit is a simulator bug and is reported as a 500 instead of being passed on to the client.
fn respond(call: &Call, v: Value) -> Response {
    if cfg!(debug_assertions) {
        if let Some(schema_name) = schema::response_schema(call.method_id) {
            if let Err(errs) = schema::validate_value(schema_name, &v, schema::Direction::Response) {
                return (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    Json(json!({"error": {"code": 500, "message": format!("simulator bug: response does not fit {schema_name}: {errs:?}"),
                                          "errors": [], "status": "INTERNAL"}})),
                )
                    .into_response();
            }
        }
    }
    Json(v).into_response()
}

async fn handle(sim: &Shared, call: &Call, uri: &Uri, body: &Bytes) -> Result<Value, ApiError> {
    let query: Vec<(String, String)> = Query::try_from_uri(uri)
        .map(|Query(q)| q)
        .map_err(|e| ApiError::bad_request(vec![format!("Invalid query string: {e}")]))?;
    schema::validate_query(call.method_id, &query).map_err(ApiError::bad_request)?;
    let body: Value = if body.iter().all(u8::is_ascii_whitespace) {
        Value::Null
    } else {
        serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(vec![format!("Invalid JSON payload received. {e}")]))?
    };
    schema::validate_request_body(call.method_id, &body).map_err(ApiError::bad_request)?;
    let q = |k: &str| query.iter().find(|(name, _)| name == k).map(|(_, v)| v.as_str());
    let request_id = q("requestId");
    let project = call.project.as_str();
    let name = call.name.as_deref().unwrap_or_default();
    let sub = call.sub.as_deref().unwrap_or_default();
    let list = |items: Vec<Value>, kind_schema: &str| page(items, &query, kind_schema);
    let (_, op) = call.method_id.split_once('.').expect("ids have a dot");
    let resource = call.method_id.split('.').next().unwrap_or_default();
    let now = Utc::now();
    match (resource, op) {
        ("regionInstanceGroupManagers" | "instanceGroupManagers", "insert") => {
            let scope = call.scope.clone();
            sim.lock().mutate(project, request_id, now, |s| s.insert_mig(project, scope, &body, now))
        }
        ("regionInstanceGroupManagers" | "instanceGroupManagers", "get") => {
            sim.lock().mig_json(&call.mig_key(), now)
        }
        ("regionInstanceGroupManagers" | "instanceGroupManagers", "list") => {
            let items = sim.lock().list_migs(project, &call.scope, now);
            let kind = if resource == "regionInstanceGroupManagers" {
                "RegionInstanceGroupManagerList"
            } else {
                "InstanceGroupManagerList"
            };
            list(items, kind)
        }
        ("regionInstanceGroupManagers" | "instanceGroupManagers", "delete") => {
            let key = call.mig_key();
            sim.lock().mutate(project, request_id, now, |s| s.delete_mig(&key, now))
        }
        ("regionInstanceGroupManagers" | "instanceGroupManagers", "deleteInstances") => {
            let key = call.mig_key();
            sim.lock().mutate(project, request_id, now, |s| s.delete_instances(&key, &body, now))
        }
        ("regionInstanceGroupManagers" | "instanceGroupManagers", "listManagedInstances") => {
            if q("orderBy").is_some() {
                return Err(ApiError::invalid(
                    "Invalid value for field 'orderBy': listManagedInstances does not support orderBy.",
                ));
            }
            let (items, paginated) = sim.lock().managed_instances(&call.mig_key())?;
            let items = filter(items, q("filter"))?;
            if paginated {
                let (items, next) = slice(items, &query)?;
                Ok(with_next(items_or_nothing("managedInstances", items), next))
            } else {
                Ok(items_or_nothing("managedInstances", items))
            }
        }
        (_, "insert") => {
            let key = call.mig_key();
            sim.lock().mutate(project, request_id, now, |s| s.insert_resize_request(&key, &body, now))
        }
        ("instances", "get") => {
            let Scope::Zone(zone) = &call.scope else { unreachable!("routed as zonal") };
            sim.lock().instance_json(project, zone, name)
        }
        ("instances", "list") => {
            let Scope::Zone(zone) = &call.scope else { unreachable!("routed as zonal") };
            let items = sim.lock().list_instances(project, Some(zone)).into_iter().map(|(_, v)| v).collect();
            list(items, "InstanceList")
        }
        ("instances", "aggregatedList") => {
            let all = sim.lock().list_instances(project, None);
            let all = filter_pairs(all, q("filter"))?;
            let (pairs, next) = slice(all, &query)?;
            let mut items = serde_json::Map::new();
            for (zone, vm) in pairs {
                let scoped = items.entry(format!("zones/{zone}")).or_insert_with(|| json!({"instances": []}));
                scoped["instances"].as_array_mut().expect("array").push(vm);
            }
            let out = json!({"kind": "compute#instanceAggregatedList", "id": format!("projects/{project}/aggregated/instances"), "items": items});
            Ok(with_next(out, next))
        }
        ("instanceTemplates" | "regionInstanceTemplates", "get") => {
            Ok(sim.lock().template_json(project, &call.scope, name))
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
            let kind = if resource.starts_with("region") {
                "RegionInstanceGroupManagerResizeRequestsListResponse"
            } else {
                "InstanceGroupManagerResizeRequestsListResponse"
            };
            list(items, kind)
        }
        (_, "cancel") => {
            let key = call.mig_key();
            sim.lock().mutate(project, request_id, now, |s| s.cancel_resize_request(&key, sub, now))
        }
        (_, "delete") => {
            let key = call.mig_key();
            sim.lock().mutate(project, request_id, now, |s| s.delete_resize_request(&key, sub, now))
        }
        _ => Err(ApiError::new(501, "notImplemented", format!("{} is not simulated", call.method_id))),
    }
}

fn filter(items: Vec<Value>, text: Option<&str>) -> Result<Vec<Value>, ApiError> {
    match text.filter(|t| !t.trim().is_empty()) {
        None => Ok(items),
        Some(t) => {
            let f = Filter::parse(t).map_err(ApiError::invalid)?;
            Ok(items.into_iter().filter(|v| f.matches(v)).collect())
        }
    }
}

fn filter_pairs(items: Vec<(String, Value)>, text: Option<&str>) -> Result<Vec<(String, Value)>, ApiError> {
    match text.filter(|t| !t.trim().is_empty()) {
        None => Ok(items),
        Some(t) => {
            let f = Filter::parse(t).map_err(ApiError::invalid)?;
            Ok(items.into_iter().filter(|(_, v)| f.matches(v)).collect())
        }
    }
}

/// Filters and pages a list, wrapping it in the list schema's `kind` and `items`.
fn page(items: Vec<Value>, query: &[(String, String)], list_schema: &str) -> Result<Value, ApiError> {
    let q = |k: &str| query.iter().find(|(name, _)| name == k).map(|(_, v)| v.as_str());
    let items = filter(items, q("filter"))?;
    let (items, next) = slice(items, query)?;
    let kind = schema::kind_of(list_schema).unwrap_or_default();
    let mut out = items_or_nothing("items", items);
    out["kind"] = json!(kind);
    Ok(with_next(out, next))
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

/// One page of `items` for `maxResults` (≤ 500) and `pageToken`; returns the next token if any.
fn slice<T>(items: Vec<T>, query: &[(String, String)]) -> Result<(Vec<T>, Option<String>), ApiError> {
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
    let start = match q("pageToken").filter(|t| !t.is_empty()) {
        None => 0,
        Some(t) => decode_token(t)
            .filter(|s| *s <= items.len())
            .ok_or_else(|| ApiError::invalid(format!("Invalid value for field 'pageToken': '{t}'")))?,
    };
    let end = (start + max).min(items.len());
    let next = (end < items.len()).then(|| encode_token(end));
    Ok((items.into_iter().skip(start).take(end - start).collect(), next))
}

/// Page tokens are opaque to clients; here they carry the offset of the next item.
fn encode_token(offset: usize) -> String {
    format!("sim1.{offset:x}")
}

fn decode_token(token: &str) -> Option<usize> {
    usize::from_str_radix(token.strip_prefix("sim1.")?, 16).ok()
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
        let items: Vec<u32> = (0..7).collect();
        let mut q = vec![("maxResults".to_string(), "3".to_string())];
        let mut seen = Vec::new();
        loop {
            let (page, next) = slice(items.clone(), &q).unwrap();
            seen.extend(page);
            match next {
                Some(t) => {
                    q.retain(|(k, _)| k != "pageToken");
                    q.push(("pageToken".into(), t));
                }
                None => break,
            }
        }
        assert_eq!(seen, items);
        assert!(slice(items, &[("pageToken".into(), "bogus".into())]).is_err());
    }
}
