//! The pure rules of the simulated Machine lifecycle: failure knobs and conditions.
//!
//! Responsibility: decide whether (and how) a Machine's simulated infrastructure fails — from
//! the [`annotations`] on the Machine or its MachineDeployment, else from the configured rates
//! drawn per Machine name from the seed — and compute the Machine's `BootstrapReady`,
//! `InfrastructureReady`, `NodeHealthy` and `Ready` conditions, keeping transition times that
//! did not change.
//! Inputs: Machine and MachineDeployment JSON, [`CapiConfig`]. Outputs: [`Failure`], conditions.
//! Pure.

use serde_json::{Value, json};

use crate::object;
use crate::rng::Rng;
use crate::world::config::{CapiConfig, annotations};
use crate::world::objects::{self as o, condition, new_condition};

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

/// The Machine's conditions for these facts (`node`: whether its Node is Ready, `None`
/// before it has one), keeping transition times that did not change.
pub fn conditions(m: &Value, bootstrap: bool, infra: bool, node: Option<bool>) -> Value {
    let c = |kind: &str, ok: bool, reason: &str| {
        new_condition(condition(m, kind), kind, ok, reason, "")
    };
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
