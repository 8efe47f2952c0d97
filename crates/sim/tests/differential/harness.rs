//! The differential harness: run one scenario against `sim` and against a real kube-apiserver,
//! record normalized outcomes, compare.
//!
//! A scenario is an `async fn(Ctx)` that talks raw HTTP through [`Ctx`] and records what it
//! sees ([`Ctx::record`], [`Ctx::note`]); every recording is normalized at once
//! ([`Normalizer`]): uids become `<uid N>` by first appearance (so "same uid" relations are
//! still compared), resourceVersions `<rv>`, timestamps `<time>`, continue tokens
//! `<continue>`, and `metadata.managedFields` is dropped unless the scenario keeps it
//! ([`Ctx::keep_managed_fields`]; see `crates/sim/DIFFERENCES.md`). Each scenario gets its own
//! namespace (with a `default` ServiceAccount) on both servers; all scenarios of a test run
//! concurrently against one sim and one real cluster.
//!
//! Two ways to run a [`Group`]: [`replay`] (the default run) against `sim` and the committed
//! recordings of the real server's answers, and [`compare`] (the `real` profile) against `sim`
//! and a live kube-apiserver, which also checks (or, with `RECORD=1`, rewrites) the
//! recordings; see `crate::recording`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::{BoxFuture, join_all};
use http::{Method, Request};
use regex::Regex;
use serde_json::{Map, Value, json};
use sim::realk8s::{RealCluster, RealConfig};
use sim::{Sim, SimConfig};

/// How long a poll waits before the scenario fails (generous: the real controllers are slow
/// on a loaded 2-core machine).
pub const POLL_TIMEOUT: Duration = Duration::from_secs(150);

/// One scenario: a name (its namespace, `d-<name>`) and its body.
pub struct Scenario {
    /// The scenario's name.
    pub name: &'static str,
    /// Its body.
    pub run: fn(Ctx) -> BoxFuture<'static, ()>,
}

/// `scenario!(module::function)`.
#[macro_export]
macro_rules! scenario {
    ($($path:ident)::+) => {
        $crate::harness::Scenario {
            name: $crate::scenario!(@last $($path)::+),
            run: |ctx| Box::pin($($path)::+(ctx)),
        }
    };
    (@last $head:ident :: $($rest:ident)::+) => { $crate::scenario!(@last $($rest)::+) };
    (@last $last:ident) => { stringify!($last) };
}

/// An HTTP answer.
#[derive(Debug, Clone)]
pub struct Resp {
    /// The status code.
    pub code: u16,
    /// The body (JSON, or a string if it was not JSON).
    pub body: Value,
}

impl Resp {
    /// A field of the body by JSON pointer.
    pub fn at(&self, pointer: &str) -> &Value {
        self.body.pointer(pointer).unwrap_or(&Value::Null)
    }

    /// `metadata.resourceVersion`.
    pub fn rv(&self) -> String {
        self.at("/metadata/resourceVersion")
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// `metadata.uid`.
    pub fn uid(&self) -> String {
        self.at("/metadata/uid")
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// The names of a list's items.
    pub fn names(&self) -> Vec<String> {
        self.at("/items")
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|i| i.pointer("/metadata/name").and_then(Value::as_str))
            .map(str::to_owned)
            .collect()
    }
}

/// What a patch body is.
#[derive(Debug, Clone, Copy)]
pub enum PatchKind {
    /// `application/merge-patch+json`.
    Merge,
    /// `application/json-patch+json`.
    Json,
    /// `application/strategic-merge-patch+json`.
    Strategic,
    /// `application/apply-patch+yaml` (JSON is YAML).
    Apply,
}

impl PatchKind {
    fn content_type(self) -> &'static str {
        match self {
            Self::Merge => "application/merge-patch+json",
            Self::Json => "application/json-patch+json",
            Self::Strategic => "application/strategic-merge-patch+json",
            Self::Apply => "application/apply-patch+yaml",
        }
    }
}

/// Normalizes recorded values so the two servers' answers compare.
#[derive(Debug, Default)]
pub struct Normalizer {
    uids: BTreeMap<String, usize>,
    aliases: Vec<(String, String)>,
    keep_managed_fields: bool,
    unordered_causes: bool,
}

fn uid_pattern() -> &'static Regex {
    static RE: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}").unwrap()
    })
}

fn time_pattern() -> &'static Regex {
    static RE: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)").unwrap()
    })
}

impl Normalizer {
    fn string(&mut self, s: &str) -> String {
        let mut out = s.to_owned();
        for (from, to) in &self.aliases {
            out = out.replace(from.as_str(), to);
        }
        let uids: Vec<String> = uid_pattern()
            .find_iter(&out)
            .map(|m| m.as_str().to_owned())
            .collect();
        for uid in uids {
            let next = self.uids.len() + 1;
            let n = *self.uids.entry(uid.clone()).or_insert(next);
            out = out.replace(&uid, &format!("<uid {n}>"));
        }
        time_pattern().replace_all(&out, "<time>").into_owned()
    }

    /// The normalized form of a value (and, with `unordered_causes`, an error's causes
    /// sorted, its message rebuilt from them).
    pub fn value(&mut self, v: &Value) -> Value {
        let mut out = self.value_inner(v);
        if self.unordered_causes {
            sort_causes(&mut out);
        }
        out
    }

    fn value_inner(&mut self, v: &Value) -> Value {
        match v {
            Value::String(s) => Value::String(self.string(s)),
            Value::Array(items) => {
                Value::Array(items.iter().map(|i| self.value_inner(i)).collect())
            }
            Value::Object(map) => {
                let mut out = Map::new();
                for (k, child) in map {
                    let normalized = match (k.as_str(), child) {
                        ("resourceVersion", Value::String(s)) if !s.is_empty() => json!("<rv>"),
                        ("continue", Value::String(s)) if !s.is_empty() => json!("<continue>"),
                        ("managedFields", _) if !self.keep_managed_fields => continue,
                        ("managedFields", Value::Array(entries)) => {
                            // Entries in a fixed order (kube-apiserver orders by time to the
                            // second first), field sets without `.` (DIFFERENCES.md).
                            let mut list: Vec<Value> = entries
                                .iter()
                                .map(|e| {
                                    let mut e = self.value_inner(e);
                                    if let Some(f) = e.get_mut("fieldsV1") {
                                        strip_dots(f);
                                    }
                                    e
                                })
                                .collect();
                            list.sort_by_key(|e| {
                                ["operation", "manager", "subresource"]
                                    .map(|k| e.get(k).map(Value::to_string).unwrap_or_default())
                            });
                            Value::Array(list)
                        }
                        _ => self.value_inner(child),
                    };
                    out.insert(k.clone(), normalized);
                }
                Value::Object(out)
            }
            other => other.clone(),
        }
    }
}

/// Sort the causes of every `Status` in `v` and rebuild its message from them: the order of
/// schema validation errors is Go map order on kube-apiserver (random).
fn sort_causes(v: &mut Value) {
    match v {
        Value::Object(m) => {
            let is_status = m.get("kind") == Some(&json!("Status"));
            if is_status
                && let Some(causes) = m
                    .get_mut("details")
                    .and_then(|d| d.get_mut("causes"))
                    .and_then(Value::as_array_mut)
            {
                causes.sort_by_key(Value::to_string);
                let rendered: Vec<String> = causes
                    .iter()
                    .map(|c| {
                        format!(
                            "{}: {}",
                            c.get("field").and_then(Value::as_str).unwrap_or_default(),
                            c.get("message").and_then(Value::as_str).unwrap_or_default()
                        )
                    })
                    .collect();
                let mut unique = rendered.clone();
                unique.dedup();
                if let Some(Value::String(message)) = m.get_mut("message")
                    && let Some((head, _)) = message.split_once(" is invalid: ")
                {
                    *message = match unique.as_slice() {
                        [one] => format!("{head} is invalid: {one}"),
                        many => format!("{head} is invalid: [{}]", many.join(", ")),
                    };
                }
            }
            for child in m.values_mut() {
                sort_causes(child);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(sort_causes),
        _ => {}
    }
}

/// Remove the `.` (node ownership) markers from a `FieldsV1` tree.
fn strip_dots(v: &mut Value) {
    if let Value::Object(m) = v {
        m.remove(".");
        for child in m.values_mut() {
            strip_dots(child);
        }
    }
}

/// A transcript (labelled, normalized recordings) and its normalizer.
type Log = (Vec<(String, Value)>, Normalizer);

/// A scenario's view of one server.
#[derive(Clone)]
pub struct Ctx {
    client: kube::Client,
    /// The scenario's namespace.
    pub ns: String,
    log: Arc<Mutex<Log>>,
}

impl Ctx {
    /// Substitute `{ns}` in a path.
    pub fn p(&self, path: &str) -> String {
        path.replace("{ns}", &self.ns)
    }

    /// Send a request; `{ns}` in the path is the scenario's namespace. The code and the raw
    /// body.
    pub async fn send_raw(
        &self,
        method: Method,
        path: &str,
        content_type: &str,
        body: Option<&Value>,
    ) -> (u16, Vec<u8>) {
        self.send_accepting(method, path, content_type, "application/json", body)
            .await
    }

    /// [`Ctx::send_raw`] with an `Accept` header of the caller's.
    pub async fn send_accepting(
        &self,
        method: Method,
        path: &str,
        content_type: &str,
        accept: &str,
        body: Option<&Value>,
    ) -> (u16, Vec<u8>) {
        let bytes = match body {
            Some(Value::String(raw)) => raw.clone().into_bytes(),
            Some(b) => b.to_string().into_bytes(),
            None => Vec::new(),
        };
        let mut req = Request::builder()
            .method(method)
            .uri(self.p(path))
            .header(http::header::ACCEPT, accept);
        if body.is_some() {
            req = req.header(http::header::CONTENT_TYPE, content_type);
        }
        let req = req.body(kube::client::Body::from(bytes)).unwrap();
        let resp = self.client.send(req).await.unwrap();
        let code = resp.status().as_u16();
        let bytes = resp.into_body().collect_bytes().await.unwrap();
        (code, bytes.to_vec())
    }

    /// Send a request; `{ns}` in the path is the scenario's namespace. A string body is sent
    /// as it is.
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        content_type: &str,
        body: Option<&Value>,
    ) -> Resp {
        let (code, bytes) = self.send_raw(method, path, content_type, body).await;
        let body = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
        Resp { code, body }
    }

    /// GET.
    pub async fn get(&self, path: &str) -> Resp {
        self.send(Method::GET, path, "", None).await
    }

    /// POST a JSON body.
    pub async fn post(&self, path: &str, body: Value) -> Resp {
        self.send(Method::POST, path, "application/json", Some(&body))
            .await
    }

    /// PUT a JSON body.
    pub async fn put(&self, path: &str, body: Value) -> Resp {
        self.send(Method::PUT, path, "application/json", Some(&body))
            .await
    }

    /// PATCH.
    pub async fn patch(&self, path: &str, kind: PatchKind, body: Value) -> Resp {
        self.send(Method::PATCH, path, kind.content_type(), Some(&body))
            .await
    }

    /// DELETE, with `DeleteOptions` if given.
    pub async fn delete(&self, path: &str, options: Option<Value>) -> Resp {
        self.send(Method::DELETE, path, "application/json", options.as_ref())
            .await
    }

    /// A watch that ends after the `timeoutSeconds` in its query: every event, in order.
    pub async fn watch(&self, path: &str) -> Vec<Value> {
        let (code, bytes) = self.send_raw(Method::GET, path, "", None).await;
        let text = String::from_utf8_lossy(&bytes);
        if code != 200 {
            let body = serde_json::from_str(&text).unwrap_or(Value::String(text.into_owned()));
            return vec![json!({"code": code, "body": body})];
        }
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// Record a value under a label (normalized).
    pub fn note(&self, label: &str, v: Value) {
        let mut log = self.log.lock().unwrap();
        let normalized = log.1.value(&v);
        log.0.push((label.to_owned(), normalized));
    }

    /// Record an answer: its code and body.
    pub fn record(&self, label: &str, r: &Resp) {
        self.note(label, json!({"code": r.code, "body": r.body}));
    }

    /// Record an answer's code and, for failures, the error's `reason`, `message` and causes;
    /// for successes only the code (when the body does not matter to the scenario).
    pub fn outcome(&self, label: &str, r: &Resp) {
        if r.code >= 400 {
            self.note(label, error_summary(r));
        } else {
            self.note(label, json!({"code": r.code}));
        }
    }

    /// From now on, sort the causes of errors (see [`Normalizer::value`]).
    pub fn unordered_causes(&self) {
        self.log.lock().unwrap().1.unordered_causes = true;
    }

    /// From now on, keep `metadata.managedFields` in recordings.
    pub fn keep_managed_fields(&self) {
        self.log.lock().unwrap().1.keep_managed_fields = true;
    }

    /// From now on, write `from` as `to` in recordings (e.g. a generated name).
    pub fn alias(&self, from: &str, to: &str) {
        self.log
            .lock()
            .unwrap()
            .1
            .aliases
            .push((from.to_owned(), to.to_owned()));
    }

    /// GET `path` until `done` holds (or fail after [`POLL_TIMEOUT`]).
    pub async fn poll(&self, path: &str, done: impl Fn(&Resp) -> bool) -> Resp {
        let deadline = tokio::time::Instant::now() + POLL_TIMEOUT;
        loop {
            let r = self.get(path).await;
            if done(&r) {
                return r;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "[{}] timed out polling {path}; last answer {} {}",
                self.ns,
                r.code,
                r.body
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Wait until `path` is gone (404).
    pub async fn gone(&self, path: &str) -> Resp {
        self.poll(path, |r| r.code == 404).await
    }
}

/// The parts of an error that are compared.
pub fn error_summary(r: &Resp) -> Value {
    let b = &r.body;
    json!({
        "code": r.code,
        "reason": b.get("reason"),
        "message": b.get("message"),
        "causes": b.pointer("/details/causes"),
    })
}

async fn ensure_namespace(client: &kube::Client, ns: &str) {
    let ctx = Ctx {
        client: client.clone(),
        ns: ns.to_owned(),
        log: Arc::default(),
    };
    let r = ctx
        .post("/api/v1/namespaces", json!({"metadata": {"name": ns}}))
        .await;
    assert!(r.code == 201 || r.code == 409, "namespace {ns}: {r:?}");
    // Pods need their namespace's `default` ServiceAccount on the real server (the
    // controller-manager, when it runs, may have made it already).
    let r = ctx
        .post(
            "/api/v1/namespaces/{ns}/serviceaccounts",
            json!({"metadata": {"name": "default"}}),
        )
        .await;
    assert!(
        r.code == 201 || r.code == 409,
        "serviceaccount in {ns}: {r:?}"
    );
}

/// Run every scenario against one client, concurrently; their transcripts by name.
async fn run_all(
    client: kube::Client,
    scenarios: &[Scenario],
) -> BTreeMap<&'static str, Vec<(String, Value)>> {
    let runs = scenarios.iter().map(|s| {
        let client = client.clone();
        async move {
            let ns = format!("d-{}", s.name.replace('_', "-"));
            ensure_namespace(&client, &ns).await;
            let log = Arc::new(Mutex::new((Vec::new(), Normalizer::default())));
            let ctx = Ctx {
                client,
                ns,
                log: log.clone(),
            };
            (s.run)(ctx).await;
            let entries = std::mem::take(&mut log.lock().unwrap().0);
            (s.name, entries)
        }
    });
    join_all(runs).await.into_iter().collect()
}

/// What runs before the scenarios on each server (e.g. installing CRDs).
pub type Setup = fn(kube::Client) -> BoxFuture<'static, ()>;

/// Scenarios that run together, and the servers they need.
pub struct Group {
    /// The sim's settings.
    pub sim: SimConfig,
    /// The real cluster's settings (what it runs besides kube-apiserver, its flags).
    pub real: RealConfig,
    /// What runs before the scenarios on each server.
    pub setup: Option<Setup>,
    /// The scenarios.
    pub scenarios: Vec<Scenario>,
}

/// A transcript as JSON: `[{"label", "value"}, ...]`.
fn transcript_json(entries: &[(String, Value)]) -> Value {
    Value::Array(
        entries
            .iter()
            .map(|(l, v)| json!({"label": l, "value": v}))
            .collect(),
    )
}

/// The recording of scenario `name`.
fn recording_name(name: &str) -> String {
    format!("differential/{name}")
}

/// Every entry where transcripts `a` and `b` (JSON, as [`transcript_json`]) differ, with the
/// paths that differ inside it; empty when they are equal.
fn report(scenario: &str, a: &Value, b: &Value, names: (&str, &str)) -> String {
    let empty = Vec::new();
    let (a, b) = (
        a.as_array().unwrap_or(&empty),
        b.as_array().unwrap_or(&empty),
    );
    let mut out = String::new();
    for i in 0..a.len().max(b.len()) {
        let (x, y) = (a.get(i), b.get(i));
        if x == y {
            continue;
        }
        let label = |e: Option<&Value>| {
            e.and_then(|e| e.get("label"))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let (lx, ly) = (label(x), label(y));
        out.push_str(&format!(
            "\n=== {scenario} #{i} {}\n",
            lx.clone().or(ly.clone()).unwrap_or_default()
        ));
        match (x, y) {
            (Some(x), Some(y)) if lx == ly => {
                let mut lines = Vec::new();
                crate::recording::diff(&x["value"], &y["value"], "", names, &mut lines);
                for l in lines {
                    out.push_str(&format!("  {l}\n"));
                }
            }
            _ => {
                let show = |e: Option<&Value>| {
                    e.map_or("(nothing)".to_owned(), |e| {
                        format!("{}: {}", e["label"], e["value"])
                    })
                };
                out.push_str(&format!(
                    "  {}: {}\n  {}: {}\n",
                    names.0,
                    show(x),
                    names.1,
                    show(y)
                ));
            }
        }
    }
    out
}

/// The default run: the scenarios on a fresh sim, each compared with the real kube-apiserver's
/// recorded answers (`crates/sim/tests/recorded/differential/<scenario>.json`). Fails listing
/// every entry that differs, and every scenario without a recording.
pub async fn replay(group: Group) {
    let sim = Sim::new(group.sim);
    let client = kube::Client::new(sim.router(), "default");
    if let Some(setup) = group.setup {
        setup(client.clone()).await;
    }
    let on_sim = run_all(client, &group.scenarios).await;
    let mut failures = String::new();
    for s in &group.scenarios {
        let answers = transcript_json(on_sim.get(s.name).map_or(&[][..], Vec::as_slice));
        match crate::recording::load(&recording_name(s.name)) {
            Ok(recorded) => {
                let r = report(s.name, &answers, &recorded.answers, ("sim", "recorded"));
                if !r.is_empty() {
                    failures.push_str(&format!(
                        "\n{}: sim differs from the real kube-apiserver {}:{r}",
                        s.name, recorded.server
                    ));
                }
            }
            Err(e) => failures.push_str(&format!("\n{e}")),
        }
    }
    assert!(
        failures.is_empty(),
        "sim and the recorded real answers differ:{failures}"
    );
}

/// The real profile: the scenarios on a fresh sim and a fresh real cluster (after `setup` on
/// each); fails listing every transcript entry that differs between them, and every scenario
/// whose real answers differ from its recording. With `RECORD=1`, (re-)writes the recordings
/// from the real answers instead, printing what changed.
pub async fn compare(group: Group) {
    let Group {
        sim: sim_config,
        real: config,
        setup,
        scenarios,
    } = group;
    let scenarios = scenarios.as_slice();
    let sim = Sim::new(sim_config);
    let sim_client = kube::Client::new(sim.router(), "default");
    let cluster = RealCluster::start(config).await.unwrap();
    let real_client = cluster.client().await.unwrap();
    let server = crate::recording::server_version(&real_client).await;
    if let Some(setup) = setup {
        setup(sim_client.clone()).await;
        setup(real_client.clone()).await;
    }
    let (on_sim, on_real) = futures::join!(
        run_all(sim_client, scenarios),
        run_all(real_client, scenarios)
    );
    let mut live = String::new();
    let mut recorded = String::new();
    for s in scenarios {
        let a = transcript_json(on_sim.get(s.name).map_or(&[][..], Vec::as_slice));
        let b = transcript_json(on_real.get(s.name).map_or(&[][..], Vec::as_slice));
        live.push_str(&report(s.name, &a, &b, ("sim", "real")));
        match crate::recording::against_real(&recording_name(s.name), &server, &b) {
            Ok(changes) if !changes.is_empty() => eprintln!("{changes}"),
            Ok(_) => {}
            Err(e) => recorded.push_str(&format!("\n{e}")),
        }
    }
    assert!(live.is_empty(), "sim and the real server differ:{live}");
    assert!(
        recorded.is_empty(),
        "the real server and the recordings differ:{recorded}"
    );
}
