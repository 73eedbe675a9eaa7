//! Jobs as slurmdbd's accounting remembers them (`sacct`): when each run of a job started and
//! ended, long after slurmctld forgot the job (`MinJobAge`). Asked only where slurm.conf says
//! `AccountingStorageType=accounting_storage/slurmdbd` ([`uses_slurmdbd`]), for the usage spans of
//! jobs that ended while the daemon was down.
//!
//! Measured on 22.05.8 with slurmdbd and MariaDB (the captures are `testdata/sacct-22.05-*`):
//! - `sacct -n -P -X -D --allusers -j IDS -o JobIDRaw,JobID,Start,End,State,NodeList` prints one
//!   `|`-separated line per run of each job (`-X`: the allocation, not its steps; `-D`: a requeued
//!   job's earlier runs too, the one before the requeue as state `REQUEUED` with its real start and
//!   end); an unknown id prints nothing, exit 0. With `-j` the time window starts at the epoch.
//! - Times are local and zone-less (`2026-11-28T05:25:26`; the commands run with `TZ=UTC`); a run
//!   that has not started or ended says `Unknown` (a pending or running one) or `None` (a job
//!   cancelled while pending: Start `None`, End the cancel time).
//! - `-j 7` selects every task of array 7; each line's `JobIDRaw` is the task's own id, the one
//!   squeue's `job_id` gives (task `7_1` is raw id 8): lines are kept by `JobIDRaw` only.
//! - slurmdbd down: exit 1 at once, `sacct: error: Problem talking to the database: Connection refused`.
//! - `--json` prints the same records on 22.05 (data_parser `dbv0.0.38`) but its shape changes with
//!   each release, as squeue's does; the `-P` text does not, so that is what is read.

use chrono::{DateTime, NaiveDateTime, Utc};

use super::{ParseError, Slurm, SlurmError};

/// One run of a job, as `sacct` prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountedRun {
    /// `JobIDRaw`: the id squeue gives the job (an array task's own id).
    pub job_id: u64,
    /// `None` when the run never started (`Unknown`, `None`).
    pub start: Option<DateTime<Utc>>,
    /// `None` while it runs or waits.
    pub end: Option<DateTime<Utc>>,
    /// As printed, e.g. `COMPLETED`, `CANCELLED by 0`, `REQUEUED`.
    pub state: String,
}

/// The `-o` fields [`parse_runs`] reads, in order.
pub const FIELDS: &str = "JobIDRaw,JobID,Start,End,State,NodeList";

const WHAT: &str = "sacct -P";

/// The runs of `sacct -n -P -X -D -o` [`FIELDS`] whose `JobIDRaw` is one of `wanted` (see the
/// module docs), in sacct's order.
pub fn parse_runs(text: &str, wanted: &[u64]) -> Result<Vec<AccountedRun>, ParseError> {
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let fields: Vec<&str> = line.split('|').collect();
        let [raw, _id, start, end, state, ..] = fields[..] else {
            return Err(ParseError::new(WHAT, format!("{line:?} has fewer than 5 fields")));
        };
        let job_id: u64 = raw
            .trim()
            .parse()
            .map_err(|_| ParseError::new(WHAT, format!("JobIDRaw {raw:?} in {line:?} is not a job id")))?;
        if !wanted.contains(&job_id) {
            continue;
        }
        out.push(AccountedRun {
            job_id,
            start: time(start, line)?,
            end: time(end, line)?,
            state: state.trim().to_string(),
        });
    }
    Ok(out)
}

/// A zone-less time (UTC: see the module docs); `Unknown` and `None` are no time.
fn time(field: &str, line: &str) -> Result<Option<DateTime<Utc>>, ParseError> {
    match field.trim() {
        "Unknown" | "None" | "" => Ok(None),
        t => NaiveDateTime::parse_from_str(t, "%Y-%m-%dT%H:%M:%S")
            .map(|n| Some(n.and_utc()))
            .map_err(|_| ParseError::new(WHAT, format!("time {t:?} in {line:?}"))),
    }
}

/// Whether the `AccountingStorageType` of `scontrol show config` (`Key = value` lines) or of a
/// slurm.conf file (`Key=value` words, the key case-insensitive, `#` comments) is slurmdbd.
pub fn uses_slurmdbd(text: &str) -> bool {
    const KEY: &str = "AccountingStorageType";
    let value = |l: &str| -> Option<String> {
        // `Key   = value` (show config), or `Key=value` words, several a line (slurm.conf).
        let (k, v) = l.split_once('=')?;
        if k.trim().eq_ignore_ascii_case(KEY) {
            return v.split_whitespace().next().map(String::from);
        }
        l.split_whitespace().find_map(|w| {
            let (k, v) = w.split_once('=')?;
            k.eq_ignore_ascii_case(KEY).then(|| v.to_string())
        })
    };
    text.lines()
        .rev()
        .find_map(|l| value(l.split('#').next().unwrap_or("")))
        .is_some_and(|v| v.eq_ignore_ascii_case("accounting_storage/slurmdbd"))
}

impl Slurm {
    /// The runs slurmdbd's accounting holds of `job_ids`, in one `sacct` call (see the module
    /// docs). An id it does not know is absent, not an error.
    pub async fn ended_jobs(&self, job_ids: &[u64]) -> Result<Vec<AccountedRun>, SlurmError> {
        if job_ids.is_empty() {
            return Ok(Vec::new());
        }
        let ids = job_ids.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
        let args =
            ["-n", "-P", "-X", "-D", "--allusers", "-j", &ids, "-o", FIELDS].map(String::from).to_vec();
        let out = self.run_ok("sacct", args).await?;
        Ok(parse_runs(&String::from_utf8_lossy(&out), job_ids)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RAW: &str = include_str!("testdata/sacct-22.05-P-X-D-raw.txt");

    fn at(s: &str) -> Option<DateTime<Utc>> {
        Some(NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S").unwrap().and_utc())
    }

    #[test]
    fn each_run_of_the_jobs_asked_with_its_start_and_end() {
        let runs = parse_runs(RAW, &[1, 3, 4, 5, 6, 999]).unwrap();
        let got: Vec<_> = runs.iter().map(|r| (r.job_id, r.start, r.end, r.state.as_str())).collect();
        assert_eq!(
            got,
            [
                (1, at("2026-11-28T05:25:23"), at("2026-11-28T05:25:26"), "COMPLETED"),
                (3, at("2026-11-28T05:25:30"), at("2026-11-28T05:25:32"), "CANCELLED by 0"),
                (4, at("2026-11-28T05:25:34"), at("2026-11-28T05:25:35"), "FAILED"),
                // Requeued: the run before the requeue, then the pending one.
                (5, at("2026-11-28T05:25:37"), at("2026-11-28T05:25:56"), "REQUEUED"),
                (6, None, at("2026-11-28T05:25:56"), "CANCELLED by 0"),
                (5, None, None, "PENDING"),
            ]
        );
    }

    #[test]
    fn without_duplicates_a_requeued_job_shows_only_its_latest_record() {
        // Why `-D`: the same jobs printed with and without it (JobID first there, not JobIDRaw).
        let job5 = |text: &str| -> Vec<String> {
            text.lines()
                .filter(|l| l.starts_with("5|"))
                .map(|l| l.split('|').nth(6).unwrap().to_string())
                .collect()
        };
        assert_eq!(job5(include_str!("testdata/sacct-22.05-P-X.txt")), ["PENDING"]);
        assert_eq!(job5(include_str!("testdata/sacct-22.05-P-X-D.txt")), ["REQUEUED", "PENDING"]);
    }

    #[test]
    fn array_tasks_are_kept_by_their_own_id() {
        // `-j 7` printed both tasks of array 7; the job asked is task 7_2, raw id 7.
        let runs = parse_runs(RAW, &[7]).unwrap();
        assert_eq!(runs.len(), 1);
        assert_eq!(runs[0].end, at("2026-11-28T05:27:01"));
        assert_eq!(parse_runs(RAW, &[8]).unwrap().len(), 1);
    }

    #[test]
    fn a_line_that_is_not_sacct_s_is_named() {
        assert!(parse_runs("", &[1]).unwrap().is_empty());
        let e = parse_runs("1|1|yesterday|Unknown|RUNNING|cap-1\n", &[1]).unwrap_err();
        assert!(e.to_string().contains("\"yesterday\""), "{e}");
        let e = parse_runs("x|1|Unknown|Unknown|RUNNING|cap-1\n", &[1]).unwrap_err();
        assert!(e.to_string().contains("JobIDRaw"), "{e}");
        assert!(parse_runs("1|1|Unknown\n", &[1]).is_err());
    }

    #[test]
    fn slurmdbd_is_read_from_show_config_and_from_slurm_conf() {
        // 22.05's `scontrol show config` lines, as captured with slurmdbd.
        let show = "AccountingStorageHost   = localhost\nAccountingStoragePort   = 6919\n\
                    AccountingStorageType   = accounting_storage/slurmdbd\nAccountingStorageUser   = N/A\n";
        assert!(uses_slurmdbd(show));
        assert!(!uses_slurmdbd("AccountingStorageType   = (null)\n"));
        assert!(uses_slurmdbd("ClusterName=x\naccountingstoragetype=accounting_storage/slurmdbd # dbd\n"));
        assert!(!uses_slurmdbd("#AccountingStorageType=accounting_storage/slurmdbd\n"));
        assert!(!uses_slurmdbd("AccountingStorageType=accounting_storage/none\n"));
        assert!(!uses_slurmdbd(""));
    }
}
