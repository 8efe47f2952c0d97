//! Watches through kube-rs: event order and types, replay from a resourceVersion, 410 Expired
//! for compacted history, selector transitions, bookmarks, timeoutSeconds, streaming lists, and
//! `kube::runtime::watcher` relisting after 410.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;

use std::time::Duration;

use common::{client, client_with, from_json};
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::watcher;
use serde_json::json;
use sim::SimConfig;

/// Guard against a hung stream: a test that would wait forever fails instead.
const HANG: Duration = Duration::from_secs(20);

async fn next<S: Stream + Unpin>(s: &mut S) -> S::Item {
    tokio::time::timeout(HANG, s.next())
        .await
        .expect("stream stalled")
        .expect("stream ended")
}

fn cm(name: &str, labels: serde_json::Value) -> ConfigMap {
    from_json(json!({"metadata": {"name": name, "labels": labels}}))
}

fn describe(ev: &WatchEvent<ConfigMap>) -> (String, String) {
    match ev {
        WatchEvent::Added(o) => ("ADDED".into(), o.metadata.name.clone().unwrap()),
        WatchEvent::Modified(o) => ("MODIFIED".into(), o.metadata.name.clone().unwrap()),
        WatchEvent::Deleted(o) => ("DELETED".into(), o.metadata.name.clone().unwrap()),
        WatchEvent::Bookmark(b) => ("BOOKMARK".into(), b.metadata.resource_version.clone()),
        WatchEvent::Error(e) => ("ERROR".into(), e.code.to_string()),
    }
}

#[tokio::test]
async fn events_follow_writes_in_order() {
    let (_sim, client) = client();
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    let list = cms.list(&Default::default()).await.unwrap();
    let rv = list.metadata.resource_version.unwrap();
    let mut stream = cms
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    cms.create(&PostParams::default(), &cm("a", json!({})))
        .await
        .unwrap();
    cms.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "v"}})),
    )
    .await
    .unwrap();
    cms.delete("a", &DeleteParams::default()).await.unwrap();
    let mut seen = Vec::new();
    let mut last_rv = rv.parse::<u64>().unwrap();
    for _ in 0..3 {
        let ev = next(&mut stream).await.unwrap();
        if let WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) = &ev {
            let this: u64 = o
                .metadata
                .resource_version
                .clone()
                .unwrap()
                .parse()
                .unwrap();
            assert!(this > last_rv);
            last_rv = this;
        }
        seen.push(describe(&ev).0);
    }
    assert_eq!(seen, vec!["ADDED", "MODIFIED", "DELETED"]);
}

#[tokio::test]
async fn watch_from_an_old_version_replays_and_unset_version_lists_first() {
    let (_sim, client) = client();
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    let a = cms
        .create(&PostParams::default(), &cm("a", json!({})))
        .await
        .unwrap();
    cms.create(&PostParams::default(), &cm("b", json!({})))
        .await
        .unwrap();
    let from_a = a.metadata.resource_version.unwrap();
    let mut replay = cms
        .watch(&WatchParams::default(), &from_a)
        .await
        .unwrap()
        .boxed();
    assert_eq!(
        describe(&next(&mut replay).await.unwrap()),
        ("ADDED".into(), "b".into())
    );
    // resourceVersion "0": synthetic ADDED for what exists.
    let mut fresh = cms
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    let mut names = vec![
        describe(&next(&mut fresh).await.unwrap()).1,
        describe(&next(&mut fresh).await.unwrap()).1,
    ];
    names.sort();
    assert_eq!(names, vec!["a", "b"]);
}

#[tokio::test]
async fn too_old_versions_get_410_expired() {
    let (sim, client) = client_with(SimConfig {
        watch_history: 3,
        ..SimConfig::default()
    });
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    let first = cms
        .create(&PostParams::default(), &cm("c0", json!({})))
        .await
        .unwrap();
    for i in 1..6 {
        cms.create(&PostParams::default(), &cm(&format!("c{i}"), json!({})))
            .await
            .unwrap();
    }
    let old = first.metadata.resource_version.unwrap();
    let mut stream = cms
        .watch(&WatchParams::default(), &old)
        .await
        .unwrap()
        .boxed();
    match next(&mut stream).await.unwrap() {
        WatchEvent::Error(e) => {
            assert_eq!(e.code, 410);
            assert_eq!(e.reason, "Expired");
        }
        other => panic!("expected 410, got {other:?}"),
    }
    assert!(
        tokio::time::timeout(HANG, stream.next())
            .await
            .unwrap()
            .is_none(),
        "the watch ends after the error"
    );
    // Compaction expires open watches too.
    let rv = sim.resource_version().to_string();
    let mut open = cms
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    sim.compact();
    assert_eq!(
        describe(&next(&mut open).await.unwrap()),
        ("ERROR".into(), "410".into())
    );
}

#[tokio::test]
async fn label_selector_transitions_become_added_and_deleted() {
    let (_sim, client) = client();
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    cms.create(&PostParams::default(), &cm("x", json!({"app": "other"})))
        .await
        .unwrap();
    let rv = cms
        .get("x")
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut stream = cms
        .watch(&WatchParams::default().labels("app=web"), &rv)
        .await
        .unwrap()
        .boxed();
    let relabel = |app: &str| Patch::Merge(json!({"metadata": {"labels": {"app": app}}}));
    cms.patch("x", &PatchParams::default(), &relabel("web"))
        .await
        .unwrap();
    cms.patch(
        "x",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "v"}})),
    )
    .await
    .unwrap();
    cms.patch("x", &PatchParams::default(), &relabel("db"))
        .await
        .unwrap();
    cms.create(
        &PostParams::default(),
        &cm("unrelated", json!({"app": "db"})),
    )
    .await
    .unwrap();
    cms.create(&PostParams::default(), &cm("y", json!({"app": "web"})))
        .await
        .unwrap();
    let mut seen = Vec::new();
    for _ in 0..4 {
        seen.push(describe(&next(&mut stream).await.unwrap()));
    }
    let expect = [
        ("ADDED", "x"),
        ("MODIFIED", "x"),
        ("DELETED", "x"),
        ("ADDED", "y"),
    ];
    assert_eq!(seen, expect.map(|(a, b)| (a.to_owned(), b.to_owned())));
}

#[tokio::test]
async fn bookmarks_and_timeouts() {
    let (sim, client) = client_with(SimConfig {
        bookmark_interval: Duration::from_millis(20),
        ..SimConfig::default()
    });
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    let rv = sim.resource_version().to_string();
    let mut stream = cms
        .watch(
            &WatchParams {
                bookmarks: true,
                ..WatchParams::default()
            },
            &rv,
        )
        .await
        .unwrap()
        .boxed();
    let (kind, bookmark_rv) = describe(&next(&mut stream).await.unwrap());
    assert_eq!(kind, "BOOKMARK");
    assert_eq!(bookmark_rv, rv);
    let no_bookmarks = WatchParams {
        bookmarks: false,
        ..WatchParams::default()
    };
    let mut short = cms
        .watch(&no_bookmarks.timeout(1), &rv)
        .await
        .unwrap()
        .boxed();
    assert!(
        tokio::time::timeout(HANG, short.next())
            .await
            .unwrap()
            .is_none(),
        "timeoutSeconds ends the watch"
    );
}

#[tokio::test]
async fn streaming_lists_send_initial_events_then_a_bookmark() {
    let (_sim, client) = client();
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    cms.create(&PostParams::default(), &cm("a", json!({})))
        .await
        .unwrap();
    let stream = watcher(cms.clone(), watcher::Config::default().streaming_lists());
    let mut stream = stream.boxed();
    let mut seen = Vec::new();
    loop {
        match next(&mut stream).await.unwrap() {
            watcher::Event::Init => seen.push("init".to_owned()),
            watcher::Event::InitApply(o) => seen.push(o.metadata.name.unwrap()),
            watcher::Event::InitDone => break,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(seen, vec!["init", "a"]);
}

#[tokio::test]
async fn runtime_watcher_lists_watches_and_relists_after_410() {
    let (sim, client) = client();
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    cms.create(&PostParams::default(), &cm("before", json!({})))
        .await
        .unwrap();
    let mut stream = watcher(cms.clone(), watcher::Config::default()).boxed();
    let mut inits = 0;
    // Initial list.
    loop {
        match next(&mut stream).await.unwrap() {
            watcher::Event::Init => inits += 1,
            watcher::Event::InitApply(o) => assert_eq!(o.metadata.name.as_deref(), Some("before")),
            watcher::Event::InitDone => break,
            other => panic!("unexpected {other:?}"),
        }
    }
    cms.create(&PostParams::default(), &cm("during", json!({})))
        .await
        .unwrap();
    match next(&mut stream).await.unwrap() {
        watcher::Event::Apply(o) => assert_eq!(o.metadata.name.as_deref(), Some("during")),
        other => panic!("unexpected {other:?}"),
    }
    // Compaction: the open watch gets 410; the watcher must relist and see everything again.
    sim.compact();
    cms.create(&PostParams::default(), &cm("after", json!({})))
        .await
        .unwrap();
    let mut relisted = Vec::new();
    loop {
        match tokio::time::timeout(HANG, stream.next())
            .await
            .unwrap()
            .unwrap()
        {
            Err(_) => {} // the 410 is surfaced as an error before the relist
            Ok(watcher::Event::Init) => inits += 1,
            Ok(watcher::Event::InitApply(o)) => relisted.push(o.metadata.name.unwrap()),
            Ok(watcher::Event::InitDone) => break,
            Ok(other) => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(inits, 2);
    relisted.sort();
    assert_eq!(relisted, vec!["after", "before", "during"]);
}
