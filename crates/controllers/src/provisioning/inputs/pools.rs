//! NodeClasses, MachineDeployments and NodePools → the scheduler's NodePools.
//!
//! Responsibility:
//! - [`catalogues`]: per ClusterAPINodeClass, select its MachineDeployments
//!   ([`clusterapi::select`]), pair each with its infrastructure machine template (matched by
//!   `spec.template.spec.infrastructureRef` kind, name and namespace — the MD's when the ref has
//!   none) and build its [`Catalogue`] ([`clusterapi::build_catalogue`]). A NodeClass being
//!   deleted, with an invalid selector or an invalid spec maps to an error string; MDs left out
//!   of a catalogue are reported as [`CatalogueProblem`]s;
//! - [`node_pools`]: NodePools → `scheduling::scheduler::NodePool`s. Kept: not being deleted,
//!   not static (`spec.replicas` unset), `nodeClassRef` a `karpenter.cluster.x-k8s.io`
//!   `ClusterAPINodeClass` with a usable catalogue, valid requirements/taints/limits. The
//!   others are [`DroppedNodePool`]s with the reason. Readiness conditions are NOT checked here
//!   (a dump's NodePools often have no status): the provisioner filters on `Ready` before
//!   calling this.
//!
//! Inputs: `api` objects, infrastructure templates as JSON, a [`Scope`]. Outputs: catalogues,
//! scheduler NodePools and problems as values.

use std::collections::BTreeMap;
use std::sync::Arc;

use api::well_known::labels::NODECLASS;
use api::{ClusterAPINodeClass, MachineDeployment};
use clusterapi::{Catalogue, MachineDeploymentInput, MachineDeploymentRef, Scope};
use scheduling::instance_type::InstanceType;
use scheduling::labels::WellKnownLabels;
use scheduling::requirements::{Operator, Requirement, Requirements, validate_requirement};
use scheduling::resources::Resources;
use scheduling::scheduler::NodePool;
use scheduling::taints::Taint;

/// The API group of our NodeClass.
pub const NODE_CLASS_GROUP: &str = "karpenter.cluster.x-k8s.io";
/// The kind of our NodeClass.
pub const NODE_CLASS_KIND: &str = "ClusterAPINodeClass";

/// NodeClass name → its catalogue, or why it cannot be used.
pub type Catalogues = BTreeMap<String, Result<Catalogue, String>>;

/// Something wrong with one NodeClass's inputs that does not stop the others.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CatalogueProblem {
    /// The ClusterAPINodeClass.
    pub node_class: String,
    /// What is wrong (an MD left out, an unusable NodeClass).
    pub message: String,
}

/// A NodePool the scheduler will not use, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DroppedNodePool {
    /// The NodePool.
    pub name: String,
    /// Why.
    pub reason: String,
}

/// Builds the catalogue of every NodeClass from the MachineDeployments in `scope`.
/// `in_flight` holds replicas requested but not yet visible per MD (empty for `plan`).
#[must_use]
pub fn catalogues(
    node_classes: &[ClusterAPINodeClass],
    machine_deployments: &[MachineDeployment],
    templates: &[serde_json::Value],
    scope: &Scope,
    in_flight: &BTreeMap<MachineDeploymentRef, u32>,
) -> (Catalogues, Vec<CatalogueProblem>) {
    let mut out = Catalogues::new();
    let mut problems = Vec::new();
    for node_class in node_classes {
        let name = node_class.metadata.name.clone().unwrap_or_default();
        let result = catalogue(node_class, machine_deployments, templates, scope, in_flight);
        match &result {
            Ok(catalogue) => {
                problems.extend(catalogue.problems().iter().map(|p| CatalogueProblem {
                    node_class: name.clone(),
                    message: p.to_string(),
                }))
            }
            Err(message) => problems.push(CatalogueProblem {
                node_class: name.clone(),
                message: message.clone(),
            }),
        }
        out.insert(name, result);
    }
    (out, problems)
}

fn catalogue(
    node_class: &ClusterAPINodeClass,
    machine_deployments: &[MachineDeployment],
    templates: &[serde_json::Value],
    scope: &Scope,
    in_flight: &BTreeMap<MachineDeploymentRef, u32>,
) -> Result<Catalogue, String> {
    if node_class.metadata.deletion_timestamp.is_some() {
        return Err("the ClusterAPINodeClass is being deleted".into());
    }
    let selected = clusterapi::select(
        machine_deployments,
        node_class.spec.scalable_resource_selector.as_ref(),
        scope,
    )
    .map_err(|e| format!("spec.scalableResourceSelector: {e}"))?;
    let inputs: Vec<MachineDeploymentInput<'_>> = selected
        .into_iter()
        .map(|md| {
            let mut input = MachineDeploymentInput::new(md).with_in_flight(
                in_flight
                    .get(&MachineDeploymentRef::of(md))
                    .copied()
                    .unwrap_or(0),
            );
            if let Some(template) = infrastructure_template(md, templates) {
                input = input.with_infrastructure_template(template);
            }
            input
        })
        .collect();
    clusterapi::build_catalogue(&node_class.spec, &inputs).map_err(|e| e.to_string())
}

/// The template `md.spec.template.spec.infrastructureRef` names, if present in `templates`.
#[must_use]
pub fn infrastructure_template<'a>(
    md: &MachineDeployment,
    templates: &'a [serde_json::Value],
) -> Option<&'a serde_json::Value> {
    let reference = &md.spec.template.spec.infrastructure_ref;
    let kind = reference.kind.as_deref()?;
    let name = reference.name.as_deref()?;
    let namespace = reference
        .namespace
        .as_deref()
        .filter(|n| !n.is_empty())
        .or(md.metadata.namespace.as_deref())
        .unwrap_or_default();
    templates.iter().find(|t| {
        t.get("kind").and_then(|v| v.as_str()) == Some(kind)
            && t.pointer("/metadata/name").and_then(|v| v.as_str()) == Some(name)
            && t.pointer("/metadata/namespace")
                .and_then(|v| v.as_str())
                .unwrap_or_default()
                == namespace
    })
}

/// The NodePools the scheduler may use, built with their NodeClass's instance types, and the
/// ones it may not, with the reason. Output order follows the input.
#[must_use]
pub fn node_pools(
    pools: &[api::NodePool],
    catalogues: &Catalogues,
    well_known: &WellKnownLabels,
) -> (Vec<NodePool>, Vec<DroppedNodePool>) {
    let mut kept = Vec::new();
    let mut dropped = Vec::new();
    for pool in pools {
        let name = pool.metadata.name.clone().unwrap_or_default();
        match node_pool(pool, catalogues, well_known) {
            Ok(p) => kept.push(p),
            Err(reason) => dropped.push(DroppedNodePool { name, reason }),
        }
    }
    (kept, dropped)
}

/// The NodeClass a NodePool refers to, if it is one of ours.
#[must_use]
pub fn node_class_of(pool: &api::NodePool) -> Option<&str> {
    let reference = &pool.spec.template.spec.node_class_ref;
    (reference.group == NODE_CLASS_GROUP && reference.kind == NODE_CLASS_KIND)
        .then_some(reference.name.as_str())
}

fn node_pool(
    pool: &api::NodePool,
    catalogues: &Catalogues,
    well_known: &WellKnownLabels,
) -> Result<NodePool, String> {
    if pool.metadata.deletion_timestamp.is_some() {
        return Err("the NodePool is being deleted".into());
    }
    if pool.spec.is_static() {
        return Err("static NodePool (spec.replicas is set): not provisioned for pods".into());
    }
    let reference = &pool.spec.template.spec.node_class_ref;
    let Some(class) = node_class_of(pool) else {
        return Err(format!(
            "spec.template.spec.nodeClassRef {}/{} {} is not a {NODE_CLASS_GROUP} {NODE_CLASS_KIND}",
            reference.group, reference.kind, reference.name
        ));
    };
    let catalogue = match catalogues.get(class) {
        None => return Err(format!("{NODE_CLASS_KIND} {class:?} not found")),
        Some(Err(e)) => return Err(format!("{NODE_CLASS_KIND} {class:?}: {e}")),
        Some(Ok(catalogue)) => catalogue,
    };
    scheduler_node_pool(pool, catalogue.instance_types(), well_known)
}

/// `pool` as the scheduler needs it, with `instance_types` (from the cloud provider): its
/// requirements, labels (plus the NodeClass label), taints and limits validated.
///
/// # Errors
/// A message naming the offending field (`spec.template.spec.requirements[0]: …`).
pub fn scheduler_node_pool(
    pool: &api::NodePool,
    instance_types: Vec<Arc<InstanceType>>,
    well_known: &WellKnownLabels,
) -> Result<NodePool, String> {
    // The same runtime validation as the NodePool's `ValidationSucceeded` condition, so the
    // provisioner and `plan` refuse exactly the pools that condition calls invalid.
    crate::nodepool::validation::validate(pool, well_known)?;
    let name = pool.metadata.name.as_deref().unwrap_or_default();
    let class = pool.spec.template.spec.node_class_ref.name.as_str();
    let spec = &pool.spec.template.spec;
    let mut requirements = Requirements::new();
    for (i, r) in spec.requirements.iter().enumerate() {
        let field = format!("spec.template.spec.requirements[{i}]");
        let min_values = r
            .min_values
            .map(|m| usize::try_from(m).map_err(|_| format!("{field}.minValues: {m} < 0")))
            .transpose()?;
        validate_requirement(
            &r.key,
            r.operator.as_str(),
            r.values(),
            min_values,
            well_known,
        )
        .map_err(|e| format!("{field}: {e}"))?;
        let operator: Operator = r
            .operator
            .as_str()
            .parse()
            .map_err(|e| format!("{field}.operator: {e}"))?;
        let requirement = Requirement::new(
            r.key.as_str(),
            operator,
            r.values().iter().map(String::as_str),
        )
        .map_err(|e| format!("{field}: {e}"))?;
        requirements.add(requirement.with_min_values(min_values));
    }
    let mut labels: BTreeMap<Arc<str>, Arc<str>> = pool
        .spec
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.as_ref())
        .into_iter()
        .flatten()
        .map(|(k, v)| (Arc::from(k.as_str()), Arc::from(v.as_str())))
        .collect();
    labels.insert(Arc::from(NODECLASS), Arc::from(class));
    let limits = pool
        .spec
        .limits
        .as_ref()
        .map(|l| Resources::parse(l.iter().map(|(k, v)| (k.as_str(), v.0.as_str()))))
        .transpose()
        .map_err(|e| format!("spec.limits: {e}"))?;
    Ok(NodePool {
        name: Arc::from(name),
        weight: pool.spec.weight.unwrap_or(0),
        requirements,
        labels,
        taints: taints(spec.taints.as_deref(), "spec.template.spec.taints")?,
        startup_taints: taints(
            spec.startup_taints.as_deref(),
            "spec.template.spec.startupTaints",
        )?,
        limits,
        instance_types,
    })
}

/// Converts API taints (the effect is already typed, so this only fails on an effect the
/// engine does not know).
pub(crate) fn taints(
    taints: Option<&[api::common::Taint]>,
    field: &str,
) -> Result<Vec<Taint>, String> {
    taints
        .unwrap_or_default()
        .iter()
        .enumerate()
        .map(|(i, t)| {
            Ok(Taint {
                key: t.key.clone(),
                value: t.value_or_empty().to_owned(),
                effect: t
                    .effect
                    .as_str()
                    .parse()
                    .map_err(|e| format!("{field}[{i}].effect: {e}"))?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests;
