//! NodePool selection end to end (spec §3.4, §3.7 step 4, §3.8 steps 1–2): weight order, ties
//! by name descending, pools without usable instance types, taints, template labels and
//! requirements, custom labels, and pods choosing or avoiding NodePools.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod scheduler_support;

use scheduler_support::*;
use scheduling::fixtures::pod;
use scheduling::labels::{ARCH, INSTANCE_TYPE, NODE_POOL, TOPOLOGY_REGION, TOPOLOGY_ZONE};
use scheduling::requirements::Operator;
use scheduling::scheduler::{Cluster, Scheduler};
use scheduling::taints::TaintEffect;

#[test]
fn higher_weight_nodepool_is_used_first() {
    let pods = [pod("p").cpu("1").build().unwrap()];
    let pools = [
        pool("zeta").with_weight(10),
        pool("alpha").with_weight(50),
        pool("omega"),
    ];
    let results = solve(&pools, &Cluster::default(), &pods);
    assert_eq!(&*expect_claim(&results, &pods[0]).node_pool, "alpha");
}

#[test]
fn equal_weight_nodepools_are_tried_by_name_descending() {
    let pods = [pod("p").cpu("1").build().unwrap()];
    let pools = [pool("alpha"), pool("charlie"), pool("bravo")];
    let results = solve(&pools, &Cluster::default(), &pods);
    assert_eq!(&*expect_claim(&results, &pods[0]).node_pool, "charlie");
}

#[test]
fn weight_outranks_name_order() {
    let pods = [pod("p").cpu("1").build().unwrap()];
    let pools = [pool("zulu").with_weight(1), pool("alpha").with_weight(2)];
    let results = solve(&pools, &Cluster::default(), &pods);
    assert_eq!(&*expect_claim(&results, &pods[0]).node_pool, "alpha");
}

#[test]
fn lower_weight_nodepool_takes_pods_the_heavier_one_cannot() {
    let amd = pod("amd").node_selector(ARCH, "amd64").build().unwrap();
    let arm = pod("arm").node_selector(ARCH, "arm64").build().unwrap();
    let pools = [
        pool("heavy-arm")
            .with_weight(100)
            .with_requirement(req(ARCH, Operator::In, &["arm64"])),
        pool("light"),
    ];
    let pods = [amd.clone(), arm.clone()];
    let results = solve(&pools, &Cluster::default(), &pods);
    assert_eq!(&*expect_claim(&results, &arm).node_pool, "heavy-arm");
    assert_eq!(&*expect_claim(&results, &amd).node_pool, "light");
}

#[test]
fn nodepool_whose_requirements_exclude_every_instance_type_is_dropped() {
    let pools = [
        pool("impossible").with_weight(100).with_requirement(req(
            INSTANCE_TYPE,
            Operator::In,
            &["no-such-type"],
        )),
        pool("fallback"),
    ];
    let pods = [pod("p").cpu("1").build().unwrap()];
    let scheduler = Scheduler::new(&pools, &Cluster::default(), &pods, respect());
    let dropped: Vec<&str> = scheduler.dropped_pools().iter().map(|d| &*d.name).collect();
    assert_eq!(dropped, ["impossible"]);
    let results = scheduler.solve(&pods);
    assert_eq!(&*expect_claim(&results, &pods[0]).node_pool, "fallback");
}

#[test]
fn nodepool_whose_only_offerings_are_excluded_is_dropped() {
    // Spot is only offered in zones 1 and 2: spot in zone 3 leaves no offering at all.
    let pools = [pool("spot-z3")
        .with_requirement(req(
            scheduling::labels::CAPACITY_TYPE,
            Operator::In,
            &["spot"],
        ))
        .with_requirement(req(TOPOLOGY_ZONE, Operator::In, &[ZONE_3]))];
    let pods = [pod("p").cpu("1").build().unwrap()];
    let scheduler = Scheduler::new(&pools, &Cluster::default(), &pods, respect());
    assert_eq!(scheduler.dropped_pools().len(), 1);
    let results = scheduler.solve(&pods);
    let message = expect_error(&results, &pods[0]);
    assert!(message.contains("spot-z3"), "{message}");
    assert!(message.contains("filtered out"), "{message}");
}

#[test]
fn pods_must_tolerate_nodepool_taints() {
    let pools = [pool("tainted").with_taint(taint("dedicated", "gpu", TaintEffect::NoSchedule))];
    let intolerant = pod("intolerant").build().unwrap();
    let tolerant = pod("tolerant")
        .toleration(tolerate_equal("dedicated", "gpu", TaintEffect::NoSchedule))
        .build()
        .unwrap();
    let pods = [intolerant.clone(), tolerant.clone()];
    let results = solve(&pools, &Cluster::default(), &pods);
    let message = expect_error(&results, &intolerant);
    assert!(message.contains("dedicated"), "{message}");
    let claim = expect_claim(&results, &tolerant);
    assert_eq!(claim.taints.len(), 1);
    assert_eq!(claim.taints[0].key, "dedicated");
}

#[test]
fn toleration_with_the_wrong_value_does_not_tolerate_a_nodepool_taint() {
    let pools = [pool("tainted").with_taint(taint("dedicated", "gpu", TaintEffect::NoSchedule))];
    let wrong = pod("wrong")
        .toleration(tolerate_equal("dedicated", "cpu", TaintEffect::NoSchedule))
        .build()
        .unwrap();
    let results = solve(&pools, &Cluster::default(), std::slice::from_ref(&wrong));
    expect_error(&results, &wrong);
}

#[test]
fn tainted_heavier_nodepool_is_skipped_for_pods_that_do_not_tolerate_it() {
    let pools = [
        pool("tainted").with_weight(100).with_taint(taint(
            "dedicated",
            "x",
            TaintEffect::NoSchedule,
        )),
        pool("open"),
    ];
    let plain = pod("plain").build().unwrap();
    let tolerant = pod("tolerant")
        .toleration(tolerate("dedicated"))
        .build()
        .unwrap();
    let results = solve(&pools, &Cluster::default(), std::slice::from_ref(&plain));
    assert_eq!(&*expect_claim(&results, &plain).node_pool, "open");
    let results = solve(&pools, &Cluster::default(), std::slice::from_ref(&tolerant));
    assert_eq!(&*expect_claim(&results, &tolerant).node_pool, "tainted");
}

#[test]
fn pod_joins_an_in_flight_claim_of_a_lighter_nodepool_before_opening_a_heavier_one() {
    // In-flight NodeClaims are tried before new ones, whatever their NodePool's weight.
    let pools = [
        pool("tainted").with_weight(100).with_taint(taint(
            "dedicated",
            "x",
            TaintEffect::NoSchedule,
        )),
        pool("open"),
    ];
    let plain = pod("plain").cpu("2").build().unwrap();
    let tolerant = pod("tolerant")
        .cpu("1")
        .toleration(tolerate("dedicated"))
        .build()
        .unwrap();
    let pods = [plain.clone(), tolerant.clone()];
    let results = solve(&pools, &Cluster::default(), &pods);
    assert_eq!(results.new_node_claims.len(), 1);
    assert_eq!(&*expect_claim(&results, &tolerant).node_pool, "open");
}

#[test]
fn startup_taints_need_no_toleration_and_are_carried_to_the_plan() {
    let pools =
        [pool("starting").with_startup_taint(taint("init", "true", TaintEffect::NoSchedule))];
    let p = pod("p").build().unwrap();
    let results = solve(&pools, &Cluster::default(), std::slice::from_ref(&p));
    let claim = expect_claim(&results, &p);
    assert!(claim.taints.is_empty());
    assert_eq!(claim.startup_taints.len(), 1);
    assert_eq!(claim.startup_taints[0].key, "init");
}

#[test]
fn template_labels_flow_into_the_planned_node_claim() {
    let pools = [pool("labelled").with_label("team", "payments")];
    let p = pod("p").build().unwrap();
    let results = solve(&pools, &Cluster::default(), std::slice::from_ref(&p));
    let claim = expect_claim(&results, &p);
    assert_eq!(claim.labels.get("team").map(|v| &**v), Some("payments"));
    assert_eq!(claim.labels.get(NODE_POOL).map(|v| &**v), Some("labelled"));
    assert_eq!(values(claim, "team"), ["payments"]);
    assert_eq!(values(claim, NODE_POOL), ["labelled"]);
}

#[test]
fn simulation_only_registered_and_initialized_keys_are_stripped_from_the_plan() {
    let p = pod("p").build().unwrap();
    let results = solve_default(std::slice::from_ref(&p));
    let claim = expect_claim(&results, &p);
    for key in [
        scheduling::labels::NODE_REGISTERED,
        scheduling::labels::NODE_INITIALIZED,
        scheduling::labels::HOSTNAME,
    ] {
        assert!(claim.requirements.get(key).is_none(), "{key} leaked");
    }
}

#[test]
fn nodepool_requirements_flow_into_the_plan() {
    let pools = [pool("zonal").with_requirement(req(TOPOLOGY_ZONE, Operator::In, &[ZONE_2]))];
    let p = pod("p").build().unwrap();
    let results = solve(&pools, &Cluster::default(), std::slice::from_ref(&p));
    assert_eq!(zone(expect_claim(&results, &p)), ZONE_2);
}

#[test]
fn pod_selector_outside_the_nodepool_requirements_is_not_scheduled() {
    let pools = [pool("zonal").with_requirement(req(TOPOLOGY_ZONE, Operator::In, &[ZONE_2]))];
    let p = pod("p")
        .node_selector(TOPOLOGY_ZONE, ZONE_1)
        .build()
        .unwrap();
    let results = solve(&pools, &Cluster::default(), std::slice::from_ref(&p));
    let message = expect_error(&results, &p);
    assert!(message.contains("incompatible requirements"), "{message}");
}

#[test]
fn pod_selector_narrows_a_multi_valued_nodepool_requirement() {
    let pools = [pool("teams").with_requirement(req("team", Operator::In, &["a", "b"]))];
    let b = pod("b").node_selector("team", "b").build().unwrap();
    let c = pod("c").node_selector("team", "c").build().unwrap();
    let pods = [b.clone(), c.clone()];
    let results = solve(&pools, &Cluster::default(), &pods);
    assert_eq!(values(expect_claim(&results, &b), "team"), ["b"]);
    expect_error(&results, &c);
}

#[test]
fn custom_label_defined_by_the_nodepool_can_be_selected() {
    let pools = [pool("labelled").with_label("team", "payments")];
    let p = pod("p").node_selector("team", "payments").build().unwrap();
    let results = solve(&pools, &Cluster::default(), std::slice::from_ref(&p));
    expect_claim(&results, &p);
}

#[test]
fn exists_requirement_keeps_the_nodepools_label_value() {
    let pools = [pool("labelled").with_label("team", "payments")];
    let p = pod("p")
        .require("team", Operator::Exists, &[])
        .build()
        .unwrap();
    let results = solve(&pools, &Cluster::default(), std::slice::from_ref(&p));
    assert_eq!(values(expect_claim(&results, &p), "team"), ["payments"]);
}

#[test]
fn pods_selecting_the_same_custom_value_share_a_node_claim() {
    let pools = [pool("teams").with_requirement(req("team", Operator::In, &["a", "b"]))];
    let one = pod("one").node_selector("team", "a").build().unwrap();
    let two = pod("two").node_selector("team", "a").build().unwrap();
    let results = solve(&pools, &Cluster::default(), &[one, two]);
    assert_eq!(results.new_node_claims.len(), 1);
}

#[test]
fn pods_selecting_different_custom_values_get_different_node_claims() {
    let pools = [pool("teams").with_requirement(req("team", Operator::In, &["a", "b"]))];
    let a = pod("a").node_selector("team", "a").build().unwrap();
    let b = pod("b").node_selector("team", "b").build().unwrap();
    let results = solve(&pools, &Cluster::default(), &[a.clone(), b.clone()]);
    assert_eq!(results.new_node_claims.len(), 2);
    assert_eq!(values(expect_claim(&results, &a), "team"), ["a"]);
    assert_eq!(values(expect_claim(&results, &b), "team"), ["b"]);
}

#[test]
fn node_selector_requirements_and_preferences_combine() {
    let p = pod("p")
        .node_selector(ARCH, "amd64")
        .require(TOPOLOGY_ZONE, Operator::In, &[ZONE_1, ZONE_2])
        .require(INSTANCE_TYPE, Operator::NotIn, &["small-instance-type"])
        .prefer(10, TOPOLOGY_ZONE, Operator::In, &[ZONE_2, ZONE_3])
        .build()
        .unwrap();
    let results = solve_default(std::slice::from_ref(&p));
    let claim = expect_claim(&results, &p);
    assert_eq!(zone(claim), ZONE_2);
    assert_eq!(values(claim, ARCH), ["amd64"]);
    assert_eq!(names(claim)[0], "default-instance-type");
}

#[test]
fn custom_label_defined_nowhere_cannot_be_selected() {
    let p = pod("p").node_selector("team", "payments").build().unwrap();
    let results = solve_default(std::slice::from_ref(&p));
    let message = expect_error(&results, &p);
    assert!(message.contains("does not have known values"), "{message}");
    assert!(message.contains("team"), "{message}");
}

#[test]
fn custom_label_defined_by_an_instance_type_can_be_selected() {
    // `size` is a fake well-known label every instance type defines.
    let p = pod("p")
        .node_selector(scheduling::fixtures::LABEL_INSTANCE_SIZE, "large")
        .build()
        .unwrap();
    let results = solve_default(std::slice::from_ref(&p));
    assert_eq!(names(expect_claim(&results, &p)), ["arm-instance-type"]);
}

#[test]
fn undefined_well_known_label_can_be_selected() {
    // No instance type or NodePool defines the region: a well-known key may stay undefined.
    let p = pod("p")
        .node_selector(TOPOLOGY_REGION, "region-1")
        .build()
        .unwrap();
    let results = solve_default(std::slice::from_ref(&p));
    assert_eq!(
        values(expect_claim(&results, &p), TOPOLOGY_REGION),
        ["region-1"]
    );
}

#[test]
fn undefined_custom_label_with_not_in_is_schedulable() {
    let p = pod("p")
        .require("team", Operator::NotIn, &["payments"])
        .build()
        .unwrap();
    let results = solve_default(std::slice::from_ref(&p));
    expect_claim(&results, &p);
}

#[test]
fn undefined_custom_label_with_does_not_exist_is_schedulable() {
    let p = pod("p")
        .require("team", Operator::DoesNotExist, &[])
        .build()
        .unwrap();
    let results = solve_default(std::slice::from_ref(&p));
    expect_claim(&results, &p);
}

#[test]
fn undefined_custom_label_with_exists_is_not_schedulable() {
    let p = pod("p")
        .require("team", Operator::Exists, &[])
        .build()
        .unwrap();
    let results = solve_default(std::slice::from_ref(&p));
    expect_error(&results, &p);
}

#[test]
fn defined_custom_label_with_does_not_exist_is_not_schedulable() {
    let pools = [pool("labelled").with_label("team", "payments")];
    let p = pod("p")
        .require("team", Operator::DoesNotExist, &[])
        .build()
        .unwrap();
    let results = solve(&pools, &Cluster::default(), std::slice::from_ref(&p));
    expect_error(&results, &p);
}

#[test]
fn defined_custom_label_with_not_in_its_value_is_not_schedulable() {
    let pools = [pool("labelled").with_label("team", "payments")];
    let p = pod("p")
        .require("team", Operator::NotIn, &["payments"])
        .build()
        .unwrap();
    let results = solve(&pools, &Cluster::default(), std::slice::from_ref(&p));
    expect_error(&results, &p);
}

#[test]
fn pod_requiring_that_the_nodepool_label_does_not_exist_is_not_scheduled() {
    let p = pod("p")
        .require(NODE_POOL, Operator::DoesNotExist, &[])
        .build()
        .unwrap();
    let results = solve_default(std::slice::from_ref(&p));
    assert!(results.new_node_claims.is_empty());
    expect_error(&results, &p);
}

#[test]
fn pod_selecting_a_nodepool_by_name_uses_that_nodepool() {
    let pools = [pool("first").with_weight(100), pool("chosen")];
    let p = pod("p").node_selector(NODE_POOL, "chosen").build().unwrap();
    let results = solve(&pools, &Cluster::default(), std::slice::from_ref(&p));
    assert_eq!(&*expect_claim(&results, &p).node_pool, "chosen");
}

#[test]
fn pod_selecting_an_unknown_nodepool_is_not_scheduled() {
    let pools = [pool("a"), pool("b")];
    let p = pod("p").node_selector(NODE_POOL, "c").build().unwrap();
    let results = solve(&pools, &Cluster::default(), std::slice::from_ref(&p));
    let message = expect_error(&results, &p);
    assert!(
        message.contains("\"a\"") && message.contains("\"b\""),
        "{message}"
    );
}

#[test]
fn pods_of_different_nodepools_never_share_a_node_claim() {
    let pools = [pool("a"), pool("b")];
    let in_a = pod("in-a").node_selector(NODE_POOL, "a").build().unwrap();
    let in_b = pod("in-b").node_selector(NODE_POOL, "b").build().unwrap();
    let pods = [in_a.clone(), in_b.clone()];
    let results = solve(&pools, &Cluster::default(), &pods);
    assert_eq!(results.new_node_claims.len(), 2);
    assert_eq!(&*expect_claim(&results, &in_a).node_pool, "a");
    assert_eq!(&*expect_claim(&results, &in_b).node_pool, "b");
}

#[test]
fn nodepool_instance_type_requirement_limits_the_options() {
    let pools = [pool("only-default").with_requirement(req(
        INSTANCE_TYPE,
        Operator::In,
        &["default-instance-type"],
    ))];
    let p = pod("p").build().unwrap();
    let results = solve(&pools, &Cluster::default(), std::slice::from_ref(&p));
    assert_eq!(names(expect_claim(&results, &p)), ["default-instance-type"]);
}

#[test]
fn no_nodepools_means_no_plan_and_an_error() {
    let p = pod("p").build().unwrap();
    let results = solve(&[], &Cluster::default(), std::slice::from_ref(&p));
    assert!(results.new_node_claims.is_empty());
    let message = expect_error(&results, &p);
    assert!(message.contains("no nodepools"), "{message}");
}
