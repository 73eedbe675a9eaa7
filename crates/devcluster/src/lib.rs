//! A real local slurmctld + slurmd cluster for tests and `make demo`, on any of three real Slurms
//! ([`SlurmGeneration`]): Debian bookworm's 22.05 installed on the host (the default), or Debian
//! trixie's 24.11 or forky's 26.05, each run from the root that `scripts/slurm-root.sh` builds
//! (docs/slurm-root.md).
//!
//! slurm-dws is only right if real Slurm agrees, so the end-to-end tests run a real controller on
//! this machine whose "cloud" nodes are real `slurmd -N NODE` processes started on demand (by a
//! test's ResumeProgram, or by the GCE simulator when a VM is created). The recipe follows
//! docs/slurm-facts.md ("A real cluster on one machine"):
//!
//! - everything lives in one private temp directory: slurm.conf, StateSaveLocation, spool, pid
//!   files and logs (`%n` per node), so runs can follow each other and run concurrently;
//! - slurmctld and every node get free TCP ports (`Port=` per node), checked by binding them;
//! - authentication is munge with our OWN munged (`--socket` in the cluster directory,
//!   `AuthInfo=socket=...`), started as the munge user with Debian's /etc/munge/munge.key. Munge
//!   was measured to start in milliseconds and to work with several clusters at once, and it is
//!   what production clusters use; [`Auth::None`] exists as a fallback and is not the default;
//! - slurmctld runs in the foreground (`-D`) as our child, so it is stopped by its PID;
//!   slurmds daemonize and are stopped through their pid files;
//! - a PrologSlurmctld that waits for the job's nodes makes a job start ~1–2 s after sbatch.
//!
//! On 24.11 and 26.05 ([`SlurmGeneration::Trixie`], [`SlurmGeneration::Forky`]) every Slurm
//! process — munged, slurmctld, each slurmd, each client command, and whatever slurmctld runs
//! (hooks, prolog) — runs inside that generation's root:
//! started on the host through the cluster's `bin/in-root` wrapper, which enters a private mount
//! namespace, bind-mounts `/proc`, `/sys`, `/dev`, the cluster directory and
//! [`ClusterSpec::bind_dirs`] at the same paths, and chroots (`unshare --root`). Nothing is ever
//! mounted on the host, and every step execs, so the PIDs the harness holds are the daemons' own
//! (there is no PID namespace) and stopping by PID and pid file works as on 22.05. The clients
//! are reached through wrapper scripts in the cluster's `wbin/` ([`LocalCluster::client_bin_dir`]),
//! which is the `bin_dir` slurm-dws gets. The root's own munge key and munge user are used; the
//! slurm.conf drops what 24.11 calls defunct and a `cgroup.conf` says `CgroupPlugin=disabled`.
//!
//! [`LocalCluster`] stops everything it started when dropped, pass or fail (slurmds through their
//! pid files, then any process still carrying the cluster's marker in its environment, then
//! slurmctld and munged by PID) and removes its directory (kept when
//! `SLURM_DWS_KEEP_DEVCLUSTER=1`, for post-mortems).
//!
//! | file             | job                                                                     |
//! |------------------|-------------------------------------------------------------------------|
//! | `cluster_spec.rs`| [`ClusterSpec`]: what cluster to run                                    |
//! | `cluster.rs`     | [`LocalCluster`]: its files, its daemons, all stopped on drop           |
//! | `client.rs`      | Slurm's client commands against a running cluster                       |
//! | `conf.rs`        | slurm.conf and the cluster's helper scripts                             |
//! | `controllers.rs` | several controllers, each on its own host (network/UTS namespaces)       |
//! | `generation.rs`  | which Slurm runs the cluster, and its root                              |
//! | `install.rs`     | installing Debian's Slurm and munge; a generation ready for tests       |
//! | `process.rs`     | daemons stopped by PID, slurmds by pid file, strays by marker           |
//! | `ports.rs`       | free TCP ports, held until Slurm gets them                              |
//! | `host.rs`        | files with modes, log tails, short commands, polling                    |
//! | `empty_slurm.rs` | fake Slurm client commands for a daemon with no slurmctld               |
//! | `binaries.rs`    | finding the workspace's binaries (`slurm-dws-sim`)                      |
//! | `stack.rs`       | the whole product on one machine: cluster, simulator, daemon            |
//! | `wait.rs`        | bounded waits for the real-Slurm tests, a timeout saying what it saw    |

// Test rig: it starts and stops real Slurm daemons and waits for them in real time.
#![allow(clippy::disallowed_methods)]

pub mod accounting;
mod binaries;
mod client;
mod cluster;
mod cluster_spec;
mod conf;
mod controllers;
mod empty_slurm;
pub mod generation;
mod host;
mod install;
mod ports;
mod process;
pub mod stack;
pub mod wait;

use std::path::{Path, PathBuf};
use std::time::Duration;

pub use binaries::{sim_bin, SIM_BIN_NAME};
pub use cluster::{kill_stray_slurmds, LocalCluster};
pub use cluster_spec::{Auth, ClusterSpec};
pub use controllers::{forward_loopback, host_command, own_dir, ControllerHost, HostNet, LoopbackForward};
pub use empty_slurm::write_empty_slurm;
pub use generation::{ensure_root, ensure_trixie_root, trixie_root, SlurmGeneration, ROOT_STAMP};
pub use install::{available_for_tests, ensure_installed, missing as missing_files, PACKAGES};

/// Environment variable set in every slurmd of a cluster (value: the cluster directory), so that
/// processes it leaves behind can be found at teardown.
pub const MARKER_ENV: &str = "SLURM_DWS_DEVCLUSTER";

/// Why a local cluster could not be set up or used.
#[derive(Debug, thiserror::Error)]
pub enum DevclusterError {
    #[error("Slurm is not installed: {0}")]
    NotInstalled(String),
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("`{command}` failed: {message}")]
    Command { command: String, message: String },
    #[error("{what} did not happen within {timeout:?}{detail}")]
    Timeout { what: String, timeout: Duration, detail: String },
    #[error("no free block of {0} TCP ports found")]
    NoFreePorts(usize),
    #[error("bad cluster spec: {0}")]
    Spec(String),
}

impl DevclusterError {
    fn io(path: &Path, source: std::io::Error) -> Self {
        DevclusterError::Io { path: path.to_path_buf(), source }
    }
}
