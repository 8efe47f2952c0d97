//! Pure decisions about a terminating Node (spec §4.8 "Node finalizer").
//!
//! Responsibility: whether the Node is ours to terminate (deleting, with our finalizer), its
//! readiness, the NodeClaim with its providerID, the termination time from the NodeClaim's
//! annotation, the taint-and-label merge patch, the finalizer-removal JSON patch and the
//! `pods_drained` reason.
//! Inputs: a Node and NodeClaims. Outputs: values and patch bodies (JSON).

use api::NodeClaim;
use api::common::ConditionStatus;
use api::well_known::annotations::NODECLAIM_TERMINATION_TIMESTAMP;
use api::well_known::conditions::DISRUPTION_REASON;
use api::well_known::finalizers::TERMINATION;
use api::well_known::labels::EXCLUDE_FROM_EXTERNAL_LOAD_BALANCERS;
use api::well_known::taints::DISRUPTED;
use cloudprovider::types::normalize_provider_id;
use k8s_openapi::api::core::v1::{Node, Taint};
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

/// The value of [`EXCLUDE_FROM_EXTERNAL_LOAD_BALANCERS`] termination sets.
pub const EXCLUDE_VALUE: &str = "karpenter";
/// The `pods_drained` reason when the NodeClaim has no `DisruptionReason`.
pub const FORCEFUL_TERMINATION: &str = "Forceful Termination";

/// The Node is deleting and still carries our finalizer.
#[must_use]
pub fn is_terminating(node: &Node) -> bool {
    node.metadata.deletion_timestamp.is_some() && finalizer_index(node).is_some()
}

/// Where our finalizer sits in `metadata.finalizers`.
#[must_use]
pub fn finalizer_index(node: &Node) -> Option<usize> {
    node.metadata
        .finalizers
        .as_ref()?
        .iter()
        .position(|f| f == TERMINATION)
}

/// The Node's `Ready` condition is `True`.
#[must_use]
pub fn is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

/// The Node's providerID (`""` when unset).
#[must_use]
pub fn provider_id(node: &Node) -> &str {
    node.spec
        .as_ref()
        .and_then(|s| s.provider_id.as_deref())
        .unwrap_or_default()
}

/// The one NodeClaim whose `status.providerID` equals the Node's (normalised); none when there
/// are none or several, or the Node has no providerID.
#[must_use]
pub fn node_claim_of<'a, I>(node: &Node, node_claims: I) -> Option<&'a NodeClaim>
where
    I: IntoIterator<Item = &'a NodeClaim>,
{
    let wanted = normalize_provider_id(provider_id(node));
    if wanted.is_empty() {
        return None;
    }
    let mut matching = node_claims.into_iter().filter(|nc| {
        nc.status
            .as_ref()
            .and_then(|s| s.provider_id.as_deref())
            .is_some_and(|p| normalize_provider_id(p) == wanted)
    });
    let first = matching.next()?;
    matching.next().is_none().then_some(first)
}

/// The NodeClaim's termination time (`karpenter.sh/nodeclaim-termination-timestamp`), if set
/// and valid RFC 3339.
#[must_use]
pub fn termination_time(node_claim: Option<&NodeClaim>) -> Option<Timestamp> {
    node_claim?
        .metadata
        .annotations
        .as_ref()?
        .get(NODECLAIM_TERMINATION_TIMESTAMP)?
        .parse()
        .ok()
}

/// The `pods_drained` reason: the NodeClaim's True `DisruptionReason` reason, else
/// [`FORCEFUL_TERMINATION`].
#[must_use]
pub fn drain_reason(node_claim: Option<&NodeClaim>) -> String {
    node_claim
        .and_then(|nc| nc.status.as_ref()?.conditions.as_ref())
        .into_iter()
        .flatten()
        .find(|c| c.type_ == DISRUPTION_REASON && c.status == ConditionStatus::True)
        .map_or_else(|| FORCEFUL_TERMINATION.to_owned(), |c| c.reason.clone())
}

/// The merge patch that taints the Node `karpenter.sh/disrupted:NoSchedule` (replacing a taint
/// with that key and another effect) and labels it excluded from external load balancers,
/// guarded by its resourceVersion; `None` when both are in place.
#[must_use]
pub fn taint_patch(node: &Node) -> Option<Value> {
    let taints: Vec<Taint> = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    let tainted = taints
        .iter()
        .any(|t| t.key == DISRUPTED && t.effect == "NoSchedule");
    let labelled = node
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(EXCLUDE_FROM_EXTERNAL_LOAD_BALANCERS))
        .is_some_and(|v| v == EXCLUDE_VALUE);
    if tainted && labelled {
        return None;
    }
    let metadata = json!({
        "resourceVersion": node.metadata.resource_version,
        "labels": {EXCLUDE_FROM_EXTERNAL_LOAD_BALANCERS: EXCLUDE_VALUE},
    });
    if tainted {
        return Some(json!({ "metadata": metadata }));
    }
    let mut new: Vec<Taint> = taints.into_iter().filter(|t| t.key != DISRUPTED).collect();
    new.push(Taint {
        key: DISRUPTED.to_owned(),
        effect: "NoSchedule".to_owned(),
        time_added: None,
        value: None,
    });
    let patch = json!({"metadata": metadata, "spec": {"taints": new}});
    Some(patch)
}

/// The JSON patch removing exactly our finalizer (a `test` op guards its position); `None` when
/// it is not there.
#[must_use]
pub fn finalizer_removal(node: &Node) -> Option<Value> {
    let i = finalizer_index(node)?;
    let path = format!("/metadata/finalizers/{i}");
    Some(json!([
        {"op": "test", "path": path, "value": TERMINATION},
        {"op": "remove", "path": path},
    ]))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    fn node(extra: Value) -> Node {
        let mut body = json!({"metadata": {"name": "n", "resourceVersion": "7",
            "finalizers": ["other", TERMINATION]}, "spec": {"providerID": "AWS:///z/i-1/"}});
        if let (Some(t), Value::Object(e)) = (body.as_object_mut(), extra) {
            for (k, v) in e {
                t.insert(k, v);
            }
        }
        serde_json::from_value(body).unwrap()
    }

    fn nc(name: &str, provider_id: &str, extra: Value) -> NodeClaim {
        let mut body = json!({"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": name},
            "spec": {"nodeClassRef": {"group": "g", "kind": "K", "name": "n"}, "requirements": []},
            "status": {"providerID": provider_id}});
        if let (Some(t), Value::Object(e)) = (body.as_object_mut(), extra) {
            for (k, v) in e {
                t.insert(k, v);
            }
        }
        serde_json::from_value(body).unwrap()
    }

    #[test]
    fn the_node_claim_is_found_by_normalised_provider_id_and_must_be_unique() {
        let n = node(json!({}));
        let ncs = vec![
            nc("a", "aws:///z/i-1", json!({})),
            nc("b", "aws:///z/i-2", json!({})),
        ];
        assert_eq!(
            node_claim_of(&n, &ncs).unwrap().metadata.name.as_deref(),
            Some("a")
        );
        let dup = vec![
            nc("a", "aws:///z/i-1", json!({})),
            nc("c", "aws:///z/i-1/", json!({})),
        ];
        assert!(node_claim_of(&n, &dup).is_none());
        let bare = node(json!({"spec": {}}));
        assert!(node_claim_of(&bare, &[nc("x", "", json!({}))]).is_none());
    }

    #[test]
    fn termination_time_and_drain_reason_come_from_the_node_claim() {
        let with = nc(
            "a",
            "p",
            json!({"metadata": {"name": "a", "annotations": {
                NODECLAIM_TERMINATION_TIMESTAMP: "2030-01-01T00:00:00Z"}}}),
        );
        assert_eq!(
            termination_time(Some(&with)),
            Some("2030-01-01T00:00:00Z".parse().unwrap())
        );
        let bad = nc(
            "a",
            "p",
            json!({"metadata": {"name": "a", "annotations": {NODECLAIM_TERMINATION_TIMESTAMP: "soon"}}}),
        );
        assert_eq!(termination_time(Some(&bad)), None);
        assert_eq!(drain_reason(None), FORCEFUL_TERMINATION);
        let disrupted = nc(
            "a",
            "p",
            json!({"status": {"conditions": [{"type": DISRUPTION_REASON, "status": "True",
                "reason": "Underutilized", "message": "", "lastTransitionTime": "2030-01-01T00:00:00Z"}]}}),
        );
        assert_eq!(drain_reason(Some(&disrupted)), "Underutilized");
    }

    #[test]
    fn the_taint_patch_replaces_another_effect_and_carries_the_resource_version() {
        let n = node(json!({"spec": {"taints": [
            {"key": DISRUPTED, "effect": "NoExecute"}, {"key": "keep", "effect": "NoSchedule"}]}}));
        let patch = taint_patch(&n).unwrap();
        assert_eq!(patch["metadata"]["resourceVersion"], "7");
        assert_eq!(
            patch["metadata"]["labels"][EXCLUDE_FROM_EXTERNAL_LOAD_BALANCERS],
            EXCLUDE_VALUE
        );
        assert_eq!(
            patch["spec"]["taints"],
            json!([{"key": "keep", "effect": "NoSchedule"}, {"key": DISRUPTED, "effect": "NoSchedule"}])
        );
        let done = node(json!({
            "metadata": {"name": "n", "labels": {EXCLUDE_FROM_EXTERNAL_LOAD_BALANCERS: EXCLUDE_VALUE}},
            "spec": {"taints": [{"key": DISRUPTED, "effect": "NoSchedule"}]}}));
        assert_eq!(taint_patch(&done), None);
        let only_label =
            node(json!({"spec": {"taints": [{"key": DISRUPTED, "effect": "NoSchedule"}]}}));
        assert!(taint_patch(&only_label).unwrap().get("spec").is_none());
    }

    #[test]
    fn finalizer_removal_tests_its_position() {
        let n = node(json!({}));
        assert!(!is_terminating(&n));
        assert_eq!(
            finalizer_removal(&n).unwrap(),
            json!([{"op": "test", "path": "/metadata/finalizers/1", "value": TERMINATION},
                {"op": "remove", "path": "/metadata/finalizers/1"}])
        );
        let gone = node(json!({"metadata": {"name": "n", "finalizers": ["other"]}}));
        assert_eq!(finalizer_removal(&gone), None);
        let deleting = node(
            json!({"metadata": {"name": "n", "finalizers": [TERMINATION],
            "deletionTimestamp": "2030-01-01T00:00:00Z"}}),
        );
        assert!(is_terminating(&deleting));
        assert!(!is_ready(&deleting));
    }
}
