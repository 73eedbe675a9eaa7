//! The node view a reconcile pass reads: state, flags and reason of every node, nothing else.

use super::{command, scontrol_nodes, sinfo, Detected, NodeInfo, NodeSource, Slurm, SlurmError};
use crate::json_stream::Recall;

impl Slurm {
    /// [`Slurm::nodes`] as a reconcile pass needs them: from the same command, with each node's
    /// name, state, flags and reason only (its address, host name and partitions are left empty and
    /// skipped undecoded: at 10,000 nodes that is most of what decoding costs).
    pub async fn node_states(&self) -> Result<Vec<NodeInfo>, SlurmError> {
        let (source, version) = match self.detect().await? {
            Detected::Version(v) if !v.is_supported() => {
                return Err(SlurmError::UnsupportedVersion { version: *v });
            }
            Detected::Version(v) => (v.node_source(), Some(*v)),
            Detected::Unrecognised(_) => (NodeSource::Sinfo, None),
        };
        let conf = self.conf.as_deref();
        let recall = self.recall.clone();
        // The last read's nodes, unless another read holds them (then this one reads without).
        let with_recall = move |read: fn(&mut dyn std::io::BufRead, &mut Recall) -> _,
                                fresh: fn() -> Recall| {
            move |out: &mut dyn std::io::BufRead| {
                let Ok(mut held) = recall.try_lock() else { return read(out, &mut fresh()) };
                let last = held.take().filter(|(s, _)| *s == source).map(|(_, r)| r);
                let mut r = last.unwrap_or_else(fresh);
                let read = read(out, &mut r);
                *held = Some((source, r));
                read
            }
        };
        let read = match source {
            NodeSource::Sinfo => {
                let args = ["--json".to_string()];
                let parse = with_recall(sinfo::read_node_states_recalled, sinfo::state_recall);
                command::run_streamed(&self.bin_dir, conf, self.timeout, "sinfo", &args, parse).await
            }
            NodeSource::ScontrolJson => {
                // --all: as `nodes_from` (hidden partitions' nodes too).
                let args = ["--all", "--json", "show", "nodes"].map(String::from);
                let parse =
                    with_recall(scontrol_nodes::read_node_states_recalled, scontrol_nodes::state_recall);
                command::run_streamed(&self.bin_dir, conf, self.timeout, "scontrol", &args, parse).await
            }
        };
        match (read, version) {
            (Err(SlurmError::Parse(e)), Some(v)) => Err(SlurmError::Parse(e.with_version(v))),
            (result, _) => result,
        }
    }
}
