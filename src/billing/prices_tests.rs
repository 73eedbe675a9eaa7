//! Table tests of the SKU → VM-hour mapping, on SKUs spelled as Google's catalog spells them.

use super::*;
use crate::billing::types::{Category, Money, PricingExpression, PricingInfo, TierRate};

fn sku(description: &str, group: &str, usage: &str, regions: &[&str], price: f64) -> Sku {
    let unit = if description.contains(" Ram ") { "GiBy.h" } else { "h" };
    sku_with(description, group, usage, regions, unit, &[price])
}

fn sku_with(description: &str, group: &str, usage: &str, regions: &[&str], unit: &str, tiers: &[f64]) -> Sku {
    Sku {
        sku_id: format!("id-{description}"),
        description: description.into(),
        category: Category {
            resource_family: "Compute".into(),
            resource_group: group.into(),
            usage_type: usage.into(),
        },
        service_regions: regions.iter().map(|r| r.to_string()).collect(),
        pricing_info: vec![PricingInfo {
            effective_time: "2026-01-01T00:00:00Z".into(),
            pricing_expression: PricingExpression {
                usage_unit: unit.into(),
                tiered_rates: tiers
                    .iter()
                    .enumerate()
                    .map(|(i, p)| TierRate {
                        start_usage_amount: i as f64,
                        unit_price: Money {
                            currency_code: "USD".into(),
                            units: p.trunc() as i64,
                            nanos: ((p - p.trunc()) * 1e9).round() as i32,
                        },
                    })
                    .collect(),
            },
        }],
    }
}

const US: &[&str] = &["us-central1"];

#[test]
fn the_model_is_read_from_the_skus_words() {
    let cases: &[(&str, &str, Option<SkuModel>)] = &[
        ("A3 Instance Core running in Americas", "OnDemand", Some(SkuModel::Standard)),
        ("Spot Preemptible A3 Instance Core running in Americas", "Preemptible", Some(SkuModel::Spot)),
        (
            "Nvidia H100 80GB GPU attached to Spot Preemptible VMs running in Americas",
            "Preemptible",
            Some(SkuModel::Spot),
        ),
        // A4's spot slice is sold with usage type OnDemand: the words decide.
        (
            "Spot Preemptible A4 Nvidia B200 (1 gpu slice) running in Americas",
            "OnDemand",
            Some(SkuModel::Spot),
        ),
        ("DWS Defined Duration A3 Core running in Americas", "OnDemand", Some(SkuModel::Flex)),
        (
            "Nvidia H100 80GB GPU attached to DWS Defined Duration VMs running in Americas",
            "OnDemand",
            Some(SkuModel::Flex),
        ),
        ("DWS Flex Start H4D Instance Core running in Americas", "OnDemand", Some(SkuModel::Flex)),
        ("Commitment v1: A3 Cpu in Americas for 1 Year", "Commit1Yr", None),
        ("Reserved Nvidia H100 80GB GPU in Americas", "OnDemand", None),
        ("Reserved Nvidia H100 80GB Mega GPU in Americas in Calendar Mode", "OnDemand", None),
        ("N2 Custom Instance Core running in Americas", "OnDemand", None),
        ("N2 Sole Tenancy Instance Core running in Americas", "OnDemand", None),
        ("Nvidia Tesla T4 GPU attached to Virtual Workstation running in Americas", "OnDemand", None),
        ("A3 Instance Core running in Americas", "Commit3Yr", None),
    ];
    for (d, usage, want) in cases {
        assert_eq!(sku_model(&sku(d, "CPU", usage, US, 1.0)), *want, "{d}");
    }
}

#[test]
fn the_part_is_read_from_the_skus_words() {
    let core = |f: &str| Some(Part::Core(f.into()));
    let ram = |f: &str| Some(Part::Ram(f.into()));
    let gpu = |l: &str| Some(Part::Gpu(l.into()));
    let cases: &[(&str, &str, Option<Part>)] = &[
        ("A3 Instance Core running in Americas", "CPU", core("a3")),
        ("DWS Defined Duration A3 Ram running in Americas", "RAM", ram("a3")),
        ("Spot Preemptible A3Plus Instance Ram running in Tokyo", "RAM", ram("a3plus")),
        ("N1 Predefined Instance Core running in EMEA", "N1Standard", core("n1")),
        ("N2D AMD Instance Ram running in Americas", "RAM", ram("n2d amd")),
        ("Nvidia H100 80GB GPU running in Americas", "GPU", gpu("h100 80gb gpu")),
        ("H200 141GB GPU running in Netherlands", "GPU", gpu("h200 141gb gpu")),
        (
            "Nvidia Tesla A100 GPU attached to DWS Defined Duration VMs running in Americas",
            "GPU",
            gpu("a100 gpu"),
        ),
        (
            "Nvidia H100 Mega 80GB GPU attached to DWS Defined Duration VMs running in Americas",
            "GPU",
            gpu("h100 mega 80gb gpu"),
        ),
        (
            "Spot Preemptible A4 Nvidia B200 (1 gpu slice) running in Americas",
            "GPU",
            gpu("a4 b200 (1 gpu slice)"),
        ),
        ("Network Inter Zone Egress", "InterregionEgress", None),
        ("Core running in Americas", "CPU", None),
    ];
    for (d, group, want) in cases {
        assert_eq!(sku_part(&sku(d, group, "OnDemand", US, 1.0)), *want, "{d}");
    }
    assert_eq!(series_names("a3-highgpu-8g"), ["a3", "a3 amd"]);
    assert_eq!(series_names("a3-megagpu-8g")[0], "a3plus");
    assert_eq!(
        gpu_labels("nvidia-h100-mega-80gb"),
        ["h100 mega 80gb gpu", "h100 80gb mega gpu", "h100 80gb plus gpu"]
    );
    assert_eq!(gpu_labels("projects/p/zones/z/acceleratorTypes/nvidia-tesla-t4"), ["t4 gpu"]);
}

/// A small catalog of us-central1 with decoys: commitments, $0 reserved SKUs, a series whose name
/// starts like another's, a GPU whose label starts like another's, the same SKU dearer elsewhere.
fn catalog() -> Vec<Sku> {
    vec![
        sku("A3 Instance Core running in Americas", "CPU", "OnDemand", US, 0.02),
        sku("A3 Instance Ram running in Americas", "RAM", "OnDemand", US, 0.002),
        sku("Nvidia H100 80GB GPU running in Americas", "GPU", "OnDemand", US, 10.0),
        sku("Spot Preemptible A3 Instance Core running in Americas", "CPU", "Preemptible", US, 0.01),
        sku("Spot Preemptible A3 Instance Ram running in Americas", "RAM", "Preemptible", US, 0.001),
        sku(
            "Nvidia H100 80GB GPU attached to Spot Preemptible VMs running in Americas",
            "GPU",
            "Preemptible",
            US,
            3.0,
        ),
        sku("DWS Defined Duration A3 Core running in Americas", "CPU", "OnDemand", US, 0.010934),
        sku("DWS Defined Duration A3 Ram running in Americas", "RAM", "OnDemand", US, 0.000952),
        sku(
            "Nvidia H100 80GB GPU attached to DWS Defined Duration VMs running in Americas",
            "GPU",
            "OnDemand",
            US,
            4.200761,
        ),
        // Decoys.
        sku("Commitment v1: A3 Cpu in Americas for 1 Year", "CPU", "Commit1Yr", US, 0.001),
        sku("Reserved Nvidia H100 80GB GPU in Americas", "GPU", "OnDemand", US, 0.0),
        sku("A3Plus Instance Core running in Americas", "CPU", "OnDemand", US, 0.03),
        sku("A3Plus Instance Ram running in Americas", "RAM", "OnDemand", US, 0.003),
        sku("Nvidia H100 80GB Plus GPU running in Americas", "GPU", "OnDemand", US, 11.0),
        sku("Nvidia H100 80GB GPU running in Netherlands", "GPU", "OnDemand", &["europe-west4"], 99.0),
        // A2 and its 40 GB A100 next to the 80 GB one.
        sku("A2 Instance Core running in Americas", "CPU", "OnDemand", US, 0.03),
        sku("A2 Instance Ram running in Americas", "RAM", "OnDemand", US, 0.004),
        sku("Nvidia Tesla A100 GPU running in Americas", "GPU", "OnDemand", US, 2.9),
        sku("Nvidia Tesla A100 80GB GPU running in Americas", "GPU", "OnDemand", US, 3.9),
        // A4: the slice is the whole machine's share per GPU.
        sku("A4 Nvidia B200 (1 gpu slice) running in Americas", "GPU", "OnDemand", US, 16.11),
        sku(
            "Spot Preemptible A4 Nvidia B200 (1 gpu slice) running in Americas",
            "GPU",
            "OnDemand",
            US,
            4.9542,
        ),
        // N2: standard and spot, no DWS.
        sku("N2 Instance Core running in Americas", "CPU", "OnDemand", US, 0.031611),
        sku("N2 Instance Ram running in Americas", "RAM", "OnDemand", US, 0.004237),
        sku("Spot Preemptible N2 Instance Core running in Americas", "CPU", "Preemptible", US, 0.0075),
        sku("Spot Preemptible N2 Instance Ram running in Americas", "RAM", "Preemptible", US, 0.001),
    ]
}

fn machine(name: &str, region: &str, cpus: u32, gib: u64, gpus: &[(&str, u32)]) -> Machine {
    Machine {
        name: name.into(),
        region: region.into(),
        guest_cpus: cpus,
        memory_mb: gib * 1024,
        gpus: gpus.iter().map(|(k, n)| (k.to_string(), *n)).collect(),
    }
}

#[test]
fn a_vm_hour_is_cores_plus_memory_plus_gpus_in_each_model() {
    let at = DateTime::parse_from_rfc3339("2026-03-01T00:00:00Z").unwrap().with_timezone(&Utc);
    let machines = [
        machine("a3-highgpu-8g", "us-central1", 208, 1872, &[("nvidia-h100-80gb", 8)]),
        machine("a3-megagpu-8g", "us-central1", 208, 1872, &[("nvidia-h100-mega-80gb", 8)]),
        machine("a2-highgpu-1g", "us-central1", 12, 85, &[("nvidia-tesla-a100", 1)]),
        machine("a4-highgpu-8g", "us-central1", 224, 3968, &[("nvidia-b200", 8)]),
        machine("n2-standard-4", "us-central1", 4, 16, &[]),
        // No SKU of this region at all: no price, not a zero.
        machine("g2-standard-4", "us-central1", 4, 16, &[("nvidia-l4", 1)]),
    ];
    let got = catalog_prices(&catalog(), &machines, "USD", at);
    assert_eq!(got.fetched_at, at);
    assert_eq!(got.currency, "USD");
    let p = |mt: &str| got.per_hour.get(mt).cloned().unwrap_or_default();
    let table: &[(&str, &[(&str, f64)])] = &[
        // 208 × core + 1872 GiB × ram + 8 × GPU.
        (
            "a3-highgpu-8g",
            &[("flex", 37.662504), ("reservation", 87.904), ("spot", 27.952), ("standard", 87.904)],
        ),
        // A3 Mega: its own series (A3Plus) and GPU (H100 80GB Plus); only standard is sold here.
        ("a3-megagpu-8g", &[("reservation", 99.856), ("standard", 99.856)]),
        // The 40 GB A100, not the 80 GB one.
        ("a2-highgpu-1g", &[("reservation", 3.6), ("standard", 3.6)]),
        ("a4-highgpu-8g", &[("reservation", 128.88), ("spot", 39.6336), ("standard", 128.88)]),
        ("n2-standard-4", &[("reservation", 0.194236), ("spot", 0.046), ("standard", 0.194236)]),
        ("g2-standard-4", &[]),
    ];
    for (mt, want) in table {
        let have = p(mt);
        let have: Vec<(&str, f64)> = have.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        assert_eq!(have.len(), want.len(), "{mt}: {have:?}");
        for ((hk, hv), (wk, wv)) in have.iter().zip(want.iter()) {
            assert_eq!(hk, wk, "{mt}");
            assert!((hv - wv).abs() < 1e-6, "{mt} {wk}: {hv} != {wv}");
        }
    }
    assert!(!got.per_hour.contains_key("g2-standard-4"));
}

#[test]
fn doubts_are_settled_towards_the_higher_price() {
    let at = DateTime::parse_from_rfc3339("2026-03-01T00:00:00Z").unwrap().with_timezone(&Utc);
    let mut skus = catalog();
    // The same machine type in a dearer region: the highest price wins.
    skus.push(sku("N2 Instance Core running in Belgium", "CPU", "OnDemand", &["europe-west1"], 0.05));
    skus.push(sku("N2 Instance Ram running in Belgium", "RAM", "OnDemand", &["europe-west1"], 0.005));
    // Tiers: the highest.
    skus.push(sku_with("N2 Instance Core running in Iowa", "CPU", "Preemptible", US, "h", &[0.0, 0.009]));
    let machines = [
        machine("n2-standard-4", "us-central1", 4, 16, &[]),
        machine("n2-standard-4", "europe-west1", 4, 16, &[]),
    ];
    let got = catalog_prices(&skus, &machines, "USD", at);
    let n2 = &got.per_hour["n2-standard-4"];
    assert!((n2["standard"] - (4.0 * 0.05 + 16.0 * 0.005)).abs() < 1e-9, "{n2:?}");
    assert!((n2["spot"] - (4.0 * 0.009 + 16.0 * 0.001)).abs() < 1e-9, "{n2:?}");

    // Memory priced in another unit than GiB-hours is not guessed at.
    let skus = vec![
        sku("N2 Instance Core running in Americas", "CPU", "OnDemand", US, 0.03),
        sku_with("N2 Instance Ram running in Americas", "RAM", "OnDemand", US, "GBy.mo", &[3.0]),
    ];
    let got = catalog_prices(&skus, &machines[..1], "USD", at);
    assert!(got.per_hour.is_empty(), "{:?}", got.per_hour);
}
