//! The `slurm-dws` binary: parse the command line, run it, turn the outcome into an exit code.

use std::process::ExitCode;

use clap::Parser;
use slurm_dws::cli::{self, Cli};

fn main() -> ExitCode {
    // Under slurmctld fds 0-2 are closed and signals blocked: repair that before anything opens a file.
    slurm_dws::hook::prepare_process();
    // clap exits by itself: 0 for --help/--version, 2 for usage errors.
    let cli = Cli::parse_from(cli::argv());
    match cli::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("slurm-dws: {}", e.message);
            ExitCode::from(e.code)
        }
    }
}
