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

pub mod brief;
pub mod capi;
pub mod config;
pub use sim::crds;
pub mod daemonsets;
pub mod driver;
pub mod fit;
pub mod kubelet;
pub mod lean;
pub mod node_template;
pub mod objects;
pub mod replicasets;
pub mod scheduler;
pub mod serve;
pub mod topology;
pub mod touch;

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;

use sim::Sim;

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
    /// The real control plane did not start.
    #[error("cannot start the real API server: {0}")]
    Real(#[from] sim::realk8s::RealK8sError),
    /// CRDs could not be installed.
    #[error(transparent)]
    Crd(#[from] sim::crds::CrdError),
    /// The management cluster serves neither `cluster.x-k8s.io/v1beta2` nor `v1beta1`.
    #[error("the management cluster does not serve cluster.x-k8s.io v1beta2 or v1beta1")]
    CapiNotServed,
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
    // One watch per workload resource, shared by every controller it wakes.
    let (mut pod_wakes, mut node_wakes) = (Vec::new(), Vec::new());
    if config.capi.enabled {
        capi::start(tasks, health, management, workload, &config.capi);
    }
    if config.scheduler.enabled {
        let s = scheduler::Scheduler::new(workload.clone(), config.scheduler.clone());
        let wake = tasks.start_woken(s, config.scheduler.retry_interval, health);
        pod_wakes.push(Arc::clone(&wake));
        node_wakes.push(wake);
    }
    if config.kubelet.enabled {
        let k = kubelet::Kubelet::new(workload.clone(), config.kubelet.clone());
        let wake = tasks.start_woken(k, config.kubelet.resync, health);
        pod_wakes.push(Arc::clone(&wake));
        node_wakes.push(wake);
    }
    if config.workloads.deployments {
        let r = replicasets::ReplicaSets::new(workload.clone());
        tasks.start(r, config.workloads.resync, health, |wake| {
            pod_wakes.push(Arc::clone(wake));
            vec![
                driver::watch(
                    Api::<touch::Touch<Deployment>>::all(workload.clone()),
                    wake.clone(),
                ),
                driver::watch(
                    Api::<touch::Touch<ReplicaSet>>::all(workload.clone()),
                    wake.clone(),
                ),
            ]
        });
    }
    if config.workloads.daemonsets {
        let d = daemonsets::DaemonSets::new(workload.clone());
        tasks.start(d, config.workloads.resync, health, |wake| {
            pod_wakes.push(Arc::clone(wake));
            node_wakes.push(Arc::clone(wake));
            vec![driver::watch(
                Api::<touch::Touch<DaemonSet>>::all(workload.clone()),
                wake.clone(),
            )]
        });
    }
    if !pod_wakes.is_empty() {
        let watch =
            driver::watch_for_all(Api::<touch::Touch<Pod>>::all(workload.clone()), pod_wakes);
        tasks.0.push(watch);
    }
    if !node_wakes.is_empty() {
        let watch =
            driver::watch_for_all(Api::<touch::Touch<Node>>::all(workload.clone()), node_wakes);
        tasks.0.push(watch);
    }
    c
}

/// Run the configured controllers against any pair of clusters (`sim world --kubeconfig WL
/// --management-kubeconfig MGMT`) until the returned future is dropped. Installs the Cluster API
/// CRDs into the management cluster first if Cluster API is simulated and they are missing (and,
/// when only its infrastructure is, the provider kinds' CRDs, [`capi::infrastructure::crds`]).
pub async fn run_world_against(
    workload: kube::Client,
    management: kube::Client,
    config: WorldConfig,
) -> anyhow::Result<()> {
    if config.capi.enabled {
        install_capi(&management, &config.capi).await?;
    }
    let _controllers = start_controllers(&workload, &management, &config);
    std::future::pending::<()>().await;
    Ok(())
}

/// Install the Cluster API CRDs as `config.serving` says (the default: as far as the server
/// allows, [`crds::install_capi_crds`]; CRDs already there, a real Cluster API's, are left as
/// they are) and, when only the infrastructure is simulated, the provider kinds' CRDs
/// ([`capi::infrastructure::crds`]); when all of Cluster API is, the `DockerMachineTemplate`
/// kind its examples reference ([`capi::infrastructure::docker_machine_template_crd`]) and the
/// `DockerMachinePool` kind its MachinePools do ([`capi::pools::docker_machine_pool_crd`]).
async fn install_capi(management: &kube::Client, config: &CapiConfig) -> Result<(), WorldError> {
    match config.serving {
        Some(serving) => crds::install_capi_crds_serving(management, serving).await?,
        None => crds::install_capi_crds(management).await?,
    }
    if config.core {
        // Cluster API is simulated whole: serve the template kind its examples name, as a
        // management cluster with the Docker provider does.
        crds::install(
            management,
            &[
                capi::infrastructure::docker_machine_template_crd()?,
                capi::pools::docker_machine_pool_crd()?,
            ],
        )
        .await?;
    } else {
        crds::install(management, &capi::infrastructure::crds()?).await?;
    }
    Ok(())
}

/// The servers behind a [`World`].
enum Servers {
    /// Two in-process [`Sim`]s.
    Sim { management: Sim, workload: Sim },
    /// One real control plane serving as both clusters (CAPI objects in the workload cluster,
    /// as when Cluster API manages itself), reached over TLS with a client certificate.
    Real {
        cluster: sim::realk8s::RealCluster,
        client: kube::Client,
    },
}

impl std::fmt::Debug for Servers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Servers::Sim {
                management,
                workload,
            } => f
                .debug_struct("Sim")
                .field("management", management)
                .field("workload", workload)
                .finish(),
            Servers::Real { cluster, .. } => {
                f.debug_struct("Real").field("cluster", cluster).finish()
            }
        }
    }
}

/// Which API server a [`World`] runs on: the test suites that matter run once per backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// Two in-process [`Sim`]s.
    Sim,
    /// A real kube-apiserver ([`sim::realk8s`]) with kube-controller-manager (garbage
    /// collection, Deployments, ReplicaSets, PDB status) and the real kube-scheduler; the
    /// world simulates Cluster API, kubelets and DaemonSets.
    Real,
}

impl Backend {
    /// Both backends, for parameterised tests.
    pub const ALL: [Backend; 2] = [Backend::Sim, Backend::Real];
}

/// An in-process world: a management and a workload server with the controllers running
/// against them. On [`Backend::Sim`] the controllers use routers without injected faults, so
/// faults hit only the system under test. Dropping it stops the controllers (and, on
/// [`Backend::Real`], the control plane).
#[derive(Debug)]
pub struct World {
    controllers: Controllers,
    servers: Servers,
}

impl World {
    /// Start two servers from `config.management` and `config.workload`, install the Cluster
    /// API CRDs into the management one, and start the configured controllers.
    pub async fn start(config: WorldConfig) -> Result<World, WorldError> {
        let management = Sim::new(config.management.clone());
        let workload = Sim::new(config.workload.clone());
        let controllers = Self::run(&management, &workload, &config).await?;
        Ok(World {
            controllers,
            servers: Servers::Sim {
                management,
                workload,
            },
        })
    }

    /// Start a world on `backend`; see [`Backend`] for what runs where.
    pub async fn start_on(backend: Backend, config: WorldConfig) -> Result<World, WorldError> {
        match backend {
            Backend::Sim => Self::start(config).await,
            Backend::Real => Self::start_real(config).await,
        }
    }

    /// Start a real control plane (etcd, kube-apiserver, kube-controller-manager,
    /// kube-scheduler) and the world's Cluster API, kubelet and DaemonSet controllers against
    /// it. The real controller-manager and scheduler replace the world's workload controllers
    /// and kube-scheduler-lite, whatever `config` says of them.
    pub async fn start_real(mut config: WorldConfig) -> Result<World, WorldError> {
        let cluster = sim::realk8s::RealCluster::start(sim::realk8s::RealConfig {
            controller_manager: true,
            scheduler: true,
            apiserver_args: Vec::new(),
        })
        .await?;
        let client = cluster.client().await?;
        config.scheduler.enabled = false;
        config.workloads.deployments = false;
        install_capi(&client, &config.capi).await?;
        let controllers = start_controllers(&client, &client, &config);
        Ok(World {
            controllers,
            servers: Servers::Real { cluster, client },
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
        install_capi(&mgmt, &config.capi).await?;
        Ok(start_controllers(&wl, &mgmt, config))
    }

    /// Which backend this world runs on.
    pub fn backend(&self) -> Backend {
        match self.servers {
            Servers::Sim { .. } => Backend::Sim,
            Servers::Real { .. } => Backend::Real,
        }
    }

    /// The management [`Sim`] (fault injection, world knobs), or `None` on a real server.
    pub fn management(&self) -> Option<&Sim> {
        match &self.servers {
            Servers::Sim { management, .. } => Some(management),
            Servers::Real { .. } => None,
        }
    }

    /// The workload [`Sim`], or `None` on a real server.
    pub fn workload(&self) -> Option<&Sim> {
        match &self.servers {
            Servers::Sim { workload, .. } => Some(workload),
            Servers::Real { .. } => None,
        }
    }

    /// The real control plane, or `None` on `sim`.
    pub fn real(&self) -> Option<&sim::realk8s::RealCluster> {
        match &self.servers {
            Servers::Real { cluster, .. } => Some(cluster),
            Servers::Sim { .. } => None,
        }
    }

    /// A client of the management server, as the system under test sees it (with faults).
    pub fn management_client(&self) -> kube::Client {
        match &self.servers {
            Servers::Sim { management, .. } => kube::Client::new(management.router(), "default"),
            Servers::Real { client, .. } => client.clone(),
        }
    }

    /// A client of the workload server, as the system under test sees it (with faults).
    pub fn workload_client(&self) -> kube::Client {
        match &self.servers {
            Servers::Sim { workload, .. } => kube::Client::new(workload.router(), "default"),
            Servers::Real { client, .. } => client.clone(),
        }
    }

    /// How each controller is doing.
    pub fn health(&self) -> BTreeMap<&'static str, ControllerHealth> {
        self.controllers.health()
    }
}

/// Declares each named `async fn NAME(backend: Backend)` as two tests, `NAME::sim` and
/// `NAME::real` (multi-threaded tokio runtimes), so a suite runs against `sim` and against a
/// real kube-apiserver. The real variants need the tools of [`sim::realk8s`].
///
/// `backend_tests!(paused: a, b)` runs the `sim` variants with paused tokio time
/// (`start_paused`, delays pass instantly) and the `real` ones in real time.
#[macro_export]
macro_rules! backend_tests {
    (paused: $($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[tokio::test(start_paused = true)]
                async fn sim() {
                    super::$name($crate::Backend::Sim).await;
                }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn real() {
                    super::$name($crate::Backend::Real).await;
                }
            }
        )*
    };
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn sim() {
                    super::$name($crate::Backend::Sim).await;
                }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn real() {
                    super::$name($crate::Backend::Real).await;
                }
            }
        )*
    };
}
