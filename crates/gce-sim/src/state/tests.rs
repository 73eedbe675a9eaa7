//! Unit tests of the state machine, driven by explicit `now` values (no clock, no HTTP).

use super::*;

fn t0() -> DateTime<Utc> {
    "2026-11-23T10:00:00Z".parse().unwrap()
}

fn setup(state: &mut State) -> MigKey {
    let mig = json!({"name": "hpc-a3u-x", "targetSize": 0,
            "versions": [{"instanceTemplate": "projects/p/regions/r1/instanceTemplates/t"}],
            "distributionPolicy": {"zones": [{"zone": "zones/r1-b"}], "targetShape": "ANY_SINGLE_ZONE"},
            "updatePolicy": {"instanceRedistributionType": "NONE"}});
    state.insert_mig("p", Scope::Region("r1".into()), &mig, t0()).unwrap();
    MigKey { project: "p".into(), scope: Scope::Region("r1".into()), name: "hpc-a3u-x".into() }
}

fn rr(names: &[&str], seconds: &str) -> Value {
    json!({"name": "rr", "instances": names.iter().map(|n| json!({"name": n})).collect::<Vec<_>>(),
               "requestedRunDuration": {"seconds": seconds}})
}

#[test]
fn request_without_rules_succeeds_all_together_then_expires() {
    let mut s = State::new(100.0);
    let key = setup(&mut s);
    s.insert_resize_request(&key, &rr(&["n-0", "n-1"], "3600"), t0()).unwrap();
    assert_eq!(s.migs[&key].target_size, 2);
    let t1 = t0() + ms(OP_LATENCY_MS);
    assert!(s.tick(t1).is_empty());
    assert_eq!(s.migs[&key].requests["rr"].state, RrState::Accepted);
    let t2 = t1 + ms(PROVISION_MS);
    let fx = s.tick(t2);
    assert_eq!(fx, vec![Effect::Boot("n-0".into()), Effect::Boot("n-1".into())]);
    assert_eq!(s.instances.len(), 2);
    assert!(s.instances.keys().all(|k| k.1 == "r1-b"));
    // 3600 s at time scale 100 is 36 real seconds.
    let fx = s.tick(t2 + ms(36_000));
    assert_eq!(fx.len(), 2);
    assert_eq!(s.migs[&key].target_size, 0);
}

#[test]
fn failing_rule_rolls_back() {
    let mut s = State::new(1.0);
    let key = setup(&mut s);
    s.capacity.push(CapacityRule {
        prefix: "hpc-".into(),
        delay_seconds: 1.0,
        fail: Some(CapacityFailure {
            code: "ZONE_RESOURCE_POOL_EXHAUSTED".into(),
            message: String::new(),
            error_details: None,
        }),
        hold: false,
    });
    s.insert_resize_request(&key, &rr(&["n-0"], "600"), t0()).unwrap();
    s.tick(t0() + ms(OP_LATENCY_MS));
    s.tick(t0() + ms(500));
    assert!(s.migs[&key].requests["rr"].last_attempt.is_some());
    s.tick(t0() + ms(1200));
    let r = &s.migs[&key].requests["rr"];
    assert_eq!(r.state, RrState::Failed);
    assert!(r.last_attempt.is_none());
    assert_eq!(s.migs[&key].target_size, 0);
    assert!(s.instances.is_empty());
}

#[test]
fn mig_delete_waits_for_a_provisioning_request_then_cascades() {
    let mut s = State::new(1.0);
    let key = setup(&mut s);
    s.insert_resize_request(&key, &rr(&["n-0"], "3600"), t0()).unwrap();
    let t1 = t0() + ms(OP_LATENCY_MS);
    s.tick(t1);
    s.tick(t1 + ms(1));
    assert!(s.migs[&key].requests["rr"].provisioning_until.is_some());
    let op = s.delete_mig(&key, t1 + ms(2)).unwrap();
    assert!(s.tick(t1 + ms(3)).is_empty());
    assert!(!s.operations[&op].is_done(t1 + ms(3)), "waits while provisioning");
    let t2 = t1 + ms(1 + PROVISION_MS);
    // The VMs are made, then deleted with the MIG, in the same step.
    let fx = s.tick(t2);
    assert_eq!(fx, vec![Effect::Boot("n-0".into()), Effect::Stop("n-0".into())]);
    assert!(s.operations[&op].is_done(t2));
    assert!(s.migs.is_empty() && s.instances.is_empty());
}

#[test]
fn mig_delete_of_queued_requests_is_immediate() {
    let mut s = State::new(1.0);
    let key = setup(&mut s);
    s.capacity.push(CapacityRule { prefix: String::new(), delay_seconds: 0.0, fail: None, hold: true });
    s.insert_resize_request(&key, &rr(&["n-0"], "3600"), t0()).unwrap();
    s.tick(t0() + ms(OP_LATENCY_MS));
    let op = s.delete_mig(&key, t0() + ms(200)).unwrap();
    assert!(s.tick(t0() + ms(250)).is_empty());
    assert!(s.operations[&op].is_done(t0() + ms(250)));
    assert!(s.migs.is_empty());
}

#[test]
fn run_duration_bounds() {
    let mut s = State::new(1.0);
    let key = setup(&mut s);
    assert!(s.insert_resize_request(&key, &rr(&["n-0"], "599"), t0()).is_err());
    assert!(s.insert_resize_request(&key, &rr(&["n-0"], "604801"), t0()).is_err());
    assert!(s.insert_resize_request(&key, &rr(&["n-0"], "604800"), t0()).is_ok());
}

#[test]
fn names_must_be_rfc1035() {
    assert!(is_rfc1035("hpc-a3u-0"));
    assert!(!is_rfc1035("Hpc"));
    assert!(!is_rfc1035("0hpc"));
    assert!(!is_rfc1035("hpc-"));
    assert!(!is_rfc1035(&"a".repeat(64)));
}

#[test]
fn absurd_delays_saturate_instead_of_panicking() {
    assert_eq!(later(t0(), i64::MAX), DateTime::<Utc>::MAX_UTC);
    let mut s = State::new(1e-12);
    let key = setup(&mut s);
    s.capacity.push(CapacityRule { prefix: String::new(), delay_seconds: 1e300, fail: None, hold: false });
    s.insert_resize_request(&key, &rr(&["n-0"], "600"), t0()).unwrap();
    s.tick(t0() + ms(OP_LATENCY_MS));
    s.tick(t0() + ms(1000));
    assert_eq!(s.migs[&key].requests["rr"].state, RrState::Accepted);
    s.capacity.clear();
    s.tick(t0() + ms(2000));
    s.tick(t0() + ms(3000));
    assert_eq!(s.instances.len(), 1, "created, with a termination time at the end of time");
}

#[test]
fn delete_instances_validates_members_unless_told_to_skip() {
    let mut s = State::new(1.0);
    let key = setup(&mut s);
    s.insert_resize_request(&key, &rr(&["n-0", "n-1"], "600"), t0()).unwrap();
    let t1 = t0() + ms(OP_LATENCY_MS);
    s.tick(t1);
    s.tick(t1 + ms(PROVISION_MS));
    assert_eq!(s.instances.len(), 2);
    let now = t1 + ms(PROVISION_MS + 1);
    let by_url = json!({"instances": ["zones/r1-b/instances/n-0"]});
    s.delete_instances(&key, &by_url, now).unwrap();
    assert_eq!(s.migs[&key].target_size, 1);
    // n-0 is already being deleted: refused, unless skipped (and then not counted twice).
    assert!(s.delete_instances(&key, &by_url, now).is_err());
    let skip = json!({"instances": ["zones/r1-b/instances/n-0"], "skipInstancesOnValidationError": true});
    s.delete_instances(&key, &skip, now).unwrap();
    assert_eq!(s.migs[&key].target_size, 1);
    // A VM of another zone is never ours.
    let other_zone = json!({"instances": ["zones/r1-c/instances/n-1"]});
    assert!(s.delete_instances(&key, &other_zone, now).is_err());
    let fx = s.tick(now + ms(DELETE_MS));
    assert_eq!(fx, vec![Effect::Stop("n-0".into())]);
    assert_eq!(s.migs[&key].target_size, 1, "deletion does not lower targetSize a second time");
}
