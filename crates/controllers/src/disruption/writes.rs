//! The writes disruption makes, as patches (pure).
//!
//! Responsibility:
//! - [`taint_patch`]: a JSON patch adding (or removing) `karpenter.sh/disrupted:NoSchedule` on
//!   a Node, replacing the taint list behind a `test` of the list as read (absent = `null`), so
//!   a concurrent change by the kubelet or another controller fails the patch instead of being
//!   overwritten; `None` when there is nothing to do;
//! - [`status_patch`]: a `/status` merge patch for a NodeClaim — its conditions edited by a
//!   closure (through [`ConditionSet`], upstream's condition conventions) and optionally
//!   `lastPodEventTime` — guarded by the resourceVersion read; `None` when nothing changes.
//!
//! Inputs: the objects as read. Outputs: patches.

use api::NodeClaim;
use api::well_known::conditions::{INITIALIZED, LAUNCHED, REGISTERED};
use api::well_known::taints::DISRUPTED;
use k8s_openapi::api::core::v1::{Node, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use crate::conditions::ConditionSet;

/// The NodeClaim's condition dependents (as the lifecycle writes them).
pub const NODE_CLAIM_DEPENDENTS: &[&str] = &[LAUNCHED, REGISTERED, INITIALIZED];

/// Whether the Node carries the disrupted taint (any effect).
#[must_use]
pub fn is_tainted(node: &Node) -> bool {
    taints(node).iter().any(|t| t.key == DISRUPTED)
}

fn taints(node: &Node) -> &[Taint] {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default()
}

/// Adds (`add`) or removes the disrupted taint; `None` when already so.
#[must_use]
pub fn taint_patch(node: &Node, add: bool) -> Option<Value> {
    let before = taints(node);
    let has = before
        .iter()
        .any(|t| t.key == DISRUPTED && t.effect == "NoSchedule");
    let other_effect = before
        .iter()
        .any(|t| t.key == DISRUPTED && t.effect != "NoSchedule");
    if !other_effect && add == has {
        return None;
    }
    let mut after: Vec<Taint> = before
        .iter()
        .filter(|t| t.key != DISRUPTED)
        .cloned()
        .collect();
    if add {
        after.push(Taint {
            key: DISRUPTED.into(),
            effect: "NoSchedule".into(),
            time_added: None,
            value: None,
        });
    }
    let read = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .map_or(Value::Null, |t| json!(t));
    let mut ops = vec![json!({"op": "test", "path": "/spec/taints", "value": read})];
    if after.is_empty() {
        ops.push(json!({"op": "remove", "path": "/spec/taints"}));
    } else {
        ops.push(json!({"op": "add", "path": "/spec/taints", "value": after}));
    }
    Some(Value::Array(ops))
}

/// The status patch for `nc`: conditions edited by `edit`, and `lastPodEventTime` raised to
/// `last_pod_event` when given and later than the stored one.
#[must_use]
pub fn status_patch(
    nc: &NodeClaim,
    now: Timestamp,
    last_pod_event: Option<Timestamp>,
    edit: impl FnOnce(&mut ConditionSet),
) -> Option<Value> {
    let status = nc.status.as_ref();
    let current = status.and_then(|s| s.conditions.as_deref());
    let mut set = ConditionSet::new(current, NODE_CLAIM_DEPENDENTS, nc.metadata.generation, now);
    let before: Vec<_> = set.conditions().to_vec();
    edit(&mut set);
    let mut fields = serde_json::Map::new();
    if set.changed() && set.conditions() != before.as_slice() {
        fields.insert("conditions".into(), json!(set.into_conditions()));
    }
    let stored = status
        .and_then(|s| s.last_pod_event_time.as_ref())
        .map(|t| t.0);
    if let Some(t) = last_pod_event
        && stored.is_none_or(|s| t > s)
    {
        fields.insert("lastPodEventTime".into(), json!(Time(t)));
    }
    (!fields.is_empty()).then(|| {
        json!({
            "metadata": {"resourceVersion": nc.metadata.resource_version},
            "status": fields,
        })
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;
    use api::common::ConditionStatus;
    use api::well_known::conditions::{CONSOLIDATABLE, DISRUPTION_REASON};

    fn node(taints: Value) -> Node {
        serde_json::from_value(json!({"metadata": {"name": "n"}, "spec": {"taints": taints}}))
            .unwrap()
    }

    #[test]
    fn the_taint_is_added_and_removed_behind_a_test_of_the_list_read() {
        let other = json!([{"key": "x", "effect": "NoExecute"}]);
        let p = taint_patch(&node(other.clone()), true).unwrap();
        assert_eq!(
            p[0],
            json!({"op": "test", "path": "/spec/taints", "value": other})
        );
        assert_eq!(p[1]["value"][1]["key"], DISRUPTED);
        assert_eq!(p[1]["value"][0]["key"], "x", "other taints stay");
        let tainted = node(
            json!([{"key": "x", "effect": "NoExecute"}, {"key": DISRUPTED, "effect": "NoSchedule"}]),
        );
        assert!(taint_patch(&tainted, true).is_none());
        let p = taint_patch(&tainted, false).unwrap();
        assert_eq!(p[1]["value"], other);
        let only = node(json!([{"key": DISRUPTED, "effect": "NoSchedule"}]));
        let p = taint_patch(&only, false).unwrap();
        assert_eq!(p[1], json!({"op": "remove", "path": "/spec/taints"}));
        let none: Node =
            serde_json::from_value(json!({"metadata": {"name": "n"}, "spec": {}})).unwrap();
        assert!(taint_patch(&none, false).is_none());
        let p = taint_patch(&none, true).unwrap();
        assert_eq!(p[0]["value"], Value::Null, "absent list tested as null");
        let wrong = node(json!([{"key": DISRUPTED, "effect": "NoExecute"}]));
        assert_eq!(
            taint_patch(&wrong, true).unwrap()[1]["value"][0]["effect"],
            "NoSchedule"
        );
    }

    #[test]
    fn status_patches_carry_the_resource_version_and_only_what_changed() {
        let mut nc: NodeClaim = serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": "c", "resourceVersion": "7"},
            "spec": {"nodeClassRef": {"group": "g", "kind": "k", "name": "n"}, "requirements": []},
            "status": {}
        }))
        .unwrap();
        let now = Timestamp::from_second(1_800_000_000).unwrap();
        let p = status_patch(&nc, now, None, |s| {
            s.set(
                DISRUPTION_REASON,
                ConditionStatus::True,
                "Underutilized",
                "Underutilized",
            );
        })
        .unwrap();
        assert_eq!(p["metadata"]["resourceVersion"], "7");
        let conditions = p["status"]["conditions"].as_array().unwrap();
        assert!(conditions.iter().any(|c| c["type"] == DISRUPTION_REASON));
        nc.status.as_mut().unwrap().conditions =
            Some(serde_json::from_value(json!(conditions)).unwrap());
        assert!(
            status_patch(&nc, now, None, |s| s.set(
                DISRUPTION_REASON,
                ConditionStatus::True,
                "Underutilized",
                "Underutilized"
            ))
            .is_none()
        );
        assert!(status_patch(&nc, now, None, |s| s.clear(CONSOLIDATABLE)).is_none());
        let p = status_patch(&nc, now, Some(now), |_| {}).unwrap();
        assert!(p["status"].get("conditions").is_none());
        assert!(p["status"]["lastPodEventTime"].is_string());
    }
}
