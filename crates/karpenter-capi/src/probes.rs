//! `/healthz` and `/readyz` of `run`: what the process checks about itself.
//!
//! Responsibility: [`Probes`] — a [`Liveness`] registry and a [`Readiness`] — and serving them
//! with `/metrics` ([`Probes::serve`]).
//! - Liveness (`/healthz`, 500 naming the tasks): every long-running task of `run` is
//!   registered — the HTTP servers, the shared state's watches ([`Probes::watch_caches`]),
//!   the CRD check, and on the leader every controller and the provider's watches
//!   ([`Probes::watch_operator`]). A task that returned, panicked or was aborted fails it.
//! - Readiness (`/readyz`, 503 naming what is missing): the workload caches listed once, the
//!   CRDs `run` needs are served ([`required`]: NodePools, NodeClaims and
//!   ClusterAPINodeClasses on the workload cluster; Machines, MachineSets and
//!   MachineDeployments, in the Cluster API version chosen at start, on the management
//!   cluster — read from discovery, re-checked
//!   periodically, [`Probes::spawn_crd_check`]), and on the leader the Cluster API caches
//!   synced ([`Readiness::set_provider`]).
//!
//! Inputs: clients, tasks, cache states. Outputs: the checks and the HTTP servers.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use api::CapiVersion;
use controllers::liveness::Liveness;
use controllers::metrics::Metrics;
use kube::Resource;

use crate::operator::{Caches, Operator};

/// Which cluster a CRD must be served by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Cluster {
    /// The workload cluster (NodePools, NodeClaims, NodeClasses).
    Workload,
    /// The management cluster (Cluster API objects).
    Management,
}

impl std::fmt::Display for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Cluster::Workload => "workload cluster",
            Cluster::Management => "management cluster",
        })
    }
}

/// A resource `run` reads: the cluster serving it, its group/version and plural.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Required {
    /// Where it must be served.
    pub cluster: Cluster,
    /// API group.
    pub group: String,
    /// Version.
    pub version: String,
    /// Plural resource name.
    pub plural: String,
}

impl std::fmt::Display for Required {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}.{}/{} ({})",
            self.plural, self.group, self.version, self.cluster
        )
    }
}

fn of<K: Resource>(cluster: Cluster, dt: &K::DynamicType) -> Required {
    Required {
        cluster,
        group: K::group(dt).into_owned(),
        version: K::version(dt).into_owned(),
        plural: K::plural(dt).into_owned(),
    }
}

/// Every resource `run` needs served, in the order messages name them: NodePools, NodeClaims
/// and ClusterAPINodeClasses on the workload cluster; Machines, MachineSets and
/// MachineDeployments in `capi` on the management cluster.
#[must_use]
pub fn required(capi: &CapiVersion) -> Vec<Required> {
    vec![
        of::<api::NodePool>(Cluster::Workload, &()),
        of::<api::NodeClaim>(Cluster::Workload, &()),
        of::<api::ClusterAPINodeClass>(Cluster::Workload, &()),
        of::<api::Machine>(Cluster::Management, capi),
        of::<api::MachineSet>(Cluster::Management, capi),
        of::<api::MachineDeployment>(Cluster::Management, capi),
    ]
}

/// [`required`], and NodeOverlays and CapacityBuffers on the workload cluster when their
/// gates are on.
#[must_use]
pub fn required_with(capi: &CapiVersion, gates: &CrdCheckConfig) -> Vec<Required> {
    let mut all = required(capi);
    if gates.capacity_buffer {
        all.insert(3, of::<api::CapacityBuffer>(Cluster::Workload, &()));
    }
    if gates.node_overlay {
        all.insert(3, of::<api::NodeOverlay>(Cluster::Workload, &()));
    }
    all
}

/// Asks discovery of each cluster which `required` resources it serves: those it does not,
/// and the groups whose discovery failed for another reason (with the error).
pub async fn served(
    workload: &kube::Client,
    management: &kube::Client,
    required: Vec<Required>,
) -> (Vec<Required>, Vec<String>) {
    let mut missing = Vec::new();
    let mut failed = Vec::new();
    let mut groups: Vec<(Cluster, &str, &str)> = required
        .iter()
        .map(|r| (r.cluster, r.group.as_str(), r.version.as_str()))
        .collect();
    groups.dedup();
    for (cluster, group, version) in groups {
        let client = match cluster {
            Cluster::Workload => workload,
            Cluster::Management => management,
        };
        let wanted = required.iter().filter(|r| {
            (r.cluster, r.group.as_str(), r.version.as_str()) == (cluster, group, version)
        });
        match client
            .list_api_group_resources(&format!("{group}/{version}"))
            .await
        {
            Ok(list) => missing.extend(
                wanted
                    .filter(|r| !list.resources.iter().any(|s| s.name == r.plural))
                    .cloned(),
            ),
            Err(kube::Error::Api(s)) if s.code == 404 => {
                missing.extend(wanted.cloned());
            }
            Err(e) => failed.push(format!(
                "cannot discover {group}/{version} on the {cluster}: {e}"
            )),
        }
    }
    (missing, failed)
}

/// Asks discovery of each cluster which [`required`] resources it serves.
///
/// # Errors
/// `CRDs not served: …` naming each missing resource and its cluster, and any group whose
/// discovery failed for another reason than not being served (with the error).
pub async fn check_crds(
    workload: &kube::Client,
    management: &kube::Client,
    capi: &CapiVersion,
    gates: &CrdCheckConfig,
) -> Result<(), String> {
    let (missing, failed) = served(workload, management, required_with(capi, gates)).await;
    let mut reasons = Vec::new();
    if !missing.is_empty() {
        let names: Vec<String> = missing.iter().map(ToString::to_string).collect();
        reasons.push(format!("CRDs not served: {}", names.join(", ")));
    }
    reasons.extend(failed);
    if reasons.is_empty() {
        Ok(())
    } else {
        Err(reasons.join("; "))
    }
}

/// What `/readyz` waits for; cheap to clone (one shared state).
#[derive(Debug, Clone)]
pub struct Readiness(Arc<Mutex<ReadyState>>);

#[derive(Debug)]
struct ReadyState {
    caches_listed: bool,
    crds: Option<String>,
    provider: Option<String>,
}

impl Default for Readiness {
    fn default() -> Self {
        Self(Arc::new(Mutex::new(ReadyState {
            caches_listed: false,
            crds: Some("CRDs not checked yet".to_owned()),
            provider: None,
        })))
    }
}

impl Readiness {
    fn with<T>(&self, f: impl FnOnce(&mut ReadyState) -> T) -> T {
        f(&mut self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// The workload caches have listed once.
    pub fn set_caches_listed(&self) {
        self.with(|s| s.caches_listed = true);
    }

    /// The outcome of the latest CRD check.
    pub fn set_crds(&self, outcome: Result<(), String>) {
        self.with(|s| s.crds = outcome.err());
    }

    /// Why the leader's Cluster API caches cannot answer (`Ok`: synced, or not leading).
    pub fn set_provider(&self, outcome: Result<(), String>) {
        self.with(|s| s.provider = outcome.err());
    }

    /// `Ok` when ready.
    ///
    /// # Errors
    /// Every reason it is not, joined by `; `.
    pub fn check(&self) -> Result<(), String> {
        self.with(|s| {
            let reasons: Vec<&str> = (!s.caches_listed)
                .then_some("caches not synced yet")
                .into_iter()
                .chain(s.crds.as_deref())
                .chain(s.provider.as_deref())
                .collect();
            if reasons.is_empty() {
                Ok(())
            } else {
                Err(reasons.join("; "))
            }
        })
    }
}

/// How often the CRD check runs.
#[derive(Debug, Clone, Copy)]
pub struct CrdCheckConfig {
    /// While something is missing.
    pub retry: Duration,
    /// Once everything is served (a CRD may be deleted later).
    pub recheck: Duration,
    /// The `NodeOverlay` gate is on: NodeOverlays must be served too.
    pub node_overlay: bool,
    /// The `CapacityBuffer` gate is on: CapacityBuffers must be served too.
    pub capacity_buffer: bool,
}

impl Default for CrdCheckConfig {
    fn default() -> Self {
        Self {
            retry: Duration::from_secs(5),
            recheck: Duration::from_secs(60),
            node_overlay: false,
            capacity_buffer: false,
        }
    }
}

/// The liveness and readiness of `run`; cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Probes {
    /// The tasks `/healthz` watches.
    pub live: Liveness,
    /// What `/readyz` waits for.
    pub ready: Readiness,
}

impl Probes {
    /// Fresh probes: nothing watched, not ready.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Binds `addr` and serves `/healthz`, `/readyz` and `/metrics` on it in a watched task;
    /// returns the bound address (port 0 picks a free one).
    ///
    /// # Errors
    /// The address cannot be bound.
    pub async fn serve(
        &self,
        addr: SocketAddr,
        metrics: Arc<Metrics>,
    ) -> std::io::Result<SocketAddr> {
        let live = self.live.clone();
        let ready = self.ready.clone();
        let router = controllers::http::router(
            metrics,
            Arc::new(move || live.check()),
            Arc::new(move || ready.check()),
        );
        let (bound, serving) = controllers::http::bind(addr, router).await?;
        tracing::info!(address = %bound, "serving health and metrics");
        self.live.spawn(format!("HTTP server {bound}"), async move {
            if let Err(e) = serving.await {
                tracing::error!(error = %e, address = %bound, "HTTP server stopped");
            }
        });
        Ok(bound)
    }

    /// Watches the shared state's watch tasks.
    pub fn watch_caches(&self, caches: &Caches) {
        self.live.watch_all(caches.state().watch_tasks());
    }

    /// Waits (in a task, at most `timeout`) for the shared state's first list, then marks the
    /// caches listed; the task's outcome says whether they listed in time.
    pub fn wait_listed(
        &self,
        caches: &Caches,
        timeout: Duration,
    ) -> tokio::task::JoinHandle<Result<(), ()>> {
        let state = Arc::clone(caches.state());
        let ready = self.ready.clone();
        tokio::spawn(async move {
            let outcome = state.wait_listed(timeout).await;
            if outcome.is_ok() {
                ready.set_caches_listed();
                tracing::info!("caches synced");
            }
            outcome
        })
    }

    /// Watches every controller and provider watch of the operator.
    pub fn watch_operator(&self, operator: &Operator) {
        self.live.watch_all(operator.tasks());
    }

    /// Starts the CRD check (a watched task): [`check_crds`] every `config.retry` while
    /// something is missing, every `config.recheck` once all are served; each outcome goes to
    /// [`Readiness::set_crds`] and changes are logged.
    pub fn spawn_crd_check(
        &self,
        workload: kube::Client,
        management: kube::Client,
        capi: CapiVersion,
        config: CrdCheckConfig,
    ) {
        let ready = self.ready.clone();
        self.live.spawn("CRD check", async move {
            let mut last: Option<Result<(), String>> = None;
            loop {
                let outcome = check_crds(&workload, &management, &capi, &config).await;
                if last.as_ref() != Some(&outcome) {
                    match &outcome {
                        Ok(()) => tracing::info!("the CRDs are served"),
                        Err(reason) => tracing::warn!(%reason, "not ready"),
                    }
                }
                let wait = if outcome.is_ok() {
                    config.recheck
                } else {
                    config.retry
                };
                ready.set_crds(outcome.clone());
                last = Some(outcome);
                tokio::time::sleep(wait).await;
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn required_names_the_types_resources() {
        let v2 = required(&CapiVersion::v1beta2());
        assert_eq!(
            v2[3].to_string(),
            "machines.cluster.x-k8s.io/v1beta2 (management cluster)"
        );
        assert_eq!(
            v2[5].to_string(),
            "machinedeployments.cluster.x-k8s.io/v1beta2 (management cluster)"
        );
        assert_eq!(
            required(&CapiVersion::v1beta1())[4].to_string(),
            "machinesets.cluster.x-k8s.io/v1beta1 (management cluster)"
        );
        assert_eq!(
            v2[0].to_string(),
            "nodepools.karpenter.sh/v1 (workload cluster)"
        );
        let gates = |node_overlay, capacity_buffer| CrdCheckConfig {
            node_overlay,
            capacity_buffer,
            ..CrdCheckConfig::default()
        };
        let gated = required_with(&CapiVersion::v1beta2(), &gates(true, true));
        assert_eq!(
            gated[3].to_string(),
            "nodeoverlays.karpenter.sh/v1alpha1 (workload cluster)"
        );
        assert_eq!(
            gated[4].to_string(),
            "capacitybuffers.autoscaling.x-k8s.io/v1beta1 (workload cluster)"
        );
        assert_eq!(
            required_with(&CapiVersion::v1beta2(), &gates(false, false)),
            v2
        );
    }

    #[test]
    fn readiness_names_every_reason_until_all_are_met() {
        let r = Readiness::default();
        assert_eq!(
            r.check(),
            Err("caches not synced yet; CRDs not checked yet".to_owned())
        );
        r.set_caches_listed();
        r.set_crds(Err("CRDs not served: x".to_owned()));
        r.set_provider(Err("Machine cache: forbidden".to_owned()));
        assert_eq!(
            r.check(),
            Err("CRDs not served: x; Machine cache: forbidden".to_owned())
        );
        r.set_crds(Ok(()));
        r.clone().set_provider(Ok(()));
        assert_eq!(r.check(), Ok(()));
    }
}
