//! From the catalog's SKUs to the price of one VM-hour of a machine type in each provisioning model:
//! a pure function ([`catalog_prices`]) of the SKUs, the machine types' shapes and their regions.
//!
//! Compute Engine does not price a machine type as one SKU: it bills each vCPU-hour and each
//! GiB-hour of memory of the machine series ("A3 Instance Core running in Americas", "A3 Instance
//! Ram ..."), and each GPU-hour ("Nvidia H100 80GB GPU running in Americas"), A3 included; A4 is the
//! exception, one "A4 Nvidia B200 (1 gpu slice)" SKU per GPU covering the whole machine. The
//! provisioning model is in the SKU's words: Spot is "Spot Preemptible ..." / "... attached to Spot
//! Preemptible VMs" (usage type `Preemptible`), DWS Flex Start is "DWS Defined Duration ..." /
//! "... attached to DWS Defined Duration VMs" (usage type `OnDemand`), standard is the plain SKU.
//! A reservation's VMs are billed at the standard price (a commitment, which discounts it, is not
//! in the list prices). Sources: docs/gce-facts.md, "Prices from the Cloud Billing catalog".
//!
//! Where the words could match several SKUs (a region sold under two SKUs, tiers of usage), the
//! highest price is taken: an estimate that errs high, never towards "free". A machine type whose
//! parts are not all found in a model (no DWS SKUs for an N2, say) has no price in that model.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use super::types::Sku;
use crate::usage::CatalogPrices;

/// What the mapping needs to know of one machine type, as `machineTypes.get` (and, for an N1 with
/// attached GPUs, the instance template) tell it, and the region its VMs run in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Machine {
    /// `a3-ultragpu-8g`.
    pub name: String,
    /// `us-central1`.
    pub region: String,
    pub guest_cpus: u32,
    /// GCE's MB (1024 of them a GiB).
    pub memory_mb: u64,
    /// Accelerator type (`nvidia-h200-141gb`) and count per VM.
    pub gpus: Vec<(String, u32)>,
}

/// A provisioning model as a SKU's words say it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum SkuModel {
    /// DWS Flex Start ("DWS Defined Duration").
    Flex,
    Spot,
    /// On-demand: standard VMs, and the VMs of a reservation.
    Standard,
}

impl SkuModel {
    /// The config's spellings this SKU model prices (a reservation's VMs pay the standard price).
    fn config_models(self) -> &'static [&'static str] {
        match self {
            SkuModel::Flex => &["flex"],
            SkuModel::Spot => &["spot"],
            SkuModel::Standard => &["standard", "reservation"],
        }
    }
}

/// What a SKU is the price of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    /// An hour of one vCPU of a machine series (`a3`, `a3plus`, `n1`).
    Core(String),
    /// An hour of one GiB of memory of a machine series.
    Ram(String),
    /// An hour of one GPU (`h100 80gb gpu`); a "gpu slice" is the whole machine's share per GPU.
    Gpu(String),
}

/// Words that make a SKU something else than the list price of running a VM.
const EXCLUDED: &[&str] = &[
    "commitment",
    "reserved",
    "calendar mode",
    "sole tenancy",
    "custom",
    "premium",
    "extended",
    "virtual workstation",
    "confidential",
    "licensing",
];

/// The provisioning model a SKU prices, or `None` for one that is no VM's list price (commitments,
/// reserved blocks, sole tenancy, custom machine types, ...).
pub fn sku_model(sku: &Sku) -> Option<SkuModel> {
    let d = sku.description.to_lowercase();
    if sku.category.usage_type.starts_with("Commit") || EXCLUDED.iter().any(|w| d.contains(w)) {
        return None;
    }
    if d.contains("dws defined duration") || d.contains("dws flex start") || d.contains("flex-start") {
        return Some(SkuModel::Flex);
    }
    if d.contains("preemptible") || sku.category.usage_type == "Preemptible" {
        return Some(SkuModel::Spot);
    }
    (sku.category.usage_type == "OnDemand").then_some(SkuModel::Standard)
}

/// What a SKU prices, from its description (and `resourceGroup` for GPUs): the model's words and
/// the place ("running in Americas") taken off, lower case, without "Nvidia", "Tesla", "Instance",
/// "Predefined".
pub fn sku_part(sku: &Sku) -> Option<Part> {
    let mut d = sku.description.to_lowercase();
    for cut in [" running in ", " attached to "] {
        if let Some(i) = d.find(cut) {
            d.truncate(i);
        }
    }
    for prefix in ["spot preemptible ", "preemptible ", "dws defined duration ", "dws flex start "] {
        if let Some(rest) = d.strip_prefix(prefix) {
            d = rest.to_string();
        }
    }
    let words: Vec<&str> = d
        .split_whitespace()
        .filter(|w| !matches!(*w, "nvidia" | "tesla" | "instance" | "predefined"))
        .collect();
    let label = words.join(" ");
    if sku.category.resource_group == "GPU" || label.ends_with(" gpu") || label.contains("gpu slice") {
        return Some(Part::Gpu(label));
    }
    let (last, family) = words.split_last()?;
    let family = family.join(" ");
    if family.is_empty() {
        return None;
    }
    match *last {
        "core" => Some(Part::Core(family)),
        "ram" => Some(Part::Ram(family)),
        _ => None,
    }
}

/// The series names the catalog may use for a machine type's cores and memory.
pub fn series_names(machine_type: &str) -> Vec<String> {
    let m = machine_type.to_lowercase();
    if m.starts_with("a3-megagpu") {
        return vec!["a3plus".into(), "a3 mega".into(), "a3mega".into()];
    }
    if m.starts_with("a3-ultragpu") {
        return vec!["a3 ultra".into(), "a3ultra".into()];
    }
    let series = m.split('-').next().unwrap_or_default().to_string();
    vec![series.clone(), format!("{series} amd")]
}

/// The labels ([`sku_part`]) the catalog may give one GPU of an accelerator type.
pub fn gpu_labels(accelerator_type: &str) -> Vec<String> {
    let a = accelerator_type.rsplit('/').next().unwrap_or_default().to_lowercase();
    let bare = a.trim_start_matches("nvidia-").trim_start_matches("tesla-").replace('-', " ");
    let mut labels = vec![format!("{bare} gpu")];
    match bare.as_str() {
        "h100 mega 80gb" => labels.extend(["h100 80gb mega gpu".into(), "h100 80gb plus gpu".into()]),
        "b200" => labels.push("a4 b200 (1 gpu slice)".into()),
        _ => {}
    }
    labels
}

/// The hourly price of one unit of the SKU in force last, the highest of its tiers; `None` when its
/// unit is not `want` (`h` for vCPUs and GPUs, `GiBy.h` for memory).
fn unit_price(sku: &Sku, want: &str) -> Option<f64> {
    let info = sku.pricing_info.iter().max_by(|a, b| a.effective_time.cmp(&b.effective_time))?;
    let e = &info.pricing_expression;
    if e.usage_unit != want {
        return None;
    }
    e.tiered_rates
        .iter()
        .map(|r| r.unit_price.amount())
        .fold(None, |m, p| Some(m.map_or(p, |m: f64| m.max(p))))
}

/// The SKUs of one region, classified once.
struct Priced<'a> {
    model: SkuModel,
    part: Part,
    sku: &'a Sku,
}

/// Which part of a VM is looked for, under which names.
#[derive(Clone, Copy)]
enum Want<'a> {
    Core(&'a [String]),
    Ram(&'a [String]),
    Gpu(&'a [String]),
}

/// The highest price of the part `want` in `model` among `skus`, and whether it is a GPU slice
/// (the whole machine's share per GPU).
fn find(skus: &[Priced<'_>], model: SkuModel, want: Want<'_>) -> Option<(f64, bool)> {
    let mut best: Option<(f64, bool)> = None;
    for p in skus.iter().filter(|p| p.model == model) {
        let (name, names, unit) = match (&p.part, want) {
            (Part::Core(f), Want::Core(n)) => (f, n, "h"),
            (Part::Ram(f), Want::Ram(n)) => (f, n, "GiBy.h"),
            (Part::Gpu(l), Want::Gpu(n)) => (l, n, "h"),
            _ => continue,
        };
        if !names.iter().any(|n| n == name) {
            continue;
        }
        if let Some(price) = unit_price(p.sku, unit) {
            if best.is_none_or(|(b, _)| price > b) {
                best = Some((price, name.contains("gpu slice")));
            }
        }
    }
    best
}

/// One VM-hour of `m` in `model`, or `None` when a part of it has no SKU.
fn vm_hour(skus: &[Priced<'_>], m: &Machine, model: SkuModel) -> Option<f64> {
    let mut gpus = 0.0;
    let mut whole_machine = false;
    for (kind, count) in &m.gpus {
        let (price, slice) = find(skus, model, Want::Gpu(&gpu_labels(kind)))?;
        gpus += price * f64::from(*count);
        whole_machine |= slice;
    }
    if whole_machine {
        return Some(gpus);
    }
    let series = series_names(&m.name);
    let core = find(skus, model, Want::Core(&series))?.0;
    let ram = if m.memory_mb == 0 { 0.0 } else { find(skus, model, Want::Ram(&series))?.0 };
    Some(core * f64::from(m.guest_cpus) + ram * (m.memory_mb as f64 / 1024.0) + gpus)
}

/// The price of one VM-hour of each machine by provisioning model (config spellings: flex, spot,
/// standard, reservation), from `skus` (in `currency`), as fetched at `fetched_at`. A machine type
/// met in several regions gets the highest price.
pub fn catalog_prices(
    skus: &[Sku],
    machines: &[Machine],
    currency: &str,
    fetched_at: DateTime<Utc>,
) -> CatalogPrices {
    let mut per_hour: BTreeMap<String, BTreeMap<String, f64>> = BTreeMap::new();
    let classified: Vec<Priced<'_>> = skus
        .iter()
        .filter_map(|sku| Some(Priced { model: sku_model(sku)?, part: sku_part(sku)?, sku }))
        .collect();
    for m in machines {
        let here: Vec<Priced<'_>> = classified
            .iter()
            .filter(|p| p.sku.service_regions.contains(&m.region))
            .map(|p| Priced { model: p.model, part: p.part.clone(), sku: p.sku })
            .collect();
        for model in [SkuModel::Flex, SkuModel::Spot, SkuModel::Standard] {
            let Some(price) = vm_hour(&here, m, model) else { continue };
            let price = (price * 1e6).round() / 1e6;
            let entry = per_hour.entry(m.name.clone()).or_default();
            for name in model.config_models() {
                let slot = entry.entry(name.to_string()).or_insert(price);
                *slot = slot.max(price);
            }
        }
    }
    CatalogPrices { fetched_at, currency: currency.to_string(), per_hour }
}

#[cfg(test)]
#[path = "prices_tests.rs"]
mod tests;
