//! Resource lists (`v1.ResourceList`) and the list arithmetic Karpenter schedules with.
//!
//! Responsibility: a small map from [`ResourceName`] to [`Quantity`] with Karpenter core's
//! operations (`resources.Merge`, `MergeInto`, `Subtract`, `SubtractFrom`, `MaxResources`,
//! `MinResources`, `Fits`) and Kubernetes' pod request aggregation ([`PodResources`]).
//! Inputs: (name, quantity) pairs, parsed or built. Outputs: new lists, or booleans for fit checks.
//!
//! Representation: a `Vec` of entries sorted by name, keys unique. Real lists hold a handful of
//! entries (cpu, memory, pods, ephemeral-storage, maybe a GPU), where a sorted vector beats a tree
//! or hash map on lookup, iteration and cache footprint, and lets two lists combine in one merge
//! pass. [`fits`] and the lookups never allocate. Sums saturate at [`Quantity::MAX`] instead of
//! failing: a saturated request still fits nowhere, which is the correct scheduling answer.

mod name;
mod pod;

use std::cmp::Ordering;
use std::fmt;
use std::iter::Map;
use std::slice;

pub use name::ResourceName;
pub use pod::{InitContainer, PodResources, is_supported_pod_level_resource};

use crate::quantity::{ParseQuantityError, Quantity};

/// A list of resource quantities keyed by name, iterated in name order.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct Resources {
    /// Sorted by name, names unique.
    entries: Vec<(ResourceName, Quantity)>,
}

/// A resource list that could not be built from strings.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResourcesError {
    /// A quantity did not parse.
    #[error("resource {name:?}: {error}")]
    InvalidQuantity {
        /// The resource whose quantity is invalid.
        name: String,
        /// Why the quantity is invalid.
        error: ParseQuantityError,
    },
    /// A resource name was empty.
    #[error("a resource name is empty")]
    EmptyName,
    /// A resource name appeared more than once.
    #[error("resource {name:?} is listed more than once")]
    DuplicateName {
        /// The repeated name.
        name: String,
    },
}

/// Iterator over `(name, quantity)` in name order.
pub type Iter<'a> = Map<
    slice::Iter<'a, (ResourceName, Quantity)>,
    fn(&'a (ResourceName, Quantity)) -> (&'a ResourceName, Quantity),
>;

impl Resources {
    /// An empty list.
    #[must_use]
    pub const fn new() -> Resources {
        Resources {
            entries: Vec::new(),
        }
    }

    /// Parses `(name, quantity)` string pairs, e.g. `[("cpu", "100m"), ("memory", "1Gi")]`.
    ///
    /// # Errors
    /// [`ResourcesError`] for an invalid quantity, an empty name or a repeated name.
    pub fn parse<I, N, V>(pairs: I) -> Result<Resources, ResourcesError>
    where
        I: IntoIterator<Item = (N, V)>,
        N: AsRef<str>,
        V: AsRef<str>,
    {
        let mut list = Resources::new();
        for (name, value) in pairs {
            let name = name.as_ref();
            if name.is_empty() {
                return Err(ResourcesError::EmptyName);
            }
            let quantity =
                value
                    .as_ref()
                    .parse()
                    .map_err(|error| ResourcesError::InvalidQuantity {
                        name: name.to_owned(),
                        error,
                    })?;
            if list.insert(ResourceName::new(name), quantity).is_some() {
                return Err(ResourcesError::DuplicateName {
                    name: name.to_owned(),
                });
            }
        }
        Ok(list)
    }

    /// The number of entries.
    #[must_use]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are no entries.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether every quantity is zero (true for an empty list).
    #[must_use]
    pub fn is_zero(&self) -> bool {
        self.entries.iter().all(|(_, quantity)| quantity.is_zero())
    }

    fn position(&self, name: &ResourceName) -> Result<usize, usize> {
        self.entries.binary_search_by(|(entry, _)| entry.cmp(name))
    }

    /// The quantity of `name`, if listed.
    #[must_use]
    pub fn get(&self, name: &ResourceName) -> Option<Quantity> {
        let index = self.position(name).ok()?;
        self.entries.get(index).map(|(_, quantity)| *quantity)
    }

    /// The quantity of `name`, or zero when it is not listed.
    #[must_use]
    pub fn get_or_zero(&self, name: &ResourceName) -> Quantity {
        self.get(name).unwrap_or(Quantity::ZERO)
    }

    /// Sets `name` to `quantity`, returning the previous quantity.
    pub fn insert(&mut self, name: ResourceName, quantity: Quantity) -> Option<Quantity> {
        match self.position(&name) {
            Ok(index) => {
                let slot = self.entries.get_mut(index)?;
                Some(std::mem::replace(&mut slot.1, quantity))
            }
            Err(index) => {
                self.entries.insert(index, (name, quantity));
                None
            }
        }
    }

    /// Removes `name`, returning its quantity.
    pub fn remove(&mut self, name: &ResourceName) -> Option<Quantity> {
        let index = self.position(name).ok()?;
        Some(self.entries.remove(index).1)
    }

    /// The entries in name order.
    pub fn iter(&self) -> Iter<'_> {
        fn entry((name, quantity): &(ResourceName, Quantity)) -> (&ResourceName, Quantity) {
            (name, *quantity)
        }
        self.entries.iter().map(entry)
    }

    /// The names in order.
    pub fn names(&self) -> impl ExactSizeIterator<Item = &ResourceName> + '_ {
        self.entries.iter().map(|(name, _)| name)
    }

    /// Applies `update` to the entry of `name`, starting from zero when it is absent.
    fn update(&mut self, name: &ResourceName, update: impl FnOnce(Quantity) -> Quantity) {
        match self.position(name) {
            Ok(index) => {
                if let Some(slot) = self.entries.get_mut(index) {
                    slot.1 = update(slot.1);
                }
            }
            Err(index) => self
                .entries
                .insert(index, (name.clone(), update(Quantity::ZERO))),
        }
    }

    /// Adds `other` into `self` element-wise; absent entries count as zero (Karpenter
    /// `MergeInto`). Allocates only when `other` has names `self` lacks.
    pub fn merge(&mut self, other: &Resources) {
        for (name, quantity) in other {
            self.update(name, |current| current.saturating_add(quantity));
        }
    }

    /// The element-wise sum over the union of names (Karpenter `Merge`).
    #[must_use]
    pub fn merged(&self, other: &Resources) -> Resources {
        self.join(other, |left, right| match (left, right) {
            (Some(left), Some(right)) => Some(left.saturating_add(right)),
            (one, other) => one.or(other),
        })
    }

    /// Subtracts every entry of `other` from `self`, an absent entry of `self` counting as zero
    /// so it becomes negative (Karpenter `SubtractFrom`).
    pub fn subtract(&mut self, other: &Resources) {
        for (name, quantity) in other {
            self.update(name, |current| current.saturating_sub(quantity));
        }
    }

    /// `self − other` over `self`'s names only: names only in `other` are ignored (Karpenter
    /// `Subtract`, e.g. allocatable minus daemon-set overhead).
    #[must_use]
    pub fn difference(&self, other: &Resources) -> Resources {
        self.join(other, |left, right| {
            Some(left?.saturating_sub(right.unwrap_or(Quantity::ZERO)))
        })
    }

    /// The element-wise maximum over the union of names (Karpenter `MaxResources`).
    #[must_use]
    pub fn max_with(&self, other: &Resources) -> Resources {
        self.join(other, |left, right| match (left, right) {
            (Some(left), Some(right)) => Some(if right > left { right } else { left }),
            (one, other) => one.or(other),
        })
    }

    /// `self` becomes [`Resources::max_with`]`(other)`, in place: without an allocation when
    /// both list the same names (the instance types of one catalogue do), which makes the
    /// maximum over a claim's hundreds of options cheap.
    pub fn raise_to(&mut self, other: &Resources) {
        if self.raise_same_names(other).is_none() {
            *self = self.max_with(other);
        }
    }

    /// Makes `self` a copy of `other`, reusing `self`'s storage.
    pub(crate) fn assign(&mut self, other: &Resources) {
        self.entries.clone_from(&other.entries);
    }

    /// When `self` and `other` list the same names: raises each of `self`'s quantities to
    /// `other`'s in place and says whether any was raised; `None` (and `self` unchanged) when
    /// the names differ.
    pub(crate) fn raise_same_names(&mut self, other: &Resources) -> Option<bool> {
        let same_names = self.entries.len() == other.entries.len()
            && self
                .entries
                .iter()
                .zip(&other.entries)
                .all(|((mine, _), (theirs, _))| mine == theirs);
        if !same_names {
            return None;
        }
        let mut raised = false;
        for ((_, mine), (_, theirs)) in self.entries.iter_mut().zip(&other.entries) {
            if *theirs > *mine {
                *mine = *theirs;
                raised = true;
            }
        }
        Some(raised)
    }

    /// The element-wise minimum over the names present in both (Karpenter `MinResources`).
    #[must_use]
    pub fn min_with(&self, other: &Resources) -> Resources {
        self.join(other, |left, right| {
            let (left, right) = (left?, right?);
            Some(if right < left { right } else { left })
        })
    }

    /// `self` plus the entries of `defaults` whose names `self` lacks: container requests
    /// defaulted from limits, as Kubernetes' API defaulting does for pods (not pod templates).
    #[must_use]
    pub fn or_defaults(&self, defaults: &Resources) -> Resources {
        self.join(defaults, |own, default| own.or(default))
    }

    /// Whether `self`, as requests, fits in `allocatable`; see [`fits`].
    #[must_use]
    pub fn fits(&self, allocatable: &Resources) -> bool {
        fits(self, allocatable)
    }

    /// One merge pass over both sorted lists; `combine` sees each name's two quantities and
    /// returns the result's, or `None` to leave the name out.
    fn join(
        &self,
        other: &Resources,
        mut combine: impl FnMut(Option<Quantity>, Option<Quantity>) -> Option<Quantity>,
    ) -> Resources {
        let mut entries = Vec::with_capacity(self.len().max(other.len()));
        let mut left = self.entries.iter().peekable();
        let mut right = other.entries.iter().peekable();
        loop {
            let (name, l, r) = match (left.peek(), right.peek()) {
                (None, None) => break,
                (Some((name, l)), None) => (name, Some(*l), None),
                (None, Some((name, r))) => (name, None, Some(*r)),
                (Some((lname, l)), Some((rname, r))) => match lname.cmp(rname) {
                    Ordering::Less => (lname, Some(*l), None),
                    Ordering::Greater => (rname, None, Some(*r)),
                    Ordering::Equal => (lname, Some(*l), Some(*r)),
                },
            };
            if l.is_some() {
                left.next();
            }
            if r.is_some() {
                right.next();
            }
            if let Some(quantity) = combine(l, r) {
                entries.push((name.clone(), quantity));
            }
        }
        Resources { entries }
    }
}

/// Whether `requests` fit in `allocatable`, exactly as Karpenter's `resources.Fits`: false if any
/// allocatable quantity is negative; otherwise every requested quantity must be at most the
/// allocatable one, a name absent from `allocatable` counting as zero (so a non-zero request of
/// an unknown resource never fits and a zero one always does). Never allocates.
#[must_use]
pub fn fits(requests: &Resources, allocatable: &Resources) -> bool {
    if allocatable
        .entries
        .iter()
        .any(|(_, quantity)| quantity.is_negative())
    {
        return false;
    }
    let mut available = allocatable.entries.iter().peekable();
    requests.entries.iter().all(|(name, requested)| {
        while available
            .next_if(|(candidate, _)| candidate < name)
            .is_some()
        {}
        let offered = available.next_if(|(candidate, _)| candidate == name);
        *requested <= offered.map_or(Quantity::ZERO, |(_, quantity)| *quantity)
    })
}

/// The element-wise sum of `lists` (Karpenter `Merge`).
#[must_use]
pub fn merge<'a>(lists: impl IntoIterator<Item = &'a Resources>) -> Resources {
    let mut total = Resources::new();
    for list in lists {
        total.merge(list);
    }
    total
}

/// The element-wise maximum of `lists` over the union of names (Karpenter `MaxResources`).
#[must_use]
pub fn max_resources<'a>(lists: impl IntoIterator<Item = &'a Resources>) -> Resources {
    let mut max = Resources::new();
    for list in lists {
        max.raise_to(list);
    }
    max
}

/// The element-wise minimum of `lists` over the names present in all of them (Karpenter
/// `MinResources`); empty for no lists.
#[must_use]
pub fn min_resources<'a>(lists: impl IntoIterator<Item = &'a Resources>) -> Resources {
    let mut lists = lists.into_iter();
    let first = lists.next().cloned().unwrap_or_default();
    lists.fold(first, |min, list| min.min_with(list))
}

impl<'a> IntoIterator for &'a Resources {
    type Item = (&'a ResourceName, Quantity);
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl FromIterator<(ResourceName, Quantity)> for Resources {
    /// Builds a list; a repeated name keeps its last quantity, as map insertion does.
    fn from_iter<T: IntoIterator<Item = (ResourceName, Quantity)>>(iter: T) -> Self {
        let mut list = Resources::new();
        for (name, quantity) in iter {
            list.insert(name, quantity);
        }
        list
    }
}

impl fmt::Display for Resources {
    /// `{cpu: 100m, memory: 1Gi}`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("{")?;
        for (index, (name, quantity)) in self.iter().enumerate() {
            let separator = if index == 0 { "" } else { ", " };
            write!(f, "{separator}{name}: {quantity}")?;
        }
        f.write_str("}")
    }
}

impl fmt::Debug for Resources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(
                self.iter()
                    .map(|(name, quantity)| (name, Canonical(quantity))),
            )
            .finish()
    }
}

/// Debug-prints a quantity as its canonical string.
struct Canonical(Quantity);

impl fmt::Debug for Canonical {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

#[cfg(test)]
mod tests;
