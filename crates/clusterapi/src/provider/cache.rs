//! The Machine cache: a `kube::runtime` reflector over every Machine of the management
//! cluster, an index by normalised providerID, and a change signal.
//!
//! Responsibility: answer "which Machines exist" and "which Machine has this providerID" from
//! memory, and let callers **wait for the next change** (a `tokio::sync::watch` counter bumped
//! after every watch event has been applied to the store) instead of polling.
//!
//! Never silent: a watch error (a 403 from missing RBAC, an unreachable server) is logged at
//! warn — the first at once, then at most once a minute with the number held back — and kept
//! as the cache's last error; recovery is logged once. [`MachineCache::ready`] waits at most
//! the sync timeout for the first list, then fails with [`CacheError::NotSynced`] naming that
//! last error, so creates, deletes and the collector report the cause instead of hanging.
//! Inputs: a management client, the sync timeout. Outputs: [`MachineCache`]. The watch task
//! stops when the cache is dropped.

use state::backoff::WatchBackoff;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use api::Machine;
use cloudprovider::ObjectRef;
use cloudprovider::types::normalize_provider_id;
use futures::StreamExt;
use kube::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::{broadcast, watch};

use crate::watch_errors::WatchErrors;

type Index = Arc<RwLock<HashMap<String, ObjectRef>>>;

/// Why the cache cannot answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CacheError {
    /// The first list did not complete within the sync timeout.
    #[error("the watch has not listed within {waited:?}: {cause}")]
    NotSynced {
        /// How long [`MachineCache::ready`] waited.
        waited: Duration,
        /// The last watch error, or that none was seen.
        cause: String,
    },
    /// The watch task ended (only on shutdown).
    #[error("the watch stopped")]
    Stopped,
}

/// The watch's last error, and its reporting.
#[derive(Debug)]
struct Health {
    last_error: Option<String>,
    report: WatchErrors,
}

impl Health {
    fn failed(&mut self, error: &watcher::Error) {
        self.last_error = Some(error.to_string());
        self.report.failed(error);
    }

    fn succeeded(&mut self) {
        self.last_error = None;
        self.report.succeeded();
    }
}

/// The reflector-backed Machine cache.
#[derive(Debug)]
pub struct MachineCache {
    store: Store<Machine>,
    capi: api::CapiVersion,
    index: Index,
    changes: watch::Receiver<u64>,
    health: Arc<Mutex<Health>>,
    sync_timeout: Duration,
    listed: watch::Receiver<Option<bool>>,
    claimed_changes: broadcast::Sender<String>,
    task: tokio::task::JoinHandle<()>,
}

/// How many claimed-Machine changes a slow listener may fall behind before it skips some
/// (its safety poll covers those).
const CLAIMED_CHANGES_BUFFER: usize = 4096;

impl Drop for MachineCache {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The reference of a Machine.
#[must_use]
pub fn machine_ref(m: &Machine) -> ObjectRef {
    ObjectRef::new(
        m.metadata.namespace.as_deref().unwrap_or_default(),
        m.metadata.name.as_deref().unwrap_or_default(),
    )
}

fn provider_id(m: &Machine) -> Option<String> {
    m.spec
        .fields
        .provider_id
        .as_deref()
        .filter(|p| !p.trim().is_empty())
        .map(normalize_provider_id)
}

impl MachineCache {
    /// Start watching Machines in every namespace of `management`, or in `namespace` only;
    /// [`MachineCache::ready`] waits at most `sync_timeout` for the first list.
    #[must_use]
    pub fn start(
        management: kube::Client,
        namespace: Option<&str>,
        capi: &api::CapiVersion,
        sync_timeout: Duration,
    ) -> Self {
        let writer = reflector::store::Writer::new(capi.clone());
        let store = writer.as_reader();
        let (tx, changes) = watch::channel(0_u64);
        let index: Index = Arc::default();
        let health = Arc::new(Mutex::new(Health {
            last_error: None,
            report: WatchErrors::new("Machine"),
        }));
        let api: Api<Machine> = match namespace {
            Some(ns) => Api::namespaced_with(management, ns, capi),
            None => Api::all_with(management, capi),
        };
        let task_index = Arc::clone(&index);
        let task_health = Arc::clone(&health);
        let (claimed_changes, _) = broadcast::channel(CLAIMED_CHANGES_BUFFER);
        let task_claimed = claimed_changes.clone();
        let task = tokio::spawn(async move {
            let stream = watcher(api, watcher::Config::default())
                .retry_backoff()
                .modify(state::strip_managed_fields)
                .reflect(writer);
            let mut stream = std::pin::pin!(stream);
            // Rebuilt from scratch on every (re)list, swapped in at InitDone.
            let mut fresh: Option<HashMap<String, ObjectRef>> = None;
            while let Some(event) = stream.next().await {
                {
                    let mut health = task_health.lock().unwrap_or_else(PoisonError::into_inner);
                    match &event {
                        // `Init` starts a (re)list and comes before its outcome.
                        Ok(watcher::Event::Init) => {}
                        Ok(_) => health.succeeded(),
                        Err(e) => health.failed(e),
                    }
                }
                if let Ok(event) = event {
                    let mut index = task_index.write().unwrap_or_else(PoisonError::into_inner);
                    match event {
                        watcher::Event::Init => fresh = Some(HashMap::new()),
                        watcher::Event::InitApply(m) => {
                            if let (Some(fresh), Some(id)) = (fresh.as_mut(), provider_id(&m)) {
                                fresh.insert(id, machine_ref(&m));
                            }
                        }
                        watcher::Event::InitDone => {
                            if let Some(fresh) = fresh.take() {
                                *index = fresh;
                            }
                        }
                        watcher::Event::Apply(m) => {
                            let r = machine_ref(&m);
                            index.retain(|_, v| *v != r);
                            if let Some(id) = provider_id(&m) {
                                index.insert(id, r);
                            }
                            if let Some(nc) = super::annotation(&m.metadata, super::CLAIMED_BY) {
                                // No listener is not an error.
                                let _ = task_claimed.send(nc.to_owned());
                            }
                        }
                        watcher::Event::Delete(m) => {
                            let r = machine_ref(&m);
                            index.retain(|_, v| *v != r);
                            // A claimed Machine gone is news too: its NodeClaim's termination
                            // waits for exactly this.
                            if let Some(nc) = super::annotation(&m.metadata, super::CLAIMED_BY) {
                                let _ = task_claimed.send(nc.to_owned());
                            }
                        }
                    }
                }
                tx.send_modify(|n| *n = n.wrapping_add(1));
            }
        });
        Self {
            listed: state::listed::listed(&store),
            store,
            capi: capi.clone(),
            index,
            changes,
            health,
            sync_timeout,
            claimed_changes,
            task,
        }
    }

    /// The watch task (it runs until the cache is dropped), for liveness.
    #[must_use]
    pub fn watch_task(&self) -> tokio::task::AbortHandle {
        self.task.abort_handle()
    }

    /// The names of the NodeClaims (of any workload cluster) whose claimed Machine changed or
    /// was deleted, from now on; a listener that falls far behind skips what it missed.
    #[must_use]
    pub fn claimed_changes(&self) -> futures::stream::BoxStream<'static, String> {
        let rx = self.claimed_changes.subscribe();
        futures::stream::unfold(rx, |mut rx| async move {
            loop {
                match rx.recv().await {
                    Ok(name) => return Some((name, rx)),
                    Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => return None,
                }
            }
        })
        .boxed()
    }

    /// Wait until the first list has been applied, at most the sync timeout.
    ///
    /// # Errors
    /// [`CacheError::NotSynced`] naming the last watch error when the first list did not
    /// complete in time; [`CacheError::Stopped`] when the watch task ended (only on shutdown).
    pub async fn ready(&self) -> Result<(), CacheError> {
        match super::objects::wait_listed(&self.listed, self.sync_timeout).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(CacheError::Stopped),
            Err(()) => Err(CacheError::NotSynced {
                waited: self.sync_timeout,
                cause: self.last_error().unwrap_or_else(|| {
                    "no watch error seen; the list has not completed yet".to_owned()
                }),
            }),
        }
    }

    /// The watch's last error, while it keeps failing.
    #[must_use]
    pub fn last_error(&self) -> Option<String> {
        self.health
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .last_error
            .clone()
    }

    /// Every Machine.
    #[must_use]
    pub fn machines(&self) -> Vec<Arc<Machine>> {
        self.store.state()
    }

    /// The Machine `r`.
    #[must_use]
    pub fn get(&self, r: &ObjectRef) -> Option<Arc<Machine>> {
        self.store
            .get(&reflector::ObjectRef::new_with(&r.name, self.capi.clone()).within(&r.namespace))
    }

    /// The Machine whose providerID equals `provider_id` after normalisation.
    #[must_use]
    pub fn by_provider_id(&self, provider_id: &str) -> Option<Arc<Machine>> {
        let r = self
            .index
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&normalize_provider_id(provider_id))
            .cloned()?;
        self.get(&r)
    }

    /// A receiver that changes after every applied watch event. Call `borrow_and_update`
    /// before inspecting the cache, then `changed().await` to wait for the next event.
    #[must_use]
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changes.clone()
    }
}
