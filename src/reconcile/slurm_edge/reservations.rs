//! Slurm reservations slurm-dws makes: the end-of-life maintenance reservation of a node whose VM
//! has a termination time (`plan/reservations.rs` decides them), and what a round's reservation
//! steps tell the next round.

use crate::reconcile::types::{Observed, SlurmStep};
use crate::slurm::{Slurm, SlurmError};
use chrono::{DateTime, Utc};

/// The flags of every reservation slurm-dws makes: maintenance, made even over running jobs.
pub const FLAGS: &str = "maint,ignore_jobs";

/// `scontrol create reservation` of `node` from `start` to `end`.
pub async fn create(
    slurm: &Slurm,
    name: &str,
    node: &str,
    start: DateTime<Utc>,
    end: DateTime<Utc>,
) -> Result<(), SlurmError> {
    slurm.create_reservation(name, node, start, end, FLAGS).await
}

/// `scontrol delete reservation`; one already gone is not an error.
pub async fn delete(slurm: &Slurm, name: &str) -> Result<(), SlurmError> {
    slurm.delete_reservation(name).await.map(|_| ())
}

/// What a round's Slurm steps tell the next round: the end-of-life reservations it deleted or
/// made (so that a later round neither deletes one again as stale nor takes it for Slurm's).
pub fn learn(step: &SlurmStep, observed: &mut Observed) {
    let Some(reservations) = observed.reservations.as_mut() else { return };
    match step {
        SlurmStep::DeleteReservation { name } => {
            reservations.remove(name);
        }
        SlurmStep::CreateReservation { name, .. } => {
            reservations.insert(name.clone());
        }
        _ => {}
    }
}
