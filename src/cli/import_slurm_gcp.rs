//! `slurm-dws import-slurm-gcp FILE`: print the slurm-dws config made from slurm-gcp v6's config.yaml.

use std::io::Write;
use std::path::PathBuf;

use super::{write_out, CliError};
use crate::slurm_gcp::{import_file, ImportError};

/// Options of `import-slurm-gcp`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// slurm-gcp v6's config.yaml (on its controller: /slurm/scripts/config.yaml).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
}

/// Print the config on `out`. On a problem nothing is printed there: stderr lists every problem,
/// one per line, and the command exits 2.
pub fn run(args: &Args, out: &mut impl Write) -> Result<(), CliError> {
    match import_file(&args.file) {
        Ok(toml) => write_out(out, &toml),
        Err(ImportError::Invalid { file, problems }) if problems.len() > 1 => {
            let err = ImportError::Invalid { file: file.clone(), problems };
            for line in err.to_string().lines() {
                eprintln!("slurm-dws: {line}");
            }
            let count = err.to_string().lines().count();
            Err(CliError::usage(format!("{count} problems in {}; no config printed", file.display())))
        }
        Err(e) => Err(CliError::usage(e.first_line())),
    }
}
