//! Reserved capacity at the GCE edge: each `reservation` nodeset's reservation, its counts and its
//! window, read each pass into [`ObservedCapacity`] (docs/gce-facts.md, "Reserved capacity").
//!
//! The reads, all at once and only when a reservation nodeset is configured: one
//! `reservations.list` per zone (and project) holding a configured or delivered reservation; a
//! `reservationBlocks.get` / `reservationSubBlocks.get` for a nodeset on a block or sub-block (their
//! counts are the block's); and, for a calendar-mode nodeset, a `futureReservations.get` at most
//! every [`FUTURE_REREAD`] (the window and the delivered reservation change rarely; the
//! reservation's own counts come with the zone's list every pass). What does not answer leaves
//! its nodesets out of the observation (the planner decides nothing from their window) and is an
//! error of the pass.

use crate::config::{Config, FutureReservationRef, ReservationRef, ReservationSource};
use crate::gce::{self, parse_timestamp, GceError};
use crate::reconcile::types::ObservedCapacity;
use chrono::{DateTime, Utc};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

/// The fields of a reservation a pass reads.
pub const RESERVATION_FIELDS: &str = "items(name,status,specificReservation(count,inUseCount,\
instanceProperties/machineType),deleteAtTime),nextPageToken";

/// How long a future reservation read stands (its window and delivery), in seconds.
pub const FUTURE_REREAD: i64 = 60;

/// The future reservations read lately, kept between passes.
#[derive(Debug, Default)]
pub struct FutureReads {
    read: BTreeMap<String, (DateTime<Utc>, gce::reservations::FutureReservation)>,
}

impl FutureReads {
    /// The read of `url` that still stands at `now`.
    fn fresh(&self, url: &str, now: DateTime<Utc>) -> Option<gce::reservations::FutureReservation> {
        let (at, f) = self.read.get(url)?;
        let delivered = f.status.as_ref().is_some_and(|s| !s.auto_created_reservations.is_empty());
        let start = f.time_window.as_ref().and_then(|w| parse_timestamp(&w.start_time));
        // At the start, GCE delivers: read it again until the delivery shows.
        let due_for_delivery = !delivered && start.is_some_and(|s| now >= s);
        ((now - *at).num_seconds() < FUTURE_REREAD && !due_for_delivery).then(|| f.clone())
    }
}

/// The capacity of every reservation nodeset of `cfg`, and the errors of the reads that failed.
pub async fn observe_capacity(
    client: &gce::Client,
    cfg: &Config,
    futures: &Mutex<FutureReads>,
    now: DateTime<Utc>,
) -> (BTreeMap<String, ObservedCapacity>, Vec<String>) {
    let reserved: Vec<(&str, &ReservationSource)> = cfg
        .nodesets
        .iter()
        .filter_map(|n| Some((n.name.as_str(), &n.reservation.as_ref()?.source)))
        .collect();
    let mut errors = Vec::new();
    if reserved.is_empty() {
        return (BTreeMap::new(), errors);
    }
    // Calendar mode first: which reservation each booking delivered (or will).
    let mut booked: BTreeMap<String, gce::reservations::FutureReservation> = BTreeMap::new();
    let mut to_read: Vec<&FutureReservationRef> = Vec::new();
    for (_, src) in &reserved {
        if let ReservationSource::Future(f) = src {
            match futures.lock().expect("future reads").fresh(&f.url(), now) {
                Some(read) => {
                    booked.insert(f.url(), read);
                }
                None => to_read.push(f),
            }
        }
    }
    let reads = all(to_read.iter().map(|f| {
        let (client, f) = (client.clone(), (*f).clone());
        async move { (f.url(), client.get_future_reservation(&f.project, &f.zone, &f.name).await) }
    }))
    .await;
    for (url, read) in reads {
        match read {
            Ok(f) => {
                futures.lock().expect("future reads").read.insert(url.clone(), (now, f.clone()));
                booked.insert(url, f);
            }
            Err(e) if e.is_not_found() => {
                booked.insert(url, gce::reservations::FutureReservation::default());
            }
            Err(e) => errors.push(format!("reading future reservation {url}: {e}")),
        }
    }
    // One list per zone holding a reservation we consume; a get per block or sub-block.
    let zones: BTreeSet<(String, String)> = reserved
        .iter()
        .map(|(_, src)| match src {
            ReservationSource::Reservation(r) => (r.project.clone(), r.zone.clone()),
            ReservationSource::Future(f) => (f.project.clone(), f.zone.clone()),
        })
        .collect();
    let lists = all(zones.iter().map(|(project, zone)| {
        let (client, project, zone) = (client.clone(), project.clone(), zone.clone());
        async move {
            let listed = client.list_reservations(&project, &zone, None, Some(RESERVATION_FIELDS)).await;
            ((project, zone), listed)
        }
    }));
    let blocks = all(reserved.iter().filter_map(|(ns, src)| match src {
        ReservationSource::Reservation(r) if r.block.is_some() => {
            let (client, r, ns) = (client.clone(), r.clone(), ns.to_string());
            Some(async move { (ns, read_block(&client, &r).await) })
        }
        _ => None,
    }));
    let (lists, blocks) = tokio::join!(lists, blocks);
    let mut listed: BTreeMap<(String, String), Vec<gce::reservations::Reservation>> = BTreeMap::new();
    for (zone, list) in lists {
        match list {
            Ok(l) => {
                listed.insert(zone, l);
            }
            Err(e) => {
                errors.push(format!("listing reservations in zone {} of project {}: {e}", zone.1, zone.0))
            }
        }
    }
    let mut block_counts: BTreeMap<String, Result<gce::reservations::ReservationBlock, GceError>> =
        blocks.into_iter().collect();
    let mut out = BTreeMap::new();
    for (ns, src) in reserved {
        let c = match src {
            ReservationSource::Reservation(r) => {
                let Some(list) = listed.get(&(r.project.clone(), r.zone.clone())) else { continue };
                let block = block_counts.remove(ns);
                match block {
                    Some(Err(e)) if !e.is_not_found() => {
                        errors.push(format!("reading {}: {e}", r.url()));
                        continue;
                    }
                    block => reservation_capacity(r, list, block.map(|b| b.ok())),
                }
            }
            ReservationSource::Future(f) => {
                let Some(booking) = booked.get(&f.url()) else { continue };
                let Some(list) = listed.get(&(f.project.clone(), f.zone.clone())) else { continue };
                calendar_capacity(f, booking, list)
            }
        };
        out.insert(ns.to_string(), c);
    }
    (out, errors)
}

/// Runs `calls` at once and collects their answers (in no particular order).
async fn all<T, F>(calls: impl Iterator<Item = F>) -> Vec<T>
where
    F: std::future::Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let mut set = tokio::task::JoinSet::new();
    for c in calls {
        set.spawn(c);
    }
    let mut out = Vec::new();
    while let Some(joined) = set.join_next().await {
        if let Ok(v) = joined {
            out.push(v);
        }
    }
    out
}

async fn read_block(
    client: &gce::Client,
    r: &ReservationRef,
) -> Result<gce::reservations::ReservationBlock, GceError> {
    let block = r.block.as_deref().unwrap_or_default();
    match &r.sub_block {
        Some(s) => client.get_reservation_sub_block(&r.project, &r.zone, &r.name, block, s).await,
        None => client.get_reservation_block(&r.project, &r.zone, &r.name, block).await,
    }
}

/// A configured reservation (or block: `block` is its read, `Some(None)` when GCE has none such)
/// as the zone's list shows it. Pure.
pub fn reservation_capacity(
    r: &ReservationRef,
    list: &[gce::reservations::Reservation],
    block: Option<Option<gce::reservations::ReservationBlock>>,
) -> ObservedCapacity {
    let mut c = ObservedCapacity { reservation: Some(r.url()), ..Default::default() };
    let Some(found) = list.iter().find(|x| x.name == r.name) else {
        c.unusable =
            Some(format!("GCE has no reservation {} in zone {} (project {})", r.name, r.zone, r.project));
        return c;
    };
    c.window_end = parse_timestamp(&found.delete_at_time);
    if found.status != "READY" {
        c.unusable = Some(format!("reservation {} is {}, not READY", r.name, or_unset(&found.status)));
    }
    let specific = found.specific_reservation.clone().unwrap_or_default();
    (c.count, c.in_use) = (to_u32(specific.count), to_u32(specific.in_use_count));
    match block {
        None => {}
        Some(None) => {
            c.unusable = Some(format!("reservation {} has no {}", r.name, block_words(r)));
        }
        Some(Some(b)) => {
            (c.count, c.in_use) = (to_u32(b.count), to_u32(b.in_use_count));
            if b.status != "READY" && c.unusable.is_none() {
                c.unusable = Some(format!(
                    "{} of reservation {} is {}, not READY",
                    block_words(r),
                    r.name,
                    or_unset(&b.status)
                ));
            }
        }
    }
    c
}

/// A calendar-mode booking: its window, and the reservation it delivered as the zone's list shows
/// it. Pure.
pub fn calendar_capacity(
    f: &FutureReservationRef,
    booking: &gce::reservations::FutureReservation,
    list: &[gce::reservations::Reservation],
) -> ObservedCapacity {
    let mut c = ObservedCapacity::default();
    if booking.name.is_empty() {
        c.unusable = Some(format!(
            "GCE has no future reservation {} in zone {} (project {})",
            f.name, f.zone, f.project
        ));
        return c;
    }
    let window = booking.time_window.clone().unwrap_or_default();
    let start = parse_timestamp(&window.start_time);
    c.window_start = start;
    c.window_end = parse_timestamp(&window.end_time)
        .or_else(|| Some(start? + chrono::Duration::seconds(window.duration.as_ref()?.seconds)));
    c.count = to_u32(booking.specific_sku_properties.as_ref().map_or(0, |s| s.total_count));
    let status = booking.status.clone().unwrap_or_default();
    if matches!(status.procurement_status.as_str(), "FAILED" | "CANCELLED" | "DECLINED") {
        c.unusable = Some(format!("future reservation {} is {}", f.name, status.procurement_status));
        return c;
    }
    let delivered = status
        .auto_created_reservations
        .first()
        .map(|u| gce::last_segment(u).to_string())
        .or_else(|| (!booking.reservation_name.is_empty()).then(|| booking.reservation_name.clone()));
    let Some(name) = delivered else {
        c.unusable = Some(format!("future reservation {} has delivered no reservation yet", f.name));
        return c;
    };
    let r = ReservationRef {
        project: f.project.clone(),
        zone: f.zone.clone(),
        name,
        block: None,
        sub_block: None,
    };
    match list.iter().find(|x| x.name == r.name) {
        Some(_) => {
            let mut delivered = reservation_capacity(&r, list, None);
            // The booking's window stands; the reservation's own end, if set, is the same.
            delivered.window_start = c.window_start;
            delivered.window_end = c.window_end.or(delivered.window_end);
            delivered
        }
        None => {
            c.reservation = Some(r.url());
            c.unusable = Some(format!(
                "future reservation {} has not delivered reservation {} yet (procurement status {})",
                f.name,
                r.name,
                or_unset(&status.procurement_status)
            ));
            c
        }
    }
}

fn block_words(r: &ReservationRef) -> String {
    match (&r.block, &r.sub_block) {
        (Some(b), Some(s)) => format!("sub-block {s} of block {b}"),
        (Some(b), None) => format!("block {b}"),
        _ => "block".into(),
    }
}

fn or_unset(s: &str) -> &str {
    if s.is_empty() {
        "unset"
    } else {
        s
    }
}

fn to_u32(n: i64) -> u32 {
    u32::try_from(n.max(0)).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn listed(v: serde_json::Value) -> Vec<gce::reservations::Reservation> {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn a_reservation_reads_as_its_counts_window_and_what_makes_it_unusable() {
        let r =
            crate::config::parse_reservation_url("projects/p/zones/us-central1-a/reservations/res").unwrap();
        let ready = listed(json!([{"name": "res", "status": "READY", "deleteAtTime": "2026-12-01T00:00:00Z",
            "specificReservation": {"count": "4", "inUseCount": "2"}}]));
        let c = reservation_capacity(&r, &ready, None);
        assert_eq!((c.count, c.in_use, c.free(), c.unusable.clone()), (4, 2, 2, None));
        assert_eq!(c.window_end, parse_timestamp("2026-12-01T00:00:00Z"));
        let c = reservation_capacity(&r, &[], None);
        assert_eq!(
            c.unusable.as_deref(),
            Some("GCE has no reservation res in zone us-central1-a (project p)")
        );
        let creating = listed(json!([{"name": "res", "status": "CREATING"}]));
        assert_eq!(
            reservation_capacity(&r, &creating, None).unusable.as_deref(),
            Some("reservation res is CREATING, not READY")
        );
        // A block: its own counts; a block GCE does not have is unusable.
        let b = crate::config::parse_reservation_url(
            "projects/p/zones/us-central1-a/reservations/res/reservationBlocks/b1",
        )
        .unwrap();
        let block = gce::reservations::ReservationBlock {
            name: "b1".into(),
            status: "READY".into(),
            count: 18,
            in_use_count: 3,
        };
        let c = reservation_capacity(&b, &ready, Some(Some(block)));
        assert_eq!((c.count, c.in_use, c.unusable), (18, 3, None));
        let c = reservation_capacity(&b, &ready, Some(None));
        assert_eq!(c.unusable.as_deref(), Some("reservation res has no block b1"));
    }

    #[test]
    fn a_booking_reads_as_its_window_and_the_reservation_it_delivered() {
        let f = crate::config::parse_future_reservation_url(
            "projects/p/zones/us-central1-a/futureReservations/fr",
        )
        .unwrap();
        let booking = |status: serde_json::Value| -> gce::reservations::FutureReservation {
            serde_json::from_value(
                json!({"name": "fr", "reservationMode": "CALENDAR", "reservationName": "fr-res",
                "timeWindow": {"startTime": "2026-12-01T00:00:00Z", "endTime": "2026-12-03T00:00:00Z"},
                "specificSkuProperties": {"totalCount": "4"}, "status": status}),
            )
            .unwrap()
        };
        let before = calendar_capacity(&f, &booking(json!({"procurementStatus": "APPROVED"})), &[]);
        assert_eq!(before.window_start, parse_timestamp("2026-12-01T00:00:00Z"));
        assert_eq!(before.window_end, parse_timestamp("2026-12-03T00:00:00Z"));
        assert!(before
            .unusable
            .as_deref()
            .is_some_and(|u| u.contains("has not delivered reservation fr-res yet")));
        let delivered = listed(
            json!([{"name": "fr-res", "status": "READY", "specificReservation": {"count": "4", "inUseCount": "1"}}]),
        );
        let open = calendar_capacity(
            &f,
            &booking(json!({"procurementStatus": "FULFILLED",
                "autoCreatedReservations": ["https://www.googleapis.com/compute/v1/projects/p/zones/us-central1-a/reservations/fr-res"]})),
            &delivered,
        );
        assert_eq!((open.count, open.in_use, open.unusable.clone()), (4, 1, None));
        assert_eq!(open.reservation.as_deref(), Some("projects/p/zones/us-central1-a/reservations/fr-res"));
        assert_eq!(open.window_end, parse_timestamp("2026-12-03T00:00:00Z"));
        let failed = calendar_capacity(&f, &booking(json!({"procurementStatus": "CANCELLED"})), &[]);
        assert_eq!(failed.unusable.as_deref(), Some("future reservation fr is CANCELLED"));
        let none = calendar_capacity(&f, &Default::default(), &[]);
        assert!(none.unusable.as_deref().is_some_and(|u| u.starts_with("GCE has no future reservation fr")));
    }
}
