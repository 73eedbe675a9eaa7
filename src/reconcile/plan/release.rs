//! Rule 8: `exclusive` nodesets give their VMs back when the job ends. A dynamic node whose job (the
//! one it was resumed for) no longer runs on it — completed, failed, cancelled, or requeued and
//! started elsewhere — is powered down at once with `power_down_asap` instead of after SuspendTime;
//! Slurm then runs the suspend hook, which deletes the VM as for any suspend.
//!
//! A job's nodes go together: while one of them is still completing, none is released. A node
//! that Slurm already gave to another job (allocated, mixed, completing) is not taken from it; it
//! is released when that job ends too (the node still names the first job, which has ended).
//! Static nodes are never released this way. Nothing is released unless both Slurm's nodes and the
//! jobs were read this pass (`Observed::exclusive_jobs`). docs/slurm-facts.md says why
//! `power_down_asap` (it drains first, so no job lands on the node between this pass and the
//! suspend).

use super::*;

/// Prefix of the reason of a node released at its job's end.
pub const RELEASE_REASON: &str = "slurm-dws: exclusive:";

impl Planner<'_> {
    pub(super) fn release_exclusive(&mut self) {
        let o = self.o;
        let (Some(jobs), Some(_)) = (o.exclusive_jobs.as_ref(), o.slurm.as_ref()) else { return };
        // job → (nodes to release, some node not ready yet)
        let mut by_job: BTreeMap<u32, (Vec<String>, bool)> = BTreeMap::new();
        for n in self.nodes.values() {
            let exclusive = self.cfg.nodesets.get(&n.nodeset).is_some_and(|ns| ns.exclusive);
            let (NodeState::Up, false, true, Some(job)) = (n.state, n.is_static, exclusive, n.job_id) else {
                continue;
            };
            let entry = by_job.entry(job).or_default();
            match release_readiness(self.slurm_node(&n.name), jobs.get(&job), &n.name) {
                Readiness::Release => entry.0.push(n.name.clone()),
                Readiness::Wait => entry.1 = true,
                Readiness::Keep => {}
            }
        }
        for (job, (nodes, waiting)) in by_job {
            if waiting || nodes.is_empty() {
                continue;
            }
            let reason = format!("{RELEASE_REASON} job {job} ended");
            for n in &nodes {
                self.slurm_update(n, NodeStateChange::PowerDownAsap, Some(reason.clone()));
            }
            self.plan.event(
                EventKind::Released,
                nodes.clone(),
                format!(
                    "job {job} ended: {} of an exclusive nodeset powered down now, not after SuspendTime (their VMs go with the suspend)",
                    crate::hostlist::compress(&nodes)
                ),
            );
        }
    }
}

/// What to do with one up node of an exclusive nodeset whose record names `job`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Readiness {
    /// The job has ended (or runs elsewhere) and Slurm has the node idle: release it.
    Release,
    /// The job has ended but the node is still completing it: release none of the job's nodes yet.
    Wait,
    /// The job still runs here, another job holds the node, Slurm is already powering it down, or
    /// Slurm does not show it: leave it.
    Keep,
}

fn release_readiness(slurm: Option<&SlurmNode>, job: Option<&ObservedJob>, node: &str) -> Readiness {
    let Some(s) = slurm else { return Readiness::Keep };
    if job.is_some_and(|j| j.holds(node)) || !s.in_service() {
        return Readiness::Keep;
    }
    let flag = |f: &str| s.has_flag(f);
    if flag("DRAIN") || flag("POWER_DOWN") {
        return Readiness::Keep;
    }
    match s.state.as_str() {
        "idle" if flag("COMPLETING") => Readiness::Wait,
        "idle" => Readiness::Release,
        "completing" => Readiness::Wait,
        _ => Readiness::Keep, // allocated / mixed: a second job has it
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(state: &str, flags: &[&str]) -> SlurmNode {
        SlurmNode { state: state.into(), flags: flags.iter().collect(), reason: String::new() }
    }

    fn job(state: &str, nodes: &[&str]) -> ObservedJob {
        ObservedJob { state: state.into(), nodes: Some(nodes.iter().map(|n| n.to_string()).collect()) }
    }

    #[test]
    fn readiness_table() {
        let n = "hpc-gpu2-0";
        let cases: Vec<(Option<SlurmNode>, Option<ObservedJob>, Readiness)> = vec![
            // the job ended and slurmctld forgot it; the node is idle
            (Some(s("idle", &["CLOUD"])), None, Readiness::Release),
            (Some(s("idle", &["CLOUD"])), Some(job("COMPLETED", &[n])), Readiness::Release),
            (Some(s("idle", &["CLOUD"])), Some(job("CANCELLED", &[n])), Readiness::Release),
            (Some(s("idle", &["CLOUD"])), Some(job("FAILED", &[n])), Readiness::Release),
            // requeued: pending, or running on other nodes
            (Some(s("idle", &["CLOUD"])), Some(job("PENDING", &[])), Readiness::Release),
            (Some(s("idle", &["CLOUD"])), Some(job("RUNNING", &["hpc-gpu2-7"])), Readiness::Release),
            // still running here, or starting
            (Some(s("allocated", &["CLOUD"])), Some(job("RUNNING", &[n])), Readiness::Keep),
            (Some(s("allocated", &["CLOUD"])), Some(job("CONFIGURING", &[n])), Readiness::Keep),
            (Some(s("idle", &["CLOUD"])), Some(job("COMPLETING", &[n])), Readiness::Keep),
            // the job is done but the node is still completing it: wait (the job's nodes go together)
            (Some(s("idle", &["CLOUD", "COMPLETING"])), Some(job("COMPLETED", &[n])), Readiness::Wait),
            (Some(s("completing", &["CLOUD"])), None, Readiness::Wait),
            // another job was scheduled onto it
            (Some(s("allocated", &["CLOUD"])), Some(job("COMPLETED", &[n])), Readiness::Keep),
            (Some(s("mixed", &["CLOUD"])), None, Readiness::Keep),
            // Slurm is on it already, or an admin drained it, or it is not in service
            (Some(s("idle", &["CLOUD", "DRAIN", "POWER_DOWN"])), None, Readiness::Keep),
            (Some(s("idle", &["CLOUD", "POWERING_DOWN"])), None, Readiness::Keep),
            (Some(s("idle", &["CLOUD", "POWERED_DOWN"])), None, Readiness::Keep),
            (Some(s("down", &["CLOUD"])), None, Readiness::Keep),
            (None, None, Readiness::Keep),
        ];
        for (slurm, j, want) in cases {
            assert_eq!(release_readiness(slurm.as_ref(), j.as_ref(), n), want, "{slurm:?} {j:?}");
        }
    }
}
