//! List answers on the wire: a page, its warnings, an aggregated list's scopes, and what it did not
//! see ([`Unreachable`]).

use std::collections::BTreeMap;

use serde::Deserialize;

use super::instance_types::Instance;

/// One page of a list call. GCE names the item array `items`, except listManagedInstances
/// (`managedInstances`).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
#[serde(bound(deserialize = "T: Deserialize<'de>"))]
pub(crate) struct Page<T> {
    #[serde(default, alias = "managedInstances")]
    pub items: Vec<T>,
    #[serde(default)]
    pub next_page_token: String,
}

/// `warning` of a list or of one scope of an aggregated list: `code` (`NO_RESULTS_ON_PAGE`,
/// `UNREACHABLE`, `PARTIAL_SUCCESS`, ...), `message`, and `data` as key/value pairs (`scope`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ListWarning {
    pub code: String,
    pub message: String,
    pub data: Vec<WarningData>,
}

/// One `warning.data[]` entry.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct WarningData {
    pub key: String,
    pub value: String,
}

impl ListWarning {
    /// The warning says the answer is partial: a scope did not answer (docs/gce-facts.md,
    /// "Instances").
    pub fn is_partial(&self) -> bool {
        matches!(self.code.as_str(), "UNREACHABLE" | "PARTIAL_SUCCESS")
    }

    /// The scopes its `data` names (`key: "scope"`).
    pub fn scopes(&self) -> impl Iterator<Item = &str> {
        self.data.iter().filter(|d| d.key == "scope").map(|d| d.value.as_str())
    }
}

/// What an aggregated list did not see: the zones GCE did not answer for. Their resources are
/// missing from the answer, which says nothing about whether they exist.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Unreachable {
    /// Zones (`us-central1-b`) left out of the answer.
    pub zones: std::collections::BTreeSet<String>,
    /// Set when the answer is partial but does not say which zones it left out (an entry that is
    /// not a zone, or a list-level warning without a scope): then no absence in it can be believed.
    pub unscoped: Option<String>,
}

impl Unreachable {
    /// The answer was complete.
    pub fn is_empty(&self) -> bool {
        self.zones.is_empty() && self.unscoped.is_none()
    }

    /// Records one scope GCE did not answer for (`zones/Z`, `projects/P/zones/Z` or a full URL);
    /// anything else makes the whole answer partial without a zone to blame.
    pub fn add_scope(&mut self, scope: &str, why: &str) {
        let mut parts = scope.split('/');
        let zone =
            parts.by_ref().find(|p| *p == "zones").and_then(|_| parts.next()).filter(|z| !z.is_empty());
        match zone {
            Some(z) => {
                self.zones.insert(z.to_string());
            }
            None => {
                self.unscoped.get_or_insert_with(|| format!("{scope}: {why}"));
            }
        }
    }

    /// Reads one page: scopes whose warning says partial, the list's `unreachables`, and a
    /// list-level partial warning (by the scopes its data names, or none).
    pub(crate) fn add_page(&mut self, page: &InstanceAggregatedPage) {
        self.add_parts(
            page.items.iter().map(|(scope, list)| (scope.as_str(), list.warning.as_ref())),
            &page.unreachables,
            page.warning.as_ref(),
        );
    }

    /// [`Unreachable::add_page`] from a page's parts: each scope's warning, the list's
    /// `unreachables` and its warning.
    pub(crate) fn add_parts<'s>(
        &mut self,
        scopes: impl Iterator<Item = (&'s str, Option<&'s ListWarning>)>,
        unreachables: &[String],
        warning: Option<&ListWarning>,
    ) {
        for (scope, warning) in scopes {
            if let Some(w) = warning.filter(|w| w.is_partial()) {
                self.add_scope(scope, &w.code);
            }
        }
        for scope in unreachables {
            self.add_scope(scope, "listed in unreachables");
        }
        if let Some(w) = warning.filter(|w| w.is_partial()) {
            let mut named = false;
            for scope in w.scopes() {
                named = true;
                self.add_scope(scope, &w.code);
            }
            if !named {
                self.unscoped.get_or_insert_with(|| format!("{}: {}", w.code, w.message));
            }
        }
    }
}

/// One `items` value of an aggregated list.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct InstancesScopedList {
    pub instances: Vec<Instance>,
    /// Replaces `instances` when the scope has none to show: `NO_RESULTS_ON_PAGE` (nothing there)
    /// or `UNREACHABLE` (the zone did not answer: its VMs are unknown).
    pub warning: Option<ListWarning>,
}

/// One page of `instances.aggregatedList`: `items` maps `zones/x` to a scoped list.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct InstanceAggregatedPage {
    pub items: BTreeMap<String, InstancesScopedList>,
    pub next_page_token: String,
    /// Scopes that did not answer (a partial success).
    pub unreachables: Vec<String>,
    pub warning: Option<ListWarning>,
}
