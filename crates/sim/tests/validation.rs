//! Validation of custom resources against their CRD's OpenAPI schema and CEL rules, through
//! kube-rs against our real CRDs, with kube-apiserver's 422 `Status` objects.
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
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use serde_json::{Value, json};

async fn install_ours(client: &kube::Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in api::crd::all() {
        crds.create(&PostParams::default(), &crd).await.unwrap();
    }
}

fn pools(client: &kube::Client) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("karpenter.sh", "v1", "NodePool"),
        "nodepools",
    );
    Api::all_with(client.clone(), &ar)
}

fn claims(client: &kube::Client) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("karpenter.sh", "v1", "NodeClaim"),
        "nodeclaims",
    );
    Api::all_with(client.clone(), &ar)
}

fn pool(name: &str, spec_patch: &Value) -> DynamicObject {
    let mut spec = json!({"template": {"spec": {
        "nodeClassRef": {"group": "karpenter.cluster.x-k8s.io", "kind": "ClusterAPINodeClass", "name": "default"},
        "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}}});
    json_patch::merge(&mut spec, spec_patch);
    from_json(json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": name}, "spec": spec}))
}

/// Create a NodePool with `spec_patch` merged into a valid spec; the error's `Status`.
async fn rejected(client: &kube::Client, spec_patch: Value) -> kube::core::Status {
    api_err(
        pools(client)
            .create(&PostParams::default(), &pool("bad", &spec_patch))
            .await,
    )
}

fn causes(status: &kube::core::Status) -> Vec<(String, String, String)> {
    status
        .details
        .as_ref()
        .expect("details")
        .causes
        .iter()
        .map(|c| (c.reason.clone(), c.field.clone(), c.message.clone()))
        .collect()
}

#[tokio::test]
async fn a_valid_nodepool_passes() {
    let (_sim, client) = client();
    install_ours(&client).await;
    let spec = json!({"weight": 10, "disruption": {"consolidateAfter": "30s", "budgets": [
        {"nodes": "10%", "schedule": "@daily", "duration": "10m"}]},
        "template": {"metadata": {"labels": {"team": "a"}}}});
    pools(&client)
        .create(&PostParams::default(), &pool("ok", &spec))
        .await
        .unwrap();
    // Typed too.
    let typed: Api<api::NodePool> = Api::all(client.clone());
    assert_eq!(typed.get("ok").await.unwrap().spec.weight, Some(10));
}

#[tokio::test]
async fn bad_operator_names_the_field() {
    let (_sim, client) = client();
    install_ours(&client).await;
    let st = rejected(
        &client,
        json!({"template": {"spec": {"requirements": [
            {"key": "kubernetes.io/arch", "operator": "Equals", "values": ["amd64"]}]}}}),
    )
    .await;
    assert_eq!(st.code, 422);
    assert_eq!(st.reason, "Invalid");
    let details = st.details.as_ref().unwrap();
    assert_eq!(details.name, "bad");
    assert_eq!(details.group, "karpenter.sh");
    assert_eq!(details.kind, "NodePool");
    let cs = causes(&st);
    assert_eq!(cs[0].0, "FieldValueNotSupported");
    assert_eq!(cs[0].1, "spec.template.spec.requirements[0].operator");
    assert!(
        cs[0]
            .2
            .starts_with("Unsupported value: \"Equals\": supported values: "),
        "{cs:?}"
    );
    assert!(
        st.message.starts_with(
            "NodePool.karpenter.sh \"bad\" is invalid: [spec.template.spec.requirements[0].operator: Unsupported value: \"Equals\""
        ),
        "{}",
        st.message
    );
}

#[tokio::test]
async fn bad_expire_after_and_weight_are_rejected() {
    let (_sim, client) = client();
    install_ours(&client).await;
    let st = rejected(
        &client,
        json!({"template": {"spec": {"expireAfter": "30d"}}}),
    )
    .await;
    assert_eq!(st.code, 422);
    let cs = causes(&st);
    assert_eq!(cs.len(), 1, "{cs:?}");
    assert_eq!(cs[0].0, "FieldValueInvalid");
    assert_eq!(cs[0].1, "spec.template.spec.expireAfter");
    assert!(
        cs[0]
            .2
            .contains("should match '^(([0-9]+(s|m|h))+|Never)$'")
    );

    let st = rejected(&client, json!({"weight": 500})).await;
    assert_eq!(st.code, 422);
    assert_eq!(
        st.message,
        "NodePool.karpenter.sh \"bad\" is invalid: spec.weight: Invalid value: 500: spec.weight in body should be less than or equal to 100"
    );

    let st = rejected(&client, json!({"weight": "heavy"})).await;
    assert_eq!(causes(&st)[0].0, "FieldValueTypeInvalid");
}

#[tokio::test]
async fn cel_rules_are_enforced_with_their_messages() {
    let (_sim, client) = client();
    install_ours(&client).await;
    let st = rejected(
        &client,
        json!({"disruption": {"consolidateAfter": "0s", "budgets": [{"nodes": "1", "schedule": "@daily"}]}}),
    )
    .await;
    assert_eq!(st.code, 422);
    let cs = causes(&st);
    assert_eq!(cs.len(), 1, "{cs:?}");
    assert_eq!(cs[0].1, "spec.disruption.budgets");
    assert_eq!(
        cs[0].2,
        "Invalid value: 'schedule' must be set with 'duration'"
    );

    let st = rejected(
        &client,
        json!({"template": {"metadata": {"labels": {"karpenter.sh/nodepool": "x"}}}}),
    )
    .await;
    assert_eq!(st.code, 422);
    let msgs: Vec<String> = causes(&st).into_iter().map(|c| c.2).collect();
    assert!(
        msgs.iter()
            .any(|m| m.contains("label \"karpenter.sh/nodepool\" is restricted")),
        "{msgs:?}"
    );
    assert!(
        causes(&st)
            .iter()
            .all(|c| c.1 == "spec.template.metadata.labels")
    );

    // Gt needs a single integer value (int(), size(), ternary in one rule).
    let st = rejected(
        &client,
        json!({"template": {"spec": {"requirements": [
            {"key": "example.com/gen", "operator": "Gt", "values": ["1", "2"]}]}}}),
    )
    .await;
    assert!(
        st.message
            .contains("must have a single positive integer value")
    );
}

#[tokio::test]
async fn transition_rules_use_old_self() {
    let (_sim, client) = client();
    install_ours(&client).await;
    let api = pools(&client);
    api.create(&PostParams::default(), &pool("p", &json!({})))
        .await
        .unwrap();
    let patch = json!({"spec": {"template": {"spec": {"nodeClassRef": {"group": "other.io"}}}}});
    let st = api_err(
        api.patch("p", &PatchParams::default(), &Patch::Merge(&patch))
            .await,
    );
    assert_eq!(st.code, 422);
    assert_eq!(causes(&st)[0].1, "spec.template.spec.nodeClassRef");
    assert_eq!(
        st.message,
        "NodePool.karpenter.sh \"p\" is invalid: spec.template.spec.nodeClassRef: Invalid value: nodeClassRef.group is immutable"
    );
    // Changing something else still works (ratcheting leaves the ref alone).
    let ok = json!({"spec": {"weight": 3}});
    api.patch("p", &PatchParams::default(), &Patch::Merge(&ok))
        .await
        .unwrap();

    let claims = claims(&client);
    let claim: DynamicObject = from_json(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": "c"},
        "spec": {"nodeClassRef": {"group": "karpenter.cluster.x-k8s.io", "kind": "ClusterAPINodeClass", "name": "default"},
                 "requirements": []}}));
    let mut stored = claims.create(&PostParams::default(), &claim).await.unwrap();
    stored.data["spec"]["requirements"] =
        json!([{"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}]);
    let st = api_err(claims.replace("c", &PostParams::default(), &stored).await);
    assert_eq!(st.code, 422);
    assert_eq!(
        st.message,
        "NodeClaim.karpenter.sh \"c\" is invalid: spec: Invalid value: spec is immutable"
    );
    // Labels are not spec.
    let labels = json!({"metadata": {"labels": {"a": "b"}}});
    claims
        .patch("c", &PatchParams::default(), &Patch::Merge(&labels))
        .await
        .unwrap();
}

#[tokio::test]
async fn status_updates_are_validated() {
    let (_sim, client) = client();
    install_ours(&client).await;
    let api = pools(&client);
    api.create(&PostParams::default(), &pool("p", &json!({})))
        .await
        .unwrap();
    let good = json!({"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Ready",
        "message": "", "lastTransitionTime": "2024-01-01T00:00:00Z"}]}});
    api.patch_status("p", &PatchParams::default(), &Patch::Merge(&good))
        .await
        .unwrap();
    let bad = json!({"status": {"conditions": [{"type": "Ready", "status": "Maybe", "reason": "Ready",
        "message": "", "lastTransitionTime": "2024-01-01T00:00:00Z"}]}});
    let st = api_err(
        api.patch_status("p", &PatchParams::default(), &Patch::Merge(&bad))
            .await,
    );
    assert_eq!(st.code, 422);
    let cs = causes(&st);
    assert_eq!(cs[0].0, "FieldValueNotSupported");
    assert_eq!(cs[0].1, "status.conditions[0].status");
    let stamp = json!({"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Ready",
        "message": "", "lastTransitionTime": "yesterday"}]}});
    let st = api_err(
        api.patch_status("p", &PatchParams::default(), &Patch::Merge(&stamp))
            .await,
    );
    assert_eq!(causes(&st)[0].1, "status.conditions[0].lastTransitionTime");
}

#[tokio::test]
async fn server_side_apply_is_validated() {
    let (_sim, client) = client();
    install_ours(&client).await;
    let api = pools(&client);
    let mut obj = serde_json::to_value(pool("applied", &json!({"weight": 101}))).unwrap();
    obj["metadata"] = json!({"name": "applied"});
    let st = api_err(
        api.patch("applied", &PatchParams::apply("test"), &Patch::Apply(&obj))
            .await,
    );
    assert_eq!(st.code, 422);
    assert_eq!(causes(&st)[0].1, "spec.weight");
}

#[tokio::test]
async fn crds_with_uncompilable_rules_are_rejected() {
    let (_sim, client) = client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd: CustomResourceDefinition = from_json(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object", "properties": {"spec": {"type": "object",
                    "properties": {"size": {"type": "integer"}},
                    "x-kubernetes-validations": [{"rule": "self.size >", "message": "broken"}]}}}}}]}
    }));
    let st = api_err(crds.create(&PostParams::default(), &crd).await);
    assert_eq!(st.code, 422);
    assert_eq!(st.reason, "Invalid");
    assert!(
        st.message.starts_with("CustomResourceDefinition.apiextensions.k8s.io \"widgets.example.com\" is invalid: spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Invalid value: \"self.size >\": compilation failed"),
        "{}",
        st.message
    );
}

#[tokio::test]
async fn every_rule_of_the_chart_crds_compiles() {
    let (_sim, client) = client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../charts/karpenter-capi/crds"
    );
    let mut n = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        let crd: CustomResourceDefinition = serde_norway::from_str(&text).unwrap();
        crds.create(&PostParams::default(), &crd).await.unwrap();
        n += 1;
    }
    assert_eq!(n, 5);
}

/// Upstream's documented CapacityBuffer examples (`api/tests/manifests/capacitybuffer.yaml`)
/// are accepted unchanged, an unset `provisioningStrategy` is defaulted as upstream's CRD
/// does, and both CEL rules refuse with upstream's messages.
#[tokio::test]
async fn upstreams_capacity_buffer_examples_apply_and_its_rules_hold() {
    let (_sim, client) = client();
    install_ours(&client).await;
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("autoscaling.x-k8s.io", "v1beta1", "CapacityBuffer"),
        "capacitybuffers",
    );
    let buffers: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../api/tests/manifests/capacitybuffer.yaml");
    let text = std::fs::read_to_string(path).unwrap();
    let mut created = 0;
    for doc in serde_norway::Deserializer::from_str(&text) {
        let value: Value = serde::Deserialize::deserialize(doc).unwrap();
        let object: DynamicObject = from_json(value);
        buffers
            .create(&PostParams::default(), &object)
            .await
            .unwrap();
        created += 1;
    }
    assert_eq!(created, 2);
    let typed: Api<api::CapacityBuffer> = Api::namespaced(client.clone(), "default");
    let defaulted = typed.get("api-service-buffer").await.unwrap();
    assert_eq!(
        defaulted.spec.provisioning_strategy.as_deref(),
        Some("buffer.x-k8s.io/active-capacity")
    );
    for (spec, message) in [
        (
            json!({"podTemplateRef": {"name": "t"}}),
            "If podTemplateRef is set, replicas or limits must also be set",
        ),
        (
            json!({"podTemplateRef": {"name": "t"}, "replicas": 1,
                "scalableRef": {"kind": "Deployment", "name": "d"}}),
            "You must define either PodTemplateRef or ScalableRef, but not both",
        ),
    ] {
        let object: DynamicObject = from_json(json!({
            "apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityBuffer",
            "metadata": {"name": "bad", "namespace": "default"}, "spec": spec}));
        let st = api_err(buffers.create(&PostParams::default(), &object).await);
        assert_eq!(st.code, 422);
        assert!(st.message.contains(message), "{}", st.message);
    }
}
