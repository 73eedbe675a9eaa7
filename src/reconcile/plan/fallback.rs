//! Rule 9: fallback across partitions. While a nodeset cannot get capacity — it is in a backoff
//! after a failed request (or a request cancelled past `queue_timeout`), or one of its requests has
//! been queued longer than `fallback_after` (when that is not 0) — its powered-down dynamic nodes
//! are drained in Slurm with a reason that names why and until when ([`FALLBACK_REASON`]). Slurm
//! does not start a job on a drained node, so a job submitted to several partitions
//! (`sbatch -p a,b`) starts in the next one that has nodes; a job that names only this nodeset's
//! partition waits, as before, until the drain is lifted. The drain is lifted when the cause ends:
//! every pass compares the drains Slurm shows with slurm-dws's reason prefix against the nodesets
//! that are unschedulable now, so a drain left by a daemon that stopped is lifted by the next one
//! (level-triggered, nothing on record). A node an admin drained (any other reason) is never
//! touched, and is not drained again by slurm-dws.

use super::*;

/// Prefix of the reason of every drain slurm-dws sets for a fallback: how it knows its own.
pub const FALLBACK_REASON: &str = "slurm-dws: unschedulable:";

/// Why each nodeset is unschedulable at `now`: nodeset → the drain reason (without the prefix).
/// Pure; the planner, `status` and `explain` ask the same question.
pub fn unschedulable<'a>(
    cfg: &PlanConfig,
    backoffs: impl IntoIterator<Item = &'a Backoff>,
    requests: impl IntoIterator<Item = &'a Request>,
    now: DateTime<Utc>,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for b in backoffs {
        if b.ended || b.until <= now || !cfg.nodesets.contains_key(&b.nodeset) {
            continue;
        }
        // "capacity backoff after ..." / "error backoff after ...": its first two words.
        let class = b.reason.split_whitespace().take(2).collect::<Vec<_>>().join(" ");
        let class = if class.ends_with("backoff") { class } else { "backoff".to_string() };
        out.insert(b.nodeset.clone(), format!("{class} of nodeset {} until {}", b.nodeset, rfc3339(b.until)));
    }
    if cfg.nodesets.values().all(|n| n.fallback_after == 0) {
        return out;
    }
    for r in requests {
        let Some(ns) = cfg.nodesets.get(&r.nodeset) else { continue };
        let queued = r.phase == RequestPhase::Active && r.gce_state.as_ref().is_none_or(|s| s.in_flight());
        if ns.fallback_after == 0 || !queued || out.contains_key(&r.nodeset) {
            continue;
        }
        if secs_since(now, r.created_at) >= ns.fallback_after as i64 {
            out.insert(
                r.nodeset.clone(),
                format!(
                    "resize request {} of nodeset {} queued since {} (fallback_after {}s), until it is fulfilled",
                    r.name,
                    r.nodeset,
                    rfc3339(r.created_at),
                    ns.fallback_after
                ),
            );
        }
    }
    out
}

fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

impl Planner<'_> {
    pub(super) fn fallback(&mut self) {
        let o = self.o;
        let Some(slurm) = o.slurm.as_ref() else { return };
        let causes = unschedulable(self.cfg, self.backoffs.values(), self.requests.values(), self.now);
        // Nodes this round forces down (a failed request's): drained now, before Slurm's
        // SuspendTimeout makes them idle~ and schedulable again.
        let forced: BTreeSet<String> = self
            .slurm_updates
            .iter()
            .filter(|((s, _), _)| *s == NodeStateChange::PowerDownForce)
            .flat_map(|(_, nodes)| nodes.iter().cloned())
            .collect();
        let mut drain: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut undrain: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (name, s) in slurm {
            let ours = s.reason.starts_with(FALLBACK_REASON) && s.has_flag("DRAIN");
            if causes.is_empty() && !ours {
                continue; // the steady state: a string compare per node
            }
            let Ok(r) = self.cfg.naming.parse(name) else {
                if ours {
                    undrain.entry(String::new()).or_default().push(name.clone());
                }
                continue;
            };
            match causes.get(&r.nodeset) {
                Some(why) if !r.is_static => {
                    let want = format!("{FALLBACK_REASON} {why}");
                    let admin = s.has_flag("DRAIN") && !ours;
                    let down = s.powered_down() || forced.contains(name);
                    let already = ours && s.reason == want;
                    if down && !admin && !s.is_down() && !already {
                        drain.entry(want).or_default().push(name.clone());
                    }
                }
                _ if ours => undrain.entry(r.nodeset.clone()).or_default().push(name.clone()),
                _ => {}
            }
        }
        for (reason, nodes) in drain {
            let ns = self.cfg.naming.parse(&nodes[0]).map(|r| r.nodeset).unwrap_or_default();
            for n in &nodes {
                self.slurm_update(n, NodeStateChange::Drain, Some(reason.clone()));
            }
            let why = reason.trim_start_matches(FALLBACK_REASON).trim();
            self.plan.event(
                EventKind::NodesetUnschedulable,
                nodes.clone(),
                format!(
                    "nodeset {ns}: {} drained ({why}): jobs that name another partition run there; jobs for this one wait",
                    crate::hostlist::compress(&nodes)
                ),
            );
        }
        for (ns, nodes) in undrain {
            for n in &nodes {
                self.slurm_update(n, NodeStateChange::Undrain, None);
            }
            let what = if ns.is_empty() {
                "nodes of no configured nodeset".to_string()
            } else {
                format!("nodeset {ns}")
            };
            self.plan.event(
                EventKind::NodesetSchedulable,
                nodes.clone(),
                format!(
                    "{what}: the fallback drain of {} lifted: schedulable again",
                    crate::hostlist::compress(&nodes)
                ),
            );
        }
    }
}
