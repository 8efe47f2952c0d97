//! From what `doctor` read to what it found: pure.
//!
//! Responsibility: turn [`Facts`] (CRDs served, permission answers, NodeClasses, NodePools,
//! MachineDeployments and their templates, cluster-autoscaler Deployments) into
//! [`Finding`]s and the NodeClass / NodePool inventories, with the provisioner's own code:
//! [`inputs::catalogues`] builds each NodeClass's instance types exactly as `run` does, and
//! [`inputs::scheduler_node_pool`] validates each NodePool as `run` does, so `doctor` cannot
//! disagree with the controller about what it can launch; with the `NodeOverlay` gate, the
//! NodeOverlays are evaluated as the controller does and the prices they set listed.
//! Inputs: [`Facts`]. Outputs: a [`Report`].

use std::collections::BTreeMap;

use api::well_known::capi::KARPENTER_MEMBER;
use api::well_known::conditions::READY;
use api::{ClusterAPINodeClass, MachineDeployment, NodePool};
use clusterapi::{MachineDeploymentRef, Scope, Selector};
use controllers::provisioning::inputs;
use controllers::provisioning::inputs::pools::{NODE_CLASS_GROUP, NODE_CLASS_KIND};
use scheduling::labels::{NODE_POOL, WellKnownLabels};
use scheduling::requirements::Requirements;
use scheduling::resources::Resources;

use super::permissions::{Check, Outcome};
use super::report::{Finding, NodeClassReport, NodePoolReport, Report, Severity};
use crate::probes::{Cluster, Required};

/// What `doctor` read from the two clusters.
#[derive(Debug, Clone)]
pub struct Facts {
    /// The Cluster API version discovery chose (`None`: it could not; see `discovery_errors`).
    pub capi: Option<api::CapiVersion>,
    /// Whether the Cluster API objects live in a separate management cluster.
    pub separate_management: bool,
    /// The MachineDeployments `run` would consider.
    pub scope: Scope,
    /// Resources `run` needs that discovery does not list.
    pub crds_missing: Vec<Required>,
    /// Discovery failures other than "not served".
    pub discovery_errors: Vec<String>,
    /// Our CRDs as installed: name → the schema fields this binary has that they lack.
    pub crd_drift: Vec<(String, Vec<String>)>,
    /// Why the installed CRDs could not be compared, if they could not.
    pub crd_definitions_unreadable: Option<String>,
    /// Every permission check and its answer.
    pub permissions: Vec<(Check, Outcome)>,
    /// ClusterAPINodeClasses, or why they could not be listed.
    pub node_classes: Result<Vec<ClusterAPINodeClass>, String>,
    /// NodePools, or why they could not be listed.
    pub node_pools: Result<Vec<NodePool>, String>,
    /// MachineDeployments (every namespace, or the scope's), or why not.
    pub machine_deployments: Result<Vec<MachineDeployment>, String>,
    /// Their MachineSets (for blocked scale-ups); empty when they could not be listed.
    pub machine_sets: Vec<api::MachineSet>,
    /// The infrastructure templates the member MachineDeployments name, as JSON.
    pub templates: Vec<serde_json::Value>,
    /// MachineDeployment (`namespace/name`) → why its template could not be read.
    pub template_errors: BTreeMap<String, String>,
    /// Running cluster-autoscaler Deployments (`<cluster>: namespace/name`), or why that
    /// could not be checked.
    pub autoscalers: Result<Vec<String>, String>,
    /// NodeOverlays (none when their CRD is not served), or why they could not be listed.
    pub node_overlays: Result<Vec<api::NodeOverlay>, String>,
    /// Whether the controller runs with the `NodeOverlay` gate (`--feature-gates`).
    pub node_overlay_gate: bool,
}

/// Everything found in `facts`.
#[must_use]
pub fn examine(facts: &Facts) -> Report {
    let mut findings = Vec::new();
    crds(facts, &mut findings);
    permissions(facts, &mut findings);
    let listed = |what: &str, r: Option<&String>, findings: &mut Vec<Finding>| {
        if let Some(e) = r {
            findings.push(
                Finding::new(Severity::Blocker, "cannot-list", what, e.clone())
                    .hint("see the permission findings; run doctor with the controller's credentials or --as"),
            );
        }
    };
    listed(
        "ClusterAPINodeClasses",
        facts.node_classes.as_ref().err(),
        &mut findings,
    );
    listed("NodePools", facts.node_pools.as_ref().err(), &mut findings);
    listed(
        "MachineDeployments",
        facts.machine_deployments.as_ref().err(),
        &mut findings,
    );
    let empty = Vec::new();
    let node_classes = facts.node_classes.as_ref().unwrap_or(&empty);
    let empty_pools = Vec::new();
    let pools = facts.node_pools.as_ref().unwrap_or(&empty_pools);
    let empty_mds = Vec::new();
    let mds = facts.machine_deployments.as_ref().unwrap_or(&empty_mds);
    let (catalogues, _) = inputs::catalogues(
        node_classes,
        mds,
        &facts.templates,
        &facts.scope,
        &BTreeMap::new(),
    );
    let used: Vec<&str> = pools.iter().filter_map(inputs::node_class_of).collect();
    let class_reports = node_classes
        .iter()
        .map(|nc| node_class(facts, nc, mds, &catalogues, &used, &mut findings))
        .collect();
    let mut pool_reports = node_pools(pools, &catalogues, &mut findings);
    overlays::node_overlays(
        &facts.node_overlays,
        facts.node_overlay_gate,
        pools,
        &catalogues,
        &mut pool_reports,
        &mut findings,
    );
    if let Err(e) = &facts.autoscalers {
        findings.push(Finding::new(
            Severity::Info,
            "autoscaler-not-checked",
            "cluster-autoscaler",
            format!("whether a cluster-autoscaler runs was not checked: {e}"),
        ));
    }
    let checked = facts.permissions.len();
    Report::new(findings, class_reports, pool_reports, checked)
}

fn crds(facts: &Facts, findings: &mut Vec<Finding>) {
    for r in &facts.crds_missing {
        let hint = match r.cluster {
            Cluster::Workload => {
                "install the CRDs: `karpenter-capi crds | kubectl apply -f -` (the Helm chart installs them from crds/)"
            }
            Cluster::Management if facts.separate_management => {
                "install Cluster API in the management cluster (`clusterctl init`), or point --cluster-api-kubeconfig at the cluster that runs it"
            }
            Cluster::Management => {
                "Cluster API is not installed in this cluster: if it runs in a separate management cluster, give its kubeconfig with --cluster-api-kubeconfig"
            }
        };
        findings.push(
            Finding::new(
                Severity::Blocker,
                "crd-missing",
                format!("{} {}.{}", r.cluster, r.plural, r.group),
                format!("{}/{} {} is not served", r.group, r.version, r.plural),
            )
            .hint(hint),
        );
    }
    if let Some(v) = facts.capi.as_ref().filter(|v| !v.is_v1beta2_shape()) {
        findings.push(
            Finding::new(
                Severity::Warning,
                "capi-v1beta1",
                "management cluster",
                format!(
                    "speaking {v}: the management cluster does not serve (or CAPI_VERSION does not \
                     ask for) cluster.x-k8s.io/v1beta2; v1beta1 is deprecated since Cluster API \
                     v1.11 and is to stop being served in v1.16"
                ),
            )
            .hint("upgrade Cluster API to v1.11 or later (or unset CAPI_VERSION); karpenter-capi then speaks v1beta2"),
        );
    }
    for e in &facts.discovery_errors {
        findings.push(Finding::new(
            Severity::Blocker,
            "discovery-failed",
            "discovery",
            e.clone(),
        ));
    }
    for (name, fields) in &facts.crd_drift {
        let shown: Vec<&str> = fields.iter().take(8).map(String::as_str).collect();
        let more = fields.len().saturating_sub(shown.len());
        findings.push(
            Finding::new(
                Severity::Warning,
                "crd-outdated",
                format!("CustomResourceDefinition {name}"),
                format!(
                    "the installed schema lacks field(s) this version uses: {}{}; the API server prunes them from what the controller writes",
                    shown.join(", "),
                    if more > 0 { format!(" and {more} more") } else { String::new() }
                ),
            )
            .hint("apply this version's CRDs: `karpenter-capi crds | kubectl apply -f -` (helm upgrade does not update crds/)"),
        );
    }
    if let Some(why) = &facts.crd_definitions_unreadable {
        findings.push(Finding::new(
            Severity::Info,
            "crd-not-compared",
            "CustomResourceDefinitions",
            format!("the installed CRD schemas were not compared with this version's: {why}"),
        ));
    }
}

fn permissions(facts: &Facts, findings: &mut Vec<Finding>) {
    // Unknown answers: one finding per cluster (a server without access reviews would
    // otherwise repeat the same error for every check).
    let mut unknown: BTreeMap<Cluster, (usize, &str)> = BTreeMap::new();
    for (check, outcome) in &facts.permissions {
        match outcome {
            Outcome::Allowed => {}
            Outcome::Denied(reason) => findings.push(
                Finding::new(
                    Severity::Blocker,
                    "permission-denied",
                    check.cluster.to_string(),
                    if reason.is_empty() {
                        format!("cannot {check}")
                    } else {
                        format!("cannot {check} ({reason})")
                    },
                )
                .hint("grant it to the controller's identity (the Helm chart's ClusterRoles carry every rule; see charts/karpenter-capi)"),
            ),
            Outcome::Unknown(e) => {
                unknown.entry(check.cluster).or_insert((0, e.as_str())).0 += 1;
            }
        }
    }
    for (cluster, (count, first)) in unknown {
        findings.push(Finding::new(
            Severity::Warning,
            "permission-unknown",
            cluster.to_string(),
            format!("{count} permission(s) could not be checked: {first}"),
        ));
    }
}

fn annotation<'a>(md: &'a MachineDeployment, key: &str) -> Option<&'a str> {
    md.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

fn node_class(
    facts: &Facts,
    nc: &ClusterAPINodeClass,
    mds: &[MachineDeployment],
    catalogues: &inputs::Catalogues,
    used: &[&str],
    findings: &mut Vec<Finding>,
) -> NodeClassReport {
    let name = nc.metadata.name.clone().unwrap_or_default();
    let subject = format!("ClusterAPINodeClass {name}");
    let in_use = used.contains(&name.as_str());
    let severity = if in_use {
        Severity::Blocker
    } else {
        Severity::Warning
    };
    let mut report = NodeClassReport {
        name: name.clone(),
        ..NodeClassReport::default()
    };
    let catalogue = match catalogues.get(&name) {
        Some(Ok(c)) => c,
        Some(Err(e)) => {
            findings.push(Finding::new(
                severity,
                "nodeclass-invalid",
                subject,
                e.clone(),
            ));
            return report;
        }
        None => return report,
    };
    let selector = nc.spec.scalable_resource_selector.as_ref();
    let selected = clusterapi::select(mds, selector, &facts.scope).unwrap_or_default();
    if selected.is_empty() {
        findings.push(
            Finding::new(
                severity,
                "nodeclass-selects-nothing",
                subject.clone(),
                "spec.scalableResourceSelector selects no MachineDeployment",
            )
            .hint(selection_hint(mds, selector, &facts.scope)),
        );
    }
    for md in selected {
        report
            .machine_deployments
            .push(machine_deployment::machine_deployment(
                facts, md, catalogue, findings,
            ));
    }
    report.instance_types = catalogue.entries().len();
    if catalogue.entries().is_empty() && !report.machine_deployments.is_empty() {
        findings.push(Finding::new(
            severity,
            "nodeclass-no-instance-types",
            subject,
            "every selected MachineDeployment was left out (see machine-deployment-excluded)",
        ));
    }
    report
}

/// Why nothing was selected, in terms the user can act on.
fn selection_hint(
    mds: &[MachineDeployment],
    selector: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
    scope: &Scope,
) -> String {
    let matcher = selector.map(Selector::new).and_then(Result::ok);
    let matches = |md: &MachineDeployment| {
        matcher
            .as_ref()
            .is_none_or(|s| s.matches(md.metadata.labels.as_ref()))
    };
    let names = |list: Vec<&MachineDeployment>| {
        let shown: Vec<String> = list
            .iter()
            .take(5)
            .map(|md| MachineDeploymentRef::of(md).key())
            .collect();
        let more = list.len().saturating_sub(shown.len());
        format!(
            "{}{}",
            shown.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        )
    };
    let unlabelled: Vec<&MachineDeployment> = mds
        .iter()
        .filter(|md| !clusterapi::is_member(md) && scope.contains(md) && matches(md))
        .collect();
    if !unlabelled.is_empty() {
        return format!(
            "these MachineDeployments match the selector but lack the opt-in label {KARPENTER_MEMBER}: {} (kubectl label machinedeployment -n <ns> <name> {KARPENTER_MEMBER}=)",
            names(unlabelled)
        );
    }
    let outside: Vec<&MachineDeployment> = mds
        .iter()
        .filter(|md| clusterapi::is_member(md) && matches(md) && !scope.contains(md))
        .collect();
    if !outside.is_empty() {
        return format!(
            "these opted-in MachineDeployments match but lie outside --cluster-name {:?} / --cluster-api-namespace {:?}: {}",
            scope.cluster_name.as_deref().unwrap_or("(any)"),
            scope.namespace.as_deref().unwrap_or("(any)"),
            names(outside)
        );
    }
    let members = mds.iter().filter(|md| clusterapi::is_member(md)).count();
    if members == 0 {
        format!(
            "no MachineDeployment carries {KARPENTER_MEMBER}; label the ones Karpenter may scale"
        )
    } else {
        let misses: Vec<String> = mds
            .iter()
            .filter(|md| clusterapi::is_member(md) && scope.contains(md))
            .take(5)
            .map(|md| {
                format!(
                    "{} {}",
                    MachineDeploymentRef::of(md).key(),
                    selector.map(|s| unmet(s, md)).unwrap_or_default()
                )
            })
            .collect();
        format!(
            "{members} opted-in MachineDeployment(s), none matching the selector: {}",
            misses.join("; ")
        )
    }
}

/// What of `selector` the labels of `md` do not satisfy, e.g. `lacks
/// cluster.x-k8s.io/cluster-name=my-cluster`.
fn unmet(
    selector: &k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
    md: &MachineDeployment,
) -> String {
    let labels = md.metadata.labels.clone().unwrap_or_default();
    let mut out = Vec::new();
    for (k, v) in selector.match_labels.iter().flatten() {
        match labels.get(k) {
            None => out.push(format!("lacks {k}={v}")),
            Some(have) if have != v => out.push(format!("has {k}={have}, not {v}")),
            Some(_) => {}
        }
    }
    for e in selector.match_expressions.iter().flatten() {
        let one = k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
            match_expressions: Some(vec![e.clone()]),
            match_labels: None,
        };
        let holds = Selector::new(&one)
            .ok()
            .is_some_and(|s| s.matches(md.metadata.labels.as_ref()));
        if !holds {
            let values = e.values.as_ref().map(|v| v.join(",")).unwrap_or_default();
            out.push(
                format!("does not satisfy {} {} {values}", e.key, e.operator)
                    .trim_end()
                    .to_owned(),
            );
        }
    }
    if out.is_empty() {
        "matches the selector".to_owned()
    } else {
        out.join(", ")
    }
}

fn node_pools(
    pools: &[NodePool],
    catalogues: &inputs::Catalogues,
    findings: &mut Vec<Finding>,
) -> Vec<NodePoolReport> {
    let well_known = WellKnownLabels::default();
    if pools.is_empty() {
        findings.push(
            Finding::new(
                Severity::Blocker,
                "no-nodepools",
                "NodePools",
                "there is no NodePool: nothing will be provisioned",
            )
            .hint("create a NodePool whose spec.template.spec.nodeClassRef names a ClusterAPINodeClass"),
        );
    }
    let ours = pools
        .iter()
        .filter(|p| inputs::node_class_of(p).is_some())
        .count();
    if !pools.is_empty() && ours == 0 {
        findings.push(Finding::new(
            Severity::Blocker,
            "no-nodepools",
            "NodePools",
            format!("no NodePool refers to a {NODE_CLASS_GROUP} {NODE_CLASS_KIND}"),
        ));
    }
    let mut out = Vec::new();
    for pool in pools {
        let name = pool.metadata.name.clone().unwrap_or_default();
        let subject = format!("NodePool {name}");
        let mut report = NodePoolReport {
            name: name.clone(),
            ..NodePoolReport::default()
        };
        let Some(class) = inputs::node_class_of(pool) else {
            let r = &pool.spec.template.spec.node_class_ref;
            findings.push(Finding::new(
                Severity::Info,
                "nodepool-not-ours",
                subject,
                format!(
                    "its nodeClassRef is {}/{} {}: another provider's",
                    r.group, r.kind, r.name
                ),
            ));
            out.push(report);
            continue;
        };
        report.node_class = Some(class.to_owned());
        if pool.metadata.deletion_timestamp.is_some() {
            findings.push(Finding::new(
                Severity::Warning,
                "nodepool-deleting",
                subject,
                "the NodePool is being deleted",
            ));
            out.push(report);
            continue;
        }
        let catalogue = match catalogues.get(class) {
            None => {
                findings.push(
                    Finding::new(
                        Severity::Blocker,
                        "nodepool-nodeclass-missing",
                        subject,
                        format!("spec.template.spec.nodeClassRef names {NODE_CLASS_KIND} {class:?}, which does not exist"),
                    )
                    .hint("create it, or correct the reference"),
                );
                out.push(report);
                continue;
            }
            Some(Err(e)) => {
                findings.push(Finding::new(
                    Severity::Blocker,
                    "nodepool-nodeclass-unusable",
                    subject,
                    format!("{NODE_CLASS_KIND} {class:?} cannot be used: {e}"),
                ));
                out.push(report);
                continue;
            }
            Some(Ok(c)) => c,
        };
        let scheduler_pool =
            match inputs::scheduler_node_pool(pool, catalogue.instance_types(), &well_known) {
                Ok(p) => p,
                Err(e) => {
                    findings.push(Finding::new(
                        Severity::Blocker,
                        "nodepool-invalid",
                        subject,
                        e,
                    ));
                    out.push(report);
                    continue;
                }
            };
        let mut labels = scheduler_pool.labels.clone();
        labels.insert(std::sync::Arc::from(NODE_POOL), scheduler_pool.name.clone());
        let mut requirements: Requirements = scheduler_pool.requirements.clone();
        requirements.add_all(&Requirements::from_labels(labels.iter()));
        let compatible: Vec<_> = scheduler_pool
            .instance_types
            .iter()
            .filter(|it| requirements.is_intersecting(it.requirements()))
            .collect();
        report.compatible_instance_types =
            compatible.iter().map(|it| it.name().to_owned()).collect();
        report.available_instance_types = compatible
            .iter()
            .filter(|it| {
                it.offerings().iter().any(|o| {
                    o.available && requirements.is_compatible(&o.requirements, &well_known)
                })
            })
            .map(|it| it.name().to_owned())
            .collect();
        let static_pool = pool.spec.is_static();
        if static_pool {
            findings.push(Finding::new(
                Severity::Info,
                "nodepool-static",
                subject.clone(),
                "static NodePool (spec.replicas is set): kept at its replica count only with --feature-gates StaticCapacity=true, never used for pending pods",
            ));
        }
        if catalogue.entries().is_empty() {
            // The NodeClass finding says why.
        } else if compatible.is_empty() {
            findings.push(
                Finding::new(
                    Severity::Blocker,
                    "nodepool-no-compatible-instance-types",
                    subject.clone(),
                    format!(
                        "its requirements and template labels match none of the {} instance type(s) of {NODE_CLASS_KIND} {class} ({})",
                        catalogue.entries().len(),
                        catalogue.entries().iter().take(5).map(|e| e.name()).collect::<Vec<_>>().join(", ")
                    ),
                )
                .hint("compare spec.template.spec.requirements with the labels of the MachineDeployments (doctor lists them above)"),
            );
        } else if report.available_instance_types.is_empty() {
            findings.push(Finding::new(
                Severity::Blocker,
                "nodepool-nothing-available",
                subject.clone(),
                "every compatible instance type's MachineDeployments are paused, being deleted or at their max size (see machine-deployment-unavailable)",
            ));
        } else if requirements.has_min_values()
            && let Err(e) =
                scheduling::instance_type::satisfies_min_values(&compatible, &requirements)
        {
            findings.push(Finding::new(
                Severity::Blocker,
                "nodepool-min-values",
                subject.clone(),
                format!("minValues cannot be met by its compatible instance types: {e}"),
            ));
        }
        if let Some(limited) = limits_reached(pool, &scheduler_pool.limits) {
            findings.push(
                Finding::new(
                    Severity::Blocker,
                    "nodepool-limits-reached",
                    subject.clone(),
                    format!("spec.limits allow no new node: {limited}"),
                )
                .hint("raise spec.limits, or remove nodes of this NodePool"),
            );
        }
        if let Some(ready) = pool
            .status
            .as_ref()
            .and_then(|s| {
                use api::common::Conditions as _;
                s.conditions.condition(READY)
            })
            .filter(|c| c.status == api::common::ConditionStatus::False)
        {
            findings.push(Finding::new(
                Severity::Warning,
                "nodepool-not-ready",
                subject,
                format!(
                    "the controller reports Ready=False ({}): {}",
                    ready.reason, ready.message
                ),
            ));
        }
        out.push(report);
    }
    out
}

/// The resources whose usage (`status.resources`) already reaches `spec.limits`.
fn limits_reached(pool: &NodePool, limits: &Option<Resources>) -> Option<String> {
    let limits = limits.as_ref()?;
    let usage = pool
        .status
        .as_ref()
        .and_then(|s| s.resources.as_ref())
        .and_then(|r| Resources::parse(r.iter().map(|(k, v)| (k.as_str(), v.0.as_str()))).ok())
        .unwrap_or_default();
    let reached: Vec<String> = limits
        .iter()
        .filter(|(name, limit)| usage.get_or_zero(name) >= *limit)
        .map(|(name, limit)| format!("{name} {} of {limit}", usage.get_or_zero(name)))
        .collect();
    (!reached.is_empty()).then(|| reached.join(", "))
}

mod machine_deployment;
mod overlays;
#[cfg(test)]
mod tests;
