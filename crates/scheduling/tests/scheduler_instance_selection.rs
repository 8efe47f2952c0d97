//! Instance selection end to end (spec §3.9, §3.16, §3.17): which instance types a planned
//! NodeClaim lists and in what order, how pod and NodePool requirements narrow them, offerings,
//! resources, minValues and truncation.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod scheduler_support;

use std::sync::Arc;

use scheduler_support::*;
use scheduling::fixtures::{
    FakeInstanceType, LABEL_INTEGER, RESOURCE_GPU_VENDOR_A, RESOURCE_GPU_VENDOR_B,
    fake_instance_types, pod,
};
use scheduling::instance_type::{InstanceType, Offering};
use scheduling::labels::{ARCH, CAPACITY_TYPE, INSTANCE_TYPE, OS, TOPOLOGY_ZONE};
use scheduling::quantity::Quantity;
use scheduling::requirements::{Operator, Requirement};
use scheduling::scheduler::{Cluster, Options};

const CHEAPEST_FIRST: [&str; 6] = [
    "small-instance-type",
    "default-instance-type",
    "single-pod-instance-type",
    "gpu-vendor-b-instance-type",
    "gpu-vendor-instance-type",
    "arm-instance-type",
];

fn instance_type(name: &str, cpu: i64, offerings: Vec<Offering>) -> Arc<InstanceType> {
    let mut builder = FakeInstanceType::new(name).resource("cpu", Quantity::from_value(cpu));
    for offering in offerings {
        builder = builder.offering(offering);
    }
    Arc::new(builder.build().unwrap())
}

fn with_max_instance_types(mut options: Options, max: usize) -> Options {
    options.max_instance_types = max;
    options
}

#[test]
fn cheapest_compatible_instance_type_is_listed_first() {
    let p = pod("p").cpu("1").build().unwrap();
    let results = solve_default(std::slice::from_ref(&p));
    assert_eq!(names(expect_claim(&results, &p))[0], "small-instance-type");
}

#[test]
fn instance_type_options_are_ordered_by_price_then_name() {
    let p = pod("p").cpu("1").build().unwrap();
    let results = solve_default(std::slice::from_ref(&p));
    assert_eq!(names(expect_claim(&results, &p)), CHEAPEST_FIRST);
}

#[test]
fn plan_requires_exactly_the_listed_instance_types() {
    let p = pod("p").cpu("1").build().unwrap();
    let results = solve_default(std::slice::from_ref(&p));
    let claim = expect_claim(&results, &p);
    let mut listed: Vec<&str> = names(claim);
    listed.sort_unstable();
    assert_eq!(launch_values(claim, INSTANCE_TYPE), listed);
}

#[test]
fn instance_types_too_small_for_the_pod_are_not_options() {
    let p = pod("p").cpu("3").build().unwrap();
    let results = solve_default(std::slice::from_ref(&p));
    let listed = names(expect_claim(&results, &p));
    assert!(!listed.contains(&"small-instance-type"), "{listed:?}");
    assert_eq!(listed[0], "default-instance-type");
}

#[test]
fn cheaper_instance_type_missing_a_requested_resource_is_skipped() {
    let p = pod("p")
        .request(RESOURCE_GPU_VENDOR_A, "1")
        .build()
        .unwrap();
    let results = solve_default(std::slice::from_ref(&p));
    assert_eq!(
        names(expect_claim(&results, &p)),
        ["gpu-vendor-instance-type"]
    );
}

#[test]
fn pod_architecture_selector_keeps_only_matching_instance_types() {
    let p = pod("p").node_selector(ARCH, "arm64").build().unwrap();
    let results = solve_default(std::slice::from_ref(&p));
    let claim = expect_claim(&results, &p);
    assert_eq!(names(claim), ["arm-instance-type"]);
    assert_eq!(values(claim, ARCH), ["arm64"]);
}

#[test]
fn nodepool_architecture_requirement_keeps_only_matching_instance_types() {
    let pools = [pool("arm").with_requirement(req(ARCH, Operator::In, &["arm64"]))];
    let p = pod("p").build().unwrap();
    let results = solve(&pools, &Cluster::default(), std::slice::from_ref(&p));
    assert_eq!(names(expect_claim(&results, &p)), ["arm-instance-type"]);
}

#[test]
fn pod_operating_system_selector_keeps_only_matching_instance_types() {
    let p = pod("p").node_selector(OS, "ios").build().unwrap();
    let results = solve_default(std::slice::from_ref(&p));
    assert_eq!(names(expect_claim(&results, &p)), ["arm-instance-type"]);
}

#[test]
fn pod_zone_selector_pins_the_zone() {
    let p = pod("p")
        .node_selector(TOPOLOGY_ZONE, ZONE_2)
        .build()
        .unwrap();
    let results = solve_default(std::slice::from_ref(&p));
    assert_eq!(zone(expect_claim(&results, &p)), ZONE_2);
}

#[test]
fn pod_capacity_type_selector_pins_the_capacity_type() {
    let p = pod("p")
        .node_selector(CAPACITY_TYPE, "spot")
        .build()
        .unwrap();
    let results = solve_default(std::slice::from_ref(&p));
    assert_eq!(values(expect_claim(&results, &p), CAPACITY_TYPE), ["spot"]);
}

#[test]
fn unconstrained_plan_lists_every_offered_capacity_type() {
    let p = pod("p").build().unwrap();
    let results = solve_default(std::slice::from_ref(&p));
    assert_eq!(
        launch_values(expect_claim(&results, &p), CAPACITY_TYPE),
        ["on-demand", "spot"]
    );
}

#[test]
fn capacity_type_and_zone_without_a_common_offering_are_not_schedulable() {
    // The fake provider offers spot only in zones 1 and 2.
    let p = pod("p")
        .node_selector(CAPACITY_TYPE, "spot")
        .node_selector(TOPOLOGY_ZONE, ZONE_3)
        .build()
        .unwrap();
    let results = solve_default(std::slice::from_ref(&p));
    let message = expect_error(&results, &p);
    assert!(message.contains("offering"), "{message}");
}

#[test]
fn spot_in_a_spot_zone_is_schedulable() {
    let p = pod("p")
        .node_selector(CAPACITY_TYPE, "spot")
        .node_selector(TOPOLOGY_ZONE, ZONE_2)
        .build()
        .unwrap();
    let results = solve_default(std::slice::from_ref(&p));
    let claim = expect_claim(&results, &p);
    assert_eq!(zone(claim), ZONE_2);
    assert_eq!(values(claim, CAPACITY_TYPE), ["spot"]);
}

#[test]
fn instance_type_in_selector_keeps_only_the_named_types() {
    let p = pod("p")
        .require(
            INSTANCE_TYPE,
            Operator::In,
            &["arm-instance-type", "default-instance-type"],
        )
        .build()
        .unwrap();
    let results = solve_default(std::slice::from_ref(&p));
    assert_eq!(
        names(expect_claim(&results, &p)),
        ["default-instance-type", "arm-instance-type"]
    );
}

#[test]
fn instance_type_not_in_selector_excludes_the_named_types() {
    let p = pod("p")
        .require(
            INSTANCE_TYPE,
            Operator::NotIn,
            &["small-instance-type", "default-instance-type"],
        )
        .build()
        .unwrap();
    let results = solve_default(std::slice::from_ref(&p));
    let listed = names(expect_claim(&results, &p));
    assert_eq!(listed[0], "single-pod-instance-type");
    assert_eq!(listed.len(), 4);
}

#[test]
fn greater_than_on_a_numeric_label_keeps_larger_instance_types() {
    let p = pod("p")
        .require(LABEL_INTEGER, Operator::Gt, &["4"])
        .build()
        .unwrap();
    let results = solve_default(std::slice::from_ref(&p));
    assert_eq!(names(expect_claim(&results, &p)), ["arm-instance-type"]);
}

#[test]
fn less_than_on_a_numeric_label_keeps_smaller_instance_types() {
    let p = pod("p")
        .require(LABEL_INTEGER, Operator::Lt, &["4"])
        .build()
        .unwrap();
    let results = solve_default(std::slice::from_ref(&p));
    assert_eq!(names(expect_claim(&results, &p)), ["small-instance-type"]);
}

#[test]
fn numeric_bound_no_instance_type_meets_is_not_schedulable() {
    let p = pod("p")
        .require(LABEL_INTEGER, Operator::Gt, &["16"])
        .build()
        .unwrap();
    let results = solve_default(std::slice::from_ref(&p));
    expect_error(&results, &p);
}

#[test]
fn instance_type_without_available_offerings_is_not_an_option() {
    let unavailable = |zone| Offering::new("on-demand", zone, 0.01).with_available(false);
    let its = vec![
        instance_type("cheap", 4, vec![unavailable(ZONE_1), unavailable(ZONE_2)]),
        instance_type("pricey", 4, vec![Offering::new("on-demand", ZONE_1, 5.0)]),
    ];
    let p = pod("p").build().unwrap();
    let pools = [pool("default").with_instance_types(its)];
    let results = solve(&pools, &Cluster::default(), std::slice::from_ref(&p));
    assert_eq!(names(expect_claim(&results, &p)), ["pricey"]);
}

#[test]
fn unavailable_offering_in_the_selected_zone_excludes_the_instance_type() {
    let its = vec![
        instance_type(
            "cheap",
            4,
            vec![
                Offering::new("on-demand", ZONE_1, 0.01),
                Offering::new("on-demand", ZONE_2, 0.01).with_available(false),
            ],
        ),
        instance_type(
            "pricey",
            4,
            vec![
                Offering::new("on-demand", ZONE_1, 5.0),
                Offering::new("on-demand", ZONE_2, 5.0),
            ],
        ),
    ];
    let pools = [pool("default").with_instance_types(its)];
    let in_zone_1 = pod("z1")
        .node_selector(TOPOLOGY_ZONE, ZONE_1)
        .build()
        .unwrap();
    let in_zone_2 = pod("z2")
        .node_selector(TOPOLOGY_ZONE, ZONE_2)
        .build()
        .unwrap();
    let pods = [in_zone_1.clone(), in_zone_2.clone()];
    let results = solve(&pools, &Cluster::default(), &pods);
    assert_eq!(
        names(expect_claim(&results, &in_zone_1)),
        ["cheap", "pricey"]
    );
    assert_eq!(names(expect_claim(&results, &in_zone_2)), ["pricey"]);
}

#[test]
fn options_are_ordered_by_the_price_of_offerings_the_plan_allows() {
    // `spotty` is cheapest on spot but dear on demand; an on-demand pod must see that.
    let its = vec![
        instance_type(
            "spotty",
            4,
            vec![
                Offering::new("spot", ZONE_1, 0.1),
                Offering::new("on-demand", ZONE_1, 5.0),
            ],
        ),
        instance_type(
            "steady",
            4,
            vec![
                Offering::new("spot", ZONE_1, 1.0),
                Offering::new("on-demand", ZONE_1, 1.0),
            ],
        ),
    ];
    let pools = [pool("default").with_instance_types(its)];
    let on_demand = pod("od")
        .node_selector(CAPACITY_TYPE, "on-demand")
        .build()
        .unwrap();
    let results = solve(
        &pools,
        &Cluster::default(),
        std::slice::from_ref(&on_demand),
    );
    assert_eq!(
        names(expect_claim(&results, &on_demand)),
        ["steady", "spotty"]
    );
    let any = pod("any").build().unwrap();
    let results = solve(&pools, &Cluster::default(), std::slice::from_ref(&any));
    assert_eq!(names(expect_claim(&results, &any)), ["spotty", "steady"]);
}

#[test]
fn pod_too_big_for_every_instance_type_gets_an_error_about_resources() {
    let p = pod("huge").cpu("64").build().unwrap();
    let results = solve_default(std::slice::from_ref(&p));
    assert!(results.new_node_claims.is_empty());
    let message = expect_error(&results, &p);
    assert!(message.contains("resources"), "{message}");
    assert!(message.contains("default"), "{message}");
}

#[test]
fn cpu_request_of_a_million_cores_hints_at_a_milli_typo() {
    let p = pod("typo").cpu("2M").build().unwrap();
    let results = solve_default(std::slice::from_ref(&p));
    let message = expect_error(&results, &p);
    assert!(message.contains("did you mean m"), "{message}");
}

#[test]
fn zero_request_of_a_resource_no_instance_type_has_is_schedulable() {
    let p = pod("p").request("example.com/fpga", "0").build().unwrap();
    let results = solve_default(std::slice::from_ref(&p));
    expect_claim(&results, &p);
}

#[test]
fn pod_requesting_a_resource_no_instance_type_has_is_not_schedulable() {
    let p = pod("p").request("example.com/fpga", "1").build().unwrap();
    let results = solve_default(std::slice::from_ref(&p));
    expect_error(&results, &p);
}

#[test]
fn pod_needing_resources_no_single_instance_type_has_is_not_schedulable() {
    let p = pod("p")
        .request(RESOURCE_GPU_VENDOR_A, "1")
        .request(RESOURCE_GPU_VENDOR_B, "1")
        .build()
        .unwrap();
    let results = solve_default(std::slice::from_ref(&p));
    expect_error(&results, &p);
}

#[test]
fn pods_needing_resources_of_different_instance_types_get_different_claims() {
    let a = pod("a")
        .request(RESOURCE_GPU_VENDOR_A, "1")
        .build()
        .unwrap();
    let b = pod("b")
        .request(RESOURCE_GPU_VENDOR_B, "1")
        .build()
        .unwrap();
    let pods = [a.clone(), b.clone()];
    let results = solve_default(&pods);
    assert_eq!(results.new_node_claims.len(), 2);
    assert_eq!(
        names(expect_claim(&results, &a)),
        ["gpu-vendor-instance-type"]
    );
    assert_eq!(
        names(expect_claim(&results, &b)),
        ["gpu-vendor-b-instance-type"]
    );
}

#[test]
fn pods_with_different_architectures_get_different_claims() {
    let amd = pod("amd").node_selector(ARCH, "amd64").build().unwrap();
    let arm = pod("arm").node_selector(ARCH, "arm64").build().unwrap();
    let pods = [amd.clone(), arm.clone()];
    let results = solve_default(&pods);
    assert_eq!(results.new_node_claims.len(), 2);
    assert_eq!(values(expect_claim(&results, &amd), ARCH), ["amd64"]);
    assert_eq!(values(expect_claim(&results, &arm), ARCH), ["arm64"]);
}

#[test]
fn pods_with_different_zone_selectors_get_different_claims() {
    let pods: Vec<_> = [ZONE_1, ZONE_2, ZONE_3]
        .iter()
        .map(|z| pod(z).node_selector(TOPOLOGY_ZONE, z).build().unwrap())
        .collect();
    let results = solve_default(&pods);
    assert_eq!(results.new_node_claims.len(), 3);
    for (p, z) in pods.iter().zip([ZONE_1, ZONE_2, ZONE_3]) {
        assert_eq!(zone(expect_claim(&results, p)), z);
    }
}

fn min_values_pool(min: usize) -> scheduling::scheduler::NodePool {
    pool("min-values")
        .with_requirement(Requirement::exists(INSTANCE_TYPE).with_min_values(Some(min)))
}

#[test]
fn min_values_are_met_by_the_listed_instance_types() {
    let p = pod("p").cpu("3").build().unwrap();
    let results = solve(
        &[min_values_pool(3)],
        &Cluster::default(),
        std::slice::from_ref(&p),
    );
    let claim = expect_claim(&results, &p);
    assert!(names(claim).len() >= 3, "{:?}", names(claim));
    assert!(!claim.min_values_relaxed);
}

#[test]
fn strict_min_values_fail_a_pod_that_narrows_the_options_too_far() {
    let p = pod("p").node_selector(ARCH, "arm64").build().unwrap();
    let results = solve(
        &[min_values_pool(3)],
        &Cluster::default(),
        std::slice::from_ref(&p),
    );
    let message = expect_error(&results, &p);
    assert!(message.contains("minValues"), "{message}");
}

#[test]
fn best_effort_min_values_relax_and_mark_the_plan() {
    let p = pod("p").node_selector(ARCH, "arm64").build().unwrap();
    let results = solve_with(
        &[min_values_pool(3)],
        &Cluster::default(),
        std::slice::from_ref(&p),
        best_effort(),
    );
    let claim = expect_claim(&results, &p);
    assert_eq!(names(claim), ["arm-instance-type"]);
    assert!(claim.min_values_relaxed);
}

#[test]
fn nodepool_whose_instance_types_cannot_meet_min_values_is_dropped() {
    let p = pod("p").build().unwrap();
    let results = solve(
        &[min_values_pool(7)],
        &Cluster::default(),
        std::slice::from_ref(&p),
    );
    let message = expect_error(&results, &p);
    assert!(message.contains("minValues"), "{message}");
}

#[test]
fn best_effort_min_values_keep_a_nodepool_whose_instance_types_fall_short() {
    // Six types cannot give seven distinct names; best effort relaxes instead of dropping.
    let p = pod("p").build().unwrap();
    let results = solve_with(
        &[min_values_pool(7)],
        &Cluster::default(),
        std::slice::from_ref(&p),
        best_effort(),
    );
    let claim = expect_claim(&results, &p);
    assert_eq!(names(claim).len(), 6);
    assert!(claim.min_values_relaxed);
}

#[test]
fn min_values_stop_packing_that_would_leave_too_few_options() {
    // cpu 1..5 types; two 1.5-cpu pods only fit the 4- and 5-cpu types together.
    let its = fake_instance_types(5).unwrap();
    let pods: Vec<_> = (0..2)
        .map(|i| pod(&format!("p{i}")).cpu("1500m").build().unwrap())
        .collect();
    let plain = pool("plain").with_instance_types(its.clone());
    let results = solve(&[plain], &Cluster::default(), &pods);
    assert_eq!(results.new_node_claims.len(), 1);
    let strict = pool("strict")
        .with_instance_types(its)
        .with_requirement(Requirement::exists(INSTANCE_TYPE).with_min_values(Some(3)));
    let results = solve(&[strict], &Cluster::default(), &pods);
    assert_eq!(results.new_node_claims.len(), 2);
    for claim in &results.new_node_claims {
        assert!(claim.instance_types.len() >= 3, "{:?}", names(claim));
    }
}

#[test]
fn max_instance_types_keeps_the_cheapest_options() {
    let pools = [pool("default").with_instance_types(fake_instance_types(10).unwrap())];
    let p = pod("p").cpu("1").build().unwrap();
    let results = solve_with(
        &pools,
        &Cluster::default(),
        std::slice::from_ref(&p),
        with_max_instance_types(respect(), 3),
    );
    let claim = expect_claim(&results, &p);
    assert_eq!(names(claim), ["fake-it-1", "fake-it-2", "fake-it-3"]);
    assert_eq!(
        launch_values(claim, INSTANCE_TYPE),
        ["fake-it-1", "fake-it-2", "fake-it-3"]
    );
}

#[test]
fn truncation_that_breaks_strict_min_values_fails_the_claims_pods() {
    let pools = [pool("default")
        .with_instance_types(fake_instance_types(10).unwrap())
        .with_requirement(Requirement::exists(INSTANCE_TYPE).with_min_values(Some(5)))];
    let p = pod("p").cpu("1").build().unwrap();
    let results = solve_with(
        &pools,
        &Cluster::default(),
        std::slice::from_ref(&p),
        with_max_instance_types(respect(), 3),
    );
    assert!(results.new_node_claims.is_empty());
    let message = expect_error(&results, &p);
    assert!(message.contains("minValues"), "{message}");
}

#[test]
fn truncation_under_best_effort_min_values_keeps_the_claim() {
    let pools = [pool("default")
        .with_instance_types(fake_instance_types(10).unwrap())
        .with_requirement(Requirement::exists(INSTANCE_TYPE).with_min_values(Some(5)))];
    let p = pod("p").cpu("1").build().unwrap();
    let results = solve_with(
        &pools,
        &Cluster::default(),
        std::slice::from_ref(&p),
        with_max_instance_types(best_effort(), 3),
    );
    assert_eq!(names(expect_claim(&results, &p)).len(), 3);
}

#[test]
fn min_values_on_another_key_count_distinct_values() {
    // Two distinct `integer` values are needed: a 3.5-cpu pod fits 4-cpu types and the 16-cpu
    // arm type, two values; an arm-only pod leaves one.
    let pools = [pool("default")
        .with_requirement(Requirement::exists(LABEL_INTEGER).with_min_values(Some(2)))];
    let p = pod("p").cpu("3500m").build().unwrap();
    let results = solve(&pools, &Cluster::default(), std::slice::from_ref(&p));
    let claim = expect_claim(&results, &p);
    let distinct: std::collections::BTreeSet<String> = claim
        .instance_types
        .iter()
        .flat_map(|it| {
            it.requirements()
                .get(LABEL_INTEGER)
                .unwrap()
                .values()
                .to_vec()
        })
        .map(|v| v.to_string())
        .collect();
    assert!(distinct.len() >= 2, "{distinct:?}");
    let only_arm = pod("arm").node_selector(ARCH, "arm64").build().unwrap();
    let results = solve(&pools, &Cluster::default(), std::slice::from_ref(&only_arm));
    let message = expect_error(&results, &only_arm);
    assert!(message.contains("minValues"), "{message}");
}
