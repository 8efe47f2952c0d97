//! The Prometheus metrics of the controllers, named as upstream Karpenter names them (spec §7).
//!
//! Responsibility: one [`Metrics`] value holding every metric family that exists so far,
//! registered in one `prometheus-client` registry under the `karpenter_` prefix, and
//! [`Metrics::encode`] for `/metrics` (OpenMetrics text). Controllers get an `Arc<Metrics>` and
//! update families directly. Upstream summaries are histograms here (prometheus-client has no
//! summary type).
//! Inputs: none. Outputs: the text exposition.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::{Metric, Registry};

/// `{reason, nodepool, min_values_relaxed}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CreatedLabels {
    /// `provisioned`, or the disruption reason of a replacement.
    pub reason: String,
    /// NodePool.
    pub nodepool: String,
    /// `"true"` / `"false"`.
    pub min_values_relaxed: String,
}

/// `{nodepool, capacity_type, zone}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PoolTypeZoneLabels {
    /// NodePool.
    pub nodepool: String,
    /// Capacity type.
    pub capacity_type: String,
    /// Zone.
    pub zone: String,
}

/// `{reason, nodepool, capacity_type}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DisruptedLabels {
    /// `launch_timeout`, `registration_timeout`, `insufficient_capacity`, …
    pub reason: String,
    /// NodePool.
    pub nodepool: String,
    /// Capacity type.
    pub capacity_type: String,
}

/// `{condition, nodepool, capacity_type, image_id}` (node repair).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct UnhealthyLabels {
    /// The condition, snake case (`ready`, `node_deleted`).
    pub condition: String,
    /// NodePool.
    pub nodepool: String,
    /// Capacity type.
    pub capacity_type: String,
    /// The NodeClaim's `status.imageID`.
    pub image_id: String,
}

/// `{decision, reason, consolidation_type}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DecisionLabels {
    /// `delete` or `replace`.
    pub decision: String,
    /// `empty`, `underutilized`, `drifted`.
    pub reason: String,
    /// `empty`, `single`, `multi` (empty for drift).
    pub consolidation_type: String,
}

/// `{nodepool, reason}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PoolReasonLabels {
    /// NodePool.
    pub nodepool: String,
    /// Disruption reason.
    pub reason: String,
}

/// `{decision, nodepool, policy}` (Balanced consolidation scoring).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ScoreLabels {
    /// `approved` or `rejected`.
    pub decision: String,
    /// NodePool.
    pub nodepool: String,
    /// Its consolidation policy (`Balanced`, `WhenEmptyOrUnderutilized`).
    pub policy: String,
}

/// `{consolidation_type}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ConsolidationTypeLabels {
    /// `empty`, `single`, `multi`.
    pub consolidation_type: String,
}

/// `{method, consolidation_type}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EvaluationLabels {
    /// `emptiness`, `consolidation`, `drift`.
    pub method: String,
    /// `empty`, `single`, `multi`.
    pub consolidation_type: String,
}

/// `{nodepool, zone}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PoolZoneLabels {
    /// NodePool.
    pub nodepool: String,
    /// Zone.
    pub zone: String,
}

/// `{nodepool}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PoolLabels {
    /// NodePool.
    pub nodepool: String,
}

/// `{code}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CodeLabels {
    /// HTTP status code of the eviction request.
    pub code: String,
}

/// `{reason}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    /// Reason.
    pub reason: String,
}

/// `{controller}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControllerLabels {
    /// Controller name (`provisioner`).
    pub controller: String,
}

/// `{resource_type, nodepool}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResourceLabels {
    /// `cpu`, `memory`, `nodes`, …
    pub resource_type: String,
    /// NodePool.
    pub nodepool: String,
}

/// `{controller, method, provider}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MethodLabels {
    /// Calling controller.
    pub controller: String,
    /// CloudProvider method.
    pub method: String,
    /// Provider name.
    pub provider: String,
}

/// `{controller, method, provider, error}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MethodErrorLabels {
    /// Calling controller.
    pub controller: String,
    /// CloudProvider method.
    pub method: String,
    /// Provider name.
    pub provider: String,
    /// The error's metric label.
    pub error: String,
}

/// `{version, goversion, goarch, commit}` (upstream's names; `goversion` holds the Rust
/// edition here).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BuildLabels {
    /// Crate version.
    pub version: String,
    /// Toolchain.
    pub goversion: String,
    /// Architecture.
    pub goarch: String,
    /// Commit (empty when unknown).
    pub commit: String,
}

type Hist<L> = Family<L, Histogram, fn() -> Histogram>;

fn duration_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.005, 2.0, 18))
}

fn long_buckets() -> Histogram {
    Histogram::new(exponential_buckets(1.0, 2.0, 16))
}

fn score_buckets() -> Histogram {
    Histogram::new([0.1, 0.25, 0.33, 0.5, 1.0, 2.0, 5.0, 10.0])
}

/// Registers `metric` as `karpenter_<name>` and records its name and type in `families`.
fn register<M: Metric + TypedMetric>(
    registry: &mut Registry,
    families: &mut Vec<(String, MetricType)>,
    name: &str,
    help: &str,
    metric: M,
) {
    families.push((format!("karpenter_{name}"), M::TYPE));
    registry.register(name, help, metric);
}

/// Every metric family of the controllers.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// Name and type of every registered family ([`Metrics::families`]).
    families: Vec<(String, MetricType)>,
    /// `karpenter_nodeclaims_created_total`.
    pub nodeclaims_created: Family<CreatedLabels, Counter>,
    /// `karpenter_nodeclaims_terminated_total`.
    pub nodeclaims_terminated: Family<PoolTypeZoneLabels, Counter>,
    /// `karpenter_nodeclaims_disrupted_total`.
    pub nodeclaims_disrupted: Family<DisruptedLabels, Counter>,
    /// `karpenter_nodeclaims_unhealthy_disrupted_total`.
    pub nodeclaims_unhealthy_disrupted: Family<UnhealthyLabels, Counter>,
    /// `karpenter_nodeclaims_termination_duration_seconds`.
    pub nodeclaims_termination_duration: Hist<PoolLabels>,
    /// `karpenter_nodeclaims_instance_termination_duration_seconds`.
    pub nodeclaims_instance_termination_duration: Hist<PoolLabels>,
    /// `karpenter_nodes_created_total`.
    pub nodes_created: Family<PoolZoneLabels, Counter>,
    /// `karpenter_nodes_terminated_total`.
    pub nodes_terminated: Family<PoolZoneLabels, Counter>,
    /// `karpenter_nodes_drained_total`.
    pub nodes_drained: Family<PoolLabels, Counter>,
    /// `karpenter_nodes_termination_duration_seconds`.
    pub nodes_termination_duration: Hist<PoolLabels>,
    /// `karpenter_nodes_lifetime_duration_seconds`.
    pub nodes_lifetime_duration: Hist<PoolLabels>,
    /// `karpenter_pods_eviction_requests_total`.
    pub pods_eviction_requests: Family<CodeLabels, Counter>,
    /// `karpenter_pods_drained_total`.
    pub pods_drained: Family<ReasonLabels, Counter>,
    /// `karpenter_scheduler_scheduling_duration_seconds`.
    pub scheduling_duration: Hist<ControllerLabels>,
    /// `karpenter_scheduler_unschedulable_pods_count`.
    pub unschedulable_pods: Family<ControllerLabels, Gauge>,
    /// `karpenter_scheduler_ignored_pods_count`.
    pub ignored_pods: Gauge,
    /// `karpenter_nodepools_usage`.
    pub nodepools_usage: Family<ResourceLabels, Gauge<f64, AtomicU64>>,
    /// `karpenter_nodepools_limit`.
    pub nodepools_limit: Family<ResourceLabels, Gauge<f64, AtomicU64>>,
    /// `karpenter_cluster_state_synced` (0/1).
    pub cluster_state_synced: Gauge,
    /// `karpenter_cluster_state_node_count`.
    pub cluster_state_node_count: Gauge,
    /// `karpenter_cloudprovider_duration_seconds`.
    pub cloudprovider_duration: Hist<MethodLabels>,
    /// `karpenter_cloudprovider_errors_total`.
    pub cloudprovider_errors: Family<MethodErrorLabels, Counter>,
    /// `karpenter_build_info`.
    pub build_info: Family<BuildLabels, Gauge>,
    /// `karpenter_voluntary_disruption_decisions_total`.
    pub disruption_decisions: Family<DecisionLabels, Counter>,
    /// `karpenter_voluntary_disruption_eligible_nodes{reason}`.
    pub disruption_eligible_nodes: Family<ReasonLabels, Gauge>,
    /// `karpenter_voluntary_disruption_decision_evaluation_duration_seconds`.
    pub disruption_evaluation_duration: Hist<EvaluationLabels>,
    /// `karpenter_voluntary_disruption_failed_validations_total`.
    pub disruption_failed_validations: Family<ConsolidationTypeLabels, Counter>,
    /// `karpenter_voluntary_disruption_consolidation_timeouts_total`.
    pub disruption_consolidation_timeouts: Family<ConsolidationTypeLabels, Counter>,
    /// `karpenter_voluntary_disruption_queue_failures_total`.
    pub disruption_queue_failures: Family<DecisionLabels, Counter>,
    /// `karpenter_nodepools_allowed_disruptions`.
    pub nodepools_allowed_disruptions: Family<PoolReasonLabels, Gauge>,
    /// `karpenter_nodepools_nodes_consuming_budgets`.
    pub nodepools_nodes_consuming_budgets: Family<PoolReasonLabels, Gauge>,
    /// `karpenter_pods_disruption_initiated_total` (per reason).
    pub pods_disruption_initiated: Family<ReasonLabels, Counter>,
    /// `karpenter_consolidation_score` (Balanced NodePools' scores of consolidation moves).
    pub consolidation_score: Hist<ScoreLabels>,
    /// `karpenter_consolidation_moves_total` (consolidation moves scored, per NodePool).
    pub consolidation_moves: Family<ScoreLabels, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Every family, registered.
    #[must_use]
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("karpenter");
        let mut families = Vec::new();
        let m = Self {
            nodeclaims_created: Family::default(),
            nodeclaims_terminated: Family::default(),
            nodeclaims_disrupted: Family::default(),
            nodeclaims_unhealthy_disrupted: Family::default(),
            nodeclaims_termination_duration: Family::new_with_constructor(long_buckets),
            nodeclaims_instance_termination_duration: Family::new_with_constructor(long_buckets),
            nodes_created: Family::default(),
            nodes_terminated: Family::default(),
            nodes_drained: Family::default(),
            nodes_termination_duration: Family::new_with_constructor(long_buckets),
            nodes_lifetime_duration: Family::new_with_constructor(long_buckets),
            pods_eviction_requests: Family::default(),
            pods_drained: Family::default(),
            scheduling_duration: Family::new_with_constructor(duration_buckets),
            unschedulable_pods: Family::default(),
            ignored_pods: Gauge::default(),
            nodepools_usage: Family::default(),
            nodepools_limit: Family::default(),
            cluster_state_synced: Gauge::default(),
            cluster_state_node_count: Gauge::default(),
            cloudprovider_duration: Family::new_with_constructor(duration_buckets),
            cloudprovider_errors: Family::default(),
            build_info: Family::default(),
            disruption_decisions: Family::default(),
            disruption_eligible_nodes: Family::default(),
            disruption_evaluation_duration: Family::new_with_constructor(duration_buckets),
            disruption_failed_validations: Family::default(),
            disruption_consolidation_timeouts: Family::default(),
            disruption_queue_failures: Family::default(),
            nodepools_allowed_disruptions: Family::default(),
            nodepools_nodes_consuming_budgets: Family::default(),
            pods_disruption_initiated: Family::default(),
            consolidation_score: Family::new_with_constructor(score_buckets),
            consolidation_moves: Family::default(),
            registry: Registry::default(),
            families: Vec::new(),
        };
        let r = &mut registry;
        register(
            r,
            &mut families,
            "nodeclaims_created",
            "NodeClaims created",
            m.nodeclaims_created.clone(),
        );
        register(
            r,
            &mut families,
            "nodeclaims_terminated",
            "NodeClaims terminated",
            m.nodeclaims_terminated.clone(),
        );
        register(
            r,
            &mut families,
            "nodeclaims_disrupted",
            "NodeClaims disrupted",
            m.nodeclaims_disrupted.clone(),
        );
        register(
            r,
            &mut families,
            "nodeclaims_unhealthy_disrupted",
            "NodeClaims replaced by node repair, by the condition that made them unhealthy",
            m.nodeclaims_unhealthy_disrupted.clone(),
        );
        register(
            r,
            &mut families,
            "nodeclaims_termination_duration_seconds",
            "Time from NodeClaim deletion to finalizer removal",
            m.nodeclaims_termination_duration.clone(),
        );
        register(
            r,
            &mut families,
            "nodeclaims_instance_termination_duration_seconds",
            "Time from the first instance delete to the instance being gone",
            m.nodeclaims_instance_termination_duration.clone(),
        );
        register(
            r,
            &mut families,
            "nodes_created",
            "Nodes registered",
            m.nodes_created.clone(),
        );
        register(
            r,
            &mut families,
            "nodes_terminated",
            "Nodes terminated",
            m.nodes_terminated.clone(),
        );
        register(
            r,
            &mut families,
            "nodes_drained",
            "Nodes drained",
            m.nodes_drained.clone(),
        );
        register(
            r,
            &mut families,
            "nodes_termination_duration_seconds",
            "Time from Node deletion to finalizer removal",
            m.nodes_termination_duration.clone(),
        );
        register(
            r,
            &mut families,
            "nodes_lifetime_duration_seconds",
            "Node lifetime at termination",
            m.nodes_lifetime_duration.clone(),
        );
        register(
            r,
            &mut families,
            "pods_eviction_requests",
            "Eviction requests by response code",
            m.pods_eviction_requests.clone(),
        );
        register(
            r,
            &mut families,
            "pods_drained",
            "Pods evicted by drain",
            m.pods_drained.clone(),
        );
        register(
            r,
            &mut families,
            "scheduler_scheduling_duration_seconds",
            "Duration of scheduling simulations",
            m.scheduling_duration.clone(),
        );
        register(
            r,
            &mut families,
            "scheduler_unschedulable_pods_count",
            "Pods the last scheduling simulation could not place",
            m.unschedulable_pods.clone(),
        );
        register(
            r,
            &mut families,
            "scheduler_ignored_pods_count",
            "Pods the last loop ignored (validation)",
            m.ignored_pods.clone(),
        );
        register(
            r,
            &mut families,
            "nodepools_usage",
            "Resources used per NodePool",
            m.nodepools_usage.clone(),
        );
        register(
            r,
            &mut families,
            "nodepools_limit",
            "Limits per NodePool",
            m.nodepools_limit.clone(),
        );
        register(
            r,
            &mut families,
            "cluster_state_synced",
            "Whether cluster state is synced",
            m.cluster_state_synced.clone(),
        );
        register(
            r,
            &mut families,
            "cluster_state_node_count",
            "Nodes in cluster state",
            m.cluster_state_node_count.clone(),
        );
        register(
            r,
            &mut families,
            "cloudprovider_duration_seconds",
            "Duration of CloudProvider calls",
            m.cloudprovider_duration.clone(),
        );
        register(
            r,
            &mut families,
            "cloudprovider_errors",
            "CloudProvider errors",
            m.cloudprovider_errors.clone(),
        );
        register(
            r,
            &mut families,
            "build_info",
            "Build information",
            m.build_info.clone(),
        );
        register(
            r,
            &mut families,
            "voluntary_disruption_decisions",
            "Disruption decisions made",
            m.disruption_decisions.clone(),
        );
        register(
            r,
            &mut families,
            "voluntary_disruption_eligible_nodes",
            "Nodes eligible for disruption, per reason",
            m.disruption_eligible_nodes.clone(),
        );
        register(
            r,
            &mut families,
            "voluntary_disruption_decision_evaluation_duration_seconds",
            "Time to compute a disruption decision",
            m.disruption_evaluation_duration.clone(),
        );
        register(
            r,
            &mut families,
            "voluntary_disruption_failed_validations",
            "Consolidation commands abandoned at validation",
            m.disruption_failed_validations.clone(),
        );
        register(
            r,
            &mut families,
            "voluntary_disruption_consolidation_timeouts",
            "Consolidation searches stopped by their time limit",
            m.disruption_consolidation_timeouts.clone(),
        );
        register(
            r,
            &mut families,
            "voluntary_disruption_queue_failures",
            "Disruption commands that failed and were rolled back",
            m.disruption_queue_failures.clone(),
        );
        register(
            r,
            &mut families,
            "nodepools_allowed_disruptions",
            "Disruptions a NodePool's budgets allow, per reason",
            m.nodepools_allowed_disruptions.clone(),
        );
        register(
            r,
            &mut families,
            "nodepools_nodes_consuming_budgets",
            "Nodes of a NodePool already disrupting, per reason",
            m.nodepools_nodes_consuming_budgets.clone(),
        );
        register(
            r,
            &mut families,
            "pods_disruption_initiated",
            "Pods whose node voluntary disruption started removing",
            m.pods_disruption_initiated.clone(),
        );
        register(
            r,
            &mut families,
            "consolidation_score",
            "Balanced consolidation scores of moves, per decision and NodePool",
            m.consolidation_score.clone(),
        );
        register(
            r,
            &mut families,
            "consolidation_moves",
            "Consolidation moves scored, per decision, NodePool and policy",
            m.consolidation_moves.clone(),
        );
        m.build_info
            .get_or_create(&BuildLabels {
                version: env!("CARGO_PKG_VERSION").into(),
                goversion: "rust".into(),
                goarch: std::env::consts::ARCH.into(),
                commit: String::new(),
            })
            .set(1);
        Self {
            registry,
            families,
            ..m
        }
    }

    /// Every registered family: its name (with the `karpenter_` prefix, without the `_total`
    /// a counter's series add) and type (`counter`, `gauge`, `histogram`). The text exposition
    /// omits a labelled family until it has a series; this lists them all (`docs/metrics.md`
    /// is checked against it).
    #[must_use]
    pub fn families(&self) -> Vec<(String, &'static str)> {
        self.families
            .iter()
            .map(|(name, kind)| {
                let kind = match kind {
                    MetricType::Counter => "counter",
                    MetricType::Gauge => "gauge",
                    MetricType::Histogram => "histogram",
                    MetricType::Info => "info",
                    MetricType::Unknown => "unknown",
                };
                (name.clone(), kind)
            })
            .collect()
    }

    /// The OpenMetrics text exposition of every family.
    #[must_use]
    pub fn encode(&self) -> String {
        let mut out = String::new();
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &self.registry) {
            tracing::warn!(error = %e, "metrics not encoded");
            out.clear();
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_upstream() {
        let m = Metrics::new();
        m.nodeclaims_created
            .get_or_create(&CreatedLabels {
                reason: "provisioned".into(),
                nodepool: "default".into(),
                min_values_relaxed: "false".into(),
            })
            .inc();
        m.pods_eviction_requests
            .get_or_create(&CodeLabels { code: "200".into() })
            .inc();
        let labels = ScoreLabels {
            decision: "rejected".into(),
            nodepool: "default".into(),
            policy: "Balanced".into(),
        };
        m.consolidation_score.get_or_create(&labels).observe(0.31);
        m.consolidation_moves.get_or_create(&labels).inc();
        let text = m.encode();
        for name in [
            "karpenter_consolidation_score_bucket{le=\"0.33\",decision=\"rejected\",nodepool=\"default\",policy=\"Balanced\"} 1",
            "karpenter_consolidation_score_bucket{le=\"0.25\",decision=\"rejected\",nodepool=\"default\",policy=\"Balanced\"} 0",
            "karpenter_consolidation_moves_total{decision=\"rejected\",nodepool=\"default\",policy=\"Balanced\"} 1",
            "karpenter_nodeclaims_created_total{reason=\"provisioned\",nodepool=\"default\",min_values_relaxed=\"false\"} 1",
            "karpenter_pods_eviction_requests_total{code=\"200\"} 1",
            "karpenter_build_info{",
            "# TYPE karpenter_cluster_state_synced gauge",
        ] {
            assert!(text.contains(name), "{name} missing in\n{text}");
        }
    }
}
