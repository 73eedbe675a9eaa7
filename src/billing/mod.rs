//! Cloud Billing's Catalog API: Google's public list prices, turned into the price of one VM-hour
//! per machine type and provisioning model, and cached in `state_dir` for `slurm-dws usage`.
//!
//! | file           | job                                                                   |
//! |----------------|-----------------------------------------------------------------------|
//! | `types.rs`     | services and SKUs on the wire (the fields slurm-dws reads)            |
//! | `error.rs`     | [`BillingError`], with Google's words                                 |
//! | `client.rs`    | [`BillingClient`]: auth, timeouts, retries, bounded paging            |
//! | `prices.rs`    | pure: SKUs + machine types + regions → [`crate::usage::CatalogPrices`] |
//! | `refresh.rs`   | the daemon's refresh of `state_dir/catalog-prices.json`               |

pub mod client;
pub mod error;
pub mod prices;
pub mod refresh;
pub mod types;

pub use client::{endpoint_for, BillingClient, BillingOptions, DEFAULT_ENDPOINT};
pub use error::BillingError;
pub use prices::{catalog_prices, Machine};
pub use types::{Service, Sku};
