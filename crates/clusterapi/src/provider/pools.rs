//! MachinePools as node groups: which pool a Machine belongs to, and where a lowered replica
//! of a pool lands.
//!
//! A MachinePool's instances are Machines only where its infrastructure provider supports
//! *MachinePool Machines* (its InfraMachinePool says `status.infrastructureMachineKind`;
//! [`crate::instance_types`] leaves other pools out of the catalogue, so they are never
//! raised or lowered). Those Machines carry `cluster.x-k8s.io/pool-name` and a MachinePool
//! controller owner reference. When replicas drop, the provider (the Docker provider is the
//! reference) deletes outdated instances first (a version other than the template's), then
//! provisioned up-to-date ones, `cluster.x-k8s.io/delete-machine` first in each group, and
//! never an instance whose infrastructure is not provisioned yet. So lowering replicas removes
//! the Machine we marked only when no Machine of the pool is outdated and ours is provisioned
//! ([`pool_target`]); any other removal deletes the Machine directly (replicas kept: the pool
//! replaces it). Not `upToDateReplicas < replicas`: Cluster API counts a deleting pool Machine
//! as not up to date, so every scale-down in progress would read as a rollout. A provider that
//! replaces instances for reasons other than the version (an image or size change it does not
//! put on the Machine) is not seen here.
//!
//! Responsibility: [`machine_pool_of`], [`pool_target`]. Inputs: Machines, the pool's view.
//! Outputs: names, [`ScaleDownTarget`]. Pure.

use api::well_known::capi::POOL_NAME;
use api::{Machine, MachineDeployment};

use super::machinesets::ScaleDownTarget;

/// The MachinePool that made `m`: its controller owner reference of kind `MachinePool`, else
/// its `cluster.x-k8s.io/pool-name` label.
pub(crate) fn machine_pool_of(m: &Machine) -> Option<&str> {
    m.metadata
        .owner_references
        .as_ref()
        .and_then(|refs| {
            refs.iter()
                .find(|o| o.controller == Some(true) && o.kind == "MachinePool")
        })
        .map(|o| o.name.as_str())
        .or_else(|| {
            m.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(POOL_NAME))
                .map(String::as_str)
        })
}

/// Whether `m`'s infrastructure is provisioned (either version).
pub(crate) fn provisioned(m: &Machine) -> bool {
    m.status
        .as_ref()
        .is_some_and(api::capi::MachineStatus::infrastructure_provisioned)
}

/// Whether `m` runs another version than `pool`'s template (both known).
fn outdated(pool: &MachineDeployment, m: &Machine) -> bool {
    matches!(
        (pool.spec.template.spec.version.as_deref(), m.spec.fields.version.as_deref()),
        (Some(want), Some(has)) if !has.is_empty() && want != has
    )
}

/// The scale-down target of the MachinePool `pool` (its node-group view) whose Machines are
/// `machines`: the pool itself while nothing is outdated and it is not rolling out; else no
/// certain target, with why.
pub(crate) fn pool_target(pool: &MachineDeployment, machines: &[&Machine]) -> ScaleDownTarget {
    let name = pool.metadata.name.clone();
    let replicas = pool.spec.replicas.unwrap_or(0);
    let live = pool.metadata.deletion_timestamp.is_none() && replicas > 0;
    let outdated: Vec<&str> = machines
        .iter()
        .filter(|m| m.metadata.deletion_timestamp.is_none() && outdated(pool, m))
        .filter_map(|m| m.metadata.name.as_deref())
        .collect();
    let rolling = if !outdated.is_empty() {
        Some(format!(
            "{} of its Machines ({}) run another version than its template's {}",
            outdated.len(),
            outdated.join(", "),
            pool.spec.template.spec.version.as_deref().unwrap_or("?"),
        ))
    } else {
        None
    };
    ScaleDownTarget::pool(
        name.filter(|_| live),
        if live { replicas } else { 0 },
        rolling,
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    fn pool(replicas: i32) -> MachineDeployment {
        let mp: api::MachinePool = serde_json::from_value(json!({
            "metadata": {"name": "mp", "namespace": "ns"},
            "spec": {"clusterName": "c", "replicas": replicas,
                "template": {"spec": {"clusterName": "c", "version": "v1.34.0"}}}}))
        .unwrap();
        MachineDeployment::from_machine_pool(&mp)
    }

    fn machine(name: &str, version: &str, provisioned: bool) -> Machine {
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": "ns",
            "labels": {POOL_NAME: "mp"},
            "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool",
                "name": "mp", "uid": "u", "controller": true}]},
            "spec": {"clusterName": "c", "version": version},
            "status": {"initialization": {"infrastructureProvisioned": provisioned}}}))
        .unwrap()
    }

    #[test]
    fn a_pool_takes_its_provisioned_machines_while_nothing_is_outdated() {
        let (a, b) = (
            machine("a", "v1.34.0", true),
            machine("b", "v1.34.0", false),
        );
        assert_eq!(machine_pool_of(&a), Some("mp"));
        let t = pool_target(&pool(2), &[&a, &b]);
        assert!(t.takes(&a));
        assert!(
            !t.takes(&b),
            "the provider never picks an unprovisioned instance"
        );
        assert!(!t.rolling_out());
        assert_eq!(t.room(), 2);
        let other: Machine = serde_json::from_value(json!({"metadata": {"name": "x",
            "labels": {POOL_NAME: "other"}}, "spec": {"clusterName": "c"}}))
        .unwrap();
        assert!(!t.takes(&other));
    }

    #[test]
    fn an_outdated_machine_makes_the_scale_down_uncertain() {
        let (a, old) = (
            machine("a", "v1.34.0", true),
            machine("old", "v1.33.0", true),
        );
        let t = pool_target(&pool(2), &[&a, &old]);
        assert!(t.rolling_out());
        assert!(
            !t.takes(&a),
            "the provider would take the outdated one first"
        );
        let md = crate::instance_types::MachineDeploymentRef::machine_pool("ns", "mp");
        let why = t.hold(&md, &a).unwrap();
        assert!(why.contains("old") && why.contains("v1.34.0"), "{why}");
    }

    #[test]
    fn a_pool_at_zero_takes_nothing() {
        let a = machine("a", "v1.34.0", true);
        assert!(!pool_target(&pool(0), &[&a]).takes(&a));
    }
}
