//! The `capacity.cluster-autoscaler.kubernetes.io/taints` annotation:
//! `key1=value1:NoSchedule,key2:NoExecute`.
//!
//! Responsibility: parse the taints a MachineDeployment's nodes register with, in the
//! cluster-autoscaler's format. Input: the annotation value. Output: the taints in the order
//! given, or an [`AnnotationError`].
//!
//! Rules (stricter than the cluster-autoscaler, which skips bad entries and does not check the
//! effect):
//! - entries are separated by `,`, trimmed; empty entries are skipped;
//! - an entry is `key[=value]:Effect`: no `:` is an error (Kubernetes taints always have an
//!   effect), and so is more than one;
//! - the key must be a qualified name, the value (may be empty or absent) a label value;
//! - the effect is exactly `NoSchedule`, `PreferNoSchedule` or `NoExecute`;
//! - the same key and effect twice is an error.

use std::str::FromStr;

use api::well_known::capi::capacity::TAINTS;
use scheduling::labels::{validate_label_value, validate_qualified_name};
use scheduling::taints::{Taint, TaintEffect};

use super::{AnnotationError, AnnotationErrorKind};

/// Parses the taints annotation (see the module docs for the rules).
///
/// # Errors
/// The first bad entry.
pub fn parse_taints(value: &str) -> Result<Vec<Taint>, AnnotationError> {
    let error = |kind| AnnotationError::new(TAINTS, value, kind);
    let mut taints: Vec<Taint> = Vec::new();
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let owned = || entry.to_owned();
        let mut parts = entry.split(':');
        let (Some(key_value), Some(effect), None) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(error(if entry.contains(':') {
                AnnotationErrorKind::MalformedTaint { entry: owned() }
            } else {
                AnnotationErrorKind::MissingSeparator {
                    entry: owned(),
                    separator: ':',
                }
            }));
        };
        let (key, taint_value) = key_value.split_once('=').unwrap_or((key_value, ""));
        let (key, taint_value, effect) = (key.trim(), taint_value.trim(), effect.trim());
        if key.is_empty() {
            return Err(error(AnnotationErrorKind::EmptyKey { entry: owned() }));
        }
        validate_qualified_name(key).map_err(|source| {
            error(AnnotationErrorKind::InvalidKey {
                entry: owned(),
                source,
            })
        })?;
        validate_label_value(taint_value).map_err(|source| {
            error(AnnotationErrorKind::InvalidValue {
                entry: owned(),
                source,
            })
        })?;
        let effect = TaintEffect::from_str(effect).map_err(|_| {
            error(AnnotationErrorKind::UnknownEffect {
                entry: owned(),
                effect: effect.to_owned(),
            })
        })?;
        let taint = Taint::new(key, taint_value, effect);
        if taints.iter().any(|t| t.matches(&taint)) {
            return Err(error(AnnotationErrorKind::DuplicateTaint {
                key: key.to_owned(),
                effect,
            }));
        }
        taints.push(taint);
    }
    Ok(taints)
}
