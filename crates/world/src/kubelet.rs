//! kubelet-lite, with the node-lifecycle taint manager and pod garbage collection (workload
//! cluster).
//!
//! Responsibility, for every node:
//! - a node becomes `Ready` (and loses `node.kubernetes.io/not-ready`) a configurable delay
//!   after this controller first saw it;
//! - a pod bound to a Ready node becomes `Running` with `Initialized`, `ContainersReady`,
//!   `Ready` and `PodReadyToStartContainers` true, `startTime`, IPs and running container
//!   statuses, a configurable delay after it was first seen bound;
//! - a terminating pod is removed (deleted with grace period 0, uid precondition) a
//!   configurable delay after it was first seen terminating — at once if it never started;
//! - a pod that does not tolerate a `NoExecute` taint of its node is evicted (deleted with its
//!   grace period), as the taint manager does; one that tolerates it only for
//!   `tolerationSeconds` (e.g. the 300 s DefaultTolerationSeconds adds for not-ready and
//!   unreachable) is evicted that long after the taint was first seen;
//! - a pod bound to a node that no longer exists is force-deleted (pod GC);
//! - a node annotated `sim.karpenter-capi.dev/node-failure: NotReady` is lost: `Ready=Unknown`
//!   (`NodeStatusUnknown`) and tainted `node.kubernetes.io/unreachable` NoSchedule + NoExecute,
//!   as the node lifecycle controller does; without the annotation it recovers like a new node;
//! - a cordoned node (`spec.unschedulable`) gets `node.kubernetes.io/unschedulable:NoSchedule`
//!   and an uncordoned one loses it, as the node lifecycle controller does.
//!
//! A pass decides for every node and pod first, then writes concurrently.
//! Inputs: Pods and Nodes (fresh lists). Outputs: node and pod status patches, node taint
//! patches, pod deletes. Times are kept in memory (tokio time).

use std::collections::HashMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use serde_json::{Value, json};
use tokio::time::Instant;

use api::well_known::taints::{NOT_READY, UNREACHABLE, UNSCHEDULABLE};

use crate::config::annotations::{NODE_FAILURE, NOT_READY as FAILURE_NOT_READY};
use scheduling::taints::{Taint, TaintEffect};

use crate::WorldError;
use crate::config::KubeletConfig;
use crate::driver::{PassResult, Reconciler};
use crate::objects::{code, concurrently, condition, ignore_not_found, new_condition};
use crate::touch::Touch;

/// kubelet-lite.
pub struct Kubelet {
    client: kube::Client,
    config: KubeletConfig,
    nodes_seen: HashMap<String, Instant>,
    /// (node name, taint key) of NoExecute taints → when first seen (tolerationSeconds).
    no_execute_seen: HashMap<(String, String), Instant>,
    bound_seen: HashMap<String, Instant>,
    terminating_seen: HashMap<String, Instant>,
}

impl std::fmt::Debug for Kubelet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kubelet").finish_non_exhaustive()
    }
}

fn soonest(next: &mut Option<Duration>, at: Instant, now: Instant) {
    let d = at.saturating_duration_since(now);
    *next = Some(next.map_or(d, |n| n.min(d)));
}

fn phase(p: &Pod) -> &str {
    p.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending")
}

/// A stable pod IP for a pod uid.
fn pod_ip(uid: &str) -> String {
    let h = uid.bytes().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    let [_, _, b, c] = h.to_be_bytes();
    format!("10.244.{b}.{}", c.max(2))
}

/// Replace (or add) conditions by type, keeping the others.
fn with_conditions(current: Option<&Value>, new: Vec<Value>) -> Vec<Value> {
    let mut out: Vec<Value> = current
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for c in new {
        let kind = c.get("type").cloned();
        out.retain(|o| o.get("type") != kind.as_ref());
        out.push(c);
    }
    out
}

impl Kubelet {
    /// Over a workload cluster.
    pub fn new(client: kube::Client, config: KubeletConfig) -> Self {
        Self {
            client,
            config,
            nodes_seen: HashMap::new(),
            no_execute_seen: HashMap::new(),
            bound_seen: HashMap::new(),
            terminating_seen: HashMap::new(),
        }
    }

    /// The node's kubelet stopped posting status: `Ready=Unknown` and the unreachable taints.
    async fn make_lost(&self, node: &Node) -> Result<Option<Duration>, WorldError> {
        let api: Api<Node> = Api::all(self.client.clone());
        let name = node.metadata.name.as_deref().unwrap_or_default();
        let mut taints = node
            .spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .unwrap_or_default();
        let mut changed = false;
        for effect in ["NoSchedule", "NoExecute"] {
            if !taints
                .iter()
                .any(|t| t.key == UNREACHABLE && t.effect == effect)
            {
                taints.push(k8s_openapi::api::core::v1::Taint {
                    key: UNREACHABLE.into(),
                    effect: effect.into(),
                    time_added: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                        k8s_openapi::jiff::Timestamp::now(),
                    )),
                    value: None,
                });
                changed = true;
            }
        }
        if changed {
            let patch = json!({"metadata": {"resourceVersion": node.metadata.resource_version},
                "spec": {"taints": serde_json::to_value(&taints)?}});
            match api
                .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => {}
                Err(e) if code(&e) == Some(409) => return Ok(Some(Duration::from_millis(100))),
                Err(e) => return Err(e.into()),
            }
        }
        let obj = serde_json::to_value(node)?;
        let previous = condition(&obj, "Ready");
        if previous
            .and_then(|c| c.get("status"))
            .and_then(Value::as_str)
            == Some("Unknown")
        {
            return Ok(None);
        }
        let mut ready = new_condition(
            previous,
            "Ready",
            true,
            "NodeStatusUnknown",
            "Kubelet stopped posting node status.",
        );
        let map = sim::object::as_map(&mut ready);
        map.insert("status".into(), json!("Unknown"));
        map.insert(
            "lastTransitionTime".into(),
            json!(sim::object::now_rfc3339()),
        );
        let conditions = with_conditions(
            sim::object::get_path(&obj, ".status.conditions"),
            vec![ready],
        );
        let patch = json!({"status": {"conditions": conditions}});
        ignore_not_found(
            api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await,
        )?;
        Ok(None)
    }

    /// Add `node.kubernetes.io/unschedulable:NoSchedule` to a cordoned node, remove it from
    /// one that is not (compare-and-set on the resourceVersion; a conflict retries soon).
    async fn sync_cordon(&self, node: &Node) -> Result<Option<Duration>, WorldError> {
        let api: Api<Node> = Api::all(self.client.clone());
        let name = node.metadata.name.as_deref().unwrap_or_default();
        let mut taints: Vec<Value> = node
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .into_iter()
            .flatten()
            .filter(|t| t.key != UNSCHEDULABLE)
            .map(serde_json::to_value)
            .collect::<Result<_, _>>()?;
        if cordoned(node) {
            taints.push(json!({"key": UNSCHEDULABLE, "effect": "NoSchedule",
                "timeAdded": sim::object::now_rfc3339()}));
        }
        let patch = json!({"metadata": {"resourceVersion": node.metadata.resource_version},
            "spec": {"taints": if taints.is_empty() { Value::Null } else { Value::Array(taints) }}});
        match api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => Ok(None),
            Err(e) if code(&e) == Some(409) => Ok(Some(Duration::from_millis(100))),
            Err(e) if code(&e) == Some(404) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    async fn make_ready(&self, node: &Node) -> Result<Option<Duration>, WorldError> {
        let api: Api<Node> = Api::all(self.client.clone());
        let name = node.metadata.name.as_deref().unwrap_or_default();
        let taints = node
            .spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .unwrap_or_default();
        if taints
            .iter()
            .any(|t| t.key == NOT_READY || t.key == UNREACHABLE)
        {
            let kept: Vec<_> = taints
                .into_iter()
                .filter(|t| t.key != NOT_READY && t.key != UNREACHABLE)
                .collect();
            let patch = json!({"metadata": {"resourceVersion": node.metadata.resource_version},
                "spec": {"taints": if kept.is_empty() { Value::Null } else { serde_json::to_value(kept)? }}});
            match api
                .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => {}
                Err(e) if code(&e) == Some(409) => return Ok(Some(Duration::from_millis(100))),
                Err(e) => return Err(e.into()),
            }
        }
        let obj = serde_json::to_value(node)?;
        let now = sim::object::now_rfc3339();
        let mut ready = new_condition(
            condition(&obj, "Ready"),
            "Ready",
            true,
            "KubeletReady",
            "kubelet is posting ready status",
        );
        sim::object::as_map(&mut ready).insert("lastHeartbeatTime".into(), json!(now));
        let mut fresh = vec![ready];
        for (kind, reason) in [
            ("MemoryPressure", "KubeletHasSufficientMemory"),
            ("DiskPressure", "KubeletHasNoDiskPressure"),
            ("PIDPressure", "KubeletHasSufficientPID"),
        ] {
            fresh.push(new_condition(
                condition(&obj, kind),
                kind,
                false,
                reason,
                "",
            ));
        }
        let conditions = with_conditions(sim::object::get_path(&obj, ".status.conditions"), fresh);
        let patch =
            json!({"status": with_addresses(node, name, json!({"conditions": conditions}))});
        ignore_not_found(
            api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await,
        )?;
        Ok(None)
    }

    async fn start_pod(&self, pod: &Pod, node: &Node) -> Result<(), WorldError> {
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        // Only the conditions are read and rewritten: not the whole pod as JSON.
        let current = pod.status.as_ref().and_then(|s| s.conditions.as_ref());
        let obj = json!({"status": {"conditions": serde_json::to_value(current)?}});
        let now = sim::object::now_rfc3339();
        let fresh = [
            "PodReadyToStartContainers",
            "Initialized",
            "ContainersReady",
            "Ready",
        ]
        .iter()
        .map(|k| new_condition(condition(&obj, k), k, true, "", ""))
        .collect();
        let conditions = with_conditions(sim::object::get_path(&obj, ".status.conditions"), fresh);
        let containers: Vec<Value> = pod
            .spec
            .iter()
            .flat_map(|s| s.containers.iter())
            .map(|c| {
                json!({"name": c.name, "image": c.image.clone().unwrap_or_default(),
                    "imageID": "", "containerID": format!("sim://{uid}-{}", c.name),
                    "ready": true, "started": true, "restartCount": 0,
                    "state": {"running": {"startedAt": now}}})
            })
            .collect();
        let host_ip = node
            .status
            .as_ref()
            .and_then(|s| s.addresses.as_ref())
            .and_then(|a| a.iter().find(|a| a.type_ == "InternalIP"))
            .map(|a| a.address.clone())
            .unwrap_or_default();
        let ip = pod_ip(uid);
        let mut status = json!({"phase": "Running", "conditions": conditions,
            "startTime": now, "podIP": ip, "podIPs": [{"ip": ip}],
            "containerStatuses": containers});
        if !host_ip.is_empty()
            && let Value::Object(map) = &mut status
        {
            map.insert("hostIP".into(), json!(host_ip));
            map.insert("hostIPs".into(), json!([{"ip": host_ip}]));
        }
        let patch = json!({ "status": status });
        // The answer is not read: decode only its identity.
        let api: Api<Touch<Pod>> = Api::namespaced(self.client.clone(), ns);
        ignore_not_found(
            api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await,
        )
    }

    async fn delete_pod(&self, pod: &Pod, grace: Option<u32>) -> Result<(), WorldError> {
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        let api: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        let params = DeleteParams {
            grace_period_seconds: grace,
            preconditions: Some(Preconditions {
                uid: pod.metadata.uid.clone(),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match api
            .delete(pod.metadata.name.as_deref().unwrap_or_default(), &params)
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if matches!(code(&e), Some(404 | 409)) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// What to do with `pod` now, if anything (and when to look again, in `next`).
    fn pod(
        &mut self,
        pod: &Pod,
        nodes: &HashMap<String, (&Node, Vec<Taint>)>,
        now: Instant,
        next: &mut Option<Duration>,
    ) -> Option<PodAction> {
        let node_name = pod.spec.as_ref().and_then(|s| s.node_name.as_deref())?;
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        if pod.metadata.deletion_timestamp.is_some() {
            let since = *self.terminating_seen.entry(uid).or_insert(now);
            let never_started = phase(pod) == "Pending";
            let due = since + self.config.pod_termination_delay;
            if never_started || now >= due {
                return Some(PodAction::Delete(Some(0)));
            }
            soonest(next, due, now);
            return None;
        }
        let Some((node, taints)) = nodes.get(node_name) else {
            return self.config.pod_gc.then_some(PodAction::Delete(Some(0)));
        };
        if matches!(phase(pod), "Succeeded" | "Failed") {
            return None;
        }
        if self.config.evict_untolerated_no_execute {
            match self.eviction_due(pod, node_name, taints, now) {
                Some(due) if due <= now => return Some(PodAction::Delete(None)),
                Some(due) => soonest(next, due, now),
                None => {}
            }
        }
        let node_ready = node
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
        if phase(pod) == "Pending" && node_ready {
            let since = *self.bound_seen.entry(uid).or_insert(now);
            let due = since + self.config.pod_start_delay;
            if now >= due {
                return Some(PodAction::Start);
            }
            soonest(next, due, now);
        }
        None
    }

    async fn act_on_pod(
        &self,
        pod: &Pod,
        action: PodAction,
        nodes: &HashMap<String, (&Node, Vec<Taint>)>,
    ) -> Result<(), WorldError> {
        match action {
            PodAction::Delete(grace) => self.delete_pod(pod, grace).await,
            PodAction::Start => {
                let node = pod
                    .spec
                    .as_ref()
                    .and_then(|s| s.node_name.as_deref())
                    .and_then(|n| nodes.get(n));
                match node {
                    Some((node, _)) => self.start_pod(pod, node).await,
                    None => Ok(()),
                }
            }
        }
    }
}

/// What a pass does to a pod. A pass decides for every node and pod first, then acts on them
/// concurrently ([`concurrently`]), as a kubelet per node would.
#[derive(Debug, Clone, Copy)]
enum PodAction {
    /// Delete it with this grace period (`None`: its own).
    Delete(Option<u32>),
    /// Start it on its (Ready) node.
    Start,
}

/// What a pass does to a node.
#[derive(Debug, Clone, Copy)]
enum NodeAction {
    /// Mark it lost (annotated to fail).
    Lost,
    /// Make it Ready.
    Ready,
    /// Add or remove the unschedulable taint to match `spec.unschedulable`.
    Cordon,
}

impl Kubelet {
    /// When the taint manager evicts `pod` from `node`: now for a NoExecute taint it does not
    /// tolerate; for taints tolerated only for `tolerationSeconds`, that long after the taint
    /// was first seen (the earliest such deadline); never when every NoExecute taint is
    /// tolerated without a limit.
    fn eviction_due(
        &self,
        pod: &Pod,
        node: &str,
        taints: &[Taint],
        now: Instant,
    ) -> Option<Instant> {
        let tolerations = pod
            .spec
            .as_ref()
            .and_then(|s| s.tolerations.as_deref())
            .unwrap_or_default();
        let mut due: Option<Instant> = None;
        for taint in taints.iter().filter(|t| t.effect == TaintEffect::NoExecute) {
            let matching: Vec<&k8s_openapi::api::core::v1::Toleration> =
                tolerations.iter().filter(|t| tolerates(t, taint)).collect();
            if matching.is_empty() {
                return Some(now);
            }
            if matching.iter().any(|t| t.toleration_seconds.is_none()) {
                continue;
            }
            let seconds = matching
                .iter()
                .filter_map(|t| t.toleration_seconds)
                .min()
                .unwrap_or(0)
                .max(0);
            let seen = self
                .no_execute_seen
                .get(&(node.to_owned(), taint.key.clone()))
                .copied()
                .unwrap_or(now);
            let at = seen + Duration::from_secs(seconds.unsigned_abs());
            due = Some(due.map_or(at, |d| d.min(at)));
        }
        due
    }
}

/// Whether a Kubernetes toleration tolerates `taint` (key, operator, value, effect).
fn tolerates(t: &k8s_openapi::api::core::v1::Toleration, taint: &Taint) -> bool {
    let effect_ok = t
        .effect
        .as_deref()
        .is_none_or(|e| e.is_empty() || e == taint.effect.to_string());
    let key = t.key.as_deref().unwrap_or_default();
    let matches = match t.operator.as_deref() {
        Some("Exists") => key.is_empty() || key == taint.key,
        _ => key == taint.key && t.value.as_deref().unwrap_or_default() == taint.value,
    };
    effect_ok && matches
}

impl Reconciler for Kubelet {
    fn name(&self) -> &'static str {
        "kubelet-lite"
    }

    async fn pass(&mut self) -> PassResult {
        let now = Instant::now();
        let pods: Vec<Pod> = crate::lean::list(&self.client).await?;
        let nodes: Vec<Node> = crate::lean::list(&self.client).await?;
        let uid = |m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
            m.uid.clone().unwrap_or_default()
        };
        let node_uids: std::collections::HashSet<String> =
            nodes.iter().map(|n| uid(&n.metadata)).collect();
        let pod_uids: std::collections::HashSet<String> =
            pods.iter().map(|p| uid(&p.metadata)).collect();
        self.nodes_seen.retain(|u, _| node_uids.contains(u));
        self.bound_seen.retain(|u, _| pod_uids.contains(u));
        self.terminating_seen.retain(|u, _| pod_uids.contains(u));
        let mut next = None;
        let mut node_actions = Vec::new();
        for (i, node) in nodes.iter().enumerate() {
            if node.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let lost = node
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(NODE_FAILURE))
                .is_some_and(|v| v == FAILURE_NOT_READY);
            if cordon_out_of_step(node) {
                node_actions.push((i, NodeAction::Cordon));
            }
            if lost {
                // A healed node counts as new: it becomes Ready a delay after it heals.
                self.nodes_seen.remove(&uid(&node.metadata));
                node_actions.push((i, NodeAction::Lost));
                continue;
            }
            let unreachable = node
                .spec
                .as_ref()
                .and_then(|s| s.taints.as_ref())
                .is_some_and(|ts| ts.iter().any(|t| t.key == UNREACHABLE));
            let ready = node
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
            let has_not_ready_taint = node
                .spec
                .as_ref()
                .and_then(|s| s.taints.as_ref())
                .is_some_and(|ts| ts.iter().any(|t| t.key == NOT_READY));
            if ready && !has_not_ready_taint && !unreachable {
                continue;
            }
            let since = *self.nodes_seen.entry(uid(&node.metadata)).or_insert(now);
            let due = since + self.config.node_ready_delay;
            if now < due {
                soonest(&mut next, due, now);
                continue;
            }
            node_actions.push((i, NodeAction::Ready));
        }
        let mut first_error = None;
        let nodes_ref = &nodes;
        let this = &*self;
        for result in concurrently(node_actions, |(i, action)| async move {
            let Some(node) = nodes_ref.get(i) else {
                return Ok(None);
            };
            match action {
                NodeAction::Lost => this.make_lost(node).await,
                NodeAction::Ready => this.make_ready(node).await,
                NodeAction::Cordon => this.sync_cordon(node).await,
            }
        })
        .await
        {
            match result {
                Ok(Some(d)) => next = Some(next.map_or(d, |n: Duration| n.min(d))),
                Ok(None) => {}
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        let by_name: HashMap<String, (&Node, Vec<Taint>)> = nodes
            .iter()
            .map(|n| {
                let taints = super::scheduler::node_info(n).taints;
                (n.metadata.name.clone().unwrap_or_default(), (n, taints))
            })
            .collect();
        let present: std::collections::HashSet<(String, String)> = by_name
            .iter()
            .flat_map(|(name, (_, taints))| {
                taints
                    .iter()
                    .filter(|t| t.effect == TaintEffect::NoExecute)
                    .map(move |t| (name.clone(), t.key.clone()))
            })
            .collect();
        self.no_execute_seen.retain(|k, _| present.contains(k));
        for k in present {
            self.no_execute_seen.entry(k).or_insert(now);
        }
        let mut pod_actions = Vec::new();
        for (i, pod) in pods.iter().enumerate() {
            if let Some(action) = self.pod(pod, &by_name, now, &mut next) {
                pod_actions.push((i, action));
            }
        }
        let (pods_ref, by_name_ref, this) = (&pods, &by_name, &*self);
        for result in concurrently(pod_actions, |(i, action)| async move {
            match pods_ref.get(i) {
                Some(pod) => this.act_on_pod(pod, action, by_name_ref).await,
                None => Ok(()),
            }
        })
        .await
        {
            if let Err(e) = result {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(next), Err)
    }
}

/// Whether `node` is cordoned (`spec.unschedulable`).
fn cordoned(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false)
}

/// Whether `node`'s unschedulable taint disagrees with `spec.unschedulable`.
fn cordon_out_of_step(node: &Node) -> bool {
    let tainted = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|ts| {
            ts.iter()
                .any(|t| t.key == UNSCHEDULABLE && t.effect == "NoSchedule")
        });
    tainted != cordoned(node)
}

/// `status` with the node's addresses added when it reports none: a kubelet reports its
/// addresses, and pods' `hostIP` comes from them (kube-apiserver rejects an empty one).
fn with_addresses(node: &Node, name: &str, mut status: Value) -> Value {
    let addressed = node
        .status
        .as_ref()
        .and_then(|s| s.addresses.as_ref())
        .is_some_and(|a| !a.is_empty());
    if !addressed && let Value::Object(map) = &mut status {
        map.insert(
            "addresses".into(),
            json!([
                {"type": "InternalIP", "address": super::node_template::ip_for(name)},
                {"type": "Hostname", "address": name},
            ]),
        );
    }
    status
}
