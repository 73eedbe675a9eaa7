//! `slurm-dws check-config`: validate the config and print it resolved, or the slurm.conf lines it implies.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{write_out, CliError};
use crate::config::slurm_conf::render_slurm_conf_for;
use crate::config::{Config, ConfigError};
use crate::slurm::{Slurm, SlurmVersion};

/// Options of `check-config`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Print the slurm.conf lines generated from the config instead of the config.
    #[arg(long)]
    pub print_slurm_conf: bool,

    /// Directory slurm.conf should run the hooks from [default: this executable's directory,
    /// where `make install` puts the slurm-dws-* links].
    #[arg(long, value_name = "DIR", requires = "print_slurm_conf")]
    pub hook_dir: Option<PathBuf>,

    /// The Slurm release to print the slurm.conf lines for, e.g. 24.11 [default: what
    /// `scontrol --version` of `[slurm] bin_dir` says; if it cannot tell, the newest release
    /// slurm-dws knows].
    #[arg(long, value_name = "VERSION", requires = "print_slurm_conf")]
    pub slurm_version: Option<SlurmVersion>,

    /// Also read each nodeset's instance template from GCE (read-only) and check that it can work
    /// for DWS Flex Start; exit 2 naming the nodeset, the field and the value it needs.
    #[arg(long)]
    pub online: bool,

    /// Config file to check (the same as --config).
    #[arg(value_name = "PATH")]
    pub path: Option<PathBuf>,
}

/// Load `config` (or `args.path`) and print the result to `out`; an invalid config also lists
/// every problem on `out`, one per line.
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
    let config = match Config::load(explicit) {
        Ok(config) => config,
        Err(e) => {
            // stderr gets the first problem as one line (via main); stdout lists them all, so
            // one run is enough to fix the whole file.
            if let ConfigError::Invalid { .. } = e {
                write_out(out, &format!("{e}\n"))?;
            }
            return Err(e.into());
        }
    };
    if args.online {
        let problems = super::check_online::template_problems(&config)?;
        if let Some(first) = problems.first() {
            write_out(out, &format!("{}\n", problems.join("\n")))?;
            let more = problems.len() - 1;
            return Err(CliError::usage(if more > 0 {
                format!("{first} (and {more} more)")
            } else {
                first.clone()
            }));
        }
    }
    if args.print_slurm_conf {
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
        return write_out(out, &render_slurm_conf_for(&config, &hook_dir, version));
    }
    let text = format!(
        "# slurm-dws config read from {} is valid.\n\
         # Every key is shown with its effective value (defaults filled in).\n\n{}",
        config.source.display(),
        config.to_toml()
    );
    write_out(out, &text)
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
