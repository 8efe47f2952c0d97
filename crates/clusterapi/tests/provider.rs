//! The Cluster API CloudProvider against the simulated world: cheapest choice, compare-and-set
//! claims under concurrency, max size, resume after a restart, idempotent delete, late
//! providerIDs.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use std::collections::HashSet;
use std::time::Duration;

use api::well_known::annotations::MACHINE;
use api::well_known::capi::{DEPLOYMENT_NAME, KARPENTER_MEMBER};
use api::{Machine, NodeClaim};
use cloudprovider::{CloudProvider, CloudProviderError, Launch};
use clusterapi::ClusterApiProvider;
use clusterapi::provider::CLAIMED_BY_UID;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};
use world::{World, WorldConfig};

async fn world(config: WorldConfig) -> World {
    support::world(config).await
}

async fn add_md(world: &World, name: &str, price: &str, max_size: Option<&str>) {
    support::md(name)
        .price(price)
        .max_size(max_size)
        .create(world)
        .await;
}

async fn node_claim(world: &World, name: &str) -> NodeClaim {
    support::zonal_node_claim(world, name).await
}

async fn fresh(world: &World, nc: &NodeClaim) -> NodeClaim {
    support::fresh_node_claim(world, nc).await
}

async fn machine(world: &World, launch: &Launch) -> Option<Machine> {
    support::machine(world, &launch.machine.name).await
}

fn provider(world: &World) -> ClusterApiProvider {
    support::default_provider(world)
}

fn label(m: &Machine, key: &str) -> Option<String> {
    m.metadata.labels.as_ref()?.get(key).cloned()
}

#[tokio::test(start_paused = true)]
async fn create_scales_the_cheapest_machine_deployment_and_claims_one_machine() {
    let world = world(WorldConfig::default()).await;
    add_md(&world, "a-expensive", "2.0", None).await;
    add_md(&world, "b-cheap", "0.5", None).await;
    let p = provider(&world);
    let nc = node_claim(&world, "nc-1").await;

    let launch = p.create(&nc).await.unwrap();
    assert_eq!(launch.instance_type, "b-cheap");
    assert_eq!(launch.zone.as_deref(), Some("z1"));
    assert_eq!(support::replicas(&world, "b-cheap").await, 1);
    assert_eq!(support::replicas(&world, "a-expensive").await, 0);
    let m = machine(&world, &launch).await.unwrap();
    assert_eq!(label(&m, DEPLOYMENT_NAME).as_deref(), Some("b-cheap"));
    assert_eq!(label(&m, KARPENTER_MEMBER).as_deref(), Some(""));
    assert_eq!(
        m.metadata.annotations.as_ref().unwrap()[CLAIMED_BY_UID],
        nc.metadata.uid.clone().unwrap()
    );
    // The binding annotation comes with the launch, for the lifecycle's one metadata write;
    // the provider itself writes nothing to the NodeClaim.
    assert_eq!(launch.annotations[MACHINE], launch.machine.to_string());
    let unbound = fresh(&world, &nc).await;
    assert!(
        unbound
            .metadata
            .annotations
            .is_none_or(|a| !a.contains_key(MACHINE)),
        "the provider wrote the NodeClaim"
    );
    // Calling create again (the lifecycle's write failed) resumes: same Machine, no new
    // replica.
    let again = p.create(&fresh(&world, &nc).await).await.unwrap();
    assert_eq!(again.machine, launch.machine);
    assert_eq!(support::replicas(&world, "b-cheap").await, 1);
}

#[tokio::test(start_paused = true)]
async fn concurrent_creates_never_claim_the_same_machine() {
    let world = world(WorldConfig::default()).await;
    add_md(&world, "md", "1", None).await;
    let p = provider(&world);
    let a = node_claim(&world, "a").await;
    let b = node_claim(&world, "b").await;
    let (la, lb) = tokio::join!(p.create(&a), p.create(&b));
    let (la, lb) = (la.unwrap(), lb.unwrap());
    assert_ne!(la.machine, lb.machine);
    assert_eq!(support::replicas(&world, "md").await, 2);
}

#[tokio::test(start_paused = true)]
async fn twenty_creates_against_max_size_five_launch_exactly_five() {
    let world = world(WorldConfig::default()).await;
    add_md(&world, "md", "1", Some("5")).await;
    let p = provider(&world);
    let mut ncs = Vec::new();
    for i in 0..20 {
        ncs.push(node_claim(&world, &format!("nc-{i}")).await);
    }
    let results = futures::future::join_all(ncs.iter().map(|nc| p.create(nc))).await;
    let launched: Vec<&Launch> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
    assert_eq!(launched.len(), 5);
    let machines: HashSet<_> = launched.iter().map(|l| l.machine.clone()).collect();
    assert_eq!(machines.len(), 5);
    for r in &results {
        if let Err(e) = r {
            assert!(
                matches!(e, CloudProviderError::InsufficientCapacity(_)),
                "{e}"
            );
        }
    }
    assert_eq!(support::replicas(&world, "md").await, 5);
}

#[tokio::test(start_paused = true)]
async fn a_new_provider_resumes_with_the_same_machine() {
    let world = world(WorldConfig::default()).await;
    add_md(&world, "md", "1", None).await;
    let nc = node_claim(&world, "nc").await;
    let first = provider(&world).create(&nc).await.unwrap();

    // Restart after a crash between the claim and the lifecycle's write (the NodeClaim is not
    // annotated): the claim on the Machine (the NodeClaim's UID) finds it.
    let second = provider(&world)
        .create(&fresh(&world, &nc).await)
        .await
        .unwrap();
    assert_eq!(second.machine, first.machine);
    assert_eq!(second.annotations[MACHINE], first.machine.to_string());

    // Restart with the NodeClaim annotated (the lifecycle wrote the launch).
    let api: Api<NodeClaim> = Api::all(world.workload_client());
    let patch = json!({"metadata": {"annotations": {MACHINE: first.machine.to_string()}}});
    api.patch("nc", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let third = provider(&world)
        .create(&fresh(&world, &nc).await)
        .await
        .unwrap();
    assert_eq!(third.machine, first.machine);
    assert_eq!(support::replicas(&world, "md").await, 1);
}

#[tokio::test(start_paused = true)]
async fn delete_twice_lowers_replicas_once_and_the_machine_goes() {
    let world = world(WorldConfig::default()).await;
    add_md(&world, "md", "1", None).await;
    let p = provider(&world);
    let a = node_claim(&world, "a").await;
    let b = node_claim(&world, "b").await;
    let la = p.create(&a).await.unwrap();
    let lb = p.create(&b).await.unwrap();
    assert_eq!(support::replicas(&world, "md").await, 2);

    let a = fresh(&world, &a).await;
    p.delete(&a).await.unwrap();
    match p.delete(&a).await {
        Ok(()) | Err(CloudProviderError::NodeClaimNotFound(_)) => {}
        Err(e) => panic!("{e}"),
    }
    assert_eq!(support::replicas(&world, "md").await, 1);

    let mut gone = false;
    for _ in 0..240 {
        if machine(&world, &la).await.is_none() {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(gone, "the MachineSet deleted the annotated Machine");
    assert!(p.delete(&a).await.unwrap_err().is_not_found());
    assert_eq!(support::replicas(&world, "md").await, 1);
    assert!(
        machine(&world, &lb).await.is_some(),
        "the other Machine stays"
    );
}

#[tokio::test(start_paused = true)]
async fn a_late_provider_id_is_picked_up_without_blocking_create() {
    let mut config = WorldConfig::default();
    config.capi.provider_id_delay = Duration::from_secs(600);
    let world = world(config).await;
    add_md(&world, "md", "1", None).await;
    let p = provider(&world);
    let nc = node_claim(&world, "nc").await;
    let launch = p.create(&nc).await.unwrap();
    assert_eq!(
        launch.provider_id, None,
        "create returned before the providerID"
    );
    let nc = fresh(&world, &nc).await;
    assert_eq!(p.get_launch(&nc).await.unwrap().provider_id, None);

    tokio::time::sleep(Duration::from_secs(660)).await;
    let later = p.get_launch(&nc).await.unwrap();
    let id = later.provider_id.clone().expect("the providerID arrived");
    assert_eq!(later.machine, launch.machine);
    let by_id = p
        .get(&format!("{}/", id.replacen("sim", "SIM", 1)))
        .await
        .unwrap();
    assert_eq!(by_id.machine, launch.machine);
    let listed: Vec<Value> = p
        .list()
        .await
        .unwrap()
        .iter()
        .map(|l| json!(l.machine.to_string()))
        .collect();
    assert_eq!(listed, vec![json!(launch.machine.to_string())]);
}

#[tokio::test]
async fn a_machine_deployment_leaving_the_node_class_drifts_its_node_claims() {
    let world = world(WorldConfig::default()).await;
    add_md(&world, "a", "1", None).await;
    let p = provider(&world);
    let nc = node_claim(&world, "nc-drift").await;
    p.create(&nc).await.unwrap();
    let nc = fresh(&world, &nc).await;
    assert_eq!(p.is_drifted(&nc).await.unwrap(), None);
    // The user takes the MachineDeployment out of Karpenter's hands.
    let mds: Api<api::MachineDeployment> = Api::namespaced_with(
        world.management_client(),
        "default",
        &api::CapiVersion::v1beta2(),
    );
    mds.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {KARPENTER_MEMBER: null}}})),
    )
    .await
    .unwrap();
    // Drift reads the MachineDeployment cache: it shows the change once its watch delivers it.
    let mut drift = None;
    for _ in 0..100 {
        drift = p.is_drifted(&nc).await.unwrap();
        if drift.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(drift.as_deref(), Some(clusterapi::drift::NOT_SELECTED));
}

#[tokio::test(start_paused = true)]
async fn concurrent_creates_on_one_machine_deployment_share_scale_writes() {
    let world = world(WorldConfig::default()).await;
    add_md(&world, "md", "1", None).await;
    let mds: Api<api::MachineDeployment> = Api::namespaced_with(
        world.management_client(),
        "default",
        &api::CapiVersion::v1beta2(),
    );
    let generation = |md: api::MachineDeployment| md.metadata.generation.unwrap_or(0);
    let before = generation(mds.get("md").await.unwrap());
    let p = provider(&world);
    let mut ncs = Vec::new();
    for i in 0..20 {
        ncs.push(node_claim(&world, &format!("nc-{i}")).await);
    }
    let results = futures::future::join_all(ncs.iter().map(|nc| p.create(nc))).await;
    let machines: HashSet<_> = results
        .iter()
        .map(|r| r.as_ref().unwrap().machine.clone())
        .collect();
    assert_eq!(machines.len(), 20, "every create has its own Machine");
    assert_eq!(
        support::replicas(&world, "md").await,
        20,
        "no replica leaked"
    );
    let writes = generation(mds.get("md").await.unwrap()) - before;
    assert!(
        (1..20).contains(&writes),
        "20 creates took {writes} replica writes; they should be batched"
    );
}

#[tokio::test(start_paused = true)]
async fn concurrent_deletes_on_one_machine_deployment_share_scale_writes() {
    let world = world(WorldConfig::default()).await;
    add_md(&world, "md", "1", None).await;
    let p = provider(&world);
    let mut ncs = Vec::new();
    for i in 0..10 {
        ncs.push(node_claim(&world, &format!("nc-{i}")).await);
    }
    let launches: Vec<Launch> = futures::future::join_all(ncs.iter().map(|nc| p.create(nc)))
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(support::replicas(&world, "md").await, 10);
    let mut fresh_ncs = Vec::new();
    for nc in &ncs {
        fresh_ncs.push(fresh(&world, nc).await);
    }
    let mds: Api<api::MachineDeployment> = Api::namespaced_with(
        world.management_client(),
        "default",
        &api::CapiVersion::v1beta2(),
    );
    let generation = |md: api::MachineDeployment| md.metadata.generation.unwrap_or(0);
    let before = generation(mds.get("md").await.unwrap());
    let results = futures::future::join_all(fresh_ncs.iter().map(|nc| p.delete(nc))).await;
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    assert_eq!(
        support::replicas(&world, "md").await,
        0,
        "lowered once per Machine"
    );
    let writes = generation(mds.get("md").await.unwrap()) - before;
    assert!(
        (1..10).contains(&writes),
        "10 deletes took {writes} replica writes; they should be batched"
    );
    for launch in &launches {
        if let Some(m) = machine(&world, launch).await {
            assert!(
                m.metadata
                    .annotations
                    .as_ref()
                    .is_some_and(|a| a.contains_key("cluster.x-k8s.io/delete-machine"))
                    || m.metadata.deletion_timestamp.is_some(),
                "{} neither annotated nor deleting",
                launch.machine
            );
        }
    }
    // Deleting again changes nothing.
    let again = futures::future::join_all(fresh_ncs.iter().map(|nc| p.delete(nc))).await;
    assert!(
        again
            .iter()
            .all(|r| r.is_ok() || matches!(r, Err(CloudProviderError::NodeClaimNotFound(_))))
    );
    assert_eq!(support::replicas(&world, "md").await, 0);
}

#[tokio::test(start_paused = true)]
async fn get_and_list_describe_machines_with_their_node_class_overhead() {
    let world = world(WorldConfig::default()).await;
    let classes: Api<api::ClusterAPINodeClass> = Api::all(world.workload_client());
    classes
        .patch(
            "default",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"kubeReserved": {"cpu": "500m"}}})),
        )
        .await
        .unwrap();
    add_md(&world, "md", "1", None).await;
    let p = provider(&world);
    let nc = node_claim(&world, "nc").await;
    p.create(&nc).await.unwrap();
    let nc = fresh(&world, &nc).await;
    tokio::time::sleep(Duration::from_secs(30)).await;
    let id = p
        .get_launch(&nc)
        .await
        .unwrap()
        .provider_id
        .expect("providerID");
    let cpu = |l: &Launch| {
        l.allocatable
            .iter()
            .find(|(k, _)| k.as_str() == "cpu")
            .map(|(_, q)| q.to_string())
    };
    let by_id = p.get(&id).await.unwrap();
    assert_eq!(cpu(&by_id).as_deref(), Some("3500m"), "{by_id:?}");
    let listed = p.list().await.unwrap();
    assert_eq!(cpu(&listed[0]).as_deref(), Some("3500m"));
}

#[tokio::test(start_paused = true)]
async fn min_and_max_sizes_hold_under_fifty_concurrent_creates_and_deletes() {
    let world = world(WorldConfig::default()).await;
    add_md(&world, "md", "1", Some("10")).await;
    let mds: Api<api::MachineDeployment> = Api::namespaced_with(
        world.management_client(),
        "default",
        &api::CapiVersion::v1beta2(),
    );
    mds.patch(
        "md",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {
            "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size": "3"}}})),
    )
    .await
    .unwrap();
    let p = provider(&world);
    let mut ncs = Vec::new();
    for i in 0..50 {
        ncs.push(node_claim(&world, &format!("nc-{i}")).await);
    }
    let results = futures::future::join_all(ncs.iter().map(|nc| p.create(nc))).await;
    let launched: HashSet<_> = results
        .iter()
        .filter_map(|r| r.as_ref().ok().map(|l| l.machine.clone()))
        .collect();
    assert_eq!(launched.len(), 10, "max size 10");
    assert_eq!(support::replicas(&world, "md").await, 10);
    let mut bound = Vec::new();
    for (nc, r) in ncs.iter().zip(&results) {
        if r.is_ok() {
            bound.push(fresh(&world, nc).await);
        }
    }
    let deleted = futures::future::join_all(bound.iter().map(|nc| p.delete(nc))).await;
    assert!(deleted.iter().all(Result::is_ok), "{deleted:?}");
    assert_eq!(
        support::replicas(&world, "md").await,
        3,
        "min size 3 holds: the Machines beyond it were deleted directly"
    );
}
