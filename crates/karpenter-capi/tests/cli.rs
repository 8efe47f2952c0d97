//! The binary's commands as a user runs them.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::process::Command;

fn karpenter_capi(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_karpenter-capi"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn crds_prints_three_parseable_custom_resource_definitions() {
    let out = karpenter_capi(&["crds"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let docs: Vec<serde_json::Value> = serde_norway::Deserializer::from_str(&text)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .collect();
    let kinds: Vec<&str> = docs
        .iter()
        .map(|d| d["spec"]["names"]["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["NodePool", "NodeClaim", "ClusterAPINodeClass"]);
    assert!(docs.iter().all(|d| d["kind"] == "CustomResourceDefinition"));
}

#[test]
fn crds_output_dir_writes_one_file_per_crd() {
    let dir = std::env::temp_dir().join(format!("karpenter-capi-crds-{}", std::process::id()));
    let out = karpenter_capi(&["crds", "--output-dir", dir.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(
        files,
        [
            "karpenter.cluster.x-k8s.io_clusterapinodeclasses.yaml",
            "karpenter.sh_nodeclaims.yaml",
            "karpenter.sh_nodepools.yaml"
        ]
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn version_prints_text_and_json() {
    let out = karpenter_capi(&["version"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("karpenter-capi "));
    let out = karpenter_capi(&["version", "--output", "json"]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["version"], env!("CARGO_PKG_VERSION"));
}

#[test]
fn commands_not_built_yet_say_so_and_fail() {
    for command in ["run", "simulate", "plan"] {
        let out = karpenter_capi(&[command]);
        assert_eq!(out.status.code(), Some(2), "{command} must exit non-zero");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("not implemented yet"),
            "{command}: {stderr}"
        );
        assert!(out.stdout.is_empty(), "{command} printed as if it worked");
    }
}

#[test]
fn bench_scheduling_reports_json_with_the_agreed_keys() {
    let out = karpenter_capi(&[
        "bench",
        "scheduling",
        "--pods",
        "50",
        "--iterations",
        "2",
        "--output",
        "json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["pods"], 50);
    assert_eq!(json["pods_scheduled"], 50, "{json}");
    assert!(
        json["nodeclaims"].as_u64().unwrap() >= 10,
        "10 anti-affinity pods need 10 nodes"
    );
    assert!(json["seconds"].as_f64().unwrap() > 0.0);
    assert!(json["pods_per_sec"].as_f64().unwrap() > 0.0);
    for key in ["min", "mean", "max"] {
        assert!(json["pods_per_nodeclaim"][key].is_number(), "{key}");
    }
}

#[test]
fn bench_scheduling_reads_the_seed_42_table() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/fixtures/bench/diverse-1000-seed42.tsv"
    );
    let out = karpenter_capi(&[
        "bench",
        "scheduling",
        "--pods-file",
        path,
        "--iterations",
        "1",
        "--output",
        "json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["pods"], 1000);
    assert_eq!(json["pods_scheduled"], 1000);
}

#[test]
fn bench_scheduling_needs_a_workload() {
    let out = karpenter_capi(&["bench", "scheduling"]);
    assert!(!out.status.success());
    let out = karpenter_capi(&["bench", "scheduling", "--pods-file", "/nonexistent.tsv"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent.tsv"));
}

#[test]
fn sim_serve_serves_clusters_kubectl_can_use() {
    use std::io::{BufRead, BufReader};
    let dir = std::env::temp_dir().join(format!("karpenter-capi-sim-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let workload = dir.join("workload.kubeconfig");
    let mut child = Command::new(env!("CARGO_BIN_EXE_karpenter-capi"))
        .args(["sim", "serve", "--kubeconfig", workload.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let ready = stdout
        .lines()
        .map_while(Result::ok)
        .any(|line| line.starts_with("ready:"));
    assert!(ready, "sim serve never said it was ready");
    let kubectl = Command::new("kubectl")
        .args([
            "--kubeconfig",
            workload.to_str().unwrap(),
            "get",
            "crd",
            "-o",
            "name",
        ])
        .output();
    child.kill().unwrap();
    child.wait().unwrap();
    match kubectl {
        Err(e) => eprintln!("kubectl not found ({e}); only checked that sim serve starts"),
        Ok(out) => {
            let names = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(names.contains("nodepools.karpenter.sh"), "{names}");
        }
    }
    std::fs::remove_dir_all(dir).unwrap();
}
