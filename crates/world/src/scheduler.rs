//! kube-scheduler-lite (workload cluster).
//!
//! Responsibility: bind pending pods (no `spec.nodeName`, not deleting, our `schedulerName`)
//! through the `pods/binding` subresource to the node that fits them ([`super::fit`]) with the
//! most room left, in priority then creation order, accounting for the pods it just placed;
//! mark the rest `PodScheduled=False` with reason `Unschedulable` and kube-scheduler's
//! `0/N nodes are available: …` message (or `SchedulingGated` for pods with scheduling gates),
//! rewriting the condition only when it changes, each time with a Warning `FailedScheduling`
//! Event (core/v1, source `default-scheduler`) carrying the same message. Runs on every pod or
//! node change and every retry interval while something is unschedulable.
//! A pod that keeps failing is not rewritten on every pass: as kube-scheduler retries a pod
//! only after its backoff (1 s, doubling to 10 s), a new message for the same reason waits
//! for the pod's backoff to pass ([`WriteBackoff`]); a new reason is written at once. Binding
//! is still tried on every pass.
//! A pass decides every pending pod first (each placement counted against its node, as
//! kube-scheduler assumes a pod before its binding is written), then writes its bindings
//! concurrently ([`concurrently`]), as kube-scheduler binds from many goroutines, and sends its
//! failure writes in the background ([`Failing`]), as kube-scheduler's asynchronous API calls
//! do; while they are out, passes bind but decide no new failures.
//! Inputs: Pods and Nodes (fresh lists). Outputs: bindings, pod status patches, Events.
//! Approximations: no preemption, no volume or DRA plugins; Events are not aggregated into a
//! series.

use std::collections::HashMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::WorldError;
use crate::config::SchedulerConfig;
use crate::driver::{PassResult, Reconciler};
use crate::fit::{self, NodeInfo};
use crate::objects::{code, concurrently, condition, new_condition};
use crate::touch::Touch;

/// kube-scheduler-lite.
pub struct Scheduler {
    client: kube::Client,
    config: SchedulerConfig,
    /// Per pending pod (by UID): when its failure may be written again.
    backoff: HashMap<String, WriteBackoff>,
    /// The failure writes of an earlier pass still going out ([`Failing`]).
    failing: Option<Failing>,
}

/// A pass's failure writes (`PodScheduled=False` and the `FailedScheduling` Event), sent in the
/// background while the next passes bind, as kube-scheduler's asynchronous API calls
/// (`SchedulerAsyncAPICalls`) patch a pod's status without holding up the pods after it. At a
/// thousand pending pods a pass's failure writes took over a second, and nodes that became
/// Ready meanwhile waited for them. While one batch is out, passes decide no new failures (a
/// pod's backoff only starts when its write is decided). Aborted when dropped.
struct Failing(tokio::task::JoinHandle<Result<(), WorldError>>);

impl Drop for Failing {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// kube-scheduler's per-pod backoff (`podInitialBackoffSeconds` 1, `podMaxBackoffSeconds`
/// 10), applied to the writes a failing pod causes: after the `n`th write of a reason, a
/// changed message for that reason waits 1 s × 2ⁿ⁻¹ (at most 10 s). Without it, every pass
/// of a busy cluster rewrote every pending pod (the node count in the message changes), and
/// each write woke every controller watching pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteBackoff {
    writes: u32,
    next: Instant,
}

/// kube-scheduler's `podInitialBackoffSeconds`.
const INITIAL_BACKOFF: Duration = Duration::from_secs(1);
/// kube-scheduler's `podMaxBackoffSeconds`.
const MAX_BACKOFF: Duration = Duration::from_secs(10);

impl WriteBackoff {
    /// After one more write at `now`.
    fn after_write(previous: Option<Self>, now: Instant) -> Self {
        let writes = previous.map_or(0, |b| b.writes).saturating_add(1);
        let delay = INITIAL_BACKOFF
            .saturating_mul(
                1_u32
                    .checked_shl(writes.saturating_sub(1))
                    .unwrap_or(u32::MAX),
            )
            .min(MAX_BACKOFF);
        Self {
            writes,
            next: now + delay,
        }
    }
}

impl std::fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scheduler").finish_non_exhaustive()
    }
}

impl Scheduler {
    /// Over a workload cluster.
    pub fn new(client: kube::Client, config: SchedulerConfig) -> Self {
        Self {
            client,
            config,
            backoff: HashMap::new(),
            failing: None,
        }
    }
}

/// What the scheduler knows of a node (unreadable taints and quantities are left out).
pub fn node_info(node: &Node) -> NodeInfo {
    let labels = node
        .metadata
        .labels
        .iter()
        .flatten()
        .map(|(k, v)| {
            (
                std::sync::Arc::from(k.as_str()),
                std::sync::Arc::from(v.as_str()),
            )
        })
        .collect();
    let spec = node.spec.clone().unwrap_or_default();
    let taints = spec
        .taints
        .iter()
        .flatten()
        .filter_map(|t| scheduling::k8s::taint(t).ok())
        .collect();
    let status = node.status.clone().unwrap_or_default();
    let allocatable = scheduling::resources::Resources::parse(
        status
            .allocatable
            .iter()
            .flatten()
            .map(|(k, v)| (k.as_str(), v.0.as_str())),
    )
    .unwrap_or_default();
    let ready = status
        .conditions
        .iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    NodeInfo {
        name: node.metadata.name.clone().unwrap_or_default(),
        labels,
        taints,
        allocatable,
        ready,
        unschedulable: spec.unschedulable.unwrap_or(false),
        ..NodeInfo::default()
    }
}

fn finished(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// Nodes with the pods already bound to them accounted for.
pub fn snapshot(nodes: &[Node], pods: &[Pod]) -> Vec<NodeInfo> {
    let mut infos: Vec<NodeInfo> = nodes.iter().map(node_info).collect();
    for p in pods.iter().filter(|p| !finished(p)) {
        let Some(node) = p.spec.as_ref().and_then(|s| s.node_name.as_deref()) else {
            continue;
        };
        if let (Some(info), Ok(engine)) = (
            infos.iter_mut().find(|i| i.name == node),
            scheduling::k8s::pod(p),
        ) {
            info.place(&engine);
        }
    }
    infos
}

fn key(p: &Pod) -> (i32, String, String) {
    (
        -p.spec.as_ref().and_then(|s| s.priority).unwrap_or(0),
        p.metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.to_string())
            .unwrap_or_default(),
        format!(
            "{}/{}",
            p.metadata.namespace.as_deref().unwrap_or_default(),
            p.metadata.name.as_deref().unwrap_or_default()
        ),
    )
}

impl Scheduler {
    fn pending(&self, p: &Pod) -> bool {
        let spec = p.spec.as_ref();
        spec.and_then(|s| s.node_name.as_deref())
            .is_none_or(str::is_empty)
            && p.metadata.deletion_timestamp.is_none()
            && !finished(p)
            && spec
                .and_then(|s| s.scheduler_name.as_deref())
                .unwrap_or("default-scheduler")
                == self.config.scheduler_name
    }

    async fn bind(&self, pod: &PodRef, node: &str) -> Result<(), WorldError> {
        let (ns, name) = (pod.namespace.as_str(), pod.name.as_str());
        let api: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        let binding = json!({"apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": name, "namespace": ns},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node}});
        match api
            .create_subresource::<Value, Value>("binding", name, &PostParams::default(), &binding)
            .await
        {
            // Gone, or bound by someone else meanwhile: the next pass sees which.
            Ok(_) => Ok(()),
            Err(e) if matches!(code(&e), Some(404 | 409)) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// The `PodScheduled=False` write for `p`, unless the condition already says so (or says
    /// so for the same reason and the pod's write backoff has not passed).
    fn unschedulable(
        &mut self,
        p: &Pod,
        reason: &str,
        message: &str,
    ) -> Result<Option<Failure>, WorldError> {
        if self.failing.is_some() {
            return Ok(None);
        }
        // Only the conditions are read and rewritten: not the whole pod as JSON.
        let current = p.status.as_ref().and_then(|s| s.conditions.as_ref());
        let obj = json!({"status": {"conditions": serde_json::to_value(current)?}});
        let previous = condition(&obj, "PodScheduled");
        let same_reason = previous.is_some_and(|c| {
            c.get("status").and_then(Value::as_str) == Some("False")
                && c.get("reason").and_then(Value::as_str) == Some(reason)
        });
        let same_message =
            previous.and_then(|c| c.get("message").and_then(Value::as_str)) == Some(message);
        let uid = p.metadata.uid.clone().unwrap_or_default();
        let backoff = self.backoff.get(&uid).copied();
        let now = Instant::now();
        if same_reason && (same_message || backoff.is_some_and(|b| now < b.next)) {
            return Ok(None);
        }
        self.backoff
            .insert(uid, WriteBackoff::after_write(backoff, now));
        let mut cond = new_condition(previous, "PodScheduled", false, reason, message);
        sim::object::as_map(&mut cond).insert("lastProbeTime".into(), Value::Null);
        let mut conditions: Vec<Value> = sim::object::get_path(&obj, ".status.conditions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        conditions.retain(|c| c.get("type").and_then(Value::as_str) != Some("PodScheduled"));
        conditions.push(cond);
        Ok(Some(Failure {
            pod: PodRef::of(p),
            conditions,
            message: message.to_owned(),
        }))
    }

    /// Writes `PodScheduled=False` and, like kube-scheduler, a Warning Event each time the
    /// verdict changes.
    async fn write_unschedulable(
        client: &kube::Client,
        scheduler_name: &str,
        pod: &PodRef,
        conditions: Vec<Value>,
        message: &str,
    ) -> Result<(), WorldError> {
        let (ns, name) = (pod.namespace.as_str(), pod.name.as_str());
        // The answer is not read: decode only its identity.
        let api: Api<Touch<Pod>> = Api::namespaced(client.clone(), ns);
        let patch = json!({"status": {"conditions": conditions}});
        match api
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {}
            Err(e) if code(&e) == Some(404) => return Ok(()),
            Err(e) => return Err(e.into()),
        }
        let events: Api<Event> = Api::namespaced(client.clone(), ns);
        let now = k8s_openapi::jiff::Timestamp::now();
        let event: Event = serde_json::from_value(json!({
            "metadata": {"name": format!("{name}.{:x}", now.as_nanosecond()), "namespace": ns},
            "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": name, "namespace": ns,
                "uid": pod.uid},
            "reason": "FailedScheduling",
            "message": message,
            "type": "Warning",
            "source": {"component": scheduler_name},
            "reportingComponent": scheduler_name,
            "firstTimestamp": now.to_string(),
            "lastTimestamp": now.to_string(),
            "count": 1,
        }))?;
        match events.create(&PostParams::default(), &event).await {
            Ok(_) => Ok(()),
            Err(e) if matches!(code(&e), Some(404 | 409)) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// The failure writes of the last batch, if it is done (its first error); whether one is
    /// still going out stays in `self.failing`.
    async fn collect_failing(&mut self) -> Option<WorldError> {
        if !self.failing.as_ref().is_some_and(|f| f.0.is_finished()) {
            return None;
        }
        let mut done = self.failing.take()?;
        match (&mut done.0).await {
            Ok(Ok(())) | Err(_) => None,
            Ok(Err(e)) => Some(e),
        }
    }

    /// Sends `failures` in the background ([`Failing`]).
    fn send_failing(&mut self, failures: Vec<Failure>) {
        if failures.is_empty() {
            return;
        }
        let (client, name) = (self.client.clone(), self.config.scheduler_name.clone());
        self.failing = Some(Failing(tokio::spawn(async move {
            let (client, name) = (&client, name.as_str());
            concurrently(failures, |f| async move {
                Self::write_unschedulable(client, name, &f.pod, f.conditions, &f.message).await
            })
            .await
            .into_iter()
            .collect::<Result<Vec<()>, _>>()
            .map(drop)
        })));
    }
}

/// A failure a pass decided on: the pod's `PodScheduled=False` condition (its conditions as
/// they become), and its Event. A pass decides every pod first (each placement counted against
/// its node, as kube-scheduler assumes a pod on its node before the binding is written), then
/// binds and sends its failures ([`Failing`]).
struct Failure {
    pod: PodRef,
    conditions: Vec<Value>,
    message: String,
}

/// Which pod a write is for.
struct PodRef {
    namespace: String,
    name: String,
    uid: Option<String>,
}

impl PodRef {
    fn of(p: &Pod) -> Self {
        Self {
            namespace: p
                .metadata
                .namespace
                .clone()
                .unwrap_or_else(|| "default".into()),
            name: p.metadata.name.clone().unwrap_or_default(),
            uid: p.metadata.uid.clone(),
        }
    }
}

impl Reconciler for Scheduler {
    fn name(&self) -> &'static str {
        "kube-scheduler-lite"
    }

    async fn pass(&mut self) -> PassResult {
        let earlier_failure = self.collect_failing().await;
        let pods: Vec<Pod> = crate::lean::list(&self.client).await?;
        let nodes: Vec<Node> = crate::lean::list(&self.client).await?;
        let mut infos = snapshot(&nodes, &pods);
        let mut pending: Vec<&Pod> = pods.iter().filter(|p| self.pending(p)).collect();
        pending.sort_by_key(|p| key(p));
        let pending_uids: std::collections::HashSet<&str> = pending
            .iter()
            .filter_map(|p| p.metadata.uid.as_deref())
            .collect();
        self.backoff
            .retain(|uid, _| pending_uids.contains(uid.as_str()));
        let mut waiting = false;
        let (mut binds, mut failures) = (Vec::new(), Vec::new());
        for p in pending {
            let gated = p
                .spec
                .as_ref()
                .and_then(|s| s.scheduling_gates.as_ref())
                .is_some_and(|g| !g.is_empty());
            if gated {
                failures.extend(self.unschedulable(
                    p,
                    "SchedulingGated",
                    "Scheduling is blocked due to non-empty scheduling gates",
                )?);
                continue;
            }
            let engine = match scheduling::k8s::pod(p) {
                Ok(e) => e,
                Err(e) => {
                    failures.extend(self.unschedulable(p, "Unschedulable", &e.to_string())?);
                    waiting = true;
                    continue;
                }
            };
            let topology = fit::Topology::new(&engine, &infos);
            let verdicts: Vec<Vec<fit::Reason>> = infos
                .iter()
                .map(|n| fit::filter(&engine, n, &topology))
                .collect();
            let best = infos
                .iter()
                .enumerate()
                .filter(|(i, _)| verdicts.get(*i).is_some_and(Vec::is_empty))
                .max_by(|(_, a), (_, b)| {
                    fit::score(&engine, a)
                        .cmp(&fit::score(&engine, b))
                        .then_with(|| b.name.cmp(&a.name))
                })
                .map(|(i, _)| i);
            match best.and_then(|i| infos.get_mut(i)) {
                Some(node) => {
                    node.place(&engine);
                    binds.push((PodRef::of(p), node.name.clone()));
                }
                None => {
                    waiting = true;
                    let message = fit::message(infos.len(), &verdicts);
                    failures.extend(self.unschedulable(p, "Unschedulable", &message)?);
                }
            }
        }
        // Bindings first and awaited (the next pass must see them); failures go out behind.
        waiting |= self.failing.is_some();
        let this = &*self;
        let results = concurrently(
            binds,
            |(pod, node)| async move { this.bind(&pod, &node).await },
        )
        .await;
        self.send_failing(failures);
        results.into_iter().collect::<Result<Vec<()>, _>>()?;
        if let Some(e) = earlier_failure {
            return Err(e);
        }
        Ok(waiting.then_some(self.config.retry_interval))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A pass's failure writes go out behind it: with every pod status write hanging for ten
    /// minutes, a pass over an unschedulable pod returns at once, and once a node fits the pod
    /// the next pass binds it while that write is still out.
    #[tokio::test(start_paused = true)]
    async fn failure_writes_go_out_behind_and_do_not_hold_binding_back() {
        let server = sim::Sim::new(sim::SimConfig::default());
        server.set_faults(sim::fault::FaultConfig {
            seed: 1,
            rules: vec![sim::fault::FaultRule {
                verbs: vec![sim::fault::Verb::Patch],
                resources: vec!["pods/status".into()],
                latency: Duration::from_secs(600),
                ..sim::fault::FaultRule::default()
            }],
        });
        let client = kube::Client::new(server.router(), "default");
        let pods: Api<Pod> = Api::default_namespaced(client.clone());
        let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "i",
                "resources": {"requests": {"cpu": "1"}}}]}}))
        .unwrap();
        pods.create(&PostParams::default(), &pod).await.unwrap();
        let mut scheduler = Scheduler::new(client.clone(), SchedulerConfig::default());

        let first = tokio::time::timeout(Duration::from_secs(5), scheduler.pass()).await;
        assert!(first.is_ok(), "the pass waited for its failure write");
        assert!(scheduler.failing.is_some(), "no failure write was sent");

        let node: Node = serde_json::from_value(json!({"metadata": {"name": "n1",
                "labels": {"kubernetes.io/hostname": "n1"}},
            "status": {"allocatable": {"cpu": "2", "memory": "8Gi", "pods": "10"},
                "capacity": {"cpu": "2", "memory": "8Gi", "pods": "10"},
                "conditions": [{"type": "Ready", "status": "True"}]}}))
        .unwrap();
        Api::<Node>::all(client.clone())
            .create(&PostParams::default(), &node)
            .await
            .unwrap();
        tokio::time::timeout(Duration::from_secs(5), scheduler.pass())
            .await
            .unwrap()
            .unwrap();
        let bound = pods.get("p").await.unwrap();
        assert_eq!(bound.spec.and_then(|s| s.node_name).as_deref(), Some("n1"));
        assert!(
            scheduler
                .failing
                .as_ref()
                .is_some_and(|f| !f.0.is_finished()),
            "the failure write should still be out"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_failing_pods_writes_back_off_from_one_to_ten_seconds() {
        let start = Instant::now();
        let mut b = None;
        let mut delays = Vec::new();
        for _ in 0..7 {
            let next = WriteBackoff::after_write(b, start);
            delays.push(next.next - start);
            b = Some(next);
        }
        let secs: Vec<u64> = delays.iter().map(Duration::as_secs).collect();
        assert_eq!(secs, [1, 2, 4, 8, 10, 10, 10]);
        // Many writes later it still neither overflows nor exceeds the maximum.
        let mut b = WriteBackoff::after_write(None, start);
        for _ in 0..100 {
            b = WriteBackoff::after_write(Some(b), start);
        }
        assert_eq!(b.next - start, MAX_BACKOFF);
    }
}
