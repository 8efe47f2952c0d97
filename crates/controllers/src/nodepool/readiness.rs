//! NodePool readiness conditions (spec §1.2).
//!
//! Responsibility: from a NodePool and the ClusterAPINodeClass its `nodeClassRef` names (if it
//! exists), compute the conditions the readiness controller writes:
//! - `ValidationSucceeded`: [`super::validation::validate`]; False `NodePoolValidationFailed`
//!   with the error text;
//! - `NodeClassReady`: a `nodeClassRef` that is not a `karpenter.cluster.x-k8s.io`
//!   `ClusterAPINodeClass`, or a missing NodeClass → False `NodeClassNotFound`; a NodeClass
//!   being deleted → False `NodeClassTerminating`; its `Ready` True → True; False → False with
//!   its reason and message; Unknown or absent → Unknown `NodeClassReadinessUnknown`;
//! - `Ready` (root, via [`ConditionSet`]) over [`DEPENDENTS`].
//!
//! Inputs: the NodePool, the NodeClass, the well-known labels, "now". Outputs: the edited
//! [`ConditionSet`] (whether anything changed is [`ConditionSet::changed`]). Pure.

use api::common::{ConditionStatus, Conditions};
use api::well_known::conditions::reasons::{
    NODE_CLASS_NOT_FOUND, NODE_CLASS_READINESS_UNKNOWN, NODE_CLASS_TERMINATING,
    NODEPOOL_VALIDATION_FAILED,
};
use api::well_known::conditions::{NODE_CLASS_READY, READY, VALIDATION_SUCCEEDED};
use api::{ClusterAPINodeClass, NodePool};
use k8s_openapi::jiff::Timestamp;
use scheduling::labels::WellKnownLabels;

use crate::conditions::ConditionSet;
use crate::provisioning::inputs::pools::{NODE_CLASS_GROUP, NODE_CLASS_KIND, node_class_of};

/// The dependents of a NodePool's `Ready`.
pub const DEPENDENTS: &[&str] = &[NODE_CLASS_READY, VALIDATION_SUCCEEDED];

/// The NodeClass name a NodePool's readiness depends on, if its `nodeClassRef` is ours.
#[must_use]
pub fn referenced_node_class(pool: &NodePool) -> Option<&str> {
    node_class_of(pool)
}

/// One condition's desired value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Desired {
    /// Status.
    pub status: ConditionStatus,
    /// Reason.
    pub reason: String,
    /// Message.
    pub message: String,
}

impl Desired {
    fn new(status: ConditionStatus, reason: &str, message: impl Into<String>) -> Self {
        Self {
            status,
            reason: reason.to_owned(),
            message: message.into(),
        }
    }
}

/// `NodeClassReady` of `pool`, given the NodeClass it names (`None`: not found).
#[must_use]
pub fn node_class_ready(pool: &NodePool, node_class: Option<&ClusterAPINodeClass>) -> Desired {
    let reference = &pool.spec.template.spec.node_class_ref;
    if referenced_node_class(pool).is_none() {
        return Desired::new(
            ConditionStatus::False,
            NODE_CLASS_NOT_FOUND,
            format!(
                "spec.template.spec.nodeClassRef: {}/{} is not a {NODE_CLASS_GROUP} \
                 {NODE_CLASS_KIND}",
                reference.group, reference.kind
            ),
        );
    }
    let Some(node_class) = node_class else {
        return Desired::new(
            ConditionStatus::False,
            NODE_CLASS_NOT_FOUND,
            format!("{NODE_CLASS_KIND} {:?} not found", reference.name),
        );
    };
    if node_class.metadata.deletion_timestamp.is_some() {
        return Desired::new(
            ConditionStatus::False,
            NODE_CLASS_TERMINATING,
            format!("{NODE_CLASS_KIND} {:?} is being deleted", reference.name),
        );
    }
    let ready = node_class
        .status
        .as_ref()
        .and_then(|s| s.conditions.condition(READY));
    match ready {
        Some(c) if c.status == ConditionStatus::True => {
            Desired::new(ConditionStatus::True, NODE_CLASS_READY, "")
        }
        Some(c) if c.status == ConditionStatus::False => {
            let reason = if c.reason.is_empty() {
                NODE_CLASS_READINESS_UNKNOWN
            } else {
                c.reason.as_str()
            };
            Desired::new(ConditionStatus::False, reason, c.message.clone())
        }
        other => Desired::new(
            ConditionStatus::Unknown,
            NODE_CLASS_READINESS_UNKNOWN,
            other.map(|c| c.message.clone()).unwrap_or_default(),
        ),
    }
}

/// `ValidationSucceeded` of `pool`.
#[must_use]
pub fn validation_succeeded(pool: &NodePool, well_known: &WellKnownLabels) -> Desired {
    match super::validation::validate(pool, well_known) {
        Ok(()) => Desired::new(ConditionStatus::True, VALIDATION_SUCCEEDED, ""),
        Err(e) => Desired::new(ConditionStatus::False, NODEPOOL_VALIDATION_FAILED, e),
    }
}

/// The pool's conditions with `ValidationSucceeded`, `NodeClassReady` and `Ready` brought up
/// to date; other condition types are kept.
#[must_use]
pub fn conditions(
    pool: &NodePool,
    node_class: Option<&ClusterAPINodeClass>,
    well_known: &WellKnownLabels,
    now: Timestamp,
) -> ConditionSet {
    let old = pool.status.as_ref().and_then(|s| s.conditions.as_deref());
    let mut set = ConditionSet::new(old, DEPENDENTS, pool.metadata.generation, now);
    for (type_, desired) in [
        (VALIDATION_SUCCEEDED, validation_succeeded(pool, well_known)),
        (NODE_CLASS_READY, node_class_ready(pool, node_class)),
    ] {
        set.set(type_, desired.status, &desired.reason, &desired.message);
    }
    set
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;
    use serde_json::{Value, json};

    fn pool(reference: Value, requirements: Value) -> NodePool {
        serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "metadata": {"name": "p", "generation": 3},
            "spec": {"template": {"spec": {
                "nodeClassRef": reference, "requirements": requirements}}},
        }))
        .unwrap()
    }

    fn ours() -> Value {
        json!({"group": "karpenter.cluster.x-k8s.io", "kind": "ClusterAPINodeClass",
            "name": "default"})
    }

    fn class(status: Value, deleting: bool) -> ClusterAPINodeClass {
        let mut metadata = json!({"name": "default"});
        if deleting {
            metadata["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        }
        serde_json::from_value(json!({
            "apiVersion": "karpenter.cluster.x-k8s.io/v1alpha1",
            "kind": "ClusterAPINodeClass",
            "metadata": metadata, "spec": {}, "status": status,
        }))
        .unwrap()
    }

    fn ready(status: &str, reason: &str) -> Value {
        json!({"conditions": [{"type": "Ready", "status": status, "reason": reason,
            "message": "m", "lastTransitionTime": "2026-01-01T00:00:00Z"}]})
    }

    fn now() -> Timestamp {
        Timestamp::from_second(1_000).unwrap()
    }

    #[test]
    fn a_ready_node_class_and_a_valid_pool_make_it_ready() {
        let c = class(ready("True", "Ready"), false);
        let set = conditions(
            &pool(ours(), json!([])),
            Some(&c),
            &WellKnownLabels::cluster_api(),
            now(),
        );
        assert!(set.is_true(READY));
        assert_eq!(set.get(READY).unwrap().observed_generation, Some(3));
    }

    #[test]
    fn node_class_states_map_to_reasons() {
        let p = pool(ours(), json!([]));
        let cases = [
            (None, ConditionStatus::False, NODE_CLASS_NOT_FOUND),
            (
                Some(class(ready("True", "Ready"), true)),
                ConditionStatus::False,
                NODE_CLASS_TERMINATING,
            ),
            (
                Some(class(ready("False", "NoValidMachineDeployments"), false)),
                ConditionStatus::False,
                "NoValidMachineDeployments",
            ),
            (
                Some(class(json!({}), false)),
                ConditionStatus::Unknown,
                NODE_CLASS_READINESS_UNKNOWN,
            ),
            (
                Some(class(ready("Unknown", "X"), false)),
                ConditionStatus::Unknown,
                NODE_CLASS_READINESS_UNKNOWN,
            ),
        ];
        for (c, status, reason) in cases {
            let d = node_class_ready(&p, c.as_ref());
            assert_eq!((d.status, d.reason.as_str()), (status, reason));
        }
    }

    #[test]
    fn a_foreign_node_class_ref_is_not_found_naming_the_field() {
        let p = pool(
            json!({"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}),
            json!([]),
        );
        let d = node_class_ready(&p, None);
        assert_eq!(d.reason, NODE_CLASS_NOT_FOUND);
        assert!(d.message.contains("nodeClassRef"), "{}", d.message);
    }

    #[test]
    fn an_invalid_pool_is_not_ready() {
        let c = class(ready("True", "Ready"), false);
        let p = pool(
            ours(),
            json!([{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["x"]}]),
        );
        let set = conditions(&p, Some(&c), &WellKnownLabels::cluster_api(), now());
        let v = set.get(VALIDATION_SUCCEEDED).unwrap();
        assert_eq!(v.status, ConditionStatus::False);
        assert_eq!(v.reason, NODEPOOL_VALIDATION_FAILED);
        assert_eq!(set.get(READY).unwrap().status, ConditionStatus::False);
    }
}
