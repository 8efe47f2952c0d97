//! Provisioning end to end: pending pods get NodeClaims, Machines and Nodes; NodeClaims and
//! Machines deleted by hand; restarts in the middle of a scale-up.

use api::{Machine, NodeClaim};
use k8s_openapi::api::apps::v1::Deployment;
use karpenter_capi::api_counter::{ApiCounter, counted_client};
use karpenter_capi::operator::Operator;
use karpenter_capi::scenario;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use world::{Backend, World};

use super::support::*;

async fn one_pod_gets_one_node(backend: Backend) {
    let world = setup(backend, &[md("m", 4, 16, "zone-a", 0.2)]).await;
    let operator = start(&world);
    scenario::apply(
        &world.workload_client(),
        &[deployment("one", 1, "1", "1Gi", json!({}))],
    )
    .await
    .unwrap();
    let pods = all_running(&world, 1, Duration::from_secs(60)).await;
    let nodes = nodes(&world).await;
    assert_eq!(nodes.len(), 1);
    let node = &nodes[0];
    assert_eq!(
        pods[0].spec.as_ref().unwrap().node_name.as_deref(),
        Some(node.name_any().as_str())
    );
    assert_eq!(label(node, "karpenter.sh/nodepool"), "default");
    assert_eq!(label(node, "karpenter.sh/initialized"), "true");
    assert!(
        node.finalizers()
            .iter()
            .any(|f| f == "karpenter.sh/termination")
    );
    let ncs = node_claims(&world).await;
    assert_eq!(ncs.len(), 1);
    assert_eq!(replicas(&world).await, 1);
    // The provider's calls are measured per calling controller.
    let text = operator.metrics().encode();
    for series in [
        "karpenter_cloudprovider_duration_seconds_count{controller=\"nodeclaim.lifecycle\",method=\"Create\",provider=\"clusterapi\"}",
        "karpenter_cloudprovider_duration_seconds_count{controller=\"provisioner\",method=\"GetInstanceTypes\",provider=\"clusterapi\"}",
    ] {
        assert!(text.contains(series), "{series} not in\n{text}");
    }
}

async fn five_hundred_mixed_pods_all_run_with_no_node_claim_beyond_the_plan(backend: Backend) {
    let world = setup(
        backend,
        &[
            md("small", 2, 8, "zone-a", 0.1),
            md("medium", 8, 32, "zone-a", 0.4),
            md("large", 16, 64, "zone-a", 0.8),
        ],
    )
    .await;
    let operator = start(&world);
    scenario::apply(
        &world.workload_client(),
        &[
            deployment("tiny", 200, "100m", "128Mi", json!({})),
            deployment("web", 150, "500m", "1Gi", json!({})),
            deployment("api", 100, "1", "2Gi", json!({})),
            deployment("batch", 50, "3", "8Gi", json!({})),
        ],
    )
    .await
    .unwrap();
    let pods = all_running(&world, 500, Duration::from_secs(180)).await;
    assert!(pods.iter().all(running));
    // Settle, then nothing more may be created.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let ncs = node_claims(&world).await;
    let decided: BTreeSet<String> = operator
        .decisions()
        .iter()
        .flat_map(|d| d.node_claims.clone())
        .collect();
    let existing: BTreeSet<String> = ncs.iter().map(ResourceExt::name_any).collect();
    assert_eq!(
        existing, decided,
        "every NodeClaim comes from a provisioning decision"
    );
    let nodes = nodes(&world).await;
    assert_eq!(nodes.len(), ncs.len());
    assert_eq!(usize::try_from(replicas(&world).await).unwrap(), ncs.len());
    // Nodes are used. Neither kube-scheduler nor kube-scheduler-lite knows the plan: as nodes
    // come up in their own order, a pod can land on a node planned for others, the displaced
    // pods get a node of their own, and a planned node can end up empty (upstream Karpenter
    // behaves the same; consolidation removes such a node). How often depends on timing, so
    // this bounds it instead of forbidding it: a provisioner that launched nodes for pods that
    // already fit would leave many more empty.
    let used: BTreeSet<&str> = pods
        .iter()
        .filter_map(|p| p.spec.as_ref()?.node_name.as_deref())
        .collect();
    let empty = nodes.len() - used.len();
    assert!(
        empty * 10 <= nodes.len(),
        "{empty} of {} nodes have no pods",
        nodes.len()
    );
}

async fn zone_spread_uses_machine_deployments_in_three_zones(backend: Backend) {
    let world = setup(
        backend,
        &[
            md("m", 4, 16, "zone-a", 0.2),
            md("m", 4, 16, "zone-b", 0.2),
            md("m", 4, 16, "zone-c", 0.2),
        ],
    )
    .await;
    let _operator = start(&world);
    let spread = json!({"topologySpreadConstraints": [{"maxSkew": 1,
        "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "spread"}}}]});
    scenario::apply(
        &world.workload_client(),
        &[deployment("spread", 9, "1", "1Gi", spread)],
    )
    .await
    .unwrap();
    let pods = all_running(&world, 9, Duration::from_secs(90)).await;
    let nodes = nodes(&world).await;
    let zone_of: BTreeMap<String, String> = nodes
        .iter()
        .map(|n| {
            (
                n.name_any(),
                label(n, "topology.kubernetes.io/zone").to_owned(),
            )
        })
        .collect();
    let mut per_zone: BTreeMap<String, usize> = BTreeMap::new();
    for p in &pods {
        let node = p.spec.as_ref().unwrap().node_name.clone().unwrap();
        *per_zone.entry(zone_of[&node].clone()).or_default() += 1;
    }
    // Karpenter planned the spread: as many NodeClaims in each zone.
    let mut claims_per_zone: BTreeMap<String, usize> = BTreeMap::new();
    for nc in node_claims(&world).await {
        let zone = nc.labels().get("topology.kubernetes.io/zone").cloned();
        *claims_per_zone.entry(zone.unwrap_or_default()).or_default() += 1;
    }
    assert_eq!(claims_per_zone.len(), 3, "{claims_per_zone:?}");
    assert!(
        claims_per_zone.values().max() == claims_per_zone.values().min(),
        "{claims_per_zone:?}"
    );
    if backend == Backend::Sim {
        assert_eq!(
            per_zone,
            BTreeMap::from([
                ("zone-a".into(), 3),
                ("zone-b".into(), 3),
                ("zone-c".into(), 3)
            ])
        );
    } else {
        // kube-scheduler spreads over the zones that have nodes when it binds: pods bound
        // before the last zone's node joined count only the others, so 4/3/2 and 4/4/1 are
        // real outcomes (both seen). Every zone is used.
        assert_eq!(per_zone.len(), 3, "{per_zone:?}");
    }
}

async fn hostname_anti_affinity_gives_each_pod_its_own_node(backend: Backend) {
    let world = setup(backend, &[md("m", 8, 32, "zone-a", 0.4)]).await;
    let _operator = start(&world);
    let anti = json!({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "solo"}}}]}}});
    scenario::apply(
        &world.workload_client(),
        &[deployment("solo", 4, "100m", "128Mi", anti)],
    )
    .await
    .unwrap();
    let pods = all_running(&world, 4, Duration::from_secs(90)).await;
    let hosts: BTreeSet<String> = pods
        .iter()
        .map(|p| p.spec.as_ref().unwrap().node_name.clone().unwrap())
        .collect();
    assert_eq!(hosts.len(), 4);
    assert_eq!(nodes(&world).await.len(), 4);
}

async fn a_node_claim_deleted_by_hand_is_drained_and_its_machine_removed(backend: Backend) {
    let world = setup(backend, &[md("m", 4, 16, "zone-a", 0.2)]).await;
    let _operator = start(&world);
    scenario::apply(
        &world.workload_client(),
        &[deployment("app", 3, "1", "1Gi", json!({}))],
    )
    .await
    .unwrap();
    all_running(&world, 3, Duration::from_secs(60)).await;
    let ncs = node_claims(&world).await;
    assert_eq!(ncs.len(), 1);
    let victim = ncs[0].name_any();
    let machine_before: BTreeSet<String> = machines(&world)
        .await
        .iter()
        .map(ResourceExt::name_any)
        .collect();
    Api::<NodeClaim>::all(world.workload_client())
        .delete(&victim, &DeleteParams::default())
        .await
        .unwrap();
    // The NodeClaim goes, its Machine goes, and the pods come back on a new node.
    wait_for("the NodeClaim gone", Duration::from_secs(60), || async {
        (!node_claims(&world)
            .await
            .iter()
            .any(|n| n.name_any() == victim))
        .then_some(())
    })
    .await;
    wait_for("the old Machine gone", Duration::from_secs(60), || async {
        let now: BTreeSet<String> = machines(&world)
            .await
            .iter()
            .map(ResourceExt::name_any)
            .collect();
        machine_before.is_disjoint(&now).then_some(())
    })
    .await;
    let pods = all_running(&world, 3, Duration::from_secs(90)).await;
    let nodes = nodes(&world).await;
    assert_eq!(nodes.len(), 1, "one replacement node");
    assert!(pods.iter().all(
        |p| p.spec.as_ref().unwrap().node_name.as_deref() == Some(nodes[0].name_any().as_str())
    ));
    assert_eq!(
        replicas(&world).await,
        1,
        "replicas lowered, then raised once"
    );
    assert_eq!(node_claims(&world).await.len(), 1);
}

async fn a_restart_in_the_middle_of_a_scale_up_converges_without_extra_machines(backend: Backend) {
    let world = setup(backend, &[md("m", 4, 16, "zone-a", 0.2)]).await;
    let operator = start(&world);
    scenario::apply(
        &world.workload_client(),
        &[deployment("app", 12, "1", "1Gi", json!({}))],
    )
    .await
    .unwrap();
    // Stop as soon as the first NodeClaims exist (launching), start a fresh controller.
    wait_for("NodeClaims created", Duration::from_secs(60), || async {
        (!node_claims(&world).await.is_empty()).then_some(())
    })
    .await;
    drop(operator);
    let _operator = start(&world);
    let pods = all_running(&world, 12, Duration::from_secs(120)).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let ncs = node_claims(&world).await;
    let machines = machines(&world).await;
    assert_eq!(machines.len(), ncs.len(), "no Machine without a NodeClaim");
    assert_eq!(usize::try_from(replicas(&world).await).unwrap(), ncs.len());
    let used: BTreeSet<&str> = pods
        .iter()
        .filter_map(|p| p.spec.as_ref()?.node_name.as_deref())
        .collect();
    assert_eq!(used.len(), nodes(&world).await.len());
}

async fn the_node_pool_counts_each_node_once(backend: Backend) {
    let world = setup(backend, &[md("m", 4, 16, "zone-a", 0.2)]).await;
    let _operator = start(&world);
    scenario::apply(
        &world.workload_client(),
        &[deployment("app", 9, "1", "1Gi", json!({}))],
    )
    .await
    .unwrap();
    all_running(&world, 9, Duration::from_secs(90)).await;
    let want = nodes(&world).await.len();
    assert!(want >= 3, "{want} nodes");
    // status.nodes and status.resources.nodes settle at the number of nodes: a Node and its
    // NodeClaim are one node.
    wait_for(
        &format!("NodePool status.nodes == {want}"),
        Duration::from_secs(30),
        || async {
            let pool = Api::<api::NodePool>::all(world.workload_client())
                .get("default")
                .await
                .unwrap();
            let status = pool.status.unwrap_or_default();
            let counted = status
                .resources
                .as_ref()
                .and_then(|r| r.get("nodes"))
                .map(|q| q.0.clone());
            (status.nodes == Some(i64::try_from(want).unwrap())
                && counted.as_deref() == Some(want.to_string().as_str()))
            .then_some(())
        },
    )
    .await;
}

async fn scaling_a_deployment_uses_the_existing_node_first(backend: Backend) {
    let world = setup(backend, &[md("m", 8, 32, "zone-a", 0.4)]).await;
    let _operator = start(&world);
    scenario::apply(
        &world.workload_client(),
        &[deployment("app", 2, "1", "1Gi", json!({}))],
    )
    .await
    .unwrap();
    all_running(&world, 2, Duration::from_secs(60)).await;
    Api::<Deployment>::namespaced(world.workload_client(), "default")
        .patch(
            "app",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 5}})),
        )
        .await
        .unwrap();
    all_running(&world, 5, Duration::from_secs(60)).await;
    assert_eq!(node_claims(&world).await.len(), 1);
}

async fn a_machine_deleted_by_hand_takes_its_node_claim_and_the_pods_come_back(backend: Backend) {
    let world = setup(backend, &[md("m", 4, 16, "zone-a", 0.2)]).await;
    let _operator = start(&world);
    scenario::apply(
        &world.workload_client(),
        &[deployment("app", 2, "1", "1Gi", json!({}))],
    )
    .await
    .unwrap();
    all_running(&world, 2, Duration::from_secs(60)).await;
    let old_claim = node_claims(&world).await[0].name_any();
    let machine = machines(&world).await[0].clone();
    Api::<Machine>::namespaced_with(
        world.management_client(),
        "default",
        &api::CapiVersion::v1beta2(),
    )
    .delete(&machine.name_any(), &DeleteParams::default())
    .await
    .unwrap();
    wait_for(
        "the NodeClaim of the deleted Machine gone",
        Duration::from_secs(60),
        || async {
            (!node_claims(&world)
                .await
                .iter()
                .any(|n| n.name_any() == old_claim))
            .then_some(())
        },
    )
    .await;
    all_running(&world, 2, Duration::from_secs(90)).await;
    let ncs = node_claims(&world).await;
    assert_eq!(ncs.len(), 1, "one replacement NodeClaim");
    replicas_match_machines(&world).await;
}

/// Waits until the MachineDeployment's replicas equal its live Machines and returns them:
/// after a Machine deleted by hand, at most one more than the pods need — the MachineSet's
/// own replacement, made once the deleted Machine is gone, after the pods' NodeClaim raised a
/// replica instead of waiting for it (the collector adopts it later).
async fn replicas_match_machines(world: &World) -> Vec<Machine> {
    let left = wait_for(
        "replicas equal to the live Machines",
        Duration::from_secs(60),
        || async {
            let machines = machines(world).await;
            let live = machines
                .iter()
                .filter(|m| m.metadata.deletion_timestamp.is_none())
                .count();
            (i32::try_from(live).ok() == Some(replicas(world).await)).then_some(machines)
        },
    )
    .await;
    assert!(left.len() <= 2, "{left:?}");
    left
}

/// A client of the management cluster whose requests `counter` counts.
async fn counted_management(world: &World, counter: &ApiCounter) -> kube::Client {
    match (world.real(), world.management()) {
        (Some(real), _) => counted_client(real.kubeconfig_path(), counter)
            .await
            .unwrap(),
        (None, Some(sim)) => kube::client::ClientBuilder::new(sim.router(), "default")
            .with_layer(counter)
            .build(),
        (None, None) => panic!("a world without a management cluster"),
    }
}

/// API load of a scale-out on the management cluster: each Machine is claimed with about one
/// PATCH (creates of one process never race each other for a candidate), and waiting for
/// providerIDs reads the caches, not the API server.
async fn a_scale_out_claims_each_machine_about_once_and_reads_machines_from_the_cache(
    backend: Backend,
) {
    let world = setup(backend, &[md("m", 2, 8, "zone-a", 0.1)]).await;
    let counter = ApiCounter::default();
    let _operator = Operator::start(
        world.workload_client(),
        counted_management(&world, &counter).await,
        fast_operator(),
    );
    scenario::apply(
        &world.workload_client(),
        &[deployment("one-each", 12, "1500m", "1Gi", json!({}))],
    )
    .await
    .unwrap();
    all_running(&world, 12, Duration::from_secs(120)).await;
    let ncs = node_claims(&world).await.len();
    assert_eq!(ncs, 12, "one pod per node");
    let by = counter.by_resource();
    let count = |k: &str| by.get(k).copied().unwrap_or(0);
    let n = u64::try_from(ncs).unwrap();
    // Exactly one claim that succeeded per Machine (no double claim, no release), and few
    // conflicts: only when Cluster API changed a Machine between our copy and the claim
    // (compare-and-set), after which the claim reads the Machine fresh instead of waiting for
    // the cache (under load it is several versions behind: one conflict per stale version, 2.2
    // PATCHes per Machine seen in CI). Before: ~9 per Machine, every create trying the same
    // candidates in the same order.
    let failures = counter.failures();
    let conflicts = failures.get("409 PATCH machines").copied().unwrap_or(0);
    let patches = count("PATCH machines");
    eprintln!("management traffic: {by:?} {failures:?}");
    assert_eq!(
        patches - conflicts,
        n,
        "one successful claim per Machine: {by:?} {failures:?}"
    );
    assert!(patches <= 2 * n, "claim PATCHes: {by:?} {failures:?}");
    // Before: a GET of the Machine (and its MachineDeployment and NodeClass) on every 2 s
    // poll of each NodeClaim waiting for its providerID. Now only a Machine the cache has not
    // seen yet is read, and one whose claim met a conflict.
    assert!(
        count("GET machines") <= n / 2 + conflicts,
        "Machine reads: {by:?} {failures:?}"
    );
}

/// One MachineDeployment `m` (4 cpu), the operator, and two 1-cpu `app` pods Running under a
/// PodDisruptionBudget with `budget` (`minAvailable` / `maxUnavailable`).
async fn two_pods_under_a_pdb(backend: Backend, budget: serde_json::Value) -> (World, Operator) {
    let world = setup(backend, &[md("m", 4, 16, "zone-a", 0.2)]).await;
    let operator = start(&world);
    let mut spec = json!({"selector": {"matchLabels": {"app": "app"}}});
    if let (Some(spec), serde_json::Value::Object(budget)) = (spec.as_object_mut(), budget) {
        spec.extend(budget);
    }
    scenario::apply(
        &world.workload_client(),
        &[
            json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                "metadata": {"name": "app", "namespace": "default"}, "spec": spec}),
            deployment("app", 2, "1", "1Gi", json!({})),
        ],
    )
    .await
    .unwrap();
    all_running(&world, 2, Duration::from_secs(60)).await;
    (world, operator)
}

/// A Machine deleted by hand whose drain a PodDisruptionBudget holds (one of two pods may be
/// away at a time): Cluster API cordons the Node and evicts one pod; the MachineSet replaces
/// the Machine only once it is gone, so that pod's new NodeClaim raises a replica (the
/// cordoned node is closed to it, and the Machine's replica stays held while nothing replaces
/// it), which lets the budget allow the second eviction, and the drain ends with both pods
/// Running on the new node. The MachineSet's own replacement comes after: one unclaimed
/// Machine at most, which the collector adopts or removes later.
async fn a_machine_deleted_by_hand_under_a_pdb_drains_onto_its_replacement(backend: Backend) {
    let (world, _operator) = two_pods_under_a_pdb(backend, json!({"minAvailable": 1})).await;
    let old_node = nodes(&world).await[0].name_any();
    let machine = machines(&world).await[0].name_any();
    Api::<Machine>::namespaced_with(
        world.management_client(),
        "default",
        &api::CapiVersion::v1beta2(),
    )
    .delete(&machine, &DeleteParams::default())
    .await
    .unwrap();
    wait_for(
        "both pods Running on one new node, the old Machine and Node gone",
        Duration::from_secs(180),
        || async {
            let pods = pods(&world).await;
            let hosts: BTreeSet<String> = pods
                .iter()
                .filter(|p| running(p))
                .filter_map(|p| p.spec.as_ref()?.node_name.clone())
                .collect();
            let machines = machines(&world).await;
            (pods.len() == 2
                && pods.iter().all(running)
                && hosts.len() == 1
                && !hosts.contains(&old_node)
                && !machines.iter().any(|m| m.name_any() == machine))
            .then_some(())
        },
    )
    .await;
    wait_for(
        "the old NodeClaim finalized, one NodeClaim left",
        Duration::from_secs(60),
        || async { (node_claims(&world).await.len() == 1).then_some(()) },
    )
    .await;
    replicas_match_machines(&world).await;
}

/// Capacity before eviction (spec §3.2–3.3): a NodeClaim deleted by hand whose pods a PDB
/// keeps where they are gets the node they will need launched while it drains, not after:
/// a second NodeClaim, initialized, while both pods still run on the old node. Once the PDB
/// is lifted they move there and the old node goes.
async fn a_deleted_node_claim_gets_the_node_its_pods_need_before_they_are_evicted(
    backend: Backend,
) {
    use api::common::Conditions;
    let (world, _operator) = two_pods_under_a_pdb(backend, json!({"maxUnavailable": 0})).await;
    let ncs = node_claims(&world).await;
    assert_eq!(ncs.len(), 1);
    let victim = ncs[0].name_any();
    let old_node = nodes(&world).await[0].name_any();
    Api::<NodeClaim>::all(world.workload_client())
        .delete(&victim, &DeleteParams::default())
        .await
        .unwrap();
    wait_for(
        "a new NodeClaim initialized while the pods still run on the old node",
        Duration::from_secs(120),
        || async {
            let ncs = node_claims(&world).await;
            let fresh = ncs.iter().any(|nc| {
                nc.name_any() != victim
                    && nc
                        .status
                        .as_ref()
                        .is_some_and(|s| s.conditions.is_true("Initialized"))
            });
            let pods = pods(&world).await;
            let held = pods.len() == 2
                && pods.iter().all(|p| {
                    running(p)
                        && p.spec.as_ref().and_then(|s| s.node_name.as_deref())
                            == Some(old_node.as_str())
                });
            (fresh && held).then_some(())
        },
    )
    .await;
    assert_eq!(node_claims(&world).await.len(), 2, "one node for both pods");
    Api::<k8s_openapi::api::policy::v1::PodDisruptionBudget>::namespaced(
        world.workload_client(),
        "default",
    )
    .delete("app", &DeleteParams::default())
    .await
    .unwrap();
    wait_for(
        "both pods Running on the new node, the old NodeClaim gone",
        Duration::from_secs(120),
        || async {
            let pods = pods(&world).await;
            let ncs = node_claims(&world).await;
            (pods.len() == 2
                && pods.iter().all(|p| {
                    running(p)
                        && p.spec.as_ref().and_then(|s| s.node_name.as_deref())
                            != Some(old_node.as_str())
                })
                && ncs.len() == 1
                && ncs[0].name_any() != victim)
                .then_some(())
        },
    )
    .await;
}

world::backend_tests!(
    a_scale_out_claims_each_machine_about_once_and_reads_machines_from_the_cache,
    one_pod_gets_one_node,
    five_hundred_mixed_pods_all_run_with_no_node_claim_beyond_the_plan,
    zone_spread_uses_machine_deployments_in_three_zones,
    hostname_anti_affinity_gives_each_pod_its_own_node,
    a_node_claim_deleted_by_hand_is_drained_and_its_machine_removed,
    a_restart_in_the_middle_of_a_scale_up_converges_without_extra_machines,
    scaling_a_deployment_uses_the_existing_node_first,
    the_node_pool_counts_each_node_once,
    a_machine_deleted_by_hand_takes_its_node_claim_and_the_pods_come_back,
    a_machine_deleted_by_hand_under_a_pdb_drains_onto_its_replacement,
    a_deleted_node_claim_gets_the_node_its_pods_need_before_they_are_evicted,
);
