#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::json;

use super::*;

fn pod(value: serde_json::Value) -> core::Pod {
    serde_json::from_value(value).unwrap()
}

fn unschedulable(extra_spec: serde_json::Value) -> core::Pod {
    let mut spec = json!({"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]});
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra_spec.as_object()) {
        spec.extend(extra.clone());
    }
    pod(json!({
        "metadata": {"name": "p", "namespace": "ns", "uid": "u1"},
        "spec": spec,
        "status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
    }))
}

#[test]
fn provisionable_needs_the_unschedulable_condition() {
    assert!(provisionable(&unschedulable(json!({}))));
    let mut p = unschedulable(json!({}));
    p.status = None;
    assert!(!provisionable(&p));
    assert!(is_pending(&p, PendingPolicy::AllUnbound));
}

#[test]
fn bound_nominated_daemonset_and_mirror_pods_are_not_provisionable() {
    assert!(!provisionable(&unschedulable(json!({"nodeName": "n1"}))));
    let mut p = unschedulable(json!({}));
    if let Some(s) = p.status.as_mut() {
        s.nominated_node_name = Some("n2".into());
    }
    assert!(!provisionable(&p));
    for (api_version, kind) in [("apps/v1", "DaemonSet"), ("v1", "Node")] {
        let mut p = unschedulable(json!({}));
        p.metadata.owner_references = Some(vec![
            serde_json::from_value(json!({
                "apiVersion": api_version, "kind": kind, "name": "o", "uid": "x"
            }))
            .unwrap(),
        ]);
        assert!(!provisionable(&p), "{kind}");
        assert!(!is_pending(&p, PendingPolicy::AllUnbound), "{kind}");
    }
    // A ReplicaSet owner is fine.
    let mut p = unschedulable(json!({}));
    p.metadata.owner_references = Some(vec![
        serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "o", "uid": "x"
        }))
        .unwrap(),
    ]);
    assert!(provisionable(&p));
}

#[test]
fn all_unbound_skips_terminal_and_terminating_pods() {
    let mut p = unschedulable(json!({}));
    p.status = Some(serde_json::from_value(json!({"phase": "Succeeded"})).unwrap());
    assert!(!is_pending(&p, PendingPolicy::AllUnbound));
    let mut p = unschedulable(json!({}));
    p.status = None;
    p.metadata.deletion_timestamp =
        Some(serde_json::from_value(json!("2026-01-01T00:00:00Z")).unwrap());
    assert!(!is_pending(&p, PendingPolicy::AllUnbound));
}

#[test]
fn valid_pods_convert_with_their_requests() {
    let wk = WellKnownLabels::cluster_api();
    let p = validate_pod(
        &unschedulable(json!({"nodeSelector": {"topology.kubernetes.io/zone": "a"}})),
        &wk,
    )
    .unwrap();
    assert_eq!(&*p.uid, "u1");
    assert_eq!(p.key(), "ns/p");
    assert_eq!(p.requests.to_string(), "{cpu: 1, pods: 1}");
}

fn required(expressions: serde_json::Value) -> serde_json::Value {
    json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": expressions}]}}}})
}

#[test]
fn pods_avoiding_karpenter_are_ignored_silently() {
    let wk = WellKnownLabels::cluster_api();
    let p = unschedulable(required(
        json!([{"key": "karpenter.sh/nodepool", "operator": "DoesNotExist"}]),
    ));
    let ignored = validate_pod(&p, &wk).unwrap_err();
    assert_eq!(ignored.reason, IgnoreReason::AvoidsKarpenter);
    assert_eq!(ignored.pod, "ns/p");
}

#[test]
fn restricted_labels_invalid_requirements_and_match_fields_are_errors() {
    let wk = WellKnownLabels::cluster_api();
    let message = |p: core::Pod| match validate_pod(&p, &wk).unwrap_err().reason {
        IgnoreReason::Invalid(m) => m,
        IgnoreReason::AvoidsKarpenter => panic!("not an invalid pod"),
    };
    let m = message(unschedulable(
        json!({"nodeSelector": {"kubernetes.io/hostname": "n"}}),
    ));
    assert!(
        m.contains("spec.nodeSelector[kubernetes.io/hostname]"),
        "{m}"
    );
    assert!(m.contains("not allowed"), "{m}");
    let m = message(unschedulable(required(
        json!([{"key": "karpenter.sh/unknown", "operator": "Exists"}]),
    )));
    assert!(m.contains("matchExpressions[0]"), "{m}");
    let m = message(unschedulable(required(
        json!([{"key": "example.com/size", "operator": "Gt", "values": ["-1"]}]),
    )));
    assert!(m.contains("single positive integer"), "{m}");
    let m = message(unschedulable(required(
        json!([{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["cheap"]}]),
    )));
    assert!(m.contains("no valid values"), "{m}");
    let p = unschedulable(json!({"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}]}]}}}}));
    let m = message(p);
    assert!(m.contains("matchFields"), "{m}");
}
