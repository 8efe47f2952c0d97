//! The `scale` subresource.
//!
//! Responsibility: map an object to an `autoscaling/v1` `Scale` through its resource's
//! [`ScalePaths`] (`specReplicasPath`, `statusReplicasPath`, `labelSelectorPath`, or `.spec.selector`
//! for the built-in workloads), and write a Scale's `spec.replicas` back into the object.
//! Inputs: the object and paths, or a Scale body. Outputs: a Scale object, the updated object,
//! or a 400/422 [`ApiError`].

use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult};
use crate::object::{self, get_path, set_path};
use crate::registry::ScalePaths;
use crate::selectors::label_selector_string;

/// The Scale view of an object. A custom resource without its spec replicas field cannot be
/// viewed so (kube-apiserver's 500).
pub fn to_scale(paths: &ScalePaths, obj: &Value) -> ApiResult<Value> {
    if !paths.selector_from_spec && get_path(obj, &paths.spec_replicas).is_none() {
        return Err(ApiError::Internal(format!(
            "the spec replicas field {:?} does not exist",
            paths.spec_replicas
        )));
    }
    let replicas = |p: &str| get_path(obj, p).and_then(Value::as_i64).unwrap_or(0);
    let mut status = json!({"replicas": replicas(&paths.status_replicas)});
    let selector = if paths.selector_from_spec {
        get_path(obj, ".spec.selector").map(label_selector_string)
    } else {
        paths
            .label_selector
            .as_deref()
            .and_then(|p| get_path(obj, p))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    if let (Some(sel), Some(map)) = (selector, status.as_object_mut()) {
        map.insert("selector".into(), json!(sel));
    }
    let meta = obj.get("metadata").cloned().unwrap_or_else(|| json!({}));
    let mut scale_meta = serde_json::Map::new();
    for f in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ] {
        if let Some(v) = meta.get(f) {
            scale_meta.insert(f.to_owned(), v.clone());
        }
    }
    Ok(json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": scale_meta,
        "spec": {"replicas": replicas(&paths.spec_replicas)},
        "status": status,
    }))
}

/// What a custom resource with a scale subresource must satisfy on every write: its spec
/// (and status) replicas are non-negative int32s. Causes name the CRD's paths as written.
pub fn custom_replica_causes(paths: &ScalePaths, obj: &Value) -> Vec<String> {
    let mut causes = Vec::new();
    for path in [&paths.spec_replicas, &paths.status_replicas] {
        if let Some(n) = get_path(obj, path).and_then(Value::as_i64) {
            if n < 0 {
                causes.push(format!(
                    "{path}: Invalid value: {n}: should be a non-negative integer"
                ));
            } else if n > i64::from(i32::MAX) {
                causes.push(format!(
                    "{path}: Invalid value: {n}: should be less than or equal to {}",
                    i32::MAX
                ));
            }
        }
    }
    causes
}

/// The object with the Scale's `spec.replicas` written into it. A Scale's
/// `metadata.resourceVersion`, if set, is returned for the caller's conflict check.
pub fn from_scale(paths: &ScalePaths, obj: &Value, scale: &Value) -> ApiResult<Value> {
    if let Some(kind) = scale.get("kind").and_then(Value::as_str)
        && !kind.is_empty()
        && kind != "Scale"
    {
        return Err(ApiError::BadRequest(format!(
            "expected a Scale, got kind {kind}"
        )));
    }
    let replicas = scale
        .get("spec")
        .and_then(|s| s.get("replicas"))
        .map_or(Some(0), Value::as_i64)
        .ok_or_else(|| ApiError::BadRequest("spec.replicas must be an integer".into()))?;
    // A custom resource's replicas are checked with the resource (see
    // `custom_replica_causes`).
    if replicas < 0 && paths.selector_from_spec {
        return Err(ApiError::invalid(
            "Scale",
            "autoscaling",
            object::name(obj),
            format!("spec.replicas: Invalid value: {replicas}: must be greater than or equal to 0"),
        ));
    }
    let mut out = obj.clone();
    set_path(&mut out, &paths.spec_replicas, json!(replicas));
    let rv = object::resource_version(scale);
    object::set_meta(
        &mut out,
        "resourceVersion",
        if rv.is_empty() {
            json!(object::resource_version(obj))
        } else {
            json!(rv)
        },
    );
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::GroupResource;
    use crate::registry::Registry;

    #[test]
    fn deployments_scale_through_spec_selector() {
        let reg = Registry::with_builtins();
        let def = reg.get(&GroupResource::new("apps", "deployments")).unwrap();
        let paths = def.scale.clone().unwrap();
        let obj = json!({"metadata": {"name": "d", "resourceVersion": "4"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "d"}}},
            "status": {"replicas": 1}});
        let scale = to_scale(&paths, &obj).unwrap();
        assert_eq!(scale["spec"]["replicas"], 2);
        assert_eq!(scale["status"]["replicas"], 1);
        assert_eq!(scale["status"]["selector"], "app=d");
        let out = from_scale(&paths, &obj, &json!({"spec": {"replicas": 5}})).unwrap();
        assert_eq!(out["spec"]["replicas"], 5);
        assert_eq!(out["metadata"]["resourceVersion"], "4");
        let neg = from_scale(&paths, &obj, &json!({"spec": {"replicas": -1}}));
        assert_eq!(neg.unwrap_err().code(), 422);
    }

    #[test]
    fn custom_paths() {
        let paths = ScalePaths {
            spec_replicas: ".spec.replicas".into(),
            status_replicas: ".status.nodes".into(),
            label_selector: Some(".status.selector".into()),
            selector_from_spec: false,
        };
        let obj = json!({"metadata": {"name": "p"}, "spec": {"replicas": 3}, "status": {"nodes": 2, "selector": "a=b"}});
        let scale = to_scale(&paths, &obj).unwrap();
        assert_eq!(scale["status"], json!({"replicas": 2, "selector": "a=b"}));
        let missing = json!({"metadata": {"name": "p"}, "spec": {}});
        assert_eq!(to_scale(&paths, &missing).unwrap_err().code(), 500);
        assert_eq!(
            custom_replica_causes(&paths, &json!({"spec": {"replicas": -1}})),
            vec![".spec.replicas: Invalid value: -1: should be a non-negative integer"]
        );
    }
}
