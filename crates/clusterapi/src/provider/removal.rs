//! Removal: terminate the Machine of a NodeClaim, and the one removal path the collector uses
//! too — `delete-machine` by compare-and-set, then one replica write for every removal queued on
//! the MachineDeployment (batching); at the min size the Machine is deleted instead.
//!
//! Responsibility: `ClusterApiProvider::terminate`, `remove_machine` and its batch.
//! Inputs: a NodeClaim or a Machine reference with a check. Outputs: a [`Removal`] or a typed
//! error.

use std::sync::PoisonError;

use api::well_known::capi::{DELETE_MACHINE, DEPLOYMENT_NAME};
use api::{Machine, NodeClaim};
use cloudprovider::{CloudProviderError, ObjectRef};
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::json;

use crate::instance_types::MachineDeploymentRef;

use super::ownership::Record;
use super::scale::{MdWrite, min_size};
use super::{
    ClusterApiProvider, SCALE_ATTEMPTS, cache, deployment_of, status_code, terminating, transient,
};

/// The check a removal re-runs under the MD lock on the fresh Machine and this cluster's fresh
/// ownership record of its MachineDeployment.
type RemovalCheck = Box<dyn Fn(&ClusterApiProvider, &Machine, &Record) -> bool + Send + Sync>;

/// One queued removal and where its answer goes.
pub(super) struct RemovalRequest {
    machine: ObjectRef,
    check: RemovalCheck,
    done: tokio::sync::oneshot::Sender<Result<Removal, CloudProviderError>>,
}

impl ClusterApiProvider {
    pub(super) async fn terminate(&self, nc: &NodeClaim) -> Result<(), CloudProviderError> {
        let name = nc.metadata.name.clone().unwrap_or_default();
        let not_found =
            || CloudProviderError::NodeClaimNotFound(format!("no Machine for NodeClaim {name}"));
        for _ in 0..SCALE_ATTEMPTS {
            let Some(found) = self.find_machine(nc).await? else {
                return Err(not_found());
            };
            match self
                .remove_machine(&cache::machine_ref(&found), |_, _, _| true)
                .await?
            {
                Removal::Gone => return Err(not_found()),
                Removal::Removed | Removal::AlreadyRequested | Removal::Declined => return Ok(()),
                Removal::Conflict => {}
            }
        }
        Err(CloudProviderError::Transient(format!(
            "Machine of NodeClaim {name}: too many conflicts"
        )))
    }

    /// Remove the Machine `r` the one way this crate does: read it fresh; already
    /// `delete-machine`-annotated or deleting → [`Removal::AlreadyRequested`] (replicas are never
    /// lowered twice); under the MD lock, `check(self, fresh, record)` false →
    /// [`Removal::Declined`]; otherwise annotate `delete-machine` with a resourceVersion
    /// precondition (409 → [`Removal::Conflict`], the caller re-reads), then lower replicas and
    /// the record's `raised` together — one write for every removal queued on the MD — and at
    /// the min size delete the Machine instead (the MachineSet replaces it).
    pub(crate) async fn remove_machine(
        &self,
        r: &ObjectRef,
        check: impl Fn(&Self, &Machine, &Record) -> bool + Send + Sync + 'static,
    ) -> Result<Removal, CloudProviderError> {
        // Read fresh: the decision "already requested" must not rest on a stale cache.
        let Some(m) = self
            .machines_api(&r.namespace)
            .get_opt(&r.name)
            .await
            .map_err(|e| transient("get Machine", e))?
        else {
            return Ok(Removal::Gone);
        };
        if terminating(&m) {
            return Ok(Removal::AlreadyRequested);
        }
        let Some(md) = deployment_of(&m) else {
            return Err(CloudProviderError::Transient(format!(
                "Machine {r} has no {DEPLOYMENT_NAME} label"
            )));
        };
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
                self.remove_batch(&md, batch).await;
            }
        }
        result.await.unwrap_or_else(|_| {
            Err(CloudProviderError::Transient(format!(
                "removal of Machine {r} was not served"
            )))
        })
    }

    /// Serve queued removals of `md` (call under its lock): check and annotate each Machine
    /// (compare-and-set), then lower replicas once by the number annotated; Machines beyond the
    /// min size's room are deleted directly instead. Every request gets an answer.
    async fn remove_batch(&self, md: &MachineDeploymentRef, batch: Vec<RemovalRequest>) {
        let read = match self.cluster_id().await {
            Ok(cluster) => {
                let cluster = cluster.to_owned();
                self.read_md(md, &cluster)
                    .await
                    .map(|(_, record)| (cluster, record))
            }
            Err(e) => Err(e),
        };
        let (cluster, record) = match read {
            Ok(read) => read,
            Err(e) => {
                for request in batch {
                    let _ = request.done.send(Err(e.clone()));
                }
                return;
            }
        };
        let mut annotated = Vec::new();
        for request in batch {
            let outcome = self.annotate_for_removal(&request, &record).await;
            match outcome {
                Ok(None) => annotated.push(request),
                Ok(Some(removal)) => {
                    let _ = request.done.send(Ok(removal));
                }
                Err(e) => {
                    let _ = request.done.send(Err(e));
                }
            }
        }
        if annotated.is_empty() {
            return;
        }
        let want = i32::try_from(annotated.len()).unwrap_or(i32::MAX);
        let lowered = match self.scale_down(md, &cluster, want).await {
            Ok(l) => usize::try_from(l).unwrap_or(0),
            Err(e) => {
                for request in annotated {
                    let _ = request.done.send(Err(e.clone()));
                }
                return;
            }
        };
        for (i, request) in annotated.into_iter().enumerate() {
            let result = if i < lowered {
                Ok(Removal::Removed)
            } else {
                // At min size: keep the baseline; the MachineSet replaces the Machine.
                let r = &request.machine;
                match self
                    .machines_api(&r.namespace)
                    .delete(&r.name, &DeleteParams::default())
                    .await
                {
                    Ok(_) => Ok(Removal::Removed),
                    Err(e) if status_code(&e) == Some(404) => Ok(Removal::Removed),
                    Err(e) => Err(transient("delete Machine", e)),
                }
            };
            let _ = request.done.send(result);
        }
    }

    /// Fresh read, checks and the `delete-machine` annotation of one queued removal;
    /// `Ok(None)` when annotated (replicas still to lower).
    async fn annotate_for_removal(
        &self,
        request: &RemovalRequest,
        record: &Record,
    ) -> Result<Option<Removal>, CloudProviderError> {
        let r = &request.machine;
        let Some(m) = self
            .machines_api(&r.namespace)
            .get_opt(&r.name)
            .await
            .map_err(|e| transient("get Machine", e))?
        else {
            return Ok(Some(Removal::Gone));
        };
        if terminating(&m) {
            return Ok(Some(Removal::AlreadyRequested));
        }
        if !(request.check)(self, &m, record) {
            return Ok(Some(Removal::Declined));
        }
        let patch = json!({"metadata": {
            "resourceVersion": m.metadata.resource_version,
            "annotations": {DELETE_MACHINE: "karpenter"},
        }});
        match self
            .machines_api(&r.namespace)
            .patch(&r.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => Ok(None),
            Err(e) if status_code(&e) == Some(409) => Ok(Some(Removal::Conflict)),
            Err(e) if status_code(&e) == Some(404) => Ok(Some(Removal::Gone)),
            Err(e) => Err(transient("annotate Machine", e)),
        }
    }

    /// Lower replicas of `md` by up to `want`, never below the min-size annotation, and the
    /// record's `raised` with them (one write); returns by how many.
    async fn scale_down(
        &self,
        md: &MachineDeploymentRef,
        cluster: &str,
        want: i32,
    ) -> Result<i32, CloudProviderError> {
        self.update_md(md, cluster, |current, record| {
            let replicas = current.spec.replicas.unwrap_or(0);
            let by = want.min(replicas - min_size(current));
            if by <= 0 {
                return Ok((MdWrite::default(), 0));
            }
            let mut record = record.clone();
            record.raised = (record.raised - by).max(0);
            let write = MdWrite {
                replicas: Some(replicas - by),
                record: Some(record),
            };
            Ok((write, by))
        })
        .await
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
    /// Annotated, and replicas lowered (or the Machine deleted at min size).
    Removed,
}
