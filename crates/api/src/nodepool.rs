//! `karpenter.sh/v1` NodePool.
//!
//! Responsibility: the NodePool custom resource exactly as upstream Karpenter defines it — the
//! template NodeClaims are made from, disruption settings and budgets, limits, weight, static
//! replicas — with upstream's schema validation, printer columns and scale subresource.
//! Inputs: JSON/YAML. Outputs: typed objects and accessors that apply upstream's defaults.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{
    Condition, NillableDuration, NodeClassReference, NodeSelectorRequirementWithMinValues, Taint,
};
use crate::schema;

/// Which nodes consolidation may disrupt.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum ConsolidationPolicy {
    /// Only nodes without workload pods.
    WhenEmpty,
    /// Empty nodes and nodes whose pods fit elsewhere or on a cheaper replacement.
    #[default]
    WhenEmptyOrUnderutilized,
    /// Like WhenEmptyOrUnderutilized, but only moves whose savings outweigh the disruption.
    Balanced,
}

/// A voluntary-disruption reason a budget can be limited to.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
pub enum DisruptionReason {
    /// Consolidation of underutilized nodes.
    Underutilized,
    /// Removal of empty nodes.
    Empty,
    /// Replacement of drifted nodes.
    Drifted,
}

/// How many of a NodePool's nodes may be disrupted at once, optionally only in a time window
/// and only for some reasons.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Budget {
    /// How long the budget is active after each schedule hit (minutes and hours only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = schema::BUDGET_DURATION))]
    pub duration: Option<String>,
    /// The most nodes that may be disrupting at once: a percentage of the pool or a count.
    #[schemars(extend("default" = "10%", "pattern" = schema::BUDGET_NODES))]
    pub nodes: String,
    /// The disruption reasons this budget limits; unset means all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 50), extend("x-kubernetes-list-type" = "set"))]
    pub reasons: Option<Vec<DisruptionReason>>,
    /// A cron schedule (UTC) when the budget starts being active; unset means always.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = schema::BUDGET_SCHEDULE))]
    pub schedule: Option<String>,
}

impl Budget {
    /// Upstream's default budgets: one of 10 % for every reason, always active.
    #[must_use]
    pub fn defaults() -> Vec<Budget> {
        vec![Budget {
            duration: None,
            nodes: "10%".into(),
            reasons: None,
            schedule: None,
        }]
    }
}

/// When and how Karpenter may voluntarily disrupt the pool's nodes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Disruption {
    /// At most how many nodes may be disrupting at once; the most restrictive active budget wins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(max = 50),
        extend(
            "default" = [{"nodes": "10%"}],
            "x-kubernetes-list-type" = "atomic",
            "x-kubernetes-validations" = [{
                "message": "'schedule' must be set with 'duration'",
                "rule": "self.all(x, has(x.schedule) == has(x.duration))",
            }],
        )
    )]
    pub budgets: Option<Vec<Budget>>,
    /// How long a node must have had no pod scheduled or removed before it may be consolidated;
    /// `Never` disables consolidation.
    pub consolidate_after: NillableDuration,
    /// Which nodes consolidation may disrupt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "WhenEmptyOrUnderutilized"))]
    pub consolidation_policy: Option<ConsolidationPolicy>,
}

impl Disruption {
    /// The budgets, or upstream's default of one budget of 10 %.
    pub fn budgets_or_default(&self) -> Vec<Budget> {
        self.budgets.clone().unwrap_or_else(Budget::defaults)
    }
}

/// Labels and annotations given to every NodeClaim (and so Node) of the pool.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct NodeClaimTemplateMetadata {
    /// Annotations for the NodeClaims and their Nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-map-type" = "granular"))]
    pub annotations: Option<BTreeMap<String, String>>,
    /// Labels for the NodeClaims and their Nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend(
        "additionalProperties" = {"type": "string", "maxLength": 63, "pattern": schema::LABEL_VALUE},
        "maxProperties" = 100,
        "x-kubernetes-map-type" = "atomic",
        "x-kubernetes-validations" = [
            {
                "message": "label domain \"karpenter.sh\" is restricted",
                "rule": "self.all(x, x in [\"karpenter.sh/capacity-type\", \"karpenter.sh/nodepool\"] || !x.find(\"^([^/]+)\").endsWith(\"karpenter.sh\"))",
            },
            {
                "message": "label \"karpenter.sh/nodepool\" is restricted",
                "rule": "self.all(x, x != \"karpenter.sh/nodepool\")",
            },
            {
                "message": "label \"kubernetes.io/hostname\" is restricted",
                "rule": "self.all(x, x != \"kubernetes.io/hostname\")",
            },
        ],
    ))]
    pub labels: Option<BTreeMap<String, String>>,
}

/// The NodeClaim spec a NodePool stamps out (without resource requests).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimTemplateSpec {
    /// How long a node may live before it is replaced; `Never` disables expiry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "720h"))]
    pub expire_after: Option<NillableDuration>,
    /// The provider-specific node class.
    #[schemars(extend("x-kubernetes-validations" = [
        {"message": "nodeClassRef.group is immutable", "rule": "self.group == oldSelf.group"},
        {"message": "nodeClassRef.kind is immutable", "rule": "self.kind == oldSelf.kind"},
    ]))]
    pub node_class_ref: NodeClassReference,
    /// Constraints on the nodes launched (instance type, zone, capacity type, custom labels…).
    #[schemars(schema_with = "schema::nodepool_requirements")]
    pub requirements: Vec<NodeSelectorRequirementWithMinValues>,
    /// Taints present at startup and expected to be removed by something else; pods need not
    /// tolerate them to be provisioned for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub startup_taints: Option<Vec<Taint>>,
    /// Taints applied to every node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub taints: Option<Vec<Taint>>,
    /// How long draining may take before pods are deleted regardless of PDBs and
    /// do-not-disrupt; unset waits for ever.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = schema::DURATION))]
    pub termination_grace_period: Option<String>,
}

impl NodeClaimTemplateSpec {
    /// The expiry, `"720h"` when unset.
    pub fn expire_after_or_default(&self) -> NillableDuration {
        self.expire_after
            .clone()
            .unwrap_or_else(|| NillableDuration("720h".into()))
    }
}

/// The template NodeClaims of the pool are made from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct NodeClaimTemplate {
    /// Labels and annotations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<NodeClaimTemplateMetadata>,
    /// The NodeClaim spec.
    pub spec: NodeClaimTemplateSpec,
}

/// A NodePool: a class of nodes Karpenter may launch, and how it may disrupt them.
// kube's derive takes one `printcolumn(...)` / `shortname` attribute per entry.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "karpenter.sh",
    version = "v1",
    kind = "NodePool",
    status = "NodePoolStatus",
    category = "karpenter",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.nodes"
    ),
    printcolumn(
        name = "NodeClass",
        type_ = "string",
        json_path = ".spec.template.spec.nodeClassRef.name"
    ),
    printcolumn(name = "Nodes", type_ = "string", json_path = ".status.nodes"),
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
        name = "Weight",
        type_ = "integer",
        json_path = ".spec.weight",
        priority = 1
    ),
    printcolumn(
        name = "CPU",
        type_ = "string",
        json_path = ".status.resources.cpu",
        priority = 1
    ),
    printcolumn(
        name = "Memory",
        type_ = "string",
        json_path = ".status.resources.memory",
        priority = 1
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "message": "Cannot transition NodePool between static (replicas set) and dynamic (replicas unset) provisioning modes",
        "rule": "has(self.replicas) == has(oldSelf.replicas)",
    },
    {
        "message": "only 'limits.nodes' is supported on static NodePools",
        "rule": "!has(self.replicas) || (!has(self.limits) || size(self.limits) == 0 || (size(self.limits) == 1 && 'nodes' in self.limits))",
    },
    {
        "message": "'weight' is not supported on static NodePools",
        "rule": "!has(self.replicas) || !has(self.weight)",
    },
]))]
pub struct NodePoolSpec {
    /// Disruption settings; defaults to `{consolidateAfter: 0s}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = {"consolidateAfter": "0s"}))]
    pub disruption: Option<Disruption>,
    /// Upper bounds on the pool's total capacity per resource; `nodes` bounds the node count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::resource_list")]
    pub limits: Option<BTreeMap<String, Quantity>>,
    /// A fixed node count (alpha): makes the pool static.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub replicas: Option<i64>,
    /// The template of the NodeClaims this pool launches.
    pub template: NodeClaimTemplate,
    /// Priority among NodePools: higher is tried first; unset counts as 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub weight: Option<i32>,
}

impl NodePoolSpec {
    /// The disruption settings with upstream's defaults applied.
    pub fn disruption_or_default(&self) -> Disruption {
        self.disruption.clone().unwrap_or_else(|| Disruption {
            budgets: None,
            consolidate_after: NillableDuration("0s".into()),
            consolidation_policy: None,
        })
    }

    /// Whether the pool is static (has `replicas`).
    pub fn is_static(&self) -> bool {
        self.replicas.is_some()
    }
}

/// What the controllers observed of a NodePool.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodePoolStatus {
    /// Ready, NodeClassReady, ValidationSucceeded, NodeRegistrationHealthy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::conditions")]
    pub conditions: Option<Vec<Condition>>,
    /// The NodeClass generation last seen by the registration-health controller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_class_observed_generation: Option<i64>,
    /// How many nodes the pool has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = 0))]
    pub nodes: Option<i64>,
    /// The capacity the pool's nodes provide, summed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::resource_list")]
    pub resources: Option<BTreeMap<String, Quantity>>,
}
