//! Rules 1 and 2: capacity backoffs that ran out end, and every open request group walks its
//! lifecycle (planned → MIG → resize request → SUCCEEDED, or failed and released).

use super::{secs_since, Planner};
use crate::model::*;
use crate::reconcile::types::*;
use chrono::{DateTime, Duration, Utc};

/// The next backoff after a capacity or quota failure: `initial * 2^level`, at most `max`.
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
    }
}

impl Planner<'_> {
    // 1 ------------------------------------------------------------------------------------------------
    pub(super) fn expire_backoffs(&mut self) {
        // No backoff is ever set longer than backoff_max: one that ends further away than that was
        // set before the wall clock went back, and would block the nodeset for the size of the jump.
        let ended: Vec<(String, bool)> = self
            .backoffs
            .values()
            .filter_map(|b| {
                let clock_went_back = secs_since(b.until, self.now) > self.cfg.backoff_max;
                (b.until <= self.now || clock_went_back).then(|| (b.nodeset.clone(), clock_went_back))
            })
            .collect();
        for (ns, clock_went_back) in ended {
            self.backoffs.remove(&ns);
            self.plan.backoffs_cleared.push(ns.clone());
            let why = if clock_went_back {
                " (it ended further away than backoff_max: the clock went back)"
            } else {
                ""
            };
            self.plan.event(
                EventKind::BackoffEnded,
                vec![],
                format!("nodeset {ns}: capacity backoff ended{why}"),
            );
        }
    }

    // 2 ------------------------------------------------------------------------------------------------
    pub(super) fn request_lifecycle(&mut self) {
        for id in self.requests.keys_now() {
            self.one_request(*id);
        }
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
        let members = self.members(&r);
        let wanted: Vec<&str> =
            members.iter().filter(|(_, s)| *s == NodeState::Requested).map(|(n, _)| *n).collect();
        let mig_seen = self.o.migs.as_ref().map(|m| m.contains_key(&r.mig));
        match r.phase {
            RequestPhase::Planned => {
                if wanted.is_empty() {
                    self.release_members(&r, None);
                    self.update_request(id, |r| r.phase = RequestPhase::Done);
                } else if mig_seen == Some(true) {
                    self.update_request(id, |r| r.phase = RequestPhase::MigReady);
                    self.one_request(id);
                } else {
                    self.plan.gce.push(GceStep::InsertMig {
                        request: id,
                        mig: r.mig.clone(),
                        nodeset: r.nodeset.clone(),
                    });
                }
            }
            RequestPhase::MigReady => {
                if wanted.is_empty() {
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
                } else {
                    self.plan.gce.push(GceStep::InsertResizeRequest { request: id, mig: r.mig.clone() });
                }
            }
            RequestPhase::Active => self.active_request(&r, &wanted),
            RequestPhase::Succeeded => {
                if mig_seen == Some(false) && members.iter().all(|(_, s)| *s != NodeState::Up) {
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

    fn update_request(&mut self, id: i64, f: impl FnOnce(&mut Request)) {
        if let Some(r) = self.requests.get_mut(&id) {
            f(r);
            r.updated_at = self.now;
        }
    }

    /// The request will bring no VM: its nodes go back to powered-down (usable), Slurm is told.
    fn release_members(&mut self, r: &Request, error: Option<&str>) {
        for (name, state) in self.members(r) {
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
                    self.fail_request(r, &why, false);
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
                if self.backoffs.remove(&r.nodeset).is_some() {
                    self.plan.backoffs_cleared.push(r.nodeset.clone());
                }
                self.plan.event(
                    EventKind::RequestSucceeded,
                    r.nodes.clone(),
                    format!("resize request {} in MIG {} SUCCEEDED: {} VMs", r.name, r.mig, r.nodes.len()),
                );
            }
            state @ (GceRequestState::Failed | GceRequestState::Cancelled) => {
                let cause = match (&rr.error, state, &r.last_error) {
                    (Some((code, msg)), _, _) => format!("{code}: {msg}"),
                    (None, GceRequestState::Cancelled, Some(why)) => why.clone(),
                    (None, state, _) => format!("{state} without an error from GCE"),
                };
                let why = format!("resize request {} in MIG {} {}: {}", r.name, r.mig, state, cause);
                self.fail_request(r, &why, rr.capacity_error);
            }
            _ => {
                if rr.last_attempt.is_some() && rr.last_attempt != r.last_error {
                    let la = rr.last_attempt.clone();
                    self.update_request(r.id, |x| x.last_error = la);
                }
                let ns = self.cfg.nodesets.get(&r.nodeset);
                let queue_timeout = ns.map_or(0, |n| n.queue_timeout) as i64;
                if wanted.is_empty() {
                    self.update_request(r.id, |x| {
                        x.last_error = Some("cancelled: every node of the request was suspended".into())
                    });
                    self.plan.gce.push(GceStep::CancelResizeRequest { request: r.id, mig: r.mig.clone() });
                } else if queue_timeout > 0 && secs_since(self.now, r.created_at) > queue_timeout {
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
                    self.update_request(r.id, |x| x.last_error = Some(why));
                    self.plan.gce.push(GceStep::CancelResizeRequest { request: r.id, mig: r.mig.clone() });
                }
            }
        }
    }

    fn fail_request(&mut self, r: &Request, why: &str, capacity: bool) {
        self.update_request(r.id, |x| {
            x.phase = RequestPhase::Failed;
            x.last_error = Some(why.to_string());
        });
        self.plan.event(EventKind::RequestFailed, r.nodes.clone(), why.to_string());
        if capacity {
            let mut b = next_backoff(self.cfg, self.backoffs.get(&r.nodeset), why, self.now);
            b.nodeset = r.nodeset.clone();
            self.plan.event(
                EventKind::Backoff,
                vec![],
                format!(
                    "nodeset {}: capacity backoff until {} (level {}) after: {why}",
                    r.nodeset,
                    b.until.to_rfc3339(),
                    b.level
                ),
            );
            self.backoffs.insert(r.nodeset.clone(), b.clone());
            self.plan.backoffs_set.push(b);
        }
        // After the backoff is set: the requeued jobs may start again when it ends.
        self.release_members(r, Some(why));
        self.delete_mig(&r.mig, why);
    }
}
