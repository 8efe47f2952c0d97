//! The advisory conditions of a ClusterAPINodeClass: warnings about the MachineDeployments it
//! selects that do not change `Ready`.
//!
//! Responsibility, pure:
//! - [`rollout`]: `RolloutStrategyCompatible` — False (reason `RollingUpdate`) while a selected
//!   MachineDeployment would let Cluster API replace its Machines itself on a template change,
//!   True (reason `OnDelete`) when every one uses `OnDelete`; the field is named as the served
//!   Cluster API version spells it. Either way the message names the selected
//!   MachineDeployments rolling out right now (more than one MachineSet holds replicas), whose
//!   Machines outside the MachineSet a scale-down lands in are not disrupted until it ends.
//! - [`health`]: `MachineDeploymentsHealthy` — False while Cluster API reports a selected
//!   MachineDeployment `Failed` (reason `Failed`) or its scale-up blocked (reason
//!   `ScaleUpBlocked`: MachineSet preflight checks, missing templates;
//!   [`crate::scale_up::blocked`]), naming them and why; those offerings are unavailable meanwhile. True (reason
//!   `Healthy`) otherwise.
//! - [`pricing`]: `MachineDeploymentsPriced` — False while a selected MachineDeployment's
//!   offerings have no price (reason `Unpriced` when some have one, `NoPrices` when none has),
//!   naming them and what that means for provisioning and consolidation; True (reason
//!   `Priced`) when every one has a price. Read off the catalogue, so it is absent too when
//!   no instance type could be built.
//!
//! Both are `None` when the NodeClass selects nothing (or its selector is invalid).
//! Inputs: the NodeClass, the MachineDeployments (and their MachineSets), the scope. Outputs: (status, reason, message).

use api::common::ConditionStatus;
use api::{ClusterAPINodeClass, MachineDeployment, MachineSet};

use crate::instance_types::{Catalogue, MachineDeploymentRef, PriceSource};
use crate::selection::{Scope, select};

/// Condition type: whether the selected MachineDeployments leave replacing Machines to
/// Karpenter.
pub const ROLLOUT_STRATEGY_COMPATIBLE: &str = "RolloutStrategyCompatible";
/// Event reason when a selected MachineDeployment rolls out by itself.
pub const REASON_INCOMPATIBLE_ROLLOUT_STRATEGY: &str = "IncompatibleRolloutStrategy";
/// Condition type: whether Cluster API can create Machines for every selected
/// MachineDeployment.
pub const MACHINE_DEPLOYMENTS_HEALTHY: &str = "MachineDeploymentsHealthy";
/// Event reason when a selected MachineDeployment is Failed or cannot scale up.
pub const REASON_UNHEALTHY_MACHINE_DEPLOYMENT: &str = "UnhealthyMachineDeployment";
/// Condition type: whether every selected MachineDeployment has a price.
pub const MACHINE_DEPLOYMENTS_PRICED: &str = "MachineDeploymentsPriced";
/// Event reason when a selected MachineDeployment has no price.
pub const REASON_UNPRICED_MACHINE_DEPLOYMENT: &str = "UnpricedMachineDeployment";
/// How many MachineDeployments a message names.
const NAMED: usize = 3;

/// A condition as (status, reason, message).
pub type Advisory = (ConditionStatus, &'static str, String);

/// `items` joined, at most [`NAMED`], then how many more.
fn named(items: &[String], separator: &str) -> String {
    let mut text = items
        .iter()
        .take(NAMED)
        .cloned()
        .collect::<Vec<_>>()
        .join(separator);
    if items.len() > NAMED {
        text.push_str(&format!("{separator}and {} more", items.len() - NAMED));
    }
    text
}

fn selected<'a>(
    nodeclass: &ClusterAPINodeClass,
    mds: &'a [MachineDeployment],
    scope: &Scope,
) -> Option<Vec<&'a MachineDeployment>> {
    select(
        mds,
        nodeclass.spec.scalable_resource_selector.as_ref(),
        scope,
    )
    .ok()
    .filter(|s| !s.is_empty())
}

/// The `RolloutStrategyCompatible` condition for `nodeclass` (status, reason, message), or
/// `None` when it selects no MachineDeployment (or its selector is invalid); `sets` are the
/// MachineSets (any namespace; matched to their MachineDeployments by controller UID). Pure.
#[must_use]
pub fn rollout(
    nodeclass: &ClusterAPINodeClass,
    mds: &[MachineDeployment],
    sets: &[MachineSet],
    scope: &Scope,
    capi: &api::CapiVersion,
) -> Option<Advisory> {
    let (status, reason, message) = strategy(nodeclass, mds, scope, capi)?;
    let selected = selected(nodeclass, mds, scope)?;
    let now: Vec<String> = selected
        .iter()
        .filter_map(|md| {
            let n = rolling_out(md, sets);
            (n > 1).then(|| {
                format!(
                    "{} ({n} MachineSets hold replicas)",
                    MachineDeploymentRef::of(md)
                )
            })
        })
        .collect();
    if now.is_empty() {
        return Some((status, reason, message));
    }
    Some((
        status,
        reason,
        format!(
            "{message}. Rolling out now: MachineDeployment {}; until each rollout ends, \
             Karpenter disrupts only Machines of the MachineSet a scale-down lands in (with \
             OnDelete: the oldest old one), since Cluster API would take a lowered replica \
             from another MachineSet or replace a Machine deleted alone",
            named(&now, ", ")
        ),
    ))
}

/// How many MachineSets of `md` (those it controls, not deleting) hold replicas.
fn rolling_out(md: &MachineDeployment, sets: &[MachineSet]) -> usize {
    let uid = md.metadata.uid.as_deref();
    sets.iter()
        .filter(|s| s.metadata.namespace == md.metadata.namespace)
        .filter(|s| s.metadata.deletion_timestamp.is_none())
        .filter(|s| s.spec.replicas.unwrap_or(0) > 0)
        .filter(|s| {
            s.metadata.owner_references.as_ref().is_some_and(|refs| {
                refs.iter()
                    .any(|o| o.controller == Some(true) && Some(o.uid.as_str()) == uid)
            })
        })
        .count()
}

/// The strategy part of [`rollout`].
fn strategy(
    nodeclass: &ClusterAPINodeClass,
    mds: &[MachineDeployment],
    scope: &Scope,
    capi: &api::CapiVersion,
) -> Option<Advisory> {
    let field = capi.strategy_field();
    let selected = selected(nodeclass, mds, scope)?;
    let rolling: Vec<String> = selected
        .iter()
        .filter(|md| !md.spec.is_on_delete())
        .map(|md| MachineDeploymentRef::of(md).to_string())
        .collect();
    if rolling.is_empty() {
        return Some((
            ConditionStatus::True,
            "OnDelete",
            format!(
                "every selected MachineDeployment has {field} OnDelete: Karpenter replaces drifted Machines"
            ),
        ));
    }
    let named = named(&rolling, ", ");
    Some((
        ConditionStatus::False,
        "RollingUpdate",
        format!(
            "MachineDeployment {named} would be rolled out by Cluster API on a template change \
             ({field} RollingUpdate, the default): its new Machines get no NodeClaim \
             and its old ones go outside Karpenter's disruption budgets; set \
             {field}: OnDelete and Karpenter replaces drifted nodes itself"
        ),
    ))
}

/// The `MachineDeploymentsHealthy` condition for `nodeclass`, or `None` when it selects no
/// MachineDeployment. Pure.
#[must_use]
pub fn health(
    nodeclass: &ClusterAPINodeClass,
    mds: &[MachineDeployment],
    sets: &[MachineSet],
    scope: &Scope,
) -> Option<Advisory> {
    let selected = selected(nodeclass, mds, scope)?;
    let sets: Vec<&MachineSet> = sets.iter().collect();
    let mut failed = Vec::new();
    let mut blocked = Vec::new();
    for md in selected {
        let name = format!("{:#}", MachineDeploymentRef::of(md));
        if md.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Failed") {
            failed.push(format!("{name}: Cluster API reports it Failed"));
        } else if let Some(why) = crate::scale_up::blocked(md, &sets) {
            blocked.push(format!("{name}: scale-up blocked: {why}"));
        }
    }
    if failed.is_empty() && blocked.is_empty() {
        return Some((
            ConditionStatus::True,
            "Healthy",
            "Cluster API can create Machines for every selected MachineDeployment".into(),
        ));
    }
    let reason = if failed.is_empty() {
        "ScaleUpBlocked"
    } else {
        "Failed"
    };
    failed.extend(blocked);
    Some((
        ConditionStatus::False,
        reason,
        format!(
            "{}; their offerings are unavailable until Cluster API recovers",
            named(&failed, "; ")
        ),
    ))
}

/// The `MachineDeploymentsPriced` condition for the instance types `catalogue` holds, or
/// `None` when it holds none. Pure.
#[must_use]
pub fn pricing(catalogue: &Catalogue) -> Option<Advisory> {
    let mut unpriced = Vec::new();
    let mut priced = 0usize;
    for (_, origin) in catalogue.entries().iter().flat_map(|e| e.offerings()) {
        if origin.price_source == PriceSource::Unpriced {
            unpriced.push(format!("{:#}", origin.machine_deployment));
        } else {
            priced += 1;
        }
    }
    if unpriced.is_empty() {
        return (priced > 0).then(|| {
            (
                ConditionStatus::True,
                "Priced",
                "every selected MachineDeployment has a price".into(),
            )
        });
    }
    unpriced.sort();
    unpriced.dedup();
    let how = format!(
        "annotate them with {} (per hour) or add spec.prices",
        api::well_known::capi::PRICE
    );
    Some(if priced == 0 {
        (
            ConditionStatus::False,
            "NoPrices",
            format!(
                "no selected MachineDeployment has a price: provisioning cannot prefer the cheapest (equal ranks go by instance-type name), and consolidation removes nodes but never replaces one with a cheaper one; {how}"
            ),
        )
    } else {
        (
            ConditionStatus::False,
            "Unpriced",
            format!(
                "{} {} no price: unpriced is not cheaper than anything, so they launch only when no priced MachineDeployment fits, and consolidation neither replaces their nodes nor replaces a node with them; {how}",
                named(&unpriced, ", "),
                if unpriced.len() == 1 { "has" } else { "have" }
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    fn md(name: &str, uid: &str) -> MachineDeployment {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns", "uid": uid,
                "labels": {"node.cluster.x-k8s.io/karpenter-member": ""}},
            "spec": {"clusterName": "c", "rollout": {"strategy": {"type": "OnDelete"}}}}))
        .unwrap()
    }

    fn set(name: &str, owner: &str, replicas: i32) -> MachineSet {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns", "ownerReferences": [
                {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment",
                 "name": "x", "uid": owner, "controller": true}]},
            "spec": {"clusterName": "c", "replicas": replicas}}))
        .unwrap()
    }

    #[test]
    fn a_machine_deployment_rolling_out_now_is_named_and_the_strategy_kept() {
        let nodeclass: ClusterAPINodeClass =
            serde_json::from_value(json!({"metadata": {"name": "d"}, "spec": {}})).unwrap();
        let mds = [md("a", "ua"), md("b", "ub")];
        let capi = api::CapiVersion::v1beta2();
        let scope = Scope::everywhere();
        let settled = [
            set("a-1", "ua", 2),
            set("a-0", "ua", 0),
            set("b-1", "ub", 1),
        ];
        let (status, reason, message) = rollout(&nodeclass, &mds, &settled, &scope, &capi).unwrap();
        assert_eq!((status, reason), (ConditionStatus::True, "OnDelete"));
        assert!(!message.contains("Rolling out now"), "{message}");
        let rolling = [
            set("a-1", "ua", 2),
            set("a-0", "ua", 1),
            set("b-1", "ub", 1),
        ];
        let (status, reason, message) = rollout(&nodeclass, &mds, &rolling, &scope, &capi).unwrap();
        assert_eq!((status, reason), (ConditionStatus::True, "OnDelete"));
        assert!(
            message.contains(
                "Rolling out now: MachineDeployment ns/a (2 MachineSets hold replicas); until"
            ) && !message.contains("ns/b"),
            "{message}"
        );
    }
}
