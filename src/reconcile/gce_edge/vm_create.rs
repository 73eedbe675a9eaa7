//! The GCE edge of standard and spot nodesets: their VMs are created by name with
//! `regionInstanceGroupManagers.createInstances` in the request group's MIG, and how that creation
//! goes is read from `listManagedInstances` (docs/gce-facts.md, "Standard and spot VMs").
//!
//! A group's creation is followed exactly as a resize request is: [`observe_created`] answers a
//! [`PolledRequest`], so the planner's lifecycle (`plan/requests.rs`), the poll schedule, adoption
//! after the database is lost and the capacity backoff are the same for every provisioning model.

use crate::config::{Config, ProvisioningModel};
use crate::gce::{self, ErrorClass, GceError, Location};
use crate::model::{GceRequestState, Request};
use crate::reconcile::types::*;

/// The fields of a managed instance a poll of a created group reads.
pub const MANAGED_INSTANCE_FIELDS: &str =
    "managedInstances(name,instance,instanceStatus,currentAction,lastAttempt),nextPageToken";

/// The provisioning model of the nodeset a MIG of ours belongs to, from its name
/// (`{cluster}-{nodeset}-...`; the longest nodeset name that fits, so `gpu` never takes `gpubig`'s
/// MIGs). A MIG of a nodeset no longer configured is taken as Flex.
pub fn mig_model(cfg: &Config, mig: &str) -> ProvisioningModel {
    cfg.nodesets
        .iter()
        .filter(|n| mig.starts_with(&format!("{}-{}-", cfg.cluster_name, n.name)))
        .max_by_key(|n| n.name.len())
        .map_or(ProvisioningModel::Flex, |n| n.provisioning_model)
}

/// What a group is, in words for `explain`: a Flex or reserved group's resize request, or a
/// standard or spot group's VMs created by name.
pub fn group_words(name: &str, model: ProvisioningModel) -> String {
    if model.uses_resize_requests() {
        format!("resize request {name}")
    } else {
        "a group of VMs created by name".to_string()
    }
}

/// A group's run duration in words (`age` spells seconds), or that it has none.
pub fn run_duration_words(run_duration: u64, age: impl Fn(i64) -> String) -> String {
    if run_duration == 0 {
        "no run duration".to_string()
    } else {
        format!("run duration {}", age(run_duration as i64))
    }
}

/// The `createInstances` body of a group: exactly its node names.
pub fn create_body(r: &Request) -> gce::CreateInstancesRequest {
    gce::CreateInstancesRequest::for_names(r.nodes.iter().cloned())
}

/// How a group's creation stands, from its MIG's managed instances: none (the call never took
/// effect: `NotFound`, and the planner sends it again), an error in a `lastAttempt` (FAILED with
/// it: a stockout or quota error is a capacity failure and backs the nodeset off; GCE would retry
/// for ever, slurm-dws deletes the MIG instead, so the job can go elsewhere), every VM made (SUCCEEDED),
/// or still creating.
pub fn creation_state(managed: &[gce::ManagedInstance]) -> PolledRequest {
    if managed.is_empty() {
        return PolledRequest::NotFound;
    }
    let instances: Vec<String> = managed.iter().map(|m| m.vm_name().to_string()).collect();
    let failed = managed.iter().find(|m| !m.last_attempt_errors().is_empty());
    let state = if let Some(m) = failed {
        let errors = m.last_attempt_errors();
        let first = &errors[0];
        let class = gce::classify_errors(errors);
        return PolledRequest::Found(ObservedRequest {
            error: Some((first.code.clone(), format!("{}: {}", m.vm_name(), first.message))),
            capacity_error: matches!(class, ErrorClass::Capacity | ErrorClass::Quota),
            instances,
            ..ObservedRequest::in_state(GceRequestState::Failed)
        });
    } else if managed.iter().all(|m| !m.instance.is_empty() && is_settled(&m.current_action)) {
        GceRequestState::Succeeded
    } else {
        GceRequestState::Creating
    };
    PolledRequest::Found(ObservedRequest { instances, ..ObservedRequest::in_state(state) })
}

/// A managed instance whose VM exists and that the MIG is doing nothing more to: `NONE` (or no
/// action at all), `VERIFYING` (made, being checked) or `REFRESHING`.
fn is_settled(action: &str) -> bool {
    matches!(action, "" | "NONE" | "VERIFYING" | "REFRESHING")
}

/// A created group as its MIG's managed instances show it.
pub async fn observe_created(
    client: &gce::Client,
    loc: &Location,
    mig: &str,
) -> Result<PolledRequest, GceError> {
    match client.list_managed_instances_fields(loc, mig, Some(MANAGED_INSTANCE_FIELDS)).await {
        Ok(managed) => Ok(creation_state(&managed)),
        Err(e) if e.is_not_found() => Ok(PolledRequest::NotFound),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mi(name: &str, url: bool, action: &str, error: Option<&str>) -> gce::ManagedInstance {
        gce::ManagedInstance {
            name: name.into(),
            instance: if url { format!("zones/z/instances/{name}") } else { String::new() },
            current_action: action.into(),
            last_attempt: error.map(|code| gce::ManagedInstanceLastAttempt {
                errors: Some(gce::OperationErrorList {
                    errors: vec![gce::OperationErrorItem {
                        code: code.into(),
                        message: "no room".into(),
                        ..Default::default()
                    }],
                }),
            }),
            ..Default::default()
        }
    }

    fn state(p: &PolledRequest) -> Option<&GceRequestState> {
        match p {
            PolledRequest::Found(r) => Some(&r.state),
            PolledRequest::NotFound => None,
        }
    }

    #[test]
    fn a_groups_creation_is_read_from_its_managed_instances() {
        assert_eq!(creation_state(&[]), PolledRequest::NotFound, "nothing made yet: send it again");
        let creating =
            creation_state(&[mi("h-s-0", true, "NONE", None), mi("h-s-1", false, "CREATING", None)]);
        assert_eq!(state(&creating), Some(&GceRequestState::Creating));
        let done = creation_state(&[mi("h-s-0", true, "NONE", None), mi("h-s-1", true, "VERIFYING", None)]);
        assert_eq!(state(&done), Some(&GceRequestState::Succeeded));
        let PolledRequest::Found(stockout) = creation_state(&[
            mi("h-s-0", true, "NONE", None),
            mi("h-s-1", false, "CREATING", Some("ZONE_RESOURCE_POOL_EXHAUSTED")),
        ]) else {
            panic!("found")
        };
        assert_eq!(stockout.state, GceRequestState::Failed);
        assert!(stockout.capacity_error, "a stockout backs off as capacity");
        assert_eq!(stockout.error.as_ref().unwrap().0, "ZONE_RESOURCE_POOL_EXHAUSTED");
        assert!(stockout.error.as_ref().unwrap().1.contains("h-s-1"));
        assert_eq!(stockout.instances, vec!["h-s-0".to_string(), "h-s-1".to_string()]);
        let PolledRequest::Found(quota) =
            creation_state(&[mi("h-s-0", false, "CREATING", Some("QUOTA_EXCEEDED"))])
        else {
            panic!("found")
        };
        assert!(quota.capacity_error, "quota is capacity too");
        let PolledRequest::Found(image) =
            creation_state(&[mi("h-s-0", false, "CREATING", Some("RESOURCE_NOT_FOUND"))])
        else {
            panic!("found")
        };
        assert!(!image.capacity_error, "a missing image is an error, not capacity");
    }

    #[test]
    fn a_migs_model_is_its_nodesets() {
        let text = r#"
cluster_name = "h"
[gcp]
project = "p"
region = "us-central1"
[[nodeset]]
name = "gpu"
instance_template = "projects/p/global/instanceTemplates/t"
zones = ["us-central1-a"]
node_count_dynamic_max = 2
[[nodeset]]
name = "gpubig"
instance_template = "projects/p/global/instanceTemplates/t"
zones = ["us-central1-a"]
node_count_dynamic_max = 2
provisioning_model = "spot"
"#;
        let cfg = Config::from_toml_str(text, std::path::Path::new("t.toml")).unwrap();
        assert_eq!(mig_model(&cfg, "h-gpubig-j7-abcdef12"), ProvisioningModel::Spot);
        assert_eq!(mig_model(&cfg, "h-gpu-j7-abcdef12"), ProvisioningModel::Flex);
        assert_eq!(mig_model(&cfg, "h-gone-j7-abcdef12"), ProvisioningModel::Flex);
    }
}
