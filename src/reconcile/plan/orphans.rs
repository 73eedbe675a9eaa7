//! Rule 6: VMs in owned MIGs that back no node are deleted after `orphan_grace` — never while Slurm
//! or GCE could not be read this pass (only Slurm can say whether a job runs there).

use super::*;

impl Planner<'_> {
    pub(super) fn orphans(&mut self) {
        let Some(vms) = self.o.vms.as_ref() else { return };
        // A node's VM is left to the node rules.
        for (name, vm) in self.nodes.missing(vms.iter()) {
            if !self.saw_everything() {
                // Not on record (database lost?): only Slurm can say whether a job runs there, and
                // only the MIG list whether its MIG is ours. Never guess a VM away.
                continue;
            }
            let Some(mig) = vm.mig.as_ref().filter(|m| self.owned_mig(m)) else { continue };
            let old = vm.created.is_none_or(|c| secs_since(self.now, c) > self.cfg.orphan_grace);
            if old {
                self.plan.event(
                    EventKind::Orphan,
                    vec![name.clone()],
                    format!("VM {name} in MIG {mig} backs no node of this cluster: deleting it"),
                );
                self.delete_vm(mig, vm);
            }
        }
    }
}
