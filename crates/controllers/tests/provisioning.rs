//! The provisioner against sim: pending pods → NodeClaims with upstream's shape, the synced
//! gate, and FailedScheduling when no NodePool can be used.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use api::{NodeClaim, NodePool};
use clusterapi::provider::{ClusterApiProvider, ProviderConfig};
use controllers::events::Events;
use controllers::metrics::Metrics;
use controllers::provisioning::batcher::BatchConfig;
use controllers::provisioning::node_claim::PoolHash;
use controllers::provisioning::provisioner::{Provisioner, ProvisionerConfig, trigger_channel};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;
use state::{ClusterState, StateConfig};
use support::{md, node_pool, pod, wait_for, world_on};
use world::{Backend, World, WorldConfig};

fn hash(_: &NodePool) -> PoolHash {
    PoolHash {
        hash: "42".into(),
        version: "test".into(),
    }
}

async fn mark_ready(world: &World, name: &str) {
    let api: Api<NodePool> = Api::all(world.workload_client());
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"conditions": [{
            "type": "Ready", "status": "True", "reason": "Ready", "message": "",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}]}})),
    )
    .await
    .unwrap();
}

/// Starts state + provisioner (no lifecycle controller: NodeClaims stay unlaunched).
fn start(world: &World) -> Arc<ClusterState> {
    let client = world.workload_client();
    let (tx, rx, predicate) = trigger_channel();
    let state = ClusterState::start(
        &client,
        StateConfig {
            triggers: Some((tx, predicate)),
        },
    );
    let provider = Arc::new(ClusterApiProvider::new(
        world.management_client(),
        client.clone(),
        ProviderConfig::default(),
    ));
    let provisioner = Provisioner::new(
        client.clone(),
        provider,
        Arc::clone(&state),
        Events::new(client, None),
        Arc::new(Metrics::new()),
        ProvisionerConfig {
            // Wide enough that three pods created one after another on a loaded machine land
            // in one batch.
            batch: BatchConfig {
                idle: Duration::from_secs(1),
                max: Duration::from_secs(5),
            },
            ..ProvisionerConfig::default()
        },
        hash,
    );
    tokio::spawn(provisioner.run(rx));
    state
}

/// The note of the first `FailedScheduling` Event karpenter published in `default`.
async fn karpenter_failed_scheduling(world: &World) -> String {
    let events: Api<Event> = Api::namespaced(world.workload_client(), "default");
    wait_for("FailedScheduling", Duration::from_secs(30), || async {
        events
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .find(|e| {
                e.reason.as_deref() == Some("FailedScheduling")
                    && e.reporting_controller.as_deref() == Some("karpenter")
            })
            .and_then(|e| e.note)
    })
    .await
}

/// Every NodeClaim. A real kube-apiserver answers 429 "storage is (re)initializing" while the
/// watch cache of a resource (re)starts; that is retried, as clients do.
async fn node_claims(world: &World) -> Vec<NodeClaim> {
    let api: Api<NodeClaim> = Api::all(world.workload_client());
    loop {
        match api.list(&ListParams::default()).await {
            Ok(list) => return list.items,
            Err(kube::Error::Api(s)) if s.code == 429 => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("list NodeClaims: {e}"),
        }
    }
}

async fn pending_pods_become_one_node_claim_shaped_like_upstreams(backend: Backend) {
    let world = world_on(backend, WorldConfig::default()).await;
    md("small").create(&world).await;
    let pool = node_pool(&world, "general", json!({})).await;
    mark_ready(&world, "general").await;
    // The pods are provisionable (the scheduler marked them Unschedulable) before the
    // controllers start, so one batch holds all three however slowly a loaded machine creates
    // and marks them (started first, a batch window could close in between).
    for i in 0..3 {
        pod(&world, &format!("p{i}"), "1").await;
    }
    wait_for(
        "three unschedulable pods",
        Duration::from_secs(30),
        || async {
            let pods = Api::<k8s_openapi::api::core::v1::Pod>::namespaced(
                world.workload_client(),
                "default",
            )
            .list(&ListParams::default())
            .await
            .unwrap()
            .items;
            let unschedulable = pods
                .iter()
                .filter(|p| {
                    p.status
                        .as_ref()
                        .and_then(|s| s.conditions.as_ref())
                        .is_some_and(|c| {
                            c.iter().any(|c| {
                                c.type_ == "PodScheduled"
                                    && c.status == "False"
                                    && c.reason.as_deref() == Some("Unschedulable")
                            })
                        })
                })
                .count();
            (unschedulable == 3).then_some(())
        },
    )
    .await;
    let _state = start(&world);
    let ncs = wait_for("a NodeClaim", Duration::from_secs(30), || async {
        let ncs = node_claims(&world).await;
        (!ncs.is_empty()).then_some(ncs)
    })
    .await;
    // Nothing launches them, so the gate holds further loops: exactly one.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let ncs_after = node_claims(&world).await;
    assert_eq!(ncs_after.len(), 1, "{ncs_after:#?}");
    let nc = serde_json::to_value(&ncs[0]).unwrap();
    assert!(
        nc["metadata"]["name"]
            .as_str()
            .unwrap()
            .starts_with("general-")
    );
    assert_eq!(nc["metadata"]["labels"]["karpenter.sh/nodepool"], "general");
    assert_eq!(
        nc["metadata"]["labels"]["karpenter.cluster.x-k8s.io/clusterapinodeclass"],
        "default"
    );
    assert_eq!(
        nc["metadata"]["annotations"]["karpenter.sh/nodepool-hash"],
        "42"
    );
    assert_eq!(
        nc["metadata"]["ownerReferences"][0]["uid"],
        json!(pool.metadata.uid)
    );
    assert_eq!(nc["spec"]["resources"]["requests"]["cpu"], "3");
    assert_eq!(nc["spec"]["resources"]["requests"]["pods"], "3");
    let reqs = nc["spec"]["requirements"].as_array().unwrap();
    assert!(
        reqs.iter()
            .any(|r| r["key"] == "node.kubernetes.io/instance-type"
                && r["values"] == json!(["small"])),
        "{reqs:#?}"
    );
    // Pods are told where they go.
    let events: Api<Event> = Api::namespaced(world.workload_client(), "default");
    wait_for("Nominated events", Duration::from_secs(10), || async {
        let list = events.list(&ListParams::default()).await.unwrap().items;
        (list
            .iter()
            .filter(|e| e.reason.as_deref() == Some("Nominated"))
            .count()
            == 3)
            .then_some(())
    })
    .await;
}

async fn without_a_ready_node_pool_pods_get_failed_scheduling(backend: Backend) {
    let world = world_on(backend, WorldConfig::default()).await;
    md("small").create(&world).await;
    node_pool(&world, "general", json!({})).await;
    let _state = start(&world);
    pod(&world, "lonely", "1").await;
    let note = karpenter_failed_scheduling(&world).await;
    assert!(note.contains("no dynamic nodepools"), "{note}");
    assert!(node_claims(&world).await.is_empty());
}

async fn a_pod_too_big_for_every_machine_deployment_is_reported(backend: Backend) {
    let world = world_on(backend, WorldConfig::default()).await;
    md("small").create(&world).await;
    node_pool(&world, "general", json!({})).await;
    mark_ready(&world, "general").await;
    let _state = start(&world);
    pod(&world, "huge", "64").await;
    let note = karpenter_failed_scheduling(&world).await;
    assert!(note.starts_with("Failed to schedule pod, "), "{note}");
    assert!(node_claims(&world).await.is_empty());
}

/// A NodeClaim whose launch never completes (nothing launches NodeClaims here) holds only
/// the pods it was made for: a pending pod of another NodePool still gets its own NodeClaim
/// (a stuck launch once stalled every pool), and the stuck one's pod gets no second.
async fn a_stuck_launch_never_stalls_a_pod_of_another_pool(backend: Backend) {
    let world = world_on(backend, WorldConfig::default()).await;
    md("small").create(&world).await;
    for pool in ["general", "other"] {
        node_pool(&world, pool, json!({})).await;
        mark_ready(&world, pool).await;
    }
    let state = start(&world);
    pod(&world, "first", "1").await;
    let first = wait_for("the first NodeClaim", Duration::from_secs(30), || async {
        node_claims(&world).await.into_iter().next()
    })
    .await;
    // It never launches; the next batches must not give its pod a second NodeClaim.
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(node_claims(&world).await.len(), 1);
    assert!(
        matches!(state.synced(), Err(state::Unsynced::Launching(_))),
        "disruption still waits for the launch"
    );
    let pods: Api<k8s_openapi::api::core::v1::Pod> =
        Api::namespaced(world.workload_client(), "default");
    let second: k8s_openapi::api::core::v1::Pod = serde_json::from_value(json!({
        "metadata": {"name": "second", "namespace": "default"},
        "spec": {"nodeSelector": {"karpenter.sh/nodepool": "other"},
            "containers": [{"name": "c", "image": "busybox",
                "resources": {"requests": {"cpu": "1", "memory": "64Mi"}}}]},
    }))
    .unwrap();
    pods.create(&kube::api::PostParams::default(), &second)
        .await
        .unwrap();
    let other = wait_for(
        "a NodeClaim for the other pool's pod",
        Duration::from_secs(30),
        || async {
            node_claims(&world).await.into_iter().find(|nc| {
                nc.metadata.name != first.metadata.name
                    && nc
                        .metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get("karpenter.sh/nodepool"))
                        == Some(&"other".to_owned())
            })
        },
    )
    .await;
    assert!(other.metadata.name.is_some());
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(
        node_claims(&world).await.len(),
        2,
        "no NodeClaim beyond the two pods'"
    );
}

/// A CapacityBuffer's virtual pod (handed to the state as its controller does) gets a
/// NodeClaim of its own, with no Event and no nomination, and the placement is recorded for
/// the buffer and the NodeClaim. A real pod pending next to it goes first: it takes the room
/// of the NodeClaim in flight (made for the virtual pod, of the same shape) and the virtual
/// pod needs a second NodeClaim, although it is older and would come first in upstream's order.
async fn buffer_pods_get_room_after_every_real_pod_and_no_events(backend: Backend) {
    let world = world_on(backend, WorldConfig::default()).await;
    md("small").create(&world).await;
    node_pool(&world, "general", json!({})).await;
    mark_ready(&world, "general").await;
    let state = start(&world);
    let mut buffer = api::CapacityBuffer::new(
        "warm",
        serde_json::from_value(json!({"replicas": 1, "podTemplateRef": {"name": "t"}})).unwrap(),
    );
    buffer.metadata.namespace = Some("default".into());
    buffer.metadata.uid = Some("buffer-uid".into());
    let template: k8s_openapi::api::core::v1::PodTemplateSpec = serde_json::from_value(json!({
        "spec": {"containers": [{"name": "c", "image": "pause",
            "resources": {"requests": {"cpu": "1", "memory": "64Mi"}}}]}}))
    .unwrap();
    let virtual_pods = controllers::capacitybuffer::resolve::virtual_pods(
        &buffer,
        &template,
        1,
        k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
    );
    state.set_buffer_pods(virtual_pods);
    let first = wait_for(
        "the buffer's NodeClaim",
        Duration::from_secs(30),
        || async { node_claims(&world).await.into_iter().next() },
    )
    .await;
    let first = first.metadata.name.unwrap();
    let placed = wait_for("the placement", Duration::from_secs(30), || async {
        state.buffer_placement("default/warm")
    })
    .await;
    // The pass that made `first` counts the virtual pod as placed on a new NodeClaim; a later
    // pass (a NodeClaim event can start one before this reads the placement) finds it room on
    // `first`, in flight. Either way it has room on `first` and nowhere else.
    assert_eq!(
        (placed.desired, placed.new + placed.existing, placed.failed),
        (1, 1, 0)
    );
    assert_eq!(state.buffer_pods_on(&first), 1);
    let events: Api<Event> = Api::all(world.workload_client());
    let reasons = |list: Vec<Event>| -> Vec<String> {
        list.into_iter()
            .filter(|e| e.reporting_controller.as_deref() == Some("karpenter"))
            .filter_map(|e| e.reason)
            .collect()
    };
    assert!(
        reasons(events.list(&ListParams::default()).await.unwrap().items).is_empty(),
        "no Event for a virtual pod"
    );

    pod(&world, "real", "1").await;
    wait_for("a second NodeClaim", Duration::from_secs(30), || async {
        (node_claims(&world).await.len() == 2).then_some(())
    })
    .await;
    let second = wait_for(
        "the real pod's placement",
        Duration::from_secs(30),
        || async {
            let p = state.buffer_placement("default/warm")?;
            (p.new == 1 && state.buffer_pods_on(&first) == 0).then_some(p)
        },
    )
    .await;
    assert_eq!((second.existing, second.failed), (0, 0));
    let nominated = wait_for(
        "the real pod's nomination",
        Duration::from_secs(10),
        || async {
            events
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .into_iter()
                .find(|e| e.reason.as_deref() == Some("Nominated"))
        },
    )
    .await;
    assert_eq!(
        nominated.regarding.and_then(|r| r.name).as_deref(),
        Some("real")
    );
    assert!(
        nominated.note.unwrap_or_default().contains(&first),
        "the real pod takes the NodeClaim made for the virtual one"
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(node_claims(&world).await.len(), 2, "no third NodeClaim");
}

world::backend_tests!(
    buffer_pods_get_room_after_every_real_pod_and_no_events,
    a_stuck_launch_never_stalls_a_pod_of_another_pool,
    pending_pods_become_one_node_claim_shaped_like_upstreams,
    without_a_ready_node_pool_pods_get_failed_scheduling,
    a_pod_too_big_for_every_machine_deployment_is_reported,
);
