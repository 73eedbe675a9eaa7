//! Several controllers on one machine: each `SlurmctldHost` its own host name and address, as on
//! two real hosts (docs/slurm-facts.md, "Two controllers").
//!
//! [`HostNet`] makes the hosts: one network namespace per controller (`ip netns`), joined to the
//! machine by a veth pair (the machine at `10.X.N.1`, the controller at `10.X.N.2`, its default
//! route through the machine), and the two controllers joined to each other by a veth of their own
//! with `/32` routes (so nothing is forwarded through the machine). The machine's addresses are
//! reachable from every namespace: slurmd nodes (`NodeAddr=10.X.1.1`) and the GCE simulator listen
//! there. Dropping it deletes the namespaces and with them every link it made.
//!
//! [`host_command`] runs a program on a controller's host: in its network namespace, with its own
//! UTS namespace (`hostname` is the controller's name, which slurmctld compares with the
//! `SlurmctldHost` entries) and its own mount namespace in which the cluster's `host/` directory is
//! that host's `host-NAME/` (SlurmctldPidFile and SlurmctldLogFile are there: a slurmctld starting
//! kills the process its pid file names, so each host needs its own). What slurmctld starts (the
//! hooks) inherits all three; a slurm-dws daemon started the same way sees what its controller sees.

use std::path::Path;
use std::process::Command;

use crate::host::run_capture;
use crate::DevclusterError;

/// One controller's host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerHost {
    /// Its `SlurmctldHost` name and host name.
    pub name: String,
    /// Its address (in its namespace).
    pub addr: String,
    /// Its network namespace.
    pub netns: String,
}

/// Network namespaces for controllers, deleted on drop.
#[derive(Debug)]
pub struct HostNet {
    /// The machine's address the controllers reach it by (the first veth's).
    pub machine_addr: String,
    pub hosts: Vec<ControllerHost>,
}

fn ip(args: &[&str]) -> Result<(), DevclusterError> {
    run_capture(Command::new("/usr/sbin/ip").args(args)).map(drop)
}

impl HostNet {
    /// Makes one host per name (two at most: one direct link joins them).
    pub fn create(names: &[&str]) -> Result<HostNet, DevclusterError> {
        if names.is_empty() || names.len() > 2 {
            return Err(DevclusterError::Spec("HostNet: one or two controllers".into()));
        }
        // A second octet no address of this machine uses yet.
        let used = run_capture(Command::new("/usr/sbin/ip").args(["-o", "addr"]))?;
        let x = (100..250u32)
            .map(|x| (x + std::process::id()) % 150 + 100)
            .find(|x| !used.contains(&format!("10.{x}.")))
            .ok_or_else(|| DevclusterError::Spec("no free 10.X.0.0/16 for controller hosts".into()))?;
        let tag = format!("dws{x}");
        let mut net = HostNet { machine_addr: format!("10.{x}.1.1"), hosts: Vec::new() };
        for (i, name) in names.iter().enumerate() {
            let n = i + 1;
            let ns = format!("{tag}-{name}");
            // Pushed first: a failure below still deletes what was made.
            net.hosts.push(ControllerHost {
                name: name.to_string(),
                addr: format!("10.{x}.{n}.2"),
                netns: ns.clone(),
            });
            ip(&["netns", "add", &ns])?;
            let (outer, inner) = (format!("{tag}h{n}"), format!("{tag}c{n}"));
            ip(&["link", "add", &outer, "type", "veth", "peer", "name", &inner, "netns", &ns])?;
            ip(&["addr", "add", &format!("10.{x}.{n}.1/24"), "dev", &outer])?;
            ip(&["link", "set", &outer, "up"])?;
            ip(&["-n", &ns, "addr", "add", &format!("10.{x}.{n}.2/24"), "dev", &inner])?;
            ip(&["-n", &ns, "link", "set", &inner, "up"])?;
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
            ip(&["-n", &ns, "route", "add", "default", "via", &format!("10.{x}.{n}.1")])?;
        }
        if let [a, b] = &net.hosts[..] {
            let (ab, ba) = (format!("{tag}ab"), format!("{tag}ba"));
            ip(&[
                "link", "add", &ab, "netns", &a.netns, "type", "veth", "peer", "name", &ba, "netns", &b.netns,
            ])?;
            ip(&["-n", &a.netns, "link", "set", &ab, "up"])?;
            ip(&["-n", &b.netns, "link", "set", &ba, "up"])?;
            ip(&["-n", &a.netns, "route", "add", &format!("{}/32", b.addr), "dev", &ab])?;
            ip(&["-n", &b.netns, "route", "add", &format!("{}/32", a.addr), "dev", &ba])?;
        }
        Ok(net)
    }
}

impl Drop for HostNet {
    fn drop(&mut self) {
        // Deleting a namespace deletes its links, and a veth goes with its peer.
        for h in &self.hosts {
            let _ = ip(&["netns", "del", &h.netns]);
        }
    }
}

/// `program` on `host`'s host (see the module docs): `host_dir` (the cluster's `host/`) is
/// `host_dir-NAME` there.
pub fn host_command(host: &ControllerHost, host_dir: &Path, program: &Path) -> Command {
    let mut cmd = Command::new("/usr/sbin/ip");
    cmd.args([
        "netns",
        "exec",
        &host.netns,
        "/usr/bin/unshare",
        "--uts",
        "--mount",
        "--propagation",
        "private",
    ])
    .args([
        "--",
        "/bin/sh",
        "-ec",
        r#"src=$1; dst=$2; name=$3; shift 3
/bin/mount --bind "$src" "$dst"
/usr/bin/hostname "$name"
exec "$@""#,
        "on-host",
    ])
    .arg(own_dir(host_dir, &host.name))
    .arg(host_dir)
    .arg(&host.name)
    .arg(program);
    cmd
}

/// The directory that is `host_dir` on host `name`.
pub fn own_dir(host_dir: &Path, name: &str) -> std::path::PathBuf {
    let file = host_dir.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
    host_dir.with_file_name(format!("{file}-{name}"))
}

/// A TCP port on a host's loopback that leads to an address of the machine (see
/// [`forward_loopback`]); stopped on drop.
#[derive(Debug)]
pub struct LoopbackForward {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for LoopbackForward {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Listens on `127.0.0.1:PORT` inside `host`'s network namespace (PORT is `to`'s) and carries each
/// connection to `to` (an address of the machine): a program on that host reaches a service of the
/// machine at a loopback address, as slurm-dws's `credentials = "none"` wants of the simulator. The
/// caller's address the service sees is the host's own.
pub fn forward_loopback(
    host: &ControllerHost,
    to: std::net::SocketAddr,
) -> Result<LoopbackForward, DevclusterError> {
    use std::io::{Read, Write};
    use std::net::{Shutdown, TcpListener, TcpStream};
    use std::sync::atomic::{AtomicBool, Ordering};
    let ns_path = format!("/run/netns/{}", host.netns);
    let ns = std::fs::File::open(&ns_path).map_err(|e| DevclusterError::io(Path::new(&ns_path), e))?;
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let stopping = stop.clone();
    let thread = std::thread::spawn(move || {
        // This thread (and the threads it starts) live in the host's namespace from here on.
        let bound = nix::sched::setns(&ns, nix::sched::CloneFlags::CLONE_NEWNET)
            .map_err(std::io::Error::from)
            .and_then(|()| TcpListener::bind(("127.0.0.1", to.port())))
            .and_then(|l| l.set_nonblocking(true).map(|()| l));
        let listener = match bound {
            Ok(l) => {
                let _ = ready_tx.send(Ok(()));
                l
            }
            Err(e) => {
                let _ = ready_tx.send(Err(e));
                return;
            }
        };
        let pipe = |mut from: TcpStream, mut to: TcpStream| {
            std::thread::spawn(move || {
                let mut buf = [0u8; 16384];
                while let Ok(n) = from.read(&mut buf) {
                    if n == 0 || to.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
                let _ = to.shutdown(Shutdown::Write);
            });
        };
        while !stopping.load(Ordering::Relaxed) {
            match listener.accept() {
                Ok((client, _)) => {
                    let _ = client.set_nonblocking(false);
                    if let Ok(server) = TcpStream::connect(to) {
                        if let (Ok(c2), Ok(s2)) = (client.try_clone(), server.try_clone()) {
                            pipe(client, server);
                            pipe(s2, c2);
                        }
                    }
                }
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(20)),
            }
        }
    });
    match ready_rx.recv() {
        Ok(Ok(())) => Ok(LoopbackForward { stop, thread: Some(thread) }),
        Ok(Err(e)) => Err(DevclusterError::io(Path::new(&ns_path), e)),
        Err(_) => Err(DevclusterError::Spec("the loopback forward thread died".into())),
    }
}
