//! `karpenter.cluster.x-k8s.io/v1alpha1` ClusterAPINodeClass.
//!
//! Responsibility: the provider's node class — which Cluster API scalable resources
//! (MachineDeployments) a NodePool may launch into — with upstream's schema (cluster-scoped,
//! short names `capinc`/`capincs`, category `karpenter`). Later issues add fields.
//! Inputs: JSON/YAML. Outputs: typed objects.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};

use crate::common::Condition;
use crate::schema;

/// Selects the Cluster API MachineDeployments Karpenter may scale for NodePools using this class.
///
/// Only MachineDeployments that carry the `node.cluster.x-k8s.io/karpenter-member` label are ever
/// considered; the selector narrows that set further (an absent or empty selector keeps all).
///
/// `spec` may be omitted altogether (upstream's CRD allows it); it then reads as empty.
// kube's derive takes one `printcolumn(...)` / `shortname` attribute per entry.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, JsonSchema)]
#[kube(
    group = "karpenter.cluster.x-k8s.io",
    version = "v1alpha1",
    kind = "ClusterAPINodeClass",
    status = "ClusterAPINodeClassStatus",
    category = "karpenter",
    shortname = "capinc",
    shortname = "capincs"
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterAPINodeClassSpec {
    /// Label selector over the member MachineDeployments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::label_selector")]
    pub scalable_resource_selector: Option<LabelSelector>,
}

/// The wire form of [`ClusterAPINodeClassSpec`].
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SpecRepr {
    #[serde(default)]
    scalable_resource_selector: Option<LabelSelector>,
}

impl<'de> Deserialize<'de> for ClusterAPINodeClassSpec {
    /// Reads the spec, treating an absent `spec` (serde asks for an option when a field is
    /// missing) as an empty one.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let repr = Option::<SpecRepr>::deserialize(deserializer)?;
        Ok(Self {
            scalable_resource_selector: repr.and_then(|r| r.scalable_resource_selector),
        })
    }
}

/// What the controllers observed of a ClusterAPINodeClass.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ClusterAPINodeClassStatus {
    /// `Ready` says whether the class selects at least one usable MachineDeployment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::conditions")]
    pub conditions: Option<Vec<Condition>>,
}
