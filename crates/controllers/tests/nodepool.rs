//! The NodePool hash, readiness and counter controllers against the simulated world.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use api::common::ConditionStatus;
use api::well_known::annotations::{NODEPOOL_HASH, NODEPOOL_HASH_VERSION};
use api::well_known::conditions::reasons::{NODE_CLASS_NOT_FOUND, NODEPOOL_VALIDATION_FAILED};
use api::well_known::conditions::{NODE_CLASS_READY, READY, VALIDATION_SUCCEEDED};
use api::{ClusterAPINodeClass, NodeClaim, NodePool};
use controllers::events::Events;
use controllers::metrics::Metrics;
use controllers::nodepool::NodePoolControllers;
use controllers::nodepool::hash::{HASH_VERSION, pool_hash};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use state::StateConfig;
use support::{node_pool, wait_for, world_on};
use world::{Backend, World, WorldConfig};

const WAIT: Duration = Duration::from_secs(20);

async fn started(backend: Backend) -> (World, Arc<Metrics>) {
    let world = world_on(backend, WorldConfig::default()).await;
    let metrics = Arc::new(Metrics::new());
    let state = state::ClusterState::start(&world.workload_client(), StateConfig::default());
    let controllers = NodePoolControllers::new(
        world.workload_client(),
        state,
        Events::recording(),
        Arc::clone(&metrics),
    );
    tokio::spawn(controllers.run());
    (world, metrics)
}

fn pools(world: &World) -> Api<NodePool> {
    Api::all(world.workload_client())
}

/// The condition `type_` of pool `name` as (status, reason, message), once present.
async fn condition(world: &World, name: &str, type_: &str) -> Option<(ConditionStatus, String)> {
    let pool = pools(world).get(name).await.ok()?;
    let c = pool
        .status?
        .conditions?
        .into_iter()
        .find(|c| c.type_ == type_)?;
    Some((c.status, c.reason))
}

async fn wait_condition(
    world: &World,
    name: &str,
    type_: &str,
    status: ConditionStatus,
    reason: &str,
) {
    wait_for(
        &format!("{name} {type_}={status:?}/{reason}"),
        WAIT,
        || async {
            let c = condition(world, name, type_).await?;
            (c.0 == status && c.1 == reason).then_some(())
        },
    )
    .await;
}

async fn set_node_class_ready(world: &World, status: &str, reason: &str) {
    let classes: Api<ClusterAPINodeClass> = Api::all(world.workload_client());
    let patch = json!({"status": {"conditions": [{"type": "Ready", "status": status,
        "reason": reason, "message": "from the test",
        "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
    classes
        .patch_status("default", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

async fn claim(world: &World, name: &str, pool: &str, drifted: bool) -> NodeClaim {
    let api: Api<NodeClaim> = Api::all(world.workload_client());
    let nc: NodeClaim = serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": pool},
            "annotations": {NODEPOOL_HASH: "1", NODEPOOL_HASH_VERSION: "v3"}},
        "spec": {
            "nodeClassRef": {"group": "karpenter.cluster.x-k8s.io", "kind": "ClusterAPINodeClass",
                "name": "default"},
            "requirements": [],
        },
    }))
    .unwrap();
    let created = api.create(&PostParams::default(), &nc).await.unwrap();
    if !drifted {
        return created;
    }
    let patch = json!({"status": {"conditions": [{"type": "Drifted", "status": "True",
        "reason": "NodePoolDrifted", "message": "NodePoolDrifted",
        "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap()
}

fn annotation(obj: &impl kube::ResourceExt, key: &str) -> Option<String> {
    obj.annotations().get(key).cloned()
}

async fn hash_annotations_are_written_and_node_claims_restamped(backend: Backend) {
    let (world, _) = started(backend).await;
    // NodeClaims stamped by an older hash version, created before the pool is reconciled.
    claim(&world, "plain", "hashed", false).await;
    claim(&world, "drifted", "hashed", true).await;
    let pool = node_pool(
        &world,
        "hashed",
        json!({"template": {"metadata": {"labels": {"team": "a"}}, "spec": {
            "nodeClassRef": {"group": "karpenter.cluster.x-k8s.io",
                "kind": "ClusterAPINodeClass", "name": "default"},
            "requirements": []}}}),
    )
    .await;
    let stored = wait_for("the pool's hash annotations", WAIT, || async {
        let p = pools(&world).get("hashed").await.ok()?;
        (annotation(&p, NODEPOOL_HASH_VERSION).as_deref() == Some(HASH_VERSION)).then_some(p)
    })
    .await;
    assert_eq!(annotation(&stored, NODEPOOL_HASH), Some(pool_hash(&pool)));

    // The NodeClaims were re-stamped before the pool was annotated.
    let claims: Api<NodeClaim> = Api::all(world.workload_client());
    let plain = claims.get("plain").await.unwrap();
    assert_eq!(
        annotation(&plain, NODEPOOL_HASH_VERSION).as_deref(),
        Some(HASH_VERSION)
    );
    assert_eq!(annotation(&plain, NODEPOOL_HASH), Some(pool_hash(&pool)));
    let drifted = claims.get("drifted").await.unwrap();
    assert_eq!(
        annotation(&drifted, NODEPOOL_HASH_VERSION).as_deref(),
        Some(HASH_VERSION)
    );
    assert_eq!(annotation(&drifted, NODEPOOL_HASH).as_deref(), Some("1"));

    // A template change moves the hash.
    let patch = json!({"spec": {"template": {"metadata": {"labels": {"team": "b"}}}}});
    let changed = pools(&world)
        .patch("hashed", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let expected = pool_hash(&changed);
    assert_ne!(Some(expected.clone()), annotation(&stored, NODEPOOL_HASH));
    wait_for("the new hash", WAIT, || async {
        let p = pools(&world).get("hashed").await.ok()?;
        (annotation(&p, NODEPOOL_HASH).as_deref() == Some(expected.as_str())).then_some(())
    })
    .await;
}

async fn a_ready_node_class_makes_the_pool_ready(backend: Backend) {
    let (world, _) = started(backend).await;
    node_pool(&world, "ready", json!({})).await;
    wait_condition(
        &world,
        "ready",
        VALIDATION_SUCCEEDED,
        ConditionStatus::True,
        VALIDATION_SUCCEEDED,
    )
    .await;
    wait_condition(
        &world,
        "ready",
        NODE_CLASS_READY,
        ConditionStatus::Unknown,
        "NodeClassReadinessUnknown",
    )
    .await;
    assert_eq!(
        condition(&world, "ready", READY).await.unwrap().0,
        ConditionStatus::Unknown
    );

    set_node_class_ready(&world, "True", "Ready").await;
    wait_condition(&world, "ready", READY, ConditionStatus::True, READY).await;

    set_node_class_ready(&world, "False", "NoMachineDeploymentsSelected").await;
    wait_condition(
        &world,
        "ready",
        NODE_CLASS_READY,
        ConditionStatus::False,
        "NoMachineDeploymentsSelected",
    )
    .await;
    wait_condition(
        &world,
        "ready",
        READY,
        ConditionStatus::False,
        "UnhealthyDependents",
    )
    .await;
}

async fn a_missing_node_class_is_not_found(backend: Backend) {
    let (world, _) = started(backend).await;
    node_pool(
        &world,
        "orphan",
        json!({"template": {"spec": {
            "nodeClassRef": {"group": "karpenter.cluster.x-k8s.io",
                "kind": "ClusterAPINodeClass", "name": "missing"},
            "requirements": []}}}),
    )
    .await;
    wait_condition(
        &world,
        "orphan",
        NODE_CLASS_READY,
        ConditionStatus::False,
        NODE_CLASS_NOT_FOUND,
    )
    .await;
    assert_eq!(
        condition(&world, "orphan", READY).await.unwrap().0,
        ConditionStatus::False
    );
}

async fn an_invalid_requirement_fails_validation(backend: Backend) {
    let (world, _) = started(backend).await;
    set_node_class_ready(&world, "True", "Ready").await;
    node_pool(
        &world,
        "invalid",
        json!({"template": {"spec": {
            "nodeClassRef": {"group": "karpenter.cluster.x-k8s.io",
                "kind": "ClusterAPINodeClass", "name": "default"},
            "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In",
                "values": ["cheap"]}]}}}),
    )
    .await;
    wait_condition(
        &world,
        "invalid",
        VALIDATION_SUCCEEDED,
        ConditionStatus::False,
        NODEPOOL_VALIDATION_FAILED,
    )
    .await;
    wait_condition(
        &world,
        "invalid",
        READY,
        ConditionStatus::False,
        "UnhealthyDependents",
    )
    .await;
}

fn resource(pool: &NodePool, key: &str) -> Option<String> {
    Some(
        pool.status
            .as_ref()?
            .resources
            .as_ref()?
            .get(key)?
            .0
            .clone(),
    )
}

async fn the_counter_sums_the_pools_nodes(backend: Backend) {
    let (world, metrics) = started(backend).await;
    node_pool(&world, "counted", json!({"limits": {"cpu": "100"}})).await;
    let nodes: Api<Node> = Api::all(world.workload_client());
    let node: Node = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "n1", "labels": {"karpenter.sh/nodepool": "counted"}},
        "spec": {"providerID": "sim://n1"},
    }))
    .unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();
    let capacity: Value = json!({"status": {"capacity":
        {"cpu": "4", "memory": "16Gi", "pods": "110"}}});
    nodes
        .patch_status("n1", &PatchParams::default(), &Patch::Merge(&capacity))
        .await
        .unwrap();

    let pool = wait_for("status.resources of counted", WAIT, || async {
        let p = pools(&world).get("counted").await.ok()?;
        (resource(&p, "cpu").as_deref() == Some("4")).then_some(p)
    })
    .await;
    assert_eq!(resource(&pool, "memory").as_deref(), Some("16Gi"));
    assert_eq!(resource(&pool, "pods").as_deref(), Some("110"));
    assert_eq!(resource(&pool, "ephemeral-storage").as_deref(), Some("0"));
    assert_eq!(resource(&pool, "nodes").as_deref(), Some("1"));
    assert_eq!(pool.status.as_ref().unwrap().nodes, Some(1));

    let text = metrics.encode();
    for line in [
        "karpenter_nodepools_usage{resource_type=\"cpu\",nodepool=\"counted\"} 4",
        "karpenter_nodepools_usage{resource_type=\"memory\",nodepool=\"counted\"} 17179869184",
        "karpenter_nodepools_limit{resource_type=\"cpu\",nodepool=\"counted\"} 100",
    ] {
        assert!(text.contains(line), "{line} missing in\n{text}");
    }
}

world::backend_tests!(
    hash_annotations_are_written_and_node_claims_restamped,
    a_ready_node_class_makes_the_pool_ready,
    a_missing_node_class_is_not_found,
    an_invalid_requirement_fails_validation,
    the_counter_sums_the_pools_nodes,
);
