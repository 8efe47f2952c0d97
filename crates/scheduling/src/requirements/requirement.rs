//! A single requirement on one label key: the set algebra Karpenter schedules with.
//!
//! Responsibility: represent "the values a label may take" as either a concrete set (`In`,
//! `DoesNotExist`) or the complement of a set (`NotIn`, `Exists`), optionally narrowed by
//! inclusive integer bounds (`Gt`/`Lt`/`Gte`/`Lte` are canonicalised to `gte`/`lte`), plus an
//! optional `minValues`; and implement membership, intersection, the allocation-free
//! intersection test, a deterministic representative value and serialisation back to entries.
//! Inputs: a key, an [`Operator`], values. Outputs: [`Requirement`] values and
//! [`SelectorRequirement`] entries; [`RequirementError`] for numeric operators without exactly
//! one integer value.
//!
//! Representation: the key is an `Arc<str>` (already alias-normalised); values are a sorted,
//! de-duplicated `Arc<[Arc<str>]>` shared between clones and reused by intersections whose result
//! equals an input. Invariant: a concrete (non-complement) requirement never carries bounds.

use std::fmt;
use std::sync::Arc;

use super::operator::{Operator, SelectorRequirement};
use super::values::{Bounds, ValueSet};
use crate::labels::{SpaceList, alias_target};

/// Building a requirement from an operator and values failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequirementError {
    /// `Gt`/`Lt`/`Gte`/`Lte` need exactly one value.
    #[error("key {key} with operator {operator} must have exactly one value, got {count}")]
    NotSingleValue {
        /// The key.
        key: String,
        /// The operator.
        operator: Operator,
        /// How many values were given.
        count: usize,
    },
    /// `Gt`/`Lt`/`Gte`/`Lte` need an integer value.
    #[error("key {key} with operator {operator} needs an integer value, got {value:?}")]
    NotAnInteger {
        /// The key.
        key: String,
        /// The operator.
        operator: Operator,
        /// The value given.
        value: String,
    },
}

/// The allowed values of one label key. See the module docs for the representation.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Requirement {
    key: Arc<str>,
    complement: bool,
    values: ValueSet,
    bounds: Bounds,
    min_values: Option<usize>,
}

fn normalized_key<K: AsRef<str> + Into<Arc<str>>>(key: K) -> Arc<str> {
    alias_target(key.as_ref()).map_or_else(|| key.into(), Arc::from)
}

fn value_set<I, V>(values: I) -> ValueSet
where
    I: IntoIterator<Item = V>,
    V: Into<Arc<str>>,
{
    ValueSet::from_vec(values.into_iter().map(Into::into).collect())
}

impl Requirement {
    fn raw(key: Arc<str>, complement: bool, values: ValueSet, bounds: Bounds) -> Self {
        Self {
            key,
            complement,
            values,
            bounds,
            min_values: None,
        }
    }

    /// `key In values` (key alias-normalised).
    pub fn in_values<K, I, V>(key: K, values: I) -> Self
    where
        K: AsRef<str> + Into<Arc<str>>,
        I: IntoIterator<Item = V>,
        V: Into<Arc<str>>,
    {
        Self::raw(normalized_key(key), false, value_set(values), Bounds::NONE)
    }

    /// `key NotIn values`.
    pub fn not_in<K, I, V>(key: K, values: I) -> Self
    where
        K: AsRef<str> + Into<Arc<str>>,
        I: IntoIterator<Item = V>,
        V: Into<Arc<str>>,
    {
        Self::raw(normalized_key(key), true, value_set(values), Bounds::NONE)
    }

    /// `key Exists` (also what [`super::Requirements::get_or_exists`] returns for a missing key).
    pub fn exists<K: AsRef<str> + Into<Arc<str>>>(key: K) -> Self {
        Self::raw(normalized_key(key), true, ValueSet::default(), Bounds::NONE)
    }

    /// `key DoesNotExist`.
    pub fn does_not_exist<K: AsRef<str> + Into<Arc<str>>>(key: K) -> Self {
        Self::raw(
            normalized_key(key),
            false,
            ValueSet::default(),
            Bounds::NONE,
        )
    }

    /// `key Gte n` (inclusive lower bound).
    pub fn gte<K: AsRef<str> + Into<Arc<str>>>(key: K, n: i64) -> Self {
        let bounds = Bounds {
            gte: Some(n),
            lte: None,
        };
        Self::raw(normalized_key(key), true, ValueSet::default(), bounds)
    }

    /// `key Lte n` (inclusive upper bound).
    pub fn lte<K: AsRef<str> + Into<Arc<str>>>(key: K, n: i64) -> Self {
        let bounds = Bounds {
            gte: None,
            lte: Some(n),
        };
        Self::raw(normalized_key(key), true, ValueSet::default(), bounds)
    }

    /// `key Gt n`, canonicalised to `Gte n+1`; `Gt i64::MAX` matches nothing (`DoesNotExist`).
    pub fn gt<K: AsRef<str> + Into<Arc<str>>>(key: K, n: i64) -> Self {
        match n.checked_add(1) {
            Some(m) => Self::gte(key, m),
            None => Self::does_not_exist(key),
        }
    }

    /// `key Lt n`, canonicalised to `Lte n-1`; `Lt i64::MIN` matches nothing (`DoesNotExist`).
    pub fn lt<K: AsRef<str> + Into<Arc<str>>>(key: K, n: i64) -> Self {
        match n.checked_sub(1) {
            Some(m) => Self::lte(key, m),
            None => Self::does_not_exist(key),
        }
    }

    /// Builds a requirement from an operator and its values (key alias-normalised).
    ///
    /// # Errors
    /// A numeric operator without exactly one value parsing as an `i64`.
    pub fn new<K, I, V>(key: K, operator: Operator, values: I) -> Result<Self, RequirementError>
    where
        K: AsRef<str> + Into<Arc<str>>,
        I: IntoIterator<Item = V>,
        V: Into<Arc<str>>,
    {
        Ok(match operator {
            Operator::In => Self::in_values(key, values),
            Operator::NotIn => Self::not_in(key, values),
            Operator::Exists => Self::exists(key),
            Operator::DoesNotExist => Self::does_not_exist(key),
            Operator::Gt | Operator::Lt | Operator::Gte | Operator::Lte => {
                let values: Vec<Arc<str>> = values.into_iter().map(Into::into).collect();
                let n = match values.as_slice() {
                    [single] => {
                        single
                            .parse::<i64>()
                            .map_err(|_| RequirementError::NotAnInteger {
                                key: key.as_ref().to_owned(),
                                operator,
                                value: single.to_string(),
                            })?
                    }
                    other => {
                        return Err(RequirementError::NotSingleValue {
                            key: key.as_ref().to_owned(),
                            operator,
                            count: other.len(),
                        });
                    }
                };
                match operator {
                    Operator::Gt => Self::gt(key, n),
                    Operator::Lt => Self::lt(key, n),
                    Operator::Gte => Self::gte(key, n),
                    _ => Self::lte(key, n),
                }
            }
        })
    }

    /// Builds a requirement from a [`SelectorRequirement`], carrying its minValues.
    ///
    /// # Errors
    /// As [`Self::new`].
    pub fn from_selector(entry: &SelectorRequirement) -> Result<Self, RequirementError> {
        let values = entry.values.iter().map(String::as_str);
        Ok(
            Self::new(entry.key.as_str(), entry.operator, values)?
                .with_min_values(entry.min_values),
        )
    }

    /// Sets minValues.
    #[must_use]
    pub fn with_min_values(mut self, min_values: Option<usize>) -> Self {
        self.min_values = min_values;
        self
    }

    /// The (normalised) key.
    #[must_use]
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The key as a shared string.
    #[must_use]
    pub fn key_arc(&self) -> &Arc<str> {
        &self.key
    }

    /// `true` for `NotIn`/`Exists`-like requirements: `values()` are the excluded values.
    #[must_use]
    pub fn is_complement(&self) -> bool {
        self.complement
    }

    /// The allowed values (concrete) or the excluded values (complement), sorted.
    #[must_use]
    pub fn values(&self) -> &[Arc<str>] {
        self.values.as_slice()
    }

    /// Inclusive integer lower bound.
    #[must_use]
    pub fn lower_bound(&self) -> Option<i64> {
        self.bounds.gte
    }

    /// Inclusive integer upper bound.
    #[must_use]
    pub fn upper_bound(&self) -> Option<i64> {
        self.bounds.lte
    }

    /// minValues, if any.
    #[must_use]
    pub fn min_values(&self) -> Option<usize> {
        self.min_values
    }

    /// Replaces minValues.
    pub fn set_min_values(&mut self, min_values: Option<usize>) {
        self.min_values = min_values;
    }

    /// The derived operator: `Exists` (complement, nothing excluded; bounds are reported
    /// separately), `NotIn`, `In` or `DoesNotExist`.
    #[must_use]
    pub fn operator(&self) -> Operator {
        match (self.complement, self.values.is_empty()) {
            (true, true) => Operator::Exists,
            (true, false) => Operator::NotIn,
            (false, false) => Operator::In,
            (false, true) => Operator::DoesNotExist,
        }
    }

    /// Number of allowed values; for a complement `usize::MAX - excluded` (bounds ignored).
    #[must_use]
    pub fn len(&self) -> usize {
        if self.complement {
            usize::MAX - self.values.len()
        } else {
            self.values.len()
        }
    }

    /// `true` only for a concrete empty set (`DoesNotExist`).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        !self.complement && self.values.is_empty()
    }

    /// Whether `value` is allowed.
    #[must_use]
    pub fn has(&self, value: &str) -> bool {
        self.values.contains(value) != self.complement && self.bounds.admits(value)
    }

    fn merged_bounds(&self, other: &Self) -> Option<Bounds> {
        let gte = self.bounds.gte.max(other.bounds.gte);
        let lte = match (self.bounds.lte, other.bounds.lte) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        match (gte, lte) {
            (Some(g), Some(l)) if g > l => None,
            _ => Some(Bounds { gte, lte }),
        }
    }

    /// The requirement allowing exactly the values both allow; minValues is the larger one.
    /// Keeps `self`'s key. An empty integer range yields `DoesNotExist`.
    #[must_use]
    pub fn intersection(&self, other: &Self) -> Self {
        let min_values = self.min_values.max(other.min_values);
        let Some(bounds) = self.merged_bounds(other) else {
            let empty = Self::raw(self.key.clone(), false, ValueSet::default(), Bounds::NONE);
            return empty.with_min_values(min_values);
        };
        let complement = self.complement && other.complement;
        let values = match (self.complement, other.complement) {
            (true, true) => self.values.union(&other.values, bounds),
            (true, false) => other.values.difference(&self.values, bounds),
            (false, true) => self.values.difference(&other.values, bounds),
            (false, false) => self.values.intersect(&other.values, bounds),
        };
        let bounds = if complement { bounds } else { Bounds::NONE };
        Self::raw(self.key.clone(), complement, values, bounds).with_min_values(min_values)
    }

    /// Allocation-free `!self.intersection(other).is_empty()`.
    #[must_use]
    pub fn has_intersection(&self, other: &Self) -> bool {
        let Some(bounds) = self.merged_bounds(other) else {
            return false;
        };
        match (self.complement, other.complement) {
            (true, true) => true,
            (true, false) => other.values.has_value_outside(&self.values, bounds),
            (false, true) => self.values.has_value_outside(&other.values, bounds),
            (false, false) => self.values.intersects(&other.values, bounds),
        }
    }

    /// A deterministic representative allowed value. `In`: the smallest value (byte order).
    /// `NotIn`/`Exists`: the smallest integer `n >= lower bound (default 0)`, `n <= upper bound`,
    /// whose decimal spelling is not excluded. `DoesNotExist` (or no such integer): `None`.
    /// Upstream picks a random member / random integer instead.
    #[must_use]
    pub fn any(&self) -> Option<String> {
        match self.operator() {
            Operator::In => self.values().first().map(ToString::to_string),
            Operator::NotIn | Operator::Exists => {
                let lo = self.bounds.gte.unwrap_or(0);
                let hi = self.bounds.lte.unwrap_or(i64::MAX);
                (lo..=hi)
                    .take(self.values.len().saturating_add(1))
                    .map(|n| n.to_string())
                    .find(|s| !self.values.contains(s))
            }
            _ => None,
        }
    }

    /// Serialises to entries: bounds become `Gte` and/or `Lte` (plus `NotIn` of any excluded
    /// values, which upstream drops); otherwise `NotIn`/`Exists`/`In`/`DoesNotExist` with sorted
    /// values. Every entry carries minValues.
    #[must_use]
    pub fn to_selector_requirements(&self) -> Vec<SelectorRequirement> {
        let entry = |operator, values: Vec<String>| SelectorRequirement {
            key: self.key.to_string(),
            operator,
            values,
            min_values: self.min_values,
        };
        let values = || self.values().iter().map(ToString::to_string).collect();
        let mut out = Vec::with_capacity(1);
        if let Some(g) = self.bounds.gte {
            out.push(entry(Operator::Gte, vec![g.to_string()]));
        }
        if let Some(l) = self.bounds.lte {
            out.push(entry(Operator::Lte, vec![l.to_string()]));
        }
        if out.is_empty() || !self.values.is_empty() {
            out.push(entry(self.operator(), values()));
        }
        out
    }
}

impl fmt::Display for Requirement {
    /// `key Op [v1 v2 …]` (at most five values, then `and N others`), then ` >=N`, ` <=N`,
    /// ` minValues N`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = self.operator();
        write!(f, "{} {op}", self.key)?;
        if matches!(op, Operator::In | Operator::NotIn) {
            let values = self.values();
            let shown = values.get(..5).unwrap_or(values);
            let mut list: Vec<&str> = shown.iter().map(|v| &**v).collect();
            let others = (values.len() > 5).then(|| format!("and {} others", values.len() - 5));
            list.extend(others.as_deref());
            write!(f, " {}", SpaceList(&list))?;
        }
        if let Some(g) = self.bounds.gte {
            write!(f, " >={g}")?;
        }
        if let Some(l) = self.bounds.lte {
            write!(f, " <={l}")?;
        }
        if let Some(m) = self.min_values {
            write!(f, " minValues {m}")?;
        }
        Ok(())
    }
}
