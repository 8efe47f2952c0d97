//! The running operator: every controller wired to a workload and a management cluster.
//!
//! Responsibility: [`Operator::start`] composes the concrete parts — the cluster
//! [`state`], the Cluster API provider with its NodeClass status controller and Machine
//! garbage collector, the provisioner, the NodeClaim lifecycle and garbage collector, Node
//! termination, the NodePool controllers, the disruption loop and static NodePools — on the current tokio runtime, and keeps their tasks; dropping the
//! [`Operator`] stops them. `run`, `simulate`, `bench e2e` and the end-to-end tests all start the
//! controller through here, so they exercise exactly the same wiring.
//! Inputs: two `kube::Client`s and an [`OperatorConfig`]. Outputs: running tasks, metrics,
//! decisions, readiness.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use api::NodePool;
use cloudprovider::overlay::{Overlaid, OverlayStore};
use clusterapi::gc::{GcConfig, MachineGc};
use clusterapi::nodeclass_status::{self, StatusConfig};
use clusterapi::provider::{ClusterApiProvider, ProviderConfig};
use controllers::disruption::{Disruption, DisruptionConfig, Record};
use controllers::events::Events;
use controllers::metered::Metered;
use controllers::metrics::Metrics;
use controllers::nodeclaim::{Lifecycle, LifecycleConfig};
use controllers::nodeoverlay::NodeOverlayController;
use controllers::nodepool::NodePoolControllers;
use controllers::nodepool::hash::{HASH_VERSION, pool_hash};
use controllers::provisioning::node_claim::PoolHash;
use controllers::provisioning::provisioner::{
    Decision, Provisioner, ProvisionerConfig, trigger_channel,
};
use controllers::static_capacity::{StaticCapacity, StaticConfig};
use controllers::termination::{Termination, TerminationConfig};
use state::{ClusterState, StateConfig};
use tokio::task::JoinHandle;

/// Settings of every controller.
#[derive(Debug, Clone, Default)]
pub struct OperatorConfig {
    /// The provisioner (batch window, policies).
    pub provisioner: ProvisionerConfig,
    /// The NodeClaim lifecycle (timeouts).
    pub lifecycle: LifecycleConfig,
    /// Node termination (drain timings).
    pub termination: TerminationConfig,
    /// The Cluster API provider (scope, claim timeout).
    pub provider: ProviderConfig,
    /// The Machine garbage collector.
    pub gc: GcConfig,
    /// The NodeClaim garbage collector (instances gone).
    pub node_claim_gc: controllers::nodeclaim::garbage_collection::GcConfig,
    /// The disruption loop.
    pub disruption: DisruptionConfig,
    /// Static NodePools (off unless the `StaticCapacity` gate is on).
    pub static_capacity: StaticConfig,
    /// Node repair (off unless the `NodeRepair` gate is on).
    pub node_repair: controllers::health::HealthConfig,
    /// NodeOverlays: `Some` when the `NodeOverlay` gate is on.
    pub node_overlay: Option<controllers::nodeoverlay::NodeOverlayConfig>,
    /// CapacityBuffers: `Some` when the `CapacityBuffer` gate is on.
    pub capacity_buffer: Option<controllers::capacitybuffer::CapacityBufferConfig>,
    /// The Event reporter instance (pod name or host).
    pub instance: Option<String>,
}

impl OperatorConfig {
    /// The controllers `gates` turn on, at their default settings (a gate that is off turns
    /// nothing off).
    #[must_use]
    pub fn with_gates(mut self, gates: &crate::feature_gates::FeatureGates) -> Self {
        self.static_capacity.enabled |= gates.static_capacity;
        self.disruption.spot_to_spot |= gates.spot_to_spot_consolidation;
        self.node_repair.enabled |= gates.node_repair;
        if gates.node_overlay && self.node_overlay.is_none() {
            self.node_overlay = Some(controllers::nodeoverlay::NodeOverlayConfig::default());
        }
        if gates.capacity_buffer && self.capacity_buffer.is_none() {
            self.capacity_buffer =
                Some(controllers::capacitybuffer::CapacityBufferConfig::default());
        }
        self
    }
}

/// The NodePool hash stamped on new NodeClaims.
fn stamp(pool: &NodePool) -> PoolHash {
    PoolHash {
        hash: pool_hash(pool),
        version: HASH_VERSION.to_owned(),
    }
}

/// The shared cluster state and the provisioning triggers it produces: what every replica
/// runs, leader or not (upstream: ready means the caches synced, leading or not).
#[derive(Debug)]
pub struct Caches {
    state: Arc<ClusterState>,
    triggers: tokio::sync::mpsc::UnboundedReceiver<state::Trigger>,
}

impl Caches {
    /// Starts the watches of the workload cluster.
    #[must_use]
    pub fn start(workload: &kube::Client) -> Self {
        let (tx, rx, predicate) = trigger_channel();
        let state = ClusterState::start(
            workload,
            StateConfig {
                triggers: Some((tx, predicate)),
            },
        );
        Self {
            state,
            triggers: rx,
        }
    }

    /// The cluster state.
    #[must_use]
    pub fn state(&self) -> &Arc<ClusterState> {
        &self.state
    }

    /// Drops the triggers queued so far: a standby replica calls this while it waits, so the
    /// queue does not grow (the provisioner re-checks pending pods when it starts leading).
    pub fn discard_triggers(&mut self) {
        while self.triggers.try_recv().is_ok() {}
    }
}

/// Every controller, running.
#[derive(Debug)]
pub struct Operator {
    state: Arc<ClusterState>,
    provider: Arc<ClusterApiProvider>,
    metrics: Arc<Metrics>,
    decisions: Arc<Mutex<Vec<Decision>>>,
    disruptions: Arc<Mutex<Vec<Record>>>,
    disruption_passes: (
        Arc<std::sync::atomic::AtomicU64>,
        Arc<std::sync::atomic::AtomicU64>,
    ),
    /// The controllers' tasks, by name.
    tasks: Vec<(&'static str, JoinHandle<()>)>,
}

impl Drop for Operator {
    fn drop(&mut self) {
        for (_, t) in &self.tasks {
            t.abort();
        }
    }
}

impl Operator {
    /// Starts every controller; NodePools, NodeClaims, Nodes and Pods live in `workload`,
    /// Cluster API objects in `management` (may be the same cluster).
    #[must_use]
    pub fn start(workload: kube::Client, management: kube::Client, config: OperatorConfig) -> Self {
        Self::start_with_metrics(workload, management, config, Arc::new(Metrics::new()))
    }

    /// [`Operator::start`] recording into `metrics` (served before the controllers start).
    #[must_use]
    pub fn start_with_metrics(
        workload: kube::Client,
        management: kube::Client,
        config: OperatorConfig,
        metrics: Arc<Metrics>,
    ) -> Self {
        let caches = Caches::start(&workload);
        Self::start_with_caches(caches, workload, management, config, metrics)
    }

    /// [`Operator::start_with_metrics`] on caches that are already running (started before
    /// leadership, so a standby replica keeps them warm and reports ready).
    #[must_use]
    pub fn start_with_caches(
        caches: Caches,
        workload: kube::Client,
        management: kube::Client,
        config: OperatorConfig,
        metrics: Arc<Metrics>,
    ) -> Self {
        let events = Events::new(workload.clone(), config.instance.clone());
        let Caches {
            state,
            triggers: rx,
        } = caches;
        // With the NodeOverlay gate on, one store: the overlay controller writes it; every
        // instance-type query (through `Overlaid`) and the Cluster API launch read it.
        let overlays = config
            .node_overlay
            .as_ref()
            .map(|_| Arc::new(OverlayStore::new()));
        let provider = Arc::new(
            ClusterApiProvider::new(
                management.clone(),
                workload.clone(),
                config.provider.clone(),
            )
            .with_overlays(overlays.clone()),
        );
        let overlaid = Arc::new(match &overlays {
            Some(store) => Overlaid::new(Arc::clone(&provider), Arc::clone(store)),
            None => Overlaid::disabled(Arc::clone(&provider)),
        });
        // Each controller calls the provider through the metrics decorator, under its own name.
        let metered = |controller| {
            Arc::new(Metered::new(
                Arc::clone(&overlaid),
                controller,
                Arc::clone(&metrics),
            ))
        };
        let provisioner = Provisioner::new(
            workload.clone(),
            metered("provisioner"),
            Arc::clone(&state),
            events.clone(),
            Arc::clone(&metrics),
            config.provisioner.clone(),
            stamp,
        );
        let decisions = provisioner.decisions();
        let lifecycle = Lifecycle::new(
            workload.clone(),
            metered("nodeclaim.lifecycle"),
            events.clone(),
            Arc::clone(&metrics),
            config.lifecycle,
        );
        let termination = Termination::new(
            workload.clone(),
            metered("node.termination"),
            events.clone(),
            Arc::clone(&metrics),
            config.termination,
        )
        .with_node_claims(state.node_claims().clone());
        let disruption = Disruption::new(
            workload.clone(),
            metered("disruption"),
            Arc::clone(&state),
            events.clone(),
            Arc::clone(&metrics),
            config.disruption.clone(),
            stamp,
        )
        .with_policies(
            config.provisioner.preference_policy,
            config.provisioner.min_values_policy,
        );
        let mut static_config = config.static_capacity.clone();
        let static_enabled = static_config.enabled;
        static_config.options.min_values_policy = config.provisioner.min_values_policy;
        let static_capacity = StaticCapacity::new(
            workload.clone(),
            metered("static.provisioning"),
            Arc::clone(&state),
            events.clone(),
            Arc::clone(&metrics),
            static_config,
            stamp,
        );
        let disruptions = disruption.records();
        let disruption_passes = disruption.pass_counters();
        let node_overlays = config.node_overlay.clone().zip(overlays).map(|(c, store)| {
            NodeOverlayController::new(
                workload.clone(),
                // The instance types before overlays: the controller decides them.
                Arc::new(Metered::new(
                    Arc::clone(&provider),
                    "nodeoverlay",
                    Arc::clone(&metrics),
                )),
                Arc::clone(&state),
                store,
                events.clone(),
                c,
            )
        });
        let node_health = controllers::health::NodeHealth::new(
            workload.clone(),
            metered("node.health"),
            Arc::clone(&state),
            events.clone(),
            Arc::clone(&metrics),
            controllers::clock::Clock::new(),
            config.node_repair.clone(),
        );
        let capacity_buffers = config.capacity_buffer.clone().map(|c| {
            controllers::capacitybuffer::CapacityBufferController::new(
                workload.clone(),
                Arc::clone(&state),
                events.clone(),
                c,
            )
        });
        let node_pools = NodePoolControllers::new(
            workload.clone(),
            Arc::clone(&state),
            events,
            Arc::clone(&metrics),
        );
        let status = StatusConfig {
            scope: config.provider.scope.clone(),
            templates: Some(provider.templates()),
            capi: provider.capi().clone(),
            ..StatusConfig::default()
        };
        let gc = MachineGc::new(Arc::clone(&provider), config.gc.clone());
        let node_claim_gc = controllers::nodeclaim::garbage_collection::NodeClaimGc::new(
            workload.clone(),
            metered("nodeclaim.garbagecollection"),
            Arc::clone(&metrics),
            config.node_claim_gc,
        );
        let mut tasks = vec![
            ("provisioner", tokio::spawn(provisioner.run(rx))),
            ("nodeclaim lifecycle", tokio::spawn(lifecycle.run())),
            ("node termination", tokio::spawn(termination.run())),
            ("nodepool controllers", tokio::spawn(node_pools.run())),
            (
                "nodeclass status",
                tokio::spawn(nodeclass_status::run(workload, management, status)),
            ),
            ("machine garbage collection", tokio::spawn(gc.run())),
            (
                "nodeclaim garbage collection",
                tokio::spawn(node_claim_gc.run()),
            ),
            ("disruption", tokio::spawn(disruption.run())),
        ];
        // The static capacity loop runs only behind its gate (off, it would end at once and
        // read as a stopped task).
        if static_enabled {
            tasks.push(("static capacity", tokio::spawn(static_capacity.run())));
        }
        // Node repair runs behind its gate, and only when the provider repairs something.
        if node_health.active() {
            tasks.push(("node health", tokio::spawn(node_health.run())));
        }
        if let Some(controller) = node_overlays {
            tasks.push(("nodeoverlay", tokio::spawn(controller.run())));
        }
        if let Some(controller) = capacity_buffers {
            tasks.push(("capacitybuffer", tokio::spawn(controller.run())));
        }
        Self {
            state,
            provider,
            metrics,
            decisions,
            disruptions,
            disruption_passes,
            tasks,
        }
    }

    /// The Cluster API provider (its caches' readiness: [`ClusterApiProvider::caches_synced`]).
    #[must_use]
    pub fn provider(&self) -> Arc<ClusterApiProvider> {
        Arc::clone(&self.provider)
    }

    /// The leader's long-running tasks — every controller and the provider's watches — by
    /// name, for liveness (`/healthz`; the shared state's watches: [`ClusterState::watch_tasks`]).
    /// Each runs until the operator is dropped.
    #[must_use]
    pub fn tasks(&self) -> Vec<(String, tokio::task::AbortHandle)> {
        self.tasks
            .iter()
            .map(|(name, t)| ((*name).to_owned(), t.abort_handle()))
            .chain(self.provider.watch_tasks())
            .collect()
    }

    /// Stops every controller and waits until each has ended, so nothing of this operator
    /// sends another request once this returns (dropping it only asks them to stop; the
    /// watches they hold may re-watch for a moment after).
    pub async fn stop(mut self) {
        let tasks = std::mem::take(&mut self.tasks);
        for (_, t) in &tasks {
            t.abort();
        }
        for (_, t) in tasks {
            // Cancelled (or already ended): either way it has stopped.
            let _ = t.await;
        }
    }

    /// The metrics.
    #[must_use]
    pub fn metrics(&self) -> Arc<Metrics> {
        Arc::clone(&self.metrics)
    }

    /// The disruption loop's passes so far, and how many of the latest in a row found
    /// nothing to do with no command in flight.
    #[must_use]
    pub fn disruption_passes(&self) -> (u64, u64) {
        let (passes, idle) = &self.disruption_passes;
        (
            passes.load(std::sync::atomic::Ordering::Relaxed),
            idle.load(std::sync::atomic::Ordering::Relaxed),
        )
    }

    /// The disruption decisions so far.
    #[must_use]
    pub fn disruptions(&self) -> Vec<Record> {
        self.disruptions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The provisioner's decisions so far.
    #[must_use]
    pub fn decisions(&self) -> Vec<Decision> {
        self.decisions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The cluster state.
    #[must_use]
    pub fn state(&self) -> &Arc<ClusterState> {
        &self.state
    }

    /// Ready once the caches listed (`/readyz`).
    ///
    /// # Errors
    /// Why not yet.
    pub async fn wait_ready(&self, timeout: Duration) -> Result<(), String> {
        self.state
            .wait_listed(timeout)
            .await
            .map_err(|()| format!("caches not listed within {timeout:?}"))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::feature_gates::FeatureGates;

    #[test]
    fn gates_turn_on_their_controllers_and_an_off_gate_turns_nothing_off() {
        let none = OperatorConfig::default().with_gates(&FeatureGates::default());
        assert!(none.capacity_buffer.is_none() && none.node_overlay.is_none());
        assert!(!none.static_capacity.enabled && !none.node_repair.enabled);
        assert!(!none.disruption.spot_to_spot);
        let all: FeatureGates = "StaticCapacity=true,SpotToSpotConsolidation=true,\
                                 NodeOverlay=true,NodeRepair=true,CapacityBuffer=true"
            .parse()
            .unwrap();
        let on = OperatorConfig::default().with_gates(&all);
        assert!(on.capacity_buffer.is_some() && on.node_overlay.is_some());
        assert!(on.static_capacity.enabled && on.node_repair.enabled);
        assert!(on.disruption.spot_to_spot);
        // A controller already configured keeps its settings.
        let fast = OperatorConfig {
            capacity_buffer: Some(controllers::capacitybuffer::CapacityBufferConfig {
                poll: Duration::from_millis(200),
            }),
            ..OperatorConfig::default()
        };
        let kept = fast.with_gates(&FeatureGates::default());
        assert_eq!(
            kept.capacity_buffer.unwrap().poll,
            Duration::from_millis(200)
        );
    }
}
