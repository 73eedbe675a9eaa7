//! Nodesets in several regions: which region a MIG's calls go to, and what a pass knows of the MIGs
//! of a region whose list failed (they are carried as recorded, so only that region's nodesets are
//! held back).

use super::reads::{mig_region, MigLists};
use crate::config::Config;
use crate::model::{Mig, MigState};
use crate::reconcile::types::{Desired, Observed, ObservedMig};

/// Puts the MIG lists of a pass into `o`: the MIGs the regions that answered listed, and, for each
/// region whose list failed, its recorded MIGs that are active or being deleted, as last recorded
/// (`Observed::unlisted_regions` names those regions, and an error says so). A MIG still being
/// created there is not carried: nothing is known of it until the region answers.
pub fn carry_unlisted(
    o: &mut Observed,
    lists: MigLists,
    desired: &Desired,
    cfg: &Config,
    errors: &mut Vec<String>,
) {
    let MigLists { mut migs, regions, failed, .. } = lists;
    o.mig_regions = regions;
    for m in desired.migs.values() {
        let region = mig_region(cfg, Some(&m.region), &m.name);
        if failed.contains_key(&region) && matches!(m.state, MigState::Active | MigState::Deleting) {
            migs.entry(m.name.clone()).or_insert_with(|| carried(cfg, m));
        }
        o.mig_regions.entry(m.name.clone()).or_insert(region);
    }
    for (region, e) in &failed {
        let nodesets: Vec<&str> =
            cfg.nodesets.iter().filter(|n| &n.region == region).map(|n| n.name.as_str()).collect();
        errors.push(format!(
            "listing MIGs in {region}: {e}: the MIGs of {} are carried as recorded; nothing there is judged gone this pass",
            if nodesets.is_empty() { "nodesets no longer configured".to_string() } else { format!("nodeset {}", nodesets.join(", ")) }
        ));
    }
    o.unlisted_regions = failed.into_keys().collect();
    o.migs = Some(migs);
}

/// A recorded MIG as the planner reads an observed one; its tag and job from its name
/// (`{cluster}-{nodeset}-j{job}-{tag}` or `{cluster}-{nodeset}-{tag}`).
fn carried(cfg: &Config, m: &Mig) -> ObservedMig {
    let rest = m.name.strip_prefix(&format!("{}-{}-", cfg.cluster_name, m.nodeset)).unwrap_or_default();
    let (job_id, tag) = match rest.strip_prefix('j').and_then(|r| r.split_once('-')) {
        Some((job, tag)) if job.parse::<u32>().is_ok() => (job.parse().ok(), tag.to_string()),
        _ => (None, rest.to_string()),
    };
    ObservedMig {
        name: m.name.clone(),
        nodeset: m.nodeset.clone(),
        tag,
        job_id,
        target_size: m.target_size,
        created: Some(m.created_at),
        // Not recorded with the MIG: the nodeset's policy as configured now (a policy of a region
        // whose list failed is never deleted, so this only informs).
        workload_policy: cfg
            .nodeset(&m.nodeset)
            .and_then(|ns| super::policies::policy_url(cfg, ns))
            .map(|url| crate::gce::last_segment(&url).to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gce::GceError;
    use chrono::{DateTime, Utc};

    fn cfg() -> Config {
        let text = "cluster_name = \"hpc\"\n[gcp]\nproject = \"p\"\nregion = \"us-central1\"\n\
            [[nodeset]]\nname = \"a\"\ninstance_template = \"projects/p/global/instanceTemplates/t\"\n\
            zones = [\"us-central1-a\"]\nnode_count_dynamic_max = 4\n\
            [[nodeset]]\nname = \"ab\"\nregion = \"us-east5\"\n\
            instance_template = \"projects/p/global/instanceTemplates/t\"\nzones = [\"us-east5-b\"]\n\
            node_count_dynamic_max = 4\n";
        Config::from_toml_str(text, "t.toml".as_ref()).unwrap()
    }

    fn mig(name: &str, nodeset: &str, region: &str, state: MigState) -> Mig {
        Mig {
            name: name.into(),
            nodeset: nodeset.into(),
            region: region.into(),
            target_size: 2,
            state,
            created_at: DateTime::<Utc>::from_timestamp(1_800_000_000, 0).unwrap(),
            empty_since: None,
        }
    }

    #[test]
    fn a_mig_goes_to_its_recorded_region_else_its_nodesets() {
        let c = cfg();
        for (recorded, name, region) in [
            (None, "hpc-a-j1-0000000a", "us-central1"),
            (None, "hpc-ab-j1-0000000a", "us-east5"), // the longest nodeset prefix: ab, not a
            (Some(""), "hpc-ab-0000000a", "us-east5"),
            (Some("europe-west4"), "hpc-a-0000000a", "europe-west4"),
            (None, "hpc-gone-0000000a", "us-central1"),
        ] {
            assert_eq!(mig_region(&c, recorded, name), region, "{name} {recorded:?}");
        }
    }

    #[test]
    fn a_failed_region_carries_its_recorded_migs_and_no_other() {
        let c = cfg();
        let mut desired = Desired::default();
        for m in [
            mig("hpc-ab-j7-0000000b", "ab", "us-east5", MigState::Active),
            mig("hpc-ab-0000000c", "ab", "us-east5", MigState::Creating),
            mig("hpc-a-j8-0000000d", "a", "us-central1", MigState::Active),
        ] {
            desired.migs.insert(m.name.clone(), m);
        }
        let mut lists = MigLists::default();
        lists.listed.insert("us-central1".into());
        let failure = GceError::Transport {
            method: "m".into(),
            path: "p".into(),
            message: "503".into(),
            timeout: false,
        };
        lists.failed.insert("us-east5".into(), failure);
        let (mut o, mut errors) = (Observed::default(), Vec::new());
        carry_unlisted(&mut o, lists, &desired, &c, &mut errors);
        let migs = o.migs.as_ref().unwrap();
        let carried = &migs["hpc-ab-j7-0000000b"];
        assert_eq!((carried.job_id, carried.tag.as_str(), carried.target_size), (Some(7), "0000000b", 2));
        assert!(!migs.contains_key("hpc-ab-0000000c"), "a MIG being created is not carried");
        assert!(!migs.contains_key("hpc-a-j8-0000000d"), "us-central1 answered: its absence is news");
        assert_eq!(o.unlisted_regions.iter().collect::<Vec<_>>(), vec!["us-east5"]);
        assert_eq!(o.mig_regions["hpc-a-j8-0000000d"], "us-central1");
        assert!(
            errors[0].contains("listing MIGs in us-east5") && errors[0].contains("nodeset ab"),
            "{errors:?}"
        );
    }
}
