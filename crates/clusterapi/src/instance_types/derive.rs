//! One MachineDeployment → its instance-type facts and its one offering.
//!
//! Responsibility: combine an MD's annotations, template labels, failure domain, replicas and
//! optional infrastructure template into a [`DerivedMd`] (see the rules in
//! [`super`]'s docs), or every problem that excludes it.
//! Inputs: a [`MachineDeploymentInput`] and the NodeClass [`PriceTable`]. Outputs: a
//! [`DerivedMd`] or [`InvalidMachineDeployment`]s (never empty).

use std::collections::BTreeMap;

use api::well_known::capi::{self, PROPAGATED_LABEL_DOMAINS, capacity};
use api::well_known::labels::{
    ARCH, CAPACITY_TYPE, CAPACITY_TYPE_ON_DEMAND, CAPACITY_TYPE_SPOT, INSTANCE_CPU,
    INSTANCE_MEMORY, INSTANCE_TYPE, OS, ZONE,
};
use scheduling::labels::{ARCH_AMD64, OS_LINUX, validate_label_value};
use scheduling::quantity::Quantity;
use scheduling::resources::{ResourceName, Resources};
use scheduling::taints::{Taint, TaintEffect};

use super::infrastructure::{self, InfrastructureFacts};
use super::price::OfferingFacts;
use super::{
    InvalidMachineDeployment, MachineDeploymentInput, MachineDeploymentRef, NameSource,
    OfferingOrigin, PriceSource, PriceTable, Unavailable,
};
use crate::annotations::{DEFAULT_MAX_PODS, MachineDeploymentAnnotations};
use crate::selection::{is_deleting, is_paused};

/// The one label domain CAPI propagates only exactly (not its subdomains).
const EXACT_ONLY_DOMAIN: &str = "node-role.kubernetes.io";
/// Longest prefix of a derived name: 54 + `-` + 8 hex digits = 63, a label value's limit.
const DERIVED_PREFIX_MAX: usize = 54;
const MIB: i128 = 1 << 20;

/// What one valid MachineDeployment contributes.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct DerivedMd {
    pub(super) name: String,
    pub(super) name_source: NameSource,
    /// Node labels without zone and capacity type.
    pub(super) labels: BTreeMap<String, String>,
    pub(super) capacity: Resources,
    pub(super) taints: Vec<Taint>,
    pub(super) origin: OfferingOrigin,
    pub(super) price: f64,
}

/// Whether CAPI copies the label `key` from Machines to Nodes.
#[must_use]
pub(super) fn is_propagated(key: &str) -> bool {
    let domain = key.split_once('/').map_or(key, |(domain, _)| domain);
    PROPAGATED_LABEL_DOMAINS.iter().any(|parent| {
        domain == *parent
            || (*parent != EXACT_ONLY_DOMAIN
                && domain
                    .strip_suffix(parent)
                    .is_some_and(|rest| rest.ends_with('.')))
    })
}

/// The instance-type name of an MD without an instance-type label: `<namespace>-<name>` (cut to
/// 54 characters, other characters than alphanumerics, `-`, `_`, `.` replaced by `-`, trimmed to
/// start and end alphanumerically; `md` if nothing is left), `-`, then 8 hex digits of the
/// FNV-1a 64-bit hash of `namespace/name`. Stable across restarts and a valid label value.
#[must_use]
pub(super) fn derived_name(md: &MachineDeploymentRef) -> String {
    // A stand-alone MachineSet or a MachinePool may share its namespace and name with a
    // MachineDeployment: its kind is hashed too, so they never derive the same name.
    let key = match md.kind {
        api::GroupKind::MachineDeployment => format!("{}/{}", md.namespace, md.name),
        kind => format!("{} {}/{}", kind.as_str(), md.namespace, md.name),
    };
    let hash = key.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    let prefix: String = format!("{}-{}", md.namespace, md.name)
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .take(DERIVED_PREFIX_MAX)
        .collect();
    let prefix = prefix.trim_matches(|c: char| !c.is_ascii_alphanumeric());
    let prefix = if prefix.is_empty() { "md" } else { prefix };
    format!("{prefix}-{:08x}", hash & 0xffff_ffff)
}

/// Why the MachinePool `md` (its node-group view) cannot be a node group, if it cannot: its
/// InfraMachinePool (`infrastructure`, the object its template's `infrastructureRef` names)
/// does not say `status.infrastructureMachineKind`, so Cluster API makes no Machine per
/// instance and a chosen node could not be removed exactly (lowering replicas would let the
/// provider pick the instance) — or it could not be read, so that is unknown.
fn without_machine_pool_machines(
    md: &api::MachineDeployment,
    infrastructure: Option<&serde_json::Value>,
) -> Option<String> {
    let r = &md.spec.template.spec.infrastructure_ref;
    let named = format!(
        "{}/{}",
        r.kind.as_deref().unwrap_or("InfraMachinePool"),
        r.name.as_deref().unwrap_or_default()
    );
    let Some(infrastructure) = infrastructure else {
        return Some(format!(
            "its infrastructure {named} (spec.template.spec.infrastructureRef) could not be \
             read, so whether it makes MachinePool Machines is unknown; without them a chosen \
             node cannot be removed exactly: not used"
        ));
    };
    let kind = infrastructure
        .pointer("/status/infrastructureMachineKind")
        .and_then(serde_json::Value::as_str)
        .filter(|k| !k.is_empty());
    kind.is_none().then(|| {
        format!(
            "its infrastructure {named} makes no MachinePool Machines (its \
             status.infrastructureMachineKind is unset), so a chosen node cannot be removed \
             exactly: lowering replicas would let the provider pick the instance; not used"
        )
    })
}

/// Derives `input`'s contribution.
pub(super) fn derive(
    input: &MachineDeploymentInput<'_>,
    prices: &PriceTable,
) -> Result<DerivedMd, Vec<InvalidMachineDeployment>> {
    let md = input.machine_deployment;
    let reference = MachineDeploymentRef::of(md);
    let problem = |annotation: &str, message: String| InvalidMachineDeployment {
        namespace: reference.namespace.clone(),
        name: reference.name.clone(),
        kind: reference.kind,
        annotation: annotation.to_owned(),
        message,
    };
    let no_annotations = BTreeMap::new();
    let annotations = MachineDeploymentAnnotations::parse(
        md.metadata.annotations.as_ref().unwrap_or(&no_annotations),
    );
    let infrastructure = input
        .infrastructure_template
        .map(infrastructure::read)
        .transpose();
    let (annotations, infrastructure) = match (annotations, infrastructure) {
        (Ok(a), Ok(i)) => (a, i.unwrap_or_default()),
        (a, i) => {
            let mut problems: Vec<_> = a
                .err()
                .into_iter()
                .flatten()
                .map(|e| problem(e.annotation, e.to_string()))
                .collect();
            problems.extend(i.err().into_iter().flatten().map(|(field, message)| {
                problem(
                    &field,
                    format!("infrastructure template {field}: {message}"),
                )
            }));
            return Err(problems);
        }
    };
    let mut problems = Vec::new();
    if md.group_kind == api::GroupKind::MachinePool
        && let Some(message) = without_machine_pool_machines(md, input.infrastructure_template)
    {
        problems.push(problem("status.infrastructureMachineKind", message));
    }
    let mut labels = node_labels(input, &annotations, &infrastructure);
    let zone = match labels.remove(ZONE).filter(|z| !z.is_empty()) {
        Some(zone) => zone,
        None => {
            let domain = md
                .spec
                .template
                .spec
                .failure_domain
                .clone()
                .unwrap_or_default();
            if let Err(e) = validate_label_value(&domain) {
                let field = "spec.template.spec.failureDomain";
                problems.push(problem(field, format!("{field} is not a zone name: {e}")));
            }
            domain
        }
    };
    let capacity_type = labels
        .remove(CAPACITY_TYPE)
        .unwrap_or_else(|| CAPACITY_TYPE_ON_DEMAND.to_owned());
    if capacity_type != CAPACITY_TYPE_ON_DEMAND && capacity_type != CAPACITY_TYPE_SPOT {
        problems.push(problem(
            capacity::LABELS,
            format!(
                "annotation {}: capacity type {capacity_type:?} is not on-demand or spot",
                capacity::LABELS
            ),
        ));
    }
    let capacity = node_capacity(&annotations, &infrastructure);
    for (resource, annotation) in [
        (ResourceName::CPU, capacity::CPU),
        (ResourceName::MEMORY, capacity::MEMORY),
    ] {
        if capacity.get(&resource).is_none() {
            problems.push(problem(
                annotation,
                format!(
                    "no {resource} capacity: set annotation {annotation} (or have the \
                     infrastructure template publish status.capacity.{resource})"
                ),
            ));
        }
    }
    let (name, name_source) = match labels.get(INSTANCE_TYPE) {
        Some(name) if name.is_empty() => {
            problems.push(problem(
                capacity::LABELS,
                format!("annotation {}: {INSTANCE_TYPE} is empty", capacity::LABELS),
            ));
            (String::new(), NameSource::Label)
        }
        Some(name) => (name.clone(), NameSource::Label),
        None => (derived_name(&reference), NameSource::Derived),
    };
    if !problems.is_empty() {
        return Err(problems);
    }
    labels.insert(INSTANCE_TYPE.to_owned(), name.clone());
    add_size_labels(&mut labels, &capacity);
    let facts = OfferingFacts {
        instance_type: &name,
        machine_deployment: &reference,
        zone: &zone,
        capacity_type: &capacity_type,
    };
    let (price, price_source) = match annotations.price {
        Some(p) if p.annotation == capi::PRICE => (p.price, PriceSource::Annotation),
        Some(p) => (p.price, PriceSource::LegacyAnnotation),
        None => prices
            .lookup(&facts)
            .map_or((0.0, PriceSource::Unpriced), |(price, entry)| {
                (price, PriceSource::NodeClass { entry })
            }),
    };
    let taints = node_taints(md, &annotations.taints, &problem, &mut problems);
    if !problems.is_empty() {
        return Err(problems);
    }
    let unavailable = availability(input, annotations.max_size);
    Ok(DerivedMd {
        name,
        name_source,
        labels,
        capacity,
        taints,
        origin: OfferingOrigin {
            machine_deployment: reference.clone(),
            zone,
            capacity_type,
            price_source,
            unavailable,
        },
        price,
    })
}

/// The Node's taints: the template's (v1beta2 `spec.template.spec.taints`, Cluster API v1.12+;
/// `Always` and `OnInitialization` both reach a new Node), then the taints annotation, which
/// wins for the same key and effect, as the cluster-autoscaler reads them. A template taint
/// whose effect is not a taint effect is a problem naming its field.
fn node_taints(
    md: &api::MachineDeployment,
    annotated: &[Taint],
    problem: &dyn Fn(&str, String) -> InvalidMachineDeployment,
    problems: &mut Vec<InvalidMachineDeployment>,
) -> Vec<Taint> {
    let mut taints: Vec<Taint> = Vec::new();
    for (i, t) in md.spec.template.spec.taints.iter().flatten().enumerate() {
        match t.effect.parse::<TaintEffect>() {
            Ok(effect) if !t.key.is_empty() => taints.push(Taint::new(
                t.key.clone(),
                t.value.clone().unwrap_or_default(),
                effect,
            )),
            Ok(_) => {
                let field = format!("spec.template.spec.taints[{i}].key");
                problems.push(problem(&field, format!("{field} is empty")));
            }
            Err(e) => {
                let field = format!("spec.template.spec.taints[{i}].effect");
                problems.push(problem(&field, format!("{field}: {e}")));
            }
        }
    }
    for a in annotated {
        taints.retain(|t| (&t.key, t.effect) != (&a.key, a.effect));
        taints.push(a.clone());
    }
    taints
}

/// Propagated template labels, then the labels annotation, then arch / os defaults.
fn node_labels(
    input: &MachineDeploymentInput<'_>,
    annotations: &MachineDeploymentAnnotations,
    infrastructure: &InfrastructureFacts,
) -> BTreeMap<String, String> {
    let template = input
        .machine_deployment
        .spec
        .template
        .metadata
        .labels
        .iter()
        .flatten();
    let mut labels: BTreeMap<String, String> = template
        .filter(|(key, _)| is_propagated(key))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    labels.extend(annotations.labels.clone());
    let arch = infrastructure.architecture.as_deref().unwrap_or(ARCH_AMD64);
    labels
        .entry(ARCH.to_owned())
        .or_insert_with(|| arch.to_owned());
    let os = infrastructure
        .operating_system
        .as_deref()
        .unwrap_or(OS_LINUX);
    labels.entry(OS.to_owned()).or_insert_with(|| os.to_owned());
    labels
}

/// The template's capacity, overridden by the annotations; pods defaulted.
fn node_capacity(
    annotations: &MachineDeploymentAnnotations,
    infrastructure: &InfrastructureFacts,
) -> Resources {
    let mut capacity = infrastructure.capacity.clone();
    let overrides = [
        (ResourceName::CPU, annotations.cpu),
        (ResourceName::MEMORY, annotations.memory),
        (
            ResourceName::EPHEMERAL_STORAGE,
            annotations.ephemeral_storage,
        ),
        (
            ResourceName::PODS,
            annotations.max_pods.map(Quantity::from_value),
        ),
    ];
    for (resource, quantity) in overrides {
        if let Some(quantity) = quantity {
            capacity.insert(resource, quantity);
        }
    }
    if let Some((resource, count)) = &annotations.gpu {
        capacity.insert(ResourceName::new(resource), *count);
    }
    if capacity
        .get(&ResourceName::PODS)
        .is_none_or(Quantity::is_zero)
    {
        capacity.insert(ResourceName::PODS, Quantity::from_value(DEFAULT_MAX_PODS));
    }
    capacity
}

/// `karpenter.cluster.x-k8s.io/instance-cpu` (cores, rounded up) and `…/instance-memory` (MiB,
/// rounded down), unless the labels annotation set them.
fn add_size_labels(labels: &mut BTreeMap<String, String>, capacity: &Resources) {
    let cpu = capacity.get_or_zero(&ResourceName::CPU).value();
    let memory = capacity.get_or_zero(&ResourceName::MEMORY).as_nanos() / 1_000_000_000 / MIB;
    labels
        .entry(INSTANCE_CPU.to_owned())
        .or_insert_with(|| cpu.to_string());
    labels
        .entry(INSTANCE_MEMORY.to_owned())
        .or_insert_with(|| memory.to_string());
}

/// Why the MD's offering cannot launch now, if it cannot.
fn availability(input: &MachineDeploymentInput<'_>, max_size: Option<i32>) -> Option<Unavailable> {
    let md = input.machine_deployment;
    if is_paused(md) {
        return Some(Unavailable::Paused);
    }
    if is_deleting(md) {
        return Some(Unavailable::Deleting);
    }
    if md.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Failed") {
        return Some(Unavailable::Failed);
    }
    if input.scale_up_blocked
        || md
            .status
            .as_ref()
            .and_then(|s| s.scale_up_blocked())
            .is_some()
    {
        return Some(Unavailable::ScaleUpBlocked);
    }
    if input.launch_failed {
        return Some(Unavailable::LaunchFailed);
    }
    let max_size = max_size?;
    let replicas = md.spec.replicas.unwrap_or(0).max(0);
    (i64::from(replicas) + i64::from(input.in_flight) >= i64::from(max_size)).then_some(
        Unavailable::AtMaxSize {
            replicas,
            in_flight: input.in_flight,
            max_size,
        },
    )
}
