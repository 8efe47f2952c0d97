//! Shared setup of the clusterapi integration tests: a simulated world with our CRDs and a
//! `default` ClusterAPINodeClass, member MachineDeployments with scale-from-zero annotations,
//! NodeClaims, and small readers.
#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::time::Duration;

use api::well_known::capi::{
    CLUSTER_NAME, DELETE_MACHINE, DEPLOYMENT_NAME, KARPENTER_MEMBER, MAX_SIZE, MIN_SIZE, PAUSED,
    PRICE,
};
use api::{ClusterAPINodeClass, Machine, MachineDeployment, NodeClaim};
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use world::crds::install_karpenter_crds;
use world::objects::{capi_resource, machine_deployments, machine_sets, namespaced};
use world::{World, WorldConfig};

fn machine_pools() -> kube::api::ApiResource {
    capi_resource(
        sim::convert::capi::CapiKind::MachinePool,
        sim::convert::capi::CapiVersion::V1beta2,
    )
}

/// A world with the Karpenter CRDs installed and a `default` NodeClass with an empty spec.
pub async fn world(config: WorldConfig) -> World {
    world_on(world::Backend::Sim, config).await
}

/// [`world`] on `backend` (sim, or a real kube-apiserver: see `world::Backend`).
pub async fn world_on(backend: world::Backend, config: WorldConfig) -> World {
    let world = World::start_on(backend, config).await.unwrap();
    prepare_workload(&world.workload_client()).await;
    world
}

/// Installs the Karpenter CRDs and a `default` NodeClass with an empty spec into a workload
/// cluster.
pub async fn prepare_workload(workload: &kube::Client) {
    install_karpenter_crds(workload).await.unwrap();
    let classes: Api<ClusterAPINodeClass> = Api::all(workload.clone());
    let nc: ClusterAPINodeClass = serde_json::from_value(json!({
        "apiVersion": "karpenter.cluster.x-k8s.io/v1alpha1",
        "kind": "ClusterAPINodeClass",
        "metadata": {"name": "default"},
        "spec": {},
    }))
    .unwrap();
    classes.create(&PostParams::default(), &nc).await.unwrap();
}

/// Polls `check` every 100 ms (tokio time) until it returns a value; panics after `timeout`.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A MachineDeployment in namespace `default`, cluster `c1`, instance type = its name, zone `z1`.
#[derive(Debug, Clone)]
pub struct Md {
    name: String,
    cpu: String,
    replicas: i32,
    member: bool,
    price: Option<String>,
    max_size: Option<String>,
    min_size: Option<String>,
    cluster: String,
    capacity_annotations: bool,
}

/// A member MachineDeployment of 4 CPUs / 16Gi with no replicas.
pub fn md(name: &str) -> Md {
    Md {
        name: name.into(),
        cpu: "4".into(),
        replicas: 0,
        member: true,
        price: None,
        max_size: None,
        min_size: None,
        cluster: "c1".into(),
        capacity_annotations: true,
    }
}

impl Md {
    /// The cpu capacity annotation's value (may be malformed on purpose).
    pub fn cpu(mut self, cpu: &str) -> Self {
        self.cpu = cpu.into();
        self
    }

    /// `spec.replicas`.
    pub fn replicas(mut self, replicas: i32) -> Self {
        self.replicas = replicas;
        self
    }

    /// Whether it carries the karpenter-member label.
    pub fn member(mut self, member: bool) -> Self {
        self.member = member;
        self
    }

    /// Our price annotation.
    pub fn price(mut self, price: &str) -> Self {
        self.price = Some(price.into());
        self
    }

    /// The max-size annotation.
    pub fn max_size(mut self, max: Option<&str>) -> Self {
        self.max_size = max.map(Into::into);
        self
    }

    /// The min-size annotation.
    pub fn min_size(mut self, min: Option<&str>) -> Self {
        self.min_size = min.map(Into::into);
        self
    }

    /// The Cluster it belongs to (`spec.clusterName`, and the `cluster-name` label).
    pub fn cluster(mut self, cluster: &str) -> Self {
        self.cluster = cluster.into();
        self
    }

    /// Without the cpu and memory capacity annotations (its infrastructure template, the
    /// `DockerMachineTemplate` `t`, has to say).
    pub fn without_capacity_annotations(mut self) -> Self {
        self.capacity_annotations = false;
        self
    }

    /// Creates it in the management cluster.
    pub async fn create(self, world: &World) {
        let md: DynamicObject = serde_json::from_value(self.object("MachineDeployment")).unwrap();
        let mds = Api::<DynamicObject>::namespaced_with(
            world.management_client(),
            "default",
            &machine_deployments(),
        );
        mds.create(&PostParams::default(), &md).await.unwrap();
    }

    /// Creates it as a stand-alone MachineSet instead (same labels, annotations, template).
    pub async fn create_machine_set(self, world: &World) {
        let ms: DynamicObject = serde_json::from_value(self.object("MachineSet")).unwrap();
        let sets = Api::<DynamicObject>::namespaced_with(
            world.management_client(),
            "default",
            &machine_sets(),
        );
        sets.create(&PostParams::default(), &ms).await.unwrap();
    }

    /// Creates it as a MachinePool instead (same labels and annotations, no selector, version
    /// `v1.33.1`), with the `DockerMachinePool` of its name that its template names; that
    /// provider makes MachinePool Machines when `machines`, none otherwise.
    pub async fn create_machine_pool(self, world: &World, machines: bool) {
        let annotations = if machines {
            json!({})
        } else {
            json!({world::capi::pools::NO_MACHINE_POOL_MACHINES: "true"})
        };
        let infra: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "DockerMachinePool",
            "metadata": {"name": self.name, "namespace": "default", "annotations": annotations},
            "spec": {},
        }))
        .unwrap();
        namespaced(
            &world.management_client(),
            "default",
            &world::capi::pools::docker_machine_pools(),
        )
        .create(&PostParams::default(), &infra)
        .await
        .unwrap();
        let mut mp = self.object("MachinePool");
        mp["spec"].as_object_mut().unwrap().remove("selector");
        mp["spec"]["template"]["spec"]["version"] = json!("v1.33.1");
        mp["spec"]["template"]["spec"]["infrastructureRef"] = json!({
            "apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerMachinePool",
            "name": self.name});
        let mp: DynamicObject = serde_json::from_value(mp).unwrap();
        namespaced(&world.management_client(), "default", &machine_pools())
            .create(&PostParams::default(), &mp)
            .await
            .unwrap();
    }

    fn object(&self, kind: &str) -> Value {
        let name = &self.name;
        let mut annotations = json!({
            "capacity.cluster-autoscaler.kubernetes.io/cpu": self.cpu,
            "capacity.cluster-autoscaler.kubernetes.io/memory": "16Gi",
            "capacity.cluster-autoscaler.kubernetes.io/labels":
                format!("node.kubernetes.io/instance-type={name},topology.kubernetes.io/zone=z1"),
        });
        if !self.capacity_annotations {
            let a = annotations.as_object_mut().unwrap();
            a.remove("capacity.cluster-autoscaler.kubernetes.io/cpu");
            a.remove("capacity.cluster-autoscaler.kubernetes.io/memory");
        }
        if let Some(price) = &self.price {
            annotations[PRICE] = json!(price);
        }
        if let Some(max) = &self.max_size {
            annotations[MAX_SIZE] = json!(max);
        }
        if let Some(min) = &self.min_size {
            annotations[MIN_SIZE] = json!(min);
        }
        let cluster = &self.cluster;
        let labels = if self.member {
            json!({KARPENTER_MEMBER: "", CLUSTER_NAME: cluster})
        } else {
            json!({CLUSTER_NAME: cluster})
        };
        json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2",
            "kind": kind,
            "metadata": {"name": name, "namespace": "default", "labels": labels,
                "annotations": annotations},
            "spec": {
                "clusterName": cluster,
                "replicas": self.replicas,
                "selector": {"matchLabels": {"pool": name}},
                "template": {
                    "metadata": {"labels": {"pool": name}},
                    "spec": {"clusterName": cluster, "bootstrap": {"dataSecretName": "boot"},
                        "infrastructureRef": {
                            "apiGroup": "infrastructure.cluster.x-k8s.io",
                            "kind": "DockerMachineTemplate", "name": "t"}},
                },
            },
        })
    }
}

/// Creates a NodeClaim of the `default` NodeClass requesting 1 CPU with these requirements.
pub async fn node_claim(world: &World, name: &str, requirements: Value) -> NodeClaim {
    node_claim_in(&world.workload_client(), name, requirements).await
}

/// [`node_claim`] in any workload cluster.
pub async fn node_claim_in(workload: &kube::Client, name: &str, requirements: Value) -> NodeClaim {
    let api: Api<NodeClaim> = Api::all(workload.clone());
    let nc: NodeClaim = serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": name},
        "spec": {
            "nodeClassRef": {"group": "karpenter.cluster.x-k8s.io", "kind": "ClusterAPINodeClass",
                "name": "default"},
            "requirements": requirements,
            "resources": {"requests": {"cpu": "1"}},
        },
    }))
    .unwrap();
    api.create(&PostParams::default(), &nc).await.unwrap()
}

/// `spec.replicas` of a MachineDeployment (unset counts as 0).
pub async fn replicas(world: &World, md: &str) -> i32 {
    let api: Api<MachineDeployment> = Api::namespaced_with(
        world.management_client(),
        "default",
        &api::CapiVersion::v1beta2(),
    );
    api.get(md).await.unwrap().spec.replicas.unwrap_or(0)
}

/// The Machines of a MachineDeployment (fresh list), by name.
pub async fn machines(world: &World, md: &str) -> Vec<Machine> {
    let api: Api<Machine> = Api::namespaced_with(
        world.management_client(),
        "default",
        &api::CapiVersion::v1beta2(),
    );
    let mut items = api
        .list(&ListParams::default().labels(&format!("{DEPLOYMENT_NAME}={md}")))
        .await
        .unwrap()
        .items;
    items.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    items
}

/// Waits until `md` has exactly `n` Machines; returns them.
pub async fn wait_machines(world: &World, md: &str, n: usize) -> Vec<Machine> {
    wait_for(
        &format!("{n} Machines of {md}"),
        Duration::from_secs(120),
        || async {
            let ms = machines(world, md).await;
            (ms.len() == n).then_some(ms)
        },
    )
    .await
}

/// Sets `spec.replicas` of a MachineDeployment (as a user would).
pub async fn set_replicas(world: &World, md: &str, replicas: i32) {
    let api: Api<MachineDeployment> = Api::namespaced_with(
        world.management_client(),
        "default",
        &api::CapiVersion::v1beta2(),
    );
    api.patch(
        md,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": replicas}})),
    )
    .await
    .unwrap();
}

/// Whether `m` carries `cluster.x-k8s.io/delete-machine` or is being deleted.
pub fn marked(m: &Machine) -> bool {
    m.metadata.deletion_timestamp.is_some()
        || m.metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(DELETE_MACHINE))
}

/// A label of a Machine.
pub fn label(m: &Machine, key: &str) -> Option<String> {
    m.metadata.labels.as_ref()?.get(key).cloned()
}

/// A Machine by name, if it still exists.
pub async fn machine(world: &World, name: &str) -> Option<Machine> {
    let api: Api<Machine> = Api::namespaced_with(
        world.management_client(),
        "default",
        &api::CapiVersion::v1beta2(),
    );
    api.get_opt(name).await.unwrap()
}

/// Waits (up to `within`) until the Machine `name` no longer exists.
pub async fn wait_machine_gone(world: &World, name: &str, within: Duration) {
    wait_for(&format!("Machine {name} gone"), within, || async {
        machine(world, name).await.is_none().then_some(())
    })
    .await;
}

/// Pauses (or unpauses) every MachineSet of `md` (`cluster.x-k8s.io/paused`): no Machine is
/// created or deleted meanwhile.
pub async fn pause_sets(world: &World, md: &str, paused: bool) {
    let sets = namespaced(&world.management_client(), "default", &machine_sets());
    let wanted = format!("cluster.x-k8s.io/deployment-name={md}");
    let list = sets
        .list(&ListParams::default().labels(&wanted))
        .await
        .unwrap();
    assert!(!list.items.is_empty(), "{md} has a MachineSet");
    for ms in list.items {
        let value = if paused { json!("true") } else { json!(null) };
        sets.patch(
            ms.metadata.name.as_deref().unwrap(),
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {PAUSED: value}}})),
        )
        .await
        .unwrap();
    }
}

/// Waits until `md` has a MachineSet.
pub async fn wait_sets(world: &World, md: &str) {
    let sets = namespaced(&world.management_client(), "default", &machine_sets());
    let wanted = format!("cluster.x-k8s.io/deployment-name={md}");
    wait_for("a MachineSet", Duration::from_secs(60), || async {
        let list = sets
            .list(&ListParams::default().labels(&wanted))
            .await
            .unwrap();
        (!list.items.is_empty()).then_some(())
    })
    .await;
}

/// A JSON merge patch of MachineDeployment `md` (namespace `default`).
pub async fn patch_md(world: &World, md: &str, patch: Value) {
    let api: Api<MachineDeployment> = Api::namespaced_with(
        world.management_client(),
        "default",
        &api::CapiVersion::v1beta2(),
    );
    api.patch(md, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

/// A JSON merge patch of MachineDeployment `md`'s status (`{"status": status}`).
pub async fn patch_md_status(world: &World, md: &str, status: Value) {
    let api: Api<MachineDeployment> = Api::namespaced_with(
        world.management_client(),
        "default",
        &api::CapiVersion::v1beta2(),
    );
    api.patch_status(
        md,
        &PatchParams::default(),
        &Patch::Merge(json!({ "status": status })),
    )
    .await
    .unwrap();
}

/// `spec.replicas` of a MachineSet (unset counts as 0).
pub async fn set_replicas_of(world: &World, ms: &str) -> i32 {
    let api: Api<api::MachineSet> = Api::namespaced_with(
        world.management_client(),
        "default",
        &api::CapiVersion::v1beta2(),
    );
    api.get(ms).await.unwrap().spec.replicas.unwrap_or(0)
}

/// The Machines a MachineSet controls (fresh list), by name.
pub async fn set_machines(world: &World, ms: &str) -> Vec<Machine> {
    controlled_machines(world, "MachineSet", ms).await
}

/// The MachinePool `mp` (fresh read).
pub async fn pool(world: &World, mp: &str) -> api::MachinePool {
    let api: Api<api::MachinePool> = Api::namespaced_with(
        world.management_client(),
        "default",
        &api::CapiVersion::v1beta2(),
    );
    api.get(mp).await.unwrap()
}

/// The Machines a MachinePool controls (fresh list), by name.
pub async fn pool_machines(world: &World, mp: &str) -> Vec<Machine> {
    controlled_machines(world, "MachinePool", mp).await
}

/// The Machines whose controller is the `kind` named `owner` (fresh list), by name.
async fn controlled_machines(world: &World, kind: &str, owner: &str) -> Vec<Machine> {
    let api: Api<Machine> = Api::namespaced_with(
        world.management_client(),
        "default",
        &api::CapiVersion::v1beta2(),
    );
    let mut items: Vec<Machine> = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|m| {
            m.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.kind == kind && o.name == owner && o.controller == Some(true))
        })
        .collect();
    items.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    items
}

/// A NodeClaim of the `default` NodeClass for zone `z1` (every [`md`] is there).
pub async fn zonal_node_claim(world: &World, name: &str) -> NodeClaim {
    let zone = json!([{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["z1"]}]);
    node_claim(world, name, zone).await
}

/// `nc` read again.
pub async fn fresh_node_claim(world: &World, nc: &NodeClaim) -> NodeClaim {
    let api: Api<NodeClaim> = Api::all(world.workload_client());
    api.get(nc.metadata.name.as_deref().unwrap()).await.unwrap()
}

/// A provider over `world` with the default settings.
pub fn default_provider(world: &World) -> clusterapi::ClusterApiProvider {
    clusterapi::ClusterApiProvider::new(
        world.management_client(),
        world.workload_client(),
        clusterapi::ProviderConfig::default(),
    )
}
