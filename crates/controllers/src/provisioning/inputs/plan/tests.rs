#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::collections::BTreeMap;

use clusterapi::Scope;
use scheduling::scheduler::{Cluster, Options, Scheduler};
use serde_json::json;

use super::*;
use crate::provisioning::inputs::{catalogues, node_pools, validate_pod};

fn from<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> T {
    serde_json::from_value(value).unwrap()
}

fn md(name: &str, zone: &str, price: &str) -> api::MachineDeployment {
    from(json!({
        "metadata": {"name": name, "namespace": "capi",
            "labels": {"node.cluster.x-k8s.io/karpenter-member": ""},
            "annotations": {
                "capacity.cluster-autoscaler.kubernetes.io/cpu": "4",
                "capacity.cluster-autoscaler.kubernetes.io/memory": "16Gi",
                "capacity.cluster-autoscaler.kubernetes.io/labels": "node.kubernetes.io/instance-type=m",
                "karpenter.cluster.x-k8s.io/price": price}},
        "spec": {"clusterName": "c", "selector": {}, "template": {"spec": {
            "clusterName": "c", "failureDomain": zone, "bootstrap": {}, "infrastructureRef": {}}}}
    }))
}

fn pod(name: &str, cpu: &str) -> k8s_openapi::api::core::v1::Pod {
    from(
        json!({"metadata": {"name": name, "namespace": "default", "uid": name},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}),
    )
}

#[test]
fn plans_name_pools_pods_and_the_cheapest_machine_deployment() {
    let well_known = WellKnownLabels::cluster_api();
    let classes: Vec<api::ClusterAPINodeClass> = vec![from(json!({
        "metadata": {"name": "d"}, "spec": {"evictionHard": {}}}))];
    let (catalogues, _) = catalogues(
        &classes,
        &[
            md("m-a", "a", "0.30"),
            md("m-b", "b", "0.20"),
            md("m-c", "c", "0.25"),
        ],
        &[],
        &Scope::everywhere(),
        &BTreeMap::new(),
    );
    let ref_ =
        json!({"group": "karpenter.cluster.x-k8s.io", "kind": "ClusterAPINodeClass", "name": "d"});
    let api_pools: Vec<api::NodePool> = vec![
        from(
            json!({"metadata": {"name": "general"}, "spec": {"template": {"spec": {
            "nodeClassRef": ref_, "requirements": []}}}}),
        ),
        from(
            json!({"metadata": {"name": "static"}, "spec": {"replicas": 1, "template": {"spec": {
            "nodeClassRef": ref_, "requirements": []}}}}),
        ),
    ];
    let (pools, dropped) = node_pools(&api_pools, &catalogues, &well_known);
    let pods: Vec<_> = [pod("small", "1"), pod("big", "16")]
        .iter()
        .map(|p| validate_pod(p, &well_known).unwrap())
        .collect();
    let scheduler = Scheduler::new(
        &pools,
        &Cluster::default(),
        &pods,
        Options {
            well_known: well_known.clone(),
            ..Options::default()
        },
    );
    let results = scheduler.solve(&pods);
    let ignored = [IgnoredPod {
        uid: "x".into(),
        pod: "default/x".into(),
        reason: crate::provisioning::inputs::IgnoreReason::AvoidsKarpenter,
    }];
    let plan = Plan::build(
        &results,
        &PlanContext {
            pods: &pods,
            ignored_pods: &ignored,
            dropped_pools: &dropped,
            scheduler_dropped: &[],
            node_pools: &api_pools,
            catalogues: &catalogues,
            well_known: &well_known,
            overlays: None,
        },
    );
    assert_eq!(plan.node_claims.len(), 1);
    let claim = &plan.node_claims[0];
    assert_eq!(claim.node_pool, "general");
    assert_eq!(claim.node_class, "d");
    assert_eq!(claim.instance_type, "m");
    assert_eq!(claim.machine_deployment.as_deref(), Some("capi/m-b"));
    assert_eq!(claim.zone.as_deref(), Some("b"));
    assert_eq!(claim.price, Some(0.20));
    assert_eq!(claim.pods, ["default/small"]);
    assert_eq!(claim.requests["cpu"], "1");
    assert_eq!(plan.unschedulable.len(), 2);
    assert_eq!(plan.unschedulable[0].pod, "default/big");
    assert!(
        plan.unschedulable[0]
            .reason
            .contains("nodepools not considered: \"static\"")
    );
    assert_eq!(plan.unschedulable[1].pod, "default/x");
    assert_eq!(plan.ignored_node_pools.len(), 1);
    let json = serde_json::to_value(&plan).unwrap();
    let keys: Vec<&String> = json.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["bindings", "nodeClaims", "unschedulable"]);
    assert_eq!(json["nodeClaims"][0]["machineDeployment"], "capi/m-b");
}
