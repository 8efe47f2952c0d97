//! Carrying out one disruption command (spec §5.14).
//!
//! Responsibility, in order: mark every candidate — taint its Node `karpenter.sh/disrupted`
//! ([`super::writes::taint_patch`]) and set its NodeClaim's `DisruptionReason` — and give up
//! (rolling back what was marked) if any fails while the command needs replacements; create the
//! replacement NodeClaims through the provisioner's NodeClaim builder (each recorded as planned
//! for the candidates' pods it was made for, so it is no disruption candidate while they are
//! still on the leaving nodes: [`super::candidates`]); wait until each is
//! Initialized (a replacement that disappears, or the time limit, rolls the command back:
//! taint removed, condition cleared; the limit is the replacement timeout, grown by 80 ms per
//! command in flight up to an hour: [`replacement_budget`]); then delete each candidate NodeClaim (UID precondition:
//! exactly the object decided on), which the existing termination path drains (PDBs respected)
//! and turns into the deletion of exactly its Machine. Events and metrics as upstream names
//! them. The nodes stay "in flight" (not candidates again, not cleaned up) until the command
//! ends — after the deletes, until the cache shows the NodeClaims deleting (at most 30 s).
//!
//! Inputs: a [`Command`], clients, the state. Outputs: writes, Events, metrics, an [`Outcome`].

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use api::common::{ConditionStatus, Conditions};
use api::well_known::conditions::{DISRUPTION_REASON, INITIALIZED};
use api::well_known::events::{
    DISRUPTION_LAUNCHING, DISRUPTION_TERMINATING, DISRUPTION_WAITING_READINESS,
};
use api::{NodeClaim, NodePool};
use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::reflector::ObjectRef;
use scheduling::labels::WellKnownLabels;
use state::ClusterState;
use tokio::time::Instant;

use super::methods::{Command, reason_name};
use super::writes;
use crate::events::{Events, Message};
use crate::metrics::{DecisionLabels, DisruptedLabels, Metrics, ReasonLabels};
use crate::provisioning::node_claim::{PoolHash, node_claim};

/// Writes of one command in flight at once (marks, unmarks, deletes).
const CONCURRENCY: usize = 16;
/// How long a command keeps its nodes after deleting their NodeClaims, waiting for the cache
/// to show the deletes.
const DELETE_SEEN_WITHIN: Duration = Duration::from_secs(30);

/// How a command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The candidates' NodeClaims were deleted.
    Deleted {
        /// The replacements created.
        replacements: Vec<String>,
    },
    /// Rolled back, and why.
    RolledBack(String),
}

/// What the orchestration needs.
#[derive(Clone)]
pub struct Orchestrator {
    /// The workload cluster.
    pub client: kube::Client,
    /// The state (to see replacements initialize).
    pub state: Arc<ClusterState>,
    /// Events.
    pub events: Events,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Nodes in commands.
    pub in_flight: Arc<Mutex<BTreeSet<String>>>,
    /// The NodePool hash stamped on replacements.
    pub hash: fn(&NodePool) -> PoolHash,
    /// Labels.
    pub well_known: WellKnownLabels,
    /// How long replacements may take to initialize, at least ([`replacement_budget`]).
    pub replacement_timeout: Duration,
    /// Commands being carried out now.
    pub commands: Arc<std::sync::atomic::AtomicUsize>,
}

/// The longest a replacement may be waited for (upstream's retry budget, spec §5.14):
/// 80 ms per command in the queue, at least `floor` (the replacement timeout) and at most an
/// hour (or `floor`, when that is longer) — a long queue of slow launches is not rolled back
/// for being slow together.
#[must_use]
pub fn replacement_budget(floor: Duration, commands: usize) -> Duration {
    let per = Duration::from_millis(80);
    let grown = per.saturating_mul(u32::try_from(commands).unwrap_or(u32::MAX));
    grown.clamp(floor, floor.max(Duration::from_secs(3600)))
}

impl std::fmt::Debug for Orchestrator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Orchestrator")
            .field("replacement_timeout", &self.replacement_timeout)
            .finish_non_exhaustive()
    }
}

fn lock(set: &Mutex<BTreeSet<String>>) -> std::sync::MutexGuard<'_, BTreeSet<String>> {
    set.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Orchestrator {
    /// Claims the command's nodes; false when one is already in a command.
    pub fn reserve(&self, command: &Command) -> bool {
        let mut set = lock(&self.in_flight);
        if command.candidates.iter().any(|c| set.contains(&c.node)) {
            return false;
        }
        set.extend(command.nodes());
        true
    }

    fn release(&self, command: &Command) {
        let mut set = lock(&self.in_flight);
        for n in command.nodes() {
            set.remove(&n);
        }
    }

    /// Carries the command out (its nodes must be [`Self::reserve`]d).
    pub async fn execute(&self, command: Command, pools: Vec<NodePool>) -> Outcome {
        use std::sync::atomic::Ordering;
        self.commands.fetch_add(1, Ordering::Relaxed);
        let outcome = self.run(&command, &pools).await;
        self.commands.fetch_sub(1, Ordering::Relaxed);
        if let Outcome::RolledBack(why) = &outcome {
            tracing::warn!(nodes = ?command.nodes(), reason = %why, "disruption command rolled back");
            self.metrics
                .disruption_queue_failures
                .get_or_create(&self.decision_labels(&command))
                .inc();
        }
        self.release(&command);
        outcome
    }

    fn decision_labels(&self, command: &Command) -> DecisionLabels {
        DecisionLabels {
            decision: command.decision().to_string(),
            reason: reason_name(command.reason()).to_lowercase(),
            consolidation_type: command.method.label().into(),
        }
    }

    async fn run(&self, command: &Command, pools: &[NodePool]) -> Outcome {
        let reason = reason_name(command.reason());
        // Every candidate is marked, [`CONCURRENCY`] at a time: a 50-node command must not
        // wait for 100 writes in a row.
        // (The futures are built eagerly: a closure inside the stream's type trips the
        // compiler's `Send` proof for the spawned command.)
        let marks: Vec<_> = command
            .candidates
            .iter()
            .map(|c| async move { (c, self.mark(&c.node, &c.node_claim, Some(reason)).await) })
            .collect();
        let results: Vec<_> = stream::iter(marks)
            .buffer_unordered(CONCURRENCY)
            .collect()
            .await;
        let mut marked = Vec::new();
        let mut failed = None;
        for (c, result) in results {
            match result {
                Ok(()) => marked.push(c),
                Err(e) => {
                    failed.get_or_insert_with(|| format!("marking node {}: {e}", c.node));
                }
            }
        }
        if let Some(why) = failed {
            self.unmark_all(marked.iter().map(|c| (&*c.node, &*c.node_claim)))
                .await;
            return Outcome::RolledBack(why);
        }
        let mut replacements = Vec::new();
        for planned in &command.replacements {
            match self.create(planned, pools).await {
                Ok(name) => replacements.push(name),
                Err(why) => {
                    self.unmark_all(
                        command
                            .candidates
                            .iter()
                            .map(|c| (&*c.node, &*c.node_claim)),
                    )
                    .await;
                    return Outcome::RolledBack(why);
                }
            }
        }
        if !replacements.is_empty() {
            for c in &command.candidates {
                self.event(
                    &c.node,
                    &c.node_claim,
                    Message::normal(
                        DISRUPTION_LAUNCHING,
                        format!(
                            "Launching NodeClaim: {} ({reason})",
                            replacements.join(", ")
                        ),
                    ),
                );
            }
            if let Err(why) = self.await_initialized(command, &replacements).await {
                self.unmark_all(
                    command
                        .candidates
                        .iter()
                        .map(|c| (&*c.node, &*c.node_claim)),
                )
                .await;
                return Outcome::RolledBack(why);
            }
        }
        let api: Api<NodeClaim> = Api::all(self.client.clone());
        let deletes: Vec<_> = command
            .candidates
            .iter()
            .map(|c| self.delete_candidate(&api, c, reason, command))
            .collect();
        stream::iter(deletes)
            .buffer_unordered(CONCURRENCY)
            .collect::<Vec<()>>()
            .await;
        self.await_deleting(command).await;
        tracing::info!(
            reason,
            decision = %command.decision(),
            nodes = ?command.nodes(),
            replacements = ?replacements,
            savings = command.savings,
            "disrupted nodes"
        );
        Outcome::Deleted { replacements }
    }

    /// Waits (at most [`DELETE_SEEN_WITHIN`]) until the state's cache shows every candidate's
    /// NodeClaim deleting or gone. Until then the nodes stay in flight: the next pass's
    /// clean-up, reading a cache that is a moment behind the delete, would otherwise take the
    /// `karpenter.sh/disrupted` taint off a node that is about to drain.
    async fn await_deleting(&self, command: &Command) {
        let started = Instant::now();
        let mut changes = self.state.changes();
        loop {
            let pending = command.candidates.iter().any(|c| {
                self.state
                    .node_claims()
                    .get(&ObjectRef::new(&c.node_claim))
                    .is_some_and(|nc| {
                        nc.metadata.deletion_timestamp.is_none()
                            && (c.node_claim_uid.is_none() || nc.metadata.uid == c.node_claim_uid)
                    })
            });
            if !pending || started.elapsed() > DELETE_SEEN_WITHIN {
                return;
            }
            let _ = tokio::time::timeout(Duration::from_secs(1), changes.changed()).await;
        }
    }

    /// Announces and deletes one candidate's NodeClaim (UID precondition), counting it.
    async fn delete_candidate(
        &self,
        api: &Api<NodeClaim>,
        c: &super::candidates::Candidate,
        reason: &str,
        command: &Command,
    ) {
        self.event(
            &c.node,
            &c.node_claim,
            Message::normal(
                DISRUPTION_TERMINATING,
                format!("Disrupting Node: {reason}/{}", command.decision()),
            ),
        );
        let params = DeleteParams {
            preconditions: c.node_claim_uid.clone().map(|uid| Preconditions {
                uid: Some(uid),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match api.delete(&c.node_claim, &params).await {
            Ok(_) => {
                self.metrics
                    .nodeclaims_disrupted
                    .get_or_create(&DisruptedLabels {
                        reason: reason.to_lowercase(),
                        nodepool: c.node_pool.clone(),
                        capacity_type: c.capacity_type.clone().unwrap_or_default(),
                    })
                    .inc_by(1);
                self.metrics
                    .pods_disruption_initiated
                    .get_or_create(&ReasonLabels {
                        reason: reason.to_lowercase(),
                    })
                    .inc_by(c.reschedulable.len() as u64);
            }
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
            Err(e) => {
                tracing::warn!(nodeclaim = %c.node_claim, error = %e, "disrupted nodeclaim not deleted");
                // Taint and condition stay until the next loop's clean-up notices the node
                // is no longer in a command (then they are removed).
            }
        }
    }

    fn event(&self, node: &str, node_claim: &str, message: Message) {
        if let Some(n) = self.state.nodes().get(&ObjectRef::new(node)) {
            self.events.publish(&*n, message.clone());
        }
        if let Some(nc) = self.state.node_claims().get(&ObjectRef::new(node_claim)) {
            self.events.publish(&*nc, message);
        }
    }

    /// Taints the node and sets (or, with `None`, clears) the NodeClaim's `DisruptionReason`.
    ///
    /// # Errors
    /// The API error, as text.
    pub async fn mark(
        &self,
        node: &str,
        node_claim: &str,
        reason: Option<&str>,
    ) -> Result<(), String> {
        let nodes: Api<Node> = Api::all(self.client.clone());
        let claims: Api<NodeClaim> = Api::all(self.client.clone());
        let mut n = match self.state.nodes().get(&ObjectRef::new(node)) {
            Some(n) => (*n).clone(),
            None => nodes.get(node).await.map_err(|e| e.to_string())?,
        };
        // The cache may be behind: on a failed test, once more on a fresh read.
        for fresh in [false, true] {
            let Some(patch) = writes::taint_patch(&n, reason.is_some()) else {
                break;
            };
            match nodes
                .patch(
                    node,
                    &PatchParams::default(),
                    &Patch::Json::<()>(serde_json::from_value(patch).map_err(|e| e.to_string())?),
                )
                .await
            {
                Ok(_) => break,
                Err(kube::Error::Api(s)) if s.code == 404 && reason.is_none() => break,
                Err(kube::Error::Api(s)) if !fresh && (s.code == 422 || s.code == 409) => {
                    n = nodes.get(node).await.map_err(|e| e.to_string())?;
                }
                Err(e) => return Err(e.to_string()),
            }
        }
        let mut nc = match self.state.node_claims().get(&ObjectRef::new(node_claim)) {
            Some(nc) => (*nc).clone(),
            None => claims.get(node_claim).await.map_err(|e| e.to_string())?,
        };
        let now = Timestamp::now();
        for fresh in [false, true] {
            let patch = writes::status_patch(&nc, now, None, |set| match reason {
                Some(r) => set.set(DISRUPTION_REASON, ConditionStatus::True, r, r),
                None => set.clear(DISRUPTION_REASON),
            });
            let Some(patch) = patch else {
                return Ok(());
            };
            match claims
                .patch_status(node_claim, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => return Ok(()),
                Err(kube::Error::Api(s)) if s.code == 404 && reason.is_none() => return Ok(()),
                Err(kube::Error::Api(s)) if s.code == 409 && !fresh => {
                    nc = claims.get(node_claim).await.map_err(|e| e.to_string())?;
                }
                Err(e) => return Err(e.to_string()),
            }
        }
        Ok(())
    }

    async fn unmark_all(&self, nodes: impl Iterator<Item = (&str, &str)>) {
        let unmarks: Vec<_> = nodes
            .map(|(node, nc)| async move {
                if let Err(e) = self.mark(node, nc, None).await {
                    tracing::warn!(node, error = %e, "disruption mark not removed (the next loop retries)");
                }
            })
            .collect();
        stream::iter(unmarks)
            .buffer_unordered(CONCURRENCY)
            .collect::<Vec<()>>()
            .await;
    }

    async fn create(
        &self,
        planned: &scheduling::scheduler::PlannedNodeClaim,
        pools: &[NodePool],
    ) -> Result<String, String> {
        let pool = pools
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some(&*planned.node_pool))
            .ok_or_else(|| format!("nodepool {} not found", planned.node_pool))?;
        let hash = (self.hash)(pool);
        let nc =
            node_claim(planned, pool, &self.well_known, Some(&hash)).map_err(|e| e.to_string())?;
        let api: Api<NodeClaim> = Api::all(self.client.clone());
        let created = api
            .create(&PostParams::default(), &nc)
            .await
            .map_err(|e| format!("creating replacement: {e}"))?;
        let name = created.name_any();
        self.state.node_claim_created(&name);
        // Made for the candidates' pods: until they are evicted onto it, it is not empty.
        self.state.node_claim_planned(
            &name,
            planned.pods.iter().map(ToString::to_string).collect(),
        );
        self.metrics
            .nodeclaims_created
            .get_or_create(&crate::metrics::CreatedLabels {
                reason: "disrupted".into(),
                nodepool: pool.name_any(),
                min_values_relaxed: planned.min_values_relaxed.to_string(),
            })
            .inc();
        tracing::info!(nodeclaim = %name, nodepool = %pool.name_any(), "created replacement nodeclaim");
        Ok(name)
    }

    async fn await_initialized(&self, command: &Command, names: &[String]) -> Result<(), String> {
        let started = Instant::now();
        let mut changes = self.state.changes();
        let mut waiting_reported = false;
        loop {
            let mut all = true;
            for name in names {
                match self.state.node_claims().get(&ObjectRef::new(name)) {
                    Some(nc) if nc.metadata.deletion_timestamp.is_some() => {
                        return Err(format!("replacement {name} was deleted"));
                    }
                    Some(nc) => {
                        if !nc
                            .status
                            .as_ref()
                            .is_some_and(|s| s.conditions.is_true(INITIALIZED))
                        {
                            all = false;
                        }
                    }
                    None if started.elapsed() > state::bookkeeping::UNSEEN_GRACE => {
                        return Err(format!("replacement {name} was deleted"));
                    }
                    None => all = false,
                }
            }
            if all {
                return Ok(());
            }
            if !waiting_reported && started.elapsed() > Duration::from_secs(5) {
                waiting_reported = true;
                for c in &command.candidates {
                    self.event(
                        &c.node,
                        &c.node_claim,
                        Message::normal(
                            DISRUPTION_WAITING_READINESS,
                            "Waiting on readiness to continue disruption",
                        ),
                    );
                }
            }
            let budget = replacement_budget(
                self.replacement_timeout,
                self.commands.load(std::sync::atomic::Ordering::Relaxed),
            );
            if started.elapsed() > budget {
                return Err(format!("replacements not initialized within {budget:?}"));
            }
            let _ = tokio::time::timeout(Duration::from_secs(1), changes.changed()).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_replacement_budget_grows_with_the_queue_up_to_an_hour() {
        let ten = Duration::from_secs(600);
        assert_eq!(replacement_budget(ten, 1), ten);
        assert_eq!(replacement_budget(ten, 10_000), Duration::from_secs(800));
        assert_eq!(
            replacement_budget(ten, 1_000_000),
            Duration::from_secs(3600)
        );
        let two_hours = Duration::from_secs(7200);
        assert_eq!(
            replacement_budget(two_hours, 1_000_000),
            two_hours,
            "a longer flag wins"
        );
    }
}
