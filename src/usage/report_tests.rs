//! Table tests of the usage report: clipping, busy/idle with overlapping jobs, where idle time goes,
//! cost and unpriced hours.

use super::*;
use crate::config::{HourPrice, MachinePrices, Pricing};
use crate::usage::pricing::CatalogState;

const T0: &str = "2026-11-01T00:00:00Z";
/// The last pass that saw the VMs still open (hours after T0).
const LAST_PASS: f64 = 12.0;

/// `T0 + h` hours.
fn at(h: f64) -> DateTime<Utc> {
    T0.parse::<DateTime<Utc>>().unwrap() + chrono::Duration::milliseconds((h * 3_600_000.0) as i64)
}

fn vm(
    id: &str,
    node: &str,
    nodeset: &str,
    model: &str,
    job: Option<u64>,
    from: f64,
    to: Option<f64>,
) -> VmSpan {
    VmSpan {
        instance_id: id.into(),
        vm: format!("{node}-vm"),
        node: node.into(),
        nodeset: nodeset.into(),
        model: model.into(),
        machine_type: if nodeset == "cpu" { "c3-standard-8".into() } else { "a3-ultragpu-8g".into() },
        gpus: if nodeset == "cpu" { 0 } else { 8 },
        job_id: job,
        created_at: at(from),
        // An open VM was last seen by the pass at LAST_PASS.
        last_seen: at(to.unwrap_or(LAST_PASS)),
        deleted_at: to.map(at),
    }
}

fn job(id: u64, node: &str, user: &str, account: &str, from: f64, to: Option<f64>) -> JobSpan {
    JobSpan {
        job_id: id,
        node: node.into(),
        user: user.into(),
        account: account.into(),
        partition: "gpu".into(),
        started_at: at(from),
        ended_at: to.map(at),
    }
}

fn book() -> PriceBook {
    let mut p = Pricing::default();
    p.per_hour.insert(
        "a3-ultragpu-8g".into(),
        MachinePrices { flex: HourPrice::new(40.0), spot: HourPrice::new(30.0), ..Default::default() },
    );
    PriceBook::new(&p, Err(CatalogState::NotAsked))
}

fn period(a: f64, b: f64) -> Period {
    Period { since: at(a), until: at(b) }
}

/// (key, vm_hours, busy, idle, gpu_hours, cost)
type Want<'a> = &'a [(&'a str, f64, f64, f64, f64, Option<f64>)];

fn check(r: &Report, want: Want) {
    let got: Vec<_> = r
        .rows
        .iter()
        .map(|x| (x.key.as_str(), x.vm_hours, x.busy_vm_hours, x.idle_vm_hours, x.gpu_hours, x.cost))
        .collect();
    assert_eq!(got, want.to_vec(), "{:?}", r.by);
    for row in r.rows.iter().chain([&r.total]) {
        assert_eq!(row.busy_vm_hours + row.idle_vm_hours, row.vm_hours, "{row:?}");
    }
}

#[test]
fn busy_is_the_union_of_the_jobs_and_idle_the_rest_clipped_to_the_period() {
    // VM n1 (flex, job 7) lives 0..10h; jobs: 7 on 1..5, 8 on 3..6 (overlapping: 1..6 busy = 5h).
    // VM n2 (spot, static) lives 2h.. still open; job 9 runs 4h.. still running.
    let vms = [
        vm("1", "n1", "a3", "flex", Some(7), 0.0, Some(10.0)),
        vm("2", "n2", "a3s", "spot", None, 2.0, None),
    ];
    let jobs = [
        job(7, "n1", "ann", "phys", 1.0, Some(5.0)),
        job(8, "n1", "bob", "chem", 3.0, Some(6.0)),
        job(9, "n2", "bob", "chem", 4.0, None),
    ];
    let now = at(12.0);
    let r = report(&vms, &jobs, period(0.0, 24.0), now, By::Nodeset, &book());
    // n2 counts to the last pass that saw it (12h): 10h, 8h of them busy.
    check(&r, &[("a3", 10.0, 5.0, 5.0, 80.0, Some(400.0)), ("a3s", 10.0, 8.0, 2.0, 80.0, Some(300.0))]);
    assert_eq!((r.total.vm_hours, r.total.busy_vm_hours, r.total.cost), (20.0, 13.0, Some(700.0)));
    assert_eq!(r.vms, 2);
    // The period 4h..8h clips everything: n1 4..8 (busy 4..6), n2 4..8 (busy 4..8).
    let r = report(&vms, &jobs, period(4.0, 8.0), now, By::Model, &book());
    check(&r, &[("flex", 4.0, 2.0, 2.0, 32.0, Some(160.0)), ("spot", 4.0, 4.0, 0.0, 32.0, Some(120.0))]);
    // A period after every VM: nothing; one before: nothing.
    assert!(report(&vms, &jobs, period(30.0, 40.0), at(50.0), By::Nodeset, &book())
        .rows
        .iter()
        .all(|r| r.key == "a3s"));
    assert!(report(&vms, &jobs, period(-5.0, -1.0), now, By::Nodeset, &book()).rows.is_empty());
}

#[test]
fn by_job_user_and_account_shares_overlaps_and_charges_idle_to_the_job_the_vm_was_made_for() {
    let vms = [
        vm("1", "n1", "a3", "flex", Some(7), 0.0, Some(10.0)),
        vm("2", "n2", "a3s", "spot", None, 0.0, Some(4.0)),
        vm("3", "n3", "a3", "flex", Some(99), 0.0, Some(2.0)), // its job never ran here
    ];
    let jobs = [
        job(7, "n1", "ann", "phys", 1.0, Some(5.0)),
        job(8, "n1", "bob", "chem", 3.0, Some(6.0)), // 3..5 shared with 7: 1h each
        job(9, "n2", "bob", "chem", 1.0, Some(3.0)),
    ];
    let r = report(&vms, &jobs, period(0.0, 24.0), at(24.0), By::Job, &book());
    // job 7: busy 1..3 + half of 3..5 = 3h, idle of n1 (10 - 5 = 5h); job 8: 1 + 1 = 2h;
    // job 9: 2h; job 99: n3's 2h idle; no job: n2's 2h idle.
    check(
        &r,
        &[
            ("7", 8.0, 3.0, 5.0, 64.0, Some(320.0)),
            ("8", 2.0, 2.0, 0.0, 16.0, Some(80.0)),
            ("9", 2.0, 2.0, 0.0, 16.0, Some(60.0)),
            ("99", 2.0, 0.0, 2.0, 16.0, Some(80.0)),
            (NO_JOB, 2.0, 0.0, 2.0, 16.0, Some(60.0)),
        ],
    );
    let r = report(&vms, &jobs, period(0.0, 24.0), at(24.0), By::User, &book());
    check(
        &r,
        &[
            ("ann", 8.0, 3.0, 5.0, 64.0, Some(320.0)),
            ("bob", 4.0, 4.0, 0.0, 32.0, Some(140.0)),
            (JOB_NOT_SEEN, 2.0, 0.0, 2.0, 16.0, Some(80.0)),
            (NO_JOB, 2.0, 0.0, 2.0, 16.0, Some(60.0)),
        ],
    );
    let r = report(&vms, &jobs, period(0.0, 24.0), at(24.0), By::Account, &book());
    assert_eq!(
        r.rows.iter().map(|r| r.key.as_str()).collect::<Vec<_>>(),
        ["chem", "phys", JOB_NOT_SEEN, NO_JOB]
    );
    let r = report(&vms, &jobs, period(0.0, 24.0), at(24.0), By::Partition, &book());
    assert_eq!(r.rows[0].key, "gpu");
    // Every grouping has the same total.
    for by in By::ALL {
        let r = report(&vms, &jobs, period(0.0, 24.0), at(24.0), by, &book());
        assert_eq!(
            (r.total.vm_hours, r.total.busy_vm_hours, r.total.cost),
            (16.0, 7.0, Some(600.0)),
            "{by:?}"
        );
    }
}

#[test]
fn odd_milliseconds_of_a_shared_segment_are_not_lost() {
    // Three jobs share 1 ms + 1 h: the shares add up to the whole.
    let vms = [vm("1", "n1", "a3", "flex", None, 0.0, Some(2.0))];
    let jobs: Vec<_> = (1..=3).map(|i| job(i, "n1", "u", "a", 0.5, Some(1.5 + 1.0 / 3_600_000.0))).collect();
    let r = report(&vms, &jobs, period(0.0, 2.0), at(3.0), By::Job, &book());
    let busy_ms: i64 = r.rows.iter().map(|r| (r.busy_vm_hours * 3_600_000.0).round() as i64).sum();
    assert_eq!(busy_ms, 3_600_001);
    assert_eq!(r.total.vm_hours, 2.0);
}

#[test]
fn hours_without_a_price_have_no_cost_and_say_which() {
    let vms = [
        vm("1", "c1", "cpu", "standard", None, 0.0, Some(1.0)),
        vm("2", "n1", "a3", "flex", None, 0.0, Some(1.0)),
    ];
    let r = report(&vms, &[], period(0.0, 2.0), at(3.0), By::Nodeset, &book());
    assert_eq!(r.rows[0].key, "a3");
    assert_eq!(r.rows[0].cost, Some(40.0));
    assert_eq!(
        (r.rows[1].cost, r.rows[1].unpriced.clone()),
        (None, vec!["c3-standard-8/standard".to_string()])
    );
    assert_eq!(r.rows[1].gpu_hours, 0.0);
    assert_eq!(r.total.cost, None);
    assert_eq!(r.prices_used.len(), 1);
}

#[test]
fn a_job_ending_as_another_starts_is_not_an_overlap_and_jobs_outside_the_vm_do_not_count() {
    let vms = [vm("1", "n1", "a3", "flex", None, 1.0, Some(5.0))];
    let jobs = [
        job(1, "n1", "u", "a", 0.0, Some(2.0)), // starts before the VM: 1..2 counts
        job(2, "n1", "u", "a", 2.0, Some(3.0)),
        job(3, "n1", "u", "a", 6.0, Some(7.0)), // after the VM: nothing
        job(4, "n2", "u", "a", 1.0, Some(5.0)), // another node
    ];
    let r = report(&vms, &jobs, period(0.0, 10.0), at(10.0), By::Job, &book());
    check(
        &r,
        &[
            ("1", 1.0, 1.0, 0.0, 8.0, Some(40.0)),
            ("2", 1.0, 1.0, 0.0, 8.0, Some(40.0)),
            (NO_JOB, 2.0, 0.0, 2.0, 16.0, Some(80.0)),
        ],
    );
}

#[test]
fn by_parses_its_names() {
    for b in By::ALL {
        assert_eq!(By::parse(b.as_str()), Some(b));
    }
    assert_eq!(By::parse("users"), None);
}

#[test]
fn queue_time_of_the_requests_that_got_capacity_in_the_period() {
    use crate::store::RequestWait;
    let w = |waited, h| RequestWait { size: 2, run_duration: 3600, waited, succeeded_at: at(h) };
    let mut waits = BTreeMap::new();
    waits.insert("a3".to_string(), vec![w(60, 1.0), w(300, 2.0), w(9999, 30.0)]);
    waits.insert("old".to_string(), vec![w(60, -1.0)]);
    let q = queue_times(&waits, period(0.0, 24.0));
    assert_eq!(
        q,
        [QueueTime {
            nodeset: "a3".into(),
            requests: 2,
            nodes: 4,
            mean_wait: 180,
            max_wait: 300,
            total_wait: 360
        }]
    );
}
