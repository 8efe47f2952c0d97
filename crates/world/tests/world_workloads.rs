//! The simulated workload cluster: kube-scheduler-lite binds or marks pods unschedulable,
//! kubelet-lite runs them and finishes graceful deletions, Deployments bring evicted pods back,
//! DaemonSets follow nodes.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, EvictParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use world::CapiConfig;
use world::{World, WorldConfig};

async fn wait_for<T, F, Fut>(what: &str, bound: usize, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    for _ in 0..bound {
        if let Some(v) = check().await {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    panic!("gave up waiting for {what}");
}

/// A workload-only world (no Cluster API): nodes are created by the test.
async fn world() -> World {
    World::start(WorldConfig {
        capi: CapiConfig {
            enabled: false,
            ..CapiConfig::default()
        },
        ..WorldConfig::default()
    })
    .await
    .unwrap()
}

async fn node(nodes: &Api<Node>, name: &str, zone: &str, cpu: &str, taints: Value) {
    let n: Node = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name,
            "topology.kubernetes.io/zone": zone}},
        "spec": {"taints": taints},
        "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "10"},
            "capacity": {"cpu": cpu, "memory": "8Gi", "pods": "10"}},
    }))
    .unwrap();
    nodes.create(&PostParams::default(), &n).await.unwrap();
}

fn pod(name: &str, cpu: &str, extra: Value) -> Pod {
    let mut v = json!({"metadata": {"name": name, "labels": {"app": name}},
        "spec": {"containers": [{"name": "c", "image": "i",
            "resources": {"requests": {"cpu": cpu}}}]}});
    json_patch::merge(&mut v, &extra);
    serde_json::from_value(v).unwrap()
}

fn condition<'a>(p: &'a Pod, kind: &str) -> Option<&'a k8s_openapi::api::core::v1::PodCondition> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == kind)
}

fn running_and_ready(p: &Pod) -> bool {
    p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
        && condition(p, "Ready").is_some_and(|c| c.status == "True")
}

#[tokio::test(start_paused = true)]
async fn pods_are_bound_and_run_or_marked_unschedulable() {
    let world = world().await;
    let wc = world.workload_client();
    let nodes: Api<Node> = Api::all(wc.clone());
    let pods: Api<Pod> = Api::default_namespaced(wc.clone());
    node(&nodes, "n1", "z1", "2", json!([])).await;
    node(
        &nodes,
        "n2",
        "z2",
        "2",
        json!([{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]),
    )
    .await;

    pods.create(&PostParams::default(), &pod("fits", "1", json!({})))
        .await
        .unwrap();
    pods.create(&PostParams::default(), &pod("huge", "4", json!({})))
        .await
        .unwrap();
    let zoned = json!({"spec": {"nodeSelector": {"topology.kubernetes.io/zone": "z9"}}});
    pods.create(&PostParams::default(), &pod("elsewhere", "100m", zoned))
        .await
        .unwrap();
    let tolerant = json!({"spec": {"tolerations": [{"key": "dedicated", "operator": "Exists"}],
        "nodeSelector": {"topology.kubernetes.io/zone": "z2"}}});
    pods.create(&PostParams::default(), &pod("gpu", "1", tolerant))
        .await
        .unwrap();

    let fits = wait_for("a running pod", 400, || async {
        let p = pods.get("fits").await.unwrap();
        running_and_ready(&p).then_some(p)
    })
    .await;
    assert_eq!(fits.spec.as_ref().unwrap().node_name.as_deref(), Some("n1"));
    let status = fits.status.as_ref().unwrap();
    assert!(status.start_time.is_some());
    assert!(status.pod_ip.is_some());
    assert!(condition(&fits, "PodScheduled").is_some_and(|c| c.status == "True"));

    let gpu = wait_for("the tolerant pod on the tainted node", 400, || async {
        let p = pods.get("gpu").await.unwrap();
        running_and_ready(&p).then_some(p)
    })
    .await;
    assert_eq!(gpu.spec.as_ref().unwrap().node_name.as_deref(), Some("n2"));

    let huge = wait_for("an Unschedulable condition", 400, || async {
        let p = pods.get("huge").await.unwrap();
        condition(&p, "PodScheduled")
            .is_some_and(|c| c.reason.as_deref() == Some("Unschedulable"))
            .then_some(p)
    })
    .await;
    let c = condition(&huge, "PodScheduled").unwrap();
    assert_eq!(c.status, "False");
    let message = c.message.as_deref().unwrap();
    assert!(
        message.starts_with("0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint {dedicated: gpu}."),
        "{message}"
    );
    // kube-scheduler also says so in a Warning Event.
    let events: Api<k8s_openapi::api::core::v1::Event> =
        Api::namespaced(world.workload_client(), "default");
    let note = wait_for("a FailedScheduling event", 400, || async {
        events
            .list(&ListParams::default().fields("involvedObject.name=huge"))
            .await
            .unwrap()
            .items
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("FailedScheduling"))
            .and_then(|e| e.message)
    })
    .await;
    assert!(note.starts_with("0/2 nodes are available"), "{note}");
    let elsewhere = pods.get("elsewhere").await.unwrap();
    let message = condition(&elsewhere, "PodScheduled")
        .unwrap()
        .message
        .clone()
        .unwrap();
    // Filters stop at the first failure, taints before node affinity (as in kube-scheduler).
    assert!(
        message.starts_with("0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 1 node(s) had untolerated taint {dedicated: gpu}."),
        "{message}"
    );

    // A new node with room: the waiting pod is retried and lands there.
    node(&nodes, "big", "z1", "8", json!([])).await;
    let huge = wait_for("the big pod to run", 400, || async {
        let p = pods.get("huge").await.unwrap();
        running_and_ready(&p).then_some(p)
    })
    .await;
    assert_eq!(
        huge.spec.as_ref().unwrap().node_name.as_deref(),
        Some("big")
    );
}

#[tokio::test(start_paused = true)]
async fn hostname_anti_affinity_spreads_replicas() {
    let world = world().await;
    let wc = world.workload_client();
    let nodes: Api<Node> = Api::all(wc.clone());
    let pods: Api<Pod> = Api::default_namespaced(wc.clone());
    node(&nodes, "a", "z1", "4", json!([])).await;
    node(&nodes, "b", "z1", "4", json!([])).await;
    let anti = json!({"metadata": {"labels": {"app": "web"}}, "spec": {"affinity": {"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": {"app": "web"}},
            "topologyKey": "kubernetes.io/hostname"}]}}}});
    for name in ["w1", "w2", "w3"] {
        pods.create(&PostParams::default(), &pod(name, "100m", anti.clone()))
            .await
            .unwrap();
    }
    let placed = wait_for("two bound pods and one unschedulable", 400, || async {
        let list = pods.list(&ListParams::default()).await.unwrap().items;
        let bound: Vec<String> = list
            .iter()
            .filter_map(|p| p.spec.as_ref()?.node_name.clone())
            .collect();
        let waiting = list.iter().any(|p| {
            condition(p, "PodScheduled")
                .and_then(|c| c.message.as_deref())
                .is_some_and(|m| m.contains("2 node(s) didn't match pod anti-affinity rules"))
        });
        (bound.len() == 2 && waiting).then_some(bound)
    })
    .await;
    assert_ne!(placed[0], placed[1]);
}

#[tokio::test(start_paused = true)]
async fn an_evicted_deployment_pod_is_replaced_and_terminates() {
    let world = world().await;
    let wc = world.workload_client();
    let nodes: Api<Node> = Api::all(wc.clone());
    let pods: Api<Pod> = Api::default_namespaced(wc.clone());
    let deployments: Api<Deployment> = Api::default_namespaced(wc.clone());
    node(&nodes, "n1", "z1", "4", json!([])).await;
    let d: Deployment = serde_json::from_value(json!({"metadata": {"name": "web"}, "spec": {
        "replicas": 2, "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "i"}]}}}}))
    .unwrap();
    deployments
        .create(&PostParams::default(), &d)
        .await
        .unwrap();
    let first = wait_for("two running replicas", 400, || async {
        let list = pods.list(&ListParams::default()).await.unwrap().items;
        (list.len() == 2 && list.iter().all(running_and_ready)).then_some(list)
    })
    .await;
    let owner = &first[0].metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(owner.kind, "ReplicaSet");
    assert!(
        first[0]
            .metadata
            .name
            .as_deref()
            .unwrap()
            .starts_with(&owner.name)
    );
    let status = wait_for("the deployment's status", 400, || async {
        let d = deployments.get("web").await.unwrap();
        let s = d.status.clone()?;
        (s.ready_replicas == Some(2)).then_some(s)
    })
    .await;
    assert_eq!(status.available_replicas, Some(2));

    let victim = first[0].metadata.name.clone().unwrap();
    pods.evict(&victim, &EvictParams::default()).await.unwrap();
    let terminating = pods.get(&victim).await.unwrap();
    assert!(terminating.metadata.deletion_timestamp.is_some());
    wait_for("a replacement running and the victim gone", 400, || async {
        let list = pods.list(&ListParams::default()).await.unwrap().items;
        let names: Vec<&str> = list
            .iter()
            .filter_map(|p| p.metadata.name.as_deref())
            .collect();
        (list.len() == 2 && !names.contains(&victim.as_str()) && list.iter().all(running_and_ready))
            .then_some(())
    })
    .await;

    // Scaling the deployment down removes a pod; scaling up adds them back.
    let patch = json!({"spec": {"replicas": 1}});
    deployments
        .patch("web", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    wait_for("one pod left", 400, || async {
        (pods.list(&ListParams::default()).await.unwrap().items.len() == 1).then_some(())
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn daemonset_pods_follow_nodes_and_pods_of_deleted_nodes_are_collected() {
    let world = world().await;
    let wc = world.workload_client();
    let nodes: Api<Node> = Api::all(wc.clone());
    let all_pods: Api<Pod> = Api::all(wc.clone());
    let pods: Api<Pod> = Api::default_namespaced(wc.clone());
    let dss: Api<DaemonSet> = Api::namespaced(wc.clone(), "kube-system");
    node(&nodes, "n1", "z1", "4", json!([])).await;
    node(
        &nodes,
        "n2",
        "z1",
        "4",
        json!([{"key": "karpenter.sh/unregistered", "effect": "NoExecute"}]),
    )
    .await;
    let ds: DaemonSet = serde_json::from_value(json!({"metadata": {"name": "agent"}, "spec": {
        "selector": {"matchLabels": {"app": "agent"}},
        "template": {"metadata": {"labels": {"app": "agent"}},
            "spec": {"containers": [{"name": "a", "image": "i"}]}}}}))
    .unwrap();
    dss.create(&PostParams::default(), &ds).await.unwrap();
    let on = |list: &[Pod], node: &str| {
        list.iter()
            .filter(|p| p.metadata.namespace.as_deref() == Some("kube-system"))
            .filter(|p| p.spec.as_ref().unwrap().node_name.as_deref() == Some(node))
            .count()
    };
    wait_for("one agent, on the untainted node", 400, || async {
        let list = all_pods.list(&ListParams::default()).await.unwrap().items;
        (on(&list, "n1") == 1 && list.iter().all(running_and_ready)).then_some(())
    })
    .await;
    assert_eq!(
        on(
            &all_pods.list(&ListParams::default()).await.unwrap().items,
            "n2"
        ),
        0
    );
    // Registration removes the taint: the agent follows.
    let patch = json!({"spec": {"taints": null}});
    nodes
        .patch("n2", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    wait_for("an agent on n2", 400, || async {
        let list = all_pods.list(&ListParams::default()).await.unwrap().items;
        (on(&list, "n2") == 1).then_some(())
    })
    .await;
    let status = dss.get("agent").await.unwrap().status.unwrap();
    assert_eq!(status.desired_number_scheduled, 2);
    // A NoSchedule taint (e.g. Karpenter's disruption taint) keeps a running agent.
    let patch =
        json!({"spec": {"taints": [{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]}});
    nodes
        .patch("n1", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(
        on(
            &all_pods.list(&ListParams::default()).await.unwrap().items,
            "n1"
        ),
        1
    );

    // A pod on a node that goes away is collected.
    pods.create(
        &PostParams::default(),
        &pod("p", "100m", json!({"spec": {"nodeName": "n2"}})),
    )
    .await
    .unwrap();
    nodes.delete("n2", &Default::default()).await.unwrap();
    wait_for("the pods of n2 to be collected", 400, || async {
        let list = all_pods.list(&ListParams::default()).await.unwrap().items;
        (on(&list, "n2") == 0 && pods.get_opt("p").await.unwrap().is_none()).then_some(())
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn untolerated_no_execute_taints_evict_running_pods() {
    let world = world().await;
    let wc = world.workload_client();
    let nodes: Api<Node> = Api::all(wc.clone());
    let pods: Api<Pod> = Api::default_namespaced(wc.clone());
    node(&nodes, "n1", "z1", "4", json!([])).await;
    pods.create(&PostParams::default(), &pod("p", "100m", json!({})))
        .await
        .unwrap();
    wait_for("a running pod", 400, || async {
        running_and_ready(&pods.get("p").await.unwrap()).then_some(())
    })
    .await;
    let patch = json!({"spec": {"taints": [{"key": "maintenance", "effect": "NoExecute"}]}});
    nodes
        .patch("n1", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    wait_for("the pod to be evicted and gone", 400, || async {
        pods.get_opt("p").await.unwrap().is_none().then_some(())
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_lost_node_goes_unknown_loses_its_pods_and_recovers() {
    let world = world().await;
    let wc = world.workload_client();
    let nodes: Api<Node> = Api::all(wc.clone());
    let pods: Api<Pod> = Api::namespaced(wc.clone(), "default");
    node(&nodes, "n1", "z1", "4", json!([])).await;
    pods.create(&PostParams::default(), &pod("p", "1", json!({})))
        .await
        .unwrap();
    wait_for("the pod running", 400, || async {
        running_and_ready(&pods.get("p").await.unwrap()).then_some(())
    })
    .await;
    nodes
        .patch(
            "n1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {
                "sim.karpenter-capi.dev/node-failure": "NotReady"}}})),
        )
        .await
        .unwrap();
    let lost = wait_for("the node Unknown and tainted", 400, || async {
        let n = nodes.get("n1").await.unwrap();
        let unknown = n.status.as_ref()?.conditions.as_ref()?.iter().any(|c| {
            c.type_ == "Ready"
                && c.status == "Unknown"
                && c.reason.as_deref() == Some("NodeStatusUnknown")
        });
        let taints = n.spec.as_ref()?.taints.clone().unwrap_or_default();
        (unknown
            && taints
                .iter()
                .filter(|t| t.key == "node.kubernetes.io/unreachable")
                .count()
                == 2)
            .then_some(n)
    })
    .await;
    assert!(lost.metadata.name.is_some());
    // The pod tolerates unreachable:NoExecute for the default 300 s only.
    tokio::time::sleep(Duration::from_secs(60)).await;
    let p = pods.get("p").await.unwrap();
    assert!(
        p.metadata.deletion_timestamp.is_none(),
        "evicted before tolerationSeconds"
    );
    tokio::time::sleep(Duration::from_secs(250)).await;
    // Then the taint manager evicts it; with its kubelet gone nothing confirms the end, so it
    // stays Terminating (as in Kubernetes) or is gone.
    wait_for("the pod terminating", 400, || async {
        pods.get_opt("p")
            .await
            .unwrap()
            .is_none_or(|p| p.metadata.deletion_timestamp.is_some())
            .then_some(())
    })
    .await;
    // Healed: Ready again, taints gone.
    nodes
        .patch(
            "n1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {
                "sim.karpenter-capi.dev/node-failure": null}}})),
        )
        .await
        .unwrap();
    wait_for("the node Ready again", 400, || async {
        let n = nodes.get("n1").await.unwrap();
        let ready = n
            .status
            .as_ref()?
            .conditions
            .as_ref()?
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        let tainted = n
            .spec
            .as_ref()?
            .taints
            .as_ref()
            .is_some_and(|t| !t.is_empty());
        (ready && !tainted).then_some(())
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_cordoned_node_is_tainted_unschedulable_until_it_is_uncordoned() {
    let world = world().await;
    let nodes: Api<Node> = Api::all(world.workload_client());
    node(
        &nodes,
        "n1",
        "z1",
        "4",
        json!([{"key": "team", "value": "a", "effect": "NoSchedule"}]),
    )
    .await;
    let keys = |n: &Node| -> Vec<String> {
        n.spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .into_iter()
            .flatten()
            .map(|t| format!("{}:{}", t.key, t.effect))
            .collect()
    };
    let cordon = |on: bool| {
        let nodes = nodes.clone();
        async move {
            nodes
                .patch(
                    "n1",
                    &PatchParams::default(),
                    &Patch::Merge(json!({"spec": {"unschedulable": on}})),
                )
                .await
                .unwrap();
        }
    };
    cordon(true).await;
    let tainted = wait_for("the unschedulable taint", 400, || async {
        let n = nodes.get("n1").await.unwrap();
        let k = keys(&n);
        k.contains(&"node.kubernetes.io/unschedulable:NoSchedule".to_owned())
            .then_some(k)
    })
    .await;
    assert_eq!(
        tainted,
        vec![
            "team:NoSchedule",
            "node.kubernetes.io/unschedulable:NoSchedule"
        ],
        "the user's taint stays"
    );
    cordon(false).await;
    let open = wait_for("the taint gone", 400, || async {
        let k = keys(&nodes.get("n1").await.unwrap());
        (k.len() == 1).then_some(k)
    })
    .await;
    assert_eq!(open, vec!["team:NoSchedule"]);
}
