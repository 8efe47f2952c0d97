//! Launches that cannot complete fail fast, as insufficient capacity, and make their
//! MachineDeployment unavailable for the unavailable-offering TTL, so the next NodeClaim goes
//! to another one: a MachineSet that creates no Machine (claim timeout), and a Machine Cluster
//! API reports failed before it had an instance.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use std::time::Duration;

use api::NodePool;
use cloudprovider::{CloudProvider, CloudProviderError};
use clusterapi::{ClusterApiProvider, ProviderConfig};
use kube::api::Api;
use serde_json::json;
use support::{md, node_claim, pause_sets, replicas, wait_sets};
use world::config::annotations::{FAILED, FAILURE, PREFLIGHT_HOLD};
use world::{World, WorldConfig};

const TTL: Duration = Duration::from_secs(180);

fn provider(world: &World) -> ClusterApiProvider {
    ClusterApiProvider::new(
        world.management_client(),
        world.workload_client(),
        ProviderConfig {
            claim_timeout: Duration::from_secs(30),
            unavailable_offering_ttl: TTL,
            ..ProviderConfig::default()
        },
    )
}

fn pool() -> NodePool {
    serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
        "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.cluster.x-k8s.io",
            "kind": "ClusterAPINodeClass", "name": "default"}, "requirements": []}}},
    }))
    .unwrap()
}

/// Whether the offering of instance type `name` is available.
async fn available(p: &ClusterApiProvider, name: &str) -> bool {
    let its = p.get_instance_types(&pool()).await.unwrap();
    let it = its.iter().find(|it| it.name() == name).expect(name);
    it.offerings().iter().any(|o| o.available)
}

#[tokio::test(start_paused = true)]
async fn a_machine_set_that_creates_nothing_fails_the_launch_and_the_next_goes_elsewhere() {
    let world = support::world(WorldConfig::default()).await;
    md("cheap").price("0.5").replicas(1).create(&world).await;
    md("dear").price("2.0").create(&world).await;
    wait_sets(&world, "cheap").await;
    pause_sets(&world, "cheap", true).await;
    let p = provider(&world);
    assert!(available(&p, "cheap").await);

    let stuck = node_claim(&world, "stuck", json!([])).await;
    let err = p.create(&stuck).await.unwrap_err();
    match &err {
        CloudProviderError::InsufficientCapacity(m) => {
            assert!(m.contains("default/cheap"), "{m}");
        }
        other => panic!("{other}"),
    }
    assert!(!available(&p, "cheap").await, "unavailable for the TTL");
    assert!(available(&p, "dear").await);

    // The next NodeClaim for the same pods launches on the other MachineDeployment at once.
    let next = node_claim(&world, "next", json!([])).await;
    let launch = p.create(&next).await.unwrap();
    assert_eq!(launch.instance_type, "dear");
    assert_eq!(replicas(&world, "dear").await, 1);

    tokio::time::sleep(TTL + Duration::from_secs(1)).await;
    assert!(
        available(&p, "cheap").await,
        "available again after the TTL"
    );
}

#[tokio::test(start_paused = true)]
async fn a_machine_that_fails_before_it_has_an_instance_ends_its_launch() {
    let world = support::world(WorldConfig::default()).await;
    md("flaky").price("0.5").create(&world).await;
    md("solid").price("2.0").create(&world).await;
    support::patch_md(
        &world,
        "flaky",
        json!({"metadata": {"annotations": {FAILURE: FAILED}}}),
    )
    .await;
    let p = provider(&world);

    let nc = node_claim(&world, "nc", json!([])).await;
    let launch = p.create(&nc).await.unwrap();
    assert_eq!(launch.instance_type, "flaky");
    let nc = Api::<api::NodeClaim>::all(world.workload_client())
        .get("nc")
        .await
        .unwrap();
    // Cluster API marks the Machine Failed: the launch is gone, naming why.
    let why = support::wait_for("the launch to fail", Duration::from_secs(120), || async {
        match p.get_launch(&nc).await {
            Err(CloudProviderError::NodeClaimNotFound(m)) => Some(m),
            Ok(_) => None,
            Err(e) => panic!("{e}"),
        }
    })
    .await;
    assert!(why.contains("failed before it had an instance"), "{why}");
    assert!(why.contains(&launch.machine.name), "{why}");
    assert!(!available(&p, "flaky").await);

    let again = node_claim(&world, "again", json!([])).await;
    assert_eq!(p.create(&again).await.unwrap().instance_type, "solid");
}

/// Holds (or releases) `md`'s MachineSets' scale-ups as a failing preflight check does.
async fn hold(world: &World, md: &str, message: Option<&str>) {
    support::patch_md(
        world,
        md,
        json!({"metadata": {"annotations": {PREFLIGHT_HOLD: message}}}),
    )
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_scale_up_held_by_preflight_checks_fails_the_launch_at_once_and_is_not_offered() {
    let world = support::world(WorldConfig::default()).await;
    md("held").price("0.5").replicas(1).create(&world).await;
    md("open").price("2.0").create(&world).await;
    wait_sets(&world, "held").await;
    hold(
        &world,
        "held",
        Some("ControlPlaneIsStable: the control plane is upgrading"),
    )
    .await;
    let p = provider(&world);
    assert!(
        available(&p, "held").await,
        "not scaling up: nothing held yet"
    );
    let nc = node_claim(&world, "nc", json!([])).await;
    let started = tokio::time::Instant::now();
    let err = p.create(&nc).await.unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "failed before the claim timeout: {:?}",
        started.elapsed()
    );
    match &err {
        CloudProviderError::InsufficientCapacity(m) => {
            assert!(m.contains("ControlPlaneIsStable"), "{m}");
        }
        other => panic!("{other}"),
    }
    assert_eq!(replicas(&world, "held").await, 1, "its replica released");
    let next = node_claim(&world, "next", json!([])).await;
    assert_eq!(p.create(&next).await.unwrap().instance_type, "open");

    // Released: offered again after the TTL, and a launch there works.
    hold(&world, "held", None).await;
    tokio::time::sleep(TTL + Duration::from_secs(1)).await;
    assert!(available(&p, "held").await);
    let again = node_claim(&world, "again", json!([])).await;
    assert_eq!(p.create(&again).await.unwrap().instance_type, "held");
}
