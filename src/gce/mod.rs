//! The typed Compute Engine client: auth, retries with backoff, rate limit, pagination.
//!
//! This is the only module that talks to GCE. Its pieces, one concern each:
//!
//! | file           | job                                                                  |
//! |----------------|----------------------------------------------------------------------|
//! | `types.rs`     | the API resources on the wire (checked against the discovery doc): the |
//! |                | rules, and the re-exports of the six files below                     |
//! | `wire.rs`      | int64 strings, GCE timestamps, durations, URL segments               |
//! | `operation_types.rs` | long-running operations and their errors                       |
//! | `mig_types.rs` | MIGs, their managed instances, `deleteInstances`                     |
//! | `resize_types.rs` | MIG resize requests (DWS Flex Start)                              |
//! | `instance_types.rs` | VMs, and the metadata and scheduling templates share            |
//! | `list_types.rs` | list pages, warnings, zones an aggregated list did not see          |
//! | `template_types.rs` | instance templates and machine types on the wire                |
//! | `error.rs`     | [`GceError`] with full detail, and [`ErrorClass`] for callers        |
//! | `auth.rs`      | [`Credentials`] → [`TokenSource`]; metadata server; secrets redacted |
//! | `retry.rs`     | exponential backoff with full jitter, `Retry-After`                  |
//! | `ratelimit.rs` | the token bucket shared by all calls of a [`Client`]                 |
//! | `client.rs`    | [`Client`]: send, authenticate, retry, classify, count               |
//! | `endpoints.rs` | one method per API call; pagination; [`Client::wait_done`]           |
//! | `template_check.rs` | whether an instance template can work for DWS Flex Start        |
//! | `reservations.rs` | reservations, blocks, future reservations (read only)            |
//! | `node_shape.rs` | CPUs, RealMemory, Gres, Features of a nodeset from its template     |
//!
//! Callers branch on [`GceError::class`], never on message text. A mutation's `request_id` is
//! chosen and persisted by the caller first, so a retry — by this client after a timeout, or
//! by the next reconcile pass after a crash — reaches GCE as the same request.

pub mod advice;
pub mod auth;
pub mod client;
pub mod create;
pub mod endpoints;
pub mod error;
mod instance_types;
mod lean_pages;
pub mod lean_vms;
mod list_types;
mod mig_types;
pub mod node_shape;
mod operation_types;
pub mod placement_rules;
pub mod policies;
pub mod policy_error;
pub mod ratelimit;
pub mod reservations;
mod resize_types;
pub mod retry;
pub mod template_check;
pub mod template_models;
pub mod template_region;
pub mod template_types;
pub mod types;
mod wire;

pub use advice::{CapacityAdviceRequest, CapacityAdviceResponse};
pub use auth::{AccessToken, Credentials, MetadataServer, StaticToken, TokenFuture, TokenSource};
pub use client::{Client, ClientOptions, Location, MethodStats};
pub use create::{CreateInstancesRequest, PerInstanceConfig, MAX_CREATE_INSTANCES};
pub use endpoints::{OperationScope, MAX_DELETE_INSTANCES};
pub use error::{
    classify_code, classify_errors, classify_http, classify_operation, ApiError, ErrorClass, ErrorReason,
    GceError, OperationFailed,
};
pub use lean_pages::VmRecall;
pub use lean_vms::LeanVm;
pub use node_shape::{node_shape, read_node_shape, shape_of_template, NodeShape, ShapeError};
pub use policies::{ResourcePolicy, WorkloadPolicy};
pub use policy_error::PolicyFailure;
pub use ratelimit::CallKind;
pub use retry::Backoff;
pub use template_check::{check_flex_template, flex_template_problems, TemplateProblem};
pub use template_models::{check_template, read_and_check_template, template_problems};
pub use template_region::template_region_problems;
pub use types::*;
