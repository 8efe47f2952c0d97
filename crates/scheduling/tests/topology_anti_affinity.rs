//! Pod anti-affinity, in both directions: a pod's own anti-affinity and other pods' required
//! anti-affinity holding it off (inverse), undecided domains, existing pods, preferred terms;
//! driven through a miniature scheduler (upstream `topology_test.go`, by behaviour).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod topology_support;

use scheduling::pod::{LabelSelector, Pod};
use topology_support::*;

fn s2() -> LabelSelector {
    sel(&[("security", "s2")])
}

fn target(name: &str) -> P {
    pod(name).label("security", "s2")
}

fn same_target(sim: &Sim, a: &str, b: &str) -> bool {
    let (ta, tb) = (sim.target_of(a), sim.target_of(b));
    ta.is_some() && ta == tb
}

#[test]
fn anti_affinity_on_hostname_separates_pods_in_either_order() {
    for reversed in [false, true] {
        let mut batch = vec![
            pod("anti").anti(term(HOST, s2())).build(),
            target("t").build(),
        ];
        if reversed {
            batch.reverse();
        }
        let mut sim = world().sim(&batch);
        assert!(sim.run(&batch).is_empty());
        assert!(!same_target(&sim, "anti", "t"), "reversed={reversed}");
    }
}

fn pinned_targets() -> Vec<Pod> {
    [ZONE_1, ZONE_2, ZONE_3]
        .iter()
        .map(|z| target(&format!("t-{z}")).node_selector(ZONE, z).build())
        .collect()
}

#[test]
fn anti_affinity_on_zone_fails_when_every_zone_has_a_target() {
    let mut batch = pinned_targets();
    batch.push(pod("anti").anti(term(ZONE, s2())).build());
    let mut sim = world().sim(&batch);
    assert_eq!(sim.run(&batch), ["anti"]);
}

#[test]
fn anti_affinity_blocks_every_zone_an_undecided_target_may_take() {
    let batch = vec![
        target("t").build(),
        pod("anti").anti(term(ZONE, s2())).build(),
    ];
    let mut sim = world().sim(&batch);
    assert_eq!(sim.run(&batch), ["anti"]);
}

fn zone_pinned_anti(preferred: bool) -> Vec<Pod> {
    [ZONE_1, ZONE_2, ZONE_3]
        .iter()
        .map(|z| {
            let p = pod(&format!("a-{z}")).node_selector(ZONE, z);
            if preferred {
                p.preferred_anti(10, term(ZONE, s2()))
            } else {
                p.anti(term(ZONE, s2()))
            }
            .build()
        })
        .collect()
}

#[test]
fn inverse_anti_affinity_blocks_the_selected_pod_in_every_zone() {
    let mut batch = zone_pinned_anti(false);
    batch.push(target("t").build());
    let mut sim = world().sim(&batch);
    assert_eq!(sim.run(&batch), ["t"]);
}

#[test]
fn preferred_anti_affinity_is_not_tracked_inversely() {
    let mut batch = zone_pinned_anti(true);
    batch.push(target("t").build());
    let mut sim = world().sim(&batch);
    assert!(sim.run(&batch).is_empty());
    assert_eq!(sim.topology.inverse_group_count(), 0);
}

#[test]
fn undecided_anti_affinity_pod_blocks_all_its_candidate_zones() {
    let batch = vec![
        pod("anti").anti(term(ZONE, s2())).build(),
        target("t").build(),
    ];
    let mut sim = world().sim(&batch);
    assert_eq!(sim.run(&batch), ["t"]);

    // Once the anti-affinity pod's node exists in zone-1, the target avoids only zone-1.
    let mut w = world();
    w.nodes.push(node("n1", &[(ZONE, ZONE_1)]));
    w.pods
        .push(pod("anti").anti(term(ZONE, s2())).on("n1").build());
    let batch = vec![target("t").build()];
    let mut sim = w.sim(&batch);
    assert!(sim.run(&batch).is_empty());
    let (_, i) = sim.target_of("t").unwrap();
    let zones = sim.claims[i].requirements.get(ZONE).unwrap();
    assert!(!zones.has(ZONE_1) && zones.has(ZONE_2) && zones.has(ZONE_3));
}

fn existing_anti_world(preferred: bool) -> World {
    let mut w = world();
    for (i, z) in [ZONE_1, ZONE_2, ZONE_3].iter().enumerate() {
        let name = format!("n{i}");
        w.nodes.push(node(&name, &[(ZONE, z)]));
        let p = pod(&format!("a{i}")).on(&name);
        w.pods.push(
            if preferred {
                p.preferred_anti(10, term(ZONE, s2()))
            } else {
                p.anti(term(ZONE, s2()))
            }
            .build(),
        );
    }
    w
}

#[test]
fn inverse_anti_affinity_of_existing_pods_blocks_every_zone() {
    let batch = vec![target("t").build()];
    let mut sim = existing_anti_world(false).sim(&batch);
    let err = sim.place(&batch[0]).unwrap_err();
    assert!(err.contains("inverse pod anti-affinity"), "{err}");
}

#[test]
fn preferred_anti_affinity_of_existing_pods_does_not_block() {
    let batch = vec![target("t").build()];
    let mut sim = existing_anti_world(true).sim(&batch);
    assert!(sim.run(&batch).is_empty());
}

#[test]
fn self_anti_affinity_on_zone_places_one_pod_per_batch_until_zones_are_decided() {
    let batch = pods("p", 3, &target("p").anti(term(ZONE, s2())));
    let mut sim = world().sim(&batch);
    assert_eq!(sim.run(&batch).len(), 2);

    let mut w = world();
    for (i, z) in [ZONE_1, ZONE_2].iter().enumerate() {
        w.nodes.push(node(&format!("n{i}"), &[(ZONE, z)]));
        w.pods.push(
            target(&format!("old{i}"))
                .anti(term(ZONE, s2()))
                .on(&format!("n{i}"))
                .build(),
        );
    }
    w.capacity = 1;
    let mut sim = w.sim(&batch);
    assert_eq!(sim.run(&batch).len(), 2);
    let placed = batch
        .iter()
        .find(|p| sim.target_of(&p.name).is_some())
        .unwrap();
    assert_eq!(sim.domain_of(&placed.name, ZONE).as_deref(), Some(ZONE_3));
}

#[test]
fn preferred_anti_affinity_is_violated_when_needed() {
    let spreaders = pods(
        "s",
        3,
        &pod("s")
            .label("test", "test")
            .spread(tsc(ZONE, 1, Some(sel(&[("test", "test")])))),
    );
    let anti = pods(
        "a",
        10,
        &pod("a").preferred_anti(50, term(ZONE, sel(&[("test", "test")]))),
    );
    let batch: Vec<Pod> = spreaders.into_iter().chain(anti).collect();
    let mut sim = world().sim(&batch);
    assert!(sim.run(&batch).is_empty());
}
