//! The chaos rounds' world: two `sim` servers (management and workload) with fast simulated
//! Cluster API and kubelets, and the objects a shared, half-migrated management cluster holds.
//!
//! Responsibility: build the starting point every round works from —
//! - MachineDeployments the controller may use (selected by the NodeClass with the label
//!   `chaos=ours`): `m4-a` and `m8-b` (empty, rollout strategy `OnDelete`: a template change
//!   leaves replacing their Machines to Karpenter), `legacy-c` (a member that already runs two
//!   Machines: the cluster-autoscaler migration path), `shared-a` (whose one Machine is
//!   claimed by a NodeClaim of another workload cluster, `chaos-b`) and `m2-r` (empty,
//!   `RollingUpdate`, priced so that only the pods pinned to its shape use it: Cluster API rolls
//!   it out itself); every one's template runs Kubernetes `v1.33.0`;
//! - node groups it was never asked to manage: the MachineDeployments `static` (not a member)
//!   and `other` (a member of another Cluster, not selected), the stand-alone MachineSet `solo`
//!   (not a member, one Machine) and the MachinePool `bare` (selected and the cheapest, but its
//!   `DockerMachinePool` makes no MachinePool Machines);
//! - the workloads: `web` (1 CPU pods, scaled by the rounds) and `guarded` (four 500m pods
//!   under a PodDisruptionBudget of `minAvailable: 3`), both pinned to the NodePool
//!   `default`; `burst` (no pods until a round asks) is pinned to the NodePool `burst`,
//!   whose nodes nothing else uses, so every pod of it needs a launch; `rolled` (no pods until
//!   a rollout round asks) runs in that NodePool on `m2-r`'s shape alone;
//! - the [`Protected`] record of what existed before the controller ever ran.
//!
//! Inputs: the seed. Outputs: a running [`::world::World`], fault-free clients for the checks, and
//! [`Protected`].

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use ::world::{World, WorldConfig};
use anyhow::{Context, bail};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};

use super::invariants::{
    CLAIMED_BY, CLAIMED_BY_CLUSTER, CLAIMED_BY_UID, Protected, group_of, guarded_annotations,
};
use crate::scenario;

/// This workload cluster's identity in the chaos world.
pub const CLUSTER_ID: &str = "chaos-a";
/// The other workload cluster sharing the management cluster.
pub const OTHER_CLUSTER_ID: &str = "chaos-b";
/// The MachineDeployments the NodeClass selects.
pub const MANAGED: [&str; 5] = ["m4-a", "m8-b", "legacy-c", "shared-a", ROLLING];
/// The cheapest managed MachineDeployment: where a launch goes first.
pub const CHEAPEST: &str = "m4-a";
/// The managed MachineDeployments whose rollout strategy is `OnDelete`.
pub const ON_DELETE: [&str; 2] = ["m4-a", "m8-b"];
/// The managed `RollingUpdate` MachineDeployment only [`ROLLED`]'s pods use.
pub const ROLLING: &str = "m2-r";
/// The workload pinned to [`ROLLING`]'s shape (`c2m8`), in the NodePool [`BURST`].
pub const ROLLED: &str = "rolled";
/// The node groups nobody asked us to manage, with their replicas: the MachineDeployments
/// `static` and `other`, the stand-alone MachineSet `solo` (not a member) and the MachinePool
/// `bare` (a selected member, the cheapest of all, but its infrastructure makes no MachinePool
/// Machines, so it must never be scaled).
pub const UNMANAGED: [(&str, i64); 4] = [("static", 1), ("other", 1), ("solo", 1), ("bare", 0)];
/// The scaled workload.
pub const WEB: &str = "web";
/// The workload whose pods always need new nodes (of the NodePool `burst`).
pub const BURST: &str = "burst";
/// The workload under a PodDisruptionBudget.
pub const GUARDED: &str = "guarded";
/// `guarded`'s replicas.
pub const GUARDED_REPLICAS: usize = 4;
/// `guarded`'s PodDisruptionBudget.
pub const GUARDED_MIN_AVAILABLE: usize = 3;

/// A simulated world with fast (not instant) infrastructure, kubelets and scheduler: Machines
/// get their providerID in 300 ms, Nodes join 200 ms later and are Ready 200 ms after that
/// (the end-to-end tests use it too).
#[must_use]
pub fn fast_world_config(seed: u64) -> WorldConfig {
    let mut w = WorldConfig::default();
    let ms = Duration::from_millis;
    w.capi.seed = seed;
    w.capi.bootstrap_delay = ms(100);
    w.capi.provider_id_delay = ms(300);
    w.capi.node_join_delay = ms(200);
    w.capi.deletion_delay = ms(200);
    w.kubelet.node_ready_delay = ms(200);
    w.kubelet.pod_start_delay = ms(100);
    w.kubelet.pod_termination_delay = ms(100);
    w.scheduler.retry_interval = ms(500);
    w
}

struct Md<'a> {
    name: &'a str,
    cpu: u32,
    memory_gi: u32,
    zone: &'a str,
    price: &'a str,
    replicas: i32,
    cluster: &'a str,
    labels: Value,
}

fn md(m: &Md<'_>) -> Value {
    let mut md = json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment",
        "metadata": {"name": m.name, "namespace": "default", "labels": m.labels,
            "annotations": {
                "capacity.cluster-autoscaler.kubernetes.io/cpu": m.cpu.to_string(),
                "capacity.cluster-autoscaler.kubernetes.io/memory": format!("{}Gi", m.memory_gi),
                "capacity.cluster-autoscaler.kubernetes.io/labels":
                    format!("node.kubernetes.io/instance-type=c{}m{},topology.kubernetes.io/zone={}",
                        m.cpu, m.memory_gi, m.zone),
                "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size": "0",
                "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size": "40",
                "karpenter.cluster.x-k8s.io/price": m.price,
            }},
        "spec": {"clusterName": m.cluster, "replicas": m.replicas,
            "selector": {"matchLabels": {"pool": m.name}},
            "template": {"metadata": {"labels": {"pool": m.name}},
                "spec": {"clusterName": m.cluster, "version": "v1.33.0",
                    "bootstrap": {"dataSecretName": "boot"},
                    "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                        "kind": "DockerMachineTemplate", "name": m.name}}}},
    });
    if ON_DELETE.contains(&m.name)
        && let Some(spec) = md.get_mut("spec").and_then(Value::as_object_mut)
    {
        spec.insert("rollout".into(), json!({"strategy": {"type": "OnDelete"}}));
    }
    md
}

fn machine_deployments() -> Vec<Value> {
    let member = "node.cluster.x-k8s.io/karpenter-member";
    let ours = json!({member: "", "chaos": "ours"});
    let group = |name, cpu, memory_gi, zone, price, replicas| Md {
        name,
        cpu,
        memory_gi,
        zone,
        price,
        replicas,
        cluster: "chaos",
        labels: ours.clone(),
    };
    vec![
        md(&group("m4-a", 4, 16, "zone-a", "0.20", 0)),
        md(&group("m8-b", 8, 32, "zone-b", "0.35", 0)),
        md(&group("legacy-c", 4, 16, "zone-c", "0.25", 2)),
        md(&group("shared-a", 4, 16, "zone-a", "0.30", 1)),
        md(&group(ROLLING, 2, 8, "zone-a", "0.60", 0)),
        md(&Md {
            labels: json!({}),
            ..group("static", 4, 16, "zone-a", "0.10", 1)
        }),
        md(&Md {
            cluster: "other",
            labels: json!({member: ""}),
            ..group("other", 4, 16, "zone-b", "0.10", 1)
        }),
        stand_alone_set(),
        json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
            "kind": "DockerMachinePool",
            "metadata": {"name": "bare", "namespace": "default",
                "annotations": {::world::capi::pools::NO_MACHINE_POOL_MACHINES: "true"}},
            "spec": {}}),
        bare_pool(&group("bare", 4, 16, "zone-a", "0.05", 0)),
    ]
}

/// `solo`: a stand-alone MachineSet (no MachineDeployment owns it), not a member.
fn stand_alone_set() -> Value {
    let mut set = md(&Md {
        name: "solo",
        cpu: 4,
        memory_gi: 16,
        zone: "zone-a",
        price: "0.10",
        replicas: 1,
        cluster: "chaos",
        labels: json!({}),
    });
    if let Some(obj) = set.as_object_mut() {
        obj.insert("kind".into(), json!("MachineSet"));
    }
    set
}

/// `bare`: a MachinePool whose infrastructure makes no MachinePool Machines.
fn bare_pool(m: &Md<'_>) -> Value {
    let mut pool = md(m);
    if let Some(obj) = pool.as_object_mut() {
        obj.insert("kind".into(), json!("MachinePool"));
    }
    if let Some(spec) = pool.get_mut("spec").and_then(Value::as_object_mut) {
        spec.remove("selector");
    }
    if let Some(template) = pool
        .pointer_mut("/spec/template/spec")
        .and_then(Value::as_object_mut)
    {
        template.insert(
            "infrastructureRef".into(),
            json!({"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerMachinePool",
                "name": m.name}),
        );
    }
    pool
}

/// A Deployment of `replicas` pods of `cpu`/`memory`, pinned to the nodes of NodePool `pool`.
#[must_use]
pub fn deployment_in(pool: &str, name: &str, replicas: usize, cpu: &str, memory: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {
                "nodeSelector": {"karpenter.sh/nodepool": pool},
                "terminationGracePeriodSeconds": 1,
                "containers": [{"name": "c", "image": "pause",
                    "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}}},
    })
}

/// [`ROLLED`]: pods of 1.5 CPU (one per `c2m8` node) pinned to [`ROLLING`]'s shape.
fn rolled() -> Value {
    let mut d = deployment_in(BURST, ROLLED, 0, "1500m", "1Gi");
    if let Some(selector) = d
        .pointer_mut("/spec/template/spec/nodeSelector")
        .and_then(Value::as_object_mut)
    {
        selector.insert("node.kubernetes.io/instance-type".into(), json!("c2m8"));
    }
    d
}

fn deployment(name: &str, replicas: usize, cpu: &str, memory: &str) -> Value {
    deployment_in("default", name, replicas, cpu, memory)
}

fn node_pool(name: &str) -> Value {
    json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
        "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.cluster.x-k8s.io",
            "kind": "ClusterAPINodeClass", "name": "default"}, "requirements": []}}}})
}

fn workload_objects(web: usize) -> Vec<Value> {
    vec![
        json!({"apiVersion": "karpenter.cluster.x-k8s.io/v1alpha1", "kind": "ClusterAPINodeClass",
            "metadata": {"name": "default"},
            "spec": {"scalableResourceSelector": {"matchLabels": {"chaos": "ours"}}}}),
        node_pool("default"),
        node_pool(BURST),
        deployment(WEB, web, "1", "1Gi"),
        deployment(GUARDED, GUARDED_REPLICAS, "500m", "512Mi"),
        deployment_in(BURST, BURST, 0, "1", "1Gi"),
        rolled(),
        json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": GUARDED, "namespace": "default"},
            "spec": {"minAvailable": GUARDED_MIN_AVAILABLE,
                "selector": {"matchLabels": {"app": GUARDED}}}}),
    ]
}

/// Every object of `resource` in `client`'s cluster, as JSON.
///
/// # Errors
/// The LIST fails.
pub async fn list(client: &kube::Client, resource: &ApiResource) -> anyhow::Result<Vec<Value>> {
    ::world::objects::list_json(client, resource)
        .await
        .with_context(|| format!("cannot list {}", resource.plural))
}

/// The started world and what it protects.
#[derive(Debug)]
pub struct Started {
    /// The servers and simulated controllers.
    pub world: World,
    /// What existed before the controller ran.
    pub protected: Protected,
}

/// Starts the world, creates its objects, waits for the pre-existing Machines, marks the
/// `shared-a` Machine as claimed by [`OTHER_CLUSTER_ID`], and records [`Protected`].
///
/// # Errors
/// A server or an object cannot be created, or the pre-existing Machines do not appear.
pub async fn start(seed: u64, web: usize) -> anyhow::Result<Started> {
    let world = World::start(fast_world_config(seed))
        .await
        .context("cannot start the sim world")?;
    let (Some(management), Some(workload)) = (world.management(), world.workload()) else {
        bail!("the chaos world runs on sim");
    };
    let mgmt = kube::Client::new(management.router_without_faults(), "default");
    let wl = kube::Client::new(workload.router_without_faults(), "default");
    ::world::crds::install_karpenter_crds(&wl)
        .await
        .context("cannot install the Karpenter CRDs")?;
    scenario::apply(&mgmt, &machine_deployments()).await?;
    // Wait for the six pre-existing Machines (legacy-c ×2, shared-a, static, other, solo).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let machines = loop {
        let ms = list(&mgmt, &::world::objects::machines()).await?;
        if ms.len() == 6 {
            break ms;
        }
        if tokio::time::Instant::now() > deadline {
            bail!(
                "the pre-existing Machines did not appear ({} of 6)",
                ms.len()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let api: Api<DynamicObject> =
        Api::namespaced_with(mgmt.clone(), "default", &::world::objects::machines());
    if let Some(shared) = machines.iter().find(|m| group_of(m) == "shared-a") {
        let name = shared
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        api.patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {
                CLAIMED_BY: "their-node-claim", CLAIMED_BY_UID: "their-uid",
                CLAIMED_BY_CLUSTER: OTHER_CLUSTER_ID}}})),
        )
        .await
        .context("cannot mark the shared Machine as another cluster's")?;
    }
    let machines = list(&mgmt, &::world::objects::machines()).await?;
    let protected = Protected {
        cluster_id: CLUSTER_ID.to_owned(),
        machines: machines
            .iter()
            .map(|m| {
                let name = m
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned();
                (name, guarded_annotations(m))
            })
            .collect(),
        unmanaged: UNMANAGED
            .iter()
            .map(|(n, replicas)| ((*n).to_owned(), *replicas))
            .collect::<BTreeMap<_, _>>(),
        managed: MANAGED
            .iter()
            .map(|n| (*n).to_owned())
            .collect::<BTreeSet<_>>(),
    };
    scenario::apply(&wl, &workload_objects(web)).await?;
    Ok(Started { world, protected })
}
