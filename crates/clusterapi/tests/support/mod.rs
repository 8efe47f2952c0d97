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

use api::well_known::capi::{KARPENTER_MEMBER, MAX_SIZE, PRICE};
use api::{ClusterAPINodeClass, Machine, MachineDeployment, NodeClaim};
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::{Value, json};
use sim::world::crds::install_karpenter_crds;
use sim::world::objects::machine_deployments;
use sim::{World, WorldConfig};

/// A world with the Karpenter CRDs installed and a `default` NodeClass with an empty spec.
pub async fn world(config: WorldConfig) -> World {
    world_on(sim::Backend::Sim, config).await
}

/// [`world`] on `backend` (sim, or a real kube-apiserver: see `sim::Backend`).
pub async fn world_on(backend: sim::Backend, config: WorldConfig) -> World {
    let world = World::start_on(backend, config).await.unwrap();
    install_karpenter_crds(&world.workload_client())
        .await
        .unwrap();
    let classes: Api<ClusterAPINodeClass> = Api::all(world.workload_client());
    let nc: ClusterAPINodeClass = serde_json::from_value(json!({
        "apiVersion": "karpenter.cluster.x-k8s.io/v1alpha1",
        "kind": "ClusterAPINodeClass",
        "metadata": {"name": "default"},
        "spec": {},
    }))
    .unwrap();
    classes.create(&PostParams::default(), &nc).await.unwrap();
    world
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

    /// Creates it in the management cluster.
    pub async fn create(self, world: &World) {
        let name = &self.name;
        let mut annotations = json!({
            "capacity.cluster-autoscaler.kubernetes.io/cpu": self.cpu,
            "capacity.cluster-autoscaler.kubernetes.io/memory": "16Gi",
            "capacity.cluster-autoscaler.kubernetes.io/labels":
                format!("node.kubernetes.io/instance-type={name},topology.kubernetes.io/zone=z1"),
        });
        if let Some(price) = &self.price {
            annotations[PRICE] = json!(price);
        }
        if let Some(max) = &self.max_size {
            annotations[MAX_SIZE] = json!(max);
        }
        let labels = if self.member {
            json!({KARPENTER_MEMBER: ""})
        } else {
            json!({})
        };
        let md: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta1",
            "kind": "MachineDeployment",
            "metadata": {"name": name, "namespace": "default", "labels": labels,
                "annotations": annotations},
            "spec": {
                "clusterName": "c1",
                "replicas": self.replicas,
                "selector": {"matchLabels": {"pool": name}},
                "template": {
                    "metadata": {"labels": {"pool": name}},
                    "spec": {"clusterName": "c1", "bootstrap": {"dataSecretName": "boot"},
                        "infrastructureRef": {
                            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                            "kind": "DockerMachineTemplate", "name": "t"}},
                },
            },
        }))
        .unwrap();
        let mds = Api::<DynamicObject>::namespaced_with(
            world.management_client(),
            "default",
            &machine_deployments(),
        );
        mds.create(&PostParams::default(), &md).await.unwrap();
    }
}

/// Creates a NodeClaim of the `default` NodeClass requesting 1 CPU with these requirements.
pub async fn node_claim(world: &World, name: &str, requirements: Value) -> NodeClaim {
    let api: Api<NodeClaim> = Api::all(world.workload_client());
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
    let api: Api<MachineDeployment> = Api::namespaced(world.management_client(), "default");
    api.get(md).await.unwrap().spec.replicas.unwrap_or(0)
}

/// A Machine by name, if it still exists.
pub async fn machine(world: &World, name: &str) -> Option<Machine> {
    let api: Api<Machine> = Api::namespaced(world.management_client(), "default");
    api.get_opt(name).await.unwrap()
}
