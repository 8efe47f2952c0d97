//! Fault injection: seeded, reproducible errors, latency and broken watches.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;

use std::time::Duration;

use common::{client_with, from_json};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams, WatchEvent, WatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;
use sim::SimConfig;
use sim::fault::{FaultConfig, FaultError, FaultRule, Verb};

fn config(seed: u64, rules: Vec<FaultRule>) -> SimConfig {
    SimConfig {
        faults: FaultConfig { seed, rules },
        ..SimConfig::default()
    }
}

/// The codes of 40 creates against a server with these faults.
async fn create_codes(seed: u64) -> Vec<u16> {
    let rule = FaultRule {
        verbs: vec![Verb::Create],
        resources: vec!["configmaps".into()],
        error_rate: 0.3,
        error: FaultError::TooManyRequests,
        ..FaultRule::default()
    };
    let (_sim, client) = client_with(config(seed, vec![rule]));
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    let mut codes = Vec::new();
    for i in 0..40 {
        let cm: ConfigMap = from_json(json!({"metadata": {"name": format!("c{i}")}}));
        codes.push(match cms.create(&PostParams::default(), &cm).await {
            Ok(_) => 201,
            Err(kube::Error::Api(s)) => s.code,
            Err(e) => panic!("{e}"),
        });
        // Reads are not affected by a create rule.
        cms.list(&Default::default()).await.unwrap();
    }
    codes
}

#[tokio::test]
async fn the_same_seed_injects_the_same_faults() {
    let a = create_codes(7).await;
    assert_eq!(a, create_codes(7).await);
    assert!(a.contains(&429) && a.contains(&201), "{a:?}");
    assert_ne!(a, create_codes(8).await);
}

#[tokio::test]
async fn conflicts_and_internal_errors_and_the_clean_router() {
    let rules = vec![
        FaultRule {
            verbs: vec![Verb::Get],
            error_rate: 1.0,
            error: FaultError::Conflict,
            ..FaultRule::default()
        },
        FaultRule {
            verbs: vec![Verb::List],
            error_rate: 1.0,
            ..FaultRule::default()
        },
    ];
    let (sim, client) = client_with(config(1, rules));
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    let cm: ConfigMap = from_json(json!({"metadata": {"name": "a"}}));
    cms.create(&PostParams::default(), &cm).await.unwrap();
    assert_eq!(common::api_err(cms.get("a").await).code, 409);
    assert_eq!(
        common::api_err(cms.list(&Default::default()).await).code,
        500
    );
    assert_eq!(sim.faults().counts().errors, 2);
    let clean: Api<ConfigMap> =
        Api::default_namespaced(kube::Client::new(sim.router_without_faults(), "default"));
    assert!(clean.get("a").await.is_ok());
    sim.set_faults(FaultConfig::default());
    assert!(cms.get("a").await.is_ok());
}

#[tokio::test(start_paused = true)]
async fn latency_is_added() {
    let rule = FaultRule {
        verbs: vec![Verb::Get],
        latency: Duration::from_secs(3),
        ..FaultRule::default()
    };
    let (_sim, client) = client_with(config(1, vec![rule]));
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    let cm: ConfigMap = from_json(json!({"metadata": {"name": "a"}}));
    cms.create(&PostParams::default(), &cm).await.unwrap();
    let start = tokio::time::Instant::now();
    cms.get("a").await.unwrap();
    assert!(start.elapsed() >= Duration::from_secs(3));
}

#[tokio::test(start_paused = true)]
async fn watches_break_and_watchers_recover() {
    let rule = FaultRule {
        verbs: vec![Verb::Watch],
        watch_gone_rate: 0.5,
        watch_disconnect_rate: 0.5,
        ..FaultRule::default()
    };
    let (sim, client) = client_with(config(3, vec![rule]));
    let cms: Api<ConfigMap> = Api::default_namespaced(client);

    let cm: ConfigMap = from_json(json!({"metadata": {"name": "first"}}));
    cms.create(&PostParams::default(), &cm).await.unwrap();
    // Raw watches: some are answered with 410 Gone instead of their first event.
    let mut outcomes = Vec::new();
    for _ in 0..8 {
        let mut events = cms
            .watch(&WatchParams::default(), "0")
            .await
            .unwrap()
            .boxed();
        outcomes.push(match events.next().await {
            Some(Ok(WatchEvent::Error(e))) => e.code,
            Some(Ok(WatchEvent::Added(_))) => 200,
            other => panic!("{other:?}"),
        });
    }
    assert!(
        outcomes.contains(&410) && outcomes.contains(&200),
        "{outcomes:?}"
    );

    // kube-runtime's watcher relists and sees every object despite the faults.
    let seen = tokio::spawn({
        let cms = cms.clone();
        async move {
            watcher(cms, watcher::Config::default())
                .default_backoff()
                .applied_objects()
                .filter_map(|r| futures::future::ready(r.ok()))
                .filter(|cm: &ConfigMap| {
                    futures::future::ready(cm.metadata.name.as_deref() == Some("c9"))
                })
                .boxed()
                .next()
                .await
        }
    });
    for i in 0..10 {
        let cm: ConfigMap = from_json(json!({"metadata": {"name": format!("c{i}")}}));
        cms.create(&PostParams::default(), &cm).await.unwrap();
    }
    let found = tokio::time::timeout(Duration::from_secs(60), seen)
        .await
        .expect("the watcher recovers from broken watches")
        .unwrap();
    assert!(found.is_some());
    let counts = sim.faults().counts();
    assert!(counts.gone > 0, "{counts:?}");
}
