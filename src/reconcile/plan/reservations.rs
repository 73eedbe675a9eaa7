//! Rule 7: end-of-life reservations that no longer belong to an up node are removed, and ones on
//! record that Slurm lost are made again.

use super::*;
use std::collections::HashSet;

impl Planner<'_> {
    pub(super) fn reservations(&mut self) {
        let Some(existing) = self.o.reservations.as_ref() else { return };
        let kept: HashSet<&String> = self.nodes.values().filter_map(|n| n.reservation.as_ref()).collect();
        let planned: BTreeSet<String> = self
            .plan
            .slurm
            .iter()
            .filter_map(|s| match s {
                SlurmStep::DeleteReservation { name } => Some(name.clone()),
                _ => None,
            })
            .collect();
        let stale: Vec<String> = existing
            .iter()
            .filter(|r| r.starts_with(EOL_PREFIX) && !kept.contains(r) && !planned.contains(*r))
            .cloned()
            .collect();
        for name in stale {
            self.plan.slurm.push(SlurmStep::DeleteReservation { name });
        }
        // A reservation on record that Slurm lost (slurmctld state wiped): make it again.
        let lost: Vec<String> = self
            .nodes
            .values()
            .filter(|n| n.state == NodeState::Up)
            .filter(|n| n.reservation.as_ref().is_some_and(|r| !existing.contains(r)))
            .filter(|n| {
                !self
                    .plan
                    .slurm
                    .iter()
                    .any(|s| matches!(s, SlurmStep::CreateReservation { node, .. } if node == &n.name))
            })
            .map(|n| n.name.clone())
            .collect();
        for name in lost {
            if let Some(n) = self.nodes.get_mut(&name) {
                n.reservation = None;
            }
            self.up_node(&name);
        }
    }
}
