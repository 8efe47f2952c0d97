//! Machine garbage collection against the simulated world: orphaned claims are removed once,
//! unclaimed Machines we did not raise never.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use api::well_known::capi::DELETE_MACHINE;
use api::{Machine, NodeClaim};
use cloudprovider::CloudProvider;
use clusterapi::gc::{GcConfig, MachineGc};
use clusterapi::{ClusterApiProvider, ProviderConfig};
use kube::api::{Api, DeleteParams};
use serde_json::json;
use world::{World, WorldConfig};

async fn world() -> World {
    support::world(WorldConfig::default()).await
}

async fn add_md(world: &World, name: &str, replicas: i32) {
    support::md(name).replicas(replicas).create(world).await;
}

async fn node_claim(world: &World, name: &str) -> NodeClaim {
    support::node_claim(world, name, json!([])).await
}

fn marked(m: &Machine) -> bool {
    m.metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(DELETE_MACHINE))
}

fn setup(world: &World) -> (Arc<ClusterApiProvider>, MachineGc) {
    let p = Arc::new(ClusterApiProvider::new(
        world.management_client(),
        world.workload_client(),
        ProviderConfig::default(),
    ));
    let gc = MachineGc::new(Arc::clone(&p), GcConfig::default());
    (p, gc)
}

#[tokio::test(start_paused = true)]
async fn a_machine_whose_node_claim_is_gone_is_removed_once() {
    let world = world().await;
    add_md(&world, "md", 0).await;
    let (p, gc) = setup(&world);
    let a = node_claim(&world, "a").await;
    let b = node_claim(&world, "b").await;
    let la = p.create(&a).await.unwrap();
    let lb = p.create(&b).await.unwrap();
    assert_eq!(support::replicas(&world, "md").await, 2);

    let report = gc.collect().await.unwrap();
    assert!(
        report.orphaned.is_empty() && report.surplus.is_empty(),
        "{report:?}"
    );

    Api::<NodeClaim>::all(world.workload_client())
        .delete("a", &DeleteParams::default())
        .await
        .unwrap();
    let report = gc.collect().await.unwrap();
    assert_eq!(report.orphaned, vec![la.machine.clone()]);
    assert_eq!(support::replicas(&world, "md").await, 1);
    if let Some(m) = support::machine(&world, &la.machine.name).await {
        assert!(marked(&m));
    }

    // A second pass (the cache may still show the Machine) lowers nothing again.
    let report = gc.collect().await.unwrap();
    assert!(report.orphaned.is_empty(), "{report:?}");
    assert_eq!(support::replicas(&world, "md").await, 1);
    let kept = support::machine(&world, &lb.machine.name).await.unwrap();
    assert!(!marked(&kept), "the Machine of a live NodeClaim stays");
}

#[tokio::test(start_paused = true)]
async fn an_unclaimed_machine_we_did_not_raise_is_never_removed() {
    let world = world().await;
    add_md(&world, "md", 1).await;
    let (p, gc) = setup(&world);
    p.cache().ready().await.unwrap();
    let mut name = None;
    for _ in 0..240 {
        if let Some(m) = p.cache().machines().first() {
            name = m.metadata.name.clone();
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let name = name.expect("the MachineSet created a Machine");

    // It was there before Karpenter raised anything: the user's, at any age. (Replicas we
    // raised and nobody claimed are collected: tests/safety.rs.)
    for _ in 0..3 {
        let report = gc.collect().await.unwrap();
        assert!(report.surplus.is_empty(), "{report:?}");
        tokio::time::sleep(Duration::from_secs(11 * 60)).await;
    }
    assert!(!marked(&support::machine(&world, &name).await.unwrap()));
    assert_eq!(support::replicas(&world, "md").await, 1);
}
