//! Judging GCE's answers into Done / Retry / Refused / Moot, and what each judged step records —
//! without GCE: the answers are typed errors built as the client builds them.

use super::*;
use crate::gce::{ApiError, ErrorClass, GceError, OperationFailed};
use crate::reconcile::gce_edge::SendError;
use crate::reconcile::slurm_edge::reservations::learn as learn_slurm;
use chrono::TimeZone;
use serde_json::json;

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 23, 12, 0, 0).unwrap()
}

/// An HTTP error answer as GCE sends it.
fn http(status: u16, code: &str, reason: &str, message: &str) -> SendError {
    let body = json!({"error": {"code": status, "message": message, "status": code,
        "errors": [{"reason": reason, "domain": "global", "message": message}]}});
    SendError::Gce(GceError::Api(Box::new(ApiError::from_response(
        "regionInstanceGroupManagers.insert",
        "POST",
        "/projects/p/regions/r/instanceGroupManagers",
        status,
        body.to_string().as_bytes(),
        None,
    ))))
}

/// An Operation that finished with an error.
fn operation(code: &str, message: &str) -> SendError {
    let operation = serde_json::from_value(json!({
        "name": "operation-1", "status": "DONE", "operationType": "compute.instanceGroupManagers.insert",
        "error": {"errors": [{"code": code, "message": message}]},
    }))
    .unwrap();
    SendError::Gce(GceError::Operation(Box::new(OperationFailed { operation })))
}

fn timeout() -> SendError {
    SendError::Gce(GceError::Transport {
        method: "regionInstanceGroupManagers.insert".into(),
        path: "/p".into(),
        message: "after 30s".into(),
        timeout: true,
    })
}

/// An Operation still RUNNING when the step's deadline passed.
fn op_timeout() -> SendError {
    let operation = serde_json::from_value(json!({"name": "operation-2", "status": "RUNNING"})).unwrap();
    SendError::Gce(GceError::OperationTimeout(Box::new(operation)))
}

fn insert_mig() -> GceStep {
    GceStep::InsertMig { request: 1, mig: "hpc-a-j7-0a1b2c3d".into(), nodeset: "a".into() }
}
fn insert_rr() -> GceStep {
    GceStep::InsertResizeRequest { request: 1, mig: "hpc-a-j7-0a1b2c3d".into() }
}
fn create_vms() -> GceStep {
    GceStep::CreateInstances { request: 1, mig: "hpc-s-j7-0a1b2c3d".into() }
}
fn cancel() -> GceStep {
    GceStep::CancelResizeRequest { request: 1, mig: "hpc-a-j7-0a1b2c3d".into() }
}
fn delete_mig() -> GceStep {
    GceStep::DeleteMig { mig: "hpc-a-j7-0a1b2c3d".into(), reason: "empty".into() }
}
fn delete_vms() -> GceStep {
    GceStep::DeleteInstances {
        mig: "hpc-a-j7-0a1b2c3d".into(),
        instances: vec![VmRef { name: "hpc-a-1".into(), zone: "us-central1-a".into() }],
    }
}

#[derive(Debug, PartialEq)]
enum Want {
    Done,
    Retry,
    Moot,
    Carried,
    Refused(Option<String>, ErrorClass),
    Failed(Option<String>),
}

fn kind(r: &StepResult) -> Want {
    match r {
        StepResult::Done => Want::Done,
        StepResult::Retry(_) => Want::Retry,
        StepResult::Moot(_) => Want::Moot,
        StepResult::Carried(_) => Want::Carried,
        StepResult::Refused { code, class, .. } => Want::Refused(code.clone(), *class),
        StepResult::Failed { code, .. } => Want::Failed(code.clone()),
    }
}

#[test]
fn answers_are_judged_per_step() {
    let stockout = || http(503, "UNAVAILABLE", "ZONE_RESOURCE_POOL_EXHAUSTED", "no a3u in us-central1-a");
    let cases: Vec<(&str, GceStep, SendError, Want)> = vec![
        (
            "a 409 on create that send could not compare: tried again",
            insert_mig(),
            http(409, "ALREADY_EXISTS", "alreadyExists", "exists"),
            Want::Retry,
        ),
        (
            "same for a resize request",
            insert_rr(),
            http(409, "ALREADY_EXISTS", "alreadyExists", "exists"),
            Want::Retry,
        ),
        (
            "what exists under our name is not what we meant: refused, visibly",
            insert_rr(),
            SendError::Mismatch("resize request rr-x already exists and is not ...".into()),
            Want::Refused(Some("ALREADY_EXISTS_MISMATCH".into()), ErrorClass::AlreadyExists),
        ),
        (
            "a delete of what is gone is done",
            delete_mig(),
            http(404, "NOT_FOUND", "notFound", "gone"),
            Want::Done,
        ),
        ("same for VMs", delete_vms(), http(404, "NOT_FOUND", "notFound", "gone"), Want::Done),
        ("cancel of a final request", cancel(), operation("CONDITION_NOT_MET", "final"), Want::Moot),
        ("cancel of a request gone", cancel(), http(404, "NOT_FOUND", "notFound", "gone"), Want::Moot),
        (
            "a stockout refuses with its code",
            insert_rr(),
            stockout(),
            Want::Refused(Some("ZONE_RESOURCE_POOL_EXHAUSTED".into()), ErrorClass::Capacity),
        ),
        (
            "a stockout in the Operation too",
            insert_rr(),
            operation("ZONE_RESOURCE_POOL_EXHAUSTED", "no a3u"),
            Want::Refused(Some("ZONE_RESOURCE_POOL_EXHAUSTED".into()), ErrorClass::Capacity),
        ),
        (
            "a quota",
            insert_mig(),
            operation("QUOTA_EXCEEDED", "GPUS_ALL_REGIONS"),
            Want::Refused(Some("QUOTA_EXCEEDED".into()), ErrorClass::Quota),
        ),
        (
            "a bad insert is refused",
            insert_mig(),
            http(400, "INVALID_ARGUMENT", "invalid", "bad template"),
            Want::Refused(Some("invalid".into()), ErrorClass::Invalid),
        ),
        (
            "an insert into a MIG that is gone",
            insert_rr(),
            http(404, "NOT_FOUND", "notFound", "no MIG"),
            Want::Refused(Some("notFound".into()), ErrorClass::NotFound),
        ),
        (
            "createInstances: a stockout refuses with its code (the group fails, capacity backoff)",
            create_vms(),
            stockout(),
            Want::Refused(Some("ZONE_RESOURCE_POOL_EXHAUSTED".into()), ErrorClass::Capacity),
        ),
        (
            "createInstances: a quota in the Operation too",
            create_vms(),
            operation("QUOTA_EXCEEDED", "CPUS"),
            Want::Refused(Some("QUOTA_EXCEEDED".into()), ErrorClass::Quota),
        ),
        (
            "createInstances: a bad body is refused",
            create_vms(),
            http(400, "INVALID_ARGUMENT", "invalid", "FLEX_START"),
            Want::Refused(Some("invalid".into()), ErrorClass::Invalid),
        ),
        (
            "createInstances: names that exist already: the next managed-instance list says which",
            create_vms(),
            operation("RESOURCE_ALREADY_EXISTS", "exists"),
            Want::Moot,
        ),
        (
            "createInstances: no answer: the same requestId again",
            create_vms(),
            http(503, "UNAVAILABLE", "backendError", "try again"),
            Want::Retry,
        ),
        (
            "a bad delete is tried again, with a new requestId",
            delete_mig(),
            http(400, "INVALID_ARGUMENT", "invalid", "x"),
            Want::Failed(Some("invalid".into())),
        ),
        (
            "a delete refused during a transformation: a new requestId after a backoff",
            delete_mig(),
            http(400, "FAILED_PRECONDITION", "resourceNotReady", "busy"),
            Want::Failed(Some("resourceNotReady".into())),
        ),
        (
            "an Operation DONE with an error: the same requestId would replay it",
            delete_vms(),
            operation("RESOURCE_IN_USE_BY_ANOTHER_RESOURCE", "in use"),
            Want::Failed(Some("RESOURCE_IN_USE_BY_ANOTHER_RESOURCE".into())),
        ),
        (
            "a 403 rate limit is not acted on: carried with the same requestId",
            delete_mig(),
            http(403, "PERMISSION_DENIED", "rateLimitExceeded", "Rate Limit Exceeded"),
            Want::Carried,
        ),
        (
            "an Operation still running at the deadline: carried with the same requestId",
            cancel(),
            op_timeout(),
            Want::Carried,
        ),
        (
            "a rate limit slows down, it does not fail the step",
            insert_mig(),
            http(429, "RESOURCE_EXHAUSTED", "rateLimitExceeded", "slow down"),
            Want::Carried,
        ),
        (
            "same for a 403 rateLimitExceeded",
            delete_vms(),
            http(
                403,
                "PERMISSION_DENIED",
                "rateLimitExceeded",
                "Quota exceeded for quota metric 'Write requests'",
            ),
            Want::Carried,
        ),
        (
            "an operation still running is carried to the next pass",
            insert_mig(),
            SendError::Gce(GceError::OperationTimeout(Box::new(crate::gce::Operation {
                name: "operation-1".into(),
                ..Default::default()
            }))),
            Want::Carried,
        ),
        ("a 500", delete_vms(), http(500, "INTERNAL", "backendError", "oops"), Want::Retry),
        ("no answer", insert_rr(), timeout(), Want::Retry),
        (
            "the group is gone",
            insert_mig(),
            SendError::RequestVanished,
            Want::Refused(None, ErrorClass::Invalid),
        ),
        (
            "the nodeset is gone",
            insert_mig(),
            SendError::Config(ReconcileError::NodesetGone("a".into())),
            Want::Refused(Some("CONFIG".into()), ErrorClass::Invalid),
        ),
    ];
    for (what, step, answer, want) in cases {
        assert_eq!(kind(&judge(&step, &answer)), want, "{what}");
    }
    let r = judge(&insert_mig(), &SendError::Config(ReconcileError::NodesetGone("a".into())));
    assert_eq!(r.error().as_deref(), Some("CONFIG: nodeset a is no longer configured"));
    let r = judge(&insert_mig(), &SendError::RequestVanished);
    assert_eq!(r.error().as_deref(), Some("request vanished"));
    let r = judge(&insert_rr(), &stockout());
    assert!(r.is_capacity() && !r.ok());
    assert!(r.error().unwrap().starts_with("ZONE_RESOURCE_POOL_EXHAUSTED: "), "{r:?}");
}

fn group() -> Request {
    Request {
        id: 1,
        nodeset: "a".into(),
        job_id: Some(7),
        tag: "0a1b2c3d".into(),
        mig: "hpc-a-j7-0a1b2c3d".into(),
        name: "rr-0a1b2c3d".into(),
        nodes: vec!["hpc-a-1".into()],
        run_duration: 600,
        phase: RequestPhase::MigReady,
        gce_state: None,
        created_at: t0(),
        updated_at: t0(),
        last_error: None,
        zone_choice: None,
        zone: None,
    }
}

fn world() -> (Desired, Observed) {
    let mut d = Desired::default();
    d.requests.insert(1, group());
    let o = Observed { vms: Some(Default::default()), migs: Some(Default::default()), ..Default::default() };
    (d, o)
}

#[test]
fn a_done_step_tells_the_next_round_what_it_made() {
    let (d, mut o) = world();
    let s = settle(&insert_mig(), &StepResult::Done, &d, &mut o, t0());
    assert_eq!(s.outbox, (OutboxState::Done, None));
    assert!(s.changes.is_empty());
    assert_eq!(
        s.report,
        StepReport {
            step: GceStepKind::InsertMig,
            target: "hpc-a-j7-0a1b2c3d".into(),
            ok: true,
            error: None
        }
    );
    let m = &o.migs.as_ref().unwrap()["hpc-a-j7-0a1b2c3d"];
    assert_eq!((m.tag.as_str(), m.job_id, m.target_size), ("0a1b2c3d", Some(7), 0));
    let s = settle(&insert_rr(), &StepResult::Done, &d, &mut o, t0());
    assert_eq!(
        o.requests["hpc-a-j7-0a1b2c3d"],
        PolledRequest::Found(ObservedRequest::in_state(GceRequestState::Creating))
    );
    // The request made is followed from now on, whether a round follows or not.
    let active = Request { phase: RequestPhase::Active, ..group() };
    assert_eq!(s.changes, ChangeSet { requests: vec![active], ..ChangeSet::default() });
    settle(&cancel(), &StepResult::Done, &d, &mut o, t0());
    assert!(
        matches!(&o.requests["hpc-a-j7-0a1b2c3d"], PolledRequest::Found(r) if r.state == GceRequestState::Cancelled)
    );
}

#[test]
fn a_refused_insert_fails_its_group_through_the_usual_path() {
    let (d, mut o) = world();
    let refused = StepResult::Refused {
        code: Some("ZONE_RESOURCE_POOL_EXHAUSTED".into()),
        message: "no a3u in us-central1-a".into(),
        class: ErrorClass::Capacity,
    };
    let s = settle(&insert_rr(), &refused, &d, &mut o, t0() + chrono::Duration::seconds(5));
    let error = "ZONE_RESOURCE_POOL_EXHAUSTED: no a3u in us-central1-a";
    assert_eq!(s.outbox, (OutboxState::Abandoned, Some(error.to_string())));
    assert_eq!(s.report.error.as_deref(), Some(error));
    assert!(!s.report.ok);
    let mut r = group();
    r.phase = RequestPhase::Active;
    r.updated_at = t0() + chrono::Duration::seconds(5);
    assert_eq!(s.changes, ChangeSet { requests: vec![r], ..ChangeSet::default() });
    let PolledRequest::Found(rr) = &o.requests["hpc-a-j7-0a1b2c3d"] else { panic!("not observed") };
    assert_eq!(rr.state, GceRequestState::Failed);
    assert_eq!(rr.error, Some(("ZONE_RESOURCE_POOL_EXHAUSTED".into(), "no a3u in us-central1-a".into())));
    assert!(rr.capacity_error);
    // Without a code, the request's error says ERROR.
    let (d, mut o) = world();
    let vanished = judge(&insert_mig(), &SendError::RequestVanished);
    settle(&insert_mig(), &vanished, &d, &mut o, t0());
    let PolledRequest::Found(rr) = &o.requests["hpc-a-j7-0a1b2c3d"] else { panic!("not observed") };
    assert_eq!(rr.error, Some(("ERROR".into(), "request vanished".into())));
    assert!(!rr.capacity_error);
}

#[test]
fn other_refusals_are_events_and_retries_stay_pending() {
    let (d, mut o) = world();
    let refused = StepResult::Refused {
        code: Some("QUOTA_EXCEEDED".into()),
        message: "m".into(),
        class: ErrorClass::Quota,
    };
    let s = settle(&delete_vms(), &refused, &d, &mut o, t0());
    assert_eq!(s.outbox.0, OutboxState::Abandoned);
    assert_eq!(
        s.changes.events,
        vec![NewEvent {
            kind: EventKind::GceRefused,
            nodes: vec![],
            message: "delete_instances hpc-a-j7-0a1b2c3d: hpc-a-1: QUOTA_EXCEEDED: m".into(),
        }]
    );
    let s = settle(&delete_mig(), &StepResult::Retry("503".into()), &d, &mut o, t0());
    assert_eq!(s.outbox, (OutboxState::Pending, Some("503".into())));
    assert!(s.changes.is_empty());
    assert_eq!(s.report.error.as_deref(), Some("503"));
}

#[test]
fn a_moot_cancel_forgets_the_stale_poll() {
    let (d, mut o) = world();
    o.requests
        .insert("hpc-a-j7-0a1b2c3d".into(), ObservedRequest::in_state(GceRequestState::Accepted).into());
    let s = settle(&cancel(), &StepResult::Moot("CONDITION_NOT_MET".into()), &d, &mut o, t0());
    assert_eq!(s.outbox, (OutboxState::Done, Some("CONDITION_NOT_MET".into())));
    assert!(s.report.ok && s.report.error.is_none());
    assert!(o.requests.is_empty(), "decided again after the next poll");
}

#[test]
fn learning_never_undoes_a_final_state() {
    let (d, mut o) = world();
    o.requests
        .insert("hpc-a-j7-0a1b2c3d".into(), ObservedRequest::in_state(GceRequestState::Succeeded).into());
    learn(&cancel(), &mut o, &d);
    assert!(
        matches!(&o.requests["hpc-a-j7-0a1b2c3d"], PolledRequest::Found(r) if r.state == GceRequestState::Succeeded)
    );
    let vm = |name: &str, mig: &str| ObservedVm {
        topology: None,
        maintenance: None,
        name: name.into(),
        zone: "us-central1-a".into(),
        status: VmStatus::Running,
        mig: Some(mig.into()),
        created: None,
        id: None,
        termination: None,
        network_ip: None,
        reservation_bound: false,
    };
    let vms = o.vms.as_mut().unwrap();
    vms.insert("hpc-a-1".into(), vm("hpc-a-1", "hpc-a-j7-0a1b2c3d"));
    vms.insert("hpc-a-2".into(), vm("hpc-a-2", "other"));
    learn(&delete_mig(), &mut o, &d);
    assert_eq!(o.vms.as_ref().unwrap().keys().collect::<Vec<_>>(), ["hpc-a-2"], "the MIG's VMs go with it");
}

/// A reservation a round deleted is not there for the next round to delete again as stale, and one
/// it made is.
#[test]
fn a_slurm_step_tells_the_next_round_about_reservations() {
    let mut o =
        Observed { reservations: Some(["slurm-dws-eol-hpc-a-0".to_string()].into()), ..Default::default() };
    learn_slurm(&SlurmStep::DeleteReservation { name: "slurm-dws-eol-hpc-a-0".into() }, &mut o);
    let made = SlurmStep::CreateReservation {
        name: "slurm-dws-eol-hpc-a-1".into(),
        node: "hpc-a-1".into(),
        start: t0(),
        end: t0() + chrono::Duration::hours(1),
    };
    learn_slurm(&made, &mut o);
    assert_eq!(o.reservations, Some(["slurm-dws-eol-hpc-a-1".to_string()].into()));
    // Unread reservations stay unread.
    let mut unread = Observed::default();
    learn_slurm(&made, &mut unread);
    assert_eq!(unread.reservations, None);
}

/// A workload policy GCE refuses anyway is typed (`gce::PolicyFailure`) and never sent again at
/// once: a MIG insert naming a missing policy, or one of another region, is refused with the
/// failure's code (its group fails, the planner backs the nodeset off); a delete of a policy a MIG
/// uses is Failed (the outbox entry closed, the step's backoff before the next attempt). Other
/// answers about the same steps keep their usual judgement.
#[test]
fn policy_failures_are_typed_and_never_retried_at_once() {
    let delete_policy = || GceStep::DeletePolicy {
        policy: "hpc-a-wp".into(),
        region: "us-central1".into(),
        reason: "gone".into(),
    };
    let p = "projects/p/regions/us-central1/resourcePolicies/hpc-a-wp";
    let in_use = format!("The resource_policy resource '{p}' is already being used by 'projects/p/regions/us-central1/instanceGroupManagers/m'");
    let cases: Vec<(&str, GceStep, SendError, Want)> = vec![
        (
            "a MIG naming a missing policy",
            insert_mig(),
            http(404, "NOT_FOUND", "notFound", &format!("The resource '{p}' was not found")),
            Want::Refused(Some("WORKLOAD_POLICY_MISSING".into()), ErrorClass::NotFound),
        ),
        (
            "a MIG naming a policy of another region",
            insert_mig(),
            http(400, "INVALID_ARGUMENT", "invalid", &format!("Invalid value for field 'resource.resourcePolicies.workloadPolicy': '{p}'. The workload policy must be in the same region as the instance group manager (europe-west4).")),
            Want::Refused(Some("WORKLOAD_POLICY_WRONG_REGION".into()), ErrorClass::Invalid),
        ),
        (
            "a delete of a policy a MIG uses (HTTP)",
            delete_policy(),
            http(400, "INVALID_ARGUMENT", "resourceInUseByAnotherResource", &in_use),
            Want::Failed(Some("WORKLOAD_POLICY_IN_USE".into())),
        ),
        (
            "a delete of a policy a MIG uses (Operation)",
            delete_policy(),
            operation("RESOURCE_IN_USE_BY_ANOTHER_RESOURCE", &in_use),
            Want::Failed(Some("WORKLOAD_POLICY_IN_USE".into())),
        ),
        // Not policy failures: as before.
        (
            "a MIG naming a missing template",
            insert_mig(),
            http(404, "NOT_FOUND", "notFound", "The resource 'projects/p/global/instanceTemplates/t' was not found"),
            Want::Refused(Some("notFound".into()), ErrorClass::NotFound),
        ),
        ("a policy already deleted", delete_policy(), http(404, "NOT_FOUND", "notFound", &format!("The resource '{p}' was not found")), Want::Done),
        ("a 503 on a policy delete", delete_policy(), http(503, "UNAVAILABLE", "backendError", "oops"), Want::Retry),
    ];
    for (what, step, answer, want) in cases {
        assert_eq!(kind(&judge(&step, &answer)), want, "{what}");
    }
    // The refused insert carries the failure's code to the planner (the request's error).
    let (d, mut o) = world();
    let r = judge(
        &insert_mig(),
        &http(404, "NOT_FOUND", "notFound", &format!("The resource '{p}' was not found")),
    );
    settle(&insert_mig(), &r, &d, &mut o, t0());
    let PolledRequest::Found(rr) = &o.requests["hpc-a-j7-0a1b2c3d"] else { panic!("not observed") };
    assert_eq!(rr.error.as_ref().map(|e| e.0.as_str()), Some("WORKLOAD_POLICY_MISSING"));
    assert!(!rr.capacity_error);
    // The failed delete closes its outbox entry with the code the step backoff recognises.
    let r =
        judge(&delete_policy(), &http(400, "INVALID_ARGUMENT", "resourceInUseByAnotherResource", &in_use));
    let s = settle(&delete_policy(), &r, &d, &mut o, t0());
    assert_eq!(s.outbox.0, OutboxState::Failed);
    let recorded = s.outbox.1.unwrap_or_default();
    assert_eq!(PolicyFailure::of_recorded(&recorded), Some(PolicyFailure::InUse), "{recorded}");
}
