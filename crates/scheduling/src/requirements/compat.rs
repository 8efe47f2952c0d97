//! Pairwise tests between two requirement sets: `intersects` and `compatible`.
//!
//! Responsibility: decide whether a pod's requirements can be met by a NodeClaim's, an instance
//! type's or an existing node's requirements, and say why not.
//! Inputs: two [`Requirements`] (receiver = what is offered, argument = what is asked) and, for
//! the loose check, the [`WellKnownLabels`] that may stay undefined. Outputs: `Ok(())` or a typed
//! error naming the first offending key (keys are visited in sorted order, so the error is
//! deterministic).
//!
//! Both tests walk the two key-sorted vectors in a single merge pass and allocate nothing unless
//! they fail.

use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

use super::{Requirement, Requirements};
use crate::labels::WellKnownLabels;

/// Two requirements on the same key have no value in common.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("key {}, {} not in {}", .0.1.key(), .0.1, .0.0)]
pub struct IncompatibleError(Box<(Requirement, Requirement)>);

impl IncompatibleError {
    /// The conflicting key.
    #[must_use]
    pub fn key(&self) -> &str {
        self.0.0.key()
    }

    /// The receiver's requirement.
    #[must_use]
    pub fn existing(&self) -> &Requirement {
        &self.0.0
    }

    /// The argument's requirement.
    #[must_use]
    pub fn incoming(&self) -> &Requirement {
        &self.0.1
    }
}

/// Why [`Requirements::compatible`] failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompatibilityError {
    /// The argument requires a key the receiver does not define (and may not leave undefined).
    #[error("label {key:?} does not have known values{}", Hint(typo_of.as_deref()))]
    UndefinedLabel {
        /// The undefined key.
        key: Arc<str>,
        /// A well-known or defined key the user probably meant.
        typo_of: Option<Arc<str>>,
    },
    /// A key both sides define has no common value.
    #[error(transparent)]
    Incompatible(#[from] IncompatibleError),
}

struct Hint<'a>(Option<&'a str>);

impl fmt::Display for Hint<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(key) => write!(f, " (typo of {key:?}?)"),
            None => Ok(()),
        }
    }
}

/// Walks the keys both sides define, in sorted order.
fn common<'a>(
    left: &'a Requirements,
    right: &'a Requirements,
) -> impl Iterator<Item = (&'a Requirement, &'a Requirement)> + 'a {
    let mut l = left.items.as_slice();
    let mut r = right.items.as_slice();
    std::iter::from_fn(move || {
        loop {
            let ((a, l_rest), (b, r_rest)) = (l.split_first()?, r.split_first()?);
            match cmp_keys(a, b) {
                Ordering::Less => l = l_rest,
                Ordering::Greater => r = r_rest,
                Ordering::Equal => {
                    l = l_rest;
                    r = r_rest;
                    return Some((a, b));
                }
            }
        }
    })
}

fn cmp_keys(a: &Requirement, b: &Requirement) -> Ordering {
    if Arc::ptr_eq(a.key_arc(), b.key_arc()) {
        Ordering::Equal
    } else {
        a.key().as_bytes().cmp(b.key().as_bytes())
    }
}

fn suffix(key: &str) -> &str {
    key.split_once('/').map_or(key, |(_, name)| name)
}

fn typo_candidate<'a>(mut candidates: impl Iterator<Item = &'a str>, key: &str) -> Option<&'a str> {
    let name = suffix(key);
    candidates.find(|c| c.contains(key) || c.ends_with(name))
}

/// The first key both define whose requirements conflict (see [`Requirements::intersects`]).
fn first_conflict<'a>(
    left: &'a Requirements,
    right: &'a Requirements,
) -> Option<(&'a Requirement, &'a Requirement)> {
    let both_negative =
        |a: &Requirement, b: &Requirement| a.operator().is_negative() && b.operator().is_negative();
    common(left, right).find(|(existing, incoming)| {
        !(existing.has_intersection(incoming) || both_negative(existing, incoming))
    })
}

/// The first key `right` requires that `left` leaves undefined (see [`Requirements::compatible`]).
fn first_undefined<'a>(
    left: &Requirements,
    right: &'a Requirements,
    well_known: Option<&WellKnownLabels>,
) -> Option<&'a Requirement> {
    let mut mine = left.items.as_slice();
    right.items.iter().find(|incoming| {
        while let Some((head, rest)) = mine.split_first()
            && cmp_keys(head, incoming) == Ordering::Less
        {
            mine = rest;
        }
        let defined = mine
            .first()
            .is_some_and(|head| cmp_keys(head, incoming) == Ordering::Equal);
        !(defined
            || incoming.operator().is_negative()
            || well_known.is_some_and(|w| w.contains(incoming.key())))
    })
}

impl Requirements {
    /// Allocation-free boolean form of [`Self::intersects`].
    #[must_use]
    pub fn is_intersecting(&self, other: &Self) -> bool {
        first_conflict(self, other).is_none()
    }

    /// Allocation-free boolean form of [`Self::compatible`].
    #[must_use]
    pub fn is_compatible(&self, other: &Self, well_known: &WellKnownLabels) -> bool {
        first_undefined(self, other, Some(well_known)).is_none() && self.is_intersecting(other)
    }

    /// Allocation-free boolean form of [`Self::compatible_strict`].
    #[must_use]
    pub fn is_compatible_strict(&self, other: &Self) -> bool {
        first_undefined(self, other, None).is_none() && self.is_intersecting(other)
    }

    /// Every key defined on both sides must have a common value, except that two negative
    /// requirements (`NotIn`/`DoesNotExist` on both sides) never conflict. Keys defined on one
    /// side only are ignored.
    ///
    /// # Errors
    /// [`IncompatibleError`] for the first conflicting key.
    pub fn intersects(&self, other: &Self) -> Result<(), IncompatibleError> {
        match first_conflict(self, other) {
            Some((existing, incoming)) => Err(IncompatibleError(Box::new((
                existing.clone(),
                incoming.clone(),
            )))),
            None => Ok(()),
        }
    }

    /// Loose compatibility used against NodeClaims: every key `other` requires must be defined
    /// here, be well known, or be negative (`NotIn`/`DoesNotExist`) in `other`; then
    /// [`Self::intersects`].
    ///
    /// # Errors
    /// [`CompatibilityError::UndefinedLabel`] for the first undefined key (with a typo hint
    /// drawn from the well-known keys, then this side's keys), else the intersection error.
    pub fn compatible(
        &self,
        other: &Self,
        well_known: &WellKnownLabels,
    ) -> Result<(), CompatibilityError> {
        self.compatible_with(other, Some(well_known))
    }

    /// Strict compatibility used against existing nodes: like [`Self::compatible`] but no key
    /// may be left undefined unless `other` is negative on it.
    ///
    /// # Errors
    /// As [`Self::compatible`].
    pub fn compatible_strict(&self, other: &Self) -> Result<(), CompatibilityError> {
        self.compatible_with(other, None)
    }

    fn compatible_with(
        &self,
        other: &Self,
        well_known: Option<&WellKnownLabels>,
    ) -> Result<(), CompatibilityError> {
        if let Some(incoming) = first_undefined(self, other, well_known) {
            let key = incoming.key();
            let typo_of = well_known
                .and_then(|w| typo_candidate(w.keys(), key))
                .or_else(|| typo_candidate(self.keys(), key))
                .map(Arc::from);
            return Err(CompatibilityError::UndefinedLabel {
                key: incoming.key_arc().clone(),
                typo_of,
            });
        }
        Ok(self.intersects(other)?)
    }
}
