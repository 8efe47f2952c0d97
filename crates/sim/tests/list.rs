//! Lists: label selectors (equality and set-based), field selectors, pagination, and
//! delete-collection, through kube-rs.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;

use common::{api_err, client, from_json, namespace};
use k8s_openapi::api::core::v1::{ConfigMap, Event, Node, Pod};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;

fn names<K: kube::Resource>(items: &[K]) -> Vec<String> {
    items
        .iter()
        .map(|o| o.meta().name.clone().unwrap())
        .collect()
}

#[tokio::test]
async fn label_selectors_equality_and_sets() {
    let (_sim, client) = client();
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    for (name, labels) in [
        ("a", json!({"app": "web", "tier": "x"})),
        ("b", json!({"app": "web", "tier": "y", "canary": "true"})),
        ("c", json!({"app": "db", "tier": "z"})),
        ("d", json!({"app": "web", "skip": "1"})),
    ] {
        let cm: ConfigMap = from_json(json!({"metadata": {"name": name, "labels": labels}}));
        cms.create(&PostParams::default(), &cm).await.unwrap();
    }
    let sel = |s: &str| {
        let cms = cms.clone();
        let s = s.to_owned();
        async move {
            names(
                &cms.list(&ListParams::default().labels(&s))
                    .await
                    .unwrap()
                    .items,
            )
        }
    };
    assert_eq!(sel("app=web").await, vec!["a", "b", "d"]);
    assert_eq!(sel("app==web,tier!=x").await, vec!["b", "d"]);
    assert_eq!(sel("tier in (x,z)").await, vec!["a", "c"]);
    assert_eq!(sel("tier notin (x,z)").await, vec!["b", "d"]);
    assert_eq!(sel("canary").await, vec!["b"]);
    assert_eq!(sel("app=web,!skip,tier notin (y)").await, vec!["a"]);
    let bad = api_err(cms.list(&ListParams::default().labels("tier in (x")).await);
    assert_eq!((bad.code, bad.reason.as_str()), (400, "BadRequest"));
}

#[tokio::test]
async fn field_selectors_per_resource() {
    let (_sim, client) = client();
    namespace(&client, "other").await;
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    for (name, node) in [("p1", Some("n1")), ("p2", Some("n2")), ("p3", None)] {
        let mut spec = json!({"containers": [{"name": "c", "image": "i"}]});
        if let Some(n) = node {
            spec["nodeName"] = json!(n);
        }
        let pod: Pod = from_json(json!({"metadata": {"name": name}, "spec": spec}));
        pods.create(&PostParams::default(), &pod).await.unwrap();
    }
    let other: Api<Pod> = Api::namespaced(client.clone(), "other");
    let pod: Pod = from_json(json!({"metadata": {"name": "p1"},
            "spec": {"containers": [{"name": "c", "image": "i"}], "nodeName": "n1"}}));
    other.create(&PostParams::default(), &pod).await.unwrap();

    let all: Api<Pod> = Api::all(client.clone());
    let on_n1 = all
        .list(&ListParams::default().fields("spec.nodeName=n1"))
        .await
        .unwrap();
    assert_eq!(on_n1.items.len(), 2);
    let unbound = pods
        .list(&ListParams::default().fields("spec.nodeName="))
        .await
        .unwrap();
    assert_eq!(names(&unbound.items), vec!["p3"]);
    let not_n1 = pods
        .list(&ListParams::default().fields("spec.nodeName!=n1,status.phase==Pending"))
        .await
        .unwrap();
    assert_eq!(names(&not_n1.items), vec!["p2", "p3"]);
    let in_ns = all
        .list(&ListParams::default().fields("metadata.namespace=other"))
        .await
        .unwrap();
    assert_eq!(in_ns.items.len(), 1);
    let by_name = all
        .list(&ListParams::default().fields("metadata.name=p2"))
        .await
        .unwrap();
    assert_eq!(names(&by_name.items), vec!["p2"]);
    let unsupported = api_err(
        pods.list(&ListParams::default().fields("spec.hostname=x"))
            .await,
    );
    assert_eq!(unsupported.code, 400);
    assert!(
        unsupported.message.contains("field label not supported"),
        "{}",
        unsupported.message
    );

    let nodes: Api<Node> = Api::all(client.clone());
    for (name, cordoned) in [("n1", true), ("n2", false)] {
        let node: Node =
            from_json(json!({"metadata": {"name": name}, "spec": {"unschedulable": cordoned}}));
        nodes.create(&PostParams::default(), &node).await.unwrap();
    }
    let cordoned = nodes
        .list(&ListParams::default().fields("spec.unschedulable=true"))
        .await
        .unwrap();
    assert_eq!(names(&cordoned.items), vec!["n1"]);

    let events: Api<Event> = Api::default_namespaced(client);
    let ev: Event = from_json(
        json!({"metadata": {"name": "e"}, "involvedObject": {"kind": "Pod", "name": "p1", "uid": "u"}, "reason": "Evicted"}),
    );
    events.create(&PostParams::default(), &ev).await.unwrap();
    let hits = events
        .list(
            &ListParams::default()
                .fields("involvedObject.kind=Pod,involvedObject.name=p1,reason=Evicted"),
        )
        .await
        .unwrap();
    assert_eq!(hits.items.len(), 1);
    let misses = events
        .list(&ListParams::default().fields("involvedObject.uid=other"))
        .await
        .unwrap();
    assert!(misses.items.is_empty());
}

#[tokio::test]
async fn pagination_with_limit_and_continue() {
    let (_sim, client) = client();
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    for i in 0..7 {
        let cm: ConfigMap = from_json(json!({"metadata": {"name": format!("cm-{i}")}}));
        cms.create(&PostParams::default(), &cm).await.unwrap();
    }
    let mut seen = Vec::new();
    let mut lp = ListParams::default().limit(3);
    let mut pages = 0;
    let mut first_rv = None;
    loop {
        let page = cms.list(&lp).await.unwrap();
        pages += 1;
        first_rv.get_or_insert(page.metadata.resource_version.clone());
        assert_eq!(
            page.metadata.resource_version,
            first_rv.clone().unwrap(),
            "pages share the list's resourceVersion"
        );
        seen.extend(names(&page.items));
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => {
                assert!(page.metadata.remaining_item_count.unwrap() > 0);
                lp = lp.continue_token(&token);
            }
            _ => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(seen, (0..7).map(|i| format!("cm-{i}")).collect::<Vec<_>>());
    let bad = api_err(
        cms.list(&ListParams::default().continue_token("garbage"))
            .await,
    );
    assert_eq!(bad.code, 400);
}

#[tokio::test]
async fn delete_collection_by_selector() {
    let (_sim, client) = client();
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    for (name, app) in [("a", "x"), ("b", "x"), ("c", "y")] {
        let cm: ConfigMap = from_json(json!({"metadata": {"name": name, "labels": {"app": app}}}));
        cms.create(&PostParams::default(), &cm).await.unwrap();
    }
    let deleted = cms
        .delete_collection(
            &DeleteParams::default(),
            &ListParams::default().labels("app=x"),
        )
        .await
        .unwrap();
    assert_eq!(names(&deleted.left().unwrap().items), vec!["a", "b"]);
    assert_eq!(
        names(&cms.list(&ListParams::default()).await.unwrap().items),
        vec!["c"]
    );
}

#[tokio::test]
async fn invalid_built_in_objects_are_rejected_with_the_field() {
    let sim = sim::Sim::new(sim::SimConfig::default());
    let client = kube::Client::new(sim.router(), "default");
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let pod: Pod =
        from_json(json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}}));
    let err = pods.create(&PostParams::default(), &pod).await.unwrap_err();
    let kube::Error::Api(status) = err else {
        panic!("{err}")
    };
    assert_eq!(status.code, 422);
    assert!(
        status
            .message
            .contains("spec.containers[0].image: Required value"),
        "{}",
        status.message
    );
}
