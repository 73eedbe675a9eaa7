//! `ReconcileError`: what can stop a pass (or the reconciler's start) before it is done.
//!
//! A pass does not fail as a whole because GCE or Slurm did not answer: those failures are in its
//! report and the next pass decides again. What stops it is the store (the desired state cannot be
//! read or written, so nothing may be decided from it) or a step that cannot even be written down.

use crate::gce::GceError;
use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The GCE client could not be built from the config (endpoint, credentials).
    #[error(transparent)]
    Gce(#[from] GceError),
    /// A step names a request group that is not in the desired state any more.
    #[error("request {0} vanished")]
    RequestVanished(i64),
    /// A request group's nodeset is no longer in the config, so its MIG cannot be described.
    #[error("nodeset {0} is no longer configured")]
    NodesetGone(String),
    /// A step's outbox payload could not be encoded.
    #[error("encoding the outbox payload: {0}")]
    Payload(#[from] serde_json::Error),
}
