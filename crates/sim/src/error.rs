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
            Self::Internal(_) => 500,
        }
    }

    /// The `Status.reason`.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::NotFound { .. } | Self::NoRoute => "NotFound",
            Self::AlreadyExists { .. } => "AlreadyExists",
            Self::Conflict { .. } => "Conflict",
            Self::Invalid { .. } => "Invalid",
            Self::BadRequest(_) => "BadRequest",
            Self::Forbidden { .. } => "Forbidden",
            Self::MethodNotAllowed => "MethodNotAllowed",
            Self::Expired(_) => "Expired",
            Self::UnsupportedMediaType(_) => "UnsupportedMediaType",
            Self::TooManyRequests { .. } => "TooManyRequests",
            Self::Internal(_) => "InternalError",
        }
    }

    /// The `Status.details`, if this error names an object.
    fn details(&self) -> Option<Value> {
        match self {
            Self::NotFound { resource, name }
            | Self::AlreadyExists { resource, name }
            | Self::Conflict { resource, name, .. }
            | Self::Forbidden { resource, name, .. } => Some(json!({
                "name": name,
                "group": resource.group,
                "kind": resource.resource,
            })),
            Self::Invalid {
                group,
                kind,
                name,
                causes,
            } => Some(json!({
                "name": name,
                "group": group,
                "kind": kind,
                "causes": causes.iter().map(|c| {
                    let (field, message) = c.split_once(": ").unwrap_or(("", c));
                    let field = if field == "<nil>" { "" } else { field };
                    json!({"reason": cause_reason(message), "message": message, "field": field})
                }).collect::<Vec<_>>(),
            })),
            Self::TooManyRequests { causes, .. } => Some(json!({
                "causes": causes.iter().map(|(reason, message)| {
                    json!({"reason": reason, "message": message})
                }).collect::<Vec<_>>(),
            })),
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
        if let (Some(details), Some(obj)) = (self.details(), status.as_object_mut()) {
            obj.insert("details".into(), details);
        }
        status
    }
}

/// `Kind.group`, or `Kind` for the core group, as `schema.GroupKind.String()`.
fn qualified(kind: &str, group: &str) -> String {
    if group.is_empty() {
        kind.to_owned()
    } else {
        format!("{kind}.{group}")
    }
}

/// Causes joined as `ErrorList.ToAggregate().Error()`: bare when one, bracketed when several.
fn aggregate(causes: &[String]) -> String {
    match causes {
        [one] => one.clone(),
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
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {"name": name, "group": resource.group, "kind": resource.resource, "uid": uid},
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
