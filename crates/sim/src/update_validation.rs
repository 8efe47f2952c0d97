//! Update validation of built-in kinds: the immutable fields clients trip over.
//!
//! Responsibility: [`validate_update`] rejects, with kube-apiserver's field paths and reasons:
//! - Pod spec changes other than container and init-container images, `activeDeadlineSeconds`
//!   (set, or lowered), added tolerations, removed scheduling gates and a negative
//!   `terminationGracePeriodSeconds` set to 1 (`spec: Forbidden`), and added or removed
//!   containers (`spec.containers: Forbidden`);
//! - data, binary data and the flag itself of ConfigMaps and Secrets marked `immutable`;
//! - the selector of Deployments, ReplicaSets, DaemonSets, StatefulSets and Jobs, and a Job's
//!   pod template (a suspended Job's scheduling directives aside).
//!
//! Approximations: the Pod refusal's message ends with kube-apiserver's Go diff of the two
//! specs, and a Job template refusal shows the internal Go struct; these show neither (the
//! JSON value instead).
//! Inputs: the resource definition, the stored object and the object about to be stored.
//! Outputs: the causes (empty: valid).

use serde_json::{Value, json};

use crate::registry::ResourceDef;

/// The pod spec fields an update may change, as kube-apiserver lists them.
const POD_UPDATABLE: &str = "`spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

fn get<'a>(v: &'a Value, pointer: &str) -> &'a Value {
    v.pointer(pointer).unwrap_or(&Value::Null)
}

/// The problems of updating `old` to `new`, a built-in object (empty: valid).
#[must_use]
pub fn validate_update(def: &ResourceDef, old: &Value, new: &Value) -> Vec<String> {
    match (def.group.as_str(), def.kind.as_str()) {
        ("", "Pod") => pod(old, new),
        ("", "ConfigMap" | "Secret") => immutable_data(def, old, new),
        ("batch", "Job") => job(old, new),
        ("apps", "Deployment" | "ReplicaSet" | "DaemonSet" | "StatefulSet") => {
            let (a, b) = (get(old, "/spec/selector"), get(new, "/spec/selector"));
            if a == b {
                Vec::new()
            } else {
                vec![format!(
                    "spec.selector: Invalid value: {}: field is immutable",
                    go_json_selector(b)
                )]
            }
        }
        _ => Vec::new(),
    }
}

/// A `metav1.LabelSelector` as Go's `encoding/json` writes it (struct field order).
fn go_json_selector(sel: &Value) -> String {
    let mut parts = Vec::new();
    if let Some(m) = sel.get("matchLabels").filter(|m| !m.is_null()) {
        parts.push(format!("\"matchLabels\":{m}"));
    }
    if let Some(exprs) = sel.get("matchExpressions").and_then(Value::as_array) {
        let items: Vec<String> = exprs
            .iter()
            .map(|e| {
                let mut fields = vec![
                    format!("\"key\":{}", get(e, "/key")),
                    format!("\"operator\":{}", get(e, "/operator")),
                ];
                if let Some(v) = e.get("values").filter(|v| !v.is_null()) {
                    fields.push(format!("\"values\":{v}"));
                }
                format!("{{{}}}", fields.join(","))
            })
            .collect();
        parts.push(format!("\"matchExpressions\":[{}]", items.join(",")));
    }
    format!("{{{}}}", parts.join(","))
}

/// A Job's selector and pod template are immutable, except that a suspended Job's template may
/// change its scheduling directives (node selector, affinity, tolerations, scheduling gates,
/// labels, annotations).
fn job(old: &Value, new: &Value) -> Vec<String> {
    let mut causes = Vec::new();
    let (a, b) = (get(old, "/spec/selector"), get(new, "/spec/selector"));
    if a != b {
        causes.push(format!(
            "spec.selector: Invalid value: {}: field is immutable",
            go_json_selector(b)
        ));
    }
    let (a, b) = (get(old, "/spec/template"), get(new, "/spec/template"));
    if a == b {
        return causes;
    }
    if old.pointer("/spec/suspend") == Some(&json!(true)) {
        let mut munged = b.clone();
        for (part, fields) in [
            (
                "spec",
                &["nodeSelector", "affinity", "tolerations", "schedulingGates"][..],
            ),
            ("metadata", &["labels", "annotations"][..]),
        ] {
            if let Some(m) = munged.get_mut(part).and_then(Value::as_object_mut) {
                for f in fields {
                    match a.get(part).and_then(|p| p.get(*f)) {
                        Some(v) => m.insert((*f).to_owned(), v.clone()),
                        None => m.remove(*f),
                    };
                }
            }
        }
        if munged.get("spec") != a.get("spec") {
            causes.push(format!(
                "spec.template.spec: Invalid value: {}: field is immutable",
                get(&munged, "/spec")
            ));
        }
    } else {
        causes.push(format!(
            "spec.template: Invalid value: {b}: field is immutable"
        ));
    }
    causes
}

fn immutable_data(def: &ResourceDef, old: &Value, new: &Value) -> Vec<String> {
    if old.get("immutable") != Some(&json!(true)) {
        return Vec::new();
    }
    let forbidden = |f: &str| format!("{f}: Forbidden: field is immutable when `immutable` is set");
    let mut causes = Vec::new();
    if new.get("immutable") != Some(&json!(true)) {
        causes.push(forbidden("immutable"));
    }
    let fields: &[&str] = if def.kind == "Secret" {
        &["data"]
    } else {
        &["data", "binaryData"]
    };
    for f in fields {
        let empty = |v: Option<&Value>| v.is_none_or(|v| v.is_null() || v == &json!({}));
        let (a, b) = (old.get(*f), new.get(*f));
        if a != b && !(empty(a) && empty(b)) {
            causes.push(forbidden(f));
        }
    }
    causes
}

fn pod(old: &Value, new: &Value) -> Vec<String> {
    let (os, ns) = (get(old, "/spec"), get(new, "/spec"));
    if os == ns {
        return Vec::new();
    }
    for list in ["containers", "initContainers"] {
        let len = |s: &Value| s.get(list).and_then(Value::as_array).map_or(0, Vec::len);
        if len(os) != len(ns) {
            return vec![format!(
                "spec.{list}: Forbidden: pod updates may not add or remove containers"
            )];
        }
    }
    let mut causes = Vec::new();
    match (
        ns.get("activeDeadlineSeconds").and_then(Value::as_i64),
        os.get("activeDeadlineSeconds").and_then(Value::as_i64),
    ) {
        (Some(n), _) if n < 0 => {
            causes.push(format!("spec.activeDeadlineSeconds: Invalid value: {n}: must be between 0 and 2147483647, inclusive"));
            return causes;
        }
        (Some(n), Some(o)) if o < n => {
            causes.push(format!(
                "spec.activeDeadlineSeconds: Invalid value: {n}: must be less than or equal to previous value"
            ));
            return causes;
        }
        (None, Some(_)) => causes.push(
            "spec.activeDeadlineSeconds: Invalid value: \"null\": must not update from a positive integer to nil value"
                .into(),
        ),
        _ => {}
    }
    let old_tolerations = os.get("tolerations").and_then(Value::as_array);
    let new_tolerations = ns.get("tolerations").and_then(Value::as_array);
    for (i, t) in old_tolerations.into_iter().flatten().enumerate() {
        if !new_tolerations.is_some_and(|n| n.contains(t)) {
            causes.push(format!(
                "spec.tolerations[{i}]: Forbidden: existing toleration can not be modified except its tolerationSeconds"
            ));
        }
    }
    // Everything else must be unchanged: take the updatable fields from the old spec.
    let mut munged = ns.clone();
    for list in ["containers", "initContainers"] {
        let olds = os.get(list).and_then(Value::as_array);
        if let Some(Value::Array(items)) = munged.get_mut(list) {
            for (i, c) in items.iter_mut().enumerate() {
                let image = olds
                    .and_then(|o| o.get(i))
                    .and_then(|o| o.get("image"))
                    .cloned()
                    .unwrap_or(Value::Null);
                if let Some(m) = c.as_object_mut() {
                    m.insert("image".into(), image);
                }
            }
        }
    }
    let negative_to_one = os
        .get("terminationGracePeriodSeconds")
        .and_then(Value::as_i64)
        .is_some_and(|g| g < 0)
        && ns.get("terminationGracePeriodSeconds") == Some(&json!(1));
    let mut fields = vec!["activeDeadlineSeconds", "tolerations", "schedulingGates"];
    if negative_to_one {
        fields.push("terminationGracePeriodSeconds");
    }
    if let Some(m) = munged.as_object_mut() {
        for f in fields {
            match os.get(f) {
                Some(v) => m.insert(f.to_owned(), v.clone()),
                None => m.remove(f),
            };
        }
    }
    if &munged != os {
        causes.push(format!(
            "spec: Forbidden: pod updates may not change fields other than {POD_UPDATABLE}"
        ));
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtins;

    use builtins::def;

    #[test]
    fn pods_change_only_images_and_a_few_fields() {
        let p = |spec: Value| json!({"metadata": {"name": "p"}, "spec": spec});
        let old = p(
            json!({"containers": [{"name": "c", "image": "a"}], "restartPolicy": "Always",
            "tolerations": [{"key": "k"}]}),
        );
        let image = p(
            json!({"containers": [{"name": "c", "image": "b"}], "restartPolicy": "Always",
            "tolerations": [{"key": "k"}, {"key": "j"}], "activeDeadlineSeconds": 5}),
        );
        assert!(validate_update(&def("Pod"), &old, &image).is_empty());
        let policy = p(
            json!({"containers": [{"name": "c", "image": "a"}], "restartPolicy": "Never",
            "tolerations": [{"key": "k"}]}),
        );
        assert!(validate_update(&def("Pod"), &old, &policy)[0].starts_with("spec: Forbidden"));
        let more = p(
            json!({"containers": [{"name": "c", "image": "a"}, {"name": "d", "image": "a"}],
            "restartPolicy": "Always", "tolerations": [{"key": "k"}]}),
        );
        assert!(
            validate_update(&def("Pod"), &old, &more)[0].starts_with("spec.containers: Forbidden")
        );
    }

    #[test]
    fn immutable_config_maps_and_selectors() {
        let old = json!({"data": {"a": "1"}, "immutable": true});
        let new = json!({"data": {"a": "2"}, "immutable": true});
        assert_eq!(
            validate_update(&def("ConfigMap"), &old, &new),
            vec!["data: Forbidden: field is immutable when `immutable` is set"]
        );
        let d = |labels: Value| json!({"spec": {"selector": {"matchLabels": labels}}});
        let causes = validate_update(
            &def("Deployment"),
            &d(json!({"a": "b"})),
            &d(json!({"a": "c"})),
        );
        assert_eq!(
            causes,
            vec![r#"spec.selector: Invalid value: {"matchLabels":{"a":"c"}}: field is immutable"#]
        );
    }
}
