//! MachinePools as node groups, against the simulated world (the Docker provider's way of
//! scaling a pool): selected like MachineDeployments, raised and claimed with the same
//! ownership record, a provisioned Machine removed exactly (marked, replicas lowered on the
//! pool), a Machine not provisioned yet deleted directly (the provider would never pick it:
//! replicas kept, the pool replaces it) — and a pool whose provider makes no MachinePool
//! Machines never used nor written.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use std::time::Duration;

use api::well_known::capi::{KARPENTER_MEMBER, POOL_NAME};
use api::{Machine, NodeClaim};
use cloudprovider::{CloudProvider, Launch};
use clusterapi::ClusterApiProvider;
use clusterapi::provider::CLAIMED_BY_UID;
use world::{World, WorldConfig};

async fn node_claim(world: &World, name: &str) -> NodeClaim {
    support::zonal_node_claim(world, name).await
}

fn provider(world: &World) -> ClusterApiProvider {
    support::default_provider(world)
}

fn owner_pool(m: &Machine) -> Option<String> {
    m.metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.kind == "MachinePool" && o.controller == Some(true))
        .map(|o| o.name.clone())
}

fn names(machines: &[Machine]) -> Vec<String> {
    machines
        .iter()
        .filter_map(|m| m.metadata.name.clone())
        .collect()
}

async fn replicas(world: &World, mp: &str) -> i32 {
    support::pool(world, mp).await.spec.replicas.unwrap_or(0)
}

/// The pool's Machines, once `n` exist and every one is provisioned.
async fn provisioned(world: &World, mp: &str, n: usize) -> Vec<Machine> {
    support::wait_for(
        "provisioned pool Machines",
        Duration::from_secs(60),
        || async {
            let all = support::pool_machines(world, mp).await;
            (all.len() == n
                && all.iter().all(|m| {
                    m.status
                        .as_ref()
                        .is_some_and(api::capi::MachineStatus::infrastructure_provisioned)
                }))
            .then_some(all)
        },
    )
    .await
}

async fn machine(world: &World, launch: &Launch) -> Machine {
    support::machine(world, &launch.machine.name).await.unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_machine_pool_is_raised_claimed_and_lowered_exactly() {
    let world = support::world(WorldConfig::default()).await;
    support::md("md-expensive")
        .price("2.0")
        .create(&world)
        .await;
    // One Machine was there before Karpenter: the user's, never ours.
    support::md("mp-cheap")
        .price("0.5")
        .replicas(1)
        .create_machine_pool(&world, true)
        .await;
    let baseline = names(&provisioned(&world, "mp-cheap", 1).await);
    let p = provider(&world);
    let nc = node_claim(&world, "nc-1").await;

    let launch = p.create(&nc).await.unwrap();
    assert_eq!(launch.instance_type, "mp-cheap", "the cheaper node group");
    assert_eq!(replicas(&world, "mp-cheap").await, 2);
    assert_eq!(support::replicas(&world, "md-expensive").await, 0);
    let m = machine(&world, &launch).await;
    assert_eq!(owner_pool(&m).as_deref(), Some("mp-cheap"));
    assert_eq!(support::label(&m, POOL_NAME).as_deref(), Some("mp-cheap"));
    assert!(!baseline.contains(m.metadata.name.as_ref().unwrap()));
    assert_eq!(support::label(&m, KARPENTER_MEMBER).as_deref(), Some(""));
    assert_eq!(
        m.metadata.annotations.as_ref().unwrap()[CLAIMED_BY_UID],
        nc.metadata.uid.clone().unwrap()
    );
    // The ownership record sits on the MachinePool, as on a MachineDeployment.
    let pool = support::pool(&world, "mp-cheap").await;
    assert!(
        pool.metadata
            .annotations
            .as_ref()
            .unwrap()
            .keys()
            .any(|k| k.starts_with("karpenter.cluster.x-k8s.io/raised-")),
        "{:?}",
        pool.metadata.annotations
    );
    let nc = support::fresh_node_claim(&world, &nc).await;
    assert_eq!(p.is_drifted(&nc).await.unwrap(), None);

    // Once provisioned, a delete lowers the pool by exactly the claimed Machine.
    provisioned(&world, "mp-cheap", 2).await;
    p.delete(&nc).await.unwrap();
    assert_eq!(replicas(&world, "mp-cheap").await, 1);
    support::wait_machine_gone(&world, &launch.machine.name, Duration::from_secs(60)).await;
    let left = names(&provisioned(&world, "mp-cheap", 1).await);
    assert_eq!(left, baseline, "the user's Machine stays");
}

#[tokio::test(start_paused = true)]
async fn a_machine_not_provisioned_yet_is_deleted_and_replicas_kept() {
    // The Machine stays unprovisioned a while: the provider would never pick it on a
    // scale-down, so lowering replicas would take the user's Machine instead.
    let mut config = WorldConfig::default();
    config.capi.provider_id_delay = Duration::from_secs(300);
    let world = support::world(config).await;
    support::md("mp")
        .replicas(1)
        .create_machine_pool(&world, true)
        .await;
    let baseline = support::wait_for("the user's Machine", Duration::from_secs(60), || async {
        let all = support::pool_machines(&world, "mp").await;
        (all.len() == 1).then(|| names(&all))
    })
    .await;
    let p = provider(&world);
    let nc = node_claim(&world, "nc-1").await;
    let launch = p.create(&nc).await.unwrap();
    assert_eq!(replicas(&world, "mp").await, 2);
    let nc = support::fresh_node_claim(&world, &nc).await;
    p.delete(&nc).await.unwrap();
    assert_eq!(replicas(&world, "mp").await, 2, "replicas kept");
    support::wait_machine_gone(&world, &launch.machine.name, Duration::from_secs(60)).await;
    let now = support::wait_for("a replacement", Duration::from_secs(60), || async {
        let all = support::pool_machines(&world, "mp").await;
        (all.len() == 2).then_some(all)
    })
    .await;
    assert!(
        names(&now).contains(&baseline[0]),
        "the user's Machine stays"
    );
    let replacement = now
        .iter()
        .find(|m| m.metadata.name != Some(baseline[0].clone()))
        .unwrap();
    assert_eq!(
        support::label(replacement, KARPENTER_MEMBER),
        None,
        "the replacement is nobody's claim"
    );
}

#[tokio::test(start_paused = true)]
async fn a_pool_without_machine_pool_machines_is_never_used() {
    let world = support::world(WorldConfig::default()).await;
    support::md("md-expensive")
        .price("2.0")
        .create(&world)
        .await;
    support::md("bare")
        .price("0.1")
        .replicas(1)
        .create_machine_pool(&world, false)
        .await;
    // The provider has reported (no infrastructureMachineKind).
    support::wait_for("the provider's status", Duration::from_secs(60), || async {
        let api = kube::Api::<kube::api::DynamicObject>::namespaced_with(
            world.management_client(),
            "default",
            &world::capi::pools::docker_machine_pools(),
        );
        let i = serde_json::to_value(api.get("bare").await.unwrap()).unwrap();
        i["status"]["replicas"].is_number().then_some(())
    })
    .await;
    let before = support::pool(&world, "bare").await;
    let p = provider(&world);
    let nc = node_claim(&world, "nc-1").await;
    let launch = p.create(&nc).await.unwrap();
    assert_eq!(
        launch.instance_type, "md-expensive",
        "the pool is not offered"
    );
    let after = support::pool(&world, "bare").await;
    assert_eq!(after.spec.replicas, Some(1));
    assert_eq!(after.metadata.generation, before.metadata.generation);
    assert_eq!(
        after.metadata.annotations, before.metadata.annotations,
        "no ownership record was written"
    );
}
