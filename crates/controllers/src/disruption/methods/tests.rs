#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::collections::BTreeSet;

use super::*;
use crate::disruption::candidates::Class;
use crate::disruption::testing::{
    Fixture, instance_type, marginal_replacements, now, spot_instance_type, unpriced_instance_type,
};

fn budgets(f: &Fixture, reason: DisruptionReason) -> BudgetMap {
    f.budgets(reason)
}

fn names(cmd: &Command) -> Vec<String> {
    cmd.nodes()
}

fn set_budget(f: &mut Fixture, nodes: &str) {
    let d = f.node_pools[0].spec.disruption.as_mut().unwrap();
    d.budgets = Some(vec![api::nodepool::Budget {
        nodes: nodes.into(),
        ..api::nodepool::Budget::defaults()[0].clone()
    }]);
}

/// Five empty nodes and one busy one.
fn empties() -> Fixture {
    let big = instance_type("big", 8, 0.8);
    let mut f = Fixture::default();
    f.pool("default", vec![big.clone()]);
    for i in 0..6 {
        f.node(&format!("n{i}"), "default", &big);
    }
    f.pod("busy", Some("n0"), "1");
    f
}

#[test]
fn emptiness_takes_every_empty_node_within_the_budget() {
    let f = empties();
    let (c, _) = f.candidates(Class::Graceful);
    let cmd = emptiness(&c, &mut budgets(&f, DisruptionReason::Empty)).unwrap();
    assert_eq!(names(&cmd), ["n1", "n2", "n3", "n4", "n5"]);
    assert_eq!(cmd.decision(), Decision::Delete);
    assert!((cmd.savings - 4.0).abs() < 1e-9);
}

#[test]
fn emptiness_leaves_the_nodes_hosting_buffer_pods_alone() {
    let f = empties();
    let (mut c, _) = f.candidates(Class::Graceful);
    for cand in c.iter_mut().filter(|c| c.node == "n2" || c.node == "n4") {
        cand.buffer_pods = 1;
    }
    let cmd = emptiness(&c, &mut budgets(&f, DisruptionReason::Empty)).unwrap();
    assert_eq!(names(&cmd), ["n1", "n3", "n5"]);
}

#[test]
fn a_budget_of_zero_blocks_and_twenty_percent_limits() {
    let mut f = empties();
    set_budget(&mut f, "0");
    let (c, _) = f.candidates(Class::Graceful);
    assert!(emptiness(&c, &mut budgets(&f, DisruptionReason::Empty)).is_none());
    set_budget(&mut f, "20%");
    // 20 % of 6 nodes, rounded up: 2.
    let cmd = emptiness(&c, &mut budgets(&f, DisruptionReason::Empty)).unwrap();
    assert_eq!(cmd.candidates.len(), 2);
    // A node already disrupting (not Ready) uses up one of them.
    f.nodes[0]
        .status
        .as_mut()
        .unwrap()
        .conditions
        .as_mut()
        .unwrap()[0]
        .status = "False".into();
    let cmd = emptiness(&c, &mut budgets(&f, DisruptionReason::Empty)).unwrap();
    assert_eq!(cmd.candidates.len(), 1);
}

#[test]
fn emptiness_waits_for_consolidate_after_and_respects_never() {
    let mut f = empties();
    f.node_pools[0]
        .spec
        .disruption
        .as_mut()
        .unwrap()
        .consolidate_after = api::common::NillableDuration("Never".into());
    let (c, _) = f.candidates(Class::Graceful);
    assert!(emptiness(&c, &mut budgets(&f, DisruptionReason::Empty)).is_none());
    f.node_pools[0]
        .spec
        .disruption
        .as_mut()
        .unwrap()
        .consolidate_after = api::common::NillableDuration("10m".into());
    for nc in &mut f.node_claims {
        nc.status.as_mut().unwrap().last_pod_event_time =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                now()
                    .checked_sub(k8s_openapi::jiff::SignedDuration::from_secs(60))
                    .unwrap(),
            ));
    }
    let (c, _) = f.candidates(Class::Graceful);
    assert!(
        emptiness(&c, &mut budgets(&f, DisruptionReason::Empty)).is_none(),
        "a pod left a minute ago"
    );
}

#[test]
fn a_half_empty_pair_becomes_one_node() {
    let big = instance_type("big", 8, 0.8);
    let mut f = Fixture::default();
    f.pool("default", vec![big.clone()]);
    f.node("n1", "default", &big).node("n2", "default", &big);
    f.pod("a", Some("n1"), "3");
    f.pod("b", Some("n2"), "2");
    let (c, _) = f.candidates(Class::Graceful);
    let world = f.world();
    let b = budgets(&f, DisruptionReason::Underutilized);
    assert!(
        multi_node(&world, &c, &f.node_pools, &b).is_none(),
        "one node of the same type is not cheaper than two? it is, but the same type must be strictly cheaper than the cheapest candidate"
    );
    let (cmd, _) = single_node(&world, &c, &f.node_pools, &b);
    let cmd = cmd.unwrap();
    assert_eq!(cmd.decision(), Decision::Delete);
    assert_eq!(cmd.candidates.len(), 1);
    assert_eq!(cmd.method, Method::SingleNode);
}

/// Two commands must not count on the same free room: the pods of a node a command in flight
/// already tainted will need a place, so a second node whose pods only fit in that same room
/// stays (it used to be deleted, and its pods ended up on a new node).
#[test]
fn room_a_command_in_flight_needs_is_not_offered_twice() {
    let big = instance_type("big", 8, 0.8);
    let mut f = Fixture::default();
    f.pool("default", vec![big.clone()]);
    f.node("leaving", "default", &big)
        .node("room", "default", &big)
        .node("n3", "default", &big);
    f.pod("moving", Some("leaving"), "4");
    f.pod("resident", Some("room"), "4");
    f.pod("c", Some("n3"), "4");
    let b = budgets(&f, DisruptionReason::Underutilized);
    // Before the first command: n3's pod fits beside the resident pod.
    let (c, _) = f.candidates(Class::Graceful);
    let world = f.world();
    let n3: Vec<&Candidate> = c.iter().filter(|c| c.node == "n3").collect();
    assert_eq!(
        consolidation(&world, &n3, Method::SingleNode)
            .unwrap()
            .decision(),
        Decision::Delete
    );
    // A command took "leaving": tainted karpenter.sh/disrupted, its pod about to move to "room".
    f.nodes[0].spec.get_or_insert_with(Default::default).taints =
        Some(vec![k8s_openapi::api::core::v1::Taint {
            key: api::well_known::taints::DISRUPTED.into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        }]);
    let (c, _) = f.candidates(Class::Graceful);
    let mut names: Vec<&str> = c.iter().map(|c| c.node.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["n3", "room"]);
    let world = f.world();
    let n3: Vec<&Candidate> = c.iter().filter(|c| c.node == "n3").collect();
    let err = consolidation(&world, &n3, Method::SingleNode).unwrap_err();
    assert!(
        err.contains("cheaper") || err.contains("would schedule"),
        "{err}"
    );
    let (cmd, _) = single_node(&world, &c, &f.node_pools, &b);
    assert!(cmd.is_none(), "{cmd:?}");
}

/// The pods of a leaving node must find a place in every later simulation, even when the
/// scheduler's size order places a candidate's bigger pod first: a 3-cpu pod that only the
/// `disk=ssd` node can take, and a 4-cpu pod of n3 that would fill that node, mean n3 stays.
#[test]
fn a_leaving_pod_the_size_order_would_crowd_out_keeps_its_room() {
    let big = instance_type("big", 8, 0.8);
    let mut f = Fixture::default();
    f.pool("default", vec![big.clone()]);
    f.node("leaving", "default", &big)
        .node("room", "default", &big)
        .node("n3", "default", &big);
    f.nodes[1]
        .metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert("disk".into(), "ssd".into());
    f.pod("moving", Some("leaving"), "3")
        .spec
        .as_mut()
        .unwrap()
        .node_selector = Some([("disk".to_owned(), "ssd".to_owned())].into());
    f.pod("resident", Some("room"), "4");
    f.pod("c", Some("n3"), "4");
    f.nodes[0].spec.get_or_insert_with(Default::default).taints =
        Some(vec![k8s_openapi::api::core::v1::Taint {
            key: api::well_known::taints::DISRUPTED.into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        }]);
    let (c, _) = f.candidates(Class::Graceful);
    let world = f.world();
    let n3: Vec<&Candidate> = c.iter().filter(|c| c.node == "n3").collect();
    let err = consolidation(&world, &n3, Method::SingleNode).unwrap_err();
    assert!(err.contains("default/moving"), "{err}");
}

#[test]
fn a_node_is_replaced_by_a_cheaper_type_but_never_by_an_equal_one() {
    let big = instance_type("big", 8, 0.8);
    let small = instance_type("small", 2, 0.2);
    let mut f = Fixture::default();
    f.pool("default", vec![big.clone(), small]);
    f.node("n1", "default", &big);
    f.pod("a", Some("n1"), "1");
    let (c, _) = f.candidates(Class::Graceful);
    let b = budgets(&f, DisruptionReason::Underutilized);
    let (cmd, _) = single_node(&f.world(), &c, &f.node_pools, &b);
    let cmd = cmd.unwrap();
    assert_eq!(cmd.decision(), Decision::Replace);
    assert_eq!(cmd.replacement_types(), ["small"]);
    assert!((cmd.savings - 0.6).abs() < 1e-9, "{}", cmd.savings);
    assert_eq!(
        cmd.summary(),
        "Replacing 1 node(s) (n1) with small, savings 0.600/h"
    );
    assert!(
        cmd.replacements[0]
            .instance_types
            .iter()
            .all(|it| it.name() != "big"),
        "only strictly cheaper options"
    );

    let mut f = Fixture::default();
    let small = instance_type("small", 2, 0.2);
    f.pool("default", vec![small.clone()]);
    f.node("n1", "default", &small);
    f.pod("a", Some("n1"), "1");
    let (c, _) = f.candidates(Class::Graceful);
    let b = budgets(&f, DisruptionReason::Underutilized);
    let (cmd, reasons) = single_node(&f.world(), &c, &f.node_pools, &b);
    assert!(cmd.is_none());
    assert_eq!(
        reasons,
        vec![Unconsolidatable {
            node: "n1".into(),
            reason: "Can't replace with a cheaper node".into(),
            scores: Vec::new(),
        }]
    );
}

#[test]
fn an_unpriced_node_is_removed_but_never_replaced_and_never_a_replacement() {
    // A priced node whose only smaller option is unpriced stays: unpriced is not cheaper.
    let big = instance_type("big", 8, 0.8);
    let free = unpriced_instance_type("free-small", 2);
    let mut f = Fixture::default();
    f.pool("default", vec![big.clone(), free.clone()]);
    f.node("n1", "default", &big);
    f.pod("a", Some("n1"), "1");
    let (c, _) = f.candidates(Class::Graceful);
    let b = budgets(&f, DisruptionReason::Underutilized);
    let (cmd, reasons) = single_node(&f.world(), &c, &f.node_pools, &b);
    assert!(cmd.is_none(), "{cmd:?}");
    assert_eq!(reasons[0].reason, "Can't replace with a cheaper node");

    // An unpriced node is not replaced by a priced one either: its cost is not known.
    let big_free = unpriced_instance_type("free-big", 8);
    let small = instance_type("small", 2, 0.2);
    let mut f = Fixture::default();
    f.pool("default", vec![big_free.clone(), small]);
    f.node("n1", "default", &big_free);
    f.pod("a", Some("n1"), "1");
    let (c, _) = f.candidates(Class::Graceful);
    assert!(!c[0].priced);
    let b = budgets(&f, DisruptionReason::Underutilized);
    let (cmd, reasons) = single_node(&f.world(), &c, &f.node_pools, &b);
    assert!(cmd.is_none(), "{cmd:?}");
    assert_eq!(
        reasons[0].reason,
        "Can't replace n1 by a cheaper node: its price is not known"
    );

    // But an empty unpriced node goes, and one whose pods fit elsewhere is deleted.
    f.node("n2", "default", &big_free);
    let (c, _) = f.candidates(Class::Graceful);
    let cmd = emptiness(&c, &mut budgets(&f, DisruptionReason::Empty)).unwrap();
    assert_eq!(names(&cmd), ["n2"]);
    let b = budgets(&f, DisruptionReason::Underutilized);
    let (cmd, _) = single_node(&f.world(), &c, &f.node_pools, &b);
    let cmd = cmd.unwrap();
    assert_eq!(cmd.decision(), Decision::Delete);
    assert!(cmd.savings.is_finite());
}

#[test]
fn multi_node_deletes_the_longest_prefix_that_fits() {
    let big = instance_type("big", 8, 0.8);
    let mut f = Fixture::default();
    f.pool("default", vec![big.clone()]);
    for i in 0..3 {
        f.node(&format!("n{i}"), "default", &big);
        f.pod(&format!("p{i}"), Some(&format!("n{i}")), "2");
    }
    let (c, _) = f.candidates(Class::Graceful);
    let b = budgets(&f, DisruptionReason::Underutilized);
    let cmd = multi_node(&f.world(), &c, &f.node_pools, &b).unwrap();
    assert_eq!(cmd.decision(), Decision::Delete);
    assert_eq!(cmd.candidates.len(), 2, "the third node takes both pods");
    assert_eq!(cmd.method.label(), "multi");
}

#[test]
fn pods_that_fit_nowhere_keep_their_node_but_pending_pods_do_not_block() {
    let big = instance_type("big", 8, 0.8);
    let mut f = Fixture::default();
    f.pool("default", vec![big.clone()]);
    f.node("n1", "default", &big).node("n2", "default", &big);
    f.pod("a", Some("n1"), "6");
    f.pod("b", Some("n2"), "6");
    f.pod("huge", None, "64");
    let (c, _) = f.candidates(Class::Graceful);
    let b = budgets(&f, DisruptionReason::Underutilized);
    let (cmd, reasons) = single_node(&f.world(), &c, &f.node_pools, &b);
    assert!(cmd.is_none());
    assert!(
        reasons[0]
            .reason
            .starts_with("Can't replace with a cheaper node"),
        "{reasons:?}"
    );
    std::sync::Arc::make_mut(&mut f.pods[1])
        .spec
        .as_mut()
        .unwrap()
        .containers[0]
        .resources
        .as_mut()
        .unwrap()
        .requests
        .as_mut()
        .unwrap()
        .insert(
            "cpu".into(),
            k8s_openapi::apimachinery::pkg::api::resource::Quantity("1".into()),
        );
    let (c, _) = f.candidates(Class::Graceful);
    let (cmd, _) = single_node(&f.world(), &c, &f.node_pools, &b);
    assert_eq!(
        cmd.unwrap().nodes(),
        ["n1"],
        "a's 6 cpu now fit beside b on n2; the pending 64-cpu pod, which fits nowhere, does not block"
    );
}

#[test]
fn when_empty_spot_and_budget_reasons_are_named() {
    let big = instance_type("big", 8, 0.8);
    let mut f = Fixture::default();
    f.pool("default", vec![big.clone()]);
    f.node("n1", "default", &big);
    f.pod("a", Some("n1"), "1");
    f.node_pools[0]
        .spec
        .disruption
        .as_mut()
        .unwrap()
        .consolidation_policy = Some(ConsolidationPolicy::WhenEmpty);
    let (c, _) = f.candidates(Class::Graceful);
    assert_eq!(
        underutilized(&c[0], &f.node_pools).unwrap_err(),
        "NodePool \"default\" has consolidation policy WhenEmpty"
    );
    f.node_pools[0]
        .spec
        .disruption
        .as_mut()
        .unwrap()
        .consolidation_policy = None;
    set_budget(&mut f, "0");
    let (c, _) = f.candidates(Class::Graceful);
    let b = budgets(&f, DisruptionReason::Underutilized);
    let (cmd, reasons) = single_node(&f.world(), &c, &f.node_pools, &b);
    assert!(cmd.is_none());
    assert!(reasons[0].reason.contains("blocking budget"), "{reasons:?}");

    let mut c = c;
    c[0].capacity_type = Some("spot".into());
    let world = f.world();
    let err = consolidation(&world, &[&c[0]], Method::SingleNode);
    assert!(
        err.is_err_and(|e| e.contains("SpotToSpotConsolidation")),
        "a spot node is never replaced by spot"
    );
}

/// `empties()` with its six nodes in one MachineDeployment of 6 replicas and min size `min`.
fn at_min_size(min: u32, leaving: &[&str]) -> Fixture {
    let mut f = empties();
    let answers = (0..6)
        .map(|i| {
            (
                format!("n{i}-claim"),
                Ok(Some(cloudprovider::RemovalRoom {
                    group: "default/md".into(),
                    min,
                    room: 6 - min,
                    hold: None,
                })),
            )
        })
        .collect();
    let leaving = leaving.iter().map(|n| format!("{n}-claim")).collect();
    f.floors = crate::disruption::floors::Floors::new(answers, &leaving);
    f
}

fn with_groups(f: &Fixture, reason: DisruptionReason) -> BudgetMap {
    let mut b = budgets(f, reason);
    b.groups.clone_from(f.floors.rooms());
    b
}

#[test]
fn emptiness_and_consolidation_never_take_a_group_below_its_min_size() {
    // Room for 3 of the 5 empty nodes: emptiness takes 3, in savings order.
    let f = at_min_size(3, &[]);
    let (c, blocked) = f.candidates(Class::Graceful);
    assert!(blocked.is_empty(), "{blocked:?}");
    let cmd = emptiness(&c, &mut with_groups(&f, DisruptionReason::Empty)).unwrap();
    assert_eq!(cmd.candidates.len(), 3, "{:?}", names(&cmd));

    // Two nodes already leaving use the room up: every node is blocked, and named.
    let f = at_min_size(4, &["n1", "n2"]);
    let (c, blocked) = f.candidates(Class::Graceful);
    assert!(c.is_empty(), "{c:?}");
    assert_eq!(blocked.len(), 6);
    assert!(
        blocked
            .iter()
            .all(|b| b.reason == "default/md is at its minimum size (4)" && b.notable),
        "{blocked:?}"
    );
    // Drift is not bounded: a drifted node at the minimum is replaced, as drift asks.
    let (eventual, _) = f.candidates(Class::Eventual);
    assert_eq!(eventual.len(), 6);

    // Multi-node consolidation stops at the room too: of 4 nodes whose pods fit on one, the
    // group's room of 2 lets 2 go.
    let big = instance_type("big", 8, 0.8);
    let mut f = Fixture::default();
    f.pool("default", vec![big.clone()]);
    let mut answers = std::collections::BTreeMap::new();
    for i in 0..4 {
        f.node(&format!("n{i}"), "default", &big);
        f.pod(&format!("p{i}"), Some(&format!("n{i}")), "1");
        answers.insert(
            format!("n{i}-claim"),
            Ok(Some(cloudprovider::RemovalRoom {
                group: "default/md".into(),
                min: 2,
                room: 2,
                hold: None,
            })),
        );
    }
    let (c, _) = f.candidates(Class::Graceful);
    let unbounded = multi_node(
        &f.world(),
        &c,
        &f.node_pools,
        &budgets(&f, DisruptionReason::Underutilized),
    )
    .unwrap();
    assert_eq!(unbounded.candidates.len(), 3, "{:?}", names(&unbounded));
    f.floors = crate::disruption::floors::Floors::new(answers, &BTreeSet::new());
    let (c, _) = f.candidates(Class::Graceful);
    let cmd = multi_node(
        &f.world(),
        &c,
        &f.node_pools,
        &with_groups(&f, DisruptionReason::Underutilized),
    )
    .unwrap();
    assert_eq!(cmd.candidates.len(), 2, "{:?}", names(&cmd));

    // A min size that cannot be read leaves the node alone.
    let mut f = empties();
    f.floors = crate::disruption::floors::Floors::new(
        std::collections::BTreeMap::from([(
            "n3-claim".to_owned(),
            Err("MachineDeployment default/md: min size \"two\" is not a number".to_owned()),
        )]),
        &BTreeSet::new(),
    );
    let (_, blocked) = f.candidates(Class::Graceful);
    assert_eq!(blocked.len(), 1);
    assert!(
        blocked[0].reason.contains("cannot be read") && blocked[0].reason.contains("\"two\""),
        "{blocked:?}"
    );
}

#[test]
fn a_balanced_pool_keeps_a_marginal_replacement_that_another_policy_takes() {
    let f = marginal_replacements();
    let (c, _) = f.candidates(Class::Graceful);
    let b = budgets(&f, DisruptionReason::Underutilized);
    let world = f.world();
    assert!(
        multi_node(&world, &c, &f.node_pools, &b).is_none(),
        "no two nodes fit on one"
    );
    let (cmd, reasons) = single_node(&world, &c, &f.node_pools, &b);
    let cmd = cmd.unwrap();
    assert_eq!(names(&cmd), ["s-half"]);
    assert_eq!(cmd.replacement_types(), ["medium"]);
    assert_eq!(cmd.scores.len(), 1);
    assert_eq!(cmd.scores[0].policy, "WhenEmptyOrUnderutilized");
    assert_eq!(cmd.scores[0].score, None);
    let kept = reasons.iter().find(|r| r.node == "b-half").unwrap();
    assert_eq!(
        kept.reason,
        "Balanced score 0.10 is below 0.5 (savings 5.0% of the NodePool's cost, disruption 50.0% of its disruption cost)"
    );
    assert_eq!(kept.scores.len(), 1);
    assert_eq!(kept.scores[0].pool, "balanced");
    assert_eq!(kept.scores[0].nodes, ["b-half"]);
    assert!((kept.scores[0].score.unwrap().value() - 0.1).abs() < 1e-9);

    // The same pool under the default policy replaces b-half too (the pools take turns:
    // "balanced" comes first).
    let mut f = f;
    f.policy("balanced", ConsolidationPolicy::WhenEmptyOrUnderutilized);
    let (c, _) = f.candidates(Class::Graceful);
    let (cmd, _) = single_node(&f.world(), &c, &f.node_pools, &b);
    assert_eq!(names(&cmd.unwrap()), ["b-half"]);
}

#[test]
fn a_balanced_move_with_enough_savings_is_approved_and_carries_its_score() {
    // b-half's pod alone on a 1-cpu "tiny" at $0.1/h: saving $0.9 of $2 (45 %) for 50 % of the
    // disruption scores 0.9.
    let mut f = marginal_replacements();
    let tiny = instance_type("tiny", 4, 0.1);
    f.instance_types.get_mut("balanced").unwrap().push(tiny);
    let (c, _) = f.candidates(Class::Graceful);
    let b = budgets(&f, DisruptionReason::Underutilized);
    let (cmd, _) = single_node(&f.world(), &c, &f.node_pools, &b);
    let cmd = cmd.unwrap();
    assert_eq!(names(&cmd), ["b-half"]);
    assert_eq!(cmd.replacement_types(), ["tiny"]);
    let score = cmd.scores[0].score.unwrap();
    assert!((score.value() - 0.9).abs() < 1e-9, "{score:?}");
    assert!(score.approved());
}

#[test]
fn a_balanced_candidate_whose_deletion_could_not_pass_is_not_simulated() {
    // Ten more full nodes in "balanced": deleting b-half outright would save $1 of $12 (8.3 %)
    // for 2 of 24 disruption (8.3 %), a score of 1.0. With b-half's pod weighted by priority,
    // not even that passes, so no replacement is simulated.
    let mut f = marginal_replacements();
    let big = instance_type("big", 8, 1.0);
    for i in 0..10 {
        f.node(&format!("b-more{i}"), "balanced", &big);
        f.pinned_pod(
            &format!("b-more{i}"),
            Some(&format!("b-more{i}")),
            "7",
            "balanced",
        );
    }
    let heavy = f
        .pods
        .iter_mut()
        .find(|p| p.metadata.name.as_deref() == Some("b-3"))
        .unwrap();
    // Eviction cost 1 + 2^28 / 2^25 = 9: b-half's disruption is 10 of 32.
    std::sync::Arc::make_mut(heavy)
        .spec
        .as_mut()
        .unwrap()
        .priority = Some(1 << 28);
    let (mut c, _) = f.candidates(Class::Graceful);
    c.retain(|c| c.node_pool == "balanced");
    let b = budgets(&f, DisruptionReason::Underutilized);
    let (cmd, reasons) = single_node(&f.world(), &c, &f.node_pools, &b);
    assert!(cmd.is_none(), "{cmd:?}");
    let kept = reasons.iter().find(|r| r.node == "b-half").unwrap();
    // (1 / 12) / (10 / 32) = 0.2667.
    assert!(
        kept.reason.starts_with("Balanced score 0.27 is below 0.5")
            && kept.reason.ends_with("even if it were deleted"),
        "{kept:?}"
    );
    assert!(kept.scores.is_empty(), "no move was computed");
}

#[test]
fn multi_node_takes_a_prefix_only_with_the_balanced_pool_s_approval() {
    // Two half-full `big` nodes ($1/h each) merge onto one `huge` ($1.9/h): 5 % of the cost
    // saved for all of the disruption, a score of 0.05.
    let big = instance_type("big", 8, 1.0);
    let huge = instance_type("huge", 16, 1.9);
    let mut f = Fixture::default();
    f.pool("p", vec![big.clone(), huge]);
    f.node("n0", "p", &big);
    f.node("n1", "p", &big);
    f.pod("a", Some("n0"), "5");
    f.pod("b", Some("n1"), "5");
    let (c, _) = f.candidates(Class::Graceful);
    let b = budgets(&f, DisruptionReason::Underutilized);
    let cmd = multi_node(&f.world(), &c, &f.node_pools, &b).unwrap();
    assert_eq!(names(&cmd), ["n0", "n1"]);
    assert_eq!(cmd.replacement_types(), ["huge"]);
    assert_eq!(cmd.scores[0].score, None);
    f.policy("p", ConsolidationPolicy::Balanced);
    assert!(multi_node(&f.world(), &c, &f.node_pools, &b).is_none());
}

/// Spec §5.8: a consolidation does not move pods onto a node still inside its
/// `consolidateAfter` window — a node that just emptied is emptiness's, not a destination
/// (against Cluster API, the last pod of a scale-in was moved onto a node that had just emptied
/// so that its own node could go).
#[test]
fn consolidation_moves_no_pod_onto_a_node_inside_its_consolidate_after_window() {
    let big = instance_type("big", 8, 0.8);
    let mut f = Fixture::default();
    f.pool("default", vec![big.clone()]);
    f.node_pools[0]
        .spec
        .disruption
        .as_mut()
        .unwrap()
        .consolidate_after = api::common::NillableDuration("30s".into());
    f.node("busy", "default", &big)
        .node("emptied", "default", &big);
    f.pod("a", Some("busy"), "1");
    let ago = |secs: i64| {
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            now()
                .checked_sub(k8s_openapi::jiff::SignedDuration::from_secs(secs))
                .unwrap(),
        ))
    };
    let set_last_event = |f: &mut Fixture, node: &str, secs: i64| {
        for nc in &mut f.node_claims {
            let status = nc.status.as_mut().unwrap();
            if status.node_name.as_deref() == Some(node) {
                status.last_pod_event_time = ago(secs);
            }
        }
    };
    set_last_event(&mut f, "busy", 600);
    set_last_event(&mut f, "emptied", 10);
    let busy = |f: &Fixture| -> Vec<Candidate> {
        let (c, _) = f.candidates(Class::Graceful);
        c.into_iter().filter(|c| c.node == "busy").collect()
    };
    let b = budgets(&f, DisruptionReason::Underutilized);
    let world = f.world();
    let (cmd, reasons) = single_node(&world, &busy(&f), &f.node_pools, &b);
    assert!(cmd.is_none(), "{cmd:?}");
    assert!(!reasons.is_empty());
    // Once the window has passed, the pod may move there (and its node go).
    set_last_event(&mut f, "emptied", 60);
    let world = f.world();
    let (cmd, _) = single_node(&world, &busy(&f), &f.node_pools, &b);
    let cmd = cmd.unwrap();
    assert_eq!(names(&cmd), ["busy"]);
    assert_eq!(cmd.decision(), Decision::Delete);
}

/// A spot node `n1` of a `big` spot type (8 cpu, $1/h) with a 1-cpu pod, and `smaller` cheaper
/// 2-cpu spot types.
fn spot_node_with(smaller: usize) -> Fixture {
    let mut types = vec![spot_instance_type("big", 8, 1.0)];
    for i in 0..smaller {
        types.push(spot_instance_type(
            &format!("s{i:02}"),
            2,
            0.1 + 0.01 * i as f64,
        ));
    }
    let mut f = Fixture::default();
    f.pool("default", types.clone());
    f.node("n1", "default", &types[0]);
    f.nodes[0]
        .metadata
        .labels
        .as_mut()
        .unwrap()
        .insert("karpenter.sh/capacity-type".into(), "spot".into());
    f.pod("a", Some("n1"), "1");
    f
}

/// Spot to spot (gate `SpotToSpotConsolidation`): off, a spot node is never replaced by spot;
/// on, a single spot node needs 15 cheaper options and its replacement keeps the 15 cheapest,
/// spot only.
#[test]
fn spot_to_spot_needs_the_gate_and_fifteen_cheaper_options_for_one_node() {
    let f = spot_node_with(16);
    let (c, _) = f.candidates(Class::Graceful);
    assert!(c[0].priced, "the spot node has its spot price");
    let err = consolidation(&f.world(), &[&c[0]], Method::SingleNode).unwrap_err();
    assert!(
        err.starts_with("SpotToSpotConsolidation is disabled"),
        "{err}"
    );

    let world = f.world().with_spot_to_spot(true);
    let cmd = consolidation(&world, &[&c[0]], Method::SingleNode).unwrap();
    assert_eq!(cmd.decision(), Decision::Replace);
    let options: Vec<&str> = cmd.replacements[0]
        .instance_types
        .iter()
        .map(|it| it.name())
        .collect();
    assert_eq!(options.len(), SPOT_TO_SPOT_MIN_OPTIONS, "{options:?}");
    assert_eq!(options[0], "s00");
    assert!(!options.contains(&"s15"), "only the 15 cheapest");
    let ct = cmd.replacements[0]
        .requirements
        .get(scheduling::labels::CAPACITY_TYPE)
        .unwrap();
    assert!(ct.has("spot") && !ct.has("on-demand"));

    let f = spot_node_with(14);
    let (c, _) = f.candidates(Class::Graceful);
    let world = f.world().with_spot_to_spot(true);
    let err = consolidation(&world, &[&c[0]], Method::SingleNode).unwrap_err();
    assert_eq!(
        err,
        "SpotToSpotConsolidation requires 15 cheaper instance type options than the current candidate to consolidate, got 14"
    );
    // Multi-node has no such minimum.
    let multi = consolidation(&world, &[&c[0]], Method::MultiNode).unwrap();
    assert_eq!(multi.replacements[0].instance_types.len(), 14);
}

/// Drift (spec §5.6): empty drifted nodes first, then by how long they have been drifted; a
/// drifted node whose pods need a node gets a replacement (never required to be cheaper); a
/// budget of 0 holds every one of them, saying so.
#[test]
fn drift_takes_empty_nodes_first_then_the_longest_drifted_and_respects_the_budget() {
    let big = instance_type("big", 8, 0.8);
    let mut f = Fixture::default();
    f.pool("default", vec![big.clone()]);
    f.node("n1", "default", &big)
        .node("n2", "default", &big)
        .node("n3", "default", &big);
    f.pod("wide", Some("n1"), "6");
    f.pod("other", Some("n3"), "4");
    let (mut c, _) = f.candidates(Class::Eventual);
    let at = |s: i64| Some(now() - std::time::Duration::from_secs(u64::try_from(s).unwrap()));
    for x in &mut c {
        x.drifted = match x.node.as_str() {
            "n1" => at(600),
            "n2" => at(60),
            _ => None,
        };
    }
    let world = f.world();
    let mut b = budgets(&f, DisruptionReason::Drifted);
    let (cmd, reasons) = drift(&world, &c, &mut b);
    let cmd = cmd.unwrap();
    assert!(reasons.is_empty(), "{reasons:?}");
    assert_eq!(
        names(&cmd),
        ["n2"],
        "the empty one first, though drifted later"
    );
    assert_eq!(cmd.decision(), Decision::Delete);

    // n2 busy too: n1's 6-cpu pod fits nowhere else, so it gets a replacement, as expensive
    // as it.
    let mut busy = f.clone();
    busy.pod("third", Some("n2"), "4");
    let rest: Vec<Candidate> = c.iter().filter(|x| x.node != "n2").cloned().collect();
    let mut b = budgets(&busy, DisruptionReason::Drifted);
    let (cmd, _) = drift(&busy.world(), &rest, &mut b);
    let cmd = cmd.unwrap();
    assert_eq!(names(&cmd), ["n1"]);
    assert_eq!(cmd.decision(), Decision::Replace);
    assert_eq!(cmd.replacement_types(), ["big"]);

    set_budget(&mut f, "0");
    let mut b = budgets(&f, DisruptionReason::Drifted);
    let (cmd, reasons) = drift(&world, &c, &mut b);
    assert!(cmd.is_none());
    assert_eq!(
        reasons
            .iter()
            .map(|r| r.reason.as_str())
            .collect::<Vec<_>>(),
        [
            budget_blocked(DisruptionReason::Drifted),
            budget_blocked(DisruptionReason::Drifted)
        ]
    );
}
