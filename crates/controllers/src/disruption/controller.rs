//! The disruption loop (spec §5.2): a singleton that runs on the leader.
//!
//! Responsibility, each pass:
//! 1. wait for the state's synced gate;
//! 2. clean up after interrupted commands: a managed Node tainted `karpenter.sh/disrupted`
//!    that is in no command of this process and is not being deleted gets the taint removed
//!    and its NodeClaim's `DisruptionReason` cleared (after a restart nothing stays cordoned);
//! 3. write each managed NodeClaim's `Consolidatable` and `Drifted` conditions and
//!    `status.lastPodEventTime` ([`super::consolidatable`], from the pod events the state saw;
//!    the time only for NodePools whose `consolidateAfter` is neither 0 nor Never, where it
//!    matters after a restart), only when they change;
//! 4. expiration (`expireAfter`: the NodeClaim is deleted, no budget), then StaticDrift for
//!    static NodePools ([`super::static_drift`]), then the methods in upstream's order —
//!    emptiness, drift, multi-node consolidation, single-node consolidation (static pools'
//!    nodes are never candidates of these) — each with its budget map; the first that decides
//!    a command acts: a
//!    consolidation command is validated again after the validation delay against a fresh
//!    snapshot (still candidates, still within budget, the same decision); then the command is
//!    carried out in its own task ([`super::orchestration`]) and the loop goes on (its nodes
//!    are in flight, so they are not candidates again);
//!    consolidation moves are scored for the NodePools they touch ([`super::balanced`]):
//!    `karpenter_consolidation_moves_total` per pool, `karpenter_consolidation_score` per
//!    Balanced pool, and a `ConsolidationApproved` Event on the Node and NodeClaim of each
//!    candidate a Balanced pool approved (multi-node's rejected binary-search probes are not
//!    counted: they are trials, not moves);
//!    the consolidation searches have upstream's time limits (multi-node 1 min, single-node
//!    3 min; `karpenter_voluntary_disruption_consolidation_timeouts_total`), so expiration
//!    and drift never wait behind them for longer, and the NodePools a timed-out single-node
//!    search did not reach go first in the next one;
//!    a NodePool whose budget for a method's reason allows nothing gets a `DisruptionBlocked`
//!    Event ("No allowed disruptions for disruption reason … due to blocking budget", deduped
//!    for 5 minutes), as upstream publishes it; its nodes do not each get one;
//!    a watchdog logs an error when no pass finished for 15 minutes;
//! 5. without a command, the next pass comes after the poll interval or the next change of
//!    the state, whichever is later.
//!
//! Every decision is kept as a [`Record`] for `simulate` and `bench`.
//!
//! Parts: `upkeep` (clean-up, expiration, conditions), `inputs` (world, candidates of a class, floors,
//! budgets), `start` (validation and start of a command), `reporting` (metrics and Events),
//! `watchdog` (the 15-minute stall log); this file holds the loop and the pass.
//!
//! Inputs: [`ClusterState`], a [`CloudProvider`] (instance types and prices). Outputs:
//! commands carried out, conditions, Events, metrics, records.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use api::common::{ConditionStatus, Conditions};
use api::nodepool::DisruptionReason;
use api::well_known::conditions::{CONSOLIDATABLE, DISRUPTION_REASON, DRIFTED, LAUNCHED};
use api::well_known::events::{
    CONSOLIDATION_APPROVED, CONSOLIDATION_CANDIDATE, CONSOLIDATION_REJECTED, DISRUPTION_BLOCKED,
    UNCONSOLIDATABLE,
};
use api::{NodeClaim, NodePool};
use cloudprovider::CloudProvider;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use scheduling::instance_type::{InstanceType, MinValuesPolicy};
use scheduling::labels::{NODE_POOL, WellKnownLabels};
use scheduling::scheduler::PreferencePolicy;
use state::{ClusterState, Snapshot};
use tokio::time::Instant;

use super::balanced::PoolScore;
use super::budget_map::{BudgetMap, budget_map};
use super::candidates::{Blocked, Candidate, Class, Inputs, candidates, is_ours};
use super::consolidatable::{self, Consolidation};
use super::drift;
use super::floors::Floors;
use super::methods::{self, Command, Decision, Method, reason_name};
use super::orchestration::{Orchestrator, Outcome};
use super::simulation::{Objects, World};
use super::static_drift::{PoolCount, static_drift};
use super::validation;
use super::writes;
use crate::clock::Clock;
use crate::events::{Events, Message};
use crate::metrics::{
    ConsolidationTypeLabels, EvaluationLabels, Metrics, PoolReasonLabels, ReasonLabels, ScoreLabels,
};
use crate::provisioning::inputs::ClusterObjects;
use crate::provisioning::node_claim::PoolHash;
use crate::provisioning::provisioner::ready;

mod inputs;
mod reporting;
mod start;
#[cfg(test)]
mod tests;
mod upkeep;
mod watchdog;

use watchdog::{AbortOnDrop, STALLED_AFTER, watch_passes};

/// Settings of the disruption loop.
#[derive(Debug, Clone)]
pub struct DisruptionConfig {
    /// The pause after a pass that did nothing (upstream: 10 s).
    pub poll: Duration,
    /// The wait before a consolidation command is validated again (upstream: 15 s).
    pub validation_delay: Duration,
    /// How long replacements may take to initialize before the command is rolled back.
    pub replacement_timeout: Duration,
    /// How often the provider is asked whether a NodeClaim drifted. Upstream asks every 5 min;
    /// the Cluster API provider answers from its Machine, MachineSet and MachineDeployment
    /// watches (no request), so asking every poll-and-a-half notices a template change or a
    /// rollout Cluster API started within seconds.
    pub drift_recheck: Duration,
    /// Whether consolidation may replace spot nodes by spot nodes (gate
    /// `SpotToSpotConsolidation`, off by default as upstream).
    pub spot_to_spot: bool,
}

impl Default for DisruptionConfig {
    fn default() -> Self {
        Self {
            poll: Duration::from_secs(10),
            validation_delay: Duration::from_secs(15),
            replacement_timeout: Duration::from_secs(600),
            drift_recheck: Duration::from_secs(15),
            spot_to_spot: false,
        }
    }
}

/// One decision, as `simulate` and `bench` report it.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// When it was decided.
    pub at: Instant,
    /// The method.
    pub method: Method,
    /// Delete or replace.
    pub decision: Decision,
    /// The nodes removed.
    pub nodes: Vec<String>,
    /// The replacements' cheapest instance types.
    pub replacements: Vec<String>,
    /// Price per hour saved.
    pub savings: f64,
    /// Time to compute it.
    pub computed: Duration,
    /// `None` while running; then whether it went through.
    pub outcome: Option<Result<(), String>>,
}

/// The disruption controller.
pub struct Disruption<P> {
    client: kube::Client,
    provider: Arc<P>,
    state: Arc<ClusterState>,
    events: Events,
    metrics: Arc<Metrics>,
    config: DisruptionConfig,
    well_known: WellKnownLabels,
    orchestrator: Orchestrator,
    records: Arc<Mutex<Vec<Record>>>,
    idle: Arc<AtomicU64>,
    passes: Arc<AtomicU64>,
    /// The last pass saw a node blocked for a reason that passes by itself.
    transient: std::sync::atomic::AtomicBool,
    /// The consolidation state in which consolidation last found nothing to do.
    unchanged: Mutex<Option<u64>>,
    /// The NodePools the last timed-out single-node search did not reach (taken first next).
    unreached: Mutex<BTreeSet<String>>,
    /// The provider's last drift answer per NodeClaim UID, and when it was asked.
    provider_drift: Mutex<BTreeMap<String, (Instant, Option<String>)>>,
    /// The provisioner's scheduling policies: a simulation here must place pods as the
    /// provisioner would (`--preference-policy`, `--min-values-policy`).
    policies: (PreferencePolicy, MinValuesPolicy),
    /// "Now" for expiry, `consolidateAfter` and conditions: wall time that moves with tokio's
    /// clock (a paused test clock too).
    clock: Clock,
}

impl<P> std::fmt::Debug for Disruption<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Disruption")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A hash of everything consolidation's answer depends on: the nodes and their taints, where
/// each pod is (or that it is pending), the candidates and whether each is consolidatable, the
/// NodePools and PDBs (by resourceVersion), the budgets left, and the instance types' offerings.
fn fingerprint(
    snapshot: &Snapshot,
    candidates: &[Candidate],
    budgets: &BudgetMap,
    its: &BTreeMap<String, Vec<Arc<InstanceType>>>,
    buffer_pods: &[k8s_openapi::api::core::v1::Pod],
) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for p in buffer_pods {
        p.metadata.uid.hash(&mut h);
        format!("{:?}", p.spec).hash(&mut h);
    }
    for n in &snapshot.nodes {
        n.metadata.name.hash(&mut h);
        writes::is_tainted(n).hash(&mut h);
        n.metadata.deletion_timestamp.is_some().hash(&mut h);
    }
    for p in &snapshot.pods {
        p.metadata.uid.hash(&mut h);
        p.spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .hash(&mut h);
        p.metadata.deletion_timestamp.is_some().hash(&mut h);
    }
    for c in candidates {
        c.node.hash(&mut h);
        c.consolidation.is_consolidatable().hash(&mut h);
        c.buffer_pods.hash(&mut h);
    }
    for p in &snapshot.node_pools {
        p.metadata.resource_version.hash(&mut h);
    }
    for p in &snapshot.pdbs {
        p.metadata.resource_version.hash(&mut h);
    }
    for (pool, b) in &budgets.pools {
        pool.hash(&mut h);
        b.remaining.hash(&mut h);
    }
    budgets.groups.hash(&mut h);
    for (pool, list) in its {
        pool.hash(&mut h);
        for it in list {
            it.name().hash(&mut h);
            for o in it.offerings().iter() {
                o.price.to_bits().hash(&mut h);
                o.available.hash(&mut h);
            }
        }
    }
    h.finish()
}

/// Dedupe window of `DisruptionBlocked` / `Unconsolidatable` Events per object and message.
const EVENT_DEDUPE: Duration = Duration::from_secs(300);

impl<P: CloudProvider + 'static> Disruption<P> {
    /// A disruption loop writing to `client` (the workload cluster). `hash` stamps replacements
    /// with their NodePool's hash.
    #[must_use]
    pub fn new(
        client: kube::Client,
        provider: Arc<P>,
        state: Arc<ClusterState>,
        events: Events,
        metrics: Arc<Metrics>,
        config: DisruptionConfig,
        hash: fn(&NodePool) -> PoolHash,
    ) -> Self {
        let well_known = WellKnownLabels::cluster_api();
        let orchestrator = Orchestrator {
            client: client.clone(),
            state: Arc::clone(&state),
            events: events.clone(),
            metrics: Arc::clone(&metrics),
            in_flight: Arc::default(),
            hash,
            well_known: well_known.clone(),
            replacement_timeout: config.replacement_timeout,
            commands: Arc::default(),
        };
        Self {
            client,
            provider,
            state,
            events,
            metrics,
            config,
            well_known,
            orchestrator,
            records: Arc::default(),
            idle: Arc::default(),
            passes: Arc::default(),
            transient: std::sync::atomic::AtomicBool::default(),
            unchanged: Mutex::default(),
            unreached: Mutex::default(),
            provider_drift: Mutex::default(),
            policies: (PreferencePolicy::Respect, MinValuesPolicy::Strict),
            clock: Clock::new(),
        }
    }

    /// Simulate with the provisioner's policies (default: Respect, Strict): with
    /// `MinValuesPolicy::BestEffort`, a pool the provisioner can launch for is also one
    /// consolidation and drift can replace into.
    #[must_use]
    pub fn with_policies(
        mut self,
        preference: PreferencePolicy,
        min_values: MinValuesPolicy,
    ) -> Self {
        self.policies = (preference, min_values);
        self
    }

    /// Every decision so far (shared handle).
    #[must_use]
    pub fn records(&self) -> Arc<Mutex<Vec<Record>>> {
        Arc::clone(&self.records)
    }

    /// Shared counters: (passes so far, consecutive passes that started no command while none
    /// was in flight and no node was held by a reason that passes by itself). `simulate` waits on them for the cluster to settle.
    #[must_use]
    pub fn pass_counters(&self) -> (Arc<AtomicU64>, Arc<AtomicU64>) {
        (Arc::clone(&self.passes), Arc::clone(&self.idle))
    }

    /// Runs until dropped.
    pub async fn run(self) {
        let this = Arc::new(self);
        let watchdog = tokio::spawn(watch_passes(Arc::clone(&this.passes), STALLED_AFTER));
        let _stop = AbortOnDrop(watchdog);
        loop {
            this.wait_synced().await;
            let acted = Arc::clone(&this).pass().await;
            let busy = !lock(&this.orchestrator.in_flight).is_empty()
                || this.transient.load(Ordering::Relaxed);
            this.passes.fetch_add(1, Ordering::Relaxed);
            if acted || busy {
                this.idle.store(0, Ordering::Relaxed);
            } else {
                this.idle.fetch_add(1, Ordering::Relaxed);
            }
            if !acted {
                tokio::time::sleep(this.config.poll).await;
            }
        }
    }

    async fn wait_synced(&self) {
        let mut changes = self.state.changes();
        while self.state.synced().is_err() {
            let _ = tokio::time::timeout(Duration::from_secs(1), changes.changed()).await;
        }
    }

    async fn instance_types(&self, pools: &[NodePool]) -> BTreeMap<String, Vec<Arc<InstanceType>>> {
        let mut out = BTreeMap::new();
        // Static pools too: their nodes drift (StaticDrift) though they are never consolidated.
        for pool in pools
            .iter()
            .filter(|p| ready(p) || crate::static_capacity::managed(p))
        {
            match self.provider.get_instance_types(pool).await {
                // An empty list is kept: every instance type of the pool is gone (drift).
                Ok(its) => {
                    out.insert(pool.name_any(), its);
                }
                Err(e) => {
                    tracing::debug!(nodepool = %pool.name_any(), error = %e, "instance types unavailable for disruption");
                }
            }
        }
        out
    }

    /// One pass; whether a command started.
    async fn pass(self: Arc<Self>) -> bool {
        let snapshot = self.state.snapshot();
        let now = self.clock.now();
        self.clean_up(&snapshot).await;
        let expired = self.expire(&snapshot, now).await;
        let its = self.instance_types(&snapshot.node_pools).await;
        self.write_conditions(&snapshot, &its, now).await;
        // The nodes of NodeClaims just expired count as in flight: this snapshot does not show
        // them deleting yet, and drift or consolidation must not take them a second time.
        let mut in_flight = lock(&self.orchestrator.in_flight).clone();
        in_flight.extend(expired);
        let floors = self.floors(&snapshot, &in_flight).await;
        let (cands, blocked) =
            self.candidates_of(&snapshot, &its, &in_flight, &floors, now, Class::Graceful);
        // A static pool's nodes are only ever replaced when drifted (StaticDrift, below).
        let cands: Vec<Candidate> = cands
            .into_iter()
            .filter(|c| !is_static(&snapshot, &c.node_pool))
            .collect();
        self.report_blocked(&snapshot, &blocked);
        self.transient
            .store(blocked.iter().any(|b| b.transient), Ordering::Relaxed);
        self.metrics
            .disruption_eligible_nodes
            .get_or_create(&ReasonLabels {
                reason: "empty".into(),
            })
            .set(i64::try_from(cands.iter().filter(|c| c.is_empty()).count()).unwrap_or(0));
        self.metrics
            .disruption_eligible_nodes
            .get_or_create(&ReasonLabels {
                reason: "underutilized".into(),
            })
            .set(i64::try_from(cands.iter().filter(|c| !c.is_empty()).count()).unwrap_or(0));
        tracing::debug!(
            candidates = cands.len(),
            blocked = blocked.len(),
            in_flight = in_flight.len(),
            "disruption pass"
        );
        let drifted = snapshot.node_claims.iter().any(|nc| {
            nc.status
                .as_ref()
                .is_some_and(|s| s.conditions.is_true(api::well_known::conditions::DRIFTED))
        });
        // A node only virtual pods use is the buffer's warm room, not empty (upstream's
        // Unconsolidatable "has buffer pods").
        for c in cands
            .iter()
            .filter(|c| c.buffer_pods > 0 && c.is_empty() && c.consolidation.is_consolidatable())
        {
            self.event_on_node(
                &c.node,
                Message::normal(
                    UNCONSOLIDATABLE,
                    format!("Node {:?} has buffer pods", c.node),
                )
                .dedupe_for(EVENT_DEDUPE),
            );
        }
        // Upstream's order: emptiness (nothing to move), static drift, drift, consolidation.
        if !cands.is_empty() {
            let mut budgets = self.budgets(&snapshot, &in_flight, DisruptionReason::Empty, now);
            budgets.groups.clone_from(floors.rooms());
            let started = Instant::now();
            let empty = methods::emptiness(&cands, &mut budgets);
            self.observe("emptiness", Method::Emptiness, started);
            if let Some(cmd) = empty {
                return self
                    .validate_and_start(cmd, snapshot.node_pools.clone())
                    .await;
            }
        }
        if drifted
            && self
                .static_drift(&snapshot, &its, &in_flight, &floors, now)
                .await
        {
            return true;
        }
        // Drift runs on the eventual class (below): nothing gracefully disruptable — every
        // node held by a PDB, a do-not-disrupt pod or a min size — does not stop it.
        if cands.is_empty() && !drifted {
            return false;
        }

        // Drift (eventual: pod-level blocks do not hold NodeClaims with a terminationGracePeriod;
        // no validation delay).
        if drifted {
            let (eventual, _) =
                self.candidates_of(&snapshot, &its, &in_flight, &floors, now, Class::Eventual);
            let eventual: Vec<Candidate> = eventual
                .into_iter()
                .filter(|c| !is_static(&snapshot, &c.node_pool))
                .collect();
            let mut budgets = self.budgets(&snapshot, &in_flight, DisruptionReason::Drifted, now);
            let this = Arc::clone(&self);
            let (snap, types) = (snapshot.clone(), its.clone());
            let computed = tokio::task::spawn_blocking(move || {
                let world = this.world(&snap, &types, now);
                let started = Instant::now();
                let out = methods::drift(&world, &eventual, &mut budgets);
                this.observe("drift", Method::Drift, started);
                out
            })
            .await;
            if let Ok((cmd, reasons)) = computed {
                for r in reasons
                    .into_iter()
                    .filter(|r| !methods::is_budget_blocked(&r.reason))
                {
                    tracing::debug!(node = %r.node, reason = %r.reason, "drifted node not replaced yet");
                    self.event_on_node(
                        &r.node,
                        Message::normal(DISRUPTION_BLOCKED, r.reason).dedupe_for(EVENT_DEDUPE),
                    );
                }
                if let Some(cmd) = cmd {
                    return self
                        .validate_and_start(cmd, snapshot.node_pools.clone())
                        .await;
                }
            }
        }

        // Consolidation.
        let any_underutilized = cands
            .iter()
            .any(|c| methods::underutilized(c, &snapshot.node_pools).is_ok());
        if !any_underutilized {
            return false;
        }
        let mut budgets = self.budgets(&snapshot, &in_flight, DisruptionReason::Underutilized, now);
        budgets.groups.clone_from(floors.rooms());
        // Upstream's "consolidation state": nothing that could change the answer changed since
        // consolidation last found nothing, so the simulations are not run again.
        let state = fingerprint(&snapshot, &cands, &budgets, &its, &self.state.buffer_pods());
        if *lock(&self.unchanged) == Some(state) {
            return false;
        }
        let this = Arc::clone(&self);
        let pools = snapshot.node_pools.clone();
        let computed = tokio::task::spawn_blocking(move || {
            let world = this.world(&snapshot, &its, now);
            let started = Instant::now();
            let deadline = started + methods::MULTI_NODE_TIMEOUT;
            let (multi, timed_out) =
                methods::multi_node_within(&world, &cands, &snapshot.node_pools, &budgets, &|| {
                    Instant::now() >= deadline
                });
            this.observe("consolidation", Method::MultiNode, started);
            if timed_out {
                this.timed_out(Method::MultiNode);
            }
            if let Some(cmd) = multi {
                return (Some(cmd), Vec::new());
            }
            let started = Instant::now();
            let deadline = started + methods::SINGLE_NODE_TIMEOUT;
            let first = lock(&this.unreached).clone();
            let single = methods::single_node_within(
                &world,
                &cands,
                &snapshot.node_pools,
                &budgets,
                methods::Limits {
                    expired: &|| Instant::now() >= deadline,
                    first: &first,
                },
            );
            this.observe("consolidation", Method::SingleNode, started);
            if single.timed_out {
                this.timed_out(Method::SingleNode);
            }
            *lock(&this.unreached) = single.unreached;
            (single.command, single.reasons)
        })
        .await;
        let (cmd, reasons) = match computed {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, "consolidation computation failed");
                return false;
            }
        };
        for r in reasons.iter().filter(|r| !r.scores.is_empty()) {
            self.report_scores(&r.scores, false);
        }
        if let Some(cmd) = &cmd {
            self.report_scores(&cmd.scores, true);
            self.approved_events(cmd);
        }
        for r in reasons
            .into_iter()
            .filter(|r| !methods::is_budget_blocked(&r.reason))
        {
            tracing::debug!(node = %r.node, reason = %r.reason, "not consolidated");
            self.event_on_node(
                &r.node,
                Message::normal(UNCONSOLIDATABLE, r.reason).dedupe_for(EVENT_DEDUPE),
            );
        }
        match cmd {
            Some(cmd) => self.validate_and_start(cmd, pools).await,
            None => {
                *lock(&self.unchanged) = Some(state);
                false
            }
        }
    }

    /// StaticDrift ([`super::static_drift`]): whether a replacement of a static pool's drifted
    /// node started.
    async fn static_drift(
        self: &Arc<Self>,
        snapshot: &Snapshot,
        its: &BTreeMap<String, Vec<Arc<InstanceType>>>,
        in_flight: &BTreeSet<String>,
        floors: &Floors,
        now: Timestamp,
    ) -> bool {
        if !snapshot.node_pools.iter().any(|p| p.spec.is_static()) {
            return false;
        }
        let (eventual, _) =
            self.candidates_of(snapshot, its, in_flight, floors, now, Class::Eventual);
        let statics: Vec<Candidate> = eventual
            .into_iter()
            .filter(|c| is_static(snapshot, &c.node_pool))
            .collect();
        if statics.iter().all(|c| c.drifted.is_none()) {
            return false;
        }
        let counts: BTreeMap<String, PoolCount> = snapshot
            .node_pools
            .iter()
            .filter(|p| p.spec.is_static())
            .map(|p| {
                let members = crate::static_capacity::members(snapshot, &p.name_any());
                (p.name_any(), crate::static_capacity::plan::count(&members))
            })
            .collect();
        let mut budgets = self.budgets(snapshot, in_flight, DisruptionReason::Drifted, now);
        let options = scheduling::scheduler::Options {
            well_known: self.well_known.clone(),
            ..scheduling::scheduler::Options::default()
        };
        let template = |pool: &NodePool| {
            let types = its
                .get(&pool.name_any())
                .cloned()
                .ok_or_else(|| "its instance types are unavailable".to_owned())?;
            let scheduler_pool =
                crate::provisioning::inputs::scheduler_node_pool(pool, types, &self.well_known)?;
            scheduling::scheduler::template_node_claim(&scheduler_pool, &options)
                .map_err(|d| d.reason)
        };
        let started = Instant::now();
        let (cmd, reasons) = static_drift(
            &statics,
            &snapshot.node_pools,
            &counts,
            &mut budgets,
            &template,
        );
        self.observe("drift", Method::Drift, started);
        for r in reasons
            .into_iter()
            .filter(|r| !methods::is_budget_blocked(&r.reason))
        {
            tracing::debug!(node = %r.node, reason = %r.reason, "drifted static node not replaced yet");
            self.event_on_node(
                &r.node,
                Message::normal(DISRUPTION_BLOCKED, r.reason).dedupe_for(EVENT_DEDUPE),
            );
        }
        match cmd {
            Some(cmd) => {
                self.validate_and_start(cmd, snapshot.node_pools.clone())
                    .await
            }
            None => false,
        }
    }
}

/// Whether `pool` names a static NodePool of the snapshot.
fn is_static(snapshot: &Snapshot, pool: &str) -> bool {
    snapshot
        .node_pools
        .iter()
        .any(|p| p.metadata.name.as_deref() == Some(pool) && p.spec.is_static())
}
