//! Capacity advice at the GCE edge: before a request group's MIG is created, one `advice.capacity`
//! call per (nodeset, size) decides its zone(s) (`crate::capacity_advice` is the rule). Best
//! effort: the call (with the template read that names the machine type, the first time) gets at
//! most [`ADVICE_WAIT`]; a failure, a timeout or a rate limit gives every zone of the nodeset, and
//! the MIG is created in the same pass. An answer is kept [`ADVICE_TTL_SECS`] for groups of the
//! same nodeset and size, so a burst of resumes makes one call.

use crate::capacity_advice::{self, ZoneChoice};
use crate::config::Config;
use crate::gce;
use crate::model::EventKind;
use crate::reconcile::types::{Desired, GceStep, Plan};
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use std::time::Duration;

/// The longest a pass waits for advice (the template read included).
pub const ADVICE_WAIT: Duration = Duration::from_secs(2);
/// How long an answer stands for other groups of the same nodeset and size.
pub const ADVICE_TTL_SECS: i64 = 60;

/// Answers kept, and the machine type of each template (an instance template never changes).
#[derive(Debug, Default)]
pub struct Advisor {
    answers: HashMap<(String, u32), (DateTime<Utc>, ZoneChoice)>,
    machine_types: HashMap<String, String>,
    /// `advice.capacity` calls made (the bench counts them).
    pub calls: u64,
}

impl Advisor {
    /// The choice for each (nodeset, size) asked, from the cache or from GCE (concurrently).
    pub async fn choose(
        &mut self,
        gce: &gce::Client,
        cfg: &Config,
        wanted: &[(String, u32)],
        now: DateTime<Utc>,
    ) -> HashMap<(String, u32), ZoneChoice> {
        self.answers.retain(|_, (at, _)| (now - *at).num_seconds() < ADVICE_TTL_SECS);
        let mut out = HashMap::new();
        let mut asks = tokio::task::JoinSet::new();
        for key in wanted {
            if out.contains_key(key) {
                continue;
            }
            if let Some((_, c)) = self.answers.get(key) {
                out.insert(key.clone(), c.clone());
                continue;
            }
            let Some(ns) = cfg.nodeset(&key.0) else { continue };
            let known = self.machine_types.get(&ns.instance_template).cloned();
            let (gce, ns, size) = (gce.with_call_budget(ADVICE_WAIT), ns.clone(), key.1);
            out.insert(key.clone(), capacity_advice::choose(&ns.zones, Err("the call did not complete"))); // until it answers
            asks.spawn(async move {
                let call = async {
                    let machine_type = match known {
                        Some(m) => m,
                        None => {
                            let t = gce.get_instance_template_ref(&ns.instance_template).await?;
                            t.properties.map(|p| p.machine_type).unwrap_or_default()
                        }
                    };
                    let body = gce::CapacityAdviceRequest::new(
                        size,
                        gce::last_segment(&machine_type),
                        "FLEX_START",
                        &ns.zones,
                    );
                    let answer = gce.capacity_advice(&ns.region, &body).await;
                    Ok::<_, gce::GceError>((machine_type, answer))
                };
                let answered = tokio::time::timeout(ADVICE_WAIT, call).await;
                (ns, size, answered)
            });
        }
        while let Some(joined) = asks.join_next().await {
            let Ok((ns, size, answered)) = joined else { continue };
            self.calls += 1;
            let choice = match answered {
                Err(_) => capacity_advice::choose(
                    &ns.zones,
                    Err(&format!("no answer within {} s", ADVICE_WAIT.as_secs())),
                ),
                Ok(Err(e)) => capacity_advice::choose(&ns.zones, Err(&format!("reading the template: {e}"))),
                Ok(Ok((machine_type, answer))) => {
                    if !machine_type.is_empty() {
                        self.machine_types.insert(ns.instance_template.clone(), machine_type);
                    }
                    match answer {
                        Ok(a) => capacity_advice::choose(&ns.zones, Ok(&a)),
                        Err(e) => capacity_advice::choose(&ns.zones, Err(&e.to_string())),
                    }
                }
            };
            tracing::info!(nodeset = %ns.name, size, zones = %choice.zones.join(","), obtainability = ?choice.obtainability, why = %choice.why, "capacity advice");
            // A failed call is not kept: the next group asks again.
            if choice.obtainability.is_some() {
                self.answers.insert((ns.name.clone(), size), (now, choice.clone()));
            }
            out.insert((ns.name, size), choice);
        }
        out
    }
}

/// For each MIG insert of a nodeset with `capacity_advice` whose group has no zone choice yet:
/// the choice (`advice.rs`), written with the group in this round, and a `zone_chosen` event.
#[allow(clippy::too_many_arguments)]
pub(in crate::reconcile) async fn advise_zones(
    advisor: &mut Advisor,
    gce: &gce::Client,
    cfg: &Config,
    steps: &[GceStep],
    p: &mut Plan,
    desired: &Desired,
    now: DateTime<Utc>,
) {
    let asked: Vec<&crate::model::Request> = steps
        .iter()
        .filter_map(|s| match s {
            GceStep::InsertMig { request, .. } => desired.requests.get(request),
            _ => None,
        })
        .filter(|r| r.zone_choice.is_none())
        .filter(|r| {
            cfg.nodeset(&r.nodeset)
                .is_some_and(|n| n.provisioning_model.is_flex() && n.dws_flex.capacity_advice)
        })
        .collect();
    if asked.is_empty() {
        return;
    }
    let keys: Vec<(String, u32)> = asked.iter().map(|r| (r.nodeset.clone(), r.nodes.len() as u32)).collect();
    let choices = advisor.choose(gce, cfg, &keys, now).await;
    for r in asked {
        let Some(choice) = choices.get(&(r.nodeset.clone(), r.nodes.len() as u32)) else { continue };
        p.event(
            EventKind::ZoneChosen,
            r.nodes.clone(),
            format!("MIG {} ({} VMs): {} ({})", r.mig, r.nodes.len(), choice.zones.join(", "), choice.why),
        );
        match p.requests.iter_mut().find(|u| u.id == r.id) {
            Some(u) => u.zone_choice = Some(choice.clone()),
            None => {
                let mut u = r.clone();
                u.zone_choice = Some(choice.clone());
                u.updated_at = now;
                p.requests.push(u);
            }
        }
    }
}
