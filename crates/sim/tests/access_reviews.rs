//! Access reviews (`authorization.k8s.io/v1`) through kube clients and raw HTTP: every review
//! is allowed, invalid ones are refused as kube-apiserver refuses them, the resources are
//! create-only, and the protobuf bodies `kubectl auth can-i` sends are understood (and, as
//! those go through the same decoder, protobuf bodies of other built-in kinds).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;

use common::{api_err, client, from_json, namespace};
use http::{Method, Request};
use k8s_openapi::api::authorization::v1::{
    LocalSubjectAccessReview, SelfSubjectAccessReview, SelfSubjectRulesReview, SubjectAccessReview,
};
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

const REVIEWS: &str = "/apis/authorization.k8s.io/v1";

/// Send a raw request; the code and the JSON body.
async fn send(
    client: &kube::Client,
    method: Method,
    path: &str,
    ct: &str,
    body: Vec<u8>,
) -> (u16, Value) {
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::CONTENT_TYPE, ct)
        .header(
            http::header::ACCEPT,
            "application/vnd.kubernetes.protobuf,application/json",
        )
        .body(kube::client::Body::from(body))
        .unwrap();
    let resp = client.send(req).await.unwrap();
    let code = resp.status().as_u16();
    let ct = resp.headers()[http::header::CONTENT_TYPE]
        .to_str()
        .unwrap()
        .to_owned();
    assert_eq!(ct, "application/json");
    let bytes = resp.into_body().collect_bytes().await.unwrap();
    (code, serde_json::from_slice(&bytes).unwrap())
}

#[tokio::test]
async fn every_review_is_allowed() {
    let (_sim, client) = client();
    namespace(&client, "team").await;
    let pp = PostParams::default();
    let ssar: SelfSubjectAccessReview = from_json(json!({"spec": {"resourceAttributes": {
        "verb": "patch", "group": "karpenter.sh", "resource": "nodeclaims", "subresource": "status"}}}));
    let answer = Api::<SelfSubjectAccessReview>::all(client.clone())
        .create(&pp, &ssar)
        .await
        .unwrap();
    let status = answer.status.unwrap();
    assert!(status.allowed);
    assert_eq!(status.reason.as_deref(), Some(sim::access_review::REASON));
    assert_eq!(answer.spec, ssar.spec);

    let sar: SubjectAccessReview = from_json(json!({"spec": {"user": "bob",
        "nonResourceAttributes": {"path": "/metrics", "verb": "get"}}}));
    let answer = Api::<SubjectAccessReview>::all(client.clone())
        .create(&pp, &sar)
        .await
        .unwrap();
    assert!(answer.status.unwrap().allowed);

    let local: LocalSubjectAccessReview = from_json(json!({"spec": {"groups": ["devs"],
        "resourceAttributes": {"verb": "delete", "resource": "pods", "namespace": "team"}}}));
    let answer = Api::<LocalSubjectAccessReview>::namespaced(client.clone(), "team")
        .create(&pp, &local)
        .await
        .unwrap();
    assert_eq!(answer.metadata.namespace.as_deref(), Some("team"));
    assert!(answer.status.unwrap().allowed);

    let rules: SelfSubjectRulesReview = from_json(json!({"spec": {"namespace": "team"}}));
    let answer = Api::<SelfSubjectRulesReview>::all(client.clone())
        .create(&pp, &rules)
        .await
        .unwrap();
    let status = answer.status.unwrap();
    assert!(!status.incomplete);
    assert_eq!(status.resource_rules.len(), 1);
    assert_eq!(status.resource_rules[0].verbs, ["*"]);
    assert_eq!(
        status.non_resource_rules[0].non_resource_urls,
        Some(vec!["*".into()])
    );

    // Nothing is stored, and a dry run answers the same.
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let answer = Api::<SelfSubjectAccessReview>::all(client.clone())
        .create(&dry, &ssar)
        .await
        .unwrap();
    assert!(answer.status.unwrap().allowed);
}

#[tokio::test]
async fn invalid_reviews_are_refused() {
    let (_sim, client) = client();
    let pp = PostParams::default();
    let empty: SelfSubjectAccessReview = from_json(json!({"spec": {}}));
    let s = api_err(
        Api::<SelfSubjectAccessReview>::all(client.clone())
            .create(&pp, &empty)
            .await,
    );
    assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        s.message,
        ".authorization.k8s.io \"\" is invalid: spec.resourceAttributes: Invalid value: null: exactly one of nonResourceAttributes or resourceAttributes must be specified"
    );
    let nobody: SubjectAccessReview =
        from_json(json!({"spec": {"resourceAttributes": {"verb": "get"}}}));
    let s = api_err(
        Api::<SubjectAccessReview>::all(client.clone())
            .create(&pp, &nobody)
            .await,
    );
    assert_eq!(s.code, 422);
    assert!(s.message.contains("spec.user"), "{}", s.message);
    let rules: SelfSubjectRulesReview = from_json(json!({"spec": {}}));
    let s = api_err(
        Api::<SelfSubjectRulesReview>::all(client.clone())
            .create(&pp, &rules)
            .await,
    );
    assert_eq!(
        (s.code, s.message.as_str()),
        (400, "no namespace on request")
    );
}

#[tokio::test]
async fn reviews_are_create_only() {
    let (_sim, client) = client();
    let ssar = format!("{REVIEWS}/selfsubjectaccessreviews");
    for (method, path, code) in [
        (Method::GET, ssar.clone(), 405),
        (Method::GET, format!("{ssar}?watch=true"), 405),
        (Method::DELETE, ssar.clone(), 405),
        (Method::GET, format!("{ssar}/x"), 404),
        (Method::POST, format!("{ssar}/x"), 404),
        (
            Method::GET,
            format!("{REVIEWS}/watch/selfsubjectaccessreviews"),
            404,
        ),
        (
            Method::POST,
            format!("{REVIEWS}/namespaces/default/selfsubjectaccessreviews"),
            404,
        ),
        (
            Method::POST,
            format!("{REVIEWS}/localsubjectaccessreviews"),
            404,
        ),
        (
            Method::GET,
            format!("{REVIEWS}/namespaces/default/localsubjectaccessreviews"),
            405,
        ),
    ] {
        let (got, body) = send(
            &client,
            method.clone(),
            &path,
            "application/json",
            b"{}".to_vec(),
        )
        .await;
        assert_eq!(got, code, "{method} {path}: {body}");
    }
    let discovery = kube::Discovery::new(client.clone()).run().await.unwrap();
    let group = discovery
        .groups()
        .find(|g| g.name() == "authorization.k8s.io")
        .unwrap();
    let kinds: Vec<String> = group
        .recommended_resources()
        .into_iter()
        .map(|(r, caps)| {
            assert_eq!(caps.operations, ["create"]);
            r.kind
        })
        .collect();
    assert_eq!(kinds.len(), 4, "{kinds:?}");
}

/// What `kubectl auth can-i create pods` (v1.32) sends.
const CAN_I_CREATE_PODS: &str = "6b 38 73 00 0a 32 0a 17 61 75 74 68 6f 72 69 7a 61 74 69 6f 6e 2e 6b 38 73 2e 69 6f 2f 76 31 12 17 53 65 6c 66 53 75 62 6a 65 63 74 41 63 63 65 73 73 52 65 76 69 65 77 12 3f 0a 10 0a 00 12 00 1a 00 22 00 2a 00 32 00 38 00 42 00 12 21 0a 1f 0a 07 64 65 66 61 75 6c 74 12 06 63 72 65 61 74 65 1a 00 22 00 2a 04 70 6f 64 73 32 00 3a 00 1a 08 08 00 12 00 1a 00 20 00 1a 00 22 00";

#[tokio::test]
async fn protobuf_reviews_are_answered_in_json() {
    let (_sim, client) = client();
    let body: Vec<u8> = CAN_I_CREATE_PODS
        .split_whitespace()
        .map(|b| u8::from_str_radix(b, 16).unwrap())
        .collect();
    let path = format!("{REVIEWS}/selfsubjectaccessreviews");
    let ct = "application/vnd.kubernetes.protobuf";
    let (code, answer) = send(&client, Method::POST, &path, ct, body).await;
    assert_eq!(code, 201, "{answer}");
    assert_eq!(
        answer["spec"],
        json!({"resourceAttributes": {"namespace": "default", "verb": "create", "resource": "pods"}})
    );
    assert_eq!(answer["status"]["allowed"], true);
    // A body of no kind, or of a kind sim cannot decode, is refused.
    let (code, _) = send(
        &client,
        Method::POST,
        "/api/v1/namespaces",
        ct,
        b"k8s\0".to_vec(),
    )
    .await;
    assert_eq!(code, 415);
    let (code, _) = send(&client, Method::POST, &path, ct, b"{}".to_vec()).await;
    assert_eq!(code, 400);
}

/// A protobuf field: a key byte (field numbers below 16) and a short length.
fn pb(n: u8, bytes: &[u8]) -> Vec<u8> {
    let mut out = vec![(n << 3) | 2, u8::try_from(bytes.len()).unwrap()];
    out.extend_from_slice(bytes);
    out
}

/// A protobuf ConfigMap `c` whose `data` is `{k: v}`, with `extra` appended to its message.
fn configmap(v: &[u8], resource_version: &[u8], extra: &[u8]) -> Vec<u8> {
    let type_meta = [pb(1, b"v1"), pb(2, b"ConfigMap")].concat();
    let meta = [pb(1, b"c"), pb(6, resource_version)].concat();
    let raw = [
        pb(1, &meta),
        pb(2, &[pb(1, b"k"), pb(2, v)].concat()),
        extra.to_vec(),
    ]
    .concat();
    [b"k8s\0".to_vec(), pb(1, &type_meta), pb(2, &raw)].concat()
}

/// Protobuf bodies of the other built-in kinds: created (POST) and updated (PUT); a field
/// number sim's decoder does not know is refused (415) naming the kind and the number.
#[tokio::test]
async fn protobuf_bodies_of_built_in_kinds_create_update_and_refuse_unknown_fields() {
    let (_sim, client) = client();
    let ct = "application/vnd.kubernetes.protobuf";
    let path = "/api/v1/namespaces/default/configmaps";
    let (code, created) = send(&client, Method::POST, path, ct, configmap(b"v", b"", &[])).await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["data"], json!({"k": "v"}));
    let rv = created["metadata"]["resourceVersion"].as_str().unwrap();
    let body = configmap(b"w", rv.as_bytes(), &[]);
    let (code, updated) = send(&client, Method::PUT, &format!("{path}/c"), ct, body).await;
    assert_eq!(code, 200, "{updated}");
    assert_eq!(updated["data"], json!({"k": "w"}));
    let body = configmap(b"x", b"", &pb(15, b"?"));
    let (code, status) = send(&client, Method::POST, path, ct, body).await;
    assert_eq!(code, 415, "{status}");
    let message = status["message"].as_str().unwrap();
    assert!(
        message.contains("ConfigMap") && message.contains("field number 15"),
        "{message}"
    );
}
