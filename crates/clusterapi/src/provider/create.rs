//! Create: resume a NodeClaim already bound, else reserve capacity on the cheapest compatible
//! MachineDeployment (batched replica raises under a per-MachineDeployment lock) and claim a
//! Machine for it.
//!
//! Responsibility: `ClusterApiProvider::launch` and its reservation bookkeeping.
//! Inputs: a NodeClaim. Outputs: a [`Launch`] or a typed [`CloudProviderError`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use api::NodeClaim;
use api::well_known::capi::MAX_SIZE;
use cloudprovider::convert::{compatible_offerings, requests_of, requirements_of};
use cloudprovider::{CloudProviderError, Launch};
use kube::api::{Patch, PatchParams};
use scheduling::instance_type::InstanceType;
use serde_json::json;

use crate::annotations::parse_size;
use crate::instance_types::MachineDeploymentRef;

use super::{
    ClusterApiProvider, SCALE_ATTEMPTS, annotation, bound_machine, cache, launch_of, status_code,
    transient,
};

/// Create batching state of one MachineDeployment.
#[derive(Debug, Default)]
pub(super) struct Batch {
    /// Creates waiting for the MD's lock.
    waiting: usize,
    /// Replicas a batch raised for waiters that have not taken them yet.
    covered: usize,
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

enum Scaled {
    Up,
    AtMaxSize(String),
}

impl ClusterApiProvider {
    /// Raise replicas of `md` by up to `want` (at least one) through `/scale`, with the
    /// resourceVersion precondition and never past the max-size annotation; returns how many.
    async fn scale_up(
        &self,
        md: &MachineDeploymentRef,
        want: i32,
    ) -> Result<(Scaled, i32), CloudProviderError> {
        let api = self.mds_api(&md.namespace);
        for _ in 0..SCALE_ATTEMPTS {
            let current = api
                .get(&md.name)
                .await
                .map_err(|e| transient("get MachineDeployment", e))?;
            let replicas = current.spec.replicas.unwrap_or(0);
            let max = parse_size(MAX_SIZE, annotation(&current.metadata, MAX_SIZE))
                .map_err(|e| transient("MachineDeployment", e))?;
            if let Some(max) = max
                && replicas >= max
            {
                return Ok((
                    Scaled::AtMaxSize(format!("MachineDeployment {md} is at its max size {max}")),
                    0,
                ));
            }
            let room = max.map_or(i32::MAX, |max| max - replicas);
            let by = want.max(1).min(room);
            let patch = json!({
                "metadata": {"resourceVersion": current.metadata.resource_version},
                "spec": {"replicas": replicas + by},
            });
            match api
                .patch_scale(&md.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => return Ok((Scaled::Up, by)),
                Err(e) if status_code(&e) == Some(409) => {}
                Err(e) => return Err(transient("scale MachineDeployment", e)),
            }
        }
        Err(CloudProviderError::Transient(format!(
            "MachineDeployment {md}: too many conflicts"
        )))
    }

    /// Reserve capacity on `md` for one more claim: take a replica an earlier batch raised for
    /// the waiters, reuse surplus, or scale up — by as many replicas as creates are waiting for
    /// this MD's lock (batching: one `/scale` write serves them all).
    async fn reserve(&self, md: &MachineDeploymentRef) -> Result<Scaled, CloudProviderError> {
        let lock = self.lock_of(md);
        let waiting = Waiting::enter(&self.batches, md);
        let _guard = lock.lock().await;
        let queued = waiting.leave();
        let scaled = if self.take_covered(md) || self.surplus(md) > 0 {
            Scaled::Up
        } else {
            let (scaled, by) = self
                .scale_up(md, i32::try_from(queued).unwrap_or(i32::MAX))
                .await?;
            if by > 1 {
                let mut batches = self.batches.lock().unwrap_or_else(PoisonError::into_inner);
                batches.entry(md.clone()).or_default().covered +=
                    usize::try_from(by - 1).unwrap_or(0);
            }
            scaled
        };
        if matches!(scaled, Scaled::Up) {
            *self
                .pending
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entry(md.clone())
                .or_default() += 1;
        }
        Ok(scaled)
    }

    /// Take one replica raised earlier for a waiter, if any is left.
    fn take_covered(&self, md: &MachineDeploymentRef) -> bool {
        let mut batches = self.batches.lock().unwrap_or_else(PoisonError::into_inner);
        match batches.get_mut(md) {
            Some(b) if b.covered > 0 => {
                b.covered -= 1;
                true
            }
            _ => false,
        }
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
            let spec = self.spec_of(nc).await;
            return Ok(Some(self.launch_for(&m, spec.as_ref()).await));
        }
        self.ready().await?;
        let Some(m) = self.claimed_for(uid) else {
            return Ok(None);
        };
        self.record(name, &cache::machine_ref(&m))
            .await
            .map_err(|e| transient("annotate NodeClaim", e))?;
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
        let its: Vec<Arc<InstanceType>> = catalogue.instance_types();
        let mut reasons = Vec::new();
        for choice in compatible_offerings(&its, &requirements, &requests, &self.well_known) {
            let Some(entry) = catalogue.entries().get(choice.instance_type) else {
                continue;
            };
            let Some((_, origin)) = entry.offerings().nth(choice.offering) else {
                continue;
            };
            let md = origin.machine_deployment.clone();
            match self.reserve(&md).await? {
                Scaled::AtMaxSize(why) => {
                    reasons.push(why);
                    continue;
                }
                Scaled::Up => {}
            }
            let claimed = self.claim(&md, &name, &uid, &cluster).await;
            self.unreserve(&md);
            let machine = claimed?;
            let r = cache::machine_ref(&machine);
            if let Err(e) = self.record(&name, &r).await {
                self.release(&machine).await;
                return Err(if status_code(&e) == Some(404) {
                    CloudProviderError::Create {
                        reason: "NodeClaimGone".into(),
                        message: format!("NodeClaim {name} disappeared; released Machine {r}"),
                    }
                } else {
                    transient("annotate NodeClaim", e)
                });
            }
            return Ok(launch_of(&machine, Some((entry, origin))));
        }
        Err(CloudProviderError::InsufficientCapacity(
            if reasons.is_empty() {
                format!("no available offering satisfies NodeClaim {name}")
            } else {
                reasons.join("; ")
            },
        ))
    }
}
