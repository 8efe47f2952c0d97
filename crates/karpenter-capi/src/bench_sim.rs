//! `karpenter-capi bench sim`: the `sim` API server at scale (issue: 10,000 pods, 1,000 nodes,
//! 100 concurrent watchers), or the same load on a real kube-apiserver (`--backend real`), so
//! the two can be read side by side.
//!
//! Responsibility: serve a `sim` on 127.0.0.1 (or start etcd + kube-apiserver through
//! [`sim::realk8s`]), start `--watchers` pod watchers (kube-runtime
//! watchers over HTTP, as controllers use them), create `--nodes` Nodes and `--pods` Pods with
//! `--concurrency` requests in flight, and measure create throughput, how long until every
//! watcher has seen every pod, a full LIST of the pods, and the process's peak RSS.
//! Inputs: flags. Outputs: a [`Report`] (text or JSON).

use karpenter_capi::process::peak_rss_mib;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams, PostParams};
use kube::runtime::watcher;

use crate::bench::Output;

/// Flags of `bench sim`.
#[derive(Debug, Args)]
pub struct SimBenchArgs {
    /// Pods to create.
    #[arg(long, default_value_t = 10_000)]
    pub pods: usize,
    /// Nodes to create.
    #[arg(long, default_value_t = 1_000)]
    pub nodes: usize,
    /// Concurrent pod watchers.
    #[arg(long, default_value_t = 100)]
    pub watchers: usize,
    /// Requests in flight while creating.
    #[arg(long, default_value_t = 32)]
    pub concurrency: usize,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = Output::Text)]
    pub output: Output,
    /// The API server: `sim` in this process, or a real kube-apiserver (with etcd).
    #[arg(long, value_enum, default_value_t = crate::bench_e2e::BenchBackend::Sim)]
    pub backend: crate::bench_e2e::BenchBackend,
}

/// What `bench sim` measured.
#[derive(Debug, serde::Serialize)]
pub struct Report {
    /// The API server.
    pub backend: crate::bench_e2e::BenchBackend,
    /// Nodes created.
    pub nodes: usize,
    /// Pods created.
    pub pods: usize,
    /// Watchers.
    pub watchers: usize,
    /// Seconds to create the nodes.
    pub nodes_seconds: f64,
    /// Seconds to create the pods.
    pub pods_seconds: f64,
    /// Creates per second over nodes and pods.
    pub creates_per_sec: f64,
    /// Seconds from the first pod create until every watcher had seen every pod.
    pub watch_fanout_seconds: f64,
    /// Watch events delivered per second over that span (pods × watchers / seconds).
    pub watch_events_per_sec: f64,
    /// Seconds for one LIST of all pods.
    pub list_seconds: f64,
    /// Peak resident memory of this process (with `sim`: server, clients and watchers; with a
    /// real server: clients and watchers), MiB.
    pub peak_rss_mib: Option<f64>,
    /// With a real server: peak resident memory of kube-apiserver plus etcd, MiB.
    pub server_peak_rss_mib: Option<f64>,
}

fn node(i: usize) -> anyhow::Result<Node> {
    Ok(serde_json::from_value(serde_json::json!({
        "metadata": {"name": format!("node-{i:05}"), "labels": {"kubernetes.io/hostname": format!("node-{i:05}")}},
        "status": {"capacity": {"cpu": "16", "memory": "64Gi", "pods": "110"},
                   "allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"}}
    }))?)
}

fn pod(i: usize) -> anyhow::Result<Pod> {
    Ok(serde_json::from_value(serde_json::json!({
        "metadata": {"name": format!("pod-{i:05}"), "namespace": "default", "labels": {"app": format!("app-{}", i % 50)}},
        "spec": {"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]}
    }))?)
}

/// Runs the benchmark.
pub fn run(args: &SimBenchArgs) -> anyhow::Result<Report> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(measure(args))
}

async fn measure(args: &SimBenchArgs) -> anyhow::Result<Report> {
    let (server, real, client) = match args.backend {
        crate::bench_e2e::BenchBackend::Sim => {
            let server = sim::serve(std::net::SocketAddr::from(([127, 0, 0, 1], 0))).await?;
            let url: http::Uri = server.url().parse().context("server URL")?;
            let client = kube::Client::try_from(kube::Config::new(url)).context("client")?;
            (Some(server), None, client)
        }
        crate::bench_e2e::BenchBackend::Real => {
            let cluster = sim::realk8s::RealCluster::start(sim::realk8s::RealConfig::default())
                .await
                .context("cannot start the real API server")?;
            let client = cluster.client().await?;
            (None, Some(cluster), client)
        }
    };
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let nodes: Api<Node> = Api::all(client.clone());

    let seen = Arc::new(AtomicUsize::new(0));
    let mut watchers = Vec::with_capacity(args.watchers);
    for _ in 0..args.watchers {
        let seen = seen.clone();
        let api = pods.clone();
        watchers.push(tokio::spawn(async move {
            let mut stream = watcher(api, watcher::Config::default()).boxed();
            while let Ok(Some(event)) = stream.try_next().await {
                if let watcher::Event::Apply(_) | watcher::Event::InitApply(_) = event {
                    seen.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }

    let start = Instant::now();
    stream::iter(0..args.nodes)
        .map(|i| {
            let nodes = nodes.clone();
            async move {
                nodes
                    .create(&PostParams::default(), &node(i)?)
                    .await
                    .context("create node")
            }
        })
        .buffer_unordered(args.concurrency)
        .try_collect::<Vec<_>>()
        .await?;
    let nodes_seconds = start.elapsed().as_secs_f64();

    let start = Instant::now();
    stream::iter(0..args.pods)
        .map(|i| {
            let pods = pods.clone();
            async move {
                pods.create(&PostParams::default(), &pod(i)?)
                    .await
                    .context("create pod")
            }
        })
        .buffer_unordered(args.concurrency)
        .try_collect::<Vec<_>>()
        .await?;
    let pods_seconds = start.elapsed().as_secs_f64();

    let expected = args.pods * args.watchers;
    let deadline = Instant::now() + Duration::from_secs(600);
    while seen.load(Ordering::Relaxed) < expected {
        if Instant::now() > deadline {
            bail!(
                "watchers saw {} of {expected} events",
                seen.load(Ordering::Relaxed)
            );
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let watch_fanout_seconds = start.elapsed().as_secs_f64();

    let list_start = Instant::now();
    let listed = pods.list(&ListParams::default()).await?.items.len();
    let list_seconds = list_start.elapsed().as_secs_f64();
    if listed != args.pods {
        bail!("listed {listed} pods, created {}", args.pods);
    }
    for w in &watchers {
        w.abort();
    }
    if let Some(server) = server {
        let _ = server.shutdown().await;
    }
    let server_peak_rss_mib = real.as_ref().and_then(|c| {
        c.pids()
            .iter()
            .map(|pid| karpenter_capi::process::peak_rss_mib_of(&pid.to_string()))
            .sum::<Option<f64>>()
    });
    drop(real);
    Ok(Report {
        backend: args.backend,
        server_peak_rss_mib,
        nodes: args.nodes,
        pods: args.pods,
        watchers: args.watchers,
        nodes_seconds,
        pods_seconds,
        creates_per_sec: (args.nodes + args.pods) as f64
            / (nodes_seconds + pods_seconds).max(f64::MIN_POSITIVE),
        watch_fanout_seconds,
        watch_events_per_sec: expected as f64 / watch_fanout_seconds.max(f64::MIN_POSITIVE),
        list_seconds,
        peak_rss_mib: peak_rss_mib(),
    })
}

/// Renders a report.
pub fn render(report: &Report, output: Output) -> anyhow::Result<String> {
    Ok(match output {
        Output::Json => serde_json::to_string_pretty(report)?,
        Output::Text => format!(
            "created {} nodes in {:.2}s and {} pods in {:.2}s ({:.0} creates/s)\n\
             {} watchers saw every pod {:.2}s after the first create ({:.0} events/s)\n\
             LIST of {} pods: {:.3}s; peak RSS {}{}",
            report.nodes,
            report.nodes_seconds,
            report.pods,
            report.pods_seconds,
            report.creates_per_sec,
            report.watchers,
            report.watch_fanout_seconds,
            report.watch_events_per_sec,
            report.pods,
            report.list_seconds,
            report
                .peak_rss_mib
                .map_or("n/a".into(), |m| format!("{m:.0} MiB")),
            report
                .server_peak_rss_mib
                .map_or(String::new(), |m| format!(
                    "; kube-apiserver + etcd peak RSS {m:.0} MiB"
                )),
        ),
    })
}
