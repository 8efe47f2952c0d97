//! Validation of user-supplied requirement entries (NodePool requirements, pod node selectors
//! and required node-affinity expressions).
//!
//! Responsibility: reject entries the scheduler must not act on: unsupported operator, restricted
//! key, key that is not a qualified name, invalid value, `In` without values, `In` with fewer
//! values than minValues, numeric operator without a single non-negative integer, and a key with
//! a closed value set (capacity type) given only unknown values or fewer known values than
//! minValues.
//! Inputs: the raw key, operator string, values and minValues, plus [`WellKnownLabels`].
//! Outputs: `Ok(())` or [`RequirementValidationErrors`] listing every problem in a fixed order.
//! Mixed known/unknown values are accepted; [`unknown_well_known_values`] lets the caller log
//! them (this crate does no I/O).

use std::fmt;

use super::operator::Operator;
use crate::labels::{
    LabelError, SpaceList, WellKnownLabels, normalize_key, validate_label_value,
    validate_qualified_name,
};

/// One problem with a requirement entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequirementValidationError {
    /// The operator is not one of the eight supported ones.
    #[error("key {key} has an unsupported operator {operator}")]
    UnsupportedOperator {
        /// The (normalised) key.
        key: String,
        /// The operator as given.
        operator: String,
    },
    /// The key is restricted (see [`WellKnownLabels::is_restricted_label`]).
    #[error(
        "using label {key} is not allowed as it might interfere with the internal provisioning \
         logic; specify a well known label or a custom label that does not use a restricted domain"
    )]
    RestrictedLabel {
        /// The key.
        key: String,
    },
    /// The key is not a qualified name.
    #[error("key {key} is not a qualified name, {source}")]
    InvalidKey {
        /// The key.
        key: String,
        /// Why.
        source: LabelError,
    },
    /// A value is not a valid label value.
    #[error("invalid value {value} for key {key}, {source}")]
    InvalidValue {
        /// The key.
        key: String,
        /// The value.
        value: String,
        /// Why.
        source: LabelError,
    },
    /// `In` without values.
    #[error("key {key} with operator In must have a value defined")]
    InWithoutValues {
        /// The key.
        key: String,
    },
    /// `In` with fewer values than minValues.
    #[error(
        "key {key} with operator In must have at least minimum number of values defined in 'values' field"
    )]
    FewerValuesThanMinValues {
        /// The key.
        key: String,
    },
    /// `Gt`/`Lt`/`Gte`/`Lte` without exactly one non-negative integer.
    #[error("key {key} with operator {operator} must have a single positive integer value")]
    NotSingleNonNegativeInteger {
        /// The key.
        key: String,
        /// The operator.
        operator: Operator,
    },
    /// Only unknown values for a key with a closed value set.
    #[error(
        "no valid values found in {} for {key}, expected one of: {}",
        SpaceList(values),
        SpaceList(known)
    )]
    NoKnownValues {
        /// The key.
        key: String,
        /// The values given.
        values: Vec<String>,
        /// The known values.
        known: Vec<String>,
    },
    /// Fewer known values than minValues for a key with a closed value set.
    #[error(
        "not enough valid values found for {key}, expected at least {min_values} valid values, got {valid}"
    )]
    NotEnoughKnownValues {
        /// The key.
        key: String,
        /// minValues.
        min_values: usize,
        /// How many given values are known.
        valid: usize,
    },
}

/// Every problem found with one entry (never empty).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct RequirementValidationErrors(pub Vec<RequirementValidationError>);

impl fmt::Display for RequirementValidationErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

/// The values of an `In` entry on a key with a closed value set that are not known (for logging).
/// Empty for other keys/operators.
#[must_use]
pub fn unknown_well_known_values<'a, S: AsRef<str>>(
    key: &str,
    operator: &str,
    values: &'a [S],
    well_known: &WellKnownLabels,
) -> Vec<&'a str> {
    let key = normalize_key(key);
    match well_known.known_values(key) {
        Some(known) if operator == Operator::In.as_str() && well_known.contains(key) => values
            .iter()
            .map(AsRef::as_ref)
            .filter(|v| !known.contains(*v))
            .collect(),
        _ => Vec::new(),
    }
}

/// Validates one entry. The key is alias-normalised first.
///
/// # Errors
/// Every problem found, in the order: operator, restriction, known values, key syntax, value
/// syntax, `In` emptiness, minValues, numeric value.
pub fn validate_requirement<S: AsRef<str>>(
    key: &str,
    operator: &str,
    values: &[S],
    min_values: Option<usize>,
    well_known: &WellKnownLabels,
) -> Result<(), RequirementValidationErrors> {
    use RequirementValidationError as E;
    let key = normalize_key(key);
    let owned = || key.to_owned();
    let op = operator.parse::<Operator>().ok();
    let mut errors = Vec::new();
    if op.is_none() {
        errors.push(E::UnsupportedOperator {
            key: owned(),
            operator: operator.to_owned(),
        });
    }
    if well_known.is_restricted_label(key) {
        errors.push(E::RestrictedLabel { key: owned() });
    }
    if let (Some(Operator::In), Some(known)) = (op, well_known.known_values(key))
        && well_known.contains(key)
    {
        let valid = values.iter().filter(|v| known.contains(v.as_ref())).count();
        if valid == 0 {
            errors.push(E::NoKnownValues {
                key: owned(),
                values: values.iter().map(|v| v.as_ref().to_owned()).collect(),
                known: known.iter().map(ToString::to_string).collect(),
            });
        } else if let Some(min) = min_values.filter(|m| valid < *m) {
            errors.push(E::NotEnoughKnownValues {
                key: owned(),
                min_values: min,
                valid,
            });
        }
    }
    if let Err(source) = validate_qualified_name(key) {
        errors.push(E::InvalidKey {
            key: owned(),
            source,
        });
    }
    for value in values {
        if let Err(source) = validate_label_value(value.as_ref()) {
            errors.push(E::InvalidValue {
                key: owned(),
                value: value.as_ref().to_owned(),
                source,
            });
        }
    }
    if op == Some(Operator::In) {
        if values.is_empty() {
            errors.push(E::InWithoutValues { key: owned() });
        }
        if min_values.is_some_and(|m| values.len() < m) {
            errors.push(E::FewerValuesThanMinValues { key: owned() });
        }
    }
    if let Some(op) = op.filter(|o| o.is_numeric()) {
        let ok = matches!(values, [single] if single.as_ref().parse::<i64>().is_ok_and(|n| n >= 0));
        if !ok {
            errors.push(E::NotSingleNonNegativeInteger {
                key: owned(),
                operator: op,
            });
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(RequirementValidationErrors(errors))
    }
}
