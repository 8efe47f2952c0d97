//! NodeClaims restored from a backup or re-applied by GitOps: a new NodeClaim (another UID)
//! whose binding annotation names a Machine another NodeClaim claimed neither launches on it
//! nor removes it — it fails its launch and goes, and the Machine stays with its owner.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use api::NodeClaim;
use cloudprovider::{CloudProvider, CloudProviderError};
use clusterapi::{ClusterApiProvider, ProviderConfig};
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use support::{marked, md, node_claim, replicas};
use world::WorldConfig;

#[tokio::test(start_paused = true)]
async fn a_restored_node_claim_naming_another_s_machine_neither_uses_nor_removes_it() {
    let world = support::world(WorldConfig::default()).await;
    md("md").create(&world).await;
    let p = ClusterApiProvider::new(
        world.management_client(),
        world.workload_client(),
        ProviderConfig::default(),
    );
    let owner = node_claim(&world, "a", json!([])).await;
    let launch = p.create(&owner).await.unwrap();
    let machine = launch.machine.name.clone();
    // The restored copy: same binding annotation, a new UID.
    let api: Api<NodeClaim> = Api::all(world.workload_client());
    node_claim(&world, "a-restored", json!([])).await;
    let restored = api
        .patch(
            "a-restored",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {
                "karpenter.cluster.x-k8s.io/machine": format!("default/{machine}")}}})),
        )
        .await
        .unwrap();

    match p.create(&restored).await {
        Err(CloudProviderError::InsufficientCapacity(why)) => {
            assert!(why.contains("claimed by another NodeClaim"), "{why}");
        }
        other => panic!("the restored NodeClaim must not launch: {other:?}"),
    }
    match p.delete(&restored).await {
        Err(CloudProviderError::NodeClaimNotFound(why)) => {
            assert!(why.contains("not NodeClaim a-restored's"), "{why}");
        }
        other => panic!("its removal must leave the Machine: {other:?}"),
    }
    let m = support::machine(&world, &machine).await.unwrap();
    assert!(!marked(&m), "{m:?}");
    assert!(m.metadata.deletion_timestamp.is_none());
    assert_eq!(replicas(&world, "md").await, 1);
    assert_eq!(
        m.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(clusterapi::provider::CLAIMED_BY_UID)),
        owner.metadata.uid.as_ref(),
        "still its owner's"
    );
    // The owner still removes it.
    p.delete(&owner).await.unwrap();
    assert!(marked(&support::machine(&world, &machine).await.unwrap()));
}
