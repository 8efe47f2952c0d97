//! The NodeClaim writes of one reconcile, computed from the object as read, its edited copy and
//! the latest known version.
//!
//! Responsibility (pure): the sub-reconcilers edit one in-memory copy; this module turns the
//! difference into at most one metadata merge patch (only the label/annotation keys we changed,
//! so keys others wrote meanwhile survive) and one `/status` merge patch carrying
//! `metadata.resourceVersion` (compare-and-set). The status patch is *rebased* on the latest
//! known object (e.g. the metadata patch's response): only the fields and condition types this
//! reconcile changed are written over it, so another controller's condition written in between
//! is kept rather than reverted; a write in between that we did not see fails the
//! compare-and-set and the reconcile is retried.
//! Inputs: original, edited and latest NodeClaims. Outputs: JSON merge patches.

use std::collections::BTreeMap;

use api::common::Condition;
use api::{NodeClaim, NodeClaimStatus};
use kube::api::ObjectMeta;
use serde_json::{Map, Value, json};

/// The key-by-key merge patch turning `before` into `after` (removed keys → `null`), `None`
/// when equal.
#[must_use]
pub fn map_diff(
    before: Option<&BTreeMap<String, String>>,
    after: Option<&BTreeMap<String, String>>,
) -> Option<Map<String, Value>> {
    let empty = BTreeMap::new();
    let (before, after) = (before.unwrap_or(&empty), after.unwrap_or(&empty));
    let mut out = Map::new();
    for (k, v) in after {
        if before.get(k) != Some(v) {
            out.insert(k.clone(), Value::String(v.clone()));
        }
    }
    for k in before.keys() {
        if !after.contains_key(k) {
            out.insert(k.clone(), Value::Null);
        }
    }
    (!out.is_empty()).then_some(out)
}

/// The metadata merge patch (labels and annotations we changed), `None` when nothing changed.
#[must_use]
pub fn metadata_patch(before: &ObjectMeta, after: &ObjectMeta) -> Option<Value> {
    let mut metadata = Map::new();
    if let Some(labels) = map_diff(before.labels.as_ref(), after.labels.as_ref()) {
        metadata.insert("labels".into(), Value::Object(labels));
    }
    if let Some(annotations) = map_diff(before.annotations.as_ref(), after.annotations.as_ref()) {
        metadata.insert("annotations".into(), Value::Object(annotations));
    }
    (!metadata.is_empty()).then(|| json!({ "metadata": metadata }))
}

/// `latest` with the condition types that `edited` changed relative to `original` written over
/// it (types `edited` removed are removed), sorted by type.
#[must_use]
pub fn rebase_conditions(
    original: &[Condition],
    edited: &[Condition],
    latest: &[Condition],
) -> Vec<Condition> {
    let mut out: Vec<Condition> = latest.to_vec();
    for c in edited {
        if original.iter().any(|o| o == c) {
            continue;
        }
        match out.iter_mut().find(|l| l.type_ == c.type_) {
            Some(slot) => *slot = c.clone(),
            None => out.push(c.clone()),
        }
    }
    for o in original {
        if !edited.iter().any(|c| c.type_ == o.type_) {
            out.retain(|l| l.type_ != o.type_);
        }
    }
    out.sort_by(|a, b| a.type_.cmp(&b.type_));
    out
}

fn fields(status: Option<&NodeClaimStatus>) -> Map<String, Value> {
    match status.map(serde_json::to_value) {
        Some(Ok(Value::Object(map))) => map,
        _ => Map::new(),
    }
}

/// The `/status` merge patch writing what `edited` changed relative to `original` over
/// `latest`, with `latest`'s resourceVersion as precondition; `None` when `latest` already
/// holds it all.
#[must_use]
pub fn status_patch(
    original: Option<&NodeClaimStatus>,
    edited: &NodeClaimStatus,
    latest: &NodeClaim,
) -> Option<Value> {
    let o = fields(original);
    let e = fields(Some(edited));
    let l = fields(latest.status.as_ref());
    let mut status = Map::new();
    for key in o.keys().chain(e.keys()) {
        if key == "conditions" || status.contains_key(key) {
            continue;
        }
        let (ov, ev, lv) = (o.get(key), e.get(key), l.get(key));
        if ev != ov && ev != lv {
            status.insert(key.clone(), ev.cloned().unwrap_or(Value::Null));
        }
    }
    let none: &[Condition] = &[];
    let latest_conditions = latest
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or(none);
    let conditions = rebase_conditions(
        original
            .and_then(|s| s.conditions.as_deref())
            .unwrap_or(none),
        edited.conditions.as_deref().unwrap_or(none),
        latest_conditions,
    );
    if conditions != latest_conditions
        && let Ok(value) = serde_json::to_value(&conditions)
    {
        status.insert("conditions".into(), value);
    }
    (!status.is_empty()).then(|| {
        json!({
            "metadata": {"resourceVersion": latest.metadata.resource_version},
            "status": status,
        })
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;
    use api::common::ConditionStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;

    fn cond(t: &str, status: ConditionStatus, reason: &str) -> Condition {
        Condition {
            last_transition_time: Time(Timestamp::from_second(1).unwrap()),
            message: String::new(),
            observed_generation: Some(1),
            reason: reason.into(),
            status,
            type_: t.into(),
        }
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn only_changed_keys_are_patched() {
        let before = labels(&[("a", "1"), ("b", "2"), ("gone", "x")]);
        let after = labels(&[("a", "1"), ("b", "3"), ("new", "n")]);
        let diff = map_diff(Some(&before), Some(&after)).unwrap();
        assert_eq!(
            Value::Object(diff),
            json!({"b": "3", "new": "n", "gone": null})
        );
        assert_eq!(map_diff(Some(&before), Some(&before)), None);
        assert_eq!(map_diff(None, Some(&BTreeMap::new())), None);
    }

    #[test]
    fn metadata_patch_carries_labels_and_annotations() {
        let before = ObjectMeta::default();
        let after = ObjectMeta {
            labels: Some(labels(&[("l", "v")])),
            annotations: Some(labels(&[("a", "v")])),
            ..ObjectMeta::default()
        };
        assert_eq!(
            metadata_patch(&before, &after).unwrap(),
            json!({"metadata": {"labels": {"l": "v"}, "annotations": {"a": "v"}}})
        );
        assert_eq!(metadata_patch(&after, &after), None);
    }

    #[test]
    fn rebasing_keeps_conditions_others_wrote() {
        use ConditionStatus::{True, Unknown};
        let original = vec![cond("Launched", Unknown, "X")];
        let edited = vec![cond("Launched", True, "Launched")];
        let latest = vec![
            cond("Drained", True, "Drained"),
            cond("Launched", Unknown, "X"),
        ];
        let out = rebase_conditions(&original, &edited, &latest);
        assert_eq!(
            out,
            vec![
                cond("Drained", True, "Drained"),
                cond("Launched", True, "Launched")
            ]
        );
        // Types we removed are removed; types we did not touch keep the latest value.
        let out = rebase_conditions(&original, &[], &latest);
        assert_eq!(out, vec![cond("Drained", True, "Drained")]);
    }

    fn claim(status: NodeClaimStatus) -> NodeClaim {
        let mut nc: NodeClaim = serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": "nc", "resourceVersion": "7"},
            "spec": {"nodeClassRef": {"group": "g", "kind": "K", "name": "n"}, "requirements": []},
        }))
        .unwrap();
        nc.status = Some(status);
        nc
    }

    #[test]
    fn status_patch_writes_our_fields_with_the_latest_resource_version() {
        let original = NodeClaimStatus::default();
        let edited = NodeClaimStatus {
            provider_id: Some("sim:///z/m".into()),
            conditions: Some(vec![cond("Launched", ConditionStatus::True, "Launched")]),
            ..NodeClaimStatus::default()
        };
        let latest = claim(NodeClaimStatus {
            image_id: Some("img".into()),
            ..NodeClaimStatus::default()
        });
        let patch = status_patch(Some(&original), &edited, &latest).unwrap();
        assert_eq!(patch["metadata"]["resourceVersion"], "7");
        assert_eq!(patch["status"]["providerID"], "sim:///z/m");
        assert_eq!(patch["status"]["conditions"][0]["type"], "Launched");
        assert!(patch["status"].get("imageID").is_none());
        // Nothing to write when the latest already holds it.
        let latest = claim(edited.clone());
        assert_eq!(status_patch(Some(&original), &edited, &latest), None);
    }
}
