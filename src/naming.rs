//! Names: Slurm node names ↔ (nodeset, index), MIG and resize-request names, and proof of ownership.
//!
//! Node names are `{cluster_name}-{nodeset}-{index}`: no zero padding, static indices
//! `[0, static)` first, then dynamic ones `[static, static + dynamic_max)`. A VM's name is its
//! node's name. Neither the cluster name nor a nodeset name may contain `-` (config validation
//! guarantees it), so a name splits at its first two dashes without ambiguity: `x-gpu-1` is
//! never `x-gpu-10`, and nodeset `gpu` never matches a node of nodeset `gpu2`.
//!
//! MIGs are `{cluster}-{nodeset}-j{job}-{tag}` (or `{cluster}-{nodeset}-{tag}` for a group
//! without a job), where `tag` is 8 hex characters hashed from the group (`tag_for`: two daemons
//! planning the same group name it alike) and persisted with the group before the MIG is created,
//! so a retry or a restart reuses the same name. slurm-dws only ever
//! touches a MIG whose name AND `description` both say it belongs to this cluster: a name
//! prefix alone could be a colleague's hand-made MIG.

use std::fmt;

use crate::config::Config;

/// First word of every description slurm-dws writes; the version lets a later format coexist.
pub const OWNERSHIP_MAGIC: &str = "slurm-dws/v1";

/// A node name that is one of ours, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRef {
    pub nodeset: String,
    pub index: u32,
    /// Index below `node_count_static`: kept provisioned by the daemon.
    pub is_static: bool,
}

/// A node name that is not one of ours, and why. Its `Display` is the sentence slurm-dws puts in the
/// event log and in the node's reason when it sets the node DOWN in Slurm.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotOurs {
    #[error("{node} is not a node of cluster {cluster}")]
    OtherCluster { node: String, cluster: String },
    #[error("{node}: no nodeset '{nodeset}' in cluster {cluster}")]
    UnknownNodeset { node: String, nodeset: String, cluster: String },
    #[error("{node}: no index after nodeset {nodeset}")]
    NoIndex { node: String, nodeset: String },
    #[error("{node}: index {index:?} is not a decimal number")]
    NotDecimal { node: String, index: String },
    #[error("{node}: index {index} has a leading zero (slurm-dws node names have none)")]
    LeadingZero { node: String, index: String },
    #[error("{node}: index '{index}' is outside nodeset {nodeset} (0..{node_count})")]
    OutOfRange { node: String, nodeset: String, index: String, node_count: u32 },
}

impl NotOurs {
    /// The name that was refused.
    pub fn node(&self) -> &str {
        match self {
            NotOurs::OtherCluster { node, .. }
            | NotOurs::UnknownNodeset { node, .. }
            | NotOurs::NoIndex { node, .. }
            | NotOurs::NotDecimal { node, .. }
            | NotOurs::LeadingZero { node, .. }
            | NotOurs::OutOfRange { node, .. } => node,
        }
    }
}

/// What a MIG's name and description prove about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owned {
    pub nodeset: String,
    pub tag: String,
    pub job: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Range {
    name: String,
    node_count_static: u32,
    node_count: u32,
}

/// The naming rules of one cluster, built once from its config and held by whoever names or
/// classifies nodes (the reconciler's `PlanConfig`, the CLI). The one place a node name is decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Naming {
    cluster: String,
    nodesets: Vec<Range>,
}

impl Naming {
    /// Capture what naming needs from `config` (cheap to clone, no borrow of the config).
    pub fn new(config: &Config) -> Self {
        Naming::with_nodesets(
            &config.cluster_name,
            config.nodesets.iter().map(|n| (n.name.as_str(), n.node_count_static, n.node_count_dynamic_max)),
        )
    }

    /// The rules for cluster `cluster` with nodesets `(name, node_count_static, node_count_dynamic_max)`.
    pub fn with_nodesets<'a>(cluster: &str, nodesets: impl IntoIterator<Item = (&'a str, u32, u32)>) -> Self {
        Naming {
            cluster: cluster.to_string(),
            nodesets: nodesets
                .into_iter()
                .map(|(name, node_count_static, dynamic_max)| Range {
                    name: name.to_string(),
                    node_count_static,
                    node_count: node_count_static + dynamic_max,
                })
                .collect(),
        }
    }

    pub fn cluster_name(&self) -> &str {
        &self.cluster
    }

    fn range(&self, nodeset: &str) -> Option<&Range> {
        self.nodesets.iter().find(|r| r.name == nodeset)
    }

    /// Decode a node name, or say precisely why it is not one of ours.
    pub fn parse(&self, node: &str) -> Result<NodeRef, NotOurs> {
        let other_cluster =
            || NotOurs::OtherCluster { node: node.to_string(), cluster: self.cluster.clone() };
        let rest = node
            .strip_prefix(self.cluster.as_str())
            .and_then(|r| r.strip_prefix('-'))
            .filter(|r| !r.is_empty())
            .ok_or_else(other_cluster)?;
        let unknown = |nodeset: &str| NotOurs::UnknownNodeset {
            node: node.to_string(),
            nodeset: nodeset.to_string(),
            cluster: self.cluster.clone(),
        };
        let Some((nodeset, index)) = rest.split_once('-') else {
            return Err(match self.range(rest) {
                Some(_) => NotOurs::NoIndex { node: node.to_string(), nodeset: rest.to_string() },
                None => unknown(rest),
            });
        };
        let range = self.range(nodeset).ok_or_else(|| unknown(nodeset))?;
        if index.is_empty() || !index.bytes().all(|b| b.is_ascii_digit()) {
            return Err(NotOurs::NotDecimal { node: node.to_string(), index: index.to_string() });
        }
        if index.len() > 1 && index.starts_with('0') {
            return Err(NotOurs::LeadingZero { node: node.to_string(), index: index.to_string() });
        }
        let outside = || NotOurs::OutOfRange {
            node: node.to_string(),
            nodeset: nodeset.to_string(),
            index: index.to_string(),
            node_count: range.node_count,
        };
        let i: u32 = index.parse().map_err(|_| outside())?;
        if i >= range.node_count {
            return Err(outside());
        }
        Ok(NodeRef { nodeset: nodeset.to_string(), index: i, is_static: i < range.node_count_static })
    }

    /// Whether `node` is one of ours (see [`Naming::parse`]).
    pub fn is_ours(&self, node: &str) -> bool {
        self.parse(node).is_ok()
    }

    /// `{cluster}-{nodeset}-{index}`.
    pub fn node_name(&self, nodeset: &str, index: u32) -> String {
        format!("{}-{nodeset}-{index}", self.cluster)
    }

    /// The configured nodesets' names, in config order.
    pub fn nodesets(&self) -> impl Iterator<Item = &str> {
        self.nodesets.iter().map(|r| r.name.as_str())
    }

    /// The static nodes of `nodeset` in index order (empty for an unknown nodeset).
    pub fn static_nodes(&self, nodeset: &str) -> Vec<String> {
        self.range(nodeset)
            .map_or_else(Vec::new, |r| (0..r.node_count_static).map(|i| self.node_name(nodeset, i)).collect())
    }

    /// Every node of `nodeset`, static first (empty for an unknown nodeset).
    pub fn all_nodes(&self, nodeset: &str) -> Vec<String> {
        self.range(nodeset)
            .map_or_else(Vec::new, |r| (0..r.node_count).map(|i| self.node_name(nodeset, i)).collect())
    }

    /// `{cluster}-{nodeset}-`: what every node and MIG name of the nodeset starts with.
    pub fn prefix(&self, nodeset: &str) -> String {
        format!("{}-{nodeset}-", self.cluster)
    }

    /// `{cluster}-{nodeset}-j{job}-{tag}`, or `{cluster}-{nodeset}-{tag}` for a jobless group.
    /// At most 46 characters with valid cluster and nodeset names, so always a valid GCE name.
    pub fn mig_name(&self, nodeset: &str, job_id: Option<u32>, tag: &str) -> String {
        match job_id {
            Some(job) => format!("{}j{job}-{tag}", self.prefix(nodeset)),
            None => format!("{}{tag}", self.prefix(nodeset)),
        }
    }

    /// The MIG `description` that proves ownership:
    /// `slurm-dws/v1 cluster=C nodeset=N tag=T` plus ` job=J` when the group has a job.
    pub fn ownership_description(&self, nodeset: &str, tag: &str, job: Option<u32>) -> String {
        let mut d = format!("{OWNERSHIP_MAGIC} cluster={} nodeset={nodeset} tag={tag}", self.cluster);
        if let Some(job) = job {
            d.push_str(&format!(" job={job}"));
        }
        d
    }

    /// `Some` only when the description is ours for THIS cluster and the MIG's name is exactly
    /// the name those fields produce (so the `{cluster}-{nodeset}-` prefix matches too).
    ///
    /// The nodeset need not be configured any more: a MIG of a removed nodeset is still ours
    /// to clean up.
    pub fn parse_ownership(&self, mig_name: &str, description: &str) -> Option<Owned> {
        let mut words = description.split_whitespace();
        if words.next()? != OWNERSHIP_MAGIC {
            return None;
        }
        let (mut cluster, mut nodeset, mut tag, mut job) = (None, None, None, None);
        for word in words {
            let (k, v) = word.split_once('=')?;
            let slot = match k {
                "cluster" => &mut cluster,
                "nodeset" => &mut nodeset,
                "tag" => &mut tag,
                "job" => &mut job,
                _ => continue, // a later v1 may add fields; they prove nothing either way
            };
            if slot.replace(v).is_some() {
                return None; // a repeated field is not something we wrote
            }
        }
        let (nodeset, tag) = (nodeset?, tag?);
        if cluster? != self.cluster || !is_tag(tag) || !crate::config::is_nodeset_name(nodeset) {
            return None;
        }
        let job = match job {
            None => None,
            Some(j) => {
                let n: u32 = j.parse().ok()?;
                (n.to_string() == j).then_some(n)?;
                Some(n)
            }
        };
        (mig_name == self.mig_name(nodeset, job, tag)).then(|| Owned {
            nodeset: nodeset.to_string(),
            tag: tag.to_string(),
            job,
        })
    }
}

/// A fresh MIG tag: 8 lowercase hex characters.
pub fn new_tag(rng: &mut impl rand::Rng) -> String {
    format!("{:08x}", rng.gen::<u32>())
}

/// The tag of a new request group, from what makes the group (`key`: its nodeset, job, nodes and
/// when Slurm asked for them) and `attempt` (0, then 1, 2, ... while the tag is taken): the same
/// group planned by two daemons (two controllers acting at once on one shared state) gets the same
/// MIG and resize request names, so GCE answers the second "already exists" instead of making two.
pub fn tag_for(key: &str, attempt: u32) -> String {
    let h = xxhash_rust::xxh3::xxh3_64(format!("{key}#{attempt}").as_bytes());
    format!("{:08x}", h as u32)
}

/// Whether `s` has the shape of a tag made by [`new_tag`] or [`tag_for`].
pub fn is_tag(s: &str) -> bool {
    s.len() == 8 && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The resize request of a group: `rr-{tag}` (unique within its MIG, which is per group anyway).
pub fn resize_request_name(tag: &str) -> String {
    format!("rr-{tag}")
}

impl fmt::Display for NodeRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = if self.is_static { "static" } else { "dynamic" };
        write!(f, "{} node {} of nodeset {}", kind, self.index, self.nodeset)
    }
}

/// The name of the workload policy slurm-dws owns for `nodeset`.
pub fn policy_name(cluster: &str, nodeset: &str) -> String {
    format!("{cluster}-{nodeset}-wp")
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn naming() -> Naming {
        let text = r#"
cluster_name = "hpc"
[gcp]
project = "p"
region = "us-central1"
[[nodeset]]
name = "a3u"
instance_template = "projects/p/global/instanceTemplates/t"
zones = ["us-central1-a"]
node_count_static = 2
node_count_dynamic_max = 14
[[nodeset]]
name = "gpu"
instance_template = "projects/p/global/instanceTemplates/t"
zones = ["us-central1-a"]
node_count_dynamic_max = 2
[[nodeset]]
name = "gpu2"
instance_template = "projects/p/global/instanceTemplates/t"
zones = ["us-central1-a"]
node_count_dynamic_max = 20
"#;
        let config = Config::from_toml_str(text, std::path::Path::new("t.toml")).unwrap();
        Naming::new(&config)
    }

    #[test]
    fn parse_table() {
        let n = naming();
        let ok = |ns: &str, index, is_static| Ok(NodeRef { nodeset: ns.to_string(), index, is_static });
        let err = |sentence: &str| Err(sentence.to_string());
        let cases = [
            ("hpc-a3u-0", ok("a3u", 0, true)),
            ("hpc-a3u-1", ok("a3u", 1, true)),
            ("hpc-a3u-2", ok("a3u", 2, false)),
            ("hpc-a3u-15", ok("a3u", 15, false)),
            ("hpc-gpu-1", ok("gpu", 1, false)),
            ("hpc-gpu2-1", ok("gpu2", 1, false)),
            ("hpc-gpu2-10", ok("gpu2", 10, false)),
            ("hpc-a3u-16", err("hpc-a3u-16: index '16' is outside nodeset a3u (0..16)")),
            ("hpc-a3u-99", err("hpc-a3u-99: index '99' is outside nodeset a3u (0..16)")),
            ("hpc-gpu-10", err("hpc-gpu-10: index '10' is outside nodeset gpu (0..2)")),
            (
                "hpc-a3u-4294967296",
                err("hpc-a3u-4294967296: index '4294967296' is outside nodeset a3u (0..16)"),
            ),
            ("foo-1", err("foo-1 is not a node of cluster hpc")),
            ("hpc-gp-1", err("hpc-gp-1: no nodeset 'gp' in cluster hpc")),
            ("hpc-gpu3-1", err("hpc-gpu3-1: no nodeset 'gpu3' in cluster hpc")),
            ("hpcx-a3u-1", err("hpcx-a3u-1 is not a node of cluster hpc")),
            ("HPC-a3u-1", err("HPC-a3u-1 is not a node of cluster hpc")),
            ("hpc", err("hpc is not a node of cluster hpc")),
            ("hpc-", err("hpc- is not a node of cluster hpc")),
            ("", err(" is not a node of cluster hpc")),
            ("hpc-a3u", err("hpc-a3u: no index after nodeset a3u")),
            ("hpc-gp", err("hpc-gp: no nodeset 'gp' in cluster hpc")),
            ("hpc-a3u-01", err("hpc-a3u-01: index 01 has a leading zero (slurm-dws node names have none)")),
            ("hpc-a3u-00", err("hpc-a3u-00: index 00 has a leading zero (slurm-dws node names have none)")),
            ("hpc-a3u-", err("hpc-a3u-: index \"\" is not a decimal number")),
            ("hpc-a3u-1a", err("hpc-a3u-1a: index \"1a\" is not a decimal number")),
            ("hpc-a3u-+1", err("hpc-a3u-+1: index \"+1\" is not a decimal number")),
            ("hpc-a3u-1-2", err("hpc-a3u-1-2: index \"1-2\" is not a decimal number")),
            ("hpc-a3u- 1", err("hpc-a3u- 1: index \" 1\" is not a decimal number")),
        ];
        for (node, want) in cases {
            let got = n.parse(node);
            if let Err(e) = &got {
                assert_eq!(e.node(), node);
            }
            assert_eq!(got.map_err(|e| e.to_string()), want, "{node}");
            assert_eq!(n.is_ours(node), want.is_ok(), "{node}");
        }
    }

    #[test]
    fn names_round_trip() {
        let n = naming();
        for ns in ["a3u", "gpu", "gpu2"] {
            for (i, name) in n.all_nodes(ns).iter().enumerate() {
                let r = n.parse(name).unwrap();
                assert_eq!((r.nodeset.as_str(), r.index as usize), (ns, i));
                assert_eq!(&n.node_name(ns, r.index), name);
            }
        }
        assert_eq!(n.static_nodes("a3u"), ["hpc-a3u-0", "hpc-a3u-1"]);
        assert!(n.static_nodes("gpu").is_empty());
        assert_eq!(n.all_nodes("gpu"), ["hpc-gpu-0", "hpc-gpu-1"]);
        assert_eq!(n.all_nodes("a3u").len(), 16);
        assert_eq!(n.all_nodes("a3u")[15], "hpc-a3u-15");
        assert!(n.all_nodes("nope").is_empty());
    }

    #[test]
    fn mig_and_request_names() {
        let n = naming();
        let cases = [
            ("a3u", Some(42), "0a1b2c3d", "hpc-a3u-j42-0a1b2c3d"),
            ("a3u", None, "0a1b2c3d", "hpc-a3u-0a1b2c3d"),
            ("gpu2", Some(u32::MAX), "ffffffff", "hpc-gpu2-j4294967295-ffffffff"),
        ];
        for (ns, job, tag, want) in cases {
            let name = n.mig_name(ns, job, tag);
            assert_eq!(name, want);
            assert!(crate::config::is_rfc1035(&name), "{name}");
        }
        // The longest possible MIG name still fits GCE's 63 characters.
        let long = format!("{}-{}-j{}-{}", "a".repeat(10), "b".repeat(14), u32::MAX, "ffffffff");
        assert!(long.len() <= 63 && crate::config::is_rfc1035(&long));
        assert_eq!(resize_request_name("0a1b2c3d"), "rr-0a1b2c3d");
        assert!(crate::config::is_rfc1035(&resize_request_name("0a1b2c3d")));
    }

    #[test]
    fn tags() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let tags: Vec<String> = (0..100).map(|_| new_tag(&mut rng)).collect();
        for t in &tags {
            assert!(is_tag(t), "{t}");
        }
        let mut unique = tags.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), tags.len());
        for bad in ["", "0a1b2c3", "0a1b2c3d0", "0A1B2C3D", "0a1b2c3g"] {
            assert!(!is_tag(bad), "{bad}");
        }
    }

    #[test]
    fn ownership() {
        let n = naming();
        let d = n.ownership_description("a3u", "0a1b2c3d", Some(42));
        assert_eq!(d, "slurm-dws/v1 cluster=hpc nodeset=a3u tag=0a1b2c3d job=42");
        assert_eq!(
            n.ownership_description("a3u", "0a1b2c3d", None),
            "slurm-dws/v1 cluster=hpc nodeset=a3u tag=0a1b2c3d"
        );
        let owned = |ns: &str, tag: &str, job| Some(Owned { nodeset: ns.into(), tag: tag.into(), job });
        let cases: &[(&str, &str, Option<Owned>)] = &[
            ("hpc-a3u-j42-0a1b2c3d", &d, owned("a3u", "0a1b2c3d", Some(42))),
            (
                "hpc-a3u-0a1b2c3d",
                "slurm-dws/v1 cluster=hpc nodeset=a3u tag=0a1b2c3d",
                owned("a3u", "0a1b2c3d", None),
            ),
            // A nodeset no longer in the config is still ours to clean up.
            (
                "hpc-old-0a1b2c3d",
                "slurm-dws/v1 cluster=hpc nodeset=old tag=0a1b2c3d",
                owned("old", "0a1b2c3d", None),
            ),
            // Unknown fields of a later v1 are ignored.
            (
                "hpc-a3u-0a1b2c3d",
                "slurm-dws/v1 cluster=hpc nodeset=a3u tag=0a1b2c3d zone=x",
                owned("a3u", "0a1b2c3d", None),
            ),
            // Right name, description of another cluster.
            ("hpc-a3u-j42-0a1b2c3d", "slurm-dws/v1 cluster=hpc2 nodeset=a3u tag=0a1b2c3d job=42", None),
            // Right description, name not matching it.
            ("hpc-a3u-j43-0a1b2c3d", &d, None),
            ("hpc-gpu-j42-0a1b2c3d", &d, None),
            ("other-a3u-j42-0a1b2c3d", &d, None),
            ("hpc-a3u-j42-0a1b2c3d-x", &d, None),
            // A hand-made MIG with our prefix and no (or a free-text) description.
            ("hpc-a3u-j42-0a1b2c3d", "", None),
            ("hpc-a3u-j42-0a1b2c3d", "made by alice", None),
            ("hpc-a3u-j42-0a1b2c3d", "slurm-dws/v2 cluster=hpc nodeset=a3u tag=0a1b2c3d job=42", None),
            // Malformed or duplicated fields.
            ("hpc-a3u-j42-0a1b2c3d", "slurm-dws/v1 cluster=hpc nodeset=a3u tag=0a1b2c3d job=042", None),
            (
                "hpc-a3u-j42-0a1b2c3d",
                "slurm-dws/v1 cluster=hpc cluster=hpc nodeset=a3u tag=0a1b2c3d job=42",
                None,
            ),
            ("hpc-a3u-j42-0a1b2c3d", "slurm-dws/v1 cluster=hpc nodeset=a3u job=42", None),
            ("hpc-a3u-j42-0A1B2C3D", "slurm-dws/v1 cluster=hpc nodeset=a3u tag=0A1B2C3D job=42", None),
            ("hpc-a3u-j42-0a1b2c3d", "slurm-dws/v1 cluster=hpc nodeset=a3u tag=0a1b2c3d job=42 junk", None),
        ];
        for (name, desc, want) in cases {
            assert_eq!(&n.parse_ownership(name, desc), want, "{name} / {desc}");
        }
    }
}
