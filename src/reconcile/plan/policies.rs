//! Workload policies slurm-dws owns: created before the first MIG of their nodeset, deleted once
//! their nodeset is gone from the config and no MIG uses them (never while one does: GCE refuses,
//! and a MIG being deleted still uses it until it is gone).

use super::Planner;
use crate::model::Request;
use crate::reconcile::types::GceStep;

impl Planner<'_> {
    /// The step that creates the MIG of request `id`: its insert, or first the nodeset's owned
    /// workload policy when the region's list does not show it (the insert follows in the next
    /// round, once the policy exists). Nothing while the policies are unknown this pass.
    pub(super) fn insert_mig(&mut self, id: i64, r: &Request) {
        let owned = self.cfg.nodesets.get(&r.nodeset).and_then(|n| n.owned_policy.clone());
        if let Some(policy) = owned {
            let Some(observed) = self.o.policies.as_ref() else { return };
            let region = self.cfg.nodesets.get(&r.nodeset).map(|n| n.region.clone()).unwrap_or_default();
            if self.o.unlisted_policy_regions.contains(&region) {
                return;
            }
            if !observed.contains_key(&policy) {
                let step = GceStep::InsertPolicy { policy, nodeset: r.nodeset.clone(), region };
                if !self.plan.gce.contains(&step) {
                    self.plan.gce.push(step);
                }
                return;
            }
        }
        self.plan.gce.push(GceStep::InsertMig {
            request: id,
            mig: r.mig.clone(),
            nodeset: r.nodeset.clone(),
        });
    }

    /// Owned policies no configured nodeset asks for and no MIG uses: deleted. Decided only on a
    /// fresh MIG list (a reused one may miss a MIG made since).
    pub(super) fn unused_policies(&mut self) {
        let (Some(policies), Some(migs)) = (self.o.policies.as_ref(), self.o.migs.as_ref()) else { return };
        if self.o.migs_reused || self.o.reused {
            return;
        }
        for (name, p) in policies {
            let wanted =
                self.cfg.nodesets.get(&p.nodeset).and_then(|n| n.owned_policy.as_ref()) == Some(name);
            let in_use = migs.values().any(|m| m.workload_policy.as_deref() == Some(name.as_str()))
                || self
                    .plan
                    .gce
                    .iter()
                    .any(|s| matches!(s, GceStep::InsertMig { nodeset, .. } if *nodeset == p.nodeset));
            // A region whose MIG list failed may hide a MIG using it.
            let unseen = self.o.unlisted_regions.contains(&p.region);
            if wanted || in_use || unseen {
                continue;
            }
            let reason = match self.cfg.nodesets.get(&p.nodeset) {
                None => format!("nodeset {} is gone from the config and no MIG uses it", p.nodeset),
                Some(_) => {
                    format!("nodeset {} no longer asks for an owned policy and no MIG uses it", p.nodeset)
                }
            };
            self.plan.gce.push(GceStep::DeletePolicy {
                policy: name.clone(),
                region: p.region.clone(),
                reason,
            });
        }
    }
}
