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

/// Which regions' policies a pass lists, kept between passes: a pass makes no read that serves
/// nothing. A region is listed when a configured nodeset there owns a policy (it may have to be
/// created), when the last list of it showed an owned policy (it may have to be deleted), and, in
/// every region in use, until one list of each has answered since the daemon started or reloaded
/// its config (a policy of a nodeset since removed from the config, or no longer placed, is found
/// then). A region with none of these has no owned policy but one another process made since, which
/// no pass would act on anyway.
#[derive(Debug, Default)]
pub struct PolicyRegions {
    /// Regions listed (and answered) at least once by this reconciler.
    listed: BTreeSet<String>,
    /// Regions whose last answered list showed an owned policy.
    holding: BTreeSet<String>,
}

impl PolicyRegions {
    /// The regions of `in_use` to list this pass.
    pub fn to_list(&self, cfg: &Config, in_use: &BTreeSet<String>) -> BTreeSet<String> {
        let placed: BTreeSet<&str> = cfg
            .nodesets
            .iter()
            .filter(|n| matches!(n.placement, Some(Placement::Owned { .. })))
            .map(|n| n.region.as_str())
            .collect();
        in_use
            .iter()
            .filter(|r| !self.listed.contains(*r) || self.holding.contains(*r) || placed.contains(r.as_str()))
            .cloned()
            .collect()
    }

    /// Learns what the lists of `asked` answered: `owned` the policies found, `failed` the regions
    /// whose list did not answer (they are asked again next pass).
    pub fn learn(
        &mut self,
        asked: &BTreeSet<String>,
        owned: &BTreeMap<String, ObservedPolicy>,
        failed: &BTreeMap<String, GceError>,
    ) {
        for region in asked.iter().filter(|r| !failed.contains_key(*r)) {
            self.listed.insert(region.clone());
            if owned.values().any(|p| p.region == *region) {
                self.holding.insert(region.clone());
            } else {
                self.holding.remove(region);
            }
        }
    }
}

/// The policies slurm-dws owns in the regions of `regions` that `memory` says to list, by name: one
/// paginated list per region, filtered by the cluster's name prefix, all at once; and the regions
/// whose list failed (with why). A region not listed holds no owned policy ([`PolicyRegions`]).
pub async fn observe_policies(
    client: &gce::Client,
    cfg: &Config,
    regions: &BTreeSet<String>,
    memory: &std::sync::Mutex<PolicyRegions>,
) -> (BTreeMap<String, ObservedPolicy>, BTreeMap<String, GceError>) {
    let asked = memory.lock().expect("policy regions").to_list(cfg, regions);
    if asked.is_empty() {
        return Default::default();
    }
    let filter = format!("name eq '{}-.*'", cfg.cluster_name);
    let (listed, failed) = super::reads::per_region(&asked, "resourcePolicies.list", |region| {
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
    memory.lock().expect("policy regions").learn(&asked, &owned, &failed);
    (owned, failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_region_is_listed_only_while_a_list_of_it_can_serve() {
        let text = "cluster_name = \"hpc\"\n[gcp]\nproject = \"p\"\nregion = \"us-central1\"\n\
            [[nodeset]]\nname = \"a\"\ninstance_template = \"projects/p/global/instanceTemplates/t\"\n\
            zones = [\"us-central1-a\"]\nnode_count_dynamic_max = 4\n";
        let mut cfg = Config::from_toml_str(text, "t.toml".as_ref()).unwrap();
        assert!(cfg.nodesets[0].placement.is_none());
        let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
        let in_use = set(&["r1", "r2"]);
        let mut memory = PolicyRegions::default();
        // Never listed: every region in use is.
        assert_eq!(memory.to_list(&cfg, &in_use), in_use);
        // r1 answered with an owned policy, r2 with none, r3 (not in use) is not asked.
        let owned = BTreeMap::from([(
            "hpc-a-wp".to_string(),
            ObservedPolicy { name: "hpc-a-wp".into(), nodeset: "a".into(), region: "r1".into() },
        )]);
        memory.learn(&in_use, &owned, &BTreeMap::new());
        assert_eq!(memory.to_list(&cfg, &in_use), set(&["r1"]));
        // The policy deleted: r1 answers empty and is no longer listed.
        memory.learn(&set(&["r1"]), &BTreeMap::new(), &BTreeMap::new());
        assert!(memory.to_list(&cfg, &in_use).is_empty());
        // A region whose list failed is asked again; a region newly in use is listed once.
        let mut fresh = PolicyRegions::default();
        let failed = BTreeMap::from([(
            "r2".to_string(),
            GceError::Transport {
                method: "resourcePolicies.list".into(),
                path: String::new(),
                message: "reset".into(),
                timeout: false,
            },
        )]);
        fresh.learn(&in_use, &BTreeMap::new(), &failed);
        assert_eq!(fresh.to_list(&cfg, &set(&["r1", "r2", "r4"])), set(&["r2", "r4"]));
        // A nodeset that owns a policy keeps its region listed.
        cfg.nodesets[0].placement =
            Some(Placement::Owned { max_topology_distance: None, accelerator_topology: None });
        let region = cfg.nodesets[0].region.clone();
        let mut listed = PolicyRegions::default();
        listed.learn(&set(&[&region]), &BTreeMap::new(), &BTreeMap::new());
        assert_eq!(listed.to_list(&cfg, &set(&[&region])), set(&[&region]));
    }

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
