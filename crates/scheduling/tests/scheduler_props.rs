//! Properties of whole solves over random pod mixes on the default fake catalogue: every pod
//! gets exactly one outcome; every planned NodeClaim can hold its pods on every instance type it
//! lists and its requirements fit each of them and every pod's selectors; hostname
//! anti-affinity and zonal spread are never violated; and launching the plan as nodes, then
//! solving again, plans nothing new.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod scheduler_support;

use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::prelude::*;
use scheduler_support::*;
use scheduling::fixtures::{BASE_CREATION_TIMESTAMP, fake_well_known_labels, pod};
use scheduling::labels::{ARCH, CAPACITY_TYPE, HOSTNAME, TOPOLOGY_ZONE};
use scheduling::pod::Pod;
use scheduling::resources::Resources;
use scheduling::scheduler::{Cluster, ExistingNode, PlannedNodeClaim, Results};

const CPU: [&str; 5] = ["100m", "500m", "1", "1500m", "3"];
const MEMORY: [&str; 4] = ["128Mi", "512Mi", "1Gi", "3Gi"];
const ZONES: [&str; 3] = [ZONE_1, ZONE_2, ZONE_3];

#[derive(Debug, Clone, Copy)]
enum Selector {
    None,
    Zone(usize),
    Arch(bool),
    Spot(bool),
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    /// Requests only, plus the selector.
    Plain(Selector),
    /// Hard zonal spread (max skew 1) over `app: spread`; no selector, so every zone is a
    /// domain the pod can reach.
    Spread,
    /// Required hostname anti-affinity to `app: anti`, plus the selector.
    Anti(Selector),
}

#[derive(Debug, Clone, Copy)]
struct Shape {
    cpu: usize,
    memory: usize,
    kind: Kind,
}

fn selector() -> impl Strategy<Value = Selector> {
    prop_oneof![
        3 => Just(Selector::None),
        1 => (0..ZONES.len()).prop_map(Selector::Zone),
        1 => any::<bool>().prop_map(Selector::Arch),
        1 => any::<bool>().prop_map(Selector::Spot),
    ]
}

fn shape() -> impl Strategy<Value = Shape> {
    let kind = prop_oneof![
        3 => selector().prop_map(Kind::Plain),
        1 => Just(Kind::Spread),
        1 => selector().prop_map(Kind::Anti),
    ];
    (0..CPU.len(), 0..MEMORY.len(), kind).prop_map(|(cpu, memory, kind)| Shape {
        cpu,
        memory,
        kind,
    })
}

fn build(shapes: &[Shape]) -> Vec<Pod> {
    shapes
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let name = format!("p-{i:03}");
            let mut b = pod(&name)
                .uid(&format!("uid-{i:03}"))
                .created_at(BASE_CREATION_TIMESTAMP + i64::try_from(i).unwrap())
                .cpu(CPU[s.cpu])
                .memory(MEMORY[s.memory]);
            let selector = match s.kind {
                Kind::Plain(sel) => sel,
                Kind::Spread => {
                    b = b.label("app", "spread").zone_spread(1);
                    Selector::None
                }
                Kind::Anti(sel) => {
                    b = b
                        .label("app", "anti")
                        .anti_affinity(HOSTNAME, &[("app", "anti")]);
                    sel
                }
            };
            b = match selector {
                Selector::None => b,
                Selector::Zone(z) => b.node_selector(TOPOLOGY_ZONE, ZONES[z]),
                Selector::Arch(arm) => b.node_selector(ARCH, if arm { "arm64" } else { "amd64" }),
                Selector::Spot(spot) => {
                    b.node_selector(CAPACITY_TYPE, if spot { "spot" } else { "on-demand" })
                }
            };
            b.build().unwrap()
        })
        .collect()
}

fn solve_pods(cluster: &Cluster, pods: &[Pod]) -> Results {
    solve(&[pool("default")], cluster, pods)
}

/// Where each pod went: `Some(claim index)`, `None` for an existing node; absent when failed.
fn outcomes(results: &Results, pods: &[Pod]) -> Result<BTreeMap<Arc<str>, Option<usize>>, String> {
    let mut out = BTreeMap::new();
    for p in pods {
        let claims: Vec<usize> = results
            .new_node_claims
            .iter()
            .enumerate()
            .filter(|(_, c)| c.pods.contains(&p.uid))
            .map(|(i, _)| i)
            .collect();
        let nodes = results
            .existing_nodes
            .iter()
            .filter(|b| b.pods.contains(&p.uid))
            .count();
        let errors = results.errors.iter().filter(|e| e.uid == p.uid).count();
        if claims.len() + nodes + errors != 1 {
            return Err(format!(
                "pod {} has {} claims, {nodes} nodes, {errors} errors",
                p.name,
                claims.len()
            ));
        }
        if errors == 0 {
            out.insert(p.uid.clone(), claims.first().copied());
        }
    }
    Ok(out)
}

fn pods_on<'a>(claim: &PlannedNodeClaim, pods: &'a [Pod]) -> Vec<&'a Pod> {
    claim
        .pods
        .iter()
        .map(|uid| pods.iter().find(|p| &p.uid == uid).unwrap())
        .collect()
}

/// The node a planned NodeClaim becomes: its cheapest option's allocatable and capacity, its
/// single-valued requirements as labels, and a hostname.
fn launch(claim: &PlannedNodeClaim, name: &str) -> ExistingNode {
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
    n
}

fn check_claims(results: &Results, pods: &[Pod]) -> Result<(), TestCaseError> {
    let well_known = fake_well_known_labels();
    for (i, claim) in results.new_node_claims.iter().enumerate() {
        prop_assert!(!claim.instance_types.is_empty(), "claim {i} lists nothing");
        let on = pods_on(claim, pods);
        let mut total = Resources::default();
        for p in &on {
            total.merge(&p.requests);
        }
        prop_assert_eq!(&claim.requests, &total, "claim {} requests", i);
        for it in &claim.instance_types {
            prop_assert!(
                it.fits(&total),
                "claim {i}: {} cannot hold {total}",
                it.name()
            );
            prop_assert!(
                claim.requirements.is_intersecting(it.requirements()),
                "claim {i}: {} does not meet {}",
                it.name(),
                claim.requirements
            );
            prop_assert!(
                it.has_compatible_offering(&claim.requirements, &well_known),
                "claim {i}: {} has no offering for {}",
                it.name(),
                claim.requirements
            );
        }
        for p in &on {
            for (key, value) in &p.node_selector {
                prop_assert_eq!(
                    values(claim, key),
                    vec![value.to_string()],
                    "claim {} vs selector of {}",
                    i,
                    &p.name
                );
            }
        }
        let anti = on.iter().filter(|p| p.has_label("app", "anti")).count();
        prop_assert!(anti <= 1, "claim {i} holds {anti} anti-affinity pods");
    }
    Ok(())
}

fn check_spread(results: &Results, pods: &[Pod]) -> Result<(), TestCaseError> {
    let mut counts: BTreeMap<&str, usize> = ZONES.iter().map(|z| (*z, 0)).collect();
    for p in pods.iter().filter(|p| p.has_label("app", "spread")) {
        let Some(claim) = claim_of(results, p) else {
            continue;
        };
        let zone = single(claim, TOPOLOGY_ZONE);
        prop_assert!(zone.is_some(), "spread pod {} on an unpinned claim", p.name);
        *counts.get_mut(zone.unwrap().as_str()).unwrap() += 1;
    }
    let max = counts.values().max().unwrap();
    let min = counts.values().min().unwrap();
    prop_assert!(max - min <= 1, "zone skew {counts:?}");
    Ok(())
}

/// Launches every planned NodeClaim as a node with its pods bound, then re-solves each claim's
/// pods against the others: they must fit the launched nodes without any new NodeClaim. The
/// pods that failed must still fail, again without a new NodeClaim.
fn check_idempotent(results: &Results, pods: &[Pod]) -> Result<(), TestCaseError> {
    let nodes: Vec<ExistingNode> = results
        .new_node_claims
        .iter()
        .enumerate()
        .map(|(i, c)| launch(c, &format!("node-{i:03}")))
        .collect();
    let bound_pods: Vec<Vec<Pod>> = results
        .new_node_claims
        .iter()
        .zip(&nodes)
        .map(|(c, n)| {
            pods_on(c, pods)
                .into_iter()
                .map(|p| bound(p.clone(), &n.name))
                .collect()
        })
        .collect();
    for (i, claim) in results.new_node_claims.iter().enumerate() {
        let others: Vec<Pod> = bound_pods
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .flat_map(|(_, b)| b.iter().cloned())
            .collect();
        let pending: Vec<Pod> = pods_on(claim, pods).into_iter().cloned().collect();
        let again = solve_pods(&cluster(nodes.clone(), others), &pending);
        prop_assert!(
            again.new_node_claims.is_empty() && again.errors.is_empty(),
            "claim {i} re-solved: {} new claims, errors {:?}",
            again.new_node_claims.len(),
            again.errors
        );
    }
    let failed: Vec<Pod> = pods
        .iter()
        .filter(|p| results.errors.iter().any(|e| e.uid == p.uid))
        .cloned()
        .collect();
    let all_bound: Vec<Pod> = bound_pods.into_iter().flatten().collect();
    let again = solve_pods(&cluster(nodes, all_bound), &failed);
    prop_assert!(again.new_node_claims.is_empty(), "failed pods got claims");
    prop_assert_eq!(again.errors.len(), failed.len());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn every_pod_is_placed_or_has_an_error(shapes in prop::collection::vec(shape(), 1..30)) {
        let pods = build(&shapes);
        let results = solve_pods(&Cluster::default(), &pods);
        let placed = outcomes(&results, &pods).map_err(TestCaseError::fail)?;
        prop_assert_eq!(placed.len() + results.errors.len(), pods.len());
        for error in &results.errors {
            prop_assert!(!error.message.is_empty());
        }
    }

    #[test]
    fn planned_node_claims_hold_their_pods_on_every_listed_instance_type(
        shapes in prop::collection::vec(shape(), 1..30),
    ) {
        let pods = build(&shapes);
        let results = solve_pods(&Cluster::default(), &pods);
        check_claims(&results, &pods)?;
    }

    #[test]
    fn hostname_anti_affinity_and_zonal_spread_are_never_violated(
        shapes in prop::collection::vec(shape(), 1..30),
    ) {
        let pods = build(&shapes);
        let results = solve_pods(&Cluster::default(), &pods);
        check_claims(&results, &pods)?;
        check_spread(&results, &pods)?;
    }

    #[test]
    fn solving_is_deterministic_and_independent_of_pod_order(
        shapes in prop::collection::vec(shape(), 1..30),
    ) {
        let pods = build(&shapes);
        let results = solve_pods(&Cluster::default(), &pods);
        let again = solve_pods(&Cluster::default(), &pods);
        prop_assert_eq!(format!("{results:?}"), format!("{again:?}"));
        let mut reversed = pods.clone();
        reversed.reverse();
        let backward = solve_pods(&Cluster::default(), &reversed);
        prop_assert_eq!(format!("{results:?}"), format!("{backward:?}"));
    }

    #[test]
    fn solving_again_on_the_launched_plan_plans_nothing_new(
        shapes in prop::collection::vec(shape(), 1..20),
    ) {
        let pods = build(&shapes);
        let results = solve_pods(&Cluster::default(), &pods);
        check_idempotent(&results, &pods)?;
    }
}
