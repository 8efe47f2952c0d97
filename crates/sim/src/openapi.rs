//! A minimal OpenAPI v3 document set.
//!
//! Responsibility: the `/openapi/v3` index and one document per served group/version, holding
//! for each resource the PATCH operation tagged with its group/version/kind and the
//! `fieldValidation` query parameter (for the create-only access reviews, their POST). That is what `kubectl apply`/`create -f` look for to
//! decide the server validates fields itself; finding it, kubectl skips client-side schema
//! validation (which would need the full `/openapi/v2` schema, not served: 404). Custom
//! resources' structural schemas are published under `components.schemas` with their
//! `x-kubernetes-group-version-kind`, named as kube-apiserver names them (the group reversed,
//! then version and kind: `sh.karpenter.v1.NodePool`), so `kubectl explain` works for them;
//! built-in kinds' schemas come from [`crate::builtin_schemas`].
//! Inputs: the [`Registry`]. Outputs: JSON documents.

use serde_json::{Map, Value, json};

use crate::registry::{Registry, Special};

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

/// `/openapi/v3/<api/v1 | apis/<group>/<version>>`, if served.
pub fn group_version(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    let defs = reg.in_group_version(group, version);
    if defs.is_empty() {
        return None;
    }
    let mut paths = Map::new();
    let builtin: Vec<&str> = defs
        .iter()
        .filter(|d| !d.custom && d.special != Special::AccessReview)
        .map(|d| d.kind.as_str())
        .collect();
    let mut schemas = crate::builtin_schemas::schemas(group, version, &builtin);
    for d in &defs {
        if let Some(schema) = d.schemas.get(version) {
            let mut schema = schema.clone();
            if let Some(map) = schema.as_object_mut() {
                map.insert(
                    "x-kubernetes-group-version-kind".into(),
                    json!([{"group": group, "version": version, "kind": d.kind}]),
                );
            }
            schemas.insert(schema_name(group, version, &d.kind), schema);
        }
    }
    for d in defs {
        let prefix = format!("/{}", gv_path(group, version));
        if d.special == Special::AccessReview {
            let path = if d.namespaced {
                format!("{prefix}/namespaces/{{namespace}}/{}", d.plural)
            } else {
                format!("{prefix}/{}", d.plural)
            };
            paths.insert(
                path,
                json!({"post": {
                    "operationId": format!("create{}", d.kind),
                    "x-kubernetes-action": "post",
                    "x-kubernetes-group-version-kind": {"group": group, "version": version, "kind": d.kind},
                    "responses": {"201": {"description": "Created"}}
                }}),
            );
            continue;
        }
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
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.33.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

/// kube-apiserver's name of a custom resource's schema: `sh.karpenter.v1.NodePool`.
fn schema_name(group: &str, version: &str, kind: &str) -> String {
    let reversed: Vec<&str> = group.split('.').rev().collect();
    format!("{}.{version}.{kind}", reversed.join("."))
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
    fn documents_declare_field_validation_on_patch() {
        let reg = Registry::with_builtins();
        let doc = group_version(&reg, "apps", "v1").unwrap();
        let op = &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
        assert_eq!(op["x-kubernetes-group-version-kind"]["kind"], "Deployment");
        assert_eq!(op["parameters"][0]["name"], "fieldValidation");
        assert!(group_version(&reg, "apps", "v7").is_none());
    }

    /// A custom resource's schema is published with its GVK, as `kubectl explain` looks it up.
    #[test]
    fn custom_resource_schemas_are_published_for_explain() {
        let mut reg = Registry::with_builtins();
        let crd = api::crd::all()
            .into_iter()
            .find(|c| c.spec.names.kind == "NodePool")
            .map(|c| serde_json::to_value(c).unwrap())
            .unwrap();
        reg.insert(crate::registry::def_from_crd(&crd).unwrap());
        let doc = group_version(&reg, "karpenter.sh", "v1").unwrap();
        let schema = &doc["components"]["schemas"]["sh.karpenter.v1.NodePool"];
        assert_eq!(
            schema["x-kubernetes-group-version-kind"],
            json!([{"group": "karpenter.sh", "version": "v1", "kind": "NodePool"}])
        );
        assert!(schema["properties"]["spec"]["properties"]["disruption"].is_object());
        let apps = group_version(&reg, "apps", "v1").unwrap();
        assert_eq!(
            apps["components"]["schemas"]["io.k8s.api.apps.v1.Deployment"]["x-kubernetes-group-version-kind"]
                [0]["kind"],
            "Deployment",
            "built-in kinds are published too"
        );
    }
}
