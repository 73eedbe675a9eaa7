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

use serde::Deserialize;
use serde_json::Value;

pub use super::node::NodeInfo;
use super::node::{reason_text, split_state, without_position, NodeList};
use super::ParseError;
use crate::json_stream::{field_note_len, for_each_element, only_fields, only_fields_again, Recall};

const WHAT: &str = "sinfo --json";

/// 22.05: one element of `nodes`.
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

/// 23.02+: one element of `sinfo`, a (partition, state) group.
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

/// The fields of a node [`RawNode`] reads; [`only_fields`] keeps them alone before decoding.
const NODE_FIELDS: &[&str] = &["name", "state", "state_flags", "reason", "address", "hostname", "partitions"];

/// The fields a reconcile pass reads ([`read_node_states`]): no address, host name or partitions.
const STATE_FIELDS: &[&str] = &["name", "state", "state_flags", "reason"];

fn add_node(
    list: &mut NodeList,
    i: usize,
    bytes: &[u8],
    fields: &[&str],
    kept: &mut Vec<u8>,
    same: bool,
    note: &mut [u16],
) -> Result<(), String> {
    // An element the same as last time: its fields are where they were.
    if !(same && only_fields_again(bytes, fields, kept, note)) {
        only_fields(bytes, fields, kept, note).map_err(|e| format!("nodes[{i}]: {e}"))?;
    }
    let raw: RawNode =
        serde_json::from_slice(kept).map_err(|e| format!("nodes[{i}]: {}", without_position(&e)))?;
    let (state, mut flags) = split_state(raw.state).map_err(|e| format!("node {}: {e}", raw.name))?;
    flags.extend(raw.state_flags);
    list.push_first(NodeInfo {
        name: raw.name,
        state,
        flags,
        reason: reason_text(raw.reason),
        address: raw.address.unwrap_or_default(),
        hostname: raw.hostname.unwrap_or_default(),
        partitions: raw.partitions,
    });
    Ok(())
}

fn add_group(list: &mut NodeList, i: usize, bytes: &[u8]) -> Result<(), String> {
    let group: RawGroup =
        serde_json::from_slice(bytes).map_err(|e| format!("sinfo[{i}]: {}", without_position(&e)))?;
    let at = |e: String| format!("sinfo[{i}]: {e}");
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
            let node = list.entry(name, |name| NodeInfo {
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
    Ok(())
}

/// Parses `sinfo --json` output of any supported version. A node listed twice (22.05: never
/// seen, but cheap to guard) is kept once; 23.02+'s groups are merged per node.
pub fn parse_nodes(mut json: &[u8]) -> Result<Vec<NodeInfo>, ParseError> {
    read_nodes(&mut json)
}

/// [`parse_nodes`] from a stream, as `sinfo` writes it, one node or group at a time (see
/// `json_stream.rs`).
pub fn read_nodes(json: &mut dyn std::io::BufRead) -> Result<Vec<NodeInfo>, ParseError> {
    read(json, NODE_FIELDS, None)
}

/// [`read_nodes`] without what a reconcile pass does not read: 22.05's nodes come with an empty
/// address, host name and partition list (23.02+'s groups are read whole, they are small).
pub fn read_node_states(json: &mut dyn std::io::BufRead) -> Result<Vec<NodeInfo>, ParseError> {
    read(json, STATE_FIELDS, None)
}

/// [`read_node_states`] remembering each of 22.05's nodes in `recall` (made by [`state_recall`]),
/// so that the nodes unchanged since the last read are neither scanned nor searched for their
/// fields again.
pub(crate) fn read_node_states_recalled(
    json: &mut dyn std::io::BufRead,
    recall: &mut Recall,
) -> Result<Vec<NodeInfo>, ParseError> {
    read(json, STATE_FIELDS, Some(recall))
}

/// A [`Recall`] for [`read_node_states_recalled`].
pub(crate) fn state_recall() -> Recall {
    Recall::new(field_note_len(STATE_FIELDS))
}

fn read(
    json: &mut dyn std::io::BufRead,
    fields: &[&str],
    recall: Option<&mut Recall>,
) -> Result<Vec<NodeInfo>, ParseError> {
    let mut list = NodeList::with_capacity(recall.as_ref().map_or(0, |r| r.len()));
    let mut kept = Vec::new();
    let found = for_each_element(json, &["nodes", "sinfo"], recall, |e| match e.key {
        0 => add_node(&mut list, e.index, e.bytes, fields, &mut kept, e.same, e.kept),
        _ => add_group(&mut list, e.index, e.bytes),
    })
    .map_err(|e| ParseError::new(WHAT, e))?;
    if !found.contains(&true) {
        return Err(ParseError::new(WHAT, "missing field `nodes` (Slurm 22.05) or `sinfo` (23.02+)"));
    }
    Ok(list.into_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pass's read is the full read without address, host name and partitions (22.05's nodes;
    /// 23.02+'s sinfo groups are read whole).
    #[test]
    fn node_states_are_the_nodes_without_what_a_pass_does_not_read() {
        for capture in [V22_05_POWERED_DOWN, V24_11_POWERING_UP, V24_11_STATIC_DOWN] {
            let full = parse_nodes(capture).unwrap();
            let states = read_node_states(&mut &capture[..]).unwrap();
            crate::slurm::assert_states_are_the_nodes_cut(&full, &states);
        }
    }

    /// A read remembering the last one reads what a fresh read does, whatever changed between
    /// them: the same output, a node changed in place, a node gone, and 23.02+'s groups.
    #[test]
    fn node_states_read_with_a_recall_are_those_read_without() {
        let text = std::str::from_utf8(V22_05_POWERED_DOWN).unwrap();
        let changed = text.replacen(r#""state": "idle""#, r#""state": "down""#, 1).replacen(
            r#""reason": """#,
            r#""reason": "not responding""#,
            1,
        );
        assert_ne!(changed, text);
        let fewer: serde_json::Value = {
            let mut doc: serde_json::Value = serde_json::from_str(text).unwrap();
            doc["nodes"].as_array_mut().unwrap().pop();
            doc
        };
        let fewer = serde_json::to_string_pretty(&fewer).unwrap();
        let mut recall = state_recall();
        for (i, output) in [text, text, &changed, text, &fewer, text].into_iter().enumerate() {
            let fresh = read_node_states(&mut output.as_bytes()).unwrap();
            let mut reader = std::io::BufReader::with_capacity(61, output.as_bytes());
            let recalled = read_node_states_recalled(&mut reader, &mut recall).unwrap();
            assert_eq!(rows(&recalled), rows(&fresh), "read {i}");
        }
        for capture in [V24_11_POWERING_UP, V24_11_STATIC_DOWN, V24_11_POWERING_UP] {
            let recalled = read_node_states_recalled(&mut &capture[..], &mut recall).unwrap();
            assert_eq!(rows(&recalled), rows(&read_node_states(&mut &capture[..]).unwrap()));
        }
    }

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

    /// 26.05.5 (see testdata/README.md): the same groups as 24.11's, though 26.05 moves the
    /// reason's user to `reason_set_by_user`, makes `partition.cpus.task_binding` an array and adds
    /// `partition.topology`, none of which slurm-dws reads. Nodes `lab-a-[0-2]` (partition a) and
    /// the static `lab-s-0` (partition s, up).
    #[test]
    fn captured_26_05_groups_become_one_node_each() {
        let a = |compact: &str, flags: &[&str]| -> Vec<Row> {
            (0..3).map(|i| row(&format!("lab-a-{i}"), compact, flags, "", "", &["a"])).collect()
        };
        let s0 = row("lab-s-0", "idle", &["CLOUD"], "", "", &["s"]);
        let cases: [(&[u8], Vec<Row>); 3] = [
            (
                include_bytes!("testdata/sinfo-26.05-powered-down.json"),
                [a("idle~", &["CLOUD", "POWERED_DOWN"]), vec![s0.clone()]].concat(),
            ),
            (
                include_bytes!("testdata/sinfo-26.05-powering-up.json"),
                [a("allocated#", &["CLOUD", "NOT_RESPONDING", "POWERING_UP"]), vec![s0.clone()]].concat(),
            ),
            (
                include_bytes!("testdata/sinfo-26.05-allocated.json"),
                [a("allocated", &["CLOUD"]), vec![s0]].concat(),
            ),
        ];
        for (doc, want) in cases {
            let text = std::str::from_utf8(doc).unwrap();
            assert!(
                text.contains("\"task_binding\": [") || text.contains("\"task_binding\":["),
                "26.05's shape"
            );
            let nodes = parse_nodes(doc).unwrap();
            assert_eq!(rows(&nodes), want);
            let streamed = read_nodes(&mut std::io::BufReader::with_capacity(7, doc)).unwrap();
            assert_eq!(streamed, nodes);
            let states = read_node_states(&mut &doc[..]).unwrap();
            crate::slurm::assert_states_are_the_nodes_cut(&nodes, &states);
        }
    }

    #[test]
    fn read_from_a_stream_as_from_bytes() {
        let streamed = read_nodes(&mut std::io::BufReader::with_capacity(5, V22_05_POWERED_DOWN)).unwrap();
        assert_eq!(streamed, parse_nodes(V22_05_POWERED_DOWN).unwrap());
    }

    /// Documents that are not what any version prints say where they went wrong.
    #[test]
    fn garbage_is_a_parse_error_naming_the_field() {
        let cases: [(&[u8], &str); 11] = [
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
            (b"not json", "expected a JSON object, found `n` at byte 0"),
            (b"[]", "expected a JSON object, found `[` at byte 0"),
            (br#"{"nodes":[{"name":"a","state":"idle"}"#, "the output ends too early"),
        ];
        for (doc, want) in cases {
            let err = parse_nodes(doc).unwrap_err().to_string();
            assert!(
                err.contains("sinfo --json") && err.contains(want),
                "{}: {err}",
                String::from_utf8_lossy(doc)
            );
            assert!(!err.contains(" at line "), "{err}");
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
