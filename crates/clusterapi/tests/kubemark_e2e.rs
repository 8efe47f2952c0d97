//! Upstream's kubemark end-to-end MachineDeployment (spec §8.7) becomes the instance type
//! `kubemark-0` that the e2e NodePool (arch amd64, `node.cluster.x-k8s.io` workload-target,
//! on-demand) can launch, with the capacity, labels and offering the e2e expects.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::collections::BTreeMap;
use std::path::PathBuf;

use api::MachineDeployment;
use api::nodeclass::ClusterAPINodeClassSpec;
use clusterapi::{
    MachineDeploymentInput, NameSource, PriceSource, Scope, Unavailable, build_catalogue, select,
};
use scheduling::labels::WellKnownLabels;
use scheduling::quantity::Quantity;
use scheduling::requirements::{Requirement, Requirements};
use scheduling::resources::ResourceName;

fn kubemark_md() -> MachineDeployment {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/kubemark-machine-deployment.yaml");
    serde_norway::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn q(text: &str) -> Quantity {
    Quantity::parse(text).unwrap()
}

/// The e2e NodeClass: `spec: {}`.
fn default_nodeclass() -> ClusterAPINodeClassSpec {
    ClusterAPINodeClassSpec::default()
}

#[test]
fn the_kubemark_md_is_selected_by_the_empty_nodeclass_in_its_cluster() {
    let md = kubemark_md();
    let in_cluster = Scope {
        namespace: Some("default".into()),
        cluster_name: Some("km-cp".into()),
    };
    assert_eq!(select([&md], None, &in_cluster).unwrap().len(), 1);
    let elsewhere = Scope {
        namespace: None,
        cluster_name: Some("other".into()),
    };
    assert!(select([&md], None, &elsewhere).unwrap().is_empty());
}

#[test]
fn the_kubemark_md_becomes_instance_type_kubemark_0() {
    let md = kubemark_md();
    let catalogue =
        build_catalogue(&default_nodeclass(), &[MachineDeploymentInput::new(&md)]).unwrap();
    assert!(
        catalogue.problems().is_empty(),
        "{:?}",
        catalogue.problems()
    );
    assert_eq!(catalogue.entries().len(), 1);
    let entry = catalogue.get("kubemark-0").unwrap();
    assert_eq!(entry.name_source(), NameSource::Label);

    let capacity = entry.instance_type().capacity();
    let expected_capacity = [
        (ResourceName::CPU, "2"),
        (ResourceName::MEMORY, "4G"),
        (ResourceName::EPHEMERAL_STORAGE, "100Gi"),
        (ResourceName::PODS, "110"),
    ];
    assert_eq!(capacity.len(), expected_capacity.len());
    for (resource, quantity) in expected_capacity {
        assert_eq!(capacity.get(&resource), Some(q(quantity)), "{resource}");
    }
    // Kubelet default eviction thresholds: 100Mi of memory, 10% of the disk.
    let allocatable = entry.instance_type().allocatable();
    assert_eq!(
        allocatable.get(&ResourceName::MEMORY),
        Some(q("4G").saturating_sub(q("100Mi")))
    );
    assert_eq!(
        allocatable.get(&ResourceName::EPHEMERAL_STORAGE),
        Some(q("90Gi"))
    );

    let expected_labels: BTreeMap<String, String> = [
        ("kubernetes.io/arch", "amd64"),
        ("kubernetes.io/os", "linux"),
        ("node.kubernetes.io/instance-type", "kubemark-0"),
        ("node.cluster.x-k8s.io", "workload-target"),
        ("karpenter.cluster.x-k8s.io/instance-cpu", "2"),
        ("karpenter.cluster.x-k8s.io/instance-memory", "3814"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    assert_eq!(entry.labels(), &expected_labels);

    let offerings: Vec<_> = entry.offerings().collect();
    assert_eq!(offerings.len(), 1);
    let (offering, origin) = offerings[0];
    assert_eq!(offering.zone(), Some("us-east-1a"));
    assert_eq!(offering.capacity_type(), Some("on-demand"));
    assert_eq!(offering.price, 0.5);
    assert!(offering.available);
    assert_eq!(origin.price_source, PriceSource::LegacyAnnotation);
    assert_eq!(
        origin.machine_deployment.to_string(),
        "default/km-wl-kubemark-md-0"
    );
    let node_labels = entry.node_labels(origin);
    assert_eq!(node_labels["topology.kubernetes.io/zone"], "us-east-1a");
    assert_eq!(node_labels["karpenter.sh/capacity-type"], "on-demand");
}

#[test]
fn the_e2e_nodepool_requirements_are_compatible_with_kubemark_0() {
    let md = kubemark_md();
    let catalogue =
        build_catalogue(&default_nodeclass(), &[MachineDeploymentInput::new(&md)]).unwrap();
    let instance_type = catalogue.instance_types().remove(0);
    let nodepool: Requirements = [
        Requirement::in_values("kubernetes.io/arch", ["amd64"]),
        Requirement::in_values("node.cluster.x-k8s.io", ["workload-target"]),
        Requirement::in_values("karpenter.sh/capacity-type", ["on-demand"]),
    ]
    .into_iter()
    .collect();
    let well_known = WellKnownLabels::cluster_api();
    assert!(nodepool.is_compatible(instance_type.requirements(), &well_known));
    assert!(instance_type.has_compatible_offering(&nodepool, &well_known));
}

#[test]
fn the_kubemark_md_at_its_max_size_of_10_has_no_available_offering() {
    let mut md = kubemark_md();
    md.spec.replicas = Some(8);
    let input = MachineDeploymentInput::new(&md).with_in_flight(2);
    let catalogue = build_catalogue(&default_nodeclass(), &[input]).unwrap();
    let (offering, origin) = catalogue.entries()[0].offerings().next().unwrap();
    assert!(!offering.available);
    assert_eq!(
        origin.unavailable,
        Some(Unavailable::AtMaxSize {
            replicas: 8,
            in_flight: 2,
            max_size: 10
        })
    );
}
