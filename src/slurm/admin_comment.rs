//! `scontrol update jobid=J AdminComment=...`: the one line slurm-dws keeps on a job waiting for
//! capacity (`crate::waiting`), and its clearing.

use super::{command, Slurm, SlurmError};

impl Slurm {
    /// Sets job `job_id`'s AdminComment to `text` (empty: clears it), one call. A job that has
    /// ended or left Slurm's memory is not an error: there is nothing left to tell.
    pub async fn set_admin_comment(&self, job_id: u32, text: &str) -> Result<(), SlurmError> {
        // One argv word (no shell): scontrol takes the rest of `AdminComment=` as the value.
        let args = vec!["update".to_string(), format!("jobid={job_id}"), format!("AdminComment={text}")];
        let out = command::run(&self.bin_dir, self.conf.as_deref(), self.timeout, "scontrol", &args).await?;
        let gone = ["Invalid job id", "already completed", "already finished"];
        if out.success || gone.iter().any(|g| out.stderr.contains(g)) {
            Ok(())
        } else {
            Err(command::failed("scontrol", &args, &out))
        }
    }
}
