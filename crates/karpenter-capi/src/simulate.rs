//! `simulate`: the whole system on two embedded simulated clusters.
//!
//! Responsibility: start the management and workload `sim` servers on 127.0.0.1 (kubeconfigs
//! written so `kubectl` can watch), load a [`Scenario`], start the real controller
//! ([`Operator`]) against them over HTTP, run the timeline while printing progress, then
//! measure a [`Summary`]: pods, nodes per MachineDeployment, utilization, cost per hour, the
//! provisioner's decisions and their latencies, and how long each step took.
//! Inputs: a [`Scenario`], [`SimulateOptions`]. Outputs: the [`Summary`]; progress on stderr.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use api::NodeClaim;
use api::common::Conditions;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use scheduling::quantity::Quantity;
use serde::Serialize;
use tokio::time::Instant;
use world::{ServeWorldConfig, WorldConfig};

use controllers::disruption::methods::{self, Method};

use crate::connect::client_from_kubeconfig;

mod groups;
mod pods;
mod render;
mod settle;
mod steps;

use pods::pod_counts;

use crate::operator::{Operator, OperatorConfig};
use crate::scenario::{self, Scenario, Step};
pub use render::render;

/// The controller's settings in `simulate`: the defaults, except that the disruption loop
/// validates a consolidation after 2 s instead of 15 s and looks again after 1 s instead of
/// 10 s (the simulated infrastructure is fast; the decisions are the same).
#[must_use]
pub fn operator_config() -> OperatorConfig {
    OperatorConfig {
        disruption: controllers::disruption::DisruptionConfig {
            poll: Duration::from_secs(1),
            validation_delay: Duration::from_secs(2),
            // A replacement that does not initialize within a minute on simulated
            // infrastructure is rolled back rather than waited for for 10 min.
            replacement_timeout: Duration::from_secs(60),
            ..controllers::disruption::DisruptionConfig::default()
        },
        ..OperatorConfig::default()
    }
}

/// A world whose infrastructure, kubelets and scheduler act without delay (`simulate
/// --instant-infrastructure`, `sim world --instant`): only the controller's own waits remain.
#[must_use]
pub fn instant_world_config() -> WorldConfig {
    let mut world = WorldConfig::default();
    let zero = std::time::Duration::ZERO;
    world.capi.bootstrap_delay = zero;
    world.capi.provider_id_delay = zero;
    world.capi.node_join_delay = zero;
    world.capi.deletion_delay = zero;
    world.kubelet.node_ready_delay = zero;
    world.kubelet.pod_start_delay = zero;
    world.kubelet.pod_termination_delay = zero;
    world.scheduler.retry_interval = std::time::Duration::from_millis(500);
    // Instant means thousands of events a second: fold them into fewer full passes.
    world.min_pass_interval = std::time::Duration::from_millis(100);
    world
}

/// How `simulate` runs.
#[derive(Debug, Clone)]
pub struct SimulateOptions {
    /// Write `management.kubeconfig` and `workload.kubeconfig` here (else a temporary dir).
    pub kubeconfig_dir: Option<PathBuf>,
    /// Print progress lines on stderr.
    pub progress: bool,
    /// The simulated world's settings (delays, failure knobs).
    pub world: WorldConfig,
    /// The controller's settings.
    pub operator: OperatorConfig,
}

impl Default for SimulateOptions {
    fn default() -> Self {
        Self {
            kubeconfig_dir: None,
            progress: false,
            world: WorldConfig::default(),
            operator: operator_config(),
        }
    }
}

/// Nodes of one node group (MachineDeployment, stand-alone MachineSet or MachinePool) at
/// the end.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NodeGroupSummary {
    /// `namespace/name` for a MachineDeployment, `<Kind> namespace/name` for the others.
    pub name: String,
    /// `MachineDeployment`, `MachineSet` or `MachinePool`.
    pub kind: String,
    /// Machines with a Node.
    pub nodes: usize,
    /// `spec.replicas`.
    pub replicas: i64,
    /// Price per node-hour as the controller prices its nodes (0 when unpriced or no node).
    pub price_per_hour: f64,
    /// Where that price came from (`NodeOverlay <name>`, `annotation`, `nodeclass
    /// spec.prices[i]`, …; several joined by `; ` when its nodes differ; empty without nodes).
    pub price_source: String,
    /// Sum of its nodes' prices per hour.
    pub cost_per_hour: f64,
}

/// One provisioning decision.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DecisionSummary {
    /// Seconds since the scenario started, when the loop finished.
    pub at_seconds: f64,
    /// Pending pods considered.
    pub pods: usize,
    /// CapacityBuffer virtual pods scheduled with them.
    pub buffer_pods: usize,
    /// NodeClaims created.
    pub node_claims: usize,
    /// Pods placed on existing nodes.
    pub pods_on_existing: usize,
    /// Pods that fit nowhere.
    pub unschedulable: usize,
    /// First trigger → NodeClaims created (ms); includes the batch window.
    pub latency_ms: u64,
    /// Time in the scheduling engine (ms).
    pub solve_ms: u64,
}

/// One disruption decision.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DisruptionSummary {
    /// Seconds since the scenario started, when it was decided.
    pub at_seconds: f64,
    /// `Empty` or `Underutilized` (the budget reason).
    pub reason: String,
    /// `emptiness`, `multi-node consolidation`, `single-node consolidation`.
    pub method: String,
    /// `delete` or `replace`.
    pub decision: String,
    /// The nodes removed.
    pub nodes: Vec<String>,
    /// The replacements' instance types.
    pub replacements: Vec<String>,
    /// Price per hour saved (estimate at decision time).
    pub savings_per_hour: f64,
    /// Time to compute the decision (ms).
    pub computed_ms: u64,
    /// `done`, `running`, or why it was rolled back.
    pub outcome: String,
}

/// One step's outcome.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StepSummary {
    /// The step.
    pub step: String,
    /// Seconds since the start when it began.
    pub started_seconds: f64,
    /// How long it took.
    pub took_seconds: f64,
}

/// What `simulate` prints at the end.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// The scenario's name.
    pub scenario: String,
    /// Wall time of the timeline.
    pub wall_seconds: f64,
    /// Pods of Deployments at the end.
    pub pods: usize,
    /// Of which Running.
    pub pods_running: usize,
    /// Nodes at the end.
    pub nodes: usize,
    /// NodeClaims at the end.
    pub node_claims: usize,
    /// NodeClaims Ready at the end.
    pub node_claims_ready: usize,
    /// Per node group.
    pub node_groups: Vec<NodeGroupSummary>,
    /// Requested / allocatable CPU over all nodes, percent.
    pub cpu_utilization_percent: f64,
    /// Requested / allocatable memory over all nodes, percent.
    pub memory_utilization_percent: f64,
    /// Sum of node prices per hour.
    pub cost_per_hour: f64,
    /// The most nodes seen after a step.
    pub peak_nodes: usize,
    /// The highest cost per hour seen after a step.
    pub peak_cost_per_hour: f64,
    /// Disruption decisions.
    pub disruptions: Vec<DisruptionSummary>,
    /// Provisioning decisions.
    pub decisions: Vec<DecisionSummary>,
    /// The timeline.
    pub steps: Vec<StepSummary>,
}

/// Runs `scenario` on fresh simulated clusters and returns the summary.
///
/// # Errors
/// The clusters cannot start, an object is rejected, or a wait times out.
pub async fn simulate(scenario: &Scenario, options: SimulateOptions) -> anyhow::Result<Summary> {
    // Without `--kubeconfig-dir` the kubeconfigs live in a temporary directory removed when
    // the run ends (the guard lives until this function returns).
    let mut _temporary = None;
    let dir = match &options.kubeconfig_dir {
        Some(d) => {
            std::fs::create_dir_all(d).with_context(|| format!("cannot create {}", d.display()))?;
            d.clone()
        }
        None => {
            let t = tempfile::Builder::new()
                .prefix("karpenter-capi-simulate-")
                .tempdir()
                .context("cannot create a temporary directory for the kubeconfigs")?;
            let path = t.path().to_path_buf();
            _temporary = Some(t);
            path
        }
    };
    let world = world::serve_world(ServeWorldConfig {
        world: options.world.clone(),
        management_kubeconfig: Some(dir.join("management.kubeconfig")),
        workload_kubeconfig: Some(dir.join("workload.kubeconfig")),
        install_karpenter_crds: true,
        ..ServeWorldConfig::default()
    })
    .await
    .context("cannot start the simulated clusters")?;
    if options.progress {
        eprintln!("scenario {}: {}", scenario.name, scenario.description);
        eprintln!(
            "watch it: kubectl --kubeconfig {} get nodes,nodeclaims,pods -w",
            world.workload_kubeconfig().display()
        );
        eprintln!(
            "          kubectl --kubeconfig {} get machinedeployments,machines",
            world.management_kubeconfig().display()
        );
    }
    let management = client_from_kubeconfig(world.management_kubeconfig()).await?;
    let workload = client_from_kubeconfig(world.workload_kubeconfig()).await?;
    scenario::apply(&management, &scenario.management).await?;
    scenario::apply(&workload, &scenario.workload).await?;
    let gates = scenario.gates().map_err(anyhow::Error::msg)?;
    let operator = Operator::start(
        workload.clone(),
        management.clone(),
        options.operator.clone().with_gates(&gates),
    );
    operator
        .wait_ready(Duration::from_secs(30))
        .await
        .map_err(anyhow::Error::msg)?;

    let result = timeline(
        &workload,
        &management,
        &operator,
        &scenario.name,
        &scenario.steps,
        options.progress,
        &mut |_| {},
    )
    .await;
    operator.stop().await;
    world
        .shutdown()
        .await
        .context("shutting down the simulated clusters")?;
    result
}

/// Runs `steps` against clusters the `operator` already manages and summarizes the end state.
///
/// # Errors
/// A step fails (a wait times out, a Deployment is missing) or the summary cannot be read.
pub async fn run_timeline(
    workload: &kube::Client,
    management: &kube::Client,
    operator: &Operator,
    name: &str,
    steps: &[Step],
) -> anyhow::Result<Summary> {
    run_timeline_observed(workload, management, operator, name, steps, &mut |_| {}).await
}

/// [`run_timeline`], calling `after_step` as each step is done, before this process reads
/// anything more for the summary: `bench e2e` takes the controller's CPU time and peak RSS
/// there, so they hold the controller and the harness's paged polling, not the summary's
/// lists of every object.
///
/// # Errors
/// As [`run_timeline`].
pub async fn run_timeline_observed(
    workload: &kube::Client,
    management: &kube::Client,
    operator: &Operator,
    name: &str,
    steps: &[Step],
    after_step: &mut (dyn FnMut(&Step) + Send),
) -> anyhow::Result<Summary> {
    timeline(
        workload, management, operator, name, steps, false, after_step,
    )
    .await
}

async fn timeline(
    workload: &kube::Client,
    management: &kube::Client,
    operator: &Operator,
    name: &str,
    steps: &[Step],
    progress: bool,
    after_step: &mut (dyn FnMut(&Step) + Send),
) -> anyhow::Result<Summary> {
    let start = Instant::now();
    let printer = progress.then(|| {
        let workload = workload.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(2));
            loop {
                tick.tick().await;
                if let Ok(line) = progress_line(&workload, start).await {
                    eprintln!("{line}");
                }
            }
        })
    });
    let mut done = Vec::new();
    let mut peak = (0, 0.0);
    let result = steps::run_steps(
        (workload, management),
        operator,
        steps,
        start,
        &mut done,
        &mut peak,
        after_step,
    )
    .await;
    if let Some(p) = printer {
        p.abort();
    }
    let wall = start.elapsed();
    let summary = summarize(
        name,
        (workload, management),
        operator,
        start,
        wall,
        done,
        peak,
    )
    .await;
    result?;
    summary
}

/// Not terminating and not a DaemonSet's.
fn workload_pod(p: &Pod) -> bool {
    p.metadata.deletion_timestamp.is_none()
        && !p.owner_references().iter().any(|o| o.kind == "DaemonSet")
}

async fn workload_pods(workload: &kube::Client) -> anyhow::Result<Vec<Pod>> {
    let pods: Api<Pod> = Api::all(workload.clone());
    Ok(pods
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(workload_pod)
        .collect())
}

async fn progress_line(workload: &kube::Client, start: Instant) -> anyhow::Result<String> {
    let (want, running, total) = pod_counts(workload).await?;
    let ncs: Api<NodeClaim> = Api::all(workload.clone());
    let ncs = ncs.list(&ListParams::default()).await?.items;
    let ready = ncs
        .iter()
        .filter(|n| {
            n.status
                .as_ref()
                .is_some_and(|s| s.conditions.is_true("Ready"))
        })
        .count();
    let nodes: Api<Node> = Api::all(workload.clone());
    let nodes = nodes.list(&ListParams::default()).await?.items.len();
    Ok(format!(
        "t={:>5.1}s  pods {running}/{want} running ({total} exist)  nodeclaims {} ({ready} ready)  nodes {nodes}",
        start.elapsed().as_secs_f64(),
        ncs.len()
    ))
}

fn quantity(q: Option<&k8s_openapi::apimachinery::pkg::api::resource::Quantity>) -> f64 {
    q.and_then(|q| Quantity::parse(&q.0).ok())
        .map_or(0.0, |q| q.as_nanos() as f64 / 1e9)
}

/// Nodes (Machines with a Node) and their cost per hour, each node priced as the controller
/// prices it.
async fn nodes_and_cost(
    workload: &kube::Client,
    management: &kube::Client,
    operator: &Operator,
) -> anyhow::Result<(usize, f64)> {
    let groups = groups::node_groups(workload, management, &operator.provider()).await?;
    Ok((groups.nodes(), groups.cost()))
}

#[allow(clippy::too_many_lines)]
async fn summarize(
    name: &str,
    clients: (&kube::Client, &kube::Client),
    operator: &Operator,
    start: Instant,
    wall: Duration,
    steps: Vec<StepSummary>,
    peak: (usize, f64),
) -> anyhow::Result<Summary> {
    let (workload, management) = clients;
    let pods = workload_pods(workload).await?;
    let running = pods
        .iter()
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        .count();
    let nodes: Api<Node> = Api::all(workload.clone());
    let nodes = nodes.list(&ListParams::default()).await?.items;
    let ncs: Api<NodeClaim> = Api::all(workload.clone());
    let ncs = ncs.list(&ListParams::default()).await?.items;

    let (mut cpu_alloc, mut mem_alloc) = (0.0, 0.0);
    for n in &nodes {
        let alloc = n.status.as_ref().and_then(|s| s.allocatable.as_ref());
        cpu_alloc += quantity(alloc.and_then(|a| a.get("cpu")));
        mem_alloc += quantity(alloc.and_then(|a| a.get("memory")));
    }
    let (mut cpu_req, mut mem_req) = (0.0, 0.0);
    for p in pods.iter().filter(|p| {
        p.spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .is_some_and(|n| !n.is_empty())
    }) {
        for c in p.spec.iter().flat_map(|s| &s.containers) {
            let req = c.resources.as_ref().and_then(|r| r.requests.as_ref());
            cpu_req += quantity(req.and_then(|r| r.get("cpu")));
            mem_req += quantity(req.and_then(|r| r.get("memory")));
        }
    }

    let groups = groups::node_groups(workload, management, &operator.provider()).await?;
    let cost = groups.cost();
    let decisions = operator
        .decisions()
        .into_iter()
        // Passes for virtual pods alone run every 10 s: shown when they launched something.
        .filter(|d| d.pods > 0 || (d.buffer_pods > 0 && !d.node_claims.is_empty()))
        .map(|d| DecisionSummary {
            at_seconds: d.finished.saturating_duration_since(start).as_secs_f64(),
            pods: d.pods,
            buffer_pods: d.buffer_pods,
            node_claims: d.node_claims.len(),
            pods_on_existing: d.pods_on_existing,
            unschedulable: d.unschedulable,
            latency_ms: d.window_opened.map_or(0, |o| {
                d.finished.saturating_duration_since(o).as_millis() as u64
            }),
            solve_ms: d.solve.as_millis() as u64,
        })
        .collect();
    let percent = |a: f64, b: f64| {
        if b > 0.0 {
            (a / b * 1000.0).round() / 10.0
        } else {
            0.0
        }
    };
    Ok(Summary {
        scenario: name.to_owned(),
        wall_seconds: (wall.as_secs_f64() * 10.0).round() / 10.0,
        pods: pods.len(),
        pods_running: running,
        nodes: nodes.len(),
        node_claims: ncs.len(),
        node_claims_ready: ncs
            .iter()
            .filter(|n| {
                n.status
                    .as_ref()
                    .is_some_and(|s| s.conditions.is_true("Ready"))
            })
            .count(),
        node_groups: groups.into_summaries(),
        cpu_utilization_percent: percent(cpu_req, cpu_alloc),
        memory_utilization_percent: percent(mem_req, mem_alloc),
        cost_per_hour: (cost * 1000.0_f64).round() / 1000.0,
        peak_nodes: peak.0.max(nodes.len()),
        peak_cost_per_hour: (peak.1.max(cost) * 1000.0_f64).round() / 1000.0,
        disruptions: operator
            .disruptions()
            .into_iter()
            .map(|r| DisruptionSummary {
                at_seconds: r.at.saturating_duration_since(start).as_secs_f64(),
                reason: methods::reason_name(r.method.reason()).to_owned(),
                method: match r.method {
                    Method::Emptiness => "emptiness",
                    Method::Drift => "drift",
                    Method::MultiNode => "multi-node consolidation",
                    Method::SingleNode => "single-node consolidation",
                }
                .to_owned(),
                decision: r.decision.to_string(),
                nodes: r.nodes,
                replacements: r.replacements,
                savings_per_hour: (r.savings * 1000.0).round() / 1000.0,
                computed_ms: r.computed.as_millis() as u64,
                outcome: match r.outcome {
                    None => "running".to_owned(),
                    Some(Ok(())) => "done".to_owned(),
                    Some(Err(why)) => format!("rolled back: {why}"),
                },
            })
            .collect(),
        decisions,
        steps,
    })
}
