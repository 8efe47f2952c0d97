//! What drain needs to know about a pod (spec §4.8 "Drain").
//!
//! Responsibility: pure predicates over core/v1 Pods — terminal, terminating, stuck terminating,
//! mirror, DaemonSet-owned, critical, tolerates `karpenter.sh/disrupted:NoSchedule`, evictable,
//! and the force-delete deadline rules — and the
//! drain plan: which pods are waited for and which are enqueued for eviction now (force-delete
//! eligible pods regardless of tier, otherwise only the first non-empty priority tier).
//! Do-not-disrupt itself is read by [`super::do_not_disrupt`].
//! Inputs: pods, the node's termination time, "now". Outputs: [`DrainPlan`] and booleans.

use std::time::Duration;

use api::well_known::taints::DISRUPTED;
use k8s_openapi::api::core::v1::{Pod, Toleration as K8sToleration};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use scheduling::taints::{Taint, TaintEffect, Toleration, TolerationOperator};

use super::do_not_disrupt::do_not_disrupt;

/// Annotation the kubelet puts on mirror pods of static pods.
pub const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";
/// Priority classes whose pods are drained last.
pub const CRITICAL_PRIORITY_CLASSES: [&str; 2] =
    ["system-cluster-critical", "system-node-critical"];

/// The pod's phase is Succeeded or Failed.
#[must_use]
pub fn is_terminal(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// The pod's deletion timestamp.
#[must_use]
pub fn deletion_time(pod: &Pod) -> Option<Timestamp> {
    pod.metadata.deletion_timestamp.as_ref().map(|t| t.0)
}

/// The pod is being deleted.
#[must_use]
pub fn is_terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

/// The pod has been deleting for longer than `stuck_after`.
#[must_use]
pub fn is_stuck_terminating(pod: &Pod, now: Timestamp, stuck_after: Duration) -> bool {
    deletion_time(pod).is_some_and(|t| elapsed(t, now) > stuck_after)
}

/// A mirror pod of a static pod (deleting it through the API does nothing).
#[must_use]
pub fn is_mirror(pod: &Pod) -> bool {
    pod.metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(MIRROR_ANNOTATION))
}

/// A DaemonSet controls the pod.
#[must_use]
pub fn is_daemon_set_pod(pod: &Pod) -> bool {
    pod.metadata.owner_references.iter().flatten().any(|o| {
        o.controller == Some(true) && o.kind == "DaemonSet" && o.api_version.starts_with("apps/")
    })
}

/// The pod's priority class is `system-cluster-critical` or `system-node-critical`.
#[must_use]
pub fn is_critical(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.priority_class_name.as_deref())
        .is_some_and(|c| CRITICAL_PRIORITY_CLASSES.contains(&c))
}

fn toleration(t: &K8sToleration) -> Option<Toleration> {
    let effect = match t.effect.as_deref() {
        None | Some("") => None,
        Some(e) => Some(e.parse::<TaintEffect>().ok()?),
    };
    Some(Toleration {
        key: t.key.clone().unwrap_or_default(),
        operator: t
            .operator
            .as_deref()
            .unwrap_or_default()
            .parse::<TolerationOperator>()
            .ok()?,
        value: t.value.clone().unwrap_or_default(),
        effect,
        toleration_seconds: t.toleration_seconds,
    })
}

/// The pod tolerates `karpenter.sh/disrupted:NoSchedule` (it would be rescheduled onto the
/// node anyway, so it is not drained).
#[must_use]
pub fn tolerates_disrupted(pod: &Pod) -> bool {
    let taint = Taint::new(DISRUPTED, "", TaintEffect::NoSchedule);
    pod.spec
        .as_ref()
        .and_then(|s| s.tolerations.as_ref())
        .into_iter()
        .flatten()
        .filter_map(toleration)
        .any(|t| t.tolerates(&taint))
}

/// Drain waits for this pod: not terminal, does not tolerate the disrupted taint, not stuck
/// terminating, not a mirror pod.
#[must_use]
pub fn is_drainable(pod: &Pod, now: Timestamp, stuck_after: Duration) -> bool {
    !is_terminal(pod)
        && !tolerates_disrupted(pod)
        && !is_stuck_terminating(pod, now, stuck_after)
        && !is_mirror(pod)
}

/// The eviction API may be asked about this pod (drainable and not do-not-disrupt).
#[must_use]
pub fn is_evictable(pod: &Pod, now: Timestamp) -> bool {
    !tolerates_disrupted(pod) && !is_mirror(pod) && !do_not_disrupt(pod).is_active(pod, now)
}

/// `now - since`, zero when `since` is in the future.
#[must_use]
pub fn elapsed(since: Timestamp, now: Timestamp) -> Duration {
    Duration::try_from(now.duration_since(since)).unwrap_or(Duration::ZERO)
}

/// Whether the pod must be deleted (not evicted) now because of the node's termination time:
/// a terminating pod whose deletion time lies after the deadline, or a live pod whose
/// `terminationGracePeriodSeconds` would run past the deadline.
#[must_use]
pub fn must_force_delete(pod: &Pod, deadline: Option<Timestamp>, now: Timestamp) -> bool {
    let Some(deadline) = deadline else {
        return false;
    };
    if let Some(deleting) = deletion_time(pod) {
        return deleting > deadline;
    }
    let Some(grace) = pod
        .spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds)
    else {
        return false;
    };
    deadline
        .checked_sub(SignedDuration::from_secs(grace))
        .ok()
        .is_none_or(|start| now > start)
}

/// The grace period of a forced deletion: the whole seconds left until the deadline, at least 1.
#[must_use]
pub fn force_delete_grace_seconds(deadline: Timestamp, now: Timestamp) -> i64 {
    deadline.duration_since(now).as_secs().max(1)
}

/// The drain priority tier of a pod (0 drains first).
#[must_use]
pub fn tier(pod: &Pod) -> usize {
    match (is_critical(pod), is_daemon_set_pod(pod)) {
        (false, false) => 0,
        (false, true) => 1,
        (true, false) => 2,
        (true, true) => 3,
    }
}

/// One drain pass's decision.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DrainPlan<'a> {
    /// Pods to delete now because of the termination deadline.
    pub force: Vec<&'a Pod>,
    /// Pods of the first non-empty tier to evict (those not already terminating).
    pub evict: Vec<&'a Pod>,
    /// How many pods drain still waits for (every drainable pod).
    pub waiting: usize,
}

/// Plans one drain pass over the pods bound to a node.
#[must_use]
pub fn plan_drain(
    pods: &[Pod],
    deadline: Option<Timestamp>,
    now: Timestamp,
    stuck_after: Duration,
) -> DrainPlan<'_> {
    let drainable: Vec<&Pod> = pods
        .iter()
        .filter(|p| is_drainable(p, now, stuck_after))
        .collect();
    let (force, rest): (Vec<&Pod>, Vec<&Pod>) = drainable
        .iter()
        .partition(|p| must_force_delete(p, deadline, now));
    let mut tiers: [Vec<&Pod>; 4] = Default::default();
    for pod in rest {
        if let Some(t) = tiers.get_mut(tier(pod)) {
            t.push(pod);
        }
    }
    let evict = tiers
        .into_iter()
        .find(|t| !t.is_empty())
        .unwrap_or_default()
        .into_iter()
        .filter(|p| !is_terminating(p))
        .collect();
    DrainPlan {
        force,
        evict,
        waiting: drainable.len(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;
    use serde_json::{Value, json};

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + secs).unwrap()
    }

    fn pod(name: &str, extra: Value) -> Pod {
        let mut body =
            json!({"metadata": {"name": name, "namespace": "default"}, "spec": {"containers": []}});
        merge(&mut body, extra);
        serde_json::from_value(body).unwrap()
    }

    fn merge(target: &mut Value, extra: Value) {
        match (target, extra) {
            (Value::Object(t), Value::Object(e)) => {
                for (k, v) in e {
                    merge(t.entry(k).or_insert(Value::Null), v);
                }
            }
            (t, e) => *t = e,
        }
    }

    fn ds() -> Value {
        json!({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet",
            "name": "d", "uid": "u", "controller": true}]}})
    }

    fn critical() -> Value {
        json!({"spec": {"priorityClassName": "system-node-critical"}})
    }

    fn names<'a>(pods: &[&'a Pod]) -> Vec<&'a str> {
        pods.iter()
            .map(|p| p.metadata.name.as_deref().unwrap())
            .collect()
    }

    #[test]
    fn drainable_excludes_terminal_tolerating_stuck_and_mirror_pods() {
        let stuck = Duration::from_secs(60);
        assert!(is_drainable(&pod("a", json!({})), at(0), stuck));
        assert!(!is_drainable(
            &pod("a", json!({"status": {"phase": "Succeeded"}})),
            at(0),
            stuck
        ));
        let tolerating = pod(
            "a",
            json!({"spec": {"tolerations": [{"key": DISRUPTED, "operator": "Exists"}]}}),
        );
        assert!(!is_drainable(&tolerating, at(0), stuck));
        let everything = pod(
            "a",
            json!({"spec": {"tolerations": [{"operator": "Exists"}]}}),
        );
        assert!(!is_drainable(&everything, at(0), stuck));
        let other_effect = pod(
            "a",
            json!({"spec": {"tolerations": [{"key": DISRUPTED, "operator": "Exists", "effect": "NoExecute"}]}}),
        );
        assert!(is_drainable(&other_effect, at(0), stuck));
        let deleting = pod(
            "a",
            json!({"metadata": {"deletionTimestamp": at(0).to_string()}}),
        );
        assert!(is_drainable(&deleting, at(60), stuck));
        assert!(!is_drainable(&deleting, at(61), stuck));
        let mirror = pod(
            "a",
            json!({"metadata": {"annotations": {MIRROR_ANNOTATION: "x"}}}),
        );
        assert!(!is_drainable(&mirror, at(0), stuck));
    }

    #[test]
    fn only_the_first_non_empty_tier_is_evicted() {
        let stuck = Duration::from_secs(60);
        let pods = vec![
            pod("critical-ds", merge_all([ds(), critical()])),
            pod("critical", critical()),
            pod("ds", ds()),
            pod("web", json!({})),
        ];
        let plan = plan_drain(&pods, None, at(0), stuck);
        assert_eq!(names(&plan.evict), ["web"]);
        assert_eq!(plan.waiting, 4);
        assert!(plan.force.is_empty());
        let plan = plan_drain(&pods[..3], None, at(0), stuck);
        assert_eq!(names(&plan.evict), ["ds"]);
        let plan = plan_drain(&pods[..2], None, at(0), stuck);
        assert_eq!(names(&plan.evict), ["critical"]);
        let plan = plan_drain(&pods[..1], None, at(0), stuck);
        assert_eq!(names(&plan.evict), ["critical-ds"]);
        assert_eq!(plan_drain(&[], None, at(0), stuck), DrainPlan::default());
    }

    #[test]
    fn a_terminating_pod_holds_back_later_tiers_but_is_not_enqueued() {
        let pods = vec![
            pod(
                "web",
                json!({"metadata": {"deletionTimestamp": at(0).to_string()}}),
            ),
            pod("ds", ds()),
        ];
        let plan = plan_drain(&pods, None, at(1), Duration::from_secs(60));
        assert!(plan.evict.is_empty());
        assert_eq!(plan.waiting, 2);
    }

    fn merge_all<const N: usize>(parts: [Value; N]) -> Value {
        let mut out = json!({});
        for p in parts {
            merge(&mut out, p);
        }
        out
    }

    #[test]
    fn force_deletion_follows_the_deadline() {
        let deadline = Some(at(100));
        let graceful = pod("a", json!({"spec": {"terminationGracePeriodSeconds": 30}}));
        assert!(!must_force_delete(&graceful, None, at(1000)));
        assert!(!must_force_delete(&graceful, deadline, at(70)));
        assert!(must_force_delete(&graceful, deadline, at(71)));
        let no_grace = pod("a", json!({}));
        assert!(!must_force_delete(&no_grace, deadline, at(99)));
        let late = pod(
            "a",
            json!({"metadata": {"deletionTimestamp": at(101).to_string()}}),
        );
        assert!(must_force_delete(&late, deadline, at(0)));
        let early = pod(
            "a",
            json!({"metadata": {"deletionTimestamp": at(100).to_string()}}),
        );
        assert!(!must_force_delete(&early, deadline, at(0)));
        assert_eq!(force_delete_grace_seconds(at(100), at(71)), 29);
        assert_eq!(force_delete_grace_seconds(at(100), at(200)), 1);

        let pods = vec![pod("ds", ds()), graceful.clone()];
        let plan = plan_drain(&pods, deadline, at(80), Duration::from_secs(60));
        assert_eq!(names(&plan.force), ["a"]);
        assert_eq!(names(&plan.evict), ["ds"]);
        assert_eq!(plan.waiting, 2);
    }
}
