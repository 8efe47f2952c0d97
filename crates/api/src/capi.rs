//! The Cluster API `cluster.x-k8s.io/v1beta1` kinds we read: MachineDeployment, MachineSet and
//! Machine.
//!
//! Responsibility: typed, READ-ONLY views of the fields karpenter-capi uses. Unknown fields are
//! ignored on read, so these structs are lossy by design: never write one of them back whole.
//! Changes go through the `/scale` subresource, JSON merge patches or server-side apply of just
//! the fields we own.
//! Inputs: JSON from the management cluster. Outputs: typed objects.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Labels and annotations of a Machine template (propagated to MachineSets and Machines).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MachineTemplateMetadata {
    /// Labels every Machine gets; the CAPI-managed domains also reach the Node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    /// Annotations every Machine gets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
}

/// Where a Machine's bootstrap data comes from.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Bootstrap {
    /// The bootstrap config template (e.g. a KubeadmConfigTemplate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_ref: Option<ObjectReference>,
    /// A secret holding the bootstrap data directly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_secret_name: Option<String>,
}

/// The part of a Machine spec that MachineDeployments template and Machines carry.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineSpecFields {
    /// The owning Cluster's name.
    #[serde(default)]
    pub cluster_name: String,
    /// Bootstrap configuration.
    #[serde(default)]
    pub bootstrap: Bootstrap,
    /// The infrastructure machine (template) reference.
    #[serde(default)]
    pub infrastructure_ref: ObjectReference,
    /// Kubernetes version of the node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The failure domain (zone) the Machine is placed in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_domain: Option<String>,
    /// The provider's identity of the instance, once known.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "providerID"
    )]
    pub provider_id: Option<String>,
}

/// A Machine template: metadata plus spec.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MachineTemplateSpec {
    /// Propagated labels and annotations.
    #[serde(default)]
    pub metadata: MachineTemplateMetadata,
    /// The Machine spec.
    #[serde(default)]
    pub spec: MachineSpecFields,
}

/// A MachineDeployment: a scalable group of identical Machines (our instance type + offering).
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "cluster.x-k8s.io",
    version = "v1beta1",
    kind = "MachineDeployment",
    namespaced,
    shortname = "md",
    category = "cluster-api",
    status = "MachineDeploymentStatus",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.selector"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct MachineDeploymentSpec {
    /// The owning Cluster's name.
    #[serde(default)]
    pub cluster_name: String,
    /// Desired Machine count; unset until CAPI's webhook defaults it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Selects the Machines this deployment owns.
    #[serde(default)]
    pub selector: LabelSelector,
    /// The template new Machines are made from.
    #[serde(default)]
    pub template: MachineTemplateSpec,
    /// A paused MachineDeployment is not reconciled by CAPI; Karpenter never scales it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,
    /// How CAPI replaces Machines when the template changes (absent: `RollingUpdate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<MachineDeploymentStrategy>,
}

/// `spec.strategy` of a MachineDeployment (read only).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MachineDeploymentStrategy {
    /// `RollingUpdate` (CAPI's default) or `OnDelete`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
}

/// Observed state of a MachineDeployment.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineDeploymentStatus {
    /// Machines that exist.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Machines whose Node is Ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_replicas: Option<i32>,
    /// Machines that are available.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_replicas: Option<i32>,
    /// The label selector, serialized, for the scale subresource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    /// Phase, e.g. `Running`, `ScalingUp`, `Failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// The generation CAPI last reconciled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// A MachineSet: one revision of a MachineDeployment's Machines.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "cluster.x-k8s.io",
    version = "v1beta1",
    kind = "MachineSet",
    namespaced,
    shortname = "ms",
    category = "cluster-api",
    status = "MachineSetStatus",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.selector"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct MachineSetSpec {
    /// The owning Cluster's name.
    #[serde(default)]
    pub cluster_name: String,
    /// Desired Machine count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Selects the Machines this set owns.
    #[serde(default)]
    pub selector: LabelSelector,
    /// The template new Machines are made from.
    #[serde(default)]
    pub template: MachineTemplateSpec,
    /// Which Machines go first on scale-down: Random (default), Newest or Oldest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_policy: Option<String>,
}

/// Observed state of a MachineSet.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineSetStatus {
    /// Machines that exist.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Machines whose Node is Ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_replicas: Option<i32>,
    /// The label selector, serialized, for the scale subresource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
}

/// A Machine: one node's infrastructure.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "cluster.x-k8s.io",
    version = "v1beta1",
    kind = "Machine",
    namespaced,
    shortname = "ma",
    category = "cluster-api",
    status = "MachineStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct MachineSpec {
    /// Cluster, bootstrap, infrastructure, version, failure domain and providerID.
    #[serde(flatten)]
    pub fields: MachineSpecFields,
}

/// Observed state of a Machine.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineStatus {
    /// Pending, Provisioning, Provisioned, Running, Deleting, Deleted, Failed or Unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// The Node this Machine became.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_ref: Option<ObjectReference>,
    /// A terminal problem's reason (v1beta1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,
    /// A terminal problem's message (v1beta1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_message: Option<String>,
    /// Whether the infrastructure is provisioned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infrastructure_ready: Option<bool>,
    /// Whether the bootstrap data is ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap_ready: Option<bool>,
}
