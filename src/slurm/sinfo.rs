//! Nodes as `sinfo --json` reports them, in its two shapes: 22.05's node array and 23.02+'s groups.
//!
//! **22.05.8** (openapi v0.0.38), measured: `{"meta","errors","nodes":[...]}`, each node ONCE
//! whatever the number of partitions it is in (`partitions` is an array); `-n`/`-p` filters are
//! ignored; with `PrivateData=cloud` powered-down cloud nodes are included (without it, none are).
//! `state` is the lower-case base state (`idle`, `allocated`, `mixed`, `down`, ...) and
//! `state_flags` the upper-case flags: `idle~` is `"idle"` + `["CLOUD","POWERED_DOWN"]`, a node
//! being resumed for a job is `"allocated"` + `["CLOUD","NOT_RESPONDING","POWERING_UP"]`,
//! `power_down_force` passes through `POWER_DOWN` and `POWERING_DOWN`.
//!
//! **23.02 and later** (24.11.5, data_parser v0.0.42, measured): `{"sinfo":[...],"meta","errors",
//! "warnings"}` and NO `nodes` key. `sinfo --json` prints what plain `sinfo` prints: one entry per
//! (partition, state) group, `node.state` an upper-case array (base state first:
//! `["IDLE","CLOUD","POWERED_DOWN"]`), `nodes.nodes` the names in the group, `reason.description`,
//! `partition.name`. A node in two partitions is in two groups; `nodes.hostnames` and
//! `nodes.addresses` were empty arrays, so addresses are not read from here. slurm-dws reads these
//! versions through `scontrol --json show nodes` ([`super::scontrol_nodes`]); this shape is parsed
//! too, so `sinfo` still works on them, groups merged into one [`NodeInfo`] per node.

use std::fmt;

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;

pub use super::node::NodeInfo;
use super::node::{reason_text, split_state, without_position, NodeList};
use super::ParseError;

const WHAT: &str = "sinfo --json";

/// The whole document, decoded entry by entry: each raw node or group is turned into [`NodeInfo`]
/// as soon as it is read, so the raw form of 10,000 nodes never exists at once.
struct Document(Vec<NodeInfo>);

impl<'de> Deserialize<'de> for Document {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(DocumentVisitor)
    }
}

struct DocumentVisitor;

impl<'de> Visitor<'de> for DocumentVisitor {
    type Value = Document;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object with `nodes` (Slurm 22.05) or `sinfo` (23.02+)")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Document, A::Error> {
        let mut list = NodeList::default();
        let mut found = false;
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "nodes" => {
                    map.next_value_seed(NodeArray(&mut list))?;
                    found = true;
                }
                "sinfo" => {
                    map.next_value_seed(GroupArray(&mut list))?;
                    found = true;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        if !found {
            return Err(de::Error::custom("missing field `nodes` (Slurm 22.05) or `sinfo` (23.02+)"));
        }
        Ok(Document(list.into_vec()))
    }
}

/// 22.05: `nodes`, one object per node.
struct NodeArray<'a>(&'a mut NodeList);

#[derive(Deserialize)]
struct RawNode {
    name: String,
    #[serde(default)]
    state: Value,
    #[serde(default)]
    state_flags: Vec<String>,
    #[serde(default)]
    reason: Value,
    #[serde(default)]
    address: Option<String>,
    #[serde(default)]
    hostname: Option<String>,
    #[serde(default)]
    partitions: Vec<String>,
}

impl<'de> de::DeserializeSeed<'de> for NodeArray<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for NodeArray<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of nodes")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        for i in 0.. {
            let raw = match seq.next_element::<RawNode>() {
                Ok(Some(raw)) => raw,
                Ok(None) => break,
                Err(e) => return Err(de::Error::custom(format!("nodes[{i}]: {}", without_position(&e)))),
            };
            let (state, mut flags) =
                split_state(raw.state).map_err(|e| de::Error::custom(format!("node {}: {e}", raw.name)))?;
            flags.extend(raw.state_flags);
            self.0.push_first(NodeInfo {
                name: raw.name,
                state,
                flags,
                reason: reason_text(raw.reason),
                address: raw.address.unwrap_or_default(),
                hostname: raw.hostname.unwrap_or_default(),
                partitions: raw.partitions,
            });
        }
        Ok(())
    }
}

/// 23.02+: `sinfo`, one object per (partition, state) group.
struct GroupArray<'a>(&'a mut NodeList);

#[derive(Deserialize)]
struct RawGroup {
    node: RawGroupNode,
    nodes: RawGroupNodes,
    #[serde(default)]
    reason: Option<RawReason>,
    #[serde(default)]
    partition: Option<RawPartition>,
}

#[derive(Deserialize)]
struct RawGroupNode {
    state: Value,
}

#[derive(Deserialize)]
struct RawGroupNodes {
    nodes: Vec<String>,
}

#[derive(Deserialize)]
struct RawReason {
    #[serde(default)]
    description: Value,
}

#[derive(Deserialize)]
struct RawPartition {
    #[serde(default)]
    name: Option<String>,
}

impl<'de> de::DeserializeSeed<'de> for GroupArray<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for GroupArray<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of node groups")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        for i in 0.. {
            let group = match seq.next_element::<RawGroup>() {
                Ok(Some(group)) => group,
                Ok(None) => break,
                Err(e) => return Err(de::Error::custom(format!("sinfo[{i}]: {}", without_position(&e)))),
            };
            let at = |e: String| de::Error::custom(format!("sinfo[{i}]: {e}"));
            let (state, flags) = split_state(group.node.state).map_err(|e| at(format!("node.{e}")))?;
            let reason = group.reason.map(|r| reason_text(r.description)).unwrap_or_default();
            let partition = group.partition.and_then(|p| p.name).filter(|p| !p.is_empty());
            for item in group.nodes.nodes {
                // Names, one each (measured); a hostlist expression would be expanded.
                let names = if item.contains('[') {
                    crate::hostlist::expand(&item).map_err(|e| at(format!("nodes.nodes: {item}: {e}")))?
                } else {
                    vec![item]
                };
                for name in names {
                    let node = self.0.entry(name, |name| NodeInfo {
                        name,
                        state: state.clone(),
                        flags: flags.clone(),
                        reason: reason.clone(),
                        address: String::new(),
                        hostname: String::new(),
                        partitions: Vec::new(),
                    });
                    if let Some(p) = &partition {
                        if !node.partitions.contains(p) {
                            node.partitions.push(p.clone());
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

/// Parses `sinfo --json` output of any supported version. A node listed twice (22.05: never
/// seen, but cheap to guard) is kept once; 23.02+'s groups are merged per node.
pub fn parse_nodes(json: &[u8]) -> Result<Vec<NodeInfo>, ParseError> {
    let doc: Document = serde_json::from_slice(json).map_err(|e| ParseError::new(WHAT, e))?;
    Ok(doc.0)
}

/// [`parse_nodes`] from a stream, as `sinfo` writes it.
pub fn read_nodes(json: &mut dyn std::io::Read) -> Result<Vec<NodeInfo>, ParseError> {
    let doc: Document = serde_json::from_reader(json).map_err(|e| ParseError::new(WHAT, e))?;
    Ok(doc.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The captures of `testdata/` (see its README): 22.05.8 and 24.11.5.
    const V22_05_POWERED_DOWN: &[u8] = include_bytes!("testdata/sinfo-22.05-powered-down.json");
    const V24_11_POWERED_DOWN: &[u8] = include_bytes!("testdata/sinfo-24.11-powered-down.json");
    const V24_11_POWERING_UP: &[u8] = include_bytes!("testdata/sinfo-24.11-powering-up.json");
    const V24_11_ALLOCATED_UP: &[u8] = include_bytes!("testdata/sinfo-24.11-allocated-up.json");
    const V24_11_STATIC_DOWN: &[u8] = include_bytes!("testdata/sinfo-24.11-static-down.json");

    const GONE: &str =
        "slurm-dws: the VM is gone (deleted outside slurm-dws, or GCE removed it); re-provisioning";

    /// (name, compact state, flags, reason, address, partitions) of every node, in order.
    type Row = (String, String, Vec<String>, String, String, Vec<String>);

    fn rows(nodes: &[NodeInfo]) -> Vec<Row> {
        nodes
            .iter()
            .map(|n| {
                (
                    n.name.clone(),
                    n.compact_state(),
                    n.flags.clone(),
                    n.reason.clone(),
                    n.address.clone(),
                    n.partitions.clone(),
                )
            })
            .collect()
    }

    fn row(name: &str, compact: &str, flags: &[&str], reason: &str, address: &str, parts: &[&str]) -> Row {
        let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect();
        (name.into(), compact.into(), strings(flags), reason.into(), address.into(), strings(parts))
    }

    #[test]
    fn captured_22_05_output_lists_each_node_once() {
        let nodes = parse_nodes(V22_05_POWERED_DOWN).unwrap();
        assert_eq!(
            nodes[0],
            NodeInfo {
                name: "dws-a-0".into(),
                state: "idle".into(),
                flags: vec!["CLOUD".into(), "POWERED_DOWN".into()],
                reason: String::new(),
                address: "127.0.0.1".into(),
                hostname: "dws-a-0".into(),
                partitions: vec!["flex".into(), "lim".into()],
            }
        );
        assert_eq!(nodes.len(), 2);
        assert_eq!(nodes[1].name, "dws-a-1");
        assert!(nodes.iter().all(NodeInfo::is_powered_down));
    }

    /// 24.11.5: the four states of the captures, each node once with both its partitions.
    #[test]
    fn captured_24_11_groups_become_one_node_each() {
        let all = ["lab-a3-0", "lab-a3-1", "lab-a3-2", "lab-a3-3"];
        let both = ["a3", "lim"];
        let cases: [(&[u8], Vec<Row>); 4] = [
            (
                V24_11_POWERED_DOWN,
                all.iter().map(|n| row(n, "idle~", &["CLOUD", "POWERED_DOWN"], "", "", &both)).collect(),
            ),
            (
                V24_11_POWERING_UP,
                all.iter()
                    .map(|n| row(n, "allocated#", &["CLOUD", "NOT_RESPONDING", "POWERING_UP"], "", "", &both))
                    .collect(),
            ),
            (
                V24_11_ALLOCATED_UP,
                all.iter().map(|n| row(n, "allocated", &["CLOUD"], "", "", &both)).collect(),
            ),
            (
                // A DOWN static node (its VM gone) and three powered-down nodes, one partition.
                V24_11_STATIC_DOWN,
                vec![
                    row("lab-a3-1", "idle~", &["CLOUD", "POWERED_DOWN"], "", "", &["a3"]),
                    row("lab-a3-2", "idle~", &["CLOUD", "POWERED_DOWN"], "", "", &["a3"]),
                    row("lab-a3-3", "idle~", &["CLOUD", "POWERED_DOWN"], "", "", &["a3"]),
                    row("lab-a3-0", "down", &["CLOUD"], GONE, "", &["a3"]),
                ],
            ),
        ];
        for (doc, want) in cases {
            let nodes = parse_nodes(doc).unwrap();
            assert_eq!(rows(&nodes), want);
            let streamed = read_nodes(&mut std::io::BufReader::with_capacity(7, doc)).unwrap();
            assert_eq!(streamed, nodes);
        }
        let down = &parse_nodes(V24_11_STATIC_DOWN).unwrap()[3];
        assert_eq!(down.state, "down");
        assert!(!down.is_powered_down());
    }

    #[test]
    fn read_from_a_stream_as_from_bytes() {
        let streamed = read_nodes(&mut std::io::BufReader::with_capacity(5, V22_05_POWERED_DOWN)).unwrap();
        assert_eq!(streamed, parse_nodes(V22_05_POWERED_DOWN).unwrap());
    }

    /// Documents that are not what any version prints say where they went wrong.
    #[test]
    fn garbage_is_a_parse_error_naming_the_field() {
        let cases: [(&[u8], &str); 10] = [
            (br#"{"nodes":[{"name":"a","state":3}]}"#, "node a: `state` is 3"),
            (
                br#"{"nodes":[{"name":"a","state":"idle"},{"state":"idle"}]}"#,
                "nodes[1]: missing field `name`",
            ),
            (br#"{"meta":{},"errors":[]}"#, "missing field `nodes` (Slurm 22.05) or `sinfo` (23.02+)"),
            (br#"{"sinfo":[{"node":{"state":["IDLE"]}}]}"#, "sinfo[0]: missing field `nodes`"),
            (br#"{"sinfo":[{"nodes":{"nodes":["a"]}}]}"#, "sinfo[0]: missing field `node`"),
            (
                br#"{"sinfo":[{"node":{"state":[]},"nodes":{"nodes":["a"]}}]}"#,
                "sinfo[0]: node.`state` is an empty",
            ),
            (br#"{"sinfo":[{"node":{"state":["IDLE"]},"nodes":{"nodes":"a"}}]}"#, "sinfo[0]: invalid type"),
            (
                br#"{"sinfo":[{"node":{"state":["IDLE"]},"nodes":{"nodes":["a[3-1]"]}}]}"#,
                "sinfo[0]: nodes.nodes: a[3-1]",
            ),
            (b"not json", "expected"),
            (b"[]", "invalid type: sequence"),
        ];
        for (doc, want) in cases {
            let err = parse_nodes(doc).unwrap_err().to_string();
            assert!(
                err.contains("sinfo --json") && err.contains(want),
                "{}: {err}",
                String::from_utf8_lossy(doc)
            );
            assert!(err.matches(" at line ").count() <= 1, "{err}");
        }
    }

    #[test]
    fn groups_merge_partitions_and_expand_hostlists() {
        let doc = br#"{"sinfo":[
            {"node":{"state":["MIXED"]},"nodes":{"nodes":["x-[1-2]"]},"reason":{"description":null},
             "partition":{"name":"p"}},
            {"node":{"state":["MIXED"]},"nodes":{"nodes":["x-2","x-3"]},"partition":{"name":"q"}},
            {"node":{"state":["MIXED"]},"nodes":{"nodes":["x-2"]},"partition":{"name":"q"}}]}"#;
        let nodes = parse_nodes(doc).unwrap();
        let got: Vec<(&str, &str, Vec<String>)> =
            nodes.iter().map(|n| (n.name.as_str(), n.state.as_str(), n.partitions.clone())).collect();
        let p = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            got,
            vec![("x-1", "mixed", p(&["p"])), ("x-2", "mixed", p(&["p", "q"])), ("x-3", "mixed", p(&["q"]))]
        );
    }
}
