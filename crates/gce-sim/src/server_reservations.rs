//! The Compute API's reservation paths: `reservations`, `reservationBlocks`, `reservationSubBlocks`
//! and `futureReservations` (reads only; the control API books and ends them).
//!
//! | method id | path (after `/compute/v1/`) |
//! |---|---|
//! | `reservations.get` | `GET projects/P/zones/Z/reservations/R` |
//! | `reservations.list` | `GET projects/P/zones/Z/reservations` |
//! | `reservations.aggregatedList` | `GET projects/P/aggregated/reservations` |
//! | `reservationBlocks.get` | `GET projects/P/zones/Z/reservations/R/reservationBlocks/B` (answers `{"resource": ReservationBlock}`) |
//! | `reservationBlocks.list` | `GET projects/P/zones/Z/reservations/R/reservationBlocks` |
//! | `reservationSubBlocks.get` | `GET projects/P/zones/Z/reservations/R/reservationBlocks/B/reservationSubBlocks/S` (answers `{"resource": ReservationSubBlock}`) |
//! | `reservationSubBlocks.list` | `GET projects/P/zones/Z/reservations/R/reservationBlocks/B/reservationSubBlocks` |
//! | `futureReservations.get` | `GET projects/P/zones/Z/futureReservations/F` |
//! | `futureReservations.list` | `GET projects/P/zones/Z/futureReservations` |
//! | `futureReservations.aggregatedList` | `GET projects/P/aggregated/futureReservations` |
//!
//! Lists take `filter`, `maxResults`, `pageToken` and `fields` as every list does; an empty list
//! has no `items`. The sub-block path is the discovery document's
//! `projects/{project}/zones/{zone}/{+parentName}/reservationSubBlocks` with `parentName` =
//! `reservations/R/reservationBlocks/B`.

use super::error::ApiError;
use super::filter::Filter;
use super::server::{list_json, page_keyed, with_next, Call};
use super::state::{Scope, GCE_BASE};
use super::Shared;
use axum::http::Method;
use serde_json::{json, Map, Value};

/// Whether a discovery resource is served here.
pub fn serves(resource: &str) -> bool {
    matches!(resource, "reservations" | "reservationBlocks" | "reservationSubBlocks" | "futureReservations")
}

/// Routes the reservation paths (`segs`: the path after the prefix, split on `/`).
pub(crate) fn route(method: &Method, segs: &[&str]) -> Option<Call> {
    if method != Method::GET {
        return None;
    }
    let call = |id: &'static str, p: &str, scope: Scope, name: Option<&str>, sub: Option<String>| Call {
        method_id: id,
        project: p.to_string(),
        scope,
        name: name.map(str::to_string),
        sub,
    };
    let zone = |z: &str| Scope::Zone(z.to_string());
    Some(match segs {
        ["projects", p, "aggregated", "reservations"] => {
            call("reservations.aggregatedList", p, Scope::Global, None, None)
        }
        ["projects", p, "aggregated", "futureReservations"] => {
            call("futureReservations.aggregatedList", p, Scope::Global, None, None)
        }
        ["projects", p, "zones", z, "reservations"] => call("reservations.list", p, zone(z), None, None),
        ["projects", p, "zones", z, "reservations", r] => call("reservations.get", p, zone(z), Some(r), None),
        ["projects", p, "zones", z, "reservations", r, "reservationBlocks"] => {
            call("reservationBlocks.list", p, zone(z), Some(r), None)
        }
        ["projects", p, "zones", z, "reservations", r, "reservationBlocks", b] => {
            call("reservationBlocks.get", p, zone(z), Some(r), Some(b.to_string()))
        }
        ["projects", p, "zones", z, "reservations", r, "reservationBlocks", b, "reservationSubBlocks"] => {
            call("reservationSubBlocks.list", p, zone(z), Some(r), Some(b.to_string()))
        }
        ["projects", p, "zones", z, "reservations", r, "reservationBlocks", b, "reservationSubBlocks", s] => {
            call("reservationSubBlocks.get", p, zone(z), Some(r), Some(format!("{b}/{s}")))
        }
        ["projects", p, "zones", z, "futureReservations"] => {
            call("futureReservations.list", p, zone(z), None, None)
        }
        ["projects", p, "zones", z, "futureReservations", f] => {
            call("futureReservations.get", p, zone(z), Some(f), None)
        }
        _ => return None,
    })
}

/// Answers a routed reservation call.
pub(crate) fn run(
    sim: &Shared,
    call: &Call,
    query: &[(String, String)],
    filter: Option<&Filter>,
) -> Result<Value, ApiError> {
    let st = sim.lock();
    let project = call.project.as_str();
    let zone = match &call.scope {
        Scope::Zone(z) => z.as_str(),
        _ => "",
    };
    let name = call.name.clone().unwrap_or_default();
    let key = (project.to_string(), zone.to_string(), name.clone());
    let sub = call.sub.as_deref().unwrap_or_default();
    match call.method_id {
        "reservations.get" => Ok(st.render_reservation(st.reservation(&key)?)),
        "reservations.list" => {
            let items = st.reservations_of(project, Some(zone)).map(|r| (r.key_name().to_string(), r));
            let (items, next) = page_keyed(items, query, filter, |r| st.render_reservation(r))?;
            Ok(list_json(items, next, "ReservationList"))
        }
        "reservationBlocks.get" => st.reservation_block_json(&key, sub),
        "reservationBlocks.list" => {
            let (items, next) = page_keyed(st.reservation_blocks(&key)?.into_iter(), query, filter, |v| v)?;
            Ok(list_json(items, next, "ReservationBlocksListResponse"))
        }
        "reservationSubBlocks.get" => {
            let (b, s) = sub.split_once('/').unwrap_or((sub, ""));
            st.reservation_sub_block_json(&key, b, s)
        }
        "reservationSubBlocks.list" => {
            let (items, next) =
                page_keyed(st.reservation_sub_blocks(&key, sub)?.into_iter(), query, filter, |v| v)?;
            Ok(list_json(items, next, "ReservationSubBlocksListResponse"))
        }
        "futureReservations.get" => Ok(st.render_future_reservation(st.future_reservation(&key)?)),
        "futureReservations.list" => {
            let items = st.future_reservations_of(project, Some(zone)).map(|f| (f.key_name().to_string(), f));
            let (items, next) = page_keyed(items, query, filter, |f| st.render_future_reservation(f))?;
            Ok(list_json(items, next, "FutureReservationsListResponse"))
        }
        "reservations.aggregatedList" => {
            let items = st
                .reservations_of(project, None)
                .filter(|r| !st.unreachable_zone(r.zone()))
                .map(|r| (format!("{} {}", r.zone(), r.key_name()), r));
            let page = page_keyed(items, query, filter, |r| st.render_reservation(r))?;
            Ok(aggregated(&st, project, "reservations", "compute#reservationAggregatedList", page))
        }
        "futureReservations.aggregatedList" => {
            let items = st
                .future_reservations_of(project, None)
                .filter(|f| !st.unreachable_zone(f.zone()))
                .map(|f| (format!("{} {}", f.zone(), f.key_name()), f));
            let page = page_keyed(items, query, filter, |f| st.render_future_reservation(f))?;
            Ok(aggregated(
                &st,
                project,
                "futureReservations",
                "compute#futureReservationsAggregatedListResponse",
                page,
            ))
        }
        other => Err(ApiError::new(501, "notImplemented", format!("{other} is not simulated"))),
    }
}

/// An aggregated list: items by `zones/Z` scope; unreachable zones listed in `unreachables`.
fn aggregated(
    st: &super::state::State,
    project: &str,
    field: &str,
    kind: &str,
    (pairs, next): (Vec<(String, Value)>, Option<String>),
) -> Value {
    let mut items = Map::new();
    for (key, v) in pairs {
        let zone = key.split(' ').next().unwrap_or_default();
        let scoped = items.entry(format!("zones/{zone}")).or_insert_with(|| json!({ field: [] }));
        scoped[field].as_array_mut().expect("array").push(v);
    }
    let mut out = json!({"kind": kind, "id": format!("projects/{project}/aggregated/{field}"),
                         "selfLink": format!("{GCE_BASE}projects/{project}/aggregated/{field}")});
    if !items.is_empty() {
        out["items"] = Value::Object(items);
    }
    if !st.unreachable.is_empty() {
        out["unreachables"] = json!(st.unreachable.keys().map(|z| format!("zones/{z}")).collect::<Vec<_>>());
    }
    with_next(out, next)
}
