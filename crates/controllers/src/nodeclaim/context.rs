//! What every reconcile of the lifecycle controller shares: settings, clients, caches, clock.
//!
//! Responsibility: [`LifecycleConfig`]; [`Ctx`] (the workload client, the provider, Events,
//! Metrics, the Node and NodeClaim reflector stores, the in-memory Create-result cache keyed by
//! NodeClaim UID with a 1 h TTL, the per-object failure counts behind the 1 s … 1 min
//! exponential backoff) and [`Clock`], wall time that advances with tokio time so condition
//! transition times and timeouts work under a paused test clock.
//! Inputs: constructor arguments. Outputs: shared state for the phases.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use api::NodeClaim;
use cloudprovider::Launch;
use cloudprovider::types::normalize_provider_id;
use k8s_openapi::api::core::v1::Node;
use kube::runtime::reflector::Store;
use tokio::time::Instant;

use crate::events::Events;
use crate::metrics::Metrics;

/// How long a cached Create result is kept (upstream: 1 h).
const LAUNCH_CACHE_TTL: Duration = Duration::from_secs(3600);
/// A second look while a NodeClaim waits for its Node to appear or become initialized. Node
/// events trigger reconciles with the store already updated; this covers the one gap left: a
/// relist (after a watch fell too far behind) triggers before its list replaces the store.
pub(crate) const NODE_WAIT_POLL: Duration = Duration::from_secs(30);
/// Backoff bounds of failed reconciles.
const BACKOFF_MIN: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(60);

/// Settings of the lifecycle controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LifecycleConfig {
    /// A NodeClaim whose `Launched` stays not True this long (since its last transition) is
    /// deleted (upstream `LaunchTimeout`, 5 min).
    pub launch_timeout: Duration,
    /// A NodeClaim whose `Registered` stays not True this long (since its last transition) is
    /// deleted (15 min).
    pub registration_timeout: Duration,
    /// Requeue interval while a launched NodeClaim waits for its providerID.
    pub launch_poll: Duration,
}

impl Default for LifecycleConfig {
    fn default() -> Self {
        Self {
            launch_timeout: Duration::from_secs(5 * 60),
            registration_timeout: Duration::from_secs(15 * 60),
            launch_poll: Duration::from_secs(2),
        }
    }
}

pub use crate::clock::Clock;

/// The state shared by every reconcile.
pub(crate) struct Ctx<P> {
    pub client: kube::Client,
    pub provider: Arc<P>,
    pub events: Events,
    pub metrics: Arc<Metrics>,
    pub config: LifecycleConfig,
    pub clock: Clock,
    pub nodes: Store<Node>,
    /// The Node store's first-list flag ([`state::listed`]).
    pub nodes_listed: tokio::sync::watch::Receiver<Option<bool>>,
    pub launches: Arc<Mutex<HashMap<String, (Launch, Instant)>>>,
    pub failures: Mutex<HashMap<String, u32>>,
    /// Per NodeClaim UID: the resourceVersions our last successful writes left behind — the
    /// copy they started from and, when a metadata patch was followed by a status patch, the
    /// version between the two. A reconcile of one of those copies is of a store that has not
    /// seen our last write yet.
    pub written: Written,
}

/// Per NodeClaim UID, the resourceVersions our last successful writes left behind.
#[derive(Debug, Default)]
pub struct Written(Mutex<HashMap<String, Vec<String>>>);

impl Written {
    /// A write from the copy at `rv` succeeded.
    pub fn started_from(&self, uid: &str, rv: &str) {
        let mut written = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if written.len() >= WRITTEN_LIMIT {
            written.clear();
        }
        written.insert(uid.to_owned(), vec![rv.to_owned()]);
    }

    /// The version `rv` our write produced was overtaken by a later write of ours.
    pub fn overtaken(&self, uid: &str, rv: &str) {
        let mut written = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(stale) = written.get_mut(uid) {
            stale.push(rv.to_owned());
        }
    }

    /// Whether the copy at `rv` is one our writes left behind; a newer copy clears the memory.
    pub fn is_behind(&self, uid: &str, rv: &str) -> bool {
        let mut written = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match written.get(uid) {
            Some(stale) if stale.iter().any(|s| s == rv) => true,
            Some(_) => {
                written.remove(uid);
                false
            }
            None => false,
        }
    }
}

/// More remembered writes than this and the memory is dropped (deleted NodeClaims leave
/// theirs; forgetting only costs a conflict).
const WRITTEN_LIMIT: usize = 10_000;

impl<P> Ctx<P> {
    /// Remember that a write from `nc`'s copy succeeded.
    pub fn wrote_from(&self, nc: &api::NodeClaim) {
        if let (Some(uid), Some(rv)) = (&nc.metadata.uid, &nc.metadata.resource_version) {
            self.written.started_from(uid, rv);
        }
    }

    /// Remember that `nc` (the result of our write) was overtaken by a later write of ours in
    /// the same reconcile: a store holding it is behind too.
    pub fn wrote_over(&self, nc: &api::NodeClaim) {
        if let (Some(uid), Some(rv)) = (&nc.metadata.uid, &nc.metadata.resource_version) {
            self.written.overtaken(uid, rv);
        }
    }

    /// Whether `nc` is a copy our last successful writes left behind (the store is behind: the
    /// watch event of the last write will bring the newer one and trigger again).
    pub fn behind_our_write(&self, nc: &api::NodeClaim) -> bool {
        match (&nc.metadata.uid, &nc.metadata.resource_version) {
            (Some(uid), Some(rv)) => self.written.is_behind(uid, rv),
            _ => false,
        }
    }

    /// The cached Create result of the NodeClaim with this UID.
    pub fn cached_launch(&self, uid: &str) -> Option<Launch> {
        let cache = self.launches.lock().unwrap_or_else(PoisonError::into_inner);
        cache
            .get(uid)
            .filter(|(_, at)| at.elapsed() < LAUNCH_CACHE_TTL)
            .map(|(l, _)| l.clone())
    }

    /// Remembers a Create result (expired entries are dropped on the way).
    pub fn cache_launch(&self, uid: &str, launch: Launch) {
        let mut cache = self.launches.lock().unwrap_or_else(PoisonError::into_inner);
        cache.retain(|_, (_, at)| at.elapsed() < LAUNCH_CACHE_TTL);
        cache.insert(uid.to_owned(), (launch, Instant::now()));
    }

    /// Forgets the Create result of this UID.
    pub fn forget_launch(&self, uid: &str) {
        self.launches
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(uid);
    }

    /// Records one more failure of `key`; returns the delay before the retry.
    pub fn backoff(&self, key: &str) -> Duration {
        let mut failures = self.failures.lock().unwrap_or_else(PoisonError::into_inner);
        let n = failures.entry(key.to_owned()).or_insert(0);
        *n = n.saturating_add(1);
        backoff_delay(*n)
    }

    /// Forgets the failures of `key` (a reconcile succeeded).
    pub fn succeeded(&self, key: &str) {
        self.failures
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(key);
    }

    /// The Nodes whose `spec.providerID` equals `provider_id` (normalised).
    pub fn nodes_with_provider_id(&self, provider_id: &str) -> Vec<Arc<Node>> {
        nodes_matching(&self.nodes.state(), provider_id)
    }
}

/// The retry delay after `failures` consecutive failures: 1 s doubling up to 1 min.
#[must_use]
pub fn backoff_delay(failures: u32) -> Duration {
    let exp = failures.saturating_sub(1).min(16);
    BACKOFF_MIN.saturating_mul(1_u32 << exp).min(BACKOFF_MAX)
}

/// The Nodes of `nodes` whose providerID equals `provider_id` after normalisation.
#[must_use]
pub fn nodes_matching(nodes: &[Arc<Node>], provider_id: &str) -> Vec<Arc<Node>> {
    let wanted = normalize_provider_id(provider_id);
    if wanted.is_empty() {
        return Vec::new();
    }
    nodes
        .iter()
        .filter(|n| {
            n.spec
                .as_ref()
                .and_then(|s| s.provider_id.as_deref())
                .is_some_and(|p| normalize_provider_id(p) == wanted)
        })
        .cloned()
        .collect()
}

/// The providerID recorded on a NodeClaim (non-empty).
#[must_use]
pub fn provider_id_of(nc: &NodeClaim) -> Option<&str> {
    nc.status
        .as_ref()
        .and_then(|s| s.provider_id.as_deref())
        .filter(|p| !p.trim().is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_copies_our_writes_left_behind_are_skipped_until_a_newer_one_arrives() {
        let w = Written::default();
        assert!(!w.is_behind("u", "1"));
        // A metadata patch from version 1 made 2, the status patch then made 3.
        w.started_from("u", "1");
        w.overtaken("u", "2");
        assert!(w.is_behind("u", "1"));
        assert!(w.is_behind("u", "2"), "the version between our two patches");
        assert!(
            !w.is_behind("u", "3"),
            "the result of our last write is current"
        );
        assert!(!w.is_behind("u", "1"), "a newer copy cleared the memory");
        // Another NodeClaim is not affected, and overtaking needs a start.
        w.overtaken("v", "5");
        assert!(!w.is_behind("v", "5"));
    }

    #[test]
    fn backoff_doubles_from_one_second_to_one_minute() {
        let secs: Vec<u64> = (1..=8).map(|n| backoff_delay(n).as_secs()).collect();
        assert_eq!(secs, [1, 2, 4, 8, 16, 32, 60, 60]);
        assert_eq!(backoff_delay(u32::MAX), BACKOFF_MAX);
    }
}
