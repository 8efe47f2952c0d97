//! Serving over TCP: the generated kubeconfig works with `kube::Config`, two servers are
//! independent, and shutdown is graceful even with open watches.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, ListParams, PostParams, WatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::json;

async fn client_for(server: &sim::RunningServer) -> kube::Client {
    let kubeconfig = Kubeconfig::read_from(server.kubeconfig_path()).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap();
    assert_eq!(config.default_namespace, "default");
    kube::Client::try_from(config).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubeconfig_clients_reach_independent_servers() {
    let (management, workload) = sim::serve_pair().await.unwrap();
    assert_ne!(management.address(), workload.address());
    assert!(management.address().ip().is_loopback());
    let yaml = std::fs::read_to_string(management.kubeconfig_path()).unwrap();
    assert!(
        yaml.contains(&format!("server: http://{}", management.address())),
        "{yaml}"
    );

    let mc = client_for(&management).await;
    let wc = client_for(&workload).await;
    let version = mc.apiserver_version().await.unwrap();
    assert_eq!(version.major, "1");

    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "only-in-management"}})).unwrap();
    Api::<ConfigMap>::default_namespaced(mc.clone())
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
    let in_workload = Api::<ConfigMap>::default_namespaced(wc.clone())
        .list(&ListParams::default())
        .await
        .unwrap();
    assert!(in_workload.items.is_empty());
    assert!(
        management
            .sim()
            .get(
                &sim::Endpoint::namespaced("", "v1", "configmaps", "default"),
                "only-in-management"
            )
            .is_ok()
    );
    let namespaces = Api::<Namespace>::all(wc)
        .list(&ListParams::default())
        .await
        .unwrap();
    assert_eq!(namespaces.items.len(), 4);

    // An open watch does not keep shutdown from finishing.
    let cms = Api::<ConfigMap>::default_namespaced(mc);
    let mut watch = cms
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    assert!(watch.next().await.is_some());
    tokio::time::timeout(Duration::from_secs(20), management.shutdown())
        .await
        .unwrap()
        .unwrap();
    workload.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_http_discovery_and_status_errors() {
    let server = sim::serve("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let client = client_for(&server).await;
    let groups = client.list_api_groups().await.unwrap();
    assert!(groups.groups.iter().any(|g| g.name == "apps"));
    let core = client.list_core_api_resources("v1").await.unwrap();
    assert!(core.resources.iter().any(|r| r.name == "pods/status"));
    let apps = client.list_api_group_resources("apps/v1").await.unwrap();
    let scale = apps
        .resources
        .iter()
        .find(|r| r.name == "deployments/scale")
        .unwrap();
    assert_eq!(scale.group.as_deref(), Some("autoscaling"));
    let req = http::Request::get("/apis/nope.example.com/v1/things")
        .body(Vec::new())
        .unwrap();
    match client.request_text(req).await {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 404),
        other => panic!("expected 404, got {other:?}"),
    }
    // Table output for clients that ask for it.
    let req = http::Request::get("/api/v1/namespaces")
        .header(
            "Accept",
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
        )
        .body(Vec::new())
        .unwrap();
    let table: serde_json::Value =
        serde_json::from_str(&client.request_text(req).await.unwrap()).unwrap();
    assert_eq!(table["kind"], "Table");
    assert_eq!(table["columnDefinitions"][0]["name"], "Name");
    assert_eq!(table["rows"].as_array().unwrap().len(), 4);
    assert_eq!(table["rows"][0]["object"]["kind"], "PartialObjectMetadata");
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_begun_after_the_server_stops_watches_ends_at_once() {
    // A client whose watch ends re-watches at once, possibly on a connection the server has
    // not yet told to close: that watch must end too, or a graceful shutdown waits for it
    // forever (a CI run of `karpenter-capi simulate` hung in its shutdown this way).
    let server = sim::serve("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let cms = Api::<ConfigMap>::default_namespaced(client_for(&server).await);
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "one"}})).unwrap();
    cms.create(&PostParams::default(), &cm).await.unwrap();
    server.sim().stop_watches();
    let mut watch = cms
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    let events = tokio::time::timeout(Duration::from_secs(20), async {
        let mut n = 0;
        while watch.next().await.is_some() {
            n += 1;
        }
        n
    })
    .await
    .expect("a watch begun after stop_watches stayed open");
    assert!(
        events <= 1,
        "{events} events: at most the replayed ADDED of `one`"
    );

    // A watcher that keeps re-watching does not hold the shutdown up either. (With backoff,
    // as our controllers watch: without it, a refused connection fails without ever yielding
    // and the watcher spins on its worker thread, so even the test's runtime cannot stop.)
    let watcher = tokio::spawn(
        kube::runtime::WatchStreamExt::default_backoff(kube::runtime::watcher(
            cms.clone(),
            kube::runtime::watcher::Config::default(),
        ))
        .for_each(|_| async {}),
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    tokio::time::timeout(Duration::from_secs(20), server.shutdown())
        .await
        .expect("shutdown waited for a re-watching client")
        .unwrap();
    watcher.abort();
}
