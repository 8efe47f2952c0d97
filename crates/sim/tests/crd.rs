//! CustomResourceDefinitions: dynamic serving, discovery, scope, versions, status and scale
//! subresources — with our real CRDs (`api::crd::all()`) and a hand-written namespaced one.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;

use common::{api_err, client, from_json};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams,
};
use kube::core::GroupVersionKind as Gvk;
use kube::discovery::{Discovery, Scope};
use serde_json::json;

async fn install_ours(client: &kube::Client) -> Vec<CustomResourceDefinition> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut out = Vec::new();
    for crd in api::crd::all() {
        out.push(crds.create(&PostParams::default(), &crd).await.unwrap());
    }
    out
}

fn widget_crd() -> CustomResourceDefinition {
    from_json(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"], "categories": ["all"]},
            "versions": [
                {"name": "v1alpha1", "served": true, "storage": false,
                 "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}},
                {"name": "v1", "served": true, "storage": true,
                 "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                 "subresources": {"status": {}, "scale": {
                     "specReplicasPath": ".spec.size", "statusReplicasPath": ".status.size",
                     "labelSelectorPath": ".status.selector"}}}
            ]
        }
    }))
}

fn widgets(client: &kube::Client, version: &str) -> Api<DynamicObject> {
    let ar =
        ApiResource::from_gvk_with_plural(&Gvk::gvk("example.com", version, "Widget"), "widgets");
    Api::namespaced_with(client.clone(), "default", &ar)
}

#[tokio::test]
async fn our_crds_are_established_and_discoverable() {
    let (_sim, client) = client();
    let created = install_ours(&client).await;
    assert_eq!(created.len(), 5);
    for crd in &created {
        let status = crd.status.as_ref().unwrap();
        let established = status
            .conditions
            .as_ref()
            .unwrap()
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True");
        assert!(established, "{:?}", crd.metadata.name);
        assert_eq!(
            status.accepted_names.as_ref().unwrap().kind,
            crd.spec.names.kind
        );
    }
    let discovery = Discovery::new(client.clone()).run().await.unwrap();
    let (ar, caps) = discovery
        .resolve_gvk(&GroupVersionKind::gvk("karpenter.sh", "v1", "NodePool"))
        .expect("NodePool discovered");
    assert_eq!(ar.plural, "nodepools");
    assert_eq!(caps.scope, Scope::Cluster);
    assert!(
        caps.subresources
            .iter()
            .any(|(sr, _)| sr.plural == "nodepools/scale" || sr.plural == "scale"),
        "{:?}",
        caps.subresources
    );
    assert!(
        discovery
            .resolve_gvk(&GroupVersionKind::gvk("karpenter.sh", "v1", "NodeClaim"))
            .is_some()
    );
}

#[tokio::test]
async fn nodepools_are_served_typed_and_scale() {
    let (_sim, client) = client();
    install_ours(&client).await;
    let pools: Api<api::NodePool> = Api::all(client.clone());
    let pool: api::NodePool = from_json(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {"replicas": 1, "template": {"spec": {
            "nodeClassRef": {"group": "karpenter.cluster.x-k8s.io", "kind": "ClusterAPINodeClass", "name": "default"},
            "requirements": []}}},
        "status": {"nodes": 5}
    }));
    let created = pools.create(&PostParams::default(), &pool).await.unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    assert!(
        created.status.is_none(),
        "status subresource: status dropped on create"
    );

    let scale = pools.get_scale("default").await.unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(1));
    let patch = json!({"spec": {"replicas": 4}});
    let scaled = pools
        .patch_scale("default", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    assert_eq!(scaled.spec.unwrap().replicas, Some(4));
    let after = pools.get("default").await.unwrap();
    assert_eq!(after.spec.replicas, Some(4));
    assert_eq!(after.metadata.generation, Some(2));

    let status = json!({"status": {"nodes": 4}});
    pools
        .patch_status("default", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    let scale = pools.get_scale("default").await.unwrap();
    assert_eq!(scale.status.unwrap().replicas, 4);

    let mut replace = pools.get_scale("default").await.unwrap();
    replace.spec.as_mut().unwrap().replicas = Some(2);
    let replaced = pools
        .replace_scale("default", &PostParams::default(), &replace)
        .await
        .unwrap();
    assert_eq!(replaced.spec.unwrap().replicas, Some(2));
    // The old Scale's resourceVersion is stale now.
    let stale = api_err(
        pools
            .replace_scale("default", &PostParams::default(), &replace)
            .await,
    );
    assert_eq!(stale.code, 409);

    let smp = api_err(
        pools
            .patch(
                "default",
                &PatchParams::default(),
                &Patch::Strategic(&json!({"spec": {}})),
            )
            .await,
    );
    assert_eq!(
        smp.code, 415,
        "custom resources refuse strategic merge patch"
    );
}

#[tokio::test]
async fn namespaced_crd_with_versions_status_and_selector() {
    let (_sim, client) = client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &widget_crd())
        .await
        .unwrap();
    let v1 = widgets(&client, "v1");
    let w: DynamicObject = from_json(json!({
        "apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w1", "labels": {"tier": "a"}},
        "spec": {"size": 2}
    }));
    let created = v1.create(&PostParams::default(), &w).await.unwrap();
    assert_eq!(created.metadata.namespace.as_deref(), Some("default"));
    // Served in the other version too, with only apiVersion changed.
    let old = widgets(&client, "v1alpha1").get("w1").await.unwrap();
    assert_eq!(old.types.unwrap().api_version, "example.com/v1alpha1");
    assert_eq!(old.data["spec"]["size"], 2);

    let status = json!({"status": {"size": 1, "selector": "tier=a"}});
    v1.patch_status("w1", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    let scale = v1.get_scale("w1").await.unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(2));
    let st = scale.status.unwrap();
    assert_eq!((st.replicas, st.selector.as_deref()), (1, Some("tier=a")));

    let list = v1
        .list(&ListParams::default().labels("tier=a"))
        .await
        .unwrap();
    assert_eq!(list.items.len(), 1);
    // Cluster-scoped access to a namespaced kind lists all namespaces.
    let ar = ApiResource::from_gvk_with_plural(&Gvk::gvk("example.com", "v1", "Widget"), "widgets");
    let all: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    assert_eq!(
        all.list(&ListParams::default()).await.unwrap().items.len(),
        1
    );
    // Custom resource deletes return the object.
    let deleted = v1.delete("w1", &DeleteParams::default()).await.unwrap();
    assert!(deleted.is_left());
}

#[tokio::test]
async fn deleting_a_crd_stops_serving_its_resources() {
    let (_sim, client) = client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &widget_crd())
        .await
        .unwrap();
    let v1 = widgets(&client, "v1");
    let w: DynamicObject = from_json(
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}),
    );
    v1.create(&PostParams::default(), &w).await.unwrap();
    crds.delete("widgets.example.com", &DeleteParams::default())
        .await
        .unwrap();
    let gone = api_err(v1.get("w").await);
    assert_eq!(gone.code, 404);
    let discovery = Discovery::new(client.clone()).run().await.unwrap();
    assert!(
        discovery
            .resolve_gvk(&GroupVersionKind::gvk("example.com", "v1", "Widget"))
            .is_none()
    );
    // Re-creating it serves an empty collection.
    crds.create(&PostParams::default(), &widget_crd())
        .await
        .unwrap();
    assert!(
        v1.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
}

#[tokio::test]
async fn invalid_crds_are_rejected() {
    let (_sim, client) = client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut wrong = widget_crd();
    wrong.metadata.name = Some("gadgets.example.com".into());
    let err = api_err(crds.create(&PostParams::default(), &wrong).await);
    assert_eq!((err.code, err.reason.as_str()), (422, "Invalid"));
    let unknown = widgets(&client, "v1");
    assert_eq!(
        api_err(unknown.list(&ListParams::default()).await).code,
        404
    );
}

#[tokio::test]
async fn schema_defaults_are_applied_and_unknown_fields_pruned() {
    let (_sim, client) = client();
    install_ours(&client).await;
    let ar =
        ApiResource::from_gvk_with_plural(&Gvk::gvk("karpenter.sh", "v1", "NodePool"), "nodepools");
    let pools: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let pool: DynamicObject = from_json(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": "p"},
        "spec": {"notInTheSchema": true, "template": {"spec": {
            "nodeClassRef": {"group": "karpenter.cluster.x-k8s.io", "kind": "ClusterAPINodeClass", "name": "default"},
            "requirements": []}}}
    }));
    let created = pools.create(&PostParams::default(), &pool).await.unwrap();
    let spec = &created.data["spec"];
    assert!(spec.get("notInTheSchema").is_none(), "{spec}");
    assert_eq!(spec["template"]["spec"]["expireAfter"], "720h");
    assert_eq!(spec["disruption"]["budgets"][0]["nodes"], "10%");
    assert_eq!(
        spec["disruption"]["consolidationPolicy"],
        "WhenEmptyOrUnderutilized"
    );
    // Typed reads see the defaults too.
    let typed: Api<api::NodePool> = Api::all(client);
    assert!(typed.get("p").await.unwrap().spec.disruption.is_some());
}
