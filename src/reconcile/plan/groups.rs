//! Rule 4: nodes waiting for a VM are grouped by (nodeset, job) into new request groups of at most
//! [`MAX_GROUP`], each with its run duration.

use super::*;

/// Why a run duration is what it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunDuration {
    pub seconds: u64,
    /// Set when the value is a fallback or was clamped: the event to record.
    pub note: Option<String>,
}

/// Run duration for a group: job TimeLimit + `boot_allowance` when `use_job_duration` and the limit is
/// known and finite, else `max_run_duration`; clamped to what GCE accepts. Every fallback or clamp says so.
pub fn run_duration(ns: &NodesetPlan, job: Option<u32>, limit: JobLimit) -> RunDuration {
    let (raw, mut note) = match (ns.use_job_duration, job, limit) {
        (false, _, _) => (ns.max_run_duration, None),
        (true, None, _) => (
            ns.max_run_duration,
            Some(format!("no job: run duration is max_run_duration {}s", ns.max_run_duration)),
        ),
        (true, Some(_), JobLimit::Minutes(m)) => {
            (m.saturating_mul(60).saturating_add(ns.boot_allowance), None)
        }
        (true, Some(j), JobLimit::Unlimited) => (
            ns.max_run_duration,
            Some(format!(
                "job {j} has no time limit: run duration is max_run_duration {}s",
                ns.max_run_duration
            )),
        ),
        (true, Some(j), JobLimit::Unknown) => (
            ns.max_run_duration,
            Some(format!(
                "job {j}'s time limit is unknown: run duration is max_run_duration {}s",
                ns.max_run_duration
            )),
        ),
    };
    let seconds =
        raw.clamp(MIN_RUN_DURATION, MAX_RUN_DURATION.min(ns.max_run_duration.max(MIN_RUN_DURATION)));
    if seconds != raw {
        note = Some(format!(
            "run duration {raw}s clamped to {seconds}s (allowed {MIN_RUN_DURATION}..{})",
            MAX_RUN_DURATION.min(ns.max_run_duration)
        ));
    }
    RunDuration { seconds, note }
}

impl Planner<'_> {
    /// A node of a nodeset whose instance template cannot work for DWS Flex Start gets no VM: a
    /// dynamic node's resume is answered at once (powered down again with the reason, its job
    /// requeued by Slurm, which holds it a while so it does not spin), a static node is set DOWN with
    /// the reason and waits for the config to be fixed.
    pub(super) fn refused_nodeset(&mut self, n: &Node, why: &str) {
        let reason = format!("nodeset {} refused: {why}", n.nodeset);
        if n.last_error.as_deref() != Some(reason.as_str()) {
            if let Some(x) = self.nodes.get_mut(&n.name) {
                x.last_error = Some(reason.clone());
            }
        }
        if n.is_static {
            if self.slurm_node(&n.name).is_some_and(|s| !s.is_down()) {
                self.slurm_update(&n.name, NodeStateChange::Down, Some(format!("{REASON_PREFIX} {reason}")));
                self.plan.event(
                    EventKind::NodesetRefused,
                    vec![n.name.clone()],
                    format!("{reason}: static node set DOWN"),
                );
            }
        } else {
            self.set_state(&n.name, NodeState::PoweredDown);
            self.power_down_force(&n.name, &reason);
            self.plan.event(
                EventKind::NodesetRefused,
                vec![n.name.clone()],
                format!("{reason}: resume answered, no VM"),
            );
        }
    }

    pub(super) fn group_pending(&mut self) {
        if self.o.vms.is_none() {
            return; // cannot tell whether a VM already exists
        }
        let pending: Vec<Node> =
            self.nodes.values().filter(|n| n.state == NodeState::ResumePending).cloned().collect();
        // Names an earlier request may still create a VM under (it is open in GCE or about to be):
        // a second request for the same name would race it for the name.
        let mut promised: std::collections::HashMap<String, i64> = Default::default();
        if !pending.is_empty() {
            for r in self.requests.values().filter(|r| r.phase.is_open()) {
                for name in &r.nodes {
                    promised.insert(name.clone(), r.id);
                }
            }
        }
        let mut groups: BTreeMap<(String, Option<u32>), Vec<Node>> = BTreeMap::new();
        for n in pending {
            if promised.get(&n.name).is_some_and(|id| n.request_id != Some(*id)) {
                // The earlier request (suspended and being cancelled, say) may still bring this
                // node's VM: wait until it is final; a VM it brought is then reused below.
                continue;
            }
            if let Sight::Unknown = self.sight(&n.name) {
                // A zone its VM could be in did not answer: a VM may exist there under this name,
                // and a request for the name would meet it. Wait for a complete answer.
                continue;
            }
            if self.o.deleting.contains(&n.name) {
                // Deleted this pass: GCE keeps the name until the VM is gone, and a request for it
                // would meet a 409. The next pass's list says when it is free.
                continue;
            }
            if self.o.reused && self.vm(&n.name).is_some() {
                // An inbox-first pass: the list is the last pass's, and the VM it shows may be gone
                // by now. Reusing it is for the full pass that follows at once to decide.
                continue;
            }
            if let Some(vm) = self.vm(&n.name).cloned() {
                if self.delete_instances.values().any(|refs| refs.iter().any(|r| r.name == n.name)) {
                    // This pass deletes it (a VM being replaced): it holds the name until it is gone.
                    continue;
                }
                if vm.status.stays_down() || being_deleted(&vm) {
                    // A failed VM (or one on its way out) holds the name: it goes first.
                    if let Some(m) = vm.mig.clone().filter(|m| self.owned_mig(m) && !being_deleted(&vm)) {
                        self.delete_vm(&m, &vm);
                    }
                    continue;
                }
                // A VM already exists (a resume raced a suspend, or the VM was never deleted): use it
                // when it is ours, else wait for it to go.
                if let Some(m) = vm.mig.filter(|m| self.owned_mig(m)) {
                    self.set_state(&n.name, NodeState::Up);
                    if let Some(x) = self.nodes.get_mut(&n.name) {
                        x.mig = Some(m);
                    }
                    self.plan.event(
                        EventKind::Adopted,
                        vec![n.name.clone()],
                        "resume: the node's VM already exists: reused",
                    );
                }
                continue;
            }
            if let Some(why) = self.o.refused_nodesets.get(&n.nodeset) {
                self.refused_nodeset(&n, why);
                continue;
            }
            if self.outside_window(&n) {
                continue;
            }
            if let Some(b) = self.in_backoff(&n.nodeset).cloned() {
                if !n.is_static {
                    let why = format!(
                        "nodeset {} is in backoff until {}: {}",
                        n.nodeset,
                        b.until.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
                        b.reason
                    );
                    self.set_state(&n.name, NodeState::PoweredDown);
                    if let Some(x) = self.nodes.get_mut(&n.name) {
                        x.last_error = Some(why.clone());
                    }
                    self.power_down_force(
                        &n.name,
                        &format!(
                            "nodeset backoff until {}",
                            b.until.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
                        ),
                    );
                    self.job_may_start_again(&n.name);
                    self.plan.event(EventKind::BackoffRefused, vec![n.name.clone()], why);
                }
                continue;
            }
            groups.entry((n.nodeset.clone(), n.job_id)).or_default().push(n);
        }
        for ((nodeset, job), mut members) in groups {
            let Some(ns) = self.cfg.nodesets.get(&nodeset) else { continue };
            members.sort_by_key(|n| n.index);
            let limit = job.map_or(JobLimit::Unknown, |j| {
                self.o.job_limits.get(&j).copied().unwrap_or(JobLimit::Unknown)
            });
            // Standard and spot VMs run until deleted, reserved ones until the reservation ends: no
            // run duration.
            let rd = if ns.model.is_flex() {
                run_duration(ns, job, limit)
            } else {
                RunDuration { seconds: 0, note: None }
            };
            if let Some(why) = self.too_large_for_reservation(&nodeset, members.len().min(MAX_GROUP)) {
                for n in &members {
                    self.set_state(&n.name, NodeState::PoweredDown);
                    if let Some(x) = self.nodes.get_mut(&n.name) {
                        x.last_error = Some(why.clone());
                    }
                    if n.is_static {
                        continue;
                    }
                    self.power_down_force(&n.name, &why);
                }
                let names = members.iter().map(|n| n.name.clone()).collect();
                self.plan.event(EventKind::ReservationTooSmall, names, why);
                continue;
            }
            for chunk in members.chunks(MAX_GROUP) {
                let names: Vec<String> = chunk.iter().map(|n| n.name.clone()).collect();
                if let Some(note) = &rd.note {
                    self.plan.event(EventKind::RunDuration, names.clone(), note.clone());
                }
                self.plan.new_groups.push(NewGroup {
                    nodeset: nodeset.clone(),
                    job_id: job,
                    nodes: names,
                    run_duration: rd.seconds,
                });
            }
        }
    }
}
