//! `sim serve`: both clusters on TCP with kubeconfigs, and the world running against them.
//!
//! Responsibility: start a management and a workload [`Sim`] on 127.0.0.1 (given or free
//! ports), write a kubeconfig for each (to the given paths, else a temporary file), install the
//! Cluster API CRDs (and optionally our Karpenter CRDs in the workload cluster), start the
//! configured world controllers, and hand back a [`RunningWorld`] that stops everything when
//! shut down or dropped.
//! Inputs: [`ServeWorldConfig`]. Outputs: [`RunningWorld`].

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::Context as _;

use sim::Sim;
use sim::server::{RunningServer, kubeconfig_yaml, serve_sim};

use super::config::WorldConfig;
use super::driver::ControllerHealth;
use super::{Controllers, World, crds};

/// What to serve.
#[derive(Debug, Clone)]
pub struct ServeWorldConfig {
    /// The world (controllers and both servers' settings).
    pub world: WorldConfig,
    /// Where the management cluster listens (port 0: a free one).
    pub management_addr: SocketAddr,
    /// Where the workload cluster listens (port 0: a free one).
    pub workload_addr: SocketAddr,
    /// Write the management kubeconfig here (else a temporary file).
    pub management_kubeconfig: Option<PathBuf>,
    /// Write the workload kubeconfig here (else a temporary file).
    pub workload_kubeconfig: Option<PathBuf>,
    /// Install the NodePool, NodeClaim and ClusterAPINodeClass CRDs in the workload cluster.
    pub install_karpenter_crds: bool,
}

impl Default for ServeWorldConfig {
    fn default() -> Self {
        let local = SocketAddr::from(([127, 0, 0, 1], 0));
        Self {
            world: WorldConfig::default(),
            management_addr: local,
            workload_addr: local,
            management_kubeconfig: None,
            workload_kubeconfig: None,
            install_karpenter_crds: true,
        }
    }
}

/// Both clusters served and the world running. Dropping it stops everything.
#[derive(Debug)]
pub struct RunningWorld {
    management: RunningServer,
    workload: RunningServer,
    management_kubeconfig: PathBuf,
    workload_kubeconfig: PathBuf,
    controllers: Controllers,
}

fn write_kubeconfig(server: &RunningServer, path: Option<&Path>) -> anyhow::Result<PathBuf> {
    let Some(path) = path else {
        return Ok(server.kubeconfig_path().to_path_buf());
    };
    std::fs::write(path, kubeconfig_yaml(&server.url()))
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path.to_path_buf())
}

/// Serve both clusters and run the world; see the module doc.
pub async fn serve_world(config: ServeWorldConfig) -> anyhow::Result<RunningWorld> {
    let management_sim = Sim::new(config.world.management.clone());
    let workload_sim = Sim::new(config.world.workload.clone());
    let management = serve_sim(management_sim.clone(), config.management_addr).await?;
    let workload = serve_sim(workload_sim.clone(), config.workload_addr).await?;
    let management_kubeconfig =
        write_kubeconfig(&management, config.management_kubeconfig.as_deref())?;
    let workload_kubeconfig = write_kubeconfig(&workload, config.workload_kubeconfig.as_deref())?;
    if config.install_karpenter_crds {
        let wl = kube::Client::new(workload_sim.router_without_faults(), "default");
        crds::install_karpenter_crds(&wl).await?;
    }
    let controllers = World::run(&management_sim, &workload_sim, &config.world).await?;
    Ok(RunningWorld {
        management,
        workload,
        management_kubeconfig,
        workload_kubeconfig,
        controllers,
    })
}

impl RunningWorld {
    /// The management cluster's URL.
    pub fn management_url(&self) -> String {
        self.management.url()
    }

    /// The workload cluster's URL.
    pub fn workload_url(&self) -> String {
        self.workload.url()
    }

    /// The management cluster's kubeconfig.
    pub fn management_kubeconfig(&self) -> &Path {
        &self.management_kubeconfig
    }

    /// The workload cluster's kubeconfig.
    pub fn workload_kubeconfig(&self) -> &Path {
        &self.workload_kubeconfig
    }

    /// The management server.
    pub fn management(&self) -> &Sim {
        self.management.sim()
    }

    /// The workload server.
    pub fn workload(&self) -> &Sim {
        self.workload.sim()
    }

    /// How each controller is doing.
    pub fn health(&self) -> BTreeMap<&'static str, ControllerHealth> {
        self.controllers.health()
    }

    /// Stop the controllers, then both servers (gracefully).
    pub async fn shutdown(self) -> anyhow::Result<()> {
        let Self {
            management,
            workload,
            controllers,
            ..
        } = self;
        controllers.stop();
        management.shutdown().await?;
        workload.shutdown().await
    }
}
