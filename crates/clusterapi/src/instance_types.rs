//! MachineDeployments → Karpenter instance types: the [`Catalogue`].
//!
//! Responsibility: describe what each selected MachineDeployment (MD) would launch, as the
//! scheduler's [`InstanceType`]s, and remember which MD backs each offering.
//! Inputs: [`MachineDeploymentInput`]s (the MD, optionally its infrastructure machine template
//! as JSON, and the replicas requested but not yet visible in `spec.replicas`) and the NodeClass
//! spec. Output: a [`Catalogue`] (instance types sorted by name, plus the MDs excluded and why),
//! or a [`NodeClassError`] when the NodeClass itself is unusable.
//!
//! Per MD (module `derive`):
//! - **capacity**: the infrastructure template's `status.capacity`, overridden per resource by
//!   the annotations (cpu, memory, ephemeral-disk → `ephemeral-storage`, gpu-type = gpu-count);
//!   `pods` = maxPods, else the template's `pods`, else 110. cpu and memory are required;
//! - **labels**: the MD template labels CAPI propagates to Nodes (`node-role.kubernetes.io`
//!   exactly; `node-restriction.kubernetes.io`, `node.cluster.x-k8s.io` and their subdomains; a
//!   key without `/` is all domain), then the labels annotation on top; `kubernetes.io/arch` and
//!   `kubernetes.io/os` default to the template's `status.nodeInfo`, else `amd64` / `linux`;
//!   `karpenter.cluster.x-k8s.io/instance-cpu` (cores, rounded up) and `…/instance-memory` (MiB)
//!   are added from capacity;
//! - **name**: the `node.kubernetes.io/instance-type` label; else derived from the MD (see
//!   `derive::derived_name`: `<namespace>-<name>` cut to 54 characters, `-`, 8 hex digits of
//!   the FNV-1a hash of `namespace/name`: stable, unique, a valid label value) and added to the
//!   labels, so NodeClaims and Nodes carry it;
//! - **offering**: zone = the zone label, else `spec.template.spec.failureDomain`, else `""` (no
//!   zone); capacity type = the `karpenter.sh/capacity-type` label (`on-demand` or `spot`), else
//!   `on-demand`; price = our annotation `karpenter.cluster.x-k8s.io/price`, else the legacy
//!   `cluster.x-k8s.io/machine-current-price`, else the NodeClass table, else unpriced (not
//!   cheaper than anything: ranked after every priced offering, never a cheaper replacement) —
//!   recorded as a [`PriceSource`]; unavailable while paused, deleting, `Failed` or its scale-up is blocked
//!   (the `ScalingUp` condition: preflight checks), after a failed launch
//!   (for the unavailable-offering TTL), or once `spec.replicas` + in-flight
//!   increments reach the max-size annotation ([`Unavailable`]);
//! - **overhead**: the NodeClass kubeReserved + systemReserved + evictionHard (percentages of
//!   this capacity), so allocatable is what the kubelet will report.
//!
//! **Merging**: MDs that yield the same name become one instance type with one offering per MD
//! (so one per zone / capacity type; two MDs in the same zone give two offerings, each with its
//! MD). They must agree on the shape — capacity, labels other than zone and capacity type,
//! taints; otherwise every MD claiming that name is excluded with a problem (picking one would
//! depend on list order and a Node's instance-type label could not tell them apart).
//!
//! **Errors**: an MD with any bad input is excluded and reported as an
//! [`InvalidMachineDeployment`] per problem; the others are unaffected. Nothing panics.

mod derive;
mod infrastructure;
mod merge;
mod overhead;
mod price;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_merge;
#[cfg(test)]
mod tests_offerings;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use api::nodeclass::{ClusterAPINodeClassSpec, InstanceTypeStatus};
use api::{GroupKind, MachineDeployment, well_known};
use scheduling::instance_type::{InstanceType, Offering};
use scheduling::taints::Taint;

pub use overhead::{DEFAULT_EVICTION_HARD, NodeOverhead};
pub use price::{OfferingFacts, PriceTable};

/// A node group's identity: a MachineDeployment's, or a stand-alone MachineSet's. Displayed
/// `namespace/name`; the alternate form (`{:#}`) names the kind too (`MachineSet ns/name`), for
/// messages.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MachineDeploymentRef {
    /// The namespace.
    pub namespace: String,
    /// The name.
    pub name: String,
    /// The kind of the object.
    pub kind: GroupKind,
}

impl MachineDeploymentRef {
    /// The reference of `md` (missing metadata reads as `""`).
    #[must_use]
    pub fn of(md: &MachineDeployment) -> Self {
        Self {
            namespace: md.metadata.namespace.clone().unwrap_or_default(),
            name: md.metadata.name.clone().unwrap_or_default(),
            kind: md.group_kind,
        }
    }

    /// A name unique among node groups that leaves MachineDeployments as they always read:
    /// `namespace/name` for a MachineDeployment, `<Kind> namespace/name` for the others.
    #[must_use]
    pub fn key(&self) -> String {
        match self.kind {
            GroupKind::MachineDeployment => self.to_string(),
            GroupKind::MachineSet | GroupKind::MachinePool => format!("{self:#}"),
        }
    }

    /// A MachineDeployment's reference.
    #[must_use]
    pub fn deployment(namespace: &str, name: &str) -> Self {
        Self {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            kind: GroupKind::MachineDeployment,
        }
    }

    /// A stand-alone MachineSet's reference.
    #[must_use]
    pub fn machine_set(namespace: &str, name: &str) -> Self {
        Self {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            kind: GroupKind::MachineSet,
        }
    }

    /// A MachinePool's reference.
    #[must_use]
    pub fn machine_pool(namespace: &str, name: &str) -> Self {
        Self {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            kind: GroupKind::MachinePool,
        }
    }
}

impl fmt::Display for MachineDeploymentRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if f.alternate() {
            write!(f, "{} ", self.kind.as_str())?;
        }
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// One MachineDeployment to describe, with what the caller knows besides the object.
#[derive(Debug, Clone, Copy)]
pub struct MachineDeploymentInput<'a> {
    /// The MachineDeployment.
    pub machine_deployment: &'a MachineDeployment,
    /// Its infrastructure machine template (`spec.template.spec.infrastructureRef`) as JSON,
    /// read for `status.capacity` and `status.nodeInfo`; `None` when not fetched or absent.
    pub infrastructure_template: Option<&'a serde_json::Value>,
    /// Replicas requested (e.g. in a running batch) but not yet in `spec.replicas`.
    pub in_flight: u32,
    /// A launch on it failed within the unavailable-offering TTL.
    pub launch_failed: bool,
    /// Cluster API reports its scale-up blocked ([`crate::scale_up::blocked`], which reads its
    /// MachineSets too; the MachineDeployment's own condition is read regardless).
    pub scale_up_blocked: bool,
}

impl<'a> MachineDeploymentInput<'a> {
    /// `md` alone: no template, nothing in flight.
    #[must_use]
    pub fn new(md: &'a MachineDeployment) -> Self {
        Self {
            machine_deployment: md,
            infrastructure_template: None,
            in_flight: 0,
            launch_failed: false,
            scale_up_blocked: false,
        }
    }

    /// With Cluster API reporting its scale-up blocked (from its MachineSets).
    #[must_use]
    pub fn with_scale_up_blocked(mut self, blocked: bool) -> Self {
        self.scale_up_blocked = blocked;
        self
    }

    /// With a recent launch failure (unavailable until the TTL passes).
    #[must_use]
    pub fn with_launch_failed(mut self, failed: bool) -> Self {
        self.launch_failed = failed;
        self
    }

    /// With its infrastructure template.
    #[must_use]
    pub fn with_infrastructure_template(mut self, template: &'a serde_json::Value) -> Self {
        self.infrastructure_template = Some(template);
        self
    }

    /// With `in_flight` replicas requested but not yet visible.
    #[must_use]
    pub fn with_in_flight(mut self, in_flight: u32) -> Self {
        self.in_flight = in_flight;
        self
    }
}

/// A node group (MachineDeployment or stand-alone MachineSet) left out of the catalogue
/// because of bad input: one per problem.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} {namespace}/{name}: {message}", kind.as_str())]
pub struct InvalidMachineDeployment {
    /// The MD's namespace.
    pub namespace: String,
    /// The MD's name.
    pub name: String,
    /// Its kind.
    pub kind: GroupKind,
    /// The annotation at fault — or, for input that is not an annotation, the field
    /// (`spec.template.spec.failureDomain`, `<Kind>/<name> status.capacity.cpu`, …).
    pub annotation: String,
    /// What is wrong, for a condition or an Event (names the annotation and the bad text).
    pub message: String,
}

/// Where an offering's price came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PriceSource {
    /// The MD annotation `karpenter.cluster.x-k8s.io/price`.
    Annotation,
    /// The MD annotation `cluster.x-k8s.io/machine-current-price` (upstream's e2e key).
    LegacyAnnotation,
    /// The NodeClass `spec.prices` entry at this index.
    NodeClass {
        /// Index into `spec.prices`.
        entry: usize,
    },
    /// Nothing priced it: an unpriced offering (price 0, ranked after every priced one; see
    /// [`scheduling::instance_type::PriceRank`]).
    Unpriced,
}

impl std::fmt::Display for PriceSource {
    /// `annotation`, `legacy annotation`, `nodeclass spec.prices[N]` or `none (0)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Annotation => f.write_str("annotation"),
            Self::LegacyAnnotation => f.write_str("legacy annotation"),
            Self::NodeClass { entry } => write!(f, "nodeclass spec.prices[{entry}]"),
            Self::Unpriced => f.write_str("none (0)"),
        }
    }
}

/// Why an offering cannot be launched now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Unavailable {
    /// The MD is paused (`spec.paused` or the `cluster.x-k8s.io/paused` annotation).
    #[error("the MachineDeployment is paused")]
    Paused,
    /// The MD is being deleted.
    #[error("the MachineDeployment is being deleted")]
    Deleting,
    /// `spec.replicas` + in-flight increments reached the max-size annotation.
    #[error("{replicas} replicas + {in_flight} in flight reach the max size {max_size}")]
    AtMaxSize {
        /// `spec.replicas` (unset = 0).
        replicas: i32,
        /// Increments requested but not yet visible.
        in_flight: u32,
        /// The max-size annotation.
        max_size: i32,
    },
    /// Cluster API reports the MD `Failed` (`status.phase`).
    #[error("Cluster API reports the MachineDeployment Failed")]
    Failed,
    /// Cluster API reports that it cannot create Machines for it now (its `ScalingUp`
    /// condition says the scale-up is blocked: MachineSet preflight checks, missing templates).
    #[error("Cluster API reports its scale-up blocked")]
    ScaleUpBlocked,
    /// A launch on it could not complete lately (no Machine could be claimed in time, or the
    /// Machine failed): unavailable for the unavailable-offering TTL, so the next batch picks
    /// another offering.
    #[error("a recent launch on it could not complete")]
    LaunchFailed,
}

/// How an instance type got its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameSource {
    /// The `node.kubernetes.io/instance-type` label.
    Label,
    /// Derived from the (only) MD, which has no instance-type label.
    Derived,
}

/// What backs one offering.
#[derive(Debug, Clone, PartialEq)]
pub struct OfferingOrigin {
    /// The MachineDeployment to scale for this offering.
    pub machine_deployment: MachineDeploymentRef,
    /// Its zone (`""`: none known).
    pub zone: String,
    /// Its capacity type.
    pub capacity_type: String,
    /// Where its price came from.
    pub price_source: PriceSource,
    /// Why it is unavailable, if it is.
    pub unavailable: Option<Unavailable>,
}

/// One instance type with the MachineDeployments behind its offerings.
#[derive(Debug, Clone)]
pub struct CatalogueEntry {
    instance_type: Arc<InstanceType>,
    /// Parallel to `instance_type.offerings()`.
    origins: Vec<OfferingOrigin>,
    labels: BTreeMap<String, String>,
    taints: Vec<Taint>,
    name_source: NameSource,
}

impl CatalogueEntry {
    /// The scheduler's instance type.
    #[must_use]
    pub fn instance_type(&self) -> &Arc<InstanceType> {
        &self.instance_type
    }

    /// The name.
    #[must_use]
    pub fn name(&self) -> &str {
        self.instance_type.name()
    }

    /// How the name was chosen.
    #[must_use]
    pub fn name_source(&self) -> NameSource {
        self.name_source
    }

    /// Each offering with what backs it, in MD (namespace, name) order.
    pub fn offerings(&self) -> impl Iterator<Item = (&Offering, &OfferingOrigin)> {
        self.instance_type.offerings().iter().zip(&self.origins)
    }

    /// The node labels every offering shares (zone and capacity type excluded).
    #[must_use]
    pub fn labels(&self) -> &BTreeMap<String, String> {
        &self.labels
    }

    /// The labels a node launched through `origin` gets: [`Self::labels`] plus its zone (when
    /// known) and capacity type.
    #[must_use]
    pub fn node_labels(&self, origin: &OfferingOrigin) -> BTreeMap<String, String> {
        let mut labels = self.labels.clone();
        if !origin.zone.is_empty() {
            labels.insert(well_known::labels::ZONE.to_owned(), origin.zone.clone());
        }
        labels.insert(
            well_known::labels::CAPACITY_TYPE.to_owned(),
            origin.capacity_type.clone(),
        );
        labels
    }

    /// The taints its nodes register with (v1beta2 `spec.template.spec.taints`, then the taints
    /// annotation, which wins for the same key and effect).
    #[must_use]
    pub fn taints(&self) -> &[Taint] {
        &self.taints
    }

    /// The summary the NodeClass status lists.
    #[must_use]
    pub fn status(&self) -> InstanceTypeStatus {
        let unique = |values: Vec<String>| {
            let mut values = values;
            values.retain(|v| !v.is_empty());
            values.sort();
            values.dedup();
            values
        };
        let origins = &self.origins;
        InstanceTypeStatus {
            name: self.name().to_owned(),
            machine_deployments: origins
                .iter()
                .filter(|o| o.machine_deployment.kind == GroupKind::MachineDeployment)
                .map(|o| o.machine_deployment.to_string())
                .collect(),
            machine_sets: origins
                .iter()
                .filter(|o| o.machine_deployment.kind == GroupKind::MachineSet)
                .map(|o| o.machine_deployment.to_string())
                .collect(),
            machine_pools: origins
                .iter()
                .filter(|o| o.machine_deployment.kind == GroupKind::MachinePool)
                .map(|o| o.machine_deployment.to_string())
                .collect(),
            zones: unique(origins.iter().map(|o| o.zone.clone()).collect()),
            capacity_types: unique(origins.iter().map(|o| o.capacity_type.clone()).collect()),
            available_offerings: i32::try_from(
                origins.iter().filter(|o| o.unavailable.is_none()).count(),
            )
            .unwrap_or(i32::MAX),
        }
    }
}

/// The instance types of a NodeClass, and the MachineDeployments that could not be used.
#[derive(Debug, Clone, Default)]
pub struct Catalogue {
    entries: Vec<CatalogueEntry>,
    problems: Vec<InvalidMachineDeployment>,
}

impl Catalogue {
    /// The instance types, sorted by name.
    #[must_use]
    pub fn entries(&self) -> &[CatalogueEntry] {
        &self.entries
    }

    /// The instance type named `name`.
    #[must_use]
    pub fn get(&self, name: &str) -> Option<&CatalogueEntry> {
        self.entries
            .binary_search_by(|e| e.name().cmp(name))
            .ok()
            .and_then(|i| self.entries.get(i))
    }

    /// The scheduler's instance types, sorted by name.
    #[must_use]
    pub fn instance_types(&self) -> Vec<Arc<InstanceType>> {
        self.entries
            .iter()
            .map(|e| Arc::clone(&e.instance_type))
            .collect()
    }

    /// The MachineDeployments excluded, sorted by namespace, name, annotation.
    #[must_use]
    pub fn problems(&self) -> &[InvalidMachineDeployment] {
        &self.problems
    }

    /// The NodeClass `status.instanceTypes` for this catalogue.
    #[must_use]
    pub fn status(&self) -> Vec<InstanceTypeStatus> {
        self.entries.iter().map(CatalogueEntry::status).collect()
    }
}

/// Why a NodeClass spec cannot be used (every instance type would be wrong).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("ClusterAPINodeClass spec.{field}: {message}")]
pub struct NodeClassError {
    /// The field path under `spec`, e.g. `kubeReserved.cpu`, `prices[2].price`.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

/// Builds the catalogue of `nodeclass` from `inputs` (already selected, see
/// [`crate::selection::select`]).
///
/// # Errors
/// [`NodeClassError`] when the NodeClass overhead or price table is invalid.
pub fn build_catalogue(
    nodeclass: &ClusterAPINodeClassSpec,
    inputs: &[MachineDeploymentInput<'_>],
) -> Result<Catalogue, NodeClassError> {
    let overhead = NodeOverhead::from_spec(nodeclass)?;
    let prices = PriceTable::from_spec(nodeclass)?;
    let mut problems = Vec::new();
    let mut derived = Vec::new();
    for input in inputs {
        match derive::derive(input, &prices) {
            Ok(md) => derived.push(md),
            Err(mut errors) => problems.append(&mut errors),
        }
    }
    let (entries, mut merge_problems) = merge::merge(derived, &overhead);
    problems.append(&mut merge_problems);
    problems.sort_by(|a, b| {
        (&a.namespace, &a.name, &a.annotation).cmp(&(&b.namespace, &b.name, &b.annotation))
    });
    Ok(Catalogue { entries, problems })
}
