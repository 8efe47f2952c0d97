//! What every end-to-end test shares: the worlds and MachineDeployments they start from, the
//! operators they run, and the reads and waits they make.

use api::{Machine, MachineDeployment, NodeClaim};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod};
use karpenter_capi::operator::{Operator, OperatorConfig};
use karpenter_capi::scenario;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use std::future::Future;
use std::time::Duration;
use world::{Backend, World, WorldConfig};

pub(crate) fn fast_world() -> WorldConfig {
    karpenter_capi::chaos::world::fast_world_config(0)
}

pub(crate) fn fast_operator() -> OperatorConfig {
    karpenter_capi::chaos::fast_operator_config()
}

pub(crate) fn md(name: &str, cpu: u32, memory_gi: u32, zone: &str, price: f64) -> Value {
    json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment",
        "metadata": {"name": format!("{name}-{zone}"), "namespace": "default",
            "labels": {"node.cluster.x-k8s.io/karpenter-member": ""},
            "annotations": {
                "capacity.cluster-autoscaler.kubernetes.io/cpu": cpu.to_string(),
                "capacity.cluster-autoscaler.kubernetes.io/memory": format!("{memory_gi}Gi"),
                "capacity.cluster-autoscaler.kubernetes.io/labels":
                    format!("node.kubernetes.io/instance-type={name},topology.kubernetes.io/zone={zone}"),
                "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size": "200",
                "karpenter.cluster.x-k8s.io/price": price.to_string(),
            }},
        "spec": {"clusterName": "e2e", "replicas": 0,
            "selector": {"matchLabels": {"pool": format!("{name}-{zone}")}},
            "template": {"metadata": {"labels": {"pool": format!("{name}-{zone}")}},
                "spec": {"clusterName": "e2e", "bootstrap": {"dataSecretName": "boot"},
                    "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                        "kind": "DockerMachineTemplate", "name": name}}}},
    })
}

/// A JSON merge patch of the NodePool `name`.
pub(crate) async fn patch_pool(world: &World, name: &str, patch: Value) {
    Api::<api::NodePool>::all(world.workload_client())
        .patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .unwrap();
}

pub(crate) fn deployment(
    name: &str,
    replicas: i32,
    cpu: &str,
    memory: &str,
    extra: Value,
) -> Value {
    let mut spec = json!({"containers": [{"name": "c", "image": "pause",
        "resources": {"requests": {"cpu": cpu, "memory": memory}}}]});
    if let (Some(target), Value::Object(extra)) = (spec.as_object_mut(), extra) {
        target.extend(extra);
    }
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": spec}},
    })
}

/// The world on `backend` (two separate sim servers, or one real kube-apiserver as both) with
/// the Karpenter CRDs, the given MDs, a NodeClass and a NodePool that never consolidates (the
/// provisioning tests count the nodes they made; the disruption tests use
/// [`setup_consolidating`]).
pub(crate) async fn setup(backend: Backend, mds: &[Value]) -> World {
    setup_with_disruption(backend, mds, json!({"consolidateAfter": "Never"})).await
}

/// [`setup`] with a NodePool that consolidates as soon as a node is quiet (upstream's
/// default `consolidateAfter: 0s`).
pub(crate) async fn setup_consolidating(backend: Backend, mds: &[Value]) -> World {
    setup_with_disruption(backend, mds, json!({"consolidateAfter": "0s"})).await
}

pub(crate) async fn setup_with_disruption(
    backend: Backend,
    mds: &[Value],
    disruption: Value,
) -> World {
    setup_pools(backend, mds, &[("default", disruption)]).await
}

/// [`setup`] with the given NodePools (name, `spec.disruption`), all of the one NodeClass.
pub(crate) async fn setup_pools(backend: Backend, mds: &[Value], pools: &[(&str, Value)]) -> World {
    setup_world(backend, fast_world(), mds, pools).await
}

/// [`setup_pools`] on a world configured by `config`.
pub(crate) async fn setup_world(
    backend: Backend,
    config: WorldConfig,
    mds: &[Value],
    pools: &[(&str, Value)],
) -> World {
    let world = World::start_on(backend, config).await.unwrap();
    world::crds::install_karpenter_crds(&world.workload_client())
        .await
        .unwrap();
    scenario::apply(&world.management_client(), mds)
        .await
        .unwrap();
    let mut objects = vec![
        json!({"apiVersion": "karpenter.cluster.x-k8s.io/v1alpha1", "kind": "ClusterAPINodeClass",
            "metadata": {"name": "default"}, "spec": {}}),
    ];
    for (name, disruption) in pools {
        objects.push(
            json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
                "spec": {"disruption": disruption,
                    "template": {"spec": {"nodeClassRef": {"group": "karpenter.cluster.x-k8s.io",
                    "kind": "ClusterAPINodeClass", "name": "default"}, "requirements": []}}}}),
        );
    }
    scenario::apply(&world.workload_client(), &objects)
        .await
        .unwrap();
    world
}

pub(crate) fn start(world: &World) -> Operator {
    start_with(world, fast_operator())
}

/// The operator with `config`; `E2E_LOG` (an env filter) turns its logs on.
pub(crate) fn start_with(world: &World, config: OperatorConfig) -> Operator {
    if let Ok(filter) = std::env::var("E2E_LOG") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_test_writer()
            .try_init();
    }
    Operator::start(world.workload_client(), world.management_client(), config)
}

pub(crate) async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
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
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Every object of kind `K` in `client`'s cluster.
/// Every Cluster API `K`, read as v1beta2.
pub(crate) async fn list_capi<K>(client: kube::Client) -> Vec<K>
where
    K: kube::Resource<DynamicType = api::CapiVersion>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    Api::<K>::all_with(client, &api::CapiVersion::v1beta2())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
}

pub(crate) async fn list<K>(client: kube::Client) -> Vec<K>
where
    K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    Api::<K>::all(client)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
}

pub(crate) async fn pods(world: &World) -> Vec<Pod> {
    list::<Pod>(world.workload_client())
        .await
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect()
}

pub(crate) fn running(p: &Pod) -> bool {
    p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
}

pub(crate) async fn all_running(world: &World, want: usize, timeout: Duration) -> Vec<Pod> {
    wait_for(&format!("{want} pods Running"), timeout, || async {
        let pods = pods(world).await;
        (pods.len() == want && pods.iter().all(running)).then_some(pods)
    })
    .await
}

pub(crate) async fn nodes(world: &World) -> Vec<Node> {
    list(world.workload_client()).await
}

pub(crate) async fn node_claims(world: &World) -> Vec<NodeClaim> {
    list(world.workload_client()).await
}

pub(crate) async fn machines(world: &World) -> Vec<Machine> {
    list_capi(world.management_client()).await
}

pub(crate) async fn replicas(world: &World) -> i32 {
    list_capi::<MachineDeployment>(world.management_client())
        .await
        .iter()
        .map(|m| m.spec.replicas.unwrap_or(0))
        .sum()
}

pub(crate) fn label<'a>(node: &'a Node, key: &str) -> &'a str {
    node.labels().get(key).map_or("", String::as_str)
}

/// [`fast_operator`] with a quick disruption loop (validation after 1 s instead of 15 s).
pub(crate) fn disruptive_operator() -> OperatorConfig {
    let mut config = fast_operator();
    config.disruption = controllers::disruption::DisruptionConfig {
        poll: Duration::from_millis(500),
        validation_delay: Duration::from_secs(1),
        replacement_timeout: Duration::from_secs(120),
        drift_recheck: Duration::from_secs(2),
        spot_to_spot: false,
    };
    config
}

pub(crate) fn start_disruptive(world: &World) -> Operator {
    start_with(world, disruptive_operator())
}

pub(crate) async fn scale(world: &World, deployment: &str, replicas: i32) {
    Api::<Deployment>::namespaced(world.workload_client(), "default")
        .patch(
            deployment,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": replicas}})),
        )
        .await
        .unwrap();
}

pub(crate) async fn node_count(world: &World, want: usize, timeout: Duration) {
    wait_for(&format!("{want} node(s)"), timeout, || async {
        let n = nodes(world).await.len();
        let m = machines(world).await.len();
        (n == want && m == want).then_some(())
    })
    .await;
}
/// Sets the MachineDeployment's min-size annotation.
pub(crate) async fn min_size(world: &World, md: &str, min: &str) {
    Api::<MachineDeployment>::namespaced_with(
        world.management_client(),
        "default",
        &api::CapiVersion::v1beta2(),
    )
    .patch(
        md,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {
                "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size": min}}})),
    )
    .await
    .unwrap();
}
pub(crate) async fn node_count_now(world: &World) -> usize {
    nodes(world).await.len()
}

/// The node is neither deleting nor tainted `karpenter.sh/disrupted`.
pub(crate) async fn untouched(world: &World, node: &str) -> bool {
    let n = Api::<Node>::all(world.workload_client())
        .get(node)
        .await
        .unwrap();
    let tainted = n
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| t.iter().any(|t| t.key == "karpenter.sh/disrupted"));
    n.metadata.deletion_timestamp.is_none() && !tainted
}

/// The node stays [`untouched`] for 6 s (a decision takes ~2 s with a 1 s validation delay).
pub(crate) async fn hold(world: &World, node: &str, why: &str) {
    for _ in 0..12 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(
            untouched(world, node).await,
            "{why}: node {node} was disrupted"
        );
    }
}

/// What blocks disruption: a PDB allowing no disruption, then a do-not-disrupt pod, then a
/// budget of 0. A node that would otherwise be replaced by a cheaper one stays, untainted,
/// until each is lifted in turn; a `karpenter.sh/disrupted` taint left on it by hand (as a
/// The node whose pod landed on it.
pub(crate) async fn node_of(world: &World, app: &str) -> Option<String> {
    pods(world)
        .await
        .into_iter()
        .find(|p| p.labels().get("app").map(String::as_str) == Some(app) && running(p))
        .and_then(|p| p.spec.and_then(|s| s.node_name))
}

/// Every Event (`events.k8s.io/v1`) in the workload cluster.
pub(crate) async fn events(world: &World) -> Vec<k8s_openapi::api::events::v1::Event> {
    Api::<k8s_openapi::api::events::v1::Event>::all(world.workload_client())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
}

/// After a 3→1 scale-in with `consolidateAfter: 0s`: two nodes went, by deletion alone, at
/// least one by emptiness. A real ReplicaSet deletes its pods over a moment, so a pass in
/// between may delete a node whose pod is about to go by consolidation instead, moving it onto
/// a node that had just emptied (a valid destination with no `consolidateAfter` window).
pub fn assert_two_nodes_went_by_deletion(records: &[controllers::disruption::Record]) {
    use controllers::disruption::methods::{Decision, Method};
    assert!(
        records
            .iter()
            .all(|r| r.decision == Decision::Delete && r.replacements.is_empty()),
        "{records:?}"
    );
    assert!(
        records.iter().any(|r| r.method == Method::Emptiness),
        "{records:?}"
    );
    assert_eq!(
        records.iter().map(|r| r.nodes.len()).sum::<usize>(),
        2,
        "{records:?}"
    );
}
