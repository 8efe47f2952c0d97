//! Node repair's pass (`controllers::health`) against the simulated world and a real
//! kube-apiserver: a registered NodeClaim whose Node is gone is repaired once the Node-deleted
//! toleration has run out; NodeClaims of another NodeClass group, unregistered ones and
//! ones already deleting are left alone.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use api::NodeClaim;
use api::well_known::annotations::NODECLAIM_TERMINATION_TIMESTAMP;
use cloudprovider::{FakeCloudProvider, RepairPolicies};
use controllers::clock::Clock;
use controllers::events::Events;
use controllers::health::{HealthConfig, NodeHealth};
use controllers::metrics::Metrics;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use state::StateConfig;
use support::{wait_for, world_on};
use world::{Backend, World, WorldConfig};

/// A NodeClaim that keeps a test finalizer (so a deletion shows as a deletionTimestamp), of
/// NodeClass group `group`, registered to Node `node` when given.
async fn claim(world: &World, name: &str, group: &str, node: Option<&str>) {
    let api: Api<NodeClaim> = Api::all(world.workload_client());
    let nc: NodeClaim = serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": name, "finalizers": ["test.karpenter-capi.dev/keep"],
            "labels": {"karpenter.sh/nodepool": "default",
                "karpenter.sh/capacity-type": "on-demand"}},
        "spec": {"nodeClassRef": {"group": group, "kind": "Class", "name": "default"},
            "requirements": []},
    }))
    .unwrap();
    api.create(&PostParams::default(), &nc).await.unwrap();
    if let Some(node) = node {
        let now = k8s_openapi::jiff::Timestamp::now().to_string();
        api.patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(
                json!({"status": {"nodeName": node, "providerID": format!("fake:///{node}"),
                "imageID": "img-1",
                "conditions": [{"type": "Registered", "status": "True", "reason": "Registered",
                    "message": "", "lastTransitionTime": now}]}}),
            ),
        )
        .await
        .unwrap();
    }
}

async fn repairs_a_claim_whose_node_is_gone_and_nothing_else(backend: Backend) {
    let world = world_on(backend, WorldConfig::default()).await;
    let ours = "karpenter.cluster.x-k8s.io";
    claim(&world, "lost", ours, Some("gone-1")).await;
    claim(&world, "theirs", "karpenter.k8s.aws", Some("gone-2")).await;
    claim(&world, "unregistered", ours, None).await;
    claim(&world, "leaving", ours, Some("gone-3")).await;
    let api: Api<NodeClaim> = Api::all(world.workload_client());
    api.delete("leaving", &Default::default()).await.unwrap();

    let provider = Arc::new(FakeCloudProvider::default());
    provider.set_repair_policies(RepairPolicies {
        conditions: Vec::new(),
        node_deleted: Some(Duration::from_secs(1)),
    });
    let state = state::ClusterState::start(&world.workload_client(), StateConfig::default());
    state.wait_listed(Duration::from_secs(10)).await.unwrap();
    let metrics = Arc::new(Metrics::new());
    let events = Events::recording();
    let health = NodeHealth::new(
        world.workload_client(),
        Arc::clone(&provider),
        Arc::clone(&state),
        events.clone(),
        Arc::clone(&metrics),
        Clock::new(),
        HealthConfig {
            enabled: true,
            ..HealthConfig::default()
        },
    );
    assert!(health.active());
    wait_for(
        "the NodeClaims in the cache",
        Duration::from_secs(10),
        || async {
            (state.node_claims().state().len() == 4
                && state
                    .node_claims()
                    .state()
                    .iter()
                    .filter(|nc| nc.status.as_ref().is_some_and(|s| s.node_name.is_some()))
                    .count()
                    == 3)
                .then_some(())
        },
    )
    .await;
    let first = health.pass().await;
    assert!(first.repaired.is_empty(), "{first:?}");
    let next = first.next.expect("the toleration is running");
    assert!(next <= Duration::from_secs(1), "{next:?}");
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let second = health.pass().await;
    assert_eq!(second.repaired, ["lost"], "{second:?}");

    let lost = api.get("lost").await.unwrap();
    assert!(lost.metadata.deletion_timestamp.is_some());
    assert!(
        lost.annotations()
            .contains_key(NODECLAIM_TERMINATION_TIMESTAMP),
        "pods go at once"
    );
    for name in ["theirs", "unregistered"] {
        let nc = api.get(name).await.unwrap();
        assert!(
            nc.metadata.deletion_timestamp.is_none(),
            "{name} left alone"
        );
        assert!(
            !nc.annotations()
                .contains_key(NODECLAIM_TERMINATION_TIMESTAMP),
            "{name}"
        );
    }
    let leaving = api.get("leaving").await.unwrap();
    assert!(
        !leaving
            .annotations()
            .contains_key(NODECLAIM_TERMINATION_TIMESTAMP),
        "a NodeClaim already deleting is not repaired"
    );
    let text = metrics.encode();
    assert!(
        text.lines().any(
            |l| l.starts_with("karpenter_nodeclaims_unhealthy_disrupted_total{")
                && l.contains("condition=\"node_deleted\"")
                && l.contains("image_id=\"img-1\"")
                && l.ends_with(" 1")
        ),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("karpenter_nodeclaims_disrupted_total{")
                && l.contains("reason=\"unhealthy\"")
                && l.ends_with(" 1")),
        "{text}"
    );
    assert!(
        events
            .published()
            .iter()
            .any(|(o, m)| o.name.as_deref() == Some("lost")
                && format!("{m:?}").contains("NodeRepair")),
        "{:?}",
        events.published()
    );
}

world::backend_tests!(repairs_a_claim_whose_node_is_gone_and_nothing_else);
