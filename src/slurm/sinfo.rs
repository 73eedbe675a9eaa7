//! Nodes as `sinfo --json` reports them: base state, state flags, reason, address.
//!
//! Measured on 22.05.8 (openapi v0.0.38): `sinfo --json` lists each node ONCE whatever the
//! number of partitions it is in (`partitions` is an array), ignores `-n`/`-p` filters, and with
//! `PrivateData=cloud` includes powered-down cloud nodes (without it, it lists none). `state` is
//! the lower-case base state (`idle`, `allocated`, `mixed`, `down`, ...) and `state_flags` the
//! upper-case flags, e.g. `idle~` is `"idle"` + `["CLOUD","POWERED_DOWN"]`, a node being resumed
//! for a job is `"allocated"` + `["CLOUD","NOT_RESPONDING","POWERING_UP"]`, `power_down_force`
//! passes through `POWER_DOWN` and `POWERING_DOWN`. 23.02+ prints `state` as one upper-case
//! array (base state first, then flags); both shapes are accepted.

use serde::Deserialize;
use serde_json::Value;

use super::ParseError;

/// One node as slurm-dws needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeInfo {
    pub name: String,
    /// The base state, lower case: `idle`, `allocated`, `mixed`, `down`, `future`, ...
    pub state: String,
    /// State flags, upper case as Slurm prints them: `CLOUD`, `POWERED_DOWN`, `POWERING_UP`,
    /// `POWERING_DOWN`, `POWER_DOWN`, `NOT_RESPONDING`, `DRAIN`, ...
    pub flags: Vec<String>,
    pub reason: String,
    /// `NodeAddr`: where slurmctld reaches the node.
    pub address: String,
    /// `NodeHostname`.
    pub hostname: String,
    pub partitions: Vec<String>,
}

impl NodeInfo {
    /// Whether the node carries `flag` (case-insensitive).
    pub fn has_flag(&self, flag: &str) -> bool {
        self.flags.iter().any(|f| f.eq_ignore_ascii_case(flag))
    }

    /// Powered down and not on its way up: Slurm's `~` suffix without `#`.
    pub fn is_powered_down(&self) -> bool {
        self.has_flag("POWERED_DOWN") && !self.has_flag("POWERING_UP")
    }

    /// The compact state as `sinfo -o %T` would print it, e.g. `idle~`, `allocated#`, `down~`.
    /// Handy in logs and test assertions.
    pub fn compact_state(&self) -> String {
        let suffix = if self.has_flag("POWERING_UP") {
            "#"
        } else if self.has_flag("POWERING_DOWN") {
            "%"
        } else if self.has_flag("POWER_DOWN") {
            "!"
        } else if self.has_flag("POWERED_DOWN") {
            "~"
        } else if self.has_flag("NOT_RESPONDING") {
            "*"
        } else {
            ""
        };
        format!("{}{}", self.state, suffix)
    }
}

/// The document, decoded node by node: each raw node becomes a [`NodeInfo`] as soon as it is read, so
/// the raw form of 10,000 nodes never exists at once.
#[derive(Deserialize)]
struct Document {
    #[serde(deserialize_with = "nodes_one_by_one")]
    nodes: Vec<NodeInfo>,
}

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

fn nodes_one_by_one<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<NodeInfo>, D::Error> {
    struct Nodes;
    impl<'de> serde::de::Visitor<'de> for Nodes {
        type Value = Vec<NodeInfo>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("an array of nodes")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<NodeInfo>, A::Error> {
            let mut nodes: Vec<NodeInfo> = Vec::with_capacity(seq.size_hint().unwrap_or(0));
            let mut seen = std::collections::HashSet::new();
            while let Some(raw) = seq.next_element::<RawNode>()? {
                if seen.contains(&raw.name) {
                    continue;
                }
                seen.insert(raw.name.clone());
                nodes.push(node_info(raw).map_err(serde::de::Error::custom)?);
            }
            Ok(nodes)
        }
    }
    d.deserialize_seq(Nodes)
}

fn node_info(raw: RawNode) -> Result<NodeInfo, String> {
    let (state, mut flags) = match raw.state {
        Value::String(s) => (s.to_ascii_lowercase(), Vec::new()),
        Value::Array(items) => {
            let mut words = items.iter().filter_map(Value::as_str);
            let base = words.next().unwrap_or_default().to_ascii_lowercase();
            (base, words.map(str::to_string).collect())
        }
        _ => return Err(format!("node {}: `state` is neither a string nor an array", raw.name)),
    };
    flags.extend(raw.state_flags);
    let reason = match raw.reason {
        Value::String(s) => s,
        _ => String::new(),
    };
    Ok(NodeInfo {
        name: raw.name,
        state,
        flags,
        reason,
        address: raw.address.unwrap_or_default(),
        hostname: raw.hostname.unwrap_or_default(),
        partitions: raw.partitions,
    })
}

/// Parses `sinfo --json` output. A node listed twice (never seen, but cheap to guard) is kept once.
pub fn parse_nodes(json: &[u8]) -> Result<Vec<NodeInfo>, ParseError> {
    let doc: Document = serde_json::from_slice(json).map_err(|e| ParseError::new("sinfo --json", e))?;
    Ok(doc.nodes)
}

/// [`parse_nodes`] from a stream, as `sinfo` writes it.
pub fn read_nodes(json: &mut dyn std::io::Read) -> Result<Vec<NodeInfo>, ParseError> {
    let doc: Document = serde_json::from_reader(json).map_err(|e| ParseError::new("sinfo --json", e))?;
    Ok(doc.nodes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Captured from a real 22.05.8 cluster: two powered-down cloud nodes in two partitions.
    const CAPTURED: &[u8] = include_bytes!("testdata/sinfo-22.05-powered-down.json");

    #[test]
    fn read_from_a_stream_as_from_bytes() {
        let streamed = read_nodes(&mut std::io::BufReader::with_capacity(5, CAPTURED)).unwrap();
        assert_eq!(streamed, parse_nodes(CAPTURED).unwrap());
        let err = read_nodes(&mut &br#"{"nodes": [{"name": "a-1", "state": 3}]}"#[..]).unwrap_err();
        assert!(err.to_string().contains("node a-1: `state` is neither"), "{err}");
    }

    #[test]
    fn captured_22_05_output_lists_each_node_once() {
        let nodes = parse_nodes(CAPTURED).unwrap();
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

    fn node(state: &str, flags: &[&str]) -> NodeInfo {
        NodeInfo {
            name: "n".into(),
            state: state.into(),
            flags: flags.iter().map(|f| f.to_string()).collect(),
            reason: String::new(),
            address: String::new(),
            hostname: String::new(),
            partitions: vec![],
        }
    }

    /// The states of docs/slurm-facts.md ("Node states"), as sinfo --json spelled them on a live cluster.
    #[test]
    fn compact_states() {
        let cases = [
            (node("idle", &["CLOUD", "POWERED_DOWN"]), "idle~", true),
            (node("idle", &["CLOUD", "POWER_UP", "POWERED_DOWN"]), "idle~", true),
            (node("allocated", &["CLOUD", "NOT_RESPONDING", "POWERING_UP"]), "allocated#", false),
            (node("idle", &["CLOUD", "POWERING_DOWN"]), "idle%", false),
            (node("idle", &["CLOUD", "POWER_DOWN", "NOT_RESPONDING"]), "idle!", false),
            (node("down", &["CLOUD", "POWERED_DOWN", "NOT_RESPONDING"]), "down~", true),
            (node("idle", &["CLOUD", "NOT_RESPONDING"]), "idle*", false),
            (node("allocated", &["CLOUD"]), "allocated", false),
        ];
        for (n, compact, powered_down) in cases {
            assert_eq!(n.compact_state(), compact, "{:?}", n.flags);
            assert_eq!(n.is_powered_down(), powered_down, "{:?}", n.flags);
        }
    }

    #[test]
    fn newer_array_state_and_duplicates() {
        let doc = br#"{"nodes":[
            {"name":"a","state":["IDLE","CLOUD","POWERED_DOWN"],"reason":"r","partitions":["p"]},
            {"name":"a","state":"down"},
            {"name":"b","state":"down","state_flags":["DRAIN"],"reason":null}]}"#;
        let nodes = parse_nodes(doc).unwrap();
        assert_eq!(nodes.len(), 2);
        assert_eq!(nodes[0].state, "idle");
        assert_eq!(nodes[0].flags, vec!["CLOUD", "POWERED_DOWN"]);
        assert_eq!(nodes[0].reason, "r");
        assert_eq!(nodes[1].compact_state(), "down");
        assert!(nodes[1].has_flag("drain"));
    }

    #[test]
    fn garbage_is_a_parse_error() {
        for doc in [
            &b"{\"nodes\":[{\"name\":\"a\",\"state\":3}]}"[..],
            b"{\"nodes\":[{\"state\":\"idle\"}]}",
            b"not json",
            b"[]",
        ] {
            let err = parse_nodes(doc).unwrap_err();
            assert!(err.to_string().contains("sinfo --json"), "{err}");
        }
    }
}
