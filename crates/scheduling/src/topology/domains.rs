//! The per-group table of topology domains and how many selected pods each holds.
//!
//! Responsibility: store, for one topology group, every known domain of its key (a zone, a
//! hostname, …) with its pod count, answer count lookups in O(1), iterate domains in a
//! deterministic order (insertion order; callers break ties by name), and hand out a ready-made
//! `key In [domain]` requirement per domain so that answering a placement never allocates.
//! Inputs: domain names registered or recorded by the owning group. Outputs: counts, iteration,
//! a sorted snapshot for error messages.

use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;

use crate::requirements::Requirement;

/// One known domain.
#[derive(Debug, Clone)]
pub(crate) struct Domain {
    /// The domain value.
    pub(crate) name: Arc<str>,
    /// `key In [name]`, pre-built so answers are a clone (two reference-count bumps).
    pub(crate) single: Requirement,
    /// Selected pods recorded in the domain.
    pub(crate) count: i32,
}

/// Known domains of one group. Iteration order is insertion order; lookups go through a hash
/// index that is never iterated, so no hash order leaks into results.
#[derive(Debug, Clone, Default)]
pub(crate) struct DomainCounts {
    index: HashMap<Arc<str>, usize>,
    entries: Vec<Domain>,
    nonzero: usize,
}

impl DomainCounts {
    /// Makes `name` known (count 0) unless it already is; returns its position.
    pub(crate) fn register(&mut self, key: &Arc<str>, name: &Arc<str>) -> usize {
        if let Some(&i) = self.index.get(&**name) {
            return i;
        }
        let i = self.entries.len();
        self.entries.push(Domain {
            name: name.clone(),
            single: Requirement::in_values(key.clone(), [name.clone()]),
            count: 0,
        });
        self.index.insert(name.clone(), i);
        i
    }

    /// Adds one pod to `name` (registering it first when unknown).
    pub(crate) fn record(&mut self, key: &Arc<str>, name: &Arc<str>) {
        let i = self.register(key, name);
        if let Some(entry) = self.entries.get_mut(i) {
            if entry.count == 0 {
                self.nonzero += 1;
            }
            entry.count = entry.count.saturating_add(1);
        }
    }

    /// The domain called `name`, if known.
    pub(crate) fn get(&self, name: &str) -> Option<&Domain> {
        self.index.get(name).and_then(|&i| self.entries.get(i))
    }

    /// The count of `name`; an unknown domain counts 0 (e.g. a brand-new hostname).
    pub(crate) fn count(&self, name: &str) -> i32 {
        self.get(name).map_or(0, |d| d.count)
    }

    /// Every known domain, in insertion order.
    pub(crate) fn iter(&self) -> std::slice::Iter<'_, Domain> {
        self.entries.iter()
    }

    /// Whether no domain holds any pod.
    pub(crate) fn all_empty(&self) -> bool {
        self.nonzero == 0
    }

    /// Number of known domains.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Up to `limit` `(domain, count)` pairs sorted by domain name, and how many were left out.
    pub(crate) fn snapshot(&self, limit: usize) -> (Vec<(Arc<str>, i32)>, usize) {
        let mut all: Vec<(Arc<str>, i32)> = self
            .entries
            .iter()
            .map(|d| (d.name.clone(), d.count))
            .collect();
        all.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let more = all.len().saturating_sub(limit);
        all.truncate(limit);
        (all, more)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_domains_count_zero_and_recording_registers_them() {
        let key: Arc<str> = Arc::from("zone");
        let mut d = DomainCounts::default();
        assert_eq!(d.count("a"), 0);
        assert!(d.all_empty());
        d.register(&key, &Arc::from("b"));
        d.record(&key, &Arc::from("a"));
        d.record(&key, &Arc::from("a"));
        assert_eq!(d.count("a"), 2);
        assert_eq!(d.len(), 2);
        assert!(!d.all_empty());
        let names: Vec<&str> = d.iter().map(|e| &*e.name).collect();
        assert_eq!(names, ["b", "a"]);
        let (snap, more) = d.snapshot(1);
        assert_eq!(snap, vec![(Arc::from("a"), 2)]);
        assert_eq!(more, 1);
        assert_eq!(d.get("a").map(|e| e.single.values().len()), Some(1));
    }
}
