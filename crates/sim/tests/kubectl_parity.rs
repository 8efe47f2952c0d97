//! kubectl parity: what users type, with the real `kubectl`, against served sims.
//! - every `kubectl create <kind>` generator (typed clients: protobuf bodies);
//! - `kubectl explain` (OpenAPI v3 and v2), server-side field validation (`--validate=strict`
//!   rejects unknown fields of a CRD and of a built-in with kube-apiserver's messages), and
//!   `kubectl auth can-i` / `whoami`;
//! - day two on a served world: rollout status, scale, wait, label, annotate, patches of
//!   every type, apply (client- and server-side), printing, cordon/drain/uncordon, deletes
//!   with each cascade, and Cluster API short names on the management cluster.
//!
//! Skipped, saying so, when `kubectl` is not on PATH.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod kubectl_support;

use std::time::Duration;

use kubectl_support::{Kubectl, kubectl_available, write};
use serde_json::Value;
use sim::world::CapiConfig;
use sim::{ServeWorldConfig, WorldConfig};

/// A served sim with our CRDs installed.
async fn served_with_crds() -> sim::RunningServer {
    let server = sim::serve("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let client = kube::Client::new(server.sim().router(), "default");
    sim::world::crds::install_karpenter_crds(&client)
        .await
        .unwrap();
    server
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_create_generators_work() {
    if !kubectl_available().await {
        eprintln!("SKIPPED: kubectl is not on PATH");
        return;
    }
    let server = sim::serve("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let k = Kubectl::new(server.kubeconfig_path());
    let creates: &[(&[&str], &str)] = &[
        (&["create", "namespace", "team"], "namespace/team created"),
        (
            &[
                "create",
                "deployment",
                "web",
                "--image=nginx",
                "--replicas=0",
                "--port=80",
            ],
            "deployment.apps/web created",
        ),
        (
            &[
                "create",
                "configmap",
                "settings",
                "--from-literal=mode=fast",
            ],
            "configmap/settings created",
        ),
        (
            &[
                "create",
                "secret",
                "generic",
                "creds",
                "--from-literal=password=hunter2",
            ],
            "secret/creds created",
        ),
        (
            &[
                "create",
                "poddisruptionbudget",
                "web",
                "--selector=app=web",
                "--min-available=1",
            ],
            "poddisruptionbudget.policy/web created",
        ),
        (
            &[
                "create",
                "job",
                "once",
                "--image=busybox",
                "--",
                "echo",
                "hi",
            ],
            "job.batch/once created",
        ),
        (
            &[
                "create",
                "cronjob",
                "tick",
                "--image=busybox",
                "--schedule=*/5 * * * *",
            ],
            "cronjob.batch/tick created",
        ),
        (
            &["create", "job", "now", "--from=cronjob/tick"],
            "job.batch/now created",
        ),
        (
            &["create", "service", "clusterip", "web", "--tcp=80:8080"],
            "service/web created",
        ),
        (
            &[
                "create",
                "priorityclass",
                "high",
                "--value=1000",
                "--description=important",
            ],
            "priorityclass.scheduling.k8s.io/high created",
        ),
        (
            &["create", "serviceaccount", "robot"],
            "serviceaccount/robot created",
        ),
        (
            &[
                "create",
                "role",
                "reader",
                "--verb=get,list",
                "--resource=pods",
            ],
            "role.rbac.authorization.k8s.io/reader created",
        ),
        (
            &[
                "create",
                "rolebinding",
                "reader",
                "--role=reader",
                "--serviceaccount=default:robot",
            ],
            "rolebinding.rbac.authorization.k8s.io/reader created",
        ),
        (
            &[
                "create",
                "clusterrole",
                "viewer",
                "--verb=get",
                "--resource=nodes",
            ],
            "clusterrole.rbac.authorization.k8s.io/viewer created",
        ),
        (
            &[
                "create",
                "clusterrolebinding",
                "viewer",
                "--clusterrole=viewer",
                "--user=alice",
            ],
            "clusterrolebinding.rbac.authorization.k8s.io/viewer created",
        ),
    ];
    for (args, want) in creates {
        let out = k.ok(args).await;
        assert!(out.contains(want), "kubectl {args:?}: {out}");
    }

    let d = json(&k.ok(&["get", "deployment", "web", "-o", "json"]).await);
    assert_eq!(
        d["spec"]["replicas"], 0,
        "an explicit zero survives protobuf"
    );
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"],
        80
    );
    let secret = k
        .ok(&["get", "secret", "creds", "-o", "jsonpath={.data.password}"])
        .await;
    assert_eq!(secret, "aHVudGVyMg==");
    let svc = json(&k.ok(&["get", "service", "web", "-o", "json"]).await);
    assert_eq!(svc["spec"]["ports"][0]["port"], 80);
    assert_eq!(svc["spec"]["ports"][0]["targetPort"], 8080);
    let pdb = k
        .ok(&["get", "pdb", "web", "-o", "jsonpath={.spec.minAvailable}"])
        .await;
    assert_eq!(pdb, "1");
    let job = json(&k.ok(&["get", "job", "now", "-o", "json"]).await);
    assert_eq!(job["metadata"]["ownerReferences"][0]["kind"], "CronJob");
    let pc = k
        .ok(&["get", "pc", "high", "-o", "jsonpath={.value}"])
        .await;
    assert_eq!(pc, "1000");
    let rules = json(&k.ok(&["get", "role", "reader", "-o", "json"]).await);
    assert_eq!(
        rules["rules"][0]["verbs"],
        serde_json::json!(["get", "list"])
    );
    let names = k.ok(&["get", "cj,sa,cm", "-o", "name"]).await;
    for want in [
        "cronjob.batch/tick",
        "serviceaccount/robot",
        "configmap/settings",
    ] {
        assert!(names.contains(want), "{names}");
    }
    server.shutdown().await.unwrap();
}

const BAD_POOL: &str = "apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: bad
spec:
  color: blue
  template:
    spec:
      nodeClassRef: {group: karpenter.cluster.x-k8s.io, kind: ClusterAPINodeClass, name: default}
      requirements: []
";

const BAD_DEPLOYMENT: &str = "apiVersion: apps/v1
kind: Deployment
metadata: {name: bad}
spec:
  foo: 1
  selector: {matchLabels: {app: bad}}
  template:
    metadata: {labels: {app: bad}}
    spec:
      containers: [{name: c, image: nginx, bogus: x}]
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_explain_validate_and_auth() {
    if !kubectl_available().await {
        eprintln!("SKIPPED: kubectl is not on PATH");
        return;
    }
    let server = served_with_crds().await;
    let k = Kubectl::new(server.kubeconfig_path());
    let files = tempfile::tempdir().unwrap();

    let out = k.ok(&["explain", "nodepool"]).await;
    assert!(
        out.contains("KIND:       NodePool") && out.contains("spec\t<Object>"),
        "{out}"
    );
    let out = k.ok(&["explain", "nodepool.spec.disruption"]).await;
    assert!(out.contains("consolidationPolicy"), "{out}");
    let out = k.ok(&["explain", "pod.spec.containers"]).await;
    assert!(
        out.contains("FIELD: containers <[]Container>") && out.contains("image\t<string>"),
        "{out}"
    );
    let out = k
        .ok(&[
            "explain",
            "--output=plaintext-openapiv2",
            "deployment.spec.replicas",
        ])
        .await;
    assert!(
        out.contains("replicas <integer>") && out.contains("Number of desired pods"),
        "{out}"
    );

    // --validate=strict (the default): the server rejects unknown fields, as kube-apiserver.
    let pool = write(files.path(), "pool.yaml", BAD_POOL);
    let err = k.fails(&["apply", "-f", &pool]).await;
    assert!(
        err.contains("NodePool in version \"v1\" cannot be handled as a NodePool: strict decoding error: unknown field \"spec.color\""),
        "{err}"
    );
    let deployment = write(files.path(), "deployment.yaml", BAD_DEPLOYMENT);
    let err = k.fails(&["create", "-f", &deployment]).await;
    assert!(
        err.contains("Error from server (BadRequest): error when creating")
            && err.contains("Deployment in version \"v1\" cannot be handled as a Deployment: strict decoding error: unknown field \"spec.foo\", unknown field \"spec.template.spec.containers[0].bogus\""),
        "{err}"
    );
    let err = k
        .fails(&["apply", "--server-side", "-f", &deployment])
        .await;
    assert!(
        err.contains("failed to create typed patch object (default/bad; apps/v1, Kind=Deployment): .spec.foo: field not declared in schema"),
        "{err}"
    );
    let warned = k
        .run(&["apply", "--validate=warn", "-f", &deployment])
        .await;
    assert!(warned.ok, "{}", warned.stderr);
    assert!(
        warned
            .stderr
            .contains("Warning: unknown field \"spec.foo\""),
        "{}",
        warned.stderr
    );
    let stored = json(&k.ok(&["get", "deployment", "bad", "-o", "json"]).await);
    assert!(
        stored["spec"].get("foo").is_none(),
        "unknown fields are dropped"
    );

    assert_eq!(
        k.ok(&["auth", "can-i", "create", "pods"]).await.trim(),
        "yes"
    );
    assert_eq!(
        k.ok(&["auth", "can-i", "delete", "nodes", "--all-namespaces"])
            .await
            .trim(),
        "yes"
    );
    let list = k.ok(&["auth", "can-i", "--list"]).await;
    assert!(list.lines().any(|l| l.starts_with("*.*")), "{list}");
    let me = k.ok(&["auth", "whoami", "-o", "json"]).await;
    assert_eq!(json(&me)["status"]["userInfo"]["username"], "system:admin");
    server.shutdown().await.unwrap();
}

const NODE: &str = "apiVersion: v1
kind: Node
metadata:
  name: node-a
  labels: {kubernetes.io/hostname: node-a}
status:
  allocatable: {cpu: \"8\", memory: 16Gi, pods: \"50\"}
  capacity: {cpu: \"8\", memory: 16Gi, pods: \"50\"}
";

const APP: &str = "apiVersion: apps/v1
kind: Deployment
metadata: {name: app, labels: {tier: web}}
spec:
  replicas: 1
  selector: {matchLabels: {app: app}}
  template:
    metadata: {labels: {app: app}}
    spec:
      containers: [{name: c, image: nginx}]
";

/// A workload-only world (no Cluster API controllers) served over TCP.
async fn world() -> sim::RunningWorld {
    sim::serve_world(ServeWorldConfig {
        world: WorldConfig {
            capi: CapiConfig {
                enabled: false,
                ..CapiConfig::default()
            },
            ..WorldConfig::default()
        },
        ..ServeWorldConfig::default()
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_day_two_on_a_served_world() {
    if !kubectl_available().await {
        eprintln!("SKIPPED: kubectl is not on PATH");
        return;
    }
    let world = world().await;
    let k = Kubectl::new(world.workload_kubeconfig());
    let files = tempfile::tempdir().unwrap();
    k.ok(&["apply", "-f", &write(files.path(), "node.yaml", NODE)])
        .await;

    k.ok(&[
        "create",
        "deployment",
        "web",
        "--image=nginx",
        "--replicas=2",
    ])
    .await;
    let out = k
        .ok(&["rollout", "status", "deployment/web", "--timeout=60s"])
        .await;
    assert!(out.contains("successfully rolled out"), "{out}");
    let out = k.ok(&["scale", "deployment", "web", "--replicas=3"]).await;
    assert!(out.contains("deployment.apps/web scaled"), "{out}");
    k.ok(&["rollout", "status", "deployment/web", "--timeout=60s"])
        .await;
    let out = k
        .ok(&[
            "wait",
            "--for=condition=Available",
            "deployment/web",
            "--timeout=30s",
        ])
        .await;
    assert!(out.contains("condition met"), "{out}");

    k.ok(&["label", "deployment", "web", "team=a"]).await;
    k.ok(&["annotate", "deployment", "web", "note=hello"]).await;
    k.ok(&[
        "patch",
        "deployment",
        "web",
        "--type=merge",
        "-p",
        r#"{"metadata":{"labels":{"merge":"yes"}}}"#,
    ])
    .await;
    k.ok(&[
        "patch",
        "deployment",
        "web",
        "--type=json",
        "-p",
        r#"[{"op":"add","path":"/metadata/labels/json","value":"yes"}]"#,
    ])
    .await;
    k.ok(&["patch", "deployment", "web", "-p", r#"{"spec":{"template":{"spec":{"containers":[{"name":"nginx","env":[{"name":"A","value":"1"}]}]}}}}"#]).await;
    let d = json(&k.ok(&["get", "deployment", "web", "-o", "json"]).await);
    let labels = &d["metadata"]["labels"];
    assert_eq!(
        (&labels["team"], &labels["merge"], &labels["json"]),
        (&"a".into(), &"yes".into(), &"yes".into())
    );
    assert_eq!(d["metadata"]["annotations"]["note"], "hello");
    let c = &d["spec"]["template"]["spec"]["containers"];
    assert_eq!(
        c.as_array().unwrap().len(),
        1,
        "strategic merge by name: {c}"
    );
    assert_eq!(
        (&c[0]["image"], &c[0]["env"][0]["value"]),
        (&"nginx".into(), &"1".into())
    );

    // Apply, client-side then server-side, and printing.
    let app = write(files.path(), "app.yaml", APP);
    assert!(
        k.ok(&["apply", "-f", &app])
            .await
            .contains("deployment.apps/app created")
    );
    let edited = write(
        files.path(),
        "app2.yaml",
        &APP.replace("replicas: 1", "replicas: 2"),
    );
    assert!(
        k.ok(&["apply", "-f", &edited])
            .await
            .contains("deployment.apps/app configured")
    );
    let out = k.ok(&["apply", "--server-side", "-f", &edited]).await;
    assert!(
        out.contains("deployment.apps/app serverside-applied"),
        "{out}"
    );
    let yaml = k.ok(&["get", "deployment", "app", "-o", "yaml"]).await;
    assert!(
        yaml.contains("replicas: 2") && yaml.contains("kind: Deployment"),
        "{yaml}"
    );
    let wide = k.ok(&["get", "deployments", "-o", "wide"]).await;
    assert!(
        wide.starts_with("NAME") && wide.contains("web") && wide.contains("app"),
        "{wide}"
    );
    let cols = k
        .ok(&[
            "get",
            "deployments",
            "-l",
            "tier=web",
            "-o",
            "custom-columns=NAME:.metadata.name,REPLICAS:.spec.replicas",
        ])
        .await;
    assert_eq!(
        cols.split_whitespace().collect::<Vec<_>>(),
        vec!["NAME", "REPLICAS", "app", "2"]
    );
    let jp = k
        .ok(&[
            "get",
            "pods",
            "-l",
            "app=web",
            "-o",
            "jsonpath={.items[*].spec.nodeName}",
        ])
        .await;
    let nodes: Vec<&str> = jp.split_whitespace().collect();
    assert!(
        nodes.len() >= 3 && nodes.iter().all(|n| *n == "node-a"),
        "{jp}"
    );

    // Node maintenance.
    assert!(
        k.ok(&["cordon", "node-a"])
            .await
            .contains("node/node-a cordoned")
    );
    let out = k
        .ok(&["drain", "node-a", "--ignore-daemonsets", "--timeout=60s"])
        .await;
    assert!(out.contains("node/node-a drained"), "{out}");
    let unschedulable = k
        .ok(&[
            "get",
            "node",
            "node-a",
            "-o",
            "jsonpath={.spec.unschedulable}",
        ])
        .await;
    assert_eq!(unschedulable, "true");
    assert!(
        k.ok(&["uncordon", "node-a"])
            .await
            .contains("node/node-a uncordoned")
    );
    k.ok(&["rollout", "status", "deployment/web", "--timeout=60s"])
        .await;

    // Deletes with each cascade.
    k.ok(&["delete", "deployment", "app", "--cascade=orphan"])
        .await;
    let rs = json(
        &k.ok(&["get", "replicasets", "-l", "app=app", "-o", "json"])
            .await,
    );
    let items = rs["items"].as_array().unwrap();
    assert!(!items.is_empty(), "orphaned ReplicaSets stay");
    assert!(
        items
            .iter()
            .all(|r| r["metadata"].get("ownerReferences").is_none())
    );
    k.ok(&[
        "delete",
        "replicasets",
        "-l",
        "app=app",
        "--cascade=background",
    ])
    .await;
    k.ok(&[
        "delete",
        "deployment",
        "web",
        "--cascade=foreground",
        "--timeout=60s",
    ])
    .await;
    for _ in 0..120 {
        let left = k.ok(&["get", "replicasets,pods", "-o", "name"]).await;
        if left.trim().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(
        k.ok(&["get", "replicasets,pods", "-o", "name"])
            .await
            .trim(),
        ""
    );

    // Cluster API short names and category on the management cluster.
    let m = Kubectl::new(world.management_kubeconfig());
    let resources = m
        .ok(&["api-resources", "--api-group=cluster.x-k8s.io"])
        .await;
    for (plural, short) in [
        ("machinedeployments", "md"),
        ("machinesets", "ms"),
        ("machines", "ma"),
    ] {
        assert!(
            resources
                .lines()
                .any(|l| l.starts_with(plural) && l.split_whitespace().nth(1) == Some(short)),
            "{resources}"
        );
    }
    m.ok(&["get", "md,ms,ma"]).await;
    m.ok(&["get", "cluster-api"]).await;
    let out = m.ok(&["explain", "machinedeployment.spec"]).await;
    assert!(out.contains("KIND:       MachineDeployment"), "{out}");
    world.shutdown().await.unwrap();
}
