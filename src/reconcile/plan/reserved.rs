//! Reserved capacity (`provisioning_model = "reservation"`): a nodeset's nodes take jobs only
//! inside its reservation's window, and a job group is never larger than the reservation.
//!
//! - Before the window opens, a Slurm reservation `slurm-dws-window-{nodeset}-{start}` holds every
//!   node of the nodeset from now to the window's start (maintenance, over running jobs): Slurm
//!   keeps their jobs PENDING with the window's start as their expected start (`squeue --start`).
//!   Its name carries the start (Unix seconds), so a window GCE moves gets a new hold and the old
//!   one goes. A node resumed anyway is answered at once and its job may start again at the
//!   window's start (`window_closed`).
//! - Inside the window, groups are asked of GCE as resize requests (all or nothing; GCE queues a
//!   group the reservation can hold but not now). A group larger than the reservation's count can
//!   never fit: it fails at once and its job is requeued (`reservation_too_small`). Each up node's
//!   VM ends with the window, so the end-of-life reservation of `nodes.rs` keeps jobs that would
//!   outlive it off the node from `end − eol_grace`.
//! - At the window's end GCE deletes the reservation and its VMs: the nodes leave service as for
//!   an expired run duration (`window_ended`), static ones wait for the next window, and a node
//!   resumed meanwhile is answered at once.
//! - A reservation that is missing, not READY, or not usable is a refused nodeset (`groups.rs`):
//!   visible, paced by Slurm's requeue hold, never a loop.

use super::*;
use crate::config::ProvisioningModel;
use chrono::Duration;

/// The prefix of the hold a reservation nodeset's nodes get before their window.
pub const WINDOW_PREFIX: &str = "slurm-dws-window-";

/// Where a reservation nodeset stands against its window at `now`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Window {
    /// Not a reservation nodeset, or its reservation was not read this pass: nothing is decided
    /// from the window.
    Unknown,
    /// Open, until `end` (if it has one).
    Open { end: Option<DateTime<Utc>> },
    /// Not open yet: it opens at `start`.
    NotYet { start: DateTime<Utc> },
    /// Over: GCE has deleted (or is deleting) the reservation.
    Ended { end: DateTime<Utc> },
    /// The reservation cannot be consumed (GCE's words).
    Unusable(String),
}

/// The hold of `nodeset`'s nodes until its window opens at `start`.
pub fn window_hold(nodeset: &str, start: DateTime<Utc>) -> String {
    format!("{WINDOW_PREFIX}{nodeset}-{}", start.timestamp())
}

impl Planner<'_> {
    pub(super) fn window(&self, nodeset: &str) -> Window {
        if self.model(nodeset) != ProvisioningModel::Reservation {
            return Window::Unknown;
        }
        let Some(c) = self.o.capacity.get(nodeset) else { return Window::Unknown };
        if let Some(end) = c.window_end.filter(|e| self.now >= *e) {
            return Window::Ended { end };
        }
        if let Some(start) = c.window_start.filter(|s| self.now < *s) {
            return Window::NotYet { start };
        }
        match &c.unusable {
            Some(why) => Window::Unusable(why.clone()),
            None => Window::Open { end: c.window_end },
        }
    }

    /// When a reserved VM of `nodeset` ends: its window's end (`None` for other nodesets, or a
    /// window with no end). Asked for every up node each pass: free when no nodeset is reserved.
    pub(super) fn window_end(&self, nodeset: &str) -> Option<DateTime<Utc>> {
        if self.o.capacity.is_empty() {
            return None;
        }
        self.o.capacity.get(nodeset).and_then(|c| c.window_end)
    }

    /// A node waiting for a VM whose nodeset's window is closed: `true` when it was handled (it
    /// gets no VM this round). A static node waits for the window, quietly; a dynamic one is
    /// answered at once (its job may start again when the window opens). An unusable reservation
    /// is a refused nodeset.
    pub(super) fn outside_window(&mut self, n: &Node) -> bool {
        let url = self.cfg.nodesets.get(&n.nodeset).and_then(|x| x.reservation.clone()).unwrap_or_default();
        let (why, begin) = match self.window(&n.nodeset) {
            Window::Unknown | Window::Open { .. } => return false,
            Window::Unusable(why) => {
                self.refused_nodeset(n, &format!("reservation {url}: {why}"));
                return true;
            }
            Window::NotYet { start } => {
                (format!("the window of {url} opens at {}", rfc3339(start)), Some(start))
            }
            Window::Ended { end } => (format!("the window of {url} ended at {}", rfc3339(end)), None),
        };
        if n.is_static {
            if n.last_error.as_deref() != Some(why.as_str()) {
                if let Some(x) = self.nodes.get_mut(&n.name) {
                    x.last_error = Some(why);
                }
            }
            return true;
        }
        self.set_state(&n.name, NodeState::PoweredDown);
        if let Some(x) = self.nodes.get_mut(&n.name) {
            x.last_error = Some(why.clone());
        }
        self.power_down_force(&n.name, &why);
        if let (Some(begin), Some(job)) = (begin, n.job_id) {
            self.job_begins.entry(begin).or_default().insert(job);
        }
        self.plan.event(EventKind::WindowClosed, vec![n.name.clone()], format!("resume answered: {why}"));
        true
    }

    /// A new group of `size` nodes of `nodeset`: the reason it can never be met (more than the
    /// reservation holds), or `None`.
    pub(super) fn too_large_for_reservation(&self, nodeset: &str, size: usize) -> Option<String> {
        if self.model(nodeset) != ProvisioningModel::Reservation {
            return None;
        }
        let c = self.o.capacity.get(nodeset)?;
        let url = c.reservation.as_deref().unwrap_or("the reservation");
        (c.reservation.is_some() && size > c.count as usize).then(|| {
            format!(
                "a group of {size} nodes cannot fit {url}, which holds {} VMs: never provisioned in part",
                c.count
            )
        })
    }

    /// The window holds: each reservation nodeset whose window has not opened has its nodes held
    /// by a Slurm reservation until the start; any other hold of ours goes (the window opened or
    /// moved, or the nodeset is gone). Only when Slurm's reservations were read.
    pub(super) fn window_holds(&mut self) {
        let Some(existing) = self.o.reservations.as_ref() else { return };
        let mut wanted = BTreeMap::new();
        for (name, ns) in &self.cfg.nodesets {
            if let Window::NotYet { start } = self.window(name) {
                let all = self.cfg.naming.all_nodes(name);
                if all.is_empty() {
                    continue;
                }
                let nodes = crate::hostlist::compress(&all);
                wanted.insert(window_hold(name, start), (name.clone(), nodes, start, ns.reservation.clone()));
            }
        }
        let stale: Vec<String> = existing
            .iter()
            .filter(|r| r.starts_with(WINDOW_PREFIX) && !wanted.contains_key(*r))
            .cloned()
            .collect();
        for name in stale {
            self.plan.slurm.push(SlurmStep::DeleteReservation { name: name.clone() });
            self.plan.event(
                EventKind::WindowHold,
                vec![],
                format!(
                    "Slurm reservation {name} removed: its window opened, moved or is no longer configured"
                ),
            );
        }
        for (hold, (nodeset, nodes, start, url)) in wanted {
            if existing.contains(&hold) || start <= self.now + Duration::seconds(60) {
                continue;
            }
            self.plan.slurm.push(SlurmStep::CreateReservation {
                name: hold.clone(),
                node: nodes,
                start: self.now,
                end: start,
            });
            self.plan.event(
                EventKind::WindowHold,
                vec![],
                format!(
                    "nodeset {nodeset}: Slurm reservation {hold} holds its nodes until the window of {} opens at {}",
                    url.unwrap_or_default(),
                    rfc3339(start)
                ),
            );
        }
    }
}

fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
}
