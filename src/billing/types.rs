//! The Cloud Billing Catalog API's resources on the wire (`services.list`, `services.skus.list`), only
//! the fields slurm-dws reads; the rest of each answer is skipped while it is decoded.
//!
//! Field names and meanings as Google's reference gives them
//! (<https://cloud.google.com/billing/docs/reference/rest/v1/services.skus/list>): a SKU's
//! `category.usageType` (`OnDemand`, `Preemptible`, `Commit1Yr`, ...), `serviceRegions` (region
//! names), `pricingInfo[].pricingExpression.usageUnit` (`h`, `GiBy.h`, ...) and `tieredRates[].unitPrice`
//! (a `google.type.Money`: `units` is an int64 sent as a string, `nanos` an int32).

use serde::{Deserialize, Deserializer, Serialize};

/// A public service of the catalog (`services.list`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Service {
    /// `services/6F81-5844-456A`.
    pub name: String,
    /// `6F81-5844-456A`.
    pub service_id: String,
    /// `Compute Engine`.
    pub display_name: String,
}

/// One page of `services.list`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ServicesPage {
    pub services: Vec<Service>,
    pub next_page_token: String,
}

/// One page of `services.skus.list`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SkusPage {
    pub skus: Vec<Sku>,
    pub next_page_token: String,
}

/// A SKU: one thing Google bills, with its list price.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Sku {
    pub sku_id: String,
    /// `A3 Instance Core running in Americas`, `Nvidia H100 80GB GPU attached to Spot Preemptible VMs
    /// running in Americas`, `DWS Defined Duration A3 Ram running in Americas`.
    pub description: String,
    pub category: Category,
    /// The regions the SKU is sold in (`us-central1`).
    pub service_regions: Vec<String>,
    /// The price over time; without `startTime`/`endTime` in the request, the current one.
    pub pricing_info: Vec<PricingInfo>,
}

/// Where a SKU sits in Google's hierarchy.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Category {
    /// `Compute`, `Storage`, `Network`, ...
    pub resource_family: String,
    /// `CPU`, `RAM`, `GPU`, `N1Standard`, ...
    pub resource_group: String,
    /// `OnDemand`, `Preemptible`, `Commit1Mo`, `Commit1Yr`, ...
    pub usage_type: String,
}

/// A SKU's price from `effective_time` on.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PricingInfo {
    /// RFC 3339.
    pub effective_time: String,
    pub pricing_expression: PricingExpression,
}

/// How usage turns into cost: `usageUnit` and the price of each tier of usage.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PricingExpression {
    /// `h` (an hour of a vCPU or GPU), `GiBy.h` (a GiB of memory for an hour), ...
    pub usage_unit: String,
    pub tiered_rates: Vec<TierRate>,
}

/// The price of one unit of usage above `startUsageAmount`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TierRate {
    pub start_usage_amount: f64,
    pub unit_price: Money,
}

/// `google.type.Money`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Money {
    pub currency_code: String,
    /// Whole units (int64: a string on the wire; a number is accepted too).
    #[serde(deserialize_with = "int64")]
    pub units: i64,
    /// Billionths of a unit, same sign as `units`.
    pub nanos: i32,
}

impl Money {
    /// The amount as a float: `units + nanos / 1e9`.
    pub fn amount(&self) -> f64 {
        self.units as f64 + f64::from(self.nanos) / 1e9
    }
}

/// An int64 as Google's JSON sends it (a string), or a plain number.
fn int64<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Wire {
        S(String),
        N(i64),
    }
    match Wire::deserialize(d)? {
        Wire::N(n) => Ok(n),
        Wire::S(s) if s.is_empty() => Ok(0),
        Wire::S(s) => s.parse().map_err(serde::de::Error::custom),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sku_as_google_sends_it_decodes() {
        let page: SkusPage = serde_json::from_str(
            r#"{"skus": [{"name": "services/6F81-5844-456A/skus/9A32-36B2-7FBC", "skuId": "9A32-36B2-7FBC",
                "description": "DWS Defined Duration A3 Core running in Americas",
                "category": {"serviceDisplayName": "Compute Engine", "resourceFamily": "Compute",
                             "resourceGroup": "CPU", "usageType": "OnDemand"},
                "serviceRegions": ["us-central1", "us-east4"],
                "pricingInfo": [{"summary": "", "effectiveTime": "2025-08-01T00:00:00Z",
                  "pricingExpression": {"usageUnit": "h", "displayQuantity": 1,
                    "tieredRates": [{"startUsageAmount": 0,
                                     "unitPrice": {"currencyCode": "USD", "units": "0", "nanos": 10934000}}]},
                  "currencyConversionRate": 1}],
                "serviceProviderName": "Google", "geoTaxonomy": {"type": "MULTI_REGIONAL"}}],
              "nextPageToken": "abc"}"#,
        )
        .unwrap();
        assert_eq!(page.next_page_token, "abc");
        let sku = &page.skus[0];
        assert_eq!(sku.category.usage_type, "OnDemand");
        assert_eq!(sku.service_regions, ["us-central1", "us-east4"]);
        let rate = &sku.pricing_info[0].pricing_expression.tiered_rates[0];
        assert!((rate.unit_price.amount() - 0.010934).abs() < 1e-12);
        let m: Money = serde_json::from_str(r#"{"units": 4, "nanos": 200761000}"#).unwrap();
        assert!((m.amount() - 4.200761).abs() < 1e-12);
        assert!(serde_json::from_str::<Money>(r#"{"units": "x"}"#).is_err());
    }
}
