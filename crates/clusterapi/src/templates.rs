//! Infrastructure machine templates, as the live provider reads them: one watch per template
//! kind, started the first time a MachineDeployment names that kind.
//!
//! Responsibility: answer "what does the infrastructure template of this MachineDeployment
//! say" (`spec.template.spec.infrastructureRef` → the template object as JSON, for its
//! `status.capacity` and `status.nodeInfo`) from memory. Each kind (`DockerMachineTemplate`,
//! `AWSMachineTemplate`, …) gets a kube-runtime reflector over the management cluster the
//! first time it is asked for; the first lookup of a kind waits — at most the sync timeout,
//! and no longer than the watch's first error — for the initial list, later lookups never
//! wait. A kind whose watch fails (not served, forbidden) answers `None`, so the
//! MachineDeployment is described from its annotations alone; the failure is logged at warn
//! (rate-limited) and the kind is used as soon as its watch recovers.
//! Inputs: a management client, MachineDeployments. Outputs: template JSON or `None`.

use state::backoff::WatchBackoff;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use api::MachineDeployment;
use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::Value;
use tokio::sync::watch;

use crate::watch_errors::WatchErrors;

/// Where a kind's watch stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sync {
    /// Not listed yet, no error yet.
    Pending,
    /// Listed: the store answers.
    Ready,
    /// Failing (and not listed yet).
    Failing,
}

/// The watch of one template kind.
#[derive(Debug)]
struct KindWatch {
    resource: ApiResource,
    store: Store<DynamicObject>,
    sync: watch::Receiver<Sync>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for KindWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The watched infrastructure templates.
pub struct Templates {
    client: kube::Client,
    namespace: Option<String>,
    sync_timeout: Duration,
    kinds: Mutex<HashMap<GroupVersionKind, Arc<KindWatch>>>,
}

impl std::fmt::Debug for Templates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Templates")
            .field("sync_timeout", &self.sync_timeout)
            .finish_non_exhaustive()
    }
}

/// The kind, namespace and name of `md`'s infrastructure template.
fn reference(md: &MachineDeployment) -> Option<(GroupVersionKind, String, String)> {
    let r = &md.spec.template.spec.infrastructure_ref;
    let (api_version, kind, name) = (
        r.api_version.as_deref()?,
        r.kind.as_deref()?,
        r.name.as_deref()?,
    );
    if kind.is_empty() || name.is_empty() {
        return None;
    }
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let namespace = r
        .namespace
        .clone()
        .filter(|ns| !ns.is_empty())
        .or_else(|| md.metadata.namespace.clone())?;
    Some((
        GroupVersionKind::gvk(group, version, kind),
        namespace,
        name.to_owned(),
    ))
}

impl Templates {
    /// Templates of `management`; the first lookup of a kind waits at most `sync_timeout`.
    #[must_use]
    pub fn new(management: kube::Client, sync_timeout: Duration) -> Self {
        Self::scoped(management, None, sync_timeout)
    }

    /// Templates of `management` in `namespace` only (`None`: every namespace); a template
    /// elsewhere is not found.
    #[must_use]
    pub fn scoped(
        management: kube::Client,
        namespace: Option<String>,
        sync_timeout: Duration,
    ) -> Self {
        Self {
            client: management,
            namespace,
            sync_timeout,
            kinds: Mutex::default(),
        }
    }

    /// The infrastructure template `md` names, as JSON; `None` when it names none, its kind's
    /// watch has not listed (yet), or the template does not exist.
    pub async fn of(&self, md: &MachineDeployment) -> Option<Value> {
        let (gvk, namespace, name) = reference(md)?;
        let kind = self.watch(&gvk);
        let mut sync = kind.sync.clone();
        if *sync.borrow_and_update() == Sync::Pending {
            let _ = tokio::time::timeout(self.sync_timeout, sync.wait_for(|s| *s != Sync::Pending))
                .await;
        }
        if *sync.borrow() != Sync::Ready {
            return None;
        }
        let object = kind.store.get(
            &reflector::ObjectRef::new_with(&name, kind.resource.clone()).within(&namespace),
        )?;
        serde_json::to_value(object.as_ref()).ok()
    }

    /// The watch of `gvk`, started on first use.
    fn watch(&self, gvk: &GroupVersionKind) -> Arc<KindWatch> {
        let mut kinds = self.kinds.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(kind) = kinds.get(gvk) {
            return Arc::clone(kind);
        }
        let resource = ApiResource::from_gvk(gvk);
        let api: Api<DynamicObject> = match &self.namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &resource),
            None => Api::all_with(self.client.clone(), &resource),
        };
        let writer = reflector::store::Writer::new(resource.clone());
        let store = writer.as_reader();
        let (tx, sync) = watch::channel(Sync::Pending);
        let what = format!("{} (infrastructure templates)", gvk.kind);
        let task = tokio::spawn(async move {
            let mut errors = WatchErrors::new(what);
            let stream = watcher(api, watcher::Config::default())
                .retry_backoff()
                .reflect(writer);
            let mut stream = std::pin::pin!(stream);
            while let Some(event) = stream.next().await {
                match event {
                    Ok(watcher::Event::InitDone) => {
                        errors.succeeded();
                        tx.send_replace(Sync::Ready);
                    }
                    // `Init` starts a (re)list and comes before its outcome.
                    Ok(watcher::Event::Init) => {}
                    Ok(_) => errors.succeeded(),
                    Err(e) => {
                        errors.failed(&e);
                        tx.send_if_modified(|s| {
                            let was = *s;
                            if was == Sync::Pending {
                                *s = Sync::Failing;
                            }
                            was == Sync::Pending
                        });
                    }
                }
            }
        });
        let kind = Arc::new(KindWatch {
            resource,
            store,
            sync,
            task,
        });
        kinds.insert(gvk.clone(), Arc::clone(&kind));
        kind
    }
}
