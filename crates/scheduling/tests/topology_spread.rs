//! Topology spread constraints, driven through a miniature scheduler: zonal and hostname
//! spread, maxSkew, minDomains, NodePool domains, matchLabelKeys, selectors, and which existing
//! pods count (upstream `topology_test.go`, by behaviour).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod topology_support;

use scheduling::pod::{LabelSelector, SelectorExpression, SelectorOperator};
use topology_support::*;

fn test_sel() -> LabelSelector {
    sel(&[("test", "test")])
}

fn zonal(max_skew: i32) -> P {
    pod("p")
        .label("test", "test")
        .spread(tsc(ZONE, max_skew, Some(test_sel())))
}

#[test]
fn zonal_spread_balances_pods_across_zones() {
    let batch = pods("p", 4, &zonal(1));
    let mut sim = world().sim(&batch);
    assert!(sim.run(&batch).is_empty());
    assert_eq!(sim.skew(ZONE, &test_sel()), [1, 1, 2]);
}

#[test]
fn zonal_spread_with_match_expressions_selector() {
    let selector = LabelSelector {
        match_expressions: vec![SelectorExpression {
            key: arc("test"),
            operator: SelectorOperator::In,
            values: vec![arc("test")],
        }],
        ..LabelSelector::default()
    };
    let batch = pods(
        "p",
        4,
        &pod("p")
            .label("test", "test")
            .spread(tsc(ZONE, 1, Some(selector))),
    );
    let mut sim = world().sim(&batch);
    assert!(sim.run(&batch).is_empty());
    assert_eq!(sim.skew(ZONE, &test_sel()), [1, 1, 2]);
}

#[test]
fn zonal_spread_only_uses_zones_the_nodepool_offers() {
    let w = World::with_pool(reqs(&[(ZONE, &[ZONE_1, ZONE_2])]));
    let batch = pods("p", 4, &zonal(1));
    let mut sim = w.sim(&batch);
    assert!(sim.run(&batch).is_empty());
    assert_eq!(sim.skew(ZONE, &test_sel()), [2, 2]);
}

#[test]
fn zonal_spread_with_a_zone_pinned_by_nodepool_labels_packs_one_zone() {
    let w = World::with_pool(reqs(&[(ZONE, &[ZONE_1, ZONE_2]), (ZONE, &[ZONE_1])]));
    let batch = pods("p", 4, &zonal(1));
    let mut sim = w.sim(&batch);
    assert!(sim.run(&batch).is_empty());
    assert_eq!(sim.skew(ZONE, &test_sel()), [4]);
}

#[test]
fn zonal_spread_domains_are_the_union_over_nodepools() {
    let mut w = World {
        capacity: usize::MAX,
        ..World::default()
    };
    w.add_pool(reqs(&[(ZONE, &[ZONE_1])]), &[ZONE_1, ZONE_2, ZONE_3], &[]);
    w.add_pool(reqs(&[(ZONE, &[ZONE_2])]), &[ZONE_1, ZONE_2, ZONE_3], &[]);
    let batch = pods("p", 4, &zonal(1));
    let mut sim = w.sim(&batch);
    assert!(sim.run(&batch).is_empty());
    assert_eq!(sim.skew(ZONE, &test_sel()), [2, 2]);
}

#[test]
fn existing_pod_in_a_zone_the_pool_cannot_reach_caps_the_other_zones() {
    let mut w = World::with_pool(reqs(&[(ZONE, &[ZONE_1, ZONE_2])]));
    w.capacity = 1;
    w.nodes.push(node("n3", &[(ZONE, ZONE_3)]));
    w.pods
        .push(pod("old").label("test", "test").on("n3").build());
    let batch = pods("p", 6, &zonal(1));
    let mut sim = w.sim(&batch);
    assert_eq!(sim.run(&batch).len(), 2);
    assert_eq!(sim.skew(ZONE, &test_sel()), [1, 2, 2]);
}

#[test]
fn spread_schedules_to_a_non_minimum_domain_when_it_is_the_only_one_offered() {
    let mut w = World::with_pool(reqs(&[(ZONE, &[ZONE_3])]));
    w.capacity = 1;
    w.nodes = vec![node("n1", &[(ZONE, ZONE_1)]), node("n2", &[(ZONE, ZONE_2)])];
    w.pods = vec![
        pod("a").label("test", "test").on("n1").build(),
        pod("b").label("test", "test").on("n2").build(),
    ];
    let batch = pods("p", 10, &zonal(5));
    let mut sim = w.sim(&batch);
    assert_eq!(sim.run(&batch).len(), 4);
    assert_eq!(sim.skew(ZONE, &test_sel()), [1, 1, 6]);
}

#[test]
fn spread_only_schedules_to_minimum_domains_when_already_violating_skew() {
    let mut w = world();
    w.capacity = 3;
    w.nodes.push(node("n1", &[(ZONE, ZONE_1)]));
    w.pods = pods("old", 3, &pod("old").label("test", "test").on("n1"));
    let batch = pods("p", 3, &zonal(1));
    let mut sim = w.sim(&batch);
    assert!(sim.run(&batch).is_empty());
    assert_eq!(sim.skew(ZONE, &test_sel()), [1, 2, 3]);
    assert_eq!(
        sim.domain_of("p-0", ZONE).as_deref(),
        Some(ZONE_2),
        "ties go to the smallest name"
    );
}

#[test]
fn spread_does_not_violate_max_skew_when_do_not_schedule() {
    let mut w = World::with_pool(reqs(&[(ZONE, &[ZONE_2, ZONE_3])]));
    w.capacity = 1;
    w.nodes.push(node("n1", &[(ZONE, ZONE_1)]));
    w.pods
        .push(pod("old").label("test", "test").on("n1").build());
    let batch = pods("p", 10, &zonal(1));
    let mut sim = w.sim(&batch);
    assert_eq!(sim.run(&batch).len(), 6);
    assert_eq!(sim.skew(ZONE, &test_sel()), [1, 2, 2]);
}

#[test]
fn spread_discovers_domains_of_existing_nodes_without_matching_pods() {
    // n1 (zone-1) holds no selected pod: its zone still counts as an empty domain.
    let mut w = World::with_pool(reqs(&[(ZONE, &[ZONE_2])]));
    w.capacity = 1;
    w.nodes.push(node("n1", &[(ZONE, ZONE_1)]));
    w.pods.push(pod("other").on("n1").build());
    let batch = pods("p", 3, &zonal(1));
    let mut sim = w.sim(&batch);
    assert_eq!(
        sim.run(&batch).len(),
        2,
        "zone-1 stays at 0, so zone-2 can take only one"
    );
    assert_eq!(sim.skew(ZONE, &test_sel()), [1]);
}

#[test]
fn spread_counts_only_live_selected_pods_on_nodes_with_the_domain() {
    let mut w = world();
    w.capacity = 1;
    w.nodes = vec![
        node("n1", &[(ZONE, ZONE_1)]),
        node("n2", &[(ZONE, ZONE_2)]),
        node("n3", &[]),
    ];
    let t = || pod("x").label("test", "test");
    w.pods = vec![
        pod("unlabelled").on("n1").build(),
        t().build(),                          // pending
        t().on("n3").build(),                 // node without a zone
        t().ns("elsewhere").on("n1").build(), // other namespace
        t().terminal().on("n2").build(),      // terminal or terminating
        t().on("deleted-node").build(),       // node gone
        t().on("n1").build(),
        t().on("n1").build(),
        t().on("n2").build(),
    ];
    for (i, p) in w.pods.iter_mut().enumerate() {
        p.uid = arc(&format!("old-{i}"));
    }
    let batch = pods("p", 2, &zonal(1));
    let mut sim = w.sim(&batch);
    assert!(sim.run(&batch).is_empty());
    assert_eq!(sim.domain_of("p-0", ZONE).as_deref(), Some(ZONE_3));
    assert_eq!(sim.domain_of("p-1", ZONE).as_deref(), Some(ZONE_2));
}

#[test]
fn batch_pods_already_bound_are_not_counted_twice() {
    let mut w = world();
    w.nodes.push(node("n1", &[(ZONE, ZONE_1)]));
    let moving = zonal(1).on("n1").build();
    w.pods.push(moving.clone());
    let mut unbound = moving.clone();
    unbound.node_name = None;
    let topo = w.topology(std::slice::from_ref(&unbound));
    let strict = unbound.strict_requirements().unwrap();
    let got = topo
        .add_requirements(&unbound, &strict, &reqs(&[(ZONE, &[ZONE_1])]))
        .unwrap();
    assert_eq!(got.get(ZONE).unwrap().values(), [arc(ZONE_1)]);
}

#[test]
fn nil_selector_selects_nothing_so_pods_pack() {
    let batch = pods(
        "p",
        2,
        &pod("p").label("test", "test").spread(tsc(ZONE, 1, None)),
    );
    let mut sim = world().sim(&batch);
    assert!(sim.run(&batch).is_empty());
    assert_eq!(sim.claims.len(), 1);
}

#[test]
fn invalid_selector_selects_nothing_so_pods_pack() {
    let bad = sel(&[("app.kubernetes.io/name", "{{ zqfmgb }}")]);
    let batch = pods(
        "p",
        2,
        &pod("p")
            .label("test", "test")
            .spread(tsc(ZONE, 1, Some(bad))),
    );
    let mut sim = world().sim(&batch);
    assert!(sim.run(&batch).is_empty());
    assert_eq!(sim.claims.len(), 1);
}

#[test]
fn unknown_topology_key_makes_only_that_pod_unschedulable() {
    let constrained = pod("c")
        .label("test", "test")
        .spread(tsc("unknown", 1, Some(test_sel())))
        .build();
    let free = pod("f").build();
    let batch = vec![constrained.clone(), free.clone()];
    let mut sim = world().sim(&batch);
    let err = sim.place(&constrained).unwrap_err();
    assert!(err.contains("topology spread, key=unknown"), "{err}");
    assert!(sim.place(&free).is_ok());
}

#[test]
fn pods_not_selected_by_their_own_spread_pack_together() {
    let batch = pods("p", 5, &pod("p").spread(tsc(HOST, 1, Some(test_sel()))));
    let mut sim = world().sim(&batch);
    assert!(sim.run(&batch).is_empty());
    assert_eq!(sim.claims.len(), 1);
}

#[test]
fn min_domains_above_available_domains_forces_global_minimum_zero() {
    let w = World::with_pool(reqs(&[(ZONE, &[ZONE_1, ZONE_2])]));
    let mut c = tsc(ZONE, 1, Some(test_sel()));
    c.min_domains = Some(3);
    let batch = pods("p", 3, &pod("p").label("test", "test").spread(c));
    let mut sim = w.sim(&batch);
    assert_eq!(sim.run(&batch).len(), 1);
    assert_eq!(sim.skew(ZONE, &test_sel()), [1, 1]);
}

#[test]
fn min_domains_satisfied_spreads_normally() {
    for min_domains in [2, 3] {
        let mut c = tsc(ZONE, 1, Some(test_sel()));
        c.min_domains = Some(min_domains);
        let batch = pods("p", 11, &pod("p").label("test", "test").spread(c));
        let mut sim = world().sim(&batch);
        assert!(sim.run(&batch).is_empty());
        assert_eq!(
            sim.skew(ZONE, &test_sel()),
            [3, 4, 4],
            "minDomains {min_domains}"
        );
    }
}

#[test]
fn hostname_spread_puts_one_pod_per_node() {
    let batch = pods(
        "p",
        4,
        &pod("p")
            .label("test", "test")
            .spread(tsc(HOST, 1, Some(test_sel()))),
    );
    let mut sim = world().sim(&batch);
    assert!(sim.run(&batch).is_empty());
    assert_eq!(sim.skew(HOST, &test_sel()), [1, 1, 1, 1]);
}

#[test]
fn hostname_spread_packs_up_to_max_skew() {
    let batch = pods(
        "p",
        4,
        &pod("p")
            .label("test", "test")
            .spread(tsc(HOST, 4, Some(test_sel()))),
    );
    let mut sim = world().sim(&batch);
    assert!(sim.run(&batch).is_empty());
    assert_eq!(sim.skew(HOST, &test_sel()), [4]);
}

#[test]
fn hostname_and_zonal_spread_combine() {
    let template = pod("p")
        .label("test", "test")
        .spread(tsc(ZONE, 1, Some(test_sel())))
        .spread(tsc(HOST, 3, Some(test_sel())));
    let batch = pods("p", 21, &template);
    let mut sim = world().sim(&batch);
    assert!(sim.run(&batch).is_empty());
    assert_eq!(sim.skew(ZONE, &test_sel()), [7, 7, 7]);
    assert!(sim.skew(HOST, &test_sel()).iter().all(|&n| n <= 3));
}

#[test]
fn match_label_keys_spread_each_revision_independently() {
    let mut c = tsc(HOST, 1, Some(test_sel()));
    c.match_label_keys = vec![arc("rev")];
    let a = pods(
        "a",
        2,
        &pod("a")
            .label("test", "test")
            .label("rev", "a")
            .spread(c.clone()),
    );
    let b = pods(
        "b",
        2,
        &pod("b").label("test", "test").label("rev", "b").spread(c),
    );
    let batch: Vec<_> = a.into_iter().chain(b).collect();
    let mut sim = world().sim(&batch);
    assert!(sim.run(&batch).is_empty());
    assert_eq!(sim.skew(HOST, &test_sel()), [2, 2]);
}

#[test]
fn match_label_keys_absent_from_the_pod_are_ignored() {
    let mut c = tsc(HOST, 1, Some(test_sel()));
    c.match_label_keys = vec![arc("rev")];
    let batch = pods("p", 4, &pod("p").label("test", "test").spread(c));
    let mut sim = world().sim(&batch);
    assert!(sim.run(&batch).is_empty());
    assert_eq!(sim.skew(HOST, &test_sel()), [1, 1, 1, 1]);
}
