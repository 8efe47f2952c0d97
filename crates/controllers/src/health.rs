//! Node repair (spec §4 `node.health`, feature gate `NodeRepair`): replace nodes that stay
//! unhealthy.
//!
//! Responsibility: a singleton loop on the leader, run only when the gate is on and the
//! provider has [`RepairPolicies`]. Each pass (after a change of the state, at most every
//! [`HealthConfig::min_interval`], at least every [`HealthConfig::poll`] and when the nearest
//! toleration runs out) looks at every NodeClaim of our NodeClass group that is not being
//! deleted:
//! - with a Node: the Node's conditions against the policies ([`verdict::condition_verdict`]);
//! - registered but without its Node (deleted while the instance lives on): the Node-deleted
//!   toleration, counted from the first pass that saw it gone (so a restart starts it anew,
//!   which only ever delays a repair).
//!
//! An unhealthy node is repaired — unless more than 20 % (rounded up) of its NodePool's nodes
//! (of every node of the cluster, for a NodeClaim without a pool) match a policy, however
//! long (Warning `NodeRepairBlocked` on the Node, NodeClaim and NodePool); or the provider
//! says another controller remediates it (for Cluster API: a MachineHealthCheck targets its
//! Machine; Normal `NodeRepairDeferred`), so no Machine is remediated twice; or that cannot
//! be told. Repair, as upstream: stamp `karpenter.sh/nodeclaim-termination-timestamp` with
//! "now" (unless an earlier time is there), so termination deletes the pods at once whatever
//! their PodDisruptionBudgets, and delete the NodeClaim (UID precondition); the normal
//! termination path then drains the node and removes the instance. Neither
//! `karpenter.sh/do-not-disrupt` nor disruption budgets hold a repair back (as upstream).
//!
//! Inputs: [`ClusterState`] (Nodes, NodeClaims), the provider's policies and remediators.
//! Outputs: NodeClaim patches and deletions, Events, `karpenter_nodeclaims_disrupted_total
//! {reason="unhealthy"}` and `karpenter_nodeclaims_unhealthy_disrupted_total`.

pub mod verdict;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use api::NodeClaim;
use api::well_known::annotations::NODECLAIM_TERMINATION_TIMESTAMP;
use api::well_known::conditions::REGISTERED;
use api::well_known::labels::{CAPACITY_TYPE, NODEPOOL};
use cloudprovider::{CloudProvider, RepairPolicies};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use serde_json::json;
use state::ClusterState;

use crate::clock::Clock;
use crate::disruption::candidates::is_ours;
use crate::events::{Events, Message};
use crate::metrics::{DisruptedLabels, Metrics, UnhealthyLabels};
use verdict::{Unhealthy, Verdict};

/// Warning Event: repair held back by the 20 % stop.
pub const NODE_REPAIR_BLOCKED: &str = "NodeRepairBlocked";
/// Normal Event: repair left to another controller (a MachineHealthCheck).
pub const NODE_REPAIR_DEFERRED: &str = "NodeRepairDeferred";
/// Warning Event: a node is being repaired.
pub const NODE_REPAIR: &str = "NodeRepair";
/// `karpenter_nodeclaims_disrupted_total` reason.
pub const UNHEALTHY: &str = "unhealthy";
/// How often one of these Events may repeat (upstream: 15 minutes).
const EVENT_DEDUPE: Duration = Duration::from_secs(900);

/// Settings of the repair loop.
#[derive(Debug, Clone)]
pub struct HealthConfig {
    /// Whether the loop runs (feature gate `NodeRepair`).
    pub enabled: bool,
    /// The longest time between passes.
    pub poll: Duration,
    /// The shortest time between passes (folds bursts of changes).
    pub min_interval: Duration,
}

impl Default for HealthConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            poll: Duration::from_secs(60),
            min_interval: Duration::from_secs(2),
        }
    }
}

/// What one pass did, for tests and logs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PassReport {
    /// NodeClaims repaired (deleted).
    pub repaired: Vec<String>,
    /// NodeClaims held back by the 20 % stop.
    pub blocked: Vec<String>,
    /// NodeClaims left to another controller.
    pub deferred: Vec<String>,
    /// The nearest toleration still running.
    pub next: Option<Duration>,
}

/// The node repair loop.
pub struct NodeHealth<P> {
    client: kube::Client,
    provider: Arc<P>,
    state: Arc<ClusterState>,
    events: Events,
    metrics: Arc<Metrics>,
    clock: Clock,
    config: HealthConfig,
    policies: RepairPolicies,
    /// NodeClaim UID → when a pass first saw its Node gone.
    gone_since: Mutex<HashMap<String, Timestamp>>,
}

impl<P> std::fmt::Debug for NodeHealth<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeHealth")
            .field("config", &self.config)
            .field("policies", &self.policies)
            .finish_non_exhaustive()
    }
}

/// One NodeClaim's view for a pass.
struct Member<'a> {
    claim: &'a NodeClaim,
    node: Option<&'a Node>,
    pool: Option<&'a str>,
}

fn label<'a>(
    labels: Option<&'a std::collections::BTreeMap<String, String>>,
    key: &str,
) -> Option<&'a str> {
    labels.and_then(|l| l.get(key)).map(String::as_str)
}

fn registered(nc: &NodeClaim) -> bool {
    nc.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == REGISTERED && c.status == api::common::ConditionStatus::True)
    })
}

impl<P: CloudProvider + 'static> NodeHealth<P> {
    /// A loop writing to `client` (the workload cluster), with the provider's policies.
    #[must_use]
    pub fn new(
        client: kube::Client,
        provider: Arc<P>,
        state: Arc<ClusterState>,
        events: Events,
        metrics: Arc<Metrics>,
        clock: Clock,
        config: HealthConfig,
    ) -> Self {
        let policies = provider.repair_policies();
        Self {
            client,
            provider,
            state,
            events,
            metrics,
            clock,
            config,
            policies,
            gone_since: Mutex::new(HashMap::new()),
        }
    }

    /// Whether the loop would run: the gate is on and the provider repairs something.
    #[must_use]
    pub fn active(&self) -> bool {
        self.config.enabled && !self.policies.is_empty()
    }

    /// Runs until dropped (returns at once when not [`Self::active`]).
    pub async fn run(self) {
        if !self.active() {
            return;
        }
        tracing::info!(policies = ?self.policies, "node repair is on");
        let mut changes = self.state.changes();
        loop {
            let mut wait = self.config.poll;
            if self.state.listed_now() {
                let report = self.pass().await;
                if let Some(next) = report.next {
                    // A moment past the deadline, so the condition is old enough then.
                    wait = wait.min(next.saturating_add(Duration::from_millis(100)));
                }
            }
            tokio::time::sleep(self.config.min_interval).await;
            let _ = tokio::time::timeout(wait, changes.changed()).await;
        }
    }

    /// One pass over every NodeClaim.
    pub async fn pass(&self) -> PassReport {
        let now = self.clock.now();
        let nodes = self.state.nodes().state();
        let claims = self.state.node_claims().state();
        let by_name: HashMap<&str, &Node> = nodes
            .iter()
            .filter_map(|n| Some((n.metadata.name.as_deref()?, n.as_ref())))
            .collect();
        let by_provider_id: HashMap<&str, &Node> = nodes
            .iter()
            .filter_map(|n| Some((n.spec.as_ref()?.provider_id.as_deref()?, n.as_ref())))
            .collect();
        let members: Vec<Member<'_>> = claims
            .iter()
            .filter(|nc| is_ours(nc) && nc.metadata.deletion_timestamp.is_none())
            .map(|nc| {
                let status = nc.status.as_ref();
                let node = status
                    .and_then(|s| s.provider_id.as_deref())
                    .and_then(|p| by_provider_id.get(p))
                    .or_else(|| {
                        status
                            .and_then(|s| s.node_name.as_deref())
                            .and_then(|n| by_name.get(n))
                    })
                    .copied();
                Member {
                    claim: nc.as_ref(),
                    node,
                    pool: label(nc.metadata.labels.as_ref(), NODEPOOL),
                }
            })
            .collect();
        let gone: Vec<&Member<'_>> = members
            .iter()
            .filter(|m| m.node.is_none() && registered(m.claim))
            .collect();
        self.track_gone(&gone, now);

        let mut report = PassReport::default();
        let mut unhealthy: Vec<(&Member<'_>, Unhealthy)> = Vec::new();
        for m in &members {
            let verdict = match m.node {
                Some(node) => verdict::condition_verdict(
                    node.status
                        .as_ref()
                        .and_then(|s| s.conditions.as_deref())
                        .unwrap_or_default(),
                    &self.policies.conditions,
                    now,
                ),
                None => match self.gone_since(m.claim) {
                    Some(since) => verdict::deleted_verdict(&self.policies, since, now),
                    None => Verdict::Healthy,
                },
            };
            match verdict {
                Verdict::Healthy => {}
                Verdict::Wait(left) => {
                    report.next = Some(report.next.map_or(left, |n| n.min(left)));
                }
                Verdict::Unhealthy(u) => unhealthy.push((m, u)),
            }
        }
        for (m, why) in unhealthy {
            let name = m.claim.name_any();
            let (total, sick) = self.pool_health(m.pool, &nodes, &gone);
            if !verdict::repair_allowed(total, sick) {
                self.blocked(m);
                report.blocked.push(name);
                continue;
            }
            match self.provider.remediated_elsewhere(m.claim).await {
                Ok(None) => {}
                Ok(Some(remediator)) => {
                    let message = Message::normal(
                        NODE_REPAIR_DEFERRED,
                        format!(
                            "{}={} past {:?}: left to {remediator}, which remediates this node",
                            why.condition, why.status, why.toleration
                        ),
                    )
                    .dedupe_for(EVENT_DEDUPE)
                    .dedupe_by_object();
                    self.events.publish(m.claim, message);
                    report.deferred.push(name);
                    continue;
                }
                Err(e) => {
                    tracing::warn!(nodeclaim = name, error = %e,
                        "cannot tell whether another controller remediates this node; not repairing it now");
                    continue;
                }
            }
            match self.repair(m, &why, now).await {
                Ok(true) => report.repaired.push(name),
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(nodeclaim = name, error = %e, "node repair failed");
                }
            }
        }
        report
    }

    /// Records when each registered NodeClaim was first seen without its Node; forgets the
    /// others.
    fn track_gone(&self, gone: &[&Member<'_>], now: Timestamp) {
        let mut map = self
            .gone_since
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let uids: std::collections::HashSet<&str> = gone
            .iter()
            .filter_map(|m| m.claim.metadata.uid.as_deref())
            .collect();
        map.retain(|uid, _| uids.contains(uid.as_str()));
        for uid in uids {
            map.entry(uid.to_owned()).or_insert(now);
        }
    }

    fn gone_since(&self, nc: &NodeClaim) -> Option<Timestamp> {
        let uid = nc.metadata.uid.as_deref()?;
        self.gone_since
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(uid)
            .copied()
    }

    /// (nodes, unhealthy nodes) of `pool` (of the whole cluster for `None`): Nodes by their
    /// `karpenter.sh/nodepool` label, and the pool's registered NodeClaims whose Node is gone
    /// (counted as nodes, and unhealthy, as long as the Node-deleted policy is on).
    fn pool_health(
        &self,
        pool: Option<&str>,
        nodes: &[Arc<Node>],
        gone: &[&Member<'_>],
    ) -> (usize, usize) {
        let mut total = 0;
        let mut sick = 0;
        for n in nodes {
            if pool.is_some() && label(n.metadata.labels.as_ref(), NODEPOOL) != pool {
                continue;
            }
            total += 1;
            let conditions = n
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_deref())
                .unwrap_or_default();
            if verdict::matches_any(conditions, &self.policies) {
                sick += 1;
            }
        }
        if self.policies.node_deleted.is_some() {
            let lost = gone
                .iter()
                .filter(|m| pool.is_none() || m.pool == pool)
                .count();
            total += lost;
            sick += lost;
        }
        (total, sick)
    }

    fn blocked(&self, m: &Member<'_>) {
        let note = match m.pool {
            Some(_) => "more than 20% nodes are unhealthy in the nodepool",
            None => "more than 20% nodes are unhealthy in the cluster",
        };
        let message = || {
            Message::warning(NODE_REPAIR_BLOCKED, note)
                .dedupe_for(EVENT_DEDUPE)
                .dedupe_by_object()
        };
        tracing::info!(
            nodeclaim = m.claim.name_any(),
            nodepool = m.pool,
            "{note}; not repairing"
        );
        if let Some(node) = m.node {
            self.events.publish(node, message());
        }
        self.events.publish(m.claim, message());
        if let Some(pool) = m.pool
            && let Some(np) = self
                .state
                .node_pools()
                .state()
                .into_iter()
                .find(|p| p.metadata.name.as_deref() == Some(pool))
        {
            self.events.publish(np.as_ref(), message());
        }
    }

    /// Stamps the termination time and deletes the NodeClaim. `Ok(false)`: someone else is
    /// deleting it already.
    async fn repair(
        &self,
        m: &Member<'_>,
        why: &Unhealthy,
        now: Timestamp,
    ) -> Result<bool, kube::Error> {
        let nc = m.claim;
        let name = nc.name_any();
        let api: Api<NodeClaim> = Api::all(self.client.clone());
        let earlier = nc
            .annotations()
            .get(NODECLAIM_TERMINATION_TIMESTAMP)
            .and_then(|v| v.parse::<Timestamp>().ok())
            .is_some_and(|t| t < now);
        if !earlier {
            let stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
            let patch = json!({"metadata": {
                "uid": nc.metadata.uid,
                "annotations": {NODECLAIM_TERMINATION_TIMESTAMP: stamp}}});
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
        }
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: nc.metadata.uid.clone(),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match api.delete(&name, &params).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => return Ok(false),
            Err(e) => return Err(e),
        }
        let (condition, status) = (&why.condition, &why.status);
        let note = if status.is_empty() {
            format!(
                "Node deleted while its instance lives on, for over {:?}: repairing",
                why.toleration
            )
        } else {
            format!(
                "{condition}={status} for over {:?}: repairing",
                why.toleration
            )
        };
        tracing::info!(nodeclaim = name, node = m.node.map(|n| n.name_any()), condition = %condition,
            status = %status, "deleting unhealthy node");
        let message = || Message::warning(NODE_REPAIR, note.clone()).dedupe_by_object();
        if let Some(node) = m.node {
            self.events.publish(node, message());
        }
        self.events.publish(nc, message());
        let nodepool = m.pool.unwrap_or_default().to_owned();
        let capacity_type = label(nc.metadata.labels.as_ref(), CAPACITY_TYPE)
            .unwrap_or_default()
            .to_owned();
        self.metrics
            .nodeclaims_disrupted
            .get_or_create(&DisruptedLabels {
                reason: UNHEALTHY.to_owned(),
                nodepool: nodepool.clone(),
                capacity_type: capacity_type.clone(),
            })
            .inc();
        self.metrics
            .nodeclaims_unhealthy_disrupted
            .get_or_create(&UnhealthyLabels {
                condition: verdict::metric_condition(condition),
                nodepool,
                capacity_type,
                image_id: nc
                    .status
                    .as_ref()
                    .and_then(|s| s.image_id.clone())
                    .unwrap_or_default(),
            })
            .inc();
        Ok(true)
    }
}

impl<P> NodeHealth<P> {
    /// The policies in force.
    #[must_use]
    pub fn policies(&self) -> &RepairPolicies {
        &self.policies
    }
}
