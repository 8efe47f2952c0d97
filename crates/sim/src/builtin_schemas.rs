//! The OpenAPI schemas of the built-in kinds.
//!
//! Responsibility: for the built-in kinds of one group/version, the OpenAPI v3
//! `components.schemas` entries of each kind and of every type it references, named as
//! kube-apiserver names them (`io.k8s.api.apps.v1.Deployment`), each kind's own schema marked
//! with its `x-kubernetes-group-version-kind`, so `kubectl explain deployment.spec.template`
//! works against `sim serve` as against a real server. The schemas are k8s-openapi's (its
//! `schemars` feature: the same Kubernetes OpenAPI the client types are generated from).
//! Inputs: the group, version and kinds. Outputs: a map of schema name to schema.

use k8s_openapi::api::{
    apps, batch, coordination, core, discovery, events, networking, policy, rbac, scheduling,
    storage,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions;
use schemars::JsonSchema;
use schemars::generate::{SchemaGenerator, SchemaSettings};
use serde_json::{Map, Value, json};

/// Adds `T` (and what it references) to the generator; returns its schema name.
fn add<T: JsonSchema>(generator: &mut SchemaGenerator) -> String {
    let _ = generator.subschema_for::<T>();
    T::schema_name().into_owned()
}

/// The schema name of `kind`, after adding it; `None` for a kind without a known schema.
fn add_kind(
    generator: &mut SchemaGenerator,
    group: &str,
    version: &str,
    kind: &str,
) -> Option<String> {
    let g = generator;
    Some(match (group, version, kind) {
        ("", "v1", "Namespace") => add::<core::v1::Namespace>(g),
        ("", "v1", "Node") => add::<core::v1::Node>(g),
        ("", "v1", "Pod") => add::<core::v1::Pod>(g),
        ("", "v1", "Event") => add::<core::v1::Event>(g),
        ("", "v1", "ConfigMap") => add::<core::v1::ConfigMap>(g),
        ("", "v1", "Secret") => add::<core::v1::Secret>(g),
        ("", "v1", "ServiceAccount") => add::<core::v1::ServiceAccount>(g),
        ("", "v1", "Service") => add::<core::v1::Service>(g),
        ("", "v1", "PersistentVolumeClaim") => add::<core::v1::PersistentVolumeClaim>(g),
        ("", "v1", "PersistentVolume") => add::<core::v1::PersistentVolume>(g),
        ("", "v1", "ResourceQuota") => add::<core::v1::ResourceQuota>(g),
        ("discovery.k8s.io", "v1", "EndpointSlice") => add::<discovery::v1::EndpointSlice>(g),
        ("networking.k8s.io", "v1", "Ingress") => add::<networking::v1::Ingress>(g),
        ("scheduling.k8s.io", "v1", "PriorityClass") => add::<scheduling::v1::PriorityClass>(g),
        ("storage.k8s.io", "v1", "StorageClass") => add::<storage::v1::StorageClass>(g),
        ("rbac.authorization.k8s.io", "v1", "Role") => add::<rbac::v1::Role>(g),
        ("rbac.authorization.k8s.io", "v1", "RoleBinding") => add::<rbac::v1::RoleBinding>(g),
        ("rbac.authorization.k8s.io", "v1", "ClusterRole") => add::<rbac::v1::ClusterRole>(g),
        ("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding") => {
            add::<rbac::v1::ClusterRoleBinding>(g)
        }
        ("events.k8s.io", "v1", "Event") => add::<events::v1::Event>(g),
        ("coordination.k8s.io", "v1", "Lease") => add::<coordination::v1::Lease>(g),
        ("apps", "v1", "Deployment") => add::<apps::v1::Deployment>(g),
        ("apps", "v1", "ReplicaSet") => add::<apps::v1::ReplicaSet>(g),
        ("apps", "v1", "StatefulSet") => add::<apps::v1::StatefulSet>(g),
        ("apps", "v1", "DaemonSet") => add::<apps::v1::DaemonSet>(g),
        ("batch", "v1", "Job") => add::<batch::v1::Job>(g),
        ("batch", "v1", "CronJob") => add::<batch::v1::CronJob>(g),
        ("policy", "v1", "PodDisruptionBudget") => add::<policy::v1::PodDisruptionBudget>(g),
        ("apiextensions.k8s.io", "v1", "CustomResourceDefinition") => {
            add::<apiextensions::v1::CustomResourceDefinition>(g)
        }
        _ => return None,
    })
}

/// The `components.schemas` of `kinds` in `group`/`version` (kinds without a known schema are
/// left out).
#[must_use]
pub fn schemas(group: &str, version: &str, kinds: &[&str]) -> Map<String, Value> {
    let mut generator = SchemaSettings::openapi3().into_generator();
    let named: Vec<(String, &str)> = kinds
        .iter()
        .filter_map(|k| add_kind(&mut generator, group, version, k).map(|n| (n, *k)))
        .collect();
    let mut out = generator.take_definitions(true);
    for (name, kind) in named {
        if let Some(Value::Object(schema)) = out.get_mut(&name) {
            schema.insert(
                "x-kubernetes-group-version-kind".into(),
                json!([{"group": group, "version": version, "kind": kind}]),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    #[test]
    fn a_kind_comes_with_every_schema_it_references() {
        let s = schemas("apps", "v1", &["Deployment", "Unknown"]);
        let d = &s["io.k8s.api.apps.v1.Deployment"];
        assert_eq!(
            d["x-kubernetes-group-version-kind"],
            json!([{"group": "apps", "version": "v1", "kind": "Deployment"}])
        );
        // Every reference resolves within the document, as kubectl explain follows them.
        let text = serde_json::to_string(&s).unwrap();
        for r in text.split("\"$ref\":\"#/components/schemas/").skip(1) {
            let name = &r[..r.find('"').unwrap()];
            assert!(s.contains_key(name), "{name} is referenced but missing");
        }
        assert!(s.contains_key("io.k8s.api.core.v1.PodSpec"));
        assert!(s.contains_key("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"));
        // Only the kind asked for is marked.
        let marked = s
            .values()
            .filter(|v| v.get("x-kubernetes-group-version-kind").is_some())
            .count();
        assert_eq!(marked, 1);
    }
}
