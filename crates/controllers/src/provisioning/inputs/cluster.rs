//! Nodes, NodeClaims, pods, DaemonSets and Namespaces → the scheduler's [`Cluster`].
//!
//! Responsibility (spec §3.4 item 11, §3.10):
//! - **existing nodes**: Nodes not being deleted and not tainted `karpenter.sh/disrupted`, with
//!   labels, taints, allocatable and capacity; a cordoned Node (`spec.unschedulable`) carries
//!   `node.kubernetes.io/unschedulable:NoSchedule` even before the node lifecycle controller
//!   writes it, as kube-scheduler refuses it. `initialized` = label
//!   `karpenter.sh/initialized=true`, or the Node is not managed (no `karpenter.sh/nodepool`
//!   label and no NodeClaim naming it in `status.nodeName`). For a managed, uninitialized Node, resources it does not report yet come from its
//!   NodeClaim's status, and its NodeClaim's startup taints and the known ephemeral taints are
//!   ignored (upstream's `StateNode.Taints`);
//! - **NodeClaims without a Node** (not being deleted, no Node named by `status.nodeName`):
//!   existing, uninitialized nodes named after the NodeClaim, with — once launched (condition
//!   `Launched=True` or a providerID) — its status capacity/allocatable, and before that its
//!   `spec.resources.requests` (the pods it was made for, so a launch in flight holds them and
//!   nothing more), its labels plus the single values of its `In` requirements, and its taints
//!   (startup taints excluded);
//! - **bound pods**: non-terminal pods with a `spec.nodeName`, via `scheduling::k8s::pod`;
//! - **DaemonSet pods**: one per DaemonSet — the newest pod it controls, else one made from its
//!   template with container limits copied into missing requests; the required node affinity
//!   is the template's in both cases;
//! - **namespaces**: name → labels (affinity namespace selectors);
//! - **limit usage**: the capacity (and one node each) of a NodePool's nodes left out above
//!   (being deleted, or disrupted) and of its deleting NodeClaims without a Node: they still
//!   count against the pool's `spec.limits`, as upstream counts them.
//!
//! Inputs: k8s-openapi and `api` objects. Outputs: the [`Cluster`] and warnings for objects
//! that had to be skipped (an unparsable quantity, an unknown taint effect), never a panic.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use api::NodeClaim;
use api::common::NodeSelectorOperator;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use scheduling::labels::{NODE_INITIALIZED, NODE_POOL};
use scheduling::pod::{Labels, Pod};
use scheduling::resources::Resources;
use scheduling::scheduler::{Cluster, ExistingNode};
use scheduling::taints::{Taint, TaintEffect, is_known_ephemeral};

/// The objects the cluster is built from.
#[derive(Clone, Copy, Debug, Default)]
pub struct ClusterObjects<'a> {
    /// Nodes of the workload cluster.
    pub nodes: &'a [core::Node],
    /// NodeClaims.
    pub node_claims: &'a [NodeClaim],
    /// Pods (only the bound ones and the DaemonSet-owned ones are used).
    pub pods: &'a [Arc<core::Pod>],
    /// DaemonSets.
    pub daemon_sets: &'a [DaemonSet],
    /// Namespaces.
    pub namespaces: &'a [core::Namespace],
}

/// Builds the scheduler's view of the cluster, and warnings for what had to be skipped.
#[must_use]
pub fn cluster(objects: &ClusterObjects<'_>) -> (Cluster, Vec<String>) {
    let mut warnings = Vec::new();
    let mut out = Cluster::default();
    let node_names: BTreeSet<&str> = objects
        .nodes
        .iter()
        .filter_map(|n| n.metadata.name.as_deref())
        .collect();
    for node in objects.nodes {
        match existing_node(node, objects.node_claims) {
            Ok(Some(n)) => out.nodes.push(n),
            Ok(None) => hold_limits(
                &mut out.limit_usage,
                node.metadata.labels.as_ref(),
                node.status.as_ref().and_then(|s| s.capacity.as_ref()),
            ),
            Err(e) => warnings.push(e),
        }
    }
    for claim in objects.node_claims {
        match launched_claim(claim, &node_names) {
            Ok(Some(n)) => out.nodes.push(n),
            Ok(None) => {
                let has_node = claim
                    .status
                    .as_ref()
                    .and_then(|s| s.node_name.as_deref())
                    .is_some_and(|n| node_names.contains(n));
                if claim.metadata.deletion_timestamp.is_some() && !has_node {
                    hold_limits(
                        &mut out.limit_usage,
                        claim.metadata.labels.as_ref(),
                        claim.status.as_ref().and_then(|s| s.capacity.as_ref()),
                    );
                }
            }
            Err(e) => warnings.push(e),
        }
    }
    for pod in objects.pods {
        let bound = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .is_some_and(|n| !n.is_empty());
        if !bound {
            continue;
        }
        match scheduling::k8s::pod(pod) {
            Ok(p) if !p.terminal_or_terminating => out.pods.push(p),
            Ok(_) => {}
            Err(e) => warnings.push(format!("bound pod skipped: {e}")),
        }
    }
    for ds in objects.daemon_sets {
        match daemonset_pod(ds, objects.pods) {
            Ok(Some(p)) => out.daemonset_pods.push(p),
            Ok(None) => {}
            Err(e) => warnings.push(e),
        }
    }
    out.namespaces = objects
        .namespaces
        .iter()
        .map(|ns| {
            (
                Arc::from(ns.metadata.name.as_deref().unwrap_or_default()),
                labels(ns.metadata.labels.as_ref()),
            )
        })
        .collect();
    (out, warnings)
}

/// Counts a node (or a deleting NodeClaim without one) that is not offered for scheduling
/// against its NodePool's limits: its capacity and one node.
fn hold_limits(
    usage: &mut BTreeMap<Arc<str>, Resources>,
    labels: Option<&BTreeMap<String, String>>,
    capacity: Option<&BTreeMap<String, K8sQuantity>>,
) {
    let Some(pool) = labels.and_then(|l| l.get(NODE_POOL)) else {
        return;
    };
    let mut held = capacity
        .and_then(|c| Resources::parse(c.iter().map(|(k, v)| (k.as_str(), v.0.as_str()))).ok())
        .unwrap_or_default();
    held.insert(
        scheduling::resources::ResourceName::NODES,
        scheduling::quantity::Quantity::from_value(1),
    );
    usage
        .entry(Arc::from(pool.as_str()))
        .and_modify(|u| u.merge(&held))
        .or_insert(held);
}

fn labels(map: Option<&BTreeMap<String, String>>) -> Labels {
    map.into_iter()
        .flatten()
        .map(|(k, v)| (Arc::from(k.as_str()), Arc::from(v.as_str())))
        .collect()
}

fn resources(
    object: &str,
    field: &str,
    list: Option<&BTreeMap<String, K8sQuantity>>,
) -> Result<Resources, String> {
    list.map(|l| Resources::parse(l.iter().map(|(k, v)| (k.as_str(), v.0.as_str()))))
        .transpose()
        .map(Option::unwrap_or_default)
        .map_err(|e| format!("{object} skipped: {field}: {e}"))
}

fn existing_node(node: &core::Node, claims: &[NodeClaim]) -> Result<Option<ExistingNode>, String> {
    if node.metadata.deletion_timestamp.is_some() {
        return Ok(None);
    }
    let name = node.metadata.name.as_deref().unwrap_or_default();
    let object = format!("Node {name}");
    let mut taints = Vec::new();
    for t in node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
    {
        taints.push(scheduling::k8s::taint(t).map_err(|e| format!("{object} skipped: {e}"))?);
    }
    let cordoned = node
        .spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false);
    let cordon = Taint::new(
        api::well_known::taints::UNSCHEDULABLE,
        "",
        TaintEffect::NoSchedule,
    );
    if cordoned && !taints.iter().any(|t| t.matches(&cordon)) {
        // kube-scheduler's NodeUnschedulable: only pods tolerating the taint land on it.
        taints.push(cordon);
    }
    if taints
        .iter()
        .any(|t| t.key == api::well_known::taints::DISRUPTED)
    {
        return Ok(None);
    }
    let labels = labels(node.metadata.labels.as_ref());
    let status = node.status.as_ref();
    let mut allocatable = resources(
        &object,
        "status.allocatable",
        status.and_then(|s| s.allocatable.as_ref()),
    )?;
    let mut capacity = resources(
        &object,
        "status.capacity",
        status.and_then(|s| s.capacity.as_ref()),
    )?;
    let claim = claims
        .iter()
        .find(|c| c.status.as_ref().and_then(|s| s.node_name.as_deref()) == Some(name));
    // Ours once a NodeClaim names it, even before registration's label patch is in the cache:
    // otherwise, in that moment, it would count as an unmanaged, initialized node still
    // carrying its registration taints, and its room would be offered to no pod.
    let managed = labels.contains_key(NODE_POOL) || claim.is_some();
    let initialized = !managed || labels.get(NODE_INITIALIZED).is_some_and(|v| &**v == "true");
    if managed && !initialized {
        if let Some(claim) = claim {
            let claim_object = format!(
                "NodeClaim {}",
                claim.metadata.name.as_deref().unwrap_or_default()
            );
            let status = claim.status.as_ref();
            allocatable = allocatable.or_defaults(&resources(
                &claim_object,
                "status.allocatable",
                status.and_then(|s| s.allocatable.as_ref()),
            )?);
            capacity = capacity.or_defaults(&resources(
                &claim_object,
                "status.capacity",
                status.and_then(|s| s.capacity.as_ref()),
            )?);
            let startup = crate::provisioning::inputs::pools::taints(
                claim.spec.startup_taints.as_deref(),
                "spec.startupTaints",
            )
            .map_err(|e| format!("{claim_object} skipped: {e}"))?;
            taints.retain(|t| !is_known_ephemeral(t) && !startup.iter().any(|s| s.matches(t)));
        } else {
            taints.retain(|t| !is_known_ephemeral(t));
        }
    }
    Ok(Some(ExistingNode {
        name: Arc::from(name),
        labels,
        taints,
        allocatable,
        capacity,
        initialized,
    }))
}

fn launched_claim(
    claim: &NodeClaim,
    node_names: &BTreeSet<&str>,
) -> Result<Option<ExistingNode>, String> {
    let status = claim.status.as_ref();
    let launched = status.is_some_and(|s| {
        s.provider_id.as_deref().is_some_and(|p| !p.is_empty())
            || s.conditions.iter().flatten().any(|c| {
                c.type_ == api::well_known::conditions::LAUNCHED
                    && matches!(c.status, api::common::ConditionStatus::True)
            })
    });
    let has_node = status
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| node_names.contains(n));
    if claim.metadata.deletion_timestamp.is_some() || has_node {
        return Ok(None);
    }
    let name = claim.metadata.name.as_deref().unwrap_or_default();
    let object = format!("NodeClaim {name}");
    let (allocatable, capacity) = if launched {
        (
            resources(
                &object,
                "status.allocatable",
                status.and_then(|s| s.allocatable.as_ref()),
            )?,
            resources(
                &object,
                "status.capacity",
                status.and_then(|s| s.capacity.as_ref()),
            )?,
        )
    } else {
        // Not launched yet: what it was made for, no more (its instance type is not chosen).
        let requests = resources(
            &object,
            "spec.resources.requests",
            claim
                .spec
                .resources
                .as_ref()
                .and_then(|r| r.requests.as_ref()),
        )?;
        (requests.clone(), requests)
    };
    let mut labels = labels(claim.metadata.labels.as_ref());
    for r in &claim.spec.requirements {
        if let (NodeSelectorOperator::In, [value]) = (r.operator, r.values()) {
            labels
                .entry(Arc::from(r.key.as_str()))
                .or_insert_with(|| Arc::from(value.as_str()));
        }
    }
    let taints =
        crate::provisioning::inputs::pools::taints(claim.spec.taints.as_deref(), "spec.taints")
            .map_err(|e| format!("{object} skipped: {e}"))?;
    Ok(Some(ExistingNode {
        name: Arc::from(name),
        labels,
        taints: taints
            .into_iter()
            .filter(|t: &Taint| !is_known_ephemeral(t))
            .collect(),
        allocatable,
        capacity,
        initialized: false,
    }))
}

fn controls(ds: &DaemonSet, owner: &OwnerReference) -> bool {
    owner.controller == Some(true)
        && owner.kind == "DaemonSet"
        && owner.api_version == "apps/v1"
        && match ds.metadata.uid.as_deref() {
            Some(uid) => owner.uid == uid,
            None => Some(owner.name.as_str()) == ds.metadata.name.as_deref(),
        }
}

/// The DaemonSet's representative pod (spec §3.10), `None` when it has no template spec.
fn daemonset_pod(ds: &DaemonSet, pods: &[Arc<core::Pod>]) -> Result<Option<Pod>, String> {
    let namespace = ds.metadata.namespace.as_deref().unwrap_or("default");
    let name = ds.metadata.name.as_deref().unwrap_or_default();
    let Some(template) = ds.spec.as_ref().map(|s| &s.template) else {
        return Ok(None);
    };
    let Some(template_spec) = template.spec.as_ref() else {
        return Ok(None);
    };
    let template_required = template_spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .clone()
        });
    let newest = pods
        .iter()
        .filter(|p| p.metadata.namespace.as_deref().unwrap_or("default") == namespace)
        .filter(|p| {
            p.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| controls(ds, o))
        })
        .max_by(|a, b| {
            let key = |p: &core::Pod| {
                (
                    p.metadata.creation_timestamp.as_ref().map(|t| t.0),
                    p.metadata.name.clone(),
                )
            };
            key(a).cmp(&key(b))
        });
    let mut pod = if let Some(existing) = newest {
        let mut pod = core::Pod::clone(existing);
        if let Some(spec) = pod.spec.as_mut() {
            spec.node_name = None;
            let affinity = spec.affinity.get_or_insert_with(Default::default);
            let node_affinity = affinity.node_affinity.get_or_insert_with(Default::default);
            node_affinity.required_during_scheduling_ignored_during_execution = template_required;
        }
        pod
    } else {
        let mut spec = template_spec.clone();
        for c in spec
            .containers
            .iter_mut()
            .chain(spec.init_containers.iter_mut().flatten())
        {
            if let Some(resources) = c.resources.as_mut()
                && let Some(limits) = resources.limits.clone()
            {
                let requests = resources.requests.get_or_insert_with(BTreeMap::new);
                for (k, v) in limits {
                    requests.entry(k).or_insert(v);
                }
            }
        }
        core::Pod {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some(namespace.to_owned()),
                labels: template.metadata.as_ref().and_then(|m| m.labels.clone()),
                ..Default::default()
            },
            spec: Some(spec),
            status: None,
        }
    };
    // A stable identity per DaemonSet (the pod's own UID when it has one).
    if pod.metadata.uid.is_none() {
        pod.metadata.uid = Some(format!("daemonset:{namespace}/{name}"));
    }
    scheduling::k8s::pod(&pod)
        .map(Some)
        .map_err(|e| format!("DaemonSet {namespace}/{name} skipped: {e}"))
}

#[cfg(test)]
mod tests;
