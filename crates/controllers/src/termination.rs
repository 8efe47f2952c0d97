//! Node termination (spec §4.8 "Node finalizer", "Drain", "Eviction queue", "Instance
//! termination").
//!
//! Responsibility: [`Termination`] runs two things until the process ends:
//! - a `kube::runtime` Controller over the workload cluster's Nodes that reconciles every Node
//!   with a deletionTimestamp and the `karpenter.sh/termination` finalizer ([`reconcile`]):
//!   delete its NodeClaim, short-cut when the instance is already gone, taint
//!   `karpenter.sh/disrupted:NoSchedule` and label it excluded from external load balancers,
//!   drain it in priority tiers through the eviction queue (NodeClaim condition `Drained`),
//!   terminate the instance through the [`CloudProvider`] (`InstanceTerminating`), then remove
//!   the finalizer and record the node metrics;
//! - the eviction queue ([`eviction`]), which calls the Eviction API (or deletes pods past the
//!   node's termination time) with per-pod backoff.
//!
//! Volume detachment (upstream's wait for VolumeAttachments, condition `VolumesDetached`) is
//! skipped: the worlds we run in have no VolumeAttachments, so nothing is waited for and the
//! condition is not written.
//!
//! Pure parts: [`pods`] (drainable, tiers, force-delete deadlines), [`do_not_disrupt`], [`node`]
//! (NodeClaim lookup, taint/finalizer patches), [`queue`] (keyed backoff queue).
//! Inputs: a workload `kube::Client`, a provider, [`Events`], [`Metrics`],
//! [`TerminationConfig`]. Outputs: API writes, Events, metrics.

pub mod do_not_disrupt;
pub mod error;
pub mod eviction;
pub mod node;
pub mod pods;
pub mod queue;
pub mod reconcile;

use std::sync::Arc;
use std::time::Duration;

use cloudprovider::CloudProvider;

use crate::events::Events;
use crate::metrics::Metrics;

pub use error::TerminationError;
pub use eviction::EvictionQueue;

/// Event reasons of node termination (upstream's names, from `api::well_known::events`).
pub mod events {
    pub use api::well_known::events::{
        DISRUPTED, EVICTED, FAILED_DRAINING, TERMINATION_GRACE_PERIOD_EXPIRING,
    };
}

/// Settings of node termination.
#[derive(Debug, Clone)]
pub struct TerminationConfig {
    /// How long after `Drained` went Unknown a node with no pods left counts as drained
    /// (catches pods bound right after tainting).
    pub min_drain_time: Duration,
    /// A pod deleting for longer than this is no longer waited for.
    pub stuck_terminating: Duration,
    /// First per-pod eviction retry delay.
    pub eviction_base_delay: Duration,
    /// Largest per-pod eviction retry delay.
    pub eviction_max_delay: Duration,
}

impl Default for TerminationConfig {
    fn default() -> Self {
        Self {
            min_drain_time: Duration::from_secs(5),
            stuck_terminating: Duration::from_secs(60),
            eviction_base_delay: Duration::from_millis(100),
            eviction_max_delay: Duration::from_secs(10),
        }
    }
}

pub use crate::clock::Clock;

/// The node termination controller and its eviction queue.
pub struct Termination<P> {
    client: kube::Client,
    provider: Arc<P>,
    events: Events,
    metrics: Arc<Metrics>,
    config: TerminationConfig,
    node_claims: Option<kube::runtime::reflector::Store<api::NodeClaim>>,
}

impl<P> std::fmt::Debug for Termination<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Termination")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl<P: CloudProvider + 'static> Termination<P> {
    /// Node termination against the workload cluster `client`.
    #[must_use]
    pub fn new(
        client: kube::Client,
        provider: Arc<P>,
        events: Events,
        metrics: Arc<Metrics>,
        config: TerminationConfig,
    ) -> Self {
        Self {
            client,
            provider,
            events,
            metrics,
            config,
            node_claims: None,
        }
    }

    /// Find a Node's NodeClaim in this shared store ([`state::ClusterState::node_claims`])
    /// instead of listing NodeClaims on every pass.
    #[must_use]
    pub fn with_node_claims(
        mut self,
        store: kube::runtime::reflector::Store<api::NodeClaim>,
    ) -> Self {
        self.node_claims = Some(store);
        self
    }

    /// Runs the Node controller and the eviction queue until the process ends.
    pub async fn run(self) {
        let clock = Clock::start();
        let queue = EvictionQueue::new(
            self.config.eviction_base_delay,
            self.config.eviction_max_delay,
        );
        let evictions = queue.clone().run(eviction::EvictionContext {
            client: self.client.clone(),
            events: self.events.clone(),
            metrics: Arc::clone(&self.metrics),
            clock,
        });
        let nodes = reconcile::run(reconcile::Context {
            client: self.client,
            provider: self.provider,
            events: self.events,
            metrics: self.metrics,
            config: self.config,
            queue,
            clock,
            failures: std::sync::Mutex::default(),
            node_claims: self.node_claims,
        });
        tokio::join!(evictions, nodes);
    }
}
