//! Static NodePools (spec §4.10, feature gate `StaticCapacity`): a NodePool with
//! `spec.replicas` keeps that many NodeClaims, whatever the pods want.
//!
//! Responsibility: a singleton loop on the leader. Each pass (after a change of the state, at
//! most every [`StaticConfig::min_interval`], and at least every [`StaticConfig::poll`]) takes
//! every static NodePool that is `Ready`, not being deleted and of our NodeClass kind, and
//! carries out its [`plan::plan`]: new NodeClaims straight from the template
//! ([`scheduling::scheduler::template_node_claim`]: every compatible instance type, cheapest
//! first, no pods) through the provisioner's NodeClaim builder, or the surplus NodeClaims
//! deleted (UID precondition) so the termination path drains them. Only NodeClaims of our
//! NodeClass group labelled with the pool's name are counted or deleted. A pass waits until
//! the NodeClaims this process created are in the cache, so a slow watch never doubles a
//! creation.
//! Static pools are never consolidated (their NodeClaims are not disruption candidates).
//!
//! Inputs: [`ClusterState`], the provider's instance types. Outputs: NodeClaims created and
//! deleted, Events on the NodePool, `karpenter_nodeclaims_created_total{reason="provisioned"}`.

pub mod plan;

use std::sync::Arc;
use std::time::Duration;

use api::common::Conditions;
use api::well_known::conditions::{DISRUPTION_REASON, READY};
use api::well_known::labels::NODEPOOL;
use api::{NodeClaim, NodePool};
use cloudprovider::CloudProvider;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, PostParams, Preconditions};
use kube::{Resource, ResourceExt};
use scheduling::scheduler::{Options, template_node_claim};
use state::{ClusterState, Snapshot, Unsynced};

use crate::disruption::candidates::{eviction_cost, is_ours, is_reschedulable};
use crate::events::{Events, Message};
use crate::metrics::{CreatedLabels, Metrics};
use crate::provisioning::inputs::{node_class_of, scheduler_node_pool};
use crate::provisioning::node_claim::{PoolHash, node_claim};
use plan::{Member, Plan};

/// The Warning Event on a static NodePool whose NodeClaims cannot be built.
pub const STATIC_CAPACITY_UNAVAILABLE: &str = "StaticCapacityUnavailable";
/// The Normal Event on a static NodePool held back by `limits.nodes`.
pub const STATIC_CAPACITY_LIMITED: &str = "StaticCapacityLimited";
/// How often one Event may repeat.
const EVENT_DEDUPE: Duration = Duration::from_secs(300);

/// Settings of the static capacity loop.
#[derive(Debug, Clone)]
pub struct StaticConfig {
    /// Whether the loop runs (feature gate `StaticCapacity`); off: static pools are left alone.
    pub enabled: bool,
    /// The longest time between passes.
    pub poll: Duration,
    /// The shortest time between passes (folds bursts of changes).
    pub min_interval: Duration,
    /// The scheduler options the template NodeClaims are built with.
    pub options: Options,
}

impl Default for StaticConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            poll: Duration::from_secs(60),
            min_interval: Duration::from_secs(1),
            options: Options {
                well_known: scheduling::labels::WellKnownLabels::cluster_api(),
                ..Options::default()
            },
        }
    }
}

/// The static capacity loop.
pub struct StaticCapacity<P> {
    client: kube::Client,
    provider: Arc<P>,
    state: Arc<ClusterState>,
    events: Events,
    metrics: Arc<Metrics>,
    config: StaticConfig,
    hash: fn(&NodePool) -> PoolHash,
}

impl<P> std::fmt::Debug for StaticCapacity<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StaticCapacity")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl<P: CloudProvider + 'static> StaticCapacity<P> {
    /// A loop writing NodeClaims to `client` (the workload cluster); `hash` stamps them like
    /// the provisioner's.
    #[must_use]
    pub fn new(
        client: kube::Client,
        provider: Arc<P>,
        state: Arc<ClusterState>,
        events: Events,
        metrics: Arc<Metrics>,
        config: StaticConfig,
        hash: fn(&NodePool) -> PoolHash,
    ) -> Self {
        Self {
            client,
            provider,
            state,
            events,
            metrics,
            config,
            hash,
        }
    }

    /// Runs until dropped (returns at once when the gate is off).
    pub async fn run(self) {
        if !self.config.enabled {
            return;
        }
        let mut changes = self.state.changes();
        loop {
            // Every NodeClaim created here must be in the cache before counting again;
            // launching ones are counted like the others.
            match self.state.synced() {
                Ok(()) | Err(Unsynced::Launching(_)) => self.pass().await,
                Err(_) => {}
            }
            tokio::time::sleep(self.config.min_interval).await;
            let _ = tokio::time::timeout(self.config.poll, changes.changed()).await;
        }
    }

    /// One pass over every static NodePool.
    pub async fn pass(&self) {
        // The NodePool store first: a full snapshot copies every object, and most clusters
        // have no static pool.
        if !self
            .state
            .node_pools()
            .state()
            .iter()
            .any(|p| managed(p) && p.spec.replicas.is_some())
        {
            return;
        }
        let snapshot = self.state.snapshot();
        for pool in snapshot.node_pools.iter().filter(|p| managed(p)) {
            let Some(replicas) = pool.spec.replicas else {
                continue;
            };
            let members = members(&snapshot, &pool.name_any());
            let plan = plan::plan(replicas, node_limit(pool), &members);
            if plan == Plan::default() {
                continue;
            }
            tracing::info!(nodepool = %pool.name_any(), replicas, current = members.iter().filter(|m| !m.deleting && !m.pending_disruption).count(),
                create = plan.create, delete = plan.delete.len(), "static nodepool: matching the replica count");
            if plan.limited {
                self.events.publish(
                    pool,
                    Message::normal(
                        STATIC_CAPACITY_LIMITED,
                        format!(
                            "spec.limits.nodes holds the NodePool below spec.replicas ({replicas})"
                        ),
                    )
                    .dedupe_for(EVENT_DEDUPE),
                );
            }
            if plan.create > 0 {
                self.create(pool, plan.create).await;
            }
            self.delete(&snapshot, &plan.delete).await;
        }
    }

    async fn create(&self, pool: &NodePool, n: usize) {
        let planned = match self.template(pool).await {
            Ok(planned) => planned,
            Err(why) => {
                tracing::warn!(nodepool = %pool.name_any(), reason = %why, "static nodepool: no NodeClaim can be built");
                self.events.publish(
                    pool,
                    Message::warning(STATIC_CAPACITY_UNAVAILABLE, why).dedupe_for(EVENT_DEDUPE),
                );
                return;
            }
        };
        let hash = (self.hash)(pool);
        let api: Api<NodeClaim> = Api::all(self.client.clone());
        for _ in 0..n {
            let nc = match node_claim(&planned, pool, &self.config.options.well_known, Some(&hash))
            {
                Ok(nc) => nc,
                Err(e) => {
                    self.events.publish(
                        pool,
                        Message::warning(STATIC_CAPACITY_UNAVAILABLE, e.to_string())
                            .dedupe_for(EVENT_DEDUPE),
                    );
                    return;
                }
            };
            match api.create(&PostParams::default(), &nc).await {
                Ok(created) => {
                    let name = created.name_any();
                    self.state.node_claim_created(&name);
                    self.metrics
                        .nodeclaims_created
                        .get_or_create(&CreatedLabels {
                            reason: "provisioned".into(),
                            nodepool: pool.name_any(),
                            min_values_relaxed: "false".into(),
                        })
                        .inc();
                    tracing::info!(nodeclaim = %name, nodepool = %pool.name_any(), "created static nodeclaim");
                }
                Err(e) => {
                    // The next pass tries again.
                    tracing::warn!(nodepool = %pool.name_any(), error = %e, "static nodeclaim not created");
                    return;
                }
            }
        }
    }

    /// The NodeClaim `pool`'s template makes, or why none can be made (naming the field).
    async fn template(
        &self,
        pool: &NodePool,
    ) -> Result<scheduling::scheduler::PlannedNodeClaim, String> {
        let its = self
            .provider
            .get_instance_types(pool)
            .await
            .map_err(|e| format!("instance types: {e}"))?;
        let scheduler_pool = scheduler_node_pool(pool, its, &self.config.options.well_known)?;
        template_node_claim(&scheduler_pool, &self.config.options).map_err(|d| d.reason)
    }

    async fn delete(&self, snapshot: &Snapshot, names: &[String]) {
        let api: Api<NodeClaim> = Api::all(self.client.clone());
        for name in names {
            let uid = snapshot
                .node_claims
                .iter()
                .find(|nc| nc.metadata.name.as_deref() == Some(name))
                .and_then(|nc| nc.metadata.uid.clone());
            let params = DeleteParams {
                preconditions: Some(Preconditions {
                    uid,
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            match api.delete(name, &params).await {
                Ok(_) => tracing::info!(nodeclaim = %name, "deleted surplus static nodeclaim"),
                Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
                Err(e) => {
                    tracing::warn!(nodeclaim = %name, error = %e, "surplus static nodeclaim not deleted");
                }
            }
        }
    }
}

/// A static NodePool this loop keeps: `Ready`, not being deleted, of our NodeClass kind.
#[must_use]
pub fn managed(pool: &NodePool) -> bool {
    pool.spec.is_static()
        && pool.metadata.deletion_timestamp.is_none()
        && node_class_of(pool).is_some()
        && pool
            .status
            .as_ref()
            .is_some_and(|s| s.conditions.is_true(READY))
}

/// `limits.nodes`, when set and readable.
pub(crate) fn node_limit(pool: &NodePool) -> Option<i64> {
    let q = pool
        .spec
        .limits
        .as_ref()?
        .get(crate::nodepool::counter::NODES)?;
    scheduling::quantity::Quantity::parse(&q.0)
        .ok()
        .map(scheduling::quantity::Quantity::value)
}

/// The pool's NodeClaims (ours, labelled with its name) as the plan sees them.
#[must_use]
pub fn members(snapshot: &Snapshot, pool: &str) -> Vec<Member> {
    // Pods by node once, not a scan of every pod per NodeClaim.
    let mut by_node: std::collections::HashMap<&str, Vec<&Pod>> = std::collections::HashMap::new();
    for p in &snapshot.pods {
        if let Some(node) = p.spec.as_ref().and_then(|s| s.node_name.as_deref())
            && is_reschedulable(p)
        {
            by_node.entry(node).or_default().push(p);
        }
    }
    snapshot
        .node_claims
        .iter()
        .filter(|nc| is_ours(nc) && nc.labels().get(NODEPOOL).map(String::as_str) == Some(pool))
        .map(|nc| {
            let status = nc.status.as_ref();
            let node = status.and_then(|s| s.node_name.as_deref());
            let pods: &[&Pod] = node
                .and_then(|node| by_node.get(node))
                .map_or(&[], Vec::as_slice);
            Member {
                name: nc.name_any(),
                deleting: nc.meta().deletion_timestamp.is_some(),
                pending_disruption: status.is_some_and(|s| s.conditions.is_true(DISRUPTION_REASON)),
                launched: status
                    .and_then(|s| s.provider_id.as_deref())
                    .is_some_and(|p| !p.is_empty()),
                pods: pods.len(),
                do_not_disrupt: pods.iter().any(|p| {
                    p.metadata
                        .annotations
                        .as_ref()
                        .and_then(|a| a.get(api::well_known::annotations::DO_NOT_DISRUPT))
                        .is_some_and(|v| v == "true")
                }),
                disruption_cost: pods.iter().map(|p| eviction_cost(p)).sum(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use serde_json::json;

    use super::*;

    fn claim(name: &str, pool: &str, group: &str, node: Option<&str>) -> NodeClaim {
        serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": pool}},
            "spec": {"nodeClassRef": {"group": group, "kind": "ClusterAPINodeClass", "name": "d"},
                "requirements": []},
            "status": {"nodeName": node, "providerID": node.map(|n| format!("capi://{n}"))}
        }))
        .unwrap()
    }

    fn pod(name: &str, node: &str, do_not_disrupt: bool) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default",
                "annotations": if do_not_disrupt { json!({"karpenter.sh/do-not-disrupt": "true"}) } else { json!({}) }},
            "spec": {"nodeName": node, "containers": [{"name": "c"}]},
            "status": {"phase": "Running"}
        }))
        .unwrap()
    }

    /// Only our NodeClaims of the pool count (so only they can ever be deleted as surplus):
    /// another pool's, and another provider's labelled with the same pool, are left out.
    #[test]
    fn members_are_our_node_claims_of_the_pool_only() {
        let snapshot = Snapshot {
            node_claims: vec![
                claim("ours-a", "fixed", "karpenter.cluster.x-k8s.io", Some("a")),
                claim("ours-b", "fixed", "karpenter.cluster.x-k8s.io", None),
                claim(
                    "other-pool",
                    "dynamic",
                    "karpenter.cluster.x-k8s.io",
                    Some("c"),
                ),
                claim("other-provider", "fixed", "karpenter.k8s.aws", Some("d")),
            ],
            pods: vec![
                pod("guarded", "a", true).into(),
                pod("free", "a", false).into(),
                pod("elsewhere", "c", false).into(),
            ],
            ..Snapshot::default()
        };
        let members = members(&snapshot, "fixed");
        let names: Vec<&str> = members.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["ours-a", "ours-b"]);
        assert_eq!(
            (
                members[0].pods,
                members[0].do_not_disrupt,
                members[0].launched
            ),
            (2, true, true)
        );
        assert_eq!((members[1].pods, members[1].launched), (0, false));
    }
}
