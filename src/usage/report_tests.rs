//! Table tests of the usage report: clipping, busy/idle with overlapping jobs, where idle time goes,
//! cost and unpriced hours.

use super::*;
use crate::config::{HourPrice, MachinePrices, Pricing};
use crate::usage::pricing::CatalogState;
use std::collections::BTreeSet;

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

/// The report as it was computed before the spans were read interned (`report` over `VmSpan` and
/// `JobSpan` with a `String` per row): the reference the property below holds the report to. Rows
/// as (key, busy ms, idle ms, busy GPU ms, idle GPU ms, Σ ms × price, unpriced).
mod reference {
    use super::*;
    use std::collections::HashMap;

    pub type Row = (i64, i64, i64, i64, f64, BTreeSet<(String, String)>);

    fn of_job(by: By, j: &JobSpan) -> String {
        match by {
            By::Job => j.job_id.to_string(),
            By::User => j.user.clone(),
            By::Account => j.account.clone(),
            By::Partition => j.partition.clone(),
            By::Nodeset | By::Model => unreachable!(),
        }
    }

    fn add(row: &mut Row, busy: bool, ms: i64, vm: &VmSpan, price: Option<Price>) {
        if ms <= 0 {
            return;
        }
        let g = ms * i64::from(vm.gpus);
        if busy {
            row.0 += ms;
            row.2 += g;
        } else {
            row.1 += ms;
            row.3 += g;
        }
        match price {
            Some(p) => row.4 += ms as f64 * p.per_hour,
            None => {
                row.5.insert((vm.machine_type.clone(), vm.model.clone()));
            }
        }
    }

    pub fn report(
        vms: &[VmSpan],
        jobs: &[JobSpan],
        period: Period,
        now: DateTime<Utc>,
        by: By,
        prices: &PriceBook,
    ) -> BTreeMap<String, Row> {
        let since = period.since.timestamp_millis();
        let until = period.until.timestamp_millis();
        let open_end = until.min(now.timestamp_millis());
        let mut by_node: HashMap<&str, Vec<(i64, i64, &JobSpan)>> = HashMap::new();
        let mut job_seen: HashMap<u64, &JobSpan> = HashMap::new();
        for j in jobs {
            job_seen.entry(j.job_id).or_insert(j);
            let s = j.started_at.timestamp_millis().max(since);
            let e = j.ended_at.map_or(open_end, |t| t.timestamp_millis()).min(until);
            if e > s {
                by_node.entry(j.node.as_str()).or_default().push((s, e, j));
            }
        }
        for spans in by_node.values_mut() {
            spans.sort_by_key(|&(s, e, j)| (s, e, j.job_id));
        }
        let mut rows: BTreeMap<String, Row> = BTreeMap::new();
        for vm in vms {
            let start = vm.created_at.timestamp_millis().max(since);
            let end = vm.deleted_at.unwrap_or(vm.last_seen).timestamp_millis().min(until);
            if end <= start {
                continue;
            }
            let price = prices.price(&vm.machine_type, &vm.model);
            let node_jobs = by_node.get(vm.node.as_str()).map_or(&[][..], Vec::as_slice);
            let mut points = Vec::new();
            for (i, &(s, e, _)) in node_jobs.iter().enumerate() {
                let (s, e) = (s.max(start), e.min(end));
                if e > s {
                    points.push((s, true, i));
                    points.push((e, false, i));
                }
            }
            points.sort_by_key(|&(t, starts, i)| (t, starts, i));
            let (mut busy, mut at) = (0i64, start);
            let mut active: Vec<&JobSpan> = Vec::new();
            for &(t, starts, i) in &points {
                if t > at && !active.is_empty() {
                    let len = t - at;
                    busy += len;
                    if matches!(by, By::Job | By::User | By::Account | By::Partition) {
                        let n = active.len() as i64;
                        for (k, j) in active.iter().enumerate() {
                            let share = len / n + i64::from((k as i64) < len % n);
                            add(rows.entry(of_job(by, j)).or_default(), true, share, vm, price);
                        }
                    }
                }
                at = at.max(t);
                let j = node_jobs[i].2;
                if starts {
                    let pos = active.partition_point(|a| a.job_id <= j.job_id);
                    active.insert(pos, j);
                } else if let Some(pos) = active.iter().position(|a| std::ptr::eq(*a, j)) {
                    active.remove(pos);
                }
            }
            let idle = (end - start) - busy;
            let key = match by {
                By::Nodeset => vm.nodeset.clone(),
                By::Model => vm.model.clone(),
                By::Job => vm.job_id.map_or_else(|| NO_JOB.to_string(), |id| id.to_string()),
                By::User | By::Account | By::Partition => match vm.job_id {
                    None => NO_JOB.to_string(),
                    Some(id) => job_seen.get(&id).map_or_else(|| JOB_NOT_SEEN.to_string(), |j| of_job(by, j)),
                },
            };
            let row = rows.entry(key).or_default();
            if matches!(by, By::Nodeset | By::Model) {
                add(row, true, busy, vm, price);
            }
            add(row, false, idle, vm, price);
        }
        rows
    }
}

mod same_as_reference {
    use super::*;
    use proptest::prelude::*;

    const H: i64 = 3_600_000;

    /// Times in ms within 0..48 h after T0, on whole minutes or odd milliseconds.
    fn ms() -> impl Strategy<Value = i64> {
        prop_oneof![(0i64..48 * 60).prop_map(|m| m * 60_000), 0i64..48 * H]
    }

    fn t(ms: i64) -> DateTime<Utc> {
        at(0.0) + chrono::Duration::milliseconds(ms)
    }

    fn vms() -> impl Strategy<Value = Vec<VmSpan>> {
        let one = (0u8..4, 0usize..4, proptest::option::of(1u64..8), ms(), 1i64..30 * H, any::<bool>());
        proptest::collection::vec(one, 0..12).prop_map(|vs| {
            vs.into_iter()
                .enumerate()
                .map(|(i, (node, kind, job, from, len, open))| {
                    let (nodeset, model) =
                        [("a3", "flex"), ("a3s", "spot"), ("cpu", "standard"), ("a3r", "reservation")][kind];
                    let mut v = vm(&i.to_string(), &format!("n{node}"), nodeset, model, job, 0.0, None);
                    v.created_at = t(from);
                    v.last_seen = t(from + len);
                    v.deleted_at = (!open).then(|| t(from + len));
                    v
                })
                .collect()
        })
    }

    fn jobs() -> impl Strategy<Value = Vec<JobSpan>> {
        let one = (1u64..10, 0u8..4, 0u8..3, ms(), 0i64..10 * H, any::<bool>());
        proptest::collection::vec(one, 0..16).prop_map(|js| {
            js.into_iter()
                .map(|(id, node, user, from, len, open)| {
                    let mut j = job(
                        id,
                        &format!("n{node}"),
                        &format!("u{user}"),
                        &format!("a{}", user % 2),
                        0.0,
                        None,
                    );
                    j.started_at = t(from);
                    j.ended_at = (!open).then(|| t(from + len));
                    j
                })
                .collect()
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        /// The report's rows are the reference's, to the millisecond and (whole prices) to the cent.
        #[test]
        fn the_report_equals_the_reference(
            vms in vms(),
            jobs in jobs(),
            (a, len) in (ms(), 1i64..60 * H),
            now in ms(),
            by in proptest::sample::select(By::ALL.to_vec()),
        ) {
            let period = Period { since: t(a - 6 * H), until: t(a - 6 * H + len) };
            let got = report(&vms, &jobs, period, t(now), by, &book());
            let want = reference::report(&vms, &jobs, period, t(now), by, &book());
            let want: Vec<UsageRow> = want
                .into_iter()
                .map(|(key, (busy, idle, busy_gpu, idle_gpu, cost, unpriced))| {
                    let acc = Acc { busy_ms: busy, idle_ms: idle, busy_gpu_ms: busy_gpu, idle_gpu_ms: idle_gpu, cost_ms: cost, unpriced: UnpricedSet::default() };
                    let mut row = acc.row(key, &Unpriced::default());
                    row.cost = unpriced.is_empty().then_some(cost / MS_PER_HOUR);
                    row.unpriced = unpriced.iter().map(|(m, p)| format!("{m}/{p}")).collect();
                    row
                })
                .collect();
            // The same rows (the reference's in key order); busy + idle = total in each.
            let mut sorted = got.rows.clone();
            sorted.sort_by(|x, y| x.key.cmp(&y.key));
            prop_assert_eq!(sorted, want);
            for row in got.rows.iter().chain([&got.total]) {
                prop_assert_eq!(row.busy_vm_hours + row.idle_vm_hours, row.vm_hours);
            }
        }
    }
}

/// A row's pairs without a price: any number of them (past the 64 a bit each), each once, printed
/// in (machine type, model) order, which is not the order of their `machine_type/model` text.
#[test]
fn a_rows_unpriced_pairs_are_each_printed_once_in_machine_type_then_model_order() {
    let mut set = UnpricedSet::default();
    for id in [70, 3, 70, 65, 3, 0] {
        set.insert(id);
    }
    let mut other = UnpricedSet::default();
    other.insert(65);
    other.insert(66);
    set.merge(&other);
    assert_eq!(set.ids().collect::<Vec<_>>(), [0, 3, 70, 65, 66]);
    assert!(UnpricedSet::default().is_empty() && !set.is_empty());

    let spans = UsageSpans { names: vec!["a-b".into(), "a".into(), "x".into()], ..UsageSpans::default() };
    // ("a-b", "x") met first; ("a", "x") sorts before it though "a-b/x" < "a/x" as text.
    let unpriced = Unpriced::new(&[(0, 2), (1, 2)], &spans);
    let mut both = UnpricedSet::default();
    both.insert(0);
    both.insert(1);
    assert_eq!(unpriced.of(&both), ["a/x", "a-b/x"]);
}
