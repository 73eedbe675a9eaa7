//! `instances.aggregatedList` pages decoded lean, for the reconciler's VM list.
//!
//! At 10,000 VMs a pass reads 20 pages of 500 VMs. Decoded into [`super::Instance`] every VM costs a
//! dozen allocations (its strings, its metadata items, its network interfaces) that the pass drops
//! at once. Here a page is decoded into fields borrowed from the page's bytes ([`LeanVm`]): only
//! what a pass reads is kept (name, zone, status, id, creation and termination times, the `created-by`
//! metadata value, the first interface's IP, the physical host topology, and the upcoming
//! maintenance as its raw JSON text, decoded only for the few VMs that have one); every other
//! metadata item, interface and field is skipped without being built. A string is copied only when
//! it has JSON escapes in it.

use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
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
    /// GCE's `id` (a uint64 as a decimal string): tells two VMs of one name apart (usage spans).
    #[serde(borrow)]
    pub id: Cow<'a, str>,
    #[serde(borrow)]
    metadata: Option<LeanMetadata<'a>>,
    #[serde(borrow)]
    network_interfaces: FirstIp<'a>,
    #[serde(borrow)]
    resource_status: Option<LeanResourceStatus<'a>>,
    /// `scheduling` (only its `provisioningModel` is read).
    #[serde(borrow)]
    scheduling: Option<LeanScheduling<'a>>,
}

impl<'a> LeanVm<'a> {
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
        self.resource_status
            .as_ref()?
            .scheduling
            .as_ref()?
            .termination_timestamp
            .as_ref()
            .map(|t| t.0.as_ref())
    }

    /// `scheduling.provisioningModel` (RESERVATION_BOUND, FLEX_START, SPOT, STANDARD), if GCE gave it.
    pub fn provisioning_model(&self) -> Option<&str> {
        self.scheduling.as_ref()?.provisioning_model.as_ref().map(|t| t.0.as_ref())
    }

    /// `resourceStatus.upcomingMaintenance` as the JSON text GCE wrote (borrowed from the page, not
    /// decoded: most VMs have none, and the pass decodes the few that do).
    pub fn upcoming_maintenance(&self) -> Option<&str> {
        self.resource_status.as_ref()?.upcoming_maintenance.as_ref().map(|m| m.0)
    }

    /// The strings a pass reads, in [`Parts`]' order; [`LeanVm::from_parts`] makes a VM that reads
    /// the same.
    pub(crate) fn parts(&self) -> Parts<'_> {
        let status = self.resource_status.as_ref();
        let topology = status.and_then(|s| s.physical_host_topology.as_ref());
        [
            Some(self.name.as_ref()),
            Some(self.zone.as_ref()),
            Some(self.status.as_ref()),
            Some(self.creation_timestamp.as_ref()),
            Some(self.id.as_ref()),
            self.created_by(),
            self.network_interfaces.0.as_deref(),
            self.termination_timestamp(),
            topology.map(|t| t.cluster.as_ref()),
            topology.map(|t| t.block.as_ref()),
            topology.map(|t| t.subblock.as_ref()),
            topology.map(|t| t.host.as_ref()),
            self.provisioning_model(),
            self.upcoming_maintenance(),
        ]
    }

    /// A VM whose [`LeanVm::parts`] are `parts` (and whose accessors read as those of the VM they
    /// were taken from).
    pub(crate) fn from_parts(parts: Parts<'a>) -> LeanVm<'a> {
        let maintenance = parts[PARTS - 1].map(RawJson);
        let [name, zone, status, created, id, created_by, ip, termination, cluster, block, subblock, host, model, _] =
            parts.map(|p| p.map(Cow::Borrowed));
        let topology =
            [&cluster, &block, &subblock, &host].iter().any(|p| p.is_some()).then(|| LeanTopology {
                cluster: cluster.unwrap_or_default(),
                block: block.unwrap_or_default(),
                subblock: subblock.unwrap_or_default(),
                host: host.unwrap_or_default(),
            });
        let scheduling = termination
            .map(|t| LeanScheduling { termination_timestamp: Some(Text(t)), provisioning_model: None });
        LeanVm {
            name: name.unwrap_or_default(),
            zone: zone.unwrap_or_default(),
            status: status.unwrap_or_default(),
            creation_timestamp: created.unwrap_or_default(),
            id: id.unwrap_or_default(),
            metadata: created_by.map(|v| LeanMetadata { items: CreatedBy(Some(v)) }),
            network_interfaces: FirstIp(ip),
            resource_status: (scheduling.is_some() || topology.is_some() || maintenance.is_some()).then_some(
                LeanResourceStatus {
                    scheduling,
                    physical_host_topology: topology,
                    upcoming_maintenance: maintenance,
                },
            ),
            scheduling: model
                .map(|m| LeanScheduling { termination_timestamp: None, provisioning_model: Some(Text(m)) }),
        }
    }
}

/// What a pass reads of a VM, as strings: name, zone, status, creation time, id, the `created-by` value,
/// the first interface's IP, the termination time, the physical host topology's cluster, block,
/// subblock and host, the provisioning model, and the upcoming maintenance's JSON text. `None`
/// where the VM has none (name, zone, status, creation time and id are
/// always there, empty when GCE left them out).
pub(crate) type Parts<'a> = [Option<&'a str>; PARTS];

/// How many [`Parts`] a VM has.
pub(crate) const PARTS: usize = 14;

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
                while let Some(Text(field)) = map.next_key::<Text<'de>>()? {
                    match field.as_ref() {
                        "key" => {
                            item.key = map.next_value::<Text<'a>>()?.0;
                            key_seen = true;
                        }
                        "value" if key_seen && item.key != "created-by" => {
                            map.next_value::<IgnoredAny>()?;
                        }
                        "value" => item.value = map.next_value::<Option<Text<'a>>>()?.map(|t| t.0),
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

/// A string borrowed from the page where it has no escapes (serde's own `Cow<str>` is always a
/// copy outside a derived field marked `borrow`).
#[derive(Debug, PartialEq, Eq)]
struct Text<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Text<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(v.to_string())))
            }
        }
        d.deserialize_str(V(std::marker::PhantomData))
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
    network_ip: Option<Text<'a>>,
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
                Ok(FirstIp(first.map(|t| t.0)))
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
    #[serde(borrow)]
    upcoming_maintenance: Option<RawJson<'a>>,
}

/// A JSON value's text as it is in the page (`upcomingMaintenance`): kept whole, decoded later.
#[derive(Debug, PartialEq, Eq)]
struct RawJson<'a>(&'a str);

impl<'de: 'a, 'a> Deserialize<'de> for RawJson<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        <&'a serde_json::value::RawValue>::deserialize(d).map(|raw| RawJson(raw.get()))
    }
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
    termination_timestamp: Option<Text<'a>>,
    #[serde(borrow)]
    provisioning_model: Option<Text<'a>>,
}
