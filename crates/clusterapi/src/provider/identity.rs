//! The workload cluster's identity: what makes a claim provably ours on a management cluster
//! that several workload clusters (and several Karpenters) share.
//!
//! Responsibility: resolve the identity once — [`super::ProviderConfig::cluster_id`] if set,
//! else the UID of the workload cluster's `kube-system` namespace (stable for the cluster's
//! life, unique across clusters, readable with the RBAC Karpenter already has) — and answer
//! "whose claim is this" for a Machine. Every claim carries [`CLAIMED_BY_CLUSTER`]; orphan
//! collection, List and the ownership record only consider what names this identity.
//! Inputs: the workload client, the Machine's annotations. Outputs: the identity or a typed
//! error naming why it could not be read.

use api::Machine;
use cloudprovider::CloudProviderError;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::Api;

use super::{ClusterApiProvider, annotation};

/// Machine annotation: the identity of the workload cluster whose NodeClaim claimed it.
pub const CLAIMED_BY_CLUSTER: &str = "karpenter.cluster.x-k8s.io/cluster";

/// The namespace whose UID identifies a workload cluster.
const IDENTITY_NAMESPACE: &str = "kube-system";

/// The workload cluster that claimed `m`, if the claim names one.
#[must_use]
pub(crate) fn claim_cluster(m: &Machine) -> Option<&str> {
    annotation(&m.metadata, CLAIMED_BY_CLUSTER)
}

/// Whether `m` is claimed by a NodeClaim of the workload cluster `cluster`.
#[must_use]
pub(crate) fn claimed_by(m: &Machine, cluster: &str) -> bool {
    claim_cluster(m) == Some(cluster)
}

/// Whether `id` can be part of an annotation key: 1–54 characters of `[A-Za-z0-9._-]`,
/// starting and ending alphanumeric (a UID is 36).
fn valid(id: &str) -> bool {
    let bytes = id.as_bytes();
    (1..=54).contains(&bytes.len())
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
}

impl ClusterApiProvider {
    /// This workload cluster's identity (resolved once).
    ///
    /// # Errors
    /// [`CloudProviderError::Transient`] naming the cause when the `kube-system` namespace
    /// cannot be read, or the configured identity is unusable.
    pub async fn cluster_id(&self) -> Result<&str, CloudProviderError> {
        self.cluster_id
            .get_or_try_init(|| async {
                let id = match &self.config.cluster_id {
                    Some(id) => id.clone(),
                    None => {
                        let api: Api<Namespace> = Api::all(self.workload.clone());
                        let ns = api.get(IDENTITY_NAMESPACE).await.map_err(|e| {
                            CloudProviderError::Transient(format!(
                                "workload cluster identity: cannot read namespace \
                                 {IDENTITY_NAMESPACE}: {e}"
                            ))
                        })?;
                        ns.metadata.uid.unwrap_or_default()
                    }
                };
                if valid(&id) {
                    Ok(id)
                } else {
                    Err(CloudProviderError::Transient(format!(
                        "workload cluster identity {id:?} is not 1-54 characters of \
                         [A-Za-z0-9._-]"
                    )))
                }
            })
            .await
            .map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::valid;

    #[test]
    fn identities_fit_in_an_annotation_key() {
        assert!(valid("6f1c2a52-3b1e-4d5c-9a57-0f1e2d3c4b5a"));
        assert!(valid("prod.eu-1"));
        for bad in ["", "-a", "a-", "a/b", "a b", &"x".repeat(55)] {
            assert!(!valid(bad), "{bad:?}");
        }
    }
}
