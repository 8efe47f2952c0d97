//! `karpenter-capi doctor` on both backends: a working installation has no blocker, and each
//! broken setup gets its finding — CRDs not installed, a MachineDeployment without the opt-in
//! label, a NodePool whose requirements match no instance type, a NodePool naming a missing
//! NodeClass, a MachineDeployment without a shape, one shared with the cluster-autoscaler; a
//! stand-alone MachineSet reported as a node group.
//! The same binary's command line is exercised against `sim serve` in `cli.rs`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use karpenter_capi::doctor::{Options, Report, Severity, doctor};
use karpenter_capi::scenario;
use serde_json::{Value, json};
use world::{Backend, World};

fn md(name: &str, extra_annotations: Value, member: bool) -> Value {
    let mut annotations = json!({
        "capacity.cluster-autoscaler.kubernetes.io/cpu": "4",
        "capacity.cluster-autoscaler.kubernetes.io/memory": "16Gi",
        "capacity.cluster-autoscaler.kubernetes.io/labels":
            format!("node.kubernetes.io/instance-type={name},topology.kubernetes.io/zone=zone-a"),
        "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size": "20",
        "karpenter.cluster.x-k8s.io/price": "0.2",
    });
    for (k, v) in extra_annotations.as_object().unwrap() {
        if v.is_null() {
            annotations.as_object_mut().unwrap().remove(k);
        } else {
            annotations[k] = v.clone();
        }
    }
    let labels = if member {
        json!({"node.cluster.x-k8s.io/karpenter-member": ""})
    } else {
        json!({})
    };
    json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment",
        "metadata": {"name": name, "namespace": "default", "labels": labels,
            "annotations": annotations},
        "spec": {"clusterName": "doctor", "replicas": 0,
            "selector": {"matchLabels": {"pool": name}},
            "template": {"metadata": {"labels": {"pool": name}},
                "spec": {"clusterName": "doctor", "bootstrap": {"dataSecretName": "boot"},
                    "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                        "kind": "DockerMachineTemplate", "name": name}}}},
    })
}

fn node_class() -> Value {
    json!({"apiVersion": "karpenter.cluster.x-k8s.io/v1alpha1", "kind": "ClusterAPINodeClass",
        "metadata": {"name": "default"}, "spec": {}})
}

fn node_pool(name: &str, class: &str, requirements: Value) -> Value {
    json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
        "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.cluster.x-k8s.io",
            "kind": "ClusterAPINodeClass", "name": class}, "requirements": requirements}}}})
}

/// A world on `backend` with the Karpenter CRDs (when `crds`), `mds` in the management
/// cluster and `objects` in the workload cluster; then `doctor` on it.
async fn examine(backend: Backend, crds: bool, mds: &[Value], objects: &[Value]) -> Report {
    let world = World::start_on(backend, karpenter_capi::chaos::world::fast_world_config(0))
        .await
        .unwrap();
    if crds {
        world::crds::install_karpenter_crds(&world.workload_client())
            .await
            .unwrap();
    }
    scenario::apply(&world.management_client(), mds)
        .await
        .unwrap();
    scenario::apply(&world.workload_client(), objects)
        .await
        .unwrap();
    let options = Options {
        lease: Some(("kube-system".into(), "karpenter-leader-election".into())),
        separate_management: backend == Backend::Sim,
        ..Options::default()
    };
    doctor(
        &world.workload_client(),
        &world.management_client(),
        &options,
    )
    .await
}

fn codes(report: &Report) -> Vec<(Severity, &'static str, String)> {
    report
        .findings
        .iter()
        .filter(|f| f.severity != Severity::Info)
        .map(|f| (f.severity, f.code, f.subject.clone()))
        .collect()
}

async fn a_working_installation_has_no_finding(backend: Backend) {
    let report = examine(
        backend,
        true,
        &[md("small", json!({}), true)],
        &[node_class(), node_pool("default", "default", json!([]))],
    )
    .await;
    assert!(codes(&report).is_empty(), "{}", report.render());
    assert!(report.ok);
    let small = &report.node_classes[0].machine_deployments[0];
    assert_eq!(small.instance_type.as_deref(), Some("small"));
    assert_eq!(small.zone, "zone-a");
    assert_eq!(report.node_pools[0].available_instance_types, ["small"]);
}

async fn each_broken_setup_gets_its_finding(backend: Backend) {
    // No Karpenter CRDs: the workload cluster's three are named, nothing else can be read.
    let report = examine(backend, false, &[md("small", json!({}), true)], &[]).await;
    let missing: Vec<String> = report
        .with_code("crd-missing")
        .map(|f| f.subject.clone())
        .collect();
    assert_eq!(
        missing,
        [
            "workload cluster nodepools.karpenter.sh",
            "workload cluster nodeclaims.karpenter.sh",
            "workload cluster clusterapinodeclasses.karpenter.cluster.x-k8s.io"
        ],
        "{}",
        report.render()
    );
    assert_eq!(report.exit_code(), 1);

    // The other mistakes, all at once: each is found on its own object.
    let report = examine(
        backend,
        true,
        &[
            md("small", json!({}), true),
            md("forgotten", json!({}), false),
            md(
                "shapeless",
                json!({"capacity.cluster-autoscaler.kubernetes.io/memory": null}),
                true,
            ),
            md(
                "shared",
                json!({"cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size": "1"}),
                true,
            ),
        ],
        &[
            node_class(),
            node_pool("default", "default", json!([])),
            node_pool(
                "arm",
                "default",
                json!([{"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}]),
            ),
            node_pool("typo", "defualt", json!([])),
        ],
    )
    .await;
    assert_eq!(
        codes(&report),
        [
            (
                Severity::Blocker,
                "nodepool-no-compatible-instance-types",
                "NodePool arm".to_owned()
            ),
            (
                Severity::Blocker,
                "nodepool-nodeclass-missing",
                "NodePool typo".to_owned()
            ),
            (
                Severity::Warning,
                "machine-deployment-excluded",
                "MachineDeployment default/shapeless".to_owned()
            ),
        ],
        "{}",
        report.render()
    );
    assert!(
        report
            .with_code("machine-deployment-excluded")
            .next()
            .unwrap()
            .message
            .contains("memory"),
        "{}",
        report.render()
    );
    assert_eq!(
        report.node_classes[0].machine_deployments.len(),
        3,
        "the unlabelled one is not selected"
    );

    // Only the unlabelled MachineDeployment: the NodeClass selects nothing and says why.
    let report = examine(
        backend,
        true,
        &[md("forgotten", json!({}), false)],
        &[node_class(), node_pool("default", "default", json!([]))],
    )
    .await;
    let finding = report
        .with_code("nodeclass-selects-nothing")
        .next()
        .unwrap();
    assert_eq!(finding.severity, Severity::Blocker);
    assert!(
        finding
            .hint
            .as_deref()
            .unwrap()
            .contains("default/forgotten"),
        "{}",
        report.render()
    );
}

async fn a_stand_alone_machine_set_is_reported_as_a_node_group(backend: Backend) {
    let mut set = md(
        "gpu",
        json!({"karpenter.cluster.x-k8s.io/price": "1.5"}),
        true,
    );
    set["kind"] = json!("MachineSet");
    // A MachineSet a MachineDeployment owns is not one, even labelled as a member.
    let mut owned = md("owned", json!({}), true);
    owned["kind"] = json!("MachineSet");
    owned["metadata"]["labels"]["cluster.x-k8s.io/deployment-name"] = json!("small");
    let report = examine(
        backend,
        true,
        &[md("small", json!({}), true), set, owned],
        &[node_class(), node_pool("default", "default", json!([]))],
    )
    .await;
    assert!(codes(&report).is_empty(), "{}", report.render());
    let groups: Vec<(&str, Option<&str>)> = report.node_classes[0]
        .machine_deployments
        .iter()
        .map(|g| (g.name.as_str(), g.instance_type.as_deref()))
        .collect();
    assert_eq!(
        groups,
        [
            ("default/small", Some("small")),
            ("MachineSet default/gpu", Some("gpu")),
        ],
        "{}",
        report.render()
    );
    let mut types = report.node_pools[0].available_instance_types.clone();
    types.sort();
    assert_eq!(types, ["gpu", "small"]);
}

world::backend_tests!(
    a_working_installation_has_no_finding,
    each_broken_setup_gets_its_finding,
    a_stand_alone_machine_set_is_reported_as_a_node_group,
);
