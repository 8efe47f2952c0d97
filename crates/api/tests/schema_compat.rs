//! Compatibility of our CRDs with upstream's.
//!
//! Walks the OpenAPI schemas of the upstream CRDs in `../shared/fixtures/upstream-crds/` (and
//! NodeOverlay's and CapacityBuffer's in `upstream-crds-gated/`) and of ours, and fails for any upstream property path ours lacks, types differently, or validates
//! differently (patterns, enums, required fields, defaults, bounds, list/map types, CEL rules).
//! Deliberate differences are listed in [`EXCEPTIONS`], each with its reason. Descriptions are
//! prose and are not compared.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::Value;

/// (CRD name, schema path, keyword, why ours differs on purpose).
const EXCEPTIONS: &[(&str, &str, &str, &str)] = &[
    (
        "clusterapinodeclasses.karpenter.cluster.x-k8s.io",
        ".status.conditions",
        "x-kubernetes-list-type",
        "conditions are a list-map keyed by type, as on NodePools and NodeClaims, so server-side \
         apply merges them per condition; accepts exactly the same documents",
    ),
    (
        "clusterapinodeclasses.karpenter.cluster.x-k8s.io",
        ".status.conditions",
        "x-kubernetes-list-map-keys",
        "goes with the list-map type above",
    ),
];

/// Keywords compared besides `type`.
const KEYWORDS: &[&str] = &[
    "format",
    "enum",
    "pattern",
    "required",
    "default",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "maxProperties",
    "x-kubernetes-int-or-string",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
    "x-kubernetes-validations",
    "x-kubernetes-preserve-unknown-fields",
];

fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures")
}

/// Upstream's CRDs: the three of `upstream-crds/`, and the NodeOverlay and CapacityBuffer CRDs
/// of `upstream-crds-gated/`.
fn upstream_crds() -> BTreeMap<String, Value> {
    let dir = fixtures_dir().join("upstream-crds");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("upstream CRD fixtures missing at {}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .collect();
    assert_eq!(
        paths.len(),
        3,
        "expected the three upstream CRDs in {}",
        dir.display()
    );
    paths.push(fixtures_dir().join("upstream-crds-gated/karpenter.sh_nodeoverlays.yaml"));
    paths
        .push(fixtures_dir().join("upstream-crds-gated/autoscaling.x-k8s.io_capacitybuffers.yaml"));
    let mut crds = BTreeMap::new();
    for path in paths {
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        let crd: Value = serde_norway::from_str(&text).unwrap();
        let name = crd["metadata"]["name"].as_str().unwrap().to_owned();
        crds.insert(name, crd);
    }
    crds
}

fn our_crds() -> BTreeMap<String, Value> {
    api::crd::all()
        .into_iter()
        .map(|crd| {
            let value = serde_json::to_value(&crd).unwrap();
            (crd.metadata.name.unwrap(), value)
        })
        .collect()
}

/// Flattens a schema into path → node. Paths look like `.spec.template.labels{}` (map values)
/// and `.spec.requirements[]` (array items).
fn walk(path: String, node: &Value, out: &mut BTreeMap<String, Value>) {
    if let Some(props) = node.get("properties").and_then(Value::as_object) {
        for (name, child) in props {
            walk(format!("{path}.{name}"), child, out);
        }
    }
    if let Some(items) = node.get("items") {
        walk(format!("{path}[]"), items, out);
    }
    if let Some(additional) = node.get("additionalProperties").filter(|v| v.is_object()) {
        walk(format!("{path}{{}}"), additional, out);
    }
    out.insert(path, node.clone());
}

/// Normalises a keyword's value so equal meanings compare equal: numbers as f64, `required`
/// and `enum` as sorted sets.
fn normalise(keyword: &str, value: &Value) -> Value {
    match (keyword, value) {
        (_, Value::Number(n)) => serde_json::json!(n.as_f64()),
        ("required" | "enum", Value::Array(items)) => {
            let mut items = items.clone();
            items.sort_by_key(|v| v.to_string());
            Value::Array(items)
        }
        _ => value.clone(),
    }
}

fn schema_of(crd: &Value) -> &Value {
    &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
}

fn is_exception(crd: &str, path: &str, keyword: &str) -> bool {
    EXCEPTIONS
        .iter()
        .any(|(c, p, k, _)| *c == crd && *p == path && *k == keyword)
}

#[test]
fn every_upstream_property_exists_in_ours_with_the_same_type_and_validation() {
    let upstream = upstream_crds();
    let ours = our_crds();
    let mut problems = Vec::new();
    for (name, up) in &upstream {
        let Some(our) = ours.get(name) else {
            problems.push(format!("{name}: we do not generate this CRD"));
            continue;
        };
        let (mut up_paths, mut our_paths) = (BTreeMap::new(), BTreeMap::new());
        walk(String::new(), schema_of(up), &mut up_paths);
        walk(String::new(), schema_of(our), &mut our_paths);
        for (path, up_node) in &up_paths {
            let Some(our_node) = our_paths.get(path) else {
                if !is_exception(name, path, "*") {
                    problems.push(format!("{name}: missing property {path:?}"));
                }
                continue;
            };
            for keyword in std::iter::once("type").chain(KEYWORDS.iter().copied()) {
                let a = up_node.get(keyword).map(|v| normalise(keyword, v));
                let b = our_node.get(keyword).map(|v| normalise(keyword, v));
                if a != b && !is_exception(name, path, keyword) {
                    problems.push(format!(
                        "{name}: {path:?} {keyword}: upstream {} vs ours {}",
                        a.map_or("(absent)".into(), |v| v.to_string()),
                        b.map_or("(absent)".into(), |v| v.to_string()),
                    ));
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "{} incompatibilities:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn names_scope_subresources_and_printer_columns_match_upstream() {
    let upstream = upstream_crds();
    let ours = our_crds();
    for (name, up) in &upstream {
        let our = &ours[name];
        assert_eq!(up["spec"]["group"], our["spec"]["group"], "{name} group");
        assert_eq!(up["spec"]["scope"], our["spec"]["scope"], "{name} scope");
        assert_eq!(up["spec"]["names"], our["spec"]["names"], "{name} names");
        let (uv, ov) = (&up["spec"]["versions"][0], &our["spec"]["versions"][0]);
        for key in [
            "name",
            "served",
            "storage",
            "subresources",
            "additionalPrinterColumns",
        ] {
            assert_eq!(
                uv.get(key).map(|v| normalise(key, v)),
                ov.get(key).map(|v| normalise(key, v)),
                "{name} versions[0].{key}"
            );
        }
    }
}

#[test]
fn exceptions_are_still_needed() {
    let upstream = upstream_crds();
    let ours = our_crds();
    for (crd, path, keyword, reason) in EXCEPTIONS {
        let mut up_paths = BTreeMap::new();
        let mut our_paths = BTreeMap::new();
        walk(String::new(), schema_of(&upstream[*crd]), &mut up_paths);
        walk(String::new(), schema_of(&ours[*crd]), &mut our_paths);
        let same = match (up_paths.get(*path), our_paths.get(*path)) {
            (Some(_), None) => false,
            (Some(a), Some(b)) => a.get(*keyword) == b.get(*keyword),
            (None, _) => true,
        };
        assert!(
            !same,
            "exception {crd} {path} {keyword} ({reason}) no longer differs: remove it"
        );
    }
}
