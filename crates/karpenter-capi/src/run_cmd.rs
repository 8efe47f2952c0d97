//! `karpenter-capi run`: the controller against real clusters.
//!
//! Responsibility: flags with environment fallbacks named as upstream (core: `BATCH_*`,
//! `PREFERENCE_POLICY`, `MIN_VALUES_POLICY`, `LOG_LEVEL`, `METRICS_PORT`, `HEALTH_PROBE_PORT`,
//! `DISABLE_LEADER_ELECTION`, `LEADER_ELECTION_*`, `KUBE_CLIENT_QPS`, `KUBE_CLIENT_BURST`;
//! provider: `CLUSTER_API_KUBECONFIG`,
//! `CLUSTER_API_URL`, `CLUSTER_API_TOKEN`, `CLUSTER_API_CERTIFICATE_AUTHORITY_DATA`,
//! `CLUSTER_API_TOKEN_FILE`, `CLUSTER_API_SKIP_TLS_VERIFY`), logging (plain or JSON), clients for the workload cluster
//! (`--kubeconfig`/`KUBECONFIG`, else in-cluster) and the management cluster (its kubeconfig, else
//! URL + token + CA, else the workload credentials; see [`karpenter_capi::connect`]: each is
//! checked once with `/version`, failures name the source), the health/metrics servers
//! ([`Probes`]: `/healthz` fails when a long-running task stopped, `/readyz` waits for the
//! caches and the CRDs), leader election on a Lease, then the [`Operator`] until
//! Ctrl-C/SIGTERM or lost leadership.
//! Inputs: [`RunArgs`]. Outputs: a running controller; logs.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use api::CapiVersion;
use clap::{Args, ValueEnum};
use clusterapi::Scope;
use clusterapi::discovery::CapiSelection;
use controllers::leader::{LeaderElector, LeaseConfig};
use controllers::provisioning::batcher::BatchConfig;
use karpenter_capi::connect::{Impersonate, Source, UrlCredentials, connect_as};
use karpenter_capi::operator::{Caches, Operator, OperatorConfig};
use karpenter_capi::probes::{CrdCheckConfig, Probes};
use karpenter_capi::rate_limit::RateLimit;
use scheduling::instance_type::MinValuesPolicy;
use scheduling::scheduler::PreferencePolicy;

/// A duration flag in Go's syntax, as upstream's (`500ms`, `10s`, `1m30s`, `1.5h`).
pub fn duration(text: &str) -> Result<Duration, String> {
    api::go_duration::parse(text).map_err(|e| e.to_string())
}

/// Log format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Plain,
    /// One JSON object per line.
    Json,
}

/// `PREFERENCE_POLICY`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PreferencePolicyArg {
    /// Respect preferred affinities and ScheduleAnyway spreads.
    #[value(name = "Respect")]
    Respect,
    /// Ignore them.
    #[value(name = "Ignore")]
    Ignore,
}

/// `MIN_VALUES_POLICY`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum MinValuesPolicyArg {
    /// A violated minValues blocks the NodeClaim.
    #[value(name = "Strict")]
    Strict,
    /// Lower minValues to what is available.
    #[value(name = "BestEffort")]
    BestEffort,
}

/// How to reach the workload and the management cluster, and which MachineDeployments are
/// ours to use: shared by `run` and `doctor`.
#[derive(Debug, Args)]
pub struct ClusterArgs {
    /// Kubeconfig of the workload cluster (default: in-cluster, else ~/.kube/config).
    #[arg(long, env = "KUBECONFIG", value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig of the management cluster (Cluster API objects); wins over the URL flags.
    #[arg(long, env = "CLUSTER_API_KUBECONFIG", value_name = "FILE")]
    pub cluster_api_kubeconfig: Option<PathBuf>,
    /// Management API server URL (when no management kubeconfig is given).
    #[arg(long, env = "CLUSTER_API_URL", value_name = "URL")]
    pub cluster_api_url: Option<String>,
    /// Bearer token for the management URL (visible in `ps`: prefer --cluster-api-token-file).
    #[arg(
        long,
        env = "CLUSTER_API_TOKEN",
        value_name = "TOKEN",
        hide_env_values = true
    )]
    pub cluster_api_token: Option<String>,
    /// File holding the bearer token for the management URL (re-read when it rotates).
    #[arg(long, env = "CLUSTER_API_TOKEN_FILE", value_name = "FILE")]
    pub cluster_api_token_file: Option<PathBuf>,
    /// PEM CA bundle (the text itself) for the management URL.
    #[arg(
        long,
        env = "CLUSTER_API_CERTIFICATE_AUTHORITY_DATA",
        value_name = "PEM"
    )]
    pub cluster_api_certificate_authority_data: Option<String>,
    /// Do not verify the management server's certificate (URL mode).
    #[arg(long, env = "CLUSTER_API_SKIP_TLS_VERIFY")]
    pub cluster_api_skip_tls_verify: bool,
    /// Only MachineDeployments of this Cluster (`cluster.x-k8s.io/cluster-name`).
    #[arg(long, env = "CLUSTER_NAME", value_name = "NAME")]
    pub cluster_name: Option<String>,
    /// Only MachineDeployments in this namespace of the management cluster (the Cluster API
    /// watches are namespaced then: a Role in it suffices).
    #[arg(long, env = "CLUSTER_API_NAMESPACE", value_name = "NAMESPACE")]
    pub cluster_api_namespace: Option<String>,
    /// API group of the Cluster API kinds (default `cluster.x-k8s.io`).
    #[arg(long, env = "CAPI_GROUP", value_name = "GROUP")]
    pub capi_group: Option<String>,
    /// Cluster API version to speak, `v1beta2` or `v1beta1` (default: the version the
    /// management cluster prefers, from discovery).
    #[arg(long, env = "CAPI_VERSION", value_name = "VERSION")]
    pub capi_version: Option<String>,
}

/// The leader-election Lease: shared by `run` and `doctor` (which checks its permissions).
#[derive(Debug, Args)]
pub struct LeaderElectionArgs {
    /// Run without a Lease (only one replica may run then).
    #[arg(long, env = "DISABLE_LEADER_ELECTION")]
    pub disable_leader_election: bool,
    /// The Lease's name.
    #[arg(
        long,
        env = "LEADER_ELECTION_NAME",
        default_value = "karpenter-leader-election"
    )]
    pub leader_election_name: String,
    /// The Lease's namespace (default: the pod's namespace, else `kube-system`).
    #[arg(long, env = "LEADER_ELECTION_NAMESPACE")]
    pub leader_election_namespace: Option<String>,
}

impl LeaderElectionArgs {
    /// The Lease (namespace, name), or `None` when leader election is off. The namespace
    /// defaults to the pod's (its service account's), else `kube-system`.
    #[must_use]
    pub fn lease(&self) -> Option<(String, String)> {
        if self.disable_leader_election {
            return None;
        }
        let namespace = self
            .leader_election_namespace
            .clone()
            .or_else(|| {
                std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
                    .ok()
            })
            .unwrap_or_else(|| "kube-system".into());
        Some((
            namespace.trim().to_owned(),
            self.leader_election_name.clone(),
        ))
    }
}

/// Flags of `run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub clusters: ClusterArgs,
    /// Idle gap that closes a batching window.
    #[arg(long, env = "BATCH_IDLE_DURATION", default_value = "1s", value_parser = duration)]
    pub batch_idle_duration: Duration,
    /// Longest batching window.
    #[arg(long, env = "BATCH_MAX_DURATION", default_value = "10s", value_parser = duration)]
    pub batch_max_duration: Duration,
    /// Preferred affinities and ScheduleAnyway spreads.
    #[arg(long, env = "PREFERENCE_POLICY", value_enum, default_value = "Respect")]
    pub preference_policy: PreferencePolicyArg,
    /// What an unmet minValues does.
    #[arg(long, env = "MIN_VALUES_POLICY", value_enum, default_value = "Strict")]
    pub min_values_policy: MinValuesPolicyArg,
    /// Log level (`debug`, `info`, `error`, or a tracing filter such as `controllers=debug`).
    #[arg(long, env = "LOG_LEVEL", default_value = "info")]
    pub log_level: String,
    /// Log format.
    #[arg(long, env = "LOG_FORMAT", value_enum, default_value_t = LogFormat::Json)]
    pub log_format: LogFormat,
    /// Port of `/metrics`.
    #[arg(long, env = "METRICS_PORT", default_value_t = 8080)]
    pub metrics_port: u16,
    /// Port of `/healthz` and `/readyz`.
    #[arg(long, env = "HEALTH_PROBE_PORT", default_value_t = 8081)]
    pub health_probe_port: u16,
    #[command(flatten)]
    pub leader_election: LeaderElectionArgs,
    #[command(flatten)]
    pub timeouts: TimeoutArgs,
    /// Upstream's feature gates, e.g. `StaticCapacity=true` (static NodePools),
    /// `SpotToSpotConsolidation=true`, `NodeOverlay=true` (NodeOverlays), `NodeRepair=true`
    /// (node repair); `ReservedCapacity` is accepted and changes nothing; unknown names, and
    /// `CapacityBuffer` set to true, are refused.
    #[arg(long, env = "FEATURE_GATES", default_value = "", value_name = "LIST")]
    pub feature_gates: karpenter_capi::feature_gates::FeatureGates,
    /// With `NodeRepair=true`: the Node conditions that make a node unhealthy, each with how
    /// long it may hold (`Type=Status:duration`, comma separated).
    #[arg(long, env = "NODE_REPAIR_POLICIES", value_name = "LIST",
        default_value = cloudprovider::repair::DEFAULT_CONDITIONS)]
    pub node_repair_policies: cloudprovider::repair::Conditions,
    /// With `NodeRepair=true`: how long a registered NodeClaim may be without its Node while
    /// its Machine lives on before it is repaired (`0s`: never).
    #[arg(long, env = "NODE_REPAIR_NODE_DELETED_TOLERATION", default_value = "5m",
        value_parser = duration)]
    pub node_repair_node_deleted_toleration: Duration,
    /// Sustained requests per second of each Kubernetes client (workload and management,
    /// each its own token bucket).
    #[arg(long, env = "KUBE_CLIENT_QPS", default_value_t = 200,
        value_parser = clap::value_parser!(u32).range(1..))]
    pub kube_client_qps: u32,
    /// Requests each Kubernetes client may make at once above the sustained rate.
    #[arg(long, env = "KUBE_CLIENT_BURST", default_value_t = 300,
        value_parser = clap::value_parser!(u32).range(1..))]
    pub kube_client_burst: u32,
}

/// How long launches, registrations, claims, removals and replacements may take: the defaults
/// suit cloud providers; bare-metal Cluster API providers boot for longer.
#[derive(Debug, Clone, Args)]
pub struct TimeoutArgs {
    /// A NodeClaim not Launched this long (since its condition last changed) is deleted and
    /// its pods provisioned again (upstream's 5 min). At least `--machine-claim-timeout`.
    #[arg(long, env = "LAUNCH_TIMEOUT", default_value = "5m", value_parser = duration)]
    pub launch_timeout: Duration,
    /// A launched NodeClaim whose Node has not registered this long is deleted (upstream's
    /// 15 min): the time a Machine may take to boot and join.
    #[arg(long, env = "REGISTRATION_TIMEOUT", default_value = "15m", value_parser = duration)]
    pub registration_timeout: Duration,
    /// How long a launch waits for the MachineSet to create the Machine it claims; then the
    /// MachineDeployment's offering is unavailable for a while and the launch fails.
    #[arg(long, env = "MACHINE_CLAIM_TIMEOUT", default_value = "2m", value_parser = duration)]
    pub machine_claim_timeout: Duration,
    /// A Machine scaled down with `delete-machine` that Cluster API has not started deleting
    /// this long later (a rollout scaled another MachineSet) is deleted directly.
    #[arg(long, env = "MACHINE_REMOVAL_ESCALATION", default_value = "10m", value_parser = duration)]
    pub machine_removal_escalation: Duration,
    /// How long a disruption's replacements may take to initialize before the command is
    /// rolled back (its nodes untainted, the replacements deleted).
    #[arg(long, env = "REPLACEMENT_TIMEOUT", default_value = "10m", value_parser = duration)]
    pub replacement_timeout: Duration,
    /// How long a Machine made for a replica we raised may stay unclaimed before the collector
    /// removes it (or, once its Node joined, gives it a NodeClaim).
    #[arg(long, env = "UNCLAIMED_MACHINE_GRACE", default_value = "10m", value_parser = duration)]
    pub unclaimed_machine_grace: Duration,
}

impl TimeoutArgs {
    /// Refuses zero timeouts and a claim wait longer than the launch may take.
    ///
    /// # Errors
    /// Names the flag and its environment variable.
    pub fn validate(&self) -> anyhow::Result<()> {
        for (flag, env, value) in [
            ("--launch-timeout", "LAUNCH_TIMEOUT", self.launch_timeout),
            (
                "--registration-timeout",
                "REGISTRATION_TIMEOUT",
                self.registration_timeout,
            ),
            (
                "--machine-claim-timeout",
                "MACHINE_CLAIM_TIMEOUT",
                self.machine_claim_timeout,
            ),
            (
                "--machine-removal-escalation",
                "MACHINE_REMOVAL_ESCALATION",
                self.machine_removal_escalation,
            ),
            (
                "--replacement-timeout",
                "REPLACEMENT_TIMEOUT",
                self.replacement_timeout,
            ),
            (
                "--unclaimed-machine-grace",
                "UNCLAIMED_MACHINE_GRACE",
                self.unclaimed_machine_grace,
            ),
        ] {
            anyhow::ensure!(!value.is_zero(), "{flag} ({env}) must be longer than 0s");
        }
        anyhow::ensure!(
            self.machine_claim_timeout <= self.launch_timeout,
            "--machine-claim-timeout ({:?}) is longer than --launch-timeout ({:?}): the NodeClaim \
             would be deleted while its launch still waits for a Machine",
            self.machine_claim_timeout,
            self.launch_timeout
        );
        Ok(())
    }
}

impl RunArgs {
    /// The clients' rate limit.
    #[must_use]
    pub fn rate_limit(&self) -> RateLimit {
        RateLimit {
            qps: self.kube_client_qps,
            burst: self.kube_client_burst,
        }
    }
}

/// Sets up logging (`LOG_LEVEL`, plain or JSON) for `run`.
pub fn init_logging(level: &str, format: LogFormat) -> anyhow::Result<()> {
    let filter = log_filter(level)?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    let result = match format {
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
        LogFormat::Plain => builder.try_init(),
    };
    result.map_err(|e| anyhow::anyhow!("cannot set up logging: {e}"))
}

/// The levels `--log-level` (`LOG_LEVEL`) takes, as upstream's and `tracing`'s.
const LOG_LEVELS: [&str; 6] = ["error", "warn", "info", "debug", "trace", "off"];

/// The filter of `--log-level` (`LOG_LEVEL`): a level, or `tracing` directives
/// (`info,controllers=debug`) whose bare entries are levels. A word that is not a level
/// (`verbose`) would pass as a target name and silence everything else: it is refused.
///
/// # Errors
/// A bare entry that is not a level, or a directive `tracing` cannot read.
pub fn log_filter(level: &str) -> anyhow::Result<tracing_subscriber::EnvFilter> {
    let level = if level.trim().is_empty() {
        "info"
    } else {
        level
    };
    if let Some(bad) = level
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty() && !d.contains('=') && !d.contains('['))
        .find(|d| !LOG_LEVELS.contains(&d.to_ascii_lowercase().as_str()))
    {
        anyhow::bail!(
            "invalid --log-level (LOG_LEVEL) {level:?}: {bad:?} is not a level; use one of {} \
             or directives such as \"info,controllers=debug\"",
            LOG_LEVELS.join(", ")
        );
    }
    tracing_subscriber::EnvFilter::try_new(level)
        .with_context(|| format!("invalid --log-level (LOG_LEVEL) {level:?}"))
}

/// How long the caches may take to list before `run` gives up.
const LIST_TIMEOUT: Duration = Duration::from_secs(120);

/// How long the first `/version` check of each cluster may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// The workload cluster's client, checked with `GET /version`.
///
/// # Errors
/// The client cannot be built or the server does not answer (the message names the source).
pub async fn workload_client(
    args: &ClusterArgs,
    limit: Option<RateLimit>,
    impersonate: Option<&Impersonate>,
) -> anyhow::Result<kube::Client> {
    let source = args
        .kubeconfig
        .clone()
        .map_or(Source::Default, Source::Kubeconfig);
    connect_as(
        "workload",
        &source,
        None,
        CONNECT_TIMEOUT,
        limit,
        impersonate,
    )
    .await
}

/// The management cluster's client: its kubeconfig, else its URL flags, else `workload`
/// (Cluster API objects in the workload cluster).
///
/// # Errors
/// As [`workload_client`].
pub async fn management_client(
    args: &ClusterArgs,
    workload: &kube::Client,
    limit: Option<RateLimit>,
    impersonate: Option<&Impersonate>,
) -> anyhow::Result<kube::Client> {
    if let Some(path) = &args.cluster_api_kubeconfig {
        return connect_as(
            "management",
            &Source::Kubeconfig(path.clone()),
            None,
            CONNECT_TIMEOUT,
            limit,
            impersonate,
        )
        .await;
    }
    let Some(url) = &args.cluster_api_url else {
        return Ok(workload.clone());
    };
    let creds = UrlCredentials {
        url: url.clone(),
        token: args.cluster_api_token.clone(),
        token_file: args.cluster_api_token_file.clone(),
        certificate_authority_data: args.cluster_api_certificate_authority_data.clone(),
        skip_tls_verify: args.cluster_api_skip_tls_verify,
    };
    connect_as(
        "management",
        &Source::Url(url.clone()),
        Some(&creds),
        CONNECT_TIMEOUT,
        limit,
        impersonate,
    )
    .await
}

impl ClusterArgs {
    /// Whether the Cluster API objects live in another cluster than the workload's.
    #[must_use]
    pub fn separate_management(&self) -> bool {
        self.cluster_api_kubeconfig.is_some() || self.cluster_api_url.is_some()
    }

    /// The MachineDeployments in scope.
    #[must_use]
    pub fn scope(&self) -> Scope {
        Scope {
            namespace: self.cluster_api_namespace.clone(),
            cluster_name: self.cluster_name.clone(),
        }
    }

    /// The Cluster API group and version asked for (unset parts are discovered).
    #[must_use]
    pub fn capi_selection(&self) -> CapiSelection {
        CapiSelection {
            group: self.capi_group.clone(),
            version: self.capi_version.clone(),
        }
    }
}

/// Discover the Cluster API version, retrying (5 s doubling to 60 s) while the management
/// cluster cannot answer or does not serve Cluster API yet; each failure is logged and shown
/// by `/readyz`.
async fn discover_capi(
    management: &kube::Client,
    selection: &CapiSelection,
    probes: &Probes,
) -> CapiVersion {
    let mut wait = Duration::from_secs(5);
    loop {
        match clusterapi::discovery::discover(management, selection).await {
            Ok(v) => {
                tracing::info!(version = %v, "speaking Cluster API");
                return v;
            }
            Err(e) => {
                tracing::warn!(error = %e, retry_in = ?wait, "not ready: cannot choose a Cluster API version");
                probes.ready.set_crds(Err(e.to_string()));
            }
        }
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(Duration::from_secs(60));
    }
}

fn identity() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "karpenter".into());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("{host}_{:x}{nanos:x}", std::process::id())
}

/// Runs the controller until interrupted.
pub fn run(args: RunArgs) -> anyhow::Result<()> {
    init_logging(&args.log_level, args.log_format)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(run_async(args))
}

async fn run_async(args: RunArgs) -> anyhow::Result<()> {
    args.timeouts.validate()?;
    let workload = workload_client(&args.clusters, Some(args.rate_limit()), None).await?;
    let management =
        management_client(&args.clusters, &workload, Some(args.rate_limit()), None).await?;
    let mut config = OperatorConfig {
        provisioner: controllers::provisioning::provisioner::ProvisionerConfig {
            batch: BatchConfig {
                idle: args.batch_idle_duration,
                max: args.batch_max_duration,
            },
            preference_policy: match args.preference_policy {
                PreferencePolicyArg::Respect => PreferencePolicy::Respect,
                PreferencePolicyArg::Ignore => PreferencePolicy::Ignore,
            },
            min_values_policy: match args.min_values_policy {
                MinValuesPolicyArg::Strict => MinValuesPolicy::Strict,
                MinValuesPolicyArg::BestEffort => MinValuesPolicy::BestEffort,
            },
            ..Default::default()
        },
        provider: clusterapi::provider::ProviderConfig {
            scope: args.clusters.scope(),
            claim_timeout: args.timeouts.machine_claim_timeout,
            removal_escalation: args.timeouts.machine_removal_escalation,
            repair: cloudprovider::RepairPolicies {
                conditions: args.node_repair_policies.0.clone(),
                node_deleted: Some(args.node_repair_node_deleted_toleration)
                    .filter(|d| !d.is_zero()),
            },
            ..Default::default()
        },
        lifecycle: controllers::nodeclaim::LifecycleConfig {
            launch_timeout: args.timeouts.launch_timeout,
            registration_timeout: args.timeouts.registration_timeout,
            ..Default::default()
        },
        disruption: controllers::disruption::DisruptionConfig {
            replacement_timeout: args.timeouts.replacement_timeout,
            ..Default::default()
        },
        gc: clusterapi::gc::GcConfig {
            grace: args.timeouts.unclaimed_machine_grace,
            ..Default::default()
        },
        instance: std::env::var("HOSTNAME").ok(),
        ..OperatorConfig::default()
    }
    .with_gates(&args.feature_gates);

    // Health and metrics first: probes answer while waiting for leadership. Both ports serve
    // `/healthz`, `/readyz` and `/metrics` (see [`karpenter_capi::probes`]).
    let metrics = Arc::new(controllers::metrics::Metrics::new());
    let probes = Probes::new();
    // One server when both ports are the same; a port that cannot be bound stops `run`.
    let mut ports = vec![args.health_probe_port, args.metrics_port];
    ports.dedup();
    for port in ports {
        let addr = SocketAddr::from(([0, 0, 0, 0], port));
        probes
            .serve(addr, Arc::clone(&metrics))
            .await
            .with_context(|| format!("cannot serve health and metrics on {addr}"))?;
    }
    let capi = discover_capi(&management, &args.clusters.capi_selection(), &probes).await;
    config.provider.capi = capi.clone();
    probes.spawn_crd_check(
        workload.clone(),
        management.clone(),
        capi,
        CrdCheckConfig {
            node_overlay: args.feature_gates.node_overlay,
            capacity_buffer: args.feature_gates.capacity_buffer,
            ..CrdCheckConfig::default()
        },
    );
    // The caches run on every replica: a standby is ready once they listed (as upstream:
    // ready means synced, leading or not), so a rolling update of an HA Deployment proceeds.
    let mut caches = Caches::start(&workload);
    probes.watch_caches(&caches);
    let listed = probes.wait_listed(&caches, LIST_TIMEOUT);
    let elector = if let Some((namespace, name)) = args.leader_election.lease() {
        let elector = LeaderElector::new(
            workload.clone(),
            &namespace,
            &name,
            identity(),
            LeaseConfig::default(),
        );
        tracing::info!(lease = %name, "waiting for leadership");
        {
            let acquire = elector.acquire();
            tokio::pin!(acquire);
            loop {
                tokio::select! {
                    () = &mut acquire => break,
                    () = tokio::time::sleep(Duration::from_secs(1)) => caches.discard_triggers(),
                }
            }
        }
        tracing::info!("leading");
        Some(elector)
    } else {
        None
    };
    caches.discard_triggers();
    let operator = Operator::start_with_caches(caches, workload, management, config, metrics);
    probes.watch_operator(&operator);
    // The leader is ready once the Cluster API caches listed too; while one cannot (a missing
    // RBAC rule, an unreachable management cluster) `/readyz` says which and why.
    probes
        .ready
        .set_provider(Err("Cluster API caches not synced yet".to_owned()));
    let provider = operator.provider();
    let readiness = probes.ready.clone();
    let provider_sync = tokio::spawn(async move {
        loop {
            let outcome = provider.caches_synced().await.map_err(|e| e.to_string());
            let synced = outcome.is_ok();
            if let Err(reason) = &outcome {
                tracing::warn!(%reason, "not ready: the Cluster API caches have not synced");
            }
            readiness.set_provider(outcome);
            if synced {
                tracing::info!("Cluster API caches synced");
                return;
            }
            // `caches_synced` itself waits up to the sync timeout; this only keeps a stopped
            // watch (shutdown) from spinning.
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    });
    match listed.await {
        Ok(Ok(())) => {}
        Ok(Err(())) => bail!("caches not listed within {LIST_TIMEOUT:?}"),
        Err(e) => bail!("the cache readiness task failed: {e}"),
    }
    tracing::info!("controllers running");

    let mut leading = elector.as_ref().map(LeaderElector::leading);
    let lost = async {
        match leading.as_mut() {
            Some(rx) => loop {
                if rx.changed().await.is_err() || !*rx.borrow() {
                    return;
                }
            },
            None => std::future::pending::<()>().await,
        }
    };
    let terminate = async {
        #[cfg(unix)]
        {
            if let Ok(mut s) =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            {
                s.recv().await;
                return;
            }
        }
        std::future::pending::<()>().await;
    };
    let outcome = tokio::select! {
        _ = tokio::signal::ctrl_c() => Ok(()),
        () = terminate => Ok(()),
        () = lost => Err(anyhow::anyhow!("leader election lost")),
    };
    provider_sync.abort();
    operator.stop().await;
    if let Some(e) = &elector {
        e.release().await;
    }
    tracing::info!("stopped");
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, clap::Parser)]
    struct Flags {
        #[command(flatten)]
        run: RunArgs,
    }

    #[test]
    fn client_rate_limits_default_to_upstreams_and_must_be_positive() {
        use clap::Parser as _;
        let flags = Flags::try_parse_from(["run"]).unwrap();
        assert_eq!(
            flags.run.rate_limit(),
            RateLimit {
                qps: 200,
                burst: 300
            }
        );
        let flags =
            Flags::try_parse_from(["run", "--kube-client-qps", "5", "--kube-client-burst", "10"])
                .unwrap();
        assert_eq!(flags.run.rate_limit(), RateLimit { qps: 5, burst: 10 });
        for flag in ["--kube-client-qps", "--kube-client-burst"] {
            let err = Flags::try_parse_from(["run", flag, "0"]).unwrap_err();
            assert!(err.to_string().contains(flag), "{err}");
        }
    }

    #[test]
    fn log_levels_are_levels_or_directives() {
        for ok in [
            "info",
            "DEBUG",
            "",
            "warn,controllers=debug",
            "controllers=trace",
            "off",
        ] {
            assert!(log_filter(ok).is_ok(), "{ok}");
        }
        for bad in ["verbose", "info,loud", "debug,,2"] {
            let e = log_filter(bad).unwrap_err().to_string();
            assert!(
                e.contains("LOG_LEVEL") && e.contains("not a level"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn durations_parse_like_go() {
        assert_eq!(duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(duration("1.5h"), Ok(Duration::from_secs(5400)));
        assert!(duration("-1s").unwrap_err().contains("negative"));
        assert!(duration("10").unwrap_err().contains("missing unit"));
        assert!(duration("soon").is_err());
    }
}
