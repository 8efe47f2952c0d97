//! The differential API suite: one set of API behaviours, answered by `sim` and by a real
//! kube-apiserver, compared after normalizing what legitimately differs (uids,
//! resourceVersions, timestamps, and the aspects listed in `crates/sim/DIFFERENCES.md`).
//!
//! Each group of scenarios is two tests. `differential_<group>` (the default run) replays the
//! scenarios against `sim` and compares each with the real server's recorded answers
//! (`tests/recorded/differential/<scenario>.json`). `real_differential_<group>` (the `real`
//! nextest profile) starts one real cluster and one sim, runs the scenarios against both, each
//! in its own namespace ([`harness`]), compares them, and checks the recordings (`RECORD=1`
//! rewrites them).
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
#[path = "recording/mod.rs"]
mod recording;
#[path = "differential/tables.rs"]
mod tables;
#[path = "differential/validation.rs"]
mod validation;
#[path = "differential/watch.rs"]
mod watch;

use std::collections::BTreeSet;
use std::time::Duration;

use harness::Group;
use sim::SimConfig;
use sim::realk8s::RealConfig;

/// Storage semantics, patches, lists and watches: kube-apiserver alone suffices.
fn api() -> Group {
    Group {
        sim: SimConfig::default(),
        real: RealConfig::default(),
        setup: None,
        scenarios: vec![
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
    }
}

/// Access reviews, as the admin: allowed on both; invalid ones refused alike.
fn access_reviews() -> Group {
    Group {
        sim: SimConfig::default(),
        real: RealConfig::default(),
        setup: None,
        scenarios: vec![
            scenario!(access_reviews::self_subject_access_reviews),
            scenario!(access_reviews::subject_access_reviews),
            scenario!(access_reviews::rules_reviews_and_paths),
        ],
    }
}

/// Garbage collection and eviction: they need kube-controller-manager (the garbage collector,
/// the disruption controller) on the real side.
fn controllers() -> Group {
    Group {
        sim: SimConfig::default(),
        real: RealConfig {
            controller_manager: true,
            ..RealConfig::default()
        },
        setup: None,
        scenarios: vec![
            scenario!(gc::gc_background),
            scenario!(gc::gc_foreground),
            scenario!(gc::gc_orphan),
            scenario!(eviction::evict_min_available),
            scenario!(eviction::evict_unhealthy_policy),
            scenario!(eviction::evict_max_unavailable),
        ],
    }
}

fn install_crds(client: kube::Client) -> futures::future::BoxFuture<'static, ()> {
    Box::pin(async move {
        sim::crds::install_karpenter_crds(&client).await.unwrap();
        // v1beta1 alone on both servers: a real kube-apiserver has no CAPI webhook to convert
        // (the conversion sim stands in for is checked in tests/capi_conversion.rs).
        sim::crds::install_capi_crds_serving(&client, sim::crds::CapiServing::V1beta1Only)
            .await
            .unwrap();
    })
}

/// Validation, defaulting, transition rules and subresources, on our CRDs and built-ins.
fn validation() -> Group {
    Group {
        sim: SimConfig::default(),
        real: RealConfig::default(),
        setup: Some(install_crds),
        scenarios: vec![
            scenario!(validation::nodepool_validation),
            scenario!(validation::transition_rules),
            scenario!(validation::nodepool_subresources),
            scenario!(validation::machinedeployment_subresources),
            scenario!(validation::immutable_fields),
        ],
    }
}

/// Compaction: watches from and continue tokens of compacted versions get 410 Gone, with etcd
/// (and sim) compacting every two seconds.
fn compaction() -> Group {
    Group {
        sim: SimConfig {
            compaction_interval: Some(Duration::from_secs(2)),
            ..SimConfig::default()
        },
        real: RealConfig {
            // Without the watch cache: kube-apiserver serves watches from recent versions out of
            // its cache window (minutes) whatever etcd compacted; the comparison is of etcd's
            // compaction, which sim models (DIFFERENCES.md #6).
            apiserver_args: vec![
                "--etcd-compaction-interval=2s".into(),
                "--watch-cache=false".into(),
            ],
            ..RealConfig::default()
        },
        setup: None,
        scenarios: vec![scenario!(watch::compacted_versions_are_gone)],
    }
}

/// Declares `differential_<group>` (sim against the recordings) and
/// `real_differential_<group>` (sim against a live real server, and the recordings).
macro_rules! groups {
    ($($group:ident => $replay:ident, $real:ident;)*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $replay() {
                harness::replay($group()).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $real() {
                harness::compare($group()).await;
            }
        )*

        /// Every group, for the check that each recording belongs to a scenario.
        fn all_groups() -> Vec<Group> {
            vec![$($group()),*]
        }
    };
}

groups! {
    api => differential_api, real_differential_api;
    access_reviews => differential_access_reviews, real_differential_access_reviews;
    controllers => differential_controllers, real_differential_controllers;
    validation => differential_validation, real_differential_validation;
    compaction => differential_compaction, real_differential_compaction;
}

/// Every recording under `tests/recorded/differential` is a scenario's: a scenario renamed or
/// removed leaves no stale recording behind (a missing one fails its group's replay).
#[test]
fn every_recording_belongs_to_a_scenario() {
    let scenarios: BTreeSet<String> = all_groups()
        .iter()
        .flat_map(|g| g.scenarios.iter().map(|s| s.name.to_owned()))
        .collect();
    let dir = recording::dir().join("differential");
    let files: BTreeSet<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let stale: Vec<&String> = files
        .iter()
        .filter(|f| {
            f.strip_suffix(".json")
                .is_none_or(|name| !scenarios.contains(name))
        })
        .collect();
    assert!(stale.is_empty(), "recordings without a scenario: {stale:?}");
}
