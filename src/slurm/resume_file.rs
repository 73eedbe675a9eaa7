//! `SLURM_RESUME_FILE`: which job each resumed node is for, in Slurm 22.05's and 23.02+'s shapes.
//!
//! slurmctld hands ResumeProgram a JSON document next to the hostlist. It is the only place that
//! ties a node being resumed to the job that wants it, which is what lets slurm-dws size a run
//! duration from the job's TimeLimit and keep a job's nodes in one resize request. Two shapes
//! exist and both must be read:
//!
//! ```text
//! 22.05:  {"jobs":[{"job_id":1,"nodes":"dws-a-[0-1]"}],"all_nodes":"dws-a-[0-1]"}
//! 24.11:  {"jobs":[{"extra":null,"job_id":1,"features":null,"nodes_alloc":"lab-a3-[0-1]",
//!          "nodes_resume":"lab-a3-[0-1]","oversubscribe":"OK","partition":"a3","reservation":null},
//!          ...],"all_nodes_resume":"lab-a3-[0-3]"}
//! ```
//!
//! (23.02 renamed `nodes` to `nodes_resume` and `all_nodes` to `all_nodes_resume`, and added
//! `nodes_alloc`, `partition`, `features`, `extra`, `oversubscribe`, `reservation`.)
//!
//! In both, the per-job node list that matters is the one *to resume* (22.05's `nodes` already
//! leaves out allocated nodes that were up). Unknown fields are ignored so a newer Slurm that adds
//! fields still parses; a document that is not what we expect is a typed error that says what is
//! wrong, so the hook can record it and fall back to treating the nodes as jobless.

use serde_json::{Map, Value};

/// The parsed resume file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResumeFile {
    /// Every node being resumed by this call, as a hostlist expression.
    pub all_nodes: String,
    /// The jobs the nodes are resumed for; nodes in `all_nodes` but in no job are jobless
    /// (e.g. an admin's `scontrol update state=power_up`).
    pub jobs: Vec<ResumeJob>,
}

/// One job of the resume file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResumeJob {
    pub job_id: u32,
    /// The nodes to resume for this job, a hostlist expression (22.05 `nodes`, 23.02+ `nodes_resume`).
    pub nodes: String,
    /// The job's partition; only 23.02+ says it.
    pub partition: Option<String>,
}

/// Why a resume file could not be read. Each variant names the offending field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResumeFileError {
    #[error("resume file is not valid JSON: {0}")]
    Json(String),
    #[error("resume file: expected a JSON object at the top level")]
    NotAnObject,
    #[error("resume file: missing field `{0}`")]
    Missing(String),
    #[error("resume file: field `{field}` should be {expected}")]
    WrongType { field: String, expected: &'static str },
}

/// Parses the bytes of `SLURM_RESUME_FILE`.
pub fn parse(bytes: &[u8]) -> Result<ResumeFile, ResumeFileError> {
    let value: Value = serde_json::from_slice(bytes).map_err(|e| ResumeFileError::Json(e.to_string()))?;
    let top = value.as_object().ok_or(ResumeFileError::NotAnObject)?;

    let all_nodes = if top.contains_key("all_nodes_resume") {
        string_field(top, "all_nodes_resume", "all_nodes_resume")?
    } else {
        string_field(top, "all_nodes", "all_nodes")?
    };

    let jobs = match top.get("jobs") {
        None => return Err(ResumeFileError::Missing("jobs".into())),
        Some(Value::Array(items)) => {
            items.iter().enumerate().map(|(i, item)| parse_job(i, item)).collect::<Result<Vec<_>, _>>()?
        }
        Some(_) => return Err(ResumeFileError::WrongType { field: "jobs".into(), expected: "an array" }),
    };
    Ok(ResumeFile { all_nodes, jobs })
}

fn parse_job(index: usize, item: &Value) -> Result<ResumeJob, ResumeFileError> {
    let at = |name: &str| format!("jobs[{index}].{name}");
    let job = item.as_object().ok_or_else(|| ResumeFileError::WrongType {
        field: format!("jobs[{index}]"),
        expected: "an object",
    })?;
    let job_id = match job.get("job_id") {
        None => return Err(ResumeFileError::Missing(at("job_id"))),
        Some(v) => v.as_u64().and_then(|n| u32::try_from(n).ok()).ok_or_else(|| {
            ResumeFileError::WrongType { field: at("job_id"), expected: "an unsigned 32-bit integer" }
        })?,
    };
    // 23.02+ says `nodes_resume` (and `nodes_alloc`, which we do not need); 22.05 says `nodes`.
    let nodes = if job.contains_key("nodes_resume") {
        string_field(job, "nodes_resume", &at("nodes_resume"))?
    } else {
        string_field(job, "nodes", &at("nodes"))?
    };
    let partition = match job.get("partition") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.is_empty() => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(ResumeFileError::WrongType { field: at("partition"), expected: "a string" }),
    };
    Ok(ResumeJob { job_id, nodes, partition })
}

fn string_field(object: &Map<String, Value>, key: &str, field: &str) -> Result<String, ResumeFileError> {
    match object.get(key) {
        None => Err(ResumeFileError::Missing(field.into())),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(ResumeFileError::WrongType { field: field.into(), expected: "a string" }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(job_id: u32, nodes: &str, partition: Option<&str>) -> ResumeJob {
        ResumeJob { job_id, nodes: nodes.into(), partition: partition.map(str::to_string) }
    }

    /// The verbatim samples of a real 22.05.8 slurmctld (job 3 was allocated dws-a-[1-2]; dws-a-1 was
    /// already up, so only dws-a-2 is listed; the last is an admin's `state=power_up`).
    #[test]
    fn captured_22_05_files() {
        let cases: Vec<(&str, ResumeFile)> = vec![
            (
                r#"{"jobs":[{"job_id":1,"nodes":"dws-a-[0-1]"},{"job_id":2,"nodes":"dws-b-[0-1]"}],"all_nodes":"dws-a-[0-1],dws-b-[0-1]"}"#,
                ResumeFile {
                    all_nodes: "dws-a-[0-1],dws-b-[0-1]".into(),
                    jobs: vec![job(1, "dws-a-[0-1]", None), job(2, "dws-b-[0-1]", None)],
                },
            ),
            (
                r#"{"jobs":[{"job_id":3,"nodes":"dws-a-2"},{"job_id":4,"nodes":"dws-a-[3-5]"}],"all_nodes":"dws-a-[2-5]"}"#,
                ResumeFile {
                    all_nodes: "dws-a-[2-5]".into(),
                    jobs: vec![job(3, "dws-a-2", None), job(4, "dws-a-[3-5]", None)],
                },
            ),
            (
                r#"{"jobs":[],"all_nodes":"dws-a-6"}"#,
                ResumeFile { all_nodes: "dws-a-6".into(), jobs: vec![] },
            ),
        ];
        for (text, want) in cases {
            assert_eq!(parse(text.as_bytes()).unwrap(), want, "{text}");
        }
    }

    /// The files a real 24.11.5 slurmctld handed its ResumeProgram (see testdata/README.md): three
    /// jobs resumed in one call, with `null` for `extra`, `features` and `reservation`; and an
    /// admin's `scontrol update nodename=lab-a3-2 state=power_up`.
    #[test]
    fn captured_24_11_files() {
        let three = parse(include_bytes!("testdata/resume-file-24.11-three-jobs.json")).unwrap();
        assert_eq!(
            three,
            ResumeFile {
                all_nodes: "lab-a3-[0-3]".into(),
                jobs: vec![
                    job(1, "lab-a3-[0-1]", Some("a3")),
                    job(2, "lab-a3-2", Some("a3")),
                    job(4, "lab-a3-3", Some("a3")),
                ],
            }
        );
        let power_up = parse(include_bytes!("testdata/resume-file-24.11-power-up.json")).unwrap();
        assert_eq!(power_up, ResumeFile { all_nodes: "lab-a3-2".into(), jobs: vec![] });
    }

    /// The files a real 26.05.5 slurmctld handed its ResumeProgram (see testdata/README.md): two
    /// jobs in one call, each with 26.05's new `exclusive` and `priority`; and the static node
    /// slurm-dws powered up at start (no job).
    #[test]
    fn captured_26_05_files() {
        let bytes = include_bytes!("testdata/resume-file-26.05-two-jobs.json");
        let text = std::str::from_utf8(bytes).unwrap();
        assert!(text.contains("\"exclusive\":") && text.contains("\"priority\":"), "26.05's shape");
        assert_eq!(
            parse(bytes).unwrap(),
            ResumeFile {
                all_nodes: "lab-a-[0-2]".into(),
                jobs: vec![job(1, "lab-a-[0-1]", Some("a")), job(2, "lab-a-2", Some("a"))],
            }
        );
        let no_job = parse(include_bytes!("testdata/resume-file-26.05-static-no-job.json")).unwrap();
        assert_eq!(no_job, ResumeFile { all_nodes: "lab-s-0".into(), jobs: vec![] });
    }

    /// Unknown fields anywhere are ignored; an empty partition means none; 23.02+'s
    /// `nodes_resume` wins over `nodes_alloc` (a job's nodes that were already up are not resumed).
    #[test]
    fn unknown_fields_and_edge_values() {
        let cases: Vec<(&str, ResumeFile)> = vec![
            (
                r#"{"version":99,"all_nodes":"x-1","jobs":[{"job_id":4294967295,"nodes":"x-1","partition":"","gpus":8}]}"#,
                ResumeFile { all_nodes: "x-1".into(), jobs: vec![job(u32::MAX, "x-1", None)] },
            ),
            (
                r#"{"all_nodes_resume":"x-2","jobs":[{"job_id":7,"nodes_alloc":"x-[1-2]","nodes_resume":"x-2","partition":null}]}"#,
                ResumeFile { all_nodes: "x-2".into(), jobs: vec![job(7, "x-2", None)] },
            ),
        ];
        for (text, want) in cases {
            assert_eq!(parse(text.as_bytes()).unwrap(), want, "{text}");
        }
    }

    #[test]
    fn rejects_malformed_documents_naming_the_problem() {
        use ResumeFileError::*;
        let wrong = |field: &str, expected| WrongType { field: field.into(), expected };
        let cases: Vec<(&str, ResumeFileError)> = vec![
            (r#"[1,2]"#, NotAnObject),
            (r#"{"jobs":[]}"#, Missing("all_nodes".into())),
            (r#"{"all_nodes":"a"}"#, Missing("jobs".into())),
            (r#"{"all_nodes":7,"jobs":[]}"#, wrong("all_nodes", "a string")),
            (r#"{"all_nodes":"a","jobs":{}}"#, wrong("jobs", "an array")),
            (r#"{"all_nodes":"a","jobs":[3]}"#, wrong("jobs[0]", "an object")),
            (r#"{"all_nodes":"a","jobs":[{"nodes":"a"}]}"#, Missing("jobs[0].job_id".into())),
            (
                r#"{"all_nodes":"a","jobs":[{"job_id":1,"nodes":"a"},{"job_id":"2","nodes":"a"}]}"#,
                wrong("jobs[1].job_id", "an unsigned 32-bit integer"),
            ),
            (
                r#"{"all_nodes":"a","jobs":[{"job_id":-1,"nodes":"a"}]}"#,
                wrong("jobs[0].job_id", "an unsigned 32-bit integer"),
            ),
            (
                r#"{"all_nodes":"a","jobs":[{"job_id":4294967296,"nodes":"a"}]}"#,
                wrong("jobs[0].job_id", "an unsigned 32-bit integer"),
            ),
            (r#"{"all_nodes":"a","jobs":[{"job_id":1}]}"#, Missing("jobs[0].nodes".into())),
            (
                r#"{"all_nodes_resume":"a","jobs":[{"job_id":1,"nodes_resume":["a"]}]}"#,
                wrong("jobs[0].nodes_resume", "a string"),
            ),
            (
                r#"{"all_nodes":"a","jobs":[{"job_id":1,"nodes":"a","partition":5}]}"#,
                wrong("jobs[0].partition", "a string"),
            ),
        ];
        for (text, want) in cases {
            assert_eq!(parse(text.as_bytes()).unwrap_err(), want, "{text}");
        }
    }

    #[test]
    fn truncated_or_empty_input_is_a_json_error() {
        let full = br#"{"jobs":[{"job_id":1,"nodes":"dws-a-[0-1]"}],"all_nodes":"dws-a-[0-1]"}"#;
        for cut in [0, 1, 10, full.len() - 1] {
            let err = parse(&full[..cut]).unwrap_err();
            assert!(matches!(err, ResumeFileError::Json(_)), "cut {cut}: {err}");
        }
        assert!(matches!(parse(b"\xff\xfe").unwrap_err(), ResumeFileError::Json(_)));
    }
}
