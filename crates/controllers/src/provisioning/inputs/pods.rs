//! Which pods provisioning considers, and which of those it ignores (spec §3.3).
//!
//! Responsibility:
//! - [`provisionable`]: upstream's predicate — a `PodScheduled` condition with reason
//!   `Unschedulable`, no `spec.nodeName`, no `status.nominatedNodeName`, not owned by a
//!   DaemonSet (`apps/v1`) nor by a Node (mirror pods);
//! - [`is_pending`] with [`PendingPolicy::AllUnbound`]: the relaxed predicate of `plan`, for
//!   dumps that lack the condition (kube-scheduler never ran on them): every unbound,
//!   non-nominated, non-terminal, non-terminating pod not owned by a DaemonSet or Node;
//! - [`validate_pod`]: the conversion to the scheduler's pod plus the "ignored pod" checks —
//!   `karpenter.sh/nodepool DoesNotExist` (silently ignored: the pod avoids Karpenter nodes),
//!   nodeSelector entries and required node-affinity expressions that fail
//!   [`validate_requirement`] (restricted labels, bad operators/values), `matchFields` terms.
//!
//! Inputs: k8s-openapi Pods and the [`WellKnownLabels`]. Outputs: booleans, scheduler
//! [`Pod`]s or [`IgnoredPod`]s. PVC checks (item 3) need the volume objects and are not done
//! here yet.

use std::fmt;
use std::sync::Arc;

use k8s_openapi::api::core::v1 as core;
use scheduling::labels::{NODE_POOL, WellKnownLabels};
use scheduling::pod::Pod;
use scheduling::requirements::{Operator, validate_requirement};

/// Which unbound pods count as pending.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PendingPolicy {
    /// Upstream's predicate: kube-scheduler marked the pod `Unschedulable` (production).
    #[default]
    Unschedulable,
    /// Any unbound, non-terminal, non-terminating pod (for `plan` on dumps whose pods never
    /// met a kube-scheduler, so lack the `PodScheduled` condition).
    AllUnbound,
}

/// Whether `pod` is provisionable (spec §3.3): [`is_pending`] with
/// [`PendingPolicy::Unschedulable`].
#[must_use]
pub fn provisionable(pod: &core::Pod) -> bool {
    is_pending(pod, PendingPolicy::Unschedulable)
}

/// Whether `pod` waits for capacity under `policy`.
#[must_use]
pub fn is_pending(pod: &core::Pod, policy: PendingPolicy) -> bool {
    let bound = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty());
    let status = pod.status.as_ref();
    let nominated = status
        .and_then(|s| s.nominated_node_name.as_deref())
        .is_some_and(|n| !n.is_empty());
    if bound || nominated || owned_by_daemonset_or_node(pod) {
        return false;
    }
    match policy {
        PendingPolicy::Unschedulable => status
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .any(|c| c.type_ == "PodScheduled" && c.reason.as_deref() == Some("Unschedulable")),
        PendingPolicy::AllUnbound => {
            let phase = status.and_then(|s| s.phase.as_deref());
            !matches!(phase, Some("Succeeded" | "Failed"))
                && pod.metadata.deletion_timestamp.is_none()
        }
    }
}

fn owned_by_daemonset_or_node(pod: &core::Pod) -> bool {
    pod.metadata.owner_references.iter().flatten().any(|o| {
        (o.api_version == "apps/v1" && o.kind == "DaemonSet")
            || (o.api_version == "v1" && o.kind == "Node")
    })
}

/// Why a pending pod is left out of scheduling.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IgnoreReason {
    /// Its requirements contain `karpenter.sh/nodepool DoesNotExist`: it avoids Karpenter
    /// nodes on purpose (no event upstream).
    AvoidsKarpenter,
    /// Its node selector or affinity cannot be acted on (a `FailedScheduling` event upstream).
    Invalid(String),
}

impl fmt::Display for IgnoreReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::AvoidsKarpenter => write!(
                f,
                "pod requires {NODE_POOL} DoesNotExist: it does not want Karpenter-managed nodes"
            ),
            Self::Invalid(message) => write!(f, "ignoring pod: {message}"),
        }
    }
}

/// A pending pod that will not be scheduled, with the reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IgnoredPod {
    /// The pod's UID (`namespace/name` when it has none).
    pub uid: Arc<str>,
    /// `namespace/name`.
    pub pod: String,
    /// Why.
    pub reason: IgnoreReason,
}

/// Converts a pending pod for the scheduler, or says why it is ignored.
///
/// # Errors
/// [`IgnoredPod`] for the cases of spec §3.3 item 2 and for pods the engine cannot represent.
pub fn validate_pod(pod: &core::Pod, well_known: &WellKnownLabels) -> Result<Pod, IgnoredPod> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let key = format!("{namespace}/{name}");
    let ignored = |reason| IgnoredPod {
        uid: Arc::from(pod.metadata.uid.clone().unwrap_or_else(|| key.clone())),
        pod: key.clone(),
        reason,
    };
    let raw = validate_selectors(pod, well_known);
    let converted = match scheduling::k8s::pod(pod) {
        Ok(converted) => converted,
        Err(e) => {
            let message = raw.err().unwrap_or_else(|| e.to_string());
            return Err(ignored(IgnoreReason::Invalid(message)));
        }
    };
    if avoids_karpenter(&converted) {
        return Err(ignored(IgnoreReason::AvoidsKarpenter));
    }
    raw.map_err(|m| ignored(IgnoreReason::Invalid(m)))?;
    Ok(converted)
}

/// Whether the pod's requirements (preferences included, as upstream) hold
/// `karpenter.sh/nodepool DoesNotExist`.
fn avoids_karpenter(pod: &Pod) -> bool {
    pod.requirements(true).is_ok_and(|r| {
        r.get(NODE_POOL)
            .is_some_and(|req| req.operator() == Operator::DoesNotExist)
    })
}

/// nodeSelector entries and required node-affinity expressions; `matchFields` rejected.
fn validate_selectors(pod: &core::Pod, well_known: &WellKnownLabels) -> Result<(), String> {
    let Some(spec) = pod.spec.as_ref() else {
        return Ok(());
    };
    for (key, value) in spec.node_selector.iter().flatten() {
        validate_requirement(key, "In", std::slice::from_ref(value), None, well_known)
            .map_err(|e| format!("spec.nodeSelector[{key}]: {e}"))?;
    }
    let terms = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .map(|r| r.node_selector_terms.as_slice())
        .unwrap_or_default();
    for (t, term) in terms.iter().enumerate() {
        let field = format!(
            "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[{t}]"
        );
        if term.match_fields.as_ref().is_some_and(|f| !f.is_empty()) {
            return Err(format!(
                "{field}.matchFields: matchFields are not supported"
            ));
        }
        for (i, e) in term.match_expressions.iter().flatten().enumerate() {
            let values = e.values.as_deref().unwrap_or_default();
            validate_requirement(&e.key, &e.operator, values, None, well_known)
                .map_err(|err| format!("{field}.matchExpressions[{i}]: {err}"))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
