//! Machine garbage collection.
//!
//! Responsibility: remove Machines that are provably ours and that no NodeClaim will ever use:
//! - **orphaned**: claimed by a NodeClaim of **this** workload cluster (the claim's
//!   [`CLAIMED_BY_CLUSTER`] names our identity) that no longer exists here (or exists under the
//!   same name with another UID, [`CLAIMED_BY_UID`]). Claims naming another workload cluster, or
//!   none (claims of another Karpenter), are left alone;
//! - **surplus**: Machines created for replicas **we raised** (the MachineDeployment's
//!   ownership record, see [`crate::provider::ownership`]: not in its baseline, and only as
//!   many as raised replicas are unclaimed) that nobody claimed, older than
//!   [`GcConfig::grace`] (by `creationTimestamp`, or by how long this collector has seen them
//!   unclaimed), that no waiting create needs (the provider's reservation count), only of
//!   MachineDeployments **selected by one of our NodeClasses** (in scope), kept while their
//!   MachineDeployment is at or below its min-size annotation (that is the user's baseline).
//!   A Machine that was there before we raised anything — a running MachineDeployment that
//!   was just opted in — is never surplus.
//!
//! - **finished**: our own removals that were interrupted after the `delete-machine`
//!   annotation and before replicas were lowered (a failed write, a restart): the Machine
//!   carries our `removed-by` annotation but the ownership record does not account for it.
//!
//! Removal is the provider's own delete path (`ClusterApiProvider::remove_machine`): annotate
//! `cluster.x-k8s.io/delete-machine` with a resourceVersion precondition, then lower replicas
//! and the ownership record once per Machine, batched with other removals of the MD (at min
//! size the Machine is deleted instead). A Machine already annotated or deleting is skipped
//! unless the removal is ours and unaccounted for, so replicas are never lowered twice for one
//! Machine; the decision is re-checked on a fresh read under the MachineDeployment lock, so a
//! concurrent claim wins (its write changes the resourceVersion).
//!
//! Inputs: the provider (its Machine cache, clients, scope, locks) and a [`GcConfig`]. Outputs:
//! a [`GcReport`] per pass; [`MachineGc::run`] repeats passes every [`GcConfig::interval`].

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use api::well_known::capi::MIN_SIZE;
use api::{Machine, MachineDeployment, NodeClaim};
use cloudprovider::{CloudProviderError, ObjectRef};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, ListParams};
use tokio::time::Instant;

use crate::annotations::parse_size;
use crate::instance_types::MachineDeploymentRef;
use crate::provider::ownership::{Record, Removed, removed_by};
use crate::provider::{
    CLAIMED_BY, CLAIMED_BY_CLUSTER, CLAIMED_BY_UID, ClusterApiProvider, Removal, annotation, cache,
    claimable, claimed_by, deployment_of, terminating,
};

/// Settings of the collector.
#[derive(Debug, Clone)]
pub struct GcConfig {
    /// Time between passes.
    pub interval: Duration,
    /// How old an unclaimed Machine must be before it is surplus.
    pub grace: Duration,
}

impl Default for GcConfig {
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(60),
            grace: Duration::from_secs(600),
        }
    }
}

/// What one pass removed, and what it could not check.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GcReport {
    /// Machines removed because their NodeClaim is gone.
    pub orphaned: Vec<ObjectRef>,
    /// Unclaimed Machines removed after the grace period.
    pub surplus: Vec<ObjectRef>,
    /// Our removals that were interrupted (annotated, replicas not yet lowered) and are now
    /// finished.
    pub finished: Vec<ObjectRef>,
    /// Per-Machine failures (retried next pass).
    pub errors: Vec<String>,
}

/// The Machine garbage collector.
pub struct MachineGc {
    provider: Arc<ClusterApiProvider>,
    config: GcConfig,
    /// Machine UID → when a pass first saw it unclaimed.
    first_seen: Mutex<HashMap<String, Instant>>,
}

impl std::fmt::Debug for MachineGc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MachineGc")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// `md`'s min-size annotation (absent or invalid: 0).
fn min_size(md: &MachineDeployment) -> i32 {
    parse_size(
        MIN_SIZE,
        md.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(MIN_SIZE))
            .map(String::as_str),
    )
    .ok()
    .flatten()
    .unwrap_or(0)
    .max(0)
}

impl MachineGc {
    /// A collector over `provider`'s Machines.
    #[must_use]
    pub fn new(provider: Arc<ClusterApiProvider>, config: GcConfig) -> Self {
        Self {
            provider,
            config,
            first_seen: Mutex::default(),
        }
    }

    /// Run passes every [`GcConfig::interval`] forever (errors are retried next pass).
    pub async fn run(self) {
        let mut tick = tokio::time::interval(self.config.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            // A failed pass is retried at the next tick.
            let _report = self.collect().await;
        }
    }

    fn old_enough(&self, uid: &str, created: Option<Timestamp>, now: Instant) -> bool {
        let grace = SignedDuration::try_from(self.config.grace).unwrap_or(SignedDuration::MAX);
        let by_clock = created.is_some_and(|c| Timestamp::now().duration_since(c) >= grace);
        let mut first_seen = self
            .first_seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let seen = *first_seen.entry(uid.to_owned()).or_insert(now);
        by_clock || now.duration_since(seen) >= self.config.grace
    }

    /// One pass.
    ///
    /// # Errors
    /// Transient, when the Machine cache is not ready, the identity of this workload cluster
    /// is unknown, or MachineDeployments or NodeClasses cannot be listed.
    pub async fn collect(&self) -> Result<GcReport, CloudProviderError> {
        let p = &self.provider;
        p.cache()
            .ready()
            .await
            .map_err(|e| CloudProviderError::Transient(format!("Machine cache: {e}")))?;
        let cluster = p.cluster_id().await?.to_owned();
        let mds: Api<MachineDeployment> = Api::all(p.management().clone());
        let mds = mds
            .list(&ListParams::default())
            .await
            .map_err(|e| CloudProviderError::Transient(format!("list MachineDeployments: {e}")))?;
        let classes = p.all_node_classes().await?;
        let in_scope: HashMap<MachineDeploymentRef, &MachineDeployment> = mds
            .items
            .iter()
            .filter(|md| p.config().scope.contains(md))
            .map(|md| (MachineDeploymentRef::of(md), md))
            .collect();
        let now = Instant::now();
        let mut report = GcReport::default();
        let mut unclaimed_uids = HashSet::new();
        let mut removed_surplus: HashMap<MachineDeploymentRef, usize> = HashMap::new();
        let mut machines = p.cache().machines();
        machines.sort_by(|a, b| {
            (&a.metadata.namespace, &a.metadata.name)
                .cmp(&(&b.metadata.namespace, &b.metadata.name))
        });
        for m in machines {
            let Some(md_ref) = deployment_of(&m) else {
                continue;
            };
            let Some(md) = in_scope.get(&md_ref) else {
                continue;
            };
            let r = cache::machine_ref(&m);
            if terminating(&m) {
                if removed_by(&m, &cluster) {
                    self.finish_removal(&m, md, &cluster, r, &mut report).await;
                }
                continue;
            }
            if annotation(&m.metadata, CLAIMED_BY_UID).is_some() {
                // Only claims naming this workload cluster are ours to judge.
                if claimed_by(&m, &cluster) {
                    self.collect_orphan(&m, r, &mut report).await;
                }
                continue;
            }
            if !claimable(&m, &md_ref) || !p.selected(&classes, md) {
                continue;
            }
            // Only Machines created for replicas we raised (not in the record's baseline).
            let record = match Record::of(md, &cluster) {
                Ok(record) => record,
                Err(e) => {
                    report.errors.push(e.to_string());
                    continue;
                }
            };
            if record.raised == 0 || !record.newborn(&m) {
                continue;
            }
            let uid = m.metadata.uid.clone().unwrap_or_else(|| r.to_string());
            unclaimed_uids.insert(uid.clone());
            let created = m.metadata.creation_timestamp.as_ref().map(|t| t.0);
            if !self.old_enough(&uid, created, now) {
                continue;
            }
            if md.spec.replicas.unwrap_or(0) <= min_size(md) {
                continue;
            }
            let already = removed_surplus.get(&md_ref).copied().unwrap_or(0);
            let target = md_ref.clone();
            let ours = cluster.clone();
            let spare = move |p: &ClusterApiProvider, fresh: &Machine, record: &Record| {
                claimable(fresh, &target)
                    && record.newborn(fresh)
                    && p.spare(&target, record, &ours) > already
            };
            match p.remove_machine(&r, spare).await {
                Ok(Removal::Removed) => {
                    *removed_surplus.entry(md_ref).or_default() += 1;
                    report.surplus.push(r);
                }
                Ok(_) => {}
                Err(e) => report.errors.push(format!("remove Machine {r}: {e}")),
            }
        }
        self.first_seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|uid, _| unclaimed_uids.contains(uid));
        Ok(report)
    }

    /// Finish our removal of `m` if it was interrupted between the `delete-machine` annotation
    /// and its accounting (per `md`'s record as listed; the removal re-checks it fresh).
    async fn finish_removal(
        &self,
        m: &Machine,
        md: &MachineDeployment,
        cluster: &str,
        r: ObjectRef,
        report: &mut GcReport,
    ) {
        let unfinished = match Record::of(md, cluster) {
            Ok(record) => match record.removal_of(m) {
                None => true,
                Some(Removed::Deleted) => m.metadata.deletion_timestamp.is_none(),
                Some(Removed::ScaledDown) => false,
            },
            Err(e) => {
                report.errors.push(e.to_string());
                return;
            }
        };
        if !unfinished {
            return;
        }
        match self.provider.remove_machine(&r, |_, _, _| true).await {
            Ok(Removal::Finished) => report.finished.push(r),
            Ok(_) => {}
            Err(e) => report
                .errors
                .push(format!("finish removal of Machine {r}: {e}")),
        }
    }

    /// Remove `m` (claimed by a NodeClaim of this workload cluster) if that NodeClaim is gone.
    async fn collect_orphan(&self, m: &Machine, r: ObjectRef, report: &mut GcReport) {
        let Some(uid) = annotation(&m.metadata, CLAIMED_BY_UID) else {
            return;
        };
        let name = annotation(&m.metadata, CLAIMED_BY).unwrap_or_default();
        let nodeclaims: Api<NodeClaim> = Api::all(self.provider.workload().clone());
        let alive = if name.is_empty() {
            false
        } else {
            match nodeclaims.get_opt(name).await {
                Ok(nc) => nc.is_some_and(|nc| nc.metadata.uid.as_deref() == Some(uid)),
                Err(e) => {
                    report.errors.push(format!("get NodeClaim {name}: {e}"));
                    return;
                }
            }
        };
        if alive {
            return;
        }
        let uid = uid.to_owned();
        let cluster = annotation(&m.metadata, CLAIMED_BY_CLUSTER).map(str::to_owned);
        let still_ours = move |_: &ClusterApiProvider, fresh: &Machine, _: &Record| {
            annotation(&fresh.metadata, CLAIMED_BY_UID) == Some(uid.as_str())
                && annotation(&fresh.metadata, CLAIMED_BY_CLUSTER) == cluster.as_deref()
        };
        match self.provider.remove_machine(&r, still_ours).await {
            Ok(Removal::Removed) => report.orphaned.push(r),
            Ok(_) => {}
            Err(e) => report.errors.push(format!("remove Machine {r}: {e}")),
        }
    }
}
