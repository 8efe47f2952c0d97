//! `karpenter.sh/v1` NodeClaim.
//!
//! Responsibility: the NodeClaim custom resource exactly as upstream Karpenter defines it — one
//! requested node, its immutable spec and the status the lifecycle controllers fill in.
//! Inputs: JSON/YAML. Outputs: typed objects.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::{api::resource::Quantity, apis::meta::v1::Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{
    Condition, NillableDuration, NodeClassReference, NodeSelectorRequirementWithMinValues, Taint,
};
use crate::schema;

/// The resources a NodeClaim must provide.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ResourceRequirements {
    /// The minimum resources the node must have (pod requests plus daemon overhead).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::resource_list")]
    pub requests: Option<BTreeMap<String, Quantity>>,
}

/// A request for one node: which shapes it may take, and how it is to be configured.
// kube's derive takes one `printcolumn(...)` / `shortname` attribute per entry.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "karpenter.sh",
    version = "v1",
    kind = "NodeClaim",
    status = "NodeClaimStatus",
    category = "karpenter",
    printcolumn(
        name = "Type",
        type_ = "string",
        json_path = ".metadata.labels.node\\.kubernetes\\.io/instance-type"
    ),
    printcolumn(
        name = "Capacity",
        type_ = "string",
        json_path = ".metadata.labels.karpenter\\.sh/capacity-type"
    ),
    printcolumn(
        name = "Zone",
        type_ = "string",
        json_path = ".metadata.labels.topology\\.kubernetes\\.io/zone"
    ),
    printcolumn(name = "Node", type_ = "string", json_path = ".status.nodeName"),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "ImageID",
        type_ = "string",
        json_path = ".status.imageID",
        priority = 1
    ),
    printcolumn(
        name = "ID",
        type_ = "string",
        json_path = ".status.providerID",
        priority = 1
    ),
    printcolumn(
        name = "NodePool",
        type_ = "string",
        json_path = ".metadata.labels.karpenter\\.sh/nodepool",
        priority = 1
    ),
    printcolumn(
        name = "NodeClass",
        type_ = "string",
        json_path = ".spec.nodeClassRef.name",
        priority = 1
    ),
    printcolumn(
        name = "Drifted",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Drifted\")].status",
        priority = 1
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"message": "spec is immutable", "rule": "self == oldSelf"},
]))]
pub struct NodeClaimSpec {
    /// How long the node may live before it is replaced; `Never` disables expiry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "720h"))]
    pub expire_after: Option<NillableDuration>,
    /// The provider-specific node class.
    pub node_class_ref: NodeClassReference,
    /// Constraints the launched node must satisfy.
    #[schemars(schema_with = "schema::nodeclaim_requirements")]
    pub requirements: Vec<NodeSelectorRequirementWithMinValues>,
    /// The resources the node must provide.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    /// Taints present at startup and expected to be removed by something else.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub startup_taints: Option<Vec<Taint>>,
    /// Taints applied to the node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub taints: Option<Vec<Taint>>,
    /// How long draining may take before pods are deleted regardless of PDBs and
    /// do-not-disrupt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = schema::DURATION))]
    pub termination_grace_period: Option<String>,
}

/// What the controllers observed of a NodeClaim.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimStatus {
    /// The node's allocatable resources as launched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::resource_list")]
    pub allocatable: Option<BTreeMap<String, Quantity>>,
    /// The node's capacity as launched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::resource_list")]
    pub capacity: Option<BTreeMap<String, Quantity>>,
    /// Launched, Registered, Initialized, Ready, Drifted, Consolidatable, …
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::nodeclaim_conditions")]
    pub conditions: Option<Vec<Condition>>,
    /// The image the node runs, as the provider reports it.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "imageID")]
    pub image_id: Option<String>,
    /// The last time a pod was bound to, or left, the node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::date_time")]
    pub last_pod_event_time: Option<Time>,
    /// The Node's name once registered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    /// The provider's identity of the instance (`spec.providerID` of the Node).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "providerID"
    )]
    pub provider_id: Option<String>,
}
