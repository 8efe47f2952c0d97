//! The scan indexes ([`super::classes`], [`super::host_blocks`]) change no decision: every
//! workload here is solved with and without them and the results must be identical, down to
//! the order of NodeClaims, their pods, instance types and every error message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use proptest::prelude::*;

use super::*;
use crate::fixtures::{
    Rng, benchmark_node_pool, diverse_pods, fake_instance_types, options, pod, preference_pods,
};
use crate::labels::{CAPACITY_TYPE, TOPOLOGY_ZONE};
use crate::requirements::Operator;

fn pools() -> Vec<NodePool> {
    vec![benchmark_node_pool(fake_instance_types(60).unwrap())]
}

fn solve(pods: &[Pod], policy: PreferencePolicy, indexed: bool) -> String {
    let pools = pools();
    let mut scheduler = Scheduler::new(&pools, &Cluster::default(), pods, options(policy));
    scheduler.use_classes = indexed;
    format!("{:#?}", scheduler.solve(pods))
}

fn assert_same(pods: &[Pod], policy: PreferencePolicy) {
    let with = solve(pods, policy, true);
    let without = solve(pods, policy, false);
    if with != without {
        let line = with
            .lines()
            .zip(without.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(0);
        panic!(
            "the indexed scan decided differently (first difference at line {line}):\n\
             indexed:   {:?}\nunindexed: {:?}",
            with.lines().nth(line),
            without.lines().nth(line)
        );
    }
}

#[test]
fn diverse_workloads_decide_the_same() {
    for (n, seed) in [(200, 1), (600, 42)] {
        assert_same(
            &diverse_pods(n, &mut Rng::new(seed)),
            PreferencePolicy::Respect,
        );
    }
}

#[test]
fn preference_workloads_decide_the_same() {
    let pods = preference_pods(200, &mut Rng::new(3));
    assert_same(&pods, PreferencePolicy::Respect);
    assert_same(&pods, PreferencePolicy::Ignore);
}

/// One generated pod: a mix of every constraint the indexes reason about, including pods with
/// hostname requirements of their own, thresholds above 1, a second domain key that appears
/// mid-solve only after preferences are relaxed, and pods nothing can hold.
fn mixed_pod(i: usize, choice: u8, app: u8, size: u8) -> Pod {
    let app = format!("app-{}", app % 4);
    let cpu = ["100m", "500m", "1", "3", "200"][usize::from(size % 5)];
    let base = pod(&format!("p{i}"))
        .uid(&format!("uid-{i:05}"))
        .created_at(i64::try_from(i).unwrap())
        .label("app", &app)
        .cpu(cpu)
        .memory("256Mi");
    let selector = [("app", app.as_str())];
    let built = match choice % 12 {
        0 => base,
        1 => base.zone_spread(1),
        2 => base.zone_spread(2),
        3 => base.hostname_spread(1),
        4 => base.hostname_spread(3),
        5 => base.affinity(TOPOLOGY_ZONE, &selector),
        6 => base.anti_affinity(TOPOLOGY_ZONE, &selector),
        7 => base.anti_affinity(HOSTNAME, &selector),
        8 => base.node_selector(HOSTNAME, "hostname-placeholder-0003"),
        9 => base
            .require(TOPOLOGY_ZONE, Operator::In, &["test-zone-1", "test-zone-2"])
            .zone_spread(1),
        10 => base
            .preferred_affinity(5, CAPACITY_TYPE, &selector)
            .preferred_anti_affinity(3, HOSTNAME, &selector)
            .zone_spread(1),
        _ => base
            .spread(CAPACITY_TYPE, 1)
            .anti_affinity(HOSTNAME, &selector),
    };
    built.build().unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn mixed_workloads_decide_the_same(
        spec in proptest::collection::vec((any::<u8>(), any::<u8>(), any::<u8>()), 1..100),
        respect in any::<bool>(),
    ) {
        let pods: Vec<Pod> = spec
            .iter()
            .enumerate()
            .map(|(i, &(choice, app, size))| mixed_pod(i, choice, app, size))
            .collect();
        let policy = if respect {
            PreferencePolicy::Respect
        } else {
            PreferencePolicy::Ignore
        };
        let with = solve(&pods, policy, true);
        let without = solve(&pods, policy, false);
        prop_assert_eq!(with, without);
    }
}
