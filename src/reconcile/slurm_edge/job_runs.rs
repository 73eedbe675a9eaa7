//! The runs slurmdbd's accounting (`sacct`) keeps of jobs Slurm no longer shows, for the usage
//! spans restored at a start (`plan/usage.rs` decides where they end).

use crate::reconcile::types::JobRun;
use crate::slurm::Slurm;

/// The runs of `job_ids` in one `sacct` call; `None` (with one WARN) when it failed: the spans
/// then close as without slurmdbd.
pub async fn job_runs(slurm: &Slurm, job_ids: &[u64]) -> Option<Vec<JobRun>> {
    match slurm.ended_jobs(job_ids).await {
        Ok(runs) => {
            tracing::info!(
                jobs = job_ids.len(),
                runs = runs.len(),
                "read from slurmdbd when the jobs that ended while the daemon was down ended"
            );
            Some(runs.into_iter().map(|r| JobRun { job_id: r.job_id, start: r.start, end: r.end }).collect())
        }
        Err(error) => {
            tracing::warn!(
                %error,
                jobs = job_ids.len(),
                "cannot read from slurmdbd (sacct) when the jobs that ended while the daemon was down ended: their usage spans close at this pass"
            );
            None
        }
    }
}
