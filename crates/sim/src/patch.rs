//! PATCH bodies: JSON patch, JSON merge patch and strategic merge patch.
//!
//! Responsibility: apply a patch body of a given content type to an object.
//! Inputs: the current object, the body bytes, the patch type. Outputs: the patched object, or
//! a [`PatchError`] (malformed body → 400, a patch that cannot apply → 422, strategic merge patch
//! on a custom resource → 415).
//!
//! JSON patch (RFC 6902) and JSON merge patch (RFC 7386) are the `json-patch` crate's, except
//! that, as in kube-apiserver, a `test` of `null` passes where the member is absent from an
//! object that exists.
//!
//! Strategic merge patch is approximated: it is a merge patch in which lists named in
//! [`MERGE_KEYS`] (containers and volumes by `name`, conditions by `type`, ports by
//! `containerPort`, …) are merged element by element on their merge key — by field name
//! wherever it occurs, not per Go type — `finalizers` is merged as a set, and the directives
//! `$patch: replace|delete` (maps and list elements), `$deleteFromPrimitiveList/<field>` and
//! `$setElementOrder/<field>` are honoured and `$retainKeys` keeps only the listed keys.
//! Merged lists are ordered as kube-apiserver orders them: the patch's elements first, in
//! patch (or `$setElementOrder`) order, interleaved with the server-only elements where the
//! server's order puts those before them. Every other list is replaced, as with a merge patch.

use serde_json::{Map, Value};

/// Whether the JSON pointer `path` names a member missing from an object that exists.
fn absent_under_an_object(doc: &Value, path: &str) -> bool {
    let Some((parent, key)) = path.rsplit_once('/') else {
        return false;
    };
    let key = key.replace("~1", "/").replace("~0", "~");
    doc.pointer(parent)
        .and_then(Value::as_object)
        .is_some_and(|o| !o.contains_key(&key))
}

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
            let v: Value = serde_json::from_slice(body).map_err(|e| malformed(&e))?;
            if !v.is_array() {
                return Err(PatchError::Malformed(format!(
                    "error decoding patch: json: cannot unmarshal {} into Go value of type []handlers.jsonPatchOp",
                    go_type(&v)
                )));
            }
            // Operations that do not parse (an unknown `op`) fail when applied, as in
            // kube-apiserver: 422, not 400.
            let patch: json_patch::Patch =
                serde_json::from_value(v).map_err(|e| PatchError::Failed(e.to_string()))?;
            // One operation at a time on the copy (a failure leaves the object unchanged), so
            // that a `test` of `null` passes where the member is absent but its parent exists,
            // as in kube-apiserver (RFC 6902 would fail it): clients test that way that a list
            // or key they add is not there yet.
            for op in patch.0 {
                if let json_patch::PatchOperation::Test(t) = &op
                    && t.value.is_null()
                    && absent_under_an_object(&out, t.path.as_str())
                {
                    continue;
                }
                json_patch::patch(&mut out, &json_patch::Patch(vec![op]))
                    .map_err(|e| PatchError::Failed(e.to_string()))?;
            }
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
    let v: Value = serde_json::from_slice(body).map_err(|e| malformed(&e))?;
    if v.is_object() {
        Ok(v)
    } else {
        Err(PatchError::Malformed(format!(
            "error decoding patch: json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
            go_type(&v)
        )))
    }
}

/// A body that is not JSON. Go's decoder says `unexpected end of JSON input` for a truncated
/// one; other syntax errors keep serde's wording.
fn malformed(e: &serde_json::Error) -> PatchError {
    if e.is_eof() {
        PatchError::Malformed("unexpected end of JSON input".into())
    } else {
        PatchError::Malformed(format!("invalid JSON in patch body: {e}"))
    }
}

/// The JSON type name Go's `encoding/json` uses in unmarshal errors.
fn go_type(v: &Value) -> &'static str {
    match v {
        Value::Array(_) => "array",
        Value::Object(_) => "object",
        Value::String(_) => "string",
        Value::Number(_) => "number",
        Value::Bool(_) => "bool",
        Value::Null => "null",
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
                let order = pmap.get(&format!("$setElementOrder/{k}"));
                let merged = merge_list(tmap.get(k), items, k, order);
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

/// Merge a patch list into the current one as kube-apiserver's strategic merge patch does:
/// keyed lists (and set-like primitive lists) merge element by element; the result lists the
/// patch's elements in patch order (or `$setElementOrder` order) interleaved with the
/// elements only the server had, in server order (`normalizeElementOrder` and
/// `mergeSortedSlice`); every other list is replaced.
fn merge_list(
    current: Option<&Value>,
    patch: &[Value],
    field: &str,
    order: Option<&Value>,
) -> Value {
    let replace_all = patch
        .iter()
        .any(|p| p.is_object() && directive(p) == Some("replace"));
    let server: Vec<Value> = match current {
        Some(Value::Array(a)) if !replace_all => a.clone(),
        _ => Vec::new(),
    };
    let patch_items: Vec<&Value> = patch
        .iter()
        .filter(|p| !(p.is_object() && directive(p) == Some("replace")))
        .collect();
    let key = merge_key(field);
    if key.is_none() && !SET_LISTS.contains(&field) {
        return Value::Array(patch_items.into_iter().cloned().collect());
    }
    // The identity of an element: its merge key's value, or the value itself in a set.
    let id = |v: &Value| -> Option<Value> {
        match key {
            Some(k) => v.get(k).cloned(),
            None => Some(v.clone()),
        }
    };
    let mut patched: Vec<Value> = Vec::new();
    let mut touched: Vec<Value> = Vec::new();
    for p in patch_items {
        let Some(pid) = id(p) else {
            patched.push(p.clone());
            continue;
        };
        if touched.contains(&pid) {
            continue;
        }
        touched.push(pid.clone());
        if key.is_some() && directive(p) == Some("delete") {
            continue;
        }
        let merged = match (key, server.iter().find(|c| id(c).as_ref() == Some(&pid))) {
            (None, _) => p.clone(),
            (Some(_), Some(existing)) => {
                let mut m = existing.clone();
                strategic_merge(&mut m, p);
                m
            }
            (Some(_), None) => {
                let mut m = Value::Object(Map::new());
                strategic_merge(&mut m, p);
                m
            }
        };
        patched.push(merged);
    }
    let server_ids: Vec<Option<Value>> = server.iter().map(id).collect();
    let server_only: Vec<Value> = server
        .iter()
        .filter(|c| id(c).is_none_or(|i| !touched.contains(&i)))
        .cloned()
        .collect();
    // `$setElementOrder/<field>` (a list of identities, or of `{key: value}` maps) sorts the
    // patch's elements.
    if let Some(Value::Array(wanted)) = order {
        let wanted: Vec<Value> = wanted
            .iter()
            .map(|w| match key {
                Some(k) => w.get(k).cloned().unwrap_or(Value::Null),
                None => w.clone(),
            })
            .collect();
        patched.sort_by_key(|item| {
            id(item)
                .and_then(|i| wanted.iter().position(|w| *w == i))
                .unwrap_or(usize::MAX)
        });
    }
    let position =
        |v: &Value| id(v).and_then(|i| server_ids.iter().position(|s| s.as_ref() == Some(&i)));
    let mut out = Vec::with_capacity(patched.len() + server_only.len());
    let (mut left, mut right) = (
        server_only.into_iter().peekable(),
        patched.into_iter().peekable(),
    );
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(l), Some(r)) => matches!((position(l), position(r)), (Some(a), Some(b)) if a < b),
        };
        let next = if take_left { left.next() } else { right.next() };
        out.extend(next);
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
        // The patch's elements come first (kube-apiserver's order without $setElementOrder).
        assert_eq!(out["metadata"]["finalizers"], json!(["b", "a"]));
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
    fn set_element_order_sorts_the_patch() {
        let doc = json!({"spec": {"containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "1"}]}});
        let patch = json!({"spec": {
            "$setElementOrder/containers": [{"name": "a"}, {"name": "b"}, {"name": "c"}],
            "containers": [{"name": "c", "image": "2"}, {"name": "b", "image": "2"}]}});
        let out = apply_patch(
            PatchType::Strategic,
            &doc,
            patch.to_string().as_bytes(),
            false,
        )
        .unwrap();
        let names: Vec<&str> = out["spec"]["containers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["a", "b", "c"]);
        assert_eq!(out["spec"]["containers"][1]["image"], "2");
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
