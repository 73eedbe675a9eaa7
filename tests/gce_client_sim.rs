//! gce::Client against the Compute Engine simulator: every endpoint, the resize-request state
//! machine, error classes from real simulated faults, retries, requestId reuse and pagination.

use std::time::Duration;

use gce_sim::{SimHandle, SimOptions};
use serde_json::{json, Value};
use slurm_dws::gce::{
    classify_errors, Backoff, Client, ClientOptions, Credentials, DistributionPolicy, DistributionPolicyZone,
    ErrorClass, GceError, InstanceGroupManager, InstanceGroupManagerResizeRequest,
    InstanceGroupManagerVersion, InstanceLifecyclePolicy, Location, Operation, OperationScope,
    ResizeRequestState, UpdatePolicy, VmRecall,
};
use tokio::time::Instant;

const REGION: &str = "us-central1";
const ZONE: &str = "us-central1-a";
const TEMPLATE: &str = "projects/p/regions/us-central1/instanceTemplates/a3u-flex";

struct Sim {
    handle: SimHandle,
    ctl: reqwest::Client,
    client: Client,
}

impl Sim {
    async fn start() -> Self {
        Self::start_with(Duration::from_secs(5), Duration::from_secs(5)).await
    }

    async fn start_with(request_timeout: Duration, retry_deadline: Duration) -> Self {
        let handle = gce_sim::start(SimOptions::default()).await.unwrap();
        let client = Client::new(
            ClientOptions {
                endpoint: handle.base_url(),
                project: "p".into(),
                calls_per_minute: 0,
                reads_per_minute: 0,
                writes_per_minute: 0,
                request_timeout,
                retry_deadline,
            },
            Credentials::None,
        )
        .unwrap();
        client.set_backoff(Backoff { initial: Duration::from_millis(20), max: Duration::from_millis(100) });
        Self { handle, ctl: reqwest::Client::new(), client }
    }

    fn ctl_url(&self, path: &str) -> String {
        format!("http://{}/_sim/{path}", self.handle.addr())
    }

    async fn post(&self, path: &str, body: Value) {
        let r = self.ctl.post(self.ctl_url(path)).json(&body).send().await.unwrap();
        assert!(r.status().is_success(), "{path}: {}", r.text().await.unwrap());
    }

    async fn clear(&self, path: &str) {
        self.ctl.delete(self.ctl_url(path)).send().await.unwrap();
    }

    /// Calls the simulator counted for one method id.
    async fn calls(&self, method: &str) -> u64 {
        let v: Value = self.ctl.get(self.ctl_url("calls")).send().await.unwrap().json().await.unwrap();
        v["by_method"][method].as_u64().unwrap_or(0)
    }

    async fn fault(&self, method: &str, status: u16, reason: Option<&str>, count: Option<u64>) {
        let mut rule = json!({"method": method, "status": status});
        if let Some(r) = reason {
            rule["reason"] = json!(r);
        }
        if let Some(c) = count {
            rule["count"] = json!(c);
        }
        self.post("faults", rule).await;
    }

    async fn done(&self, op: Operation) -> Result<Operation, GceError> {
        self.client.wait_done(&op, Instant::now() + Duration::from_secs(20)).await
    }

    /// Creates a MIG as slurm-dws does and waits for it.
    async fn mig(&self, loc: &Location, name: &str) {
        let op = self.client.insert_mig(loc, &mig_body(loc, name), &rid()).await.unwrap();
        self.done(op).await.unwrap();
    }

    /// Polls a resize request until it is final (or `timeout`).
    async fn final_rr(
        &self,
        loc: &Location,
        mig: &str,
        rr: &str,
        timeout: Duration,
    ) -> InstanceGroupManagerResizeRequest {
        let end = Instant::now() + timeout;
        loop {
            let got = self.client.get_resize_request(loc, mig, rr).await.unwrap();
            if got.state.is_some_and(ResizeRequestState::is_final) || Instant::now() > end {
                return got;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

fn rid() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// Bodies carry a description, as slurm-dws's do (its ownership proof lives in the MIG's).
fn description(text: &str) -> String {
    text.to_string()
}

fn mig_body(loc: &Location, name: &str) -> InstanceGroupManager {
    InstanceGroupManager {
        name: name.into(),
        description: description("slurm-dws/v1 cluster=hpc nodeset=a3u"),
        versions: vec![InstanceGroupManagerVersion {
            instance_template: TEMPLATE.into(),
            name: String::new(),
        }],
        target_size: Some(0),
        instance_lifecycle_policy: Some(InstanceLifecyclePolicy {
            default_action_on_failure: "DO_NOTHING".into(),
        }),
        distribution_policy: matches!(loc, Location::Region(_)).then(|| DistributionPolicy {
            zones: vec![DistributionPolicyZone { zone: format!("zones/{ZONE}") }],
            target_shape: "ANY_SINGLE_ZONE".into(),
        }),
        update_policy: matches!(loc, Location::Region(_))
            .then(|| UpdatePolicy { instance_redistribution_type: "NONE".into() }),
        ..Default::default()
    }
}

fn rr_body(name: &str, nodes: &[&str], secs: i64) -> InstanceGroupManagerResizeRequest {
    InstanceGroupManagerResizeRequest::for_instances(
        name,
        description("slurm-dws/v1"),
        nodes.iter().map(|s| s.to_string()),
        secs,
    )
}

fn region() -> Location {
    Location::Region(REGION.into())
}

#[tokio::test]
async fn regional_lifecycle_through_every_endpoint() {
    let sim = Sim::start().await;
    let c = &sim.client;
    let loc = region();
    sim.mig(&loc, "hpc-a3u-g1").await;

    let mig = c.get_mig(&loc, "hpc-a3u-g1").await.unwrap();
    assert_eq!(mig.target_size, Some(0));
    assert_eq!(mig.description, description("slurm-dws/v1 cluster=hpc nodeset=a3u"));
    assert_eq!(mig.distribution_policy.as_ref().unwrap().target_shape, "ANY_SINGLE_ZONE");
    let listed = c.list_migs(&loc, Some("name eq 'hpc-a3u-.*'")).await.unwrap();
    assert_eq!(listed.len(), 1);

    let op = c
        .insert_resize_request(
            &loc,
            "hpc-a3u-g1",
            &rr_body("rr-1", &["hpc-a3u-0", "hpc-a3u-1"], 3600),
            &rid(),
        )
        .await
        .unwrap();
    assert_eq!(OperationScope::of(&op), OperationScope::Region(REGION.into()));
    sim.done(op).await.unwrap();
    // The MIG's target size grows at once.
    assert_eq!(c.get_mig(&loc, "hpc-a3u-g1").await.unwrap().target_size, Some(2));
    let rr = sim.final_rr(&loc, "hpc-a3u-g1", "rr-1", Duration::from_secs(10)).await;
    assert_eq!(rr.state, Some(ResizeRequestState::Succeeded), "{rr:?}");
    assert_eq!(rr.requested_run_duration.as_ref().unwrap().seconds, 3600);
    let rrs = c.list_resize_requests(&loc, "hpc-a3u-g1", None).await.unwrap();
    assert_eq!(rrs.len(), 1);

    // Both VMs exist, named as asked, with a termination time and their MIG in created-by.
    let mis = c.list_managed_instances(&loc, "hpc-a3u-g1", None).await.unwrap();
    let mut names: Vec<&str> = mis.iter().map(|m| m.vm_name()).collect();
    names.sort();
    assert_eq!(names, ["hpc-a3u-0", "hpc-a3u-1"]);
    let vm = c.get_instance(ZONE, "hpc-a3u-0").await.unwrap();
    assert!(vm.termination_time().is_some(), "{vm:?}");
    assert!(vm.created_by().unwrap_or_default().ends_with("hpc-a3u-g1"), "{vm:?}");
    let in_zone = c.list_instances(ZONE, None).await.unwrap();
    assert_eq!(in_zone.len(), 2);
    let everywhere = c.aggregated_list_instances(Some("name eq 'hpc-a3u-1'")).await.unwrap().0;
    assert_eq!(everywhere.len(), 1);
    assert_eq!(everywhere[0].name, "hpc-a3u-1");

    // Each VM of an aggregated list says its zone: a regional deleteInstances needs it.
    assert!(everywhere[0].zone.ends_with(ZONE), "{:?}", everywhere[0].zone);

    // Delete one VM through its MIG (a regional MIG takes instance URLs, never bare names); the
    // target size follows.
    let url = format!("zones/{ZONE}/instances/hpc-a3u-1");
    let op = c.delete_instances(&loc, "hpc-a3u-g1", &[url], &rid()).await.unwrap();
    sim.done(op).await.unwrap();
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        let mis = c.list_managed_instances(&loc, "hpc-a3u-g1", None).await.unwrap();
        if mis.len() == 1 || Instant::now() > end {
            assert_eq!(mis.len(), 1);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // A final request can be deleted; its remaining VM stays.
    let op = c.delete_resize_request(&loc, "hpc-a3u-g1", "rr-1", &rid()).await.unwrap();
    sim.done(op).await.unwrap();
    let err = c.get_resize_request(&loc, "hpc-a3u-g1", "rr-1").await.unwrap_err();
    assert_eq!(err.class(), ErrorClass::NotFound, "{err}");
    c.get_instance(ZONE, "hpc-a3u-0").await.unwrap();

    // The template reference a nodeset carries resolves, once the project has it (GCE answers 404
    // for a template that does not exist).
    let err = c.get_instance_template_ref(TEMPLATE).await.unwrap_err();
    assert!(err.is_not_found(), "{err}");
    for name in ["a3u-flex", "x", "g"] {
        sim.post("templates", devcluster::stack::flex_template(name)).await;
    }
    let t = c.get_instance_template_ref(TEMPLATE).await.unwrap();
    assert_eq!(t.scheduling().unwrap().provisioning_model, "FLEX_START");
    let t = c.get_region_instance_template(REGION, "x").await.unwrap();
    assert_eq!(t.name, "x");
    let t = c.get_instance_template("g").await.unwrap();
    assert_eq!(t.name, "g");

    // The MIG delete cascades to the VM.
    let op = c.delete_mig(&loc, "hpc-a3u-g1", &rid()).await.unwrap();
    let op = sim.done(op).await.unwrap();
    let got = c.get_operation(&OperationScope::of(&op), &op.name).await.unwrap();
    assert!(got.is_done());
    let err = c.get_mig(&loc, "hpc-a3u-g1").await.unwrap_err();
    assert!(err.is_not_found(), "{err}");

    let stats = c.stats();
    for m in [
        "regionInstanceGroupManagers.insert",
        "regionInstanceGroupManagers.get",
        "regionInstanceGroupManagers.list",
        "regionInstanceGroupManagers.delete",
        "regionInstanceGroupManagers.deleteInstances",
        "regionInstanceGroupManagers.listManagedInstances",
        "regionInstanceGroupManagerResizeRequests.insert",
        "regionInstanceGroupManagerResizeRequests.get",
        "regionInstanceGroupManagerResizeRequests.list",
        "regionInstanceGroupManagerResizeRequests.delete",
        "regionOperations.get",
        "instances.get",
        "instances.list",
        "instances.aggregatedList",
        "instanceTemplates.get",
        "regionInstanceTemplates.get",
    ] {
        let ours = stats.get(m).map_or(0, |s| s.calls);
        assert!(ours > 0, "{m} never called");
        assert_eq!(ours, sim.calls(m).await, "{m}: client and simulator disagree");
    }
}

#[tokio::test]
async fn zonal_cancel_then_cancel_again_is_condition_not_met() {
    let sim = Sim::start().await;
    let c = &sim.client;
    let loc = Location::Zone(ZONE.into());
    sim.mig(&loc, "hpc-z-g1").await;
    sim.post("capacity", json!({"match": "hpc-z-", "delay_seconds": 0, "hold": true})).await;
    let op =
        c.insert_resize_request(&loc, "hpc-z-g1", &rr_body("rr-q", &["hpc-z-0"], 600), &rid()).await.unwrap();
    assert_eq!(OperationScope::of(&op), OperationScope::Zone(ZONE.into()));
    sim.done(op).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let rr = c.get_resize_request(&loc, "hpc-z-g1", "rr-q").await.unwrap();
    assert_eq!(rr.state, Some(ResizeRequestState::Accepted), "{rr:?}");
    // Queued instances are listed by name, without a URL.
    let mis = c.list_managed_instances(&loc, "hpc-z-g1", None).await.unwrap();
    assert_eq!(mis.len(), 1);
    assert_eq!(mis[0].vm_name(), "hpc-z-0");

    let op = c.cancel_resize_request(&loc, "hpc-z-g1", "rr-q", &rid()).await.unwrap();
    sim.done(op).await.unwrap();
    let rr = c.get_resize_request(&loc, "hpc-z-g1", "rr-q").await.unwrap();
    assert_eq!(rr.state, Some(ResizeRequestState::Cancelled));

    // Cancelling a final request: accepted, and the Operation ends CONDITION_NOT_MET.
    let op = c.cancel_resize_request(&loc, "hpc-z-g1", "rr-q", &rid()).await.unwrap();
    let err = sim.done(op).await.unwrap_err();
    assert_eq!(err.class(), ErrorClass::ConditionNotMet, "{err}");
    assert!(matches!(err, GceError::Operation(_)));

    let op = c.delete_resize_request(&loc, "hpc-z-g1", "rr-q", &rid()).await.unwrap();
    sim.done(op).await.unwrap();
    let op = c.delete_mig(&loc, "hpc-z-g1", &rid()).await.unwrap();
    sim.done(op).await.unwrap();
    assert!(sim.calls("instanceGroupManagerResizeRequests.cancel").await == 2);
    assert!(sim.calls("zoneOperations.wait").await > 0);
}

#[tokio::test]
async fn failed_requests_carry_classified_errors() {
    let sim = Sim::start().await;
    let c = &sim.client;
    let loc = region();
    for (prefix, code, want) in [
        ("stock-", "ZONE_RESOURCE_POOL_EXHAUSTED", ErrorClass::Capacity),
        ("vmmin-", "VM_MIN_COUNT_NOT_REACHED", ErrorClass::Capacity),
        ("quota-", "QUOTA_EXCEEDED", ErrorClass::Quota),
    ] {
        sim.post(
            "capacity",
            json!({"match": prefix, "delay_seconds": 0.1,
                   "fail": {"code": code, "message": format!("{code} in {ZONE}")}}),
        )
        .await;
        let mig = format!("{prefix}g");
        sim.mig(&loc, &mig).await;
        let op = c
            .insert_resize_request(&loc, &mig, &rr_body("rr", &[&format!("{prefix}n0")], 600), &rid())
            .await
            .unwrap();
        sim.done(op).await.unwrap();
        let rr = sim.final_rr(&loc, &mig, "rr", Duration::from_secs(10)).await;
        assert_eq!(rr.state, Some(ResizeRequestState::Failed), "{rr:?}");
        assert_eq!(rr.errors()[0].code, code);
        assert_eq!(classify_errors(rr.errors()), want, "{code}");
    }
}

#[tokio::test]
async fn injected_http_faults_get_their_class_and_retries() {
    let sim = Sim::start_with(Duration::from_secs(5), Duration::from_millis(500)).await;
    let c = &sim.client;
    let loc = region();
    sim.mig(&loc, "m").await;
    let get = "regionInstanceGroupManagers.get";

    // Retryable faults, a few times each, then success: the call succeeds.
    for (status, reason) in [
        (503, None),
        (500, None),
        (429, None),
        (403, Some("rateLimitExceeded")),
        (403, Some("userRateLimitExceeded")),
        (502, None),
        (504, None),
    ] {
        sim.post("calls/reset", json!({})).await;
        sim.fault(get, status, reason, Some(2)).await;
        c.get_mig(&loc, "m").await.unwrap_or_else(|e| panic!("{status} {reason:?}: {e}"));
        assert_eq!(sim.calls(get).await, 3, "{status} {reason:?}");
    }

    // Retry budget exhausted: the last error comes back, still retryable.
    sim.fault(get, 503, None, None).await;
    let t = Instant::now();
    let err = c.get_mig(&loc, "m").await.unwrap_err();
    assert!(err.is_retryable(), "{err}");
    assert!(t.elapsed() < Duration::from_secs(2));
    sim.clear("faults").await;

    // Non-retryable faults: one call each, the right class.
    for (status, reason, want) in [
        (404, None, ErrorClass::NotFound),
        (409, None, ErrorClass::AlreadyExists),
        (400, None, ErrorClass::Invalid),
        (403, Some("forbidden"), ErrorClass::Auth),
        (403, Some("quotaExceeded"), ErrorClass::Quota),
        (503, Some("ZONE_RESOURCE_POOL_EXHAUSTED"), ErrorClass::Capacity),
        (412, Some("conditionNotMet"), ErrorClass::ConditionNotMet),
    ] {
        sim.post("calls/reset", json!({})).await;
        sim.fault(get, status, reason, Some(1)).await;
        let err = c.get_mig(&loc, "m").await.unwrap_err();
        assert_eq!(err.class(), want, "{status} {reason:?}: {err}");
        assert_eq!(sim.calls(get).await, 1, "{status} {reason:?} was retried");
    }
    let st = &c.stats()[get];
    assert!(st.errors_by_class[&ErrorClass::Retryable] >= 14);
    assert_eq!(st.errors_by_class[&ErrorClass::NotFound], 1);
}

#[tokio::test]
async fn request_id_reuse_returns_the_first_operation() {
    let sim = Sim::start_with(Duration::from_millis(300), Duration::from_secs(5)).await;
    let c = &sim.client;
    let loc = region();
    let id = rid();
    let first = c.insert_mig(&loc, &mig_body(&loc, "m1"), &id).await.unwrap();
    let again = c.insert_mig(&loc, &mig_body(&loc, "m1"), &id).await.unwrap();
    assert_eq!(first.name, again.name);
    sim.done(again).await.unwrap();
    // A new request id for the same name is a new request: AlreadyExists (sync or in the op).
    let dup = match c.insert_mig(&loc, &mig_body(&loc, "m1"), &rid()).await {
        Ok(op) => sim.done(op).await.unwrap_err(),
        Err(e) => e,
    };
    assert_eq!(dup.class(), ErrorClass::AlreadyExists, "{dup}");

    // The first answer is lost to a timeout: the retry carries the same requestId and gets
    // the same Operation; only one resize request exists.
    sim.post(
        "faults",
        json!({"method": "regionInstanceGroupManagerResizeRequests.insert", "status": 200,
               "delay_ms": 700, "count": 1}),
    )
    .await;
    let op = c.insert_resize_request(&loc, "m1", &rr_body("rr", &["n0"], 600), &rid()).await.unwrap();
    assert_eq!(sim.calls("regionInstanceGroupManagerResizeRequests.insert").await, 2);
    sim.done(op).await.unwrap();
    assert_eq!(c.list_resize_requests(&loc, "m1", None).await.unwrap().len(), 1);
    assert_eq!(c.get_mig(&loc, "m1").await.unwrap().target_size, Some(1));
}

#[tokio::test]
async fn invalid_and_missing_things_are_typed() {
    let sim = Sim::start().await;
    let c = &sim.client;
    let loc = region();
    sim.mig(&loc, "m").await;
    // Run duration below GCE's 600 s minimum.
    let err = match c.insert_resize_request(&loc, "m", &rr_body("rr", &["n0"], 60), &rid()).await {
        Ok(op) => sim.done(op).await.unwrap_err(),
        Err(e) => e,
    };
    assert_eq!(err.class(), ErrorClass::Invalid, "{err}");
    let err = c.get_instance(ZONE, "nope").await.unwrap_err();
    assert!(err.is_not_found(), "{err}");
    let err = c.get_mig(&Location::Zone(ZONE.into()), "m").await.unwrap_err();
    assert!(err.is_not_found(), "{err}");
    let err = c.get_operation(&OperationScope::Global, "operation-none").await.unwrap_err();
    assert!(err.is_not_found(), "{err}");
}

#[tokio::test]
async fn expiry_deletes_the_vm() {
    let sim = Sim::start().await;
    let c = &sim.client;
    let loc = region();
    sim.mig(&loc, "m").await;
    let op = c.insert_resize_request(&loc, "m", &rr_body("rr", &["n0"], 600), &rid()).await.unwrap();
    sim.done(op).await.unwrap();
    sim.final_rr(&loc, "m", "rr", Duration::from_secs(10)).await;
    c.get_instance(ZONE, "n0").await.unwrap();
    sim.post("instances/n0/expire", json!({})).await;
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        match c.get_instance(ZONE, "n0").await {
            Err(e) if e.is_not_found() => break,
            _ if Instant::now() > end => panic!("n0 still exists"),
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

#[tokio::test]
async fn lists_page_through_more_than_a_thousand_vms() {
    let sim = Sim::start().await;
    let c = &sim.client;
    let loc = region();
    let mut mig = mig_body(&loc, "big");
    mig.list_managed_instances_results = "PAGINATED".into();
    let op = c.insert_mig(&loc, &mig, &rid()).await.unwrap();
    sim.done(op).await.unwrap();
    let names: Vec<String> = (0..1050).map(|i| format!("big-{i}")).collect();
    for (i, chunk) in names.chunks(600).enumerate() {
        let refs: Vec<&str> = chunk.iter().map(String::as_str).collect();
        let op = c
            .insert_resize_request(&loc, "big", &rr_body(&format!("rr-{i}"), &refs, 600), &rid())
            .await
            .unwrap();
        sim.done(op).await.unwrap();
        sim.final_rr(&loc, "big", &format!("rr-{i}"), Duration::from_secs(30)).await;
    }
    sim.post("calls/reset", json!({})).await;

    let vms = c.list_instances(ZONE, None).await.unwrap();
    assert_eq!(vms.len(), 1050);
    assert_eq!(sim.calls("instances.list").await, 3);
    let all = c.aggregated_list_instances(None).await.unwrap().0;
    assert_eq!(all.len(), 1050);
    assert_eq!(sim.calls("instances.aggregatedList").await, 3);
    let mis = c.list_managed_instances(&loc, "big", None).await.unwrap();
    assert_eq!(mis.len(), 1050);
    assert_eq!(sim.calls("regionInstanceGroupManagers.listManagedInstances").await, 3);
    let mut seen: Vec<&str> = vms.iter().map(|v| v.name.as_str()).collect();
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 1050, "no VM twice, none missing");
    // A filter narrows the pages.
    let some = c.list_instances(ZONE, Some("name eq 'big-1.*'")).await.unwrap();
    assert_eq!(some.len(), 1 + 10 + 100 + 50);
}

/// What a pass reads of every VM of the lean list, with or without the recall of its last read.
async fn lean_list(c: &Client, recall: Option<&mut VmRecall>) -> Result<Vec<String>, GceError> {
    let mut vms = Vec::new();
    c.aggregated_list_vms_lean(None, None, recall, |zone, vm| {
        vms.push(format!(
            "{zone} {} {} {} {} {:?} {:?} {:?} {:?}",
            vm.name,
            vm.zone,
            vm.status,
            vm.creation_timestamp,
            vm.created_by(),
            vm.internal_ip(),
            vm.topology(),
            vm.termination_timestamp()
        ))
    })
    .await?;
    vms.sort();
    Ok(vms)
}

/// Over real HTTP, across pages: the VM list read with its recall reads as a fresh list, takes the
/// VMs unchanged since the last read as they were, and forgets a read that failed.
#[tokio::test]
async fn the_lean_vm_list_with_its_recall_reads_as_a_fresh_list() {
    let sim = Sim::start().await;
    let c = &sim.client;
    let loc = region();
    let op = c.insert_mig(&loc, &mig_body(&loc, "big"), &rid()).await.unwrap();
    sim.done(op).await.unwrap();
    let names: Vec<String> = (0..620).map(|i| format!("big-{i}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let op = c.insert_resize_request(&loc, "big", &rr_body("rr", &refs, 600), &rid()).await.unwrap();
    sim.done(op).await.unwrap();
    sim.final_rr(&loc, "big", "rr", Duration::from_secs(30)).await;

    let mut recall = VmRecall::default();
    let fresh = lean_list(c, None).await.unwrap();
    assert_eq!(fresh.len(), 620);
    assert_eq!(lean_list(c, Some(&mut recall)).await.unwrap(), fresh);
    assert_eq!(recall.taken(), 0, "a first read takes nothing");
    assert_eq!(lean_list(c, Some(&mut recall)).await.unwrap(), fresh);
    assert_eq!(recall.taken(), 620, "every VM as it was");

    // A VM gone: the list reads as a fresh one, the VMs after it decoded again.
    sim.post("instances/big-300/expire", json!({})).await;
    let end = Instant::now() + Duration::from_secs(10);
    while c.get_instance(ZONE, "big-300").await.is_ok() {
        assert!(Instant::now() < end, "big-300 still exists");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let fresh = lean_list(c, None).await.unwrap();
    assert_eq!(fresh.len(), 619);
    assert_eq!(lean_list(c, Some(&mut recall)).await.unwrap(), fresh);
    assert!(recall.taken() < 619, "{}", recall.taken());

    // A failed read is forgotten.
    sim.fault("instances.aggregatedList", 403, Some("forbidden"), Some(1)).await;
    assert!(lean_list(c, Some(&mut recall)).await.is_err());
    assert_eq!(lean_list(c, Some(&mut recall)).await.unwrap(), fresh);
    assert_eq!(recall.taken(), 0);
}

#[tokio::test]
async fn descriptions_round_trip() {
    let sim = Sim::start().await;
    let c = &sim.client;
    let loc = region();
    let mut mig = mig_body(&loc, "owned");
    mig.description = "slurm-dws/v1 cluster=hpc nodeset=a3u".into();
    let op = c.insert_mig(&loc, &mig, &rid()).await.unwrap();
    sim.done(op).await.unwrap();
    assert_eq!(c.get_mig(&loc, "owned").await.unwrap().description, "slurm-dws/v1 cluster=hpc nodeset=a3u");
    let mut rr = rr_body("rr", &["owned-0"], 600);
    rr.description = "slurm-dws/v1 job=42".into();
    let op = c.insert_resize_request(&loc, "owned", &rr, &rid()).await.unwrap();
    sim.done(op).await.unwrap();
    assert_eq!(c.get_resize_request(&loc, "owned", "rr").await.unwrap().description, "slurm-dws/v1 job=42");
}
