//! PodDisruptionBudget arithmetic, as kube-controller-manager's disruption controller does it.
//!
//! Responsibility: which pods a budget selects, which of them are healthy, and the budget's
//! status (`expectedPods`, `currentHealthy`, `desiredHealthy`, `disruptionsAllowed`,
//! `disruptedPods`, the `DisruptionAllowed` condition) from `minAvailable`/`maxUnavailable`
//! given as integers or percentages (percentages round up).
//! Inputs: a PDB and the pods of its namespace. Outputs: the PDB's status.
//! `expectedPods` is, as kube-controller-manager computes it, every selected pod with an
//! integer `minAvailable`, else the desired scale of the selected pods' controllers
//! (ReplicaSets count their Deployment's); pods without a controller are "unmanaged" and
//! ignored, and nothing may be disrupted while `expectedPods` is 0 — so a bare pod under a
//! `maxUnavailable` budget can never be evicted. Approximation: a controller that does not
//! exist (tests use made-up owners) counts its pods; kube-controller-manager fails the sync.

use serde_json::{Value, json};

use crate::object;

/// Whether a `metav1.LabelSelector` object selects these labels (policy/v1: an empty selector
/// selects every pod; a missing one selects none).
pub fn selector_matches(selector: Option<&Value>, pod: &Value) -> bool {
    let Some(sel) = selector else { return false };
    let labels = object::labels(pod);
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    let match_labels = sel
        .get("matchLabels")
        .and_then(Value::as_object)
        .is_none_or(|m| {
            m.iter()
                .all(|(k, v)| labels.get(k).and_then(Value::as_str) == v.as_str())
        });
    let exprs = sel
        .get("matchExpressions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let match_exprs = exprs.iter().all(|e| {
        let key = e.get("key").map(text).unwrap_or_default();
        let values: Vec<String> = e
            .get("values")
            .and_then(Value::as_array)
            .map(|a| a.iter().map(text).collect())
            .unwrap_or_default();
        let actual = labels.get(&key).and_then(Value::as_str);
        match e
            .get("operator")
            .and_then(Value::as_str)
            .unwrap_or_default()
        {
            "In" => actual.is_some_and(|a| values.iter().any(|v| v == a)),
            "NotIn" => actual.is_none_or(|a| values.iter().all(|v| v != a)),
            "Exists" => actual.is_some(),
            "DoesNotExist" => actual.is_none(),
            _ => false,
        }
    });
    match_labels && match_exprs
}

/// Whether a pod counts as healthy: Ready and not being deleted.
pub fn healthy(pod: &Value) -> bool {
    !object::is_deleting(pod)
        && object::get_path(pod, ".status.conditions")
            .and_then(Value::as_array)
            .is_some_and(|cs| {
                cs.iter().any(|c| {
                    c.get("type").and_then(Value::as_str) == Some("Ready")
                        && c.get("status").and_then(Value::as_str) == Some("True")
                })
            })
}

/// An int-or-percent scaled against `total`, rounding up.
fn scaled(v: &Value, total: i64) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => {
            let pct: i64 = s.strip_suffix('%')?.trim().parse().ok()?;
            Some((pct * total + 99) / 100)
        }
        _ => None,
    }
}

/// How many healthy pods the budget wants.
pub fn desired_healthy(pdb: &Value, expected: i64) -> i64 {
    let spec = pdb.get("spec");
    if let Some(min) = spec.and_then(|s| s.get("minAvailable")) {
        return scaled(min, expected).unwrap_or(expected);
    }
    if let Some(max) = spec.and_then(|s| s.get("maxUnavailable")) {
        return (expected - scaled(max, expected).unwrap_or(0)).max(0);
    }
    expected
}

/// The uid of a pod's controller, if it has one.
pub fn controller_uid(pod: &Value) -> Option<&str> {
    object::get_path(pod, ".metadata.ownerReferences")
        .and_then(Value::as_array)?
        .iter()
        .find(|o| o.get("controller").and_then(Value::as_bool) == Some(true))
        .and_then(|o| o.get("uid"))
        .and_then(Value::as_str)
}

/// The number of pods the budget expects: with an integer `minAvailable` every selected pod
/// (terminating ones too); otherwise the sum of the selected pods' controllers' desired
/// scale (`scale_of` a controller uid, `None` when the controller is unknown — then its
/// non-terminating pods count), pods without a controller being ignored.
fn expected_pods(pdb: &Value, selected: &[&&Value], scale_of: &dyn Fn(&str) -> Option<i64>) -> i64 {
    let int_min_available = pdb
        .pointer("/spec/minAvailable")
        .is_some_and(Value::is_number);
    if int_min_available {
        return i64::try_from(selected.len()).unwrap_or(i64::MAX);
    }
    let mut scales: std::collections::BTreeMap<&str, i64> = std::collections::BTreeMap::new();
    for pod in selected {
        let Some(uid) = controller_uid(pod) else {
            continue;
        };
        match scale_of(uid) {
            Some(n) => {
                scales.insert(uid, n);
            }
            None if !object::is_deleting(pod) => *scales.entry(uid).or_insert(0) += 1,
            None => {}
        }
    }
    scales.values().sum()
}

/// The budget's status given the pods of its namespace; `scale_of` gives a controller's
/// desired replicas by uid.
pub fn status(
    pdb: &Value,
    pods: &[&Value],
    old: Option<&Value>,
    scale_of: &dyn Fn(&str) -> Option<i64>,
) -> Value {
    let selector = pdb.get("spec").and_then(|s| s.get("selector"));
    let selected: Vec<&&Value> = pods
        .iter()
        .filter(|p| selector_matches(selector, p))
        .collect();
    let live: Vec<&&Value> = selected
        .iter()
        .copied()
        .filter(|p| !object::is_deleting(p))
        .collect();
    let expected = expected_pods(pdb, &selected, scale_of);
    // Pods evicted but not gone yet are not counted healthy.
    let disrupted: serde_json::Map<String, Value> = old
        .and_then(|o| o.get("disruptedPods"))
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter(|(name, _)| live.iter().any(|p| object::name(p) == name.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default();
    let current = i64::try_from(
        live.iter()
            .filter(|p| healthy(p) && !disrupted.contains_key(object::name(p)))
            .count(),
    )
    .unwrap_or(i64::MAX);
    let desired = desired_healthy(pdb, expected);
    let allowed = if expected <= 0 {
        0
    } else {
        (current - desired).max(0)
    };
    let generation = object::generation(pdb);
    let (cond_status, reason) = if allowed > 0 {
        ("True", "SufficientPods")
    } else {
        ("False", "InsufficientPods")
    };
    let since = old
        .and_then(|o| o.get("conditions"))
        .and_then(Value::as_array)
        .and_then(|cs| cs.first())
        .filter(|c| c.get("status").and_then(Value::as_str) == Some(cond_status))
        .and_then(|c| c.get("lastTransitionTime").cloned())
        .unwrap_or_else(|| json!(object::now_rfc3339()));
    let mut st = json!({
        "observedGeneration": generation,
        "disruptionsAllowed": allowed,
        "currentHealthy": current,
        "desiredHealthy": desired,
        "expectedPods": expected,
        "conditions": [{
            "type": "DisruptionAllowed", "status": cond_status, "reason": reason, "message": "",
            "observedGeneration": generation, "lastTransitionTime": since,
        }],
    });
    if !disrupted.is_empty() {
        object::as_map(&mut st).insert("disruptedPods".into(), Value::Object(disrupted));
    }
    st
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, ready: bool) -> Value {
        json!({"metadata": {"name": name, "labels": {"app": "web"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                    "name": "web", "uid": "u", "controller": true}]},
               "status": {"conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}})
    }

    fn pdb(spec: Value) -> Value {
        let mut spec = spec;
        spec["selector"] = json!({"matchLabels": {"app": "web"}});
        json!({"metadata": {"name": "b", "generation": 1}, "spec": spec})
    }

    #[test]
    fn min_available_and_max_unavailable() {
        let pods = [
            pod("a", true),
            pod("b", true),
            pod("c", true),
            pod("d", false),
        ];
        let refs: Vec<&Value> = pods.iter().collect();
        let st = status(&pdb(json!({"minAvailable": 2})), &refs, None, &|_| None);
        assert_eq!(
            (st["expectedPods"].as_i64(), st["currentHealthy"].as_i64()),
            (Some(4), Some(3))
        );
        assert_eq!(st["disruptionsAllowed"], 1);
        let st = status(&pdb(json!({"minAvailable": "50%"})), &refs, None, &|_| None);
        assert_eq!(st["desiredHealthy"], 2);
        let st = status(&pdb(json!({"maxUnavailable": 1})), &refs, None, &|_| None);
        assert_eq!(
            (
                st["desiredHealthy"].as_i64(),
                st["disruptionsAllowed"].as_i64()
            ),
            (Some(3), Some(0))
        );
        let st = status(&pdb(json!({"maxUnavailable": "30%"})), &refs, None, &|_| {
            None
        });
        assert_eq!(
            st["desiredHealthy"], 2,
            "30% of 4 rounds up to 2 unavailable"
        );
        assert_eq!(st["conditions"][0]["reason"], "SufficientPods");
    }

    #[test]
    fn bare_pods_count_only_for_an_integer_min_available() {
        let bare = json!({"metadata": {"name": "a", "labels": {"app": "web"}},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        let refs = [&bare];
        let st = status(&pdb(json!({"maxUnavailable": 1})), &refs, None, &|_| None);
        assert_eq!(
            (
                st["expectedPods"].as_i64(),
                st["disruptionsAllowed"].as_i64()
            ),
            (Some(0), Some(0)),
            "an unmanaged pod under maxUnavailable is never evictable"
        );
        let st = status(&pdb(json!({"minAvailable": 0})), &refs, None, &|_| None);
        assert_eq!(st["disruptionsAllowed"], 1);
    }

    #[test]
    fn selectors() {
        let p = pod("a", true);
        assert!(selector_matches(Some(&json!({})), &p));
        assert!(!selector_matches(None, &p));
        let expr =
            json!({"matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "x"]}]});
        assert!(selector_matches(Some(&expr), &p));
        let expr = json!({"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]});
        assert!(!selector_matches(Some(&expr), &p));
    }
}
