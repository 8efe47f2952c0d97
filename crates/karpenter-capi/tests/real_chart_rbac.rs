//! The chart's RBAC, proven on a real kube-apiserver (issue 13 item 2, "proven, not
//! assumed"). `helm template` of `charts/karpenter-capi` (release `karpenter`, namespace
//! `karpenter`, defaults: CAPI objects in the same cluster) installs its ServiceAccount, both
//! ClusterRoles, the Lease Role and the bindings. The whole controller then runs as that
//! ServiceAccount (a TokenRequest token, not impersonation) on the real server with the
//! simulated Cluster API and kubelets, every request recorded as the API server's RequestInfo
//! sees it: a leader election on the chart's Lease (create, renew, a standby reading it,
//! release, handover); a scale-out (NodeClaims, replicas raised, Machines claimed, Nodes
//! registered, pods Running); a scale-in (emptiness/consolidation: drain by eviction, Machines
//! annotated, replicas lowered); a NodeClaim deleted while a PDB forbids evictions (pods
//! force-deleted past the NodePool's terminationGracePeriod); the last NodeClaim deleted at the
//! MachineDeployment's min size (the Machine deleted directly); the Machine GC's reads.
//!
//! It fails on any 403; on a request the rendered rules do not explain (so the matcher below
//! agrees with the server on everything allowed); on a rule no request needs — for each rule,
//! the requests no other rule authorizes, by a matcher of Kubernetes RBAC (apiGroups,
//! resources with `*` and `*/sub`, verbs, resourceNames); and on a granted verb nothing used
//! unless [`UNEXERCISED_VERBS`] names the path that does. Finally, for every rule and every
//! verb it alone authorized, the same request (as a dry run) is allowed, is a 403 once the rule
//! is removed from its role on the server, and is allowed again once it is back.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use api::{Machine, MachineDeployment, NodeClaim};
use controllers::leader::{LeaderElector, LeaseConfig};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use karpenter_capi::operator::{Operator, OperatorConfig};
use karpenter_capi::scenario;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::{Value, json};
use sim::realk8s::RealCluster;
use world::{Backend, World};

const RELEASE: &str = "karpenter";
const NAMESPACE: &str = "karpenter";

// ---------------------------------------------------------------------------------------------
// The chart, rendered.

/// `helm template` of the chart with its default values, one JSON value per document.
fn render_chart() -> Vec<Value> {
    render_chart_with(&[])
}

/// `helm template` of the chart with `--set` values, one JSON value per document.
fn render_chart_with(values: &[&str]) -> Vec<Value> {
    let helm = chart_tests::Helm::find().unwrap_or_else(|e| panic!("{e}"));
    let sets: Vec<&str> = values.iter().flat_map(|v| ["--set", v]).collect();
    let text = helm
        .template(RELEASE, NAMESPACE, &sets)
        .unwrap_or_else(|e| panic!("helm template failed:\n{e}"));
    let mut docs = Vec::new();
    for doc in text.split("\n---\n") {
        if doc
            .lines()
            .all(|l| l.trim().is_empty() || l.trim_start().starts_with('#'))
        {
            continue;
        }
        let value: Value = serde_norway::from_str(doc)
            .unwrap_or_else(|e| panic!("invalid YAML document: {e}\n{doc}"));
        docs.push(value);
    }
    docs
}

fn kind(doc: &Value) -> &str {
    doc["kind"].as_str().unwrap_or_default()
}

fn name(doc: &Value) -> &str {
    doc["metadata"]["name"].as_str().unwrap_or_default()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------
// Kubernetes RBAC, as the authorizer evaluates it (pkg/apis/rbac/v1/evaluation_helpers.go).

/// One PolicyRule of a rendered role.
#[derive(Debug, Clone)]
struct Rule {
    /// `ClusterRole/<name>` or `Role/<namespace>/<name>`, and the rule's index.
    role: String,
    index: usize,
    /// A Role's rules apply in its namespace only.
    namespace: Option<String>,
    groups: Vec<String>,
    resources: Vec<String>,
    verbs: Vec<String>,
    names: Vec<String>,
}

impl Rule {
    fn label(&self) -> String {
        let names = if self.names.is_empty() {
            String::new()
        } else {
            format!(" names={:?}", self.names)
        };
        format!(
            "{}#{} {:?} {:?} {:?}{names}",
            self.role, self.index, self.groups, self.resources, self.verbs
        )
    }

    fn matches(&self, r: &Request) -> bool {
        self.matches_verb(r, &r.verb)
    }

    /// Whether the rule would authorize `r` were its verb `verb`.
    fn matches_verb(&self, r: &Request, verb: &str) -> bool {
        if r.resource.is_empty() {
            return false; // non-resource URLs: the chart grants none (see `discovery`)
        }
        if let Some(ns) = &self.namespace
            && *ns != r.namespace
        {
            return false;
        }
        let any = |list: &[String], want: &str| list.iter().any(|x| x == "*" || x == want);
        let combined = if r.subresource.is_empty() {
            r.resource.clone()
        } else {
            format!("{}/{}", r.resource, r.subresource)
        };
        let resource_ok = self.resources.iter().any(|x| {
            x == "*"
                || *x == combined
                || (!r.subresource.is_empty() && *x == format!("*/{}", r.subresource))
        });
        // resourceNames never match a request without a name (create, list/watch without a
        // metadata.name field selector, deletecollection).
        let name_ok = self.names.is_empty() || (!r.name.is_empty() && self.names.contains(&r.name));
        any(&self.verbs, verb) && any(&self.groups, &r.group) && resource_ok && name_ok
    }
}

/// Whether some rule of `rules` authorizes `r`, or Kubernetes' default `system:discovery`
/// binding does (every authenticated user may GET the discovery documents: `/api`, `/apis`,
/// `/apis/<group>[/<version>]`, `/version`, the health and OpenAPI paths).
fn authorized(rules: &[&Rule], r: &Request) -> bool {
    rules.iter().any(|rule| rule.matches(r)) || discovery(r)
}

/// A GET the `system:discovery` ClusterRole allows everyone authenticated.
fn discovery(r: &Request) -> bool {
    let path = r.path.split('?').next().unwrap_or_default();
    r.resource.is_empty()
        && r.verb == "get"
        && ([
            "/api", "/apis", "/version", "/healthz", "/livez", "/readyz", "/openapi",
        ]
        .contains(&path)
            || ["/api/", "/apis/", "/openapi/", "/version/"]
                .iter()
                .any(|p| path.starts_with(p)))
}

/// The rules of every role the chart binds to its ServiceAccount `sa` (namespace
/// [`NAMESPACE`]).
fn bound_rules(docs: &[Value], sa: &str) -> Vec<Rule> {
    let ours = |b: &Value| {
        b["subjects"].as_array().is_some_and(|s| {
            s.iter().any(|s| {
                s["kind"] == "ServiceAccount" && s["name"] == sa && s["namespace"] == NAMESPACE
            })
        })
    };
    let mut rules = Vec::new();
    for binding in docs.iter().filter(|d| ours(d)) {
        let (role_kind, role_name) = (
            binding["roleRef"]["kind"].as_str().unwrap(),
            binding["roleRef"]["name"].as_str().unwrap(),
        );
        let namespace = (kind(binding) == "RoleBinding").then(|| {
            binding["metadata"]["namespace"]
                .as_str()
                .unwrap()
                .to_owned()
        });
        let role = docs
            .iter()
            .find(|d| kind(d) == role_kind && name(d) == role_name)
            .unwrap_or_else(|| panic!("{role_kind} {role_name} is not in the chart"));
        let label = match &namespace {
            Some(ns) => format!("Role/{ns}/{role_name}"),
            None => format!("ClusterRole/{role_name}"),
        };
        for (index, r) in role["rules"].as_array().unwrap().iter().enumerate() {
            rules.push(Rule {
                role: label.clone(),
                index,
                namespace: namespace.clone(),
                groups: strings(&r["apiGroups"]),
                resources: strings(&r["resources"]),
                verbs: strings(&r["verbs"]),
                names: strings(&r["resourceNames"]),
            });
        }
    }
    rules
}

// ---------------------------------------------------------------------------------------------
// Recording every request a client makes, as the API server's RequestInfo sees it.

/// One request and its answer.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Request {
    verb: String,
    group: String,
    version: String,
    resource: String,
    subresource: String,
    namespace: String,
    name: String,
    /// The path, for non-resource requests (`resource` empty).
    path: String,
    /// The HTTP status (0: no answer).
    status: u16,
}

impl Request {
    /// `verb group/resource[/subresource] [ns=...] [name=...]`, or `verb path`.
    fn shape(&self) -> String {
        if self.resource.is_empty() {
            return format!("{} {}", self.verb, self.path);
        }
        let group = if self.group.is_empty() {
            "core"
        } else {
            &self.group
        };
        let mut out = format!("{} {group}/{}", self.verb, self.resource);
        if !self.subresource.is_empty() {
            out.push_str(&format!("/{}", self.subresource));
        }
        if !self.namespace.is_empty() {
            out.push_str(&format!(" ns={}", self.namespace));
        }
        if !self.name.is_empty() {
            out.push_str(&format!(" name={}", self.name));
        }
        out
    }
}

impl std::fmt::Display for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} -> {}", self.shape(), self.status)
    }
}

/// Kubernetes' RequestInfo of `method path?query` (staging/src/k8s.io/apiserver/pkg/endpoints/
/// request/requestinfo.go), without the status.
fn request_info(method: &http::Method, path: &str, query: Option<&str>) -> Request {
    let params: Vec<(&str, &str)> = query
        .unwrap_or_default()
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .collect();
    let param = |k: &str| params.iter().find(|(key, _)| *key == k).map(|(_, v)| *v);
    let mut r = Request {
        verb: method.as_str().to_lowercase(),
        group: String::new(),
        version: String::new(),
        resource: String::new(),
        subresource: String::new(),
        namespace: String::new(),
        name: String::new(),
        path: path.to_owned(),
        status: 0,
    };
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let rest = match parts.as_slice() {
        ["api", version, rest @ ..] if !rest.is_empty() => {
            r.version = (*version).to_owned();
            rest
        }
        ["apis", group, version, rest @ ..] if !rest.is_empty() => {
            r.group = (*group).to_owned();
            r.version = (*version).to_owned();
            rest
        }
        _ => return r, // discovery, /version, /healthz: non-resource
    };
    let rest = match rest {
        ["namespaces", ns, tail @ ..]
            if !tail.is_empty() && !["status", "finalize"].contains(&tail[0]) =>
        {
            r.namespace = (*ns).to_owned();
            tail
        }
        ["namespaces", ns, ..] => {
            r.namespace = (*ns).to_owned();
            rest
        }
        other => other,
    };
    r.resource = rest[0].to_owned();
    r.name = rest.get(1).map(|s| (*s).to_owned()).unwrap_or_default();
    r.subresource = rest.get(2).map(|s| (*s).to_owned()).unwrap_or_default();
    let watch = matches!(param("watch"), Some("true" | "1"));
    r.verb = match (method.as_str(), r.name.is_empty()) {
        ("GET" | "HEAD", _) if watch => "watch",
        ("GET" | "HEAD", true) => "list",
        ("GET" | "HEAD", false) => "get",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "deletecollection",
        ("DELETE", false) => "delete",
        (other, _) => {
            return Request {
                verb: other.to_lowercase(),
                ..r
            };
        }
    }
    .to_owned();
    // A list or watch selecting one name by field is authorized as that name.
    if matches!(r.verb.as_str(), "list" | "watch")
        && let Some(selector) = param("fieldSelector")
    {
        let selector = selector.replace("%3D", "=").replace("%3d", "=");
        if let Some(n) = selector
            .split(',')
            .find_map(|s| s.strip_prefix("metadata.name="))
        {
            r.name = n.to_owned();
        }
    }
    r
}

/// A tower layer appending every request of the clients it is added to, with its status.
#[derive(Debug, Clone, Default)]
struct Recorder(Arc<Mutex<Vec<Request>>>);

impl Recorder {
    fn requests(&self) -> Vec<Request> {
        self.0.lock().unwrap().clone()
    }
}

impl<S> tower::Layer<S> for Recorder {
    type Service = Recording<S>;

    fn layer(&self, inner: S) -> Recording<S> {
        Recording {
            inner,
            recorder: self.clone(),
        }
    }
}

#[derive(Debug, Clone)]
struct Recording<S> {
    inner: S,
    recorder: Recorder,
}

impl<S, B, RB> tower::Service<http::Request<B>> for Recording<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<RB>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = futures::future::BoxFuture<'static, Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let mut info = request_info(req.method(), req.uri().path(), req.uri().query());
        let recorder = self.recorder.clone();
        let answer = self.inner.call(req);
        Box::pin(async move {
            let answer = answer.await;
            info.status = answer.as_ref().map_or(0, |r| r.status().as_u16());
            recorder.0.lock().unwrap().push(info);
            answer
        })
    }
}

// ---------------------------------------------------------------------------------------------
// The chart installed, and clients of its ServiceAccount.

async fn create<K>(api: Api<K>, doc: &Value)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let object: K = serde_json::from_value(doc.clone()).unwrap();
    api.create(&PostParams::default(), &object)
        .await
        .unwrap_or_else(|e| panic!("cannot create {} {}: {e}", kind(doc), name(doc)));
}

/// Creates the release namespace and the chart's ServiceAccount, roles and bindings; returns
/// the ServiceAccount's name.
async fn install_rbac(admin: &kube::Client, docs: &[Value]) -> String {
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NAMESPACE}})).unwrap();
    Api::<Namespace>::all(admin.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let mut sa = None;
    for doc in docs {
        let namespaced = || doc["metadata"]["namespace"].as_str().unwrap_or(NAMESPACE);
        match kind(doc) {
            "ServiceAccount" => {
                sa = Some(name(doc).to_owned());
                create::<ServiceAccount>(Api::namespaced(admin.clone(), namespaced()), doc).await;
            }
            "ClusterRole" => create::<ClusterRole>(Api::all(admin.clone()), doc).await,
            "ClusterRoleBinding" => {
                create::<ClusterRoleBinding>(Api::all(admin.clone()), doc).await;
            }
            "Role" => create::<Role>(Api::namespaced(admin.clone(), namespaced()), doc).await,
            "RoleBinding" => {
                create::<RoleBinding>(Api::namespaced(admin.clone(), namespaced()), doc).await;
            }
            _ => {}
        }
    }
    sa.expect("the chart renders a ServiceAccount")
}

/// A token of the ServiceAccount `NAMESPACE/sa` from the TokenRequest API.
async fn token(admin: &kube::Client, sa: &str) -> String {
    let request: TokenRequest =
        serde_json::from_value(json!({"spec": {"audiences": [], "expirationSeconds": 3600}}))
            .unwrap();
    Api::<ServiceAccount>::namespaced(admin.clone(), NAMESPACE)
        .create_token_request(sa, &PostParams::default(), &request)
        .await
        .unwrap()
        .status
        .unwrap()
        .token
}

/// A client of `real` authenticating with `token` (no transparent retry, as the controller's
/// own clients), recording into `recorder` when given.
async fn client_as(real: &RealCluster, token: &str, recorder: Option<&Recorder>) -> kube::Client {
    karpenter_capi::connect::install_crypto_provider();
    let yaml = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {}\n    \
         certificate-authority: {}\nusers:\n- name: u\n  user:\n    token: {token}\n\
         contexts:\n- name: x\n  context:\n    cluster: c\n    user: u\ncurrent-context: x\n",
        real.url(),
        real.pki_dir().join("ca.crt").display(),
    );
    let kc = Kubeconfig::from_yaml(&yaml).unwrap();
    let mut config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap();
    config.default_retry = false;
    let builder = kube::client::ClientBuilder::try_from(config).unwrap();
    match recorder {
        Some(r) => builder.with_layer(r).build(),
        None => builder.build(),
    }
}

// ---------------------------------------------------------------------------------------------
// The scenario's objects.

fn md(name: &str, cpu: u32, memory_gi: u32, zone: &str, price: f64) -> Value {
    json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment",
        "metadata": {"name": format!("{name}-{zone}"), "namespace": "default",
            "labels": {"node.cluster.x-k8s.io/karpenter-member": ""},
            "annotations": {
                "capacity.cluster-autoscaler.kubernetes.io/cpu": cpu.to_string(),
                "capacity.cluster-autoscaler.kubernetes.io/memory": format!("{memory_gi}Gi"),
                "capacity.cluster-autoscaler.kubernetes.io/labels":
                    format!("node.kubernetes.io/instance-type={name},topology.kubernetes.io/zone={zone}"),
                "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size": "200",
                "karpenter.cluster.x-k8s.io/price": price.to_string(),
            }},
        "spec": {"clusterName": "e2e", "replicas": 0,
            "selector": {"matchLabels": {"pool": format!("{name}-{zone}")}},
            "template": {"metadata": {"labels": {"pool": format!("{name}-{zone}")}},
                "spec": {"clusterName": "e2e", "bootstrap": {"dataSecretName": "boot"},
                    "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                        "kind": "DockerMachineTemplate", "name": name}}}},
    })
}

/// A real API server (with the simulated Cluster API and kubelets) holding the Karpenter and
/// `DockerMachineTemplate` CRDs, the MachineDeployment `default/m-zone-a` and its template,
/// the NodeClass `default`, a NodePool `default` with `pool_spec` (merged into its spec) and
/// `extra` objects; and the admin client.
async fn real_scenario(pool_spec: Value, extra: Vec<Value>) -> (World, kube::Client) {
    let world = World::start_on(
        Backend::Real,
        karpenter_capi::chaos::world::fast_world_config(0),
    )
    .await
    .unwrap();
    let admin = world
        .real()
        .expect("a real API server")
        .client()
        .await
        .unwrap();
    world::crds::install_karpenter_crds(&admin).await.unwrap();
    world::crds::install(&admin, &[docker_machine_template_crd()])
        .await
        .unwrap();
    let mut pool = json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.cluster.x-k8s.io",
            "kind": "ClusterAPINodeClass", "name": "default"}, "requirements": []}}}});
    if let (Some(spec), Value::Object(more)) = (pool["spec"].as_object_mut(), pool_spec) {
        for (k, v) in more {
            if k == "template" {
                let template = spec["template"]["spec"].as_object_mut().unwrap();
                template.extend(v["spec"].as_object().unwrap().clone());
            } else {
                spec.insert(k, v);
            }
        }
    }
    let mut objects = vec![
        md("m", 4, 16, "zone-a", 0.2),
        json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
            "kind": "DockerMachineTemplate", "metadata": {"name": "m", "namespace": "default"},
            "spec": {"template": {"spec": {}}}}),
        json!({"apiVersion": "karpenter.cluster.x-k8s.io/v1alpha1", "kind": "ClusterAPINodeClass",
            "metadata": {"name": "default"}, "spec": {}}),
        pool,
    ];
    objects.extend(extra);
    scenario::apply(&admin, &objects).await.unwrap();
    (world, admin)
}

/// A minimal `DockerMachineTemplate` CRD, so the template watch lists a served kind.
fn docker_machine_template_crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "metadata": {"name": "dockermachinetemplates.infrastructure.cluster.x-k8s.io"},
        "spec": {"group": "infrastructure.cluster.x-k8s.io", "scope": "Namespaced",
            "names": {"plural": "dockermachinetemplates", "singular": "dockermachinetemplate",
                "kind": "DockerMachineTemplate", "listKind": "DockerMachineTemplateList"},
            "versions": [{"name": "v1beta1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}}]},
    }))
    .unwrap()
}

fn deployment(name: &str, replicas: i32, cpu: &str, memory: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "c", "image": "pause",
                    "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}}},
    })
}

/// [`karpenter_capi::chaos::fast_operator_config`] with the e2e tests' quick disruption loop and a
/// frequent Machine GC.
fn disruptive_operator() -> OperatorConfig {
    let mut config = karpenter_capi::chaos::fast_operator_config();
    // The Machine GC passes often enough to run during the scenario (its GET of each claimed
    // Machine's NodeClaim).
    config.gc.interval = Duration::from_secs(2);
    config.disruption = controllers::disruption::DisruptionConfig {
        poll: Duration::from_millis(500),
        validation_delay: Duration::from_secs(1),
        replacement_timeout: Duration::from_secs(120),
        drift_recheck: Duration::from_secs(2),
        spot_to_spot: false,
    };
    config
}

async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Every Cluster API `K`, read as v1beta2.
async fn list_capi<K>(client: &kube::Client) -> Vec<K>
where
    K: kube::Resource<DynamicType = api::CapiVersion>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    Api::<K>::all_with(client.clone(), &api::CapiVersion::v1beta2())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
}

async fn list<K>(client: &kube::Client) -> Vec<K>
where
    K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    Api::<K>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
}

/// The forbidden requests recorded so far, one line each.
fn forbidden(recorder: &Recorder) -> String {
    recorder
        .requests()
        .iter()
        .filter(|r| r.status == 403)
        .map(ToString::to_string)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect::<Vec<_>>()
        .join("\n  ")
}

/// Waits until exactly `want` live pods run, on `nodes` Nodes with as many Machines, none of
/// them named in `gone`; on a timeout, names the forbidden requests so far.
async fn settled(
    admin: &kube::Client,
    recorder: &Recorder,
    (want, nodes): (usize, usize),
    gone: &[String],
    timeout: Duration,
) {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let pods: Vec<Pod> = list::<Pod>(admin)
            .await
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect();
        let running = pods
            .iter()
            .all(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"));
        let names: Vec<String> = list::<Node>(admin)
            .await
            .iter()
            .map(ResourceExt::name_any)
            .collect();
        let m = list_capi::<Machine>(admin).await.len();
        if pods.len() == want
            && running
            && names.len() == nodes
            && m == nodes
            && !names.iter().any(|n| gone.contains(n))
        {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {want} pods Running on {nodes} node(s) \
             (now {} pods, nodes {names:?}, {m} Machines); forbidden so far:\n  {}",
            pods.len(),
            forbidden(recorder)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn replicas(admin: &kube::Client) -> i32 {
    list_capi::<MachineDeployment>(admin)
        .await
        .iter()
        .map(|m| m.spec.replicas.unwrap_or(0))
        .sum()
}

async fn scale(admin: &kube::Client, deployment: &str, replicas: i32) {
    Api::<Deployment>::namespaced(admin.clone(), "default")
        .patch(
            deployment,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": replicas}})),
        )
        .await
        .unwrap();
}

// ---------------------------------------------------------------------------------------------
// Probing the real authorizer.

/// `r` again, made harmless: writes are dry runs with an empty body, watches end at once.
/// Only its status matters: 403 or not.
async fn probe(client: &kube::Client, r: &Request) -> u16 {
    let mut path = if r.group.is_empty() {
        format!("/api/{}", r.version)
    } else {
        format!("/apis/{}/{}", r.group, r.version)
    };
    if !r.namespace.is_empty() && r.resource != "namespaces" {
        path.push_str(&format!("/namespaces/{}", r.namespace));
    }
    path.push_str(&format!("/{}", r.resource));
    let named = !r.name.is_empty() && !matches!(r.verb.as_str(), "list" | "watch");
    if named {
        path.push_str(&format!("/{}", r.name));
    }
    if !r.subresource.is_empty() {
        path.push_str(&format!("/{}", r.subresource));
    }
    let (method, query) = match r.verb.as_str() {
        "get" => (http::Method::GET, String::new()),
        "list" => (http::Method::GET, "?limit=1".to_owned()),
        "watch" => (http::Method::GET, "?watch=true&timeoutSeconds=1".to_owned()),
        "create" => (http::Method::POST, "?dryRun=All".to_owned()),
        "update" => (http::Method::PUT, "?dryRun=All".to_owned()),
        "patch" => (http::Method::PATCH, "?dryRun=All".to_owned()),
        "delete" => (http::Method::DELETE, "?dryRun=All".to_owned()),
        other => panic!("no probe for verb {other}"),
    };
    let body = if matches!(r.verb.as_str(), "get" | "list" | "watch" | "delete") {
        Vec::new()
    } else {
        b"{}".to_vec()
    };
    let request = http::Request::builder()
        .method(method)
        .uri(format!("{path}{query}"))
        .header(
            "content-type",
            if r.verb == "patch" {
                "application/merge-patch+json"
            } else {
                "application/json"
            },
        )
        .body(kube::client::Body::from(body))
        .unwrap();
    if r.verb == "watch" {
        // An authorized watch answers with its first event or at timeoutSeconds; the
        // authorizer's 403 comes at once, before any watch is set up.
        return match tokio::time::timeout(Duration::from_millis(300), client.send(request)).await {
            Ok(answer) => answer.unwrap().status().as_u16(),
            Err(_) => 200,
        };
    }
    client.send(request).await.unwrap().status().as_u16()
}

/// The rules of the role `rule` belongs to, without it (`drop`) or all of them.
async fn set_role_rules(admin: &kube::Client, docs: &[Value], rule: &Rule, drop: bool) {
    let role_name = rule.role.rsplit('/').next().unwrap();
    let kind_ = if rule.namespace.is_some() {
        "Role"
    } else {
        "ClusterRole"
    };
    let doc = docs
        .iter()
        .find(|d| kind(d) == kind_ && name(d) == role_name)
        .unwrap();
    let mut rules = doc["rules"].as_array().unwrap().clone();
    if drop {
        rules.remove(rule.index);
    }
    let patch = Patch::Merge(json!({"rules": rules}));
    match &rule.namespace {
        Some(ns) => {
            Api::<Role>::namespaced(admin.clone(), ns)
                .patch(role_name, &PatchParams::default(), &patch)
                .await
                .unwrap();
        }
        None => {
            Api::<ClusterRole>::all(admin.clone())
                .patch(role_name, &PatchParams::default(), &patch)
                .await
                .unwrap();
        }
    }
}

/// Probes `r` until the answer is (`forbidden`) or is not a 403, as the authorizer's cache
/// of the roles catches up; returns that status.
async fn probe_until(client: &kube::Client, r: &Request, forbidden: bool, what: &str) -> u16 {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let status = probe(client, r).await;
        if (status == 403) == forbidden {
            return status;
        }
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

// ---------------------------------------------------------------------------------------------

/// Verbs a rule grants that the scenario does not use — `(resource, verb, the code path that
/// does)`. Each rule as a whole is proven needed; these verbs are kept for those paths, which
/// only a race takes.
const UNEXERCISED_VERBS: &[(&str, &str, &str)] = &[
    (
        "nodes",
        "get",
        "a fresh read when the Node cache is behind: disruption/orchestration.rs mark, for a \
         Node not cached yet or after its taint patch's test failed (422/409)",
    ),
    (
        "clusterapinodeclasses",
        "get",
        "a NodeClass the provider's cache has not seen yet, created moments before a NodePool \
         names it (clusterapi/src/provider/reads.rs nodeclass)",
    ),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_the_charts_rbac_is_exactly_what_the_controller_uses() {
    let started = tokio::time::Instant::now();
    let docs = render_chart();
    let (world, admin) = real_scenario(
        json!({"disruption": {"consolidateAfter": "0s"},
            "template": {"spec": {"terminationGracePeriod": "5s"}}}),
        Vec::new(),
    )
    .await;
    let real = world.real().expect("a real API server");

    let sa = install_rbac(&admin, &docs).await;
    let rules = bound_rules(&docs, &sa);
    let token = token(&admin, &sa).await;
    let recorder = Recorder::default();
    let workload = client_as(real, &token, Some(&recorder)).await;
    let management = client_as(real, &token, Some(&recorder)).await;

    // Leader election as run_cmd.rs does it, on the chart's Lease: the first candidate creates
    // the Lease and renews it; a second one reads it and waits.
    let lease = rules
        .iter()
        .find_map(|r| r.names.first().cloned())
        .expect("the Role names the Lease");
    let config = LeaseConfig {
        lease_duration: Duration::from_secs(15),
        renew_deadline: Duration::from_secs(10),
        retry_period: Duration::from_millis(500),
    };
    let leader = LeaderElector::new(workload.clone(), NAMESPACE, &lease, "a".into(), config);
    tokio::time::timeout(Duration::from_secs(20), leader.acquire())
        .await
        .expect("the ServiceAccount takes the Lease");
    let standby = LeaderElector::new(workload.clone(), NAMESPACE, &lease, "b".into(), config);

    let operator = Operator::start(workload.clone(), management.clone(), disruptive_operator());
    // Scale out: three nodes for three 3-CPU pods, then one 1-CPU pod beside each.
    scenario::apply(&admin, &[deployment("big", 3, "3", "1Gi")])
        .await
        .unwrap();
    settled(&admin, &recorder, (3, 3), &[], Duration::from_secs(90)).await;
    assert!(
        tokio::time::timeout(Duration::from_secs(1), standby.acquire())
            .await
            .is_err(),
        "a second candidate waits while the leader renews"
    );
    scenario::apply(&admin, &[deployment("small", 2, "1", "256Mi")])
        .await
        .unwrap();
    settled(&admin, &recorder, (5, 3), &[], Duration::from_secs(60)).await;
    // Scale in: the empty node goes and the two half-empty ones become one (emptiness or
    // consolidation, whichever sees a node first; a drain by eviction).
    scale(&admin, "big", 0).await;
    settled(&admin, &recorder, (2, 1), &[], Duration::from_secs(120)).await;
    assert_eq!(replicas(&admin).await, 1, "replicas lowered with the nodes");
    let records = operator.disruptions();
    eprintln!("disruptions: {records:?}");
    assert_eq!(
        records.iter().map(|r| r.nodes.len()).sum::<usize>(),
        2,
        "emptiness or consolidation removed two nodes: {records:?}"
    );

    // The paths a scale-in does not take. First a NodeClaim deleted by hand while a PDB
    // forbids evicting its pods: past the NodePool's terminationGracePeriod (5 s) they are
    // deleted, bypassing the PDB, and come back on a new node.
    scenario::apply(
        &admin,
        &[
            json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "small", "namespace": "default"},
            "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "small"}}}}),
        ],
    )
    .await
    .unwrap();
    let old: Vec<String> = list::<Node>(&admin)
        .await
        .iter()
        .map(ResourceExt::name_any)
        .collect();
    for nc in list::<NodeClaim>(&admin).await {
        Api::<NodeClaim>::all(admin.clone())
            .delete(&nc.name_any(), &DeleteParams::default())
            .await
            .unwrap();
    }
    settled(&admin, &recorder, (2, 1), &old, Duration::from_secs(90)).await;
    // Then, with no pods left, the last NodeClaim deleted by hand while its MachineDeployment
    // is at its min size: its Machine is deleted directly, replicas stay (Cluster API makes a
    // new Machine in its place).
    assert_eq!(replicas(&admin).await, 1);
    Api::<MachineDeployment>::namespaced_with(
        admin.clone(),
        "default",
        &api::CapiVersion::v1beta2(),
    )
    .patch(
        "m-zone-a",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {
                "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size": "1"}}})),
    )
    .await
    .unwrap();
    scale(&admin, "small", 0).await;
    wait_for("no pods", Duration::from_secs(30), || async {
        list::<Pod>(&admin).await.is_empty().then_some(())
    })
    .await;
    for nc in list::<NodeClaim>(&admin).await {
        Api::<NodeClaim>::all(admin.clone())
            .delete(&nc.name_any(), &DeleteParams::default())
            .await
            .unwrap();
    }
    wait_for(
        "the Machine deleted directly and the NodeClaim gone",
        Duration::from_secs(60),
        || async {
            let deleted = recorder
                .requests()
                .iter()
                .any(|r| r.verb == "delete" && r.resource == "machines" && r.status == 200);
            (deleted && list::<NodeClaim>(&admin).await.is_empty()).then_some(())
        },
    )
    .await;
    assert_eq!(replicas(&admin).await, 1, "replicas stay at the min size");

    // A stand-alone MachineSet, now the cheapest group: a pod's launch raises it (get and
    // patch of machinesets, with the ownership record) and, once the pod is gone, emptiness
    // lowers it again.
    let mut set = md("s", 4, 16, "zone-a", 0.05);
    set["kind"] = json!("MachineSet");
    set["spec"]["template"]["spec"]["infrastructureRef"]["name"] = json!("m");
    scenario::apply(&admin, &[set]).await.unwrap();
    let set_replicas = || async {
        list_capi::<api::MachineSet>(&admin)
            .await
            .iter()
            .find(|s| s.metadata.name.as_deref() == Some("s-zone-a"))
            .and_then(|s| s.spec.replicas)
            .unwrap_or(0)
    };
    // Pinned to the set's shape: the Machine the min size kept has room for it too.
    let mut solo = deployment("solo", 1, "1", "256Mi");
    solo["spec"]["template"]["spec"]["nodeSelector"] =
        json!({"node.kubernetes.io/instance-type": "s"});
    scenario::apply(&admin, &[solo]).await.unwrap();
    wait_for(
        "the pod Running on a Machine of the MachineSet",
        Duration::from_secs(90),
        || async {
            let running = list::<Pod>(&admin).await.iter().any(|p| {
                p.metadata
                    .name
                    .as_deref()
                    .is_some_and(|n| n.starts_with("solo-"))
                    && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
            });
            (running && set_replicas().await == 1).then_some(())
        },
    )
    .await;
    scale(&admin, "solo", 0).await;
    wait_for(
        "the MachineSet lowered to 0",
        Duration::from_secs(90),
        || async { (set_replicas().await == 0).then_some(()) },
    )
    .await;

    // A MachinePool whose provider makes MachinePool Machines, now the cheapest group: the
    // same again through machinepools (list and watch for the cache, get and patch for the
    // raise and the lowering).
    let mut pool = md("p", 4, 16, "zone-a", 0.01);
    pool["kind"] = json!("MachinePool");
    pool["spec"].as_object_mut().unwrap().remove("selector");
    pool["spec"]["template"]["spec"]["version"] = json!("v1.33.1");
    pool["spec"]["template"]["spec"]["infrastructureRef"] = json!({
        "apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerMachinePool",
        "name": "p-zone-a"});
    let infrastructure = json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "DockerMachinePool",
        "metadata": {"name": "p-zone-a", "namespace": "default"}, "spec": {}});
    scenario::apply(&admin, &[infrastructure, pool])
        .await
        .unwrap();
    let pool_replicas = || async {
        list_capi::<api::MachinePool>(&admin)
            .await
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some("p-zone-a"))
            .and_then(|p| p.spec.replicas)
            .unwrap_or(0)
    };
    let mut pooled = deployment("pooled", 1, "1", "256Mi");
    pooled["spec"]["template"]["spec"]["nodeSelector"] =
        json!({"node.kubernetes.io/instance-type": "p"});
    scenario::apply(&admin, &[pooled]).await.unwrap();
    wait_for(
        "the pod Running on a Machine of the MachinePool",
        Duration::from_secs(90),
        || async {
            let running = list::<Pod>(&admin).await.iter().any(|p| {
                p.metadata
                    .name
                    .as_deref()
                    .is_some_and(|n| n.starts_with("pooled-"))
                    && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
            });
            (running && pool_replicas().await == 1).then_some(())
        },
    )
    .await;
    scale(&admin, "pooled", 0).await;
    wait_for(
        "the MachinePool lowered to 0",
        Duration::from_secs(90),
        || async { (pool_replicas().await == 0).then_some(()) },
    )
    .await;
    drop(operator);
    leader.release().await;
    tokio::time::timeout(Duration::from_secs(20), standby.acquire())
        .await
        .expect("the standby takes the released Lease");
    standby.release().await;
    let scenario_done = started.elapsed();

    // No 403, and nothing else the chart's rules do not explain.
    let requests = recorder.requests();
    let all: Vec<&Rule> = rules.iter().collect();
    let forbidden: Vec<&Request> = requests.iter().filter(|r| r.status == 403).collect();
    let unexplained: BTreeSet<String> = requests
        .iter()
        .filter(|r| r.status != 403 && !authorized(&all, r))
        .map(ToString::to_string)
        .collect();
    let distinct: BTreeSet<String> = requests.iter().map(ToString::to_string).collect();
    eprintln!(
        "{} requests as {sa}, {} distinct:\n  {}",
        requests.len(),
        distinct.len(),
        distinct.iter().cloned().collect::<Vec<_>>().join("\n  ")
    );
    assert!(
        forbidden.is_empty(),
        "forbidden requests of the controller running as the chart's ServiceAccount:\n  {}",
        forbidden
            .iter()
            .map(ToString::to_string)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect::<Vec<_>>()
            .join("\n  ")
    );
    assert!(
        unexplained.is_empty(),
        "requests the chart's rules do not authorize (the matcher disagrees with the server):\n  \
         {}",
        unexplained.into_iter().collect::<Vec<_>>().join("\n  ")
    );

    // Every rule is needed: some authorized request only it authorizes.
    let authorized_requests: Vec<&Request> = requests
        .iter()
        .filter(|r| r.status != 403 && !r.resource.is_empty())
        .collect();
    // Per rule, for each verb: a request only that rule authorizes (preferring one that
    // succeeded); a rule with none is not needed.
    let mut needed: Vec<(&Rule, Vec<Request>)> = Vec::new();
    let mut unneeded = Vec::new();
    for rule in &rules {
        let others: Vec<&Rule> = rules
            .iter()
            .filter(|o| o.role != rule.role || o.index != rule.index)
            .collect();
        let mut only: Vec<&&Request> = authorized_requests
            .iter()
            .filter(|r| rule.matches(r) && !authorized(&others, r))
            .collect();
        only.sort_by_key(|r| (!(200..300).contains(&r.status), r.status));
        let examples: Vec<Request> = rule
            .verbs
            .iter()
            .filter_map(|v| only.iter().find(|r| r.verb == *v).map(|r| (**r).clone()))
            .collect();
        if examples.is_empty() {
            unneeded.push(rule.label());
        } else {
            needed.push((rule, examples));
        }
    }
    eprintln!("\nrule -> requests only it authorizes (one per verb used):");
    for (rule, examples) in &needed {
        eprintln!("  {}", rule.label());
        for example in examples {
            eprintln!("      {example}");
        }
    }
    // Verbs granted that no request used (the rule is needed for its other verbs): each must
    // be allowlisted with the path that uses it.
    let mut unlisted = Vec::new();
    eprintln!("\nverbs granted but not used by the scenario:");
    for rule in &rules {
        for verb in &rule.verbs {
            if authorized_requests
                .iter()
                .any(|r| r.verb == *verb && rule.matches(r))
            {
                continue;
            }
            let why = UNEXERCISED_VERBS
                .iter()
                .find(|(resource, v, _)| v == verb && rule.resources.iter().any(|r| r == resource));
            eprintln!(
                "  {verb} of {}: {}",
                rule.label(),
                why.map_or("NOT ALLOWLISTED", |(_, _, why)| why)
            );
            if why.is_none() {
                unlisted.push(format!("{verb} of {}", rule.label()));
            }
        }
    }
    assert!(
        unneeded.is_empty(),
        "rules no recorded request needs:\n  {}",
        unneeded.join("\n  ")
    );
    assert!(
        unlisted.is_empty(),
        "granted verbs nothing used, not in UNEXERCISED_VERBS:\n  {}",
        unlisted.join("\n  ")
    );

    // The real authorizer agrees: without the rule, its example is forbidden; with it back,
    // allowed again.
    let prober = client_as(real, &token, None).await;
    eprintln!("\nthe same requests probed (dry run) with every rule / without the rule / again:");
    for (rule, examples) in &needed {
        let mut before = Vec::new();
        for example in examples {
            let status = probe(&prober, example).await;
            assert_ne!(status, 403, "{example} is allowed with every rule");
            before.push(status);
        }
        set_role_rules(&admin, &docs, rule, true).await;
        let mut without = Vec::new();
        for example in examples {
            let what = format!("{example} forbidden without {}", rule.label());
            without.push(probe_until(&prober, example, true, &what).await);
        }
        set_role_rules(&admin, &docs, rule, false).await;
        for (example, before) in examples.iter().zip(before) {
            let what = format!("{example} allowed again with {}", rule.label());
            let again = probe_until(&prober, example, false, &what).await;
            eprintln!(
                "  {before} / {} / {again}  {}",
                without.remove(0),
                example.shape()
            );
        }
    }
    eprintln!(
        "\n{} rules, each needed and each proven on the server; scenario {scenario_done:?}, \
         total {:?}",
        rules.len(),
        started.elapsed()
    );
}

// ---------------------------------------------------------------------------------------------
// The matcher and RequestInfo themselves (no server).

fn rule(groups: &[&str], resources: &[&str], verbs: &[&str], names: &[&str]) -> Rule {
    let owned = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect();
    Rule {
        role: "ClusterRole/test".into(),
        index: 0,
        namespace: None,
        groups: owned(groups),
        resources: owned(resources),
        verbs: owned(verbs),
        names: owned(names),
    }
}

fn info(method: &str, uri: &str) -> Request {
    let (path, query) = uri
        .split_once('?')
        .map_or((uri, None), |(p, q)| (p, Some(q)));
    request_info(&method.parse().unwrap(), path, query)
}

#[test]
fn request_info_reads_verbs_resources_subresources_namespaces_and_names() {
    let r = info("POST", "/api/v1/namespaces/d/pods/p/eviction");
    assert_eq!(
        (r.verb.as_str(), r.group.as_str(), r.resource.as_str()),
        ("create", "", "pods")
    );
    assert_eq!(
        (
            r.subresource.as_str(),
            r.namespace.as_str(),
            r.name.as_str()
        ),
        ("eviction", "d", "p")
    );
    let r = info(
        "GET",
        "/apis/karpenter.sh/v1/nodeclaims?watch=true&resourceVersion=5",
    );
    assert_eq!(
        (r.verb.as_str(), r.group.as_str()),
        ("watch", "karpenter.sh")
    );
    assert_eq!(info("GET", "/apis/karpenter.sh/v1/nodeclaims").verb, "list");
    assert_eq!(
        info("GET", "/apis/karpenter.sh/v1/nodeclaims/n").verb,
        "get"
    );
    assert_eq!(info("DELETE", "/api/v1/nodes").verb, "deletecollection");
    assert_eq!(info("PATCH", "/api/v1/nodes/n").verb, "patch");
    let ns = info("GET", "/api/v1/namespaces/kube-system");
    assert_eq!(
        (
            ns.resource.as_str(),
            ns.name.as_str(),
            ns.namespace.as_str()
        ),
        ("namespaces", "kube-system", "kube-system")
    );
    let by_field = info(
        "GET",
        "/apis/coordination.k8s.io/v1/namespaces/k/leases?fieldSelector=metadata.name%3Dl&watch=1",
    );
    assert_eq!(
        (by_field.verb.as_str(), by_field.name.as_str()),
        ("watch", "l")
    );
    assert!(info("GET", "/version").resource.is_empty());
    assert!(info("GET", "/apis/karpenter.sh/v1").resource.is_empty());
}

#[test]
fn rules_match_as_kubernetes_rbac_evaluates_them() {
    let eviction = info("POST", "/api/v1/namespaces/d/pods/p/eviction");
    assert!(!rule(&[""], &["pods"], &["*"], &[]).matches(&eviction));
    assert!(rule(&[""], &["pods/eviction"], &["create"], &[]).matches(&eviction));
    assert!(rule(&[""], &["*/eviction"], &["create"], &[]).matches(&eviction));
    assert!(rule(&["*"], &["*"], &["*"], &[]).matches(&eviction));
    assert!(!rule(&["apps"], &["*"], &["*"], &[]).matches(&eviction));
    let templates = info(
        "GET",
        "/apis/infrastructure.cluster.x-k8s.io/v1beta1/dockermachinetemplates",
    );
    assert!(rule(&["infrastructure.cluster.x-k8s.io"], &["*"], &["list"], &[]).matches(&templates));
    assert!(!rule(&["infrastructure.cluster.x-k8s.io"], &["*"], &["get"], &[]).matches(&templates));
    // resourceNames: only requests naming the object.
    let named = rule(&["coordination.k8s.io"], &["leases"], &["*"], &["l"]);
    assert!(named.matches(&info(
        "GET",
        "/apis/coordination.k8s.io/v1/namespaces/k/leases/l"
    )));
    assert!(!named.matches(&info(
        "GET",
        "/apis/coordination.k8s.io/v1/namespaces/k/leases/m"
    )));
    assert!(!named.matches(&info(
        "POST",
        "/apis/coordination.k8s.io/v1/namespaces/k/leases"
    )));
    assert!(!named.matches(&info(
        "GET",
        "/apis/coordination.k8s.io/v1/namespaces/k/leases"
    )));
    // A Role's rules apply in its namespace only.
    let mut role = rule(&["coordination.k8s.io"], &["leases"], &["create"], &[]);
    role.namespace = Some("k".into());
    assert!(role.matches(&info(
        "POST",
        "/apis/coordination.k8s.io/v1/namespaces/k/leases"
    )));
    assert!(!role.matches(&info(
        "POST",
        "/apis/coordination.k8s.io/v1/namespaces/x/leases"
    )));
    // Non-resource URLs: the chart grants none.
    assert!(!rule(&["*"], &["*"], &["*"], &[]).matches(&info("GET", "/version")));
    assert!(discovery(&info("GET", "/apis")));
    assert!(discovery(&info(
        "GET",
        "/apis/infrastructure.cluster.x-k8s.io/v1beta1"
    )));
    assert!(!discovery(&info("GET", "/apis/karpenter.sh/v1/nodeclaims")));
    assert!(!discovery(&info("GET", "/metrics")));
}

// ---------------------------------------------------------------------------------------------
// `doctor`'s permission table is the chart's, and finds a missing rule on the real server.

/// Every (namespace, group, resource[/sub], verb, name) a rule grants, one per combination.
fn grants(rules: &[Rule]) -> BTreeSet<(Option<String>, String, String, String, String)> {
    let mut out = BTreeSet::new();
    for r in rules {
        let names = if r.names.is_empty() {
            vec![String::new()]
        } else {
            r.names.clone()
        };
        for g in &r.groups {
            for res in &r.resources {
                for v in &r.verbs {
                    for n in &names {
                        out.insert((
                            r.namespace.clone(),
                            g.clone(),
                            res.clone(),
                            v.clone(),
                            n.clone(),
                        ));
                    }
                }
            }
        }
    }
    out
}

/// With no gate and with every gate that adds rules, doctor checks exactly what the chart
/// grants.
#[test]
fn doctors_permission_checks_are_exactly_the_charts_rules() {
    use karpenter_capi::feature_gates::FeatureGates;
    permission_checks_match_the_chart(&[], &FeatureGates::default());
    let gates: FeatureGates = "NodeOverlay=true,CapacityBuffer=true,NodeRepair=true"
        .parse()
        .unwrap();
    permission_checks_match_the_chart(
        &[
            "settings.featureGates.nodeOverlay=true",
            "settings.featureGates.capacityBuffer=true",
            "settings.featureGates.nodeRepair=true",
        ],
        &gates,
    );
}

fn permission_checks_match_the_chart(
    values: &[&str],
    gates: &karpenter_capi::feature_gates::FeatureGates,
) {
    use karpenter_capi::doctor::permissions;
    let docs = render_chart_with(values);
    let sa = docs
        .iter()
        .find(|d| kind(d) == "ServiceAccount")
        .map(|d| name(d).to_owned())
        .unwrap();
    let rules = bound_rules(&docs, &sa);
    let lease_name = rules
        .iter()
        .find(|r| r.resources == ["leases"] && !r.names.is_empty())
        .map(|r| r.names[0].clone())
        .unwrap();
    // The infrastructure templates: the chart grants a wildcard the values choose; doctor
    // checks each kind in use. Compared separately.
    let (templates, chart): (Vec<Rule>, Vec<Rule>) = rules
        .into_iter()
        .partition(|r| r.groups == ["infrastructure.cluster.x-k8s.io"]);
    assert_eq!(templates.len(), 1);
    assert_eq!(templates[0].verbs, permissions::TEMPLATE_VERBS);
    let mut checks = permissions::workload(Some((NAMESPACE, &lease_name)), gates);
    checks.extend(permissions::management(&[], None, gates));
    let doctor: BTreeSet<_> = checks
        .iter()
        .map(|c| {
            let resource = if c.subresource.is_empty() {
                c.resource.clone()
            } else {
                format!("{}/{}", c.resource, c.subresource)
            };
            (
                c.namespace.clone(),
                c.group.clone(),
                resource,
                c.verb.clone(),
                c.name.clone().unwrap_or_default(),
            )
        })
        .collect();
    let chart = grants(&chart);
    assert_eq!(
        doctor.difference(&chart).collect::<Vec<_>>(),
        Vec::<&(Option<String>, String, String, String, String)>::new(),
        "doctor checks what the chart does not grant ({values:?})"
    );
    assert_eq!(
        chart.difference(&doctor).collect::<Vec<_>>(),
        Vec::<&(Option<String>, String, String, String, String)>::new(),
        "the chart grants what doctor does not check ({values:?})"
    );
}

/// `doctor` run as the chart's ServiceAccount (its token, as `kubectl exec … doctor` in the
/// controller's pod would be) finds every permission allowed; with the eviction rule removed
/// from the ClusterRole it reports exactly that as a blocker; restored, it is clean again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_doctor_checks_the_charts_service_account() {
    use karpenter_capi::doctor::{Options, Severity, doctor};
    let docs = render_chart();
    let (world, admin) = real_scenario(json!({}), Vec::new()).await;
    let real = world.real().expect("a real API server");
    let sa = install_rbac(&admin, &docs).await;
    let rules = bound_rules(&docs, &sa);
    let token = token(&admin, &sa).await;
    let client = client_as(real, &token, None).await;
    let options = Options {
        lease: Some((NAMESPACE.into(), "karpenter-leader-election".into())),
        ..Options::default()
    };
    let denied = |r: &karpenter_capi::doctor::Report| -> Vec<String> {
        r.findings
            .iter()
            .filter(|f| f.code.starts_with("permission-"))
            .map(|f| f.message.clone())
            .collect()
    };
    let report = doctor(&client, &client, &options).await;
    assert!(denied(&report).is_empty(), "{}", report.render());
    assert!(report.ok, "{}", report.render());
    // The template kind in use is checked too: 33 + 3 Lease + 17 + list/watch of the templates
    // (Events: create only since 104e34a; MachineSets get and patch since stand-alone
    // MachineSets are node groups; MachinePools get, list, watch and patch since MachinePools
    // are).
    assert_eq!(
        report.permissions_checked,
        33 + 3 + 17 + 2,
        "{}",
        report.render()
    );
    assert_eq!(
        report.node_classes[0].machine_deployments[0]
            .instance_type
            .as_deref(),
        Some("m")
    );

    let eviction = rules
        .iter()
        .find(|r| r.resources == ["pods/eviction"])
        .unwrap();
    set_role_rules(&admin, &docs, eviction, true).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    let report = loop {
        let report = doctor(&client, &client, &options).await;
        if !report.ok || tokio::time::Instant::now() > deadline {
            break report;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(
        denied(&report),
        ["cannot create pods/eviction in every namespace"],
        "{}",
        report.render()
    );
    assert_eq!(report.findings[0].severity, Severity::Blocker);
    assert_eq!(report.exit_code(), 1);
    set_role_rules(&admin, &docs, eviction, false).await;
}

/// With `clusterAPI.namespace`, the chart grants the Cluster API rules as a Role in that
/// namespace only, and the controller scoped to it (`CLUSTER_API_NAMESPACE`) provisions and
/// removes nodes as the chart's ServiceAccount with no 403 and no request outside it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_a_namespace_scoped_install_needs_no_cluster_wide_cluster_api_rule() {
    let docs = render_chart_with(&["clusterAPI.namespace=default"]);
    assert!(
        !docs
            .iter()
            .any(|d| kind(d) == "ClusterRole" && name(d).ends_with("-cluster-api")),
        "no cluster-wide Cluster API role"
    );
    let mut outside = md("m", 4, 16, "zone-b", 0.1);
    outside["metadata"]["namespace"] = json!("other");
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}});
    let (world, admin) = real_scenario(
        json!({"disruption": {"consolidateAfter": "0s"}}),
        vec![namespace, outside],
    )
    .await;
    let real = world.real().expect("a real API server");
    let sa = install_rbac(&admin, &docs).await;
    let token = token(&admin, &sa).await;
    let recorder = Recorder::default();
    let client = client_as(real, &token, Some(&recorder)).await;
    let mut config = disruptive_operator();
    config.provider.scope.namespace = Some("default".into());
    let operator = Operator::start(client.clone(), client.clone(), config);
    scenario::apply(&admin, &[deployment("big", 2, "3", "1Gi")])
        .await
        .unwrap();
    settled(&admin, &recorder, (2, 2), &[], Duration::from_secs(90)).await;
    scale(&admin, "big", 0).await;
    settled(&admin, &recorder, (0, 0), &[], Duration::from_secs(90)).await;
    assert_eq!(replicas(&admin).await, 0);
    let other: MachineDeployment =
        Api::namespaced_with(admin.clone(), "other", &api::CapiVersion::v1beta2())
            .get("m-zone-b")
            .await
            .unwrap();
    assert_eq!(
        other.spec.replicas,
        Some(0),
        "the cheaper MachineDeployment outside the scope was never used"
    );
    drop(operator);
    let requests = recorder.requests();
    let forbidden: Vec<&Request> = requests.iter().filter(|r| r.status == 403).collect();
    assert!(forbidden.is_empty(), "{forbidden:#?}");
    let capi_outside: Vec<&Request> = requests
        .iter()
        .filter(|r| {
            (r.group == "cluster.x-k8s.io" || r.group == "infrastructure.cluster.x-k8s.io")
                && r.namespace != "default"
        })
        .collect();
    assert!(capi_outside.is_empty(), "{capi_outside:#?}");
}
