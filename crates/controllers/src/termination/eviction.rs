//! The eviction queue (spec §4.8 "Eviction queue"): its own task that evicts (or, past the
//! node's termination time, deletes) the pods drain hands it.
//!
//! Responsibility: [`EvictionQueue::add`] enqueues pods keyed by namespace/name, remembering the
//! UID, the node's termination deadline (the earlier one wins), the Node to report on and the
//! `pods_drained` reason. [`EvictionQueue::run`] works through due keys, up to
//! [`PARALLELISM`] at a time, with per-key exponential backoff (base → max). One attempt:
//! - the pod is gone or has another UID → done;
//! - the force-delete rules hold (re-evaluated every attempt) → DELETE with
//!   `gracePeriodSeconds = max(seconds to deadline, 1)` and a UID precondition, Normal event
//!   `Disrupted` on the pod → done;
//! - the pod is terminal or terminating → done;
//! - do-not-disrupt is active (or it tolerates the disrupted taint, or is a mirror pod) → retry;
//! - otherwise POST `pods/<name>/eviction` with a UID precondition: success → Normal event
//!   `Evicted`, `karpenter_pods_eviction_requests_total{code="200"}` and
//!   `karpenter_pods_drained_total{reason}` → done; 404/409 → done; 429 (a PDB) → Warning
//!   `FailedDraining` on the Node → retry; a 500 about several PDBs → Warning `FailedDraining`
//!   → retry; anything else → retry. API error responses are counted by their code.
//!
//! Inputs: pods from drain, a workload `kube::Client`. Outputs: evictions, pod deletions,
//! Events, metrics.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, EvictParams, Preconditions};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::events::{Events, Message};
use crate::metrics::{CodeLabels, Metrics, ReasonLabels};
use crate::termination::error::status_code;
use crate::termination::pods::{
    force_delete_grace_seconds, is_evictable, is_terminal, is_terminating, must_force_delete,
};
use crate::termination::queue::{BackoffQueue, Merge};
use crate::termination::{Clock, events as reasons};

/// How many pods are worked on at once.
pub const PARALLELISM: usize = 32;

/// A queued pod: `(namespace, name)`.
pub type PodKey = (String, String);

/// What the queue remembers about a pod.
#[derive(Debug, Clone, PartialEq)]
pub struct EvictionItem {
    /// The pod's UID when enqueued.
    pub uid: String,
    /// The node's termination time, if any.
    pub deadline: Option<Timestamp>,
    /// The Node drained (for `FailedDraining` events).
    pub node: ObjectReference,
    /// The `pods_drained` reason.
    pub reason: String,
}

impl Merge for EvictionItem {
    fn merge(&mut self, newer: Self) -> bool {
        if self.uid != newer.uid {
            *self = newer;
            return true;
        }
        self.deadline = match (self.deadline, newer.deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.node = newer.node;
        self.reason = newer.reason;
        false
    }
}

/// The outcome of one attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Done,
    Retry,
}

/// The shared handle of the eviction queue.
#[derive(Debug, Clone)]
pub struct EvictionQueue {
    queue: Arc<Mutex<BackoffQueue<PodKey, EvictionItem>>>,
    wake: Arc<Notify>,
}

/// What [`EvictionQueue::run`] works with.
#[derive(Clone)]
pub struct EvictionContext {
    /// The workload cluster.
    pub client: kube::Client,
    /// Events.
    pub events: Events,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// "Now".
    pub clock: Clock,
}

impl std::fmt::Debug for EvictionContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EvictionContext")
            .field("clock", &self.clock)
            .finish_non_exhaustive()
    }
}

impl EvictionQueue {
    /// An empty queue backing off from `base` to `max` per pod.
    #[must_use]
    pub fn new(base: Duration, max: Duration) -> Self {
        Self {
            queue: Arc::new(Mutex::new(BackoffQueue::new(base, max))),
            wake: Arc::new(Notify::new()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, BackoffQueue<PodKey, EvictionItem>> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Enqueues `pods` of `node` with the node's termination `deadline`.
    pub fn add(
        &self,
        pods: &[&Pod],
        deadline: Option<Timestamp>,
        node: &ObjectReference,
        reason: &str,
    ) {
        if pods.is_empty() {
            return;
        }
        let now = Instant::now();
        {
            let mut queue = self.lock();
            for pod in pods {
                let key = (
                    pod.metadata.namespace.clone().unwrap_or_default(),
                    pod.metadata.name.clone().unwrap_or_default(),
                );
                let item = EvictionItem {
                    uid: pod.metadata.uid.clone().unwrap_or_default(),
                    deadline,
                    node: node.clone(),
                    reason: reason.to_owned(),
                };
                queue.add(key, item, now);
            }
        }
        self.wake.notify_one();
    }

    /// How many pods are queued.
    #[must_use]
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no pod is queued.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// Works through the queue until the process ends.
    pub async fn run(self, ctx: EvictionContext) {
        let ctx = Arc::new(ctx);
        let mut in_flight = FuturesUnordered::new();
        loop {
            let now = Instant::now();
            while in_flight.len() < PARALLELISM {
                let Some((key, item)) = self.lock().pop_due(now) else {
                    break;
                };
                let ctx = Arc::clone(&ctx);
                in_flight.push(async move {
                    let outcome = attempt(&ctx, &key, &item).await;
                    (key, outcome)
                });
            }
            let next = (in_flight.len() < PARALLELISM)
                .then(|| self.lock().next_due())
                .flatten();
            let wake = self.wake.notified();
            tokio::select! {
                Some((key, outcome)) = in_flight.next(), if !in_flight.is_empty() => {
                    let mut queue = self.lock();
                    match outcome {
                        Outcome::Done => queue.done(&key),
                        Outcome::Retry => queue.retry(&key, Instant::now()),
                    }
                }
                () = wake => {}
                () = sleep_until(next), if next.is_some() => {}
            }
        }
    }
}

async fn sleep_until(at: Option<Instant>) {
    if let Some(at) = at {
        tokio::time::sleep_until(at).await;
    }
}

fn uid_precondition(uid: &str) -> Option<Preconditions> {
    Some(Preconditions {
        uid: Some(uid.to_owned()),
        resource_version: None,
    })
}

#[tracing::instrument(skip_all, fields(pod = %format!("{}/{}", key.0, key.1)))]
async fn attempt(ctx: &EvictionContext, key: &PodKey, item: &EvictionItem) -> Outcome {
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &key.0);
    let pod = match api.get_opt(&key.1).await {
        Ok(Some(pod)) => pod,
        Ok(None) => return Outcome::Done,
        Err(error) => {
            tracing::debug!(%error, "pod not read");
            return Outcome::Retry;
        }
    };
    if pod.metadata.uid.as_deref() != Some(item.uid.as_str()) {
        return Outcome::Done;
    }
    let now = ctx.clock.now();
    if let Some(deadline) = item
        .deadline
        .filter(|_| must_force_delete(&pod, item.deadline, now))
    {
        return force_delete(ctx, &api, &pod, item, deadline, now).await;
    }
    if is_terminal(&pod) || is_terminating(&pod) {
        return Outcome::Done;
    }
    if !is_evictable(&pod, now) {
        return Outcome::Retry;
    }
    evict(ctx, &api, &pod, item).await
}

async fn force_delete(
    ctx: &EvictionContext,
    api: &Api<Pod>,
    pod: &Pod,
    item: &EvictionItem,
    deadline: Timestamp,
    now: Timestamp,
) -> Outcome {
    let grace = force_delete_grace_seconds(deadline, now);
    let params = DeleteParams {
        grace_period_seconds: Some(u32::try_from(grace).unwrap_or(u32::MAX)),
        preconditions: uid_precondition(&item.uid),
        ..DeleteParams::default()
    };
    match api
        .delete(pod.metadata.name.as_deref().unwrap_or_default(), &params)
        .await
    {
        Ok(_) => {
            ctx.events.publish(
                pod,
                Message::normal(
                    reasons::DISRUPTED,
                    format!(
                        "Deleting the pod with a grace period of {grace}s to meet the node's termination time {deadline}, bypassing its PDBs and do-not-disrupt"
                    ),
                ),
            );
            ctx.metrics
                .pods_drained
                .get_or_create(&ReasonLabels {
                    reason: item.reason.clone(),
                })
                .inc();
            Outcome::Done
        }
        Err(e) if matches!(status_code(&e), Some(404 | 409)) => Outcome::Done,
        Err(error) => {
            tracing::debug!(%error, "pod not deleted");
            Outcome::Retry
        }
    }
}

async fn evict(ctx: &EvictionContext, api: &Api<Pod>, pod: &Pod, item: &EvictionItem) -> Outcome {
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let params = EvictParams {
        delete_options: Some(DeleteParams {
            preconditions: uid_precondition(&item.uid),
            ..DeleteParams::default()
        }),
        ..EvictParams::default()
    };
    let count = |code: &str| {
        ctx.metrics
            .pods_eviction_requests
            .get_or_create(&CodeLabels { code: code.into() })
            .inc();
    };
    let failed_draining = |why: String| {
        ctx.events.publish_ref(
            item.node.clone(),
            Message::warning(
                reasons::FAILED_DRAINING,
                format!("Failed to drain node, {why}"),
            ),
        );
    };
    let pod_name = format!(
        "{}/{name}",
        pod.metadata.namespace.as_deref().unwrap_or_default()
    );
    match api.evict(name, &params).await {
        Ok(_) => {
            count("200");
            ctx.metrics
                .pods_drained
                .get_or_create(&ReasonLabels {
                    reason: item.reason.clone(),
                })
                .inc();
            ctx.events.publish(
                pod,
                Message::normal(reasons::EVICTED, format!("Evicted pod {pod_name}")),
            );
            Outcome::Done
        }
        Err(kube::Error::Api(status)) => {
            count(&status.code.to_string());
            match status.code {
                404 | 409 => Outcome::Done,
                429 => {
                    failed_draining(format!("evicting pod {pod_name} violates a PDB"));
                    Outcome::Retry
                }
                500 if status.message.contains("more than one PodDisruptionBudget") => {
                    failed_draining(format!(
                        "evicting pod {pod_name}: eviction does not support multiple PDBs"
                    ));
                    Outcome::Retry
                }
                _ => {
                    tracing::debug!(
                        code = status.code,
                        message = status.message,
                        "eviction failed"
                    );
                    Outcome::Retry
                }
            }
        }
        Err(error) => {
            tracing::debug!(%error, "eviction failed");
            Outcome::Retry
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn item(uid: &str, deadline: Option<i64>) -> EvictionItem {
        EvictionItem {
            uid: uid.into(),
            deadline: deadline.map(|s| Timestamp::from_second(s).unwrap()),
            node: ObjectReference::default(),
            reason: "r".into(),
        }
    }

    #[test]
    fn merging_keeps_the_earlier_deadline_and_a_new_uid_replaces() {
        let mut a = item("u", Some(10));
        assert!(!a.merge(item("u", Some(20))));
        assert_eq!(a, item("u", Some(10)));
        assert!(!a.merge(item("u", None)));
        assert_eq!(a, item("u", Some(10)));
        let mut b = item("u", None);
        assert!(!b.merge(item("u", Some(5))));
        assert_eq!(b, item("u", Some(5)));
        assert!(b.merge(item("v", None)));
        assert_eq!(b, item("v", None));
    }
}
