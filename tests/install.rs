//! `make install` / `make uninstall` for real, into a temporary DESTDIR or PREFIX: the layout, the hook
//! symlinks (they resolve, and the binary acts as the hook under their names), the unit's paths following
//! PREFIX and SYSCONFDIR, a config that is never overwritten, man pages and completions, and
//! `systemd-analyze verify` of the unit as installed.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_slurm-dws");

/// Runs `make VARS... TARGET` in the repository, with the target directory the test binaries came from
/// (so the build is the one cargo just made, wherever CARGO_TARGET_DIR points). `NO_BUILD=1`: a nested
/// `cargo build` would rebuild the crate (`cargo build` and `cargo test` resolve dev-dependency features
/// differently) and overwrite the very binary the other tests run, while they run it.
fn make(target: &str, vars: &[(&str, &Path)]) -> Output {
    let target_dir = Path::new(BIN).parent().and_then(Path::parent).expect("BIN is TARGET/debug/slurm-dws");
    let mut cmd = Command::new("make");
    cmd.current_dir(env!("CARGO_MANIFEST_DIR")).arg("--no-print-directory").arg(target);
    cmd.args(["CARGO_PROFILE=dev", "NO_BUILD=1"]).arg(format!("TARGET_DIR={}", target_dir.display()));
    for (k, v) in vars {
        cmd.arg(format!("{k}={}", v.display()));
    }
    let out = cmd.output().expect("make runs");
    assert!(
        out.status.success(),
        "make {target} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())).permissions().mode() & 0o7777
}

/// Every `ExecStart=`/`ExecReload=` command path of an installed unit.
fn exec_paths(unit: &str) -> Vec<String> {
    unit.lines()
        .filter(|l| l.starts_with("ExecStart=") || l.starts_with("ExecReload="))
        .map(|l| l.split_once('=').unwrap().1.split_whitespace().next().unwrap().to_string())
        .collect()
}

#[test]
fn make_install_into_destdir_then_uninstall() {
    let tmp = tempfile::tempdir().unwrap();
    let dest = tmp.path();
    let prefix = Path::new("/opt/slurm-dws");
    let sysconf = Path::new("/etc/opt");
    make("install", &[("DESTDIR", dest), ("PREFIX", prefix), ("SYSCONFDIR", sysconf)]);
    let at = |p: &str| -> PathBuf { dest.join(p.trim_start_matches('/')) };

    // The binary, identical to what cargo built, runnable.
    let sbin = at("/opt/slurm-dws/sbin/slurm-dws");
    assert_eq!(mode(&sbin), 0o755);
    assert_eq!(std::fs::read(&sbin).unwrap(), std::fs::read(BIN).unwrap(), "installed binary is this build");
    let v = Command::new(&sbin).arg("version").output().unwrap();
    assert_eq!(String::from_utf8_lossy(&v.stdout).trim(), format!("slurm-dws {}", env!("CARGO_PKG_VERSION")));
    assert_eq!(mode(&at("/opt/slurm-dws/bin/slurm-dws-sim")), 0o755);

    // Hook symlinks: relative, resolving to the binary, and acting as the hook under their names.
    let cfg_dir = tempfile::tempdir().unwrap();
    let cfg = cfg_dir.path().join("slurm-dws.toml");
    let example = std::fs::read_to_string(at("/etc/opt/slurm-dws/slurm-dws.toml")).unwrap();
    let state = cfg_dir.path().join("state");
    let cfg_text = example
        .replace("\"/var/lib/slurm-dws/slurm-dws.log\"", &format!("{:?}", state.join("hook.log")))
        .replace("\"/var/lib/slurm-dws\"", &format!("{:?}", state))
        .replace("\"/run/slurm-dws/slurm-dws.sock\"", &format!("{:?}", cfg_dir.path().join("sock")));
    std::fs::write(&cfg, cfg_text).unwrap();
    // As systemd-tmpfiles would have made it (a hook refused before it opens the store creates nothing).
    std::fs::create_dir(&state).unwrap();
    for hook in ["resume", "suspend", "resume-fail"] {
        let link = at(&format!("/opt/slurm-dws/sbin/slurm-dws-{hook}"));
        assert_eq!(std::fs::read_link(&link).unwrap(), Path::new("slurm-dws"), "{hook} link is relative");
        assert_eq!(std::fs::canonicalize(&link).unwrap(), std::fs::canonicalize(&sbin).unwrap());
        // Malformed hostlist: the hook (not the admin CLI) answers, with exit 2 and nothing recorded.
        let out = Command::new(&link)
            .arg("hpc-a3u-[1-")
            .env_clear()
            .env("SLURM_DWS_CONFIG", &cfg)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{hook}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(String::from_utf8_lossy(&out.stderr).contains("bad hostlist"), "{hook}");
    }
    let log = std::fs::read_to_string(state.join("hook.log")).unwrap();
    assert_eq!(
        log.lines().filter(|l| l.contains("FAILED (exit 2)")).count(),
        3,
        "hooks log to log_file:\n{log}"
    );

    // The unit names PREFIX and SYSCONFDIR, and those files are the ones installed.
    let unit_path = at("/opt/slurm-dws/lib/systemd/system/slurm-dws.service");
    assert_eq!(mode(&unit_path), 0o644);
    let unit = std::fs::read_to_string(&unit_path).unwrap();
    assert!(
        unit.contains(
            "ExecStart=/opt/slurm-dws/sbin/slurm-dws --config /etc/opt/slurm-dws/slurm-dws.toml daemon"
        ),
        "{unit}"
    );
    assert!(!unit.contains("/usr/local/"), "an unrewritten /usr/local/ path is left in the unit");
    for p in exec_paths(&unit) {
        assert!(p.starts_with("/opt/slurm-dws/") || p.starts_with("/bin/"), "{p}");
        if p.starts_with("/opt/") {
            assert!(at(&p).is_file(), "the unit runs {p}, which install did not put there");
        }
    }
    assert!(at("/opt/slurm-dws/lib/tmpfiles.d/slurm-dws.conf").is_file());
    assert!(at("/opt/slurm-dws/lib/sysusers.d/slurm-dws.conf").is_file());
    for doc in ["README.md", "operations.md", "incidents.md", "architecture.md", "configuration.md"] {
        assert!(at(&format!("/opt/slurm-dws/share/doc/slurm-dws/{doc}")).is_file(), "{doc}");
    }
    assert!(at("/opt/slurm-dws/share/doc/slurm-dws/examples/slurm-dws.toml").is_file());
    // The dashboard and the alert rules, with the docs (not in the config directory).
    for f in
        ["grafana/slurm-dws.json", "prometheus/slurm-dws.rules.yml", "prometheus/slurm-dws.rules.test.yml"]
    {
        assert!(at(&format!("/opt/slurm-dws/share/doc/slurm-dws/examples/{f}")).is_file(), "{f}");
    }
    // Man pages and completions, made by the installed binary itself.
    for page in
        ["slurm-dws.1", "slurm-dws-check-config.1", "slurm-dws-import-slurm-gcp.1", "slurm-dws-usage.1"]
    {
        let text = std::fs::read_to_string(at(&format!("/opt/slurm-dws/share/man/man1/{page}"))).unwrap();
        assert!(text.contains(".TH SLURM-DWS"), "{page}: {text}");
    }
    for (file, marker) in [
        ("/opt/slurm-dws/share/bash-completion/completions/slurm-dws", "complete -F"),
        ("/opt/slurm-dws/share/zsh/site-functions/_slurm-dws", "#compdef slurm-dws"),
        ("/opt/slurm-dws/share/fish/vendor_completions.d/slurm-dws.fish", "complete -c slurm-dws"),
    ] {
        assert!(std::fs::read_to_string(at(file)).unwrap().contains(marker), "{file}");
    }
    assert_eq!(mode(&at("/etc/opt/slurm-dws/slurm-dws.toml")), 0o644, "readable by SlurmUser's hooks");

    // A second install (an upgrade) keeps the admin's config.
    std::fs::write(at("/etc/opt/slurm-dws/slurm-dws.toml"), "# edited by the admin\n").unwrap();
    let out = make("install", &[("DESTDIR", dest), ("PREFIX", prefix), ("SYSCONFDIR", sysconf)]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("keeping existing"));
    assert_eq!(
        std::fs::read_to_string(at("/etc/opt/slurm-dws/slurm-dws.toml")).unwrap(),
        "# edited by the admin\n"
    );

    // Uninstall removes everything but the config.
    make("uninstall", &[("DESTDIR", dest), ("PREFIX", prefix), ("SYSCONFDIR", sysconf)]);
    let left: Vec<PathBuf> = walk(&dest.join("opt")).into_iter().filter(|p| !p.is_dir()).collect();
    assert!(left.is_empty(), "uninstall left {left:?}");
    assert!(at("/etc/opt/slurm-dws/slurm-dws.toml").is_file(), "uninstall keeps the config");
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() && !p.is_symlink() {
                out.extend(walk(&p));
            }
            out.push(p);
        }
    }
    out
}

/// Installed for real under a PREFIX (no DESTDIR): the unit refers to files that exist, so systemd's
/// own checker verifies it as it would on a host.
#[test]
fn installed_unit_verifies() {
    let tmp = tempfile::tempdir().unwrap();
    let prefix = tmp.path().join("usr");
    let sysconf = tmp.path().join("etc");
    make("install", &[("PREFIX", &prefix), ("SYSCONFDIR", &sysconf)]);
    let unit = prefix.join("lib/systemd/system/slurm-dws.service");
    let text = std::fs::read_to_string(&unit).unwrap();
    assert!(text.contains(&format!(
        "ExecStart={}/sbin/slurm-dws --config {}/slurm-dws/slurm-dws.toml daemon",
        prefix.display(),
        sysconf.display()
    )));
    let analyze = ["/usr/bin/systemd-analyze", "/bin/systemd-analyze"]
        .into_iter()
        .find(|p| Path::new(p).is_file())
        .expect("systemd-analyze is required (apt-get install systemd; make test installs it)");
    let out = Command::new(analyze).arg("verify").arg(&unit).output().unwrap();
    let all = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && all.trim().is_empty(), "systemd-analyze verify:\n{all}");
}
