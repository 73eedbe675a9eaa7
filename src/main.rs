//! The `slurm-dws` binary: parse the command line, run it, turn the outcome into an exit code.

use std::process::ExitCode;

use clap::Parser;

use slurm_dws::cli::{self, Cli};

fn main() -> ExitCode {
    // Under slurmctld fds 0-2 are closed and signals blocked: repair that before anything opens a file.
    slurm_dws::hook::prepare_process();
    // --help and --version print in full (exit 0); a usage error is one line and exit 2.
    let cli = match Cli::try_parse_from(cli::argv()) {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("slurm-dws: {}", cli::usage_error_line(&e));
            return ExitCode::from(cli::EXIT_USAGE);
        }
    };
    match cli::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("slurm-dws: {}", e.message);
            ExitCode::from(e.code)
        }
    }
}
