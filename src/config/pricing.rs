//! `[pricing]`: the price of one VM-hour by machine type and provisioning model, for the usage
//! report's estimated cost (`slurm-dws usage`).

use std::collections::BTreeMap;

use super::ProvisioningModel;

/// `[pricing]`, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pricing {
    /// ISO 4217 code the prices are in (`USD`).
    pub currency: String,
    /// Read list prices from Cloud Billing's Catalog API (cached in `state_dir` by the daemon);
    /// entries of `per_hour` win over them.
    pub catalog: bool,
    /// Machine type (bare name, `a3-ultragpu-8g`) → its prices.
    pub per_hour: BTreeMap<String, MachinePrices>,
}

impl Default for Pricing {
    fn default() -> Self {
        Pricing { currency: DEFAULT_CURRENCY.to_string(), catalog: false, per_hour: BTreeMap::new() }
    }
}

/// `[pricing] currency` when unset.
pub const DEFAULT_CURRENCY: &str = "USD";

/// One machine type's price of a VM-hour per provisioning model; `None` = not configured.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MachinePrices {
    pub flex: Option<HourPrice>,
    pub spot: Option<HourPrice>,
    pub standard: Option<HourPrice>,
    pub reservation: Option<HourPrice>,
}

impl MachinePrices {
    /// The price for `model`.
    pub fn get(&self, model: ProvisioningModel) -> Option<HourPrice> {
        match model {
            ProvisioningModel::Flex => self.flex,
            ProvisioningModel::Spot => self.spot,
            ProvisioningModel::Standard => self.standard,
            ProvisioningModel::Reservation => self.reservation,
        }
    }
}

/// The price of one VM-hour: finite and not negative (so equality is plain equality).
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct HourPrice(f64);

impl Eq for HourPrice {}

impl HourPrice {
    /// `Some` for a finite price ≥ 0.
    pub fn new(v: f64) -> Option<HourPrice> {
        (v.is_finite() && v >= 0.0).then_some(HourPrice(v + 0.0))
    }

    pub fn get(self) -> f64 {
        self.0
    }
}

/// Whether `s` can be a machine type's name (`a3-ultragpu-8g`, `n2-custom-8-32768`): lowercase
/// letters, digits and hyphens, starting with a letter.
pub fn is_machine_type(s: &str) -> bool {
    s.len() <= 63
        && s.starts_with(|c: char| c.is_ascii_lowercase())
        && !s.ends_with('-')
        && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// Whether `s` is an ISO 4217 currency code: three capital letters.
pub fn is_currency(s: &str) -> bool {
    s.len() == 3 && s.chars().all(|c| c.is_ascii_uppercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prices_are_finite_and_not_negative() {
        for (v, ok) in [
            (0.0, true),
            (40.5, true),
            (-0.0, true),
            (-1.0, false),
            (f64::NAN, false),
            (f64::INFINITY, false),
        ] {
            assert_eq!(HourPrice::new(v).is_some(), ok, "{v}");
        }
        assert_eq!(HourPrice::new(-0.0).unwrap().get().to_bits(), 0.0f64.to_bits());
    }

    #[test]
    fn names() {
        for (s, ok) in [
            ("a3-ultragpu-8g", true),
            ("n2-custom-8-32768", true),
            ("A3", false),
            ("a3-", false),
            ("", false),
            ("3a", false),
        ] {
            assert_eq!(is_machine_type(s), ok, "{s}");
        }
        for (s, ok) in [("USD", true), ("EUR", true), ("usd", false), ("US", false), ("USDX", false)] {
            assert_eq!(is_currency(s), ok, "{s}");
        }
    }
}
