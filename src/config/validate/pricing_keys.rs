//! `[pricing]` as `validate` resolves it: the currency, and every price of `[pricing.per_hour]`
//! (finite, not negative) with its key and line.

use super::{get, Checker};
use crate::config::pricing::{
    is_currency, is_machine_type, HourPrice, MachinePrices, Pricing, DEFAULT_CURRENCY,
};
use crate::config::raw::{RawMachinePrices, RawPricing, Val};

pub(super) fn resolve_pricing(ck: &mut Checker, p: RawPricing) -> Pricing {
    let currency = get(&p.currency, DEFAULT_CURRENCY.to_string());
    if !is_currency(&currency) {
        ck.bad(
            "pricing.currency",
            &p.currency,
            format!("{currency:?} must be an ISO 4217 code of three capital letters, e.g. \"USD\""),
        );
    }
    let catalog = get(&p.catalog, false);
    let mut per_hour = std::collections::BTreeMap::new();
    for (machine_type, raw) in p.per_hour.unwrap_or_default() {
        let key = format!("pricing.per_hour.{machine_type}");
        if !is_machine_type(&machine_type) {
            let first =
                [&raw.flex, &raw.spot, &raw.standard, &raw.reservation].into_iter().find(|v| v.is_some());
            ck.bad(
                &key,
                first.unwrap_or(&None),
                format!("{machine_type:?} is not a machine type's name (e.g. \"a3-ultragpu-8g\")"),
            );
        }
        let RawMachinePrices { flex, spot, standard, reservation } = raw;
        let mut price = |model: &str, v: &Val<f64>| -> Option<HourPrice> {
            let x = *v.as_ref()?.get_ref();
            let p = HourPrice::new(x);
            if p.is_none() {
                ck.bad(&format!("{key}.{model}"), v, format!("{x} must be a finite price of at least 0"));
            }
            p
        };
        let prices = MachinePrices {
            flex: price("flex", &flex),
            spot: price("spot", &spot),
            standard: price("standard", &standard),
            reservation: price("reservation", &reservation),
        };
        per_hour.insert(machine_type, prices);
    }
    Pricing { currency, catalog, per_hour }
}
