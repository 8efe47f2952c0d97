//! Properties of topology answers over random placement sequences: zonal spread never lets the
//! skew between zones exceed maxSkew and picks exactly the least-loaded valid zone offered;
//! hostname anti-affinity never co-locates two selected pods.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod topology_support;

use std::collections::BTreeMap;

use proptest::prelude::*;
use scheduling::labels::WellKnownLabels;
use scheduling::pod::Pod;
use scheduling::requirements::Requirements;
use scheduling::topology::{DomainUniverse, Placement, PreferencePolicy, Topology, TopologyInput};
use topology_support::*;

const ZONES: [&str; 5] = ["za", "zb", "zc", "zd", "ze"];

fn topology(zones: usize, batch: &[Pod]) -> Topology {
    let mut universe = DomainUniverse::new();
    for z in &ZONES[..zones] {
        universe.insert(ZONE, z, &[]);
    }
    Topology::new(TopologyInput {
        policy: PreferencePolicy::Respect,
        universe: &universe,
        nodes: &[],
        pods: &[],
        namespaces: &BTreeMap::new(),
        batch,
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Each step offers a random non-empty subset of zones (as a candidate NodeClaim would).
    #[test]
    fn zonal_spread_never_exceeds_max_skew(
        zones in 2usize..=5,
        max_skew in 1i32..=3,
        offers in prop::collection::vec(prop::collection::vec(any::<bool>(), 5), 1..60),
    ) {
        let template = pod("p").label("app", "a").spread(tsc(ZONE, max_skew, Some(sel(&[("app", "a")]))));
        let batch = pods("p", offers.len(), &template);
        let mut topo = topology(zones, &batch);
        let wk = WellKnownLabels::default();
        let mut counts = vec![0i64; zones];
        for (p, offer) in batch.iter().zip(&offers) {
            let offered: Vec<&str> = (0..zones).filter(|&i| offer[i]).map(|i| ZONES[i]).collect();
            let node = if offered.is_empty() { Requirements::new() } else { reqs(&[(ZONE, &offered)]) };
            let candidates: Vec<usize> = if offered.is_empty() { (0..zones).collect() } else { (0..zones).filter(|&i| offer[i]).collect() };
            let min = *counts.iter().min().unwrap();
            let valid: Vec<usize> = candidates.iter().copied().filter(|&i| counts[i] + 1 - min <= i64::from(max_skew)).collect();
            let expected = valid.iter().copied().min_by_key(|&i| (counts[i], i));
            match topo.add_requirements(p, &p.strict_requirements().unwrap(), &node) {
                Ok(extra) => {
                    let zone = extra.get(ZONE).unwrap();
                    prop_assert_eq!(zone.values().len(), 1);
                    let chosen = ZONES.iter().position(|z| **z == *zone.values()[0]).unwrap();
                    prop_assert_eq!(Some(chosen), expected);
                    let mut placed = node.clone();
                    placed.add_all(&extra);
                    topo.record(p, Placement::node_claim(&placed, &[], &wk));
                    counts[chosen] += 1;
                }
                Err(_) => prop_assert_eq!(expected, None),
            }
            let (lo, hi) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
            prop_assert!(hi - lo <= i64::from(max_skew), "counts {:?}", counts);
        }
    }

    /// Random pods (selected or not) try random hosts (existing or new): selected pods never
    /// share a host with another selected pod... when either side carries the anti-affinity.
    #[test]
    fn hostname_anti_affinity_never_colocates(
        steps in prop::collection::vec((any::<bool>(), any::<bool>(), 0usize..6), 1..40),
    ) {
        let batch: Vec<Pod> = steps
            .iter()
            .enumerate()
            .map(|(i, &(selected, anti, _))| {
                let mut p = pod(&format!("p{i}"));
                if selected { p = p.label("app", "a"); }
                if anti { p = p.anti(term(HOST, sel(&[("app", "a")]))); }
                p.build()
            })
            .collect();
        let mut topo = topology(1, &batch);
        let wk = WellKnownLabels::default();
        let mut hosts: BTreeMap<usize, Vec<(bool, bool)>> = BTreeMap::new();
        for (p, &(selected, anti, host)) in batch.iter().zip(&steps) {
            let name = format!("h{host}");
            topo.register(HOST, &name);
            let node = reqs(&[(HOST, &[name.as_str()])]);
            let conflict = hosts.get(&host).is_some_and(|placed| {
                placed.iter().any(|&(s, a)| (anti && s) || (a && selected))
            });
            match topo.add_requirements(p, &p.strict_requirements().unwrap(), &node) {
                Ok(_) => {
                    prop_assert!(!conflict);
                    topo.record(p, Placement::node_claim(&node, &[], &wk));
                    hosts.entry(host).or_default().push((selected, anti));
                }
                Err(_) => prop_assert!(conflict),
            }
        }
    }
}
