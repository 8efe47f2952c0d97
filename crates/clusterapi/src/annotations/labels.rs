//! The `capacity.cluster-autoscaler.kubernetes.io/labels` annotation: `k1=v1,k2=v2`.
//!
//! Responsibility: parse the node labels a MachineDeployment declares for scale-from-zero.
//! Input: the annotation value. Output: a sorted label map, or an [`AnnotationError`].
//!
//! Stricter than the cluster-autoscaler (which skips entries without `=` and validates nothing),
//! because these labels become scheduling requirements and NodeClaim labels:
//! - entries are separated by `,`; blanks around entries, keys and values are trimmed; empty
//!   entries (`a=b,,c=d`, a trailing `,`) are skipped;
//! - an entry is split at its first `=`; an entry without `=` is an error (a bare key would
//!   otherwise vanish silently);
//! - keys must be qualified names (non-empty) and values label values (`a=b=c` is an error:
//!   `b=c` is not a label value); a value may be empty (`a=`);
//! - a key listed twice is an error, since which one wins would be a guess.

use std::collections::BTreeMap;

use api::well_known::capi::capacity::LABELS;
use scheduling::labels::{validate_label_value, validate_qualified_name};

use super::{AnnotationError, AnnotationErrorKind};

/// Parses the labels annotation (see the module docs for the rules).
///
/// # Errors
/// The first bad entry: no `=`, empty or invalid key, invalid value, repeated key.
pub fn parse_labels(value: &str) -> Result<BTreeMap<String, String>, AnnotationError> {
    let error = |kind| AnnotationError::new(LABELS, value, kind);
    let mut labels = BTreeMap::new();
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let Some((key, label_value)) = entry.split_once('=') else {
            return Err(error(AnnotationErrorKind::MissingSeparator {
                entry: entry.to_owned(),
                separator: '=',
            }));
        };
        let (key, label_value) = (key.trim(), label_value.trim());
        if key.is_empty() {
            return Err(error(AnnotationErrorKind::EmptyKey {
                entry: entry.to_owned(),
            }));
        }
        validate_qualified_name(key).map_err(|source| {
            error(AnnotationErrorKind::InvalidKey {
                entry: entry.to_owned(),
                source,
            })
        })?;
        validate_label_value(label_value).map_err(|source| {
            error(AnnotationErrorKind::InvalidValue {
                entry: entry.to_owned(),
                source,
            })
        })?;
        if labels
            .insert(key.to_owned(), label_value.to_owned())
            .is_some()
        {
            return Err(error(AnnotationErrorKind::DuplicateKey {
                key: key.to_owned(),
            }));
        }
    }
    Ok(labels)
}
