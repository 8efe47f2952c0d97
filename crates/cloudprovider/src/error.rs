//! The typed errors of the CloudProvider contract and how core reacts to each.
//!
//! Responsibility: one enum, [`CloudProviderError`], whose variants mirror upstream Karpenter's
//! error types, with a low-cardinality label for metrics.

/// Why a CloudProvider call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CloudProviderError {
    /// The instance is gone (Delete / Get): core removes finalizers.
    #[error("instance not found: {0}")]
    NodeClaimNotFound(String),
    /// No capacity for this NodeClaim (Create): core deletes the NodeClaim and re-provisions.
    #[error("insufficient capacity: {0}")]
    InsufficientCapacity(String),
    /// The NodeClass is missing or unusable (Create, GetInstanceTypes): core deletes the
    /// NodeClaim.
    #[error("node class not ready: {0}")]
    NodeClassNotReady(String),
    /// Create failed for a known reason: `Launched=Unknown` with this reason; core retries.
    #[error("create failed ({reason}): {message}")]
    Create {
        /// A CamelCase condition reason.
        reason: String,
        /// A human-readable message.
        message: String,
    },
    /// A cache the provider answers from has not synced within its bounded wait — its watch
    /// keeps failing (`cause` says why, e.g. a 403 from missing RBAC): core retries with
    /// backoff, and the error names the cause instead of hanging.
    #[error("{cache} cache not synced: {cause}")]
    CacheNotSynced {
        /// Which cache (e.g. `Machine`).
        cache: String,
        /// The last watch error, or why none was seen.
        cause: String,
    },
    /// Anything else (API errors, timeouts): core retries with backoff.
    #[error("{0}")]
    Transient(String),
}

impl CloudProviderError {
    /// The metric label of this error (`karpenter_cloudprovider_errors_total{error}`).
    #[must_use]
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::NodeClaimNotFound(_) => "NodeClaimNotFoundError",
            Self::InsufficientCapacity(_) => "InsufficientCapacityError",
            Self::NodeClassNotReady(_) => "NodeClassNotReadyError",
            Self::Create { .. } => "CreateError",
            Self::CacheNotSynced { .. } => "CacheNotSyncedError",
            Self::Transient(_) => "TransientError",
        }
    }

    /// Whether this is [`CloudProviderError::NodeClaimNotFound`].
    #[must_use]
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::NodeClaimNotFound(_))
    }

    /// Whether this is [`CloudProviderError::InsufficientCapacity`].
    #[must_use]
    pub fn is_insufficient_capacity(&self) -> bool {
        matches!(self, Self::InsufficientCapacity(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_low_cardinality() {
        let errors = [
            CloudProviderError::NodeClaimNotFound("a".into()),
            CloudProviderError::InsufficientCapacity("b".into()),
            CloudProviderError::NodeClassNotReady("c".into()),
            CloudProviderError::Create {
                reason: "R".into(),
                message: "m".into(),
            },
            CloudProviderError::CacheNotSynced {
                cache: "Machine".into(),
                cause: "forbidden".into(),
            },
            CloudProviderError::Transient("t".into()),
        ];
        let labels: Vec<_> = errors
            .iter()
            .map(CloudProviderError::metric_label)
            .collect();
        assert_eq!(
            labels,
            [
                "NodeClaimNotFoundError",
                "InsufficientCapacityError",
                "NodeClassNotReadyError",
                "CreateError",
                "CacheNotSyncedError",
                "TransientError"
            ]
        );
        assert!(errors[0].is_not_found());
        assert!(errors[1].is_insufficient_capacity());
    }
}
