//! Removal: terminate the Machine of a NodeClaim, and the one removal path the collector uses
//! too — `delete-machine` by compare-and-set, then one replica write for every removal queued on
//! the MachineDeployment (batching); at the min size the Machine is deleted instead.
//!
//! Responsibility: `ClusterApiProvider::terminate`, `remove_machine` and its batch. The
//! `delete-machine` annotation's value is the time we asked; a Machine we scaled down for
//! that is still there, not deleting, [`crate::ProviderConfig::removal_escalation`] later
//! (a rollout shrank another MachineSet) is deleted directly by the next delete, so its
//! NodeClaim never stays Terminating forever; and one a raise of the MachineDeployment would
//! cancel (Cluster API has not carried the scale-down out yet) is deleted directly before the
//! raise ([`ClusterApiProvider::finish_pending_scale_downs`]).
//! Inputs: a NodeClaim or a Machine reference with a check. Outputs: a [`Removal`] or a typed
//! error.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::PoisonError;

use api::well_known::capi::{DELETE_MACHINE, DEPLOYMENT_NAME};
use api::{Machine, NodeClaim};
use cloudprovider::{CloudProviderError, ObjectRef};
use futures::StreamExt;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::runtime::events::{Event, EventType};
use kube::{Resource, ResourceExt};
use serde_json::json;

use crate::instance_types::MachineDeploymentRef;

use super::machinesets::ScaleDownTarget;
use super::ownership::{REMOVED_BY, Record, Removed, removed_by};
use super::scale::{Attempts, MdWrite, min_size, too_many_conflicts};
use super::{
    ClusterApiProvider, cache, claimable, deployment_of, legacy_binding, not_claimed_by,
    status_code, terminating, transient,
};

/// Machines of one batch read and annotated at once.
const PREPARE_CONCURRENCY: usize = 16;

/// Now, as the `delete-machine` annotation's value.
fn now_rfc3339() -> String {
    k8s_openapi::jiff::Timestamp::from_second(wall_seconds())
        .map_or_else(|_| "karpenter".to_owned(), |t| t.to_string())
}

/// Seconds since the epoch by tokio's clock (wall time at start plus tokio's elapsed time, so
/// tests with paused time see time pass).
fn wall_seconds() -> i64 {
    static START: std::sync::OnceLock<(std::time::SystemTime, tokio::time::Instant)> =
        std::sync::OnceLock::new();
    let (wall, mono) =
        START.get_or_init(|| (std::time::SystemTime::now(), tokio::time::Instant::now()));
    let now = *wall + mono.elapsed();
    now.duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// Whether our `delete-machine` annotation on `m` carries a time at least `age` ago (a value
/// that is not a time — older versions wrote `karpenter` — never escalates).
fn requested_before(m: &Machine, age: std::time::Duration) -> bool {
    let Some(at) = m
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(DELETE_MACHINE))
        .and_then(|v| v.parse::<k8s_openapi::jiff::Timestamp>().ok())
    else {
        return false;
    };
    let age = i64::try_from(age.as_secs()).unwrap_or(i64::MAX);
    wall_seconds().saturating_sub(at.as_second()) >= age
}

/// The check a removal re-runs under the MD lock on the fresh Machine and this cluster's fresh
/// ownership record of its MachineDeployment.
type RemovalCheck = Box<dyn Fn(&ClusterApiProvider, &Machine, &Record) -> bool + Send + Sync>;

/// One queued removal and where its answer goes.
pub(super) struct RemovalRequest {
    machine: ObjectRef,
    check: RemovalCheck,
    /// The replica must go with the Machine (a surplus Machine): declined rather than deleted
    /// directly when a scale-down cannot be trusted to take it.
    surplus: bool,
    done: tokio::sync::oneshot::Sender<Result<Removal, CloudProviderError>>,
}

impl ClusterApiProvider {
    pub(super) async fn terminate(&self, nc: &NodeClaim) -> Result<(), CloudProviderError> {
        let name = nc.metadata.name.clone().unwrap_or_default();
        let not_found =
            || CloudProviderError::NodeClaimNotFound(format!("no Machine for NodeClaim {name}"));
        let mut attempts = Attempts::default();
        while attempts.next().await {
            let Some(found) = self.find_machine(nc).await? else {
                return Err(not_found());
            };
            // Only a Machine claimed by this NodeClaim (or by nobody, under the upstream
            // provider's binding) is its to remove; one claimed by another NodeClaim, another
            // workload cluster or nobody is not: the NodeClaim goes, the Machine stays.
            let cluster = self.cluster_id().await?;
            // The cache's copy may predate the claim: refusing on it would let the NodeClaim
            // go and leave its Machine claimed by nobody alive. Refusals are read again.
            let found = if not_claimed_by(&found, nc, cluster, legacy_binding(nc)).is_some() {
                let r = cache::machine_ref(&found);
                match self
                    .machines_api(&r.namespace)
                    .get_opt(&r.name)
                    .await
                    .map_err(|e| transient("get Machine", e))?
                {
                    Some(fresh) => fresh,
                    None => return Err(not_found()),
                }
            } else {
                found
            };
            if let Some(why) = not_claimed_by(&found, nc, cluster, legacy_binding(nc)) {
                tracing::warn!(nodeclaim = %name, machine = %cache::machine_ref(&found), %why,
                    "not removing a Machine this NodeClaim does not own");
                return Err(CloudProviderError::NodeClaimNotFound(format!(
                    "Machine {} is not NodeClaim {name}'s: {why}",
                    cache::machine_ref(&found)
                )));
            }
            match self
                .remove_machine(&cache::machine_ref(&found), |_, _, _| true)
                .await?
            {
                Removal::Gone => return Err(not_found()),
                Removal::Deleted(why) => {
                    self.say_deleted_directly(nc, &found, why).await;
                    return Ok(());
                }
                Removal::Removed
                | Removal::Finished
                | Removal::AlreadyRequested
                | Removal::Declined => return Ok(()),
                Removal::Conflict => {}
            }
        }
        Err(CloudProviderError::Transient(format!(
            "Machine of NodeClaim {name}: too many conflicts"
        )))
    }

    /// A Normal Event `MachineDeletedDirectly` on `nc`: its Machine was deleted, not taken by a
    /// scale-down, and why. Best effort: a failure to publish is logged.
    async fn say_deleted_directly(&self, nc: &NodeClaim, m: &Machine, why: Direct) {
        let machine = cache::machine_ref(m);
        let md = deployment_of(m).map_or_else(
            || "its MachineDeployment".to_owned(),
            |md| format!("{md:#}"),
        );
        let because = match why {
            Direct::MinSize => {
                format!("{md} is at its min size, so its replicas were kept")
            }
            Direct::Rollout => format!(
                "{md} is rolling out through several MachineSets and Cluster \
                 API would take a lowered replica from another MachineSet than this Machine's, \
                 so its replicas were kept"
            ),
        };
        let event = Event {
            type_: EventType::Normal,
            reason: "MachineDeletedDirectly".into(),
            note: Some(format!(
                "Machine {machine} deleted directly: {because}; Cluster API replaces it with an \
                 unclaimed Machine, which karpenter-capi reuses or collects"
            )),
            action: "DeleteMachine".into(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&event, &nc.object_ref(&())).await {
            tracing::debug!(nodeclaim = %nc.name_any(), error = %e, "Event not published");
        }
    }

    /// Remove the Machine `r` the one way this crate does: read it fresh; already
    /// `delete-machine`-annotated or deleting by someone else, or by us and accounted for →
    /// [`Removal::AlreadyRequested`] (replicas are never lowered twice); under the MD lock,
    /// `check(self, fresh, record)` false → [`Removal::Declined`]; otherwise annotate
    /// `delete-machine` and [`REMOVED_BY`] with a resourceVersion precondition (409 →
    /// [`Removal::Conflict`], the caller re-reads), then lower replicas and the record's
    /// `raised` together — one write for every removal queued on the MD, recording each in
    /// the record's `removed` — and at the min size delete the Machine instead (the
    /// MachineSet replaces it). A Machine we annotated whose accounting write never happened
    /// (it failed, or the process restarted) is finished here: [`Removal::Finished`].
    pub(crate) async fn remove_machine(
        &self,
        r: &ObjectRef,
        check: impl Fn(&Self, &Machine, &Record) -> bool + Send + Sync + 'static,
    ) -> Result<Removal, CloudProviderError> {
        self.remove(r, check, false).await
    }

    /// [`Self::remove_machine`] of a surplus Machine, whose replica must go with it: while a
    /// scale-down of its MachineDeployment could land in another MachineSet (a rollout), it
    /// is [`Removal::Declined`] instead of deleted directly (which would only make CAPI
    /// replace it).
    pub(crate) async fn remove_surplus(
        &self,
        r: &ObjectRef,
        check: impl Fn(&Self, &Machine, &Record) -> bool + Send + Sync + 'static,
    ) -> Result<Removal, CloudProviderError> {
        self.remove(r, check, true).await
    }

    async fn remove(
        &self,
        r: &ObjectRef,
        check: impl Fn(&Self, &Machine, &Record) -> bool + Send + Sync + 'static,
        surplus: bool,
    ) -> Result<Removal, CloudProviderError> {
        let cluster = self.cluster_id().await?;
        // Read fresh: the decision "already requested" must not rest on a stale cache.
        let Some(m) = self
            .machines_api(&r.namespace)
            .get_opt(&r.name)
            .await
            .map_err(|e| transient("get Machine", e))?
        else {
            return Ok(Removal::Gone);
        };
        if terminating(&m) && !removed_by(&m, cluster) {
            return Ok(Removal::AlreadyRequested);
        }
        let Some(md) = deployment_of(&m) else {
            return Err(CloudProviderError::Transient(format!(
                "Machine {r} has no {DEPLOYMENT_NAME} label and no MachineSet"
            )));
        };
        if terminating(&m) && self.settled(&md, &m, cluster) {
            return Ok(Removal::AlreadyRequested);
        }
        // Queue the removal; whoever holds the MD lock next serves every queued removal of
        // that MD with one scale-down (batching).
        let (done, result) = tokio::sync::oneshot::channel();
        self.removals
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(md.clone())
            .or_default()
            .push(RemovalRequest {
                machine: r.clone(),
                check: Box::new(check),
                surplus,
                done,
            });
        {
            let lock = self.lock_of(&md);
            let _guard = lock.lock().await;
            let batch = self
                .removals
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&md)
                .unwrap_or_default();
            if !batch.is_empty() {
                self.remove_batch(&md, cluster, batch).await;
            }
        }
        result.await.unwrap_or_else(|_| {
            Err(CloudProviderError::Transient(format!(
                "removal of Machine {r} was not served"
            )))
        })
    }

    /// Whether our removal of `m` (annotated by us) needs nothing more, judged from the cached
    /// MachineDeployment: its record has `m` as scaled down (and not yet due for escalation) or
    /// as deleted while `m` is deleting. The record only ever gains a Machine while it exists
    /// (pruning drops Machines that are gone), so a cached copy that shows it is never wrong;
    /// a cache that does not show it yet sends the removal the slow way (the lock, fresh reads).
    /// A terminating NodeClaim asks every few seconds until its Machine is gone; this answers
    /// those asks without the MachineDeployment's lock or a request.
    fn settled(&self, md: &MachineDeploymentRef, m: &Machine, cluster: &str) -> bool {
        let Some(cached) = self.cached_group(md) else {
            return false;
        };
        let Ok(record) = Record::of(&cached, cluster) else {
            return false;
        };
        match record.removal_of(m) {
            Some(Removed::ScaledDown) => {
                m.metadata.deletion_timestamp.is_some()
                    || !requested_before(m, self.config.removal_escalation)
            }
            Some(Removed::Deleted) => m.metadata.deletion_timestamp.is_some(),
            None => false,
        }
    }

    /// Serve queued removals of `md` (call under its lock): check and annotate each Machine
    /// (compare-and-set), then account for every annotated one in one write — replicas and
    /// `raised` lowered, each recorded in `removed`; Machines beyond the min size's room are
    /// recorded as deleted and deleted directly instead. Every request gets an answer.
    async fn remove_batch(
        &self,
        md: &MachineDeploymentRef,
        cluster: &str,
        batch: Vec<RemovalRequest>,
    ) {
        // A malformed min size fails the batch before any Machine is annotated; so does a
        // MachineSet list that fails (where a scale-down lands is not known without it).
        let read = match self.read_md(md, cluster).await {
            Ok((current, record)) => match min_size(&current) {
                Ok(_) => self
                    .scale_down_target(md, &current)
                    .await
                    .map(|target| (record, target)),
                Err(e) => Err(e),
            },
            Err(e) => Err(e),
        };
        let (record, target) = match read {
            Ok(read) => read,
            Err(e) => {
                for request in batch {
                    let _ = request.done.send(Err(e.clone()));
                }
                return;
            }
        };
        // Each Machine is read and annotated on its own (compare-and-set per Machine), so a
        // batch of 50 does not wait for 100 requests in a row.
        let (record, target) = (&record, &target);
        let prepared: Vec<_> = batch
            .into_iter()
            .map(|request| async move {
                let step = self
                    .prepare_removal(&request, record, target, cluster)
                    .await;
                (request, step)
            })
            .collect();
        let prepared: Vec<_> = futures::stream::iter(prepared)
            .buffer_unordered(PREPARE_CONCURRENCY)
            .collect()
            .await;
        let mut pending = Vec::new();
        for (request, step) in prepared {
            match step {
                Ok(Step::Account {
                    finishing,
                    scales_down,
                }) => pending.push((request, finishing, scales_down)),
                Ok(Step::Done(removal)) => {
                    let _ = request.done.send(Ok(removal));
                }
                Err(e) => {
                    let _ = request.done.send(Err(e));
                }
            }
        }
        if pending.is_empty() {
            return;
        }
        let names: Vec<(String, bool)> = pending
            .iter()
            .map(|(request, _, scales_down)| (request.machine.name.clone(), *scales_down))
            .collect();
        let accounted = match self
            .account_removals(md, cluster, &names, target.room())
            .await
        {
            Ok(accounted) => accounted,
            Err(e) => {
                // Annotated but not accounted: the next delete or the collector finishes it.
                for (request, _, _) in pending {
                    let _ = request.done.send(Err(e.clone()));
                }
                return;
            }
        };
        for (request, finishing, scales_down) in pending {
            let how = accounted.get(&request.machine.name).copied();
            let result = match how {
                Some(Removed::Deleted) => self.delete_machine(&request.machine).await,
                _ => Ok(()),
            };
            let done = match how {
                _ if finishing => Removal::Finished,
                Some(Removed::Deleted) if scales_down => Removal::Deleted(Direct::MinSize),
                Some(Removed::Deleted) => Removal::Deleted(Direct::Rollout),
                _ => Removal::Removed,
            };
            let _ = request.done.send(result.map(|()| done));
        }
    }

    /// Deletes directly the Machines of `md` whose scale-down `record` holds but Cluster API
    /// has not carried out (not deleting yet), before a raise of `md`'s replicas (call under
    /// its lock). A raise then would cancel them: the MachineSet would find as many Machines
    /// as replicas and delete none, so the Machines we chose would run on, their NodeClaims
    /// Terminating until the escalation, and the raise would wait for a Machine that never
    /// comes. Each is a Machine we annotated and accounted for; nothing else is touched.
    /// Returns how many were deleted.
    pub(super) async fn finish_pending_scale_downs(
        &self,
        md: &MachineDeploymentRef,
        record: &Record,
    ) -> Result<usize, CloudProviderError> {
        let pending: Vec<ObjectRef> = self
            .machines_of(md)
            .iter()
            .filter(|m| m.metadata.deletion_timestamp.is_none())
            .filter(|m| record.removal_of(m) == Some(Removed::ScaledDown))
            .map(|m| cache::machine_ref(m))
            .collect();
        for r in &pending {
            tracing::info!(machine = %r, machine_deployment = %md,
                "a raise would cancel this Machine's scale-down: deleting it directly");
            self.delete_machine(r).await?;
        }
        Ok(pending.len())
    }

    /// Delete the Machine `r` directly (gone already is fine).
    async fn delete_machine(&self, r: &ObjectRef) -> Result<(), CloudProviderError> {
        match self
            .machines_api(&r.namespace)
            .delete(&r.name, &DeleteParams::default())
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if status_code(&e) == Some(404) => Ok(()),
            Err(e) => Err(transient("delete Machine", e)),
        }
    }

    /// Fresh read, checks and the `delete-machine` annotation of one queued removal.
    async fn prepare_removal(
        &self,
        request: &RemovalRequest,
        record: &Record,
        target: &ScaleDownTarget,
        cluster: &str,
    ) -> Result<Step, CloudProviderError> {
        let r = &request.machine;
        let Some(m) = self
            .machines_api(&r.namespace)
            .get_opt(&r.name)
            .await
            .map_err(|e| transient("get Machine", e))?
        else {
            return Ok(Step::Done(Removal::Gone));
        };
        if terminating(&m) {
            if !removed_by(&m, cluster) {
                return Ok(Step::Done(Removal::AlreadyRequested));
            }
            return match record.removal_of(&m) {
                // Ours, but never accounted for: finish it.
                None => Ok(Step::Account {
                    finishing: true,
                    scales_down: target.takes(&m),
                }),
                // Recorded as deleted at the min size, but the delete did not happen.
                Some(Removed::Deleted) if m.metadata.deletion_timestamp.is_none() => {
                    self.delete_machine(r).await?;
                    Ok(Step::Done(Removal::Finished))
                }
                // Scaled down long ago, yet the Machine is not even deleting: the
                // MachineDeployment shrank another MachineSet (a rollout). Delete exactly
                // this Machine; its replica is already accounted for.
                Some(Removed::ScaledDown)
                    if m.metadata.deletion_timestamp.is_none()
                        && requested_before(&m, self.config.removal_escalation) =>
                {
                    tracing::warn!(machine = %r, after = ?self.config.removal_escalation,
                        "the Machine outlived its scale-down; deleting it directly");
                    self.delete_machine(r).await?;
                    Ok(Step::Done(Removal::Finished))
                }
                Some(_) => Ok(Step::Done(Removal::AlreadyRequested)),
            };
        }
        if !(request.check)(self, &m, record) {
            return Ok(Step::Done(Removal::Declined));
        }
        let scales_down = target.takes(&m);
        if request.surplus && !scales_down {
            tracing::debug!(machine = %r, "a scale-down could land in another MachineSet \
                (rollout): the surplus Machine stays until the rollout ends");
            return Ok(Step::Done(Removal::Declined));
        }
        if !scales_down {
            tracing::info!(machine = %r, rolling_out = target.rolling_out(),
                "a scale-down could land in another MachineSet: deleting the Machine directly");
        }
        let patch = json!({"metadata": {
            "resourceVersion": m.metadata.resource_version,
            // The value is when we asked (CAPI only looks for the key; the cluster-autoscaler
            // writes a time too): the escalation above measures from it.
            "annotations": {DELETE_MACHINE: now_rfc3339(), REMOVED_BY: cluster},
        }});
        match self
            .machines_api(&r.namespace)
            .patch(&r.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => Ok(Step::Account {
                finishing: false,
                scales_down,
            }),
            Err(e) if status_code(&e) == Some(409) => Ok(Step::Done(Removal::Conflict)),
            Err(e) if status_code(&e) == Some(404) => Ok(Step::Done(Removal::Gone)),
            Err(e) => Err(transient("annotate Machine", e)),
        }
    }

    /// Account for the removal of `names` (Machines of `md` annotated by us, each with
    /// whether a scale-down takes it — [`ScaleDownTarget::takes`]) in one write: lower
    /// replicas and `raised` for those a scale-down takes, by as many as the min size and the
    /// target MachineSet's `room` allow, and record them as scaled down; record the rest as
    /// deleted (deleted directly, replicas kept). Returns how each was accounted for.
    async fn account_removals(
        &self,
        md: &MachineDeploymentRef,
        cluster: &str,
        names: &[(String, bool)],
        room: i32,
    ) -> Result<BTreeMap<String, Removed>, CloudProviderError> {
        let exists: BTreeSet<String> = self
            .machines_of(md)
            .iter()
            .filter_map(|m| m.metadata.name.clone())
            .chain(names.iter().map(|(n, _)| n.clone()))
            .collect();
        self.update_md(md, cluster, |current, record| {
            let replicas = current.spec.replicas.unwrap_or(0);
            let takeable = names.iter().filter(|(_, takes)| *takes).count();
            let want = i32::try_from(takeable).unwrap_or(i32::MAX).min(room);
            let by = want.min(replicas - min_size(current)?).max(0);
            let mut record = record.clone();
            record.prune(|name| exists.contains(name));
            record.raised = (record.raised - by).max(0);
            let mut lowered = usize::try_from(by).unwrap_or(0);
            let accounted: BTreeMap<String, Removed> = names
                .iter()
                .map(|(name, takes)| {
                    let how = if *takes && lowered > 0 {
                        lowered -= 1;
                        Removed::ScaledDown
                    } else {
                        Removed::Deleted
                    };
                    (name.clone(), how)
                })
                .collect();
            record.removed.extend(accounted.clone());
            let write = MdWrite {
                replicas: (by > 0).then_some(replicas - by),
                record: Some(record),
            };
            Ok((write, accounted))
        })
        .await
    }

    /// Let go of up to `n` replicas of `md` that we raised and that have no Machine — never
    /// born (a paused MachineSet, rejected creates, quota), no create waiting for them — under
    /// the MD lock, from a fresh read and a fresh list of the MD's Machines. Replicas are
    /// lowered only by as many as the MachineSet really lacks Machines for (so lowering can
    /// never make it delete a running Machine) and never below the min size; the record's
    /// `raised` drops by all of them (the rest are not ours any more). While more than one
    /// MachineSet holds replicas (a rollout), nothing is released: CAPI would take a lowered
    /// replica from the oldest old MachineSet, whose Machines run. Returns how many replicas
    /// were lowered and how many were let go.
    pub(crate) async fn release_unborn(
        &self,
        md: &MachineDeploymentRef,
        n: usize,
    ) -> Result<(i32, usize), CloudProviderError> {
        let cluster = self.cluster_id().await?;
        let lock = self.lock_of(md);
        let _guard = lock.lock().await;
        let mut attempts = Attempts::default();
        while attempts.next().await {
            let (current, record) = self.read_md(md, cluster).await?;
            if self.scale_down_target(md, &current).await?.rolling_out() {
                // Lowering replicas now would make CAPI cut the oldest old MachineSet, whose
                // Machines are running: wait until the rollout ends.
                tracing::info!(machine_deployment = %md, unborn = n,
                    "rolling out through several MachineSets: unborn replicas are kept until it ends");
                return Ok((0, 0));
            }
            let listed = self.list_machines_of(md).await?;
            let local = |m: &Machine| self.claimed_locally(&cache::machine_ref(m));
            let reserved = self.reserved(md);
            let spare = record
                .free(&listed, cluster, local, reserved)
                .saturating_sub(reserved);
            let born = listed
                .iter()
                .filter(|m| claimable(m, md) && record.newborn(m) && !local(m))
                .count();
            let drop = n.min(spare.saturating_sub(born));
            if drop == 0 {
                return Ok((0, 0));
            }
            // Machines the MachineSet keeps: not deleting, not already scaled away.
            let existing = listed
                .iter()
                .filter(|m| m.metadata.deletion_timestamp.is_none())
                .filter(|m| record.removal_of(m) != Some(Removed::ScaledDown))
                .count();
            let replicas = current.spec.replicas.unwrap_or(0);
            let lacking = replicas - i32::try_from(existing).unwrap_or(i32::MAX);
            let lower = i32::try_from(drop)
                .unwrap_or(i32::MAX)
                .min(lacking)
                .min(replicas - min_size(&current)?)
                .max(0);
            let mut record = record;
            record.raised = (record.raised - i32::try_from(drop).unwrap_or(i32::MAX)).max(0);
            let write = MdWrite {
                replicas: (lower > 0).then_some(replicas - lower),
                record: Some(record),
            };
            if self.write_md(&current, cluster, &write).await? {
                return Ok((lower, drop));
            }
        }
        Err(too_many_conflicts(md))
    }

    /// Replicas of `md` raised by `cluster` that no Machine uses and no waiting create
    /// reserved: how many of our unclaimed Machines could go without starving a create. Call
    /// under the MD lock.
    pub(crate) fn spare(&self, md: &MachineDeploymentRef, record: &Record, cluster: &str) -> usize {
        self.free(md, record, cluster)
            .saturating_sub(self.reserved(md))
    }
}

/// What [`ClusterApiProvider::remove_machine`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Removal {
    /// The Machine does not exist.
    Gone,
    /// Termination was already requested; nothing done.
    AlreadyRequested,
    /// The caller's check refused it; nothing done.
    Declined,
    /// The Machine changed between read and write; nothing done, read again.
    Conflict,
    /// Annotated, and replicas lowered.
    Removed,
    /// Annotated and deleted directly, replicas kept (Cluster API replaces it with an
    /// unclaimed Machine, ours to reuse or collect).
    Deleted(Direct),
    /// An earlier removal of ours that was annotated but never accounted for (a failed
    /// write, a restart) is now accounted for.
    Finished,
}

/// Why a removal deleted its Machine directly instead of lowering replicas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Direct {
    /// The MachineDeployment is at its min size (or its target MachineSet has no room).
    MinSize,
    /// More than one MachineSet holds replicas and a lowered replica would come out of
    /// another MachineSet than this Machine's.
    Rollout,
}

/// What one queued removal needs after its fresh read.
enum Step {
    /// Answered already.
    Done(Removal),
    /// Annotated by us; account for it.
    Account {
        /// It was annotated by an earlier, interrupted removal.
        finishing: bool,
        /// A scale-down of its MachineDeployment takes it ([`ScaleDownTarget::takes`]).
        scales_down: bool,
    },
}
