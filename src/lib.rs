//! slurm-dws: Slurm power-saving hooks and a daemon that provision nodes through
//! Google Compute Engine Dynamic Workload Scheduler (DWS) Flex Start, and standard and spot VMs
//! through the same regional MIGs (`provisioning_model`).
//!
//! # Map of the modules
//!
//! | module        | one job                                                                  |
//! |---------------|--------------------------------------------------------------------------|
//! | [`hostlist`]  | Slurm hostlist expressions: expand and compress exactly as Slurm does    |
//! | [`config`]    | the TOML config: search order, validation, defaults, slurm.conf lines    |
//! | [`naming`]    | node names ↔ (nodeset, index); MIG / resize-request names; ownership     |
//! | [`store`]     | SQLite: nodes, resize requests, MIGs, outbox, events. All SQL lives here |
//! | [`gce`]       | the typed Compute Engine client (auth, retries, rate limit, pagination)  |
//! | `json_stream` | large JSON documents an array element at a time; recalls of unchanged elements |
//! | [`slurm`]     | talking to Slurm: version, resume file, node view, `squeue --json`, `scontrol` |
//! | [`protocol`]  | the Unix-socket request/response shared by hooks, CLI and daemon         |
//! | [`hook`]      | `resume` / `suspend` / `resume-fail`: record durably, wake the daemon    |
//! | [`delegate`]  | hand a hook's nodes that are not ours to another program, detached      |
//! | [`hook_io`]   | what hooks and the delegate supervisor share: their clock, a bounded read, the hook log |
//! | [`daemon`]    | the long-running service: socket server, pass loop, reload, shutdown    |
//! | [`metrics`]   | Prometheus text exposition of the store's counts and the daemon's activity |
//! | [`reconcile`] | one reconcile pass: its phases (observe, plan, commit, execute, report), `plan/` pure, the GCE and Slurm edges in `gce_edge/` and `slurm_edge/` |
//! | [`cli`]       | argument parsing and the admin commands' output                          |
//! | [`slurm_gcp`] | `import-slurm-gcp`: slurm-gcp v6's config.yaml as a slurm-dws config     |
//! | [`syslog`]    | one line to `/dev/log` when a hook fails or runs on the fallback config   |
//! | [`topology`]  | the Slurm topology file from GCE's physical host topology (`[slurm] topology`) |
//! | [`usage`]     | usage and cost: VM and job spans, the report by job, user, account, nodeset, model |
//!
//! The layout is kept by `tests/architecture.rs`, which reads the source: no import loop between
//! files, `reconcile/plan/` pure, the edges never importing a phase of the pass, no production file
//! over 800 lines (docs/architecture.md, "The rooms of the reconciler").
//!
//! # The path of a resume, from hook to GCE
//!
//! 1. slurmctld runs `slurm-dws-resume HOSTLIST`. [`hook`] validates the hostlist, reads
//!    `SLURM_RESUME_FILE`, appends one row to the store's inbox (one SQLite commit) and pokes
//!    the daemon's socket. Exit 0 means the request is durable.
//! 2. The [`daemon`] (one per state directory, the only writer of the desired state) wakes a
//!    [`reconcile`] pass. The pass observes the inbox, GCE (one MIG list, one instance list, a
//!    get of each request in flight that is due, cut after 2 s) and Slurm, ingests the inbox into the per-node desired state it kept
//!    from the last pass, and plans. When the last full observation is fresh, the hook's pass
//!    plans on it instead (inbox-first: Slurm unknown, nothing deleted as stale; its report says
//!    which reads it skipped) and a full pass follows at once.
//! 3. Planning is a pure function of (desired, observed, now). Its steps that mutate GCE are
//!    written to the outbox with their `requestId` before they are sent by [`gce`], so a crash
//!    at any point resumes the same mutation instead of making a second one. No call holds a
//!    pass: a step not answered within [`reconcile::STEP_WAIT`] (2 s) goes on in the background,
//!    no pass sends it again meanwhile, and the first pass after its answer records it.

pub mod billing;
pub mod capacity_advice;
pub mod cli;
pub mod config;
pub mod daemon;
pub mod delegate;
pub mod gce;
pub mod hook;
pub mod hook_io;
pub mod hostlist;
mod json_stream;
pub mod metrics;
pub mod model;
pub mod naming;
pub mod protocol;
pub mod reconcile;
pub mod slurm;
pub mod slurm_gcp;
pub mod store;
pub mod syslog;
pub mod topology;
pub mod usage;
pub mod waiting;
