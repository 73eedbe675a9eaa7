//! One reconcile pass: observe the hooks' inbox, GCE and Slurm; plan (pure); commit; execute; report.
//!
//! # Design notes
//! - A pass takes no input, even when the caller thinks it knows what changed: it reads the inbox, the
//!   store, GCE and Slurm, and compares. Hooks only make the next pass come sooner.
//! - Passes never overlap (one task runs them); a hook during a pass is picked up by the next.
//! - A pass does not retry inside itself: a step that fails is recorded and the next pass decides again.
//! - No call holds a pass: a GCE step that has not answered within `gce_edge::inflight::STEP_WAIT` stays in
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
//! # The rooms
//! The folder reads top-down as a pass runs. At the top, the sequencing: the phases of a pass.
//! Below it, `plan/`, pure. Beside it, one folder per external system, the edges: they answer the
//! pass (take the planner's vocabulary, return what GCE or Slurm said) and never import a phase.
//! `tests/architecture.rs` keeps it so: `plan/` takes only `types`, the model and the config (no
//! I/O, no clock); `types` imports no edge; no edge imports a phase or the other edge; no two files
//! import each other; no production file passes 800 lines.
//!
//! | room                   | one job                                                              |
//! |------------------------|----------------------------------------------------------------------|
//! | `reconciler/`          | the [`Reconciler`]: keeps the desired state, sequences a pass (`mod.rs`) and its rounds (`rounds.rs`) |
//! | `observe.rs`           | phase 1: inbox, GCE and Slurm, into an [`Observation`]               |
//! | `ingest.rs`            | phase 2: hook calls → per-node desired state (pure)                  |
//! | `plan/`                | phase 3: the planner, one file per rule (pure, table-tested)         |
//! | `commit.rs`            | phase 4: [`ChangeSet`]s written to the store and applied to the kept state |
//! | `execute.rs`           | phase 5: a round's steps sent through the edges, their answers recorded |
//! | `report.rs`            | phase 6: the pass report and the gc report                           |
//! | `types.rs`, `error.rs` | the planner's vocabulary (inputs, outputs), [`ReconcileError`]       |
//! | `gce_edge/`            | GCE: what a pass reads and sends, answers judged, calls in flight, retries, polls, advice, policies, created VMs, regions, templates |
//! | `slurm_edge/`          | Slurm: node updates, reservations, AdminComments, the topology file  |
//!
//! # Where a new capability goes
//! A capability of the reconciler (reservations, maintenance, repair, …) is a rule in `plan/` (a
//! file of its own with its table test, called from [`plan::plan`] in its place in the order), the
//! words it needs in `types.rs` (a new [`GceStep`] or [`SlurmStep`], a field of [`Observed`]), and
//! what it needs at each edge: a read in `gce_edge/reads.rs` or a Slurm read in `observe.rs`, a call
//! in `gce_edge/sends.rs` or a file in `slurm_edge/`. The phases carry it without knowing it: observe
//! fills the field, commit records the steps, execute hands them to their edge. `plan/mod.rs` lists
//! the rules in their order.

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
    capacity_line, gc_items, next_pass_in, GcItem, GcItemKind, GcReport, PassOutcome, PassPhases, PassReport,
    StepReport, Trigger, UsageCount,
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
