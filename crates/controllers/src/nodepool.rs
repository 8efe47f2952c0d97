//! NodePool status and hash controllers (spec §1.2, §1.6).
//!
//! Responsibility:
//! - [`hash`]: the pure template hash ([`hash::pool_hash`], [`hash::HASH_VERSION`]) and the
//!   NodeClaim re-stamp patch;
//! - [`validation`], [`readiness`]: the pure `ValidationSucceeded` / `NodeClassReady` / `Ready`
//!   conditions;
//! - [`counter`]: the pure `status.resources` / `status.nodes` sums;
//! - [`status`]: the hash + readiness controller (I/O);
//! - [`usage`]: the counter loop and the `karpenter_nodepools_usage` / `_limit` gauges (I/O);
//! - [`NodePoolControllers`]: runs both.
//!
//! Only the leader should run these (the composition root decides).
//!
//! Inputs: a workload `kube::Client`, the shared [`ClusterState`] (the counter reads its
//! stores), [`Events`], [`Metrics`]. Outputs: NodePool annotations
//! and status, NodeClaim hash annotations, the `karpenter_nodepools_*` metrics.

pub mod counter;
pub mod hash;
pub mod readiness;
pub mod status;
pub mod usage;
pub mod validation;

use std::sync::Arc;

use scheduling::labels::WellKnownLabels;
use state::ClusterState;

use crate::events::Events;
use crate::metrics::Metrics;

/// The NodePool hash, readiness and counter controllers.
pub struct NodePoolControllers {
    client: kube::Client,
    state: Arc<ClusterState>,
    // Held for the registration-health controller (spec §4.6), which publishes Events; hash,
    // readiness and counter publish none upstream.
    #[allow(dead_code)]
    events: Events,
    metrics: Arc<Metrics>,
    well_known: WellKnownLabels,
}

impl std::fmt::Debug for NodePoolControllers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodePoolControllers")
            .finish_non_exhaustive()
    }
}

impl NodePoolControllers {
    /// The controllers over the workload cluster `client` and its shared `state`.
    #[must_use]
    pub fn new(
        client: kube::Client,
        state: Arc<ClusterState>,
        events: Events,
        metrics: Arc<Metrics>,
    ) -> Self {
        Self {
            client,
            state,
            events,
            metrics,
            well_known: WellKnownLabels::cluster_api(),
        }
    }

    /// Runs hash + readiness and the counter until their watches end.
    pub async fn run(self) {
        tokio::join!(
            status::run(self.client.clone(), self.well_known),
            usage::run(self.client, self.state, self.metrics),
        );
    }
}
