//! Rule 5: owned MIGs — seen, gone, empty long enough to delete (only when Slurm and GCE were both
//! read this pass, with an event); an owned MIG the store does not
//! know is adopted, with its resize request when that is still in flight (so that it is followed,
//! not collected).
//!
//! Empty means: no open request group and no node that holds it (up, suspending, requested), and
//! either a `targetSize` of 0 or no VM at all in the complete VM list — whatever its size says. A
//! MIG does nothing on failure, so a VM GCE deleted outside it (a preempted spot VM) leaves a member
//! with no VM that still counts in `targetSize` (docs/gce-facts.md): such a MIG is collected like
//! an empty one, and the request groups behind it end with it.

use super::*;
use rustc_hash::FxHashSet as HashSet;

impl Planner<'_> {
    pub(super) fn migs_and_gc(&mut self) {
        let Some(observed) = self.o.migs.as_ref() else { return };
        // Each MIG name once (10,000 up nodes share 1,000 MIGs: no copy per node).
        let mut busy: HashSet<String> = HashSet::default();
        let open_requests = self.requests.values().filter(|r| r.phase.is_open());
        let holding_nodes = self
            .nodes
            .values()
            .filter(|n| matches!(n.state, NodeState::Up | NodeState::Suspending | NodeState::Requested));
        for mig in open_requests.map(|r| &r.mig).chain(holding_nodes.filter_map(|n| n.mig.as_ref())) {
            if !busy.contains(mig) {
                busy.insert(mig.clone());
            }
        }
        // Built only if a MIG nothing holds needs it (a steady 10k-node pass has none: no walk of
        // the VM list).
        let o = self.o;
        let mut with_vms: Option<Option<HashSet<&str>>> = None;
        for name in self.migs.keys_now() {
            let name: &str = &name;
            let Some(m) = self.migs.current(name) else { continue };
            match observed.get(name) {
                Some(om) => {
                    let mut nm = m.clone().into_owned();
                    if nm.state == MigState::Creating {
                        nm.state = MigState::Active;
                    }
                    nm.target_size = om.target_size;
                    let emptiness = if busy.contains(name) {
                        Emptiness::InUse
                    } else {
                        let with_vms = with_vms.get_or_insert_with(|| migs_with_vms(o));
                        emptiness(om.target_size, with_vms.as_ref().map(|w| w.contains(name)))
                    };
                    nm.empty_since = match emptiness {
                        Emptiness::Empty | Emptiness::NoVm => Some(m.empty_since.unwrap_or(self.now)),
                        // The VM list did not answer in full: what was concluded stays.
                        Emptiness::Unknown => m.empty_since,
                        Emptiness::InUse => None,
                    };
                    if let Some(since) = nm.empty_since {
                        // Collected only when Slurm and the VMs were read too: with either unread,
                        // a node of this MIG may be in use and not on record yet (database lost).
                        if secs_since(self.now, since) >= self.cfg.mig_gc_grace
                            && nm.state != MigState::Deleting
                            && self.saw_everything()
                            && emptiness != Emptiness::Unknown
                        {
                            let what = if om.target_size == 0 {
                                "empty".to_string()
                            } else {
                                format!(
                                    "holding no VM (targetSize {}: members whose VMs GCE deleted)",
                                    om.target_size
                                )
                            };
                            let why = format!(
                                "{what} with no active request since {}",
                                since.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
                            );
                            if !self.deleting_mig(name) {
                                self.plan.event(
                                    EventKind::MigCollected,
                                    vec![],
                                    format!("MIG {name} is {why}: deleting it"),
                                );
                            }
                            self.delete_mig(name, &why);
                        }
                    }
                    if nm != *m {
                        self.migs.insert(name.to_string(), nm);
                    }
                }
                None => {
                    if matches!(m.state, MigState::Active | MigState::Deleting) {
                        let mut nm = m.into_owned();
                        nm.state = MigState::Deleted;
                        nm.target_size = 0;
                        self.migs.insert(name.to_string(), nm);
                        self.plan.event(EventKind::MigDeleted, vec![], format!("MIG {name} is gone"));
                    }
                }
            }
        }
        for (name, om) in observed {
            if self.migs.contains_key(name) {
                continue;
            }
            // Its request still in flight: adopt it too, and follow it to its end.
            let in_flight = match self.o.requests.get(name) {
                Some(PolledRequest::Found(rr)) if rr.state.in_flight() && !rr.instances.is_empty() => {
                    Some(rr)
                }
                _ => None,
            };
            let adopted = in_flight.map(|rr| AdoptedRequest {
                nodeset: om.nodeset.clone(),
                job_id: om.job_id,
                tag: om.tag.clone(),
                mig: name.clone(),
                name: crate::naming::resize_request_name(&om.tag),
                nodes: rr.instances.iter().filter(|n| self.cfg.naming.is_ours(n)).cloned().collect(),
                run_duration: rr.run_duration.unwrap_or(0),
                gce_state: rr.state.clone(),
            });
            let busy = busy.contains(name) || adopted.is_some();
            if let Some(a) = adopted {
                self.plan.adopted_requests.push(a);
            }
            self.plan.event(
                EventKind::Adopted,
                vec![],
                format!(
                    "MIG {name} (nodeset {}, tag {}) is ours but was not on record: adopted",
                    om.nodeset, om.tag
                ),
            );
            self.migs.insert(
                name.clone(),
                Mig {
                    name: name.clone(),
                    nodeset: om.nodeset.clone(),
                    region: self
                        .o
                        .mig_regions
                        .get(name)
                        .cloned()
                        .unwrap_or_else(|| self.cfg.region_of(&om.nodeset).to_string()),
                    target_size: om.target_size,
                    state: MigState::Active,
                    created_at: om.created.unwrap_or(self.now),
                    empty_since: (!busy && {
                        let with_vms = with_vms.get_or_insert_with(|| migs_with_vms(o));
                        matches!(
                            emptiness(om.target_size, with_vms.as_ref().map(|w| w.contains(name.as_str()))),
                            Emptiness::Empty | Emptiness::NoVm
                        )
                    })
                    .then_some(self.now),
                },
            );
        }
    }
}

/// The MIGs that have a VM in this pass's VM list; `None` when the list is not this pass's or not
/// complete (a zone left out): then no MIG is known to hold no VM.
fn migs_with_vms(o: &Observed) -> Option<HashSet<&str>> {
    let vms = o.vms.as_ref().filter(|_| !o.reused && o.unreachable_zones.is_empty())?;
    Some(vms.values().filter_map(|v| v.mig.as_deref()).collect())
}

/// What a MIG nothing holds (no open group, no node) is, from its size and its VMs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Emptiness {
    /// An open group or a node holds it.
    InUse,
    /// `targetSize` 0.
    Empty,
    /// A size, but no VM in a complete list: its members' VMs are gone (preempted, deleted by
    /// GCE, failed and deleted).
    NoVm,
    /// A size, and the VM list is not complete this pass: nothing is concluded.
    Unknown,
}

/// `has_vm`: whether the complete VM list shows a VM of the MIG (`None`: no complete list).
fn emptiness(target_size: u32, has_vm: Option<bool>) -> Emptiness {
    match (target_size, has_vm) {
        (0, _) => Emptiness::Empty,
        (_, Some(false)) => Emptiness::NoVm,
        (_, Some(true)) => Emptiness::InUse,
        (_, None) => Emptiness::Unknown,
    }
}
