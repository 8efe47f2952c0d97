//! A MachinePool as a node group, end to end: pending pods launch on it (it is the cheaper
//! group), its MachinePool Machines become the Nodes, and after a scale-in emptiness removes
//! exactly the empty nodes' Machines, lowering the pool's replicas.

use api::{Machine, MachinePool};
use k8s_openapi::api::core::v1::Node;
use karpenter_capi::scenario;
use kube::ResourceExt;
use serde_json::json;
use std::time::Duration;
use world::Backend;

use super::support::*;

async fn a_machine_pool_launches_and_scales_in(backend: Backend) {
    let mut pool = md("cheap", 4, 16, "zone-a", 0.1);
    pool["kind"] = json!("MachinePool");
    let spec = pool["spec"].as_object_mut().unwrap();
    spec.remove("selector");
    pool["spec"]["template"]["spec"]["version"] = json!("v1.33.1");
    pool["spec"]["template"]["spec"]["infrastructureRef"] = json!({
        "apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerMachinePool",
        "name": "cheap-zone-a"});
    let infrastructure = json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "DockerMachinePool",
        "metadata": {"name": "cheap-zone-a", "namespace": "default"}, "spec": {}});
    let world = setup_consolidating(
        backend,
        &[md("dear", 4, 16, "zone-a", 0.4), infrastructure, pool],
    )
    .await;
    let operator = start_disruptive(&world);
    scenario::apply(
        &world.workload_client(),
        &[deployment("app", 3, "3", "1Gi", json!({}))],
    )
    .await
    .unwrap();
    let before: Vec<String> = all_running(&world, 3, Duration::from_secs(90))
        .await
        .iter()
        .map(|p| p.name_any())
        .collect();
    let ready: Vec<Node> = nodes(&world).await;
    assert_eq!(ready.len(), 3);
    for node in &ready {
        assert_eq!(label(node, "node.kubernetes.io/instance-type"), "cheap");
    }
    let owned_by_pool = |m: &Machine| {
        m.metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.kind == "MachinePool" && o.name == "cheap-zone-a")
    };
    let pool_replicas = || async {
        list_capi::<MachinePool>(world.management_client())
            .await
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some("cheap-zone-a"))
            .and_then(|p| p.spec.replicas)
            .unwrap_or(0)
    };
    assert!(machines(&world).await.iter().all(owned_by_pool));
    assert_eq!(pool_replicas().await, 3);
    assert_eq!(
        replicas(&world).await,
        0,
        "the dearer MachineDeployment stays at 0"
    );

    scale(&world, "app", 1).await;
    node_count(&world, 1, Duration::from_secs(90)).await;
    let pods = all_running(&world, 1, Duration::from_secs(30)).await;
    // The pod that stays is one of the three from before: never evicted and made again.
    assert!(before.contains(&pods[0].name_any()), "{before:?} {pods:?}");
    wait_for(
        "the pool at 1 replica with 1 Machine",
        Duration::from_secs(60),
        || async {
            let machines = machines(&world).await;
            (pool_replicas().await == 1 && machines.len() == 1 && owned_by_pool(&machines[0]))
                .then_some(())
        },
    )
    .await;
    assert_two_nodes_went_by_deletion(&operator.disruptions());
}

world::backend_tests!(a_machine_pool_launches_and_scales_in);
