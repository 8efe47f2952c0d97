//! The differential API suite: one set of API behaviours run against `sim` and against a real
//! kube-apiserver (`sim::realk8s`), comparing status codes, reasons, causes and the objects
//! returned, after normalizing what legitimately differs (uids, resourceVersions, timestamps,
//! and the aspects listed in `crates/sim/DIFFERENCES.md`).
//!
//! Each test function starts one real cluster and one sim and runs many scenarios against
//! both, each in its own namespace ([`harness`]). The tests' names start with `real_`, so
//! nextest runs at most two of them at a time.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

#[path = "differential/access_reviews.rs"]
mod access_reviews;
#[path = "differential/crud.rs"]
mod crud;
#[path = "differential/eviction.rs"]
mod eviction;
#[path = "differential/gc.rs"]
mod gc;
#[path = "differential/harness.rs"]
mod harness;
#[path = "differential/lists.rs"]
mod lists;
#[path = "differential/patches.rs"]
mod patches;
#[path = "differential/tables.rs"]
mod tables;
#[path = "differential/validation.rs"]
mod validation;
#[path = "differential/watch.rs"]
mod watch;

use std::time::Duration;

use sim::SimConfig;
use sim::realk8s::RealConfig;

/// Storage semantics, patches, lists and watches: kube-apiserver alone suffices.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_differential_api() {
    harness::compare(
        SimConfig::default(),
        RealConfig::default(),
        None,
        &[
            scenario!(crud::crud_and_conflicts),
            scenario!(crud::generate_name),
            scenario!(crud::finalizers),
            scenario!(crud::graceful_pod_deletion),
            scenario!(patches::merge_and_json_patch),
            scenario!(patches::strategic_merge),
            scenario!(patches::server_side_apply),
            scenario!(lists::selectors),
            scenario!(lists::pagination),
            scenario!(watch::watch_replay_and_bookmarks),
            scenario!(watch::watch_initial_events),
            scenario!(watch::watch_too_old),
            scenario!(tables::printed_columns),
        ],
    )
    .await;
}

/// Access reviews, as the admin: allowed on both; invalid ones refused alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_differential_access_reviews() {
    harness::compare(
        SimConfig::default(),
        RealConfig::default(),
        None,
        &[
            scenario!(access_reviews::self_subject_access_reviews),
            scenario!(access_reviews::subject_access_reviews),
            scenario!(access_reviews::rules_reviews_and_paths),
        ],
    )
    .await;
}

/// Garbage collection and eviction: they need kube-controller-manager (the garbage collector,
/// the disruption controller) on the real side.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_differential_controllers() {
    harness::compare(
        SimConfig::default(),
        RealConfig {
            controller_manager: true,
            ..RealConfig::default()
        },
        None,
        &[
            scenario!(gc::gc_background),
            scenario!(gc::gc_foreground),
            scenario!(gc::gc_orphan),
            scenario!(eviction::evict_min_available),
            scenario!(eviction::evict_unhealthy_policy),
            scenario!(eviction::evict_max_unavailable),
        ],
    )
    .await;
}

fn install_crds(client: kube::Client) -> futures::future::BoxFuture<'static, ()> {
    Box::pin(async move {
        sim::world::crds::install_karpenter_crds(&client)
            .await
            .unwrap();
        sim::world::crds::install_capi_crds(&client).await.unwrap();
    })
}

/// Validation, defaulting, transition rules and subresources, on our CRDs and built-ins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_differential_validation() {
    harness::compare(
        SimConfig::default(),
        RealConfig::default(),
        Some(install_crds),
        &[
            scenario!(validation::nodepool_validation),
            scenario!(validation::transition_rules),
            scenario!(validation::nodepool_subresources),
            scenario!(validation::machinedeployment_subresources),
            scenario!(validation::immutable_fields),
        ],
    )
    .await;
}

/// Compaction: watches from and continue tokens of compacted versions get 410 Gone, with etcd
/// (and sim) compacting every two seconds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_differential_compaction() {
    harness::compare(
        SimConfig {
            compaction_interval: Some(Duration::from_secs(2)),
            ..SimConfig::default()
        },
        RealConfig {
            // Without the watch cache: kube-apiserver serves watches from recent versions out of
            // its cache window (minutes) whatever etcd compacted; the comparison is of etcd's
            // compaction, which sim models (DIFFERENCES.md #6).
            apiserver_args: vec![
                "--etcd-compaction-interval=2s".into(),
                "--watch-cache=false".into(),
            ],
            ..RealConfig::default()
        },
        None,
        &[scenario!(watch::compacted_versions_are_gone)],
    )
    .await;
}
