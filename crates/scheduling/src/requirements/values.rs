//! The value set behind a requirement and its allocation-aware set operations.
//!
//! Responsibility: store a requirement's values as a sorted, de-duplicated, shared slice
//! (`Option<Arc<[Arc<str>]>>`, `None` = empty, so `Exists`/`DoesNotExist` never allocate) and
//! compute intersections, differences and unions of two such sets restricted to integer bounds.
//! Inputs: value strings and optional inclusive bounds. Outputs: new [`ValueSet`]s that reuse an
//! input's allocation whenever the result equals that input (the common case when a broad
//! requirement meets a narrow one), and allocation-free membership / emptiness tests.

use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

/// Inclusive integer bounds; a value outside them (or not an integer, when a bound is set) is
/// excluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub(crate) struct Bounds {
    pub(crate) gte: Option<i64>,
    pub(crate) lte: Option<i64>,
}

impl Bounds {
    pub(crate) const NONE: Self = Self {
        gte: None,
        lte: None,
    };

    pub(crate) fn is_unbounded(self) -> bool {
        self.gte.is_none() && self.lte.is_none()
    }

    /// `true` when `value` parses as a (Go `Atoi`-compatible) integer inside the bounds, or when
    /// there are no bounds at all.
    pub(crate) fn admits(self, value: &str) -> bool {
        if self.is_unbounded() {
            return true;
        }
        value
            .parse::<i64>()
            .is_ok_and(|n| self.gte.is_none_or(|g| n >= g) && self.lte.is_none_or(|l| n <= l))
    }
}

fn cmp_values(a: &Arc<str>, b: &Arc<str>) -> Ordering {
    if Arc::ptr_eq(a, b) {
        Ordering::Equal
    } else {
        a.as_bytes().cmp(b.as_bytes())
    }
}

/// Sorted, de-duplicated, cheaply clonable set of label values.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub(crate) struct ValueSet(Option<Arc<[Arc<str>]>>);

impl fmt::Debug for ValueSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.as_slice()).finish()
    }
}

impl ValueSet {
    pub(crate) fn from_vec(mut values: Vec<Arc<str>>) -> Self {
        values.sort_unstable_by(cmp_values);
        values.dedup_by(|a, b| cmp_values(a, b) == Ordering::Equal);
        Self::from_sorted(values)
    }

    fn from_sorted(values: Vec<Arc<str>>) -> Self {
        if values.is_empty() {
            Self(None)
        } else {
            Self(Some(Arc::from(values)))
        }
    }

    pub(crate) fn as_slice(&self) -> &[Arc<str>] {
        self.0.as_deref().unwrap_or(&[])
    }

    pub(crate) fn len(&self) -> usize {
        self.as_slice().len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    pub(crate) fn contains(&self, value: &str) -> bool {
        contains(self.as_slice(), value)
    }

    /// Values of `self` also in `other`, within `bounds`.
    pub(crate) fn intersect(&self, other: &Self, bounds: Bounds) -> Self {
        let (small, large) = if self.len() <= other.len() {
            (self, other)
        } else {
            (other, self)
        };
        let kept = || Filter::new(small.as_slice(), large.as_slice(), true, bounds);
        let count = kept().count();
        if count == small.len() {
            small.clone()
        } else if count == 0 {
            Self(None)
        } else {
            Self::from_sorted(kept().cloned().collect())
        }
    }

    /// Values of `self` not in `excluded`, within `bounds`.
    pub(crate) fn difference(&self, excluded: &Self, bounds: Bounds) -> Self {
        let kept = || Filter::new(self.as_slice(), excluded.as_slice(), false, bounds);
        let count = kept().count();
        if count == self.len() {
            self.clone()
        } else if count == 0 {
            Self(None)
        } else {
            Self::from_sorted(kept().cloned().collect())
        }
    }

    /// Values in either set, within `bounds`.
    pub(crate) fn union(&self, other: &Self, bounds: Bounds) -> Self {
        if bounds.is_unbounded() {
            if other.is_empty()
                || Filter::new(other.as_slice(), self.as_slice(), false, bounds)
                    .next()
                    .is_none()
            {
                return self.clone();
            }
            if self.is_empty() {
                return other.clone();
            }
        }
        let mut all: Vec<Arc<str>> = self
            .as_slice()
            .iter()
            .chain(other.as_slice())
            .filter(|v| bounds.admits(v))
            .cloned()
            .collect();
        all.sort_unstable_by(cmp_values);
        all.dedup_by(|a, b| cmp_values(a, b) == Ordering::Equal);
        if all.len() == self.len() && all.as_slice() == self.as_slice() {
            return self.clone();
        }
        Self::from_sorted(all)
    }

    /// Allocation-free: is some value of `self` in `other` and within `bounds`?
    pub(crate) fn intersects(&self, other: &Self, bounds: Bounds) -> bool {
        let (small, large) = if self.len() <= other.len() {
            (self, other)
        } else {
            (other, self)
        };
        Filter::new(small.as_slice(), large.as_slice(), true, bounds)
            .next()
            .is_some()
    }

    /// Allocation-free: is some value of `self` outside `excluded` and within `bounds`?
    pub(crate) fn has_value_outside(&self, excluded: &Self, bounds: Bounds) -> bool {
        Filter::new(self.as_slice(), excluded.as_slice(), false, bounds)
            .next()
            .is_some()
    }
}

fn contains(sorted: &[Arc<str>], value: &str) -> bool {
    sorted
        .binary_search_by(|probe| probe.as_bytes().cmp(value.as_bytes()))
        .is_ok()
}

/// Iterates `base` keeping values whose presence in `other` equals `keep_present` and that are
/// within `bounds`. Uses binary search when `base` is much smaller than `other`, otherwise a
/// linear merge over both sorted slices.
struct Filter<'a> {
    base: &'a [Arc<str>],
    other: &'a [Arc<str>],
    keep_present: bool,
    search: bool,
    bounds: Bounds,
}

impl<'a> Filter<'a> {
    fn new(
        base: &'a [Arc<str>],
        other: &'a [Arc<str>],
        keep_present: bool,
        bounds: Bounds,
    ) -> Self {
        let log = usize::try_from(other.len().max(1).ilog2()).unwrap_or(usize::MAX);
        let search = base.len().saturating_mul(log.saturating_add(1)) < base.len() + other.len();
        Self {
            base,
            other,
            keep_present,
            search,
            bounds,
        }
    }

    fn present(&mut self, value: &Arc<str>) -> bool {
        if self.search {
            return self
                .other
                .binary_search_by(|probe| cmp_values(probe, value))
                .is_ok();
        }
        while let Some((head, rest)) = self.other.split_first() {
            match cmp_values(head, value) {
                Ordering::Less => self.other = rest,
                Ordering::Equal => return true,
                Ordering::Greater => return false,
            }
        }
        false
    }
}

impl<'a> Iterator for Filter<'a> {
    type Item = &'a Arc<str>;

    fn next(&mut self) -> Option<Self::Item> {
        while let Some((value, rest)) = self.base.split_first() {
            self.base = rest;
            if self.keep_present && !self.search && self.other.is_empty() {
                self.base = &[];
                return None;
            }
            if self.present(value) == self.keep_present && self.bounds.admits(value) {
                return Some(value);
            }
        }
        None
    }
}
