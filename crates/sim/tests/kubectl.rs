//! The real `kubectl` against a served sim: apply a CRD and a custom resource from YAML, get
//! as YAML, scale, watch (ADDED then MODIFIED), delete, api-resources, and apply/get of a
//! built-in kind; the everyday verbs (server-side apply, patches, label, annotate, scale, wait,
//! cordon, printed columns, cascading deletes); the objects `kubectl create` makes, compared with
//! those the real kube-apiserver made (recorded in `tests/recorded/kubectl/creates.json`). A
//! missing `kubectl` fails every test, saying how to install it (the README's test command does).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod recording;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::AsyncReadExt;
use tokio::process::Command;

/// Guard against a hung kubectl: fail instead of waiting forever.
const HANG: Duration = Duration::from_secs(60);

struct Kubectl {
    kubeconfig: PathBuf,
    cache: tempfile::TempDir,
}

struct Output {
    ok: bool,
    stdout: String,
    stderr: String,
}

impl Kubectl {
    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("kubectl");
        cmd.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(self.cache.path())
            .args(args)
            .stdin(Stdio::null())
            .kill_on_drop(true);
        cmd
    }

    async fn run(&self, args: &[&str]) -> Output {
        let out = tokio::time::timeout(HANG, self.command(args).output())
            .await
            .expect("kubectl hung")
            .expect("kubectl runs");
        Output {
            ok: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    async fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args).await;
        assert!(
            out.ok,
            "kubectl {args:?} failed:\n{}\n{}",
            out.stdout, out.stderr
        );
        out.stdout
    }
}

/// Fails the test when `kubectl` cannot run: nothing here passes without it.
async fn require_kubectl() {
    let works = match Command::new("kubectl")
        .args(["version", "--client"])
        .output()
        .await
    {
        Ok(out) => out.status.success(),
        Err(_) => false,
    };
    assert!(
        works,
        "these tests run kubectl, which is not on PATH: the README's test command \
         (`scripts/test`) installs it (Debian: apt-get install kubernetes-client)"
    );
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

const NODEPOOL: &str = "apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default
spec:
  replicas: 1
  template:
    spec:
      nodeClassRef:
        group: karpenter.cluster.x-k8s.io
        kind: ClusterAPINodeClass
        name: default
      requirements: []
";

const CONFIGMAP: &str = "apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  labels:
    app: demo
data:
  mode: fast
";

/// `kind`'s Karpenter CRD written to `dir` as YAML; the file's path.
fn karpenter_crd_file(dir: &Path, kind: &str) -> String {
    let crd = api::crd::all()
        .into_iter()
        .find(|c| c.spec.names.kind == kind)
        .unwrap();
    write(dir, "crd.yaml", &api::crd::render(&crd).unwrap())
}

/// Read JSON documents from a stream until `done` says enough.
async fn read_json_until(
    out: &mut tokio::process::ChildStdout,
    mut done: impl FnMut(&[Value]) -> bool,
) -> Vec<Value> {
    let mut buf = Vec::new();
    let mut chunk = [0_u8; 8192];
    loop {
        let Ok(read) = tokio::time::timeout(HANG, out.read(&mut chunk)).await else {
            panic!("no watch output after: {}", String::from_utf8_lossy(&buf));
        };
        let n = read.unwrap();
        assert!(
            n > 0,
            "kubectl get -w ended early: {}",
            String::from_utf8_lossy(&buf)
        );
        buf.extend_from_slice(&chunk[..n]);
        let docs: Vec<Value> = serde_json::Deserializer::from_slice(&buf)
            .into_iter::<Value>()
            .map_while(Result::ok)
            .collect();
        if done(&docs) {
            return docs;
        }
    }
}

fn event_types(docs: &[Value]) -> Vec<String> {
    docs.iter()
        .map(|d| d["type"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_drives_a_served_sim() {
    require_kubectl().await;
    let server = sim::serve("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let k = Kubectl {
        kubeconfig: server.kubeconfig_path().to_owned(),
        cache: tempfile::tempdir().unwrap(),
    };
    let files = tempfile::tempdir().unwrap();
    let crd_file = karpenter_crd_file(files.path(), "NodePool");
    let pool_file = write(files.path(), "pool.yaml", NODEPOOL);

    let out = k.ok(&["apply", "-f", &crd_file]).await;
    assert!(out.contains("created"), "{out}");
    let out = k.ok(&["apply", "-f", &pool_file]).await;
    assert!(
        out.contains("nodepool.karpenter.sh/default created"),
        "{out}"
    );

    let yaml = k.ok(&["get", "nodepool", "default", "-o", "yaml"]).await;
    let obj: Value = serde_norway::from_str(&yaml).unwrap();
    assert_eq!(obj["kind"], "NodePool");
    assert_eq!(obj["spec"]["replicas"], 1);
    assert_eq!(obj["metadata"]["generation"], 1);
    assert!(obj["metadata"]["uid"].is_string());

    let mut watch = k
        .command(&[
            "get",
            "nodepools",
            "-w",
            "--output-watch-events",
            "-o",
            "json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = watch.stdout.take().unwrap();
    let added = read_json_until(&mut stdout, |d| !d.is_empty()).await;
    assert_eq!(event_types(&added), vec!["ADDED"]);

    let out = k
        .ok(&["scale", "nodepool", "default", "--replicas=3"])
        .await;
    assert!(out.contains("scaled"), "{out}");
    let modified = read_json_until(&mut stdout, |d| !d.is_empty()).await;
    assert_eq!(event_types(&modified), vec!["MODIFIED"]);
    assert_eq!(modified[0]["object"]["spec"]["replicas"], 3);
    watch.kill().await.unwrap();

    let replicas = k
        .ok(&[
            "get",
            "nodepool",
            "default",
            "-o",
            "jsonpath={.spec.replicas}",
        ])
        .await;
    assert_eq!(replicas, "3");
    // Re-applying patches (client-side apply) back to the file's replicas.
    let out = k.ok(&["apply", "-f", &pool_file]).await;
    assert!(out.contains("configured"), "{out}");

    let resources = k.ok(&["api-resources"]).await;
    let line = resources
        .lines()
        .find(|l| l.starts_with("nodepools"))
        .unwrap();
    assert!(
        line.contains("karpenter.sh/v1") && line.contains("NodePool"),
        "{line}"
    );
    assert!(
        resources
            .lines()
            .any(|l| l.starts_with("pods ") && l.contains("po"))
    );

    let out = k.ok(&["delete", "nodepool", "default"]).await;
    assert!(out.contains("deleted"), "{out}");
    let gone = k.run(&["get", "nodepool", "default"]).await;
    assert!(!gone.ok);
    assert!(
        gone.stderr.contains("NotFound") || gone.stderr.contains("not found"),
        "{}",
        gone.stderr
    );

    // Built-in kinds through apply (JSON on the wire) and get.
    let cm_file = write(files.path(), "cm.yaml", CONFIGMAP);
    k.ok(&["apply", "-f", &cm_file]).await;
    let out = k.ok(&["apply", "-f", &cm_file]).await;
    assert!(out.contains("unchanged"), "{out}");
    let names = k
        .ok(&["get", "configmaps", "-l", "app=demo", "-o", "name"])
        .await;
    assert_eq!(names.trim(), "configmap/settings");
    let ns = k.ok(&["get", "namespaces", "-o", "name"]).await;
    assert!(ns.contains("namespace/kube-system"), "{ns}");

    server.shutdown().await.unwrap();
}

/// `kubectl auth can-i` (SelfSubjectAccessReview and, for `--list`, SelfSubjectRulesReview,
/// both sent as protobuf): yes to everything, as sim has no authorization.
const WEB: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 2
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: web
        image: nginx
---
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  selector:
    app: web
  ports:
  - port: 80
    targetPort: 8080
---
apiVersion: v1
kind: Node
metadata:
  name: n1
";

/// What users type every day, against a served sim: server-side apply, merge and JSON
/// patches, label, annotate, scale, wait, cordon and uncordon, `get`'s printed columns (and
/// `-o wide`, custom columns), and delete with each cascade.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_everyday_verbs() {
    require_kubectl().await;
    let server = sim::serve("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let files = tempfile::tempdir().unwrap();
    let k = Kubectl {
        kubeconfig: server.kubeconfig_path().to_owned(),
        cache: tempfile::tempdir().unwrap(),
    };
    let web = write(files.path(), "web.yaml", WEB);
    let out = k.ok(&["apply", "--server-side", "-f", &web]).await;
    assert!(
        out.contains("deployment.apps/web serverside-applied"),
        "{out}"
    );
    k.ok(&[
        "patch",
        "deployment",
        "web",
        "-p",
        r#"{"spec":{"replicas":3}}"#,
    ])
    .await;
    k.ok(&[
        "patch",
        "deployment",
        "web",
        "--type=json",
        "-p",
        r#"[{"op":"replace","path":"/spec/replicas","value":4}]"#,
    ])
    .await;
    k.ok(&["label", "deployment", "web", "tier=front"]).await;
    k.ok(&["annotate", "deployment", "web", "note=hi"]).await;
    let columns = k
        .ok(&[
            "get",
            "deployment",
            "web",
            "-o",
            "custom-columns=NAME:.metadata.name,REPLICAS:.spec.replicas,TIER:.metadata.labels.tier,NOTE:.metadata.annotations.note",
        ])
        .await;
    let row: Vec<&str> = columns.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(row, ["web", "4", "front", "hi"], "{columns}");
    k.ok(&["scale", "deployment", "web", "--replicas=1"]).await;
    k.ok(&[
        "wait",
        "--for=jsonpath={.spec.replicas}=1",
        "deployment/web",
        "--timeout=30s",
    ])
    .await;
    // kube-apiserver's columns, from the server's Table.
    let wide = k.ok(&["get", "deployment", "web", "-o", "wide"]).await;
    let header: Vec<&str> = wide.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAME",
            "READY",
            "UP-TO-DATE",
            "AVAILABLE",
            "AGE",
            "CONTAINERS",
            "IMAGES",
            "SELECTOR"
        ],
        "{wide}"
    );
    assert!(
        wide.contains("0/1") && wide.contains("nginx") && wide.contains("app=web"),
        "{wide}"
    );
    let services = k.ok(&["get", "service", "web"]).await;
    assert!(
        services.contains("PORT(S)") && services.contains("80/TCP"),
        "{services}"
    );
    k.ok(&["cordon", "n1"]).await;
    let nodes = k.ok(&["get", "nodes"]).await;
    assert!(nodes.contains("SchedulingDisabled"), "{nodes}");
    k.ok(&["uncordon", "n1"]).await;
    let nodes = k.ok(&["get", "nodes"]).await;
    assert!(!nodes.contains("SchedulingDisabled"), "{nodes}");
    k.ok(&["delete", "deployment", "web", "--cascade=foreground"])
        .await;
    k.ok(&["delete", "service", "web", "--cascade=orphan"])
        .await;
    let left = k.ok(&["get", "deployments,services", "-o", "name"]).await;
    assert!(left.trim().is_empty(), "{left}");
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_auth_can_i_says_yes() {
    require_kubectl().await;
    let server = sim::serve("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let k = Kubectl {
        kubeconfig: server.kubeconfig_path().to_owned(),
        cache: tempfile::tempdir().unwrap(),
    };
    let out = k.ok(&["auth", "can-i", "create", "pods"]).await;
    assert_eq!(out.trim(), "yes");
    let out = k
        .ok(&["auth", "can-i", "delete", "nodes", "--subresource=status"])
        .await;
    assert_eq!(out.trim(), "yes");
    let out = k.ok(&["auth", "can-i", "get", "/metrics"]).await;
    assert_eq!(out.trim(), "yes");
    let out = k
        .ok(&["auth", "can-i", "--list", "-n", "kube-system"])
        .await;
    assert!(
        out.lines()
            .any(|l| l.starts_with("*.*") && l.trim_end().ends_with("[*]")),
        "{out}"
    );
    server.shutdown().await.unwrap();
}

const NODE_AND_POD: &str = "apiVersion: v1
kind: Node
metadata:
  name: n1
---
apiVersion: v1
kind: Pod
metadata:
  name: lone
  namespace: default
spec:
  nodeName: n1
  containers:
  - name: c
    image: nginx
";

/// `kubectl create <kind>` for each built-in kind sim serves, and `kubectl drain`: typed
/// clients, so protobuf request bodies ([`sim::protobuf`]); the objects read back as JSON.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_create_sends_protobuf_that_sim_decodes() {
    require_kubectl().await;
    let server = sim::serve("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let k = Kubectl {
        kubeconfig: server.kubeconfig_path().to_owned(),
        cache: tempfile::tempdir().unwrap(),
    };
    let get = |args: &'static [&'static str]| {
        let k = &k;
        async move {
            let mut all = args.to_vec();
            all.extend(["-o", "json"]);
            serde_json::from_str::<Value>(&k.ok(&all).await).unwrap()
        }
    };

    k.ok(&["create", "namespace", "x"]).await;
    let ns = get(&["get", "namespace", "x"]).await;
    assert_eq!(ns["metadata"]["name"], "x");
    assert_eq!(ns["status"]["phase"], "Active");

    k.ok(&[
        "create",
        "configmap",
        "c",
        "-n",
        "x",
        "--from-literal=a=b",
        "--from-literal=n=1",
    ])
    .await;
    let cm = get(&["get", "configmap", "c", "-n", "x"]).await;
    assert_eq!(cm["data"], serde_json::json!({"a": "b", "n": "1"}));

    k.ok(&[
        "create",
        "secret",
        "generic",
        "s",
        "--from-literal=k=v",
        "--type=Opaque",
    ])
    .await;
    let s = get(&["get", "secret", "s"]).await;
    assert_eq!(s["data"], serde_json::json!({"k": "dg=="}));
    assert_eq!(s["type"], "Opaque");

    k.ok(&[
        "create",
        "secret",
        "docker-registry",
        "reg",
        "--docker-server=r.io",
        "--docker-username=u",
        "--docker-password=p",
    ])
    .await;
    let reg = get(&["get", "secret", "reg"]).await;
    assert_eq!(reg["type"], "kubernetes.io/dockerconfigjson");
    assert!(reg["data"][".dockerconfigjson"].is_string(), "{reg}");

    // `secret tls` checks the pair: a throwaway one from openssl, when there is one.
    let files = tempfile::tempdir().unwrap();
    let (cert, key) = (files.path().join("c.pem"), files.path().join("k.pem"));
    let made = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
        ])
        .args(["-nodes", "-days", "1", "-subj", "/CN=sim", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .await
        .is_ok_and(|o| o.status.success());
    if made {
        let cert_arg = format!("--cert={}", cert.display());
        let key_arg = format!("--key={}", key.display());
        k.ok(&["create", "secret", "tls", "t", &cert_arg, &key_arg])
            .await;
        let t = get(&["get", "secret", "t"]).await;
        assert_eq!(t["type"], "kubernetes.io/tls");
        assert!(
            t["data"]["tls.crt"].is_string() && t["data"]["tls.key"].is_string(),
            "{t}"
        );
    } else {
        eprintln!("no openssl: `kubectl create secret tls` not tried");
    }

    k.ok(&["create", "serviceaccount", "sa"]).await;
    let sa = get(&["get", "serviceaccount", "sa"]).await;
    assert_eq!(sa["metadata"]["name"], "sa");

    k.ok(&[
        "create",
        "deployment",
        "web",
        "--image=nginx",
        "--replicas=2",
        "--port=80",
    ])
    .await;
    let d = get(&["get", "deployment", "web"]).await;
    assert_eq!(d["spec"]["replicas"], 2);
    assert_eq!(d["spec"]["selector"]["matchLabels"]["app"], "web");
    assert_eq!(d["spec"]["template"]["metadata"]["labels"]["app"], "web");
    let container = &d["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["name"], "nginx");
    assert_eq!(container["image"], "nginx");
    assert_eq!(container["ports"][0]["containerPort"], 80);

    k.ok(&[
        "create",
        "deployment",
        "none",
        "--image=nginx",
        "--replicas=0",
    ])
    .await;
    let none = get(&["get", "deployment", "none"]).await;
    assert_eq!(none["spec"]["replicas"], 0);

    k.ok(&["create", "job", "j", "--image=busybox", "--", "echo", "hi"])
        .await;
    let j = get(&["get", "job", "j"]).await;
    let container = &j["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["image"], "busybox");
    assert_eq!(container["command"], serde_json::json!(["echo", "hi"]));
    assert_eq!(j["spec"]["template"]["spec"]["restartPolicy"], "Never");

    k.ok(&[
        "create",
        "poddisruptionbudget",
        "pdb",
        "--selector=app=web",
        "--min-available=1",
    ])
    .await;
    let pdb = get(&["get", "pdb", "pdb"]).await;
    assert_eq!(pdb["spec"]["minAvailable"], 1);
    assert_eq!(pdb["spec"]["selector"]["matchLabels"]["app"], "web");
    k.ok(&[
        "create",
        "pdb",
        "half",
        "--selector=app=x",
        "--max-unavailable=50%",
    ])
    .await;
    let half = get(&["get", "pdb", "half"]).await;
    assert_eq!(half["spec"]["maxUnavailable"], "50%");

    // `kubectl run`: a Pod.
    k.ok(&["run", "p", "--image=nginx", "--labels=a=b", "--env=E=1"])
        .await;
    let p = get(&["get", "pod", "p"]).await;
    assert_eq!(p["metadata"]["labels"]["a"], "b");
    assert_eq!(
        p["spec"]["containers"][0]["env"][0],
        serde_json::json!({"name": "E", "value": "1"})
    );

    // `kubectl drain`: a cordon (a patch) and the eviction of the node's pod (protobuf).
    let f = write(files.path(), "node.yaml", NODE_AND_POD);
    k.ok(&["apply", "-f", &f]).await;
    let out = k
        .ok(&[
            "drain",
            "n1",
            "--force",
            "--grace-period=0",
            "--timeout=30s",
        ])
        .await;
    assert!(out.contains("drained"), "{out}");
    let gone = k.run(&["get", "pod", "lone"]).await;
    assert!(!gone.ok, "{}", gone.stdout);
    let node = get(&["get", "node", "n1"]).await;
    assert_eq!(node["spec"]["unschedulable"], true);

    server.shutdown().await.unwrap();
}

/// `kubectl` commands that send protobuf, the object each makes, and the fields of it that
/// must read back the same from sim and from kube-apiserver (kube-apiserver's extra defaults
/// left out: `DIFFERENCES.md` 1).
const CREATES: &[(&[&str], &[&str], &[&str])] = &[
    (
        &["create", "namespace", "x"],
        &["namespace", "x"],
        &["/metadata/name"],
    ),
    (
        &[
            "create",
            "configmap",
            "c",
            "-n",
            "x",
            "--from-literal=a=b",
            "--from-literal=n=1",
        ],
        &["configmap", "c", "-n", "x"],
        &["/data", "/metadata/namespace"],
    ),
    (
        &[
            "create",
            "secret",
            "generic",
            "s",
            "--from-literal=k=v",
            "--type=Opaque",
        ],
        &["secret", "s"],
        &["/data", "/type"],
    ),
    (
        &[
            "create",
            "secret",
            "docker-registry",
            "reg",
            "--docker-server=r.io",
            "--docker-username=u",
            "--docker-password=p",
        ],
        &["secret", "reg"],
        &["/data", "/type"],
    ),
    (
        &["create", "serviceaccount", "sa"],
        &["serviceaccount", "sa"],
        &["/metadata/name"],
    ),
    (
        &[
            "create",
            "deployment",
            "web",
            "--image=nginx",
            "--replicas=2",
            "--port=80",
        ],
        &["deployment", "web"],
        &[
            "/spec/replicas",
            "/spec/selector",
            "/spec/template/metadata/labels",
            "/spec/template/spec/containers/0/name",
            "/spec/template/spec/containers/0/image",
            "/spec/template/spec/containers/0/ports/0/containerPort",
        ],
    ),
    (
        &[
            "create",
            "deployment",
            "none",
            "--image=nginx",
            "--replicas=0",
        ],
        &["deployment", "none"],
        &["/spec/replicas"],
    ),
    (
        &["create", "job", "j", "--image=busybox", "--", "echo", "hi"],
        &["job", "j"],
        &[
            "/spec/template/spec/containers/0/image",
            "/spec/template/spec/containers/0/command",
            "/spec/template/spec/restartPolicy",
        ],
    ),
    (
        &[
            "create",
            "poddisruptionbudget",
            "pdb",
            "--selector=app=web",
            "--min-available=1",
        ],
        &["pdb", "pdb"],
        &["/spec"],
    ),
    (
        &[
            "create",
            "pdb",
            "half",
            "--selector=app=x",
            "--max-unavailable=50%",
        ],
        &["pdb", "half"],
        &["/spec"],
    ),
    (
        &["create", "service", "clusterip", "svc", "--tcp=80:8080"],
        &["service", "svc"],
        &["/spec/ports", "/spec/selector", "/spec/type"],
    ),
    (
        &[
            "create",
            "service",
            "nodeport",
            "np",
            "--tcp=81:8081",
            "--node-port=30081",
        ],
        &["service", "np"],
        &[
            "/spec/ports/0/nodePort",
            "/spec/ports/0/targetPort",
            "/spec/type",
        ],
    ),
    (
        &["create", "service", "loadbalancer", "lb", "--tcp=82:8082"],
        &["service", "lb"],
        &["/spec/ports/0/port", "/spec/type"],
    ),
    (
        &[
            "create",
            "service",
            "externalname",
            "ext",
            "--external-name=example.com",
        ],
        &["service", "ext"],
        &["/spec/externalName", "/spec/type"],
    ),
    (
        &[
            "create",
            "cronjob",
            "cj",
            "--image=busybox",
            "--schedule=*/5 * * * *",
            "--",
            "date",
        ],
        &["cronjob", "cj"],
        &[
            "/spec/schedule",
            "/spec/jobTemplate/spec/template/spec/containers/0/image",
            "/spec/jobTemplate/spec/template/spec/containers/0/command",
        ],
    ),
    (
        &["create", "job", "from-cj", "--from=cronjob/cj"],
        &["job", "from-cj"],
        &[
            "/spec/template/spec/containers/0/command",
            "/metadata/annotations",
        ],
    ),
    (
        &[
            "create",
            "priorityclass",
            "high",
            "--value=1000",
            "--description=d",
        ],
        &["priorityclass", "high"],
        &["/value", "/description"],
    ),
    (
        &["create", "quota", "q", "--hard=cpu=1,memory=1G,pods=2"],
        &["resourcequota", "q"],
        &["/spec/hard"],
    ),
    (
        &[
            "create",
            "role",
            "r",
            "--verb=get,list",
            "--resource=pods,deployments.apps",
        ],
        &["role", "r"],
        &["/rules"],
    ),
    (
        &[
            "create",
            "rolebinding",
            "rb",
            "--role=r",
            "--user=u",
            "--serviceaccount=default:sa",
        ],
        &["rolebinding", "rb"],
        &["/roleRef", "/subjects"],
    ),
    (
        &[
            "create",
            "clusterrole",
            "cr",
            "--verb=get",
            "--non-resource-url=/logs",
        ],
        &["clusterrole", "cr"],
        &["/rules"],
    ),
    (
        &[
            "create",
            "clusterrolebinding",
            "crb",
            "--clusterrole=cr",
            "--group=g",
        ],
        &["clusterrolebinding", "crb"],
        &["/roleRef", "/subjects"],
    ),
    (
        &[
            "create",
            "ingress",
            "ing",
            "--rule=a.io/x*=svc:80",
            "--class=nginx",
        ],
        &["ingress", "ing"],
        &["/spec/rules", "/spec/ingressClassName"],
    ),
    (
        &["run", "p", "--image=nginx", "--labels=a=b", "--env=E=1"],
        &["pod", "p"],
        &[
            "/metadata/labels",
            "/spec/containers/0/image",
            "/spec/containers/0/env",
        ],
    ),
];

/// Run [`CREATES`] and read back the compared fields: `(object, field, value)`.
async fn create_all(k: &Kubectl) -> Vec<(String, String, Value)> {
    let mut out = Vec::new();
    for (create, get, fields) in CREATES {
        k.ok(create).await;
        let mut args = vec!["get"];
        args.extend_from_slice(get);
        args.extend(["-o", "json"]);
        let obj: Value = serde_json::from_str(&k.ok(&args).await).unwrap();
        for f in *fields {
            let v = obj.pointer(f).cloned().unwrap_or(Value::Null);
            assert!(!v.is_null(), "{get:?} has no {f}: {obj}");
            out.push((get.join(" "), (*f).to_owned(), v));
        }
    }
    out
}

/// The same `kubectl create`/`run` commands against kube-apiserver and sim make the same
/// objects: the protobuf field numbers sim decodes are kube-apiserver's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_kubectl_creates_the_same_objects_as_on_sim() {
    require_kubectl().await;
    let real = sim::realk8s::RealCluster::start(sim::realk8s::RealConfig::default())
        .await
        .unwrap();
    let on_real = create_all(&Kubectl {
        kubeconfig: real.kubeconfig_path().to_owned(),
        cache: tempfile::tempdir().unwrap(),
    })
    .await;
    let server = sim::serve("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let on_sim = create_all(&Kubectl {
        kubeconfig: server.kubeconfig_path().to_owned(),
        cache: tempfile::tempdir().unwrap(),
    })
    .await;
    for (real, sim) in on_real.iter().zip(&on_sim) {
        assert_eq!(real, sim);
    }
    assert_eq!(on_real.len(), on_sim.len());
    server.shutdown().await.unwrap();
    let version = recording::server_version(&real.client().await.unwrap()).await;
    match recording::against_real(CREATES_RECORDING, &version, &answers(&on_real)) {
        Ok(changes) => eprintln!("{changes}"),
        Err(e) => panic!("{e}"),
    }
}

/// The recording of the real server's objects made by [`CREATES`].
const CREATES_RECORDING: &str = "kubectl/creates";

/// [`create_all`]'s fields as JSON: `[{"object", "field", "value"}, ...]`.
fn answers(fields: &[(String, String, Value)]) -> Value {
    fields
        .iter()
        .map(|(object, field, value)| json!({"object": object, "field": field, "value": value}))
        .collect()
}

/// Every command of [`CREATES`] against sim alone: the objects equal those the real
/// kube-apiserver made (its recorded answers), and the important fields of the stored-only
/// kinds are checked by value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_create_of_every_kind_sim_serves() {
    require_kubectl().await;
    let server = sim::serve("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let k = Kubectl {
        kubeconfig: server.kubeconfig_path().to_owned(),
        cache: tempfile::tempdir().unwrap(),
    };
    let fields = create_all(&k).await;
    if let Err(e) = recording::replay(CREATES_RECORDING, &answers(&fields)) {
        panic!("{e}");
    }
    let field = |object: &str, f: &str| {
        fields
            .iter()
            .find(|(o, name, _)| o == object && name == f)
            .map(|(_, _, v)| v.clone())
            .unwrap()
    };
    assert_eq!(
        field("service svc", "/spec/ports"),
        json!([{"name": "80-8080", "port": 80, "protocol": "TCP", "targetPort": 8080}])
    );
    assert_eq!(field("service np", "/spec/ports/0/nodePort"), 30081);
    assert_eq!(field("service ext", "/spec/externalName"), "example.com");
    assert_eq!(field("cronjob cj", "/spec/schedule"), "*/5 * * * *");
    assert_eq!(
        field("job from-cj", "/spec/template/spec/containers/0/command"),
        json!(["date"])
    );
    assert_eq!(field("priorityclass high", "/value"), 1000);
    assert_eq!(
        field("resourcequota q", "/spec/hard"),
        json!({"cpu": "1", "memory": "1G", "pods": "2"})
    );
    assert_eq!(
        field("role r", "/rules"),
        json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
            {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get", "list"]}])
    );
    assert_eq!(
        field("clusterrolebinding crb", "/roleRef"),
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cr"})
    );
    assert_eq!(field("ingress ing", "/spec/ingressClassName"), "nginx");
    assert_eq!(
        field("pdb half", "/spec"),
        json!({"maxUnavailable": "50%",
        "selector": {"matchLabels": {"app": "x"}}})
    );
    server.shutdown().await.unwrap();
}

const NODECLAIM_AND_EVENT: &str = "apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  name: default-abc
  labels:
    karpenter.sh/nodepool: default
    node.kubernetes.io/instance-type: m5-large
    karpenter.sh/capacity-type: on-demand
    topology.kubernetes.io/zone: zone-a
spec:
  nodeClassRef:
    group: karpenter.cluster.x-k8s.io
    kind: ClusterAPINodeClass
    name: default
  requirements: []
---
apiVersion: v1
kind: Event
metadata:
  name: default-abc.1
  namespace: default
type: Normal
reason: Launched
message: Status condition transitioned
involvedObject:
  apiVersion: karpenter.sh/v1
  kind: NodeClaim
  name: default-abc
source:
  component: karpenter
count: 2
firstTimestamp: \"2026-01-01T00:00:00Z\"
lastTimestamp: \"2026-01-01T00:00:00Z\"
";

/// Printer columns read labels through escaped JSONPath keys (`node\.kubernetes\.io/…`), and
/// Events print kube-apiserver's event columns (Name last, wide only).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_prints_label_columns_and_events() {
    require_kubectl().await;
    let server = sim::serve("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let k = Kubectl {
        kubeconfig: server.kubeconfig_path().to_owned(),
        cache: tempfile::tempdir().unwrap(),
    };
    let files = tempfile::tempdir().unwrap();
    let crd_file = karpenter_crd_file(files.path(), "NodeClaim");
    k.ok(&["apply", "-f", &crd_file]).await;
    k.ok(&[
        "wait",
        "--for=condition=Established",
        "crd/nodeclaims.karpenter.sh",
        "--timeout=30s",
    ])
    .await;
    let objects = write(files.path(), "objects.yaml", NODECLAIM_AND_EVENT);
    k.ok(&["create", "-f", &objects]).await;

    let claims = k.ok(&["get", "nodeclaims", "-o", "wide"]).await;
    let row = claims.lines().nth(1).unwrap();
    for value in ["m5-large", "on-demand", "zone-a", "default"] {
        assert!(row.contains(value), "{claims}");
    }
    let events = k.ok(&["get", "events"]).await;
    let header: Vec<&str> = events.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"],
        "{events}"
    );
    let row = events.lines().nth(1).unwrap();
    assert!(
        row.contains("Normal")
            && row.contains("Launched")
            && row.contains("nodeclaim/default-abc")
            && row.contains("Status condition transitioned"),
        "{events}"
    );
    server.shutdown().await.unwrap();
}
