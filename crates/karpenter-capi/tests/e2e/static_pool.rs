//! Static NodePools end to end.

use karpenter_capi::scenario;
use kube::ResourceExt;
use serde_json::json;
use std::time::Duration;
use world::Backend;

use super::support::*;

/// A static NodePool (`spec.replicas`, gate `StaticCapacity`) keeps its replica count with no
/// pod asking: three wanted, `limits.nodes` 2 allows two; the disruption loop leaves its empty
/// nodes alone (static pools are never consolidated); lowered to one replica, the empty node
/// goes and the one with a pod stays; after a template change the drifted node is replaced one
/// for one.
async fn a_static_node_pool_keeps_its_replica_count(backend: Backend) {
    let world = setup(backend, &[md("m", 4, 16, "zone-a", 0.2)]).await;
    scenario::apply(
        &world.workload_client(),
        &[json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "fixed"},
            "spec": {"replicas": 3, "limits": {"nodes": "2"},
                "template": {"metadata": {"labels": {"pool": "fixed"}},
                    "spec": {"nodeClassRef": {"group": "karpenter.cluster.x-k8s.io",
                    "kind": "ClusterAPINodeClass", "name": "default"}, "requirements": []}}}})],
    )
    .await
    .unwrap();
    let mut config = disruptive_operator();
    config.static_capacity.enabled = true;
    let operator = start_with(&world, config);
    node_count(&world, 2, Duration::from_secs(90)).await;
    // A Node exists before registration syncs the NodeClaim's labels onto it.
    let registered = wait_for("both nodes registered", Duration::from_secs(90), || async {
        let nodes = nodes(&world).await;
        nodes
            .iter()
            .all(|n| !label(n, "karpenter.sh/nodepool").is_empty())
            .then_some(nodes)
    })
    .await;
    for node in registered {
        assert_eq!(label(&node, "karpenter.sh/nodepool"), "fixed");
        assert_eq!(label(&node, "pool"), "fixed");
        hold(&world, &node.name_any(), "an empty node of a static pool").await;
    }
    assert_eq!(
        node_claims(&world).await.len(),
        2,
        "limits.nodes bounds the pool"
    );
    assert_eq!(replicas(&world).await, 2);
    assert!(
        operator.disruptions().is_empty(),
        "{:?}",
        operator.disruptions()
    );

    scenario::apply(
        &world.workload_client(),
        &[deployment("app", 1, "1", "1Gi", json!({}))],
    )
    .await
    .unwrap();
    let pod = all_running(&world, 1, Duration::from_secs(90))
        .await
        .remove(0);
    let host = pod.spec.and_then(|s| s.node_name).unwrap();
    patch_pool(&world, "fixed", json!({"spec": {"replicas": 1}})).await;
    node_count(&world, 1, Duration::from_secs(90)).await;
    let left = nodes(&world).await;
    assert_eq!(left[0].name_any(), host, "the node with the pod stays");
    assert_eq!(replicas(&world).await, 1);
    assert_eq!(
        all_running(&world, 1, Duration::from_secs(30)).await.len(),
        1
    );

    // StaticDrift: the template changes; the node is replaced one for one (the replacement
    // first), and the pool never holds more than limits.nodes (2) NodeClaims.
    patch_pool(
        &world,
        "fixed",
        json!({"spec": {"template": {"metadata": {"labels": {"team": "blue"}}}}}),
    )
    .await;
    wait_for(
        "the static node replaced by one labelled team=blue, the pod on it",
        Duration::from_secs(120),
        || async {
            assert!(node_claims(&world).await.len() <= 2, "limits.nodes held");
            let nodes = nodes(&world).await;
            let pods = pods(&world).await;
            let on = pods.first()?.spec.as_ref()?.node_name.clone()?;
            (nodes.len() == 1
                && nodes[0].name_any() != host
                && label(&nodes[0], "team") == "blue"
                && nodes[0].name_any() == on
                && running(&pods[0]))
            .then_some(())
        },
    )
    .await;
    let records = operator.disruptions();
    assert!(
        records.iter().any(
            |r| r.method == controllers::disruption::methods::Method::Drift
                && r.nodes == [host.clone()]
                && r.decision == controllers::disruption::methods::Decision::Replace
        ),
        "{records:?}"
    );
    assert_eq!(replicas(&world).await, 1);
}

world::backend_tests!(a_static_node_pool_keeps_its_replica_count);
