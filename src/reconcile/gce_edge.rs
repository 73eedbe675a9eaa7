//! The reconciler's edge to GCE: observations in, planner steps out, through the typed client.
//!
//! Observation per pass is bounded, whatever the cluster size: one paginated `regionInstanceGroupManagers
//! .list`, one paginated `instances.aggregatedList` (500 a page), and a `resizeRequests.get` of each
//! request the poll schedule says is due (`poll.rs`). Finished requests are never polled again. Every
//! read asks only for the fields a pass uses (`fields=`, docs/gce-facts.md "Partial responses"). The
//! request bodies follow docs/gce-facts.md ("Resize requests", "MIGs").
//!
//! Nothing here holds a pass longer than about `gcp.request_timeout` ([`step_budget`]): the reconciler's
//! client ends each call, retries included, within it, and [`send`] waits for a step's Operation only
//! until then. An Operation still running is carried to the next pass, which resends the same
//! `requestId` (GCE answers with the same Operation) or sees the result in its lists.

use super::error::ReconcileError;
use super::types::*;
use crate::config::Config;
use crate::gce::{self, ErrorClass, GceError, Location};
use crate::model::{GceRequestState, MutationKind, OutboxEntry, Request, VmStatus};
use crate::naming::Naming;
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::time::Instant;

/// The fields of a VM a pass reads from `instances.aggregatedList`, with the scopes' `warning` and the
/// list's `unreachables` (so a partial list can be told from a complete one) and the page token.
pub const VM_LIST_FIELDS: &str = "items/*/instances(name,zone,status,creationTimestamp,metadata/items,\
networkInterfaces/networkIP,resourceStatus/scheduling/terminationTimestamp,\
resourceStatus/physicalHostTopology),items/*/warning,\
nextPageToken,unreachables,warning";
/// The fields of a MIG a pass reads from `regionInstanceGroupManagers.list`.
pub const MIG_LIST_FIELDS: &str =
    "items(name,description,targetSize,creationTimestamp,resourcePolicies),nextPageToken,warning";
/// The fields of a resize request a poll reads.
pub const REQUEST_FIELDS: &str = "name,state,status,instances/name,requestedRunDuration";

/// The most one GCE call (its retries included) or one step (its call and the wait for its Operation)
/// may hold a pass: `gcp.request_timeout`. GCE's operations for our calls finish in seconds; one still
/// running after this is left to GCE: the step is carried (its outbox entry stays pending with the
/// same requestId), and the next pass resends it or looks at the resource itself (a MIG or resize
/// request exists from its insert on, so the pass after goes on with the next step). A longer wait
/// would hold every other step of the daemon — suspends, expiries, other nodesets — behind one stuck
/// call or operation (`tests/gce_faults.rs`, `tests/bounded_passes.rs`).
pub fn step_budget(cfg: &Config) -> Duration {
    Duration::from_secs(cfg.gcp.request_timeout.max(1))
}

/// Why a step could not be carried out.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// The request group the step is for is not in the desired state any more.
    #[error("request vanished")]
    RequestVanished,
    /// The step cannot be described from the config (its nodeset was removed).
    #[error("{0}")]
    Config(ReconcileError),
    /// GCE refused it, did not answer, or its Operation failed or outlived the deadline.
    #[error(transparent)]
    Gce(#[from] GceError),
    /// A create answered "already exists", and what GCE has under that name is not what slurm-dws
    /// meant to create: the differences.
    #[error("{0}")]
    Mismatch(String),
}

/// The client for the configured endpoint and credentials.
pub fn client(cfg: &Config) -> Result<gce::Client, GceError> {
    let opts = gce::ClientOptions {
        endpoint: cfg.gcp.endpoint.clone(),
        project: cfg.gcp.project.clone(),
        calls_per_minute: cfg.gcp.calls_per_minute,
        reads_per_minute: cfg.gcp.read_calls_per_minute,
        writes_per_minute: cfg.gcp.write_calls_per_minute,
        request_timeout: Duration::from_secs(cfg.gcp.request_timeout),
        retry_deadline: Duration::from_secs(cfg.gcp.retry_deadline),
    };
    gce::Client::new(opts, cfg.gcp.credentials.clone())
}

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
    if !super::observe::bench_baseline() {
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
                        termination: i.termination_timestamp().and_then(gce::parse_timestamp),
                        network_ip: i.internal_ip().map(str::to_string),
                        topology: i.topology(),
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
                    termination: i.termination_time(),
                    network_ip: i.internal_ip().map(str::to_string),
                    topology: None,
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
    if !super::vm_create::mig_model(cfg, mig).is_flex() {
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

/// The region of the MIG a step acts on: its record's, else its nodeset's ([`mig_region`]).
pub fn step_region(cfg: &Config, desired: &Desired, step: &GceStep) -> String {
    if let GceStep::InsertPolicy { region, .. } | GceStep::DeletePolicy { region, .. } = step {
        return region.clone();
    }
    let mig = step.mig();
    mig_region(cfg, desired.migs.get(mig).map(|m| m.region.as_str()), mig)
}

/// The outbox record for a step: (kind, target, payload). The payload is the request body (or the
/// instance names), so `explain` and a post-mortem can see exactly what was sent.
pub fn intent(
    step: &GceStep,
    desired: &Desired,
    cfg: &Config,
    naming: &Naming,
) -> Result<(MutationKind, String, serde_json::Value), ReconcileError> {
    let request = |id: &i64| desired.requests.get(id).ok_or(ReconcileError::RequestVanished(*id));
    Ok(match step {
        GceStep::InsertMig { request: id, mig, .. } => {
            let r = request(id)?;
            (MutationKind::MigInsert, mig.clone(), serde_json::to_value(mig_body(cfg, naming, r)?)?)
        }
        GceStep::InsertResizeRequest { request: id, mig } => {
            let r = request(id)?;
            (
                MutationKind::ResizeRequestInsert,
                format!("{mig}/{}", r.name),
                serde_json::to_value(rr_body(r))?,
            )
        }
        GceStep::CreateInstances { request: id, mig } => {
            let r = request(id)?;
            (
                MutationKind::CreateInstances,
                format!("{mig}:{}", crate::hostlist::compress(&r.nodes)),
                serde_json::to_value(super::vm_create::create_body(r))?,
            )
        }
        GceStep::CancelResizeRequest { request, mig } => {
            let name = desired.requests.get(request).map(|r| r.name.clone()).unwrap_or_default();
            (MutationKind::ResizeRequestCancel, format!("{mig}/{name}"), serde_json::json!({}))
        }
        GceStep::DeleteInstances { mig, instances } => (
            MutationKind::DeleteInstances,
            format!(
                "{mig}:{}",
                crate::hostlist::compress(&instances.iter().map(|i| i.name.as_str()).collect::<Vec<_>>())
            ),
            serde_json::json!({ "instances": instances.iter().map(VmRef::url).collect::<Vec<_>>() }),
        ),
        GceStep::DeleteMig { mig, reason } => {
            (MutationKind::MigDelete, mig.clone(), serde_json::json!({ "reason": reason }))
        }
        GceStep::InsertPolicy { policy, nodeset, .. } => {
            let ns = cfg.nodeset(nodeset).ok_or_else(|| ReconcileError::NodesetGone(nodeset.clone()))?;
            let body = super::policies::policy_body(cfg, ns)
                .ok_or_else(|| ReconcileError::NodesetGone(nodeset.clone()))?;
            (MutationKind::PolicyInsert, policy.clone(), serde_json::to_value(body)?)
        }
        GceStep::DeletePolicy { policy, reason, .. } => {
            (MutationKind::PolicyDelete, policy.clone(), serde_json::json!({ "reason": reason }))
        }
    })
}

/// The regional MIG of a request group (docs/gce-facts.md, "MIGs"): empty, one zone, no repair,
/// ownership in the description.
pub fn mig_body(
    cfg: &Config,
    naming: &Naming,
    r: &Request,
) -> Result<gce::InstanceGroupManager, ReconcileError> {
    let ns = cfg
        .nodesets
        .iter()
        .find(|n| n.name == r.nodeset)
        .ok_or_else(|| ReconcileError::NodesetGone(r.nodeset.clone()))?;
    Ok(gce::InstanceGroupManager {
        name: r.mig.clone(),
        description: naming.ownership_description(&r.nodeset, &r.tag, r.job_id),
        base_instance_name: r.mig.clone(),
        versions: vec![gce::InstanceGroupManagerVersion {
            instance_template: ns.instance_template.clone(),
            ..Default::default()
        }],
        target_size: Some(0),
        instance_lifecycle_policy: Some(gce::InstanceLifecyclePolicy {
            default_action_on_failure: "DO_NOTHING".into(),
        }),
        distribution_policy: Some(gce::DistributionPolicy {
            // The zone(s) capacity advice chose, else every zone of the nodeset.
            zones: r
                .zone_choice
                .as_ref()
                .map_or(ns.zones.as_slice(), |c| c.zones.as_slice())
                .iter()
                .map(|z| gce::DistributionPolicyZone { zone: format!("zones/{z}") })
                .collect(),
            target_shape: "ANY_SINGLE_ZONE".into(),
        }),
        update_policy: Some(gce::UpdatePolicy { instance_redistribution_type: "NONE".into() }),
        resource_policies: super::policies::policy_url(cfg, ns)
            .map(|workload_policy| gce::InstanceGroupManagerResourcePolicies { workload_policy }),
        ..Default::default()
    })
}

/// What differs between the MIG GCE holds under our name and the one slurm-dws meant to create
/// (`None`: it is ours, as meant). A create answered 409 "already exists" is Done only when this is
/// `None`: the ownership line (cluster, nodeset, tag, job) and the template must be ours.
pub fn mig_mismatch(meant: &gce::InstanceGroupManager, found: &gce::InstanceGroupManager) -> Option<String> {
    let mut diffs = Vec::new();
    if found.description != meant.description {
        diffs.push(format!("description is '{}', not '{}'", found.description, meant.description));
    }
    let template = |m: &gce::InstanceGroupManager| {
        m.versions.first().map(|v| template_key(&v.instance_template)).unwrap_or_default()
    };
    if template(found) != template(meant) {
        diffs.push(format!("its template is '{}', not '{}'", template(found), template(meant)));
    }
    (!diffs.is_empty()).then(|| {
        format!(
            "MIG {} already exists and is not the one slurm-dws meant to create: {}",
            meant.name,
            diffs.join("; ")
        )
    })
}

/// A template reference without its scheme and host, so that a full URL and a partial one compare
/// equal: `projects/p/regions/r/instanceTemplates/t` (or `global/...`).
fn template_key(t: &str) -> String {
    match t.find("projects/") {
        Some(i) => t[i..].to_string(),
        None => t.to_string(),
    }
}

/// What differs between the resize request GCE holds under our name and the one slurm-dws meant to
/// create (`None`: the same instances and run duration). A create answered 409 is Done only then.
pub fn rr_mismatch(
    meant: &gce::InstanceGroupManagerResizeRequest,
    found: &gce::InstanceGroupManagerResizeRequest,
) -> Option<String> {
    let names = |r: &gce::InstanceGroupManagerResizeRequest| {
        let mut v: Vec<String> = r.instances.iter().map(|i| i.name.clone()).collect();
        v.sort();
        v
    };
    let seconds =
        |r: &gce::InstanceGroupManagerResizeRequest| r.requested_run_duration.as_ref().map(|d| d.seconds);
    let mut diffs = Vec::new();
    if names(found) != names(meant) {
        diffs.push(format!(
            "it asks for {}, not {}",
            crate::hostlist::compress(&names(found)),
            crate::hostlist::compress(&names(meant))
        ));
    }
    if seconds(found) != seconds(meant) {
        let s = |v: Option<i64>| v.map_or("none".to_string(), |s| format!("{s}s"));
        diffs.push(format!("its run duration is {}, not {}", s(seconds(found)), s(seconds(meant))));
    }
    (!diffs.is_empty()).then(|| {
        format!(
            "resize request {} already exists and is not the one slurm-dws meant to create: {}",
            meant.name,
            diffs.join("; ")
        )
    })
}

/// The resize request of a group: exactly its node names, for its run duration.
pub fn rr_body(r: &Request) -> gce::InstanceGroupManagerResizeRequest {
    gce::InstanceGroupManagerResizeRequest::for_instances(
        &r.name,
        format!(
            "slurm-dws request group {} (job {})",
            r.id,
            r.job_id.map_or("none".into(), |j| j.to_string())
        ),
        r.nodes.iter().cloned(),
        r.run_duration as i64,
    )
}

/// Sends one step with its outbox requestId and waits for its Operation, all within [`step_budget`]:
/// an Operation still running then is [`GceError::OperationTimeout`] (the step is carried to the next
/// pass). `request` is the step's request group, for the steps that have one; `region` is the
/// step's MIG's ([`step_region`]).
#[allow(clippy::too_many_arguments)]
pub async fn send(
    client: &gce::Client,
    cfg: &Config,
    naming: &Naming,
    step: &GceStep,
    request: Option<&Request>,
    region: &str,
    entry: &OutboxEntry,
) -> Result<(), SendError> {
    let deadline = Instant::now() + step_budget(cfg);
    let loc = Location::Region(region.to_string());
    let rid = entry.request_id.as_str();
    let op = match step {
        GceStep::InsertMig { .. } => {
            let r = request.ok_or(SendError::RequestVanished)?;
            let body = mig_body(cfg, naming, r).map_err(SendError::Config)?;
            let sent = match client.insert_mig(&loc, &body, rid).await {
                Ok(op) => client.wait_done(&op, deadline).await?.into_result(),
                Err(e) => Err(e),
            };
            return match sent {
                Err(e) if e.class() == ErrorClass::AlreadyExists => {
                    let found = client.get_mig(&loc, &body.name).await?;
                    mig_mismatch(&body, &found).map_or(Ok(()), |d| Err(SendError::Mismatch(d)))
                }
                other => other.map(|_| ()).map_err(SendError::from),
            };
        }
        GceStep::InsertResizeRequest { mig, .. } => {
            let r = request.ok_or(SendError::RequestVanished)?;
            let body = rr_body(r);
            let sent = match client.insert_resize_request(&loc, mig, &body, rid).await {
                Ok(op) => client.wait_done(&op, deadline).await?.into_result(),
                Err(e) => Err(e),
            };
            return match sent {
                Err(e) if e.class() == ErrorClass::AlreadyExists => {
                    let found = client.get_resize_request(&loc, mig, &body.name).await?;
                    rr_mismatch(&body, &found).map_or(Ok(()), |d| Err(SendError::Mismatch(d)))
                }
                other => other.map(|_| ()).map_err(SendError::from),
            };
        }
        GceStep::CreateInstances { mig, .. } => {
            let r = request.ok_or(SendError::RequestVanished)?;
            client.create_instances(&loc, mig, &super::vm_create::create_body(r), rid).await?
        }
        GceStep::CancelResizeRequest { mig, .. } => {
            // No request on record: nothing of ours to cancel.
            let Some(r) = request else { return Ok(()) };
            client.cancel_resize_request(&loc, mig, &r.name, rid).await?
        }
        GceStep::DeleteInstances { mig, instances } => {
            // A regional MIG takes instance URLs only: a bare name fails the whole Operation.
            let urls: Vec<String> = instances.iter().map(VmRef::url).collect();
            client.delete_instances(&loc, mig, &urls, rid).await?
        }
        GceStep::DeleteMig { mig, .. } => client.delete_mig(&loc, mig, rid).await?,
        GceStep::InsertPolicy { nodeset, .. } => {
            let body = cfg
                .nodeset(nodeset)
                .and_then(|ns| super::policies::policy_body(cfg, ns))
                .ok_or_else(|| SendError::Config(ReconcileError::NodesetGone(nodeset.clone())))?;
            let sent = match client.insert_policy(region, &body, rid).await {
                Ok(op) => client.wait_done(&op, deadline).await?.into_result(),
                Err(e) => Err(e),
            };
            return match sent {
                Err(e) if e.class() == ErrorClass::AlreadyExists => {
                    let found = client.get_policy(region, &body.name).await?;
                    super::policies::policy_mismatch(&body, &found)
                        .map_or(Ok(()), |d| Err(SendError::Mismatch(d)))
                }
                other => other.map(|_| ()).map_err(SendError::from),
            };
        }
        GceStep::DeletePolicy { policy, .. } => client.delete_policy(region, policy, rid).await?,
    };
    client.wait_done(&op, deadline).await?.into_result()?;
    Ok(())
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

    fn rr(names: &[&str], seconds: i64) -> gce::InstanceGroupManagerResizeRequest {
        let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        gce::InstanceGroupManagerResizeRequest::for_instances("rr-1", "d", names, seconds)
    }

    #[test]
    fn what_exists_under_our_name_is_compared_with_what_was_meant() {
        assert_eq!(rr_mismatch(&rr(&["a-0", "a-1"], 600), &rr(&["a-1", "a-0"], 600)), None);
        let d = rr_mismatch(&rr(&["a-0", "a-1"], 600), &rr(&["a-0"], 3600)).unwrap();
        assert!(
            d.contains("it asks for a-0, not a-[0-1]") && d.contains("run duration is 3600s, not 600s"),
            "{d}"
        );

        let mig = |description: &str, template: &str| gce::InstanceGroupManager {
            name: "hpc-a-j1-t".into(),
            description: description.into(),
            versions: vec![gce::InstanceGroupManagerVersion {
                instance_template: template.into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        let ours =
            mig("slurm-dws/v1 cluster=hpc nodeset=a tag=t job=1", "projects/p/regions/r/instanceTemplates/t");
        let full = mig(
            "slurm-dws/v1 cluster=hpc nodeset=a tag=t job=1",
            "https://www.googleapis.com/compute/v1/projects/p/regions/r/instanceTemplates/t",
        );
        assert_eq!(mig_mismatch(&ours, &full), None, "a full URL names the same template");
        let other = mig("someone else's", "projects/p/regions/r/instanceTemplates/u");
        let d = mig_mismatch(&ours, &other).unwrap();
        assert!(d.contains("description is 'someone else's'") && d.contains("instanceTemplates/u"), "{d}");
    }
}
