//! `autoscaling.x-k8s.io/v1beta1` CapacityBuffer (feature gate `CapacityBuffer`).
//!
//! Responsibility: the CapacityBuffer custom resource exactly as upstream Karpenter and the
//! cluster-autoscaler share it — a chunk shape (`podTemplateRef`, or the pod template of the
//! workload `scalableRef` names), how many chunks (`replicas`, `percentage` of the workload's
//! replicas, `limits` on their total requests) and a `provisioningStrategy` — with upstream's
//! schema, CEL rules, printer columns and status (`replicas`, `podTemplateRef`,
//! `podTemplateGeneration`, `provisioningStrategy`, conditions `ReadyForProvisioning` and
//! `Provisioning`).
//! Inputs: JSON/YAML. Outputs: typed objects.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::Condition;
use crate::schema;

/// The strategy upstream defaults to: placeholder pods that make the autoscaler add nodes.
pub const ACTIVE_CAPACITY: &str = "buffer.x-k8s.io/active-capacity";

/// A reference to a PodTemplate in the buffer's namespace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LocalObjectRef {
    /// The PodTemplate's name.
    #[schemars(length(min = 1))]
    pub name: String,
}

/// A reference to a workload with a scale subresource (Deployment, StatefulSet, ReplicaSet).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScalableRef {
    /// The API group (`apps`; empty for the core group).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_group: Option<String>,
    /// The kind.
    #[schemars(length(min = 1))]
    pub kind: String,
    /// The name, in the buffer's namespace.
    #[schemars(length(min = 1))]
    pub name: String,
}

/// Spare capacity kept as placeholder pods of one shape.
// Upstream's printer columns repeat `type_ = "string"`; each belongs to its own column.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "autoscaling.x-k8s.io",
    version = "v1beta1",
    kind = "CapacityBuffer",
    namespaced,
    status = "CapacityBufferStatus",
    category = "autoscaling",
    shortname = "cb",
    printcolumn(
        name = "Strategy",
        type_ = "string",
        description = "The strategy to be used.",
        json_path = ".spec.provisioningStrategy"
    ),
    printcolumn(
        name = "PodTemplate",
        type_ = "string",
        description = "The name of the PodTemplate used.",
        json_path = ".status.podTemplateRef.name"
    ),
    printcolumn(
        name = "Replicas",
        type_ = "integer",
        description = "The actual number of buffer chunks.",
        json_path = ".status.replicas"
    ),
    printcolumn(
        name = "ConditionsType",
        type_ = "string",
        description = "List of all condition types.",
        json_path = ".status.conditions[*].type"
    ),
    printcolumn(
        name = "ConditionsStatus",
        type_ = "string",
        description = "List of all condition statuses.",
        json_path = ".status.conditions[*].status"
    ),
    printcolumn(
        name = "ConditionsReason",
        type_ = "string",
        description = "List of all condition reasons.",
        json_path = ".status.conditions[*].reason"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        description = "The age of the CapacityBuffer.",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "message": "If podTemplateRef is set, replicas or limits must also be set",
        "rule": "!has(self.podTemplateRef) || has(self.replicas) || has(self.limits)",
    },
    {
        "message": "You must define either PodTemplateRef or ScalableRef, but not both",
        "rule": "!(has(self.podTemplateRef) && has(self.scalableRef))",
    },
]))]
pub struct CapacityBufferSpec {
    /// Resource totals that bound the number of chunks (as many as fit when neither
    /// `replicas` nor `percentage` is set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::resource_list")]
    pub limits: Option<BTreeMap<String, Quantity>>,
    /// Chunks as a percentage of the `scalableRef` workload's replicas (rounded up, at least 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub percentage: Option<i32>,
    /// The PodTemplate (same namespace) that is the shape of one chunk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_template_ref: Option<LocalObjectRef>,
    /// How the buffer is used; `buffer.x-k8s.io/active-capacity` by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = ACTIVE_CAPACITY))]
    pub provisioning_strategy: Option<String>,
    /// The number of chunks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub replicas: Option<i32>,
    /// The workload whose pod template is the shape of one chunk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scalable_ref: Option<ScalableRef>,
}

/// What the controller observed and decided for a buffer.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CapacityBufferStatus {
    /// `ReadyForProvisioning` and `Provisioning`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::conditions")]
    pub conditions: Option<Vec<Condition>>,
    /// The observed generation of the PodTemplate in use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_template_generation: Option<i64>,
    /// The PodTemplate in use (unset for a `scalableRef`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_template_ref: Option<LocalObjectRef>,
    /// The strategy in use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioning_strategy: Option<String>,
    /// The number of chunks provisioned for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
}
