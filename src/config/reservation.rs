//! `[nodeset.reservation]`: the reserved capacity a `provisioning_model = "reservation"` nodeset
//! consumes (a reservation, one block or sub-block of it, or the reservation a DWS Calendar-mode
//! future reservation delivers): types and the checks the file alone can make. Whether GCE has it,
//! and whether the template consumes exactly it, is checked online (`check-config --online`).

use std::fmt;

/// The least and the default `eol_grace`, seconds.
pub const DEFAULT_EOL_GRACE: u64 = 600;

/// `[nodeset.reservation]`, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReservedCapacity {
    pub source: ReservationSource,
    /// Seconds before the window's end from which no job starts that would outlive it.
    pub eol_grace: u64,
}

/// What the nodeset consumes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReservationSource {
    /// `name`: a reservation, or one block or sub-block of it; its window, if any, is its
    /// `deleteAtTime`.
    Reservation(ReservationRef),
    /// `future_reservation`: DWS Calendar mode. Its `timeWindow` is the window; the reservation it
    /// delivers at the window's start (`status.autoCreatedReservations`) is what the VMs consume.
    Future(FutureReservationRef),
}

impl ReservationSource {
    /// The zone the capacity is in.
    pub fn zone(&self) -> &str {
        match self {
            ReservationSource::Reservation(r) => &r.zone,
            ReservationSource::Future(f) => &f.zone,
        }
    }

    /// The URL as the config names it (relative).
    pub fn url(&self) -> String {
        match self {
            ReservationSource::Reservation(r) => r.url(),
            ReservationSource::Future(f) => f.url(),
        }
    }
}

/// `projects/P/zones/Z/reservations/R[/reservationBlocks/B[/reservationSubBlocks/S]]`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ReservationRef {
    pub project: String,
    pub zone: String,
    pub name: String,
    pub block: Option<String>,
    pub sub_block: Option<String>,
}

impl ReservationRef {
    /// The relative URL, zone included.
    pub fn url(&self) -> String {
        format!("projects/{}/zones/{}/reservations/{}{}", self.project, self.zone, self.name, self.suffix())
    }

    /// The value a template's `reservationAffinity` names it by (GCE's form, which has no zone:
    /// `projects/P/reservations/R[/reservationBlocks/B[/reservationSubBlocks/S]]`).
    pub fn affinity_value(&self) -> String {
        format!("projects/{}/reservations/{}{}", self.project, self.name, self.suffix())
    }

    fn suffix(&self) -> String {
        match (&self.block, &self.sub_block) {
            (Some(b), Some(s)) => format!("/reservationBlocks/{b}/reservationSubBlocks/{s}"),
            (Some(b), None) => format!("/reservationBlocks/{b}"),
            _ => String::new(),
        }
    }

    /// Whether a `reservationAffinity` value names exactly this reservation (or block, or
    /// sub-block). GCE takes the bare name for a reservation of the template's own project, and
    /// `projects/P/reservations/R...` for any (docs/gce-facts.md, "Reserved capacity").
    pub fn is_named_by(&self, value: &str) -> bool {
        let value = strip_api_prefix(value);
        value == self.affinity_value() || (self.block.is_none() && value == self.name)
    }
}

impl fmt::Display for ReservationRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.url())
    }
}

/// `projects/P/zones/Z/futureReservations/F`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FutureReservationRef {
    pub project: String,
    pub zone: String,
    pub name: String,
}

impl FutureReservationRef {
    pub fn url(&self) -> String {
        format!("projects/{}/zones/{}/futureReservations/{}", self.project, self.zone, self.name)
    }
}

impl fmt::Display for FutureReservationRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.url())
    }
}

/// Which key of `[nodeset.reservation]` a problem is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Field {
    /// The table itself.
    Table,
    Name,
    FutureReservation,
    EolGrace,
}

impl Field {
    pub(super) fn key(self) -> &'static str {
        match self {
            Field::Table => "reservation",
            Field::Name => "reservation.name",
            Field::FutureReservation => "reservation.future_reservation",
            Field::EolGrace => "reservation.eol_grace",
        }
    }
}

/// The most `eol_grace` may be: a day.
pub const MAX_EOL_GRACE: u64 = 86_400;

/// `[nodeset.reservation]` of a nodeset whose zones are `zones`: exactly one of `name` and
/// `future_reservation`, in a form GCE uses, in the nodeset's one zone (a reservation is zonal: its
/// VMs can only be made there).
pub(super) fn resolve(
    name: Option<String>,
    future: Option<String>,
    eol_grace: Option<u64>,
    zones: &[String],
) -> (Option<ReservedCapacity>, Vec<(Field, String)>) {
    let mut problems = Vec::new();
    let source = match (name, future) {
        (Some(_), Some(_)) => {
            problems.push((
                Field::Name,
                "is given with future_reservation: a nodeset consumes one reservation (name) or the one a \
                 calendar-mode future reservation delivers (future_reservation), not both"
                    .to_string(),
            ));
            None
        }
        (None, None) => {
            problems.push((
                Field::Table,
                "needs name (a reservation or one of its blocks) or future_reservation".into(),
            ));
            None
        }
        (Some(n), None) => match parse_reservation_url(&n) {
            Ok(r) => Some(ReservationSource::Reservation(r)),
            Err(why) => {
                problems.push((Field::Name, why));
                None
            }
        },
        (None, Some(f)) => match parse_future_reservation_url(&f) {
            Ok(r) => Some(ReservationSource::Future(r)),
            Err(why) => {
                problems.push((Field::FutureReservation, why));
                None
            }
        },
    };
    let eol_grace = eol_grace.unwrap_or(DEFAULT_EOL_GRACE);
    if eol_grace > MAX_EOL_GRACE {
        problems.push((Field::EolGrace, format!("{eol_grace} is above {MAX_EOL_GRACE} (a day)")));
    }
    if let Some(src) = &source {
        let field = match src {
            ReservationSource::Reservation(_) => Field::Name,
            ReservationSource::Future(_) => Field::FutureReservation,
        };
        if !zones.is_empty() && zones != [src.zone().to_string()] {
            problems.push((
                field,
                format!(
                    "is in zone {}, so the nodeset's VMs can only be made there: set zones = [\"{}\"] \
                     (they are {zones:?})",
                    src.zone(),
                    src.zone()
                ),
            ));
        }
    }
    (source.map(|source| ReservedCapacity { source, eol_grace }), problems)
}

fn strip_api_prefix(s: &str) -> &str {
    s.strip_prefix("https://www.googleapis.com/compute/v1/")
        .or_else(|| s.strip_prefix("https://compute.googleapis.com/compute/v1/"))
        .unwrap_or(s)
}

/// `us-central1-a`: a region, '-', a letter.
fn is_zone(s: &str) -> bool {
    s.rsplit_once('-').is_some_and(|(region, z)| {
        super::forms::is_region(region) && z.len() == 1 && z.chars().all(|c| c.is_ascii_lowercase())
    })
}

/// `name`: a reservation's URL, or one of its blocks or sub-blocks (relative or full URL).
pub fn parse_reservation_url(s: &str) -> Result<ReservationRef, String> {
    let form = "must be projects/P/zones/Z/reservations/R, optionally followed by /reservationBlocks/B \
                and /reservationSubBlocks/S";
    let parts: Vec<&str> = strip_api_prefix(s).split('/').collect();
    let (project, zone, name, block, sub_block) = match parts.as_slice() {
        ["projects", p, "zones", z, "reservations", r] => (*p, *z, *r, None, None),
        ["projects", p, "zones", z, "reservations", r, "reservationBlocks", b] => {
            (*p, *z, *r, Some(*b), None)
        }
        ["projects", p, "zones", z, "reservations", r, "reservationBlocks", b, "reservationSubBlocks", sb] => {
            (*p, *z, *r, Some(*b), Some(*sb))
        }
        _ => return Err(format!("{s:?} {form}")),
    };
    check_parts(s, project, zone, &[name, block.unwrap_or("b"), sub_block.unwrap_or("s")])?;
    Ok(ReservationRef {
        project: project.into(),
        zone: zone.into(),
        name: name.into(),
        block: block.map(Into::into),
        sub_block: sub_block.map(Into::into),
    })
}

/// `future_reservation`: a future reservation's URL (relative or full).
pub fn parse_future_reservation_url(s: &str) -> Result<FutureReservationRef, String> {
    match strip_api_prefix(s).split('/').collect::<Vec<_>>().as_slice() {
        ["projects", p, "zones", z, "futureReservations", f] => {
            check_parts(s, p, z, &[f])?;
            Ok(FutureReservationRef { project: p.to_string(), zone: z.to_string(), name: f.to_string() })
        }
        _ => Err(format!("{s:?} must be projects/P/zones/Z/futureReservations/F")),
    }
}

fn check_parts(s: &str, project: &str, zone: &str, names: &[&str]) -> Result<(), String> {
    if !super::forms::is_project_id(project) {
        return Err(format!("{s:?} names project {project:?}, which is not a project id"));
    }
    if !is_zone(zone) {
        return Err(format!("{s:?} names zone {zone:?}, which is not a zone (like us-central1-a)"));
    }
    if let Some(bad) = names.iter().find(|n| !super::forms::is_rfc1035(n)) {
        return Err(format!(
            "{s:?}: {bad:?} is not a GCE resource name (lowercase letters, digits, '-', at most 63)"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservation_urls_parse_in_every_form_gce_uses() {
        let r = parse_reservation_url("projects/p1/zones/us-central1-a/reservations/res").unwrap();
        assert_eq!((r.block.as_deref(), r.sub_block.as_deref()), (None, None));
        assert_eq!(r.affinity_value(), "projects/p1/reservations/res");
        assert!(r.is_named_by("res") && r.is_named_by("projects/p1/reservations/res"));
        assert!(r.is_named_by("https://www.googleapis.com/compute/v1/projects/p1/reservations/res"));
        assert!(!r.is_named_by("projects/p2/reservations/res") && !r.is_named_by("other"));
        let b = parse_reservation_url(
            "https://compute.googleapis.com/compute/v1/projects/p1/zones/us-central1-a/reservations/res/reservationBlocks/b1",
        )
        .unwrap();
        assert_eq!(b.url(), "projects/p1/zones/us-central1-a/reservations/res/reservationBlocks/b1");
        assert!(b.is_named_by("projects/p1/reservations/res/reservationBlocks/b1"));
        assert!(!b.is_named_by("res"), "a block is not the whole reservation");
        let s = parse_reservation_url(
            "projects/p1/zones/us-central1-a/reservations/res/reservationBlocks/b1/reservationSubBlocks/s2",
        )
        .unwrap();
        assert_eq!(
            s.affinity_value(),
            "projects/p1/reservations/res/reservationBlocks/b1/reservationSubBlocks/s2"
        );
        for bad in [
            "res",
            "projects/p1/reservations/res",
            "projects/p1/zones/us-central1/reservations/res",
            "projects/p1/zones/us-central1-a/reservations/Res",
            "projects/p1/zones/us-central1-a/reservations/res/reservationSubBlocks/s",
            "projects/P!/zones/us-central1-a/reservations/res",
        ] {
            assert!(parse_reservation_url(bad).is_err(), "{bad}");
        }
        let f =
            parse_future_reservation_url("projects/p1/zones/us-central1-a/futureReservations/fr").unwrap();
        assert_eq!(f.url(), "projects/p1/zones/us-central1-a/futureReservations/fr");
        assert!(parse_future_reservation_url("projects/p1/zones/us-central1-a/reservations/fr").is_err());
    }
}
