//! Provider drift (issue item 7): has the MachineDeployment moved on since this Machine was made?
//!
//! Responsibility: [`drift_reason`] compares a Machine with its MachineDeployment's current
//! template and answers with a CamelCase reason (used by core as the `Drifted` condition's
//! reason and message), `None` when not drifted:
//! - `MachineDeploymentNotSelected`: the MD no longer carries the member label or no longer
//!   matches the NodeClass's `scalableResourceSelector` (or left the configured scope);
//! - `KubernetesVersionChanged`: `spec.template.spec.version` differs from the Machine's
//!   `spec.version`;
//! - `InfrastructureTemplateChanged` / `BootstrapConfigChanged`: the MD template's
//!   `infrastructureRef` / `bootstrap.configRef` (kind, name, namespace) or `dataSecretName`
//!   differ from those of the MachineSet the Machine was created from. A Machine's own refs
//!   point at cloned instances, so the MachineSet's template is the record of what it was made
//!   from; without that MachineSet only the version is compared.
//!
//! The template comparisons apply only to `OnDelete` MachineDeployments. A `RollingUpdate` one
//! (Cluster API's default) replaces its Machines itself on a template change — new MachineSet,
//! old Machines drained and deleted by Cluster API — so marking them `Drifted` too would make
//! Karpenter launch a second replacement for each; their NodeClaims end when Cluster API
//! deletes their Machines. Selection drift is Karpenter's in both strategies.
//!
//! Inputs: the Machine, its MachineSet (if found), its MD, whether the NodeClass selects the
//! MD. Outputs: an optional reason. Pure.

use api::capi::ContractReference;
use api::{Machine, MachineDeployment, MachineSet};

/// The MD no longer matches the NodeClass.
pub const NOT_SELECTED: &str = "MachineDeploymentNotSelected";
/// The MD's Kubernetes version changed.
pub const VERSION_CHANGED: &str = "KubernetesVersionChanged";
/// The MD's infrastructure template changed.
pub const INFRASTRUCTURE_CHANGED: &str = "InfrastructureTemplateChanged";
/// The MD's bootstrap config template changed.
pub const BOOTSTRAP_CHANGED: &str = "BootstrapConfigChanged";
/// The MD is gone.
pub const MACHINE_DEPLOYMENT_NOT_FOUND: &str = "MachineDeploymentNotFound";

fn same_ref(
    a: Option<&ContractReference>,
    b: Option<&ContractReference>,
    default_ns: &str,
) -> bool {
    let key = |r: Option<&ContractReference>| {
        r.map(|r| {
            (
                r.kind.clone().unwrap_or_default(),
                r.name.clone().unwrap_or_default(),
                r.namespace_or(Some(default_ns))
                    .unwrap_or_default()
                    .to_owned(),
            )
        })
    };
    key(a) == key(b)
}

/// Why `machine` is drifted from `md`, if it is.
#[must_use]
pub fn drift_reason(
    machine: &Machine,
    machine_set: Option<&MachineSet>,
    md: &MachineDeployment,
    selected: bool,
) -> Option<&'static str> {
    if !selected {
        return Some(NOT_SELECTED);
    }
    if !md.spec.is_on_delete() {
        return None;
    }
    let template = &md.spec.template.spec;
    let version = |v: Option<&String>| v.map(|v| v.trim_start_matches('v').to_owned());
    if version(template.version.as_ref()) != version(machine.spec.fields.version.as_ref()) {
        return Some(VERSION_CHANGED);
    }
    let ns = md.metadata.namespace.as_deref().unwrap_or_default();
    if let Some(ms) = machine_set {
        let made_from = &ms.spec.template.spec;
        if !same_ref(
            Some(&made_from.infrastructure_ref),
            Some(&template.infrastructure_ref),
            ns,
        ) {
            return Some(INFRASTRUCTURE_CHANGED);
        }
        if !same_ref(
            made_from.bootstrap.config_ref.as_ref(),
            template.bootstrap.config_ref.as_ref(),
            ns,
        ) || made_from.bootstrap.data_secret_name != template.bootstrap.data_secret_name
        {
            return Some(BOOTSTRAP_CHANGED);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn md(version: &str, infra: &str, boot: &str) -> MachineDeployment {
        serde_json::from_value(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment",
            "metadata": {"name": "md", "namespace": "ns"},
            "spec": {"clusterName": "c", "selector": {},
                "rollout": {"strategy": {"type": "OnDelete"}},
                "template": {"spec": {"clusterName": "c", "version": version,
                    "bootstrap": {"configRef": {"kind": "KubeadmConfigTemplate", "name": boot}},
                    "infrastructureRef": {"kind": "DockerMachineTemplate", "name": infra}}}},
        }))
        .unwrap()
    }

    fn ms(infra: &str, boot: &str) -> MachineSet {
        serde_json::from_value(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineSet",
            "metadata": {"name": "ms", "namespace": "ns"},
            "spec": {"clusterName": "c", "selector": {},
                "template": {"spec": {"clusterName": "c",
                    "bootstrap": {"configRef": {"kind": "KubeadmConfigTemplate", "name": boot,
                        "namespace": "ns"}},
                    "infrastructureRef": {"kind": "DockerMachineTemplate", "name": infra}}}},
        }))
        .unwrap()
    }

    fn machine(version: &str) -> Machine {
        serde_json::from_value(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
            "metadata": {"name": "m", "namespace": "ns"},
            "spec": {"clusterName": "c", "version": version, "bootstrap": {},
                "infrastructureRef": {"kind": "DockerMachine", "name": "m-abcde"}},
        }))
        .unwrap()
    }

    #[test]
    fn an_unchanged_template_is_not_drifted() {
        let d = md("v1.33.0", "t1", "b1");
        assert_eq!(
            drift_reason(&machine("1.33.0"), Some(&ms("t1", "b1")), &d, true),
            None
        );
        assert_eq!(drift_reason(&machine("v1.33.0"), None, &d, true), None);
    }

    #[test]
    fn each_change_has_its_reason() {
        let m = machine("v1.33.0");
        let set = ms("t1", "b1");
        assert_eq!(
            drift_reason(&m, Some(&set), &md("v1.33.0", "t1", "b1"), false),
            Some(NOT_SELECTED)
        );
        assert_eq!(
            drift_reason(&m, Some(&set), &md("v1.34.0", "t1", "b1"), true),
            Some(VERSION_CHANGED)
        );
        assert_eq!(
            drift_reason(&m, Some(&set), &md("v1.33.0", "t2", "b1"), true),
            Some(INFRASTRUCTURE_CHANGED)
        );
        assert_eq!(
            drift_reason(&m, Some(&set), &md("v1.33.0", "t1", "b2"), true),
            Some(BOOTSTRAP_CHANGED)
        );
    }

    #[test]
    fn cluster_api_rolls_a_rolling_update_deployment_out_itself() {
        let m = machine("v1.33.0");
        let set = ms("t1", "b1");
        let mut rolling = md("v1.34.0", "t2", "b2");
        rolling.spec.rollout = None;
        assert_eq!(drift_reason(&m, Some(&set), &rolling, true), None);
        assert_eq!(
            drift_reason(&m, Some(&set), &rolling, false),
            Some(NOT_SELECTED),
            "leaving the selection is Karpenter's drift in every strategy"
        );
    }
}
