//! Discovery documents.
//!
//! Responsibility: the legacy discovery documents kube-rs and kubectl read — `/version` (its
//! answer marked with [`SIM_HEADER`], so clients can tell sim from kube-apiserver),
//! `/api` (APIVersions), `/apis` (APIGroupList), `/apis/<group>` (APIGroup) and
//! `/api/v1`, `/apis/<group>/<version>` (APIResourceList with verbs, scope, kind, short names,
//! categories, singular names and subresources such as `pods/status` and `*/scale` whose
//! group/version/kind is `autoscaling/v1 Scale`; the `authorization.k8s.io` access reviews list
//! only `create`, as they are create-only). Aggregated discovery is not served: clients
//! that ask for it (kubectl) accept the plain `application/json` answer and use these.
//! Inputs: the [`Registry`]. Outputs: JSON documents.

use serde_json::{Value, json};

use crate::registry::{Registry, ResourceDef, Special};

const VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// The header sim's `/version` answers carry (`true`), so a client can tell sim from a real
/// kube-apiserver (e.g. to install CRDs with a conversion webhook only sim can stand in for).
pub const SIM_HEADER: &str = "x-karpenter-capi-sim";

/// `/version`.
pub fn version(git_version: &str) -> Value {
    let (major, minor) = git_version
        .trim_start_matches('v')
        .split_once('.')
        .map(|(ma, rest)| {
            (
                ma.to_owned(),
                rest.split('.').next().unwrap_or("0").to_owned(),
            )
        })
        .unwrap_or_else(|| ("1".into(), "33".into()));
    json!({
        "major": major,
        "minor": minor,
        "gitVersion": git_version,
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2025-01-01T00:00:00Z",
        "goVersion": "go1.24.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

/// `/api`.
pub fn core_versions() -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}],
    })
}

fn group_json(name: &str, versions: &[String]) -> Value {
    let gv = |v: &String| json!({"groupVersion": format!("{name}/{v}"), "version": v});
    json!({
        "name": name,
        "versions": versions.iter().map(gv).collect::<Vec<_>>(),
        "preferredVersion": versions.first().map(gv).unwrap_or(Value::Null),
    })
}

/// `/apis`.
pub fn group_list(reg: &Registry) -> Value {
    json!({
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": reg.groups().iter().map(|(g, vs)| group_json(g, vs)).collect::<Vec<_>>(),
    })
}

/// `/apis/<group>`, if the group exists.
pub fn group(reg: &Registry, name: &str) -> Option<Value> {
    let groups = reg.groups();
    let (_, versions) = groups.iter().find(|(g, _)| g == name)?;
    let mut doc = group_json(name, versions);
    if let Some(m) = doc.as_object_mut() {
        m.insert("kind".into(), json!("APIGroup"));
        m.insert("apiVersion".into(), json!("v1"));
    }
    Some(doc)
}

fn resource_entries(def: &ResourceDef) -> Vec<Value> {
    let verbs: &[&str] = if def.special == Special::AccessReview {
        &["create"]
    } else {
        VERBS
    };
    let mut out = vec![json!({
        "name": def.plural,
        "singularName": def.singular,
        "namespaced": def.namespaced,
        "kind": def.kind,
        "verbs": verbs,
        "shortNames": def.short_names,
        "categories": def.categories,
    })];
    let sub = |name: &str, verbs: &[&str]| {
        json!({
            "name": format!("{}/{name}", def.plural),
            "singularName": "",
            "namespaced": def.namespaced,
            "kind": def.kind,
            "verbs": verbs,
        })
    };
    if def.status {
        out.push(sub("status", &["get", "patch", "update"]));
    }
    if def.scale.is_some() {
        out.push(json!({
            "name": format!("{}/scale", def.plural),
            "singularName": "",
            "namespaced": def.namespaced,
            "group": "autoscaling",
            "version": "v1",
            "kind": "Scale",
            "verbs": ["get", "patch", "update"],
        }));
    }
    if def.special == Special::Pod {
        let mut binding = sub("binding", &["create"]);
        if let Some(m) = binding.as_object_mut() {
            m.insert("kind".into(), json!("Binding"));
        }
        out.push(binding);
        out.push(json!({
            "name": "pods/eviction",
            "singularName": "",
            "namespaced": true,
            "group": "policy",
            "version": "v1",
            "kind": "Eviction",
            "verbs": ["create"],
        }));
    }
    for e in &mut out {
        // Empty lists are omitted, as kube-apiserver's JSON does.
        if let Some(m) = e.as_object_mut() {
            m.retain(|_, v| v.as_array().is_none_or(|a| !a.is_empty()));
        }
    }
    out
}

/// `/api/v1` or `/apis/<group>/<version>`, if served.
pub fn resource_list(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    let mut defs = reg.in_group_version(group, version);
    if defs.is_empty() {
        return None;
    }
    defs.sort_by(|a, b| a.plural.cmp(&b.plural));
    let gv = if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    };
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": gv,
        "resources": defs.into_iter().flat_map(resource_entries).collect::<Vec<_>>(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_resources_list_subresources() {
        let reg = Registry::with_builtins();
        let list = resource_list(&reg, "", "v1").unwrap();
        let names: Vec<&str> = list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        for want in [
            "pods",
            "pods/status",
            "pods/binding",
            "nodes",
            "namespaces",
            "events",
        ] {
            assert!(names.contains(&want), "{want} missing from {names:?}");
        }
        let pods = &list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == "pods")
            .unwrap();
        assert_eq!(pods["shortNames"], json!(["po"]));
        assert_eq!(pods["namespaced"], true);
    }

    #[test]
    fn scale_subresource_names_autoscaling() {
        let reg = Registry::with_builtins();
        let list = resource_list(&reg, "apps", "v1").unwrap();
        let scale = list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == "deployments/scale")
            .unwrap();
        assert_eq!(scale["group"], "autoscaling");
        assert_eq!(scale["kind"], "Scale");
        assert!(resource_list(&reg, "apps", "v9").is_none());
    }

    #[test]
    fn groups_have_preferred_versions() {
        let reg = Registry::with_builtins();
        let g = group(&reg, "coordination.k8s.io").unwrap();
        assert_eq!(
            g["preferredVersion"]["groupVersion"],
            "coordination.k8s.io/v1"
        );
        assert!(group(&reg, "nope.io").is_none());
        let v = version("v1.33.0-sim");
        assert_eq!(v["minor"], "33");
    }

    /// As kube-apiserver lists them: four create-only kinds, one of them namespaced.
    #[test]
    fn access_reviews_are_create_only() {
        let reg = Registry::with_builtins();
        let g = group(&reg, "authorization.k8s.io").unwrap();
        assert_eq!(
            g["preferredVersion"]["groupVersion"],
            "authorization.k8s.io/v1"
        );
        let list = resource_list(&reg, "authorization.k8s.io", "v1").unwrap();
        assert_eq!(
            list["resources"],
            json!([
                {"name": "localsubjectaccessreviews", "singularName": "localsubjectaccessreview",
                 "namespaced": true, "kind": "LocalSubjectAccessReview", "verbs": ["create"]},
                {"name": "selfsubjectaccessreviews", "singularName": "selfsubjectaccessreview",
                 "namespaced": false, "kind": "SelfSubjectAccessReview", "verbs": ["create"]},
                {"name": "selfsubjectrulesreviews", "singularName": "selfsubjectrulesreview",
                 "namespaced": false, "kind": "SelfSubjectRulesReview", "verbs": ["create"]},
                {"name": "subjectaccessreviews", "singularName": "subjectaccessreview",
                 "namespaced": false, "kind": "SubjectAccessReview", "verbs": ["create"]},
            ])
        );
    }
}
