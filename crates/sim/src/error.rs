//! API errors and their `Status` representation.
//!
//! Responsibility: the one error type every API operation returns, and its mapping onto the
//! `metav1.Status` objects and HTTP codes kube-apiserver uses (same `reason`, `code`, message
//! wording and `details`).
//! Inputs: what went wrong (resource, name, message). Outputs: [`ApiError::code`] and
//! [`ApiError::status`] (a `Status` JSON object).

use std::fmt;

use serde_json::{Value, json};

/// A resource qualified by its API group, as kube-apiserver prints it in messages: `pods`,
/// `deployments.apps`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupResource {
    /// The API group, `""` for the core group.
    pub group: String,
    /// The plural resource name.
    pub resource: String,
}

impl GroupResource {
    /// A group and resource.
    pub fn new(group: impl Into<String>, resource: impl Into<String>) -> Self {
        Self {
            group: group.into(),
            resource: resource.into(),
        }
    }
}

impl fmt::Display for GroupResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            f.write_str(&self.resource)
        } else {
            write!(f, "{}.{}", self.resource, self.group)
        }
    }
}

/// An error of the API, as kube-apiserver would report it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ApiError {
    /// 404: the object does not exist.
    #[error("{resource} \"{name}\" not found")]
    NotFound {
        /// What kind of object.
        resource: GroupResource,
        /// Its name.
        name: String,
    },
    /// 404: no such path or resource type.
    #[error("the server could not find the requested resource")]
    NoRoute,
    /// 409: create of an object that exists.
    #[error("{resource} \"{name}\" already exists")]
    AlreadyExists {
        /// What kind of object.
        resource: GroupResource,
        /// Its name.
        name: String,
    },
    /// 409: stale resourceVersion, failed precondition, or another write conflict.
    #[error("Operation cannot be fulfilled on {resource} \"{name}\": {why}")]
    Conflict {
        /// What kind of object.
        resource: GroupResource,
        /// Its name.
        name: String,
        /// The conflict.
        why: String,
    },
    /// 422: the object is invalid.
    #[error(
        "{} \"{name}\" is invalid: {}",
        qualified(kind, group),
        aggregate(causes)
    )]
    Invalid {
        /// The object's group.
        group: String,
        /// The object's kind.
        kind: String,
        /// Its name.
        name: String,
        /// Each invalid field, as `field: problem`.
        causes: Vec<String>,
    },
    /// 400: the request is malformed.
    #[error("{0}")]
    BadRequest(String),
    /// 403: the request is refused.
    #[error("{resource} \"{name}\" is forbidden: {why}")]
    Forbidden {
        /// What kind of object.
        resource: GroupResource,
        /// Its name.
        name: String,
        /// Why.
        why: String,
    },
    /// 405: the verb is not supported on this resource.
    #[error("the server does not allow this method on the requested resource")]
    MethodNotAllowed,
    /// 410: the requested resourceVersion is older than the retained history.
    #[error("{0}")]
    Expired(String),
    /// 415: unsupported body type.
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// 429: the request is refused for now (e.g. an eviction a disruption budget forbids).
    #[error("{message}")]
    TooManyRequests {
        /// The message.
        message: String,
        /// `(reason, message)` causes.
        causes: Vec<(String, String)>,
    },
    /// 500: a bug in the simulator.
    #[error("Internal error occurred: {0}")]
    Internal(String),
    /// 500 without a reason: a plain error kube-apiserver did not classify (a create with a
    /// resourceVersion, an unparsable watch resourceVersion).
    #[error("{0}")]
    Unclassified(String),
    /// 422 with kube-apiserver's generic message and empty details: a JSON patch that does
    /// not apply (a failing `test`, a missing path, an unknown operation).
    #[error("the server rejected our request due to an error in our request")]
    Rejected,
    /// 409: server-side apply conflicts, one `(manager, field)` per conflicting field; the
    /// manager as kube-apiserver prints it (`"name"`, `"name" using v1`).
    #[error("{}", apply_conflict_message(.0))]
    ApplyConflict(Vec<(String, String)>),
}

impl ApiError {
    /// A 422 for one field.
    pub fn invalid(kind: &str, group: &str, name: &str, cause: impl Into<String>) -> Self {
        Self::Invalid {
            group: group.to_owned(),
            kind: kind.to_owned(),
            name: name.to_owned(),
            causes: vec![cause.into()],
        }
    }

    /// The HTTP status code.
    pub fn code(&self) -> u16 {
        match self {
            Self::NotFound { .. } | Self::NoRoute => 404,
            Self::AlreadyExists { .. } | Self::Conflict { .. } => 409,
            Self::Invalid { .. } => 422,
            Self::BadRequest(_) => 400,
            Self::Forbidden { .. } => 403,
            Self::MethodNotAllowed => 405,
            Self::Expired(_) => 410,
            Self::UnsupportedMediaType(_) => 415,
            Self::TooManyRequests { .. } => 429,
            Self::Internal(_) | Self::Unclassified(_) => 500,
            Self::Rejected => 422,
            Self::ApplyConflict(_) => 409,
        }
    }

    /// The `Status.reason` (`""` when kube-apiserver sends none).
    pub fn reason(&self) -> &'static str {
        match self {
            Self::NotFound { .. } | Self::NoRoute => "NotFound",
            Self::AlreadyExists { .. } => "AlreadyExists",
            Self::Conflict { .. } | Self::ApplyConflict(_) => "Conflict",
            Self::Invalid { .. } | Self::Rejected => "Invalid",
            Self::Unclassified(_) => "",
            Self::BadRequest(_) => "BadRequest",
            Self::Forbidden { .. } => "Forbidden",
            Self::MethodNotAllowed => "MethodNotAllowed",
            Self::Expired(_) => "Expired",
            Self::UnsupportedMediaType(_) => "UnsupportedMediaType",
            Self::TooManyRequests { .. } => "TooManyRequests",
            Self::Internal(_) => "InternalError",
        }
    }

    /// The `Status.details`, if this error names an object. Empty `group`, `kind` and `name`
    /// are left out, as Go's `omitempty` does.
    fn details(&self) -> Option<Value> {
        let named = |group: &str, kind: &str, name: &str| {
            let mut d = serde_json::Map::new();
            if !name.is_empty() {
                d.insert("name".into(), json!(name));
            }
            if !group.is_empty() {
                d.insert("group".into(), json!(group));
            }
            if !kind.is_empty() {
                d.insert("kind".into(), json!(kind));
            }
            d
        };
        match self {
            Self::NotFound { resource, name }
            | Self::AlreadyExists { resource, name }
            | Self::Conflict { resource, name, .. }
            | Self::Forbidden { resource, name, .. } => Some(Value::Object(named(
                &resource.group,
                &resource.resource,
                name,
            ))),
            Self::Invalid {
                group,
                kind,
                name,
                causes,
            } => {
                let mut d = named(group, kind, name);
                d.insert(
                    "causes".into(),
                    causes
                        .iter()
                        .map(|c| {
                            let (field, message) = c.split_once(": ").unwrap_or(("", c));
                            let mut cause =
                                json!({"reason": cause_reason(message), "message": message});
                            if !field.is_empty() {
                                object_insert(&mut cause, "field", json!(field));
                            }
                            cause
                        })
                        .collect(),
                );
                Some(Value::Object(d))
            }
            Self::TooManyRequests { causes, .. } => Some(json!({
                "causes": causes.iter().map(|(reason, message)| {
                    json!({"reason": reason, "message": message})
                }).collect::<Vec<_>>(),
            })),
            Self::ApplyConflict(conflicts) => Some(json!({
                "causes": conflicts.iter().map(|(manager, field)| json!({
                    "reason": "FieldManagerConflict",
                    "message": format!("conflict with {manager}"),
                    "field": field,
                })).collect::<Vec<_>>(),
            })),
            Self::NoRoute | Self::Rejected => Some(json!({})),
            Self::Internal(message) => Some(json!({"causes": [{"message": message}]})),
            _ => None,
        }
    }

    /// The error as a `Status` object.
    pub fn status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.to_string(),
            "reason": self.reason(),
            "code": self.code(),
        });
        if let Some(obj) = status.as_object_mut() {
            if let Some(details) = self.details() {
                obj.insert("details".into(), details);
            }
            if self.reason().is_empty() {
                obj.remove("reason");
            }
        }
        status
    }
}

fn object_insert(v: &mut Value, key: &str, value: Value) {
    if let Some(m) = v.as_object_mut() {
        m.insert(key.to_owned(), value);
    }
}

/// `Apply failed with N conflict(s): ...`, as kube-apiserver's `getConflictMessage`: one
/// conflict inline; several grouped by manager (managers sorted), one `- <field>` line each.
/// Managers are already printed (`"name"`, or `"name" using v1` for updaters).
fn apply_conflict_message(conflicts: &[(String, String)]) -> String {
    if let [(manager, field)] = conflicts {
        return format!("Apply failed with 1 conflict: conflict with {manager}: {field}");
    }
    let mut managers: Vec<&str> = conflicts.iter().map(|(m, _)| m.as_str()).collect();
    managers.sort_unstable();
    managers.dedup();
    let mut lines = Vec::new();
    for manager in managers {
        lines.push(format!("conflicts with {manager}:"));
        for (m, field) in conflicts {
            if m == manager {
                lines.push(format!("- {field}"));
            }
        }
    }
    format!(
        "Apply failed with {} conflicts: {}",
        conflicts.len(),
        lines.join("\n")
    )
}

/// `Kind.group`, or `Kind` for the core group, as `schema.GroupKind.String()`.
fn qualified(kind: &str, group: &str) -> String {
    if group.is_empty() {
        kind.to_owned()
    } else {
        format!("{kind}.{group}")
    }
}

/// Causes joined as `ErrorList.ToAggregate().Error()`: duplicates once, bare when one,
/// bracketed when several.
fn aggregate(causes: &[String]) -> String {
    let mut unique: Vec<&str> = Vec::new();
    for c in causes {
        if !unique.contains(&c.as_str()) {
            unique.push(c);
        }
    }
    match unique.as_slice() {
        [one] => (*one).to_owned(),
        many => format!("[{}]", many.join(", ")),
    }
}

/// The `StatusCause.reason` of a field error, from its rendered body (`field.ErrorType`).
fn cause_reason(message: &str) -> &'static str {
    const PREFIXES: [(&str, &str); 8] = [
        ("Required value", "FieldValueRequired"),
        ("Unsupported value", "FieldValueNotSupported"),
        ("Duplicate value", "FieldValueDuplicate"),
        ("Forbidden", "FieldValueForbidden"),
        ("Too long", "FieldValueTooLong"),
        ("Too many", "FieldValueTooMany"),
        ("Not found", "FieldValueNotFound"),
        ("Internal error", "InternalError"),
    ];
    if let Some((_, reason)) = PREFIXES.iter().find(|(p, _)| message.starts_with(p)) {
        return reason;
    }
    if message.starts_with("Invalid value") && message.contains(" in body must be of type ") {
        return "FieldValueTypeInvalid";
    }
    "FieldValueInvalid"
}

/// A `Status` of success, as returned by deletes of objects that are gone at once.
pub fn success_status(resource: &GroupResource, name: &str, uid: &str) -> Value {
    let mut details = json!({"name": name, "kind": resource.resource, "uid": uid});
    if !resource.group.is_empty() {
        object_insert(&mut details, "group", json!(resource.group));
    }
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": details,
    })
}

/// Result of an API operation.
pub type ApiResult<T> = Result<T, ApiError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_status_matches_apiserver() {
        let err = ApiError::NotFound {
            resource: GroupResource::new("apps", "deployments"),
            name: "web".into(),
        };
        let status = err.status();
        assert_eq!(status["message"], "deployments.apps \"web\" not found");
        assert_eq!(status["code"], 404);
        assert_eq!(status["reason"], "NotFound");
        assert_eq!(status["details"]["kind"], "deployments");
        assert_eq!(status["details"]["group"], "apps");
    }

    #[test]
    fn invalid_lists_causes() {
        let err = ApiError::invalid("Pod", "", "p", "metadata.name: Required value");
        assert_eq!(err.code(), 422);
        assert_eq!(
            err.status()["message"],
            "Pod \"p\" is invalid: metadata.name: Required value"
        );
        assert_eq!(
            err.status()["details"]["causes"][0]["field"],
            "metadata.name"
        );
    }
}
