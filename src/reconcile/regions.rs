//! Nodesets in several regions: which region a MIG's calls go to, and what a pass knows of the MIGs
//! of a region whose list failed (they are carried as recorded, so only that region's nodesets are
//! held back).

use super::gce_edge::{mig_region, MigLists};
use super::types::{Desired, Observed, ObservedMig};
use crate::config::Config;
use crate::model::{Mig, MigState};

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
    }
}
