//! The Slurm topology file (`[slurm] topology`), kept true to the physical host topology of our
//! nodes' VMs as this pass's VM list shows it (`crate::topology` renders and writes it). No GCE
//! call: the VMs are the pass's list.

use crate::config::{Config, TopologyKind};
use crate::naming::Naming;
use crate::reconcile::types::ObservedVm;
use crate::slurm::Slurm;
use crate::topology::{self, Keeper};
use chrono::{DateTime, Utc};
use std::collections::BTreeMap;

/// The topology file as this run last wrote it; the keeper is made once Slurm's release says
/// which form the file takes.
#[derive(Default)]
pub struct TopologyFile {
    keeper: Option<Keeper>,
}

impl TopologyFile {
    /// Writes the topology file when the placement of our nodes' VMs changed, or someone else
    /// changed the file, and has Slurm load it at most once a minute.
    pub async fn keep(
        &mut self,
        cfg: &Config,
        naming: &Naming,
        slurm: &Slurm,
        vms: &BTreeMap<String, ObservedVm>,
        now: DateTime<Utc>,
        errors: &mut Vec<String>,
    ) {
        let kind = cfg.slurm.topology.kind;
        if kind == TopologyKind::None {
            return;
        }
        if self.keeper.is_none() {
            let yaml = match slurm.version().await {
                Ok(v) => (v.major, v.minor) >= (25, 5),
                Err(e) => return errors.push(format!("topology: Slurm's version: {e}")),
            };
            let path = cfg
                .slurm
                .topology
                .file
                .clone()
                .unwrap_or_else(|| topology::default_path(cfg.slurm.conf.as_deref(), yaml));
            self.keeper = Some(Keeper::new(path, kind, yaml));
        }
        let keeper = self.keeper.as_mut().expect("set above");
        let on_disk = topology::stamp(&keeper.path);
        let digest =
            topology::placement_digest(vms.iter().map(|(name, vm)| (name.as_str(), vm.topology.as_deref())));
        if keeper.unchanged(digest, &on_disk) {
            return; // the steady pass: no render, no write
        }
        let nodes: BTreeMap<String, Option<String>> = naming
            .nodesets()
            .flat_map(|ns| naming.all_nodes(ns))
            .map(|n| {
                let t = vms.get(&n).and_then(|v| v.topology.clone());
                (n, t)
            })
            .collect();
        keeper.seen_on_disk(on_disk);
        let decision = keeper.decide(topology::render(kind, keeper.yaml, &nodes), now);
        if let Some(content) = decision.write {
            match topology::write_atomically(&keeper.path, &content) {
                Ok(()) => keeper.written(content, topology::stamp(&keeper.path)),
                Err(e) => return errors.push(format!("topology: writing {}: {e}", keeper.path.display())),
            }
        }
        keeper.rendered(digest);
        if decision.reload {
            match slurm.reconfigure().await {
                Ok(()) => keeper.reloaded(now),
                Err(e) => errors.push(format!("topology: scontrol reconfigure: {e}")),
            }
        }
    }
}
