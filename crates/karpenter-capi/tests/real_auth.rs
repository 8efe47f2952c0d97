//! Connecting to a real kube-apiserver (HTTPS, client certificates, RBAC) every way users
//! authenticate, and `run` itself over TLS with a client certificate.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use base64::Engine as _;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Namespace;
use karpenter_capi::connect::{Source, UrlCredentials, connect};
use kube::api::{Api, ListParams};
use sim::realk8s::{RealCluster, RealConfig};

const T: Duration = Duration::from_secs(20);

/// An admin-equivalent ServiceAccount token (a cluster-admin binding).
async fn admin_token(cluster: &RealCluster) -> String {
    cluster
        .service_account_token("karpenter", "cluster-admin")
        .await
        .unwrap()
}

fn b64(path: &Path) -> String {
    base64::engine::general_purpose::STANDARD.encode(std::fs::read(path).unwrap())
}

/// A kubeconfig for `server` with these cluster and user fields.
fn kubeconfig(
    dir: &Path,
    name: &str,
    server: &str,
    cluster: &str,
    user: &str,
) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {server}\n{cluster}\
             users:\n- name: u\n  user:\n{user}contexts:\n- name: x\n  context:\n    cluster: c\n    user: u\n\
             current-context: x\n"
        ),
    )
    .unwrap();
    path
}

async fn can_list(client: kube::Client) {
    let names: Vec<String> = Api::<Namespace>::all(client)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    assert!(names.iter().any(|n| n == "kube-system"), "{names:?}");
}

async fn via(path: &Path) -> anyhow::Result<kube::Client> {
    connect("workload", &Source::Kubeconfig(path.to_owned()), None, T).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_every_kubeconfig_authentication_and_the_url_flags_work() {
    let cluster = RealCluster::start(RealConfig::default()).await.unwrap();
    let token = admin_token(&cluster).await;
    let dir = tempfile::tempdir().unwrap();
    let server = cluster.url();
    let pki = cluster.pki_dir();
    let ca = format!(
        "    certificate-authority-data: {}\n",
        b64(&pki.join("ca.crt"))
    );
    let ca_file = format!(
        "    certificate-authority: {}\n",
        pki.join("ca.crt").display()
    );

    // Client certificate (files, not data).
    let certs = format!(
        "    client-certificate: {}\n    client-key: {}\n",
        pki.join("admin.crt").display(),
        pki.join("admin.key").display()
    );
    can_list(
        via(&kubeconfig(dir.path(), "certs", server, &ca_file, &certs))
            .await
            .unwrap(),
    )
    .await;
    // Bearer token.
    let bearer = format!("    token: {token}\n");
    can_list(
        via(&kubeconfig(dir.path(), "token", server, &ca, &bearer))
            .await
            .unwrap(),
    )
    .await;
    // Token file.
    let token_path = dir.path().join("token");
    std::fs::write(&token_path, &token).unwrap();
    let file = format!("    tokenFile: {}\n", token_path.display());
    can_list(
        via(&kubeconfig(dir.path(), "tokenfile", server, &ca, &file))
            .await
            .unwrap(),
    )
    .await;
    // Exec credential plugin.
    let plugin = dir.path().join("plugin.sh");
    std::fs::write(
        &plugin,
        format!(
            "#!/bin/sh\necho '{{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{{\"token\":\"{token}\"}}}}'\n"
        ),
    )
    .unwrap();
    Command::new("chmod")
        .arg("+x")
        .arg(&plugin)
        .status()
        .unwrap();
    let exec = format!(
        "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: {}\n      interactiveMode: Never\n",
        plugin.display()
    );
    can_list(
        via(&kubeconfig(dir.path(), "exec", server, &ca, &exec))
            .await
            .unwrap(),
    )
    .await;
    // insecure-skip-tls-verify, only because the kubeconfig says so.
    let insecure = "    insecure-skip-tls-verify: true\n";
    can_list(
        via(&kubeconfig(
            dir.path(),
            "insecure",
            server,
            insecure,
            &bearer,
        ))
        .await
        .unwrap(),
    )
    .await;

    // The management cluster by URL: token + CA data, and a token file.
    let pem = std::fs::read_to_string(pki.join("ca.crt")).unwrap();
    let url = UrlCredentials {
        url: server.to_owned(),
        token: Some(token.clone()),
        certificate_authority_data: Some(pem.clone()),
        ..UrlCredentials::default()
    };
    can_list(
        connect("management", &Source::Url(server.into()), Some(&url), T)
            .await
            .unwrap(),
    )
    .await;
    let url_file = UrlCredentials {
        url: server.to_owned(),
        token_file: Some(token_path.clone()),
        certificate_authority_data: Some(pem),
        ..UrlCredentials::default()
    };
    can_list(
        connect(
            "management",
            &Source::Url(server.into()),
            Some(&url_file),
            T,
        )
        .await
        .unwrap(),
    )
    .await;

    // Failures name the cluster, the source and the cause.
    let wrong_ca = format!(
        "    certificate-authority-data: {}\n",
        b64(&pki.join("front-proxy-ca.crt"))
    );
    let path = kubeconfig(dir.path(), "wrong-ca", server, &wrong_ca, &bearer);
    let err = format!("{:#}", via(&path).await.err().unwrap());
    assert!(err.contains(&path.display().to_string()), "{err}");
    assert!(err.contains("cannot reach the API server"), "{err}");
    assert!(
        err.to_lowercase().contains("certificate") || err.contains("UnknownIssuer"),
        "{err}"
    );
    let bad_token = "    token: not-a-token\n";
    let path = kubeconfig(dir.path(), "bad-token", server, &ca, bad_token);
    let err = format!("{:#}", via(&path).await.err().unwrap());
    assert!(err.contains("401") || err.contains("Unauthorized"), "{err}");
    let no_ca_url = UrlCredentials {
        url: server.to_owned(),
        token: Some(token),
        ..UrlCredentials::default()
    };
    let err = format!(
        "{:#}",
        connect(
            "management",
            &Source::Url(server.into()),
            Some(&no_ca_url),
            T
        )
        .await
        .err()
        .unwrap()
    );
    assert!(
        err.contains("management cluster (--cluster-api-url"),
        "{err}"
    );
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .ok()?;
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).await.ok()?;
    let code = out.split(' ').nth(1)?.parse().ok()?;
    Some((code, out))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_run_serves_over_tls_with_a_client_certificate_and_leads() {
    let cluster = RealCluster::start(RealConfig::default()).await.unwrap();
    let admin = cluster.client().await.unwrap();
    world::crds::install_karpenter_crds(&admin).await.unwrap();
    world::crds::install_capi_crds(&admin).await.unwrap();
    served(&admin).await;
    let kc = cluster.kubeconfig_path().display().to_string();
    let (metrics, health) = (free_port(), free_port());
    let child = Command::new(env!("CARGO_BIN_EXE_karpenter-capi"))
        .args(["run", "--kubeconfig", &kc, "--cluster-api-kubeconfig", &kc])
        .args(["--metrics-port", &metrics.to_string()])
        .args(["--health-probe-port", &health.to_string()])
        .args([
            "--leader-election-namespace",
            "default",
            "--log-format",
            "plain",
        ])
        .env_remove("KUBECONFIG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut child = Killed(child);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        if let Some((200, _)) = http_get(health, "/readyz").await {
            break;
        }
        if let Ok(Some(status)) = child.0.try_wait() {
            let mut err = String::new();
            std::io::Read::read_to_string(child.0.stderr.as_mut().unwrap(), &mut err).unwrap();
            panic!("run exited with {status}: {err}");
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "/readyz never 200: {:?}",
            http_get(health, "/readyz").await
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let lease = Api::<Lease>::namespaced(admin.clone(), "default")
        .get("karpenter-leader-election")
        .await
        .unwrap();
    assert!(lease.spec.unwrap().holder_identity.is_some());
    let (code, body) = http_get(metrics, "/metrics").await.unwrap();
    assert_eq!(code, 200);
    assert!(body.contains("karpenter_"), "{body}");
    // SIGTERM: a clean exit that releases the Lease.
    Command::new("kill")
        .args(["-TERM", &child.0.id().to_string()])
        .status()
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.0.try_wait().unwrap() {
            break status;
        }
        assert!(tokio::time::Instant::now() < deadline, "run did not stop");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(status.success(), "{status}");
    let lease = Api::<Lease>::namespaced(admin, "default")
        .get("karpenter-leader-election")
        .await
        .unwrap();
    assert_eq!(lease.spec.unwrap().holder_identity, None);
}

#[test]
fn run_names_the_kubeconfig_when_the_server_is_unreachable() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let path = kubeconfig(
        dir.path(),
        "gone",
        &format!("https://127.0.0.1:{port}"),
        "    insecure-skip-tls-verify: true\n",
        "    token: t\n",
    );
    let out = Command::new(env!("CARGO_BIN_EXE_karpenter-capi"))
        .args(["run", "--kubeconfig", &path.display().to_string()])
        .env_remove("KUBECONFIG")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("workload cluster (kubeconfig"), "{err}");
    assert!(err.contains(&path.display().to_string()), "{err}");
    assert!(err.contains("cannot reach the API server"), "{err}");
}

fn run_replica(kc: &str, metrics: u16, health: u16) -> Killed {
    Killed(
        Command::new(env!("CARGO_BIN_EXE_karpenter-capi"))
            .args(["run", "--kubeconfig", kc, "--cluster-api-kubeconfig", kc])
            .args(["--metrics-port", &metrics.to_string()])
            .args(["--health-probe-port", &health.to_string()])
            .args([
                "--leader-election-namespace",
                "default",
                "--log-format",
                "plain",
            ])
            .env_remove("KUBECONFIG")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

/// Waits until freshly installed CRDs are served from kube-apiserver's watch cache (lists at
/// resourceVersion 0, as watchers make them): their caches start some time after the CRDs,
/// answering 429 "storage is (re)initializing" meanwhile, and the leader's `/readyz` waits
/// for the Cluster API caches.
async fn served(admin: &kube::Client) {
    let started = tokio::time::Instant::now();
    let deadline = started + Duration::from_secs(120);
    let lp = kube::api::ListParams::default().match_any();
    loop {
        let machines = Api::<api::Machine>::all_with(admin.clone(), &api::CapiVersion::v1beta2())
            .list(&lp)
            .await;
        let mds =
            Api::<api::MachineDeployment>::all_with(admin.clone(), &api::CapiVersion::v1beta2())
                .list(&lp)
                .await;
        let classes = Api::<api::ClusterAPINodeClass>::all(admin.clone())
            .list(&lp)
            .await;
        if machines.is_ok() && mds.is_ok() && classes.is_ok() {
            eprintln!("CRDs served after {:?}", started.elapsed());
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "CRDs never served: {:?} {:?} {:?}",
            machines.err(),
            mds.err(),
            classes.err()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn ready(health: u16, what: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !matches!(http_get(health, "/readyz").await, Some((200, _))) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: /readyz never 200: {:?}",
            http_get(health, "/readyz").await
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn holder(admin: &kube::Client) -> Option<String> {
    Api::<Lease>::namespaced(admin.clone(), "default")
        .get_opt("karpenter-leader-election")
        .await
        .unwrap()
        .and_then(|l| l.spec?.holder_identity)
}

/// Issue 11 item 10: a standby replica is ready once its caches listed, so a rolling update
/// of a two-replica Deployment is not deadlocked; it takes over when the leader stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_a_standby_replica_is_ready_and_takes_over() {
    let cluster = RealCluster::start(RealConfig::default()).await.unwrap();
    let admin = cluster.client().await.unwrap();
    world::crds::install_karpenter_crds(&admin).await.unwrap();
    world::crds::install_capi_crds(&admin).await.unwrap();
    served(&admin).await;
    let kc = cluster.kubeconfig_path().display().to_string();
    let (h1, h2) = (free_port(), free_port());
    let first = run_replica(&kc, free_port(), h1);
    ready(h1, "the leader").await;
    let leader = holder(&admin).await.unwrap();
    let _second = run_replica(&kc, free_port(), h2);
    ready(h2, "the standby").await;
    assert_eq!(
        holder(&admin).await.unwrap(),
        leader,
        "the standby does not lead"
    );
    drop(first);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(h) = holder(&admin).await
            && h != leader
        {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the standby never took over"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
