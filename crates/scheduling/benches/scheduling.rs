//! Karpenter's scheduling benchmark (spec §8) as a criterion bench.
//!
//! 400 fake instance types, one NodePool, an empty cluster; diverse pods at 1 … 20,000 and
//! 4,000 preference pods under Respect and Ignore. Only the solve is timed, on a freshly built
//! scheduler each iteration. `cargo bench -p karpenter-capi-scheduling --bench scheduling`;
//! `cargo test --workspace --bench scheduling` runs each case once (what CI does).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use criterion::{BatchSize, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use scheduling::fixtures::{
    Rng, benchmark_node_pool, diverse_pods, fake_instance_types, options, preference_pods,
};
use scheduling::pod::Pod;
use scheduling::scheduler::{Cluster, NodePool, PreferencePolicy, Scheduler};

fn solve(
    c: &mut Criterion,
    group: &str,
    id: BenchmarkId,
    pools: &[NodePool],
    pods: &[Pod],
    policy: PreferencePolicy,
) {
    let mut g = c.benchmark_group(group);
    g.throughput(Throughput::Elements(pods.len() as u64));
    if pods.len() >= 5_000 {
        g.sample_size(10);
    }
    g.bench_with_input(id, &pods, |b, pods| {
        b.iter_batched(
            || Scheduler::new(pools, &Cluster::default(), pods, options(policy)),
            |scheduler| {
                let results = scheduler.solve(pods);
                assert!(results.errors.is_empty(), "{:?}", results.errors.first());
                results
            },
            BatchSize::LargeInput,
        );
    });
    g.finish();
}

fn diverse(c: &mut Criterion) {
    let pools = [benchmark_node_pool(fake_instance_types(400).unwrap())];
    for n in [1, 50, 100, 500, 1_000, 2_000, 5_000, 10_000, 20_000] {
        let pods = diverse_pods(n, &mut Rng::new(42));
        solve(
            c,
            "diverse",
            BenchmarkId::from_parameter(n),
            &pools,
            &pods,
            PreferencePolicy::Respect,
        );
    }
}

fn preferences(c: &mut Criterion) {
    let pools = [benchmark_node_pool(fake_instance_types(400).unwrap())];
    let pods = preference_pods(4_000, &mut Rng::new(42));
    for (name, policy) in [
        ("respect", PreferencePolicy::Respect),
        ("ignore", PreferencePolicy::Ignore),
    ] {
        solve(
            c,
            "preferences",
            BenchmarkId::new(name, 4_000),
            &pools,
            &pods,
            policy,
        );
    }
}

criterion_group!(benches, diverse, preferences);
criterion_main!(benches);
