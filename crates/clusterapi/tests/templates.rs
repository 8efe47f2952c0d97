//! The live provider reads infrastructure templates: a MachineDeployment without capacity
//! annotations is described by its template's `status.capacity` (as `plan` does from a dump),
//! in instance types, creates and the NodeClass status.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use std::time::Duration;

use api::{ClusterAPINodeClass, NodePool};
use cloudprovider::CloudProvider;
use clusterapi::nodeclass_status::{Context, StatusConfig};
use clusterapi::{ClusterApiProvider, ProviderConfig};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use serde_json::json;
use world::WorldConfig;
use world::crds::install;

fn template_resource() -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk(
        "infrastructure.cluster.x-k8s.io",
        "v1beta1",
        "DockerMachineTemplate",
    ))
}

/// The DockerMachineTemplate CRD (permissive, with a status subresource) and the template `t`
/// with `status.capacity` 8 CPUs / 32Gi.
async fn template(management: &kube::Client) {
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "dockermachinetemplates.infrastructure.cluster.x-k8s.io"},
        "spec": {
            "group": "infrastructure.cluster.x-k8s.io",
            "scope": "Namespaced",
            "names": {"plural": "dockermachinetemplates", "singular": "dockermachinetemplate",
                "kind": "DockerMachineTemplate", "listKind": "DockerMachineTemplateList"},
            "versions": [{"name": "v1beta1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                }}}}],
        },
    }))
    .unwrap();
    install(management, &[crd]).await.unwrap();
    let api: Api<DynamicObject> =
        Api::namespaced_with(management.clone(), "default", &template_resource());
    let t: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "DockerMachineTemplate",
        "metadata": {"name": "t", "namespace": "default"},
        "spec": {"template": {"spec": {}}},
    }))
    .unwrap();
    api.create(&PostParams::default(), &t).await.unwrap();
    api.patch_status(
        "t",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {
            "capacity": {"cpu": "8", "memory": "32Gi"},
            "nodeInfo": {"architecture": "arm64", "operatingSystem": "linux"},
        }})),
    )
    .await
    .unwrap();
}

fn pool() -> NodePool {
    serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {"template": {"spec": {
            "nodeClassRef": {"group": "karpenter.cluster.x-k8s.io",
                "kind": "ClusterAPINodeClass", "name": "default"},
            "requirements": [],
        }}},
    }))
    .unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_machine_deployment_without_capacity_annotations_is_described_by_its_template() {
    let world = support::world(WorldConfig::default()).await;
    template(&world.management_client()).await;
    support::md("md")
        .without_capacity_annotations()
        .create(&world)
        .await;
    let p = ClusterApiProvider::new(
        world.management_client(),
        world.workload_client(),
        ProviderConfig::default(),
    );

    let its = p.get_instance_types(&pool()).await.unwrap();
    assert_eq!(its.len(), 1, "{its:?}");
    let cpu = its[0]
        .capacity()
        .iter()
        .find(|(k, _)| k.as_str() == "cpu")
        .map(|(_, q)| q.to_string());
    assert_eq!(cpu.as_deref(), Some("8"));

    let nc = support::node_claim(&world, "nc", json!([])).await;
    let launch = p.create(&nc).await.unwrap();
    assert_eq!(launch.instance_type, "md");
    assert_eq!(support::replicas(&world, "md").await, 1);
    let arch = launch.labels.get("kubernetes.io/arch").cloned();
    assert_eq!(arch.as_deref(), Some("arm64"), "{:?}", launch.labels);

    // The NodeClass status controller reads the same templates.
    let ctx = Context::new(
        world.workload_client(),
        world.management_client(),
        StatusConfig {
            templates: Some(p.templates()),
            ..StatusConfig::default()
        },
    );
    let classes: Api<ClusterAPINodeClass> = Api::all(world.workload_client());
    ctx.reconcile(&classes.get("default").await.unwrap())
        .await
        .unwrap();
    let status = classes.get("default").await.unwrap().status.unwrap();
    let ready = status
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    assert_eq!(
        ready.status,
        api::common::ConditionStatus::True,
        "{ready:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_template_kind_that_is_not_served_reads_as_no_template_without_waiting_again() {
    let world = support::world(WorldConfig::default()).await;
    support::md("md").create(&world).await;
    let p = ClusterApiProvider::new(
        world.management_client(),
        world.workload_client(),
        ProviderConfig::default(),
    );
    // DockerMachineTemplate is not installed: the annotations alone describe the MD.
    let started = tokio::time::Instant::now();
    assert_eq!(p.get_instance_types(&pool()).await.unwrap().len(), 1);
    let first = started.elapsed();
    assert!(first < Duration::from_secs(10), "waited {first:?}");
    let again = tokio::time::Instant::now();
    assert_eq!(p.get_instance_types(&pool()).await.unwrap().len(), 1);
    assert_eq!(again.elapsed(), Duration::ZERO, "no second wait");
}
