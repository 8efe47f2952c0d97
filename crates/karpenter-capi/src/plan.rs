//! `karpenter-capi plan`: offline provisioning decisions for a cluster dump.
//!
//! Responsibility: read a multi-document YAML dump (a file or stdin; `kind: List` documents are
//! unpacked), type each object by apiVersion/kind (NodePools, NodeClaims,
//! ClusterAPINodeClasses, MachineDeployments, stand-alone MachineSets and MachinePools (as node
//! groups), `infrastructure.cluster.x-k8s.io` machine templates and InfraMachinePools kept as
//! JSON, Nodes, Pods, DaemonSets, PodDisruptionBudgets, Namespaces), then run
//! exactly the provisioning path — `controllers::provisioning::inputs`, the dump's
//! NodeOverlays under `--feature-gates NodeOverlay=true` (each planned NodeClaim names where
//! its price came from: an overlay or its MachineDeployment), and
//! `scheduling::scheduler::Scheduler` — and print the [`Plan`] as a table or JSON.
//! Then it explains voluntary disruption for the same objects
//! ([`controllers::disruption::explain`]): the command the disruption loop's next pass would
//! start and, for every managed node (a node with a NodeClaim of ours), whether it could be
//! removed or replaced and why the others cannot.
//! Unknown kinds are skipped with a note on stderr; a malformed document is an error naming the
//! document index, kind, name and field.
//! Inputs: [`PlanArgs`]. Outputs: the plan on stdout, its notes first (JSON: `notes`).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Read;
use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use clusterapi::Scope;
use controllers::disruption::explain::{Explanation, explain};
use controllers::disruption::simulation::Objects;
use controllers::provisioning::inputs::{
    self, ClusterObjects, IgnoredPod, PendingPolicy, Plan, PlanContext,
};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::jiff::Timestamp;
use scheduling::labels::WellKnownLabels;
use scheduling::scheduler::{Options, Scheduler};
use serde::de::DeserializeOwned;

/// Flags of `plan`.
#[derive(Debug, Args)]
pub struct PlanArgs {
    /// The cluster dump: multi-document YAML (`kubectl get … -o yaml` output works), or `-`
    /// for stdin.
    #[arg(short = 'f', long = "filename", value_name = "FILE")]
    pub filename: PathBuf,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = PlanOutput::Table)]
    pub output: PlanOutput,
    /// Only MachineDeployments of this Cluster.
    #[arg(long, value_name = "NAME")]
    pub cluster_name: Option<String>,
    /// Only MachineDeployments in this namespace (as `run`'s and `doctor`'s flag; `--namespace`
    /// is kept as an alias).
    #[arg(long, value_name = "NAMESPACE", alias = "namespace")]
    pub cluster_api_namespace: Option<String>,
    /// Consider only pods kube-scheduler marked `Unschedulable` (production's predicate). By
    /// default every unbound, non-terminal pod not owned by a DaemonSet is pending, since dumps
    /// often lack the `PodScheduled` condition.
    #[arg(long)]
    pub require_unschedulable_condition: bool,
    /// `run`'s feature gates, as the cluster runs with them: with `NodeOverlay=true` the
    /// dump's NodeOverlays change prices and extended resources, as in the controller.
    #[arg(long, env = "FEATURE_GATES", default_value = "", value_name = "LIST")]
    pub feature_gates: karpenter_capi::feature_gates::FeatureGates,
}

/// Output formats of `plan`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PlanOutput {
    /// Human-readable tables.
    Table,
    /// One JSON object with `nodeClaims`, `bindings` and `unschedulable`.
    Json,
}

/// The typed objects of a dump.
#[derive(Debug, Default)]
pub struct Dump {
    node_pools: Vec<api::NodePool>,
    node_claims: Vec<api::NodeClaim>,
    node_classes: Vec<api::ClusterAPINodeClass>,
    machine_deployments: Vec<api::MachineDeployment>,
    templates: Vec<serde_json::Value>,
    nodes: Vec<Node>,
    pods: Vec<std::sync::Arc<Pod>>,
    daemon_sets: Vec<DaemonSet>,
    pdbs: Vec<PodDisruptionBudget>,
    namespaces: Vec<Namespace>,
    node_overlays: Vec<api::NodeOverlay>,
    /// What was skipped, for stderr.
    notes: Vec<String>,
}

/// Runs `plan`: prints the plan on stdout, its notes first (JSON: a `notes` field).
pub fn run(args: &PlanArgs) -> anyhow::Result<()> {
    let text = if args.filename.as_os_str() == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("cannot read stdin")?;
        text
    } else {
        std::fs::read_to_string(&args.filename)
            .with_context(|| format!("cannot read {}", args.filename.display()))?
    };
    let dump = parse(&text)?;
    let scope = Scope {
        namespace: args.cluster_api_namespace.clone(),
        cluster_name: args.cluster_name.clone(),
    };
    let policy = if args.require_unschedulable_condition {
        PendingPolicy::Unschedulable
    } else {
        PendingPolicy::AllUnbound
    };
    let (plan, notes) = plan(&dump, &scope, policy, args.feature_gates.node_overlay);
    let notes: Vec<String> = dump.notes.iter().chain(&notes).cloned().collect();
    let disruption = disruption(&dump, &scope, Timestamp::now());
    match args.output {
        PlanOutput::Json => {
            let mut out = serde_json::to_value(&plan)?;
            if let Some(map) = out.as_object_mut() {
                map.insert("disruption".into(), serde_json::to_value(&disruption)?);
                map.insert("notes".into(), serde_json::to_value(&notes)?);
            }
            println!("{}", serde_json::to_string_pretty(&out)?);
        }
        PlanOutput::Table => {
            // The notes (objects skipped, MachineDeployments left out) explain the table:
            // they come first, on the same stream.
            for note in &notes {
                println!("note: {note}");
            }
            print!("{}", render_table(&plan));
            print!("{}", render_disruption(&disruption));
        }
    }
    Ok(())
}

/// What voluntary disruption would do with `dump` at `now`: the provisioner's catalogues give
/// each NodePool its instance types (with prices), then
/// [`controllers::disruption::explain::explain`].
#[must_use]
pub fn disruption(dump: &Dump, scope: &Scope, now: Timestamp) -> Explanation {
    let well_known = WellKnownLabels::cluster_api();
    let (catalogues, _) = inputs::catalogues(
        &dump.node_classes,
        &dump.machine_deployments,
        &dump.templates,
        scope,
        &BTreeMap::new(),
    );
    let mut its = BTreeMap::new();
    for pool in &dump.node_pools {
        let Some(Ok(catalogue)) = inputs::node_class_of(pool).and_then(|c| catalogues.get(c))
        else {
            continue;
        };
        its.insert(
            pool.metadata.name.clone().unwrap_or_default(),
            catalogue.instance_types(),
        );
    }
    explain(
        &Objects {
            cluster: ClusterObjects {
                nodes: &dump.nodes,
                node_claims: &dump.node_claims,
                pods: &dump.pods,
                daemon_sets: &dump.daemon_sets,
                namespaces: &dump.namespaces,
            },
            node_pools: &dump.node_pools,
            pdbs: &dump.pdbs,
            instance_types: &its,
            now,
            last_pod_event: None,
        },
        &well_known,
    )
}

/// The disruption explanation as text tables.
#[must_use]
pub fn render_disruption(e: &Explanation) -> String {
    let mut out = String::new();
    match e.commands.first() {
        Some(c) => {
            let _ = writeln!(
                out,
                "\nDisruption, next command: {} {} {} (replacements: {}; saves {:.4}/h)",
                c.method,
                c.decision,
                c.nodes.join(","),
                if c.replacements.is_empty() {
                    "none".to_owned()
                } else {
                    c.replacements.join(",")
                },
                c.savings
            );
        }
        None => {
            let _ = writeln!(out, "\nDisruption, next command: none");
        }
    }
    let rows: Vec<Vec<String>> = e
        .nodes
        .iter()
        .map(|n| {
            vec![
                n.node.clone(),
                n.node_pool.clone(),
                n.verdict.clone(),
                n.reason.clone(),
            ]
        })
        .collect();
    table(&mut out, &["NODE", "NODEPOOL", "VERDICT", "WHY"], &rows);
    out
}

/// Parses the YAML stream into typed objects.
///
/// # Errors
/// A document that is not YAML, has no apiVersion/kind, or does not match its kind's schema.
pub fn parse(text: &str) -> anyhow::Result<Dump> {
    let mut dump = Dump::default();
    for (index, document) in serde_norway::Deserializer::from_str(text).enumerate() {
        let value: serde_json::Value = serde::Deserialize::deserialize(document)
            .with_context(|| format!("document {index}: not a valid YAML object"))?;
        if value.is_null() {
            continue;
        }
        let items = match value.get("items") {
            Some(serde_json::Value::Array(items))
                if value
                    .get("kind")
                    .and_then(|k| k.as_str())
                    .is_some_and(|k| k.ends_with("List")) =>
            {
                items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| (format!("document {index} item {i}"), item.clone()))
                    .collect()
            }
            _ => vec![(format!("document {index}"), value)],
        };
        for (at, item) in items {
            dump.add(&at, item)?;
        }
    }
    Ok(dump)
}

impl Dump {
    fn add(&mut self, at: &str, value: serde_json::Value) -> anyhow::Result<()> {
        let text = |field: &str| value.get(field).and_then(|v| v.as_str()).map(str::to_owned);
        let (Some(api_version), Some(kind)) = (text("apiVersion"), text("kind")) else {
            bail!("{at}: apiVersion and kind are required");
        };
        let name = value
            .pointer("/metadata/name")
            .and_then(|v| v.as_str())
            .unwrap_or("<unnamed>")
            .to_owned();
        let what = format!("{at} ({kind} {name})");
        let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
        match (group, kind.as_str()) {
            ("karpenter.sh", "NodePool") => self.node_pools.push(typed(&what, &value)?),
            ("karpenter.sh", "NodeClaim") => self.node_claims.push(typed(&what, &value)?),
            ("karpenter.sh", "NodeOverlay") => self.node_overlays.push(typed(&what, &value)?),
            ("karpenter.cluster.x-k8s.io", "ClusterAPINodeClass") => {
                self.node_classes.push(typed(&what, &value)?);
            }
            ("cluster.x-k8s.io", "MachineDeployment") => {
                self.machine_deployments.push(typed(&what, &value)?);
            }
            ("cluster.x-k8s.io", "MachineSet") => {
                let set: api::MachineSet = typed(&what, &value)?;
                if set.is_stand_alone() {
                    self.machine_deployments
                        .push(api::MachineDeployment::from_machine_set(&set));
                } else {
                    self.notes.push(format!(
                        "{what}: a MachineDeployment owns it, so it is not a node group of its \
                         own, skipped"
                    ));
                }
            }
            ("cluster.x-k8s.io", "MachinePool") => {
                let pool: api::MachinePool = typed(&what, &value)?;
                self.machine_deployments
                    .push(api::MachineDeployment::from_machine_pool(&pool));
            }
            // Templates, and InfraMachinePools (a MachinePool's template names one: its
            // status says whether it makes MachinePool Machines).
            ("infrastructure.cluster.x-k8s.io", k)
                if k.ends_with("MachineTemplate") || k.ends_with("MachinePool") =>
            {
                if value
                    .pointer("/metadata/name")
                    .and_then(|v| v.as_str())
                    .is_none()
                {
                    bail!("{what}: metadata.name is required");
                }
                self.templates.push(value);
            }
            ("", "Node") => self.nodes.push(typed(&what, &value)?),
            ("", "Pod") => self.pods.push(std::sync::Arc::new(typed(&what, &value)?)),
            ("", "Namespace") => self.namespaces.push(typed(&what, &value)?),
            ("apps", "DaemonSet") => self.daemon_sets.push(typed(&what, &value)?),
            ("policy", "PodDisruptionBudget") => self.pdbs.push(typed(&what, &value)?),
            _ => self.notes.push(format!(
                "{what}: {api_version} {kind} is not used by plan, skipped"
            )),
        }
        Ok(())
    }
}

/// Deserializes `value` as `T`; errors name the field path (e.g.
/// `spec.template.spec.requirements[0].operator`).
fn typed<T: DeserializeOwned>(what: &str, value: &serde_json::Value) -> anyhow::Result<T> {
    serde_path_to_error::deserialize(value)
        .map_err(|e| anyhow::anyhow!("{what}: {}: {}", e.path(), e.inner()))
}

/// The dump's NodeOverlays evaluated (as the NodeOverlay controller does) and applied to
/// `pools`' instance types; notes name every overlay not applied, and why.
fn overlay(
    dump: &Dump,
    pools: &mut [scheduling::scheduler::NodePool],
    well_known: &WellKnownLabels,
    notes: &mut Vec<String>,
) -> cloudprovider::overlay::Evaluated {
    use cloudprovider::overlay::{Outcome, OverlayStore, PoolInput, evaluate, validate_all};
    let checked = validate_all(&dump.node_overlays, well_known);
    let inputs: Vec<PoolInput> = pools
        .iter()
        .filter_map(|p| {
            let np = dump
                .node_pools
                .iter()
                .find(|np| np.metadata.name.as_deref() == Some(&*p.name))?;
            Some(PoolInput::of(np, p.instance_types.clone()))
        })
        .collect();
    let evaluation = evaluate(&checked, &inputs, well_known);
    for (name, outcome) in &evaluation.outcomes {
        match outcome {
            Outcome::Applied => {}
            Outcome::Invalid(m) => notes.push(format!("NodeOverlay {name}: not applied: {m}")),
            Outcome::Conflict(m) => notes.push(format!("NodeOverlay {name}: not applied: {m}")),
        }
    }
    let store = OverlayStore::new();
    store.swap(evaluation.evaluated.clone());
    for pool in pools.iter_mut() {
        let its = std::mem::take(&mut pool.instance_types);
        match store.apply(&pool.name, its.clone()) {
            Ok(overlaid) => pool.instance_types = overlaid,
            Err(e) => {
                notes.push(format!(
                    "NodePool {}: NodeOverlays not applied: {e}",
                    pool.name
                ));
                pool.instance_types = its;
            }
        }
    }
    evaluation.evaluated
}

/// The provisioning decisions for `dump`, and notes (objects skipped, MDs excluded). With
/// `node_overlay` (the `NodeOverlay` gate) the dump's NodeOverlays change the NodePools'
/// instance types first, and each planned NodeClaim names the overlay behind its price.
pub fn plan(
    dump: &Dump,
    scope: &Scope,
    policy: PendingPolicy,
    node_overlay: bool,
) -> (Plan, Vec<String>) {
    let well_known = WellKnownLabels::cluster_api();
    let mut notes = Vec::new();
    let (catalogues, problems) = inputs::catalogues(
        &dump.node_classes,
        &dump.machine_deployments,
        &dump.templates,
        scope,
        &BTreeMap::new(),
    );
    notes.extend(
        problems
            .iter()
            .map(|p| format!("ClusterAPINodeClass {}: {}", p.node_class, p.message)),
    );
    let (mut pools, dropped) = inputs::node_pools(&dump.node_pools, &catalogues, &well_known);
    let overlays = match (dump.node_overlays.len(), node_overlay) {
        (0, _) => None,
        (_, true) => Some(overlay(dump, &mut pools, &well_known, &mut notes)),
        (n, false) => {
            notes.push(format!(
                "{n} NodeOverlay(s) in the dump not applied: the NodeOverlay gate is off \
                 (--feature-gates NodeOverlay=true, as the controller runs)"
            ));
            None
        }
    };
    let (cluster, warnings) = inputs::cluster(&ClusterObjects {
        nodes: &dump.nodes,
        node_claims: &dump.node_claims,
        pods: &dump.pods,
        daemon_sets: &dump.daemon_sets,
        namespaces: &dump.namespaces,
    });
    notes.extend(warnings);
    let mut pods = Vec::new();
    let mut ignored: Vec<IgnoredPod> = Vec::new();
    for pod in dump.pods.iter().filter(|p| inputs::is_pending(p, policy)) {
        match inputs::validate_pod(pod, &well_known) {
            Ok(p) => pods.push(p),
            Err(i) => ignored.push(i),
        }
    }
    let options = Options {
        well_known: well_known.clone(),
        ..Options::default()
    };
    let scheduler = Scheduler::new(&pools, &cluster, &pods, options);
    let scheduler_dropped = scheduler.dropped_pools().to_vec();
    let results = scheduler.solve(&pods);
    let plan = Plan::build(
        &results,
        &PlanContext {
            pods: &pods,
            ignored_pods: &ignored,
            dropped_pools: &dropped,
            scheduler_dropped: &scheduler_dropped,
            node_pools: &dump.node_pools,
            catalogues: &catalogues,
            well_known: &well_known,
            overlays: overlays.as_ref(),
        },
    );
    (plan, notes)
}

/// The plan as aligned text tables.
pub fn render_table(plan: &Plan) -> String {
    let mut out = String::new();
    let price = |p: Option<f64>| p.map_or_else(|| "-".to_owned(), |p| format!("{p:.4}"));
    let _ = writeln!(out, "NodeClaims to create: {}", plan.node_claims.len());
    let rows: Vec<Vec<String>> = plan
        .node_claims
        .iter()
        .map(|c| {
            vec![
                c.node_pool.clone(),
                c.instance_type.clone(),
                c.machine_deployment.clone().unwrap_or_else(|| "-".into()),
                c.zone.clone().unwrap_or_else(|| "-".into()),
                c.capacity_type.clone().unwrap_or_else(|| "-".into()),
                price(c.price),
                c.price_source.clone().unwrap_or_else(|| "-".into()),
                c.instance_types.len().to_string(),
                c.pods.join(","),
            ]
        })
        .collect();
    table(
        &mut out,
        &[
            "NODEPOOL",
            "INSTANCE-TYPE",
            "MACHINEDEPLOYMENT",
            "ZONE",
            "CAPACITY-TYPE",
            "PRICE",
            "PRICE-SOURCE",
            "OPTIONS",
            "PODS",
        ],
        &rows,
    );
    let _ = writeln!(
        out,
        "\nPods binding to existing nodes: {}",
        plan.bindings.len()
    );
    let rows: Vec<Vec<String>> = plan
        .bindings
        .iter()
        .map(|b| vec![b.node.clone(), b.pods.join(",")])
        .collect();
    table(&mut out, &["NODE", "PODS"], &rows);
    let _ = writeln!(out, "\nUnschedulable pods: {}", plan.unschedulable.len());
    let rows: Vec<Vec<String>> = plan
        .unschedulable
        .iter()
        .map(|u| vec![u.pod.clone(), u.reason.clone()])
        .collect();
    table(&mut out, &["POD", "REASON"], &rows);
    if !plan.ignored_node_pools.is_empty() {
        let _ = writeln!(
            out,
            "\nNodePools not used: {}",
            plan.ignored_node_pools.len()
        );
        let rows: Vec<Vec<String>> = plan
            .ignored_node_pools
            .iter()
            .map(|p| vec![p.name.clone(), p.reason.clone()])
            .collect();
        table(&mut out, &["NODEPOOL", "REASON"], &rows);
    }
    out
}

fn table(out: &mut String, header: &[&str], rows: &[Vec<String>]) {
    if rows.is_empty() {
        return;
    }
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut text = String::new();
        for (cell, width) in cells.zip(&widths) {
            let _ = write!(text, "{cell:<width$}  ");
        }
        let _ = writeln!(out, "{}", text.trim_end());
    };
    line(&mut header.iter().copied());
    for row in rows {
        line(&mut row.iter().map(String::as_str));
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn malformed_documents_name_the_document_and_field() {
        let err = parse(
            "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\n\
             apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: p}\n\
             spec: {template: {spec: {nodeClassRef: {group: g, kind: k, name: n}, \
             requirements: [{key: a, operator: Sideways}]}}}\n",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("document 1 (NodePool p)"), "{err}");
        assert!(err.contains("operator"), "{err}");
        let err = parse("kind: Pod\n").unwrap_err().to_string();
        assert!(err.contains("document 0: apiVersion and kind"), "{err}");
    }

    #[test]
    fn unknown_kinds_are_noted_and_lists_unpacked() {
        let dump = parse(
            "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Namespace, metadata: {name: a}}\n\
             - {apiVersion: v1, kind: ConfigMap, metadata: {name: c}}\n---\n",
        )
        .unwrap();
        assert_eq!(dump.namespaces.len(), 1);
        assert_eq!(dump.notes.len(), 1);
        assert!(dump.notes[0].contains("document 0 item 1 (ConfigMap c)"));
    }

    #[test]
    fn stand_alone_machine_sets_are_node_groups_and_owned_ones_are_noted() {
        let dump = parse(
            "apiVersion: cluster.x-k8s.io/v1beta2\nkind: MachineSet\n\
             metadata: {name: solo, namespace: ns}\nspec: {clusterName: c}\n---\n\
             apiVersion: cluster.x-k8s.io/v1beta2\nkind: MachineSet\n\
             metadata: {name: md-abc, namespace: ns, labels: {cluster.x-k8s.io/deployment-name: md}}\n\
             spec: {clusterName: c}\n",
        )
        .unwrap();
        assert_eq!(dump.machine_deployments.len(), 1);
        let group = &dump.machine_deployments[0];
        assert_eq!(group.group_kind, api::GroupKind::MachineSet);
        assert_eq!(group.metadata.name.as_deref(), Some("solo"));
        assert_eq!(dump.notes.len(), 1);
        assert!(
            dump.notes[0].contains("MachineSet md-abc"),
            "{:?}",
            dump.notes
        );
    }

    #[test]
    fn machine_pools_are_node_groups_and_their_infrastructure_is_kept() {
        let dump = parse(
            "apiVersion: cluster.x-k8s.io/v1beta2\nkind: MachinePool\n\
             metadata: {name: mp, namespace: ns}\nspec: {clusterName: c, failureDomains: [a]}\n---\n\
             apiVersion: infrastructure.cluster.x-k8s.io/v1beta1\nkind: DockerMachinePool\n\
             metadata: {name: mp, namespace: ns}\nstatus: {infrastructureMachineKind: DockerMachine}\n",
        )
        .unwrap();
        assert_eq!(dump.machine_deployments.len(), 1);
        let group = &dump.machine_deployments[0];
        assert_eq!(group.group_kind, api::GroupKind::MachinePool);
        assert_eq!(
            group.spec.template.spec.failure_domain.as_deref(),
            Some("a")
        );
        assert_eq!(dump.templates.len(), 1);
        assert!(dump.notes.is_empty(), "{:?}", dump.notes);
    }
}
