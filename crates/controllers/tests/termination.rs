//! Node termination against the simulated world: tiered drain through the Eviction API, PDBs,
//! do-not-disrupt, tolerating pods, forced deletion at the termination time, the NodeClaim
//! conditions, instance termination and the finalizer.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use api::NodeClaim;
use api::common::ConditionStatus;
use api::well_known::annotations::{DO_NOT_DISRUPT, NODECLAIM_TERMINATION_TIMESTAMP};
use api::well_known::conditions::{DRAINED, INSTANCE_TERMINATING};
use api::well_known::finalizers::TERMINATION;
use api::well_known::labels::EXCLUDE_FROM_EXTERNAL_LOAD_BALANCERS;
use api::well_known::taints::DISRUPTED;
use cloudprovider::{CloudProvider, FakeCloudProvider, Method};
use controllers::events::Events;
use controllers::metrics::{CodeLabels, Metrics, PoolLabels, PoolZoneLabels};
use controllers::termination::events::{DISRUPTED as DISRUPTED_EVENT, EVICTED, FAILED_DRAINING};
use controllers::termination::{Termination, TerminationConfig};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use support::{wait_for, world_on};
use world::{Backend, World, WorldConfig};

const LONG: Duration = Duration::from_secs(120);

struct Running {
    events: Events,
    metrics: Arc<Metrics>,
    provider: Arc<FakeCloudProvider>,
}

fn start(world: &World) -> Running {
    support::init_test_log();
    let provider = Arc::new(FakeCloudProvider::new(
        scheduling::fixtures::default_fake_instance_types().unwrap(),
    ));
    let events = Events::recording();
    let metrics = Arc::new(Metrics::new());
    let termination = Termination::new(
        world.workload_client(),
        Arc::clone(&provider),
        events.clone(),
        Arc::clone(&metrics),
        TerminationConfig::default(),
    );
    tokio::spawn(termination.run());
    Running {
        events,
        metrics,
        provider,
    }
}

impl Running {
    /// Names of the objects that got an event with this reason, oldest first.
    fn with_reason(&self, reason: &str) -> Vec<String> {
        self.events
            .published()
            .into_iter()
            .filter(|(_, m)| m.reason == reason)
            .map(|(r, _)| r.name.unwrap_or_default())
            .collect()
    }

    fn notes(&self, reason: &str) -> Vec<String> {
        self.events
            .published()
            .into_iter()
            .filter(|(_, m)| m.reason == reason)
            .map(|(_, m)| m.note)
            .collect()
    }

    fn eviction_requests(&self, code: &str) -> u64 {
        self.metrics
            .pods_eviction_requests
            .get_or_create(&CodeLabels { code: code.into() })
            .get()
    }
}

fn nodes(world: &World) -> Api<Node> {
    Api::all(world.workload_client())
}

fn pods(world: &World) -> Api<Pod> {
    Api::namespaced(world.workload_client(), "default")
}

/// Creates a Node with our finalizer and waits until kubelet-lite made it Ready.
async fn ready_node(world: &World, name: &str, provider_id: &str) -> Node {
    create_node(world, name, provider_id).await;
    wait_for("the node to be Ready", LONG, || async {
        let node = nodes(world).get(name).await.unwrap();
        let ready = node
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
        ready.then_some(node)
    })
    .await
}

async fn create_node(world: &World, name: &str, provider_id: &str) -> Node {
    let node: Node = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "finalizers": [TERMINATION],
            "labels": {"karpenter.sh/nodepool": "default", "topology.kubernetes.io/zone": "z1"}},
        "spec": {"providerID": provider_id},
    }))
    .unwrap();
    nodes(world)
        .create(&PostParams::default(), &node)
        .await
        .unwrap()
}

/// A pod bound to `node`; `extra` is merged into the manifest.
async fn bound_pod(world: &World, name: &str, node: &str, extra: Value) -> Pod {
    let mut body = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": name}},
        "spec": {"nodeName": node, "terminationGracePeriodSeconds": 30,
            "containers": [{"name": "c", "image": "busybox"}]},
    });
    merge(&mut body, extra);
    pods(world)
        .create(
            &PostParams::default(),
            &serde_json::from_value(body).unwrap(),
        )
        .await
        .unwrap()
}

fn merge(target: &mut Value, extra: Value) {
    match (target, extra) {
        (Value::Object(t), Value::Object(e)) => {
            for (k, v) in e {
                merge(t.entry(k).or_insert(Value::Null), v);
            }
        }
        (t, e) => *t = e,
    }
}

/// Creates the DaemonSet `agent` (selecting no node, so no controller makes pods for it) and
/// returns metadata owning a pod by it. The owner must exist: a real garbage collector deletes
/// pods whose owner is missing.
async fn daemon_set_owned(world: &World) -> Value {
    let api: Api<DaemonSet> = Api::namespaced(world.workload_client(), "default");
    let ds = match api.get_opt("agent").await.unwrap() {
        Some(ds) => ds,
        None => {
            let ds: DaemonSet = serde_json::from_value(json!({
                "apiVersion": "apps/v1", "kind": "DaemonSet",
                "metadata": {"name": "agent", "namespace": "default"},
                "spec": {"selector": {"matchLabels": {"app": "agent"}},
                    "template": {"metadata": {"labels": {"app": "agent"}},
                        "spec": {"nodeSelector": {"no-node": "has-this"},
                            "containers": [{"name": "c", "image": "busybox"}]}}},
            }))
            .unwrap();
            api.create(&PostParams::default(), &ds).await.unwrap()
        }
    };
    json!({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet",
        "name": "agent", "uid": ds.metadata.uid.unwrap(), "controller": true}]}})
}

fn critical() -> Value {
    json!({"spec": {"priorityClassName": "system-node-critical"}})
}

async fn running(world: &World, name: &str) {
    wait_for(&format!("{name} to run"), LONG, || async {
        let pod = pods(world).get(name).await.unwrap();
        (pod.status.and_then(|s| s.phase).as_deref() == Some("Running")).then_some(())
    })
    .await;
}

async fn gone(world: &World, name: &str) {
    wait_for(&format!("node {name} to be gone"), LONG, || async {
        nodes(world)
            .get_opt(name)
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
}

async fn delete_node(world: &World, name: &str) {
    nodes(world)
        .delete(name, &DeleteParams::default())
        .await
        .unwrap();
}

async fn terminating(world: &World, name: &str) -> bool {
    pods(world)
        .get_opt(name)
        .await
        .unwrap()
        .is_none_or(|p| p.metadata.deletion_timestamp.is_some())
}

async fn pods_are_evicted_in_tier_order_and_the_node_goes(backend: Backend) {
    // No DaemonSet controller: the test's own pods stand for the DaemonSet's.
    let mut config = WorldConfig::default();
    config.workloads.daemonsets = false;
    let world = world_on(backend, config).await;
    let run = start(&world);
    ready_node(&world, "n1", "fake:///n1").await;
    let mut both = daemon_set_owned(&world).await;
    merge(&mut both, critical());
    bound_pod(&world, "critical-ds", "n1", both).await;
    bound_pod(&world, "critical", "n1", critical()).await;
    let owned = daemon_set_owned(&world).await;
    bound_pod(&world, "ds", "n1", owned).await;
    bound_pod(&world, "web", "n1", json!({})).await;
    bound_pod(
        &world,
        "tolerating",
        "n1",
        json!({"spec": {"tolerations": [{"key": DISRUPTED, "operator": "Exists"}]}}),
    )
    .await;
    running(&world, "web").await;
    delete_node(&world, "n1").await;

    let node = wait_for("the taint and label", LONG, || async {
        let node = nodes(&world).get("n1").await.unwrap();
        let tainted = node
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .is_some_and(|ts| {
                ts.iter()
                    .any(|t| t.key == DISRUPTED && t.effect == "NoSchedule")
            });
        tainted.then_some(node)
    })
    .await;
    assert_eq!(
        node.metadata.labels.as_ref().unwrap()[EXCLUDE_FROM_EXTERNAL_LOAD_BALANCERS],
        "karpenter"
    );

    gone(&world, "n1").await;
    assert_eq!(
        run.with_reason(EVICTED),
        ["web", "ds", "critical", "critical-ds"]
    );
    assert!(run.eviction_requests("200") >= 4);
    let drained = run
        .metrics
        .pods_drained
        .get_or_create(&controllers::metrics::ReasonLabels {
            reason: "Forceful Termination".into(),
        })
        .get();
    assert_eq!(drained, 4);
    assert!(
        run.notes(FAILED_DRAINING)
            .iter()
            .any(|n| n.contains("4 pods are waiting to be evicted")),
        "{:?}",
        run.notes(FAILED_DRAINING)
    );
    let terminated = run
        .metrics
        .nodes_terminated
        .get_or_create(&PoolZoneLabels {
            nodepool: "default".into(),
            zone: "z1".into(),
        })
        .get();
    assert_eq!(terminated, 1);
}

async fn a_pdb_blocks_eviction_until_it_is_relaxed(backend: Backend) {
    let world = world_on(backend, WorldConfig::default()).await;
    let run = start(&world);
    ready_node(&world, "n1", "fake:///n1").await;
    bound_pod(&world, "guarded", "n1", json!({})).await;
    running(&world, "guarded").await;
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(world.workload_client(), "default");
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "guard", "namespace": "default"},
        // A bare pod: only an integer minAvailable counts it (maxUnavailable ignores
        // unmanaged pods and then allows nothing, on kube-controller-manager as in sim).
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}},
    }))
    .unwrap();
    pdbs.create(&PostParams::default(), &pdb).await.unwrap();
    delete_node(&world, "n1").await;

    wait_for("a 429 from the eviction API", LONG, || async {
        (run.eviction_requests("429") >= 2).then_some(())
    })
    .await;
    assert!(
        !terminating(&world, "guarded").await,
        "the PDB holds the pod"
    );
    assert!(nodes(&world).get_opt("n1").await.unwrap().is_some());
    assert!(
        run.notes(FAILED_DRAINING)
            .iter()
            .any(|n| n.contains("evicting pod default/guarded violates a PDB")),
        "{:?}",
        run.notes(FAILED_DRAINING)
    );
    assert!(run.with_reason(EVICTED).is_empty());

    pdbs.patch(
        "guard",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"minAvailable": 0}})),
    )
    .await
    .unwrap();
    gone(&world, "n1").await;
    assert_eq!(run.with_reason(EVICTED), ["guarded"]);
}

async fn a_do_not_disrupt_pod_is_waited_for(backend: Backend) {
    let world = world_on(backend, WorldConfig::default()).await;
    let run = start(&world);
    ready_node(&world, "n1", "fake:///n1").await;
    bound_pod(
        &world,
        "pinned",
        "n1",
        json!({"metadata": {"annotations": {DO_NOT_DISRUPT: "true"}}}),
    )
    .await;
    bound_pod(&world, "web", "n1", json!({})).await;
    running(&world, "pinned").await;
    delete_node(&world, "n1").await;

    wait_for("only the pinned pod to be left", LONG, || async {
        run.notes(FAILED_DRAINING)
            .iter()
            .any(|n| n.contains("1 pods are waiting to be evicted"))
            .then_some(())
    })
    .await;
    assert_eq!(run.with_reason(EVICTED), ["web"]);
    assert!(!terminating(&world, "pinned").await);
    assert!(nodes(&world).get_opt("n1").await.unwrap().is_some());

    pods(&world)
        .patch(
            "pinned",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {DO_NOT_DISRUPT: null}}})),
        )
        .await
        .unwrap();
    gone(&world, "n1").await;
    assert_eq!(run.with_reason(EVICTED), ["web", "pinned"]);
}

/// A NodeClaim that stays (our finalizer, no lifecycle controller) with the launch's providerID.
async fn claimed(world: &World, run: &Running, annotations: Value) -> (NodeClaim, String) {
    let claims: Api<NodeClaim> = Api::all(world.workload_client());
    let nc: NodeClaim = serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": "nc", "finalizers": [TERMINATION], "annotations": annotations},
        "spec": {"nodeClassRef": {"group": "karpenter.cluster.x-k8s.io",
            "kind": "ClusterAPINodeClass", "name": "default"}, "requirements": []},
    }))
    .unwrap();
    let nc = claims.create(&PostParams::default(), &nc).await.unwrap();
    run.provider.create(&nc).await.unwrap();
    let provider_id = run.provider.assign_provider_id("nc").unwrap();
    let nc = claims
        .patch_status(
            "nc",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"providerID": provider_id}})),
        )
        .await
        .unwrap();
    (nc, provider_id)
}

fn condition(nc: &NodeClaim, type_: &str) -> Option<(ConditionStatus, String)> {
    nc.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status, c.reason.clone()))
}

async fn the_node_claim_is_deleted_drained_and_its_instance_terminated(backend: Backend) {
    let world = world_on(backend, WorldConfig::default()).await;
    let run = start(&world);
    let (_, provider_id) = claimed(&world, &run, json!({})).await;
    ready_node(&world, "n1", &provider_id).await;
    bound_pod(&world, "web", "n1", json!({})).await;
    running(&world, "web").await;
    delete_node(&world, "n1").await;

    let claims: Api<NodeClaim> = Api::all(world.workload_client());
    let draining = wait_for("Drained Unknown", LONG, || async {
        let nc = claims.get("nc").await.unwrap();
        (condition(&nc, DRAINED) == Some((ConditionStatus::Unknown, "Draining".into())))
            .then_some(nc)
    })
    .await;
    assert!(draining.metadata.deletion_timestamp.is_some());

    gone(&world, "n1").await;
    let nc = claims.get("nc").await.unwrap();
    assert_eq!(
        condition(&nc, DRAINED),
        Some((ConditionStatus::True, DRAINED.into()))
    );
    assert_eq!(
        condition(&nc, INSTANCE_TERMINATING),
        Some((ConditionStatus::True, INSTANCE_TERMINATING.into()))
    );
    assert!(run.provider.count(Method::Delete) >= 2);
    assert!(run.provider.launches().is_empty());
    let drained = run
        .metrics
        .nodes_drained
        .get_or_create(&PoolLabels {
            nodepool: "default".into(),
        })
        .get();
    assert_eq!(drained, 1);
    assert_eq!(run.with_reason(EVICTED), ["web"]);
}

async fn pods_are_deleted_regardless_near_the_termination_time(backend: Backend) {
    let world = world_on(backend, WorldConfig::default()).await;
    let run = start(&world);
    let deadline = Timestamp::now()
        .checked_add(SignedDuration::from_secs(20))
        .unwrap();
    let (_, provider_id) = claimed(
        &world,
        &run,
        json!({NODECLAIM_TERMINATION_TIMESTAMP: deadline.to_string()}),
    )
    .await;
    ready_node(&world, "n1", &provider_id).await;
    bound_pod(
        &world,
        "pinned",
        "n1",
        json!({"metadata": {"annotations": {DO_NOT_DISRUPT: "true"}}}),
    )
    .await;
    running(&world, "pinned").await;
    delete_node(&world, "n1").await;

    gone(&world, "n1").await;
    assert_eq!(run.with_reason(DISRUPTED_EVENT), ["pinned"]);
    assert!(run.with_reason(EVICTED).is_empty());
    assert!(
        run.with_reason("TerminationGracePeriodExpiring")
            .contains(&"n1".to_owned())
    );
}

async fn a_node_that_is_not_ready_and_whose_instance_is_gone_loses_its_finalizer_at_once(
    backend: Backend,
) {
    let mut config = WorldConfig::default();
    config.kubelet.enabled = false;
    let world = world_on(backend, config).await;
    let run = start(&world);
    create_node(&world, "n1", "fake:///gone").await;
    bound_pod(&world, "web", "n1", json!({})).await;
    delete_node(&world, "n1").await;

    gone(&world, "n1").await;
    assert!(!terminating(&world, "web").await, "nothing was drained");
    assert!(run.with_reason(EVICTED).is_empty());
    assert_eq!(run.provider.count(Method::Get), 1);
}

async fn with_cluster_api_the_machine_is_deleted_before_the_finalizer_goes(backend: Backend) {
    let world = world_on(backend, WorldConfig::default()).await;
    support::md("md").create(&world).await;
    let provider = Arc::new(clusterapi::ClusterApiProvider::new(
        world.management_client(),
        world.workload_client(),
        clusterapi::ProviderConfig::default(),
    ));
    let events = Events::recording();
    let termination = Termination::new(
        world.workload_client(),
        Arc::clone(&provider),
        events.clone(),
        Arc::new(Metrics::new()),
        TerminationConfig::default(),
    );
    tokio::spawn(termination.run());

    let claims: Api<NodeClaim> = Api::all(world.workload_client());
    support::node_claim(&world, "nc", json!([])).await;
    let nc = claims
        .patch(
            "nc",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": [TERMINATION]}})),
        )
        .await
        .unwrap();
    let launch = provider.create(&nc).await.unwrap();
    let provider_id = wait_for("the providerID", LONG, || async {
        let nc = claims.get("nc").await.unwrap();
        provider.get_launch(&nc).await.ok()?.provider_id
    })
    .await;
    claims
        .patch_status(
            "nc",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"providerID": provider_id}})),
        )
        .await
        .unwrap();
    let node = wait_for("the Machine's Node", LONG, || async {
        nodes(&world)
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .find(|n| n.spec.as_ref().and_then(|s| s.provider_id.as_deref()) == Some(&provider_id))
    })
    .await;
    let name = node.metadata.name.clone().unwrap();
    nodes(&world)
        .patch(
            &name,
            &PatchParams::default(),
            // What registration does: our finalizer on, the unregistered taint off.
            &Patch::Merge(
                json!({"metadata": {"finalizers": [TERMINATION]}, "spec": {"taints": null}}),
            ),
        )
        .await
        .unwrap();
    bound_pod(&world, "web", &name, json!({})).await;
    running(&world, "web").await;
    delete_node(&world, &name).await;

    gone(&world, &name).await;
    assert!(
        support::machine(&world, &launch.machine.name)
            .await
            .is_none()
    );
    assert_eq!(support::replicas(&world, "md").await, 0);
    let nc = claims.get("nc").await.unwrap();
    assert!(nc.metadata.deletion_timestamp.is_some());
    assert_eq!(
        condition(&nc, INSTANCE_TERMINATING),
        Some((ConditionStatus::True, INSTANCE_TERMINATING.into()))
    );
    let evicted: Vec<String> = events
        .published()
        .into_iter()
        .filter(|(_, m)| m.reason == EVICTED)
        .map(|(r, _)| r.name.unwrap_or_default())
        .collect();
    assert_eq!(evicted, ["web"]);
}

world::backend_tests!(
    paused:
    pods_are_evicted_in_tier_order_and_the_node_goes,
    a_pdb_blocks_eviction_until_it_is_relaxed,
    a_do_not_disrupt_pod_is_waited_for,
    the_node_claim_is_deleted_drained_and_its_instance_terminated,
    pods_are_deleted_regardless_near_the_termination_time,
    a_node_that_is_not_ready_and_whose_instance_is_gone_loses_its_finalizer_at_once,
    with_cluster_api_the_machine_is_deleted_before_the_finalizer_goes,
);
