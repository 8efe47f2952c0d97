//! Launch (spec §4.2, §2.2): create the instance of a NodeClaim and learn its providerID later.
//!
//! Responsibility: when `Launched` is not True, call `CloudProvider::create` (or reuse the
//! cached result for this NodeClaim UID, so a failed status write never creates twice) and
//! copy the result onto the edited NodeClaim ([`apply_launch`]: labels resolved by the
//! provider overlaid by the NodeClaim's own, providerID if known, capacity, allocatable) and
//! set `Launched=True`. Insufficient capacity / NodeClass not ready → Warning Event, NodeClaim
//! deleted, `nodeclaims_disrupted`; other errors → `Launched=Unknown` (the provider's reason, or
//! `LaunchFailed` with the error cut to 300 characters) and a retry with backoff.
//! Because our Create returns before the providerID exists, a launched NodeClaim without one
//! asks `CloudProvider::get_launch` on every reconcile (answered from the provider's cache) and
//! requeues after `launch_poll` until it appears; "not found" means the instance is gone and
//! the NodeClaim is deleted.
//! Inputs: [`Work`], the provider. Outputs: edits of [`Work`], Events, deletes, metrics.

use std::collections::BTreeMap;

use api::NodeClaim;
use api::well_known::conditions::LAUNCHED;
use api::well_known::conditions::reasons::LAUNCH_FAILED;
use api::well_known::events::INSUFFICIENT_CAPACITY_ERROR;
use cloudprovider::{CloudProvider, CloudProviderError, Launch};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use scheduling::resources::Resources;

use super::context::{Ctx, provider_id_of};
use super::error::Error;
use super::work::{Flow, Work, delete_node_claim};
use crate::events::{Message, truncate};

/// Event reason when Create reports the NodeClass not ready.
pub use api::well_known::events::NODE_CLASS_NOT_READY as NODE_CLASS_NOT_READY_EVENT;
/// `nodeclaims_disrupted` reason of an insufficient-capacity launch.
pub const INSUFFICIENT_CAPACITY: &str = "insufficient_capacity";
/// `nodeclaims_disrupted` reason of a NodeClass-not-ready launch.
pub const NODECLASS_NOT_READY: &str = "nodeclass_not_ready";
/// Longest `LaunchFailed` message before `...`.
const MESSAGE_LIMIT: usize = 300;

/// Resources as Kubernetes quantities (canonical strings).
#[must_use]
pub fn quantities(resources: &Resources) -> BTreeMap<String, Quantity> {
    resources
        .iter()
        .map(|(name, q)| (name.as_str().to_owned(), Quantity(q.to_string())))
        .collect()
}

/// Copies a launch onto `nc`: the provider's labels overlaid by the NodeClaim's own (which
/// win), the provider's annotations (which win: they bind the instance), the providerID when
/// known, capacity and allocatable when known.
pub fn apply_launch(nc: &mut NodeClaim, launch: &Launch) {
    if !launch.labels.is_empty() {
        let mut labels = launch.labels.clone();
        labels.extend(nc.metadata.labels.take().unwrap_or_default());
        nc.metadata.labels = Some(labels);
    }
    if !launch.annotations.is_empty() {
        nc.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .extend(launch.annotations.clone());
    }
    let status = nc.status.get_or_insert_with(Default::default);
    if let Some(id) = launch.provider_id.as_ref().filter(|p| !p.trim().is_empty()) {
        status.provider_id = Some(id.clone());
    }
    if !launch.capacity.is_empty() {
        status.capacity = Some(quantities(&launch.capacity));
    }
    if !launch.allocatable.is_empty() {
        status.allocatable = Some(quantities(&launch.allocatable));
    }
}

/// The `Launched=Unknown` reason and message for a Create error that is retried.
#[must_use]
pub fn failure_condition(error: &CloudProviderError) -> (String, String) {
    match error {
        CloudProviderError::Create { reason, message } if !reason.is_empty() => {
            (reason.clone(), message.clone())
        }
        other => (
            LAUNCH_FAILED.to_owned(),
            truncate(&other.to_string(), MESSAGE_LIMIT + 3),
        ),
    }
}

/// The launch phase.
pub(crate) async fn reconcile<P: CloudProvider>(
    work: &mut Work,
    ctx: &Ctx<P>,
) -> Result<Flow, Error> {
    let uid = work.nc.metadata.uid.clone().unwrap_or_default();
    if work.conditions.is_true(LAUNCHED) {
        ctx.forget_launch(&uid);
        if provider_id_of(&work.nc).is_none() {
            return await_provider_id(work, ctx).await;
        }
        return Ok(Flow::Continue);
    }
    let result = match ctx.cached_launch(&uid) {
        Some(launch) => Ok(launch),
        None => ctx.provider.create(&work.nc).await,
    };
    match result {
        Ok(launch) => {
            if !uid.is_empty() {
                ctx.cache_launch(&uid, launch.clone());
            }
            apply_launch(&mut work.nc, &launch);
            work.conditions.set_true(LAUNCHED);
            tracing::info!(
                nodeclaim = work.name(),
                provider_id = launch.provider_id.as_deref().unwrap_or_default(),
                instance_type = launch.instance_type,
                zone = launch.zone.as_deref().unwrap_or_default(),
                capacity_type = launch.capacity_type,
                allocatable = %launch.allocatable,
                "launched nodeclaim"
            );
            if provider_id_of(&work.nc).is_none() {
                work.requeue_after(ctx.config.launch_poll);
            }
            Ok(Flow::Continue)
        }
        Err(e @ CloudProviderError::InsufficientCapacity(_)) => {
            give_up(
                work,
                ctx,
                INSUFFICIENT_CAPACITY_ERROR,
                INSUFFICIENT_CAPACITY,
                &e,
            )
            .await
        }
        Err(e @ CloudProviderError::NodeClassNotReady(_)) => {
            give_up(
                work,
                ctx,
                NODE_CLASS_NOT_READY_EVENT,
                NODECLASS_NOT_READY,
                &e,
            )
            .await
        }
        Err(e) => {
            let (reason, message) = failure_condition(&e);
            work.conditions.set_unknown(LAUNCHED, &reason, &message);
            Err(Error::CloudProvider {
                method: "create",
                source: e,
            })
        }
    }
}

/// Event, delete, metric: this NodeClaim will never launch.
async fn give_up<P>(
    work: &Work,
    ctx: &Ctx<P>,
    event: &'static str,
    reason: &'static str,
    error: &CloudProviderError,
) -> Result<Flow, Error> {
    tracing::warn!(nodeclaim = work.name(), error = %error, "launch failed, deleting nodeclaim");
    ctx.events.publish(
        &work.nc,
        Message::warning(event, truncate(&error.to_string(), 1024)),
    );
    delete_node_claim(ctx, &work.nc, reason).await?;
    Ok(Flow::Deleted)
}

/// Launched but no providerID yet: ask the provider again.
async fn await_provider_id<P: CloudProvider>(work: &mut Work, ctx: &Ctx<P>) -> Result<Flow, Error> {
    match ctx.provider.get_launch(&work.nc).await {
        Ok(launch) => {
            match launch.provider_id.filter(|p| !p.trim().is_empty()) {
                Some(id) => {
                    tracing::info!(
                        nodeclaim = work.name(),
                        provider_id = id,
                        "providerID known"
                    );
                    work.nc
                        .status
                        .get_or_insert_with(Default::default)
                        .provider_id = Some(id);
                }
                None => work.requeue_after(ctx.config.launch_poll),
            }
            Ok(Flow::Continue)
        }
        Err(e) if e.is_not_found() => {
            tracing::info!(nodeclaim = work.name(), error = %e, "instance gone before it got a providerID");
            delete_node_claim(ctx, &work.nc, "garbage_collected").await?;
            Ok(Flow::Deleted)
        }
        Err(source) => Err(Error::CloudProvider {
            method: "get_launch",
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;
    use api::well_known::labels::{INSTANCE_TYPE, NODEPOOL, ZONE};
    use cloudprovider::{FakeCloudProvider, ObjectRef};
    use serde_json::json;

    fn claim(labels: serde_json::Value) -> NodeClaim {
        serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": "nc", "uid": "u1", "labels": labels},
            "spec": {"nodeClassRef": {"group": "g", "kind": "K", "name": "n"},
                "requirements": []},
        }))
        .unwrap()
    }

    #[test]
    fn a_launch_is_copied_with_the_node_claims_labels_winning() {
        let mut nc = claim(json!({NODEPOOL: "default", ZONE: "pinned"}));
        let mut launch = Launch::bare(ObjectRef::new("default", "m-1"));
        launch.labels = [(INSTANCE_TYPE, "large"), (ZONE, "z1")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        launch.capacity = Resources::parse([("cpu", "4"), ("memory", "16Gi")]).unwrap();
        launch.allocatable = Resources::parse([("cpu", "3900m"), ("memory", "15Gi")]).unwrap();
        apply_launch(&mut nc, &launch);
        let labels = nc.metadata.labels.as_ref().unwrap();
        assert_eq!(labels[INSTANCE_TYPE], "large");
        assert_eq!(labels[ZONE], "pinned");
        assert_eq!(labels[NODEPOOL], "default");
        let status = nc.status.as_ref().unwrap();
        assert_eq!(status.provider_id, None, "not known yet");
        assert_eq!(status.capacity.as_ref().unwrap()["memory"].0, "16Gi");
        assert_eq!(status.allocatable.as_ref().unwrap()["cpu"].0, "3900m");

        launch.provider_id = Some("sim:///z1/m-1".into());
        apply_launch(&mut nc, &launch);
        assert_eq!(
            nc.status.unwrap().provider_id.as_deref(),
            Some("sim:///z1/m-1")
        );
    }

    #[test]
    fn a_launch_s_annotations_are_written_over_the_node_claims() {
        let mut nc = claim(json!({NODEPOOL: "default"}));
        nc.metadata.annotations = Some(
            [("mine", "kept"), ("binding", "stale")]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
        );
        let mut launch = Launch::bare(ObjectRef::new("default", "m-1"));
        launch
            .annotations
            .insert("binding".to_owned(), "default/m-1".to_owned());
        apply_launch(&mut nc, &launch);
        let annotations = nc.metadata.annotations.unwrap();
        assert_eq!(annotations["binding"], "default/m-1", "the provider's win");
        assert_eq!(annotations["mine"], "kept");
    }

    #[test]
    fn failures_keep_the_providers_reason_or_are_cut_to_300_characters() {
        let create = CloudProviderError::Create {
            reason: "NoMachine".into(),
            message: "m".into(),
        };
        assert_eq!(failure_condition(&create), ("NoMachine".into(), "m".into()));
        let (reason, message) = failure_condition(&CloudProviderError::Transient("x".repeat(500)));
        assert_eq!(reason, LAUNCH_FAILED);
        assert_eq!(message.len(), 303);
        assert!(message.ends_with("..."));
    }

    #[tokio::test]
    async fn a_fake_launch_carries_what_apply_launch_needs() {
        let fake =
            FakeCloudProvider::new(scheduling::fixtures::default_fake_instance_types().unwrap());
        let mut nc = claim(json!({}));
        let launch = fake.create(&nc).await.unwrap();
        apply_launch(&mut nc, &launch);
        let status = nc.status.unwrap();
        assert!(status.capacity.is_some() && status.allocatable.is_some());
        assert!(nc.metadata.labels.unwrap().contains_key(INSTANCE_TYPE));
    }
}
