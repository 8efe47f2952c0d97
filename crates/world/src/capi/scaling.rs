//! MachineSet preflight holds and the scale-up conditions of MachineSets and
//! MachineDeployments, worded as Cluster API v1.14 words them.
//!
//! Responsibility: the pure rules, no I/O.
//! - [`preflight_hold`]: the failing preflight check a MachineSet's scale-up waits for (sim's
//!   [`annotations::PREFLIGHT_HOLD`] knob on the MachineSet, else on its MachineDeployment).
//!   CAPI's MachineSet controller runs its preflight checks (`ControlPlaneIsStable`,
//!   `KubernetesVersionSkew`, `KubeadmVersionSkew`, `ControlPlaneVersionSkew`) only when it is
//!   about to create Machines; while one fails it creates none, requeues, and reports it.
//! - [`machine_set_scaling_up`]: the MachineSet's v1beta2 `ScalingUp` condition
//!   (`setScalingUpCondition` of `machineset_controller_status.go`): `False`/`NotScalingUp`
//!   with no message while it has its replicas, else `True`/`ScalingUp` `Scaling up from N to M
//!   replicas`, followed by ` is blocked because:\n* <message>` per failing check.
//! - [`machines_created`]: its deprecated v1beta1 `MachinesCreated` condition: `False`,
//!   reason `PreflightCheckFailed`, severity `Error`, the messages joined by `; ` when a hold
//!   stopped the creates; `True` once it has its replicas; unchanged while it scales up freely
//!   (CAPI marks it only in those cases).
//! - [`deployment_scaling_up`]: the MachineDeployment's v1beta2 `ScalingUp` condition
//!   (`setScalingUpCondition` of `machinedeployment_status.go`): the same wording over the sum
//!   of its MachineSets' `status.replicas`. CAPI does **not** carry its MachineSets' preflight
//!   messages up: a held deployment only says `Scaling up from N to M replicas` (its own
//!   ` is blocked because <Template> does not exist` is for missing templates, not modelled).
//! - [`with_condition`]: a condition list with one condition set, the others kept (CAPI's
//!   patch helper owns only its own condition types).
//!
//! Inputs: MachineSet / MachineDeployment JSON, replica counts, hold messages. Outputs:
//! conditions as JSON.

use serde_json::{Value, json};

use super::phases::knob;
use crate::config::annotations;
use crate::objects::condition_with_status;
use sim::object;

/// v1beta2 `ScalingUp`.
pub const SCALING_UP: &str = "ScalingUp";
/// v1beta1 `MachinesCreated`.
pub const MACHINES_CREATED: &str = "MachinesCreated";
/// v1beta1 reason of a scale-up held by preflight checks.
pub const PREFLIGHT_CHECK_FAILED: &str = "PreflightCheckFailed";

/// The message of the preflight check that holds `ms`'s scale-up, if one does: its own
/// [`annotations::PREFLIGHT_HOLD`], else its MachineDeployment's; empty means none.
pub fn preflight_hold(ms: &Value, md: Option<&Value>) -> Option<String> {
    knob(ms, md, annotations::PREFLIGHT_HOLD).filter(|m| !m.trim().is_empty())
}

/// The condition of type `kind` in the list at `path` of `obj`.
pub fn previous<'a>(obj: &'a Value, path: &str, kind: &str) -> Option<&'a Value> {
    object::get_path(obj, path)
        .and_then(Value::as_array)?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(kind))
}

/// A v1beta2 condition of `obj` (keeping the previous transition time when its status did not
/// change), with `observedGeneration`, as CAPI's `conditions.Set` writes it.
fn v1beta2(obj: &Value, kind: &str, status: &str, reason: &str, message: &str) -> Value {
    let mut c = condition_with_status(
        previous(obj, ".status.conditions", kind),
        kind,
        status,
        reason,
        message,
    );
    object::as_map(&mut c).insert("observedGeneration".into(), json!(object::generation(obj)));
    c
}

/// `Scaling up from N to M replicas`, the first line CAPI gives both kinds.
fn scaling_up_message(current: i64, desired: i64) -> String {
    format!("Scaling up from {current} to {desired} replicas")
}

/// The MachineSet's v1beta2 `ScalingUp` condition for `current` Machines (deleting ones
/// included) against `desired`, the scale-up held by the `blocked` preflight messages.
pub fn machine_set_scaling_up(ms: &Value, current: i64, desired: i64, blocked: &[String]) -> Value {
    if current >= desired {
        return v1beta2(ms, SCALING_UP, "False", "NotScalingUp", "");
    }
    let mut message = scaling_up_message(current, desired);
    if !blocked.is_empty() {
        let list: Vec<String> = blocked.iter().map(|m| format!("* {m}")).collect();
        message.push_str(&format!(" is blocked because:\n{}", list.join("\n")));
    }
    v1beta2(ms, SCALING_UP, "True", SCALING_UP, &message)
}

/// The MachineDeployment's v1beta2 `ScalingUp` condition for `current` replicas (the sum of
/// its MachineSets' `status.replicas`) against `desired`.
pub fn deployment_scaling_up(md: &Value, current: i64, desired: i64) -> Value {
    if current >= desired {
        return v1beta2(md, SCALING_UP, "False", "NotScalingUp", "");
    }
    v1beta2(
        md,
        SCALING_UP,
        "True",
        SCALING_UP,
        &scaling_up_message(current, desired),
    )
}

/// Where a MachineSet keeps its deprecated v1beta1 conditions (v1beta2 shape).
pub const V1BETA1_CONDITIONS: &str = ".status.deprecated.v1beta1.conditions";

/// The MachineSet's v1beta1 `MachinesCreated` condition, or `None` to leave it as it is.
pub fn machines_created(
    ms: &Value,
    current: i64,
    desired: i64,
    blocked: &[String],
) -> Option<Value> {
    let previous = previous(ms, V1BETA1_CONDITIONS, MACHINES_CREATED);
    if current >= desired {
        // v1beta1 `MarkTrue`: no reason, severity or message.
        let mut c = condition_with_status(previous, MACHINES_CREATED, "True", "", "");
        let map = object::as_map(&mut c);
        map.remove("reason");
        map.remove("message");
        return Some(c);
    }
    if blocked.is_empty() {
        return None;
    }
    let mut c = condition_with_status(
        previous,
        MACHINES_CREATED,
        "False",
        PREFLIGHT_CHECK_FAILED,
        &blocked.join("; "),
    );
    object::as_map(&mut c).insert("severity".into(), json!("Error"));
    Some(c)
}

/// The condition list at `path` of `obj` with `condition` set: replaced in place when one of
/// its type is there, else appended; every other condition kept.
pub fn with_condition(obj: &Value, path: &str, condition: Value) -> Value {
    let kind = condition.get("type").cloned();
    let mut list: Vec<Value> = object::get_path(obj, path)
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    match list.iter_mut().find(|c| c.get("type") == kind.as_ref()) {
        Some(slot) => *slot = condition,
        None => list.push(condition),
    }
    Value::Array(list)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOLD: &str = "KubeadmControlPlane default/cp is upgrading (\"ControlPlaneIsStable\" preflight check failed)";

    fn ms(annotations: Value) -> Value {
        json!({"metadata": {"name": "md-x", "generation": 3, "annotations": annotations}})
    }

    #[test]
    fn the_hold_is_the_sets_own_else_its_deployments() {
        let md = json!({"metadata": {"annotations": {annotations::PREFLIGHT_HOLD: "from md"}}});
        assert_eq!(
            preflight_hold(&ms(json!({})), Some(&md)).as_deref(),
            Some("from md")
        );
        let own = ms(json!({annotations::PREFLIGHT_HOLD: "own"}));
        assert_eq!(preflight_hold(&own, Some(&md)).as_deref(), Some("own"));
        assert_eq!(preflight_hold(&ms(json!({})), None), None);
        let empty = ms(json!({annotations::PREFLIGHT_HOLD: " "}));
        assert_eq!(preflight_hold(&empty, None), None);
    }

    #[test]
    fn scaling_up_is_worded_as_capi_words_it() {
        let set = ms(json!({}));
        let c = machine_set_scaling_up(&set, 1, 2, &[HOLD.to_owned()]);
        assert_eq!(c["status"], "True");
        assert_eq!(c["reason"], "ScalingUp");
        assert_eq!(
            c["message"],
            format!("Scaling up from 1 to 2 replicas is blocked because:\n* {HOLD}")
        );
        assert_eq!(c["observedGeneration"], 3);
        let free = machine_set_scaling_up(&set, 0, 2, &[]);
        assert_eq!(free["message"], "Scaling up from 0 to 2 replicas");
        let done = machine_set_scaling_up(&set, 2, 2, &[HOLD.to_owned()]);
        assert_eq!(
            (&done["status"], &done["reason"], &done["message"]),
            (&json!("False"), &json!("NotScalingUp"), &json!(""))
        );
        let md = deployment_scaling_up(&set, 1, 2);
        assert_eq!(md["message"], "Scaling up from 1 to 2 replicas");
        assert_eq!(deployment_scaling_up(&set, 3, 2)["reason"], "NotScalingUp");
    }

    #[test]
    fn machines_created_fails_only_on_a_hold_and_heals_with_the_replicas() {
        let set = ms(json!({}));
        let held = machines_created(&set, 0, 1, &[HOLD.to_owned(), "b".to_owned()]).unwrap();
        assert_eq!(held["status"], "False");
        assert_eq!(held["reason"], "PreflightCheckFailed");
        assert_eq!(held["severity"], "Error");
        assert_eq!(held["message"], format!("{HOLD}; b"));
        assert!(machines_created(&set, 0, 1, &[]).is_none());
        let ok = machines_created(&set, 1, 1, &[]).unwrap();
        assert_eq!(ok["status"], "True");
        assert!(ok.get("reason").is_none() && ok.get("severity").is_none());
    }

    #[test]
    fn setting_a_condition_keeps_the_others_and_the_transition_time() {
        let obj = json!({"metadata": {"generation": 1}, "status": {"conditions": [
            {"type": "Available", "status": "True"},
            {"type": "ScalingUp", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z",
                "message": "old"}]}});
        let c = machine_set_scaling_up(&obj, 0, 1, &[]);
        assert_eq!(c["lastTransitionTime"], "2026-01-01T00:00:00Z");
        let list = with_condition(&obj, ".status.conditions", c);
        assert_eq!(list[0]["type"], "Available");
        assert_eq!(list[1]["message"], "Scaling up from 0 to 1 replicas");
        assert_eq!(list.as_array().unwrap().len(), 2);
        let appended = with_condition(&json!({}), ".status.conditions", json!({"type": "X"}));
        assert_eq!(appended, json!([{"type": "X"}]));
    }
}
