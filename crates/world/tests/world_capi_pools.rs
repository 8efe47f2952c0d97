//! The simulated MachinePool with a Docker-provider-like InfraMachinePool: MachinePool Machines
//! (pool-name label, a MachinePool controller reference, spread over the failure domains)
//! become Nodes; a scale-down with `delete-machine` takes exactly the marked Machine when
//! nothing is outdated, and an outdated Machine before it when something is; a Machine deleted
//! directly is replaced; a provider without MachinePool Machines makes none and does not say
//! `infrastructureMachineKind`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod capi_support;

use api::well_known::capi as keys;
use capi_support::{scale, wait_for};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use sim::convert::capi::{CapiKind, CapiVersion};
use world::capi::pools::{NO_MACHINE_POOL_MACHINES, docker_machine_pools};
use world::objects::{capi_resource, machines};
use world::{World, WorldConfig};

fn pool(name: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool",
        "metadata": {"name": name, "namespace": "default", "annotations": {
            "capacity.cluster-autoscaler.kubernetes.io/cpu": "2",
            "capacity.cluster-autoscaler.kubernetes.io/memory": "4Gi"}},
        "spec": {"clusterName": "c1", "replicas": 0, "failureDomains": ["zone-a", "zone-b"],
            "template": {"spec": {"clusterName": "c1", "version": "v1.33.1",
                "bootstrap": {"dataSecretName": "boot"},
                "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                    "kind": "DockerMachinePool", "name": name}}}},
    }))
    .unwrap()
}

fn infra(name: &str, annotations: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "DockerMachinePool",
        "metadata": {"name": name, "namespace": "default", "annotations": annotations},
        "spec": {},
    }))
    .unwrap()
}

async fn machines_of(api: &Api<DynamicObject>, pool: &str) -> Vec<Value> {
    capi_support::labelled(api, keys::POOL_NAME, pool).await
}

/// The MachinePools, DockerMachinePools and Machines of the `default` namespace.
fn apis(world: &World) -> [Api<DynamicObject>; 3] {
    let mc = world.management_client();
    [
        Api::namespaced_with(
            mc.clone(),
            "default",
            &capi_resource(CapiKind::MachinePool, CapiVersion::V1beta2),
        ),
        Api::namespaced_with(mc.clone(), "default", &docker_machine_pools()),
        Api::namespaced_with(mc, "default", &machines()),
    ]
}

fn names(machines: &[Value]) -> Vec<String> {
    let mut n: Vec<String> = machines
        .iter()
        .map(|m| m["metadata"]["name"].as_str().unwrap().to_owned())
        .collect();
    n.sort();
    n
}

fn running(m: &Value) -> bool {
    m["status"]["phase"] == "Running" && m["metadata"]["deletionTimestamp"].is_null()
}

#[tokio::test(start_paused = true)]
async fn machine_pool_machines_scale_as_the_docker_provider_scales_them() {
    let world = World::start(WorldConfig::default()).await.unwrap();
    let [pools, infras, ms] = apis(&world);
    let nodes = Api::<Node>::all(world.workload_client());
    infras
        .create(&PostParams::default(), &infra("mp", json!({})))
        .await
        .unwrap();
    pools
        .create(&PostParams::default(), &pool("mp"))
        .await
        .unwrap();
    scale(&pools, "mp", 3).await;
    let three = wait_for("three running MachinePool Machines", 400, || async {
        let all = machines_of(&ms, "mp").await;
        (all.len() == 3 && all.iter().all(running)).then_some(all)
    })
    .await;
    for m in &three {
        let owner = &m["metadata"]["ownerReferences"][0];
        assert_eq!(
            (owner["kind"].as_str(), owner["controller"].as_bool()),
            (Some("MachinePool"), Some(true))
        );
        assert_eq!(m["metadata"]["labels"][keys::CLUSTER_NAME], "c1");
        assert_eq!(m["spec"]["infrastructureRef"]["kind"], "DockerMachine");
    }
    let mut zones: Vec<&str> = three
        .iter()
        .map(|m| m["spec"]["failureDomain"].as_str().unwrap())
        .collect();
    zones.sort_unstable();
    assert_eq!(zones, ["zone-a", "zone-a", "zone-b"]);
    assert_eq!(
        nodes
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        3
    );
    let p = wait_for("the pool's status", 400, || async {
        let p = serde_json::to_value(pools.get("mp").await.unwrap()).unwrap();
        (p["status"]["readyReplicas"] == 3 && p["status"]["upToDateReplicas"] == 3).then_some(p)
    })
    .await;
    assert_eq!(p["spec"]["providerIDList"].as_array().unwrap().len(), 3);
    let i = serde_json::to_value(infras.get("mp").await.unwrap()).unwrap();
    assert_eq!(i["status"]["infrastructureMachineKind"], "DockerMachine");
    assert_eq!(i["status"]["replicas"], 3);

    // Mark the last Machine by name, lower replicas: that Machine goes, no other.
    let all = names(&three);
    let marked = all[2].clone();
    ms.patch(
        &marked,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {keys::DELETE_MACHINE: "yes"}}})),
    )
    .await
    .unwrap();
    scale(&pools, "mp", 2).await;
    let two = wait_for("the marked Machine gone", 400, || async {
        let all = machines_of(&ms, "mp").await;
        (all.len() == 2).then_some(all)
    })
    .await;
    assert_eq!(names(&two), all[..2]);

    // A Machine deleted directly is replaced (replicas unchanged).
    ms.delete(&all[0], &Default::default()).await.unwrap();
    let replaced = wait_for("a replacement running", 400, || async {
        let all = machines_of(&ms, "mp").await;
        (all.len() == 2 && all.iter().all(running)).then_some(all)
    })
    .await;
    let now = names(&replaced);
    assert!(!now.contains(&all[0]) && now.contains(&all[1]), "{now:?}");

    // An outdated Machine goes before a marked one: make the pool's version newer, mark an
    // (also outdated) Machine and the newest — the provider first replaces, then takes the
    // outdated ones whatever the mark says.
    pools
        .patch(
            "mp",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"template": {"spec": {"version": "v1.34.0"}}}})),
        )
        .await
        .unwrap();
    let updated = wait_for("two running Machines at v1.34.0", 800, || async {
        let all = machines_of(&ms, "mp").await;
        (all.len() == 2
            && all
                .iter()
                .all(|m| running(m) && m["spec"]["version"] == "v1.34.0"))
        .then_some(all)
    })
    .await;
    assert!(names(&updated).iter().all(|n| !now.contains(n)));
}

#[tokio::test(start_paused = true)]
async fn a_provider_without_machine_pool_machines_makes_none() {
    let world = World::start(WorldConfig::default()).await.unwrap();
    let [pools, infras, ms] = apis(&world);
    infras
        .create(
            &PostParams::default(),
            &infra("bare", json!({NO_MACHINE_POOL_MACHINES: "true"})),
        )
        .await
        .unwrap();
    pools
        .create(&PostParams::default(), &pool("bare"))
        .await
        .unwrap();
    scale(&pools, "bare", 2).await;
    let i = wait_for("the infrastructure's status", 400, || async {
        let i = serde_json::to_value(infras.get("bare").await.unwrap()).unwrap();
        i["status"]["replicas"].is_number().then_some(i)
    })
    .await;
    assert!(i["status"]["infrastructureMachineKind"].is_null(), "{i}");
    tokio::time::sleep(std::time::Duration::from_secs(30)).await;
    assert!(machines_of(&ms, "bare").await.is_empty());
}
