//! `karpenter-capi bench scheduling`: Karpenter's scheduling benchmark (spec §8).
//!
//! Responsibility: build the benchmark's workload (diverse pods from our seeded generator, the
//! recorded seed-42 table via `--pods-file`, or the preference pods), schedule it `--iterations`
//! times on a freshly built scheduler, time only the solves, and report pods/s, solving CPU time,
//! NodeClaims, pods per NodeClaim, every unschedulable pod's reason (grouped) and the peak
//! resident set, as text or JSON; with `--sizes`, one report per size from one process (the
//! peak is reset between sizes). `--overlays N` solves on a catalogue with N NodeOverlays
//! applied ([`crate::bench_overlays`]) and reports what evaluating and applying them cost;
//! `--buffers N` adds N CapacityBuffer virtual pods to every solve ([`crate::bench_buffers`]),
//! while pods/s still counts the workload's pods only, so the two runs compare.
//! Inputs: flags. Outputs: [`Report`]s.

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
        conflicts_with_all = ["pods_file", "sizes"],
        required_unless_present_any = ["pods_file", "sizes"]
    )]
    pub pods: Option<usize>,
    /// Generate and schedule each of these sizes in turn, one report each (comma-separated,
    /// e.g. `1000,5000,20000,50000,150000`; JSON output is then an array).
    #[arg(long, value_delimiter = ',', conflicts_with = "pods_file", num_args = 1..)]
    pub sizes: Vec<usize>,
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
    /// NodeOverlays to evaluate and apply to the catalogue before solving (each a price
    /// adjustment on one offering; the first per instance type also adds an extended resource).
    #[arg(long, default_value_t = 0)]
    pub overlays: usize,
    /// CapacityBuffers (one chunk each, shaped like the workload's pods in turn) whose
    /// virtual pods every solve places after the workload's.
    #[arg(long, default_value_t = 0)]
    pub buffers: usize,
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
    /// Why the unschedulable pods of the first solve could not be placed: each distinct reason
    /// with how many pods gave it, most frequent first.
    pub unschedulable_reasons: Vec<ReasonCount>,
    /// The benchmark NodePool's limits. Each new NodeClaim counts its largest possible instance
    /// type against them (as upstream), so a batch large enough exhausts them.
    pub nodepool_limits: String,
    /// Peak resident set of the process while this size was generated, built and solved, MiB
    /// (Linux; absent elsewhere).
    pub peak_rss_mib: Option<f64>,
    /// What ran.
    pub workload: String,
    /// Respect or Ignore.
    pub preferences: String,
    /// With `--overlays`: what evaluating and applying them cost.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overlays: Option<crate::bench_overlays::OverlayFigures>,
    /// With `--buffers`: where their virtual pods went.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub buffers: Option<crate::bench_buffers::BufferFigures>,
}

/// One reason pods were unschedulable.
#[derive(Debug, serde::Serialize, PartialEq, Eq)]
pub struct ReasonCount {
    /// The scheduler's message (as `plan` and the FailedScheduling Event show it).
    pub reason: String,
    /// Pods that got it.
    pub pods: usize,
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

fn workload(args: &SchedulingArgs, size: Option<usize>) -> anyhow::Result<(Vec<Pod>, String)> {
    if let Some(path) = &args.pods_file {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let pods = read_pods_tsv(&text).with_context(|| format!("{}", path.display()))?;
        return Ok((pods, format!("file {}", path.display())));
    }
    let Some(n) = size.or(args.pods) else {
        bail!("give --pods N, --sizes N,… or --pods-file FILE")
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

/// Runs the benchmark: once, or once per `--sizes` entry.
pub fn scheduling(args: &SchedulingArgs) -> anyhow::Result<Vec<Report>> {
    if args.sizes.is_empty() {
        return Ok(vec![one(args, None)?]);
    }
    args.sizes.iter().map(|&n| one(args, Some(n))).collect()
}

/// One size: generate (or read) the pods, solve `--iterations` times, report.
fn one(args: &SchedulingArgs, size: Option<usize>) -> anyhow::Result<Report> {
    let rss_reset = karpenter_capi::process::reset_peak_rss();
    let (real, workload) = workload(args, size)?;
    let real_pods = real.len();
    let pods = crate::bench_buffers::with_buffers(real, args.buffers);
    let instance_types =
        fake_instance_types(args.instance_types).context("building the fake instance types")?;
    let (instance_types, overlays) = if args.overlays > 0 {
        let (its, figures) =
            crate::bench_overlays::overlaid(instance_types, args.overlays, "benchmark")?;
        (its, Some(figures))
    } else {
        (instance_types, None)
    };
    let policy = match args.preferences {
        Preferences::Respect => PreferencePolicy::Respect,
        Preferences::Ignore => PreferencePolicy::Ignore,
    };
    let pools = [benchmark_node_pool(instance_types)];
    let nodepool_limits = pools
        .first()
        .and_then(|p| p.limits.as_ref())
        .map(|l| {
            l.iter()
                .map(|(name, q)| format!("{}: {q}", name.as_str()))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_else(|| "none".to_owned());
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
    let peak_rss_mib = if rss_reset {
        karpenter_capi::process::peak_rss_mib()
    } else {
        None
    };
    let Some(results) = first else {
        bail!("no iteration ran")
    };
    let sizes: Vec<usize> = results
        .new_node_claims
        .iter()
        .map(|nc| nc.pods.len())
        .collect();
    let seconds = elapsed.as_secs_f64();
    let total = real_pods as f64 * f64::from(args.iterations);
    let virtual_uids = crate::bench_buffers::virtual_uids(&pods);
    let buffers = (args.buffers > 0)
        .then(|| crate::bench_buffers::figures(&virtual_uids, args.buffers, &results));
    let real_uid = |uid: &std::sync::Arc<str>| !virtual_uids.contains(uid);
    let (pods_scheduled, pods_unschedulable) =
        crate::bench_buffers::placed(&results, |u| real_uid(u));
    let cpu_seconds = cpu.map(|d| d.as_secs_f64());
    Ok(Report {
        cpu_seconds,
        pods_per_cpu_sec: cpu_seconds.filter(|s| *s > 0.0).map(|s| total / s),
        pods: real_pods,
        pods_scheduled,
        pods_unschedulable,
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
        unschedulable_reasons: reasons(
            results
                .errors
                .iter()
                .filter(|e| real_uid(&e.uid))
                .map(|e| e.message.as_str()),
        ),
        nodepool_limits,
        peak_rss_mib,
        workload,
        preferences: format!("{:?}", args.preferences).to_lowercase(),
        overlays,
        buffers,
    })
}

/// Distinct reasons with their pod counts, most frequent first (ties by reason).
fn reasons<'a>(messages: impl Iterator<Item = &'a str>) -> Vec<ReasonCount> {
    let mut counts: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for message in messages {
        *counts.entry(message).or_default() += 1;
    }
    let mut out: Vec<ReasonCount> = counts
        .into_iter()
        .map(|(reason, pods)| ReasonCount {
            reason: reason.to_owned(),
            pods,
        })
        .collect();
    out.sort_by(|a, b| b.pods.cmp(&a.pods).then_with(|| a.reason.cmp(&b.reason)));
    out
}

/// CPU time of the calling thread, from `/proc/thread-self/schedstat` (nanoseconds on CPU).
fn thread_cpu_time() -> Option<Duration> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let nanos: u64 = text.split_whitespace().next()?.parse().ok()?;
    Some(Duration::from_nanos(nanos))
}

/// How many distinct reasons the text output lists per report.
const REASONS_SHOWN: usize = 5;

/// Renders the reports: one in full, several as a table with each size's reasons below.
pub fn render(reports: &[Report], output: Output) -> anyhow::Result<String> {
    match (output, reports) {
        (Output::Json, [one]) => Ok(serde_json::to_string_pretty(one)?),
        (Output::Json, all) => Ok(serde_json::to_string_pretty(all)?),
        (Output::Text, [one]) => Ok(render_one(one)),
        (Output::Text, all) => Ok(render_table(all)),
    }
}

fn render_one(report: &Report) -> String {
    let mut text = format!(
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
            (Some(cpu), Some(rate)) => format!("; {rate:.0} pods per CPU-second, {cpu:.3}s CPU"),
            _ => String::new(),
        },
        report.nodeclaims,
        report.pods_scheduled,
        report.pods_unschedulable,
        report.pods_per_nodeclaim.min,
        report.pods_per_nodeclaim.mean,
        report.pods_per_nodeclaim.max,
    );
    if let Some(rss) = report.peak_rss_mib {
        text.push_str(&format!("\npeak RSS: {rss:.0} MiB"));
    }
    if let Some(o) = &report.overlays {
        text.push_str(&format!(
            "\noverlays: {} ({} applied, {} instance types changed); evaluated in {:.3}s, \
             applied in {:.3}s",
            o.overlays, o.applied, o.instance_types_changed, o.evaluation_seconds, o.apply_seconds
        ));
    }
    if let Some(b) = &report.buffers {
        text.push_str(&format!(
            "\nbuffers: {} virtual pods after the workload's; {} on new NodeClaims, {} unschedulable",
            b.buffers, b.on_new_node_claims, b.unschedulable
        ));
    }
    text.push_str(&reasons_text(report));
    text
}

fn render_table(reports: &[Report]) -> String {
    let or_dash = |v: Option<f64>, precision: usize| {
        v.map_or_else(|| "-".to_owned(), |v| format!("{v:.precision$}"))
    };
    let mut rows: Vec<[String; 8]> = vec![
        [
            "PODS",
            "PODS/S",
            "SECONDS",
            "CPU-S",
            "PODS/CPU-S",
            "NODECLAIMS",
            "UNSCHEDULABLE",
            "PEAK-RSS-MIB",
        ]
        .map(str::to_owned),
    ];
    for r in reports {
        rows.push([
            r.pods.to_string(),
            format!("{:.0}", r.pods_per_sec),
            format!("{:.3}", r.seconds),
            or_dash(r.cpu_seconds, 3),
            or_dash(r.pods_per_cpu_sec, 0),
            r.nodeclaims.to_string(),
            r.pods_unschedulable.to_string(),
            or_dash(r.peak_rss_mib, 0),
        ]);
    }
    let mut widths = [0usize; 8];
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut text = String::new();
    if let Some(first) = reports.first() {
        text.push_str(&format!(
            "workload: {} (preferences {}, {} solves per size)\n",
            first.workload, first.preferences, first.iterations
        ));
    }
    for row in &rows {
        let cells: Vec<String> = row
            .iter()
            .zip(widths)
            .map(|(cell, w)| format!("{cell:>w$}"))
            .collect();
        text.push_str(&cells.join("  "));
        text.push('\n');
    }
    for r in reports.iter().filter(|r| r.pods_unschedulable > 0) {
        text.push_str(&format!("\n{} pods:{}\n", r.pods, reasons_text(r)));
    }
    text.trim_end().to_owned()
}

/// The unschedulable pods' reasons, most frequent first, and the NodePool's limits when a reason
/// is about them.
fn reasons_text(report: &Report) -> String {
    let mut text = String::new();
    for reason in report.unschedulable_reasons.iter().take(REASONS_SHOWN) {
        text.push_str(&format!(
            "\n  {} unschedulable: {}",
            reason.pods, reason.reason
        ));
    }
    let more = report
        .unschedulable_reasons
        .len()
        .saturating_sub(REASONS_SHOWN);
    if more > 0 {
        text.push_str(&format!(
            "\n  … and {more} other reasons (--output json lists them all)"
        ));
    }
    if report
        .unschedulable_reasons
        .iter()
        .any(|r| r.reason.contains("limits"))
    {
        text.push_str(&format!(
            "\n  (the benchmark NodePool's limits are {}; each new NodeClaim counts its largest \
             possible instance type against them, as upstream does)",
            report.nodepool_limits
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_grouped_most_frequent_first() {
        let got = reasons(["b", "a", "b", "c", "a", "b"].into_iter());
        let want = [("b", 3), ("a", 2), ("c", 1)].map(|(reason, pods)| ReasonCount {
            reason: reason.to_owned(),
            pods,
        });
        assert_eq!(got, want);
        assert!(reasons(std::iter::empty()).is_empty());
    }
}
