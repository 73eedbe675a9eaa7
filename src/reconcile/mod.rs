//! One reconcile pass: observe the hooks' inbox, GCE and Slurm; plan (pure); commit; execute; report.
//!
//! # Design notes
//! - A pass takes no input, even when the caller thinks it knows what changed: it reads the inbox, the
//!   store, GCE and Slurm, and compares. Hooks only make the next pass come sooner.
//! - Passes never overlap (one task runs them); a hook during a pass is picked up by the next.
//! - A pass does not retry inside itself: a step that fails is recorded and the next pass decides again.
//! - No call holds a pass: a GCE step that has not answered within `inflight::STEP_WAIT` stays in
//!   flight in the background, and the first pass after its answer records it; meanwhile no pass
//!   sends it again.
//!   Within one pass the planner may run a few rounds, so that what one step achieved (a MIG now exists)
//!   lets the next step (its resize request) go out in the same pass; a step is never sent twice in a pass.
//! - Every GCE mutation is written to the outbox with its `requestId` before it is sent; a crash between
//!   the two re-sends the same requestId, which GCE answers with the original Operation.
//! - Planning is a pure function of (desired, observed, now) with table tests (`plan/`).
//! - The desired state kept in memory between passes changes only through a [`ChangeSet`] that is
//!   written to the store and applied to memory by one function (`commit.rs`).
//!
//! # Files
//! | file            | one job                                                                     |
//! |-----------------|-----------------------------------------------------------------------------|
//! | `reconciler.rs` | the [`Reconciler`]: keeps the desired state, sequences the pass's halves    |
//! | `observe.rs`    | the first half: inbox, GCE and Slurm, into an [`Observation`]               |
//! | `ingest.rs`     | hook calls → per-node desired state (pure)                                  |
//! | `plan/`         | the planner, one file per rule family (pure, table-tested)                  |
//! | `commit.rs`     | [`ChangeSet`]s: written to the store and applied to the kept state          |
//! | `execute.rs`    | GCE steps sent and judged (Done / Retry / Refused / Moot), Slurm steps run  |
//! | `inflight.rs`   | GCE steps still running after a short wait, across passes (no call holds one) |
//! | `report.rs`     | the pass report and the gc report                                           |
//! | `step_retry.rs` | when a failed GCE step may be sent again, with a new requestId (pure)      |
//! | `gce_edge.rs`   | GCE's answers → observations, steps → request bodies and calls              |
//! | `policies.rs`   | workload policies: owned names, bodies, the region's owned policies observed |
//! | `vm_create.rs`  | the same for standard and spot groups: `createInstances`, managed instances |
//! | `types.rs`      | the planner's inputs and outputs                                            |
//! | `error.rs`      | [`ReconcileError`]                                                          |

mod commit;
mod error;
mod execute;
pub mod gce_edge;
pub mod ingest;
mod observe;
pub mod plan;
mod reconciler;
mod report;
pub mod slurm_edge;
pub mod types;

pub use commit::ChangeSet;
pub use error::ReconcileError;
pub use gce_edge::inflight::{InFlightCall, STEP_WAIT};
pub use gce_edge::{judge, StepResult};
pub use observe::{Observation, PollCounts};
pub use reconciler::{Reconciler, MAX_ROUNDS};
pub use report::{
    gc_items, next_pass_in, GcItem, GcItemKind, GcReport, PassOutcome, PassPhases, PassReport, StepReport,
    Trigger,
};
pub use types::*;

/// `SLURM_DWS_BENCH_BASELINE=1` in the daemon's environment: a pass reads Slurm's nodes with every
/// field, decodes every reservation whole and every listed VM into a whole `Instance`, and skips no
/// read (no inbox-first pass, no MIG list reused), as before issue 20, so that `make bench` can
/// measure the baseline beside the current figures in the same run. Not for production use.
pub(crate) fn bench_baseline() -> bool {
    static BASELINE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *BASELINE.get_or_init(|| std::env::var_os("SLURM_DWS_BENCH_BASELINE").is_some_and(|v| v == "1"))
}
