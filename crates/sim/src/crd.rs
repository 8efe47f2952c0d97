//! CustomResourceDefinition semantics.
//!
//! Responsibility: what kube-apiserver's apiextensions controllers do to a CRD that is created
//! or updated — validate its names, default `spec.names`, and write the status that says the
//! resource is served (`NamesAccepted`, `Established`, `acceptedNames`, `storedVersions`) — here
//! synchronously, in the same write.
//! Inputs: a CRD object and the registry's existing resources. Outputs: the CRD to store and
//! its [`ResourceDef`], or a 422 [`ApiError`].

use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult, GroupResource};
use crate::object::{self, as_map, now_rfc3339};
use crate::registry::{RefVersions, Registry, ResourceDef, def_from_crd, version_priority};
use crate::store::Store;

const CRD_KIND: &str = "CustomResourceDefinition";
const CRD_GROUP: &str = "apiextensions.k8s.io";

fn invalid(name: &str, cause: String) -> ApiError {
    ApiError::invalid(CRD_KIND, CRD_GROUP, name, cause)
}

/// Validate and default a CRD; returns the resource it declares.
pub fn prepare(crd: &mut Value, registry: &Registry) -> ApiResult<ResourceDef> {
    let name = object::name(crd).to_owned();
    let spec = crd.get("spec").cloned().unwrap_or(Value::Null);
    let group = spec
        .get("group")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let names = spec.get("names").cloned().unwrap_or(Value::Null);
    let plural = names
        .get("plural")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let kind = names
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if group.is_empty() || plural.is_empty() || kind.is_empty() {
        return Err(invalid(
            &name,
            "spec: Required value: group, names.plural and names.kind are required".into(),
        ));
    }
    if name != format!("{plural}.{group}") {
        return Err(invalid(
            &name,
            format!(
                "metadata.name: Invalid value: {name:?}: must be spec.names.plural+\".\"+spec.group"
            ),
        ));
    }
    let scope = spec
        .get("scope")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if scope != "Namespaced" && scope != "Cluster" {
        return Err(invalid(
            &name,
            format!(
                "spec.scope: Unsupported value: {scope:?}: supported values: \"Cluster\", \"Namespaced\""
            ),
        ));
    }
    let versions = spec
        .get("versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let storage = versions
        .iter()
        .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .count();
    if storage != 1 {
        return Err(invalid(
            &name,
            "spec.versions: Invalid value: must have exactly one version marked as storage version"
                .into(),
        ));
    }
    if let Some(existing) = registry.get(&crate::error::GroupResource::new(group, plural))
        && !existing.custom
    {
        return Err(invalid(
            &name,
            format!("spec.names.plural: Invalid value: {plural:?}: is served by a built-in API"),
        ));
    }
    let causes: Vec<String> = versions
        .iter()
        .enumerate()
        .filter_map(|(i, v)| {
            let schema = v.get("schema")?.get("openAPIV3Schema")?;
            Some(crate::validation::check_crd(
                schema,
                &format!("spec.versions[{i}].schema.openAPIV3Schema"),
            ))
        })
        .flatten()
        .collect();
    if !causes.is_empty() {
        return Err(ApiError::Invalid {
            group: CRD_GROUP.into(),
            kind: CRD_KIND.into(),
            name,
            causes,
        });
    }
    // Defaults kube-apiserver writes into spec.names.
    let names_map = as_map(
        as_map(as_map(crd).entry("spec").or_insert(json!({})))
            .entry("names")
            .or_insert(json!({})),
    );
    names_map
        .entry("singular")
        .or_insert_with(|| json!(kind.to_lowercase()));
    names_map
        .entry("listKind")
        .or_insert_with(|| json!(format!("{kind}List")));
    def_from_crd(crd).ok_or_else(|| invalid(&name, "spec.versions: Required value".into()))
}

/// The status the apiextensions controllers give an accepted CRD; `previous` is the stored
/// status, whose `storedVersions` are kept.
pub fn status(crd: &Value, previous: Option<&Value>) -> Value {
    let spec = crd.get("spec").cloned().unwrap_or(Value::Null);
    let storage = spec
        .get("versions")
        .and_then(Value::as_array)
        .and_then(|vs| {
            vs.iter()
                .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        })
        .and_then(|v| v.get("name"))
        .cloned()
        .unwrap_or(Value::Null);
    let mut stored: Vec<Value> = previous
        .and_then(|p| p.get("storedVersions"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if !stored.contains(&storage) {
        stored.push(storage);
    }
    let since = previous
        .and_then(|p| p.get("conditions"))
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .and_then(|c| c.get("lastTransitionTime"))
        .cloned()
        .unwrap_or_else(|| json!(now_rfc3339()));
    json!({
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
             "message": "no conflicts found", "lastTransitionTime": since},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
             "message": "the initial names have been accepted", "lastTransitionTime": since},
        ],
        "acceptedNames": spec.get("names").cloned().unwrap_or(Value::Null),
        "storedVersions": stored,
    })
}

/// The version each served kind's references name when Cluster API serves them as v1beta1
/// ([`crate::registry::CapiConversion`]): as CAPI reads it from the kind's CRD, the latest
/// version its contract label lists (`cluster.x-k8s.io/v1beta2: v1beta1_v1beta2`, the v1beta2
/// contract before the v1beta1 one), else the kind's preferred version.
pub fn ref_versions(registry: &Registry, store: &Store) -> RefVersions {
    let crds = GroupResource::new(CRD_GROUP, "customresourcedefinitions");
    registry
        .iter()
        .map(|d| {
            let crd = store.get(&crds, "", &format!("{}.{}", d.plural, d.group));
            let labelled = crd.and_then(|crd| {
                let labels = object::labels(crd);
                ["v1beta2", "v1beta1"].into_iter().find_map(|contract| {
                    let listed = labels.get(&format!("cluster.x-k8s.io/{contract}"))?;
                    let mut versions: Vec<&str> = listed
                        .as_str()?
                        .split('_')
                        .filter(|v| !v.is_empty())
                        .collect();
                    versions.sort_by_key(|v| version_priority(v));
                    versions.first().map(|v| (*v).to_owned())
                })
            });
            let version = labelled.unwrap_or_else(|| d.preferred_version().to_owned());
            ((d.group.clone(), d.kind.clone()), version)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd(name: &str) -> Value {
        json!({"metadata": {"name": name}, "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true}]
        }})
    }

    #[test]
    fn accepts_and_defaults_names() {
        let mut c = crd("widgets.example.com");
        let def = prepare(&mut c, &Registry::with_builtins()).unwrap();
        assert_eq!(def.kind, "Widget");
        assert_eq!(c["spec"]["names"]["listKind"], "WidgetList");
        let st = status(&c, None);
        assert_eq!(st["conditions"][1]["type"], "Established");
        assert_eq!(st["storedVersions"], json!(["v1"]));
    }

    #[test]
    fn rejects_bad_names_and_builtin_clashes() {
        let mut c = crd("wrong.example.com");
        assert_eq!(
            prepare(&mut c, &Registry::with_builtins())
                .unwrap_err()
                .code(),
            422
        );
        let mut pods = json!({"metadata": {"name": "pods"}, "spec": {
            "group": "", "scope": "Namespaced",
            "names": {"plural": "pods", "kind": "Pod"},
            "versions": [{"name": "v1", "served": true, "storage": true}]
        }});
        assert!(prepare(&mut pods, &Registry::with_builtins()).is_err());
    }
}
