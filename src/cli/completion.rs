//! `slurm-dws completion SHELL` prints a completion script; `slurm-dws manpages DIR` writes the man pages (for packaging).

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{CommandFactory, ValueEnum};

use super::{write_out, Cli, CliError};

/// The shells `completion` writes for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

/// Options of `completion`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// The shell, e.g. `slurm-dws completion bash > /usr/share/bash-completion/completions/slurm-dws`.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// Options of `manpages`.
#[derive(Debug, Clone, clap::Args)]
pub struct ManArgs {
    /// Directory to write slurm-dws.1 and slurm-dws-SUBCOMMAND.1 into (created if missing).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
}

/// The completion script for `args.shell` on `out`.
pub fn run(args: &Args, out: &mut impl Write) -> Result<(), CliError> {
    let shell = match args.shell {
        Shell::Bash => clap_complete::Shell::Bash,
        Shell::Zsh => clap_complete::Shell::Zsh,
        Shell::Fish => clap_complete::Shell::Fish,
    };
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "slurm-dws", &mut script);
    write_out(out, &String::from_utf8_lossy(&script))
}

/// Write one man page for the command and one per visible subcommand into `args.dir`; their
/// names on `out`, one per line.
pub fn manpages(args: &ManArgs, out: &mut impl Write) -> Result<(), CliError> {
    let dir = &args.dir;
    std::fs::create_dir_all(dir)
        .map_err(|e| CliError::runtime(format!("cannot create {}: {e}", dir.display())))?;
    let cmd = Cli::command();
    let mut written = Vec::new();
    write_page(&cmd, "slurm-dws", dir, &mut written)?;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("slurm-dws-{}", sub.get_name());
        let sub = sub
            .clone()
            .display_name(name.clone())
            .bin_name(format!("slurm-dws {}", sub.get_name()))
            .version(env!("CARGO_PKG_VERSION"));
        write_page(&sub, &name, dir, &mut written)?;
    }
    let listing: String = written.iter().map(|p| format!("{}\n", p.display())).collect();
    write_out(out, &listing)
}

fn write_page(
    cmd: &clap::Command,
    name: &str,
    dir: &Path,
    written: &mut Vec<PathBuf>,
) -> Result<(), CliError> {
    let mut page = Vec::new();
    clap_mangen::Man::new(cmd.clone())
        .title(name.to_uppercase())
        .section("1")
        .manual("slurm-dws")
        .source(format!("slurm-dws {}", env!("CARGO_PKG_VERSION")))
        .render(&mut page)
        .map_err(|e| CliError::runtime(format!("cannot render the man page of {name}: {e}")))?;
    let path = dir.join(format!("{name}.1"));
    std::fs::write(&path, page)
        .map_err(|e| CliError::runtime(format!("cannot write {}: {e}", path.display())))?;
    written.push(path);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shell_gets_a_script_that_knows_the_subcommands() {
        for (shell, marker) in [
            (Shell::Bash, "complete -F"),
            (Shell::Zsh, "#compdef slurm-dws"),
            (Shell::Fish, "complete -c slurm-dws"),
        ] {
            let mut out = Vec::new();
            run(&Args { shell }, &mut out).unwrap();
            let script = String::from_utf8(out).unwrap();
            assert!(script.contains(marker), "{shell:?}: {script}");
            for sub in ["check-config", "import-slurm-gcp", "explain", "completion"] {
                assert!(script.contains(sub), "{shell:?} lacks {sub}");
            }
        }
    }

    #[test]
    fn man_pages_for_the_command_and_each_subcommand() {
        let dir = tempfile::tempdir().unwrap();
        let mut out = Vec::new();
        manpages(&ManArgs { dir: dir.path().to_path_buf() }, &mut out).unwrap();
        let main = std::fs::read_to_string(dir.path().join("slurm-dws.1")).unwrap();
        assert!(main.starts_with(".ie \\n(.g .ds Aq \\(aq") || main.contains(".TH SLURM-DWS 1"), "{main}");
        assert!(main.contains("import\\-slurm\\-gcp"), "{main}");
        let page = std::fs::read_to_string(dir.path().join("slurm-dws-check-config.1")).unwrap();
        assert!(page.contains(".TH SLURM-DWS-CHECK-CONFIG 1"), "{page}");
        assert!(page.contains("config\\-only"), "{page}");
        assert!(!dir.path().join("slurm-dws-manpages.1").exists());
        assert_eq!(
            String::from_utf8(out).unwrap().lines().count(),
            std::fs::read_dir(dir.path()).unwrap().count()
        );
    }
}
