//! Upcoming maintenance through real processes: the daemon against the simulator over real HTTP
//! (the window announced, moved and cleared through the simulator's control API), the real store,
//! and a fake Slurm that keeps the reservations it is asked to make and records every `scontrol`
//! call. (Real Slurm's view of the same reservation is in tests/fleet_e2e.rs.)

// The real daemon against a real simulator, in real time: these wait for it.
#![allow(clippy::disallowed_methods)]

mod common;

use chrono::{DateTime, Duration, SubsecRound, Utc};
use common::*;
use serde_json::json;

const RES: &str = "slurm-dws-maint-hpc-a-1";

/// The `scontrol` reservation calls about the node's maintenance reservation, in order.
fn maint_calls(w: &World) -> Vec<String> {
    w.scontrol_log().lines().filter(|l| l.contains(RES) && !l.contains("show")).map(String::from).collect()
}

fn slurm_time(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%S").to_string()
}

fn window(start: DateTime<Utc>, end: Option<DateTime<Utc>>) -> serde_json::Value {
    let mut m = json!({"type": "SCHEDULED", "windowStartTime": start.to_rfc3339(),
        "latestWindowStartTime": (start + Duration::days(2)).to_rfc3339(), "canReschedule": true,
        "maintenanceStatus": "PENDING", "maintenanceReasons": ["FAILURE_GPU_XID", "FAILURE_NVLINK"]});
    if let Some(end) = end {
        m["windowEndTime"] = json!(end.to_rfc3339());
    }
    m
}

/// GCE announces a maintenance window for a running node's VM: within two passes the node has a
/// `slurm-dws-maint-{node}` reservation over the window, an event and a line in `explain`; GCE moves
/// the window and the reservation follows; GCE clears it and the reservation goes, with an event.
/// All from the VM list every pass makes: no per-VM call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_maintenance_window_is_reserved_followed_and_released() {
    let mut w = World::new(&[("a", 0, 4, "")], "").await;
    w.recording_slurm(&[
        ("hpc-a-0", "idle", &["CLOUD", "POWERED_DOWN"]),
        ("hpc-a-1", "allocated", &["CLOUD"]),
    ]);
    w.keep_reservations();
    w.start_daemon();
    w.resume_for_job(5, "hpc-a-1");
    wait_converged(&w, &["hpc-a-1".to_string()].into(), 60).await;

    let start = Utc::now().trunc_subsecs(0) + Duration::hours(2);
    let end = start + Duration::minutes(90);
    w.sim_post("instances/hpc-a-1/maintenance", window(start, Some(end))).await;
    let before = w.iteration();
    w.wait_for("the maintenance reservation", 30, || {
        w.slurm_reservations().contains(&RES.to_string()).then_some(())
    });
    assert!(w.iteration() <= before + 2, "within two passes ({before} → {})", w.iteration());
    assert_eq!(
        maint_calls(&w),
        [format!(
            "create reservation reservationname={RES} nodes=hpc-a-1 starttime={} endtime={} user=root flags=maint,ignore_jobs",
            slurm_time(start),
            slurm_time(end)
        )]
    );
    let scheduled = w.events_of("maintenance_scheduled");
    assert_eq!(scheduled.len(), 1, "{scheduled:?}");
    let message = scheduled[0]["message"].as_str().unwrap();
    assert!(message.contains("reasons FAILURE_GPU_XID,FAILURE_NVLINK") && message.contains(RES), "{message}");
    let story = String::from_utf8_lossy(&w.cli(&["explain", "hpc-a-1"]).stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(story.contains("GCE will maintain its VM from") && story.contains("FAILURE_GPU_XID"), "{story}");
    assert!(story.contains(&format!("Slurm reservation {RES} (maint,ignore_jobs)")), "{story}");
    // Steady: no second reservation, no second event.
    w.wait_passes(2, 30);
    assert_eq!(maint_calls(&w).len(), 1, "{:?}", maint_calls(&w));
    assert_eq!(w.events_of("maintenance_scheduled").len(), 1);

    // GCE moves the window, and leaves out its end: the reservation follows, three hours long.
    let moved = start + Duration::hours(1);
    w.sim_post("instances/hpc-a-1/maintenance", window(moved, None)).await;
    w.wait_for("the reservation moved", 30, || (maint_calls(&w).len() == 3).then_some(()));
    assert_eq!(
        maint_calls(&w)[1..],
        [
            format!("delete reservation={RES}"),
            format!(
                "create reservation reservationname={RES} nodes=hpc-a-1 starttime={} endtime={} user=root flags=maint,ignore_jobs",
                slurm_time(moved),
                slurm_time(moved + Duration::hours(3))
            )
        ]
    );
    assert_eq!(w.events_of("maintenance_scheduled").len(), 2);

    // GCE clears it (cancelled: the window had not begun).
    w.sim_delete("instances/hpc-a-1/maintenance").await;
    let before = w.iteration();
    w.wait_for("the reservation gone", 30, || {
        (!w.slurm_reservations().contains(&RES.to_string())).then_some(())
    });
    assert!(w.iteration() <= before + 2, "within two passes ({before} → {})", w.iteration());
    let done = w.events_of("maintenance_done");
    assert_eq!(done.len(), 1, "{done:?}");
    assert!(done[0]["message"].as_str().unwrap().contains("GCE cancelled the maintenance"), "{done:?}");
    let story = String::from_utf8_lossy(&w.cli(&["explain", "hpc-a-1"]).stdout).to_string();
    assert!(!story.contains("GCE will maintain its VM from"), "{story}");
    assert_eq!(w.node_states()["hpc-a-1"], "up", "the node stays in service");

    let calls = w.sim_calls().await;
    assert_eq!(count(&calls, "instances.get"), 0, "no per-VM call: {calls}");
}
