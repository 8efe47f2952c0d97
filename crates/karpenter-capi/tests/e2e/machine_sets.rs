//! A stand-alone MachineSet as a node group, end to end: pending pods launch on it (it is the
//! cheaper group), the Nodes carry its shape, and after a scale-in emptiness removes exactly the
//! empty nodes' Machines, lowering the set's replicas.

use api::{Machine, MachineSet};
use k8s_openapi::api::core::v1::Node;
use karpenter_capi::scenario;
use kube::ResourceExt;
use serde_json::json;
use std::time::Duration;
use world::Backend;

use super::support::*;

async fn a_stand_alone_machine_set_launches_and_scales_in(backend: Backend) {
    let mut set = md("cheap", 4, 16, "zone-a", 0.1);
    set["kind"] = json!("MachineSet");
    let world = setup_consolidating(backend, &[md("dear", 4, 16, "zone-a", 0.4), set]).await;
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
    let owned_by_set = |m: &Machine| {
        m.metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.kind == "MachineSet" && o.name == "cheap-zone-a")
    };
    let set_replicas = || async {
        list_capi::<MachineSet>(world.management_client())
            .await
            .iter()
            .find(|s| s.metadata.name.as_deref() == Some("cheap-zone-a"))
            .and_then(|s| s.spec.replicas)
            .unwrap_or(0)
    };
    assert!(machines(&world).await.iter().all(owned_by_set));
    assert_eq!(set_replicas().await, 3);
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
        "the set at 1 replica with 1 Machine",
        Duration::from_secs(60),
        || async {
            let machines = machines(&world).await;
            (set_replicas().await == 1 && machines.len() == 1 && owned_by_set(&machines[0]))
                .then_some(())
        },
    )
    .await;
    assert_two_nodes_went_by_deletion(&operator.disruptions());
}

world::backend_tests!(a_stand_alone_machine_set_launches_and_scales_in);
