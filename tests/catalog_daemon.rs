//! The daemon's catalog prices through real processes: `slurm-dws daemon` with `[pricing] catalog =
//! true` against the simulator over real HTTP writes `state_dir/catalog-prices.json` from the
//! simulator's catalog; with Cloud Billing disabled it writes nothing, says why once in Google's words,
//! and its passes go on.

// The real daemon against a real simulator, in real time: these wait for it.
#![allow(clippy::disallowed_methods)]

mod common;

use common::*;
use serde_json::json;
use slurm_dws::usage::{CatalogPrices, CATALOG_CACHE};

const PRICING: &str = "[pricing]\ncurrency = \"USD\"\ncatalog = true\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_writes_the_catalog_prices_of_its_nodesets() {
    let mut w = World::new(&[("a", 0, 2, "")], PRICING).await;
    w.start_daemon();
    let path = w.state_dir().join(CATALOG_CACHE);
    let prices: CatalogPrices =
        w.wait_for("the catalog prices", 30, || serde_json::from_slice(&std::fs::read(&path).ok()?).ok());
    assert_eq!(prices.currency, "USD");
    // The nodeset's template is an n2-standard-4 (4 vCPUs, 16 GB): the simulator's N2 list prices.
    let n2 = &prices.per_hour["n2-standard-4"];
    assert!((n2["standard"] - (4.0 * 0.031611 + 16.0 * 0.004237)).abs() < 1e-6, "{n2:?}");
    assert_eq!(n2["reservation"], n2["standard"]);
    assert!((n2["spot"] - (4.0 * 0.0075 + 16.0 * 0.001)).abs() < 1e-6, "{n2:?}");
    assert!(!n2.contains_key("flex"), "no DWS SKUs for N2: {n2:?}");
    let log = std::fs::read_to_string(w.path().join("daemon.log")).unwrap();
    assert!(log.contains("catalog prices fetched from Cloud Billing"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disabled_billing_api_is_one_warning_and_no_file_and_the_passes_go_on() {
    let mut w = World::new(&[("a", 0, 2, "")], PRICING).await;
    w.sim_post("billing", json!({"disabled": true})).await;
    w.start_daemon();
    let log_path = w.path().join("daemon.log");
    w.wait_for("the warning", 30, || {
        let log = std::fs::read_to_string(&log_path).ok()?;
        log.contains("catalog prices could not be fetched from Cloud Billing").then_some(())
    });
    let first = w.iteration();
    w.wait_for("two more passes", 30, || (w.iteration() >= first + 2).then_some(()));
    let log = std::fs::read_to_string(&log_path).unwrap();
    let warns: Vec<&str> =
        log.lines().filter(|l| l.contains("could not be fetched from Cloud Billing")).collect();
    assert_eq!(warns.len(), 1, "{warns:?}");
    assert!(warns[0].contains("WARN"), "{}", warns[0]);
    assert!(warns[0].contains("Cloud Billing API has not been used in project"), "{}", warns[0]);
    assert!(!w.state_dir().join(CATALOG_CACHE).exists());
}
