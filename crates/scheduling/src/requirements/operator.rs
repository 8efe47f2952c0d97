//! Node-selector operators and the plain-data requirement entry.
//!
//! Responsibility: the operator vocabulary (`In`, `NotIn`, `Exists`, `DoesNotExist`, `Gt`, `Lt`,
//! `Gte`, `Lte`) with parsing from and printing to the Kubernetes spelling, and
//! [`SelectorRequirement`], the `(key, operator, values, minValues)` record used both to build
//! [`super::Requirements`] and to serialise them back.
//! Inputs: operator strings, keys and values. Outputs: [`Operator`], [`SelectorRequirement`],
//! [`UnknownOperator`] for unsupported spellings.

use std::fmt;
use std::str::FromStr;

/// A node-selector operator. `Gte`/`Lte` are Karpenter's inclusive extensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Operator {
    /// The value is one of the listed values.
    In,
    /// The label is absent or its value is not one of the listed values.
    NotIn,
    /// The label is present (any value).
    Exists,
    /// The label is absent.
    DoesNotExist,
    /// Integer value strictly greater than the single listed value.
    Gt,
    /// Integer value strictly less than the single listed value.
    Lt,
    /// Integer value greater than or equal to the single listed value.
    Gte,
    /// Integer value less than or equal to the single listed value.
    Lte,
}

impl Operator {
    /// Every operator, in declaration order.
    pub const ALL: [Self; 8] = [
        Self::In,
        Self::NotIn,
        Self::Exists,
        Self::DoesNotExist,
        Self::Gt,
        Self::Lt,
        Self::Gte,
        Self::Lte,
    ];

    /// The Kubernetes spelling (`"In"`, `"NotIn"`, …).
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::In => "In",
            Self::NotIn => "NotIn",
            Self::Exists => "Exists",
            Self::DoesNotExist => "DoesNotExist",
            Self::Gt => "Gt",
            Self::Lt => "Lt",
            Self::Gte => "Gte",
            Self::Lte => "Lte",
        }
    }

    /// `Gt`, `Lt`, `Gte` or `Lte`: takes exactly one integer value.
    #[must_use]
    pub const fn is_numeric(self) -> bool {
        matches!(self, Self::Gt | Self::Lt | Self::Gte | Self::Lte)
    }

    /// `NotIn` or `DoesNotExist`: satisfied by a node that lacks the label.
    #[must_use]
    pub const fn is_negative(self) -> bool {
        matches!(self, Self::NotIn | Self::DoesNotExist)
    }
}

impl fmt::Display for Operator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An operator spelling this crate does not support.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unsupported operator {0:?}, expected one of In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte, Lte"
)]
pub struct UnknownOperator(pub String);

impl FromStr for Operator {
    type Err = UnknownOperator;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|op| op.as_str() == s)
            .ok_or_else(|| UnknownOperator(s.to_owned()))
    }
}

/// One `(key, operator, values, minValues)` entry, as found in a NodePool, a NodeClaim or a pod's
/// node affinity, and as produced by [`super::Requirements::to_selector_requirements`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SelectorRequirement {
    /// The label key (not normalised).
    pub key: String,
    /// The operator.
    pub operator: Operator,
    /// The values (empty for `Exists`/`DoesNotExist`).
    pub values: Vec<String>,
    /// Minimum number of distinct values the instance-type options must keep.
    pub min_values: Option<usize>,
}

impl SelectorRequirement {
    /// An entry without minValues.
    pub fn new<K, I, V>(key: K, operator: Operator, values: I) -> Self
    where
        K: Into<String>,
        I: IntoIterator<Item = V>,
        V: Into<String>,
    {
        Self {
            key: key.into(),
            operator,
            values: values.into_iter().map(Into::into).collect(),
            min_values: None,
        }
    }

    /// Sets minValues.
    #[must_use]
    pub fn with_min_values(mut self, min_values: Option<usize>) -> Self {
        self.min_values = min_values;
        self
    }
}
