//! `instances.aggregatedList` pages decoded lean, for the reconciler's VM list.
//!
//! At 10,000 VMs a pass reads 20 pages of 500 VMs. Decoded into [`super::Instance`] every VM costs a
//! dozen allocations (its strings, its metadata items, its network interfaces) that the pass drops
//! at once. Here a page is decoded into fields borrowed from the page's bytes ([`LeanVm`]): only
//! what a pass reads is kept (name, zone, status, creation and termination times, the `created-by`
//! metadata value, the first interface's IP); every other metadata item, interface and field is
//! skipped without being built. A string is copied only when it has JSON escapes in it.

use super::types::{ListWarning, Unreachable};
use serde::de::{Deserializer, IgnoredAny, SeqAccess, Visitor};
use serde::Deserialize;
use std::borrow::Cow;
use std::collections::BTreeMap;
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

#[derive(Deserialize)]
struct MetadataItem<'a> {
    #[serde(borrow)]
    key: Cow<'a, str>,
    #[serde(borrow, default)]
    value: Option<Cow<'a, str>>,
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

/// One `items` value of a lean page.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct LeanScopedList<'a> {
    #[serde(borrow)]
    instances: Vec<LeanVm<'a>>,
    warning: Option<ListWarning>,
}

/// One page of `instances.aggregatedList`, its VMs borrowed from the page's bytes.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct LeanPage<'a> {
    #[serde(borrow)]
    items: BTreeMap<String, LeanScopedList<'a>>,
    pub next_page_token: String,
    unreachables: Vec<String>,
    warning: Option<ListWarning>,
}

impl<'a> LeanPage<'a> {
    /// Decodes one page.
    pub(crate) fn decode(bytes: &'a [u8]) -> Result<Self, String> {
        serde_json::from_slice(bytes).map_err(|e| e.to_string())
    }

    /// Adds what the page left out to `unreachable`.
    pub(crate) fn unreachable_into(&self, unreachable: &mut Unreachable) {
        unreachable.add_parts(
            self.items.iter().map(|(scope, list)| (scope.as_str(), list.warning.as_ref())),
            &self.unreachables,
            self.warning.as_ref(),
        );
    }

    /// Every VM of the page with its zone's name (from the VM's `zone`, else from its scope's key
    /// `zones/{zone}`).
    pub(crate) fn vms(&self) -> impl Iterator<Item = (&str, &LeanVm<'a>)> {
        self.items.iter().flat_map(|(scope, list)| {
            list.instances.iter().map(move |vm| {
                let zone = if vm.zone.is_empty() {
                    scope.strip_prefix("zones/").unwrap_or_default()
                } else {
                    super::last_segment(&vm.zone)
                };
                (zone, vm)
            })
        })
    }
}

#[cfg(test)]
#[path = "lean_vms_tests.rs"]
mod tests;
