//! A Compute Engine simulator: the subset of the v1 API slurm-dws uses, with DWS Flex Start semantics.
//!
//! It is a real HTTP server at `http://ADDR/compute/v1/` (see [`start`]) and an independent
//! implementation: it shares no types with the slurm-dws client (`slurm_dws::gce`), works on `serde_json::Value`
//! checked against the discovery document ([`validate_request_body`]), so a client bug cannot hide
//! behind a matching simulator bug.
//!
//! * [`state`]: the world (MIGs, resize requests, VMs, operations) and its transitions, given `now`;
//! * [`server`]: GCE paths → method ids, call counts, fault injection, validation, lists and pages;
//! * [`control`]: the `/_sim/` control API tests use (capacity rules, faults, expiry, templates);
//! * [`schema`] and [`filter`]: the discovery document and the `filter` parameter;
//! * [`process`]: boot and stop commands run when a VM starts or is deleted.
//!
//! A ticker advances the world every [`TICK`]; it and the request handlers are the only places
//! that read the clock.

// Test rig: the simulator's ticker and handlers play GCE's own clock, in real time.
#![allow(clippy::disallowed_methods)]

pub mod control;
pub mod error;
pub mod fields;
pub mod filter;
pub mod process;
pub mod schema;
pub mod server;
pub mod state;

pub use schema::validate_request_body;

use axum::Router;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// How often requests, deletions and expiries advance.
pub const TICK: Duration = Duration::from_millis(50);

/// How to run the simulator.
#[derive(Debug, Clone)]
pub struct SimOptions {
    /// Where to listen; port 0 picks a free port (see [`SimHandle::addr`]).
    pub listen: SocketAddr,
    /// Run when a VM becomes RUNNING; `{name}` is replaced by the VM name.
    pub boot_cmd: Option<String>,
    /// Run when a VM is deleted (by `deleteInstances`, a MIG delete, or the end of its run duration).
    pub stop_cmd: Option<String>,
    /// Run durations pass this many times faster: a VM's termination time is creation +
    /// run duration / time_scale, in real time. Capacity delays and operation latencies are not scaled.
    pub time_scale: f64,
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            boot_cmd: None,
            stop_cmd: None,
            time_scale: 1.0,
        }
    }
}

/// What the handlers and the ticker share: the one state and the commands to run.
pub struct Shared {
    state: Mutex<state::State>,
    boot_cmd: Option<String>,
    stop_cmd: Option<String>,
}

impl Shared {
    /// Locks the state; a panic in another holder does not make the simulator unusable.
    fn lock(&self) -> MutexGuard<'_, state::State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Carries out effects (outside the lock).
    fn run_effects(&self, effects: Vec<state::Effect>) {
        for effect in effects {
            let (cmd, vm) = match &effect {
                state::Effect::Boot(vm) => (&self.boot_cmd, vm),
                state::Effect::Stop(vm) => (&self.stop_cmd, vm),
            };
            tracing::info!(?effect, "vm");
            if let Some(cmd) = cmd {
                process::spawn_detached(cmd, vm);
            }
        }
    }
}

/// A running simulator.
pub struct SimHandle {
    addr: SocketAddr,
    cancel: CancellationToken,
    server: JoinHandle<()>,
    ticker: JoinHandle<()>,
}

impl SimHandle {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The API endpoint, `http://ADDR/compute/v1/` (what `gcp.endpoint` is set to).
    pub fn base_url(&self) -> String {
        format!("http://{}{}", self.addr, server::PREFIX)
    }

    /// Stops the ticker and the server; in-flight requests get a moment to finish.
    pub async fn shutdown(self) {
        self.cancel.cancel();
        let _ = self.ticker.await;
        let mut server = self.server;
        if tokio::time::timeout(Duration::from_secs(3), &mut server).await.is_err() {
            server.abort();
        }
    }
}

/// Binds `opts.listen`, spawns the server and the ticker, and returns at once.
pub async fn start(opts: SimOptions) -> std::io::Result<SimHandle> {
    if !(opts.time_scale.is_finite() && opts.time_scale > 0.0) {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "time_scale must be > 0"));
    }
    let listener = tokio::net::TcpListener::bind(opts.listen).await?;
    let addr = listener.local_addr()?;
    let shared = Arc::new(Shared {
        state: Mutex::new(state::State::new(opts.time_scale)),
        boot_cmd: opts.boot_cmd,
        stop_cmd: opts.stop_cmd,
    });
    let app: Router = control::routes().fallback(server::api).with_state(shared.clone());
    let cancel = CancellationToken::new();
    let server = tokio::spawn({
        let cancel = cancel.clone();
        async move {
            let serve = axum::serve(listener, app).with_graceful_shutdown(cancel.cancelled_owned());
            if let Err(e) = serve.await {
                tracing::error!(error = %e, "simulator server failed");
            }
        }
    });
    let ticker = tokio::spawn(tick_loop(shared, cancel.clone()));
    tracing::info!(%addr, "simulator listening");
    Ok(SimHandle { addr, cancel, server, ticker })
}

async fn tick_loop(shared: Arc<Shared>, cancel: CancellationToken) {
    let mut interval = tokio::time::interval(TICK);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = interval.tick() => {
                let effects = shared.lock().tick(chrono::Utc::now());
                shared.run_effects(effects);
            }
        }
    }
}
