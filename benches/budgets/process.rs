//! The benches' child processes (the simulator, the daemon) and what is measured of them.

use anyhow::{anyhow, bail, Context, Result};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A child process this bench started; stopped (SIGTERM, then SIGKILL) by its PID when dropped.
pub(crate) struct Proc {
    child: Child,
    pub(crate) addr: String,
    pub(crate) log: PathBuf,
}

impl Proc {
    pub(crate) fn sim(bin: &Path, d: &Path) -> Result<Proc> {
        let mut child = Command::new(bin)
            .args(["--listen", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("simulator")?;
        let mut first = String::new();
        BufReader::new(child.stdout.take().expect("piped")).read_line(&mut first)?;
        let addr = first.trim().rsplit(' ').next().unwrap_or_default().to_string();
        let sim = Proc { child, addr, log: d.join("sim.log") };
        // The benches' nodesets name templates nobody loaded: the simulator serves FLEX_START ones, so
        // the daemon's start-up template check accepts them (as a real project's templates would be).
        sim.control_post("templates/defaults", r#"{"serve": true}"#)?;
        Ok(sim)
    }

    pub(crate) fn daemon(bin: &Path, config: &Path, d: &Path) -> Result<Proc> {
        Self::daemon_with(bin, config, d, &[])
    }

    /// [`Proc::daemon`] with more environment variables.
    pub(crate) fn daemon_with(bin: &Path, config: &Path, d: &Path, env: &[(&str, &str)]) -> Result<Proc> {
        let log = d.join("daemon.log");
        let child = Command::new(bin)
            .envs(env.iter().copied())
            .arg("--config")
            .arg(config)
            .arg("daemon")
            .env("SLURM_DWS_LOG", "info")
            // For experiments: `BENCH_DAEMON_ENV="_RJEM_MALLOC_CONF=narenas:2"` (space-separated K=V);
            // heaptrack of the daemon: see benches/budgets/whole_pass.rs ("Heap profiles").
            .envs(
                std::env::var("BENCH_DAEMON_ENV")
                    .unwrap_or_default()
                    .split_whitespace()
                    .filter_map(|kv| kv.split_once('=')),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?)
            .spawn()
            .context("daemon")?;
        let p = Proc { child, addr: String::new(), log };
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::os::unix::net::UnixStream::connect(d.join("slurm-dws.sock")).is_err() {
            if Instant::now() > deadline {
                bail!("the daemon did not bind its socket:\n{}", p.log_tail(20));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(p)
    }

    /// `POST /_sim/{path}` with a JSON body, over a plain blocking connection (no runtime needed).
    pub(crate) fn control_post(&self, path: &str, body: &str) -> Result<()> {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(&self.addr)?;
        write!(
            s,
            "POST /_sim/{path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            self.addr,
            body.len()
        )?;
        let mut answer = String::new();
        s.read_to_string(&mut answer)?;
        if !answer.starts_with("HTTP/1.1 200") {
            bail!("POST /_sim/{path}: {}", answer.lines().next().unwrap_or_default());
        }
        Ok(())
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    pub(crate) fn log_tail(&self, n: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline && matches!(self.child.try_wait(), Ok(None)) {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// CPU time of every thread of a process (ns precision, from the scheduler's own accounting).
pub(crate) fn task_cpu(pid: u32) -> Result<Duration> {
    let mut ns: u64 = 0;
    for entry in std::fs::read_dir(format!("/proc/{pid}/task"))? {
        let text = std::fs::read_to_string(entry?.path().join("schedstat")).unwrap_or_default();
        ns += text.split_whitespace().next().and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    }
    Ok(Duration::from_nanos(ns))
}

/// A process's memory from /proc/PID/status, in kB.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Mem {
    /// VmHWM: the peak resident set.
    pub(crate) hwm: u64,
    pub(crate) rss: u64,
    /// RssAnon: heap and stacks.
    pub(crate) anon: u64,
    /// RssFile: pages of mapped files (the binary's code, shared libraries).
    pub(crate) file: u64,
}

impl Mem {
    pub(crate) fn max(self, o: Mem) -> Mem {
        Mem {
            hwm: self.hwm.max(o.hwm),
            rss: self.rss.max(o.rss),
            anon: self.anon.max(o.anon),
            file: self.file.max(o.file),
        }
    }
}

pub(crate) fn memory(pid: u32) -> Result<Mem> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| anyhow!("no {name} in /proc/{pid}/status"))
    };
    Ok(Mem {
        hwm: field("VmHWM:")?,
        rss: field("VmRSS:")?,
        anon: field("RssAnon:")?,
        file: field("RssFile:")?,
    })
}

/// `GET path` of `addr` over a plain blocking connection: the body of a 200 answer.
pub(crate) fn http_get(addr: &str, path: &str) -> Result<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr)?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n")?;
    let mut answer = String::new();
    s.read_to_string(&mut answer)?;
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    if !head.starts_with("HTTP/1.1 200") {
        bail!("GET {path}: {}", head.lines().next().unwrap_or_default());
    }
    if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        bail!("GET {path}: a chunked answer (not read here)");
    }
    Ok(body.to_string())
}

/// A pass that changed nothing and sent nothing.
pub(crate) fn quiet(report: &Value) -> bool {
    let r = if report["report"].is_object() { &report["report"] } else { report };
    r["gce_steps"].as_array().is_some_and(Vec::is_empty)
        && r["slurm_commands"].as_u64() == Some(0)
        && r["events"].as_u64() == Some(0)
        && r["hook_calls_ingested"].as_u64() == Some(0)
        && r["errors"].as_array().is_some_and(Vec::is_empty)
}
