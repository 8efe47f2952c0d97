//! Realistic NodePool / NodeClaim / ClusterAPINodeClass / NodeOverlay / CapacityBuffer manifests (in `tests/manifests/`)
//! deserialize into our types and serialize back without losing anything, and together they use
//! every field of our CRD schemas.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use api::{CapacityBuffer, ClusterAPINodeClass, NodeClaim, NodeOverlay, NodePool};
use serde::Deserialize;
use serde_json::Value;

fn manifests() -> Vec<(String, Value)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/manifests");
    let mut docs = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        for (i, doc) in serde_norway::Deserializer::from_str(&text).enumerate() {
            let value = Value::deserialize(doc).unwrap();
            if !value.is_null() {
                docs.push((
                    format!("{}#{i}", path.file_name().unwrap().to_string_lossy()),
                    value,
                ));
            }
        }
    }
    assert!(
        docs.len() >= 7,
        "expected the manifest set, found {}",
        docs.len()
    );
    docs
}

/// Quantities may be written as YAML integers; they come back as strings, which the API server
/// treats as the same quantity. Everything else must come back exactly.
fn normalise_quantities(value: &mut Value, in_resource_list: bool) {
    match value {
        Value::Object(map) if in_resource_list => {
            for child in map.values_mut() {
                if let Value::Number(n) = child {
                    *child = Value::String(n.to_string());
                }
            }
        }
        Value::Object(map) => {
            for (key, child) in map.iter_mut() {
                let list = matches!(
                    key.as_str(),
                    "limits" | "resources" | "requests" | "capacity" | "allocatable"
                ) && child.is_object();
                normalise_quantities(child, list);
            }
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|v| normalise_quantities(v, false)),
        _ => {}
    }
}

fn round_trip(value: &Value) -> Value {
    let kind = value["kind"].as_str().unwrap();
    match kind {
        "NodePool" => serde_json::to_value(NodePool::deserialize(value).unwrap()).unwrap(),
        "NodeClaim" => serde_json::to_value(NodeClaim::deserialize(value).unwrap()).unwrap(),
        "ClusterAPINodeClass" => {
            serde_json::to_value(ClusterAPINodeClass::deserialize(value).unwrap()).unwrap()
        }
        "NodeOverlay" => serde_json::to_value(NodeOverlay::deserialize(value).unwrap()).unwrap(),
        "CapacityBuffer" => {
            serde_json::to_value(CapacityBuffer::deserialize(value).unwrap()).unwrap()
        }
        other => panic!("unexpected kind {other}"),
    }
}

#[test]
fn manifests_round_trip_unchanged() {
    for (name, original) in manifests() {
        let mut expected = original.clone();
        normalise_quantities(&mut expected, false);
        let actual = round_trip(&original);
        pretty_assertions::assert_eq!(expected, actual, "{name} changed on a round trip");
    }
}

/// Every leaf path of a JSON document, with array indices and map keys under resource lists and
/// label maps folded the way the schema walk folds them.
fn document_paths(value: &Value, path: String, schema: &Value, out: &mut BTreeSet<String>) {
    out.insert(path.clone());
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                let (child_path, child_schema) =
                    if let Some(s) = schema.get("properties").and_then(|p| p.get(key)) {
                        (format!("{path}.{key}"), s)
                    } else if let Some(s) = schema.get("additionalProperties") {
                        (format!("{path}{{}}"), s)
                    } else {
                        continue;
                    };
                document_paths(child, child_path, child_schema, out);
            }
        }
        Value::Array(items) => {
            for item in items {
                document_paths(item, format!("{path}[]"), &schema["items"], out);
            }
        }
        _ => {}
    }
}

fn schema_paths(path: String, node: &Value, out: &mut BTreeSet<String>) {
    out.insert(path.clone());
    if let Some(props) = node.get("properties").and_then(Value::as_object) {
        for (name, child) in props {
            schema_paths(format!("{path}.{name}"), child, out);
        }
    }
    if let Some(items) = node.get("items") {
        schema_paths(format!("{path}[]"), items, out);
    }
    if let Some(additional) = node.get("additionalProperties").filter(|v| v.is_object()) {
        schema_paths(format!("{path}{{}}"), additional, out);
    }
}

#[test]
fn manifests_together_use_every_field_of_every_crd() {
    let crds: BTreeMap<String, Value> = api::crd::all()
        .into_iter()
        .map(|crd| {
            (
                crd.spec.names.kind.clone(),
                serde_json::to_value(&crd).unwrap(),
            )
        })
        .collect();
    let mut used: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (_, doc) in manifests() {
        let kind = doc["kind"].as_str().unwrap().to_owned();
        let schema = &crds[&kind]["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
        document_paths(&doc, String::new(), schema, used.entry(kind).or_default());
    }
    let mut unused = Vec::new();
    for (kind, crd) in &crds {
        let mut all = BTreeSet::new();
        schema_paths(
            String::new(),
            &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"],
            &mut all,
        );
        for path in all.difference(used.get(kind).unwrap_or(&BTreeSet::new())) {
            unused.push(format!("{kind}: {path}"));
        }
    }
    assert!(
        unused.is_empty(),
        "fields no manifest uses:\n{}",
        unused.join("\n")
    );
}

#[test]
fn a_nodeclass_without_spec_reads_as_an_empty_one() {
    let value = serde_json::json!({
        "apiVersion": "karpenter.cluster.x-k8s.io/v1alpha1",
        "kind": "ClusterAPINodeClass",
        "metadata": {"name": "bare"},
    });
    let class = ClusterAPINodeClass::deserialize(&value).unwrap();
    assert_eq!(class.spec.scalable_resource_selector, None);
}

#[test]
fn a_manifest_with_an_unknown_operator_is_a_clear_error() {
    let value = serde_json::json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "bad"},
        "spec": {"template": {"spec": {
            "nodeClassRef": {"group": "g", "kind": "k", "name": "n"},
            "requirements": [{"key": "a", "operator": "Within", "values": ["x"]}],
        }}},
    });
    let err = NodePool::deserialize(&value).unwrap_err().to_string();
    assert!(err.contains("Within"), "{err}");
}
