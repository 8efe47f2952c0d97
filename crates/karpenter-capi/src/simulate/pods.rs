//! The workload's pods as `simulate` and `bench e2e` count them: wanted, Running, existing.
//!
//! Responsibility: [`pod_counts`] lists them once (paged, for progress lines);
//! [`wait_all_running`] watches them and returns the moment every wanted pod runs, so
//! `bench e2e`'s "time to all Running" is that moment, not the next poll after it, and the
//! process whose CPU time and memory it reports as the controller's decodes each pod change
//! once instead of every pod four times a second. Only the fields counted are decoded
//! ([`PodPhase`]); the rest of each pod is skipped, not built. [`Tally`] is the pure
//! bookkeeping of the watch.
//! Inputs: the workload client. Outputs: counts; `Ok` when every pod runs, or an error naming
//! how many did after the timeout.

use std::borrow::Cow;
use std::collections::HashMap;
use std::time::Duration;

use anyhow::bail;
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ListParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use tokio::time::Instant;

/// (replicas wanted over all Deployments, Running pods, non-terminating pods) — DaemonSet
/// pods excluded.
pub(super) async fn pod_counts(workload: &kube::Client) -> anyhow::Result<(usize, usize, usize)> {
    let want = wanted(workload).await?;
    // Page by page: this runs in the process whose peak RSS `bench e2e` reports as the
    // controller's, and one list of every pod held at once was a third of it.
    // A continue token outlives only so much history (410 Expired, on `sim` after 1,000 pod
    // events, on kube-apiserver after a compaction): start again, and after a few such
    // restarts under heavy churn list everything at once.
    let (running, total) = restarting(|page| count_pods(workload, page)).await?;
    Ok((want, running, total))
}

/// Replicas wanted over all Deployments.
async fn wanted(workload: &kube::Client) -> anyhow::Result<usize> {
    let deployments: Api<Deployment> = Api::all(workload.clone());
    let want: i64 = deployments
        .list(&ListParams::default())
        .await?
        .items
        .iter()
        .map(|d| i64::from(d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)))
        .sum();
    Ok(usize::try_from(want).unwrap_or(0))
}

/// How often [`wait_all_running`] reads the Deployments' replicas again.
const WANT_REFRESH: Duration = Duration::from_secs(1);

/// Waits until as many workload pods exist as the Deployments want and all of them are
/// Running, watching pods (and reading the Deployments again every [`WANT_REFRESH`]).
pub(super) async fn wait_all_running(
    workload: &kube::Client,
    timeout: Duration,
    step: &str,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    let mut want = wanted(workload).await?;
    let mut refreshed = Instant::now();
    let config = watcher::Config::default().page_size(POD_PAGE);
    let mut events = watcher(Api::<PodPhase>::all(workload.clone()), config)
        .default_backoff()
        .boxed();
    let mut tally = Tally::default();
    loop {
        if tally.all_running(want) {
            return Ok(());
        }
        let next = tokio::time::timeout_at(deadline.min(refreshed + WANT_REFRESH), events.next());
        match next.await {
            Ok(Some(Ok(event))) => tally.observe(event),
            // The watcher backs off and starts again on its own; the deadline bounds it.
            Ok(Some(Err(e))) => tracing::debug!(error = %e, "pod watch failed; restarting"),
            Ok(None) => bail!("step `{step}`: the pod watch ended"),
            Err(_) if Instant::now() >= deadline => {
                let (running, _) = tally.counts();
                bail!("step `{step}`: after {timeout:?}, {running} of {want} pods are Running");
            }
            Err(_) => {
                want = wanted(workload).await?;
                refreshed = Instant::now();
            }
        }
    }
}

/// The pods a watch has seen: whether each counted one (by UID) is Running.
#[derive(Debug, Default)]
struct Tally {
    /// The counted pods, once the watch's first list is complete.
    pods: HashMap<String, bool>,
    /// The list being received (between `Init` and `InitDone`).
    listing: Option<HashMap<String, bool>>,
    /// Whether a first list is complete.
    synced: bool,
}

impl Tally {
    fn observe(&mut self, event: watcher::Event<PodPhase>) {
        match event {
            watcher::Event::Init => self.listing = Some(HashMap::new()),
            watcher::Event::InitApply(p) => {
                if let Some(listing) = &mut self.listing {
                    Self::put(listing, p);
                }
            }
            watcher::Event::InitDone => {
                if let Some(listing) = self.listing.take() {
                    self.pods = listing;
                    self.synced = true;
                }
            }
            watcher::Event::Apply(p) => Self::put(&mut self.pods, p),
            watcher::Event::Delete(p) => {
                self.pods.remove(&p.uid().unwrap_or_default());
            }
        }
    }

    fn put(pods: &mut HashMap<String, bool>, p: PodPhase) {
        let uid = p.uid().unwrap_or_default();
        if p.counted() {
            pods.insert(uid, p.running);
        } else {
            pods.remove(&uid);
        }
    }

    /// (Running, all) counted pods.
    fn counts(&self) -> (usize, usize) {
        let running = self.pods.values().filter(|r| **r).count();
        (running, self.pods.len())
    }

    fn all_running(&self, want: usize) -> bool {
        let (running, total) = self.counts();
        self.synced && running == want && total == want
    }
}

/// Runs `list` with pages of [`POD_PAGE`]; after each 410 (its continue token expired) again,
/// and after [`EXPIRED_RESTARTS`] of them once more unpaged (`0`).
async fn restarting<T, F>(mut list: impl FnMut(u32) -> F) -> Result<T, kube::Error>
where
    F: std::future::Future<Output = Result<T, kube::Error>>,
{
    let mut restarts = 0;
    loop {
        let page = if restarts < EXPIRED_RESTARTS {
            POD_PAGE
        } else {
            0
        };
        match list(page).await {
            Err(kube::Error::Api(e)) if e.code == 410 && page > 0 => restarts += 1,
            result => return result,
        }
    }
}

/// The fields of a pod that are counted: its identity (for the watch), whether it is
/// terminating or a DaemonSet's, and whether it is Running. Decoding only these (the rest of
/// each pod is skipped, not built) keeps the counting cheap in the process whose CPU time and
/// memory `bench e2e` reports as the controller's.
#[derive(Clone, Debug, serde::Deserialize)]
#[serde(from = "RawPod")]
struct PodPhase {
    /// Name, namespace, UID and resourceVersion only.
    metadata: ObjectMeta,
    terminating: bool,
    daemon_set: bool,
    running: bool,
}

impl PodPhase {
    /// As `workload_pod`: not terminating and not a DaemonSet's.
    fn counted(&self) -> bool {
        !self.terminating && !self.daemon_set
    }
}

impl Resource for PodPhase {
    type DynamicType = ();
    type Scope = k8s_openapi::NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("Pod")
    }
    fn group(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("")
    }
    fn version(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("v1")
    }
    fn plural(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("pods")
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[derive(Debug, Default, serde::Deserialize)]
struct RawPod {
    #[serde(default)]
    metadata: RawMeta,
    #[serde(default)]
    status: RawStatus,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawMeta {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    deletion_timestamp: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    owner_references: Vec<OwnerKind>,
}

#[derive(Debug, serde::Deserialize)]
struct OwnerKind {
    kind: String,
}

#[derive(Debug, Default, serde::Deserialize)]
struct RawStatus {
    phase: Option<String>,
}

impl From<RawPod> for PodPhase {
    fn from(raw: RawPod) -> Self {
        let RawMeta {
            name,
            namespace,
            uid,
            resource_version,
            deletion_timestamp,
            owner_references,
        } = raw.metadata;
        Self {
            metadata: ObjectMeta {
                name,
                namespace,
                uid,
                resource_version,
                ..ObjectMeta::default()
            },
            terminating: deletion_timestamp.is_some(),
            daemon_set: owner_references.iter().any(|o| o.kind == "DaemonSet"),
            running: raw.status.phase.as_deref() == Some("Running"),
        }
    }
}

/// (Running, all) workload pods, listed `page` at a time (0: all at once).
async fn count_pods(workload: &kube::Client, page: u32) -> Result<(usize, usize), kube::Error> {
    let (mut running, mut total) = (0, 0);
    let mut params = match page {
        0 => ListParams::default(),
        n => ListParams::default().limit(n),
    };
    let pods = kube::core::Request::new(PodPhase::url_path(&(), None));
    loop {
        let request = pods.list(&params).map_err(kube::Error::BuildRequest)?;
        let page: kube::core::ObjectList<PodPhase> = workload.request(request).await?;
        for p in page.items.iter().filter(|p| p.counted()) {
            total += 1;
            if p.running {
                running += 1;
            }
        }
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => break,
        }
    }
    Ok((running, total))
}

/// How often [`pod_counts`] starts a paged list again after its continue token expired.
const EXPIRED_RESTARTS: u32 = 3;

/// Pods per page when [`pod_counts`] lists them, and of [`wait_all_running`]'s first list.
const POD_PAGE: u32 = 100;

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use std::cell::RefCell;

    use super::*;

    fn status(code: u16) -> kube::Error {
        kube::Error::Api(Box::new(
            serde_json::from_value(serde_json::json!({
                "status": "Failure", "code": code, "message": "m", "reason": "Expired"}))
            .unwrap(),
        ))
    }

    /// Runs `restarting` over answers that fail with `codes` first, then succeed; returns the
    /// result and the page sizes asked for.
    fn run(codes: &[u16]) -> (Result<u32, u16>, Vec<u32>) {
        let asked = RefCell::new(Vec::new());
        let result = futures::executor::block_on(restarting(|page| {
            let n = asked.borrow().len();
            asked.borrow_mut().push(page);
            let answer = codes.get(n).map_or(Ok(page), |c| Err(status(*c)));
            async move { answer }
        }));
        let result = result.map_err(|e| match e {
            kube::Error::Api(s) => s.code,
            _ => 0,
        });
        (result, asked.into_inner())
    }

    #[test]
    fn an_expired_continue_token_starts_the_list_again_then_lists_unpaged() {
        assert_eq!(run(&[]), (Ok(POD_PAGE), vec![POD_PAGE]));
        assert_eq!(run(&[410]), (Ok(POD_PAGE), vec![POD_PAGE, POD_PAGE]));
        assert_eq!(
            run(&[410, 410, 410]),
            (Ok(0), vec![POD_PAGE, POD_PAGE, POD_PAGE, 0])
        );
        // The unpaged list has no token to expire: its error is the answer.
        assert_eq!(
            run(&[410, 410, 410, 410]),
            (Err(410), vec![POD_PAGE, POD_PAGE, POD_PAGE, 0])
        );
        // Any other error is the answer at once.
        assert_eq!(run(&[500]), (Err(500), vec![POD_PAGE]));
    }

    fn pod(uid: &str, phase: &str, extra: serde_json::Value) -> PodPhase {
        let mut v = serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": uid, "namespace": "default", "uid": uid,
                "resourceVersion": "7",
                "managedFields": [{"manager": "m", "operation": "Update",
                    "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {}}}]},
            "spec": {"containers": [{"name": "c", "image": "pause"}]},
            "status": {"phase": phase}});
        if let (Some(m), Some(e)) = (v["metadata"].as_object_mut(), extra.as_object()) {
            m.extend(e.clone());
        }
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn a_pod_decodes_to_what_is_counted() {
        let p = pod("a", "Running", serde_json::json!({}));
        assert_eq!(p.metadata.name.as_deref(), Some("a"));
        assert_eq!(p.metadata.namespace.as_deref(), Some("default"));
        assert_eq!(p.metadata.uid.as_deref(), Some("a"));
        assert_eq!(p.metadata.resource_version.as_deref(), Some("7"));
        assert!(p.metadata.managed_fields.is_none());
        assert!(p.running && p.counted());
        assert!(!pod("b", "Pending", serde_json::json!({})).running);
        let terminating = pod(
            "c",
            "Running",
            serde_json::json!({"deletionTimestamp": "2026-01-01T00:00:00Z"}),
        );
        assert!(!terminating.counted());
        let daemon = pod(
            "d",
            "Running",
            serde_json::json!({"ownerReferences": [{"apiVersion": "apps/v1",
                "kind": "DaemonSet", "name": "ds", "uid": "u"}]}),
        );
        assert!(!daemon.counted());
        let replica = pod(
            "e",
            "Running",
            serde_json::json!({"ownerReferences": [{"apiVersion": "apps/v1",
                "kind": "ReplicaSet", "name": "rs", "uid": "u"}]}),
        );
        assert!(replica.counted());
    }

    #[test]
    fn the_tally_follows_the_watch() {
        use watcher::Event;
        let none = serde_json::json!({});
        let mut tally = Tally::default();
        // Nothing counts before the first list is complete, even when nothing is wanted.
        assert!(!tally.all_running(0));
        tally.observe(Event::Init);
        tally.observe(Event::InitApply(pod("a", "Running", none.clone())));
        tally.observe(Event::InitApply(pod("b", "Pending", none.clone())));
        assert!(!tally.all_running(1));
        tally.observe(Event::InitDone);
        assert_eq!(tally.counts(), (1, 2));
        assert!(!tally.all_running(2));
        tally.observe(Event::Apply(pod("b", "Running", none.clone())));
        assert!(tally.all_running(2));
        // A third pod, then one terminating: neither is all Running at 2 wanted until the
        // terminating one stops counting.
        tally.observe(Event::Apply(pod("c", "Pending", none.clone())));
        assert!(!tally.all_running(2));
        tally.observe(Event::Apply(pod(
            "c",
            "Pending",
            serde_json::json!({"deletionTimestamp": "2026-01-01T00:00:00Z"}),
        )));
        assert!(tally.all_running(2));
        tally.observe(Event::Delete(pod("a", "Running", none.clone())));
        assert_eq!(tally.counts(), (1, 1));
        // A restarted watch replaces what it knew with its new list.
        tally.observe(Event::Init);
        tally.observe(Event::InitApply(pod("x", "Pending", none.clone())));
        assert_eq!(tally.counts(), (1, 1));
        tally.observe(Event::InitDone);
        assert_eq!(tally.counts(), (0, 1));
        assert!(!tally.all_running(1));
        // DaemonSet pods are not counted.
        tally.observe(Event::Apply(pod(
            "ds",
            "Pending",
            serde_json::json!({"ownerReferences": [{"apiVersion": "apps/v1",
                "kind": "DaemonSet", "name": "ds", "uid": "u"}]}),
        )));
        assert_eq!(tally.counts(), (0, 1));
    }
}
