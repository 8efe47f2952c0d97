//! Eviction honouring PodDisruptionBudgets, and budget status kept current.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;

use common::{api_err, client, from_json};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, EvictParams, Patch, PatchParams, PostParams};
use serde_json::json;

/// A Running pod of the ReplicaSet `web` (budgets with percentages count only pods that
/// have a controller).
async fn running_pod(pods: &Api<Pod>, name: &str, ready: bool) {
    let pod: Pod = from_json(json!({"metadata": {"name": name, "labels": {"app": "web"},
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web",
            "uid": "00000000-0000-0000-0000-0000000000e5", "controller": true}]},
        "spec": {"containers": [{"name": "c", "image": "i"}], "nodeName": "n1"}}));
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let status = json!({"status": {"phase": "Running", "conditions": [
        {"type": "Ready", "status": if ready { "True" } else { "False" }}]}});
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
}

async fn budget(client: &kube::Client, spec: serde_json::Value) -> Api<PodDisruptionBudget> {
    let pdbs: Api<PodDisruptionBudget> = Api::default_namespaced(client.clone());
    let mut spec = spec;
    spec["selector"] = json!({"matchLabels": {"app": "web"}});
    let pdb: PodDisruptionBudget = from_json(json!({"metadata": {"name": "web"}, "spec": spec}));
    pdbs.create(&PostParams::default(), &pdb).await.unwrap();
    pdbs
}

fn allowed(pdb: &PodDisruptionBudget) -> i32 {
    pdb.status.as_ref().unwrap().disruptions_allowed
}

#[tokio::test]
async fn evictions_respect_min_available() {
    let (_sim, client) = client();
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    for name in ["a", "b", "c"] {
        running_pod(&pods, name, true).await;
    }
    let pdbs = budget(&client, json!({"minAvailable": 2})).await;
    let status = pdbs.get("web").await.unwrap().status.unwrap();
    assert_eq!(
        (
            status.expected_pods,
            status.current_healthy,
            status.desired_healthy
        ),
        (3, 3, 2)
    );
    assert_eq!(status.disruptions_allowed, 1);

    pods.evict("a", &EvictParams::default()).await.unwrap();
    // A running pod terminates gracefully: it stays, marked, until its grace period is over.
    let evicted = pods.get("a").await.unwrap();
    assert!(evicted.metadata.deletion_timestamp.is_some());
    assert_eq!(evicted.metadata.deletion_grace_period_seconds, Some(30));
    assert_eq!(allowed(&pdbs.get("web").await.unwrap()), 0);

    let refused = api_err(pods.evict("b", &EvictParams::default()).await);
    assert_eq!(
        (refused.code, refused.reason.as_str()),
        (429, "TooManyRequests")
    );
    assert!(
        refused.message.contains("disruption budget"),
        "{}",
        refused.message
    );
    assert!(pods.get("b").await.is_ok());

    // A replacement becoming ready frees a disruption.
    running_pod(&pods, "d", true).await;
    assert_eq!(allowed(&pdbs.get("web").await.unwrap()), 1);
    pods.evict("b", &EvictParams::default()).await.unwrap();
}

#[tokio::test]
async fn percentages_unready_pods_and_pods_without_budgets() {
    let (_sim, client) = client();
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    for name in ["a", "b", "c", "d"] {
        running_pod(&pods, name, true).await;
    }
    running_pod(&pods, "sick", false).await;
    let pdbs = budget(&client, json!({"maxUnavailable": "25%"})).await;
    let st = pdbs.get("web").await.unwrap().status.unwrap();
    // 5 expected, 25% rounds up to 2 unavailable: 3 desired, 4 healthy.
    assert_eq!(
        (st.expected_pods, st.desired_healthy, st.current_healthy),
        (5, 3, 4)
    );
    // An unready pod can go while the budget is healthy, without using a disruption.
    pods.evict("sick", &EvictParams::default()).await.unwrap();
    let st = pdbs.get("web").await.unwrap().status.unwrap();
    assert_eq!(st.expected_pods, 4);

    let other: Pod = from_json(json!({"metadata": {"name": "lonely"},
        "spec": {"containers": [{"name": "c", "image": "i"}]}}));
    pods.create(&PostParams::default(), &other).await.unwrap();
    pods.evict("lonely", &EvictParams::default()).await.unwrap();
    assert_eq!(
        api_err(pods.evict("lonely", &EvictParams::default()).await).code,
        404
    );
}

#[tokio::test]
async fn two_budgets_for_one_pod_is_an_error() {
    let (_sim, client) = client();
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    running_pod(&pods, "a", true).await;
    budget(&client, json!({"maxUnavailable": 1})).await;
    let pdbs: Api<PodDisruptionBudget> = Api::default_namespaced(client.clone());
    let second: PodDisruptionBudget = from_json(
        json!({"metadata": {"name": "all"}, "spec": {"selector": {}, "maxUnavailable": 1}}),
    );
    pdbs.create(&PostParams::default(), &second).await.unwrap();
    let err = api_err(pods.evict("a", &EvictParams::default()).await);
    assert_eq!(err.code, 500);
}
