//! Draining the Node of a deleting Machine, as Cluster API's Machine controller does before it
//! lets the instance go.
//!
//! Responsibility: one drain step per pass — cordon the Node (`spec.unschedulable`), evict
//! every pod on it through the Eviction API (PodDisruptionBudgets decide: a refused eviction
//! is tried again next pass), skipping DaemonSet pods, mirror pods and finished pods, and say
//! whether the Node is drained (no such pod left, deleting ones included: CAPI waits for them
//! to be gone) or when to look again. `spec.deletion.nodeDrainTimeoutSeconds` (v1beta2; unset
//! or 0: no limit, as CAPI) bounds the drain from when the Machine was first seen deleting.
//! A Node Karpenter drained already has nothing left to evict, so its removals pass straight
//! through; what this adds is the drain of Machines Cluster API deletes on its own (a
//! `RollingUpdate` rollout, a MachineSet scale-down, a Machine deleted by hand).
//! Inputs: the workload client, the Node's name, the Machine (v1beta2 JSON), times.
//! Outputs: Node and Eviction writes; `None` (drained, or given up) or the next look.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, EvictParams, ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::WorldError;
use crate::objects::code;

/// How soon a drain that is not done looks again.
const RETRY: Duration = Duration::from_secs(1);

/// Whether CAPI's drain evicts `pod`: not finished, not a mirror pod, not a DaemonSet's.
pub fn evictable(pod: &Pod) -> bool {
    let finished = pod
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .is_some_and(|p| p == "Succeeded" || p == "Failed");
    let mirror = pod
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key("kubernetes.io/config.mirror"));
    let daemon = pod.metadata.owner_references.as_ref().is_some_and(|refs| {
        refs.iter()
            .any(|r| r.controller == Some(true) && r.kind == "DaemonSet")
    });
    !(finished || mirror || daemon)
}

/// The drain time limit of a Machine (`spec.deletion.nodeDrainTimeoutSeconds`; 0 or unset:
/// none).
fn timeout(machine: &Value) -> Option<Duration> {
    machine
        .pointer("/spec/deletion/nodeDrainTimeoutSeconds")
        .and_then(Value::as_u64)
        .filter(|s| *s > 0)
        .map(Duration::from_secs)
}

/// One drain step of Node `node` for `machine`, first seen deleting at `since`. `Ok(None)`:
/// drained (or the time limit passed, or the Node is gone); `Ok(Some(wait))`: look again then.
pub async fn drain(
    workload: &kube::Client,
    node: &str,
    machine: &Value,
    since: Instant,
    now: Instant,
) -> Result<Option<Duration>, WorldError> {
    if timeout(machine).is_some_and(|t| now >= since + t) {
        return Ok(None);
    }
    let nodes: Api<Node> = Api::all(workload.clone());
    let Some(n) = nodes.get_opt(node).await? else {
        return Ok(None);
    };
    if !n
        .spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false)
    {
        nodes
            .patch(
                node,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"unschedulable": true}})),
            )
            .await?;
    }
    let pods: Vec<Pod> = Api::<Pod>::all(workload.clone())
        .list(&ListParams::default().fields(&format!("spec.nodeName={node}")))
        .await?
        .items
        .into_iter()
        .filter(evictable)
        .collect();
    if pods.is_empty() {
        return Ok(None);
    }
    for pod in pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
    {
        let (Some(ns), Some(name)) = (&pod.metadata.namespace, &pod.metadata.name) else {
            continue;
        };
        match Api::<Pod>::namespaced(workload.clone(), ns)
            .evict(name, &EvictParams::default())
            .await
        {
            Ok(_) => {}
            // Refused by a budget (429), gone (404), or a conflict: next pass.
            Err(e) if matches!(code(&e), Some(404 | 409 | 429 | 500)) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(Some(RETRY))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn pod(v: Value) -> Pod {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn daemon_set_mirror_and_finished_pods_stay() {
        assert!(evictable(&pod(json!({"metadata": {"name": "a"}}))));
        assert!(!evictable(&pod(
            json!({"metadata": {"name": "d", "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "u",
             "controller": true}]}})
        )));
        assert!(!evictable(&pod(json!({"metadata": {"name": "m",
            "annotations": {"kubernetes.io/config.mirror": "x"}}}))));
        assert!(!evictable(&pod(
            json!({"metadata": {"name": "f"}, "status": {"phase": "Succeeded"}})
        )));
        let rs = json!({"metadata": {"name": "r", "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u",
             "controller": true}]}});
        assert!(evictable(&pod(rs)));
    }

    #[test]
    fn the_drain_timeout_is_v1beta2_seconds_and_zero_means_none() {
        let m = |t: Value| json!({"spec": {"deletion": {"nodeDrainTimeoutSeconds": t}}});
        assert_eq!(timeout(&m(json!(30))), Some(Duration::from_secs(30)));
        assert_eq!(timeout(&m(json!(0))), None);
        assert_eq!(timeout(&json!({"spec": {}})), None);
    }
}
