//! The wire shapes of the Compute types: field names, int64 strings, unknown enum values.

use super::super::wire::gce_timestamp;
use super::*;
use chrono::{DateTime, Utc};
use serde_json::json;

#[test]
fn run_duration_seconds_is_a_string_on_the_wire() {
    let rr = InstanceGroupManagerResizeRequest::for_instances(
        "rr-1",
        "slurm-dws/v1",
        vec!["hpc-a3u-0".to_string(), "hpc-a3u-1".to_string()],
        3600,
    );
    let v = serde_json::to_value(&rr).unwrap();
    assert_eq!(
        v,
        json!({
            "name": "rr-1",
            "description": "slurm-dws/v1",
            "instances": [{"name": "hpc-a3u-0"}, {"name": "hpc-a3u-1"}],
            "requestedRunDuration": {"seconds": "3600"}
        })
    );
}

#[test]
fn int64_reads_string_or_number() {
    let a: GceDuration = serde_json::from_value(json!({"seconds": "604800"})).unwrap();
    let b: GceDuration = serde_json::from_value(json!({"seconds": 604800, "nanos": 5})).unwrap();
    assert_eq!(a.seconds, 604_800);
    assert_eq!(b.seconds, 604_800);
    assert_eq!(b.nanos, Some(5));
    assert!(serde_json::from_value::<GceDuration>(json!({"seconds": "x"})).is_err());
}

#[test]
fn unknown_enum_values_are_tolerated() {
    let rr: InstanceGroupManagerResizeRequest =
        serde_json::from_value(json!({"name": "r", "state": "PROVISIONING"})).unwrap();
    assert_eq!(rr.state, Some(ResizeRequestState::Unknown));
    assert!(!rr.state.unwrap().is_final());
    let op: Operation = serde_json::from_value(json!({"name": "o", "status": "SOMETHING_NEW"})).unwrap();
    assert_eq!(op.status, OperationStatus::Unknown);
    assert!(!op.is_done());
    let mi: ManagedInstance =
        serde_json::from_value(json!({"name": "n", "instanceStatus": "BRAND_NEW", "currentAction": "X"}))
            .unwrap();
    assert_eq!(mi.instance_status, "BRAND_NEW");
}

#[test]
fn resize_request_from_gce_parses_fully() {
    let rr: InstanceGroupManagerResizeRequest = serde_json::from_value(json!({
        "kind": "compute#instanceGroupManagerResizeRequest",
        "id": "123456789012345678",
        "creationTimestamp": "2025-05-01T10:00:00.000-07:00",
        "name": "rr-1",
        "zone": "https://www.googleapis.com/compute/v1/projects/p/zones/us-central1-a",
        "instances": [{"name": "hpc-a3u-0"}],
        "requestedRunDuration": {"seconds": "7200"},
        "state": "FAILED",
        "status": {
            "error": {"errors": [{
                "code": "ZONE_RESOURCE_POOL_EXHAUSTED",
                "message": "The zone does not have enough resources",
                "errorDetails": [{"errorInfo": {"reason": "RESOURCE_AVAILABILITY", "domain": "compute.googleapis.com", "metadatas": {"zone": "us-central1-a"}}}]
            }]},
            "lastAttempt": {"error": {"errors": [{"code": "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", "message": "Waiting for resources"}]}}
        },
        "selfLink": "https://www.googleapis.com/compute/v1/projects/p/zones/us-central1-a/instanceGroupManagers/m/resizeRequests/rr-1",
        "someFutureField": {"x": 1}
    }))
    .unwrap();
    assert_eq!(rr.state, Some(ResizeRequestState::Failed));
    assert!(rr.state.unwrap().is_final());
    assert_eq!(rr.requested_run_duration.as_ref().unwrap().seconds, 7200);
    assert_eq!(rr.errors()[0].code, "ZONE_RESOURCE_POOL_EXHAUSTED");
    assert_eq!(rr.errors()[0].error_info_reasons().collect::<Vec<_>>(), ["RESOURCE_AVAILABILITY"]);
    assert_eq!(rr.last_attempt_errors()[0].code, "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS");
}

#[test]
fn mig_insert_body_has_only_what_was_set() {
    let mig = InstanceGroupManager {
        name: "hpc-a3u-x1".into(),
        description: "slurm-dws/v1 cluster=hpc nodeset=a3u".into(),
        versions: vec![InstanceGroupManagerVersion {
            instance_template: "projects/p/regions/r/instanceTemplates/t".into(),
            name: String::new(),
        }],
        target_size: Some(0),
        instance_lifecycle_policy: Some(InstanceLifecyclePolicy {
            default_action_on_failure: "DO_NOTHING".into(),
        }),
        distribution_policy: Some(DistributionPolicy {
            zones: vec![DistributionPolicyZone { zone: "zones/us-central1-a".into() }],
            target_shape: "ANY_SINGLE_ZONE".into(),
        }),
        update_policy: Some(UpdatePolicy { instance_redistribution_type: "NONE".into() }),
        ..Default::default()
    };
    assert_eq!(
        serde_json::to_value(&mig).unwrap(),
        json!({
            "name": "hpc-a3u-x1",
            "description": "slurm-dws/v1 cluster=hpc nodeset=a3u",
            "versions": [{"instanceTemplate": "projects/p/regions/r/instanceTemplates/t"}],
            "targetSize": 0,
            "instanceLifecyclePolicy": {"defaultActionOnFailure": "DO_NOTHING"},
            "distributionPolicy": {"zones": [{"zone": "zones/us-central1-a"}], "targetShape": "ANY_SINGLE_ZONE"},
            "updatePolicy": {"instanceRedistributionType": "NONE"}
        })
    );
}

#[test]
fn mig_from_gce_parses_object_status_and_actions() {
    let mig: InstanceGroupManager = serde_json::from_value(json!({
        "name": "m", "targetSize": 3,
        "status": {"isStable": false, "versionTarget": {"isReached": true}},
        "currentActions": {"creating": 2, "none": 1},
        "listManagedInstancesResults": "PAGINATED",
        "resourcePolicies": {"workloadPolicy": "projects/p/regions/r/resourcePolicies/wp"}
    }))
    .unwrap();
    assert_eq!(mig.target_size, Some(3));
    assert_eq!(mig.status.unwrap().is_stable, Some(false));
    assert_eq!(mig.current_actions.unwrap().creating, 2);
}

#[test]
fn instance_helpers() {
    let vm: Instance = serde_json::from_value(json!({
        "name": "hpc-a3u-0", "status": "RUNNING",
        "creationTimestamp": "2025-05-01T10:00:00.000-07:00",
        "labels": {"slurm-dws": "hpc"},
        "metadata": {"items": [{"key": "created-by", "value": "projects/1/regions/r/instanceGroupManagers/m"}]},
        "networkInterfaces": [{"networkIP": "10.0.0.5"}],
        "scheduling": {"provisioningModel": "FLEX_START"},
        "resourceStatus": {"scheduling": {"terminationTimestamp": "2025-05-01T12:00:00.000-07:00"}}
    }))
    .unwrap();
    assert_eq!(vm.internal_ip(), Some("10.0.0.5"));
    assert_eq!(vm.created_by(), Some("projects/1/regions/r/instanceGroupManagers/m"));
    assert_eq!(vm.termination_time().unwrap().to_rfc3339(), "2025-05-01T19:00:00+00:00");
    assert_eq!(vm.scheduling.as_ref().unwrap().provisioning_model, "FLEX_START");
    // networkIP keeps its odd capitalisation on the way out.
    let v = serde_json::to_value(&vm).unwrap();
    assert_eq!(v["networkInterfaces"][0]["networkIP"], "10.0.0.5");
}

#[test]
fn managed_instance_without_url_uses_name() {
    let mi: ManagedInstance = serde_json::from_value(json!({
        "name": "hpc-a3u-3", "instanceStatus": "PENDING", "currentAction": "CREATING",
        "lastAttempt": {"errors": {"errors": [{"code": "ZONE_RESOURCE_POOL_EXHAUSTED"}]}},
        "scheduling": {"terminationTimestamp": "2025-05-01T12:00:00Z"}
    }))
    .unwrap();
    assert_eq!(mi.vm_name(), "hpc-a3u-3");
    assert_eq!(mi.last_attempt_errors()[0].code, "ZONE_RESOURCE_POOL_EXHAUSTED");
    assert!(mi.termination_time().is_some());
    let mi2 = ManagedInstance {
        instance: "https://x/projects/p/zones/z/instances/vm-7".into(),
        ..Default::default()
    };
    assert_eq!(mi2.vm_name(), "vm-7");
}

#[test]
fn pages_accept_items_or_managed_instances() {
    let p: Page<ManagedInstance> =
        serde_json::from_value(json!({"managedInstances": [{"name": "a"}], "nextPageToken": "t"})).unwrap();
    assert_eq!(p.items.len(), 1);
    assert_eq!(p.next_page_token, "t");
    let p: Page<Instance> = serde_json::from_value(json!({"kind": "compute#instanceList"})).unwrap();
    assert!(p.items.is_empty());
    let a: InstanceAggregatedPage = serde_json::from_value(json!({"items": {
        "zones/a": {"instances": [{"name": "x"}]},
        "zones/b": {"warning": {"code": "NO_RESULTS_ON_PAGE"}}
    }}))
    .unwrap();
    assert_eq!(a.items["zones/a"].instances[0].name, "x");
    assert!(a.items["zones/b"].instances.is_empty());
}

/// GCE's timestamps read by position read as chrono's RFC 3339 parser reads them; what the quick
/// read does not take (other forms, leap seconds, nonsense) is left to chrono.
#[test]
fn gce_timestamps_read_as_chrono_reads_them() {
    let chrono = |s: &str| DateTime::parse_from_rfc3339(s).ok().map(|t| t.with_timezone(&Utc));
    let cases = [
        "2026-11-24T10:00:00.000-08:00",
        "2026-11-24T10:00:00.123456789+05:30",
        "2026-11-24T10:00:00Z",
        "2026-11-24T10:00:00z",
        "2026-11-24T23:59:59.9-00:00",
        "2026-02-28T00:00:00.000+23:59",
        "2024-02-29T12:00:00.000-08:00",
        "2026-12-31T23:30:00.000-01:00",
        "0001-01-01T00:00:00Z",
    ];
    for s in cases {
        assert!(gce_timestamp(s).is_some(), "{s}");
        assert_eq!(gce_timestamp(s), chrono(s), "{s}");
        assert_eq!(parse_timestamp(s), chrono(s), "{s}");
    }
    let others = [
        "",
        "2026-11-24",
        "2026-11-24T10:00:00",
        "2026-11-24 10:00:00Z",
        "2026-02-30T10:00:00Z",
        "2026-11-24T24:00:00Z",
        "2026-11-24T10:00:60Z",
        "2026-11-24T10:00:00.Z",
        "2026-11-24T10:00:00.1234567890Z",
        "2026-11-24T10:00:00+24:00",
        "2026-11-24T10:00:00+0800",
        "2026-11-24T10:00:00.000-08:00 ",
        "2026-11-24T1a:00:00Z",
        "+2026-11-24T10:00:00Z",
    ];
    for s in others {
        assert_eq!(gce_timestamp(s), None, "{s}");
        assert_eq!(parse_timestamp(s), chrono(s), "{s}");
    }
    // Every second of a leap year's day boundaries and offsets, against chrono.
    for (day, offset) in [("2024-02-29", "-08:00"), ("2026-01-01", "+14:00"), ("2026-07-04", "Z")] {
        for secs in (0..86_400).step_by(997) {
            let s = format!(
                "{day}T{:02}:{:02}:{:02}.{:03}{offset}",
                secs / 3600,
                secs / 60 % 60,
                secs % 60,
                secs % 1000
            );
            assert_eq!(gce_timestamp(&s), chrono(&s), "{s}");
        }
    }
}
