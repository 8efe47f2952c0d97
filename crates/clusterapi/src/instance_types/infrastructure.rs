//! The infrastructure machine template's scale-from-zero hints (CAPI's opt-in autoscaling from
//! zero proposal): `status.capacity` and `status.nodeInfo`.
//!
//! Responsibility: read those two fields from the template as untyped JSON (every provider has
//! its own kind). Inputs: the template object. Outputs: [`InfrastructureFacts`], or one message
//! per bad field.
//!
//! `status.capacity` is a resource list (quantities as strings or numbers; negative is an
//! error); `status.nodeInfo.architecture` / `.operatingSystem` are label values. Unlike the
//! cluster-autoscaler, which skips an unparsable capacity entry, a bad entry is reported: the
//! MachineDeployment would otherwise be described with part of its capacity missing.

use scheduling::labels::validate_label_value;
use scheduling::quantity::Quantity;
use scheduling::resources::{ResourceName, Resources};
use serde_json::Value;

/// What an infrastructure template says about its machines.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct InfrastructureFacts {
    /// `status.capacity`.
    pub(super) capacity: Resources,
    /// `status.nodeInfo.architecture`, when set and non-empty.
    pub(super) architecture: Option<String>,
    /// `status.nodeInfo.operatingSystem`, when set and non-empty.
    pub(super) operating_system: Option<String>,
}

/// A bad field: (its path, prefixed by the template's kind and name; the message).
pub(super) type FieldProblem = (String, String);

/// Reads `template`.
///
/// # Errors
/// Every bad field.
pub(super) fn read(template: &Value) -> Result<InfrastructureFacts, Vec<FieldProblem>> {
    let kind = template.get("kind").and_then(Value::as_str).unwrap_or("");
    let name = template
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let path = |field: &str| format!("{kind}/{name} {field}");
    let mut problems = Vec::new();
    let mut facts = InfrastructureFacts::default();
    match template.pointer("/status/capacity") {
        None | Some(Value::Null) => {}
        Some(Value::Object(entries)) => {
            for (resource, value) in entries {
                let field = path(&format!("status.capacity.{resource}"));
                let text = match value {
                    Value::String(s) => s.trim().to_owned(),
                    Value::Number(n) => n.to_string(),
                    _ => {
                        problems.push((field, "expected a quantity".to_owned()));
                        continue;
                    }
                };
                match Quantity::parse(&text) {
                    Err(e) if !resource.is_empty() => problems.push((field, e.to_string())),
                    Ok(q) if q.is_negative() => {
                        problems.push((field, format!("{text:?} must not be negative")));
                    }
                    Ok(q) if !resource.is_empty() => {
                        facts.capacity.insert(ResourceName::new(resource), q);
                    }
                    _ => problems.push((field, "empty resource name".to_owned())),
                }
            }
        }
        Some(_) => problems.push((
            path("status.capacity"),
            "expected a resource list".to_owned(),
        )),
    }
    for (pointer, field, slot) in [
        (
            "/status/nodeInfo/architecture",
            "status.nodeInfo.architecture",
            &mut facts.architecture,
        ),
        (
            "/status/nodeInfo/operatingSystem",
            "status.nodeInfo.operatingSystem",
            &mut facts.operating_system,
        ),
    ] {
        match template.pointer(pointer) {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) if s.trim().is_empty() => {}
            Some(Value::String(s)) => match validate_label_value(s.trim()) {
                Ok(()) => *slot = Some(s.trim().to_owned()),
                Err(e) => problems.push((path(field), e.to_string())),
            },
            Some(_) => problems.push((path(field), "expected a string".to_owned())),
        }
    }
    if problems.is_empty() {
        Ok(facts)
    } else {
        Err(problems)
    }
}
