//! The NodePool hash and readiness controller (spec §1.2, §1.6): I/O around the pure
//! [`super::hash`] and [`super::readiness`].
//!
//! Responsibility: one `kube::runtime` [`Controller`] over NodePools (also triggered by every
//! change of a ClusterAPINodeClass, mapped to the NodePools naming it) reconciling in two
//! phases on an in-memory copy:
//! 1. hash: when the pool's `karpenter.sh/nodepool-hash-version` is not [`HASH_VERSION`], first
//!    re-stamp every NodeClaim labelled `karpenter.sh/nodepool=<pool>` ([`restamp_patch`], merge
//!    patches with a resourceVersion precondition); then write both annotations on the pool
//!    with a merge patch, only when they differ;
//! 2. readiness: read the referenced NodeClass (from a store its watch fills before it
//!    triggers, so a NodeClass change costs no read), compute the conditions and, only when they
//!    changed, write them with one `/status` merge patch carrying the pool's resourceVersion
//!    (compare-and-set, so another writer's condition is never clobbered).
//!
//! Errors ([`StatusError`]): API failures and conflicts requeue the pool with backoff
//! (1 s doubling to 1 min); success requeues after 5 min as a safety net.
//!
//! Inputs: a workload `kube::Client`, the well-known labels. Outputs: NodePool annotations and
//! conditions, NodeClaim hash annotations.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use api::well_known::annotations::{NODEPOOL_HASH, NODEPOOL_HASH_VERSION};
use api::well_known::labels::NODEPOOL;
use api::{ClusterAPINodeClass, NodeClaim, NodePool};
use futures::StreamExt;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use scheduling::labels::WellKnownLabels;
use serde_json::json;
use state::backoff::WatchBackoff;
use state::watch_errors::WatchErrors;

use super::hash::{HASH_VERSION, pool_hash, restamp_patch};
use super::readiness;

/// A failed API operation of the hash/readiness controller.
#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    /// Listing the pool's NodeClaims failed.
    #[error("list NodeClaims of NodePool {pool}: {source}")]
    ListNodeClaims {
        /// The pool.
        pool: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// Re-stamping a NodeClaim failed.
    #[error("patch NodeClaim {node_claim}: {source}")]
    PatchNodeClaim {
        /// The NodeClaim.
        node_claim: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// Annotating the pool failed.
    #[error("patch NodePool {pool}: {source}")]
    PatchNodePool {
        /// The pool.
        pool: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// The ClusterAPINodeClass watch has not listed yet (e.g. RBAC denies it; its error is
    /// logged by the watch).
    #[error("ClusterAPINodeClasses not listed within {0:?}")]
    NodeClassesNotListed(Duration),
    /// Writing the pool's conditions failed (409: someone wrote meanwhile).
    #[error("patch NodePool {pool} status: {source}")]
    PatchStatus {
        /// The pool.
        pool: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
}

impl StatusError {
    /// A low-cardinality label for metrics and logs.
    #[must_use]
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::ListNodeClaims { .. } => "list_nodeclaims",
            Self::PatchNodeClaim { .. } => "patch_nodeclaim",
            Self::PatchNodePool { .. } => "patch_nodepool",
            Self::NodeClassesNotListed(_) => "nodeclasses_not_listed",
            Self::PatchStatus { .. } => "patch_nodepool_status",
        }
    }
}

/// How long a reconcile waits for the NodeClass watch's first list before it fails (and is
/// retried with backoff).
const CLASSES_LISTED_TIMEOUT: Duration = Duration::from_secs(30);

/// What the reconciler needs.
struct Context {
    client: kube::Client,
    /// ClusterAPINodeClasses, reflected before their events trigger reconciles (so a reconcile
    /// a NodeClass change caused sees that change).
    classes: Store<ClusterAPINodeClass>,
    /// The NodeClass store's first list ([`state::listed`]: many reconciles wait at once).
    classes_listed: tokio::sync::watch::Receiver<Option<bool>>,
    well_known: WellKnownLabels,
    failures: Mutex<HashMap<String, u32>>,
}

fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

impl Context {
    /// Phase 1: re-stamp NodeClaims after a version change, then annotate the pool. Returns the
    /// pool as stored afterwards (so phase 2's precondition is current).
    async fn stamp(&self, pool: NodePool) -> Result<NodePool, StatusError> {
        let name = pool.name_any();
        let hash = pool_hash(&pool);
        let annotations = pool.annotations();
        let current_version =
            annotations.get(NODEPOOL_HASH_VERSION).map(String::as_str) == Some(HASH_VERSION);
        if !current_version {
            let claims: Api<NodeClaim> = Api::all(self.client.clone());
            let list = claims
                .list(&ListParams::default().labels(&format!("{NODEPOOL}={name}")))
                .await
                .map_err(|source| StatusError::ListNodeClaims {
                    pool: name.clone(),
                    source,
                })?;
            for nc in &list.items {
                let Some(patch) = restamp_patch(nc, &hash) else {
                    continue;
                };
                let nc_name = nc.name_any();
                match claims
                    .patch(&nc_name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                {
                    Ok(_) => {}
                    Err(e) if is_not_found(&e) => {}
                    Err(source) => {
                        return Err(StatusError::PatchNodeClaim {
                            node_claim: nc_name,
                            source,
                        });
                    }
                }
            }
        }
        if current_version && annotations.get(NODEPOOL_HASH) == Some(&hash) {
            return Ok(pool);
        }
        let patch = json!({"metadata": {"annotations": {
            NODEPOOL_HASH: hash,
            NODEPOOL_HASH_VERSION: HASH_VERSION,
        }}});
        Api::<NodePool>::all(self.client.clone())
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|source| StatusError::PatchNodePool { pool: name, source })
    }

    /// Phase 2: the readiness conditions.
    async fn readiness(&self, pool: &NodePool) -> Result<(), StatusError> {
        let name = pool.name_any();
        let node_class = match readiness::referenced_node_class(pool) {
            Some(class) => {
                tokio::time::timeout(
                    CLASSES_LISTED_TIMEOUT,
                    state::listed::wait_listed(&self.classes_listed),
                )
                .await
                .ok()
                .and_then(Result::ok)
                .ok_or(StatusError::NodeClassesNotListed(CLASSES_LISTED_TIMEOUT))?;
                self.classes.get(&ObjectRef::new(class))
            }
            None => None,
        };
        let set = readiness::conditions(
            pool,
            node_class.as_deref(),
            &self.well_known,
            Timestamp::now(),
        );
        if !set.changed() {
            return Ok(());
        }
        let patch = json!({
            "metadata": {"resourceVersion": pool.metadata.resource_version},
            "status": {"conditions": set.conditions()},
        });
        Api::<NodePool>::all(self.client.clone())
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|source| StatusError::PatchStatus { pool: name, source })?;
        Ok(())
    }

    fn backoff(&self, name: &str) -> Duration {
        let mut failures = self.failures.lock().unwrap_or_else(PoisonError::into_inner);
        let n = failures.entry(name.to_owned()).or_default();
        *n = n.saturating_add(1);
        Duration::from_secs((1_u64 << (*n - 1).min(6)).min(60))
    }

    fn succeeded(&self, name: &str) {
        self.failures
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(name);
    }
}

#[tracing::instrument(skip_all, fields(nodepool = %pool.name_any()))]
async fn reconcile(pool: Arc<NodePool>, ctx: Arc<Context>) -> Result<Action, StatusError> {
    if pool.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let pool = ctx.stamp(NodePool::clone(&pool)).await?;
    ctx.readiness(&pool).await?;
    ctx.succeeded(&pool.name_any());
    Ok(Action::requeue(Duration::from_secs(300)))
}

fn error_policy(pool: Arc<NodePool>, error: &StatusError, ctx: Arc<Context>) -> Action {
    tracing::debug!(nodepool = %pool.name_any(), error = %error, kind = error.metric_label(),
        "NodePool status reconcile failed");
    Action::requeue(ctx.backoff(&pool.name_any()))
}

/// Runs the hash and readiness controller until its watches end.
pub async fn run(client: kube::Client, well_known: WellKnownLabels) {
    let (classes, writer) = reflector::store::<ClusterAPINodeClass>();
    // One NodeClass watch, reflected into the store before its events reach the controller:
    // readiness reads NodeClasses from the store, not from the API server. It is polled apart
    // from the controller, so a reconcile waiting for the store's first list never holds up the stream that
    // fills it (both run joined: dropped together).
    let (tx, class_events) = futures::channel::mpsc::unbounded();
    let mut reflected = watcher(
        Api::<ClusterAPINodeClass>::all(client.clone()),
        watcher::Config::default(),
    )
    .retry_backoff()
    .reflect(writer)
    .touched_objects()
    .boxed();
    let forward = async move {
        while let Some(event) = reflected.next().await {
            if tx.unbounded_send(event).is_err() {
                return;
            }
        }
    };
    let ctx = Arc::new(Context {
        client: client.clone(),
        classes_listed: state::listed::listed(&classes),
        classes,
        well_known,
        failures: Mutex::default(),
    });
    let controller = state::controller(
        Api::<NodePool>::all(client.clone()),
        watcher::Config::default(),
    );
    let pools = controller.store();
    let mut watch_errors = WatchErrors::new("NodePool status");
    let controller = controller
        .watches_stream(class_events, move |class: ClusterAPINodeClass| {
            let name = class.name_any();
            pools
                .state()
                .into_iter()
                .filter(|p| readiness::referenced_node_class(p) == Some(name.as_str()))
                .map(|p| ObjectRef::from_obj(&*p))
                .collect::<Vec<_>>()
        })
        .run(reconcile, error_policy, ctx)
        .for_each(move |result| {
            match result {
                // Reconcile failures are retried by `error_policy`.
                Err(kube::runtime::controller::Error::ReconcilerFailed(..)) => {}
                // The controller's own watches (NodePools, NodeClasses).
                Err(e) => {
                    watch_errors.failed(&e);
                }
                Ok(_) => watch_errors.succeeded(),
            }
            futures::future::ready(())
        });
    futures::future::join(forward, controller).await;
}
