//! Caches of MachineDeployments (management cluster) and ClusterAPINodeClasses (workload
//! cluster): one `kube::runtime` reflector each, so the provider's reads (instance types, the
//! shape of a launch, List, drift) cost no API request.
//!
//! Responsibility: [`ObjectCache::start`] watches every object of one kind; [`ObjectCache::ready`]
//! waits at most the sync timeout for the first list, then fails naming the watch's last error
//! (a 403 from missing RBAC is logged at warn, rate-limited, and never hangs a caller);
//! [`ObjectCache::all`] and [`ObjectCache::get`] answer from memory. Writes never use these
//! copies' resourceVersions: compare-and-set writes read fresh.
//! Inputs: a client and the kind. Outputs: the cache. The watch task stops when it is dropped.

use state::backoff::WatchBackoff;
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use kube::Resource;
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde::de::DeserializeOwned;
use tokio::sync::watch;

use super::cache::CacheError;
use crate::watch_errors::WatchErrors;

/// A reflector-backed cache of every object of one kind.
#[derive(Debug)]
pub struct ObjectCache<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Clone + Eq + Hash,
{
    kind: &'static str,
    store: Store<K>,
    dyntype: K::DynamicType,
    last_error: Arc<Mutex<Option<String>>>,
    sync_timeout: Duration,
    listed: watch::Receiver<Option<bool>>,
    /// For a kind the cluster may not serve ([`ObjectCache::start_optional`]): its list
    /// answered 404 (or 403), so the cache is empty and counts as synced.
    absent: Option<Arc<std::sync::atomic::AtomicBool>>,
    task: tokio::task::JoinHandle<()>,
}

/// The status of a watch error that makes an optional kind unavailable: 404 (the cluster does
/// not serve it) or 403 (this identity may not list it: RBAC without the optional kind).
fn unavailable(e: &watcher::Error) -> Option<u16> {
    let api = match e {
        watcher::Error::InitialListFailed(kube::Error::Api(s))
        | watcher::Error::WatchStartFailed(kube::Error::Api(s)) => s,
        _ => return None,
    };
    matches!(api.code, 403 | 404).then_some(api.code)
}

/// Waits at most `timeout` for `flag` (from [`state::listed::listed`]): `Ok(true)` listed, `Ok(false)` the watch ended,
/// `Err(())` timed out.
pub(crate) async fn wait_listed(
    flag: &watch::Receiver<Option<bool>>,
    timeout: Duration,
) -> Result<bool, ()> {
    let mut flag = flag.clone();
    match tokio::time::timeout(timeout, flag.wait_for(Option::is_some)).await {
        Ok(Ok(v)) => Ok(*v == Some(true)),
        Ok(Err(_)) => Ok(false),
        Err(_) => Err(()),
    }
}

impl<K> Drop for ObjectCache<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Clone + Eq + Hash,
{
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl<K> ObjectCache<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + Hash + Debug + Unpin,
{
    /// Watch every `K` (in version `dyntype`) of `client`'s cluster, or of `namespace` only
    /// (`kind` names it in logs and errors).
    #[must_use]
    pub fn start(
        client: kube::Client,
        namespace: Option<&str>,
        dyntype: &K::DynamicType,
        kind: &'static str,
        sync_timeout: Duration,
    ) -> Self
    where
        K: Resource<Scope = kube::core::DynamicResourceScope>,
    {
        Self::start_dynamic(client, namespace, dyntype, kind, sync_timeout, false)
    }

    /// [`ObjectCache::start`] for a kind the cluster may not serve (MachinePools: an optional
    /// part of Cluster API): while its list answers 404 — or 403, RBAC that does not grant the
    /// optional kind (logged at warn, rate-limited) — the cache is empty and
    /// [`ObjectCache::ready`] does not wait; the watch keeps asking (with backoff), so a CRD
    /// installed or a permission granted later is picked up.
    #[must_use]
    pub fn start_optional(
        client: kube::Client,
        namespace: Option<&str>,
        dyntype: &K::DynamicType,
        kind: &'static str,
        sync_timeout: Duration,
    ) -> Self
    where
        K: Resource<Scope = kube::core::DynamicResourceScope>,
    {
        Self::start_dynamic(client, namespace, dyntype, kind, sync_timeout, true)
    }

    fn start_dynamic(
        client: kube::Client,
        namespace: Option<&str>,
        dyntype: &K::DynamicType,
        kind: &'static str,
        sync_timeout: Duration,
        optional: bool,
    ) -> Self
    where
        K: Resource<Scope = kube::core::DynamicResourceScope>,
    {
        let api: Api<K> = match namespace {
            Some(ns) => Api::namespaced_with(client, ns, dyntype),
            None => Api::all_with(client, dyntype),
        };
        Self::watch(api, dyntype.clone(), kind, sync_timeout, optional)
    }

    /// Watch every `K` of `client`'s cluster (cluster-scoped kinds of a static version).
    #[must_use]
    pub fn start_cluster_scoped(
        client: kube::Client,
        kind: &'static str,
        sync_timeout: Duration,
    ) -> Self
    where
        K::DynamicType: Default,
    {
        Self::watch(
            Api::all(client),
            K::DynamicType::default(),
            kind,
            sync_timeout,
            false,
        )
    }

    fn watch(
        api: Api<K>,
        dyntype: K::DynamicType,
        kind: &'static str,
        sync_timeout: Duration,
        optional: bool,
    ) -> Self {
        let writer = reflector::store::Writer::new(dyntype.clone());
        let store = writer.as_reader();
        let last_error: Arc<Mutex<Option<String>>> = Arc::default();
        let task_error = Arc::clone(&last_error);
        let absent = optional.then(|| Arc::new(std::sync::atomic::AtomicBool::new(false)));
        let task_absent = absent.clone();
        let task = tokio::spawn(async move {
            let mut report = WatchErrors::new(kind);
            let stream = watcher(api, watcher::Config::default())
                .retry_backoff()
                .modify(state::strip_managed_fields)
                .reflect(writer);
            let mut stream = std::pin::pin!(stream);
            while let Some(event) = stream.next().await {
                let mut last = task_error.lock().unwrap_or_else(PoisonError::into_inner);
                match &event {
                    // `Init` starts a (re)list and comes before its outcome.
                    Ok(watcher::Event::Init) => {}
                    Ok(_) => {
                        *last = None;
                        report.succeeded();
                        if let Some(a) = &task_absent {
                            a.store(false, std::sync::atomic::Ordering::Relaxed);
                        }
                    }
                    Err(e) if task_absent.is_some() && unavailable(e).is_some() => {
                        *last = Some(e.to_string());
                        // Forbidden is worth a (rate-limited) warning; not served is not.
                        if unavailable(e) == Some(403) {
                            report.failed(e);
                        }
                        if let Some(a) = &task_absent {
                            a.store(true, std::sync::atomic::Ordering::Relaxed);
                        }
                    }
                    Err(e) => {
                        *last = Some(e.to_string());
                        report.failed(e);
                    }
                }
            }
        });
        Self {
            kind,
            listed: state::listed::listed(&store),
            store,
            dyntype,
            last_error,
            sync_timeout,
            absent,
            task,
        }
    }

    /// Wait until the first list has been applied, at most the sync timeout.
    ///
    /// # Errors
    /// [`CacheError::NotSynced`] naming the last watch error; [`CacheError::Stopped`] when the
    /// watch task ended (only on shutdown).
    pub async fn ready(&self) -> Result<(), CacheError> {
        if self.is_absent() {
            return Ok(());
        }
        match wait_listed(&self.listed, self.sync_timeout).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(CacheError::Stopped),
            Err(()) => Err(CacheError::NotSynced {
                waited: self.sync_timeout,
                cause: self
                    .last_error
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clone()
                    .unwrap_or_else(|| {
                        "no watch error seen; the list has not completed yet".to_owned()
                    }),
            }),
        }
    }

    /// Whether the cluster does not serve the kind (an optional cache whose list answered
    /// 404 or 403, [`ObjectCache::start_optional`]).
    #[must_use]
    pub fn is_absent(&self) -> bool {
        self.absent
            .as_ref()
            .is_some_and(|a| a.load(std::sync::atomic::Ordering::Relaxed))
    }

    /// The kind, as logs and errors name it.
    #[must_use]
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// The watch task (it runs until the cache is dropped), for liveness.
    #[must_use]
    pub fn watch_task(&self) -> tokio::task::AbortHandle {
        self.task.abort_handle()
    }

    /// Every object (after [`ObjectCache::ready`]).
    #[must_use]
    pub fn all(&self) -> Vec<Arc<K>> {
        self.store.state()
    }

    /// The object `name` in `namespace` (empty for cluster-scoped kinds).
    #[must_use]
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<K>> {
        let r = reflector::ObjectRef::new_with(name, self.dyntype.clone());
        self.store.get(&if namespace.is_empty() {
            r
        } else {
            r.within(namespace)
        })
    }
}
