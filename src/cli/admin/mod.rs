//! The admin commands: `status`, `nodes`, `requests`, `migs`, `events`, `explain`, `usage`, `gc`, `reconcile`.
//!
//! Read-only commands read the store directly when the caller may open it, so they work whether or not
//! the daemon runs (and say so), else through the daemon ([`Source`]: members of `daemon.readers`);
//! `gc` and `reconcile` change things and go through the daemon's socket, where the peer is checked.
//! Listings build one JSON record per row, whose keys are the `--json` fields (docs/json.md); the
//! table, `-o/--format` and `--sort` are made from the same records by [`table::print`].
//!
//! One file per command: `status.rs`, `explain.rs`, the listings in `listings.rs`, `gc` and
//! `reconcile` in `ask_daemon.rs`; what they share (the clock read, the store opened, JSON) is here.

mod ask_daemon;
mod explain;
mod listings;
mod repair;
mod status;
mod usage;

pub use ask_daemon::ask_daemon;
pub use explain::explain;
pub use listings::{
    events, migs, nodes, parse_since, parse_time, requests, EVENT_FIELDS, MIG_FIELDS, NODE_FIELDS,
    REQUEST_FIELDS, SUMMARY_FIELDS,
};
pub use repair::repair;
pub use status::status;
pub use usage::{usage, Format as UsageFormat, ESTIMATE};

use super::source::Source;
use super::table::{self, rfc3339, Field, Listing};
use super::CliError;
use crate::config::Config;
use crate::model::Event;
use crate::reconcile::PassReport;
use chrono::{DateTime, Utc};
use serde_json::{json, Value};

/// The time the report is made for: a command's output is read now, so the CLI reads the clock once
/// per command and hands it down.
#[allow(clippy::disallowed_methods)] // an edge: an admin command reports the present
fn now() -> DateTime<Utc> {
    Utc::now()
}

async fn open(cfg: &Config) -> Result<Source, CliError> {
    Source::open(cfg).await
}

fn rt(e: impl std::fmt::Display) -> CliError {
    CliError::runtime(e.to_string())
}

fn print(what: &str, fields: &[Field], records: Vec<Value>, l: &Listing) -> Result<String, CliError> {
    table::print(what, fields, records, l, now()).map_err(CliError::usage)
}

fn check(what: &str, fields: &[Field], l: &Listing) -> Result<(), CliError> {
    table::check(what, fields, l).map_err(CliError::usage)
}

fn to_json(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default() + "\n"
}

/// An event as `events --json` and `explain --json` print it.
fn event_json(e: &Event) -> Value {
    json!({"time": rfc3339(e.time), "kind": e.kind, "nodes": e.nodes, "count": e.count, "message": e.message})
}

fn trigger_name(p: &PassReport) -> String {
    serde_json::to_value(p.trigger).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
}
