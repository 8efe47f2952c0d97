//! The chart installed with `helm install` into a real kube-apiserver (`sim::realk8s`, its
//! admin kubeconfig) and removed with `helm uninstall`: Helm v4's own Go SDK (the PyPI package
//! `helm-python-sdk`, through `crates/chart-tests/helm.py`) against the real server, default values, release
//! `karpenter` in namespace `karpenter` (created by `--create-namespace`).
//!
//! After the install, every object of the release's manifest (`helm get manifest`) exists on
//! the server — the Deployment, ServiceAccount, metrics Service, PodDisruptionBudget, both
//! ClusterRoles and their bindings, the Lease Role and its binding — and so do the five CRDs
//! of `crds/`; `helm list` shows the release `deployed`. After the uninstall every object of
//! the manifest is gone, and the CRDs stay (Helm never deletes what `crds/` installed; remove
//! them by hand, see the chart README).
//!
//! The Deployment does not run: the harness has no kubelet, no kube-controller-manager (no
//! ReplicaSet is created) and no image. What runs on the server is the chart's objects, not
//! the controller; the controller under this chart's RBAC is `real_chart_rbac`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Service, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject};
use serde_json::Value;
use sim::realk8s::{RealCluster, RealConfig};

const RELEASE: &str = "karpenter";
const NAMESPACE: &str = "karpenter";

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs `helm ARGS` against the cluster of `kubeconfig`, with helm's own state in `home`;
/// returns stdout, failing with stderr when helm fails.
fn helm(home: &Path, kubeconfig: &Path, args: &[&str]) -> String {
    let helm = chart_tests::Helm::find().unwrap_or_else(|e| panic!("{e}"));
    let out = helm
        .command(args)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_DATA_HOME", home.join("data"))
        .env_remove("KUBECONFIG")
        .output()
        .unwrap_or_else(|e| panic!("cannot run helm.py: {e}"));
    assert!(
        out.status.success(),
        "helm {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The YAML documents of a manifest, as JSON values.
fn documents(text: &str) -> Vec<Value> {
    text.split("\n---")
        .filter(|doc| {
            !doc.lines()
                .all(|l| l.trim().is_empty() || l.trim_start().starts_with('#'))
        })
        .map(|doc| {
            serde_norway::from_str(doc).unwrap_or_else(|e| panic!("invalid YAML: {e}\n{doc}"))
        })
        .collect()
}

/// One object of the release: kind, namespace (empty when cluster-scoped) and name.
type Key = (String, String, String);

fn key(doc: &Value) -> Key {
    let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    (
        s(&doc["kind"]),
        s(&doc["metadata"]["namespace"]),
        s(&doc["metadata"]["name"]),
    )
}

/// The API resource of each kind the chart renders (a kind not listed fails the test: add it).
fn resource(kind: &str) -> (ApiResource, bool) {
    match kind {
        "Deployment" => (ApiResource::erase::<Deployment>(&()), true),
        "ServiceAccount" => (ApiResource::erase::<ServiceAccount>(&()), true),
        "Service" => (ApiResource::erase::<Service>(&()), true),
        "PodDisruptionBudget" => (ApiResource::erase::<PodDisruptionBudget>(&()), true),
        "Role" => (ApiResource::erase::<Role>(&()), true),
        "RoleBinding" => (ApiResource::erase::<RoleBinding>(&()), true),
        "ClusterRole" => (ApiResource::erase::<ClusterRole>(&()), false),
        "ClusterRoleBinding" => (ApiResource::erase::<ClusterRoleBinding>(&()), false),
        "CustomResourceDefinition" => (ApiResource::erase::<CustomResourceDefinition>(&()), false),
        other => panic!("the chart renders a {other}: teach this test its API resource"),
    }
}

/// The object `(kind, namespace, name)` on the server, if it exists (and is not deleting).
async fn get(client: &kube::Client, (kind, namespace, name): &Key) -> Option<DynamicObject> {
    let (ar, namespaced) = resource(kind);
    let api: Api<DynamicObject> = if namespaced {
        let ns = if namespace.is_empty() {
            NAMESPACE
        } else {
            namespace
        };
        Api::namespaced_with(client.clone(), ns, &ar)
    } else {
        Api::all_with(client.clone(), &ar)
    };
    api.get_opt(name)
        .await
        .unwrap()
        .filter(|o| o.metadata.deletion_timestamp.is_none())
}

const CRDS: [&str; 5] = [
    "nodepools.karpenter.sh",
    "nodeclaims.karpenter.sh",
    "clusterapinodeclasses.karpenter.cluster.x-k8s.io",
    "nodeoverlays.karpenter.sh",
    "capacitybuffers.autoscaling.x-k8s.io",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_helm_install_creates_the_release_and_uninstall_removes_it() {
    let cluster = RealCluster::start(RealConfig::default()).await.unwrap();
    let admin = cluster.client().await.unwrap();
    let kubeconfig = cluster.kubeconfig_path().to_owned();
    let home = tempfile::tempdir().unwrap();
    let chart = workspace().join("charts/karpenter-capi");
    let chart = chart.to_str().unwrap();

    helm(
        home.path(),
        &kubeconfig,
        &[
            "install",
            RELEASE,
            chart,
            "--namespace",
            NAMESPACE,
            "--create-namespace",
        ],
    );
    let list = helm(
        home.path(),
        &kubeconfig,
        &["list", "--namespace", NAMESPACE, "--output", "json"],
    );
    let list: Value = serde_json::from_str(&list).unwrap();
    assert_eq!(list[0]["name"], RELEASE, "{list}");
    assert_eq!(list[0]["status"], "deployed", "{list}");

    let manifest = helm(
        home.path(),
        &kubeconfig,
        &["get", "manifest", RELEASE, "--namespace", NAMESPACE],
    );
    let objects: Vec<Key> = documents(&manifest).iter().map(key).collect();
    let kinds: BTreeSet<&str> = objects.iter().map(|(k, _, _)| k.as_str()).collect();
    for kind in [
        "Deployment",
        "ServiceAccount",
        "Service",
        "PodDisruptionBudget",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
    ] {
        assert!(
            kinds.contains(kind),
            "no {kind} in the release: {objects:?}"
        );
    }
    let count = |kind: &str| objects.iter().filter(|(k, _, _)| k == kind).count();
    assert_eq!(count("ClusterRole"), 2, "{objects:?}");
    assert_eq!(count("ClusterRoleBinding"), 2, "{objects:?}");
    for object in &objects {
        assert!(
            get(&admin, object).await.is_some(),
            "{object:?} not on the server after helm install"
        );
    }
    let of_kind = |kind: &str| objects.iter().find(|(k, _, _)| k == kind).unwrap();
    let deployment = get(&admin, of_kind("Deployment")).await.unwrap();
    assert_eq!(deployment.data["spec"]["replicas"], 2);
    assert_eq!(
        deployment.data["spec"]["template"]["spec"]["serviceAccountName"].as_str(),
        Some(of_kind("ServiceAccount").2.as_str())
    );
    let crd = |name: &str| {
        (
            "CustomResourceDefinition".into(),
            String::new(),
            name.into(),
        )
    };
    for name in CRDS {
        assert!(
            get(&admin, &crd(name)).await.is_some(),
            "CRD {name} missing"
        );
    }

    helm(
        home.path(),
        &kubeconfig,
        &["uninstall", RELEASE, "--namespace", NAMESPACE],
    );
    // Deletion of these kinds is immediate (no finalizers); waiting only absorbs a slow server.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    for object in &objects {
        while get(&admin, object).await.is_some() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "{object:?} still on the server after helm uninstall"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    let list = helm(
        home.path(),
        &kubeconfig,
        &["list", "--namespace", NAMESPACE, "--output", "json"],
    );
    assert_eq!(
        serde_json::from_str::<Value>(&list).unwrap(),
        Value::Array(vec![])
    );
    for name in CRDS {
        assert!(
            get(&admin, &crd(name)).await.is_some(),
            "CRD {name} removed: helm keeps what crds/ installed"
        );
    }
}
