//! `karpenter-capi bench chaos`: the randomized safety suite ([`karpenter_capi::chaos`]) for as
//! many rounds and seeds as asked, with its invariant table.
//!
//! Responsibility: parse the flags, run one seed after another (`--seeds K` runs `--seed`,
//! `--seed + 1`, …), print each report (text or JSON) and fail the command when any round
//! broke an invariant. `--log` sends the controller's logs to stderr (a `tracing` filter).
//! Inputs: flags. Outputs: reports on stdout; the exit code says whether every round passed.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use karpenter_capi::chaos::{ChaosConfig, ChaosReport, run};

use crate::bench::Output;

/// Flags of `bench chaos`.
#[derive(Debug, Args)]
pub struct ChaosArgs {
    /// Rounds per seed.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..))]
    pub rounds: u32,
    /// The first seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// How many seeds (each a fresh world).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pub seeds: u64,
    /// Seconds a round may take to settle before its broken invariants count.
    #[arg(long, default_value_t = 120)]
    pub settle_timeout: u64,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = Output::Text)]
    pub output: Output,
    /// Log the controller and the world at this `tracing` filter (e.g. `info`) on stderr.
    #[arg(long)]
    pub log: Option<String>,
}

/// Runs the seeds; the exit code is a failure when any round broke an invariant.
///
/// # Errors
/// The runtime or a world cannot be started, or the harness's own requests fail.
pub fn run_all(args: &ChaosArgs) -> anyhow::Result<ExitCode> {
    if let Some(filter) = &args.log {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_writer(std::io::stderr)
            .try_init();
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let mut reports: Vec<ChaosReport> = Vec::new();
    for seed in args.seed..args.seed.saturating_add(args.seeds) {
        let config = ChaosConfig {
            rounds: args.rounds,
            seed,
            settle_timeout: Duration::from_secs(args.settle_timeout),
        };
        let report = runtime.block_on(run(&config))?;
        if args.output == Output::Text {
            println!("{}", report.text());
        }
        reports.push(report);
    }
    if args.output == Output::Json {
        println!("{}", serde_json::to_string_pretty(&reports)?);
    }
    let passed = reports.iter().filter(|r| r.passed()).count();
    if args.output == Output::Text && reports.len() > 1 {
        let rounds: u32 = reports.iter().map(|r| r.rounds_passed).sum();
        println!(
            "{passed}/{} seeds passed, {rounds} rounds in all",
            reports.len()
        );
    }
    Ok(if passed == reports.len() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
