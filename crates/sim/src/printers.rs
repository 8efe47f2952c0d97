//! kube-apiserver's table printers for the common built-in kinds.
//!
//! Responsibility: the columns `kubectl get` (and `-o wide`, the priority-1 columns) shows for
//! pods, nodes, the workload kinds, namespaces, config maps, secrets, service accounts,
//! services, disruption budgets, leases and priority classes, with the cells kube-apiserver's
//! printers compute (a pod's `READY 1/2`, its `STATUS` from the container states, a node's
//! `Ready,SchedulingDisabled`, `<none>` for what is unset). The `Name` column comes first and
//! is the caller's.
//! Inputs: the group and kind; served JSON. Outputs: column definitions and a row's cells.

use serde_json::{Value, json};

/// A column after `Name`.
#[derive(Debug, Clone, Copy)]
pub struct Column {
    /// Header.
    pub name: &'static str,
    /// `string`, `integer`, `boolean`.
    pub type_: &'static str,
    /// 0: shown by default; 1: with `-o wide`.
    pub priority: i64,
}

const fn c(name: &'static str, type_: &'static str, priority: i64) -> Column {
    Column {
        name,
        type_,
        priority,
    }
}

const AGE: Column = c("Age", "string", 0);
const POD: &[Column] = &[
    c("Ready", "string", 0),
    c("Status", "string", 0),
    c("Restarts", "string", 0),
    AGE,
    c("IP", "string", 1),
    c("Node", "string", 1),
    c("Nominated Node", "string", 1),
    c("Readiness Gates", "string", 1),
];
const NODE: &[Column] = &[
    c("Status", "string", 0),
    c("Roles", "string", 0),
    AGE,
    c("Version", "string", 0),
    c("Internal-IP", "string", 1),
    c("External-IP", "string", 1),
    c("OS-Image", "string", 1),
    c("Kernel-Version", "string", 1),
    c("Container-Runtime", "string", 1),
];
const TEMPLATE_WIDE: [Column; 3] = [
    c("Containers", "string", 1),
    c("Images", "string", 1),
    c("Selector", "string", 1),
];
const DEPLOYMENT: &[Column] = &[
    c("Ready", "string", 0),
    c("Up-to-date", "string", 0),
    c("Available", "string", 0),
    AGE,
    TEMPLATE_WIDE[0],
    TEMPLATE_WIDE[1],
    TEMPLATE_WIDE[2],
];
const REPLICA_SET: &[Column] = &[
    c("Desired", "integer", 0),
    c("Current", "integer", 0),
    c("Ready", "integer", 0),
    AGE,
    TEMPLATE_WIDE[0],
    TEMPLATE_WIDE[1],
    TEMPLATE_WIDE[2],
];
const DAEMON_SET: &[Column] = &[
    c("Desired", "integer", 0),
    c("Current", "integer", 0),
    c("Ready", "integer", 0),
    c("Up-to-date", "integer", 0),
    c("Available", "integer", 0),
    c("Node Selector", "string", 0),
    AGE,
    TEMPLATE_WIDE[0],
    TEMPLATE_WIDE[1],
    TEMPLATE_WIDE[2],
];
const STATEFUL_SET: &[Column] = &[
    c("Ready", "string", 0),
    AGE,
    TEMPLATE_WIDE[0],
    TEMPLATE_WIDE[1],
];
const NAMESPACE: &[Column] = &[c("Status", "string", 0), AGE];
const CONFIG_MAP: &[Column] = &[c("Data", "string", 0), AGE];
const SECRET: &[Column] = &[c("Type", "string", 0), c("Data", "string", 0), AGE];
const SERVICE_ACCOUNT: &[Column] = &[AGE];
const SERVICE: &[Column] = &[
    c("Type", "string", 0),
    c("Cluster-IP", "string", 0),
    c("External-IP", "string", 0),
    c("Port(s)", "string", 0),
    AGE,
    c("Selector", "string", 1),
];
const PDB: &[Column] = &[
    c("Min Available", "string", 0),
    c("Max Unavailable", "string", 0),
    c("Allowed Disruptions", "integer", 0),
    AGE,
];
const LEASE: &[Column] = &[c("Holder", "string", 0), AGE];
const PRIORITY_CLASS: &[Column] = &[
    c("Value", "integer", 0),
    c("Global-Default", "boolean", 0),
    AGE,
    c("PreemptionPolicy", "string", 0),
];

/// Events print `Name` last and only with `-o wide`, as kube-apiserver's event printer.
const EVENT: &[Column] = &[
    c("Last Seen", "string", 0),
    c("Type", "string", 0),
    c("Reason", "string", 0),
    c("Object", "string", 0),
    c("Subobject", "string", 1),
    c("Source", "string", 1),
    c("Message", "string", 0),
    c("First Seen", "string", 1),
    c("Count", "string", 1),
    c("Name", "string", 1),
];

/// Whether the kind's printer has no leading `Name` column (Events: it is their last, wide).
#[must_use]
pub fn name_last(group: &str, kind: &str) -> bool {
    kind == "Event" && (group.is_empty() || group == "events.k8s.io")
}

/// The columns after `Name` of a kind with a printer (for [`name_last`] kinds, all of them).
#[must_use]
pub fn columns(group: &str, kind: &str) -> Option<&'static [Column]> {
    Some(match (group, kind) {
        ("", "Pod") => POD,
        ("", "Node") => NODE,
        ("apps", "Deployment") => DEPLOYMENT,
        ("apps", "ReplicaSet") => REPLICA_SET,
        ("apps", "DaemonSet") => DAEMON_SET,
        ("apps", "StatefulSet") => STATEFUL_SET,
        ("", "Namespace") => NAMESPACE,
        ("", "ConfigMap") => CONFIG_MAP,
        ("", "Secret") => SECRET,
        ("", "ServiceAccount") => SERVICE_ACCOUNT,
        ("", "Service") => SERVICE,
        ("policy", "PodDisruptionBudget") => PDB,
        ("coordination.k8s.io", "Lease") => LEASE,
        ("scheduling.k8s.io", "PriorityClass") => PRIORITY_CLASS,
        ("" | "events.k8s.io", "Event") => EVENT,
        _ => return None,
    })
}

/// The cells after `Name` of `obj`, one per column of [`columns`]; `age` renders
/// `metadata.creationTimestamp`.
#[must_use]
pub fn cells(group: &str, kind: &str, obj: &Value, age: &dyn Fn(&Value) -> Value) -> Vec<Value> {
    let age = age(obj);
    match (group, kind) {
        ("", "Pod") => pod(obj, age),
        ("", "Node") => node(obj, age),
        ("", "Event") => event(obj, false),
        ("events.k8s.io", "Event") => event(obj, true),
        ("apps", "Deployment") => {
            let replicas = int(obj, "/spec/replicas");
            let mut out = vec![
                json!(format!("{}/{replicas}", int(obj, "/status/readyReplicas"))),
                json!(int(obj, "/status/updatedReplicas")),
                json!(int(obj, "/status/availableReplicas")),
                age,
            ];
            out.extend(template_wide(obj));
            out
        }
        ("apps", "ReplicaSet") => {
            let mut out = vec![
                json!(int(obj, "/spec/replicas")),
                json!(int(obj, "/status/replicas")),
                json!(int(obj, "/status/readyReplicas")),
                age,
            ];
            out.extend(template_wide(obj));
            out
        }
        ("apps", "DaemonSet") => {
            let mut out = vec![
                json!(int(obj, "/status/desiredNumberScheduled")),
                json!(int(obj, "/status/currentNumberScheduled")),
                json!(int(obj, "/status/numberReady")),
                json!(int(obj, "/status/updatedNumberScheduled")),
                json!(int(obj, "/status/numberAvailable")),
                json!(pairs(obj.pointer("/spec/template/spec/nodeSelector"))),
                age,
            ];
            out.extend(template_wide(obj));
            out
        }
        ("apps", "StatefulSet") => {
            let mut out = vec![
                json!(format!(
                    "{}/{}",
                    int(obj, "/status/readyReplicas"),
                    int(obj, "/spec/replicas")
                )),
                age,
            ];
            out.extend(template_wide(obj).into_iter().take(2));
            out
        }
        ("", "Namespace") => vec![json!(text(obj, "/status/phase")), age],
        ("", "ConfigMap") => vec![json!(len(obj, "/data") + len(obj, "/binaryData")), age],
        ("", "Secret") => vec![json!(text(obj, "/type")), json!(len(obj, "/data")), age],
        ("", "ServiceAccount") => vec![age],
        ("", "Service") => service(obj, age),
        ("policy", "PodDisruptionBudget") => vec![
            json!(or_na(obj.pointer("/spec/minAvailable"))),
            json!(or_na(obj.pointer("/spec/maxUnavailable"))),
            json!(int(obj, "/status/disruptionsAllowed")),
            age,
        ],
        ("coordination.k8s.io", "Lease") => {
            vec![json!(text(obj, "/spec/holderIdentity")), age]
        }
        ("scheduling.k8s.io", "PriorityClass") => vec![
            json!(int(obj, "/value")),
            json!(
                obj.get("globalDefault")
                    .and_then(Value::as_bool)
                    .unwrap_or(false)
            ),
            age,
            json!(text(obj, "/preemptionPolicy")),
        ],
        _ => vec![age],
    }
}

/// How long ago the RFC 3339 time `t` was, as kubectl prints ages; `<unknown>` without one.
fn since(t: &str) -> String {
    t.parse::<jiff::Timestamp>().map_or_else(
        |_| "<unknown>".to_owned(),
        |t| crate::table::human_age(jiff::Timestamp::now().as_second() - t.as_second()),
    )
}

/// An Event's cells (`events_k8s_io`: the `events.k8s.io/v1` field names): last seen (the
/// series', else `lastTimestamp`, else `eventTime`), type, reason, `kind/name` of the object,
/// its field path, the source, the message, first seen, count and name.
fn event(obj: &Value, events_k8s_io: bool) -> Vec<Value> {
    let (regarding, note, last, first, count, component, host) = if events_k8s_io {
        (
            "/regarding",
            "/note",
            "/deprecatedLastTimestamp",
            "/deprecatedFirstTimestamp",
            "/deprecatedCount",
            "/deprecatedSource/component",
            "/deprecatedSource/host",
        )
    } else {
        (
            "/involvedObject",
            "/message",
            "/lastTimestamp",
            "/firstTimestamp",
            "/count",
            "/source/component",
            "/source/host",
        )
    };
    let pick = |candidates: &[&str]| {
        candidates
            .iter()
            .map(|p| text(obj, p))
            .find(|t| !t.is_empty())
            .map_or_else(|| "<unknown>".to_owned(), since)
    };
    let last_seen = pick(&["/series/lastObservedTime", last, "/eventTime"]);
    let first_seen = pick(&[first, "/eventTime"]);
    let count = obj
        .pointer("/series/count")
        .or_else(|| obj.pointer(count))
        .and_then(Value::as_i64)
        .unwrap_or(1);
    let source = {
        let (c, h) = (text(obj, component), text(obj, host));
        let (c, h) = if c.is_empty() {
            (
                text(obj, "/reportingController"),
                text(obj, "/reportingInstance"),
            )
        } else {
            (c, h)
        };
        if h.is_empty() {
            c.to_owned()
        } else {
            format!("{c}, {h}")
        }
    };
    vec![
        json!(last_seen),
        json!(text(obj, "/type")),
        json!(text(obj, "/reason")),
        json!(format!(
            "{}/{}",
            text(obj, &format!("{regarding}/kind")).to_lowercase(),
            text(obj, &format!("{regarding}/name"))
        )),
        json!(text(obj, &format!("{regarding}/fieldPath"))),
        json!(source),
        json!(text(obj, note)),
        json!(first_seen),
        json!(count.to_string()),
        json!(text(obj, "/metadata/name")),
    ]
}

fn int(obj: &Value, pointer: &str) -> i64 {
    obj.pointer(pointer).and_then(Value::as_i64).unwrap_or(0)
}

fn text<'a>(obj: &'a Value, pointer: &str) -> &'a str {
    obj.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

fn len(obj: &Value, pointer: &str) -> usize {
    match obj.pointer(pointer) {
        Some(Value::Object(m)) => m.len(),
        Some(Value::Array(a)) => a.len(),
        _ => 0,
    }
}

fn or_none(s: &str) -> String {
    if s.is_empty() {
        "<none>".to_owned()
    } else {
        s.to_owned()
    }
}

/// An int-or-string, or `N/A`.
fn or_na(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => "N/A".to_owned(),
    }
}

/// `k=v,k2=v2` of a string map (sorted), or `<none>`.
fn pairs(map: Option<&Value>) -> String {
    let Some(Value::Object(m)) = map else {
        return "<none>".to_owned();
    };
    if m.is_empty() {
        return "<none>".to_owned();
    }
    let mut kv: Vec<String> = m
        .iter()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect();
    kv.sort();
    kv.join(",")
}

/// A label selector as kube-apiserver prints it, or `<none>`.
fn selector(sel: Option<&Value>) -> String {
    match sel.map(crate::selectors::label_selector_string) {
        Some(s) if !s.is_empty() => s,
        _ => "<none>".to_owned(),
    }
}

/// The wide `Containers`, `Images`, `Selector` cells of a workload.
fn template_wide(obj: &Value) -> Vec<Value> {
    let containers: Vec<&Value> = obj
        .pointer("/spec/template/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .collect();
    let names: Vec<&str> = containers
        .iter()
        .map(|c| c.get("name").and_then(Value::as_str).unwrap_or_default())
        .collect();
    let images: Vec<&str> = containers
        .iter()
        .map(|c| c.get("image").and_then(Value::as_str).unwrap_or_default())
        .collect();
    vec![
        json!(names.join(",")),
        json!(images.join(",")),
        json!(selector(obj.pointer("/spec/selector"))),
    ]
}

fn pod(obj: &Value, age: Value) -> Vec<Value> {
    let statuses: Vec<&Value> = obj
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .collect();
    let total = obj
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let ready = statuses
        .iter()
        .filter(|s| s.get("ready").and_then(Value::as_bool) == Some(true))
        .count();
    let restarts: i64 = statuses
        .iter()
        .map(|s| s.get("restartCount").and_then(Value::as_i64).unwrap_or(0))
        .sum();
    let mut reason = text(obj, "/status/reason").to_owned();
    if reason.is_empty() {
        reason = text(obj, "/status/phase").to_owned();
    }
    for s in &statuses {
        let waiting = s.pointer("/state/waiting/reason").and_then(Value::as_str);
        let terminated = s
            .pointer("/state/terminated/reason")
            .and_then(Value::as_str);
        if let Some(r) = waiting.or(terminated).filter(|r| !r.is_empty()) {
            reason = r.to_owned();
        }
    }
    if obj
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null())
    {
        reason = if text(obj, "/status/reason") == "NodeLost" {
            "Unknown".to_owned()
        } else {
            "Terminating".to_owned()
        };
    }
    let gates: Vec<&Value> = obj
        .pointer("/spec/readinessGates")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .collect();
    let gates = if gates.is_empty() {
        "<none>".to_owned()
    } else {
        let conditions = obj.pointer("/status/conditions").and_then(Value::as_array);
        let met = gates
            .iter()
            .filter(|g| {
                let t = g.get("conditionType").and_then(Value::as_str);
                conditions.into_iter().flatten().any(|c| {
                    c.get("type").and_then(Value::as_str) == t
                        && c.get("status").and_then(Value::as_str) == Some("True")
                })
            })
            .count();
        format!("{met}/{}", gates.len())
    };
    vec![
        json!(format!("{ready}/{total}")),
        json!(reason),
        json!(restarts.to_string()),
        age,
        json!(or_none(text(obj, "/status/podIP"))),
        json!(or_none(text(obj, "/spec/nodeName"))),
        json!(or_none(text(obj, "/status/nominatedNodeName"))),
        json!(gates),
    ]
}

fn node(obj: &Value, age: Value) -> Vec<Value> {
    let conditions = obj.pointer("/status/conditions").and_then(Value::as_array);
    let ready = conditions
        .into_iter()
        .flatten()
        .find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"))
        .and_then(|c| c.get("status").and_then(Value::as_str));
    let mut status = vec![match ready {
        Some("True") => "Ready",
        Some(_) => "NotReady",
        None => "Unknown",
    }];
    if obj.pointer("/spec/unschedulable").and_then(Value::as_bool) == Some(true) {
        status.push("SchedulingDisabled");
    }
    let mut roles: Vec<&str> = obj
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| {
            k.strip_prefix("node-role.kubernetes.io/")
                .filter(|r| !r.is_empty())
                .or_else(|| {
                    (k == "kubernetes.io/role")
                        .then(|| v.as_str())
                        .flatten()
                        .filter(|r| !r.is_empty())
                })
        })
        .collect();
    roles.sort_unstable();
    roles.dedup();
    let address = |t: &str| {
        obj.pointer("/status/addresses")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|a| a.get("type").and_then(Value::as_str) == Some(t))
            .and_then(|a| a.get("address").and_then(Value::as_str))
            .map_or_else(|| "<none>".to_owned(), str::to_owned)
    };
    let info = |k: &str| match obj
        .pointer(&format!("/status/nodeInfo/{k}"))
        .and_then(Value::as_str)
    {
        Some(v) if !v.is_empty() => v.to_owned(),
        _ => "<unknown>".to_owned(),
    };
    vec![
        json!(status.join(",")),
        json!(if roles.is_empty() {
            "<none>".to_owned()
        } else {
            roles.join(",")
        }),
        age,
        json!(text(obj, "/status/nodeInfo/kubeletVersion")),
        json!(address("InternalIP")),
        json!(address("ExternalIP")),
        json!(info("osImage")),
        json!(info("kernelVersion")),
        json!(info("containerRuntimeVersion")),
    ]
}

fn service(obj: &Value, age: Value) -> Vec<Value> {
    let type_ = match text(obj, "/spec/type") {
        "" => "ClusterIP",
        t => t,
    };
    let cluster_ip = or_none(text(obj, "/spec/clusterIP"));
    let external: Vec<String> = match type_ {
        "ExternalName" => vec![text(obj, "/spec/externalName").to_owned()],
        "LoadBalancer" => {
            let ingress: Vec<String> = obj
                .pointer("/status/loadBalancer/ingress")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|i| {
                    i.get("ip")
                        .or_else(|| i.get("hostname"))
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                })
                .collect();
            if ingress.is_empty() {
                vec!["<pending>".to_owned()]
            } else {
                ingress
            }
        }
        _ => obj
            .pointer("/spec/externalIPs")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
    };
    let external = if external.is_empty() {
        "<none>".to_owned()
    } else {
        external.join(",")
    };
    let ports: Vec<String> = obj
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|p| {
            let port = p.get("port").and_then(Value::as_i64).unwrap_or(0);
            let protocol = p.get("protocol").and_then(Value::as_str).unwrap_or("TCP");
            match p.get("nodePort").and_then(Value::as_i64) {
                Some(n) if n > 0 => format!("{port}:{n}/{protocol}"),
                _ => format!("{port}/{protocol}"),
            }
        })
        .collect();
    vec![
        json!(type_),
        json!(cluster_ip),
        json!(external),
        json!(if ports.is_empty() {
            "<none>".to_owned()
        } else {
            ports.join(",")
        }),
        age,
        json!(pairs(obj.pointer("/spec/selector"))),
    ]
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    fn no_age(_: &Value) -> Value {
        json!("1s")
    }

    #[test]
    fn every_printed_kind_has_a_cell_per_column() {
        for (g, k) in [
            ("", "Pod"),
            ("", "Node"),
            ("apps", "Deployment"),
            ("apps", "ReplicaSet"),
            ("apps", "DaemonSet"),
            ("apps", "StatefulSet"),
            ("", "Namespace"),
            ("", "ConfigMap"),
            ("", "Secret"),
            ("", "ServiceAccount"),
            ("", "Service"),
            ("policy", "PodDisruptionBudget"),
            ("coordination.k8s.io", "Lease"),
            ("scheduling.k8s.io", "PriorityClass"),
            ("", "Event"),
            ("events.k8s.io", "Event"),
        ] {
            assert_eq!(
                cells(g, k, &json!({}), &no_age).len(),
                columns(g, k).unwrap().len(),
                "{k}"
            );
        }
    }

    #[test]
    fn an_event_prints_as_kube_apiservers_printer() {
        let core = json!({"metadata": {"name": "n.1"}, "type": "Warning", "reason": "Unconsolidatable",
            "involvedObject": {"kind": "Node", "name": "n"}, "message": "m",
            "source": {"component": "karpenter"}, "count": 3});
        let c = cells("", "Event", &core, &no_age);
        assert_eq!(
            c[1..4],
            [json!("Warning"), json!("Unconsolidatable"), json!("node/n")]
        );
        assert_eq!(c[5], json!("karpenter"));
        assert_eq!(c[6], json!("m"));
        assert_eq!(c[8], json!("3"));
        assert_eq!(c[9], json!("n.1"));
        let v1 = json!({"metadata": {"name": "e"}, "type": "Normal", "reason": "Launched",
            "regarding": {"kind": "NodeClaim", "name": "nc"}, "note": "launched",
            "reportingController": "karpenter", "reportingInstance": "pod-1"});
        let c = cells("events.k8s.io", "Event", &v1, &no_age);
        assert_eq!(c[3], json!("nodeclaim/nc"));
        assert_eq!(c[5], json!("karpenter, pod-1"));
        assert_eq!(c[6], json!("launched"));
        assert!(name_last("", "Event") && !name_last("", "Pod"));
    }

    #[test]
    fn a_pod_prints_its_readiness_status_and_restarts() {
        let pod = json!({
            "metadata": {"deletionTimestamp": null},
            "spec": {"nodeName": "n1", "containers": [{"name": "a"}, {"name": "b"}]},
            "status": {"phase": "Running", "podIP": "10.0.0.1", "containerStatuses": [
                {"name": "a", "ready": true, "restartCount": 2, "state": {"running": {}}},
                {"name": "b", "ready": false, "restartCount": 1,
                 "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
            ]}
        });
        let cells = cells("", "Pod", &pod, &no_age);
        assert_eq!(cells[0], "1/2");
        assert_eq!(cells[1], "CrashLoopBackOff");
        assert_eq!(cells[2], "3");
        assert_eq!(cells[4], "10.0.0.1");
        assert_eq!(cells[5], "n1");
        assert_eq!(cells[6], "<none>");
    }

    #[test]
    fn a_cordoned_node_says_so() {
        let node = json!({
            "metadata": {"labels": {"node-role.kubernetes.io/control-plane": ""}},
            "spec": {"unschedulable": true},
            "status": {"conditions": [{"type": "Ready", "status": "True"}],
                       "nodeInfo": {"kubeletVersion": "v1.33.0"}}
        });
        let cells = cells("", "Node", &node, &no_age);
        assert_eq!(cells[0], "Ready,SchedulingDisabled");
        assert_eq!(cells[1], "control-plane");
        assert_eq!(cells[3], "v1.33.0");
    }
}
