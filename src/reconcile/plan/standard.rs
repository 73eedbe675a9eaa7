//! What differs for standard and spot nodesets (`provisioning_model`): their groups create VMs by
//! name (`createInstances`) in the group's MIG instead of inserting a resize request, have no run
//! duration, and a group whose nodes are all suspended before its VMs exist is given up by deleting
//! its MIG (there is no request to cancel). A spot VM that stops (TERMINATED) or vanishes was
//! preempted: the node rules say so with a `preempted` event.

use super::*;
use crate::config::ProvisioningModel;

impl Planner<'_> {
    /// The nodeset's provisioning model (Flex for a nodeset no longer configured).
    pub(super) fn model(&self, nodeset: &str) -> ProvisioningModel {
        self.cfg.nodesets.get(nodeset).map_or(ProvisioningModel::Flex, |n| n.model)
    }

    /// Whether the nodeset's groups create their VMs by name (standard, spot); flex and
    /// reservation groups insert a resize request.
    pub(super) fn creates_by_name(&self, nodeset: &str) -> bool {
        !self.model(nodeset).uses_resize_requests()
    }

    /// Whether a VM of this nodeset that stops or vanishes before its end was preempted.
    pub(super) fn preemptible(&self, nodeset: &str) -> bool {
        self.model(nodeset) == ProvisioningModel::Spot
    }

    /// A standard or spot group whose nodes are no longer wanted while its VMs are being created:
    /// its nodes are released (Slurm suspended them: nothing to tell it), the group ends, and its
    /// MIG is deleted with whatever VMs it made.
    pub(super) fn abandon_creation(&mut self, r: &Request, why: &str) {
        self.update_request(r.id, |x| {
            x.phase = RequestPhase::Failed;
            x.last_error = Some(why.to_string());
        });
        self.release_members(r, None);
        self.delete_mig(&r.mig, why);
    }
}
