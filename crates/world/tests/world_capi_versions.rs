//! The simulated Cluster API and the versions of `cluster.x-k8s.io` a management cluster
//! serves: the world speaks v1beta2 (its MachineSets carry `spec.deletion.order`), drives a
//! v1beta1-only (CAPI ≤ v1.10) management cluster in v1beta1's shapes, and on a real
//! kube-apiserver installs and speaks v1beta2 alone.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod capi_support;

use std::time::Duration;

use capi_support::{machines_of, md_json, owned_by, wait_for};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::json;
use sim::convert::capi::{CapiKind, CapiVersion};
use world::crds::CapiServing;
use world::objects::{capi_resource, machine_deployments, machine_sets, machines};
use world::{World, WorldConfig};

#[tokio::test(start_paused = true)]
async fn rollouts_make_v1beta2_machine_sets_with_the_deletion_order() {
    let world = World::start(WorldConfig::default()).await.unwrap();
    let mc = world.management_client();
    let mds = Api::<DynamicObject>::namespaced_with(mc.clone(), "default", &machine_deployments());
    let sets = Api::<DynamicObject>::namespaced_with(mc.clone(), "default", &machine_sets());
    let mut md = serde_json::to_value(md_json("ordered", json!({}))).unwrap();
    md["spec"]["replicas"] = json!(1);
    md["spec"]["deletion"] = json!({"order": "Newest"});
    md["spec"]["rollout"] = json!({"strategy": {"type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}});
    mds.create(&PostParams::default(), &serde_json::from_value(md).unwrap())
        .await
        .unwrap();
    let first = wait_for("a MachineSet", 400, || async {
        let s = owned_by(&sets, "ordered").await;
        (s.len() == 1).then(|| s[0].clone())
    })
    .await;
    assert_eq!(first["apiVersion"], "cluster.x-k8s.io/v1beta2");
    assert_eq!(first["spec"]["deletion"]["order"], "Newest");
    assert!(first["spec"].get("deletePolicy").is_none());
    assert_eq!(
        first["spec"]["template"]["spec"]["infrastructureRef"],
        json!({"apiGroup": "infrastructure.cluster.x-k8s.io",
            "kind": "DockerMachineTemplate", "name": "t"})
    );

    // A new template version rolls out through a second MachineSet, ordered alike.
    let bump = json!({"spec": {"template": {"spec": {"version": "v1.34.0"}}}});
    mds.patch("ordered", &PatchParams::default(), &Patch::Merge(&bump))
        .await
        .unwrap();
    let both = wait_for("a second MachineSet", 400, || async {
        let s = owned_by(&sets, "ordered").await;
        (s.len() == 2).then_some(s)
    })
    .await;
    for ms in &both {
        assert_eq!(ms["spec"]["deletion"]["order"], "Newest");
    }
    // The order changed on the deployment reaches every MachineSet.
    let order = json!({"spec": {"deletion": {"order": "Oldest"}}});
    mds.patch("ordered", &PatchParams::default(), &Patch::Merge(&order))
        .await
        .unwrap();
    wait_for("the new order on every MachineSet", 400, || async {
        let s = owned_by(&sets, "ordered").await;
        (!s.is_empty()
            && s.iter()
                .all(|ms| ms["spec"]["deletion"]["order"] == "Oldest"))
        .then_some(())
    })
    .await;
    // A v1beta1 client (CAPI's conversion, as sim serves it) reads it as `deletePolicy`.
    let old = capi_resource(CapiKind::MachineSet, CapiVersion::V1beta1);
    let v1beta1 = Api::<DynamicObject>::namespaced_with(mc, "default", &old);
    for ms in owned_by(&v1beta1, "ordered").await {
        assert_eq!(ms["spec"]["deletePolicy"], "Oldest");
        assert!(ms["spec"].get("deletion").is_none());
    }
    let health = world.health();
    assert!(health.values().all(|h| h.failures == 0), "{health:?}");
}

/// CAPI ≤ v1.10: the management cluster serves v1beta1 alone; the world still drives it, in
/// v1beta1's shapes.
#[tokio::test(start_paused = true)]
async fn the_world_drives_a_v1beta1_only_management_cluster() {
    let mut config = WorldConfig::default();
    config.capi.serving = Some(CapiServing::V1beta1Only);
    let world = World::start(config).await.unwrap();
    let mc = world.management_client();
    let groups = mc.list_api_groups().await.unwrap();
    let capi = groups
        .groups
        .iter()
        .find(|g| g.name == "cluster.x-k8s.io")
        .unwrap();
    let served: Vec<&str> = capi.versions.iter().map(|v| v.version.as_str()).collect();
    assert_eq!(served, ["v1beta1"]);
    let api = |kind| {
        let r = capi_resource(kind, CapiVersion::V1beta1);
        Api::<DynamicObject>::namespaced_with(mc.clone(), "default", &r)
    };
    let (mds, sets, ms_api) = (
        api(CapiKind::MachineDeployment),
        api(CapiKind::MachineSet),
        api(CapiKind::Machine),
    );
    let md: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineDeployment",
        "metadata": {"name": "old", "namespace": "default"},
        "spec": {"clusterName": "c1", "replicas": 1,
            "selector": {"matchLabels": {"pool": "old"}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"deletePolicy": "Newest"}},
            "template": {"metadata": {"labels": {"pool": "old"}},
                "spec": {"clusterName": "c1", "version": "v1.33.1",
                    "bootstrap": {"dataSecretName": "boot"}, "nodeDrainTimeout": "10s",
                    "infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                        "kind": "DockerMachineTemplate", "name": "t"}}}},
    }))
    .unwrap();
    mds.create(&PostParams::default(), &md).await.unwrap();
    let machine = wait_for("a Running, Ready Machine", 400, || async {
        let ms = machines_of(&ms_api, "old").await;
        ms.into_iter().find(|m| {
            m["status"]["phase"] == "Running" && m["status"]["conditions"][3]["status"] == "True"
        })
    })
    .await;
    assert_eq!(machine["apiVersion"], "cluster.x-k8s.io/v1beta1");
    assert_eq!(machine["spec"]["nodeDrainTimeout"], "10s");
    assert_eq!(
        machine["spec"]["infrastructureRef"]["apiVersion"],
        "infrastructure.cluster.x-k8s.io/v1beta1"
    );
    let status = &machine["status"];
    assert_eq!(status["bootstrapReady"], true);
    assert_eq!(status["infrastructureReady"], true);
    assert_eq!(
        status["nodeRef"],
        json!({"apiVersion": "v1", "kind": "Node", "name": machine["metadata"]["name"]})
    );
    assert_eq!(status["conditions"][3]["type"], "Ready");
    assert_eq!(status["conditions"][3]["status"], "True");
    assert_eq!(status["v1beta2"]["conditions"][5]["type"], "Available");
    for v1beta2 in ["initialization", "deprecated"] {
        assert!(status.get(v1beta2).is_none(), "{v1beta2}");
    }
    let set = owned_by(&sets, "old").await.remove(0);
    assert_eq!(set["spec"]["deletePolicy"], "Newest");
    assert_eq!(
        set["spec"]["template"]["spec"]["infrastructureRef"]["apiVersion"],
        "infrastructure.cluster.x-k8s.io/v1beta1"
    );
    wait_for("a ready v1beta1 deployment", 400, || async {
        let md = serde_json::to_value(mds.get("old").await.unwrap()).unwrap();
        (md["status"]["readyReplicas"] == 1 && md["status"]["v1beta2"]["readyReplicas"] == 1)
            .then_some(())
    })
    .await;
    let health = world.health();
    assert!(health.values().all(|h| h.failures == 0), "{health:?}");
}

/// On a real kube-apiserver (the `real` profile) the world installs the CRDs v1beta2 alone —
/// there is no CAPI webhook to convert — and speaks v1beta2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_the_world_speaks_v1beta2_to_a_real_server() {
    let mut config = WorldConfig::default();
    let fast = Duration::from_millis(200);
    config.capi.bootstrap_delay = fast;
    config.capi.provider_id_delay = fast;
    config.capi.node_join_delay = fast;
    let world = World::start_on(world::Backend::Real, config).await.unwrap();
    let mc = world.management_client();
    let groups = mc.list_api_groups().await.unwrap();
    let capi = groups
        .groups
        .iter()
        .find(|g| g.name == "cluster.x-k8s.io")
        .unwrap();
    let served: Vec<&str> = capi.versions.iter().map(|v| v.version.as_str()).collect();
    assert_eq!(served, ["v1beta2"]);
    let mds = Api::<DynamicObject>::namespaced_with(mc.clone(), "default", &machine_deployments());
    let sets = Api::<DynamicObject>::namespaced_with(mc.clone(), "default", &machine_sets());
    let ms_api = Api::<DynamicObject>::namespaced_with(mc, "default", &machines());
    let mut md = serde_json::to_value(md_json("real", json!({}))).unwrap();
    md["spec"]["replicas"] = json!(1);
    md["spec"]["deletion"] = json!({"order": "Newest"});
    mds.create(&PostParams::default(), &serde_json::from_value(md).unwrap())
        .await
        .unwrap();
    let machine = wait_for("a Running Machine", 240, || async {
        let ms = machines_of(&ms_api, "real").await;
        ms.into_iter().find(|m| m["status"]["phase"] == "Running")
    })
    .await;
    assert_eq!(
        machine["status"]["nodeRef"]["name"],
        machine["metadata"]["name"]
    );
    assert_eq!(
        machine["status"]["initialization"]["infrastructureProvisioned"],
        true
    );
    let set = owned_by(&sets, "real").await.remove(0);
    assert_eq!(set["spec"]["deletion"]["order"], "Newest");
    // Only kube-apiserver's transient 429s while a new CRD's storage initializes.
    let health = world.health();
    assert!(
        health.values().all(|h| h
            .last_error
            .as_deref()
            .is_none_or(|e| e.contains("storage is (re)initializing"))),
        "{health:?}"
    );
}
