#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::json;

use super::*;

fn node_pool(name: &str, spec: serde_json::Value) -> api::NodePool {
    serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": name}, "spec": spec
    }))
    .unwrap()
}

fn spec(class_kind: &str, class: &str, requirements: serde_json::Value) -> serde_json::Value {
    json!({"template": {"spec": {
        "nodeClassRef": {"group": NODE_CLASS_GROUP, "kind": class_kind, "name": class},
        "requirements": requirements}}})
}

fn md(name: &str, zone: &str, price: &str) -> MachineDeployment {
    serde_json::from_value(json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment",
        "metadata": {"name": name, "namespace": "capi",
            "labels": {"node.cluster.x-k8s.io/karpenter-member": ""},
            "annotations": {
                "capacity.cluster-autoscaler.kubernetes.io/labels": "node.kubernetes.io/instance-type=m",
                "karpenter.cluster.x-k8s.io/price": price}},
        "spec": {"clusterName": "c", "selector": {}, "template": {"spec": {
            "clusterName": "c", "failureDomain": zone, "bootstrap": {},
            "infrastructureRef": {"kind": "DockerMachineTemplate", "name": "m"}}}}
    }))
    .unwrap()
}

fn node_class(name: &str) -> ClusterAPINodeClass {
    serde_json::from_value(json!({
        "apiVersion": "karpenter.cluster.x-k8s.io/v1alpha1", "kind": "ClusterAPINodeClass",
        "metadata": {"name": name}, "spec": {"evictionHard": {}}
    }))
    .unwrap()
}

fn template() -> serde_json::Value {
    json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "DockerMachineTemplate",
        "metadata": {"name": "m", "namespace": "capi"},
        "status": {"capacity": {"cpu": "4", "memory": "16Gi"}}})
}

fn catalogues_of_default() -> Catalogues {
    let (catalogues, problems) = catalogues(
        &[node_class("default")],
        &[md("m-a", "a", "0.2"), md("m-b", "b", "0.1")],
        &[template()],
        &Scope::everywhere(),
        &BTreeMap::new(),
    );
    assert!(problems.is_empty(), "{problems:?}");
    catalogues
}

#[test]
fn catalogues_read_capacity_from_the_matched_template() {
    let catalogues = catalogues_of_default();
    let catalogue = catalogues["default"].as_ref().unwrap();
    let entry = catalogue.get("m").unwrap();
    assert_eq!(
        entry.instance_type().capacity().to_string(),
        "{cpu: 4, memory: 16Gi, pods: 110}"
    );
    let mds: Vec<String> = entry
        .offerings()
        .map(|(_, origin)| origin.machine_deployment.to_string())
        .collect();
    assert_eq!(mds, ["capi/m-a", "capi/m-b"]);
}

#[test]
fn template_matching_uses_kind_name_and_the_md_namespace() {
    let md = md("m-a", "a", "0.1");
    let mut other_ns = template();
    other_ns["metadata"]["namespace"] = json!("elsewhere");
    let mut other_kind = template();
    other_kind["kind"] = json!("AWSMachineTemplate");
    assert!(infrastructure_template(&md, &[other_ns, other_kind]).is_none());
    assert!(infrastructure_template(&md, &[template()]).is_some());
}

#[test]
fn a_deleting_node_class_has_no_catalogue() {
    let mut class = node_class("gone");
    class.metadata.deletion_timestamp =
        Some(serde_json::from_value(json!("2026-01-01T00:00:00Z")).unwrap());
    let (catalogues, problems) =
        catalogues(&[class], &[], &[], &Scope::everywhere(), &BTreeMap::new());
    assert!(catalogues["gone"].is_err());
    assert_eq!(problems.len(), 1);
}

#[test]
fn node_pools_carry_requirements_labels_taints_limits_and_weight() {
    let catalogues = catalogues_of_default();
    let mut s = spec(
        NODE_CLASS_KIND,
        "default",
        json!([{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a", "b"], "minValues": 2}]),
    );
    s["weight"] = json!(7);
    s["limits"] = json!({"cpu": "10"});
    s["template"]["metadata"] = json!({"labels": {"team": "x"}});
    s["template"]["spec"]["taints"] = json!([{"key": "gpu", "effect": "NoSchedule"}]);
    s["template"]["spec"]["startupTaints"] =
        json!([{"key": "init", "value": "1", "effect": "NoExecute"}]);
    let (pools, dropped) = node_pools(
        &[node_pool("p", s)],
        &catalogues,
        &WellKnownLabels::cluster_api(),
    );
    assert!(dropped.is_empty(), "{dropped:?}");
    let pool = &pools[0];
    assert_eq!(&*pool.name, "p");
    assert_eq!(pool.weight, 7);
    assert_eq!(pool.instance_types.len(), 1);
    let zone = pool
        .requirements
        .get("topology.kubernetes.io/zone")
        .unwrap();
    assert_eq!(zone.min_values(), Some(2));
    assert_eq!(pool.labels.get("team").map(|v| &**v), Some("x"));
    assert_eq!(pool.labels.get(NODECLASS).map(|v| &**v), Some("default"));
    assert_eq!(pool.taints[0].to_string(), "gpu:NoSchedule");
    assert_eq!(pool.startup_taints[0].to_string(), "init=1:NoExecute");
    assert_eq!(pool.limits.as_ref().unwrap().to_string(), "{cpu: 10}");
}

#[test]
fn unusable_node_pools_are_dropped_with_a_reason() {
    let catalogues = catalogues_of_default();
    let mut deleting = node_pool("deleting", spec(NODE_CLASS_KIND, "default", json!([])));
    deleting.metadata.deletion_timestamp =
        Some(serde_json::from_value(json!("2026-01-01T00:00:00Z")).unwrap());
    let mut static_spec = spec(NODE_CLASS_KIND, "default", json!([]));
    static_spec["replicas"] = json!(3);
    let pools = [
        deleting,
        node_pool("static", static_spec),
        node_pool("foreign", spec("EC2NodeClass", "default", json!([]))),
        node_pool("missing", spec(NODE_CLASS_KIND, "nope", json!([]))),
        node_pool(
            "restricted",
            spec(
                NODE_CLASS_KIND,
                "default",
                json!([{"key": "kubernetes.io/hostname", "operator": "Exists"}]),
            ),
        ),
        node_pool("ok", spec(NODE_CLASS_KIND, "default", json!([]))),
    ];
    let (kept, dropped) = node_pools(&pools, &catalogues, &WellKnownLabels::cluster_api());
    assert_eq!(kept.len(), 1);
    assert_eq!(&*kept[0].name, "ok");
    let reasons: Vec<(&str, &str)> = dropped
        .iter()
        .map(|d| (d.name.as_str(), d.reason.as_str()))
        .collect();
    assert_eq!(reasons.len(), 5, "{reasons:?}");
    assert!(reasons[0].1.contains("being deleted"));
    assert!(reasons[1].1.contains("static"));
    assert!(reasons[2].1.contains("is not a"));
    assert!(reasons[3].1.contains("not found"));
    assert!(reasons[4].1.contains("requirements[0]"), "{}", reasons[4].1);
}
