//! Installing Debian's Slurm and munge when they are missing (idempotent, root only), and getting a
//! [`SlurmGeneration`] ready for the tests that need it (its root built too).

use std::path::Path;
use std::process::Command;

use crate::generation::{ensure_root, SlurmGeneration};
use crate::DevclusterError;

/// The files a local cluster needs. `perl` (Debian's essential perl-base) runs the small helper
/// that clears the signal mask before starting slurmd.
pub const REQUIRED: &[&str] = &[
    "/usr/sbin/slurmctld",
    "/usr/sbin/slurmd",
    "/usr/bin/scontrol",
    "/usr/bin/sinfo",
    "/usr/bin/squeue",
    "/usr/bin/sbatch",
    "/usr/sbin/munged",
    "/usr/bin/perl",
    "/etc/munge/munge.key",
];

/// The Debian packages providing [`REQUIRED`].
pub const PACKAGES: &[&str] = &["slurmctld", "slurmd", "slurm-client", "munge"];

/// The required files that are missing.
pub fn missing() -> Vec<&'static str> {
    REQUIRED.iter().copied().filter(|p| !Path::new(p).exists()).collect()
}

/// For tests that need the host's Slurm (22.05): installs it when missing and says whether it can
/// run here. `false` means "skip" (printed with `what` and the reason); under `CI=true` a missing
/// Slurm panics instead, so CI never passes without running them. The same as
/// `SlurmGeneration::Bookworm.available_for_tests(what)`.
pub fn available_for_tests(what: &str) -> bool {
    SlurmGeneration::Bookworm.available_for_tests(what)
}

/// Whether this runs under CI (`CI=true` or `CI=1`), where a test that cannot run must fail.
pub(crate) fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

impl SlurmGeneration {
    /// Makes this Slurm runnable here: installs Debian's Slurm on the host when missing (every
    /// generation uses the host's `scontrol show hostnames`), and for the generations that run
    /// from a root, builds that root when it is missing. Needs root for anything it has to install.
    pub fn ensure_ready(self) -> Result<(), DevclusterError> {
        ensure_installed()?;
        ensure_root(self)?;
        Ok(())
    }

    /// For tests that need this Slurm: gets it ready (see [`SlurmGeneration::ensure_ready`]) and
    /// says whether it can run here. `false` means "skip" (printed with `what` and the reason);
    /// under `CI=true` it panics instead, so CI never passes without running the tests.
    pub fn available_for_tests(self, what: &str) -> bool {
        let problem = if !nix::unistd::geteuid().is_root() {
            Some("not root".to_string())
        } else {
            self.ensure_ready().err().map(|e| e.to_string())
        };
        match problem {
            None => true,
            Some(why) if ci() => {
                panic!("CI=true but a real Slurm {} cluster cannot run here: {why}", self.version())
            }
            Some(why) => {
                let needs = match self {
                    SlurmGeneration::Bookworm => "Debian's Slurm".to_string(),
                    other => format!("the {} root of scripts/slurm-root.sh", other.suite()),
                };
                eprintln!("SKIPPED: {what} on Slurm {} need root and {needs}: {why}", self.version());
                false
            }
        }
    }
}

/// Makes sure slurmctld, slurmd, the Slurm client commands and munge are installed, running
/// `apt-get install -y --no-install-recommends slurmctld slurmd slurm-client munge` when anything
/// is missing (with an `apt-get update` first if the package lists are empty or stale). Does
/// nothing when all is there, so every test can call it. Concurrent callers (several test
/// binaries) are serialised by a lock file so that only one runs apt-get.
pub fn ensure_installed() -> Result<(), DevclusterError> {
    if missing().is_empty() {
        return Ok(());
    }
    let _lock = InstallLock::acquire()?;
    if missing().is_empty() {
        return Ok(());
    }
    if !nix::unistd::geteuid().is_root() {
        return Err(DevclusterError::NotInstalled(format!(
            "missing {:?} and not root, cannot apt-get install {}",
            missing(),
            PACKAGES.join(" ")
        )));
    }
    let install = || {
        Command::new("apt-get")
            .args(["install", "-y", "-q", "--no-install-recommends"])
            .args(PACKAGES)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
    };
    let ok = install().map(|s| s.success()).unwrap_or(false);
    if !ok {
        let update = Command::new("apt-get")
            .args(["update", "-q"])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .map_err(|e| DevclusterError::NotInstalled(format!("apt-get update: {e}")))?;
        if !update.success() {
            return Err(DevclusterError::NotInstalled(format!("apt-get update failed: {update}")));
        }
        let status = install().map_err(|e| DevclusterError::NotInstalled(format!("apt-get install: {e}")))?;
        if !status.success() {
            return Err(DevclusterError::NotInstalled(format!(
                "apt-get install {} failed: {status}",
                PACKAGES.join(" ")
            )));
        }
    }
    if !Path::new("/etc/munge/munge.key").exists() {
        // Debian's postinst makes the key; make it if a minimal image skipped that.
        let _ =
            Command::new("/usr/sbin/mungekey").args(["--create", "--keyfile=/etc/munge/munge.key"]).status();
        let _ = Command::new("chown").args(["munge:munge", "/etc/munge/munge.key"]).status();
    }
    match missing().as_slice() {
        [] => Ok(()),
        still => {
            Err(DevclusterError::NotInstalled(format!("still missing after apt-get install: {still:?}")))
        }
    }
}

/// An exclusive `flock` on a well-known file, released on drop.
struct InstallLock(std::fs::File);

impl InstallLock {
    fn acquire() -> Result<Self, DevclusterError> {
        use std::os::fd::AsRawFd;
        let path = std::env::temp_dir().join("slurm-dws-devcluster-install.lock");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| DevclusterError::io(&path, e))?;
        // SAFETY: flock on a file descriptor we own; no memory is involved.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
        if rc != 0 {
            return Err(DevclusterError::io(&path, std::io::Error::last_os_error()));
        }
        Ok(InstallLock(file))
    }
}

impl Drop for InstallLock {
    fn drop(&mut self) {
        use std::os::fd::AsRawFd;
        // SAFETY: as above; closing the file would release the lock anyway.
        unsafe { libc::flock(self.0.as_raw_fd(), libc::LOCK_UN) };
    }
}
