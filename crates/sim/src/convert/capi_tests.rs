//! Tests of [`super::capi`]: each field mapping both ways, round trips, unknown fields.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use serde_json::{Value, json};

use super::capi::*;

fn versions(group: &str, _kind: &str) -> String {
    if group.is_empty() {
        "v1".into()
    } else {
        format!("{group}/v1beta9")
    }
}

fn down(kind: CapiKind, obj: &Value) -> Value {
    to_v1beta1(kind, obj.clone(), &versions)
}

fn up(kind: CapiKind, obj: &Value) -> Value {
    to_v1beta2(kind, obj.clone())
}

fn v1beta2_md() -> Value {
    json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment",
        "metadata": {"name": "md", "namespace": "ns", "labels": {"a": "b"}},
        "spec": {
            "clusterName": "c", "replicas": 3, "paused": false,
            "selector": {"matchLabels": {"a": "b"}},
            "rollout": {"strategy": {"type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 0}},
                "after": "2025-01-01T00:00:00Z"},
            "deletion": {"order": "Oldest"},
            "remediation": {"maxInFlight": 2},
            "machineNaming": {"template": "{{ .machineSet.name }}-{{ .random }}"},
            "template": {
                "metadata": {"labels": {"a": "b"}},
                "spec": {
                    "clusterName": "c", "version": "v1.33.1", "minReadySeconds": 30,
                    "bootstrap": {"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io",
                        "kind": "KubeadmConfigTemplate", "name": "b"}},
                    "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                        "kind": "DockerMachineTemplate", "name": "t"},
                    "deletion": {"nodeDrainTimeoutSeconds": 90, "nodeVolumeDetachTimeoutSeconds": 0,
                        "nodeDeletionTimeoutSeconds": 3600},
                    "taints": [{"key": "k", "effect": "NoSchedule", "propagation": "Always"}],
                    "readinessGates": [{"conditionType": "X"}],
                    "futureField": {"x": 1},
                },
            },
            "futureSpecField": true,
        },
        "status": {
            "replicas": 3, "readyReplicas": 2, "availableReplicas": 2, "upToDateReplicas": 1,
            "selector": "a=b", "observedGeneration": 4, "phase": "Running",
            "conditions": [{"type": "Available", "status": "True", "reason": "Available",
                "observedGeneration": 4, "lastTransitionTime": "2025-01-01T00:00:00Z"}],
            "deprecated": {"v1beta1": {
                "conditions": [{"type": "Ready", "status": "False", "severity": "Info",
                    "reason": "R", "lastTransitionTime": "2025-01-01T00:00:00Z"}],
                "readyReplicas": 3, "availableReplicas": 3, "updatedReplicas": 1,
                "unavailableReplicas": 0}},
        },
    })
}

fn v1beta2_machine() -> Value {
    json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
        "metadata": {"name": "m", "namespace": "ns", "annotations": {"x": "y"}},
        "spec": {
            "clusterName": "c", "providerID": "sim:///z/m", "failureDomain": "z",
            "minReadySeconds": 10,
            "bootstrap": {"dataSecretName": "s", "configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io",
                "kind": "KubeadmConfig", "name": "b"}},
            "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                "kind": "DockerMachine", "name": "i"},
            "deletion": {"nodeDrainTimeoutSeconds": 61},
        },
        "status": {
            "phase": "Updating", "failureDomain": "z",
            "initialization": {"bootstrapDataSecretCreated": true, "infrastructureProvisioned": false},
            "nodeRef": {"name": "n"},
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
            "conditions": [{"type": "Ready", "status": "True", "reason": "Ready",
                "lastTransitionTime": "2025-01-01T00:00:00Z"}],
            "deprecated": {"v1beta1": {"failureReason": "CreateError", "failureMessage": "m",
                "conditions": [{"type": "Ready", "status": "True",
                    "lastTransitionTime": "2025-01-01T00:00:00Z"}]}},
        },
    })
}

fn v1beta2_ms() -> Value {
    json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineSet",
        "metadata": {"name": "ms", "namespace": "ns"},
        "spec": {"clusterName": "c", "replicas": 1, "deletion": {"order": "Newest"},
            "machineNaming": {"template": "t"},
            "template": {"spec": {"clusterName": "c", "minReadySeconds": 5,
                "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                    "kind": "DockerMachineTemplate", "name": "t"}}}},
        "status": {"replicas": 1, "readyReplicas": 1, "availableReplicas": 1,
            "upToDateReplicas": 1,
            "deprecated": {"v1beta1": {"fullyLabeledReplicas": 1, "readyReplicas": 1,
                "availableReplicas": 1, "failureReason": "r", "failureMessage": "m"}}},
    })
}

#[test]
fn machine_deployments_map_field_by_field_both_ways() {
    let v1 = down(CapiKind::MachineDeployment, &v1beta2_md());
    assert_eq!(v1["apiVersion"], "cluster.x-k8s.io/v1beta1");
    let spec = &v1["spec"];
    assert_eq!(spec["strategy"]["type"], "RollingUpdate");
    assert_eq!(spec["strategy"]["rollingUpdate"]["maxSurge"], "25%");
    assert_eq!(spec["strategy"]["rollingUpdate"]["maxUnavailable"], 0);
    assert_eq!(spec["strategy"]["rollingUpdate"]["deletePolicy"], "Oldest");
    assert_eq!(spec["strategy"]["remediation"]["maxInFlight"], 2);
    assert_eq!(spec["rolloutAfter"], "2025-01-01T00:00:00Z");
    assert_eq!(spec["minReadySeconds"], 30);
    assert_eq!(
        spec["machineNamingStrategy"]["template"],
        "{{ .machineSet.name }}-{{ .random }}"
    );
    for gone in ["rollout", "deletion", "remediation", "machineNaming"] {
        assert!(spec.get(gone).is_none(), "{gone}");
    }
    let machine = &spec["template"]["spec"];
    assert!(machine.get("minReadySeconds").is_none());
    assert_eq!(
        machine["infrastructureRef"],
        json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta9",
            "kind": "DockerMachineTemplate", "name": "t", "namespace": "ns"})
    );
    assert_eq!(
        machine["bootstrap"]["configRef"]["apiVersion"],
        "bootstrap.cluster.x-k8s.io/v1beta9"
    );
    assert_eq!(machine["nodeDrainTimeout"], "1m30s");
    assert_eq!(machine["nodeVolumeDetachTimeout"], "0s");
    assert_eq!(machine["nodeDeletionTimeout"], "1h0m0s");
    assert!(machine.get("deletion").is_none());
    let status = &v1["status"];
    assert_eq!(status["readyReplicas"], 3);
    assert_eq!(status["availableReplicas"], 3);
    assert_eq!(status["updatedReplicas"], 1);
    assert_eq!(status["unavailableReplicas"], 0);
    assert_eq!(status["conditions"][0]["severity"], "Info");
    assert_eq!(status["v1beta2"]["readyReplicas"], 2);
    assert_eq!(status["v1beta2"]["availableReplicas"], 2);
    assert_eq!(status["v1beta2"]["upToDateReplicas"], 1);
    assert_eq!(status["v1beta2"]["conditions"][0]["type"], "Available");
    assert!(status.get("deprecated").is_none());
    assert!(status.get("upToDateReplicas").is_none());
    assert_eq!(status["replicas"], 3);

    // And back.
    let v2 = up(CapiKind::MachineDeployment, &v1);
    assert_eq!(v2["apiVersion"], "cluster.x-k8s.io/v1beta2");
    assert_eq!(v2, v1beta2_md());
}

#[test]
fn a_v1beta1_machine_deployment_goes_up_as_capi_converts_it() {
    let v1 = json!({
        "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineDeployment",
        "metadata": {"name": "md", "namespace": "ns"},
        "spec": {"clusterName": "c", "replicas": 1, "progressDeadlineSeconds": 600,
            "revisionHistoryLimit": 1, "strategy": {"type": "OnDelete"},
            "template": {"spec": {"clusterName": "c", "nodeDrainTimeout": "1.5m",
                "infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                    "kind": "DockerMachineTemplate", "name": "t", "namespace": "ns",
                    "uid": "u", "resourceVersion": "1"}}}},
        "status": {"replicas": 1, "readyReplicas": 1, "unavailableReplicas": 0,
            "conditions": [{"type": "Ready", "status": "True"}]},
    });
    let v2 = up(CapiKind::MachineDeployment, &v1);
    assert_eq!(
        v2["spec"],
        json!({"clusterName": "c", "replicas": 1,
            "rollout": {"strategy": {"type": "OnDelete"}},
            "template": {"spec": {"clusterName": "c",
                "deletion": {"nodeDrainTimeoutSeconds": 90},
                "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                    "kind": "DockerMachineTemplate", "name": "t"}}}})
    );
    assert_eq!(
        v2["status"],
        json!({"replicas": 1, "deprecated": {"v1beta1": {"readyReplicas": 1,
            "unavailableReplicas": 0, "conditions": [{"type": "Ready", "status": "True"}]}}})
    );
}

fn v1beta2_mp() -> Value {
    json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool",
        "metadata": {"name": "mp", "namespace": "ns"},
        "spec": {"clusterName": "c", "replicas": 2, "failureDomains": ["a", "b"],
            "providerIDList": ["docker:////x"],
            "template": {"spec": {"clusterName": "c", "minReadySeconds": 5, "version": "v1.34.0",
                "deletion": {"nodeDrainTimeoutSeconds": 30},
                "bootstrap": {"dataSecretName": "boot"},
                "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                    "kind": "DockerMachinePool", "name": "mp"}}}},
        "status": {"replicas": 2, "readyReplicas": 1, "availableReplicas": 1,
            "upToDateReplicas": 2, "phase": "Running",
            "initialization": {"bootstrapDataSecretCreated": true, "infrastructureProvisioned": true},
            "conditions": [{"type": "Paused", "status": "False", "reason": "NotPaused"}],
            "deprecated": {"v1beta1": {"readyReplicas": 1, "availableReplicas": 1,
                "unavailableReplicas": 1, "failureReason": "r", "failureMessage": "m",
                "conditions": [{"type": "Ready", "status": "True"}]}}},
    })
}

#[test]
fn machine_pools_map_field_by_field_both_ways() {
    let v1 = down(CapiKind::MachinePool, &v1beta2_mp());
    let spec = &v1["spec"];
    assert_eq!(spec["minReadySeconds"], 5);
    assert_eq!(spec["failureDomains"], json!(["a", "b"]));
    assert_eq!(spec["providerIDList"], json!(["docker:////x"]));
    let template = &spec["template"]["spec"];
    assert!(template.get("minReadySeconds").is_none());
    assert_eq!(template["nodeDrainTimeout"], "30s");
    assert_eq!(
        template["infrastructureRef"],
        json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta9",
            "kind": "DockerMachinePool", "name": "mp", "namespace": "ns"})
    );
    let status = &v1["status"];
    assert_eq!(status["readyReplicas"], 1);
    assert_eq!(status["unavailableReplicas"], 1);
    assert_eq!(status["failureReason"], "r");
    assert_eq!(status["conditions"][0]["type"], "Ready");
    assert_eq!(status["bootstrapReady"], true);
    assert_eq!(status["infrastructureReady"], true);
    assert_eq!(status["v1beta2"]["upToDateReplicas"], 2);
    assert_eq!(status["v1beta2"]["readyReplicas"], 1);
    assert_eq!(status["v1beta2"]["conditions"][0]["reason"], "NotPaused");
    assert!(status.get("initialization").is_none());
    assert!(status.get("deprecated").is_none());
    assert_eq!(up(CapiKind::MachinePool, &v1), v1beta2_mp());
}

#[test]
fn machine_sets_map_field_by_field_both_ways() {
    let v1 = down(CapiKind::MachineSet, &v1beta2_ms());
    assert_eq!(v1["spec"]["deletePolicy"], "Newest");
    assert_eq!(v1["spec"]["minReadySeconds"], 5);
    assert_eq!(v1["spec"]["machineNamingStrategy"]["template"], "t");
    assert!(v1["spec"].get("deletion").is_none());
    assert!(
        v1["spec"]["template"]["spec"]
            .get("minReadySeconds")
            .is_none()
    );
    assert_eq!(
        v1["spec"]["template"]["spec"]["infrastructureRef"]["apiVersion"],
        "infrastructure.cluster.x-k8s.io/v1beta9"
    );
    let status = &v1["status"];
    assert_eq!(status["fullyLabeledReplicas"], 1);
    assert_eq!(status["failureReason"], "r");
    assert_eq!(status["failureMessage"], "m");
    assert_eq!(status["v1beta2"]["upToDateReplicas"], 1);
    assert_eq!(up(CapiKind::MachineSet, &v1), v1beta2_ms());
}

#[test]
fn machines_map_field_by_field_both_ways() {
    let v1 = down(CapiKind::Machine, &v1beta2_machine());
    let spec = &v1["spec"];
    assert_eq!(
        spec["infrastructureRef"],
        json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta9",
            "kind": "DockerMachine", "name": "i", "namespace": "ns"})
    );
    assert_eq!(spec["nodeDrainTimeout"], "1m1s");
    assert!(spec.get("deletion").is_none());
    // No place in v1beta1 (restored from the conversion data, below).
    assert!(spec.get("minReadySeconds").is_none());
    assert!(v1["status"].get("failureDomain").is_none());
    let status = &v1["status"];
    assert_eq!(status["bootstrapReady"], true);
    assert_eq!(status["infrastructureReady"], false);
    assert!(status.get("initialization").is_none());
    assert_eq!(
        status["nodeRef"],
        json!({"apiVersion": "v1", "kind": "Node", "name": "n"})
    );
    assert_eq!(status["failureReason"], "CreateError");
    assert_eq!(status["failureMessage"], "m");
    assert_eq!(
        status["phase"], "Running",
        "Updating is not a v1beta1 phase"
    );
    assert_eq!(status["v1beta2"]["conditions"][0]["reason"], "Ready");
    assert!(status["conditions"][0].get("reason").is_none());

    // Up from a v1beta1 client's object: nodeRef keeps its name only.
    let mut from_client = v1.clone();
    from_client["status"]["nodeRef"]["uid"] = json!("u");
    let v2 = up(CapiKind::Machine, &from_client);
    assert_eq!(v2["status"]["nodeRef"], json!({"name": "n"}));
    assert_eq!(
        v2["status"]["phase"], "Running",
        "no conversion data: nothing restored"
    );
    assert_eq!(
        v2["status"]["initialization"],
        json!({"bootstrapDataSecretCreated": true, "infrastructureProvisioned": false})
    );
}

#[test]
fn round_trips_through_v1beta1_are_the_identity() {
    for (kind, obj) in [
        (CapiKind::MachineDeployment, v1beta2_md()),
        (CapiKind::MachineSet, v1beta2_ms()),
        (CapiKind::Machine, v1beta2_machine()),
        (CapiKind::MachinePool, v1beta2_mp()),
    ] {
        let spoke = with_conversion_data(down(kind, &obj), &obj);
        assert!(spoke["metadata"]["annotations"][CONVERSION_DATA].is_string());
        assert_eq!(up(kind, &spoke), obj, "{kind:?}");
    }
    // Without annotations before, none after.
    let md = v1beta2_md();
    let spoke = with_conversion_data(down(CapiKind::MachineDeployment, &md), &md);
    assert!(
        up(CapiKind::MachineDeployment, &spoke)["metadata"]
            .get("annotations")
            .is_none()
    );
}

#[test]
fn the_conversion_data_restores_only_what_v1beta1_cannot_hold() {
    let hub = v1beta2_machine();
    let mut spoke = with_conversion_data(down(CapiKind::Machine, &hub), &hub);
    // A v1beta1 client changes what it can see; its change wins over the stored hub.
    spoke["spec"]["failureDomain"] = json!("z2");
    let back = up(CapiKind::Machine, &spoke);
    assert_eq!(back["spec"]["failureDomain"], "z2");
    assert_eq!(back["spec"]["minReadySeconds"], 10, "restored");
    assert_eq!(back["status"]["failureDomain"], "z", "restored");
    assert_eq!(back["status"]["phase"], "Updating", "restored");
    assert_eq!(back["metadata"]["annotations"], json!({"x": "y"}));
}

#[test]
fn unknown_fields_pass_through_both_ways() {
    let v1 = down(CapiKind::MachineDeployment, &v1beta2_md());
    assert_eq!(v1["spec"]["futureSpecField"], true);
    assert_eq!(
        v1["spec"]["template"]["spec"]["futureField"],
        json!({"x": 1})
    );
    let v1 = json!({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Machine",
        "metadata": {"name": "m"},
        "spec": {"bootstrap": {"dataSecretName": "s", "other": 1}, "extra": [1, 2]},
        "status": {"v1beta2": {"conditions": [], "later": "x"}, "newThing": {"a": 1}}});
    let v2 = up(CapiKind::Machine, &v1);
    assert_eq!(v2["spec"]["bootstrap"]["other"], 1);
    assert_eq!(v2["spec"]["extra"], json!([1, 2]));
    assert_eq!(v2["status"]["v1beta2"], json!({"later": "x"}));
    assert_eq!(v2["status"]["conditions"], json!([]));
    assert_eq!(v2["status"]["newThing"], json!({"a": 1}));
    assert_eq!(down(CapiKind::Machine, &v2), v1);
}

#[test]
fn kinds_and_versions_are_named() {
    assert_eq!(
        CapiKind::from_kind("MachineSet"),
        Some(CapiKind::MachineSet)
    );
    assert_eq!(CapiKind::from_kind("Cluster"), None);
    assert_eq!(
        CapiVersion::of(&json!({"apiVersion": "cluster.x-k8s.io/v1beta1"})),
        Some(CapiVersion::V1beta1)
    );
    assert_eq!(
        CapiVersion::of(&json!({"apiVersion": "other.io/v1beta1"})),
        None
    );
    let same = convert(
        CapiKind::Machine,
        v1beta2_machine(),
        CapiVersion::V1beta2,
        CapiVersion::V1beta2,
        &versions,
    );
    assert_eq!(same, v1beta2_machine());
}

#[test]
fn durations_are_gos() {
    for (s, secs) in [
        ("0s", 0),
        ("0", 0),
        ("10s", 10),
        ("1m30s", 90),
        ("1.5m", 90),
        ("2h", 7200),
        ("1h0m0s", 3600),
        ("1500ms", 1),
        ("-5s", -5),
    ] {
        assert_eq!(duration_to_seconds(&json!(s)), Some(secs), "{s}");
    }
    assert_eq!(duration_to_seconds(&json!("5d")), None);
    assert_eq!(duration_to_seconds(&json!("s")), None);
    // Within Go's range (2562047h) but past an int32 of seconds: capped.
    assert_eq!(
        duration_to_seconds(&json!("2000000h")),
        Some(i64::from(i32::MAX))
    );
    // Past Go's range: `time.ParseDuration` refuses it.
    assert_eq!(duration_to_seconds(&json!("99999999h")), None);
    for (secs, s) in [
        (0, "0s"),
        (10, "10s"),
        (90, "1m30s"),
        (3600, "1h0m0s"),
        (3661, "1h1m1s"),
        (-61, "-1m1s"),
    ] {
        assert_eq!(seconds_to_duration(secs), s);
    }
}
