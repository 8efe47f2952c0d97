//! `karpenter.sh/v1alpha1` NodeOverlay (feature gate `NodeOverlay`).
//!
//! Responsibility: the NodeOverlay custom resource exactly as upstream Karpenter defines it —
//! requirements selecting instance types and offerings, an absolute `price` or a
//! `priceAdjustment`, extended-resource `capacity`, and a `weight` — with upstream's schema
//! validation, printer columns and status conditions (`ValidationSucceeded`, `Ready`).
//! Inputs: JSON/YAML. Outputs: typed objects.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{Condition, NodeSelectorOperator};
use crate::schema;

/// A price: a non-negative decimal.
pub const PRICE: &str = r"^\d+(\.\d+)?$";
/// A price adjustment: a signed decimal, `+N%`, `-N%` with at most two integer digits, or
/// `-100%`.
pub const PRICE_ADJUSTMENT: &str =
    r"^(([+-]{1}(\d*\.?\d+))|(\+{1}\d*\.?\d+%)|(^(-\d{1,2}(\.\d+)?%)$)|(-100%))$";

/// A node-selector requirement (without `minValues`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct OverlayRequirement {
    /// The label key the requirement applies to.
    #[schemars(schema_with = "schema::requirement_key")]
    pub key: String,
    /// How the key relates to the values.
    pub operator: NodeSelectorOperator,
    /// The values: non-empty for In/NotIn, empty for Exists/DoesNotExist, one integer for
    /// Gt/Lt/Gte/Lte.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::requirement_values")]
    pub values: Option<Vec<String>>,
}

impl OverlayRequirement {
    /// The values, empty when unset.
    pub fn values(&self) -> &[String] {
        self.values.as_deref().unwrap_or_default()
    }
}

/// What a NodeOverlay changes on the instance types its requirements select.
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "karpenter.sh",
    version = "v1alpha1",
    kind = "NodeOverlay",
    status = "NodeOverlayStatus",
    category = "karpenter",
    shortname = "overlays",
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
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "message": "cannot set both 'price' and 'priceAdjustment'",
        "rule": "!has(self.price) || !has(self.priceAdjustment)",
    },
]))]
pub struct NodeOverlaySpec {
    /// Extended resources added to the selected instance types' capacity (never cpu, memory,
    /// ephemeral-storage or pods).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::overlay_capacity")]
    pub capacity: Option<BTreeMap<String, Quantity>>,
    /// The price of the selected offerings, replacing the provider's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = PRICE))]
    pub price: Option<String>,
    /// A change of the selected offerings' price: a signed amount (`-0.5`, `+1.2`) or a
    /// percentage (`+10%`, `-15%`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = PRICE_ADJUSTMENT))]
    pub price_adjustment: Option<String>,
    /// Which instance types and offerings the overlay applies to: instance-type labels, the
    /// NodePool's `karpenter.sh/nodepool` and template labels, zone and capacity type.
    #[schemars(schema_with = "schema::nodeoverlay_requirements")]
    pub requirements: Vec<OverlayRequirement>,
    /// Precedence: higher weights win; equal weights that set the same thing conflict. Unset
    /// is 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 10000))]
    pub weight: Option<i32>,
}

impl NodeOverlaySpec {
    /// The weight, 0 when unset.
    #[must_use]
    pub fn weight(&self) -> i32 {
        self.weight.unwrap_or(0)
    }

    /// Whether the overlay sets a price (`price` or `priceAdjustment`).
    #[must_use]
    pub fn sets_price(&self) -> bool {
        self.price.is_some() || self.price_adjustment.is_some()
    }
}

/// The observed state of a NodeOverlay.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NodeOverlayStatus {
    /// `ValidationSucceeded` and `Ready`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::conditions")]
    pub conditions: Option<Vec<Condition>>,
}
