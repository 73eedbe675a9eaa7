//! SLURM_RESUME_FILE: truncated, wrong types, missing fields, huge, not a file — in both shapes
//! (22.05 `{jobs:[{job_id,nodes}],all_nodes}` and 23.02+ `{all_nodes_resume, jobs:[{nodes_alloc,
//! nodes_resume,...}]}`), given to the real resume hook.
//!
//! The rule (`src/hook.rs`): a missing or corrupt resume file is not bad input. The resume is recorded without
//! a job (exit 0), and an event says what was wrong with the file. So each case must: exit 0, add
//! exactly one inbox row whose jobs are what the file validly said (none when it is corrupt), add one
//! `resume_file` event naming the problem, and change nothing else.

use super::common::World;
use super::tally::{changed_tables, rows, runtime, snapshot, Kind, Tally};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// A resume must return in milliseconds; a resume file must not make it slow or hang.
const HOOK_DEADLINE: Duration = Duration::from_secs(15);

struct Case {
    what: String,
    /// File content, or None for "point SLURM_RESUME_FILE somewhere odd" (see `path`).
    content: Option<Vec<u8>>,
    path: Option<String>,
    /// Jobs the inbox row must hold afterwards.
    jobs: Vec<(u32, String)>,
    /// Words the resume_file event must contain; None = no event expected (a valid file).
    note: Option<Vec<String>>,
}

fn v22() -> Value {
    json!({"jobs": [{"job_id": 11, "nodes": "hpc-a-[1-2]"}, {"job_id": 12, "nodes": "hpc-a-3"}],
           "all_nodes": "hpc-a-[1-3]"})
}

fn v23() -> Value {
    json!({"all_nodes_resume": "hpc-a-[1-3]",
           "jobs": [{"extra": "", "features": "", "job_id": 11, "nodes_alloc": "hpc-a-[0-2]",
                     "nodes_resume": "hpc-a-[1-2]", "oversubscribe": "OK", "partition": "flex",
                     "reservation": ""},
                    {"job_id": 12, "nodes_alloc": "hpc-a-3", "nodes_resume": "hpc-a-3", "partition": "flex"}]})
}

fn good_jobs() -> Vec<(u32, String)> {
    vec![(11, "hpc-a-[1-2]".into()), (12, "hpc-a-3".into())]
}

fn case(what: impl Into<String>, v: &Value, jobs: Vec<(u32, String)>, note: Option<&[&str]>) -> Case {
    Case {
        what: what.into(),
        content: Some(v.to_string().into_bytes()),
        path: None,
        jobs,
        note: note.map(|n| n.iter().map(|s| s.to_string()).collect()),
    }
}

fn corrupt(what: impl Into<String>, bytes: Vec<u8>, words: &[&str]) -> Case {
    Case {
        what: what.into(),
        content: Some(bytes),
        path: None,
        jobs: vec![],
        note: Some(words.iter().map(|s| s.to_string()).collect()),
    }
}

/// Sets `path` (`jobs.0.job_id`) in `v` to `to`, or removes it when `to` is None.
fn edit(v: &Value, path: &str, to: Option<Value>) -> Value {
    let mut v = v.clone();
    let parts: Vec<&str> = path.split('.').collect();
    let mut cur = &mut v;
    for p in &parts[..parts.len() - 1] {
        cur = match p.parse::<usize>() {
            Ok(i) => &mut cur[i],
            Err(_) => &mut cur[*p],
        };
    }
    let last = parts[parts.len() - 1];
    match (to, cur, last.parse::<usize>()) {
        (Some(to), cur, Ok(i)) => cur[i] = to,
        (Some(to), cur, Err(_)) => cur[last] = to,
        (None, Value::Object(m), _) => {
            m.remove(last);
        }
        _ => {}
    }
    v
}

fn cases() -> Vec<Case> {
    let mut cs =
        vec![case("22.05 shape", &v22(), good_jobs(), None), case("23.02 shape", &v23(), good_jobs(), None)];
    let wrong_values: Vec<(&str, Value)> = vec![
        ("null", Value::Null),
        ("a number", json!(1)),
        ("a negative number", json!(-1)),
        ("a float", json!(1.5)),
        ("a bool", json!(true)),
        ("an array", json!(["hpc-a-1"])),
        ("an object", json!({"nodes": "hpc-a-1"})),
        ("2^32", json!(4_294_967_296u64)),
        ("a string", json!("11")),
    ];
    // Every field each shape has: (shape, path, the field's name in the error, is it read?).
    let fields: &[(&str, &str, &str, bool)] = &[
        ("22.05", "all_nodes", "all_nodes", true),
        ("22.05", "jobs", "jobs", true),
        ("22.05", "jobs.0", "jobs[0]", true),
        ("22.05", "jobs.0.job_id", "jobs[0].job_id", true),
        ("22.05", "jobs.1.job_id", "jobs[1].job_id", true),
        ("22.05", "jobs.0.nodes", "jobs[0].nodes", true),
        ("23.02", "all_nodes_resume", "all_nodes_resume", true),
        ("23.02", "jobs", "jobs", true),
        ("23.02", "jobs.0.job_id", "jobs[0].job_id", true),
        ("23.02", "jobs.0.nodes_resume", "jobs[0].nodes_resume", true),
        ("23.02", "jobs.1.partition", "jobs[1].partition", true),
        ("23.02", "jobs.0.nodes_alloc", "nodes_alloc", false),
        ("23.02", "jobs.0.features", "features", false),
    ];
    for (shape, path, field, read) in fields {
        let base = if *shape == "22.05" { v22() } else { v23() };
        for (name, value) in &wrong_values {
            let is_right_type = match *field {
                f if f.ends_with("job_id") => value.as_u64().is_some_and(|n| n <= u32::MAX as u64),
                "jobs" => value.is_array(),
                "jobs[0]" => value.is_object(),
                f if f.ends_with("partition") => value.is_string() || value.is_null(),
                _ => value.is_string(),
            };
            let v = edit(&base, path, Some(value.clone()));
            if !read || is_right_type {
                // Not read, or a value of the right type: the file stays valid. (A string where a
                // hostlist belongs is a bad node list for that job only: covered below.)
                if *field == "jobs"
                    || *field == "jobs[0]"
                    || field.ends_with("nodes")
                    || field.ends_with("nodes_resume")
                {
                    continue;
                }
                let jobs = match (*field, value.as_u64()) {
                    (f, Some(n)) if f.ends_with("job_id") => {
                        let mut j = good_jobs();
                        j[if f.starts_with("jobs[1]") { 1 } else { 0 }].0 = n as u32;
                        j
                    }
                    _ => good_jobs(),
                };
                cs.push(case(format!("{shape} {path} = {name} (harmless)"), &v, jobs, None));
            } else {
                cs.push(case(format!("{shape} {path} = {name}"), &v, vec![], Some(&["corrupt", field])));
            }
        }
        if *read && *path != "jobs.0" && !path.ends_with("partition") {
            let v = edit(&base, path, None);
            // A 23.02 file without its own field falls back to the 22.05 name, and says that one.
            let missing = match *path {
                "all_nodes_resume" => "all_nodes",
                p if p.ends_with("nodes_resume") => "jobs[0].nodes",
                _ => field,
            };
            cs.push(case(
                format!("{shape} {path} missing"),
                &v,
                vec![],
                Some(&["corrupt", "missing", missing]),
            ));
        }
    }
    // A job whose node list is not a hostlist: that job is dropped, said, and the others kept.
    for (shape, path) in [("22.05", "jobs.0.nodes"), ("23.02", "jobs.0.nodes_resume")] {
        let base = if shape == "22.05" { v22() } else { v23() };
        for bad in ["hpc-a-[1-", "hpc-a-[2-1]", "a\nb"] {
            let v = edit(&base, path, Some(json!(bad)));
            cs.push(case(
                format!("{shape} {path} = {bad:?}"),
                &v,
                vec![(12, "hpc-a-3".into())],
                Some(&["job 11", "bad node list"]),
            ));
        }
    }
    // Truncated anywhere: corrupt.
    for (shape, v) in [("22.05", v22()), ("23.02", v23())] {
        let text = v.to_string().into_bytes();
        for k in 0..16 {
            let cut = text.len() * k / 16;
            cs.push(corrupt(
                format!("{shape} truncated at {cut}/{}", text.len()),
                text[..cut].to_vec(),
                &["corrupt"],
            ));
        }
    }
    let top: Vec<(&str, &[u8])> = vec![
        ("an array", b"[1,2]"),
        ("a string", b"\"hpc-a-1\""),
        ("a number", b"42"),
        ("null", b"null"),
        ("whitespace", b" \n\t "),
        ("not UTF-8", b"\xff\xfe{\x00}"),
        ("NUL bytes", b"\0\0\0\0"),
        ("a UTF-8 BOM before JSON", b"\xef\xbb\xbf{\"jobs\":[],\"all_nodes\":\"hpc-a-1\"}"),
        ("two documents", b"{\"jobs\":[],\"all_nodes\":\"x\"}{\"jobs\":[]}"),
        ("JSON with comments", b"{\"jobs\":[], /* x */ \"all_nodes\":\"x\"}"),
    ];
    for (what, bytes) in top {
        cs.push(corrupt(format!("top level is {what}"), bytes.to_vec(), &["corrupt"]));
    }
    // Deep nesting must be an error, not a stack overflow.
    let deep = format!("{{\"all_nodes\":\"x\",\"jobs\":{}{}}}", "[".repeat(100_000), "]".repeat(100_000));
    cs.push(corrupt("100,000 nested arrays", deep.into_bytes(), &["corrupt"]));
    // Huge but valid: 20,000 jobs (a 10,000-node resume with one job per node is ~600 KB).
    let many: Vec<Value> =
        (0..20_000).map(|j| json!({"job_id": j + 1, "nodes": format!("hpc-a-{}", j % 16)})).collect();
    let big = json!({"jobs": many, "all_nodes": "hpc-a-[0-15]"});
    let big_jobs: Vec<(u32, String)> = (0..20_000).map(|j| (j + 1, format!("hpc-a-{}", j % 16))).collect();
    cs.push(case("20,000 jobs (valid)", &big, big_jobs, None));
    // Huge garbage: 64 MiB of spaces then junk.
    let mut huge = vec![b' '; 64 << 20];
    huge.extend_from_slice(b"{");
    cs.push(corrupt("64 MiB of blanks and an open brace", huge, &["SLURM_RESUME_FILE"]));
    // Not a regular file, or none.
    for (what, path, words) in [
        ("/dev/zero (endless)", "/dev/zero", vec!["SLURM_RESUME_FILE"]),
        ("a directory", "/", vec!["SLURM_RESUME_FILE"]),
        ("a FIFO nobody writes", "@FIFO@", vec!["SLURM_RESUME_FILE", "not a regular file"]),
        ("a missing file", "/nonexistent/resume-file", vec!["SLURM_RESUME_FILE", "/nonexistent/resume-file"]),
        ("unset", "", vec!["SLURM_RESUME_FILE not set"]),
    ] {
        cs.push(Case {
            what: what.into(),
            content: None,
            path: Some(path.into()),
            jobs: vec![],
            note: Some(words.iter().map(|s| s.to_string()).collect()),
        });
    }
    cs
}

pub fn run() -> Vec<Tally> {
    let mut t = Tally::new("resume file (SLURM_RESUME_FILE)", Kind::Input);
    let rt = runtime();
    let w = rt.block_on(World::new(&[("a", 0, 16, "")], ""));
    assert!(w.hook("resume", "hpc-a-0", None).status.success(), "setup hook");
    let link = w.path().join("slurm-dws-resume");
    let mut next_before = None;
    for c in cases() {
        // The last case's "after" is this one's "before" (one snapshot per case).
        let before = match next_before.take() {
            Some(s) => s,
            None => rt.block_on(snapshot(&w.state_dir())),
        };
        let file = w.path().join("resume-file");
        let mut cmd = std::process::Command::new(&link);
        cmd.arg("hpc-a-[1-3]").env_clear().env("SLURM_DWS_CONFIG", &w.config).current_dir(w.path());
        match (&c.content, c.path.as_deref()) {
            (Some(bytes), _) => {
                std::fs::write(&file, bytes).unwrap();
                cmd.env("SLURM_RESUME_FILE", &file);
            }
            (None, Some("")) => {}
            (None, Some("@FIFO@")) => {
                let fifo = w.path().join("resume-fifo");
                if !fifo.exists() {
                    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
                }
                cmd.env("SLURM_RESUME_FILE", &fifo);
            }
            (None, Some(p)) => {
                cmd.env("SLURM_RESUME_FILE", p);
            }
            (None, None) => unreachable!(),
        }
        t.tried += 1;
        let started = Instant::now();
        let out = match run_with_deadline(cmd, HOOK_DEADLINE) {
            Some(o) => o,
            None => {
                t.fail(format!("{}: the hook did not finish within {HOOK_DEADLINE:?} (killed)", c.what));
                continue;
            }
        };
        let took = started.elapsed();
        if !out.status.success() {
            t.fail(format!(
                "{}: exit {:?} (a bad resume file is not bad input): {}",
                c.what,
                out.status.code(),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
            continue;
        }
        let after = rt.block_on(snapshot(&w.state_dir()));
        let mut changed = changed_tables(&before, &after);
        next_before = Some(after.clone());
        changed.retain(|tb| !matches!(tb.as_str(), "inbox" | "events" | "event_nodes" | "sqlite_sequence"));
        if !changed.is_empty() {
            t.state_changed(format!("{}: also changed {changed:?}", c.what));
        }
        let new_rows = rows(&after, "inbox").len() - rows(&before, "inbox").len();
        let row = rows(&after, "inbox").last().cloned().unwrap_or_default();
        // inbox columns: id, received_at, kind, hostlist, jobs, processed_at
        let jobs: Vec<(u32, String)> = row
            .get(4)
            .and_then(|j| j.as_str())
            .and_then(|j| serde_json::from_str(j).ok())
            .unwrap_or_default();
        if new_rows != 1 || jobs != c.jobs {
            let shown: Vec<_> = jobs.iter().take(3).collect();
            let want: Vec<_> = c.jobs.iter().take(3).collect();
            t.fail(format!(
                "{}: {new_rows} inbox rows with {} jobs {shown:?}.., want 1 row with {} jobs {want:?}..",
                c.what,
                jobs.len(),
                c.jobs.len()
            ));
            if !c.jobs.is_empty() && jobs.len() > c.jobs.len() {
                t.accepted_wrongly(format!("{}: jobs recorded from a corrupt file", c.what));
            }
        }
        let new_events: Vec<Vec<Value>> =
            rows(&after, "events").into_iter().skip(rows(&before, "events").len()).collect();
        // events columns: id, time, kind, nodes, message
        let notes: Vec<String> = new_events
            .iter()
            .filter(|e| e.get(2).and_then(|k| k.as_str()) == Some("resume_file"))
            .filter_map(|e| e.get(4).and_then(|m| m.as_str()).map(String::from))
            .collect();
        match &c.note {
            None if !notes.is_empty() => t.fail(format!("{}: unexpected event {notes:?}", c.what)),
            Some(words) if notes.len() != 1 => {
                t.fail(format!("{}: want one resume_file event naming {words:?}, got {notes:?}", c.what))
            }
            Some(words) => {
                let m = &notes[0];
                for wd in words {
                    if !m.contains(wd.as_str()) {
                        t.fail(format!("{}: the event does not name {wd:?}: {m}", c.what));
                    }
                }
                if m.contains(|ch: char| ch.is_control()) || m.len() > 2000 {
                    t.fail(format!(
                        "{}: the event is not one short line: {:?}",
                        c.what,
                        &m[..m.len().min(300)]
                    ));
                }
            }
            None => {}
        }
        if took > Duration::from_secs(5) && c.jobs.len() < 1000 {
            t.fail(format!("{}: the hook took {took:?}", c.what));
        }
    }
    vec![t]
}

/// Runs `cmd`, killing it after `deadline` (`None` then). Output is drained while it runs.
pub fn run_with_deadline(mut cmd: std::process::Command, deadline: Duration) -> Option<std::process::Output> {
    use std::io::Read;
    use std::process::Stdio;
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn");
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let reader_out = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let reader_err = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        v
    });
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if started.elapsed() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let stdout = reader_out.join().unwrap();
    let stderr = reader_err.join().unwrap();
    status.map(|status| std::process::Output { status, stdout, stderr })
}
