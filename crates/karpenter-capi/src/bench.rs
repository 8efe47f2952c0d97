//! `karpenter-capi bench scheduling`: Karpenter's scheduling benchmark (spec §8).
//!
//! Responsibility: build the benchmark's workload (diverse pods from our seeded generator, the
//! recorded seed-42 table via `--pods-file`, or the preference pods), schedule it `--iterations`
//! times on a freshly built scheduler, time only the solves, and report pods/s, NodeClaims and
//! pods per NodeClaim as text or JSON.
//! Inputs: flags. Outputs: a [`Report`].

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use scheduling::fixtures::{
    Rng, benchmark_node_pool, diverse_pods, fake_instance_types, options, preference_pods,
    read_pods_tsv,
};
use scheduling::pod::Pod;
use scheduling::scheduler::{Cluster, PreferencePolicy, Scheduler};

/// Flags of `bench scheduling`.
#[derive(Debug, Args)]
pub struct SchedulingArgs {
    /// Generate this many pods of the chosen workload.
    #[arg(
        long,
        conflicts_with = "pods_file",
        required_unless_present = "pods_file"
    )]
    pub pods: Option<usize>,
    /// Read the pods from a TSV file in the format of the seed-42 fixture (columns index, kind,
    /// pod_label_value, tsc_selector_value, cpu_request, memory_request).
    #[arg(long, value_name = "FILE")]
    pub pods_file: Option<PathBuf>,
    /// The generated workload: Karpenter's diverse pods, or its preference pods.
    #[arg(long, value_enum, default_value_t = Workload::Diverse)]
    pub workload: Workload,
    /// Whether soft constraints are respected (and relaxed) or ignored.
    #[arg(long, value_enum, default_value_t = Preferences::Respect)]
    pub preferences: Preferences,
    /// How many timed solves.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    pub iterations: u32,
    /// Seed of the pod generator.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// How many fake instance types.
    #[arg(long, default_value_t = 400)]
    pub instance_types: usize,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = Output::Text)]
    pub output: Output,
}

/// Generated workloads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Workload {
    /// Generic, zonal/hostname spread, zonal self-affinity and hostname anti-affinity pods.
    Diverse,
    /// Pods with preferred node affinity and preferred pod anti-affinity.
    Preference,
}

/// `--preferences`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Preferences {
    /// Respect preferences until they must be relaxed.
    Respect,
    /// Ignore preferences.
    Ignore,
}

/// Output formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// Human-readable.
    Text,
    /// One JSON object.
    Json,
}

/// What one benchmark run measured.
#[derive(Debug, serde::Serialize)]
pub struct Report {
    /// Pods per solve.
    pub pods: usize,
    /// Pods placed on new NodeClaims in the first solve.
    pub pods_scheduled: usize,
    /// Pods that could not be placed in the first solve.
    pub pods_unschedulable: usize,
    /// NodeClaims planned by the first solve.
    pub nodeclaims: usize,
    /// Timed solves.
    pub iterations: u32,
    /// Total solve time, seconds.
    pub seconds: f64,
    /// Pods per second over all solves.
    pub pods_per_sec: f64,
    /// CPU time the solving thread spent, seconds (Linux; absent elsewhere). On a busy machine
    /// this is the stable figure: wall time includes waiting for a core.
    pub cpu_seconds: Option<f64>,
    /// Pods per second of solving-thread CPU time.
    pub pods_per_cpu_sec: Option<f64>,
    /// Pods per NodeClaim in the first solve.
    pub pods_per_nodeclaim: PodsPerNodeClaim,
    /// What ran.
    pub workload: String,
    /// Respect or Ignore.
    pub preferences: String,
}

/// Pods per NodeClaim.
#[derive(Debug, serde::Serialize)]
pub struct PodsPerNodeClaim {
    /// Fewest.
    pub min: usize,
    /// Mean.
    pub mean: f64,
    /// Most.
    pub max: usize,
}

fn workload(args: &SchedulingArgs) -> anyhow::Result<(Vec<Pod>, String)> {
    if let Some(path) = &args.pods_file {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let pods = read_pods_tsv(&text).with_context(|| format!("{}", path.display()))?;
        return Ok((pods, format!("file {}", path.display())));
    }
    let Some(n) = args.pods else {
        bail!("give --pods N or --pods-file FILE")
    };
    let mut rng = Rng::new(args.seed);
    Ok(match args.workload {
        Workload::Diverse => (
            diverse_pods(n, &mut rng),
            format!("diverse pods, seed {}", args.seed),
        ),
        Workload::Preference => (
            preference_pods(n, &mut rng),
            format!("preference pods, seed {}", args.seed),
        ),
    })
}

/// Runs the benchmark.
pub fn scheduling(args: &SchedulingArgs) -> anyhow::Result<Report> {
    let (pods, workload) = workload(args)?;
    let instance_types =
        fake_instance_types(args.instance_types).context("building the fake instance types")?;
    let policy = match args.preferences {
        Preferences::Respect => PreferencePolicy::Respect,
        Preferences::Ignore => PreferencePolicy::Ignore,
    };
    let pools = [benchmark_node_pool(instance_types)];
    let cluster = Cluster::default();
    let mut elapsed = Duration::ZERO;
    let mut cpu = Some(Duration::ZERO);
    let mut first = None;
    for _ in 0..args.iterations {
        let scheduler = Scheduler::new(&pools, &cluster, &pods, options(policy));
        let cpu_start = thread_cpu_time();
        let start = Instant::now();
        let results = scheduler.solve(&pods);
        elapsed += start.elapsed();
        cpu = match (cpu, cpu_start, thread_cpu_time()) {
            (Some(total), Some(a), Some(b)) => Some(total + b.saturating_sub(a)),
            _ => None,
        };
        first.get_or_insert(results);
    }
    let Some(results) = first else {
        bail!("no iteration ran")
    };
    let sizes: Vec<usize> = results
        .new_node_claims
        .iter()
        .map(|nc| nc.pods.len())
        .collect();
    let seconds = elapsed.as_secs_f64();
    let total = pods.len() as f64 * f64::from(args.iterations);
    let cpu_seconds = cpu.map(|d| d.as_secs_f64());
    Ok(Report {
        cpu_seconds,
        pods_per_cpu_sec: cpu_seconds.filter(|s| *s > 0.0).map(|s| total / s),
        pods: pods.len(),
        pods_scheduled: results.pods_on_new_node_claims(),
        pods_unschedulable: results.errors.len(),
        nodeclaims: sizes.len(),
        iterations: args.iterations,
        seconds,
        pods_per_sec: if seconds > 0.0 {
            total / seconds
        } else {
            f64::INFINITY
        },
        pods_per_nodeclaim: PodsPerNodeClaim {
            min: sizes.iter().copied().min().unwrap_or(0),
            mean: if sizes.is_empty() {
                0.0
            } else {
                sizes.iter().sum::<usize>() as f64 / sizes.len() as f64
            },
            max: sizes.iter().copied().max().unwrap_or(0),
        },
        workload,
        preferences: format!("{:?}", args.preferences).to_lowercase(),
    })
}

/// CPU time of the calling thread, from `/proc/thread-self/schedstat` (nanoseconds on CPU).
fn thread_cpu_time() -> Option<Duration> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let nanos: u64 = text.split_whitespace().next()?.parse().ok()?;
    Some(Duration::from_nanos(nanos))
}

/// Renders a report.
pub fn render(report: &Report, output: Output) -> anyhow::Result<String> {
    Ok(match output {
        Output::Json => serde_json::to_string_pretty(report)?,
        Output::Text => format!(
            "workload: {} ({} pods, preferences {})\n\
             pods/s: {:.0} ({} solves in {:.3}s{})\n\
             nodeclaims: {} for {} pods ({} unschedulable)\n\
             pods per nodeclaim: min {} / mean {:.2} / max {}",
            report.workload,
            report.pods,
            report.preferences,
            report.pods_per_sec,
            report.iterations,
            report.seconds,
            match (report.cpu_seconds, report.pods_per_cpu_sec) {
                (Some(cpu), Some(rate)) =>
                    format!("; {rate:.0} pods per CPU-second, {cpu:.3}s CPU"),
                _ => String::new(),
            },
            report.nodeclaims,
            report.pods_scheduled,
            report.pods_unschedulable,
            report.pods_per_nodeclaim.min,
            report.pods_per_nodeclaim.mean,
            report.pods_per_nodeclaim.max,
        ),
    })
}
