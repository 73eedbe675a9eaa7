//! The control API for reserved capacity, under `/_sim/`: book and end reservations and calendar-mode
//! future reservations, say how many units are used outside the cluster, and read back how many VMs
//! consumed each reservation (now and at most).
//!
//! | call | body | effect |
//! |---|---|---|
//! | `POST /_sim/reservations` | `{"project": "p", "zone": "us-central1-a", "name": "r1", "count": 4, "machine_type": "a3-ultragpu-8g", "status"?: "READY", "specific_reservation_required"?: true, "delete_at"?: RFC 3339, "delete_in_seconds"?: N, "deployment_type"?: "DENSE", "scheduling_type"?: "GROUPED", "blocks"?: [{"name": "b1", "count": 2, "sub_blocks"?: [{"name": "s1", "count": 2}]}], "in_use_elsewhere"?: 0}` | a reservation (replaces one of that project, zone and name). `delete_in_seconds` is simulated time (divided by the time scale). Blocks' counts add up to `count`, sub-blocks' to their block's; a block without sub-blocks gets one, `{block}-sub-0`. `status` is one of CREATING, READY, UPDATING, DELETING, INVALID |
//! | `GET /_sim/reservations` | | `[{"project", "zone", "name", "url", "status", "count", "in_use_count", "in_use_elsewhere", "consuming_vms", "vms": [names], "max_consuming_vms", "machine_type", "delete_at", "delivered_by", "blocks"}]`: `consuming_vms` counts the VMs on it now, `max_consuming_vms` the most there ever were at once |
//! | `POST /_sim/reservations/{zone}/{name}` | `{"in_use_elsewhere"?: N, "status"?: "READY", "count"?: N}` | change it (count only without blocks): units used elsewhere taken or freed, a reservation that is not READY, one that shrank |
//! | `DELETE /_sim/reservations/{zone}/{name}` | | GCE deletes it now, as at its `deleteAtTime`: its RESERVATION_BOUND VMs (every VM, for one a calendar-mode future reservation delivered) are deleted and leave their MIG (targetSize drops); STANDARD VMs stay and consume nothing |
//! | `POST /_sim/future-reservations` | `{"project", "zone", "name", "machine_type", "total_count": 4, "start_time"? \| "starts_in_seconds"?, "end_time"? \| "duration_seconds"?, "reservation_name"?, "blocks"?, "deployment_type"?}` | a calendar-mode future reservation, APPROVED. `starts_in_seconds` (from now) and `duration_seconds` (from the start) are simulated time. At the start GCE delivers the reservation `reservation_name` (default: the future reservation's name), READY, `count` = `total_count`, with `deleteAtTime` = the end; at the end it deletes it and every VM on it |
//! | `GET /_sim/future-reservations` | | every future reservation as `futureReservations.get` shows it |
//! | `POST /_sim/future-reservations/{zone}/{name}/start` | | the window opens now (the next tick delivers the reservation) |
//! | `POST /_sim/future-reservations/{zone}/{name}/end` | | the window closes now (the next tick deletes the reservation and its VMs) |
//! | `DELETE /_sim/future-reservations/{zone}/{name}` | | forget it (a reservation it delivered stays until its `deleteAtTime`) |

use super::state::{FutureReservation, FutureSpec, Reservation, ReservationPatch, ReservationSpec};
use super::Shared;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use chrono::Utc;
use serde_json::{json, Value};
use std::sync::Arc;

pub fn routes() -> Router<Arc<Shared>> {
    Router::new()
        .route("/_sim/reservations", post(add_reservation).get(reservations))
        .route("/_sim/reservations/{zone}/{name}", post(patch_reservation).delete(end_reservation))
        .route("/_sim/future-reservations", post(add_future).get(futures))
        .route("/_sim/future-reservations/{zone}/{name}", axum::routing::delete(remove_future))
        .route("/_sim/future-reservations/{zone}/{name}/start", post(start_window))
        .route("/_sim/future-reservations/{zone}/{name}/end", post(end_window))
}

fn bad(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(json!({"error": message.into()}))).into_response()
}

fn parse<T: serde::de::DeserializeOwned>(body: &Bytes) -> Result<T, String> {
    serde_json::from_slice(body).map_err(|e| format!("invalid body: {e}"))
}

async fn add_reservation(State(sim): State<Arc<Shared>>, body: Bytes) -> Response {
    let spec: ReservationSpec = match parse(&body) {
        Ok(s) => s,
        Err(e) => return bad(StatusCode::BAD_REQUEST, e),
    };
    let mut st = sim.lock();
    match Reservation::from_spec(spec, Utc::now(), st.time_scale()) {
        Ok(r) => {
            let url = r.url();
            st.add_reservation(r);
            Json(json!({"url": url})).into_response()
        }
        Err(e) => bad(StatusCode::BAD_REQUEST, e),
    }
}

async fn reservations(State(sim): State<Arc<Shared>>) -> Json<Value> {
    Json(sim.lock().reservations_dump())
}

async fn patch_reservation(
    State(sim): State<Arc<Shared>>,
    Path((zone, name)): Path<(String, String)>,
    body: Bytes,
) -> Response {
    let patch: ReservationPatch = match parse(&body) {
        Ok(p) => p,
        Err(e) => return bad(StatusCode::BAD_REQUEST, e),
    };
    let mut st = sim.lock();
    let Some(key) = st.reservation_key(&zone, &name) else {
        return bad(StatusCode::NOT_FOUND, format!("no reservation {name} in {zone}"));
    };
    match st.patch_reservation(&key, patch) {
        Ok(()) => Json(json!({})).into_response(),
        Err(e) => bad(StatusCode::BAD_REQUEST, e),
    }
}

async fn end_reservation(
    State(sim): State<Arc<Shared>>,
    Path((zone, name)): Path<(String, String)>,
) -> Response {
    let effects = {
        let mut st = sim.lock();
        let Some(key) = st.reservation_key(&zone, &name) else {
            return bad(StatusCode::NOT_FOUND, format!("no reservation {name} in {zone}"));
        };
        st.end_reservation(&key, Utc::now())
    };
    sim.run_effects(effects);
    Json(json!({})).into_response()
}

async fn add_future(State(sim): State<Arc<Shared>>, body: Bytes) -> Response {
    let spec: FutureSpec = match parse(&body) {
        Ok(s) => s,
        Err(e) => return bad(StatusCode::BAD_REQUEST, e),
    };
    let mut st = sim.lock();
    match FutureReservation::from_spec(spec, Utc::now(), st.time_scale()) {
        Ok(f) => {
            let v = st.render_future_reservation(&f);
            st.add_future_reservation(f);
            Json(v).into_response()
        }
        Err(e) => bad(StatusCode::BAD_REQUEST, e),
    }
}

async fn futures(State(sim): State<Arc<Shared>>) -> Json<Value> {
    Json(sim.lock().future_reservations_dump())
}

async fn remove_future(
    State(sim): State<Arc<Shared>>,
    Path((zone, name)): Path<(String, String)>,
) -> Response {
    let mut st = sim.lock();
    match st.future_reservation_key(&zone, &name) {
        Some(key) if st.remove_future_reservation(&key) => Json(json!({})).into_response(),
        _ => bad(StatusCode::NOT_FOUND, format!("no future reservation {name} in {zone}")),
    }
}

async fn move_window(sim: &Shared, zone: &str, name: &str, start: bool) -> Response {
    let mut st = sim.lock();
    match st.future_reservation_key(zone, name) {
        Some(key) if st.move_window(&key, start, Utc::now()) => Json(json!({})).into_response(),
        _ => bad(StatusCode::NOT_FOUND, format!("no future reservation {name} in {zone}")),
    }
}

async fn start_window(
    State(sim): State<Arc<Shared>>,
    Path((zone, name)): Path<(String, String)>,
) -> Response {
    move_window(&sim, &zone, &name, true).await
}

async fn end_window(State(sim): State<Arc<Shared>>, Path((zone, name)): Path<(String, String)>) -> Response {
    move_window(&sim, &zone, &name, false).await
}
