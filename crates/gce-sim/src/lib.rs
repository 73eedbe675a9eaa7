//! A Compute Engine simulator: the subset of the v1 API slurm-dws uses, with DWS Flex Start semantics.
//!
//! It is a real HTTP server at `http://ADDR/compute/v1/` (see [`start`]) and an independent
//! implementation: it shares no types with the slurm-dws client (`slurm_dws::gce`), works on `serde_json::Value`
//! checked against the discovery document ([`validate_request_body`]), so a client bug cannot hide
//! behind a matching simulator bug.
//!
//! * [`state`]: the world (MIGs, resize requests, VMs, operations, reservations) and its
//!   transitions, given `now`;
//! * [`server`]: GCE paths → method ids, call counts, rate quotas, fault injection, validation,
//!   lists, pages and partial responses;
//! * [`control`]: the `/_sim/` control API tests use (capacity rules, faults, expiry, templates, ...),
//!   and [`control_reservations`] its reserved-capacity calls;
//! * [`schema`], [`filter`] and [`fields`]: the discovery document, the `filter` and `fields` parameters;
//! * [`process`]: boot and stop commands run when a VM starts or goes away.
//!
//! A ticker advances the world every [`TICK`]; it and the request handlers are the only places
//! that read the clock.
//!
//! # GCE as it really behaves
//!
//! What the simulator models beyond the happy path, and where Google's documentation is silent,
//! the choice it makes (each has a black-box test in `tests/real_gce.rs`):
//!
//! * **deleteInstances.** The discovery document describes the regional request's `instances` as
//!   URLs only ("a full URL or a partial URL, such as `zones/[ZONE]/instances/[INSTANCE_NAME]`") and
//!   the zonal one as URLs or, for queued instances, names. Accepted URLs:
//!   `https://www.googleapis.com/compute/v1/projects/P/zones/Z/instances/N` (or
//!   `https://compute.googleapis.com/...`, `beta`, `alpha`), `projects/P/zones/Z/instances/N`,
//!   `zones/Z/instances/N`. "The operation always fails if the request contains a malformed
//!   instance URL or a reference to an instance that exists in a zone or region other than the
//!   group's": the call answers 200 and its Operation ends DONE with
//!   `INVALID_FIELD_VALUE` (`Invalid value for field 'instances[i]': '...'. The URL is malformed.`,
//!   the wording GCE uses for malformed instance URLs elsewhere; HTTP 400) for a malformed URL, a
//!   bare name given to a regional MIG, a zone not in the group's distribution, another project;
//!   `skipInstancesOnValidationError` does not help. A well-formed URL of an instance that does
//!   not exist fails it with `RESOURCE_NOT_FOUND` (404), one of another group or already being
//!   deleted with `CONDITION_NOT_MET` (412), unless `skipInstancesOnValidationError` (then they are
//!   skipped). The exact codes of these Operation errors are not documented; they are assumptions.
//!   More than 1000 entries, and names mixed with URLs (zonal), are synchronous 400s.
//! * **Queued instances.** A queued instance has no VM and no URL (`listManagedInstances` shows it
//!   PENDING without `instance`). Zonal MIGs release it by name (the request shrinks; emptied, it
//!   ends CANCELLED). A regional MIG cannot name it: the route is to cancel its ACCEPTED resize
//!   request ("Cancelled resize request no longer waits for the resources to be provisioned"),
//!   which drops all its queued instances and lowers targetSize; the members still wanted are asked
//!   for again in a new request (requests are all-or-nothing, none of it was created). Cancel is
//!   refused (`CONDITION_NOT_MET`) once the request's VMs are being created.
//! * **Failed Operations and requestId.** An operation fault rule makes a mutation's Operation end
//!   DONE with `error.errors[]` and `httpErrorStatusCode` without acting. A repeated `requestId`
//!   returns the original Operation as it is now, failed ones included, and never acts twice, for
//!   the retention window: Compute's reference gives no figure; Google's APIs that document the
//!   same field say "at least 60 minutes after the first request", so the default is 3600 s.
//! * **Unreachable zones.** `instances.aggregatedList` answers a partial success: the zone's scope
//!   is `{"warning": {"code": "UNREACHABLE", "message", "data": [{"key": "scope", "value":
//!   "zones/Z"}]}}` with no instances, and `unreachables` lists `zones/Z` (on every page; the entry
//!   format of `unreachables` is undocumented, `zones/Z` is an assumption). The v1 document of
//!   revision 20261106 still recommends `returnPartialSuccess` in its descriptions but declares no
//!   such parameter on any method, so it is refused like any unknown parameter (400); a control
//!   option makes the whole list fail with 503 instead, the other shape a client must survive.
//!   Zonal calls into the zone answer 503. What GCE answers for `listManagedInstances` of a
//!   regional MIG whose VMs are in that zone is not documented: the simulator fails it (503), the
//!   conservative choice, and `deleteInstances` of such a MIG too.
//! * **VM lifecycle.** VMs are created together when their request gets capacity, PROVISIONING,
//!   then STAGING, then RUNNING (control API durations); the boot command runs at RUNNING and the
//!   request turns SUCCEEDED when all its VMs are RUNNING. A host failure puts a VM in TERMINATED
//!   and runs the stop command; `instanceLifecyclePolicy.defaultActionOnFailure: DO_NOTHING` means
//!   "MIG does not repair a failed VM" (discovery document), so it stays TERMINATED (shown so by
//!   `instances.*` and `listManagedInstances`, currentAction NONE) until deleted; any other policy
//!   (REPAIR is GCE's default) recreates it. At the end of the run duration a VM is deleted, or
//!   TERMINATED if its template says `instanceTerminationAction: STOP`.
//! * **Templates.** VMs take `machineType`, `labels` and `scheduling` from their MIG's template
//!   (loaded through the control API; an unloaded URL stands for a FLEX_START template).
//!   `instanceTemplates.get` / `regionInstanceTemplates.get` of a template never loaded is a 404
//!   unless the control API says to serve defaults. A template without `provisioningModel` or
//!   with STANDARD gives STANDARD VMs (reference/GCE.md: "must be explicit, or VMs come up
//!   STANDARD"); SPOT templates make a resize request insert fail with a 400 naming
//!   `scheduling.provisioningModel` (an assumption: Google's pages say resize requests use
//!   flex-start or reservation-bound VMs and no spot, but give no error). RESERVATION_BOUND
//!   templates consume a reservation (below).
//! * **createInstances and spot VMs** (`state/create.rs` says each choice): VMs made by name from
//!   the MIG's template, with no run duration; the call is DONE at once and the instances show
//!   CREATING in `listManagedInstances` until made. A capacity rule's `fail` leaves them CREATING
//!   with the error in `lastAttempt.errors` (GCE retries as long as the instance is wanted; the
//!   documentation says to read the creation's outcome from `listManagedInstances`); `hold` keeps
//!   them CREATING. A FLEX_START template (or an unloaded one) is refused: an assumption, Flex Start
//!   VMs come through resize requests. A name already in the group or the project's zones fails
//!   the Operation with `RESOURCE_ALREADY_EXISTS` (the code is an assumption). A preempted SPOT VM
//!   (control API) is deleted when its template says `instanceTerminationAction: DELETE`, and
//!   stays TERMINATED with STOP; a `DO_NOTHING` MIG neither recreates nor forgets a deleted one:
//!   the member stays, with no VM (its URL, `currentAction` NONE, no `instanceStatus`), and counts
//!   in `targetSize` until `deleteInstances` names it or the MIG is deleted (an assumption from
//!   "MIG does not repair a failed VM", as an independent strict fake and users of slurm-gcp saw
//!   it). A Flex VM at the end of its run duration leaves its MIG (targetSize drops).
//! * **Reserved capacity** (`tests/reservations.rs`; `state/reservation.rs`,
//!   `state/future_reservation.rs`, `state/consume.rs`; GCE paths in `server_reservations`, the
//!   control calls in [`control_reservations`]). Reservations (zonal, with optional blocks and
//!   sub-blocks) and calendar-mode future reservations are booked through the control API and read
//!   through `reservations.get/list/aggregatedList`, `reservationBlocks.get/list`,
//!   `reservationSubBlocks.get/list` and `futureReservations.get/list/aggregatedList`. A template
//!   whose `reservationAffinity` is SPECIFIC_RESERVATION (key
//!   `compute.googleapis.com/reservation-name`, one value: `R`, `projects/P/reservations/R`, or
//!   `.../reservationBlocks/B[/reservationSubBlocks/S]`) consumes it: its VMs count in `inUseCount`
//!   of the reservation, block and sub-block, and show
//!   `resourceStatus.reservationConsumptionInfo` (and, in a reservation with blocks,
//!   `physicalHostTopology` matching the block's `physicalTopology`). RESERVATION_BOUND requires
//!   such an affinity (400 at insert, an assumption) and makes `requestedRunDuration` optional
//!   (the VMs run until the reservation ends). A resize request gets all its units at once, waits
//!   whole (ACCEPTED, `lastAttempt` `CONDITION_NOT_MET` "Specified reservation 'R' does not have
//!   available resources for the request.") while fewer are free, and fails when it asks for more
//!   than the reservation holds (an assumption), when the reservation does not exist in the zone
//!   ("Specified reservation 'R' does not exist.", unless a future reservation will deliver it:
//!   then it waits for the window), is DELETING ("Cannot insert instance to a reservation with
//!   status: ..., as it requires reservation to be in READY state."; CREATING / UPDATING wait with
//!   that message) or has another machine type ("No available resources in specified
//!   reservations 'R'"). `createInstances` names are judged one by one, and wait with the error in
//!   `lastAttempt` (GCE retries). A calendar window opens at `timeWindow.startTime` (the
//!   reservation is delivered READY with `count` = `totalCount`; the future reservation turns
//!   FULFILLED) and closes at `endTime`: GCE deletes the reservation and every VM on it, and the
//!   VMs leave their MIG (targetSize drops, as at the end of a Flex VM's run duration). A
//!   reservation's `deleteAtTime` (or the control API's delete) ends it the same way, except that
//!   STANDARD VMs on an ordinary reservation stay and consume nothing. Window times given in
//!   simulated seconds pass `time_scale` times faster.
//! * A reservation-bound VM (its template `provisioningModel: RESERVATION_BOUND`, with the
//!   specific reservation affinity above) is the kind `reportHostAsFaulty` takes.
//! * **instances.reportHostAsFaulty** (`state/faulty_host.rs`): only for a RUNNING
//!   RESERVATION_BOUND VM, `disruptionSchedule` IMMEDIATE and a fault reason with a behaviour;
//!   any other VM is refused with a 400 `INSTANCES_WITHOUT_RESERVATION_NOT_SUPPORTED` (the code is
//!   GCE's; the message is the simulator's), a VM not RUNNING with `INSTANCE_SHOULD_BE_RUNNING`,
//!   a second report while one runs with `FAILED_WITH_UNEXPECTED_STATUS`. The VM shows REPAIRING for `host_repair_ms` (what ran on it stops), moves
//!   to another free host of its zone (its `physicalHostTopology` changes), then STAGING and
//!   RUNNING (it boots again); the Operation is DONE when it runs.
//! * **Cloud Billing catalog** (`billing.rs`, `tests/billing.rs`): `/v1/services` and
//!   `/v1/services/{id}/skus` with the Compute Engine SKUs of the machine types below.
//! * **machineTypes.get** serves a3-ultragpu-8g, a3-highgpu-8g, a2-highgpu-1g, g2-standard-4 and
//!   n2-standard-4 with their published vCPUs, memory and GPUs; others are 404.
//! * **advice.capacity** (`tests/advice.rs`; `state/advice.rs`). The body is checked against
//!   `CapacityAdviceRequest`, and beyond the schema: `size` >= 1, a provisioning model, at least one
//!   instance selection, each with a machine type, and `distributionPolicy.zones` given as
//!   `zones/Z`, `projects/P/zones/Z` or the full URL, all in the path's region (400 naming the
//!   field; requiring the provisioning model and the zones is an assumption, the document marks
//!   nothing required). Scores come from the control API (default 0.5, at most 0.05 in a stockout);
//!   the answer is one recommendation, as the document says ("Initially the API will provide one
//!   recommendation"): the best-scoring zones for the first machine type of the lowest-rank
//!   selection, `size` split over them (ANY, BALANCED) or all in the first (ANY_SINGLE_ZONE); no
//!   `estimatedUptime` (preemption rates are not modelled). It counts as a read request.
//! * **Rate quotas.** Per project, GCE's "read requests" (get, list, aggregatedList,
//!   listManagedInstances, operation waits) and "write requests" (mutations) groups, counted in
//!   synchronized windows (a minute by default: GCE refills "at the start of the next synchronized
//!   interval"); over a quota a call answers 403 `rateLimitExceeded`, domain `usageLimits`, status
//!   PERMISSION_DENIED. Unlimited unless the control API sets them.
//! * **Partial responses.** `fields` (Google's syntax: `a,b`, `a/b`, `a(b,c)`, `*`) is honoured on
//!   every method and checked against the response schema: an unknown field or a map key named
//!   literally is a 400 `invalidParameter` ("Invalid field selection ..."). A client that selects
//!   `items/*/instances(...)` must also select `items/*/warning` and `unreachables` to see a
//!   partial answer.
//! * **Scale.** Lists page by key and render only the page, gets touch only their resource, and
//!   the ticker looks at VMs only when one has something due: `tests/scale.rs` runs 10,000 VMs in
//!   1,000 MIGs with 2,000 queued requests.

// Test rig: the simulator's ticker and handlers play GCE's own clock, in real time.
#![allow(clippy::disallowed_methods)]

pub mod billing;
pub mod control;
pub mod control_reservations;
pub mod error;
pub mod fields;
pub mod filter;
pub mod process;
pub mod schema;
pub mod server;
mod server_reservations;
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
    /// Run when a VM that had booted goes away: deleted (by `deleteInstances`, a MIG delete, the
    /// end of its run duration) or TERMINATED (a host failure).
    pub stop_cmd: Option<String>,
    /// Run durations pass this many times faster: a VM's termination time is creation +
    /// run duration / time_scale, in real time. Capacity delays, operation latencies and the VM
    /// lifecycle (PROVISIONING, STAGING) are not scaled.
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
    /// The Cloud Billing catalog's switches and counters (`billing.rs`).
    billing: billing::Billing,
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
        billing: billing::Billing::default(),
    });
    let app: Router =
        control::routes().merge(billing::routes()).fallback(server::api).with_state(shared.clone());
    let cancel = CancellationToken::new();
    let server = tokio::spawn({
        let cancel = cancel.clone();
        async move {
            let serve =
                axum::serve(listener, app.into_make_service_with_connect_info::<std::net::SocketAddr>())
                    .with_graceful_shutdown(cancel.cancelled_owned());
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
