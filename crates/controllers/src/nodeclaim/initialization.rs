//! Initialization (spec §4.4): decide when a registered NodeClaim's Node is fully usable.
//!
//! Responsibility: [`check`] (pure) tests, in order, that the Node exists, is `Ready`, carries
//! none of the NodeClaim's startup taints and no known ephemeral taint, and has non-zero
//! allocatable for every resource the NodeClaim requests non-zero of; the first failure is
//! `Initialized=Unknown` with upstream's reason. When all pass the Node is labelled
//! `karpenter.sh/initialized=true` and `Initialized=True`.
//! Inputs: [`Work`] (the Node registration wrote, else the Node store). Outputs: a Node label
//! patch, edits of [`Work`].

use api::NodeClaim;
use api::well_known::conditions::reasons::{
    KNOWN_EPHEMERAL_TAINTS_EXIST, NODE_NOT_FOUND, NODE_NOT_READY, RESOURCE_NOT_REGISTERED,
    STARTUP_TAINTS_EXIST,
};
use api::well_known::conditions::{INITIALIZED, READY, REGISTERED};
use api::well_known::labels::INITIALIZED as INITIALIZED_LABEL;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use scheduling::quantity::Quantity;
use scheduling::taints::is_known_ephemeral;
use serde_json::json;

use super::context::{Ctx, NODE_WAIT_POLL, provider_id_of};
use super::error::Error;
use super::registration::NODE_NOT_REGISTERED;
use super::work::{Flow, Work};

/// Why a Node is not initialized: the condition reason and message.
pub type NotInitialized = (&'static str, String);

fn non_zero(q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity) -> bool {
    Quantity::parse(&q.0).is_ok_and(|q| !q.is_zero())
}

/// Whether `node` (the NodeClaim's registered Node, if any) is initialized.
///
/// # Errors
/// The first failed requirement as `(reason, message)`.
pub fn check(nc: &NodeClaim, node: Option<&Node>) -> Result<(), NotInitialized> {
    let Some(node) = node else {
        return Err((NODE_NOT_FOUND, NODE_NOT_REGISTERED.to_owned()));
    };
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default()
        .iter()
        .any(|c| c.type_ == READY && c.status == "True");
    if !ready {
        return Err((NODE_NOT_READY, "Node status is NotReady".to_owned()));
    }
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default();
    for startup in nc.spec.startup_taints.iter().flatten() {
        if taints
            .iter()
            .any(|t| t.key == startup.key && t.effect == startup.effect.as_str())
        {
            return Err((
                STARTUP_TAINTS_EXIST,
                format!(
                    "StartupTaint \"{}:{}\" still exists",
                    startup.key,
                    startup.effect.as_str()
                ),
            ));
        }
    }
    for t in taints {
        if scheduling::k8s::taint(t).is_ok_and(|t| is_known_ephemeral(&t)) {
            return Err((
                KNOWN_EPHEMERAL_TAINTS_EXIST,
                format!(
                    "KnownEphemeralTaint \"{}:{}\" still exists",
                    t.key, t.effect
                ),
            ));
        }
    }
    let requests = nc.spec.resources.as_ref().and_then(|r| r.requests.as_ref());
    let allocatable = node.status.as_ref().and_then(|s| s.allocatable.as_ref());
    for (name, quantity) in requests.into_iter().flatten() {
        if !non_zero(quantity) {
            continue;
        }
        if !allocatable.and_then(|a| a.get(name)).is_some_and(non_zero) {
            return Err((
                RESOURCE_NOT_REGISTERED,
                format!("Resource \"{name}\" was requested but not registered"),
            ));
        }
    }
    Ok(())
}

/// The initialization phase.
pub(crate) async fn reconcile<P>(work: &mut Work, ctx: &Ctx<P>) -> Result<Flow, Error> {
    if work.conditions.is_true(INITIALIZED) || !work.conditions.is_true(REGISTERED) {
        return Ok(Flow::Continue);
    }
    let node = match work.node.clone() {
        Some(node) => Some(node),
        None => match provider_id_of(&work.nc).map(|p| ctx.nodes_with_provider_id(p)) {
            Some(nodes) if nodes.len() == 1 => nodes.first().map(|n| (**n).clone()),
            _ => None,
        },
    };
    if let Err((reason, message)) = check(&work.nc, node.as_ref()) {
        work.conditions.set_unknown(INITIALIZED, reason, &message);
        work.requeue_after(NODE_WAIT_POLL);
        return Ok(Flow::Continue);
    }
    let Some(node) = node else {
        return Ok(Flow::Continue);
    };
    let name = node.metadata.name.clone().unwrap_or_default();
    let labelled = node
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(INITIALIZED_LABEL))
        .is_some_and(|v| v == "true");
    if !labelled {
        let patch = json!({"metadata": {"labels": {INITIALIZED_LABEL: "true"}}});
        let api: Api<Node> = Api::all(ctx.client.clone());
        api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| Error::patch_node(&name, e))?;
    }
    work.conditions.set_true(INITIALIZED);
    tracing::info!(
        nodeclaim = work.name(),
        node = name,
        "initialized nodeclaim"
    );
    Ok(Flow::Continue)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::Value;

    fn nc(requests: Value, startup: Value) -> NodeClaim {
        serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": "nc"},
            "spec": {"nodeClassRef": {"group": "g", "kind": "K", "name": "n"},
                "requirements": [], "resources": {"requests": requests},
                "startupTaints": startup},
        }))
        .unwrap()
    }

    fn node(ready: &str, taints: Value, allocatable: Value) -> Node {
        serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"},
            "spec": {"taints": taints},
            "status": {"conditions": [{"type": "Ready", "status": ready}],
                "allocatable": allocatable},
        }))
        .unwrap()
    }

    fn reason(nc: &NodeClaim, node: Option<&Node>) -> Option<&'static str> {
        check(nc, node).err().map(|(r, _)| r)
    }

    #[test]
    fn requirements_are_checked_in_order() {
        let claim = nc(
            json!({"cpu": "1", "nvidia.com/gpu": "1", "example.com/zero": "0"}),
            json!([{"key": "boot", "effect": "NoSchedule"}]),
        );
        let alloc = json!({"cpu": "4", "nvidia.com/gpu": "0"});
        assert_eq!(reason(&claim, None), Some(NODE_NOT_FOUND));
        let n = node("False", json!([]), alloc.clone());
        assert_eq!(reason(&claim, Some(&n)), Some(NODE_NOT_READY));
        let n = node(
            "True",
            json!([{"key": "boot", "value": "x", "effect": "NoSchedule"}]),
            alloc.clone(),
        );
        assert_eq!(reason(&claim, Some(&n)), Some(STARTUP_TAINTS_EXIST));
        let n = node(
            "True",
            json!([{"key": "readiness.k8s.io/net", "effect": "NoSchedule"}]),
            alloc.clone(),
        );
        assert_eq!(reason(&claim, Some(&n)), Some(KNOWN_EPHEMERAL_TAINTS_EXIST));
        let n = node(
            "True",
            json!([{"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}]),
            alloc.clone(),
        );
        assert_eq!(reason(&claim, Some(&n)), Some(KNOWN_EPHEMERAL_TAINTS_EXIST));
        let n = node(
            "True",
            json!([{"key": "boot", "effect": "NoExecute"}]),
            alloc,
        );
        let (r, message) = check(&claim, Some(&n)).unwrap_err();
        assert_eq!(r, RESOURCE_NOT_REGISTERED);
        assert!(message.contains("nvidia.com/gpu"), "{message}");
        let n = node(
            "True",
            json!([{"key": "team", "effect": "NoSchedule"}]),
            json!({"cpu": "4", "nvidia.com/gpu": "2"}),
        );
        assert_eq!(check(&claim, Some(&n)), Ok(()));
    }
}
