//! A fixed-slot form of a resource list for the filter's hot fit check.
//!
//! Responsibility: answer "do these requests fit in this allocatable?" exactly as
//! [`crate::resources::fits`] does, but with the four well-known resources (`cpu`, `memory`,
//! `pods`, `ephemeral-storage`) held in fixed `i128` slots, so the common check is four integer
//! comparisons instead of a merge walk over two sorted lists.
//! Inputs: [`Resources`] (an instance type's allocatable once at construction, the requests once
//! per filter call, plus a daemon overhead once per group). Outputs: [`Dense`] values and
//! booleans.
//!
//! Exactness: a name is held in exactly one place (its slot, or `other`), absent slots are zero,
//! and the negative-allocatable rule is kept as a flag, so [`Dense::fits_in`] agrees with
//! [`crate::resources::fits`] on every input (checked by a property test). Sums saturate like
//! [`Resources::merge`].

use crate::quantity::Quantity;
use crate::resources::{ResourceName, Resources};

/// Number of fixed slots.
const SLOTS: usize = 4;

/// The slot of a well-known resource name.
fn slot(name: &ResourceName) -> Option<usize> {
    if *name == ResourceName::CPU {
        Some(0)
    } else if *name == ResourceName::MEMORY {
        Some(1)
    } else if *name == ResourceName::PODS {
        Some(2)
    } else if *name == ResourceName::EPHEMERAL_STORAGE {
        Some(3)
    } else {
        None
    }
}

/// The components of an element-wise maximum already attained by a chosen list
/// ([`Dense::attains_uncovered`]).
#[derive(Debug, Clone, Default)]
pub(crate) struct Covered {
    slots: [bool; SLOTS],
    other: Vec<ResourceName>,
}

impl Covered {
    /// How many components are marked.
    pub(crate) fn count(&self) -> usize {
        self.slots.iter().filter(|s| **s).count() + self.other.len()
    }
}

/// A resource list split into fixed slots (nano-units) and the remaining names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Dense {
    slots: [i128; SLOTS],
    /// Every entry whose name has no slot, sorted by name (a [`Resources`] list).
    other: Resources,
    /// Whether any entry (slot or other) is negative.
    negative: bool,
}

impl Dense {
    /// The dense form of `list`. Allocates only when `list` has names without a slot.
    pub(crate) fn new(list: &Resources) -> Self {
        let mut dense = Self::default();
        dense.add(list);
        dense
    }

    /// `self + list`, element-wise and saturating (the requests plus a daemon overhead).
    pub(crate) fn plus(&self, list: &Resources) -> Self {
        let mut sum = self.clone();
        sum.add(list);
        sum
    }

    /// `self − list`, element-wise and saturating (an allocatable minus a daemon overhead).
    pub(crate) fn minus(&self, list: &Resources) -> Self {
        let mut difference = Self::default();
        difference.set_minus(self, list);
        difference
    }

    /// Makes `self` `base − list` ([`Dense::minus`]) in place, reusing its storage: no
    /// allocation once it has held as many names without a slot (a scratch value reused over
    /// many instance types).
    pub(crate) fn set_minus(&mut self, base: &Dense, list: &Resources) {
        self.slots = base.slots;
        self.other.assign(&base.other);
        self.add_each(list, |quantity| -quantity);
    }

    /// Whether any quantity is negative (nothing fits in such an allocatable).
    pub(crate) fn is_negative(&self) -> bool {
        self.negative
    }

    /// Raises every quantity of `self` to at least `other`'s (absent names count as zero): the
    /// element-wise maximum, used as an upper bound over several allocatables. Returns whether
    /// anything was raised.
    pub(crate) fn raise_to(&mut self, other: &Dense) -> bool {
        let mut raised = false;
        for (mine, theirs) in self.slots.iter_mut().zip(other.slots.iter()) {
            if *theirs > *mine {
                *mine = *theirs;
                raised = true;
            }
        }
        if !other.other.is_empty() {
            // In place, without a lookup per name, when both name the same resources (the
            // instance types of one catalogue do); else name by name, absent counting as zero.
            match self.other.raise_same_names(&other.other) {
                Some(r) => raised |= r,
                None => {
                    for (name, quantity) in &other.other {
                        if quantity > self.other.get_or_zero(name) {
                            self.other.insert(name.clone(), quantity);
                            raised = true;
                        }
                    }
                }
            }
        }
        // Raising never makes a quantity negative: only a negative list can change its mind.
        if self.negative {
            self.negative = self.slots.iter().any(|v| *v < 0)
                || self
                    .other
                    .iter()
                    .any(|(_, quantity)| quantity.is_negative());
        }
        raised
    }

    /// How many components are non-zero: once a [`Covered`] has marked that many against this
    /// maximum, no list attains an unmarked one.
    pub(crate) fn nonzero_components(&self) -> usize {
        self.slots.iter().filter(|v| **v != 0).count()
            + self.other.iter().filter(|(_, q)| !q.is_zero()).count()
    }

    /// Marks in `covered` every non-zero component where `self` equals `max` and returns
    /// whether any of them was not marked yet: picking, for each component of an element-wise
    /// maximum, one list that attains it.
    pub(crate) fn attains_uncovered(&self, max: &Dense, covered: &mut Covered) -> bool {
        let mut new = false;
        for ((mine, top), seen) in self
            .slots
            .iter()
            .zip(max.slots.iter())
            .zip(covered.slots.iter_mut())
        {
            if *mine != 0 && mine == top && !*seen {
                *seen = true;
                new = true;
            }
        }
        for (name, quantity) in &self.other {
            if !quantity.is_zero()
                && max.other.get(name) == Some(quantity)
                && !covered.other.contains(name)
            {
                covered.other.push(name.clone());
                new = true;
            }
        }
        new
    }

    fn add(&mut self, list: &Resources) {
        self.add_each(list, |quantity| quantity);
    }

    /// Adds `change` of each of `list`'s quantities, saturating.
    fn add_each(&mut self, list: &Resources, change: impl Fn(Quantity) -> Quantity) {
        for (name, quantity) in list {
            let quantity = change(quantity);
            match slot(name).and_then(|i| self.slots.get_mut(i)) {
                Some(value) => *value = value.saturating_add(quantity.as_nanos()),
                None => {
                    let current = self.other.get_or_zero(name);
                    self.other
                        .insert(name.clone(), current.saturating_add(quantity));
                }
            }
        }
        self.negative = self.slots.iter().any(|v| *v < 0)
            || self
                .other
                .iter()
                .any(|(_, quantity)| quantity.is_negative());
    }

    /// Whether `self`, as requests, fits in `allocatable`: never when any allocatable quantity
    /// is negative; otherwise every requested quantity is at most the allocatable one, absent
    /// names counting as zero. Never allocates.
    pub(crate) fn fits_in(&self, allocatable: &Dense) -> bool {
        !allocatable.negative
            && self
                .slots
                .iter()
                .zip(allocatable.slots.iter())
                .all(|(requested, available)| requested <= available)
            && (self.other.is_empty()
                || self
                    .other
                    .iter()
                    .all(|(name, requested)| requested <= allocatable.other.get_or_zero(name)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::fits;

    fn list(pairs: &[(&str, &str)]) -> Resources {
        Resources::parse(pairs.iter().copied()).unwrap()
    }

    #[test]
    fn raise_to_is_the_element_wise_maximum_and_minus_subtracts() {
        let mut max = Dense::new(&list(&[("cpu", "2"), ("memory", "1Gi")]));
        max.raise_to(&Dense::new(&list(&[
            ("cpu", "1"),
            ("memory", "4Gi"),
            ("gpu", "1"),
        ])));
        assert_eq!(
            max,
            Dense::new(&list(&[("cpu", "2"), ("memory", "4Gi"), ("gpu", "1")]))
        );
        let less = max.minus(&list(&[("cpu", "500m"), ("gpu", "2")]));
        assert_eq!(less.slots[0], 1_500_000_000);
        assert!(less.is_negative(), "1 - 2 gpus is negative");
    }

    #[test]
    fn well_known_resources_use_slots_and_others_do_not() {
        let dense = Dense::new(&list(&[("cpu", "1"), ("nvidia.com/gpu", "2")]));
        assert_eq!(dense.slots[0], 1_000_000_000);
        assert_eq!(dense.other, list(&[("nvidia.com/gpu", "2")]));
        assert!(!dense.negative);
    }

    #[test]
    fn dense_fit_matches_sparse_fit_on_edge_cases() {
        let cases = [
            (list(&[("cpu", "1")]), list(&[("cpu", "1")])),
            (list(&[("cpu", "1001m")]), list(&[("cpu", "1")])),
            (list(&[("cpu", "0")]), list(&[])),
            (list(&[("gpu", "0")]), list(&[("cpu", "1")])),
            (list(&[("gpu", "1")]), list(&[("cpu", "1")])),
            (list(&[]), list(&[("cpu", "-1")])),
            (list(&[]), list(&[("gpu", "-1")])),
            (
                list(&[("memory", "1Gi")]),
                list(&[("memory", "1Gi"), ("gpu", "1")]),
            ),
        ];
        for (requests, allocatable) in cases {
            assert_eq!(
                Dense::new(&requests).fits_in(&Dense::new(&allocatable)),
                fits(&requests, &allocatable),
                "{requests} in {allocatable}"
            );
        }
    }

    #[test]
    fn plus_adds_overhead_to_requests() {
        let requests = Dense::new(&list(&[("cpu", "1"), ("gpu", "1")]));
        let total = requests.plus(&list(&[("cpu", "500m"), ("gpu", "1"), ("pods", "1")]));
        assert_eq!(
            total,
            Dense::new(&list(&[("cpu", "1500m"), ("gpu", "2"), ("pods", "1")]))
        );
    }
}
