//! PATCH bodies: JSON patch, JSON merge patch and strategic merge patch.
//!
//! Responsibility: apply a patch body of a given content type to an object.
//! Inputs: the current object, the body bytes, the patch type. Outputs: the patched object, or
//! a [`PatchError`] (malformed body → 400, a patch that cannot apply → 422, strategic merge patch
//! on a custom resource → 415).
//!
//! JSON patch (RFC 6902) and JSON merge patch (RFC 7386) are the `json-patch` crate's.
//!
//! Strategic merge patch is approximated: it is a merge patch in which lists named in
//! [`MERGE_KEYS`] (containers and volumes by `name`, conditions by `type`, ports by
//! `containerPort`, …) are merged element by element on their merge key — by field name
//! wherever it occurs, not per Go type — `finalizers` is merged as a set, and the directives
//! `$patch: replace|delete` (maps and list elements) and `$deleteFromPrimitiveList/<field>` are
//! honoured; `$setElementOrder/<field>` is ignored and `$retainKeys` keeps only the listed keys.
//! Every other list is replaced, as with a merge patch.

use serde_json::{Map, Value};

/// Which kind of patch a body is, from its `Content-Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// `application/json-patch+json`.
    Json,
    /// `application/merge-patch+json`.
    Merge,
    /// `application/strategic-merge-patch+json`.
    Strategic,
    /// `application/apply-patch+yaml` (server-side apply).
    Apply,
}

impl PatchType {
    /// From a `Content-Type` header value (parameters ignored).
    pub fn from_content_type(ct: &str) -> Option<Self> {
        match ct.split(';').next().unwrap_or_default().trim() {
            "application/json-patch+json" => Some(Self::Json),
            "application/merge-patch+json" => Some(Self::Merge),
            "application/strategic-merge-patch+json" => Some(Self::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+cbor" => Some(Self::Apply),
            _ => None,
        }
    }
}

/// Why a patch could not be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatchError {
    /// The body is not a patch of its type (400).
    #[error("{0}")]
    Malformed(String),
    /// The patch does not apply to the object (422).
    #[error("{0}")]
    Failed(String),
    /// The patch type is not supported here (415).
    #[error("{0}")]
    Unsupported(String),
}

/// List fields merged element-wise by strategic merge patch, with their merge key.
pub const MERGE_KEYS: &[(&str, &str)] = &[
    ("containers", "name"),
    ("initContainers", "name"),
    ("ephemeralContainers", "name"),
    ("env", "name"),
    ("ports", "containerPort"),
    ("volumeMounts", "mountPath"),
    ("volumeDevices", "devicePath"),
    ("volumes", "name"),
    ("conditions", "type"),
    ("imagePullSecrets", "name"),
    ("ownerReferences", "uid"),
    ("addresses", "type"),
    ("hostAliases", "ip"),
    ("topologySpreadConstraints", "topologyKey"),
    ("resourceClaims", "name"),
];

/// List fields merged as sets of scalars.
const SET_LISTS: &[&str] = &["finalizers"];

/// The merge key of a list field, if it has one.
pub fn merge_key(field: &str) -> Option<&'static str> {
    MERGE_KEYS
        .iter()
        .find(|(f, _)| *f == field)
        .map(|(_, k)| *k)
}

/// Apply a JSON, merge or strategic merge patch. `custom` resources refuse strategic merge.
pub fn apply_patch(
    kind: PatchType,
    doc: &Value,
    body: &[u8],
    custom: bool,
) -> Result<Value, PatchError> {
    let mut out = doc.clone();
    match kind {
        PatchType::Json => {
            let patch: json_patch::Patch = serde_json::from_slice(body)
                .map_err(|e| PatchError::Malformed(format!("invalid JSON patch: {e}")))?;
            json_patch::patch(&mut out, &patch).map_err(|e| PatchError::Failed(e.to_string()))?;
        }
        PatchType::Merge => {
            let patch = parse_object(body)?;
            json_patch::merge(&mut out, &patch);
        }
        PatchType::Strategic => {
            if custom {
                return Err(PatchError::Unsupported(
                    "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml".into(),
                ));
            }
            let patch = parse_object(body)?;
            strategic_merge(&mut out, &patch);
        }
        PatchType::Apply => {
            return Err(PatchError::Unsupported(
                "server-side apply is not a patch of the current object".into(),
            ));
        }
    }
    Ok(out)
}

fn parse_object(body: &[u8]) -> Result<Value, PatchError> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| PatchError::Malformed(format!("invalid JSON in patch body: {e}")))?;
    if v.is_object() {
        Ok(v)
    } else {
        Err(PatchError::Malformed(
            "a merge patch must be a JSON object".into(),
        ))
    }
}

fn directive(v: &Value) -> Option<&str> {
    v.get("$patch").and_then(Value::as_str)
}

/// Strategic-merge `patch` (an object) into `target`.
pub fn strategic_merge(target: &mut Value, patch: &Value) {
    let Some(pmap) = patch.as_object() else {
        *target = patch.clone();
        return;
    };
    if directive(patch) == Some("replace") {
        let mut replacement = pmap.clone();
        replacement.remove("$patch");
        *target = Value::Object(replacement);
        return;
    }
    let tmap = crate::object::as_map(target);
    let mut retain: Option<Vec<String>> = None;
    for (k, v) in pmap {
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(list)), Some(remove)) = (tmap.get_mut(field), v.as_array()) {
                list.retain(|x| !remove.contains(x));
            }
            continue;
        }
        if k == "$retainKeys" {
            retain = v.as_array().map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_owned))
                    .collect()
            });
            continue;
        }
        if k.starts_with('$') {
            continue;
        }
        match v {
            Value::Null => {
                tmap.remove(k);
            }
            Value::Object(_) if directive(v) == Some("delete") => {
                tmap.remove(k);
            }
            Value::Object(_) => {
                let slot = tmap.entry(k.clone()).or_insert(Value::Null);
                if !slot.is_object() {
                    *slot = Value::Object(Map::new());
                }
                strategic_merge(slot, v);
            }
            Value::Array(items) => {
                let merged = merge_list(tmap.get(k), items, k);
                tmap.insert(k.clone(), merged);
            }
            _ => {
                tmap.insert(k.clone(), v.clone());
            }
        }
    }
    if let Some(keep) = retain {
        tmap.retain(|k, _| keep.contains(k));
    }
}

fn merge_list(current: Option<&Value>, patch: &[Value], field: &str) -> Value {
    let replace_all = patch
        .iter()
        .any(|p| p.is_object() && directive(p) == Some("replace"));
    let cur: Vec<Value> = match current {
        Some(Value::Array(a)) if !replace_all => a.clone(),
        _ => Vec::new(),
    };
    let patch_items = patch
        .iter()
        .filter(|p| !(p.is_object() && directive(p) == Some("replace")));
    if SET_LISTS.contains(&field) {
        let mut out = cur;
        for p in patch_items {
            if !out.contains(p) {
                out.push(p.clone());
            }
        }
        return Value::Array(out);
    }
    let Some(key) = merge_key(field) else {
        return Value::Array(patch_items.cloned().collect());
    };
    let mut out = cur;
    for p in patch_items {
        let Some(id) = p.get(key).cloned() else {
            out.push(p.clone());
            continue;
        };
        let pos = out.iter().position(|c| c.get(key) == Some(&id));
        if directive(p) == Some("delete") {
            if let Some(i) = pos {
                out.remove(i);
            }
            continue;
        }
        match pos.and_then(|i| out.get_mut(i)) {
            Some(existing) => strategic_merge(existing, p),
            None => out.push(p.clone()),
        }
    }
    Value::Array(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn content_types() {
        assert_eq!(
            PatchType::from_content_type("application/merge-patch+json; charset=utf-8"),
            Some(PatchType::Merge)
        );
        assert_eq!(PatchType::from_content_type("application/json"), None);
    }

    #[test]
    fn merge_and_json_patch() {
        let doc = json!({"a": 1, "b": {"c": 2}});
        let out = apply_patch(
            PatchType::Merge,
            &doc,
            br#"{"b": {"c": null, "d": 3}}"#,
            false,
        )
        .unwrap();
        assert_eq!(out, json!({"a": 1, "b": {"d": 3}}));
        let out = apply_patch(
            PatchType::Json,
            &doc,
            br#"[{"op": "replace", "path": "/a", "value": 5}]"#,
            false,
        )
        .unwrap();
        assert_eq!(out["a"], 5);
        let failed = apply_patch(
            PatchType::Json,
            &doc,
            br#"[{"op": "test", "path": "/a", "value": 9}]"#,
            false,
        );
        assert!(matches!(failed, Err(PatchError::Failed(_))));
        assert!(matches!(
            apply_patch(PatchType::Merge, &doc, b"{nope", false),
            Err(PatchError::Malformed(_))
        ));
    }

    #[test]
    fn strategic_merges_keyed_lists() {
        let doc = json!({"metadata": {"finalizers": ["a"]}, "spec": {"containers": [
            {"name": "app", "image": "v1", "env": [{"name": "X", "value": "1"}]},
            {"name": "side", "image": "s"}
        ], "tolerations": [{"key": "t"}]}});
        let patch = json!({"metadata": {"finalizers": ["b"]}, "spec": {"containers": [
            {"name": "app", "image": "v2", "env": [{"name": "Y", "value": "2"}]},
            {"name": "side", "$patch": "delete"},
            {"name": "new", "image": "n"}
        ], "tolerations": [{"key": "u"}]}});
        let out = apply_patch(
            PatchType::Strategic,
            &doc,
            patch.to_string().as_bytes(),
            false,
        )
        .unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["a", "b"]));
        let containers = out["spec"]["containers"].as_array().unwrap();
        assert_eq!(containers.len(), 2);
        assert_eq!(containers[0]["image"], "v2");
        assert_eq!(containers[0]["env"].as_array().unwrap().len(), 2);
        assert_eq!(containers[1]["name"], "new");
        assert_eq!(out["spec"]["tolerations"], json!([{"key": "u"}]));
    }

    #[test]
    fn strategic_directives() {
        let doc = json!({"metadata": {"finalizers": ["a", "b"]}, "spec": {"x": {"y": 1}, "z": 2}});
        let patch = json!({
            "metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]},
            "spec": {"x": {"$patch": "replace", "w": 3}, "$setElementOrder/foo": []}
        });
        let out = apply_patch(
            PatchType::Strategic,
            &doc,
            patch.to_string().as_bytes(),
            false,
        )
        .unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["b"]));
        assert_eq!(out["spec"]["x"], json!({"w": 3}));
        assert_eq!(out["spec"]["z"], 2);
        let err = apply_patch(PatchType::Strategic, &doc, b"{}", true);
        assert!(matches!(err, Err(PatchError::Unsupported(_))));
    }

    #[test]
    fn conditions_merge_by_type() {
        let doc = json!({"status": {"conditions": [{"type": "Ready", "status": "False"}, {"type": "A", "status": "True"}]}});
        let patch = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        let out = apply_patch(
            PatchType::Strategic,
            &doc,
            patch.to_string().as_bytes(),
            false,
        )
        .unwrap();
        assert_eq!(
            out["status"]["conditions"],
            json!([{"type": "Ready", "status": "True"}, {"type": "A", "status": "True"}])
        );
    }
}
