//! Server-side printing (`kubectl get`'s Tables): the columns of the common built-in kinds
//! (names, types, priorities: `-o wide` shows priority 1) and the cells of freshly created
//! objects that nothing has acted on (no kubelet, no controllers on either side). Ages are
//! left out (they depend on the second each side printed them); descriptions too (kube-apiserver
//! documents each column, sim does not).

use http::Method;
use serde_json::{Value, json};

use crate::harness::Ctx;

const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";

/// A Table's column definitions and cells, Age cells replaced by `<age>`.
async fn table(t: &Ctx, label: &str, path: &str) {
    let (code, bytes) = t.send_accepting(Method::GET, path, "", TABLE, None).await;
    let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let columns: Vec<Value> = body["columnDefinitions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| json!({"name": c["name"], "type": c["type"], "format": c["format"], "priority": c["priority"]}))
        .collect();
    let age = columns.iter().position(|c| c["name"] == "Age");
    let rows: Vec<Value> = body["rows"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            let mut cells = r["cells"].as_array().cloned().unwrap_or_default();
            if let Some(i) = age
                && let Some(c) = cells.get_mut(i)
            {
                *c = json!("<age>");
            }
            Value::Array(cells)
        })
        .collect();
    t.note(
        label,
        json!({"code": code, "columns": columns, "rows": rows}),
    );
}

/// Columns and cells of pods, nodes, deployments, replica sets, daemon sets, stateful sets,
/// config maps, secrets, service accounts, services, disruption budgets and leases.
pub async fn printed_columns(t: Ctx) {
    let ns = "/api/v1/namespaces/{ns}";
    let apps = "/apis/apps/v1/namespaces/{ns}";
    let template = json!({"metadata": {"labels": {"app": "web"}},
        "spec": {"containers": [{"name": "web", "image": "registry.k8s.io/pause:3.10"},
                                {"name": "side", "image": "registry.k8s.io/pause:3.9"}]}});
    let selector = json!({"matchLabels": {"app": "web"}});
    let creates = [
        (
            format!("{ns}/configmaps"),
            json!({"metadata": {"name": "cm"}, "data": {"a": "1", "b": "2"}, "binaryData": {"c": "AA=="}}),
        ),
        (
            format!("{ns}/secrets"),
            json!({"metadata": {"name": "s"}, "type": "Opaque", "data": {"k": "dg=="}}),
        ),
        (
            format!("{ns}/serviceaccounts"),
            json!({"metadata": {"name": "sa"}}),
        ),
        (
            format!("{ns}/pods"),
            json!({"metadata": {"name": "p"}, "spec": {"nodeName": "printed-node",
                "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
                "readinessGates": [{"conditionType": "example.com/ready"}]}}),
        ),
        (
            format!("{ns}/services"),
            json!({"metadata": {"name": "headless"}, "spec": {"clusterIP": "None",
                "selector": {"app": "web", "tier": "front"},
                "ports": [{"name": "http", "port": 80}, {"name": "dns", "port": 53, "protocol": "UDP"}]}}),
        ),
        (
            format!("{ns}/services"),
            json!({"metadata": {"name": "external"}, "spec": {"type": "ExternalName",
                "externalName": "example.com"}}),
        ),
        (
            format!("{apps}/deployments"),
            json!({"metadata": {"name": "d"}, "spec": {"replicas": 2, "selector": selector, "template": template}}),
        ),
        (
            format!("{apps}/replicasets"),
            json!({"metadata": {"name": "rs"}, "spec": {"replicas": 3, "selector": selector, "template": template}}),
        ),
        (
            format!("{apps}/statefulsets"),
            json!({"metadata": {"name": "ss"}, "spec": {"replicas": 1, "serviceName": "headless",
                "selector": selector, "template": template}}),
        ),
        (
            format!("{apps}/daemonsets"),
            json!({"metadata": {"name": "ds"}, "spec": {"selector": {"matchLabels": {"app": "web"},
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]},
                                     {"key": "gone", "operator": "DoesNotExist"}]},
                "template": {"metadata": {"labels": {"app": "web", "tier": "a"}},
                    "spec": {"nodeSelector": {"disk": "ssd", "arch": "arm64"},
                        "containers": [{"name": "web", "image": "registry.k8s.io/pause:3.10"}]}}}}),
        ),
        (
            "/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets".to_owned(),
            json!({"metadata": {"name": "pdb"}, "spec": {"minAvailable": "50%", "selector": selector}}),
        ),
        (
            "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases".to_owned(),
            json!({"metadata": {"name": "l"}, "spec": {"holderIdentity": "me"}}),
        ),
        (
            "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases".to_owned(),
            json!({"metadata": {"name": "unheld"}, "spec": {}}),
        ),
    ];
    for (path, body) in creates {
        let r = t.post(&path, body).await;
        t.outcome(&format!("create in {path}"), &r);
    }
    let node = t
        .post(
            "/api/v1/nodes",
            json!({"metadata": {"name": "printed-node", "labels": {
                "node-role.kubernetes.io/worker": "", "kubernetes.io/role": "edge"}},
                "spec": {"unschedulable": true}}),
        )
        .await;
    t.outcome("create a node", &node);
    table(&t, "configmaps", &format!("{ns}/configmaps/cm")).await;
    table(&t, "secrets", &format!("{ns}/secrets/s")).await;
    table(&t, "service accounts", &format!("{ns}/serviceaccounts/sa")).await;
    table(&t, "pods", &format!("{ns}/pods")).await;
    table(&t, "services", &format!("{ns}/services")).await;
    table(&t, "deployments", &format!("{apps}/deployments")).await;
    table(&t, "replica sets", &format!("{apps}/replicasets")).await;
    table(&t, "stateful sets", &format!("{apps}/statefulsets")).await;
    table(&t, "daemon sets", &format!("{apps}/daemonsets")).await;
    table(
        &t,
        "disruption budgets",
        "/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets",
    )
    .await;
    table(
        &t,
        "leases",
        "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases",
    )
    .await;
    table(&t, "the node", "/api/v1/nodes/printed-node").await;
    table(&t, "the namespace", "/api/v1/namespaces/{ns}").await;
    let gone = t.delete("/api/v1/nodes/printed-node", None).await;
    t.outcome("delete the node", &gone);
}
