//! Rules 1 and 2: nodeset backoffs that ran out end (keeping their level), and every open request group walks its
//! lifecycle (planned → MIG → resize request → SUCCEEDED, or failed and released).

use super::{secs_since, Planner, REASON_PREFIX};
use crate::config::ProvisioningModel;
use crate::model::*;
use crate::reconcile::types::*;
use chrono::{DateTime, Duration, Utc};

/// The next backoff after a failed request: `initial * 2^level`, at most `max`, the level one above the
/// nodeset's previous backoff (ended or not: levels decay only when a request succeeds).
pub fn next_backoff(
    cfg: &PlanConfig,
    previous: Option<&Backoff>,
    reason: &str,
    now: DateTime<Utc>,
) -> Backoff {
    let level = previous.map_or(0, |b| b.level + 1);
    let secs = cfg.backoff_initial.saturating_mul(1i64 << level.min(20)).min(cfg.backoff_max).max(1);
    Backoff {
        nodeset: String::new(),
        until: now + Duration::seconds(secs),
        level,
        reason: reason.to_string(),
        ended: false,
    }
}

/// What kind of failure backs a nodeset off: each says what it is and what to look at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BackoffClass {
    /// A stockout or an exhausted quota: capacity may come back by itself.
    Capacity,
    /// Any other error GCE failed the request with (a bad image, template, subnetwork, permission):
    /// retrying at once would fail the same way.
    Error,
    /// GCE refused the nodeset's workload policy at the MIG insert (missing, or in another region:
    /// `gce::PolicyFailure`): nothing changes until the policy or the config does.
    Placement,
    /// slurm-dws cancelled the request after `queue_timeout`: no capacity came in that time. The
    /// backoff makes the nodeset unschedulable, so the requeued job falls back (`fallback.rs`).
    QueueTimeout,
}

impl BackoffClass {
    fn words(self) -> &'static str {
        match self {
            BackoffClass::Capacity => "capacity backoff after a stockout or quota error",
            BackoffClass::Error => {
                "error backoff after a GCE error that is not capacity (check the nodeset's template, image, network and permissions)"
            }
            BackoffClass::QueueTimeout => "capacity backoff after a request queued past queue_timeout",
            BackoffClass::Placement => {
                "placement backoff after GCE refused the nodeset's workload policy (check [nodeset.placement]: the policy must exist, in the nodeset's region)"
            }
        }
    }
}

impl Planner<'_> {
    // 1 ------------------------------------------------------------------------------------------------
    pub(super) fn expire_backoffs(&mut self) {
        // No backoff is ever set longer than backoff_max: one that ends further away than that was
        // set before the wall clock went back, and would block the nodeset for the size of the jump.
        let now = self.now;
        for b in self.backoffs.values_mut().filter(|b| !b.ended) {
            let clock_went_back = secs_since(b.until, now) > self.cfg.backoff_max;
            if b.until > now && !clock_went_back {
                continue;
            }
            // Ended, but kept for its level: the next failure of the nodeset backs off longer.
            b.ended = true;
            if clock_went_back {
                b.until = now;
            }
            let why = if clock_went_back {
                " (it ended further away than backoff_max: the clock went back)"
            } else {
                ""
            };
            self.plan.events.push(NewEvent {
                kind: EventKind::BackoffEnded,
                nodes: vec![],
                message: format!(
                    "nodeset {}: backoff ended{why}; its level {} stays until a request of the nodeset succeeds",
                    b.nodeset, b.level
                ),
            });
        }
    }

    // 2 ------------------------------------------------------------------------------------------------
    pub(super) fn request_lifecycle(&mut self) {
        for id in self.requests.keys_now() {
            self.one_request(*id);
        }
    }

    /// The members the request is still to bring up (`Requested`).
    fn wanted<'r>(&self, r: &'r Request) -> Vec<&'r str> {
        self.members(r).into_iter().filter(|(_, s)| *s == NodeState::Requested).map(|(n, _)| n).collect()
    }

    /// The nodes still bound to a request, with their states (names borrowed from the request).
    fn members<'r>(&self, r: &'r Request) -> Vec<(&'r str, NodeState)> {
        r.nodes
            .iter()
            .filter_map(|n| self.nodes.get(n).map(|node| (n.as_str(), node)))
            .filter(|(_, node)| node.request_id == Some(r.id))
            .map(|(n, node)| (n, node.state))
            .collect()
    }

    fn one_request(&mut self, id: i64) {
        let Some(r) = self.requests.current(&id) else { return };
        // Before any phase change: a group that turns done in this round has its zone already.
        if r.phase != RequestPhase::Done && (r.zone.is_none() || r.phase.is_open()) {
            self.note_zone(&r);
        }
        let mig_seen = self.o.migs.as_ref().map(|m| m.contains_key(&r.mig));
        // The members are looked up only where a phase reads them (a steady pass's groups have
        // succeeded and their MIGs are listed: 10,000 lookups saved at 10,000 nodes).
        match r.phase {
            RequestPhase::Planned => {
                if self.wanted(&r).is_empty() {
                    self.release_members(&r, None);
                    self.update_request(id, |r| r.phase = RequestPhase::Done);
                } else if mig_seen == Some(true) {
                    self.update_request(id, |r| r.phase = RequestPhase::MigReady);
                    self.one_request(id);
                } else {
                    self.insert_mig(id, &r);
                }
            }
            RequestPhase::MigReady => {
                if self.wanted(&r).is_empty() {
                    let why = "nodes no longer wanted before the resize request was sent".to_string();
                    self.release_members(&r, None);
                    self.update_request(id, |r| {
                        r.phase = RequestPhase::Failed;
                        r.last_error = Some(why.clone());
                    });
                    self.delete_mig(&r.mig, &why);
                } else if matches!(self.o.requests.get(&r.mig), Some(PolledRequest::Found(_))) {
                    self.update_request(id, |r| r.phase = RequestPhase::Active);
                    self.one_request(id);
                } else if self.creates_by_name(&r.nodeset) {
                    self.plan.gce.push(GceStep::CreateInstances { request: id, mig: r.mig.clone() });
                } else {
                    self.plan.gce.push(GceStep::InsertResizeRequest { request: id, mig: r.mig.clone() });
                }
            }
            RequestPhase::Active | RequestPhase::Releasing => {
                let wanted = self.wanted(&r);
                self.active_request(&r, &wanted)
            }
            RequestPhase::Succeeded => {
                if mig_seen == Some(false) && self.members(&r).iter().all(|(_, s)| *s != NodeState::Up) {
                    self.update_request(id, |r| r.phase = RequestPhase::Done);
                }
            }
            RequestPhase::Failed => {
                if mig_seen == Some(false) {
                    self.update_request(id, |r| r.phase = RequestPhase::Done);
                } else if mig_seen == Some(true) {
                    let why = r.last_error.clone().unwrap_or_else(|| "request failed".into());
                    self.delete_mig(&r.mig, &why);
                }
            }
            RequestPhase::Done => {}
        }
    }

    /// Records where GCE put the group's VMs ([`Request::zone`]): the zones of the VMs this pass
    /// lists that its MIG created for its nodes, distinct, sorted, joined with `,` (one zone for a
    /// resize request; a MIG that lets GCE spread its VMs may have several). While the group is in
    /// flight a zone seen later is added; once it succeeded or failed, only a group with no zone yet
    /// is looked at (its VMs may be listed a pass after the success), and after that it is kept.
    /// Only the group's own nodes are looked up, and only then: a steady pass, whose groups all
    /// have their zone, does nothing here per node.
    fn note_zone(&mut self, r: &Request) {
        let o: &Observed = self.o;
        let Some(vms) = o.vms.as_ref() else { return };
        let mut zones: std::collections::BTreeSet<&str> =
            r.zone.as_deref().into_iter().flat_map(|z| z.split(',')).collect();
        let known = zones.len();
        for n in &r.nodes {
            if let Some(vm) =
                vms.get(n).filter(|vm| vm.mig.as_deref() == Some(r.mig.as_str()) && !vm.zone.is_empty())
            {
                zones.insert(vm.zone.as_str());
            }
        }
        if zones.len() > known {
            let zone = zones.into_iter().collect::<Vec<_>>().join(",");
            self.update_request(r.id, |x| x.zone = Some(zone));
        }
    }

    pub(super) fn update_request(&mut self, id: i64, f: impl FnOnce(&mut Request)) {
        if let Some(r) = self.requests.get_mut(&id) {
            f(r);
            r.updated_at = self.now;
        }
    }

    /// The request will bring no VM: its nodes go back to powered-down (usable), Slurm is told. A
    /// static node it failed stays wanted instead: it waits for a VM (asked again when its
    /// nodeset's backoff ends, rule 4) and Slurm has it DOWN with the cause meanwhile — never
    /// powered down, so that Slurm expects it when its next VM's slurmd registers.
    pub(super) fn release_members(&mut self, r: &Request, error: Option<&str>) {
        for (name, state) in self.members(r) {
            let is_static = self.nodes.get(name).is_some_and(|n| n.is_static);
            if let (NodeState::Requested, Some(e), true) = (state, error, is_static) {
                self.set_state(name, NodeState::ResumePending);
                if let Some(n) = self.nodes.get_mut(name) {
                    n.mig = None;
                    n.request_id = None;
                    n.last_error = Some(e.to_string());
                }
                self.clear_vm(name);
                if self.slurm_node(name).is_none_or(|s| !s.is_down()) {
                    self.slurm_update(
                        name,
                        NodeStateChange::Down,
                        Some(format!("{REASON_PREFIX} {e}; re-provisioning")),
                    );
                }
                continue;
            }
            match state {
                NodeState::Requested | NodeState::Suspending => {
                    let was_requested = state == NodeState::Requested;
                    self.set_state(name, NodeState::PoweredDown);
                    if let Some(n) = self.nodes.get_mut(name) {
                        n.mig = None;
                        // A node Slurm gave up on (ResumeTimeout) keeps that as its cause: the
                        // request was only cancelled because of it.
                        let keep = !was_requested && n.last_error.is_some();
                        if let (Some(e), false) = (error, keep) {
                            n.last_error = Some(e.to_string());
                        }
                    }
                    self.clear_vm(name);
                    if was_requested {
                        if let Some(e) = error {
                            self.power_down_force(name, e);
                            self.job_may_start_again(name);
                        }
                    }
                }
                _ => {}
            }
        }
    }

    fn active_request(&mut self, r: &Request, wanted: &[&str]) {
        let o = self.o;
        let rr = match o.requests.get(&r.mig) {
            None => return, // not polled this pass (the get failed): nothing is decided
            Some(PolledRequest::NotFound) => {
                if self.o.migs.as_ref().is_some_and(|m| !m.contains_key(&r.mig)) {
                    let why = format!("MIG {} was deleted outside slurm-dws", r.mig);
                    self.fail_request(r, &why, None);
                } else {
                    // The insert never took effect (or GCE forgot it): send it again.
                    self.update_request(r.id, |r| r.phase = RequestPhase::MigReady);
                }
                return;
            }
            Some(PolledRequest::Found(rr)) => rr,
        };
        if r.gce_state.as_ref() != Some(&rr.state) {
            self.update_request(r.id, |x| x.gce_state = Some(rr.state.clone()));
        }
        match &rr.state {
            GceRequestState::Succeeded => {
                self.update_request(r.id, |x| {
                    x.phase = RequestPhase::Succeeded;
                    x.last_error = None;
                });
                for n in wanted {
                    self.set_state(n, NodeState::Up);
                    if let Some(node) = self.nodes.get_mut(*n) {
                        node.last_error = None;
                    }
                }
                // A success: the nodeset's backoff level is forgotten.
                self.backoffs.remove(&r.nodeset);
                let what = match self.model(&r.nodeset) {
                    ProvisioningModel::Flex | ProvisioningModel::Reservation => {
                        format!("resize request {} in MIG {} SUCCEEDED", r.name, r.mig)
                    }
                    m => format!("{m} VMs created in MIG {}", r.mig),
                };
                self.plan.event(
                    EventKind::RequestSucceeded,
                    r.nodes.clone(),
                    format!("{what}: {} VMs", r.nodes.len()),
                );
            }
            GceRequestState::Cancelled if r.phase == RequestPhase::Releasing && !self.timed_out(r) => {
                self.release_and_request_again(r, wanted);
            }
            state @ (GceRequestState::Failed | GceRequestState::Cancelled) => {
                let cause = match (&rr.error, state, &r.last_error) {
                    (Some((code, msg)), _, _) => format!("{code}: {msg}"),
                    (None, GceRequestState::Cancelled, Some(why)) => why.clone(),
                    (None, state, _) => format!("{state} without an error from GCE"),
                };
                let why = if self.creates_by_name(&r.nodeset) {
                    format!("creating VMs in MIG {} {}: {}", r.mig, state, cause)
                } else {
                    format!("resize request {} in MIG {} {}: {}", r.name, r.mig, state, cause)
                };
                // Every failure GCE gave a reason for backs the nodeset off, each class with its
                // own words; so does a cancel for queue_timeout (no capacity came), and a cancel
                // slurm-dws made for a suspend does not.
                let policy = rr.error.as_ref().and_then(|(code, _)| PolicyFailure::of_recorded(code));
                if policy.is_some() {
                    self.plan.event(
                        EventKind::PolicyRefused,
                        vec![],
                        format!("nodeset {}: {why}", r.nodeset),
                    );
                }
                let class = match (&rr.error, state) {
                    (Some(_), _) if policy.is_some() => Some(BackoffClass::Placement),
                    (Some(_), _) if rr.capacity_error => Some(BackoffClass::Capacity),
                    (Some(_), GceRequestState::Failed) => Some(BackoffClass::Error),
                    (None, GceRequestState::Cancelled) if self.timed_out(r) => {
                        Some(BackoffClass::QueueTimeout)
                    }
                    _ => None,
                };
                self.fail_request(r, &why, class);
            }
            _ => {
                // While Releasing, the error says why the request is being cancelled.
                if rr.last_attempt.is_some()
                    && rr.last_attempt != r.last_error
                    && r.phase != RequestPhase::Releasing
                {
                    let la = rr.last_attempt.clone();
                    self.update_request(r.id, |x| x.last_error = la);
                }
                let queue_timeout = self.queue_timeout(r);
                let suspended: Vec<String> = self
                    .members(r)
                    .into_iter()
                    .filter(|(_, s)| *s == NodeState::Suspending)
                    .map(|(n, _)| n.to_string())
                    .collect();
                if wanted.is_empty() {
                    let why = "cancelled: every node of the request was suspended";
                    if self.creates_by_name(&r.nodeset) {
                        self.abandon_creation(r, why);
                        return;
                    }
                    self.update_request(r.id, |x| x.last_error = Some(why.into()));
                    self.plan.gce.push(GceStep::CancelResizeRequest { request: r.id, mig: r.mig.clone() });
                } else if self.timed_out(r) {
                    let why = format!(
                        "queued for longer than queue_timeout ({queue_timeout}s){}",
                        rr.last_attempt
                            .as_deref()
                            .map(|l| format!("; last attempt: {l}"))
                            .unwrap_or_default()
                    );
                    if r.last_error.as_deref() != Some(why.as_str()) {
                        self.plan.event(
                            EventKind::QueueTimeout,
                            r.nodes.clone(),
                            format!("resize request {} in MIG {}: {why}; cancelling", r.name, r.mig),
                        );
                    }
                    if self.creates_by_name(&r.nodeset) {
                        // No resize request to cancel: the group fails now (its MIG, and the VMs
                        // being made in it, are deleted), without a backoff, as a flex timeout does.
                        let why = format!("VMs in MIG {} not created: {why}", r.mig);
                        self.fail_request(r, &why, None);
                        return;
                    }
                    self.update_request(r.id, |x| x.last_error = Some(why));
                    self.plan.gce.push(GceStep::CancelResizeRequest { request: r.id, mig: r.mig.clone() });
                } else if self.creates_by_name(&r.nodeset) {
                    // VMs being created by name have URLs as soon as they exist: a node suspended
                    // meanwhile has its VM deleted once the group's creation is done.
                } else if r.phase == RequestPhase::Releasing {
                    // The cancel is under way (its outbox entry resends the same requestId).
                    self.plan.gce.push(GceStep::CancelResizeRequest { request: r.id, mig: r.mig.clone() });
                } else if !suspended.is_empty() {
                    // Queued VMs have no URL, and a regional MIG's deleteInstances takes URLs only:
                    // the one way to release them is to cancel their request (docs/gce-facts.md).
                    let why = format!(
                        "cancelled to release {} (suspended while queued); {} requested again in a new resize request",
                        crate::hostlist::compress(&suspended),
                        crate::hostlist::compress(wanted)
                    );
                    self.plan.event(
                        EventKind::RequestReleasing,
                        r.nodes.clone(),
                        format!("resize request {} in MIG {}: {why}", r.name, r.mig),
                    );
                    self.update_request(r.id, |x| {
                        x.phase = RequestPhase::Releasing;
                        x.last_error = Some(why);
                    });
                    self.plan.gce.push(GceStep::CancelResizeRequest { request: r.id, mig: r.mig.clone() });
                }
            }
        }
    }

    fn queue_timeout(&self, r: &Request) -> i64 {
        self.cfg.nodesets.get(&r.nodeset).map_or(0, |n| n.queue_timeout) as i64
    }

    /// Queued past its nodeset's `queue_timeout`.
    fn timed_out(&self, r: &Request) -> bool {
        let queue_timeout = self.queue_timeout(r);
        queue_timeout > 0 && secs_since(self.now, r.created_at) > queue_timeout
    }

    /// A request cancelled to release some of its queued nodes is CANCELLED: those nodes are powered
    /// down, the ones still wanted go back to waiting for a VM (grouped into a new request in this
    /// round, for the same job: Slurm is not told anything, the job keeps waiting), and the MIG goes.
    fn release_and_request_again(&mut self, r: &Request, wanted: &[&str]) {
        let why = r.last_error.clone().unwrap_or_else(|| "cancelled to release suspended nodes".into());
        for n in wanted {
            self.set_state(n, NodeState::ResumePending);
            if let Some(node) = self.nodes.get_mut(*n) {
                node.request_id = None;
                node.mig = None;
            }
        }
        self.release_members(r, None);
        self.update_request(r.id, |x| x.phase = RequestPhase::Failed);
        self.plan.event(
            EventKind::RequestFailed,
            r.nodes.clone(),
            format!("resize request {} in MIG {} CANCELLED: {why}", r.name, r.mig),
        );
        self.delete_mig(&r.mig, &why);
    }

    fn fail_request(&mut self, r: &Request, why: &str, backoff: Option<BackoffClass>) {
        self.update_request(r.id, |x| {
            x.phase = RequestPhase::Failed;
            x.last_error = Some(why.to_string());
        });
        self.plan.event(EventKind::RequestFailed, r.nodes.clone(), why.to_string());
        if let Some(class) = backoff {
            let reason = format!("{}: {why}", class.words());
            let mut b = next_backoff(self.cfg, self.backoffs.get(&r.nodeset), &reason, self.now);
            b.nodeset = r.nodeset.clone();
            self.plan.event(
                EventKind::Backoff,
                vec![],
                format!(
                    "nodeset {}: backoff until {} (level {}): {reason}",
                    r.nodeset,
                    b.until.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
                    b.level
                ),
            );
            self.backoffs.insert(r.nodeset.clone(), b);
        }
        // After the backoff is set: the requeued jobs may start again when it ends.
        self.release_members(r, Some(why));
        self.delete_mig(&r.mig, why);
    }
}
