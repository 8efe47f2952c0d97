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
//! - **adopted** instead of surplus: such a Machine whose Node joined (`status.nodeRef`),
//!   older than [`ADOPT_AFTER`], that no waiting create needs, gets a NodeClaim from a
//!   NodePool that can take it (`provider::adopt`): Machines Cluster API makes for a
//!   `RollingUpdate` rollout, or that came after their launch gave up, become ordinary nodes
//!   (consolidation removes them within the budgets) instead of being taken from under their
//!   pods. One no NodePool can take stays surplus.
//!
//! - **released**: replicas we raised whose Machines never came (a paused MachineSet or
//!   Cluster, rejected creates, quota) and that no create waits for, after
//!   [`GcConfig::grace`]: dropped from the ownership record, and replicas lowered by as many
//!   as the MachineSet really lacks Machines for (never below the min size);
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

use api::{Machine, MachineDeployment, MachinePool, MachineSet, NodeClaim, NodePool};
use cloudprovider::{CloudProviderError, ObjectRef};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, ListParams};
use tokio::time::Instant;

use crate::instance_types::MachineDeploymentRef;
use crate::provider::ownership::{Record, Removed, removed_by};
use crate::provider::{
    CLAIMED_BY, CLAIMED_BY_CLUSTER, CLAIMED_BY_UID, ClusterApiProvider, Removal, annotation, cache,
    claimable, claimed_by, deployment_of, terminating,
};

/// How old an unclaimed Machine with a Node must be before it is adopted.
pub const ADOPT_AFTER: Duration = Duration::from_secs(60);

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
    /// Unclaimed Machines whose Node joined, given a NodeClaim (name) instead.
    pub adopted: Vec<(ObjectRef, String)>,
    /// Our removals that were interrupted (annotated, replicas not yet lowered) and are now
    /// finished.
    pub finished: Vec<ObjectRef>,
    /// Replicas we raised whose Machines never came, let go after the grace period.
    pub released: Vec<Released>,
    /// What looks like ours but is not provably so, left alone.
    pub left_alone: Vec<String>,
    /// Per-Machine failures (retried next pass).
    pub errors: Vec<String>,
}

impl GcReport {
    /// Log what this pass removed (info), could not do (warn) and left alone (info).
    pub fn log(&self) {
        let refs = |v: &[ObjectRef]| v.iter().map(ToString::to_string).collect::<Vec<_>>();
        if !self.orphaned.is_empty() {
            tracing::info!(machines = ?refs(&self.orphaned), "removed Machines whose NodeClaim is gone");
        }
        if !self.surplus.is_empty() {
            tracing::info!(machines = ?refs(&self.surplus), "removed Machines nobody claimed");
        }
        if !self.adopted.is_empty() {
            let adopted: Vec<String> = self
                .adopted
                .iter()
                .map(|(m, nc)| format!("{m} → {nc}"))
                .collect();
            tracing::info!(
                ?adopted,
                "gave Machines nobody claimed, whose Node joined, a NodeClaim"
            );
        }
        if !self.finished.is_empty() {
            tracing::info!(machines = ?refs(&self.finished), "finished interrupted Machine removals");
        }
        for r in &self.released {
            tracing::info!(machine_deployment = %r.machine_deployment, released = r.released,
                lowered = r.lowered, "let go of raised replicas whose Machines never came");
        }
        for error in &self.errors {
            tracing::warn!(%error, "Machine garbage collection");
        }
        for what in &self.left_alone {
            tracing::info!(%what, "Machine garbage collection left this alone");
        }
    }
}

/// Replicas of one MachineDeployment let go by [`MachineGc`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Released {
    /// The MachineDeployment.
    pub machine_deployment: MachineDeploymentRef,
    /// Replicas dropped from the ownership record.
    pub released: usize,
    /// By how much `spec.replicas` went down (less when the MachineSet had Machines for
    /// them after all, or at the min size).
    pub lowered: i32,
}

/// The Machine garbage collector.
pub struct MachineGc {
    provider: Arc<ClusterApiProvider>,
    config: GcConfig,
    /// Machine UID → when a pass first saw it unclaimed.
    first_seen: Mutex<HashMap<String, Instant>>,
    /// MachineDeployment → since when a pass has seen raised replicas without Machines.
    unborn_since: Mutex<HashMap<MachineDeploymentRef, Instant>>,
}

impl std::fmt::Debug for MachineGc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MachineGc")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl MachineGc {
    /// A collector over `provider`'s Machines.
    #[must_use]
    pub fn new(provider: Arc<ClusterApiProvider>, config: GcConfig) -> Self {
        Self {
            provider,
            config,
            first_seen: Mutex::default(),
            unborn_since: Mutex::default(),
        }
    }

    /// Run passes every [`GcConfig::interval`] forever (errors are retried next pass). What a
    /// pass did, could not do, or left alone is logged.
    pub async fn run(self) {
        let mut tick = tokio::time::interval(self.config.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            match self.collect().await {
                Ok(report) => report.log(),
                // Retried at the next tick.
                Err(error) => tracing::warn!(%error, "Machine garbage collection pass failed"),
            }
        }
    }

    fn old_enough(&self, uid: &str, created: Option<Timestamp>, now: Instant) -> bool {
        self.older_than(uid, created, now, self.config.grace)
    }

    /// Whether the unclaimed Machine `uid` is older than `age` by its `creationTimestamp`, or
    /// has been seen unclaimed by this collector for that long.
    fn older_than(
        &self,
        uid: &str,
        created: Option<Timestamp>,
        now: Instant,
        age: Duration,
    ) -> bool {
        let min = SignedDuration::try_from(age).unwrap_or(SignedDuration::MAX);
        let by_clock = created.is_some_and(|c| Timestamp::now().duration_since(c) >= min);
        let mut first_seen = self
            .first_seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let seen = *first_seen.entry(uid.to_owned()).or_insert(now);
        by_clock || now.duration_since(seen) >= age
    }

    /// Whether the unclaimed Machine `m`, made for a replica we raised, is adopted instead of
    /// collected: its Node joined (`status.nodeRef`), it is older than [`ADOPT_AFTER`] (a
    /// launch claims its Machine well before its Node joins), and no waiting create needs it.
    fn adoptable(
        &self,
        m: &Machine,
        md: &MachineDeploymentRef,
        record: &Record,
        cluster: &str,
        now: Instant,
    ) -> bool {
        let joined = m
            .status
            .as_ref()
            .and_then(|s| s.node_ref.as_ref())
            .is_some_and(|n| n.name.as_deref().is_some_and(|n| !n.is_empty()));
        let uid = m
            .metadata
            .uid
            .clone()
            .unwrap_or_else(|| cache::machine_ref(m).to_string());
        let created = m.metadata.creation_timestamp.as_ref().map(|t| t.0);
        joined
            && self.older_than(&uid, created, now, ADOPT_AFTER)
            && self.provider.spare(md, record, cluster) > 0
    }

    /// One pass.
    ///
    /// # Errors
    /// Transient, when the Machine cache is not ready, the identity of this workload cluster
    /// is unknown, or MachineDeployments or NodeClasses cannot be listed.
    pub async fn collect(&self) -> Result<GcReport, CloudProviderError> {
        let p = &self.provider;
        p.ready().await?;
        let cluster = p.cluster_id().await?.to_owned();
        let mds: Api<MachineDeployment> = match &p.scope().namespace {
            Some(ns) => Api::namespaced_with(p.management().clone(), ns, p.capi()),
            None => Api::all_with(p.management().clone(), p.capi()),
        };
        let sets: Api<MachineSet> = match &p.scope().namespace {
            Some(ns) => Api::namespaced_with(p.management().clone(), ns, p.capi()),
            None => Api::all_with(p.management().clone(), p.capi()),
        };
        let mut groups = mds
            .list(&ListParams::default())
            .await
            .map_err(|e| CloudProviderError::Transient(format!("list MachineDeployments: {e}")))?
            .items;
        let sets = sets
            .list(&ListParams::default())
            .await
            .map_err(|e| CloudProviderError::Transient(format!("list MachineSets: {e}")))?;
        groups.extend(crate::selection::stand_alone(&sets.items));
        let machine_pools: Api<MachinePool> = match &p.scope().namespace {
            Some(ns) => Api::namespaced_with(p.management().clone(), ns, p.capi()),
            None => Api::all_with(p.management().clone(), p.capi()),
        };
        match machine_pools.list(&ListParams::default()).await {
            Ok(pools) => {
                groups.extend(pools.items.iter().map(MachineDeployment::from_machine_pool))
            }
            // A cluster that serves no MachinePools, or RBAC that does not grant them (the
            // provider's MachinePool watch warns): no MachinePool is a node group then.
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 403 => {}
            Err(e) => {
                return Err(CloudProviderError::Transient(format!(
                    "list MachinePools: {e}"
                )));
            }
        }
        let classes = p.all_node_classes().await?;
        let in_scope: HashMap<MachineDeploymentRef, &MachineDeployment> = groups
            .iter()
            .filter(|md| p.config().scope.contains(md))
            .map(|md| (MachineDeploymentRef::of(md), md))
            .collect();
        let now = Instant::now();
        let mut report = GcReport::default();
        let mut unclaimed_uids = HashSet::new();
        let mut pools: Option<Result<Vec<NodePool>, String>> = None;
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
            if self.adoptable(&m, &md_ref, &record, &cluster, now) {
                if pools.is_none() {
                    pools = Some(
                        Api::<NodePool>::all(p.workload().clone())
                            .list(&ListParams::default())
                            .await
                            .map(|l| l.items)
                            .map_err(|e| format!("list NodePools: {e}")),
                    );
                }
                match pools.as_ref() {
                    Some(Ok(pools)) => match p.adopt(&m, md, &cluster, pools, &classes).await {
                        Ok(Some(nc)) => {
                            report.adopted.push((r, nc));
                            continue;
                        }
                        // No NodePool can take it: it is surplus like any other, below.
                        Ok(None) => {}
                        Err(e) => {
                            report.errors.push(format!("adopt Machine {r}: {e}"));
                            continue;
                        }
                    },
                    Some(Err(e)) => {
                        report.errors.push(e.clone());
                        continue;
                    }
                    None => {}
                }
            }
            let created = m.metadata.creation_timestamp.as_ref().map(|t| t.0);
            if !self.old_enough(&uid, created, now) {
                continue;
            }
            match p.min_size(md) {
                Ok(min) if md.spec.replicas.unwrap_or(0) > min => {}
                Ok(_) => continue,
                Err(e) => {
                    report.errors.push(e.to_string());
                    continue;
                }
            }
            // The record is read fresh for each removal and already accounts for the ones
            // before it, so "spare" needs no bookkeeping here.
            let target = md_ref.clone();
            let ours = cluster.clone();
            let spare = move |p: &ClusterApiProvider, fresh: &Machine, record: &Record| {
                claimable(fresh, &target)
                    && record.newborn(fresh)
                    && p.spare(&target, record, &ours) > 0
            };
            match p.remove_surplus(&r, spare).await {
                Ok(Removal::Removed | Removal::Deleted(_)) => report.surplus.push(r),
                Ok(_) => {}
                Err(e) => report.errors.push(format!("remove Machine {r}: {e}")),
            }
        }
        self.first_seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|uid, _| unclaimed_uids.contains(uid));
        self.release_unborn(&in_scope, &classes, &cluster, now, &mut report)
            .await;
        Ok(report)
    }

    /// Let go of replicas we raised whose Machines never came (and no create waits for), once
    /// they have been missing for the grace period; report records of MachineDeployments no
    /// NodeClass of ours selects any more (left alone).
    async fn release_unborn(
        &self,
        in_scope: &HashMap<MachineDeploymentRef, &MachineDeployment>,
        classes: &[api::ClusterAPINodeClass],
        cluster: &str,
        now: Instant,
        report: &mut GcReport,
    ) {
        let p = &self.provider;
        let mut lacking = HashSet::new();
        let mut mds: Vec<_> = in_scope.iter().collect();
        mds.sort_by(|a, b| a.0.cmp(b.0));
        for (md_ref, md) in mds {
            let record = match Record::of(md, cluster) {
                Ok(record) if record.raised > 0 => record,
                Ok(_) => continue,
                Err(e) => {
                    report.errors.push(e.to_string());
                    continue;
                }
            };
            if !p.selected(classes, md) {
                report.left_alone.push(format!(
                    "{md_ref:#}: {} replicas raised by this cluster, but no \
                     NodeClass of ours selects it",
                    record.raised
                ));
                continue;
            }
            let born = p
                .machines_of(md_ref)
                .iter()
                .filter(|m| claimable(m, md_ref) && record.newborn(m))
                .filter(|m| !p.claimed_locally(&cache::machine_ref(m)))
                .count();
            let unborn = p.spare(md_ref, &record, cluster).saturating_sub(born);
            if unborn == 0 {
                continue;
            }
            lacking.insert(md_ref.clone());
            let since = *self
                .unborn_since
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entry(md_ref.clone())
                .or_insert(now);
            if now.duration_since(since) < self.config.grace {
                continue;
            }
            match p.release_unborn(md_ref, unborn).await {
                Ok((lowered, released)) if released > 0 => report.released.push(Released {
                    machine_deployment: md_ref.clone(),
                    released,
                    lowered,
                }),
                Ok(_) => {}
                Err(e) => report
                    .errors
                    .push(format!("release replicas of {md_ref:#}: {e}")),
            }
        }
        self.unborn_since
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|md, _| lacking.contains(md));
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
            Ok(Removal::Removed | Removal::Deleted(_)) => report.orphaned.push(r),
            Ok(_) => {}
            Err(e) => report.errors.push(format!("remove Machine {r}: {e}")),
        }
    }
}
