//! Pod constraints end to end (spec §3.11, §3.12): topology spread, pod affinity and
//! anti-affinity, node affinity with several terms, preferences and their relaxation under the
//! Respect and Ignore policies, tolerations and the PreferNoSchedule relaxation step.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod scheduler_support;

use std::collections::BTreeSet;

use scheduler_support::*;
use scheduling::fixtures::{pod, spread_constraint};
use scheduling::labels::{CAPACITY_TYPE, HOSTNAME, TOPOLOGY_ZONE};
use scheduling::pod::{LabelSelector, NodeInclusionPolicy, Pod, WhenUnsatisfiable};
use scheduling::requirements::{Operator, SelectorRequirement};
use scheduling::scheduler::Cluster;
use scheduling::taints::TaintEffect;

fn web(n: usize) -> Vec<Pod> {
    (0..n)
        .map(|i| {
            pod(&format!("web-{i}"))
                .cpu("100m")
                .label("app", "web")
                .zone_spread(1)
                .build()
                .unwrap()
        })
        .collect()
}

fn app(name: &str) -> scheduling::fixtures::PodBuilder {
    pod(name)
        .cpu("100m")
        .label("app", name.split('-').next().unwrap())
}

fn schedule_anyway(
    key: &str,
    selector: &[(&str, &str)],
) -> scheduling::pod::TopologySpreadConstraint {
    let mut c = spread_constraint(key, 1);
    c.when_unsatisfiable = WhenUnsatisfiable::ScheduleAnyway;
    c.label_selector = Some(LabelSelector::from_labels(selector.iter().copied()));
    c
}

fn distinct_zones(results: &scheduling::scheduler::Results, pods: &[Pod]) -> BTreeSet<String> {
    pods.iter()
        .map(|p| zone(expect_claim(results, p)))
        .collect()
}

#[test]
fn zonal_spread_balances_pods_across_the_three_on_demand_zones() {
    let pods = web(6);
    let results = solve_default(&pods);
    assert_all_placed(&results, &pods);
    let counts = zone_counts(&results, &pods);
    assert_eq!(
        counts.values().copied().collect::<Vec<_>>(),
        [2, 2, 2],
        "{counts:?}"
    );
}

#[test]
fn zonal_spread_of_uneven_counts_keeps_the_skew_within_max_skew() {
    let pods = web(7);
    let results = solve_default(&pods);
    assert_all_placed(&results, &pods);
    let counts = zone_counts(&results, &pods);
    assert_eq!(counts.len(), 3);
    let max = counts.values().max().unwrap();
    let min = counts.values().min().unwrap();
    assert!(max - min <= 1, "{counts:?}");
}

#[test]
fn zonal_spread_is_limited_to_the_zones_the_pod_requires() {
    let pods: Vec<Pod> = (0..4)
        .map(|i| {
            pod(&format!("two-{i}"))
                .label("app", "two")
                .require(TOPOLOGY_ZONE, Operator::In, &[ZONE_1, ZONE_2])
                .zone_spread(1)
                .build()
                .unwrap()
        })
        .collect();
    let results = solve_default(&pods);
    assert_all_placed(&results, &pods);
    let counts = zone_counts(&results, &pods);
    assert_eq!(
        counts.keys().map(String::as_str).collect::<Vec<_>>(),
        [ZONE_1, ZONE_2]
    );
    assert_eq!(counts.values().copied().collect::<Vec<_>>(), [2, 2]);
}

#[test]
fn zonal_spread_of_spot_pods_still_counts_the_zone_without_spot() {
    // A capacity-type selector does not narrow the pod's zone domains: zone 3 (on-demand only)
    // stays a domain with zero pods, so once zones 1 and 2 hold one pod each, max skew 1 only
    // allows zone 3, where spot is not offered.
    let pods: Vec<Pod> = (0..4)
        .map(|i| {
            pod(&format!("spot-{i}"))
                .label("app", "spot")
                .node_selector(CAPACITY_TYPE, "spot")
                .zone_spread(1)
                .build()
                .unwrap()
        })
        .collect();
    let results = solve_default(&pods);
    let counts = zone_counts(&results, &pods);
    assert_eq!(
        counts.keys().map(String::as_str).collect::<Vec<_>>(),
        [ZONE_1, ZONE_2]
    );
    assert_eq!(counts.values().copied().collect::<Vec<_>>(), [1, 1]);
    assert_eq!(results.errors.len(), 2);
    assert!(
        results.errors[0].message.contains("offering"),
        "{}",
        results.errors[0].message
    );
}

#[test]
fn zonal_spread_counts_pods_already_running_in_the_cluster() {
    let nodes = vec![node("full-1", &[("cpu", "1"), ("pods", "2")]).in_zone(ZONE_1)];
    let running = vec![
        bound(app("web-old-a").build().unwrap(), "full-1"),
        bound(app("web-old-b").build().unwrap(), "full-1"),
    ];
    let pods = web(2);
    let results = solve(&[pool("default")], &cluster(nodes, running), &pods);
    assert_all_placed(&results, &pods);
    let zones = distinct_zones(&results, &pods);
    assert_eq!(
        zones,
        [ZONE_2.to_owned(), ZONE_3.to_owned()].into_iter().collect()
    );
}

#[test]
fn zonal_spread_with_max_skew_two_doubles_up() {
    let pods: Vec<Pod> = (0..6)
        .map(|i| {
            pod(&format!("loose-{i}"))
                .label("app", "loose")
                .zone_spread(2)
                .build()
                .unwrap()
        })
        .collect();
    let results = solve_default(&pods);
    assert_all_placed(&results, &pods);
    let counts = zone_counts(&results, &pods);
    let max = counts.values().max().unwrap();
    let min = counts.values().min().unwrap_or(&0);
    assert!(max - min <= 2, "{counts:?}");
}

#[test]
fn hostname_spread_puts_one_pod_per_node_claim() {
    let pods: Vec<Pod> = (0..4)
        .map(|i| {
            pod(&format!("host-{i}"))
                .label("app", "host")
                .hostname_spread(1)
                .build()
                .unwrap()
        })
        .collect();
    let results = solve_default(&pods);
    assert_all_placed(&results, &pods);
    assert_eq!(results.new_node_claims.len(), 4);
}

#[test]
fn hostname_spread_counts_pods_on_existing_nodes() {
    // One selected pod already runs on the node: with max skew 1 a second may not join it
    // while another hostname has none.
    let nodes = vec![node("busy", &[("cpu", "8"), ("pods", "10")])];
    let running = vec![bound(
        pod("host-old").label("app", "host").build().unwrap(),
        "busy",
    )];
    let p = pod("host-new")
        .label("app", "host")
        .hostname_spread(1)
        .build()
        .unwrap();
    let results = solve(
        &[pool("default")],
        &cluster(nodes, running),
        std::slice::from_ref(&p),
    );
    assert_eq!(node_of(&results, &p), None);
    expect_claim(&results, &p);
}

#[test]
fn hostname_spread_with_max_skew_two_allows_two_pods_per_node_claim() {
    let pods: Vec<Pod> = (0..4)
        .map(|i| {
            pod(&format!("pair-{i}"))
                .label("app", "pair")
                .hostname_spread(2)
                .build()
                .unwrap()
        })
        .collect();
    let results = solve_default(&pods);
    assert_all_placed(&results, &pods);
    assert_eq!(results.new_node_claims.len(), 2);
    for claim in &results.new_node_claims {
        assert_eq!(claim.pods.len(), 2);
    }
}

fn soft_neighbours() -> Vec<Pod> {
    (0..3)
        .map(|i| {
            pod(&format!("soft-{i}"))
                .label("app", "soft")
                .preferred_anti_affinity(10, HOSTNAME, &[("app", "soft")])
                .build()
                .unwrap()
        })
        .collect()
}

#[test]
fn preferred_hostname_anti_affinity_is_honored_under_respect() {
    let pods = soft_neighbours();
    let results = solve_default(&pods);
    assert_all_placed(&results, &pods);
    assert_eq!(results.new_node_claims.len(), 3);
}

#[test]
fn preferred_hostname_anti_affinity_is_not_considered_under_ignore() {
    let pods = soft_neighbours();
    let results = solve_with(&[pool("default")], &Cluster::default(), &pods, ignore());
    assert_all_placed(&results, &pods);
    assert_eq!(results.new_node_claims.len(), 1);
}

#[test]
fn hostname_anti_affinity_places_one_pod_per_node_claim() {
    let pods: Vec<Pod> = (0..5)
        .map(|i| {
            pod(&format!("anti-{i}"))
                .label("app", "anti")
                .anti_affinity(HOSTNAME, &[("app", "anti")])
                .build()
                .unwrap()
        })
        .collect();
    let results = solve_default(&pods);
    assert_all_placed(&results, &pods);
    assert_eq!(results.new_node_claims.len(), 5);
}

#[test]
fn hostname_anti_affinity_avoids_existing_nodes_running_a_selected_pod() {
    let nodes = vec![
        node("node-a", &[("cpu", "8"), ("pods", "10")]),
        node("node-b", &[("cpu", "8"), ("pods", "10")]),
    ];
    let running = vec![bound(
        pod("db-old").label("app", "db").build().unwrap(),
        "node-a",
    )];
    let p = pod("p")
        .anti_affinity(HOSTNAME, &[("app", "db")])
        .build()
        .unwrap();
    let results = solve(
        &[pool("default")],
        &cluster(nodes, running),
        std::slice::from_ref(&p),
    );
    assert_eq!(node_of(&results, &p), Some("node-b"));
}

#[test]
fn pods_selected_by_a_running_pods_anti_affinity_avoid_its_node() {
    let nodes = vec![node("node-a", &[("cpu", "8"), ("pods", "10")])];
    let lonely = pod("lonely")
        .anti_affinity(HOSTNAME, &[("app", "db")])
        .build()
        .unwrap();
    let running = vec![bound(lonely, "node-a")];
    let db = pod("db").label("app", "db").build().unwrap();
    let results = solve(
        &[pool("default")],
        &cluster(nodes, running),
        std::slice::from_ref(&db),
    );
    assert_eq!(node_of(&results, &db), None);
    expect_claim(&results, &db);
}

/// The node a planned NodeClaim becomes once launched in `zone`: the cheapest option's
/// allocatable, its single-valued requirements as labels, plus the zone and a hostname.
fn launch(
    claim: &scheduling::scheduler::PlannedNodeClaim,
    name: &str,
    zone: &str,
) -> scheduling::scheduler::ExistingNode {
    let it = &claim.instance_types[0];
    let mut n = node(name, &[]);
    n.allocatable = it.allocatable().clone();
    n.capacity = it.capacity().clone();
    for r in claim.requirements.iter() {
        if let [value] = r.values()
            && !r.is_complement()
        {
            n.labels.insert(r.key_arc().clone(), value.clone());
        }
    }
    n.in_zone(zone)
}

#[test]
fn zonal_anti_affinity_places_one_pod_per_batch_while_zones_are_undecided() {
    // Late commitment (spec §3.11): a placed pod's claim may still land in any zone, so it blocks
    // them all for the rest of the batch; each later batch, seeing the launched node's zone, can
    // place one more pod, until every zone is taken.
    let pods: Vec<Pod> = (0..4)
        .map(|i| {
            pod(&format!("zanti-{i}"))
                .label("app", "zanti")
                .node_selector(CAPACITY_TYPE, "on-demand")
                .anti_affinity(TOPOLOGY_ZONE, &[("app", "zanti")])
                .build()
                .unwrap()
        })
        .collect();
    let mut nodes = Vec::new();
    let mut running: Vec<Pod> = Vec::new();
    for (batch, launched_zone) in [ZONE_1, ZONE_2, ZONE_3].into_iter().enumerate() {
        let pending: Vec<Pod> = pods
            .iter()
            .filter(|p| !running.iter().any(|r| r.uid == p.uid))
            .cloned()
            .collect();
        let results = solve(
            &[pool("default")],
            &cluster(nodes.clone(), running.clone()),
            &pending,
        );
        assert_eq!(results.new_node_claims.len(), 1, "batch {batch}");
        assert_eq!(results.errors.len(), pending.len() - 1, "batch {batch}");
        let claim = &results.new_node_claims[0];
        let mut expected_zones: Vec<&str> = [ZONE_1, ZONE_2, ZONE_3][batch..].to_vec();
        if expected_zones.len() == 1 {
            assert_eq!(zone(claim), expected_zones.pop().unwrap());
        } else {
            assert_eq!(
                values(claim, TOPOLOGY_ZONE),
                expected_zones,
                "batch {batch}"
            );
        }
        let name = format!("node-{batch}");
        nodes.push(launch(claim, &name, launched_zone));
        let placed = pending
            .iter()
            .find(|p| claim.pods.contains(&p.uid))
            .unwrap();
        running.push(bound(placed.clone(), &name));
    }
    let last: Vec<Pod> = pods
        .iter()
        .filter(|p| !running.iter().any(|r| r.uid == p.uid))
        .cloned()
        .collect();
    let results = solve(&[pool("default")], &cluster(nodes, running), &last);
    assert!(results.new_node_claims.is_empty());
    assert_eq!(results.errors.len(), 1);
}

#[test]
fn zone_undecided_anti_affinity_pod_blocks_every_candidate_zone() {
    // Quirk (spec §3.11, §10.6): the anti-affinity pod's claim may land in any zone, so all of
    // them are blocked for the pods it selects within this batch.
    let guard = pod("guard")
        .cpu("2")
        .anti_affinity(TOPOLOGY_ZONE, &[("app", "db")])
        .build()
        .unwrap();
    let db = pod("db").cpu("1").label("app", "db").build().unwrap();
    let pods = [guard.clone(), db.clone()];
    let results = solve_default(&pods);
    expect_claim(&results, &guard);
    expect_error(&results, &db);
}

#[test]
fn pods_selected_by_a_running_pods_zonal_anti_affinity_avoid_its_zone() {
    let nodes = vec![node("guarded", &[("cpu", "1"), ("pods", "1")]).in_zone(ZONE_1)];
    let guard = pod("guard")
        .anti_affinity(TOPOLOGY_ZONE, &[("app", "db")])
        .build()
        .unwrap();
    let db = pod("db").label("app", "db").build().unwrap();
    let results = solve(
        &[pool("default")],
        &cluster(nodes, vec![bound(guard, "guarded")]),
        std::slice::from_ref(&db),
    );
    assert_eq!(
        values(expect_claim(&results, &db), TOPOLOGY_ZONE),
        [ZONE_2, ZONE_3]
    );
}

#[test]
fn a_running_pods_preferred_anti_affinity_does_not_repel_other_pods() {
    let nodes = vec![node("guarded", &[("cpu", "1"), ("pods", "1")]).in_zone(ZONE_1)];
    let guard = pod("guard")
        .preferred_anti_affinity(10, TOPOLOGY_ZONE, &[("app", "db")])
        .build()
        .unwrap();
    let db = pod("db")
        .label("app", "db")
        .node_selector(TOPOLOGY_ZONE, ZONE_1)
        .build()
        .unwrap();
    let results = solve(
        &[pool("default")],
        &cluster(nodes, vec![bound(guard, "guarded")]),
        std::slice::from_ref(&db),
    );
    assert_eq!(zone(expect_claim(&results, &db)), ZONE_1);
}

#[test]
fn hostname_self_affinity_puts_every_pod_on_one_node_claim() {
    let pods: Vec<Pod> = (0..4)
        .map(|i| {
            pod(&format!("pack-{i}"))
                .cpu("500m")
                .label("app", "pack")
                .affinity(HOSTNAME, &[("app", "pack")])
                .build()
                .unwrap()
        })
        .collect();
    let results = solve_default(&pods);
    assert_all_placed(&results, &pods);
    assert_eq!(results.new_node_claims.len(), 1);
}

#[test]
fn zonal_affinity_collocates_pods_in_one_zone() {
    let pods: Vec<Pod> = (0..5)
        .map(|i| {
            pod(&format!("team-{i}"))
                .cpu("5")
                .label("app", "team")
                .affinity(TOPOLOGY_ZONE, &[("app", "team")])
                .build()
                .unwrap()
        })
        .collect();
    let results = solve_default(&pods);
    assert_all_placed(&results, &pods);
    assert!(results.new_node_claims.len() > 1);
    assert_eq!(distinct_zones(&results, &pods).len(), 1);
}

#[test]
fn zonal_affinity_follows_pods_running_in_the_cluster() {
    let nodes = vec![node("full", &[("cpu", "1"), ("pods", "1")]).in_zone(ZONE_3)];
    let running = vec![bound(
        pod("cache").label("app", "cache").build().unwrap(),
        "full",
    )];
    let p = pod("p")
        .affinity(TOPOLOGY_ZONE, &[("app", "cache")])
        .build()
        .unwrap();
    let results = solve(
        &[pool("default")],
        &cluster(nodes, running),
        std::slice::from_ref(&p),
    );
    assert_eq!(zone(expect_claim(&results, &p)), ZONE_3);
}

#[test]
fn hostname_affinity_puts_pods_on_the_same_node_claim() {
    let leader = pod("leader").cpu("1").label("app", "pair").build().unwrap();
    let follower = pod("follower")
        .cpu("500m")
        .affinity(HOSTNAME, &[("app", "pair")])
        .build()
        .unwrap();
    let pods = [leader.clone(), follower.clone()];
    let results = solve_default(&pods);
    assert_eq!(
        claim_index(&results, &leader),
        claim_index(&results, &follower)
    );
}

#[test]
fn required_affinity_to_pods_that_exist_nowhere_is_not_schedulable() {
    let p = pod("p")
        .affinity(TOPOLOGY_ZONE, &[("app", "ghost")])
        .build()
        .unwrap();
    let results = solve_default(std::slice::from_ref(&p));
    expect_error(&results, &p);
}

#[test]
fn affinity_to_a_pod_scheduled_later_in_the_batch_succeeds_on_a_later_pass() {
    // The follower is tried first (more CPU) and fails; once the leader is placed the queue
    // gives it another try.
    let follower = pod("follower")
        .cpu("2")
        .affinity(TOPOLOGY_ZONE, &[("app", "leader")])
        .build()
        .unwrap();
    let leader = pod("leader")
        .cpu("1")
        .label("app", "leader")
        .node_selector(TOPOLOGY_ZONE, ZONE_2)
        .build()
        .unwrap();
    let pods = [follower.clone(), leader.clone()];
    let results = solve_default(&pods);
    assert_all_placed(&results, &pods);
    assert_eq!(zone(expect_claim(&results, &follower)), ZONE_2);
}

#[test]
fn preferred_node_affinity_is_honored_under_respect() {
    let p = pod("p")
        .prefer(10, TOPOLOGY_ZONE, Operator::In, &[ZONE_2])
        .build()
        .unwrap();
    let results = solve_default(std::slice::from_ref(&p));
    assert_eq!(zone(expect_claim(&results, &p)), ZONE_2);
}

#[test]
fn preferred_node_affinity_is_not_considered_under_ignore() {
    let p = pod("p")
        .prefer(10, TOPOLOGY_ZONE, Operator::In, &[ZONE_2])
        .build()
        .unwrap();
    let results = solve_with(
        &[pool("default")],
        &Cluster::default(),
        std::slice::from_ref(&p),
        ignore(),
    );
    assert_eq!(single(expect_claim(&results, &p), TOPOLOGY_ZONE), None);
}

#[test]
fn impossible_preferred_node_affinity_is_relaxed() {
    let p = pod("p")
        .prefer(10, TOPOLOGY_ZONE, Operator::In, &["nowhere"])
        .build()
        .unwrap();
    let results = solve_default(std::slice::from_ref(&p));
    let claim = expect_claim(&results, &p);
    assert_eq!(single(claim, TOPOLOGY_ZONE), None);
}

#[test]
fn preferences_are_relaxed_heaviest_first_down_to_lighter_ones() {
    let p = pod("p")
        .prefer(50, TOPOLOGY_ZONE, Operator::In, &["nowhere"])
        .prefer(20, TOPOLOGY_ZONE, Operator::In, &[ZONE_3])
        .prefer(1, TOPOLOGY_ZONE, Operator::In, &[ZONE_1])
        .build()
        .unwrap();
    let results = solve_default(std::slice::from_ref(&p));
    assert_eq!(zone(expect_claim(&results, &p)), ZONE_3);
}

#[test]
fn preference_conflicting_with_the_requirement_is_relaxed() {
    let p = pod("p")
        .require(TOPOLOGY_ZONE, Operator::In, &[ZONE_1])
        .prefer(10, TOPOLOGY_ZONE, Operator::In, &[ZONE_2])
        .build()
        .unwrap();
    let results = solve_default(std::slice::from_ref(&p));
    assert_eq!(zone(expect_claim(&results, &p)), ZONE_1);
}

#[test]
fn preferred_node_affinity_prefers_an_existing_node_that_matches() {
    let nodes = vec![
        node("node-a", &[("cpu", "4"), ("pods", "10")]).in_zone(ZONE_1),
        node("node-b", &[("cpu", "4"), ("pods", "10")]).in_zone(ZONE_2),
    ];
    let p = pod("p")
        .prefer(10, TOPOLOGY_ZONE, Operator::In, &[ZONE_2])
        .build()
        .unwrap();
    let results = solve(
        &[pool("default")],
        &cluster(nodes, vec![]),
        std::slice::from_ref(&p),
    );
    assert_eq!(node_of(&results, &p), Some("node-b"));
}

#[test]
fn preferred_node_affinity_launches_a_matching_node_claim_before_using_a_non_matching_node() {
    // Preferences are treated as required until relaxed, and a new NodeClaim can honour it.
    let nodes = vec![node("node-a", &[("cpu", "4"), ("pods", "10")]).in_zone(ZONE_1)];
    let p = pod("p")
        .prefer(10, TOPOLOGY_ZONE, Operator::In, &[ZONE_2])
        .build()
        .unwrap();
    let results = solve(
        &[pool("default")],
        &cluster(nodes, vec![]),
        std::slice::from_ref(&p),
    );
    assert_eq!(node_of(&results, &p), None);
    assert_eq!(zone(expect_claim(&results, &p)), ZONE_2);
}

#[test]
fn unsatisfiable_preference_falls_back_to_a_non_matching_existing_node() {
    let nodes = vec![node("node-a", &[("cpu", "4"), ("pods", "10")]).in_zone(ZONE_1)];
    let p = pod("p")
        .prefer(10, TOPOLOGY_ZONE, Operator::In, &["nowhere"])
        .build()
        .unwrap();
    let results = solve(
        &[pool("default")],
        &cluster(nodes, vec![]),
        std::slice::from_ref(&p),
    );
    assert_eq!(node_of(&results, &p), Some("node-a"));
}

#[test]
fn preferred_anti_affinity_is_relaxed_when_no_zone_is_left_free() {
    let pods: Vec<Pod> = (0..4)
        .map(|i| {
            pod(&format!("soft-{i}"))
                .label("app", "soft")
                .node_selector(CAPACITY_TYPE, "on-demand")
                .preferred_anti_affinity(10, TOPOLOGY_ZONE, &[("app", "soft")])
                .build()
                .unwrap()
        })
        .collect();
    let results = solve_default(&pods);
    assert_all_placed(&results, &pods);
    // The first pod's undecided zone blocks every zone, so the others drop the preference and
    // then simply join its claim.
    assert_eq!(results.new_node_claims.len(), 1);
}

#[test]
fn preferred_affinity_to_missing_pods_is_relaxed() {
    let p = pod("p")
        .preferred_affinity(10, TOPOLOGY_ZONE, &[("app", "ghost")])
        .build()
        .unwrap();
    let results = solve_default(std::slice::from_ref(&p));
    expect_claim(&results, &p);
}

#[test]
fn preferred_affinity_is_honored_when_possible() {
    let nodes = vec![node("full", &[("cpu", "1"), ("pods", "1")]).in_zone(ZONE_2)];
    let running = vec![bound(
        pod("cache").label("app", "cache").build().unwrap(),
        "full",
    )];
    let p = pod("p")
        .preferred_affinity(10, TOPOLOGY_ZONE, &[("app", "cache")])
        .build()
        .unwrap();
    let results = solve(
        &[pool("default")],
        &cluster(nodes, running),
        std::slice::from_ref(&p),
    );
    assert_eq!(zone(expect_claim(&results, &p)), ZONE_2);
}

#[test]
fn schedule_anyway_spread_is_honored_under_respect_when_possible() {
    let pods: Vec<Pod> = (0..3)
        .map(|i| {
            pod(&format!("soft-{i}"))
                .label("app", "soft")
                .spread_constraint(schedule_anyway(TOPOLOGY_ZONE, &[("app", "soft")]))
                .build()
                .unwrap()
        })
        .collect();
    let results = solve_default(&pods);
    assert_all_placed(&results, &pods);
    assert_eq!(distinct_zones(&results, &pods).len(), 3);
}

#[test]
fn schedule_anyway_spread_is_ignored_under_ignore() {
    let pods: Vec<Pod> = (0..3)
        .map(|i| {
            pod(&format!("soft-{i}"))
                .label("app", "soft")
                .spread_constraint(schedule_anyway(TOPOLOGY_ZONE, &[("app", "soft")]))
                .build()
                .unwrap()
        })
        .collect();
    let results = solve_with(&[pool("default")], &Cluster::default(), &pods, ignore());
    assert_all_placed(&results, &pods);
    assert_eq!(results.new_node_claims.len(), 1);
}

/// Pools whose only schedulable zone is zone 1, while a tainted pool makes all three zones
/// count as spread domains (nodeTaintsPolicy Ignore).
fn zone_1_only_pools() -> Vec<scheduling::scheduler::NodePool> {
    vec![
        pool("zone-1").with_requirement(req(TOPOLOGY_ZONE, Operator::In, &[ZONE_1])),
        pool("tainted").with_taint(taint("dedicated", "x", TaintEffect::NoSchedule)),
    ]
}

fn spread_pods(n: usize, when: WhenUnsatisfiable) -> Vec<Pod> {
    (0..n)
        .map(|i| {
            let mut c = spread_constraint(TOPOLOGY_ZONE, 1);
            c.when_unsatisfiable = when;
            c.label_selector = Some(LabelSelector::from_labels([("app", "skewed")]));
            pod(&format!("skewed-{i}"))
                .label("app", "skewed")
                .spread_constraint(c)
                .build()
                .unwrap()
        })
        .collect()
}

#[test]
fn do_not_schedule_spread_refuses_to_exceed_max_skew() {
    let pods = spread_pods(3, WhenUnsatisfiable::DoNotSchedule);
    let results = solve(&zone_1_only_pools(), &Cluster::default(), &pods);
    assert_eq!(results.pods_on_new_node_claims(), 1);
    assert_eq!(results.errors.len(), 2);
}

#[test]
fn schedule_anyway_spread_is_relaxed_when_max_skew_cannot_be_met() {
    let pods = spread_pods(3, WhenUnsatisfiable::ScheduleAnyway);
    let results = solve(&zone_1_only_pools(), &Cluster::default(), &pods);
    assert_all_placed(&results, &pods);
    for p in &pods {
        assert_eq!(zone(expect_claim(&results, p)), ZONE_1);
    }
}

#[test]
fn unsatisfiable_schedule_anyway_spread_is_ignored_under_ignore() {
    let pods = spread_pods(3, WhenUnsatisfiable::ScheduleAnyway);
    let results = solve_with(&zone_1_only_pools(), &Cluster::default(), &pods, ignore());
    assert_all_placed(&results, &pods);
    assert_eq!(results.new_node_claims.len(), 1);
}

#[test]
fn spread_with_node_taints_policy_honor_ignores_domains_of_untolerated_nodepools() {
    let pods: Vec<Pod> = (0..3)
        .map(|i| {
            let mut c = spread_constraint(TOPOLOGY_ZONE, 1);
            c.label_selector = Some(LabelSelector::from_labels([("app", "honor")]));
            c.node_taints_policy = NodeInclusionPolicy::Honor;
            pod(&format!("honor-{i}"))
                .label("app", "honor")
                .spread_constraint(c)
                .build()
                .unwrap()
        })
        .collect();
    let results = solve(&zone_1_only_pools(), &Cluster::default(), &pods);
    assert_all_placed(&results, &pods);
}

#[test]
fn required_node_affinity_terms_are_alternatives_and_the_first_is_dropped_on_failure() {
    let mut p = pod("p")
        .require(TOPOLOGY_ZONE, Operator::In, &["nowhere"])
        .build()
        .unwrap();
    p.required_node_affinity.push(vec![SelectorRequirement::new(
        TOPOLOGY_ZONE,
        Operator::In,
        [ZONE_2],
    )]);
    let results = solve_default(std::slice::from_ref(&p));
    assert_eq!(zone(expect_claim(&results, &p)), ZONE_2);
}

#[test]
fn first_satisfiable_required_node_affinity_term_is_used() {
    let mut p = pod("p")
        .require(TOPOLOGY_ZONE, Operator::In, &[ZONE_1])
        .build()
        .unwrap();
    p.required_node_affinity.push(vec![SelectorRequirement::new(
        TOPOLOGY_ZONE,
        Operator::In,
        [ZONE_2],
    )]);
    let results = solve_default(std::slice::from_ref(&p));
    assert_eq!(zone(expect_claim(&results, &p)), ZONE_1);
}

#[test]
fn the_last_required_node_affinity_term_is_never_dropped() {
    let mut p = pod("p")
        .require(TOPOLOGY_ZONE, Operator::In, &["nowhere"])
        .build()
        .unwrap();
    p.required_node_affinity.push(vec![SelectorRequirement::new(
        TOPOLOGY_ZONE,
        Operator::In,
        ["elsewhere"],
    )]);
    let results = solve_default(std::slice::from_ref(&p));
    expect_error(&results, &p);
}

#[test]
fn required_node_affinity_terms_are_relaxed_under_ignore_too() {
    let mut p = pod("p")
        .require(TOPOLOGY_ZONE, Operator::In, &["nowhere"])
        .build()
        .unwrap();
    p.required_node_affinity.push(vec![SelectorRequirement::new(
        TOPOLOGY_ZONE,
        Operator::In,
        [ZONE_3],
    )]);
    let results = solve_with(
        &[pool("default")],
        &Cluster::default(),
        std::slice::from_ref(&p),
        ignore(),
    );
    assert_eq!(zone(expect_claim(&results, &p)), ZONE_3);
}

#[test]
fn prefer_no_schedule_taint_is_tolerated_as_the_last_relaxation_step() {
    let pools = [pool("soft").with_taint(taint("dedicated", "x", TaintEffect::PreferNoSchedule))];
    let p = pod("p").build().unwrap();
    let results = solve(&pools, &Cluster::default(), std::slice::from_ref(&p));
    let claim = expect_claim(&results, &p);
    assert_eq!(&*claim.node_pool, "soft");
}

#[test]
fn untainted_nodepool_is_preferred_over_relaxing_prefer_no_schedule() {
    let pools = [
        pool("soft").with_weight(100).with_taint(taint(
            "dedicated",
            "x",
            TaintEffect::PreferNoSchedule,
        )),
        pool("open"),
    ];
    let p = pod("p").build().unwrap();
    let results = solve(&pools, &Cluster::default(), std::slice::from_ref(&p));
    assert_eq!(&*expect_claim(&results, &p).node_pool, "open");
}

#[test]
fn no_schedule_taint_is_never_relaxed() {
    let pools = [pool("hard").with_taint(taint("dedicated", "x", TaintEffect::NoSchedule))];
    let p = pod("p")
        .prefer(1, TOPOLOGY_ZONE, Operator::In, &[ZONE_1])
        .build()
        .unwrap();
    let results = solve(&pools, &Cluster::default(), std::slice::from_ref(&p));
    expect_error(&results, &p);
}

#[test]
fn prefer_no_schedule_taint_is_tolerated_under_ignore_too() {
    // Upstream's Preferences.Relax runs every step whatever the policy; under Ignore the
    // preference steps change nothing, but the PreferNoSchedule toleration does.
    let pools = [pool("soft").with_taint(taint("dedicated", "x", TaintEffect::PreferNoSchedule))];
    let p = pod("p").build().unwrap();
    let results = solve_with(
        &pools,
        &Cluster::default(),
        std::slice::from_ref(&p),
        ignore(),
    );
    assert_eq!(&*expect_claim(&results, &p).node_pool, "soft");
}

#[test]
fn existing_node_whose_hostname_label_differs_from_its_name_takes_hostname_constrained_pods() {
    // A node's hostname domain is its hostname label (its name only when the label is absent).
    let mut n = node("node-a", &[("cpu", "4"), ("pods", "10")]);
    n.labels.insert(HOSTNAME.into(), "host-a".into());
    let p = pod("p")
        .label("app", "solo")
        .anti_affinity(HOSTNAME, &[("app", "solo")])
        .build()
        .unwrap();
    let results = solve(
        &[pool("default")],
        &cluster(vec![n], vec![]),
        std::slice::from_ref(&p),
    );
    assert_eq!(node_of(&results, &p), Some("node-a"));
}
