//! PATCH through kube-rs: JSON merge patch, JSON patch, strategic merge patch, server-side
//! apply (create-if-absent, merge, field ownership), and dry-run.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;

use common::{api_err, client, from_json};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

fn pod() -> Pod {
    from_json(
        json!({"metadata": {"name": "p", "labels": {"a": "1"}}, "spec": {"containers": [
            {"name": "app", "image": "app:1", "env": [{"name": "X", "value": "1"}]},
            {"name": "side", "image": "side:1"}
        ]}}),
    )
}

#[tokio::test]
async fn merge_and_json_patches() {
    let (_sim, client) = client();
    let pods: Api<Pod> = Api::default_namespaced(client);
    pods.create(&PostParams::default(), &pod()).await.unwrap();
    let merged = pods
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"a": null, "b": "2"}}})),
        )
        .await
        .unwrap();
    assert_eq!(
        merged
            .metadata
            .labels
            .unwrap()
            .into_iter()
            .collect::<Vec<_>>(),
        vec![("b".to_owned(), "2".to_owned())]
    );
    let ops: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/spec/containers/0/name", "value": "app"},
        {"op": "replace", "path": "/spec/containers/0/image", "value": "app:2"}
    ]))
    .unwrap();
    let patched = pods
        .patch("p", &PatchParams::default(), &Patch::<()>::Json(ops))
        .await
        .unwrap();
    assert_eq!(
        patched.spec.unwrap().containers[0].image.as_deref(),
        Some("app:2")
    );
    let failing: json_patch::Patch = serde_json::from_value(
        json!([{"op": "test", "path": "/spec/containers/0/name", "value": "nope"}]),
    )
    .unwrap();
    let err = api_err(
        pods.patch("p", &PatchParams::default(), &Patch::<()>::Json(failing))
            .await,
    );
    assert_eq!(err.code, 422);
    assert_eq!(
        api_err(
            pods.patch("missing", &PatchParams::default(), &Patch::Merge(json!({})))
                .await
        )
        .code,
        404
    );
}

#[tokio::test]
async fn strategic_merge_merges_containers_by_name() {
    let (_sim, client) = client();
    // A pod's containers cannot be added or removed: merge into a Deployment's template.
    let deploys: Api<Deployment> = Api::default_namespaced(client.clone());
    let d: Deployment = from_json(json!({"metadata": {"name": "d"}, "spec": {
        "selector": {"matchLabels": {"app": "d"}},
        "template": {"metadata": {"labels": {"app": "d"}}, "spec": pod().spec}}}));
    deploys.create(&PostParams::default(), &d).await.unwrap();
    let smp = json!({"spec": {"template": {"spec": {"containers": [
        {"name": "app", "image": "app:3", "env": [{"name": "Y", "value": "2"}]},
        {"name": "side", "$patch": "delete"}
    ]}}}});
    let out = deploys
        .patch("d", &PatchParams::default(), &Patch::Strategic(smp))
        .await
        .unwrap();
    let containers = out.spec.unwrap().template.spec.unwrap().containers;
    assert_eq!(containers.len(), 1);
    assert_eq!(containers[0].image.as_deref(), Some("app:3"));
    let env: Vec<String> = containers[0]
        .env
        .clone()
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(env, vec!["Y", "X"], "the patch's elements first");
    let pods: Api<Pod> = Api::default_namespaced(client);
    pods.create(&PostParams::default(), &pod()).await.unwrap();
    let status = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}});
    let out = pods
        .patch_status("p", &PatchParams::default(), &Patch::Strategic(status))
        .await
        .unwrap();
    let conds = out.status.unwrap().conditions.unwrap();
    assert_eq!(conds.len(), 1);
}

#[tokio::test]
async fn server_side_apply_creates_then_merges_and_prunes() {
    let (_sim, client) = client();
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let pp = PatchParams::apply("sim-test").force();
    let first = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "labels": {"owned": "yes"}}, "data": {"a": "1", "b": "2"}});
    let created = cms.patch("cfg", &pp, &Patch::Apply(&first)).await.unwrap();
    assert_eq!(created.data.as_ref().unwrap().len(), 2);
    let managed = created.metadata.managed_fields.unwrap();
    assert_eq!(managed[0].manager.as_deref(), Some("sim-test"));
    assert_eq!(managed[0].operation.as_deref(), Some("Apply"));
    // Someone else adds a key with a merge patch.
    cms.patch(
        "cfg",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"c": "3"}})),
    )
    .await
    .unwrap();
    // Re-applying without `b` drops `b` (ours) but keeps `c` (not ours).
    let second = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"a": "10"}});
    let out = cms.patch("cfg", &pp, &Patch::Apply(&second)).await.unwrap();
    let data = out.data.unwrap();
    assert_eq!(data.get("a").map(String::as_str), Some("10"));
    assert!(!data.contains_key("b"));
    assert_eq!(data.get("c").map(String::as_str), Some("3"));
    assert!(
        out.metadata.labels.unwrap_or_default().is_empty(),
        "labels no longer applied are removed"
    );

    let no_manager = api_err(
        cms.patch("cfg", &PatchParams::default(), &Patch::Apply(&second))
            .await,
    );
    assert_eq!(
        (no_manager.code, no_manager.reason.as_str()),
        (422, "Invalid")
    );

    let deploys: Api<Deployment> = Api::default_namespaced(client);
    let d = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
    let created = deploys.patch("web", &pp, &Patch::Apply(&d)).await.unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    let mut d2 = d.clone();
    d2["spec"]["replicas"] = json!(3);
    let updated = deploys.patch("web", &pp, &Patch::Apply(&d2)).await.unwrap();
    assert_eq!(updated.metadata.generation, Some(2));
    assert_eq!(updated.spec.unwrap().replicas, Some(3));
}

#[tokio::test]
async fn dry_run_changes_nothing() {
    let (sim, client) = client();
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    let cm: ConfigMap = from_json(json!({"metadata": {"name": "d"}}));
    let before = sim.resource_version();
    let dry = cms
        .create(
            &PostParams {
                dry_run: true,
                field_manager: None,
            },
            &cm,
        )
        .await
        .unwrap();
    assert_eq!(dry.metadata.name.as_deref(), Some("d"));
    assert_eq!(api_err(cms.get("d").await).code, 404);
    assert_eq!(sim.resource_version(), before);
    cms.create(&PostParams::default(), &cm).await.unwrap();
    let pp = PatchParams {
        dry_run: true,
        ..PatchParams::default()
    };
    let out = cms
        .patch("d", &pp, &Patch::Merge(json!({"data": {"x": "y"}})))
        .await
        .unwrap();
    assert!(out.data.is_some());
    assert!(cms.get("d").await.unwrap().data.is_none());
}
