//! Catalog pricing against the simulator over real HTTP: the Cloud Billing client (services, SKUs,
//! paging, currency, Google's errors) and the daemon's refresher, which reads the nodesets' machine
//! types from GCE, prices them from the catalog and writes `state_dir/catalog-prices.json`, and keeps
//! the file as it was when Cloud Billing fails.

use std::time::Duration;

use gce_sim::SimOptions;
use serde_json::{json, Value};
use slurm_dws::billing::refresh::{self, CatalogSettings, NodesetSource};
use slurm_dws::billing::{endpoint_for, BillingClient, BillingError, BillingOptions};
use slurm_dws::gce::{Backoff, Client, ClientOptions, Credentials};
use slurm_dws::usage::{CatalogPrices, CATALOG_CACHE};
use tokio_util::sync::CancellationToken;

async fn post(sim: &gce_sim::SimHandle, path: &str, body: Value) {
    let r = reqwest::Client::new()
        .post(format!("http://{}/_sim/{path}", sim.addr()))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{path}: {}", r.text().await.unwrap());
}

async fn billing_calls(sim: &gce_sim::SimHandle) -> u64 {
    let v: Value =
        reqwest::get(format!("http://{}/_sim/billing", sim.addr())).await.unwrap().json().await.unwrap();
    v["calls"].as_u64().unwrap()
}

fn billing(sim: &gce_sim::SimHandle, page_size: u32) -> BillingClient {
    let mut opts =
        BillingOptions::new(&endpoint_for(&sim.base_url()), Duration::from_secs(5), Duration::from_secs(2));
    opts.page_size = page_size;
    BillingClient::new(opts, &Credentials::None)
        .unwrap()
        .with_backoff(Backoff { initial: Duration::from_millis(10), max: Duration::from_millis(50) })
}

fn gce(sim: &gce_sim::SimHandle) -> Client {
    Client::new(
        ClientOptions {
            endpoint: sim.base_url(),
            project: "p".into(),
            calls_per_minute: 0,
            reads_per_minute: 0,
            writes_per_minute: 0,
            request_timeout: Duration::from_secs(5),
            retry_deadline: Duration::from_secs(2),
        },
        Credentials::None,
    )
    .unwrap()
}

/// A simulator with two templates: an A3 High flex nodeset and an N2 spot one.
async fn sim_with_templates() -> gce_sim::SimHandle {
    let sim = gce_sim::start(SimOptions::default()).await.unwrap();
    post(
        &sim,
        "templates",
        json!({"name": "a3h", "properties": {"machineType": "a3-highgpu-8g",
        "scheduling": {"provisioningModel": "FLEX_START", "instanceTerminationAction": "DELETE"}}}),
    )
    .await;
    post(&sim, "templates", devcluster::stack::model_template("n2spot", "spot")).await;
    sim
}

fn settings(sim: &gce_sim::SimHandle, state_dir: &std::path::Path, currency: &str) -> CatalogSettings {
    let ns = |name: &str, template: &str| NodesetSource {
        name: name.into(),
        instance_template: format!("projects/p/global/instanceTemplates/{template}"),
        zone: "us-central1-a".into(),
        region: "us-central1".into(),
    };
    CatalogSettings {
        currency: currency.into(),
        billing: BillingOptions::new(
            &endpoint_for(&sim.base_url()),
            Duration::from_secs(5),
            Duration::from_secs(2),
        ),
        credentials: Credentials::None,
        state_dir: state_dir.to_path_buf(),
        nodesets: vec![ns("a3", "a3h"), ns("n2", "n2spot"), ns("gone", "no-such-template")],
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6
}

#[tokio::test]
async fn the_client_pages_through_services_and_skus() {
    let sim = gce_sim::start(SimOptions::default()).await.unwrap();
    let small = billing(&sim, 3);
    let services = small.list_services().await.unwrap();
    assert!(services.len() >= 4, "{services:?}");
    assert_eq!(small.service_id("Compute Engine").await.unwrap(), "6F81-5844-456A");
    let e = small.service_id("Compute Engine Plus").await.unwrap_err();
    assert_eq!(e, BillingError::NoSuchService("Compute Engine Plus".into()));

    let whole = billing(&sim, 5000).list_skus("6F81-5844-456A", "USD", |_| true).await.unwrap();
    let paged = small.list_skus("6F81-5844-456A", "USD", |_| true).await.unwrap();
    assert!(whole.len() > 30, "{}", whole.len());
    assert_eq!(paged, whole);
    let gpus =
        small.list_skus("6F81-5844-456A", "EUR", |s| s.category.resource_group == "GPU").await.unwrap();
    assert!(!gpus.is_empty() && gpus.iter().all(|s| s.category.resource_group == "GPU"));
    let tier = &gpus[0].pricing_info[0].pricing_expression.tiered_rates[0].unit_price;
    assert_eq!(tier.currency_code, "EUR");

    // Google's words come through; a 400 is not retried.
    let before = billing_calls(&sim).await;
    let e = small.list_skus("6F81-5844-456A", "XXX", |_| true).await.unwrap_err();
    assert!(matches!(e, BillingError::Api { http: 400, .. }), "{e:?}");
    assert!(e.to_string().contains("Currency code XXX is not supported"), "{e}");
    assert_eq!(billing_calls(&sim).await, before + 1);

    // A bound on pages: a list longer than max_pages is an error, not an endless loop.
    let mut opts =
        BillingOptions::new(&endpoint_for(&sim.base_url()), Duration::from_secs(5), Duration::from_secs(2));
    opts.page_size = 1;
    opts.max_pages = 4;
    let bounded = BillingClient::new(opts, &Credentials::None).unwrap();
    let e = bounded.list_skus("6F81-5844-456A", "USD", |_| true).await.unwrap_err();
    assert!(matches!(e, BillingError::TooManyPages { pages: 4, .. }), "{e:?}");
    sim.shutdown().await;
}

#[tokio::test]
async fn the_refresher_writes_the_prices_and_keeps_them_when_billing_fails() {
    let sim = sim_with_templates().await;
    let dir = tempfile::tempdir().unwrap();
    let stop = CancellationToken::new();
    let task = tokio::spawn(refresh::run(settings(&sim, dir.path(), "USD"), gce(&sim), stop.clone()));
    let path = dir.path().join(CATALOG_CACHE);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !path.exists() {
        assert!(tokio::time::Instant::now() < deadline, "no {CATALOG_CACHE} written");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.cancel();
    task.await.unwrap();
    let prices: CatalogPrices = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(prices.currency, "USD");
    let a3 = &prices.per_hour["a3-highgpu-8g"];
    // 208 vCPUs, 1872 GiB, 8 × H100 at the simulator's list prices.
    assert!(close(a3["flex"], 208.0 * 0.010934 + 1872.0 * 0.000952 + 8.0 * 4.200761), "{a3:?}");
    assert!(close(a3["standard"], 208.0 * 0.029323 + 1872.0 * 0.002553 + 8.0 * 9.796), "{a3:?}");
    assert!(close(a3["reservation"], a3["standard"]));
    assert!(close(a3["spot"], 208.0 * 0.00877 + 1872.0 * 0.000764 + 8.0 * 2.933), "{a3:?}");
    let n2 = &prices.per_hour["n2-standard-4"];
    assert!(close(n2["standard"], 4.0 * 0.031611 + 16.0 * 0.004237), "{n2:?}");
    assert!(!n2.contains_key("flex"), "the catalog has no DWS SKUs for N2: {n2:?}");

    // A second start within the day: the file is fresh, the catalog is not asked again.
    let calls = billing_calls(&sim).await;
    let stop = CancellationToken::new();
    let task = tokio::spawn(refresh::run(settings(&sim, dir.path(), "USD"), gce(&sim), stop.clone()));
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.cancel();
    task.await.unwrap();
    assert_eq!(billing_calls(&sim).await, calls);

    // Asked in another currency, with Cloud Billing disabled: the refresh fails with Google's
    // words and the file stays as it was.
    post(&sim, "billing", json!({"disabled": true})).await;
    let before = std::fs::read(&path).unwrap();
    let s = settings(&sim, dir.path(), "EUR");
    let client = BillingClient::new(s.billing.clone(), &Credentials::None).unwrap();
    let now =
        chrono::DateTime::parse_from_rfc3339("2026-03-01T00:00:00Z").unwrap().with_timezone(&chrono::Utc);
    let e = refresh::refresh(&client, &gce(&sim), &s, now).await.unwrap_err();
    assert!(e.to_string().contains("Cloud Billing API has not been used in project"), "{e}");
    assert!(e.to_string().contains("403 PERMISSION_DENIED"), "{e}");
    let stop = CancellationToken::new();
    let task = tokio::spawn(refresh::run(s.clone(), gce(&sim), stop.clone()));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while billing_calls(&sim).await < calls + 2 {
        assert!(tokio::time::Instant::now() < deadline, "the refresher never asked");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    stop.cancel();
    task.await.unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), before, "a failed refresh keeps the file");

    // Enabled again: EUR prices replace the USD ones.
    post(&sim, "billing", json!({"disabled": false})).await;
    let (eur, problems) = refresh::refresh(&client, &gce(&sim), &s, now).await.unwrap();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].contains("nodeset gone"), "{problems:?}");
    assert_eq!(eur.currency, "EUR");
    assert!(close(eur.per_hour["n2-standard-4"]["spot"], 0.9 * (4.0 * 0.0075 + 16.0 * 0.001)));
    assert_eq!(refresh::read_cache(dir.path()).unwrap(), Some(eur));
    sim.shutdown().await;
}
