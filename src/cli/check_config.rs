//! `slurm-dws check-config`: validate the config and print it resolved, or the slurm.conf lines it implies.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::{write_out, CliError};
use crate::config::{render_slurm_conf, Config, ConfigError};

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
        return write_out(out, &render_slurm_conf(&config, &hook_dir));
    }
    let text = format!(
        "# slurm-dws config read from {} is valid.\n\
         # Every key is shown with its effective value (defaults filled in).\n\n{}",
        config.source.display(),
        config.to_toml()
    );
    write_out(out, &text)
}

/// The directory of the running executable: `make install` links the hooks beside it.
fn default_hook_dir() -> Result<PathBuf, CliError> {
    let exe = std::env::current_exe()
        .map_err(|e| CliError::runtime(format!("cannot find this executable's path: {e}")))?;
    Ok(exe.parent().map_or_else(|| PathBuf::from("/"), Path::to_path_buf))
}
