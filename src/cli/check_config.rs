//! `slurm-dws check-config`: validate the config and print it resolved, or the slurm.conf lines it implies.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::check_machine::{self, Machine, ALTERNATIVE_BIN_DIR};
use super::{write_out, CliError};
use crate::config::raw::{RawConfig, Val};
use crate::config::slurm_conf::render_slurm_conf_with;
use crate::config::{Config, ConfigError};
use crate::slurm::{Slurm, SlurmVersion};

/// Options of `check-config`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Print the slurm.conf lines generated from the config instead of the config.
    #[arg(long)]
    pub print_slurm_conf: bool,

    /// Directory slurm.conf should run the hooks from, checked to hold them [default: this
    /// executable's directory, where `make install` puts the slurm-dws-* links].
    #[arg(long, value_name = "DIR")]
    pub hook_dir: Option<PathBuf>,

    /// Check the file only, not this machine (bin_dir, slurm.conf, key file, hooks): for a config
    /// written for another machine.
    #[arg(long)]
    pub config_only: bool,

    /// The Slurm release to print the slurm.conf lines for, e.g. 24.11 [default: what
    /// `scontrol --version` of `[slurm] bin_dir` says; if it cannot tell, the newest release
    /// slurm-dws knows].
    #[arg(long, value_name = "VERSION", requires = "print_slurm_conf")]
    pub slurm_version: Option<SlurmVersion>,

    /// Also read each nodeset's instance template from GCE (read-only) and check that it can work
    /// for DWS Flex Start; exit 2 naming the nodeset, the field and the value it needs. With
    /// --print-slurm-conf, also read its machine type and put CPUs, RealMemory, Gres=gpu:N and
    /// Features on its NodeName line (what node_conf sets wins).
    #[arg(long)]
    pub online: bool,

    /// Config file to check (the same as --config).
    #[arg(value_name = "PATH")]
    pub path: Option<PathBuf>,
}

/// Load `config` (or `args.path`), check it and this machine, and print the result to `out`. Any
/// problem (in the file, or on the machine for what the file says) is listed on `out`, one per
/// line, and the command exits 2 with the first one.
pub fn run(config: Option<&Path>, args: &Args, out: &mut impl Write) -> Result<(), CliError> {
    let explicit = match (config, args.path.as_deref()) {
        (Some(a), Some(b)) if a != b => {
            return Err(CliError::usage(format!(
                "check-config: --config {} and PATH {} disagree; give one",
                a.display(),
                b.display()
            )))
        }
        (a, b) => a.or(b),
    };
    let hook_dir = match &args.hook_dir {
        Some(dir) if dir.is_absolute() => dir.clone(),
        Some(dir) => {
            return Err(CliError::usage(format!(
                "--hook-dir {} must be an absolute path (slurmctld runs the hooks from its own directory)",
                dir.display()
            )))
        }
        None => default_hook_dir()?,
    };
    let (loaded, mut problems) = match Config::load(explicit) {
        Ok(config) => {
            let source = config.source.clone();
            (Some(config), ProblemList::new(source))
        }
        Err(ConfigError::Invalid { file, problems }) => {
            let mut list = ProblemList::new(file.clone());
            list.lines =
                ConfigError::Invalid { file, problems }.to_string().lines().map(String::from).collect();
            (None, list)
        }
        // Not TOML, or not readable: nothing else can be judged.
        Err(e) => return Err(e.into()),
    };
    if !args.config_only {
        problems.check_machine(&hook_dir);
    }
    if let (false, Some(config)) = (args.config_only, loaded.as_ref()) {
        problems.check_controllers(config);
    }
    if let (true, Some(config)) = (args.online, loaded.as_ref()) {
        // Template problems are listed with the others; a GCE that does not answer is exit 1.
        problems.lines.extend(super::check_online::template_problems(config)?);
    }
    if !problems.lines.is_empty() {
        // stderr gets the first problem as one line (via main); stdout lists them all, so one run
        // is enough to fix everything.
        write_out(out, &problems.lines.iter().map(|l| format!("{l}\n")).collect::<String>())?;
        return Err(CliError::usage(problems.first_line()));
    }
    let config = loaded.expect("no problems means the config loaded");
    if args.print_slurm_conf {
        let version = match args.slurm_version {
            Some(v) if !v.is_supported() => {
                return Err(CliError::usage(format!(
                    "--slurm-version {}: older than {}, the oldest release slurm-dws supports",
                    v.release_name(),
                    SlurmVersion::OLDEST.release_name()
                )))
            }
            Some(v) => Some(v),
            None => match installed_slurm_version(&config) {
                Ok(v) => Some(v),
                Err(why) => {
                    eprintln!(
                        "check-config: cannot tell the Slurm version ({why}); printing the lines for Slurm {} \
                         (--slurm-version VERSION chooses)",
                        SlurmVersion::LATEST_KNOWN.release_name()
                    );
                    None
                }
            },
        };
        let derived = if args.online { super::check_online::node_shapes(&config)? } else { BTreeMap::new() };
        return write_out(out, &render_slurm_conf_with(&config, &hook_dir, version, &derived));
    }
    let text = format!(
        "# slurm-dws config read from {} is valid.\n\
         # Every key is shown with its effective value (defaults filled in).\n\n{}",
        config.source.display(),
        config.to_toml()
    );
    write_out(out, &text)
}

/// Every problem of one run, as `file:line: key: message` lines.
struct ProblemList {
    file: PathBuf,
    lines: Vec<String>,
}

impl ProblemList {
    fn new(file: PathBuf) -> Self {
        ProblemList { file, lines: Vec::new() }
    }

    fn first_line(&self) -> String {
        match self.lines.len() {
            0 => String::new(),
            1 => self.lines[0].clone(),
            n => format!("{} (and {} more problem{})", self.lines[0], n - 1, if n == 2 { "" } else { "s" }),
        }
    }

    /// The machine checks, from the file as written (so they run even when other keys are invalid),
    /// each problem at the line of the key it concerns.
    fn check_machine(&mut self, hook_dir: &Path) {
        let Ok(text) = std::fs::read_to_string(&self.file) else { return };
        let Ok(raw) = toml::from_str::<RawConfig>(&text) else { return };
        let slurm = raw.slurm.unwrap_or_default();
        let gcp = raw.gcp.unwrap_or_default();
        let daemon = raw.daemon.unwrap_or_default();
        let line = |v: &Val<String>| v.as_ref().map(|s| text[..s.span().start].matches('\n').count() + 1);
        let value = |v: &Val<String>| v.as_ref().map(|s| s.get_ref().clone());
        let abs = |v: &Val<String>| value(v).map(PathBuf::from).filter(|p| p.is_absolute());
        let machine = Machine {
            bin_dir: match &slurm.bin_dir {
                None => PathBuf::from("/usr/bin"),
                Some(_) => match abs(&slurm.bin_dir) {
                    Some(p) => p,
                    None => return, // invalid: already reported
                },
            },
            conf: abs(&slurm.conf),
            env_slurm_conf: std::env::var_os("SLURM_CONF").filter(|v| !v.is_empty()).map(PathBuf::from),
            key_file: abs(&gcp.credentials),
            service_user: match value(&daemon.service_user) {
                None => Some("slurm".to_string()),
                Some(u) if u.is_empty() => None,
                Some(u) => Some(u),
            },
            hook_dir: hook_dir.to_path_buf(),
            alternative_bin_dir: PathBuf::from(ALTERNATIVE_BIN_DIR),
        };
        for f in check_machine::check(&machine) {
            let at = match f.key {
                Some("slurm.bin_dir") => line(&slurm.bin_dir),
                Some("slurm.conf") => line(&slurm.conf),
                Some("gcp.credentials") => line(&gcp.credentials),
                Some("daemon.service_user") => line(&daemon.service_user),
                _ => None,
            };
            let file = self.file.display();
            self.lines.push(match (f.key, at) {
                (Some(key), Some(at)) => format!("{file}:{at}: {key}: {}", f.message),
                (Some(key), None) => format!("{file}: {key}: {}", f.message),
                (None, _) => format!("{file}: {}", f.message),
            });
        }
    }
}

impl ProblemList {
    /// `daemon.controller` among slurm.conf's SlurmctldHost entries (as `scontrol show config`
    /// reports them, or the file when no controller answers), `daemon.shared_state_dir` readable
    /// and writable.
    fn check_controllers(&mut self, config: &Config) {
        let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else { return };
        let hosts = rt.block_on(crate::daemon::role::controller_hosts(config)).unwrap_or_default();
        for (key, message) in crate::daemon::role::problems(config, &hosts) {
            self.lines.push(format!("{}: {key}: {message}", self.file.display()));
        }
    }
}

/// `scontrol --version` of the Slurm the config points at, time-boxed to 5 s. Not tried when the
/// slurm.conf it would read does not exist: Slurm's commands then retry for a minute.
fn installed_slurm_version(config: &Config) -> Result<SlurmVersion, String> {
    let conf = config.slurm.conf.clone().or_else(|| std::env::var_os("SLURM_CONF").map(PathBuf::from));
    if let Some(conf) = conf.filter(|c| !c.exists()) {
        return Err(format!("{} does not exist", conf.display()));
    }
    let timeout = Duration::from_secs(config.slurm.command_timeout.clamp(1, 5));
    let slurm = Slurm::new(config.slurm.bin_dir.clone(), config.slurm.conf.clone(), timeout);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    rt.block_on(slurm.version()).map_err(|e| e.to_string())
}

/// The directory of the running executable: `make install` links the hooks beside it.
fn default_hook_dir() -> Result<PathBuf, CliError> {
    let exe = std::env::current_exe()
        .map_err(|e| CliError::runtime(format!("cannot find this executable's path: {e}")))?;
    Ok(exe.parent().map_or_else(|| PathBuf::from("/"), Path::to_path_buf))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(bin_dir: &Path, conf: &Path) -> Config {
        let text = format!(
            "cluster_name = \"hpc\"\n[gcp]\nproject = \"p\"\nregion = \"us-central1\"\n\
             [slurm]\nbin_dir = \"{}\"\nconf = \"{}\"\n\
             [[nodeset]]\nname = \"a\"\ninstance_template = \"projects/p/global/instanceTemplates/t\"\n\
             zones = [\"us-central1-a\"]\nnode_count_dynamic_max = 2\n",
            bin_dir.display(),
            conf.display()
        );
        Config::from_toml_str(&text, Path::new("/etc/slurm-dws/slurm-dws.toml")).unwrap()
    }

    #[test]
    fn the_installed_version_is_asked_only_when_slurm_conf_exists() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let scontrol = dir.path().join("scontrol");
        std::fs::write(&scontrol, "#!/bin/sh\n[ \"$1\" = --version ] && echo 'slurm 24.11.5'\n").unwrap();
        std::fs::set_permissions(&scontrol, std::fs::Permissions::from_mode(0o755)).unwrap();
        let conf = dir.path().join("slurm.conf");
        std::fs::write(&conf, "ClusterName=hpc\n").unwrap();
        assert_eq!(installed_slurm_version(&config(dir.path(), &conf)), Ok(SlurmVersion::new(24, 11, 5)));

        let missing = dir.path().join("missing.conf");
        let err = installed_slurm_version(&config(dir.path(), &missing)).unwrap_err();
        assert_eq!(err, format!("{} does not exist", missing.display()));

        let err = installed_slurm_version(&config(&dir.path().join("nowhere"), &conf)).unwrap_err();
        assert!(err.contains("cannot run"), "{err}");
    }
}
