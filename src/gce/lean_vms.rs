//! `instances.aggregatedList` pages decoded lean, for the reconciler's VM list.
//!
//! At 10,000 VMs a pass reads 20 pages of 500 VMs. Decoded into [`super::Instance`] every VM costs a
//! dozen allocations (its strings, its metadata items, its network interfaces) that the pass drops
//! at once. Here a page is decoded into fields borrowed from the page's bytes ([`LeanVm`]): only
//! what a pass reads is kept (name, zone, status, creation and termination times, the `created-by`
//! metadata value, the first interface's IP); every other metadata item, interface and field is
//! skipped without being built. A string is copied only when it has JSON escapes in it.

use super::types::{ListWarning, Unreachable};
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use std::borrow::Cow;
use std::fmt;

/// One VM of an aggregated list as a pass reads it, borrowed from the page.
#[derive(Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", default)]
pub struct LeanVm<'a> {
    #[serde(borrow)]
    pub name: Cow<'a, str>,
    /// The zone's URL or name as GCE gave it; empty when `fields=` left it out (the scope says it).
    #[serde(borrow)]
    pub zone: Cow<'a, str>,
    #[serde(borrow)]
    pub status: Cow<'a, str>,
    #[serde(borrow)]
    pub creation_timestamp: Cow<'a, str>,
    #[serde(borrow)]
    metadata: Option<LeanMetadata<'a>>,
    #[serde(borrow)]
    network_interfaces: FirstIp<'a>,
    #[serde(borrow)]
    resource_status: Option<LeanResourceStatus<'a>>,
}

impl LeanVm<'_> {
    /// URL of the MIG that made this VM (`created-by` metadata).
    pub fn created_by(&self) -> Option<&str> {
        self.metadata.as_ref()?.items.0.as_deref()
    }

    /// Internal IP of the first network interface.
    pub fn internal_ip(&self) -> Option<&str> {
        self.network_interfaces.0.as_deref().filter(|ip| !ip.is_empty())
    }

    /// `resourceStatus.physicalHostTopology` as `CLUSTER/BLOCK/SUBBLOCK/HOST` (a part GCE left out
    /// is empty); `None` when GCE gave none, or gave every part empty.
    pub fn topology(&self) -> Option<String> {
        let t = self.resource_status.as_ref()?.physical_host_topology.as_ref()?;
        let parts = [&t.cluster, &t.block, &t.subblock, &t.host];
        if parts.iter().all(|p| p.is_empty()) {
            return None;
        }
        // Joined by hand: 10,000 VMs a pass, and `format!`'s machinery cost more than the copies.
        let mut joined = String::with_capacity(parts.iter().map(|p| p.len() + 1).sum());
        for (i, part) in parts.iter().enumerate() {
            if i > 0 {
                joined.push('/');
            }
            joined.push_str(part);
        }
        Some(joined)
    }

    /// `resourceStatus.scheduling.terminationTimestamp`, as GCE wrote it.
    pub fn termination_timestamp(&self) -> Option<&str> {
        self.resource_status.as_ref()?.scheduling.as_ref()?.termination_timestamp.as_deref()
    }
}

#[derive(Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(default)]
struct LeanMetadata<'a> {
    #[serde(borrow)]
    items: CreatedBy<'a>,
}

/// The `value` of the `created-by` item of `metadata.items`; the other items are skipped.
#[derive(Debug, Default, PartialEq, Eq)]
struct CreatedBy<'a>(Option<Cow<'a, str>>);

/// One of `metadata.items`: its `key`, and its `value` only when the key is `created-by` (GCE
/// prints the key first; the value of another item, such as a template's startup script, is skipped
/// unchecked and unbuilt).
#[derive(Default)]
struct MetadataItem<'a> {
    key: Cow<'a, str>,
    value: Option<Cow<'a, str>>,
}

impl<'de: 'a, 'a> Deserialize<'de> for MetadataItem<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = MetadataItem<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a metadata item")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut item = MetadataItem::default();
                let mut key_seen = false;
                while let Some(field) = map.next_key::<Cow<'de, str>>()? {
                    match field.as_ref() {
                        "key" => {
                            item.key = map.next_value()?;
                            key_seen = true;
                        }
                        "value" if key_seen && item.key != "created-by" => {
                            map.next_value::<IgnoredAny>()?;
                        }
                        "value" => item.value = map.next_value()?,
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(item)
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for CreatedBy<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = CreatedBy<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("metadata items")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                // The first `created-by` item counts, with its value or without one.
                let mut found = None;
                while let Some(item) = seq.next_element::<MetadataItem<'a>>()? {
                    if found.is_none() && item.key == "created-by" {
                        found = Some(item.value);
                    }
                }
                Ok(CreatedBy(found.flatten()))
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(CreatedBy(None))
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// The `networkIP` of the first of `networkInterfaces`; the others are skipped.
#[derive(Debug, Default, PartialEq, Eq)]
struct FirstIp<'a>(Option<Cow<'a, str>>);

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Nic<'a> {
    #[serde(borrow, default, rename = "networkIP")]
    network_ip: Option<Cow<'a, str>>,
}

impl<'de: 'a, 'a> Deserialize<'de> for FirstIp<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = FirstIp<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("network interfaces")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let first = seq.next_element::<Nic<'a>>()?.and_then(|n| n.network_ip);
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(FirstIp(first))
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(FirstIp(None))
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

#[derive(Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(default)]
#[serde(rename_all = "camelCase")]
struct LeanResourceStatus<'a> {
    #[serde(borrow)]
    scheduling: Option<LeanScheduling<'a>>,
    #[serde(borrow)]
    physical_host_topology: Option<LeanTopology<'a>>,
}

/// `resourceStatus.physicalHostTopology`.
#[derive(Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(default)]
struct LeanTopology<'a> {
    #[serde(borrow)]
    cluster: Cow<'a, str>,
    #[serde(borrow)]
    block: Cow<'a, str>,
    #[serde(borrow)]
    subblock: Cow<'a, str>,
    #[serde(borrow)]
    host: Cow<'a, str>,
}

#[derive(Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", default)]
struct LeanScheduling<'a> {
    #[serde(borrow)]
    termination_timestamp: Option<Cow<'a, str>>,
}

/// One page of `instances.aggregatedList` without its VMs, which [`LeanPage::read`] hands out one
/// at a time as it decodes them (no list of 500 VMs is built): what is left is where the next
/// page starts and what the page says it left out.
#[derive(Debug, Default)]
pub(crate) struct LeanPage {
    pub next_page_token: String,
    /// Each scope of `items` with its `warning`, in the page's order.
    scopes: Vec<(String, Option<ListWarning>)>,
    unreachables: Vec<String>,
    warning: Option<ListWarning>,
}

impl LeanPage {
    /// Decodes one page, calling `each(zone, vm)` for every VM with its zone's name (from the VM's
    /// `zone`, else from its scope's key `zones/{zone}`) as soon as the VM is decoded.
    pub(crate) fn read<'a>(bytes: &'a [u8], mut each: impl FnMut(&str, LeanVm<'a>)) -> Result<Self, String> {
        let mut de = serde_json::Deserializer::from_slice(bytes);
        let page = de.deserialize_map(PageVisitor { each: &mut each }).map_err(|e| e.to_string())?;
        de.end().map_err(|e| e.to_string())?;
        Ok(page)
    }

    /// Adds what the page left out to `unreachable`.
    pub(crate) fn unreachable_into(&self, unreachable: &mut Unreachable) {
        unreachable.add_parts(
            self.scopes.iter().map(|(scope, warning)| (scope.as_str(), warning.as_ref())),
            &self.unreachables,
            self.warning.as_ref(),
        );
    }
}

/// The page object: `items` is handed to [`ItemsVisitor`], the rest kept or skipped.
struct PageVisitor<'f, F> {
    each: &'f mut F,
}

impl<'de, F: FnMut(&str, LeanVm<'de>)> Visitor<'de> for PageVisitor<'_, F> {
    type Value = LeanPage;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an aggregated list page")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<LeanPage, A::Error> {
        let mut page = LeanPage::default();
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            match key.as_ref() {
                "items" => {
                    map.next_value_seed(Seed(ItemsVisitor { each: &mut *self.each, page: &mut page }))?
                }
                "nextPageToken" => page.next_page_token = map.next_value()?,
                "unreachables" => page.unreachables = map.next_value()?,
                "warning" => page.warning = map.next_value()?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(page)
    }
}

/// `items`: each scope's `instances` handed to `each` with the scope's zone, its `warning` kept.
struct ItemsVisitor<'f, F> {
    each: &'f mut F,
    page: &'f mut LeanPage,
}

impl<'de, F: FnMut(&str, LeanVm<'de>)> Visitor<'de> for ItemsVisitor<'_, F> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a map of scopes")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(scope) = map.next_key::<String>()? {
            let mut warning = None;
            let zone = scope.strip_prefix("zones/").unwrap_or_default();
            map.next_value_seed(Seed(ScopeVisitor { zone, each: &mut *self.each, warning: &mut warning }))?;
            self.page.scopes.push((scope, warning));
        }
        Ok(())
    }
}

/// One scope of `items`: `instances` and `warning`.
struct ScopeVisitor<'f, F> {
    zone: &'f str,
    each: &'f mut F,
    warning: &'f mut Option<ListWarning>,
}

impl<'de, F: FnMut(&str, LeanVm<'de>)> Visitor<'de> for ScopeVisitor<'_, F> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a scoped list")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            match key.as_ref() {
                "instances" => {
                    map.next_value_seed(Seed(InstancesVisitor { zone: self.zone, each: &mut *self.each }))?
                }
                "warning" => *self.warning = map.next_value()?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

/// A scope's `instances`, each VM handed to `each` as soon as it is decoded.
struct InstancesVisitor<'f, F> {
    zone: &'f str,
    each: &'f mut F,
}

impl<'de, F: FnMut(&str, LeanVm<'de>)> Visitor<'de> for InstancesVisitor<'_, F> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of instances")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(vm) = seq.next_element::<LeanVm<'de>>()? {
            let escaped;
            let zone = match &vm.zone {
                Cow::Borrowed("") => self.zone,
                Cow::Borrowed(url) => super::last_segment(url),
                // A zone with escapes in it (never seen): copied, as `vm` moves to `each`.
                Cow::Owned(url) if url.is_empty() => self.zone,
                Cow::Owned(url) => {
                    escaped = super::last_segment(url).to_string();
                    &escaped
                }
            };
            (self.each)(zone, vm);
        }
        Ok(())
    }
}

/// A visitor used as a seed: `items`, a scope and `instances` are maps and a list.
struct Seed<V>(V);

impl<'de, V: Visitor<'de>> DeserializeSeed<'de> for Seed<V> {
    type Value = V::Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        d.deserialize_any(self.0)
    }
}

#[cfg(test)]
#[path = "lean_vms_tests.rs"]
mod tests;
