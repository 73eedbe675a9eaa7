//! `check-config`'s checks of the machine: what a valid config still needs to work at run time.
//!
//! Each check answers one question the daemon or a hook would otherwise answer with a failure at
//! 3 a.m.: are `scontrol`, `squeue`, `sinfo` in `slurm.bin_dir`; does slurm.conf exist; can the
//! service user read the key file, and can it see it at all inside the systemd unit's sandbox; are
//! the hooks where slurm.conf will run them. They read the file system only (no Slurm, no GCE).

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// What the checks look at, read from the config file (defaults filled in).
#[derive(Debug, Clone)]
pub struct Machine {
    pub bin_dir: PathBuf,
    pub conf: Option<PathBuf>,
    /// `$SLURM_CONF` of this shell, used when `conf` is not set.
    pub env_slurm_conf: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
    /// `daemon.service_user`; `None` = root only.
    pub service_user: Option<String>,
    /// Where slurm.conf will run the hooks from.
    pub hook_dir: PathBuf,
    /// Suggested when `bin_dir` lacks the commands and this has them ([`ALTERNATIVE_BIN_DIR`]).
    pub alternative_bin_dir: PathBuf,
}

/// One problem: the config key it concerns (if any) and what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub key: Option<&'static str>,
    pub message: String,
}

fn finding(key: Option<&'static str>, message: String) -> Finding {
    Finding { key, message }
}

/// The Slurm commands slurm-dws runs.
pub const SLURM_COMMANDS: [&str; 3] = ["scontrol", "squeue", "sinfo"];
/// Where slurm-gcp images (and a Slurm built from source) keep the commands.
pub const ALTERNATIVE_BIN_DIR: &str = "/usr/local/bin";
/// The hooks slurm.conf names.
pub const HOOKS: [&str; 3] = ["slurm-dws-resume", "slurm-dws-suspend", "slurm-dws-resume-fail"];

/// Paths the systemd unit (systemd/slurm-dws.service) hides from the daemon, and the setting that
/// hides them: `ProtectHome=yes` makes /home, /root and /run/user empty and inaccessible,
/// `PrivateTmp=yes` gives it /tmp and /var/tmp of its own. A test keeps this list true to the unit.
pub const SANDBOX_HIDDEN: [(&str, &str); 5] = [
    ("/home", "ProtectHome=yes"),
    ("/root", "ProtectHome=yes"),
    ("/run/user", "ProtectHome=yes"),
    ("/tmp", "PrivateTmp=yes"),
    ("/var/tmp", "PrivateTmp=yes"),
];

/// Every problem found, in a stable order.
pub fn check(m: &Machine) -> Vec<Finding> {
    let mut out = Vec::new();
    check_bin_dir(m, &mut out);
    check_slurm_conf(m, &mut out);
    check_key_file(m, &mut out);
    check_hooks(m, &mut out);
    out
}

fn is_executable_file(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|md| md.is_file() && md.permissions().mode() & 0o111 != 0)
}

fn check_bin_dir(m: &Machine, out: &mut Vec<Finding>) {
    let missing: Vec<&str> =
        SLURM_COMMANDS.iter().copied().filter(|c| !is_executable_file(&m.bin_dir.join(c))).collect();
    if missing.is_empty() {
        return;
    }
    let alt = &m.alternative_bin_dir;
    let hint = if m.bin_dir != *alt && missing.iter().all(|c| is_executable_file(&alt.join(c))) {
        format!(
            "; {} has them (slurm-gcp images keep Slurm under /usr/local): set bin_dir = \"{}\"",
            alt.display(),
            alt.display()
        )
    } else {
        String::new()
    };
    out.push(finding(
        Some("slurm.bin_dir"),
        format!(
            "{} has no executable {} (the daemon and hooks run Slurm's commands from there, with no PATH){hint}",
            m.bin_dir.display(),
            missing.join(", ")
        ),
    ));
}

fn check_slurm_conf(m: &Machine, out: &mut Vec<Finding>) {
    if let Some(conf) = &m.conf {
        if !conf.is_file() {
            out.push(finding(
                Some("slurm.conf"),
                format!(
                    "{} does not exist (or is not a file): Slurm's commands would not start",
                    conf.display()
                ),
            ));
        }
        return;
    }
    // Not set: Slurm's commands look where they were built to, usually one of these.
    let mut candidates: Vec<PathBuf> = m.env_slurm_conf.iter().cloned().collect();
    candidates.push(PathBuf::from("/etc/slurm/slurm.conf"));
    if let Some(prefix) = m.bin_dir.parent() {
        candidates.push(prefix.join("etc/slurm/slurm.conf"));
        candidates.push(prefix.join("etc/slurm.conf"));
    }
    if !candidates.iter().any(|c| c.is_file()) {
        let tried: Vec<String> = candidates.iter().map(|c| c.display().to_string()).collect();
        out.push(finding(
            Some("slurm.conf"),
            format!(
                "is not set and no slurm.conf is where Slurm usually looks ({}): set [slurm] conf to its path",
                tried.join(", ")
            ),
        ));
    }
}

/// Why the user cannot read `path` (every directory on the way needs search permission).
fn unreadable_by(path: &Path, uid: u32, gids: &[u32]) -> Option<String> {
    if uid == 0 {
        return None;
    }
    let allowed = |md: &std::fs::Metadata, bit: u32| {
        let mode = md.mode();
        if md.uid() == uid {
            mode & (bit << 6) != 0
        } else if gids.contains(&md.gid()) {
            mode & (bit << 3) != 0
        } else {
            mode & bit != 0
        }
    };
    for dir in path.ancestors().skip(1) {
        if let Ok(md) = std::fs::metadata(dir) {
            if !allowed(&md, 0o1) {
                return Some(format!("it cannot enter {} (mode {:o})", dir.display(), md.mode() & 0o7777));
            }
        }
    }
    let md = std::fs::metadata(path).ok()?;
    (!allowed(&md, 0o4)).then(|| {
        format!("the file is mode {:o}, owner uid {}, group gid {}", md.mode() & 0o7777, md.uid(), md.gid())
    })
}

fn check_key_file(m: &Machine, out: &mut Vec<Finding>) {
    let Some(key) = &m.key_file else { return };
    for (hidden, setting) in SANDBOX_HIDDEN {
        if key.starts_with(hidden) {
            out.push(finding(
                Some("gcp.credentials"),
                format!(
                    "{} is under {hidden}, which the systemd unit hides from the daemon ({setting}): move it, \
                     e.g. to /etc/slurm-dws/key.json (chown root:slurm, chmod 0640)",
                    key.display()
                ),
            ));
            break;
        }
    }
    match std::fs::metadata(key) {
        Ok(md) if md.is_file() => {}
        Ok(_) => {
            out.push(finding(Some("gcp.credentials"), format!("{} is not a file", key.display())));
            return;
        }
        Err(e) => {
            out.push(finding(
                Some("gcp.credentials"),
                format!("cannot read key file {}: {e}", key.display()),
            ));
            return;
        }
    }
    match &m.service_user {
        Some(user) => match nix::unistd::User::from_name(user) {
            Ok(Some(u)) => {
                let mut gids = vec![u.gid.as_raw()];
                if let Ok(name) = std::ffi::CString::new(user.as_str()) {
                    if let Ok(groups) = nix::unistd::getgrouplist(&name, u.gid) {
                        gids.extend(groups.iter().map(|g| g.as_raw()));
                    }
                }
                if let Some(why) = unreadable_by(key, u.uid.as_raw(), &gids) {
                    out.push(finding(
                        Some("gcp.credentials"),
                        format!(
                            "{} is not readable by the service user {user:?}, which the daemon runs as: {why} \
                             (chown root:{user} and chmod 0640 it)",
                            key.display()
                        ),
                    ));
                }
            }
            _ => out.push(finding(
                Some("daemon.service_user"),
                format!(
                    "user {user:?} does not exist on this machine: the daemon runs as it and slurmctld runs the \
                     hooks as it (it must be SlurmUser)"
                ),
            )),
        },
        None => {
            if let Err(e) = std::fs::File::open(key) {
                out.push(finding(Some("gcp.credentials"), format!("cannot read key file {}: {e}", key.display())));
            }
        }
    }
}

fn check_hooks(m: &Machine, out: &mut Vec<Finding>) {
    let missing: Vec<String> = HOOKS
        .iter()
        .map(|h| m.hook_dir.join(h))
        .filter(|p| !is_executable_file(p))
        .map(|p| p.display().to_string())
        .collect();
    if !missing.is_empty() {
        out.push(finding(
            None,
            format!(
                "the hooks slurm.conf will run do not exist: {} (`make install` links them into \
                 $(PREFIX)/sbin, /usr/local/sbin by default, the .deb into /usr/sbin; give that directory \
                 with --hook-dir). slurmctld would log `invalid SuspendProgram` (24.11) or `Invalid \
                 SuspendProgram PowerAction` (26.05) at every start; 24.11 then disables power saving",
                missing.join(", ")
            ),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exe(dir: &Path, name: &str) {
        let p = dir.join(name);
        std::fs::write(&p, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    fn healthy(dir: &Path) -> Machine {
        let bin = dir.join("bin");
        let hooks = dir.join("sbin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(&hooks).unwrap();
        for c in SLURM_COMMANDS {
            exe(&bin, c);
        }
        for h in HOOKS {
            exe(&hooks, h);
        }
        let conf = dir.join("slurm.conf");
        std::fs::write(&conf, "ClusterName=hpc\n").unwrap();
        Machine {
            bin_dir: bin,
            conf: Some(conf),
            env_slurm_conf: None,
            key_file: None,
            service_user: None,
            hook_dir: hooks,
            alternative_bin_dir: dir.join("nowhere"),
        }
    }

    #[test]
    fn a_healthy_machine_has_no_findings() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(check(&healthy(dir.path())), []);
    }

    #[test]
    fn every_problem_in_one_run() {
        let dir = tempfile::tempdir().unwrap();
        let mut m = healthy(dir.path());
        std::fs::remove_file(m.bin_dir.join("squeue")).unwrap();
        std::fs::remove_file(m.hook_dir.join("slurm-dws-suspend")).unwrap();
        m.conf = Some(dir.path().join("nope.conf"));
        m.key_file = Some(PathBuf::from("/nonexistent/key.json"));
        let f = check(&m);
        let keys: Vec<Option<&str>> = f.iter().map(|f| f.key).collect();
        assert_eq!(keys, [Some("slurm.bin_dir"), Some("slurm.conf"), Some("gcp.credentials"), None], "{f:?}");
        assert!(f[0].message.contains("no executable squeue"), "{f:?}");
        assert!(f[2].message.starts_with("cannot read key file /nonexistent/key.json"), "{f:?}");
        assert!(f[3].message.contains("slurm-dws-suspend") && f[3].message.contains("make install"), "{f:?}");
    }

    #[test]
    fn keys_the_sandbox_hides_are_named_with_the_setting() {
        let dir = tempfile::tempdir().unwrap();
        let mut m = healthy(dir.path());
        m.key_file = Some(PathBuf::from("/root/sa.json"));
        let f = check(&m);
        assert!(f[0].message.contains("ProtectHome=yes") && f[0].message.contains("/root"), "{f:?}");
        m.key_file = Some(PathBuf::from("/home/alice/sa.json"));
        assert!(check(&m)[0].message.contains("under /home"));
    }

    #[test]
    fn the_hidden_paths_are_the_units() {
        let unit = include_str!("../../systemd/slurm-dws.service");
        for (_, setting) in SANDBOX_HIDDEN {
            assert!(unit.lines().any(|l| l.trim() == setting), "the unit no longer says {setting}");
        }
    }

    #[test]
    fn readability_follows_owner_group_other_and_directories() {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("key.json");
        std::fs::write(&key, "{}").unwrap();
        let md = std::fs::metadata(&key).unwrap();
        let (owner, group) = (md.uid(), md.gid());
        let stranger = owner.wrapping_add(4242);
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o640)).unwrap();
        if owner != 0 {
            assert_eq!(unreadable_by(&key, owner, &[]), None);
        }
        assert_eq!(unreadable_by(&key, stranger, &[group]), None, "group may read");
        assert!(unreadable_by(&key, stranger, &[]).unwrap().contains("mode 640"));
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(unreadable_by(&key, stranger, &[]), None);
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        assert!(unreadable_by(&key, stranger, &[]).unwrap().contains("cannot enter"));
        assert_eq!(unreadable_by(&key, 0, &[]), None, "root reads anything");
    }

    #[test]
    fn bin_dir_without_slurm_points_at_usr_local_when_it_has_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut m = healthy(dir.path());
        let slurm_gcp_bin = std::mem::replace(&mut m.bin_dir, dir.path().join("usr-bin"));
        let f = check(&m);
        assert!(f[0].message.contains("has no executable scontrol, squeue, sinfo"), "{f:?}");
        assert!(!f[0].message.contains("set bin_dir"), "{f:?}");
        m.alternative_bin_dir = slurm_gcp_bin.clone();
        let f = check(&m);
        let want = format!(
            "{} has them (slurm-gcp images keep Slurm under /usr/local): set bin_dir = \"{}\"",
            slurm_gcp_bin.display(),
            slurm_gcp_bin.display()
        );
        assert!(f[0].message.contains(&want), "{f:?}");
    }
}
