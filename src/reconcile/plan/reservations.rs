//! Rule 7: end-of-life reservations that no longer belong to an up node are removed (only when
//! Slurm and GCE were both read, never one whose node GCE lists a VM for, each with an event), and
//! ones on record that Slurm lost are made again. The up nodes' missing reservations are made at
//! most [`MAX_RESERVATIONS_PER_ROUND`] a round, the soonest to start first.

use super::*;
use rustc_hash::FxHashSet;

impl Planner<'_> {
    pub(super) fn reservations(&mut self) {
        let Some(existing) = self.o.reservations.as_ref() else { return };
        let mut kept = FxHashSet::with_capacity_and_hasher(existing.len(), Default::default());
        kept.extend(self.nodes.values().filter_map(|n| n.reservation.as_ref()));
        let planned: BTreeSet<String> = self
            .plan
            .slurm
            .iter()
            .filter_map(|s| match s {
                SlurmStep::DeleteReservation { name } => Some(name.clone()),
                _ => None,
            })
            .collect();
        // Stale only when Slurm and GCE were both read: with either unread, the node may be up and
        // running a job that the record does not know of yet (database lost), and its VM still
        // ends at the reservation's start. A node whose VM GCE lists keeps its reservation too.
        let stale: Vec<String> = if self.saw_everything() {
            existing
                .iter()
                .filter(|r| r.starts_with(EOL_PREFIX) && !kept.contains(r) && !planned.contains(*r))
                .filter(|r| self.vm(&r[EOL_PREFIX.len()..]).is_none_or(being_deleted))
                .cloned()
                .collect()
        } else {
            Vec::new()
        };
        for name in stale {
            let node = name[EOL_PREFIX.len()..].to_string();
            self.delete_reservation(&name, &node, "no VM backs the node");
        }
        // A reservation on record that Slurm lost (slurmctld state wiped): make it again. (A node
        // this round makes one for has none on record yet: `make_reservations`, after this, records
        // it.)
        let lost: Vec<String> = self
            .nodes
            .values()
            .filter(|n| n.state == NodeState::Up)
            .filter(|n| n.reservation.as_ref().is_some_and(|r| !existing.contains(r)))
            .map(|n| n.name.clone())
            .collect();
        for name in lost {
            if let Some(n) = self.nodes.get_mut(&name) {
                n.reservation = None;
            }
            self.up_node(&name);
        }
    }

    /// Makes the end-of-life reservations the up nodes lack ([`Planner::up_node`] found them), the
    /// soonest to start first and at most [`MAX_RESERVATIONS_PER_ROUND`]: a node left out has none
    /// on record, so the next round finds it wanting again.
    pub(super) fn make_reservations(&mut self) {
        let mut wanted = std::mem::take(&mut self.eol_wanted);
        wanted.sort_by(|a, b| (a.start, &a.node).cmp(&(b.start, &b.node)));
        wanted.dedup_by(|a, b| a.node == b.node);
        wanted.truncate(MAX_RESERVATIONS_PER_ROUND);
        for EolWanted { node, start, end } in wanted {
            let name = eol_reservation(&node);
            if let Some(n) = self.nodes.get_mut(&node) {
                n.reservation = Some(name.clone());
            }
            self.plan.slurm.push(SlurmStep::CreateReservation { name, node, start, end });
        }
    }
}
