//! One node as slurm-dws needs it ([`NodeInfo`]), whichever command and Slurm version it came from,
//! and the pieces the node parsers share.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use serde_json::Value;

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
    /// `NodeAddr`: where slurmctld reaches the node. Empty when read from 23.02+'s `sinfo --json`,
    /// which does not say it per node.
    pub address: String,
    /// `NodeHostname`. Empty when read from 23.02+'s `sinfo --json`.
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

/// A node's `state` as printed: 22.05's lower-case word (its flags are a separate `state_flags`),
/// or 23.02+'s upper-case array, base state first and flags after (`["IDLE","CLOUD","POWERED_DOWN"]`).
/// Returns (base state in lower case, flags as printed).
pub(crate) fn split_state(state: Value) -> Result<(String, Vec<String>), String> {
    match state {
        Value::String(s) => Ok((s.to_ascii_lowercase(), Vec::new())),
        Value::Array(items) => {
            let mut words = Vec::with_capacity(items.len());
            for item in items {
                match item {
                    Value::String(s) => words.push(s),
                    other => return Err(format!("`state` holds {other}, not a word")),
                }
            }
            let mut words = words.into_iter();
            let base = words.next().ok_or("`state` is an empty array")?.to_ascii_lowercase();
            Ok((base, words.collect()))
        }
        Value::Null => Err("`state` is missing".into()),
        other => Err(format!("`state` is {other}, neither a word nor an array of words")),
    }
}

/// A reason as printed: a string, or null / absent for none.
pub(crate) fn reason_text(reason: Value) -> String {
    match reason {
        Value::String(s) => s,
        _ => String::new(),
    }
}

/// The nodes decoded so far, in the order Slurm listed them, each name once.
///
/// A node array (22.05's `sinfo`, `scontrol show nodes`) names each node once: [`Self::push_first`]
/// only appends, and a name listed twice is dropped at the end, each name hashed once and never
/// copied (at 10,000 nodes a map filled as they came cost ~4% of a pass's CPU). `sinfo`'s groups
/// (23.02+) name a node in each of its partitions: [`Self::entry`] finds it through `index`.
#[derive(Default)]
pub(crate) struct NodeList {
    nodes: Vec<NodeInfo>,
    /// Where each of `nodes[..indexed]` is.
    index: HashMap<String, usize>,
    indexed: usize,
}

impl NodeList {
    /// A list with room for `n` nodes (as many as the last read found: a list grown by doubling
    /// copies its nodes a dozen times at 10,000).
    pub fn with_capacity(n: usize) -> NodeList {
        NodeList { nodes: Vec::with_capacity(n), ..NodeList::default() }
    }

    /// Adds `node` unless a node of that name is already listed (then the first one stays).
    pub fn push_first(&mut self, node: NodeInfo) {
        self.nodes.push(node);
    }

    /// The node called `name`, made with `make` the first time it is seen.
    pub fn entry(&mut self, name: String, make: impl FnOnce(String) -> NodeInfo) -> &mut NodeInfo {
        self.drop_repeats();
        for (at, n) in self.nodes.iter().enumerate().skip(self.indexed) {
            self.index.insert(n.name.clone(), at);
        }
        let at = match self.index.get(&name) {
            Some(&at) => at,
            None => {
                let at = self.nodes.len();
                self.index.insert(name.clone(), at);
                self.nodes.push(make(name));
                at
            }
        };
        self.indexed = self.nodes.len();
        &mut self.nodes[at]
    }

    /// Drops the nodes pushed since the last index whose name came before (the first one stays).
    fn drop_repeats(&mut self) {
        let fresh = &self.nodes[self.indexed..];
        let mut seen = HashSet::with_capacity_and_hasher(fresh.len(), Default::default());
        let keep: Vec<bool> =
            fresh.iter().map(|n| !self.index.contains_key(&n.name) && seen.insert(n.name.as_str())).collect();
        if keep.iter().all(|k| *k) {
            return;
        }
        let mut keep = std::iter::repeat_n(true, self.indexed).chain(keep);
        self.nodes.retain(|_| keep.next().unwrap_or(true));
    }

    pub fn into_vec(mut self) -> Vec<NodeInfo> {
        self.drop_repeats();
        self.nodes
    }
}

/// serde_json puts " at line L column C" on an error; an error re-raised with more context gets it
/// again, so the inner one is dropped.
pub(crate) fn without_position(e: &dyn std::fmt::Display) -> String {
    let text = e.to_string();
    match text.rsplit_once(" at line ") {
        Some((head, tail)) if tail.contains(" column ") => head.to_string(),
        _ => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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

    /// The states of docs/slurm-facts.md ("Node states"), as sinfo --json spelled them on a live
    /// 22.05 cluster (24.11 spells the same flags).
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
    fn state_shapes() {
        let words = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(split_state(json!("idle")).unwrap(), ("idle".into(), vec![]));
        assert_eq!(
            split_state(json!(["IDLE", "CLOUD", "POWERED_DOWN"])).unwrap(),
            ("idle".into(), words(&["CLOUD", "POWERED_DOWN"]))
        );
        assert_eq!(split_state(json!(["DOWN"])).unwrap(), ("down".into(), vec![]));
        for bad in [json!([]), json!(3), json!(null), json!(["IDLE", 4]), json!({"base": "IDLE"})] {
            assert!(split_state(bad.clone()).is_err(), "{bad}");
        }
        assert_eq!(reason_text(json!("r")), "r");
        assert_eq!(reason_text(json!(null)), "");
    }

    #[test]
    fn node_list_keeps_order_and_first() {
        let mut list = NodeList::default();
        let mut a = node("idle", &[]);
        a.name = "a".into();
        let mut a2 = a.clone();
        a2.state = "down".into();
        list.push_first(a.clone());
        list.entry("b".into(), |name| NodeInfo { name, ..a.clone() }).partitions.push("p".into());
        list.push_first(a2);
        list.entry("b".into(), |_| unreachable!()).partitions.push("q".into());
        let got = list.into_vec();
        assert_eq!(got.iter().map(|n| n.name.as_str()).collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(got[0].state, "idle");
        assert_eq!(got[1].partitions, ["p", "q"]);

        // Pushed only (a node array), a name twice: the first stays, in Slurm's order.
        let named = |name: &str, state: &str| NodeInfo { name: name.into(), ..node(state, &[]) };
        let mut list = NodeList::default();
        for (name, state) in [("c", "idle"), ("a", "idle"), ("c", "down"), ("b", "idle"), ("a", "down")] {
            list.push_first(named(name, state));
        }
        let got: Vec<(String, String)> = list.into_vec().into_iter().map(|n| (n.name, n.state)).collect();
        assert_eq!(
            got,
            [("c".into(), "idle".into()), ("a".into(), "idle".into()), ("b".into(), "idle".into())]
        );

        // A push after an entry of the same name, then nothing else: dropped at the end.
        let mut list = NodeList::default();
        list.entry("x".into(), |name| NodeInfo { name, ..node("idle", &[]) });
        list.push_first(named("x", "down"));
        list.push_first(named("y", "idle"));
        let got: Vec<(String, String)> = list.into_vec().into_iter().map(|n| (n.name, n.state)).collect();
        assert_eq!(got, [("x".into(), "idle".into()), ("y".into(), "idle".into())]);
    }

    #[test]
    fn positions_are_dropped_once() {
        assert_eq!(without_position(&"missing field `name` at line 3 column 9"), "missing field `name`");
        assert_eq!(without_position(&"no position here"), "no position here");
    }
}
