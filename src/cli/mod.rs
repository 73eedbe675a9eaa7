//! Command-line interface: the clap definition of `slurm-dws`, dispatch, and exit codes.
//!
//! Every subcommand is one variant of [`Command`] holding its own clap `Args` struct, and one
//! arm of [`run`] calling into its own file (`check_config.rs`, ...). Adding `daemon`,
//! `resume`, `nodes` and the rest means adding a variant, a file and an arm; nothing else.
//!
//! Errors reach `main` as a [`CliError`]: an exit code and ONE line of text. Exit codes are
//! the project's contract: 0 success, 1 failure at run time, 2 bad usage or bad input (clap's
//! own usage errors exit 2 as well).

pub mod admin;
pub mod check_config;
pub mod check_machine;
pub mod check_online;
pub mod completion;
pub mod import_slurm_gcp;
pub mod live;
pub mod logging;
pub mod source;
pub mod table;
pub mod unschedulable;
pub mod waiting_view;

use std::io::Write;
use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

use crate::config::{Config, ConfigError};
use crate::model::HookKind;
use crate::protocol::Request;

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
    /// Validate the config, and that this machine has what it names, then print it resolved
    /// (every default filled in) or the slurm.conf lines it implies. Exits 2 on any problem.
    CheckConfig(check_config::Args),
    /// Print the version.
    Version,
    /// Run the daemon (the systemd service): socket, reconcile passes, shutdown on SIGTERM.
    Daemon,
    /// The ResumeProgram hook: record a resume of HOSTLIST durably and wake the daemon.
    Resume(HookArgs),
    /// The SuspendProgram hook: record a suspend of HOSTLIST durably and wake the daemon.
    Suspend(HookArgs),
    /// The ResumeFailProgram hook: record that Slurm gave up resuming HOSTLIST.
    ResumeFail(HookArgs),
    /// Daemon liveness, the last pass, node counts, pending work, capacity backoffs.
    Status(JsonArg),
    /// Nodes slurm-dws tracks.
    Nodes(NodesArgs),
    /// Resize-request groups (one MIG + one resize request each).
    Requests(RequestsArgs),
    /// MIGs slurm-dws owns.
    Migs(ListArgs),
    /// The event log.
    Events(EventsArgs),
    /// VM and GPU hours (busy and idle) and their estimated cost over a period, by job, user,
    /// account, partition, nodeset or provisioning model; with the queue time of the requests.
    Usage(UsageArgs),
    /// A node's story: what asked for it, what backs it, when it dies, what happens next.
    Explain(ExplainArgs),
    /// Garbage collection: what a pass would delete and why (--dry-run), or delete it now.
    Gc(GcArgs),
    /// Run one reconcile pass now and print its report.
    Reconcile(JsonArg),
    /// Repair nodes whose GPUs are bad: drain them, requeue their jobs, report a reservation-bound
    /// VM's host as faulty to GCE or replace any other VM. Exits 2 for a node that is not ours or
    /// an unknown behaviour.
    Repair(RepairArgs),
    /// Print a slurm-dws config made from slurm-gcp v6's config.yaml; what it cannot keep is
    /// said in comments (docs/migrating-from-slurm-gcp.md).
    ImportSlurmGcp(import_slurm_gcp::Args),
    /// Print a shell completion script (bash, zsh or fish).
    Completion(completion::Args),
    /// Write the man pages into DIR (used by `make install` and `make deb`).
    #[command(hide = true)]
    Manpages(completion::ManArgs),
    /// (internal) Started by a hook: runs a `[slurm] delegate_*` program for the nodes that are not
    /// slurm-dws's, waits for it and records how it ended.
    #[command(hide = true)]
    RunDelegate(crate::delegate::RunArgs),
}

/// The hooks' only argument.
#[derive(Debug, Clone, clap::Args)]
pub struct HookArgs {
    /// Slurm hostlist expression, e.g. `hpc-a3u-[0-3],hpc-b-7`.
    pub hostlist: String,
}

/// `--json` alone.
#[derive(Debug, Clone, clap::Args)]
pub struct JsonArg {
    /// Print JSON for scripts instead of text for people.
    #[arg(long)]
    pub json: bool,
}

/// Options of every listing, as `sinfo` and `squeue` take them. `-h` is `--noheader` here, as there:
/// help is `--help`.
#[derive(Debug, Clone, clap::Args)]
#[command(disable_help_flag = true)]
pub struct ListArgs {
    /// Print JSON for scripts instead of a table for people.
    #[arg(long)]
    pub json: bool,
    /// Show these fields, in this order: the --json field names, comma-separated.
    #[arg(short = 'o', long = "format", value_name = "FIELD,...")]
    pub format: Option<String>,
    /// No header line.
    #[arg(short = 'h', long)]
    pub noheader: bool,
    /// Show more fields.
    #[arg(short = 'l', long)]
    pub long: bool,
    /// Sort by this field (a --json field name, e.g. `state`, `name`).
    #[arg(long, value_name = "FIELD")]
    pub sort: Option<String>,
    /// Print help.
    #[arg(long, action = clap::ArgAction::Help)]
    pub help: Option<bool>,
}

impl ListArgs {
    fn listing(&self) -> table::Listing {
        table::Listing {
            json: self.json,
            sort: self.sort.clone(),
            format: self.format.clone(),
            noheader: self.noheader,
            long: self.long,
            width: table::terminal_width(),
        }
    }
}

/// Options of `nodes`.
#[derive(Debug, Clone, clap::Args)]
pub struct NodesArgs {
    #[command(flatten)]
    pub list: ListArgs,
    /// Only nodes of this nodeset.
    #[arg(long)]
    pub nodeset: Option<String>,
    /// Only nodes in this state (powered_down, resume_pending, requested, up, suspending).
    #[arg(long)]
    pub state: Option<String>,
    /// One line per nodeset and state, its nodes as a hostlist (as `sinfo` prints them).
    #[arg(short = 's', long)]
    pub summarize: bool,
    /// Only these nodes (hostlist expressions).
    pub nodes: Vec<String>,
}

/// Options of `requests`.
#[derive(Debug, Clone, clap::Args)]
pub struct RequestsArgs {
    #[command(flatten)]
    pub list: ListArgs,
    /// Only requests that are not final yet.
    #[arg(long)]
    pub active: bool,
}

/// Options of `events`.
#[derive(Debug, Clone, clap::Args)]
pub struct EventsArgs {
    #[command(flatten)]
    pub list: ListArgs,
    /// Only events about this node.
    #[arg(long)]
    pub node: Option<String>,
    /// Only events since this time: RFC3339, or an age such as 15m, 2h, 1d.
    #[arg(long)]
    pub since: Option<String>,
    /// At most this many (the newest).
    #[arg(long, default_value_t = 1000)]
    pub limit: i64,
}

/// Options of `usage`.
#[derive(Debug, Clone, clap::Args)]
pub struct UsageArgs {
    /// Start of the period: RFC 3339, or a duration back from now such as 7d, 12h, 30m [default:
    /// 7 days before --until].
    #[arg(long, value_name = "T")]
    pub since: Option<String>,
    /// End of the period (not included): RFC 3339, or a duration back from now [default: now].
    #[arg(long, value_name = "T")]
    pub until: Option<String>,
    /// Group the rows by job, user, account, partition, nodeset or model (provisioning model).
    #[arg(long, default_value = "nodeset", value_name = "KEY", value_parser = ["job", "user", "account", "partition", "nodeset", "model"])]
    pub by: String,
    /// Print JSON for scripts.
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print the rows as CSV with a header line.
    #[arg(long)]
    pub csv: bool,
}

/// Options of `explain`.
#[derive(Debug, Clone, clap::Args)]
pub struct ExplainArgs {
    /// The node to explain.
    pub node: String,
    /// Print JSON for scripts.
    #[arg(long)]
    pub json: bool,
}

/// Options of `repair`.
#[derive(Debug, Clone, clap::Args)]
pub struct RepairArgs {
    /// The nodes (names or hostlist expressions such as `hpc-a-[0-3]`).
    #[arg(required = true)]
    pub nodes: Vec<String>,
    /// GCE's fault behaviour: PERFORMANCE, SILENT_DATA_CORRUPTION or UNRECOVERABLE_GPU_ERROR.
    #[arg(long, default_value = "PERFORMANCE")]
    pub reason: String,
    /// Free text sent to GCE with the report (for example the XID).
    #[arg(long, default_value = "")]
    pub description: String,
    /// Print JSON for scripts.
    #[arg(long)]
    pub json: bool,
}

/// Options of `gc`.
#[derive(Debug, Clone, clap::Args)]
pub struct GcArgs {
    /// Only list what a pass would delete, and why.
    #[arg(long)]
    pub dry_run: bool,
    /// Print JSON for scripts.
    #[arg(long)]
    pub json: bool,
}

/// The command line, with the hook names rewritten: slurm.conf cannot pass arguments, so
/// `slurm-dws-resume HOSTLIST` (a symlink) means `slurm-dws resume HOSTLIST`.
pub fn argv() -> Vec<std::ffi::OsString> {
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let sub =
        args.first().and_then(|a0| a0.to_str()).and_then(crate::hook::kind_from_argv0).map(|k| match k {
            HookKind::Resume => "resume",
            HookKind::Suspend => "suspend",
            HookKind::ResumeFail => "resume-fail",
        });
    if let Some(sub) = sub {
        args.insert(1, sub.into());
    }
    args
}

/// A clap usage error as one line: clap's own text (error, what was expected, usage) with the
/// blank lines, tips and "--help" pointer folded away, e.g. `unexpected argument '--bogus'
/// found; usage: slurm-dws nodes [OPTIONS] [NODES]...`.
pub fn usage_error_line(e: &clap::Error) -> String {
    if e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        return "a subcommand is required; usage: slurm-dws [OPTIONS] <COMMAND> (slurm-dws --help lists them)"
            .into();
    }
    let text = e.render().to_string();
    let mut line = String::new();
    for l in text.lines().map(str::trim) {
        if l.is_empty() || l.starts_with("tip:") || l.starts_with("For more information") {
            continue;
        }
        let l = l.strip_prefix("error: ").unwrap_or(l);
        let l = l.strip_prefix("Usage: ").map(|u| format!("usage: {u}")).unwrap_or_else(|| l.to_string());
        if !line.is_empty() {
            line.push_str(if line.ends_with(':') { " " } else { "; " });
        }
        line.push_str(&crate::hostlist::escape_control(&l));
    }
    line
}

/// Exit code: success.
pub const EXIT_OK: u8 = 0;
/// Exit code: failure at run time.
pub const EXIT_RUNTIME: u8 = 1;
/// Exit code: bad usage or bad input (malformed hostlist, bad config).
pub const EXIT_USAGE: u8 = 2;

/// A failed command: the process's exit code and one line for stderr.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
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
    let command = match cli.command {
        Command::CheckConfig(ref args) => return check_config::run(cli.config.as_deref(), args, &mut out),
        Command::Version => {
            return write_out(&mut out, &format!("slurm-dws {}\n", env!("CARGO_PKG_VERSION")))
        }
        Command::Daemon => return daemon(cli.config.as_deref(), cli.log_format),
        Command::ImportSlurmGcp(ref args) => return import_slurm_gcp::run(args, &mut out),
        Command::Completion(ref args) => return completion::run(args, &mut out),
        Command::Manpages(ref args) => return completion::manpages(args, &mut out),
        Command::RunDelegate(ref args) => {
            // Detached: nobody reads its exit status; how the program ended is in the event and the log.
            crate::delegate::supervise(args);
            return Ok(());
        }
        other => other,
    };
    let hook_kind = match &command {
        Command::Resume(_) => Some(HookKind::Resume),
        Command::Suspend(_) => Some(HookKind::Suspend),
        Command::ResumeFail(_) => Some(HookKind::ResumeFail),
        _ => None,
    };
    // A config file that does not load: `status` says so (exit 1), a hook falls back to the copy of
    // the config the daemon last accepted (config::last_accepted), anything else is bad input.
    let mut broken: Option<(ConfigError, Option<crate::config::last_accepted::Fallback>)> = None;
    let cfg = match Config::load(cli.config.as_deref()) {
        Ok(cfg) => cfg,
        Err(e) if hook_kind.is_some() || matches!(command, Command::Status(_)) => {
            match crate::config::last_accepted::find(&e) {
                Some(fb) => {
                    let cfg = fb.config.clone();
                    broken = Some((e, Some(fb)));
                    cfg
                }
                None if matches!(command, Command::Status(_)) => {
                    return Err(CliError::runtime(broken_config_line(&e, None)))
                }
                None => {
                    let kind = hook_kind.expect("a hook");
                    let line = format!(
                        "{kind} {}: FAILED (exit 2): {}; no copy of an accepted config found (in the state_dir \
                         it names, nor in {}): nothing recorded",
                        hook_hostlist(&command),
                        e.first_line(),
                        crate::config::last_accepted::DEFAULT_STATE_DIR
                    );
                    crate::syslog::send(crate::syslog::Severity::Err, &crate::hook::tag(kind), &line);
                    return Err(e.into());
                }
            }
        }
        Err(e) => return Err(e.into()),
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::runtime(format!("cannot start the async runtime: {e}")))?;
    if let Command::Status(a) = &command {
        // Printed in full whatever the health; then exit 1 when the daemon is down or degraded, or
        // the config file is broken (the status is then read with the config the daemon accepted).
        let status = rt.block_on(admin::status(&cfg, a.json, table::terminal_width()));
        if let Some((e, fb)) = &broken {
            if let Ok((text, _)) = &status {
                write_out(&mut out, text)?;
            }
            return Err(CliError::runtime(broken_config_line(e, fb.as_ref())));
        }
        let (text, unhealthy) = status?;
        write_out(&mut out, &text)?;
        return unhealthy.map_or(Ok(()), Err);
    }
    let fallback = broken.as_ref().map(|(e, fb)| fallback_note(e, fb.as_ref()));
    let fallback = fallback.as_deref();
    let text = rt.block_on(async {
        match command {
            Command::Resume(a) => hook(&cfg, HookKind::Resume, &a.hostlist, fallback).await,
            Command::Suspend(a) => hook(&cfg, HookKind::Suspend, &a.hostlist, fallback).await,
            Command::ResumeFail(a) => hook(&cfg, HookKind::ResumeFail, &a.hostlist, fallback).await,
            Command::Nodes(a) => {
                let (nodeset, state) = (a.nodeset.as_deref(), a.state.as_deref());
                admin::nodes(&cfg, nodeset, state, &a.nodes, a.summarize, &a.list.listing()).await
            }
            Command::Requests(a) => admin::requests(&cfg, a.active, &a.list.listing()).await,
            Command::Migs(a) => admin::migs(&cfg, &a.listing()).await,
            Command::Events(a) => {
                admin::events(&cfg, a.node.as_deref(), a.since.as_deref(), a.limit, &a.list.listing()).await
            }
            Command::Usage(a) => {
                let format = match (a.json, a.csv) {
                    (true, _) => admin::UsageFormat::Json,
                    (_, true) => admin::UsageFormat::Csv,
                    _ => admin::UsageFormat::Text,
                };
                admin::usage(&cfg, a.since.as_deref(), a.until.as_deref(), &a.by, format).await
            }
            Command::Explain(a) => admin::explain(&cfg, &a.node, a.json, table::terminal_width()).await,
            Command::Gc(a) => admin::ask_daemon(&cfg, Request::Gc { dry_run: a.dry_run }, a.json).await,
            Command::Reconcile(a) => admin::ask_daemon(&cfg, Request::Reconcile, a.json).await,
            Command::Repair(a) => admin::repair(&cfg, &a.nodes, &a.reason, &a.description, a.json).await,
            Command::CheckConfig(_)
            | Command::Version
            | Command::Daemon
            | Command::Status(_)
            | Command::ImportSlurmGcp(_)
            | Command::Completion(_)
            | Command::Manpages(_)
            | Command::RunDelegate(_) => {
                unreachable!("handled above")
            }
        }
    })?;
    write_out(&mut out, &text)
}

/// The hostlist argument of a hook command (for a log line), control characters escaped.
fn hook_hostlist(command: &Command) -> String {
    match command {
        Command::Resume(a) | Command::Suspend(a) | Command::ResumeFail(a) => {
            crate::hostlist::escape_control(&a.hostlist)
        }
        _ => String::new(),
    }
}

/// When the broken config file was last changed, as `changed T (N min ago)`, or that it is missing.
fn changed_since(path: &std::path::Path) -> String {
    match std::fs::metadata(path).and_then(|m| m.modified()) {
        Ok(t) => {
            let t = chrono::DateTime::<chrono::Utc>::from(t);
            #[allow(clippy::disallowed_methods)] // an edge: how long ago, for people
            let ago = chrono::Utc::now().signed_duration_since(t).num_seconds().max(0);
            format!(
                "broken since it was changed at {} ({} ago)",
                t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                table::age(ago)
            )
        }
        Err(e) => format!("{}: {e}", path.display()),
    }
}

/// `status`'s line about a config file that does not load: the problem, since when, and what the
/// hooks do meanwhile.
fn broken_config_line(e: &ConfigError, fb: Option<&crate::config::last_accepted::Fallback>) -> String {
    let hooks = match fb {
        Some(fb) => format!(
            "hooks use {} (the config the daemon accepted{}) meanwhile",
            fb.copy.display(),
            fb.accepted_at
                .map(|t| format!(" at {}", t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)))
                .unwrap_or_default()
        ),
        None => "no copy of an accepted config found: hooks FAIL (exit 2) and record nothing".into(),
    };
    format!("BROKEN config: {}; {}; {hooks}", e.first_line(), changed_since(e.path()))
}

/// What a hook records about running on the fallback config.
fn fallback_note(e: &ConfigError, fb: Option<&crate::config::last_accepted::Fallback>) -> String {
    let copy = fb.map(|f| f.copy.display().to_string()).unwrap_or_default();
    format!(
        "the config does not load ({}): used {copy}, the config the daemon last accepted; fix the file",
        e.first_line()
    )
}

/// A hook: nothing on stdout (slurmctld discards it); the outcome is in the log and the exit code.
async fn hook(
    cfg: &Config,
    kind: HookKind,
    hostlist: &str,
    fallback: Option<&str>,
) -> Result<String, CliError> {
    crate::hook::run(cfg, kind, hostlist, fallback)
        .await
        .map(|_| String::new())
        .map_err(|e| CliError { code: e.exit_code(), message: e.to_string() })
}

/// `slurm-dws daemon`: runs until SIGTERM or SIGINT.
fn daemon(config: Option<&std::path::Path>, format: LogFormat) -> Result<(), CliError> {
    logging::init(format)?;
    let cfg = Config::load(config)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::runtime(format!("cannot start the async runtime: {e}")))?;
    rt.block_on(async {
        use tokio::signal::unix::{signal, SignalKind};
        let shutdown = async {
            match (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) {
                (Ok(mut term), Ok(mut int)) => {
                    tokio::select! { _ = term.recv() => {}, _ = int.recv() => {} }
                }
                _ => std::future::pending::<()>().await,
            }
        };
        // SIGHUP: reload the config between passes. Several in a row collapse into one reload.
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        let mut hup = signal(SignalKind::hangup())
            .map_err(|e| CliError::runtime(format!("cannot handle SIGHUP: {e}")))?;
        tokio::spawn(async move {
            while hup.recv().await.is_some() {
                let _ = tx.try_send(());
            }
        });
        crate::daemon::run_with_reload(cfg, shutdown, Some(rx)).await.map_err(|e| match e {
            crate::daemon::DaemonError::Config(_) => CliError::usage(e.to_string()),
            e => CliError::runtime(e.to_string()),
        })
    })
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
        let cli =
            Cli::try_parse_from(["slurm-dws", "check-config", "--config", "/x.toml", "--log-format", "json"])
                .unwrap();
        assert_eq!(cli.config.as_deref(), Some(std::path::Path::new("/x.toml")));
        assert_eq!(cli.log_format, LogFormat::Json);
    }

    #[test]
    fn usage_errors_are_one_line_that_names_the_problem() {
        for (args, words) in [
            (
                &["slurm-dws", "nodes", "--bogus"][..],
                &["unexpected argument '--bogus'", "usage: slurm-dws nodes"][..],
            ),
            (&["slurm-dws", "explain"], &["required arguments were not provided: <NODE>"]),
            (&["slurm-dws"], &["subcommand is required"]),
        ] {
            let e = Cli::try_parse_from(args).unwrap_err();
            let line = usage_error_line(&e);
            assert!(!line.contains('\n'), "{line}");
            for w in words {
                assert!(line.contains(w), "{args:?}: {line}");
            }
        }
    }

    #[test]
    fn errors_are_one_line() {
        let e = CliError::runtime("a\nb");
        assert_eq!((e.code, e.message.as_str()), (1, "a; b"));
    }
}
