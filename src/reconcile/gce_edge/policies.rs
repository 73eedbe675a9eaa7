//! Workload policies at the GCE edge: the owned policy's name, description and body, its URL for a
//! MIG of its nodeset, and the region's owned policies observed (docs/gce-facts.md, "Workload
//! policies").
//!
//! A policy slurm-dws owns is named `{cluster}-{nodeset}-wp` and described
//! `slurm-dws/v1 cluster=C nodeset=N workload-policy`: ownership is provable from GCE alone, as for
//! MIGs, and a policy of a nodeset removed from the config is still recognised (to be deleted).

use crate::config::{Config, Nodeset, Placement};
use crate::gce::{self, GceError};
use crate::naming::{policy_name, OWNERSHIP_MAGIC};
use crate::reconcile::types::ObservedPolicy;
use std::collections::{BTreeMap, BTreeSet};

/// The fields of a policy a pass reads.
pub const POLICY_LIST_FIELDS: &str = "items(name,description),nextPageToken,warning";

/// The ownership line of an owned policy.
pub fn policy_description(cluster: &str, nodeset: &str) -> String {
    format!("{OWNERSHIP_MAGIC} cluster={cluster} nodeset={nodeset} workload-policy")
}

/// The nodeset of an owned policy: `Some` only when the description is ours for this cluster and
/// the name is exactly the one it produces.
pub fn parse_policy_ownership(cluster: &str, name: &str, description: &str) -> Option<String> {
    let mut words = description.split_whitespace();
    (words.next()? == OWNERSHIP_MAGIC).then_some(())?;
    let c = words.next()?.strip_prefix("cluster=")?;
    let n = words.next()?.strip_prefix("nodeset=")?;
    (words.next()? == "workload-policy" && words.next().is_none()).then_some(())?;
    (c == cluster && crate::config::is_nodeset_name(n) && name == policy_name(cluster, n))
        .then(|| n.to_string())
}

/// The workload policy URL every MIG of `ns` is created with, if any.
pub fn policy_url(cfg: &Config, ns: &Nodeset) -> Option<String> {
    match ns.placement.as_ref()? {
        Placement::Existing { url } => Some(url.clone()),
        Placement::Owned { .. } => Some(format!(
            "projects/{}/regions/{}/resourcePolicies/{}",
            cfg.gcp.project,
            ns.region,
            policy_name(&cfg.cluster_name, &ns.name)
        )),
    }
}

/// The body of the policy slurm-dws creates for `ns` (`None`: it owns none).
pub fn policy_body(cfg: &Config, ns: &Nodeset) -> Option<gce::ResourcePolicy> {
    let Some(Placement::Owned { max_topology_distance, accelerator_topology }) = &ns.placement else {
        return None;
    };
    Some(gce::ResourcePolicy {
        name: policy_name(&cfg.cluster_name, &ns.name),
        description: policy_description(&cfg.cluster_name, &ns.name),
        workload_policy: Some(gce::WorkloadPolicy {
            kind: "HIGH_THROUGHPUT".into(),
            max_topology_distance: max_topology_distance.map(|d| d.as_str().to_string()).unwrap_or_default(),
            accelerator_topology: accelerator_topology.clone().unwrap_or_default(),
        }),
        self_link: String::new(),
    })
}

/// What differs between the policy under our name and the one meant (`None`: ours, as meant).
pub fn policy_mismatch(meant: &gce::ResourcePolicy, found: &gce::ResourcePolicy) -> Option<String> {
    let mut diffs = Vec::new();
    if found.description != meant.description {
        diffs.push(format!("description is '{}', not '{}'", found.description, meant.description));
    }
    if found.workload_policy != meant.workload_policy {
        diffs.push(format!("workloadPolicy is {:?}, not {:?}", found.workload_policy, meant.workload_policy));
    }
    (!diffs.is_empty()).then(|| diffs.join("; "))
}

/// The policies slurm-dws owns in `regions`, by name: one paginated list per region, filtered by
/// the cluster's name prefix, all at once; and the regions whose list failed (with why).
pub async fn observe_policies(
    client: &gce::Client,
    cfg: &Config,
    regions: &BTreeSet<String>,
) -> (BTreeMap<String, ObservedPolicy>, BTreeMap<String, GceError>) {
    let filter = format!("name eq '{}-.*'", cfg.cluster_name);
    let (listed, failed) = super::reads::per_region(regions, "resourcePolicies.list", |region| {
        let (client, filter) = (client.clone(), filter.clone());
        async move { client.list_policies(&region, Some(&filter), Some(POLICY_LIST_FIELDS)).await }
    })
    .await;
    let mut owned = BTreeMap::new();
    for (region, list) in listed {
        owned.extend(list.into_iter().filter_map(|p| {
            let nodeset = parse_policy_ownership(&cfg.cluster_name, &p.name, &p.description)?;
            Some((p.name.clone(), ObservedPolicy { name: p.name, nodeset, region: region.clone() }))
        }));
    }
    (owned, failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ownership_is_provable_from_name_and_description() {
        let d = policy_description("hpc", "a3u");
        assert_eq!(parse_policy_ownership("hpc", "hpc-a3u-wp", &d).as_deref(), Some("a3u"));
        for (name, desc) in [
            ("hpc-a3u-wp", "slurm-dws/v1 cluster=other nodeset=a3u workload-policy".to_string()),
            ("hpc-a3-wp", d.clone()),
            ("hpc-a3u-wp", "slurm-dws/v1 cluster=hpc nodeset=a3u".to_string()),
            ("hpc-a3u-wp", format!("{d} extra")),
            ("hpc-a3u-wp", String::new()),
        ] {
            assert_eq!(parse_policy_ownership("hpc", name, &desc), None, "{name} {desc}");
        }
    }
}
