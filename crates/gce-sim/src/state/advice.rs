//! `advice.capacity`: Compute's capacity advisor, with scores the control API sets.
//!
//! Each (zone, machine type) has an obtainability score: the control API's (`POST /_sim/advice`,
//! for one machine type or for all of a zone's), else [`DEFAULT_SCORE`]. A zone in a stockout
//! scores at most [`STOCKOUT_SCORE`]: a stockout is what the simulator models as one, i.e. the
//! zone is unreachable (`/_sim/zones/{zone}/unreachable`), its hosts are all taken
//! (`/_sim/zones/{zone}/topology`), or a resize request of a MIG there waits for capacity with a
//! `*RESOURCE_POOL_EXHAUSTED*` error (a `/_sim/capacity` rule that holds or delays it, or a
//! placement that does not fit).
//!
//! The answer is one recommendation, as the discovery document says ("Initially the API will
//! provide one recommendation which balances the individual scores"): for the first machine type
//! of the lowest-rank instance selection, the request's zones with the highest score, the
//! request's `size` split over them (ANY, BALANCED: as evenly as possible, larger shares first;
//! ANY_SINGLE_ZONE: all in the first best zone in the request's order).

use super::*;
use serde::{Deserialize, Serialize};

/// A zone's score when the control API set none.
pub const DEFAULT_SCORE: f64 = 0.5;
/// The highest score of a zone in a stockout.
pub const STOCKOUT_SCORE: f64 = 0.05;

/// A score of the control API (`POST /_sim/advice`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AdviceScore {
    pub zone: String,
    /// Absent: every machine type in the zone (a score for the machine type itself wins).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_type: Option<String>,
    pub obtainability: f64,
}

impl AdviceScore {
    /// Why the control API refuses it, if it does.
    pub fn check(&self) -> Result<(), String> {
        if !is_rfc1035(&self.zone) {
            return Err(format!("zone must be a zone name such as us-central1-a, not {:?}", self.zone));
        }
        if self.machine_type.as_deref().is_some_and(|m| !is_rfc1035(m)) {
            return Err(format!("machine_type must be a machine type name, not {:?}", self.machine_type));
        }
        if !(self.obtainability.is_finite() && (0.0..=1.0).contains(&self.obtainability)) {
            return Err("obtainability must be a number in 0..1".to_string());
        }
        Ok(())
    }
}

fn invalid_field(field: &str, value: impl std::fmt::Display, why: &str) -> ApiError {
    ApiError::invalid(format!("Invalid value for field 'resource.{field}': '{value}'. {why}"))
}

fn required(field: &str) -> ApiError {
    ApiError::invalid(format!("Required field 'resource.{field}' not specified"))
}

/// The zone name of a `distributionPolicy.zones[].zone`: `zones/Z`, `projects/P/zones/Z` or
/// `https://www.googleapis.com/compute/v1/projects/P/zones/Z` (P must be the call's project).
fn zone_of<'a>(project: &str, url: &'a str) -> Option<&'a str> {
    let rest = ["https://www.googleapis.com/compute/v1/", "https://compute.googleapis.com/compute/v1/"]
        .iter()
        .find_map(|p| url.strip_prefix(p))
        .filter(|r| r.starts_with("projects/"))
        .unwrap_or(url);
    let segs: Vec<&str> = rest.split('/').collect();
    let zone = match segs.as_slice() {
        ["zones", z] => *z,
        ["projects", p, "zones", z] if *p == project => *z,
        _ => return None,
    };
    is_rfc1035(zone).then_some(zone)
}

impl State {
    /// The zone's score for a machine type, before stockouts: the machine type's own, else the
    /// zone's, else [`DEFAULT_SCORE`].
    fn set_score(&self, zone: &str, machine_type: &str) -> f64 {
        let key = |m: Option<&str>| (zone.to_string(), m.map(str::to_string));
        self.advice
            .get(&key(Some(machine_type)))
            .or_else(|| self.advice.get(&key(None)))
            .copied()
            .unwrap_or(DEFAULT_SCORE)
    }

    /// Whether the zone is in a stockout, as the simulator models one (module documentation).
    pub fn zone_in_stockout(&self, zone: &str) -> bool {
        if self.unreachable_zone(zone) {
            return true;
        }
        if let Some(h) = self.hosts.get(zone) {
            let s = h.shape;
            let total = s.blocks as u64 * s.subblocks_per_block as u64 * s.hosts_per_subblock as u64;
            if h.used.len() as u64 >= total {
                return true;
            }
        }
        self.migs.values().filter(|m| m.zone == zone).any(|m| {
            m.requests.values().any(|rr| {
                rr.state == RrState::Accepted
                    && !rr.provisioning
                    && rr.last_attempt.as_ref().is_some_and(|e| {
                        e.pointer("/errors/0/code")
                            .and_then(Value::as_str)
                            .is_some_and(|c| c.contains("RESOURCE_POOL_EXHAUSTED"))
                    })
            })
        })
    }

    /// A zone's obtainability score for a machine type, stockouts included.
    pub fn advice_score(&self, zone: &str, machine_type: &str) -> f64 {
        let s = self.set_score(zone, machine_type);
        if self.zone_in_stockout(zone) {
            s.min(STOCKOUT_SCORE)
        } else {
            s
        }
    }

    /// Control API: sets a score.
    pub fn set_advice(&mut self, score: AdviceScore) {
        self.advice.insert((score.zone, score.machine_type), score.obtainability);
    }

    /// Control API: forgets every score.
    pub fn clear_advice(&mut self) {
        self.advice.clear();
    }

    /// The scores set, for `GET /_sim/state`.
    pub fn advice_json(&self) -> Value {
        json!(self
            .advice
            .iter()
            .map(|((zone, machine_type), s)| AdviceScore {
                zone: zone.clone(),
                machine_type: machine_type.clone(),
                obtainability: *s
            })
            .collect::<Vec<_>>())
    }

    /// `advice.capacity` (the body already fits `CapacityAdviceRequest`).
    pub fn capacity_advice(&self, project: &str, region: &str, body: &Value) -> Result<Value, ApiError> {
        let size = match body.get("size") {
            None | Some(Value::Null) => return Err(required("size")),
            Some(v) => v.as_i64().unwrap_or_default(),
        };
        if size < 1 {
            return Err(invalid_field("size", size, "Must be greater than or equal to 1."));
        }
        let model = body
            .pointer("/instanceProperties/scheduling/provisioningModel")
            .and_then(Value::as_str)
            .ok_or_else(|| required("instanceProperties.scheduling.provisioningModel"))?;

        // The instance selections, lowest rank first (then by name, for a stable answer).
        let selections = body
            .pointer("/instanceFlexibilityPolicy/instanceSelections")
            .and_then(Value::as_object)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| required("instanceFlexibilityPolicy.instanceSelections"))?;
        let mut ranked: Vec<(i64, &str, &str)> = Vec::new();
        for (name, sel) in selections {
            let at = format!("instanceFlexibilityPolicy.instanceSelections.{name}");
            if !is_rfc1035(name) {
                return Err(invalid_field(
                    "instanceFlexibilityPolicy.instanceSelections",
                    name,
                    "The key of an instance selection must be an RFC1035 name.",
                ));
            }
            let rank = match sel.get("rank") {
                None | Some(Value::Null) => 0,
                Some(Value::String(s)) => s.parse::<i64>().unwrap_or(-1),
                Some(v) => v.as_i64().unwrap_or(-1),
            };
            if rank < 0 {
                return Err(invalid_field(
                    &format!("{at}.rank"),
                    sel["rank"].to_string().trim_matches('"'),
                    "Must be greater than or equal to 0.",
                ));
            }
            let types: Vec<&str> = sel
                .get("machineTypes")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let Some(first) = types.first() else {
                return Err(required(&format!("{at}.machineTypes")));
            };
            if let Some(bad) = types.iter().find(|m| !is_rfc1035(m)) {
                return Err(invalid_field(
                    &format!("{at}.machineTypes"),
                    bad,
                    "A machine type is a full machine-type name, such as n2-standard-4.",
                ));
            }
            ranked.push((rank, name.as_str(), first));
        }
        ranked.sort();
        let machine_type = ranked[0].2;

        let shape = match body.pointer("/distributionPolicy/targetShape").and_then(Value::as_str) {
            None | Some("TARGET_SHAPE_UNSPECIFIED") => "ANY",
            Some(s) => s,
        };
        let entries = body
            .pointer("/distributionPolicy/zones")
            .and_then(Value::as_array)
            .filter(|z| !z.is_empty())
            .ok_or_else(|| required("distributionPolicy.zones"))?;
        let mut zones: Vec<&str> = Vec::new();
        for (i, e) in entries.iter().enumerate() {
            let field = format!("distributionPolicy.zones[{i}].zone");
            let url = e.get("zone").and_then(Value::as_str).ok_or_else(|| required(&field))?;
            let Some(zone) = zone_of(project, url) else {
                return Err(invalid_field(
                    &field,
                    url,
                    "The URL is malformed: use zones/ZONE, projects/PROJECT/zones/ZONE or https://www.googleapis.com/compute/v1/projects/PROJECT/zones/ZONE.",
                ));
            };
            if !zone.starts_with(&format!("{region}-")) {
                return Err(invalid_field(&field, url, &format!("Zone is not in region {region}.")));
            }
            if !zones.contains(&zone) {
                zones.push(zone);
            }
        }

        let scored: Vec<(&str, f64)> =
            zones.iter().map(|z| (*z, self.advice_score(z, machine_type))).collect();
        let best = scored.iter().map(|(_, s)| *s).fold(f64::NEG_INFINITY, f64::max);
        let mut winners: Vec<&str> = scored.iter().filter(|(_, s)| *s == best).map(|(z, _)| *z).collect();
        if shape == "ANY_SINGLE_ZONE" {
            winners.truncate(1);
        }
        let n = winners.len() as i64;
        let shards: Vec<Value> = winners
            .iter()
            .enumerate()
            .map(|(i, z)| (z, size / n + i64::from((i as i64) < size % n)))
            .filter(|(_, count)| *count > 0)
            .map(|(z, count)| {
                json!({"zone": z, "machineType": machine_type, "instanceCount": count, "provisioningModel": model})
            })
            .collect();
        Ok(json!({"recommendations": [{"scores": {"obtainability": best}, "shards": shards}]}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zone_urls_partial_and_full() {
        assert_eq!(zone_of("p", "zones/us-central1-a"), Some("us-central1-a"));
        assert_eq!(zone_of("p", "projects/p/zones/us-central1-b"), Some("us-central1-b"));
        assert_eq!(
            zone_of("p", "https://www.googleapis.com/compute/v1/projects/p/zones/us-central1-c"),
            Some("us-central1-c")
        );
        assert_eq!(zone_of("p", "projects/other/zones/us-central1-a"), None);
        assert_eq!(zone_of("p", "us-central1-a"), None);
        assert_eq!(zone_of("p", "zones/US"), None);
    }

    fn req(size: i64, shape: &str, zones: &[&str]) -> Value {
        json!({"size": size,
               "instanceProperties": {"scheduling": {"provisioningModel": "SPOT"}},
               "distributionPolicy": {"targetShape": shape,
                   "zones": zones.iter().map(|z| json!({"zone": format!("zones/{z}")})).collect::<Vec<_>>()},
               "instanceFlexibilityPolicy": {"instanceSelections": {
                   "later": {"rank": "1", "machineTypes": ["n2-standard-4"]},
                   "first": {"machineTypes": ["a3-ultragpu-8g", "a3-highgpu-8g"]}}}})
    }

    #[test]
    fn ties_split_size_larger_shares_first() {
        let st = State::new(1.0);
        let v =
            st.capacity_advice("p", "us-central1", &req(5, "BALANCED", &["us-central1-a", "us-central1-b"]));
        let shards = v.unwrap()["recommendations"][0]["shards"].clone();
        assert_eq!(shards[0]["instanceCount"], 3);
        assert_eq!(shards[1]["instanceCount"], 2);
        assert_eq!(shards[0]["machineType"], "a3-ultragpu-8g");
        // Fewer VMs than tied zones: no empty shard.
        let v = st.capacity_advice("p", "us-central1", &req(1, "ANY", &["us-central1-a", "us-central1-b"]));
        assert_eq!(v.unwrap()["recommendations"][0]["shards"].as_array().map(Vec::len), Some(1));
    }

    #[test]
    fn machine_type_score_wins_over_zone_score() {
        let mut st = State::new(1.0);
        st.set_advice(AdviceScore { zone: "us-central1-a".into(), machine_type: None, obtainability: 0.9 });
        st.set_advice(AdviceScore {
            zone: "us-central1-a".into(),
            machine_type: Some("a3-ultragpu-8g".into()),
            obtainability: 0.1,
        });
        assert_eq!(st.advice_score("us-central1-a", "a3-ultragpu-8g"), 0.1);
        assert_eq!(st.advice_score("us-central1-a", "n2-standard-4"), 0.9);
        assert_eq!(st.advice_score("us-central1-b", "n2-standard-4"), DEFAULT_SCORE);
        st.set_zone_shape(
            "us-central1-b",
            ZoneShape { blocks: 0, subblocks_per_block: 0, hosts_per_subblock: 0 },
        );
        assert_eq!(st.advice_score("us-central1-b", "n2-standard-4"), STOCKOUT_SCORE);
    }
}
