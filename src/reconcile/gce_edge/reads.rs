//! What a pass reads from GCE: the VM list, the MIG lists of every region in use, and a `get` of
//! each resize request the poll schedule says is due (`poll.rs`), each into the planner's
//! observations. Every read asks only for the fields a pass uses (`fields=`, docs/gce-facts.md
//! "Partial responses"); a region or zone that does not answer is failed, never empty.

use crate::config::Config;
use crate::gce::{self, ErrorClass, GceError, Location};
use crate::model::{GceRequestState, VmStatus};
use crate::naming::Naming;
use crate::reconcile::types::*;
use std::collections::BTreeMap;

/// The fields of a VM a pass reads from `instances.aggregatedList`, with the scopes' `warning` and the
/// list's `unreachables` (so a partial list can be told from a complete one) and the page token.
pub const VM_LIST_FIELDS: &str = "items/*/instances(name,id,zone,status,creationTimestamp,metadata/items,\
networkInterfaces/networkIP,resourceStatus/scheduling/terminationTimestamp,\
resourceStatus/physicalHostTopology,resourceStatus/upcomingMaintenance,scheduling/provisioningModel),items/*/warning,\
nextPageToken,unreachables,warning";
/// The fields of a MIG a pass reads from `regionInstanceGroupManagers.list`.
pub const MIG_LIST_FIELDS: &str =
    "items(name,description,targetSize,creationTimestamp,resourcePolicies),nextPageToken,warning";
/// The fields of a resize request a poll reads.
pub const REQUEST_FIELDS: &str = "name,state,status,instances/name,requestedRunDuration";

/// The region of MIG `mig`: the one its record names (`recorded`), else its nodeset's (the longest
/// configured nodeset whose `{cluster}-{nodeset}-` prefix it has), else `gcp.region`.
pub fn mig_region(cfg: &Config, recorded: Option<&str>, mig: &str) -> String {
    if let Some(r) = recorded.filter(|r| !r.is_empty()) {
        return r.to_string();
    }
    cfg.nodesets
        .iter()
        .filter(|n| mig.starts_with(&format!("{}-{}-", cfg.cluster_name, n.name)))
        .max_by_key(|n| n.name.len())
        .map_or_else(|| cfg.gcp.region.clone(), |n| n.region.clone())
}

/// The regions a pass lists MIGs in: `gcp.region`, every nodeset's, and every region a MIG on
/// record is in (a nodeset removed from the config, or moved, leaves MIGs there to collect).
pub fn mig_list_regions(cfg: &Config, desired: &Desired) -> std::collections::BTreeSet<String> {
    let mut regions: std::collections::BTreeSet<String> =
        cfg.nodesets.iter().map(|n| n.region.clone()).collect();
    regions.insert(cfg.gcp.region.clone());
    regions.extend(desired.migs.values().filter(|m| !m.region.is_empty()).map(|m| m.region.clone()));
    regions
}

/// The MIG lists of several regions: the owned MIGs of the regions that answered, the region each
/// is in, and the regions whose list failed (with why).
#[derive(Debug, Default)]
pub struct MigLists {
    pub migs: BTreeMap<String, ObservedMig>,
    pub regions: BTreeMap<String, String>,
    pub failed: BTreeMap<String, GceError>,
    /// The regions whose list answered (possibly with no MIG of ours).
    pub listed: std::collections::BTreeSet<String>,
}

/// Every VM whose name starts with `{cluster}-`, in one paginated aggregated list, and the zones
/// the answer left out (a partial success: their VMs are unknown, not gone). `recall` is the list as
/// the last pass read it (taken for the read and put back after it, so no lock is held while it
/// waits for GCE).
pub async fn observe_vms(
    client: &gce::Client,
    cfg: &Config,
    recall: &std::sync::Mutex<gce::VmRecall>,
) -> Result<(BTreeMap<String, ObservedVm>, gce::Unreachable), GceError> {
    let filter = format!("name eq '{}-.*'", cfg.cluster_name);
    let prefix = format!("{}-", cfg.cluster_name);
    if !crate::reconcile::bench_baseline() {
        let lock = || recall.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut kept = std::mem::take(&mut *lock());
        // Collected, then built into the map at once: the list comes in name order within each zone,
        // and a map filled by inserts in order leaves its nodes half full (and each insert searches
        // it). Room for as many as the last list had.
        let mut vms = Vec::with_capacity(kept.len());
        let listed = client
            .aggregated_list_vms_lean(Some(&filter), Some(VM_LIST_FIELDS), Some(&mut kept), |zone, i| {
                if i.name.starts_with(&prefix) {
                    let vm = ObservedVm {
                        mig: i.created_by().map(|u| gce::last_segment(u).to_string()),
                        created: gce::parse_timestamp(&i.creation_timestamp),
                        id: i.id.parse().ok(),
                        termination: i.termination_timestamp().and_then(gce::parse_timestamp),
                        network_ip: i.internal_ip().map(str::to_string),
                        topology: i.topology(),
                        reservation_bound: i.provisioning_model() == Some("RESERVATION_BOUND"),
                        maintenance: i.upcoming_maintenance().and_then(|m| maintenance(&i.name, m)),
                        zone: zone.to_string(),
                        name: i.name.to_string(),
                        status: VmStatus::from(i.status.as_ref()),
                    };
                    vms.push((i.name.to_string(), vm));
                }
            })
            .await;
        *lock() = kept;
        // A VM handed twice (a retried page) is kept once, the last as with inserts.
        return Ok((vms.into_iter().collect(), listed?));
    }
    // `SLURM_DWS_BENCH_BASELINE=1` (make bench's same-run baseline): whole `Instance`s, as before.
    let mut vms = BTreeMap::new();
    let unreachable = client
        .aggregated_list_instances_fields(Some(&filter), Some(VM_LIST_FIELDS), |i| {
            if i.name.starts_with(&prefix) {
                let vm = ObservedVm {
                    mig: i.created_by().map(|u| gce::last_segment(u).to_string()),
                    created: i.created_at(),
                    id: i.id.parse().ok(),
                    termination: i.termination_time(),
                    network_ip: i.internal_ip().map(str::to_string),
                    topology: None,
                    reservation_bound: i
                        .scheduling
                        .as_ref()
                        .is_some_and(|s| s.provisioning_model == "RESERVATION_BOUND"),
                    maintenance: None,
                    zone: gce::last_segment(&i.zone).to_string(),
                    name: i.name.clone(),
                    status: VmStatus::from(i.status),
                };
                vms.insert(i.name, vm);
            }
        })
        .await?;
    Ok((vms, unreachable))
}

/// A VM's `upcomingMaintenance` decoded from its JSON text (only a VM that has one pays for it); one
/// GCE wrote in a shape slurm-dws cannot read is logged and taken as none.
fn maintenance(vm: &str, json: &str) -> Option<Box<crate::model::Maintenance>> {
    match serde_json::from_str(json) {
        Ok(m) => Some(Box::new(m)),
        Err(e) => {
            tracing::warn!(vm, error = %e, upcoming_maintenance = json, "unreadable upcomingMaintenance: ignored");
            None
        }
    }
}

/// The MIGs of every region in `regions` that are provably ours, one paginated list per region, the
/// regions listed at once: a region that fails is named in [`MigLists::failed`] and does not hide
/// the others' MIGs.
pub async fn observe_migs_in(
    client: &gce::Client,
    cfg: &Config,
    naming: &Naming,
    regions: &std::collections::BTreeSet<String>,
) -> MigLists {
    let shared = std::sync::Arc::new((cfg.clone(), naming.clone()));
    let (listed, failed) = per_region(regions, "regionInstanceGroupManagers.list", |region| {
        let (client, shared) = (client.clone(), shared.clone());
        async move { observe_migs(&client, &shared.0, &shared.1, &region).await }
    })
    .await;
    let mut out = MigLists { failed, ..MigLists::default() };
    for (region, migs) in listed {
        for (name, m) in migs {
            out.regions.insert(name.clone(), region.clone());
            out.migs.insert(name, m);
        }
        out.listed.insert(region);
    }
    out
}

/// Runs the list `list(region)` of every region in `regions` at once; returns each region's answer
/// and each region's error. A list that never answered (its task panicked) is a failed list, never
/// an empty one: a `Transport` error naming `method`.
pub(super) async fn per_region<T, F, Fut>(
    regions: &std::collections::BTreeSet<String>,
    method: &str,
    list: F,
) -> (BTreeMap<String, T>, BTreeMap<String, GceError>)
where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = Result<T, GceError>> + Send + 'static,
    T: Send + 'static,
{
    let mut lists = tokio::task::JoinSet::new();
    for region in regions {
        let (answer, region) = (list(region.clone()), region.clone());
        lists.spawn(async move { (region, answer.await) });
    }
    let (mut listed, mut failed) = (BTreeMap::new(), BTreeMap::new());
    while let Some(joined) = lists.join_next().await {
        let Ok((region, answer)) = joined else { continue };
        match answer {
            Ok(v) => {
                listed.insert(region, v);
            }
            Err(e) => {
                failed.insert(region, e);
            }
        }
    }
    for region in regions {
        if !failed.contains_key(region) && !listed.contains_key(region) {
            failed.insert(
                region.clone(),
                GceError::Transport {
                    method: method.into(),
                    path: format!("regions/{region}"),
                    message: "the list did not finish".into(),
                    timeout: false,
                },
            );
        }
    }
    (listed, failed)
}

/// The MIGs of `region` that are provably ours (name prefix AND ownership description).
pub async fn observe_migs(
    client: &gce::Client,
    cfg: &Config,
    naming: &Naming,
    region: &str,
) -> Result<BTreeMap<String, ObservedMig>, GceError> {
    let filter = format!("name eq '{}-.*'", cfg.cluster_name);
    let loc = Location::Region(region.to_string());
    let migs = client.list_migs_fields(&loc, Some(&filter), Some(MIG_LIST_FIELDS)).await?;
    Ok(migs
        .into_iter()
        .filter_map(|m| {
            let owned = naming.parse_ownership(&m.name, &m.description)?;
            Some((
                m.name.clone(),
                ObservedMig {
                    name: m.name.clone(),
                    nodeset: owned.nodeset,
                    tag: owned.tag,
                    job_id: owned.job,
                    target_size: m.target_size.unwrap_or(0).max(0) as u32,
                    created: gce::parse_timestamp(&m.creation_timestamp),
                    workload_policy: m
                        .resource_policies
                        .as_ref()
                        .map(|p| gce::last_segment(&p.workload_policy).to_string())
                        .filter(|p| !p.is_empty()),
                },
            ))
        })
        .collect())
}

/// GCE's state of a resize request in the reconciler's terms. A state the client does not know (or
/// none at all) is kept as `UNKNOWN`, the name the client gives it.
pub fn request_state(state: Option<gce::ResizeRequestState>) -> GceRequestState {
    use gce::ResizeRequestState as S;
    match state {
        Some(S::Creating) => GceRequestState::Creating,
        Some(S::Accepted) => GceRequestState::Accepted,
        Some(S::Succeeded) => GceRequestState::Succeeded,
        Some(S::Failed) => GceRequestState::Failed,
        Some(S::Cancelled) => GceRequestState::Cancelled,
        Some(S::StateUnspecified) => GceRequestState::Other("STATE_UNSPECIFIED".into()),
        Some(S::Unknown) | None => GceRequestState::Other("UNKNOWN".into()),
    }
}

/// One resize request as a `get` finds it; for a MIG of a standard or spot nodeset, how the creation
/// of its VMs stands (`vm_create.rs`).
/// `region` is the MIG's ([`mig_region`]).
pub async fn observe_request(
    client: &gce::Client,
    cfg: &Config,
    region: &str,
    mig: &str,
    name: &str,
) -> Result<PolledRequest, GceError> {
    let loc = Location::Region(region.to_string());
    if !super::vm_create::mig_model(cfg, mig).uses_resize_requests() {
        return super::vm_create::observe_created(client, &loc, mig).await;
    }
    match client.get_resize_request_fields(&loc, mig, name, Some(REQUEST_FIELDS)).await {
        Ok(rr) => {
            let errors = rr.errors();
            let error = errors.first().map(|e| (e.code.clone(), e.message.clone()));
            let class = (!errors.is_empty()).then(|| gce::classify_errors(errors));
            let last_attempt = rr.last_attempt_errors().first().map(|e| format!("{}: {}", e.code, e.message));
            Ok(PolledRequest::Found(ObservedRequest {
                state: request_state(rr.state),
                error,
                capacity_error: matches!(class, Some(ErrorClass::Capacity | ErrorClass::Quota)),
                last_attempt,
                instances: rr.instances.iter().map(|i| i.name.clone()).collect(),
                run_duration: rr.requested_run_duration.as_ref().map(|d| d.seconds.max(0) as u64),
            }))
        }
        Err(e) if e.is_not_found() => Ok(PolledRequest::NotFound),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each region's answer or error; a region whose list never answers (its task panicked) is
    /// failed, never listed empty.
    #[tokio::test]
    async fn a_region_whose_list_never_answers_is_failed() {
        let regions: std::collections::BTreeSet<String> =
            ["us-central1", "europe-west4", "asia-east1"].map(String::from).into();
        let (listed, failed) = per_region(&regions, "x.list", |region| async move {
            match region.as_str() {
                "us-central1" => Ok(vec![region.clone()]),
                "europe-west4" => Err(GceError::Transport {
                    method: "x.list".into(),
                    path: format!("regions/{region}"),
                    message: "refused".into(),
                    timeout: false,
                }),
                _ => panic!("the list of {region} panics"),
            }
        })
        .await;
        assert_eq!(
            listed.into_iter().collect::<Vec<_>>(),
            [("us-central1".to_string(), vec!["us-central1".to_string()])]
        );
        let failed: Vec<(String, String)> = failed.into_iter().map(|(r, e)| (r, e.to_string())).collect();
        assert_eq!(failed.len(), 2, "{failed:?}");
        assert!(failed[0].0 == "asia-east1" && failed[0].1.contains("did not finish"), "{failed:?}");
        assert!(failed[1].0 == "europe-west4" && failed[1].1.contains("refused"), "{failed:?}");
    }
}
