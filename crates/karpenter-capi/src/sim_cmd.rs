//! `karpenter-capi sim serve` and `sim world`: wiring of the `sim` crate's world.
//!
//! Responsibility: start the simulated clusters (or only the simulated world controllers
//! against given clusters), say where they are, and stop cleanly on Ctrl-C.
//! Inputs: [`cli::SimArgs`]. Outputs: running servers; messages on stdout.

use anyhow::Context;
use karpenter_capi::connect::{Source, connect};
use world::{ServeWorldConfig, WorldConfig};

use crate::cli::{SimArgs, SimCommand, SimServeArgs, SimWorldArgs};

/// Runs a `sim` subcommand until interrupted.
pub fn run(args: SimArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        match args.which {
            SimCommand::Serve(args) => serve(args).await,
            SimCommand::World(args) => world(args).await,
        }
    })
}

async fn serve(args: SimServeArgs) -> anyhow::Result<()> {
    let world = world::serve_world(ServeWorldConfig {
        world: if args.instant {
            instant_world()
        } else {
            WorldConfig::default()
        },
        management_addr: args.management_address,
        workload_addr: args.address,
        management_kubeconfig: args.management_kubeconfig,
        workload_kubeconfig: args.kubeconfig,
        install_karpenter_crds: true,
    })
    .await
    .context("cannot start the simulated clusters")?;
    println!("workload cluster:   {}", world.workload_url());
    println!(
        "  kubeconfig:       {}",
        world.workload_kubeconfig().display()
    );
    println!("management cluster: {}", world.management_url());
    println!(
        "  kubeconfig:       {}",
        world.management_kubeconfig().display()
    );
    println!(
        "ready: try `kubectl --kubeconfig {} get nodes`; Ctrl-C stops",
        world.workload_kubeconfig().display()
    );
    tokio::signal::ctrl_c()
        .await
        .context("cannot wait for Ctrl-C")?;
    world
        .shutdown()
        .await
        .context("shutting down the simulated clusters")
}

/// A world whose infrastructure, kubelets and scheduler act without delay.
#[must_use]
pub fn instant_world() -> WorldConfig {
    karpenter_capi::simulate::instant_world_config()
}

async fn world(args: SimWorldArgs) -> anyhow::Result<()> {
    let timeout = std::time::Duration::from_secs(30);
    let workload = connect(
        "workload",
        &Source::Kubeconfig(args.kubeconfig.clone()),
        None,
        timeout,
    )
    .await?;
    let management = connect(
        "management",
        &Source::Kubeconfig(args.management_kubeconfig.clone()),
        None,
        timeout,
    )
    .await?;
    let mut config = if args.instant {
        instant_world()
    } else {
        WorldConfig::default()
    };
    if args.real_controllers {
        config.scheduler.enabled = false;
        config.workloads.deployments = false;
    }
    config.capi.core = !args.real_cluster_api;
    println!("running the simulated world controllers; Ctrl-C stops");
    tokio::select! {
        result = world::run_world_against(workload, management, config) => result,
        signal = tokio::signal::ctrl_c() => signal.context("cannot wait for Ctrl-C"),
    }
}
