//! The provisioner: the singleton loop that turns pending pods into NodeClaims (spec §3.2–3.18).
//!
//! Responsibility, per batch window ([`super::batcher`]):
//! 1. wait for the cluster state's synced gate ([`state::ClusterState::synced`]);
//! 2. snapshot the state; NodePools that are `Ready`, not being deleted, not static and of our
//!    NodeClass kind get their instance types from the CloudProvider
//!    ([`CloudProvider::get_instance_types`]); a pool whose call fails or returns none is
//!    skipped for this loop;
//! 3. provisionable pods ([`inputs::provisionable`]) are validated ([`inputs::validate_pod`]);
//!    ignored pods get a `FailedScheduling` Warning (except those avoiding Karpenter on
//!    purpose); the reschedulable pods of nodes being deleted ([`inputs::leaving`]) are
//!    scheduled with them, off their node, so their new place is launched while the node
//!    drains (no Events for them: they are not pending yet);
//! 4. the engine solves on a blocking thread;
//! 5. new NodeClaims are created in parallel ([`super::node_claim`]) and recorded in the state
//!    (so the gate waits until the cache shows them); their pods get a `Nominated` Event;
//!    existing nodes that receive pods are nominated for `max(2 × batch max, 10 s)`; pods that
//!    fit nowhere get `FailedScheduling` with the engine's reason (deduplicated 5 min per pod).
//!
//! CapacityBuffer virtual pods (gate `CapacityBuffer`, [`crate::capacitybuffer`]) are scheduled
//! with the pending pods, after every real pod: they get no Events and nominate nothing, a
//! NodeClaim is created for the ones that fit only on a new node, and where each buffer's went
//! (existing nodes, new NodeClaims, nowhere) is recorded in the state for the buffer's status
//! and for disruption, which leaves the nodes hosting them to consolidation, not emptiness. A
//! change of the virtual pods starts a pass like a trigger does.
//!
//! Every 10 s without a trigger the loop also runs when provisionable pods exist (upstream's
//! per-pod requeue; the pods of deleting nodes count too) or virtual pods do (room they had
//! may have been taken by pods the kube-scheduler placed directly). Decisions are kept as [`Decision`]
//! values for `simulate` and `bench e2e`. Not done: volume topology, DRA.
//!
//! Inputs: triggers, [`ClusterState`], a [`CloudProvider`]. Outputs: NodeClaims, Events,
//! metrics, decisions.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use api::common::Conditions;
use api::well_known::conditions::READY;
use api::well_known::events::FAILED_SCHEDULING;
use api::{NodeClaim, NodePool};
use cloudprovider::CloudProvider;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use kube::api::{Api, PostParams};
use kube::{Resource, ResourceExt};
use scheduling::instance_type::MinValuesPolicy;
use scheduling::labels::WellKnownLabels;
use scheduling::scheduler::{Options, PreferencePolicy, Results, Scheduler};
use state::{ClusterState, PodPredicate, Trigger};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::batcher::{BatchConfig, Batcher};
use super::inputs::{self, ClusterObjects, IgnoreReason};
use super::node_claim::{PoolHash, node_claim};
use crate::events::{Events, Message, NOMINATION_LIMIT};
use crate::metrics::{ControllerLabels, CreatedLabels, Metrics};

/// `Nominated` (Normal, on pods).
pub use api::well_known::events::NOMINATED;

/// A `Nominated` Event as upstream sends it: one per pod per dedupe window whatever the
/// target (a pod re-nominated in a later loop gets no second Event), within the global
/// nomination rate limit.
fn nomination(note: String) -> Message {
    Message::normal(NOMINATED, note)
        .dedupe_by_object()
        .rate_limited(NOMINATION_LIMIT)
}
/// How often pending pods re-trigger provisioning.
pub const RETRIGGER: Duration = Duration::from_secs(10);
const FAILED_SCHEDULING_DEDUPE: Duration = Duration::from_secs(300);

/// Settings of the provisioner.
#[derive(Debug, Clone)]
pub struct ProvisionerConfig {
    /// The batching window.
    pub batch: BatchConfig,
    /// `PREFERENCE_POLICY`.
    pub preference_policy: PreferencePolicy,
    /// `MIN_VALUES_POLICY`.
    pub min_values_policy: MinValuesPolicy,
    /// NodeClaims created at once.
    pub create_concurrency: usize,
}

impl Default for ProvisionerConfig {
    fn default() -> Self {
        Self {
            batch: BatchConfig::default(),
            preference_policy: PreferencePolicy::Respect,
            min_values_policy: MinValuesPolicy::Strict,
            create_concurrency: 16,
        }
    }
}

/// What one loop decided.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// When the window opened (first trigger), if triggered.
    pub window_opened: Option<Instant>,
    /// When the loop finished.
    pub finished: Instant,
    /// Provisionable pods considered.
    pub pods: usize,
    /// NodeClaims created (names).
    pub node_claims: Vec<String>,
    /// Pods planned onto new NodeClaims.
    pub pods_on_new: usize,
    /// Pods planned onto existing nodes.
    pub pods_on_existing: usize,
    /// Pods that fit nowhere (incl. ignored ones).
    pub unschedulable: usize,
    /// CapacityBuffer virtual pods scheduled with them (not counted above).
    pub buffer_pods: usize,
    /// Time spent in the engine.
    pub solve: Duration,
}

/// Why a loop failed (it is retried on the next trigger).
#[derive(Debug, thiserror::Error)]
pub enum ProvisionError {
    /// The engine's blocking task died.
    #[error("scheduling task failed: {0}")]
    Solve(String),
}

/// The trigger channel and the pod predicate to give [`state::StateConfig`].
#[must_use]
pub fn trigger_channel() -> (
    mpsc::UnboundedSender<Trigger>,
    mpsc::UnboundedReceiver<Trigger>,
    PodPredicate,
) {
    let (tx, rx) = mpsc::unbounded_channel();
    (tx, rx, Arc::new(inputs::provisionable))
}

/// The provisioner.
pub struct Provisioner<P> {
    client: kube::Client,
    provider: Arc<P>,
    state: Arc<ClusterState>,
    events: Events,
    metrics: Arc<Metrics>,
    config: ProvisionerConfig,
    well_known: WellKnownLabels,
    hash: fn(&NodePool) -> PoolHash,
    decisions: Arc<Mutex<Vec<Decision>>>,
}

impl<P> std::fmt::Debug for Provisioner<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Provisioner")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// A NodePool the provisioner (and disruption) plans with: `Ready`, not being deleted, not
/// static, of our NodeClass kind.
pub(crate) fn ready(pool: &NodePool) -> bool {
    pool.metadata.deletion_timestamp.is_none()
        && !pool.spec.is_static()
        && inputs::node_class_of(pool).is_some()
        && pool
            .status
            .as_ref()
            .is_some_and(|s| s.conditions.is_true(READY))
}

impl<P: CloudProvider + 'static> Provisioner<P> {
    /// A provisioner writing to `client` (the workload cluster). `hash` stamps new NodeClaims
    /// with their NodePool's hash.
    #[must_use]
    pub fn new(
        client: kube::Client,
        provider: Arc<P>,
        state: Arc<ClusterState>,
        events: Events,
        metrics: Arc<Metrics>,
        config: ProvisionerConfig,
        hash: fn(&NodePool) -> PoolHash,
    ) -> Self {
        Self {
            client,
            provider,
            state,
            events,
            metrics,
            config,
            well_known: WellKnownLabels::cluster_api(),
            hash,
            decisions: Arc::default(),
        }
    }

    /// Every decision so far (shared handle; keeps filling while [`Self::run`] runs).
    #[must_use]
    pub fn decisions(&self) -> Arc<Mutex<Vec<Decision>>> {
        Arc::clone(&self.decisions)
    }

    /// Runs the loop until `triggers` closes.
    pub async fn run(self, triggers: mpsc::UnboundedReceiver<Trigger>) {
        let mut batcher = Batcher::new(triggers, self.config.batch);
        let mut retrigger = tokio::time::interval(RETRIGGER);
        retrigger.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut buffers = self.state.buffer_pod_changes();
        loop {
            let opened = tokio::select! {
                batch = batcher.wait() => match batch {
                    Some(b) => Some(b.opened),
                    None => return,
                },
                _ = buffers.changed() => Some(Instant::now()),
                _ = retrigger.tick() => {
                    if !self.any_provisionable() {
                        continue;
                    }
                    None
                }
            };
            self.wait_synced().await;
            match self.provision(opened).await {
                Ok(d) if d.pods > 0 => tracing::info!(
                    pods = d.pods,
                    node_claims = d.node_claims.len(),
                    on_existing = d.pods_on_existing,
                    unschedulable = d.unschedulable,
                    solve_ms = d.solve.as_millis() as u64,
                    "provisioned"
                ),
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "provisioning failed"),
            }
        }
    }

    fn any_provisionable(&self) -> bool {
        if !self.state.buffer_pods().is_empty() {
            return true;
        }
        let pods = self.state.pods().state();
        if pods.iter().any(|p| inputs::provisionable(p)) {
            return true;
        }
        let (nodes, claims) = (self.state.nodes().state(), self.state.node_claims().state());
        let deleting =
            inputs::deleting_nodes(nodes.iter().map(|n| &**n), claims.iter().map(|c| &**c));
        !deleting.is_empty()
            && inputs::pods_leaving(pods.iter().map(|p| &**p), &deleting)
                .next()
                .is_some()
    }

    async fn wait_synced(&self) {
        let mut changes = self.state.changes();
        let mut logged = false;
        loop {
            match self.state.provisioning_synced() {
                Ok(()) => {
                    self.metrics.cluster_state_synced.set(1);
                    return;
                }
                Err(why) => {
                    self.metrics.cluster_state_synced.set(0);
                    if !logged {
                        tracing::debug!(%why, "waiting for cluster state");
                        logged = true;
                    }
                }
            }
            // Woken by any watch event; re-checked at least every second (the unseen grace).
            let _ = tokio::time::timeout(Duration::from_secs(1), changes.changed()).await;
        }
    }

    /// One provisioning pass over the current state.
    ///
    /// # Errors
    /// [`ProvisionError`] when the engine's task fails.
    pub async fn provision(&self, opened: Option<Instant>) -> Result<Decision, ProvisionError> {
        let snapshot = self.state.snapshot();
        self.metrics
            .cluster_state_node_count
            .set(i64::try_from(snapshot.nodes.len()).unwrap_or(i64::MAX));
        let pending: Vec<&Pod> = snapshot
            .pods
            .iter()
            .map(AsRef::as_ref)
            .filter(|p| inputs::provisionable(p))
            .collect();
        // Capacity before eviction: the pods of nodes being deleted need a place too.
        let deleting = inputs::deleting_nodes(&snapshot.nodes, &snapshot.node_claims);
        let leaving: Vec<&Pod> =
            inputs::pods_leaving(snapshot.pods.iter().map(AsRef::as_ref), &deleting).collect();
        let buffer_pods = self.state.buffer_pods();
        let mut decision = Decision {
            window_opened: opened,
            finished: Instant::now(),
            pods: pending.len() + leaving.len(),
            node_claims: Vec::new(),
            pods_on_new: 0,
            pods_on_existing: 0,
            unschedulable: 0,
            buffer_pods: buffer_pods.len(),
            solve: Duration::ZERO,
        };
        if buffer_pods.is_empty() {
            // No buffer (any more): no node hosts virtual pods.
            self.state
                .buffer_pods_placed(BTreeMap::new(), BTreeMap::new());
        }
        if pending.is_empty() && leaving.is_empty() && buffer_pods.is_empty() {
            self.metrics.ignored_pods.set(0);
            self.unschedulable_gauge(0);
            return Ok(decision);
        }
        let by_uid: HashMap<String, &Pod> = pending
            .iter()
            .map(|p| (p.uid().unwrap_or_default(), *p))
            .collect();

        let mut pools = Vec::new();
        for pool in snapshot.node_pools.iter().filter(|p| ready(p)) {
            match self.provider.get_instance_types(pool).await {
                Ok(its) if its.is_empty() => {
                    tracing::debug!(nodepool = %pool.name_any(), "no instance types");
                }
                Ok(its) => match inputs::scheduler_node_pool(pool, its, &self.well_known) {
                    Ok(p) => pools.push(p),
                    Err(e) => {
                        tracing::warn!(nodepool = %pool.name_any(), error = %e, "NodePool skipped")
                    }
                },
                Err(e) => {
                    tracing::warn!(nodepool = %pool.name_any(), error = %e, "instance types unavailable");
                }
            }
        }

        let (mut cluster, warnings) = inputs::cluster(&ClusterObjects {
            nodes: &snapshot.nodes,
            node_claims: &snapshot.node_claims,
            pods: &snapshot.pods,
            daemon_sets: &snapshot.daemon_sets,
            namespaces: &snapshot.namespaces,
        });
        for w in warnings {
            tracing::debug!(warning = %w, "cluster state object skipped");
        }
        // The leaving pods are scheduled afresh, so they no longer count where they are.
        let leaving_uids: std::collections::HashSet<&str> = leaving
            .iter()
            .filter_map(|p| p.metadata.uid.as_deref())
            .collect();
        cluster.pods.retain(|p| !leaving_uids.contains(&*p.uid));

        let mut pods = Vec::new();
        let mut ignored = 0_i64;
        for pod in &pending {
            match inputs::validate_pod(pod, &self.well_known) {
                Ok(p) => pods.push(p),
                Err(i) => {
                    ignored += 1;
                    if let IgnoreReason::Invalid(_) = i.reason {
                        self.events.publish(
                            *pod,
                            Message::warning(
                                FAILED_SCHEDULING,
                                format!("Failed to schedule pod, {}", i.reason),
                            )
                            .dedupe_for(FAILED_SCHEDULING_DEDUPE),
                        );
                    }
                }
            }
        }
        self.metrics.ignored_pods.set(ignored);
        for pod in &leaving {
            // Not pending yet: no Events for them if they are ignored or fit nowhere.
            if let Ok(mut p) = inputs::validate_pod(pod, &self.well_known) {
                p.node_name = None;
                p.terminal_or_terminating = false;
                pods.push(p);
            }
        }
        // Virtual pods last in the queue (`placeholder`); one the engine cannot read fits
        // nowhere (the buffer controller refuses such templates, so this is a race).
        let mut buffers = Buffered::default();
        for pod in buffer_pods.iter() {
            let Some(buffer) = crate::capacitybuffer::resolve::buffer_of(pod) else {
                continue;
            };
            buffers
                .placements
                .entry(buffer.clone())
                .or_default()
                .desired += 1;
            match inputs::validate_pod(pod, &self.well_known) {
                Ok(mut p) => {
                    p.placeholder = true;
                    buffers.of.insert(p.uid.clone(), buffer);
                    pods.push(p);
                }
                Err(_) => {
                    buffers.placements.entry(buffer).or_default().failed += 1;
                }
            }
        }

        let results = if pools.is_empty() {
            None
        } else {
            let options = Options {
                preference_policy: self.config.preference_policy,
                min_values_policy: self.config.min_values_policy,
                well_known: self.well_known.clone(),
                ..Options::default()
            };
            let started = Instant::now();
            let results = tokio::task::spawn_blocking(move || {
                Scheduler::new(&pools, &cluster, &pods, options).solve(&pods)
            })
            .await
            .map_err(|e| ProvisionError::Solve(e.to_string()))?;
            decision.solve = started.elapsed();
            self.metrics
                .scheduling_duration
                .get_or_create(&ControllerLabels {
                    controller: "provisioner".into(),
                })
                .observe(decision.solve.as_secs_f64());
            Some(results)
        };

        let Some(results) = results else {
            for pod in by_uid.values() {
                self.failed_scheduling(
                    pod,
                    "no dynamic nodepools found (none is Ready, or none offers instance types)",
                );
            }
            decision.unschedulable = pending.len();
            self.unschedulable_gauge(pending.len());
            for buffer in buffers.of.values() {
                buffers.placements.entry(buffer.clone()).or_default().failed += 1;
            }
            self.state
                .buffer_pods_placed(buffers.placements, BTreeMap::new());
            decision.finished = Instant::now();
            self.record(&decision);
            return Ok(decision);
        };

        let created = self.create(&results, &snapshot.node_pools, &by_uid).await;
        let real = |uid: &Arc<str>| !buffers.of.contains_key(uid);
        decision.pods_on_new = results
            .new_node_claims
            .iter()
            .flat_map(|nc| &nc.pods)
            .filter(|u| real(u))
            .count();
        self.nominate_existing(&results, &by_uid, &buffers);
        for e in &results.errors {
            if let Some(pod) = by_uid.get(e.uid.as_ref()) {
                self.failed_scheduling(pod, &e.message);
            }
        }
        decision.pods_on_existing = results
            .existing_nodes
            .iter()
            .flat_map(|b| &b.pods)
            .filter(|u| real(u))
            .count();
        let errors = results.errors.iter().filter(|e| real(&e.uid)).count();
        decision.unschedulable = errors + usize::try_from(ignored).unwrap_or(0);
        self.unschedulable_gauge(errors);
        if !buffer_pods.is_empty() {
            self.record_buffers(buffers, &results, &created);
        }
        decision.node_claims = created.into_iter().map(|(_, name)| name).collect();
        decision.node_claims.sort();
        decision.finished = Instant::now();
        self.record(&decision);
        Ok(decision)
    }

    fn record(&self, decision: &Decision) {
        let mut d = self
            .decisions
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if d.len() >= 10_000 {
            d.remove(0);
        }
        d.push(decision.clone());
    }

    fn unschedulable_gauge(&self, n: usize) {
        self.metrics
            .unschedulable_pods
            .get_or_create(&ControllerLabels {
                controller: "provisioner".into(),
            })
            .set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    fn failed_scheduling(&self, pod: &Pod, message: &str) {
        tracing::debug!(pod = %format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any()), %message, "pod not scheduled");
        self.events.publish(
            pod,
            Message::warning(
                FAILED_SCHEDULING,
                format!("Failed to schedule pod, {message}"),
            )
            .dedupe_for(FAILED_SCHEDULING_DEDUPE)
            .dedupe_by(pod.uid().unwrap_or_default()),
        );
    }

    /// Records where the virtual pods went: per buffer, and per node or new NodeClaim (by
    /// name) how many it hosts.
    fn record_buffers(
        &self,
        mut buffers: Buffered,
        results: &Results,
        created: &[(usize, String)],
    ) {
        let mut hosts: BTreeMap<String, usize> = BTreeMap::new();
        for binding in &results.existing_nodes {
            for uid in &binding.pods {
                if let Some(buffer) = buffers.of.get(uid) {
                    buffers
                        .placements
                        .entry(buffer.clone())
                        .or_default()
                        .existing += 1;
                    *hosts.entry(binding.node.to_string()).or_default() += 1;
                }
            }
        }
        for (i, planned) in results.new_node_claims.iter().enumerate() {
            let name = created.iter().find(|(j, _)| *j == i).map(|(_, n)| n);
            for uid in &planned.pods {
                if let Some(buffer) = buffers.of.get(uid) {
                    let p = buffers.placements.entry(buffer.clone()).or_default();
                    match name {
                        Some(name) => {
                            p.new += 1;
                            *hosts.entry(name.clone()).or_default() += 1;
                        }
                        // The create failed: the pod has no place yet.
                        None => p.failed += 1,
                    }
                }
            }
        }
        for e in &results.errors {
            if let Some(buffer) = buffers.of.get(&e.uid) {
                buffers.placements.entry(buffer.clone()).or_default().failed += 1;
            }
        }
        tracing::debug!(placements = ?buffers.placements, hosts = ?hosts, "CapacityBuffer pods placed");
        self.state.buffer_pods_placed(buffers.placements, hosts);
    }

    fn nominate_existing(
        &self,
        results: &Results,
        by_uid: &HashMap<String, &Pod>,
        buffers: &Buffered,
    ) {
        let window = (self.config.batch.max * 2).max(Duration::from_secs(10));
        // Virtual pods never nominate: a node that only they would use stays a candidate.
        for binding in results
            .existing_nodes
            .iter()
            .filter(|b| b.pods.iter().any(|u| !buffers.of.contains_key(u)))
        {
            self.state.nominate(&binding.node, window);
            for uid in &binding.pods {
                if let Some(pod) = by_uid.get(uid.as_ref()) {
                    self.events.publish(
                        *pod,
                        nomination(format!("Pod should schedule on: node/{}", binding.node)),
                    );
                }
            }
        }
    }

    /// Creates the planned NodeClaims; returns the names created, each with the index of its
    /// plan in `results.new_node_claims`.
    async fn create(
        &self,
        results: &Results,
        pools: &[NodePool],
        by_uid: &HashMap<String, &Pod>,
    ) -> Vec<(usize, String)> {
        let api: Api<NodeClaim> = Api::all(self.client.clone());
        let mut jobs = Vec::new();
        for (index, planned) in results.new_node_claims.iter().enumerate() {
            let Some(pool) = pools
                .iter()
                .find(|p| p.metadata.name.as_deref() == Some(planned.node_pool.as_ref()))
            else {
                continue;
            };
            let hash = (self.hash)(pool);
            let nc = match node_claim(planned, pool, &self.well_known, Some(&hash)) {
                Ok(nc) => nc,
                Err(e) => {
                    tracing::error!(error = %e, "NodeClaim not built");
                    continue;
                }
            };
            let types: Vec<&str> = planned
                .instance_types
                .iter()
                .take(5)
                .map(|it| it.name())
                .collect();
            let more = planned.instance_types.len().saturating_sub(types.len());
            jobs.push(CreateJob {
                index,
                api: api.clone(),
                nc,
                pool: pool.name_any(),
                min_values_relaxed: planned.min_values_relaxed,
                requests: planned.requests.to_string(),
                instance_types: if more > 0 {
                    format!("{} and {more} other(s)", types.join(", "))
                } else {
                    types.join(", ")
                },
                pods: planned
                    .pods
                    .iter()
                    .filter_map(|uid| by_uid.get(uid.as_ref()).map(|p| p.object_ref(&())))
                    .collect(),
                state: Arc::clone(&self.state),
                events: self.events.clone(),
                metrics: Arc::clone(&self.metrics),
            });
        }
        let created: Vec<Option<(usize, String)>> =
            futures::stream::iter(jobs.into_iter().map(CreateJob::run))
                .buffer_unordered(self.config.create_concurrency.max(1))
                .collect()
                .await;
        let mut names: Vec<(usize, String)> = created.into_iter().flatten().collect();
        names.sort();
        names
    }
}

/// The virtual pods of one pass: which buffer each stands for, and where they went.
#[derive(Debug, Default)]
struct Buffered {
    /// Virtual pod UID → buffer (`namespace/name`).
    of: HashMap<Arc<str>, String>,
    /// Per buffer, where its virtual pods went.
    placements: BTreeMap<String, state::buffers::Placement>,
}

/// One NodeClaim to create, with everything it needs owned (so creates run concurrently).
struct CreateJob {
    /// The plan's index in `results.new_node_claims`.
    index: usize,
    api: Api<NodeClaim>,
    nc: NodeClaim,
    pool: String,
    min_values_relaxed: bool,
    requests: String,
    instance_types: String,
    /// The pods it is planned for: references, not copies (at a thousand pods, copies were
    /// the largest part of a loop's memory).
    pods: Vec<ObjectReference>,
    state: Arc<ClusterState>,
    events: Events,
    metrics: Arc<Metrics>,
}

impl CreateJob {
    async fn run(self) -> Option<(usize, String)> {
        let created = match self.api.create(&PostParams::default(), &self.nc).await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(nodepool = %self.pool, error = %e, "NodeClaim not created");
                return None;
            }
        };
        let name = created.name_any();
        self.state.node_claim_created(&name);
        self.state.node_claim_planned(
            &name,
            self.pods.iter().filter_map(|p| p.uid.clone()).collect(),
        );
        self.metrics
            .nodeclaims_created
            .get_or_create(&CreatedLabels {
                reason: "provisioned".into(),
                nodepool: self.pool.clone(),
                min_values_relaxed: self.min_values_relaxed.to_string(),
            })
            .inc();
        tracing::info!(
            nodeclaim = %name,
            nodepool = %self.pool,
            requests = %self.requests,
            pods = self.pods.len(),
            instance_types = %self.instance_types,
            "created nodeclaim"
        );
        for pod in self.pods {
            self.events.publish_ref(
                pod,
                nomination(format!("Pod should schedule on: nodeclaim/{name}")),
            );
        }
        Some((self.index, name))
    }
}
