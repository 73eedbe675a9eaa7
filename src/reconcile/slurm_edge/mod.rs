//! The reconciler's edge to Slurm: a planner's [`SlurmStep`] carried out through `scontrol`, the
//! nodes a hook named that are not ours set DOWN, the waiting jobs' `slurm-dws:` AdminComments, and
//! the topology file. What Slurm shows is read by the observe phase through [`crate::slurm`].
//!
//! # Files
//! | file               | one job                                                                 |
//! |--------------------|-------------------------------------------------------------------------|
//! | `node_updates.rs`  | node state, reason and address updates, each batched over a hostlist  |
//! | `reservations.rs`  | the end-of-life reservations made and deleted, and what the next round learns |
//! | `admin_comment.rs` | the `slurm-dws:` AdminComment of each waiting job                        |
//! | `topology.rs`      | the Slurm topology file from GCE's physical host topology               |
//! | `job_runs.rs`      | slurmdbd's runs (`sacct`) of jobs that ended while the daemon was down   |
//!
//! The edge answers the pass: it takes the planner's vocabulary (`types`) and returns what Slurm
//! said; it never imports a phase of the pass (`tests/architecture.rs` keeps it so).

pub mod admin_comment;
pub mod job_runs;
pub mod node_updates;
pub mod reservations;
pub mod topology;

use crate::reconcile::types::SlurmStep;
use crate::slurm::{Slurm, SlurmError};

/// Carries out one step of a plan: one `scontrol` call.
pub async fn run(slurm: &Slurm, step: &SlurmStep) -> Result<(), SlurmError> {
    match step {
        SlurmStep::UpdateState { nodes, state, reason } => {
            node_updates::update_state(slurm, nodes, *state, reason.as_deref()).await
        }
        SlurmStep::SetAddr { node, addr } => node_updates::set_addr(slurm, node, addr).await,
        SlurmStep::CreateReservation { name, node, start, end } => {
            reservations::create(slurm, name, node, *start, *end).await
        }
        SlurmStep::DeleteReservation { name } => reservations::delete(slurm, name).await,
        SlurmStep::SetJobsBegin { jobs, begin } => slurm.set_jobs_begin(jobs, *begin).await,
        SlurmStep::RequeueJobsOn { nodes } => requeue_jobs_on(slurm, nodes).await,
    }
}

/// `scontrol requeue` of the jobs running on `nodes` (none: nothing to do).
async fn requeue_jobs_on(slurm: &Slurm, nodes: &[String]) -> Result<(), SlurmError> {
    let mut jobs = Vec::new();
    for node in nodes {
        let live = |j: &crate::slurm::JobInfo| {
            matches!(j.state.as_str(), "RUNNING" | "CONFIGURING" | "SUSPENDED" | "STOPPED")
        };
        jobs.extend(slurm.jobs_on_node(node).await?.into_iter().filter(live).map(|j| j.job_id));
    }
    jobs.sort_unstable();
    jobs.dedup();
    if jobs.is_empty() {
        return Ok(());
    }
    slurm.requeue(&jobs).await
}
