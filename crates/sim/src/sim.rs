//! The simulated API server as a value.
//!
//! Responsibility: own the [`State`] behind one lock and expose every API operation as a
//! method (each runs atomically under the lock), plus the knobs tests use: configuration,
//! watch-history compaction, fault injection ([`crate::fault`]), and a router to serve it.
//! After each write it starts a tokio timer for every graceful deletion the write began, which
//! finishes the deletion when the grace period is over (if a tokio runtime is running).
//! Inputs: [`SimConfig`], operation arguments. Outputs: served JSON, [`WatchStream`]s, an
//! `axum::Router`.

use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use serde_json::Value;

use crate::deletion::DeleteOptions;
use crate::error::ApiResult;
use crate::fault::{FaultConfig, Faults};
use crate::lifecycle::Reap;
use crate::options::{ListOptions, WriteOptions};
use crate::patch::PatchType;
use crate::registry::Registry;
use crate::semantics::WriteMode;
use crate::state::{Answer, Endpoint, State};
use crate::watch::{Signals, WatchStream};

/// Server settings.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Watch events kept per resource; watches from older versions get 410 Expired.
    pub watch_history: usize,
    /// How often a watch that allows bookmarks gets a `BOOKMARK`.
    pub bookmark_interval: Duration,
    /// The `gitVersion` reported at `/version`.
    pub version: String,
    /// Whether a graceful pod deletion finishes by itself when its grace period is over (as
    /// if the kubelet or the pod garbage collector did it). Off, such pods stay until deleted
    /// with a shorter grace period.
    pub reap_graceful_deletions: bool,
    /// Injected faults (none by default).
    pub faults: FaultConfig,
    /// Compact the watch history periodically, as kube-apiserver's
    /// `--etcd-compaction-interval` does: each tick drops the history up to the version of the
    /// tick before, so watches from (and continue tokens of) older versions get 410. `None`
    /// (the default): history is bounded by `watch_history` only.
    pub compaction_interval: Option<Duration>,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            watch_history: 1000,
            bookmark_interval: Duration::from_secs(10),
            version: "v1.33.0-sim".into(),
            reap_graceful_deletions: true,
            faults: FaultConfig::default(),
            compaction_interval: None,
        }
    }
}

#[derive(Debug)]
struct Inner {
    state: Mutex<State>,
    config: SimConfig,
    faults: Faults,
    compactions: tokio::sync::watch::Sender<u64>,
    closes: tokio::sync::watch::Sender<u64>,
    /// Set by [`Sim::stop_watches`]: a watch started afterwards ends at once.
    stopped: std::sync::atomic::AtomicBool,
}

/// An in-memory Kubernetes API server. Cheap to clone; clones share the state.
#[derive(Debug, Clone)]
pub struct Sim {
    inner: Arc<Inner>,
}

impl Default for Sim {
    fn default() -> Self {
        Self::new(SimConfig::default())
    }
}

impl Sim {
    /// A server with the built-in resources and the default namespaces. With a
    /// `compaction_interval`, the compactor runs on the current tokio runtime (none without
    /// one) until the last clone is dropped.
    pub fn new(config: SimConfig) -> Self {
        let interval = config.compaction_interval;
        let sim = Self {
            inner: Arc::new(Inner {
                state: Mutex::new(State::new(config.watch_history)),
                faults: Faults::new(config.faults.clone()),
                compactions: tokio::sync::watch::channel(0).0,
                closes: tokio::sync::watch::channel(0).0,
                stopped: std::sync::atomic::AtomicBool::new(false),
                config,
            }),
        };
        if let (Some(every), Ok(runtime)) = (interval, tokio::runtime::Handle::try_current()) {
            let weak = Arc::downgrade(&sim.inner);
            runtime.spawn(async move {
                let mut previous = 0;
                loop {
                    tokio::time::sleep(every.max(Duration::from_millis(10))).await;
                    let Some(inner) = weak.upgrade() else { return };
                    let sim = Sim { inner };
                    let mut st = sim.lock();
                    st.store.compact_to(previous);
                    previous = st.store.current_rv();
                }
            });
        }
        sim
    }

    /// The settings.
    pub fn config(&self) -> &SimConfig {
        &self.inner.config
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the state half-written in a way that
        // matters more than losing the server, so keep serving.
        self.inner
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Run a write under the lock, then start the timers of the graceful deletions it began.
    fn write<T>(&self, op: impl FnOnce(&mut State) -> T) -> T {
        let (out, reaps) = {
            let mut st = self.lock();
            let out = op(&mut st);
            (out, std::mem::take(&mut st.reaps))
        };
        self.schedule(reaps);
        out
    }

    fn schedule(&self, reaps: Vec<Reap>) {
        if reaps.is_empty() || !self.inner.config.reap_graceful_deletions {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        for reap in reaps {
            let weak: Weak<Inner> = Arc::downgrade(&self.inner);
            runtime.spawn(async move {
                tokio::time::sleep(reap.after).await;
                if let Some(inner) = weak.upgrade() {
                    Sim { inner }.write(|st| st.reap(&reap));
                }
            });
        }
    }

    /// An `axum::Router` serving this server's API, with the injected faults; also a tower
    /// `Service` usable in-process (e.g. `kube::Client::new(sim.router(), "default")`).
    pub fn router(&self) -> axum::Router {
        crate::http::router(self.clone(), true)
    }

    /// A router that never injects faults: for the simulated world's own controllers, so
    /// faults hit only the system under test.
    pub fn router_without_faults(&self) -> axum::Router {
        crate::http::router(self.clone(), false)
    }

    /// The fault injector.
    pub fn faults(&self) -> &Faults {
        &self.inner.faults
    }

    /// Replace the injected faults (restarting their random sequence from the new seed).
    pub fn set_faults(&self, config: FaultConfig) {
        self.inner.faults.set(config);
    }

    /// A snapshot of the served resource types.
    pub fn registry(&self) -> Registry {
        self.lock().registry.clone()
    }

    /// The resource type an endpoint serves, or 404.
    pub fn resource_def(
        &self,
        ep: &Endpoint,
    ) -> ApiResult<std::sync::Arc<crate::registry::ResourceDef>> {
        self.lock().resolve(ep)
    }

    /// The latest resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.lock().store.current_rv()
    }

    /// Drop all watch history (as an etcd compaction): open watches end with 410 Expired and
    /// watches from older versions are refused with 410, so clients must relist.
    pub fn compact(&self) {
        self.lock().store.compact();
        self.inner.compactions.send_modify(|n| *n += 1);
    }

    /// End every open watch (cleanly, as when the server shuts down); clients re-watch.
    pub fn close_watches(&self) {
        self.inner.closes.send_modify(|n| *n += 1);
    }

    /// End every open watch and every watch started from now on (the server is shutting
    /// down). A client whose watch ends re-watches at once, possibly on a connection the
    /// server has not yet told to close; that watch must end too, or a graceful shutdown
    /// would wait for it forever.
    pub fn stop_watches(&self) {
        self.inner
            .stopped
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.close_watches();
    }

    /// Create.
    pub fn create(&self, ep: &Endpoint, body: Value, opts: &WriteOptions) -> ApiResult<Answer> {
        self.write(|st| st.create(ep, body, opts))
    }

    /// Get.
    pub fn get(&self, ep: &Endpoint, name: &str) -> ApiResult<Value> {
        self.lock().get(ep, name)
    }

    /// List.
    pub fn list(&self, ep: &Endpoint, opts: &ListOptions) -> ApiResult<Value> {
        self.lock().list(ep, opts)
    }

    /// List, the items shared with the store: the lock is held only to pick them, not to copy
    /// or encode them.
    pub fn list_page(
        &self,
        ep: &Endpoint,
        opts: &ListOptions,
    ) -> ApiResult<crate::state::ListPage> {
        self.lock().list_page(ep, opts)
    }

    /// Replace (or replace the status). Returns the object and whether it was created.
    pub fn update(
        &self,
        ep: &Endpoint,
        name: &str,
        body: Value,
        mode: WriteMode,
        opts: &WriteOptions,
    ) -> ApiResult<(Answer, bool)> {
        self.write(|st| st.update(ep, name, body, mode, opts))
    }

    /// Patch (or patch the status). Returns the object and whether it was created.
    pub fn patch(
        &self,
        ep: &Endpoint,
        name: &str,
        kind: PatchType,
        body: &[u8],
        mode: WriteMode,
        opts: &WriteOptions,
    ) -> ApiResult<(Answer, bool)> {
        self.write(|st| st.patch(ep, name, kind, body, mode, opts))
    }

    /// Delete one object with `DeleteOptions`.
    pub fn delete(
        &self,
        ep: &Endpoint,
        name: &str,
        options: &DeleteOptions,
        opts: &WriteOptions,
    ) -> ApiResult<Value> {
        self.write(|st| st.delete(ep, name, options, opts))
    }

    /// Delete every matching object.
    pub fn delete_collection(
        &self,
        ep: &Endpoint,
        list: &ListOptions,
        options: &DeleteOptions,
        opts: &WriteOptions,
    ) -> ApiResult<Value> {
        self.write(|st| st.delete_collection(ep, list, options, opts))
    }

    /// Get a Scale.
    pub fn get_scale(&self, ep: &Endpoint, name: &str) -> ApiResult<Value> {
        self.lock().get_scale(ep, name)
    }

    /// Replace a Scale.
    pub fn update_scale(
        &self,
        ep: &Endpoint,
        name: &str,
        scale: &Value,
        opts: &WriteOptions,
    ) -> ApiResult<Value> {
        self.write(|st| st.update_scale(ep, name, scale, opts))
    }

    /// Patch a Scale.
    pub fn patch_scale(
        &self,
        ep: &Endpoint,
        name: &str,
        kind: PatchType,
        body: &[u8],
        opts: &WriteOptions,
    ) -> ApiResult<Value> {
        self.write(|st| st.patch_scale(ep, name, kind, body, opts))
    }

    /// Bind a pod to a node.
    pub fn bind(
        &self,
        ep: &Endpoint,
        name: &str,
        binding: &Value,
        opts: &WriteOptions,
    ) -> ApiResult<Value> {
        self.write(|st| st.bind(ep, name, binding, opts))
    }

    /// Evict a pod, honouring PodDisruptionBudgets.
    pub fn evict(
        &self,
        ep: &Endpoint,
        name: &str,
        eviction: &Value,
        opts: &WriteOptions,
    ) -> ApiResult<Value> {
        self.write(|st| st.evict(ep, name, eviction, opts))
    }

    /// Start a watch.
    pub fn watch(&self, ep: &Endpoint, opts: ListOptions) -> ApiResult<WatchStream> {
        let mut closes = self.inner.closes.subscribe();
        // Subscribed first: a stop after this point bumps `closes`, one before it set `stopped`.
        if self.inner.stopped.load(std::sync::atomic::Ordering::SeqCst) {
            closes.mark_changed();
        }
        let signals = Signals {
            compactions: self.inner.compactions.subscribe(),
            closes,
        };
        self.lock()
            .watch(ep, opts, self.inner.config.bookmark_interval, signals)
    }
}
