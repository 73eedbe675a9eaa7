//! The `slurm-dws` binary: parse the command line, run it, turn the outcome into an exit code.

use std::process::ExitCode;

use clap::Parser;
use slurm_dws::cli::{self, Cli};

fn main() -> ExitCode {
    // clap exits by itself: 0 for --help/--version, 2 for usage errors.
    let cli = Cli::parse();
    match cli::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("slurm-dws: {}", e.message);
            ExitCode::from(e.code)
        }
    }
}
