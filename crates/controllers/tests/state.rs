//! The cluster state against sim: listing, the synced gate and provisioning triggers.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use state::{ClusterState, StateConfig, Trigger, Unsynced};
use support::{node_claim, pod, wait_for, world_on};
use tokio::sync::mpsc;
use world::{Backend, WorldConfig};

async fn the_gate_waits_for_listing_unseen_and_launching_node_claims(backend: Backend) {
    let world = world_on(backend, WorldConfig::default()).await;
    let state = ClusterState::start(&world.workload_client(), StateConfig::default());
    state.wait_listed(Duration::from_secs(10)).await.unwrap();
    assert_eq!(state.synced(), Ok(()));

    state.node_claim_created("nc-1");
    assert_eq!(state.synced(), Err(Unsynced::Unseen(vec!["nc-1".into()])));
    node_claim(&world, "nc-1", json!([])).await;
    let gate = wait_for("nc-1 in the cache", Duration::from_secs(10), || {
        let s = state.synced();
        async move { (!matches!(s, Err(Unsynced::Unseen(_)))).then_some(s) }
    })
    .await;
    assert_eq!(gate, Err(Unsynced::Launching(vec!["nc-1".into()])));
    assert_eq!(state.snapshot().node_claims.len(), 1);
}

/// Issue 11 item 5: a NodeClaim of another provider's NodeClass never launches here and must
/// not hold the gate.
async fn a_node_claim_of_another_provider_does_not_hold_the_gate(backend: Backend) {
    let world = world_on(backend, WorldConfig::default()).await;
    let state = ClusterState::start(&world.workload_client(), StateConfig::default());
    state.wait_listed(Duration::from_secs(10)).await.unwrap();
    let foreign: api::NodeClaim = serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": "foreign"},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
            "name": "default"}, "requirements": []},
    }))
    .unwrap();
    kube::Api::<api::NodeClaim>::all(world.workload_client())
        .create(&kube::api::PostParams::default(), &foreign)
        .await
        .unwrap();
    wait_for(
        "the foreign NodeClaim in the cache",
        Duration::from_secs(10),
        || {
            let n = state.snapshot().node_claims.len();
            async move { (n == 1).then_some(()) }
        },
    )
    .await;
    assert_eq!(state.synced(), Ok(()));
}

async fn provisionable_pods_trigger(backend: Backend) {
    let world = world_on(backend, WorldConfig::default()).await;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let state = ClusterState::start(
        &world.workload_client(),
        StateConfig {
            triggers: Some((
                tx,
                Arc::new(|p: &k8s_openapi::api::core::v1::Pod| {
                    p.metadata.name.as_deref() == Some("wanted")
                }),
            )),
        },
    );
    state.wait_listed(Duration::from_secs(10)).await.unwrap();
    pod(&world, "ignored", "1").await;
    let wanted = pod(&world, "wanted", "1").await;
    let trigger = tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(trigger, Trigger::Pod(wanted.metadata.uid.unwrap()));
}

/// The server tracks the pod's fields: it has managedFields to drop.
fn assert_tracked(pod: &k8s_openapi::api::core::v1::Pod) {
    assert!(
        pod.metadata
            .managed_fields
            .as_ref()
            .is_some_and(|m| !m.is_empty()),
        "the server tracks the pod's fields: {:?}",
        pod.metadata
    );
}

/// Issue 25 item 4: what the caches keep. `metadata.managedFields` (kept by every API server
/// that tracks server-side apply) is dropped before an object is cached, and from a Pod what
/// no controller reads ([`state::slim`]: here the container's image); the rest is kept.
async fn cached_objects_carry_no_managed_fields(backend: Backend) {
    let world = world_on(backend, WorldConfig::default()).await;
    let state = ClusterState::start(&world.workload_client(), StateConfig::default());
    state.wait_listed(Duration::from_secs(10)).await.unwrap();
    let created = pod(&world, "tracked", "1").await;
    assert_tracked(&created);
    let cached = wait_for("the pod in the cache", Duration::from_secs(10), || {
        let pods = state.snapshot().pods;
        async move { pods.into_iter().next() }
    })
    .await;
    assert_eq!(cached.metadata.managed_fields, None);
    assert_eq!(cached.metadata.uid, created.metadata.uid);
    assert_eq!(cached.metadata.labels, created.metadata.labels);
    let container = |p: &k8s_openapi::api::core::v1::Pod| {
        p.spec.as_ref().unwrap().containers.first().unwrap().clone()
    };
    assert_eq!(container(&cached).image, None, "the image is left out");
    assert_eq!(container(&cached).resources, container(&created).resources);
    let mut slim = created.clone();
    state::slim::pod(&mut slim);
    assert_eq!(cached.spec, slim.spec);
}

/// Issue 25 item 4: a controller's own store ([`state::controller`], in place of
/// kube-runtime's `Controller::new`, which keeps whole objects) drops managedFields too, and
/// its reconciles still come, with the stripped object.
async fn a_controllers_own_store_carries_no_managed_fields(backend: Backend) {
    use futures::StreamExt;
    use kube::runtime::controller::Action;
    use kube::runtime::reflector::ObjectRef;
    use kube::runtime::watcher;

    let world = world_on(backend, WorldConfig::default()).await;
    let created = pod(&world, "tracked", "1").await;
    assert_tracked(&created);
    let controller = state::controller(
        kube::Api::<k8s_openapi::api::core::v1::Pod>::all(world.workload_client()),
        watcher::Config::default(),
    );
    let store = controller.store();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let run = controller
        .run(
            move |p: Arc<k8s_openapi::api::core::v1::Pod>, _: Arc<()>| {
                let tx = tx.clone();
                async move {
                    let _ = tx.send(p.metadata.managed_fields.clone());
                    Ok::<_, kube::Error>(Action::await_change())
                }
            },
            |_, _, _| Action::await_change(),
            Arc::new(()),
        )
        .for_each(|_| async {});
    let task = tokio::spawn(run);
    let reconciled = tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .expect("a reconcile of the pod")
        .unwrap();
    assert_eq!(
        reconciled, None,
        "the reconciled object has no managedFields"
    );
    let cached = store
        .get(&ObjectRef::new("tracked").within("default"))
        .unwrap();
    task.abort();
    assert_eq!(cached.metadata.managed_fields, None);
    assert_eq!(cached.metadata.uid, created.metadata.uid);
    assert_eq!(cached.metadata.labels, created.metadata.labels);
    assert_eq!(cached.spec, created.spec);
}

world::backend_tests!(
    a_controllers_own_store_carries_no_managed_fields,
    cached_objects_carry_no_managed_fields,
    the_gate_waits_for_listing_unseen_and_launching_node_claims,
    provisionable_pods_trigger,
    a_node_claim_of_another_provider_does_not_hold_the_gate,
);
