//! Access reviews (`authorization.k8s.io/v1`), posted as the admin (`system:masters`, allowed
//! everything on the real server): the answers' `allowed`, the reviews echoed, the refusals of
//! invalid reviews (code, reason, message, causes), and the paths that are not served. The
//! `status.reason` is not compared: sim says it has no authorization, kube-apiserver's RBAC
//! says nothing for the admin. A SelfSubjectRulesReview is compared by whether it lists `*`
//! rules (kube-apiserver lists every rule that applies; sim only those).

use http::Method;
use serde_json::{Value, json};

use crate::harness::{Ctx, Resp, error_summary};

const V1: &str = "/apis/authorization.k8s.io/v1";

fn ssar(spec: Value) -> Value {
    json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "spec": spec})
}

/// A review's answer without `status.reason`; an error's summary.
fn answer(t: &Ctx, label: &str, r: &Resp) {
    if r.code >= 400 {
        t.note(label, error_summary(r));
        return;
    }
    let mut body = r.body.clone();
    if let Some(status) = body.get_mut("status").and_then(Value::as_object_mut) {
        status.remove("reason");
    }
    t.note(label, json!({"code": r.code, "body": body}));
}

/// SelfSubjectAccessReviews, allowed and refused.
pub async fn self_subject_access_reviews(t: Ctx) {
    let path = format!("{V1}/selfsubjectaccessreviews");
    let cases = [
        (
            "resource",
            json!({"resourceAttributes": {"verb": "create", "resource": "pods", "namespace": t.ns}}),
        ),
        (
            "subresource with name",
            json!({"resourceAttributes": {"verb": "patch", "group": "karpenter.sh",
                "resource": "nodeclaims", "subresource": "status", "name": "a", "version": ""}}),
        ),
        (
            "non-resource",
            json!({"nonResourceAttributes": {"path": "/metrics", "verb": "get"}}),
        ),
        ("neither", json!({})),
        (
            "both",
            json!({"resourceAttributes": {"verb": "get"},
                "nonResourceAttributes": {"path": "/x", "verb": "get"}}),
        ),
        (
            "raw field selector with requirements",
            json!({"resourceAttributes": {"verb": "list", "resource": "pods", "fieldSelector": {
                "rawSelector": "a=b", "requirements": [{"key": "a", "operator": "In", "values": ["b"]}]}}}),
        ),
        (
            "label requirements",
            json!({"resourceAttributes": {"verb": "list", "resource": "pods", "labelSelector": {
                "requirements": [{"key": "-bad", "operator": "Exists", "values": ["x"]},
                    {"key": "a", "operator": "In"}]}}}),
        ),
        (
            "empty field selector",
            json!({"resourceAttributes": {"verb": "list", "resource": "pods", "fieldSelector": {}}}),
        ),
        (
            "unusable selectors",
            json!({"resourceAttributes": {"verb": "list", "resource": "pods",
                "fieldSelector": {"requirements": [{"key": "a", "operator": "Exists"}]},
                "labelSelector": {"rawSelector": "a in (b"}}}),
        ),
    ];
    for (label, spec) in cases {
        let r = t.post(&path, ssar(spec)).await;
        answer(&t, label, &r);
    }
    let r = t
        .post(
            &format!("{path}?dryRun=All"),
            ssar(json!({"nonResourceAttributes": {"path": "/x", "verb": "get"}})),
        )
        .await;
    answer(&t, "dry run", &r);
    let r = t
        .post(
            &path,
            json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                "spec": {"user": "u"}}),
        )
        .await;
    answer(&t, "another kind", &r);
    // The message quotes the metadata, managed fields included (DIFFERENCES.md #8).
    let mut named = ssar(json!({"nonResourceAttributes": {"path": "/x", "verb": "get"}}));
    named["metadata"] = json!({"name": "x"});
    let r = t.post(&path, named).await;
    let fields: Vec<&Value> = r
        .at("/details/causes")
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| &c["field"])
        .collect();
    t.note(
        "named",
        json!({"code": r.code, "reason": r.at("/reason"), "fields": fields}),
    );
    // kubectl auth can-i create pods (v1.32), as protobuf.
    let (code, bytes) = t
        .send_raw(
            Method::POST,
            &path,
            "application/vnd.kubernetes.protobuf",
            Some(&Value::String(protobuf(CAN_I_CREATE_PODS))),
        )
        .await;
    let body: Value = serde_json::from_slice(&bytes).unwrap();
    answer(&t, "protobuf", &Resp { code, body });
}

/// What `kubectl auth can-i create pods` (v1.32) sends.
const CAN_I_CREATE_PODS: &str = "6b 38 73 00 0a 32 0a 17 61 75 74 68 6f 72 69 7a 61 74 69 6f 6e 2e 6b 38 73 2e 69 6f 2f 76 31 12 17 53 65 6c 66 53 75 62 6a 65 63 74 41 63 63 65 73 73 52 65 76 69 65 77 12 3f 0a 10 0a 00 12 00 1a 00 22 00 2a 00 32 00 38 00 42 00 12 21 0a 1f 0a 07 64 65 66 61 75 6c 74 12 06 63 72 65 61 74 65 1a 00 22 00 2a 04 70 6f 64 73 32 00 3a 00 1a 08 08 00 12 00 1a 00 20 00 1a 00 22 00";

/// The bytes of a hex dump (all below 0x80: a string sends them as they are).
fn protobuf(hex: &str) -> String {
    let bytes: Vec<u8> = hex
        .split_whitespace()
        .map(|b| u8::from_str_radix(b, 16).unwrap())
        .collect();
    String::from_utf8(bytes).unwrap()
}

/// SubjectAccessReviews and LocalSubjectAccessReviews of `system:masters` (allowed on both),
/// and refused ones.
pub async fn subject_access_reviews(t: Ctx) {
    let sar = |spec: Value| json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec});
    let path = format!("{V1}/subjectaccessreviews");
    let cases = [
        (
            "group",
            json!({"groups": ["system:masters"], "user": "admin", "extra": {}, "uid": "",
                "resourceAttributes": {"verb": "delete", "resource": "nodes"}}),
        ),
        ("no subject", json!({"resourceAttributes": {"verb": "get"}})),
        ("nothing", json!({})),
    ];
    for (label, spec) in cases {
        let r = t.post(&path, sar(spec)).await;
        answer(&t, label, &r);
    }
    let local_path = format!("{V1}/namespaces/{}/localsubjectaccessreviews", t.ns);
    let local = |meta: Value, spec: Value| {
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "LocalSubjectAccessReview",
            "metadata": meta, "spec": spec})
    };
    let masters = |attrs: Value| json!({"groups": ["system:masters"], "resourceAttributes": attrs});
    let cases = [
        (
            "local",
            local(
                json!({}),
                masters(json!({"verb": "get", "resource": "pods", "namespace": t.ns})),
            ),
        ),
        (
            "local, other namespace in the attributes",
            local(
                json!({}),
                masters(json!({"verb": "get", "resource": "pods", "namespace": "other"})),
            ),
        ),
        (
            "local, no namespace in the attributes",
            local(
                json!({}),
                masters(json!({"verb": "get", "resource": "pods"})),
            ),
        ),
        (
            "local, other namespace in the metadata",
            local(
                json!({"namespace": "other"}),
                masters(json!({"verb": "get", "namespace": "other"})),
            ),
        ),
        (
            "local, non-resource",
            local(
                json!({}),
                json!({"user": "u", "nonResourceAttributes": {"path": "/x", "verb": "get"}}),
            ),
        ),
    ];
    for (label, body) in cases {
        let r = t.post(&local_path, body).await;
        answer(&t, label, &r);
    }
}

/// SelfSubjectRulesReviews, and what is not served: reads, watches, other paths.
pub async fn rules_reviews_and_paths(t: Ctx) {
    let path = format!("{V1}/selfsubjectrulesreviews");
    let rules = |spec: Value| json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview", "spec": spec});
    let r = t.post(&path, rules(json!({"namespace": t.ns}))).await;
    let has = |pointer: &str, rule: Value| {
        r.at(pointer)
            .as_array()
            .is_some_and(|rules| rules.contains(&rule))
    };
    t.note(
        "rules",
        json!({
            "code": r.code,
            "metadata": r.at("/metadata"),
            "spec": r.at("/spec"),
            "incomplete": r.at("/status/incomplete"),
            "every resource": has("/status/resourceRules",
                json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]})),
            "every URL": has("/status/nonResourceRules",
                json!({"verbs": ["*"], "nonResourceURLs": ["*"]})),
        }),
    );
    let r = t.post(&path, rules(json!({}))).await;
    answer(&t, "rules without a namespace", &r);
    let ssar = format!("{V1}/selfsubjectaccessreviews");
    for (method, p) in [
        (Method::GET, ssar.clone()),
        (Method::GET, format!("{ssar}?watch=true")),
        (Method::DELETE, ssar.clone()),
        (Method::PUT, format!("{ssar}/x")),
        (Method::GET, format!("{V1}/watch/selfsubjectaccessreviews")),
        (
            Method::POST,
            format!("{V1}/namespaces/{}/selfsubjectaccessreviews", t.ns),
        ),
        (Method::POST, format!("{V1}/localsubjectaccessreviews")),
        (
            Method::GET,
            format!("{V1}/namespaces/{}/localsubjectaccessreviews", t.ns),
        ),
    ] {
        let label = format!("{method} {}", p.replace(&t.ns, "<ns>"));
        let r = t
            .send(method, &p, "application/json", Some(&json!({})))
            .await;
        t.outcome(&label, &r);
    }
}
