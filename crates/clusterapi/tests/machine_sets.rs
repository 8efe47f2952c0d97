//! Stand-alone MachineSets as node groups, against the simulated world: selected like
//! MachineDeployments, raised and claimed with the same ownership record, removed exactly (the
//! annotated Machine, replicas lowered on the set) — and a MachineSet a MachineDeployment owns
//! is never one, even when it carries the member label.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use std::time::Duration;

use api::well_known::capi::{DEPLOYMENT_NAME, KARPENTER_MEMBER};
use api::{Machine, MachineSet, NodeClaim};
use cloudprovider::{CloudProvider, Launch};
use clusterapi::ClusterApiProvider;
use clusterapi::provider::CLAIMED_BY_UID;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;
use world::{World, WorldConfig};

async fn node_claim(world: &World, name: &str) -> NodeClaim {
    support::zonal_node_claim(world, name).await
}

async fn fresh(world: &World, nc: &NodeClaim) -> NodeClaim {
    support::fresh_node_claim(world, nc).await
}

fn provider(world: &World) -> ClusterApiProvider {
    support::default_provider(world)
}

fn owner_set(m: &Machine) -> Option<String> {
    m.metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.kind == "MachineSet" && o.controller == Some(true))
        .map(|o| o.name.clone())
}

async fn machine(world: &World, launch: &Launch) -> Option<Machine> {
    support::machine(world, &launch.machine.name).await
}

fn sets_api(world: &World) -> Api<MachineSet> {
    Api::namespaced_with(
        world.management_client(),
        "default",
        &api::CapiVersion::v1beta2(),
    )
}

#[tokio::test(start_paused = true)]
async fn a_stand_alone_machine_set_is_raised_claimed_and_lowered_exactly() {
    let world = support::world(WorldConfig::default()).await;
    support::md("md-expensive")
        .price("2.0")
        .create(&world)
        .await;
    // One Machine was there before Karpenter: the user's, never ours.
    support::md("ms-cheap")
        .price("0.5")
        .replicas(1)
        .create_machine_set(&world)
        .await;
    let baseline = support::wait_for("the baseline Machine", Duration::from_secs(60), || async {
        let ms = support::set_machines(&world, "ms-cheap").await;
        (ms.len() == 1).then(|| ms[0].metadata.name.clone().unwrap())
    })
    .await;
    let p = provider(&world);
    let nc = node_claim(&world, "nc-1").await;

    let launch = p.create(&nc).await.unwrap();
    assert_eq!(launch.instance_type, "ms-cheap", "the cheaper node group");
    assert_eq!(support::set_replicas_of(&world, "ms-cheap").await, 2);
    assert_eq!(support::replicas(&world, "md-expensive").await, 0);
    let m = machine(&world, &launch).await.unwrap();
    assert_eq!(owner_set(&m).as_deref(), Some("ms-cheap"));
    assert_ne!(m.metadata.name.as_deref(), Some(baseline.as_str()));
    assert_eq!(support::label(&m, KARPENTER_MEMBER).as_deref(), Some(""));
    assert_eq!(support::label(&m, DEPLOYMENT_NAME), None);
    assert_eq!(
        m.metadata.annotations.as_ref().unwrap()[CLAIMED_BY_UID],
        nc.metadata.uid.clone().unwrap()
    );
    // The ownership record sits on the MachineSet, as on a MachineDeployment.
    let set = sets_api(&world).get("ms-cheap").await.unwrap();
    assert!(
        set.metadata
            .annotations
            .as_ref()
            .unwrap()
            .keys()
            .any(|k| k.starts_with("karpenter.cluster.x-k8s.io/raised-")),
        "{:?}",
        set.metadata.annotations
    );
    // The drift question answers for a MachineSet too: its version did not change.
    assert_eq!(p.is_drifted(&fresh(&world, &nc).await).await.unwrap(), None);

    // Delete: the set loses exactly the claimed Machine; the user's stays.
    let nc = fresh(&world, &nc).await;
    p.delete(&nc).await.unwrap();
    assert_eq!(support::set_replicas_of(&world, "ms-cheap").await, 1);
    support::wait_machine_gone(&world, &launch.machine.name, Duration::from_secs(60)).await;
    let left: Vec<String> = support::set_machines(&world, "ms-cheap")
        .await
        .iter()
        .filter_map(|m| m.metadata.name.clone())
        .collect();
    assert_eq!(left, vec![baseline], "the user's Machine stays");
}

#[tokio::test(start_paused = true)]
async fn a_machine_set_owned_by_a_machine_deployment_is_never_a_node_group() {
    let world = support::world(WorldConfig::default()).await;
    // A MachineDeployment that is not a member, whose MachineSet someone labelled as one
    // (Cluster API copies the deployment's annotations to it, capacity and price included).
    support::md("owned")
        .member(false)
        .price("0.1")
        .replicas(1)
        .create(&world)
        .await;
    support::wait_machines(&world, "owned", 1).await;
    let sets = sets_api(&world)
        .list(&ListParams::default().labels(&format!("{DEPLOYMENT_NAME}=owned")))
        .await
        .unwrap()
        .items;
    assert_eq!(sets.len(), 1);
    let set_name = sets[0].metadata.name.clone().unwrap();
    let deployment: api::MachineDeployment = Api::namespaced_with(
        world.management_client(),
        "default",
        &api::CapiVersion::v1beta2(),
    )
    .get("owned")
    .await
    .unwrap();
    sets_api(&world)
        .patch(
            &set_name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {KARPENTER_MEMBER: ""},
                "annotations": deployment.metadata.annotations}})),
        )
        .await
        .unwrap();
    let before = sets_api(&world).get(&set_name).await.unwrap();

    let p = provider(&world);
    let nc = node_claim(&world, "nc-1").await;
    let err = p.create(&nc).await.unwrap_err();
    assert!(err.is_insufficient_capacity(), "{err}");
    assert!(!err.to_string().contains("MachineSet"), "{err}");
    let after = sets_api(&world).get(&set_name).await.unwrap();
    assert_eq!(after.spec.replicas, before.spec.replicas);
    // Its spec was never written (the deployment's controller would have undone a write of
    // replicas, but not the generation it bumped).
    assert_eq!(after.metadata.generation, before.metadata.generation);
    assert_eq!(
        after.metadata.annotations, before.metadata.annotations,
        "no ownership record was written"
    );
    assert_eq!(support::replicas(&world, "owned").await, 1);
    assert!(p.list().await.unwrap().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_stand_alone_machine_set_without_the_member_label_is_left_alone() {
    let world = support::world(WorldConfig::default()).await;
    support::md("other")
        .member(false)
        .replicas(1)
        .create_machine_set(&world)
        .await;
    let p = provider(&world);
    let nc = node_claim(&world, "nc-1").await;
    let err = p.create(&nc).await.unwrap_err();
    assert!(err.is_insufficient_capacity(), "{err}");
    assert_eq!(support::set_replicas_of(&world, "other").await, 1);
}
