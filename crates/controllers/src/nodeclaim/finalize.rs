//! The NodeClaim finalizer (spec §4.8): what happens between a NodeClaim's deletion and its
//! disappearance.
//!
//! Responsibility, for a deleting NodeClaim carrying `karpenter.sh/termination`:
//! 1. with `spec.terminationGracePeriod`, stamp `karpenter.sh/nodeclaim-termination-timestamp`
//!    (deletionTimestamp + grace period, RFC 3339) once, with a Warning Event;
//! 2. delete every Node with its providerID (those not already deleting) and wait — the Node
//!    finalizer (node termination) drains and releases them, and their deletion re-triggers us;
//! 3. `CloudProvider::delete` until it reports the instance gone (`InstanceTerminating=True`,
//!    requeue every 5 s); a NodeClaim that never got an instance is gone at once;
//! 4. remove the finalizer by a JSON patch whose `test` op guards the list index; log
//!    "deleted nodeclaim", `nodeclaims_terminated`, `nodeclaims_termination_duration_seconds`,
//!    `nodeclaims_instance_termination_duration_seconds`.
//!
//! Every step is idempotent; none depends on the lifecycle having run (a NodeClaim deleted
//! before launch, or whose Node never came, finishes without waiting).
//! Inputs: the NodeClaim, the Node store, the provider. Outputs: API writes, Events, metrics.

use std::time::Duration;

use api::NodeClaim;
use api::common::parse_duration;
use api::well_known::annotations::NODECLAIM_TERMINATION_TIMESTAMP;
use api::well_known::conditions::INSTANCE_TERMINATING;
use api::well_known::finalizers::TERMINATION;
use api::well_known::labels::{CAPACITY_TYPE, NODEPOOL, ZONE};
use cloudprovider::CloudProvider;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use serde_json::json;

use super::context::{Ctx, provider_id_of};
use super::error::{Error, is_conflict, is_failed_patch_test, is_not_found};
use super::patch::status_patch;
use super::work::{Work, label};
use crate::events::Message;
use crate::metrics::{PoolLabels, PoolTypeZoneLabels};

/// Event reason when the termination deadline is stamped.
pub use api::well_known::events::TERMINATION_GRACE_PERIOD_EXPIRING;
/// How often instance termination is checked.
const INSTANCE_POLL: Duration = Duration::from_secs(5);
/// Safety requeue while Nodes are being terminated (their deletion also re-triggers).
const NODE_POLL: Duration = Duration::from_secs(5);

/// The termination deadline of a NodeClaim deleted at `deleted` with grace period `tgp`.
#[must_use]
pub fn termination_deadline(deleted: Timestamp, tgp: &str) -> Option<Timestamp> {
    let grace = SignedDuration::try_from(parse_duration(tgp).ok()?).ok()?;
    deleted.checked_add(grace).ok()
}

/// The JSON patch removing `finalizer` from `finalizers`, guarded by a `test` of its index.
#[must_use]
pub fn remove_finalizer_patch(finalizers: &[String], finalizer: &str) -> Option<serde_json::Value> {
    let index = finalizers.iter().position(|f| f == finalizer)?;
    let path = format!("/metadata/finalizers/{index}");
    Some(json!([
        {"op": "test", "path": path, "value": finalizer},
        {"op": "remove", "path": path},
    ]))
}

/// The finalizer of a deleting NodeClaim.
pub(crate) async fn reconcile<P: CloudProvider>(
    nc: &NodeClaim,
    ctx: &Ctx<P>,
) -> Result<Action, Error> {
    let name = nc.metadata.name.clone().unwrap_or_default();
    let api: Api<NodeClaim> = Api::all(ctx.client.clone());
    let mut latest = nc.clone();
    if let Some(written) = stamp_deadline(nc, ctx, &api).await? {
        latest = written;
    }
    if let Some(provider_id) = provider_id_of(nc) {
        let nodes = ctx.nodes_with_provider_id(provider_id);
        if !nodes.is_empty() {
            delete_nodes(ctx, &nodes).await?;
            return Ok(Action::requeue(NODE_POLL));
        }
    }
    match ctx.provider.delete(nc).await {
        Ok(()) => {
            let mut work = Work::new(&latest, ctx.clock.now());
            work.conditions.set_true(INSTANCE_TERMINATING);
            let status = work.status();
            if let Some(patch) = status_patch(latest.status.as_ref(), &status, &latest) {
                api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map_err(|e| Error::patch_node_claim(&name, e))?;
            }
            return Ok(Action::requeue(INSTANCE_POLL));
        }
        Err(e) if e.is_not_found() => {}
        Err(source) => {
            return Err(Error::CloudProvider {
                method: "delete",
                source,
            });
        }
    }
    remove_finalizer(&latest, &api).await?;
    let now = ctx.clock.now();
    let nodepool = label(nc, NODEPOOL).to_owned();
    if let Some(c) = latest
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .and_then(|c| c.iter().find(|c| c.type_ == INSTANCE_TERMINATING))
    {
        ctx.metrics
            .nodeclaims_instance_termination_duration
            .get_or_create(&PoolLabels {
                nodepool: nodepool.clone(),
            })
            .observe(seconds_since(c.last_transition_time.0, now));
    }
    if let Some(deleted) = &nc.metadata.deletion_timestamp {
        ctx.metrics
            .nodeclaims_termination_duration
            .get_or_create(&PoolLabels {
                nodepool: nodepool.clone(),
            })
            .observe(seconds_since(deleted.0, now));
    }
    ctx.metrics
        .nodeclaims_terminated
        .get_or_create(&PoolTypeZoneLabels {
            nodepool,
            capacity_type: label(nc, CAPACITY_TYPE).to_owned(),
            zone: label(nc, ZONE).to_owned(),
        })
        .inc();
    ctx.forget_launch(nc.metadata.uid.as_deref().unwrap_or_default());
    tracing::info!(
        nodeclaim = name,
        provider_id = provider_id_of(nc).unwrap_or_default(),
        "deleted nodeclaim"
    );
    Ok(Action::await_change())
}

fn seconds_since(then: Timestamp, now: Timestamp) -> f64 {
    now.duration_since(then).as_secs_f64().max(0.0)
}

/// Step 1: the termination-timestamp annotation. Returns the written object, if any.
async fn stamp_deadline<P>(
    nc: &NodeClaim,
    ctx: &Ctx<P>,
    api: &Api<NodeClaim>,
) -> Result<Option<NodeClaim>, Error> {
    let has = nc
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(NODECLAIM_TERMINATION_TIMESTAMP));
    let (Some(tgp), Some(deleted), false) = (
        nc.spec.termination_grace_period.as_deref(),
        nc.metadata.deletion_timestamp.as_ref(),
        has,
    ) else {
        return Ok(None);
    };
    let Some(deadline) = termination_deadline(deleted.0, tgp) else {
        tracing::warn!(nodeclaim = ?nc.metadata.name, tgp, "invalid terminationGracePeriod");
        return Ok(None);
    };
    let name = nc.metadata.name.clone().unwrap_or_default();
    let stamp = deadline.to_string();
    let patch = json!({"metadata": {"annotations": {NODECLAIM_TERMINATION_TIMESTAMP: stamp}}});
    let written = api
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| Error::patch_node_claim(&name, e))?;
    ctx.events.publish(
        nc,
        Message::warning(
            TERMINATION_GRACE_PERIOD_EXPIRING,
            format!("All pods will be deleted by {stamp}"),
        ),
    );
    Ok(Some(written))
}

/// Step 2: delete the Nodes that are not deleting yet.
async fn delete_nodes<P>(ctx: &Ctx<P>, nodes: &[std::sync::Arc<Node>]) -> Result<(), Error> {
    let api: Api<Node> = Api::all(ctx.client.clone());
    for node in nodes {
        if node.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let name = node.metadata.name.clone().unwrap_or_default();
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => tracing::info!(node = name, "deleting node of deleted nodeclaim"),
            Err(e) if is_not_found(&e) => {}
            Err(source) => return Err(Error::DeleteNode { name, source }),
        }
    }
    Ok(())
}

/// Step 4: remove our finalizer (already gone is fine).
async fn remove_finalizer(nc: &NodeClaim, api: &Api<NodeClaim>) -> Result<(), Error> {
    let name = nc.metadata.name.clone().unwrap_or_default();
    let finalizers = nc.metadata.finalizers.as_deref().unwrap_or_default();
    let Some(patch) = remove_finalizer_patch(finalizers, TERMINATION) else {
        return Ok(());
    };
    let patch: Patch<()> = Patch::Json(
        serde_json::from_value(patch).map_err(|e| Error::Conflict(format!("{name}: {e}")))?,
    );
    match api.patch(&name, &PatchParams::default(), &patch).await {
        Ok(_) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) if is_conflict(&e) || is_failed_patch_test(&e) => {
            Err(Error::Conflict(format!("NodeClaim {name} finalizers")))
        }
        Err(e) => Err(Error::patch_node_claim(&name, e)),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_deadline_is_deletion_plus_grace() {
        let deleted: Timestamp = "2025-01-01T00:00:00Z".parse().unwrap();
        assert_eq!(
            termination_deadline(deleted, "1h30m").unwrap().to_string(),
            "2025-01-01T01:30:00Z"
        );
        assert_eq!(termination_deadline(deleted, "soon"), None);
    }

    #[test]
    fn finalizer_removal_tests_its_index() {
        let f = vec!["other".to_owned(), TERMINATION.to_owned()];
        assert_eq!(
            remove_finalizer_patch(&f, TERMINATION).unwrap(),
            json!([
                {"op": "test", "path": "/metadata/finalizers/1", "value": TERMINATION},
                {"op": "remove", "path": "/metadata/finalizers/1"},
            ])
        );
        assert_eq!(remove_finalizer_patch(&f[..1], TERMINATION), None);
    }
}
