//! Decoding rows into the model's types, and the column lists the reads select.

use super::{from_ms, opt_ms, Result};
use crate::model::*;
use sqlx::sqlite::SqliteRow;
use sqlx::Row;

pub(super) const NODE_COLUMNS: &str =
    "name, nodeset, idx, is_static, state, job_id, request_id, mig, vm_status, \
                            termination_time, last_error, reservation, state_since, topology, maintenance";
pub(super) const REQUEST_COLUMNS: &str =
    "id, nodeset, job_id, tag, mig, name, nodes, run_duration, phase, gce_state, \
                               created_at, updated_at, last_error, zone_choice, zone";
pub(super) const MIG_COLUMNS: &str = "name, nodeset, region, target_size, state, created_at, empty_since";
pub(super) const OUTBOX_COLUMNS: &str =
    "id, request_id, kind, target, payload, state, attempts, created_at, updated_at, last_error";

pub(super) fn node_from_row(r: &SqliteRow) -> Result<Node> {
    Ok(Node {
        name: r.try_get("name")?,
        nodeset: r.try_get("nodeset")?,
        index: r.try_get::<i64, _>("idx")? as u32,
        is_static: r.try_get("is_static")?,
        state: r.try_get::<String, _>("state")?.parse()?,
        job_id: r.try_get::<Option<i64>, _>("job_id")?.map(|j| j as u32),
        request_id: r.try_get("request_id")?,
        mig: r.try_get("mig")?,
        vm_status: r.try_get::<Option<String>, _>("vm_status")?.map(VmStatus::from),
        termination_time: opt_ms(r.try_get("termination_time")?),
        last_error: r.try_get("last_error")?,
        reservation: r.try_get("reservation")?,
        state_since: from_ms(r.try_get("state_since")?),
        topology: r.try_get("topology")?,
        maintenance: maintenance_from_text(r.try_get("maintenance")?)?,
    })
}

/// A `nodes` row as `json_array(...)` in [`Store::nodes`] spells it, in `NODE_COLUMNS` order.
pub(super) type NodeJsonRow = (
    String,
    String,
    i64,
    i64,
    String,
    Option<i64>,
    Option<i64>,
    Option<String>,
    Option<String>,
    Option<i64>,
    Option<String>,
    Option<String>,
    i64,
    Option<String>,
    Option<String>,
);

pub(super) fn node_from_json(r: NodeJsonRow) -> Result<Node> {
    let (
        name,
        nodeset,
        idx,
        is_static,
        state,
        job_id,
        request_id,
        mig,
        vm_status,
        term,
        last_error,
        res,
        since,
        topology,
        maintenance,
    ) = r;
    Ok(Node {
        name,
        nodeset,
        index: idx as u32,
        is_static: is_static != 0,
        state: state.parse()?,
        job_id: job_id.map(|j| j as u32),
        request_id,
        mig,
        vm_status: vm_status.map(VmStatus::from),
        termination_time: opt_ms(term),
        last_error,
        reservation: res,
        state_since: from_ms(since),
        topology,
        maintenance: maintenance_from_text(maintenance)?,
    })
}

/// The `maintenance` column: GCE's `upcomingMaintenance` JSON, or NULL (most nodes: nothing parsed).
fn maintenance_from_text(text: Option<String>) -> Result<Option<Box<Maintenance>>> {
    Ok(match text {
        Some(t) => Some(serde_json::from_str(&t)?),
        None => None,
    })
}

/// The `maintenance` column of a node: NULL (most nodes: nothing allocated), or its JSON.
pub(super) fn maintenance_text(m: Option<&Maintenance>) -> Option<String> {
    m.and_then(|m| serde_json::to_string(m).ok())
}

pub(super) fn request_from_row(r: &SqliteRow) -> Result<Request> {
    Ok(Request {
        id: r.try_get("id")?,
        nodeset: r.try_get("nodeset")?,
        job_id: r.try_get::<Option<i64>, _>("job_id")?.map(|j| j as u32),
        tag: r.try_get("tag")?,
        mig: r.try_get("mig")?,
        name: r.try_get("name")?,
        nodes: serde_json::from_str(&r.try_get::<String, _>("nodes")?)?,
        run_duration: r.try_get::<i64, _>("run_duration")? as u64,
        phase: r.try_get::<String, _>("phase")?.parse()?,
        gce_state: r.try_get::<Option<String>, _>("gce_state")?.map(GceRequestState::from),
        created_at: from_ms(r.try_get("created_at")?),
        updated_at: from_ms(r.try_get("updated_at")?),
        last_error: r.try_get("last_error")?,
        zone_choice: r
            .try_get::<Option<String>, _>("zone_choice")?
            .map(|j| serde_json::from_str(&j))
            .transpose()?,
        zone: r.try_get("zone")?,
    })
}

pub(super) fn mig_from_row(r: &SqliteRow) -> Result<Mig> {
    Ok(Mig {
        name: r.try_get("name")?,
        nodeset: r.try_get("nodeset")?,
        region: r.try_get("region")?,
        target_size: r.try_get::<i64, _>("target_size")? as u32,
        state: r.try_get::<String, _>("state")?.parse()?,
        created_at: from_ms(r.try_get("created_at")?),
        empty_since: opt_ms(r.try_get("empty_since")?),
    })
}

pub(super) fn outbox_from_row(r: &SqliteRow) -> Result<OutboxEntry> {
    Ok(OutboxEntry {
        id: r.try_get("id")?,
        request_id: r.try_get("request_id")?,
        kind: r.try_get::<String, _>("kind")?.parse()?,
        target: r.try_get("target")?,
        payload: r.try_get::<String, _>("payload")?,
        state: r.try_get::<String, _>("state")?.parse()?,
        attempts: r.try_get::<i64, _>("attempts")? as u32,
        created_at: from_ms(r.try_get("created_at")?),
        updated_at: from_ms(r.try_get("updated_at")?),
        last_error: r.try_get("last_error")?,
    })
}

pub(super) fn event_from_row(r: &SqliteRow) -> Result<Event> {
    Ok(Event {
        id: r.try_get("id")?,
        time: from_ms(r.try_get("time")?),
        kind: r.try_get("kind")?,
        nodes: r.try_get("nodes")?,
        message: r.try_get("message")?,
        count: r.try_get("count")?,
    })
}

pub(super) fn inbox_from_row(r: &SqliteRow) -> Result<InboxEntry> {
    Ok(InboxEntry {
        id: r.try_get("id")?,
        received_at: from_ms(r.try_get("received_at")?),
        kind: r.try_get::<String, _>("kind")?.parse()?,
        hostlist: r.try_get("hostlist")?,
        jobs: serde_json::from_str(&r.try_get::<String, _>("jobs")?)?,
    })
}
