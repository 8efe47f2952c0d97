#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use super::*;
use crate::disruption::testing::{Fixture, instance_type, now};
use api::well_known::taints::DISRUPTED;

fn fixture() -> Fixture {
    let big = instance_type("big", 8, 0.8);
    let mut f = Fixture::default();
    f.pool("default", vec![big.clone()]);
    f.node("n1", "default", &big).node("n2", "default", &big);
    f.pod("a", Some("n1"), "1");
    f
}

fn reasons(blocked: &[Blocked]) -> Vec<(String, String)> {
    blocked
        .iter()
        .map(|b| (b.node.clone(), b.reason.clone()))
        .collect()
}

#[test]
fn managed_initialized_nodes_are_candidates_with_price_and_pods() {
    let (c, blocked) = fixture().candidates(Class::Graceful);
    assert!(blocked.is_empty(), "{blocked:?}");
    assert_eq!(c.len(), 2);
    assert_eq!(c[0].node, "n1");
    assert_eq!(c[0].node_claim, "n1-claim");
    assert!((c[0].price - 0.8).abs() < 1e-9);
    assert_eq!(c[0].reschedulable.len(), 1);
    assert!(!c[0].is_empty());
    assert!(c[1].is_empty());
    assert!(c[0].consolidation.is_consolidatable());
}

#[test]
fn do_not_disrupt_on_node_claim_or_pod_blocks_and_names_it() {
    let mut f = fixture();
    f.nodes[1]
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(DO_NOT_DISRUPT.into(), "true".into());
    Arc::make_mut(&mut f.pods[0])
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(DO_NOT_DISRUPT.into(), "true".into());
    let (c, blocked) = f.candidates(Class::Graceful);
    assert!(c.is_empty());
    assert_eq!(
        reasons(&blocked),
        vec![
            (
                "n1".into(),
                "pod \"default/a\" has \"karpenter.sh/do-not-disrupt\" annotation".into()
            ),
            (
                "n2".into(),
                "node has \"karpenter.sh/do-not-disrupt\" annotation".into()
            ),
        ]
    );
    assert!(blocked.iter().all(|b| b.notable));
}

#[test]
fn a_pdb_without_allowed_disruptions_blocks_graceful_but_not_eventual_with_a_grace_period() {
    let mut f = fixture();
    f.pdb("a", 0);
    let (c, blocked) = f.candidates(Class::Graceful);
    assert_eq!(c.len(), 1, "only the other node");
    assert_eq!(
        reasons(&blocked),
        vec![(
            "n1".into(),
            "pdb \"default/a\" prevents pod evictions".into()
        )]
    );
    let (_, blocked) = f.candidates(Class::Eventual);
    assert_eq!(
        blocked.len(),
        1,
        "eventual without a terminationGracePeriod is blocked too"
    );
    f.node_claims[0].spec.termination_grace_period = Some("1h".into());
    let (c, blocked) = f.candidates(Class::Eventual);
    assert!(blocked.is_empty());
    assert_eq!(c.len(), 2);
    // A pod that already terminates does not block.
    f.node_claims[0].spec.termination_grace_period = None;
    Arc::make_mut(&mut f.pods[0]).metadata.deletion_timestamp = Some(
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(crate::disruption::testing::now()),
    );
    let (c, _) = f.candidates(Class::Graceful);
    assert_eq!(c.len(), 2);
    assert!(c[0].is_empty(), "a terminating pod needs no new home");
}

#[test]
fn busy_nodes_are_left_alone_quietly() {
    let mut f = fixture();
    f.in_flight.insert("n1".into());
    f.nodes[1].spec.get_or_insert_with(Default::default).taints =
        Some(vec![k8s_openapi::api::core::v1::Taint {
            key: DISRUPTED.into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        }]);
    let (c, blocked) = f.candidates(Class::Graceful);
    assert!(c.is_empty());
    assert!(blocked.iter().all(|b| !b.notable), "{blocked:?}");
    let mut f = fixture();
    f.nominated.insert("n2".into());
    f.node_claims[0].status.as_mut().unwrap().conditions = None;
    let (c, blocked) = f.candidates(Class::Graceful);
    assert!(c.is_empty());
    assert_eq!(
        reasons(&blocked),
        vec![
            ("n1".into(), "node is not initialized".into()),
            ("n2".into(), "node is nominated for a pending pod".into()),
        ]
    );
}

/// A fresh node whose pods have not been bound yet looks empty, but it is not: while a pod
/// its NodeClaim was created for is unbound (and the node initialized recently), it is
/// left alone; a bound, deleted or long-waiting pod no longer holds it.
#[test]
fn a_fresh_node_is_held_for_the_unbound_pods_it_was_created_for() {
    let initialized_just_now = |f: &mut Fixture| {
        let at = now() - std::time::Duration::from_secs(5);
        for nc in &mut f.node_claims {
            for c in nc.status.as_mut().unwrap().conditions.as_mut().unwrap() {
                c.last_transition_time = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at);
            }
        }
    };
    let mut f = fixture();
    initialized_just_now(&mut f);
    f.pod("late", None, "1");
    f.planned.insert(
        "n2-claim".into(),
        vec!["uid-late".into(), "uid-gone".into()],
    );
    let (c, blocked) = f.candidates(Class::Graceful);
    assert_eq!(
        c.iter().map(|c| c.node.as_str()).collect::<Vec<_>>(),
        ["n1"]
    );
    assert_eq!(
        reasons(&blocked),
        vec![("n2".into(), "node is nominated for a pending pod".into())]
    );
    assert!(blocked[0].transient);

    let mut bound = f.clone();
    Arc::make_mut(&mut bound.pods[1])
        .spec
        .as_mut()
        .unwrap()
        .node_name = Some("n1".into());
    assert_eq!(
        bound.candidates(Class::Graceful).0.len(),
        2,
        "the pod went elsewhere"
    );

    let mut deleting = f.clone();
    Arc::make_mut(&mut deleting.pods[1])
        .metadata
        .deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now()));
    assert_eq!(
        deleting.candidates(Class::Graceful).0.len(),
        2,
        "the pod is going away"
    );

    let mut other = f.clone();
    other.planned.clear();
    other
        .planned
        .insert("n1-claim".into(), vec!["uid-late".into()]);
    assert_eq!(
        reasons(&other.candidates(Class::Graceful).1),
        vec![("n1".into(), "node is nominated for a pending pod".into())],
        "only the NodeClaim the pod was planned for is held"
    );

    let mut old = fixture();
    old.pod("late", None, "1");
    old.planned
        .insert("n2-claim".into(), vec!["uid-late".into()]);
    assert_eq!(
        old.candidates(Class::Graceful).0.len(),
        2,
        "initialized long ago: the scheduler had its chance"
    );
}

/// A disruption replacement is made for the pods of the nodes it replaces. Initialized long
/// ago (the drain may take minutes), it is still held while one of those pods is on a node
/// that is leaving; once the pods left that node (or it stays), it is a candidate again.
#[test]
fn a_replacement_is_held_while_the_pods_it_was_made_for_are_on_a_leaving_node() {
    // n2 replaces n1; pod a (on n1) is what it was made for.
    let mut f = fixture();
    f.planned.insert("n2-claim".into(), vec!["uid-a".into()]);
    let held = |f: &Fixture| {
        reasons(&f.candidates(Class::Graceful).1)
            .contains(&("n2".into(), "node is nominated for a pending pod".into()))
    };
    assert!(!held(&f), "n1 is not leaving: n2 is no replacement waiting");

    let mut in_flight = f.clone();
    in_flight.in_flight.insert("n1".into());
    assert!(held(&in_flight), "n1 is in a command in flight");

    let mut tainted = f.clone();
    tainted.nodes[0].spec.as_mut().unwrap().taints =
        Some(vec![k8s_openapi::api::core::v1::Taint {
            key: DISRUPTED.into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        }]);
    assert!(held(&tainted), "n1 is being drained");

    let mut deleting = f.clone();
    deleting.node_claims[0].metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now()));
    assert!(held(&deleting), "n1's NodeClaim is deleting");

    let mut evicted = deleting.clone();
    evicted.pods.clear();
    assert!(!held(&evicted), "the pod left n1: n2 is on its own");
}

#[test]
fn unmanaged_nodes_are_not_considered_and_missing_pools_are_named() {
    let mut f = fixture();
    f.nodes[0]
        .metadata
        .labels
        .as_mut()
        .unwrap()
        .remove(NODE_POOL);
    f.node_pools.clear();
    let (c, blocked) = f.candidates(Class::Graceful);
    assert!(c.is_empty());
    assert_eq!(
        reasons(&blocked),
        vec![("n2".into(), "nodepool \"default\" not found".into())]
    );
}

#[test]
fn eviction_cost_follows_deletion_cost_and_priority() {
    let mut f = fixture();
    let pod = f.pod("p", Some("n2"), "1");
    assert!((eviction_cost(pod) - 1.0).abs() < 1e-9);
    pod.spec.as_mut().unwrap().priority = Some(1 << 25);
    assert!((eviction_cost(pod) - 2.0).abs() < 1e-9);
    pod.spec.as_mut().unwrap().priority = Some(-(1 << 30));
    assert!((eviction_cost(pod) + 10.0).abs() < 1e-9, "clamped");
    let (c, _) = f.candidates(Class::Graceful);
    assert!(
        c[1].is_empty(),
        "a pod with a negative cost does not make a node busy"
    );
}

#[test]
fn another_providers_node_claims_are_never_candidates_nor_reported() {
    let mut f = fixture();
    f.node_claims[0].spec.node_class_ref.group = "karpenter.k8s.aws".into();
    assert!(!is_ours(&f.node_claims[0]));
    assert!(is_ours(&f.node_claims[1]));
    let (c, blocked) = f.candidates(Class::Graceful);
    assert_eq!(
        c.iter().map(|c| c.node.as_str()).collect::<Vec<_>>(),
        ["n2"]
    );
    assert!(
        blocked.is_empty(),
        "not ours, not ours to explain: {blocked:?}"
    );
}
