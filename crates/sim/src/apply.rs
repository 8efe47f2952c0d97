//! Server-side apply (`application/apply-patch+yaml`), approximated.
//!
//! Responsibility: merge an applied configuration into the live object for one field manager
//! and record what that manager owns in `metadata.managedFields`.
//! Inputs: the live object (if any), the applied configuration, the manager name. Outputs: the
//! merged object with its `managedFields` entry.
//!
//! What is modelled: fields set by the configuration are merged into the live object (maps
//! recursively, the keyed lists of [`crate::patch::MERGE_KEYS`] element by element, other lists
//! replaced whole); the manager's field set is stored as `FieldsV1` (`f:<field>`,
//! `k:{"<key>":…}` for keyed list items) in an `operation: Apply` entry; a field the manager
//! applied before and no longer applies is removed unless another manager's entry lists it.
//! What is not: conflict detection (every apply behaves as `force=true`), `Update` entries for
//! PUT/PATCH writers, and schema-declared list types (`x-kubernetes-list-type`).

use serde_json::{Map, Value, json};

use crate::object::{as_map, now_rfc3339};
use crate::patch::merge_key;

/// Metadata fields that are never owned.
const SYSTEM_META: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
];

/// The `FieldsV1` set of an applied configuration.
pub fn fieldset(applied: &Value) -> Value {
    let mut set = Map::new();
    if let Some(map) = applied.as_object() {
        for (k, v) in map {
            if k == "apiVersion" || k == "kind" {
                continue;
            }
            if k == "metadata" {
                let mut meta = Map::new();
                if let Some(m) = v.as_object() {
                    for (mk, mv) in m {
                        if !SYSTEM_META.contains(&mk.as_str()) {
                            meta.insert(format!("f:{mk}"), fields_of(mv, mk));
                        }
                    }
                }
                if !meta.is_empty() {
                    set.insert("f:metadata".into(), Value::Object(meta));
                }
                continue;
            }
            set.insert(format!("f:{k}"), fields_of(v, k));
        }
    }
    Value::Object(set)
}

fn fields_of(v: &Value, field: &str) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, child)| (format!("f:{k}"), fields_of(child, k)))
                .collect(),
        ),
        Value::Array(items) => match merge_key(field) {
            Some(key) if items.iter().all(|i| i.get(key).is_some()) => Value::Object(
                items
                    .iter()
                    .filter_map(|item| {
                        let id = item.get(key)?;
                        let mut child = match fields_of(item, "") {
                            Value::Object(m) => m,
                            _ => Map::new(),
                        };
                        child.insert(".".into(), json!({}));
                        Some((format!("k:{}", json!({ key: id })), Value::Object(child)))
                    })
                    .collect(),
            ),
            _ => json!({}),
        },
        _ => json!({}),
    }
}

/// Remove from `target` what `prev` owned that neither `new` nor any of `others` owns.
fn prune(target: &mut Value, prev: &Value, new: Option<&Value>, others: &[&Value]) {
    let Some(prev) = prev.as_object() else { return };
    for (k, prev_child) in prev {
        if k == "." {
            continue;
        }
        let new_child = new.and_then(|n| n.get(k));
        let other_children: Vec<&Value> = others.iter().filter_map(|o| o.get(k)).collect();
        if let Some(field) = k.strip_prefix("f:") {
            let Some(map) = target.as_object_mut() else {
                continue;
            };
            if new_child.is_none() && other_children.is_empty() {
                map.remove(field);
            } else if let Some(child) = map.get_mut(field) {
                prune(child, prev_child, new_child, &other_children);
            }
        } else if let Some(key_json) = k.strip_prefix("k:") {
            let Ok(Value::Object(key)) = serde_json::from_str::<Value>(key_json) else {
                continue;
            };
            let Some(list) = target.as_array_mut() else {
                continue;
            };
            let matches = |item: &Value| key.iter().all(|(kk, kv)| item.get(kk) == Some(kv));
            if new_child.is_none() && other_children.is_empty() {
                list.retain(|item| !matches(item));
            } else if let Some(item) = list.iter_mut().find(|i| matches(i)) {
                prune(item, prev_child, new_child, &other_children);
            }
        }
    }
}

/// Merge the applied configuration into the live object.
fn merge(target: &mut Value, applied: &Value) {
    let Some(amap) = applied.as_object() else {
        *target = applied.clone();
        return;
    };
    let tmap = as_map(target);
    for (k, v) in amap {
        match v {
            Value::Null => {
                tmap.remove(k);
            }
            Value::Object(_) => merge(tmap.entry(k.clone()).or_insert(Value::Null), v),
            Value::Array(items) => {
                let merged = match (merge_key(k), tmap.get_mut(k)) {
                    (Some(key), Some(Value::Array(cur))) => {
                        for item in items {
                            let id = item.get(key);
                            match cur.iter_mut().find(|c| id.is_some() && c.get(key) == id) {
                                Some(existing) => merge(existing, item),
                                None => cur.push(item.clone()),
                            }
                        }
                        Value::Array(std::mem::take(cur))
                    }
                    _ => v.clone(),
                };
                tmap.insert(k.clone(), merged);
            }
            _ => {
                tmap.insert(k.clone(), v.clone());
            }
        }
    }
}

/// Apply `applied` for `manager` to `live` (or to nothing, for a create).
pub fn apply(live: Option<&Value>, mut applied: Value, manager: &str) -> Value {
    if let Some(meta) = applied.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
        meta.remove("resourceVersion");
    }
    let new_set = fieldset(&applied);
    let mut result = live.cloned().unwrap_or_else(|| json!({}));
    let entries: Vec<Value> = live
        .and_then(|l| l.get("metadata"))
        .and_then(|m| m.get("managedFields"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let is_mine = |e: &Value| {
        e.get("manager").and_then(Value::as_str) == Some(manager)
            && e.get("operation").and_then(Value::as_str) == Some("Apply")
    };
    let others: Vec<Value> = entries.iter().filter(|e| !is_mine(e)).cloned().collect();
    if let Some(prev) = entries
        .iter()
        .find(|e| is_mine(e))
        .and_then(|e| e.get("fieldsV1"))
    {
        let other_sets: Vec<&Value> = others.iter().filter_map(|e| e.get("fieldsV1")).collect();
        prune(&mut result, prev, Some(&new_set), &other_sets);
    }
    merge(&mut result, &applied);
    let mut managed = others;
    managed.push(json!({
        "manager": manager,
        "operation": "Apply",
        "apiVersion": applied.get("apiVersion").cloned().unwrap_or(Value::Null),
        "time": now_rfc3339(),
        "fieldsType": "FieldsV1",
        "fieldsV1": new_set,
    }));
    crate::object::set_meta(&mut result, "managedFields", Value::Array(managed));
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fieldsets_use_fields_v1_notation() {
        let set = fieldset(&json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "labels": {"a": "b"}},
            "spec": {"containers": [{"name": "c", "image": "i"}], "tolerations": [{"key": "k"}]}
        }));
        assert_eq!(
            set,
            json!({
                "f:metadata": {"f:labels": {"f:a": {}}},
                "f:spec": {
                    "f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:name": {}, "f:image": {}}},
                    "f:tolerations": {}
                }
            })
        );
    }

    #[test]
    fn apply_creates_merges_and_prunes_own_fields() {
        let first = apply(
            None,
            json!({"metadata": {"name": "x", "labels": {"a": "1", "b": "2"}}, "spec": {"replicas": 1}}),
            "m1",
        );
        assert_eq!(first["metadata"]["managedFields"][0]["manager"], "m1");
        // Another writer adds a label; m1 stops applying label b and changes replicas.
        let mut live = first;
        live["metadata"]["labels"]["c"] = json!("3");
        let second = apply(
            Some(&live),
            json!({"metadata": {"name": "x", "labels": {"a": "1"}}, "spec": {"replicas": 2}}),
            "m1",
        );
        assert_eq!(second["metadata"]["labels"], json!({"a": "1", "c": "3"}));
        assert_eq!(second["spec"]["replicas"], 2);
        assert_eq!(
            second["metadata"]["managedFields"]
                .as_array()
                .unwrap()
                .len(),
            1
        );
    }

    #[test]
    fn fields_owned_by_another_manager_survive() {
        let a = apply(None, json!({"spec": {"x": 1, "y": 2}}), "a");
        let b = apply(Some(&a), json!({"spec": {"y": 2}}), "b");
        let a2 = apply(Some(&b), json!({"spec": {"x": 1}}), "a");
        assert_eq!(a2["spec"], json!({"x": 1, "y": 2}));
        let b2 = apply(Some(&a2), json!({"spec": {}}), "b");
        assert_eq!(b2["spec"], json!({"x": 1}));
    }
}
