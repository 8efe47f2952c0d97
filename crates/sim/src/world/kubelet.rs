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
//!   grace period), as the taint manager does (`tolerationSeconds` is not waited for);
//! - a pod bound to a node that no longer exists is force-deleted (pod GC).
//!
//! Inputs: Pods and Nodes (fresh lists). Outputs: node and pod status patches, node taint
//! patches, pod deletes. Times are kept in memory (tokio time).

use std::collections::HashMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, Preconditions};
use serde_json::{Value, json};
use tokio::time::Instant;

use api::well_known::taints::NOT_READY;
use scheduling::taints::{Taint, TaintEffect};

use crate::world::WorldError;
use crate::world::config::KubeletConfig;
use crate::world::driver::{PassResult, Reconciler};
use crate::world::fit;
use crate::world::objects::{code, condition, ignore_not_found, new_condition};

/// kubelet-lite.
pub struct Kubelet {
    client: kube::Client,
    config: KubeletConfig,
    nodes_seen: HashMap<String, Instant>,
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
            bound_seen: HashMap::new(),
            terminating_seen: HashMap::new(),
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
        if taints.iter().any(|t| t.key == NOT_READY) {
            let kept: Vec<_> = taints.into_iter().filter(|t| t.key != NOT_READY).collect();
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
        let now = crate::object::now_rfc3339();
        let mut ready = new_condition(
            condition(&obj, "Ready"),
            "Ready",
            true,
            "KubeletReady",
            "kubelet is posting ready status",
        );
        crate::object::as_map(&mut ready).insert("lastHeartbeatTime".into(), json!(now));
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
        let conditions =
            with_conditions(crate::object::get_path(&obj, ".status.conditions"), fresh);
        let patch = json!({"status": {"conditions": conditions}});
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
        let obj = serde_json::to_value(pod)?;
        let now = crate::object::now_rfc3339();
        let fresh = [
            "PodReadyToStartContainers",
            "Initialized",
            "ContainersReady",
            "Ready",
        ]
        .iter()
        .map(|k| new_condition(condition(&obj, k), k, true, "", ""))
        .collect();
        let conditions =
            with_conditions(crate::object::get_path(&obj, ".status.conditions"), fresh);
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
        let patch = json!({"status": {"phase": "Running", "conditions": conditions,
            "startTime": now, "hostIP": host_ip, "hostIPs": [{"ip": host_ip}],
            "podIP": ip, "podIPs": [{"ip": ip}], "containerStatuses": containers}});
        let api: Api<Pod> = Api::namespaced(self.client.clone(), ns);
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

    async fn pod(
        &mut self,
        pod: &Pod,
        nodes: &HashMap<String, (&Node, Vec<Taint>)>,
        now: Instant,
        next: &mut Option<Duration>,
    ) -> Result<(), WorldError> {
        let Some(node_name) = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) else {
            return Ok(());
        };
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        if pod.metadata.deletion_timestamp.is_some() {
            let since = *self.terminating_seen.entry(uid).or_insert(now);
            let never_started = phase(pod) == "Pending";
            let due = since + self.config.pod_termination_delay;
            if never_started || now >= due {
                return self.delete_pod(pod, Some(0)).await;
            }
            soonest(next, due, now);
            return Ok(());
        }
        let Some((node, taints)) = nodes.get(node_name) else {
            return if self.config.pod_gc {
                self.delete_pod(pod, Some(0)).await
            } else {
                Ok(())
            };
        };
        if matches!(phase(pod), "Succeeded" | "Failed") {
            return Ok(());
        }
        if self.config.evict_untolerated_no_execute
            && let Ok(engine) = scheduling::k8s::pod(pod)
            && fit::untolerated(&engine, taints, &[TaintEffect::NoExecute]).is_some()
        {
            return self.delete_pod(pod, None).await;
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
                self.start_pod(pod, node).await?;
            } else {
                soonest(next, due, now);
            }
        }
        Ok(())
    }
}

impl Reconciler for Kubelet {
    fn name(&self) -> &'static str {
        "kubelet-lite"
    }

    async fn pass(&mut self) -> PassResult {
        let now = Instant::now();
        let pods: Api<Pod> = Api::all(self.client.clone());
        let pods = pods.list(&ListParams::default()).await?.items;
        let node_api: Api<Node> = Api::all(self.client.clone());
        let nodes = node_api.list(&ListParams::default()).await?.items;
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
        let mut first_error = None;
        for node in &nodes {
            if node.metadata.deletion_timestamp.is_some() {
                continue;
            }
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
            if ready && !has_not_ready_taint {
                continue;
            }
            let since = *self.nodes_seen.entry(uid(&node.metadata)).or_insert(now);
            let due = since + self.config.node_ready_delay;
            if now < due {
                soonest(&mut next, due, now);
                continue;
            }
            match self.make_ready(node).await {
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
        for pod in &pods {
            if let Err(e) = self.pod(pod, &by_name, now, &mut next).await {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(next), Err)
    }
}
