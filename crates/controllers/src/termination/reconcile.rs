//! The Node termination reconciler (spec §4.8 "Node finalizer").
//!
//! Responsibility: for a Node with a deletionTimestamp and `karpenter.sh/termination`, in order
//! (the first step that waits ends the pass):
//! 1. delete its NodeClaim (found by providerID) unless it is already deleting;
//! 2. not Ready and the provider no longer knows the instance → remove the finalizer now;
//! 3. read the termination time from the NodeClaim (Warning `TerminationGracePeriodExpiring`);
//! 4. taint + label the Node (one merge patch guarded by resourceVersion);
//! 5. drain: enqueue force-delete pods and the first non-empty tier, Warning `FailedDraining`
//!    and requeue 1 s while pods wait; NodeClaim `Drained` Unknown `Draining` on the first
//!    pass, True (metric `nodes_drained`) once nothing waits for `min_drain_time`;
//! 6. volume detachment: skipped (see the module above);
//! 7. instance termination: `provider.delete` → `InstanceTerminating` True and requeue 5 s until
//!    NotFound (without a NodeClaim: `provider.get` until NotFound);
//! 8. remove the finalizer (JSON patch with a `test` op): `nodes_terminated`,
//!    `nodes_termination_duration`, `nodes_lifetime_duration`.
//!
//! NodeClaim status is written with `/status` merge patches carrying the resourceVersion.
//! Errors back off per Node from 1 s to 1 min.
//! Inputs: Node events, NodeClaims and pods (read fresh), the provider. Outputs: API writes,
//! Events, metrics, pods enqueued for eviction.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use api::NodeClaim;
use api::common::ConditionStatus;
use api::well_known::conditions::reasons::DRAINING;
use api::well_known::conditions::{
    DRAINED, INITIALIZED, INSTANCE_TERMINATING, LAUNCHED, REGISTERED,
};
use api::well_known::labels::{NODEPOOL, ZONE};
use cloudprovider::CloudProvider;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, Preconditions};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use serde_json::json;

use crate::conditions::ConditionSet;
use crate::events::{Events, Message};
use crate::metrics::{Metrics, PoolLabels, PoolZoneLabels};
use crate::termination::error::{TerminationError, kube as kube_err, status_code};
use crate::termination::eviction::EvictionQueue;
use crate::termination::pods::{elapsed, plan_drain};
use crate::termination::{Clock, TerminationConfig, events as reasons, node};

/// The NodeClaim condition set's dependents of `Ready`.
const NODE_CLAIM_DEPENDENTS: &[&str] = &[LAUNCHED, REGISTERED, INITIALIZED];
/// Requeue while pods wait.
const DRAIN_REQUEUE: Duration = Duration::from_secs(1);
/// Requeue while the instance terminates.
const INSTANCE_REQUEUE: Duration = Duration::from_secs(5);
/// Error backoff bounds.
const ERROR_BASE: Duration = Duration::from_secs(1);
const ERROR_MAX: Duration = Duration::from_secs(60);

/// What the reconciler works with.
pub struct Context<P> {
    /// The workload cluster.
    pub client: kube::Client,
    /// The provider.
    pub provider: Arc<P>,
    /// Events.
    pub events: Events,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Settings.
    pub config: TerminationConfig,
    /// Where pods to evict go.
    pub queue: EvictionQueue,
    /// "Now".
    pub clock: Clock,
    /// Consecutive failures per Node name.
    pub failures: Mutex<HashMap<String, u32>>,
    /// The shared NodeClaim store ([`state::ClusterState::node_claims`]); `None`: LIST.
    pub node_claims: Option<kube::runtime::reflector::Store<NodeClaim>>,
}

impl<P> std::fmt::Debug for Context<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// Runs the Node controller until the process ends.
pub async fn run<P: CloudProvider + 'static>(ctx: Context<P>) {
    let nodes: Api<Node> = Api::all(ctx.client.clone());
    let mut controller = state::controller(nodes, watcher::Config::default());
    // A terminating Node waits for its instance to go; a provider that watches its instances
    // says when (the NodeClaim's name, mapped to its Node), so the finalizer goes at once
    // instead of at the next 5 s poll.
    if let (Some(changes), Some(claims)) = (ctx.provider.launch_changes(), ctx.node_claims.clone())
    {
        controller = controller.reconcile_on(changes.filter_map(move |name| {
            let node = claims
                .get(&ObjectRef::new(&name))
                .and_then(|nc| nc.status.as_ref()?.node_name.clone())
                .map(|node| ObjectRef::<Node>::new(&node));
            std::future::ready(node)
        }));
    }
    controller
        .run(reconcile, error_policy, Arc::new(ctx))
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, "node termination reconcile failed");
            }
        })
        .await;
}

fn error_policy<P>(node: Arc<Node>, error: &TerminationError, ctx: Arc<Context<P>>) -> Action {
    let mut failures = ctx.failures.lock().unwrap_or_else(PoisonError::into_inner);
    let n = failures.entry(node.name_any()).or_insert(0);
    *n = n.saturating_add(1);
    let delay = ERROR_BASE
        .checked_mul(1 << (*n).saturating_sub(1).min(10))
        .unwrap_or(ERROR_MAX)
        .min(ERROR_MAX);
    tracing::warn!(node = node.name_any(), %error, error_kind = error.metric_label(), "terminating node failed");
    Action::requeue(delay)
}

/// One pass over a Node.
#[tracing::instrument(skip_all, fields(node = %node.name_any()))]
pub async fn reconcile<P: CloudProvider + 'static>(
    node: Arc<Node>,
    ctx: Arc<Context<P>>,
) -> Result<Action, TerminationError> {
    let action = terminate(&node, &ctx).await?;
    ctx.failures
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .remove(&node.name_any());
    Ok(action)
}

async fn terminate<P: CloudProvider>(
    node: &Node,
    ctx: &Context<P>,
) -> Result<Action, TerminationError> {
    if !node::is_terminating(node) {
        return Ok(Action::await_change());
    }
    let name = node.name_any();
    let claims: Api<NodeClaim> = Api::all(ctx.client.clone());
    // The shared NodeClaim store when there is one (no request per pass), else a LIST.
    let mut claim = match &ctx.node_claims {
        Some(store) => {
            let all = store.state();
            node::node_claim_of(node, all.iter().map(AsRef::as_ref)).cloned()
        }
        None => {
            let all = claims
                .list(&ListParams::default())
                .await
                .map_err(kube_err("list nodeclaims"))?
                .items;
            node::node_claim_of(node, &all).cloned()
        }
    };
    if let Some(nc) = claim
        .as_ref()
        .filter(|nc| nc.metadata.deletion_timestamp.is_none())
    {
        delete_node_claim(&claims, nc).await?;
    }
    let provider_id = node::provider_id(node);
    if !node::is_ready(node) {
        match ctx.provider.get(provider_id).await {
            Err(e) if e.is_not_found() => return remove_finalizer(node, ctx).await,
            Err(source) => {
                return Err(TerminationError::CloudProvider {
                    operation: "get",
                    source,
                });
            }
            Ok(_) => {}
        }
    }
    let deadline = node::termination_time(claim.as_ref());
    if let Some(deadline) = deadline {
        ctx.events.publish(
            node,
            Message::warning(
                reasons::TERMINATION_GRACE_PERIOD_EXPIRING,
                format!("All pods will be deleted by {deadline}"),
            ),
        );
    }
    let node = taint(node, ctx).await?;

    // Drain.
    let pods: Api<Pod> = Api::all(ctx.client.clone());
    let bound = pods
        .list(&ListParams::default().fields(&format!("spec.nodeName={name}")))
        .await
        .map_err(kube_err("list pods"))?
        .items;
    let now = ctx.clock.now();
    let plan = plan_drain(&bound, deadline, now, ctx.config.stuck_terminating);
    let node_ref = node.object_ref(&());
    let reason = node::drain_reason(claim.as_ref());
    ctx.queue.add(&plan.force, deadline, &node_ref, &reason);
    ctx.queue.add(&plan.evict, deadline, &node_ref, &reason);
    if let Some(nc) = claim.as_mut() {
        update_conditions(&claims, nc, now, |set| {
            let draining = set
                .get(DRAINED)
                .is_some_and(|c| c.status == ConditionStatus::Unknown && c.reason == DRAINING);
            if !draining && !set.is_true(DRAINED) {
                set.set_unknown(DRAINED, DRAINING, "");
            }
        })
        .await?;
    }
    if plan.waiting > 0 {
        ctx.events.publish(
            &node,
            Message::warning(
                reasons::FAILED_DRAINING,
                format!(
                    "Failed to drain node, {} pods are waiting to be evicted",
                    plan.waiting
                ),
            ),
        );
        return Ok(Action::requeue(DRAIN_REQUEUE));
    }
    if let Some(nc) = claim.as_mut() {
        let drained_since = nc
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .find(|c| c.type_ == DRAINED)
            .map(|c| (c.status, c.last_transition_time.0));
        if let Some((ConditionStatus::Unknown, since)) = drained_since {
            let waited = elapsed(since, now);
            if waited < ctx.config.min_drain_time {
                return Ok(Action::requeue(ctx.config.min_drain_time - waited));
            }
            update_conditions(&claims, nc, now, |set| set.set_true(DRAINED)).await?;
            ctx.metrics
                .nodes_drained
                .get_or_create(&PoolLabels {
                    nodepool: label(&node, NODEPOOL),
                })
                .inc();
        }
    }

    // Volume detachment: skipped (no VolumeAttachments in our worlds).

    // Instance termination.
    if let Some(nc) = claim.as_mut() {
        match ctx.provider.delete(nc).await {
            Ok(()) => {
                update_conditions(&claims, nc, now, |set| set.set_true(INSTANCE_TERMINATING))
                    .await?;
                return Ok(Action::requeue(INSTANCE_REQUEUE));
            }
            Err(e) if e.is_not_found() => {}
            Err(source) => {
                return Err(TerminationError::CloudProvider {
                    operation: "delete",
                    source,
                });
            }
        }
    } else {
        match ctx.provider.get(provider_id).await {
            Err(e) if e.is_not_found() => {}
            Err(source) => {
                return Err(TerminationError::CloudProvider {
                    operation: "get",
                    source,
                });
            }
            Ok(_) => return Ok(Action::requeue(INSTANCE_REQUEUE)),
        }
    }
    remove_finalizer(&node, ctx).await
}

fn label(node: &Node, key: &str) -> String {
    node.labels().get(key).cloned().unwrap_or_default()
}

async fn delete_node_claim(
    claims: &Api<NodeClaim>,
    nc: &NodeClaim,
) -> Result<(), TerminationError> {
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: nc.metadata.uid.clone(),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match claims.delete(&nc.name_any(), &params).await {
        Ok(_) => Ok(()),
        Err(e) if matches!(status_code(&e), Some(404 | 409)) => Ok(()),
        Err(e) => Err(kube_err("delete nodeclaim")(e)),
    }
}

/// Edits the NodeClaim's conditions and writes them (only when changed) with a `/status`
/// merge patch guarded by its resourceVersion; `nc` becomes the returned object.
async fn update_conditions(
    claims: &Api<NodeClaim>,
    nc: &mut NodeClaim,
    now: k8s_openapi::jiff::Timestamp,
    edit: impl Fn(&mut ConditionSet),
) -> Result<(), TerminationError> {
    // A copy from the shared store can be behind: on a conflict, once more on a fresh read.
    for fresh in [false, true] {
        let current = nc.status.as_ref().and_then(|s| s.conditions.as_deref());
        let mut set =
            ConditionSet::new(current, NODE_CLAIM_DEPENDENTS, nc.metadata.generation, now);
        edit(&mut set);
        if !set.changed() {
            return Ok(());
        }
        let conditions = serde_json::to_value(set.into_conditions()).map_err(|source| {
            TerminationError::Encode {
                what: "nodeclaim conditions",
                source,
            }
        })?;
        let patch = json!({
            "metadata": {"resourceVersion": nc.metadata.resource_version},
            "status": {"conditions": conditions},
        });
        match claims
            .patch_status(
                &nc.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
        {
            Ok(updated) => {
                *nc = updated;
                return Ok(());
            }
            Err(kube::Error::Api(status)) if status.code == 409 && !fresh => {
                *nc = claims
                    .get(&nc.name_any())
                    .await
                    .map_err(kube_err("get nodeclaim"))?;
            }
            Err(e) => return Err(kube_err("patch nodeclaim status")(e)),
        }
    }
    Ok(())
}

/// Taints and labels the Node if needed; returns the Node as now stored.
async fn taint<P>(node: &Node, ctx: &Context<P>) -> Result<Node, TerminationError> {
    let Some(patch) = node::taint_patch(node) else {
        return Ok(node.clone());
    };
    let nodes: Api<Node> = Api::all(ctx.client.clone());
    nodes
        .patch(
            &node.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .map_err(kube_err("taint node"))
}

async fn remove_finalizer<P>(node: &Node, ctx: &Context<P>) -> Result<Action, TerminationError> {
    let Some(patch) = node::finalizer_removal(node) else {
        return Ok(Action::await_change());
    };
    let patch = serde_json::from_value(patch).map_err(|source| TerminationError::Encode {
        what: "finalizer patch",
        source,
    })?;
    let nodes: Api<Node> = Api::all(ctx.client.clone());
    match nodes
        .patch(
            &node.name_any(),
            &PatchParams::default(),
            &Patch::Json::<()>(patch),
        )
        .await
    {
        Ok(_) => {}
        Err(e) if status_code(&e) == Some(404) => return Ok(Action::await_change()),
        Err(e) => return Err(kube_err("remove node finalizer")(e)),
    }
    tracing::info!(node = node.name_any(), "deleted node");
    let nodepool = label(node, NODEPOOL);
    let now = ctx.clock.now();
    ctx.metrics
        .nodes_terminated
        .get_or_create(&PoolZoneLabels {
            nodepool: nodepool.clone(),
            zone: label(node, ZONE),
        })
        .inc();
    let pool = PoolLabels { nodepool };
    if let Some(deleted) = &node.metadata.deletion_timestamp {
        ctx.metrics
            .nodes_termination_duration
            .get_or_create(&pool)
            .observe(elapsed(deleted.0, now).as_secs_f64());
    }
    if let Some(created) = &node.metadata.creation_timestamp {
        ctx.metrics
            .nodes_lifetime_duration
            .get_or_create(&pool)
            .observe(elapsed(created.0, now).as_secs_f64());
    }
    Ok(Action::await_change())
}
