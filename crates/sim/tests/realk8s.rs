//! The real-API-server harness: it starts, serves TLS with client certificates, and stops
//! every process when dropped (also when the test panics).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::api::{Api, ListParams};
use sim::realk8s::{RealCluster, RealConfig};

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| !s.contains(") Z "))
        .unwrap_or(false)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_cluster_serves_tls_and_stops_on_drop() {
    let cluster = RealCluster::start(RealConfig::default()).await.unwrap();
    assert!(cluster.url().starts_with("https://127.0.0.1:"));
    let client = cluster.client().await.unwrap();
    let version = client.apiserver_version().await.unwrap();
    assert_eq!(
        version
            .git_version
            .trim_start_matches('v')
            .split('.')
            .take(2)
            .collect::<Vec<_>>(),
        ["1", "36"]
    );
    let namespaces: Vec<String> = Api::<Namespace>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    assert!(
        namespaces.iter().any(|n| n == "kube-system"),
        "{namespaces:?}"
    );
    Api::<ServiceAccount>::namespaced(client, "default")
        .get("default")
        .await
        .unwrap();
    let pids = cluster.pids();
    assert_eq!(pids.len(), 2, "etcd and kube-apiserver");
    let dir = cluster.dir().to_path_buf();
    drop(cluster);
    for pid in pids {
        assert!(!alive(pid), "process {pid} still runs after drop");
    }
    assert!(!dir.exists(), "{} left behind", dir.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_cluster_stops_when_the_test_panics() {
    let pids = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = std::sync::Arc::clone(&pids);
    let outcome = tokio::spawn(async move {
        let cluster = RealCluster::start(RealConfig::default()).await.unwrap();
        *seen.lock().unwrap() = cluster.pids();
        panic!("a failing test");
    })
    .await;
    assert!(outcome.unwrap_err().is_panic());
    let pids = pids.lock().unwrap().clone();
    assert_eq!(pids.len(), 2);
    for pid in pids {
        assert!(!alive(pid), "process {pid} still runs after the panic");
    }
}

fn start_time(pid: u32) -> String {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let (_, after) = stat.rsplit_once(')').unwrap();
    after.split_whitespace().nth(19).unwrap().to_owned()
}

/// A test killed outright (no `Drop`) leaves its processes running: the next start stops
/// them — only those whose pid and start time were recorded — and removes their directory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_a_start_stops_the_processes_of_a_dead_test() {
    let mut gone_owner = std::process::Command::new("true").spawn().unwrap();
    let owner_pid = gone_owner.id();
    let owner_started = start_time(owner_pid);
    gone_owner.wait().unwrap();
    let mut leaked = std::process::Command::new("sleep")
        .arg("300")
        .spawn()
        .unwrap();
    let mut bystander = std::process::Command::new("sleep")
        .arg("300")
        .spawn()
        .unwrap();
    let dir = tempfile::Builder::new()
        .prefix("realk8s-")
        .tempdir_in("/dev/shm")
        .unwrap()
        .keep();
    std::fs::write(dir.join("owner"), format!("{owner_pid} {owner_started}\n")).unwrap();
    std::fs::write(
        dir.join("pids"),
        format!("{} {}\n", leaked.id(), start_time(leaked.id())),
    )
    .unwrap();
    let cluster = RealCluster::start(RealConfig::default()).await.unwrap();
    assert!(
        leaked.try_wait().unwrap().is_some(),
        "the leaked process was stopped"
    );
    assert!(!dir.exists(), "its directory was removed");
    assert!(
        bystander.try_wait().unwrap().is_none(),
        "nothing else was touched"
    );
    assert!(cluster.dir().exists(), "the new cluster keeps its own");
    let _ = bystander.kill();
    let _ = bystander.wait();
}
