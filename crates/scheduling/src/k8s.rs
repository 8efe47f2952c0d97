//! The one adapter from Kubernetes API objects (k8s-openapi) to the engine's domain types.
//!
//! Responsibility: convert core/v1 Pods and taints into [`crate::pod::Pod`] and
//! [`crate::taints::Taint`], computing effective requests (Kubernetes PodRequests + `pods: 1`)
//! and reading node affinity, tolerations, topology spread, pod (anti-)affinity and host ports.
//! Anything the engine cannot represent faithfully (e.g. node-affinity `matchFields`, an unknown
//! operator, an unparsable quantity) is an [`AdapterError`] naming the object and the field —
//! never a panic, never silently dropped.
//! Inputs: k8s-openapi objects. Outputs: engine values. Compiled with the `k8s` feature.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;

use crate::pod::{
    HostPort, LabelSelector, Labels, NodeInclusionPolicy, NodeSelectorTerm, Pod, PodAffinityTerm,
    PodAffinityTerms, SelectorExpression, SelectorOperator, TopologySpreadConstraint,
    WeightedNodeSelectorTerm, WeightedPodAffinityTerm, WhenUnsatisfiable,
};
use crate::requirements::{Operator, SelectorRequirement};
use crate::resources::{InitContainer, PodResources, Resources};
use crate::taints::{Taint, TaintEffect, Toleration, TolerationOperator};

/// A Kubernetes object the engine cannot represent.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{object}: {field}: {message}")]
pub struct AdapterError {
    /// `Pod default/web-1`, `Node ip-10-0-0-1`.
    pub object: String,
    /// The offending field path, e.g. `spec.affinity.nodeAffinity…matchFields`.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

struct Ctx {
    object: String,
}

impl Ctx {
    fn err(&self, field: impl Into<String>, message: impl Into<String>) -> AdapterError {
        AdapterError {
            object: self.object.clone(),
            field: field.into(),
            message: message.into(),
        }
    }

    fn resources(
        &self,
        field: &str,
        list: Option<&BTreeMap<String, K8sQuantity>>,
    ) -> Result<Resources, AdapterError> {
        let Some(list) = list else {
            return Ok(Resources::default());
        };
        Resources::parse(list.iter().map(|(k, v)| (k.as_str(), v.0.as_str())))
            .map_err(|e| self.err(field, e.to_string()))
    }
}

fn labels(map: Option<&BTreeMap<String, String>>) -> Labels {
    map.into_iter()
        .flatten()
        .map(|(k, v)| (Arc::from(k.as_str()), Arc::from(v.as_str())))
        .collect()
}

/// Converts a core/v1 taint.
pub fn taint(taint: &core::Taint) -> Result<Taint, AdapterError> {
    let effect: TaintEffect =
        taint
            .effect
            .parse()
            .map_err(|e: crate::taints::ParseTaintError| AdapterError {
                object: format!("taint {}", taint.key),
                field: "effect".into(),
                message: e.to_string(),
            })?;
    Ok(Taint {
        key: taint.key.clone(),
        value: taint.value.clone().unwrap_or_default(),
        effect,
    })
}

/// Converts a core/v1 Pod.
pub fn pod(pod: &core::Pod) -> Result<Pod, AdapterError> {
    let meta = &pod.metadata;
    let namespace = meta.namespace.clone().unwrap_or_else(|| "default".into());
    let name = meta.name.clone().unwrap_or_default();
    let ctx = Ctx {
        object: format!("Pod {namespace}/{name}"),
    };
    let spec = pod.spec.clone().unwrap_or_default();
    let mut resources = PodResources {
        containers: Vec::new(),
        init_containers: Vec::new(),
        overhead: ctx.resources("spec.overhead", spec.overhead.as_ref())?,
        pod_level_requests: ctx.resources(
            "spec.resources.requests",
            spec.resources.as_ref().and_then(|r| r.requests.as_ref()),
        )?,
    };
    let mut host_ports = Vec::new();
    for (i, c) in spec.containers.iter().enumerate() {
        let field = format!("spec.containers[{i}].resources.requests");
        resources.containers.push(ctx.resources(
            &field,
            c.resources.as_ref().and_then(|r| r.requests.as_ref()),
        )?);
        host_ports.extend(container_host_ports(c));
    }
    for (i, c) in spec.init_containers.iter().flatten().enumerate() {
        let field = format!("spec.initContainers[{i}].resources.requests");
        let requests = ctx.resources(
            &field,
            c.resources.as_ref().and_then(|r| r.requests.as_ref()),
        )?;
        if c.restart_policy.as_deref() == Some("Always") {
            resources
                .init_containers
                .push(InitContainer::sidecar(requests));
            host_ports.extend(container_host_ports(c));
        } else {
            resources
                .init_containers
                .push(InitContainer::regular(requests));
        }
    }
    let affinity = spec.affinity.clone().unwrap_or_default();
    let node_affinity = affinity.node_affinity.unwrap_or_default();
    let mut required_node_affinity = Vec::new();
    if let Some(required) = node_affinity.required_during_scheduling_ignored_during_execution {
        for (i, term) in required.node_selector_terms.iter().enumerate() {
            let field = format!(
                "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[{i}]"
            );
            required_node_affinity.push(node_selector_term(&ctx, &field, term)?);
        }
    }
    let mut preferred_node_affinity = Vec::new();
    for (i, p) in node_affinity
        .preferred_during_scheduling_ignored_during_execution
        .iter()
        .flatten()
        .enumerate()
    {
        let field = format!(
            "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[{i}].preference"
        );
        preferred_node_affinity.push(WeightedNodeSelectorTerm {
            weight: p.weight,
            term: node_selector_term(&ctx, &field, &p.preference)?,
        });
    }
    let pod_affinity = affinity.pod_affinity.map(|a| {
        affinity_terms(
            &ctx,
            "spec.affinity.podAffinity",
            a.required_during_scheduling_ignored_during_execution
                .as_deref(),
            a.preferred_during_scheduling_ignored_during_execution
                .as_deref(),
        )
    });
    let pod_anti_affinity = affinity.pod_anti_affinity.map(|a| {
        affinity_terms(
            &ctx,
            "spec.affinity.podAntiAffinity",
            a.required_during_scheduling_ignored_during_execution
                .as_deref(),
            a.preferred_during_scheduling_ignored_during_execution
                .as_deref(),
        )
    });
    let mut topology_spread_constraints = Vec::new();
    for (i, c) in spec
        .topology_spread_constraints
        .iter()
        .flatten()
        .enumerate()
    {
        topology_spread_constraints.push(topology_spread(&ctx, i, c)?);
    }
    let mut tolerations = Vec::new();
    for (i, t) in spec.tolerations.iter().flatten().enumerate() {
        tolerations.push(toleration(&ctx, i, t)?);
    }
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    Ok(Pod {
        uid: Arc::from(
            meta.uid
                .clone()
                .unwrap_or_else(|| format!("{namespace}/{name}")),
        ),
        namespace: Arc::from(namespace.as_str()),
        name: Arc::from(name.as_str()),
        labels: labels(meta.labels.as_ref()),
        creation_timestamp: meta
            .creation_timestamp
            .as_ref()
            .map_or(0, |t| t.0.as_second()),
        requests: resources.scheduling_requests(),
        node_selector: labels(spec.node_selector.as_ref()),
        required_node_affinity,
        preferred_node_affinity,
        tolerations,
        topology_spread_constraints,
        pod_affinity: pod_affinity.transpose()?.unwrap_or_default(),
        pod_anti_affinity: pod_anti_affinity.transpose()?.unwrap_or_default(),
        host_ports,
        node_name: spec
            .node_name
            .as_deref()
            .filter(|n| !n.is_empty())
            .map(Arc::from),
        terminal_or_terminating: matches!(phase, Some("Succeeded" | "Failed"))
            || meta.deletion_timestamp.is_some(),
        owned_by_daemonset: meta
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.kind == "DaemonSet" && o.api_version == "apps/v1"),
        placeholder: false,
    })
}

fn container_host_ports(c: &core::Container) -> impl Iterator<Item = HostPort> + '_ {
    c.ports
        .iter()
        .flatten()
        .filter(|p| p.host_port.is_some_and(|h| h != 0))
        .map(|p| HostPort {
            ip: Arc::from(
                p.host_ip
                    .as_deref()
                    .filter(|ip| !ip.is_empty())
                    .unwrap_or("0.0.0.0"),
            ),
            port: p.host_port.unwrap_or_default(),
            protocol: Arc::from(p.protocol.as_deref().unwrap_or("TCP")),
        })
}

fn node_selector_term(
    ctx: &Ctx,
    field: &str,
    term: &core::NodeSelectorTerm,
) -> Result<NodeSelectorTerm, AdapterError> {
    if term.match_fields.as_ref().is_some_and(|f| !f.is_empty()) {
        return Err(ctx.err(
            format!("{field}.matchFields"),
            "matchFields are not supported",
        ));
    }
    term.match_expressions
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, e)| {
            let operator: Operator = e.operator.parse().map_err(|_| {
                ctx.err(
                    format!("{field}.matchExpressions[{i}].operator"),
                    format!("unsupported operator {:?}", e.operator),
                )
            })?;
            Ok(SelectorRequirement::new(
                e.key.as_str(),
                operator,
                e.values.iter().flatten().map(String::as_str),
            ))
        })
        .collect()
}

fn label_selector(
    ctx: &Ctx,
    field: &str,
    selector: &meta::LabelSelector,
) -> Result<LabelSelector, AdapterError> {
    let mut out = LabelSelector {
        match_labels: labels(selector.match_labels.as_ref()).into_iter().collect(),
        match_expressions: Vec::new(),
    };
    for (i, e) in selector.match_expressions.iter().flatten().enumerate() {
        let operator = match e.operator.as_str() {
            "In" => SelectorOperator::In,
            "NotIn" => SelectorOperator::NotIn,
            "Exists" => SelectorOperator::Exists,
            "DoesNotExist" => SelectorOperator::DoesNotExist,
            other => {
                return Err(ctx.err(
                    format!("{field}.matchExpressions[{i}].operator"),
                    format!("unsupported label selector operator {other:?}"),
                ));
            }
        };
        out.match_expressions.push(SelectorExpression {
            key: Arc::from(e.key.as_str()),
            operator,
            values: e
                .values
                .iter()
                .flatten()
                .map(|v| Arc::from(v.as_str()))
                .collect(),
        });
    }
    Ok(out)
}

fn affinity_term(
    ctx: &Ctx,
    field: &str,
    t: &core::PodAffinityTerm,
) -> Result<PodAffinityTerm, AdapterError> {
    Ok(PodAffinityTerm {
        label_selector: t
            .label_selector
            .as_ref()
            .map(|s| label_selector(ctx, &format!("{field}.labelSelector"), s))
            .transpose()?,
        namespaces: t
            .namespaces
            .iter()
            .flatten()
            .map(|n| Arc::from(n.as_str()))
            .collect(),
        namespace_selector: t
            .namespace_selector
            .as_ref()
            .map(|s| label_selector(ctx, &format!("{field}.namespaceSelector"), s))
            .transpose()?,
        topology_key: Arc::from(t.topology_key.as_str()),
    })
}

fn affinity_terms(
    ctx: &Ctx,
    field: &str,
    required: Option<&[core::PodAffinityTerm]>,
    preferred: Option<&[core::WeightedPodAffinityTerm]>,
) -> Result<PodAffinityTerms, AdapterError> {
    let mut terms = PodAffinityTerms::default();
    for (i, t) in required.into_iter().flatten().enumerate() {
        let f = format!("{field}.requiredDuringSchedulingIgnoredDuringExecution[{i}]");
        terms.required.push(affinity_term(ctx, &f, t)?);
    }
    for (i, t) in preferred.into_iter().flatten().enumerate() {
        let f =
            format!("{field}.preferredDuringSchedulingIgnoredDuringExecution[{i}].podAffinityTerm");
        terms.preferred.push(WeightedPodAffinityTerm {
            weight: t.weight,
            term: affinity_term(ctx, &f, &t.pod_affinity_term)?,
        });
    }
    Ok(terms)
}

fn topology_spread(
    ctx: &Ctx,
    i: usize,
    c: &core::TopologySpreadConstraint,
) -> Result<TopologySpreadConstraint, AdapterError> {
    let field = format!("spec.topologySpreadConstraints[{i}]");
    let policy = |name: &str, value: Option<&str>, default| match value {
        None => Ok(default),
        Some("Honor") => Ok(NodeInclusionPolicy::Honor),
        Some("Ignore") => Ok(NodeInclusionPolicy::Ignore),
        Some(other) => Err(ctx.err(
            format!("{field}.{name}"),
            format!("unknown policy {other:?}"),
        )),
    };
    Ok(TopologySpreadConstraint {
        max_skew: c.max_skew,
        topology_key: Arc::from(c.topology_key.as_str()),
        when_unsatisfiable: match c.when_unsatisfiable.as_str() {
            "DoNotSchedule" => WhenUnsatisfiable::DoNotSchedule,
            "ScheduleAnyway" => WhenUnsatisfiable::ScheduleAnyway,
            other => {
                return Err(ctx.err(
                    format!("{field}.whenUnsatisfiable"),
                    format!("unknown value {other:?}"),
                ));
            }
        },
        label_selector: c
            .label_selector
            .as_ref()
            .map(|s| label_selector(ctx, &format!("{field}.labelSelector"), s))
            .transpose()?,
        min_domains: c.min_domains,
        node_affinity_policy: policy(
            "nodeAffinityPolicy",
            c.node_affinity_policy.as_deref(),
            NodeInclusionPolicy::Honor,
        )?,
        node_taints_policy: policy(
            "nodeTaintsPolicy",
            c.node_taints_policy.as_deref(),
            NodeInclusionPolicy::Ignore,
        )?,
        match_label_keys: c
            .match_label_keys
            .iter()
            .flatten()
            .map(|k| Arc::from(k.as_str()))
            .collect(),
    })
}

fn toleration(ctx: &Ctx, i: usize, t: &core::Toleration) -> Result<Toleration, AdapterError> {
    let field = format!("spec.tolerations[{i}]");
    let operator: TolerationOperator = t.operator.as_deref().unwrap_or("").parse().map_err(
        |e: crate::taints::ParseTaintError| ctx.err(format!("{field}.operator"), e.to_string()),
    )?;
    let effect = match t.effect.as_deref() {
        None | Some("") => None,
        Some(effect) => Some(
            effect
                .parse::<TaintEffect>()
                .map_err(|e| ctx.err(format!("{field}.effect"), e.to_string()))?,
        ),
    };
    Ok(Toleration {
        key: t.key.clone().unwrap_or_default(),
        operator,
        value: t.value.clone().unwrap_or_default(),
        effect,
        toleration_seconds: t.toleration_seconds,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::ResourceName;

    fn pod_from(json: serde_json::Value) -> core::Pod {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn requests_follow_pod_requests_with_sidecars_overhead_and_one_pod() {
        let p = pod_from(serde_json::json!({
            "metadata": {"name": "web", "namespace": "shop", "uid": "u1"},
            "spec": {
                "containers": [
                    {"name": "a", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
                    {"name": "b", "resources": {"requests": {"cpu": "250m"}}}
                ],
                "initContainers": [
                    {"name": "init", "resources": {"requests": {"cpu": "2"}}},
                    {"name": "proxy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "100m"}}}
                ],
                "overhead": {"cpu": "50m"}
            }
        }));
        let pod = pod(&p).unwrap();
        // max(app 750m + sidecar 100m, init 2) = 2, + overhead 50m.
        assert_eq!(
            pod.requests.get_or_zero(&ResourceName::CPU).to_string(),
            "2050m"
        );
        assert_eq!(
            pod.requests.get_or_zero(&ResourceName::MEMORY).to_string(),
            "1Gi"
        );
        assert_eq!(
            pod.requests.get_or_zero(&ResourceName::PODS).to_string(),
            "1"
        );
        assert_eq!(pod.key(), "shop/web");
    }

    #[test]
    fn node_affinity_tolerations_spread_and_ports_are_read() {
        let p = pod_from(serde_json::json!({
            "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "x"}]},
            "spec": {
                "containers": [{"name": "a", "ports": [{"containerPort": 80, "hostPort": 8080}, {"containerPort": 81}]}],
                "nodeSelector": {"kubernetes.io/arch": "arm64"},
                "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}, {"operator": "Exists"}],
                "topologySpreadConstraints": [{
                    "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                    "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {"matchLabels": {"app": "web"}}
                }],
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}]}
                        ]},
                        "preferredDuringSchedulingIgnoredDuringExecution": [
                            {"weight": 10, "preference": {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a"]}]}}
                        ]
                    },
                    "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                        {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]}}
                    ]}
                }
            }
        }));
        let pod = pod(&p).unwrap();
        assert!(pod.owned_by_daemonset);
        assert_eq!(pod.host_ports.len(), 1);
        assert_eq!(&*pod.host_ports[0].ip, "0.0.0.0");
        assert_eq!(&*pod.host_ports[0].protocol, "TCP");
        assert_eq!(pod.tolerations.len(), 2);
        assert_eq!(pod.tolerations[1].effect, None);
        let tsc = &pod.topology_spread_constraints[0];
        assert_eq!(tsc.when_unsatisfiable, WhenUnsatisfiable::ScheduleAnyway);
        assert_eq!(tsc.node_affinity_policy, NodeInclusionPolicy::Honor);
        assert_eq!(tsc.node_taints_policy, NodeInclusionPolicy::Ignore);
        assert_eq!(pod.pod_anti_affinity.required.len(), 1);
        let strict = pod.strict_requirements().unwrap();
        assert!(strict.get("karpenter.sh/capacity-type").is_some());
        assert!(strict.get("topology.kubernetes.io/zone").is_none());
        let preferred = pod.requirements(true).unwrap();
        assert!(preferred.get("topology.kubernetes.io/zone").is_some());
    }

    #[test]
    fn match_fields_are_an_error_naming_the_pod_and_field() {
        let p = pod_from(serde_json::json!({
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"containers": [], "affinity": {"nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
                ]}}}}
        }));
        let err = pod(&p).unwrap_err();
        assert_eq!(err.object, "Pod default/web");
        assert!(
            err.field.ends_with("nodeSelectorTerms[0].matchFields"),
            "{err}"
        );
    }

    #[test]
    fn bad_quantities_and_operators_are_errors_not_panics() {
        let p = pod_from(serde_json::json!({
            "metadata": {"name": "web"},
            "spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "lots"}}}]}
        }));
        assert!(pod(&p).unwrap_err().field.contains("containers[0]"));
        let p = pod_from(serde_json::json!({
            "metadata": {"name": "web"},
            "spec": {"containers": [], "tolerations": [{"operator": "Sometimes"}]}
        }));
        assert!(
            pod(&p)
                .unwrap_err()
                .field
                .contains("tolerations[0].operator")
        );
    }

    #[test]
    fn terminal_and_terminating_pods_are_flagged() {
        let p = pod_from(serde_json::json!({
            "metadata": {"name": "done"}, "spec": {"containers": []}, "status": {"phase": "Succeeded"}
        }));
        assert!(pod(&p).unwrap().terminal_or_terminating);
        let p = pod_from(serde_json::json!({
            "metadata": {"name": "going", "deletionTimestamp": "2026-01-01T00:00:00Z"}, "spec": {"containers": []}
        }));
        assert!(pod(&p).unwrap().terminal_or_terminating);
    }

    #[test]
    fn taints_convert_and_reject_unknown_effects() {
        let t = core::Taint {
            key: "k".into(),
            value: None,
            effect: "NoExecute".into(),
            time_added: None,
        };
        assert_eq!(taint(&t).unwrap().effect, TaintEffect::NoExecute);
        let t = core::Taint {
            key: "k".into(),
            value: None,
            effect: "Sometimes".into(),
            time_added: None,
        };
        assert!(taint(&t).is_err());
    }
}
