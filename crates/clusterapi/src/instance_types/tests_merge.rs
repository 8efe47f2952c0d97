//! Behaviour of merging same-named MachineDeployments, and of the catalogue as a whole.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use api::MachineDeployment;
use api::well_known::capi::{self, capacity};
use api::well_known::labels::{CAPACITY_TYPE, ZONE};

use super::*;
use crate::testing::{MdBuilder, bare_nodeclass, md};

fn catalogue_of(mds: &[MachineDeployment]) -> Catalogue {
    let inputs: Vec<_> = mds.iter().map(MachineDeploymentInput::new).collect();
    build_catalogue(&bare_nodeclass(), &inputs).unwrap()
}

fn m5(name: &str, zone: &str) -> MdBuilder {
    md("default", name).shape("2", "8Gi").labels(&format!(
        "node.kubernetes.io/instance-type=m5.large,topology.kubernetes.io/zone={zone}"
    ))
}

fn values(entry: &CatalogueEntry, key: &str) -> Vec<String> {
    entry
        .instance_type()
        .requirements()
        .get(key)
        .unwrap()
        .values()
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[test]
fn mds_of_one_instance_type_in_several_zones_become_one_type_with_several_offerings() {
    let catalogue = catalogue_of(&[
        m5("m5-b", "us-east-1b").build(),
        m5("m5-a", "us-east-1a")
            .annotation(capi::PRICE, "0.096")
            .build(),
    ]);
    assert!(catalogue.problems().is_empty());
    assert_eq!(catalogue.entries().len(), 1);
    let entry = catalogue.get("m5.large").unwrap();
    let offerings: Vec<_> = entry
        .offerings()
        .map(|(o, origin)| {
            (
                origin.machine_deployment.to_string(),
                o.zone().unwrap().to_owned(),
                o.price,
            )
        })
        .collect();
    assert_eq!(
        offerings,
        [
            ("default/m5-a".into(), "us-east-1a".into(), 0.096),
            ("default/m5-b".into(), "us-east-1b".into(), 0.0),
        ]
    );
    assert_eq!(values(entry, ZONE), ["us-east-1a", "us-east-1b"]);
    assert!(!entry.labels().contains_key(ZONE));
}

#[test]
fn spot_and_on_demand_mds_merge_into_offerings_of_both_capacity_types() {
    let catalogue = catalogue_of(&[
        m5("od", "z1").build(),
        md("default", "spot")
            .shape("2", "8Gi")
            .labels("node.kubernetes.io/instance-type=m5.large,topology.kubernetes.io/zone=z1,karpenter.sh/capacity-type=spot")
            .build(),
    ]);
    let entry = catalogue.get("m5.large").unwrap();
    assert_eq!(values(entry, CAPACITY_TYPE), ["on-demand", "spot"]);
    assert_eq!(entry.offerings().count(), 2);
}

#[test]
fn two_mds_in_the_same_zone_give_two_offerings_each_with_its_md() {
    let catalogue = catalogue_of(&[
        m5("full", "z1").replicas(3).max_size("3").build(),
        m5("spare", "z1").build(),
    ]);
    let entry = catalogue.get("m5.large").unwrap();
    let origins: Vec<_> = entry
        .offerings()
        .map(|(o, origin)| (origin.machine_deployment.name.clone(), o.available))
        .collect();
    assert_eq!(
        origins,
        [("full".to_owned(), false), ("spare".to_owned(), true)]
    );
}

#[test]
fn same_name_different_shapes_are_all_excluded_with_a_problem_each() {
    let catalogue = catalogue_of(&[
        m5("small", "z1").build(),
        m5("big", "z2").annotation(capacity::CPU, "4").build(),
        md("default", "other").shape("1", "1Gi").build(),
    ]);
    assert!(catalogue.get("m5.large").is_none());
    assert_eq!(catalogue.entries().len(), 1, "other MDs are unaffected");
    let names: Vec<_> = catalogue
        .problems()
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(names, ["big", "small"]);
    let message = &catalogue.problems()[0].message;
    assert!(
        message.contains("m5.large")
            && message.contains("capacity")
            && message.contains("default/big"),
        "{message}"
    );
}

#[test]
fn same_name_different_labels_or_taints_are_not_merged() {
    let labels = catalogue_of(&[
        m5("a", "z1")
            .template_label("node.cluster.x-k8s.io/pool", "x")
            .build(),
        m5("b", "z2").build(),
    ]);
    assert!(labels.problems()[0].message.contains("labels"));
    let taints = catalogue_of(&[
        m5("a", "z1")
            .annotation(capacity::TAINTS, "gpu:NoSchedule")
            .build(),
        m5("b", "z2").build(),
    ]);
    assert!(taints.problems()[0].message.contains("taints"));
}

#[test]
fn prices_and_availability_may_differ_between_merged_offerings() {
    let catalogue = catalogue_of(&[
        m5("a", "z1").annotation(capi::PRICE, "1").build(),
        m5("b", "z2").paused().build(),
    ]);
    assert!(catalogue.problems().is_empty());
    assert_eq!(catalogue.get("m5.large").unwrap().offerings().count(), 2);
}

#[test]
fn derived_names_never_merge_mds() {
    let catalogue = catalogue_of(&[
        md("default", "a").shape("1", "1Gi").build(),
        md("default", "b").shape("1", "1Gi").build(),
    ]);
    assert_eq!(catalogue.entries().len(), 2);
}

#[test]
fn the_catalogue_is_sorted_and_summarised_for_the_nodeclass_status() {
    let catalogue = catalogue_of(&[
        m5("m5-b", "z2").replicas(1).max_size("1").build(),
        md("default", "c5")
            .shape("4", "8Gi")
            .labels("node.kubernetes.io/instance-type=c5.xlarge")
            .build(),
        m5("m5-a", "z1").build(),
    ]);
    let names: Vec<_> = catalogue
        .entries()
        .iter()
        .map(CatalogueEntry::name)
        .collect();
    assert_eq!(names, ["c5.xlarge", "m5.large"]);
    assert_eq!(catalogue.instance_types().len(), 2);
    let status = catalogue.status();
    assert_eq!(status[1].name, "m5.large");
    assert_eq!(
        status[1].machine_deployments,
        ["default/m5-a", "default/m5-b"]
    );
    assert_eq!(status[1].zones, ["z1", "z2"]);
    assert_eq!(status[1].capacity_types, ["on-demand"]);
    assert_eq!(status[1].available_offerings, 1);
    assert!(status[0].zones.is_empty());
}

#[test]
fn one_bad_md_never_breaks_the_others_and_problems_are_sorted() {
    let catalogue = catalogue_of(&[
        md("b", "bad").shape("x", "1Gi").labels("oops").build(),
        m5("good", "z1").build(),
        md("a", "bad")
            .annotation(capacity::TAINTS, "t=v")
            .shape("1", "1Gi")
            .build(),
    ]);
    assert_eq!(catalogue.entries().len(), 1);
    let problems: Vec<_> = catalogue
        .problems()
        .iter()
        .map(|p| format!("{}/{} {}", p.namespace, p.name, p.annotation))
        .collect();
    assert_eq!(
        problems,
        [
            format!("a/bad {}", capacity::TAINTS),
            format!("b/bad {}", capacity::CPU),
            format!("b/bad {}", capacity::LABELS),
        ]
    );
}

#[test]
fn a_stand_alone_machine_set_is_an_offering_the_status_lists_apart() {
    let mut set = m5("m5", "us-east-1b").build();
    set.group_kind = api::GroupKind::MachineSet;
    // Same namespace and name as the MachineDeployment: still two offerings.
    let catalogue = catalogue_of(&[m5("m5", "us-east-1a").build(), set]);
    assert!(
        catalogue.problems().is_empty(),
        "{:?}",
        catalogue.problems()
    );
    let entry = catalogue.get("m5.large").unwrap();
    let origins: Vec<String> = entry
        .offerings()
        .map(|(_, origin)| format!("{:#}", origin.machine_deployment))
        .collect();
    assert_eq!(
        origins,
        ["MachineDeployment default/m5", "MachineSet default/m5"]
    );
    let status = entry.status();
    assert_eq!(status.machine_deployments, ["default/m5"]);
    assert_eq!(status.machine_sets, ["default/m5"]);
    assert_eq!(status.available_offerings, 2);
}

#[test]
fn a_problem_of_a_machine_set_names_its_kind() {
    let mut set = md("default", "bad").shape("x", "8Gi").build();
    set.group_kind = api::GroupKind::MachineSet;
    let catalogue = catalogue_of(&[set]);
    let problem = &catalogue.problems()[0];
    assert_eq!(problem.kind, api::GroupKind::MachineSet);
    assert!(
        problem.to_string().starts_with("MachineSet default/bad: "),
        "{problem}"
    );
}

#[test]
fn a_machine_pool_is_an_offering_only_where_its_provider_makes_machine_pool_machines() {
    let mut pool = m5("m5", "us-east-1c").build();
    pool.group_kind = api::GroupKind::MachinePool;
    let with = serde_json::json!({"status": {"infrastructureMachineKind": "DockerMachine"}});
    let without = serde_json::json!({"status": {"replicas": 1}});
    let catalogue_with = |infra: Option<&serde_json::Value>| {
        let input = MachineDeploymentInput::new(&pool);
        let input = match infra {
            Some(i) => input.with_infrastructure_template(i),
            None => input,
        };
        build_catalogue(&bare_nodeclass(), &[input]).unwrap()
    };
    let catalogue = catalogue_with(Some(&with));
    assert!(
        catalogue.problems().is_empty(),
        "{:?}",
        catalogue.problems()
    );
    let status = catalogue.get("m5.large").unwrap().status();
    assert_eq!(status.machine_pools, ["default/m5"]);
    assert!(status.machine_deployments.is_empty());
    for infra in [Some(&without), None] {
        let catalogue = catalogue_with(infra);
        assert!(catalogue.entries().is_empty());
        let problem = &catalogue.problems()[0];
        assert_eq!(problem.kind, api::GroupKind::MachinePool);
        assert_eq!(problem.annotation, "status.infrastructureMachineKind");
        assert!(
            problem
                .to_string()
                .starts_with("MachinePool default/m5: its infrastructure "),
            "{problem}"
        );
    }
}
