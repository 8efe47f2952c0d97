//! The NodeClaim lifecycle controller against the simulated world with the Cluster API
//! provider: launch → late providerID → registration → initialization, timeouts, capacity
//! errors and the finalizer.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use api::common::{Condition, ConditionStatus};
use api::well_known::annotations::{MACHINE, NODECLAIM_TERMINATION_TIMESTAMP};
use api::well_known::capi::DELETE_MACHINE;
use api::well_known::conditions::{INITIALIZED, INSTANCE_TERMINATING, LAUNCHED, READY, REGISTERED};
use api::well_known::events::INSUFFICIENT_CAPACITY_ERROR;
use api::well_known::finalizers::TERMINATION;
use api::well_known::labels::{
    INITIALIZED as INITIALIZED_LABEL, INSTANCE_TYPE, REGISTERED as REGISTERED_LABEL,
};
use api::well_known::taints::UNREGISTERED;
use api::{Machine, NodeClaim};
use cloudprovider::ObjectRef;
use clusterapi::{ClusterApiProvider, ProviderConfig};
use controllers::events::Events;
use controllers::metrics::Metrics;
use controllers::nodeclaim::{Lifecycle, LifecycleConfig};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;
use support::{md, node_claim, replicas, wait_for, world, world_on};
use world::{Backend, World, WorldConfig};

struct Running {
    events: Events,
    metrics: Arc<Metrics>,
}

fn start(world: &World, provider: ProviderConfig) -> Running {
    support::init_test_log();
    let provider = Arc::new(ClusterApiProvider::new(
        world.management_client(),
        world.workload_client(),
        provider,
    ));
    let events = Events::recording();
    let metrics = Arc::new(Metrics::new());
    let lifecycle = Lifecycle::new(
        world.workload_client(),
        provider,
        events.clone(),
        metrics.clone(),
        LifecycleConfig::default(),
    );
    tokio::spawn(lifecycle.run());
    Running { events, metrics }
}

async fn get(world: &World, name: &str) -> Option<NodeClaim> {
    Api::<NodeClaim>::all(world.workload_client())
        .get_opt(name)
        .await
        .unwrap()
}

fn condition(nc: &NodeClaim, type_: &str) -> Option<Condition> {
    nc.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .cloned()
}

fn is_true(nc: &NodeClaim, type_: &str) -> bool {
    condition(nc, type_).is_some_and(|c| c.status == ConditionStatus::True)
}

async fn wait_until(
    world: &World,
    name: &str,
    what: &str,
    timeout: Duration,
    f: impl Fn(&NodeClaim) -> bool,
) -> NodeClaim {
    wait_for(what, timeout, || async {
        get(world, name).await.filter(|nc| f(nc))
    })
    .await
}

async fn wait_gone(world: &World, name: &str, timeout: Duration) {
    wait_for(&format!("{name} gone"), timeout, || async {
        get(world, name).await.is_none().then_some(())
    })
    .await;
}

async fn node(world: &World, name: &str) -> Option<Node> {
    Api::<Node>::all(world.workload_client())
        .get_opt(name)
        .await
        .unwrap()
}

async fn machine_of(world: &World, nc: &NodeClaim) -> Option<Machine> {
    let r = ObjectRef::parse(&nc.metadata.annotations.as_ref()?[MACHINE])?;
    support::machine(world, &r.name).await
}

async fn a_node_claim_launches_registers_and_initializes(backend: Backend) {
    let world = world_on(backend, WorldConfig::default()).await;
    md("md").create(&world).await;
    let running = start(&world, ProviderConfig::default());
    node_claim(&world, "nc-1", json!([])).await;

    let launched = wait_until(&world, "nc-1", "Launched", Duration::from_secs(60), |nc| {
        is_true(nc, LAUNCHED)
    })
    .await;
    assert!(
        launched
            .metadata
            .finalizers
            .as_ref()
            .unwrap()
            .contains(&TERMINATION.to_owned()),
        "the finalizer came first"
    );
    let status = launched.status.clone().unwrap();
    assert_eq!(status.capacity.as_ref().unwrap()["cpu"].0, "4");
    assert_eq!(status.capacity.as_ref().unwrap()["memory"].0, "16Gi");
    // Allocatable is capacity minus the provider's overhead.
    assert!(status.allocatable.as_ref().unwrap().contains_key("memory"));
    assert_eq!(
        launched.metadata.labels.as_ref().unwrap()[INSTANCE_TYPE],
        "md"
    );

    let ready = wait_until(&world, "nc-1", "Ready", Duration::from_secs(120), |nc| {
        is_true(nc, READY)
    })
    .await;
    for t in [LAUNCHED, REGISTERED, INITIALIZED] {
        assert!(is_true(&ready, t), "{t}");
    }
    let status = ready.status.unwrap();
    let provider_id = status.provider_id.unwrap();
    assert!(provider_id.starts_with("sim:///"), "{provider_id}");
    let node = node(&world, &status.node_name.unwrap()).await.unwrap();
    assert_eq!(
        node.spec.as_ref().unwrap().provider_id.as_deref(),
        Some(provider_id.as_str())
    );
    assert!(
        node.metadata
            .finalizers
            .unwrap()
            .contains(&TERMINATION.to_owned())
    );
    let owner = &node.metadata.owner_references.unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("NodeClaim", "nc-1")
    );
    assert_eq!(owner.uid, ready.metadata.uid.unwrap());
    assert_eq!(owner.block_owner_deletion, Some(true));
    let taints = node.spec.unwrap().taints.unwrap_or_default();
    assert!(taints.iter().all(|t| t.key != UNREGISTERED), "{taints:?}");
    let labels = node.metadata.labels.unwrap();
    assert_eq!(labels[REGISTERED_LABEL], "true");
    assert_eq!(labels[INITIALIZED_LABEL], "true");
    assert_eq!(labels[INSTANCE_TYPE], "md");
    let text = running.metrics.encode();
    assert!(
        text.contains("karpenter_nodes_created_total{nodepool=\"\",zone=\"z1\"} 1"),
        "{text}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_provider_id_after_ten_minutes_still_completes() {
    let mut config = WorldConfig::default();
    config.capi.provider_id_delay = Duration::from_secs(600);
    let world = world(config).await;
    md("md").create(&world).await;
    let _running = start(&world, ProviderConfig::default());
    node_claim(&world, "late", json!([])).await;

    let launched = wait_until(&world, "late", "Launched", Duration::from_secs(60), |nc| {
        is_true(nc, LAUNCHED)
    })
    .await;
    assert_eq!(
        launched.status.unwrap().provider_id,
        None,
        "launch did not wait"
    );
    let ready = wait_until(&world, "late", "Ready", Duration::from_secs(1200), |nc| {
        is_true(nc, READY)
    })
    .await;
    assert!(ready.status.unwrap().provider_id.is_some());
}

#[tokio::test(start_paused = true)]
async fn a_machine_that_never_comes_fails_the_launch_as_insufficient_capacity() {
    let mut config = WorldConfig::default();
    config.capi.enabled = false;
    let world = world(config).await;
    md("md").create(&world).await;
    let running = start(
        &world,
        ProviderConfig {
            claim_timeout: Duration::from_secs(30),
            ..ProviderConfig::default()
        },
    );
    node_claim(&world, "stuck", json!([])).await;
    // Gone after the claim timeout, not after the registration TTL.
    wait_gone(&world, "stuck", Duration::from_secs(60)).await;
    let events = running.events.published();
    assert!(
        events
            .iter()
            .any(|(_, m)| m.reason == INSUFFICIENT_CAPACITY_ERROR
                && m.note.contains("could be claimed within")),
        "{events:?}"
    );
    assert_eq!(
        replicas(&world, "md").await,
        0,
        "the replica no Machine filled was released"
    );
}

async fn insufficient_capacity_deletes_the_node_claim(backend: Backend) {
    let world = world_on(backend, WorldConfig::default()).await;
    md("md").max_size(Some("0")).create(&world).await;
    let running = start(&world, ProviderConfig::default());
    node_claim(&world, "ice", json!([])).await;
    wait_gone(&world, "ice", Duration::from_secs(60)).await;
    let events = running.events.published();
    assert!(
        events
            .iter()
            .any(|(_, m)| m.reason == INSUFFICIENT_CAPACITY_ERROR),
        "{events:?}"
    );
    assert!(
        running
            .metrics
            .encode()
            .contains("reason=\"insufficient_capacity\"")
    );
}

async fn deleting_a_node_claim_terminates_its_node_and_machine(backend: Backend) {
    let mut config = WorldConfig::default();
    config.capi.deletion_delay = Duration::from_secs(30);
    let world = world_on(backend, config).await;
    md("md").create(&world).await;
    let running = start(&world, ProviderConfig::default());
    node_claim(&world, "nc", json!([])).await;
    let ready = wait_until(&world, "nc", "Ready", Duration::from_secs(120), |nc| {
        is_true(nc, READY)
    })
    .await;
    let node_name = ready.status.clone().unwrap().node_name.unwrap();
    let machine = machine_of(&world, &ready).await.unwrap();
    assert_eq!(replicas(&world, "md").await, 1);

    Api::<NodeClaim>::all(world.workload_client())
        .delete("nc", &DeleteParams::default())
        .await
        .unwrap();
    // Nodes first: the Node is deleted, and the NodeClaim waits for it.
    let deleting = wait_for("node deleting", Duration::from_secs(60), || async {
        node(&world, &node_name)
            .await
            .filter(|n| n.metadata.deletion_timestamp.is_some())
    })
    .await;
    let nc = get(&world, "nc").await.unwrap();
    assert!(
        !is_true(&nc, INSTANCE_TERMINATING),
        "the instance waits for the node"
    );
    let untouched = machine_of(&world, &nc).await.unwrap();
    assert!(
        !untouched
            .metadata
            .annotations
            .unwrap()
            .contains_key(DELETE_MACHINE)
    );
    // Play the Node termination controller: release the Node.
    let rest: Vec<String> = deleting
        .metadata
        .finalizers
        .unwrap()
        .into_iter()
        .filter(|f| f != TERMINATION)
        .collect();
    let patch = json!({"metadata": {"finalizers": rest,
        "resourceVersion": deleting.metadata.resource_version}});
    Api::<Node>::all(world.workload_client())
        .patch(&node_name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();

    // Then the instance: the Machine is marked for deletion and the replica goes.
    let terminating = wait_until(
        &world,
        "nc",
        "InstanceTerminating",
        Duration::from_secs(60),
        |nc| is_true(nc, INSTANCE_TERMINATING),
    )
    .await;
    assert!(
        terminating
            .metadata
            .finalizers
            .unwrap()
            .contains(&TERMINATION.to_owned())
    );
    let marked = support::machine(&world, machine.metadata.name.as_deref().unwrap())
        .await
        .unwrap();
    assert!(
        marked
            .metadata
            .annotations
            .unwrap()
            .contains_key(DELETE_MACHINE)
    );
    assert_eq!(replicas(&world, "md").await, 0);
    wait_gone(&world, "nc", Duration::from_secs(120)).await;
    assert!(
        support::machine(&world, machine.metadata.name.as_deref().unwrap())
            .await
            .is_none()
    );
    let text = running.metrics.encode();
    assert!(text.contains("karpenter_nodeclaims_terminated_total{nodepool=\"\",capacity_type=\"on-demand\",zone=\"z1\"} 1"), "{text}");
}

async fn a_node_claim_whose_node_never_came_is_deleted_without_waiting(backend: Backend) {
    let mut config = WorldConfig::default();
    config.capi.no_provider_id_rate = 1.0;
    config.capi.deletion_delay = Duration::from_secs(30);
    let world = world_on(backend, config).await;
    md("md").create(&world).await;
    let running = start(&world, ProviderConfig::default());
    let api: Api<NodeClaim> = Api::all(world.workload_client());
    let nc: NodeClaim = serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": "orphan"},
        "spec": {"nodeClassRef": {"group": "karpenter.cluster.x-k8s.io",
            "kind": "ClusterAPINodeClass", "name": "default"},
            "requirements": [], "terminationGracePeriod": "1h"},
    }))
    .unwrap();
    api.create(&kube::api::PostParams::default(), &nc)
        .await
        .unwrap();
    let launched = wait_until(
        &world,
        "orphan",
        "Launched",
        Duration::from_secs(60),
        |nc| is_true(nc, LAUNCHED),
    )
    .await;
    assert!(machine_of(&world, &launched).await.is_some());
    Api::<NodeClaim>::all(world.workload_client())
        .delete("orphan", &DeleteParams::default())
        .await
        .unwrap();
    // The grace period is stamped while the instance goes.
    let stamped = wait_until(
        &world,
        "orphan",
        "termination timestamp",
        Duration::from_secs(30),
        |nc| {
            nc.metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(NODECLAIM_TERMINATION_TIMESTAMP))
        },
    )
    .await;
    let deleted = stamped.metadata.deletion_timestamp.clone().unwrap().0;
    let deadline: k8s_openapi::jiff::Timestamp = stamped.metadata.annotations.as_ref().unwrap()
        [NODECLAIM_TERMINATION_TIMESTAMP]
        .parse()
        .unwrap();
    assert_eq!(deadline.duration_since(deleted).as_secs(), 3600);
    assert!(
        running
            .events
            .published()
            .iter()
            .any(|(_, m)| m.reason == "TerminationGracePeriodExpiring")
    );
    wait_gone(&world, "orphan", Duration::from_secs(120)).await;
    assert_eq!(replicas(&world, "md").await, 0);
}

async fn a_node_claim_of_another_node_class_group_is_left_alone(backend: Backend) {
    let world = world_on(backend, WorldConfig::default()).await;
    md("md").create(&world).await;
    let _running = start(&world, ProviderConfig::default());
    let api: Api<NodeClaim> = Api::all(world.workload_client());
    let nc: NodeClaim = serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": "foreign"},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
            "name": "default"}, "requirements": []},
    }))
    .unwrap();
    api.create(&kube::api::PostParams::default(), &nc)
        .await
        .unwrap();
    // A managed one next to it proves the controller is running.
    node_claim(&world, "ours", json!([])).await;
    wait_until(&world, "ours", "Launched", Duration::from_secs(60), |nc| {
        is_true(nc, LAUNCHED)
    })
    .await;
    let foreign = get(&world, "foreign").await.unwrap();
    assert!(foreign.metadata.finalizers.is_none());
    assert!(foreign.status.is_none());
}

world::backend_tests!(
    paused:
    a_node_claim_launches_registers_and_initializes,
    insufficient_capacity_deletes_the_node_claim,
    deleting_a_node_claim_terminates_its_node_and_machine,
    a_node_claim_whose_node_never_came_is_deleted_without_waiting,
    a_node_claim_of_another_node_class_group_is_left_alone,
);
