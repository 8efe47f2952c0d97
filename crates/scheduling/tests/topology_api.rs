//! The `Topology` API directly: the unconstrained fast path, group sharing, ownership updates
//! after relaxation, deterministic tie-breaking, hostname fast paths, recording rules, domain
//! registration and error messages.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod topology_support;

use scheduling::labels::WellKnownLabels;
use scheduling::pod::{NodeInclusionPolicy, Pod, WhenUnsatisfiable};
use scheduling::requirements::Requirements;
use scheduling::taints::{Taint, TaintEffect};
use scheduling::topology::{Placement, TopologyType};
use topology_support::*;

fn strict(p: &Pod) -> Requirements {
    p.strict_requirements().unwrap()
}

fn zonal(name: &str) -> Pod {
    pod(name)
        .label("app", "a")
        .spread(tsc(ZONE, 1, Some(sel(&[("app", "a")]))))
        .build()
}

fn all_zones() -> Requirements {
    reqs(&[(ZONE, &[ZONE_1, ZONE_2, ZONE_3])])
}

fn record_claim(topo: &mut scheduling::topology::Topology, p: &Pod, r: &Requirements) {
    let wk = WellKnownLabels::default();
    topo.record(p, Placement::node_claim(r, &[], &wk));
}

#[test]
fn unconstrained_pod_gets_no_requirements() {
    let p = pod("free").label("app", "a").build();
    let batch = vec![p.clone(), zonal("z")];
    let topo = world().topology(&batch);
    assert!(!topo.constrains(&p));
    assert!(
        topo.add_requirements(&p, &strict(&p), &all_zones())
            .unwrap()
            .is_empty()
    );
}

#[test]
fn identical_constraints_share_one_group() {
    let batch: Vec<Pod> = (0..100).map(|i| zonal(&format!("p{i}"))).collect();
    let topo = world().topology(&batch);
    assert_eq!(topo.group_count(), 1);
    assert_eq!(topo.owned_group_count("p42"), 1);
}

#[test]
fn constraints_differing_in_skew_key_or_selector_get_their_own_groups() {
    let base = || pod("p").label("app", "a");
    let batch = vec![
        base()
            .spread(tsc(ZONE, 1, Some(sel(&[("app", "a")]))))
            .build(),
        {
            let mut p = base()
                .spread(tsc(ZONE, 2, Some(sel(&[("app", "a")]))))
                .build();
            p.uid = arc("q");
            p
        },
        {
            let mut p = base()
                .spread(tsc(HOST, 1, Some(sel(&[("app", "a")]))))
                .build();
            p.uid = arc("r");
            p
        },
        {
            let mut p = base()
                .spread(tsc(ZONE, 1, Some(sel(&[("app", "b")]))))
                .build();
            p.uid = arc("s");
            p
        },
        {
            let mut p = base().anti(term(ZONE, sel(&[("app", "a")]))).build();
            p.uid = arc("t");
            p
        },
    ];
    let topo = world().topology(&batch);
    assert_eq!(topo.group_count(), 5);
    assert_eq!(topo.inverse_group_count(), 1);
}

#[test]
fn spread_ties_are_broken_by_domain_name() {
    let p = zonal("p");
    let topo = world().topology(std::slice::from_ref(&p));
    let node = reqs(&[(ZONE, &[ZONE_3, ZONE_2])]);
    let got = topo.add_requirements(&p, &strict(&p), &node).unwrap();
    assert_eq!(got.get(ZONE).unwrap().values(), [arc(ZONE_2)]);
    let got = topo
        .add_requirements(&p, &strict(&p), &Requirements::new())
        .unwrap();
    assert_eq!(got.get(ZONE).unwrap().values(), [arc(ZONE_1)]);
}

#[test]
fn spread_prefers_the_least_loaded_valid_zone() {
    let batch: Vec<Pod> = (0..3).map(|i| zonal(&format!("p{i}"))).collect();
    let mut topo = world().topology(&batch);
    record_claim(&mut topo, &batch[0], &reqs(&[(ZONE, &[ZONE_1])]));
    record_claim(&mut topo, &batch[1], &reqs(&[(ZONE, &[ZONE_3])]));
    let got = topo
        .add_requirements(&batch[2], &strict(&batch[2]), &all_zones())
        .unwrap();
    assert_eq!(got.get(ZONE).unwrap().values(), [arc(ZONE_2)]);
}

#[test]
fn spread_records_only_decided_domains() {
    let batch: Vec<Pod> = (0..2).map(|i| zonal(&format!("p{i}"))).collect();
    let mut topo = world().topology(&batch);
    record_claim(&mut topo, &batch[0], &reqs(&[(ZONE, &[ZONE_1, ZONE_2])]));
    let got = topo
        .add_requirements(&batch[1], &strict(&batch[1]), &reqs(&[(ZONE, &[ZONE_1])]))
        .unwrap();
    assert_eq!(
        got.get(ZONE).unwrap().values(),
        [arc(ZONE_1)],
        "the undecided pod was not counted"
    );
}

#[test]
fn hostname_spread_allows_a_brand_new_hostname() {
    let p = pod("p")
        .label("app", "a")
        .spread(tsc(HOST, 1, Some(sel(&[("app", "a")]))))
        .build();
    let topo = world().topology(std::slice::from_ref(&p));
    let node = reqs(&[(HOST, &["never-registered"])]);
    let got = topo.add_requirements(&p, &strict(&p), &node).unwrap();
    assert_eq!(got.get(HOST).unwrap().values(), [arc("never-registered")]);
}

#[test]
fn hostname_spread_rejects_a_host_at_max_skew_and_names_only_that_host() {
    let batch: Vec<Pod> = (0..2)
        .map(|i| {
            pod(&format!("p{i}"))
                .label("app", "a")
                .spread(tsc(HOST, 1, Some(sel(&[("app", "a")]))))
                .build()
        })
        .collect();
    let mut topo = world().topology(&batch);
    for i in 0..30 {
        topo.register(HOST, &format!("host-{i}"));
    }
    let h = reqs(&[(HOST, &["host-7"])]);
    record_claim(&mut topo, &batch[0], &h);
    let err = topo
        .add_requirements(&batch[1], &strict(&batch[1]), &h)
        .unwrap_err();
    assert_eq!(err.kind(), TopologyType::Spread);
    assert_eq!(err.key(), HOST);
    assert!(err.to_string().contains("counts = {host-7: 1}"), "{err}");
}

#[test]
fn error_message_names_constraint_counts_and_domains() {
    let batch: Vec<Pod> = (0..2).map(|i| zonal(&format!("p{i}"))).collect();
    let mut topo = world().topology(&batch);
    record_claim(&mut topo, &batch[0], &reqs(&[(ZONE, &[ZONE_1])]));
    let err = topo
        .add_requirements(&batch[1], &strict(&batch[1]), &reqs(&[(ZONE, &[ZONE_1])]))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "unsatisfiable topology constraint for topology spread, key=topology.kubernetes.io/zone \
         (counts = {test-zone-1: 1, test-zone-2: 0, test-zone-3: 0}, \
         podDomains = topology.kubernetes.io/zone Exists, \
         nodeDomains = topology.kubernetes.io/zone In [test-zone-1])"
    );
    assert_eq!(err.metric_label(), "topology_spread");
    assert!(!err.is_inverse());
}

#[test]
fn update_with_relaxed_pod_drops_ownership_and_original_restores_it() {
    let mut soft = tsc(ZONE, 1, Some(sel(&[("app", "a")])));
    soft.when_unsatisfiable = WhenUnsatisfiable::ScheduleAnyway;
    let batch: Vec<Pod> = (0..2)
        .map(|i| {
            pod(&format!("p{i}"))
                .label("app", "a")
                .spread(soft.clone())
                .build()
        })
        .collect();
    let mut topo = world().topology(&batch);
    let z1 = reqs(&[(ZONE, &[ZONE_1])]);
    record_claim(&mut topo, &batch[0], &z1);
    let original = &batch[1];
    assert!(
        topo.add_requirements(original, &strict(original), &z1)
            .is_err()
    );

    let mut relaxed = original.clone();
    relaxed.topology_spread_constraints.clear();
    topo.update(&relaxed);
    assert_eq!(topo.owned_group_count("p1"), 0);
    assert!(
        topo.add_requirements(&relaxed, &strict(&relaxed), &z1)
            .unwrap()
            .is_empty()
    );

    topo.update(original);
    assert_eq!(topo.owned_group_count("p1"), 1);
    assert!(
        topo.add_requirements(original, &strict(original), &z1)
            .is_err()
    );
}

#[test]
fn update_creates_new_groups_and_counts_already_placed_pods() {
    let a = pod("a").label("app", "a").build();
    let mut b = pod("b").label("app", "a").build();
    let mut topo = world().topology(&[a.clone(), b.clone()]);
    record_claim(&mut topo, &a, &reqs(&[(ZONE, &[ZONE_1])]));
    // A group created later does not know about `a` (it was not counted at creation)…
    b.pod_anti_affinity
        .required
        .push(term(ZONE, sel(&[("app", "a")])));
    topo.update(&b);
    assert_eq!(topo.group_count(), 1);
    let got = topo
        .add_requirements(&b, &strict(&b), &all_zones())
        .unwrap();
    assert_eq!(got.get(ZONE).unwrap().values().len(), 3);
    // …but it counts pods placed after it exists, including existing entries selected by it.
    record_claim(&mut topo, &a, &reqs(&[(ZONE, &[ZONE_2])]));
    let got = topo
        .add_requirements(&b, &strict(&b), &all_zones())
        .unwrap();
    assert_eq!(got.get(ZONE).unwrap().values(), [arc(ZONE_1), arc(ZONE_3)]);
}

#[test]
fn anti_affinity_records_every_still_possible_domain() {
    let target = pod("t").label("app", "a").build();
    let anti = pod("x").anti(term(ZONE, sel(&[("app", "a")]))).build();
    let mut topo = world().topology(&[target.clone(), anti.clone()]);
    record_claim(&mut topo, &target, &reqs(&[(ZONE, &[ZONE_1, ZONE_2])]));
    let got = topo
        .add_requirements(&anti, &strict(&anti), &all_zones())
        .unwrap();
    assert_eq!(got.get(ZONE).unwrap().values(), [arc(ZONE_3)]);
}

#[test]
fn inverse_group_pins_a_selected_pod_to_known_empty_domains() {
    let target = pod("t").label("app", "a").build();
    let anti = pod("x").anti(term(ZONE, sel(&[("app", "a")]))).build();
    let mut topo = world().topology(&[target.clone(), anti.clone()]);
    record_claim(&mut topo, &anti, &reqs(&[(ZONE, &[ZONE_2])]));
    let got = topo
        .add_requirements(&target, &strict(&target), &Requirements::new())
        .unwrap();
    assert_eq!(got.get(ZONE).unwrap().values(), [arc(ZONE_1), arc(ZONE_3)]);
    let err = topo
        .add_requirements(&target, &strict(&target), &reqs(&[(ZONE, &[ZONE_2])]))
        .unwrap_err();
    assert!(err.is_inverse());
    assert_eq!(err.metric_label(), "inverse_pod_anti_affinity");
}

#[test]
fn pods_outside_the_batch_are_still_held_off_by_inverse_groups() {
    let anti = pod("x").anti(term(HOST, sel(&[("app", "a")]))).build();
    let mut topo = world().topology(std::slice::from_ref(&anti));
    let h = reqs(&[(HOST, &["h1"])]);
    record_claim(&mut topo, &anti, &h);
    let stranger = pod("stranger").label("app", "a").build();
    assert!(topo.constrains(&stranger));
    assert!(
        topo.add_requirements(&stranger, &strict(&stranger), &h)
            .is_err()
    );
    assert!(
        topo.add_requirements(&stranger, &strict(&stranger), &reqs(&[(HOST, &["h2"])]))
            .is_ok()
    );
}

#[test]
fn registered_domains_reach_groups_created_later() {
    let key = "example.com/rack";
    let mut w = world();
    w.universe.insert(key, "r1", &[]);
    let first = pod("a")
        .label("app", "a")
        .spread(tsc(key, 1, Some(sel(&[("app", "a")]))))
        .build();
    let mut topo = w.topology(std::slice::from_ref(&first));
    topo.register(key, "r0");
    let got = topo
        .add_requirements(&first, &strict(&first), &Requirements::new())
        .unwrap();
    assert_eq!(got.get(key).unwrap().values(), [arc("r0")]);

    let mut later = pod("b").label("app", "b").build();
    later
        .topology_spread_constraints
        .push(tsc(key, 1, Some(sel(&[("app", "b")]))));
    topo.update(&later);
    let got = topo
        .add_requirements(&later, &strict(&later), &Requirements::new())
        .unwrap();
    assert_eq!(got.get(key).unwrap().values(), [arc("r0")]);
}

#[test]
fn record_skips_spread_groups_whose_node_filter_rejects_the_node() {
    let mut c = tsc(ZONE, 1, Some(sel(&[("app", "a")])));
    c.node_taints_policy = NodeInclusionPolicy::Honor;
    let batch: Vec<Pod> = (0..2)
        .map(|i| {
            pod(&format!("p{i}"))
                .label("app", "a")
                .spread(c.clone())
                .build()
        })
        .collect();
    let mut topo = world().topology(&batch);
    let z1 = reqs(&[(ZONE, &[ZONE_1])]);
    let taint = [Taint::new("dedicated", "x", TaintEffect::NoSchedule)];
    let wk = WellKnownLabels::default();
    topo.record(&batch[0], Placement::node_claim(&z1, &taint, &wk));
    assert!(
        topo.add_requirements(&batch[1], &strict(&batch[1]), &z1)
            .is_ok(),
        "tainted node not counted"
    );
    topo.record(&batch[0], Placement::node_claim(&z1, &[], &wk));
    assert!(
        topo.add_requirements(&batch[1], &strict(&batch[1]), &z1)
            .is_err()
    );
}

#[test]
fn affinity_bootstrap_yields_to_a_spread_choice_in_the_same_query() {
    // Self-affinity (bootstrap, any zone) and a zonal spread that rules out zone-1.
    let mut w = world();
    w.nodes.push(node("n1", &[(ZONE, ZONE_1)]));
    w.pods.push(pod("old").label("app", "a").on("n1").build());
    let p = pod("p")
        .label("app", "a")
        .label("grp", "g")
        .affinity(term(ZONE, sel(&[("grp", "g")])))
        .spread(tsc(ZONE, 1, Some(sel(&[("app", "a")]))))
        .build();
    let topo = w.topology(std::slice::from_ref(&p));
    let got = topo
        .add_requirements(&p, &strict(&p), &Requirements::new())
        .unwrap();
    assert_eq!(got.get(ZONE).unwrap().values(), [arc(ZONE_2)]);
}

#[test]
fn topology_builds_deterministically() {
    let batch: Vec<Pod> = (0..20)
        .map(|i| {
            pod(&format!("p{i}"))
                .label("app", if i % 2 == 0 { "a" } else { "b" })
                .spread(tsc(ZONE, 1, Some(sel(&[("app", "a")]))))
                .anti(term(HOST, sel(&[("app", "b")])))
                .build()
        })
        .collect();
    let run = || {
        let mut sim = world().sim(&batch);
        let left = sim.run(&batch);
        let placements: Vec<_> = batch
            .iter()
            .map(|p| (sim.target_of(&p.name), sim.domain_of(&p.name, ZONE)))
            .collect();
        (left, placements)
    };
    assert_eq!(run(), run());
}

#[test]
fn hostname_spread_measures_skew_against_an_always_available_empty_host() {
    let mut w = world();
    w.nodes = vec![node("h1", &[]), node("h2", &[])];
    w.pods = vec![
        pod("o1").label("app", "a").on("h1").build(),
        pod("o2").label("app", "a").on("h2").build(),
    ];
    let p = pod("p")
        .label("app", "a")
        .spread(tsc(HOST, 1, Some(sel(&[("app", "a")]))))
        .build();
    let topo = w.topology(std::slice::from_ref(&p));
    // Both known hosts hold one pod; a new host could hold zero, so neither is within skew.
    let err = topo
        .add_requirements(&p, &strict(&p), &reqs(&[(HOST, &["h1", "h2"])]))
        .unwrap_err();
    assert!(err.to_string().contains("counts = {h1: 1, h2: 1}"), "{err}");
}

#[test]
fn inverse_anti_affinity_on_hostname_offers_the_other_existing_hosts() {
    let mut w = world();
    w.nodes = vec![node("n1", &[]), node("n2", &[])];
    w.pods = vec![
        pod("x")
            .anti(term(HOST, sel(&[("app", "a")])))
            .on("n1")
            .build(),
    ];
    let t = pod("t").label("app", "a").build();
    let topo = w.topology(std::slice::from_ref(&t));
    let got = topo
        .add_requirements(&t, &strict(&t), &Requirements::new())
        .unwrap();
    assert_eq!(got.get(HOST).unwrap().values(), [arc("n2")]);
    assert!(
        topo.add_requirements(&t, &strict(&t), &reqs(&[(HOST, &["n1"])]))
            .is_err()
    );
}
