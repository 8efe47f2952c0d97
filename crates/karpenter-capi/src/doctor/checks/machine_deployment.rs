//! One MachineDeployment's part of `doctor`'s findings: pure.
//!
//! Responsibility: the [`MachineDeploymentReport`] of one MachineDeployment a NodeClass
//! selects (where its capacity, zone and price come from, its instance type) and its findings:
//! left out of the instance types, unavailable, unpriced, a cluster-autoscaler node group too,
//! failed (`status.phase`), and managed by a ClusterClass topology.
//! Inputs: the [`Facts`], the MachineDeployment, its NodeClass's catalogue. Outputs: the
//! report; findings appended.

use api::MachineDeployment;
use api::well_known::capi::{MAX_SIZE, MIN_SIZE, capacity};
use clusterapi::{Catalogue, MachineDeploymentRef, NameSource, PriceSource};
use controllers::provisioning::inputs::pools::infrastructure_template;

use super::super::report::{Finding, MachineDeploymentReport, Severity};
use super::{Facts, annotation};

/// The label Cluster API's topology controller puts on the MachineDeployments of a
/// ClusterClass-based Cluster.
pub const TOPOLOGY_OWNED: &str = "topology.cluster.x-k8s.io/owned";

pub(super) fn machine_deployment(
    facts: &Facts,
    md: &MachineDeployment,
    catalogue: &Catalogue,
    findings: &mut Vec<Finding>,
) -> MachineDeploymentReport {
    let reference = MachineDeploymentRef::of(md);
    let subject = format!("{reference:#}");
    let template_ref = &md.spec.template.spec.infrastructure_ref;
    let template = infrastructure_template(md, &facts.templates);
    let template_name = format!(
        "{}/{}",
        template_ref.kind.as_deref().unwrap_or("?"),
        template_ref.name.as_deref().unwrap_or("?")
    );
    let annotated = [capacity::CPU, capacity::MEMORY]
        .iter()
        .filter(|k| annotation(md, k).is_some())
        .count();
    let capacity_source = match (annotated, template.is_some()) {
        (2, _) => "annotations".to_owned(),
        (1, true) => format!("annotations + template {template_name} status.capacity"),
        (0, true) => format!("template {template_name} status.capacity"),
        _ => "missing".to_owned(),
    };
    let mut report = MachineDeploymentReport {
        name: reference.key(),
        capacity_source,
        zone_source: "none".to_owned(),
        replicas: md.spec.replicas,
        min_size: annotation(md, MIN_SIZE).map(str::to_owned),
        max_size: annotation(md, MAX_SIZE).map(str::to_owned),
        ..MachineDeploymentReport::default()
    };
    let problems: Vec<String> = catalogue
        .problems()
        .iter()
        .filter(|p| {
            p.namespace == reference.namespace
                && p.name == reference.name
                && p.kind == reference.kind
        })
        .map(|p| p.message.clone())
        .collect();
    let template_error = facts.template_errors.get(&reference.key());
    for p in &problems {
        let mut finding = Finding::new(
            Severity::Warning,
            "machine-deployment-excluded",
            subject.clone(),
            format!("left out of the instance types: {p}"),
        );
        if let Some(e) = template_error {
            finding = finding.hint(format!(
                "its template {template_name} could not be read: {e}"
            ));
        }
        findings.push(finding);
    }
    report.problems = problems;
    let found = catalogue.entries().iter().find_map(|entry| {
        entry
            .offerings()
            .find(|(_, origin)| origin.machine_deployment == reference)
            .map(|(offering, origin)| (entry, offering, origin))
    });
    let Some((entry, offering, origin)) = found else {
        return report;
    };
    let it = entry.instance_type();
    report.instance_type = Some(entry.name().to_owned());
    report.name_source = Some(
        match entry.name_source() {
            NameSource::Label => "label",
            NameSource::Derived => "derived",
        }
        .to_owned(),
    );
    report.capacity = it
        .capacity()
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    report.price = Some(offering.price);
    report.price_source = Some(origin.price_source.to_string());
    report.zone = origin.zone.clone();
    let zone_label = annotation(md, capacity::LABELS)
        .is_some_and(|l| l.contains(scheduling::labels::TOPOLOGY_ZONE))
        || md
            .spec
            .template
            .metadata
            .labels
            .as_ref()
            .is_some_and(|l| l.contains_key(scheduling::labels::TOPOLOGY_ZONE));
    report.zone_source = if report.zone.is_empty() {
        "none"
    } else if zone_label {
        "label"
    } else {
        "spec.template.spec.failureDomain"
    }
    .to_owned();
    report.capacity_type = Some(origin.capacity_type.clone());
    report.labels = entry.node_labels(origin).len();
    report.taints = entry.taints().iter().map(ToString::to_string).collect();
    report.unavailable = origin.unavailable.map(|u| u.to_string());
    if let Some(u) = &report.unavailable {
        findings.push(Finding::new(
            Severity::Warning,
            "machine-deployment-unavailable",
            subject.clone(),
            format!("cannot launch now: {u}"),
        ));
    }
    if origin.price_source == PriceSource::Unpriced {
        findings.push(
            Finding::new(
                Severity::Warning,
                "machine-deployment-unpriced",
                subject.clone(),
                "no price: it is not cheaper than anything, so it launches only when no priced MachineDeployment fits, and consolidation neither replaces its nodes nor replaces a node with it",
            )
            .hint(format!(
                "annotate it with {} (per hour), or add the NodeClass spec.prices",
                api::well_known::capi::PRICE
            )),
        );
    }
    if report.min_size.is_some() && report.max_size.is_some() {
        // Both annotations make it a node group of cluster-autoscaler's clusterapi provider.
        // We read them too (max: the launch ceiling; min: the emptiness floor), so they are
        // expected; they matter when a cluster-autoscaler actually runs.
        let (severity, running) = match &facts.autoscalers {
            Ok(found) if !found.is_empty() => (
                Severity::Warning,
                format!(
                    "; a cluster-autoscaler runs ({}): with the clusterapi provider it scales this MachineDeployment too",
                    found.join(", ")
                ),
            ),
            Ok(_) => (
                Severity::Info,
                "; no cluster-autoscaler Deployment was found, so only karpenter-capi scales it"
                    .to_owned(),
            ),
            Err(_) => (
                Severity::Info,
                "; a cluster-autoscaler with the clusterapi provider would scale it too".to_owned(),
            ),
        };
        findings.push(
            Finding::new(
                severity,
                "autoscaler-node-group",
                subject.clone(),
                format!(
                    "a cluster-autoscaler node group too ({MIN_SIZE} and {MAX_SIZE} are both set){running}"
                ),
            )
            .hint(
                "run one autoscaler per MachineDeployment: stop cluster-autoscaler, or keep this MachineDeployment out of its --node-group-auto-discovery (removing the min-size annotation also removes Karpenter's emptiness floor)",
            ),
        );
    }
    if md.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Failed") {
        findings.push(
            Finding::new(
                Severity::Warning,
                "machine-deployment-failed",
                subject.clone(),
                "Cluster API reports it Failed (status.phase): Machines it makes may never become nodes",
            )
            .hint("see the MachineDeployment's and its MachineSets' conditions (kubectl describe)"),
        );
    }
    let sets: Vec<&api::MachineSet> = facts.machine_sets.iter().collect();
    if let Some(message) = clusterapi::scale_up::blocked(md, &sets) {
        findings.push(
            Finding::new(
                Severity::Warning,
                "machine-deployment-scale-up-blocked",
                subject.clone(),
                format!(
                    "Cluster API cannot create its Machines now: {message}; its offering is \
                     unavailable meanwhile"
                ),
            )
            .hint("MachineSet preflight checks hold scale-ups while the control plane is upgrading or versions are skewed; see the MachineSet's conditions, or list checks to skip in its machineset.cluster.x-k8s.io/skip-preflight-checks annotation"),
        );
    }
    if md
        .metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(TOPOLOGY_OWNED))
    {
        findings.push(
            Finding::new(
                Severity::Info,
                "machine-deployment-topology-managed",
                subject.clone(),
                format!(
                    "managed by a ClusterClass topology ({TOPOLOGY_OWNED}): its replicas are the \
                     topology controller's unless the Cluster's topology leaves them unset"
                ),
            )
            .hint(
                "leave replicas unset for this MachineDeployment in Cluster.spec.topology.workers.machineDeployments, as for the cluster-autoscaler; otherwise the topology controller resets what karpenter-capi writes",
            ),
        );
    }
    report
}
