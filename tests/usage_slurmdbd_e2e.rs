//! The usage spans of a job that ended while the daemon was down, with slurmdbd (issue 41): real
//! slurmctld 22.05 keeping its accounting in a real slurmdbd and MariaDB (`devcluster::accounting`),
//! the daemon and the simulator. A job runs on a flex node and the daemon opens its span; the
//! daemon is killed; the job ends and slurmctld forgets it (`MinJobAge`); the daemon starts
//! again, and its first pass closes the span at the job's real end as `sacct` gives it (within a
//! second), not at that pass. 22.05 only: a slurmdbd must be at least as new as its slurmctld, and
//! Debian's is the host's. Outside CI, missing Slurm, MariaDB or slurmdbd is said and skipped;
//! under CI=true it fails.

// Real slurmctld, slurmdbd and jobs: these wait for them in real time.
#![allow(clippy::disallowed_methods)]

use chrono::{DateTime, NaiveDateTime, Utc};
use devcluster::accounting::Accounting;
use devcluster::stack::{Stack, StackNodeset, StackSpec};

const WHAT: &str = "the slurmdbd usage test";

/// The job's span as the store holds it: (started, ended).
fn span(s: &Stack, job: u32) -> Option<(DateTime<Utc>, Option<DateTime<Utc>>)> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let store = slurm_dws::store::Store::open(&s.path().join("state")).await.ok()?;
        let far = (Utc::now() - chrono::Duration::days(1), Utc::now() + chrono::Duration::days(1));
        let spans = store.job_spans_between(far.0, far.1).await.ok()?;
        spans.into_iter().find(|j| j.job_id == u64::from(job)).map(|j| (j.started_at, j.ended_at))
    })
}

/// The job's end as slurmdbd keeps it (`sacct`, as the daemon reads it).
fn sacct_end(s: &Stack, job: u32) -> Option<DateTime<Utc>> {
    let out = s
        .cluster
        .client("sacct")
        .env("TZ", "UTC")
        .args(["-n", "-P", "-X", "-j", &job.to_string(), "-o", "JobIDRaw,End"])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let end = text.lines().find_map(|l| l.strip_prefix(&format!("{job}|")))?.trim().to_string();
    NaiveDateTime::parse_from_str(&end, "%Y-%m-%dT%H:%M:%S").ok().map(|n| n.and_utc())
}

#[test]
fn a_job_that_ended_while_the_daemon_was_down_ends_at_its_real_end() {
    if !devcluster::available_for_tests(WHAT) || !Accounting::available_for_tests(WHAT) {
        return;
    }
    let acct = Accounting::start().unwrap();
    let bin = env!("CARGO_BIN_EXE_slurm-dws");
    let mut slurm_conf = acct.slurm_conf_lines();
    // slurmctld forgets a job soon after it ends; the idle node stays up while the daemon is down
    // (its VM's life then covers the job's end).
    slurm_conf.extend(["MinJobAge=5".to_string(), "SuspendTime=600".to_string()]);
    let spec = StackSpec {
        slurm_conf,
        ..StackSpec::new(bin, devcluster::sim_bin(bin.as_ref()), vec![StackNodeset::new("a", 0, 1)])
    };
    let mut s = Stack::start(spec).unwrap();
    let job =
        s.cluster.sbatch(&["-p", "a", "-N1", "--time=5", "-o", "/dev/null", "--wrap", "sleep 30"]).unwrap();
    s.wait("the job running", 180, || (s.cluster.job_state(job).as_deref() == Some("RUNNING")).then_some(()));
    let (started, _) = s.wait("the daemon opened the job's span", 60, || span(&s, job));
    s.kill_daemon();

    s.wait("the job ended and slurmctld forgot it", 180, || s.cluster.job_state(job).is_none().then_some(()));
    let end = s.wait("slurmdbd has the job's end", 60, || sacct_end(&s, job));
    // The first pass after the start is clearly later than the job's end.
    std::thread::sleep(std::time::Duration::from_secs(5));
    let restarted = Utc::now();
    s.start_daemon().unwrap();
    let ended = s.wait("the span closed", 60, || span(&s, job).and_then(|(_, e)| e));
    let log = s.daemon_log();
    let gap = (ended - end).num_milliseconds().abs();
    assert!(
        gap <= 1000,
        "the span ends at {ended}, the job ended at {end} (sacct), the daemon restarted at {restarted}; \
         the span began at {started}\n{log}\nslurmdbd: {}",
        acct.log_tail()
    );
    assert!(restarted - ended > chrono::Duration::seconds(4), "not at the pass: {ended} vs {restarted}");
    assert!(log.contains("slurm.conf keeps accounting in slurmdbd"), "{log}");
    assert!(
        log.contains("read from slurmdbd when the jobs that ended while the daemon was down ended"),
        "{log}"
    );
}
