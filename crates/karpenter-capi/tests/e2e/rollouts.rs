//! Cluster API rollouts end to end: a RollingUpdate Cluster API carries out itself, an
//! OnDelete rollout through two MachineSets under disruption.

use api::MachineDeployment;
use k8s_openapi::api::apps::v1::Deployment;
use karpenter_capi::scenario;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::time::Duration;
use world::Backend;

use super::support::*;

/// A RollingUpdate template change under Karpenter: Cluster API replaces the node itself
/// (Karpenter does not replace it a second time), the old NodeClaim ends, and the new Machine
/// gets a NodeClaim — the pods' next launch claims it without raising a replica (or, with no
/// pod waiting, the collector adopts it) — so the pods end up Running with every Machine
/// claimed.
async fn a_rolling_update_template_change_is_rolled_out_by_cluster_api_and_its_machine_claimed(
    backend: Backend,
) {
    let world = setup(backend, &[md("m", 4, 16, "zone-a", 0.2)]).await;
    let _operator = start_disruptive(&world);
    scenario::apply(
        &world.workload_client(),
        &[deployment("app", 2, "1", "1Gi", json!({}))],
    )
    .await
    .unwrap();
    all_running(&world, 2, Duration::from_secs(90)).await;
    let before: Vec<String> = node_claims(&world)
        .await
        .iter()
        .map(|n| n.name_any())
        .collect();
    assert_eq!(before.len(), 1);
    let old_machines: Vec<String> = machines(&world)
        .await
        .iter()
        .map(|m| m.name_any())
        .collect();
    Api::<MachineDeployment>::namespaced_with(
        world.management_client(),
        "default",
        &api::CapiVersion::v1beta2(),
    )
    .patch(
        "m-zone-a",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"template": {"spec": {"version": "v1.34.0"}}}})),
    )
    .await
    .unwrap();
    wait_for(
        "the rollout done, its Machine adopted, the old NodeClaim gone",
        Duration::from_secs(300),
        || async {
            let ms = machines(&world).await;
            let ncs = node_claims(&world).await;
            let pods = pods(&world).await;
            let replaced = ms.iter().all(|m| !old_machines.contains(&m.name_any()));
            let claimed = ms.iter().all(|m| {
                m.metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(clusterapi::provider::CLAIMED_BY))
                    .is_some_and(|nc| ncs.iter().any(|c| &c.name_any() == nc))
            });
            let old_gone = ncs.iter().all(|nc| !before.contains(&nc.name_any()));
            (replaced
                && claimed
                && old_gone
                && ms.len() == 1
                && ncs.len() == 1
                && pods.len() == 2
                && pods.iter().all(running))
            .then_some(())
        },
    )
    .await;
    assert_eq!(
        replicas(&world).await,
        1,
        "no replica raised for the rollout"
    );
}

/// Found against Cluster API v1.13's own controllers: mid-`OnDelete`-rollout (a
/// `do-not-disrupt` pod keeps the old MachineSet), emptiness deleted an empty node of the new
/// MachineSet directly, the MachineSet replaced it, the collector adopted the replacement and
/// emptiness took it again, round after round. The empty new node now waits, said in a
/// `DisruptionBlocked` Event, and goes once the old MachineSet is gone; no Machine is made
/// beyond the drift replacement.
async fn mid_on_delete_rollout_an_empty_new_node_waits_for_the_old_machine_set(backend: Backend) {
    let world = setup_consolidating(backend, &[md("m", 4, 16, "zone-a", 0.2)]).await;
    let mds = Api::<MachineDeployment>::namespaced_with(
        world.management_client(),
        "default",
        &api::CapiVersion::v1beta2(),
    );
    let patch_md = |patch: Value| {
        let mds = mds.clone();
        async move {
            mds.patch("m-zone-a", &PatchParams::default(), &Patch::Merge(patch))
                .await
                .unwrap();
        }
    };
    patch_md(json!({"spec": {"rollout": {"strategy": {"type": "OnDelete"}}}})).await;
    let _operator = start_disruptive(&world);
    let mut keep = deployment("keep", 1, "3", "1Gi", json!({}));
    keep["spec"]["template"]["metadata"]["annotations"] =
        json!({"karpenter.sh/do-not-disrupt": "true"});
    scenario::apply(
        &world.workload_client(),
        &[keep, deployment("app", 1, "3", "1Gi", json!({}))],
    )
    .await
    .unwrap();
    all_running(&world, 2, Duration::from_secs(90)).await;
    let kept = node_of(&world, "keep").await.unwrap();
    let first_app = node_of(&world, "app").await.unwrap();
    let seen: std::sync::Mutex<BTreeSet<String>> = std::sync::Mutex::new(
        machines(&world)
            .await
            .iter()
            .map(|m| m.name_any())
            .collect(),
    );
    assert_eq!(seen.lock().unwrap().len(), 2);
    patch_md(json!({"spec": {"template": {"spec": {"version": "v1.34.0"}}}})).await;
    // Drift replaces the app's node through the new MachineSet; the kept node stays.
    let new_node = wait_for(
        "the app on a new node",
        Duration::from_secs(180),
        || async {
            let ms = machines(&world).await;
            seen.lock().unwrap().extend(ms.iter().map(|m| m.name_any()));
            let node = node_of(&world, "app").await?;
            let running = pods(&world).await.iter().all(running);
            (node != first_app && node != kept && running && ms.len() == 2).then_some(node)
        },
    )
    .await;
    scale(&world, "app", 0).await;
    wait_for("the app's pod gone", Duration::from_secs(60), || async {
        (pods(&world).await.len() == 1).then_some(())
    })
    .await;
    for _ in 0..3 {
        hold(
            &world,
            &new_node,
            "an empty node of the new MachineSet mid-rollout",
        )
        .await;
        let ms = machines(&world).await;
        seen.lock().unwrap().extend(ms.iter().map(|m| m.name_any()));
    }
    // The node may first be held for another reason (nominated for a pod a moment ago); the
    // rollout's reason follows within a few passes.
    let events_api =
        Api::<k8s_openapi::api::events::v1::Event>::namespaced(world.workload_client(), "default");
    wait_for(
        "DisruptionBlocked: rolling out through 2 MachineSets",
        Duration::from_secs(120),
        || async {
            let ms = machines(&world).await;
            seen.lock().unwrap().extend(ms.iter().map(|m| m.name_any()));
            assert!(
                nodes(&world).await.iter().any(|n| n.name_any() == new_node),
                "the empty new node stays while the rollout goes on"
            );
            let events = events_api.list(&ListParams::default()).await.unwrap().items;
            events
                .iter()
                .any(|e| {
                    e.reason.as_deref() == Some("DisruptionBlocked")
                        && e.note
                            .as_deref()
                            .is_some_and(|n| n.contains("is rolling out through 2 MachineSets"))
                })
                .then_some(())
        },
    )
    .await;
    // The do-not-disrupt pod goes: the old node is removed (drift, its exact Machine), the
    // rollout ends, and the empty new node goes too.
    Api::<Deployment>::namespaced(world.workload_client(), "default")
        .delete("keep", &DeleteParams::default())
        .await
        .unwrap();
    wait_for("every node gone", Duration::from_secs(180), || async {
        let ms = machines(&world).await;
        seen.lock().unwrap().extend(ms.iter().map(|m| m.name_any()));
        (ms.is_empty() && nodes(&world).await.is_empty()).then_some(())
    })
    .await;
    let seen = seen.into_inner().unwrap();
    assert_eq!(
        seen.len(),
        3,
        "two Machines and the drift replacement, no other: {seen:?}"
    );
    assert_eq!(replicas(&world).await, 0);
}

world::backend_tests!(
    mid_on_delete_rollout_an_empty_new_node_waits_for_the_old_machine_set,
    a_rolling_update_template_change_is_rolled_out_by_cluster_api_and_its_machine_claimed,
);
