//! What a pass sends to GCE: a planner step's outbox record ([`intent`]) and request body, and the
//! call itself ([`send`]), within [`step_budget`](super::step_budget). A create GCE answers "already
//! exists" is compared with what was meant (docs/gce-facts.md, "Resize requests", "MIGs").

use super::reads::mig_region;
use super::step_budget;
use crate::config::Config;
use crate::gce::{self, ErrorClass, GceError, Location};
use crate::model::{MutationKind, OutboxEntry, Request};
use crate::naming::Naming;
use crate::reconcile::error::ReconcileError;
use crate::reconcile::types::*;
use tokio::time::Instant;

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
        GceStep::ReportHostAsFaulty { vm, behavior, description, .. } => (
            MutationKind::ReportHostAsFaulty,
            vm.url(),
            serde_json::json!({
                "disruptionSchedule": "IMMEDIATE",
                "faultReasons": [{"behavior": behavior.as_str(), "description": description}],
            }),
        ),
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
        GceStep::ReportHostAsFaulty { vm, behavior, description, .. } => {
            client.report_host_as_faulty(&vm.zone, &vm.name, behavior.as_str(), description, rid).await?
        }
    };
    client.wait_done(&op, deadline).await?.into_result()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
