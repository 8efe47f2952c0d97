#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use serde_json::json;

use super::*;

fn from<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> T {
    serde_json::from_value(value).unwrap()
}

fn node(name: &str, labels: serde_json::Value, taints: serde_json::Value) -> core::Node {
    from(json!({
        "metadata": {"name": name, "labels": labels},
        "spec": {"taints": taints},
        "status": {"allocatable": {"cpu": "2", "memory": "4Gi"}, "capacity": {"cpu": "2", "memory": "4Gi"}}
    }))
}

fn run(objects: &ClusterObjects<'_>) -> Cluster {
    let (cluster, warnings) = cluster(objects);
    assert!(warnings.is_empty(), "{warnings:?}");
    cluster
}

#[test]
fn nodes_deleting_or_disrupted_are_left_out() {
    let mut deleting = node("deleting", json!({}), json!([]));
    deleting.metadata.deletion_timestamp = Some(from(json!("2026-01-01T00:00:00Z")));
    let nodes = [
        deleting,
        node(
            "disrupted",
            json!({}),
            json!([{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]),
        ),
        node(
            "unmanaged",
            json!({"a": "b"}),
            json!([{"key": "x", "value": "y", "effect": "NoSchedule"}]),
        ),
        node(
            "managed-new",
            json!({"karpenter.sh/nodepool": "p"}),
            json!([]),
        ),
        node(
            "managed-ready",
            json!({"karpenter.sh/nodepool": "p", "karpenter.sh/initialized": "true"}),
            json!([]),
        ),
    ];
    let cluster = run(&ClusterObjects {
        nodes: &nodes,
        ..ClusterObjects::default()
    });
    let names: Vec<(&str, bool)> = cluster
        .nodes
        .iter()
        .map(|n| (&*n.name, n.initialized))
        .collect();
    assert_eq!(
        names,
        [
            ("unmanaged", true),
            ("managed-new", false),
            ("managed-ready", true)
        ]
    );
    let unmanaged = &cluster.nodes[0];
    assert_eq!(unmanaged.labels.get("a").map(|v| &**v), Some("b"));
    assert_eq!(unmanaged.taints[0].to_string(), "x=y:NoSchedule");
    assert_eq!(unmanaged.allocatable.to_string(), "{cpu: 2, memory: 4Gi}");
}

/// Issue 11 item 11: nodes left out for scheduling still count against their pool's limits.
#[test]
fn nodes_leaving_a_pool_hold_its_limits() {
    let mut deleting = node("deleting", json!({"karpenter.sh/nodepool": "p"}), json!([]));
    deleting.metadata.deletion_timestamp = Some(from(json!("2026-01-01T00:00:00Z")));
    let nodes = [
        deleting,
        node(
            "disrupted",
            json!({"karpenter.sh/nodepool": "p"}),
            json!([{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]),
        ),
        node(
            "unmanaged-deleting",
            json!({}),
            json!([{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]),
        ),
    ];
    let mut gone_claim = claim("gone", None);
    gone_claim.metadata.deletion_timestamp = Some(from(json!("2026-01-01T00:00:00Z")));
    gone_claim.metadata.labels =
        Some([("karpenter.sh/nodepool".to_owned(), "q".to_owned())].into());
    let claims = [gone_claim];
    let cluster = run(&ClusterObjects {
        nodes: &nodes,
        node_claims: &claims,
        ..ClusterObjects::default()
    });
    assert!(cluster.nodes.is_empty());
    let held = |pool: &str, r: &str| {
        cluster.limit_usage[pool]
            .get(&scheduling::resources::ResourceName::from(r))
            .map(|q| q.to_string())
    };
    assert_eq!(held("p", "cpu").as_deref(), Some("4"));
    assert_eq!(held("p", "nodes").as_deref(), Some("2"));
    assert_eq!(held("q", "nodes").as_deref(), Some("1"));
    assert_eq!(
        cluster.limit_usage.len(),
        2,
        "the unmanaged node holds nothing"
    );
}

fn claim(name: &str, node_name: Option<&str>) -> NodeClaim {
    from(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": "p"}},
        "spec": {
            "nodeClassRef": {"group": "karpenter.cluster.x-k8s.io", "kind": "ClusterAPINodeClass", "name": "d"},
            "requirements": [
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["small"]},
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a", "b"]}],
            "taints": [{"key": "t", "effect": "NoSchedule"}],
            "startupTaints": [{"key": "s", "effect": "NoSchedule"}]},
        "status": {"providerID": "docker://x", "nodeName": node_name,
            "capacity": {"cpu": "2", "memory": "8Gi", "pods": "110"},
            "allocatable": {"cpu": "1900m", "memory": "7Gi", "pods": "110"}}
    }))
}

#[test]
fn launched_node_claims_without_a_node_are_existing_nodes() {
    let claims = [claim("nc-1", None), claim("nc-2", Some("n2"))];
    let nodes = [node(
        "n2",
        json!({"karpenter.sh/nodepool": "p"}),
        json!([{"key": "s", "effect": "NoSchedule"}]),
    )];
    let cluster = run(&ClusterObjects {
        nodes: &nodes,
        node_claims: &claims,
        ..ClusterObjects::default()
    });
    assert_eq!(cluster.nodes.len(), 2);
    // n2 is uninitialized: its NodeClaim's startup taint does not count.
    assert_eq!(&*cluster.nodes[0].name, "n2");
    assert!(cluster.nodes[0].taints.is_empty());
    let nc = &cluster.nodes[1];
    assert_eq!(&*nc.name, "nc-1");
    assert!(!nc.initialized);
    assert_eq!(
        nc.labels
            .get("node.kubernetes.io/instance-type")
            .map(|v| &**v),
        Some("small")
    );
    assert!(!nc.labels.contains_key("topology.kubernetes.io/zone"));
    assert_eq!(nc.taints.len(), 1);
    assert_eq!(
        nc.allocatable.to_string(),
        "{cpu: 1900m, memory: 7Gi, pods: 110}"
    );
}

/// A Node its NodeClaim already names, whose registration labels are not in the cache yet,
/// is ours and uninitialized: its registration taints do not hide its room.
#[test]
fn a_node_named_by_a_node_claim_is_ours_before_registration_labels_it() {
    let claims = [claim("nc-1", Some("n1"))];
    let nodes = [node(
        "n1",
        json!({}),
        json!([{"key": "karpenter.sh/unregistered", "effect": "NoExecute"},
            {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]),
    )];
    let cluster = run(&ClusterObjects {
        nodes: &nodes,
        node_claims: &claims,
        ..ClusterObjects::default()
    });
    assert_eq!(
        cluster.nodes.len(),
        1,
        "the NodeClaim is not counted a second time"
    );
    assert_eq!(&*cluster.nodes[0].name, "n1");
    assert!(!cluster.nodes[0].initialized);
    assert!(
        cluster.nodes[0].taints.is_empty(),
        "{:?}",
        cluster.nodes[0].taints
    );
}

#[test]
fn bound_non_terminal_pods_and_namespaces_are_read() {
    let pods: Vec<core::Pod> = vec![
        from(
            json!({"metadata": {"name": "a", "namespace": "x"}, "spec": {"nodeName": "n", "containers": []}}),
        ),
        from(
            json!({"metadata": {"name": "done", "namespace": "x"}, "spec": {"nodeName": "n", "containers": []},
            "status": {"phase": "Succeeded"}}),
        ),
        from(
            json!({"metadata": {"name": "pending", "namespace": "x"}, "spec": {"containers": []}}),
        ),
    ];
    let namespaces: Vec<core::Namespace> = vec![from(
        json!({"metadata": {"name": "x", "labels": {"env": "prod"}}}),
    )];
    let cluster = run(&ClusterObjects {
        pods: &pods.iter().cloned().map(Arc::new).collect::<Vec<_>>(),
        namespaces: &namespaces,
        ..ClusterObjects::default()
    });
    let names: Vec<&str> = cluster.pods.iter().map(|p| &*p.name).collect();
    assert_eq!(names, ["a"]);
    assert_eq!(
        cluster.namespaces["x"].get("env").map(|v| &**v),
        Some("prod")
    );
}

fn daemon_set() -> DaemonSet {
    from(json!({
        "metadata": {"name": "agent", "namespace": "kube-system", "uid": "ds-uid"},
        "spec": {"selector": {}, "template": {"metadata": {"labels": {"app": "agent"}}, "spec": {
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]}]}}},
            "containers": [{"name": "c", "resources": {"limits": {"cpu": "100m", "memory": "64Mi"},
                "requests": {"memory": "32Mi"}}}]}}}
    }))
}

#[test]
fn daemonsets_without_pods_get_one_from_their_template_with_limits_as_requests() {
    let cluster = run(&ClusterObjects {
        daemon_sets: &[daemon_set()],
        ..ClusterObjects::default()
    });
    assert_eq!(cluster.daemonset_pods.len(), 1);
    let pod = &cluster.daemonset_pods[0];
    assert_eq!(pod.key(), "kube-system/agent");
    assert_eq!(
        pod.requests.to_string(),
        "{cpu: 100m, memory: 32Mi, pods: 1}"
    );
    assert_eq!(pod.required_node_affinity.len(), 1);
}

#[test]
fn daemonsets_use_their_newest_pod_with_the_template_affinity() {
    let owned = |name: &str, created: &str, cpu: &str| -> core::Pod {
        from(json!({
            "metadata": {"name": name, "namespace": "kube-system", "uid": name,
                "creationTimestamp": created,
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent",
                    "uid": "ds-uid", "controller": true}]},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}
        }))
    };
    let pods = [
        owned("old", "2026-01-01T00:00:00Z", "1"),
        owned("new", "2026-02-01T00:00:00Z", "200m"),
    ];
    let cluster = run(&ClusterObjects {
        pods: &pods.map(Arc::new),
        daemon_sets: &[daemon_set()],
        ..ClusterObjects::default()
    });
    let pod = &cluster.daemonset_pods[0];
    assert_eq!(&*pod.name, "new");
    assert!(pod.node_name.is_none());
    assert_eq!(pod.requests.to_string(), "{cpu: 200m, pods: 1}");
    assert_eq!(pod.required_node_affinity.len(), 1);
}

#[test]
fn bad_quantities_skip_the_object_with_a_warning() {
    let mut bad = node("bad", json!({}), json!([]));
    if let Some(status) = bad.status.as_mut() {
        status.allocatable = Some(BTreeMap::from([(
            "cpu".to_owned(),
            K8sQuantity("lots".into()),
        )]));
    }
    let (cluster, warnings) = cluster(&ClusterObjects {
        nodes: &[bad],
        ..ClusterObjects::default()
    });
    assert!(cluster.nodes.is_empty());
    assert_eq!(warnings.len(), 1);
    assert!(warnings[0].contains("Node bad"), "{warnings:?}");
    assert!(warnings[0].contains("status.allocatable"), "{warnings:?}");
}

#[test]
fn a_cordoned_node_carries_the_unschedulable_taint_once() {
    let mut cordoned = node("cordoned", json!({}), json!([]));
    let mut tainted = node(
        "tainted",
        json!({}),
        json!([{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]),
    );
    for n in [&mut cordoned, &mut tainted] {
        n.spec.get_or_insert_with(Default::default).unschedulable = Some(true);
    }
    let nodes = [cordoned, tainted, node("open", json!({}), json!([]))];
    let cluster = run(&ClusterObjects {
        nodes: &nodes,
        ..ClusterObjects::default()
    });
    let taints: Vec<(String, Vec<String>)> = cluster
        .nodes
        .iter()
        .map(|n| {
            (
                n.name.to_string(),
                n.taints.iter().map(ToString::to_string).collect(),
            )
        })
        .collect();
    let cordon = || vec!["node.kubernetes.io/unschedulable:NoSchedule".to_owned()];
    assert_eq!(
        taints,
        vec![
            ("cordoned".to_owned(), cordon()),
            ("tainted".to_owned(), cordon()),
            ("open".to_owned(), vec![]),
        ]
    );
}
