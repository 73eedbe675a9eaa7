//! Jobs as `squeue --json` reports them: id, state, time limit, nodes, partition.
//!
//! Measured on 22.05.8 (openapi v0.0.38 output):
//! - `squeue --json` IGNORES `--jobs` (and other filters): it prints every job slurmctld still
//!   knows. We filter on our side; a job that is gone is simply absent, never an error.
//! - `time_limit` is an integer number of MINUTES (`--time=90` → `90`, `--time=1-00:30:00` →
//!   `1470`), or `null`. Both INFINITE (`--time=UNLIMITED`, or no `--time` in a partition whose
//!   MaxTime is INFINITE and has no DefaultTime) and NO_VAL are printed as `null`. NO_VAL does not
//!   survive submission (slurmctld replaces it with the partition's DefaultTime or MaxTime: no
//!   `--time` under `MaxTime=120` gives `120`), so on 22.05 `null` means unlimited.
//! - 23.02+ prints numbers as `{"set":true,"infinite":false,"number":90}` and `job_state` as an
//!   array; both are accepted.

use serde::Deserialize;
use serde_json::Value;

use super::ParseError;

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
    /// Slurm's base job state, upper case as Slurm prints it (`PENDING`, `RUNNING`, `COMPLETED`...).
    pub state: String,
    pub time_limit: TimeLimit,
    /// The allocated nodes as a hostlist expression; empty while pending.
    pub nodes: String,
    pub partition: String,
}

#[derive(Deserialize)]
struct Document {
    jobs: Vec<RawJob>,
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
}

/// Parses `squeue --json` output and keeps the jobs in `wanted` (all jobs when `wanted` is
/// `None`), in Slurm's order.
pub fn parse_jobs(json: &[u8], wanted: Option<&[u32]>) -> Result<Vec<JobInfo>, ParseError> {
    let doc: Document = serde_json::from_slice(json).map_err(|e| ParseError::new("squeue --json", e))?;
    // A field missing from the document (rather than present as null) is "not said".
    Ok(doc
        .jobs
        .into_iter()
        .filter(|j| wanted.is_none_or(|w| w.contains(&j.job_id)))
        .map(|j| JobInfo {
            job_id: j.job_id,
            state: first_state(&j.job_state),
            time_limit: match &j.time_limit {
                None => TimeLimit::Unknown,
                Some(v) => TimeLimit::from_json(Some(v)),
            },
            nodes: j.nodes.unwrap_or_default(),
            partition: j.partition.unwrap_or_default(),
        })
        .collect())
}

fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

fn first_state(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Array(items) => items.first().and_then(Value::as_str).unwrap_or_default().to_string(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Captured from a real 22.05.8 cluster: job 1 ran `--time=90` on two cloud nodes, 2..8 are
    /// held: `--time=90`, `--time=UNLIMITED`, no `--time` in a DefaultTime=30 partition, no
    /// `--time` in a MaxTime=INFINITE partition, `--time=1-00:30:00`, `--time=UNLIMITED` in a
    /// MaxTime=120 partition, no `--time` in a MaxTime=120 partition created later.
    const CAPTURED: &[u8] = include_bytes!("testdata/squeue-22.05.json");

    #[test]
    fn captured_22_05_output() {
        let jobs = parse_jobs(CAPTURED, None).unwrap();
        let got: Vec<_> = jobs
            .iter()
            .map(|j| (j.job_id, j.state.as_str(), j.time_limit, j.nodes.as_str(), j.partition.as_str()))
            .collect();
        use TimeLimit::*;
        assert_eq!(
            got,
            vec![
                (1, "COMPLETED", Minutes(90), "dws-a-[0-1]", "flex"),
                (2, "PENDING", Minutes(90), "", "flex"),
                (3, "PENDING", Unlimited, "", "flex"),
                (4, "PENDING", Minutes(30), "", "lim"),
                (5, "PENDING", Unlimited, "", "flex"),
                (6, "PENDING", Minutes(1470), "", "flex"),
                (7, "PENDING", Unlimited, "", "lim"),
            ]
        );
    }

    #[test]
    fn filters_wanted_jobs_and_ignores_unknown_ids() {
        let jobs = parse_jobs(CAPTURED, Some(&[6, 2, 999])).unwrap();
        let ids: Vec<u32> = jobs.iter().map(|j| j.job_id).collect();
        assert_eq!(ids, vec![2, 6]);
        assert!(parse_jobs(CAPTURED, Some(&[])).unwrap().is_empty());
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
    fn newer_shape_and_missing_fields() {
        let doc = br#"{"jobs":[{"job_id":12,"job_state":["RUNNING","CONFIGURING"],
            "time_limit":{"set":true,"infinite":false,"number":60},"nodes":"n-[1-2]",
            "partition":"p"},{"job_id":13}]}"#;
        let jobs = parse_jobs(doc, None).unwrap();
        assert_eq!(
            jobs[0],
            JobInfo {
                job_id: 12,
                state: "RUNNING".into(),
                time_limit: TimeLimit::Minutes(60),
                nodes: "n-[1-2]".into(),
                partition: "p".into(),
            }
        );
        assert_eq!(jobs[1].time_limit, TimeLimit::Unknown);
        assert_eq!(jobs[1].state, "");
    }

    #[test]
    fn garbage_is_a_parse_error() {
        for doc in [&b""[..], b"{", b"{\"jobs\":[{\"job_id\":\"x\"}]}", b"[]"] {
            let err = parse_jobs(doc, None).unwrap_err();
            assert!(err.to_string().contains("squeue --json"), "{err}");
        }
    }
}
