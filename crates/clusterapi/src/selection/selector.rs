//! `metav1.LabelSelector`, validated once and matched many times.
//!
//! Responsibility: the semantics of `LabelSelectorAsSelector`: `matchLabels` and
//! `matchExpressions` are ANDed; `In` needs values and matches a present label with one of
//! them; `NotIn` needs values and matches an absent label or another value; `Exists` and
//! `DoesNotExist` take no values; keys must be qualified names and values label values; any
//! other operator is an error. An empty selector matches everything.
//! Input: a k8s-openapi `LabelSelector`. Output: a [`Selector`] or a [`SelectorError`].

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use scheduling::labels::{LabelError, validate_label_value, validate_qualified_name};

/// Why a label selector is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// An operator other than In, NotIn, Exists, DoesNotExist.
    #[error("selector key {key:?}: unknown operator {operator:?}")]
    UnknownOperator {
        /// The key.
        key: String,
        /// The operator given.
        operator: String,
    },
    /// `In` / `NotIn` without values.
    #[error("selector key {key:?}: operator {operator} needs at least one value")]
    MissingValues {
        /// The key.
        key: String,
        /// The operator.
        operator: String,
    },
    /// `Exists` / `DoesNotExist` with values.
    #[error("selector key {key:?}: operator {operator} takes no values")]
    UnexpectedValues {
        /// The key.
        key: String,
        /// The operator.
        operator: String,
    },
    /// A key that is not a qualified name.
    #[error("selector key: {0}")]
    InvalidKey(LabelError),
    /// A value that is not a label value.
    #[error("selector value: {0}")]
    InvalidValue(LabelError),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Term {
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

/// A validated label selector.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selector {
    terms: Vec<Term>,
}

impl Selector {
    /// Validates `selector`.
    ///
    /// # Errors
    /// The first invalid key, value, operator or value count.
    pub fn new(selector: &LabelSelector) -> Result<Self, SelectorError> {
        let mut terms = Vec::new();
        for (key, value) in selector.match_labels.iter().flatten() {
            validate_qualified_name(key).map_err(SelectorError::InvalidKey)?;
            validate_label_value(value).map_err(SelectorError::InvalidValue)?;
            terms.push(Term::In(key.clone(), vec![value.clone()]));
        }
        for expression in selector.match_expressions.iter().flatten() {
            let key = expression.key.clone();
            validate_qualified_name(&key).map_err(SelectorError::InvalidKey)?;
            let values = expression.values.clone().unwrap_or_default();
            for value in &values {
                validate_label_value(value).map_err(SelectorError::InvalidValue)?;
            }
            let operator = expression.operator.clone();
            let term = match (operator.as_str(), values.is_empty()) {
                ("In" | "NotIn", true) => {
                    return Err(SelectorError::MissingValues { key, operator });
                }
                ("Exists" | "DoesNotExist", false) => {
                    return Err(SelectorError::UnexpectedValues { key, operator });
                }
                ("In", false) => Term::In(key, values),
                ("NotIn", false) => Term::NotIn(key, values),
                ("Exists", true) => Term::Exists(key),
                ("DoesNotExist", true) => Term::DoesNotExist(key),
                _ => return Err(SelectorError::UnknownOperator { key, operator }),
            };
            terms.push(term);
        }
        Ok(Self { terms })
    }

    /// Whether an object with `labels` (absent = none) is selected.
    #[must_use]
    pub fn matches(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        let get = |key: &str| labels.and_then(|l| l.get(key));
        self.terms.iter().all(|term| match term {
            Term::In(key, values) => get(key).is_some_and(|v| values.contains(v)),
            Term::NotIn(key, values) => get(key).is_none_or(|v| !values.contains(v)),
            Term::Exists(key) => get(key).is_some(),
            Term::DoesNotExist(key) => get(key).is_none(),
        })
    }

    /// Whether the selector has no terms (matches everything).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }
}
