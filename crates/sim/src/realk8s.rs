//! realk8s: a real control plane on loopback for tests — our envtest.
//!
//! Responsibility: start etcd and a real kube-apiserver (optionally kube-controller-manager and
//! kube-scheduler) on free 127.0.0.1 ports in a temporary directory, wait for `/readyz`, hand
//! out TLS + client-certificate kubeconfigs and clients, and stop every process when the
//! [`RealCluster`] is dropped (also when a test panics).
//! Inputs: [`RealConfig`]; the binaries, found as controller-runtime's envtest finds them
//! ([`asset`]: `TEST_ASSET_KUBE_APISERVER`, `TEST_ASSET_ETCD`, … for one binary, else the
//! directory `KUBEBUILDER_ASSETS`, else `/usr/local/kubebuilder/bin`; etcd also on `PATH`, as
//! Debian's `etcd-server` installs it); `openssl`.
//! Outputs: a running cluster, its admin kubeconfig, clients.
//!
//! The PKI (CA, serving certificate for 127.0.0.1/localhost, an admin client certificate in
//! `system:masters`, the service-account key pair, the front-proxy CA) is made once per cache
//! with `openssl`, as `start.sh` does, and shared by every cluster: only ports and etcd data are
//! per cluster. A missing tool is a [`RealK8sError::Missing`] that says how to get it. A test
//! process killed outright (a timeout's SIGKILL) runs no `Drop`: every start therefore first
//! stops the processes of clusters whose owner is gone (pid and start time recorded in each
//! cluster's directory) and removes their directories.

use std::fmt::Write as _;
use std::fs;
use std::io::Read as _;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use base64::Engine as _;
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{Api, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};

/// Which processes to run besides etcd and kube-apiserver.
#[derive(Debug, Clone, Default)]
pub struct RealConfig {
    /// kube-controller-manager with garbage collection, namespaces, service accounts,
    /// Deployments, ReplicaSets and the disruption (PDB status) controller.
    pub controller_manager: bool,
    /// The real kube-scheduler.
    pub scheduler: bool,
    /// Extra kube-apiserver flags.
    pub apiserver_args: Vec<String>,
}

/// Why a real cluster could not be started.
#[derive(Debug, thiserror::Error)]
pub enum RealK8sError {
    /// A tool the harness needs is not installed.
    #[error("{what} not found: {how}")]
    Missing {
        /// What is missing.
        what: String,
        /// How to get it.
        how: String,
    },
    /// A file operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A helper command failed.
    #[error("`{command}` failed: {output}")]
    Command {
        /// The command line.
        command: String,
        /// What it printed.
        output: String,
    },
    /// A process exited or never became ready.
    #[error("{process} did not become ready: {detail}\n--- last lines of {log} ---\n{tail}")]
    NotReady {
        /// Which process.
        process: &'static str,
        /// What was seen.
        detail: String,
        /// Its log file.
        log: String,
        /// The log's last lines.
        tail: String,
    },
    /// The kubeconfig could not be loaded into a client.
    #[error("cannot build a client: {0}")]
    Client(String),
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> RealK8sError {
    let what = what.into();
    move |source| RealK8sError::Io { what, source }
}

/// Where envtest looks when `KUBEBUILDER_ASSETS` is not set.
const DEFAULT_ASSETS: &str = "/usr/local/kubebuilder/bin";

/// The environment variable naming one binary, as envtest names them
/// (`kube-apiserver` → `TEST_ASSET_KUBE_APISERVER`).
fn asset_variable(name: &str) -> String {
    format!("TEST_ASSET_{}", name.to_uppercase().replace('-', "_"))
}

/// The binary `name` (`kube-apiserver`, `kube-controller-manager`, `kube-scheduler`, `etcd`),
/// found the envtest way: `TEST_ASSET_<NAME>`, else `$KUBEBUILDER_ASSETS/<name>`, else (etcd
/// only) `PATH`, else `/usr/local/kubebuilder/bin/<name>`. A binary a variable names must
/// exist; the error says what to set.
pub fn asset(name: &str) -> Result<PathBuf, RealK8sError> {
    find_asset(
        name,
        &|variable| std::env::var_os(variable),
        &which,
        Path::new(DEFAULT_ASSETS),
    )
}

/// [`asset`] with the environment, the `PATH` lookup and envtest's default directory given.
fn find_asset(
    name: &str,
    env: &dyn Fn(&str) -> Option<std::ffi::OsString>,
    on_path: &dyn Fn(&str) -> Option<PathBuf>,
    default_dir: &Path,
) -> Result<PathBuf, RealK8sError> {
    let variable = asset_variable(name);
    let how = format!(
        "the real-API-server tests find their binaries the envtest way: set KUBEBUILDER_ASSETS \
         to a directory holding kube-apiserver, kube-controller-manager, kube-scheduler and \
         etcd, or {variable} to this one (etcd may also be on PATH: Debian's etcd-server); \
         see the README, \"Tests against a real API server\""
    );
    let named = |path: PathBuf, by: String| {
        if path.is_file() {
            Ok(path)
        } else {
            Err(RealK8sError::Missing {
                what: format!("`{name}` at {} (from {by})", path.display()),
                how: how.clone(),
            })
        }
    };
    if let Some(path) = env(&variable) {
        return named(PathBuf::from(path), variable);
    }
    if let Some(dir) = env("KUBEBUILDER_ASSETS") {
        let path = Path::new(&dir).join(name);
        if path.is_file() || name != "etcd" {
            return named(path, "KUBEBUILDER_ASSETS".into());
        }
    }
    if name == "etcd"
        && let Some(path) = on_path(name)
    {
        return Ok(path);
    }
    let path = default_dir.join(name);
    if path.is_file() {
        return Ok(path);
    }
    Err(RealK8sError::Missing {
        what: format!("`{name}`"),
        how,
    })
}

/// The shared cache of the PKI: `$REALK8S_CACHE`, else
/// `<tmp>/karpenter-capi-realk8s`.
fn cache_dir() -> PathBuf {
    std::env::var_os("REALK8S_CACHE").map_or_else(
        || std::env::temp_dir().join("karpenter-capi-realk8s"),
        PathBuf::from,
    )
}

fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

fn require(name: &str, how: &str) -> Result<PathBuf, RealK8sError> {
    which(name).ok_or_else(|| RealK8sError::Missing {
        what: format!("`{name}` (on PATH)"),
        how: how.into(),
    })
}

fn run(cmd: &mut Command) -> Result<(), RealK8sError> {
    let line = format!("{cmd:?}");
    let out = cmd.output().map_err(io(format!("running {line}")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(RealK8sError::Command {
            command: line,
            output: String::from_utf8_lossy(&out.stderr).into_owned(),
        })
    }
}

/// Makes the PKI once per cache, under an exclusive file lock so concurrent test processes
/// wait for the first one.
fn prepare(cache: &Path) -> Result<(), RealK8sError> {
    fs::create_dir_all(cache).map_err(io(format!("creating {}", cache.display())))?;
    let lock = fs::File::create(cache.join(".lock")).map_err(io("creating the cache lock"))?;
    lock.lock().map_err(io("locking the cache"))?;
    let pki = cache.join("pki");
    if !pki.join("front-proxy-client.crt").is_file() {
        make_pki(&pki)?;
    }
    drop(lock);
    Ok(())
}

fn make_pki(pki: &Path) -> Result<(), RealK8sError> {
    require("openssl", "apt-get install -y openssl")?;
    fs::create_dir_all(pki).map_err(io("creating pki/"))?;
    let p = |f: &str| pki.join(f);
    let ossl = |args: &[&str]| run(Command::new("openssl").args(args).current_dir(pki));
    let ext = |name: &str, body: &str| fs::write(p(name), body).map_err(io("writing an ext file"));
    let key = |name: &str| ossl(&["genrsa", "-out", name, "2048"]);
    let sign = |csr: &str, ca: &str, extfile: &str, out: &str| {
        ossl(&[
            "x509",
            "-req",
            "-in",
            csr,
            "-CA",
            &format!("{ca}.crt"),
            "-CAkey",
            &format!("{ca}.key"),
            "-CAcreateserial",
            "-days",
            "3650",
            "-sha256",
            "-extfile",
            extfile,
            "-out",
            out,
        ])
    };
    let ca = |name: &str, cn: &str| {
        key(&format!("{name}.key"))?;
        ossl(&[
            "req",
            "-x509",
            "-new",
            "-nodes",
            "-key",
            &format!("{name}.key"),
            "-sha256",
            "-days",
            "3650",
            "-subj",
            &format!("/CN={cn}"),
            "-out",
            &format!("{name}.crt"),
        ])
    };
    let leaf = |name: &str, subj: &str, ca_name: &str, extfile: &str| {
        key(&format!("{name}.key"))?;
        ossl(&[
            "req",
            "-new",
            "-key",
            &format!("{name}.key"),
            "-subj",
            subj,
            "-out",
            &format!("{name}.csr"),
        ])?;
        sign(
            &format!("{name}.csr"),
            ca_name,
            extfile,
            &format!("{name}.crt"),
        )
    };
    ext(
        "server.ext",
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n\
         extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,\
         DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc\n",
    )?;
    ext(
        "client.ext",
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n\
         extendedKeyUsage=clientAuth\n",
    )?;
    ca("ca", "realk8s-ca")?;
    leaf("apiserver", "/CN=kube-apiserver", "ca", "server.ext")?;
    leaf(
        "admin",
        "/O=system:masters/CN=realk8s-admin",
        "ca",
        "client.ext",
    )?;
    key("sa.key")?;
    ossl(&["rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub"])?;
    ca("front-proxy-ca", "realk8s-front-proxy-ca")?;
    leaf(
        "front-proxy-client",
        "/CN=front-proxy-client",
        "front-proxy-ca",
        "client.ext",
    )
}

/// A free loopback port (bound and released; the caller retries on the rare race).
fn free_port() -> Result<u16, RealK8sError> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(io("finding a free port"))?;
    Ok(l.local_addr().map_err(io("finding a free port"))?.port())
}

fn b64_file(path: &Path) -> Result<String, RealK8sError> {
    let bytes = fs::read(path).map_err(io(format!("reading {}", path.display())))?;
    Ok(base64::engine::general_purpose::STANDARD.encode(bytes))
}

fn tail(path: &Path, lines: usize) -> String {
    let mut text = String::new();
    if let Ok(mut f) = fs::File::open(path) {
        let _ = f.read_to_string(&mut text);
    }
    let all: Vec<&str> = text.lines().collect();
    all.iter()
        .skip(all.len().saturating_sub(lines))
        .fold(String::new(), |mut out, l| {
            let _ = writeln!(out, "{l}");
            out
        })
}

/// A process's start time (`/proc/<pid>/stat` field 22), which tells a live process from a
/// later one that reused its pid.
fn start_time(pid: u32) -> Option<String> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, after) = stat.rsplit_once(')')?;
    after.split_whitespace().nth(19).map(str::to_owned)
}

/// Stops the processes of clusters whose test process died without dropping them (killed by
/// a timeout or a signal, so no `Drop` ran), and removes their directories. Each cluster
/// directory records its owner and its processes with their start times; only a process whose
/// pid *and* start time match is killed.
fn reap_stale(base: &Path) {
    let Ok(entries) = fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let dir = entry.path();
        let is_ours = dir
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("realk8s-"));
        let Ok(owner) = fs::read_to_string(dir.join("owner")) else {
            continue;
        };
        let alive = |line: &str| {
            let mut parts = line.split_whitespace();
            match (
                parts.next().and_then(|p| p.parse::<u32>().ok()),
                parts.next(),
            ) {
                (Some(pid), Some(started)) => start_time(pid).as_deref() == Some(started),
                _ => false,
            }
        };
        if !is_ours || alive(owner.trim()) {
            continue;
        }
        for line in fs::read_to_string(dir.join("pids"))
            .unwrap_or_default()
            .lines()
        {
            if alive(line)
                && let Some(pid) = line.split_whitespace().next()
            {
                let _ = Command::new("kill").args(["-9", pid]).status();
            }
        }
        let _ = fs::remove_dir_all(&dir);
    }
}

/// A running control plane. Dropping it kills every process and removes its directory.
#[derive(Debug)]
pub struct RealCluster {
    dir: tempfile::TempDir,
    children: Vec<(&'static str, Child)>,
    url: String,
    pki: PathBuf,
    kubeconfig: PathBuf,
}

impl Drop for RealCluster {
    fn drop(&mut self) {
        for (_, child) in self.children.iter_mut().rev() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// How long the whole start may take before it is reported as failed.
const READY_TIMEOUT: Duration = Duration::from_secs(120);

impl RealCluster {
    /// Start a cluster: etcd, kube-apiserver, and what `config` asks for. Returns once
    /// `/readyz` answers `ok` and the `default` ServiceAccount exists in `default`.
    pub async fn start(config: RealConfig) -> Result<RealCluster, RealK8sError> {
        let mut last = None;
        for _ in 0..3 {
            match Self::start_once(&config).await {
                Ok(c) => return Ok(c),
                // A port taken between choosing and binding: try other ports.
                Err(e @ RealK8sError::NotReady { .. }) if e.to_string().contains("in use") => {
                    last = Some(e);
                }
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| RealK8sError::Client("no attempt made".into())))
    }

    async fn start_once(config: &RealConfig) -> Result<RealCluster, RealK8sError> {
        let etcd = asset("etcd")?;
        let apiserver = asset("kube-apiserver")?;
        let controller_manager = if config.controller_manager {
            Some(asset("kube-controller-manager")?)
        } else {
            None
        };
        let scheduler = if config.scheduler {
            Some(asset("kube-scheduler")?)
        } else {
            None
        };
        let cache = cache_dir();
        let cache2 = cache.clone();
        tokio::task::spawn_blocking(move || prepare(&cache2))
            .await
            .map_err(|e| RealK8sError::Client(e.to_string()))??;
        let shm = Path::new("/dev/shm");
        reap_stale(shm);
        reap_stale(&std::env::temp_dir());
        let base = if shm.is_dir() {
            tempfile::Builder::new().prefix("realk8s-").tempdir_in(shm)
        } else {
            tempfile::Builder::new().prefix("realk8s-").tempdir()
        }
        .map_err(io("creating the cluster directory"))?;
        let d = base.path().to_path_buf();
        let pki = cache.join("pki");
        let (api_port, etcd_port, peer_port) = (free_port()?, free_port()?, free_port()?);
        let url = format!("https://127.0.0.1:{api_port}");
        let me = std::process::id();
        fs::write(
            d.join("owner"),
            format!("{me} {}\n", start_time(me).unwrap_or_default()),
        )
        .map_err(io("writing the owner file"))?;
        let mut cluster = RealCluster {
            dir: base,
            children: Vec::new(),
            url: url.clone(),
            pki: pki.clone(),
            kubeconfig: d.join("admin.kubeconfig"),
        };
        cluster.write_kubeconfig()?;
        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let peer_url = format!("http://127.0.0.1:{peer_port}");
        let data = d.join("etcd-data");
        cluster.spawn(
            "etcd",
            Command::new(etcd)
                .arg("--name=realk8s")
                .arg(format!("--data-dir={}", data.display()))
                .arg(format!("--listen-client-urls={etcd_url}"))
                .arg(format!("--advertise-client-urls={etcd_url}"))
                .arg(format!("--listen-peer-urls={peer_url}"))
                .arg(format!("--initial-advertise-peer-urls={peer_url}"))
                .arg(format!("--initial-cluster=realk8s={peer_url}"))
                .arg("--initial-cluster-state=new")
                .arg("--quota-backend-bytes=4294967296"),
        )?;
        let pf = |f: &str| pki.join(f).display().to_string();
        let mut api = Command::new(apiserver);
        api.arg("--bind-address=127.0.0.1")
            .arg("--advertise-address=127.0.0.1")
            .arg(format!("--secure-port={api_port}"))
            .arg(format!("--etcd-servers={etcd_url}"))
            .arg(format!("--tls-cert-file={}", pf("apiserver.crt")))
            .arg(format!("--tls-private-key-file={}", pf("apiserver.key")))
            .arg(format!("--client-ca-file={}", pf("ca.crt")))
            .arg("--service-account-issuer=https://kubernetes.default.svc.cluster.local")
            .arg(format!("--service-account-key-file={}", pf("sa.pub")))
            .arg(format!(
                "--service-account-signing-key-file={}",
                pf("sa.key")
            ))
            .arg("--api-audiences=https://kubernetes.default.svc.cluster.local")
            .arg("--service-cluster-ip-range=10.96.0.0/16")
            .arg("--authorization-mode=RBAC,Node")
            .arg(format!(
                "--requestheader-client-ca-file={}",
                pf("front-proxy-ca.crt")
            ))
            .arg("--requestheader-allowed-names=front-proxy-client")
            .arg("--requestheader-username-headers=X-Remote-User")
            .arg("--requestheader-group-headers=X-Remote-Group")
            .arg("--requestheader-extra-headers-prefix=X-Remote-Extra-")
            .arg(format!(
                "--proxy-client-cert-file={}",
                pf("front-proxy-client.crt")
            ))
            .arg(format!(
                "--proxy-client-key-file={}",
                pf("front-proxy-client.key")
            ))
            .arg("--allow-privileged=true")
            .arg("--endpoint-reconciler-type=none")
            .arg("--profiling=false")
            .arg("--v=1")
            .args(&config.apiserver_args);
        cluster.spawn("kube-apiserver", &mut api)?;
        let client = cluster.wait_ready().await?;
        let kc = cluster.kubeconfig.display().to_string();
        if let Some(controller_manager) = controller_manager {
            cluster.spawn(
                "kube-controller-manager",
                Command::new(controller_manager)
                    .arg(format!("--kubeconfig={kc}"))
                    .arg(format!("--authentication-kubeconfig={kc}"))
                    .arg(format!("--authorization-kubeconfig={kc}"))
                    .arg("--bind-address=127.0.0.1")
                    .arg(format!("--secure-port={}", free_port()?))
                    .arg("--leader-elect=false")
                    .arg(
                        "--controllers=garbagecollector,namespace,serviceaccount,\
                         serviceaccount-token,deployment,replicaset,disruption",
                    )
                    .arg(format!(
                        "--service-account-private-key-file={}",
                        pf("sa.key")
                    ))
                    .arg(format!("--root-ca-file={}", pf("ca.crt")))
                    .arg("--use-service-account-credentials=false")
                    .arg("--cluster-name=realk8s")
                    .arg("--v=1"),
            )?;
        }
        if let Some(scheduler) = scheduler {
            cluster.spawn(
                "kube-scheduler",
                Command::new(scheduler)
                    .arg(format!("--kubeconfig={kc}"))
                    .arg(format!("--authentication-kubeconfig={kc}"))
                    .arg(format!("--authorization-kubeconfig={kc}"))
                    .arg("--bind-address=127.0.0.1")
                    .arg(format!("--secure-port={}", free_port()?))
                    .arg("--leader-elect=false")
                    .arg("--v=1"),
            )?;
        }
        // Pods need their namespace's `default` ServiceAccount (admission); the
        // controller-manager would make it too, eventually.
        let sas: Api<ServiceAccount> = Api::namespaced(client, "default");
        let sa: ServiceAccount = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "default", "namespace": "default"}
        }))
        .map_err(|e| RealK8sError::Client(e.to_string()))?;
        match sas.create(&PostParams::default(), &sa).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(RealK8sError::Client(e.to_string())),
        }
        Ok(cluster)
    }

    fn spawn(&mut self, name: &'static str, cmd: &mut Command) -> Result<(), RealK8sError> {
        let log_path = self.dir.path().join(format!("{name}.log"));
        let log = fs::File::create(&log_path).map_err(io("creating a log file"))?;
        let err = log.try_clone().map_err(io("opening a log file"))?;
        let child = cmd
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .spawn()
            .map_err(io(format!("starting {name}")))?;
        let pid = child.id();
        let record = format!("{pid} {}\n", start_time(pid).unwrap_or_default());
        let mut pids = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("pids"))
            .map_err(io("recording a pid"))?;
        std::io::Write::write_all(&mut pids, record.as_bytes()).map_err(io("recording a pid"))?;
        self.children.push((name, child));
        Ok(())
    }

    fn write_kubeconfig(&self) -> Result<(), RealK8sError> {
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: realk8s\n  cluster:\n    \
             server: {url}\n    certificate-authority-data: {ca}\nusers:\n- name: admin\n  \
             user:\n    client-certificate-data: {cert}\n    client-key-data: {key}\n\
             contexts:\n- name: realk8s\n  context:\n    cluster: realk8s\n    user: admin\n    \
             namespace: default\ncurrent-context: realk8s\n",
            url = self.url,
            ca = b64_file(&self.pki.join("ca.crt"))?,
            cert = b64_file(&self.pki.join("admin.crt"))?,
            key = b64_file(&self.pki.join("admin.key"))?,
        );
        fs::write(&self.kubeconfig, text).map_err(io("writing admin.kubeconfig"))
    }

    async fn wait_ready(&mut self) -> Result<kube::Client, RealK8sError> {
        let client = self.client().await?;
        let deadline = tokio::time::Instant::now() + READY_TIMEOUT;
        loop {
            for (name, child) in &mut self.children {
                if let Ok(Some(status)) = child.try_wait() {
                    let log = self.dir.path().join(format!("{name}.log"));
                    return Err(RealK8sError::NotReady {
                        process: name,
                        detail: format!("exited with {status}"),
                        tail: tail(&log, 30),
                        log: log.display().to_string(),
                    });
                }
            }
            let req = http::Request::get("/readyz").body(Vec::new());
            let answer = match req {
                Ok(req) => client.request_text(req).await.ok(),
                Err(_) => None,
            };
            if answer.as_deref() == Some("ok") {
                return Ok(client);
            }
            if tokio::time::Instant::now() >= deadline {
                let log = self.dir.path().join("kube-apiserver.log");
                return Err(RealK8sError::NotReady {
                    process: "kube-apiserver",
                    detail: format!("/readyz not ok after {READY_TIMEOUT:?}: {answer:?}"),
                    tail: tail(&log, 30),
                    log: log.display().to_string(),
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The server's URL (`https://127.0.0.1:<port>`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The admin kubeconfig file (TLS, CA data and a `system:masters` client certificate).
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    /// The shared PKI directory (`ca.crt`, `ca.key`, `admin.crt`, `admin.key`, ...), for tests
    /// that mint other identities.
    pub fn pki_dir(&self) -> &Path {
        &self.pki
    }

    /// The cluster's own directory (logs, etcd data); removed on drop.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// A client with the admin identity, over TLS, without kube's transparent retry of
    /// 429/503 (as the controller's own clients, and as `sim`'s in-process clients).
    pub async fn client(&self) -> Result<kube::Client, RealK8sError> {
        let kc = Kubeconfig::read_from(&self.kubeconfig)
            .map_err(|e| RealK8sError::Client(e.to_string()))?;
        let mut config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .map_err(|e| RealK8sError::Client(e.to_string()))?;
        config.default_retry = false;
        kube::Client::try_from(config).map_err(|e| RealK8sError::Client(e.to_string()))
    }

    /// A token of the ServiceAccount `default/<name>` (created here), bound by a
    /// ClusterRoleBinding `<name>-<cluster_role>` to the ClusterRole `cluster_role`: an
    /// identity whose rights a test chooses.
    pub async fn service_account_token(
        &self,
        name: &str,
        cluster_role: &str,
    ) -> Result<String, RealK8sError> {
        let admin = self.client().await?;
        let err = |e: kube::Error| RealK8sError::Client(e.to_string());
        let binding: ClusterRoleBinding = serde_json::from_value(serde_json::json!({
            "metadata": {"name": format!("{name}-{cluster_role}")},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                "name": cluster_role},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": "default"}],
        }))
        .map_err(|e| RealK8sError::Client(e.to_string()))?;
        Api::<ClusterRoleBinding>::all(admin.clone())
            .create(&PostParams::default(), &binding)
            .await
            .map_err(err)?;
        let sas: Api<ServiceAccount> = Api::namespaced(admin, "default");
        let sa: ServiceAccount =
            serde_json::from_value(serde_json::json!({"metadata": {"name": name}}))
                .map_err(|e| RealK8sError::Client(e.to_string()))?;
        sas.create(&PostParams::default(), &sa).await.map_err(err)?;
        let request: TokenRequest = serde_json::from_value(
            serde_json::json!({"spec": {"audiences": [], "expirationSeconds": 3600}}),
        )
        .map_err(|e| RealK8sError::Client(e.to_string()))?;
        sas.create_token_request(name, &PostParams::default(), &request)
            .await
            .map_err(err)?
            .status
            .map(|s| s.token)
            .ok_or_else(|| RealK8sError::Client(format!("no token for ServiceAccount {name}")))
    }

    /// A client of this cluster (its CA) authenticating with the bearer `token`.
    pub async fn client_with_token(&self, token: &str) -> Result<kube::Client, RealK8sError> {
        let yaml = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {}\n    \
             certificate-authority: {}\nusers:\n- name: u\n  user:\n    token: {token}\n\
             contexts:\n- name: x\n  context:\n    cluster: c\n    user: u\n\
             current-context: x\n",
            self.url(),
            self.pki.join("ca.crt").display(),
        );
        let kc = Kubeconfig::from_yaml(&yaml).map_err(|e| RealK8sError::Client(e.to_string()))?;
        let mut config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .map_err(|e| RealK8sError::Client(e.to_string()))?;
        config.default_retry = false;
        kube::Client::try_from(config).map_err(|e| RealK8sError::Client(e.to_string()))
    }

    /// The process IDs of what this cluster started, in start order.
    pub fn pids(&self) -> Vec<u32> {
        self.children.iter().map(|(_, c)| c.id()).collect()
    }

    /// The last lines of a process's log (`etcd`, `kube-apiserver`, ...).
    pub fn log_tail(&self, process: &str, lines: usize) -> String {
        tail(&self.dir.path().join(format!("{process}.log")), lines)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]

    use std::collections::BTreeMap;
    use std::ffi::OsString;

    use super::*;

    /// A directory with empty files named `names`.
    fn dir_with(names: &[&str]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for name in names {
            fs::write(dir.path().join(name), "").unwrap();
        }
        dir
    }

    fn find(
        name: &str,
        env: &BTreeMap<&str, PathBuf>,
        path: Option<PathBuf>,
        default_dir: &Path,
    ) -> Result<PathBuf, RealK8sError> {
        let env = |v: &str| env.get(v).map(|p| OsString::from(p.as_os_str()));
        let on_path = |_: &str| path.clone();
        find_asset(name, &env, &on_path, default_dir)
    }

    #[test]
    fn an_asset_comes_from_its_variable_then_kubebuilder_assets_then_the_default() {
        let assets = dir_with(&["kube-apiserver", "etcd"]);
        let own = dir_with(&["my-apiserver"]);
        let default = dir_with(&["kube-apiserver", "kube-scheduler"]);
        let none = BTreeMap::new();
        let kb = BTreeMap::from([("KUBEBUILDER_ASSETS", assets.path().to_owned())]);
        let both = BTreeMap::from([
            ("KUBEBUILDER_ASSETS", assets.path().to_owned()),
            ("TEST_ASSET_KUBE_APISERVER", own.path().join("my-apiserver")),
        ]);
        assert_eq!(
            find("kube-apiserver", &both, None, default.path()).unwrap(),
            own.path().join("my-apiserver")
        );
        assert_eq!(
            find("kube-apiserver", &kb, None, default.path()).unwrap(),
            assets.path().join("kube-apiserver")
        );
        assert_eq!(
            find("kube-apiserver", &none, None, default.path()).unwrap(),
            default.path().join("kube-apiserver")
        );
        // A directory that lacks a binary is an error, not a fall-through to the default.
        let err = find("kube-scheduler", &kb, None, default.path()).unwrap_err();
        assert!(err.to_string().contains("KUBEBUILDER_ASSETS"), "{err}");
    }

    #[test]
    fn etcd_may_come_from_path_when_the_assets_lack_it() {
        let assets = dir_with(&["kube-apiserver"]);
        let elsewhere = dir_with(&["etcd"]);
        let kb = BTreeMap::from([("KUBEBUILDER_ASSETS", assets.path().to_owned())]);
        let on_path = Some(elsewhere.path().join("etcd"));
        assert_eq!(
            find("etcd", &kb, on_path.clone(), Path::new("/nonexistent")).unwrap(),
            elsewhere.path().join("etcd")
        );
        let with_etcd = dir_with(&["etcd"]);
        let kb = BTreeMap::from([("KUBEBUILDER_ASSETS", with_etcd.path().to_owned())]);
        assert_eq!(
            find("etcd", &kb, on_path, Path::new("/nonexistent")).unwrap(),
            with_etcd.path().join("etcd")
        );
    }

    #[test]
    fn nothing_found_says_what_to_set() {
        let err = find(
            "kube-apiserver",
            &BTreeMap::new(),
            None,
            Path::new("/nonexistent"),
        )
        .unwrap_err()
        .to_string();
        for needed in [
            "kube-apiserver",
            "KUBEBUILDER_ASSETS",
            "TEST_ASSET_KUBE_APISERVER",
        ] {
            assert!(err.contains(needed), "{needed} missing from: {err}");
        }
        let missing = PathBuf::from("/nonexistent/kube-apiserver");
        let named = BTreeMap::from([("TEST_ASSET_KUBE_APISERVER", missing.clone())]);
        let err = find("kube-apiserver", &named, None, Path::new("/nonexistent"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("/nonexistent/kube-apiserver")
                && err.contains("TEST_ASSET_KUBE_APISERVER"),
            "{err}"
        );
    }
}
