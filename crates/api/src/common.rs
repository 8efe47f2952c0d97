//! Types shared by NodePool, NodeClaim and ClusterAPINodeClass.
//!
//! Responsibility: the serde + schema shape of the building blocks of the karpenter.sh/v1 API —
//! node-class references, taints, requirements with `minValues`, durations that may be `Never`,
//! and status conditions — spelled exactly as the upstream CRDs spell them.
//! Inputs: JSON/YAML. Outputs: typed values that serialize back to the same JSON.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::schema;

/// A reference to the provider-specific node class of a NodePool or NodeClaim.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct NodeClassReference {
    /// API group of the referent (no version), e.g. `karpenter.cluster.x-k8s.io`.
    #[schemars(extend(
        "pattern" = "^[^/]*$",
        "x-kubernetes-validations" = [{"message": "group may not be empty", "rule": "self != ''"}],
    ))]
    pub group: String,
    /// Kind of the referent, e.g. `ClusterAPINodeClass`.
    #[schemars(extend(
        "x-kubernetes-validations" = [{"message": "kind may not be empty", "rule": "self != ''"}],
    ))]
    pub kind: String,
    /// Name of the referent.
    #[schemars(extend(
        "x-kubernetes-validations" = [{"message": "name may not be empty", "rule": "self != ''"}],
    ))]
    pub name: String,
}

/// The effect of a taint on pods that do not tolerate it.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
pub enum TaintEffect {
    /// New pods that do not tolerate the taint are not scheduled.
    NoSchedule,
    /// The scheduler avoids the node for pods that do not tolerate the taint.
    PreferNoSchedule,
    /// Pods that do not tolerate the taint are evicted.
    NoExecute,
}

impl TaintEffect {
    /// The effect as Kubernetes spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NoSchedule => "NoSchedule",
            Self::PreferNoSchedule => "PreferNoSchedule",
            Self::NoExecute => "NoExecute",
        }
    }
}

/// A node taint, as NodePools and NodeClaims declare it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Taint {
    /// The taint effect.
    pub effect: TaintEffect,
    /// The taint key.
    #[schemars(extend("minLength" = 1, "pattern" = schema::QUALIFIED_NAME))]
    pub key: String,
    /// When the taint was added (only meaningful for NoExecute).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::date_time")]
    pub time_added: Option<Time>,
    /// The taint value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = schema::QUALIFIED_NAME))]
    pub value: Option<String>,
}

impl Taint {
    /// The value, or `""` when unset.
    pub fn value_or_empty(&self) -> &str {
        self.value.as_deref().unwrap_or_default()
    }
}

impl From<&Taint> for k8s_openapi::api::core::v1::Taint {
    fn from(taint: &Taint) -> Self {
        Self {
            effect: taint.effect.as_str().to_owned(),
            key: taint.key.clone(),
            time_added: taint.time_added.clone(),
            value: taint.value.clone(),
        }
    }
}

/// The operator of a node-selector requirement.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
pub enum NodeSelectorOperator {
    /// The value is greater than or equal to the single integer value.
    Gte,
    /// The value is less than or equal to the single integer value.
    Lte,
    /// The value is one of the values.
    In,
    /// The value is none of the values (or the label is absent).
    NotIn,
    /// The label is present.
    Exists,
    /// The label is absent.
    DoesNotExist,
    /// The value is greater than the single integer value.
    Gt,
    /// The value is less than the single integer value.
    Lt,
}

impl NodeSelectorOperator {
    /// The operator as Kubernetes spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Gte => "Gte",
            Self::Lte => "Lte",
            Self::In => "In",
            Self::NotIn => "NotIn",
            Self::Exists => "Exists",
            Self::DoesNotExist => "DoesNotExist",
            Self::Gt => "Gt",
            Self::Lt => "Lt",
        }
    }
}

/// A node-selector requirement that may also demand a minimum number of distinct values
/// (`minValues`) among the instance types a NodeClaim may launch as.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeSelectorRequirementWithMinValues {
    /// The label key the requirement applies to.
    #[schemars(schema_with = "schema::requirement_key")]
    pub key: String,
    /// The minimum number of distinct values this key must keep among the instance-type options
    /// (alpha).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::min_values")]
    pub min_values: Option<i64>,
    /// How the key relates to the values.
    pub operator: NodeSelectorOperator,
    /// The values: non-empty for In/NotIn, empty for Exists/DoesNotExist, one integer for
    /// Gt/Lt/Gte/Lte.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::requirement_values")]
    pub values: Option<Vec<String>>,
}

impl NodeSelectorRequirementWithMinValues {
    /// The values, empty when unset.
    pub fn values(&self) -> &[String] {
        self.values.as_deref().unwrap_or_default()
    }
}

/// A duration of seconds, minutes and hours (`"720h"`, `"1h30m"`), or `"Never"`.
///
/// The original string is kept so objects round-trip unchanged; [`NillableDuration::parse`]
/// gives its meaning.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct NillableDuration(pub String);

impl JsonSchema for NillableDuration {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "NillableDuration".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({"type": "string", "pattern": schema::NILLABLE_DURATION})
    }

    fn inline_schema() -> bool {
        true
    }
}

/// Why a duration string could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid duration {value:?}: expected digits followed by s, m or h (e.g. \"720h\", \"1h30m\"){never}"
)]
pub struct DurationError {
    /// The rejected input.
    pub value: String,
    /// `" or \"Never\""` when `Never` was allowed.
    never: &'static str,
}

impl NillableDuration {
    /// The literal that disables the duration.
    pub const NEVER: &'static str = "Never";

    /// `None` for `Never`, otherwise the duration.
    pub fn parse(&self) -> Result<Option<std::time::Duration>, DurationError> {
        if self.0 == Self::NEVER {
            return Ok(None);
        }
        parse_duration(&self.0).map(Some).map_err(|mut e| {
            e.never = " or \"Never\"";
            e
        })
    }
}

/// Parses a duration of the form `([0-9]+(s|m|h))+` (what the CRD patterns admit).
pub fn parse_duration(value: &str) -> Result<std::time::Duration, DurationError> {
    let err = || DurationError {
        value: value.to_owned(),
        never: "",
    };
    if value.is_empty() {
        return Err(err());
    }
    let mut total: u64 = 0;
    let mut number: Option<u64> = None;
    for c in value.chars() {
        if let Some(d) = c.to_digit(10) {
            let n = number.unwrap_or(0);
            number = Some(
                n.checked_mul(10)
                    .and_then(|n| n.checked_add(u64::from(d)))
                    .ok_or_else(err)?,
            );
            continue;
        }
        let unit = match c {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            _ => return Err(err()),
        };
        let n = number.take().ok_or_else(err)?;
        total = n
            .checked_mul(unit)
            .and_then(|s| total.checked_add(s))
            .ok_or_else(err)?;
    }
    if number.is_some() {
        return Err(err());
    }
    Ok(std::time::Duration::from_secs(total))
}

/// The seconds of a Go duration (`300ms`, `1.5h`, `2h45m`, `-5s`, `0`), as Go's
/// `time.ParseDuration` reads it; `None` for anything else (an empty string, a number without
/// a unit, an unknown unit such as `d`).
#[must_use]
pub fn go_duration_seconds(text: &str) -> Option<f64> {
    #[allow(clippy::cast_precision_loss)]
    crate::go_duration::parse_nanos(text)
        .ok()
        .map(|nanos| nanos as f64 / 1e9)
}

/// The status of a condition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum ConditionStatus {
    /// The condition holds.
    True,
    /// The condition does not hold.
    False,
    /// Not known yet.
    Unknown,
}

/// A status condition, as Karpenter (operatorpkg) writes them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// When the condition last changed status, reason or message.
    #[schemars(schema_with = "schema::date_time")]
    pub last_transition_time: Time,
    /// Human-readable details.
    #[schemars(length(max = 32768))]
    pub message: String,
    /// The `.metadata.generation` the condition was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub observed_generation: Option<i64>,
    /// A CamelCase machine-readable reason.
    #[schemars(length(min = 1, max = 1024), extend("pattern" = schema::CONDITION_REASON))]
    pub reason: String,
    /// True, False or Unknown.
    pub status: ConditionStatus,
    /// The condition type, e.g. `Ready`.
    #[serde(rename = "type")]
    #[schemars(length(max = 316), extend("pattern" = schema::CONDITION_TYPE))]
    pub type_: String,
}

/// Lookup helpers over a condition list.
pub trait Conditions {
    /// The condition of this type, if present.
    fn condition(&self, type_: &str) -> Option<&Condition>;

    /// Whether the condition of this type is present with status True.
    fn is_true(&self, type_: &str) -> bool {
        self.condition(type_)
            .is_some_and(|c| c.status == ConditionStatus::True)
    }
}

impl Conditions for [Condition] {
    fn condition(&self, type_: &str) -> Option<&Condition> {
        self.iter().find(|c| c.type_ == type_)
    }
}

impl Conditions for Option<Vec<Condition>> {
    fn condition(&self, type_: &str) -> Option<&Condition> {
        self.as_deref().and_then(|c| c.condition(type_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn durations_of_seconds_minutes_and_hours_add_up() {
        assert_eq!(
            parse_duration("720h").unwrap(),
            Duration::from_secs(720 * 3600)
        );
        assert_eq!(
            parse_duration("1h30m5s").unwrap(),
            Duration::from_secs(5405)
        );
        assert_eq!(parse_duration("0s").unwrap(), Duration::ZERO);
    }

    #[test]
    fn malformed_durations_are_errors_not_panics() {
        for bad in [
            "",
            "h",
            "10",
            "1d",
            "1.5h",
            "-1h",
            "99999999999999999999h",
            "1h 2m",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn go_durations_read_as_go_reads_them() {
        for (text, seconds) in [
            ("0", 0.0),
            ("+0", 0.0),
            ("300ms", 0.3),
            ("1.5h", 5400.0),
            ("2h45m", 9900.0),
            ("1h0m0s", 3600.0),
            ("-5s", -5.0),
        ] {
            assert_eq!(go_duration_seconds(text), Some(seconds), "{text}");
        }
        for bad in ["", "-", "5", "5d", "s", ".s", "1h-2m"] {
            assert_eq!(go_duration_seconds(bad), None, "{bad}");
        }
    }

    #[test]
    fn never_disables_a_nillable_duration() {
        assert_eq!(NillableDuration("Never".into()).parse().unwrap(), None);
        assert_eq!(
            NillableDuration("30s".into()).parse().unwrap(),
            Some(Duration::from_secs(30))
        );
        let err = NillableDuration("never".into()).parse().unwrap_err();
        assert!(err.to_string().contains("\"Never\""), "{err}");
    }
}
