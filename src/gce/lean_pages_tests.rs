//! The lean page decoder reads what the whole `Instance` decoder reads, on GCE's (and the
//! simulator's) shapes: full objects, `fields=` partial responses, partial successes, escapes; and
//! a list read with its recall reads as a fresh read, whatever changed between the two.

use super::super::types::{InstanceAggregatedPage, Unreachable};
use super::*;
use serde_json::{json, Value};

/// What a pass reads of a VM: name, zone, status, created-by, IP, termination, creation.
type Read = (String, String, String, Option<String>, Option<String>, Option<String>, String);

/// A VM as the simulator renders it (every field it writes), spot or flex.
fn full_vm(name: &str, zone: &str, flex: bool) -> Value {
    let base = "https://compute.googleapis.com/compute/v1/";
    let mut vm = json!({
        "kind": "compute#instance",
        "id": "4471829301",
        "creationTimestamp": "2026-11-24T10:00:00.000-08:00",
        "name": name,
        "machineType": format!("{base}projects/p/zones/{zone}/machineTypes/a3-ultragpu-8g"),
        "status": "RUNNING",
        "zone": format!("{base}projects/p/zones/{zone}"),
        "networkInterfaces": [
            {"kind": "compute#networkInterface", "name": "nic0",
             "network": format!("{base}projects/p/global/networks/default"),
             "networkIP": "10.0.0.7", "stackType": "IPV4_ONLY"},
            {"name": "nic1", "networkIP": "10.1.0.7"}
        ],
        "metadata": {
            "kind": "compute#metadata",
            "fingerprint": "c2ltdWxhdG9y",
            "items": [
                {"key": "startup-script", "value": "#!/bin/bash\necho \"hi\"\n"},
                {"key": "created-by", "value": "projects/123/regions/us-central1/instanceGroupManagers/hpc-a3u-g7"},
                {"key": "instance-template", "value": "projects/p/global/instanceTemplates/t"}
            ]
        },
        "scheduling": {"provisioningModel": "FLEX_START", "maxRunDuration": {"seconds": "3600"}},
        "labels": {"slurm-dws": "hpc"},
        "selfLink": format!("{base}projects/p/zones/{zone}/instances/{name}"),
        "lastStartTimestamp": "2026-11-24T10:01:00.000-08:00"
    });
    if flex {
        vm["resourceStatus"] =
            json!({"scheduling": {"terminationTimestamp": "2026-11-24T11:00:00.000-08:00"}});
    }
    vm
}

/// What a pass reads of every VM, through the whole decoder.
fn whole(page: &Value) -> (Vec<Read>, Unreachable) {
    let p: InstanceAggregatedPage = serde_json::from_value(page.clone()).unwrap();
    let mut u = Unreachable::default();
    u.add_page(&p);
    let mut out = Vec::new();
    for (scope, list) in &p.items {
        for i in &list.instances {
            let zone = if i.zone.is_empty() {
                scope.strip_prefix("zones/").unwrap().to_string()
            } else {
                crate::gce::last_segment(&i.zone).to_string()
            };
            out.push((
                i.name.clone(),
                zone,
                i.status.clone(),
                i.created_by().map(str::to_string),
                i.internal_ip().map(str::to_string),
                i.resource_status
                    .as_ref()
                    .and_then(|r| r.scheduling.as_ref())
                    .map(|s| s.termination_timestamp.clone())
                    .filter(|t| !t.is_empty()),
                i.creation_timestamp.clone(),
            ));
        }
    }
    (out, u)
}

/// A page through [`LeanPage::read`], its VMs collected with their zones. Read twice more with a
/// recall (filled, then taken from), it reads the same each time.
fn read(bytes: &[u8]) -> Result<(LeanPage, Vec<(String, LeanVm<'_>)>), String> {
    let mut vms = Vec::new();
    let page = LeanPage::read(bytes, None, |zone, vm| vms.push((zone.to_string(), vm)))?;
    let mut recall = VmRecall::default();
    for _ in 0..2 {
        recall.begin();
        let mut again = Vec::new();
        let p = LeanPage::read(bytes, Some(&mut recall), |zone, vm| again.push((zone.to_string(), vm)))?;
        recall.end();
        assert_eq!(seen(&vms), seen(&again), "read with a recall");
        assert_eq!(format!("{page:?}"), format!("{p:?}"));
    }
    Ok((page, vms))
}

/// What a pass reads of each VM, with its zone.
type Seen = (String, Vec<Option<String>>, Option<String>, Option<String>);
fn seen(vms: &[(String, LeanVm<'_>)]) -> Vec<Seen> {
    let owned = |vm: &LeanVm<'_>| vm.parts().iter().map(|p| p.map(str::to_string)).collect();
    vms.iter()
        .map(|(zone, vm)| (zone.clone(), owned(vm), vm.topology(), vm.internal_ip().map(str::to_string)))
        .collect()
}

/// The same through the lean decoder.
fn lean(page: &Value) -> (Vec<Read>, Unreachable) {
    let bytes = serde_json::to_vec(page).unwrap();
    let (p, vms) = read(&bytes).unwrap();
    let mut u = Unreachable::default();
    p.unreachable_into(&mut u);
    let out = vms
        .iter()
        .map(|(zone, vm)| {
            (
                vm.name.to_string(),
                zone.to_string(),
                vm.status.to_string(),
                vm.created_by().map(str::to_string),
                vm.internal_ip().map(str::to_string),
                vm.termination_timestamp().map(str::to_string),
                vm.creation_timestamp.to_string(),
            )
        })
        .collect();
    (out, u)
}

#[test]
fn a_full_page_reads_as_the_whole_decoder_reads_it() {
    let page = json!({
        "kind": "compute#instanceAggregatedList",
        "id": "projects/p/aggregated/instances",
        "items": {
            "zones/us-central1-a": {"instances": [full_vm("hpc-a3u-0", "us-central1-a", true), full_vm("hpc-a3u-1", "us-central1-a", false)]},
            "zones/us-central1-b": {"instances": [full_vm("hpc-a3u-2", "us-central1-b", true)]},
            "zones/europe-west4-a": {"warning": {"code": "NO_RESULTS_ON_PAGE", "message": "none",
                "data": [{"key": "scope", "value": "zones/europe-west4-a"}]}}
        },
        "nextPageToken": "tok-2",
        "selfLink": "https://compute.googleapis.com/compute/v1/projects/p/aggregated/instances"
    });
    let (vms, u) = lean(&page);
    assert_eq!((vms.clone(), u.clone()), whole(&page));
    assert_eq!(vms.len(), 3);
    let (name, zone, status, mig, ip, term, created) = &vms[0];
    assert_eq!((name.as_str(), zone.as_str(), status.as_str()), ("hpc-a3u-0", "us-central1-a", "RUNNING"));
    assert_eq!(mig.as_deref(), Some("projects/123/regions/us-central1/instanceGroupManagers/hpc-a3u-g7"));
    assert_eq!(ip.as_deref(), Some("10.0.0.7"));
    assert_eq!(term.as_deref(), Some("2026-11-24T11:00:00.000-08:00"));
    assert_eq!(created, "2026-11-24T10:00:00.000-08:00");
    assert_eq!(vms[1].5, None);
    assert!(u.is_empty());
    let bytes = serde_json::to_vec(&page).unwrap();
    assert_eq!(read(&bytes).unwrap().0.next_page_token, "tok-2");
}

#[test]
fn a_partial_response_takes_the_zone_from_the_scope_and_borrows_its_strings() {
    // What `fields=VM_LIST_FIELDS` leaves: no zone (some servers), two metadata items, one NIC.
    let page = json!({
        "items": {
            "zones/us-central1-c": {"instances": [
                {"name": "hpc-a3u-5", "status": "PENDING", "creationTimestamp": "2026-11-24T10:00:00.000Z",
                 "metadata": {"items": [{"key": "created-by", "value": "projects/1/zones/us-central1-c/instanceGroupManagers/m"}]},
                 "networkInterfaces": [{"networkIP": ""}]},
                {"name": "hpc-a3u-6", "status": "STAGING"}
            ]}
        }
    });
    let (vms, u) = lean(&page);
    assert_eq!((vms.clone(), u), whole(&page));
    assert_eq!(vms[0].1, "us-central1-c");
    assert_eq!(vms[0].4, None, "an empty IP is no IP");
    assert_eq!(vms[1].3, None);
    let bytes = serde_json::to_vec(&page).unwrap();
    let (_, vms) = read(&bytes).unwrap();
    let (_, vm) = &vms[0];
    assert!(matches!(vm.name, Cow::Borrowed(_)), "a string without escapes is not copied");
    assert!(vm.created_by().is_some());
}

#[test]
fn escapes_null_values_and_odd_items_decode() {
    let page = json!({
        "items": {
            "zones/us-central1-a": {"instances": [
                {"name": "hpc-a3u-\u{e9}7", "zone": "us-central1-a", "status": "RUNNING",
                 "metadata": {"items": [{"key": "ssh-keys"}, {"key": "created-by", "value": "a/b/\"m\""},
                                        {"key": "created-by", "value": "second"}]},
                 "networkInterfaces": [], "resourceStatus": {}},
                {"name": "hpc-a3u-8", "metadata": null, "networkInterfaces": null, "resourceStatus": {"scheduling": {}}},
                {"name": "hpc-a3u-9", "metadata": {"items": [{"key": "created-by"}, {"key": "created-by", "value": "late"}]}}
            ]}
        }
    });
    let (vms, _) = lean(&page);
    // The whole decoder refuses a null `networkInterfaces`; the lean one reads it as none.
    let mut no_null = page.clone();
    no_null["items"]["zones/us-central1-a"]["instances"][1]["networkInterfaces"] = json!([]);
    assert_eq!(vms, whole(&no_null).0);
    assert_eq!(vms[0].0, "hpc-a3u-\u{e9}7");
    assert_eq!(vms[0].3.as_deref(), Some("a/b/\"m\""), "the first created-by item, unescaped");
    assert_eq!(vms[1].3, None);
    assert_eq!(vms[1].4, None);
    assert_eq!(vms[2].3, None, "the first created-by item counts, as for a whole Instance");
}

/// The value of a metadata item other than `created-by` is skipped unbuilt (a template's startup
/// script can be kilobytes a VM), whatever its shape; `created-by` is found whichever of its key
/// and value comes first.
#[test]
fn other_metadata_values_are_skipped_and_created_by_is_found_either_way_round() {
    let script = serde_json::to_string(&format!("#!/bin/bash\n{}\u{e9}\"", "echo hi; ".repeat(500))).unwrap();
    // Written by hand: `json!` would put every `key` before its `value`.
    let page = format!(
        r#"{{"items": {{"zones/us-central1-a": {{"instances": [
            {{"name": "hpc-a3u-1", "metadata": {{"items": [
                {{"key": "startup-script", "value": {script}}},
                {{"key": "odd", "value": {{"nested": [1, 2]}}}},
                {{"value": "projects/1/zones/us-central1-a/instanceGroupManagers/m1", "key": "created-by"}}
            ]}}}},
            {{"name": "hpc-a3u-2", "metadata": {{"items": [
                {{"key": "created-by", "value": "projects/1/zones/us-central1-a/instanceGroupManagers/m2"}},
                {{"key": "instance-template", "value": "projects/1/global/instanceTemplates/t"}}
            ]}}}}
        ]}}}}}}"#
    );
    let bytes = page.into_bytes();
    let (_, vms) = read(&bytes).unwrap();
    let migs: Vec<Option<&str>> = vms.iter().map(|(_, vm)| vm.created_by()).collect();
    assert_eq!(
        migs,
        [
            Some("projects/1/zones/us-central1-a/instanceGroupManagers/m1"),
            Some("projects/1/zones/us-central1-a/instanceGroupManagers/m2")
        ]
    );
}

#[test]
fn a_partial_success_names_the_zones_left_out() {
    let page = json!({
        "items": {
            "zones/us-central1-a": {"instances": [full_vm("hpc-a3u-0", "us-central1-a", false)]},
            "zones/us-central1-f": {"warning": {"code": "UNREACHABLE", "message": "down",
                "data": [{"key": "scope", "value": "zones/us-central1-f"}]}}
        },
        "unreachables": ["projects/p/zones/us-central1-b"],
        "warning": {"code": "PARTIAL_SUCCESS", "message": "some", "data": [{"key": "scope", "value": "zones/us-central1-c"}]}
    });
    let (vms, u) = lean(&page);
    assert_eq!((vms.clone(), u.clone()), whole(&page));
    assert_eq!(vms.len(), 1);
    let zones: Vec<&str> = u.zones.iter().map(String::as_str).collect();
    assert_eq!(zones, ["us-central1-b", "us-central1-c", "us-central1-f"]);
    assert!(u.unscoped.is_none());
}

#[test]
fn a_malformed_page_is_an_error_that_says_where() {
    let err = read(br#"{"items": {"zones/a": {"instances": [{"name": 5}]}}}"#).unwrap_err();
    assert!(err.contains("line 1"), "{err}");
    assert!(read(b"").is_err());
    assert!(read(b"{} {}").is_err(), "trailing bytes");
    assert!(read(br#"{"items": null}"#).is_err());
    // An empty page (nothing matched the filter) is a page with no VMs.
    let (p, vms) = read(b"{}").unwrap();
    assert_eq!(vms.len(), 0);
    assert!(p.next_page_token.is_empty());
}

#[test]
fn physical_host_topology_reads_as_one_path_and_is_none_without_a_host() {
    let mut placed = full_vm("hpc-a3u-0", "us-central1-a", true);
    placed["resourceStatus"]["physicalHost"] = json!("/b7/s2/h11");
    placed["resourceStatus"]["physicalHostTopology"] =
        json!({"cluster": "us-central1-cluster-a1", "block": "b7", "subblock": "s2", "host": "h11"});
    // GCE leaves out what it does not know (a part is then empty, not a shifted path).
    let mut partial = full_vm("hpc-a3u-1", "us-central1-a", true);
    partial["resourceStatus"]["physicalHostTopology"] = json!({"cluster": "c", "block": "b"});
    let mut empty = full_vm("hpc-a3u-2", "us-central1-a", true);
    empty["resourceStatus"]["physicalHostTopology"] = json!({});
    let none = full_vm("hpc-a3u-3", "us-central1-a", false);
    let page = json!({"items": {"zones/us-central1-a": {"instances": [placed, partial, empty, none]}}});
    let bytes = serde_json::to_vec(&page).unwrap();
    let (_, vms) = read(&bytes).unwrap();
    let got: Vec<Option<String>> = vms.iter().map(|(_, vm)| vm.topology()).collect();
    assert_eq!(
        got,
        [Some("us-central1-cluster-a1/b7/s2/h11".to_string()), Some("c/b//".to_string()), None, None]
    );
}

/// VM `i` of a list: flex or spot, placed or not; VM 7's `created-by` has escapes and VM 8 carries
/// a 70 KB startup script, so neither is noted (each is decoded on every read).
fn list_vm(i: usize, status: &str) -> Value {
    let mut vm = full_vm(&format!("hpc-a3u-{i}"), "us-central1-a", i % 2 == 0);
    vm["status"] = json!(status);
    if i % 3 == 0 {
        vm["resourceStatus"]["physicalHostTopology"] =
            json!({"cluster": "c1", "block": format!("b{i}"), "host": "h"});
    }
    if i == 4 {
        vm["resourceStatus"]["upcomingMaintenance"] = maintenance("2030-01-01T10:00:00Z");
    }
    if i == 7 {
        vm["metadata"]["items"][1]["value"] = json!("a/b/\"m\"");
    }
    if i == 8 {
        vm["metadata"]["items"][0]["value"] = json!("x".repeat(70_000));
    }
    vm
}

/// An `upcomingMaintenance` starting at `start`.
fn maintenance(start: &str) -> Value {
    json!({"type": "SCHEDULED", "windowStartTime": start, "windowEndTime": "2030-01-01T11:00:00Z",
           "canReschedule": true, "maintenanceStatus": "PENDING", "maintenanceReasons": ["FAILURE_GPU_XID"]})
}

/// The list of `vms` as pages of `per_page` VMs.
fn pages(vms: &[Value], per_page: usize) -> Vec<Vec<u8>> {
    let chunks: Vec<&[Value]> = vms.chunks(per_page).collect();
    if chunks.is_empty() {
        return vec![b"{}".to_vec()];
    }
    let last = chunks.len() - 1;
    chunks
        .iter()
        .enumerate()
        .map(|(k, chunk)| {
            let mut page = json!({"items": {"zones/us-central1-a": {"instances": chunk}}});
            if k < last {
                page["nextPageToken"] = json!(format!("p{}", k + 1));
            }
            serde_json::to_vec(&page).unwrap()
        })
        .collect()
}

/// What a pass reads of every VM of the list, its pages read in turn.
fn read_list(pages: &[Vec<u8>], mut recall: Option<&mut VmRecall>) -> Vec<Seen> {
    if let Some(r) = recall.as_deref_mut() {
        r.begin();
    }
    let mut out = Vec::new();
    for page in pages {
        let mut vms = Vec::new();
        LeanPage::read(page, recall.as_deref_mut(), |zone, vm| vms.push((zone.to_string(), vm))).unwrap();
        out.extend(seen(&vms));
    }
    if let Some(r) = recall {
        r.end();
    }
    out
}

/// A list read again with the recall of its last read: at each step the list changes, and the read
/// with the recall finds what a fresh read finds, taking as they were exactly the VMs unchanged at
/// their position (never VM 7 or 8, which are not noted).
#[test]
fn a_list_read_with_its_recall_reads_as_a_fresh_read() {
    let list = |n: usize| (0..n).map(|i| list_vm(i, "RUNNING")).collect::<Vec<_>>();
    type Change = fn(&mut Vec<Value>);
    let steps: [(&str, Change, usize); 11] = [
        ("unchanged", |_| {}, 10),
        ("one VM changed in place at the same length", |l| l[5]["status"] = json!("STOPPED"), 9),
        ("one VM longer: the VMs after it are at their places", |l| l[5]["status"] = json!("TERMINATED"), 9),
        ("the IP of a VM", |l| l[2]["networkInterfaces"][0]["networkIP"] = json!("10.0.0.99"), 9),
        (
            "a maintenance announced",
            |l| l[1]["resourceStatus"]["upcomingMaintenance"] = maintenance("2030-01-02T00:00:00Z"),
            9,
        ),
        (
            "a maintenance moved",
            |l| l[1]["resourceStatus"]["upcomingMaintenance"] = maintenance("2030-01-03T00:00:00Z"),
            9,
        ),
        ("one VM gone: every VM after it moves", |l| drop(l.remove(3)), 3),
        ("one VM more, at the end", |l| l.push(list_vm(12, "RUNNING")), 9),
        ("fewer pages", |l| l.truncate(5), 5),
        ("no VM at all", |l| l.clear(), 0),
        ("every VM again: nothing recalled", |l| *l = (0..12).map(|i| list_vm(i, "RUNNING")).collect(), 0),
    ];
    let mut recall = VmRecall::default();
    let mut vms = list(12);
    assert_eq!(read_list(&pages(&vms, 4), Some(&mut recall)), read_list(&pages(&vms, 4), None));
    assert_eq!(recall.taken(), 0, "a first read takes nothing");
    for (step, change, taken) in steps {
        change(&mut vms);
        let pages = pages(&vms, 4);
        let fresh = read_list(&pages, None);
        assert_eq!(read_list(&pages, Some(&mut recall)), fresh, "{step}");
        assert_eq!(recall.taken(), taken, "{step}");
        assert_eq!(fresh.len(), vms.len(), "{step}");
    }
}

/// A page that fails to read in the middle of a list leaves the recall to be forgotten; the next
/// read takes nothing and reads as a fresh one.
#[test]
fn a_failed_read_is_forgotten() {
    let vms: Vec<Value> = (0..6).map(|i| list_vm(i, "RUNNING")).collect();
    let good = pages(&vms, 3);
    let mut recall = VmRecall::default();
    read_list(&good, Some(&mut recall));
    recall.begin();
    LeanPage::read(&good[0], Some(&mut recall), |_, _| {}).unwrap();
    let cut = &good[1][..good[1].len() / 2];
    let err = LeanPage::read(cut, Some(&mut recall), |_, _| {}).unwrap_err();
    assert!(err.contains("ends too early"), "{err}");
    recall.forget();
    assert_eq!(read_list(&good, Some(&mut recall)), read_list(&good, None));
    assert_eq!(recall.taken(), 0);
    read_list(&good, Some(&mut recall));
    assert_eq!(recall.taken(), 6);
}

/// `LeanVm::from_parts` reads as the VM its parts were taken from.
#[test]
fn a_vm_from_its_parts_reads_as_the_vm() {
    let mut odd = list_vm(3, "RUNNING");
    odd["networkInterfaces"] = json!([{"networkIP": ""}]);
    odd["resourceStatus"]["physicalHostTopology"] = json!({});
    let bare = json!({"name": "hpc-a3u-9"});
    for vm in [
        list_vm(0, "RUNNING"),
        list_vm(1, "STAGING"),
        list_vm(3, "RUNNING"),
        list_vm(4, "RUNNING"),
        odd,
        bare,
    ] {
        let bytes = serde_json::to_vec(&vm).unwrap();
        let decoded: LeanVm<'_> = serde_json::from_slice(&bytes).unwrap();
        let parts = decoded.parts();
        let made = LeanVm::from_parts(parts);
        assert_eq!(made.parts(), parts);
        assert_eq!((made.created_by(), made.internal_ip()), (decoded.created_by(), decoded.internal_ip()));
        assert_eq!(
            (made.topology(), made.termination_timestamp()),
            (decoded.topology(), decoded.termination_timestamp())
        );
        assert_eq!(made.upcoming_maintenance(), decoded.upcoming_maintenance());
    }
}

/// A VM's `upcomingMaintenance` is kept as GCE's text, borrowed from the page, and reads as the
/// model's `Maintenance`; a VM without one has none.
#[test]
fn an_upcoming_maintenance_is_kept_as_its_text() {
    let bytes = serde_json::to_vec(&list_vm(4, "RUNNING")).unwrap();
    let vm: LeanVm<'_> = serde_json::from_slice(&bytes).unwrap();
    let text = vm.upcoming_maintenance().expect("VM 4 has one");
    let at = text.as_ptr() as usize - bytes.as_ptr() as usize;
    assert!(at + text.len() <= bytes.len(), "borrowed from the page, not copied");
    let m: crate::model::Maintenance = serde_json::from_str(text).unwrap();
    assert_eq!(m.kind, "SCHEDULED");
    assert_eq!(m.window_start_time.map(|t| t.to_rfc3339()), Some("2030-01-01T10:00:00+00:00".into()));
    assert_eq!(m.maintenance_reasons, vec!["FAILURE_GPU_XID".to_string()]);
    assert!(m.can_reschedule);
    let bytes = serde_json::to_vec(&list_vm(0, "RUNNING")).unwrap();
    let vm: LeanVm<'_> = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(vm.upcoming_maintenance(), None);
}

/// The VM's `id` (the usage spans tell two VMs of one name apart by it) is read, fresh and through
/// the recall alike (`read` checks the recalled reads equal the fresh one).
#[test]
fn the_vm_id_is_read() {
    let page = json!({"items": {"zones/us-central1-a": {"instances": [
        full_vm("hpc-a3u-0", "us-central1-a", true),
        {"name": "hpc-a3u-1", "status": "RUNNING"}
    ]}}});
    let bytes = serde_json::to_vec(&page).unwrap();
    let (_, vms) = read(&bytes).unwrap();
    assert_eq!(vms[0].1.id, "4471829301");
    assert_eq!(vms[1].1.id, "", "no id: empty (the pass records no span for it)");
}
