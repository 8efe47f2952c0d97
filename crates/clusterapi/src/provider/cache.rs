//! The Machine cache: a `kube::runtime` reflector over every Machine of the management
//! cluster, an index by normalised providerID, and a change signal.
//!
//! Responsibility: answer "which Machines exist" and "which Machine has this providerID" from
//! memory, and let callers **wait for the next change** (a `tokio::sync::watch` counter bumped
//! after every watch event has been applied to the store) instead of polling.
//! Inputs: a management client. Outputs: [`MachineCache`]. The watch task stops when the cache
//! is dropped.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

use api::Machine;
use cloudprovider::ObjectRef;
use cloudprovider::types::normalize_provider_id;
use futures::StreamExt;
use kube::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::watch;

type Index = Arc<RwLock<HashMap<String, ObjectRef>>>;

/// The reflector-backed Machine cache.
#[derive(Debug)]
pub struct MachineCache {
    store: Store<Machine>,
    index: Index,
    changes: watch::Receiver<u64>,
    task: tokio::task::JoinHandle<()>,
}

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
    /// Start watching Machines in every namespace of `management`.
    #[must_use]
    pub fn start(management: kube::Client) -> Self {
        let (store, writer) = reflector::store();
        let (tx, changes) = watch::channel(0_u64);
        let index: Index = Arc::default();
        let api: Api<Machine> = Api::all(management);
        let task_index = Arc::clone(&index);
        let task = tokio::spawn(async move {
            let stream = watcher(api, watcher::Config::default())
                .default_backoff()
                .reflect(writer);
            let mut stream = std::pin::pin!(stream);
            // Rebuilt from scratch on every (re)list, swapped in at InitDone.
            let mut fresh: Option<HashMap<String, ObjectRef>> = None;
            while let Some(event) = stream.next().await {
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
                        }
                        watcher::Event::Delete(m) => {
                            let r = machine_ref(&m);
                            index.retain(|_, v| *v != r);
                        }
                    }
                }
                tx.send_modify(|n| *n = n.wrapping_add(1));
            }
        });
        Self {
            store,
            index,
            changes,
            task,
        }
    }

    /// Wait until the first list has been applied.
    ///
    /// # Errors
    /// When the watch task ended before (only on shutdown).
    pub async fn ready(&self) -> Result<(), reflector::store::WriterDropped> {
        self.store.wait_until_ready().await
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
            .get(&reflector::ObjectRef::new(&r.name).within(&r.namespace))
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
