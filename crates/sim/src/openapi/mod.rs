//! OpenAPI documents: `/openapi/v3`, `/openapi/v3/<api/v1 | apis/<group>/<version>>` and
//! `/openapi/v2`.
//!
//! Responsibility: publish the schemas of the served kinds as kube-apiserver does, for `kubectl
//! explain`, for kubectl's apply (strategic-merge-patch metadata) and for any client that reads
//! them. Built-in kinds come from [`builtin`] (k8s-openapi's schemas); custom resources from
//! their CRD's `openAPIV3Schema`, named `<reversed group>.<version>.<Kind>` with `metadata` a
//! reference to `ObjectMeta`. Each kind carries `x-kubernetes-group-version-kind`.
//! - v3: an index of one document per served group/version; each document holds, for every
//!   resource, a PATCH operation tagged with its group/version/kind and the `fieldValidation`
//!   query parameter (kubectl looks for it to leave field validation to the server), and in
//!   `components.schemas` the kinds of that group/version and every definition they refer to.
//! - v2: one document with every definition (`#/definitions/…`); as JSON, or as the protobuf
//!   kubectl asks for (`application/com.github.proto-openapi.spec.v2@v1.0+protobuf`, see
//!   [`v2proto`]).
//!
//! Inputs: the [`Registry`]. Outputs: JSON documents (and protobuf bytes).

pub mod builtin;
pub mod v2proto;

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

use crate::registry::{Registry, ResourceDef};
use builtin::{builtins, ref_name};

/// The `Accept` type of the protobuf v2 document.
pub const V2_PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// Every served `(group, version)`, the core group first.
fn group_versions(reg: &Registry) -> Vec<(String, String)> {
    let mut out = vec![(String::new(), "v1".to_owned())];
    for (g, versions) in reg.groups() {
        out.extend(versions.into_iter().map(|v| (g.clone(), v)));
    }
    out
}

/// `/openapi/v3`.
pub fn index(reg: &Registry, generation: u64) -> Value {
    let paths: Map<String, Value> = group_versions(reg)
        .into_iter()
        .map(|(g, v)| {
            let p = gv_path(&g, &v);
            let url = format!("/openapi/v3/{p}?hash={generation:016X}");
            (p, json!({"serverRelativeURL": url}))
        })
        .collect();
    json!({"paths": paths})
}

/// The name a custom resource's schema is published under: `sh.karpenter.v1.NodePool`.
pub fn custom_schema_name(group: &str, version: &str, kind: &str) -> String {
    let reversed: Vec<&str> = group.split('.').rev().collect();
    format!("{}.{version}.{kind}", reversed.join("."))
}

/// A custom resource's published schema: the CRD's, with the standard `apiVersion`, `kind` and
/// `metadata` properties and its group/version/kind.
pub fn custom_schema(def: &ResourceDef, version: &str, schema: &Value) -> Value {
    let mut s = schema.clone();
    let builtin = builtins();
    let deployment = builtin
        .definitions
        .get("io.k8s.api.apps.v1.Deployment")
        .and_then(|d| d.get("properties"));
    if let Value::Object(m) = &mut s {
        let props = m
            .entry("properties")
            .or_insert_with(|| json!({}))
            .as_object_mut();
        if let Some(props) = props {
            for field in ["apiVersion", "kind", "metadata"] {
                if let Some(standard) = deployment.and_then(|p| p.get(field)) {
                    props.insert(field.into(), standard.clone());
                }
            }
        }
        m.insert(
            "x-kubernetes-group-version-kind".into(),
            json!([{"group": def.group, "version": version, "kind": def.kind}]),
        );
    }
    s
}

/// The names of the definitions `v` refers to, directly.
fn refs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                match (k.as_str(), x) {
                    ("$ref", Value::String(r)) => out.push(ref_name(r).to_owned()),
                    _ => refs(x, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| refs(x, out)),
        _ => {}
    }
}

/// The roots and every definition they refer to, transitively.
fn closure(roots: BTreeMap<String, Value>) -> BTreeMap<String, Value> {
    let all = &builtins().definitions;
    let mut out = BTreeMap::new();
    let mut todo: Vec<String> = Vec::new();
    for (name, schema) in roots {
        refs(&schema, &mut todo);
        out.insert(name, schema);
    }
    while let Some(name) = todo.pop() {
        if out.contains_key(&name) {
            continue;
        }
        if let Some(schema) = all.get(&name) {
            refs(schema, &mut todo);
            out.insert(name, schema.clone());
        }
    }
    out
}

/// The schemas of the kinds served in `group/version` (every group/version if `None`), with
/// every definition they refer to; references in OpenAPI v3 form.
pub fn schemas(reg: &Registry, only: Option<(&str, &str)>) -> BTreeMap<String, Value> {
    let mut roots = BTreeMap::new();
    for def in reg.iter() {
        for version in &def.versions {
            if only.is_some_and(|(g, v)| g != def.group || v != version) {
                continue;
            }
            if def.custom {
                if let Some(schema) = def.schemas.get(version) {
                    let name = custom_schema_name(&def.group, version, &def.kind);
                    roots.insert(name, custom_schema(def, version, schema));
                }
            } else if let Some(name) = builtin::kind_schema(&def.group, version, &def.kind)
                && let Some(schema) = builtins().definitions.get(name)
            {
                roots.insert(name.to_owned(), schema.clone());
            }
        }
    }
    if roots.is_empty() {
        return roots;
    }
    roots.insert(
        OBJECT_META.to_owned(),
        builtins()
            .definitions
            .get(OBJECT_META)
            .cloned()
            .unwrap_or(json!({})),
    );
    closure(roots)
}

/// `/openapi/v3/<api/v1 | apis/<group>/<version>>`, if served.
pub fn group_version(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    let defs = reg.in_group_version(group, version);
    if defs.is_empty() {
        return None;
    }
    let mut paths = Map::new();
    for d in defs {
        let prefix = format!("/{}", gv_path(group, version));
        let path = if d.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}/{{name}}", d.plural)
        } else {
            format!("{prefix}/{}/{{name}}", d.plural)
        };
        paths.insert(
            path,
            json!({"patch": {
                "operationId": format!("patch{}", d.kind),
                "x-kubernetes-action": "patch",
                "x-kubernetes-group-version-kind": {"group": group, "version": version, "kind": d.kind},
                "parameters": [
                    {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
                    {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
                    {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
                    {"name": "force", "in": "query", "schema": {"type": "boolean", "uniqueItems": true}}
                ],
                "responses": {"200": {"description": "OK"}}
            }}),
        );
    }
    let schemas: Map<String, Value> = schemas(reg, Some((group, version))).into_iter().collect();
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.33.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

/// A v3 schema in v2 form: references into `#/definitions/`, `allOf` of one reference
/// replaced by the reference.
fn to_v2(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut out = Map::new();
            for (k, x) in m {
                match (k.as_str(), x) {
                    ("$ref", Value::String(r)) => {
                        out.insert(k.clone(), json!(format!("#/definitions/{}", ref_name(r))));
                    }
                    ("allOf", Value::Array(a))
                        if a.len() == 1 && a.iter().all(|s| s.get("$ref").is_some()) =>
                    {
                        if let Some(Value::Object(inner)) = a.first().map(to_v2) {
                            out.extend(inner);
                        }
                    }
                    _ => {
                        out.insert(k.clone(), to_v2(x));
                    }
                }
            }
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(a.iter().map(to_v2).collect()),
        other => other.clone(),
    }
}

/// `/openapi/v2` as JSON.
pub fn v2(reg: &Registry) -> Value {
    let definitions: Map<String, Value> = schemas(reg, None)
        .into_iter()
        .map(|(k, v)| (k, to_v2(&v)))
        .collect();
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": "v1.33.0"},
        "paths": {},
        "definitions": definitions,
    })
}

/// The names of every published definition (for tests and diagnostics).
pub fn definition_names(reg: &Registry) -> BTreeSet<String> {
    schemas(reg, None).into_keys().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_lists_every_group_version() {
        let reg = Registry::with_builtins();
        let idx = index(&reg, 1);
        assert!(
            idx["paths"]["api/v1"]["serverRelativeURL"]
                .as_str()
                .unwrap()
                .starts_with("/openapi/v3/api/v1?hash=")
        );
        assert!(idx["paths"].get("apis/apps/v1").is_some());
    }

    #[test]
    fn documents_declare_field_validation_and_schemas() {
        let reg = Registry::with_builtins();
        let doc = group_version(&reg, "apps", "v1").unwrap();
        let op = &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
        assert_eq!(op["x-kubernetes-group-version-kind"]["kind"], "Deployment");
        assert_eq!(op["parameters"][0]["name"], "fieldValidation");
        let schemas = &doc["components"]["schemas"];
        assert!(schemas.get("io.k8s.api.apps.v1.Deployment").is_some());
        assert!(schemas.get("io.k8s.api.core.v1.Container").is_some());
        assert!(schemas.get("io.k8s.api.batch.v1.Job").is_none());
        assert!(group_version(&reg, "apps", "v7").is_none());
    }

    #[test]
    fn custom_resources_are_named_by_reversed_group() {
        assert_eq!(
            custom_schema_name("karpenter.sh", "v1", "NodePool"),
            "sh.karpenter.v1.NodePool"
        );
    }

    #[test]
    fn v2_uses_definitions() {
        let reg = Registry::with_builtins();
        let doc = v2(&reg);
        let spec = &doc["definitions"]["io.k8s.api.apps.v1.Deployment"]["properties"]["spec"];
        assert_eq!(
            spec["$ref"],
            "#/definitions/io.k8s.api.apps.v1.DeploymentSpec"
        );
        assert!(!doc.to_string().contains("#/components/schemas"));
    }
}
