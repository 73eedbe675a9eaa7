//! Whether an instance template can make VMs in a nodeset's region: a regional template only in
//! its own region, and a subnetwork (regional) only in its own (docs/gce-facts.md, "Regions").

use super::template_types::InstanceTemplate;

/// The region a `regions/R/...` reference (relative or full URL) names, if it names one.
fn region_in(reference: &str) -> Option<&str> {
    let mut parts = reference.split('/');
    parts.by_ref().find(|p| *p == "regions")?;
    parts.next().filter(|r| !r.is_empty())
}

/// Why `t` cannot make VMs in `region`, one line each (empty: it can): a regional template of
/// another region, or a network interface whose subnetwork is in another region. A global template
/// with no subnetwork (or subnetworks of `region`) works in any region.
pub fn template_region_problems(t: &InstanceTemplate, region: &str) -> Vec<String> {
    let mut problems = Vec::new();
    // `region` of a regional template is its region's URL; empty for a global one.
    if !t.region.is_empty() {
        let r = region_in(&t.region).unwrap_or(&t.region);
        if r != region {
            problems.push(format!(
                "the template is regional, in {r}, but the nodeset's region is {region}: a regional template works in its own region only"
            ));
        }
    }
    for (i, nic) in t.properties.iter().flat_map(|p| p.network_interfaces.iter()).enumerate() {
        if let Some(r) = region_in(&nic.subnetwork) {
            if r != region {
                problems.push(format!(
                    "properties.networkInterfaces[{i}].subnetwork is {}, in {r}, but the nodeset's region is {region}: a VM attaches to a subnetwork of its own region only",
                    nic.subnetwork
                ));
            }
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gce::template_types::{InstanceProperties, TemplateNetworkInterface};

    fn template(region: &str, subnetworks: &[&str]) -> InstanceTemplate {
        InstanceTemplate {
            name: "t".into(),
            region: region.into(),
            properties: Some(InstanceProperties {
                network_interfaces: subnetworks
                    .iter()
                    .map(|s| TemplateNetworkInterface { network: String::new(), subnetwork: s.to_string() })
                    .collect(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_template_works_in_its_region_or_anywhere_when_global() {
        let east = "https://www.googleapis.com/compute/v1/projects/p/regions/us-east5";
        let sub_east = "projects/p/regions/us-east5/subnetworks/s";
        let sub_central =
            "https://www.googleapis.com/compute/v1/projects/p/regions/us-central1/subnetworks/s";
        for (t, region, problems, why) in [
            (template("", &[]), "us-east5", 0, "global, default network"),
            (template("", &[sub_east]), "us-east5", 0, "global, subnetwork of the region"),
            (template("", &[sub_central]), "us-east5", 1, "global, subnetwork of another region"),
            (template(east, &[sub_east]), "us-east5", 0, "regional, own region"),
            (template(east, &[]), "us-central1", 1, "regional, another region"),
            (template(east, &[sub_east, sub_central]), "us-central1", 2, "both wrong"),
            (template("", &["global/networks/default"]), "us-east5", 0, "not a subnetwork"),
        ] {
            let p = template_region_problems(&t, region);
            assert_eq!(p.len(), problems, "{why}: {p:?}");
        }
        let p = template_region_problems(&template("", &[sub_central]), "us-east5");
        assert!(p[0].contains("networkInterfaces[0].subnetwork") && p[0].contains("us-central1"), "{p:?}");
    }
}
