//! Reservations (zonal), their blocks and sub-blocks: what the control API books, what
//! `reservations.get/list/aggregatedList`, `reservationBlocks.get/list` and
//! `reservationSubBlocks.get/list` show, and their end (`deleteAtTime`, the control API, the end of
//! a calendar-mode window).
//!
//! Capacity is counted in units (one VM each), in buckets: one per sub-block of a reservation with
//! blocks, one for a reservation without. A bucket's use is its consuming VMs plus the units the
//! control API says are used outside the cluster (`in_use_elsewhere`, spread over the buckets in
//! order). `inUseCount` of a reservation, block and sub-block sums them. How VMs are judged against
//! it is in `consume.rs`.

use super::*;
use serde::Deserialize;

/// (project, zone, name).
pub type ResKey = (String, String, String);

/// A block of a reservation, as the control API gives it.
#[derive(Clone, Debug, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct BlockSpec {
    pub name: String,
    pub count: i64,
    /// Absent: one sub-block `{name}-sub-0` holding the whole block.
    #[serde(default)]
    pub sub_blocks: Vec<SubBlockSpec>,
}

#[derive(Clone, Debug, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct SubBlockSpec {
    pub name: String,
    pub count: i64,
}

/// `POST /_sim/reservations`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReservationSpec {
    pub project: String,
    pub zone: String,
    pub name: String,
    pub count: i64,
    pub machine_type: String,
    /// READY (default), CREATING, UPDATING, DELETING.
    #[serde(default)]
    pub status: Option<String>,
    #[serde(default)]
    pub specific_reservation_required: Option<bool>,
    /// RFC 3339: GCE deletes it then.
    #[serde(default)]
    pub delete_at: Option<DateTime<Utc>>,
    /// Simulated seconds from now (divided by the time scale) until GCE deletes it.
    #[serde(default)]
    pub delete_in_seconds: Option<f64>,
    #[serde(default)]
    pub deployment_type: Option<String>,
    #[serde(default)]
    pub scheduling_type: Option<String>,
    #[serde(default)]
    pub blocks: Vec<BlockSpec>,
    #[serde(default)]
    pub in_use_elsewhere: i64,
}

/// `POST /_sim/reservations/{zone}/{name}`: what a test changes in a reservation.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReservationPatch {
    #[serde(default)]
    pub in_use_elsewhere: Option<i64>,
    #[serde(default)]
    pub status: Option<String>,
    /// Only for a reservation without blocks.
    #[serde(default)]
    pub count: Option<i64>,
}

#[derive(Clone, Debug)]
pub struct Reservation {
    pub(super) key: ResKey,
    pub(super) id: u64,
    pub(super) created: DateTime<Utc>,
    pub status: String,
    pub count: i64,
    pub(super) machine_type: String,
    pub(super) specific_required: bool,
    pub(super) delete_at: Option<DateTime<Utc>>,
    pub(super) deployment_type: Option<String>,
    pub(super) scheduling_type: Option<String>,
    pub(super) blocks: Vec<BlockSpec>,
    /// Units used outside the cluster (control API).
    pub elsewhere: i64,
    /// Delivered by this calendar-mode future reservation: at its end every VM on it goes.
    pub(super) delivered_by: Option<String>,
    /// The most VMs that ever consumed it at the same time.
    pub max_consuming: i64,
}

/// Which unit bucket of a reservation a VM consumes: (block, sub-block) indexes, or none for a
/// reservation without blocks.
pub type Bucket = Option<(usize, usize)>;

/// What a VM consumes (`resourceStatus.reservationConsumptionInfo`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Consumed {
    pub res: ResKey,
    pub bucket: Bucket,
}

const STATUSES: [&str; 5] = ["CREATING", "READY", "UPDATING", "DELETING", "INVALID"];

fn res_path((p, z, n): &ResKey) -> String {
    format!("projects/{p}/zones/{z}/reservations/{n}")
}

/// A stable hash for names (blocks' physical topology).
fn hash(s: &str) -> String {
    let h = s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3));
    format!("{h:016x}")
}

impl Reservation {
    /// Checks and normalizes a control-API spec (each block gets at least one sub-block).
    pub fn from_spec(s: ReservationSpec, now: DateTime<Utc>, time_scale: f64) -> Result<Reservation, String> {
        if !is_rfc1035(&s.name) {
            return Err(format!("name {:?} is not an RFC 1035 name", s.name));
        }
        if s.count < 1 || s.in_use_elsewhere < 0 || s.in_use_elsewhere > s.count {
            return Err("count must be >= 1 and 0 <= in_use_elsewhere <= count".into());
        }
        let status = s.status.unwrap_or_else(|| "READY".into());
        if !STATUSES.contains(&status.as_str()) {
            return Err(format!("status must be one of {STATUSES:?}"));
        }
        let mut blocks = s.blocks;
        for b in &mut blocks {
            if b.sub_blocks.is_empty() {
                b.sub_blocks.push(SubBlockSpec { name: format!("{}-sub-0", b.name), count: b.count });
            }
            if b.sub_blocks.iter().map(|x| x.count).sum::<i64>() != b.count || b.count < 1 {
                return Err(format!(
                    "block {}: count must be >= 1 and its sub-blocks' counts add up to it",
                    b.name
                ));
            }
        }
        if !blocks.is_empty() && blocks.iter().map(|b| b.count).sum::<i64>() != s.count {
            return Err("the blocks' counts must add up to count".into());
        }
        let delete_at = match (s.delete_at, s.delete_in_seconds) {
            (Some(_), Some(_)) => return Err("give delete_at or delete_in_seconds, not both".into()),
            (Some(t), None) => Some(t),
            (None, Some(secs)) if secs.is_finite() && secs >= 0.0 => {
                Some(later(now, (secs * 1000.0 / time_scale) as i64))
            }
            (None, Some(_)) => return Err("delete_in_seconds must be a finite number >= 0".into()),
            (None, None) => None,
        };
        Ok(Reservation {
            key: (s.project, s.zone, s.name),
            id: new_id(),
            created: now,
            status,
            count: s.count,
            machine_type: last_segment(&s.machine_type).to_string(),
            specific_required: s.specific_reservation_required.unwrap_or(true),
            delete_at,
            deployment_type: s.deployment_type,
            scheduling_type: s.scheduling_type,
            blocks,
            elsewhere: s.in_use_elsewhere,
            delivered_by: None,
            max_consuming: 0,
        })
    }

    pub fn url(&self) -> String {
        format!("{GCE_BASE}{}", res_path(&self.key))
    }

    pub fn key_name(&self) -> &str {
        &self.key.2
    }

    pub fn zone(&self) -> &str {
        &self.key.1
    }

    /// Every bucket and its size, in order.
    pub(super) fn buckets(&self) -> Vec<(Bucket, i64)> {
        if self.blocks.is_empty() {
            return vec![(None, self.count)];
        }
        let mut out = Vec::new();
        for (bi, b) in self.blocks.iter().enumerate() {
            for (si, s) in b.sub_blocks.iter().enumerate() {
                out.push((Some((bi, si)), s.count));
            }
        }
        out
    }

    /// Units in use per bucket: consuming VMs (`vms`: their buckets) plus the units used
    /// elsewhere, put in the first buckets that have room.
    pub(super) fn used(&self, vms: &[Bucket]) -> Vec<(Bucket, i64, i64)> {
        let mut out: Vec<(Bucket, i64, i64)> = self
            .buckets()
            .into_iter()
            .map(|(b, size)| (b, size, vms.iter().filter(|v| **v == b).count() as i64))
            .collect();
        let mut left = self.elsewhere;
        for (_, size, used) in out.iter_mut() {
            let take = left.min((*size - *used).max(0));
            *used += take;
            left -= take;
        }
        out
    }

    fn block_topology(&self, bi: usize) -> Value {
        let (_, zone, _) = &self.key;
        let region = zone.rsplit_once('-').map_or(zone.as_str(), |(r, _)| r);
        json!({"cluster": format!("{region}-cluster-{}", &hash(zone)[..4]),
               "block": hash(&format!("{}/{}", res_path(&self.key), self.blocks[bi].name))})
    }

    /// `resourceStatus.physicalHostTopology` of a VM in this bucket (host: its name's hash, and
    /// another host each time a host report moved it).
    pub(super) fn vm_topology(&self, bucket: Bucket, vm: &str, moves: u32) -> Option<Value> {
        let (bi, si) = bucket?;
        let mut t = self.block_topology(bi);
        t["subblock"] = json!(hash(&format!(
            "{}/{}/{}",
            res_path(&self.key),
            self.blocks[bi].name,
            self.blocks[bi].sub_blocks[si].name
        )));
        t["host"] = json!(match moves {
            0 => hash(&format!("{}/{vm}", res_path(&self.key))),
            n => hash(&format!("{}/{vm}/{n}", res_path(&self.key))),
        });
        Some(t)
    }

    /// `reservationConsumptionInfo` of a VM in this bucket.
    pub(super) fn consumption_info(&self, bucket: Bucket) -> Value {
        let mut o = json!({"consumedReservation": self.url()});
        if let Some((bi, si)) = bucket {
            let block = format!("{}/reservationBlocks/{}", self.url(), self.blocks[bi].name);
            o["consumedReservationSubBlock"] =
                json!(format!("{block}/reservationSubBlocks/{}", self.blocks[bi].sub_blocks[si].name));
            o["consumedReservationBlock"] = json!(block);
        }
        o
    }
}

impl State {
    /// The buckets of the VMs consuming a reservation (VMs that are not TERMINATED).
    pub(super) fn consuming(&self, key: &ResKey) -> Vec<Bucket> {
        self.instances
            .values()
            .filter(|vm| vm.status != VmStatus::Terminated)
            .filter_map(|vm| vm.consumed.as_ref().filter(|c| &c.res == key).map(|c| c.bucket))
            .collect()
    }

    pub fn reservation(&self, key: &ResKey) -> Result<&Reservation, ApiError> {
        self.reservations.get(key).ok_or_else(|| ApiError::not_found(&res_path(key)))
    }

    /// `reservations.get` (and the items of the lists).
    pub fn render_reservation(&self, r: &Reservation) -> Value {
        let used: i64 = self.used_units(r).iter().map(|(_, _, u)| u).sum();
        let mut o = json!({
            "kind": "compute#reservation",
            "id": r.id.to_string(),
            "creationTimestamp": ts(r.created),
            "name": r.key.2,
            "zone": format!("{GCE_BASE}projects/{}/zones/{}", r.key.0, r.key.1),
            "selfLink": r.url(),
            "status": r.status,
            "specificReservationRequired": r.specific_required,
            "specificReservation": {
                "count": r.count.to_string(),
                "inUseCount": used.to_string(),
                "assuredCount": r.count.to_string(),
                "instanceProperties": {"machineType": r.machine_type},
            },
        });
        if let Some(t) = r.delete_at {
            o["deleteAtTime"] = json!(ts(t));
        }
        if let Some(d) = &r.deployment_type {
            o["deploymentType"] = json!(d);
        }
        if let Some(s) = &r.scheduling_type {
            o["schedulingType"] = json!(s);
        }
        if !r.blocks.is_empty() {
            o["resourceStatus"] = json!({"reservationBlockCount": r.blocks.len()});
        }
        o
    }

    fn used_units(&self, r: &Reservation) -> Vec<(Bucket, i64, i64)> {
        r.used(&self.consuming(&r.key))
    }

    /// Reservations of a project (of one zone, or all), in key order.
    pub fn reservations_of<'a>(
        &'a self,
        project: &'a str,
        zone: Option<&'a str>,
    ) -> impl Iterator<Item = &'a Reservation> + 'a {
        self.reservations.values().filter(move |r| r.key.0 == project && zone.is_none_or(|z| z == r.key.1))
    }

    fn block_index(&self, key: &ResKey, block: &str) -> Result<(&Reservation, usize), ApiError> {
        let r = self.reservation(key)?;
        let bi =
            r.blocks.iter().position(|b| b.name == block).ok_or_else(|| {
                ApiError::not_found(&format!("{}/reservationBlocks/{block}", res_path(key)))
            })?;
        Ok((r, bi))
    }

    fn render_block(&self, r: &Reservation, bi: usize) -> Value {
        let b = &r.blocks[bi];
        let used = self.used_units(r);
        let subs_used: Vec<i64> = (0..b.sub_blocks.len())
            .map(|si| used.iter().find(|(k, _, _)| *k == Some((bi, si))).map_or(0, |(_, _, u)| *u))
            .collect();
        let url = format!("{}/reservationBlocks/{}", r.url(), b.name);
        let id = project_number(&url);
        json!({
            "kind": "compute#reservationBlock",
            "id": id.to_string(),
            "creationTimestamp": ts(r.created),
            "name": b.name,
            "zone": format!("{GCE_BASE}projects/{}/zones/{}", r.key.0, r.key.1),
            "selfLink": url,
            "selfLinkWithId": format!("{}/reservationBlocks/{id}", r.url()),
            "status": if r.status == "READY" || r.status == "UPDATING" { "READY" } else { r.status.as_str() },
            "count": b.count,
            "inUseCount": subs_used.iter().sum::<i64>(),
            "reservationSubBlockCount": b.sub_blocks.len(),
            "reservationSubBlockInUseCount": subs_used.iter().filter(|u| **u > 0).count(),
            "physicalTopology": r.block_topology(bi),
        })
    }

    fn render_sub_block(&self, r: &Reservation, bi: usize, si: usize) -> Value {
        let b = &r.blocks[bi];
        let s = &b.sub_blocks[si];
        let used = self.used_units(r).iter().find(|(k, _, _)| *k == Some((bi, si))).map_or(0, |(_, _, u)| *u);
        let parent = format!("{}/reservationBlocks/{}", r.url(), b.name);
        let url = format!("{parent}/reservationSubBlocks/{}", s.name);
        let id = project_number(&url);
        let mut topology = r.block_topology(bi);
        topology["subBlock"] = json!(hash(&format!("{}/{}/{}", res_path(&r.key), b.name, s.name)));
        json!({
            "kind": "compute#reservationSubBlock",
            "id": id.to_string(),
            "creationTimestamp": ts(r.created),
            "name": s.name,
            "zone": format!("{GCE_BASE}projects/{}/zones/{}", r.key.0, r.key.1),
            "selfLink": url,
            "selfLinkWithId": format!("{parent}/reservationSubBlocks/{id}"),
            "status": if r.status == "READY" || r.status == "UPDATING" { "READY" } else { r.status.as_str() },
            "count": s.count,
            "inUseCount": used,
            "physicalTopology": topology,
        })
    }

    /// `reservationBlocks.get`: `{"resource": ReservationBlock}`.
    pub fn reservation_block_json(&self, key: &ResKey, block: &str) -> Result<Value, ApiError> {
        let (r, bi) = self.block_index(key, block)?;
        Ok(json!({"resource": self.render_block(r, bi)}))
    }

    /// `reservationBlocks.list`: (name, block) in order.
    pub fn reservation_blocks(&self, key: &ResKey) -> Result<Vec<(String, Value)>, ApiError> {
        let r = self.reservation(key)?;
        Ok((0..r.blocks.len()).map(|bi| (r.blocks[bi].name.clone(), self.render_block(r, bi))).collect())
    }

    /// `reservationSubBlocks.get`: `{"resource": ReservationSubBlock}`.
    pub fn reservation_sub_block_json(
        &self,
        key: &ResKey,
        block: &str,
        sub: &str,
    ) -> Result<Value, ApiError> {
        let (r, bi) = self.block_index(key, block)?;
        let si = r.blocks[bi].sub_blocks.iter().position(|s| s.name == sub).ok_or_else(|| {
            ApiError::not_found(&format!(
                "{}/reservationBlocks/{block}/reservationSubBlocks/{sub}",
                res_path(key)
            ))
        })?;
        Ok(json!({"resource": self.render_sub_block(r, bi, si)}))
    }

    /// `reservationSubBlocks.list`.
    pub fn reservation_sub_blocks(
        &self,
        key: &ResKey,
        block: &str,
    ) -> Result<Vec<(String, Value)>, ApiError> {
        let (r, bi) = self.block_index(key, block)?;
        Ok((0..r.blocks[bi].sub_blocks.len())
            .map(|si| (r.blocks[bi].sub_blocks[si].name.clone(), self.render_sub_block(r, bi, si)))
            .collect())
    }

    // ----- control API -------------------------------------------------------------------

    /// Books a reservation (replacing one of the same key: its VMs keep their buckets only if
    /// they still exist).
    pub fn add_reservation(&mut self, r: Reservation) {
        self.reservations.insert(r.key.clone(), r);
    }

    /// Finds a reservation by zone and name (any project).
    pub fn reservation_key(&self, zone: &str, name: &str) -> Option<ResKey> {
        self.reservations.keys().find(|k| k.1 == zone && k.2 == name).cloned()
    }

    /// Changes what a test may change in a reservation.
    pub fn patch_reservation(&mut self, key: &ResKey, p: ReservationPatch) -> Result<(), String> {
        let r = self.reservations.get_mut(key).ok_or("no such reservation")?;
        if let Some(s) = &p.status {
            if !STATUSES.contains(&s.as_str()) {
                return Err(format!("status must be one of {STATUSES:?}"));
            }
        }
        if p.count.is_some() && !r.blocks.is_empty() {
            return Err("count can change only in a reservation without blocks".into());
        }
        let count = p.count.unwrap_or(r.count);
        let elsewhere = p.in_use_elsewhere.unwrap_or(r.elsewhere);
        if count < 1 || elsewhere < 0 || elsewhere > count {
            return Err("count must be >= 1 and 0 <= in_use_elsewhere <= count".into());
        }
        r.count = count;
        r.elsewhere = elsewhere;
        if let Some(s) = p.status {
            r.status = s;
        }
        Ok(())
    }

    /// GCE deletes the reservation now (its `deleteAtTime`, the end of its calendar-mode window,
    /// or the control API). RESERVATION_BOUND VMs on it are deleted ("bound to the lifecycle of the
    /// reservation", discovery document) and leave their MIG, as a Flex VM at the end of its run
    /// duration does; so are all VMs on a calendar-mode reservation; other (STANDARD) VMs keep
    /// running and no longer consume it.
    pub fn end_reservation(&mut self, key: &ResKey, now: DateTime<Utc>) -> Vec<Effect> {
        let Some(r) = self.reservations.remove(key) else { return Vec::new() };
        let on_it: Vec<InstanceKey> = self
            .instances
            .iter()
            .filter(|(_, vm)| vm.consumed.as_ref().is_some_and(|c| &c.res == key))
            .map(|(k, _)| k.clone())
            .collect();
        let mut effects = Vec::new();
        for k in on_it {
            let vm = self.instances.get_mut(&k).expect("listed above");
            let bound =
                vm.scheduling.get("provisioningModel").and_then(Value::as_str) == Some("RESERVATION_BOUND");
            if !(bound || r.delivered_by.is_some()) {
                vm.consumed = None;
                continue;
            }
            let vm = self.instances.remove(&k).expect("listed above");
            self.vm_gone(vm.id, now);
            self.free_slot(&vm.zone, vm.host);
            if let Some(mig) = self.migs.get_mut(&vm.mig) {
                mig.vms.remove(&vm.name);
                if vm.deleting_at.is_none() {
                    mig.target_size -= 1;
                }
            }
            if vm.booted {
                effects.push(Effect::Stop(vm.name));
            }
        }
        let _ = now;
        effects
    }

    /// `GET /_sim/reservations`: each reservation with its counts and consuming VMs.
    pub fn reservations_dump(&self) -> Value {
        let rows: Vec<Value> = self
            .reservations
            .values()
            .map(|r| {
                let vms: Vec<&str> = self
                    .instances
                    .values()
                    .filter(|vm| vm.status != VmStatus::Terminated)
                    .filter(|vm| vm.consumed.as_ref().is_some_and(|c| c.res == r.key))
                    .map(|vm| vm.name.as_str())
                    .collect();
                let used: i64 = self.used_units(r).iter().map(|(_, _, u)| u).sum();
                json!({"project": r.key.0, "zone": r.key.1, "name": r.key.2, "url": r.url(),
                       "status": r.status, "count": r.count, "in_use_count": used,
                       "in_use_elsewhere": r.elsewhere, "consuming_vms": vms.len(), "vms": vms,
                       "max_consuming_vms": r.max_consuming, "machine_type": r.machine_type,
                       "delete_at": r.delete_at.map(ts), "delivered_by": r.delivered_by,
                       "blocks": r.blocks})
            })
            .collect();
        json!(rows)
    }

    /// Deletes reservations whose `deleteAtTime` has come.
    pub(super) fn expire_reservations(&mut self, now: DateTime<Utc>, effects: &mut Vec<Effect>) {
        let due: Vec<ResKey> = self
            .reservations
            .values()
            .filter(|r| r.delete_at.is_some_and(|t| now >= t))
            .map(|r| r.key.clone())
            .collect();
        for k in due {
            effects.extend(self.end_reservation(&k, now));
        }
    }
}
