//! Rule 3: every node is compared with its VM and with Slurm — expiry, vanished VMs, suspends to
//! carry out, VMs that must not exist, static nodes to keep provisioned, drift between Slurm and
//! the record.

use super::*;
use chrono::Duration;

impl Planner<'_> {
    /// Slurm nodes of ours that the store has never seen get a record, so the node rules can judge them.
    pub(super) fn adopt_untracked_slurm_nodes(&mut self) {
        let Some(slurm) = self.o.slurm.as_ref() else { return };
        for (name, _) in self.nodes.missing(slurm.iter()) {
            if let Ok(r) = self.cfg.naming.parse(name) {
                self.nodes.insert(name.clone(), new_node(name, &r.nodeset, r.index, r.is_static, self.now));
            }
        }
    }

    /// Static nodes are kept provisioned from start-up on: each gets a record the moment it is missing.
    pub(super) fn seed_static(&mut self) {
        let naming = &self.cfg.naming;
        for ns in naming.nodesets() {
            for (index, name) in naming.static_nodes(ns).into_iter().enumerate() {
                if !self.nodes.contains_key(&name) {
                    let node = new_node(&name, ns, index as u32, true, self.now);
                    self.nodes.insert(name, node);
                }
            }
        }
    }

    pub(super) fn node_rules(&mut self) {
        let o = self.o;
        let mut vms = o.vms.iter().flatten().peekable();
        let mut slurm = o.slurm.iter().flatten().peekable();
        for name in self.nodes.keys_now() {
            let name: &str = &name;
            // The VM and Slurm node of this name, if any: the three lists are in name order.
            while vms.next_if(|(k, _)| k.as_str() < name).is_some() {}
            while slurm.next_if(|(k, _)| k.as_str() < name).is_some() {}
            self.here.name.clear();
            self.here.name.push_str(name);
            self.here.vm = vms.peek().filter(|(k, _)| k.as_str() == name).map(|(_, vm)| *vm);
            self.here.slurm = slurm.peek().filter(|(k, _)| k.as_str() == name).map(|(_, s)| *s);
            let Some(node) = self.nodes.get(name) else { continue };
            let (state, rid) = (node.state, node.request_id);
            match state {
                NodeState::Up => self.up_node(name),
                NodeState::Suspending => self.suspending_node(name),
                NodeState::PoweredDown => self.powered_down_node(name),
                NodeState::Requested => {
                    let open = rid.and_then(|id| self.requests.get(&id)).is_some_and(|r| r.phase.is_open());
                    if !open {
                        // Its request group is gone (it can only be a bug or a hand-edited database).
                        self.set_state(name, NodeState::ResumePending);
                    }
                }
                NodeState::ResumePending => {}
            }
        }
        self.here = Here::default();
    }

    pub(super) fn up_node(&mut self, name: &str) {
        // Observations are borrowed, not cloned, and fields are written only when they change: this runs
        // for every up node on every pass (`make bench`, the reconcile pass row).
        let o = self.o;
        let Some(node) = self.nodes.current(name) else { return };
        match self.sight(name) {
            // The list failed or left out the VM's zone: the node keeps its state.
            Sight::Unknown => {}
            Sight::Seen(vm) if vm.status.stays_down() && !self.host_being_reported(name) => {
                self.vm_failed(name, vm)
            }
            Sight::Seen(vm) => {
                let became_running =
                    vm.status == VmStatus::Running && node.vm_status != Some(VmStatus::Running);
                let status_changed = node.vm_status.as_ref() != Some(&vm.status);
                // A reserved VM ends with its reservation's window (`reserved.rs`).
                let termination = vm.termination.or_else(|| self.window_end(&node.nodeset));
                let termination_changed = termination.is_some() && node.termination_time != termination;
                let mig_changed = vm.mig.is_some() && node.mig != vm.mig;
                // Where the VM runs, as GCE says now (`None` until it has a host, or with no policy).
                let topology_changed = node.topology != vm.topology;
                if status_changed || termination_changed || mig_changed || topology_changed {
                    if let Some(n) = self.nodes.get_mut(name) {
                        if topology_changed {
                            n.topology = vm.topology.clone();
                        }
                        if status_changed {
                            n.vm_status = Some(vm.status.clone());
                        }
                        if termination_changed {
                            n.termination_time = termination;
                        }
                        if mig_changed {
                            n.mig = vm.mig.clone();
                        }
                    }
                }
                if became_running && self.cfg.internal_ip {
                    if let Some(ip) = &vm.network_ip {
                        self.plan.slurm.push(SlurmStep::SetAddr { node: name.to_string(), addr: ip.clone() });
                    }
                }
                if let (Some(term), None) = (termination, node.reservation.as_ref()) {
                    let grace = self.cfg.nodesets.get(&node.nodeset).map_or(600, |n| n.eol_grace) as i64;
                    let start = (term - Duration::seconds(grace)).max(self.now + Duration::seconds(60));
                    let res = eol_reservation(name);
                    if o.reservations.as_ref().is_some_and(|r| r.contains(&res)) {
                        // Slurm has it already (the node was adopted after the database was lost):
                        // it is the node's, not a second one to make.
                        if let Some(n) = self.nodes.get_mut(name) {
                            n.reservation = Some(res);
                        }
                    } else if start < term {
                        self.eol_wanted.push(EolWanted {
                            node: name.to_string(),
                            start,
                            end: term + Duration::seconds(3600),
                        });
                    }
                }
                if let Some(s) = self.slurm_node(name) {
                    // DOWN by slurm-dws, or by Slurm's ResumeTimeout while the node waited for
                    // its VM (a static node resumed before its reservation's window, or queued for
                    // capacity): either way the node is ours to return once its VM runs.
                    let ours_down = down_for_us(s) || first_boot_taken_for_reboot(s, vm, self.now);
                    // A VM restarting on another host re-registers its slurmd: not stuck meanwhile.
                    let stuck = stuck(s, vm, secs_since(self.now, node.state_since))
                        .filter(|_| !self.host_being_reported(name));
                    if let Some(how) = stuck {
                        self.replace_stuck(name, vm, how);
                        return;
                    }
                    if node.is_static && vm.status == VmStatus::Running && ours_down {
                        // A static node slurm-dws took out of service while re-provisioning is back.
                        // One Slurm also powered down (ResumeTimeout marks a node "down and
                        // power_save") becomes idle~ and is powered up by the drift rule below in
                        // a later pass: while DOWN it would not be.
                        self.slurm_update(name, NodeStateChange::Resume, None);
                        let msg = if s.reason.starts_with(UNEXPECTED_REBOOT) {
                            format!(
                                "static node's new VM is running: Slurm took its first boot for a reboot ({}); back in service",
                                s.reason
                            )
                        } else {
                            "static node's new VM is running: back in service".to_string()
                        };
                        self.plan.event(EventKind::Returned, vec![name.to_string()], msg);
                    } else if s.has(SlurmFlag::PoweredDown)
                        && !s.powering_up()
                        && secs_since(self.now, node.state_since) > DRIFT_GRACE_SECS
                    {
                        if node.is_static {
                            // Only once its VM runs: a VM still coming up is not ready for Slurm.
                            if vm.status == VmStatus::Running {
                                self.slurm_update(name, NodeStateChange::PowerUp, None);
                                self.plan.event(
                                    EventKind::Drift,
                                    vec![name.to_string()],
                                    "Slurm has the static node powered down but its VM runs: powering it up",
                                );
                            }
                        } else {
                            self.plan.event(
                                EventKind::Drift,
                                vec![name.to_string()],
                                "Slurm has the node powered down but its VM runs: deleting the VM",
                            );
                            self.set_state(name, NodeState::Suspending);
                            self.suspending_node(name);
                        }
                    }
                }
            }
            Sight::Gone => {
                if secs_since(self.now, node.state_since) < LIST_LAG_SECS && node.vm_status.is_none() {
                    return; // just SUCCEEDED: the list may lag behind
                }
                let expired = node.termination_time.is_some_and(|t| self.now >= t - Duration::seconds(120));
                let msg = match (expired, node.termination_time) {
                    (true, Some(t)) if self.model(&node.nodeset).is_reservation() => {
                        format!(
                            "the reservation's window ended at {}: GCE deleted the VM",
                            t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
                        )
                    }
                    (true, Some(t)) => {
                        format!(
                            "run duration ended at {}: GCE deleted the VM",
                            t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
                        )
                    }
                    _ if self.preemptible(&node.nodeset) => {
                        "its spot VM was preempted: GCE deleted it".to_string()
                    }
                    _ => "the VM is gone (deleted outside slurm-dws, or GCE removed it)".to_string(),
                };
                let kind = match (expired, self.preemptible(&node.nodeset)) {
                    (true, _) if self.model(&node.nodeset).is_reservation() => EventKind::WindowEnded,
                    (true, _) => EventKind::Expired,
                    (false, true) => EventKind::Preempted,
                    (false, false) => EventKind::VmLost,
                };
                self.drop_reservation(name);
                self.clear_vm(name);
                if let Some(n) = self.nodes.get_mut(name) {
                    n.last_error = Some(msg.clone());
                    n.mig = None;
                }
                if node.is_static {
                    self.set_state(name, NodeState::ResumePending);
                    if let Some(n) = self.nodes.get_mut(name) {
                        n.request_id = None;
                        n.job_id = None;
                    }
                    let in_service = self.slurm_node(name).is_none_or(|s| !s.powered_down() && !s.is_down());
                    if in_service {
                        self.slurm_update(
                            name,
                            NodeStateChange::Down,
                            Some(format!("{REASON_PREFIX} {msg}; re-provisioning")),
                        );
                    }
                    self.plan.event(
                        kind,
                        vec![name.to_string()],
                        format!("{msg}; static node: re-provisioning"),
                    );
                } else {
                    self.set_state(name, NodeState::PoweredDown);
                    self.take_out_of_service(name, &msg);
                    // Its job is requeued; with the VM gone no stale step can reach it, so no hold.
                    self.job_may_start_again(name);
                    self.plan.event(kind, vec![name.to_string()], format!("{msg}; node leaves service"));
                }
            }
        }
    }

    /// A node slurm-dws holds up whose VM runs, but that Slurm has shown powering up or not
    /// responding for longer than [`STUCK_SECS`] since the VM came: its slurmd never registered
    /// (it started while Slurm had the node powered down, or died). An event, and a repair: a static
    /// node's VM is replaced (deleted, and a new one requested once the name is free, whose slurmd
    /// registers with Slurm expecting it; DOWN meanwhile), a dynamic node leaves service (its job is
    /// requeued, the VM deleted when Slurm suspends it).
    fn replace_stuck(&mut self, name: &str, vm: &ObservedVm, how: &str) {
        let Some(node) = self.nodes.current(name) else { return };
        let msg = format!(
            "Slurm has shown the node {how} for more than {STUCK_SECS}s while its VM runs: its slurmd did not register"
        );
        self.drop_reservation(name);
        if let Some(n) = self.nodes.get_mut(name) {
            n.last_error = Some(msg.clone());
        }
        self.replace_vm(
            name,
            &node,
            vm,
            Replacement {
                kind: EventKind::Drift,
                msg: &msg,
                down_reason: format!("{REASON_PREFIX} slurmd did not register; re-provisioning"),
                static_words: "replacing the VM (static node: re-provisioning)",
                dynamic_words: "node leaves service",
                // The VM still runs: a stale step of the job could still reach it.
                job_may_start_again: false,
            },
        );
    }

    /// The node's VM stopped and will not run again ([`VmStatus::stays_down`]: TERMINATED after a
    /// host failure, since its MIG does nothing on failure; STOPPED; SUSPENDED). In this pass the
    /// node leaves service with the reason, its VM is deleted through its MIG (by URL), and a static
    /// node is re-provisioned (a new VM is requested once the old one no longer holds the name) while
    /// a dynamic node's job is requeued.
    fn vm_failed(&mut self, name: &str, vm: &ObservedVm) {
        let Some(node) = self.nodes.current(name) else { return };
        let (msg, kind) = if self.preemptible(&node.nodeset) && vm.status == VmStatus::Terminated {
            (format!("its spot VM was preempted ({})", vm.status), EventKind::Preempted)
        } else {
            (
                format!("its VM is {}: it will not run again (failed on its host, or stopped)", vm.status),
                EventKind::VmFailed,
            )
        };
        self.drop_reservation(name);
        if let Some(n) = self.nodes.get_mut(name) {
            n.last_error = Some(msg.clone());
            n.vm_status = Some(vm.status.clone());
        }
        let down_reason = format!("{REASON_PREFIX} {msg}; re-provisioning");
        self.replace_vm(
            name,
            &node,
            vm,
            Replacement {
                kind,
                msg: &msg,
                down_reason,
                static_words: "deleting it; static node: re-provisioning",
                dynamic_words: "deleting it; node leaves service",
                // A stopped VM runs no stale step of the job: no hold.
                job_may_start_again: true,
            },
        );
    }

    /// A held-up node's VM must go ([`Planner::replace_stuck`], [`Planner::vm_failed`]): a static
    /// node is re-provisioned (its VM deleted through its MIG, a new one requested once the name is
    /// free; DOWN in Slurm meanwhile unless Slurm has it powered down or DOWN already), a dynamic
    /// node leaves service (its job requeued, the VM deleted when it is suspending).
    pub(super) fn replace_vm(&mut self, name: &str, node: &Node, vm: &ObservedVm, r: Replacement<'_>) {
        let Replacement { kind, msg, down_reason, static_words, dynamic_words, job_may_start_again } = r;
        if node.is_static {
            self.set_state(name, NodeState::ResumePending);
            if let Some(n) = self.nodes.get_mut(name) {
                n.request_id = None;
                n.job_id = None;
                n.termination_time = None;
            }
            if let Some(mig) = vm.mig.clone().or(node.mig.clone()).filter(|m| self.owned_mig(m)) {
                self.delete_vm(&mig, vm);
            }
            if self.slurm_node(name).is_none_or(|s| !s.powered_down() && !s.is_down()) {
                self.slurm_update(name, NodeStateChange::Down, Some(down_reason));
            }
            self.plan.event(kind, vec![name.to_string()], format!("{msg}; {static_words}"));
        } else {
            self.take_out_of_service(name, msg);
            if job_may_start_again {
                self.job_may_start_again(name);
            }
            self.set_state(name, NodeState::Suspending);
            self.plan.event(kind, vec![name.to_string()], format!("{msg}; {dynamic_words}"));
            self.suspending_node(name);
        }
    }

    pub(super) fn suspending_node(&mut self, name: &str) {
        let Some(node) = self.nodes.current(name) else { return };
        match self.sight(name) {
            Sight::Unknown => {}
            Sight::Seen(vm) if being_deleted(vm) => {}
            Sight::Seen(vm) => match vm.mig.clone().or(node.mig.clone()) {
                Some(mig) if self.owned_mig(&mig) => {
                    self.delete_vm(&mig, vm);
                }
                _ => {
                    if node.last_error.as_deref()
                        != Some("VM is not in a MIG slurm-dws owns: not deleting it")
                    {
                        self.plan.event(
                            EventKind::NotOwned,
                            vec![name.to_string()],
                            "the node's VM is not in a MIG slurm-dws owns: not deleting it",
                        );
                        if let Some(n) = self.nodes.get_mut(name) {
                            n.last_error = Some("VM is not in a MIG slurm-dws owns: not deleting it".into());
                        }
                    }
                }
            },
            Sight::Gone => {
                let request_open =
                    node.request_id.and_then(|id| self.requests.get(&id)).is_some_and(|r| r.phase.is_open());
                if !request_open {
                    self.set_state(name, NodeState::PoweredDown);
                    self.clear_vm(name);
                    self.drop_reservation(name);
                    if let Some(n) = self.nodes.get_mut(name) {
                        n.mig = None;
                    }
                }
            }
        }
    }

    pub(super) fn powered_down_node(&mut self, name: &str) {
        let Some(node) = self.nodes.current(name) else { return };
        let o = self.o;
        let slurm = self.slurm_node(name);
        let sight = self.sight(name);
        if let Sight::Seen(vm) = sight {
            if being_deleted(vm) {
                return; // neither adopted nor deleted again: it is going
            }
            let mig = vm.mig.clone();
            if vm.status.stays_down() {
                // A failed VM is never adopted: it must not exist.
                if let Some(m) = mig.filter(|m| self.owned_mig(m)) {
                    self.delete_vm(&m, vm);
                }
                return;
            }
            let slurm_wants = slurm.as_ref().is_some_and(|s| s.in_service() || s.powering_up());
            match mig {
                Some(m) if self.owned_mig(&m) => {
                    if slurm_wants {
                        // The job the MIG was made for, from its ownership line: the record of the
                        // request that would say it is gone.
                        let job = o.migs.as_ref().and_then(|ms| ms.get(&m)).and_then(|om| om.job_id);
                        self.set_state(name, NodeState::Up);
                        if let Some(n) = self.nodes.get_mut(name) {
                            n.mig = Some(m.clone());
                            if n.job_id.is_none() {
                                n.job_id = job;
                            }
                        }
                        let for_job = job.map(|j| format!(" (made for job {j})")).unwrap_or_default();
                        self.plan.event(
                            EventKind::Adopted,
                            vec![name.to_string()],
                            format!("Slurm uses the node and its VM runs in MIG {m}{for_job}: adopted"),
                        );
                        self.up_node(name);
                    } else if self.saw_everything() {
                        let known = node.request_id.is_some();
                        let orphan =
                            vm.created.is_some_and(|c| secs_since(self.now, c) > self.cfg.orphan_grace);
                        if known || orphan {
                            // Known to be suspended (or an orphan past its grace): the VM must not exist.
                            let why = if known {
                                "Slurm has the node powered down"
                            } else {
                                "Slurm has the node powered down and slurm-dws never asked for it"
                            };
                            self.plan.event(
                                if known { EventKind::Drift } else { EventKind::Orphan },
                                vec![name.to_string()],
                                format!("{why}, but its VM runs in MIG {m}: deleting the VM"),
                            );
                            self.delete_vm(&m, vm);
                        }
                    }
                }
                _ => {}
            }
            return;
        }
        if let Sight::Unknown = sight {
            return; // its VM may exist where GCE did not answer: nothing is concluded
        }
        if node.is_static {
            if self.in_backoff(&node.nodeset).is_none() {
                self.set_state(name, NodeState::ResumePending);
            }
            let refused = self.o.refused_nodesets.contains_key(&node.nodeset);
            // Powered up only when a VM may be asked for: inside the nodeset's backoff Slurm would
            // wait for a node that gets no VM (and one made later would boot before Slurm expects it).
            if !refused
                && self.in_backoff(&node.nodeset).is_none()
                && slurm
                    .as_ref()
                    .is_some_and(|s| s.has(SlurmFlag::PoweredDown) && !s.powering_up() && !s.is_down())
            {
                self.slurm_update(name, NodeStateChange::PowerUp, None);
            }
        }
        let Some(s) = slurm else { return };
        if s.has(SlurmFlag::PoweredDown) && down_for_us(s) {
            // down~ after a failed resume that slurm-dws has cleaned up: usable again.
            self.slurm_update(name, NodeStateChange::Resume, None);
            self.plan.event(
                EventKind::Returned,
                vec![name.to_string()],
                format!("node was DOWN ({}) with no VM: returned to powered-down and usable", s.reason),
            );
        } else if s.powering_up()
            && !node.is_static
            && (secs_since(self.now, node.state_since) > DRIFT_GRACE_SECS
                || self.o.took_charge_at.is_some_and(|t| node.state_since <= t))
        {
            self.set_state(name, NodeState::ResumePending);
            self.plan.event(
                EventKind::Drift,
                vec![name.to_string()],
                "Slurm is powering the node up but slurm-dws had no request for it: requesting a VM",
            );
        } else if s.in_service()
            && !s.has(SlurmFlag::PoweredDown)
            && secs_since(self.now, node.state_since) > DRIFT_GRACE_SECS
        {
            self.take_out_of_service(name, "no VM backs this node");
            self.plan.event(
                EventKind::Drift,
                vec![name.to_string()],
                "Slurm has the node in service but no VM backs it: taking it out",
            );
        }
    }
}

/// Why a held-up node's VM is replaced, and how the events and Slurm say it
/// ([`Planner::replace_vm`]).
pub(super) struct Replacement<'a> {
    pub kind: EventKind,
    /// What happened: the node's last error, and the start of its event.
    pub msg: &'a str,
    /// The reason a static node is set DOWN with while its VM is replaced.
    pub down_reason: String,
    /// What the event adds for a static node, and for a dynamic one.
    pub static_words: &'a str,
    pub dynamic_words: &'a str,
    /// Whether a dynamic node's requeued job may start again at once (no stale step can reach it).
    pub job_may_start_again: bool,
}

/// How long Slurm may show a node powering up or not responding while its VM runs before it is
/// drift: a VM's slurmd registers within a minute or two of RUNNING on GCE (docs/slurm-facts.md);
/// past this it never will (it started before Slurm expected it, or died).
pub const STUCK_SECS: i64 = 180;

/// Whether Slurm shows an up node stuck (`powering up` or `not responding`), its VM RUNNING, for
/// longer than [`STUCK_SECS`] since the node came up (`up_for`).
fn stuck(s: &SlurmNode, vm: &ObservedVm, up_for: i64) -> Option<&'static str> {
    if vm.status != VmStatus::Running || up_for <= STUCK_SECS || s.powered_down() {
        return None;
    }
    if s.powering_up() {
        Some("powering up")
    } else if s.has_flag("NOT_RESPONDING") {
        Some("not responding")
    } else {
        None
    }
}

/// How long after GCE made a VM a "reboot" Slurm sees on its node is still the VM's first boot: its
/// slurmd registers within [`STUCK_SECS`] of RUNNING, and may register a second time in the
/// [`REBOOT_SETTLE_SECS`] after that.
pub const FIRST_BOOT_SECS: i64 = STUCK_SECS + REBOOT_SETTLE_SECS;

/// Slurm has the node DOWN "Node unexpectedly rebooted" and responding, and its VM was made less
/// than [`FIRST_BOOT_SECS`] ago: the "reboot" is the first boot of the VM slurm-dws asked for. A
/// static node slurm-dws set DOWN while it re-provisioned is resumed once its new VM's slurmd
/// registered; on 22.05 the resume clears slurm-dws's reason, and slurmd can register once more
/// with a boot time one second later (it computes it from its uptime in whole seconds), which
/// slurmctld takes for a reboot after the node's last answer (docs/slurm-facts.md). A VM made
/// earlier (a restart on another host, or after maintenance) is a reboot for the admin to judge.
fn first_boot_taken_for_reboot(s: &SlurmNode, vm: &ObservedVm, now: DateTime<Utc>) -> bool {
    s.is_down()
        && s.reason.starts_with(UNEXPECTED_REBOOT)
        && s.responding()
        && vm.status == VmStatus::Running
        && vm.created.is_some_and(|c| secs_since(now, c) < FIRST_BOOT_SECS)
}

/// Slurm has the node DOWN for a reason slurm-dws may undo: its own, Slurm's ResumeTimeout, or none
/// at all. 22.05 clears the reason of a node its ResumeTimeout marked down when the node's slurmd
/// registers later (a static node resumed before its reservation's window, whose VM came at the
/// start: `DOWN+CLOUD`, no reason); an admin's DOWN always has one, as scontrol refuses DOWN without
/// a reason (docs/slurm-facts.md, "When a resume fails").
fn down_for_us(s: &SlurmNode) -> bool {
    s.is_down()
        && (s.reason.trim().is_empty()
            || s.reason.starts_with(REASON_PREFIX)
            || s.reason.contains("ResumeTimeout"))
}
