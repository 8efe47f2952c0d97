//! Where Cluster API takes a MachineDeployment's lowered replica from: the only MachineSet a
//! scale-down can be trusted to land in.
//!
//! Cluster API honours `cluster.x-k8s.io/delete-machine` only **inside** the MachineSet it
//! scales down. With one MachineSet holding replicas, that is the one. Mid-rollout, CAPI
//! (v1.12–v1.14) cuts the **oldest old** MachineSet first; under `OnDelete` without
//! availability checks (old MachineSets are the ones it marks `disable-machine-create:
//! "true"`), under `RollingUpdate` within an availability budget and preferring MachineSets
//! with unavailable Machines — not predictable from here. So lowering replicas removes the
//! Machine we marked only when [`ScaleDownTarget::takes`] says so; every other removal deletes
//! its Machine directly (replicas kept), which no controller can redirect.
//!
//! A stand-alone MachineSet is its own target ([`ScaleDownTarget::stand_alone`]): it deletes
//! first a Machine already deleting, then the `delete-machine` ones, so our annotated Machine
//! goes unless another is already deleting — which the removal's escalation (a direct delete
//! after `removal_escalation`) covers. A MachinePool is its own target while nothing in it is
//! outdated ([`ScaleDownTarget::pool`], [`super::pools`]).
//!
//! Responsibility: the pure rule ([`ScaleDownTarget::of`]) and the fresh read of a
//! MachineDeployment's MachineSets it rests on. Inputs: the MachineDeployment, its
//! MachineSets. Outputs: [`ScaleDownTarget`].

use api::well_known::capi::{DEPLOYMENT_NAME, DISABLE_MACHINE_CREATE, SET_NAME};
use api::{GroupKind, Machine, MachineDeployment, MachineSet};
use cloudprovider::CloudProviderError;
use kube::api::{Api, ListParams};

use crate::instance_types::MachineDeploymentRef;

use super::{ClusterApiProvider, annotation, transient};

/// The MachineSet a lowered replica of a MachineDeployment is taken from, when that is certain.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ScaleDownTarget {
    /// The MachineSet, if one is certain.
    set: Option<String>,
    /// How many replicas it can lose.
    room: i32,
    /// How many MachineSets hold replicas (more than one: a rollout).
    active: usize,
    /// For a MachinePool: why its provider would take another Machine first (outdated
    /// instances), if it would ([`super::pools::pool_target`]).
    pool: Option<PoolTarget>,
}

/// The MachinePool part of a [`ScaleDownTarget`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct PoolTarget {
    /// Why a lowered replica may take another Machine, if it may.
    uncertain: Option<String>,
}

/// The MachineSet that made `m`: its controller owner reference (the exact name), else its
/// `cluster.x-k8s.io/set-name` label (Cluster API hashes names past 63 characters there).
pub(crate) fn machine_set_of(m: &Machine) -> Option<&str> {
    m.metadata
        .owner_references
        .as_ref()
        .and_then(|refs| {
            refs.iter()
                .find(|o| o.controller == Some(true) && o.kind == "MachineSet")
        })
        .map(|o| o.name.as_str())
        .or_else(|| {
            m.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(SET_NAME))
                .map(String::as_str)
        })
}

impl ScaleDownTarget {
    /// The target of `md` whose MachineSets are `sets` (those it controls).
    pub(crate) fn of(md: &MachineDeployment, sets: &[MachineSet]) -> ScaleDownTarget {
        let mut active: Vec<&MachineSet> = sets
            .iter()
            .filter(|s| s.metadata.deletion_timestamp.is_none())
            .filter(|s| s.spec.replicas.unwrap_or(0) > 0)
            .collect();
        let count = active.len();
        let on_delete = md.spec.is_on_delete();
        let target = match active.as_slice() {
            [one] => Some(*one),
            [] => None,
            _ if on_delete => {
                // The oldest old MachineSet, unless it holds more replicas than Machines (CAPI
                // first lowers it to its Machines, which would absorb our replica).
                active.retain(|s| annotation(&s.metadata, DISABLE_MACHINE_CREATE) == Some("true"));
                active.sort_by(|a, b| {
                    let key = |s: &MachineSet| {
                        (
                            s.metadata.creation_timestamp.as_ref().map(|t| t.0),
                            s.metadata.name.clone(),
                        )
                    };
                    key(a).cmp(&key(b))
                });
                active.first().copied().filter(|s| {
                    s.spec.replicas.unwrap_or(0)
                        <= s.status.as_ref().and_then(|st| st.replicas).unwrap_or(0)
                })
            }
            _ => None,
        };
        ScaleDownTarget {
            set: target.and_then(|s| s.metadata.name.clone()),
            room: target.and_then(|s| s.spec.replicas).unwrap_or(0),
            active: count,
            pool: None,
        }
    }

    /// The target of a MachinePool named `name` (`None`: deleting or at 0) that can lose
    /// `room` replicas; `uncertain` says why its provider would remove another Machine first,
    /// if it would ([`super::pools::pool_target`]).
    pub(crate) fn pool(name: Option<String>, room: i32, uncertain: Option<String>) -> Self {
        ScaleDownTarget {
            active: usize::from(name.is_some()),
            set: name,
            room,
            pool: Some(PoolTarget { uncertain }),
        }
    }

    /// The target of a stand-alone MachineSet (`set`, as its node-group view): the set itself,
    /// while it holds replicas and is not being deleted. There is no rollout to redirect a
    /// lowered replica.
    pub(crate) fn stand_alone(set: &MachineDeployment) -> ScaleDownTarget {
        let replicas = set.spec.replicas.unwrap_or(0);
        let active = set.metadata.deletion_timestamp.is_none() && replicas > 0;
        ScaleDownTarget {
            set: set.metadata.name.clone().filter(|_| active),
            room: if active { replicas } else { 0 },
            active: usize::from(active),
            pool: None,
        }
    }

    /// Whether lowering replicas by one removes `m` once it is marked `delete-machine`.
    pub(crate) fn takes(&self, m: &Machine) -> bool {
        match &self.pool {
            None => self.set.is_some() && machine_set_of(m) == self.set.as_deref(),
            Some(pool) => {
                self.set.is_some()
                    && pool.uncertain.is_none()
                    && super::pools::machine_pool_of(m) == self.set.as_deref()
                    && super::pools::provisioned(m)
            }
        }
    }

    /// How many replicas the target can lose.
    pub(crate) fn room(&self) -> i32 {
        self.room
    }

    /// Whether the MachineDeployment is rolling out (more than one MachineSet holds replicas),
    /// or the MachinePool is replacing outdated Machines.
    pub(crate) fn rolling_out(&self) -> bool {
        self.active > 1 || self.pool.as_ref().is_some_and(|p| p.uncertain.is_some())
    }

    /// Why `m` (of MachineDeployment `md`) must not be disrupted now, if it must not: mid-rollout
    /// a lowered replica would land in another MachineSet (CAPI would delete one of its
    /// Machines), and deleting `m` alone would only make its MachineSet replace it.
    pub(crate) fn hold(&self, md: &MachineDeploymentRef, m: &Machine) -> Option<String> {
        if !self.rolling_out() || self.takes(m) {
            return None;
        }
        let machine = m.metadata.name.as_deref().unwrap_or_default();
        if let Some(why) = self.pool.as_ref().and_then(|p| p.uncertain.as_deref()) {
            return Some(format!(
                "{md:#} is replacing outdated Machines: {why}; lowering its replicas would \
                 make its infrastructure provider remove an outdated one, not Machine \
                 {machine}, and deleting {machine} alone would only make the pool replace it; \
                 waiting until they are replaced"
            ));
        }
        let set = machine_set_of(m).unwrap_or("?");
        let lands = self.set.as_deref().map_or_else(
            || "a MachineSet that cannot be known in advance".to_owned(),
            |s| format!("MachineSet {s}"),
        );
        Some(format!(
            "{md:#} is rolling out through {} MachineSets: lowering its \
             replicas would make Cluster API remove a Machine of {lands}, not Machine \
             {machine} of MachineSet {set}, and deleting {machine} alone would only make its \
             MachineSet replace it; waiting until the rollout ends",
            self.active
        ))
    }
}

/// Whether `s` is a MachineSet the MachineDeployment with UID `uid` controls.
fn controlled_by(s: &MachineSet, uid: Option<&str>) -> bool {
    s.metadata.owner_references.as_ref().is_some_and(|refs| {
        refs.iter()
            .any(|o| o.controller == Some(true) && Some(o.uid.as_str()) == uid)
    })
}

impl ClusterApiProvider {
    /// The scale-down target of `md` (`current` read fresh), from a fresh list of its
    /// MachineSets — a cached one could miss the MachineSet a rollout just made.
    pub(crate) async fn scale_down_target(
        &self,
        md: &MachineDeploymentRef,
        current: &MachineDeployment,
    ) -> Result<ScaleDownTarget, CloudProviderError> {
        match md.kind {
            GroupKind::MachineSet => return Ok(ScaleDownTarget::stand_alone(current)),
            GroupKind::MachinePool => {
                let machines = self.list_machines_of(md).await?;
                let machines: Vec<&Machine> = machines.iter().collect();
                return Ok(super::pools::pool_target(current, &machines));
            }
            GroupKind::MachineDeployment => {}
        }
        let uid = current.metadata.uid.as_deref();
        let sets: Vec<MachineSet> = Api::<MachineSet>::namespaced_with(
            self.management.clone(),
            &md.namespace,
            &self.config.capi,
        )
        .list(&ListParams::default().labels(&format!("{DEPLOYMENT_NAME}={}", md.name)))
        .await
        .map_err(|e| transient("list MachineSets", e))?
        .items
        .into_iter()
        .filter(|s| controlled_by(s, uid))
        .collect();
        Ok(ScaleDownTarget::of(current, &sets))
    }

    /// [`Self::scale_down_target`] from the MachineSet cache, for disruption's per-node
    /// question ([`ScaleDownTarget::hold`]): no request. The removal itself reads fresh.
    pub(crate) fn cached_scale_down_target(
        &self,
        md: &MachineDeploymentRef,
        current: &MachineDeployment,
    ) -> ScaleDownTarget {
        match md.kind {
            GroupKind::MachineSet => return ScaleDownTarget::stand_alone(current),
            GroupKind::MachinePool => {
                let machines = self.machines_of(md);
                let machines: Vec<&Machine> = machines.iter().map(AsRef::as_ref).collect();
                return super::pools::pool_target(current, &machines);
            }
            GroupKind::MachineDeployment => {}
        }
        let uid = current.metadata.uid.as_deref();
        let sets: Vec<MachineSet> = self
            .sets
            .all()
            .iter()
            .filter(|s| s.metadata.namespace.as_deref() == Some(md.namespace.as_str()))
            .filter(|s| controlled_by(s, uid))
            .map(|s| MachineSet::clone(s))
            .collect();
        ScaleDownTarget::of(current, &sets)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use serde_json::{Value, json};

    use super::*;

    fn md(strategy: Option<&str>) -> MachineDeployment {
        let mut v = json!({"metadata": {"name": "md"}, "spec": {"clusterName": "c"}});
        if let Some(s) = strategy {
            v["spec"]["strategy"] = json!({"type": s});
        }
        serde_json::from_value(v).unwrap()
    }

    fn set(name: &str, created: &str, spec: i32, status: i32, old: bool) -> MachineSet {
        let mut v: Value = json!({"metadata": {"name": name,
            "creationTimestamp": format!("2026-01-0{created}T00:00:00Z")},
            "spec": {"clusterName": "c", "replicas": spec}, "status": {"replicas": status}});
        if old {
            v["metadata"]["annotations"] = json!({DISABLE_MACHINE_CREATE: "true"});
        }
        serde_json::from_value(v).unwrap()
    }

    fn machine(set: &str) -> Machine {
        serde_json::from_value(json!({"metadata": {"name": format!("{set}-m"),
            "labels": {SET_NAME: set}}, "spec": {"clusterName": "c"}}))
        .unwrap()
    }

    #[test]
    fn one_machine_set_with_replicas_takes_the_scale_down() {
        let sets = [set("a", "1", 3, 3, false), set("b", "2", 0, 1, true)];
        let t = ScaleDownTarget::of(&md(None), &sets);
        assert!(t.takes(&machine("a")));
        assert!(
            !t.takes(&machine("b")),
            "a MachineSet at 0 loses nothing more"
        );
        assert_eq!(t.room(), 3);
        assert!(!t.rolling_out());
    }

    #[test]
    fn mid_on_delete_rollout_only_the_oldest_old_machine_set_takes_it() {
        let sets = [
            set("new", "3", 1, 1, false),
            set("old", "2", 1, 1, true),
            set("older", "1", 2, 2, true),
        ];
        let t = ScaleDownTarget::of(&md(Some("OnDelete")), &sets);
        assert!(t.rolling_out());
        assert!(t.takes(&machine("older")));
        assert!(!t.takes(&machine("old")));
        assert!(!t.takes(&machine("new")));
        assert_eq!(t.room(), 2);
        // An oldest old MachineSet still above its Machines would absorb the replica.
        let sets = [set("new", "3", 1, 1, false), set("older", "1", 2, 1, true)];
        let t = ScaleDownTarget::of(&md(Some("OnDelete")), &sets);
        assert!(!t.takes(&machine("older")));
    }

    #[test]
    fn the_controller_reference_names_the_set_when_the_label_is_hashed() {
        let long = "s".repeat(70);
        let m: Machine = serde_json::from_value(json!({"metadata": {"name": "m",
            "labels": {SET_NAME: "hash_abc_z"},
            "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineSet",
                "name": long, "uid": "u", "controller": true}]},
            "spec": {"clusterName": "c"}}))
        .unwrap();
        assert_eq!(machine_set_of(&m), Some(long.as_str()));
        assert_eq!(machine_set_of(&machine("a")), Some("a"), "the label alone");
    }

    #[test]
    fn mid_rolling_update_nothing_is_certain() {
        let sets = [set("new", "2", 1, 1, false), set("old", "1", 2, 2, false)];
        let t = ScaleDownTarget::of(&md(None), &sets);
        assert!(t.rolling_out());
        assert!(!t.takes(&machine("new")));
        assert!(!t.takes(&machine("old")));
    }
}
