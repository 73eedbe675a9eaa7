//! The Cloud Billing catalog over raw HTTP: services and SKUs as Google's reference shapes them,
//! every page reached through `nextPageToken`, prices in the currency asked for, Google's errors for
//! an unknown service, currency or page token, and the 403 of a disabled API.

mod common;
use common::*;
use reqwest::Method;

async fn catalog(api: &Api, path: &str) -> (u16, Value) {
    api.call(Method::GET, format!("{}v1/{path}", api.root), None).await
}

/// Every SKU of Compute Engine in `currency`, `page` at a time, and the number of pages.
async fn all_skus(api: &Api, currency: &str, page: usize) -> (Vec<Value>, usize) {
    let (mut out, mut token, mut pages) = (Vec::new(), String::new(), 0);
    loop {
        let (status, v) = catalog(
            api,
            &format!(
                "services/6F81-5844-456A/skus?currencyCode={currency}&pageSize={page}&pageToken={token}"
            ),
        )
        .await;
        assert_eq!(status, 200, "{v}");
        pages += 1;
        out.extend(v["skus"].as_array().expect("skus").iter().cloned());
        token = v["nextPageToken"].as_str().expect("nextPageToken").to_string();
        if token.is_empty() {
            return (out, pages);
        }
        assert!(pages < 100, "paging never ends");
    }
}

fn price(sku: &Value) -> f64 {
    let p = &sku["pricingInfo"][0]["pricingExpression"]["tieredRates"][0]["unitPrice"];
    p["units"].as_str().expect("units is an int64 string").parse::<f64>().unwrap()
        + p["nanos"].as_f64().unwrap() / 1e9
}

fn find<'a>(skus: &'a [Value], description: &str) -> &'a Value {
    skus.iter().find(|s| s["description"] == description).unwrap_or_else(|| panic!("no SKU {description:?}"))
}

#[tokio::test]
async fn compute_engine_is_listed_and_its_skus_page_in_either_currency() {
    let (sim, api) = start(1.0).await;
    let (status, v) = catalog(&api, "services?pageSize=2").await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["services"].as_array().unwrap().len(), 2);
    let (_, rest) =
        catalog(&api, &format!("services?pageToken={}", v["nextPageToken"].as_str().unwrap())).await;
    let all: Vec<Value> = v["services"]
        .as_array()
        .unwrap()
        .iter()
        .chain(rest["services"].as_array().unwrap())
        .cloned()
        .collect();
    let compute = all.iter().find(|s| s["displayName"] == "Compute Engine").expect("Compute Engine");
    assert_eq!(compute["serviceId"], "6F81-5844-456A");
    assert_eq!(compute["name"], "services/6F81-5844-456A");
    assert_eq!(rest["nextPageToken"], "");

    let (whole, pages) = all_skus(&api, "USD", 5000).await;
    assert_eq!(pages, 1);
    let (paged, pages) = all_skus(&api, "USD", 7).await;
    assert!(pages > 3, "{pages}");
    assert_eq!(paged, whole, "pages of 7 give the same SKUs in the same order");

    let core = find(&whole, "DWS Defined Duration A3 Core running in Americas");
    assert_eq!(core["category"]["resourceFamily"], "Compute");
    assert_eq!(core["category"]["resourceGroup"], "CPU");
    assert_eq!(core["category"]["usageType"], "OnDemand");
    assert_eq!(core["pricingInfo"][0]["pricingExpression"]["usageUnit"], "h");
    assert!(core["serviceRegions"].as_array().unwrap().iter().any(|r| r == "us-central1"));
    assert!((price(core) - 0.010934).abs() < 1e-9);
    let spot = find(&whole, "Nvidia H100 80GB GPU attached to Spot Preemptible VMs running in Americas");
    assert_eq!(spot["category"]["usageType"], "Preemptible");
    let ram = find(&whole, "A3 Ultra Instance Ram running in Americas");
    assert_eq!(ram["pricingInfo"][0]["pricingExpression"]["usageUnit"], "GiBy.h");
    assert!(whole.iter().any(|s| s["category"]["usageType"] == "Commit1Yr"), "a commitment decoy");
    assert!(!whole.iter().any(|s| s["description"].as_str().unwrap().starts_with("DWS Defined Duration N2")));

    let (eur, _) = all_skus(&api, "EUR", 5000).await;
    let eur_core = find(&eur, "DWS Defined Duration A3 Core running in Americas");
    assert_eq!(
        eur_core["pricingInfo"][0]["pricingExpression"]["tieredRates"][0]["unitPrice"]["currencyCode"],
        "EUR"
    );
    assert!((price(eur_core) - 0.010934 * 0.9).abs() < 1e-9);

    // Another service has no SKUs here; an unknown one is a 404.
    let (status, v) = catalog(&api, "services/95FF-2EF5-5EA1/skus").await;
    assert_eq!((status, v["skus"].as_array().map(Vec::len)), (200, Some(0)));
    sim.shutdown().await;
}

#[tokio::test]
async fn bad_requests_and_a_disabled_api_answer_as_google_does() {
    let (sim, api) = start(1.0).await;
    for (path, status, code) in [
        ("services/6F81-5844-456A/skus?currencyCode=XXX", 400, "INVALID_ARGUMENT"),
        ("services/6F81-5844-456A/skus?pageToken=bogus", 400, "INVALID_ARGUMENT"),
        ("services/0000-0000-0000/skus", 404, "NOT_FOUND"),
    ] {
        let (s, v) = catalog(&api, path).await;
        assert_eq!((s, v["error"]["status"].as_str()), (status, Some(code)), "{path}: {v}");
        assert_eq!(v["error"]["code"], status);
    }
    api.control(Method::POST, "billing", Some(json!({"disabled": true}))).await;
    let (s, v) = catalog(&api, "services").await;
    assert_eq!(s, 403, "{v}");
    assert_eq!(v["error"]["status"], "PERMISSION_DENIED");
    assert!(v["error"]["message"].as_str().unwrap().contains("Cloud Billing API has not been used"), "{v}");
    let state = api.control(Method::POST, "billing", Some(json!({"disabled": false}))).await;
    assert_eq!(state["disabled"], false);
    assert_eq!(catalog(&api, "services").await.0, 200);
    let state = api.control(Method::GET, "billing", None).await;
    assert_eq!(state["calls"], 5);
    sim.shutdown().await;
}
