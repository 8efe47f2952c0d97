//! The advisory conditions of a ClusterAPINodeClass: warnings about the MachineDeployments it
//! selects that do not change `Ready`.
//!
//! Responsibility, pure:
//! - [`rollout`]: `RolloutStrategyCompatible` — False (reason `RollingUpdate`) while a selected
//!   MachineDeployment would let Cluster API replace its Machines itself on a template change,
//!   True (reason `OnDelete`) when every one uses `OnDelete`; the field is named as the served
//!   Cluster API version spells it.
//! - [`health`]: `MachineDeploymentsHealthy` — False while Cluster API reports a selected
//!   MachineDeployment `Failed` (reason `Failed`) or its scale-up blocked (reason
//!   `ScaleUpBlocked`: MachineSet preflight checks, missing templates;
//!   [`crate::scale_up::blocked`]), naming them and why; those offerings are unavailable meanwhile. True (reason
//!   `Healthy`) otherwise.
//!
//! Both are `None` when the NodeClass selects nothing (or its selector is invalid).
//! Inputs: the NodeClass, the MachineDeployments (and their MachineSets), the scope. Outputs: (status, reason, message).

use api::common::ConditionStatus;
use api::{ClusterAPINodeClass, MachineDeployment, MachineSet};

use crate::instance_types::MachineDeploymentRef;
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
/// `None` when it selects no MachineDeployment (or its selector is invalid). Pure.
#[must_use]
pub fn rollout(
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
        let name = MachineDeploymentRef::of(md);
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
            "MachineDeployment {}; their offerings are unavailable until Cluster API recovers",
            named(&failed, "; ")
        ),
    ))
}
