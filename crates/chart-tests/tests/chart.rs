//! The Helm chart `charts/karpenter-capi`, rendered and linted by Helm's own Go SDK (v4, the
//! PyPI package `helm-python-sdk` through `helm.py`; see the crate's docs — a missing package
//! fails every test, saying how to install it) over a matrix of values, and checked object by object: the Deployment's security
//! context, probes, ports, replicas and leader election; that every setting it passes is one
//! `karpenter-capi run` reads (the list here is checked against `run_cmd.rs`); the management
//! kubeconfig mount; which RBAC objects each mode renders; namespaces; CRDs only in `crds/`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::collections::BTreeSet;
use std::path::PathBuf;

use karpenter_capi_chart_tests::{Helm, workspace};
use serde_json::{Value, json};

const RELEASE: &str = "karpenter-capi";
const NAMESPACE: &str = "karpenter";
const KUBE_VERSION: &str = "1.33.0";

/// The environment variables `karpenter-capi run` reads (its flags' env fallbacks, as
/// `run --help` lists them); [`known_settings_match_run_cmd`] keeps this in step with the code.
const RUN_ENV: &[&str] = &[
    "KUBECONFIG",
    "CLUSTER_API_KUBECONFIG",
    "CLUSTER_API_URL",
    "CLUSTER_API_TOKEN",
    "CLUSTER_API_TOKEN_FILE",
    "CLUSTER_API_CERTIFICATE_AUTHORITY_DATA",
    "CLUSTER_API_SKIP_TLS_VERIFY",
    "CLUSTER_NAME",
    "CLUSTER_API_NAMESPACE",
    "CAPI_GROUP",
    "CAPI_VERSION",
    "BATCH_IDLE_DURATION",
    "BATCH_MAX_DURATION",
    "PREFERENCE_POLICY",
    "MIN_VALUES_POLICY",
    "LOG_LEVEL",
    "LOG_FORMAT",
    "METRICS_PORT",
    "HEALTH_PROBE_PORT",
    "DISABLE_LEADER_ELECTION",
    "LEADER_ELECTION_NAME",
    "LEADER_ELECTION_NAMESPACE",
    "KUBE_CLIENT_QPS",
    "KUBE_CLIENT_BURST",
    "LAUNCH_TIMEOUT",
    "REGISTRATION_TIMEOUT",
    "MACHINE_CLAIM_TIMEOUT",
    "MACHINE_REMOVAL_ESCALATION",
    "REPLACEMENT_TIMEOUT",
    "UNCLAIMED_MACHINE_GRACE",
    "FEATURE_GATES",
    "NODE_REPAIR_POLICIES",
    "NODE_REPAIR_NODE_DELETED_TOLERATION",
];

/// The long flags of `karpenter-capi run`.
const RUN_FLAGS: &[&str] = &[
    "--kubeconfig",
    "--cluster-api-kubeconfig",
    "--cluster-api-url",
    "--cluster-api-token",
    "--cluster-api-token-file",
    "--cluster-api-certificate-authority-data",
    "--cluster-api-skip-tls-verify",
    "--cluster-name",
    "--cluster-api-namespace",
    "--capi-group",
    "--capi-version",
    "--batch-idle-duration",
    "--batch-max-duration",
    "--preference-policy",
    "--min-values-policy",
    "--log-level",
    "--log-format",
    "--metrics-port",
    "--health-probe-port",
    "--disable-leader-election",
    "--leader-election-name",
    "--leader-election-namespace",
    "--kube-client-qps",
    "--kube-client-burst",
    "--launch-timeout",
    "--registration-timeout",
    "--machine-claim-timeout",
    "--machine-removal-escalation",
    "--replacement-timeout",
    "--unclaimed-machine-grace",
    "--feature-gates",
    "--node-repair-policies",
    "--node-repair-node-deleted-toleration",
];

/// Kinds without a namespace.
const CLUSTER_SCOPED: &[&str] = &[
    "ClusterRole",
    "ClusterRoleBinding",
    "CustomResourceDefinition",
];

fn chart() -> PathBuf {
    workspace().join("charts/karpenter-capi")
}

/// Runs helm; returns (success, stdout, stderr).
fn run_helm(args: &[&str]) -> (bool, String, String) {
    let helm = Helm::find().unwrap_or_else(|e| panic!("{e}"));
    let out = helm.run(args).unwrap_or_else(|e| panic!("{e}"));
    (out.ok, out.stdout, out.stderr)
}

/// The documents of a multi-document YAML stream (comments and empty documents dropped).
fn documents(yaml: &str) -> Vec<Value> {
    let mut docs = Vec::new();
    let mut current = String::new();
    let mut flush = |text: &mut String| {
        let has_content = text
            .lines()
            .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'));
        if has_content {
            let doc: Value = serde_norway::from_str(text)
                .unwrap_or_else(|e| panic!("invalid YAML document: {e}\n{text}"));
            docs.push(doc);
        }
        text.clear();
    };
    for line in yaml.lines() {
        if line == "---" {
            flush(&mut current);
        } else {
            current.push_str(line);
            current.push('\n');
        }
    }
    flush(&mut current);
    docs
}

/// `helm template` of the chart with `extra` arguments (`--set ...`, `--include-crds`).
fn try_render(extra: &[&str]) -> Result<Vec<Value>, String> {
    let helm = Helm::find().unwrap_or_else(|e| panic!("{e}"));
    helm.template(RELEASE, NAMESPACE, extra)
        .map(|stdout| documents(&stdout))
}

fn render(extra: &[&str]) -> Vec<Value> {
    try_render(extra).unwrap_or_else(|e| panic!("helm template {extra:?} failed:\n{e}"))
}

fn kind(o: &Value) -> &str {
    o["kind"].as_str().unwrap_or_default()
}

fn name(o: &Value) -> &str {
    o["metadata"]["name"].as_str().unwrap_or_default()
}

fn kinds(objects: &[Value]) -> BTreeSet<String> {
    objects.iter().map(|o| kind(o).to_owned()).collect()
}

fn only<'a>(objects: &'a [Value], k: &str) -> &'a Value {
    let found: Vec<_> = objects.iter().filter(|o| kind(o) == k).collect();
    assert_eq!(
        found.len(),
        1,
        "expected exactly one {k}, found {}",
        found.len()
    );
    found[0]
}

fn named<'a>(objects: &'a [Value], k: &str, n: &str) -> Option<&'a Value> {
    objects.iter().find(|o| kind(o) == k && name(o) == n)
}

fn container(objects: &[Value]) -> &Value {
    let containers = only(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
        .as_array()
        .expect("containers");
    assert_eq!(containers.len(), 1, "one container");
    &containers[0]
}

/// The container's env as (name, value); `valueFrom` entries have value `None`.
fn env(objects: &[Value]) -> Vec<(String, Option<String>)> {
    container(objects)["env"]
        .as_array()
        .map(|env| {
            env.iter()
                .map(|e| {
                    (
                        e["name"].as_str().unwrap().to_owned(),
                        e["value"].as_str().map(str::to_owned),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn env_value(objects: &[Value], key: &str) -> Option<String> {
    env(objects)
        .into_iter()
        .find(|(k, _)| k == key)
        .and_then(|(_, v)| v)
}

/// The matrix every invariant is checked over: (description, helm arguments).
fn matrix() -> Vec<(&'static str, Vec<&'static str>)> {
    vec![
        ("defaults", vec![]),
        (
            "kubeconfigSecret",
            vec![
                "--set",
                "clusterAPI.kubeconfigSecret.name=mgmt",
                "--set",
                "clusterAPI.kubeconfigSecret.key=value",
            ],
        ),
        (
            "managementRBACOnly",
            vec!["--set", "clusterAPI.managementRBACOnly=true"],
        ),
        (
            "serviceMonitor",
            vec![
                "--set",
                "serviceMonitor.enabled=true",
                "--set",
                "serviceMonitor.additionalLabels.release=prom",
                "--set",
                "serviceMonitor.endpointConfig.interval=15s",
            ],
        ),
        ("replicas 1", vec!["--set", "replicas=1"]),
        (
            "no leader election",
            vec![
                "--set",
                "replicas=1",
                "--set",
                "leaderElection.enabled=false",
            ],
        ),
        (
            "scheduling and resources",
            vec![
                "--set",
                "controller.resources.requests.cpu=250m",
                "--set",
                "controller.resources.limits.memory=1Gi",
                "--set",
                "nodeSelector.pool=system",
                "--set",
                "tolerations[0].key=dedicated",
                "--set",
                "tolerations[0].operator=Equal",
                "--set",
                "tolerations[0].value=system",
                "--set",
                "tolerations[0].effect=NoSchedule",
            ],
        ),
        (
            "settings",
            vec![
                "--set",
                "settings.clusterName=prod",
                "--set",
                "settings.batchIdleDuration=2s",
                "--set",
                "settings.kubeClientQPS=50",
                "--set",
                "settings.registrationTimeout=45m",
                "--set",
                "settings.featureGates.staticCapacity=true",
                "--set",
                "clusterAPI.namespace=capi-prod",
                "--set",
                "clusterAPI.version=v1beta1",
                "--set",
                "logLevel=debug",
                "--set",
                "controller.metrics.port=9090",
                "--set",
                "controller.healthProbe.port=9091",
                "--set",
                "additionalLabels.team=platform",
                "--set",
                "additionalAnnotations.owner=platform",
            ],
        ),
    ]
}

#[test]
fn lint_strict_passes() {
    for (case, args) in [
        ("defaults", vec![]),
        (
            "kubeconfigSecret",
            vec!["--set", "clusterAPI.kubeconfigSecret.name=mgmt"],
        ),
        (
            "managementRBACOnly",
            vec!["--set", "clusterAPI.managementRBACOnly=true"],
        ),
    ] {
        let chart = chart();
        let mut cmd = vec![
            "lint",
            "--strict",
            chart.to_str().unwrap(),
            "--kube-version",
            KUBE_VERSION,
        ];
        cmd.extend_from_slice(&args);
        let (ok, stdout, stderr) = run_helm(&cmd);
        assert!(
            ok,
            "helm lint --strict ({case}) failed:\n{stdout}\n{stderr}"
        );
        assert!(stdout.contains("0 chart(s) failed"), "{case}: {stdout}");
    }
}

#[test]
fn every_case_puts_namespaced_objects_in_the_release_namespace_and_no_crds_in_templates() {
    for (case, args) in matrix() {
        let objects = render(&args);
        // With clusterAPI.namespace the Cluster API Role and RoleBinding live in that namespace.
        let capi_namespace = args
            .iter()
            .find_map(|a| a.strip_prefix("clusterAPI.namespace="))
            .filter(|ns| !ns.is_empty());
        assert!(!objects.is_empty(), "{case}: nothing rendered");
        for o in &objects {
            let k = kind(o);
            assert_ne!(
                k, "CustomResourceDefinition",
                "{case}: CRDs belong in crds/"
            );
            let namespace = o["metadata"]["namespace"].as_str();
            if CLUSTER_SCOPED.contains(&k) {
                assert_eq!(namespace, None, "{case}: {k} {} is cluster-scoped", name(o));
            } else if let Some(ns) = capi_namespace
                && name(o).ends_with("-cluster-api")
            {
                assert!(
                    matches!(k, "Role" | "RoleBinding"),
                    "{case}: {k} {}",
                    name(o)
                );
                assert_eq!(
                    namespace,
                    Some(ns),
                    "{case}: {k} {} is not in clusterAPI.namespace",
                    name(o)
                );
            } else {
                assert_eq!(
                    namespace,
                    Some(NAMESPACE),
                    "{case}: {k} {} is not in the release namespace",
                    name(o)
                );
            }
            assert_eq!(
                o["metadata"]["labels"]["app.kubernetes.io/instance"],
                RELEASE,
                "{case}: {k} {} lacks the instance label",
                name(o)
            );
            for subject in o["subjects"].as_array().into_iter().flatten() {
                assert_eq!(subject["namespace"], NAMESPACE, "{case}: {k} {}", name(o));
            }
        }
    }
}

#[test]
fn every_setting_the_deployment_passes_is_one_run_reads() {
    for (case, args) in matrix() {
        let objects = render(&args);
        if !kinds(&objects).contains("Deployment") {
            continue;
        }
        let c = container(&objects);
        // The image's entrypoint is `karpenter-capi run`: no command override.
        assert!(
            c.get("command").is_none(),
            "{case}: command overrides the entrypoint"
        );
        for arg in c["args"].as_array().into_iter().flatten() {
            let arg = arg.as_str().unwrap();
            let flag = arg.split('=').next().unwrap();
            assert!(
                RUN_FLAGS.contains(&flag),
                "{case}: `run` has no flag {flag}"
            );
        }
        let names: Vec<String> = env(&objects).into_iter().map(|(k, _)| k).collect();
        for name in &names {
            assert!(
                RUN_ENV.contains(&name.as_str()),
                "{case}: `run` reads no environment variable {name}"
            );
        }
        let unique: BTreeSet<_> = names.iter().collect();
        assert_eq!(unique.len(), names.len(), "{case}: duplicate env {names:?}");
        // Every upstream gate is passed; only StaticCapacity may be on (run refuses the others).
        let gates = env_value(&objects, "FEATURE_GATES").unwrap_or_default();
        assert!(
            gates.starts_with("StaticCapacity=")
                && gates.contains(",SpotToSpotConsolidation=false")
                && gates.contains(",NodeRepair=false")
                && gates.contains(",NodeOverlay=false"),
            "{case}: FEATURE_GATES {gates:?}"
        );
        assert_eq!(
            gates.starts_with("StaticCapacity=true"),
            case == "settings",
            "{case}: FEATURE_GATES {gates:?}"
        );
    }
}

#[test]
fn the_container_is_locked_down_and_probed_on_the_health_port() {
    for (case, args) in matrix() {
        let objects = render(&args);
        if !kinds(&objects).contains("Deployment") {
            continue;
        }
        let c = container(&objects);
        let sc = &c["securityContext"];
        assert_eq!(sc["runAsNonRoot"], true, "{case}");
        assert_eq!(sc["runAsUser"], 65532, "{case}");
        assert_eq!(sc["readOnlyRootFilesystem"], true, "{case}");
        assert_eq!(sc["allowPrivilegeEscalation"], false, "{case}");
        assert_eq!(sc["capabilities"]["drop"], json!(["ALL"]), "{case}");
        assert!(sc["capabilities"].get("add").is_none(), "{case}");
        assert_eq!(sc["seccompProfile"]["type"], "RuntimeDefault", "{case}");

        let port_of = |port_name: &str| {
            c["ports"]
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p["name"] == port_name)
                .unwrap_or_else(|| panic!("{case}: no port {port_name}"))["containerPort"]
                .as_u64()
                .unwrap()
                .to_string()
        };
        let health = env_value(&objects, "HEALTH_PROBE_PORT").expect("HEALTH_PROBE_PORT");
        let metrics = env_value(&objects, "METRICS_PORT").expect("METRICS_PORT");
        assert_eq!(
            port_of("http"),
            health,
            "{case}: probe port = HEALTH_PROBE_PORT"
        );
        assert_eq!(
            port_of("http-metrics"),
            metrics,
            "{case}: metrics port = METRICS_PORT"
        );
        assert_ne!(health, metrics, "{case}: one port each");
        assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz", "{case}");
        assert_eq!(c["livenessProbe"]["httpGet"]["port"], "http", "{case}");
        assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz", "{case}");
        assert_eq!(c["readinessProbe"]["httpGet"]["port"], "http", "{case}");

        let service = only(&objects, "Service");
        let ports = service["spec"]["ports"].as_array().unwrap();
        assert_eq!(ports.len(), 1, "{case}: the metrics Service has one port");
        assert_eq!(ports[0]["targetPort"], "http-metrics", "{case}");
        assert_eq!(ports[0]["port"].to_string(), metrics, "{case}");
        let pod_labels = &only(&objects, "Deployment")["spec"]["template"]["metadata"]["labels"];
        for (k, v) in service["spec"]["selector"].as_object().unwrap() {
            assert_eq!(&pod_labels[k], v, "{case}: the Service selects the pods");
        }
    }
}

#[test]
fn defaults_run_two_replicas_with_leader_election_and_both_rule_sets() {
    let objects = render(&[]);
    let deployment = only(&objects, "Deployment");
    assert_eq!(deployment["spec"]["replicas"], 2);
    assert_eq!(env_value(&objects, "DISABLE_LEADER_ELECTION"), None);
    assert_eq!(
        env_value(&objects, "LEADER_ELECTION_NAMESPACE").as_deref(),
        Some(NAMESPACE)
    );
    let lease = env_value(&objects, "LEADER_ELECTION_NAME").expect("LEADER_ELECTION_NAME");
    assert_eq!(
        env_value(&objects, "CLUSTER_API_KUBECONFIG"),
        None,
        "in-cluster"
    );
    assert_eq!(env_value(&objects, "KUBECONFIG"), None, "in-cluster");
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["priorityClassName"], "system-cluster-critical");
    assert_eq!(pod["serviceAccountName"], RELEASE);
    assert!(pod.get("volumes").is_none(), "nothing to mount in-cluster");
    assert_eq!(
        pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]["labelSelector"]
            ["matchLabels"]["app.kubernetes.io/instance"],
        RELEASE,
        "one replica per node"
    );

    // The Role grants the Lease that run uses, in the namespace run uses.
    let role = only(&objects, "Role");
    let names: Vec<&Value> = role["rules"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r.get("resourceNames"))
        .collect();
    assert_eq!(names, vec![&json!([lease])]);
    assert!(has_rule(role, "coordination.k8s.io", "leases", "create"));
    assert!(has_rule(role, "coordination.k8s.io", "leases", "patch"));

    // CAPI objects in the same cluster: both ClusterRoles, bound to the one ServiceAccount.
    let sa = name(only(&objects, "ServiceAccount"));
    for role in [RELEASE.to_owned(), format!("{RELEASE}-cluster-api")] {
        assert!(named(&objects, "ClusterRole", &role).is_some(), "{role}");
        let binding = named(&objects, "ClusterRoleBinding", &role).expect("binding");
        assert_eq!(binding["roleRef"]["name"], role.as_str());
        assert_eq!(
            binding["subjects"],
            json!([{"kind": "ServiceAccount", "name": sa, "namespace": NAMESPACE}])
        );
    }
    let pdb = only(&objects, "PodDisruptionBudget");
    assert_eq!(pdb["spec"]["maxUnavailable"], 1);
    assert!(!kinds(&objects).contains("ServiceMonitor"));
}

#[test]
fn a_kubeconfig_secret_is_mounted_read_only_and_named_by_cluster_api_kubeconfig() {
    let objects = render(&[
        "--set",
        "clusterAPI.kubeconfigSecret.name=mgmt",
        "--set",
        "clusterAPI.kubeconfigSecret.key=value",
    ]);
    let pod = &only(&objects, "Deployment")["spec"]["template"]["spec"];
    let volume = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["secret"]["secretName"] == "mgmt")
        .expect("a volume of Secret mgmt");
    let items = volume["secret"]["items"].as_array().unwrap();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["key"], "value");
    let mount = container(&objects)["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == volume["name"])
        .expect("the Secret is mounted");
    assert_eq!(mount["readOnly"], true);
    let path = format!(
        "{}/{}",
        mount["mountPath"].as_str().unwrap(),
        items[0]["path"].as_str().unwrap()
    );
    assert_eq!(env_value(&objects, "CLUSTER_API_KUBECONFIG"), Some(path));
    // The Cluster API objects live elsewhere: no management rules in this cluster.
    assert!(named(&objects, "ClusterRole", &format!("{RELEASE}-cluster-api")).is_none());
    assert!(named(&objects, "ClusterRole", RELEASE).is_some());
}

#[test]
fn management_rbac_only_renders_only_the_management_rbac() {
    let objects = render(&["--set", "clusterAPI.managementRBACOnly=true"]);
    assert_eq!(
        kinds(&objects),
        ["ClusterRole", "ClusterRoleBinding", "ServiceAccount"]
            .map(str::to_owned)
            .into(),
    );
    let role = only(&objects, "ClusterRole");
    assert_eq!(name(role), format!("{RELEASE}-cluster-api"));
    for group in groups(role) {
        assert!(
            group.ends_with("cluster.x-k8s.io"),
            "{group} is not a Cluster API group"
        );
    }
    // The same rules as in a joined install.
    let joined = render(&[]);
    let joined = named(&joined, "ClusterRole", &format!("{RELEASE}-cluster-api")).unwrap();
    assert_eq!(role["rules"], joined["rules"]);
    // Without creating a ServiceAccount: only the role and its binding to the given one.
    let objects = render(&[
        "--set",
        "clusterAPI.managementRBACOnly=true",
        "--set",
        "serviceAccount.create=false",
        "--set",
        "serviceAccount.name=capi-reader",
    ]);
    assert_eq!(
        kinds(&objects),
        ["ClusterRole", "ClusterRoleBinding"]
            .map(str::to_owned)
            .into()
    );
    assert_eq!(
        only(&objects, "ClusterRoleBinding")["subjects"][0]["name"],
        "capi-reader"
    );
}

fn groups(role: &Value) -> BTreeSet<String> {
    role["rules"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["apiGroups"].as_array().unwrap().iter())
        .map(|g| g.as_str().unwrap().to_owned())
        .collect()
}

fn has_rule(role: &Value, group: &str, resource: &str, verb: &str) -> bool {
    role["rules"].as_array().unwrap().iter().any(|r| {
        let has = |field: &str, v: &str| {
            r[field]
                .as_array()
                .is_some_and(|a| a.iter().any(|x| x == v))
        };
        has("apiGroups", group) && has("resources", resource) && has("verbs", verb)
    })
}

#[test]
fn rbac_is_least_privilege() {
    let objects = render(&[]);
    let workload = named(&objects, "ClusterRole", RELEASE).unwrap();
    let management = named(&objects, "ClusterRole", &format!("{RELEASE}-cluster-api")).unwrap();
    let role = only(&objects, "Role");
    for r in [workload, management, role] {
        for rule in r["rules"].as_array().unwrap() {
            let verbs = rule["verbs"].as_array().unwrap();
            for forbidden in [
                "*",
                "update",
                "deletecollection",
                "escalate",
                "bind",
                "impersonate",
            ] {
                assert!(
                    !verbs.iter().any(|v| v == forbidden),
                    "{}: {rule} grants {forbidden}",
                    name(r)
                );
            }
            assert!(
                !rule["apiGroups"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|g| g == "*")
            );
            for resource in rule["resources"].as_array().unwrap() {
                assert!(
                    !["secrets", "configmaps", "serviceaccounts"]
                        .contains(&resource.as_str().unwrap()),
                    "{}: {rule}",
                    name(r)
                );
            }
        }
    }
    // What the code needs (spot checks; the chart's comments name the code paths).
    assert!(has_rule(workload, "", "pods/eviction", "create"));
    assert!(has_rule(workload, "karpenter.sh", "nodeclaims", "create"));
    assert!(has_rule(
        workload,
        "karpenter.sh",
        "nodeclaims/status",
        "patch"
    ));
    assert!(has_rule(
        workload,
        "karpenter.sh",
        "nodepools/status",
        "patch"
    ));
    assert!(has_rule(
        workload,
        "karpenter.cluster.x-k8s.io",
        "clusterapinodeclasses/status",
        "patch"
    ));
    assert!(has_rule(workload, "events.k8s.io", "events", "create"));
    assert!(!has_rule(workload, "events.k8s.io", "events", "patch"));
    assert!(
        !has_rule(workload, "", "events", "create"),
        "kube's Recorder writes events.k8s.io"
    );
    assert!(!has_rule(workload, "", "pods", "patch"));
    assert!(has_rule(
        management,
        "cluster.x-k8s.io",
        "machinedeployments",
        "patch"
    ));
    assert!(!has_rule(
        management,
        "cluster.x-k8s.io",
        "machinedeployments/scale",
        "patch"
    ));
    assert!(has_rule(
        management,
        "cluster.x-k8s.io",
        "machines",
        "delete"
    ));
    // MachineSets are watched, and patched (replicas + ownership record) as stand-alone node
    // groups; never deleted, never scaled through the subresource.
    assert!(has_rule(
        management,
        "cluster.x-k8s.io",
        "machinesets",
        "watch"
    ));
    assert!(has_rule(
        management,
        "cluster.x-k8s.io",
        "machinesets",
        "patch"
    ));
    assert!(!has_rule(
        management,
        "cluster.x-k8s.io",
        "machinesets",
        "delete"
    ));
    assert!(!has_rule(
        management,
        "cluster.x-k8s.io",
        "machinesets/scale",
        "patch"
    ));
    // MachinePools likewise: watched, patched as node groups, never deleted.
    for verb in ["get", "list", "watch", "patch"] {
        assert!(has_rule(
            management,
            "cluster.x-k8s.io",
            "machinepools",
            verb
        ));
    }
    assert!(!has_rule(
        management,
        "cluster.x-k8s.io",
        "machinepools",
        "delete"
    ));
    assert!(has_rule(
        management,
        "infrastructure.cluster.x-k8s.io",
        "*",
        "watch"
    ));
    assert!(!has_rule(
        management,
        "infrastructure.cluster.x-k8s.io",
        "*",
        "get"
    ));
    assert!(!has_rule(workload, "cluster.x-k8s.io", "machines", "get"));
    // Narrowed template kinds.
    let narrowed = render(&[
        "--set",
        "clusterAPI.infrastructureTemplates.resources={dockermachinetemplates}",
    ]);
    let management = named(&narrowed, "ClusterRole", &format!("{RELEASE}-cluster-api")).unwrap();
    assert!(has_rule(
        management,
        "infrastructure.cluster.x-k8s.io",
        "dockermachinetemplates",
        "list"
    ));
    assert!(!has_rule(
        management,
        "infrastructure.cluster.x-k8s.io",
        "*",
        "list"
    ));
}

#[test]
fn nodeoverlay_rbac_comes_with_its_gate_only() {
    let off = render(&[]);
    let workload = named(&off, "ClusterRole", RELEASE).unwrap();
    assert!(!has_rule(workload, "karpenter.sh", "nodeoverlays", "watch"));
    assert!(!has_rule(
        workload,
        "karpenter.sh",
        "nodeoverlays/status",
        "patch"
    ));
    let on = render(&["--set", "settings.featureGates.nodeOverlay=true"]);
    let workload = named(&on, "ClusterRole", RELEASE).unwrap();
    for verb in ["list", "watch"] {
        assert!(has_rule(workload, "karpenter.sh", "nodeoverlays", verb));
    }
    assert!(!has_rule(workload, "karpenter.sh", "nodeoverlays", "patch"));
    assert!(has_rule(
        workload,
        "karpenter.sh",
        "nodeoverlays/status",
        "patch"
    ));
    let gates = env_value(&on, "FEATURE_GATES").unwrap_or_default();
    assert!(gates.contains(",NodeOverlay=true"), "{gates}");
}

#[test]
fn capacitybuffer_rbac_comes_with_its_gate_only() {
    let rules = [
        ("autoscaling.x-k8s.io", "capacitybuffers", "list"),
        ("autoscaling.x-k8s.io", "capacitybuffers", "watch"),
        ("autoscaling.x-k8s.io", "capacitybuffers/status", "patch"),
        ("", "podtemplates", "list"),
        ("", "podtemplates", "watch"),
        ("apps", "deployments", "get"),
        ("apps", "statefulsets", "get"),
        ("apps", "replicasets", "get"),
    ];
    let off = render(&[]);
    let workload = named(&off, "ClusterRole", RELEASE).unwrap();
    for (group, resource, verb) in rules {
        assert!(
            !has_rule(workload, group, resource, verb),
            "{group}/{resource} {verb} without the gate"
        );
    }
    let on = render(&["--set", "settings.featureGates.capacityBuffer=true"]);
    let workload = named(&on, "ClusterRole", RELEASE).unwrap();
    for (group, resource, verb) in rules {
        assert!(
            has_rule(workload, group, resource, verb),
            "{group}/{resource} {verb} with the gate"
        );
    }
    assert!(!has_rule(
        workload,
        "autoscaling.x-k8s.io",
        "capacitybuffers",
        "patch"
    ));
    assert!(!has_rule(workload, "apps", "deployments", "list"));
    let gates = env_value(&on, "FEATURE_GATES").unwrap_or_default();
    assert!(gates.contains(",CapacityBuffer=true"), "{gates}");
}

#[test]
fn machinehealthcheck_rbac_comes_with_node_repair_only() {
    let role = format!("{RELEASE}-cluster-api");
    for args in [
        &[][..],
        &["--set", "clusterAPI.managementRBACOnly=true"][..],
    ] {
        let off = render(args);
        let management = named(&off, "ClusterRole", &role).unwrap();
        assert!(!has_rule(
            management,
            "cluster.x-k8s.io",
            "machinehealthchecks",
            "list"
        ));
        let mut with = args.to_vec();
        with.extend(["--set", "settings.featureGates.nodeRepair=true"]);
        let on = render(&with);
        let management = named(&on, "ClusterRole", &role).unwrap();
        assert!(has_rule(
            management,
            "cluster.x-k8s.io",
            "machinehealthchecks",
            "list"
        ));
        for verb in ["get", "watch", "patch", "delete"] {
            assert!(
                !has_rule(management, "cluster.x-k8s.io", "machinehealthchecks", verb),
                "{verb}: node repair only lists MachineHealthChecks"
            );
        }
    }
    let on = render(&["--set", "settings.featureGates.nodeRepair=true"]);
    let gates = env_value(&on, "FEATURE_GATES").unwrap_or_default();
    assert!(gates.contains(",NodeRepair=true"), "{gates}");
    assert_eq!(
        env_value(&on, "NODE_REPAIR_POLICIES").as_deref(),
        Some("Ready=False:30m,Ready=Unknown:30m")
    );
}

#[test]
fn every_rbac_rule_names_the_code_that_needs_it() {
    for file in [
        "clusterrole.yaml",
        "clusterrole-cluster-api.yaml",
        "role.yaml",
    ] {
        let text = std::fs::read_to_string(chart().join("templates").join(file)).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let mut rules = 0;
        for (i, line) in lines.iter().enumerate() {
            if line.trim_start().starts_with("- apiGroups:") {
                rules += 1;
                let before = lines[..i]
                    .last()
                    .map(|l| l.trim_start())
                    .unwrap_or_default();
                assert!(
                    before.starts_with('#'),
                    "{file}: rule at line {} has no comment",
                    i + 1
                );
                assert!(
                    lines[..i]
                        .iter()
                        .rev()
                        .take_while(|l| l.trim_start().starts_with('#'))
                        .any(|l| l.contains(".rs")),
                    "{file}: the comment of the rule at line {} names no source file",
                    i + 1
                );
            }
        }
        assert!(rules > 0, "{file}: no rules");
    }
}

#[test]
fn one_replica_keeps_leader_election_unless_disabled() {
    let objects = render(&["--set", "replicas=1"]);
    assert_eq!(only(&objects, "Deployment")["spec"]["replicas"], 1);
    assert!(env_value(&objects, "LEADER_ELECTION_NAME").is_some());
    assert!(kinds(&objects).contains("Role"));

    let objects = render(&[
        "--set",
        "replicas=1",
        "--set",
        "leaderElection.enabled=false",
    ]);
    assert_eq!(
        env_value(&objects, "DISABLE_LEADER_ELECTION").as_deref(),
        Some("true")
    );
    assert_eq!(env_value(&objects, "LEADER_ELECTION_NAME"), None);
    assert!(!kinds(&objects).contains("Role"), "no Lease, no Role");

    let refused = try_render(&["--set", "leaderElection.enabled=false"]);
    let err = refused.expect_err("two replicas without leader election must not render");
    assert!(err.contains("leaderElection.enabled=false"), "{err}");
}

#[test]
fn service_monitor_scrapes_the_metrics_port() {
    let objects = render(&[
        "--set",
        "serviceMonitor.enabled=true",
        "--set",
        "serviceMonitor.additionalLabels.release=prom",
        "--set",
        "serviceMonitor.endpointConfig.interval=15s",
    ]);
    let monitor = only(&objects, "ServiceMonitor");
    assert_eq!(monitor["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(monitor["metadata"]["labels"]["release"], "prom");
    assert_eq!(
        monitor["spec"]["endpoints"],
        json!([{"port": "http-metrics", "path": "/metrics", "interval": "15s"}])
    );
    assert_eq!(
        monitor["spec"]["namespaceSelector"]["matchNames"],
        json!([NAMESPACE])
    );
    let service = only(&objects, "Service");
    assert_eq!(service["spec"]["ports"][0]["name"], "http-metrics");
    for (k, v) in monitor["spec"]["selector"]["matchLabels"]
        .as_object()
        .unwrap()
    {
        assert_eq!(
            &service["metadata"]["labels"][k], v,
            "the monitor selects the Service"
        );
    }
}

#[test]
fn custom_resources_tolerations_and_node_selector_reach_the_pod() {
    let (_, args) = matrix()
        .into_iter()
        .find(|(case, _)| *case == "scheduling and resources")
        .unwrap();
    let objects = render(&args);
    let pod = &only(&objects, "Deployment")["spec"]["template"]["spec"];
    assert_eq!(
        container(&objects)["resources"],
        json!({"requests": {"cpu": "250m"}, "limits": {"memory": "1Gi"}})
    );
    assert_eq!(pod["nodeSelector"]["pool"], "system");
    assert_eq!(
        pod["tolerations"],
        json!([{"key": "dedicated", "operator": "Equal", "value": "system", "effect": "NoSchedule"}])
    );
}

#[test]
fn settings_map_to_runs_environment() {
    let (_, args) = matrix()
        .into_iter()
        .find(|(case, _)| *case == "settings")
        .unwrap();
    let objects = render(&args);
    for (key, value) in [
        ("CLUSTER_NAME", "prod"),
        ("BATCH_IDLE_DURATION", "2s"),
        ("BATCH_MAX_DURATION", "10s"),
        ("CLUSTER_API_NAMESPACE", "capi-prod"),
        ("CAPI_VERSION", "v1beta1"),
        ("LOG_LEVEL", "debug"),
        ("METRICS_PORT", "9090"),
        ("HEALTH_PROBE_PORT", "9091"),
        ("PREFERENCE_POLICY", "Respect"),
        ("MIN_VALUES_POLICY", "Strict"),
        ("KUBE_CLIENT_QPS", "50"),
        ("KUBE_CLIENT_BURST", "300"),
        ("REGISTRATION_TIMEOUT", "45m"),
        ("LAUNCH_TIMEOUT", "5m"),
    ] {
        assert_eq!(env_value(&objects, key).as_deref(), Some(value), "{key}");
    }
    for o in &objects {
        assert_eq!(
            o["metadata"]["labels"]["team"],
            "platform",
            "{} {}",
            kind(o),
            name(o)
        );
        assert_eq!(
            o["metadata"]["annotations"]["owner"],
            "platform",
            "{} {}",
            kind(o),
            name(o)
        );
    }
}

#[test]
fn include_crds_renders_the_five_committed_crds() {
    let objects = render(&["--include-crds"]);
    let crds: BTreeSet<&str> = objects
        .iter()
        .filter(|o| kind(o) == "CustomResourceDefinition")
        .map(name)
        .collect();
    assert_eq!(
        crds,
        [
            "capacitybuffers.autoscaling.x-k8s.io",
            "clusterapinodeclasses.karpenter.cluster.x-k8s.io",
            "nodeclaims.karpenter.sh",
            "nodeoverlays.karpenter.sh",
            "nodepools.karpenter.sh",
        ]
        .into()
    );
    let files = std::fs::read_dir(chart().join("crds")).unwrap().count();
    assert_eq!(files, 5, "one file per CRD in crds/");
}

/// `RUN_ENV` and `RUN_FLAGS` are exactly what `RunArgs` (with the `ClusterArgs` it flattens) declares (read from its source, so
/// nothing is built or run): a flag added, renamed or removed there fails here.
#[test]
fn known_settings_match_run_cmd() {
    let source =
        std::fs::read_to_string(workspace().join("crates/karpenter-capi/src/run_cmd.rs")).unwrap();
    let mut env = BTreeSet::new();
    let mut flags = BTreeSet::new();
    // `run`'s flags: RunArgs and the ClusterArgs and LeaderElectionArgs it flattens (shared
    // with `doctor`).
    for structure in [
        "pub struct ClusterArgs {",
        "pub struct LeaderElectionArgs {",
        "pub struct TimeoutArgs {",
        "pub struct RunArgs {",
    ] {
        let start = source.find(structure).expect("the struct in run_cmd.rs");
        let body = &source[start + structure.len()..];
        let body = &body[..body.find("\n}\n").expect("end of the struct")];
        assert!(
            !body.contains("long = \""),
            "a renamed flag: derive it from its `long` attribute"
        );
        let mut flattened = false;
        for line in body.lines().map(str::trim) {
            if line == "#[command(flatten)]" {
                flattened = true;
                continue;
            }
            if let Some(rest) = line.split("env = \"").nth(1) {
                env.insert(rest.split('"').next().unwrap().to_owned());
            }
            if let Some(field) = line.strip_prefix("pub ").and_then(|l| l.split(':').next()) {
                if !flattened {
                    flags.insert(format!("--{}", field.replace('_', "-")));
                }
                flattened = false;
            }
        }
    }
    let known_env: BTreeSet<String> = RUN_ENV.iter().map(|s| (*s).to_owned()).collect();
    let known_flags: BTreeSet<String> = RUN_FLAGS.iter().map(|s| (*s).to_owned()).collect();
    assert_eq!(env, known_env, "RUN_ENV differs from run_cmd.rs");
    assert_eq!(flags, known_flags, "RUN_FLAGS differs from run_cmd.rs");
}
