//! The NodeOverlay controller (feature gate `NodeOverlay`).
//!
//! Responsibility: keep the [`OverlayStore`] the provisioner, consolidation and the Cluster
//! API launch read in step with the NodeOverlays, NodePools and instance types, and tell users
//! what became of each overlay:
//! - evaluates every overlay against every NodePool at once (upstream's global reconcile):
//!   runtime validation, weight order, matching, conflicts ([`cloudprovider::overlay`]), with
//!   the instance types of the provider it is given — the undecorated one;
//! - evaluates again when an overlay, a NodePool or a NodeClass changes (name, generation,
//!   deletion), when the store met an instance type it has not evaluated (a MachineDeployment
//!   added since), and at least every [`NodeOverlayConfig::resync`]; it wakes on a change of
//!   the NodeOverlay watch or the state, else every [`NodeOverlayConfig::poll`]; when the
//!   NodeOverlay watch task ends the controller ends too (so `/healthz` names it);
//! - a NodePool whose instance types cannot be read is left unevaluated (the others are
//!   evaluated; the store refuses that pool, so nothing launches there at prices an overlay
//!   might change) and retried at the next pass;
//! - writes `ValidationSucceeded` (True; False with reason `RuntimeValidation` and the
//!   problems, or `Conflict` naming the other overlay) and `Ready` through the condition
//!   library, with a resourceVersion precondition, only when they change; a Warning Event
//!   (`RuntimeValidation` / `Conflict`) names the overlay when it turns False.
//!
//! Inputs: a workload `kube::Client`, the provider, the [`ClusterState`] (NodePools and
//! NodeClasses), the store. Outputs: the store's evaluations, NodeOverlay status, Events.

use std::sync::Arc;
use std::time::Duration;

use api::NodeOverlay;
use api::well_known::conditions::VALIDATION_SUCCEEDED;
use api::well_known::conditions::reasons::{CONFLICT, RUNTIME_VALIDATION};
use cloudprovider::CloudProvider;
use cloudprovider::overlay::{Outcome, OverlayStore, PoolInput, evaluate, validate_all};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::Store;
use kube::{Resource, ResourceExt};
use scheduling::labels::WellKnownLabels;
use serde_json::json;
use state::ClusterState;

use crate::conditions::ConditionSet;
use crate::events::{Events, Message};

/// The shortest time between two comparisons of the inputs.
const MIN_INTERVAL: Duration = Duration::from_millis(500);

/// Settings of the controller.
#[derive(Debug, Clone)]
pub struct NodeOverlayConfig {
    /// The longest time between two comparisons of the inputs with the last evaluation's
    /// (a change of an overlay, NodePool or NodeClass wakes the controller at once; this
    /// catches a store gone stale through a new MachineDeployment).
    pub poll: Duration,
    /// The longest time between two evaluations (upstream: 6 h; Cluster API's instance types
    /// change more often than a cloud's catalogue).
    pub resync: Duration,
}

impl Default for NodeOverlayConfig {
    fn default() -> Self {
        Self {
            poll: Duration::from_secs(5),
            resync: Duration::from_secs(300),
        }
    }
}

/// The dependents of a NodeOverlay's `Ready`.
const DEPENDENTS: &[&str] = &[VALIDATION_SUCCEEDED];

/// The NodeOverlay controller.
pub struct NodeOverlayController<P> {
    client: kube::Client,
    provider: Arc<P>,
    state: Arc<ClusterState>,
    store: Arc<OverlayStore>,
    events: Events,
    well_known: WellKnownLabels,
    config: NodeOverlayConfig,
}

impl<P> std::fmt::Debug for NodeOverlayController<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeOverlayController")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// What an evaluation depended on: every overlay, NodePool and NodeClass by name, generation
/// and whether it is being deleted.
type Inputs = Vec<(&'static str, String, Option<i64>, bool)>;

fn inputs_of<K: Resource + Clone>(kind: &'static str, store: &Store<K>, out: &mut Inputs)
where
    K::DynamicType: std::hash::Hash + Eq + Clone,
{
    for o in store.state() {
        let m = o.meta();
        out.push((
            kind,
            m.name.clone().unwrap_or_default(),
            m.generation,
            m.deletion_timestamp.is_some(),
        ));
    }
}

impl<P: CloudProvider> NodeOverlayController<P> {
    /// A controller writing `store`, reading instance types from `provider` (not the
    /// overlaid one).
    #[must_use]
    pub fn new(
        client: kube::Client,
        provider: Arc<P>,
        state: Arc<ClusterState>,
        store: Arc<OverlayStore>,
        events: Events,
        config: NodeOverlayConfig,
    ) -> Self {
        Self {
            client,
            provider,
            state,
            store,
            events,
            well_known: WellKnownLabels::cluster_api(),
            config,
        }
    }

    /// Watches NodeOverlays and evaluates until dropped. Returns (an error logged) when the
    /// NodeOverlay watch ends, so `/healthz` names this controller as stopped.
    pub async fn run(self) {
        let (tick, mut overlay_changes) = tokio::sync::watch::channel(0_u64);
        let (overlays, (_, task)) = state::watch_store::<NodeOverlay>(&self.client, Arc::new(tick));
        let watch = AbortOnDrop(task);
        let mut state_changes = self.state.changes();
        let listed = state::listed::listed(&overlays);
        let mut last: Option<(Inputs, tokio::time::Instant)> = None;
        loop {
            let mut inputs = Inputs::new();
            inputs_of("NodeOverlay", &overlays, &mut inputs);
            inputs_of("NodePool", self.state.node_pools(), &mut inputs);
            inputs_of(
                "ClusterAPINodeClass",
                self.state.node_classes(),
                &mut inputs,
            );
            inputs.sort();
            let due = match &last {
                None => true,
                Some((seen, at)) => {
                    *seen != inputs || at.elapsed() >= self.config.resync || self.store.take_stale()
                }
            };
            // Until the overlays have listed once, an evaluation would drop every overlay.
            if due && state::listed::is_listed(&listed) {
                let complete = self.reconcile(&overlays.state()).await;
                // A pool that could not be evaluated is tried again at the next poll.
                last = complete.then(|| (inputs, tokio::time::Instant::now()));
            }
            if watch.0.is_finished() {
                tracing::error!("the NodeOverlay watch ended; the NodeOverlay controller stops");
                return;
            }
            // Folds bursts of changes (the state ticks on every pod change too).
            tokio::time::sleep(self.config.poll.min(MIN_INTERVAL)).await;
            tokio::select! {
                _ = overlay_changes.changed() => {}
                _ = state_changes.changed() => {}
                () = tokio::time::sleep(self.config.poll) => {}
            }
        }
    }

    /// One evaluation: the store is swapped and the statuses written. Returns whether every
    /// NodePool was evaluated and every status written.
    pub async fn reconcile(&self, overlays: &[Arc<NodeOverlay>]) -> bool {
        let mut complete = true;
        let mut pools = Vec::new();
        for pool in self.state.node_pools().state() {
            if pool.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let name = pool.name_any();
            match self.provider.get_instance_types(&pool).await {
                Ok(instance_types) => pools.push(PoolInput::of(&pool, instance_types)),
                Err(e) => {
                    complete = false;
                    tracing::warn!(nodepool = %name, error = %e,
                        "NodeOverlays are not evaluated for this NodePool: its instance types cannot be read");
                }
            }
        }
        pools.sort_by(|a, b| a.name.cmp(&b.name));
        let checked = validate_all(overlays.iter().map(|o| &**o), &self.well_known);
        let evaluation = evaluate(&checked, &pools, &self.well_known);
        self.store.swap(evaluation.evaluated);
        for overlay in overlays {
            let name = overlay.name_any();
            let outcome = evaluation
                .outcomes
                .get(&name)
                .cloned()
                .unwrap_or(Outcome::Applied);
            if let Err(e) = self.write_status(overlay, &outcome).await {
                complete = false;
                tracing::warn!(nodeoverlay = %name, error = %e, "cannot write the NodeOverlay status");
            }
        }
        complete
    }

    async fn write_status(
        &self,
        overlay: &NodeOverlay,
        outcome: &Outcome,
    ) -> Result<(), kube::Error> {
        let old = overlay
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_deref());
        let set = conditions(old, overlay.metadata.generation, outcome, Timestamp::now());
        if !set.changed() {
            return Ok(());
        }
        let was_false = old
            .and_then(|c| c.iter().find(|c| c.type_ == VALIDATION_SUCCEEDED))
            .is_some_and(|c| c.status == api::common::ConditionStatus::False);
        let patch = json!({
            "metadata": {"resourceVersion": overlay.metadata.resource_version},
            "status": {"conditions": set.conditions()},
        });
        Api::<NodeOverlay>::all(self.client.clone())
            .patch_status(
                &overlay.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await?;
        let message = match outcome {
            Outcome::Applied => None,
            Outcome::Invalid(m) => Some(Message::warning(RUNTIME_VALIDATION, m.clone())),
            Outcome::Conflict(m) => Some(Message::warning(CONFLICT, m.clone())),
        };
        if let Some(message) = message
            && !was_false
        {
            self.events.publish(overlay, message);
        }
        Ok(())
    }
}

/// The conditions `outcome` gives an overlay with `old` conditions at `generation`.
#[must_use]
pub fn conditions(
    old: Option<&[api::common::Condition]>,
    generation: Option<i64>,
    outcome: &Outcome,
    now: Timestamp,
) -> ConditionSet {
    let mut set = ConditionSet::new(old, DEPENDENTS, generation, now);
    match outcome {
        Outcome::Applied => set.set_true(VALIDATION_SUCCEEDED),
        Outcome::Invalid(m) => set.set_false(VALIDATION_SUCCEEDED, RUNTIME_VALIDATION, m),
        Outcome::Conflict(m) => set.set_false(VALIDATION_SUCCEEDED, CONFLICT, m),
    }
    set
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;
    use api::common::ConditionStatus;
    use api::well_known::conditions::READY;

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(s).unwrap()
    }

    #[test]
    fn conditions_follow_the_outcome_and_keep_their_transition_time() {
        let set = conditions(None, Some(3), &Outcome::Applied, at(10));
        assert!(set.is_true(VALIDATION_SUCCEEDED) && set.is_true(READY));
        let v = set.get(VALIDATION_SUCCEEDED).unwrap();
        assert_eq!(
            (v.reason.as_str(), v.observed_generation),
            ("ValidationSucceeded", Some(3))
        );
        let old = set.into_conditions();
        let same = conditions(Some(&old), Some(3), &Outcome::Applied, at(20));
        assert!(!same.changed(), "nothing to write");
        let conflict = conditions(
            Some(&old),
            Some(3),
            &Outcome::Conflict("conflict with another overlay: b".into()),
            at(30),
        );
        assert!(conflict.changed());
        let v = conflict.get(VALIDATION_SUCCEEDED).unwrap();
        assert_eq!(v.status, ConditionStatus::False);
        assert_eq!(v.reason, "Conflict");
        assert!(v.message.contains(" b"));
        let r = conflict.get(READY).unwrap();
        assert_eq!(
            (r.status, r.reason.as_str()),
            (ConditionStatus::False, "UnhealthyDependents")
        );
        let invalid = conditions(
            None,
            Some(1),
            &Outcome::Invalid("spec.price: x".into()),
            at(1),
        );
        assert_eq!(
            invalid.get(VALIDATION_SUCCEEDED).unwrap().reason,
            "RuntimeValidation"
        );
    }
}
