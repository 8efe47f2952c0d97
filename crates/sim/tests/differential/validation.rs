//! Validation: CRD schema and CEL messages on our Karpenter CRDs, CRD defaulting, CEL
//! transition rules (`oldSelf`), and immutable fields of built-in kinds.

use serde_json::{Value, json};

use crate::harness::{Ctx, PatchKind};

const NODEPOOLS: &str = "/apis/karpenter.sh/v1/nodepools";
const NODECLAIMS: &str = "/apis/karpenter.sh/v1/nodeclaims";

/// A valid NodePool named `name` (cluster-scoped: names carry the scenario's namespace).
fn nodepool(name: &str) -> Value {
    json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
        "spec": {"template": {"spec": {
            "nodeClassRef": {"group": "karpenter.cluster.x-k8s.io", "kind": "ClusterAPINodeClass",
                "name": "default"},
            "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}}}})
}

/// NodePool creates that break schema and CEL rules, one or several at a time, and a valid
/// one with its defaults.
pub async fn nodepool_validation(t: Ctx) {
    // Schema errors of sibling fields come in Go map order on kube-apiserver.
    t.unordered_causes();
    let name = |n: &str| format!("{}-{n}", t.ns);
    let created = t.post(NODEPOOLS, nodepool(&name("valid"))).await;
    t.record("valid, defaulted", &created);
    let cases: Vec<(&str, Value)> = vec![
        (
            "In without values",
            json!({"spec": {"template": {"spec": {"requirements": [
                {"key": "kubernetes.io/arch", "operator": "In", "values": []}]}}}}),
        ),
        (
            "unknown operator",
            json!({"spec": {"template": {"spec": {"requirements": [
                {"key": "kubernetes.io/arch", "operator": "Near", "values": ["a"]}]}}}}),
        ),
        (
            "Gt with two values",
            json!({"spec": {"template": {"spec": {"requirements": [
                {"key": "example.com/gen", "operator": "Gt", "values": ["1", "2"]}]}}}}),
        ),
        (
            "minValues above the values",
            json!({"spec": {"template": {"spec": {"requirements": [
                {"key": "example.com/x", "operator": "In", "values": ["a"], "minValues": 2}]}}}}),
        ),
        (
            "restricted requirement key",
            json!({"spec": {"template": {"spec": {"requirements": [
                {"key": "karpenter.sh/nodepool", "operator": "Exists"}]}}}}),
        ),
        (
            "restricted label",
            json!({"spec": {"template": {"metadata": {"labels": {"kubernetes.io/hostname": "x"}}}}}),
        ),
        (
            "bad label value",
            json!({"spec": {"template": {"metadata": {"labels": {"a": "-x-"}}}}}),
        ),
        ("weight 0", json!({"spec": {"weight": 0}})),
        (
            "weight of the wrong type",
            json!({"spec": {"weight": "heavy"}}),
        ),
        (
            "budget nodes pattern",
            json!({"spec": {"disruption": {"consolidateAfter": "1m", "budgets": [{"nodes": "ten"}]}}}),
        ),
        (
            "schedule without duration",
            json!({"spec": {"disruption": {"consolidateAfter": "1m",
                "budgets": [{"nodes": "1", "schedule": "@daily"}]}}}),
        ),
        (
            "unknown consolidation policy",
            json!({"spec": {"disruption": {"consolidateAfter": "1m", "consolidationPolicy": "Never"}}}),
        ),
        (
            "static pool with a weight",
            json!({"spec": {"replicas": 2, "weight": 5}}),
        ),
        (
            "empty nodeClassRef fields",
            json!({"spec": {"template": {"spec": {"nodeClassRef": {"group": "", "kind": "", "name": ""}}}}}),
        ),
        (
            "missing nodeClassRef and requirements",
            json!({"spec": {"template": {"spec": {"nodeClassRef": null, "requirements": null}}}}),
        ),
        ("missing spec", json!({"spec": null})),
        (
            "a name that is not a DNS subdomain",
            json!({"metadata": {"name": "Bad_Name"}}),
        ),
        (
            "several problems",
            json!({"spec": {"weight": 101, "limits": {"cpu": "lots"}, "template": {"spec": {
                "expireAfter": "forever", "taints": [{"key": "", "effect": "Sometimes"}]}}}}),
        ),
    ];
    for (i, (label, patch)) in cases.into_iter().enumerate() {
        let mut np = nodepool(&name(&format!("bad-{i}")));
        json_patch::merge(&mut np, &patch);
        t.record(label, &t.post(NODEPOOLS, np).await);
    }
}

/// CEL transition rules: nodeClassRef group and kind, static/dynamic mode, an immutable
/// NodeClaim spec.
pub async fn transition_rules(t: Ctx) {
    let np = format!("{}-np", t.ns);
    let path = format!("{NODEPOOLS}/{np}");
    let r = t.post(NODEPOOLS, nodepool(&np)).await;
    assert_eq!(r.code, 201, "{r:?}");
    t.record(
        "change nodeClassRef.group",
        &t.patch(
            &path,
            PatchKind::Merge,
            json!({"spec": {"template": {"spec": {"nodeClassRef": {"group": "example.com", "kind": "Other"}}}}}),
        )
        .await,
    );
    t.record(
        "change nodeClassRef.name",
        &t.patch(
            &path,
            PatchKind::Merge,
            json!({"spec": {"template": {"spec": {"nodeClassRef": {"name": "other"}}}}}),
        )
        .await,
    );
    t.record(
        "make the pool static",
        &t.patch(&path, PatchKind::Merge, json!({"spec": {"replicas": 3}}))
            .await,
    );
    let nc = format!("{}-nc", t.ns);
    let claim = json!({"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": nc},
        "spec": {"nodeClassRef": {"group": "karpenter.cluster.x-k8s.io", "kind": "ClusterAPINodeClass",
            "name": "default"},
            "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}});
    t.record("create a NodeClaim", &t.post(NODECLAIMS, claim).await);
    let path = format!("{NODECLAIMS}/{nc}");
    t.record(
        "change the NodeClaim spec",
        &t.patch(
            &path,
            PatchKind::Merge,
            json!({"spec": {"expireAfter": "1h"}}),
        )
        .await,
    );
    t.record(
        "change its labels",
        &t.patch(
            &path,
            PatchKind::Merge,
            json!({"metadata": {"labels": {"a": "b"}}}),
        )
        .await,
    );
}

/// Status and scale subresources of a NodePool (`.spec.replicas`, `.status.nodes`).
pub async fn nodepool_subresources(t: Ctx) {
    let np = format!("{}-np", t.ns);
    let path = format!("{NODEPOOLS}/{np}");
    let mut body = nodepool(&np);
    body["spec"]["replicas"] = json!(2);
    body["status"] = json!({"nodes": 7});
    t.record("create drops the status", &t.post(NODEPOOLS, body).await);
    t.record(
        "status patch",
        &t.patch(
            &format!("{path}/status"),
            PatchKind::Merge,
            json!({"spec": {"replicas": 9}, "status": {"nodes": 1}}),
        )
        .await,
    );
    t.record(
        "main patch ignores status",
        &t.patch(
            &path,
            PatchKind::Merge,
            json!({"status": {"nodes": 5}, "metadata": {"labels": {"a": "b"}}}),
        )
        .await,
    );
    t.record("get scale", &t.get(&format!("{path}/scale")).await);
    let scale = t.get(&format!("{path}/scale")).await;
    let mut put = scale.body.clone();
    put["spec"]["replicas"] = json!(4);
    t.record(
        "put scale",
        &t.put(&format!("{path}/scale"), put.clone()).await,
    );
    t.record(
        "put scale at a stale version",
        &t.put(&format!("{path}/scale"), put).await,
    );
    t.record(
        "patch scale",
        &t.patch(
            &format!("{path}/scale"),
            PatchKind::Merge,
            json!({"spec": {"replicas": 1}}),
        )
        .await,
    );
    t.record(
        "patch scale below zero",
        &t.patch(
            &format!("{path}/scale"),
            PatchKind::Merge,
            json!({"spec": {"replicas": -1}}),
        )
        .await,
    );
    t.record("after", &t.get(&path).await);
    t.record(
        "scale of a missing pool",
        &t.get(&format!("{NODEPOOLS}/{np}-missing/scale")).await,
    );
    let dynamic = format!("{}-dyn", t.ns);
    let r = t.post(NODEPOOLS, nodepool(&dynamic)).await;
    assert_eq!(r.code, 201);
    t.record(
        "scale of a pool without replicas",
        &t.get(&format!("{NODEPOOLS}/{dynamic}/scale")).await,
    );
}

/// Status and scale subresources of a Cluster API MachineDeployment (selector from
/// `.status.selector`).
pub async fn machinedeployment_subresources(t: Ctx) {
    let mds = "/apis/cluster.x-k8s.io/v1beta1/namespaces/{ns}/machinedeployments";
    let path = format!("{mds}/md");
    t.record(
        "create",
        &t.post(
            mds,
            json!({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineDeployment",
                "metadata": {"name": "md"}, "spec": {"clusterName": "c", "replicas": 1,
                "template": {"spec": {"clusterName": "c"}}}, "status": {"replicas": 3}}),
        )
        .await,
    );
    t.record(
        "status put",
        &t.put(
            &format!("{path}/status"),
            json!({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineDeployment",
                "metadata": {"name": "md"}, "spec": {"replicas": 100},
                "status": {"replicas": 1, "selector": "app=md,tier in (a,b)"}}),
        )
        .await,
    );
    t.record("scale", &t.get(&format!("{path}/scale")).await);
    t.record(
        "scale patch",
        &t.patch(
            &format!("{path}/scale"),
            PatchKind::Merge,
            json!({"spec": {"replicas": 3}}),
        )
        .await,
    );
    t.record(
        "scale json patch",
        &t.patch(
            &format!("{path}/scale"),
            PatchKind::Json,
            json!([{"op": "replace", "path": "/spec/replicas", "value": 2}]),
        )
        .await,
    );
    t.record("after", &t.get(&path).await);
    t.record(
        "status of a missing object",
        &t.get(&format!("{mds}/missing/status")).await,
    );
    let deploys = "/apis/apps/v1/namespaces/{ns}/deployments";
    let r = t
        .post(
            deploys,
            json!({"metadata": {"name": "web"}, "spec": {"replicas": 2,
                "selector": {"matchLabels": {"app": "web"}, "matchExpressions": [
                    {"key": "tier", "operator": "In", "values": ["a", "b"]}]},
                "template": {"metadata": {"labels": {"app": "web", "tier": "a"}},
                    "spec": {"containers": [{"name": "c", "image": "i"}]}}}}),
        )
        .await;
    assert_eq!(r.code, 201, "{r:?}");
    t.record(
        "deployment scale",
        &t.get(&format!("{deploys}/web/scale")).await,
    );
}

/// Immutable fields of built-in kinds.
pub async fn immutable_fields(t: Ctx) {
    let pods = "/api/v1/namespaces/{ns}/pods";
    let r = t
        .post(
            pods,
            json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "a:1"}],
                "tolerations": [{"key": "k", "operator": "Exists"}]}}),
        )
        .await;
    assert_eq!(r.code, 201, "{r:?}");
    let pod = format!("{pods}/p");
    let spec_outcome = |label: &str, r: &crate::harness::Resp| {
        // The real message carries a Go diff of the PodSpec (see DIFFERENCES.md).
        let causes: Vec<Value> = r
            .at("/details/causes")
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| json!({"field": c.get("field"), "reason": c.get("reason")}))
            .collect();
        t.note(
            label,
            json!({"code": r.code, "reason": r.at("/reason"), "causes": causes}),
        );
    };
    spec_outcome(
        "change the image",
        &t.patch(
            &pod,
            PatchKind::Json,
            json!([{"op": "replace", "path": "/spec/containers/0/image", "value": "a:2"}]),
        )
        .await,
    );
    spec_outcome(
        "change the restart policy",
        &t.patch(
            &pod,
            PatchKind::Merge,
            json!({"spec": {"restartPolicy": "Never"}}),
        )
        .await,
    );
    spec_outcome(
        "add a container",
        &t.patch(
            &pod,
            PatchKind::Strategic,
            json!({"spec": {"containers": [{"name": "d", "image": "d:1"}]}}),
        )
        .await,
    );
    spec_outcome(
        "add a toleration",
        &t.patch(
            &pod,
            PatchKind::Json,
            json!([{"op": "add", "path": "/spec/tolerations/-", "value": {"key": "j", "operator": "Exists"}}]),
        )
        .await,
    );
    spec_outcome(
        "set activeDeadlineSeconds",
        &t.patch(
            &pod,
            PatchKind::Merge,
            json!({"spec": {"activeDeadlineSeconds": 60}}),
        )
        .await,
    );
    spec_outcome(
        "change labels",
        &t.patch(
            &pod,
            PatchKind::Merge,
            json!({"metadata": {"labels": {"a": "b"}}}),
        )
        .await,
    );
    let cms = "/api/v1/namespaces/{ns}/configmaps";
    let r = t
        .post(
            cms,
            json!({"metadata": {"name": "frozen"}, "data": {"a": "1"}, "immutable": true}),
        )
        .await;
    assert_eq!(r.code, 201, "{r:?}");
    let frozen = format!("{cms}/frozen");
    t.record(
        "change an immutable ConfigMap's data",
        &t.patch(&frozen, PatchKind::Merge, json!({"data": {"a": "2"}}))
            .await,
    );
    t.record(
        "make it mutable",
        &t.patch(&frozen, PatchKind::Merge, json!({"immutable": false}))
            .await,
    );
    t.record(
        "label it",
        &t.patch(
            &frozen,
            PatchKind::Merge,
            json!({"metadata": {"labels": {"a": "b"}}}),
        )
        .await,
    );
    let pdbs = "/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets";
    let r = t
        .post(
            pdbs,
            json!({"metadata": {"name": "b"}, "spec": {"minAvailable": 1,
                "selector": {"matchLabels": {"app": "a"}}}}),
        )
        .await;
    assert_eq!(r.code, 201, "{r:?}");
    t.outcome(
        "change a PDB's selector",
        &t.patch(
            &format!("{pdbs}/b"),
            PatchKind::Merge,
            json!({"spec": {"selector": {"matchLabels": {"app": "b"}}}}),
        )
        .await,
    );
    let deploys = "/apis/apps/v1/namespaces/{ns}/deployments";
    let r = t
        .post(
            deploys,
            json!({"metadata": {"name": "d"}, "spec": {"replicas": 0,
                "selector": {"matchLabels": {"app": "d"}},
                "template": {"metadata": {"labels": {"app": "d", "x": "y"}},
                    "spec": {"containers": [{"name": "c", "image": "i"}]}}}}),
        )
        .await;
    assert_eq!(r.code, 201, "{r:?}");
    t.outcome(
        "change a Deployment's selector",
        &t.patch(
            &format!("{deploys}/d"),
            PatchKind::Merge,
            json!({"spec": {"selector": {"matchLabels": {"app": "d", "x": "y"}}}}),
        )
        .await,
    );
    let jobs = "/apis/batch/v1/namespaces/{ns}/jobs";
    let r = t
        .post(
            jobs,
            json!({"metadata": {"name": "j"}, "spec": {"suspend": true, "template": {"spec": {
                "restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}}}),
        )
        .await;
    t.outcome("create a Job", &r);
    // The real message shows the template as an internal Go struct (DIFFERENCES.md).
    spec_outcome(
        "change a Job's template",
        &t.patch(
            &format!("{jobs}/j"),
            PatchKind::Strategic,
            json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "j"}]}}}}),
        )
        .await,
    );
}
