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
use crate::events::{Events, Message};
use crate::metrics::{
    ConsolidationTypeLabels, EvaluationLabels, Metrics, PoolReasonLabels, ReasonLabels, ScoreLabels,
};
use crate::provisioning::inputs::ClusterObjects;
use crate::provisioning::node_claim::PoolHash;
use crate::provisioning::provisioner::ready;

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
) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
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

/// How long without a finished pass before the loop says it is stuck (as upstream logs).
const STALLED_AFTER: Duration = Duration::from_secs(15 * 60);

/// Aborts a task when dropped (the watchdog ends with the loop).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Whether the pass counter moved lately: a stall begins when it has not moved for `after`,
/// and ends when it moves again. Pure (the watchdog feeds it).
#[derive(Debug)]
struct Stall {
    after: Duration,
    seen: u64,
    since: Instant,
    stalled: bool,
}

/// What [`Stall::observe`] noticed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StallChange {
    Began,
    Ended,
}

impl Stall {
    fn new(after: Duration, passes: u64, now: Instant) -> Self {
        Self {
            after,
            seen: passes,
            since: now,
            stalled: false,
        }
    }

    fn observe(&mut self, passes: u64, now: Instant) -> Option<StallChange> {
        if passes != self.seen {
            let was = self.stalled;
            (self.seen, self.since, self.stalled) = (passes, now, false);
            return was.then_some(StallChange::Ended);
        }
        if !self.stalled && now.duration_since(self.since) >= self.after {
            self.stalled = true;
            return Some(StallChange::Began);
        }
        None
    }
}

/// Logs an error once per stall when `passes` has not moved for `after` (a pass stuck on the
/// API, a sync gate that never opens), and an info line when passes resume.
async fn watch_passes(passes: Arc<AtomicU64>, after: Duration) {
    let tick = (after / 15).max(Duration::from_millis(10));
    let mut stall = Stall::new(after, passes.load(Ordering::Relaxed), Instant::now());
    loop {
        tokio::time::sleep(tick).await;
        match stall.observe(passes.load(Ordering::Relaxed), Instant::now()) {
            Some(StallChange::Began) => tracing::error!(
                minutes = after.as_secs() / 60,
                "no disruption pass finished for {} minutes",
                after.as_secs() / 60
            ),
            Some(StallChange::Ended) => tracing::info!("disruption passes resumed"),
            None => {}
        }
    }
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
        let now = Timestamp::now();
        self.clean_up(&snapshot).await;
        let expired = self.expire(&snapshot, now).await;
        let its = self.instance_types(&snapshot.node_pools).await;
        self.write_conditions(&snapshot, &its, now).await;
        // The nodes of NodeClaims just expired count as in flight: this snapshot does not show
        // them deleting yet, and drift or consolidation must not take them a second time.
        let mut in_flight = lock(&self.orchestrator.in_flight).clone();
        in_flight.extend(expired);
        let floors = self.floors(&snapshot, &in_flight).await;
        let (cands, blocked) = self.candidates(&snapshot, &its, &in_flight, &floors, now);
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
        let state = fingerprint(&snapshot, &cands, &budgets, &its);
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

    /// `karpenter_consolidation_moves_total` for each NodePool of a consolidation move
    /// (`approved`: the move was taken), and `karpenter_consolidation_score` for each Balanced
    /// one (labelled with the pool's own decision).
    fn report_scores(&self, scores: &[PoolScore], approved: bool) {
        let decision = |ok: bool| if ok { "approved" } else { "rejected" }.to_owned();
        for p in scores {
            let labels = ScoreLabels {
                decision: decision(approved),
                nodepool: p.pool.clone(),
                policy: p.policy.clone(),
            };
            self.metrics
                .consolidation_moves
                .get_or_create(&labels)
                .inc();
            if let Some(score) = p.score {
                tracing::debug!(nodepool = %p.pool, nodes = ?p.nodes, score = score.value(), approved = score.approved(), "balanced consolidation score");
                self.metrics
                    .consolidation_score
                    .get_or_create(&ScoreLabels {
                        decision: decision(score.approved()),
                        ..labels
                    })
                    .observe(score.value());
            }
        }
    }

    /// `ConsolidationApproved` on the Node and NodeClaim of each candidate of a Balanced
    /// NodePool in `cmd`, with the pool's score.
    fn approved_events(&self, cmd: &Command) {
        for p in &cmd.scores {
            let Some(score) = p.score else {
                continue;
            };
            for c in cmd.candidates.iter().filter(|c| p.nodes.contains(&c.node)) {
                self.on_candidate(c, &|| {
                    Message::normal(CONSOLIDATION_APPROVED, score.to_string())
                });
            }
        }
    }

    fn observe(&self, method: &str, m: Method, started: Instant) {
        self.metrics
            .disruption_evaluation_duration
            .get_or_create(&EvaluationLabels {
                method: method.into(),
                consolidation_type: m.label().into(),
            })
            .observe(started.elapsed().as_secs_f64());
    }

    fn world(
        &self,
        snapshot: &Snapshot,
        its: &BTreeMap<String, Vec<Arc<InstanceType>>>,
        now: Timestamp,
    ) -> World {
        let state = &self.state;
        let last = move |n: &str| state.last_pod_event(n);
        World::new(
            &Objects {
                cluster: ClusterObjects {
                    nodes: &snapshot.nodes,
                    node_claims: &snapshot.node_claims,
                    pods: &snapshot.pods,
                    daemon_sets: &snapshot.daemon_sets,
                    namespaces: &snapshot.namespaces,
                },
                node_pools: &snapshot.node_pools,
                pdbs: &snapshot.pdbs,
                instance_types: its,
                now,
                last_pod_event: Some(&last),
            },
            &self.well_known,
        )
        .with_policies(self.policies.0, self.policies.1)
        .with_spot_to_spot(self.config.spot_to_spot)
    }

    fn candidates(
        &self,
        snapshot: &Snapshot,
        its: &BTreeMap<String, Vec<Arc<InstanceType>>>,
        in_flight: &BTreeSet<String>,
        floors: &Floors,
        now: Timestamp,
    ) -> (Vec<Candidate>, Vec<Blocked>) {
        self.candidates_of(snapshot, its, in_flight, floors, now, Class::Graceful)
    }

    /// The minimum sizes of our nodes' groups: the provider's room per NodeClaim of ours with
    /// a node, less the NodeClaims already leaving (deleting, tainted, in flight).
    async fn floors(&self, snapshot: &Snapshot, in_flight: &BTreeSet<String>) -> Floors {
        let tainted: BTreeSet<&str> = snapshot
            .nodes
            .iter()
            .filter(|n| writes::is_tainted(n))
            .filter_map(|n| n.metadata.name.as_deref())
            .collect();
        let mut answers = BTreeMap::new();
        let mut leaving = BTreeSet::new();
        for nc in snapshot.node_claims.iter().filter(|nc| is_ours(nc)) {
            let Some(node) = nc.status.as_ref().and_then(|s| s.node_name.as_deref()) else {
                continue;
            };
            let name = nc.name_any();
            if nc.metadata.deletion_timestamp.is_some()
                || tainted.contains(node)
                || in_flight.contains(node)
            {
                leaving.insert(name.clone());
            }
            let answer = self
                .provider
                .removal_room(nc)
                .await
                .map_err(|e| e.to_string());
            answers.insert(name, answer);
        }
        Floors::new(answers, &leaving)
    }

    fn candidates_of(
        &self,
        snapshot: &Snapshot,
        its: &BTreeMap<String, Vec<Arc<InstanceType>>>,
        in_flight: &BTreeSet<String>,
        floors: &Floors,
        now: Timestamp,
        class: Class,
    ) -> (Vec<Candidate>, Vec<Blocked>) {
        let state = Arc::clone(&self.state);
        let nominated = move |n: &str| state.is_nominated(n);
        let state = Arc::clone(&self.state);
        let planned = move |claim: &str| state.planned_pods(claim);
        let state = Arc::clone(&self.state);
        let last = move |n: &str| state.last_pod_event(n);
        candidates(
            &Inputs {
                nodes: &snapshot.nodes,
                node_claims: &snapshot.node_claims,
                pods: &snapshot.pods,
                pdbs: &snapshot.pdbs,
                node_pools: &snapshot.node_pools,
                instance_types: its,
                in_flight,
                nominated: &nominated,
                planned: &planned,
                last_pod_event: &last,
                floors,
                now,
            },
            class,
        )
    }

    fn budgets(
        &self,
        snapshot: &Snapshot,
        in_flight: &BTreeSet<String>,
        reason: DisruptionReason,
        now: Timestamp,
    ) -> BudgetMap {
        let map = budget_map(
            &snapshot.nodes,
            &snapshot.node_claims,
            &snapshot.node_pools,
            in_flight,
            reason,
            now,
        );
        let name = reason_name(reason);
        for (pool, b) in &map.pools {
            let labels = PoolReasonLabels {
                nodepool: pool.clone(),
                reason: name.to_lowercase(),
            };
            self.metrics
                .nodepools_allowed_disruptions
                .get_or_create(&labels)
                .set(i64::from(b.allowed));
            self.metrics
                .nodepools_nodes_consuming_budgets
                .get_or_create(&labels)
                .set(i64::try_from(b.disrupting).unwrap_or(0));
        }
        for (pool, e) in &map.errors {
            tracing::warn!(nodepool = %pool, error = %e, "invalid disruption budget (allows nothing)");
        }
        // A budget that allows nothing is the NodePool's news, not each node's (as upstream).
        let blocked = map
            .pools
            .iter()
            .filter(|(_, b)| b.allowed <= 0 && b.nodes > 0)
            .map(|(pool, _)| pool);
        for pool in blocked {
            if let Some(np) = snapshot
                .node_pools
                .iter()
                .find(|p| p.metadata.name.as_deref() == Some(pool.as_str()))
            {
                self.events.publish(
                    np,
                    Message::normal(DISRUPTION_BLOCKED, methods::budget_blocked(reason))
                        .dedupe_for(EVENT_DEDUPE),
                );
            }
        }
        map
    }

    fn report_blocked(&self, snapshot: &Snapshot, blocked: &[Blocked]) {
        for b in blocked.iter().filter(|b| b.notable) {
            tracing::debug!(node = %b.node, reason = %b.reason, "disruption blocked");
            if let Some(node) = snapshot
                .nodes
                .iter()
                .find(|n| n.metadata.name.as_deref() == Some(&b.node))
            {
                self.events.publish(
                    node,
                    Message::normal(DISRUPTION_BLOCKED, b.reason.clone()).dedupe_for(EVENT_DEDUPE),
                );
            }
            if let Some(nc) = b.node_claim.as_deref().and_then(|name| {
                snapshot
                    .node_claims
                    .iter()
                    .find(|c| c.metadata.name.as_deref() == Some(name))
            }) {
                self.events.publish(
                    nc,
                    Message::normal(DISRUPTION_BLOCKED, b.reason.clone()).dedupe_for(EVENT_DEDUPE),
                );
            }
        }
    }

    /// Counts a consolidation search its time limit stopped, and says so.
    fn timed_out(&self, method: Method) {
        tracing::info!(method = ?method, "consolidation search stopped by its time limit");
        self.metrics
            .disruption_consolidation_timeouts
            .get_or_create(&ConsolidationTypeLabels {
                consolidation_type: method.label().into(),
            })
            .inc();
    }

    fn event_on_node(&self, node: &str, message: Message) {
        if let Some(n) = self
            .state
            .nodes()
            .get(&kube::runtime::reflector::ObjectRef::new(node))
        {
            self.events.publish(&*n, message);
        }
    }

    /// Publishes `reason` with `note` on every candidate's Node and NodeClaim.
    fn on_candidates(&self, cmd: &Command, reason: &'static str, note: &str) {
        for c in &cmd.candidates {
            self.on_candidate(c, &|| {
                Message::normal(reason, note.to_owned()).dedupe_for(EVENT_DEDUPE)
            });
        }
    }

    /// Publishes `message()` on the candidate's Node and NodeClaim.
    fn on_candidate(&self, c: &Candidate, message: &dyn Fn() -> Message) {
        self.event_on_node(&c.node, message());
        if let Some(nc) = self
            .state
            .node_claims()
            .get(&kube::runtime::reflector::ObjectRef::new(&c.node_claim))
        {
            self.events.publish(&*nc, message());
        }
    }

    /// Validates a command after the delay (consolidation and emptiness), then starts it.
    async fn validate_and_start(self: &Arc<Self>, cmd: Command, pools: Vec<NodePool>) -> bool {
        let consolidating = matches!(cmd.method, Method::SingleNode | Method::MultiNode);
        let summary = cmd.summary();
        if consolidating {
            self.on_candidates(&cmd, CONSOLIDATION_CANDIDATE, &summary);
        }
        let candidates = consolidating.then(|| cmd.clone());
        let cmd = match self.validate(cmd).await {
            Ok(cmd) => cmd,
            Err((method, why)) => {
                if let Some(candidates) = &candidates {
                    self.on_candidates(
                        candidates,
                        CONSOLIDATION_REJECTED,
                        &format!("{summary}: rejected at validation: {why}"),
                    );
                }
                tracing::info!(reason = %why, "disruption command abandoned at validation");
                self.metrics
                    .disruption_failed_validations
                    .get_or_create(&ConsolidationTypeLabels {
                        consolidation_type: method.label().into(),
                    })
                    .inc();
                return false;
            }
        };
        if !self.orchestrator.reserve(&cmd) {
            return false;
        }
        self.metrics
            .disruption_decisions
            .get_or_create(&crate::metrics::DecisionLabels {
                decision: cmd.decision().to_string(),
                reason: reason_name(cmd.reason()).to_lowercase(),
                consolidation_type: cmd.method.label().into(),
            })
            .inc();
        tracing::info!(
            method = ?cmd.method,
            decision = %cmd.decision(),
            nodes = ?cmd.nodes(),
            replacements = ?cmd.replacement_types(),
            savings = cmd.savings,
            computed_ms = cmd.took.as_millis() as u64,
            "disrupting node(s)"
        );
        let index = {
            let mut records = lock(&self.records);
            if records.len() >= 10_000 {
                records.remove(0);
            }
            records.push(Record {
                at: Instant::now(),
                method: cmd.method,
                decision: cmd.decision(),
                nodes: cmd.nodes(),
                replacements: cmd.replacement_types(),
                savings: cmd.savings,
                computed: cmd.took,
                outcome: None,
            });
            records.len() - 1
        };
        let orchestrator = self.orchestrator.clone();
        let records = Arc::clone(&self.records);
        tokio::spawn(async move {
            let outcome = orchestrator.execute(cmd, pools).await;
            let mut records = lock(&records);
            if let Some(r) = records.get_mut(index) {
                r.outcome = Some(match outcome {
                    Outcome::Deleted { .. } => Ok(()),
                    Outcome::RolledBack(why) => Err(why),
                });
            }
        });
        true
    }

    /// After the validation delay, against a fresh snapshot ([`validation`]): emptiness keeps
    /// the candidates still empty within a fresh budget; consolidation needs all of them, a
    /// fresh simulation deciding the same, and the Balanced pools' approval again.
    async fn validate(self: &Arc<Self>, cmd: Command) -> Result<Command, (Method, String)> {
        let method = cmd.method;
        if method == Method::Drift {
            return Ok(cmd);
        }
        tokio::time::sleep(self.config.validation_delay).await;
        self.wait_synced().await;
        let snapshot = self.state.snapshot();
        let now = Timestamp::now();
        let its = self.instance_types(&snapshot.node_pools).await;
        let in_flight = lock(&self.orchestrator.in_flight).clone();
        let floors = self.floors(&snapshot, &in_flight).await;
        let (cands, _) = self.candidates(&snapshot, &its, &in_flight, &floors, now);
        let mut budgets = self.budgets(&snapshot, &in_flight, cmd.reason(), now);
        budgets.groups.clone_from(floors.rooms());
        let fresh = validation::recheck(&cmd, &cands, &mut budgets).map_err(|why| (method, why))?;
        if method == Method::Emptiness {
            return Ok(Command {
                candidates: fresh,
                ..cmd
            });
        }
        let this = Arc::clone(self);
        let pools = snapshot.node_pools.clone();
        tokio::task::spawn_blocking(move || {
            let world = this.world(&snapshot, &its, now);
            validation::resimulated(&world, cmd, &fresh, &cands, &pools)
        })
        .await
        .map_err(|e| (method, e.to_string()))?
        .map_err(|why| (method, why))
    }

    /// Removes the disrupted taint and `DisruptionReason` from managed nodes no command of
    /// this process holds (left behind by a restart or a failed command).
    async fn clean_up(&self, snapshot: &Snapshot) {
        let in_flight = lock(&self.orchestrator.in_flight).clone();
        for node in &snapshot.nodes {
            let name = node.name_any();
            let managed = node.labels().contains_key(NODE_POOL);
            if !managed || in_flight.contains(&name) || node.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let nc = snapshot
                .node_claims
                .iter()
                .find(|c| c.status.as_ref().and_then(|s| s.node_name.as_deref()) == Some(&name));
            // Only nodes of our own NodeClaims: another provider's marks are its own business,
            // and a node without a NodeClaim is not provably ours.
            let Some(nc) = nc.filter(|c| is_ours(c)) else {
                continue;
            };
            if nc.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let marked = nc
                .status
                .as_ref()
                .and_then(|s| s.conditions.condition(DISRUPTION_REASON))
                .is_some();
            if !writes::is_tainted(node) && !marked {
                continue;
            }
            let nc_name = nc.name_any();
            tracing::info!(node = %name, "removing a disruption mark no command holds");
            if let Err(e) = self.orchestrator.mark(&name, &nc_name, None).await {
                tracing::warn!(node = %name, error = %e, "disruption mark not removed");
            }
        }
    }

    /// Why the NodeClaim drifted, if it did: static drift, requirements drift, its instance
    /// type gone (judged only when the pool's instance types resolved: `offered`), then the
    /// provider's answer (asked at most every `drift_recheck` per NodeClaim; a NodeClaim not
    /// launched yet has not drifted).
    async fn drift_of(
        &self,
        nc: &NodeClaim,
        pool: &NodePool,
        offered: Option<&Vec<Arc<InstanceType>>>,
        now: Timestamp,
    ) -> Option<String> {
        let launched = nc
            .status
            .as_ref()
            .is_some_and(|s| s.conditions.is_true(LAUNCHED));
        if !launched {
            return None;
        }
        if let Some(r) = drift::computable(nc, pool, offered.map(Vec::as_slice), now) {
            return Some(r.to_owned());
        }
        let uid = nc.metadata.uid.clone().unwrap_or_default();
        let cached = lock(&self.provider_drift).get(&uid).cloned();
        if let Some((at, answer)) = &cached
            && at.elapsed() < self.config.drift_recheck
        {
            return answer.clone();
        }
        match self.provider.is_drifted(nc).await {
            Ok(answer) => {
                lock(&self.provider_drift).insert(uid, (Instant::now(), answer.clone()));
                answer
            }
            Err(e) => {
                tracing::debug!(nodeclaim = %nc.name_any(), error = %e, "drift not checked");
                // Keep the last answer (NotFound and transient errors are not drift).
                cached.and_then(|(_, a)| a)
            }
        }
    }

    /// Deletes NodeClaims past `spec.expireAfter` (spec §4.9: forceful, no budgets, no
    /// replacement first; the drain still respects PDBs unless a terminationGracePeriod ends it).
    /// Returns the nodes of the NodeClaims it deleted.
    async fn expire(&self, snapshot: &Snapshot, now: Timestamp) -> BTreeSet<String> {
        let api: Api<NodeClaim> = Api::all(self.client.clone());
        let mut expired = BTreeSet::new();
        for nc in &snapshot.node_claims {
            if nc.metadata.deletion_timestamp.is_some() || !is_ours(nc) {
                continue;
            }
            let at = match drift::expires_at(nc) {
                Ok(Some(at)) => at,
                Ok(None) => continue,
                Err(e) => {
                    tracing::warn!(nodeclaim = %nc.name_any(), error = %e, "expiry not evaluated");
                    continue;
                }
            };
            if at > now {
                continue;
            }
            let params = kube::api::DeleteParams {
                preconditions: nc.metadata.uid.clone().map(|uid| kube::api::Preconditions {
                    uid: Some(uid),
                    resource_version: None,
                }),
                ..kube::api::DeleteParams::default()
            };
            match api.delete(&nc.name_any(), &params).await {
                Ok(_) => {
                    tracing::info!(nodeclaim = %nc.name_any(), expired_at = %at, "deleting expired nodeclaim");
                    if let Some(node) = nc.status.as_ref().and_then(|s| s.node_name.clone()) {
                        expired.insert(node);
                    }
                    self.metrics
                        .nodeclaims_disrupted
                        .get_or_create(&crate::metrics::DisruptedLabels {
                            reason: "expired".into(),
                            nodepool: nc.labels().get(NODE_POOL).cloned().unwrap_or_default(),
                            capacity_type: nc
                                .labels()
                                .get(scheduling::labels::CAPACITY_TYPE)
                                .cloned()
                                .unwrap_or_default(),
                        })
                        .inc();
                }
                Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
                Err(e) => {
                    tracing::warn!(nodeclaim = %nc.name_any(), error = %e, "expired nodeclaim not deleted")
                }
            }
        }
        expired
    }

    /// Writes `Consolidatable` and `lastPodEventTime` where they changed.
    async fn write_conditions(
        &self,
        snapshot: &Snapshot,
        its: &BTreeMap<String, Vec<Arc<InstanceType>>>,
        now: Timestamp,
    ) {
        let api: Api<NodeClaim> = Api::all(self.client.clone());
        for nc in &snapshot.node_claims {
            if nc.metadata.deletion_timestamp.is_some() || !is_ours(nc) {
                continue;
            }
            let Some(pool) = nc.labels().get(NODE_POOL).and_then(|p| {
                snapshot
                    .node_pools
                    .iter()
                    .find(|n| n.metadata.name.as_deref() == Some(p))
            }) else {
                continue;
            };
            let node = nc.status.as_ref().and_then(|s| s.node_name.as_deref());
            let last = node.and_then(|n| self.state.last_pod_event(n));
            let stored = nc
                .status
                .as_ref()
                .and_then(|s| s.last_pod_event_time.as_ref())
                .map(|t| t.0);
            // Written at most every 10 s per NodeClaim (upstream's rate), and only where it can
            // change a decision after a restart: with `consolidateAfter` 0 or Never it cannot
            // (this process evaluates with the events it saw), so the write is saved.
            let waits = matches!(
                consolidatable::consolidate_after(pool),
                Ok(Some(after)) if !after.is_zero()
            );
            let write_last = last.filter(|_| waits).filter(|l| {
                stored.is_none_or(|s| {
                    s.checked_add(k8s_openapi::jiff::SignedDuration::from_secs(10))
                        .is_ok_and(|due| *l >= due)
                })
            });
            // Static pools are never consolidated: the condition is never set for them.
            let consolidation = if pool.spec.is_static() {
                Consolidation::Disabled("static NodePool".into())
            } else {
                consolidatable::evaluate(nc, pool, last, now)
            };
            let drifted = self
                .drift_of(nc, pool, its.get(&pool.name_any()), now)
                .await;
            let patch = writes::status_patch(nc, now, write_last, |set| {
                match &consolidation {
                    Consolidation::Consolidatable => {
                        set.set(CONSOLIDATABLE, ConditionStatus::True, CONSOLIDATABLE, "");
                    }
                    _ => set.clear(CONSOLIDATABLE),
                }
                match &drifted {
                    Some(reason) => set.set(DRIFTED, ConditionStatus::True, reason, reason),
                    None => set.clear(DRIFTED),
                }
            });
            let Some(patch) = patch else {
                continue;
            };
            match api
                .patch_status(
                    &nc.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await
            {
                Ok(_) => {}
                // Another writer was first: the next pass sees its version.
                Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => {}
                Err(e) => {
                    tracing::debug!(nodeclaim = %nc.name_any(), error = %e, "disruption conditions not written")
                }
            }
        }
        let nodes: BTreeSet<&str> = snapshot
            .nodes
            .iter()
            .filter_map(|n| n.metadata.name.as_deref())
            .collect();
        self.state.forget_pod_events(|n| nodes.contains(n));
    }
}

/// Whether `pool` names a static NodePool of the snapshot.
fn is_static(snapshot: &Snapshot, pool: &str) -> bool {
    snapshot
        .node_pools
        .iter()
        .any(|p| p.metadata.name.as_deref() == Some(pool) && p.spec.is_static())
}

#[cfg(test)]
mod stall_tests {
    use super::*;

    #[test]
    fn a_stall_is_reported_once_and_its_end_once() {
        let t0 = Instant::now();
        let after = Duration::from_secs(900);
        let mut s = Stall::new(after, 5, t0);
        assert_eq!(s.observe(5, t0 + Duration::from_secs(899)), None);
        assert_eq!(
            s.observe(5, t0 + Duration::from_secs(900)),
            Some(StallChange::Began)
        );
        assert_eq!(s.observe(5, t0 + Duration::from_secs(2000)), None, "once");
        assert_eq!(
            s.observe(6, t0 + Duration::from_secs(2001)),
            Some(StallChange::Ended)
        );
        assert_eq!(s.observe(7, t0 + Duration::from_secs(2002)), None);
        assert_eq!(s.observe(7, t0 + Duration::from_secs(2900)), None);
        assert_eq!(
            s.observe(7, t0 + Duration::from_secs(2902)),
            Some(StallChange::Began),
            "a new stall counts from the last pass"
        );
    }
}
