//! Slurm's client commands against a running cluster: `scontrol`, `sbatch`, `squeue`, `sinfo`, and
//! what the tests read from them (a job's state, the nodes' states).

use std::process::{Command, Stdio};

use crate::cluster::LocalCluster;
use crate::host::run_capture;
use crate::DevclusterError;

impl LocalCluster {
    /// A Slurm client command with this cluster's SLURM_CONF, run from the jobs directory (where
    /// batch output lands).
    pub fn client(&self, program: &str) -> Command {
        let mut cmd = Command::new(self.client_bin_dir().join(program));
        cmd.env("SLURM_CONF", self.conf_path()).current_dir(self.layout.jobs()).stdin(Stdio::null());
        cmd
    }

    /// Runs `scontrol ARGS` and returns its stdout.
    pub fn scontrol(&self, args: &[&str]) -> Result<String, DevclusterError> {
        run_capture(self.client("scontrol").args(args))
    }

    /// `sbatch --parsable ARGS`; returns the job id. Output files land in the jobs directory.
    pub fn sbatch(&self, args: &[&str]) -> Result<u32, DevclusterError> {
        let out = run_capture(self.client("sbatch").arg("--parsable").args(args))?;
        let id = out.trim().split(';').next().unwrap_or_default();
        id.parse().map_err(|_| DevclusterError::Command {
            command: format!("sbatch --parsable {}", args.join(" ")),
            message: format!("unexpected output {out:?}"),
        })
    }

    /// `scontrol -o show job JOB` as `Key` → `Value` (`JobState`, `Restarts`, `NodeList`, ...):
    /// the same on 22.05 and 24.11, and it still knows a job for `MinJobAge` after it ended.
    /// `None` when the job is unknown (or the controller does not answer). Values holding spaces
    /// (a command line) are cut at the first one.
    pub fn job_info(&self, job: u32) -> Option<std::collections::BTreeMap<String, String>> {
        let out = self.scontrol(&["-o", "show", "job", &job.to_string()]).ok()?;
        let line = out.lines().find(|l| l.starts_with(&format!("JobId={job} ")))?;
        Some(
            line.split_whitespace()
                .filter_map(|w| w.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    /// The job's state as `scontrol show job` prints it: `PENDING`, `CONFIGURING`, `RUNNING`,
    /// `COMPLETED`, ... (a job whose nodes are being powered up is `CONFIGURING` on both
    /// versions, while 24.11's `squeue --json` says `["RUNNING","CONFIGURING"]`).
    pub fn job_state(&self, job: u32) -> Option<String> {
        self.job_info(job)?.remove("JobState")
    }

    /// `squeue --json`, parsed.
    pub fn squeue_json(&self) -> Result<serde_json::Value, DevclusterError> {
        self.json("squeue")
    }

    /// `sinfo --json`, parsed.
    pub fn sinfo_json(&self) -> Result<serde_json::Value, DevclusterError> {
        self.json("sinfo")
    }

    fn json(&self, program: &str) -> Result<serde_json::Value, DevclusterError> {
        let out = run_capture(self.client(program).arg("--json"))?;
        serde_json::from_str(&out).map_err(|e| DevclusterError::Command {
            command: format!("{program} --json"),
            message: e.to_string(),
        })
    }

    /// The `%T` state of every node, e.g. `{"dws-a-0": "idle~"}` (from `sinfo -N`, which lists
    /// a node once per partition; duplicates collapse).
    pub fn node_states(&self) -> Result<std::collections::BTreeMap<String, String>, DevclusterError> {
        let out = run_capture(self.client("sinfo").args(["-h", "-N", "-o", "%N %T"]))?;
        Ok(out
            .lines()
            .filter_map(|l| l.split_once(' '))
            .map(|(n, s)| (n.to_string(), s.trim().to_string()))
            .collect())
    }

    /// Every node Slurm has down, drained or failing, with its state and reason (`sinfo -R`, one
    /// line each): what a failure message needs beside [`Self::node_states`].
    pub fn node_reasons(&self) -> Result<String, DevclusterError> {
        run_capture(self.client("sinfo").args(["-h", "-R", "-N", "-o", "%N %T %E"]))
    }
}
