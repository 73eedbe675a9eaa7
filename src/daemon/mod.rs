//! The long-running service: binds the socket, runs reconcile passes, answers the CLI, shuts down cleanly.
//!
//! One task owns the [`Reconciler`] and runs passes one at a time: on start, every `reconcile.interval`
//! (sooner while requests are in flight, as the pass asks), and whenever a hook wakes it. Wake-ups that
//! arrive during a pass collapse into one more pass after it, so a burst of hooks never queues a burst
//! of passes and a hook never waits for a pass. The socket server runs beside it and only forwards.

mod server;

use crate::config::Config;
use crate::reconcile::{PassReport, Reconciler, Trigger};
use crate::store::Store;
use anyhow::Context;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// What the socket server asks of the pass loop.
pub(crate) enum Command {
    Wake,
    Reconcile(oneshot::Sender<PassReport>),
    Gc { dry_run: bool, reply: oneshot::Sender<serde_json::Value> },
}

/// Liveness shared with the socket server (answered without waiting for a pass).
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct Liveness {
    pub version: String,
    pub pid: u32,
    pub started_at: String,
    pub config: String,
    pub pass_running: bool,
    pub last_pass: Option<PassReport>,
}

/// Runs the daemon until `shutdown` resolves (SIGTERM/SIGINT in the binary; a future in tests).
pub async fn run(cfg: Config, shutdown: impl Future<Output = ()>) -> anyhow::Result<()> {
    let store = Store::open(&cfg.state_dir).await.context("opening the state store")?;
    let mut reconciler =
        Reconciler::new(cfg.clone(), store.clone()).await.context("starting the reconciler")?;
    let listener = server::bind(&cfg.socket).with_context(|| format!("binding {}", cfg.socket.display()))?;
    let liveness = Arc::new(Mutex::new(Liveness {
        version: env!("CARGO_PKG_VERSION").to_string(),
        pid: std::process::id(),
        started_at: chrono::Utc::now().to_rfc3339(),
        config: cfg.source.display().to_string(),
        pass_running: false,
        last_pass: None,
    }));
    let (tx, mut rx) = mpsc::channel::<Command>(256);
    let allowed = server::allowed_uids(cfg.daemon.service_user.as_deref());
    let server = tokio::spawn(server::serve(listener, tx, liveness.clone(), allowed));
    let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Ready]);
    tracing::info!(socket = %cfg.socket.display(), state_dir = %cfg.state_dir.display(), "slurm-dws daemon ready");

    tokio::pin!(shutdown);
    let mut trigger = Trigger::Startup;
    let mut waiting: Vec<oneshot::Sender<PassReport>> = Vec::new();
    'passes: loop {
        liveness.lock().unwrap().pass_running = true;
        let report = tokio::select! {
            r = reconciler.pass(trigger) => r,
            _ = &mut shutdown => break 'passes,
        };
        release_memory();
        {
            let mut l = liveness.lock().unwrap();
            l.pass_running = false;
            l.last_pass = Some(report.clone());
        }
        for w in waiting.drain(..) {
            let _ = w.send(report.clone());
        }
        // Wait for the next reason to run: the pass's own requeue time, a hook, or a CLI request.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(report.next_pass_in_secs.max(1));
        trigger = loop {
            tokio::select! {
                _ = &mut shutdown => break 'passes,
                _ = tokio::time::sleep_until(deadline) => break Trigger::Interval,
                cmd = rx.recv() => match cmd {
                    None => break 'passes,
                    Some(Command::Wake) => break Trigger::Hook,
                    Some(Command::Reconcile(reply)) => { waiting.push(reply); break Trigger::Cli }
                    Some(Command::Gc { dry_run, reply }) => {
                        let _ = reply.send(reconciler.gc(dry_run).await);
                        if !dry_run { break Trigger::Cli }
                    }
                },
            }
        };
        // Whatever else queued up meanwhile is served by this same pass.
        while let Ok(cmd) = rx.try_recv() {
            match cmd {
                Command::Wake => {}
                Command::Reconcile(reply) => waiting.push(reply),
                Command::Gc { dry_run, reply } => {
                    let _ = reply.send(reconciler.gc(dry_run).await);
                }
            }
        }
    }
    let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Stopping]);
    tracing::info!("slurm-dws daemon stopping");
    server.abort();
    let _ = std::fs::remove_file(&cfg.socket);
    store.close().await;
    Ok(())
}

/// Limits glibc to two malloc arenas. By default every thread that allocates (tokio's workers, its
/// blocking threads, sqlx's SQLite threads) may get its own arena, each keeping the memory a pass freed:
/// at 10,000 nodes that alone took the daemon from ~90 MB to ~140 MB RSS (`make bench`). Call it before
/// any thread starts.
pub fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator tuning; called before other threads exist.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

/// Hands the memory a pass freed back to the kernel, so the daemon's RSS between passes is what it
/// holds, not the peak of the last pass.
fn release_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim is thread-safe and only returns free memory to the kernel.
    unsafe {
        libc::malloc_trim(0);
    }
}
