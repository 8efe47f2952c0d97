//! `karpenter-capi bench e2e`: Karpenter's performance suite "basic/scaleOut" in `sim` or on a
//! real kube-apiserver.
//!
//! Responsibility: start the clusters outside this process, so this process holds only the
//! controller and its CPU time and peak RSS are the controller's — `--backend sim`: a child
//! `karpenter-capi sim serve --instant`; `--backend real`: etcd, kube-apiserver,
//! kube-controller-manager and kube-scheduler ([`sim::realk8s`]) plus a child
//! `karpenter-capi sim world --instant --real-controllers` for Cluster API and kubelets;
//! create nine MachineDeployments (c/m/r
//! families, 4–16 CPUs), a NodeClass and a NodePool; start the [`Operator`]; scale two
//! Deployments to the suite's shape (by default 500 pods of 900m/3100Mi and 500 of
//! 3500m/28Gi) and report the time until every pod is Running, nodes, NodeClaims,
//! utilization, cost, and the controller's CPU seconds and peak RSS.
//! Inputs: [`E2eArgs`]. Outputs: a [`Report`] (text or JSON).

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use karpenter_capi::api_counter::{ApiCounter, ApiCounts, counted_client};
use karpenter_capi::connect::client_from_kubeconfig;
use karpenter_capi::operator::{Operator, OperatorConfig};
use karpenter_capi::process::{cpu_seconds, peak_rss_mib};
use karpenter_capi::scenario;
use serde::Serialize;
use serde_json::{Value, json};
use tokio::time::Instant;

/// Output formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// Text.
    Text,
    /// JSON.
    Json,
}

/// Flags of `bench e2e`.
#[derive(Debug, Args)]
pub struct E2eArgs {
    /// Pods of 900m / 3100Mi.
    #[arg(long, default_value_t = 500)]
    pub small_pods: i32,
    /// Pods of 3500m / 28Gi.
    #[arg(long, default_value_t = 500)]
    pub large_pods: i32,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 600)]
    pub timeout: u64,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = Output::Text)]
    pub output: Output,
    /// Which API server: the in-memory `sim`, or a real kube-apiserver (its binaries found
    /// the envtest way, `KUBEBUILDER_ASSETS`; see the README).
    #[arg(long, value_enum, default_value_t = BenchBackend::Sim)]
    pub backend: BenchBackend,
}

/// The API server of `bench e2e`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BenchBackend {
    /// `sim serve --instant` in a child process.
    Sim,
    /// A real kube-apiserver with kube-controller-manager and kube-scheduler.
    Real,
}

/// What the benchmark measured.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// The API server.
    pub backend: BenchBackend,
    /// Pods created.
    pub pods: usize,
    /// Seconds from the scale-up until every pod was Running.
    pub seconds_to_all_running: f64,
    /// Nodes at the end.
    pub nodes: usize,
    /// NodeClaims at the end.
    pub node_claims: usize,
    /// Requested / allocatable CPU, percent.
    pub cpu_utilization_percent: f64,
    /// Requested / allocatable memory, percent.
    pub memory_utilization_percent: f64,
    /// Sum of node prices per hour.
    pub cost_per_hour: f64,
    /// Provisioning loops that created NodeClaims.
    pub provisioning_loops: usize,
    /// Those loops: when each finished (seconds since the scale-up), its pods, NodeClaims,
    /// latency and solve time — where the time to all Running goes.
    pub provisioning_decisions: Vec<karpenter_capi::simulate::DecisionSummary>,
    /// Controller CPU seconds (user + system) from its start until every pod ran (this
    /// process's, so with the harness's paged polling of pod phases, but not its summary).
    pub controller_cpu_seconds: f64,
    /// Controller CPU seconds in the quiet window after every pod ran.
    pub controller_idle_cpu_seconds: f64,
    /// Controller peak resident set (MiB) when every pod ran (as the CPU seconds).
    pub controller_peak_rss_mib: Option<f64>,
    /// The controller's API requests from the scale-up until every pod ran.
    pub api_requests: ApiCounts,
    /// The same, by `VERB resource[/subresource]`.
    pub api_requests_by_resource: std::collections::BTreeMap<String, u64>,
    /// Of those, the answers that were errors, by `STATUS VERB resource[/subresource]` (a
    /// 409 is a write that changed nothing).
    pub api_failures_by_resource: std::collections::BTreeMap<String, u64>,
    /// Of those, writes per NodeClaim.
    pub writes_per_node_claim: f64,
    /// Of those, writes per NodeClaim leaving out Events (`Nominated` Events are per pod,
    /// rate-limited to 5/s with bursts of 10 as upstream, so they grow with the run's length).
    pub writes_per_node_claim_without_events: f64,
    /// Of those, reads (GET and LIST) per NodeClaim.
    pub reads_per_node_claim: f64,
    /// The controller's requests per second (no watches) in the quiet window after every pod
    /// ran: periodic polling shows here.
    pub idle_requests_per_second: f64,
    /// The requests of that quiet window, by `VERB resource[/subresource]`.
    pub idle_requests_by_resource: std::collections::BTreeMap<String, u64>,
}

/// How long the quiet window after the run lasts.
const IDLE_WINDOW: Duration = Duration::from_secs(10);

fn per(n: u64, claims: usize) -> f64 {
    if claims == 0 {
        return 0.0;
    }
    #[allow(clippy::cast_precision_loss)]
    let v = n as f64 / claims as f64;
    (v * 100.0).round() / 100.0
}

/// (name, cpu, memory Gi, price per hour)
const SHAPES: &[(&str, u32, u32, f64)] = &[
    ("c5.xlarge", 4, 8, 0.17),
    ("c5.2xlarge", 8, 16, 0.34),
    ("c5.4xlarge", 16, 32, 0.68),
    ("m5.xlarge", 4, 16, 0.192),
    ("m5.2xlarge", 8, 32, 0.384),
    ("m5.4xlarge", 16, 64, 0.768),
    ("r5.xlarge", 4, 32, 0.252),
    ("r5.2xlarge", 8, 64, 0.504),
    ("r5.4xlarge", 16, 128, 1.008),
];

fn machine_deployment(name: &str, cpu: u32, memory_gi: u32, price: f64) -> Value {
    let md = name.replace('.', "-");
    json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2",
        "kind": "MachineDeployment",
        "metadata": {"name": md, "namespace": "default",
            "labels": {"node.cluster.x-k8s.io/karpenter-member": ""},
            "annotations": {
                "capacity.cluster-autoscaler.kubernetes.io/cpu": cpu.to_string(),
                "capacity.cluster-autoscaler.kubernetes.io/memory": format!("{memory_gi}Gi"),
                "capacity.cluster-autoscaler.kubernetes.io/labels":
                    format!("node.kubernetes.io/instance-type={name},topology.kubernetes.io/zone=zone-a"),
                "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size": "1000",
                "karpenter.cluster.x-k8s.io/price": price.to_string(),
            }},
        "spec": {"clusterName": "bench", "replicas": 0,
            "selector": {"matchLabels": {"pool": md}},
            "template": {"metadata": {"labels": {"pool": md}},
                "spec": {"clusterName": "bench", "bootstrap": {"dataSecretName": "boot"},
                    "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                        "kind": "DockerMachineTemplate", "name": md}}}},
    })
}

fn deployment(name: &str, cpu: &str, memory: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "pause",
                    "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}}},
    })
}

/// The child `sim serve --instant`; killed on drop.
struct SimChild(Child);

impl Drop for SimChild {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn wait_for_file(path: &Path, timeout: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    while !path.exists() {
        if Instant::now() > deadline {
            bail!("the simulated clusters did not start within {timeout:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Written before the servers accept? serve_world writes after binding; a short grace.
    tokio::time::sleep(Duration::from_millis(200)).await;
    Ok(())
}

/// Runs the benchmark.
pub fn run(args: &E2eArgs) -> anyhow::Result<Report> {
    if let Ok(level) = std::env::var("LOG_LEVEL") {
        crate::run_cmd::init_logging(&level, crate::run_cmd::LogFormat::Plain)?;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(measure(args))
}

async fn measure(args: &E2eArgs) -> anyhow::Result<Report> {
    let dir = std::env::temp_dir().join(format!("karpenter-capi-bench-e2e-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let (wl, mgmt) = (dir.join("workload"), dir.join("management"));
    let exe = std::env::current_exe().context("cannot find my own executable")?;
    let mut real = None;
    let child = match args.backend {
        BenchBackend::Sim => Command::new(exe)
            .args(["sim", "serve", "--instant", "--kubeconfig"])
            .arg(&wl)
            .arg("--management-kubeconfig")
            .arg(&mgmt)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .context("cannot start `sim serve`")?,
        BenchBackend::Real => {
            let cluster = sim::realk8s::RealCluster::start(sim::realk8s::RealConfig {
                controller_manager: true,
                scheduler: true,
                apiserver_args: Vec::new(),
            })
            .await
            .context("cannot start the real API server")?;
            let admin = cluster.client().await?;
            world::crds::install_karpenter_crds(&admin).await?;
            world::crds::install_capi_crds(&admin).await?;
            for path in [&wl, &mgmt] {
                std::fs::copy(cluster.kubeconfig_path(), path)
                    .with_context(|| format!("cannot write {}", path.display()))?;
            }
            real = Some(cluster);
            Command::new(exe)
                .args([
                    "sim",
                    "world",
                    "--instant",
                    "--real-controllers",
                    "--kubeconfig",
                ])
                .arg(&wl)
                .arg("--management-kubeconfig")
                .arg(&mgmt)
                .stdout(Stdio::null())
                .stderr(Stdio::inherit())
                .spawn()
                .context("cannot start `sim world`")?
        }
    };
    let _child = SimChild(child);
    wait_for_file(&wl, Duration::from_secs(30)).await?;
    wait_for_file(&mgmt, Duration::from_secs(30)).await?;
    let workload = client_from_kubeconfig(&wl).await?;
    let management = client_from_kubeconfig(&mgmt).await?;
    // The controller's own clients count their requests; setup and the summary use the
    // plain ones above.
    let counter = ApiCounter::default();
    let controller_workload = counted_client(&wl, &counter).await?;
    let controller_management = counted_client(&mgmt, &counter).await?;

    let mds: Vec<Value> = SHAPES
        .iter()
        .map(|(n, c, m, p)| machine_deployment(n, *c, *m, *p))
        .collect();
    scenario::apply(&management, &mds).await?;
    scenario::apply(
        &workload,
        &[
            json!({"apiVersion": "karpenter.cluster.x-k8s.io/v1alpha1", "kind": "ClusterAPINodeClass",
                "metadata": {"name": "default"}, "spec": {}}),
            json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
                "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.cluster.x-k8s.io",
                    "kind": "ClusterAPINodeClass", "name": "default"}, "requirements": []}}}}),
            deployment("small", "900m", "3100Mi"),
            deployment("large", "3500m", "28Gi"),
        ],
    )
    .await?;
    let cpu_before = cpu_seconds();
    let operator = Operator::start(
        controller_workload,
        controller_management,
        OperatorConfig::default(),
    );
    operator
        .wait_ready(Duration::from_secs(30))
        .await
        .map_err(anyhow::Error::msg)?;
    // Let the NodeClass and NodePool become Ready before the pods arrive.
    tokio::time::sleep(Duration::from_secs(2)).await;

    let steps = vec![
        scenario::Step::Scale {
            deployment: "default/small".into(),
            replicas: args.small_pods,
        },
        scenario::Step::Scale {
            deployment: "default/large".into(),
            replicas: args.large_pods,
        },
        scenario::Step::WaitForPods {
            timeout: format!("{}s", args.timeout),
        },
    ];
    let before_scale = counter.counts();
    let before_by_resource = counter.by_resource();
    let before_failures = counter.failures();
    // The controller's CPU time and peak RSS are taken the moment every pod runs, before this
    // process lists every object for the summary.
    let mut at_all_running = None;
    let summary = karpenter_capi::simulate::run_timeline_observed(
        &workload,
        &management,
        &operator,
        "bench-e2e",
        &steps,
        &mut |step| {
            if matches!(step, scenario::Step::WaitForPods { .. }) {
                at_all_running = Some((cpu_seconds() - cpu_before, peak_rss_mib()));
            }
        },
    )
    .await?;
    let (cpu, peak_rss) =
        at_all_running.unwrap_or_else(|| (cpu_seconds() - cpu_before, peak_rss_mib()));
    let during = counter.counts().since(&before_scale);
    let during_by_resource = difference(&counter.by_resource(), &before_by_resource);
    let failures = difference(&counter.failures(), &before_failures);
    let settled = counter.counts();
    let settled_by_resource = counter.by_resource();
    let idle_cpu_before = cpu_seconds();
    tokio::time::sleep(IDLE_WINDOW).await;
    let idle_cpu = cpu_seconds() - idle_cpu_before;
    let idle = counter.counts().since(&settled);
    let idle_by_resource = difference(&counter.by_resource(), &settled_by_resource);
    let seconds = summary
        .steps
        .last()
        .map_or(0.0, |s| s.started_seconds + s.took_seconds);
    operator.stop().await;
    drop(_child);
    drop(real);
    let events = during_by_resource.get("POST events").copied().unwrap_or(0);
    let launched: Vec<_> = summary
        .decisions
        .iter()
        .filter(|d| d.node_claims > 0)
        .cloned()
        .collect();
    Ok(Report {
        backend: args.backend,
        pods: summary.pods,
        seconds_to_all_running: (seconds * 100.0).round() / 100.0,
        nodes: summary.nodes,
        node_claims: summary.node_claims,
        cpu_utilization_percent: summary.cpu_utilization_percent,
        memory_utilization_percent: summary.memory_utilization_percent,
        cost_per_hour: summary.cost_per_hour,
        provisioning_loops: launched.len(),
        provisioning_decisions: launched,
        controller_cpu_seconds: (cpu * 100.0).round() / 100.0,
        controller_idle_cpu_seconds: (idle_cpu * 100.0).round() / 100.0,
        controller_peak_rss_mib: peak_rss.map(|m| (m * 10.0).round() / 10.0),
        api_requests: during,
        api_requests_by_resource: during_by_resource,
        api_failures_by_resource: failures,
        writes_per_node_claim: per(during.writes(), summary.node_claims),
        writes_per_node_claim_without_events: per(
            during.writes().saturating_sub(events),
            summary.node_claims,
        ),
        reads_per_node_claim: per(during.reads, summary.node_claims),
        idle_requests_per_second: {
            let n = idle.reads + idle.writes();
            #[allow(clippy::cast_precision_loss)]
            let rate = n as f64 / IDLE_WINDOW.as_secs_f64();
            (rate * 100.0).round() / 100.0
        },
        idle_requests_by_resource: idle_by_resource,
    })
}

/// `now - before` per key, keeping the keys that grew.
fn difference(
    now: &std::collections::BTreeMap<String, u64>,
    before: &std::collections::BTreeMap<String, u64>,
) -> std::collections::BTreeMap<String, u64> {
    now.iter()
        .map(|(k, v)| {
            (
                k.clone(),
                v.saturating_sub(before.get(k).copied().unwrap_or(0)),
            )
        })
        .filter(|(_, v)| *v > 0)
        .collect()
}

/// The report as text or JSON.
pub fn render(report: &Report, output: Output) -> anyhow::Result<String> {
    Ok(match output {
        Output::Json => serde_json::to_string_pretty(report)?,
        Output::Text => format!(
            "basic/scaleOut on {:?}: {} pods Running after {:.2}s\nnodes {}  nodeclaims {}  provisioning loops {} ({})\nutilization cpu {:.1}%  memory {:.1}%  cost ${:.3}/hour\ncontroller cpu {:.2}s (idle {:.2}s over {}s)  peak RSS {}\ncontroller API requests: {} reads, {} watches, {} creates, {} updates, {} deletes ({:.2} writes, {:.2} without Events, and {:.2} reads per NodeClaim); idle {:.2} requests/s ({})\nfailed requests: {}",
            report.backend,
            report.pods,
            report.seconds_to_all_running,
            report.nodes,
            report.node_claims,
            report.provisioning_loops,
            report
                .provisioning_decisions
                .iter()
                .map(|d| format!(
                    "done at {:.2}s: {} pods, {} NodeClaims, latency {} ms, solve {} ms",
                    d.at_seconds, d.pods, d.node_claims, d.latency_ms, d.solve_ms
                ))
                .collect::<Vec<_>>()
                .join("; "),
            report.cpu_utilization_percent,
            report.memory_utilization_percent,
            report.cost_per_hour,
            report.controller_cpu_seconds,
            report.controller_idle_cpu_seconds,
            IDLE_WINDOW.as_secs(),
            report
                .controller_peak_rss_mib
                .map_or_else(|| "unknown".to_owned(), |m| format!("{m:.1} MiB")),
            report.api_requests.reads,
            report.api_requests.watches,
            report.api_requests.creates,
            report.api_requests.updates,
            report.api_requests.deletes,
            report.writes_per_node_claim,
            report.writes_per_node_claim_without_events,
            report.reads_per_node_claim,
            report.idle_requests_per_second,
            report
                .idle_requests_by_resource
                .iter()
                .map(|(k, v)| format!("{v} × {k}"))
                .collect::<Vec<_>>()
                .join(", "),
            if report.api_failures_by_resource.is_empty() {
                "none".to_owned()
            } else {
                report
                    .api_failures_by_resource
                    .iter()
                    .map(|(k, v)| format!("{v} × {k}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            },
        ),
    })
}
