//! The simulated infrastructure provider alone (`sim world --real-cluster-api`: Cluster API's
//! real core controllers run, the world only answers for the provider kinds). Here the test
//! plays Cluster API's part: it creates the Machine and the `SimMachine` that Cluster API
//! would clone from the template, owned by the Machine. The provider must give the
//! `SimMachine` a providerID and mark it provisioned (the v1beta2 contract), register the
//! Node, mark the `SimCluster` provisioned and the `SimControlPlane` initialized, release the
//! instance when the `SimMachine` is deleted — and never act as Cluster API's core
//! controllers do (a MachineDeployment's replicas make no MachineSet).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod capi_support;

use std::time::Duration;

use capi_support::{md_json, scale, wait_for};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, PostParams};
use serde_json::{Value, json};
use world::capi::infrastructure::{SIM_CLUSTER, SIM_CONTROL_PLANE, SIM_MACHINE};
use world::objects::{machine_deployments, machine_sets, machines};
use world::{World, WorldConfig};

fn infrastructure_only() -> WorldConfig {
    let mut config = WorldConfig::default();
    config.capi.core = false;
    config.capi.provider_id_delay = Duration::from_secs(2);
    config.capi.node_join_delay = Duration::from_secs(1);
    config.capi.deletion_delay = Duration::from_secs(1);
    config
}

fn object(value: Value) -> DynamicObject {
    serde_json::from_value(value).unwrap()
}

async fn get(api: &Api<DynamicObject>, name: &str) -> Option<Value> {
    api.get_opt(name)
        .await
        .unwrap()
        .map(|o| serde_json::to_value(o).unwrap())
}

#[tokio::test(start_paused = true)]
async fn the_provider_provisions_what_cluster_api_asks_for_and_nothing_else() {
    let world = World::start(infrastructure_only()).await.unwrap();
    let mgmt = world.management_client();
    let ns = |r: ApiResource| Api::<DynamicObject>::namespaced_with(mgmt.clone(), "default", &r);
    let (clusters, planes, sims) = (
        ns(SIM_CLUSTER.resource()),
        ns(SIM_CONTROL_PLANE.resource()),
        ns(SIM_MACHINE.resource()),
    );
    let pp = PostParams::default();
    clusters
        .create(
            &pp,
            &object(
                json!({"apiVersion": "infrastructure.sim.karpenter-capi.dev/v1alpha1",
            "kind": "SimCluster", "metadata": {"name": "c1"}, "spec": {}}),
            ),
        )
        .await
        .unwrap();
    planes
        .create(
            &pp,
            &object(
                json!({"apiVersion": "controlplane.sim.karpenter-capi.dev/v1alpha1",
            "kind": "SimControlPlane", "metadata": {"name": "c1"}, "spec": {}}),
            ),
        )
        .await
        .unwrap();
    // A MachineDeployment whose zone comes from the labels annotation, scaled to 2: the
    // core's business, so nothing happens to it.
    let mds = ns(machine_deployments());
    let annotations = json!({"capacity.cluster-autoscaler.kubernetes.io/labels":
        "topology.kubernetes.io/zone=z9", "capacity.cluster-autoscaler.kubernetes.io/cpu": "3"});
    mds.create(&pp, &md_json("md", annotations)).await.unwrap();
    scale(&mds, "md", 2).await;
    // What Cluster API's MachineSet and Machine controllers would make.
    let ms_api = ns(machines());
    let machine = ms_api
        .create(
            &pp,
            &object(
                json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
            "metadata": {"name": "md-abc-x1", "labels": {"cluster.x-k8s.io/deployment-name": "md",
                "node-role.kubernetes.io/worker": ""}},
            "spec": {"clusterName": "c1", "version": "v1.33.1",
                "bootstrap": {"dataSecretName": "boot"},
                "infrastructureRef": {"apiGroup": "infrastructure.sim.karpenter-capi.dev",
                    "kind": "SimMachine", "name": "md-abc-x1"}}}),
            ),
        )
        .await
        .unwrap();
    let uid = machine.metadata.uid.clone().unwrap();
    sims.create(
        &pp,
        &object(
            json!({"apiVersion": "infrastructure.sim.karpenter-capi.dev/v1alpha1",
        "kind": "SimMachine", "metadata": {"name": "md-abc-x1", "ownerReferences": [
            {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine", "name": "md-abc-x1",
             "uid": uid, "controller": true}]},
        "spec": {"image": "v1"}}),
        ),
    )
    .await
    .unwrap();
    // An InfraMachine nobody owns yet is left alone.
    sims.create(
        &pp,
        &object(
            json!({"apiVersion": "infrastructure.sim.karpenter-capi.dev/v1alpha1",
        "kind": "SimMachine", "metadata": {"name": "unowned"}, "spec": {}}),
        ),
    )
    .await
    .unwrap();

    let pid = "sim:///z9/md-abc-x1";
    let provisioned = wait_for("the SimMachine provisioned", 200, || async {
        let sm = get(&sims, "md-abc-x1").await?;
        (sm["status"]["initialization"]["provisioned"] == json!(true)).then_some(sm)
    })
    .await;
    assert_eq!(provisioned["spec"]["providerID"], pid);
    assert_eq!(provisioned["status"]["ready"], true);
    assert_eq!(
        provisioned["metadata"]["finalizers"],
        json!(["sim.karpenter-capi.dev/instance"])
    );
    let nodes: Api<Node> = Api::all(world.workload_client());
    let node = wait_for("the Node", 200, || async {
        nodes
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .find(|n| n.spec.as_ref().and_then(|s| s.provider_id.as_deref()) == Some(pid))
    })
    .await;
    assert_eq!(node.metadata.name.as_deref(), Some("md-abc-x1"));
    let capacity = node.status.unwrap().capacity.unwrap();
    assert_eq!(capacity["cpu"].0, "3", "the shape of the MachineDeployment");
    for (api, name, path) in [
        (&clusters, "c1", "/status/initialization/provisioned"),
        (
            &planes,
            "c1",
            "/status/initialization/controlPlaneInitialized",
        ),
    ] {
        let o = get(api, name).await.unwrap();
        assert_eq!(o.pointer(path), Some(&json!(true)), "{o}");
    }
    let unowned = get(&sims, "unowned").await.unwrap();
    assert!(unowned["spec"].get("providerID").is_none(), "{unowned}");
    assert!(unowned["metadata"].get("finalizers").is_none(), "{unowned}");
    // The core controllers are not simulated: no MachineSet, no Machine of our making, and the
    // Machine's own status is untouched.
    let sets = ns(machine_sets()).list(&Default::default()).await.unwrap();
    assert!(sets.items.is_empty(), "{:?}", sets.items);
    assert_eq!(
        ms_api.list(&Default::default()).await.unwrap().items.len(),
        1
    );
    let m = get(&ms_api, "md-abc-x1").await.unwrap();
    assert!(
        m.get("status").is_none_or(|s| s.get("phase").is_none()),
        "{m}"
    );

    // Deleting the SimMachine (Cluster API does, deleting the Machine) releases the instance.
    sims.delete("md-abc-x1", &DeleteParams::default())
        .await
        .unwrap();
    wait_for("the instance released", 200, || async {
        let gone = get(&sims, "md-abc-x1").await.is_none();
        let node_gone = nodes
            .get_opt("md-abc-x1")
            .await
            .unwrap()
            .is_none_or(|n| n.metadata.deletion_timestamp.is_some());
        (gone && node_gone).then_some(())
    })
    .await;
}
