//! Evaluation and application of NodeOverlays, after upstream's NodeOverlay controller suite:
//! conflicts by instance type, by offering, by price and by capacity; which NodePool and which
//! offering an overlay reaches; weights; no partial application; and the store's edges.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::collections::BTreeMap;
use std::sync::Arc;

use api::common::NodeSelectorOperator as Op;
use api::nodeoverlay::OverlayRequirement;
use api::{NodeOverlay, NodeOverlaySpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as KQuantity;
use scheduling::fixtures::FakeInstanceType;
use scheduling::instance_type::{InstanceType, Offering, OverlayMarks};
use scheduling::labels::{CAPACITY_TYPE, NODE_POOL, TOPOLOGY_ZONE, WellKnownLabels};
use scheduling::quantity::Quantity;
use scheduling::resources::{ResourceName, Resources};

use super::*;

fn wk() -> WellKnownLabels {
    WellKnownLabels::default()
}

struct O(NodeOverlay);

fn overlay(name: &str, weight: Option<i32>) -> O {
    O(NodeOverlay::new(
        name,
        NodeOverlaySpec {
            capacity: None,
            price: None,
            price_adjustment: None,
            requirements: Vec::new(),
            weight,
        },
    ))
}

impl O {
    fn req(mut self, key: &str, op: Op, values: &[&str]) -> Self {
        self.0.spec.requirements.push(OverlayRequirement {
            key: key.into(),
            operator: op,
            values: (!values.is_empty()).then(|| values.iter().map(|v| (*v).into()).collect()),
        });
        self
    }
    fn price(mut self, p: &str) -> Self {
        self.0.spec.price = Some(p.into());
        self
    }
    fn adjust(mut self, a: &str) -> Self {
        self.0.spec.price_adjustment = Some(a.into());
        self
    }
    fn capacity(mut self, name: &str, q: &str) -> Self {
        self.0
            .spec
            .capacity
            .get_or_insert_with(BTreeMap::new)
            .insert(name.into(), KQuantity(q.into()));
        self
    }
}

fn pool(name: &str, its: &[Arc<InstanceType>]) -> PoolInput {
    PoolInput {
        name: name.into(),
        labels: BTreeMap::new(),
        instance_types: its.to_vec(),
    }
}

fn it(name: &str, offerings: &[(&str, &str, f64)]) -> Arc<InstanceType> {
    let mut b = FakeInstanceType::new(name);
    for (ct, zone, price) in offerings {
        b = b.offering(Offering::new(ct, zone, *price));
    }
    Arc::new(b.build().unwrap())
}

/// The base catalogue upstream's suite uses: one type, one spot offering in test-zone-1.
fn default_it() -> Arc<InstanceType> {
    it("default-instance-type", &[("spot", "test-zone-1", 1.02)])
}

/// Four offerings: spot/z1, on-demand/z2, spot/z3, reserved/z4 (upstream's offering table).
fn four_offerings() -> Arc<InstanceType> {
    it(
        "default-instance-type",
        &[
            ("spot", "test-zone-1", 1.02),
            ("on-demand", "test-zone-2", 5.02),
            ("spot", "test-zone-3", 0.52),
            ("reserved", "test-zone-4", 2.02),
        ],
    )
}

fn run(overlays: Vec<O>, pools: &[PoolInput]) -> Evaluation {
    let input: Vec<(String, Result<Overlay, String>)> = overlays
        .into_iter()
        .map(|o| {
            let name = o.0.metadata.name.clone().unwrap();
            (name, validate(&o.0, &wk()))
        })
        .collect();
    evaluate(&input, pools, &wk())
}

fn outcome(e: &Evaluation, name: &str) -> &'static str {
    match &e.outcomes[name] {
        Outcome::Applied => "Applied",
        Outcome::Invalid(_) => "Invalid",
        Outcome::Conflict(_) => "Conflict",
    }
}

fn applied(e: &Evaluation, pool: &str, its: &[Arc<InstanceType>]) -> Vec<Arc<InstanceType>> {
    let store = OverlayStore::new();
    store.swap(e.evaluated.clone());
    store.apply(pool, its.to_vec()).unwrap()
}

fn prices(it: &InstanceType) -> Vec<f64> {
    it.offerings()
        .iter()
        .map(|o| (o.price * 1e6).round() / 1e6)
        .collect()
}

fn fuse() -> ResourceName {
    ResourceName::new("smarter-devices/fuse")
}

#[test]
fn without_overlays_prices_are_unchanged() {
    let its = [default_it()];
    let e = run(vec![], &[pool("default", &its)]);
    let out = applied(&e, "default", &its);
    assert!(Arc::ptr_eq(&out[0], &its[0]), "passed through, not rebuilt");
    assert_eq!(prices(&out[0]), [1.02]);
}

#[test]
fn one_overlay_is_applied() {
    let its = [default_it()];
    let e = run(
        vec![overlay("a", Some(10)).price("13234.223")],
        &[pool("default", &its)],
    );
    assert_eq!(outcome(&e, "a"), "Applied");
    let out = applied(&e, "default", &its);
    assert_eq!(prices(&out[0]), [13234.223]);
    assert_eq!(
        out[0].overlay_marks(),
        OverlayMarks {
            price: true,
            capacity: false
        }
    );
    assert_eq!(
        out[0].requirements().to_string(),
        its[0].requirements().to_string(),
        "requirements are not changed (no nodepool key added)"
    );
}

#[test]
fn invalid_overlays_are_reported_and_never_applied() {
    let its = [default_it()];
    let e = run(
        vec![
            overlay("bad", Some(10))
                .req("karpenter.sh/custom", Op::Exists, &[])
                .price("5"),
        ],
        &[pool("default", &its)],
    );
    assert_eq!(outcome(&e, "bad"), "Invalid");
    assert_eq!(prices(&applied(&e, "default", &its)[0]), [1.02]);
}

#[test]
fn overlapping_instance_types_at_the_same_weight_conflict_the_later_name_wins() {
    let arm = Arc::new(
        FakeInstanceType::new("arm")
            .architecture("arm64")
            .offering(Offering::new("spot", "test-zone-1", 1.02))
            .build()
            .unwrap(),
    );
    let its = [arm];
    let e = run(
        vec![
            overlay("overlay-a", Some(10))
                .req("kubernetes.io/arch", Op::In, &["arm64"])
                .price("1"),
            overlay("overlay-b", Some(10))
                .req(CAPACITY_TYPE, Op::Exists, &[])
                .price("2"),
        ],
        &[pool("default", &its)],
    );
    assert_eq!(outcome(&e, "overlay-a"), "Conflict");
    assert_eq!(outcome(&e, "overlay-b"), "Applied");
    let Outcome::Conflict(message) = &e.outcomes["overlay-a"] else {
        unreachable!()
    };
    assert!(
        message.starts_with("conflict with another overlay") && message.contains("overlay-b"),
        "{message}"
    );
    assert_eq!(prices(&applied(&e, "default", &its)[0]), [2.0]);
}

#[test]
fn disjoint_instance_types_do_not_conflict() {
    let amd = it("amd", &[("spot", "test-zone-1", 1.0)]);
    let arm = Arc::new(
        FakeInstanceType::new("arm")
            .architecture("arm64")
            .operating_systems(&["linux"])
            .offering(Offering::new("spot", "test-zone-1", 1.0))
            .build()
            .unwrap(),
    );
    let its = [amd, arm];
    let e = run(
        vec![
            overlay("a", Some(10))
                .req("kubernetes.io/arch", Op::In, &["amd64"])
                .price("3"),
            overlay("b", Some(10))
                .req("kubernetes.io/os", Op::In, &["linux"])
                .req("kubernetes.io/arch", Op::In, &["arm64"])
                .price("4"),
        ],
        &[pool("default", &its)],
    );
    assert_eq!((outcome(&e, "a"), outcome(&e, "b")), ("Applied", "Applied"));
    let out = applied(&e, "default", &its);
    assert_eq!((prices(&out[0]), prices(&out[1])), (vec![3.0], vec![4.0]));
}

#[test]
fn offerings_decide_conflicts() {
    let its = [four_offerings()];
    let pools = [pool("default", &its)];
    for (a, b, conflict) in [
        // Overlap on zone-1 / zone-4.
        (
            overlay("a", Some(10))
                .req(TOPOLOGY_ZONE, Op::In, &["test-zone-1", "test-zone-4"])
                .price("1"),
            overlay("b", Some(10))
                .req(CAPACITY_TYPE, Op::Exists, &[])
                .price("2"),
            true,
        ),
        // Overlap on capacity type.
        (
            overlay("a", Some(10))
                .req(CAPACITY_TYPE, Op::Exists, &[])
                .price("1"),
            overlay("b", Some(10))
                .req(CAPACITY_TYPE, Op::In, &["spot"])
                .price("2"),
            true,
        ),
        // Zones 6 and 4 against spot: no common offering.
        (
            overlay("a", Some(10))
                .req(TOPOLOGY_ZONE, Op::In, &["test-zone-6", "test-zone-4"])
                .price("1"),
            overlay("b", Some(10))
                .req(CAPACITY_TYPE, Op::In, &["spot"])
                .price("2"),
            false,
        ),
        // Zones 1 and 4 against spot: spot/zone-1 is common.
        (
            overlay("a", Some(10))
                .req(TOPOLOGY_ZONE, Op::In, &["test-zone-1", "test-zone-4"])
                .price("1"),
            overlay("b", Some(10))
                .req(CAPACITY_TYPE, Op::In, &["spot"])
                .price("2"),
            true,
        ),
    ] {
        let e = run(vec![a, b], &pools);
        assert_eq!(outcome(&e, "b"), "Applied");
        assert_eq!(
            outcome(&e, "a"),
            if conflict { "Conflict" } else { "Applied" }
        );
    }
}

#[test]
fn same_weight_prices_conflict_even_when_equal_but_not_when_exclusive_or_weighted() {
    let its = [default_it()];
    let pools = [pool("default", &its)];
    let e = run(
        vec![
            overlay("a", Some(10)).price("1"),
            overlay("b", Some(10)).adjust("+1"),
        ],
        &pools,
    );
    assert_eq!(
        outcome(&e, "a"),
        "Conflict",
        "price and adjustment share a slot"
    );
    let e = run(
        vec![
            overlay("a", Some(10)).price("1"),
            overlay("b", Some(10)).price("1"),
        ],
        &pools,
    );
    assert_eq!(
        outcome(&e, "a"),
        "Conflict",
        "identical values still conflict"
    );
    let e = run(
        vec![
            overlay("a", Some(10))
                .req(CAPACITY_TYPE, Op::In, &["spot"])
                .price("1"),
            overlay("b", Some(10))
                .req(CAPACITY_TYPE, Op::NotIn, &["spot"])
                .price("2"),
        ],
        &pools,
    );
    assert_eq!((outcome(&e, "a"), outcome(&e, "b")), ("Applied", "Applied"));
    let e = run(
        vec![
            overlay("a", Some(10)).price("1"),
            overlay("b", Some(20)).price("2"),
        ],
        &pools,
    );
    assert_eq!((outcome(&e, "a"), outcome(&e, "b")), ("Applied", "Applied"));
    assert_eq!(
        prices(&applied(&e, "default", &its)[0]),
        [2.0],
        "weight 20 wins"
    );
}

#[test]
fn capacity_conflicts_need_the_same_resource_at_the_same_weight() {
    let its = [default_it()];
    let pools = [pool("default", &its)];
    let e = run(
        vec![
            overlay("conflicting-overlay-1", Some(10)).capacity("hugepages-1Gi", "2"),
            overlay("conflicting-overlay-2", Some(10)).capacity("hugepages-1Gi", "4"),
            overlay("good-overlay-1", Some(10)).capacity("smarter-devices/fuse", "1"),
        ],
        &pools,
    );
    assert_eq!(outcome(&e, "conflicting-overlay-1"), "Conflict");
    assert_eq!(outcome(&e, "conflicting-overlay-2"), "Applied");
    assert_eq!(outcome(&e, "good-overlay-1"), "Applied");
    let out = applied(&e, "default", &its);
    assert_eq!(
        out[0].capacity().get(&ResourceName::new("hugepages-1Gi")),
        Some(Quantity::from_value(4))
    );
    assert_eq!(
        out[0].capacity().get(&fuse()),
        Some(Quantity::from_value(1))
    );
    // Not only the last recorded overlay counts: X and Z set foo, Y (between them) bar.
    let e = run(
        vec![
            overlay("x", Some(10)).capacity("example.com/foo", "1"),
            overlay("y", Some(10)).capacity("example.com/bar", "1"),
            overlay("z", Some(10)).capacity("example.com/foo", "2"),
        ],
        &pools,
    );
    assert_eq!(outcome(&e, "x"), "Conflict");
    let e = run(
        vec![
            overlay("a", Some(10)).capacity("smarter-devices/fuse", "1"),
            overlay("b", Some(20)).capacity("smarter-devices/fuse", "99"),
        ],
        &pools,
    );
    assert_eq!((outcome(&e, "a"), outcome(&e, "b")), ("Applied", "Applied"));
    assert_eq!(
        applied(&e, "default", &its)[0].capacity().get(&fuse()),
        Some(Quantity::from_value(99)),
        "the higher weight wins"
    );
    let e = run(
        vec![
            overlay("a", Some(10))
                .req(CAPACITY_TYPE, Op::In, &["spot"])
                .capacity("smarter-devices/fuse", "1"),
            overlay("b", Some(10))
                .req(CAPACITY_TYPE, Op::In, &["on-demand"])
                .capacity("smarter-devices/fuse", "2"),
        ],
        &pools,
    );
    assert_eq!((outcome(&e, "a"), outcome(&e, "b")), ("Applied", "Applied"));
}

#[test]
fn a_price_overlay_and_a_capacity_overlay_never_conflict_and_both_apply() {
    let its = [default_it()];
    let e = run(
        vec![
            overlay("price", Some(10)).adjust("+1000"),
            overlay("capacity", Some(10)).capacity("smarter-devices/fuse", "1"),
        ],
        &[pool("default", &its)],
    );
    assert_eq!(
        (outcome(&e, "price"), outcome(&e, "capacity")),
        ("Applied", "Applied")
    );
    let out = applied(&e, "default", &its);
    assert_eq!(prices(&out[0]), [1001.02]);
    assert_eq!(
        out[0].capacity().get(&fuse()),
        Some(Quantity::from_value(1))
    );
    assert_eq!(
        out[0].allocatable().get(&fuse()),
        Some(Quantity::from_value(1)),
        "allocatable follows the capacity, so a pod requesting it fits"
    );
    let request: Resources = [(fuse(), Quantity::from_value(1))].into_iter().collect();
    assert!(out[0].fits(&request) && !its[0].fits(&request));
    assert_eq!(
        out[0].overlay_marks(),
        OverlayMarks {
            price: true,
            capacity: true
        }
    );
}

#[test]
fn a_nodepool_requirement_reaches_only_that_pool() {
    let its = [default_it()];
    let pools = [pool("a", &its), pool("b", &its)];
    let e = run(
        vec![
            overlay("o", Some(10))
                .req(NODE_POOL, Op::In, &["a"])
                .adjust("+1000"),
        ],
        &pools,
    );
    assert_eq!(prices(&applied(&e, "a", &its)[0]), [1001.02]);
    assert_eq!(prices(&applied(&e, "b", &its)[0]), [1.02]);
}

#[test]
fn a_template_label_reaches_only_the_labelled_pool() {
    let its = [default_it()];
    let mut labelled = pool("labelled", &its);
    labelled.labels.insert("test-label".into(), "x".into());
    let pools = [labelled, pool("plain", &its)];
    let e = run(
        vec![
            overlay("o", Some(10))
                .req("test-label", Op::In, &["x"])
                .capacity("smarter-devices/fuse", "1"),
        ],
        &pools,
    );
    assert_eq!(
        applied(&e, "labelled", &its)[0].capacity().get(&fuse()),
        Some(Quantity::from_value(1))
    );
    assert_eq!(applied(&e, "plain", &its)[0].capacity().get(&fuse()), None);
}

#[test]
fn an_overlay_reaches_only_its_offerings() {
    let its = [four_offerings()];
    let pools = [pool("default", &its)];
    let e = run(
        vec![
            overlay("od", Some(10))
                .req(CAPACITY_TYPE, Op::In, &["on-demand"])
                .adjust("+1000"),
        ],
        &pools,
    );
    assert_eq!(
        prices(&applied(&e, "default", &its)[0]),
        [1.02, 1005.02, 0.52, 2.02]
    );
    // Weights decide per offering: 20 on zone 2, 10 on zones 2 and 4.
    let e = run(
        vec![
            overlay("high", Some(20))
                .req(TOPOLOGY_ZONE, Op::In, &["test-zone-2"])
                .adjust("+201"),
            overlay("low", Some(10))
                .req(TOPOLOGY_ZONE, Op::In, &["test-zone-2", "test-zone-4"])
                .adjust("-1.5"),
        ],
        &pools,
    );
    assert_eq!(
        prices(&applied(&e, "default", &its)[0]),
        [1.02, 206.02, 0.52, 0.52]
    );
    // Same weight, disjoint offerings: each gets its own.
    let e = run(
        vec![
            overlay("z1", Some(10))
                .req(TOPOLOGY_ZONE, Op::In, &["test-zone-1"])
                .adjust("+202"),
            overlay("z3", Some(10))
                .req(TOPOLOGY_ZONE, Op::In, &["test-zone-3"])
                .price("0.1"),
        ],
        &pools,
    );
    assert_eq!(
        (outcome(&e, "z1"), outcome(&e, "z3")),
        ("Applied", "Applied")
    );
    assert_eq!(
        prices(&applied(&e, "default", &its)[0]),
        [203.02, 5.02, 0.1, 2.02]
    );
}

#[test]
fn a_conflicting_overlay_is_applied_nowhere_not_even_where_it_is_alone() {
    let small = it("small", &[("spot", "test-zone-1", 1.0)]);
    let other = it("other", &[("spot", "test-zone-1", 1.0)]);
    let its = [small, other];
    let pools = [pool("p1", &its[..1]), pool("p2", &its)];
    let e = run(
        vec![
            overlay("a", Some(10)).price("7"),
            overlay("b", Some(10))
                .req("node.kubernetes.io/instance-type", Op::In, &["small"])
                .price("3"),
        ],
        &pools,
    );
    assert_eq!(
        (outcome(&e, "a"), outcome(&e, "b")),
        ("Conflict", "Applied")
    );
    let p2 = applied(&e, "p2", &its);
    assert_eq!((prices(&p2[0]), prices(&p2[1])), (vec![3.0], vec![1.0]));
}

#[test]
fn the_store_refuses_unevaluated_pools_and_marks_unseen_instance_types_stale() {
    let its = [default_it()];
    let store = OverlayStore::new();
    assert_eq!(
        store.apply("default", its.to_vec()).unwrap_err(),
        Unevaluated("default".into())
    );
    let e = run(
        vec![overlay("o", None).price("2")],
        &[pool("default", &its)],
    );
    store.swap(e.evaluated);
    assert!(store.apply("other", its.to_vec()).is_err());
    assert!(!store.take_stale());
    let out = store.apply("default", its.to_vec()).unwrap();
    assert_eq!(prices(&out[0]), [2.0]);
    assert!(!store.take_stale(), "every instance type was seen");
    let new = it("added-since", &[("spot", "test-zone-1", 4.0)]);
    let out = store
        .apply("default", vec![its[0].clone(), new.clone()])
        .unwrap();
    assert_eq!(prices(&out[1]), [4.0], "not evaluated: unchanged");
    assert!(store.take_stale(), "the controller must evaluate again");
    assert!(!store.take_stale(), "taken");
    let moved = it("default-instance-type", &[("spot", "test-zone-9", 1.02)]);
    store.apply("default", vec![moved]).unwrap();
    assert!(store.take_stale(), "changed offerings are stale too");
}

#[test]
fn an_adjustment_keeps_an_unpriced_offering_unpriced_a_price_prices_it() {
    let unpriced = Arc::new(
        FakeInstanceType::new("u")
            .offering(Offering::unpriced("on-demand", "z1"))
            .build()
            .unwrap(),
    );
    let its = [unpriced];
    let pools = [pool("default", &its)];
    let e = run(vec![overlay("o", None).adjust("+1")], &pools);
    let out = applied(&e, "default", &its);
    assert!(!out[0].offerings().iter().next().unwrap().priced);
    assert_eq!(out[0].overlay_marks(), OverlayMarks::default());
    let e = run(vec![overlay("o", None).price("0.5")], &pools);
    let out = applied(&e, "default", &its);
    let o = out[0].offerings().iter().next().unwrap();
    assert!(o.priced && (o.price - 0.5).abs() < 1e-12);
}

#[test]
fn a_custom_key_only_the_overlay_has_selects_nothing_unless_negative() {
    let its = [default_it()];
    let pools = [pool("default", &its)];
    let e = run(
        vec![overlay("o", None).req("team", Op::In, &["x"]).price("9")],
        &pools,
    );
    assert_eq!(outcome(&e, "o"), "Applied");
    assert_eq!(prices(&applied(&e, "default", &its)[0]), [1.02]);
    let e = run(
        vec![
            overlay("o", None)
                .req("team", Op::DoesNotExist, &[])
                .price("9"),
        ],
        &pools,
    );
    assert_eq!(prices(&applied(&e, "default", &its)[0]), [9.0]);
}
