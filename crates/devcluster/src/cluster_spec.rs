//! What cluster to run: its nodes, partitions, extra slurm.conf lines, authentication and Slurm.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::generation::SlurmGeneration;

/// How slurmctld, slurmd and the clients authenticate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Auth {
    /// Our own munged on a private socket (the default; what production uses).
    #[default]
    Munge,
    /// `auth/none` + `cred/none`: no munged at all.
    None,
}

/// What cluster to run.
#[derive(Debug, Clone)]
pub struct ClusterSpec {
    /// Slurm's ClusterName. [`ClusterSpec::new`] makes it unique per process and call.
    pub cluster_name: String,
    /// `NodeName=...` lines, e.g. `NodeName=dws-a-[0-1] State=CLOUD CPUs=1 RealMemory=500`.
    /// `NodeAddr=127.0.0.1` and one `Port=` per node are added unless the line has them.
    pub node_lines: Vec<String>,
    /// `PartitionName=...` lines.
    pub partition_lines: Vec<String>,
    /// More slurm.conf lines, e.g. `ResumeProgram=...`, `SuspendExcNodes=...`; a key given here
    /// replaces the default of the same key (e.g. `SuspendTime=30`).
    pub extra_conf: Vec<String>,
    pub auth: Auth,
    /// Which Slurm runs the cluster (default: the host's 22.05).
    pub slurm: SlurmGeneration,
    /// Host directories that programs run by slurmctld (ResumeProgram, SuspendProgram, what they
    /// start) must see: bind-mounted at the same paths inside the root on 24.11 (the cluster's
    /// own directory always is). Give the directories of hook scripts and binaries, and of the
    /// files they read or write. Unused on 22.05, where everything runs on the host.
    pub bind_dirs: Vec<PathBuf>,
    /// Several controllers, each on its own host ([`crate::HostNet`]), in `SlurmctldHost` order;
    /// empty: one slurmctld on this machine (`SlurmctldHost=localhost`). Node lines then need a
    /// `NodeAddr=` every host reaches (the machine's address). 22.05 only.
    pub controllers: Vec<crate::ControllerHost>,
}

impl ClusterSpec {
    /// An empty spec with a ClusterName unique to this process and call (`{prefix}{pid}x{n}`).
    pub fn new(prefix: &str) -> Self {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        ClusterSpec {
            cluster_name: format!("{prefix}{}x{n}", std::process::id()),
            node_lines: Vec::new(),
            partition_lines: Vec::new(),
            extra_conf: Vec::new(),
            auth: Auth::default(),
            slurm: SlurmGeneration::default(),
            bind_dirs: Vec::new(),
            controllers: Vec::new(),
        }
    }

    /// Chooses the Slurm (builder style).
    pub fn slurm(mut self, generation: SlurmGeneration) -> Self {
        self.slurm = generation;
        self
    }

    /// Adds a directory that programs run by slurmctld must see (builder style); see
    /// [`ClusterSpec::bind_dirs`].
    pub fn bind(mut self, dir: impl Into<PathBuf>) -> Self {
        self.bind_dirs.push(dir.into());
        self
    }

    /// Adds a node line (builder style).
    pub fn node(mut self, line: &str) -> Self {
        self.node_lines.push(line.to_string());
        self
    }

    /// Adds a partition line (builder style).
    pub fn partition(mut self, line: &str) -> Self {
        self.partition_lines.push(line.to_string());
        self
    }

    /// Adds a slurm.conf line (builder style).
    pub fn conf(mut self, line: &str) -> Self {
        self.extra_conf.push(line.to_string());
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_names_are_unique() {
        let a = ClusterSpec::new("dc");
        let b = ClusterSpec::new("dc");
        assert_ne!(a.cluster_name, b.cluster_name);
        assert!(a.cluster_name.starts_with("dc"));
    }
}
