//! `karpenter-capi doctor`: the command line of [`karpenter_capi::doctor`].
//!
//! Responsibility: connect to both clusters as `run` would (the same flags and environment
//! variables, optionally impersonating the controller's account), run the examination, print
//! it as text or JSON. Exit status: 0 when nothing blocks provisioning, 1 when something does,
//! 2 when doctor itself cannot run (a cluster cannot be reached).
//! Inputs: [`DoctorArgs`]. Outputs: the report on stdout; the exit status.

use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, ValueEnum};
use karpenter_capi::connect::Impersonate;
use karpenter_capi::doctor::{self, Options};

use crate::run_cmd::{ClusterArgs, LeaderElectionArgs, management_client, workload_client};

/// Flags of `doctor`.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    #[command(flatten)]
    pub clusters: ClusterArgs,
    /// Act as this user in the workload cluster (e.g. the controller's service account,
    /// `system:serviceaccount:<namespace>:<name>`), so permissions are checked for it; the
    /// caller needs the `impersonate` verb.
    #[arg(long = "as", value_name = "USER")]
    pub as_user: Option<String>,
    /// Groups to act as in the workload cluster, with `--as`.
    #[arg(long = "as-group", value_name = "GROUP", requires = "as_user")]
    pub as_groups: Vec<String>,
    /// Act as this user in the management cluster (default: `--as` when the Cluster API
    /// objects live in the workload cluster).
    #[arg(long = "cluster-api-as", value_name = "USER")]
    pub cluster_api_as: Option<String>,
    /// Groups to act as in the management cluster, with `--cluster-api-as`.
    #[arg(
        long = "cluster-api-as-group",
        value_name = "GROUP",
        requires = "cluster_api_as"
    )]
    pub cluster_api_as_groups: Vec<String>,
    #[command(flatten)]
    pub leader_election: LeaderElectionArgs,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = DoctorOutput::Text)]
    pub output: DoctorOutput,
    /// `run`'s feature gates, as the controller runs with them: with `NodeOverlay=true` the
    /// NodeOverlays are evaluated and the prices they set listed per NodePool; `NodeOverlay`,
    /// `CapacityBuffer` and `NodeRepair` each add the permissions they need to the checks.
    #[arg(long, env = "FEATURE_GATES", default_value = "", value_name = "LIST")]
    pub feature_gates: karpenter_capi::feature_gates::FeatureGates,
}

/// Output formats of `doctor`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DoctorOutput {
    /// A readable report.
    Text,
    /// One JSON object (`ok`, `blockers`, `warnings`, `findings`, `nodeClasses`, `nodePools`,
    /// `blockedNodePools`).
    Json,
}

/// Runs `doctor`; the exit status says whether provisioning is blocked.
pub fn run(args: &DoctorArgs) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(examine(args)) {
        Ok((text, code)) => {
            println!("{text}");
            ExitCode::from(code)
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

async fn examine(args: &DoctorArgs) -> anyhow::Result<(String, u8)> {
    let workload_as = args.as_user.as_ref().map(|user| Impersonate {
        user: user.clone(),
        groups: args.as_groups.clone(),
    });
    let management_as = match &args.cluster_api_as {
        Some(user) => Some(Impersonate {
            user: user.clone(),
            groups: args.cluster_api_as_groups.clone(),
        }),
        None if !args.clusters.separate_management() => workload_as.clone(),
        None => None,
    };
    let workload = workload_client(&args.clusters, None, workload_as.as_ref()).await?;
    let management = if args.clusters.separate_management() {
        management_client(&args.clusters, &workload, None, management_as.as_ref()).await?
    } else {
        workload.clone()
    };
    let lease = args.leader_election.lease();
    let options = Options {
        scope: args.clusters.scope(),
        separate_management: args.clusters.separate_management(),
        lease,
        capi: args.clusters.capi_selection(),
        feature_gates: args.feature_gates,
    };
    let report = doctor::doctor(&workload, &management, &options).await;
    let text = match args.output {
        DoctorOutput::Text => report.render(),
        DoctorOutput::Json => {
            serde_json::to_string_pretty(&report).context("cannot render the report as JSON")?
        }
    };
    Ok((text, report.exit_code()))
}
