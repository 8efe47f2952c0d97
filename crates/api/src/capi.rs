//! The Cluster API kinds we read — MachineDeployment, MachineSet, MachinePool and Machine — in whichever
//! version the management cluster serves: `cluster.x-k8s.io/v1beta2` (Cluster API v1.11 and
//! later, the storage version) or the deprecated `v1beta1` (Cluster API v1.10 and earlier).
//!
//! Responsibility: [`CapiVersion`], the group and version spoken to the management cluster
//! (chosen at run time from discovery, so it is the types' `kube::Resource::DynamicType`), and
//! typed, READ-ONLY views ([`types`], [`pool`]) that accept both versions' shapes. Unknown fields are
//! ignored on read, so the views are lossy by design: never write one back whole. Changes go
//! through the `/scale` subresource, JSON merge patches of metadata, or server-side apply of
//! just the fields we own — paths that are the same in both versions.
//! Inputs: JSON from the management cluster. Outputs: typed objects.

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::DynamicResourceScope;

pub mod pool;
pub mod types;

pub use pool::*;
pub use types::*;

/// The group and version in which the Cluster API kinds are read and written.
///
/// There is deliberately no `Default`: every API handle, reflector and object reference of a
/// Cluster API kind names the version discovery chose.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CapiVersion {
    group: String,
    version: String,
}

impl CapiVersion {
    /// Cluster API's group.
    pub const GROUP: &'static str = "cluster.x-k8s.io";
    /// The current version (Cluster API v1.11+, storage version).
    pub const V1BETA2: &'static str = "v1beta2";
    /// The deprecated version (Cluster API ≤ v1.10; still served by v1.11–v1.15).
    pub const V1BETA1: &'static str = "v1beta1";
    /// The versions whose shapes [`types`] understand, newest first.
    pub const KNOWN: [&'static str; 2] = [Self::V1BETA2, Self::V1BETA1];

    /// `group`/`version`.
    #[must_use]
    pub fn new(group: impl Into<String>, version: impl Into<String>) -> Self {
        Self {
            group: group.into(),
            version: version.into(),
        }
    }

    /// `cluster.x-k8s.io/v1beta2`.
    #[must_use]
    pub fn v1beta2() -> Self {
        Self::new(Self::GROUP, Self::V1BETA2)
    }

    /// `cluster.x-k8s.io/v1beta1`.
    #[must_use]
    pub fn v1beta1() -> Self {
        Self::new(Self::GROUP, Self::V1BETA1)
    }

    /// The group.
    #[must_use]
    pub fn group(&self) -> &str {
        &self.group
    }

    /// The version.
    #[must_use]
    pub fn version(&self) -> &str {
        &self.version
    }

    /// `group/version`.
    #[must_use]
    pub fn api_version(&self) -> String {
        format!("{}/{}", self.group, self.version)
    }

    /// Whether objects have the v1beta2 shape (`spec.rollout.strategy`, `spec.deletion.order`,
    /// references by `apiGroup`); every other version has v1beta1's.
    #[must_use]
    pub fn is_v1beta2_shape(&self) -> bool {
        self.version == Self::V1BETA2
    }

    /// The field path of a MachineDeployment's rollout strategy type in this version.
    #[must_use]
    pub fn strategy_field(&self) -> &'static str {
        if self.is_v1beta2_shape() {
            "spec.rollout.strategy.type"
        } else {
            "spec.strategy.type"
        }
    }

    /// A merge patch setting a MachineDeployment's rollout strategy type in this version.
    #[must_use]
    pub fn strategy_patch(&self, strategy: &str) -> String {
        if self.is_v1beta2_shape() {
            format!(r#"{{"spec":{{"rollout":{{"strategy":{{"type":"{strategy}"}}}}}}}}"#)
        } else {
            format!(r#"{{"spec":{{"strategy":{{"type":"{strategy}"}}}}}}"#)
        }
    }
}

impl std::fmt::Display for CapiVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.group, self.version)
    }
}

macro_rules! capi_resource {
    ($ty:ident, $kind:literal, $plural:literal) => {
        impl kube::Resource for $ty {
            type DynamicType = CapiVersion;
            type Scope = DynamicResourceScope;

            fn kind(_: &CapiVersion) -> Cow<'_, str> {
                Cow::Borrowed($kind)
            }

            fn group(dt: &CapiVersion) -> Cow<'_, str> {
                Cow::Borrowed(dt.group())
            }

            fn version(dt: &CapiVersion) -> Cow<'_, str> {
                Cow::Borrowed(dt.version())
            }

            fn api_version(dt: &CapiVersion) -> Cow<'_, str> {
                Cow::Owned(dt.api_version())
            }

            fn plural(_: &CapiVersion) -> Cow<'_, str> {
                Cow::Borrowed($plural)
            }

            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }

            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

capi_resource!(MachineDeployment, "MachineDeployment", "machinedeployments");
capi_resource!(MachineSet, "MachineSet", "machinesets");
capi_resource!(Machine, "Machine", "machines");
capi_resource!(MachinePool, "MachinePool", "machinepools");

#[cfg(test)]
mod tests {
    use super::*;
    use kube::Resource;

    #[test]
    fn urls_name_the_chosen_version() {
        let v2 = CapiVersion::v1beta2();
        assert_eq!(
            MachineDeployment::url_path(&v2, Some("ns")),
            "/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/machinedeployments"
        );
        let v1 = CapiVersion::v1beta1();
        assert_eq!(
            Machine::url_path(&v1, None),
            "/apis/cluster.x-k8s.io/v1beta1/machines"
        );
        assert_eq!(MachineSet::api_version(&v1), "cluster.x-k8s.io/v1beta1");
    }

    #[test]
    fn field_names_follow_the_version() {
        assert_eq!(
            CapiVersion::v1beta2().strategy_field(),
            "spec.rollout.strategy.type"
        );
        assert_eq!(
            CapiVersion::v1beta1().strategy_field(),
            "spec.strategy.type"
        );
        let patch: serde_json::Value =
            serde_json::from_str(&CapiVersion::v1beta2().strategy_patch("OnDelete")).unwrap();
        assert_eq!(patch["spec"]["rollout"]["strategy"]["type"], "OnDelete");
        let patch: serde_json::Value =
            serde_json::from_str(&CapiVersion::v1beta1().strategy_patch("OnDelete")).unwrap();
        assert_eq!(patch["spec"]["strategy"]["type"], "OnDelete");
    }
}
