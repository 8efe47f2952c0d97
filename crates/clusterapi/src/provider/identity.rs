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

/// Why the Machine `m`, which the NodeClaim `nc` names as its own, is not that NodeClaim's to
/// resume or remove, if it is not: a claim of another workload cluster, or of another
/// NodeClaim (UID, else name); or no claim at all, unless `nc` was bound by the upstream
/// provider (`cluster.x-k8s.io/machine`), whose Machines carry none. After a backup restore or
/// a GitOps re-apply, two NodeClaims may name one Machine: only the one whose UID its claim
/// carries may use or delete it.
pub(crate) fn not_claimed_by(
    m: &Machine,
    nc: &api::NodeClaim,
    cluster: &str,
    legacy: bool,
) -> Option<String> {
    let name = nc.metadata.name.as_deref().unwrap_or_default();
    let uid = nc.metadata.uid.as_deref().unwrap_or_default();
    if let Some(other) = claim_cluster(m)
        && other != cluster
    {
        return Some(format!(
            "it is claimed by workload cluster {other}, not this one"
        ));
    }
    match (
        annotation(&m.metadata, super::CLAIMED_BY_UID),
        annotation(&m.metadata, super::CLAIMED_BY),
    ) {
        (Some(other), _) if other != uid => Some(format!(
            "it is claimed by another NodeClaim (UID {other}), not by {name} (UID {uid})"
        )),
        (Some(_), _) => None,
        (None, Some(other)) if other != name => {
            Some(format!("it is claimed by NodeClaim {other}, not by {name}"))
        }
        (None, Some(_)) => None,
        (None, None) if legacy => None,
        (None, None) => Some(format!("it carries no claim of NodeClaim {name}")),
    }
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
    use super::{not_claimed_by, valid};
    use serde_json::json;

    fn machine(annotations: serde_json::Value) -> api::Machine {
        serde_json::from_value(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
            "metadata": {"name": "m", "namespace": "ns", "annotations": annotations},
            "spec": {"clusterName": "c", "bootstrap": {}, "infrastructureRef": {"kind": "T", "name": "t"}},
        }))
        .unwrap_or_else(|e| unreachable!("{e}"))
    }

    #[test]
    fn only_the_node_claim_whose_claim_a_machine_carries_may_use_or_remove_it() {
        let nc: api::NodeClaim = serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": "a", "uid": "u-a"},
            "spec": {"nodeClassRef": {"group": "g", "kind": "K", "name": "n"}, "requirements": []},
        }))
        .unwrap_or_else(|e| unreachable!("{e}"));
        let ours = json!({"karpenter.cluster.x-k8s.io/cluster": "c1",
            "karpenter.cluster.x-k8s.io/nodeclaim": "a", "karpenter.cluster.x-k8s.io/nodeclaim-uid": "u-a"});
        assert_eq!(not_claimed_by(&machine(ours), &nc, "c1", false), None);
        let restored = json!({"karpenter.cluster.x-k8s.io/cluster": "c1",
            "karpenter.cluster.x-k8s.io/nodeclaim": "a", "karpenter.cluster.x-k8s.io/nodeclaim-uid": "u-old"});
        let why = not_claimed_by(&machine(restored), &nc, "c1", false).unwrap_or_default();
        assert!(why.contains("UID u-old"), "{why}");
        let theirs = json!({"karpenter.cluster.x-k8s.io/cluster": "c2",
            "karpenter.cluster.x-k8s.io/nodeclaim": "a", "karpenter.cluster.x-k8s.io/nodeclaim-uid": "u-a"});
        let why = not_claimed_by(&machine(theirs), &nc, "c1", false).unwrap_or_default();
        assert!(why.contains("workload cluster c2"), "{why}");
        let by_name = json!({"karpenter.cluster.x-k8s.io/nodeclaim": "b"});
        assert!(not_claimed_by(&machine(by_name), &nc, "c1", false).is_some());
        assert!(not_claimed_by(&machine(json!({})), &nc, "c1", false).is_some());
        assert_eq!(
            not_claimed_by(&machine(json!({})), &nc, "c1", true),
            None,
            "bound by the upstream provider: its Machines carry no claim"
        );
    }

    #[test]
    fn identities_fit_in_an_annotation_key() {
        assert!(valid("6f1c2a52-3b1e-4d5c-9a57-0f1e2d3c4b5a"));
        assert!(valid("prod.eu-1"));
        for bad in ["", "-a", "a-", "a/b", "a b", &"x".repeat(55)] {
            assert!(!valid(bad), "{bad:?}");
        }
    }
}
