//! How VMs consume a specific reservation, and what GCE says when they cannot.
//!
//! A template consumes a reservation when its `reservationAffinity` is `SPECIFIC_RESERVATION` with
//! the key `compute.googleapis.com/reservation-name` and one value: `R`, `projects/P/reservations/R`,
//! or a block (`.../reservations/R/reservationBlocks/B`) or sub-block
//! (`.../reservationBlocks/B/reservationSubBlocks/S`) of it, looked up in the VM's zone.
//! `provisioningModel: RESERVATION_BOUND` needs such an affinity (400 at insert otherwise, an
//! assumption); a STANDARD template may have one too. Other affinities (ANY_RESERVATION) are not
//! modelled: those VMs consume nothing.
//!
//! When a resize request (all its VMs at once) or a `createInstances` name (one VM) is due, it is
//! judged against the reservation (`CONDITION_NOT_MET` errors, in the words cluster-autoscaler
//! matches in GCE's answers; docs/gce-facts.md):
//! * no such reservation in the zone: fails, `Specified reservation 'R' does not exist.`; unless a
//!   calendar-mode future reservation there will deliver it, then it waits for the window ("the
//!   MIG creates VMs at or after the reservation start time");
//! * status CREATING or UPDATING: waits, `lastAttempt` `Cannot insert instance to a reservation
//!   with status: S, as it requires reservation to be in READY state.`; DELETING or INVALID: fails
//!   with that message;
//! * another machine type than the reservation's: fails, `No available resources in specified
//!   reservations 'R'`;
//! * a block or sub-block that the reservation does not have: fails, `... does not exist.`;
//! * more VMs than the reservation (block, sub-block) holds in all: fails, `Specified reservation
//!   'R' does not have available resources for the request.` (an assumption: such a request can
//!   never be met); more than is free now: waits whole, with that message in `lastAttempt`;
//! * otherwise all its VMs are made at once, each consuming a unit: the first sub-blocks with room
//!   first. A failed resize request gives back its share of targetSize; a `createInstances` name
//!   keeps the error in its `lastAttempt` and is tried again every tick, as GCE retries.

use super::future_reservation::FutureReservation;
use super::reservation::{Bucket, Consumed, ResKey, Reservation};
use super::*;

/// What a template's VMs must consume.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub project: String,
    pub name: String,
    pub block: Option<String>,
    pub sub_block: Option<String>,
}

impl Target {
    /// How GCE's messages name it: `R`, `R/reservationBlocks/B`, ...
    fn shown(&self) -> String {
        let mut s = self.name.clone();
        if let Some(b) = &self.block {
            s.push_str(&format!("/reservationBlocks/{b}"));
        }
        if let Some(sb) = &self.sub_block {
            s.push_str(&format!("/reservationSubBlocks/{sb}"));
        }
        s
    }
}

/// The specific reservation a template's `reservationAffinity` names, if any.
pub fn target_of(project: &str, props: &Value) -> Result<Option<Target>, String> {
    let Some(aff) = props.get("reservationAffinity") else { return Ok(None) };
    if aff.get("consumeReservationType").and_then(Value::as_str) != Some("SPECIFIC_RESERVATION") {
        return Ok(None);
    }
    let key = aff.get("key").and_then(Value::as_str).unwrap_or_default();
    if !key.ends_with("googleapis.com/reservation-name") {
        return Err(format!(
            "reservationAffinity.key must be compute.googleapis.com/reservation-name, not {key:?}"
        ));
    }
    let values: Vec<&str> =
        aff.get("values").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
    let [value] = values.as_slice() else {
        return Err(format!("reservationAffinity.values must name one reservation, not {values:?}"));
    };
    let mut rest = value.trim_start_matches('/');
    let mut proj = project;
    if let Some(r) = rest.strip_prefix("projects/") {
        let (p, tail) = r.split_once('/').ok_or_else(|| format!("malformed reservation {value:?}"))?;
        proj = p;
        rest = tail;
    }
    let rest = rest.strip_prefix("reservations/").unwrap_or(rest);
    let segs: Vec<&str> = rest.split('/').collect();
    let (name, block, sub_block) = match segs.as_slice() {
        [r] => (*r, None, None),
        [r, "reservationBlocks", b] => (*r, Some(*b), None),
        [r, "reservationBlocks", b, "reservationSubBlocks", s] => (*r, Some(*b), Some(*s)),
        _ => return Err(format!("malformed reservation {value:?}")),
    };
    if !is_rfc1035(name) || block.is_some_and(|b| !is_rfc1035(b)) || sub_block.is_some_and(|s| !is_rfc1035(s))
    {
        return Err(format!("malformed reservation {value:?}"));
    }
    Ok(Some(Target {
        project: proj.to_string(),
        name: name.to_string(),
        block: block.map(str::to_string),
        sub_block: sub_block.map(str::to_string),
    }))
}

/// Checks a template's reservation settings when a resize request or `createInstances` names it;
/// returns whether its VMs are RESERVATION_BOUND (a resize request then needs no run duration).
pub(super) fn check_template(template: &str, project: &str, props: &Value) -> Result<bool, ApiError> {
    let bound =
        props.pointer("/scheduling/provisioningModel").and_then(Value::as_str) == Some("RESERVATION_BOUND");
    let bad = |why: String| {
        ApiError::invalid(format!("Invalid value for field 'resource.instanceTemplate': '{template}'. {why}"))
    };
    match target_of(project, props) {
        Err(why) => Err(bad(why)),
        Ok(None) if bound => Err(bad(
            "A RESERVATION_BOUND instance must consume a specific reservation: set reservationAffinity.consumeReservationType to SPECIFIC_RESERVATION.".into(),
        )),
        Ok(_) => Ok(bound),
    }
}

/// What a due request (or createInstances name) gets.
#[derive(Debug)]
pub(super) enum Verdict {
    /// Its template consumes no specific reservation.
    Unreserved,
    /// One unit per VM.
    Grant(Vec<Consumed>),
    /// Not now: the `lastAttempt` error to show, if any.
    Wait(Option<Value>),
    /// Never: the error.
    Fail(Value),
}

/// Free units in this tick: built on first use, lowered by each grant.
#[derive(Default)]
pub(super) struct Ledger {
    rows: Option<Rows>,
}

/// Each reservation's buckets: (bucket, size, units used).
type Rows = BTreeMap<ResKey, Vec<(Bucket, i64, i64)>>;

fn unmet(message: String) -> Value {
    status_error("CONDITION_NOT_MET", &message)
}

fn not_exist(shown: &str) -> Value {
    unmet(format!("Specified reservation '{shown}' does not exist."))
}

fn no_room(shown: &str) -> Value {
    unmet(format!("Specified reservation '{shown}' does not have available resources for the request."))
}

impl Ledger {
    fn rows<'a>(
        &'a mut self,
        reservations: &BTreeMap<ResKey, Reservation>,
        instances: &BTreeMap<InstanceKey, Instance>,
        key: &ResKey,
    ) -> &'a mut Vec<(Bucket, i64, i64)> {
        let rows = self.rows.get_or_insert_with(|| {
            let mut on: BTreeMap<&ResKey, Vec<Bucket>> = BTreeMap::new();
            for vm in instances.values().filter(|vm| vm.status != VmStatus::Terminated) {
                if let Some(c) = &vm.consumed {
                    on.entry(&c.res).or_default().push(c.bucket);
                }
            }
            reservations
                .iter()
                .map(|(k, r)| (k.clone(), r.used(on.get(k).map_or(&[][..], |v| v.as_slice()))))
                .collect()
        });
        rows.entry(key.clone()).or_default()
    }

    /// Gives back a grant that could not be used (the VMs were not made this tick).
    pub(super) fn release(&mut self, grant: &[Consumed]) {
        let Some(rows) = self.rows.as_mut() else { return };
        for c in grant {
            if let Some(row) =
                rows.get_mut(&c.res).and_then(|r| r.iter_mut().find(|(b, _, _)| *b == c.bucket))
            {
                row.2 -= 1;
            }
        }
    }
}

/// Judges `n` VMs of a template with these properties, to be made in `project`/`zone` now.
#[allow(clippy::too_many_arguments)]
pub(super) fn judge(
    reservations: &BTreeMap<ResKey, Reservation>,
    futures: &BTreeMap<ResKey, FutureReservation>,
    instances: &BTreeMap<InstanceKey, Instance>,
    ledger: &mut Ledger,
    project: &str,
    zone: &str,
    props: &Value,
    n: usize,
    now: DateTime<Utc>,
) -> Verdict {
    let t = match target_of(project, props) {
        Ok(None) => return Verdict::Unreserved,
        Ok(Some(t)) => t,
        Err(why) => return Verdict::Fail(unmet(why)),
    };
    let key = (t.project.clone(), zone.to_string(), t.name.clone());
    let Some(r) = reservations.get(&key) else {
        let coming = futures.values().any(|f| f.reservation_key() == key && !f.delivered && now < f.end);
        return if coming { Verdict::Wait(None) } else { Verdict::Fail(not_exist(&t.name)) };
    };
    let not_ready = || {
        unmet(format!(
            "Cannot insert instance to a reservation with status: {}, as it requires reservation to be in READY state.",
            r.status
        ))
    };
    match r.status.as_str() {
        "READY" => {}
        "CREATING" | "UPDATING" => return Verdict::Wait(Some(not_ready())),
        _ => return Verdict::Fail(not_ready()),
    }
    let machine =
        props.get("machineType").and_then(Value::as_str).map(last_segment).unwrap_or("a3-ultragpu-8g");
    if machine != r.machine_type {
        return Verdict::Fail(unmet(format!(
            "No available resources in specified reservations '{}'",
            t.name
        )));
    }
    let bi = match &t.block {
        None => None,
        Some(b) => match r.blocks.iter().position(|x| &x.name == b) {
            Some(i) => Some(i),
            None => return Verdict::Fail(not_exist(&t.shown())),
        },
    };
    let si = match (&t.sub_block, bi) {
        (Some(s), Some(bi)) => match r.blocks[bi].sub_blocks.iter().position(|x| &x.name == s) {
            Some(i) => Some(i),
            None => return Verdict::Fail(not_exist(&t.shown())),
        },
        _ => None,
    };
    let fits = |b: &Bucket| match (bi, si, b) {
        (None, _, _) => true,
        (Some(x), None, Some((bb, _))) => x == *bb,
        (Some(x), Some(y), Some((bb, ss))) => x == *bb && y == *ss,
        _ => false,
    };
    let rows = ledger.rows(reservations, instances, &key);
    let size: i64 = rows.iter().filter(|(b, _, _)| fits(b)).map(|(_, s, _)| s).sum();
    let free: i64 = rows.iter().filter(|(b, _, _)| fits(b)).map(|(_, s, u)| (s - u).max(0)).sum();
    if n as i64 > size {
        return Verdict::Fail(no_room(&t.shown()));
    }
    if n as i64 > free {
        return Verdict::Wait(Some(no_room(&t.shown())));
    }
    let mut grant = Vec::with_capacity(n);
    for (b, s, u) in rows.iter_mut().filter(|(b, _, _)| fits(b)) {
        while grant.len() < n && *u < *s {
            *u += 1;
            grant.push(Consumed { res: key.clone(), bucket: *b });
        }
    }
    Verdict::Grant(grant)
}

impl State {
    /// A VM made from a grant consumes its unit; the reservation remembers its busiest moment.
    pub(super) fn consume(&mut self, vm: &InstanceKey, c: Consumed) {
        let res = c.res.clone();
        if let Some(v) = self.instances.get_mut(vm) {
            v.consumed = Some(c);
        }
        let n = self.consuming(&res).len() as i64;
        if let Some(r) = self.reservations.get_mut(&res) {
            r.max_consuming = r.max_consuming.max(n);
        }
    }
}
