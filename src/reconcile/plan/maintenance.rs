//! Rule 7b: upcoming maintenance. A node whose VM GCE will maintain (`resourceStatus.upcomingMaintenance`,
//! read from the VM list every pass makes) gets a Slurm reservation `slurm-dws-maint-{node}` over the
//! window, so that no job is started that would still run when the host goes down; the reservation
//! follows the window when GCE moves it and goes when the maintenance is over or cancelled (GCE no
//! longer lists it), or when the node's VM is gone.
//!
//! The window is recorded on the node (`Node::maintenance`, what `explain` shows): an event
//! `maintenance_scheduled` when GCE announces or moves it, `maintenance_done` when it goes. The
//! reservation is made through the same machinery as the end-of-life reservations of flex nodes
//! (`SlurmStep::CreateReservation`: flags `maint,ignore_jobs`, so that it is made over a job that is
//! running now — that job is not touched — and may overlap the node's end-of-life reservation), at
//! most [`MAX_RESERVATIONS_PER_ROUND`] a round. A window with no end lasts
//! [`DEFAULT_WINDOW_SECS`] (docs/gce-facts.md). `maintenance_reservation = false` on a nodeset: the
//! window is recorded and told, but no reservation is made (one made before is removed).
//!
//! Nothing is concluded from a VM list that failed, or that left out a zone the VM could be in
//! ([`Sight::Unknown`]): the record and the reservation stay.

use super::*;

/// Prefix of the maintenance reservations slurm-dws makes.
pub const MAINT_PREFIX: &str = "slurm-dws-maint-";

/// How long a maintenance window that GCE gives no end for is reserved: three hours. GCE does not
/// say how long a host maintenance takes; a GPU VM is given an hour's notice before it is stopped,
/// can take up to an hour to stop, and then restarts once the host is back (docs/gce-facts.md).
/// The reservation goes earlier when GCE stops listing the maintenance.
pub const DEFAULT_WINDOW_SECS: i64 = 3 * 3600;

/// The maintenance reservation's name for a node.
pub fn maint_reservation(node: &str) -> String {
    format!("{MAINT_PREFIX}{node}")
}

/// When a maintenance reservation over `m` starts and ends: from the window's start (or a minute
/// from `now`, once the window has begun: Slurm refuses a reservation that starts in the past) to
/// its end, or [`DEFAULT_WINDOW_SECS`] after its start when GCE gave no end. `None` when GCE gave no
/// start, or the window is over.
pub fn reservation_span(m: &Maintenance, now: DateTime<Utc>) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
    let start = m.window_start_time?;
    let end = m.window_end_time.unwrap_or(start + chrono::Duration::seconds(DEFAULT_WINDOW_SECS));
    let from = start.max(now + chrono::Duration::seconds(60));
    (end > from).then_some((from, end))
}

/// Whether two records of a node's maintenance are the same window (a change of status or reasons
/// alone does not move the reservation).
fn same_window(a: &Maintenance, b: &Maintenance) -> bool {
    (a.window_start_time, a.window_end_time) == (b.window_start_time, b.window_end_time)
}

impl Planner<'_> {
    pub(super) fn maintenance(&mut self) {
        let Some(vms) = self.o.vms.as_ref() else { return };
        // Only the VMs GCE announces a maintenance for: the rest cost one test each.
        let announced: Vec<(&str, &Maintenance)> = vms
            .values()
            .filter(|vm| !being_deleted(vm))
            .filter_map(|vm| Some((vm.name.as_str(), vm.maintenance.as_deref()?)))
            .collect();
        let mut made = 0;
        for (name, m) in announced {
            made += self.maintenance_announced(name, m, made);
        }
        let recorded: Vec<String> =
            self.nodes.values().filter(|n| n.maintenance.is_some()).map(|n| n.name.clone()).collect();
        for name in recorded {
            self.maintenance_ended(&name);
        }
        self.stale_maintenance_reservations();
    }

    /// A VM GCE announces maintenance `m` for: recorded on its node (with an event when new or
    /// moved), and its reservation made or moved. Returns how many reservations it made (0 or 1).
    fn maintenance_announced(&mut self, name: &str, m: &Maintenance, made: usize) -> usize {
        let Some(node) = self.nodes.get(name) else { return 0 };
        let before = node.maintenance.clone();
        let reserve = self.cfg.nodesets.get(&node.nodeset).is_some_and(|ns| ns.maintenance_reservation);
        let reservation = maint_reservation(name);
        let span = reservation_span(m, self.now);
        if before.as_deref() != Some(m) {
            if let Some(n) = self.nodes.get_mut(name) {
                n.maintenance = Some(Box::new(m.clone()));
            }
            if before.as_ref().is_none_or(|b| !same_window(b, m)) {
                let what = match &before {
                    Some(b) => format!("moved from {}: {}", window(b), m.describe()),
                    None => m.describe(),
                };
                let outcome = match (reserve, span) {
                    (true, Some((s, e))) => {
                        format!("reservation {reservation} from {} to {}", rfc(s), rfc(e))
                    }
                    (true, None) => "no reservation: the window has no start or is over".to_string(),
                    (false, _) => "no reservation: maintenance_reservation = false".to_string(),
                };
                self.plan.event(
                    EventKind::MaintenanceScheduled,
                    vec![name.to_string()],
                    format!("GCE will maintain the node's VM: {what}; {outcome}"),
                );
            }
        }
        let exists = self.o.reservations.as_ref().map(|r| r.contains(&reservation));
        match (reserve, span, exists) {
            // Slurm's reservations unread: nothing is known of it, nothing is done.
            (_, _, None) => 0,
            (true, Some((start, end)), Some(exists)) => {
                // Made again over the new window when GCE moved it (or when the record, lost or
                // never written, cannot say which window the one in Slurm covers).
                let moved = before.as_ref().is_none_or(|b| !same_window(b, m));
                if exists && !moved {
                    return 0;
                }
                if made >= MAX_RESERVATIONS_PER_ROUND {
                    return 0; // the next round finds it wanting
                }
                if exists {
                    self.plan.slurm.push(SlurmStep::DeleteReservation { name: reservation.clone() });
                }
                self.plan.slurm.push(SlurmStep::CreateReservation {
                    name: reservation,
                    node: name.to_string(),
                    start,
                    end,
                });
                1
            }
            (_, _, Some(true)) => {
                // Not wanted (the nodeset says no, or the window is over): it goes.
                self.plan.slurm.push(SlurmStep::DeleteReservation { name: reservation });
                0
            }
            (_, _, Some(false)) => 0,
        }
    }

    /// A node with a maintenance on record whose VM GCE no longer announces one for (the
    /// maintenance is over or cancelled), or whose VM is gone: the record and the reservation go.
    fn maintenance_ended(&mut self, name: &str) {
        let why = match self.sight(name) {
            Sight::Unknown => return,
            Sight::Seen(vm) if vm.maintenance.is_some() && !being_deleted(vm) => return,
            Sight::Seen(vm) if being_deleted(vm) => "the node's VM is being deleted",
            Sight::Seen(_) => {
                let began = self
                    .nodes
                    .get(name)
                    .and_then(|n| n.maintenance.as_ref()?.window_start_time)
                    .is_some_and(|s| s <= self.now);
                if began {
                    "the maintenance is over"
                } else {
                    "GCE cancelled the maintenance"
                }
            }
            Sight::Gone => "the node's VM is gone",
        };
        let Some(m) = self.nodes.get_mut(name).and_then(|n| n.maintenance.take()) else { return };
        let reservation = maint_reservation(name);
        let removed = if self.o.reservations.as_ref().is_some_and(|r| r.contains(&reservation)) {
            self.plan.slurm.push(SlurmStep::DeleteReservation { name: reservation.clone() });
            format!("; reservation {reservation} removed")
        } else {
            String::new()
        };
        self.plan.event(
            EventKind::MaintenanceDone,
            vec![name.to_string()],
            format!("{why} ({}){removed}", m.describe()),
        );
    }

    /// Maintenance reservations in Slurm that no recorded window explains (the record was lost, the
    /// nodeset no longer wants them, the window ended while a round left it): removed, unless the
    /// node's VM is unknown this pass.
    fn stale_maintenance_reservations(&mut self) {
        let Some(existing) = self.o.reservations.as_ref() else { return };
        let planned: BTreeSet<&str> = self
            .plan
            .slurm
            .iter()
            .filter_map(|s| match s {
                SlurmStep::DeleteReservation { name } => Some(name.as_str()),
                _ => None,
            })
            .collect();
        let stale: Vec<String> = existing
            .iter()
            .filter(|r| r.starts_with(MAINT_PREFIX) && !planned.contains(r.as_str()))
            .filter(|r| {
                let node = &r[MAINT_PREFIX.len()..];
                let wanted = self.nodes.get(node).is_some_and(|n| {
                    n.maintenance.as_ref().is_some_and(|m| reservation_span(m, self.now).is_some())
                        && self.cfg.nodesets.get(&n.nodeset).is_some_and(|ns| ns.maintenance_reservation)
                });
                !wanted && !matches!(self.sight(node), Sight::Unknown)
            })
            .cloned()
            .collect();
        for name in stale {
            self.plan.slurm.push(SlurmStep::DeleteReservation { name });
        }
    }
}

/// A window as `START to END` for the events.
fn window(m: &Maintenance) -> String {
    let t = |t: Option<DateTime<Utc>>| t.map_or_else(|| "?".to_string(), rfc);
    format!("{} to {}", t(m.window_start_time), t(m.window_end_time))
}

fn rfc(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}
