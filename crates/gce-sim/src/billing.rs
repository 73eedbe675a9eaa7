//! A small Cloud Billing Catalog API (`/v1/services`, `/v1/services/{id}/skus`): the Compute Engine
//! SKUs of the machine types the simulator serves (`machineTypes.get`), so that the daemon's
//! catalog pricing (`[pricing] catalog = true`) runs against it like against Google.
//!
//! | call | effect |
//! |---|---|
//! | `GET /v1/services?pageSize&pageToken` | a few public services, Compute Engine (`6F81-5844-456A`) among them |
//! | `GET /v1/services/{id}/skus?currencyCode&pageSize&pageToken` | Compute Engine's SKUs below, in `currencyCode` (USD, the default, or EUR at 0.9), paged (`pageSize` default and most 5000); another service has none; an unknown service is a 404, an unknown currency or a bad page token a 400 `INVALID_ARGUMENT` |
//! | `POST /_sim/billing` `{"disabled": true}` | the API answers 403 `PERMISSION_DENIED` "Cloud Billing API has not been used in project ... or it is disabled" (as Google does when the API is not enabled) |
//! | `GET /_sim/billing` | `{"disabled", "calls"}`: the Catalog API calls so far |
//!
//! The SKUs follow the real catalog's words: per machine series an `Instance Core` (per vCPU-hour,
//! unit `h`) and `Instance Ram` (per GiB-hour, `GiBy.h`) SKU, per GPU model a `GPU` SKU, each in
//! three provisioning models — on demand (`A3 Instance Core running in Americas`), Spot (`Spot
//! Preemptible A3 Instance Core ...`, `Nvidia H100 80GB GPU attached to Spot Preemptible VMs ...`,
//! usage type `Preemptible`) and DWS Flex Start (`DWS Defined Duration A3 Core ...`, `... attached to
//! DWS Defined Duration VMs ...`, usage type `OnDemand`); N2 has no DWS SKUs. The A3 Ultra SKUs'
//! exact words are the simulator's (A3's pattern with "A3 Ultra"; the H200 GPU as `H200 141GB GPU`).
//! Decoys a client must not take for list prices: a commitment, a `Reserved` GPU at 0, a custom N2
//! core, a storage SKU. Prices are plausible, not Google's.

use super::Shared;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Compute Engine's service id in the real catalog.
pub const COMPUTE_SERVICE_ID: &str = "6F81-5844-456A";
/// Regions every SKU is sold in.
const REGIONS: &[&str] = &["us-central1", "us-east4", "us-east5", "europe-west4", "asia-northeast1"];
const MAX_PAGE: usize = 5000;

/// The switches and counters of the catalog.
#[derive(Debug, Default)]
pub struct Billing {
    disabled: AtomicBool,
    calls: AtomicU64,
}

/// `(description, resourceGroup, usageType, unit, USD)`.
type Row = (&'static str, &'static str, &'static str, &'static str, f64);

/// (series as the SKUs say it in on-demand and spot / in DWS, GPU label, on-demand, spot, flex
/// prices of core, GiB of RAM, GPU).
struct Series {
    name: &'static str,
    gpu: Option<&'static str>,
    standard: [f64; 3],
    spot: [f64; 3],
    flex: Option<[f64; 3]>,
}

const SERIES: &[Series] = &[
    Series {
        name: "A3 Ultra",
        gpu: Some("H200 141GB GPU"),
        standard: [0.03, 0.0026, 10.6],
        spot: [0.009, 0.00078, 3.72],
        flex: Some([0.0125, 0.0011, 5.05]),
    },
    Series {
        name: "A3",
        gpu: Some("Nvidia H100 80GB GPU"),
        standard: [0.029323, 0.002553, 9.796],
        spot: [0.00877, 0.000764, 2.933],
        flex: Some([0.010934, 0.000952, 4.200761]),
    },
    Series {
        name: "A2",
        gpu: Some("Nvidia Tesla A100 GPU"),
        standard: [0.031611, 0.004237, 2.933908],
        spot: [0.00664, 0.00089, 1.17],
        flex: Some([0.0166, 0.0022, 1.54]),
    },
    Series {
        name: "G2",
        gpu: Some("Nvidia L4 GPU"),
        standard: [0.024988, 0.002927, 0.56],
        spot: [0.00995, 0.00117, 0.2232],
        flex: Some([0.0131, 0.00154, 0.294]),
    },
    Series {
        name: "N2",
        gpu: None,
        standard: [0.031611, 0.004237, 0.0],
        spot: [0.0075, 0.001, 0.0],
        flex: None,
    },
];

/// Every SKU of the simulated Compute Engine, as (description, group, usage type, unit, USD).
fn rows() -> Vec<(String, &'static str, &'static str, &'static str, f64)> {
    let mut out = Vec::new();
    for s in SERIES {
        let n = s.name;
        out.push((format!("{n} Instance Core running in Americas"), "CPU", "OnDemand", "h", s.standard[0]));
        out.push((
            format!("{n} Instance Ram running in Americas"),
            "RAM",
            "OnDemand",
            "GiBy.h",
            s.standard[1],
        ));
        out.push((
            format!("Spot Preemptible {n} Instance Core running in Americas"),
            "CPU",
            "Preemptible",
            "h",
            s.spot[0],
        ));
        out.push((
            format!("Spot Preemptible {n} Instance Ram running in Americas"),
            "RAM",
            "Preemptible",
            "GiBy.h",
            s.spot[1],
        ));
        if let Some(f) = s.flex {
            out.push((
                format!("DWS Defined Duration {n} Core running in Americas"),
                "CPU",
                "OnDemand",
                "h",
                f[0],
            ));
            out.push((
                format!("DWS Defined Duration {n} Ram running in Americas"),
                "RAM",
                "OnDemand",
                "GiBy.h",
                f[1],
            ));
        }
        if let Some(g) = s.gpu {
            out.push((format!("{g} running in Americas"), "GPU", "OnDemand", "h", s.standard[2]));
            out.push((
                format!("{g} attached to Spot Preemptible VMs running in Americas"),
                "GPU",
                "Preemptible",
                "h",
                s.spot[2],
            ));
            if let Some(f) = s.flex {
                out.push((
                    format!("{g} attached to DWS Defined Duration VMs running in Americas"),
                    "GPU",
                    "OnDemand",
                    "h",
                    f[2],
                ));
            }
        }
    }
    let decoys: &[Row] = &[
        ("Commitment v1: A3 Cpu in Americas for 1 Year", "CPU", "Commit1Yr", "h", 0.018),
        ("Reserved Nvidia H100 80GB GPU in Americas", "GPU", "OnDemand", "h", 0.0),
        ("N2 Custom Instance Core running in Americas", "CPU", "OnDemand", "h", 0.033),
        ("Storage PD Capacity", "SSD", "OnDemand", "GiBy.mo", 0.04),
    ];
    out.extend(decoys.iter().map(|(d, g, u, unit, p)| (d.to_string(), *g, *u, *unit, *p)));
    out
}

/// A `google.type.Money` of `amount` in `currency`.
fn money(amount: f64, currency: &str) -> Value {
    let units = amount.trunc();
    let nanos = ((amount - units) * 1e9).round() as i64;
    json!({"currencyCode": currency, "units": format!("{}", units as i64), "nanos": nanos})
}

fn sku_json(
    i: usize,
    (description, group, usage, unit, usd): &(String, &str, &str, &str, f64),
    currency: &str,
    rate: f64,
) -> Value {
    let id = format!("{:04X}-{:04X}-{:04X}", 0x1000 + i, 0x2000 + i * 7, 0x3000 + i * 13);
    let family = if *group == "SSD" { "Storage" } else { "Compute" };
    json!({
        "name": format!("services/{COMPUTE_SERVICE_ID}/skus/{id}"),
        "skuId": id,
        "description": description,
        "category": {"serviceDisplayName": "Compute Engine", "resourceFamily": family,
                     "resourceGroup": group, "usageType": usage},
        "serviceRegions": REGIONS,
        "pricingInfo": [{
            "summary": "",
            "pricingExpression": {
                "usageUnit": unit, "displayQuantity": 1, "baseUnitConversionFactor": 3600,
                "tieredRates": [{"startUsageAmount": 0, "unitPrice": money(usd * rate, currency)}],
            },
            "currencyConversionRate": rate,
            "effectiveTime": "2026-01-01T00:00:00Z",
        }],
        "serviceProviderName": "Google",
    })
}

fn error(status: StatusCode, code: &str, message: String) -> Response {
    (status, Json(json!({"error": {"code": status.as_u16(), "message": message, "status": code}})))
        .into_response()
}

/// One page of `items` from the `pageToken` offset, `pageSize` long.
fn page(items: Vec<Value>, q: &HashMap<String, String>, key: &str) -> Response {
    let size = q
        .get("pageSize")
        .and_then(|s| s.parse::<usize>().ok())
        .filter(|n| *n > 0)
        .unwrap_or(MAX_PAGE)
        .min(MAX_PAGE);
    let start = match q.get("pageToken").filter(|t| !t.is_empty()) {
        None => 0,
        Some(t) => match t
            .strip_prefix("sim-")
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|n| *n < items.len())
        {
            Some(n) => n,
            None => {
                return error(StatusCode::BAD_REQUEST, "INVALID_ARGUMENT", format!("Invalid page token: {t}"))
            }
        },
    };
    let end = (start + size).min(items.len());
    let next = if end < items.len() { format!("sim-{end}") } else { String::new() };
    Json(json!({key: items[start..end].to_vec(), "nextPageToken": next})).into_response()
}

fn refused(shared: &Shared) -> Option<Response> {
    shared.billing.calls.fetch_add(1, Ordering::Relaxed);
    shared.billing.disabled.load(Ordering::Relaxed).then(|| {
        error(
            StatusCode::FORBIDDEN,
            "PERMISSION_DENIED",
            "Cloud Billing API has not been used in project 1 before or it is disabled. Enable it by visiting \
             https://console.developers.google.com/apis/api/cloudbilling.googleapis.com/overview?project=1 then retry."
                .into(),
        )
    })
}

async fn services(State(shared): State<Arc<Shared>>, Query(q): Query<HashMap<String, String>>) -> Response {
    if let Some(r) = refused(&shared) {
        return r;
    }
    let list = [
        ("6F81-5844-456A", "Compute Engine"),
        ("95FF-2EF5-5EA1", "Cloud Storage"),
        ("E000-3F24-B8AA", "Cloud TPU"),
        ("C7E2-9256-1C43", "Vertex AI"),
    ];
    let items = list
        .iter()
        .map(|(id, name)| json!({"name": format!("services/{id}"), "serviceId": id, "displayName": name, "businessEntityName": "businessEntities/GCP"}))
        .collect();
    page(items, &q, "services")
}

async fn skus(
    State(shared): State<Arc<Shared>>,
    Path(service): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    if let Some(r) = refused(&shared) {
        return r;
    }
    let currency = q.get("currencyCode").map(String::as_str).unwrap_or("USD");
    let rate = match currency {
        "USD" => 1.0,
        "EUR" => 0.9,
        other => {
            return error(
                StatusCode::BAD_REQUEST,
                "INVALID_ARGUMENT",
                format!("Currency code {other} is not supported."),
            )
        }
    };
    let items = match service.as_str() {
        COMPUTE_SERVICE_ID => {
            rows().iter().enumerate().map(|(i, r)| sku_json(i, r, currency, rate)).collect()
        }
        "95FF-2EF5-5EA1" | "E000-3F24-B8AA" | "C7E2-9256-1C43" => Vec::new(),
        other => {
            return error(StatusCode::NOT_FOUND, "NOT_FOUND", format!("Service services/{other} not found."))
        }
    };
    page(items, &q, "skus")
}

async fn control_get(State(shared): State<Arc<Shared>>) -> Response {
    Json(json!({
        "disabled": shared.billing.disabled.load(Ordering::Relaxed),
        "calls": shared.billing.calls.load(Ordering::Relaxed),
    }))
    .into_response()
}

async fn control_set(State(shared): State<Arc<Shared>>, Json(body): Json<Value>) -> Response {
    match body.get("disabled").and_then(Value::as_bool) {
        Some(d) => {
            shared.billing.disabled.store(d, Ordering::Relaxed);
            control_get(State(shared)).await
        }
        None => (StatusCode::BAD_REQUEST, Json(json!({"error": "body must be {\"disabled\": true|false}"})))
            .into_response(),
    }
}

/// The catalog's routes and its control.
pub fn routes() -> Router<Arc<Shared>> {
    Router::new()
        .route("/v1/services", get(services))
        .route("/v1/services/{service}/skus", get(skus))
        .route("/_sim/billing", get(control_get).post(control_set))
}
