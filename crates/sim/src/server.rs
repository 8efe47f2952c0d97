//! Serving over TCP, with a kubeconfig.
//!
//! Responsibility: serve a [`Sim`] over plain HTTP on a local address (port 0 picks a free
//! one), write a kubeconfig pointing at it (`http://127.0.0.1:<port>`, no credentials) that
//! `kubectl --kubeconfig` and `kube::Config` accept, and shut down gracefully.
//! Inputs: an address, optionally a [`Sim`]. Outputs: a [`RunningServer`].

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::sim::Sim;

/// How long [`RunningServer::shutdown`] lets open requests finish before it closes their
/// connections.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// A server listening on a TCP address. Dropping it stops it; [`RunningServer::shutdown`]
/// stops it and waits.
#[derive(Debug)]
pub struct RunningServer {
    sim: Sim,
    address: SocketAddr,
    kubeconfig: PathBuf,
    _dir: tempfile::TempDir,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<std::io::Result<()>>>,
}

/// Serve a new, empty [`Sim`] on `addr` (e.g. `127.0.0.1:0`).
pub async fn serve(addr: SocketAddr) -> anyhow::Result<RunningServer> {
    serve_sim(Sim::default(), addr).await
}

/// Serve two independent servers on free local ports — e.g. a management and a workload
/// cluster.
pub async fn serve_pair() -> anyhow::Result<(RunningServer, RunningServer)> {
    let local = SocketAddr::from(([127, 0, 0, 1], 0));
    Ok((serve(local).await?, serve(local).await?))
}

/// Serve an existing [`Sim`] on `addr`.
pub async fn serve_sim(sim: Sim, addr: SocketAddr) -> anyhow::Result<RunningServer> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let address = listener.local_addr().context("no local address")?;
    let dir = tempfile::tempdir().context("cannot create a directory for the kubeconfig")?;
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, kubeconfig_yaml(&format!("http://{address}")))
        .with_context(|| format!("cannot write {}", kubeconfig.display()))?;
    let (stop, stopped) = oneshot::channel::<()>();
    let app = sim.router();
    let task = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = stopped.await;
            })
            .await
    });
    Ok(RunningServer {
        sim,
        address,
        kubeconfig,
        _dir: dir,
        stop: Some(stop),
        task: Some(task),
    })
}

/// A kubeconfig for a server URL, context and cluster named `sim`, namespace `default`.
pub fn kubeconfig_yaml(server: &str) -> String {
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: sim
  cluster:
    server: {server}
contexts:
- name: sim
  context:
    cluster: sim
    user: sim
    namespace: default
current-context: sim
users:
- name: sim
  user: {{}}
preferences: {{}}
"
    )
}

impl RunningServer {
    /// The address served.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// `http://<address>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// The kubeconfig file (removed when the server is dropped).
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    /// The server's state, for in-process access.
    pub fn sim(&self) -> &Sim {
        &self.sim
    }

    /// Stop accepting connections, end open watches, let open requests finish, and wait.
    pub async fn shutdown(mut self) -> anyhow::Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.sim.stop_watches();
        if let Some(mut task) = self.task.take() {
            // Open requests get a moment to finish; a client that holds a connection longer
            // (a request the server never answers) does not keep the server up.
            match tokio::time::timeout(SHUTDOWN_GRACE, &mut task).await {
                Ok(done) => done.context("server task failed")??,
                Err(_) => {
                    tracing::warn!(address = %self.address, "open connections outlived the shutdown grace period; closing them");
                    task.abort();
                }
            }
        }
        Ok(())
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}
