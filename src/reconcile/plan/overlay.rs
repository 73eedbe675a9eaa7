//! `Overlay`: one map of the desired state as the planner sees it, the record with this round's
//! changes over it.
//!
//! Reading never copies; changing an entry copies that one entry. A steady plan at 10,000 nodes
//! changes next to nothing, so a plan that copied the desired state first would spend most of a
//! pass's CPU on that copy and its drop (`make bench`, the reconcile pass row).

use std::borrow::{Borrow, Cow};
use std::collections::BTreeMap;

/// A map of the record (`base`) under this round's changes.
pub(super) struct Overlay<'a, K, V> {
    base: &'a BTreeMap<K, V>,
    /// Entries changed or added this round (an entry is never removed). Boxed: a round that
    /// changes every node inserts them in key order, which leaves a map's nodes about half full, and
    /// half-empty room for a whole `Node` (~240 bytes) at each slot was ~2 MB of the daemon's peak
    /// at 10,000 nodes.
    changed: BTreeMap<K, Box<V>>,
}

impl<'a, K: Ord + Clone, V: Clone + PartialEq> Overlay<'a, K, V> {
    pub(super) fn new(base: &'a BTreeMap<K, V>) -> Self {
        Overlay { base, changed: BTreeMap::new() }
    }

    pub(super) fn get<Q: Ord + ?Sized>(&self, k: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
    {
        self.changed.get(k).map(|v| &**v).or_else(|| self.base.get(k))
    }

    /// The entry as it is now: borrowed from the record while unchanged, so holding it does not
    /// borrow the planner.
    pub(super) fn current<Q: Ord + ?Sized>(&self, k: &Q) -> Option<Cow<'a, V>>
    where
        K: Borrow<Q>,
    {
        match self.changed.get(k) {
            Some(v) => Some(Cow::Owned(V::clone(v))),
            None => self.base.get(k).map(Cow::Borrowed),
        }
    }

    pub(super) fn contains_key<Q: Ord + ?Sized>(&self, k: &Q) -> bool
    where
        K: Borrow<Q>,
    {
        self.changed.contains_key(k) || self.base.contains_key(k)
    }

    /// The entry to change (copied from the record the first time).
    pub(super) fn get_mut<Q: Ord + ?Sized>(&mut self, k: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
    {
        if !self.changed.contains_key(k) {
            let (key, v) = self.base.get_key_value(k)?;
            self.changed.insert(key.clone(), Box::new(v.clone()));
        }
        self.changed.get_mut(k).map(|v| &mut **v)
    }

    pub(super) fn insert(&mut self, k: K, v: V) {
        self.changed.insert(k, Box::new(v));
    }

    /// Every entry as it is now, in key order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        let mut base = self.base.iter().peekable();
        let mut changed = self.changed.iter().map(|(k, v)| (k, &**v)).peekable();
        std::iter::from_fn(move || match (base.peek(), changed.peek()) {
            (Some((kb, _)), Some((kc, _))) => match kb.cmp(kc) {
                std::cmp::Ordering::Less => base.next(),
                std::cmp::Ordering::Greater => changed.next(),
                std::cmp::Ordering::Equal => {
                    base.next();
                    changed.next()
                }
            },
            (Some(_), None) => base.next(),
            (None, _) => changed.next(),
        })
    }

    /// The entries of `sorted` (in key order, as a `BTreeMap` gives them) whose key this map lacks,
    /// found by walking both in order: at 10,000 nodes a lookup for each would cost ~20 string
    /// comparisons apiece, a walk one.
    pub(super) fn missing<'k, Q, T>(&self, sorted: impl Iterator<Item = (&'k Q, T)>) -> Vec<(&'k Q, T)>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized + 'k,
    {
        let mut mine = self.iter().map(|(k, _)| k.borrow()).peekable();
        let mut out = Vec::new();
        for (key, value) in sorted {
            while mine.next_if(|k| *k < key).is_some() {}
            if mine.peek() != Some(&key) {
                out.push((key, value));
            }
        }
        out
    }

    pub(super) fn values(&self) -> impl Iterator<Item = &V> {
        self.iter().map(|(_, v)| v)
    }

    /// Every key, in order, to walk while entries change: borrowed from the record where it can be.
    pub(super) fn keys_now(&self) -> Vec<Cow<'a, K>> {
        let base = self.base;
        let mut keys: Vec<Cow<'a, K>> = base.keys().map(Cow::Borrowed).collect();
        let added: Vec<&K> = self.changed.keys().filter(|k| !base.contains_key(k)).collect();
        if !added.is_empty() {
            keys.extend(added.into_iter().map(|k| Cow::Owned(k.clone())));
            keys.sort();
        }
        keys
    }

    /// The entries that differ from the record, in key order. Room for every entry touched is taken
    /// at once: a Vec grown by doubling holds the old and the new buffer while it copies (at 10,000
    /// nodes, ~3.7 MB of the daemon's peak heap), and the pages of the room left unused are never
    /// touched, so they cost no memory.
    pub(super) fn into_changes(self) -> Vec<V> {
        let base = self.base;
        let mut out = Vec::with_capacity(self.changed.len());
        out.extend(self.changed.into_iter().filter(|(k, v)| base.get(k) != Some(&**v)).map(|(_, v)| *v));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `missing` is "not `contains_key`", whatever the record, this round's changes and the keys
    /// asked about hold (empty, interleaved, all before, all after, equal).
    #[test]
    fn missing_is_what_contains_key_denies() {
        let map = |keys: &[&str]| keys.iter().map(|k| (k.to_string(), 0)).collect::<BTreeMap<String, i32>>();
        let cases: &[(&[&str], &[&str], &[&str])] = &[
            (&[], &[], &["a", "b"]),
            (&["a", "c", "e"], &[], &["a", "b", "c", "d", "e", "f"]),
            (&["b", "d"], &["a", "e"], &["a", "b", "c", "d", "e", "f"]),
            (&["x", "y"], &["z"], &["a", "b"]),
            (&["a", "b"], &["b", "c"], &["x", "y", "z"]),
            (&["a", "b"], &["a"], &["a", "b"]),
            (&["a"], &[], &[]),
        ];
        for (base, changed, asked) in cases {
            let base = map(base);
            let mut overlay = Overlay::new(&base);
            for k in *changed {
                overlay.insert(k.to_string(), 1);
            }
            let asked = map(asked);
            let got: Vec<&str> = overlay.missing(asked.iter()).into_iter().map(|(k, _)| k.as_str()).collect();
            let want: Vec<&str> =
                asked.keys().filter(|k| !overlay.contains_key(k.as_str())).map(String::as_str).collect();
            assert_eq!(got, want, "record {base:?}, changed {changed:?}");
        }
    }
}
