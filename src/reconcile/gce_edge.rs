//! The reconciler's edge to GCE: observations in, planner steps out, through the typed client.
//!
//! Observation per pass is bounded, whatever the cluster size: one paginated `regionInstanceGroupManagers
//! .list`, one paginated `instances.aggregatedList` (500 a page), and one `resizeRequests.get` per MIG
//! whose request is not final. Finished requests are never polled again.

use super::types::*;
use crate::config::{self, Config};
use crate::gce::{self, ErrorClass, GceError, Location};
use crate::model::{MutationKind, OutboxEntry, Request};
use crate::naming::Naming;
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::time::Instant;

/// How long one step may wait for its Operation inside a pass. GCE's operations for our calls finish in
/// seconds; one that is still running after this is left to GCE: the step counts as "retry", its outbox
/// entry stays pending, and the next pass looks at the resource itself (a MIG or resize request exists
/// from its insert on, so the pass after goes on with the next step). A longer wait would hold every
/// other step of the daemon — suspends, expiries, other nodesets — behind one stuck operation
/// (`tests/gce_faults.rs`, operations that never finish).
const OPERATION_DEADLINE: Duration = Duration::from_secs(20);

/// How one step went.
#[derive(Debug, Clone, PartialEq)]
pub enum StepResult {
    /// GCE did it (its Operation is DONE without error, or the effect already existed).
    Done,
    /// Not done, for a reason that may pass (rate limit, timeout, transient error): the next pass resends
    /// the same requestId.
    Retry(String),
    /// GCE refused it for good (`CODE: message`); `capacity` when it is a stockout or quota.
    Refused { error: String, capacity: bool },
    /// Nothing left to do, but nothing learned either (cancel of a request that is final already: the
    /// next poll says how it ended).
    Moot(String),
}

/// The client for the configured endpoint and credentials.
pub fn client(cfg: &Config) -> anyhow::Result<gce::Client> {
    let creds = match &cfg.gcp.credentials {
        config::Credentials::Auto => gce::Credentials::Auto,
        config::Credentials::Metadata => gce::Credentials::Metadata,
        config::Credentials::None => gce::Credentials::None,
        config::Credentials::KeyFile(p) => gce::Credentials::KeyFile(p.clone()),
    };
    let opts = gce::ClientOptions {
        endpoint: cfg.gcp.endpoint.clone(),
        project: cfg.gcp.project.clone(),
        calls_per_minute: cfg.gcp.calls_per_minute,
        request_timeout: Duration::from_secs(cfg.gcp.request_timeout),
        retry_deadline: Duration::from_secs(cfg.gcp.retry_deadline),
    };
    Ok(gce::Client::new(opts, creds)?)
}

fn region(cfg: &Config) -> Location {
    Location::Region(cfg.gcp.region.clone())
}

/// Every VM whose name starts with `{cluster}-`, in one paginated aggregated list.
pub async fn observe_vms(
    client: &gce::Client,
    cfg: &Config,
) -> Result<BTreeMap<String, ObservedVm>, GceError> {
    let filter = format!("name eq '{}-.*'", cfg.cluster_name);
    let prefix = format!("{}-", cfg.cluster_name);
    let mut vms = BTreeMap::new();
    client
        .aggregated_list_instances_each(Some(&filter), |i| {
            if i.name.starts_with(&prefix) {
                let vm = ObservedVm {
                    mig: i.created_by().map(|u| gce::last_segment(u).to_string()),
                    created: i.created_at(),
                    termination: i.termination_time(),
                    network_ip: i.internal_ip().map(str::to_string),
                    name: i.name.clone(),
                    status: i.status,
                };
                vms.insert(i.name, vm);
            }
        })
        .await?;
    Ok(vms)
}

/// The region's MIGs that are provably ours (name prefix AND ownership description).
pub async fn observe_migs(
    client: &gce::Client,
    cfg: &Config,
    naming: &Naming,
) -> Result<BTreeMap<String, ObservedMig>, GceError> {
    let filter = format!("name eq '{}-.*'", cfg.cluster_name);
    let migs = client.list_migs(&region(cfg), Some(&filter)).await?;
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
                },
            ))
        })
        .collect())
}

/// One resize request's state; a 404 is reported as the state `NOT_FOUND`.
pub async fn observe_request(
    client: &gce::Client,
    cfg: &Config,
    mig: &str,
    name: &str,
) -> Result<ObservedRequest, GceError> {
    match client.get_resize_request(&region(cfg), mig, name).await {
        Ok(rr) => {
            let errors = rr.errors();
            let error = errors.first().map(|e| (e.code.clone(), e.message.clone()));
            let class = (!errors.is_empty()).then(|| gce::classify_errors(errors));
            let last_attempt = rr.last_attempt_errors().first().map(|e| format!("{}: {}", e.code, e.message));
            Ok(ObservedRequest {
                state: rr
                    .state
                    .and_then(|s| serde_json::to_value(s).ok())
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_else(|| "UNKNOWN".into()),
                error,
                capacity_error: matches!(class, Some(ErrorClass::Capacity | ErrorClass::Quota)),
                last_attempt,
                instances: rr.instances.iter().map(|i| i.name.clone()).collect(),
                run_duration: rr.requested_run_duration.as_ref().map(|d| d.seconds.max(0) as u64),
            })
        }
        Err(e) if e.is_not_found() => Ok(ObservedRequest { state: "NOT_FOUND".into(), ..Default::default() }),
        Err(e) => Err(e),
    }
}

/// The outbox record for a step: (kind, target, payload). The payload is the request body (or the
/// instance names), so `explain` and a post-mortem can see exactly what was sent.
pub fn intent(
    step: &GceStep,
    desired: &Desired,
    cfg: &Config,
) -> anyhow::Result<(MutationKind, String, serde_json::Value)> {
    let naming = Naming::new(cfg);
    Ok(match step {
        GceStep::InsertMig { request, mig, .. } => {
            let r =
                desired.requests.get(request).ok_or_else(|| anyhow::anyhow!("request {request} vanished"))?;
            (MutationKind::MigInsert, mig.clone(), serde_json::to_value(mig_body(cfg, &naming, r)?)?)
        }
        GceStep::InsertResizeRequest { request, mig } => {
            let r =
                desired.requests.get(request).ok_or_else(|| anyhow::anyhow!("request {request} vanished"))?;
            (
                MutationKind::ResizeRequestInsert,
                format!("{mig}/{}", r.name),
                serde_json::to_value(rr_body(r))?,
            )
        }
        GceStep::CancelResizeRequest { request, mig } => {
            let name = desired.requests.get(request).map(|r| r.name.clone()).unwrap_or_default();
            (MutationKind::ResizeRequestCancel, format!("{mig}/{name}"), serde_json::json!({}))
        }
        GceStep::DeleteInstances { mig, instances } => (
            MutationKind::DeleteInstances,
            format!("{mig}:{}", crate::hostlist::compress(instances)),
            serde_json::json!({ "instances": instances }),
        ),
        GceStep::DeleteMig { mig, reason } => {
            (MutationKind::MigDelete, mig.clone(), serde_json::json!({ "reason": reason }))
        }
    })
}

/// The regional MIG of a request group, as GCE.md describes it: empty, one zone, no repair, ownership in
/// the description.
pub fn mig_body(cfg: &Config, naming: &Naming, r: &Request) -> anyhow::Result<gce::InstanceGroupManager> {
    let ns = cfg
        .nodesets
        .iter()
        .find(|n| n.name == r.nodeset)
        .ok_or_else(|| anyhow::anyhow!("nodeset {} is no longer configured", r.nodeset))?;
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
            zones: ns
                .zones
                .iter()
                .map(|z| gce::DistributionPolicyZone { zone: format!("zones/{z}") })
                .collect(),
            target_shape: "ANY_SINGLE_ZONE".into(),
        }),
        update_policy: Some(gce::UpdatePolicy { instance_redistribution_type: "NONE".into() }),
        ..Default::default()
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

/// Sends one step with its outbox requestId and waits for its Operation.
pub async fn execute(
    client: &gce::Client,
    cfg: &Config,
    step: &GceStep,
    request: Option<&Request>,
    entry: &OutboxEntry,
) -> StepResult {
    let loc = region(cfg);
    let rid = entry.request_id.as_str();
    let naming = Naming::new(cfg);
    let sent = match step {
        GceStep::InsertMig { .. } => {
            let Some(r) = request else {
                return StepResult::Refused { error: "request vanished".into(), capacity: false };
            };
            match mig_body(cfg, &naming, r) {
                Ok(body) => client.insert_mig(&loc, &body, rid).await,
                Err(e) => return StepResult::Refused { error: format!("CONFIG: {e}"), capacity: false },
            }
        }
        GceStep::InsertResizeRequest { mig, .. } => {
            let Some(r) = request else {
                return StepResult::Refused { error: "request vanished".into(), capacity: false };
            };
            client.insert_resize_request(&loc, mig, &rr_body(r), rid).await
        }
        GceStep::CancelResizeRequest { mig, .. } => {
            let Some(r) = request else { return StepResult::Done };
            client.cancel_resize_request(&loc, mig, &r.name, rid).await
        }
        GceStep::DeleteInstances { mig, instances } => {
            client.delete_instances(&loc, mig, instances, rid).await
        }
        GceStep::DeleteMig { mig, .. } => client.delete_mig(&loc, mig, rid).await,
    };
    let outcome = match sent {
        Ok(op) => {
            client.wait_done(&op, Instant::now() + OPERATION_DEADLINE).await.and_then(|op| op.into_result())
        }
        Err(e) => Err(e),
    };
    match outcome {
        Ok(_) => StepResult::Done,
        Err(e) => judge(step, &e),
    }
}

/// Decides what an error means for a step.
fn judge(step: &GceStep, e: &GceError) -> StepResult {
    let class = e.class();
    let text = e.to_string();
    match (step, class) {
        // The thing to create exists already: with our name it is ours (the name embeds our tag).
        (GceStep::InsertMig { .. } | GceStep::InsertResizeRequest { .. }, ErrorClass::AlreadyExists) => {
            StepResult::Done
        }
        // The thing to remove is gone already.
        (GceStep::DeleteMig { .. } | GceStep::DeleteInstances { .. }, ErrorClass::NotFound) => {
            StepResult::Done
        }
        // Cancel of a request that is final already: nothing left to cancel; the next poll says how it ended.
        (GceStep::CancelResizeRequest { .. }, ErrorClass::ConditionNotMet | ErrorClass::NotFound) => {
            StepResult::Moot(text)
        }
        (_, ErrorClass::Capacity | ErrorClass::Quota) => {
            StepResult::Refused { error: code_message(e), capacity: true }
        }
        (
            GceStep::InsertMig { .. } | GceStep::InsertResizeRequest { .. },
            ErrorClass::Invalid | ErrorClass::NotFound,
        ) => StepResult::Refused { error: code_message(e), capacity: false },
        _ => StepResult::Retry(text),
    }
}

/// `CODE: message` for the event log and Slurm's node reason.
fn code_message(e: &GceError) -> String {
    let text = e.to_string();
    let code = match e {
        GceError::Api(a) => Some(a.headline_code().to_string()),
        GceError::Operation(o) => o.operation.errors().first().map(|x| x.code.clone()),
        _ => None,
    };
    match code.filter(|c| !c.is_empty()) {
        Some(code) => format!("{code}: {text}"),
        None => text,
    }
}

/// What a finished step tells the next planning round (the list would show it next pass).
pub fn learn(step: &GceStep, observed: &mut Observed, desired: &Desired) {
    match step {
        GceStep::InsertMig { request, mig, nodeset } => {
            if let Some(m) = observed.migs.as_mut() {
                let r = desired.requests.get(request);
                m.insert(
                    mig.clone(),
                    ObservedMig {
                        name: mig.clone(),
                        nodeset: nodeset.clone(),
                        tag: r.map(|r| r.tag.clone()).unwrap_or_default(),
                        job_id: r.and_then(|r| r.job_id),
                        target_size: 0,
                        created: None,
                    },
                );
            }
        }
        GceStep::InsertResizeRequest { mig, .. } => {
            observed
                .requests
                .insert(mig.clone(), ObservedRequest { state: "CREATING".into(), ..Default::default() });
        }
        GceStep::CancelResizeRequest { mig, .. } => {
            if let Some(rr) = observed.requests.get_mut(mig) {
                if !matches!(rr.state.as_str(), "SUCCEEDED" | "FAILED") {
                    rr.state = "CANCELLED".into();
                }
            }
        }
        GceStep::DeleteInstances { instances, .. } => {
            if let Some(vms) = observed.vms.as_mut() {
                for i in instances {
                    vms.remove(i);
                }
            }
        }
        GceStep::DeleteMig { mig, .. } => {
            if let Some(m) = observed.migs.as_mut() {
                m.remove(mig);
            }
            if let Some(vms) = observed.vms.as_mut() {
                vms.retain(|_, v| v.mig.as_deref() != Some(mig.as_str()));
            }
        }
    }
}
