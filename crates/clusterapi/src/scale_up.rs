//! Whether Cluster API can create Machines for a MachineDeployment (or a stand-alone
//! MachineSet, which reports only its own preflight checks) now.
//!
//! Responsibility: [`blocked`] — Cluster API reports a blocked scale-up on the MachineSet
//! that cannot create Machines (v1beta2 `ScalingUp` "… is blocked because: …", from its
//! preflight checks; v1beta1 `MachinesCreated` False `PreflightCheckFailed`), and on the
//! MachineDeployment itself only when a template it references is missing (its own
//! `ScalingUp` "… is blocked because …"). It does not copy a MachineSet's preflight message to
//! the MachineDeployment, so both are read.
//! Inputs: a MachineDeployment and MachineSets (any; those of other deployments are skipped).
//! Outputs: why, or `None`. Pure.

use api::well_known::capi::DEPLOYMENT_NAME;
use api::{GroupKind, MachineDeployment, MachineSet};

fn one_line(message: &str) -> String {
    message.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Why Cluster API cannot create Machines for `md` now, if it cannot: the MachineDeployment's
/// own blocked `ScalingUp`, else the newest of its MachineSets (in `sets`) that reports one,
/// named.
#[must_use]
pub fn blocked(md: &MachineDeployment, sets: &[&MachineSet]) -> Option<String> {
    let name = md.metadata.name.as_deref()?;
    if md.group_kind == GroupKind::MachineSet {
        // A stand-alone MachineSet reports its own preflight checks (either version).
        return sets
            .iter()
            .find(|s| {
                s.metadata.namespace == md.metadata.namespace
                    && s.metadata.name.as_deref() == Some(name)
            })
            .and_then(|s| s.status.as_ref()?.scale_up_blocked())
            .map(one_line);
    }
    if let Some(message) = md.status.as_ref().and_then(|s| s.scale_up_blocked()) {
        return Some(one_line(message));
    }
    if md.group_kind == GroupKind::MachinePool {
        // A MachinePool has no MachineSets (one of an MD that shares its name is not its).
        return None;
    }
    let mut own: Vec<&&MachineSet> = sets
        .iter()
        .filter(|s| s.metadata.namespace == md.metadata.namespace)
        .filter(|s| {
            s.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(DEPLOYMENT_NAME))
                .is_some_and(|d| d == name)
        })
        .filter(|s| s.metadata.deletion_timestamp.is_none())
        .collect();
    own.sort_by_key(|s| std::cmp::Reverse(s.metadata.creation_timestamp.as_ref().map(|t| t.0)));
    own.iter().find_map(|s| {
        let message = s.status.as_ref()?.scale_up_blocked()?;
        Some(format!(
            "MachineSet {}: {}",
            s.metadata.name.as_deref().unwrap_or_default(),
            one_line(message)
        ))
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn md(status: serde_json::Value) -> MachineDeployment {
        serde_json::from_value(json!({"metadata": {"name": "md", "namespace": "ns"},
            "status": status}))
        .unwrap()
    }

    fn ms(name: &str, deployment: &str, status: serde_json::Value) -> MachineSet {
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": "ns",
            "labels": {DEPLOYMENT_NAME: deployment}}, "status": status}))
        .unwrap()
    }

    #[test]
    fn a_held_machine_set_of_the_deployment_blocks_it() {
        let held = ms(
            "md-x",
            "md",
            json!({"conditions": [{"type": "ScalingUp", "status": "True",
                "message": "Scaling up from 0 to 1 replicas is blocked because:\n* ControlPlaneIsStable: upgrading"}]}),
        );
        let other = ms(
            "other-x",
            "other",
            json!({"conditions": [{"type": "ScalingUp", "status": "True",
                "message": "Scaling up from 0 to 1 replicas is blocked because:\n* x"}]}),
        );
        let scaling = md(
            json!({"conditions": [{"type": "ScalingUp", "status": "True",
            "message": "Scaling up from 0 to 1 replicas"}]}),
        );
        assert_eq!(
            blocked(&scaling, &[&held, &other]).as_deref(),
            Some(
                "MachineSet md-x: Scaling up from 0 to 1 replicas is blocked because: * ControlPlaneIsStable: upgrading"
            )
        );
        assert_eq!(blocked(&scaling, &[&other]), None);
    }

    #[test]
    fn a_missing_template_blocks_the_deployment_itself() {
        let missing = md(
            json!({"conditions": [{"type": "ScalingUp", "status": "True",
            "message": "Scaling up from 0 to 3 replicas is blocked because DockerMachineTemplate does not exist"}]}),
        );
        assert!(blocked(&missing, &[]).unwrap().contains("does not exist"));
    }
}
