//! Accessors for objects kept as JSON.
//!
//! Responsibility: read and write the well-known fields of a Kubernetes object held as a
//! `serde_json::Value` (metadata, paths like `.spec.replicas`), and make timestamps and uids.
//! Inputs: objects. Outputs: field values; objects with fields set. No semantics live here.

use serde_json::{Map, Value};

/// The object's `metadata.<field>` as a string, if it is one.
pub fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    obj.get("metadata")?.get(field)?.as_str()
}

/// `metadata.name`, or `""`.
pub fn name(obj: &Value) -> &str {
    meta_str(obj, "name").unwrap_or_default()
}

/// `metadata.namespace`, or `""`.
pub fn namespace(obj: &Value) -> &str {
    meta_str(obj, "namespace").unwrap_or_default()
}

/// `metadata.resourceVersion`, or `""`.
pub fn resource_version(obj: &Value) -> &str {
    meta_str(obj, "resourceVersion").unwrap_or_default()
}

/// `metadata.uid`, or `""`.
pub fn uid(obj: &Value) -> &str {
    meta_str(obj, "uid").unwrap_or_default()
}

/// Whether `metadata.deletionTimestamp` is set.
pub fn is_deleting(obj: &Value) -> bool {
    meta_str(obj, "deletionTimestamp").is_some()
}

/// `metadata.finalizers`.
pub fn finalizers(obj: &Value) -> Vec<String> {
    obj.get("metadata")
        .and_then(|m| m.get("finalizers"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|f| f.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// `metadata.generation`, or 0.
pub fn generation(obj: &Value) -> i64 {
    obj.get("metadata")
        .and_then(|m| m.get("generation"))
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

/// `metadata.labels`, borrowed (an empty map when absent).
pub fn labels(obj: &Value) -> std::borrow::Cow<'_, Map<String, Value>> {
    obj.get("metadata")
        .and_then(|m| m.get("labels"))
        .and_then(Value::as_object)
        .map_or_else(
            || std::borrow::Cow::Owned(Map::new()),
            std::borrow::Cow::Borrowed,
        )
}

/// The `metadata` map, created if missing (or replacing a non-object).
pub fn metadata_mut(obj: &mut Value) -> &mut Map<String, Value> {
    let meta = as_map(obj)
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    as_map(meta)
}

/// Set `metadata.<field>`; `Value::Null` removes it.
pub fn set_meta(obj: &mut Value, field: &str, value: Value) {
    let meta = metadata_mut(obj);
    if value.is_null() {
        meta.remove(field);
    } else {
        meta.insert(field.to_owned(), value);
    }
}

/// The value as a map, turning a non-object into an empty object first.
pub fn as_map(v: &mut Value) -> &mut Map<String, Value> {
    if !v.is_object() {
        *v = Value::Object(Map::new());
    }
    match v {
        Value::Object(m) => m,
        _ => unreachable!("the value was just made an object"),
    }
}

/// Split a JSON path like `.spec.replicas` into its keys.
pub fn path_keys(path: &str) -> Vec<&str> {
    path.split('.').filter(|k| !k.is_empty()).collect()
}

/// The value at a dotted path (`.spec.replicas`).
pub fn get_path<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    path_keys(path)
        .into_iter()
        .try_fold(obj, |cur, key| cur.get(key))
}

/// Set the value at a dotted path, creating intermediate objects.
pub fn set_path(obj: &mut Value, path: &str, value: Value) {
    let keys = path_keys(path);
    let Some((last, parents)) = keys.split_last() else {
        *obj = value;
        return;
    };
    let mut cur = obj;
    for key in parents {
        cur = as_map(cur)
            .entry((*key).to_owned())
            .or_insert_with(|| Value::Object(Map::new()));
    }
    as_map(cur).insert((*last).to_owned(), value);
}

/// The current time as kube-apiserver writes `metav1.Time`: RFC 3339, seconds, UTC.
pub fn now_rfc3339() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// The time `seconds` from now (RFC 3339, seconds, UTC): a graceful deletion's
/// `deletionTimestamp`.
pub fn rfc3339_in(seconds: i64) -> String {
    let now = jiff::Timestamp::now();
    now.checked_add(jiff::SignedDuration::from_secs(seconds))
        .unwrap_or(now)
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// `metadata.ownerReferences`.
pub fn owner_refs(obj: &Value) -> Vec<Value> {
    obj.get("metadata")
        .and_then(|m| m.get("ownerReferences"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// The uids of `metadata.ownerReferences`.
pub fn owner_uids(obj: &Value) -> Vec<String> {
    owner_refs(obj)
        .iter()
        .filter_map(|r| r.get("uid").and_then(Value::as_str).map(str::to_owned))
        .collect()
}

/// The current time as `metav1.MicroTime`.
pub fn now_micro() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%S%.6fZ")
        .to_string()
}

/// A fresh object uid.
pub fn new_uid() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// Five random characters from kube-apiserver's `generateName` alphabet.
pub fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    uuid::Uuid::new_v4()
        .as_bytes()
        .iter()
        .take(5)
        .map(|b| {
            ALPHABET
                .get(usize::from(*b) % ALPHABET.len())
                .map_or('x', |c| char::from(*c))
        })
        .collect()
}

/// Whether `a` and `b` differ outside `metadata`, `apiVersion`, `kind` and (if
/// `without_status`) `status`: what `generation` tracks. Compared in place, without copying
/// either object.
pub fn spec_part_differs(a: &Value, b: &Value, without_status: bool) -> bool {
    let tracked = |k: &String| {
        let untracked = matches!(k.as_str(), "metadata" | "apiVersion" | "kind")
            || (without_status && k == "status");
        !untracked
    };
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            let count =
                |m: &serde_json::Map<String, Value>| m.keys().filter(|k| tracked(k)).count();
            count(a) != count(b) || a.iter().any(|(k, v)| tracked(k) && b.get(k) != Some(v))
        }
        _ => a != b,
    }
}

/// The HTTP code of an API error.
pub fn code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

/// The status condition of a type, if present.
pub fn condition<'a>(obj: &'a Value, kind: &str) -> Option<&'a Value> {
    get_path(obj, ".status.conditions")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(kind))
}

/// Whether a condition of that type is `True`.
pub fn condition_true(obj: &Value, kind: &str) -> bool {
    condition(obj, kind)
        .and_then(|c| c.get("status"))
        .and_then(Value::as_str)
        == Some("True")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn paths_get_and_set() {
        let mut obj = json!({"spec": {"replicas": 2}});
        assert_eq!(get_path(&obj, ".spec.replicas"), Some(&json!(2)));
        set_path(&mut obj, ".status.nodes", json!(3));
        assert_eq!(obj["status"]["nodes"], 3);
        set_path(&mut obj, ".spec.replicas", json!(5));
        assert_eq!(obj["spec"]["replicas"], 5);
    }

    #[test]
    fn generation_tracks_everything_but_metadata_and_the_status_subresource() {
        let a = json!({"apiVersion": "v1", "kind": "X", "metadata": {"name": "a"},
            "spec": {"n": 1}, "status": {"s": 1}});
        let differs = |b: Value, without_status| spec_part_differs(&a, &b, without_status);
        assert!(!differs(a.clone(), true));
        let mut b = a.clone();
        b["metadata"]["labels"] = json!({"l": "v"});
        b["apiVersion"] = json!("v2");
        assert!(
            !differs(b, true),
            "metadata, apiVersion and kind are not tracked"
        );
        let mut b = a.clone();
        b["status"]["s"] = json!(2);
        assert!(!differs(b.clone(), true));
        assert!(
            differs(b, false),
            "without a status subresource, status is tracked"
        );
        let mut b = a.clone();
        b["spec"]["n"] = json!(2);
        assert!(differs(b, true));
        let mut b = a.clone();
        b["data"] = json!({});
        assert!(differs(b, true), "a field added");
        let mut b = a.clone();
        as_map(&mut b).remove("spec");
        assert!(differs(b, true), "a field removed");
        assert!(differs(json!(1), false));
        assert!(!differs(a.clone(), false));
    }

    #[test]
    fn metadata_is_created_on_demand() {
        let mut obj = json!({"kind": "X"});
        set_meta(&mut obj, "name", json!("a"));
        assert_eq!(name(&obj), "a");
        set_meta(&mut obj, "name", Value::Null);
        assert_eq!(name(&obj), "");
    }

    #[test]
    fn suffix_uses_alphabet() {
        let s = random_suffix();
        assert_eq!(s.len(), 5);
        assert!(s.chars().all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c)));
    }

    #[test]
    fn timestamps_are_rfc3339() {
        let t = now_rfc3339();
        assert!(t.ends_with('Z') && t.len() == 20, "{t}");
    }
}
