//! The node view a reconcile pass reads: state, flags and reason of every node, nothing else.

use super::{command, scontrol_nodes, sinfo, Detected, NodeInfo, NodeSource, Slurm, SlurmError};

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
        let read = match source {
            NodeSource::Sinfo => {
                let args = ["--json".to_string()];
                command::run_streamed(&self.bin_dir, conf, self.timeout, "sinfo", &args, |out| {
                    sinfo::read_node_states(out)
                })
                .await
            }
            NodeSource::ScontrolJson => {
                // --all: as `nodes_from` (hidden partitions' nodes too).
                let args = ["--all", "--json", "show", "nodes"].map(String::from);
                command::run_streamed(&self.bin_dir, conf, self.timeout, "scontrol", &args, |out| {
                    scontrol_nodes::read_node_states(out)
                })
                .await
            }
        };
        match (read, version) {
            (Err(SlurmError::Parse(e)), Some(v)) => Err(SlurmError::Parse(e.with_version(v))),
            (result, _) => result,
        }
    }
}
