//! Structural-schema defaulting and pruning for custom resources.
//!
//! Responsibility: what kube-apiserver does with a CRD's `openAPIV3Schema` to every custom
//! resource written: drop fields the schema does not declare (pruning; kept under
//! `x-kubernetes-preserve-unknown-fields: true`, and `apiVersion`/`kind`/`metadata` at the root
//! and in `x-kubernetes-embedded-resource` objects), then fill in `default`s for absent fields
//! of objects that are present (recursively, including into the defaults themselves).
//! Inputs: a schema and an object. Outputs: the object, pruned and defaulted.
//! Not done: validation (types, `required`, `pattern`, `enum`, bounds, CEL rules), and
//! defaulting on read after a CRD's defaults change.

use serde_json::{Map, Value};

fn preserves_unknown(schema: &Value) -> bool {
    schema
        .get("x-kubernetes-preserve-unknown-fields")
        .and_then(Value::as_bool)
        == Some(true)
}

fn is_embedded(schema: &Value) -> bool {
    schema
        .get("x-kubernetes-embedded-resource")
        .and_then(Value::as_bool)
        == Some(true)
}

/// Prune and default `obj` (a whole custom resource) with the version's root schema.
pub fn apply(schema: &Value, obj: &mut Value) {
    walk(schema, obj, true);
}

fn walk(schema: &Value, v: &mut Value, resource_root: bool) {
    // allOf/anyOf/oneOf in structural schemas cannot declare new fields; only the main schema
    // matters for pruning and defaulting.
    match v {
        Value::Object(map) => walk_object(schema, map, resource_root || is_embedded(schema)),
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for item in items {
                    walk(item_schema, item, false);
                }
            }
        }
        _ => {}
    }
}

fn walk_object(schema: &Value, map: &mut Map<String, Value>, resource_root: bool) {
    let properties = schema.get("properties").and_then(Value::as_object);
    let additional = schema.get("additionalProperties");
    if let Some(props) = properties {
        if !preserves_unknown(schema) {
            map.retain(|k, _| {
                props.contains_key(k)
                    || (resource_root && matches!(k.as_str(), "apiVersion" | "kind" | "metadata"))
            });
        }
        for (k, prop_schema) in props {
            if !map.contains_key(k)
                && let Some(default) = prop_schema.get("default")
            {
                map.insert(k.clone(), default.clone());
            }
            if let Some(child) = map.get_mut(k)
                && !(resource_root && k == "metadata")
            {
                walk(prop_schema, child, false);
            }
        }
    } else if let Some(add) = additional.filter(|a| a.is_object()) {
        for child in map.values_mut() {
            walk(add, child, false);
        }
    } else if !preserves_unknown(schema)
        && schema.get("type").and_then(Value::as_str) == Some("object")
    {
        // An object with neither properties nor additionalProperties holds nothing.
        map.retain(|k, _| {
            resource_root && matches!(k.as_str(), "apiVersion" | "kind" | "metadata")
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "replicas": {"type": "integer", "default": 1},
                "disruption": {"type": "object", "default": {}, "properties": {
                    "policy": {"type": "string", "default": "WhenEmpty"},
                    "budgets": {"type": "array", "default": [{"nodes": "10%"}], "items": {
                        "type": "object", "properties": {"nodes": {"type": "string", "default": "10%"}, "reasons": {"type": "array", "items": {"type": "string"}}}
                    }}
                }},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
            }},
            "status": {"type": "object", "properties": {"nodes": {"type": "integer"}}}
        }})
    }

    #[test]
    fn defaults_fill_absent_fields_recursively() {
        let mut obj = json!({"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "n", "labels": {"a": "b"}}, "spec": {}});
        apply(&schema(), &mut obj);
        assert_eq!(obj["spec"]["replicas"], 1);
        assert_eq!(obj["spec"]["disruption"]["policy"], "WhenEmpty");
        assert_eq!(
            obj["spec"]["disruption"]["budgets"],
            json!([{"nodes": "10%"}])
        );
        assert_eq!(obj["metadata"]["labels"]["a"], "b");
        assert!(
            obj.get("status").is_none(),
            "absent parents are not created"
        );
    }

    #[test]
    fn unknown_fields_are_pruned_unless_preserved() {
        let mut obj = json!({"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "n"},
            "extra": 1,
            "spec": {"replicas": 2, "bogus": true, "labels": {"k": "v"}, "free": {"any": {"thing": 1}},
                     "disruption": {"budgets": [{"reasons": ["Empty"], "junk": 1}]}}});
        apply(&schema(), &mut obj);
        assert!(obj.get("extra").is_none());
        assert!(obj["spec"].get("bogus").is_none());
        assert_eq!(obj["spec"]["labels"], json!({"k": "v"}));
        assert_eq!(obj["spec"]["free"], json!({"any": {"thing": 1}}));
        assert_eq!(
            obj["spec"]["disruption"]["budgets"],
            json!([{"reasons": ["Empty"], "nodes": "10%"}])
        );
        assert_eq!(obj["spec"]["replicas"], 2);
        assert_eq!(obj["metadata"]["name"], "n");
    }
}
