//! `karpenter.cluster.x-k8s.io/v1alpha1` ClusterAPINodeClass.
//!
//! Responsibility: the provider's node class — which Cluster API scalable resources
//! (MachineDeployments) a NodePool may launch into, what a node of theirs keeps for itself
//! (kube-reserved, system-reserved, hard eviction thresholds) and what their nodes cost (a price
//! table) — with upstream's schema (cluster-scoped, short names `capinc`/`capincs`, category
//! `karpenter`) plus our additions, all optional so upstream manifests stay valid. The status
//! carries the conditions and the instance types the NodeClass controller derived.
//! Inputs: JSON/YAML. Outputs: typed objects.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::CustomResource;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize};

use crate::common::Condition;
use crate::schema;

/// A resource quantity that is not negative (the sign may only be `+`).
pub const NON_NEGATIVE_QUANTITY: &str = r"^\+?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";
/// A hard eviction threshold: a percentage from 0 to 100 with at most two decimals, or a
/// non-negative quantity.
pub const EVICTION_THRESHOLD: &str = r"^(([0-9]{1,2}(\.[0-9]{1,2})?|100(\.0{1,2})?)%|\+?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?)$";
/// A price: a non-negative decimal number without exponent, e.g. `0.192`.
pub const PRICE: &str = r"^[0-9]+(\.[0-9]+)?$";
/// A MachineDeployment reference, `namespace/name`.
pub const MACHINE_DEPLOYMENT_REF: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?/[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";
/// A non-empty label value (instance-type names, zones).
pub const NON_EMPTY_LABEL_VALUE: &str = r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$";

/// The resource names `kubeReserved` and `systemReserved` accept (kubelet's).
pub const RESERVED_RESOURCES: [&str; 4] = ["cpu", "memory", "ephemeral-storage", "pid"];
/// The eviction signals `evictionHard` accepts.
pub const EVICTION_SIGNALS: [&str; 6] = [
    "memory.available",
    "nodefs.available",
    "nodefs.inodesFree",
    "imagefs.available",
    "imagefs.inodesFree",
    "pid.available",
];
/// The capacity types a price entry may name (the ones the provider offers).
pub const PRICED_CAPACITY_TYPES: [&str; 2] = ["on-demand", "spot"];

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
    /// Resources each node reserves for Kubernetes system daemons (kubelet, container runtime),
    /// as its kubelet's `kubeReserved`: subtracted from capacity to get allocatable. Keys: `cpu`,
    /// `memory`, `ephemeral-storage`, `pid` (`pid` does not affect scheduling). Absent: nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "kube_reserved")]
    pub kube_reserved: Option<BTreeMap<String, Quantity>>,
    /// Resources each node reserves for operating-system daemons, as its kubelet's
    /// `systemReserved`; same keys and meaning as `kubeReserved`. Absent: nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "system_reserved")]
    pub system_reserved: Option<BTreeMap<String, Quantity>>,
    /// The nodes' kubelet hard eviction thresholds: signal → quantity or percentage of capacity
    /// (e.g. `memory.available: 100Mi`, `nodefs.available: 10%`). `memory.available` is kept
    /// free of memory and `nodefs.available` of ephemeral storage; the other signals are accepted
    /// but do not change allocatable. Absent: the kubelet defaults (`memory.available: 100Mi`,
    /// `nodefs.available: 10%`). Present: exactly these (a kubelet given `evictionHard` does not
    /// merge in its defaults).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "eviction_hard")]
    pub eviction_hard: Option<BTreeMap<String, String>>,
    /// Hourly node prices, used for offerings whose MachineDeployment has no price annotation
    /// (`karpenter.cluster.x-k8s.io/price`, or the legacy `cluster.x-k8s.io/machine-current-price`).
    /// An entry applies to an offering when every criterion it sets matches; of the entries that
    /// apply, one naming the MachineDeployment wins, then the one setting the most criteria, then
    /// the first listed. No entry applies: the offering is unpriced (launched only when no priced
    /// one fits, never a cheaper replacement).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxItems" = 1000, "x-kubernetes-list-type" = "atomic"))]
    pub prices: Option<Vec<PriceEntry>>,
}

/// One row of a NodeClass price table. Criteria left out match everything.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PriceEntry {
    /// Matches offerings of this instance type (the `node.kubernetes.io/instance-type` name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxLength" = 63, "pattern" = NON_EMPTY_LABEL_VALUE))]
    pub instance_type: Option<String>,
    /// Matches the offering backed by this MachineDeployment, as `namespace/name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxLength" = 317, "pattern" = MACHINE_DEPLOYMENT_REF))]
    pub machine_deployment: Option<String>,
    /// Matches the offering backed by this stand-alone MachineSet, as `namespace/name` (not
    /// together with `machineDeployment`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxLength" = 317, "pattern" = MACHINE_DEPLOYMENT_REF))]
    pub machine_set: Option<String>,
    /// Matches the offering backed by this MachinePool, as `namespace/name` (not together with
    /// `machineDeployment` or `machineSet`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxLength" = 317, "pattern" = MACHINE_DEPLOYMENT_REF))]
    pub machine_pool: Option<String>,
    /// Matches offerings in this zone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxLength" = 63, "pattern" = NON_EMPTY_LABEL_VALUE))]
    pub zone: Option<String>,
    /// Matches offerings of this capacity type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = PRICED_CAPACITY_TYPES))]
    pub capacity_type: Option<String>,
    /// The hourly price of one node, a non-negative decimal number written as a string
    /// (e.g. `"0.192"`), in whatever currency all prices of the cluster share.
    #[schemars(extend("maxLength" = 32, "pattern" = PRICE))]
    pub price: String,
}

/// The wire form of [`ClusterAPINodeClassSpec`].
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SpecRepr {
    #[serde(default)]
    scalable_resource_selector: Option<LabelSelector>,
    #[serde(default)]
    kube_reserved: Option<BTreeMap<String, Quantity>>,
    #[serde(default)]
    system_reserved: Option<BTreeMap<String, Quantity>>,
    #[serde(default)]
    eviction_hard: Option<BTreeMap<String, String>>,
    #[serde(default)]
    prices: Option<Vec<PriceEntry>>,
}

impl<'de> Deserialize<'de> for ClusterAPINodeClassSpec {
    /// Reads the spec, treating an absent `spec` (serde asks for an option when a field is
    /// missing) as an empty one.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let repr = Option::<SpecRepr>::deserialize(deserializer)?.unwrap_or_default();
        Ok(Self {
            scalable_resource_selector: repr.scalable_resource_selector,
            kube_reserved: repr.kube_reserved,
            system_reserved: repr.system_reserved,
            eviction_hard: repr.eviction_hard,
            prices: repr.prices,
        })
    }
}

/// What the controllers observed of a ClusterAPINodeClass.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterAPINodeClassStatus {
    /// `Ready` says whether the class selects at least one usable MachineDeployment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::conditions")]
    pub conditions: Option<Vec<Condition>>,
    /// The instance types the selected MachineDeployments make up, by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub instance_types: Option<Vec<InstanceTypeStatus>>,
}

/// One instance type as the NodeClass controller last derived it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstanceTypeStatus {
    /// The instance type's name (its `node.kubernetes.io/instance-type` label).
    pub name: String,
    /// The MachineDeployments backing its offerings, as `namespace/name`.
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub machine_deployments: Vec<String>,
    /// The stand-alone MachineSets backing its offerings, as `namespace/name`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub machine_sets: Vec<String>,
    /// The MachinePools backing its offerings, as `namespace/name`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub machine_pools: Vec<String>,
    /// The zones of its offerings (offerings without a zone are not listed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub zones: Vec<String>,
    /// The capacity types of its offerings.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub capacity_types: Vec<String>,
    /// How many of its offerings can launch now (not paused, below their max size).
    #[serde(default)]
    #[schemars(extend("minimum" = 0))]
    pub available_offerings: i32,
}

/// The schema of a reserved-resources list named `field`: non-negative quantities under the
/// kubelet's resource names.
fn reserved_resources(field: &str) -> Schema {
    let keys = RESERVED_RESOURCES.map(|k| format!("'{k}'")).join(",");
    json_schema!({
        "type": "object",
        "additionalProperties": {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": NON_NEGATIVE_QUANTITY,
            "x-kubernetes-int-or-string": true,
        },
        "x-kubernetes-validations": [{
            "message": format!("valid keys for {field} are [{keys}]"),
            "rule": format!("self.all(x, x in [{keys}])"),
        }],
    })
}

/// `spec.kubeReserved`.
fn kube_reserved(_: &mut SchemaGenerator) -> Schema {
    reserved_resources("kubeReserved")
}

/// `spec.systemReserved`.
fn system_reserved(_: &mut SchemaGenerator) -> Schema {
    reserved_resources("systemReserved")
}

/// `spec.evictionHard`: signal → percentage or quantity.
fn eviction_hard(_: &mut SchemaGenerator) -> Schema {
    let keys = EVICTION_SIGNALS.map(|k| format!("'{k}'")).join(",");
    json_schema!({
        "type": "object",
        "additionalProperties": {"type": "string", "pattern": EVICTION_THRESHOLD},
        "x-kubernetes-validations": [{
            "message": format!("valid keys for evictionHard are [{keys}]"),
            "rule": format!("self.all(x, x in [{keys}])"),
        }],
    })
}
