//! The loop every world controller runs, and the watches that wake it.
//!
//! Responsibility: run a [`Reconciler`]'s level-triggered pass again whenever one of its
//! watches (kube-runtime watchers, so any API server works) reports a change, when a deadline
//! the pass asked for comes, or every resync interval; record each controller's passes and
//! last error in [`Health`]. Passes read fresh lists from the API server, so a pass never acts
//! on a stale cache; the watches only say *when* to look.
//! Inputs: a reconciler, watch targets, a resync interval. Outputs: spawned tokio tasks.
//! All waiting uses tokio time, so tests may run with paused time.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use super::WorldError;
use crate::touch::Touch;

/// What a pass returns: when it wants to run again at the latest (something falls due), or an
/// error (the pass is retried soon).
pub type PassResult = Result<Option<Duration>, WorldError>;

/// A level-triggered controller: each pass looks at the whole world and fixes what differs.
pub trait Reconciler: Send + 'static {
    /// The controller's name, for [`Health`].
    fn name(&self) -> &'static str;
    /// One pass.
    fn pass(&mut self) -> impl Future<Output = PassResult> + Send;
}

/// How one controller is doing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ControllerHealth {
    /// Passes that succeeded.
    pub passes: u64,
    /// Passes that failed.
    pub failures: u64,
    /// The last failure's message.
    pub last_error: Option<String>,
}

/// Every controller's health, shared with the tasks.
#[derive(Debug, Clone, Default)]
pub struct Health(Arc<Mutex<BTreeMap<&'static str, ControllerHealth>>>);

impl Health {
    fn update(&self, name: &'static str, f: impl FnOnce(&mut ControllerHealth)) {
        let mut map = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(map.entry(name).or_default());
    }

    /// A snapshot, by controller name.
    pub fn snapshot(&self) -> BTreeMap<&'static str, ControllerHealth> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

/// How long a failed pass waits before the next try (unless woken earlier).
const RETRY_AFTER_ERROR: Duration = Duration::from_secs(1);

/// Run a reconciler until the task is aborted.
pub async fn drive<R: Reconciler>(
    mut reconciler: R,
    wake: Arc<Notify>,
    resync: Duration,
    health: Health,
    min_interval: Duration,
) {
    let name = reconciler.name();
    loop {
        let started = tokio::time::Instant::now();
        let wait = match reconciler.pass().await {
            Ok(next) => {
                health.update(name, |h| h.passes += 1);
                next.map_or(resync, |d| d.min(resync))
            }
            Err(e) => {
                health.update(name, |h| {
                    h.failures += 1;
                    h.last_error = Some(e.to_string());
                });
                RETRY_AFTER_ERROR.min(resync)
            }
        };
        tokio::select! {
            () = wake.notified() => {}
            () = tokio::time::sleep(wait.max(Duration::from_millis(1))) => {}
        }
        // Under churn, let events pile up into one pass instead of passing back to back.
        if !min_interval.is_zero() {
            tokio::time::sleep_until(started + min_interval).await;
        }
    }
}

/// Watch a resource and wake `wake` on every event. Objects are decoded as [`Touch`]es only
/// (their identity and version): the passes read what they need themselves.
pub fn watch<K>(api: Api<Touch<K>>, wake: Arc<Notify>) -> JoinHandle<()>
where
    K: kube::Resource + Send + 'static,
{
    watch_for_all(api, vec![wake])
}

/// Watch a resource once for several controllers: wake each of `wakes` on every event (one
/// watch and one decode per event, however many controllers want it).
pub fn watch_for_all<K>(api: Api<Touch<K>>, wakes: Vec<Arc<Notify>>) -> JoinHandle<()>
where
    K: kube::Resource + Send + 'static,
{
    tokio::spawn(run_watch(api, wakes))
}

/// What [`watch_for_all`] spawns: watch until the task is aborted.
pub async fn run_watch<K>(api: Api<Touch<K>>, wakes: Vec<Arc<Notify>>)
where
    K: kube::Resource + Send + 'static,
{
    let mut events = watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    while let Some(event) = events.next().await {
        if event.is_ok() {
            for wake in &wakes {
                wake.notify_one();
            }
        }
    }
}

/// A controller's tasks: its loop and its watches, and the least time between the starts of
/// two passes of one controller (zero: pass again as soon as something changes).
#[derive(Debug, Default)]
pub struct Tasks(pub Vec<JoinHandle<()>>, pub Duration);

impl Tasks {
    /// Start a reconciler woken by the watches `watches` starts (each given the shared wake-up).
    pub fn start<R: Reconciler>(
        &mut self,
        reconciler: R,
        resync: Duration,
        health: &Health,
        watches: impl FnOnce(&Arc<Notify>) -> Vec<JoinHandle<()>>,
    ) {
        let wake = self.start_woken(reconciler, resync, health);
        self.0.extend(watches(&wake));
    }

    /// Start a reconciler; returns its wake-up, for watches shared with other controllers
    /// ([`watch_for_all`]).
    pub fn start_woken<R: Reconciler>(
        &mut self,
        reconciler: R,
        resync: Duration,
        health: &Health,
    ) -> Arc<Notify> {
        let wake = Arc::new(Notify::new());
        self.0.push(tokio::spawn(drive(
            reconciler,
            Arc::clone(&wake),
            resync,
            health.clone(),
            self.1,
        )));
        wake
    }

    /// Abort every task.
    pub fn abort(&self) {
        for t in &self.0 {
            t.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    struct Counter;

    impl Reconciler for Counter {
        fn name(&self) -> &'static str {
            "counter"
        }

        async fn pass(&mut self) -> PassResult {
            Ok(None)
        }
    }

    async fn passes_during_a_burst(min_interval: Duration) -> u64 {
        let wake = Arc::new(Notify::new());
        let health = Health::default();
        let task = tokio::spawn(drive(
            Counter,
            Arc::clone(&wake),
            Duration::from_secs(3600),
            health.clone(),
            min_interval,
        ));
        // 100 events, 10 ms apart: one second of churn.
        for _ in 0..100 {
            wake.notify_one();
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        task.abort();
        health.snapshot()["counter"].passes
    }

    #[tokio::test(start_paused = true)]
    async fn a_minimum_interval_folds_bursts_into_fewer_passes() {
        let eager = passes_during_a_burst(Duration::ZERO).await;
        let folded = passes_during_a_burst(Duration::from_millis(100)).await;
        assert!(eager >= 100, "every event passes when eager: {eager}");
        assert!((10..=13).contains(&folded), "one pass per 100 ms: {folded}");
    }
}
