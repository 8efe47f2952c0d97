//! The lifecycle `Controller` over NodeClaims: wiring, dispatch and the writes of one reconcile.
//!
//! Responsibility: [`Lifecycle::run`] runs a kube-runtime `Controller` over NodeClaims that
//! also watches Nodes through one reflected stream: the Node store (providerID lookups) is
//! updated before the event triggers, so a reconcile never sees an older Node than the one
//! that triggered it. A Node maps to its NodeClaim by owner reference, else by providerID
//! through the NodeClaim store. Reconciles wait for the Node store's first list. Each
//! reconcile of a managed NodeClaim (its `nodeClassRef.group` is ours) either runs the
//! finalizer ([`super::finalize`]) when deleting, or adds `karpenter.sh/termination` first
//! (merge patch with resourceVersion; nothing launches before), or runs launch → registration
//! → initialization → liveness on one [`Work`] copy and writes at most one metadata patch and
//! one `/status` patch. A provider that reports launch changes
//! ([`CloudProvider::launch_changes`]) triggers reconciles of the NodeClaims concerned, and the
//! providerID poll slows to 30 s. Failures are retried with per-object exponential backoff 1 s … 1 min.
//! Inputs: a workload client, the provider. Outputs: API writes, Events, metrics, logs.

use state::backoff::WatchBackoff;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use api::well_known::finalizers::TERMINATION;
use api::{ClusterAPINodeClass, NodeClaim};
use cloudprovider::types::normalize_provider_id;
use cloudprovider::{CloudProvider, Launch};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::Resource;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;
use state::watch_errors::WatchErrors;
use tokio::time::Instant;

use super::context::{Clock, Ctx, LifecycleConfig, provider_id_of};
use super::error::Error;
use super::patch::{metadata_patch, status_patch};
use super::work::{Flow, Work};
use super::{finalize, initialization, launch, liveness, registration};
use crate::events::Events;
use crate::metrics::Metrics;

/// The providerID poll when the provider reports launch changes itself.
const LAUNCH_WATCHED_POLL: std::time::Duration = std::time::Duration::from_secs(30);

/// The NodeClaim lifecycle controller.
pub struct Lifecycle<P> {
    client: kube::Client,
    provider: Arc<P>,
    events: Events,
    metrics: Arc<Metrics>,
    config: LifecycleConfig,
    launches: Arc<Mutex<HashMap<String, (Launch, Instant)>>>,
}

impl<P> std::fmt::Debug for Lifecycle<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lifecycle")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl<P: CloudProvider + 'static> Lifecycle<P> {
    /// A controller writing through `client` (the workload cluster).
    #[must_use]
    pub fn new(
        client: kube::Client,
        provider: Arc<P>,
        events: Events,
        metrics: Arc<Metrics>,
        config: LifecycleConfig,
    ) -> Self {
        Self {
            client,
            provider,
            events,
            metrics,
            config,
            launches: Arc::default(),
        }
    }

    /// Runs the controller until the process ends.
    pub async fn run(self) {
        let (nodes, writer) = reflector::store::<Node>();
        // One Node watch, reflected into the store before its events reach the controller:
        // a reconcile triggered by a Node change always finds that change in the store. (With
        // a second, independent Node watch for the store, a loaded process could reconcile on
        // the newer event while the store still held the older Node, and a NodeClaim waiting
        // for its Node to be Ready stayed unready until some other event came.)
        let node_events = watcher(
            Api::<Node>::all(self.client.clone()),
            watcher::Config::default(),
        )
        .retry_backoff()
        .modify(state::strip_managed_fields)
        .reflect(writer)
        .touched_objects();
        // A provider that watches its instances says when a launch changed: no 2 s polling for
        // providerIDs, only a slow safety net.
        let launch_changes = self.provider.launch_changes();
        let mut config = self.config;
        if launch_changes.is_some() {
            config.launch_poll = config.launch_poll.max(LAUNCH_WATCHED_POLL);
        }
        let ctx = Arc::new(Ctx {
            client: self.client.clone(),
            provider: self.provider,
            events: self.events,
            metrics: self.metrics,
            config,
            clock: Clock::new(),
            nodes_listed: state::listed::listed(&nodes),
            nodes,
            launches: self.launches,
            failures: Mutex::default(),
            written: super::context::Written::default(),
        });
        let client = self.client;
        let controller =
            state::controller(Api::<NodeClaim>::all(client), watcher::Config::default());
        let claims = controller.store();
        let mut watch_errors = WatchErrors::new("NodeClaim lifecycle");
        let mut controller = controller.watches_stream(node_events, move |node: Node| {
            node_claims_of(&claims, &node)
        });
        if let Some(changes) = launch_changes {
            controller = controller.reconcile_on(changes.map(|name| ObjectRef::new(&name)));
        }
        controller
            .run(reconcile, error_policy, ctx)
            .for_each(move |result| {
                match result {
                    // Reconcile failures are retried by `error_policy` and reported there.
                    Err(e @ kube::runtime::controller::Error::ReconcilerFailed(..)) => {
                        tracing::debug!(error = %e, "nodeclaim lifecycle");
                    }
                    // The controller's own watches (NodeClaims, Nodes).
                    Err(e) => {
                        watch_errors.failed(&e);
                    }
                    Ok(_) => watch_errors.succeeded(),
                }
                futures::future::ready(())
            })
            .await;
    }
}

/// The NodeClaims a Node event concerns: its NodeClaim owner, else those with its providerID.
fn node_claims_of(claims: &Store<NodeClaim>, node: &Node) -> Vec<ObjectRef<NodeClaim>> {
    let owners: Vec<ObjectRef<NodeClaim>> = node
        .metadata
        .owner_references
        .iter()
        .flatten()
        .filter(|o| o.kind == NodeClaim::kind(&()) && o.api_version == NodeClaim::api_version(&()))
        .map(|o| ObjectRef::new(&o.name))
        .collect();
    if !owners.is_empty() {
        return owners;
    }
    let Some(wanted) = node
        .spec
        .as_ref()
        .and_then(|s| s.provider_id.as_deref())
        .map(normalize_provider_id)
        .filter(|p| !p.is_empty())
    else {
        return Vec::new();
    };
    claims
        .state()
        .iter()
        .filter(|nc| provider_id_of(nc).is_some_and(|p| normalize_provider_id(p) == wanted))
        .map(|nc| ObjectRef::from_obj(nc.as_ref()))
        .collect()
}

/// Whether the NodeClaim's NodeClass belongs to this provider.
fn managed(nc: &NodeClaim) -> bool {
    nc.spec.node_class_ref.group == ClusterAPINodeClass::group(&())
}

fn has_finalizer(nc: &NodeClaim) -> bool {
    nc.metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == TERMINATION)
}

fn key_of(nc: &NodeClaim) -> String {
    nc.metadata
        .uid
        .clone()
        .or_else(|| nc.metadata.name.clone())
        .unwrap_or_default()
}

async fn reconcile<P: CloudProvider + 'static>(
    nc: Arc<NodeClaim>,
    ctx: Arc<Ctx<P>>,
) -> Result<Action, Error> {
    if !managed(&nc) {
        return Ok(Action::await_change());
    }
    // Registration and initialization read the Node store: not before its first list. (The
    // Node watch is driven by this controller, so this waits without blocking it.)
    if state::listed::wait_listed(&ctx.nodes_listed).await.is_err() {
        return Err(Error::NodeStoreGone);
    }
    // Our last write started from this very copy: acting on it again would only conflict.
    if ctx.behind_our_write(&nc) {
        return Ok(Action::await_change());
    }
    let action = if nc.metadata.deletion_timestamp.is_some() {
        if has_finalizer(&nc) {
            finalize::reconcile(&nc, &ctx).await?
        } else {
            Action::await_change()
        }
    } else if !has_finalizer(&nc) {
        add_finalizer(&nc, &ctx).await?
    } else {
        lifecycle(&nc, &ctx).await?
    };
    ctx.succeeded(&key_of(&nc));
    Ok(action)
}

fn error_policy<P>(nc: Arc<NodeClaim>, error: &Error, ctx: Arc<Ctx<P>>) -> Action {
    let delay = ctx.backoff(&key_of(&nc));
    let name = nc.metadata.name.as_deref().unwrap_or_default();
    if matches!(error, Error::Conflict(_)) {
        tracing::debug!(nodeclaim = name, error = %error, "retrying");
    } else {
        tracing::warn!(
            nodeclaim = name,
            error = %error,
            source = std::error::Error::source(error).map(ToString::to_string),
            kind = error.metric_label(),
            retry_in = ?delay,
            "nodeclaim lifecycle failed"
        );
    }
    Action::requeue(delay)
}

/// Adds our finalizer (compare-and-set on the resourceVersion). The write's watch event
/// brings the NodeClaim back.
async fn add_finalizer<P>(nc: &NodeClaim, ctx: &Ctx<P>) -> Result<Action, Error> {
    let name = nc.metadata.name.clone().unwrap_or_default();
    let mut finalizers = nc.metadata.finalizers.clone().unwrap_or_default();
    finalizers.push(TERMINATION.to_owned());
    let patch = json!({"metadata": {
        "resourceVersion": nc.metadata.resource_version,
        "finalizers": finalizers,
    }});
    Api::<NodeClaim>::all(ctx.client.clone())
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| Error::patch_node_claim(&name, e))?;
    ctx.wrote_from(nc);
    Ok(Action::await_change())
}

/// launch → registration → initialization → liveness, then the writes.
async fn lifecycle<P: CloudProvider>(nc: &NodeClaim, ctx: &Ctx<P>) -> Result<Action, Error> {
    let mut work = Work::new(nc, ctx.clock.now());
    let mut first_error = None;
    let phases: [Phase; 4] = [
        Phase::Launch,
        Phase::Registration,
        Phase::Initialization,
        Phase::Liveness,
    ];
    for phase in phases {
        let result = match phase {
            Phase::Launch => launch::reconcile(&mut work, ctx).await,
            Phase::Registration => registration::reconcile(&mut work, ctx).await,
            Phase::Initialization => initialization::reconcile(&mut work, ctx).await,
            Phase::Liveness => liveness::reconcile(&mut work, ctx).await,
        };
        match result {
            Ok(Flow::Deleted) => return Ok(Action::await_change()),
            Ok(Flow::Continue) => {}
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    write(nc, &work, ctx).await?;
    if let Some(labels) = &work.registered {
        ctx.metrics.nodes_created.get_or_create(labels).inc();
    }
    if let Some(e) = first_error {
        return Err(e);
    }
    Ok(work
        .requeue
        .map_or_else(Action::await_change, Action::requeue))
}

#[derive(Debug, Clone, Copy)]
enum Phase {
    Launch,
    Registration,
    Initialization,
    Liveness,
}

/// At most one metadata patch, then at most one status patch rebased on its result.
async fn write<P>(original: &NodeClaim, work: &Work, ctx: &Ctx<P>) -> Result<(), Error> {
    let name = work.name().to_owned();
    let api: Api<NodeClaim> = Api::all(ctx.client.clone());
    let mut latest = original.clone();
    if let Some(patch) = metadata_patch(&original.metadata, &work.nc.metadata) {
        latest = api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| Error::patch_node_claim(&name, e))?;
        ctx.wrote_from(original);
    }
    if let Some(patch) = status_patch(original.status.as_ref(), &work.status(), &latest) {
        let last = api
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| Error::patch_node_claim(&name, e))?;
        ctx.wrote_from(original);
        // The version between our metadata and status patches is behind as well — only if
        // the status patch made a newer one (a no-op write makes none, and no watch event
        // would follow to end the skipping).
        if latest.metadata.resource_version != original.metadata.resource_version
            && last.metadata.resource_version != latest.metadata.resource_version
        {
            ctx.wrote_over(&latest);
        }
    }
    Ok(())
}
