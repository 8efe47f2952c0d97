//! Behaviour of one MachineDeployment → instance type: capacity, labels, names, zones,
//! capacity types, taints.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use api::MachineDeployment;
use api::nodeclass::ClusterAPINodeClassSpec;
use api::well_known::capi::capacity;
use api::well_known::labels::{
    ARCH, CAPACITY_TYPE, INSTANCE_CPU, INSTANCE_MEMORY, INSTANCE_TYPE, OS, ZONE,
};
use scheduling::quantity::Quantity;
use scheduling::resources::ResourceName;
use scheduling::taints::{Taint, TaintEffect};

use super::derive::{derived_name, is_propagated};
use super::*;
use crate::testing::{MdBuilder, bare_nodeclass, md};

fn q(text: &str) -> Quantity {
    Quantity::parse(text).unwrap()
}

fn catalogue_of(nodeclass: &ClusterAPINodeClassSpec, mds: &[MachineDeployment]) -> Catalogue {
    let inputs: Vec<_> = mds.iter().map(MachineDeploymentInput::new).collect();
    build_catalogue(nodeclass, &inputs).unwrap()
}

/// The only entry of a catalogue of `md` alone, with no overhead.
fn only(md: MdBuilder) -> CatalogueEntry {
    let catalogue = catalogue_of(&bare_nodeclass(), &[md.build()]);
    assert!(
        catalogue.problems().is_empty(),
        "{:?}",
        catalogue.problems()
    );
    assert_eq!(catalogue.entries().len(), 1);
    catalogue.entries()[0].clone()
}

fn only_origin(entry: &CatalogueEntry) -> OfferingOrigin {
    let origins: Vec<_> = entry.offerings().map(|(_, o)| o.clone()).collect();
    assert_eq!(origins.len(), 1);
    origins[0].clone()
}

fn sized(name: &str) -> MdBuilder {
    md("default", name).shape("2", "4Gi")
}

#[test]
fn capacity_comes_from_the_annotations_with_pods_defaulting_to_110() {
    let entry = only(
        sized("md")
            .annotation(capacity::EPHEMERAL_DISK, "100Gi")
            .annotation(capacity::GPU_COUNT, "2")
            .annotation(capacity::GPU_TYPE, "nvidia.com/gpu"),
    );
    let capacity = entry.instance_type().capacity();
    assert_eq!(capacity.get(&ResourceName::CPU), Some(q("2")));
    assert_eq!(capacity.get(&ResourceName::MEMORY), Some(q("4Gi")));
    assert_eq!(
        capacity.get(&ResourceName::EPHEMERAL_STORAGE),
        Some(q("100Gi"))
    );
    assert_eq!(capacity.get(&ResourceName::PODS), Some(q("110")));
    assert_eq!(
        capacity.get(&ResourceName::new("nvidia.com/gpu")),
        Some(q("2"))
    );
}

#[test]
fn max_pods_sets_the_pod_capacity() {
    let entry = only(sized("md").annotation(capacity::MAX_PODS, "58"));
    assert_eq!(
        entry.instance_type().capacity().get(&ResourceName::PODS),
        Some(q("58"))
    );
}

#[test]
fn cpu_and_memory_are_required() {
    let catalogue = catalogue_of(
        &bare_nodeclass(),
        &[md("default", "cpu-only")
            .annotation(capacity::CPU, "2")
            .build()],
    );
    assert!(catalogue.entries().is_empty());
    let problems = catalogue.problems();
    assert_eq!(problems.len(), 1);
    assert_eq!(problems[0].annotation, capacity::MEMORY);
    assert!(
        problems[0].message.contains("no memory capacity"),
        "{}",
        problems[0].message
    );
}

#[test]
fn a_bad_annotation_excludes_the_md_with_a_problem_naming_md_and_annotation() {
    let catalogue = catalogue_of(
        &bare_nodeclass(),
        &[
            sized("good").build(),
            md("default", "bad").shape("2", "16GB").build(),
        ],
    );
    assert_eq!(catalogue.entries().len(), 1);
    assert_eq!(catalogue.problems().len(), 1);
    let problem = &catalogue.problems()[0];
    assert_eq!(
        (problem.namespace.as_str(), problem.name.as_str()),
        ("default", "bad")
    );
    assert_eq!(problem.annotation, capacity::MEMORY);
    let text = problem.to_string();
    assert!(
        text.contains("default/bad") && text.contains("16GB") && text.contains(capacity::MEMORY),
        "{text}"
    );
}

#[test]
fn only_capi_propagated_template_labels_are_kept() {
    for (key, kept) in [
        ("node-role.kubernetes.io/worker", true),
        ("prefixed.node-role.kubernetes.io/x", false),
        ("node-restriction.kubernetes.io/x", true),
        ("prefixed.node-restriction.kubernetes.io/x", true),
        ("node.cluster.x-k8s.io/x", true),
        ("prefixed.node.cluster.x-k8s.io/x", true),
        ("node.cluster.x-k8s.io", true),
        ("xnode.cluster.x-k8s.io/x", false),
        ("my.special.label/x", false),
        ("cluster.x-k8s.io/deployment-name", false),
        ("plain", false),
    ] {
        assert_eq!(is_propagated(key), kept, "{key}");
    }
    let entry = only(
        sized("md")
            .template_label("node.cluster.x-k8s.io", "workload-target")
            .template_label("cluster.x-k8s.io/cluster-name", "km-cp"),
    );
    assert_eq!(entry.labels()["node.cluster.x-k8s.io"], "workload-target");
    assert!(!entry.labels().contains_key("cluster.x-k8s.io/cluster-name"));
}

#[test]
fn the_labels_annotation_wins_over_propagated_labels() {
    let entry = only(
        sized("md")
            .template_label("node-role.kubernetes.io/worker", "template")
            .labels("node-role.kubernetes.io/worker=annotation,example.com/team=a"),
    );
    assert_eq!(
        entry.labels()["node-role.kubernetes.io/worker"],
        "annotation"
    );
    assert_eq!(entry.labels()["example.com/team"], "a");
}

#[test]
fn arch_and_os_default_to_amd64_and_linux() {
    let entry = only(sized("md"));
    assert_eq!(entry.labels()[ARCH], "amd64");
    assert_eq!(entry.labels()[OS], "linux");
    let arm = only(sized("arm").labels("kubernetes.io/arch=arm64"));
    assert_eq!(arm.labels()[ARCH], "arm64");
}

#[test]
fn requirements_cover_name_arch_os_zone_capacity_type_and_every_label() {
    let entry = only(
        sized("md")
            .labels("node.kubernetes.io/instance-type=small,topology.kubernetes.io/zone=z1")
            .template_label("node.cluster.x-k8s.io/pool", "p"),
    );
    let requirements = entry.instance_type().requirements();
    let single = |key: &str| {
        let values = requirements.get(key).unwrap().values();
        assert_eq!(values.len(), 1, "{key}");
        values[0].to_string()
    };
    assert_eq!(single(INSTANCE_TYPE), "small");
    assert_eq!(single(ARCH), "amd64");
    assert_eq!(single(OS), "linux");
    assert_eq!(single(ZONE), "z1");
    assert_eq!(single(CAPACITY_TYPE), "on-demand");
    assert_eq!(single("node.cluster.x-k8s.io/pool"), "p");
    assert_eq!(single(INSTANCE_CPU), "2");
    assert_eq!(single(INSTANCE_MEMORY), "4096");
}

#[test]
fn the_name_is_the_instance_type_label() {
    let entry = only(sized("md").labels("node.kubernetes.io/instance-type=m5.large"));
    assert_eq!(entry.name(), "m5.large");
    assert_eq!(entry.name_source(), NameSource::Label);
}

#[test]
fn without_an_instance_type_label_the_name_is_derived_stably_from_the_md() {
    let entry = only(sized("md-0"));
    assert_eq!(entry.name_source(), NameSource::Derived);
    let reference = MachineDeploymentRef::deployment("default", "md-0");
    assert_eq!(entry.name(), derived_name(&reference));
    assert!(
        entry.name().starts_with("default-md-0-"),
        "{}",
        entry.name()
    );
    assert_eq!(entry.labels()[INSTANCE_TYPE], entry.name());
    let other = MachineDeploymentRef::deployment("default-md", "0");
    assert_ne!(
        derived_name(&reference),
        derived_name(&other),
        "same prefix, other MD"
    );
    let set = MachineDeploymentRef::machine_set("default", "md-0");
    assert_ne!(
        derived_name(&reference),
        derived_name(&set),
        "a MachineSet named like a MachineDeployment"
    );
    assert!(derived_name(&set).starts_with("default-md-0-"));
}

#[test]
fn derived_names_are_valid_label_values_even_for_long_names() {
    let long = MachineDeploymentRef::deployment(&"n".repeat(63), &format!("{}.x", "m".repeat(200)));
    for reference in [long, MachineDeploymentRef::default()] {
        let name = derived_name(&reference);
        assert!(name.len() <= 63, "{name}");
        scheduling::labels::validate_label_value(&name).unwrap();
    }
}

#[test]
fn an_empty_instance_type_label_is_a_problem() {
    let catalogue = catalogue_of(
        &bare_nodeclass(),
        &[sized("md")
            .labels("node.kubernetes.io/instance-type=")
            .build()],
    );
    assert_eq!(catalogue.problems()[0].annotation, capacity::LABELS);
}

#[test]
fn the_zone_comes_from_labels_else_the_failure_domain_else_none() {
    let labelled = only(
        sized("a")
            .labels("topology.kubernetes.io/zone=z-label")
            .failure_domain("z-fd"),
    );
    assert_eq!(only_origin(&labelled).zone, "z-label");
    let from_failure_domain = only(sized("b").failure_domain("z-fd"));
    assert_eq!(only_origin(&from_failure_domain).zone, "z-fd");
    let (offering, _) = from_failure_domain.offerings().next().unwrap();
    assert_eq!(offering.zone(), Some("z-fd"));
    let origin = only_origin(&from_failure_domain);
    assert_eq!(from_failure_domain.node_labels(&origin)[ZONE], "z-fd");
    let unknown = only(sized("c"));
    let origin = only_origin(&unknown);
    assert_eq!(origin.zone, "");
    assert!(!unknown.node_labels(&origin).contains_key(ZONE));
    assert!(!unknown.labels().contains_key(ZONE), "zone is per offering");
}

#[test]
fn a_failure_domain_that_is_no_label_value_is_a_problem() {
    let catalogue = catalogue_of(
        &bare_nodeclass(),
        &[sized("md").failure_domain("zone a").build()],
    );
    assert_eq!(
        catalogue.problems()[0].annotation,
        "spec.template.spec.failureDomain"
    );
}

#[test]
fn the_capacity_type_defaults_to_on_demand_and_may_be_spot() {
    assert_eq!(only_origin(&only(sized("a"))).capacity_type, "on-demand");
    let spot = only(sized("b").labels("karpenter.sh/capacity-type=spot"));
    assert_eq!(only_origin(&spot).capacity_type, "spot");
    assert_eq!(spot.node_labels(&only_origin(&spot))[CAPACITY_TYPE], "spot");
    let catalogue = catalogue_of(
        &bare_nodeclass(),
        &[sized("c")
            .labels("karpenter.sh/capacity-type=reserved")
            .build()],
    );
    assert_eq!(catalogue.problems()[0].annotation, capacity::LABELS);
}

#[test]
fn taints_come_from_the_taints_annotation() {
    let entry = only(sized("md").annotation(capacity::TAINTS, "gpu=true:NoSchedule"));
    assert_eq!(
        entry.taints(),
        [Taint::new("gpu", "true", TaintEffect::NoSchedule)]
    );
}

fn with_template_taints(md: MdBuilder, taints: serde_json::Value) -> MachineDeployment {
    let mut md = md.build();
    md.spec.template.spec.taints = Some(serde_json::from_value(taints).unwrap());
    md
}

#[test]
fn v1beta2_template_taints_reach_the_node_and_the_annotation_wins() {
    let md = with_template_taints(
        sized("md").annotation(capacity::TAINTS, "gpu=annotated:NoSchedule"),
        serde_json::json!([
            {"key": "gpu", "value": "template", "effect": "NoSchedule", "propagation": "Always"},
            {"key": "dedicated", "value": "db", "effect": "NoExecute",
                "propagation": "OnInitialization"},
            {"key": "gpu", "effect": "PreferNoSchedule", "propagation": "Always"},
        ]),
    );
    let catalogue = catalogue_of(&bare_nodeclass(), &[md]);
    assert!(
        catalogue.problems().is_empty(),
        "{:?}",
        catalogue.problems()
    );
    let mut taints = catalogue.entries()[0].taints().to_vec();
    taints.sort();
    let mut want = vec![
        Taint::new("dedicated", "db", TaintEffect::NoExecute),
        Taint::new("gpu", "", TaintEffect::PreferNoSchedule),
        Taint::new("gpu", "annotated", TaintEffect::NoSchedule),
    ];
    want.sort();
    assert_eq!(taints, want);
}

#[test]
fn a_template_taint_with_a_bad_effect_is_a_problem_naming_its_field() {
    let md = with_template_taints(
        sized("md"),
        serde_json::json!([{"key": "k", "effect": "Sometimes"}]),
    );
    let catalogue = catalogue_of(&bare_nodeclass(), &[md]);
    assert!(catalogue.entries().is_empty());
    assert_eq!(
        catalogue.problems()[0].annotation,
        "spec.template.spec.taints[0].effect"
    );
}
