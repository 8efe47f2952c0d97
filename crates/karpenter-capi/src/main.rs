//! `karpenter-capi`: Karpenter with Cluster API as its infrastructure provider.
//!
//! Responsibility: the composition root only — parse the command line, wire concrete
//! implementations together, report errors. No logic lives here that a library crate could own.
//! Inputs: argv and environment. Outputs: the chosen command's effect and exit status.

mod bench;
mod bench_buffers;
mod bench_chaos;
mod bench_disruption;
mod bench_e2e;
mod bench_overlays;
mod bench_sim;
mod cli;
mod doctor_cmd;
mod plan;
mod run_cmd;
mod sim_cmd;
mod simulate_cmd;

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;

use cli::{Cli, Command};

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            let argv: Vec<String> = std::env::args().collect();
            let _ = err.print();
            if err.use_stderr()
                && let Some(note) = cli::environment_note(&err, &argv)
            {
                eprintln!("{note}");
            }
            return ExitCode::from(u8::try_from(err.exit_code()).unwrap_or(2));
        }
    };
    karpenter_capi::connect::install_crypto_provider();
    match run(cli) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Crds(args) => {
            match args.output_dir {
                None => std::io::stdout()
                    .lock()
                    .write_all(api::crd::render_all()?.as_bytes())?,
                Some(dir) => {
                    std::fs::create_dir_all(&dir)
                        .with_context(|| format!("cannot create {}", dir.display()))?;
                    for crd in api::crd::all() {
                        let path = dir.join(api::crd::file_name(&crd));
                        std::fs::write(&path, api::crd::render(&crd)?)
                            .with_context(|| format!("cannot write {}", path.display()))?;
                        println!("wrote {}", path.display());
                    }
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Doctor(args) => Ok(doctor_cmd::run(&args)),
        Command::Version(args) => {
            let info = cli::VersionInfo::current();
            let text = if args.output == cli::VersionOutput::Json {
                serde_json::to_string_pretty(&info.to_json())?
            } else {
                info.to_string()
            };
            println!("{text}");
            Ok(ExitCode::SUCCESS)
        }
        Command::Bench(args) => match args.which {
            cli::BenchCommand::Scheduling(args) => {
                let reports = bench::scheduling(&args)?;
                println!("{}", bench::render(&reports, args.output)?);
                Ok(ExitCode::SUCCESS)
            }
            cli::BenchCommand::Sim(args) => {
                let report = bench_sim::run(&args)?;
                println!("{}", bench_sim::render(&report, args.output)?);
                Ok(ExitCode::SUCCESS)
            }
            cli::BenchCommand::E2e(args) => {
                let report = bench_e2e::run(&args)?;
                println!("{}", bench_e2e::render(&report, args.output)?);
                Ok(ExitCode::SUCCESS)
            }
            cli::BenchCommand::Chaos(args) => bench_chaos::run_all(&args),
            cli::BenchCommand::Disruption(args) => {
                let report = bench_disruption::run(&args)?;
                println!("{}", bench_disruption::render(&report, args.output)?);
                Ok(ExitCode::SUCCESS)
            }
        },
        Command::Sim(args) => {
            sim_cmd::run(args)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Plan(args) => {
            plan::run(&args)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Run(args) => {
            run_cmd::run(args)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Simulate(args) => simulate_cmd::run(&args),
    }
}
