//! Removal while Cluster API rolls a MachineDeployment out through two MachineSets.
//!
//! CAPI honours `cluster.x-k8s.io/delete-machine` only inside the MachineSet it scales down,
//! and lowering a MachineDeployment's replicas mid-rollout scales the **oldest old** MachineSet
//! down first (the simulated world's MachineDeployment controller does as CAPI's). So a
//! removal that marks a Machine and lowers replicas would make CAPI delete another Machine.
//! These tests show that deleting a NodeClaim during such a rollout removes exactly its
//! Machine, and that no other Machine is ever marked, deleted or replaced.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use api::well_known::capi::{DEPLOYMENT_NAME, SET_NAME};
use api::{Machine, MachineSet, NodeClaim};
use cloudprovider::CloudProvider;
use clusterapi::{ClusterApiProvider, ProviderConfig};
use kube::api::{Api, ListParams};
use serde_json::json;
use world::{World, WorldConfig};

fn provider(world: &World) -> ClusterApiProvider {
    ClusterApiProvider::new(
        world.management_client(),
        world.workload_client(),
        ProviderConfig::default(),
    )
}

async fn node_claim(world: &World, name: &str) -> NodeClaim {
    let zone = json!([{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["z1"]}]);
    support::node_claim(world, name, zone).await
}

async fn fresh(world: &World, name: &str) -> NodeClaim {
    Api::<NodeClaim>::all(world.workload_client())
        .get(name)
        .await
        .unwrap()
}

/// The MachineSets of `md` with their replicas, by name.
async fn sets(world: &World, md: &str) -> Vec<(String, i32)> {
    let api: Api<MachineSet> = Api::namespaced_with(
        world.management_client(),
        "default",
        &api::CapiVersion::v1beta2(),
    );
    let mut out: Vec<(String, i32)> = api
        .list(&ListParams::default().labels(&format!("{DEPLOYMENT_NAME}={md}")))
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|s| {
            (
                s.metadata.name.unwrap_or_default(),
                s.spec.replicas.unwrap_or(0),
            )
        })
        .collect();
    out.sort();
    out
}

fn name(m: &Machine) -> String {
    m.metadata.name.clone().unwrap_or_default()
}

fn set_of(m: &Machine) -> String {
    support::label(m, SET_NAME).unwrap_or_default()
}

/// Machines of `md` that are not being deleted.
async fn live(world: &World, md: &str) -> Vec<Machine> {
    support::machines(world, md)
        .await
        .into_iter()
        .filter(|m| m.metadata.deletion_timestamp.is_none())
        .collect()
}

/// An OnDelete MachineDeployment `md` whose template changed after two NodeClaims launched on
/// it, and a third NodeClaim launched after the change: two Machines in the old MachineSet,
/// one in the new. Returns the provider and the three NodeClaims' Machines (a, b old; c new).
async fn on_delete_mid_rollout(world: &World) -> (ClusterApiProvider, [Machine; 3]) {
    support::md("md").create(world).await;
    support::patch_md(
        world,
        "md",
        json!({"spec": {"rollout": {"strategy": {"type": "OnDelete"}}}}),
    )
    .await;
    let p = provider(world);
    let mut launched = Vec::new();
    for n in ["a", "b"] {
        let nc = node_claim(world, n).await;
        launched.push(p.create(&nc).await.unwrap());
    }
    support::wait_for("the first MachineSet", Duration::from_secs(60), || async {
        (sets(world, "md").await.len() == 1).then_some(())
    })
    .await;
    support::patch_md(
        world,
        "md",
        json!({"spec": {"template": {"spec": {"version": "v1.34.0"}}}}),
    )
    .await;
    support::wait_for("the new MachineSet", Duration::from_secs(60), || async {
        (sets(world, "md").await.len() == 2).then_some(())
    })
    .await;
    let nc = node_claim(world, "c").await;
    launched.push(p.create(&nc).await.unwrap());
    let machines: Vec<Machine> = {
        let mut out = Vec::new();
        for l in &launched {
            out.push(support::machine(world, &l.machine.name).await.unwrap());
        }
        out
    };
    let [a, b, c]: [Machine; 3] = machines.try_into().unwrap();
    assert_eq!(set_of(&a), set_of(&b), "a and b are in the old MachineSet");
    assert_ne!(set_of(&a), set_of(&c), "c is in the new MachineSet");
    let active: Vec<i32> = sets(world, "md")
        .await
        .into_iter()
        .map(|(_, r)| r)
        .collect();
    assert_eq!(active, {
        let mut v = vec![2, 1];
        // Sorted by name: which is first depends on the generated names.
        if set_of(&a) > set_of(&c) {
            v.reverse();
        }
        v
    });
    (p, [a, b, c])
}

/// Waits (simulated time) until `gone` is gone, checking all the while that every Machine
/// in `keep` stays, unmarked and not deleting.
async fn only_gone(world: &World, gone: &Machine, keep: &[&Machine]) {
    let keep: BTreeSet<String> = keep.iter().map(|m| name(m)).collect();
    for _ in 0..600 {
        let all = support::machines(world, "md").await;
        for m in &all {
            if keep.contains(&name(m)) {
                assert!(
                    m.metadata.deletion_timestamp.is_none() && !support::marked(m),
                    "Machine {} of a live NodeClaim was marked or deleted (sets {:?})",
                    name(m),
                    sets(world, "md").await
                );
            }
        }
        let names: BTreeSet<String> = all.iter().map(name).collect();
        assert!(
            keep.is_subset(&names),
            "a Machine of a live NodeClaim is gone: {keep:?} ⊄ {names:?}"
        );
        if !names.contains(&name(gone)) {
            // Keep watching a while: a wrong scale-down would come now.
            tokio::time::sleep(Duration::from_secs(5)).await;
            let names: BTreeSet<String> = support::machines(world, "md")
                .await
                .iter()
                .map(name)
                .collect();
            assert!(keep.is_subset(&names), "{keep:?} ⊄ {names:?}");
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("Machine {} never went", name(gone));
}

#[tokio::test(start_paused = true)]
async fn deleting_the_new_machine_set_s_node_claim_mid_on_delete_rollout_takes_only_its_machine() {
    let world = support::world(WorldConfig::default()).await;
    let (p, [a, b, c]) = on_delete_mid_rollout(&world).await;
    p.delete(&fresh(&world, "c").await).await.unwrap();
    only_gone(&world, &c, &[&a, &b]).await;
}

#[tokio::test(start_paused = true)]
async fn deleting_an_old_machine_set_s_node_claim_mid_on_delete_rollout_takes_only_its_machine() {
    let world = support::world(WorldConfig::default()).await;
    let (p, [a, b, c]) = on_delete_mid_rollout(&world).await;
    p.delete(&fresh(&world, "b").await).await.unwrap();
    only_gone(&world, &b, &[&a, &c]).await;
    // b was in the oldest old MachineSet, which is where CAPI takes a lowered replica from:
    // the removal was a scale-down, marked b was the Machine that went.
    assert_eq!(support::replicas(&world, "md").await, 2);
    assert_eq!(live(&world, "md").await.len(), 2);
}

#[tokio::test(start_paused = true)]
async fn the_new_machine_set_s_machine_is_deleted_directly_and_replaced_in_the_new_set() {
    let world = support::world(WorldConfig::default()).await;
    let (p, [a, b, c]) = on_delete_mid_rollout(&world).await;
    p.delete(&fresh(&world, "c").await).await.unwrap();
    only_gone(&world, &c, &[&a, &b]).await;
    // Replicas were kept (a scale-down would have taken an old Machine): CAPI replaced c in
    // the new MachineSet with an unclaimed Machine, which stays ours to reuse or collect.
    assert_eq!(support::replicas(&world, "md").await, 3);
    // The NodeClaim says so.
    let events =
        Api::<k8s_openapi::api::events::v1::Event>::namespaced(world.workload_client(), "default")
            .list(&ListParams::default())
            .await
            .unwrap()
            .items;
    let said: Vec<String> = events
        .iter()
        .filter(|e| e.reason.as_deref() == Some("MachineDeletedDirectly"))
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("c"))
        .filter_map(|e| e.note.clone())
        .collect();
    assert_eq!(said.len(), 1, "{events:?}");
    assert!(
        said[0].contains(&name(&c)) && said[0].contains("rolling out through several MachineSets"),
        "{}",
        said[0]
    );
    let replacement = support::wait_for("the replacement", Duration::from_secs(60), || async {
        live(&world, "md")
            .await
            .into_iter()
            .find(|m| ![name(&a), name(&b), name(&c)].contains(&name(m)))
    })
    .await;
    assert_eq!(set_of(&replacement), set_of(&c));
}

/// The real run against Cluster API v1.13's controllers: emptiness deleted new-MachineSet
/// Machines directly mid-`OnDelete`-rollout, the MachineSet replaced them, the collector
/// adopted the replacements, emptiness took them again — a loop every two minutes for as long
/// as a `do-not-disrupt` pod kept the old MachineSet. Disruption now leaves such a Machine
/// alone, saying why; the oldest old MachineSet's Machines (exact removals) stay candidates,
/// bounded by what that MachineSet holds.
#[tokio::test(start_paused = true)]
async fn mid_on_delete_rollout_only_machines_of_the_oldest_old_machine_set_may_be_disrupted() {
    let world = support::world(WorldConfig::default()).await;
    let (p, [a, b, c]) = on_delete_mid_rollout(&world).await;
    // The MachineSet cache sees both MachineSets.
    support::wait_for("the MachineSet cache", Duration::from_secs(60), || async {
        let r = p.removal_room(&fresh(&world, "c").await).await.unwrap()?;
        r.hold.is_some().then_some(())
    })
    .await;
    let c_room = p
        .removal_room(&fresh(&world, "c").await)
        .await
        .unwrap()
        .unwrap();
    let hold = c_room.hold.unwrap();
    assert!(
        hold.contains("default/md is rolling out through 2 MachineSets")
            && hold.contains(&name(&c))
            && hold.contains(&format!("MachineSet {}", set_of(&a))),
        "{hold}"
    );
    for nc in ["a", "b"] {
        let r = p
            .removal_room(&fresh(&world, nc).await)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(r.hold, None, "NodeClaim {nc}");
        assert_eq!(r.room, 2, "the old MachineSet holds two: NodeClaim {nc}");
    }
    // Once the old MachineSet is gone the rollout is over and c may go too.
    p.delete(&fresh(&world, "a").await).await.unwrap();
    only_gone(&world, &a, &[&b, &c]).await;
    p.delete(&fresh(&world, "b").await).await.unwrap();
    only_gone(&world, &b, &[&c]).await;
    support::wait_for(
        "the end of the rollout",
        Duration::from_secs(60),
        || async {
            let r = p.removal_room(&fresh(&world, "c").await).await.unwrap()?;
            r.hold.is_none().then_some(r.room)
        },
    )
    .await;
}

#[tokio::test(start_paused = true)]
async fn after_an_on_delete_template_change_the_old_machines_drift_and_the_new_one_does_not() {
    let world = support::world(WorldConfig::default()).await;
    let (p, _) = on_delete_mid_rollout(&world).await;
    for (nc, want) in [
        ("a", Some("KubernetesVersionChanged")),
        ("b", Some("KubernetesVersionChanged")),
        ("c", None),
    ] {
        let drift = p.is_drifted(&fresh(&world, nc).await).await.unwrap();
        assert_eq!(drift.as_deref(), want, "NodeClaim {nc}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_rolling_update_template_change_is_left_to_cluster_api() {
    let world = support::world(WorldConfig::default()).await;
    support::md("md").create(&world).await;
    let p = provider(&world);
    let nc = node_claim(&world, "a").await;
    p.create(&nc).await.unwrap();
    support::patch_md(
        &world,
        "md",
        json!({"spec": {"template": {"spec": {"version": "v1.34.0"}}}}),
    )
    .await;
    // Cluster API rolls it out through a new MachineSet; Karpenter does not replace it too.
    support::wait_for("the new MachineSet", Duration::from_secs(60), || async {
        (sets(&world, "md").await.len() == 2).then_some(())
    })
    .await;
    assert_eq!(p.is_drifted(&fresh(&world, "a").await).await.unwrap(), None);
}

#[tokio::test(start_paused = true)]
async fn a_create_during_a_rolling_update_claims_the_replacement_of_a_draining_machine() {
    let world = support::world(WorldConfig::default()).await;
    support::md("md").create(&world).await;
    let p = provider(&world);
    let old = p.create(&node_claim(&world, "a").await).await.unwrap();
    // Something holds the old Machine while Cluster API deletes it (as a PodDisruptionBudget
    // holds its drain): it stays deleting, still claimed by `a`.
    let machines: Api<Machine> = Api::namespaced_with(
        world.management_client(),
        "default",
        &api::CapiVersion::v1beta2(),
    );
    machines
        .patch(
            &old.machine.name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"metadata": {"finalizers": ["test/held"]}})),
        )
        .await
        .unwrap();
    support::patch_md(
        &world,
        "md",
        json!({"spec": {"template": {"spec": {"version": "v1.34.0"}}}}),
    )
    .await;
    let replacement = support::wait_for(
        "the surge and the deletion",
        Duration::from_secs(600),
        || async {
            let all = support::machines(&world, "md").await;
            let draining = all
                .iter()
                .any(|m| name(m) == old.machine.name && m.metadata.deletion_timestamp.is_some());
            let live = live(&world, "md").await;
            (draining && live.len() == 1).then(|| live[0].clone())
        },
    )
    .await;
    assert_ne!(name(&replacement), old.machine.name);
    // The pods of `a` need a new NodeClaim: the replica `a` held is free again, and the
    // replacement Cluster API made for it is claimed instead of a second replica raised.
    let launch = p.create(&node_claim(&world, "b").await).await.unwrap();
    assert_eq!(launch.machine.name, name(&replacement));
    assert_eq!(support::replicas(&world, "md").await, 1);
    // Once the old Machine goes, nothing changes.
    machines
        .patch(
            &old.machine.name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
    support::wait_machine_gone(&world, &old.machine.name, Duration::from_secs(600)).await;
    tokio::time::sleep(Duration::from_secs(60)).await;
    let left: Vec<String> = support::machines(&world, "md")
        .await
        .iter()
        .map(name)
        .collect();
    assert_eq!(left, vec![name(&replacement)]);
    assert_eq!(support::replicas(&world, "md").await, 1);
}

/// The NodePool `default` of the `default` NodeClass.
async fn node_pool(world: &World) {
    let pool: api::NodePool = serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
        "spec": {"template": {
            "metadata": {"labels": {"team": "a"}},
            "spec": {"nodeClassRef": {"group": "karpenter.cluster.x-k8s.io",
                "kind": "ClusterAPINodeClass", "name": "default"}, "requirements": [],
                "startupTaints": [{"key": "agent-not-ready", "effect": "NoSchedule"}]}}},
    }))
    .unwrap();
    Api::<api::NodePool>::all(world.workload_client())
        .create(&kube::api::PostParams::default(), &pool)
        .await
        .unwrap();
}

#[tokio::test(start_paused = true)]
async fn machines_cluster_api_makes_for_a_rolling_update_are_adopted_not_collected() {
    let world = support::world(WorldConfig::default()).await;
    node_pool(&world).await;
    // A Machine of the user's (the baseline) and one of ours.
    support::md("md").replicas(1).create(&world).await;
    let before = support::wait_machines(&world, "md", 1).await;
    let p = std::sync::Arc::new(provider(&world));
    let gc = clusterapi::gc::MachineGc::new(
        std::sync::Arc::clone(&p),
        clusterapi::gc::GcConfig::default(),
    );
    let launch = p.create(&node_claim(&world, "a").await).await.unwrap();
    let ours = launch.machine.name.clone();
    // A RollingUpdate template change: Cluster API replaces both Machines itself.
    support::patch_md(
        &world,
        "md",
        json!({"spec": {"template": {"spec": {"version": "v1.34.0"}}}}),
    )
    .await;
    let replaced = support::wait_for("the rollout", Duration::from_secs(600), || async {
        let live = live(&world, "md").await;
        let old_gone = !live
            .iter()
            .any(|m| name(m) == ours || name(m) == name(&before[0]));
        let joined = live
            .iter()
            .filter(|m| {
                m.status
                    .as_ref()
                    .and_then(|s| s.node_ref.as_ref())
                    .is_some()
            })
            .count();
        (old_gone && live.len() == 2 && joined == 2).then_some(live)
    })
    .await;
    assert_eq!(support::replicas(&world, "md").await, 2);

    let report = gc.collect().await.unwrap();
    assert!(
        report.adopted.is_empty(),
        "not before ADOPT_AFTER: {report:?}"
    );
    tokio::time::sleep(clusterapi::gc::ADOPT_AFTER).await;
    let report = gc.collect().await.unwrap();
    assert!(
        report.surplus.is_empty() && report.errors.is_empty(),
        "{report:?}"
    );
    assert_eq!(report.adopted.len(), 1, "{report:?}");
    let nodeclaims: Vec<NodeClaim> = Api::<NodeClaim>::all(world.workload_client())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    let adopted: Vec<&NodeClaim> = nodeclaims
        .iter()
        .filter(|nc| {
            nc.metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(clusterapi::provider::ADOPTED))
        })
        .collect();
    // One replacement is ours (we raised one replica), the other the user's: one adoption.
    assert_eq!(adopted.len(), 1, "{nodeclaims:?}");
    let nc = adopted[0];
    let labels = nc.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels.get("karpenter.sh/nodepool").map(String::as_str),
        Some("default")
    );
    assert_eq!(labels.get("team").map(String::as_str), Some("a"));
    assert!(nc.spec.startup_taints.as_ref().is_none_or(Vec::is_empty));
    let machine = replaced
        .iter()
        .find(|m| {
            support::label(m, "node.cluster.x-k8s.io/karpenter-member").is_some()
                || nc
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get("karpenter.cluster.x-k8s.io/machine"))
                    == Some(&format!("default/{}", name(m)))
        })
        .unwrap();
    let fresh_machine = support::machine(&world, &name(machine)).await.unwrap();
    assert_eq!(
        fresh_machine
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(clusterapi::provider::CLAIMED_BY_UID)),
        nc.metadata.uid.as_ref(),
        "claimed for the adopting NodeClaim"
    );
    // The lifecycle's create resumes with that Machine: nothing is raised.
    let launch = p.create(nc).await.unwrap();
    assert_eq!(launch.machine.name, name(machine));
    assert_eq!(support::replicas(&world, "md").await, 2);
    // Nothing else is adopted or collected later.
    tokio::time::sleep(Duration::from_secs(11 * 60)).await;
    let report = gc.collect().await.unwrap();
    assert!(
        report.adopted.is_empty() && report.surplus.is_empty(),
        "{report:?}"
    );
}
