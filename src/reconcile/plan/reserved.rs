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
//!   outlive it off the node from `end − eol_grace`; a powered-down node has no VM to end, so a
//!   second hold, `slurm-dws-window-{nodeset}-end-{end}`, covers every node of the nodeset from
//!   `end − eol_grace` to the end: Slurm starts no job there (up or not) that would outlive it.
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

/// The hold of `nodeset`'s nodes over the last `eol_grace` of its window, which ends at `end`.
pub fn window_end_hold(nodeset: &str, end: DateTime<Utc>) -> String {
    format!("{WINDOW_PREFIX}{nodeset}-end-{}", end.timestamp())
}

/// A hold a reservation nodeset wants: over `nodes`, from `start` to `end`, and why (its event);
/// `worth_making` is false for one too short to be made now (kept if Slurm has it).
struct Hold {
    nodeset: String,
    nodes: String,
    start: DateTime<Utc>,
    end: DateTime<Utc>,
    why: String,
    worth_making: bool,
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
            // Out of service in Slurm until its VM runs (as a refused nodeset's static node): Slurm
            // does not wait ResumeTimeout on it, and the node rules resume it, DOWN with our reason,
            // once its VM runs in the window.
            if self.slurm_node(&n.name).is_some_and(|s| !s.is_down()) {
                self.slurm_update(&n.name, NodeStateChange::Down, Some(format!("{REASON_PREFIX} {why}")));
                self.plan.event(
                    EventKind::WindowClosed,
                    vec![n.name.clone()],
                    format!("static node set DOWN: {why}"),
                );
            }
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
    /// by a Slurm reservation until the start, and one whose open window ends has them held over
    /// its last `eol_grace` (no job starts there that would outlive the window); any other hold of
    /// ours goes (the window opened, moved or ended, or the nodeset is gone). Only when Slurm's
    /// reservations were read.
    pub(super) fn window_holds(&mut self) {
        let Some(existing) = self.o.reservations.as_ref() else { return };
        let mut wanted: BTreeMap<String, Hold> = BTreeMap::new();
        for (name, ns) in &self.cfg.nodesets {
            let url = ns.reservation.clone().unwrap_or_default();
            let (hold, start, end, why, worth_making) = match self.window(name) {
                // Not worth a reservation (and Slurm's clock may be a little behind ours) when the
                // window opens within a minute.
                Window::NotYet { start } => (
                    window_hold(name, start),
                    self.now,
                    start,
                    format!("until the window of {url} opens at {}", rfc3339(start)),
                    start > self.now + Duration::seconds(60),
                ),
                Window::Open { end: Some(end) } => {
                    // As an end-of-life reservation: never one that starts in the past.
                    let from =
                        (end - Duration::seconds(ns.eol_grace as i64)).max(self.now + Duration::seconds(60));
                    let why = format!(
                        "from {} s before the window of {url} ends at {}: no job starts that would outlive it",
                        ns.eol_grace,
                        rfc3339(end)
                    );
                    (window_end_hold(name, end), from, end, why, from < end)
                }
                _ => continue,
            };
            let all = self.cfg.naming.all_nodes(name);
            if all.is_empty() {
                continue;
            }
            let nodes = crate::hostlist::compress(&all);
            wanted.insert(hold, Hold { nodeset: name.clone(), nodes, start, end, why, worth_making });
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
                    "Slurm reservation {name} removed: its window opened, moved or ended, or is no longer configured"
                ),
            );
        }
        for (hold, h) in wanted {
            if existing.contains(&hold) || !h.worth_making {
                continue;
            }
            self.plan.slurm.push(SlurmStep::CreateReservation {
                name: hold.clone(),
                node: h.nodes,
                start: h.start,
                end: h.end,
            });
            self.plan.event(
                EventKind::WindowHold,
                vec![],
                format!("nodeset {}: Slurm reservation {hold} holds its nodes {}", h.nodeset, h.why),
            );
        }
    }
}

fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
}
