//! Registration (spec §4.3): find the Node of a launched NodeClaim and take ownership of it.
//!
//! Responsibility: look the Node up by providerID (normalised) in the Node store; none →
//! `Registered=Unknown NodeNotFound`, several → `Registered=False MultipleNodesFound`. For
//! exactly one, [`sync_node`] computes the synced Node (finalizer `karpenter.sh/termination`,
//! owner reference to the NodeClaim, NodeClaim taints and startup taints unless the Node opts
//! out with `karpenter.sh/do-not-sync-taints=true`, NodeClaim labels and annotations over the
//! Node's, the `karpenter.sh/unregistered:NoExecute` taint removed, `karpenter.sh/registered`)
//! and [`node_patch`] the one JSON patch that writes it, each list it replaces (finalizers,
//! owner references, taints) guarded by a `test` of the copy it read — not the Node's
//! resourceVersion, which the kubelet's status updates change all the time. Then `Registered=True`, `status.nodeName`, `nodes_created`. A Node that has
//! neither the unregistered taint nor the registered label gets a `UnregisteredTaintMissing`
//! Warning (registration proceeds).
//! Inputs: [`Work`], the Node store. Outputs: a Node patch, edits of [`Work`], Event, metric.

use api::NodeClaim;
use api::common::Taint as NcTaint;
use api::well_known::conditions::reasons::{MULTIPLE_NODES_FOUND, NODE_NOT_FOUND};
use api::well_known::conditions::{LAUNCHED, REGISTERED};
use api::well_known::events::UNREGISTERED_TAINT_MISSING;
use api::well_known::finalizers::TERMINATION;
use api::well_known::labels::{DO_NOT_SYNC_TAINTS, NODEPOOL, REGISTERED as REGISTERED_LABEL, ZONE};
use api::well_known::taints::UNREGISTERED;
use k8s_openapi::api::core::v1::{Node, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Resource;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Map, Value, json};

use super::context::{Ctx, NODE_WAIT_POLL, provider_id_of};
use super::error::{Error, is_failed_patch_test};
use super::patch::map_diff;
use super::work::{Flow, Work, label};
use crate::events::Message;
use crate::metrics::PoolZoneLabels;

/// `Registered=Unknown NodeNotFound` message.
pub const NODE_NOT_REGISTERED: &str = "Node not registered with cluster";

fn node_label<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(key))
        .map(String::as_str)
}

/// Whether the Node carries `karpenter.sh/unregistered:NoExecute`.
#[must_use]
pub fn has_unregistered_taint(node: &Node) -> bool {
    node_taints(node)
        .iter()
        .any(|t| t.key == UNREGISTERED && t.effect == "NoExecute")
}

fn node_taints(node: &Node) -> &[Taint] {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default()
}

/// A NodeClaim taint as a core/v1 taint.
#[must_use]
pub fn core_taint(t: &NcTaint) -> Taint {
    Taint {
        effect: t.effect.as_str().to_owned(),
        key: t.key.clone(),
        time_added: t.time_added.clone(),
        value: t.value.clone(),
    }
}

/// The owner reference a registered Node carries to its NodeClaim.
#[must_use]
pub fn owner_reference(nc: &NodeClaim) -> OwnerReference {
    OwnerReference {
        api_version: NodeClaim::api_version(&()).into_owned(),
        kind: NodeClaim::kind(&()).into_owned(),
        name: nc.metadata.name.clone().unwrap_or_default(),
        uid: nc.metadata.uid.clone().unwrap_or_default(),
        block_owner_deletion: Some(true),
        controller: None,
    }
}

/// `node` synced with `nc`. With `finish`, also the unregistered taint removed and the
/// registered label set.
#[must_use]
pub fn sync_node(node: &Node, nc: &NodeClaim, finish: bool) -> Node {
    let mut out = node.clone();
    let meta = &mut out.metadata;
    let finalizers = meta.finalizers.get_or_insert_with(Vec::new);
    if !finalizers.iter().any(|f| f == TERMINATION) {
        finalizers.push(TERMINATION.to_owned());
    }
    let owner = owner_reference(nc);
    let owners = meta.owner_references.get_or_insert_with(Vec::new);
    if !owners.iter().any(|o| o.uid == owner.uid) {
        owners.push(owner);
    }
    if let Some(a) = &nc.metadata.annotations {
        meta.annotations
            .get_or_insert_with(Default::default)
            .extend(a.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    let labels = meta.labels.get_or_insert_with(Default::default);
    if let Some(l) = &nc.metadata.labels {
        labels.extend(l.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    let sync_taints = labels.get(DO_NOT_SYNC_TAINTS).map(String::as_str) != Some("true");
    if finish {
        labels.insert(REGISTERED_LABEL.to_owned(), "true".to_owned());
    }
    let spec = out.spec.get_or_insert_with(Default::default);
    let had_taints = spec.taints.is_some();
    let mut taints = spec.taints.take().unwrap_or_default();
    if sync_taints {
        let wanted = nc.spec.taints.iter().chain(nc.spec.startup_taints.iter());
        for t in wanted.flatten() {
            if !taints
                .iter()
                .any(|have| have.key == t.key && have.effect == t.effect.as_str())
            {
                taints.push(core_taint(t));
            }
        }
    }
    if finish {
        taints.retain(|t| !(t.key == UNREGISTERED && t.effect == "NoExecute"));
    }
    spec.taints = (had_taints || !taints.is_empty()).then_some(taints);
    out
}

/// A JSON pointer token (RFC 6901 escaping).
fn token(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// `None` for an absent or empty list (the API server leaves empty lists out).
fn list<T: serde::Serialize>(items: Option<&[T]>) -> Value {
    items
        .filter(|i| !i.is_empty())
        .map_or(Value::Null, |i| json!(i))
}

/// Replace the whole value at `path` when it changed, guarded by a `test` of the value we read
/// (`null`: absent; kube-apiserver passes that test only while the member is absent).
fn guarded(ops: &mut Vec<Value>, path: &str, before: Value, after: Value) {
    if before == after {
        return;
    }
    ops.push(json!({"op": "test", "path": path, "value": before}));
    if after.is_null() {
        ops.push(json!({"op": "remove", "path": path}));
    } else {
        ops.push(json!({"op": "add", "path": path, "value": after}));
    }
}

/// Labels or annotations key by key; an absent map is added whole (guarded as absent).
fn map_ops(
    ops: &mut Vec<Value>,
    path: &str,
    before: Option<&std::collections::BTreeMap<String, String>>,
    after: Option<&std::collections::BTreeMap<String, String>>,
) {
    let Some(diff) = map_diff(before, after) else {
        return;
    };
    if before.is_none_or(std::collections::BTreeMap::is_empty) {
        let whole: Map<String, Value> = diff.into_iter().filter(|(_, v)| !v.is_null()).collect();
        if !whole.is_empty() {
            ops.push(json!({"op": "test", "path": path, "value": null}));
            ops.push(json!({"op": "add", "path": path, "value": whole}));
        }
        return;
    }
    for (k, v) in diff {
        let at = format!("{path}/{}", token(&k));
        if v.is_null() {
            ops.push(json!({"op": "remove", "path": at}));
        } else {
            ops.push(json!({"op": "add", "path": at, "value": v}));
        }
    }
}

/// The JSON patch turning `before` into `after`: finalizers, owner references and taints as
/// whole lists, each guarded by a `test` of the list we read, so a writer that changed one of
/// them meanwhile fails the patch (422) while the kubelet's status updates (a new
/// resourceVersion, nothing we replace) do not; labels and annotations key by key. `None` when
/// nothing changed.
#[must_use]
pub fn node_patch(before: &Node, after: &Node) -> Option<Value> {
    let (b, a) = (&before.metadata, &after.metadata);
    let mut ops = Vec::new();
    guarded(
        &mut ops,
        "/metadata/finalizers",
        list(b.finalizers.as_deref()),
        list(a.finalizers.as_deref()),
    );
    guarded(
        &mut ops,
        "/metadata/ownerReferences",
        list(b.owner_references.as_deref()),
        list(a.owner_references.as_deref()),
    );
    map_ops(
        &mut ops,
        "/metadata/labels",
        b.labels.as_ref(),
        a.labels.as_ref(),
    );
    map_ops(
        &mut ops,
        "/metadata/annotations",
        b.annotations.as_ref(),
        a.annotations.as_ref(),
    );
    if before.spec.is_some() || after.spec.is_some() {
        guarded(
            &mut ops,
            "/spec/taints",
            list(Some(node_taints(before))),
            list(Some(node_taints(after))),
        );
    }
    (!ops.is_empty()).then_some(Value::Array(ops))
}

/// The registration phase.
pub(crate) async fn reconcile<P>(work: &mut Work, ctx: &Ctx<P>) -> Result<Flow, Error> {
    if work.conditions.is_true(REGISTERED) || !work.conditions.is_true(LAUNCHED) {
        return Ok(Flow::Continue);
    }
    let Some(provider_id) = provider_id_of(&work.nc).map(str::to_owned) else {
        work.conditions
            .set_unknown(REGISTERED, NODE_NOT_FOUND, NODE_NOT_REGISTERED);
        return Ok(Flow::Continue);
    };
    let nodes = ctx.nodes_with_provider_id(&provider_id);
    let node = match nodes.as_slice() {
        [] => {
            work.conditions
                .set_unknown(REGISTERED, NODE_NOT_FOUND, NODE_NOT_REGISTERED);
            work.requeue_after(NODE_WAIT_POLL);
            return Ok(Flow::Continue);
        }
        [node] => node,
        _ => {
            let names: Vec<&str> = nodes
                .iter()
                .filter_map(|n| n.metadata.name.as_deref())
                .collect();
            work.conditions.set_false(
                REGISTERED,
                MULTIPLE_NODES_FOUND,
                &format!(
                    "Invariant violated, matched multiple nodes {}",
                    names.join(", ")
                ),
            );
            return Ok(Flow::Continue);
        }
    };
    let name = node.metadata.name.clone().unwrap_or_default();
    if node_label(node, REGISTERED_LABEL).is_none() && !has_unregistered_taint(node) {
        tracing::error!(
            nodeclaim = work.name(),
            node = name,
            "node has no unregistered taint"
        );
        ctx.events.publish(
            &work.nc,
            Message::warning(
                UNREGISTERED_TAINT_MISSING,
                format!("Node {name} registered without the {UNREGISTERED}:NoExecute taint"),
            ),
        );
    }
    let synced = sync_node(node, &work.nc, true);
    let written = match node_patch(node, &synced) {
        Some(patch) => {
            let api: Api<Node> = Api::all(ctx.client.clone());
            let patch: Patch<()> = Patch::Json(
                serde_json::from_value(patch)
                    .map_err(|e| Error::Conflict(format!("Node {name}: {e}")))?,
            );
            match api.patch(&name, &PatchParams::default(), &patch).await {
                Ok(node) => node,
                // A list we replace changed since our copy: read again and retry.
                Err(e) if is_failed_patch_test(&e) => {
                    return Err(Error::Conflict(format!("Node {name}")));
                }
                Err(e) => return Err(Error::patch_node(&name, e)),
            }
        }
        None => synced,
    };
    work.conditions.set_true(REGISTERED);
    work.nc
        .status
        .get_or_insert_with(Default::default)
        .node_name = Some(name.clone());
    work.registered = Some(PoolZoneLabels {
        nodepool: label(&work.nc, NODEPOOL).to_owned(),
        zone: node_label(&written, ZONE).unwrap_or_default().to_owned(),
    });
    tracing::info!(
        nodeclaim = work.name(),
        node = name,
        provider_id,
        "registered nodeclaim"
    );
    work.node = Some(written);
    Ok(Flow::Continue)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    fn nc(spec: Value, labels: Value) -> NodeClaim {
        let mut spec_json = json!({
            "nodeClassRef": {"group": "karpenter.cluster.x-k8s.io",
                "kind": "ClusterAPINodeClass", "name": "default"},
            "requirements": [],
        });
        if let (Some(target), Value::Object(extra)) = (spec_json.as_object_mut(), spec) {
            target.extend(extra);
        }
        serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": "nc", "uid": "u1", "labels": labels,
                "annotations": {"a": "from-nc"}},
            "spec": spec_json,
        }))
        .unwrap()
    }

    fn node(labels: Value, taints: Value) -> Node {
        serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n", "resourceVersion": "5", "labels": labels,
                "annotations": {"a": "from-node", "keep": "k"}},
            "spec": {"providerID": "sim:///z1/m", "taints": taints},
        }))
        .unwrap()
    }

    fn keys(node: &Node) -> Vec<String> {
        node.spec
            .as_ref()
            .unwrap()
            .taints
            .iter()
            .flatten()
            .map(|t| {
                format!(
                    "{}={}:{}",
                    t.key,
                    t.value.clone().unwrap_or_default(),
                    t.effect
                )
            })
            .collect()
    }

    #[test]
    fn absent_labels_are_added_whole_behind_a_test_that_they_are_still_absent() {
        let claim = nc(json!({}), json!({"karpenter.sh/nodepool": "default"}));
        let mut before = node(
            json!({}),
            json!([{"key": UNREGISTERED, "effect": "NoExecute"}]),
        );
        before.metadata.labels = None;
        let after = sync_node(&before, &claim, true);
        let patch = node_patch(&before, &after).unwrap();
        let ops = patch.as_array().unwrap();
        let at = ops
            .iter()
            .position(|o| o["op"] == "test" && o["path"] == "/metadata/labels")
            .unwrap();
        assert_eq!(ops[at]["value"], Value::Null);
        assert_eq!(ops[at + 1]["op"], "add");
        assert_eq!(ops[at + 1]["path"], "/metadata/labels");
        assert_eq!(ops[at + 1]["value"]["karpenter.sh/nodepool"], "default");
        // The last taint removed: the list goes, still guarded.
        assert!(
            ops.iter()
                .any(|o| o["op"] == "remove" && o["path"] == "/spec/taints"),
            "{patch}"
        );
    }

    #[test]
    fn registration_takes_the_node_over() {
        let claim = nc(
            json!({"taints": [{"key": "team", "value": "a", "effect": "NoSchedule"}],
                "startupTaints": [{"key": "boot", "effect": "NoExecute"}]}),
            json!({"karpenter.sh/nodepool": "default", "shared": "nc"}),
        );
        let before = node(
            json!({"shared": "node", "own": "x"}),
            json!([{"key": UNREGISTERED, "effect": "NoExecute"},
                {"key": "team", "value": "other", "effect": "NoSchedule"}]),
        );
        let after = sync_node(&before, &claim, true);
        assert_eq!(after.metadata.finalizers.as_ref().unwrap(), &[TERMINATION]);
        let owner = &after.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (
                owner.api_version.as_str(),
                owner.kind.as_str(),
                owner.uid.as_str()
            ),
            ("karpenter.sh/v1", "NodeClaim", "u1")
        );
        assert_eq!(owner.block_owner_deletion, Some(true));
        let labels = after.metadata.labels.as_ref().unwrap();
        assert_eq!(labels["shared"], "nc", "NodeClaim labels win");
        assert_eq!(labels["own"], "x");
        assert_eq!(labels[REGISTERED_LABEL], "true");
        assert_eq!(after.metadata.annotations.as_ref().unwrap()["a"], "from-nc");
        // The existing team taint (same key and effect) is kept, not duplicated; the startup
        // taint is added; the unregistered taint is gone.
        assert_eq!(keys(&after), ["team=other:NoSchedule", "boot=:NoExecute"]);

        let patch = node_patch(&before, &after).unwrap();
        let ops = patch.as_array().unwrap();
        let op = |op: &str, path: &str| {
            ops.iter()
                .find(|o| o["op"] == op && o["path"] == path)
                .unwrap_or_else(|| panic!("no {op} {path} in {patch}"))["value"]
                .clone()
        };
        // Not the resourceVersion (the kubelet changes it all the time): each list replaced
        // is guarded by a test of the copy it was computed from (null: absent).
        assert!(!patch.to_string().contains("resourceVersion"), "{patch}");
        assert_eq!(op("test", "/metadata/finalizers"), Value::Null);
        assert_eq!(op("add", "/metadata/finalizers"), json!([TERMINATION]));
        assert_eq!(op("test", "/metadata/ownerReferences"), Value::Null);
        assert_eq!(
            op("test", "/spec/taints"),
            json!(before.spec.as_ref().unwrap().taints)
        );
        assert_eq!(op("add", "/spec/taints").as_array().unwrap().len(), 2);
        // Labels and annotations key by key (keys escaped).
        assert_eq!(op("add", "/metadata/labels/shared"), "nc");
        assert_eq!(
            op("add", "/metadata/labels/karpenter.sh~1nodepool"),
            "default"
        );
        assert_eq!(
            op(
                "add",
                &format!("/metadata/labels/{}", REGISTERED_LABEL.replace('/', "~1"))
            ),
            "true"
        );
        assert_eq!(op("add", "/metadata/annotations/a"), "from-nc");
        assert!(
            !patch.to_string().contains("\"own\""),
            "unchanged keys are left alone"
        );
        // Syncing again changes nothing.
        assert_eq!(node_patch(&after, &sync_node(&after, &claim, true)), None);
    }

    #[test]
    fn do_not_sync_taints_still_removes_the_unregistered_taint() {
        let claim = nc(
            json!({"taints": [{"key": "team", "value": "a", "effect": "NoSchedule"}]}),
            json!({}),
        );
        let before = node(
            json!({DO_NOT_SYNC_TAINTS: "true"}),
            json!([{"key": UNREGISTERED, "effect": "NoExecute"}]),
        );
        let after = sync_node(&before, &claim, true);
        assert!(keys(&after).is_empty(), "{:?}", keys(&after));
        let unfinished = sync_node(&before, &claim, false);
        assert_eq!(keys(&unfinished), ["karpenter.sh/unregistered=:NoExecute"]);
        assert!(
            !unfinished
                .metadata
                .labels
                .unwrap()
                .contains_key(REGISTERED_LABEL)
        );
    }

    #[test]
    fn the_unregistered_taint_is_recognised_by_key_and_effect() {
        assert!(has_unregistered_taint(&node(
            json!({}),
            json!([{"key": UNREGISTERED, "effect": "NoExecute"}])
        )));
        assert!(!has_unregistered_taint(&node(
            json!({}),
            json!([{"key": UNREGISTERED, "effect": "NoSchedule"}])
        )));
        assert!(!has_unregistered_taint(&node(json!({}), json!([]))));
    }
}
