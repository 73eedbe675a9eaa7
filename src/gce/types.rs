//! Compute Engine v1 resources as they travel on the wire (the subset slurm-dws reads and sends).
//!
//! Every field name and type here was checked against the Compute v1 discovery document (which
//! revision, and where to get it: docs/gce-facts.md; the simulator validates against its trimmed
//! copy, `crates/gce-sim/data/compute.v1.trimmed.json`).
//! The rules that keep these types honest against a real GCE:
//! - camelCase on the wire, and `#[serde(default)]` on every struct: GCE omits empty fields.
//! - int64/uint64 fields are JSON strings on the wire (`requestedRunDuration.seconds`); int32
//!   fields (`targetSize`, `httpErrorStatusCode`) are numbers. [`int64_string`] reads either.
//! - Enum-valued fields are `String`s, except the two state machines callers branch on
//!   ([`OperationStatus`], [`ResizeRequestState`]), which keep an `Unknown` catch-all: GCE adds
//!   values over time (beta's `PROVISIONING`), and an unknown value must never fail a whole list.
//! - Output-only and empty fields are skipped on serialization, so a request body carries only
//!   what the caller set (the simulator rejects unknown or misspelt fields).
//!
//! One file per kind of resource, all re-exported here and from `gce`:
//! `wire.rs` (int64 strings, timestamps, durations), `operation_types.rs`, `mig_types.rs` (MIGs and
//! their managed instances), `resize_types.rs`, `instance_types.rs` (VMs, metadata, scheduling),
//! `list_types.rs` (pages, warnings, unreachable zones) and `template_types.rs`.

pub use super::instance_types::*;
pub use super::list_types::*;
pub use super::mig_types::*;
pub use super::operation_types::*;
pub use super::resize_types::*;
pub use super::template_types::*;
pub use super::wire::{int64_string, last_segment, parse_timestamp, GceDuration};

#[cfg(test)]
#[path = "types_tests.rs"]
mod tests;
