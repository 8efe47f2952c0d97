//! Pod affinity: to other pods, to itself (the bootstrap rule), across namespaces, and
//! preferred terms under each policy; driven through a miniature scheduler (upstream
//! `topology_test.go`, by behaviour).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod topology_support;

use scheduling::pod::{LabelSelector, Pod};
use scheduling::topology::PreferencePolicy;
use topology_support::*;

fn s2() -> LabelSelector {
    sel(&[("security", "s2")])
}

fn target(name: &str) -> P {
    pod(name).label("security", "s2")
}

fn hostname_spreaders(n: usize) -> Vec<Pod> {
    pods(
        "spread",
        n,
        &pod("spread")
            .label("test", "test")
            .spread(tsc(HOST, 1, Some(sel(&[("test", "test")])))),
    )
}

fn same_target(sim: &Sim, a: &str, b: &str) -> bool {
    let (ta, tb) = (sim.target_of(a), sim.target_of(b));
    ta.is_some() && ta == tb
}

#[test]
fn affinity_to_a_hostname_follows_the_target_pod() {
    let mut batch = hostname_spreaders(10);
    batch.push(target("t").build());
    batch.push(pod("aff").affinity(term(HOST, s2())).build());
    let mut sim = world().sim(&batch);
    assert!(sim.run(&batch).is_empty());
    assert!(same_target(&sim, "t", "aff"));
}

#[test]
fn self_affinity_on_hostname_packs_one_node() {
    let batch = pods("p", 3, &target("p").affinity(term(HOST, s2())));
    let mut sim = world().sim(&batch);
    assert!(sim.run(&batch).is_empty());
    assert_eq!(sim.claims.len(), 1);
}

#[test]
fn self_affinity_bootstraps_only_the_first_empty_domain() {
    let mut w = world();
    w.capacity = 5;
    let batch = pods("p", 10, &target("p").affinity(term(HOST, s2())));
    let mut sim = w.sim(&batch);
    assert_eq!(sim.run(&batch).len(), 5);
    assert_eq!(sim.claims.len(), 1);

    // Next batch: the full node exists; new pods must join it and cannot.
    let mut next = w.clone();
    next.nodes.push(node("n1", &[(ZONE, ZONE_1)]));
    next.pods = pods("old", 5, &target("old").on("n1"));
    let batch = pods("q", 10, &target("q").affinity(term(HOST, s2())));
    let mut sim = next.sim(&batch);
    assert_eq!(sim.run(&batch).len(), 10);
}

#[test]
fn self_affinity_does_not_bootstrap_when_a_reachable_domain_has_pods() {
    let mut w = world();
    w.capacity = 1;
    w.nodes.push(node("n1", &[(ZONE, ZONE_1)]));
    w.pods.push(target("old").on("n1").build());
    let batch = pods(
        "p",
        3,
        &target("p")
            .affinity(term(HOST, s2()))
            .node_affinity(zone_term(&[ZONE_2, ZONE_3])),
    );
    let mut sim = w.sim(&batch);
    assert_eq!(sim.run(&batch).len(), 3);
}

#[test]
fn self_affinity_on_zone_lands_in_one_zone() {
    let batch = pods("p", 3, &target("p").affinity(term(ZONE, s2())));
    let mut sim = world().sim(&batch);
    assert!(sim.run(&batch).is_empty());
    assert_eq!(sim.claims.len(), 1);
    assert_eq!(
        sim.domain_of("p-0", ZONE).as_deref(),
        Some(ZONE_1),
        "bootstrap collapses to one zone"
    );
}

#[test]
fn self_affinity_on_zone_respects_the_pods_zone_constraint() {
    let batch = pods(
        "p",
        3,
        &target("p")
            .affinity(term(ZONE, s2()))
            .node_affinity(zone_term(&[ZONE_3])),
    );
    let mut sim = world().sim(&batch);
    assert!(sim.run(&batch).is_empty());
    for p in &batch {
        assert_eq!(sim.domain_of(&p.name, ZONE).as_deref(), Some(ZONE_3));
    }
}

#[test]
fn self_affinity_bootstraps_again_when_placed_pods_are_out_of_reach() {
    let a = target("a")
        .affinity(term(ZONE, s2()))
        .node_affinity(zone_term(&[ZONE_2]))
        .build();
    let b = target("b")
        .affinity(term(ZONE, s2()))
        .node_affinity(zone_term(&[ZONE_3]))
        .build();
    let batch = vec![a, b];
    let mut sim = world().sim(&batch);
    assert!(sim.run(&batch).is_empty());
    assert_eq!(sim.domain_of("a", ZONE).as_deref(), Some(ZONE_2));
    assert_eq!(sim.domain_of("b", ZONE).as_deref(), Some(ZONE_3));
    assert_eq!(sim.claims.len(), 2);
}

#[test]
fn affinity_to_a_missing_pod_is_unschedulable() {
    let batch = pods("p", 10, &pod("p").affinity(term(ZONE, s2())));
    let mut sim = world().sim(&batch);
    assert_eq!(sim.run(&batch).len(), 10);
}

#[test]
fn affinity_waits_for_an_undecided_target_zone() {
    let mut batch = pods("aff", 10, &pod("aff").affinity(term(ZONE, s2())));
    batch.push(target("t").build());
    let mut sim = world().sim(&batch);
    assert_eq!(
        sim.run(&batch).len(),
        10,
        "the target's zone is not decided yet"
    );

    // Next run: the target's node exists in zone-2.
    let mut w = world();
    w.nodes.push(node("n1", &[(ZONE, ZONE_2)]));
    w.pods.push(target("t").on("n1").build());
    w.capacity = 1;
    let batch = pods("aff", 10, &pod("aff").affinity(term(ZONE, s2())));
    let mut sim = w.sim(&batch);
    assert!(sim.run(&batch).is_empty());
    assert!(
        batch
            .iter()
            .all(|p| sim.domain_of(&p.name, ZONE).as_deref() == Some(ZONE_2))
    );
}

#[test]
fn affinity_follows_a_target_with_a_decided_zone() {
    let mut batch = pods("aff", 10, &pod("aff").affinity(term(ZONE, s2())));
    batch.push(target("t").node_affinity(zone_term(&[ZONE_1])).build());
    let mut sim = world().sim(&batch);
    assert!(sim.run(&batch).is_empty());
    assert_eq!(sim.skew(ZONE, &LabelSelector::default()), [11]);
}

#[test]
fn chained_affinities_schedule_in_dependency_order() {
    fn labels_of(t: &str) -> [(&str, &str); 2] {
        [("type", t), ("spread", "spread")]
    }
    let tier = |name: &str, after: Option<&str>| {
        let mut p = pod(name);
        for (k, v) in labels_of(name) {
            p = p.label(k, v);
        }
        match after {
            Some(dep) => p.affinity(term(HOST, sel(&labels_of(dep)))).build(),
            None => p.build(),
        }
    };
    let batch = vec![
        tier("ui", Some("cache")),
        tier("cache", Some("web")),
        tier("web", Some("db")),
        tier("db", None),
    ];
    let mut sim = world().sim(&batch);
    assert!(sim.run(&batch).is_empty());
    assert_eq!(sim.claims.len(), 1);
}

#[test]
fn affinity_cycle_without_self_selection_fails_without_looping() {
    let p = pod("db")
        .label("type", "db")
        .affinity(term(HOST, sel(&[("type", "web")])))
        .build();
    let mut sim = world().sim(std::slice::from_ref(&p));
    assert_eq!(sim.run(std::slice::from_ref(&p)), ["db"]);
}

fn namespaced(
    term_ns: Option<Vec<&str>>,
    ns_selector: Option<LabelSelector>,
    target_ns: &str,
) -> bool {
    let mut w = world();
    w.namespaces
        .insert(arc(target_ns), labels(&[("foo", "bar")]));
    w.namespaces.insert(arc("default"), labels(&[]));
    let mut t = term(HOST, s2());
    t.namespaces = term_ns.unwrap_or_default().into_iter().map(arc).collect();
    t.namespace_selector = ns_selector;
    let mut batch = hostname_spreaders(10);
    batch.push(target("t").ns(target_ns).build());
    batch.push(pod("aff").affinity(t).build());
    let mut sim = w.sim(&batch);
    let left = sim.run(&batch);
    assert!(!left.contains(&"t".to_owned()));
    left.is_empty() && same_target(&sim, "t", "aff")
}

#[test]
fn affinity_only_looks_in_the_pods_own_namespace_by_default() {
    assert!(!namespaced(None, None, "other"));
}

#[test]
fn affinity_namespace_list_selects_other_namespaces() {
    assert!(namespaced(Some(vec!["other"]), None, "other"));
}

#[test]
fn affinity_empty_namespace_selector_selects_all_namespaces() {
    assert!(namespaced(None, Some(LabelSelector::default()), "other"));
}

#[test]
fn affinity_namespace_selector_matches_namespace_labels() {
    assert!(namespaced(None, Some(sel(&[("foo", "bar")])), "other"));
    assert!(!namespaced(None, Some(sel(&[("foo", "nope")])), "other"));
}

#[test]
fn preferred_affinity_to_a_missing_pod_is_relaxed_under_respect() {
    let mut batch = hostname_spreaders(10);
    batch.push(pod("aff").preferred_affinity(50, term(HOST, s2())).build());
    let mut sim = world().sim(&batch);
    let aff = batch.last().unwrap().clone();
    assert!(
        sim.try_place(&aff).is_err(),
        "the preference is enforced before relaxation"
    );
    assert!(sim.place(&aff).is_ok());
}

#[test]
fn preferred_affinity_is_honoured_when_satisfiable() {
    let mut batch = hostname_spreaders(5);
    batch.push(target("t").build());
    batch.push(pod("aff").preferred_affinity(50, term(HOST, s2())).build());
    let mut sim = world().sim(&batch);
    assert!(sim.run(&batch).is_empty());
    assert!(same_target(&sim, "t", "aff"));
}

#[test]
fn preferred_terms_are_skipped_under_ignore() {
    let mut w = world();
    w.policy = PreferencePolicy::Ignore;
    let batch = vec![
        pod("aff")
            .preferred_affinity(50, term(HOST, s2()))
            .preferred_anti(10, term(ZONE, s2()))
            .build(),
    ];
    let sim = w.sim(&batch);
    assert_eq!(sim.topology.group_count(), 0);
    assert!(!sim.topology.constrains(&batch[0]));
}

#[test]
fn preferred_affinity_conflicting_with_a_required_spread_is_relaxed() {
    let spread = tsc(HOST, 1, Some(sel(&[("test", "test")])));
    let mut batch = pods(
        "p",
        3,
        &pod("p")
            .label("test", "test")
            .spread(spread)
            .preferred_affinity(50, term(HOST, s2())),
    );
    batch.push(target("t").build());
    let mut sim = world().sim(&batch);
    assert!(sim.run(&batch).is_empty());
    assert_eq!(sim.skew(HOST, &sel(&[("test", "test")])), [1, 1, 1]);
}
