//! Reserved capacity end to end with the real slurmctld: a DWS Calendar-mode booking (a future
//! reservation in the simulator) opens about a minute after the start. Before it opens, a job for
//! its nodeset is PENDING with its expected start at the window's start (the window hold); when it
//! opens, the job runs on VMs that consume the delivered reservation and a static nodeset on another
//! booking fills (a static node Slurm takes its new VM's slurmd for a reboot is returned); a job
//! whose time limit would cross the window's end does not start in it; a VM GCE deletes within the
//! window is made again; at the end the nodes leave service and the VMs, MIGs and requests are
//! gone. Runs on Debian bookworm's 22.05 (the host's) and, when its root is there, forky's 26.05
//! (scripts/slurm-root.sh); outside CI a Slurm that is missing is said and skipped, under CI=true
//! it fails.

// Real slurmctld, slurmds and jobs: these wait for them in real time.
#![allow(clippy::disallowed_methods)]

use chrono::{DateTime, Duration, SubsecRound, Utc};
use devcluster::stack::{Stack, StackNodeset, StackSpec};
use devcluster::SlurmGeneration;
use serde_json::{json, Value};

mod slurm_22_05 {
    #[test]
    fn a_calendar_booking_runs_its_jobs_in_the_window_and_ends_with_it() {
        super::calendar_booking(devcluster::SlurmGeneration::Bookworm)
    }
}

mod slurm_26_05 {
    #[test]
    fn a_calendar_booking_runs_its_jobs_in_the_window_and_ends_with_it() {
        super::calendar_booking(devcluster::SlurmGeneration::Forky)
    }
}

const PROJECT: &str = "demo-project";
const ZONE: &str = "us-central1-a";
/// The window opens this long after the bookings are made, and lasts this long (seconds).
const LEAD: i64 = 75;
const WINDOW: i64 = 150;
const EOL_GRACE: i64 = 60;

/// A nodeset on the calendar-mode booking `booking`, which delivers `{booking}-res`.
fn on_booking(name: &str, st: u32, dy: u32, booking: &str) -> StackNodeset {
    StackNodeset::new(name, st, dy).reserved(
        &format!(
            "future_reservation = \"projects/{PROJECT}/zones/{ZONE}/futureReservations/{booking}\"\neol_grace = {EOL_GRACE}"
        ),
        &format!("projects/{PROJECT}/reservations/{booking}-res"),
    )
}

fn spec(slurm: SlurmGeneration) -> StackSpec {
    let bin = env!("CARGO_BIN_EXE_slurm-dws");
    StackSpec {
        slurm,
        reconcile: "mig_gc_grace = 5".into(),
        ..StackSpec::new(
            bin,
            devcluster::sim_bin(bin.as_ref()),
            vec![on_booking("c", 0, 2, "book"), on_booking("s", 2, 0, "sbook")],
        )
    }
}

/// The line of `scontrol -o show reservation` of `name`, if Slurm has it.
fn slurm_reservation(s: &Stack, name: &str) -> Option<String> {
    let text = s.cluster.scontrol(&["-o", "show", "reservation"]).unwrap_or_default();
    text.lines().find(|l| l.starts_with(&format!("ReservationName={name} "))).map(String::from)
}

fn field<'a>(line: &'a str, key: &str) -> &'a str {
    line.split_whitespace().find_map(|f| f.strip_prefix(&format!("{key}="))).unwrap_or_default()
}

fn slurm_time(t: DateTime<Utc>) -> String {
    // The cluster's slurmctld runs in UTC (devcluster), as slurm-dws writes the times.
    t.format("%Y-%m-%dT%H:%M:%S").to_string()
}

fn parse_slurm_time(s: &str) -> Option<DateTime<Utc>> {
    chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S").ok().map(|t| t.and_utc())
}

/// `squeue --start`'s expected start of `job` (`%S`), as Slurm prints it.
fn expected_start(s: &Stack, job: u32) -> String {
    let out =
        s.cluster.client("squeue").args(["--start", "-h", "-j", &job.to_string(), "-o", "%S %r"]).output();
    out.map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string()).unwrap_or_default()
}

/// The job's whole AdminComment (`scontrol show job` prints it on a line of its own; the one-line
/// form cuts it at its first space).
fn admin_comment(s: &Stack, job: u32) -> String {
    let text = s.cluster.scontrol(&["show", "job", &job.to_string()]).unwrap_or_default();
    text.lines().find_map(|l| l.trim().strip_prefix("AdminComment=")).unwrap_or_default().trim().to_string()
}

fn job_field(s: &Stack, job: u32, key: &str) -> String {
    s.cluster.job_info(job).and_then(|m| m.get(key).cloned()).unwrap_or_default()
}

/// The VMs on the simulator's reservation `name`.
fn consuming(s: &Stack, name: &str) -> Vec<String> {
    let all = s.sim_get("reservations");
    let r = all.as_array().and_then(|a| a.iter().find(|r| r["name"] == name).cloned()).unwrap_or(Value::Null);
    let mut v: Vec<String> = r["vms"]
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_str().map(String::from)).collect())
        .unwrap_or_default();
    v.sort();
    v
}

fn node_state(s: &Stack, node: &str) -> String {
    s.cluster.node_states().ok().and_then(|m| m.get(node).cloned()).unwrap_or_default()
}

fn events(s: &Stack, kind: &str) -> Vec<Value> {
    s.cli_json(&["events"])
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e["kind"] == kind)
        .collect()
}

fn calendar_booking(slurm: SlurmGeneration) {
    if !slurm.available_for_tests("reserved-capacity end-to-end tests") {
        return;
    }
    let s = Stack::start(spec(slurm)).unwrap();
    let start = Utc::now().trunc_subsecs(0) + Duration::seconds(LEAD);
    let end = start + Duration::seconds(WINDOW);
    for (booking, count) in [("book", 2), ("sbook", 2)] {
        let made = s.sim_post(
            "future-reservations",
            &json!({"project": PROJECT, "zone": ZONE, "name": booking, "machine_type": "n2-standard-4",
                    "total_count": count, "start_time": start.to_rfc3339(), "end_time": end.to_rfc3339(),
                    "reservation_name": format!("{booking}-res")}),
        );
        assert!(made.is_object(), "{made}");
    }

    // Before the window: each nodeset's nodes are held until its start.
    let hold = format!("slurm-dws-window-c-{}", start.timestamp());
    let line = s.wait("the window hold in Slurm", 60, || slurm_reservation(&s, &hold));
    eprintln!("{line}");
    assert_eq!(field(&line, "Nodes"), "hpc-c-[0-1]", "{line}");
    assert_eq!(field(&line, "EndTime"), slurm_time(start), "{line}");
    assert!(field(&line, "Flags").contains("MAINT"), "{line}");
    s.wait("the static nodeset's hold", 30, || {
        slurm_reservation(&s, &format!("slurm-dws-window-s-{}", start.timestamp()))
    });

    // A job submitted before the window: PENDING, expected to start at the window's start.
    let a = s.cluster.sbatch(&["-N1", "-p", "c", "--time=1", "--wrap", "sleep 20"]).unwrap();
    let shown = s.wait("an expected start for the job", 60, || {
        let shown = expected_start(&s, a);
        (!shown.is_empty() && !shown.starts_with("N/A")).then_some(shown)
    });
    eprintln!("squeue --start of job {a} on Slurm {}: {shown}", slurm.version());
    assert_eq!(s.cluster.job_state(a).as_deref(), Some("PENDING"));
    let at = shown.split_whitespace().next().and_then(parse_slurm_time).unwrap_or_else(|| panic!("{shown}"));
    assert!(
        (at - start).num_seconds().abs() <= 60,
        "expected start {at}, the window opens at {start}: {shown}"
    );
    let comment = s.wait("the job's AdminComment naming the booking", 30, || {
        Some(admin_comment(&s, a)).filter(|c| c.contains("futureReservations/book,"))
    });
    eprintln!("AdminComment of job {a}: {comment:?}");
    assert!(comment.starts_with("slurm-dws: waiting for the window of"), "{comment}");
    assert!(s.vms().is_empty(), "no VM before the window: {:?}", s.vms());

    // The window opens: the job runs on a VM of the delivered reservation; the static nodes fill.
    s.wait("the job RUNNING in the window", (LEAD + 90) as u64, || {
        (s.cluster.job_state(a).as_deref() == Some("RUNNING")).then_some(())
    });
    assert!(Utc::now() >= start, "not before the window");
    let node = job_field(&s, a, "NodeList");
    assert_eq!(consuming(&s, "book-res"), vec![node.clone()], "the job's VM consumes the reservation");
    s.wait("the static nodes filled", 60, || {
        (consuming(&s, "sbook-res") == ["hpc-s-0", "hpc-s-1"]
            && ["hpc-s-0", "hpc-s-1"].iter().all(|n| node_state(&s, n) == "idle"))
        .then_some(())
    });

    // hpc-s-1's slurmd registers again with a later boot time (what a second registration right
    // after slurm-dws's resume can do): to Slurm a reboot, DOWN; the first boot of a VM made
    // moments ago is no reboot, and the node is back in service.
    let reboots = || {
        std::fs::read_to_string(s.cluster.log_dir().join("slurmctld.log"))
            .unwrap_or_default()
            .matches("Node hpc-s-1 unexpectedly rebooted")
            .count()
    };
    let returns = || events(&s, "returned").iter().filter(|e| e["nodes"] == "hpc-s-1").count();
    let (before, returned) = (reboots(), returns());
    s.cluster.stop_slurmd("hpc-s-1").unwrap();
    std::thread::sleep(std::time::Duration::from_secs(2));
    s.cluster.start_slurmd("hpc-s-1").unwrap();
    s.wait("Slurm taking hpc-s-1's new registration for a reboot", 30, || (reboots() > before).then_some(()));
    s.wait("hpc-s-1 back in service", 60, || (node_state(&s, "hpc-s-1") == "idle").then_some(()));
    assert!(returns() > returned, "{:?}", events(&s, "returned"));

    // A job that would outlive the window does not start in it.
    let b = s.cluster.sbatch(&["-N1", "-p", "c", "--time=10", "--wrap", "sleep 600"]).unwrap();
    // A VM GCE deletes within the window is made again.
    assert!(s.sim_post("instances/hpc-s-0/expire", &json!({})).is_object());
    s.wait("hpc-s-0's VM made again", 90, || {
        (consuming(&s, "sbook-res").contains(&"hpc-s-0".to_string()) && node_state(&s, "hpc-s-0") == "idle")
            .then_some(())
    });
    s.wait("job A done", 90, || (s.cluster.job_state(a).as_deref() == Some("COMPLETED")).then_some(()));
    assert_eq!(
        s.cluster.job_state(b).as_deref(),
        Some("PENDING"),
        "job B must not start: {}",
        expected_start(&s, b)
    );
    eprintln!("squeue --start of job {b} (would cross the end): {}", expected_start(&s, b));

    // The window ends: the VMs go, the nodes leave service, nothing owned is left.
    let wait = (end - Utc::now()).num_seconds().max(0) as u64 + 60;
    s.wait("the VMs gone at the window's end", wait, || s.vms().is_empty().then_some(()));
    s.wait("MIGs collected", 60, || s.migs().is_empty().then_some(()));
    s.wait("no request in flight", 30, || {
        s.cli_json(&["requests", "--active"]).as_array().is_some_and(|a| a.is_empty()).then_some(())
    });
    assert_eq!(s.cluster.job_state(b).as_deref(), Some("PENDING"), "job B never ran");
    let ended = events(&s, "window_ended");
    assert!(ended.iter().any(|e| e["nodes"].as_str().is_some_and(|n| n.starts_with("hpc-s-"))), "{ended:?}");
    for n in ["hpc-s-0", "hpc-s-1"] {
        let st = node_state(&s, n);
        assert!(st.starts_with("down"), "{n} out of service: {st}");
    }
    let _ = s.cluster.client("scancel").arg(b.to_string()).output();
}
