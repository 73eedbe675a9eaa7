//! The daemon's catalog prices: `state_dir/catalog-prices.json` ([`crate::usage::CATALOG_CACHE`]),
//! fetched at start (unless the file is younger than a day, in the currency asked for, and prices
//! every machine type) and then once a day, outside the pass loop. A failure keeps the file as it
//! was, logs one WARN with Google's words (and only debug lines while it keeps failing), and is tried
//! again an hour later; no failure here ever reaches a pass.

use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio_util::sync::CancellationToken;

use super::client::{BillingClient, BillingOptions};
use super::error::BillingError;
use super::prices::{catalog_prices, sku_model, Machine};
use crate::gce::{self, Client as GceClient, Credentials};
use crate::usage::{CatalogPrices, CATALOG_CACHE};

/// How often the prices are fetched again.
pub const REFRESH_EVERY: Duration = Duration::from_secs(24 * 3600);
/// How soon a failed refresh is tried again.
pub const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(3600);
/// The most one refresh may take, every call and retry included.
pub const REFRESH_BUDGET: Duration = Duration::from_secs(300);
/// The catalog's name of the service whose SKUs price VMs.
pub const COMPUTE_SERVICE: &str = "Compute Engine";

/// Where a nodeset's VMs come from, for pricing: its instance template and a zone and the region
/// its VMs run in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodesetSource {
    pub name: String,
    /// Relative or full URL of a global or regional instance template.
    pub instance_template: String,
    /// A zone of the nodeset, where `machineTypes.get` is asked.
    pub zone: String,
    pub region: String,
}

/// What the refresher needs, as plain values: the lead's `[pricing]` config gives `currency`, the
/// `[gcp]` table the endpoint and credentials, `state_dir` and the nodesets the rest.
#[derive(Debug, Clone)]
pub struct CatalogSettings {
    /// ISO 4217 (`USD`).
    pub currency: String,
    pub billing: BillingOptions,
    pub credentials: Credentials,
    pub state_dir: PathBuf,
    pub nodesets: Vec<NodesetSource>,
}

impl CatalogSettings {
    /// The settings of a daemon with `cfg`, prices in `currency`: the Catalog API's endpoint goes
    /// with `gcp.endpoint` ([`super::endpoint_for`]), its timeouts are `gcp.request_timeout` and
    /// `gcp.retry_deadline`, a nodeset is priced in its first zone.
    pub fn from_config(cfg: &crate::config::Config, currency: &str) -> Self {
        CatalogSettings {
            currency: currency.to_string(),
            billing: BillingOptions::new(
                &super::endpoint_for(&cfg.gcp.endpoint),
                Duration::from_secs(cfg.gcp.request_timeout.max(1)),
                Duration::from_secs(cfg.gcp.retry_deadline),
            ),
            credentials: cfg.gcp.credentials.clone(),
            state_dir: cfg.state_dir.clone(),
            nodesets: cfg
                .nodesets
                .iter()
                .filter_map(|n| {
                    Some(NodesetSource {
                        name: n.name.clone(),
                        instance_template: n.instance_template.clone(),
                        zone: n.zones.first()?.clone(),
                        region: n.region.clone(),
                    })
                })
                .collect(),
        }
    }
}

/// Why a refresh did not write the file.
#[derive(Debug)]
pub enum CatalogError {
    /// The Catalog API failed.
    Billing(BillingError),
    /// No nodeset's machine type could be read from GCE.
    MachineTypes(Vec<String>),
    /// The catalog prices none of the machine types (the file is not replaced by an empty one).
    NoPrices { machine_types: Vec<String> },
    /// Writing the file failed.
    Write { path: PathBuf, error: std::io::Error },
}

impl std::fmt::Display for CatalogError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CatalogError::Billing(e) => write!(f, "{e}"),
            CatalogError::MachineTypes(problems) => {
                write!(f, "no nodeset's machine type could be read: {}", problems.join("; "))
            }
            CatalogError::NoPrices { machine_types } => {
                write!(
                    f,
                    "the Cloud Billing catalog prices none of the machine types {}",
                    machine_types.join(", ")
                )
            }
            CatalogError::Write { path, error } => write!(f, "writing {}: {error}", path.display()),
        }
    }
}

impl std::error::Error for CatalogError {}

/// The cached prices in `state_dir`, `None` when there is no file yet.
pub fn read_cache(state_dir: &Path) -> Result<Option<CatalogPrices>, String> {
    let path = state_dir.join(CATALOG_CACHE);
    match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| format!("{}: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// Writes `prices` to `state_dir/catalog-prices.json` atomically: a reader sees the old file or the
/// new one, never a part.
pub fn write_cache(state_dir: &Path, prices: &CatalogPrices) -> Result<PathBuf, CatalogError> {
    use std::io::Write;
    let path = state_dir.join(CATALOG_CACHE);
    let tmp = state_dir.join(format!(".{CATALOG_CACHE}.tmp"));
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&serde_json::to_vec_pretty(prices).map_err(std::io::Error::other)?)?;
        f.write_all(b"\n")?;
        f.sync_all()?;
        std::fs::rename(&tmp, &path)
    };
    write().map_err(|error| {
        let _ = std::fs::remove_file(&tmp);
        CatalogError::Write { path: path.clone(), error }
    })?;
    Ok(path)
}

/// Whether the cache should be fetched again at start: none yet, another currency, a day old, or a
/// machine type it has no price of.
pub fn due(
    cache: Option<&CatalogPrices>,
    currency: &str,
    machine_types: &[String],
    now: DateTime<Utc>,
) -> bool {
    let Some(c) = cache else { return true };
    let age = now.signed_duration_since(c.fetched_at);
    c.currency != currency
        || age >= chrono::Duration::from_std(REFRESH_EVERY).unwrap_or(chrono::TimeDelta::MAX)
        || age < chrono::TimeDelta::zero()
        || machine_types.iter().any(|m| !c.per_hour.contains_key(m))
}

/// The machine types of the nodesets (`instanceTemplates.get`, `machineTypes.get`), with the GPUs
/// the template attaches when the machine type has none (N1); and what could not be read.
pub async fn read_machines(gce: &GceClient, nodesets: &[NodesetSource]) -> (Vec<Machine>, Vec<String>) {
    let mut machines: Vec<Machine> = Vec::new();
    let mut problems = Vec::new();
    for n in nodesets {
        let template = match gce.get_instance_template_ref(&n.instance_template).await {
            Ok(t) => t,
            Err(e) => {
                problems.push(format!("nodeset {}: reading its instance template: {e}", n.name));
                continue;
            }
        };
        let Some(name) = gce::node_shape::template_machine_type(&template).map(str::to_string) else {
            problems.push(format!("nodeset {}: its instance template sets no machine type", n.name));
            continue;
        };
        if machines.iter().any(|m| m.name == name && m.region == n.region) {
            continue;
        }
        let mt = match gce.get_machine_type(&n.zone, &name).await {
            Ok(m) => m,
            Err(e) => {
                problems.push(format!("nodeset {}: reading machine type {name} in {}: {e}", n.name, n.zone));
                continue;
            }
        };
        let mut gpus: Vec<(String, u32)> = mt
            .accelerators
            .iter()
            .map(|a| (a.guest_accelerator_type.clone(), a.guest_accelerator_count))
            .collect();
        if gpus.is_empty() {
            let attached =
                template.properties.as_ref().map(|p| p.guest_accelerators.as_slice()).unwrap_or_default();
            gpus = attached
                .iter()
                .filter_map(|a| {
                    let kind = a.get("acceleratorType")?.as_str()?;
                    let count = u32::try_from(a.get("acceleratorCount")?.as_u64()?).ok()?;
                    Some((gce::last_segment(kind).to_string(), count))
                })
                .collect();
        }
        machines.push(Machine {
            name,
            region: n.region.clone(),
            guest_cpus: mt.guest_cpus,
            memory_mb: mt.memory_mb,
            gpus,
        });
    }
    (machines, problems)
}

/// One refresh: the machine types from GCE, Compute Engine's SKUs of their regions from the
/// catalog, the prices written to the cache. The problems of single nodesets come back with the
/// prices (the others are priced).
pub async fn refresh(
    billing: &BillingClient,
    gce: &GceClient,
    settings: &CatalogSettings,
    now: DateTime<Utc>,
) -> Result<(CatalogPrices, Vec<String>), CatalogError> {
    let (machines, problems) = read_machines(gce, &settings.nodesets).await;
    if machines.is_empty() {
        return Err(CatalogError::MachineTypes(problems));
    }
    let service = billing.service_id(COMPUTE_SERVICE).await.map_err(CatalogError::Billing)?;
    let regions: Vec<&str> = machines.iter().map(|m| m.region.as_str()).collect();
    let skus = billing
        .list_skus(&service, &settings.currency, |s| {
            s.category.resource_family == "Compute"
                && s.service_regions.iter().any(|r| regions.contains(&r.as_str()))
                && sku_model(s).is_some()
        })
        .await
        .map_err(CatalogError::Billing)?;
    let prices = catalog_prices(&skus, &machines, &settings.currency, now);
    if prices.per_hour.is_empty() {
        let mut machine_types: Vec<String> = machines.into_iter().map(|m| m.name).collect();
        machine_types.dedup();
        return Err(CatalogError::NoPrices { machine_types });
    }
    write_cache(&settings.state_dir, &prices)?;
    Ok((prices, problems))
}

/// The daemon's refresher: fetches when [`due`] at start, then every [`REFRESH_EVERY`] (an hour
/// after a failure), until `stop`. Each refresh is bounded by [`REFRESH_BUDGET`].
pub async fn run(settings: CatalogSettings, gce: GceClient, stop: CancellationToken) {
    let billing = match BillingClient::new(settings.billing.clone(), &settings.credentials) {
        Ok(b) => b,
        Err(e) => {
            tracing::warn!(error = %e, "[pricing] catalog: cannot make a Cloud Billing client; no catalog prices");
            return;
        }
    };
    let mut failing = false;
    let mut first = true;
    loop {
        // An edge: the refresher's own clock, for the prices' date and the cache's age.
        #[allow(clippy::disallowed_methods)]
        let now = Utc::now();
        let wait = if first && !start_due(&settings, &gce, now).await {
            REFRESH_EVERY
        } else {
            let outcome = tokio::time::timeout(REFRESH_BUDGET, refresh(&billing, &gce, &settings, now)).await;
            match outcome {
                Ok(Ok((prices, problems))) => {
                    tracing::info!(
                        machine_types = prices.per_hour.len(),
                        currency = %prices.currency,
                        file = %settings.state_dir.join(CATALOG_CACHE).display(),
                        "catalog prices fetched from Cloud Billing"
                    );
                    for p in problems {
                        tracing::warn!(problem = %p, "[pricing] catalog: a nodeset could not be priced");
                    }
                    failing = false;
                    REFRESH_EVERY
                }
                Ok(Err(error)) => {
                    report_failure(&mut failing, &error.to_string());
                    RETRY_AFTER_FAILURE
                }
                Err(_) => {
                    let why = format!("the refresh took longer than {} s", REFRESH_BUDGET.as_secs());
                    report_failure(&mut failing, &why);
                    RETRY_AFTER_FAILURE
                }
            }
        };
        first = false;
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(wait) => {}
        }
    }
}

/// At start: whether the cache should be fetched now (the machine types are read to know).
async fn start_due(settings: &CatalogSettings, gce: &GceClient, now: DateTime<Utc>) -> bool {
    let cache = match read_cache(&settings.state_dir) {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(error = %e, "[pricing] catalog: the cached prices cannot be read; fetching them again");
            None
        }
    };
    if cache.is_none() {
        return true;
    }
    let (machines, _) = read_machines(gce, &settings.nodesets).await;
    let names: Vec<String> = machines.into_iter().map(|m| m.name).collect();
    due(cache.as_ref(), &settings.currency, &names, now)
}

/// One WARN for the first failure of a streak; debug lines for the next ones.
fn report_failure(failing: &mut bool, error: &str) {
    if *failing {
        tracing::debug!(%error, "catalog prices: Cloud Billing still fails; the cached prices stay");
    } else {
        tracing::warn!(
            %error,
            retry_in_secs = RETRY_AFTER_FAILURE.as_secs(),
            "catalog prices could not be fetched from Cloud Billing; the cached prices (if any) stay"
        );
    }
    *failing = true;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn the_cache_is_fetched_again_when_missing_old_foreign_or_incomplete() {
        let mut per_hour = std::collections::BTreeMap::new();
        per_hour.insert("a3-highgpu-8g".to_string(), [("flex".to_string(), 37.7)].into_iter().collect());
        let c = CatalogPrices { fetched_at: at("2026-03-01T00:00:00Z"), currency: "USD".into(), per_hour };
        let a3 = ["a3-highgpu-8g".to_string()];
        let both = ["a3-highgpu-8g".to_string(), "n2-standard-4".to_string()];
        type Case<'a> = (Option<&'a CatalogPrices>, &'a str, &'a [String], &'a str, bool);
        let cases: &[Case<'_>] = &[
            (None, "USD", &a3, "2026-03-01T01:00:00Z", true),
            (Some(&c), "USD", &a3, "2026-03-01T23:59:00Z", false),
            (Some(&c), "USD", &a3, "2026-03-02T00:00:00Z", true),
            (Some(&c), "EUR", &a3, "2026-03-01T01:00:00Z", true),
            (Some(&c), "USD", &both, "2026-03-01T01:00:00Z", true),
            // A date in the future (a clock set back): fetch.
            (Some(&c), "USD", &a3, "2026-02-28T00:00:00Z", true),
        ];
        for (i, (cache, currency, mts, now, want)) in cases.iter().enumerate() {
            assert_eq!(due(*cache, currency, mts, at(now)), *want, "case {i}");
        }
    }

    #[test]
    fn the_cache_is_written_whole_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        assert!(read_cache(dir.path()).unwrap().is_none());
        let c = CatalogPrices {
            fetched_at: at("2026-03-01T00:00:00Z"),
            currency: "USD".into(),
            per_hour: [("n2-standard-4".to_string(), [("standard".to_string(), 0.19)].into_iter().collect())]
                .into_iter()
                .collect(),
        };
        let path = write_cache(dir.path(), &c).unwrap();
        assert_eq!(path, dir.path().join(CATALOG_CACHE));
        assert_eq!(read_cache(dir.path()).unwrap(), Some(c));
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, [std::ffi::OsString::from(CATALOG_CACHE)], "no temporary file left");
        std::fs::write(&path, b"{not json").unwrap();
        assert!(read_cache(dir.path()).unwrap_err().contains(CATALOG_CACHE));
        let gone = dir.path().join("missing");
        let err = write_cache(
            &gone,
            &CatalogPrices {
                fetched_at: at("2026-03-01T00:00:00Z"),
                currency: "USD".into(),
                per_hour: Default::default(),
            },
        )
        .unwrap_err();
        assert!(err.to_string().contains("missing"), "{err}");
    }
}
