use serde_json::json;

use super::*;
use crate::registry::Registry;

fn post(plural: &str, ns: Option<&str>, body: Value) -> ApiResult<Value> {
    let reg = Registry::with_builtins();
    let def = reg.find(GROUP, "v1", plural).unwrap().clone();
    let ep = Endpoint {
        group: GROUP.into(),
        version: "v1".into(),
        plural: plural.into(),
        namespace: ns.map(str::to_owned),
    };
    let opts = WriteOptions {
        field_manager: Some("test".into()),
        ..WriteOptions::default()
    };
    create(&def, &ep, body, &opts)
}

fn message(e: &ApiError) -> String {
    e.status()["message"].as_str().unwrap().to_owned()
}

#[test]
fn self_subject_access_review_is_allowed_and_echoed() {
    let r = post(
        "selfsubjectaccessreviews",
        None,
        json!({"spec": {"resourceAttributes": {"verb": "create", "resource": "pods",
            "namespace": "default", "group": ""}}}),
    )
    .unwrap();
    assert_eq!(r["apiVersion"], "authorization.k8s.io/v1");
    assert_eq!(r["kind"], "SelfSubjectAccessReview");
    assert_eq!(
        r["spec"],
        json!({"resourceAttributes": {"verb": "create", "resource": "pods", "namespace": "default"}})
    );
    assert_eq!(r["status"], json!({"allowed": true, "reason": REASON}));
    assert_eq!(r["metadata"]["managedFields"][0]["manager"], "test");
}

#[test]
fn attributes_must_be_exactly_one_kind() {
    let e = post("selfsubjectaccessreviews", None, json!({})).unwrap_err();
    assert_eq!(e.code(), 422);
    assert_eq!(
        message(&e),
        ".authorization.k8s.io \"\" is invalid: spec.resourceAttributes: Invalid value: null: exactly one of nonResourceAttributes or resourceAttributes must be specified"
    );
    assert_eq!(
        e.status()["details"],
        json!({"group": "authorization.k8s.io", "causes": [{"reason": "FieldValueInvalid",
            "message": "Invalid value: null: exactly one of nonResourceAttributes or resourceAttributes must be specified",
            "field": "spec.resourceAttributes"}]})
    );
    let e = post(
        "selfsubjectaccessreviews",
        None,
        json!({"spec": {"resourceAttributes": {"verb": "get"},
            "nonResourceAttributes": {"path": "/x", "verb": "get"}}}),
    )
    .unwrap_err();
    assert_eq!(
        message(&e),
        ".authorization.k8s.io \"\" is invalid: spec.nonResourceAttributes: Invalid value: {\"Path\":\"/x\",\"Verb\":\"get\"}: cannot be specified in combination with resourceAttributes"
    );
    let e = post(
        "selfsubjectaccessreviews",
        None,
        json!({"metadata": {"name": "x"}, "spec": {"nonResourceAttributes": {"path": "/x", "verb": "get"}}}),
    )
    .unwrap_err();
    assert!(message(&e).ends_with(": must be empty"), "{}", message(&e));
}

#[test]
fn subject_access_reviews_need_a_subject() {
    let e = post("subjectaccessreviews", None, json!({"spec": {}})).unwrap_err();
    assert_eq!(
        message(&e),
        ".authorization.k8s.io \"\" is invalid: [spec.resourceAttributes: Invalid value: null: exactly one of nonResourceAttributes or resourceAttributes must be specified, spec.user: Invalid value: \"\": at least one of user or group must be specified]"
    );
    let r = post(
        "subjectaccessreviews",
        None,
        json!({"spec": {"groups": ["g"], "nonResourceAttributes": {"path": "/x", "verb": "get"}}}),
    )
    .unwrap();
    assert_eq!(r["status"]["allowed"], true);
}

#[test]
fn local_reviews_stay_in_their_namespace() {
    let body = |attrs_ns: &str| {
        json!({"spec": {"user": "bob", "resourceAttributes": {"verb": "get", "resource": "pods",
            "namespace": attrs_ns}}})
    };
    let r = post("localsubjectaccessreviews", Some("a"), body("a")).unwrap();
    assert_eq!(r["metadata"]["namespace"], "a");
    assert_eq!(r["status"]["allowed"], true);
    let e = post("localsubjectaccessreviews", Some("a"), body("b")).unwrap_err();
    assert_eq!(
        message(&e),
        ".authorization.k8s.io \"\" is invalid: spec.resourceAttributes.namespace: Invalid value: \"b\": must match metadata.namespace"
    );
    let mut other = body("b");
    object::set_meta(&mut other, "namespace", json!("b"));
    let e = post("localsubjectaccessreviews", Some("a"), other).unwrap_err();
    assert_eq!(e.code(), 400);
    let e = post(
        "localsubjectaccessreviews",
        Some("a"),
        json!({"spec": {"user": "bob", "nonResourceAttributes": {"path": "/x", "verb": "get"}}}),
    )
    .unwrap_err();
    assert!(message(&e).ends_with("disallowed on this kind of request"));
}

#[test]
fn rules_reviews_list_everything_in_a_namespace() {
    let r = post(
        "selfsubjectrulesreviews",
        None,
        json!({"spec": {"namespace": "default"}}),
    )
    .unwrap();
    assert_eq!(r["spec"], json!({}));
    assert_eq!(r["status"]["incomplete"], false);
    assert_eq!(
        r["status"]["resourceRules"],
        json!([{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}])
    );
    assert_eq!(
        r["status"]["nonResourceRules"],
        json!([{"verbs": ["*"], "nonResourceURLs": ["*"]}])
    );
    let e = post("selfsubjectrulesreviews", None, json!({"spec": {}})).unwrap_err();
    assert_eq!(
        (e.code(), message(&e)),
        (400, "no namespace on request".into())
    );
}

#[test]
fn bodies_of_another_kind_or_shape_are_bad_requests() {
    let e = post(
        "selfsubjectaccessreviews",
        None,
        json!({"kind": "SubjectAccessReview", "spec": {}}),
    )
    .unwrap_err();
    assert_eq!(
        message(&e),
        "SubjectAccessReview in version \"v1\" cannot be handled as a SelfSubjectAccessReview: converting (v1.SubjectAccessReview) to (authorization.SelfSubjectAccessReview): unknown conversion"
    );
    let e = post(
        "selfsubjectaccessreviews",
        None,
        json!({"spec": {"resourceAttributes": {"verb": 5}}}),
    )
    .unwrap_err();
    assert_eq!(e.code(), 400);
    assert!(
        message(&e).contains("spec.resourceAttributes.verb"),
        "{}",
        message(&e)
    );
}

#[test]
fn selectors_the_authorizer_cannot_use_are_reported() {
    let r = post(
        "selfsubjectaccessreviews",
        None,
        json!({"spec": {"resourceAttributes": {"verb": "list", "resource": "pods",
            "fieldSelector": {"requirements": [{"key": "a", "operator": "Exists"}]}}}}),
    )
    .unwrap();
    assert_eq!(
        r["status"]["evaluationError"],
        "spec.resourceAttributes.fieldSelector ignored due to parse error"
    );
}
