//! Which MachineDeployments a ClusterAPINodeClass may use: discovery and scoping, as a pure
//! function.
//!
//! Node groups are MachineDeployments and stand-alone MachineSets (no MachineDeployment owns
//! them, as the cluster-autoscaler decides): [`stand_alone`] turns the latter into
//! [`MachineDeployment::from_machine_set`] views, which every rule below reads the same way
//! (member label, selector, scope, paused annotation).
//!
//! Responsibility: from the MachineDeployments of the management cluster, keep those that
//! 1. carry the member label `node.cluster.x-k8s.io/karpenter-member` (any value, `""`
//!    included). This filter is applied **whatever the selector**: upstream replaced it with a
//!    non-nil selector, so `{}` selected every MachineDeployment of the management cluster;
//! 2. match the NodeClass `scalableResourceSelector` with `metav1.LabelSelector` semantics
//!    (`matchLabels` AND `matchExpressions`; an absent or empty selector matches all members);
//! 3. lie in the configured namespace (if any) and belong to the configured cluster (if any):
//!    the `cluster.x-k8s.io/cluster-name` label, or `spec.clusterName` when the label is absent.
//!
//! Paused MachineDeployments (`spec.paused: true` or the `cluster.x-k8s.io/paused` annotation,
//! any value) are still selected — they are part of the NodeClass — but never scaled: the
//! instance-type builder marks their offerings unavailable (see [`is_paused`]).
//! Inputs: MachineDeployments, an optional selector, a [`Scope`]. Outputs: the selected
//! MachineDeployments in input order, or a [`SelectorError`] when the selector is invalid (an
//! invalid selector selects nothing rather than everything).

mod selector;

#[cfg(test)]
mod tests;

use api::well_known::capi::{CLUSTER_NAME, KARPENTER_MEMBER, PAUSED};
use api::{MachineDeployment, MachineSet};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

pub use selector::{Selector, SelectorError};

/// The stand-alone MachineSets of `sets` as node groups ([`MachineSet::is_stand_alone`],
/// [`MachineDeployment::from_machine_set`]), in input order.
pub fn stand_alone<'a>(
    sets: impl IntoIterator<Item = &'a MachineSet>,
) -> impl Iterator<Item = MachineDeployment> {
    sets.into_iter()
        .filter(|s| s.is_stand_alone())
        .map(MachineDeployment::from_machine_set)
}

/// Where MachineDeployments may come from. `None` fields do not restrict.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scope {
    /// Only MachineDeployments in this namespace.
    pub namespace: Option<String>,
    /// Only MachineDeployments of this Cluster.
    pub cluster_name: Option<String>,
}

impl Scope {
    /// No restriction: every namespace, every cluster.
    #[must_use]
    pub fn everywhere() -> Self {
        Self::default()
    }

    /// Whether `md` is inside this scope.
    #[must_use]
    pub fn contains(&self, md: &MachineDeployment) -> bool {
        let namespace_ok = self
            .namespace
            .as_deref()
            .is_none_or(|ns| md.metadata.namespace.as_deref() == Some(ns));
        let cluster_ok = self
            .cluster_name
            .as_deref()
            .is_none_or(|cluster| cluster_of(md) == cluster);
        namespace_ok && cluster_ok
    }
}

/// The Cluster a MachineDeployment belongs to: its `cluster.x-k8s.io/cluster-name` label, else
/// `spec.clusterName`.
#[must_use]
pub fn cluster_of(md: &MachineDeployment) -> &str {
    md.metadata
        .labels
        .as_ref()
        .and_then(|labels| labels.get(CLUSTER_NAME))
        .map_or(md.spec.cluster_name.as_str(), String::as_str)
}

/// Whether `md` opted in: it carries the member label, whatever its value.
#[must_use]
pub fn is_member(md: &MachineDeployment) -> bool {
    md.metadata
        .labels
        .as_ref()
        .is_some_and(|labels| labels.contains_key(KARPENTER_MEMBER))
}

/// Whether `md` is paused: `spec.paused: true`, or the `cluster.x-k8s.io/paused` annotation
/// present (CAPI checks presence only). Paused MachineDeployments are never scaled.
#[must_use]
pub fn is_paused(md: &MachineDeployment) -> bool {
    md.spec.paused == Some(true)
        || md
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|annotations| annotations.contains_key(PAUSED))
}

/// Whether `md` is being deleted (a deletion timestamp is set). Never scaled either.
#[must_use]
pub fn is_deleting(md: &MachineDeployment) -> bool {
    md.metadata.deletion_timestamp.is_some()
}

/// The member MachineDeployments in `scope` that `selector` matches, in input order.
///
/// # Errors
/// [`SelectorError`] when the selector is invalid (checked even if there is nothing to select).
pub fn select<'a, I>(
    mds: I,
    selector: Option<&LabelSelector>,
    scope: &Scope,
) -> Result<Vec<&'a MachineDeployment>, SelectorError>
where
    I: IntoIterator<Item = &'a MachineDeployment>,
{
    let selector = selector.map(Selector::new).transpose()?;
    Ok(mds
        .into_iter()
        .filter(|md| is_member(md) && scope.contains(md))
        .filter(|md| {
            selector
                .as_ref()
                .is_none_or(|s| s.matches(md.metadata.labels.as_ref()))
        })
        .collect())
}
