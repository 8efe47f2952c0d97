//! JSON-schema fragments shared by our CRD types.
//!
//! Responsibility: the validation vocabulary of the upstream CRDs (patterns, CEL rules, quantity
//! and condition schemas) in one place, so every type that needs it says the same thing.
//! Inputs: nothing. Outputs: `const` patterns and `schema_with` functions used by the derives in
//! [`crate::common`], [`crate::nodepool`], [`crate::nodeclaim`], [`crate::nodeclass`] and [`crate::nodeoverlay`].

use schemars::{Schema, SchemaGenerator, json_schema};

/// A qualified name with an optional DNS-subdomain prefix (label keys, taint keys).
pub const QUALIFIED_NAME: &str = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$";
/// A label value (may be empty).
pub const LABEL_VALUE: &str = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$";
/// A Kubernetes resource quantity.
pub const QUANTITY: &str = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";
/// A duration in seconds, minutes and hours, or `Never`.
pub const NILLABLE_DURATION: &str = r"^(([0-9]+(s|m|h))+|Never)$";
/// A duration in seconds, minutes and hours.
pub const DURATION: &str = r"^([0-9]+(s|m|h))+$";
/// A budget duration: minutes and hours only (a trailing `0s` is tolerated).
pub const BUDGET_DURATION: &str = r"^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$";
/// A budget schedule: a cron macro or five cron fields.
pub const BUDGET_SCHEDULE: &str =
    r"^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|((.+)\s(.+)\s(.+)\s(.+)\s(.+))$";
/// A budget's node count: a percentage 0–100 or a non-negative integer.
pub const BUDGET_NODES: &str = r"^((100|[0-9]{1,2})%|[0-9]+)$";
/// A condition type: CamelCase, optionally prefixed by a DNS subdomain.
pub const CONDITION_TYPE: &str = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$";
/// A condition reason.
pub const CONDITION_REASON: &str = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$";

/// A requirement's `key`: a qualified name, where the `karpenter.sh` domain (but for the
/// capacity type and NodePool labels) and `kubernetes.io/hostname` are restricted.
pub fn requirement_key(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "string",
        "maxLength": 316,
        "pattern": QUALIFIED_NAME,
        "x-kubernetes-validations": [
            {
                "message": "label domain \"karpenter.sh\" is restricted",
                "rule": "self in [\"karpenter.sh/capacity-type\", \"karpenter.sh/nodepool\"] || !self.find(\"^([^/]+)\").endsWith(\"karpenter.sh\")",
            },
            {
                "message": "label \"kubernetes.io/hostname\" is restricted",
                "rule": "self != \"kubernetes.io/hostname\"",
            },
        ],
    })
}

/// A requirement's `values`: label values, an atomic list (upstream puts `maxLength` and
/// `pattern` on the list itself, and so do we).
pub fn requirement_values(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "items": {"type": "string"},
        "x-kubernetes-list-type": "atomic",
        "maxLength": 63,
        "pattern": LABEL_VALUE,
    })
}

/// The schema of one resource quantity: an int-or-string matching [`QUANTITY`].
pub fn quantity(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "pattern": QUANTITY,
        "x-kubernetes-int-or-string": true,
    })
}

/// The schema of a resource list: resource name → [`quantity`].
pub fn resource_list(generator: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "additionalProperties": quantity(generator),
    })
}

/// NodeOverlay `spec.capacity`: a resource list that may not name cpu, memory,
/// ephemeral-storage or pods (an overlay only adds extended resources).
pub fn overlay_capacity(generator: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "additionalProperties": quantity(generator),
        "x-kubernetes-validations": [{
            "message": "invalid resource restricted",
            "rule": "self.all(x, !(x in ['cpu', 'memory', 'ephemeral-storage', 'pods']))",
        }],
    })
}

/// `minValues`: an integer from 1 to 50 (Go `int`, so no `format`).
pub fn min_values(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "integer", "minimum": 1, "maximum": 50})
}

/// The schema of a Kubernetes timestamp (RFC 3339).
pub fn date_time(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "string", "format": "date-time"})
}

/// The schema of a standard `metav1.LabelSelector`, as controller-gen writes it.
pub fn label_selector(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "properties": {
            "matchExpressions": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "key": {"type": "string"},
                        "operator": {"type": "string"},
                        "values": {
                            "type": "array",
                            "items": {"type": "string"},
                            "x-kubernetes-list-type": "atomic",
                        },
                    },
                    "required": ["key", "operator"],
                },
                "x-kubernetes-list-type": "atomic",
            },
            "matchLabels": {
                "type": "object",
                "additionalProperties": {"type": "string"},
            },
        },
        "x-kubernetes-map-type": "atomic",
    })
}

/// Rewrites the object at `path` (a list of property names) inside `schema`, if present.
fn at_path<'a>(
    schema: &'a mut serde_json::Value,
    path: &[&str],
) -> Option<&'a mut serde_json::Map<String, serde_json::Value>> {
    let mut node = schema;
    for key in path {
        node = node.get_mut(*key)?;
    }
    node.as_object_mut()
}

/// A status condition list keyed by `type`, with every field required (NodePool, NodeClass).
pub fn conditions(generator: &mut SchemaGenerator) -> Schema {
    let item = generator.subschema_for::<crate::common::Condition>();
    json_schema!({
        "type": "array",
        "items": item,
        "x-kubernetes-list-map-keys": ["type"],
        "x-kubernetes-list-type": "map",
    })
}

/// The NodeClaim flavour of [`conditions`]: reason and message may be empty or absent.
pub fn nodeclaim_conditions(generator: &mut SchemaGenerator) -> Schema {
    let mut value = serde_json::Value::from(conditions(generator));
    if let Some(item) = at_path(&mut value, &["items"]) {
        item.insert(
            "required".into(),
            serde_json::json!(["lastTransitionTime", "status", "type"]),
        );
    }
    if let Some(reason) = at_path(&mut value, &["items", "properties", "reason"]) {
        reason.remove("minLength");
        reason.insert(
            "pattern".into(),
            r"^([A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?|)$".into(),
        );
    }
    Schema::try_from(value).unwrap_or_default()
}

/// The array-level CEL rules both CRDs put on `requirements`.
fn requirement_rules() -> serde_json::Value {
    serde_json::json!([
        {
            "message": "requirements with operator 'In' must have a value defined",
            "rule": "self.all(x, x.operator == 'In' ? x.values.size() != 0 : true)",
        },
        {
            "message": "requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value",
            "rule": "self.all(x, (x.operator == 'Gt' || x.operator == 'Lt' || x.operator == 'Gte' || x.operator == 'Lte') ? (x.values.size() == 1 && int(x.values[0]) >= 0) : true)",
        },
        {
            "message": "requirements with 'minValues' must have at least that many values specified in the 'values' field",
            "rule": "self.all(x, (x.operator == 'In' && has(x.minValues)) ? x.values.size() >= x.minValues : true)",
        },
    ])
}

/// NodeOverlay `spec.requirements`: at most 100 requirements without `minValues`, with the
/// CEL rules upstream's NodeOverlay CRD carries (its wording differs from the NodePool's).
pub fn nodeoverlay_requirements(generator: &mut SchemaGenerator) -> Schema {
    let item = generator.subschema_for::<crate::nodeoverlay::OverlayRequirement>();
    json_schema!({
        "type": "array",
        "items": item,
        "maxItems": 100,
        "x-kubernetes-list-type": "atomic",
        "x-kubernetes-validations": [
            {
                "message": "requirements with operator 'NotIn' must have a value defined",
                "rule": "self.all(x, x.operator == 'NotIn' ? x.values.size() != 0 : true)",
            },
            {
                "message": "requirements with operator 'In' must have a value defined",
                "rule": "self.all(x, x.operator == 'In' ? x.values.size() != 0 : true)",
            },
            {
                "message": "requirements operator 'Gt', 'Lt', 'Gte' or 'Lte' must have a single positive integer value",
                "rule": "self.all(x, (x.operator == 'Gt' || x.operator == 'Lt' || x.operator == 'Gte' || x.operator == 'Lte') ? (x.values.size() == 1 && int(x.values[0]) >= 0) : true)",
            },
        ],
    })
}

/// NodeClaim `spec.requirements`: at most 100 requirements, with upstream's CEL rules.
pub fn nodeclaim_requirements(generator: &mut SchemaGenerator) -> Schema {
    let item = generator.subschema_for::<crate::common::NodeSelectorRequirementWithMinValues>();
    json_schema!({
        "type": "array",
        "items": item,
        "maxItems": 100,
        "x-kubernetes-list-type": "atomic",
        "x-kubernetes-validations": requirement_rules(),
    })
}

/// NodePool `spec.template.spec.requirements`: as for NodeClaims, and the key may not be
/// `karpenter.sh/nodepool` (the NodePool sets it itself).
pub fn nodepool_requirements(generator: &mut SchemaGenerator) -> Schema {
    let mut value = serde_json::Value::from(nodeclaim_requirements(generator));
    if let Some(rules) = at_path(&mut value, &["items", "properties", "key"])
        .and_then(|key| key.get_mut("x-kubernetes-validations"))
        .and_then(serde_json::Value::as_array_mut)
    {
        rules.insert(
            1,
            serde_json::json!({
                "message": "label \"karpenter.sh/nodepool\" is restricted",
                "rule": "self != \"karpenter.sh/nodepool\"",
            }),
        );
    }
    Schema::try_from(value).unwrap_or_default()
}
