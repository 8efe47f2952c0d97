//! Pods as the workload controllers read them: only the fields a ReplicaSet or DaemonSet
//! controller decides on.
//!
//! Responsibility: list every pod decoding just those fields (the rest of each pod is skipped
//! by the decoder, not built and dropped), as JSON at the same paths as a whole pod, so the
//! controllers' JSON readers work unchanged. At a thousand pods, decoding whole pods into JSON
//! values on every pass was most of the simulated world's CPU time.
//! Inputs: a workload client. Outputs: brief pods as JSON.

use k8s_openapi::api::core::v1::Pod;
use kube::Resource;
use kube::api::ListParams;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::WorldError;

/// A pod list's items, each brief.
#[derive(Deserialize)]
struct List {
    #[serde(default)]
    items: Vec<Brief>,
}

/// A pod, brief.
#[derive(Debug, Default, Deserialize, Serialize)]
struct Brief {
    #[serde(default)]
    metadata: Meta,
    #[serde(default)]
    spec: Spec,
    #[serde(default)]
    status: Status,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
struct Meta {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    uid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    creation_timestamp: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    deletion_timestamp: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    labels: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    owner_references: Option<Vec<Owner>>,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
struct Owner {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    api_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    uid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    controller: Option<bool>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
struct Spec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    node_name: Option<String>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
struct Status {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    phase: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    conditions: Option<Vec<Condition>>,
}

#[derive(Debug, Deserialize, Serialize)]
struct Condition {
    #[serde(rename = "type")]
    type_: String,
    status: String,
}

/// Every pod (all namespaces) with only: `metadata.name`, `namespace`, `uid`,
/// `creationTimestamp`, `deletionTimestamp`, `labels`, `ownerReferences`; `spec.nodeName`;
/// `status.phase` and `status.conditions[].type`/`status`.
///
/// # Errors
/// The list fails.
pub async fn pods(client: &kube::Client) -> Result<Vec<Value>, WorldError> {
    let request = kube::core::Request::new(Pod::url_path(&(), None))
        .list(&ListParams::default())
        .map_err(kube::Error::BuildRequest)?;
    let list: List = client.request(request).await?;
    list.items
        .into_iter()
        .map(|p| serde_json::to_value(p).map_err(WorldError::from))
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn a_brief_pod_keeps_the_read_fields_at_their_paths_and_nothing_else() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web-1", "namespace": "default", "uid": "u1",
                "creationTimestamp": "2026-01-01T00:00:00Z",
                "deletionTimestamp": "2026-01-02T00:00:00Z",
                "labels": {"app": "web"}, "annotations": {"a": "b"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                    "name": "web", "uid": "rs1", "controller": true}]},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": "Running", "podIP": "10.0.0.1",
                "conditions": [{"type": "Ready", "status": "True", "reason": "r"}]}});
        let brief = serde_json::to_value(serde_json::from_value::<Brief>(pod).unwrap()).unwrap();
        assert_eq!(
            brief,
            json!({"metadata": {"name": "web-1", "namespace": "default", "uid": "u1",
                    "creationTimestamp": "2026-01-01T00:00:00Z",
                    "deletionTimestamp": "2026-01-02T00:00:00Z", "labels": {"app": "web"},
                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                        "name": "web", "uid": "rs1", "controller": true}]},
                "spec": {"nodeName": "n1"},
                "status": {"phase": "Running",
                    "conditions": [{"type": "Ready", "status": "True"}]}})
        );
        assert_eq!(
            serde_json::to_value(serde_json::from_value::<Brief>(json!({})).unwrap()).unwrap(),
            json!({"metadata": {}, "spec": {}, "status": {}})
        );
    }
}
