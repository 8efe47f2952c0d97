//! The Node a simulated Machine becomes in the workload cluster.
//!
//! Responsibility: build the Node object a real cluster would end up with once a Machine's
//! instance booted and its kubelet registered: the labels CAPI copies from the Machine (the
//! `node-role.kubernetes.io`, `node-restriction.kubernetes.io` and `node.cluster.x-k8s.io`
//! domains, spec-capi-provider §5.1), what a cloud provider and kubelet add
//! (`node.kubernetes.io/instance-type`, `topology.kubernetes.io/zone`, `kubernetes.io/arch`,
//! `kubernetes.io/os`, `kubernetes.io/hostname`), the MachineDeployment's cluster-autoscaler
//! labels annotation (which wins), its taints annotation, the registration taints
//! (`karpenter.sh/unregistered:NoExecute` when configured, `node.kubernetes.io/not-ready:NoSchedule`),
//! the CAPI node annotations, and capacity = allocatable from the scale-from-zero annotations.
//! Inputs: the Machine and its MachineDeployment as JSON, [`NodeOptions`]. Outputs: Node JSON.
//! Pure. Approximations: no system-reserved overhead (allocatable = capacity, as the provider
//! models it); the instance type is the labels annotation's or else the MachineDeployment's
//! name; arch is amd64 unless the labels annotation says otherwise.

use std::collections::BTreeMap;

use api::well_known::capi::{self as keys, capacity};
use api::well_known::taints::{NOT_READY, UNREGISTERED};
use serde_json::{Value, json};

use super::objects::{annotations, labels, text};

/// Labels and defaults that do not come from the objects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeOptions {
    /// Add `karpenter.sh/unregistered:NoExecute` (the bootstrap Karpenter expects).
    pub unregistered_taint: bool,
    /// CPU when the MachineDeployment has no cpu capacity annotation.
    pub default_cpu: String,
    /// Memory when it has no memory annotation.
    pub default_memory: String,
    /// Ephemeral storage when it has no ephemeral-disk annotation.
    pub default_ephemeral_storage: String,
    /// Kubelet version when the Machine has no `spec.version`.
    pub default_kubelet_version: String,
}

impl Default for NodeOptions {
    fn default() -> Self {
        Self {
            unregistered_taint: true,
            default_cpu: "4".into(),
            default_memory: "16Gi".into(),
            default_ephemeral_storage: "100Gi".into(),
            default_kubelet_version: "v1.33.0".into(),
        }
    }
}

/// Whether CAPI copies a Machine label with this key to the Node.
pub fn propagated(key: &str) -> bool {
    let domain = key.split_once('/').map_or(key, |(d, _)| d);
    domain == "node-role.kubernetes.io"
        || ["node-restriction.kubernetes.io", "node.cluster.x-k8s.io"]
            .iter()
            .any(|d| domain == *d || domain.ends_with(&format!(".{d}")))
}

/// The cluster-autoscaler labels annotation: `k1=v1,k2=v2` (entries without `=` or with an
/// empty key are skipped).
pub fn parse_labels(s: &str) -> BTreeMap<String, String> {
    s.split(',')
        .filter_map(|e| e.split_once('='))
        .filter(|(k, _)| !k.is_empty())
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// The cluster-autoscaler taints annotation: `k1=v1:NoSchedule,k2:NoExecute`, as core/v1
/// taints. Entries without a valid effect are skipped.
pub fn parse_taints(s: &str) -> Vec<Value> {
    s.split(',')
        .filter_map(|e| {
            let (kv, effect) = e.trim().split_once(':')?;
            if !["NoSchedule", "PreferNoSchedule", "NoExecute"].contains(&effect) {
                return None;
            }
            let (key, value) = kv.split_once('=').unwrap_or((kv, ""));
            (!key.is_empty()).then(|| {
                if value.is_empty() {
                    json!({"key": key, "effect": effect})
                } else {
                    json!({"key": key, "value": value, "effect": effect})
                }
            })
        })
        .collect()
}

/// The zone of a Machine: the labels annotation's, else the Machine's failure domain, else the
/// MachineDeployment template's.
pub fn zone(machine: &Value, md: Option<&Value>) -> Option<String> {
    let from_labels = md
        .and_then(|md| annotations(md).get(keys::capacity::LABELS).cloned())
        .and_then(|l| parse_labels(&l).remove(api::well_known::labels::ZONE));
    from_labels
        .or_else(|| text(machine, ".spec.failureDomain").map(str::to_owned))
        .or_else(|| {
            md.and_then(|md| text(md, ".spec.template.spec.failureDomain"))
                .map(str::to_owned)
        })
        .filter(|z| !z.is_empty())
}

/// The providerID of a simulated instance: `sim:///<zone>/<machine>`.
pub fn provider_id(zone: Option<&str>, machine_name: &str) -> String {
    format!("sim:///{}/{machine_name}", zone.unwrap_or("default"))
}

/// A stable private IP for a node name.
/// The InternalIP a simulated node of this name gets (stable per name).
pub(crate) fn ip_for(name: &str) -> String {
    let h = name.bytes().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    let [_, a, b, c] = h.to_be_bytes();
    format!("10.{a}.{b}.{}", c.max(1))
}

/// The node's capacity from the scale-from-zero annotations.
pub fn capacity_of(
    md_annotations: &BTreeMap<String, String>,
    opts: &NodeOptions,
) -> BTreeMap<String, String> {
    let get = |k: &str| md_annotations.get(k).filter(|v| !v.is_empty()).cloned();
    let mut cap = BTreeMap::new();
    cap.insert(
        "cpu".to_owned(),
        get(capacity::CPU).unwrap_or_else(|| opts.default_cpu.clone()),
    );
    cap.insert(
        "memory".to_owned(),
        get(capacity::MEMORY).unwrap_or_else(|| opts.default_memory.clone()),
    );
    cap.insert(
        "ephemeral-storage".to_owned(),
        get(capacity::EPHEMERAL_DISK).unwrap_or_else(|| opts.default_ephemeral_storage.clone()),
    );
    let pods = get(capacity::MAX_PODS)
        .and_then(|p| p.parse::<i64>().ok())
        .filter(|p| *p > 0)
        .unwrap_or(capacity::DEFAULT_MAX_PODS);
    cap.insert("pods".to_owned(), pods.to_string());
    if let (Some(count), Some(kind)) = (get(capacity::GPU_COUNT), get(capacity::GPU_TYPE))
        && count.parse::<i64>().is_ok_and(|c| c > 0)
    {
        cap.insert(kind, count);
    }
    cap
}

/// The labels of the Node.
pub fn node_labels(
    machine: &Value,
    md: Option<&Value>,
    node_name: &str,
) -> BTreeMap<String, String> {
    let md_annotations = md.map(annotations).unwrap_or_default();
    let cas = md_annotations
        .get(capacity::LABELS)
        .map(|l| parse_labels(l))
        .unwrap_or_default();
    let mut out = BTreeMap::new();
    let instance_type = md.map_or("sim", |m| sim::object::name(m));
    out.insert(
        "node.kubernetes.io/instance-type".to_owned(),
        instance_type.to_owned(),
    );
    out.insert("kubernetes.io/arch".to_owned(), "amd64".to_owned());
    out.insert("kubernetes.io/os".to_owned(), "linux".to_owned());
    out.insert("kubernetes.io/hostname".to_owned(), node_name.to_owned());
    if let Some(z) = zone(machine, md) {
        out.insert("topology.kubernetes.io/zone".to_owned(), z);
    }
    out.extend(labels(machine).into_iter().filter(|(k, _)| propagated(k)));
    out.extend(cas);
    out
}

/// The Node object for a Machine that got `provider_id`.
pub fn node(machine: &Value, md: Option<&Value>, provider_id: &str, opts: &NodeOptions) -> Value {
    let name = sim::object::name(machine);
    let md_annotations = md.map(annotations).unwrap_or_default();
    let mut taints = md_annotations
        .get(capacity::TAINTS)
        .map(|t| parse_taints(t))
        .unwrap_or_default();
    if opts.unregistered_taint {
        taints.push(json!({"key": UNREGISTERED, "effect": "NoExecute"}));
    }
    taints.push(json!({"key": NOT_READY, "effect": "NoSchedule"}));
    let labels = node_labels(machine, md, name);
    let cap = capacity_of(&md_annotations, opts);
    let cluster = text(machine, ".spec.clusterName").unwrap_or_default();
    let owner = labels_owner(machine);
    let version = text(machine, ".spec.version").unwrap_or(&opts.default_kubelet_version);
    let arch = labels
        .get("kubernetes.io/arch")
        .cloned()
        .unwrap_or_default();
    let now = sim::object::now_rfc3339();
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": {
                keys::NODE_MACHINE: name,
                keys::NODE_CLUSTER_NAME: cluster,
                keys::NODE_CLUSTER_NAMESPACE: sim::object::namespace(machine),
                "cluster.x-k8s.io/owner-kind": "MachineSet",
                "cluster.x-k8s.io/owner-name": owner,
            },
        },
        "spec": {"providerID": provider_id, "taints": taints},
        "status": {
            "capacity": cap,
            "allocatable": cap,
            "conditions": [{
                "type": "Ready", "status": "False", "reason": "KubeletNotReady",
                "message": "container runtime status check may not have completed yet",
                "lastHeartbeatTime": now, "lastTransitionTime": now,
            }],
            "addresses": [
                {"type": "InternalIP", "address": ip_for(name)},
                {"type": "Hostname", "address": name},
            ],
            "nodeInfo": {
                "machineID": sim::object::uid(machine), "systemUUID": sim::object::uid(machine),
                "bootID": sim::object::uid(machine), "kernelVersion": "6.1.0-sim",
                "osImage": "sim", "containerRuntimeVersion": "sim://1.0",
                "kubeletVersion": version, "kubeProxyVersion": version,
                "operatingSystem": "linux", "architecture": arch,
            },
        },
    })
}

fn labels_owner(machine: &Value) -> String {
    labels(machine)
        .get(keys::SET_NAME)
        .cloned()
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn propagation_domains() {
        assert!(propagated("node-role.kubernetes.io/worker"));
        assert!(!propagated("prefixed.node-role.kubernetes.io/x"));
        assert!(propagated("node-restriction.kubernetes.io/team"));
        assert!(propagated("a.node-restriction.kubernetes.io/team"));
        assert!(propagated("node.cluster.x-k8s.io"));
        assert!(propagated("x.node.cluster.x-k8s.io/y"));
        assert!(!propagated("app"));
        assert!(!propagated("cluster.x-k8s.io/deployment-name"));
    }

    #[test]
    fn annotations_parse() {
        let l = parse_labels("a=b,c=d=e,broken,=x");
        assert_eq!(l.len(), 2);
        assert_eq!(l["c"], "d=e");
        let t = parse_taints("gpu=yes:NoSchedule,dedicated:NoExecute,bad:Sometimes,noeffect");
        assert_eq!(
            t,
            vec![
                json!({"key": "gpu", "value": "yes", "effect": "NoSchedule"}),
                json!({"key": "dedicated", "effect": "NoExecute"})
            ]
        );
    }

    #[test]
    fn node_from_machine_and_deployment() {
        let md = json!({"metadata": {"name": "md-a", "annotations": {
            capacity::CPU: "8", capacity::MEMORY: "32Gi", capacity::GPU_COUNT: "2",
            capacity::GPU_TYPE: "nvidia.com/gpu",
            capacity::LABELS: "topology.kubernetes.io/zone=z1,node.kubernetes.io/instance-type=big",
            capacity::TAINTS: "gpu=true:NoSchedule"}}});
        let machine = json!({"metadata": {"name": "m1", "namespace": "ns", "uid": "u",
            "labels": {"node-role.kubernetes.io/worker": "", "app": "x", keys::SET_NAME: "ms"}},
            "spec": {"clusterName": "c"}});
        let n = node(&machine, Some(&md), "sim:///z1/m1", &NodeOptions::default());
        let l = &n["metadata"]["labels"];
        assert_eq!(l["node.kubernetes.io/instance-type"], "big");
        assert_eq!(l["topology.kubernetes.io/zone"], "z1");
        assert_eq!(l["node-role.kubernetes.io/worker"], "");
        assert!(l.get("app").is_none());
        assert_eq!(l["kubernetes.io/hostname"], "m1");
        let cap = &n["status"]["capacity"];
        assert_eq!(
            (cap["cpu"].as_str(), cap["pods"].as_str()),
            (Some("8"), Some("110"))
        );
        assert_eq!(cap["nvidia.com/gpu"], "2");
        let taints = n["spec"]["taints"].as_array().unwrap();
        assert_eq!(taints.len(), 3);
        assert_eq!(taints[1]["key"], UNREGISTERED);
        assert_eq!(n["metadata"]["annotations"][keys::NODE_MACHINE], "m1");
        assert_eq!(zone(&machine, Some(&md)).as_deref(), Some("z1"));
        assert_eq!(provider_id(None, "m1"), "sim:///default/m1");
    }
}
