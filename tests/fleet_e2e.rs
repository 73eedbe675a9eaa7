//! GPU fleet care end to end with the real slurmctld: a maintenance window GCE announces (through the
//! simulator's control API) for a running node's VM becomes a real Slurm maintenance reservation over
//! that window, and goes when GCE clears it. Runs on Debian bookworm's 22.05 (the host's) and, when
//! its root is there, forky's 26.05 (scripts/slurm-root.sh); outside CI a Slurm that is missing is
//! said and skipped, under CI=true it fails.

// Real slurmctld, slurmds and jobs: these wait for them in real time.
#![allow(clippy::disallowed_methods)]

use chrono::{DateTime, Duration, SubsecRound, Utc};
use devcluster::stack::{Stack, StackNodeset, StackSpec};
use devcluster::SlurmGeneration;
use serde_json::json;

mod slurm_22_05 {
    #[test]
    fn a_maintenance_window_becomes_a_slurm_reservation_and_goes_when_gce_clears_it() {
        super::maintenance_window(devcluster::SlurmGeneration::Bookworm)
    }
}

mod slurm_26_05 {
    #[test]
    fn a_maintenance_window_becomes_a_slurm_reservation_and_goes_when_gce_clears_it() {
        super::maintenance_window(devcluster::SlurmGeneration::Forky)
    }
}

const NODE: &str = "hpc-a-0";
const RES: &str = "slurm-dws-maint-hpc-a-0";

fn spec(slurm: SlurmGeneration) -> StackSpec {
    let bin = env!("CARGO_BIN_EXE_slurm-dws");
    StackSpec {
        slurm,
        ..StackSpec::new(bin, devcluster::sim_bin(bin.as_ref()), vec![StackNodeset::new("a", 0, 2)])
    }
}

/// The maintenance reservation's line of `scontrol -o show reservation`, if Slurm has it.
fn reservation(s: &Stack) -> Option<String> {
    let text = s.cluster.scontrol(&["-o", "show", "reservation"]).unwrap_or_default();
    text.lines().find(|l| l.starts_with(&format!("ReservationName={RES} "))).map(String::from)
}

/// A field of a `scontrol -o show reservation` line.
fn field<'a>(line: &'a str, key: &str) -> &'a str {
    line.split_whitespace().find_map(|f| f.strip_prefix(&format!("{key}="))).unwrap_or_default()
}

/// The last pass's iteration, as `status` reports it.
fn iteration(s: &Stack) -> u64 {
    s.cli_json(&["status"])["last_pass"]["iteration"].as_u64().unwrap_or(0)
}

fn slurm_time(t: DateTime<Utc>) -> String {
    // The cluster's slurmctld runs in UTC (devcluster), as slurm-dws writes the times.
    t.format("%Y-%m-%dT%H:%M:%S").to_string()
}

fn maintenance_window(slurm: SlurmGeneration) {
    if !slurm.available_for_tests("fleet end-to-end tests") {
        return;
    }
    let s = Stack::start(spec(slurm)).unwrap();
    let job = s.cluster.sbatch(&["-N1", "-w", NODE, "--time=60", "-p", "a", "--wrap", "sleep 600"]).unwrap();
    s.wait("the job RUNNING on its node", 90, || {
        (s.cluster.job_state(job).as_deref() == Some("RUNNING")).then_some(())
    });

    // GCE announces a maintenance window for the node's VM, an hour from now, 90 minutes long.
    let start = Utc::now().trunc_subsecs(0) + Duration::hours(1);
    let end = start + Duration::minutes(90);
    let window = json!({"type": "SCHEDULED", "windowStartTime": start.to_rfc3339(),
        "windowEndTime": end.to_rfc3339(), "canReschedule": false, "maintenanceStatus": "PENDING",
        "maintenanceReasons": ["FAILURE_GPU_XID"]});
    s.sim_post(&format!("instances/{NODE}/maintenance"), &window);
    let announced = iteration(&s);
    let line = s.wait("the maintenance reservation in Slurm", 60, || reservation(&s));
    let passes = iteration(&s) - announced;
    assert!(passes <= 2, "within two passes: {passes}\n{line}");
    // Over GCE's window, on that node, a maintenance reservation made over the running job.
    assert_eq!(field(&line, "Nodes"), NODE, "{line}");
    assert_eq!(
        (field(&line, "StartTime"), field(&line, "EndTime")),
        (slurm_time(start).as_str(), slurm_time(end).as_str()),
        "{line}"
    );
    let flags = field(&line, "Flags");
    assert!(flags.contains("MAINT") && flags.contains("IGNORE_JOBS"), "{line}");
    assert_eq!(s.cluster.job_state(job).as_deref(), Some("RUNNING"), "the running job is not touched");
    let events = s.cli_json(&["events"]).to_string();
    assert!(events.contains("maintenance_scheduled") && events.contains("FAILURE_GPU_XID"), "{events}");

    // GCE clears the window (cancelled): the reservation goes within two passes.
    s.sim_delete(&format!("instances/{NODE}/maintenance"));
    let cleared = iteration(&s);
    s.wait("the maintenance reservation gone from Slurm", 60, || reservation(&s).is_none().then_some(()));
    let passes = iteration(&s) - cleared;
    assert!(passes <= 2, "gone within two passes: {passes}");
    let events = s.cli_json(&["events"]).to_string();
    assert!(
        events.contains("maintenance_done") && events.contains("GCE cancelled the maintenance"),
        "{events}"
    );
    assert_eq!(s.cluster.job_state(job).as_deref(), Some("RUNNING"), "the job still runs");
    let _ = s.cluster.client("scancel").arg(job.to_string()).output();
}
