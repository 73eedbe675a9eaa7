//! The reconciler's edge to GCE: observations in, planner steps out, through the typed client.
//!
//! Observation per pass is bounded, whatever the cluster size: one paginated `regionInstanceGroupManagers
//! .list`, one paginated `instances.aggregatedList` (500 a page), and a `resizeRequests.get` of each
//! request the poll schedule says is due (`poll.rs`). Finished requests are never polled again. Every
//! read asks only for the fields a pass uses (`fields=`, docs/gce-facts.md "Partial responses"). The
//! request bodies follow docs/gce-facts.md ("Resize requests", "MIGs").
//!
//! Nothing here holds a pass longer than about `gcp.request_timeout` ([`step_budget`]): the reconciler's
//! client ends each call, retries included, within it, and [`send`] waits for a step's Operation only
//! until then. An Operation still running is carried to the next pass, which resends the same
//! `requestId` (GCE answers with the same Operation) or sees the result in its lists.
//!
//! # Files
//! | file            | one job                                                                        |
//! |-----------------|--------------------------------------------------------------------------------|
//! | `reads.rs`      | the VM list, the MIG lists, a resize request's `get`, into observations        |
//! | `sends.rs`      | a step's outbox record and request body, and the call ([`send`])               |
//! | `answers.rs`    | what GCE's answer means for a step: [`StepResult`] ([`judge`], pure)           |
//! | `inflight.rs`   | steps still running after a short wait, across passes (no call holds a pass)  |
//! | `step_retry.rs` | when a failed step may be sent again, with a new requestId (pure)             |
//! | `poll.rs`       | which resize requests a pass polls (pure)                                      |
//! | `advice.rs`     | capacity advice: a new MIG's zone(s)                                           |
//! | `policies.rs`   | workload policies: bodies, URLs, the region's owned policies observed         |
//! | `vm_create.rs`  | standard and spot groups: `createInstances`, managed instances                |
//! | `regions.rs`    | a region whose MIG list failed: its MIGs carried as last seen                 |
//! | `templates.rs`  | each nodeset's instance template judged against its provisioning model        |
//! | `reserved.rs`   | each reservation nodeset's reservation: counts, window, why it is unusable     |
//!
//! The edge answers the pass: it takes the planner's vocabulary (`types`) and returns what GCE
//! said; it never imports a phase of the pass (`tests/architecture.rs` keeps it so).

pub mod advice;
pub mod answers;
pub mod inflight;
pub mod policies;
pub mod poll;
pub mod reads;
pub mod regions;
pub mod reserved;
pub mod sends;
pub mod step_retry;
pub mod templates;
pub mod vm_create;

pub use answers::{judge, StepResult};
pub use reads::{
    mig_list_regions, mig_region, observe_migs, observe_migs_in, observe_request, observe_vms, request_state,
    MigLists, MIG_LIST_FIELDS, REQUEST_FIELDS, VM_LIST_FIELDS,
};
pub use sends::{intent, mig_body, mig_mismatch, rr_body, rr_mismatch, send, step_region, SendError};

use crate::config::Config;
use crate::gce::{self, GceError};
use std::time::Duration;

/// The most one GCE call (its retries included) or one step (its call and the wait for its Operation)
/// may hold a pass: `gcp.request_timeout`. GCE's operations for our calls finish in seconds; one still
/// running after this is left to GCE: the step is carried (its outbox entry stays pending with the
/// same requestId), and the next pass resends it or looks at the resource itself (a MIG or resize
/// request exists from its insert on, so the pass after goes on with the next step). A longer wait
/// would hold every other step of the daemon — suspends, expiries, other nodesets — behind one stuck
/// call or operation (`tests/gce_faults.rs`, `tests/bounded_passes.rs`).
pub fn step_budget(cfg: &Config) -> Duration {
    Duration::from_secs(cfg.gcp.request_timeout.max(1))
}

/// The client for the configured endpoint and credentials.
pub fn client(cfg: &Config) -> Result<gce::Client, GceError> {
    let opts = gce::ClientOptions {
        endpoint: cfg.gcp.endpoint.clone(),
        project: cfg.gcp.project.clone(),
        calls_per_minute: cfg.gcp.calls_per_minute,
        reads_per_minute: cfg.gcp.read_calls_per_minute,
        writes_per_minute: cfg.gcp.write_calls_per_minute,
        request_timeout: Duration::from_secs(cfg.gcp.request_timeout),
        retry_deadline: Duration::from_secs(cfg.gcp.retry_deadline),
    };
    gce::Client::new(opts, cfg.gcp.credentials.clone())
}
