//! Disruption end to end: emptiness, consolidation (Balanced too), drift, expiry, what blocks
//! disruption (PDBs, do-not-disrupt, budgets, min sizes), restarts in the middle of a replacement.

use k8s_openapi::api::core::v1::{Node, Pod};
use karpenter_capi::scenario;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use serde_json::json;
use std::time::Duration;
use world::{Backend, World};

use super::support::*;

/// Emptiness: after a scale-in, the empty nodes go (drained, their exact Machines deleted,
/// replicas lowered) and the busy one stays, its pod never moved.
async fn empty_nodes_are_removed_after_a_scale_in(backend: Backend) {
    let world = setup_consolidating(backend, &[md("m", 4, 16, "zone-a", 0.2)]).await;
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
    assert_eq!(nodes(&world).await.len(), 3);
    scale(&world, "app", 1).await;
    node_count(&world, 1, Duration::from_secs(90)).await;
    let pods = all_running(&world, 1, Duration::from_secs(30)).await;
    let node = &nodes(&world).await[0];
    assert_eq!(
        pods[0].spec.as_ref().unwrap().node_name.as_deref(),
        Some(node.name_any().as_str()),
        "the busy node stays"
    );
    assert_eq!(replicas(&world).await, 1);
    // The pod that stays is one of the three from before: never evicted and made again.
    assert!(before.contains(&pods[0].name_any()), "{before:?} {pods:?}");
    assert_two_nodes_went_by_deletion(&operator.disruptions());
}

/// #23 item 3, found against Cluster API: after a 3→1 scale-in, the busy node — quiet for
/// longer than `consolidateAfter` — was consolidated by moving its pod onto a node that had
/// just emptied. A node inside its `consolidateAfter` window is no destination for moved pods:
/// the two emptied nodes go by emptiness once their window ends, and the pod stays where it is.
async fn after_a_scale_in_the_emptied_nodes_go_and_the_running_pod_stays(backend: Backend) {
    let world = setup_with_disruption(
        backend,
        &[md("m", 4, 16, "zone-a", 0.2)],
        json!({"consolidateAfter": "5s"}),
    )
    .await;
    let operator = start_disruptive(&world);
    scenario::apply(
        &world.workload_client(),
        &[deployment("app", 3, "3", "1Gi", json!({}))],
    )
    .await
    .unwrap();
    all_running(&world, 3, Duration::from_secs(90)).await;
    // Every node quiet past its window: the one left busy is a consolidation candidate at once.
    tokio::time::sleep(Duration::from_secs(7)).await;
    scale(&world, "app", 1).await;
    let busy = wait_for("one pod left", Duration::from_secs(30), || async {
        let pods = pods(&world).await;
        (pods.len() == 1).then(|| pods[0].spec.as_ref()?.node_name.clone())?
    })
    .await;
    node_count(&world, 1, Duration::from_secs(90)).await;
    assert_eq!(
        nodes(&world).await[0].name_any(),
        busy,
        "the busy node stays"
    );
    let pods = all_running(&world, 1, Duration::from_secs(30)).await;
    assert_eq!(
        pods[0].spec.as_ref().unwrap().node_name.as_deref(),
        Some(busy.as_str()),
        "the pod was not moved"
    );
    let records = operator.disruptions();
    assert!(
        records
            .iter()
            .all(|r| r.method == controllers::disruption::methods::Method::Emptiness),
        "{records:?}"
    );
}

/// Two nodes each left with one small pod become one: one node is deleted, its pod moves.
async fn a_half_empty_pair_is_consolidated_into_one_node(backend: Backend) {
    let world = setup_consolidating(backend, &[md("m", 4, 16, "zone-a", 0.2)]).await;
    let _operator = start_disruptive(&world);
    scenario::apply(
        &world.workload_client(),
        &[deployment("big", 2, "3", "1Gi", json!({}))],
    )
    .await
    .unwrap();
    all_running(&world, 2, Duration::from_secs(90)).await;
    scenario::apply(
        &world.workload_client(),
        &[deployment("small", 2, "500m", "256Mi", json!({}))],
    )
    .await
    .unwrap();
    all_running(&world, 4, Duration::from_secs(60)).await;
    assert_eq!(
        nodes(&world).await.len(),
        2,
        "the small pods fit beside the big ones"
    );
    scale(&world, "big", 0).await;
    node_count(&world, 1, Duration::from_secs(120)).await;
    let pods = all_running(&world, 2, Duration::from_secs(60)).await;
    let node = nodes(&world).await[0].name_any();
    assert!(
        pods.iter()
            .all(|p| p.spec.as_ref().unwrap().node_name.as_deref() == Some(node.as_str()))
    );
    assert_eq!(replicas(&world).await, 1);
}

/// Two MachineDeployments, `big` (8 cpu, $0.8/h) and `small` (2 cpu, $0.2/h), in a
/// consolidating world.
async fn big_and_small(backend: Backend) -> World {
    setup_consolidating(
        backend,
        &[
            md("big", 8, 32, "zone-a", 0.8),
            md("small", 2, 8, "zone-a", 0.2),
        ],
    )
    .await
}

/// A `huge` pod (6 cpu: only `big` takes it) and a `tiny` one (1 cpu) beside it, all Running.
async fn huge_and_tiny(world: &World) {
    scenario::apply(
        &world.workload_client(),
        &[deployment("huge", 1, "6", "1Gi", json!({}))],
    )
    .await
    .unwrap();
    all_running(world, 1, Duration::from_secs(90)).await;
    scenario::apply(
        &world.workload_client(),
        &[deployment("tiny", 1, "1", "1Gi", json!({}))],
    )
    .await
    .unwrap();
    all_running(world, 2, Duration::from_secs(60)).await;
}

/// Waits until the one pod runs on the one node left, a `small` one.
async fn one_pod_on_one_small_node(world: &World, what: &str) {
    wait_for(what, Duration::from_secs(120), || async {
        let nodes = nodes(world).await;
        let pods = pods(world).await;
        (nodes.len() == 1
            && label(&nodes[0], "node.kubernetes.io/instance-type") == "small"
            && pods.len() == 1
            && running(&pods[0])
            && pods[0].spec.as_ref().unwrap().node_name.as_deref()
                == Some(nodes[0].name_any().as_str()))
        .then_some(())
    })
    .await;
}

/// Asserts that a consolidation replaced a node by one `small` node.
fn replaced_by_small(operator: &karpenter_capi::operator::Operator) {
    let records = operator.disruptions();
    assert!(
        records.iter().any(
            |r| r.decision == controllers::disruption::methods::Decision::Replace
                && r.replacements == ["small"]
        ),
        "{records:?}"
    );
}

/// A node whose pods would fit on a cheaper MachineDeployment is replaced: the replacement is
/// launched and initialized first, then the old node drains and its Machine goes.
async fn a_node_is_replaced_by_a_cheaper_machine_deployment(backend: Backend) {
    let world = big_and_small(backend).await;
    let operator = start_disruptive(&world);
    huge_and_tiny(&world).await;
    let before = nodes(&world).await;
    assert_eq!(before.len(), 1);
    assert_eq!(label(&before[0], "node.kubernetes.io/instance-type"), "big");
    scale(&world, "huge", 0).await;
    one_pod_on_one_small_node(&world, "the tiny pod on a small node").await;
    node_count(&world, 1, Duration::from_secs(60)).await;
    replaced_by_small(&operator);
    // The candidate was announced before its validation, as upstream does.
    let events = Api::<k8s_openapi::api::events::v1::Event>::all(world.workload_client());
    let notes: Vec<String> = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("ConsolidationCandidate"))
        .filter_map(|e| e.note)
        .collect();
    assert!(
        notes.iter().any(|n| n.starts_with("Replacing 1 node(s) (")
            && n.contains(") with small, savings 0.600/h")),
        "{notes:?}"
    );
}

/// A replacement is made for the pods of the node it replaces; until they have left that
/// node it is not empty, it waits for them. A StatefulSet-like pod (the test re-creates it,
/// under the same name, only once the old one is gone) takes 20 s to terminate: the fresh
/// `small` node stays empty meanwhile, and with `consolidateAfter: 0s` emptiness would take
/// it (validation 5 s later still finds it empty) — then the pod would need a third node. It
/// must stay, and the pod come back onto it.
async fn a_replacement_waits_for_the_pods_it_was_made_for(backend: Backend) {
    let mut config = fast_world();
    config.kubelet.pod_termination_delay = Duration::from_secs(20);
    let world = setup_world(
        backend,
        config,
        &[
            md("big", 8, 32, "zone-a", 0.8),
            md("small", 2, 8, "zone-a", 0.2),
        ],
        // Budget for every node: the default 10 % would already be spent on the node being
        // replaced, which would hide the hazard.
        &[(
            "default",
            json!({"consolidateAfter": "0s", "budgets": [{"nodes": "100%"}]}),
        )],
    )
    .await;
    // Validation after 5 s (upstream: 15 s) bridges the moment between the old db-0 going
    // and the new one being bound, as it does for a StatefulSet's pods.
    let mut operator_config = disruptive_operator();
    operator_config.disruption.validation_delay = Duration::from_secs(5);
    let operator = start_with(&world, operator_config);
    scenario::apply(
        &world.workload_client(),
        &[deployment("huge", 1, "6", "1Gi", json!({}))],
    )
    .await
    .unwrap();
    all_running(&world, 1, Duration::from_secs(90)).await;
    let db = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "db-0", "namespace": "default", "labels": {"app": "db"}},
        "spec": {"terminationGracePeriodSeconds": 30, "containers": [{"name": "c", "image": "pause",
            "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}});
    scenario::apply(&world.workload_client(), std::slice::from_ref(&db))
        .await
        .unwrap();
    all_running(&world, 2, Duration::from_secs(60)).await;
    scale(&world, "huge", 0).await;
    // The old db-0 is evicted from `big` and terminates; once it is gone, it comes back.
    let pods_api: Api<Pod> = Api::namespaced(world.workload_client(), "default");
    wait_for("db-0 evicted", Duration::from_secs(120), || async {
        pods_api
            .get_opt("db-0")
            .await
            .unwrap()
            .is_some_and(|p| p.metadata.deletion_timestamp.is_some())
            .then_some(())
    })
    .await;
    wait_for("db-0 gone", Duration::from_secs(60), || async {
        pods_api
            .get_opt("db-0")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    scenario::apply(&world.workload_client(), &[db])
        .await
        .unwrap();
    one_pod_on_one_small_node(&world, "db-0 running on the one small node").await;
    replaced_by_small(&operator);
    let records = operator.disruptions();
    assert!(
        records
            .iter()
            .all(|r| r.decision != controllers::disruption::methods::Decision::Delete),
        "the fresh replacement was taken while its pod was still terminating: {records:?}"
    );
    // The replaced node's NodeClaim may still be finishing (its Node goes first, its finalizer
    // after its Machine): only NodeClaims that are not deleting count.
    let live: Vec<String> = node_claims(&world)
        .await
        .iter()
        .filter(|nc| nc.metadata.deletion_timestamp.is_none())
        .map(|nc| nc.name_any())
        .collect();
    assert_eq!(live.len(), 1, "no third node was needed: {live:?}");
}

/// The provisioner's `--min-values-policy BestEffort` holds for disruption too: a pool asking
/// for two instance types (`minValues: 2`) where a pod fits only one was provisioned with the
/// requirement relaxed, and its node is replaced by the cheaper MachineDeployment — one type,
/// relaxed again — instead of never being consolidated.
async fn best_effort_min_values_are_relaxed_for_consolidation_as_for_provisioning(
    backend: Backend,
) {
    let world = big_and_small(backend).await;
    patch_pool(
        &world,
        "default",
        json!({"spec": {"template": {"spec": {"requirements": [{
            "key": "node.kubernetes.io/instance-type", "operator": "Exists", "minValues": 2}]}}}}),
    )
    .await;
    let mut config = disruptive_operator();
    config.provisioner.min_values_policy = scheduling::instance_type::MinValuesPolicy::BestEffort;
    let operator = start_with(&world, config);
    huge_and_tiny(&world).await;
    scale(&world, "huge", 0).await;
    wait_for(
        "the tiny pod alone on a small node",
        Duration::from_secs(120),
        || async {
            let nodes = nodes(&world).await;
            (nodes.len() == 1 && label(&nodes[0], "node.kubernetes.io/instance-type") == "small")
                .then_some(())
        },
    )
    .await;
    all_running(&world, 1, Duration::from_secs(60)).await;
    replaced_by_small(&operator);
}

/// `consolidationPolicy: Balanced`: two NodePools alike but for the policy, each with one
/// `big` node ($1.0/h) left holding one 1-cpu pod that a `medium` node ($0.9/h) could take.
/// Replacing it saves 10 % of the pool's cost for all of its disruption (a score of 0.1, below
/// 0.5): the Balanced pool keeps its node, the WhenEmptyOrUnderutilized pool replaces it. Once
/// a `small` MachineDeployment ($0.2/h) appears, the move saves 80 % (a score of 0.8) and the
/// Balanced pool takes it, with a `ConsolidationApproved` Event on the node.
async fn a_balanced_pool_keeps_a_node_a_marginal_replacement_would_save_little_on(
    backend: Backend,
) {
    let disruption =
        |policy: &str| json!({"consolidateAfter": "0s", "consolidationPolicy": policy});
    let world = setup_pools(
        backend,
        &[
            md("big", 8, 32, "zone-a", 1.0),
            md("medium", 4, 16, "zone-a", 0.9),
        ],
        &[
            ("balanced", disruption("Balanced")),
            ("standard", disruption("WhenEmptyOrUnderutilized")),
        ],
    )
    .await;
    let operator = start_disruptive(&world);
    let pinned = |pool: &str| json!({"nodeSelector": {"karpenter.sh/nodepool": pool}});
    for pool in ["balanced", "standard"] {
        scenario::apply(
            &world.workload_client(),
            &[deployment(
                &format!("{pool}-huge"),
                1,
                "6",
                "1Gi",
                pinned(pool),
            )],
        )
        .await
        .unwrap();
    }
    all_running(&world, 2, Duration::from_secs(90)).await;
    for pool in ["balanced", "standard"] {
        scenario::apply(
            &world.workload_client(),
            &[deployment(
                &format!("{pool}-tiny"),
                1,
                "1",
                "1Gi",
                pinned(pool),
            )],
        )
        .await
        .unwrap();
    }
    all_running(&world, 4, Duration::from_secs(60)).await;
    let before = nodes(&world).await;
    assert_eq!(before.len(), 2, "each tiny pod beside its pool's huge one");
    let kept = before
        .iter()
        .find(|n| label(n, "karpenter.sh/nodepool") == "balanced")
        .unwrap()
        .name_any();
    scale(&world, "balanced-huge", 0).await;
    scale(&world, "standard-huge", 0).await;
    let metrics = operator.metrics();
    let moves = |decision: &str, pool: &str, policy: &str| {
        metrics
            .consolidation_moves
            .get_or_create(&controllers::metrics::ScoreLabels {
                decision: decision.into(),
                nodepool: pool.into(),
                policy: policy.into(),
            })
            .get()
    };
    wait_for(
        "the standard pool's node replaced by a medium one, the balanced move rejected",
        Duration::from_secs(120),
        || async {
            let nodes = nodes(&world).await;
            let standard: Vec<&Node> = nodes
                .iter()
                .filter(|n| label(n, "karpenter.sh/nodepool") == "standard")
                .collect();
            (standard.len() == 1
                && label(standard[0], "node.kubernetes.io/instance-type") == "medium"
                && machines(&world).await.len() == 2
                && moves("rejected", "balanced", "Balanced") >= 1)
                .then_some(())
        },
    )
    .await;
    // Then the loop settles with nothing more to do: the Balanced pool's node stays.
    let (passes, _) = operator.disruption_passes();
    wait_for(
        "the disruption loop idle",
        Duration::from_secs(60),
        || async {
            let (now, idle) = operator.disruption_passes();
            (now >= passes + 3 && idle >= 3).then_some(())
        },
    )
    .await;
    assert!(untouched(&world, &kept).await, "{kept} was disrupted");
    let node = Api::<Node>::all(world.workload_client())
        .get(&kept)
        .await
        .unwrap();
    assert_eq!(label(&node, "node.kubernetes.io/instance-type"), "big");
    assert_eq!(moves("approved", "balanced", "Balanced"), 0);
    assert!(moves("approved", "standard", "WhenEmptyOrUnderutilized") >= 1);
    let records = operator.disruptions();
    assert!(
        records.iter().all(|r| !r.nodes.contains(&kept)),
        "{records:?}"
    );
    assert!(
        records.iter().any(|r| r.replacements == ["medium"]),
        "{records:?}"
    );

    scenario::apply(
        &world.management_client(),
        &[md("small", 2, 8, "zone-a", 0.2)],
    )
    .await
    .unwrap();
    wait_for(
        "the balanced pool's node replaced by a small one",
        Duration::from_secs(120),
        || async {
            let nodes = nodes(&world).await;
            let balanced: Vec<&Node> = nodes
                .iter()
                .filter(|n| label(n, "karpenter.sh/nodepool") == "balanced")
                .collect();
            (balanced.len() == 1
                && label(balanced[0], "node.kubernetes.io/instance-type") == "small")
                .then_some(())
        },
    )
    .await;
    assert!(moves("approved", "balanced", "Balanced") >= 1);
    let events = Api::<k8s_openapi::api::events::v1::Event>::all(world.workload_client());
    let note = wait_for(
        "a ConsolidationApproved Event on the balanced pool's old node",
        Duration::from_secs(30),
        || async {
            events
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .into_iter()
                .find(|e| {
                    e.reason.as_deref() == Some("ConsolidationApproved")
                        && e.regarding.as_ref().and_then(|r| r.name.as_deref())
                            == Some(kept.as_str())
                })
                .and_then(|e| e.note)
        },
    )
    .await;
    assert!(
        note.starts_with("Balanced score 0.80 is at least 0.5"),
        "{note}"
    );
}

/// Emptiness never takes a MachineDeployment below its min size (a Machine removed there would
/// only be recreated by Cluster API): of three empty nodes with min size 2, one goes and the
/// other two stay untouched until the min size is lowered.
async fn emptiness_stops_at_the_machine_deployment_min_size(backend: Backend) {
    let world = setup_consolidating(backend, &[md("m", 4, 16, "zone-a", 0.2)]).await;
    let operator = start_disruptive(&world);
    scenario::apply(
        &world.workload_client(),
        &[deployment("app", 3, "3", "1Gi", json!({}))],
    )
    .await
    .unwrap();
    all_running(&world, 3, Duration::from_secs(90)).await;
    assert_eq!(replicas(&world).await, 3);
    min_size(&world, "m-zone-a", "2").await;
    scale(&world, "app", 0).await;
    node_count(&world, 2, Duration::from_secs(90)).await;
    assert_eq!(replicas(&world).await, 2);
    for node in nodes(&world).await {
        hold(&world, &node.name_any(), "at the min size").await;
    }
    assert_eq!(node_count_now(&world).await, 2);
    let removed: usize = operator.disruptions().iter().map(|r| r.nodes.len()).sum();
    assert_eq!(removed, 1, "{:?}", operator.disruptions());
    min_size(&world, "m-zone-a", "1").await;
    node_count(&world, 1, Duration::from_secs(90)).await;
    assert_eq!(replicas(&world).await, 1);
}

/// crash in the middle of a command would leave it) is removed.
async fn pdbs_do_not_disrupt_and_budgets_block_until_lifted(backend: Backend) {
    let world = setup_consolidating(
        backend,
        &[
            md("m", 4, 16, "zone-a", 0.2),
            md("tiny", 1, 4, "zone-a", 0.05),
        ],
    )
    .await;
    let _operator = start_disruptive(&world);
    scenario::apply(
        &world.workload_client(),
        &[deployment("big", 2, "3", "1Gi", json!({}))],
    )
    .await
    .unwrap();
    all_running(&world, 2, Duration::from_secs(90)).await;
    scenario::apply(
        &world.workload_client(),
        &[
            json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                "metadata": {"name": "guarded", "namespace": "default"},
                "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "guarded"}}}}),
            deployment("guarded", 1, "500m", "256Mi", json!({})),
        ],
    )
    .await
    .unwrap();
    let running_pods = all_running(&world, 3, Duration::from_secs(60)).await;
    let guarded = running_pods
        .iter()
        .find(|p| p.labels().get("app").map(String::as_str) == Some("guarded"))
        .unwrap()
        .clone();
    let node = guarded.spec.as_ref().unwrap().node_name.clone().unwrap();
    assert_eq!(
        nodes(&world).await.len(),
        2,
        "the small pod fits beside a big one"
    );
    scale(&world, "big", 0).await;
    // The other node is empty and goes; this one would be replaced by a "tiny" one.
    node_count(&world, 1, Duration::from_secs(90)).await;
    hold(&world, &node, "a PDB allowing no disruption").await;
    // A taint left behind on a blocked node is cleaned up.
    Api::<Node>::all(world.workload_client())
        .patch(
            &node,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"taints": [{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]}})),
        )
        .await
        .unwrap();
    wait_for(
        "the leftover taint removed",
        Duration::from_secs(30),
        || async { untouched(&world, &node).await.then_some(()) },
    )
    .await;
    // do-not-disrupt on the pod holds it once the PDB is gone.
    let pod_api = Api::<Pod>::namespaced(world.workload_client(), "default");
    pod_api
        .patch(
            &guarded.name_any(),
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": "true"}}}),
            ),
        )
        .await
        .unwrap();
    Api::<k8s_openapi::api::policy::v1::PodDisruptionBudget>::namespaced(
        world.workload_client(),
        "default",
    )
    .delete("guarded", &DeleteParams::default())
    .await
    .unwrap();
    hold(&world, &node, "a do-not-disrupt pod").await;
    // A budget of 0 holds it once the annotation is gone.
    patch_pool(
        &world,
        "default",
        json!({"spec": {"disruption": {"budgets": [{"nodes": "0"}]}}}),
    )
    .await;
    pod_api
        .patch(
            &guarded.name_any(),
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": null}}}),
            ),
        )
        .await
        .unwrap();
    hold(&world, &node, "a budget of 0").await;
    // The blocking budget is the NodePool's news (as upstream), not the node's.
    let events = Api::<k8s_openapi::api::events::v1::Event>::all(world.workload_client());
    let blocked = |e: &k8s_openapi::api::events::v1::Event| {
        e.reason.as_deref() == Some("DisruptionBlocked")
            && e.note
                .as_deref()
                .is_some_and(|n| n.ends_with("due to blocking budget"))
    };
    wait_for(
        "a DisruptionBlocked Event on the NodePool",
        Duration::from_secs(30),
        || async {
            events
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .iter()
                .any(|e| {
                    blocked(e)
                        && e.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some("NodePool")
                })
                .then_some(())
        },
    )
    .await;
    assert!(
        !events
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .iter()
            .any(|e| blocked(e)
                && e.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some("Node")),
        "no node carries the budget's Event"
    );
    // Lifted: the node is replaced by a cheaper one and the pod moves there.
    patch_pool(
        &world,
        "default",
        json!({"spec": {"disruption": {"budgets": [{"nodes": "100%"}]}}}),
    )
    .await;
    wait_for(
        "the pod on a tiny node",
        Duration::from_secs(120),
        || async {
            let nodes = nodes(&world).await;
            let pods = pods(&world).await;
            (nodes.len() == 1
                && label(&nodes[0], "node.kubernetes.io/instance-type") == "tiny"
                && pods.len() == 1
                && running(&pods[0]))
            .then_some(())
        },
    )
    .await;
}

/// Drift: after the NodePool's template changes (a new label), the node is replaced — the
/// replacement launched and initialized first, carrying the new label — and the old one drains.
async fn a_node_pool_template_change_replaces_the_drifted_node(backend: Backend) {
    let world = setup_consolidating(backend, &[md("m", 4, 16, "zone-a", 0.2)]).await;
    let operator = start_disruptive(&world);
    scenario::apply(
        &world.workload_client(),
        &[deployment("app", 1, "1", "1Gi", json!({}))],
    )
    .await
    .unwrap();
    drifts_to_team_blue(
        &world,
        &operator,
        controllers::disruption::methods::Decision::Replace,
    )
    .await;
    node_count(&world, 1, Duration::from_secs(60)).await;
}

/// The `app` pod's node, once the NodePool's template gains the label `team: blue`, is
/// disrupted by drift (decided `decision`) and the pod ends up on a new, alone, `team=blue`
/// node.
async fn drifts_to_team_blue(
    world: &World,
    operator: &karpenter_capi::operator::Operator,
    decision: controllers::disruption::methods::Decision,
) {
    all_running(world, 1, Duration::from_secs(90)).await;
    let old = node_of(world, "app").await.unwrap();
    patch_pool(
        world,
        "default",
        json!({"spec": {"template": {"metadata": {"labels": {"team": "blue"}}}}}),
    )
    .await;
    wait_for(
        "the pod on a new node labelled team=blue, alone",
        Duration::from_secs(150),
        || async {
            let node = node_of(world, "app").await?;
            let nodes = nodes(world).await;
            let n = nodes.iter().find(|n| n.name_any() == node)?;
            (node != old && label(n, "team") == "blue" && nodes.len() == 1).then_some(())
        },
    )
    .await;
    let records = operator.disruptions();
    assert!(
        records.iter().any(
            |r| r.method == controllers::disruption::methods::Method::Drift
                && r.nodes == [old.clone()]
                && r.decision == decision
        ),
        "{records:?}"
    );
}

/// Drift runs when nothing is gracefully disruptable: the only node is held by a PDB that
/// allows no disruption, yet the NodePool's `terminationGracePeriod` makes its drifted
/// NodeClaim eventually disruptable, so it goes. As upstream, no capacity is made ahead for a
/// pod a fully blocking PDB holds (nobody knows when it will leave): the decision is a
/// delete, and the pod gets its new node when the grace period ends the drain.
async fn a_drifted_node_held_by_a_pdb_is_replaced_within_its_termination_grace_period(
    backend: Backend,
) {
    let world = setup_consolidating(backend, &[md("m", 4, 16, "zone-a", 0.2)]).await;
    patch_pool(
        &world,
        "default",
        json!({"spec": {"template": {"spec": {"terminationGracePeriod": "20s"}}}}),
    )
    .await;
    let operator = start_disruptive(&world);
    scenario::apply(
        &world.workload_client(),
        &[
            json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                "metadata": {"name": "app", "namespace": "default"},
                "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "app"}}}}),
            deployment("app", 1, "1", "1Gi", json!({})),
        ],
    )
    .await
    .unwrap();
    drifts_to_team_blue(
        &world,
        &operator,
        controllers::disruption::methods::Decision::Delete,
    )
    .await;
}

/// Expiration: a NodeClaim past the NodePool's `expireAfter` is deleted (no budget, no
/// replacement first); its pod comes back on a new node.
async fn an_expired_node_claim_is_deleted_and_its_pod_comes_back(backend: Backend) {
    let world = setup_with_disruption(
        backend,
        &[md("m", 4, 16, "zone-a", 0.2)],
        json!({"consolidateAfter": "Never"}),
    )
    .await;
    patch_pool(
        &world,
        "default",
        json!({"spec": {"template": {"spec": {"expireAfter": "20s"}}}}),
    )
    .await;
    let _operator = start_disruptive(&world);
    scenario::apply(
        &world.workload_client(),
        &[deployment("app", 1, "1", "1Gi", json!({}))],
    )
    .await
    .unwrap();
    all_running(&world, 1, Duration::from_secs(90)).await;
    let first = node_claims(&world).await;
    assert_eq!(first.len(), 1);
    let first = first[0].name_any();
    wait_for(
        "the expired NodeClaim gone",
        Duration::from_secs(90),
        || async {
            (!node_claims(&world)
                .await
                .iter()
                .any(|n| n.name_any() == first))
            .then_some(())
        },
    )
    .await;
    wait_for(
        "the pod Running on another NodeClaim's node",
        Duration::from_secs(90),
        || async {
            let node = node_of(&world, "app").await?;
            let ncs = node_claims(&world).await;
            ncs.iter()
                .any(|nc| {
                    nc.name_any() != first
                        && nc.status.as_ref().and_then(|s| s.node_name.as_deref())
                            == Some(node.as_str())
                })
                .then_some(())
        },
    )
    .await;
}

/// A restart in the middle of a replacement: the controller stops right after it tainted the
/// node; the next one removes the leftover mark, and the cluster still converges to one cheap
/// node with no tainted node and no Machine left over.
async fn a_restart_in_the_middle_of_a_replacement_leaves_nothing_behind(backend: Backend) {
    let world = setup_consolidating(
        backend,
        &[
            md("big", 8, 32, "zone-a", 0.8),
            md("small", 2, 8, "zone-a", 0.2),
        ],
    )
    .await;
    let operator = start_disruptive(&world);
    scenario::apply(
        &world.workload_client(),
        &[deployment("huge", 1, "6", "1Gi", json!({}))],
    )
    .await
    .unwrap();
    all_running(&world, 1, Duration::from_secs(90)).await;
    scenario::apply(
        &world.workload_client(),
        &[deployment("tiny", 1, "1", "1Gi", json!({}))],
    )
    .await
    .unwrap();
    all_running(&world, 2, Duration::from_secs(60)).await;
    let big = nodes(&world).await[0].name_any();
    scale(&world, "huge", 0).await;
    wait_for(
        "the big node tainted by a command",
        Duration::from_secs(60),
        || async { (!untouched(&world, &big).await).then_some(()) },
    )
    .await;
    drop(operator);
    let _operator = start_disruptive(&world);
    wait_for(
        "one small node, the pod on it, nothing tainted",
        Duration::from_secs(180),
        || async {
            let nodes = nodes(&world).await;
            let pods = pods(&world).await;
            let machines = machines(&world).await;
            let ncs = node_claims(&world).await;
            let tainted = nodes.iter().any(|n| {
                n.spec
                    .as_ref()
                    .and_then(|s| s.taints.as_ref())
                    .is_some_and(|t| t.iter().any(|t| t.key == "karpenter.sh/disrupted"))
            });
            (nodes.len() == 1
                && machines.len() == 1
                && ncs.len() == 1
                && !tainted
                && label(&nodes[0], "node.kubernetes.io/instance-type") == "small"
                && pods.len() == 1
                && running(&pods[0]))
            .then_some(())
        },
    )
    .await;
    assert_eq!(replicas(&world).await, 1);
}

world::backend_tests!(
    a_restart_in_the_middle_of_a_replacement_leaves_nothing_behind,
    a_node_pool_template_change_replaces_the_drifted_node,
    a_drifted_node_held_by_a_pdb_is_replaced_within_its_termination_grace_period,
    an_expired_node_claim_is_deleted_and_its_pod_comes_back,
    empty_nodes_are_removed_after_a_scale_in,
    after_a_scale_in_the_emptied_nodes_go_and_the_running_pod_stays,
    a_half_empty_pair_is_consolidated_into_one_node,
    a_node_is_replaced_by_a_cheaper_machine_deployment,
    a_replacement_waits_for_the_pods_it_was_made_for,
    best_effort_min_values_are_relaxed_for_consolidation_as_for_provisioning,
    pdbs_do_not_disrupt_and_budgets_block_until_lifted,
    emptiness_stops_at_the_machine_deployment_min_size,
    a_balanced_pool_keeps_a_node_a_marginal_replacement_would_save_little_on,
);
