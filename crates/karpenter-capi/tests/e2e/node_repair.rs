//! Node repair end to end (gate `NodeRepair`).

use api::NodeClaim;
use karpenter_capi::operator::OperatorConfig;
use karpenter_capi::scenario;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use std::time::Duration;
use world::{Backend, World};

use super::support::*;

/// The operator with node repair on: `Ready=Unknown` for 2 s is unhealthy.
fn repairing_operator() -> OperatorConfig {
    let mut config = fast_operator();
    config.node_repair = controllers::health::HealthConfig {
        enabled: true,
        poll: Duration::from_secs(1),
        min_interval: Duration::from_millis(200),
    };
    config.provider.repair = cloudprovider::RepairPolicies {
        conditions: "Ready=Unknown:2s"
            .parse::<cloudprovider::repair::Conditions>()
            .unwrap()
            .0,
        node_deleted: None,
    };
    config.termination.min_drain_time = Duration::from_millis(500);
    config
}

/// Three nodes, one pod of 3 CPU on each (4-CPU MachineDeployment).
async fn three_nodes(backend: Backend) -> World {
    let world = setup(backend, &[md("w", 4, 16, "zone-a", 0.1)]).await;
    scenario::apply(
        &world.workload_client(),
        &[deployment("app", 3, "3", "1Gi", json!({}))],
    )
    .await
    .unwrap();
    world
}

/// Makes the kubelet of `node` stop (`Ready=Unknown`), or heals it.
async fn fail(world: &World, node: &str, failed: bool) {
    let value = failed.then_some(world::config::annotations::NOT_READY);
    Api::<k8s_openapi::api::core::v1::Node>::all(world.workload_client())
        .patch(
            node,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {
                world::config::annotations::NODE_FAILURE: value}}})),
        )
        .await
        .unwrap();
}

/// The NodeClaim of `node`, if it is there and not being deleted.
async fn live_claim(world: &World, node: &str) -> Option<NodeClaim> {
    node_claims(world).await.into_iter().find(|nc| {
        nc.metadata.deletion_timestamp.is_none()
            && nc.status.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node)
    })
}

async fn sorted_nodes(world: &World) -> Vec<String> {
    let mut names: Vec<String> = nodes(world).await.iter().map(|n| n.name_any()).collect();
    names.sort();
    names
}

/// Whether an Event with `reason` regards an object of `kind` (named `name`, when given).
async fn event(world: &World, reason: &str, kind: &str, name: Option<&str>) -> bool {
    events(world).await.iter().any(|e| {
        let regarding = e.regarding.as_ref();
        e.reason.as_deref() == Some(reason)
            && regarding.and_then(|r| r.kind.as_deref()) == Some(kind)
            && name.is_none_or(|n| regarding.and_then(|r| r.name.as_deref()) == Some(n))
    })
}

/// A node whose Machine a MachineHealthCheck targets is left to it (`NodeRepairDeferred`):
/// Cluster API's MachineHealthCheck (simulated) marks the Machine once its own timeout runs
/// out and the MachineSet deletes and replaces it, and Karpenter never repairs it too. A node
/// no MachineHealthCheck targets is replaced once `Ready=Unknown` has held past the policy's
/// toleration: its NodeClaim is deleted (termination timestamp set) and a new node takes its
/// pod. The healthy node is left alone throughout.
async fn an_unhealthy_node_is_replaced_unless_a_machine_health_check_remediates_it(
    backend: Backend,
) {
    let world = three_nodes(backend).await;
    world::crds::install_machine_health_check_crd(&world.management_client())
        .await
        .unwrap();
    let _operator = start_with(&world, repairing_operator());
    all_running(&world, 3, Duration::from_secs(90)).await;
    let before = sorted_nodes(&world).await;
    assert_eq!(before.len(), 3);
    let (sick, covered, healthy) = (&before[0], &before[1], &before[2]);

    // A MachineHealthCheck targets the Machine of `covered` (by a label the user put on it).
    let covered_claim = live_claim(&world, covered).await.unwrap();
    let machine = covered_claim
        .annotations()
        .get(api::well_known::annotations::MACHINE)
        .cloned()
        .unwrap();
    let (namespace, machine) = machine.split_once('/').unwrap();
    Api::<api::Machine>::namespaced_with(
        world.management_client(),
        namespace,
        &api::CapiVersion::v1beta2(),
    )
    .patch(
        machine,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"health-checked": "yes"}}})),
    )
    .await
    .unwrap();
    scenario::apply(
        &world.management_client(),
        &[
            json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineHealthCheck",
            "metadata": {"name": "checked", "namespace": namespace},
            "spec": {"clusterName": "e2e", "selector": {"matchLabels": {"health-checked": "yes"}},
                "checks": {"unhealthyNodeConditions": [
                    {"type": "Ready", "status": "Unknown", "timeoutSeconds": 8}]}}}),
        ],
    )
    .await
    .unwrap();

    fail(&world, covered, true).await;
    wait_for(
        "NodeRepairDeferred on the covered node's NodeClaim",
        Duration::from_secs(60),
        || async {
            event(
                &world,
                "NodeRepairDeferred",
                "NodeClaim",
                Some(&covered_claim.name_any()),
            )
            .await
            .then_some(())
        },
    )
    .await;
    assert!(
        live_claim(&world, covered).await.is_some(),
        "a Machine a MachineHealthCheck targets is left to it"
    );
    // The MachineHealthCheck remediates it: its Machine goes, the pod runs elsewhere. (The
    // MachineSet's replacement Machine may come on top of a new one Karpenter raised while
    // the old Machine was still deleting: how many nodes there are is not asserted.)
    wait_for(
        "the MachineHealthCheck's remediation",
        Duration::from_secs(120),
        || async {
            let now = sorted_nodes(&world).await;
            let running = pods(&world).await.iter().filter(|p| running(p)).count();
            (!now.contains(covered) && running == 3).then_some(())
        },
    )
    .await;
    assert!(
        !event(
            &world,
            "NodeRepair",
            "NodeClaim",
            Some(&covered_claim.name_any())
        )
        .await,
        "Karpenter did not repair the node the MachineHealthCheck remediated"
    );

    let sick_claim = live_claim(&world, sick).await.unwrap().name_any();
    fail(&world, sick, true).await;
    // The Node goes before its NodeClaim's finalizer is done: wait for both.
    wait_for(
        "the unhealthy node replaced and its NodeClaim gone",
        Duration::from_secs(120),
        || async {
            let now = sorted_nodes(&world).await;
            let running = pods(&world).await.iter().filter(|p| running(p)).count();
            let claim_gone = node_claims(&world)
                .await
                .iter()
                .all(|nc| nc.name_any() != sick_claim);
            (!now.contains(sick) && running == 3 && claim_gone).then_some(())
        },
    )
    .await;
    let after = sorted_nodes(&world).await;
    assert!(
        after.contains(healthy),
        "the healthy node stays: {before:?} → {after:?}"
    );
    // Events are posted in the background: wait for it rather than expect it already there.
    wait_for("the NodeRepair Event", Duration::from_secs(60), || async {
        event(&world, "NodeRepair", "NodeClaim", Some(&sick_claim))
            .await
            .then_some(())
    })
    .await;
    assert!(
        !event(
            &world,
            "NodeRepair",
            "NodeClaim",
            Some(&covered_claim.name_any())
        )
        .await,
        "the covered node was never repaired"
    );
}

/// With two of three nodes unhealthy (more than 20 %, rounded up: 1), repair stops:
/// `NodeRepairBlocked` on the NodePool, both nodes kept. Once one heals, the other is
/// repaired.
async fn repair_stops_while_more_than_a_fifth_of_the_pool_is_unhealthy(backend: Backend) {
    let world = three_nodes(backend).await;
    let _operator = start_with(&world, repairing_operator());
    all_running(&world, 3, Duration::from_secs(90)).await;
    let before = sorted_nodes(&world).await;
    let (a, b) = (&before[0], &before[1]);
    fail(&world, a, true).await;
    fail(&world, b, true).await;
    wait_for(
        "NodeRepairBlocked on the NodePool",
        Duration::from_secs(60),
        || async {
            event(&world, "NodeRepairBlocked", "NodePool", Some("default"))
                .await
                .then_some(())
        },
    )
    .await;
    assert!(live_claim(&world, a).await.is_some() && live_claim(&world, b).await.is_some());
    assert_eq!(sorted_nodes(&world).await, before, "no node repaired");

    fail(&world, b, false).await;
    wait_for(
        "the node still unhealthy repaired",
        Duration::from_secs(120),
        || async { live_claim(&world, a).await.is_none().then_some(()) },
    )
    .await;
    assert!(
        live_claim(&world, b).await.is_some(),
        "the healed node stays"
    );
}

world::backend_tests!(
    an_unhealthy_node_is_replaced_unless_a_machine_health_check_remediates_it,
    repair_stops_while_more_than_a_fifth_of_the_pool_is_unhealthy,
);
