//! Write semantics of kube-apiserver's generic registry.
//!
//! Responsibility: turn a create, update or delete request into the object to store, as the
//! generic registry and the built-in strategies do: system metadata (uid, creationTimestamp,
//! generation), name validation, optimistic concurrency on `metadata.resourceVersion`, status
//! subresource rules, and the few defaults built-in kinds get on create (deletes are planned in
//! [`crate::deletion`]).
//! Inputs: the resource type, the stored object (if any), the request body. Outputs: the object
//! to write, or an [`ApiError`]. Pure: no storage, no I/O.

use serde_json::{Map, Value, json};

use crate::error::{ApiError, ApiResult};
use crate::object::{self, as_map, now_rfc3339};
use crate::registry::{ResourceDef, Special};

/// Which part of the object a write changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteMode {
    /// The main resource: everything but `.status` (when there is a status subresource).
    Main,
    /// The `status` subresource: only `.status`.
    Status,
}

/// Whether `s` is a DNS-1123 label (namespaces), length aside.
fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && s.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && s.chars().last().is_some_and(|c| c.is_ascii_alphanumeric())
}

/// Whether `s` is a DNS-1123 subdomain (most names), length aside.
fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty() && s.split('.').all(is_dns_label)
}

const SUBDOMAIN_MESSAGE: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const LABEL_MESSAGE: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

/// What is wrong with a name (or, with `prefix`, a `generateName`) of this resource type, as
/// kube-apiserver's `NameIsDNSSubdomain`/`NameIsDNSLabel` say it: one message per problem.
pub fn name_messages(def: &ResourceDef, name: &str, prefix: bool) -> Vec<String> {
    // A generateName may end in '-': the generated suffix follows (`maskTrailingDash`).
    let masked;
    let checked = if prefix && name.len() > 1 && name.ends_with('-') {
        masked = format!("{}a", name.get(..name.len() - 2).unwrap_or_default());
        masked.as_str()
    } else {
        name
    };
    let mut out = Vec::new();
    if def.special == Special::Namespace {
        if checked.len() > 63 {
            out.push("must be no more than 63 characters".to_owned());
        }
        if !is_dns_label(checked) {
            out.push(LABEL_MESSAGE.to_owned());
        }
    } else {
        if checked.len() > 253 {
            out.push("must be no more than 253 characters".to_owned());
        }
        if !is_dns_subdomain(checked) {
            out.push(SUBDOMAIN_MESSAGE.to_owned());
        }
    }
    out
}

/// Validate the name (and `generateName`) of an object to create, as `ValidateObjectMeta`.
pub fn validate_name(def: &ResourceDef, obj: &Value) -> ApiResult<()> {
    let name = object::name(obj);
    let mut causes = Vec::new();
    if let Some(prefix) = object::meta_str(obj, "generateName").filter(|g| !g.is_empty()) {
        for m in name_messages(def, prefix, true) {
            causes.push(format!(
                "metadata.generateName: Invalid value: {prefix:?}: {m}"
            ));
        }
    }
    if name.is_empty() {
        causes.push("metadata.name: Required value: name or generateName is required".to_owned());
    } else {
        for m in name_messages(def, name, false) {
            causes.push(format!("metadata.name: Invalid value: {name:?}: {m}"));
        }
    }
    if causes.is_empty() {
        return Ok(());
    }
    Err(ApiError::Invalid {
        group: def.group.clone(),
        kind: def.kind.clone(),
        name: name.to_owned(),
        causes,
    })
}

/// Check the body's `apiVersion` and `kind` (if given) against the endpoint and set them.
pub fn check_type(def: &ResourceDef, version: &str, obj: &mut Value) -> ApiResult<()> {
    if !obj.is_object() {
        return Err(ApiError::BadRequest(
            "the body of the request must be a JSON object".into(),
        ));
    }
    let expected = def.api_version(version);
    let map = as_map(obj);
    if let Some(av) = map.get("apiVersion").and_then(Value::as_str)
        && !av.is_empty()
        && av != expected
    {
        return Err(ApiError::BadRequest(format!(
            "the API version in the data ({av}) does not match the expected API version ({expected})"
        )));
    }
    if let Some(kind) = map.get("kind").and_then(Value::as_str)
        && !kind.is_empty()
        && kind != def.kind
    {
        if def.custom {
            return Err(ApiError::BadRequest(format!(
                "the kind in the data ({kind}) does not match the expected kind ({})",
                def.kind
            )));
        }
        // Built-in kinds are decoded into the endpoint's internal type, which fails so.
        let internal = match def.group.split('.').next().unwrap_or_default() {
            "" => "core",
            g => g,
        };
        return Err(ApiError::BadRequest(format!(
            "{kind} in version {version:?} cannot be handled as a {0}: converting ({version}.{kind}) to ({internal}.{0}): unknown conversion",
            def.kind
        )));
    }
    map.insert("apiVersion".into(), json!(expected));
    map.insert("kind".into(), json!(def.kind));
    Ok(())
}

/// Check and set the object's namespace against the request's.
pub fn check_namespace(def: &ResourceDef, url_ns: Option<&str>, obj: &mut Value) -> ApiResult<()> {
    if !def.namespaced {
        object::set_meta(obj, "namespace", Value::Null);
        return Ok(());
    }
    let url_ns = url_ns.unwrap_or_default();
    let body_ns = object::namespace(obj);
    if !body_ns.is_empty() && body_ns != url_ns {
        return Err(ApiError::BadRequest(
            "the namespace of the provided object does not match the namespace sent on the request"
                .into(),
        ));
    }
    if url_ns.is_empty() {
        return Err(ApiError::BadRequest(
            "a namespace is required for namespaced resources".into(),
        ));
    }
    object::set_meta(obj, "namespace", json!(url_ns));
    Ok(())
}

/// The object to store for a create. The name (or generated name) must already be set.
pub fn prepare_create(def: &ResourceDef, mut obj: Value) -> ApiResult<Value> {
    validate_name(def, &obj)?;
    if !object::resource_version(&obj).is_empty() {
        return Err(ApiError::Unclassified(
            "resourceVersion should not be set on objects to be created".into(),
        ));
    }
    let now = now_rfc3339();
    let meta = object::metadata_mut(&mut obj);
    for f in [
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
        "selfLink",
    ] {
        meta.remove(f);
    }
    meta.insert("uid".into(), json!(object::new_uid()));
    meta.insert("creationTimestamp".into(), json!(now));
    drop_empty(
        meta,
        &["labels", "annotations", "finalizers", "ownerReferences"],
    );
    if def.generation {
        meta.insert("generation".into(), json!(1));
    }
    if def.reset_status_on_create
        && let Value::Object(m) = &mut obj
    {
        m.remove("status");
    }
    apply_defaults(def, &mut obj);
    Ok(obj)
}

/// Defaults the built-in kinds get on create (a small subset of kube-apiserver's defaulting).
fn apply_defaults(def: &ResourceDef, obj: &mut Value) {
    match def.special {
        Special::Pod => {
            let spec = as_map(as_map(obj).entry("spec").or_insert_with(|| json!({})));
            for (k, v) in [
                ("schedulerName", json!("default-scheduler")),
                ("restartPolicy", json!("Always")),
                ("dnsPolicy", json!("ClusterFirst")),
                ("terminationGracePeriodSeconds", json!(30)),
                ("priority", json!(0)),
                ("enableServiceLinks", json!(true)),
            ] {
                spec.entry(k).or_insert(v);
            }
            // The DefaultTolerationSeconds admission plugin.
            let tolerations = spec.entry("tolerations").or_insert_with(|| json!([]));
            if let Value::Array(list) = tolerations {
                for key in [
                    "node.kubernetes.io/not-ready",
                    "node.kubernetes.io/unreachable",
                ] {
                    let present = list.iter().any(|t| {
                        t.get("key").and_then(Value::as_str) == Some(key)
                            || (t.get("operator").and_then(Value::as_str) == Some("Exists")
                                && t.get("key").is_none())
                    });
                    if !present {
                        list.push(json!({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}));
                    }
                }
            }
            as_map(obj).insert(
                "status".into(),
                json!({"phase": "Pending", "qosClass": "BestEffort"}),
            );
        }
        Special::Namespace => {
            let root = as_map(obj);
            let spec = as_map(root.entry("spec").or_insert_with(|| json!({})));
            spec.insert("finalizers".into(), json!(["kubernetes"]));
            root.insert("status".into(), json!({"phase": "Active"}));
            let name = object::name(obj).to_owned();
            let meta = object::metadata_mut(obj);
            let labels = as_map(meta.entry("labels").or_insert_with(|| json!({})));
            labels.insert("kubernetes.io/metadata.name".into(), json!(name));
        }
        Special::None | Special::Crd | Special::AccessReview => {}
    }
    if def.scale.as_ref().is_some_and(|s| s.selector_from_spec) {
        let spec = as_map(as_map(obj).entry("spec").or_insert_with(|| json!({})));
        spec.entry("replicas").or_insert(json!(1));
    }
}

/// Check an update body's `metadata.resourceVersion` (if set) against the stored object.
pub fn check_resource_version(def: &ResourceDef, old: &Value, new: &Value) -> ApiResult<()> {
    let want = object::resource_version(new);
    if !want.is_empty() && want != object::resource_version(old) {
        return Err(conflict(def, object::name(old)));
    }
    Ok(())
}

/// The 409 for a stale resourceVersion.
pub fn conflict(def: &ResourceDef, name: &str) -> ApiError {
    ApiError::Conflict {
        resource: def.group_resource(),
        name: name.to_owned(),
        why: "the object has been modified; please apply your changes to the latest version and try again".into(),
    }
}

/// The object to store for an update of `old` with `new` (whose resourceVersion was checked).
/// Equal to `old` when nothing changes.
pub fn prepare_update(
    def: &ResourceDef,
    old: &Value,
    new: Value,
    mode: WriteMode,
) -> ApiResult<Value> {
    let mut out = match mode {
        WriteMode::Main => {
            let mut n = new;
            if def.status {
                set_or_remove(&mut n, "status", old.get("status").cloned());
            }
            n
        }
        WriteMode::Status => {
            // The old object but its status (not copied only to be replaced), and the new
            // status (moved, not copied).
            let mut new = new;
            let status = new.as_object_mut().and_then(|m| m.remove("status"));
            let mut n = match old {
                Value::Object(m) => Value::Object(
                    m.iter()
                        .filter(|(k, _)| k.as_str() != "status")
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect(),
                ),
                other => other.clone(),
            };
            set_or_remove(&mut n, "status", status);
            n
        }
    };
    for f in ["apiVersion", "kind"] {
        set_or_remove(&mut out, f, old.get(f).cloned());
    }
    let no_meta = serde_json::Map::new();
    let old_meta = old
        .get("metadata")
        .and_then(Value::as_object)
        .unwrap_or(&no_meta);
    let meta = object::metadata_mut(&mut out);
    for f in [
        "name",
        "namespace",
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
        "resourceVersion",
    ] {
        match old_meta.get(f) {
            Some(v) => meta.insert(f.to_owned(), v.clone()),
            None => meta.remove(f),
        };
    }
    meta.remove("selfLink");
    if !meta.contains_key("managedFields")
        && let Some(m) = old_meta.get("managedFields")
    {
        meta.insert("managedFields".into(), m.clone());
    }
    drop_empty(
        meta,
        &["labels", "annotations", "finalizers", "ownerReferences"],
    );
    if object::is_deleting(old) {
        let before = object::finalizers(old);
        let added: Vec<String> = object::finalizers(&out)
            .into_iter()
            .filter(|f| !before.contains(f))
            .collect();
        if !added.is_empty() {
            // Go's `%#v` of a []string; kube-apiserver reports the cause twice (from the
            // generic metadata validation and from the registry's update check).
            let quoted: Vec<String> = added.iter().map(|f| format!("{f:?}")).collect();
            let cause = format!(
                "metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                quoted.join(", ")
            );
            return Err(ApiError::Invalid {
                group: def.group.clone(),
                kind: def.kind.clone(),
                name: object::name(old).to_owned(),
                causes: vec![cause.clone(), cause],
            });
        }
    }
    if def.generation && object::spec_part_differs(old, &out, def.status) {
        let g = object::generation(old) + 1;
        object::set_meta(&mut out, "generation", json!(g));
    }
    Ok(out)
}

fn set_or_remove(obj: &mut Value, key: &str, v: Option<Value>) {
    let map = as_map(obj);
    match v {
        Some(v) => map.insert(key.to_owned(), v),
        None => map.remove(key),
    };
}

/// Remove metadata fields that are empty (`{}`, `[]`, null), as the apiserver's round trip does.
fn drop_empty(meta: &mut Map<String, Value>, fields: &[&str]) {
    for f in fields {
        let empty = match meta.get(*f) {
            Some(Value::Null) => true,
            Some(Value::Object(m)) => m.is_empty(),
            Some(Value::Array(a)) => a.is_empty(),
            _ => false,
        };
        if empty {
            meta.remove(*f);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;

    fn def(group: &str, plural: &str) -> ResourceDef {
        Registry::with_builtins()
            .get(&crate::error::GroupResource::new(group, plural))
            .cloned()
            .unwrap()
    }

    #[test]
    fn names_are_validated() {
        let named = |n: &str| json!({"metadata": {"name": n}});
        let cm = def("", "configmaps");
        assert!(validate_name(&cm, &named("a.b-c")).is_ok());
        assert_eq!(validate_name(&cm, &named("A")).unwrap_err().code(), 422);
        assert!(validate_name(&cm, &named("")).is_err());
        let ns = def("", "namespaces");
        assert!(validate_name(&ns, &named("a.b")).is_err());
        let generated = json!({"metadata": {"name": "Gen-abcde", "generateName": "Gen-"}});
        let ApiError::Invalid { causes, .. } = validate_name(&cm, &generated).unwrap_err() else {
            panic!("expected Invalid")
        };
        assert!(causes[0].starts_with("metadata.generateName: Invalid value: \"Gen-\""));
        assert!(causes[1].starts_with("metadata.name: Invalid value: \"Gen-abcde\""));
        assert!(
            validate_name(
                &cm,
                &json!({"metadata": {"name": "g-x", "generateName": "g-"}})
            )
            .is_ok()
        );
    }

    #[test]
    fn create_sets_system_metadata_and_drops_status() {
        let d = def("apps", "deployments");
        let obj = prepare_create(
            &d,
            json!({"metadata": {"name": "web"}, "spec": {}, "status": {"replicas": 3}}),
        )
        .unwrap();
        assert_eq!(obj["metadata"]["generation"], 1);
        assert!(obj["metadata"]["uid"].is_string());
        assert!(obj.get("status").is_none());
        assert_eq!(obj["spec"]["replicas"], 1);
        let err = prepare_create(
            &d,
            json!({"metadata": {"name": "x", "resourceVersion": "3"}}),
        );
        assert_eq!(err.unwrap_err().code(), 500);
    }

    #[test]
    fn generation_follows_spec_only() {
        let d = def("apps", "deployments");
        let old = json!({"metadata": {"name": "w", "generation": 1, "resourceVersion": "5"}, "spec": {"replicas": 1}, "status": {"replicas": 1}});
        let labels_only =
            json!({"metadata": {"name": "w", "labels": {"a": "b"}}, "spec": {"replicas": 1}});
        let out = prepare_update(&d, &old, labels_only, WriteMode::Main).unwrap();
        assert_eq!(out["metadata"]["generation"], 1);
        assert_eq!(
            out["status"]["replicas"], 1,
            "main writes keep the stored status"
        );
        let spec = json!({"metadata": {"name": "w"}, "spec": {"replicas": 2}});
        let out = prepare_update(&d, &old, spec, WriteMode::Main).unwrap();
        assert_eq!(out["metadata"]["generation"], 2);
        let status =
            json!({"metadata": {"name": "w"}, "spec": {"replicas": 9}, "status": {"replicas": 7}});
        let out = prepare_update(&d, &old, status, WriteMode::Status).unwrap();
        assert_eq!(out["spec"]["replicas"], 1);
        assert_eq!(out["status"]["replicas"], 7);
        assert_eq!(out["metadata"]["generation"], 1);
    }

    #[test]
    fn stale_resource_version_conflicts() {
        let d = def("", "configmaps");
        let old = json!({"metadata": {"name": "c", "resourceVersion": "5"}});
        assert!(check_resource_version(&d, &old, &json!({"metadata": {}})).is_ok());
        let err = check_resource_version(&d, &old, &json!({"metadata": {"resourceVersion": "4"}}))
            .unwrap_err();
        assert_eq!(err.code(), 409);
        assert_eq!(err.reason(), "Conflict");
    }

    #[test]
    fn deleting_objects_take_no_new_finalizers() {
        let d = def("", "configmaps");
        let old = json!({"metadata": {"name": "c", "deletionTimestamp": "2024-01-01T00:00:00Z", "finalizers": ["a"]}});
        let new = json!({"metadata": {"name": "c", "finalizers": ["a", "b"]}});
        assert_eq!(
            prepare_update(&d, &old, new, WriteMode::Main)
                .unwrap_err()
                .code(),
            422
        );
    }
}
