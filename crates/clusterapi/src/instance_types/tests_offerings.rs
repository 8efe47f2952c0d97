//! Behaviour of offerings and allocatable: price precedence, availability (max size, in-flight,
//! paused), infrastructure-template fallback and NodeClass overhead.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::collections::BTreeMap;

use api::nodeclass::{ClusterAPINodeClassSpec, PriceEntry};
use api::well_known::capi::{self, capacity};
use api::well_known::labels::ARCH;
use api::{MachineDeployment, well_known};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use scheduling::quantity::Quantity;
use scheduling::resources::ResourceName;
use serde_json::json;

use super::*;
use crate::testing::{MdBuilder, bare_nodeclass, md};

fn q(text: &str) -> Quantity {
    Quantity::parse(text).unwrap()
}

fn catalogue_of(nodeclass: &ClusterAPINodeClassSpec, mds: &[MachineDeployment]) -> Catalogue {
    let inputs: Vec<_> = mds.iter().map(MachineDeploymentInput::new).collect();
    build_catalogue(nodeclass, &inputs).unwrap()
}

fn sized(name: &str) -> MdBuilder {
    md("default", name).shape("2", "4Gi")
}

fn price_of(nodeclass: &ClusterAPINodeClassSpec, md: MdBuilder) -> (f64, PriceSource) {
    let catalogue = catalogue_of(nodeclass, &[md.build()]);
    let (offering, origin) = catalogue.entries()[0].offerings().next().unwrap();
    (offering.price, origin.price_source)
}

/// (instanceType, machineDeployment, zone, capacityType, price).
type PriceRow<'a> = (
    Option<&'a str>,
    Option<&'a str>,
    Option<&'a str>,
    Option<&'a str>,
    &'a str,
);

fn table(entries: &[PriceRow<'_>]) -> ClusterAPINodeClassSpec {
    let prices = entries
        .iter()
        .map(|(it, md, zone, ct, price)| PriceEntry {
            instance_type: it.map(str::to_owned),
            machine_deployment: md.map(str::to_owned),
            machine_set: None,
            machine_pool: None,
            zone: zone.map(str::to_owned),
            capacity_type: ct.map(str::to_owned),
            price: (*price).to_owned(),
        })
        .collect();
    ClusterAPINodeClassSpec {
        prices: Some(prices),
        ..bare_nodeclass()
    }
}

#[test]
fn price_precedence_is_our_annotation_then_legacy_then_nodeclass_then_zero() {
    let nodeclass = table(&[(None, None, None, None, "0.25")]);
    let both = sized("md")
        .annotation(capi::PRICE, "0.75")
        .annotation(capi::LEGACY_PRICE, "0.50");
    assert_eq!(price_of(&nodeclass, both), (0.75, PriceSource::Annotation));
    let legacy = sized("md").annotation(capi::LEGACY_PRICE, "0.50");
    assert_eq!(
        price_of(&nodeclass, legacy),
        (0.5, PriceSource::LegacyAnnotation)
    );
    assert_eq!(
        price_of(&nodeclass, sized("md")),
        (0.25, PriceSource::NodeClass { entry: 0 })
    );
    assert_eq!(
        price_of(&bare_nodeclass(), sized("md")),
        (0.0, PriceSource::Unpriced)
    );
}

#[test]
fn the_most_specific_price_entry_wins_and_an_md_entry_beats_all() {
    let nodeclass = table(&[
        (None, None, None, None, "0.10"),
        (Some("m5.large"), None, None, None, "0.20"),
        (
            Some("m5.large"),
            None,
            Some("z1"),
            Some("on-demand"),
            "0.30",
        ),
        (None, Some("default/pinned"), None, None, "0.40"),
        (Some("m5.large"), None, Some("z1"), None, "0.99"),
    ]);
    let m5 = |name: &str, zone: &str| {
        sized(name).labels(&format!(
            "node.kubernetes.io/instance-type=m5.large,topology.kubernetes.io/zone={zone}"
        ))
    };
    assert_eq!(
        price_of(&nodeclass, m5("a", "z1")),
        (0.30, PriceSource::NodeClass { entry: 2 })
    );
    assert_eq!(
        price_of(&nodeclass, m5("b", "z2")),
        (0.20, PriceSource::NodeClass { entry: 1 })
    );
    assert_eq!(
        price_of(&nodeclass, m5("pinned", "z1")),
        (0.40, PriceSource::NodeClass { entry: 3 })
    );
    assert_eq!(
        price_of(&nodeclass, sized("other")),
        (0.10, PriceSource::NodeClass { entry: 0 })
    );
}

#[test]
fn an_invalid_price_table_makes_the_nodeclass_unusable() {
    for (nodeclass, field) in [
        (table(&[(None, None, None, None, "-1")]), "prices[0].price"),
        (
            table(&[(None, Some("no-namespace"), None, None, "1")]),
            "prices[0].machineDeployment",
        ),
        (
            table(&[(None, None, None, Some("reserved"), "1")]),
            "prices[0].capacityType",
        ),
    ] {
        let error = build_catalogue(&nodeclass, &[]).unwrap_err();
        assert_eq!(error.field, field);
    }
}

#[test]
fn a_price_entry_names_one_node_group_kind_at_most() {
    let mut nodeclass = table(&[(None, Some("ns/md"), None, None, "1")]);
    let entry = &mut nodeclass.prices.as_mut().unwrap()[0];
    entry.machine_pool = Some("ns/pool".to_owned());
    let error = build_catalogue(&nodeclass, &[]).unwrap_err();
    assert_eq!(error.field, "prices[0].machinePool");
    assert!(error.message.contains("machinePool"), "{}", error.message);
    let mut nodeclass = table(&[(None, None, None, None, "1")]);
    nodeclass.prices.as_mut().unwrap()[0].machine_pool = Some("no-namespace".to_owned());
    assert_eq!(
        build_catalogue(&nodeclass, &[]).unwrap_err().field,
        "prices[0].machinePool"
    );
}

fn availability(md: MdBuilder, in_flight: u32) -> Option<Unavailable> {
    let md = md.build();
    let input = MachineDeploymentInput::new(&md).with_in_flight(in_flight);
    let catalogue = build_catalogue(&bare_nodeclass(), &[input]).unwrap();
    let (offering, origin) = catalogue.entries()[0].offerings().next().unwrap();
    assert_eq!(offering.available, origin.unavailable.is_none());
    origin.unavailable
}

#[test]
fn an_offering_is_available_below_max_size_and_without_one() {
    assert_eq!(
        availability(sized("md").replicas(3).max_size("10"), 0),
        None
    );
    assert_eq!(availability(sized("md").replicas(3), 100), None);
    assert_eq!(
        availability(sized("md").max_size("10"), 0),
        None,
        "unset replicas count as 0"
    );
}

#[test]
fn an_offering_is_unavailable_at_or_above_max_size() {
    let at_max = Unavailable::AtMaxSize {
        replicas: 10,
        in_flight: 0,
        max_size: 10,
    };
    assert_eq!(
        availability(sized("md").replicas(10).max_size("10"), 0),
        Some(at_max)
    );
    assert!(availability(sized("md").replicas(12).max_size("10"), 0).is_some());
    assert!(availability(sized("md").replicas(0).max_size("0"), 0).is_some());
}

#[test]
fn in_flight_increments_count_towards_max_size() {
    assert_eq!(
        availability(sized("md").replicas(7).max_size("10"), 2),
        None
    );
    assert_eq!(
        availability(sized("md").replicas(7).max_size("10"), 3),
        Some(Unavailable::AtMaxSize {
            replicas: 7,
            in_flight: 3,
            max_size: 10
        })
    );
}

#[test]
fn paused_mds_are_listed_but_their_offerings_are_unavailable() {
    assert_eq!(
        availability(sized("md").paused(), 0),
        Some(Unavailable::Paused)
    );
    let annotated = sized("md").annotation(well_known::capi::PAUSED, "true");
    assert_eq!(availability(annotated, 0), Some(Unavailable::Paused));
}

#[test]
fn failed_mds_and_recent_launch_failures_make_offerings_unavailable() {
    let mut failed = sized("md").build();
    failed.status = Some(api::capi::MachineDeploymentStatus {
        phase: Some("Failed".into()),
        ..Default::default()
    });
    let catalogue =
        build_catalogue(&bare_nodeclass(), &[MachineDeploymentInput::new(&failed)]).unwrap();
    let (offering, origin) = catalogue.entries()[0].offerings().next().unwrap();
    assert!(!offering.available);
    assert_eq!(origin.unavailable, Some(Unavailable::Failed));

    let md = sized("md").build();
    let input = MachineDeploymentInput::new(&md).with_launch_failed(true);
    let catalogue = build_catalogue(&bare_nodeclass(), &[input]).unwrap();
    let (offering, origin) = catalogue.entries()[0].offerings().next().unwrap();
    assert!(!offering.available);
    assert_eq!(origin.unavailable, Some(Unavailable::LaunchFailed));
    assert_eq!(availability(sized("md"), 0), None);
}

fn template(status: serde_json::Value) -> serde_json::Value {
    json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "DockerMachineTemplate",
        "metadata": {"name": "tmpl", "namespace": "default"},
        "status": status,
    })
}

fn with_template(md: MdBuilder, template: &serde_json::Value) -> Catalogue {
    let md = md.build();
    let input = MachineDeploymentInput::new(&md).with_infrastructure_template(template);
    build_catalogue(&bare_nodeclass(), &[input]).unwrap()
}

#[test]
fn the_infrastructure_template_fills_capacity_arch_and_os() {
    let template = template(json!({
        "capacity": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": 1},
        "nodeInfo": {"architecture": "arm64", "operatingSystem": "linux"},
    }));
    let catalogue = with_template(md("default", "md"), &template);
    let entry = &catalogue.entries()[0];
    let capacity = entry.instance_type().capacity();
    assert_eq!(capacity.get(&ResourceName::CPU), Some(q("8")));
    assert_eq!(capacity.get(&ResourceName::MEMORY), Some(q("32Gi")));
    assert_eq!(
        capacity.get(&ResourceName::new("nvidia.com/gpu")),
        Some(q("1"))
    );
    assert_eq!(capacity.get(&ResourceName::PODS), Some(q("110")));
    assert_eq!(entry.labels()[ARCH], "arm64");
}

#[test]
fn annotations_win_over_the_infrastructure_template() {
    let template = template(json!({
        "capacity": {"cpu": "8", "memory": "32Gi", "pods": "250"},
        "nodeInfo": {"architecture": "arm64"},
    }));
    let md = md("default", "md")
        .annotation(capacity::CPU, "4")
        .labels("kubernetes.io/arch=amd64");
    let catalogue = with_template(md, &template);
    let entry = &catalogue.entries()[0];
    let capacity = entry.instance_type().capacity();
    assert_eq!(capacity.get(&ResourceName::CPU), Some(q("4")));
    assert_eq!(capacity.get(&ResourceName::MEMORY), Some(q("32Gi")));
    assert_eq!(
        capacity.get(&ResourceName::PODS),
        Some(q("250")),
        "template pods when no maxPods"
    );
    assert_eq!(entry.labels()[ARCH], "amd64");
}

#[test]
fn a_bad_infrastructure_template_capacity_is_a_problem() {
    let template = template(json!({"capacity": {"cpu": "lots", "memory": "1Gi"}}));
    let catalogue = with_template(md("default", "md"), &template);
    assert!(catalogue.entries().is_empty());
    let problem = &catalogue.problems()[0];
    assert_eq!(
        problem.annotation,
        "DockerMachineTemplate/tmpl status.capacity.cpu"
    );
    assert!(problem.message.contains("lots"), "{}", problem.message);
}

fn overhead_nodeclass(
    kube: &[(&str, &str)],
    system: &[(&str, &str)],
    eviction: Option<&[(&str, &str)]>,
) -> ClusterAPINodeClassSpec {
    let list = |pairs: &[(&str, &str)]| {
        Some(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), K8sQuantity((*v).to_owned())))
                .collect::<BTreeMap<_, _>>(),
        )
    };
    ClusterAPINodeClassSpec {
        kube_reserved: list(kube),
        system_reserved: list(system),
        eviction_hard: eviction.map(|pairs| {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        }),
        ..ClusterAPINodeClassSpec::default()
    }
}

#[test]
fn allocatable_is_capacity_minus_reserved_and_eviction_thresholds() {
    let nodeclass = overhead_nodeclass(
        &[("cpu", "100m"), ("memory", "512Mi"), ("pid", "1000")],
        &[
            ("cpu", "50m"),
            ("memory", "256Mi"),
            ("ephemeral-storage", "1Gi"),
        ],
        Some(&[
            ("memory.available", "256Mi"),
            ("nodefs.available", "10%"),
            ("pid.available", "5%"),
        ]),
    );
    let md = sized("md")
        .annotation(capacity::EPHEMERAL_DISK, "100Gi")
        .build();
    let catalogue = catalogue_of(&nodeclass, &[md]);
    let instance_type = catalogue.entries()[0].instance_type();
    let allocatable = instance_type.allocatable();
    assert_eq!(allocatable.get(&ResourceName::CPU), Some(q("1850m")));
    assert_eq!(allocatable.get(&ResourceName::MEMORY), Some(q("3Gi")));
    assert_eq!(
        allocatable.get(&ResourceName::EPHEMERAL_STORAGE),
        Some(q("89Gi"))
    );
    assert_eq!(allocatable.get(&ResourceName::PODS), Some(q("110")));
    assert!(allocatable.get(&ResourceName::new("pid")).is_none());
}

#[test]
fn without_eviction_hard_the_kubelet_defaults_apply() {
    let nodeclass = ClusterAPINodeClassSpec::default();
    let md = sized("md")
        .annotation(capacity::EPHEMERAL_DISK, "50Gi")
        .build();
    let catalogue = catalogue_of(&nodeclass, &[md]);
    let overhead = catalogue.entries()[0].instance_type().overhead().clone();
    assert_eq!(
        overhead.eviction_threshold.get(&ResourceName::MEMORY),
        Some(q("100Mi"))
    );
    assert_eq!(
        overhead
            .eviction_threshold
            .get(&ResourceName::EPHEMERAL_STORAGE),
        Some(q("5Gi"))
    );
}

#[test]
fn eviction_percentages_round_up_to_whole_bytes_and_skip_missing_resources() {
    let nodeclass = overhead_nodeclass(
        &[],
        &[],
        Some(&[("memory.available", "7.5%"), ("nodefs.available", "10%")]),
    );
    let catalogue = catalogue_of(
        &nodeclass,
        &[md("default", "md").shape("1", "1001").build()],
    );
    let overhead = catalogue.entries()[0].instance_type().overhead().clone();
    assert_eq!(
        overhead.eviction_threshold.get(&ResourceName::MEMORY),
        Some(q("76"))
    );
    assert!(
        overhead
            .eviction_threshold
            .get(&ResourceName::EPHEMERAL_STORAGE)
            .is_none()
    );
}

#[test]
fn invalid_overhead_makes_the_nodeclass_unusable() {
    for (nodeclass, field) in [
        (
            overhead_nodeclass(&[("cpu", "lots")], &[], None),
            "kubeReserved.cpu",
        ),
        (
            overhead_nodeclass(&[], &[("memory", "-1Gi")], None),
            "systemReserved.memory",
        ),
        (
            overhead_nodeclass(&[("gpu", "1")], &[], None),
            "kubeReserved.gpu",
        ),
        (
            overhead_nodeclass(&[], &[], Some(&[("memory.available", "101%")])),
            "evictionHard.memory.available",
        ),
        (
            overhead_nodeclass(&[], &[], Some(&[("memory.available", "5 %")])),
            "evictionHard.memory.available",
        ),
        (
            overhead_nodeclass(&[], &[], Some(&[("disk.available", "1Gi")])),
            "evictionHard.disk.available",
        ),
    ] {
        let error = build_catalogue(&nodeclass, &[]).unwrap_err();
        assert_eq!(error.field, field);
    }
}

#[test]
fn an_unpriced_machine_deployment_is_an_unpriced_offering_and_the_priced_condition_names_it() {
    use crate::nodeclass_status::pricing;
    use api::common::ConditionStatus;
    let priced = sized("priced").annotation(capi::PRICE, "0.50").build();
    let unpriced = sized("free").build();
    let catalogue = catalogue_of(&bare_nodeclass(), &[priced.clone(), unpriced.clone()]);
    let offerings: Vec<(bool, f64)> = catalogue
        .entries()
        .iter()
        .flat_map(|e| e.offerings())
        .map(|(o, _)| (o.priced, o.price))
        .collect();
    assert!(offerings.contains(&(false, 0.0)), "{offerings:?}");
    assert!(offerings.contains(&(true, 0.5)), "{offerings:?}");
    let (status, reason, message) = pricing(&catalogue).unwrap();
    assert_eq!((status, reason), (ConditionStatus::False, "Unpriced"));
    assert!(
        message.starts_with("MachineDeployment default/free has no price"),
        "{message}"
    );
    let none = catalogue_of(&bare_nodeclass(), &[unpriced]);
    assert_eq!(pricing(&none).unwrap().1, "NoPrices");
    let all = catalogue_of(&bare_nodeclass(), &[priced]);
    assert_eq!(pricing(&all).unwrap().0, ConditionStatus::True);
}
