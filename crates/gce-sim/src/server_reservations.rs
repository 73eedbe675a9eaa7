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
//! Lists take `filter`, `maxResults`, `pageToken` and `fields` as every list does (the server pages
//! what [`run`] answers); an empty list has no `items`. The sub-block path is the discovery document's
//! `projects/{project}/zones/{zone}/{+parentName}/reservationSubBlocks` with `parentName` =
//! `reservations/R/reservationBlocks/B`.

use super::error::ApiError;
use super::state::{Scope, State, GCE_BASE};
use axum::http::Method;
use serde_json::{json, Map, Value};

/// A reservation path, understood: the server turns it into its `Call`.
pub(crate) struct Route {
    pub(crate) method_id: &'static str,
    pub(crate) project: String,
    pub(crate) scope: Scope,
    /// The reservation or future reservation.
    pub(crate) name: Option<String>,
    /// The block, or `block/sub-block`.
    pub(crate) sub: Option<String>,
}

/// What a call answers: one resource, or the items of a list for the server to page.
pub(crate) enum Reply {
    One(Value),
    /// Keyed items and the list's schema.
    List(Vec<(String, Value)>, &'static str),
    /// Items keyed `"{zone} {name}"`, the scoped list's field and the list's kind.
    Aggregated(Vec<(String, Value)>, &'static str, &'static str),
}

/// Whether a discovery resource is served here.
pub fn serves(resource: &str) -> bool {
    matches!(resource, "reservations" | "reservationBlocks" | "reservationSubBlocks" | "futureReservations")
}

/// Routes the reservation paths (`segs`: the path after the prefix, split on `/`).
pub(crate) fn route(method: &Method, segs: &[&str]) -> Option<Route> {
    if method != Method::GET {
        return None;
    }
    let call = |id: &'static str, p: &str, scope: Scope, name: Option<&str>, sub: Option<String>| Route {
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
    st: &State,
    method_id: &str,
    project: &str,
    scope: &Scope,
    name: &str,
    sub: &str,
) -> Result<Reply, ApiError> {
    let zone = match scope {
        Scope::Zone(z) => z.as_str(),
        _ => "",
    };
    let key = (project.to_string(), zone.to_string(), name.to_string());
    Ok(match method_id {
        "reservations.get" => Reply::One(st.render_reservation(st.reservation(&key)?)),
        "reservations.list" => Reply::List(
            st.reservations_of(project, Some(zone))
                .map(|r| (r.key_name().to_string(), st.render_reservation(r)))
                .collect(),
            "ReservationList",
        ),
        "reservationBlocks.get" => Reply::One(st.reservation_block_json(&key, sub)?),
        "reservationBlocks.list" => {
            Reply::List(st.reservation_blocks(&key)?, "ReservationBlocksListResponse")
        }
        "reservationSubBlocks.get" => {
            let (b, s) = sub.split_once('/').unwrap_or((sub, ""));
            Reply::One(st.reservation_sub_block_json(&key, b, s)?)
        }
        "reservationSubBlocks.list" => {
            Reply::List(st.reservation_sub_blocks(&key, sub)?, "ReservationSubBlocksListResponse")
        }
        "futureReservations.get" => Reply::One(st.render_future_reservation(st.future_reservation(&key)?)),
        "futureReservations.list" => Reply::List(
            st.future_reservations_of(project, Some(zone))
                .map(|f| (f.key_name().to_string(), st.render_future_reservation(f)))
                .collect(),
            "FutureReservationsListResponse",
        ),
        "reservations.aggregatedList" => Reply::Aggregated(
            st.reservations_of(project, None)
                .filter(|r| !st.unreachable_zone(r.zone()))
                .map(|r| (format!("{} {}", r.zone(), r.key_name()), st.render_reservation(r)))
                .collect(),
            "reservations",
            "compute#reservationAggregatedList",
        ),
        "futureReservations.aggregatedList" => Reply::Aggregated(
            st.future_reservations_of(project, None)
                .filter(|f| !st.unreachable_zone(f.zone()))
                .map(|f| (format!("{} {}", f.zone(), f.key_name()), st.render_future_reservation(f)))
                .collect(),
            "futureReservations",
            "compute#futureReservationsAggregatedListResponse",
        ),
        other => return Err(ApiError::new(501, "notImplemented", format!("{other} is not simulated"))),
    })
}

/// One page of an aggregated list: items by `zones/Z` scope; unreachable zones listed in
/// `unreachables`.
pub(crate) fn aggregated(
    st: &State,
    project: &str,
    field: &str,
    kind: &str,
    pairs: Vec<(String, Value)>,
    next: Option<String>,
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
    if let Some(token) = next {
        out["nextPageToken"] = json!(token);
    }
    out
}
