//! The in-memory copy one reconcile of a NodeClaim edits, and the writes shared by the phases.
//!
//! Responsibility: [`Work`] (the edited NodeClaim, its [`ConditionSet`], the smallest requeue
//! any phase asked for, the Node registration found), [`Flow`] (continue, or the NodeClaim was
//! deleted and the reconcile stops), and the deletions phases perform: [`delete_node_claim`]
//! (UID precondition; already gone is success) with the `nodeclaims_disrupted` metric.
//! Inputs: a NodeClaim and the shared [`Ctx`]. Outputs: API deletes, metrics.

use std::time::Duration;

use api::NodeClaim;
use api::well_known::conditions::{INITIALIZED, LAUNCHED, REGISTERED};
use api::well_known::labels::{CAPACITY_TYPE, NODEPOOL};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams, Preconditions};

use super::context::Ctx;
use super::error::{Error, is_not_found};
use crate::conditions::ConditionSet;
use crate::metrics::DisruptedLabels;

/// The dependents of a NodeClaim's `Ready` condition.
pub const DEPENDENTS: &[&str] = &[INITIALIZED, LAUNCHED, REGISTERED];

/// Whether the reconcile goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Run the next phase.
    Continue,
    /// The NodeClaim was deleted: write nothing more.
    Deleted,
}

/// One reconcile's edited copy.
#[derive(Debug)]
pub struct Work {
    /// The edited NodeClaim (its `status.conditions` are stale: see `conditions`).
    pub nc: NodeClaim,
    /// The conditions being edited.
    pub conditions: ConditionSet,
    /// The smallest requeue asked for.
    pub requeue: Option<Duration>,
    /// The Node registration synced (as written), for initialization.
    pub node: Option<Node>,
    /// `nodes_created` labels of a registration in this pass, counted only once the status
    /// write that records it succeeded (a conflicting write retries the pass, which must not
    /// count the Node twice).
    pub registered: Option<crate::metrics::PoolZoneLabels>,
}

impl Work {
    /// Starts editing `nc` at `now`.
    #[must_use]
    pub fn new(nc: &NodeClaim, now: k8s_openapi::jiff::Timestamp) -> Self {
        let conditions = ConditionSet::new(
            nc.status.as_ref().and_then(|s| s.conditions.as_deref()),
            DEPENDENTS,
            nc.metadata.generation,
            now,
        );
        Self {
            nc: nc.clone(),
            conditions,
            requeue: None,
            node: None,
            registered: None,
        }
    }

    /// Asks for a requeue after `after` (the smallest request wins).
    pub fn requeue_after(&mut self, after: Duration) {
        self.requeue = Some(self.requeue.map_or(after, |r| r.min(after)));
    }

    /// The NodeClaim's name.
    #[must_use]
    pub fn name(&self) -> &str {
        self.nc.metadata.name.as_deref().unwrap_or_default()
    }

    /// The edited status with the edited conditions.
    #[must_use]
    pub fn status(&self) -> api::NodeClaimStatus {
        let mut status = self.nc.status.clone().unwrap_or_default();
        status.conditions = Some(self.conditions.conditions().to_vec());
        status
    }
}

/// A label of the NodeClaim, `""` when absent.
#[must_use]
pub fn label<'a>(nc: &'a NodeClaim, key: &str) -> &'a str {
    nc.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(key))
        .map_or("", String::as_str)
}

/// Deletes `nc` (UID precondition; already gone is fine) and counts it in
/// `karpenter_nodeclaims_disrupted_total{reason}`.
pub(crate) async fn delete_node_claim<P>(
    ctx: &Ctx<P>,
    nc: &NodeClaim,
    reason: &'static str,
) -> Result<(), Error> {
    let name = nc.metadata.name.clone().unwrap_or_default();
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: nc.metadata.uid.clone(),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    let api: Api<NodeClaim> = Api::all(ctx.client.clone());
    match api.delete(&name, &params).await {
        Ok(_) => {}
        Err(e) if is_not_found(&e) || super::error::is_conflict(&e) => return Ok(()),
        Err(source) => return Err(Error::DeleteNodeClaim { name, source }),
    }
    ctx.metrics
        .nodeclaims_disrupted
        .get_or_create(&DisruptedLabels {
            reason: reason.to_owned(),
            nodepool: label(nc, NODEPOOL).to_owned(),
            capacity_type: label(nc, CAPACITY_TYPE).to_owned(),
        })
        .inc();
    tracing::info!(nodeclaim = name, reason, "deleting nodeclaim");
    Ok(())
}
