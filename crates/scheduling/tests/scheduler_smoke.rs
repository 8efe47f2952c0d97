//! End-to-end smoke of the scheduler on the benchmark's seed-42 pods.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use scheduling::fixtures::{benchmark_node_pool, fake_instance_types, options, read_pods_tsv};
use scheduling::scheduler::{Cluster, PreferencePolicy, Scheduler};

#[test]
fn seed_42_diverse_pods_all_schedule() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/fixtures/bench/diverse-1000-seed42.tsv"
    );
    let pods = read_pods_tsv(&std::fs::read_to_string(path).unwrap()).unwrap();
    let pool = benchmark_node_pool(fake_instance_types(400).unwrap());
    let start = std::time::Instant::now();
    let scheduler = Scheduler::new(
        &[pool],
        &Cluster::default(),
        &pods,
        options(PreferencePolicy::Respect),
    );
    let results = scheduler.solve(&pods);
    eprintln!("{:?} for {} pods", start.elapsed(), pods.len());
    assert!(results.errors.is_empty(), "{:?}", results.errors.first());
    assert_eq!(results.pods_on_new_node_claims(), 1000);
    let sizes: Vec<usize> = results
        .new_node_claims
        .iter()
        .map(|n| n.pods.len())
        .collect();
    eprintln!(
        "nodeclaims {} min {:?} max {:?}",
        sizes.len(),
        sizes.iter().min(),
        sizes.iter().max()
    );
}
