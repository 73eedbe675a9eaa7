//! slurmdbd accounting for a test cluster ([`Accounting`]): a MariaDB and a slurmdbd of Debian's,
//! each on loopback ports of their own, with their data in a temporary directory, and a munged of
//! their own that shares the host's key (a credential one munged makes, any munged with the same
//! key decodes). Give the cluster [`Accounting::slurm_conf_lines`]; slurmctld registers its
//! cluster with slurmdbd itself. 22.05 only (the host's): slurmdbd must be at least as new as the
//! slurmctld that talks to it. How it was first done by hand is in docs/slurm-facts.md
//! ("Accounting with slurmdbd").

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::DevclusterError;

/// The files [`Accounting`] needs besides a cluster's (Debian packages `mariadb-server`,
/// `slurmdbd`, `munge`).
pub const REQUIRED: &[&str] = &[
    "/usr/bin/mariadb-install-db",
    "/usr/sbin/mariadbd",
    "/usr/bin/mariadb",
    "/usr/sbin/slurmdbd",
    "/usr/bin/sacct",
    "/usr/sbin/munged",
    "/etc/munge/munge.key",
];

/// The Debian packages providing [`REQUIRED`].
pub const PACKAGES: &[&str] = &["mariadb-server", "slurmdbd", "munge"];

/// A running MariaDB + slurmdbd (+ munged); stopped by PID on drop.
pub struct Accounting {
    dir: tempfile::TempDir,
    dbd_port: u16,
    /// slurmdbd, mariadbd, munged: stopped in that order.
    children: Vec<(&'static str, Child)>,
}

fn spec_err(what: &str, e: impl std::fmt::Display) -> DevclusterError {
    DevclusterError::Spec(format!("accounting: {what}: {e}"))
}

fn wait_for(what: &str, secs: u64, mut ready: impl FnMut() -> bool) -> Result<(), DevclusterError> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        if ready() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err(spec_err(what, format!("not ready after {secs} s")))
}

impl Accounting {
    /// Whether it can run here: root, and [`REQUIRED`] installed. `false` is "skip" (printed
    /// with `what`); under `CI=true` it panics instead: CI never passes without the test.
    pub fn available_for_tests(what: &str) -> bool {
        let missing: Vec<_> = REQUIRED.iter().filter(|p| !Path::new(p).exists()).collect();
        let why = if !nix::unistd::geteuid().is_root() {
            "not root".to_string()
        } else if !missing.is_empty() {
            format!("missing {missing:?} (Debian packages {}; scripts/install-deps.sh)", PACKAGES.join(" "))
        } else {
            return true;
        };
        if crate::install::ci() {
            panic!("CI=true but slurmdbd accounting cannot run here: {why}");
        }
        eprintln!("SKIPPED: {what} need slurmdbd accounting: {why}");
        false
    }

    /// Starts munged, MariaDB (a fresh database, user `slurm`) and slurmdbd, and waits for each.
    pub fn start() -> Result<Accounting, DevclusterError> {
        let dir = tempfile::tempdir().map_err(|e| spec_err("temp dir", e))?;
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755));
        let (base, held) = crate::ports::free_port_block(2)?;
        let (db_port, dbd_port) = (base, base + 1);
        let mut acct = Accounting { dir, dbd_port, children: Vec::new() };
        let d = acct.dir.path().to_path_buf();
        for sub in ["db", "munge", "run", "log"] {
            std::fs::create_dir_all(d.join(sub)).map_err(|e| spec_err(sub, e))?;
        }
        acct.start_munged(&d)?;
        let log = |name: &str| std::fs::File::create(d.join("log").join(name)).map_err(|e| spec_err(name, e));
        let ok = Command::new("/usr/bin/mariadb-install-db")
            .args(["--no-defaults", "--user=root", "--auth-root-authentication-method=normal"])
            .arg(format!("--datadir={}", d.join("db").display()))
            .stdout(log("install-db.log")?)
            .stderr(log("install-db.err")?)
            .status()
            .map_err(|e| spec_err("mariadb-install-db", e))?;
        if !ok.success() {
            return Err(spec_err("mariadb-install-db", tail(&d.join("log/install-db.err"))));
        }
        drop(held);
        let sock = d.join("run/mysql.sock");
        let child = Command::new("/usr/sbin/mariadbd")
            .args(["--no-defaults", "--user=root", "--bind-address=127.0.0.1", "--skip-name-resolve"])
            .arg(format!("--port={db_port}"))
            .arg(format!("--datadir={}", d.join("db").display()))
            .arg(format!("--socket={}", sock.display()))
            .arg(format!("--pid-file={}", d.join("run/mysqld.pid").display()))
            .arg(format!("--log-error={}", d.join("log/mysqld.err").display()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| spec_err("mariadbd", e))?;
        acct.children.insert(0, ("mariadbd", child));
        let sql = "CREATE USER 'slurm'@'localhost' IDENTIFIED BY 'pw'; \
                   CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY 'pw'; \
                   GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost'; \
                   GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';";
        wait_for("mariadbd", 60, || sock.exists())?;
        let granted = Command::new("/usr/bin/mariadb")
            .arg(format!("--socket={}", sock.display()))
            .args(["-uroot", "-e", sql])
            .output()
            .map_err(|e| spec_err("mariadb", e))?;
        if !granted.status.success() {
            return Err(spec_err("mariadb", String::from_utf8_lossy(&granted.stderr)));
        }
        let conf = format!(
            "AuthType=auth/munge\nAuthInfo=socket={munge}\nDbdHost=localhost\nDbdAddr=127.0.0.1\n\
             DbdPort={dbd_port}\nSlurmUser=root\nLogFile={log}\nPidFile={pid}\n\
             StorageType=accounting_storage/mysql\nStorageHost=127.0.0.1\nStoragePort={db_port}\n\
             StorageUser=slurm\nStoragePass=pw\nStorageLoc=slurm_acct_db\n",
            munge = acct.munge_socket().display(),
            log = d.join("log/slurmdbd.log").display(),
            pid = d.join("run/slurmdbd.pid").display(),
        );
        let conf_path = d.join("slurmdbd.conf");
        std::fs::write(&conf_path, conf).map_err(|e| spec_err("slurmdbd.conf", e))?;
        std::fs::set_permissions(&conf_path, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| spec_err("slurmdbd.conf", e))?;
        // slurmdbd reads slurmdbd.conf beside $SLURM_CONF (which need not exist).
        let child = Command::new("/usr/sbin/slurmdbd")
            .arg("-D")
            .env("SLURM_CONF", d.join("slurm.conf"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log("slurmdbd.stderr")?)
            .spawn()
            .map_err(|e| spec_err("slurmdbd", e))?;
        acct.children.insert(0, ("slurmdbd", child));
        let up = wait_for("slurmdbd", 60, || std::net::TcpStream::connect(("127.0.0.1", dbd_port)).is_ok());
        up.map_err(|e| spec_err(&e.to_string(), tail(&d.join("log/slurmdbd.stderr"))))?;
        Ok(acct)
    }

    fn start_munged(&mut self, d: &Path) -> Result<(), DevclusterError> {
        let dir = d.join("munge");
        let user = nix::unistd::User::from_name("munge")
            .ok()
            .flatten()
            .ok_or_else(|| DevclusterError::NotInstalled("no `munge` user".into()))?;
        nix::unistd::chown(&dir, Some(user.uid), Some(user.gid)).map_err(|e| spec_err("munge dir", e))?;
        let arg = |flag: &str, file: &str| format!("--{flag}={}", dir.join(file).display());
        let child = Command::new("/usr/bin/setpriv")
            .args(["--reuid=munge", "--regid=munge", "--clear-groups", "/usr/sbin/munged", "-F"])
            .args([
                arg("socket", "munge.socket.2"),
                arg("pid-file", "munged.pid"),
                arg("log-file", "munged.log"),
                arg("seed-file", "munged.seed"),
                "--key-file=/etc/munge/munge.key".to_string(),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| spec_err("munged", e))?;
        self.children.insert(0, ("munged", child));
        let sock = self.munge_socket();
        wait_for("munged", 20, || sock.exists())
            .map_err(|e| spec_err(&e.to_string(), tail(&dir.join("munged.log"))))
    }

    fn munge_socket(&self) -> PathBuf {
        self.dir.path().join("munge/munge.socket.2")
    }

    /// The slurm.conf lines of a cluster that keeps its accounting here (`AccountingStoragePass`
    /// names the munge socket the connections to slurmdbd use: without it, `/run/munge`'s).
    pub fn slurm_conf_lines(&self) -> Vec<String> {
        vec![
            "AccountingStorageType=accounting_storage/slurmdbd".into(),
            "AccountingStorageHost=localhost".into(),
            format!("AccountingStoragePort={}", self.dbd_port),
            format!("AccountingStoragePass={}", self.munge_socket().display()),
        ]
    }

    /// slurmdbd's log, for a failure's message.
    pub fn log_tail(&self) -> String {
        tail(&self.dir.path().join("log/slurmdbd.log"))
    }
}

fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<_> = text.lines().collect();
    lines[lines.len().saturating_sub(10)..].join("\n")
}

impl Drop for Accounting {
    fn drop(&mut self) {
        for (_, child) in &mut self.children {
            let pid = nix::unistd::Pid::from_raw(child.id() as i32);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
            let deadline = Instant::now() + Duration::from_secs(20);
            while Instant::now() < deadline && matches!(child.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(100));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
