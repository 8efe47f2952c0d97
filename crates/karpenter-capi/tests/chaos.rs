//! The randomized safety suite's short form: a few seeds of a few rounds each (the long runs
//! are `karpenter-capi bench chaos --rounds N --seed S`). Each seed is its own test, so they
//! run in parallel, and a failure prints the invariant table with the broken round.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use karpenter_capi::chaos::{ChaosConfig, run};

async fn seed_passes(seed: u64, rounds: u32) {
    if let Ok(filter) = std::env::var("TEST_LOG") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_test_writer()
            .try_init();
    }
    let report = run(&ChaosConfig {
        rounds,
        seed,
        settle_timeout: Duration::from_secs(120),
    })
    .await
    .unwrap();
    println!("{}", report.text());
    assert!(report.passed(), "{}", report.text());
    assert!(
        report.invariants.iter().all(|r| r.violated == 0),
        "{}",
        report.text()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_seed_11_keeps_every_invariant_for_8_rounds() {
    seed_passes(11, 8).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_seed_12_keeps_every_invariant_for_8_rounds() {
    seed_passes(12, 8).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_seed_13_keeps_every_invariant_for_8_rounds() {
    seed_passes(13, 8).await;
}
