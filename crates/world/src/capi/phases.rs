//! The pure rules of the simulated Machine lifecycle: failure knobs and conditions.
//!
//! Responsibility: decide whether (and how) a Machine's simulated infrastructure fails — from
//! the [`annotations`] on the Machine or its MachineDeployment, else from the configured rates
//! drawn per Machine name from the seed — and compute the Machine's conditions, keeping
//! transition times that did not change: CAPI v1beta2's (`status.conditions`:
//! `BootstrapConfigReady`, `InfrastructureReady`, `NodeReady`, `NodeHealthy`, `Ready`,
//! `Available`, `Deleting`, with CAPI's reasons; other controllers' conditions kept) and the
//! deprecated v1beta1 ones CAPI still
//! writes (`status.deprecated.v1beta1.conditions`: `BootstrapReady`, `InfrastructureReady`,
//! `NodeHealthy`, `Ready`).
//! Inputs: Machine and MachineDeployment JSON, [`CapiConfig`]. Outputs: [`Failure`], conditions.
//! Pure.

use serde_json::{Value, json};

use crate::config::{CapiConfig, annotations};
use crate::objects::{self as o, condition, condition_with_status, new_condition};
use sim::object;
use sim::rng::Rng;

/// How a Machine's infrastructure fails, if it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The instance never appears: no providerID, ever.
    NoProviderId,
    /// Provisioning fails: the Machine goes `Failed`.
    Failed,
}

/// A knob from the Machine's annotations, else its MachineDeployment's.
pub fn knob(machine: &Value, md: Option<&Value>, key: &str) -> Option<String> {
    o::annotations(machine)
        .get(key)
        .cloned()
        .or_else(|| md.and_then(|md| o::annotations(md).get(key).cloned()))
}

/// How (and whether) a Machine's infrastructure fails.
pub fn failure(machine: &Value, md: Option<&Value>, config: &CapiConfig) -> Option<Failure> {
    match knob(machine, md, annotations::FAILURE).as_deref() {
        Some(annotations::NO_PROVIDER_ID) => return Some(Failure::NoProviderId),
        Some(annotations::FAILED) => return Some(Failure::Failed),
        _ => {}
    }
    let mut rng = Rng::for_name(config.seed, object::name(machine));
    if rng.chance(config.no_provider_id_rate) {
        Some(Failure::NoProviderId)
    } else if rng.chance(config.failed_rate) {
        Some(Failure::Failed)
    } else {
        None
    }
}

/// What a Machine's conditions say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Facts {
    /// Its bootstrap data is there.
    pub bootstrap: bool,
    /// Its infrastructure is provisioned.
    pub infra: bool,
    /// Whether its Node is Ready; `None` before it has one.
    pub node: Option<bool>,
}

/// The previous condition of a type in a list of conditions at `path`.
fn previous<'a>(m: &'a Value, path: &str, kind: &str) -> Option<&'a Value> {
    object::get_path(m, path)
        .and_then(Value::as_array)?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(kind))
}

/// The Machine's v1beta2 conditions (`status.conditions`) for these facts, as CAPI v1.14's
/// Machine controller words them; `Deleting` is `False` (see [`deleting`]).
pub fn conditions(m: &Value, facts: Facts) -> Value {
    let generation = object::generation(m);
    let c = |kind: &str, status: &str, reason: &str, message: &str| {
        let mut c = condition_with_status(condition(m, kind), kind, status, reason, message);
        object::as_map(&mut c).insert("observedGeneration".into(), json!(generation));
        c
    };
    let yes = |b: bool| if b { "True" } else { "False" };
    let Facts {
        bootstrap,
        infra,
        node,
    } = facts;
    let bootstrap_reason = match (bootstrap, m.pointer("/spec/bootstrap/configRef")) {
        (false, _) => "NotReady",
        (true, None) => "DataSecretProvided",
        (true, Some(_)) => "Ready",
    };
    let healthy = node == Some(true);
    let (node_status, ready_reason, healthy_reason) = match node {
        None => ("Unknown", "NodeDoesNotExist", "NodeDoesNotExist"),
        Some(false) => ("False", "NodeNotReady", "NodeNotHealthy"),
        Some(true) => ("True", "NodeReady", "NodeHealthy"),
    };
    let ready = bootstrap && infra && healthy;
    let mut all = json!([
        c("BootstrapConfigReady", yes(bootstrap), bootstrap_reason, ""),
        c(
            "InfrastructureReady",
            yes(infra),
            if infra { "Ready" } else { "NotReady" },
            ""
        ),
        c("NodeReady", node_status, ready_reason, ""),
        c("NodeHealthy", node_status, healthy_reason, ""),
        c(
            "Ready",
            yes(ready),
            if ready { "Ready" } else { "NotReady" },
            ""
        ),
        c(
            "Available",
            yes(ready),
            if ready { "Available" } else { "NotReady" },
            ""
        ),
        c("Deleting", "False", "NotDeleting", ""),
    ]);
    // Conditions other controllers own (a MachineHealthCheck's `HealthCheckSucceeded`, the
    // MachineSet's `OwnerRemediated`) are kept, as CAPI's Machine controller keeps them.
    if let Some(list) = all.as_array_mut() {
        let own: Vec<String> = list
            .iter()
            .filter_map(|c| c.get("type").and_then(Value::as_str).map(str::to_owned))
            .collect();
        let others = m
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|c| {
                c.get("type")
                    .and_then(Value::as_str)
                    .is_some_and(|t| !own.iter().any(|o| o == t))
            })
            .cloned();
        list.extend(others);
    }
    all
}

/// The v1beta2 conditions of a deleting Machine: as they are, `Deleting` now `True`.
pub fn deleting(m: &Value) -> Value {
    let mut all: Vec<Value> = m
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut now =
        condition_with_status(condition(m, "Deleting"), "Deleting", "True", "Deleting", "");
    object::as_map(&mut now).insert("observedGeneration".into(), json!(object::generation(m)));
    match all
        .iter_mut()
        .find(|c| c.get("type").and_then(Value::as_str) == Some("Deleting"))
    {
        Some(c) => *c = now,
        None => all.push(now),
    }
    Value::Array(all)
}

/// The Machine's deprecated v1beta1 conditions (`status.deprecated.v1beta1.conditions`).
pub fn v1beta1_conditions(m: &Value, facts: Facts) -> Value {
    const PATH: &str = ".status.deprecated.v1beta1.conditions";
    let c = |kind: &str, ok: bool, reason: &str| {
        new_condition(previous(m, PATH, kind), kind, ok, reason, "")
    };
    let Facts {
        bootstrap,
        infra,
        node,
    } = facts;
    let healthy = node == Some(true);
    let node_reason = match node {
        None => "WaitingForNodeRef",
        Some(false) => "NodeNotReady",
        Some(true) => "NodeReady",
    };
    json!([
        c(
            "BootstrapReady",
            bootstrap,
            if bootstrap {
                "BootstrapReady"
            } else {
                "WaitingForBootstrap"
            }
        ),
        c(
            "InfrastructureReady",
            infra,
            if infra {
                "InfrastructureReady"
            } else {
                "WaitingForInfrastructure"
            }
        ),
        c("NodeHealthy", healthy, node_reason),
        c(
            "Ready",
            bootstrap && infra && healthy,
            if healthy { "Ready" } else { node_reason }
        ),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn types(conditions: &Value) -> Vec<(String, String, String)> {
        conditions
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                let s = |k: &str| c[k].as_str().unwrap().to_owned();
                (s("type"), s("status"), s("reason"))
            })
            .collect()
    }

    #[test]
    fn conditions_are_capis_v1beta2_ones() {
        let m =
            json!({"metadata": {"generation": 2}, "spec": {"bootstrap": {"dataSecretName": "s"}}});
        let pending = Facts {
            bootstrap: false,
            infra: false,
            node: None,
        };
        let c = conditions(&m, pending);
        let t = |k: &str, s: &str, r: &str| (k.to_owned(), s.to_owned(), r.to_owned());
        assert_eq!(
            types(&c),
            [
                t("BootstrapConfigReady", "False", "NotReady"),
                t("InfrastructureReady", "False", "NotReady"),
                t("NodeReady", "Unknown", "NodeDoesNotExist"),
                t("NodeHealthy", "Unknown", "NodeDoesNotExist"),
                t("Ready", "False", "NotReady"),
                t("Available", "False", "NotReady"),
                t("Deleting", "False", "NotDeleting"),
            ]
        );
        assert_eq!(c[0]["observedGeneration"], 2);
        let running = Facts {
            bootstrap: true,
            infra: true,
            node: Some(true),
        };
        let c = conditions(&m, running);
        assert_eq!(
            types(&c)[0],
            t("BootstrapConfigReady", "True", "DataSecretProvided")
        );
        assert_eq!(types(&c)[4], t("Ready", "True", "Ready"));
        assert_eq!(types(&c)[5], t("Available", "True", "Available"));
        let old = v1beta1_conditions(&m, running);
        assert_eq!(types(&old)[3], t("Ready", "True", "Ready"));
        // Deleting turns True and keeps the others.
        let with = json!({"status": {"conditions": c}});
        let d = deleting(&with);
        assert_eq!(types(&d)[6], t("Deleting", "True", "Deleting"));
        assert_eq!(types(&d)[4], t("Ready", "True", "Ready"));
    }

    #[test]
    fn failures_come_from_annotations_or_seeded_rates() {
        let config = CapiConfig::default();
        let m = json!({"metadata": {"name": "m1"}});
        assert_eq!(failure(&m, None, &config), None);
        let md = json!({"metadata": {"annotations": {annotations::FAILURE: "Failed"}}});
        assert_eq!(failure(&m, Some(&md), &config), Some(Failure::Failed));
        let own = json!({"metadata": {"name": "m1", "annotations": {annotations::FAILURE: "NoProviderID"}}});
        assert_eq!(
            failure(&own, Some(&md), &config),
            Some(Failure::NoProviderId)
        );
        let always = CapiConfig {
            no_provider_id_rate: 1.0,
            ..CapiConfig::default()
        };
        assert_eq!(failure(&m, None, &always), Some(Failure::NoProviderId));
        let some = CapiConfig {
            failed_rate: 0.5,
            seed: 9,
            ..CapiConfig::default()
        };
        let names: Vec<_> = (0..20)
            .map(|i| failure(&json!({"metadata": {"name": format!("m{i}")}}), None, &some))
            .collect();
        let again: Vec<_> = (0..20)
            .map(|i| failure(&json!({"metadata": {"name": format!("m{i}")}}), None, &some))
            .collect();
        assert_eq!(names, again);
        assert!(names.contains(&Some(Failure::Failed)) && names.contains(&None));
    }
}
