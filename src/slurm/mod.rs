//! Talking to Slurm: the resume file, `squeue`/`sinfo --json`, and `scontrol` updates.
//!
//! Everything slurm-dws knows about or changes in Slurm goes through [`Slurm`], which runs the
//! Slurm client commands of `slurm.bin_dir` directly (never through a shell, so a node reason can
//! hold any character). Three rules keep a busy controller and a large cluster safe:
//!
//! - **Time-boxed.** Every call has a deadline; a hung slurmctld costs one [`SlurmError::Timeout`]
//!   (the child is killed), never a stuck reconcile pass.
//! - **Batched.** Node changes take a hostlist expression (`dws-a-[0-99]`): one `scontrol` call
//!   per change, never one per node. Job queries are one `squeue --json` for all jobs asked.
//! - **Structured where 22.05 has it.** `squeue --json` and `sinfo --json` exist in 22.05;
//!   `scontrol --json` does not, so reservations are read from `scontrol -o` `Key=Value` lines.
//!
//! The parsers ([`squeue::parse_jobs`], [`sinfo::parse_nodes`],
//! [`reservation::parse_reservations`], [`resume_file::parse`]) are pure and tested against output
//! captured from a real 22.05.8 cluster; the facts measured there are in each module's docs.
//! Commands run with `TZ=UTC`, so the zone-less times of scontrol are UTC.

mod command;
pub mod reservation;
pub mod resume_file;
pub mod sinfo;
pub mod squeue;

use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::{DateTime, Utc};

pub use reservation::Reservation;
pub use resume_file::{ResumeFile, ResumeFileError, ResumeJob};
pub use sinfo::NodeInfo;
pub use squeue::{JobInfo, TimeLimit};

/// Output of a Slurm command that does not look like what 22.05 (or 23.02+) prints.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unexpected output of `{what}`: {message}")]
pub struct ParseError {
    /// Which command's output (e.g. `sinfo --json`).
    pub what: &'static str,
    pub message: String,
}

impl ParseError {
    pub(crate) fn new(what: &'static str, message: impl ToString) -> Self {
        ParseError { what, message: message.to_string() }
    }
}

/// Why a Slurm call failed. Callers branch on [`SlurmError::is_timeout`] (slurmctld busy or down:
/// retry on the next pass) versus a command that ran and refused.
#[derive(Debug, thiserror::Error)]
pub enum SlurmError {
    #[error("cannot run {}: {source}", program.display())]
    Spawn { program: PathBuf, source: std::io::Error },
    #[error("`{command}` did not finish within {timeout:?} and was killed")]
    Timeout { command: String, timeout: Duration },
    #[error("`{command}` failed ({status}): {stderr}")]
    Failed { command: String, status: String, stderr: String },
    #[error("`{command}`: {source}")]
    Io { command: String, source: std::io::Error },
    #[error(transparent)]
    Parse(#[from] ParseError),
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}

impl SlurmError {
    pub fn is_timeout(&self) -> bool {
        matches!(self, SlurmError::Timeout { .. })
    }
}

/// A change to a set of nodes: one `scontrol update nodename=HOSTLIST ...`.
///
/// `node_addr` / `node_hostname` follow scontrol: for a hostlist of several nodes they are
/// comma-separated lists with one entry per node, in hostlist order (scontrol refuses a single
/// address for several nodes with "Invalid node name specified").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeUpdate<'a> {
    /// e.g. `down`, `resume`, `drain`, `power_up`, `power_down`, `power_down_force`.
    pub state: Option<&'a str>,
    /// Required by Slurm with `down` and `drain`; any text (it is passed as one argument).
    pub reason: Option<&'a str>,
    pub node_addr: Option<&'a str>,
    pub node_hostname: Option<&'a str>,
}

/// The Slurm client commands of one cluster.
#[derive(Debug, Clone)]
pub struct Slurm {
    bin_dir: PathBuf,
    conf: Option<PathBuf>,
    timeout: Duration,
}

impl Slurm {
    /// `bin_dir` holds scontrol, squeue and sinfo; `conf` is exported as `SLURM_CONF` when set
    /// (otherwise the commands inherit ours); each call is killed after `timeout`.
    pub fn new(bin_dir: PathBuf, conf: Option<PathBuf>, timeout: Duration) -> Self {
        Slurm { bin_dir, conf, timeout }
    }

    pub fn bin_dir(&self) -> &Path {
        &self.bin_dir
    }

    pub fn conf(&self) -> Option<&Path> {
        self.conf.as_deref()
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    async fn run_ok(&self, program: &str, args: Vec<String>) -> Result<Vec<u8>, SlurmError> {
        command::run_ok(&self.bin_dir, self.conf.as_deref(), self.timeout, program, &args)
            .await
            .map(|out| out.stdout)
    }

    /// `scontrol ping`: whether the controller answers.
    pub async fn ping(&self) -> Result<(), SlurmError> {
        self.run_ok("scontrol", vec!["ping".into()]).await.map(drop)
    }

    /// The jobs among `job_ids` that slurmctld still knows, in one `squeue --json` call. A job it
    /// no longer knows is absent from the result, not an error.
    pub async fn jobs(&self, job_ids: &[u32]) -> Result<Vec<JobInfo>, SlurmError> {
        if job_ids.is_empty() {
            return Ok(Vec::new());
        }
        // 22.05 ignores --jobs (we filter anyway); 23.02+ honours it and --states=all keeps
        // jobs that just ended visible there too.
        let args =
            vec!["--json".to_string(), "--states=all".to_string(), format!("--jobs={}", join(job_ids))];
        let out = command::run(&self.bin_dir, self.conf.as_deref(), self.timeout, "squeue", &args).await?;
        if !out.success {
            // A Slurm that honours --jobs may refuse a list in which no job exists any more.
            if out.stderr.contains("Invalid job id") {
                return Ok(Vec::new());
            }
            return Err(command::failed("squeue", &args, &out));
        }
        Ok(squeue::parse_jobs(&out.stdout, Some(job_ids))?)
    }

    /// Every node of the cluster (powered-down cloud nodes need `PrivateData=cloud`), one
    /// `sinfo --json` call.
    pub async fn nodes(&self) -> Result<Vec<NodeInfo>, SlurmError> {
        let args = ["--json".to_string()];
        command::run_streamed(&self.bin_dir, self.conf.as_deref(), self.timeout, "sinfo", &args, |out| {
            sinfo::read_nodes(out)
        })
        .await
    }

    /// `scontrol update nodename=HOSTLIST ...` for all nodes of `hostlist` at once.
    pub async fn update_nodes(&self, hostlist: &str, update: &NodeUpdate<'_>) -> Result<(), SlurmError> {
        check_word("hostlist", hostlist)?;
        let mut args = vec!["update".to_string(), format!("nodename={hostlist}")];
        let fields =
            [("state", update.state), ("nodeaddr", update.node_addr), ("nodehostname", update.node_hostname)];
        for (key, value) in fields {
            if let Some(value) = value {
                check_word(key, value)?;
                args.push(format!("{key}={value}"));
            }
        }
        if let Some(reason) = update.reason {
            if reason.is_empty() {
                return Err(SlurmError::InvalidArgument("empty node reason".into()));
            }
            // One argv element: scontrol takes everything after `reason=` verbatim.
            args.push(format!("reason={reason}"));
        }
        if args.len() == 2 {
            return Err(SlurmError::InvalidArgument(format!("nothing to update on {hostlist}")));
        }
        self.run_ok("scontrol", args).await.map(drop)
    }

    /// `scontrol requeue ID,ID,...`: put the jobs back in the queue (one call).
    pub async fn requeue(&self, job_ids: &[u32]) -> Result<(), SlurmError> {
        if job_ids.is_empty() {
            return Ok(());
        }
        self.run_ok("scontrol", vec!["requeue".into(), join(job_ids)]).await.map(drop)
    }

    /// `scontrol update jobid=ID,ID,... StartTime=T`: when the pending jobs may start again. Slurm makes
    /// a job requeued through a node failure wait about two minutes (its credential lifetime) before it
    /// is eligible; a job requeued because its nodes never got VMs can go again at once, or when a
    /// capacity backoff ends. Jobs that are no longer pending (finished, cancelled, started) are skipped:
    /// their begin time no longer matters.
    pub async fn set_jobs_begin(&self, job_ids: &[u32], begin: DateTime<Utc>) -> Result<(), SlurmError> {
        if job_ids.is_empty() {
            return Ok(());
        }
        let args = vec![
            "update".to_string(),
            format!("jobid={}", join(job_ids)),
            format!("starttime={}", reservation::format_time(begin)),
        ];
        let out = command::run(&self.bin_dir, self.conf.as_deref(), self.timeout, "scontrol", &args).await?;
        if out.success
            || out.stderr.contains("no longer pending")
            || out.stderr.contains("Invalid job id")
            || out.stderr.contains("already completed")
        {
            Ok(())
        } else {
            Err(command::failed("scontrol", &args, &out))
        }
    }

    /// Creates reservation `name` on `nodes` from `start` to `end` (UTC, whole seconds), owned by
    /// root, with `flags` as scontrol takes them (e.g. `maint,ignore_jobs`).
    pub async fn create_reservation(
        &self,
        name: &str,
        nodes: &str,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
        flags: &str,
    ) -> Result<(), SlurmError> {
        check_word("reservation name", name)?;
        check_word("reservation nodes", nodes)?;
        if end <= start {
            return Err(SlurmError::InvalidArgument(format!(
                "reservation {name} ends ({end}) before it starts ({start})"
            )));
        }
        let mut args = vec![
            "create".to_string(),
            "reservation".to_string(),
            format!("reservationname={name}"),
            format!("nodes={nodes}"),
            format!("starttime={}", reservation::format_time(start)),
            format!("endtime={}", reservation::format_time(end)),
            "user=root".to_string(),
        ];
        if !flags.is_empty() {
            check_word("reservation flags", flags)?;
            args.push(format!("flags={flags}"));
        }
        self.run_ok("scontrol", args).await.map(drop)
    }

    /// Deletes reservation `name`. Returns `false` if there was no such reservation, so callers
    /// can delete idempotently.
    pub async fn delete_reservation(&self, name: &str) -> Result<bool, SlurmError> {
        check_word("reservation name", name)?;
        let args = vec!["delete".to_string(), format!("reservation={name}")];
        let out = command::run(&self.bin_dir, self.conf.as_deref(), self.timeout, "scontrol", &args).await?;
        if out.success {
            Ok(true)
        } else if out.stderr.contains("Requested reservation is invalid") || out.stderr.contains("not found")
        {
            Ok(false)
        } else {
            Err(command::failed("scontrol", &args, &out))
        }
    }

    /// Every reservation, from `scontrol -o show reservation`.
    pub async fn reservations(&self) -> Result<Vec<Reservation>, SlurmError> {
        let args = ["-o", "show", "reservation"].map(String::from);
        command::run_streamed(&self.bin_dir, self.conf.as_deref(), self.timeout, "scontrol", &args, |out| {
            reservation::read_reservations(out)
        })
        .await
    }
}

fn join(ids: &[u32]) -> String {
    ids.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
}

/// Values that scontrol reads as one `key=value` word must be non-empty and free of spaces.
fn check_word(what: &str, value: &str) -> Result<(), SlurmError> {
    if value.is_empty() || value.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(SlurmError::InvalidArgument(format!("{what} {value:?} must be one non-empty word")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slurm_with_fake_scontrol(script: &str) -> (tempfile::TempDir, Slurm) {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        for name in ["scontrol", "squeue", "sinfo"] {
            let path = dir.path().join(name);
            std::fs::write(&path, script).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let slurm = Slurm::new(dir.path().to_path_buf(), None, Duration::from_secs(5));
        (dir, slurm)
    }

    /// A stand-in that records its argv, one argument per line, so we can see exactly what
    /// scontrol would receive.
    const RECORD_ARGS: &str =
        "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done > \"$(dirname \"$0\")/argv\"\n";

    fn recorded(dir: &tempfile::TempDir) -> Vec<String> {
        std::fs::read_to_string(dir.path().join("argv")).unwrap().lines().map(String::from).collect()
    }

    #[tokio::test]
    async fn update_nodes_passes_one_batched_call_with_the_reason_verbatim() {
        let (dir, slurm) = slurm_with_fake_scontrol(RECORD_ARGS);
        let update = NodeUpdate {
            state: Some("down"),
            reason: Some("resize request x FAILED: 'ZONE_RESOURCE_POOL_EXHAUSTED' $HOME; ok"),
            ..Default::default()
        };
        slurm.update_nodes("dws-a-[0-99]", &update).await.unwrap();
        assert_eq!(
            recorded(&dir),
            vec![
                "update",
                "nodename=dws-a-[0-99]",
                "state=down",
                "reason=resize request x FAILED: 'ZONE_RESOURCE_POOL_EXHAUSTED' $HOME; ok"
            ]
        );
    }

    #[tokio::test]
    async fn invalid_arguments_never_reach_slurm() {
        let (dir, slurm) = slurm_with_fake_scontrol(RECORD_ARGS);
        let cases = [
            ("", NodeUpdate { state: Some("down"), ..Default::default() }),
            ("a b", NodeUpdate { state: Some("down"), ..Default::default() }),
            ("a", NodeUpdate::default()),
            ("a", NodeUpdate { state: Some("down"), reason: Some(""), ..Default::default() }),
            ("a", NodeUpdate { state: Some("down state=resume"), ..Default::default() }),
        ];
        for (hostlist, update) in cases {
            let err = slurm.update_nodes(hostlist, &update).await.unwrap_err();
            assert!(matches!(err, SlurmError::InvalidArgument(_)), "{err}");
        }
        let now = chrono::DateTime::from_timestamp(1_795_000_000, 0).unwrap();
        let err = slurm.create_reservation("r", "a", now, now, "maint").await.unwrap_err();
        assert!(matches!(err, SlurmError::InvalidArgument(_)), "{err}");
        assert!(!dir.path().join("argv").exists());
    }

    #[tokio::test]
    async fn reservation_and_requeue_arguments() {
        use chrono::TimeZone;
        let (dir, slurm) = slurm_with_fake_scontrol(RECORD_ARGS);
        let start = Utc.with_ymd_and_hms(2026, 12, 1, 9, 0, 0).unwrap();
        let end = Utc.with_ymd_and_hms(2026, 12, 1, 9, 10, 0).unwrap();
        slurm.create_reservation("dws-eol-x", "x-[1-2]", start, end, "maint,ignore_jobs").await.unwrap();
        assert_eq!(
            recorded(&dir),
            vec![
                "create",
                "reservation",
                "reservationname=dws-eol-x",
                "nodes=x-[1-2]",
                "starttime=2026-12-01T09:00:00",
                "endtime=2026-12-01T09:10:00",
                "user=root",
                "flags=maint,ignore_jobs"
            ]
        );
        slurm.requeue(&[3, 4, 7]).await.unwrap();
        assert_eq!(recorded(&dir), vec!["requeue", "3,4,7"]);
        slurm.jobs(&[5, 6]).await.unwrap_err(); // our stand-in prints no JSON
        assert_eq!(recorded(&dir), vec!["--json", "--states=all", "--jobs=5,6"]);
    }

    #[tokio::test]
    async fn empty_batches_run_nothing() {
        let (dir, slurm) = slurm_with_fake_scontrol(RECORD_ARGS);
        assert!(slurm.jobs(&[]).await.unwrap().is_empty());
        slurm.requeue(&[]).await.unwrap();
        assert!(!dir.path().join("argv").exists());
    }

    #[tokio::test]
    async fn delete_of_a_missing_reservation_is_not_an_error() {
        let (_dir, slurm) = slurm_with_fake_scontrol(
            "#!/bin/sh\necho 'delete_reservation reservation: Requested reservation is invalid' >&2\nexit 1\n",
        );
        assert!(!slurm.delete_reservation("gone").await.unwrap());
        let (_dir, slurm) =
            slurm_with_fake_scontrol("#!/bin/sh\necho 'Unable to contact slurm controller' >&2\nexit 1\n");
        let err = slurm.delete_reservation("r").await.unwrap_err();
        assert!(err.to_string().contains("Unable to contact"), "{err}");
    }
}
