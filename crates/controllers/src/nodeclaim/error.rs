//! The errors of the NodeClaim lifecycle controller.
//!
//! Responsibility: one enum, [`Error`], with a variant per failed operation, and how the
//! controller reacts: every variant is retried with per-object exponential backoff (1 s … 1 min);
//! [`Error::Conflict`] is the expected outcome of a compare-and-set losing a race.
//! Inputs: kube and CloudProvider errors. Outputs: [`Error`] and its metric label.

use cloudprovider::CloudProviderError;

/// Why one reconcile of a NodeClaim failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A compare-and-set write lost a race (409, or a failed JSON-patch `test`); retried.
    #[error("conflict writing {0}")]
    Conflict(String),
    /// Writing the NodeClaim (metadata, status or finalizer) failed.
    #[error("patch NodeClaim {name}")]
    PatchNodeClaim {
        /// The NodeClaim.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Deleting the NodeClaim failed.
    #[error("delete NodeClaim {name}")]
    DeleteNodeClaim {
        /// The NodeClaim.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Writing the Node failed.
    #[error("patch Node {name}")]
    PatchNode {
        /// The Node.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Deleting the Node failed.
    #[error("delete Node {name}")]
    DeleteNode {
        /// The Node.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// A CloudProvider call failed.
    #[error("cloud provider {method}")]
    CloudProvider {
        /// `create`, `get_launch`, `delete`.
        method: &'static str,
        /// The provider's error.
        #[source]
        source: CloudProviderError,
    },
    /// The Node watch ended before its first list (the process is shutting down).
    #[error("the Node store's watch ended before its first list")]
    NodeStoreGone,
}

impl Error {
    /// A low-cardinality label for logs and metrics.
    #[must_use]
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::Conflict(_) => "conflict",
            Self::PatchNodeClaim { .. } => "patch_nodeclaim",
            Self::DeleteNodeClaim { .. } => "delete_nodeclaim",
            Self::PatchNode { .. } => "patch_node",
            Self::DeleteNode { .. } => "delete_node",
            Self::CloudProvider { .. } => "cloudprovider",
            Self::NodeStoreGone => "node_store_gone",
        }
    }

    /// `PatchNodeClaim`, or `Conflict` for a 409.
    pub(crate) fn patch_node_claim(name: &str, source: kube::Error) -> Self {
        if is_conflict(&source) {
            Self::Conflict(format!("NodeClaim {name}"))
        } else {
            Self::PatchNodeClaim {
                name: name.to_owned(),
                source,
            }
        }
    }

    /// `PatchNode`, or `Conflict` for a 409.
    pub(crate) fn patch_node(name: &str, source: kube::Error) -> Self {
        if is_conflict(&source) {
            Self::Conflict(format!("Node {name}"))
        } else {
            Self::PatchNode {
                name: name.to_owned(),
                source,
            }
        }
    }
}

/// The HTTP status of an API error.
pub(crate) fn status_code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

/// 409.
pub(crate) fn is_conflict(e: &kube::Error) -> bool {
    status_code(e) == Some(409)
}

/// A JSON patch whose `test` failed: kube-apiserver answers 422 without causes. A 422 with
/// causes is a validation error (say, a label value the NodeClaim carries that a Node may not),
/// which no retry mends: it must not pass for a lost race (those are retried quietly).
pub(crate) fn is_failed_patch_test(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 422
        && s.details.as_ref().is_none_or(|d| d.causes.is_empty()))
}

/// 404.
pub(crate) fn is_not_found(e: &kube::Error) -> bool {
    status_code(e) == Some(404)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn api(code: u16, details: serde_json::Value) -> kube::Error {
        kube::Error::Api(Box::new(
            serde_json::from_value(json!({
                "status": "Failure", "code": code, "message": "m", "reason": "Invalid",
                "details": details,
            }))
            .unwrap(),
        ))
    }

    #[test]
    fn only_a_422_without_causes_is_a_failed_patch_test() {
        assert!(is_failed_patch_test(&api(422, json!({}))));
        let validation = json!({"causes": [{"field": "metadata.labels", "message": "bad"}]});
        assert!(!is_failed_patch_test(&api(422, validation)), "validation");
        assert!(!is_failed_patch_test(&api(409, json!({}))));
    }
}
