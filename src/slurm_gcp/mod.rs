//! `import-slurm-gcp`: slurm-gcp v6's config.yaml turned into a slurm-dws config, what cannot be kept said in comments.
//!
//! slurm-gcp v6 (Cluster Toolkit's `schedmd-slurm-gcp-v6-*` modules) keeps its whole cluster in
//! one YAML mapping, `/slurm/scripts/config.yaml` on the controller: the core keys
//! (`slurm_cluster_name`, `project`, `slurm_bin_dir`, ...), the VM nodesets under `nodeset`, TPU
//! nodesets under `nodeset_tpu`, dynamic ones under `nodeset_dyn`, and partitions under
//! `partitions`, each keyed by name. slurm-dws speaks the same vocabulary on purpose (node names
//! `{cluster}-{nodeset}-{index}`, static indices first, `node_count_static`,
//! `node_count_dynamic_max`, `instance_template`, `dws_flex`), so a flex nodeset maps key for key
//! and its nodes keep their names.
//!
//! [`import`] is a pure function of the file's text: it returns the TOML, or every problem that
//! stops it (each with the file, line and slurm-gcp key). Placement (`enable_placement`,
//! `placement_max_distance`, `accelerator_topology`) becomes `[nodeset.placement]`. What slurm-dws
//! does not do — non-flex, TPU and dynamic nodesets, reservations, partition options — is not an error: it is
//! listed as comments in the output, next to what it concerns. The output is loaded with
//! [`Config::from_toml_str`] before it is returned, so it always parses.
//!
//! The YAML tree is `yaml.rs`, the walk of it into what the import keeps `read.rs`, the TOML
//! written from that `render.rs`.

mod read;
mod render;
pub mod yaml;

use std::path::{Path, PathBuf};

use crate::config::{Config, ConfigError};
use read::Reader;
use render::render;

/// The largest config.yaml read (a real one is tens of KB: it embeds the slurm.conf templates).
pub const MAX_INPUT_BYTES: usize = 16 << 20;

/// One thing in the file that stops the import.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// 1-based line of the value, when it is in the file.
    pub line: Option<usize>,
    /// slurm-gcp's key path, e.g. `nodeset.a3u.dws_flex.max_run_duration`.
    pub key: String,
    pub message: String,
}

/// Why no config could be made. Every message names the file.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("cannot read {}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{}:{line}:{column}: not YAML: {message}", file.display())]
    Yaml { file: PathBuf, line: usize, column: usize, message: String },
    /// The file is YAML but not a slurm-gcp v6 config slurm-dws can take: every problem.
    #[error("{}", problems.iter().map(|p| problem_line(file, p)).collect::<Vec<_>>().join("\n"))]
    Invalid { file: PathBuf, problems: Vec<Problem> },
    /// The generated config does not load (a value slurm-gcp accepts and slurm-dws does not).
    #[error("{}: the slurm-dws config made from it is invalid: {}", file.display(), source.first_line())]
    Config { file: PathBuf, source: Box<ConfigError> },
}

impl ImportError {
    /// The first problem as one line, with a count of the rest.
    pub fn first_line(&self) -> String {
        match self {
            ImportError::Invalid { file, problems } if problems.len() > 1 => format!(
                "{} (and {} more problem{})",
                problem_line(file, &problems[0]),
                problems.len() - 1,
                if problems.len() == 2 { "" } else { "s" }
            ),
            other => other.to_string().replace('\n', " "),
        }
    }
}

fn problem_line(file: &Path, p: &Problem) -> String {
    match p.line {
        Some(line) => format!("{}:{line}: {}: {}", file.display(), p.key, p.message),
        None => format!("{}: {}: {}", file.display(), p.key, p.message),
    }
}

/// Read `path` and [`import`] it.
pub fn import_file(path: &Path) -> Result<String, ImportError> {
    use std::io::Read;
    let read = |source| ImportError::Read { path: path.to_path_buf(), source };
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_INPUT_BYTES as u64 + 1).read_to_end(&mut bytes))
        .map_err(read)?;
    if bytes.len() > MAX_INPUT_BYTES {
        return Err(read(std::io::Error::other(format!(
            "larger than {} MiB, which no slurm-gcp config.yaml is",
            MAX_INPUT_BYTES >> 20
        ))));
    }
    let text = String::from_utf8(bytes)
        .map_err(|e| read(std::io::Error::new(std::io::ErrorKind::InvalidData, e)))?;
    import(&text, path)
}

/// The slurm-dws config for slurm-gcp config.yaml `text` (read from `origin`, named in messages
/// and in the output's header).
pub fn import(text: &str, origin: &Path) -> Result<String, ImportError> {
    let doc = yaml::parse(text).map_err(|e| ImportError::Yaml {
        file: origin.to_path_buf(),
        line: e.line,
        column: e.column,
        message: e.message,
    })?;
    let mut r = Reader { problems: Vec::new() };
    let cluster = r.read(&doc);
    if !r.problems.is_empty() {
        let mut problems = r.problems;
        problems.sort_by_key(|p| (p.line.is_none(), p.line));
        return Err(ImportError::Invalid { file: origin.to_path_buf(), problems });
    }
    let toml = render(&cluster, origin);
    let target = origin.with_file_name("slurm-dws.toml");
    Config::from_toml_str(&toml, &target)
        .map_err(|source| ImportError::Config { file: origin.to_path_buf(), source: Box::new(source) })?;
    Ok(toml)
}

/// What the import keeps, and what it says it cannot keep.
#[derive(Debug, Default)]
struct Cluster {
    cluster_name: String,
    project: String,
    region: String,
    bin_dir: String,
    /// `None` on a hybrid cluster: slurm.conf is wherever that controller keeps it.
    conf: Option<String>,
    credentials: String,
    nodesets: Vec<Nodeset>,
    /// Comments for the top of the file: what is not carried over, cluster-wide.
    notes: Vec<String>,
}

#[derive(Debug, Default)]
struct Nodeset {
    name: String,
    instance_template: String,
    zones: Vec<String>,
    node_count_static: u64,
    node_count_dynamic_max: u64,
    partition: Option<String>,
    node_conf: String,
    max_run_duration: u64,
    use_job_duration: bool,
    /// `[nodeset.placement]` from `enable_placement` / `placement_max_distance` / `accelerator_topology`.
    placement: Option<ImportedPlacement>,
    /// `[nodeset.reservation]` from `reservation_name` / `future_reservation`: the key it is written
    /// under (`name` or `future_reservation`) and the full relative URL.
    reservation: Option<(&'static str, String)>,
    /// Comments above this nodeset.
    notes: Vec<String>,
}

/// The `[nodeset.placement]` keys an import writes: an owned HIGH_THROUGHPUT workload policy.
#[derive(Debug, Clone, PartialEq, Eq)]
enum ImportedPlacement {
    Distance(crate::config::TopologyDistance),
    AcceleratorTopology(String),
}

/// slurm-gcp's `placement_max_distance` (a compact placement policy's `maxDistance`, 1..3) as a
/// workload policy's `maxTopologyDistance`: 1 (the closest: one rack) is a subblock, 2 a block, 3
/// anywhere in the cluster (docs/migrating-from-slurm-gcp.md).
pub fn topology_distance_of(max_distance: i64) -> Option<crate::config::TopologyDistance> {
    use crate::config::TopologyDistance;
    match max_distance {
        1 => Some(TopologyDistance::Subblock),
        2 => Some(TopologyDistance::Block),
        3 => Some(TopologyDistance::Cluster),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
