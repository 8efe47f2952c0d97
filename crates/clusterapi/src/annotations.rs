//! Parsers for the MachineDeployment annotations the provider reads.
//!
//! Responsibility: turn the cluster-autoscaler scale-from-zero annotations (cpu, memory,
//! ephemeral-disk, maxPods, gpu-count + gpu-type, labels, taints), the node-group min/max size
//! and the price annotations into typed values, without ever panicking. Every failure is an
//! [`AnnotationError`] naming the annotation and the offending text, so the caller can exclude
//! that one MachineDeployment and say why (NodeClass condition, Event).
//! Inputs: annotation values (`Option<&str>`; `None` = absent). Outputs: typed values.
//!
//! Rules shared by the scalar parsers (quantities, integers, prices):
//! - surrounding whitespace is ignored, and an empty (or blank) value means absent, as in the
//!   cluster-autoscaler;
//! - negative values are errors (capacity, sizes and prices cannot be negative).
//!
//! Quantities use Kubernetes' grammar ([`Quantity::parse`]: `"16GB"` is invalid, `"16G"` and
//! `"16Gi"` differ). `maxPods`, `gpu-count` and the sizes are base-10 integers (`"1.5"`,
//! `"2k"` are errors). Prices are plain decimals (`"0.192"`; no sign, exponent, `inf` or `NaN`).
//! The list-valued annotations are parsed by [`parse_labels`] and [`parse_taints`].

mod labels;
mod set;
mod taints;

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;

use scheduling::labels::LabelError;
use scheduling::quantity::{ParseQuantityError, Quantity};
use scheduling::taints::TaintEffect;

pub use labels::parse_labels;
pub use set::{AnnotatedPrice, MachineDeploymentAnnotations};
pub use taints::parse_taints;

/// The default pod capacity when neither `maxPods` nor the infrastructure template gives one.
pub use api::well_known::capi::capacity::DEFAULT_MAX_PODS;

/// The longest stretch of an offending value an error repeats.
const MAX_ERROR_VALUE_CHARS: usize = 128;

/// An annotation whose value cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("annotation {annotation}: invalid value {value:?}: {kind}")]
pub struct AnnotationError {
    /// The annotation key.
    pub annotation: &'static str,
    /// The offending value (cut to 128 characters).
    pub value: String,
    /// What is wrong with it.
    pub kind: AnnotationErrorKind,
}

impl AnnotationError {
    /// An error about `value` of `annotation`.
    #[must_use]
    pub fn new(annotation: &'static str, value: &str, kind: AnnotationErrorKind) -> Self {
        let value = match value.char_indices().nth(MAX_ERROR_VALUE_CHARS) {
            Some((end, _)) => format!("{}…", value.get(..end).unwrap_or_default()),
            None => value.to_owned(),
        };
        Self {
            annotation,
            value,
            kind,
        }
    }
}

/// Why an annotation value cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnnotationErrorKind {
    /// Not a Kubernetes quantity.
    #[error("{0}")]
    Quantity(ParseQuantityError),
    /// A negative quantity, size or count.
    #[error("must not be negative")]
    Negative,
    /// Not a base-10 integer (or beyond the 32-bit range for sizes).
    #[error("expected a base-10 integer")]
    NotAnInteger,
    /// Not a plain non-negative decimal number.
    #[error("expected a non-negative decimal number such as 0.192")]
    NotAPrice,
    /// A list entry without the separator it needs (`=` for labels, `:` for taints).
    #[error("entry {entry:?} has no {separator:?}")]
    MissingSeparator {
        /// The entry.
        entry: String,
        /// The missing separator.
        separator: char,
    },
    /// A list entry with an empty key.
    #[error("entry {entry:?} has an empty key")]
    EmptyKey {
        /// The entry.
        entry: String,
    },
    /// A key that is not a qualified name.
    #[error("entry {entry:?}: invalid key: {source}")]
    InvalidKey {
        /// The entry.
        entry: String,
        /// Why.
        source: LabelError,
    },
    /// A value that is not a label value.
    #[error("entry {entry:?}: invalid value: {source}")]
    InvalidValue {
        /// The entry.
        entry: String,
        /// Why.
        source: LabelError,
    },
    /// A label key listed twice.
    #[error("label {key:?} is listed more than once")]
    DuplicateKey {
        /// The key.
        key: String,
    },
    /// A taint entry with more than one `:`.
    #[error("entry {entry:?}: expected key[=value]:Effect")]
    MalformedTaint {
        /// The entry.
        entry: String,
    },
    /// A taint effect other than NoSchedule, PreferNoSchedule, NoExecute.
    #[error(
        "entry {entry:?}: unknown effect {effect:?}; expected NoSchedule, PreferNoSchedule or NoExecute"
    )]
    UnknownEffect {
        /// The entry.
        entry: String,
        /// The effect given.
        effect: String,
    },
    /// The same taint key and effect twice.
    #[error("taint {key}:{effect} is listed more than once")]
    DuplicateTaint {
        /// The key.
        key: String,
        /// The effect.
        effect: TaintEffect,
    },
    /// A GPU count without a GPU type.
    #[error("a GPU count needs the gpu-type annotation too")]
    GpuTypeMissing,
    /// A GPU type that is not a resource name.
    #[error("not a resource name: {0}")]
    InvalidResourceName(LabelError),
    /// The min size exceeds the max size.
    #[error("min size {min} is above max size {max}")]
    MinAboveMax {
        /// The min size.
        min: i32,
        /// The max size.
        max: i32,
    },
}

/// The trimmed value, or `None` when absent or blank.
fn present(value: Option<&str>) -> Option<&str> {
    value.map(str::trim).filter(|v| !v.is_empty())
}

/// A non-negative quantity (cpu, memory, ephemeral-disk).
///
/// # Errors
/// Not a quantity, or negative.
pub fn parse_quantity(
    annotation: &'static str,
    value: Option<&str>,
) -> Result<Option<Quantity>, AnnotationError> {
    let Some(text) = present(value) else {
        return Ok(None);
    };
    let quantity = Quantity::parse(text)
        .map_err(|e| AnnotationError::new(annotation, text, AnnotationErrorKind::Quantity(e)))?;
    if quantity.is_negative() {
        return Err(AnnotationError::new(
            annotation,
            text,
            AnnotationErrorKind::Negative,
        ));
    }
    Ok(Some(quantity))
}

/// A non-negative base-10 integer.
fn parse_count(annotation: &'static str, text: &str) -> Result<i64, AnnotationError> {
    let number: i64 = text
        .parse()
        .map_err(|_| AnnotationError::new(annotation, text, AnnotationErrorKind::NotAnInteger))?;
    if number < 0 {
        return Err(AnnotationError::new(
            annotation,
            text,
            AnnotationErrorKind::Negative,
        ));
    }
    Ok(number)
}

/// `maxPods`: a base-10 integer. `None` when absent, blank or `0`, where the default
/// ([`DEFAULT_MAX_PODS`], unless the infrastructure template says otherwise) applies, as in the
/// cluster-autoscaler.
///
/// # Errors
/// Not a base-10 integer, or negative.
pub fn parse_max_pods(value: Option<&str>) -> Result<Option<i64>, AnnotationError> {
    let annotation = api::well_known::capi::capacity::MAX_PODS;
    let Some(text) = present(value) else {
        return Ok(None);
    };
    Ok(Some(parse_count(annotation, text)?).filter(|n| *n != 0))
}

/// `gpu-count` with `gpu-type`: the extended resource and its count. `None` when the count is
/// absent or 0 (a type alone describes no GPU).
///
/// # Errors
/// The count is not a non-negative base-10 integer; a positive count without a type; a type
/// that is not a resource name (qualified name such as `nvidia.com/gpu`).
pub fn parse_gpu(
    count: Option<&str>,
    gpu_type: Option<&str>,
) -> Result<Option<(String, Quantity)>, AnnotationError> {
    use api::well_known::capi::capacity::{GPU_COUNT, GPU_TYPE};
    let Some(text) = present(count) else {
        return Ok(None);
    };
    let number = parse_count(GPU_COUNT, text)?;
    if number == 0 {
        return Ok(None);
    }
    let Some(resource) = present(gpu_type) else {
        return Err(AnnotationError::new(
            GPU_COUNT,
            text,
            AnnotationErrorKind::GpuTypeMissing,
        ));
    };
    scheduling::labels::validate_qualified_name(resource).map_err(|e| {
        AnnotationError::new(
            GPU_TYPE,
            resource,
            AnnotationErrorKind::InvalidResourceName(e),
        )
    })?;
    Ok(Some((resource.to_owned(), Quantity::from_value(number))))
}

/// A node-group size (min or max): a non-negative base-10 integer in the 32-bit range.
///
/// # Errors
/// Not such an integer.
pub fn parse_size(
    annotation: &'static str,
    value: Option<&str>,
) -> Result<Option<i32>, AnnotationError> {
    let Some(text) = present(value) else {
        return Ok(None);
    };
    let number = parse_count(annotation, text)?;
    i32::try_from(number)
        .map(Some)
        .map_err(|_| AnnotationError::new(annotation, text, AnnotationErrorKind::NotAnInteger))
}

/// A price: digits, optionally `.` and more digits; finite and non-negative by construction.
/// Shared with the NodeClass price table, whose schema pattern is the same grammar.
#[must_use]
pub fn parse_price_text(text: &str) -> Option<f64> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, "0"));
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(whole) || !digits(fraction) {
        return None;
    }
    text.parse::<f64>().ok().filter(|p| p.is_finite())
}

/// A price annotation (see [`parse_price_text`]).
///
/// # Errors
/// Not a plain non-negative decimal number.
pub fn parse_price(
    annotation: &'static str,
    value: Option<&str>,
) -> Result<Option<f64>, AnnotationError> {
    let Some(text) = present(value) else {
        return Ok(None);
    };
    parse_price_text(text)
        .map(Some)
        .ok_or_else(|| AnnotationError::new(annotation, text, AnnotationErrorKind::NotAPrice))
}
