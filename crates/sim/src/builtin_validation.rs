//! Validation of built-in kinds, the part of kube-apiserver's that clients trip over.
//!
//! Responsibility: [`validate`] rejects, with a 422 naming each field like kube-apiserver:
//! - an object that does not decode as its kind (wrong types, unknown enum shapes), through the
//!   k8s-openapi types, with the JSON path of the first mismatch;
//! - `metadata.name` that is not a lowercase RFC 1123 subdomain (a DNS label for Namespaces);
//! - Pods without containers, containers without a name or an image, duplicate container names;
//! - Deployments, ReplicaSets, DaemonSets and StatefulSets without a selector, or whose template
//!   labels the selector does not match;
//! - Pod status IPs that are not IP addresses (`status.hostIPs[0]` of `""`);
//! - `MicroTime` fields (Lease `acquireTime`/`renewTime`, Event `eventTime`) without exactly six
//!   fractional digits, which kube-apiserver cannot parse.
//!
//! Not checked (kube-apiserver checks many more): resource quantities' semantics beyond their
//! syntax, immutability of fields on update, probes, volumes, security contexts.
//! Inputs: the resource definition and the object as it will be stored. Outputs: the causes.

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::registry::ResourceDef;

/// Whether `obj` decodes as `T`. The path of a failure is found by decoding again with
/// `serde_path_to_error`, whose per-field tracking would cost every valid write.
fn decodes<T: DeserializeOwned>(obj: &Value) -> Result<(), String> {
    if T::deserialize(obj).is_ok() {
        return Ok(());
    }
    serde_path_to_error::deserialize::<_, T>(obj)
        .map(|_| ())
        .map_err(|e| format!("{}: Invalid value: {}", e.path(), e.inner()))
}

/// kube-apiserver's `MicroTime` layout: exactly six fractional digits.
const MICRO_TIME: &str = "2006-01-02T15:04:05.000000Z07:00";

/// Whether `t` parses with [`MICRO_TIME`] (Go's `time.Parse`, which wants the six digits).
fn micro_time(t: &str) -> bool {
    let b = t.as_bytes();
    let digits =
        |r: std::ops::Range<usize>| b.get(r).is_some_and(|d| d.iter().all(u8::is_ascii_digit));
    let at = |i: usize, c: u8| b.get(i) == Some(&c);
    let zone = match b.get(26..) {
        Some(b"Z") => true,
        Some(z) if z.len() == 6 => {
            (z.first() == Some(&b'+') || z.first() == Some(&b'-'))
                && z.get(1..3)
                    .is_some_and(|d| d.iter().all(u8::is_ascii_digit))
                && z.get(3) == Some(&b':')
                && z.get(4..6)
                    .is_some_and(|d| d.iter().all(u8::is_ascii_digit))
        }
        _ => false,
    };
    digits(0..4)
        && at(4, b'-')
        && digits(5..7)
        && at(7, b'-')
        && digits(8..10)
        && at(10, b'T')
        && digits(11..13)
        && at(13, b':')
        && digits(14..16)
        && at(16, b':')
        && digits(17..19)
        && at(19, b'.')
        && digits(20..26)
        && zone
}

/// Pod status IPs (`hostIP`, `hostIPs[].ip`, `podIP`, `podIPs[].ip`) that are not IP addresses.
fn pod_status_ips(obj: &Value, causes: &mut Vec<String>) {
    let bad = |ip: &str| ip.parse::<std::net::IpAddr>().is_err();
    let message = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)";
    for single in ["hostIP", "podIP"] {
        if let Some(Value::String(ip)) = obj.pointer(&format!("/status/{single}"))
            && !ip.is_empty()
            && bad(ip)
        {
            causes.push(format!("status.{single}: Invalid value: {ip:?}: {message}"));
        }
    }
    for list in ["hostIPs", "podIPs"] {
        let items = obj
            .pointer(&format!("/status/{list}"))
            .and_then(Value::as_array);
        for (i, item) in items.into_iter().flatten().enumerate() {
            let ip = item.get("ip").and_then(Value::as_str).unwrap_or_default();
            if bad(ip) {
                causes.push(format!(
                    "status.{list}[{i}]: Invalid value: {ip:?}: {message}"
                ));
            }
        }
    }
}

/// `MicroTime` fields of `obj` at these JSON pointers that kube-apiserver cannot parse.
fn micro_times(obj: &Value, fields: &[&str], causes: &mut Vec<String>) {
    for field in fields {
        if let Some(Value::String(t)) = obj.pointer(field)
            && !micro_time(t)
        {
            causes.push(format!(
                "{}: Invalid value: {t:?}: parsing time {t:?} as {MICRO_TIME:?}",
                field.trim_start_matches('/').replace('/', ".")
            ));
        }
    }
}

fn pod_spec(spec: Option<&Value>, at: &str, causes: &mut Vec<String>) {
    let containers = spec
        .and_then(|s| s.get("containers"))
        .and_then(Value::as_array);
    let Some(containers) = containers.filter(|c| !c.is_empty()) else {
        causes.push(format!("{at}.containers: Required value"));
        return;
    };
    let mut seen = std::collections::BTreeSet::new();
    for (i, c) in containers.iter().enumerate() {
        let name = c.get("name").and_then(Value::as_str).unwrap_or_default();
        if name.is_empty() {
            causes.push(format!("{at}.containers[{i}].name: Required value"));
        } else if !seen.insert(name) {
            causes.push(format!(
                "{at}.containers[{i}].name: Duplicate value: {name:?}"
            ));
        }
        if c.get("image")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            causes.push(format!("{at}.containers[{i}].image: Required value"));
        }
    }
}

fn selector_matches_template(obj: &Value, causes: &mut Vec<String>) {
    let Some(selector) = obj.pointer("/spec/selector") else {
        causes.push("spec.selector: Required value".into());
        return;
    };
    let labels = obj
        .pointer("/spec/template/metadata/labels")
        .and_then(Value::as_object);
    let label = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
    let match_labels = selector.get("matchLabels").and_then(Value::as_object);
    let expressions = selector.get("matchExpressions").and_then(Value::as_array);
    if match_labels.is_none_or(serde_json::Map::is_empty) && expressions.is_none_or(Vec::is_empty) {
        causes
            .push("spec.selector: Invalid value: empty selector is invalid for deployment".into());
        return;
    }
    let mut matches = match_labels
        .into_iter()
        .flatten()
        .all(|(k, v)| label(k) == v.as_str());
    for e in expressions.into_iter().flatten() {
        let key = e.get("key").and_then(Value::as_str).unwrap_or_default();
        let values: Vec<&str> = e
            .get("values")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        matches &= match e.get("operator").and_then(Value::as_str) {
            Some("In") => label(key).is_some_and(|v| values.contains(&v)),
            Some("NotIn") => label(key).is_none_or(|v| !values.contains(&v)),
            Some("Exists") => label(key).is_some(),
            Some("DoesNotExist") => label(key).is_none(),
            _ => false,
        };
    }
    if !matches {
        causes.push(
            "spec.template.metadata.labels: Invalid value: `selector` does not match template `labels`"
                .into(),
        );
    }
}

/// The problems of `obj`, a built-in object about to be stored (empty: valid).
#[must_use]
pub fn validate(def: &ResourceDef, obj: &Value) -> Vec<String> {
    let mut causes = Vec::new();
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let kind = def.kind.as_str();
    if !name.is_empty() && kind != "Event" {
        for m in crate::semantics::name_messages(def, name, false) {
            causes.push(format!("metadata.name: Invalid value: {name:?}: {m}"));
        }
    }
    let decoded = match (def.group.as_str(), kind) {
        ("", "Pod") => decodes::<Pod>(obj),
        ("", "Node") => decodes::<Node>(obj),
        ("", "Namespace") => decodes::<Namespace>(obj),
        ("", "ConfigMap") => decodes::<ConfigMap>(obj),
        ("", "PodTemplate") => decodes::<k8s_openapi::api::core::v1::PodTemplate>(obj),
        ("apps", "Deployment") => decodes::<Deployment>(obj),
        ("apps", "ReplicaSet") => decodes::<ReplicaSet>(obj),
        ("apps", "DaemonSet") => decodes::<DaemonSet>(obj),
        ("apps", "StatefulSet") => decodes::<StatefulSet>(obj),
        ("policy", "PodDisruptionBudget") => decodes::<PodDisruptionBudget>(obj),
        ("", "Service") => decodes::<k8s_openapi::api::core::v1::Service>(obj),
        ("", "PersistentVolumeClaim") => {
            decodes::<k8s_openapi::api::core::v1::PersistentVolumeClaim>(obj)
        }
        ("", "PersistentVolume") => decodes::<k8s_openapi::api::core::v1::PersistentVolume>(obj),
        ("", "ResourceQuota") => decodes::<k8s_openapi::api::core::v1::ResourceQuota>(obj),
        ("batch", "CronJob") => decodes::<k8s_openapi::api::batch::v1::CronJob>(obj),
        ("discovery.k8s.io", "EndpointSlice") => {
            decodes::<k8s_openapi::api::discovery::v1::EndpointSlice>(obj)
        }
        ("networking.k8s.io", "Ingress") => {
            decodes::<k8s_openapi::api::networking::v1::Ingress>(obj)
        }
        ("scheduling.k8s.io", "PriorityClass") => {
            decodes::<k8s_openapi::api::scheduling::v1::PriorityClass>(obj)
        }
        ("storage.k8s.io", "StorageClass") => {
            decodes::<k8s_openapi::api::storage::v1::StorageClass>(obj)
        }
        ("rbac.authorization.k8s.io", "Role") => decodes::<k8s_openapi::api::rbac::v1::Role>(obj),
        ("rbac.authorization.k8s.io", "RoleBinding") => {
            decodes::<k8s_openapi::api::rbac::v1::RoleBinding>(obj)
        }
        ("rbac.authorization.k8s.io", "ClusterRole") => {
            decodes::<k8s_openapi::api::rbac::v1::ClusterRole>(obj)
        }
        ("rbac.authorization.k8s.io", "ClusterRoleBinding") => {
            decodes::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>(obj)
        }
        ("coordination.k8s.io", "Lease") => decodes::<Lease>(obj),
        _ => Ok(()),
    };
    if let Err(cause) = decoded {
        causes.push(cause);
        return causes;
    }
    match (def.group.as_str(), kind) {
        ("coordination.k8s.io", "Lease") => {
            micro_times(obj, &["/spec/acquireTime", "/spec/renewTime"], &mut causes);
        }
        ("events.k8s.io" | "", "Event") => {
            micro_times(
                obj,
                &["/eventTime", "/series/lastObservedTime"],
                &mut causes,
            );
        }
        ("", "Pod") => {
            pod_spec(obj.get("spec"), "spec", &mut causes);
            pod_status_ips(obj, &mut causes);
        }
        ("apps", "Deployment" | "ReplicaSet" | "DaemonSet" | "StatefulSet") => {
            selector_matches_template(obj, &mut causes);
            pod_spec(
                obj.pointer("/spec/template/spec"),
                "spec.template.spec",
                &mut causes,
            );
        }
        _ => {}
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtins;
    use serde_json::json;

    use builtins::def;

    #[test]
    fn pod_status_ips_must_be_addresses() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "i"}]},
            "status": {"hostIP": "10.0.0.1", "hostIPs": [{"ip": ""}], "podIPs": [{"ip": "10.1.0.1"}]}});
        let causes = validate(&def("Pod"), &pod);
        assert_eq!(causes.len(), 1, "{causes:?}");
        assert!(
            causes[0].starts_with("status.hostIPs[0]: Invalid value: \"\""),
            "{causes:?}"
        );
    }

    #[test]
    fn micro_times_need_six_fractional_digits() {
        assert!(micro_time("2026-11-24T13:29:19.822277Z"));
        assert!(micro_time("2026-11-24T13:29:19.822277+01:00"));
        assert!(!micro_time("2026-11-24T13:29:19.822277532Z"));
        assert!(!micro_time("2026-11-24T13:29:19Z"));
        let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "l"}, "spec": {"renewTime": "2026-11-24T13:29:19.822277532Z"}});
        let causes = validate(&def("Lease"), &lease);
        assert_eq!(causes.len(), 1, "{causes:?}");
        assert!(
            causes[0].starts_with("spec.renewTime: Invalid value"),
            "{causes:?}"
        );
    }

    #[test]
    fn a_valid_pod_passes() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-1"},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}});
        assert!(validate(&def("Pod"), &pod).is_empty());
    }

    #[test]
    fn pods_need_named_containers_with_images() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c"}, {"name": "c", "image": "x"}]}});
        assert_eq!(
            validate(&def("Pod"), &pod),
            vec![
                "spec.containers[0].image: Required value".to_owned(),
                "spec.containers[1].name: Duplicate value: \"c\"".to_owned(),
            ]
        );
        let empty =
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}});
        assert_eq!(
            validate(&def("Pod"), &empty),
            vec!["spec.containers: Required value"]
        );
    }

    #[test]
    fn wrong_types_name_the_field() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "x", "ports": "80"}]}});
        let causes = validate(&def("Pod"), &pod);
        assert!(
            causes[0].starts_with("spec.containers[0].ports: Invalid value"),
            "{causes:?}"
        );
    }

    #[test]
    fn names_must_be_lowercase_subdomains() {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "Bad_Name"}});
        assert!(validate(&def("ConfigMap"), &cm)[0].starts_with("metadata.name: Invalid value"));
        let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a.b"}});
        assert!(!validate(&def("Namespace"), &ns).is_empty());
        let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "ip-10-0-0-1.ec2.internal"}});
        assert!(validate(&def("Node"), &node).is_empty());
    }

    #[test]
    fn a_deployment_selector_must_match_its_template() {
        let d = |selector: Value| {
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                "spec": {"selector": selector, "template": {"metadata": {"labels": {"app": "a"}},
                    "spec": {"containers": [{"name": "c", "image": "x"}]}}}})
        };
        assert!(validate(&def("Deployment"), &d(json!({"matchLabels": {"app": "a"}}))).is_empty());
        assert!(
            validate(&def("Deployment"), &d(json!({"matchLabels": {"app": "b"}})))[0]
                .contains("does not match")
        );
        assert!(
            validate(
                &def("Deployment"),
                &d(
                    json!({"matchExpressions": [{"key": "app", "operator": "In", "values": ["a"]}]})
                )
            )
            .is_empty()
        );
    }
}
