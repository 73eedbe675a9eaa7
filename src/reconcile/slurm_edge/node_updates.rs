//! Node updates: a state and reason over a hostlist, a node's address, and DOWN for the nodes a hook
//! named that slurm-dws does not manage.

use crate::naming::NotOurs;
use crate::reconcile::plan::REASON_PREFIX;
use crate::reconcile::types::NodeStateChange;
use crate::slurm::{NodeUpdate, Slurm, SlurmError};

/// `scontrol update nodename=HOSTLIST state=STATE [reason=...]`, the nodes batched into one hostlist.
pub async fn update_state(
    slurm: &Slurm,
    nodes: &[String],
    state: NodeStateChange,
    reason: Option<&str>,
) -> Result<(), SlurmError> {
    let hl = crate::hostlist::compress(nodes);
    let update = NodeUpdate { state: Some(state.as_str()), reason, ..Default::default() };
    slurm.update_nodes(&hl, &update).await
}

/// `scontrol update nodename=N nodeaddr=IP nodehostname=N`.
pub async fn set_addr(slurm: &Slurm, node: &str, addr: &str) -> Result<(), SlurmError> {
    let update = NodeUpdate { node_addr: Some(addr), node_hostname: Some(node), ..Default::default() };
    slurm.update_nodes(node, &update).await
}

/// Sets each node a hook named that is not ours DOWN, with why as its reason. Returns the errors
/// and how many commands ran.
pub async fn refuse_not_ours(slurm: &Slurm, not_ours: &[NotOurs]) -> (Vec<String>, usize) {
    let mut errors = Vec::new();
    for why in not_ours {
        let node = why.node();
        tracing::warn!(node = %node, reason = %why, "hook named a node slurm-dws does not manage");
        let reason = format!("{REASON_PREFIX} not managed by slurm-dws: {why}");
        let update = NodeUpdate {
            state: Some(NodeStateChange::Down.as_str()),
            reason: Some(&reason),
            ..Default::default()
        };
        if let Err(e) = slurm.update_nodes(node, &update).await {
            errors.push(format!("setting {node} DOWN: {e}"));
        }
    }
    (errors, not_ours.len())
}
