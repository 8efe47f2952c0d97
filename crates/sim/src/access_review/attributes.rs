//! The field and label selector attributes of an access review's `resourceAttributes`.
//!
//! Responsibility: what kube-apiserver's `validateResourceAttributes` refuses (raw selector and
//! requirements together, neither, In/NotIn without values, Exists/DoesNotExist with values, a
//! field requirement without a key, an invalid label key or value; unknown operators are
//! allowed), and what its authorizer ignores with an `evaluationError` (a raw selector that
//! does not parse; field requirements other than In/NotIn with one value; label requirements
//! with an unknown operator).
//! Inputs: `ResourceAttributes`. Outputs: causes (`field: problem`) and the evaluation error.

use k8s_openapi::api::authorization::v1::ResourceAttributes;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    FieldSelectorRequirement, LabelSelectorRequirement,
};

use crate::selectors::{
    FieldSelector, LABEL_VALUE_MESSAGE, LabelSelector, key_problem, valid_value,
};

const AT: &str = "spec.resourceAttributes";

/// A selector attribute reduced to what both kinds share.
struct Selector<'a> {
    /// `fieldSelector` or `labelSelector`.
    name: &'static str,
    raw: &'a str,
    /// `(key, operator, values)`.
    requirements: Vec<(&'a str, &'a str, &'a [String])>,
}

fn field_requirement(r: &FieldSelectorRequirement) -> (&str, &str, &[String]) {
    (&r.key, &r.operator, r.values.as_deref().unwrap_or_default())
}

fn label_requirement(r: &LabelSelectorRequirement) -> (&str, &str, &[String]) {
    (&r.key, &r.operator, r.values.as_deref().unwrap_or_default())
}

fn field_selector(attrs: &ResourceAttributes) -> Option<Selector<'_>> {
    let s = attrs.field_selector.as_ref()?;
    Some(Selector {
        name: "fieldSelector",
        raw: s.raw_selector.as_deref().unwrap_or_default(),
        requirements: s
            .requirements
            .iter()
            .flatten()
            .map(field_requirement)
            .collect(),
    })
}

fn label_selector(attrs: &ResourceAttributes) -> Option<Selector<'_>> {
    let s = attrs.label_selector.as_ref()?;
    let req = label_requirement;
    Some(Selector {
        name: "labelSelector",
        raw: s.raw_selector.as_deref().unwrap_or_default(),
        requirements: s.requirements.iter().flatten().map(req).collect(),
    })
}

/// The shared checks, then the kind's checks of each requirement.
fn selector_causes(s: &Selector<'_>, out: &mut Vec<String>) {
    let at = format!("{AT}.{}", s.name);
    if !s.raw.is_empty() && !s.requirements.is_empty() {
        out.push(format!(
            "{at}.rawSelector: Invalid value: {:?}: may not specified at the same time as requirements",
            s.raw
        ));
    }
    if s.raw.is_empty() && s.requirements.is_empty() {
        out.push(format!(
            "{at}.requirements: Required value: when {at} is specified, requirements or rawSelector is required"
        ));
    }
    for (i, (key, op, values)) in s.requirements.iter().enumerate() {
        let at = format!("{at}.requirements[{i}]");
        let is_field = s.name == "fieldSelector";
        if is_field && key.is_empty() {
            out.push(format!("{at}.key: Required value: must be specified"));
        }
        match *op {
            "In" | "NotIn" if values.is_empty() => out.push(format!(
                "{at}.values: Required value: must be specified when `operator` is 'In' or 'NotIn'"
            )),
            "Exists" | "DoesNotExist" if !values.is_empty() => out.push(format!(
                "{at}.values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
            )),
            _ => {}
        }
        if is_field {
            continue;
        }
        if let Some(problem) = key_problem(key) {
            out.push(format!("{at}.key: Invalid value: {key:?}: {problem}"));
        }
        for (j, v) in values.iter().enumerate() {
            if !valid_value(v) {
                out.push(format!(
                    "{at}.values[{j}]: Invalid value: {v:?}: {LABEL_VALUE_MESSAGE}"
                ));
            }
        }
    }
}

/// What is invalid in the selector attributes, as `field: problem`.
pub fn causes(attrs: &ResourceAttributes) -> Vec<String> {
    let mut out = Vec::new();
    for s in [field_selector(attrs), label_selector(attrs)]
        .into_iter()
        .flatten()
    {
        selector_causes(&s, &mut out);
    }
    out
}

/// Whether a requirement is one the authorizer understands.
fn usable(is_field: bool, op: &str, values: &[String]) -> bool {
    if is_field {
        matches!(op, "In" | "NotIn") && values.len() == 1
    } else {
        matches!(op, "In" | "NotIn" | "Exists" | "DoesNotExist")
    }
}

/// The `evaluationError` of valid attributes whose selectors the authorizer (partly) ignores.
pub fn evaluation_error(attrs: &ResourceAttributes) -> Option<String> {
    let mut errors = Vec::new();
    for s in [field_selector(attrs), label_selector(attrs)]
        .into_iter()
        .flatten()
    {
        let is_field = s.name == "fieldSelector";
        let (parsed, failed) = if s.raw.is_empty() {
            let ok = s
                .requirements
                .iter()
                .filter(|(_, op, values)| usable(is_field, op, values))
                .count();
            (ok, s.requirements.len() - ok)
        } else if is_field {
            (0, usize::from(FieldSelector::parse(s.raw).is_err()))
        } else {
            (0, usize::from(LabelSelector::parse(s.raw).is_err()))
        };
        if failed > 0 {
            let how = if parsed > 0 {
                "partially ignored"
            } else {
                "ignored"
            };
            errors.push(format!("{AT}.{} {how} due to parse error", s.name));
        }
    }
    (!errors.is_empty()).then(|| errors.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(v: serde_json::Value) -> ResourceAttributes {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn raw_selector_and_requirements_exclude_each_other() {
        let a = attrs(serde_json::json!({"fieldSelector": {"rawSelector": "a=b",
            "requirements": [{"key": "a", "operator": "In", "values": ["b"]}]}}));
        assert_eq!(
            causes(&a),
            [
                "spec.resourceAttributes.fieldSelector.rawSelector: Invalid value: \"a=b\": may not specified at the same time as requirements"
            ]
        );
        let a = attrs(serde_json::json!({"labelSelector": {}}));
        assert_eq!(
            causes(&a),
            [
                "spec.resourceAttributes.labelSelector.requirements: Required value: when spec.resourceAttributes.labelSelector is specified, requirements or rawSelector is required"
            ]
        );
    }

    #[test]
    fn requirements_are_checked_like_kube_apiserver() {
        let a = attrs(serde_json::json!({"labelSelector": {"requirements": [
            {"key": "-bad", "operator": "Exists", "values": ["x"]}]}}));
        let c = causes(&a);
        assert_eq!(c.len(), 2, "{c:?}");
        assert!(c[0].ends_with(
            "values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
        ));
        assert!(c[1].starts_with("spec.resourceAttributes.labelSelector.requirements[0].key: Invalid value: \"-bad\": name part must consist"));
        let a = attrs(serde_json::json!({"fieldSelector": {"requirements": [
            {"key": "", "operator": "Near"}]}}));
        assert_eq!(
            causes(&a),
            [
                "spec.resourceAttributes.fieldSelector.requirements[0].key: Required value: must be specified"
            ]
        );
    }

    #[test]
    fn unusable_selectors_are_evaluation_errors() {
        let a = attrs(serde_json::json!({"fieldSelector": {"requirements": [
            {"key": "a", "operator": "In", "values": ["b", "c"]}]}}));
        assert!(causes(&a).is_empty());
        assert_eq!(
            evaluation_error(&a).as_deref(),
            Some("spec.resourceAttributes.fieldSelector ignored due to parse error")
        );
        let a = attrs(serde_json::json!({"labelSelector": {"requirements": [
            {"key": "a", "operator": "Exists"}, {"key": "b", "operator": "Near"}]},
            "fieldSelector": {"rawSelector": "a in (b"}}));
        assert_eq!(
            evaluation_error(&a).as_deref(),
            Some(
                "spec.resourceAttributes.fieldSelector ignored due to parse error; spec.resourceAttributes.labelSelector partially ignored due to parse error"
            )
        );
        let a = attrs(serde_json::json!({"labelSelector": {"rawSelector": "a=b"}}));
        assert_eq!(evaluation_error(&a), None);
    }
}
