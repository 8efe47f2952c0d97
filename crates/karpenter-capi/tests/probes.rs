//! `run`'s probes ([`karpenter_capi::probes`]) over real TCP, wired as `run` wires them, on
//! `sim` and on a real kube-apiserver (`NAME::real`): `/readyz` is 503 naming the CRDs that
//! are not served (and the caches that have not listed) until they are, and 503 again when one
//! is deleted; `/healthz` is 500 naming a controller task or a watch that stopped.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::sync::Arc;
use std::time::Duration;

use controllers::metrics::Metrics;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use karpenter_capi::operator::{Caches, Operator, OperatorConfig};
use karpenter_capi::probes::{CrdCheckConfig, Probes};
use kube::api::{Api, DeleteParams};
use sim::realk8s::{RealCluster, RealConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use world::Backend;

/// Status and body of `GET path`.
async fn get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    let (head, body) = out.split_once("\r\n\r\n").unwrap();
    (
        head.split(' ').nth(1).unwrap().parse().unwrap(),
        body.to_owned(),
    )
}

/// Polls `GET path` until `done` holds for its answer (bounded; the last answer in the
/// failure message).
async fn until(
    addr: std::net::SocketAddr,
    path: &str,
    what: &str,
    done: impl Fn(u16, &str) -> bool,
) -> (u16, String) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        let (code, body) = get(addr, path).await;
        if done(code, &body) {
            return (code, body);
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: last {path} answer {code} {body:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The servers of one test: two `sim`s, or one real kube-apiserver serving as both clusters.
enum Servers {
    Sim(sim::Sim, sim::Sim),
    Real(RealCluster),
}

impl Servers {
    async fn start(backend: Backend) -> Self {
        match backend {
            Backend::Sim => Servers::Sim(
                sim::Sim::new(sim::SimConfig::default()),
                sim::Sim::new(sim::SimConfig::default()),
            ),
            Backend::Real => {
                Servers::Real(RealCluster::start(RealConfig::default()).await.unwrap())
            }
        }
    }

    async fn clients(&self) -> (kube::Client, kube::Client) {
        match self {
            Servers::Sim(w, m) => (
                kube::Client::new(w.router(), "default"),
                kube::Client::new(m.router(), "default"),
            ),
            Servers::Real(c) => {
                let client = c.client().await.unwrap();
                (client.clone(), client)
            }
        }
    }
}

async fn readiness_names_missing_crds_and_healthz_names_a_stopped_task(backend: Backend) {
    let servers = Servers::start(backend).await;
    let (workload, management) = servers.clients().await;
    let metrics = Arc::new(Metrics::new());
    let probes = Probes::new();
    let addr = probes
        .serve("127.0.0.1:0".parse().unwrap(), Arc::clone(&metrics))
        .await
        .unwrap();
    probes.spawn_crd_check(
        workload.clone(),
        management.clone(),
        api::CapiVersion::v1beta2(),
        CrdCheckConfig {
            retry: Duration::from_millis(50),
            recheck: Duration::from_millis(50),
            // The gates on: NodeOverlays and CapacityBuffers are required too.
            node_overlay: true,
            capacity_buffer: true,
        },
    );
    let caches = Caches::start(&workload);
    probes.watch_caches(&caches);
    let listed = probes.wait_listed(&caches, Duration::from_secs(300));

    // No CRD anywhere: not ready, every missing one named with its cluster; alive.
    let (code, body) = until(addr, "/readyz", "the missing CRDs named", |_, b| {
        !b.contains("not checked yet")
    })
    .await;
    assert_eq!(code, 503, "{body}");
    assert!(
        body.starts_with("caches not synced yet; CRDs not served: "),
        "{body}"
    );
    for missing in [
        "nodepools.karpenter.sh/v1 (workload cluster)",
        "nodeclaims.karpenter.sh/v1 (workload cluster)",
        "clusterapinodeclasses.karpenter.cluster.x-k8s.io/v1alpha1 (workload cluster)",
        "nodeoverlays.karpenter.sh/v1alpha1 (workload cluster)",
        "capacitybuffers.autoscaling.x-k8s.io/v1beta1 (workload cluster)",
        "machines.cluster.x-k8s.io/v1beta2 (management cluster)",
        "machinesets.cluster.x-k8s.io/v1beta2 (management cluster)",
        "machinedeployments.cluster.x-k8s.io/v1beta2 (management cluster)",
    ] {
        assert!(body.contains(missing), "{missing} not in {body}");
    }
    assert_eq!(get(addr, "/healthz").await, (200, "ok".to_owned()));

    // The workload CRDs only: the management cluster's are still named.
    world::crds::install_karpenter_crds(&workload)
        .await
        .unwrap();
    let (_, body) = until(addr, "/readyz", "the workload CRDs served", |_, b| {
        !b.contains("workload cluster")
    })
    .await;
    assert!(
        body.contains("machines.cluster.x-k8s.io/v1beta2 (management cluster)"),
        "{body}"
    );
    world::crds::install_capi_crds(&management).await.unwrap();
    listed.await.unwrap().unwrap();
    until(addr, "/readyz", "ready", |code, _| code == 200).await;

    // A CRD deleted later: not ready again, naming it.
    Api::<CustomResourceDefinition>::all(management.clone())
        .delete("machinesets.cluster.x-k8s.io", &DeleteParams::default())
        .await
        .unwrap();
    let (_, body) = until(addr, "/readyz", "the deleted CRD named", |code, _| {
        code == 503
    })
    .await;
    assert_eq!(
        body,
        "CRDs not served: machinesets.cluster.x-k8s.io/v1beta2 (management cluster)"
    );

    // The leader's controllers: alive while they run; one that stops is named.
    let operator = Operator::start_with_caches(
        caches,
        workload,
        management,
        OperatorConfig::default(),
        metrics,
    );
    probes.watch_operator(&operator);
    assert_eq!(get(addr, "/healthz").await, (200, "ok".to_owned()));
    let tasks = operator.tasks();
    let names: Vec<&str> = tasks.iter().map(|(n, _)| n.as_str()).collect();
    for name in ["provisioner", "disruption", "Machine watch (provider)"] {
        assert!(names.contains(&name), "{name} not in {names:?}");
    }
    let (_, provisioner) = tasks.iter().find(|(n, _)| n == "provisioner").unwrap();
    provisioner.abort();
    let (code, body) = until(addr, "/healthz", "the stopped task named", |code, _| {
        code != 200
    })
    .await;
    assert_eq!((code, body.as_str()), (500, "tasks stopped: provisioner"));
    // Dropping the operator stops every controller (as at shutdown): all are named. Aborted
    // tasks end one by one, so wait for every name, not for the first few.
    let every: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
    drop(operator);
    let (_, body) = until(addr, "/healthz", "every task named", |_, b| {
        every.iter().all(|n| b.contains(n.as_str()))
    })
    .await;
    assert!(body.contains("provisioner, nodeclaim lifecycle"), "{body}");
}

world::backend_tests!(readiness_names_missing_crds_and_healthz_names_a_stopped_task);
