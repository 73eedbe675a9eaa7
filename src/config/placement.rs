//! `[nodeset.placement]` (compact placement through a GCE workload policy) and `[slurm] topology`
//! (the Slurm topology file kept from GCE's physical host topology): types and offline checks.
//!
//! What GCE accepts for which machine family and provisioning model is checked online
//! (`check-config --online`, `gce::placement_rules`); here only what the file alone can tell.

use std::fmt;
use std::path::PathBuf;

/// `maxTopologyDistance` of a HIGH_THROUGHPUT workload policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TopologyDistance {
    Cluster,
    Block,
    Subblock,
}

impl TopologyDistance {
    pub const ALL: [TopologyDistance; 3] =
        [TopologyDistance::Cluster, TopologyDistance::Block, TopologyDistance::Subblock];

    /// As the config and GCE spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            TopologyDistance::Cluster => "CLUSTER",
            TopologyDistance::Block => "BLOCK",
            TopologyDistance::Subblock => "SUBBLOCK",
        }
    }

    pub fn parse(s: &str) -> Option<TopologyDistance> {
        TopologyDistance::ALL.into_iter().find(|d| d.as_str() == s)
    }
}

/// How a nodeset's MIGs are placed (`[nodeset.placement]`); absent = no workload policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// An existing workload policy (`workload_policy`), used as is, never created or deleted.
    Existing {
        /// `projects/P/regions/R/resourcePolicies/NAME` as written (a full URL is accepted too).
        url: String,
    },
    /// A HIGH_THROUGHPUT workload policy slurm-dws creates and owns for the nodeset.
    Owned {
        max_topology_distance: Option<TopologyDistance>,
        /// e.g. `1x72` (A4X): the policy's `acceleratorTopology`.
        accelerator_topology: Option<String>,
    },
}

impl Placement {
    /// The accelerator topology an owned policy asks for.
    pub fn accelerator_topology(&self) -> Option<&str> {
        match self {
            Placement::Owned { accelerator_topology, .. } => accelerator_topology.as_deref(),
            Placement::Existing { .. } => None,
        }
    }
}

/// `slurm.topology`: which Slurm topology slurm-dws writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TopologyKind {
    /// No topology file (as before).
    #[default]
    None,
    /// `topology/tree`: switches = GCE cluster, block, subblock; leaves = hosts' nodes.
    Tree,
    /// `topology/block` (Slurm ≥ 23.11): one block per GCE block (A4X: per subblock, its NVLink domain).
    Block,
}

impl TopologyKind {
    pub fn as_str(self) -> &'static str {
        match self {
            TopologyKind::None => "none",
            TopologyKind::Tree => "tree",
            TopologyKind::Block => "block",
        }
    }

    pub fn parse(s: &str) -> Option<TopologyKind> {
        [TopologyKind::None, TopologyKind::Tree, TopologyKind::Block].into_iter().find(|k| k.as_str() == s)
    }

    /// Slurm's plugin name (`TopologyPlugin=`), `None` for none.
    pub fn plugin(self) -> Option<&'static str> {
        match self {
            TopologyKind::None => None,
            TopologyKind::Tree => Some("topology/tree"),
            TopologyKind::Block => Some("topology/block"),
        }
    }
}

impl fmt::Display for TopologyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `slurm.topology` and `slurm.topology_file` resolved.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Topology {
    pub kind: TopologyKind,
    /// Where the file goes; `None` = beside slurm.conf, named by the Slurm release
    /// (topology.yaml from 25.05, topology.conf before), decided when Slurm's version is known.
    pub file: Option<PathBuf>,
}

/// `accelerator_topology`: `AxB` or `AxBxC`, positive integers (`1x72`, `2x2x1`).
pub fn is_accelerator_topology(s: &str) -> bool {
    let parts: Vec<&str> = s.split('x').collect();
    (2..=3).contains(&parts.len())
        && parts.iter().all(|p| !p.is_empty() && p.len() <= 4 && p.bytes().all(|b| b.is_ascii_digit()))
        && parts.iter().all(|p| p.parse::<u32>().is_ok_and(|n| n > 0))
}

/// A workload policy reference `projects/P/regions/R/resourcePolicies/NAME` (a full URL is accepted):
/// its (project, region, name), or why not.
pub fn parse_policy_url(s: &str) -> Result<(String, String, String), String> {
    let rest = s
        .strip_prefix("https://www.googleapis.com/compute/v1/")
        .or_else(|| s.strip_prefix("https://compute.googleapis.com/compute/v1/"))
        .unwrap_or(s);
    match rest.split('/').collect::<Vec<_>>().as_slice() {
        ["projects", p, "regions", r, "resourcePolicies", n]
            if !p.is_empty() && !r.is_empty() && super::is_rfc1035(n) =>
        {
            Ok((p.to_string(), r.to_string(), n.to_string()))
        }
        _ => Err(format!(
            "{s:?} must be projects/PROJECT/regions/REGION/resourcePolicies/NAME (a workload policy)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accelerator_topologies() {
        for ok in ["1x72", "1x64", "2x2", "4x4x4"] {
            assert!(is_accelerator_topology(ok), "{ok}");
        }
        for bad in ["", "72", "1x", "x72", "1x0", "1X72", "1x72x1x1", "a x b", "1x72 "] {
            assert!(!is_accelerator_topology(bad), "{bad}");
        }
    }

    #[test]
    fn policy_urls() {
        assert_eq!(
            parse_policy_url("projects/p/regions/us-east5/resourcePolicies/wp").unwrap(),
            ("p".into(), "us-east5".into(), "wp".into())
        );
        assert!(parse_policy_url(
            "https://www.googleapis.com/compute/v1/projects/p/regions/r/resourcePolicies/wp"
        )
        .is_ok());
        for bad in ["wp", "regions/r/resourcePolicies/wp", "projects/p/zones/z/resourcePolicies/wp", ""] {
            assert!(parse_policy_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn spellings_round_trip() {
        for d in TopologyDistance::ALL {
            assert_eq!(TopologyDistance::parse(d.as_str()), Some(d));
        }
        assert_eq!(TopologyDistance::parse("block"), None);
        for k in ["none", "tree", "block"] {
            assert_eq!(TopologyKind::parse(k).unwrap().as_str(), k);
        }
    }
}
