//! Future reservations in calendar mode (DWS Calendar): `futureReservations.get/list/aggregatedList`
//! and their window.
//!
//! Booked through the control API, approved at once (`procurementStatus` APPROVED, no reservation
//! yet). At the window's `startTime` GCE delivers the reservation: named `reservationName` (the
//! future reservation's own name when none is given), READY, `count` = `totalCount`, the booked
//! machine type and blocks; the future reservation turns FULFILLED with `fulfilledCount` and
//! `autoCreatedReservations` = [its URL]. At `endTime` (`autoDeleteAutoCreatedReservations`, the
//! calendar-mode default) GCE deletes the reservation and every VM on it
//! ([`State::end_reservation`]); the future reservation stays FULFILLED, its list of auto-created
//! reservations empty. Times come as RFC 3339 or as simulated seconds from now, divided by the
//! simulator's time scale, so a test can book a window that opens in "an hour" and see it open in
//! a second.

use super::reservation::{BlockSpec, ResKey, Reservation, ReservationSpec};
use super::*;
use serde::Deserialize;

/// `POST /_sim/future-reservations`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FutureSpec {
    pub project: String,
    pub zone: String,
    pub name: String,
    pub machine_type: String,
    pub total_count: i64,
    #[serde(default)]
    pub start_time: Option<DateTime<Utc>>,
    #[serde(default)]
    pub end_time: Option<DateTime<Utc>>,
    /// Simulated seconds from now until the window opens (divided by the time scale).
    #[serde(default)]
    pub starts_in_seconds: Option<f64>,
    /// Simulated seconds the window lasts (divided by the time scale).
    #[serde(default)]
    pub duration_seconds: Option<f64>,
    #[serde(default)]
    pub reservation_name: Option<String>,
    #[serde(default)]
    pub blocks: Vec<BlockSpec>,
    #[serde(default)]
    pub deployment_type: Option<String>,
}

#[derive(Clone, Debug)]
pub struct FutureReservation {
    pub(super) key: ResKey,
    pub(super) id: u64,
    pub(super) created: DateTime<Utc>,
    pub(super) machine_type: String,
    pub(super) total_count: i64,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub(super) reservation_name: String,
    pub(super) explicit_name: bool,
    pub(super) blocks: Vec<BlockSpec>,
    pub(super) deployment_type: Option<String>,
    /// The window opened and the reservation was delivered.
    pub(super) delivered: bool,
    /// The window closed.
    pub(super) ended: bool,
}

fn fr_path((p, z, n): &ResKey) -> String {
    format!("projects/{p}/zones/{z}/futureReservations/{n}")
}

impl FutureReservation {
    pub fn from_spec(
        s: FutureSpec,
        now: DateTime<Utc>,
        time_scale: f64,
    ) -> Result<FutureReservation, String> {
        if !is_rfc1035(&s.name) {
            return Err(format!("name {:?} is not an RFC 1035 name", s.name));
        }
        if s.total_count < 1 {
            return Err("total_count must be >= 1".into());
        }
        let scaled = |secs: f64, from: DateTime<Utc>| -> Result<DateTime<Utc>, String> {
            if !(secs.is_finite() && secs >= 0.0) {
                return Err("starts_in_seconds and duration_seconds must be finite numbers >= 0".into());
            }
            Ok(later(from, (secs * 1000.0 / time_scale) as i64))
        };
        let start = match (s.start_time, s.starts_in_seconds) {
            (Some(t), None) => t,
            (None, Some(secs)) => scaled(secs, now)?,
            _ => return Err("give exactly one of start_time and starts_in_seconds".into()),
        };
        let end = match (s.end_time, s.duration_seconds) {
            (Some(t), None) => t,
            (None, Some(secs)) => scaled(secs, start)?,
            _ => return Err("give exactly one of end_time and duration_seconds".into()),
        };
        if end <= start {
            return Err("the window must end after it starts".into());
        }
        let explicit_name = s.reservation_name.is_some();
        let reservation_name = s.reservation_name.unwrap_or_else(|| s.name.clone());
        if !is_rfc1035(&reservation_name) {
            return Err(format!("reservation_name {reservation_name:?} is not an RFC 1035 name"));
        }
        // The blocks are checked now, as the reservation they will make.
        let probe = ReservationSpec {
            project: s.project.clone(),
            zone: s.zone.clone(),
            name: reservation_name.clone(),
            count: s.total_count,
            machine_type: s.machine_type.clone(),
            status: None,
            specific_reservation_required: None,
            delete_at: None,
            delete_in_seconds: None,
            deployment_type: None,
            scheduling_type: None,
            blocks: s.blocks.clone(),
            in_use_elsewhere: 0,
        };
        let blocks = Reservation::from_spec(probe, now, time_scale)?.blocks;
        Ok(FutureReservation {
            key: (s.project, s.zone, s.name),
            id: new_id(),
            created: now,
            machine_type: last_segment(&s.machine_type).to_string(),
            total_count: s.total_count,
            start,
            end,
            reservation_name,
            explicit_name,
            blocks,
            deployment_type: s.deployment_type,
            delivered: false,
            ended: false,
        })
    }

    pub fn key_name(&self) -> &str {
        &self.key.2
    }

    pub fn zone(&self) -> &str {
        &self.key.1
    }

    /// The key of the reservation it delivers.
    pub(super) fn reservation_key(&self) -> ResKey {
        (self.key.0.clone(), self.key.1.clone(), self.reservation_name.clone())
    }
}

impl State {
    pub fn add_future_reservation(&mut self, f: FutureReservation) {
        self.future_reservations.insert(f.key.clone(), f);
    }

    pub fn future_reservation_key(&self, zone: &str, name: &str) -> Option<ResKey> {
        self.future_reservations.keys().find(|k| k.1 == zone && k.2 == name).cloned()
    }

    /// Control API: the window opens (`start`) or closes (`end`) now; the next tick acts on it.
    pub fn move_window(&mut self, key: &ResKey, start: bool, now: DateTime<Utc>) -> bool {
        let Some(f) = self.future_reservations.get_mut(key) else { return false };
        if start {
            f.start = now;
            f.end = f.end.max(now + ms(1));
        } else {
            f.start = f.start.min(now);
            f.end = now;
        }
        true
    }

    /// Control API: forget a future reservation (its delivered reservation stays until its end).
    pub fn remove_future_reservation(&mut self, key: &ResKey) -> bool {
        self.future_reservations.remove(key).is_some()
    }

    /// Opens and closes windows that are due.
    pub(super) fn advance_windows(&mut self, now: DateTime<Utc>, effects: &mut Vec<Effect>) {
        let due: Vec<ResKey> = self
            .future_reservations
            .values()
            .filter(|f| (!f.delivered && now >= f.start) || (!f.ended && now >= f.end))
            .map(|f| f.key.clone())
            .collect();
        for k in due {
            let f = self.future_reservations.get(&k).expect("listed above").clone();
            if !f.delivered && now < f.end {
                let mut r = Reservation::from_spec(
                    ReservationSpec {
                        project: f.key.0.clone(),
                        zone: f.key.1.clone(),
                        name: f.reservation_name.clone(),
                        count: f.total_count,
                        machine_type: f.machine_type.clone(),
                        status: None,
                        specific_reservation_required: Some(true),
                        delete_at: Some(f.end),
                        delete_in_seconds: None,
                        deployment_type: f.deployment_type.clone(),
                        scheduling_type: None,
                        blocks: f.blocks.clone(),
                        in_use_elsewhere: 0,
                    },
                    now,
                    self.time_scale,
                )
                .expect("checked when booked");
                r.delivered_by = Some(f.key.2.clone());
                self.add_reservation(r);
            }
            let fm = self.future_reservations.get_mut(&k).expect("listed above");
            fm.delivered = true;
            if now >= fm.end && !fm.ended {
                fm.ended = true;
                let rk = fm.reservation_key();
                if self.reservations.get(&rk).is_some_and(|r| r.delivered_by.as_deref() == Some(k.2.as_str()))
                {
                    effects.extend(self.end_reservation(&rk, now));
                }
            }
        }
    }

    pub fn future_reservation(&self, key: &ResKey) -> Result<&FutureReservation, ApiError> {
        self.future_reservations.get(key).ok_or_else(|| ApiError::not_found(&fr_path(key)))
    }

    pub fn future_reservations_of<'a>(
        &'a self,
        project: &'a str,
        zone: Option<&'a str>,
    ) -> impl Iterator<Item = &'a FutureReservation> + 'a {
        self.future_reservations
            .values()
            .filter(move |f| f.key.0 == project && zone.is_none_or(|z| z == f.key.1))
    }

    /// `futureReservations.get` (and the items of the lists).
    pub fn render_future_reservation(&self, f: &FutureReservation) -> Value {
        let url = format!("{GCE_BASE}{}", fr_path(&f.key));
        let live = self.reservations.get(&f.reservation_key()).filter(|_| f.delivered && !f.ended);
        let mut status = json!({"procurementStatus": if f.delivered { "FULFILLED" } else { "APPROVED" }});
        if f.delivered {
            status["fulfilledCount"] = json!(f.total_count.to_string());
            status["autoCreatedReservations"] = json!(live.map(|r| vec![r.url()]).unwrap_or_default());
        }
        let mut o = json!({
            "kind": "compute#futureReservation",
            "id": f.id.to_string(),
            "creationTimestamp": ts(f.created),
            "name": f.key.2,
            "zone": format!("{GCE_BASE}projects/{}/zones/{}", f.key.0, f.key.1),
            "selfLink": url,
            "selfLinkWithId": format!("{GCE_BASE}projects/{}/zones/{}/futureReservations/{}", f.key.0, f.key.1, f.id),
            "reservationMode": "CALENDAR",
            "planningStatus": "SUBMITTED",
            "timeWindow": {"startTime": ts(f.start), "endTime": ts(f.end)},
            "specificSkuProperties": {
                "totalCount": f.total_count.to_string(),
                "instanceProperties": {"machineType": f.machine_type},
            },
            "specificReservationRequired": true,
            "autoDeleteAutoCreatedReservations": true,
            "status": status,
        });
        if f.explicit_name {
            o["reservationName"] = json!(f.reservation_name);
        }
        if let Some(d) = &f.deployment_type {
            o["deploymentType"] = json!(d);
        }
        o
    }

    /// `GET /_sim/future-reservations`.
    pub fn future_reservations_dump(&self) -> Value {
        json!(self
            .future_reservations
            .values()
            .map(|f| self.render_future_reservation(f))
            .collect::<Vec<_>>())
    }
}
