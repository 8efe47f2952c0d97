//! The pods of nodes being deleted: capacity before eviction (spec §3.2–3.3).
//!
//! Responsibility: which nodes are being deleted — the Node has a deletionTimestamp, or the
//! NodeClaim naming it in `status.nodeName` has one (expiration, a manual delete, a
//! disruption command past its replacements) — and which of their pods will need a place:
//! the reschedulable ones (not finished, not terminating unless a StatefulSet's, not a
//! DaemonSet's, not mirror pods). The provisioner schedules those like pending pods, so the
//! nodes they need are launched while the old node drains instead of after it. A node that is
//! only tainted `karpenter.sh/disrupted` is not counted: a disruption command in flight makes
//! its own replacements, and counting its pods here would launch them twice.
//!
//! Inputs: Nodes, NodeClaims, pods. Outputs: node names and borrowed pods. Pure.

use std::collections::BTreeSet;

use api::NodeClaim;
use k8s_openapi::api::core::v1::{Node, Pod};

/// The names of the Nodes being deleted, or whose NodeClaim is.
#[must_use]
pub fn deleting_nodes<'a>(
    nodes: impl IntoIterator<Item = &'a Node>,
    node_claims: impl IntoIterator<Item = &'a NodeClaim>,
) -> BTreeSet<&'a str> {
    let mut out: BTreeSet<&str> = node_claims
        .into_iter()
        .filter(|nc| nc.metadata.deletion_timestamp.is_some())
        .filter_map(|nc| nc.status.as_ref()?.node_name.as_deref())
        .collect();
    out.extend(
        nodes
            .into_iter()
            .filter(|n| n.metadata.deletion_timestamp.is_some())
            .filter_map(|n| n.metadata.name.as_deref()),
    );
    out
}

/// The reschedulable pods bound to one of `nodes`.
pub fn pods_leaving<'a>(
    pods: impl IntoIterator<Item = &'a Pod> + 'a,
    nodes: &'a BTreeSet<&'a str>,
) -> impl Iterator<Item = &'a Pod> + 'a {
    pods.into_iter().filter(move |p| {
        p.spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .is_some_and(|n| nodes.contains(n))
            && crate::disruption::candidates::is_reschedulable(p)
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;
    use serde_json::json;

    fn node(name: &str, deleting: bool, tainted: bool) -> Node {
        let mut n: Node = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
        if deleting {
            n.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
        }
        if tainted {
            n.spec = Some(
                serde_json::from_value(json!({"taints": [
                {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]}))
                .unwrap(),
            );
        }
        n
    }

    fn claim(name: &str, node: &str, deleting: bool) -> NodeClaim {
        let mut nc: NodeClaim = serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": name},
            "spec": {"nodeClassRef": {"group": "g", "kind": "k", "name": "n"}, "requirements": []},
            "status": {"nodeName": node}}))
        .unwrap();
        if deleting {
            nc.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
        }
        nc
    }

    fn pod(name: &str, node: &str, owner: Option<&str>) -> Pod {
        let owners = owner.map(|kind| {
            json!([{"apiVersion": "apps/v1", "kind": kind, "name": "o", "uid": "u", "controller": true}])
        });
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "d", "ownerReferences": owners},
            "spec": {"nodeName": node, "containers": []}}))
        .unwrap()
    }

    #[test]
    fn the_pods_of_deleting_nodes_need_a_place_but_not_those_of_a_command_in_flight() {
        let nodes = [
            node("expiring", false, true),
            node("gone", true, false),
            node("candidate", false, true),
            node("busy", false, false),
        ];
        let claims = [
            claim("c-expiring", "expiring", true),
            claim("c-candidate", "candidate", false),
            claim("c-busy", "busy", false),
        ];
        let deleting = deleting_nodes(&nodes, &claims);
        assert_eq!(
            deleting.iter().copied().collect::<Vec<_>>(),
            ["expiring", "gone"],
            "a tainted node whose NodeClaim stays is a command in flight's: it makes its own replacements"
        );
        let pods = [
            pod("web", "expiring", Some("ReplicaSet")),
            pod("agent", "expiring", Some("DaemonSet")),
            pod("db", "gone", Some("StatefulSet")),
            pod("other", "busy", Some("ReplicaSet")),
            pod("stay", "candidate", Some("ReplicaSet")),
        ];
        let leaving: Vec<&str> = pods_leaving(&pods, &deleting)
            .filter_map(|p| p.metadata.name.as_deref())
            .collect();
        assert_eq!(leaving, ["web", "db"]);
    }
}
