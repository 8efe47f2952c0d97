//! Claim: bind a fresh Machine to a NodeClaim by compare-and-set.
//!
//! Responsibility: the claim protocol (member label + [`super::CLAIMED_BY`] /
//! [`super::CLAIMED_BY_UID`] / [`super::CLAIMED_BY_CLUSTER`] written with the Machine's
//! resourceVersion). A launch that cannot complete fails fast as insufficient capacity, and
//! the MachineDeployment is offered as unavailable for the unavailable-offering TTL: when the
//! Machine made for our replica is reported failed (phase `Failed` or a failure reason — a
//! failed Machine is never claimed), or when no Machine could be claimed within the claim
//! timeout (a MachineSet that cannot create Machines: paused, quota), or at once when Cluster
//! API reports the scale-up blocked (a MachineSet's preflight checks, a missing template:
//! [`crate::scale_up::blocked`]).
//! Inputs: a MachineDeployment, a NodeClaim's name and UID, the Machine cache.
//! Outputs: the claimed Machine, or a typed error.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use api::Machine;
use api::well_known::capi::KARPENTER_MEMBER;
use cloudprovider::{CloudProviderError, ObjectRef};
use kube::api::{Patch, PatchParams};
use serde_json::json;

use crate::instance_types::MachineDeploymentRef;

use super::{
    CLAIMED_BY, CLAIMED_BY_CLUSTER, CLAIMED_BY_UID, ClusterApiProvider, annotation, cache,
    claimable, deployment_of, failed, status_code, terminating, transient,
};

/// How often a claim waiting for a Machine looks again without a Machine change (for the
/// MachineDeployment's `ScalingUp` condition).
const RECHECK: Duration = Duration::from_secs(5);

/// How long a claim waits after a 429 before looking again.
const THROTTLE_BACKOFF: Duration = Duration::from_secs(1);

/// Fresh reads (and PATCHes) of one candidate after its claim met a conflict, before the
/// claim moves on and waits for the cache.
const FRESH_READS: u32 = 2;

/// A Machine one create of this process is claiming; released on drop.
pub(super) struct Claiming<'a> {
    set: &'a Mutex<HashSet<ObjectRef>>,
    machine: ObjectRef,
}

impl<'a> Claiming<'a> {
    /// Take `machine`, unless another create holds it.
    pub(super) fn take(set: &'a Mutex<HashSet<ObjectRef>>, machine: &ObjectRef) -> Option<Self> {
        set.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(machine.clone())
            .then(|| Self {
                set,
                machine: machine.clone(),
            })
    }
}

impl Drop for Claiming<'_> {
    fn drop(&mut self) {
        self.set
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.machine);
    }
}

impl ClusterApiProvider {
    pub(crate) fn claimed_locally(&self, r: &ObjectRef) -> bool {
        self.claimed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(r)
    }

    /// The Machine claimed for `nc` according to the cache (by UID).
    pub(super) fn claimed_for(&self, uid: &str) -> Option<Arc<Machine>> {
        self.cache
            .machines()
            .into_iter()
            .find(|m| annotation(&m.metadata, CLAIMED_BY_UID) == Some(uid))
    }

    /// Claim a fresh Machine of `md` that is not in `baseline` (so: created for a replica we
    /// raised) for the NodeClaim `name` / `uid` of the workload cluster `cluster` by
    /// compare-and-set, waiting on cache changes.
    pub(super) async fn claim(
        &self,
        md: &MachineDeploymentRef,
        baseline: &BTreeSet<String>,
        name: &str,
        uid: &str,
        cluster: &str,
    ) -> Result<Machine, CloudProviderError> {
        let deadline = tokio::time::Instant::now() + self.config.claim_timeout;
        let mut changes = self.cache.changes();
        // Machines whose claim failed at this resourceVersion.
        let mut tried: HashMap<ObjectRef, String> = HashMap::new();
        loop {
            changes.borrow_and_update();
            let mut candidates: Vec<Arc<Machine>> = self
                .cache
                .machines()
                .into_iter()
                .filter(|m| claimable(m, md))
                .filter(|m| {
                    m.metadata
                        .name
                        .as_ref()
                        .is_some_and(|n| !baseline.contains(n))
                })
                .filter(|m| {
                    let r = cache::machine_ref(m);
                    !self.claimed_locally(&r)
                        && tried.get(&r) != m.metadata.resource_version.as_ref()
                })
                .collect();
            if candidates.is_empty()
                && let Some(why) = self.scale_up_blocked(md)
            {
                // Cluster API says it cannot create the Machine now (preflight checks): fail
                // at once rather than after the claim timeout.
                self.launch_failed(md, &why);
                return Err(CloudProviderError::InsufficientCapacity(why));
            }
            if candidates.is_empty()
                && let Some(why) = self.failed_new_machine(md, baseline)
            {
                // The replica we raised got a Machine Cluster API reports failed: fail now, with
                // upstream's insufficient-capacity semantics (the NodeClaim goes, its pods are
                // batched again), and offer this MachineDeployment as unavailable for a while.
                self.launch_failed(md, &why);
                return Err(CloudProviderError::InsufficientCapacity(why));
            }
            candidates.sort_by(|a, b| {
                (
                    &a.metadata.creation_timestamp.as_ref().map(|t| t.0),
                    &a.metadata.name,
                )
                    .cmp(&(
                        &b.metadata.creation_timestamp.as_ref().map(|t| t.0),
                        &b.metadata.name,
                    ))
            });
            let mut throttled = false;
            for m in candidates {
                let r = cache::machine_ref(&m);
                // One PATCH per candidate from this process: the other creates waiting on this
                // MD skip a Machine one of them is claiming (they all see the same cache, and
                // racing each other on it only made conflicts).
                let Some(_claiming) = Claiming::take(&self.claiming, &r) else {
                    continue;
                };
                let cached_rv = m.metadata.resource_version.clone().unwrap_or_default();
                let mut rv = cached_rv.clone();
                let mut fresh_reads = 0;
                loop {
                    match self.claim_at(&r, &rv, name, uid, cluster).await {
                        Ok(claimed) => {
                            self.claimed
                                .lock()
                                .unwrap_or_else(PoisonError::into_inner)
                                .insert(r);
                            return Ok(claimed);
                        }
                        // Changed since our copy (Cluster API writes Machines too: finalizer,
                        // phase, conditions, right after creation). Under load the cache is
                        // several versions behind, and waiting for it cost one conflict per
                        // stale version: read it fresh and try again at its current version.
                        Err(e) if status_code(&e) == Some(409) && fresh_reads < FRESH_READS => {
                            fresh_reads += 1;
                            let fresh = self
                                .machines_api(&r.namespace)
                                .get_opt(&r.name)
                                .await
                                .map_err(|e| transient("get Machine", e))?;
                            match fresh {
                                Some(f) if claimable(&f, md) => {
                                    rv = f.metadata.resource_version.clone().unwrap_or_default();
                                }
                                // Claimed by someone else, terminating or gone meanwhile.
                                _ => {
                                    tried.insert(r, cached_rv);
                                    break;
                                }
                            }
                        }
                        // Still changing, or gone: not again at the cache's version.
                        Err(e) if matches!(status_code(&e), Some(409 | 404)) => {
                            tried.insert(r, cached_rv);
                            break;
                        }
                        // Throttled: back off, then look again.
                        Err(e) if status_code(&e) == Some(429) => {
                            throttled = true;
                            break;
                        }
                        Err(e) => return Err(transient("claim Machine", e)),
                    }
                }
                if throttled {
                    break;
                }
            }
            if throttled {
                if tokio::time::Instant::now() + THROTTLE_BACKOFF >= deadline {
                    return Err(CloudProviderError::Transient(format!(
                        "claiming a Machine of {md:#} was throttled (429)"
                    )));
                }
                tokio::time::sleep(THROTTLE_BACKOFF).await;
                continue;
            }
            // The next Machine change, or at most a few seconds (the MachineDeployment's
            // conditions are not Machine changes), or the deadline.
            let wake = deadline.min(tokio::time::Instant::now() + RECHECK);
            match tokio::time::timeout_at(wake, changes.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => {
                    return Err(CloudProviderError::Transient(
                        "Machine cache stopped".into(),
                    ));
                }
                Err(_) if tokio::time::Instant::now() < deadline => {}
                Err(_) => {
                    let why = format!(
                        "no Machine of {md:#} could be claimed within {:?}",
                        self.config.claim_timeout
                    );
                    self.launch_failed(md, &why);
                    return Err(CloudProviderError::InsufficientCapacity(why));
                }
            }
        }
    }

    /// Why Cluster API cannot create Machines for `md` now ([`crate::scale_up::blocked`], from
    /// the cached MachineDeployment and MachineSets).
    fn scale_up_blocked(&self, md: &MachineDeploymentRef) -> Option<String> {
        let cached = self.cached_group(md)?;
        let sets = self.sets.all();
        let sets: Vec<&api::MachineSet> = sets.iter().map(AsRef::as_ref).collect();
        let why = crate::scale_up::blocked(&cached, &sets)?;
        Some(format!(
            "Cluster API cannot create Machines for {md:#}: {why}"
        ))
    }

    /// Whether [`Self::failed_new_machine`] finds one.
    pub(super) fn failed_machine_of(
        &self,
        md: &MachineDeploymentRef,
        baseline: &BTreeSet<String>,
    ) -> bool {
        self.failed_new_machine(md, baseline).is_some()
    }

    /// A Machine of `md` created for our replicas (not in `baseline`), unclaimed, not
    /// terminating, that Cluster API reports failed: why, naming it.
    fn failed_new_machine(
        &self,
        md: &MachineDeploymentRef,
        baseline: &BTreeSet<String>,
    ) -> Option<String> {
        self.cache.machines().into_iter().find_map(|m| {
            let name = m.metadata.name.as_deref()?;
            let ours = deployment_of(&m).as_ref() == Some(md)
                && !baseline.contains(name)
                && !terminating(&m)
                && failed(&m)
                && annotation(&m.metadata, CLAIMED_BY_UID).is_none();
            if !ours {
                return None;
            }
            let status = m.status.as_ref();
            let reason = status.and_then(|s| s.failure_reason()).unwrap_or("Failed");
            let message = status.and_then(|s| s.failure_message()).unwrap_or_default();
            Some(format!(
                "Machine {}/{name} of {md:#} failed: {reason}{}{message}",
                md.namespace,
                if message.is_empty() { "" } else { ": " }
            ))
        })
    }

    /// The claim PATCH of Machine `r` at resourceVersion `rv` (compare-and-set).
    pub(super) async fn claim_at(
        &self,
        r: &ObjectRef,
        rv: &str,
        name: &str,
        uid: &str,
        cluster: &str,
    ) -> Result<Machine, kube::Error> {
        let patch = json!({"metadata": {
            "resourceVersion": rv,
            "labels": {KARPENTER_MEMBER: ""},
            "annotations": {
                CLAIMED_BY: name, CLAIMED_BY_UID: uid, CLAIMED_BY_CLUSTER: cluster,
            },
        }});
        self.machines_api(&r.namespace)
            .patch(&r.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
    }
}
