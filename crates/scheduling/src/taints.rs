//! Taints, tolerations and the toleration test.
//!
//! Responsibility: Kubernetes' `Toleration.ToleratesTaint` semantics (including the numeric
//! `Lt`/`Gt` toleration operators, which Karpenter enables), the "pod tolerates all these taints"
//! check the scheduler runs for NodeClaim templates and existing nodes, the well-known Karpenter
//! taints, the known ephemeral (start-up) taints, taint merging and NodePool taint validation.
//! Inputs: [`Taint`]s and [`Toleration`]s as plain data (effects and operators already parsed
//! from strings with [`FromStr`]). Outputs: booleans, [`UntoleratedTaint`],
//! [`TaintValidationErrors`], merged taint lists.
//!
//! As upstream, *every* taint must be tolerated, whatever its effect, `PreferNoSchedule`
//! included; the scheduler's preference relaxation adds a `PreferNoSchedule` toleration instead.

use std::fmt;
use std::str::FromStr;

use crate::labels::{LabelError, validate_label_value, validate_qualified_name};

/// Key of the taint disruption and termination put on nodes (`NoSchedule`).
pub const DISRUPTED_TAINT_KEY: &str = "karpenter.sh/disrupted";
/// Key of the taint the node bootstrap puts on new nodes until registration (`NoExecute`).
pub const UNREGISTERED_TAINT_KEY: &str = "karpenter.sh/unregistered";
/// Kubernetes' not-ready taint key.
pub const NOT_READY_TAINT_KEY: &str = "node.kubernetes.io/not-ready";
/// Kubernetes' unreachable taint key.
pub const UNREACHABLE_TAINT_KEY: &str = "node.kubernetes.io/unreachable";
/// The external cloud provider's uninitialised taint key.
pub const CLOUD_PROVIDER_UNINITIALIZED_TAINT_KEY: &str =
    "node.cloudprovider.kubernetes.io/uninitialized";
/// Any taint whose key starts with this prefix is ephemeral (node readiness controller).
pub const EPHEMERAL_TAINT_KEY_PREFIX: &str = "readiness.k8s.io/";

/// A taint effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TaintEffect {
    /// New pods must tolerate the taint.
    NoSchedule,
    /// The scheduler avoids the node for pods that do not tolerate the taint.
    PreferNoSchedule,
    /// Running pods that do not tolerate the taint are evicted.
    NoExecute,
}

impl TaintEffect {
    /// The Kubernetes spelling.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::NoSchedule => "NoSchedule",
            Self::PreferNoSchedule => "PreferNoSchedule",
            Self::NoExecute => "NoExecute",
        }
    }
}

impl fmt::Display for TaintEffect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An unknown taint effect or toleration operator spelling.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} {value:?}")]
pub struct ParseTaintError {
    /// `"taint effect"` or `"toleration operator"`.
    pub what: &'static str,
    /// The spelling given.
    pub value: String,
}

impl FromStr for TaintEffect {
    type Err = ParseTaintError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [Self::NoSchedule, Self::PreferNoSchedule, Self::NoExecute]
            .into_iter()
            .find(|e| e.as_str() == s)
            .ok_or_else(|| ParseTaintError {
                what: "taint effect",
                value: s.to_owned(),
            })
    }
}

/// A node taint.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Taint {
    /// The key.
    pub key: String,
    /// The value (may be empty).
    pub value: String,
    /// The effect.
    pub effect: TaintEffect,
}

impl Taint {
    /// A taint.
    pub fn new(key: impl Into<String>, value: impl Into<String>, effect: TaintEffect) -> Self {
        Self {
            key: key.into(),
            value: value.into(),
            effect,
        }
    }

    /// `karpenter.sh/disrupted:NoSchedule`.
    #[must_use]
    pub fn disrupted() -> Self {
        Self::new(DISRUPTED_TAINT_KEY, "", TaintEffect::NoSchedule)
    }

    /// `karpenter.sh/unregistered:NoExecute`.
    #[must_use]
    pub fn unregistered() -> Self {
        Self::new(UNREGISTERED_TAINT_KEY, "", TaintEffect::NoExecute)
    }

    /// Taints are identified by `(key, effect)`; the value is ignored.
    #[must_use]
    pub fn matches(&self, other: &Self) -> bool {
        self.key == other.key && self.effect == other.effect
    }
}

impl fmt::Display for Taint {
    /// `key=value:Effect`, or `key:Effect` when the value is empty.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.value.is_empty() {
            write!(f, "{}:{}", self.key, self.effect)
        } else {
            write!(f, "{}={}:{}", self.key, self.value, self.effect)
        }
    }
}

/// The taints expected while a node starts: ignored for scheduling on uninitialised managed
/// nodes, and required to be gone before initialisation. Matched by `(key, effect)`.
#[must_use]
pub fn known_ephemeral_taints() -> [Taint; 5] {
    [
        Taint::new(NOT_READY_TAINT_KEY, "", TaintEffect::NoSchedule),
        Taint::new(NOT_READY_TAINT_KEY, "", TaintEffect::NoExecute),
        Taint::new(UNREACHABLE_TAINT_KEY, "", TaintEffect::NoSchedule),
        Taint::new(
            CLOUD_PROVIDER_UNINITIALIZED_TAINT_KEY,
            "true",
            TaintEffect::NoSchedule,
        ),
        Taint::unregistered(),
    ]
}

/// Whether `taint` is a known ephemeral taint (same key and effect as one of
/// [`known_ephemeral_taints`], any value) or its key starts with `readiness.k8s.io/`.
#[must_use]
pub fn is_known_ephemeral(taint: &Taint) -> bool {
    taint.key.starts_with(EPHEMERAL_TAINT_KEY_PREFIX)
        || known_ephemeral_taints()
            .iter()
            .any(|known| known.matches(taint))
}

/// A toleration operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum TolerationOperator {
    /// Values must be equal (the default, also for an empty spelling).
    #[default]
    Equal,
    /// Any value.
    Exists,
    /// The taint value, as an integer, is less than the toleration value.
    Lt,
    /// The taint value, as an integer, is greater than the toleration value.
    Gt,
}

impl FromStr for TolerationOperator {
    type Err = ParseTaintError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "" | "Equal" => Ok(Self::Equal),
            "Exists" => Ok(Self::Exists),
            "Lt" => Ok(Self::Lt),
            "Gt" => Ok(Self::Gt),
            _ => Err(ParseTaintError {
                what: "toleration operator",
                value: s.to_owned(),
            }),
        }
    }
}

/// A pod toleration.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Toleration {
    /// The taint key; empty matches every key (meaningful with `Exists`).
    pub key: String,
    /// The operator.
    pub operator: TolerationOperator,
    /// The value to compare with.
    pub value: String,
    /// The effect to match; `None` matches every effect.
    pub effect: Option<TaintEffect>,
    /// How long a `NoExecute` taint is tolerated (not used by the toleration test).
    pub toleration_seconds: Option<i64>,
}

/// Kubernetes' canonical decimal integer: `0`, or an optional `-` then a non-zero digit and
/// digits (no `+`, no leading zeros).
fn canonical_integer(s: &str) -> Option<i64> {
    let digits = s.strip_prefix('-').unwrap_or(s);
    let canonical = digits == "0" && digits.len() == s.len()
        || digits.starts_with(|c: char| matches!(c, '1'..='9'))
            && digits.bytes().all(|b| b.is_ascii_digit());
    if canonical { s.parse().ok() } else { None }
}

impl Toleration {
    /// Whether this toleration tolerates `taint` (Kubernetes `ToleratesTaint`, comparison
    /// operators enabled).
    #[must_use]
    pub fn tolerates(&self, taint: &Taint) -> bool {
        if self.effect.is_some_and(|e| e != taint.effect) {
            return false;
        }
        if !self.key.is_empty() && self.key != taint.key {
            return false;
        }
        match self.operator {
            TolerationOperator::Equal => self.value == taint.value,
            TolerationOperator::Exists => true,
            TolerationOperator::Lt | TolerationOperator::Gt => {
                match (
                    canonical_integer(&self.value),
                    canonical_integer(&taint.value),
                ) {
                    (Some(toleration), Some(taint)) if self.operator == TolerationOperator::Lt => {
                        taint < toleration
                    }
                    (Some(toleration), Some(taint)) => taint > toleration,
                    _ => false,
                }
            }
        }
    }
}

/// A taint no toleration tolerates.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("did not tolerate taint {taint}")]
pub struct UntoleratedTaint {
    /// The first such taint.
    pub taint: Taint,
}

/// Checks that `tolerations` tolerate every one of `taints` (all effects).
///
/// # Errors
/// [`UntoleratedTaint`] naming the first taint (in `taints` order) not tolerated.
pub fn tolerates_all(taints: &[Taint], tolerations: &[Toleration]) -> Result<(), UntoleratedTaint> {
    match taints
        .iter()
        .find(|t| !tolerations.iter().any(|tol| tol.tolerates(t)))
    {
        Some(taint) => Err(UntoleratedTaint {
            taint: taint.clone(),
        }),
        None => Ok(()),
    }
}

/// `base` followed by each taint of `with` whose `(key, effect)` is not already present.
#[must_use]
pub fn merge_taints(base: &[Taint], with: &[Taint]) -> Vec<Taint> {
    let mut out = base.to_vec();
    for taint in with {
        if !out.iter().any(|t| t.matches(taint)) {
            out.push(taint.clone());
        }
    }
    out
}

/// One problem with a NodePool's taints.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TaintValidationError {
    /// The key is not a qualified name.
    #[error("invalid taint key in {field}: {source}")]
    InvalidKey {
        /// `"taints"` or `"startupTaints"`.
        field: &'static str,
        /// Why.
        source: LabelError,
    },
    /// The value is not a valid label value.
    #[error("invalid taint value in {field}: {source}")]
    InvalidValue {
        /// `"taints"` or `"startupTaints"`.
        field: &'static str,
        /// Why.
        source: LabelError,
    },
    /// The same `(key, effect)` appears twice across taints and startup taints.
    #[error("duplicate taint Key/Effect pair {key}={effect}")]
    Duplicate {
        /// The key.
        key: String,
        /// The effect.
        effect: TaintEffect,
    },
}

/// Every problem found (never empty).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
pub struct TaintValidationErrors(pub Vec<TaintValidationError>);

/// Validates a NodePool's `taints` and `startupTaints`: qualified-name keys, label-value values,
/// and no `(key, effect)` pair twice across both lists. (Effects are valid by construction; parse
/// them with [`TaintEffect::from_str`].)
///
/// # Errors
/// Every problem found, taints first.
pub fn validate_taints(
    taints: &[Taint],
    startup_taints: &[Taint],
) -> Result<(), TaintValidationErrors> {
    let mut errors = Vec::new();
    let mut seen: Vec<(&str, TaintEffect)> = Vec::new();
    let fields = taints
        .iter()
        .map(|t| ("taints", t))
        .chain(startup_taints.iter().map(|t| ("startupTaints", t)));
    for (field, taint) in fields {
        if let Err(source) = validate_qualified_name(&taint.key) {
            errors.push(TaintValidationError::InvalidKey { field, source });
        }
        if let Err(source) = validate_label_value(&taint.value) {
            errors.push(TaintValidationError::InvalidValue { field, source });
        }
        let id = (taint.key.as_str(), taint.effect);
        if seen.contains(&id) {
            errors.push(TaintValidationError::Duplicate {
                key: taint.key.clone(),
                effect: taint.effect,
            });
        } else {
            seen.push(id);
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(TaintValidationErrors(errors))
    }
}
