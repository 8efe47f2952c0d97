//! The simulated world around the API servers: Cluster API in a management cluster, and a
//! kube-scheduler, kubelets and workload controllers in a workload cluster.
//!
//! Responsibility: compose small, independent controllers — each talks to its cluster only
//! through a `kube::Client` (fresh lists for decisions, kube-runtime watchers to wake up), so
//! they drive a real kube-apiserver as well as a [`Sim`] — and start them, individually
//! switchable through [`WorldConfig`]:
//! - [`capi`]: MachineDeployment → MachineSet → Machines → providerID → Node;
//! - [`scheduler`]: kube-scheduler-lite (fit logic in [`fit`] and [`topology`]);
//! - [`kubelet`]: node readiness, pod start and termination, taint eviction, pod GC;
//! - [`replicasets`], [`daemonsets`]: workload controllers.
//!
//! Entry points: [`World::start`] (two in-process servers, for tests), [`serve_world`] (two
//! servers on 127.0.0.1 with kubeconfigs, for `sim serve`), [`run_world_against`] and
//! [`start_controllers`] (any pair of clusters). All delays use tokio time.
//! Inputs: [`WorldConfig`], clients. Outputs: running controllers ([`Controllers`]).

pub mod capi;
pub mod config;
pub mod crds;
pub mod daemonsets;
pub mod driver;
pub mod fit;
pub mod kubelet;
pub mod node_template;
pub mod objects;
pub mod replicasets;
pub mod scheduler;
pub mod serve;
pub mod topology;

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;

use crate::sim::Sim;

pub use config::{CapiConfig, KubeletConfig, SchedulerConfig, WorkloadsConfig, WorldConfig};
pub use driver::ControllerHealth;
pub use node_template::NodeOptions;
pub use serve::{RunningWorld, ServeWorldConfig, serve_world};

/// Why a world controller's pass or the world's setup failed.
#[derive(Debug, thiserror::Error)]
pub enum WorldError {
    /// An API request failed.
    #[error("API request failed: {0}")]
    Kube(#[from] kube::Error),
    /// An object could not be converted.
    #[error("cannot convert an object: {0}")]
    Json(#[from] serde_json::Error),
    /// A CRD did not become Established.
    #[error("the CustomResourceDefinition {0} did not become Established")]
    NotEstablished(String),
}

/// The world's running controllers. Dropping this stops them.
#[derive(Debug, Default)]
pub struct Controllers {
    tasks: driver::Tasks,
    health: driver::Health,
}

impl Controllers {
    /// How each controller is doing, by name.
    pub fn health(&self) -> BTreeMap<&'static str, ControllerHealth> {
        self.health.snapshot()
    }

    /// Stop every controller.
    pub fn stop(self) {}
}

impl Drop for Controllers {
    fn drop(&mut self) {
        self.tasks.abort();
    }
}

/// Start the configured controllers against a workload and a management cluster. The Cluster
/// API CRDs must exist in the management cluster (see [`crds::install_capi_crds`]).
pub fn start_controllers(
    workload: &kube::Client,
    management: &kube::Client,
    config: &WorldConfig,
) -> Controllers {
    let mut c = Controllers::default();
    c.tasks.1 = config.min_pass_interval;
    let (tasks, health) = (&mut c.tasks, &c.health);
    let pods = || Api::<Pod>::all(workload.clone());
    let nodes = || Api::<Node>::all(workload.clone());
    if config.capi.enabled {
        capi::start(tasks, health, management, workload, &config.capi);
    }
    if config.scheduler.enabled {
        let s = scheduler::Scheduler::new(workload.clone(), config.scheduler.clone());
        tasks.start(s, config.scheduler.retry_interval, health, |wake| {
            vec![
                driver::watch(pods(), wake.clone()),
                driver::watch(nodes(), wake.clone()),
            ]
        });
    }
    if config.kubelet.enabled {
        let k = kubelet::Kubelet::new(workload.clone(), config.kubelet.clone());
        tasks.start(k, config.kubelet.resync, health, |wake| {
            vec![
                driver::watch(pods(), wake.clone()),
                driver::watch(nodes(), wake.clone()),
            ]
        });
    }
    if config.workloads.deployments {
        let r = replicasets::ReplicaSets::new(workload.clone());
        tasks.start(r, config.workloads.resync, health, |wake| {
            vec![
                driver::watch(Api::<Deployment>::all(workload.clone()), wake.clone()),
                driver::watch(Api::<ReplicaSet>::all(workload.clone()), wake.clone()),
                driver::watch(pods(), wake.clone()),
            ]
        });
    }
    if config.workloads.daemonsets {
        let d = daemonsets::DaemonSets::new(workload.clone());
        tasks.start(d, config.workloads.resync, health, |wake| {
            vec![
                driver::watch(Api::<DaemonSet>::all(workload.clone()), wake.clone()),
                driver::watch(pods(), wake.clone()),
                driver::watch(nodes(), wake.clone()),
            ]
        });
    }
    c
}

/// Run the configured controllers against any pair of clusters (`sim world --kubeconfig WL
/// --management-kubeconfig MGMT`) until the returned future is dropped. Installs the Cluster API
/// CRDs into the management cluster first if Cluster API is simulated and they are missing.
pub async fn run_world_against(
    workload: kube::Client,
    management: kube::Client,
    config: WorldConfig,
) -> anyhow::Result<()> {
    if config.capi.enabled {
        crds::install_capi_crds(&management).await?;
    }
    let _controllers = start_controllers(&workload, &management, &config);
    std::future::pending::<()>().await;
    Ok(())
}

/// An in-process world: a management and a workload [`Sim`] with the controllers running
/// against them (through routers without injected faults, so faults hit only the system
/// under test). Dropping it stops the controllers.
#[derive(Debug)]
pub struct World {
    management: Sim,
    workload: Sim,
    controllers: Controllers,
}

impl World {
    /// Start two servers from `config.management` and `config.workload`, install the Cluster
    /// API CRDs into the management one, and start the configured controllers.
    pub async fn start(config: WorldConfig) -> Result<World, WorldError> {
        let management = Sim::new(config.management.clone());
        let workload = Sim::new(config.workload.clone());
        let controllers = Self::run(&management, &workload, &config).await?;
        Ok(World {
            management,
            workload,
            controllers,
        })
    }

    /// Install the CAPI CRDs and start the controllers over existing servers.
    pub async fn run(
        management: &Sim,
        workload: &Sim,
        config: &WorldConfig,
    ) -> Result<Controllers, WorldError> {
        let mgmt = kube::Client::new(management.router_without_faults(), "default");
        let wl = kube::Client::new(workload.router_without_faults(), "default");
        crds::install_capi_crds(&mgmt).await?;
        Ok(start_controllers(&wl, &mgmt, config))
    }

    /// The management server.
    pub fn management(&self) -> &Sim {
        &self.management
    }

    /// The workload server.
    pub fn workload(&self) -> &Sim {
        &self.workload
    }

    /// A client of the management server, as the system under test sees it (with faults).
    pub fn management_client(&self) -> kube::Client {
        kube::Client::new(self.management.router(), "default")
    }

    /// A client of the workload server, as the system under test sees it (with faults).
    pub fn workload_client(&self) -> kube::Client {
        kube::Client::new(self.workload.router(), "default")
    }

    /// How each controller is doing.
    pub fn health(&self) -> BTreeMap<&'static str, ControllerHealth> {
        self.controllers.health()
    }
}
