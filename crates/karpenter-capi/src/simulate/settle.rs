//! Whether a simulation has settled, and if not, what is still loose.
//!
//! Responsibility: every Node paired with a NodeClaim (`status.nodeName`) and a Machine
//! (`status.nodeRef.name`), nothing being deleted; otherwise one line per loose end naming the
//! objects (a Node kept after its NodeClaim went, a Machine without a Node, …), which
//! `waitForConsolidation` prints when it times out.
//! Inputs: the workload and management clients (or the listed objects). Outputs: lines.

use api::NodeClaim;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};

use world::objects::list_json;

/// [`unsettled`] over what the clusters hold now.
pub(super) async fn settled(
    workload: &kube::Client,
    management: &kube::Client,
    machines_api: &kube::discovery::ApiResource,
) -> anyhow::Result<Vec<String>> {
    let nodes = Api::<Node>::all(workload.clone())
        .list(&ListParams::default())
        .await?
        .items;
    let claims = Api::<NodeClaim>::all(workload.clone())
        .list(&ListParams::default())
        .await?
        .items;
    let machines = list_json(management, machines_api).await?;
    Ok(unsettled(&nodes, &claims, &machines))
}

/// What keeps the clusters from having settled: every Node, NodeClaim and Machine paired
/// (by `status.nodeName` and the Machine's `status.nodeRef.name`) and nothing being deleted.
/// One line per loose end, naming the objects; empty when settled. Pure.
fn unsettled(nodes: &[Node], claims: &[NodeClaim], machines: &[serde_json::Value]) -> Vec<String> {
    let str_at =
        |v: &serde_json::Value, p: &str| v.pointer(p).and_then(|x| x.as_str()).map(str::to_owned);
    let claim_of = |node: &str| {
        claims
            .iter()
            .find(|c| c.status.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node))
    };
    let machine_of = |node: &str| {
        machines
            .iter()
            .find(|m| str_at(m, "/status/nodeRef/name").as_deref() == Some(node))
    };
    let machine_text = |m: &serde_json::Value| {
        format!(
            "Machine {}{}",
            str_at(m, "/metadata/name").unwrap_or_default(),
            if m.pointer("/metadata/deletionTimestamp").is_some() {
                " (deleting)"
            } else {
                ""
            }
        )
    };
    let mut out = Vec::new();
    for n in nodes {
        let name = n.metadata.name.clone().unwrap_or_default();
        let claim = claim_of(&name);
        let machine = machine_of(&name);
        let deleting = n.metadata.deletion_timestamp.is_some();
        if deleting || claim.is_none() || machine.is_none() {
            out.push(format!(
                "Node {name}{}: {}, {}",
                if deleting { " (deleting)" } else { "" },
                claim.map_or_else(
                    || "no NodeClaim".to_owned(),
                    |c| format!(
                        "NodeClaim {}{}",
                        c.metadata.name.as_deref().unwrap_or_default(),
                        if c.metadata.deletion_timestamp.is_some() {
                            " (deleting)"
                        } else {
                            ""
                        }
                    )
                ),
                machine.map_or_else(|| "no Machine".to_owned(), machine_text)
            ));
        }
    }
    let node_names: Vec<&str> = nodes
        .iter()
        .filter_map(|n| n.metadata.name.as_deref())
        .collect();
    for c in claims {
        let node = c.status.as_ref().and_then(|s| s.node_name.as_deref());
        if node.is_none_or(|n| !node_names.contains(&n)) {
            out.push(format!(
                "NodeClaim {}{}: no Node",
                c.metadata.name.as_deref().unwrap_or_default(),
                if c.metadata.deletion_timestamp.is_some() {
                    " (deleting)"
                } else {
                    ""
                }
            ));
        }
    }
    for m in machines {
        let node = str_at(m, "/status/nodeRef/name");
        if node.as_deref().is_none_or(|n| !node_names.contains(&n)) {
            out.push(format!("{}: no Node", machine_text(m)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn a_node_left_after_its_node_claim_is_named_with_its_machine() {
        let node: Node = serde_json::from_value(json!({"metadata": {"name": "n1"}})).unwrap();
        let kept: Node = serde_json::from_value(json!({"metadata": {"name": "n2"}})).unwrap();
        let claim: NodeClaim = serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": "c1"},
            "spec": {"nodeClassRef": {"group": "g", "kind": "k", "name": "n"}, "requirements": []},
            "status": {"nodeName": "n1"}}))
        .unwrap();
        let machines = [
            json!({"metadata": {"name": "m1"}, "status": {"nodeRef": {"name": "n1"}}}),
            json!({"metadata": {"name": "m2", "deletionTimestamp": "2026-01-01T00:00:00Z"},
                "status": {"nodeRef": {"name": "n2"}}}),
        ];
        assert!(
            unsettled(
                std::slice::from_ref(&node),
                std::slice::from_ref(&claim),
                &machines[..1]
            )
            .is_empty()
        );
        assert_eq!(
            unsettled(&[node, kept], &[claim], &machines),
            ["Node n2: no NodeClaim, Machine m2 (deleting)"]
        );
    }
}
