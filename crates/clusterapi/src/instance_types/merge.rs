//! Same-named MachineDeployments → one instance type with several offerings.
//!
//! Responsibility: group the derived MachineDeployments by instance-type name, refuse groups
//! whose members disagree on the shape (capacity, labels other than zone and capacity type,
//! taints), and build each group's scheduling [`InstanceType`]: requirements from the shared
//! labels plus `zone In [zones]` and `capacity-type In [types]` over all its offerings, one
//! offering per MachineDeployment (in namespace/name order), capacity, and the NodeClass
//! overhead resolved against that capacity.
//! Inputs: [`DerivedMd`]s, the [`NodeOverhead`]. Outputs: catalogue entries sorted by name, and
//! the problems of the groups that could not be built.

use std::collections::BTreeMap;
use std::sync::Arc;

use api::well_known::capi::capacity::LABELS;
use api::well_known::labels::{CAPACITY_TYPE, ZONE};
use scheduling::instance_type::{InstanceType, InstanceTypeSpec, Offering};
use scheduling::requirements::{Requirement, Requirements};

use super::derive::DerivedMd;
use super::{CatalogueEntry, InvalidMachineDeployment, NodeOverhead, PriceSource};

/// Builds the entries of `derived`.
pub(super) fn merge(
    derived: Vec<DerivedMd>,
    overhead: &NodeOverhead,
) -> (Vec<CatalogueEntry>, Vec<InvalidMachineDeployment>) {
    let mut groups: BTreeMap<String, Vec<DerivedMd>> = BTreeMap::new();
    for md in derived {
        groups.entry(md.name.clone()).or_default().push(md);
    }
    let mut entries = Vec::new();
    let mut problems = Vec::new();
    for (name, mut group) in groups {
        group.sort_by(|a, b| {
            a.origin
                .machine_deployment
                .cmp(&b.origin.machine_deployment)
        });
        match build(&name, &group, overhead) {
            Ok(entry) => entries.push(entry),
            Err(message) => problems.extend(group.iter().map(|md| InvalidMachineDeployment {
                namespace: md.origin.machine_deployment.namespace.clone(),
                name: md.origin.machine_deployment.name.clone(),
                kind: md.origin.machine_deployment.kind,
                annotation: LABELS.to_owned(),
                message: message.clone(),
            })),
        }
    }
    (entries, problems)
}

/// What differs between the members of a group, if anything: `capacity`, `labels`, `taints`.
fn differences(group: &[DerivedMd]) -> Vec<&'static str> {
    let Some(first) = group.first() else {
        return Vec::new();
    };
    let sorted = |md: &DerivedMd| {
        let mut taints = md.taints.clone();
        taints.sort();
        taints
    };
    let mut aspects = Vec::new();
    if group.iter().any(|md| md.capacity != first.capacity) {
        aspects.push("capacity");
    }
    if group.iter().any(|md| md.labels != first.labels) {
        aspects.push("labels");
    }
    if group.iter().any(|md| sorted(md) != sorted(first)) {
        aspects.push("taints");
    }
    aspects
}

/// The entry of one group, or the message every member gets.
fn build(
    name: &str,
    group: &[DerivedMd],
    overhead: &NodeOverhead,
) -> Result<CatalogueEntry, String> {
    let members = || {
        group
            .iter()
            .map(|md| md.origin.machine_deployment.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let differences = differences(group);
    if !differences.is_empty() {
        return Err(format!(
            "instance type {name:?} is claimed by MachineDeployments {} whose {} differ; all of \
             them are excluded until they agree or carry distinct {} labels",
            members(),
            differences.join(" and "),
            api::well_known::labels::INSTANCE_TYPE,
        ));
    }
    let Some(first) = group.first() else {
        return Err(format!("instance type {name:?} has no MachineDeployment"));
    };
    let mut requirements = Requirements::from_labels(&first.labels);
    let values = |pick: fn(&DerivedMd) -> &str| {
        let mut values: Vec<&str> = group.iter().map(pick).collect();
        values.sort_unstable();
        values.dedup();
        values
    };
    requirements.add(Requirement::in_values(ZONE, values(|md| &md.origin.zone)));
    requirements.add(Requirement::in_values(
        CAPACITY_TYPE,
        values(|md| &md.origin.capacity_type),
    ));
    let offerings = group
        .iter()
        .map(|md| {
            let offering = if md.origin.price_source == PriceSource::Unpriced {
                Offering::unpriced(&md.origin.capacity_type, &md.origin.zone)
            } else {
                Offering::new(&md.origin.capacity_type, &md.origin.zone, md.price)
            };
            offering.with_available(md.origin.unavailable.is_none())
        })
        .collect();
    let spec = InstanceTypeSpec {
        name: Arc::from(name),
        requirements,
        offerings,
        capacity: first.capacity.clone(),
        overhead: overhead.for_capacity(&first.capacity),
    };
    let instance_type =
        InstanceType::new(spec).map_err(|e| format!("MachineDeployments {}: {e}", members()))?;
    Ok(CatalogueEntry {
        instance_type: Arc::new(instance_type),
        origins: group.iter().map(|md| md.origin.clone()).collect(),
        labels: first.labels.clone(),
        taints: first.taints.clone(),
        name_source: first.name_source,
    })
}
