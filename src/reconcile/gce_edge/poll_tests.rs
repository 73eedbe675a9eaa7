//! The poll schedule: who is asked, who is carried, and what brings a queued request back early.

use super::*;
use crate::model::*;
use chrono::TimeZone;

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 23, 12, 0, 0).unwrap()
}

fn secs(s: i64) -> Duration {
    Duration::seconds(s)
}

fn request(id: i64, created_at: DateTime<Utc>) -> Request {
    Request {
        id,
        nodeset: "a".into(),
        job_id: Some(id as u32),
        tag: format!("{id:08x}"),
        mig: format!("hpc-a-{id:08x}"),
        name: format!("rr-{id:08x}"),
        nodes: vec![format!("hpc-a-{id}")],
        run_duration: 600,
        phase: RequestPhase::Active,
        gce_state: None,
        created_at,
        updated_at: created_at,
        last_error: None,
        zone_choice: None,
        zone: None,
    }
}

fn mig(r: &Request, target_size: u32) -> ObservedMig {
    ObservedMig {
        workload_policy: None,
        name: r.mig.clone(),
        nodeset: "a".into(),
        tag: r.tag.clone(),
        job_id: r.job_id,
        target_size,
        created: None,
    }
}

/// `n` requests created at `created`, their MIGs listed with target size 1.
fn world(n: i64, created: DateTime<Utc>) -> (Desired, BTreeMap<String, ObservedMig>, Vec<(String, String)>) {
    let mut d = Desired::default();
    let mut migs = BTreeMap::new();
    let mut wanted = Vec::new();
    for id in 1..=n {
        let r = request(id, created);
        migs.insert(r.mig.clone(), mig(&r, 1));
        wanted.push((r.mig.clone(), r.name.clone()));
        d.requests.insert(id, r);
    }
    (d, migs, wanted)
}

fn accepted() -> PolledRequest {
    PolledRequest::Found(ObservedRequest::in_state(GceRequestState::Accepted))
}

/// Runs one pass of the schedule at `now`, answering every poll with `answer`.
fn pass(
    s: &mut PollSchedule,
    w: &(Desired, BTreeMap<String, ObservedMig>, Vec<(String, String)>),
    vms: &BTreeMap<String, ObservedVm>,
    now: DateTime<Utc>,
    answer: &PolledRequest,
) -> PollPlan {
    let plan = s.choose(&w.2, &w.0, Some(&w.1), Some(vms), now);
    for (m, n) in &plan.poll {
        s.record(m, n, Some(answer), w.1.get(m).map(|m| m.target_size), now);
    }
    plan
}

#[test]
fn intervals_grow_with_age_and_are_capped() {
    let c = t0();
    let table = [(0, 0), (60, 0), (119, 0), (120, 60), (300, 150), (1200, 600), (86_400, 600)];
    for (age, want) in table {
        assert_eq!(interval(c, c + secs(age)), secs(want), "age {age}");
    }
}

#[test]
fn fresh_requests_are_polled_every_pass() {
    let w = world(3, t0());
    let mut s = PollSchedule::default();
    let none = BTreeMap::new();
    for p in 0..10 {
        let plan = pass(&mut s, &w, &none, t0() + secs(10 * p), &accepted());
        assert_eq!(plan.poll.len(), 3, "pass {p}");
        assert!(plan.carried.is_empty());
    }
}

#[test]
fn queued_requests_are_carried_between_polls_and_the_pass_knows_it() {
    let created = t0() - secs(1200); // queued 20 minutes: every 10 minutes
    let w = world(50, created);
    let mut s = PollSchedule::default();
    let none = BTreeMap::new();
    // A new process asks about everything once.
    assert_eq!(pass(&mut s, &w, &none, t0(), &accepted()).poll.len(), 50);
    // Then carries each, with the state it was seen in, until it is due: the second polls spread over
    // the first interval, the third come a whole interval after the second.
    let mut polled: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for p in 1..=60 {
        let at = 30 * p;
        let plan = pass(&mut s, &w, &none, t0() + secs(at), &accepted());
        assert_eq!(plan.poll.len() + plan.carried.len(), 50, "every request is polled or carried");
        assert!(plan.carried.values().all(|r| *r == accepted()));
        for (m, _) in plan.poll {
            polled.entry(m).or_default().push(at);
        }
    }
    assert_eq!(polled.len(), 50, "every request is polled again within its interval");
    let seconds: BTreeSet<i64> = polled.values().map(|v| v[0]).collect();
    assert!(seconds.len() >= 10, "the second polls spread over the interval: {seconds:?}");
    for (m, at) in &polled {
        assert!(at[0] <= 630, "{m}: second poll at {} s", at[0]);
        for pair in at.windows(2) {
            assert!(pair[1] - pair[0] >= 600, "{m}: polled at {at:?}");
        }
    }
}

#[test]
fn a_request_not_accepted_is_polled_every_pass_whatever_its_age() {
    let w = world(1, t0() - secs(3600));
    let mut s = PollSchedule::default();
    let creating = PolledRequest::Found(ObservedRequest::in_state(GceRequestState::Creating));
    let none = BTreeMap::new();
    for p in 0..5 {
        assert_eq!(pass(&mut s, &w, &none, t0() + secs(5 * p), &creating).poll.len(), 1);
    }
}

#[test]
fn the_lists_bring_a_queued_request_back_at_once() {
    let created = t0() - secs(3600);
    let mut w = world(3, created);
    let mut s = PollSchedule::default();
    let none = BTreeMap::new();
    pass(&mut s, &w, &none, t0(), &accepted());
    let later = t0() + secs(30);
    assert!(pass(&mut s, &w, &none, later, &accepted()).poll.is_empty());
    let migs: Vec<String> = w.1.keys().cloned().collect();
    // A VM of the first MIG appears; the second's target size moves; the third's MIG is gone.
    let vm = ObservedVm {
        topology: None,
        maintenance: None,
        name: "hpc-a-1".into(),
        zone: "us-central1-a".into(),
        status: VmStatus::Running,
        mig: Some(migs[0].clone()),
        created: None,
        id: None,
        termination: None,
        network_ip: None,
        reservation_bound: false,
    };
    let vms = BTreeMap::from([(vm.name.clone(), vm)]);
    w.1.get_mut(&migs[1]).unwrap().target_size = 0;
    w.1.remove(&migs[2]);
    let plan = s.choose(&w.2, &w.0, Some(&w.1), Some(&vms), later + secs(30));
    let polled: Vec<&String> = plan.poll.iter().map(|(m, _)| m).collect();
    assert_eq!(polled, migs.iter().collect::<Vec<_>>());
    // A GCE step about a MIG: its request is asked again next pass.
    let mut s2 = PollSchedule::default();
    let w2 = world(2, created);
    pass(&mut s2, &w2, &none, t0(), &accepted());
    let first = w2.2[0].0.clone();
    s2.forget(&first);
    let plan = pass(&mut s2, &w2, &none, t0() + secs(30), &accepted());
    assert_eq!(plan.poll.iter().map(|(m, _)| m).collect::<Vec<_>>(), vec![&first]);
}

/// 2,000 requests queued for over 10 minutes: the slow polls stay within the per-minute budget, every
/// request is polled now and then (most overdue first), and the others are carried.
#[test]
fn two_thousand_queued_requests_share_the_slow_poll_budget() {
    let created = t0() - secs(660);
    let w = world(2000, created);
    let mut s = PollSchedule::default();
    let none = BTreeMap::new();
    let first = pass(&mut s, &w, &none, t0(), &accepted());
    assert_eq!(first.poll.len(), 2000, "a new process asks about everything once");
    let mut last_polled: BTreeMap<String, DateTime<Utc>> = BTreeMap::new();
    let mut polls = 0;
    let minutes = 60;
    for p in 1..=(minutes * 2) {
        let now = t0() + secs(30 * p);
        let plan = pass(&mut s, &w, &none, now, &accepted());
        assert_eq!(plan.poll.len() + plan.carried.len(), 2000, "every request is polled or carried");
        if p > minutes {
            polls += plan.poll.len(); // the second half hour, once the first polls' intervals have run
        }
        for (m, _) in plan.poll {
            last_polled.insert(m, now);
        }
    }
    let per_minute = polls as f64 / (minutes / 2) as f64;
    assert!(per_minute <= SLOW_POLLS_PER_MINUTE + 1.0, "{per_minute} slow polls a minute");
    assert!(per_minute >= SLOW_POLLS_PER_MINUTE * 0.9, "the budget is used: {per_minute}");
    assert_eq!(last_polled.len(), 2000, "every request was polled again within the hour");
}
