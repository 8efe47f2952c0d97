//! The in-memory state of the workload cluster, fed by watches.
//!
//! Responsibility:
//! - [`ClusterState::start`] runs one kube-runtime watcher + reflector per kind the core
//!   controllers read (Nodes, Pods, NodeClaims, NodePools, DaemonSets, Namespaces,
//!   ClusterAPINodeClasses, PodDisruptionBudgets) and keeps the stores, without
//!   `metadata.managedFields` and, for Pods, without what no controller reads ([`slim`]);
//! - per node, the last pod event ([`pod_events`]) for `status.lastPodEventTime`;
//! - [`ClusterState::snapshot`] copies them for one provisioning loop (nodes are copied before
//!   pods, so a loop undershoots rather than overshoots: spec §3.4 item 1);
//! - [`ClusterState::synced`] is upstream's gate (spec §3.19), adapted to a launch that does
//!   not wait for the providerID: every store has listed once, every NodeClaim this process
//!   created is in the cache, and no NodeClaim that is not being deleted is still waiting for
//!   its launch (`Launched` not True) — disruption waits for it. The provisioner waits only
//!   for the first two ([`ClusterState::provisioning_synced`]): a launched NodeClaim carries
//!   its capacity and labels, and one still launching counts as the capacity of its
//!   `spec.resources.requests`, so the scheduler sees both as in-flight capacity and one stuck
//!   launch never stalls provisioning;
//! - provisioning triggers: every Pod event for which the configured predicate holds sends
//!   [`Trigger::Pod`] (the provisioner's batcher listens); a Node tainted
//!   `karpenter.sh/disrupted` sends [`Trigger::Node`];
//! - [`ClusterState::changes`] ticks on every event (for tests and waiters);
//! - watch errors are logged at warn, rate-limited ([`watch_errors`]), and retried with a
//!   backoff that a relist's `Init` does not reset ([`backoff`]).
//!
//! Inputs: a workload `kube::Client`, [`StateConfig`]. Outputs: snapshots, triggers, the gate.

pub mod backoff;
pub mod bookkeeping;
pub mod buffers;
pub mod listed;
pub mod pod_events;
pub mod slim;
pub mod watch_errors;

use crate::backoff::WatchBackoff;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use api::common::{ConditionStatus, Conditions};
use api::well_known::conditions::LAUNCHED;
use api::well_known::taints::DISRUPTED;
use api::{ClusterAPINodeClass, NodeClaim, NodePool};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

pub use bookkeeping::Bookkeeping;
pub use pod_events::{PodEvents, Seen};

/// Something that should make the provisioner look at the cluster.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Trigger {
    /// A provisionable pod (by UID) was created or changed.
    Pod(String),
    /// A node was tainted `karpenter.sh/disrupted` (its pods need new homes).
    Node(String),
}

/// Which pods trigger provisioning.
pub type PodPredicate = Arc<dyn Fn(&Pod) -> bool + Send + Sync>;

/// Settings of the state.
#[derive(Clone, Default)]
pub struct StateConfig {
    /// Where triggers go, and which pods send one. `None`: no triggers.
    pub triggers: Option<(mpsc::UnboundedSender<Trigger>, PodPredicate)>,
}

impl std::fmt::Debug for StateConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateConfig")
            .field("triggers", &self.triggers.is_some())
            .finish()
    }
}

/// Copies of the cluster's objects for one loop.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// Nodes.
    pub nodes: Vec<Node>,
    /// NodeClaims.
    pub node_claims: Vec<NodeClaim>,
    /// Pods, shared with the store (a loop reads them; nothing writes them): the biggest
    /// kind by far, copied once per loop they were most of a loop's memory.
    pub pods: Vec<Arc<Pod>>,
    /// DaemonSets.
    pub daemon_sets: Vec<DaemonSet>,
    /// Namespaces.
    pub namespaces: Vec<Namespace>,
    /// NodePools.
    pub node_pools: Vec<NodePool>,
    /// ClusterAPINodeClasses.
    pub node_classes: Vec<ClusterAPINodeClass>,
    /// PodDisruptionBudgets.
    pub pdbs: Vec<PodDisruptionBudget>,
}

/// Why the state is not synced (for logs and `readyz`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unsynced {
    /// A store has not listed yet.
    NotListed,
    /// NodeClaims this process created are not in the cache yet.
    Unseen(Vec<String>),
    /// NodeClaims are still launching.
    Launching(Vec<String>),
}

impl std::fmt::Display for Unsynced {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotListed => write!(f, "caches have not listed yet"),
            Self::Unseen(n) => write!(
                f,
                "created NodeClaims not in the cache yet: {}",
                n.join(", ")
            ),
            Self::Launching(n) => write!(f, "NodeClaims still launching: {}", n.join(", ")),
        }
    }
}

/// The state: stores, bookkeeping and the watch tasks.
pub struct ClusterState {
    nodes: Store<Node>,
    pods: Store<Pod>,
    node_claims: Store<NodeClaim>,
    node_pools: Store<NodePool>,
    daemon_sets: Store<DaemonSet>,
    namespaces: Store<Namespace>,
    node_classes: Store<ClusterAPINodeClass>,
    pdbs: Store<PodDisruptionBudget>,
    /// Each store's first-list flag ([`listed`]), in the order above.
    listed: Vec<watch::Receiver<Option<bool>>>,
    bookkeeping: Mutex<Bookkeeping>,
    buffers: Mutex<buffers::Buffers>,
    /// Ticks when the buffers' placements change.
    buffer_changes: watch::Sender<u64>,
    /// Ticks when the buffers' virtual pods change.
    buffer_pod_changes: watch::Sender<u64>,
    pod_events: Arc<Mutex<PodEvents>>,
    changes: watch::Receiver<u64>,
    /// The watch tasks, named `KIND watch`.
    tasks: Vec<(String, JoinHandle<()>)>,
}

impl std::fmt::Debug for ClusterState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterState")
            .field("nodes", &self.nodes.state().len())
            .field("pods", &self.pods.state().len())
            .field("node_claims", &self.node_claims.state().len())
            .finish_non_exhaustive()
    }
}

impl Drop for ClusterState {
    fn drop(&mut self) {
        for (_, task) in &self.tasks {
            task.abort();
        }
    }
}

type OnEvent<K> = Box<dyn Fn(Seen, &K) + Send + Sync>;
type PodPredicateTx = (mpsc::UnboundedSender<Trigger>, PodPredicate);

/// What a kind needs to be kept by a watch here: a static type, cloneable, decodable and
/// sendable between tasks.
pub trait Watched:
    Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static
{
}

impl<K> Watched for K where
    K: Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static
{
}

fn spawn_reflector<K>(
    client: &kube::Client,
    tick: Arc<watch::Sender<u64>>,
    on_event: Option<OnEvent<K>>,
    slim: fn(&mut K),
) -> (Store<K>, (String, JoinHandle<()>))
where
    K: Watched,
{
    let (store, writer) = reflector::store();
    let api: Api<K> = Api::all(client.clone());
    let task = tokio::spawn(async move {
        let stream = watcher(api, watcher::Config::default())
            .retry_backoff()
            .modify(slim)
            .reflect(writer);
        let mut stream = std::pin::pin!(stream);
        let mut errors = watch_errors::WatchErrors::new(K::kind(&()));
        while let Some(event) = stream.next().await {
            match event {
                Ok(watcher::Event::Apply(obj)) => {
                    errors.succeeded();
                    if let Some(f) = &on_event {
                        f(Seen::Applied, &obj);
                    }
                }
                Ok(watcher::Event::InitApply(obj)) => {
                    errors.succeeded();
                    if let Some(f) = &on_event {
                        f(Seen::Listed, &obj);
                    }
                }
                Ok(watcher::Event::Delete(obj)) => {
                    errors.succeeded();
                    if let Some(f) = &on_event {
                        f(Seen::Deleted, &obj);
                    }
                }
                // `Init` starts a (re)list and comes before its outcome: not a success.
                Ok(watcher::Event::Init) => {}
                Ok(_) => errors.succeeded(),
                Err(e) => {
                    errors.failed(&e);
                }
            }
            tick.send_modify(|n| *n = n.wrapping_add(1));
        }
    });
    (store, (format!("{} watch", K::kind(&())), task))
}

/// A store of every `K` kept by a watch (managedFields stripped, watch errors logged and
/// retried as for the state's own stores), ticking `tick` on every event; and the task that
/// feeds it, named for health reporting. For controllers that watch a kind the state does not
/// (NodeOverlays, behind their gate). Must be called inside a tokio runtime.
pub fn watch_store<K>(
    client: &kube::Client,
    tick: Arc<watch::Sender<u64>>,
) -> (Store<K>, (String, JoinHandle<()>))
where
    K: Watched,
{
    spawn_reflector(client, tick, None, strip_managed_fields)
}

/// Drops `metadata.managedFields` before an object is cached, as controller-runtime's
/// `TransformStripManagedFields` does for upstream Karpenter: no controller reads them, and on
/// an API server that tracks server-side apply (every real one, and `sim`) they are often the
/// largest part of a Pod or Node. Every write is a merge or JSON patch or goes to a subresource,
/// never an update of a cached copy, so nothing is written back without them.
pub fn strip_managed_fields<K: Resource>(obj: &mut K) {
    obj.meta_mut().managed_fields = None;
}

/// A kube-runtime `Controller` of `K`, as `Controller::new(api, config)` makes it — one watch
/// of `K` reflected into the controller's own store, each applied object triggering a
/// reconcile, watch errors handed to the controller's trigger backoff — but with
/// `metadata.managedFields` stripped before the store keeps an object ([`strip_managed_fields`]).
/// `Controller::new` keeps whole objects: at a thousand pods the NodeClaim lifecycle's and the
/// Node termination's stores held 3.8 MiB of managedFields.
pub fn controller<K>(api: Api<K>, config: watcher::Config) -> kube::runtime::Controller<K>
where
    K: Watched,
{
    let (reader, writer) = reflector::store();
    let trigger = watcher(api, config)
        .modify(strip_managed_fields)
        .reflect(writer)
        .applied_objects();
    kube::runtime::Controller::for_stream(trigger, reader)
}

/// Whether `nc` is one of ours (its NodeClass is a ClusterAPINodeClass) still launching. A
/// NodeClaim of another provider's NodeClass never launches here, so it must not hold the
/// gate (issue 11 item 5: it would stall every provisioning loop).
fn launching(nc: &NodeClaim) -> bool {
    nc.spec.node_class_ref.group == ClusterAPINodeClass::group(&())
        && nc.metadata.deletion_timestamp.is_none()
        && nc
            .status
            .as_ref()
            .and_then(|s| s.conditions.condition(LAUNCHED))
            .is_none_or(|c| c.status != ConditionStatus::True)
}

fn disrupted(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| t.iter().any(|t| t.key == DISRUPTED))
}

/// The store's objects themselves (not copies), by namespace and name.
fn shared<K>(store: &Store<K>) -> Vec<Arc<K>>
where
    K: kube::Resource + Clone + 'static,
    K::DynamicType: std::hash::Hash + Eq + Clone,
{
    let mut out = store.state();
    out.sort_by(|a, b| {
        (a.meta().namespace.as_deref(), a.meta().name.as_deref())
            .cmp(&(b.meta().namespace.as_deref(), b.meta().name.as_deref()))
    });
    out
}

fn copies<K>(store: &Store<K>) -> Vec<K>
where
    K: kube::Resource + Clone + 'static,
    K::DynamicType: std::hash::Hash + Eq + Clone,
{
    shared(store).into_iter().map(|o| (*o).clone()).collect()
}

impl ClusterState {
    /// Starts watching the workload cluster. Must be called inside a tokio runtime.
    #[must_use]
    pub fn start(client: &kube::Client, config: StateConfig) -> Arc<Self> {
        let (tick, changes) = watch::channel(0_u64);
        let tick = Arc::new(tick);
        let mut tasks = Vec::new();
        let pod_events = Arc::new(Mutex::new(PodEvents::default()));
        let (pod_trigger, node_trigger): (Option<PodPredicateTx>, Option<OnEvent<Node>>) =
            match config.triggers {
                Some((tx, predicate)) => {
                    let node_tx = tx.clone();
                    (
                        Some((tx, predicate)),
                        Some(Box::new(move |seen, node: &Node| {
                            if seen != Seen::Deleted && disrupted(node) {
                                let _ = node_tx.send(Trigger::Node(node.name_any()));
                            }
                        })),
                    )
                }
                None => (None, None),
            };
        let events = Arc::clone(&pod_events);
        let on_pod: OnEvent<Pod> = Box::new(move |seen, pod: &Pod| {
            events
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .observe(pod, seen, Timestamp::now());
            if let Some((tx, predicate)) = &pod_trigger
                && seen != Seen::Deleted
                && predicate(pod)
            {
                let _ = tx.send(Trigger::Pod(pod.uid().unwrap_or_default()));
            }
        });
        let (nodes, t) = spawn_reflector(
            &client.clone(),
            Arc::clone(&tick),
            node_trigger,
            strip_managed_fields,
        );
        tasks.push(t);
        let (pods, t) = spawn_reflector(client, Arc::clone(&tick), Some(on_pod), slim::pod);
        tasks.push(t);
        let (node_claims, t) =
            spawn_reflector(client, Arc::clone(&tick), None, strip_managed_fields);
        tasks.push(t);
        let (node_pools, t) =
            spawn_reflector(client, Arc::clone(&tick), None, strip_managed_fields);
        tasks.push(t);
        let (daemon_sets, t) =
            spawn_reflector(client, Arc::clone(&tick), None, strip_managed_fields);
        tasks.push(t);
        let (namespaces, t) =
            spawn_reflector(client, Arc::clone(&tick), None, strip_managed_fields);
        tasks.push(t);
        let (pdbs, t) = spawn_reflector(client, Arc::clone(&tick), None, strip_managed_fields);
        tasks.push(t);
        let (node_classes, t) = spawn_reflector(client, tick, None, strip_managed_fields);
        tasks.push(t);
        let listed = vec![
            listed::listed(&nodes),
            listed::listed(&pods),
            listed::listed(&node_claims),
            listed::listed(&node_pools),
            listed::listed(&daemon_sets),
            listed::listed(&namespaces),
            listed::listed(&node_classes),
            listed::listed(&pdbs),
        ];
        Arc::new(Self {
            listed,
            nodes,
            pods,
            node_claims,
            node_pools,
            daemon_sets,
            namespaces,
            node_classes,
            pdbs,
            bookkeeping: Mutex::default(),
            buffers: Mutex::default(),
            buffer_changes: watch::channel(0).0,
            buffer_pod_changes: watch::channel(0).0,
            pod_events,
            changes,
            tasks,
        })
    }

    /// The watch tasks (`Node watch`, `Pod watch`, ...), for liveness: each runs until the
    /// state is dropped (a watch error is retried inside it), so one that ended is a fault.
    #[must_use]
    pub fn watch_tasks(&self) -> Vec<(String, tokio::task::AbortHandle)> {
        self.tasks
            .iter()
            .map(|(name, task)| (name.clone(), task.abort_handle()))
            .collect()
    }

    /// Whether every store has listed once (no waiting).
    #[must_use]
    pub fn listed_now(&self) -> bool {
        // A store is ready once its first list was applied; `state()` of an unready store is
        // empty. (Never `now_or_never` on the store's own waiter: see [`listed`].)
        self.listed.iter().all(listed::is_listed)
    }

    /// Waits until every store has listed once; gives up after `timeout`.
    ///
    /// # Errors
    /// `Err(())` on timeout or when a watch task ended.
    pub async fn wait_listed(&self, timeout: Duration) -> Result<(), ()> {
        let all = async {
            for flag in &self.listed {
                listed::wait_listed(flag).await?;
            }
            Ok::<(), ()>(())
        };
        match tokio::time::timeout(timeout, all).await {
            Ok(Ok(())) => Ok(()),
            _ => Err(()),
        }
    }

    /// The provisioner's gate: every store has listed once and every NodeClaim this process
    /// created is in the cache. NodeClaims still launching do not hold it: the scheduler
    /// counts each as in-flight capacity of its `spec.resources.requests` (the pods it was
    /// made for), so one launch that cannot complete never stalls provisioning for other pods.
    ///
    /// # Errors
    /// Why not.
    pub fn provisioning_synced(&self) -> Result<(), Unsynced> {
        if !self.listed_now() {
            return Err(Unsynced::NotListed);
        }
        let unseen = self.lock().unseen(Instant::now(), |name| {
            self.node_claims
                .get(&reflector::ObjectRef::new(name))
                .is_some()
        });
        if unseen.is_empty() {
            Ok(())
        } else {
            Err(Unsynced::Unseen(unseen))
        }
    }

    /// Upstream's gate, adapted (see the module docs): `Ok` when disruption may plan — also no
    /// NodeClaim may still be launching.
    ///
    /// # Errors
    /// Why not.
    pub fn synced(&self) -> Result<(), Unsynced> {
        self.provisioning_synced()?;
        let mut launching: Vec<String> = self
            .node_claims
            .state()
            .iter()
            .filter(|nc| launching(nc))
            .map(|nc| nc.name_any())
            .collect();
        if launching.is_empty() {
            Ok(())
        } else {
            launching.sort();
            Err(Unsynced::Launching(launching))
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Bookkeeping> {
        self.bookkeeping
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Record a NodeClaim this process just created (the gate waits until the cache has it).
    pub fn node_claim_created(&self, name: &str) {
        self.lock().created(name, Instant::now());
    }

    /// Record that NodeClaim `name` was created for the pods with these UIDs.
    pub fn node_claim_planned(&self, name: &str, pod_uids: Vec<String>) {
        self.lock().planned(name, pod_uids, Instant::now());
    }

    /// The UIDs of the pods NodeClaim `name` was created for, while remembered
    /// ([`bookkeeping::PLANNED_HORIZON`]).
    #[must_use]
    pub fn planned_pods(&self, name: &str) -> Vec<String> {
        self.lock().planned_pods(name, Instant::now()).to_vec()
    }

    /// Nominate `node` for pods for `window`.
    pub fn nominate(&self, node: &str, window: Duration) {
        self.lock().nominate(node, Instant::now() + window);
    }

    /// Whether `node` is nominated now.
    #[must_use]
    pub fn is_nominated(&self, node: &str) -> bool {
        let now = Instant::now();
        let mut b = self.lock();
        b.expire(now);
        b.is_nominated(node, now)
    }

    /// Copies of everything, nodes and NodeClaims first (sorted by namespace/name).
    #[must_use]
    pub fn snapshot(&self) -> Snapshot {
        let nodes = copies(&self.nodes);
        let node_claims = copies(&self.node_claims);
        Snapshot {
            nodes,
            node_claims,
            pods: shared(&self.pods),
            daemon_sets: copies(&self.daemon_sets),
            namespaces: copies(&self.namespaces),
            node_pools: copies(&self.node_pools),
            node_classes: copies(&self.node_classes),
            pdbs: copies(&self.pdbs),
        }
    }

    /// The Node store.
    #[must_use]
    pub fn nodes(&self) -> &Store<Node> {
        &self.nodes
    }

    /// The Pod store.
    #[must_use]
    pub fn pods(&self) -> &Store<Pod> {
        &self.pods
    }

    /// The NodeClaim store.
    #[must_use]
    pub fn node_claims(&self) -> &Store<NodeClaim> {
        &self.node_claims
    }

    /// The NodePool store.
    #[must_use]
    pub fn node_pools(&self) -> &Store<NodePool> {
        &self.node_pools
    }

    /// The ClusterAPINodeClass store.
    #[must_use]
    pub fn node_classes(&self) -> &Store<ClusterAPINodeClass> {
        &self.node_classes
    }

    /// The PodDisruptionBudget store.
    #[must_use]
    pub fn pdbs(&self) -> &Store<PodDisruptionBudget> {
        &self.pdbs
    }

    /// The last time a pod arrived on or left `node`, as this process saw it
    /// ([`pod_events`]); forgets nodes that are gone.
    #[must_use]
    pub fn last_pod_event(&self, node: &str) -> Option<Timestamp> {
        let events = self
            .pod_events
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        events.last(node)
    }

    /// Forgets the pod events of nodes for which `exists` is false.
    pub fn forget_pod_events(&self, exists: impl Fn(&str) -> bool) {
        self.pod_events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain_nodes(exists);
    }

    /// Ticks on every watch event.
    #[must_use]
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changes.clone()
    }

    fn buffers(&self) -> std::sync::MutexGuard<'_, buffers::Buffers> {
        self.buffers.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Replaces the CapacityBuffers' virtual pods (gate `CapacityBuffer`).
    pub fn set_buffer_pods(&self, pods: Vec<Pod>) {
        let changed = self.buffers().set_pods(pods);
        if changed {
            self.buffer_pod_changes
                .send_modify(|n| *n = n.wrapping_add(1));
        }
    }

    /// Ticks when the virtual pods change (the provisioner runs for them).
    #[must_use]
    pub fn buffer_pod_changes(&self) -> watch::Receiver<u64> {
        self.buffer_pod_changes.subscribe()
    }

    /// Every CapacityBuffer virtual pod (none without the gate).
    #[must_use]
    pub fn buffer_pods(&self) -> Arc<Vec<Pod>> {
        self.buffers().pods()
    }

    /// Records where a provisioning pass put the virtual pods.
    pub fn buffer_pods_placed(
        &self,
        placements: std::collections::BTreeMap<String, buffers::Placement>,
        hosts: std::collections::BTreeMap<String, usize>,
    ) {
        let changed = self.buffers().placed(placements, hosts);
        if changed {
            self.buffer_changes.send_modify(|n| *n = n.wrapping_add(1));
        }
    }

    /// The last provisioning pass's placement of a buffer's virtual pods (`namespace/name`).
    #[must_use]
    pub fn buffer_placement(&self, buffer: &str) -> Option<buffers::Placement> {
        self.buffers().placement(buffer)
    }

    /// How many virtual pods the last provisioning pass put on `node` (emptiness leaves such
    /// a node alone).
    #[must_use]
    pub fn buffer_pods_on(&self, node: &str) -> usize {
        self.buffers().hosts(node)
    }

    /// Ticks when a provisioning pass recorded where the virtual pods went.
    #[must_use]
    pub fn buffer_changes(&self) -> watch::Receiver<u64> {
        self.buffer_changes.subscribe()
    }
}
