//! A running local cluster ([`LocalCluster`]): its files written, munged and slurmctld started and
//! stopped by PID, slurmds started and stopped by pid file, and everything stopped on drop.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::cluster_spec::{Auth, ClusterSpec};
use crate::conf::{self, Layout};
use crate::generation::{self, SlurmGeneration};
use crate::host::{log_file, mkdir, run_capture, set_mode, tail, wait_for, write_file};
use crate::install;
use crate::ports::free_port_block;
use crate::process::{self, Daemon};
use crate::{DevclusterError, MARKER_ENV};

const SLURMCTLD: &str = "/usr/sbin/slurmctld";
const MUNGED: &str = "/usr/sbin/munged";
const CLIENT_BIN: &str = "/usr/bin";
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// A running local cluster. Dropping it stops every process it started.
#[derive(Debug)]
pub struct LocalCluster {
    spec: ClusterSpec,
    pub(crate) layout: Layout,
    /// Remove the directory on drop (false when kept for a post-mortem).
    remove_dir: bool,
    node_names: Vec<String>,
    ctld_port: u16,
    /// The root on 24.11 and 26.05; `None` when Slurm runs on the host (22.05).
    root: Option<PathBuf>,
    munged: Option<Daemon>,
    slurmctld: Option<Daemon>,
    /// With several controllers ([`ClusterSpec::controllers`]): each one's slurmctld, by index.
    controllers: Vec<Option<Daemon>>,
}

impl LocalCluster {
    /// Writes the cluster's files, starts munged and slurmctld, and waits until `scontrol ping`
    /// answers. The host's Slurm must be installed (see [`ensure_installed`](crate::ensure_installed);
    /// every generation expands hostlists with it); a 24.11 or 26.05 cluster builds its root if it is
    /// missing. Run as root.
    pub fn start(spec: ClusterSpec) -> Result<LocalCluster, DevclusterError> {
        let missing = install::missing();
        if !missing.is_empty() {
            return Err(DevclusterError::NotInstalled(format!(
                "missing {missing:?}; call devcluster::ensure_installed() or run scripts/install-deps.sh"
            )));
        }
        let root = generation::ensure_root(spec.slurm)?;
        if root.is_some() && !spec.controllers.is_empty() {
            return Err(DevclusterError::Spec("several controllers run on the host's 22.05 only".into()));
        }
        if spec.cluster_name.is_empty() || spec.node_lines.is_empty() {
            return Err(DevclusterError::Spec(
                "a cluster needs a ClusterName and at least one node line".into(),
            ));
        }
        let layout = Layout { dir: make_private_dir()? };
        let mut cluster = LocalCluster {
            spec,
            layout,
            remove_dir: std::env::var("SLURM_DWS_KEEP_DEVCLUSTER").map_or(true, |v| v != "1"),
            node_names: Vec::new(),
            ctld_port: 0,
            root,
            munged: None,
            slurmctld: None,
            controllers: Vec::new(),
        };
        // From here on, a failure drops `cluster`, which stops whatever was started.
        cluster.write_files()?;
        if cluster.spec.auth == Auth::Munge {
            cluster.start_munged()?;
        }
        cluster.start_slurmctld()?;
        Ok(cluster)
    }

    fn write_files(&mut self) -> Result<(), DevclusterError> {
        let l = self.layout.clone();
        for dir in [l.state(), l.spool(), l.run(), l.log(), l.bin(), l.jobs(), l.host()] {
            mkdir(&dir, 0o755)?;
        }
        for c in &self.spec.controllers {
            mkdir(&crate::controllers::own_dir(&l.host(), &c.name), 0o755)?;
        }
        // munged refuses a socket whose path is not searchable by all.
        set_mode(&l.dir, 0o755)?;
        write_file(&l.hostnames_conf(), "ClusterName=hostnames\nSlurmctldHost=localhost\n", 0o644)?;

        let mut counts = Vec::new();
        for line in &self.spec.node_lines {
            let expr = conf::line_value(line, "NodeName")
                .ok_or_else(|| DevclusterError::Spec(format!("no NodeName= in `{line}`")))?;
            let names = if expr.eq_ignore_ascii_case("DEFAULT") { Vec::new() } else { self.hostnames(expr)? };
            counts.push(names.len());
            self.node_names.extend(names);
        }
        let total: usize = counts.iter().sum();
        let (base, reserved) = free_port_block(total + 1)?;
        self.ctld_port = base;
        let mut next = base + 1;
        let node_lines: Vec<String> = self
            .spec
            .node_lines
            .iter()
            .zip(&counts)
            .map(|(line, &count)| {
                let completed = conf::complete_node_line(line, next, count);
                next += count as u16;
                completed
            })
            .collect();
        let text = conf::render(&self.spec, &l, self.ctld_port, &node_lines);
        write_file(&l.conf(), &text, 0o644)?;
        write_file(&l.prolog(), &conf::prolog_script(&l.conf()), 0o755)?;
        if let Some(root) = &self.root {
            write_file(&l.cgroup_conf(), conf::CGROUP_CONF_DISABLED, 0o644)?;
            write_file(&l.in_root(), &conf::in_root_script(root, &self.bind_dirs()?), 0o755)?;
            mkdir(&l.wbin(), 0o755)?;
            for program in conf::WRAPPED {
                let name = Path::new(program).file_name().expect("a program path has a name");
                write_file(&l.wbin().join(name), &conf::client_wrapper(program, &l.in_root()), 0o755)?;
            }
        }
        let in_root = self.root.as_ref().map(|_| l.in_root());
        write_file(
            &l.slurmd_start(),
            &conf::slurmd_start_script(&l, &l.dir.display().to_string(), in_root.as_deref()),
            0o755,
        )?;
        write_file(&l.slurmd_stop(), &conf::slurmd_stop_script(&l), 0o755)?;
        // The ports stay bound until here, so that no other cluster picks them meanwhile.
        drop(reserved);
        Ok(())
    }

    /// The directories bind-mounted into the root: the cluster's, then [`ClusterSpec::bind_dirs`]
    /// (absolute, existing, each once, parents before children).
    fn bind_dirs(&self) -> Result<Vec<PathBuf>, DevclusterError> {
        let mut dirs = vec![self.layout.dir.clone()];
        for d in &self.spec.bind_dirs {
            let canonical = d.canonicalize().map_err(|e| DevclusterError::io(d, e))?;
            if !canonical.is_dir() {
                return Err(DevclusterError::Spec(format!("bind dir {} is not a directory", d.display())));
            }
            if canonical == Path::new("/") {
                return Err(DevclusterError::Spec("bind dir / would hide the root".into()));
            }
            dirs.push(canonical);
        }
        dirs.sort();
        dirs.dedup();
        Ok(dirs)
    }

    /// Expands a hostlist with `scontrol show hostnames` (Slurm itself is the oracle; it needs
    /// a slurm.conf but no controller).
    fn hostnames(&self, expr: &str) -> Result<Vec<String>, DevclusterError> {
        let out = run_capture(
            Command::new(Path::new(CLIENT_BIN).join("scontrol"))
                .args(["show", "hostnames", expr])
                .env("SLURM_CONF", self.layout.hostnames_conf()),
        )?;
        Ok(out.split_whitespace().map(String::from).collect())
    }

    fn start_munged(&mut self) -> Result<(), DevclusterError> {
        use std::os::unix::process::CommandExt;
        let dir = self.layout.munge();
        mkdir(&dir, 0o711)?;
        let arg = |flag: &str, file: &str| format!("--{flag}={}", dir.join(file).display());
        let args = [
            "--foreground".to_string(),
            arg("socket", "munge.socket.2"),
            arg("pid-file", "munged.pid"),
            arg("log-file", "munged.log"),
            arg("seed-file", "munged.seed"),
            "--key-file=/etc/munge/munge.key".to_string(),
        ];
        let mut cmd = match &self.root {
            None => {
                let user = nix::unistd::User::from_name("munge")
                    .ok()
                    .flatten()
                    .ok_or_else(|| DevclusterError::NotInstalled("no `munge` user".into()))?;
                nix::unistd::chown(&dir, Some(user.uid), Some(user.gid))
                    .map_err(|e| DevclusterError::io(&dir, e.into()))?;
                let mut cmd = Command::new(MUNGED);
                cmd.args(args).uid(user.uid.as_raw()).gid(user.gid.as_raw());
                cmd
            }
            Some(root) => {
                // The root's munge user (not the host's: another uid) owns the directory; munged
                // runs as it through setpriv, which execs (the PID stays munged's). --origin: the
                // host name does not resolve in the root, and munged would otherwise stamp
                // credentials 0.0.0.0, which slurmctld then fails to look up on every sbatch.
                let (uid, gid) = generation::user_in_root(root, "munge")?;
                nix::unistd::chown(&dir, Some(uid.into()), Some(gid.into()))
                    .map_err(|e| DevclusterError::io(&dir, e.into()))?;
                let mut cmd = Command::new(self.layout.in_root());
                cmd.args(["/usr/bin/setpriv", "--reuid=munge", "--regid=munge", "--clear-groups", MUNGED])
                    .args(args)
                    .arg("--origin=127.0.0.1");
                cmd
            }
        };
        let child = cmd
            .current_dir(&self.layout.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log_file(&self.layout.log().join("munged.stderr"))?)
            .spawn()
            .map_err(|e| DevclusterError::io(Path::new(MUNGED), e))?;
        let mut daemon = Daemon::new("munged", child);
        let socket = self.layout.munge_socket();
        let ready = wait_for(Duration::from_secs(10), || socket.exists() || daemon.exited().is_some());
        let running = daemon.exited().is_none();
        self.munged = Some(daemon);
        if !(ready && running) {
            return Err(DevclusterError::Timeout {
                what: "munged socket".into(),
                timeout: Duration::from_secs(10),
                detail: format!(
                    ": {}",
                    tail(&self.layout.munge().join("munged.log"), 5)
                        + &tail(&self.layout.log().join("munged.stderr"), 5)
                ),
            });
        }
        Ok(())
    }

    fn start_slurmctld(&mut self) -> Result<(), DevclusterError> {
        if !self.spec.controllers.is_empty() {
            self.controllers = (0..self.spec.controllers.len()).map(|_| None).collect();
            for c in self.spec.controllers.clone() {
                self.start_controller(&c.name)?;
            }
            let ok = wait_for(START_TIMEOUT, || self.ping());
            return if ok {
                Ok(())
            } else {
                Err(DevclusterError::Timeout {
                    what: "scontrol ping".into(),
                    timeout: START_TIMEOUT,
                    detail: format!(": {}", self.slurmctld_log_tail(20)),
                })
            };
        }
        let out = log_file(&self.layout.log().join("slurmctld.stdout"))?;
        let err = out.try_clone().map_err(|e| DevclusterError::io(&self.layout.log(), e))?;
        let mut cmd = match &self.root {
            None => Command::new(SLURMCTLD),
            Some(_) => {
                let mut cmd = Command::new(self.layout.in_root());
                cmd.arg(SLURMCTLD);
                cmd
            }
        };
        let child = cmd
            .current_dir(&self.layout.dir)
            .arg("-D")
            .arg("-i")
            .arg("-f")
            .arg(self.layout.conf())
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| DevclusterError::io(Path::new(SLURMCTLD), e))?;
        self.slurmctld = Some(Daemon::new("slurmctld", child));
        let deadline = Instant::now() + START_TIMEOUT;
        while Instant::now() < deadline {
            if let Some(status) = self.slurmctld.as_mut().and_then(Daemon::exited) {
                return Err(DevclusterError::Command {
                    command: format!("{SLURMCTLD} -D -f {}", self.layout.conf().display()),
                    message: format!("exited with {status}: {}", self.slurmctld_log_tail(20)),
                });
            }
            if self.ping() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Err(DevclusterError::Timeout {
            what: "scontrol ping".into(),
            timeout: START_TIMEOUT,
            detail: format!(": {}", self.slurmctld_log_tail(20)),
        })
    }

    fn controller_index(&self, name: &str) -> Result<usize, DevclusterError> {
        self.spec
            .controllers
            .iter()
            .position(|c| c.name == name)
            .ok_or_else(|| DevclusterError::Spec(format!("no controller {name}")))
    }

    /// Starts controller `name`'s slurmctld on its host (several controllers only); returns at
    /// once (its role is Slurm's to settle: `scontrol ping`).
    pub fn start_controller(&mut self, name: &str) -> Result<(), DevclusterError> {
        let i = self.controller_index(name)?;
        let host = self.spec.controllers[i].clone();
        let out = log_file(&self.layout.log().join(format!("slurmctld-{name}.stdout")))?;
        let err = out.try_clone().map_err(|e| DevclusterError::io(&self.layout.log(), e))?;
        let child = crate::controllers::host_command(&host, &self.layout.host(), Path::new(SLURMCTLD))
            .current_dir(&self.layout.dir)
            .args(["-D", "-i", "-f"])
            .arg(self.layout.conf())
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| DevclusterError::io(Path::new(SLURMCTLD), e))?;
        self.controllers[i] = Some(Daemon::new("slurmctld", child));
        Ok(())
    }

    /// SIGKILLs controller `name`'s slurmctld (by its PID), as its host dying would.
    pub fn kill_controller(&mut self, name: &str) -> Result<(), DevclusterError> {
        let i = self.controller_index(name)?;
        if let Some(mut d) = self.controllers[i].take() {
            d.signal(Signal::SIGKILL);
            d.stop(); // reaps it
        }
        Ok(())
    }

    /// A command that runs `program` on controller `name`'s host (see `controllers.rs`).
    pub fn on_host(&self, name: &str, program: &Path) -> Result<Command, DevclusterError> {
        let i = self.controller_index(name)?;
        Ok(crate::controllers::host_command(&self.spec.controllers[i], &self.layout.host(), program))
    }

    /// Whether `scontrol ping` says the controller is up.
    pub fn ping(&self) -> bool {
        self.client("scontrol")
            .arg("ping")
            .output()
            .is_ok_and(|o| o.status.success() && String::from_utf8_lossy(&o.stdout).contains("UP"))
    }

    /// Stops slurmctld and starts it again on the same state (jobs and node states survive).
    pub fn restart_slurmctld(&mut self) -> Result<(), DevclusterError> {
        if let Some(mut old) = self.slurmctld.take() {
            old.stop();
        }
        self.start_slurmctld()
    }

    /// Freezes slurmctld (SIGSTOP): it keeps its port but answers nothing, like a controller
    /// that is hung. Undone by [`LocalCluster::continue_slurmctld`] (and by drop).
    pub fn pause_slurmctld(&self) {
        if let Some(d) = &self.slurmctld {
            d.signal(Signal::SIGSTOP);
        }
    }

    /// Undoes [`LocalCluster::pause_slurmctld`].
    pub fn continue_slurmctld(&self) {
        if let Some(d) = &self.slurmctld {
            d.signal(Signal::SIGCONT);
        }
    }

    /// The cluster's private directory.
    pub fn dir(&self) -> &Path {
        &self.layout.dir
    }

    pub fn conf_path(&self) -> PathBuf {
        self.layout.conf()
    }

    /// The environment a Slurm client (or a slurm-dws hook or daemon) needs to reach this cluster.
    pub fn env(&self) -> Vec<(String, String)> {
        vec![("SLURM_CONF".to_string(), self.conf_path().display().to_string())]
    }

    pub fn cluster_name(&self) -> &str {
        &self.spec.cluster_name
    }

    /// Every node of the node lines, expanded.
    pub fn node_names(&self) -> &[String] {
        &self.node_names
    }

    pub fn slurmctld_port(&self) -> u16 {
        self.ctld_port
    }

    pub fn log_dir(&self) -> PathBuf {
        self.layout.log()
    }

    /// A `sh -c` command line that starts the slurmd of `node` (`slurmd -b -N node -f CONF`,
    /// daemonized, signal mask cleared). Pass `"{name}"` to get the template a simulator's
    /// `--boot-cmd` wants.
    pub fn slurmd_start_command(&self, node: &str) -> String {
        format!("{} {}", self.layout.slurmd_start().display(), node)
    }

    /// The `sh -c` template (with `{name}`) that stops a node's slurmd through its pid file
    /// (TERM, KILL after 5 s; does nothing if it is not running).
    pub fn slurmd_stop_command(&self) -> String {
        format!("{} {{name}}", self.layout.slurmd_stop().display())
    }

    /// Starts the slurmd of `node` now (what a boot does).
    pub fn start_slurmd(&self, node: &str) -> Result<(), DevclusterError> {
        run_capture(Command::new(self.layout.slurmd_start()).arg(node)).map(drop)
    }

    /// Stops the slurmd of `node` now (what a VM deletion does).
    pub fn stop_slurmd(&self, node: &str) -> Result<(), DevclusterError> {
        run_capture(Command::new(self.layout.slurmd_stop()).arg(node)).map(drop)
    }

    /// Whether the slurmd of `node` is running (by its pid file).
    pub fn slurmd_running(&self, node: &str) -> bool {
        std::fs::read_to_string(self.layout.slurmd_pid_file(node))
            .ok()
            .and_then(|s| s.trim().parse::<i32>().ok())
            .is_some_and(|pid| process::alive(nix::unistd::Pid::from_raw(pid)))
    }

    /// Stops every slurmd of this cluster found through its pid file; returns how many.
    pub fn kill_slurmds(&self) -> usize {
        process::stop_slurmds(&self.layout.run(), &self.layout.conf())
    }

    /// Where this cluster's Slurm client commands (`scontrol`, `sinfo`, `squeue`, `sbatch`, ...)
    /// are: slurm-dws's `[slurm] bin_dir` for it. `/usr/bin` on 22.05; on 24.11 the cluster's
    /// `wbin/`, whose wrappers run the root's commands (from the host through `bin/in-root`, and
    /// directly when called from inside the root, e.g. by a hook).
    pub fn client_bin_dir(&self) -> PathBuf {
        match self.root {
            None => PathBuf::from(CLIENT_BIN),
            Some(_) => self.layout.wbin(),
        }
    }

    /// Which Slurm this cluster runs.
    pub fn slurm(&self) -> SlurmGeneration {
        self.spec.slurm
    }

    /// The root the cluster runs in (24.11, 26.05), `None` on the host's 22.05.
    pub fn root_dir(&self) -> Option<&Path> {
        self.root.as_deref()
    }

    /// The last `lines` lines of slurmctld's log, for error messages.
    pub fn slurmctld_log_tail(&self, lines: usize) -> String {
        let mut out = tail(&self.layout.log().join("slurmctld.log"), lines)
            + &tail(&self.layout.log().join("slurmctld.stdout"), lines);
        for c in &self.spec.controllers {
            let own = crate::controllers::own_dir(&self.layout.host(), &c.name);
            out += &format!("--- {} ---\n", c.name);
            out += &tail(&own.join("slurmctld.log"), lines);
            out += &tail(&self.layout.log().join(format!("slurmctld-{}.stdout", c.name)), lines);
        }
        out
    }
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        // slurmds first (they would try to reach the controller), then what they left behind,
        // then the controller and munge.
        self.continue_slurmctld();
        self.kill_slurmds();
        let dir = self.layout.dir.display().to_string();
        let marks = [format!("{MARKER_ENV}={dir}"), format!("SLURM_CONF={}", self.layout.conf().display())];
        let mut killed = process::kill_marked(&marks);
        // A process forked while /proc was read (a job step's task, a hook's child) escapes one
        // scan: scan again until one finds nothing (at most three more).
        for _ in 0..3 {
            process::wait_gone(&killed);
            let more = process::kill_marked(&marks);
            if more.is_empty() {
                break;
            }
            killed.extend(more);
        }
        if self.root.is_some() {
            // slurmctld and munged are stopped below, by PID and with TERM first.
            let spare: Vec<_> = self.slurmctld.iter().chain(&self.munged).map(Daemon::pid).collect();
            killed.extend(process::kill_in_mounts_of(&self.layout.dir, &spare));
        }
        process::wait_gone(&killed);
        if let Some(mut d) = self.slurmctld.take() {
            d.stop();
        }
        for mut d in self.controllers.drain(..).flatten() {
            d.stop();
        }
        // A hook that raced the shutdown may have started another slurmd.
        self.kill_slurmds();
        if self.root.is_some() {
            let spare: Vec<_> = self.munged.iter().map(Daemon::pid).collect();
            process::wait_gone(&process::kill_in_mounts_of(&self.layout.dir, &spare));
        }
        if let Some(mut d) = self.munged.take() {
            d.stop();
        }
        if self.remove_dir {
            let _ = std::fs::remove_dir_all(&self.layout.dir);
            if let Some(root) = &self.root {
                // The empty mount points in-root made inside the root, for this cluster's
                // directory and any other gone by now.
                if let Ok(rel) = self.layout.dir.strip_prefix("/") {
                    let _ = std::fs::remove_dir(root.join(rel));
                }
                generation::sweep_mount_points(root);
            }
        }
    }
}

/// Creates a new, unique directory under the temp dir (`slurm-dws-devcluster-PID-N-RANDOM`).
fn make_private_dir() -> Result<PathBuf, DevclusterError> {
    use rand::Rng;
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let base = std::env::temp_dir();
    for _ in 0..100 {
        let path = base.join(format!(
            "slurm-dws-devcluster-{}-{}-{:08x}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed),
            rand::thread_rng().gen::<u32>()
        ));
        match std::fs::create_dir(&path) {
            Ok(()) => return Ok(path),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(DevclusterError::io(&path, e)),
        }
    }
    Err(DevclusterError::io(&base, std::io::Error::other("no unique directory name found")))
}

/// Stops the slurmds of a cluster directory left behind by a run that could not clean up (e.g.
/// killed with SIGKILL), through their pid files. Returns how many were stopped.
pub fn kill_stray_slurmds(cluster_dir: &Path) -> usize {
    let layout = Layout { dir: cluster_dir.to_path_buf() };
    process::stop_slurmds(&layout.run(), &layout.conf())
}
