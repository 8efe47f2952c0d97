//! The provider in either Cluster API version: discovery picks what the management cluster
//! prefers (v1beta2 on a v1.11+ cluster, which also serves v1beta1 by conversion) and honours
//! `CAPI_VERSION`; a provider speaking v1beta1 launches, reads templates and removes exactly
//! as one speaking v1beta2 does.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use api::{CapiVersion, Machine, MachineDeployment};
use cloudprovider::CloudProvider;
use clusterapi::discovery::{CapiSelection, DiscoveryError, discover};
use clusterapi::{ClusterApiProvider, ProviderConfig};
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use serde_json::json;
use world::WorldConfig;

fn selection(version: Option<&str>) -> CapiSelection {
    CapiSelection {
        group: None,
        version: version.map(str::to_owned),
    }
}

#[tokio::test(start_paused = true)]
async fn discovery_prefers_v1beta2_and_honours_capi_version() {
    let world = support::world(WorldConfig::default()).await;
    let m = world.management_client();
    assert_eq!(
        discover(&m, &selection(None)).await,
        Ok(CapiVersion::v1beta2())
    );
    assert_eq!(
        discover(&m, &selection(Some("v1beta1"))).await,
        Ok(CapiVersion::v1beta1())
    );
    match discover(&m, &selection(Some("v1alpha4"))).await {
        Err(DiscoveryError::VersionNotServed { served, .. }) => {
            assert!(served.contains(&"v1beta2".to_owned()), "{served:?}");
            assert!(served.contains(&"v1beta1".to_owned()), "{served:?}");
        }
        other => panic!("{other:?}"),
    }
    let elsewhere = CapiSelection {
        group: Some("capi.example.com".into()),
        version: None,
    };
    assert_eq!(
        discover(&m, &elsewhere).await,
        Err(DiscoveryError::GroupNotServed {
            group: "capi.example.com".into()
        })
    );
}

/// A MachineDeployment written in v1beta1's shape (as a Cluster API v1.10 user has them).
async fn v1beta1_md(world: &world::World, name: &str) {
    let resource = ApiResource {
        group: "cluster.x-k8s.io".into(),
        version: "v1beta1".into(),
        api_version: "cluster.x-k8s.io/v1beta1".into(),
        kind: "MachineDeployment".into(),
        plural: "machinedeployments".into(),
    };
    let md: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "cluster.x-k8s.io/v1beta1",
        "kind": "MachineDeployment",
        "metadata": {"name": name, "namespace": "default",
            "labels": {"node.cluster.x-k8s.io/karpenter-member": "",
                "cluster.x-k8s.io/cluster-name": "c1"},
            "annotations": {"capacity.cluster-autoscaler.kubernetes.io/cpu": "4",
                "capacity.cluster-autoscaler.kubernetes.io/memory": "16Gi",
                "karpenter.cluster.x-k8s.io/price": "1.0"}},
        "spec": {
            "clusterName": "c1",
            "replicas": 0,
            "strategy": {"type": "OnDelete"},
            "selector": {"matchLabels": {"pool": name}},
            "template": {
                "metadata": {"labels": {"pool": name}},
                "spec": {"clusterName": "c1", "bootstrap": {"dataSecretName": "boot"},
                    "infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                        "kind": "DockerMachineTemplate", "name": "t"}},
            },
        },
    }))
    .unwrap();
    Api::<DynamicObject>::namespaced_with(world.management_client(), "default", &resource)
        .create(&PostParams::default(), &md)
        .await
        .unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_provider_speaking_v1beta1_launches_and_removes_the_machine_it_chose() {
    let world = support::world(WorldConfig::default()).await;
    v1beta1_md(&world, "old").await;
    let p = ClusterApiProvider::new(
        world.management_client(),
        world.workload_client(),
        ProviderConfig {
            capi: CapiVersion::v1beta1(),
            ..ProviderConfig::default()
        },
    );
    assert_eq!(p.capi(), &CapiVersion::v1beta1());
    // The v1beta1 object reads the same through either version.
    for v in [CapiVersion::v1beta1(), CapiVersion::v1beta2()] {
        let md =
            Api::<MachineDeployment>::namespaced_with(world.management_client(), "default", &v)
                .get("old")
                .await
                .unwrap();
        assert!(md.spec.is_on_delete(), "{v}: {:?}", md.spec);
        assert_eq!(
            md.spec.template.spec.infrastructure_ref.group(),
            Some("infrastructure.cluster.x-k8s.io"),
            "{v}"
        );
    }

    let a = support::node_claim(&world, "a", json!([])).await;
    let b = support::node_claim(&world, "b", json!([])).await;
    let la = p.create(&a).await.unwrap();
    let lb = p.create(&b).await.unwrap();
    assert!(la.instance_type.contains("old"), "{}", la.instance_type);
    assert_eq!(support::replicas(&world, "old").await, 2);
    let machines = support::wait_machines(&world, "old", 2).await;
    assert!(
        machines
            .iter()
            .all(|m| support::label(m, "node.cluster.x-k8s.io/karpenter-member").is_some()),
        "both Machines claimed: {machines:?}"
    );

    // Remove a's Machine: only it is marked, replicas go 2 → 1, b's Machine stays.
    let a = Api::<api::NodeClaim>::all(world.workload_client())
        .get("a")
        .await
        .unwrap();
    p.delete(&a).await.unwrap();
    assert_eq!(support::replicas(&world, "old").await, 1);
    let gone: Option<Machine> = support::machine(&world, &la.machine.name).await;
    assert!(gone.as_ref().is_none_or(support::marked), "{gone:?}");
    let kept = support::machine(&world, &lb.machine.name).await.unwrap();
    assert!(!support::marked(&kept), "{kept:?}");
}
