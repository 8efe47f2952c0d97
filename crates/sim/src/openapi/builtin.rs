//! The schemas of the built-in kinds.
//!
//! Responsibility: the OpenAPI v3 schema of every built-in kind the server serves and of every
//! type they refer to, named as kube-apiserver names them (`io.k8s.api.apps.v1.Deployment`),
//! from k8s-openapi's `schemars` support (Kubernetes v1.33); references point into
//! `#/components/schemas/`, a reference with a description is wrapped in `allOf` as
//! kube-apiserver does. Added to them: `x-kubernetes-group-version-kind` on each kind, and the
//! strategic-merge-patch metadata of the Go types (`x-kubernetes-patch-strategy`,
//! `x-kubernetes-patch-merge-key`, from `proto/patch-metadata.txt`), which kubectl uses to
//! compute apply patches. `metadata` is not `required` (k8s-openapi marks it so).
//! Inputs: none. Outputs: [`definitions`], [`kind_schema`] (computed once).

use std::collections::BTreeMap;
use std::sync::LazyLock;

use k8s_openapi::schemars::JsonSchema;
use k8s_openapi::schemars::generate::{SchemaGenerator, SchemaSettings};
use serde_json::{Value, json};

/// `(group, version, kind)`.
pub type Gvk = (String, String, String);

/// The built-in definitions and the definition of each kind.
#[derive(Debug, Default)]
pub struct Builtins {
    /// Every definition, by name.
    pub definitions: BTreeMap<String, Value>,
    /// The definition name of each kind.
    pub kinds: BTreeMap<Gvk, String>,
}

const PATCH_METADATA: &str = include_str!("../../proto/patch-metadata.txt");

macro_rules! kinds {
    ($gen:ident, $out:ident, $($ty:ty),* $(,)?) => {
        $(
            $gen.subschema_for::<$ty>();
            $out.insert(
                (
                    <$ty as k8s_openapi::Resource>::GROUP.to_owned(),
                    <$ty as k8s_openapi::Resource>::VERSION.to_owned(),
                    <$ty as k8s_openapi::Resource>::KIND.to_owned(),
                ),
                <$ty as JsonSchema>::schema_name().into_owned(),
            );
        )*
    };
}

fn build() -> Builtins {
    use k8s_openapi::api::{
        apps::v1 as apps, authentication::v1 as authn, authorization::v1 as authz,
        batch::v1 as batch, coordination::v1 as coordination, core::v1 as core,
        discovery::v1 as discovery, events::v1 as events, policy::v1 as policy, rbac::v1 as rbac,
        scheduling::v1 as scheduling, storage::v1 as storage,
    };
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as ext;
    let mut generator = SchemaGenerator::new(SchemaSettings::openapi3());
    let mut kinds = BTreeMap::new();
    kinds!(
        generator,
        kinds,
        core::Namespace,
        core::Node,
        core::Pod,
        core::Event,
        core::ConfigMap,
        core::Secret,
        core::ServiceAccount,
        core::Service,
        core::Endpoints,
        core::PersistentVolumeClaim,
        core::PersistentVolume,
        events::Event,
        coordination::Lease,
        apps::Deployment,
        apps::ReplicaSet,
        apps::StatefulSet,
        apps::DaemonSet,
        policy::PodDisruptionBudget,
        batch::Job,
        batch::CronJob,
        discovery::EndpointSlice,
        storage::StorageClass,
        scheduling::PriorityClass,
        rbac::Role,
        rbac::RoleBinding,
        rbac::ClusterRole,
        rbac::ClusterRoleBinding,
        authz::SelfSubjectAccessReview,
        authz::SelfSubjectRulesReview,
        authz::SubjectAccessReview,
        authz::LocalSubjectAccessReview,
        authn::SelfSubjectReview,
        ext::CustomResourceDefinition,
    );
    let mut definitions: BTreeMap<String, Value> =
        generator.take_definitions(true).into_iter().collect();
    for ((group, version, kind), name) in &kinds {
        if let Some(Value::Object(d)) = definitions.get_mut(name) {
            d.insert(
                "x-kubernetes-group-version-kind".into(),
                json!([{"group": group, "version": version, "kind": kind}]),
            );
            if let Some(Value::Array(required)) = d.get_mut("required") {
                required.retain(|r| r != "metadata");
                if required.is_empty() {
                    d.remove("required");
                }
            }
        }
    }
    for line in PATCH_METADATA.lines().filter(|l| !l.starts_with("//")) {
        let mut words = line.split_whitespace();
        let (Some(def), Some(field), Some(strategy)) = (words.next(), words.next(), words.next())
        else {
            continue;
        };
        let Some(Value::Object(prop)) = definitions
            .get_mut(def)
            .and_then(|d| d.get_mut("properties"))
            .and_then(|p| p.get_mut(field))
        else {
            continue;
        };
        prop.insert("x-kubernetes-patch-strategy".into(), json!(strategy));
        if let Some(key) = words.next() {
            prop.insert("x-kubernetes-patch-merge-key".into(), json!(key));
        }
    }
    Builtins { definitions, kinds }
}

static BUILTINS: LazyLock<Builtins> = LazyLock::new(build);

/// The built-in definitions.
pub fn builtins() -> &'static Builtins {
    &BUILTINS
}

/// The definition name of a built-in kind.
pub fn kind_schema(group: &str, version: &str, kind: &str) -> Option<&'static str> {
    BUILTINS
        .kinds
        .get(&(group.to_owned(), version.to_owned(), kind.to_owned()))
        .map(String::as_str)
}

/// The definition a `$ref` (`#/components/schemas/<name>` or `#/definitions/<name>`) names.
pub fn ref_name(r: &str) -> &str {
    r.rsplit('/').next().unwrap_or(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_carry_their_gvk_and_patch_metadata() {
        let b = builtins();
        let name = kind_schema("apps", "v1", "Deployment").unwrap();
        assert_eq!(name, "io.k8s.api.apps.v1.Deployment");
        let d = &b.definitions[name];
        assert_eq!(
            d["x-kubernetes-group-version-kind"][0]["kind"],
            "Deployment"
        );
        assert!(d.get("required").is_none());
        assert_eq!(
            d["properties"]["spec"]["allOf"][0]["$ref"],
            "#/components/schemas/io.k8s.api.apps.v1.DeploymentSpec"
        );
        let containers = &b.definitions["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"];
        assert_eq!(containers["x-kubernetes-patch-merge-key"], "name");
        assert_eq!(containers["x-kubernetes-patch-strategy"], "merge");
        assert!(kind_schema("", "v1", "ConfigMap").is_some());
        assert!(
            b.definitions
                .contains_key("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta")
        );
    }
}
