//! The errors of node termination.
//!
//! Responsibility: one enum, [`TerminationError`], variants named after the failed operation,
//! each with a low-cardinality [`TerminationError::metric_label`]. All of them are transient:
//! the Node is reconciled again with backoff.
//! Inputs: kube and CloudProvider errors. Outputs: the error values.

use cloudprovider::CloudProviderError;

/// Why one reconcile of a terminating Node failed.
#[derive(Debug, thiserror::Error)]
pub enum TerminationError {
    /// A Kubernetes API call failed.
    #[error("{operation}: {source}")]
    Kube {
        /// What was being done (`list pods`, `patch node`, …).
        operation: &'static str,
        /// The error.
        #[source]
        source: kube::Error,
    },
    /// A CloudProvider call failed.
    #[error("{operation}: {source}")]
    CloudProvider {
        /// `get` or `delete`.
        operation: &'static str,
        /// The error.
        #[source]
        source: CloudProviderError,
    },
    /// An object could not be encoded into a patch.
    #[error("encode {what}: {source}")]
    Encode {
        /// What was being encoded.
        what: &'static str,
        /// The error.
        #[source]
        source: serde_json::Error,
    },
}

impl TerminationError {
    /// The metric label of this error.
    #[must_use]
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::Kube { .. } => "KubeError",
            Self::CloudProvider { source, .. } => source.metric_label(),
            Self::Encode { .. } => "EncodeError",
        }
    }
}

/// Wraps a kube error with the operation that failed.
pub(crate) fn kube(operation: &'static str) -> impl FnOnce(kube::Error) -> TerminationError {
    move |source| TerminationError::Kube { operation, source }
}

/// The HTTP status of a kube API error, if it is one.
#[must_use]
pub(crate) fn status_code(error: &kube::Error) -> Option<u16> {
    match error {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}
