//! Which Slurm a cluster runs: Debian bookworm's 22.05 installed on the host, or Debian trixie's
//! 24.11 or forky's 26.05, each run from the root that `scripts/slurm-root.sh` builds
//! (docs/slurm-root.md).
//!
//! A [`ClusterSpec`](crate::ClusterSpec) (and a [`StackSpec`](crate::stack::StackSpec)) names its
//! generation; the default is [`SlurmGeneration::Bookworm`], what every test ran on before 24.11.
//! A root is built on first use when it is missing (1–3 minutes, cached outside the clone).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use super::DevclusterError;

/// Where the trixie root is unless `SLURM_DWS_TRIXIE_ROOT` says otherwise (the default of
/// `scripts/slurm-root.sh`).
pub const DEFAULT_TRIXIE_ROOT: &str = "/var/cache/slurm-dws/trixie-root";

/// Where the forky root is unless `SLURM_DWS_FORKY_ROOT` says otherwise (the default of
/// `scripts/slurm-root.sh --suite forky`).
pub const DEFAULT_FORKY_ROOT: &str = "/var/cache/slurm-dws/forky-root";

/// The file every complete root holds at its top (`scripts/slurm-root.sh` writes it last). The
/// wrappers test it to tell "already inside the root" from "on the host".
pub const ROOT_STAMP: &str = ".slurm-dws-root";

/// Which Slurm a local cluster runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum SlurmGeneration {
    /// Debian 12 (bookworm)'s Slurm 22.05 (`slurm-wlm 22.05.8`), installed on the host: the
    /// daemons in `/usr/sbin`, the clients in `/usr/bin`.
    #[default]
    Bookworm,
    /// Debian 13 (trixie)'s Slurm 24.11 (`slurm-wlm 24.11.5`), run from the trixie root: every
    /// Slurm process (munged, slurmctld, slurmd, clients, the hooks slurmctld runs) lives in a
    /// private mount namespace chrooted into it.
    Trixie,
    /// Debian 14 (forky, testing)'s Slurm 26.05 (`slurm-wlm 26.05.5`), run from the forky root
    /// exactly as 24.11 runs from the trixie one.
    Forky,
}

impl SlurmGeneration {
    /// All three, oldest first.
    pub const ALL: [SlurmGeneration; 3] =
        [SlurmGeneration::Bookworm, SlurmGeneration::Trixie, SlurmGeneration::Forky];

    /// The Slurm release it runs, as Slurm names it (`22.05`, `24.11`, `26.05`).
    pub fn version(self) -> &'static str {
        match self {
            SlurmGeneration::Bookworm => "22.05",
            SlurmGeneration::Trixie => "24.11",
            SlurmGeneration::Forky => "26.05",
        }
    }

    /// The release as numbers, e.g. `(24, 11)`, for version comparisons.
    pub fn release(self) -> (u16, u16) {
        match self {
            SlurmGeneration::Bookworm => (22, 5),
            SlurmGeneration::Trixie => (24, 11),
            SlurmGeneration::Forky => (26, 5),
        }
    }

    /// The Debian suite it comes from.
    pub fn suite(self) -> &'static str {
        match self {
            SlurmGeneration::Bookworm => "bookworm",
            SlurmGeneration::Trixie => "trixie",
            SlurmGeneration::Forky => "forky",
        }
    }

    /// `22.05` / `bookworm` / `24.11` / `trixie` / `26.05` / `forky` (also `22`, `24`, `26`);
    /// anything else is `None`.
    pub fn parse(text: &str) -> Option<SlurmGeneration> {
        match text.trim().to_ascii_lowercase().as_str() {
            "22.05" | "22" | "bookworm" | "debian12" => Some(SlurmGeneration::Bookworm),
            "24.11" | "24" | "trixie" | "debian13" => Some(SlurmGeneration::Trixie),
            "26.05" | "26" | "forky" | "debian14" => Some(SlurmGeneration::Forky),
            _ => None,
        }
    }

    /// Whether its Slurm runs from a root of `scripts/slurm-root.sh` (everything but 22.05).
    pub fn uses_root(self) -> bool {
        self != SlurmGeneration::Bookworm
    }

    /// The path of its root (`None` for the host's 22.05): `$SLURM_DWS_TRIXIE_ROOT` /
    /// `$SLURM_DWS_FORKY_ROOT`, else [`DEFAULT_TRIXIE_ROOT`] / [`DEFAULT_FORKY_ROOT`].
    pub fn root_path(self) -> Option<PathBuf> {
        let (var, default) = match self {
            SlurmGeneration::Bookworm => return None,
            SlurmGeneration::Trixie => ("SLURM_DWS_TRIXIE_ROOT", DEFAULT_TRIXIE_ROOT),
            SlurmGeneration::Forky => ("SLURM_DWS_FORKY_ROOT", DEFAULT_FORKY_ROOT),
        };
        Some(
            std::env::var_os(var)
                .filter(|v| !v.is_empty())
                .map_or_else(|| PathBuf::from(default), PathBuf::from),
        )
    }
}

impl std::fmt::Display for SlurmGeneration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Slurm {} ({})", self.version(), self.suite())
    }
}

/// The trixie root's path: `$SLURM_DWS_TRIXIE_ROOT`, else [`DEFAULT_TRIXIE_ROOT`].
pub fn trixie_root() -> PathBuf {
    SlurmGeneration::Trixie.root_path().expect("trixie runs from a root")
}

/// `scripts/slurm-root.sh` of this workspace: found from the package cargo is running the tests of
/// (`CARGO_MANIFEST_DIR` at run time: the root package, or this crate), else from where this crate
/// was compiled. (Worktrees may share one target directory, so a test binary may have been built
/// from another checkout, which may be gone.)
pub fn slurm_root_script() -> PathBuf {
    const SCRIPT: &str = "scripts/slurm-root.sh";
    let compiled = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(SCRIPT);
    let running = std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from);
    running
        .iter()
        .flat_map(|dir| [dir.join(SCRIPT), dir.join("../..").join(SCRIPT)])
        .find(|p| p.is_file())
        .unwrap_or(compiled)
}

/// Makes sure the trixie root is complete (see [`ensure_root`]). Returns the root's path.
pub fn ensure_trixie_root() -> Result<PathBuf, DevclusterError> {
    ensure_root(SlurmGeneration::Trixie).map(|root| root.expect("trixie runs from a root"))
}

/// Makes sure the root `generation` runs from is complete, running `scripts/slurm-root.sh --suite
/// SUITE` (which builds it unless it is there, and serialises concurrent builders with a lock)
/// when its `--check` says it is not. Returns the root's path, `None` for the host's 22.05. The
/// answer is kept for the life of the process.
pub fn ensure_root(generation: SlurmGeneration) -> Result<Option<PathBuf>, DevclusterError> {
    static TRIXIE: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    static FORKY: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let ready = match generation {
        SlurmGeneration::Bookworm => return Ok(None),
        SlurmGeneration::Trixie => &TRIXIE,
        SlurmGeneration::Forky => &FORKY,
    };
    ready.get_or_init(|| build_root(generation)).clone().map(Some).map_err(DevclusterError::NotInstalled)
}

fn build_root(generation: SlurmGeneration) -> Result<PathBuf, String> {
    let script = slurm_root_script();
    let root = generation.root_path().expect("a generation with a root");
    let suite = ["--suite", generation.suite()];
    if !script.exists() {
        return Err(format!("{} not found", script.display()));
    }
    let check = Command::new(&script).args(suite).arg("--check").output();
    if matches!(&check, Ok(o) if o.status.success()) {
        return Ok(root);
    }
    if !nix::unistd::geteuid().is_root() {
        return Err(format!("{} is missing or incomplete and building it needs root", root.display()));
    }
    eprintln!(
        "devcluster: building the Slurm {} root {} ({} --suite {}; 1-3 min)",
        generation.version(),
        root.display(),
        script.display(),
        generation.suite()
    );
    let out = Command::new(&script)
        .args(suite)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("{}: {e}", script.display()))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        let lines: Vec<&str> = stderr.lines().collect();
        return Err(format!(
            "{} failed ({}): {}",
            script.display(),
            out.status,
            lines[lines.len().saturating_sub(15)..].join("\n")
        ));
    }
    match Command::new(&script).args(suite).arg("--check").status() {
        Ok(s) if s.success() => Ok(root),
        other => Err(format!("{} ran but --check still fails ({other:?}): {stderr}", script.display())),
    }
}

/// The uid and gid of `user` in the `etc/passwd` of `root` (the root's munge user is not the
/// host's).
pub(crate) fn user_in_root(root: &Path, user: &str) -> Result<(u32, u32), DevclusterError> {
    let passwd = root.join("etc/passwd");
    let text = std::fs::read_to_string(&passwd).map_err(|e| DevclusterError::io(&passwd, e))?;
    text.lines()
        .find_map(|line| {
            let fields: Vec<&str> = line.split(':').collect();
            (fields.len() >= 4 && fields[0] == user)
                .then(|| Some((fields[2].parse().ok()?, fields[3].parse().ok()?)))
                .flatten()
        })
        .ok_or_else(|| DevclusterError::NotInstalled(format!("no `{user}` user in {}", passwd.display())))
}

/// Removes the empty mount-point directories that the in-root wrapper created inside `root` for
/// host directories that no longer exist (the cluster, stack and script directories of finished
/// runs, all under the temp directory). A directory whose host twin still exists may be in use by
/// a running cluster and is left alone; `remove_dir` never removes anything that is not empty.
pub(crate) fn sweep_mount_points(root: &Path) {
    let tmp = std::env::temp_dir();
    let Ok(rel) = tmp.strip_prefix("/") else { return };
    let in_root = root.join(rel);
    let Ok(entries) = std::fs::read_dir(&in_root) else { return };
    for entry in entries.flatten() {
        let host_twin = tmp.join(entry.file_name());
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if is_dir && !host_twin.exists() {
            remove_empty_tree(&entry.path(), 4);
        }
    }
}

/// Removes `dir` and its subdirectories bottom-up, as long as they are empty (at most `depth`
/// levels down).
fn remove_empty_tree(dir: &Path, depth: u32) {
    if depth > 0 {
        if let Ok(entries) = std::fs::read_dir(dir) {
            for entry in entries.flatten() {
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    remove_empty_tree(&entry.path(), depth - 1);
                }
            }
        }
    }
    let _ = std::fs::remove_dir(dir);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generations_name_their_release() {
        assert_eq!(SlurmGeneration::default(), SlurmGeneration::Bookworm);
        assert_eq!(SlurmGeneration::Bookworm.version(), "22.05");
        assert_eq!(SlurmGeneration::Trixie.version(), "24.11");
        assert_eq!(SlurmGeneration::Trixie.release(), (24, 11));
        for g in SlurmGeneration::ALL {
            assert_eq!(SlurmGeneration::parse(g.version()), Some(g));
            assert_eq!(SlurmGeneration::parse(g.suite()), Some(g));
        }
        assert_eq!(SlurmGeneration::parse("23.02"), None);
        assert_eq!(SlurmGeneration::Trixie.to_string(), "Slurm 24.11 (trixie)");
        assert_eq!(SlurmGeneration::Forky.release(), (26, 5));
        assert_eq!(SlurmGeneration::Forky.to_string(), "Slurm 26.05 (forky)");
        assert!(!SlurmGeneration::Bookworm.uses_root() && SlurmGeneration::Forky.uses_root());
        assert_eq!(SlurmGeneration::Bookworm.root_path(), None);
    }

    #[test]
    fn the_roots_users_come_from_its_passwd() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("etc")).unwrap();
        std::fs::write(
            dir.path().join("etc/passwd"),
            "root:x:0:0:root:/root:/bin/bash\nmunge:x:100:101::/nonexistent:/usr/sbin/nologin\n",
        )
        .unwrap();
        assert_eq!(user_in_root(dir.path(), "munge").unwrap(), (100, 101));
        assert!(user_in_root(dir.path(), "slurm").is_err());
    }

    #[test]
    fn the_script_is_found_from_the_crate() {
        assert!(slurm_root_script().exists(), "{}", slurm_root_script().display());
    }
}
