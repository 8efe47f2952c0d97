//! Create: resume a NodeClaim already bound, else reserve capacity on the cheapest compatible
//! MachineDeployment (batched replica raises under a per-MachineDeployment lock) and claim a
//! Machine for it.
//!
//! Responsibility: `ClusterApiProvider::launch` and its reservation bookkeeping.
//! Inputs: a NodeClaim. Outputs: a [`Launch`] or a typed [`CloudProviderError`].

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use api::NodeClaim;
use cloudprovider::convert::{compatible_offerings, requests_of, requirements_of};
use cloudprovider::{CloudProviderError, Launch};
use scheduling::instance_type::InstanceType;

use crate::instance_types::MachineDeploymentRef;

use super::scale::{Attempts, MdWrite, max_size, too_many_conflicts};
use super::{
    ClusterApiProvider, bound_machine, claimed_by, launch_of, legacy_binding, not_claimed_by,
    transient,
};

/// Create batching state of one MachineDeployment.
#[derive(Debug, Default)]
pub(super) struct Batch {
    /// Creates waiting for the MD's lock.
    waiting: usize,
}

pub(super) type Batches = Arc<Mutex<HashMap<MachineDeploymentRef, Batch>>>;

/// A create registered as waiting for an MD's lock; unregisters on [`Waiting::leave`] or drop
/// (a cancelled create must not be counted in the next batch).
struct Waiting {
    batches: Batches,
    md: MachineDeploymentRef,
    left: bool,
}

impl Waiting {
    fn enter(batches: &Batches, md: &MachineDeploymentRef) -> Self {
        batches
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(md.clone())
            .or_default()
            .waiting += 1;
        Self {
            batches: Arc::clone(batches),
            md: md.clone(),
            left: false,
        }
    }

    /// Stops waiting; returns how many were waiting, this create included.
    fn leave(mut self) -> usize {
        self.left = true;
        let mut batches = self.batches.lock().unwrap_or_else(PoisonError::into_inner);
        let b = batches.entry(self.md.clone()).or_default();
        let queued = b.waiting.max(1);
        b.waiting = b.waiting.saturating_sub(1);
        queued
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if !self.left {
            let mut batches = self.batches.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(b) = batches.get_mut(&self.md) {
                b.waiting = b.waiting.saturating_sub(1);
            }
        }
    }
}

/// What [`ClusterApiProvider::reserve`] got.
enum Scaled {
    /// A raised, unclaimed replica is reserved for this create; claim a Machine of the
    /// MachineDeployment that is not in this baseline.
    Reserved(Arc<BTreeSet<String>>),
    /// At the max size; the reason.
    AtMaxSize(String),
}

impl ClusterApiProvider {
    /// Reserve capacity on `md` for one more claim (under the MD lock): a replica we raised
    /// that nobody claimed or reserved yet (reused, not raised again); otherwise raise replicas
    /// by as many as creates are waiting for this MD's lock (batching: one write serves them
    /// all), never past the max size, recording the raise in the ownership record in the same
    /// write — and, when no raised replica was free, the Machines present now as the baseline.
    async fn reserve(
        &self,
        md: &MachineDeploymentRef,
        cluster: &str,
    ) -> Result<Scaled, CloudProviderError> {
        let lock = self.lock_of(md);
        let waiting = Waiting::enter(&self.batches, md);
        let _guard = lock.lock().await;
        let queued = i32::try_from(waiting.leave()).unwrap_or(i32::MAX);
        let mut attempts = Attempts::default();
        while attempts.next().await {
            let (current, mut record) = self.read_md(md, cluster).await?;
            let free = self.free(md, &record, cluster);
            if free > self.reserved(md) {
                self.reserve_one(md);
                return Ok(Scaled::Reserved(Arc::new(record.baseline)));
            }
            let replicas = current.spec.replicas.unwrap_or(0);
            let max = max_size(&current)?;
            if let Some(max) = max
                && replicas >= max
            {
                return Ok(Scaled::AtMaxSize(format!(
                    "{md:#} is at its max size {max}"
                )));
            }
            let by = queued.min(max.map_or(i32::MAX, |max| max - replicas));
            // Raised now, replicas would cancel our scale-downs Cluster API has not carried
            // out yet (desired and present Machines would match again): those Machines go
            // directly first.
            self.finish_pending_scale_downs(md, &record).await?;
            if free == 0 {
                // Every replica we raised is claimed: whatever runs now is not ours.
                record.baseline = self.not_ours_now(md, cluster).await?;
            }
            record.raised = record.raised.saturating_add(by);
            let write = MdWrite {
                replicas: Some(replicas.saturating_add(by)),
                record: Some(record.clone()),
            };
            if self.write_md(&current, cluster, &write).await? {
                self.reserve_one(md);
                return Ok(Scaled::Reserved(Arc::new(record.baseline)));
            }
        }
        Err(too_many_conflicts(md))
    }

    /// The names of `md`'s Machines not claimed by `cluster`, from a fresh list (a Machine the
    /// cache has not seen yet must not pass for ours).
    async fn not_ours_now(
        &self,
        md: &MachineDeploymentRef,
        cluster: &str,
    ) -> Result<BTreeSet<String>, CloudProviderError> {
        let listed = self.list_machines_of(md).await?;
        Ok(listed
            .iter()
            .filter(|m| !claimed_by(m, cluster))
            .filter_map(|m| m.metadata.name.clone())
            .collect())
    }

    fn reserve_one(&self, md: &MachineDeploymentRef) {
        *self
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(md.clone())
            .or_default() += 1;
    }

    fn unreserve(&self, md: &MachineDeploymentRef) {
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = pending.get_mut(md) {
            *n = n.saturating_sub(1);
        }
    }

    async fn resume(
        &self,
        nc: &NodeClaim,
        name: &str,
        uid: &str,
    ) -> Result<Option<Launch>, CloudProviderError> {
        if let Some(r) = bound_machine(nc) {
            let m = self
                .machines_api(&r.namespace)
                .get_opt(&r.name)
                .await
                .map_err(|e| transient("get Machine", e))?
                .ok_or_else(|| {
                    CloudProviderError::InsufficientCapacity(format!(
                        "the Machine {r} bound to NodeClaim {name} no longer exists"
                    ))
                })?;
            // Restored from a backup or re-applied: the Machine may be another NodeClaim's.
            // As for a Machine that is gone, this NodeClaim never launches: it is deleted (its
            // removal leaves the Machine alone) and its pods provisioned again.
            let cluster = self.cluster_id().await?;
            if let Some(why) = not_claimed_by(&m, nc, cluster, legacy_binding(nc)) {
                return Err(CloudProviderError::InsufficientCapacity(format!(
                    "the Machine {r} bound to NodeClaim {name} is not its: {why}"
                )));
            }
            let spec = self.spec_of(nc).await;
            return Ok(Some(self.launch_for(&m, spec.as_ref()).await));
        }
        self.ready().await?;
        // Claimed before a restart (or a failed status write) but not recorded yet: the
        // lifecycle writes the binding annotation from the launch.
        let Some(m) = self.claimed_for(uid) else {
            return Ok(None);
        };
        let spec = self.spec_of(nc).await;
        Ok(Some(self.launch_for(&m, spec.as_ref()).await))
    }

    pub(super) async fn launch(&self, nc: &NodeClaim) -> Result<Launch, CloudProviderError> {
        let name = nc.metadata.name.clone().unwrap_or_default();
        let uid = nc.metadata.uid.clone().unwrap_or_default();
        if name.is_empty() || uid.is_empty() {
            return Err(CloudProviderError::Create {
                reason: "InvalidNodeClaim".into(),
                message: "the NodeClaim has no name or UID".into(),
            });
        }
        if let Some(launch) = self.resume(nc, &name, &uid).await? {
            return Ok(launch);
        }
        let cluster = self.cluster_id().await?.to_owned();
        let nodeclass = self.nodeclass(&nc.spec.node_class_ref.name).await?;
        let catalogue = self.catalogue(&nodeclass.spec).await?;
        let requirements = requirements_of(nc)?;
        let requests = requests_of(nc)?;
        let mut its: Vec<Arc<InstanceType>> = catalogue.instance_types();
        if let Some(store) = self.overlays() {
            // Ranked at the prices the scheduler planned with; same order, so the indexes
            // below still name the catalogue's entries.
            let pool = nc
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(scheduling::labels::NODE_POOL))
                .map(String::as_str)
                .unwrap_or_default();
            its = store
                .apply(pool, its)
                .map_err(|e| CloudProviderError::Transient(e.to_string()))?;
        }
        let mut reasons = Vec::new();
        let mut reserved = None;
        for choice in compatible_offerings(&its, &requirements, &requests, &self.well_known) {
            let Some(entry) = catalogue.entries().get(choice.instance_type) else {
                continue;
            };
            let Some((_, origin)) = entry.offerings().nth(choice.offering) else {
                continue;
            };
            let md = origin.machine_deployment.clone();
            match self.reserve(&md, &cluster).await? {
                Scaled::AtMaxSize(why) => reasons.push(why),
                Scaled::Reserved(baseline) => {
                    reserved = Some((md, baseline, entry.clone(), origin.clone()));
                    break;
                }
            }
        }
        // Only the chosen entry is held across the claim, which waits for Cluster API to
        // create the Machine: with a hundred launches in flight, a whole catalogue each was
        // over a megabyte.
        drop((its, catalogue));
        let Some((md, baseline, entry, origin)) = reserved else {
            return Err(CloudProviderError::InsufficientCapacity(
                if reasons.is_empty() {
                    format!("no available offering satisfies NodeClaim {name}")
                } else {
                    reasons.join("; ")
                },
            ));
        };
        // Held across the claim; a create dropped while it waits (shutdown, a cancelled
        // caller) gives its reservation back too, so the replica is not taken as wanted.
        let reservation = Reservation {
            provider: self,
            md: &md,
        };
        let claimed = self.claim(&md, &baseline, &name, &uid, &cluster).await;
        drop(reservation);
        if let Err(CloudProviderError::InsufficientCapacity(why)) = &claimed
            && !self.failed_machine_of(&md, &baseline)
        {
            // No Machine came for the replica we raised: let it go now (unless a rollout
            // or another create needs it), so it cannot bring an unclaimed Machine later.
            match self.release_unborn(&md, 1).await {
                Ok((lowered, _)) => {
                    tracing::info!(machine_deployment = %md, lowered, reason = %why,
                    "the launch could not complete; released the replica raised for it")
                }
                Err(e) => tracing::warn!(machine_deployment = %md, error = %e,
                    "the launch could not complete; its replica is left to garbage collection"),
            }
        }
        let machine = claimed?;
        // The binding annotation ([`MACHINE`]) reaches the NodeClaim with the lifecycle's
        // launch write (one write, not two); until then, and after a restart, the claim on
        // the Machine (the NodeClaim's UID) finds it.
        Ok(launch_of(&machine, Some((&entry, &origin))))
    }
}

/// A reservation of one raised replica by a create, given back when dropped.
struct Reservation<'a> {
    provider: &'a ClusterApiProvider,
    md: &'a MachineDeploymentRef,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        self.provider.unreserve(self.md);
    }
}
