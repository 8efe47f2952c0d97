//! NodePool resource counting (spec §1.2 `status.resources` / `status.nodes`, §7
//! `karpenter_nodepools_usage` / `_limit`).
//!
//! Responsibility: sum, per NodePool (label `karpenter.sh/nodepool`), the capacity of its
//! Nodes and of its NodeClaims that have no Node yet, leaving out everything being deleted
//! (a Node whose NodeClaim is being deleted too); count them as `nodes`. The result always has
//! the keys cpu, memory, pods, ephemeral-storage and nodes. [`status_patch`] turns a usage into
//! the `/status` merge patch when it differs from what the NodePool shows (by value, not by
//! spelling; keys that disappeared are removed with `null`).
//!
//! Inputs: Nodes, NodeClaims, a NodePool's status. Outputs: [`Usage`] values, patches, metric
//! values. Pure.

use std::collections::{BTreeMap, BTreeSet};

use api::well_known::labels::NODEPOOL;
use api::{NodeClaim, NodePoolStatus};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;
use scheduling::quantity::{NANOS_PER_UNIT, Quantity};
use serde_json::{Map, Value, json};

/// The resource key holding the node count.
pub const NODES: &str = "nodes";
/// Keys always present in `status.resources`.
pub const ALWAYS: [&str; 5] = ["cpu", "memory", "pods", "ephemeral-storage", NODES];

/// What one NodePool uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Usage {
    /// Resource name → summed capacity (including `nodes`).
    pub resources: BTreeMap<String, Quantity>,
    /// How many Nodes and launching NodeClaims were counted.
    pub nodes: i64,
}

impl Default for Usage {
    fn default() -> Self {
        Self {
            resources: ALWAYS
                .iter()
                .map(|k| ((*k).to_owned(), Quantity::ZERO))
                .collect(),
            nodes: 0,
        }
    }
}

impl Usage {
    fn add(&mut self, capacity: Option<&BTreeMap<String, ApiQuantity>>) {
        for (name, q) in capacity.into_iter().flatten() {
            if name == NODES {
                continue;
            }
            let Ok(q) = Quantity::parse(&q.0) else {
                continue;
            };
            let sum = self.resources.entry(name.clone()).or_insert(Quantity::ZERO);
            *sum = sum.saturating_add(q);
        }
        self.nodes = self.nodes.saturating_add(1);
        self.resources
            .insert(NODES.to_owned(), Quantity::from_value(self.nodes));
    }
}

/// The usage of every NodePool that has Nodes or NodeClaims (pools without any are absent:
/// use [`Usage::default`]).
#[must_use]
pub fn usage_by_pool<'a>(
    nodes: impl IntoIterator<Item = &'a Node>,
    node_claims: impl IntoIterator<Item = &'a NodeClaim>,
) -> BTreeMap<String, Usage> {
    let node_claims: Vec<&NodeClaim> = node_claims.into_iter().collect();
    let deleting_claims: BTreeSet<&str> = node_claims
        .iter()
        .filter(|nc| nc.metadata.deletion_timestamp.is_some())
        .filter_map(|nc| nc.status.as_ref()?.provider_id.as_deref())
        .collect();
    let mut out: BTreeMap<String, Usage> = BTreeMap::new();
    let mut node_ids: BTreeSet<&str> = BTreeSet::new();
    let mut node_names: BTreeSet<&str> = BTreeSet::new();
    for node in nodes {
        let provider_id = node.spec.as_ref().and_then(|s| s.provider_id.as_deref());
        node_ids.extend(provider_id);
        node_names.extend(node.metadata.name.as_deref());
        let Some(pool) = node.metadata.labels.as_ref().and_then(|l| l.get(NODEPOOL)) else {
            continue;
        };
        if node.metadata.deletion_timestamp.is_some()
            || provider_id.is_some_and(|id| deleting_claims.contains(id))
        {
            continue;
        }
        out.entry(pool.clone())
            .or_default()
            .add(node.status.as_ref().and_then(|s| s.capacity.as_ref()));
    }
    for nc in node_claims {
        let Some(pool) = nc.metadata.labels.as_ref().and_then(|l| l.get(NODEPOOL)) else {
            continue;
        };
        let status = nc.status.as_ref();
        let has_node = status.is_some_and(|s| {
            s.provider_id
                .as_deref()
                .is_some_and(|id| node_ids.contains(id))
                || s.node_name
                    .as_deref()
                    .is_some_and(|n| node_names.contains(n))
        });
        if has_node || nc.metadata.deletion_timestamp.is_some() {
            continue;
        }
        out.entry(pool.clone())
            .or_default()
            .add(status.and_then(|s| s.capacity.as_ref()));
    }
    out
}

/// The `/status` merge patch that makes `old` show `usage`, or `None` when it already does.
#[must_use]
pub fn status_patch(old: Option<&NodePoolStatus>, usage: &Usage) -> Option<Value> {
    let old_resources = old.and_then(|s| s.resources.as_ref());
    let same_resources = old_resources.is_some_and(|r| {
        r.len() == usage.resources.len()
            && usage.resources.iter().all(|(k, v)| {
                r.get(k)
                    .and_then(|q| Quantity::parse(&q.0).ok())
                    .is_some_and(|q| q == *v)
            })
    });
    let same_nodes = old.and_then(|s| s.nodes) == Some(usage.nodes);
    if same_resources && same_nodes {
        return None;
    }
    let mut resources: Map<String, Value> = usage
        .resources
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.to_string())))
        .collect();
    for k in old_resources.into_iter().flat_map(BTreeMap::keys) {
        resources.entry(k.clone()).or_insert(Value::Null);
    }
    Some(json!({"status": {"resources": resources, "nodes": usage.nodes}}))
}

/// A quantity as the metrics report it: cores for cpu, bytes for memory, units otherwise.
#[must_use]
pub fn as_f64(q: Quantity) -> f64 {
    #[allow(clippy::cast_precision_loss)]
    let value = q.as_nanos() as f64 / NANOS_PER_UNIT as f64;
    value
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    fn node(name: &str, pool: &str, id: &str, cpu: &str, deleting: bool) -> Node {
        let mut metadata = json!({"name": name, "labels": {NODEPOOL: pool}});
        if deleting {
            metadata["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        }
        serde_json::from_value(json!({
            "metadata": metadata,
            "spec": {"providerID": id},
            "status": {"capacity": {"cpu": cpu, "memory": "16Gi", "pods": "110"}},
        }))
        .unwrap()
    }

    fn claim(name: &str, pool: &str, id: Option<&str>, deleting: bool) -> NodeClaim {
        let mut metadata = json!({"name": name, "labels": {NODEPOOL: pool}});
        if deleting {
            metadata["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        }
        let mut status = json!({"capacity": {"cpu": "2", "memory": "8Gi",
            "nvidia.com/gpu": "1"}});
        if let Some(id) = id {
            status["providerID"] = json!(id);
        }
        serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": metadata,
            "spec": {"nodeClassRef": {"group": "g", "kind": "k", "name": "n"},
                "requirements": []},
            "status": status,
        }))
        .unwrap()
    }

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap()
    }

    #[test]
    fn nodes_and_launching_claims_are_summed_once() {
        let nodes = [
            node("n1", "a", "p://1", "4", false),
            node("n2", "a", "p://2", "4", true),
            node("n3", "b", "p://3", "8", false),
        ];
        let claims = [
            claim("c1", "a", Some("p://1"), false),
            claim("c4", "a", None, false),
            claim("c5", "a", None, true),
            claim("c3", "b", Some("p://3"), true),
        ];
        let usage = usage_by_pool(&nodes, &claims);
        let a = &usage["a"];
        assert_eq!(a.nodes, 2);
        assert_eq!(a.resources["cpu"], q("6"));
        assert_eq!(a.resources["memory"], q("24Gi"));
        assert_eq!(a.resources["pods"], q("110"));
        assert_eq!(a.resources["ephemeral-storage"], Quantity::ZERO);
        assert_eq!(a.resources["nvidia.com/gpu"], q("1"));
        assert_eq!(a.resources[NODES], q("2"));
        // b's only node belongs to a NodeClaim being deleted.
        assert!(!usage.contains_key("b"));
    }

    #[test]
    fn the_patch_is_written_only_on_a_change_of_value() {
        let usage = usage_by_pool(&[node("n1", "a", "p://1", "4", false)], &[])["a"].clone();
        let patch = status_patch(None, &usage).unwrap();
        assert_eq!(patch["status"]["resources"]["cpu"], json!("4"));
        assert_eq!(patch["status"]["resources"]["memory"], json!("16Gi"));
        assert_eq!(patch["status"]["nodes"], json!(1));
        let status: NodePoolStatus = serde_json::from_value(json!({
            "nodes": 1,
            "resources": {"cpu": "4000m", "memory": "16Gi", "pods": "110",
                "ephemeral-storage": "0", "nodes": "1"},
        }))
        .unwrap();
        assert_eq!(status_patch(Some(&status), &usage), None);
        let stale: NodePoolStatus = serde_json::from_value(json!({
            "nodes": 1,
            "resources": {"cpu": "4", "memory": "16Gi", "pods": "110",
                "ephemeral-storage": "0", "nodes": "1", "nvidia.com/gpu": "1"},
        }))
        .unwrap();
        let patch = status_patch(Some(&stale), &usage).unwrap();
        assert_eq!(patch["status"]["resources"]["nvidia.com/gpu"], Value::Null);
    }

    #[test]
    fn metric_values_are_cores_and_bytes() {
        assert!((as_f64(q("1500m")) - 1.5).abs() < 1e-9);
        assert!((as_f64(q("1Gi")) - 1_073_741_824.0).abs() < 1e-3);
    }
}
