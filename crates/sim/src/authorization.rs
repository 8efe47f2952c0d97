//! Access reviews: `kubectl auth can-i` and `kubectl auth whoami`.
//!
//! Responsibility: answer the create-only review kinds — `SelfSubjectAccessReview`,
//! `SubjectAccessReview`, `LocalSubjectAccessReview`, `SelfSubjectRulesReview`
//! (`authorization.k8s.io/v1`) and `SelfSubjectReview` (`authentication.k8s.io/v1`) — the way
//! kube-apiserver does (the request echoed with a `status`, nothing stored). The server has no
//! authentication or authorization, so every request is allowed, and the answers say so:
//! access reviews are `allowed` with a reason naming the simulator, rules reviews list `*` for
//! every verb, group, resource and non-resource URL, and the reviewed user is an administrator
//! (`system:admin` in `system:masters`).
//! Inputs: the resource definition and the request body. Outputs: the answered object.

use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult};
use crate::object;
use crate::registry::ResourceDef;

/// Why everything is allowed.
pub const REASON: &str = "sim has no authorization: every request is allowed";

/// The answer to a review `body` of the kind `def` serves.
pub fn review(def: &ResourceDef, namespace: Option<&str>, mut body: Value) -> ApiResult<Value> {
    let status = match def.kind.as_str() {
        "SelfSubjectAccessReview" | "SubjectAccessReview" | "LocalSubjectAccessReview" => {
            let spec = body.get("spec").cloned().unwrap_or(json!({}));
            if spec.get("resourceAttributes").is_some()
                == spec.get("nonResourceAttributes").is_some()
            {
                return Err(ApiError::invalid(
                    &def.kind,
                    &def.group,
                    "",
                    "spec.resourceAttributes: Invalid value: \"null\": exactly one of nonResourceAttributes or resourceAttributes must be specified",
                ));
            }
            if let (Some(ns), Some(attrs_ns)) = (
                namespace,
                object::get_path(&spec, ".resourceAttributes.namespace").and_then(Value::as_str),
            ) && ns != attrs_ns
            {
                return Err(ApiError::BadRequest(format!(
                    "spec.resourceAttributes.namespace must match namespace: {ns}"
                )));
            }
            json!({"allowed": true, "reason": REASON})
        }
        "SelfSubjectRulesReview" => json!({
            "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
            "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
            "incomplete": false,
            "evaluationError": REASON,
        }),
        "SelfSubjectReview" => json!({"userInfo": {
            "username": "system:admin",
            "groups": ["system:masters", "system:authenticated"],
        }}),
        _ => return Err(ApiError::MethodNotAllowed),
    };
    let map = object::as_map(&mut body);
    map.insert(
        "apiVersion".into(),
        json!(def.api_version(def.preferred_version())),
    );
    map.insert("kind".into(), json!(def.kind));
    let meta = map.entry("metadata").or_insert_with(|| json!({}));
    if let Some(m) = meta.as_object_mut() {
        m.insert("creationTimestamp".into(), Value::Null);
    }
    map.insert("status".into(), status);
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;

    fn def(plural: &str) -> ResourceDef {
        let reg = Registry::with_builtins();
        reg.iter().find(|d| d.plural == plural).unwrap().clone()
    }

    #[test]
    fn everything_is_allowed_and_says_why() {
        let body = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {"verb": "create", "resource": "pods", "namespace": "default"}}});
        let out = review(&def("selfsubjectaccessreviews"), None, body).unwrap();
        assert_eq!(out["status"]["allowed"], true);
        assert_eq!(out["status"]["reason"], REASON);
        assert_eq!(out["spec"]["resourceAttributes"]["verb"], "create");
    }

    #[test]
    fn access_reviews_need_exactly_one_kind_of_attributes() {
        let body = json!({"spec": {}});
        let e = review(&def("selfsubjectaccessreviews"), None, body).unwrap_err();
        assert_eq!(e.code(), 422);
    }

    #[test]
    fn rules_and_whoami() {
        let out = review(
            &def("selfsubjectrulesreviews"),
            None,
            json!({"spec": {"namespace": "default"}}),
        )
        .unwrap();
        assert_eq!(out["status"]["resourceRules"][0]["verbs"], json!(["*"]));
        let me = review(&def("selfsubjectreviews"), None, json!({})).unwrap();
        assert_eq!(me["status"]["userInfo"]["groups"][0], "system:masters");
    }
}
