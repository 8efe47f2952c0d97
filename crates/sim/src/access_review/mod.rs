//! `authorization.k8s.io/v1` access reviews: SelfSubjectAccessReview, SubjectAccessReview,
//! LocalSubjectAccessReview and SelfSubjectRulesReview.
//!
//! Responsibility: answer the POST of a review as kube-apiserver's review storage does, for a
//! server without authorization: every request is allowed. The review comes back (201) with
//! its `status` set — `allowed: true` and [`REASON`]; for a SelfSubjectRulesReview, `*` rules —
//! and nothing is stored (so a dry run answers the same). Checked in kube-apiserver's order:
//! the body's apiVersion, kind and namespace ([`crate::semantics`], 400); that it decodes as
//! its kind (400); the kind's validation, a 422 whose kind is left empty as kube-apiserver
//! leaves it (`.authorization.k8s.io "" is invalid: …`): exactly one of `resourceAttributes`
//! and `nonResourceAttributes`, a user or groups for (Local)SubjectAccessReviews, the selector
//! attributes ([`attributes`]), an empty `metadata` — but a LocalSubjectAccessReview's
//! namespace, which `resourceAttributes.namespace` must equal, and which takes no
//! `nonResourceAttributes`. A SelfSubjectRulesReview needs `spec.namespace` (400) and answers
//! with a new object (`metadata` and `spec` empty), as kube-apiserver does.
//! Inputs: the resource definition, the request's endpoint, the JSON body ([`crate::protobuf`]
//! decodes protobuf bodies first), the write options (the managed-fields manager). Outputs: the
//! answered review, or an [`ApiError`].

pub mod attributes;

use k8s_openapi::api::authorization::v1 as authz;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult};
use crate::managed::{self, Part};
use crate::object;
use crate::options::WriteOptions;
use crate::registry::ResourceDef;
use crate::semantics;
use crate::state::Endpoint;

/// The `status.reason` of every access review sim answers.
pub const REASON: &str = "sim has no authorization: every request is allowed";

const GROUP: &str = "authorization.k8s.io";

/// POST of a review to `ep`.
pub fn create(
    def: &ResourceDef,
    ep: &Endpoint,
    mut body: Value,
    opts: &WriteOptions,
) -> ApiResult<Value> {
    semantics::check_type(def, &ep.version, &mut body)?;
    semantics::check_namespace(def, ep.namespace.as_deref(), &mut body)?;
    if body.get("spec").is_none_or(Value::is_null) {
        object::as_map(&mut body).insert("spec".into(), json!({}));
    }
    match def.kind.as_str() {
        "SelfSubjectAccessReview" => {
            let review: authz::SelfSubjectAccessReview = decode(def, &body)?;
            let (res, non) = (
                review.spec.resource_attributes.as_ref(),
                review.spec.non_resource_attributes.as_ref(),
            );
            let mut causes = spec_causes(res, non, None);
            causes.extend(metadata_causes(&review.metadata, false));
            answer(
                &review,
                res.and_then(attributes::evaluation_error),
                causes,
                opts,
            )
        }
        "SubjectAccessReview" => {
            let review: authz::SubjectAccessReview = decode(def, &body)?;
            let spec = &review.spec;
            let (res, non) = (
                spec.resource_attributes.as_ref(),
                spec.non_resource_attributes.as_ref(),
            );
            let mut causes = spec_causes(res, non, Some(spec));
            causes.extend(metadata_causes(&review.metadata, false));
            answer(
                &review,
                res.and_then(attributes::evaluation_error),
                causes,
                opts,
            )
        }
        "LocalSubjectAccessReview" => {
            let review: authz::LocalSubjectAccessReview = decode(def, &body)?;
            let spec = &review.spec;
            let (res, non) = (
                spec.resource_attributes.as_ref(),
                spec.non_resource_attributes.as_ref(),
            );
            let mut causes = spec_causes(res, non, Some(spec));
            causes.extend(metadata_causes(&review.metadata, true));
            let ns = review.metadata.namespace.as_deref().unwrap_or_default();
            if let Some(attrs) = res {
                let attrs_ns = attrs.namespace.as_deref().unwrap_or_default();
                if attrs_ns != ns {
                    causes.push(format!(
                        "spec.resourceAttributes.namespace: Invalid value: {attrs_ns:?}: must match metadata.namespace"
                    ));
                }
            }
            if let Some(n) = non {
                causes.push(format!(
                    "spec.nonResourceAttributes: Invalid value: {}: disallowed on this kind of request",
                    go_non_resource(n)
                ));
            }
            answer(
                &review,
                res.and_then(attributes::evaluation_error),
                causes,
                opts,
            )
        }
        "SelfSubjectRulesReview" => {
            let review: authz::SelfSubjectRulesReview = decode(def, &body)?;
            if review
                .spec
                .namespace
                .as_deref()
                .unwrap_or_default()
                .is_empty()
            {
                return Err(ApiError::BadRequest("no namespace on request".into()));
            }
            Ok(json!({
                "apiVersion": def.api_version(&ep.version),
                "kind": def.kind,
                "metadata": {},
                "spec": {},
                "status": {
                    "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
                    "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
                    "incomplete": false,
                },
            }))
        }
        _ => Err(ApiError::NoRoute),
    }
}

/// The body as its kind, or the 400 kube-apiserver's decoder gives.
fn decode<T: DeserializeOwned>(def: &ResourceDef, body: &Value) -> ApiResult<T> {
    serde_path_to_error::deserialize(body).map_err(|e| {
        ApiError::BadRequest(format!(
            "{0} in version \"v1\" cannot be handled as a {0}: {1}: {2}",
            def.kind,
            e.path(),
            e.inner()
        ))
    })
}

/// `ValidateSubjectAccessReviewSpec` (with `subject`) or `ValidateSelfSubjectAccessReviewSpec`.
fn spec_causes(
    res: Option<&authz::ResourceAttributes>,
    non: Option<&authz::NonResourceAttributes>,
    subject: Option<&authz::SubjectAccessReviewSpec>,
) -> Vec<String> {
    let mut causes = Vec::new();
    match (res, non) {
        (Some(_), Some(n)) => causes.push(format!(
            "spec.nonResourceAttributes: Invalid value: {}: cannot be specified in combination with resourceAttributes",
            go_non_resource(n)
        )),
        (None, None) => causes.push(
            "spec.resourceAttributes: Invalid value: null: exactly one of nonResourceAttributes or resourceAttributes must be specified"
                .into(),
        ),
        _ => {}
    }
    if let Some(spec) = subject {
        let user = spec.user.as_deref().unwrap_or_default();
        if user.is_empty() && spec.groups.as_ref().is_none_or(Vec::is_empty) {
            causes.push(format!(
                "spec.user: Invalid value: {user:?}: at least one of user or group must be specified"
            ));
        }
    }
    causes.extend(res.map(attributes::causes).unwrap_or_default());
    causes
}

/// `NonResourceAttributes` as kube-apiserver prints it: its internal Go struct, without JSON
/// names.
fn go_non_resource(n: &authz::NonResourceAttributes) -> String {
    json!({
        "Path": n.path.as_deref().unwrap_or_default(),
        "Verb": n.verb.as_deref().unwrap_or_default(),
    })
    .to_string()
}

/// The review's `metadata` must be empty (but a LocalSubjectAccessReview's namespace).
fn metadata_causes(meta: &ObjectMeta, namespace_allowed: bool) -> Vec<String> {
    let mut rest = meta.clone();
    rest.managed_fields = None;
    if namespace_allowed {
        rest.namespace = None;
    }
    if rest == ObjectMeta::default() {
        return Vec::new();
    }
    let shown = serde_json::to_string(meta).unwrap_or_default();
    let must = if namespace_allowed {
        "must be empty except for namespace"
    } else {
        "must be empty"
    };
    vec![format!("metadata: Invalid value: {shown}: {must}")]
}

/// The review with its status, or the 422 of its causes.
fn answer<T: Serialize>(
    review: T,
    evaluation_error: Option<String>,
    causes: Vec<String>,
    opts: &WriteOptions,
) -> ApiResult<Value> {
    if !causes.is_empty() {
        return Err(ApiError::Invalid {
            group: GROUP.into(),
            kind: String::new(),
            name: String::new(),
            causes,
        });
    }
    let mut obj = serde_json::to_value(review).map_err(|e| ApiError::Internal(e.to_string()))?;
    if let Some(spec) = obj.get_mut("spec") {
        omit_empty(spec);
    }
    object::as_map(&mut obj).remove("status");
    // kube-apiserver's field manager records the request before the review is answered.
    managed::record_update(None, &mut obj, &opts.manager(), Part::All);
    let mut status = json!({"allowed": true, "reason": REASON});
    if let Some(e) = evaluation_error {
        object::as_map(&mut status).insert("evaluationError".into(), json!(e));
    }
    object::as_map(&mut obj).insert("status".into(), status);
    Ok(obj)
}

/// Drop empty strings, lists and the `extra` map below objects, as Go's `omitempty` encodes
/// the spec (empty sub-objects are non-nil pointers, and stay).
fn omit_empty(v: &mut Value) {
    if let Value::Object(m) = v {
        m.retain(|key, child| {
            omit_empty(child);
            let empty = match child {
                Value::String(s) => s.is_empty(),
                Value::Array(a) => a.is_empty(),
                Value::Object(m) => key == "extra" && m.is_empty(),
                Value::Null => true,
                Value::Bool(_) | Value::Number(_) => false,
            };
            !empty
        });
    } else if let Value::Array(items) = v {
        items.iter_mut().for_each(omit_empty);
    }
}

#[cfg(test)]
mod tests;
