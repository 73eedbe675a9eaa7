//! The `slurm-dws` binary: parse the command line, run it, turn the outcome into an exit code.

use std::process::ExitCode;

use clap::Parser;

use slurm_dws::cli::{self, Cli};

/// jemalloc, with one arena and no dirty or muzzy pages kept: a steady 10k-node pass allocates and
/// frees ~20 MB; glibc's malloc spent ~18% of the pass in its own bins, and more arenas or kept
/// pages hold tens of MB more RSS (`make bench`; docs/architecture.md, "Memory"). The feature
/// `system-malloc` (heap profiling only, benches/budgets/whole_pass.rs) leaves glibc's malloc.
#[cfg(all(target_os = "linux", not(feature = "system-malloc")))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read once when it starts (`_rjem_` is the crate's symbol prefix).
#[cfg(all(target_os = "linux", not(feature = "system-malloc")))]
#[unsafe(export_name = "_rjem_malloc_conf")]
pub static MALLOC_CONF: &[u8; 44] = b"narenas:1,dirty_decay_ms:0,muzzy_decay_ms:0\0";

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
