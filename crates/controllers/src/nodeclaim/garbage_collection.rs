//! NodeClaim garbage collection (spec §4.7): NodeClaims whose instance disappeared.
//!
//! Responsibility: every [`GcConfig::interval`] (upstream: 2 min), delete each managed NodeClaim
//! that is registered, not being deleted, whose providerID is no longer among the provider's
//! live instances ([`CloudProvider::list`], entries being deleted count as absent) — unless its
//! Node still exists and is Ready (the kubelet is alive, so the listing is what is wrong) and
//! its instance is not one its owner is deleting ([`Launch::instance_deleting`]: Cluster API
//! drains a Machine's Node, Ready all along, before the instance goes; waiting for the Node
//! would leave its evicted pods waiting on a cordoned node Karpenter still counts). The
//! deletion goes through the NodeClaim finalizer like any other (drain, then instance
//! termination, which answers NotFound). Metric `nodeclaims_disrupted{reason=
//! "garbage_collected"}`. A Machine deleted by hand therefore takes its NodeClaim along, and its
//! pods are provisioned again.
//! [`candidates`] is the pure decision; [`NodeClaimGc`] the loop.
//! Inputs: NodeClaims, Nodes, the provider's launches. Outputs: NodeClaim deletions, metrics.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use api::NodeClaim;
use api::common::Conditions;
use api::well_known::conditions::REGISTERED;
use cloudprovider::types::normalize_provider_id;
use cloudprovider::{CloudProvider, Launch};
use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Preconditions};

use crate::metrics::{DisruptedLabels, Metrics};
use crate::provisioning::inputs::pools::NODE_CLASS_GROUP;

/// Settings of the collector.
#[derive(Debug, Clone, Copy)]
pub struct GcConfig {
    /// Time between passes.
    pub interval: Duration,
}

impl Default for GcConfig {
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(120),
        }
    }
}

fn node_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The NodeClaims to delete: registered, ours, not deleting, providerID not among the live
/// launches, and no Ready Node with that providerID.
#[must_use]
pub fn candidates<'a>(
    node_claims: &'a [NodeClaim],
    nodes: &[Node],
    launches: &[Launch],
) -> Vec<&'a NodeClaim> {
    let live: BTreeSet<String> = launches
        .iter()
        .filter(|l| !l.deleting)
        .filter_map(|l| l.provider_id.as_deref())
        .map(normalize_provider_id)
        .collect();
    let going: BTreeSet<String> = launches
        .iter()
        .filter(|l| l.instance_deleting)
        .filter_map(|l| l.provider_id.as_deref())
        .map(normalize_provider_id)
        .collect();
    let ready_nodes: BTreeMap<String, bool> = nodes
        .iter()
        .filter_map(|n| {
            let id = n.spec.as_ref()?.provider_id.as_deref()?;
            Some((normalize_provider_id(id), node_ready(n)))
        })
        .collect();
    node_claims
        .iter()
        .filter(|nc| nc.spec.node_class_ref.group == NODE_CLASS_GROUP)
        .filter(|nc| nc.metadata.deletion_timestamp.is_none())
        .filter(|nc| {
            nc.status
                .as_ref()
                .is_some_and(|s| s.conditions.is_true(REGISTERED))
        })
        .filter(|nc| {
            let Some(id) = nc
                .status
                .as_ref()
                .and_then(|s| s.provider_id.as_deref())
                .filter(|p| !p.is_empty())
                .map(normalize_provider_id)
            else {
                return false;
            };
            !live.contains(&id)
                && (going.contains(&id) || !ready_nodes.get(&id).copied().unwrap_or(false))
        })
        .collect()
}

/// The NodeClaim garbage collector.
pub struct NodeClaimGc<P> {
    client: kube::Client,
    provider: Arc<P>,
    metrics: Arc<Metrics>,
    config: GcConfig,
}

impl<P> std::fmt::Debug for NodeClaimGc<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeClaimGc")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl<P: CloudProvider + 'static> NodeClaimGc<P> {
    /// A collector over the workload cluster `client`.
    #[must_use]
    pub fn new(
        client: kube::Client,
        provider: Arc<P>,
        metrics: Arc<Metrics>,
        config: GcConfig,
    ) -> Self {
        Self {
            client,
            provider,
            metrics,
            config,
        }
    }

    /// Runs passes forever.
    pub async fn run(self) {
        let mut tick = tokio::time::interval(self.config.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            match self.collect().await {
                Ok(deleted) if !deleted.is_empty() => {
                    tracing::info!(nodeclaims = ?deleted, "garbage collected nodeclaims");
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "nodeclaim garbage collection failed"),
            }
        }
    }

    /// One pass; returns the NodeClaims deleted.
    ///
    /// # Errors
    /// Listing NodeClaims, Nodes or instances failed.
    pub async fn collect(&self) -> Result<Vec<String>, String> {
        // Instances first: a NodeClaim created after the listing is then never judged on it.
        let launches = self.provider.list().await.map_err(|e| e.to_string())?;
        let node_claims = Api::<NodeClaim>::all(self.client.clone())
            .list(&ListParams::default())
            .await
            .map_err(|e| format!("list NodeClaims: {e}"))?
            .items;
        let nodes = Api::<Node>::all(self.client.clone())
            .list(&ListParams::default())
            .await
            .map_err(|e| format!("list Nodes: {e}"))?
            .items;
        let api: Api<NodeClaim> = Api::all(self.client.clone());
        let mut deleted = Vec::new();
        for nc in candidates(&node_claims, &nodes, &launches) {
            let name = nc.name_any();
            let params = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: nc.uid(),
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            match api.delete(&name, &params).await {
                Ok(_) => {
                    self.metrics
                        .nodeclaims_disrupted
                        .get_or_create(&DisruptedLabels {
                            reason: "garbage_collected".into(),
                            nodepool: nc
                                .labels()
                                .get("karpenter.sh/nodepool")
                                .cloned()
                                .unwrap_or_default(),
                            capacity_type: nc
                                .labels()
                                .get("karpenter.sh/capacity-type")
                                .cloned()
                                .unwrap_or_default(),
                        })
                        .inc();
                    deleted.push(name);
                }
                Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
                Err(e) => return Err(format!("delete NodeClaim {name}: {e}")),
            }
        }
        Ok(deleted)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use cloudprovider::ObjectRef;
    use serde_json::json;

    fn nc(name: &str, provider_id: &str, registered: bool) -> NodeClaim {
        serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": name},
            "spec": {"nodeClassRef": {"group": NODE_CLASS_GROUP, "kind": "ClusterAPINodeClass",
                "name": "default"}, "requirements": []},
            "status": {"providerID": provider_id, "conditions": [{"type": "Registered",
                "status": if registered { "True" } else { "Unknown" }, "reason": "x", "message": "",
                "lastTransitionTime": "2026-01-01T00:00:00Z"}]},
        }))
        .unwrap()
    }

    fn node(provider_id: &str, ready: bool) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": provider_id.rsplit('/').next().unwrap()},
            "spec": {"providerID": provider_id},
            "status": {"conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]},
        }))
        .unwrap()
    }

    fn launch(provider_id: &str, deleting: bool) -> Launch {
        let mut l = Launch::bare(ObjectRef::new("ns", provider_id));
        l.provider_id = Some(provider_id.to_owned());
        l.deleting = deleting;
        l
    }

    #[test]
    fn an_instance_its_owner_deletes_takes_its_claim_even_with_its_node_ready() {
        let ncs = vec![
            nc("drained-by-capi", "sim:///z/a", true),
            nc("only-asked", "sim:///z/b", true),
        ];
        let nodes = vec![node("sim:///z/a", true), node("sim:///z/b", true)];
        let mut going = launch("sim:///z/a", true);
        going.instance_deleting = true;
        // `delete-machine` written but the Machine not deleting: the Node decides.
        let asked = launch("sim:///z/b", true);
        let names: Vec<String> = candidates(&ncs, &nodes, &[going, asked])
            .iter()
            .map(|n| n.name_any())
            .collect();
        assert_eq!(names, vec!["drained-by-capi"]);
    }

    #[test]
    fn only_registered_claims_whose_instance_is_gone_and_node_not_ready_go() {
        let ncs = vec![
            nc("alive", "sim:///z/a", true),
            nc("gone", "sim:///z/b", true),
            nc("deleting-instance", "sim:///z/c", true),
            nc("node-still-ready", "sim:///z/d", true),
            nc("unregistered", "sim:///z/e", false),
        ];
        let nodes = vec![node("sim:///z/b", false), node("sim:///z/d", true)];
        let launches = vec![launch("sim:///z/a", false), launch("SIM:///z/c/", true)];
        let names: Vec<String> = candidates(&ncs, &nodes, &launches)
            .iter()
            .map(|n| n.name_any())
            .collect();
        assert_eq!(names, vec!["gone", "deleting-instance"]);
    }
}
