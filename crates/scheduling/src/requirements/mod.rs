//! The node-selector requirements algebra Karpenter schedules with.
//!
//! Responsibility: [`Requirements`], a set of per-key [`Requirement`]s where adding a requirement
//! for a key already present intersects the two; construction from labels and from plain
//! `(key, operator, values, minValues)` entries; the compatibility tests the scheduler runs for
//! every pod × NodeClaim × instance type ([`Requirements::intersects`],
//! [`Requirements::compatible`], [`Requirements::compatible_strict`]); label resolution; minValues
//! helpers; serialisation back to entries; and validation of user-supplied entries.
//! Inputs: plain strings and [`SelectorRequirement`]s (no Kubernetes types), a
//! [`WellKnownLabels`] value. Outputs: [`Requirements`], typed errors, label maps, entries.
//!
//! Representation: a `Vec<Requirement>` kept sorted by key with unique keys. Lookups are binary
//! searches; the pairwise tests walk both sorted vectors in one merge pass and allocate nothing on
//! success. Iteration order (and so every output) is by key, never by hash.

mod compat;
mod operator;
mod requirement;
mod validation;
mod values;

#[cfg(test)]
mod set_tests;
#[cfg(test)]
mod tests;

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

pub use compat::{CompatibilityError, IncompatibleError};
pub use operator::{Operator, SelectorRequirement, UnknownOperator};
pub use requirement::{Requirement, RequirementError};
pub use validation::{
    RequirementValidationError, RequirementValidationErrors, unknown_well_known_values,
    validate_requirement,
};

use crate::labels::WellKnownLabels;

/// Requirements keyed by label key. See the module docs for the representation.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Requirements {
    items: Vec<Requirement>,
}

impl Requirements {
    /// No requirements (everything allowed).
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// One `key In [value]` per label.
    pub fn from_labels<I, K, V>(labels: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: AsRef<str>,
    {
        labels
            .into_iter()
            .map(|(k, v)| Requirement::in_values(k.as_ref(), [v.as_ref()]))
            .collect()
    }

    /// Builds requirements from entries (e.g. a NodePool's requirements or one node-affinity
    /// term), intersecting entries that share a key.
    ///
    /// # Errors
    /// The first entry with a numeric operator lacking exactly one integer value.
    pub fn from_selector<'a, I>(entries: I) -> Result<Self, RequirementError>
    where
        I: IntoIterator<Item = &'a SelectorRequirement>,
    {
        entries
            .into_iter()
            .map(Requirement::from_selector)
            .collect()
    }

    fn position(&self, key: &str) -> Result<usize, usize> {
        self.items
            .binary_search_by(|r| r.key().as_bytes().cmp(key.as_bytes()))
    }

    /// Adds a requirement, intersecting it with an existing one for the same key.
    pub fn add(&mut self, requirement: Requirement) {
        match self.position(requirement.key()) {
            Ok(i) => {
                if let Some(existing) = self.items.get_mut(i) {
                    *existing = requirement.intersection(existing);
                }
            }
            Err(i) => self.items.insert(i, requirement),
        }
    }

    /// Adds every requirement of `other`.
    pub fn add_all(&mut self, other: &Self) {
        for requirement in &other.items {
            self.add(requirement.clone());
        }
    }

    /// The requirement for `key`, if defined.
    #[must_use]
    pub fn get(&self, key: &str) -> Option<&Requirement> {
        self.position(key).ok().and_then(|i| self.items.get(i))
    }

    /// The requirement for `key`, or `key Exists` when undefined.
    #[must_use]
    pub fn get_or_exists(&self, key: &str) -> Cow<'_, Requirement> {
        self.get(key)
            .map_or_else(|| Cow::Owned(Requirement::exists(key)), Cow::Borrowed)
    }

    /// Whether `key` is defined.
    #[must_use]
    pub fn contains_key(&self, key: &str) -> bool {
        self.position(key).is_ok()
    }

    /// Removes and returns the requirement for `key`.
    pub fn remove(&mut self, key: &str) -> Option<Requirement> {
        self.position(key).ok().map(|i| self.items.remove(i))
    }

    /// The requirements, sorted by key.
    pub fn iter(&self) -> std::slice::Iter<'_, Requirement> {
        self.items.iter()
    }

    /// The keys, sorted.
    pub fn keys(&self) -> impl Iterator<Item = &str> + '_ {
        self.items.iter().map(Requirement::key)
    }

    /// Number of keys.
    #[must_use]
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// No keys at all.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Labels a node satisfying these requirements gets: for every key that is neither well
    /// known nor restricted (restricted domains such as `karpenter.sh`, and
    /// `kubernetes.io/hostname`), the requirement's deterministic [`Requirement::any`] value.
    #[must_use]
    pub fn labels(&self, well_known: &WellKnownLabels) -> BTreeMap<String, String> {
        self.items
            .iter()
            .filter(|r| !well_known.contains(r.key()) && !well_known.is_restricted_label(r.key()))
            .filter_map(|r| r.any().map(|v| (r.key().to_owned(), v)))
            .collect()
    }

    /// Serialises every requirement (sorted by key) to entries.
    #[must_use]
    pub fn to_selector_requirements(&self) -> Vec<SelectorRequirement> {
        self.items
            .iter()
            .flat_map(Requirement::to_selector_requirements)
            .collect()
    }

    /// Whether any requirement carries minValues.
    #[must_use]
    pub fn has_min_values(&self) -> bool {
        self.items.iter().any(|r| r.min_values().is_some())
    }

    /// `(key, minValues)` for every requirement that has minValues, sorted by key.
    pub fn min_values(&self) -> impl Iterator<Item = (&str, usize)> + '_ {
        self.items
            .iter()
            .filter_map(|r| r.min_values().map(|m| (r.key(), m)))
    }

    /// BestEffort relaxation: lowers `key`'s minValues to `available` when it is higher.
    /// Returns whether it was lowered.
    pub fn relax_min_values(&mut self, key: &str, available: usize) -> bool {
        let Some(requirement) = self.position(key).ok().and_then(|i| self.items.get_mut(i)) else {
            return false;
        };
        match requirement.min_values() {
            Some(current) if current > available => {
                requirement.set_min_values(Some(available));
                true
            }
            _ => false,
        }
    }
}

impl FromIterator<Requirement> for Requirements {
    fn from_iter<T: IntoIterator<Item = Requirement>>(iter: T) -> Self {
        let mut out = Self::new();
        out.extend(iter);
        out
    }
}

impl Extend<Requirement> for Requirements {
    fn extend<T: IntoIterator<Item = Requirement>>(&mut self, iter: T) {
        for requirement in iter {
            self.add(requirement);
        }
    }
}

impl<'a> IntoIterator for &'a Requirements {
    type Item = &'a Requirement;
    type IntoIter = std::slice::Iter<'a, Requirement>;

    fn into_iter(self) -> Self::IntoIter {
        self.items.iter()
    }
}

impl fmt::Display for Requirements {
    /// Requirements sorted by key, joined by `", "`; the hostname requirement is omitted.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown = self
            .items
            .iter()
            .filter(|r| r.key() != crate::labels::HOSTNAME);
        for (i, requirement) in shown.enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{requirement}")?;
        }
        Ok(())
    }
}
