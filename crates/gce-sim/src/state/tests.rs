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

/// Ticks at `t0 + at` for each `at` (ms), returning every effect.
fn run(s: &mut State, at: &[i64]) -> Vec<Effect> {
    at.iter().flat_map(|a| s.tick(t0() + ms(*a))).collect()
}

fn statuses(s: &State) -> Vec<&'static str> {
    s.instances.values().map(|vm| vm.status_name()).collect()
}

#[test]
fn request_without_rules_succeeds_all_together_then_expires() {
    let mut s = State::new(100.0);
    let key = setup(&mut s);
    s.insert_resize_request(&key, &rr(&["n-0", "n-1"], "3600"), t0()).unwrap();
    assert_eq!(s.migs[&key].target_size, 2);
    // CREATING → ACCEPTED with capacity at once: both VMs exist together, PROVISIONING.
    assert!(run(&mut s, &[OP_LATENCY_MS]).is_empty());
    assert_eq!(s.migs[&key].requests["rr"].state, RrState::Accepted);
    assert_eq!(statuses(&s), ["PROVISIONING", "PROVISIONING"]);
    assert!(s.instances.keys().all(|k| k.1 == "r1-b"));
    let t1 = OP_LATENCY_MS + PROVISIONING_MS;
    assert!(run(&mut s, &[t1]).is_empty());
    assert_eq!(statuses(&s), ["STAGING", "STAGING"]);
    // RUNNING: the boot commands run and the request is SUCCEEDED.
    let fx = run(&mut s, &[t1 + STAGING_MS]);
    assert_eq!(fx, vec![Effect::Boot("n-0".into()), Effect::Boot("n-1".into())]);
    assert_eq!(statuses(&s), ["RUNNING", "RUNNING"]);
    assert_eq!(s.migs[&key].requests["rr"].state, RrState::Succeeded);
    // 3600 s at time scale 100 is 36 real seconds from creation.
    let fx = run(&mut s, &[OP_LATENCY_MS + 36_000]);
    assert_eq!(fx.len(), 2);
    assert_eq!(s.migs[&key].target_size, 0);
    assert!(s.migs[&key].vms.is_empty());
}

#[test]
fn host_failure_terminates_and_a_do_nothing_mig_leaves_it() {
    let mut s = State::new(1.0);
    let key = setup(&mut s);
    s.migs.get_mut(&key).unwrap().body["instanceLifecyclePolicy"] =
        json!({"defaultActionOnFailure": "DO_NOTHING"});
    s.insert_resize_request(&key, &rr(&["n-0"], "3600"), t0()).unwrap();
    run(&mut s, &[100, 150, 200]);
    assert_eq!(statuses(&s), ["RUNNING"]);
    assert_eq!(s.fail("n-0", t0() + ms(300)).unwrap(), vec![Effect::Stop("n-0".into())]);
    assert!(run(&mut s, &[400, 10_000]).is_empty());
    assert_eq!(statuses(&s), ["TERMINATED"]);
    assert_eq!(s.migs[&key].target_size, 1);
    assert!(s.fail("nope", t0()).is_none());
    // Deleting it works; no second stop command.
    s.delete_instances(&key, &json!({"instances": ["zones/r1-b/instances/n-0"]}), t0() + ms(10_100)).unwrap();
    assert!(run(&mut s, &[10_100 + DELETE_MS]).is_empty());
    assert!(s.instances.is_empty());
    assert_eq!(s.migs[&key].target_size, 0);
}

#[test]
fn a_repairing_mig_recreates_a_failed_vm() {
    let mut s = State::new(1.0);
    let key = setup(&mut s);
    s.insert_resize_request(&key, &rr(&["n-0"], "3600"), t0()).unwrap();
    run(&mut s, &[100, 150, 200]);
    let id = s.instances.values().next().unwrap().id;
    s.fail("n-0", t0() + ms(300)).unwrap();
    assert_eq!(statuses(&s), ["TERMINATED"]);
    let fx = run(
        &mut s,
        &[300 + DELETE_MS, 300 + DELETE_MS + PROVISIONING_MS, 300 + DELETE_MS + PROVISIONING_MS + STAGING_MS],
    );
    assert_eq!(fx, vec![Effect::Boot("n-0".into())]);
    assert_eq!(statuses(&s), ["RUNNING"]);
    assert_ne!(s.instances.values().next().unwrap().id, id, "a new VM of the same name");
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
    assert!(s.migs[&key].queued.is_empty());
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
    assert!(s.migs[&key].requests["rr"].provisioning);
    let op = s.delete_mig(&key, t1 + ms(2)).unwrap();
    assert!(s.tick(t1 + ms(3)).is_empty());
    assert!(!s.operations[&op].is_done(t1 + ms(3)), "waits while provisioning");
    let t2 = t1 + ms(PROVISIONING_MS + STAGING_MS);
    // The VMs come up, then are deleted with the MIG, in the same step.
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
    assert_eq!(statuses(&s), ["RUNNING"]);
}

#[test]
fn delete_instances_validates_members_unless_told_to_skip() {
    let mut s = State::new(1.0);
    let key = setup(&mut s);
    s.insert_resize_request(&key, &rr(&["n-0", "n-1"], "600"), t0()).unwrap();
    let t1 = OP_LATENCY_MS + PROVISIONING_MS + STAGING_MS;
    run(&mut s, &[OP_LATENCY_MS, OP_LATENCY_MS + PROVISIONING_MS, t1]);
    assert_eq!(statuses(&s), ["RUNNING", "RUNNING"]);
    let now = t0() + ms(t1 + 1);
    let failed =
        |s: &State, op: &str| s.operations[op].error.as_ref().map(|e| e["errors"][0]["code"].clone());
    let by_url = json!({"instances": ["zones/r1-b/instances/n-0"]});
    let op = s.delete_instances(&key, &by_url, now).unwrap();
    assert_eq!(failed(&s, &op), None);
    assert_eq!(s.migs[&key].target_size, 1);
    // n-0 is already being deleted: the operation fails, unless skipped (and then not counted twice).
    let op = s.delete_instances(&key, &by_url, now).unwrap();
    assert_eq!(failed(&s, &op), Some(json!("CONDITION_NOT_MET")));
    let skip = json!({"instances": ["zones/r1-b/instances/n-0"], "skipInstancesOnValidationError": true});
    let op = s.delete_instances(&key, &skip, now).unwrap();
    assert_eq!(failed(&s, &op), None);
    assert_eq!(s.migs[&key].target_size, 1);
    // A zone that is not the group's, or a bare name: always fails, skip or not.
    for bad in [json!("zones/r1-c/instances/n-1"), json!("n-1")] {
        let body = json!({"instances": [bad], "skipInstancesOnValidationError": true});
        let op = s.delete_instances(&key, &body, now).unwrap();
        assert_eq!(failed(&s, &op), Some(json!("INVALID_FIELD_VALUE")), "{body}");
    }
    assert_eq!(s.migs[&key].target_size, 1);
    let fx = s.tick(now + ms(DELETE_MS));
    assert_eq!(fx, vec![Effect::Stop("n-0".into())]);
    assert_eq!(s.migs[&key].target_size, 1, "deletion does not lower targetSize a second time");
}

/// `reportHostAsFaulty`: refused for a flex VM in GCE's words; a RUNNING reservation-bound VM goes
/// REPAIRING (what ran on it stops), then STAGING and RUNNING (it boots again), and its Operation is
/// DONE then; a second report while one runs is refused.
#[test]
fn a_faulty_host_report_moves_a_reservation_bound_vm_and_refuses_others() {
    let mut s = State::new(1.0);
    let key = setup(&mut s);
    s.insert_resize_request(&key, &rr(&["n-0"], "3600"), t0()).unwrap();
    run(&mut s, &[100, 150, 200]);
    assert_eq!(statuses(&s), ["RUNNING"]);
    let body = json!({"disruptionSchedule": "IMMEDIATE",
                      "faultReasons": [{"behavior": "UNRECOVERABLE_GPU_ERROR", "description": "xid 79"}]});
    let at = t0() + ms(300);
    let e = s.report_host_as_faulty("p", "r1-b", "n-0", &body, at).unwrap_err();
    assert_eq!((e.code, e.reason.as_str()), (400, faulty_host::NOT_RESERVATION_BOUND));
    assert!(e.messages[0].contains("FLEX_START"), "{e:?}");

    let vm = s.instances.values_mut().next().unwrap();
    vm.scheduling["provisioningModel"] = json!("RESERVATION_BOUND");
    let wrong = json!({"disruptionSchedule": "FUTURE", "faultReasons": [{"behavior": "PERFORMANCE"}]});
    assert_eq!(s.report_host_as_faulty("p", "r1-b", "n-0", &wrong, at).unwrap_err().code, 400);
    let op = s.report_host_as_faulty("p", "r1-b", "n-0", &body, at).unwrap();
    assert_eq!(statuses(&s), ["REPAIRING"]);
    assert!(!s.operations[&op].is_done(at));
    let again = s.report_host_as_faulty("p", "r1-b", "n-0", &body, at).unwrap_err();
    assert_eq!(again.reason, "FAILED_WITH_UNEXPECTED_STATUS", "{again:?}");
    assert_eq!(run(&mut s, &[301]), vec![Effect::Stop("n-0".into())]);
    assert!(run(&mut s, &[300 + HOST_REPAIR_MS]).is_empty());
    assert_eq!(statuses(&s), ["STAGING"]);
    let back = 300 + HOST_REPAIR_MS + STAGING_MS;
    assert_eq!(run(&mut s, &[back]), vec![Effect::Boot("n-0".into())]);
    assert_eq!(statuses(&s), ["RUNNING"]);
    assert!(s.operations[&op].is_done(t0() + ms(back)));
    assert!(s.operations[&op].error.is_none());
}
