//! Helpers of the simulated Cluster API tests: polling, a v1beta2 MachineDeployment, its
//! Machines, scaling, Node readiness.
#![allow(dead_code, clippy::unwrap_used, clippy::panic)]

use std::future::Future;
use std::time::Duration;

use api::well_known::capi as keys;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::{Value, json};

/// Poll `check` every 250 ms (tokio time) until it yields a value; fail after `bound` polls.
pub async fn wait_for<T, F, Fut>(what: &str, bound: usize, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    for _ in 0..bound {
        if let Some(v) = check().await {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    panic!("gave up waiting for {what}");
}

pub fn md_json(name: &str, annotations: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2",
        "kind": "MachineDeployment",
        "metadata": {"name": name, "namespace": "default", "annotations": annotations},
        "spec": {
            "clusterName": "c1",
            "replicas": 0,
            "selector": {"matchLabels": {"pool": name}},
            "template": {
                "metadata": {"labels": {"pool": name, "node-role.kubernetes.io/worker": "",
                    "team.node.cluster.x-k8s.io/owner": "a"}},
                "spec": {"clusterName": "c1", "version": "v1.33.1",
                    "bootstrap": {"dataSecretName": "boot"},
                    "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                        "kind": "DockerMachineTemplate", "name": "t"},
                    "deletion": {"nodeDrainTimeoutSeconds": 10}},
            },
        },
    }))
    .unwrap()
}

pub async fn machines_of(api: &Api<DynamicObject>, md: &str) -> Vec<Value> {
    labelled(api, keys::DEPLOYMENT_NAME, md).await
}

/// The objects of `api` labelled `key=value`.
pub async fn labelled(api: &Api<DynamicObject>, key: &str, value: &str) -> Vec<Value> {
    let lp = ListParams::default().labels(&format!("{key}={value}"));
    api.list(&lp)
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|m| serde_json::to_value(m).unwrap())
        .collect()
}

pub async fn scale(api: &Api<DynamicObject>, md: &str, replicas: i64) {
    let patch = json!({"spec": {"replicas": replicas}});
    api.patch_scale(md, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

pub fn ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The objects labelled with a MachineDeployment's name (MachineSets, Machines).
pub async fn owned_by(api: &Api<DynamicObject>, md: &str) -> Vec<Value> {
    machines_of(api, md).await
}
