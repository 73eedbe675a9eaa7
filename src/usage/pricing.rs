//! The prices the usage report multiplies hours by: `[pricing.per_hour]` from the config, then
//! (`[pricing] catalog = true`) the list prices the daemon cached from Cloud Billing's Catalog API
//! ([`super::CATALOG_CACHE`] in `state_dir`). An entry of the config wins; every price knows where
//! it came from, so every figure can say which price it used.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};

use super::CatalogPrices;
use crate::config::{Pricing, ProvisioningModel};

/// Where one price came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PriceSource {
    /// `[pricing.per_hour]` in the config.
    Config,
    /// The Catalog API's list price, fetched at this time.
    Catalog { fetched_at: DateTime<Utc> },
}

/// The price of one VM-hour and where it came from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Price {
    pub per_hour: f64,
    pub source: PriceSource,
}

/// What became of the catalog's prices.
#[derive(Debug, Clone, PartialEq)]
pub enum CatalogState {
    /// `[pricing] catalog = false`.
    NotAsked,
    /// Read: list prices of this date (`prices` of them) back the config's.
    Used { fetched_at: DateTime<Utc>, prices: usize },
    /// `catalog = true` but the daemon has not cached any yet.
    Missing { path: PathBuf },
    /// The cache exists but could not be read or parsed.
    Unreadable { path: PathBuf, why: String },
    /// The cached prices are in another currency than `[pricing] currency`: not used.
    OtherCurrency { fetched_at: DateTime<Utc>, currency: String },
}

/// Every price known, by machine type and provisioning model (as the config spells it).
#[derive(Debug, Clone, PartialEq)]
pub struct PriceBook {
    pub currency: String,
    prices: BTreeMap<(String, String), Price>,
    pub catalog: CatalogState,
}

impl PriceBook {
    /// The config's prices over the catalog's (`catalog`: what reading the cache gave, or
    /// `Err(state)` saying why there are none). Pure.
    pub fn new(pricing: &Pricing, catalog: Result<&CatalogPrices, CatalogState>) -> PriceBook {
        let mut prices = BTreeMap::new();
        let state = match catalog {
            Err(state) => state,
            Ok(c) if c.currency != pricing.currency => {
                CatalogState::OtherCurrency { fetched_at: c.fetched_at, currency: c.currency.clone() }
            }
            Ok(c) => {
                let mut n = 0;
                for (machine_type, models) in &c.per_hour {
                    for (model, &per_hour) in models {
                        // The cache is the daemon's, but a price that makes no sense is left out.
                        if per_hour.is_finite() && per_hour >= 0.0 {
                            let source = PriceSource::Catalog { fetched_at: c.fetched_at };
                            prices.insert((machine_type.clone(), model.clone()), Price { per_hour, source });
                            n += 1;
                        }
                    }
                }
                CatalogState::Used { fetched_at: c.fetched_at, prices: n }
            }
        };
        for (machine_type, p) in &pricing.per_hour {
            for model in ProvisioningModel::ALL {
                if let Some(price) = p.get(model) {
                    let price = Price { per_hour: price.get(), source: PriceSource::Config };
                    prices.insert((machine_type.clone(), model.as_str().to_string()), price);
                }
            }
        }
        PriceBook { currency: pricing.currency.clone(), prices, catalog: state }
    }

    /// [`PriceBook::new`] with the catalog read from `state_dir` when the config asks for it.
    pub fn load(pricing: &Pricing, state_dir: &Path) -> PriceBook {
        if !pricing.catalog {
            return PriceBook::new(pricing, Err(CatalogState::NotAsked));
        }
        match read_catalog(&state_dir.join(super::CATALOG_CACHE)) {
            Ok(c) => PriceBook::new(pricing, Ok(&c)),
            Err(state) => PriceBook::new(pricing, Err(state)),
        }
    }

    /// The price of one VM-hour of `machine_type` in `model`, if known.
    pub fn price(&self, machine_type: &str, model: &str) -> Option<Price> {
        // A lookup per VM: the key is built once per call, on a map of a few dozen entries.
        self.prices.get(&(machine_type.to_string(), model.to_string())).copied()
    }

    /// Every price, by (machine type, model).
    pub fn prices(&self) -> &BTreeMap<(String, String), Price> {
        &self.prices
    }

    /// What the catalog gave, for people.
    pub fn catalog_line(&self) -> String {
        let date = |t: &DateTime<Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        match &self.catalog {
            CatalogState::NotAsked => "catalog prices: not used ([pricing] catalog = false)".into(),
            CatalogState::Used { fetched_at, prices } => {
                format!("catalog prices: {prices} list prices fetched {}", date(fetched_at))
            }
            CatalogState::Missing { path } => {
                format!(
                    "catalog prices: none ({} does not exist yet: the daemon fetches them)",
                    path.display()
                )
            }
            CatalogState::Unreadable { path, why } => {
                format!("catalog prices: none ({} cannot be read: {why})", path.display())
            }
            CatalogState::OtherCurrency { fetched_at, currency } => format!(
                "catalog prices: not used (fetched {} in {currency}, the config's currency is {})",
                date(fetched_at),
                self.currency
            ),
        }
    }
}

/// The catalog cache in `state_dir` as the daemon sends it to a reader: `None` when there is none,
/// `Err` with why when it cannot be read.
pub fn read_catalog_for_reader(state_dir: &Path) -> Option<Result<CatalogPrices, String>> {
    match read_catalog(&state_dir.join(super::CATALOG_CACHE)) {
        Ok(c) => Some(Ok(c)),
        Err(CatalogState::Missing { .. }) => None,
        Err(CatalogState::Unreadable { why, .. }) => Some(Err(why)),
        Err(other) => Some(Err(format!("{other:?}"))),
    }
}

/// What a reader was sent ([`read_catalog_for_reader`]), as [`read_catalog`] says it.
pub fn catalog_from_reader(
    state_dir: &Path,
    sent: Option<Result<CatalogPrices, String>>,
) -> Result<CatalogPrices, CatalogState> {
    let path = state_dir.join(super::CATALOG_CACHE);
    match sent {
        None => Err(CatalogState::Missing { path }),
        Some(Err(why)) => Err(CatalogState::Unreadable { path, why }),
        Some(Ok(c)) => Ok(c),
    }
}

/// Reads the cached catalog prices; why there are none otherwise.
pub fn read_catalog(path: &Path) -> Result<CatalogPrices, CatalogState> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(CatalogState::Missing { path: path.to_path_buf() })
        }
        Err(e) => return Err(CatalogState::Unreadable { path: path.to_path_buf(), why: e.to_string() }),
    };
    serde_json::from_str(&text)
        .map_err(|e| CatalogState::Unreadable { path: path.to_path_buf(), why: e.to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{HourPrice, MachinePrices};

    fn pricing(catalog: bool) -> Pricing {
        let mut p = Pricing { catalog, ..Pricing::default() };
        p.per_hour.insert(
            "a3-ultragpu-8g".into(),
            MachinePrices { flex: HourPrice::new(40.0), spot: HourPrice::new(30.0), ..Default::default() },
        );
        p
    }

    fn catalog(currency: &str) -> CatalogPrices {
        let mut per_hour: BTreeMap<String, BTreeMap<String, f64>> = BTreeMap::new();
        per_hour.entry("a3-ultragpu-8g".into()).or_default().insert("flex".into(), 44.0);
        per_hour.entry("a3-ultragpu-8g".into()).or_default().insert("standard".into(), 88.0);
        per_hour.entry("g2-standard-4".into()).or_default().insert("spot".into(), f64::NAN);
        CatalogPrices {
            fetched_at: "2026-11-20T00:00:00Z".parse().unwrap(),
            currency: currency.into(),
            per_hour,
        }
    }

    #[test]
    fn the_config_wins_over_the_catalog_and_each_price_knows_its_source() {
        let c = catalog("USD");
        let book = PriceBook::new(&pricing(true), Ok(&c));
        let at = c.fetched_at;
        for (mt, model, want) in [
            ("a3-ultragpu-8g", "flex", Some((40.0, PriceSource::Config))),
            ("a3-ultragpu-8g", "spot", Some((30.0, PriceSource::Config))),
            ("a3-ultragpu-8g", "standard", Some((88.0, PriceSource::Catalog { fetched_at: at }))),
            ("a3-ultragpu-8g", "reservation", None),
            ("g2-standard-4", "spot", None), // not a number: left out
        ] {
            assert_eq!(book.price(mt, model).map(|p| (p.per_hour, p.source)), want, "{mt} {model}");
        }
        assert_eq!(book.catalog, CatalogState::Used { fetched_at: at, prices: 2 });
        // Another currency: the catalog is not used at all.
        let book = PriceBook::new(&pricing(true), Ok(&catalog("EUR")));
        assert_eq!(book.price("a3-ultragpu-8g", "standard"), None);
        assert!(book.catalog_line().contains("in EUR"), "{}", book.catalog_line());
    }

    #[test]
    fn a_missing_or_unreadable_cache_means_no_catalog_prices_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let book = PriceBook::load(&pricing(true), dir.path());
        assert!(matches!(book.catalog, CatalogState::Missing { .. }));
        assert!(book.catalog_line().contains("does not exist"));
        assert_eq!(book.price("a3-ultragpu-8g", "flex").map(|p| p.per_hour), Some(40.0));
        std::fs::write(dir.path().join(super::super::CATALOG_CACHE), "{not json").unwrap();
        let book = PriceBook::load(&pricing(true), dir.path());
        assert!(matches!(book.catalog, CatalogState::Unreadable { .. }), "{:?}", book.catalog);
        let mut c = catalog("USD");
        c.per_hour.remove("g2-standard-4");
        std::fs::write(dir.path().join(super::super::CATALOG_CACHE), serde_json::to_string(&c).unwrap())
            .unwrap();
        let book = PriceBook::load(&pricing(true), dir.path());
        assert_eq!(book.price("a3-ultragpu-8g", "standard").map(|p| p.per_hour), Some(88.0));
        // catalog = false: the file is not read.
        let book = PriceBook::load(&pricing(false), dir.path());
        assert_eq!((book.price("a3-ultragpu-8g", "standard"), book.catalog), (None, CatalogState::NotAsked));
    }
}
