//! The long-running service: binds the socket, runs reconcile passes, answers the CLI, shuts down cleanly.
//!
//! One task owns the [`Reconciler`] and runs passes one at a time: on start, every `reconcile.interval`
//! (sooner while requests are in flight, as the pass asks), and whenever a hook wakes it. Wake-ups that
//! arrive during a pass collapse into one more pass after it, so a burst of hooks never queues a burst
//! of passes and a hook never waits for a pass. The socket server runs beside it and only forwards.
//! Between two passes the same task takes a config reload (SIGHUP, see `reload.rs`); beside it the
//! metrics endpoint (`crate::metrics`) serves what the store and the pass loop report.
//!
//! # Shutdown
//! `shutdown` (SIGTERM or SIGINT in the binary) is an argument of [`run`], and every step of stopping
//! is bounded so the whole stays inside the unit's `TimeoutStopSec=30s`:
//! 1. At once: systemd is told `STOPPING=1`, the socket stops accepting and its file is removed (a
//!    hook then finds no daemon, which is fine: its request is in the inbox for the next start), a
//!    client still sending its request is answered "daemon is shutting down", and the metrics
//!    endpoint finishes the scrapes in flight.
//! 2. A pass that is running is let finish for up to [`PASS_GRACE`], so what it sent to GCE is
//!    committed with its outcome; past that it is dropped, with a log line. Dropping is safe (every
//!    mutation's `requestId` is in the outbox before it is sent, and an open SQLite transaction
//!    rolls back), only slower: the next start finds out how the mutation went. GCE calls that passes
//!    left in flight (`reconcile::inflight`) then get [`IN_FLIGHT_GRACE`] to answer: an answer is
//!    recorded, a call still running is abandoned with a log line (its outbox entry stays pending,
//!    and the next start re-sends it with the same `requestId`).
//! 3. Clients waiting for a pass that will not run are answered "daemon is shutting down"; every
//!    client in flight gets [`HANDLER_GRACE`] to be answered, then its connection is closed. The
//!    store is closed last.

pub mod reload;
pub mod role;
mod server;
pub mod shared_state;

use crate::config::Config;
use crate::metrics::Metrics;
use crate::model::EventKind;
use crate::reconcile::{GcReport, PassReport, Reconciler, Trigger};
use crate::store::{Store, StoreError};
use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// How long a pass running when shutdown is asked for may go on. A pass waits at most 20 s for a GCE
/// Operation, so this lets a pass that is waiting on one see it through; with [`HANDLER_GRACE`] it
/// stays inside the unit's `TimeoutStopSec=30s`.
pub const PASS_GRACE: Duration = Duration::from_secs(20);

/// How long GCE calls a pass left in flight (`reconcile::inflight`) get to answer once the daemon
/// stops; with [`PASS_GRACE`] and [`HANDLER_GRACE`] it stays inside `TimeoutStopSec=30s`. A pass
/// waits for a call only `reconcile::STEP_WAIT`, so the pass grace is rarely used up.
pub const IN_FLIGHT_GRACE: Duration = Duration::from_secs(5);

/// How long socket clients and metrics scrapes in flight get to be answered once the daemon stops.
pub const HANDLER_GRACE: Duration = Duration::from_secs(3);

/// Why the daemon could not start or run. The binary prints it as one line and exits 1.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("opening the state store: {0}")]
    Store(#[from] StoreError),
    /// Another daemon holds `state_dir/daemon.lock` (see [`LOCK_FILE`]).
    #[error(
        "another slurm-dws daemon (pid {pid}) uses state_dir {}: only one daemon may run per state \
         directory",
        dir.display()
    )]
    StateDirTaken { pid: String, dir: PathBuf },
    #[error("{what} {}: {source}", path.display())]
    Io { what: &'static str, path: PathBuf, source: std::io::Error },
    #[error("binding daemon.metrics_listen {addr}: {source}")]
    MetricsListen { addr: SocketAddr, source: std::io::Error },
    /// The reconciler could not be built from the config (the message carries its whole chain).
    #[error("starting the reconciler: {0}")]
    Reconciler(String),
    /// A key of the config does not fit this machine (`daemon.controller`, `shared_state_dir`):
    /// the binary exits 2, as `check-config` does.
    #[error("{0}")]
    Config(String),
}

/// What the socket server asks of the pass loop.
pub(crate) enum Command {
    Wake,
    Reconcile(oneshot::Sender<PassReport>),
    Gc { dry_run: bool, reply: oneshot::Sender<GcReport> },
}

/// Liveness shared with the socket server (answered without waiting for a pass).
pub use crate::protocol::Liveness;

/// Runs the daemon until `shutdown` resolves (SIGTERM/SIGINT in the binary; a future in tests), then
/// stops as the module docs say.
pub async fn run(cfg: Config, shutdown: impl Future<Output = ()>) -> Result<(), DaemonError> {
    run_with_reload(cfg, shutdown, None).await
}

/// [`run`], and every message on `reload` (SIGHUP in the binary) re-reads the config file between passes.
pub async fn run_with_reload(
    mut cfg: Config,
    shutdown: impl Future<Output = ()>,
    mut reload: Option<mpsc::Receiver<()>>,
) -> Result<(), DaemonError> {
    // Several controllers: checked before anything is changed (a bad key exits 2).
    let (controllers, slurm_conf) = role::setup(&cfg).await.map_err(DaemonError::Config)?;
    if slurm_conf.slurmdbd {
        tracing::info!("slurm.conf keeps accounting in slurmdbd: jobs that end while the daemon is down end at sacct's end in the usage spans");
    }
    let store = Store::open_for_daemon(&cfg.state_dir).await?;
    let _lock = lock_state_dir(&cfg.state_dir)?;
    save_last_accepted(&cfg);
    let mut reconciler = Reconciler::new(cfg.clone(), store.clone())
        .await
        .map_err(|e| DaemonError::Reconciler(format!("{e:#}")))?;
    reconciler.set_slurmdbd(slurm_conf.slurmdbd);
    let listener = server::bind(&cfg.socket).map_err(|source| DaemonError::Io {
        what: "binding",
        path: cfg.socket.clone(),
        source,
    })?;
    #[allow(clippy::disallowed_methods)] // an edge: the daemon's start time, for status and metrics
    let started_at = chrono::Utc::now();
    let metrics = Metrics::new(nodeset_names(&cfg), reconciler.gce().clone(), started_at);
    // Cancelled when the daemon begins to stop: the socket and metrics servers stop accepting.
    let stopping = CancellationToken::new();
    let metrics_server = match cfg.daemon.metrics_listen {
        Some(addr) => {
            let l = crate::metrics::bind(addr)
                .await
                .map_err(|source| DaemonError::MetricsListen { addr, source })?;
            tracing::info!(%addr, "serving Prometheus metrics at /metrics");
            let until = stopping.clone().cancelled_owned();
            Some(tokio::spawn(crate::metrics::serve(l, metrics.clone(), store.clone(), until)))
        }
        None => None,
    };
    let liveness = Arc::new(Mutex::new(Liveness {
        version: env!("CARGO_PKG_VERSION").to_string(),
        pid: std::process::id(),
        started_at: started_at.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
        config: cfg.source.display().to_string(),
        pass_running: false,
        last_pass: None,
        controller: None,
    }));
    let (tx, mut rx) = mpsc::channel::<Command>(256);
    let allowed = server::allowed_uids(cfg.daemon.service_user.as_deref());
    let handlers = TaskTracker::new();
    let server = tokio::spawn(server::serve(
        listener,
        tx,
        liveness.clone(),
        server::Access { allowed, readers: cfg.daemon.readers.clone() },
        store.clone(),
        stopping.clone(),
        handlers.clone(),
    ));
    // `[pricing] catalog = true`: list prices fetched at start and once a day, beside the passes.
    let catalog = cfg.pricing.catalog.then(|| {
        let settings = crate::billing::refresh::CatalogSettings::from_config(&cfg, &cfg.pricing.currency);
        tokio::spawn(crate::billing::refresh::run(settings, reconciler.gce().clone(), stopping.clone()))
    });
    let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Ready]);
    let watchdog = watchdog_interval();
    tracing::info!(socket = %cfg.socket.display(), state_dir = %cfg.state_dir.display(), "slurm-dws daemon ready");

    // The event log is mirrored to the journal after each pass; history before this start is not replayed.
    let mut last_event = match store.events(None, None, 1).await {
        Ok(e) => e.last().map_or((0, started_at), |e| (e.id, e.time)),
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the event log");
            (0, started_at)
        }
    };

    tokio::pin!(shutdown);
    let mut trigger = Trigger::Startup;
    let mut waiting: Vec<oneshot::Sender<PassReport>> = Vec::new();
    let mut last_prune: Option<tokio::time::Instant> = None;
    let role_slurm = crate::slurm::Slurm::new(
        cfg.slurm.bin_dir.clone(),
        cfg.slurm.conf.clone(),
        Duration::from_secs(cfg.slurm.command_timeout),
    );
    let mut in_charge = false;
    let mut copying: Option<tokio::task::JoinHandle<()>> = None;
    let mut last_copy: Option<tokio::time::Instant> = None;
    'passes: loop {
        // Several controllers: act only while ours is in charge (`role.rs`).
        let acting = match &controllers {
            None => true,
            Some(c) => {
                let (now_role, asked) = c.ask(&role_slurm).await;
                let now_in_charge = now_role == role::Role::InCharge;
                metrics.role(&c.this, now_in_charge);
                if now_in_charge && !in_charge {
                    let state = take_charge(&cfg, &store, &mut reconciler, &metrics, &mut last_event).await;
                    let message = format!(
                        "controller {} in charge (Slurm's controllers: {}): {state}",
                        c.this,
                        c.hosts.join(", ")
                    );
                    role_event(&store, EventKind::TookCharge, &message).await;
                } else if !now_in_charge && (in_charge || trigger == Trigger::Startup) {
                    tracing::info!(
                        controller = %c.this,
                        in_charge = asked.in_charge.as_deref().unwrap_or("none"),
                        "standby: another controller is in charge (or none answers); no GCE or Slurm change from here"
                    );
                    let message = match &asked.in_charge {
                        Some(other) => format!("controller {} stands by: {other} is in charge", c.this),
                        None => {
                            format!("controller {} stands by: no controller answers scontrol ping", c.this)
                        }
                    };
                    role_event(&store, EventKind::Standby, &message).await;
                }
                liveness.lock().unwrap().controller = Some(asked);
                in_charge = now_in_charge;
                now_in_charge
            }
        };
        if !acting {
            // Clients asking for a pass get none: their channels close ("daemon is shutting down"
            // would be wrong, so they are told here by the status they can read).
            waiting.clear();
            let deadline = tokio::time::Instant::now() + Duration::from_secs(cfg.reconcile.interval.max(1));
            trigger = loop {
                tokio::select! {
                    _ = &mut shutdown => { begin_stopping(&stopping, &cfg); break 'passes }
                    _ = tokio::time::sleep_until(deadline) => break Trigger::Interval,
                    _ = watchdog_tick(watchdog) => watchdog_ping(watchdog),
                    cmd = rx.recv() => match cmd {
                        None => { begin_stopping(&stopping, &cfg); break 'passes }
                        Some(Command::Wake) => break Trigger::Hook,
                        Some(Command::Reconcile(_)) | Some(Command::Gc { .. }) => break Trigger::Cli,
                    },
                }
            };
            watchdog_ping(watchdog);
            continue 'passes;
        }
        liveness.lock().unwrap().pass_running = true;
        let (report, stop) = {
            let pass = reconciler.pass(trigger);
            tokio::pin!(pass);
            tokio::select! {
                r = &mut pass => (Some(r), false),
                _ = &mut shutdown => {
                    begin_stopping(&stopping, &cfg);
                    (finish_within(PASS_GRACE, pass).await, true)
                }
            }
        };
        let Some(report) = report else {
            tracing::warn!(
                grace_secs = PASS_GRACE.as_secs(),
                "the running pass did not finish within the shutdown grace and was dropped; the next start \
                 learns how the mutations it sent went (their requestIds are in the outbox)"
            );
            break 'passes;
        };
        {
            let mut l = liveness.lock().unwrap();
            l.pass_running = false;
            l.last_pass = Some(report.clone());
        }
        metrics.observe_pass(&report);
        // The pass loop is alive: systemd's watchdog (WatchdogSec=) restarts the daemon when these stop.
        watchdog_ping(watchdog);
        log_new_events(&store, &mut last_event).await;
        if last_prune.is_none_or(|t| t.elapsed() >= PRUNE_EVERY) {
            prune_history(&store, cfg.daemon.history_days).await;
            prune_delegate_leftovers(&cfg.state_dir);
            last_prune = Some(tokio::time::Instant::now());
        }
        for w in waiting.drain(..) {
            let _ = w.send(report.clone());
        }
        // The daemon in charge keeps its state where another controller's daemon can take it.
        if let (true, Some(dir)) = (controllers.is_some(), cfg.daemon.shared_state_dir.clone()) {
            let due = last_copy.is_none_or(|t| t.elapsed() >= shared_state::COPY_EVERY);
            if due && copying.as_ref().is_none_or(|h| h.is_finished()) {
                last_copy = Some(tokio::time::Instant::now());
                let (store, state_dir) = (store.clone(), cfg.state_dir.clone());
                copying = Some(tokio::spawn(async move {
                    match shared_state::write(&store, &dir, &state_dir).await {
                        Ok(took) => {
                            tracing::debug!(ms = took.as_millis() as u64, "state copied to shared_state_dir")
                        }
                        Err(error) => tracing::warn!(%error, "cannot copy the state to shared_state_dir"),
                    }
                }));
            }
        }
        if stop {
            break 'passes;
        }
        // Wait for the next reason to run: the pass's own requeue time, a hook, or a CLI request.
        // An inbox-first pass (a hook's, on the last observation) is followed by a full one at once.
        let wait = match report.reused_observation_ms {
            Some(_) => Duration::ZERO,
            None => Duration::from_secs(report.next_pass_in_secs.max(1)),
        };
        let deadline = tokio::time::Instant::now() + wait;
        // A GCE call left in flight by a pass answers: the next pass records it now.
        let answered = reconciler.in_flight_answered();
        trigger = loop {
            tokio::select! {
                _ = &mut shutdown => { begin_stopping(&stopping, &cfg); break 'passes }
                _ = tokio::time::sleep_until(deadline) => break Trigger::Interval,
                _ = answered.notified() => break Trigger::Interval,
                _ = watchdog_tick(watchdog) => watchdog_ping(watchdog),
                _ = next_reload(&mut reload) => {
                    if apply_reload(&mut cfg, &mut reconciler, &store, &metrics).await {
                        // Nodesets added or changed take effect now, not at the next interval.
                        break Trigger::Cli;
                    }
                }
                cmd = rx.recv() => match cmd {
                    None => { begin_stopping(&stopping, &cfg); break 'passes }
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

    // GCE calls a pass left in flight: their answers recorded if they come within the grace, the
    // others abandoned (their outbox entries stay pending; the next start re-sends them).
    let abandoned = reconciler.drain_in_flight(IN_FLIGHT_GRACE).await;
    if !abandoned.is_empty() {
        tracing::warn!(
            calls = abandoned.len(),
            grace_secs = IN_FLIGHT_GRACE.as_secs(),
            "GCE calls still in flight at the end of the shutdown grace were abandoned"
        );
    }
    drop(reconciler);

    // No pass runs any more: clients waiting for one, queued or not, are answered "shutting down" as
    // their reply channels close.
    drop(waiting);
    drop(rx);
    let _ = server.await;
    handlers.close();
    if tokio::time::timeout(HANDLER_GRACE, handlers.wait()).await.is_err() {
        tracing::warn!(
            clients = handlers.len(),
            grace_secs = HANDLER_GRACE.as_secs(),
            "socket clients still in flight at the end of the shutdown grace; their connections are closed"
        );
    }
    if let Some(mut m) = metrics_server {
        if tokio::time::timeout(HANDLER_GRACE, &mut m).await.is_err() {
            m.abort();
        }
    }
    if let Some(c) = catalog {
        c.abort();
    }
    store.close().await;
    tracing::info!("slurm-dws daemon stopped");
    Ok(())
}

/// This daemon's controller has just been put in charge by Slurm: take the newest shared state
/// (when `shared_state_dir` holds one newer than ours; the reconciler is then rebuilt on it) and let
/// the passes provision what Slurm was powering up with no request on record. Returns which state
/// it acts from, in words (for the `took_charge` event).
async fn take_charge(
    cfg: &Config,
    store: &Store,
    reconciler: &mut Reconciler,
    metrics: &Metrics,
    last_event: &mut (i64, chrono::DateTime<chrono::Utc>),
) -> String {
    #[allow(clippy::disallowed_methods)] // an edge: when this daemon took charge
    let now = chrono::Utc::now();
    let mut state = "no shared_state_dir: acting from our own state".to_string();
    if let Some(dir) = &cfg.daemon.shared_state_dir {
        state = "our own state is the newest".to_string();
        match shared_state::adopt_if_newer(store, dir, &cfg.state_dir).await {
            Ok(false) => tracing::info!("in charge: our own state is the newest"),
            Ok(true) => match Reconciler::new(cfg.clone(), store.clone()).await {
                Ok(mut r) => {
                    r.set_slurmdbd(reconciler.slurmdbd());
                    *reconciler = r;
                    metrics.reloaded(nodeset_names(cfg), reconciler.gce().clone());
                    if let Ok(e) = store.events(None, None, 1).await {
                        *last_event = e.last().map_or(*last_event, |e| (e.id, e.time));
                    }
                    tracing::info!(shared_state_dir = %dir.display(), "in charge: took the state the controller in charge before us left");
                    state = format!("took the shared state of {}", dir.display());
                }
                Err(e) => {
                    tracing::error!(error = %format!("{e:#}"), "cannot rebuild the reconciler on the shared state")
                }
            },
            Err(error) => {
                tracing::warn!(
                    shared_state_dir = %dir.display(), %error,
                    "in charge: cannot take the shared state; reconciling from our own"
                );
                state = format!("cannot take the shared state ({error}): acting from our own");
            }
        }
    }
    reconciler.took_charge(now);
    tracing::info!("in charge: this daemon acts from now on");
    state
}

/// Records a role change (`took_charge`, `standby`) in this daemon's event log.
async fn role_event(store: &Store, kind: EventKind, message: &str) {
    #[allow(clippy::disallowed_methods)] // an edge: when the role changed
    let now = chrono::Utc::now();
    let written = async {
        let mut tx = store.begin().await?;
        tx.add_event(now, kind.as_str(), &[], message).await?;
        tx.commit().await
    };
    if let Err(error) = written.await {
        tracing::warn!(%error, kind = kind.as_str(), "cannot record the role change");
    }
}

/// The first step of stopping: systemd hears `STOPPING=1` (sd_notify(3): "beginning its shutdown"), the
/// journal a line, and the socket takes no new client (its file goes, so a hook finds no daemon and
/// leaves its request in the inbox for the next start; clients still sending are answered "shutting
/// down").
fn begin_stopping(stopping: &CancellationToken, cfg: &Config) {
    let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Stopping]);
    tracing::info!("slurm-dws daemon stopping");
    stopping.cancel();
    let _ = std::fs::remove_file(&cfg.socket);
}

/// How often the pass loop tells systemd's watchdog it is alive: half of `WatchdogSec=` (systemd
/// passes it as `WATCHDOG_USEC` to the main process), as sd_watchdog_enabled(3) advises; `None` when
/// the unit has no watchdog.
fn watchdog_interval() -> Option<Duration> {
    let mut usec = 0;
    (sd_notify::watchdog_enabled(false, &mut usec) && usec > 0).then(|| Duration::from_micros(usec / 2))
}

/// `WATCHDOG=1`. Sent only from the pass loop (after each pass, and while it waits for the next one), so
/// a pass that hangs stops the pings and systemd restarts the daemon.
fn watchdog_ping(watchdog: Option<Duration>) {
    if watchdog.is_some() {
        let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Watchdog]);
    }
}

/// Resolves when the next ping is due while the loop waits; never without a watchdog.
async fn watchdog_tick(watchdog: Option<Duration>) {
    match watchdog {
        Some(every) => tokio::time::sleep(every).await,
        None => std::future::pending().await,
    }
}

/// Lets `work` run for up to `grace`: its output, or `None` when it was dropped unfinished.
async fn finish_within<T>(grace: Duration, work: impl Future<Output = T>) -> Option<T> {
    tracing::info!(grace_secs = grace.as_secs(), "shutdown asked during a pass: letting it finish");
    tokio::time::timeout(grace, work).await.ok()
}

/// How often the daemon prunes the history (after the first pass, then after a pass at most this often).
pub const PRUNE_EVERY: Duration = Duration::from_secs(3600);

/// Rows of each kind one pruning transaction deletes at most: a few milliseconds of write lock, so a
/// hook never waits long behind it.
pub const PRUNE_BATCH: i64 = 2000;

/// Deletes the history older than `days` (`daemon.history_days`): events, finished resize requests
/// no node points at, deleted MIGs. Nodes are never pruned: there is one per node name, not per day.
async fn prune_history(store: &Store, days: u64) {
    #[allow(clippy::disallowed_methods)] // an edge: what is old is measured from the present
    let now = chrono::Utc::now();
    let Some(before) = chrono::Duration::try_days(days as i64).and_then(|d| now.checked_sub_signed(d)) else {
        return;
    };
    match store.prune_history(before, PRUNE_BATCH).await {
        Ok(p) if p.most() > 0 => tracing::info!(
            events = p.events,
            requests = p.requests,
            migs = p.migs,
            history_days = days,
            "pruned the history older than daemon.history_days"
        ),
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "cannot prune the history; the next try is in an hour"),
    }
}

/// Removes resume-file copies and output files a killed `run-delegate` supervisor left in
/// `state_dir/delegate/` (the supervisor removes its own when the program ends).
fn prune_delegate_leftovers(state_dir: &std::path::Path) {
    #[allow(clippy::disallowed_methods)] // an edge: what is old is measured from the present
    let now = std::time::SystemTime::now();
    let Some(before) = now.checked_sub(crate::delegate::STALE_AFTER) else { return };
    let removed = crate::delegate::prune_stale(state_dir, before);
    if removed > 0 {
        tracing::info!(
            removed,
            "removed files that delegate supervisors which never finished left in state_dir/delegate"
        );
    }
}

/// The state directory's lock file, held while the daemon runs.
pub const LOCK_FILE: &str = "daemon.lock";

/// One daemon per state directory: the reconciler keeps the desired state between passes because it is
/// the only writer, so a second daemon on the same store (another socket path, a copy of the unit) is
/// refused, naming the one that holds the lock. The lock goes with the process, however it ends.
fn lock_state_dir(dir: &std::path::Path) -> Result<nix::fcntl::Flock<std::fs::File>, DaemonError> {
    use std::io::{Read, Seek, Write};
    let path = dir.join(LOCK_FILE);
    let io = |what: &'static str| {
        let path = path.clone();
        move |source: std::io::Error| DaemonError::Io { what, path, source }
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(io("opening"))?;
    match nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock) {
        Ok(mut lock) => {
            lock.set_len(0)
                .and_then(|()| lock.rewind())
                .and_then(|()| writeln!(lock, "{}", std::process::id()))
                .map_err(io("writing the pid to"))?;
            Ok(lock)
        }
        Err((mut file, nix::errno::Errno::EWOULDBLOCK)) => {
            let mut pid = String::new();
            let _ = file.read_to_string(&mut pid);
            Err(DaemonError::StateDirTaken { pid: pid.trim().to_string(), dir: dir.to_path_buf() })
        }
        Err((_, e)) => Err(io("locking")(e.into())),
    }
}

/// Keeps the copy of the config in force that hooks fall back to when the config file does not load
/// (`config::last_accepted`). Failing to write it is worth a warning, not a refusal to run.
fn save_last_accepted(cfg: &Config) {
    #[allow(clippy::disallowed_methods)] // an edge: when the daemon accepted this config
    let now = chrono::Utc::now();
    match crate::config::last_accepted::save(cfg, now) {
        Ok(path) => tracing::debug!(copy = %path.display(), "kept a copy of the config for the hooks"),
        Err(error) => tracing::warn!(
            state_dir = %cfg.state_dir.display(), %error,
            "cannot keep a copy of the config: hooks have nothing to fall back to if the config file breaks"
        ),
    }
}

fn nodeset_names(cfg: &Config) -> Vec<String> {
    cfg.nodesets.iter().map(|n| n.name.clone()).collect()
}

/// The next reload request; never, when there is no reload channel (or it closed).
async fn next_reload(reload: &mut Option<mpsc::Receiver<()>>) {
    if let Some(rx) = reload {
        if rx.recv().await.is_some() {
            return;
        }
        *reload = None;
    }
    std::future::pending::<()>().await
}

/// Re-reads the config file and, when [`reload::check`] allows it, rebuilds the reconciler from it.
/// Returns whether the new config is in force. A refused reload changes nothing.
async fn apply_reload(
    cfg: &mut Config,
    reconciler: &mut Reconciler,
    store: &Store,
    metrics: &Metrics,
) -> bool {
    let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Reloading]);
    let source = cfg.source.clone();
    let outcome = match Config::load(Some(&source)) {
        Err(e) => Err(e.first_line()),
        Ok(new) => match reload::check(cfg, &new) {
            Err(why) => Err(why),
            Ok(changes) => match Reconciler::new(new.clone(), store.clone()).await {
                Err(e) => Err(format!("{e:#}")),
                Ok(mut r) => {
                    r.set_slurmdbd(reconciler.slurmdbd());
                    *reconciler = r;
                    metrics.reloaded(nodeset_names(&new), reconciler.gce().clone());
                    *cfg = new;
                    Ok(changes)
                }
            },
        },
    };
    let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Ready]);
    match outcome {
        Ok(changes) => {
            let changes = if changes.is_empty() { "nothing".to_string() } else { changes.join(", ") };
            tracing::info!(config = %source.display(), %changes, "config reloaded (SIGHUP)");
            save_last_accepted(cfg);
            true
        }
        Err(error) => {
            metrics.reload_failed();
            tracing::error!(config = %source.display(), %error, "config reload refused; the running config stays");
            false
        }
    }
}

/// Writes the events recorded since the last one logged (`(id, time)`) to the log, one line each with
/// structured fields, so the journal (or a pipeline reading `--log-format json`) carries the same story as
/// `slurm-dws events` and can be searched by node, job, MIG or resize request. `node` is the event's
/// hostlist; `job`, `mig` and `request` come from the record of its first node as the pass left it.
/// Hooks stamp their events with their own clock, a little earlier than the pass that follows: the read
/// reaches back a minute and filters by id.
async fn log_new_events(store: &Store, last: &mut (i64, chrono::DateTime<chrono::Utc>)) {
    let since = last.1 - chrono::Duration::seconds(60);
    let events = match store.events(None, Some(since), 10_000).await {
        Ok(e) => e,
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the event log");
            return;
        }
    };
    let seen = last.0;
    let events: Vec<_> = events.into_iter().filter(|e| e.id > seen).collect();
    // The first node of each event's hostlist, and of it what the line tells (its job, MIG and
    // request), read in one statement for every event (a 10,000-node resume logs thousands).
    let firsts: Vec<Option<String>> = events
        .iter()
        .map(|e| crate::hostlist::expand(&e.nodes).ok().and_then(|n| n.into_iter().next()))
        .collect();
    let names: Vec<&str> = firsts.iter().flatten().map(String::as_str).collect();
    let nodes: HashMap<String, crate::store::NodeContext> = match store.node_contexts(&names).await {
        Ok(c) => c.into_iter().map(|c| (c.name.clone(), c)).collect(),
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the nodes of the events to log");
            HashMap::new()
        }
    };
    for (e, first) in events.iter().zip(&firsts) {
        let node = first.as_ref().and_then(|name| nodes.get(name));
        tracing::info!(
            target: "slurm_dws::event",
            kind = %e.kind,
            node = %e.nodes,
            job = node.and_then(|n| n.job_id),
            mig = node.and_then(|n| n.mig.as_deref()),
            request = node.and_then(|n| n.request.as_deref()),
            event_id = e.id,
            count = e.count,
            "{}",
            e.message
        );
        *last = (e.id, e.time.max(last.1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_pass_is_kept_when_it_ends_within_the_grace_and_dropped_at_the_grace_otherwise() {
        let second = Duration::from_secs(1);
        let started = tokio::time::Instant::now();
        let quick = async {
            tokio::time::sleep(PASS_GRACE - second).await;
            "report"
        };
        assert_eq!(finish_within(PASS_GRACE, quick).await, Some("report"));
        assert_eq!(started.elapsed(), PASS_GRACE - second);

        let started = tokio::time::Instant::now();
        let stuck = async {
            tokio::time::sleep(PASS_GRACE + second).await;
            "report"
        };
        assert_eq!(finish_within(PASS_GRACE, stuck).await, None);
        assert_eq!(started.elapsed(), PASS_GRACE, "dropped at the grace, not later");
    }
}
