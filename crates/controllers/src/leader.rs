//! Lease-based leader election, like client-go's `leaderelection` (spec §6
//! `--disable-leader-election`, `--leader-election-name`, `--leader-election-namespace`).
//!
//! Responsibility: [`LeaderElector`] competes for one `coordination.k8s.io/v1` Lease:
//! - a candidate takes the Lease when it is absent (create), has no holder, is already ours, or
//!   has expired — client-go's rule only: its record (holder and `renewTime`) has not changed
//!   for a whole lease duration *as observed by our own monotonic clock*. The Lease's
//!   timestamps are never compared with our wall clock: with clock skew between replicas that
//!   comparison declares a live leader's Lease expired, and two replicas lead. Taking it from
//!   someone else (or from nobody) increments `leaseTransitions` and sets `acquireTime`;
//! - every write is a JSON merge patch carrying the Lease's `metadata.resourceVersion`, so two
//!   candidates never both win: a 409 means "re-read and try again";
//! - [`LeaderElector::acquire`] retries every `retry_period` until it leads, then spawns the
//!   renewal task, which renews every `retry_period`. Leadership is lost (the
//!   [`LeaderElector::leading`] channel turns `false` and the task ends) as soon as another
//!   holder is seen in the Lease, or when no renewal succeeded for `renew_deadline`. Every
//!   attempt (GET and PATCH) runs under a deadline: the time left until `renew_deadline`
//!   after the last successful renewal, so a hanging request cannot keep a leader acting past
//!   the point where another replica may take over (`lease_duration` > `renew_deadline`);
//! - [`LeaderElector::release`] (on shutdown) stops renewing and, if we still hold the Lease,
//!   clears `holderIdentity` (lease duration 1 s) so another replica takes over at once.
//!
//! Inputs: a `kube::Client`, the Lease's namespace and name, our identity, [`LeaseConfig`].
//! Outputs: Lease writes, the `leading` watch channel.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Timing of the election (client-go's names and Karpenter's defaults).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseConfig {
    /// How long a Lease is valid after its last renewal (`leaseDurationSeconds`). Default 15 s.
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before giving up. Default 10 s.
    pub renew_deadline: Duration,
    /// The pause between attempts. Default 2 s.
    pub retry_period: Duration,
}

impl Default for LeaseConfig {
    fn default() -> Self {
        Self {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// `<hostname>_<suffix>`, the suffix made of the process id and the start time so restarts on
/// the same host get a new identity.
#[must_use]
pub fn default_identity() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "karpenter".into());
    let nanos = Timestamp::now().as_nanosecond();
    format!("{host}_{:x}{:x}", std::process::id(), nanos & 0xffff_ffff)
}

/// The outcome of one attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Attempt {
    /// We hold the Lease (acquired or renewed).
    Held,
    /// Someone else holds a valid Lease.
    HeldBy(String),
    /// A conflict or API error: try again.
    Retry,
}

/// What we last saw in the Lease, and when (tokio clock).
#[derive(Debug, Default)]
struct Observed {
    record: Option<(Option<String>, Option<MicroTime>)>,
    at: Option<Instant>,
}

#[derive(Debug)]
struct Inner {
    api: Api<Lease>,
    name: String,
    identity: String,
    config: LeaseConfig,
    leading: watch::Sender<bool>,
    observed: Mutex<Observed>,
}

/// One candidate for the Lease.
#[derive(Debug)]
pub struct LeaderElector {
    inner: Arc<Inner>,
    renewal: Mutex<Option<JoinHandle<()>>>,
}

impl LeaderElector {
    /// A candidate for Lease `namespace/name` as `identity` (see [`default_identity`]).
    #[must_use]
    pub fn new(
        client: kube::Client,
        namespace: &str,
        name: &str,
        identity: String,
        config: LeaseConfig,
    ) -> Self {
        let (leading, _) = watch::channel(false);
        Self {
            inner: Arc::new(Inner {
                api: Api::namespaced(client, namespace),
                name: name.to_owned(),
                identity,
                config,
                leading,
                observed: Mutex::default(),
            }),
            renewal: Mutex::default(),
        }
    }

    /// Our identity.
    #[must_use]
    pub fn identity(&self) -> &str {
        &self.inner.identity
    }

    /// Waits until we lead, then starts the renewal task (a no-op while already leading).
    pub async fn acquire(&self) {
        if *self.inner.leading.borrow() {
            return;
        }
        loop {
            let attempt = tokio::time::timeout(
                self.inner.config.renew_deadline,
                self.inner.try_acquire_or_renew(),
            )
            .await
            .unwrap_or(Attempt::Retry);
            if attempt == Attempt::Held {
                break;
            }
            tokio::time::sleep(self.inner.config.retry_period).await;
        }
        tracing::info!(identity = %self.inner.identity, lease = %self.inner.name,
            "acquired leadership");
        self.inner.leading.send_replace(true);
        let inner = Arc::clone(&self.inner);
        let task = tokio::spawn(async move { inner.renew_until_lost().await });
        if let Some(old) = self
            .renewal
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .replace(task)
        {
            old.abort();
        }
    }

    /// `true` while we lead; turns `false` when leadership is lost or released.
    #[must_use]
    pub fn leading(&self) -> watch::Receiver<bool> {
        self.inner.leading.subscribe()
    }

    /// Stops renewing and, if we hold the Lease, hands it back (clears `holderIdentity`).
    pub async fn release(&self) {
        if let Some(task) = self
            .renewal
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            task.abort();
        }
        self.inner.leading.send_replace(false);
        if let Err(e) = self.inner.release().await {
            tracing::warn!(error = %e, lease = %self.inner.name, "lease not released");
        }
    }
}

impl Drop for LeaderElector {
    fn drop(&mut self) {
        if let Some(task) = self
            .renewal
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            task.abort();
        }
    }
}

fn secs(d: Duration) -> i32 {
    i32::try_from(d.as_secs().max(1)).unwrap_or(i32::MAX)
}

fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

impl Inner {
    async fn renew_until_lost(&self) {
        let mut last_renewal = Instant::now();
        loop {
            tokio::time::sleep(self.config.retry_period).await;
            let left = self
                .config
                .renew_deadline
                .saturating_sub(last_renewal.elapsed());
            let attempt = tokio::time::timeout(left, self.try_acquire_or_renew())
                .await
                .unwrap_or(Attempt::Retry);
            match attempt {
                Attempt::Held => last_renewal = Instant::now(),
                Attempt::HeldBy(other) => {
                    tracing::warn!(holder = %other, lease = %self.name, "leadership lost");
                    break;
                }
                Attempt::Retry if last_renewal.elapsed() >= self.config.renew_deadline => {
                    tracing::warn!(lease = %self.name, "lease not renewed in time; leadership lost");
                    break;
                }
                Attempt::Retry => {}
            }
        }
        self.leading.send_replace(false);
    }

    /// Whether a Lease held by someone else may be taken.
    fn expired(&self, spec: &LeaseSpec) -> bool {
        let record = (spec.holder_identity.clone(), spec.renew_time.clone());
        let unchanged_since = {
            let mut observed = self.observed.lock().unwrap_or_else(PoisonError::into_inner);
            if observed.record.as_ref() != Some(&record) || observed.at.is_none() {
                observed.record = Some(record);
                observed.at = Some(Instant::now());
            }
            observed.at.unwrap_or_else(Instant::now)
        };
        let duration = spec
            .lease_duration_seconds
            .map_or(self.config.lease_duration, |s| {
                Duration::from_secs(u64::try_from(s).unwrap_or(0))
            });
        unchanged_since.elapsed() >= duration
    }

    async fn try_acquire_or_renew(&self) -> Attempt {
        let now = Timestamp::now();
        let lease = match self.api.get_opt(&self.name).await {
            Ok(lease) => lease,
            Err(e) => {
                tracing::warn!(error = %e, lease = %self.name, "lease not read");
                return Attempt::Retry;
            }
        };
        let Some(lease) = lease else {
            return self.create(now).await;
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        let ours = holder.as_deref() == Some(self.identity.as_str());
        if let Some(other) = holder.as_ref().filter(|_| !ours)
            && !self.expired(&spec)
        {
            return Attempt::HeldBy(other.clone());
        }
        let (acquire_time, transitions) = if ours {
            (
                spec.acquire_time.clone(),
                spec.lease_transitions.unwrap_or(0),
            )
        } else {
            (
                Some(MicroTime(now)),
                spec.lease_transitions.unwrap_or(0).saturating_add(1),
            )
        };
        let patch = json!({
            "metadata": {"resourceVersion": lease.metadata.resource_version},
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": secs(self.config.lease_duration),
                "acquireTime": acquire_time,
                "renewTime": MicroTime(now),
                "leaseTransitions": transitions,
            },
        });
        match self
            .api
            .patch(&self.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => Attempt::Held,
            Err(e) => {
                if !is_conflict(&e) {
                    tracing::warn!(error = %e, lease = %self.name, "lease not written");
                }
                Attempt::Retry
            }
        }
    }

    async fn create(&self, now: Timestamp) -> Attempt {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(self.identity.clone()),
                lease_duration_seconds: Some(secs(self.config.lease_duration)),
                acquire_time: Some(MicroTime(now)),
                renew_time: Some(MicroTime(now)),
                lease_transitions: Some(0),
                ..LeaseSpec::default()
            }),
        };
        match self.api.create(&PostParams::default(), &lease).await {
            Ok(_) => Attempt::Held,
            Err(e) => {
                tracing::debug!(error = %e, lease = %self.name, "lease not created");
                Attempt::Retry
            }
        }
    }

    async fn release(&self) -> Result<(), kube::Error> {
        let Some(lease) = self.api.get_opt(&self.name).await? else {
            return Ok(());
        };
        let spec = lease.spec.unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return Ok(());
        }
        let now = MicroTime(Timestamp::now());
        let patch = json!({
            "metadata": {"resourceVersion": lease.metadata.resource_version},
            "spec": {
                "holderIdentity": null,
                "leaseDurationSeconds": 1,
                "acquireTime": now,
                "renewTime": now,
            },
        });
        self.api
            .patch(&self.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(|_| ())
    }
}
