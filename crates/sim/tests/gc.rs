//! Garbage collection through ownerReferences (background, foreground, orphan) and graceful
//! pod deletion.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;

use std::time::Duration;

use common::{api_err, client, from_json};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

/// Create a ConfigMap with these owners (`(name, uid, blockOwnerDeletion)`) and finalizers;
/// returns its uid.
async fn cm(
    api: &Api<ConfigMap>,
    name: &str,
    owners: &[(&str, &str, bool)],
    finalizers: &[&str],
) -> String {
    let refs: Vec<Value> = owners
        .iter()
        .map(|(n, uid, block)| {
            json!({"apiVersion": "v1", "kind": "ConfigMap", "name": n, "uid": uid,
                "blockOwnerDeletion": block})
        })
        .collect();
    let obj: ConfigMap = from_json(json!({"metadata": {"name": name,
        "ownerReferences": refs, "finalizers": finalizers}}));
    api.create(&PostParams::default(), &obj)
        .await
        .unwrap()
        .metadata
        .uid
        .unwrap()
}

async fn gone(api: &Api<ConfigMap>, name: &str) -> bool {
    matches!(api.get(name).await, Err(kube::Error::Api(s)) if s.code == 404)
}

#[tokio::test]
async fn background_deletes_dependents_without_other_owners() {
    let (_sim, client) = client();
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    let owner = cm(&cms, "owner", &[], &[]).await;
    let other = cm(&cms, "other", &[], &[]).await;
    cm(&cms, "child", &[("owner", &owner, true)], &[]).await;
    cm(&cms, "grandchild", &[("child", "", false)], &[]).await;
    let child_uid = cms.get("child").await.unwrap().metadata.uid.unwrap();
    cm(&cms, "grandchild2", &[("child", &child_uid, false)], &[]).await;
    cm(
        &cms,
        "shared",
        &[("owner", &owner, false), ("other", &other, false)],
        &[],
    )
    .await;
    cm(
        &cms,
        "held",
        &[("owner", &owner, false)],
        &["example.com/hold"],
    )
    .await;

    cms.delete("owner", &DeleteParams::default()).await.unwrap();

    assert!(gone(&cms, "owner").await);
    assert!(gone(&cms, "child").await);
    assert!(
        gone(&cms, "grandchild2").await,
        "the cascade goes down the tree"
    );
    assert!(
        !gone(&cms, "grandchild").await,
        "a reference to no uid is not followed"
    );
    let shared = cms.get("shared").await.unwrap();
    let refs = shared.metadata.owner_references.unwrap();
    assert_eq!(refs.len(), 1, "only the dangling reference is dropped");
    assert_eq!(refs[0].name, "other");
    let held = cms.get("held").await.unwrap();
    assert!(
        held.metadata.deletion_timestamp.is_some(),
        "dependents keep their finalizers"
    );
}

#[tokio::test]
async fn foreground_waits_for_blocking_dependents() {
    let (_sim, client) = client();
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    let owner = cm(&cms, "owner", &[], &[]).await;
    cm(
        &cms,
        "blocker",
        &[("owner", &owner, true)],
        &["example.com/hold"],
    )
    .await;
    cm(&cms, "plain", &[("owner", &owner, true)], &[]).await;
    cm(
        &cms,
        "loose",
        &[("owner", &owner, false)],
        &["example.com/hold"],
    )
    .await;

    let res = cms
        .delete("owner", &DeleteParams::foreground())
        .await
        .unwrap();
    let marked = res.left().expect("the owner stays while dependents go");
    assert!(marked.metadata.deletion_timestamp.is_some());
    assert_eq!(
        marked.metadata.finalizers.unwrap(),
        vec!["foregroundDeletion".to_owned()]
    );
    assert!(gone(&cms, "plain").await);
    assert!(
        cms.get("blocker")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    );
    assert!(
        cms.get("loose")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    );

    let release = json!({"metadata": {"finalizers": null}});
    cms.patch("loose", &PatchParams::default(), &Patch::Merge(&release))
        .await
        .unwrap();
    assert!(
        !gone(&cms, "owner").await,
        "a non-blocking dependent does not hold the owner"
    );
    cms.patch("blocker", &PatchParams::default(), &Patch::Merge(&release))
        .await
        .unwrap();
    assert!(gone(&cms, "blocker").await);
    assert!(
        gone(&cms, "owner").await,
        "the last blocking dependent releases the owner"
    );

    // Without dependents a foreground delete is immediate.
    cm(&cms, "alone", &[], &[]).await;
    let res = cms
        .delete("alone", &DeleteParams::foreground())
        .await
        .unwrap();
    assert!(res.is_right());
}

#[tokio::test]
async fn foreground_cascades_through_levels() {
    let (_sim, client) = client();
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    let top = cm(&cms, "top", &[], &[]).await;
    let mid = cm(&cms, "mid", &[("top", &top, true)], &[]).await;
    cm(&cms, "leaf", &[("mid", &mid, true)], &["example.com/hold"]).await;
    cms.delete("top", &DeleteParams::foreground())
        .await
        .unwrap();
    let mid_obj = cms.get("mid").await.unwrap();
    assert_eq!(
        mid_obj.metadata.finalizers.unwrap(),
        vec!["foregroundDeletion".to_owned()],
        "a dependent with dependents is itself deleted in the foreground"
    );
    assert!(!gone(&cms, "top").await);
    let release = json!({"metadata": {"finalizers": null}});
    cms.patch("leaf", &PatchParams::default(), &Patch::Merge(&release))
        .await
        .unwrap();
    for name in ["leaf", "mid", "top"] {
        assert!(gone(&cms, name).await, "{name}");
    }
}

#[tokio::test]
async fn orphan_keeps_dependents_and_drops_references() {
    let (_sim, client) = client();
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let owner = cm(&cms, "owner", &[], &[]).await;
    cm(&cms, "a", &[("owner", &owner, true)], &[]).await;
    cms.delete("owner", &DeleteParams::orphan()).await.unwrap();
    assert!(gone(&cms, "owner").await);
    assert!(
        cms.get("a")
            .await
            .unwrap()
            .metadata
            .owner_references
            .is_none()
    );

    // The policy may also come as a query parameter.
    let owner = cm(&cms, "owner2", &[], &[]).await;
    cm(&cms, "b", &[("owner2", &owner, true)], &[]).await;
    let req = http::Request::delete(
        "/api/v1/namespaces/default/configmaps/owner2?propagationPolicy=Orphan",
    )
    .body(Vec::new())
    .unwrap();
    client.request::<Value>(req).await.unwrap();
    assert!(gone(&cms, "owner2").await);
    assert!(
        cms.get("b")
            .await
            .unwrap()
            .metadata
            .owner_references
            .is_none()
    );
}

fn pod(name: &str, node: Option<&str>, grace: i64) -> Pod {
    from_json(
        json!({"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "i"}],
        "nodeName": node, "terminationGracePeriodSeconds": grace}}),
    )
}

#[tokio::test(start_paused = true)]
async fn bound_pods_terminate_gracefully() {
    let (_sim, client) = client();
    let pods: Api<Pod> = Api::default_namespaced(client);
    pods.create(&PostParams::default(), &pod("unbound", None, 30))
        .await
        .unwrap();
    // Gone at once; the answer is the pod as deleted (kube-apiserver returns deleted pods).
    let gone = pods
        .delete("unbound", &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .expect("a deleted pod is returned");
    assert_eq!(gone.metadata.deletion_grace_period_seconds, Some(0));
    assert!(pods.get_opt("unbound").await.unwrap().is_none());

    pods.create(&PostParams::default(), &pod("a", Some("n1"), 30))
        .await
        .unwrap();
    let res = pods.delete("a", &DeleteParams::default()).await.unwrap();
    let terminating = res.left().expect("a bound pod stays while it terminates");
    assert_eq!(terminating.metadata.deletion_grace_period_seconds, Some(30));
    // A shorter period shortens it; 0 removes the pod (what the kubelet does).
    let shorter = DeleteParams {
        grace_period_seconds: Some(10),
        ..DeleteParams::default()
    };
    let res = pods.delete("a", &shorter).await.unwrap();
    assert_eq!(
        res.left().unwrap().metadata.deletion_grace_period_seconds,
        Some(10)
    );
    let now = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    assert!(pods.delete("a", &now).await.unwrap().is_left());
    assert_eq!(api_err(pods.get("a").await).code, 404);

    // Left alone, the pod goes when its grace period is over.
    pods.create(&PostParams::default(), &pod("b", Some("n1"), 5))
        .await
        .unwrap();
    pods.delete("b", &DeleteParams::default()).await.unwrap();
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(pods.get("b").await.is_ok());
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(api_err(pods.get("b").await).code, 404);
}

#[tokio::test]
async fn deleting_an_owner_takes_its_pods_gracefully() {
    let (_sim, client) = client();
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let pods: Api<Pod> = Api::default_namespaced(client);
    let owner = cm(&cms, "owner", &[], &[]).await;
    let mut p = pod("p", Some("n1"), 30);
    p.metadata.owner_references = Some(vec![from_json(json!({"apiVersion": "v1",
        "kind": "ConfigMap", "name": "owner", "uid": owner, "blockOwnerDeletion": true}))]);
    pods.create(&PostParams::default(), &p).await.unwrap();
    cms.delete("owner", &DeleteParams::foreground())
        .await
        .unwrap();
    assert!(
        pods.get("p")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    );
    assert!(
        !gone(&cms, "owner").await,
        "the terminating pod blocks its owner"
    );
    let now = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    pods.delete("p", &now).await.unwrap();
    assert!(gone(&cms, "owner").await);
}
