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
fn crds_prints_five_parseable_custom_resource_definitions() {
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
    assert_eq!(
        kinds,
        [
            "NodePool",
            "NodeClaim",
            "ClusterAPINodeClass",
            "NodeOverlay",
            "CapacityBuffer"
        ]
    );
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
            "autoscaling.x-k8s.io_capacitybuffers.yaml",
            "karpenter.cluster.x-k8s.io_clusterapinodeclasses.yaml",
            "karpenter.sh_nodeclaims.yaml",
            "karpenter.sh_nodeoverlays.yaml",
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
fn run_names_an_unreadable_kubeconfig() {
    let out = karpenter_capi(&[
        "run",
        "--kubeconfig",
        "/nonexistent/kubeconfig",
        "--log-format",
        "plain",
    ]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("/nonexistent/kubeconfig"), "{stderr}");
    assert_eq!(
        stderr.matches("os error 2").count(),
        1,
        "the OS error once: {stderr}"
    );
}

#[test]
fn run_rejects_a_bad_batch_duration_from_the_environment() {
    let out = Command::new(env!("CARGO_BIN_EXE_karpenter-capi"))
        .args(["run"])
        .env("BATCH_IDLE_DURATION", "soon")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("batch-idle-duration"), "{stderr}");
    assert!(
        stderr.contains("environment variable BATCH_IDLE_DURATION"),
        "the variable to fix is named: {stderr}"
    );
}

/// Go's duration syntax, as upstream's variables take it.
#[test]
fn run_takes_go_durations_from_the_environment() {
    let out = Command::new(env!("CARGO_BIN_EXE_karpenter-capi"))
        .args(["run", "--kubeconfig", "/nonexistent/kubeconfig"])
        .env("BATCH_IDLE_DURATION", "500ms")
        .env("BATCH_MAX_DURATION", "1m30s")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("invalid value"), "{stderr}");
    assert!(
        stderr.contains("/nonexistent/kubeconfig"),
        "it got as far as the kubeconfig: {stderr}"
    );
}

#[test]
fn run_refuses_a_log_level_that_is_not_one() {
    let out = Command::new(env!("CARGO_BIN_EXE_karpenter-capi"))
        .args(["run", "--kubeconfig", "/nonexistent/kubeconfig"])
        .env("LOG_LEVEL", "verbose")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("LOG_LEVEL") && stderr.contains("\"verbose\" is not a level"),
        "{stderr}"
    );
}

#[test]
fn run_refuses_timeouts_that_cannot_work_before_connecting() {
    for (env, value, named) in [
        (
            "REGISTRATION_TIMEOUT",
            "0s",
            "--registration-timeout (REGISTRATION_TIMEOUT)",
        ),
        (
            "MACHINE_CLAIM_TIMEOUT",
            "10m",
            "longer than --launch-timeout",
        ),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_karpenter-capi"))
            .args([
                "run",
                "--kubeconfig",
                "/nonexistent/kubeconfig",
                "--log-format",
                "plain",
            ])
            .env(env, value)
            .output()
            .unwrap();
        assert!(!out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(named), "{env}={value}: {stderr}");
        assert!(!stderr.contains("/nonexistent/kubeconfig"), "{stderr}");
    }
}

#[test]
fn simulate_runs_the_built_in_scenario_to_every_pod_running() {
    let dir = std::env::temp_dir().join(format!("kc-simulate-{}", std::process::id()));
    let out = karpenter_capi(&[
        "simulate",
        "--output",
        "json",
        "--quiet",
        "--kubeconfig-dir",
        dir.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["scenario"], "basic");
    assert_eq!(summary["pods"], summary["podsRunning"]);
    assert_eq!(summary["pods"], 8);
    assert!(summary["nodes"].as_u64().unwrap() >= 1);
    assert!(summary["costPerHour"].as_f64().unwrap() > 0.0);
    assert!(!summary["decisions"].as_array().unwrap().is_empty());
    // After the scale-in, disruption makes the cluster smaller and cheaper, and says how.
    assert!(
        summary["nodes"].as_u64().unwrap() < summary["peakNodes"].as_u64().unwrap(),
        "{summary:#}"
    );
    assert!(
        summary["costPerHour"].as_f64().unwrap() < summary["peakCostPerHour"].as_f64().unwrap(),
        "{summary:#}"
    );
    let disruptions = summary["disruptions"].as_array().unwrap();
    assert!(!disruptions.is_empty(), "{summary:#}");
    assert!(
        disruptions.iter().all(|d| d["outcome"] == "done"
            && !d["nodes"].as_array().unwrap().is_empty()
            && d["reason"].is_string()),
        "{summary:#}"
    );
    assert!(dir.join("workload.kubeconfig").exists());
    std::fs::remove_dir_all(dir).unwrap();
}

/// The JSON summary of `simulate --scenario NAME --instant-infrastructure`, which must succeed.
fn simulate_built_in(name: &str) -> serde_json::Value {
    let out = karpenter_capi(&[
        "simulate",
        "--scenario",
        name,
        "--instant-infrastructure",
        "--output",
        "json",
        "--quiet",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The CapacityBuffer scenario: its steps fail the run unless the buffer makes two warm nodes
/// before any pod, the burst runs, and the buffer gets new warm nodes after it.
#[test]
fn simulate_runs_the_capacity_buffer_scenario() {
    let summary = simulate_built_in("capacity-buffer");
    assert_eq!(summary["scenario"], "capacity-buffer");
    assert_eq!(summary["pods"], 4);
    assert_eq!(summary["podsRunning"], 4);
    assert!(summary["nodes"].as_u64().unwrap() >= 4, "{summary:#}");
    let steps: Vec<&str> = summary["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["step"].as_str().unwrap())
        .collect();
    assert_eq!(steps[0], "wait for 2 Ready nodes (timeout 120s)");
    // The warm-up's NodeClaims were made for virtual pods alone.
    assert!(
        summary["decisions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["pods"] == 0 && d["bufferPods"] == 2 && d["nodeClaims"] == 2),
        "{summary:#}"
    );
}

/// The NodeOverlay scenario: the overlay's discount sends the web tier to the MachineDeployment
/// with the higher list price, and the summary prices every node as the controller does,
/// naming where each price came from.
#[test]
fn simulate_prices_nodes_as_the_controller_does_and_names_the_source() {
    let summary = simulate_built_in("node-overlay");
    assert_eq!(summary["scenario"], "node-overlay");
    assert_eq!(summary["pods"], 8);
    assert_eq!(summary["podsRunning"], 8);
    let groups = summary["nodeGroups"].as_array().unwrap();
    let group = |name: &str| {
        groups
            .iter()
            .find(|g| g["name"] == name)
            .unwrap_or_else(|| panic!("no node group {name}: {summary:#}"))
    };
    let (committed, standard) = (group("default/committed-a"), group("default/standard-a"));
    assert_eq!(committed["kind"], "MachineDeployment");
    // The overlay's 50 % off the 0.240 annotation, not the annotation itself.
    assert!(committed["nodes"].as_u64().unwrap() >= 1, "{summary:#}");
    assert!((committed["pricePerHour"].as_f64().unwrap() - 0.12).abs() < 1e-9);
    assert_eq!(
        committed["priceSource"],
        "NodeOverlay committed-use-discount"
    );
    // The pinned pods' node, priced by the NodeClass's table.
    assert!(standard["nodes"].as_u64().unwrap() >= 1, "{summary:#}");
    assert!((standard["pricePerHour"].as_f64().unwrap() - 0.192).abs() < 1e-9);
    assert_eq!(standard["priceSource"], "nodeclass spec.prices[0]");
    let cost =
        committed["nodes"].as_f64().unwrap() * 0.12 + standard["nodes"].as_f64().unwrap() * 0.192;
    assert!(
        (summary["costPerHour"].as_f64().unwrap() - cost).abs() < 1e-3,
        "{summary:#}"
    );
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
fn bench_scheduling_sizes_report_each_size_with_every_unschedulable_reason() {
    // One 1-CPU instance type: the 1- and 1.5-CPU pods of the diverse workload fit nowhere.
    let args = [
        "bench",
        "scheduling",
        "--sizes",
        "30,60",
        "--instance-types",
        "1",
        "--iterations",
        "1",
    ];
    let out = karpenter_capi(&[&args[..], &["--output", "json"]].concat());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let reports = json.as_array().expect("--sizes gives an array");
    assert_eq!(reports.len(), 2);
    for (report, pods) in reports.iter().zip([30, 60]) {
        assert_eq!(report["pods"], pods);
        let unschedulable = report["pods_unschedulable"].as_u64().unwrap();
        assert!(unschedulable > 0, "{report}");
        let reasons = report["unschedulable_reasons"].as_array().unwrap();
        let counted: u64 = reasons.iter().map(|r| r["pods"].as_u64().unwrap()).sum();
        assert_eq!(
            counted, unschedulable,
            "every unschedulable pod has its reason"
        );
        assert!(
            reasons.iter().all(|r| r["reason"]
                .as_str()
                .unwrap()
                .contains("no instance type has enough")),
            "{reasons:?}"
        );
        if cfg!(target_os = "linux") {
            assert!(report["peak_rss_mib"].as_f64().unwrap() > 0.0);
        }
    }
    let out = karpenter_capi(&args);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("PODS/S") && text.contains("PEAK-RSS-MIB"),
        "{text}"
    );
    assert!(text.contains("unschedulable: nodepool"), "{text}");
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

/// A `sim serve` child with its kubeconfigs in a temporary directory; killed and cleaned up
/// on drop (or by [`Served::stop`]).
struct Served {
    child: std::process::Child,
    dir: std::path::PathBuf,
    workload: std::path::PathBuf,
    management: std::path::PathBuf,
}

impl Served {
    /// Starts `sim serve` and waits until it says it is ready.
    fn start(tag: &str) -> Self {
        use std::io::{BufRead, BufReader};
        let dir = std::env::temp_dir().join(format!("karpenter-capi-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let workload = dir.join("workload.kubeconfig");
        let management = dir.join("management.kubeconfig");
        let mut child = Command::new(env!("CARGO_BIN_EXE_karpenter-capi"))
            .args(["sim", "serve", "--kubeconfig", workload.to_str().unwrap()])
            .args(["--management-kubeconfig", management.to_str().unwrap()])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let ready = stdout
            .lines()
            .map_while(Result::ok)
            .any(|line| line.starts_with("ready:"));
        assert!(ready, "sim serve never said it was ready");
        Self {
            child,
            dir,
            workload,
            management,
        }
    }

    fn workload(&self) -> &str {
        self.workload.to_str().unwrap()
    }

    fn management(&self) -> &str {
        self.management.to_str().unwrap()
    }

    /// Stops the servers (the kubeconfigs stay until drop).
    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn sim_serve_serves_clusters_kubectl_can_use() {
    let mut served = Served::start("sim");
    let kubectl = Command::new("kubectl")
        .args([
            "--kubeconfig",
            served.workload(),
            "get",
            "crd",
            "-o",
            "name",
        ])
        .output();
    served.stop();
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
}

/// `kubectl auth can-i` against `sim serve`: sim has no authorization, so it answers yes (exit
/// 0) to a SelfSubjectAccessReview, and `--list` shows the `*` rules of a SelfSubjectRulesReview.
#[test]
fn sim_serve_answers_kubectl_auth_can_i() {
    let mut served = Served::start("can-i");
    let kubectl = |args: &[&str]| {
        Command::new("kubectl")
            .args(["--kubeconfig", served.workload(), "auth", "can-i"])
            .args(args)
            .output()
    };
    let create = kubectl(&["create", "pods"]);
    let list = kubectl(&["--list"]);
    served.stop();
    match (create, list) {
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("kubectl not found ({e}); only checked that sim serve starts");
        }
        (Ok(create), Ok(list)) => {
            let stderr = |o: &std::process::Output| String::from_utf8_lossy(&o.stderr).into_owned();
            assert_eq!(create.status.code(), Some(0), "{}", stderr(&create));
            assert_eq!(String::from_utf8_lossy(&create.stdout).trim(), "yes");
            assert_eq!(list.status.code(), Some(0), "{}", stderr(&list));
            let rules = String::from_utf8_lossy(&list.stdout);
            assert!(
                rules
                    .lines()
                    .any(|l| l.starts_with("*.*") && l.trim_end().ends_with("[*]")),
                "{rules}"
            );
        }
    }
}

/// `doctor` against `sim serve`: an installation without a NodePool is blocked (exit 1, the
/// JSON names the finding); a cluster that cannot be reached is exit 2, naming the kubeconfig.
#[test]
fn doctor_reports_blockers_with_its_exit_status() {
    let mut served = Served::start("doctor");
    let out = karpenter_capi(&[
        "doctor",
        "--kubeconfig",
        served.workload(),
        "--cluster-api-kubeconfig",
        served.management(),
        "--output",
        "json",
    ]);
    // Cluster API's short names and category, as on a real management cluster.
    let kubectl = Command::new("kubectl")
        .args(["--kubeconfig", served.management()])
        .args(["get", "md,ms,ma", "-A"])
        .output();
    let category = Command::new("kubectl")
        .args(["--kubeconfig", served.management()])
        .args(["get", "cluster-api", "-A"])
        .output();
    // And a custom resource's schema, from OpenAPI v3.
    let explain = Command::new("kubectl")
        .args(["--kubeconfig", served.workload()])
        .args(["explain", "nodepool.spec.disruption.consolidateAfter"])
        .output();
    // And a built-in kind's, from the Kubernetes OpenAPI.
    let explain_builtin = Command::new("kubectl")
        .args(["--kubeconfig", served.workload()])
        .args([
            "explain",
            "deployment.spec.template.spec.containers.resources",
        ])
        .output();
    served.stop();
    match (kubectl, category) {
        (Ok(short), Ok(category)) => {
            assert!(
                short.status.success(),
                "{}",
                String::from_utf8_lossy(&short.stderr)
            );
            assert!(
                category.status.success(),
                "{}",
                String::from_utf8_lossy(&category.stderr)
            );
        }
        (Err(e), _) | (_, Err(e)) => eprintln!("kubectl not found ({e}); short names not checked"),
    }
    if let Ok(explain) = explain {
        let text = String::from_utf8_lossy(&explain.stdout);
        assert!(
            explain.status.success(),
            "{}",
            String::from_utf8_lossy(&explain.stderr)
        );
        assert!(text.contains("FIELD: consolidateAfter <string>"), "{text}");
    }
    if let Ok(explain) = explain_builtin {
        let text = String::from_utf8_lossy(&explain.stdout);
        assert!(
            explain.status.success(),
            "{}",
            String::from_utf8_lossy(&explain.stderr)
        );
        assert!(
            text.contains("FIELD: resources <ResourceRequirements>") && text.contains("limits"),
            "{text}"
        );
    }
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["ok"], false);
    assert!(
        report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["code"] == "no-nodepools" && f["severity"] == "blocker"),
        "{report}"
    );
    // The server is gone now.
    let out = karpenter_capi(&["doctor", "--kubeconfig", served.workload()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("workload cluster") && err.contains("workload.kubeconfig"),
        "{err}"
    );
}

fn fixture(name: &str) -> String {
    format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn plan_json(args: &[&str]) -> serde_json::Value {
    let out = karpenter_capi(args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn pods_of(value: &serde_json::Value) -> Vec<&str> {
    value["pods"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect()
}

#[test]
fn plan_basic_dump_decides_like_the_provisioner() {
    let path = fixture("plan-basic.yaml");
    let plan = plan_json(&["plan", "-f", &path, "--output", "json"]);
    let keys: Vec<&String> = plan.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "bindings",
            "disruption",
            "nodeClaims",
            "notes",
            "unschedulable"
        ]
    );
    assert_eq!(
        plan["disruption"],
        serde_json::json!({"commands": [], "nodes": []}),
        "the dump's only node is not ours"
    );

    // web-1 fits the existing worker (2 cpu - 1 cpu bound - 100m daemon overhead).
    assert_eq!(plan["bindings"].as_array().unwrap().len(), 1);
    assert_eq!(plan["bindings"][0]["node"], "worker-1");
    assert_eq!(pods_of(&plan["bindings"][0]), ["default/web-1"]);

    let claims = plan["nodeClaims"].as_array().unwrap();
    assert_eq!(claims.len(), 2, "{plan:#}");
    assert!(claims.iter().all(|c| c["nodePool"] == "general"));
    // The small shape exists in zone-a (0.10) and zone-b (0.12): the cheaper MD backs it.
    let small = claims
        .iter()
        .find(|c| c["instanceType"] == "small")
        .unwrap();
    assert_eq!(small["machineDeployment"], "capi/small-a");
    assert_eq!(small["zone"], "zone-a");
    assert_eq!(small["price"], 0.1);
    assert_eq!(small["capacityType"], "on-demand");
    // The large shape's capacity comes from its DockerMachineTemplate's status.
    let large = claims
        .iter()
        .find(|c| c["instanceType"] == "large")
        .unwrap();
    assert_eq!(large["machineDeployment"], "capi/large-b");
    assert_eq!(large["zone"], "zone-b");
    // Every pending, valid pod except huge-1 is placed exactly once.
    let mut placed: Vec<&str> = claims.iter().flat_map(pods_of).collect();
    placed.sort_unstable();
    assert_eq!(
        placed,
        ["default/batch-1", "default/spread-1", "default/spread-2"]
    );
    // The zone spread puts the two spread pods in different zones.
    let zone_of = |pod: &str| {
        claims
            .iter()
            .find(|c| pods_of(c).contains(&pod))
            .map(|c| c["zone"].as_str().unwrap().to_owned())
            .unwrap()
    };
    assert_ne!(zone_of("default/spread-1"), zone_of("default/spread-2"));

    let unschedulable: Vec<(&str, &str)> = plan["unschedulable"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| (u["pod"].as_str().unwrap(), u["reason"].as_str().unwrap()))
        .collect();
    assert_eq!(unschedulable.len(), 3, "{unschedulable:?}");
    let reason = |pod: &str| {
        unschedulable
            .iter()
            .find(|(p, _)| *p == pod)
            .map(|(_, r)| *r)
            .unwrap()
    };
    assert!(reason("default/huge-1").contains("no instance type has enough resources"));
    assert!(reason("default/avoid-1").contains("karpenter.sh/nodepool DoesNotExist"));
    assert!(reason("default/pinned-1").contains("kubernetes.io/hostname is not allowed"));
}

/// `plan` explains disruption: the next command (emptiness) and, for each managed node, whether
/// it could go and what holds the others (a PDB, a do-not-disrupt pod, nothing cheaper).
#[test]
fn plan_explains_which_nodes_disruption_could_remove_and_why_not_the_others() {
    let path = fixture("plan-disruption.yaml");
    let plan = plan_json(&["plan", "-f", &path, "--output", "json"]);
    let d = &plan["disruption"];
    assert_eq!(d["commands"].as_array().unwrap().len(), 1, "{d:#}");
    assert_eq!(d["commands"][0]["method"], "emptiness");
    assert_eq!(d["commands"][0]["nodes"], serde_json::json!(["empty-1"]));
    let verdicts: Vec<(&str, &str, &str)> = d["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["node"].as_str().unwrap(),
                n["verdict"].as_str().unwrap(),
                n["reason"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(verdicts.len(), 5, "{d:#}");
    let of = |node: &str| *verdicts.iter().find(|v| v.0 == node).unwrap();
    assert_eq!(of("empty-1").1, "delete");
    assert_eq!(of("half-1").1, "delete");
    assert!(of("half-1").2.contains("after the next command"), "{d:#}");
    assert_eq!(of("guarded-1").1, "keep");
    assert!(of("guarded-1").2.contains("default/guarded"), "{d:#}");
    assert_eq!(of("pinned-1").1, "keep");
    assert!(of("pinned-1").2.contains("do-not-disrupt"), "{d:#}");
    assert_eq!(of("full-1").1, "keep");
    assert!(of("full-1").2.contains("cheaper"), "{d:#}");

    let table = karpenter_capi(&["plan", "-f", &path]);
    let stdout = String::from_utf8_lossy(&table.stdout);
    assert!(
        stdout.contains("Disruption, next command: emptiness delete empty-1"),
        "{stdout}"
    );
}

/// With `--feature-gates NodeOverlay=true` the dump's NodeOverlays change prices as in the
/// controller, and each NodeClaim names where its price came from; without the gate they are
/// noted and left out.
#[test]
fn plan_applies_node_overlays_behind_their_gate_and_names_the_price_source() {
    let basic = std::fs::read_to_string(fixture("plan-basic.yaml")).unwrap();
    let dump = format!(
        "{basic}\n---\napiVersion: karpenter.sh/v1alpha1\nkind: NodeOverlay\n\
         metadata: {{name: cheaper-a}}\nspec:\n  price: \"0.01\"\n  requirements:\n\
         \x20 - {{key: node.kubernetes.io/instance-type, operator: In, values: [small]}}\n\
         \x20 - {{key: topology.kubernetes.io/zone, operator: In, values: [zone-a]}}\n"
    );
    let path = std::env::temp_dir().join(format!("plan-overlay-{}.yaml", std::process::id()));
    std::fs::write(&path, dump).unwrap();
    let path = path.to_str().unwrap();
    let sources = |plan: &serde_json::Value| -> Vec<(String, String, f64)> {
        plan["nodeClaims"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["instanceType"] == "small")
            .map(|c| {
                (
                    c["machineDeployment"].as_str().unwrap().to_owned(),
                    c["priceSource"].as_str().unwrap().to_owned(),
                    c["price"].as_f64().unwrap(),
                )
            })
            .collect()
    };
    let off = plan_json(&["plan", "-f", path, "-o", "json"]);
    assert_eq!(
        sources(&off),
        [("capi/small-a".to_owned(), "annotation".to_owned(), 0.1)],
        "{off:#}"
    );
    assert!(
        off["notes"].as_array().unwrap().iter().any(|n| n
            .as_str()
            .unwrap()
            .contains("1 NodeOverlay(s) in the dump not applied: the NodeOverlay gate is off")),
        "{off:#}"
    );
    let on = plan_json(&[
        "plan",
        "-f",
        path,
        "-o",
        "json",
        "--feature-gates",
        "NodeOverlay=true",
    ]);
    assert_eq!(
        sources(&on),
        [(
            "capi/small-a".to_owned(),
            "NodeOverlay cheaper-a".to_owned(),
            0.01
        )],
        "{on:#}"
    );
    let table = karpenter_capi(&["plan", "-f", path, "--feature-gates", "NodeOverlay=true"]);
    let table = String::from_utf8(table.stdout).unwrap();
    assert!(table.contains("PRICE-SOURCE"), "{table}");
    assert!(table.contains("NodeOverlay cheaper-a"), "{table}");
    let _ = std::fs::remove_file(path);
}

#[test]
fn plan_prints_a_table_and_notes_skipped_kinds() {
    let path = fixture("plan-basic.yaml");
    let out = karpenter_capi(&["plan", "-f", &path]);
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    // The notes explain the table: first, on the same stream.
    let table = stdout.find("NodeClaims to create: 2").unwrap();
    let note = stdout.find("ConfigMap unrelated").unwrap();
    assert!(note < table, "{stdout}");
    assert!(stdout.contains("capi/small-a"), "{stdout}");
    assert!(stdout.contains("Unschedulable pods: 3"), "{stdout}");
    let json = plan_json(&["plan", "-f", &path, "-o", "json"]);
    assert!(
        json["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().contains("ConfigMap unrelated")),
        "{json}"
    );
}

#[test]
fn plan_with_the_production_predicate_only_considers_unschedulable_pods() {
    let path = fixture("plan-basic.yaml");
    let plan = plan_json(&[
        "plan",
        "-f",
        &path,
        "-o",
        "json",
        "--require-unschedulable-condition",
    ]);
    assert!(plan["nodeClaims"].as_array().unwrap().is_empty());
    assert!(plan["unschedulable"].as_array().unwrap().is_empty());
    assert_eq!(pods_of(&plan["bindings"][0]), ["default/web-1"]);
}

#[test]
fn plan_scoped_to_another_cluster_has_no_instance_types() {
    let path = fixture("plan-basic.yaml");
    let plan = plan_json(&["plan", "-f", &path, "-o", "json", "--cluster-name", "other"]);
    assert!(plan["nodeClaims"].as_array().unwrap().is_empty());
    // web-1 still fits the existing node; the others get the scheduler's reason.
    assert_eq!(plan["bindings"].as_array().unwrap().len(), 1);
    assert_eq!(plan["unschedulable"].as_array().unwrap().len(), 6);
}

#[test]
fn plan_reads_stdin_and_rejects_malformed_documents() {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_karpenter-capi"))
        .args(["plan", "-f", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(
            b"apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\n\
              apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: 3}\n",
        )
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("document 1 (Pod p)"), "{stderr}");
    assert!(stderr.contains("spec.containers"), "{stderr}");
}

#[test]
fn bench_sim_creates_and_watches_everything() {
    let out = karpenter_capi(&[
        "bench",
        "sim",
        "--pods",
        "200",
        "--nodes",
        "20",
        "--watchers",
        "5",
        "--output",
        "json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["pods"], 200);
    assert_eq!(json["watchers"], 5);
    assert!(json["watch_events_per_sec"].as_f64().unwrap() > 0.0);
}

#[test]
fn bench_disruption_reports_the_pass_and_the_command_as_json() {
    let out = karpenter_capi(&[
        "bench",
        "disruption",
        "--nodes",
        "40",
        "--pods-per-node",
        "5",
        "--output",
        "json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["nodes"], 40);
    assert_eq!(json["pods"], 200);
    assert!(json["shapes"].as_u64().unwrap() >= 20);
    assert_eq!(json["candidates"], 40);
    assert!(json["meanSeconds"].as_f64().unwrap() > 0.0);
    // Each node is a third full: some nodes can go.
    assert!(json["command"]["nodes"].as_u64().unwrap() >= 1, "{json:#}");
}

/// `docs/configuration.md` lists exactly the flags and environment variables of `run`.
#[test]
fn the_configuration_reference_lists_every_run_flag() {
    let help = String::from_utf8(karpenter_capi(&["run", "--help"]).stdout).unwrap();
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/configuration.md"
    ))
    .unwrap();
    let mut flags = Vec::new();
    let mut envs = Vec::new();
    for line in help.lines().map(str::trim) {
        if let Some(flag) = line.strip_prefix("--") {
            let name = flag.split([' ', '<']).next().unwrap();
            flags.push(format!("--{name}"));
        }
        if let Some(rest) = line.strip_prefix("[env: ") {
            envs.push(rest.split(['=', ']']).next().unwrap().to_owned());
        }
    }
    assert!(
        flags.len() > 20 && envs.len() == flags.len(),
        "{flags:?} {envs:?}"
    );
    for name in flags.iter().chain(&envs) {
        assert!(
            doc.contains(&format!("`{name}`")),
            "docs/configuration.md lacks {name}"
        );
    }
    let documented: Vec<&str> = doc
        .lines()
        .filter_map(|l| l.strip_prefix("| `--"))
        .filter_map(|l| l.split('`').next())
        .collect();
    for name in &documented {
        assert!(
            flags.contains(&format!("--{name}")),
            "docs/configuration.md documents --{name}, which run does not have"
        );
    }
    assert_eq!(documented.len(), flags.len());
}
