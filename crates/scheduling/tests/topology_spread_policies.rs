//! Topology spread constraints and the node side: nodeTaintsPolicy, nodeAffinityPolicy,
//! nodeSelector / node affinity limiting domains, and ScheduleAnyway under each preference
//! policy, driven through a miniature scheduler (upstream `topology_test.go`, by behaviour).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod topology_support;

use scheduling::pod::{LabelSelector, NodeInclusionPolicy, Pod, WhenUnsatisfiable};
use scheduling::taints::{Taint, TaintEffect, Toleration};
use scheduling::topology::PreferencePolicy;
use topology_support::*;

fn test_sel() -> LabelSelector {
    sel(&[("test", "test")])
}

fn zonal(max_skew: i32) -> P {
    pod("p")
        .label("test", "test")
        .spread(tsc(ZONE, max_skew, Some(test_sel())))
}

const SPREAD_LABEL: &str = "fake-label";

fn tainted_label_world() -> World {
    let mut w = World::with_pool(reqs(&[(SPREAD_LABEL, &["baz"])]));
    let taint = Taint::new("taintname", "taintvalue", TaintEffect::NoSchedule);
    for (name, value) in [("n1", "foo"), ("n2", "bar")] {
        let mut n = node(name, &[(SPREAD_LABEL, value)]);
        n.taints.push(taint.clone());
        w.nodes.push(n);
    }
    w
}

fn label_spread(taints: NodeInclusionPolicy, affinity: NodeInclusionPolicy) -> P {
    let mut c = tsc(SPREAD_LABEL, 1, Some(test_sel()));
    c.node_taints_policy = taints;
    c.node_affinity_policy = affinity;
    pod("p").label("test", "test").spread(c)
}

#[test]
fn node_taints_policy_ignore_counts_domains_of_tainted_nodes() {
    let batch = pods(
        "p",
        5,
        &label_spread(NodeInclusionPolicy::Ignore, NodeInclusionPolicy::Honor),
    );
    let mut sim = tainted_label_world().sim(&batch);
    assert_eq!(sim.run(&batch).len(), 4);
    assert_eq!(sim.skew(SPREAD_LABEL, &test_sel()), [1]);
}

#[test]
fn node_taints_policy_honor_skips_domains_of_untolerated_nodes() {
    let batch = pods(
        "p",
        5,
        &label_spread(NodeInclusionPolicy::Honor, NodeInclusionPolicy::Honor),
    );
    let mut sim = tainted_label_world().sim(&batch);
    assert!(sim.run(&batch).is_empty());
    assert_eq!(sim.skew(SPREAD_LABEL, &test_sel()), [5]);
}

#[test]
fn node_taints_policy_honor_spreads_per_toleration_over_shared_domains() {
    let mut w = World {
        capacity: usize::MAX,
        ..World::default()
    };
    for (i, domains) in [["foo", "bar"], ["foo", "baz"]].iter().enumerate() {
        let taint = Taint::new(
            "taint-key",
            format!("nodepool-{i}"),
            TaintEffect::NoSchedule,
        );
        w.add_pool(reqs(&[(SPREAD_LABEL, domains)]), &[ZONE_1], &[taint]);
    }
    let tolerating = |i: usize| {
        let mut p = label_spread(NodeInclusionPolicy::Honor, NodeInclusionPolicy::Honor);
        p.0.tolerations.push(Toleration {
            key: "taint-key".into(),
            value: format!("nodepool-{i}"),
            effect: Some(TaintEffect::NoSchedule),
            ..Toleration::default()
        });
        p
    };
    let batch: Vec<_> = pods("a", 2, &tolerating(0))
        .into_iter()
        .chain(pods("b", 4, &tolerating(1)))
        .collect();
    let mut sim = w.sim(&batch);
    assert!(sim.run(&batch).is_empty());
    assert_eq!(sim.skew(SPREAD_LABEL, &test_sel()), [1, 2, 3]);
}

fn affinity_label_world() -> World {
    let mut w = World::with_pool(reqs(&[(SPREAD_LABEL, &["baz"]), ("selector", &["value"])]));
    for (name, value) in [("n1", "foo"), ("n2", "bar")] {
        w.nodes.push(node(
            name,
            &[(SPREAD_LABEL, value), ("selector", "mismatch")],
        ));
    }
    w
}

#[test]
fn node_affinity_policy_ignore_counts_domains_of_nodes_the_pod_cannot_use() {
    let p = label_spread(NodeInclusionPolicy::Ignore, NodeInclusionPolicy::Ignore)
        .node_selector("selector", "value");
    let batch = pods("p", 5, &p);
    let mut sim = affinity_label_world().sim(&batch);
    assert_eq!(sim.run(&batch).len(), 4);
    assert_eq!(sim.skew(SPREAD_LABEL, &test_sel()), [1]);
}

#[test]
fn node_affinity_policy_honor_skips_domains_of_nodes_the_pod_cannot_use() {
    let p = label_spread(NodeInclusionPolicy::Ignore, NodeInclusionPolicy::Honor)
        .node_selector("selector", "value");
    let batch = pods("p", 5, &p);
    let mut sim = affinity_label_world().sim(&batch);
    assert!(sim.run(&batch).is_empty());
    assert_eq!(sim.skew(SPREAD_LABEL, &test_sel()), [5]);
}

#[test]
fn node_selector_limits_spread_to_its_zone() {
    let z1 = pods("a", 5, &zonal(1).node_selector(ZONE, ZONE_1));
    let z2 = pods("b", 10, &zonal(1).node_selector(ZONE, ZONE_2));
    let batch: Vec<_> = z1.into_iter().chain(z2).collect();
    let mut sim = world().sim(&batch);
    assert!(sim.run(&batch).is_empty());
    assert_eq!(sim.skew(ZONE, &test_sel()), [5, 10]);
}

#[test]
fn required_node_affinity_limits_spread_domains() {
    let batch = pods(
        "p",
        6,
        &zonal(1).node_affinity(zone_term(&[ZONE_1, ZONE_2])),
    );
    let mut sim = world().sim(&batch);
    assert!(sim.run(&batch).is_empty());
    assert_eq!(sim.skew(ZONE, &test_sel()), [3, 3]);
}

#[test]
fn preferred_node_affinity_does_not_limit_spread_domains() {
    let batch = pods(
        "p",
        6,
        &zonal(1).prefer_node(1, zone_term(&[ZONE_1, ZONE_2])),
    );
    let mut sim = world().sim(&batch);
    assert!(sim.run(&batch).is_empty());
    assert_eq!(sim.skew(ZONE, &test_sel()), [2, 2, 2]);
}

/// Zones 1–3 are known domains, but new NodeClaims can only go to zone-1.
fn zone_1_only() -> World {
    let mut w = world();
    w.templates = vec![(reqs(&[(ZONE, &[ZONE_1])]), Vec::new())];
    w
}

fn schedule_anyway_batch() -> (World, Vec<Pod>) {
    let w = zone_1_only();
    let mut c = tsc(ZONE, 1, Some(test_sel()));
    c.when_unsatisfiable = WhenUnsatisfiable::ScheduleAnyway;
    (w, pods("p", 3, &pod("p").label("test", "test").spread(c)))
}

#[test]
fn schedule_anyway_is_enforced_under_respect_until_relaxed() {
    let (w, batch) = schedule_anyway_batch();
    let mut sim = w.sim(&batch);
    assert!(sim.try_place(&batch[0]).is_ok());
    let err = sim.try_place(&batch[1]).unwrap_err();
    assert!(
        err.contains("unsatisfiable topology constraint for topology spread"),
        "{err}"
    );
    assert!(
        sim.place(&batch[1]).is_ok(),
        "relaxing the ScheduleAnyway constraint lets it schedule"
    );
    assert_eq!(sim.topology.owned_group_count("p-1"), 0);
    assert_eq!(sim.topology.owned_group_count("p-2"), 1);
}

#[test]
fn schedule_anyway_is_skipped_under_ignore() {
    let (mut w, batch) = schedule_anyway_batch();
    w.policy = PreferencePolicy::Ignore;
    let mut sim = w.sim(&batch);
    assert_eq!(sim.topology.group_count(), 0);
    for p in &batch {
        assert!(sim.try_place(p).is_ok());
    }
    assert_eq!(sim.skew(ZONE, &test_sel()), [3]);
}

#[test]
fn do_not_schedule_is_enforced_under_ignore() {
    let mut w = zone_1_only();
    w.policy = PreferencePolicy::Ignore;
    let batch = pods("p", 3, &zonal(1));
    let mut sim = w.sim(&batch);
    assert_eq!(sim.run(&batch).len(), 2);
}
