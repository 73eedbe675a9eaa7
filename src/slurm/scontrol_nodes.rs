//! Nodes as `scontrol --json show nodes` reports them (Slurm 23.02 and later).
//!
//! 22.05 has no `scontrol --json` (`unrecognized option '--json'`); from 23.02 on it prints what
//! 22.05's `sinfo --json` printed, one object per node, while `sinfo --json` switched to
//! (partition, state) groups (see [`super::sinfo`]). Measured on 24.11.5 (data_parser v0.0.42):
//! `{"nodes":[...],"last_update","meta","errors","warnings"}`, each node with `name`, `state` as an
//! upper-case array, base state first then flags (`["IDLE","CLOUD","POWERED_DOWN"]`,
//! `["DOWN","CLOUD"]`), `reason` (`""` for none), `address`, `hostname`, `partitions` (array), and
//! some sixty fields slurm-dws does not need, which are skipped unread. Powered-down cloud nodes are
//! listed without `PrivateData=cloud` (23.02 made them visible by default).

use serde::Deserialize;
use serde_json::Value;

use super::node::{reason_text, split_state, without_position, NodeInfo, NodeList};
use super::ParseError;
use crate::json_stream::{field_note_len, for_each_element, only_fields, only_fields_again, Recall};

const WHAT: &str = "scontrol --json show nodes";

/// One element of `nodes`: only the fields slurm-dws needs are decoded.
#[derive(Deserialize)]
struct RawNode {
    name: String,
    state: Value,
    #[serde(default)]
    reason: Value,
    #[serde(default)]
    address: Option<String>,
    #[serde(default)]
    hostname: Option<String>,
    #[serde(default)]
    partitions: Option<Vec<String>>,
}

/// The fields of a node [`RawNode`] reads; [`only_fields`] keeps them alone before decoding.
const NODE_FIELDS: &[&str] = &["name", "state", "reason", "address", "hostname", "partitions"];

/// The fields a reconcile pass reads ([`read_node_states`]): no address, host name or partitions.
const STATE_FIELDS: &[&str] = &["name", "state", "reason"];

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
    let (state, flags) = split_state(raw.state).map_err(|e| format!("nodes[{i}] ({}): {e}", raw.name))?;
    list.push_first(NodeInfo {
        name: raw.name,
        state,
        flags,
        reason: reason_text(raw.reason),
        address: raw.address.unwrap_or_default(),
        hostname: raw.hostname.unwrap_or_default(),
        partitions: raw.partitions.unwrap_or_default(),
    });
    Ok(())
}

/// Parses `scontrol --json show nodes` output. A node listed twice is kept once.
pub fn parse_nodes(mut json: &[u8]) -> Result<Vec<NodeInfo>, ParseError> {
    read_nodes(&mut json)
}

/// [`parse_nodes`] from a stream, as `scontrol` writes it, one node at a time (see
/// `json_stream.rs`).
pub fn read_nodes(json: &mut dyn std::io::BufRead) -> Result<Vec<NodeInfo>, ParseError> {
    read(json, NODE_FIELDS, None)
}

/// [`read_nodes`] without what a reconcile pass does not read: nodes come with an empty address,
/// host name and partition list.
pub fn read_node_states(json: &mut dyn std::io::BufRead) -> Result<Vec<NodeInfo>, ParseError> {
    read(json, STATE_FIELDS, None)
}

/// [`read_node_states`] remembering each node in `recall` (made by [`state_recall`]), so that the
/// nodes unchanged since the last read are neither scanned nor searched for their fields again.
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
    let found = for_each_element(json, &["nodes"], recall, |e| {
        add_node(&mut list, e.index, e.bytes, fields, &mut kept, e.same, e.kept)
    })
    .map_err(|e| ParseError::new(WHAT, e))?;
    if !found[0] {
        return Err(ParseError::new(WHAT, "missing field `nodes`"));
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
        for capture in [POWERED_DOWN, STATIC_DOWN] {
            let full = parse_nodes(capture).unwrap();
            let states = read_node_states(&mut &capture[..]).unwrap();
            crate::slurm::assert_states_are_the_nodes_cut(&full, &states);
        }
    }

    /// A read remembering the last one reads what a fresh read does: the same output again, then
    /// another.
    #[test]
    fn node_states_read_with_a_recall_are_those_read_without() {
        let mut recall = state_recall();
        for capture in [POWERED_DOWN, POWERED_DOWN, STATIC_DOWN, POWERED_DOWN] {
            let fresh = read_node_states(&mut &capture[..]).unwrap();
            let mut reader = std::io::BufReader::with_capacity(61, capture);
            let recalled = read_node_states_recalled(&mut reader, &mut recall).unwrap();
            crate::slurm::assert_states_are_the_nodes_cut(&fresh, &recalled);
            let names = |n: &[NodeInfo]| n.iter().map(|n| n.name.clone()).collect::<Vec<_>>();
            assert_eq!(names(&recalled), names(&fresh));
        }
    }

    /// The captures of `testdata/` (see its README), both 24.11.5.
    const POWERED_DOWN: &[u8] = include_bytes!("testdata/scontrol-json-show-nodes-24.11-powered-down.json");
    const STATIC_DOWN: &[u8] = include_bytes!("testdata/scontrol-json-show-nodes-24.11-static-down.json");

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn node(
        name: &str,
        state: &str,
        flags: &[&str],
        reason: &str,
        address: &str,
        host: &str,
        parts: &[&str],
    ) -> NodeInfo {
        NodeInfo {
            name: name.into(),
            state: state.into(),
            flags: strings(flags),
            reason: reason.into(),
            address: address.into(),
            hostname: host.into(),
            partitions: strings(parts),
        }
    }

    #[test]
    fn captured_24_11_powered_down() {
        let nodes = parse_nodes(POWERED_DOWN).unwrap();
        let want: Vec<NodeInfo> = (0..4)
            .map(|i| {
                let name = format!("lab-a3-{i}");
                node(&name, "idle", &["CLOUD", "POWERED_DOWN"], "", "127.0.0.1", &name, &["a3", "lim"])
            })
            .collect();
        assert_eq!(nodes, want);
        assert!(nodes.iter().all(|n| n.compact_state() == "idle~" && n.is_powered_down()));
    }

    /// A static node set DOWN by slurm-dws when its VM vanished, beside three powered-down nodes whose
    /// address and hostname Slurm reset to the node name.
    #[test]
    fn captured_24_11_static_node_down() {
        let nodes = parse_nodes(STATIC_DOWN).unwrap();
        let gone =
            "slurm-dws: the VM is gone (deleted outside slurm-dws, or GCE removed it); re-provisioning";
        let mut want = vec![node("lab-a3-0", "down", &["CLOUD"], gone, "127.0.0.1", "vm", &["a3"])];
        for i in 1..4 {
            let name = format!("lab-a3-{i}");
            want.push(node(&name, "idle", &["CLOUD", "POWERED_DOWN"], "", &name, &name, &["a3"]));
        }
        assert_eq!(nodes, want);
        assert_eq!(nodes[0].compact_state(), "down");
    }

    /// The exact command slurm-dws runs, `scontrol --all --json show nodes`, on 24.11.5: a node set
    /// DOWN with a slurm-dws reason, a drained one, and one that is also in a Hidden=YES partition.
    #[test]
    fn captured_24_11_all_down_drained_hidden() {
        let nodes =
            parse_nodes(include_bytes!("testdata/scontrol-json-all-show-nodes-24.11-down-drain-hidden.json"))
                .unwrap();
        let idle = ["CLOUD", "POWERED_DOWN"];
        let failed = "slurm-dws: resize request sv-a-x FAILED: ZONE_RESOURCE_POOL_EXHAUSTED";
        assert_eq!(
            nodes,
            vec![
                node("sv-a-0", "idle", &idle, "", "127.0.0.1", "sv-a-0", &["a"]),
                node("sv-a-1", "down", &idle, failed, "127.0.0.1", "sv-a-1", &["a"]),
                node(
                    "sv-a-2",
                    "idle",
                    &["CLOUD", "DRAIN", "POWERED_DOWN"],
                    "admin: drained",
                    "127.0.0.1",
                    "sv-a-2",
                    &["a"]
                ),
                node("sv-a-3", "idle", &idle, "", "127.0.0.1", "sv-a-3", &["a", "hid"]),
            ]
        );
        assert_eq!(nodes[1].compact_state(), "down~");
    }

    /// `scontrol [--all] --json show nodes` on 26.05.5 (see testdata/README.md): the fields
    /// slurm-dws reads are 24.11's; 26.05 adds `topology`, `cert_flags`, `suspend_time`, ... and
    /// drops `power` and `external_sensors`, none of which is read. Nodes `lab-a-[0-2]` (partition
    /// a) and the static `lab-s-0` (partition s, up with a VM whose slurmd says hostname `vm`).
    #[test]
    fn captured_26_05_nodes() {
        let a = |state: &str, flags: &[&str], host: &str| -> Vec<NodeInfo> {
            (0..3)
                .map(|i| {
                    let name = format!("lab-a-{i}");
                    let host = if host.is_empty() { name.as_str() } else { host };
                    node(&name, state, flags, "", "127.0.0.1", host, &["a"])
                })
                .collect()
        };
        let s0 =
            |flags: &[&str], reason: &str| node("lab-s-0", "idle", flags, reason, "127.0.0.1", "vm", &["s"]);
        let powered_down = [a("idle", &["CLOUD", "POWERED_DOWN"], ""), vec![s0(&["CLOUD"], "")]].concat();
        let cases: [(&[u8], Vec<NodeInfo>); 5] = [
            (
                include_bytes!("testdata/scontrol-json-show-nodes-26.05-powered-down.json"),
                powered_down.clone(),
            ),
            (include_bytes!("testdata/scontrol-json-all-show-nodes-26.05-powered-down.json"), powered_down),
            (
                include_bytes!("testdata/scontrol-json-show-nodes-26.05-powering-up.json"),
                [a("allocated", &["CLOUD", "NOT_RESPONDING", "POWERING_UP"], ""), vec![s0(&["CLOUD"], "")]]
                    .concat(),
            ),
            (
                include_bytes!("testdata/scontrol-json-show-nodes-26.05-allocated.json"),
                [a("allocated", &["CLOUD"], "vm"), vec![s0(&["CLOUD"], "")]].concat(),
            ),
            (
                include_bytes!("testdata/scontrol-json-show-nodes-26.05-drain.json"),
                vec![s0(&["CLOUD", "DRAIN"], "dws: test")],
            ),
        ];
        for (doc, want) in cases {
            let nodes = parse_nodes(doc).unwrap();
            assert_eq!(nodes, want);
            let states = read_node_states(&mut &doc[..]).unwrap();
            crate::slurm::assert_states_are_the_nodes_cut(&nodes, &states);
        }
    }

    #[test]
    fn read_from_a_stream_as_from_bytes() {
        for doc in [POWERED_DOWN, STATIC_DOWN] {
            let streamed = read_nodes(&mut std::io::BufReader::with_capacity(3, doc)).unwrap();
            assert_eq!(streamed, parse_nodes(doc).unwrap());
        }
    }

    /// The same node decoded from the 24.11 `scontrol` and `sinfo` captures of one cluster state
    /// agrees on everything `sinfo` says.
    #[test]
    fn agrees_with_sinfo_of_the_same_moment() {
        let from_sinfo =
            super::super::sinfo::parse_nodes(include_bytes!("testdata/sinfo-24.11-static-down.json"))
                .unwrap();
        let from_scontrol = parse_nodes(STATIC_DOWN).unwrap();
        for s in &from_sinfo {
            let c = from_scontrol.iter().find(|c| c.name == s.name).unwrap();
            assert_eq!(
                (&c.state, &c.flags, &c.reason, &c.partitions),
                (&s.state, &s.flags, &s.reason, &s.partitions)
            );
        }
        assert_eq!(from_sinfo.len(), from_scontrol.len());
    }

    #[test]
    fn garbage_is_a_parse_error_naming_the_field() {
        let cases: [(&[u8], &str); 8] = [
            // 24.11's sinfo document is not scontrol's.
            (include_bytes!("testdata/sinfo-24.11-powered-down.json"), "missing field `nodes`"),
            (
                br#"{"nodes":[{"name":"a","state":["IDLE"]},{"state":["IDLE"]}]}"#,
                "nodes[1]: missing field `name`",
            ),
            (br#"{"nodes":[{"name":"a"}]}"#, "nodes[0]: missing field `state`"),
            (br#"{"nodes":[{"name":"a","state":[]}]}"#, "nodes[0] (a): `state` is an empty array"),
            (br#"{"nodes":[{"name":"a","state":{"base":"IDLE"}}]}"#, "nodes[0] (a): `state` is {"),
            (
                br#"{"nodes":[{"name":"a","state":["IDLE"],"partitions":"p"}]}"#,
                "nodes[0]: invalid type: string",
            ),
            (br#"{"nodes":{}}"#, "`nodes` is not an array: it starts with `{`"),
            (b"", "no output"),
        ];
        for (doc, want) in cases {
            let err = parse_nodes(doc).unwrap_err().to_string();
            assert!(err.contains("scontrol --json show nodes") && err.contains(want), "{want}: {err}");
            assert!(!err.contains(" at line "), "{err}");
        }
    }

    #[test]
    fn null_fields_and_duplicates() {
        let doc = br#"{"nodes":[
            {"name":"a","state":["IDLE","CLOUD"],"reason":null,"address":null,"partitions":null},
            {"name":"a","state":["DOWN"]}],"meta":{"slurm":{"release":"24.11.5"}}}"#;
        let nodes = parse_nodes(doc).unwrap();
        assert_eq!(nodes, vec![node("a", "idle", &["CLOUD"], "", "", "", &[])]);
    }
}
