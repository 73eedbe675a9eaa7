//! Rule 6: VMs in owned MIGs that back no node are deleted after `orphan_grace` — never one named
//! like a node of ours while Slurm cannot be asked whether a job runs there.

use super::*;

impl Planner<'_> {
    pub(super) fn orphans(&mut self) {
        let Some(vms) = self.o.vms.as_ref() else { return };
        for (name, vm) in vms {
            if self.nodes.contains_key(name) {
                continue; // a node's VM: the node rules decide
            }
            if self.o.slurm.is_none() && self.cfg.naming.is_ours(name) {
                // Named like one of our nodes but not on record (database lost?): only Slurm can say
                // whether a job runs there, and Slurm did not answer. Never guess a VM away.
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
