//! The TOML config: where it is found, the validated [`Config`] with every default filled, and the slurm.conf lines.
//!
//! Loading happens in two steps, as in kanidm: the file is parsed into [`raw::RawConfig`]
//! (serde, `deny_unknown_fields`, every field optional), then [`validate`] checks every value
//! offline and resolves defaults into [`Config`]. Code outside this module only ever sees a
//! `Config`, so it never has to ask "was this set?" or "is this in range?".
//!
//! Durations are integer seconds (`u64`), as in slurm.conf.

mod forms;
pub mod last_accepted;
mod placement;
pub mod pricing;
mod provisioning;
pub mod raw;
mod reservation;
pub mod slurm_conf;
mod validate;

use std::ffi::OsString;
use std::fmt;
use std::net::SocketAddr;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// `gcp.credentials`: the GCE client's own type. The config names how the client authenticates and
/// the client owns what that means, so `gce` never depends on the config.
pub use crate::gce::Credentials;
pub use forms::{is_cluster_name, is_nodeset_name, is_rfc1035};
pub use placement::{
    is_accelerator_topology, parse_policy_url, Placement, Topology, TopologyDistance, TopologyKind,
};
pub use pricing::{HourPrice, MachinePrices, Pricing};
pub use provisioning::ProvisioningModel;
pub use reservation::{
    parse_future_reservation_url, parse_reservation_url, FutureReservationRef, ReservationRef,
    ReservationSource, ReservedCapacity,
};
pub use slurm_conf::render_slurm_conf;
pub use validate::DEFAULT_ENDPOINT;

/// Environment variable naming the config file; checked after `--config`.
pub const ENV_CONFIG: &str = "SLURM_DWS_CONFIG";
/// Slurm's own config path; the hooks get nothing else, so we look for `slurm-dws.toml` beside it.
pub const ENV_SLURM_CONF: &str = "SLURM_CONF";
/// The file name looked for beside `$SLURM_CONF`.
pub const FILE_NAME: &str = "slurm-dws.toml";
/// The largest config file read: a real one is a few KB, and a path to something endless
/// (`/dev/zero`) must be an error, not a hang.
pub const MAX_CONFIG_BYTES: usize = 1 << 20;

/// Reads a UTF-8 text file of at most `limit` bytes (pipes such as `<(...)` work too).
fn read_bounded(path: &Path, limit: usize) -> std::io::Result<String> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::fs::File::open(path)?.take(limit as u64 + 1).read_to_end(&mut bytes)?;
    if bytes.len() > limit {
        return Err(std::io::Error::other(format!(
            "larger than {} KiB, which no slurm-dws config is",
            limit >> 10
        )));
    }
    String::from_utf8(bytes).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// Where the config lives when nothing else says.
pub const DEFAULT_PATH: &str = "/etc/slurm-dws/slurm-dws.toml";

/// The validated configuration. Every field is resolved: no defaults are left to the reader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The file this was read from (for messages; not a key).
    pub source: PathBuf,
    /// Node names are `{cluster_name}-{nodeset}-{index}`; also proves ownership of MIGs.
    pub cluster_name: String,
    /// Holds the SQLite database.
    pub state_dir: PathBuf,
    /// The daemon's Unix socket, used by hooks and the admin CLI.
    pub socket: PathBuf,
    /// Where hooks append their log lines (slurmctld discards their stderr).
    pub log_file: PathBuf,
    pub gcp: Gcp,
    pub slurm: Slurm,
    pub reconcile: Reconcile,
    pub daemon: Daemon,
    /// In file order; at least one, names unique.
    pub nodesets: Vec<Nodeset>,
    /// `[pricing]`: prices of a VM-hour for the usage report's estimated cost.
    pub pricing: Pricing,
}

/// `[gcp]`: where and how to call Compute Engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gcp {
    pub project: String,
    pub region: String,
    /// Base URL of the Compute v1 API; always ends with `/`.
    pub endpoint: String,
    pub credentials: Credentials,
    /// Client-side rate limit, below GCE's per-project quota so other tools keep some.
    pub calls_per_minute: u32,
    /// Client-side rate limit of reads (gets, lists, operation waits), within `calls_per_minute`:
    /// GCE counts reads and writes in separate per-minute quotas.
    pub read_calls_per_minute: u32,
    /// Client-side rate limit of writes (mutations), within `calls_per_minute`.
    pub write_calls_per_minute: u32,
    /// Time limit of one HTTP call (seconds); also the most one call (its retries included) or one
    /// operation wait may hold a reconcile pass.
    pub request_timeout: u64,
    /// How long one logical call is retried on retryable errors before giving up (seconds).
    pub retry_deadline: u64,
}

/// `[slurm]`: how to run Slurm's commands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slurm {
    /// Directory holding `scontrol`, `squeue`, `sinfo`.
    pub bin_dir: PathBuf,
    /// Exported as `SLURM_CONF` to Slurm commands when set.
    pub conf: Option<PathBuf>,
    pub node_addr: NodeAddr,
    /// Time box of one Slurm command (seconds).
    pub command_timeout: u64,
    /// Programs that get the nodes of a hook call that are not slurm-dws's (e.g. slurm-gcp's
    /// `resume.py` beside us), with the hook's argv shape and environment. `None`: such nodes are
    /// reported and set DOWN.
    pub delegate_resume: Option<PathBuf>,
    pub delegate_suspend: Option<PathBuf>,
    pub delegate_resume_fail: Option<PathBuf>,
    /// `topology` / `topology_file`: the Slurm topology file kept from GCE's physical host topology.
    pub topology: Topology,
}

impl Slurm {
    /// The program that gets the nodes that are not ours in a `kind` hook call, if any.
    pub fn delegate(&self, kind: crate::model::HookKind) -> Option<&Path> {
        use crate::model::HookKind;
        match kind {
            HookKind::Resume => self.delegate_resume.as_deref(),
            HookKind::Suspend => self.delegate_suspend.as_deref(),
            HookKind::ResumeFail => self.delegate_resume_fail.as_deref(),
        }
    }
}

/// Whether slurm-dws tells slurmctld where a node is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeAddr {
    /// slurmctld resolves the node name itself (GCE internal DNS, or `cloud_reg_addrs`).
    None,
    /// `scontrol update nodename=N nodeaddr=<networkIP>` once the VM is up.
    InternalIp,
}

impl NodeAddr {
    /// The spelling used in the config file.
    pub fn as_config_str(self) -> &'static str {
        match self {
            NodeAddr::None => "none",
            NodeAddr::InternalIp => "internal_ip",
        }
    }
}

/// `[reconcile]`: the daemon's pass loop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reconcile {
    /// Seconds between periodic passes (hooks also wake a pass at once).
    pub interval: u64,
    /// A VM with no node to back must be this old before it is deleted.
    pub orphan_grace: u64,
    /// An empty, owned MIG must stay empty this long before it is deleted.
    pub mig_gc_grace: u64,
    /// First per-nodeset backoff after a capacity error.
    pub backoff_initial: u64,
    /// The backoff doubles up to this.
    pub backoff_max: u64,
    /// The least time between two refreshes of the waiting jobs' `slurm-dws:` AdminComment.
    pub admin_comment_interval: u64,
}

/// `[daemon]`: the service itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Daemon {
    /// Prometheus endpoint; `None` = no metrics listener.
    pub metrics_listen: Option<SocketAddr>,
    /// Besides root, the only user allowed to send hook and mutating commands over the socket
    /// (slurmctld runs the hooks as SlurmUser). `None` (`service_user = ""`) = root only.
    pub service_user: Option<String>,
    /// Finished requests, gone MIGs and events older than this many days are pruned by the daemon.
    pub history_days: u64,
    /// Members of this group may run the read-only commands (`status`, `nodes`, `requests`, `migs`,
    /// `events`, `explain`) over the socket. `None` = only root and the service user.
    pub readers: Option<String>,
    /// This host's name among slurm.conf's `SlurmctldHost` entries; `None` (`controller = ""`) =
    /// the short host name ([`Daemon::controller_name`]).
    pub controller: Option<String>,
    /// A directory every controller sees, where the daemon in charge keeps a copy of its state
    /// (`crate::daemon::shared_state`); `None` = no copy.
    pub shared_state_dir: Option<PathBuf>,
}

impl Daemon {
    /// `controller`, or this host's short name (up to its first dot) when it is not set.
    pub fn controller_name(&self) -> String {
        match &self.controller {
            Some(c) => c.clone(),
            // The UTS host name, as gethostname(2) gives it.
            None => std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map(|h| h.trim().split('.').next().unwrap_or("").to_string())
                .unwrap_or_default(),
        }
    }
}

/// One `[[nodeset]]`: a group of identical nodes backed by one instance template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nodeset {
    pub name: String,
    /// The region of its MIGs, its zones and (when regional) its template: `region`, by default
    /// `gcp.region` (same project).
    pub region: String,
    /// Relative or full URL of a global or regional instance template.
    pub instance_template: String,
    /// Zones of the nodeset's `region` the regional MIGs may use.
    pub zones: Vec<String>,
    /// Indices `[0, node_count_static)`: kept provisioned by the daemon.
    pub node_count_static: u32,
    /// Indices `[static, static + dynamic_max)`: powered up and down by Slurm.
    pub node_count_dynamic_max: u32,
    /// Slurm partition holding this nodeset's nodes (several nodesets may share one).
    pub partition: String,
    /// Extra `NodeName=` parameters, appended verbatim (e.g. `CPUs=208 RealMemory=1800000`).
    pub node_conf: String,
    /// How its VMs are obtained: DWS Flex Start resize requests, or standard / spot VMs created by
    /// name (`provisioning_model`).
    pub provisioning_model: ProvisioningModel,
    /// A dynamic node's VM is deleted as soon as the job it was resumed for ends (its partition is
    /// `OverSubscribe=EXCLUSIVE`), instead of after SuspendTime.
    pub exclusive: bool,
    /// Seconds a resize request of the nodeset may stay queued before the nodeset's powered-down
    /// nodes are made unschedulable (jobs fall back to their other partitions); 0 = only when a
    /// request fails for capacity (then at once).
    pub fallback_after: u64,
    /// A Slurm maintenance reservation `slurm-dws-maint-{node}` over the window of a node whose VM
    /// GCE will maintain (`resourceStatus.upcomingMaintenance`), so no job runs across it.
    pub maintenance_reservation: bool,
    pub dws_flex: DwsFlex,
    /// `[nodeset.placement]`: the workload policy of every MIG of the nodeset; `None` = none.
    pub placement: Option<Placement>,
    /// `[nodeset.reservation]`: the reserved capacity it consumes; `Some` exactly when
    /// `provisioning_model` is `reservation`.
    pub reservation: Option<ReservedCapacity>,
}

impl Nodeset {
    /// Total number of node names of this nodeset.
    pub fn node_count(&self) -> u32 {
        self.node_count_static + self.node_count_dynamic_max
    }

    /// Indices of the static nodes.
    pub fn static_indices(&self) -> Range<u32> {
        0..self.node_count_static
    }

    /// Indices of the dynamic nodes.
    pub fn dynamic_indices(&self) -> Range<u32> {
        self.node_count_static..self.node_count()
    }

    /// Every index, static first.
    pub fn indices(&self) -> Range<u32> {
        0..self.node_count()
    }

    /// The reservation (or block, or sub-block) its template must consume, when the config names
    /// it (`None` for other models, and for a calendar-mode nodeset: GCE names the reservation it
    /// delivers).
    pub fn consumes(&self) -> Option<&ReservationRef> {
        match &self.reservation.as_ref()?.source {
            ReservationSource::Reservation(r) => Some(r),
            ReservationSource::Future(_) => None,
        }
    }

    /// Whether `index` is a static node (it need not be in range).
    pub fn is_static(&self, index: u32) -> bool {
        index < self.node_count_static
    }
}

/// `[nodeset.dws_flex]`: how run durations and queueing are handled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DwsFlex {
    pub enabled: bool,
    /// Run duration when the job's TimeLimit is not used (600..604800).
    pub max_run_duration: u64,
    /// Size the run duration from the job's TimeLimit.
    pub use_job_duration: bool,
    /// Added to TimeLimit: the VM's clock starts before the job does.
    pub boot_allowance: u64,
    /// Cancel a request still queued after this long; 0 = wait for ever.
    pub queue_timeout: u64,
    /// Stop scheduling onto a node this long before GCE deletes it.
    pub eol_grace: u64,
    /// Ask GCE's `advice.capacity` (FLEX_START) before a request group's MIG is created and give
    /// the MIG the zone(s) it advises (`crate::capacity_advice`); best effort.
    pub capacity_advice: bool,
}

/// Smallest run duration GCE accepts (`requestedRunDuration`).
pub const MIN_RUN_DURATION: u64 = 600;
/// Largest run duration GCE accepts: 7 days.
pub const MAX_RUN_DURATION: u64 = 604_800;

/// One thing wrong with a config that parsed: which key, where, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Key path, e.g. `nodeset[1].dws_flex.max_run_duration`.
    pub key: String,
    /// 1-based line of the offending value, when the key was present in the file.
    pub line: Option<usize>,
    pub message: String,
}

/// Why a config could not be loaded. Every message names the file, and the key when there is one.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read (missing, unreadable).
    #[error("cannot read config {path} ({found_by}): {source}")]
    Read {
        path: PathBuf,
        /// How the path was chosen, e.g. `from $SLURM_DWS_CONFIG`.
        found_by: String,
        source: std::io::Error,
    },
    /// Not valid TOML, an unknown key, or a value of the wrong type.
    #[error("{}", parse_location(file, *line, *column, key.as_deref(), message))]
    Parse {
        file: PathBuf,
        line: Option<usize>,
        column: Option<usize>,
        /// Key path, when it could be told from the position.
        key: Option<String>,
        message: String,
    },
    /// Well-formed TOML whose values break the rules: every problem, one per line.
    #[error("{}", problems.iter().map(|p| problem_line(file, p)).collect::<Vec<_>>().join("\n"))]
    Invalid { file: PathBuf, problems: Vec<Problem> },
}

impl ConfigError {
    /// The first error as one line (for a CLI that prints exactly one line), with a count of the rest.
    pub fn first_line(&self) -> String {
        match self {
            ConfigError::Invalid { file, problems } if problems.len() > 1 => format!(
                "{} (and {} more problem{})",
                problem_line(file, &problems[0]),
                problems.len() - 1,
                if problems.len() == 2 { "" } else { "s" }
            ),
            other => other.to_string().replace('\n', " "),
        }
    }

    /// The config file this error is about.
    pub fn path(&self) -> &Path {
        match self {
            ConfigError::Read { path, .. } => path,
            ConfigError::Parse { file, .. } | ConfigError::Invalid { file, .. } => file,
        }
    }

    /// The key paths this error is about (empty for a read error).
    pub fn keys(&self) -> Vec<&str> {
        match self {
            ConfigError::Read { .. } => vec![],
            ConfigError::Parse { key, .. } => key.iter().map(String::as_str).collect(),
            ConfigError::Invalid { problems, .. } => problems.iter().map(|p| p.key.as_str()).collect(),
        }
    }
}

fn parse_location(
    file: &Path,
    line: Option<usize>,
    column: Option<usize>,
    key: Option<&str>,
    message: &str,
) -> String {
    let mut out = file.display().to_string();
    if let Some(line) = line {
        out.push_str(&format!(":{line}"));
        if let Some(column) = column {
            out.push_str(&format!(":{column}"));
        }
    }
    if let Some(key) = key {
        out.push_str(&format!(": {key}"));
    }
    format!("{out}: {message}")
}

fn problem_line(file: &Path, p: &Problem) -> String {
    parse_location(file, p.line, None, Some(&p.key), &p.message)
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "line {line}: {}: {}", self.key, self.message),
            None => write!(f, "{}: {}", self.key, self.message),
        }
    }
}

impl Config {
    /// Find, read and validate the config: `explicit` (`--config`), else `$SLURM_DWS_CONFIG`,
    /// else `slurm-dws.toml` beside `$SLURM_CONF`, else [`DEFAULT_PATH`].
    pub fn load(explicit: Option<&Path>) -> Result<Config, ConfigError> {
        Self::load_with_env(explicit, |k| std::env::var_os(k))
    }

    /// [`Config::load`] with the environment passed in, so tests need not touch the process's.
    ///
    /// `--config` and `$SLURM_DWS_CONFIG` must exist when given. The file beside `$SLURM_CONF`
    /// is skipped when it does not exist: slurmctld always sets `SLURM_CONF` for the hooks, and
    /// they must then find the same `/etc/slurm-dws/slurm-dws.toml` the daemon reads.
    pub fn load_with_env(
        explicit: Option<&Path>,
        env: impl Fn(&str) -> Option<OsString>,
    ) -> Result<Config, ConfigError> {
        let env = |k: &str| env(k).filter(|v| !v.is_empty());
        if let Some(path) = explicit {
            return Self::load_file(path, "from --config");
        }
        if let Some(path) = env(ENV_CONFIG) {
            return Self::load_file(Path::new(&path), &format!("from ${ENV_CONFIG}"));
        }
        let mut also_tried = String::new();
        if let Some(slurm_conf) = env(ENV_SLURM_CONF) {
            let dir = Path::new(&slurm_conf).parent().unwrap_or(Path::new("/")).to_path_buf();
            let candidate = dir.join(FILE_NAME);
            match std::fs::read_to_string(&candidate) {
                Ok(text) => return Self::from_toml_str(&text, &candidate),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    also_tried = format!("; {} beside ${ENV_SLURM_CONF} does not exist", candidate.display());
                }
                Err(source) => {
                    return Err(ConfigError::Read {
                        path: candidate,
                        found_by: format!("beside ${ENV_SLURM_CONF}"),
                        source,
                    })
                }
            }
        }
        Self::load_file(
            Path::new(DEFAULT_PATH),
            &format!("the default path, as neither --config nor ${ENV_CONFIG} is set{also_tried}"),
        )
    }

    fn load_file(path: &Path, found_by: &str) -> Result<Config, ConfigError> {
        let text = read_bounded(path, MAX_CONFIG_BYTES).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            found_by: found_by.to_string(),
            source,
        })?;
        Self::from_toml_str(&text, path)
    }

    /// Parse and validate config text; `origin` is the file it came from (for messages and `source`).
    pub fn from_toml_str(text: &str, origin: &Path) -> Result<Config, ConfigError> {
        let raw: raw::RawConfig =
            toml::from_str(text).map_err(|e| validate::parse_error(text, origin, &e))?;
        validate::resolve(raw, text, origin)
    }

    /// The nodeset called `name`.
    pub fn nodeset(&self, name: &str) -> Option<&Nodeset> {
        self.nodesets.iter().find(|n| n.name == name)
    }

    /// The resolved config as TOML: every key with its effective value. It parses back to the
    /// same `Config`, so `check-config` output is itself a valid config file.
    pub fn to_toml(&self) -> String {
        toml::to_string(&raw::RawConfig::from(self)).expect("a resolved config always serializes to TOML")
    }
}
