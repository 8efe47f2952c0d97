//! Infrastructure machine templates, as the live provider reads them: one watch per template
//! kind, started the first time a MachineDeployment names that kind.
//!
//! Responsibility: answer "what does the infrastructure template of this MachineDeployment
//! say" (`spec.template.spec.infrastructureRef` → the template object as JSON, for its
//! `status.capacity` and `status.nodeInfo`) from memory. A v1beta1 reference pins its
//! `apiVersion`; a v1beta2 reference names only `apiGroup` and `kind`, resolved once through
//! discovery to the group's preferred version serving that kind (a group or kind discovery
//! cannot find is logged and asked again a minute later). Each kind (`DockerMachineTemplate`,
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
use std::time::{Duration, Instant};

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
    /// `(group, kind)` of version-less (v1beta2) references → the served version.
    resolved: Mutex<HashMap<(String, String), Resolved>>,
}

impl std::fmt::Debug for Templates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Templates")
            .field("sync_timeout", &self.sync_timeout)
            .finish_non_exhaustive()
    }
}

/// What `md`'s infrastructure template reference names.
struct Reference {
    group: String,
    /// v1beta1 references pin a version; v1beta2 references leave it to discovery.
    version: Option<String>,
    kind: String,
    namespace: String,
    name: String,
}

/// The group, version (if pinned), kind, namespace and name of `md`'s infrastructure template.
fn reference(md: &MachineDeployment) -> Option<Reference> {
    let r = &md.spec.template.spec.infrastructure_ref;
    let (group, kind, name) = (r.group()?, r.kind.as_deref()?, r.name.as_deref()?);
    if kind.is_empty() || name.is_empty() {
        return None;
    }
    Some(Reference {
        group: group.to_owned(),
        version: r.pinned_version().map(str::to_owned),
        kind: kind.to_owned(),
        namespace: r.namespace_or(md.metadata.namespace.as_deref())?.to_owned(),
        name: name.to_owned(),
    })
}

/// How long a group and kind that discovery could not resolve is not asked about again.
const UNRESOLVED_RETRY: Duration = Duration::from_secs(60);

/// A group and kind resolved through discovery, or when resolving last failed.
#[derive(Debug, Clone)]
enum Resolved {
    Found(ApiResource),
    Failed(Instant),
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
            resolved: Mutex::default(),
        }
    }

    /// The infrastructure template `md` names, as JSON; `None` when it names none, its kind's
    /// watch has not listed (yet), or the template does not exist.
    pub async fn of(&self, md: &MachineDeployment) -> Option<Value> {
        let r = reference(md)?;
        let resource = match &r.version {
            Some(v) => ApiResource::from_gvk(&GroupVersionKind::gvk(&r.group, v, &r.kind)),
            None => self.resolve(&r.group, &r.kind).await?,
        };
        let (namespace, name) = (r.namespace, r.name);
        let kind = self.watch(&resource);
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

    /// The resource serving `kind` of `group` in the version discovery prefers (a v1beta2
    /// `ContractVersionedObjectReference` names no version). A failure is logged and not
    /// asked again for [`UNRESOLVED_RETRY`].
    async fn resolve(&self, group: &str, kind: &str) -> Option<ApiResource> {
        let key = (group.to_owned(), kind.to_owned());
        let known = self
            .resolved
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key)
            .cloned();
        match known {
            Some(Resolved::Found(r)) => return Some(r),
            Some(Resolved::Failed(at)) if at.elapsed() < UNRESOLVED_RETRY => return None,
            _ => {}
        }
        let found = match kube::discovery::oneshot::group(&self.client, group).await {
            Ok(g) => g.recommended_kind(kind).map(|(r, _)| r).ok_or_else(|| {
                format!("group {group} serves no kind {kind} (versions: {})", {
                    let v: Vec<&str> = g.versions().collect();
                    v.join(", ")
                })
            }),
            Err(kube::Error::Api(s)) if s.code == 404 => Err(format!(
                "the management cluster does not serve API group {group} (is its infrastructure provider installed?)"
            )),
            Err(kube::Error::Api(s)) => Err(format!(
                "discovery of API group {group}: {} ({})",
                s.message, s.code
            )),
            Err(e) => Err(format!("discovery of API group {group}: {e}")),
        };
        let entry = match found {
            Ok(r) => Resolved::Found(r),
            Err(e) => {
                tracing::warn!(%group, %kind, error = %e,
                    "cannot resolve an infrastructure template reference; MachineDeployments naming it are described from their annotations alone");
                Resolved::Failed(Instant::now())
            }
        };
        self.resolved
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key, entry.clone());
        match entry {
            Resolved::Found(r) => Some(r),
            Resolved::Failed(_) => None,
        }
    }

    /// The watch of `resource`, started on first use.
    fn watch(&self, resource: &ApiResource) -> Arc<KindWatch> {
        let gvk = GroupVersionKind::gvk(&resource.group, &resource.version, &resource.kind);
        let mut kinds = self.kinds.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(kind) = kinds.get(&gvk) {
            return Arc::clone(kind);
        }
        let resource = resource.clone();
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
                .modify(state::strip_managed_fields)
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
        kinds.insert(gvk, Arc::clone(&kind));
        kind
    }
}
