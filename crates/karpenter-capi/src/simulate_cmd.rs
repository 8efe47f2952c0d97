//! `karpenter-capi simulate`: flags and output of the simulation.
//!
//! Responsibility: pick the scenario (built-in or `--scenario FILE`), run it through
//! [`karpenter_capi::simulate`] with progress on stderr, print the summary as a table or JSON,
//! and exit non-zero when a pod was left not Running.
//! Inputs: [`SimulateArgs`]. Outputs: the summary on stdout, progress on stderr, exit status.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, ValueEnum};
use karpenter_capi::scenario;
use karpenter_capi::simulate::{SimulateOptions, render, simulate};

use crate::run_cmd::{LogFormat, init_logging};

/// Output formats of `simulate`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SimulateOutput {
    /// Tables.
    Table,
    /// One JSON object.
    Json,
}

/// Flags of `simulate`.
#[derive(Debug, Args)]
pub struct SimulateArgs {
    /// A scenario file (YAML; see `crates/karpenter-capi/scenarios/basic.yaml`), or a built-in
    /// scenario by name: `basic` (the default), `capacity-buffer` (a CapacityBuffer's warm
    /// nodes take a burst) or `node-overlay` (a NodeOverlay's discount picks the launch; each
    /// node group's price names its source). A file of that name wins.
    #[arg(long, value_name = "FILE|NAME")]
    pub scenario: Option<PathBuf>,
    /// Output format of the summary.
    #[arg(long, short, value_enum, default_value_t = SimulateOutput::Table)]
    pub output: SimulateOutput,
    /// Write `management.kubeconfig` and `workload.kubeconfig` here, for `kubectl`.
    #[arg(long, value_name = "DIR")]
    pub kubeconfig_dir: Option<PathBuf>,
    /// No progress lines.
    #[arg(long, short)]
    pub quiet: bool,
    /// Infrastructure without delays: Machines get their providerID, Nodes join and turn Ready,
    /// pods start and stop at once (to time the controller alone, e.g. how long consolidation
    /// takes).
    #[arg(long)]
    pub instant_infrastructure: bool,
    /// Controller log level (logs go to stderr).
    #[arg(long, env = "LOG_LEVEL", default_value = "warn")]
    pub log_level: String,
}

/// Runs `simulate`.
pub fn run(args: &SimulateArgs) -> anyhow::Result<ExitCode> {
    init_logging(&args.log_level, LogFormat::Plain)?;
    // A built-in scenario's name, unless a file of that name exists.
    let built_in = args
        .scenario
        .as_deref()
        .filter(|p| !p.exists())
        .and_then(|p| p.to_str())
        .and_then(scenario::built_in);
    let text = match (&args.scenario, built_in) {
        (_, Some(yaml)) => yaml.to_owned(),
        (Some(path), None) => std::fs::read_to_string(path).with_context(|| {
            let names: Vec<&str> = scenario::BUILT_IN.iter().map(|(n, _)| *n).collect();
            format!(
                "cannot read {} (built-in scenarios: {})",
                path.display(),
                names.join(", ")
            )
        })?,
        (None, None) => scenario::BASIC.to_owned(),
    };
    let scenario = scenario::parse(&text)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let summary = runtime.block_on(simulate(
        &scenario,
        SimulateOptions {
            kubeconfig_dir: args.kubeconfig_dir.clone(),
            progress: !args.quiet,
            world: if args.instant_infrastructure {
                karpenter_capi::simulate::instant_world_config()
            } else {
                world::WorldConfig::default()
            },
            ..SimulateOptions::default()
        },
    ))?;
    match args.output {
        SimulateOutput::Json => println!("{}", serde_json::to_string_pretty(&summary)?),
        SimulateOutput::Table => print!("{}", render(&summary)),
    }
    if summary.pods_running == summary.pods {
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!(
            "{} of {} pods are not Running",
            summary.pods - summary.pods_running,
            summary.pods
        );
        Ok(ExitCode::FAILURE)
    }
}
