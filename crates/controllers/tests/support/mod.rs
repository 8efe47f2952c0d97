//! Shared setup of the controllers' integration tests: the clusterapi test world (CRDs, a
//! `default` ClusterAPINodeClass, the `Md` MachineDeployment builder; included from
//! `crates/clusterapi/tests/support`), plus NodePools, pods and a waiting helper.
#![allow(
    dead_code,
    unused_imports,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

#[path = "../../../clusterapi/tests/support/mod.rs"]
pub mod capi;

use std::future::Future;
use std::time::Duration;

use api::NodePool;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use world::World;

pub use capi::{Md, machine, md, node_claim, replicas, world, world_on};

/// Creates a NodePool `name` of the `default` NodeClass; `spec` is merged over the minimal
/// spec (e.g. `json!({"limits": {"cpu": "8"}})`). The NodePool has no status: controllers that
/// filter on `Ready` need the NodePool readiness controller running.
pub async fn node_pool(world: &World, name: &str, spec: Value) -> NodePool {
    let mut body = json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "template": {"spec": {
                "nodeClassRef": {"group": "karpenter.cluster.x-k8s.io",
                    "kind": "ClusterAPINodeClass", "name": "default"},
                "requirements": [],
            }},
        },
    });
    if let (Some(target), Value::Object(extra)) = (body["spec"].as_object_mut(), spec) {
        for (k, v) in extra {
            target.insert(k, v);
        }
    }
    let api: Api<NodePool> = Api::all(world.workload_client());
    api.create(
        &PostParams::default(),
        &serde_json::from_value(body).unwrap(),
    )
    .await
    .unwrap()
}

/// Creates a pod `name` in `default` requesting `cpu`, unbound.
pub async fn pod(world: &World, name: &str, cpu: &str) -> Pod {
    let api: Api<Pod> = Api::namespaced(world.workload_client(), "default");
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": name}},
        "spec": {"containers": [{"name": "c", "image": "busybox",
            "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}]},
    }))
    .unwrap();
    api.create(&PostParams::default(), &pod).await.unwrap()
}

/// Logs to the test's output when `TEST_LOG` holds a tracing filter (e.g. `controllers=debug`).
pub fn init_test_log() {
    if let Ok(filter) = std::env::var("TEST_LOG") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_test_writer()
            .try_init();
    }
}

/// Polls `check` every 100 ms (tokio time) until it returns `Some`, or panics after `timeout`
/// naming `what`.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
