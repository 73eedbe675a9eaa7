//! Command-line interface: the clap definition of `slurm-dws`, dispatch, and exit codes.
//!
//! Every subcommand is one variant of [`Command`] holding its own clap `Args` struct, and one
//! arm of [`run`] calling into its own file (`check_config.rs`, ...). Adding `daemon`,
//! `resume`, `nodes` and the rest means adding a variant, a file and an arm; nothing else.
//!
//! Errors reach `main` as a [`CliError`]: an exit code and ONE line of text. Exit codes are
//! the project's contract: 0 success, 1 failure at run time, 2 bad usage or bad input (clap's
//! own usage errors exit 2 as well).

pub mod check_config;

use std::fmt;
use std::io::Write;
use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

use crate::config::ConfigError;

/// `slurm-dws`: Slurm power saving through GCE DWS Flex Start.
#[derive(Debug, Parser)]
#[command(name = "slurm-dws", version, about, propagate_version = true)]
pub struct Cli {
    /// Config file [default: $SLURM_DWS_CONFIG, else slurm-dws.toml beside $SLURM_CONF,
    /// else /etc/slurm-dws/slurm-dws.toml]
    #[arg(long, global = true, value_name = "PATH")]
    pub config: Option<PathBuf>,

    /// Format of log lines on stderr.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    #[command(subcommand)]
    pub command: Command,
}

/// Log line format: `text` for people, `json` for log pipelines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Validate the config and print it resolved (every default filled in), or the slurm.conf
    /// lines it implies. Exits 2 with the first problem when it is invalid.
    CheckConfig(check_config::Args),
    /// Print the version.
    Version,
}

/// Exit code: success.
pub const EXIT_OK: u8 = 0;
/// Exit code: failure at run time.
pub const EXIT_RUNTIME: u8 = 1;
/// Exit code: bad usage or bad input (malformed hostlist, bad config).
pub const EXIT_USAGE: u8 = 2;

/// A failed command: the process's exit code and one line for stderr.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CliError {
    pub code: u8,
    pub message: String,
}

impl CliError {
    /// Exit 1: something failed while running.
    pub fn runtime(message: impl Into<String>) -> Self {
        Self::new(EXIT_RUNTIME, message)
    }

    /// Exit 2: the user asked for something invalid.
    pub fn usage(message: impl Into<String>) -> Self {
        Self::new(EXIT_USAGE, message)
    }

    /// Newlines are folded so the message stays one line (one syslog/journal record).
    fn new(code: u8, message: impl Into<String>) -> Self {
        let message: String = message.into();
        let message = message.lines().collect::<Vec<_>>().join("; ");
        CliError { code, message }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CliError {}

/// A bad config is bad input: exit 2, with the first problem (and how many more) as the line.
impl From<ConfigError> for CliError {
    fn from(e: ConfigError) -> Self {
        CliError::usage(e.first_line())
    }
}

/// Run the parsed command line, writing its output to stdout.
pub fn run(cli: Cli) -> Result<(), CliError> {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match cli.command {
        Command::CheckConfig(ref args) => check_config::run(cli.config.as_deref(), args, &mut out),
        Command::Version => write_out(
            &mut out,
            &format!("slurm-dws {}\n", env!("CARGO_PKG_VERSION")),
        ),
    }
}

/// Write command output; a closed stdout is a run-time failure, not a panic.
pub(crate) fn write_out(out: &mut impl Write, text: &str) -> Result<(), CliError> {
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| CliError::runtime(format!("cannot write output: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn usage_errors_exit_2() {
        let e = Cli::try_parse_from(["slurm-dws", "no-such-command"]).unwrap_err();
        assert_eq!(e.exit_code(), i32::from(EXIT_USAGE));
        let e = Cli::try_parse_from(["slurm-dws", "--log-format", "xml", "version"]).unwrap_err();
        assert_eq!(e.exit_code(), i32::from(EXIT_USAGE));
    }

    #[test]
    fn global_options_go_anywhere() {
        let cli = Cli::try_parse_from([
            "slurm-dws",
            "check-config",
            "--config",
            "/x.toml",
            "--log-format",
            "json",
        ])
        .unwrap();
        assert_eq!(cli.config.as_deref(), Some(std::path::Path::new("/x.toml")));
        assert_eq!(cli.log_format, LogFormat::Json);
    }

    #[test]
    fn errors_are_one_line() {
        let e = CliError::runtime("a\nb");
        assert_eq!((e.code, e.message.as_str()), (1, "a; b"));
    }
}
