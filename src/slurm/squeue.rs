//! Jobs as `squeue --json` reports them: id, state, time limit, nodes, partition, reason.
//!
//! Measured on 22.05.8 (openapi v0.0.38 output):
//! - `squeue --json` IGNORES `--jobs` (and other filters): it prints every job slurmctld still
//!   knows. We filter on our side; a job that is gone is simply absent, never an error.
//! - `time_limit` is an integer number of MINUTES (`--time=90` → `90`, `--time=1-00:30:00` →
//!   `1470`), or `null`. Both INFINITE (`--time=UNLIMITED`, or no `--time` in a partition whose
//!   MaxTime is INFINITE and has no DefaultTime) and NO_VAL are printed as `null`. NO_VAL does not
//!   survive submission (slurmctld replaces it with the partition's DefaultTime or MaxTime: no
//!   `--time` under `MaxTime=120` gives `120`), so on 22.05 `null` means unlimited.
//! - `job_state` is one word, and a state flag wins over the base state (`CONFIGURING`,
//!   `COMPLETING`, `REQUEUED` are printed instead of `RUNNING` or `PENDING`).
//!
//! Measured on 24.11.5 (data_parser v0.0.42):
//! - `--jobs` is honoured (with `--states=all` finished jobs stay visible); a list of nothing but
//!   unknown ids exits 1 with `slurm_load_jobs error: Invalid job id specified`.
//! - `time_limit` is `{"set":true,"infinite":false,"number":90}` for a limit in minutes and
//!   `{"set":false,"infinite":true,"number":0}` for UNLIMITED (also for `--time=UNLIMITED` in a
//!   `MaxTime=120` partition while the job is pending). `{"set":false,"infinite":false}` would be
//!   NO_VAL: not seen, read as unknown.
//! - `job_state` is an array, base state first, then flags: a job whose nodes are being powered up
//!   is `["RUNNING","CONFIGURING","POWER_UP_NODE"]`, a held one `["PENDING"]` with `state_reason`
//!   `JobHeldUser`, a requeued one `["PENDING"]` with `BeginTime`.

use serde::Deserialize;
use serde_json::Value;

use super::ParseError;
use crate::json_stream::{field_note_len, for_each_element, only_fields, only_fields_again, Recall};

const WHAT: &str = "squeue --json";

/// The fields of a job [`RawJob`] reads: the rest of each job (~2.5 KB of 22.05's ~2.8) is skipped,
/// never decoded.
const JOB_FIELDS: &[&str] = &[
    "job_id",
    "job_state",
    "time_limit",
    "nodes",
    "partition",
    "state_reason",
    "user_name",
    "account",
    "start_time",
    "end_time",
];

/// A job's time limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeLimit {
    /// A finite limit in minutes.
    Minutes(u64),
    /// No limit (Slurm's INFINITE / `UNLIMITED`).
    Unlimited,
    /// Slurm did not say (NO_VAL in 23.02+'s shape, or a value we do not understand).
    Unknown,
}

impl TimeLimit {
    /// The limit in seconds when it is finite.
    pub fn as_secs(self) -> Option<u64> {
        match self {
            TimeLimit::Minutes(m) => Some(m.saturating_mul(60)),
            TimeLimit::Unlimited | TimeLimit::Unknown => None,
        }
    }

    fn from_json(value: Option<&Value>) -> TimeLimit {
        match value {
            Some(Value::Number(n)) => n.as_u64().map_or(TimeLimit::Unknown, TimeLimit::Minutes),
            // 22.05: INFINITE (and the never-seen NO_VAL) print as null; see the module docs.
            Some(Value::Null) => TimeLimit::Unlimited,
            Some(Value::Object(o)) => {
                if o.get("infinite").and_then(Value::as_bool) == Some(true) {
                    TimeLimit::Unlimited
                } else if o.get("set").and_then(Value::as_bool) == Some(false) {
                    TimeLimit::Unknown
                } else {
                    o.get("number").and_then(Value::as_u64).map_or(TimeLimit::Unknown, TimeLimit::Minutes)
                }
            }
            _ => TimeLimit::Unknown,
        }
    }
}

/// One job as slurm-dws needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobInfo {
    pub job_id: u32,
    /// The job state, upper case as Slurm prints it (`PENDING`, `RUNNING`, `COMPLETED`...): the
    /// base state on 23.02+; on 22.05 a state flag such as `CONFIGURING` when one is set.
    pub state: String,
    /// State flags after the base state (23.02+ only): `CONFIGURING`, `POWER_UP_NODE`, ...
    pub flags: Vec<String>,
    pub time_limit: TimeLimit,
    /// The allocated nodes as a hostlist expression; empty while pending.
    pub nodes: String,
    pub partition: String,
    /// Why the job is pending (`state_reason`: `JobHeldUser`, `BeginTime`, `Resources`, ...);
    /// `None` when there is none to tell.
    pub reason: String,
    /// Who runs it and on whose account (`user_name`, `account`; empty when Slurm said nothing).
    pub user: String,
    pub account: String,
    /// `start_time` and `end_time` in seconds since the epoch (22.05: a number; 23.02+: `{set,
    /// number}`); `None` when not set. A running job's end is its expected end (its limit).
    pub start_time: Option<i64>,
    pub end_time: Option<i64>,
}

#[derive(Deserialize)]
struct RawJob {
    job_id: u32,
    #[serde(default)]
    job_state: Value,
    /// `None` when the field is absent; `Some(Value::Null)` when Slurm printed `null`.
    #[serde(default, deserialize_with = "present")]
    time_limit: Option<Value>,
    #[serde(default)]
    nodes: Option<String>,
    #[serde(default)]
    partition: Option<String>,
    #[serde(default)]
    state_reason: Option<String>,
    #[serde(default)]
    user_name: Option<String>,
    #[serde(default)]
    account: Option<String>,
    #[serde(default)]
    start_time: Value,
    #[serde(default)]
    end_time: Value,
}

/// A time in seconds as 22.05 (a number) or 23.02+ (`{"set":true,"number":N}`) prints it; 0 and
/// unset are `None`.
pub(super) fn epoch_secs(v: &Value) -> Option<i64> {
    let n = match v {
        Value::Number(n) => n.as_i64(),
        Value::Object(o) if o.get("set").and_then(Value::as_bool) != Some(false) => {
            o.get("number").and_then(Value::as_i64)
        }
        _ => None,
    };
    n.filter(|n| *n > 0)
}

/// Parses `squeue --json` output and keeps the jobs in `wanted` (all jobs when `wanted` is
/// `None`), in Slurm's order.
pub fn parse_jobs(json: &[u8], wanted: Option<&[u32]>) -> Result<Vec<JobInfo>, ParseError> {
    read_jobs(&mut &json[..], wanted)
}

/// [`parse_jobs`] as the output streams: one job is held at a time, cut down to [`JOB_FIELDS`]
/// (`json_stream`). At 10,000 nodes in 1,000 jobs 22.05 prints ~4 MB a pass, which held whole
/// (and grown by doubling as it is read) was several MB of the daemon's peak.
pub fn read_jobs(
    json: &mut dyn std::io::BufRead,
    wanted: Option<&[u32]>,
) -> Result<Vec<JobInfo>, ParseError> {
    read(json, wanted, None)
}

/// [`read_jobs`] of every job, remembering each in `recall` (made by [`job_recall`]): a job whose
/// bytes are those of the job at its place in the last read (a running job prints the same from
/// pass to pass) is taken by its length and hash, not scanned, and its fields are cut where they
/// were.
pub(crate) fn read_jobs_recalled(
    json: &mut dyn std::io::BufRead,
    recall: &mut Recall,
) -> Result<Vec<JobInfo>, ParseError> {
    read(json, None, Some(recall))
}

/// A [`Recall`] for [`read_jobs_recalled`].
pub(crate) fn job_recall() -> Recall {
    Recall::new(field_note_len(JOB_FIELDS))
}

fn read(
    json: &mut dyn std::io::BufRead,
    wanted: Option<&[u32]>,
    recall: Option<&mut Recall>,
) -> Result<Vec<JobInfo>, ParseError> {
    let mut jobs = Vec::new();
    let mut cut = Vec::new();
    let found = for_each_element(json, &["jobs"], recall, |e| {
        // A job the same as last time: its fields are where they were.
        if !(e.same && only_fields_again(e.bytes, JOB_FIELDS, &mut cut, e.kept)) {
            only_fields(e.bytes, JOB_FIELDS, &mut cut, e.kept)?;
        }
        let j: RawJob = serde_json::from_slice(&cut).map_err(|e| format!("a job: {e}"))?;
        if wanted.is_none_or(|w| w.contains(&j.job_id)) {
            jobs.push(job_info(j));
        }
        Ok(())
    })
    .map_err(|e| ParseError::new(WHAT, e))?;
    if found != [true] {
        return Err(ParseError::new(WHAT, "missing field `jobs`"));
    }
    Ok(jobs)
}

/// A field missing from the job (rather than present as null) is "not said".
fn job_info(j: RawJob) -> JobInfo {
    let (state, flags) = split_state(j.job_state);
    JobInfo {
        job_id: j.job_id,
        state,
        flags,
        time_limit: match &j.time_limit {
            None => TimeLimit::Unknown,
            Some(v) => TimeLimit::from_json(Some(v)),
        },
        nodes: j.nodes.unwrap_or_default(),
        partition: j.partition.unwrap_or_default(),
        reason: j.state_reason.unwrap_or_default(),
        user: j.user_name.unwrap_or_default(),
        account: j.account.unwrap_or_default(),
        start_time: epoch_secs(&j.start_time),
        end_time: epoch_secs(&j.end_time),
    }
}

fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// 22.05's one word, or 23.02+'s array (base state first, then flags).
fn split_state(value: Value) -> (String, Vec<String>) {
    match value {
        Value::String(s) => (s, Vec::new()),
        Value::Array(items) => {
            let mut words = items.into_iter().filter_map(|v| match v {
                Value::String(s) => Some(s),
                _ => None,
            });
            (words.next().unwrap_or_default(), words.collect())
        }
        _ => (String::new(), Vec::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Captured from a real 22.05.8 cluster: job 1 ran `--time=90` on two cloud nodes, 2..8 are
    /// held: `--time=90`, `--time=UNLIMITED`, no `--time` in a DefaultTime=30 partition, no
    /// `--time` in a MaxTime=INFINITE partition, `--time=1-00:30:00`, `--time=UNLIMITED` in a
    /// MaxTime=120 partition, no `--time` in a MaxTime=120 partition created later.
    const V22_05: &[u8] = include_bytes!("testdata/squeue-22.05.json");

    /// Captured from a real 24.11.5 cluster (see testdata/README.md): partitions a3
    /// (MaxTime=INFINITE) and lim (MaxTime=120 DefaultTime=30); jobs 1..7 submitted held with
    /// `-t 30`, `-t UNLIMITED`, no `-t` (a3), `-t 2-00:00:00`, no `-t` (lim), `-t UNLIMITED` (lim),
    /// `-t 1-00:30:00`.
    const V24_11_HELD: &[u8] = include_bytes!("testdata/squeue-24.11-held.json");
    /// The same jobs after jobs 1, 2 and 4 were released: their nodes are being powered up.
    const V24_11_CONFIGURING: &[u8] = include_bytes!("testdata/squeue-24.11-configuring.json");
    /// 25 s later: still CONFIGURING (the nodes' slurmd had not registered yet).
    const V24_11_RUNNING: &[u8] = include_bytes!("testdata/squeue-24.11-running.json");
    /// Job 1 requeued after its nodes failed: pending again, not before its begin time.
    const V24_11_REQUEUED: &[u8] = include_bytes!("testdata/squeue-24.11-requeued-job.json");
    /// `squeue --json --states=all --jobs=1,4,999`: 24.11 honours --jobs.
    const V24_11_JOBS_1_4_999: &[u8] = include_bytes!("testdata/squeue-24.11-states-all-jobs-1-4-999.json");

    type Row<'a> = (u32, &'a str, Vec<&'a str>, TimeLimit, &'a str, &'a str, &'a str);

    fn rows(jobs: &[JobInfo]) -> Vec<Row<'_>> {
        jobs.iter()
            .map(|j| {
                let flags = j.flags.iter().map(String::as_str).collect();
                (
                    j.job_id,
                    j.state.as_str(),
                    flags,
                    j.time_limit,
                    j.nodes.as_str(),
                    j.partition.as_str(),
                    j.reason.as_str(),
                )
            })
            .collect()
    }

    #[test]
    fn captured_22_05_output() {
        use TimeLimit::*;
        let held = "JobHeldUser";
        assert_eq!(
            rows(&parse_jobs(V22_05, None).unwrap()),
            vec![
                (1, "COMPLETED", vec![], Minutes(90), "dws-a-[0-1]", "flex", "None"),
                (2, "PENDING", vec![], Minutes(90), "", "flex", held),
                (3, "PENDING", vec![], Unlimited, "", "flex", held),
                (4, "PENDING", vec![], Minutes(30), "", "lim", held),
                (5, "PENDING", vec![], Unlimited, "", "flex", held),
                (6, "PENDING", vec![], Minutes(1470), "", "flex", held),
                (7, "PENDING", vec![], Unlimited, "", "lim", held),
            ]
        );
    }

    #[test]
    fn captured_24_11_output() {
        use TimeLimit::*;
        let held = "JobHeldUser";
        let held_jobs = vec![
            (1, "PENDING", vec![], Minutes(30), "", "a3", held),
            (2, "PENDING", vec![], Unlimited, "", "a3", held),
            (3, "PENDING", vec![], Unlimited, "", "a3", held),
            (4, "PENDING", vec![], Minutes(2880), "", "a3", held),
            (5, "PENDING", vec![], Minutes(30), "", "lim", held),
            (6, "PENDING", vec![], Unlimited, "", "lim", held),
            (7, "PENDING", vec![], Minutes(1470), "", "a3", held),
        ];
        assert_eq!(rows(&parse_jobs(V24_11_HELD, None).unwrap()), held_jobs);

        let up = vec!["CONFIGURING", "POWER_UP_NODE"];
        let configuring = vec![
            (1, "RUNNING", up.clone(), Minutes(30), "lab-a3-[0-1]", "a3", "None"),
            (2, "RUNNING", up.clone(), Unlimited, "lab-a3-2", "a3", "None"),
            held_jobs[2].clone(),
            (4, "RUNNING", up.clone(), Minutes(2880), "lab-a3-3", "a3", "None"),
            held_jobs[4].clone(),
            held_jobs[5].clone(),
            held_jobs[6].clone(),
        ];
        assert_eq!(rows(&parse_jobs(V24_11_CONFIGURING, None).unwrap()), configuring);
        assert_eq!(rows(&parse_jobs(V24_11_RUNNING, None).unwrap()), configuring);

        assert_eq!(
            rows(&parse_jobs(V24_11_REQUEUED, None).unwrap()),
            vec![(1, "PENDING", vec![], Minutes(30), "", "a3", "BeginTime")]
        );
        let asked = parse_jobs(V24_11_JOBS_1_4_999, None).unwrap();
        assert_eq!(rows(&asked), vec![held_jobs[0].clone(), held_jobs[3].clone()]);
        assert_eq!(parse_jobs(V24_11_JOBS_1_4_999, Some(&[1, 4, 999])).unwrap(), asked);
    }

    /// The same 2-node job on 22.05.8 and 24.11.5 (testdata/paired/), no `--time` in a
    /// MaxTime=INFINITE partition: while its nodes power up (CONFIGURING) and once running.
    #[test]
    fn paired_captures_configuring_then_running() {
        use TimeLimit::Unlimited;
        // (output, (state, flags))
        type Case<'a> = (&'a [u8], (&'a str, Vec<&'a str>));
        let cases: [Case; 4] = [
            (include_bytes!("testdata/paired/squeue-22.05.8-configuring.json"), ("CONFIGURING", vec![])),
            (include_bytes!("testdata/paired/squeue-22.05.8-running.json"), ("RUNNING", vec![])),
            (
                include_bytes!("testdata/paired/squeue-24.11.5-configuring.json"),
                ("RUNNING", vec!["CONFIGURING", "POWER_UP_NODE"]),
            ),
            (include_bytes!("testdata/paired/squeue-24.11.5-running.json"), ("RUNNING", vec![])),
        ];
        for (doc, (state, flags)) in cases {
            assert_eq!(
                rows(&parse_jobs(doc, None).unwrap()),
                vec![(1, state, flags, Unlimited, "t-a-[0-1]", "p", "None")]
            );
        }
    }

    /// 26.05.5 (see testdata/README.md): job 1 `-N2 -t 5` on `lab-a-[0-1]`, job 2 `-t UNLIMITED`
    /// on `lab-a-2`, job 3 held, job 4 requeued. 26.05 adds `step_id.sluid`, `submit_line`,
    /// `segment_size`, ... and drops `power`; the fields slurm-dws reads are 24.11's.
    #[test]
    fn captured_26_05() {
        use TimeLimit::{Minutes, Unlimited};
        let one = |state, flags: Vec<&'static str>| (1, state, flags, Minutes(5), "lab-a-[0-1]", "a", "None");
        let two = |state, flags: Vec<&'static str>| (2, state, flags, Unlimited, "lab-a-2", "a", "None");
        let power_up = || vec!["CONFIGURING", "POWER_UP_NODE"];
        let cases: [(&[u8], Vec<Row>); 7] = [
            (
                include_bytes!("testdata/squeue-26.05-configuring.json"),
                vec![one("RUNNING", power_up()), two("RUNNING", power_up())],
            ),
            (
                include_bytes!("testdata/squeue-26.05-running.json"),
                vec![one("RUNNING", vec![]), two("RUNNING", vec![])],
            ),
            (
                include_bytes!("testdata/squeue-26.05-states-all-completed.json"),
                vec![one("COMPLETED", vec![]), two("COMPLETED", vec![])],
            ),
            (include_bytes!("testdata/squeue-26.05-nodelist.json"), vec![one("RUNNING", vec![])]),
            (
                include_bytes!("testdata/squeue-26.05-states-all-known-and-unknown.json"),
                vec![one("RUNNING", vec![])],
            ),
            (
                include_bytes!("testdata/squeue-26.05-held.json"),
                vec![(3, "PENDING", vec![], Minutes(5), "", "a", "JobHeldUser")],
            ),
            (
                include_bytes!("testdata/squeue-26.05-requeued.json"),
                vec![(4, "PENDING", vec![], Minutes(5), "", "a", "BeginTime")],
            ),
        ];
        for (doc, want) in cases {
            assert_eq!(rows(&parse_jobs(doc, None).unwrap()), want);
        }
    }

    /// A recall carried from read to read never changes what is read: the same document again
    /// (taken by length and hash), jobs that changed, fewer or more jobs, another version's shape.
    #[test]
    fn jobs_read_with_a_recall_are_the_jobs_read_without() {
        let mut recall = job_recall();
        let docs = [
            V24_11_HELD,
            V24_11_HELD,
            V24_11_CONFIGURING,
            V24_11_RUNNING,
            V24_11_RUNNING,
            V24_11_JOBS_1_4_999,
            V22_05,
            V22_05,
            V24_11_HELD,
        ];
        for (i, doc) in docs.into_iter().enumerate() {
            let recalled = read_jobs_recalled(&mut &doc[..], &mut recall).unwrap();
            assert_eq!(recalled, parse_jobs(doc, None).unwrap(), "read {i}");
            assert_eq!(recall.len(), recalled.len(), "read {i}");
        }
        // A read that fails leaves nothing recalled; the next reads whole.
        assert!(read_jobs_recalled(&mut &b"{\"jobs\": [{\"job_id\": 1}, {"[..], &mut recall).is_err());
        assert_eq!(recall.len(), 0);
        assert_eq!(
            read_jobs_recalled(&mut &V22_05[..], &mut recall).unwrap(),
            parse_jobs(V22_05, None).unwrap()
        );
    }

    #[test]
    fn filters_wanted_jobs_and_ignores_unknown_ids() {
        let jobs = parse_jobs(V22_05, Some(&[6, 2, 999])).unwrap();
        let ids: Vec<u32> = jobs.iter().map(|j| j.job_id).collect();
        assert_eq!(ids, vec![2, 6]);
        assert!(parse_jobs(V22_05, Some(&[])).unwrap().is_empty());
        let ids: Vec<u32> =
            parse_jobs(V24_11_HELD, Some(&[7, 3])).unwrap().iter().map(|j| j.job_id).collect();
        assert_eq!(ids, vec![3, 7]);
    }

    #[test]
    fn time_limit_encodings() {
        use serde_json::json;
        use TimeLimit::*;
        let cases = [
            (json!(90), Minutes(90)),
            (json!(0), Minutes(0)),
            (json!(null), Unlimited),
            (json!({"set": true, "infinite": false, "number": 45}), Minutes(45)),
            (json!({"set": false, "infinite": true, "number": 0}), Unlimited),
            (json!({"set": true, "infinite": true, "number": 0}), Unlimited),
            (json!({"set": false, "infinite": false, "number": 0}), Unknown),
            (json!(-1), Unknown),
            (json!("1:30:00"), Unknown),
        ];
        for (value, want) in cases {
            assert_eq!(TimeLimit::from_json(Some(&value)), want, "{value}");
        }
        assert_eq!(Minutes(90).as_secs(), Some(5400));
        assert_eq!(Unlimited.as_secs(), None);
    }

    #[test]
    fn missing_fields_are_unknown_or_empty() {
        let jobs = parse_jobs(br#"{"jobs":[{"job_id":13}]}"#, None).unwrap();
        assert_eq!(jobs[0].time_limit, TimeLimit::Unknown);
        assert_eq!((jobs[0].state.as_str(), jobs[0].reason.as_str()), ("", ""));
    }

    #[test]
    fn garbage_is_a_parse_error() {
        for doc in [&b""[..], b"{", b"{\"jobs\":[{\"job_id\":\"x\"}]}", b"[]", b"{}", b"{\"meta\":{}}"] {
            let err = parse_jobs(doc, None).unwrap_err();
            assert!(err.to_string().contains("squeue --json"), "{err}");
        }
    }

    /// Who runs a job and when it started and ended, for the usage spans: 22.05's numbers and
    /// 26.05's `{set, number}` read alike.
    #[test]
    fn user_account_and_times() {
        let j = &parse_jobs(V22_05, Some(&[1])).unwrap()[0];
        assert_eq!((j.user.as_str(), j.account.as_str()), ("root", ""));
        assert_eq!((j.start_time, j.end_time), (Some(1795425844), Some(1795425847)));
        let running = include_bytes!("testdata/squeue-26.05-running.json");
        let j = &parse_jobs(running, Some(&[1])).unwrap()[0];
        assert_eq!((j.user.as_str(), j.state.as_str()), ("root", "RUNNING"));
        assert_eq!((j.start_time, j.end_time), (Some(1795626859), Some(1795627159)));
        let held = &parse_jobs(V24_11_HELD, None).unwrap()[0];
        assert_eq!(held.state, "PENDING");
    }
}
