//! The command line: subcommands and their flags (clap derive).
//!
//! Responsibility: describe every command and flag in one place, with environment-variable
//! fallbacks named like upstream Karpenter's. Inputs: argv and environment. Outputs: [`Cli`].

use std::fmt;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Karpenter, the just-in-time node autoprovisioner, with Cluster API MachineDeployments as
/// instance types.
#[derive(Debug, Parser)]
#[command(name = "karpenter-capi", version = env!("CARGO_PKG_VERSION"), about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print the CustomResourceDefinitions (NodePool, NodeClaim, ClusterAPINodeClass) as YAML.
    Crds(CrdsArgs),
    /// Print version information.
    Version(VersionArgs),
    /// Run the controller against a workload cluster (and a Cluster API management cluster).
    Run(crate::run_cmd::RunArgs),
    /// Run the whole system on embedded simulated clusters: a built-in scenario or yours.
    Simulate(crate::simulate_cmd::SimulateArgs),
    /// Simulated clusters: serve them locally, or run the simulated world against real ones.
    Sim(SimArgs),
    /// Show offline which NodeClaims a cluster dump would get, which pods bind to existing
    /// nodes and why the others cannot schedule.
    Plan(crate::plan::PlanArgs),
    /// Check a real installation: CRDs, permissions (SelfSubjectAccessReview), what each
    /// NodeClass selects and derives, cluster-autoscaler overlap, NodePools that can never
    /// launch a node. Exit status: 0 when nothing blocks provisioning, 1 when something does,
    /// 2 when doctor itself cannot run (a cluster cannot be reached).
    Doctor(crate::doctor_cmd::DoctorArgs),
    /// Benchmarks.
    Bench(BenchArgs),
}

/// Flags of `crds`.
#[derive(Debug, Args)]
pub struct CrdsArgs {
    /// Write one file per CRD (`<group>_<plural>.yaml`) into this directory instead of printing
    /// them, e.g. `charts/karpenter-capi/crds`.
    #[arg(long, value_name = "DIR")]
    pub output_dir: Option<std::path::PathBuf>,
}

/// `sim` subcommands.
#[derive(Debug, Args)]
pub struct SimArgs {
    /// What to run.
    #[command(subcommand)]
    pub which: SimCommand,
}

/// The `sim` subcommands.
#[derive(Debug, Subcommand)]
pub enum SimCommand {
    /// Serve a simulated management and workload cluster (in-memory API servers with simulated
    /// Cluster API, kube-scheduler and kubelet) until interrupted.
    Serve(SimServeArgs),
    /// Run only the simulated world controllers (Cluster API, kube-scheduler, kubelet) against
    /// an existing pair of clusters, e.g. real API servers with no real infrastructure.
    World(SimWorldArgs),
}

/// Flags of `sim serve`.
#[derive(Debug, Args)]
pub struct SimServeArgs {
    /// Address of the workload cluster's API server (port 0: any free port).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub address: std::net::SocketAddr,
    /// Address of the management cluster's API server (port 0: any free port).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub management_address: std::net::SocketAddr,
    /// Write the workload cluster's kubeconfig here.
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<std::path::PathBuf>,
    /// Write the management cluster's kubeconfig here.
    #[arg(long, value_name = "PATH")]
    pub management_kubeconfig: Option<std::path::PathBuf>,
    /// Instant infrastructure: Machines get providerIDs, Nodes join and become Ready, and pods
    /// start without delay (for benchmarks).
    #[arg(long)]
    pub instant: bool,
}

/// Flags of `sim world`.
#[derive(Debug, Args)]
pub struct SimWorldArgs {
    /// Kubeconfig of the workload cluster.
    #[arg(long, value_name = "PATH", env = "KUBECONFIG")]
    pub kubeconfig: std::path::PathBuf,
    /// Kubeconfig of the management cluster (the CAPI objects live there).
    #[arg(long, value_name = "PATH", env = "CLUSTER_API_KUBECONFIG")]
    pub management_kubeconfig: std::path::PathBuf,
    /// Infrastructure, kubelets and scheduler act without delay (for benchmarks).
    #[arg(long)]
    pub instant: bool,
    /// The cluster runs the real kube-scheduler and kube-controller-manager (Deployments,
    /// ReplicaSets): simulate only Cluster API, kubelets and DaemonSets.
    #[arg(long)]
    pub real_controllers: bool,
    /// The management cluster runs Cluster API's real core controllers: simulate only an
    /// infrastructure and control plane provider for them (`SimCluster`, `SimControlPlane`,
    /// `SimMachine`, `SimMachineTemplate` in `*.sim.karpenter-capi.dev/v1alpha1`, CRDs
    /// installed when missing) and the Nodes their Machines become. The Cluster's kubeconfig
    /// Secret is yours to create.
    #[arg(long)]
    pub real_cluster_api: bool,
}

/// `bench` subcommands.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Which benchmark.
    #[command(subcommand)]
    pub which: BenchCommand,
}

/// The benchmarks.
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Karpenter's scheduling benchmark: 400 fake instance types, one NodePool, an empty
    /// cluster; times only the solve, on a freshly built scheduler each iteration.
    Scheduling(crate::bench::SchedulingArgs),
    /// The `sim` API server at scale: nodes, pods and concurrent watchers over HTTP.
    Sim(crate::bench_sim::SimBenchArgs),
    /// Karpenter's performance suite "basic/scaleOut" end to end in `sim` with instant
    /// infrastructure: time until every pod runs, nodes, utilization, controller CPU and RSS.
    E2e(crate::bench_e2e::E2eArgs),
    /// The randomized safety suite: seeded rounds of scale-out, scale-in, deletions,
    /// controller restarts, API faults, paused groups, MachineSet preflight holds, template
    /// changes and Cluster API rollouts in `sim`, with the safety invariants checked after every
    /// round; prints the invariant table, fails when one broke.
    Chaos(crate::bench_chaos::ChaosArgs),
    /// One full pass of the disruption methods' computation (candidates, budgets, emptiness,
    /// multi-node binary search, single-node simulations) over a synthetic underutilized
    /// cluster of `--nodes` nodes over 24 MachineDeployment shapes.
    Disruption(crate::bench_disruption::DisruptionArgs),
}

/// Flags of `version`.
#[derive(Debug, Args)]
pub struct VersionArgs {
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = VersionOutput::Text)]
    pub output: VersionOutput,
}

/// Output formats of `version`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum VersionOutput {
    /// Human-readable.
    Text,
    /// One JSON object.
    Json,
}

/// What `version` reports.
#[derive(Debug)]
pub struct VersionInfo {
    /// Our version.
    pub version: &'static str,
    /// The Kubernetes API version our types are built against.
    pub kubernetes_api: &'static str,
    /// The API groups we serve.
    pub api_groups: [&'static str; 2],
}

impl VersionInfo {
    /// This build's information.
    pub fn current() -> Self {
        Self {
            version: env!("CARGO_PKG_VERSION"),
            kubernetes_api: "1.33",
            api_groups: ["karpenter.sh/v1", "karpenter.cluster.x-k8s.io/v1alpha1"],
        }
    }

    /// As a JSON object.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "version": self.version,
            "kubernetesAPI": self.kubernetes_api,
            "apiGroups": self.api_groups,
        })
    }
}

impl fmt::Display for VersionInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "karpenter-capi {} (Kubernetes API {}; serves {})",
            self.version,
            self.kubernetes_api,
            self.api_groups.join(", ")
        )
    }
}

/// For a command-line error about a value that came from an environment variable (the flag
/// is not on the command line, its variable is set): a note naming the variable, which is
/// what the user has to fix.
#[must_use]
pub fn environment_note(err: &clap::Error, argv: &[String]) -> Option<String> {
    use clap::CommandFactory;
    use clap::error::{ContextKind, ContextValue};
    let Some(ContextValue::String(invalid)) = err.get(ContextKind::InvalidArg) else {
        return None;
    };
    let flag = invalid.split([' ', '=']).next()?;
    let long = flag.strip_prefix("--")?;
    let on_line = argv
        .iter()
        .any(|a| a == flag || a.starts_with(&format!("{flag}=")));
    if on_line {
        return None;
    }
    let command = Cli::command();
    let env = command
        .get_subcommands()
        .flat_map(clap::Command::get_arguments)
        .find(|a| a.get_long() == Some(long))
        .and_then(clap::Arg::get_env)?
        .to_string_lossy()
        .into_owned();
    std::env::var_os(&env)?;
    Some(format!(
        "note: the value comes from the environment variable {env} ({flag} is not on the command line)"
    ))
}
