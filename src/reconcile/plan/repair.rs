//! Rule 3a: node repairs. A repair is asked by `slurm-dws repair` (an ask the daemon recorded) or by
//! a drain reason starting with `repair` (a health check's `scontrol update state=drain
//! reason="repair UNRECOVERABLE_GPU_ERROR xid 79"`). The node is drained and its jobs requeued;
//! then a reservation-bound VM's host is reported faulty (GCE restarts the VM on another host) and
//! any other VM is replaced (deleted, and a new one requested for the node under its nodeset's
//! rules). The repair ends when the node's VM runs again and Slurm has the node responding: the
//! drain is lifted. One repair a node at a time: an ask while one is open is the same repair.

use super::nodes::Replacement;
use super::*;

/// How long a host report may go unanswered (no Operation seen to its end) before the repair fails.
pub const REPORT_TIMEOUT_SECS: i64 = 3600;
/// How long after a repair ended a DOWN "Node unexpectedly rebooted" is still the repair's restart.
pub const REBOOT_SETTLE_SECS: i64 = 120;
/// The reason Slurm gives a node whose slurmd registered with a boot time after its last answer.
pub const UNEXPECTED_REBOOT: &str = "Node unexpectedly rebooted";
/// What the GCE edge records in a repair's outcome when GCE finished the report.
pub const HOST_REPORTED: &str = "GCE reported the host faulty";

/// The behaviour and text of a drain reason that asks for a repair: `repair [BEHAVIOR] [text]`,
/// `repair` in any case and followed by the end, a space or `:`; BEHAVIOR as GCE spells it (in any
/// case), else PERFORMANCE with the rest as text. `None` for any other reason.
pub fn repair_reason(reason: &str) -> Option<(FaultBehavior, String)> {
    let head = reason.get(..6)?;
    if !head.eq_ignore_ascii_case("repair") {
        return None;
    }
    let rest = &reason[6..];
    if !(rest.is_empty() || rest.starts_with([' ', ':', '\t'])) {
        return None;
    }
    let rest = rest.trim_start_matches([' ', ':', '\t']).trim();
    let (first, tail) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    match first.to_ascii_uppercase().parse::<FaultBehavior>() {
        Ok(b) => Some((b, tail.trim().to_string())),
        Err(_) => Some((FaultBehavior::Performance, rest.to_string())),
    }
}

/// The reason slurm-dws drains a node with while it repairs it.
pub fn repair_drain_reason(r: &Repair) -> String {
    if r.description.is_empty() {
        format!("{REASON_PREFIX} repair {}", r.behavior)
    } else {
        format!("{REASON_PREFIX} repair {}: {}", r.behavior, r.description)
    }
}

impl<'a> Planner<'a> {
    /// Takes the asks and drain reasons, and carries every open repair one step further.
    pub(super) fn repairs(&mut self) {
        let o = self.o;
        for ask in &o.repair_asks {
            self.plan.repair_asks_taken.push(ask.id);
            self.start_repair(&ask.node, ask.behavior, &ask.description, "cli");
        }
        for (name, s) in o.slurm.iter().flatten() {
            let Some((behavior, text)) = repair_reason(&s.reason) else { continue };
            if !s.has_flag("DRAIN") || !self.nodes.contains_key(name) {
                continue;
            }
            // The drain a repair just lifted may still show in this pass's Slurm read; a failed
            // repair keeps its node drained until someone lifts the drain or asks again.
            let just_ended = self.repairs.get(name).is_some_and(|r| {
                r.phase == RepairPhase::Failed
                    || (!r.phase.is_open() && secs_since(self.now, r.updated_at) < DRIFT_GRACE_SECS)
            });
            if !just_ended {
                self.start_repair(name, behavior, &text, "drain");
            }
        }
        let open: Vec<String> =
            self.repairs.values().filter(|r| r.phase.is_open()).map(|r| r.node.clone()).collect();
        for name in open {
            self.carry_repair(&name);
        }
        self.after_repairs();
    }

    /// A node a repair returned to service a moment ago that Slurm then set DOWN as "Node
    /// unexpectedly rebooted": slurmd registered again after the resume, with a boot time later
    /// than the node's last answer (the VM's restart on its new host, which was the repair's own
    /// doing; measured on 22.05 and 26.05 with a second registration 0.7 s after the resume). Its
    /// VM runs and Slurm has it responding: back in service. Only for [`REBOOT_SETTLE_SECS`] after
    /// the repair ended, so a later reboot is left to the admin as Slurm means it.
    fn after_repairs(&mut self) {
        let now = self.now;
        let settling: Vec<String> = self
            .repairs
            .values()
            .filter(|r| {
                r.phase == RepairPhase::Repaired && secs_since(now, r.updated_at) < REBOOT_SETTLE_SECS
            })
            .map(|r| r.node.clone())
            .collect();
        for name in settling {
            let Some(s) = self.running_and_responding(&name) else { continue };
            let rebooted = s.is_down() && s.reason.starts_with(UNEXPECTED_REBOOT);
            let dynamic = self.nodes.current(&name).is_some_and(|n| !n.is_static);
            if rebooted && dynamic {
                self.slurm_update(&name, NodeStateChange::Resume, None);
                self.plan.event(
                    EventKind::Repaired,
                    vec![name.clone()],
                    format!(
                        "repaired: Slurm set the node DOWN ({}) for the restart the repair made: back in service",
                        s.reason
                    ),
                );
            }
        }
    }

    /// A node's repair is under way and its VM must be left to it (a reservation-bound VM restarting
    /// on another host may show any status meanwhile).
    pub(super) fn host_being_reported(&self, name: &str) -> bool {
        self.repairs.get(name).is_some_and(|r| r.phase == RepairPhase::Reporting)
    }

    fn start_repair(&mut self, name: &str, behavior: FaultBehavior, description: &str, source: &str) {
        if self.repairs.get(name).is_some_and(|r| r.phase.is_open()) || !self.nodes.contains_key(name) {
            return; // the same repair (or not a node of ours: the CLI refused it already)
        }
        let r = Repair {
            node: name.to_string(),
            behavior,
            description: description.to_string(),
            source: source.to_string(),
            phase: RepairPhase::Requested,
            requested_at: self.now,
            updated_at: self.now,
            outcome: None,
        };
        let by = if source == "cli" { "slurm-dws repair" } else { "the drain reason" };
        let text = if description.is_empty() { String::new() } else { format!(" ({description})") };
        self.plan.event(
            EventKind::RepairRequested,
            vec![name.to_string()],
            format!("repair {behavior}{text} asked by {by}: draining the node and requeueing its jobs"),
        );
        self.repairs.insert(name.to_string(), r);
    }

    fn set_repair(&mut self, name: &str, phase: RepairPhase, outcome: Option<String>) {
        let now = self.now;
        if let Some(r) = self.repairs.get_mut(name) {
            r.phase = phase;
            r.updated_at = now;
            if outcome.is_some() {
                r.outcome = outcome;
            }
        }
    }

    fn carry_repair(&mut self, name: &str) {
        let Some(r) = self.repairs.get(name).cloned() else { return };
        let Some(node) = self.nodes.current(name) else { return };
        let slurm = self.slurm_node(name);
        match r.phase {
            RepairPhase::Requested => {
                if slurm.is_none_or(|s| !s.has_flag("DRAIN")) {
                    self.slurm_update(name, NodeStateChange::Drain, Some(repair_drain_reason(&r)));
                }
                if slurm.is_none_or(|s| matches!(s.state.as_str(), "allocated" | "mixed")) {
                    self.plan.slurm.push(SlurmStep::RequeueJobsOn { nodes: vec![name.to_string()] });
                }
                self.repair_vm(name, &node, &r);
            }
            RepairPhase::Reporting => {
                let reported = r.outcome.as_deref().is_some_and(|o| o.starts_with(HOST_REPORTED));
                if !reported && secs_since(self.now, r.updated_at) > REPORT_TIMEOUT_SECS {
                    let why = format!("no answer from GCE to the host report within {REPORT_TIMEOUT_SECS}s");
                    self.end_repair(name, RepairPhase::Failed, why);
                } else if reported {
                    self.return_when_running(name, "its VM runs again on another host");
                }
            }
            RepairPhase::Replacing => {
                if node.state == NodeState::PoweredDown && slurm.is_some_and(|s| s.powered_down()) {
                    // Slurm powered the node down meanwhile: usable again, a resume gets a new VM.
                    self.end_repair(
                        name,
                        RepairPhase::Repaired,
                        "the node is powered down and usable".into(),
                    );
                } else if node.state == NodeState::Up {
                    self.return_when_running(name, "its new VM runs");
                }
            }
            RepairPhase::Repaired | RepairPhase::Failed => {}
        }
    }

    /// The report or the replacement, once the node's VM is known.
    fn repair_vm(&mut self, name: &str, node: &Node, r: &Repair) {
        let vm = match self.sight(name) {
            Sight::Unknown => return, // wait for a list that answers for its zone
            Sight::Seen(vm) if being_deleted(vm) || vm.status.coming_up() => return,
            Sight::Seen(vm) if node.state == NodeState::Up => vm,
            _ => {
                let why = "the node has no VM: nothing to repair (its next VM is a new one)".to_string();
                return self.end_repair(name, RepairPhase::Repaired, why);
            }
        };
        if vm.reservation_bound {
            if vm.status != VmStatus::Running {
                return; // GCE takes a report for a running VM only
            }
            self.plan.gce.push(GceStep::ReportHostAsFaulty {
                node: name.to_string(),
                vm: VmRef::of(vm),
                behavior: r.behavior,
                description: r.description.clone(),
            });
            let what = format!("reporting the host of VM {} as faulty ({})", vm.name, r.behavior);
            self.set_repair(name, RepairPhase::Reporting, Some(what));
            return;
        }
        let Some(mig) = vm.mig.clone().or(node.mig.clone()).filter(|m| self.owned_mig(m)) else {
            let why = format!("VM {} is not in a MIG slurm-dws owns: not replacing it", vm.name);
            return self.end_repair(name, RepairPhase::Failed, why);
        };
        let msg = format!("repair {}: VM {} is replaced", r.behavior, vm.name);
        self.drop_reservation(name);
        if node.is_static {
            let down_reason = format!("{REASON_PREFIX} repair {}; re-provisioning", r.behavior);
            let replacement = Replacement {
                kind: EventKind::VmReplaced,
                msg: &msg,
                down_reason,
                static_words: "deleting it; static node: re-provisioning",
                dynamic_words: "",
                job_may_start_again: true,
            };
            self.replace_vm(name, node, vm, replacement);
        } else {
            // A dynamic node stays drained in service while a new VM is requested for it: a new
            // request group of its own (a flex node: a new resize request) once the name is free.
            self.set_state(name, NodeState::ResumePending);
            if let Some(n) = self.nodes.get_mut(name) {
                n.request_id = None;
                n.job_id = None;
                n.termination_time = None;
            }
            self.delete_vm(&mig, vm);
            self.plan.event(
                EventKind::VmReplaced,
                vec![name.to_string()],
                format!("{msg}: deleting it and requesting a new VM for the node"),
            );
        }
        self.set_repair(name, RepairPhase::Replacing, Some(format!("{msg}: a new VM is requested")));
    }

    /// The repair ends once the node's VM runs and Slurm has the node responding: the drain it set
    /// (or the health check's) is lifted. The VM started again under a node Slurm kept in service,
    /// so its slurmd's registration is an unexpected reboot to Slurm, which sets the node DOWN
    /// (`ReturnToService` 0 or 1, docs/slurm-facts.md): a DOWN dynamic node is resumed (which lifts
    /// the drain too). A static node's DOWN is slurm-dws's own, lifted by the node rule first.
    /// Slurm's view of the node when its VM runs and Slurm has it responding; else `None`.
    fn running_and_responding(&self, name: &str) -> Option<&'a SlurmNode> {
        let running = matches!(self.sight(name), Sight::Seen(vm) if vm.status == VmStatus::Running);
        let s = self.slurm_node(name)?;
        (running && s.responding()).then_some(s)
    }

    fn return_when_running(&mut self, name: &str, how: &str) {
        let Some(s) = self.running_and_responding(name) else { return };
        if s.is_down() {
            if self.nodes.current(name).is_none_or(|n| n.is_static) {
                return;
            }
            self.slurm_update(name, NodeStateChange::Resume, None);
            return self.set_repair_ended(name, format!("{how}: back in service"));
        }
        self.end_repair(name, RepairPhase::Repaired, format!("{how}: back in service"));
    }

    /// A repair whose node was resumed (DOWN and drain lifted at once): repaired.
    fn set_repair_ended(&mut self, name: &str, outcome: String) {
        self.plan.event(EventKind::Repaired, vec![name.to_string()], format!("repaired: {outcome}"));
        self.set_repair(name, RepairPhase::Repaired, Some(outcome));
    }

    /// Ends a repair: a repaired node's drain is lifted; a failed repair keeps it drained (the
    /// outcome says why, in `explain`).
    fn end_repair(&mut self, name: &str, phase: RepairPhase, outcome: String) {
        if phase == RepairPhase::Repaired && self.slurm_node(name).is_some_and(|s| s.has_flag("DRAIN")) {
            self.slurm_update(name, NodeStateChange::Undrain, None);
        }
        let kind =
            if phase == RepairPhase::Repaired { "repaired" } else { "repair failed, node stays drained" };
        self.plan.event(EventKind::Repaired, vec![name.to_string()], format!("{kind}: {outcome}"));
        self.set_repair(name, phase, Some(outcome));
    }
}
