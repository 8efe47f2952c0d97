//! `karpenter-capi bench disruption`: one full pass of the disruption methods' computation.
//!
//! Responsibility: build a cluster of `--nodes` initialized nodes spread over 24
//! MachineDeployment shapes (2–96 CPUs, 2–8 GiB per CPU, priced by size, three zones), each
//! holding `--pods-per-node` pods of a mixed workload (plain pods of several sizes, zone-spread
//! pods, pods selecting an architecture) that leave it underutilized; then time what the
//! disruption loop computes in one pass — candidates, budget maps, emptiness, the multi-node
//! binary search and the single-node simulations (without the 15 s validation wait) — and
//! report the seconds and the command found.
//! Inputs: flags. Outputs: a [`Report`] as text or JSON.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use api::nodepool::DisruptionReason;
use api::{NodeClaim, NodePool};
use clap::Args;
use controllers::disruption::budget_map::budget_map;
use controllers::disruption::candidates::{Class, Inputs, candidates};
use controllers::disruption::floors::Floors;
use controllers::disruption::methods::{self, Command};
use controllers::disruption::simulation::{Objects, World};
use controllers::provisioning::inputs::ClusterObjects;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::jiff::Timestamp;
use scheduling::fixtures::FakeInstanceType;
use scheduling::instance_type::{InstanceType, Offering};
use scheduling::labels::WellKnownLabels;
use scheduling::quantity::Quantity;
use serde::Serialize;
use serde_json::json;

use crate::bench::Output;

/// Flags of `bench disruption`.
#[derive(Debug, Args)]
pub struct DisruptionArgs {
    /// Initialized nodes.
    #[arg(long, default_value_t = 1000)]
    pub nodes: usize,
    /// Pods per node.
    #[arg(long, default_value_t = 10)]
    pub pods_per_node: usize,
    /// Passes to time (the report gives each and the mean).
    #[arg(long, default_value_t = 1)]
    pub iterations: usize,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = Output::Text)]
    pub output: Output,
}

/// What one benchmark run measured.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// Nodes.
    pub nodes: usize,
    /// Pods.
    pub pods: usize,
    /// MachineDeployment shapes.
    pub shapes: usize,
    /// Candidates found.
    pub candidates: usize,
    /// Seconds to convert the snapshot for simulation (once per pass).
    pub world_seconds: f64,
    /// Seconds of each pass (candidates, budgets, every method until one decides).
    pub pass_seconds: Vec<f64>,
    /// Their mean.
    pub mean_seconds: f64,
    /// Simulations run in the last pass.
    pub simulations: usize,
    /// The command found, if any.
    pub command: Option<CommandReport>,
}

/// A command, summarized.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CommandReport {
    /// The method.
    pub method: String,
    /// Delete or replace.
    pub decision: String,
    /// Nodes removed.
    pub nodes: usize,
    /// The replacements' cheapest instance types.
    pub replacements: Vec<String>,
    /// Price per hour saved.
    pub savings_per_hour: f64,
}

const ZONES: [&str; 3] = ["z1", "z2", "z3"];

fn shapes() -> anyhow::Result<Vec<Arc<InstanceType>>> {
    let mut out = Vec::new();
    for cpu in [2_i64, 4, 8, 16, 32, 48, 64, 96] {
        for gib_per_cpu in [2_i64, 4, 8] {
            let name = format!("c{cpu}-m{}", cpu * gib_per_cpu);
            let price = 0.02 * cpu as f64 + 0.004 * (cpu * gib_per_cpu) as f64;
            let mut it = FakeInstanceType::new(&name)
                .resource("cpu", Quantity::from_value(cpu))
                .resource("memory", Quantity::from_bytes((cpu * gib_per_cpu) << 30))
                .resource("pods", Quantity::from_value(110));
            for zone in ZONES {
                it = it.offering(Offering::new("on-demand", zone, price));
            }
            out.push(Arc::new(it.build().context("instance type")?));
        }
    }
    Ok(out)
}

fn object<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> anyhow::Result<T> {
    serde_json::from_value(value).context("benchmark object")
}

struct Cluster {
    nodes: Vec<Node>,
    node_claims: Vec<NodeClaim>,
    pods: Vec<std::sync::Arc<Pod>>,
    pool: NodePool,
    types: Vec<Arc<InstanceType>>,
}

/// Nodes of every shape (the smaller ones more often), each about a third full.
fn cluster(nodes: usize, pods_per_node: usize) -> anyhow::Result<Cluster> {
    let types = shapes()?;
    let pool: NodePool = object(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": "default", "uid": "pool-uid"},
        "spec": {"disruption": {"consolidateAfter": "0s", "budgets": [{"nodes": "10%"}]},
            "template": {"spec": {
                "nodeClassRef": {"group": "karpenter.cluster.x-k8s.io", "kind": "ClusterAPINodeClass", "name": "default"},
                "requirements": []}}}
    }))?;
    let mut out = Cluster {
        nodes: Vec::new(),
        node_claims: Vec::new(),
        pods: Vec::new(),
        pool,
        types: types.clone(),
    };
    // Smaller shapes more often: shape i with weight (len - i).
    let weights: Vec<usize> = (0..types.len()).map(|i| types.len() - i).collect();
    let total: usize = weights.iter().sum();
    for n in 0..nodes {
        let mut pick = (n * 7919) % total;
        let mut shape = 0;
        for (i, w) in weights.iter().enumerate() {
            if pick < *w {
                shape = i;
                break;
            }
            pick -= w;
        }
        let it = types.get(shape).context("shape")?;
        let cpu = it
            .capacity()
            .get_or_zero(&scheduling::resources::ResourceName::CPU);
        let memory = it
            .capacity()
            .get_or_zero(&scheduling::resources::ResourceName::MEMORY);
        let name = format!("node-{n}");
        let zone = ZONES.get(n % 3).copied().unwrap_or("z1");
        out.nodes.push(object(json!({
            "metadata": {"name": name, "labels": {
                "karpenter.sh/nodepool": "default", "karpenter.sh/initialized": "true",
                "karpenter.sh/registered": "true", "node.kubernetes.io/instance-type": it.name(),
                "topology.kubernetes.io/zone": zone, "karpenter.sh/capacity-type": "on-demand",
                "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}},
            "spec": {"providerID": format!("bench://{name}")},
            "status": {"capacity": {"cpu": cpu.to_string(), "memory": memory.to_string(), "pods": "110"},
                "allocatable": {"cpu": cpu.to_string(), "memory": memory.to_string(), "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}]}
        }))?);
        out.node_claims.push(object(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": format!("claim-{n}"), "uid": format!("claim-uid-{n}"),
                "labels": {"karpenter.sh/nodepool": "default"}},
            "spec": {"nodeClassRef": {"group": "karpenter.cluster.x-k8s.io", "kind": "ClusterAPINodeClass", "name": "default"},
                "requirements": []},
            "status": {"nodeName": name, "providerID": format!("bench://{name}"),
                "conditions": [{"type": "Initialized", "status": "True", "reason": "Initialized",
                    "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
        }))?);
        // About a third of the node's CPU, split over its pods, in a few kinds.
        let millis = cpu.as_nanos() / 1_000_000 / 3;
        let per_pod = (millis / i128::try_from(pods_per_node.max(1)).unwrap_or(1)).max(10);
        for p in 0..pods_per_node {
            let kind = (n + p) % 10;
            let app = format!("app-{}", (n * pods_per_node + p) % 50);
            let mut spec = serde_json::Map::new();
            spec.insert("nodeName".into(), json!(name));
            spec.insert(
                "containers".into(),
                json!([{"name": "c", "resources": {"requests": {
                    "cpu": format!("{per_pod}m"), "memory": format!("{per_pod}Mi")}}}]),
            );
            if kind < 2 {
                spec.insert(
                    "topologySpreadConstraints".into(),
                    json!([{"maxSkew": 5,
                        "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
                        "labelSelector": {"matchLabels": {"app": app}}}]),
                );
            } else if kind == 2 {
                spec.insert(
                    "nodeSelector".into(),
                    json!({"kubernetes.io/arch": "amd64"}),
                );
            }
            out.pods.push(std::sync::Arc::new(object(json!({
                "metadata": {"name": format!("pod-{n}-{p}"), "namespace": "default",
                    "uid": format!("pod-uid-{n}-{p}"), "labels": {"app": app},
                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                        "name": app, "uid": format!("rs-{app}"), "controller": true}]},
                "spec": spec,
                "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}],
                    "startTime": "2026-01-01T00:00:00Z"}
            }))?));
        }
    }
    Ok(out)
}

/// Builds the cluster and times the passes.
///
/// # Errors
/// A benchmark object does not build.
pub fn run(args: &DisruptionArgs) -> anyhow::Result<Report> {
    let c = cluster(args.nodes, args.pods_per_node)?;
    let its: BTreeMap<String, Vec<Arc<InstanceType>>> =
        BTreeMap::from([("default".to_owned(), c.types.clone())]);
    let pools = vec![c.pool.clone()];
    let well_known = WellKnownLabels::cluster_api();
    let now = Timestamp::now();
    let in_flight = BTreeSet::new();
    let mut pass_seconds = Vec::new();
    let mut last = (0, Duration::ZERO, None, 0);
    for _ in 0..args.iterations.max(1) {
        let started = Instant::now();
        let nominated = |_: &str| false;
        let planned = |_: &str| Vec::new();
        let last_event = |_: &str| None;
        let (cands, _) = candidates(
            &Inputs {
                nodes: &c.nodes,
                node_claims: &c.node_claims,
                pods: &c.pods,
                pdbs: &[],
                node_pools: &pools,
                instance_types: &its,
                in_flight: &in_flight,
                nominated: &nominated,
                planned: &planned,
                last_pod_event: &last_event,
                floors: &Floors::default(),
                now,
            },
            Class::Graceful,
        );
        let budgets =
            |reason| budget_map(&c.nodes, &c.node_claims, &pools, &in_flight, reason, now);
        let mut empty_budgets = budgets(DisruptionReason::Empty);
        let mut command: Option<Command> = methods::emptiness(&cands, &mut empty_budgets);
        let world_started = Instant::now();
        let world = World::new(
            &Objects {
                cluster: ClusterObjects {
                    nodes: &c.nodes,
                    node_claims: &c.node_claims,
                    pods: &c.pods,
                    daemon_sets: &[],
                    namespaces: &[],
                },
                node_pools: &pools,
                pdbs: &[],
                instance_types: &its,
                now,
                last_pod_event: None,
            },
            &well_known,
        );
        let world_took = world_started.elapsed();
        let before = world.simulations();
        let underutilized = budgets(DisruptionReason::Underutilized);
        if command.is_none() {
            command = methods::multi_node(&world, &cands, &pools, &underutilized);
        }
        if command.is_none() {
            command = methods::single_node(&world, &cands, &pools, &underutilized).0;
        }
        pass_seconds.push(started.elapsed().as_secs_f64());
        last = (
            cands.len(),
            world_took,
            command,
            world.simulations() - before,
        );
    }
    let (candidates, world_took, command, simulations) = last;
    let mean = pass_seconds.iter().sum::<f64>() / pass_seconds.len() as f64;
    Ok(Report {
        nodes: c.nodes.len(),
        pods: c.pods.len(),
        shapes: c.types.len(),
        candidates,
        world_seconds: world_took.as_secs_f64(),
        pass_seconds,
        mean_seconds: mean,
        simulations,
        command: command.map(|cmd| CommandReport {
            method: format!("{:?}", cmd.method),
            decision: cmd.decision().to_string(),
            nodes: cmd.candidates.len(),
            replacements: cmd.replacement_types(),
            savings_per_hour: (cmd.savings * 1000.0).round() / 1000.0,
        }),
    })
}

/// The report as text or JSON.
///
/// # Errors
/// JSON encoding failed.
pub fn render(report: &Report, output: Output) -> anyhow::Result<String> {
    if output == Output::Json {
        return Ok(serde_json::to_string_pretty(report)?);
    }
    let command = report.command.as_ref().map_or_else(
        || "none".to_owned(),
        |c| {
            format!(
                "{} {} of {} node(s), replacements {:?}, saves ${:.3}/h",
                c.method, c.decision, c.nodes, c.replacements, c.savings_per_hour
            )
        },
    );
    Ok(format!(
        "disruption pass over {} nodes / {} pods ({} shapes, {} candidates): mean {:.3}s (each {:?}), snapshot conversion {:.3}s, {} simulations\ncommand: {command}",
        report.nodes,
        report.pods,
        report.shapes,
        report.candidates,
        report.mean_seconds,
        report.pass_seconds,
        report.world_seconds,
        report.simulations
    ))
}
