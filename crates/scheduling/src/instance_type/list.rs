//! Helpers over candidate lists of instance types: price order, compatibility, minValues and
//! truncation (spec §2.3 "Price helpers" and "minValues helpers", §3.16).
//!
//! Responsibility: order candidates by their cheapest usable offering, keep those with a usable
//! offering, measure how many of the first candidates jointly satisfy every minValues
//! requirement, and truncate a list by price without (under the strict policy) breaking
//! minValues.
//! Inputs: candidate slices (`C: AsRef<InstanceType>`), requirements, the [`WellKnownLabels`]
//! that may stay undefined, a [`MinValuesPolicy`]. Outputs: reordered or new lists, a prefix
//! length, or a [`MinValuesError`] naming each unsatisfied key with its counts (sorted by key).
//!
//! Unlike upstream (an unstable sort), [`order_by_price`] is a stable total order: price
//! ascending (`+∞` for "no usable offering"), then name, then input position.

use std::fmt;
use std::sync::Arc;

use super::InstanceType;
use crate::labels::WellKnownLabels;
use crate::requirements::Requirements;

/// What to do when minValues cannot be met (the `MIN_VALUES_POLICY` option).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum MinValuesPolicy {
    /// A violation makes the NodeClaim (or template) unusable for the pod (the default).
    #[default]
    Strict,
    /// Proceed, lowering each unsatisfied minValues to what is available.
    BestEffort,
}

/// One minValues requirement the instance types do not meet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsatisfiedMinValues {
    /// The requirement key.
    pub key: Arc<str>,
    /// Distinct values the instance types jointly offer.
    pub available: usize,
    /// The requirement's minValues.
    pub required: usize,
}

/// The instance types do not jointly offer enough distinct values for some keys.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("minValues requirement is not met for label(s) {}", Unsatisfied(.unsatisfied))]
pub struct MinValuesError {
    /// The unsatisfied keys, sorted by key.
    pub unsatisfied: Vec<UnsatisfiedMinValues>,
}

struct Unsatisfied<'a>(&'a [UnsatisfiedMinValues]);

impl fmt::Display for Unsatisfied<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, u) in self.0.iter().enumerate() {
            let separator = if i == 0 { "" } else { ", " };
            write!(
                f,
                "{separator}{} ({} of {})",
                u.key, u.available, u.required
            )?;
        }
        Ok(())
    }
}

/// Sorts `its` in place by the [`super::PriceRank`] of each one's cheapest available offering
/// compatible with `requirements` (priced by price, then unpriced, then none), ascending;
/// equal ranks by name, then input order.
pub fn order_by_price<C: AsRef<InstanceType> + Clone>(
    its: &mut [C],
    requirements: &Requirements,
    well_known: &WellKnownLabels,
) {
    let matcher = super::OfferingMatcher::new(requirements, well_known);
    let mut keyed: Vec<(super::PriceRank, &str, usize)> = its
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let it = c.as_ref();
            (matcher.cheapest_available_rank(it), it.name(), i)
        })
        .collect();
    keyed.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(b.1)).then(a.2.cmp(&b.2)));
    let sorted: Vec<C> = keyed
        .iter()
        .filter_map(|(_, _, i)| its.get(*i).cloned())
        .collect();
    for (slot, c) in its.iter_mut().zip(sorted) {
        *slot = c;
    }
}

/// The instance types with an available offering compatible with `requirements`, in order.
#[must_use]
pub fn compatible<C: AsRef<InstanceType> + Clone>(
    its: &[C],
    requirements: &Requirements,
    well_known: &WellKnownLabels,
) -> Vec<C> {
    its.iter()
        .filter(|c| c.as_ref().has_compatible_offering(requirements, well_known))
        .cloned()
        .collect()
}

/// The length of the shortest non-empty prefix of `its` whose instance types jointly offer at
/// least minValues distinct values for every requirement with minValues (`Ok(0)` when no
/// requirement has minValues). A key's values on an instance type are the values of its
/// requirement on that key (none when undefined).
///
/// # Errors
/// [`MinValuesError`] when even the whole list falls short, naming every short key with the
/// number of distinct values found.
pub fn satisfies_min_values<C: AsRef<InstanceType>>(
    its: &[C],
    requirements: &Requirements,
) -> Result<usize, MinValuesError> {
    min_values_prefix(its.iter().map(AsRef::as_ref), requirements)
}

/// [`satisfies_min_values`] over any ordered sequence of instance types.
pub(crate) fn min_values_prefix<'a>(
    its: impl IntoIterator<Item = &'a InstanceType>,
    requirements: &Requirements,
) -> Result<usize, MinValuesError> {
    let keys: Vec<(&Arc<str>, usize)> = requirements
        .iter()
        .filter_map(|r| r.min_values().map(|min| (r.key_arc(), min)))
        .collect();
    if keys.is_empty() {
        return Ok(0);
    }
    // Per key, the distinct values seen so far, sorted.
    let mut seen: Vec<Vec<&'a str>> = vec![Vec::new(); keys.len()];
    let satisfied = |seen: &[Vec<&str>]| keys.iter().zip(seen).all(|((_, m), v)| v.len() >= *m);
    let mut count = 0;
    for it in its {
        count += 1;
        for ((key, _), values) in keys.iter().zip(seen.iter_mut()) {
            let Some(requirement) = it.requirements().get(key) else {
                continue;
            };
            for value in requirement.values() {
                if let Err(position) = values.binary_search(&&**value) {
                    values.insert(position, value);
                }
            }
        }
        if satisfied(&seen) {
            return Ok(count);
        }
    }
    let unsatisfied: Vec<UnsatisfiedMinValues> = keys
        .iter()
        .zip(&seen)
        .filter(|((_, required), values)| values.len() < *required)
        .map(|((key, required), values)| UnsatisfiedMinValues {
            key: Arc::clone(key),
            available: values.len(),
            required: *required,
        })
        .collect();
    if unsatisfied.is_empty() {
        Ok(count)
    } else {
        Err(MinValuesError { unsatisfied })
    }
}

/// The first `max` instance types by price ([`order_by_price`]).
///
/// # Errors
/// Under [`MinValuesPolicy::Strict`], when `requirements` carry minValues that the truncated
/// list no longer satisfies.
pub fn truncate<C: AsRef<InstanceType> + Clone>(
    its: &[C],
    requirements: &Requirements,
    well_known: &WellKnownLabels,
    max: usize,
    policy: MinValuesPolicy,
) -> Result<Vec<C>, MinValuesError> {
    let mut ordered = its.to_vec();
    order_by_price(&mut ordered, requirements, well_known);
    ordered.truncate(max);
    if policy == MinValuesPolicy::Strict && requirements.has_min_values() {
        satisfies_min_values(&ordered, requirements)?;
    }
    Ok(ordered)
}
