//! Read-only views of MachineDeployment, MachineSet and Machine that accept both Cluster API
//! shapes: `v1beta2` and the deprecated `v1beta1`.
//!
//! Responsibility: the fields karpenter-capi reads, each under every name it has had, with an
//! accessor that answers the same whichever version the object came in:
//! - rollout strategy: v1beta2 `spec.rollout.strategy.type`, v1beta1 `spec.strategy.type`
//!   ([`MachineDeploymentSpec::strategy_type`]);
//! - deletion order: v1beta2 `spec.deletion.order`, v1beta1 MachineSet `spec.deletePolicy` /
//!   MachineDeployment `spec.strategy.rollingUpdate.deletePolicy`;
//! - template references: v1beta2 `{apiGroup, kind, name}` (the version comes from discovery),
//!   v1beta1 `{apiVersion, kind, name, namespace}` ([`ContractReference`]);
//! - Machine status: v1beta2 `status.deprecated.v1beta1.failure{Reason,Message}` and
//!   `status.initialization.infrastructureProvisioned`, v1beta1 `status.failure{Reason,Message}`
//!   and `status.infrastructureReady` ([`MachineStatus`]'s accessors);
//! - taints (v1beta2 `spec.template.spec.taints`, Cluster API v1.12+).
//!
//! Unknown fields are ignored: never serialize one of these and write it back.
//! Inputs: JSON. Outputs: typed objects.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use serde::{Deserialize, Serialize};

/// Labels and annotations of a Machine template (propagated to MachineSets and Machines).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MachineTemplateMetadata {
    /// Labels every Machine gets; the CAPI-managed domains also reach the Node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    /// Annotations every Machine gets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
}

/// A reference to a template or configuration object: v1beta2's
/// `ContractVersionedObjectReference` (`apiGroup`, `kind`, `name`; same namespace) or v1beta1's
/// `ObjectReference` (`apiVersion`, `kind`, `name`, `namespace`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContractReference {
    /// v1beta1: `group/version`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// v1beta2: the group; the version is the one the group's discovery prefers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_group: Option<String>,
    /// The kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// v1beta1 only: the namespace (empty or absent: the referrer's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

impl ContractReference {
    /// The referenced group: `apiGroup`, else the group of `apiVersion` (`""` for core).
    #[must_use]
    pub fn group(&self) -> Option<&str> {
        if let Some(g) = self.api_group.as_deref() {
            return Some(g);
        }
        let v = self.api_version.as_deref()?;
        Some(v.rsplit_once('/').map_or("", |(g, _)| g))
    }

    /// The version the reference pins (v1beta1 `apiVersion` only); `None`: ask discovery.
    #[must_use]
    pub fn pinned_version(&self) -> Option<&str> {
        if self.api_group.is_some() {
            return None;
        }
        let v = self.api_version.as_deref()?;
        Some(v.rsplit_once('/').map_or(v, |(_, v)| v))
    }

    /// The namespace the object lives in: the reference's own (v1beta1) or `referrer`'s.
    #[must_use]
    pub fn namespace_or<'a>(&'a self, referrer: Option<&'a str>) -> Option<&'a str> {
        self.namespace
            .as_deref()
            .filter(|n| !n.is_empty())
            .or(referrer)
    }

    /// `kind/name` in `group`, the identity both versions agree on (for drift comparisons).
    #[must_use]
    pub fn identity(&self) -> (Option<&str>, Option<&str>, Option<&str>) {
        (self.group(), self.kind.as_deref(), self.name.as_deref())
    }
}

/// Where a Machine's bootstrap data comes from.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Bootstrap {
    /// The bootstrap config template (e.g. a KubeadmConfigTemplate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_ref: Option<ContractReference>,
    /// A secret holding the bootstrap data directly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_secret_name: Option<String>,
}

/// A taint Cluster API puts on a Machine's Node (v1beta2 `spec.taints`, Cluster API v1.12+).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MachineTaint {
    /// The taint key.
    #[serde(default)]
    pub key: String,
    /// The taint value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    #[serde(default)]
    pub effect: String,
    /// `Always` (kept on the Node) or `OnInitialization` (set once, when the Node joins).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub propagation: Option<String>,
}

/// The part of a Machine spec that MachineDeployments template and Machines carry.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
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
    pub infrastructure_ref: ContractReference,
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
    /// Taints for the Node (v1beta2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taints: Option<Vec<MachineTaint>>,
}

/// A Machine template: metadata plus spec.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MachineTemplateSpec {
    /// Propagated labels and annotations.
    #[serde(default)]
    pub metadata: MachineTemplateMetadata,
    /// The Machine spec.
    #[serde(default)]
    pub spec: MachineSpecFields,
}

/// v1beta2 `spec.deletion` of a MachineDeployment or MachineSet.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deletion {
    /// `Random` (default), `Newest` or `Oldest`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order: Option<String>,
}

/// Which Cluster API object a node group ([`MachineDeployment`] view) was read from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum GroupKind {
    /// A MachineDeployment.
    #[default]
    MachineDeployment,
    /// A stand-alone MachineSet (no MachineDeployment controls it).
    MachineSet,
    /// A MachinePool.
    MachinePool,
}

impl GroupKind {
    /// The kind's name, as Cluster API spells it.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::MachineDeployment => "MachineDeployment",
            Self::MachineSet => "MachineSet",
            Self::MachinePool => "MachinePool",
        }
    }
}

/// A MachineDeployment: a scalable group of identical Machines (our instance type + offering).
///
/// Also the read view of a stand-alone MachineSet as a node group
/// ([`MachineDeployment::from_machine_set`]): the two share every field a node group is read
/// by (metadata, replicas, selector, template, deletion order, the `ScalingUp` condition), and
/// [`MachineDeployment::group_kind`] says which one it was read from. Never written back.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MachineDeployment {
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The desired state.
    #[serde(default)]
    pub spec: MachineDeploymentSpec,
    /// The observed state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<MachineDeploymentStatus>,
    /// The kind it was read from (not on the wire: a MachineDeployment read from the API is a
    /// MachineDeployment).
    #[serde(skip)]
    pub group_kind: GroupKind,
}

impl MachineDeployment {
    /// A stand-alone MachineSet as a node group. A MachineSet never replaces its Machines on a
    /// template change, so the view's rollout strategy is `OnDelete` (Karpenter's drift
    /// replaces them); its deletion order is the set's; it has no `spec.paused` (the
    /// `cluster.x-k8s.io/paused` annotation still pauses it).
    #[must_use]
    pub fn from_machine_set(ms: &MachineSet) -> Self {
        let status = ms.status.as_ref().map(|s| MachineDeploymentStatus {
            replicas: s.replicas,
            ready_replicas: s.ready_replicas,
            available_replicas: None,
            selector: s.selector.clone(),
            phase: None,
            observed_generation: None,
            conditions: s.conditions.clone(),
            v1beta2: s.v1beta2.clone(),
        });
        Self {
            metadata: ms.metadata.clone(),
            spec: MachineDeploymentSpec {
                cluster_name: ms.spec.cluster_name.clone(),
                replicas: ms.spec.replicas,
                selector: ms.spec.selector.clone(),
                template: ms.spec.template.clone(),
                paused: None,
                strategy: None,
                rollout: Some(MachineDeploymentRollout {
                    strategy: Some(MachineDeploymentStrategy {
                        type_: Some("OnDelete".to_owned()),
                    }),
                }),
                deletion: ms.spec.deletion_order().map(|order| Deletion {
                    order: Some(order.to_owned()),
                }),
            },
            status,
            group_kind: GroupKind::MachineSet,
        }
    }
}

/// The desired state of a MachineDeployment.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
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
    /// v1beta1: how CAPI replaces Machines when the template changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<MachineDeploymentStrategy>,
    /// v1beta2: the rollout (its `strategy`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<MachineDeploymentRollout>,
    /// v1beta2: which Machines go first on scale-down.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion: Option<Deletion>,
}

impl MachineDeploymentSpec {
    /// The rollout strategy type as written (`RollingUpdate`, `OnDelete`); `None`: CAPI's
    /// default, `RollingUpdate`.
    #[must_use]
    pub fn strategy_type(&self) -> Option<&str> {
        self.rollout
            .as_ref()
            .and_then(|r| r.strategy.as_ref())
            .or(self.strategy.as_ref())
            .and_then(|s| s.type_.as_deref())
    }

    /// Whether CAPI leaves replacing Machines after a template change to someone else.
    #[must_use]
    pub fn is_on_delete(&self) -> bool {
        self.strategy_type() == Some("OnDelete")
    }
}

/// v1beta2 `spec.rollout` of a MachineDeployment (read only).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MachineDeploymentRollout {
    /// The strategy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<MachineDeploymentStrategy>,
}

/// A rollout strategy (v1beta2 `spec.rollout.strategy`, v1beta1 `spec.strategy`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MachineDeploymentStrategy {
    /// `RollingUpdate` (CAPI's default) or `OnDelete`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
}

/// Observed state of a MachineDeployment.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
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
    /// Conditions: v1beta2's (`ScalingUp`, `Available`, …) in v1beta2; v1beta1's in v1beta1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<CapiCondition>>,
    /// v1beta1 only: the v1beta2 conditions Cluster API v1.9+ also writes there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub v1beta2: Option<V1beta2Conditions>,
}

impl MachineDeploymentStatus {
    /// The v1beta2 condition `type_`, in either version.
    #[must_use]
    pub fn v1beta2_condition(&self, type_: &str) -> Option<&CapiCondition> {
        self.v1beta2
            .as_ref()
            .and_then(|v| v.conditions.as_ref())
            .into_iter()
            .chain(self.conditions.as_ref())
            .flatten()
            .find(|c| c.type_ == type_)
    }

    /// Why Cluster API cannot create Machines for it now (MachineSet preflight checks,
    /// missing templates): the `ScalingUp` condition's message when it says the scale-up "is
    /// blocked".
    #[must_use]
    pub fn scale_up_blocked(&self) -> Option<&str> {
        self.v1beta2_condition("ScalingUp")
            .filter(|c| c.status == "True")
            .and_then(|c| c.message.as_deref())
            .filter(|m| m.contains("is blocked because"))
    }
}

/// A Cluster API condition (v1beta2: `metav1.Condition`; v1beta1: with a severity); only the
/// fields read.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CapiCondition {
    /// The type (`ScalingUp`, `Ready`, …).
    #[serde(default, rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    #[serde(default)]
    pub status: String,
    /// The reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// A `conditions` list nested in another version's place: v1beta1 `status.v1beta2`, v1beta2
/// `status.deprecated.v1beta1`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct V1beta2Conditions {
    /// The conditions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<CapiCondition>>,
}

/// A MachineSet: one revision of a MachineDeployment's Machines.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MachineSet {
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The desired state.
    #[serde(default)]
    pub spec: MachineSetSpec,
    /// The observed state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<MachineSetStatus>,
}

/// The desired state of a MachineSet.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
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
    /// v1beta1: which Machines go first on scale-down.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_policy: Option<String>,
    /// v1beta2: which Machines go first on scale-down.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion: Option<Deletion>,
}

impl MachineSet {
    /// Whether no MachineDeployment manages it: no owner reference of kind
    /// `MachineDeployment` (as the cluster-autoscaler decides) and no
    /// `cluster.x-k8s.io/deployment-name` label (its Machines would carry it too, and belong to
    /// that MachineDeployment). Only such a MachineSet is a node group of its own.
    #[must_use]
    pub fn is_stand_alone(&self) -> bool {
        let owned = self
            .metadata
            .owner_references
            .as_ref()
            .is_some_and(|refs| refs.iter().any(|o| o.kind == "MachineDeployment"));
        let labelled = self
            .metadata
            .labels
            .as_ref()
            .is_some_and(|l| l.contains_key(crate::well_known::capi::DEPLOYMENT_NAME));
        !owned && !labelled
    }
}

impl MachineSetSpec {
    /// Which Machines go first on scale-down (`Random`, `Newest`, `Oldest`); `None`: `Random`.
    #[must_use]
    pub fn deletion_order(&self) -> Option<&str> {
        self.deletion
            .as_ref()
            .and_then(|d| d.order.as_deref())
            .or(self.delete_policy.as_deref())
    }
}

/// Observed state of a MachineSet.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
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
    /// Conditions: v1beta2's (`ScalingUp`, …) in v1beta2; v1beta1's (`MachinesCreated`, …)
    /// in v1beta1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<CapiCondition>>,
    /// v1beta1 only: the v1beta2 conditions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub v1beta2: Option<V1beta2Conditions>,
    /// v1beta2 only: the v1beta1 conditions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecated: Option<DeprecatedConditions>,
}

impl MachineSetStatus {
    fn all(&self) -> impl Iterator<Item = &CapiCondition> {
        [
            self.conditions.as_ref(),
            self.v1beta2.as_ref().and_then(|v| v.conditions.as_ref()),
            self.deprecated
                .as_ref()
                .and_then(|d| d.v1beta1.as_ref())
                .and_then(|v| v.conditions.as_ref()),
        ]
        .into_iter()
        .flatten()
        .flatten()
    }

    /// Why the MachineSet creates no Machines now, as Cluster API reports it: its v1beta2
    /// `ScalingUp` condition saying the scale-up "is blocked because" (preflight checks,
    /// missing templates), else its v1beta1 `MachinesCreated` False `PreflightCheckFailed`.
    #[must_use]
    pub fn scale_up_blocked(&self) -> Option<&str> {
        let scaling = self
            .all()
            .find(|c| c.type_ == "ScalingUp" && c.status == "True")
            .and_then(|c| c.message.as_deref())
            .filter(|m| m.contains("is blocked because"));
        scaling.or_else(|| {
            self.all()
                .find(|c| {
                    c.type_ == "MachinesCreated"
                        && c.status == "False"
                        && c.reason.as_deref() == Some("PreflightCheckFailed")
                })
                .map(|c| c.message.as_deref().unwrap_or("PreflightCheckFailed"))
        })
    }
}

/// v1beta2 `status.deprecated` of a MachineSet (the conditions part).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeprecatedConditions {
    /// The v1beta1 fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub v1beta1: Option<V1beta2Conditions>,
}

/// A Machine: one node's infrastructure.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The desired state.
    #[serde(default)]
    pub spec: MachineSpec,
    /// The observed state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<MachineStatus>,
}

/// The desired state of a Machine.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MachineSpec {
    /// Cluster, bootstrap, infrastructure, version, failure domain, providerID and taints.
    #[serde(flatten)]
    pub fields: MachineSpecFields,
}

/// The Node a Machine became: v1beta2 `{name}`, v1beta1 an `ObjectReference`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeReference {
    /// The Node's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// v1beta2 `status.initialization` of a Machine.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineInitialization {
    /// The infrastructure is provisioned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infrastructure_provisioned: Option<bool>,
    /// The bootstrap data secret exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap_data_secret_created: Option<bool>,
}

/// Failure fields v1beta2 keeps under `status.deprecated.v1beta1`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeprecatedV1beta1Failure {
    /// A terminal problem's reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,
    /// A terminal problem's message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_message: Option<String>,
}

/// v1beta2 `status.deprecated`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeprecatedStatus {
    /// The v1beta1 fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub v1beta1: Option<DeprecatedV1beta1Failure>,
}

/// Observed state of a Machine.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineStatus {
    /// Pending, Provisioning, Provisioned, Running, Deleting, Deleted, Failed or Unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// The Node this Machine became.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_ref: Option<NodeReference>,
    /// v1beta1: a terminal problem's reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,
    /// v1beta1: a terminal problem's message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_message: Option<String>,
    /// v1beta1: whether the infrastructure is provisioned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infrastructure_ready: Option<bool>,
    /// v1beta1: whether the bootstrap data is ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap_ready: Option<bool>,
    /// v1beta2: initialization progress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initialization: Option<MachineInitialization>,
    /// v1beta2: fields kept from v1beta1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecated: Option<DeprecatedStatus>,
}

impl MachineStatus {
    fn deprecated(&self) -> Option<&DeprecatedV1beta1Failure> {
        self.deprecated.as_ref()?.v1beta1.as_ref()
    }

    /// A terminal problem's reason, in either version.
    #[must_use]
    pub fn failure_reason(&self) -> Option<&str> {
        self.failure_reason
            .as_deref()
            .or_else(|| self.deprecated()?.failure_reason.as_deref())
    }

    /// A terminal problem's message, in either version.
    #[must_use]
    pub fn failure_message(&self) -> Option<&str> {
        self.failure_message
            .as_deref()
            .or_else(|| self.deprecated()?.failure_message.as_deref())
    }

    /// Whether the infrastructure is provisioned, in either version.
    #[must_use]
    pub fn infrastructure_provisioned(&self) -> bool {
        self.infrastructure_ready == Some(true)
            || self
                .initialization
                .as_ref()
                .and_then(|i| i.infrastructure_provisioned)
                == Some(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_deployment_reads_the_same_in_both_versions() {
        let v1beta1: MachineDeployment = serde_json::from_value(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineDeployment",
            "metadata": {"name": "md", "namespace": "ns"},
            "spec": {"clusterName": "c", "replicas": 2, "strategy": {"type": "OnDelete"},
                "template": {"spec": {"clusterName": "c",
                    "infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                        "kind": "DockerMachineTemplate", "name": "t"},
                    "bootstrap": {"configRef": {"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta1",
                        "kind": "KubeadmConfigTemplate", "name": "b"}}}}}
        }))
        .unwrap();
        let v1beta2: MachineDeployment = serde_json::from_value(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment",
            "metadata": {"name": "md", "namespace": "ns"},
            "spec": {"clusterName": "c", "replicas": 2, "rollout": {"strategy": {"type": "OnDelete"}},
                "template": {"spec": {"clusterName": "c",
                    "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                        "kind": "DockerMachineTemplate", "name": "t"},
                    "bootstrap": {"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io",
                        "kind": "KubeadmConfigTemplate", "name": "b"}}}}}
        }))
        .unwrap();
        for md in [&v1beta1, &v1beta2] {
            assert_eq!(md.spec.strategy_type(), Some("OnDelete"));
            assert!(md.spec.is_on_delete());
            let r = &md.spec.template.spec.infrastructure_ref;
            assert_eq!(
                r.identity(),
                (
                    Some("infrastructure.cluster.x-k8s.io"),
                    Some("DockerMachineTemplate"),
                    Some("t")
                )
            );
            assert_eq!(r.namespace_or(Some("ns")), Some("ns"));
        }
        assert_eq!(
            v1beta1
                .spec
                .template
                .spec
                .infrastructure_ref
                .pinned_version(),
            Some("v1beta1")
        );
        assert_eq!(
            v1beta2
                .spec
                .template
                .spec
                .infrastructure_ref
                .pinned_version(),
            None
        );
        let default = MachineDeploymentSpec::default();
        assert_eq!(default.strategy_type(), None);
        assert!(!default.is_on_delete());
    }

    #[test]
    fn a_core_reference_has_the_empty_group() {
        let r = ContractReference {
            api_version: Some("v1".into()),
            ..ContractReference::default()
        };
        assert_eq!(r.group(), Some(""));
        assert_eq!(r.pinned_version(), Some("v1"));
    }

    #[test]
    fn machine_status_reads_the_same_in_both_versions() {
        let v1beta1: MachineStatus = serde_json::from_value(json!({
            "phase": "Failed", "failureReason": "CreateError", "failureMessage": "no capacity",
            "infrastructureReady": true,
            "nodeRef": {"apiVersion": "v1", "kind": "Node", "name": "n", "uid": "u"}}))
        .unwrap();
        let v1beta2: MachineStatus = serde_json::from_value(json!({
            "phase": "Failed",
            "deprecated": {"v1beta1": {"failureReason": "CreateError", "failureMessage": "no capacity"}},
            "initialization": {"infrastructureProvisioned": true},
            "nodeRef": {"name": "n"}}))
        .unwrap();
        for s in [&v1beta1, &v1beta2] {
            assert_eq!(s.failure_reason(), Some("CreateError"));
            assert_eq!(s.failure_message(), Some("no capacity"));
            assert!(s.infrastructure_provisioned());
            assert_eq!(
                s.node_ref.as_ref().and_then(|r| r.name.as_deref()),
                Some("n")
            );
        }
        assert!(!MachineStatus::default().infrastructure_provisioned());
    }

    #[test]
    fn the_deletion_order_reads_the_same_in_both_versions() {
        let v1beta1: MachineSetSpec =
            serde_json::from_value(json!({"deletePolicy": "Oldest"})).unwrap();
        let v1beta2: MachineSetSpec =
            serde_json::from_value(json!({"deletion": {"order": "Oldest"}})).unwrap();
        assert_eq!(v1beta1.deletion_order(), Some("Oldest"));
        assert_eq!(v1beta2.deletion_order(), Some("Oldest"));
        assert_eq!(MachineSetSpec::default().deletion_order(), None);
    }

    #[test]
    fn a_blocked_scale_up_reads_the_same_in_both_versions() {
        let message = "Scaling up from 1 to 2 replicas is blocked because:\n* MachineSet ms: \
                       ControlPlaneIsStable: control plane is provisioning";
        let condition = json!({"type": "ScalingUp", "status": "True", "reason": "ScalingUp",
            "message": message});
        let v1beta2: MachineDeploymentStatus =
            serde_json::from_value(json!({"conditions": [condition]})).unwrap();
        let v1beta1: MachineDeploymentStatus = serde_json::from_value(json!({
            "conditions": [{"type": "Ready", "status": "False", "severity": "Warning"}],
            "v1beta2": {"conditions": [condition]}}))
        .unwrap();
        assert_eq!(v1beta2.scale_up_blocked(), Some(message));
        assert_eq!(v1beta1.scale_up_blocked(), Some(message));
        let scaling: MachineDeploymentStatus = serde_json::from_value(json!({"conditions": [
            {"type": "ScalingUp", "status": "True", "message": "Scaling up from 1 to 2 replicas"}]}))
        .unwrap();
        assert_eq!(scaling.scale_up_blocked(), None);
        assert_eq!(MachineDeploymentStatus::default().scale_up_blocked(), None);
    }

    #[test]
    fn a_machine_set_held_by_preflight_checks_reads_the_same_in_both_versions() {
        let scaling = json!({"type": "ScalingUp", "status": "True", "reason": "ScalingUp",
            "message": "Scaling up from 1 to 2 replicas is blocked because:\n* ControlPlaneIsStable: upgrading"});
        let created = json!({"type": "MachinesCreated", "status": "False", "severity": "Error",
            "reason": "PreflightCheckFailed", "message": "ControlPlaneIsStable: upgrading"});
        let v1beta2: MachineSetStatus = serde_json::from_value(json!({"conditions": [scaling],
            "deprecated": {"v1beta1": {"conditions": [created]}}}))
        .unwrap();
        let v1beta1: MachineSetStatus = serde_json::from_value(json!({"conditions": [created],
            "v1beta2": {"conditions": [scaling]}}))
        .unwrap();
        for s in [&v1beta2, &v1beta1] {
            assert!(
                s.scale_up_blocked()
                    .unwrap()
                    .contains("ControlPlaneIsStable")
            );
        }
        // v1beta1 conditions alone (Cluster API before v1.9 wrote no v1beta2 ones).
        let old: MachineSetStatus =
            serde_json::from_value(json!({"conditions": [created]})).unwrap();
        assert_eq!(
            old.scale_up_blocked(),
            Some("ControlPlaneIsStable: upgrading")
        );
        assert_eq!(MachineSetStatus::default().scale_up_blocked(), None);
    }

    #[test]
    fn taints_read_from_the_template() {
        let spec: MachineSpecFields = serde_json::from_value(json!({"taints": [
            {"key": "k", "value": "v", "effect": "NoSchedule", "propagation": "Always"}]}))
        .unwrap();
        let taints = spec.taints.unwrap();
        assert_eq!(taints[0].key, "k");
        assert_eq!(taints[0].propagation.as_deref(), Some("Always"));
    }

    #[test]
    fn a_stand_alone_machine_set_reads_as_a_node_group() {
        for (version, deletion) in [
            ("v1beta2", json!({"deletion": {"order": "Oldest"}})),
            ("v1beta1", json!({"deletePolicy": "Oldest"})),
        ] {
            let mut spec = json!({"clusterName": "c", "replicas": 2,
                "selector": {"matchLabels": {"pool": "p"}},
                "template": {"metadata": {"labels": {"pool": "p"}},
                    "spec": {"clusterName": "c", "version": "v1.34.0",
                        "infrastructureRef": {"kind": "DockerMachineTemplate", "name": "t"}}}});
            for (k, v) in deletion.as_object().unwrap() {
                spec[k] = v.clone();
            }
            let ms: MachineSet = serde_json::from_value(json!({
                "apiVersion": format!("cluster.x-k8s.io/{version}"), "kind": "MachineSet",
                "metadata": {"name": "ms", "namespace": "ns", "labels": {"a": "b"}},
                "spec": spec,
                "status": {"replicas": 1, "conditions": [{"type": "ScalingUp", "status": "True",
                    "message": "Scaling up from 1 to 2 replicas is blocked because: x"}]},
            }))
            .unwrap();
            assert!(ms.is_stand_alone());
            let view = MachineDeployment::from_machine_set(&ms);
            assert_eq!(view.group_kind, GroupKind::MachineSet);
            assert_eq!(view.metadata, ms.metadata);
            assert_eq!(view.spec.replicas, Some(2));
            assert_eq!(view.spec.template, ms.spec.template);
            assert!(
                view.spec.is_on_delete(),
                "a MachineSet replaces nothing itself"
            );
            assert_eq!(
                view.spec.deletion.as_ref().and_then(|d| d.order.as_deref()),
                Some("Oldest"),
                "{version}"
            );
            assert!(view.status.unwrap().scale_up_blocked().is_some());
        }
        // Read from the API, a MachineDeployment is one (the kind is not on the wire).
        let md: MachineDeployment =
            serde_json::from_value(json!({"metadata": {"name": "md"}})).unwrap();
        assert_eq!(md.group_kind, GroupKind::MachineDeployment);
        assert!(
            serde_json::to_value(&md)
                .unwrap()
                .get("groupKind")
                .is_none()
        );
    }

    #[test]
    fn a_machine_set_a_machine_deployment_manages_is_not_stand_alone() {
        let owned: MachineSet = serde_json::from_value(json!({"metadata": {"name": "ms",
            "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2",
                "kind": "MachineDeployment", "name": "md", "uid": "u"}]}}))
        .unwrap();
        assert!(
            !owned.is_stand_alone(),
            "owner reference, controller or not"
        );
        let labelled: MachineSet = serde_json::from_value(json!({"metadata": {"name": "ms",
            "labels": {"cluster.x-k8s.io/deployment-name": "md"}}}))
        .unwrap();
        assert!(
            !labelled.is_stand_alone(),
            "its Machines belong to the deployment"
        );
        let cluster_owned: MachineSet = serde_json::from_value(json!({"metadata": {"name": "ms",
            "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2",
                "kind": "Cluster", "name": "c", "uid": "u"}]}}))
        .unwrap();
        assert!(cluster_owned.is_stand_alone());
    }
}
