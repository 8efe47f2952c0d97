//! A planned NodeClaim → the `karpenter.sh/v1` NodeClaim object to create (spec §3.17).
//!
//! Responsibility: [`node_claim`] builds the object upstream's `ToNodeClaim` builds:
//! - `generateName: "<nodepool>-"`, an owner reference to the NodePool (not controller,
//!   `blockOwnerDeletion`), and the `karpenter.sh/termination` finalizer already (upstream's
//!   lifecycle adds it in a second write; creating with it saves that write per NodeClaim,
//!   and the lifecycle still adds it to a NodeClaim created without it);
//! - labels: the NodePool template's labels, `karpenter.sh/nodepool`, the NodeClass label, and
//!   one label per custom (neither well-known nor restricted) requirement key with a concrete
//!   value;
//! - annotations: the template's, the NodePool hash and hash version (when given),
//!   `karpenter.sh/nodeclaim-min-values-relaxed`, and `karpenter.sh/price-overlay-applied` /
//!   `karpenter.sh/capacity-overlay-applied` (`"true"`) when a NodeOverlay changed one of its
//!   instance types;
//! - spec: the template spec as the NodePool has it (taints, startup taints, nodeClassRef,
//!   expireAfter, terminationGracePeriod — copied as JSON, so nothing is lost), with the
//!   requirements narrowed to the chosen instance types and capacity types
//!   ([`PlannedNodeClaim::launch_requirements`], minValues kept) and `resources.requests` =
//!   the summed pod requests plus daemon overhead.
//!
//! Inputs: the [`PlannedNodeClaim`], its `api::NodePool`, the well-known labels, the hash.
//! Outputs: an `api::NodeClaim`. Pure.

use std::collections::BTreeMap;

use api::NodeClaim;
use api::well_known::annotations::{
    CAPACITY_OVERLAY_APPLIED, NODECLAIM_MIN_VALUES_RELAXED, NODEPOOL_HASH, NODEPOOL_HASH_VERSION,
    PRICE_OVERLAY_APPLIED,
};
use api::well_known::finalizers::TERMINATION;
use api::well_known::labels::NODECLASS;
use scheduling::labels::{NODE_POOL, WellKnownLabels};
use scheduling::scheduler::PlannedNodeClaim;
use serde_json::{Map, Value, json};

/// The NodePool hash stamped on new NodeClaims (for static drift).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolHash {
    /// `karpenter.sh/nodepool-hash`.
    pub hash: String,
    /// `karpenter.sh/nodepool-hash-version`.
    pub version: String,
}

/// Why a NodeClaim could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    /// The NodePool lacks a name or UID (it was never stored).
    #[error("NodePool {0:?} has no name or uid")]
    NodePoolIdentity(String),
    /// The object does not match the NodeClaim schema (a bug, reported instead of panicking).
    #[error("NodeClaim for NodePool {pool}: {message}")]
    Schema {
        /// The NodePool.
        pool: String,
        /// What serde said.
        message: String,
    },
}

/// The NodeClaim to create for `planned`, from NodePool `pool`.
///
/// # Errors
/// [`BuildError`] when the NodePool has no identity or the result does not deserialize.
pub fn node_claim(
    planned: &PlannedNodeClaim,
    pool: &api::NodePool,
    well_known: &WellKnownLabels,
    hash: Option<&PoolHash>,
) -> Result<NodeClaim, BuildError> {
    let (Some(name), Some(uid)) = (pool.metadata.name.as_deref(), pool.metadata.uid.as_deref())
    else {
        return Err(BuildError::NodePoolIdentity(
            pool.metadata.name.clone().unwrap_or_default(),
        ));
    };
    let schema = |e: serde_json::Error| BuildError::Schema {
        pool: name.to_owned(),
        message: e.to_string(),
    };
    let mut requirements = planned.launch_requirements(well_known);
    // The NodeClass label is a label, not a requirement (instance types do not define it, so
    // providers would find nothing compatible); upstream adds it in `ToNodeClaim` the same way.
    requirements.remove(NODECLASS);

    let mut labels: BTreeMap<String, String> = pool
        .spec
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default()
        .into_iter()
        .collect();
    for (k, v) in &planned.labels {
        labels.insert(k.to_string(), v.to_string());
    }
    labels.extend(requirements.labels(well_known));
    labels.insert(NODE_POOL.to_owned(), name.to_owned());
    labels.insert(
        NODECLASS.to_owned(),
        pool.spec.template.spec.node_class_ref.name.clone(),
    );

    let mut annotations: BTreeMap<String, String> = pool
        .spec
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.annotations.clone())
        .unwrap_or_default()
        .into_iter()
        .collect();
    if let Some(h) = hash {
        annotations.insert(NODEPOOL_HASH.to_owned(), h.hash.clone());
        annotations.insert(NODEPOOL_HASH_VERSION.to_owned(), h.version.clone());
    }
    annotations.insert(
        NODECLAIM_MIN_VALUES_RELAXED.to_owned(),
        planned.min_values_relaxed.to_string(),
    );
    // Upstream: set when a NodeOverlay changed a price or the capacity of one of the instance
    // types the NodeClaim may launch as.
    let marks = planned.instance_types.iter().map(|it| it.overlay_marks());
    for (applied, key) in [
        (marks.clone().any(|m| m.price), PRICE_OVERLAY_APPLIED),
        (marks.clone().any(|m| m.capacity), CAPACITY_OVERLAY_APPLIED),
    ] {
        if applied {
            annotations.insert(key.to_owned(), "true".to_owned());
        }
    }

    let mut spec = serde_json::to_value(&pool.spec.template.spec).map_err(schema)?;
    let entries: Vec<Value> = requirements
        .to_selector_requirements()
        .into_iter()
        .map(|r| {
            let mut entry = Map::new();
            entry.insert("key".into(), json!(r.key));
            entry.insert("operator".into(), json!(r.operator.to_string()));
            if !r.values.is_empty() {
                entry.insert("values".into(), json!(r.values));
            }
            if let Some(m) = r.min_values {
                entry.insert("minValues".into(), json!(m));
            }
            Value::Object(entry)
        })
        .collect();
    let requests: BTreeMap<String, String> = planned
        .requests
        .iter()
        .map(|(k, q)| (k.to_string(), q.to_string()))
        .collect();
    if let Value::Object(spec) = &mut spec {
        spec.insert("requirements".into(), Value::Array(entries));
        spec.insert("resources".into(), json!({ "requests": requests }));
    }
    let object = json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {
            "generateName": format!("{name}-"),
            "finalizers": [TERMINATION],
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [{
                "apiVersion": "karpenter.sh/v1",
                "kind": "NodePool",
                "name": name,
                "uid": uid,
                "blockOwnerDeletion": true,
            }],
        },
        "spec": spec,
    });
    serde_json::from_value(object).map_err(schema)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;
    use std::sync::Arc;

    use scheduling::fixtures::fake_instance_types;
    use scheduling::requirements::{Requirement, Requirements};
    use scheduling::resources::Resources;

    fn pool() -> api::NodePool {
        serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
            "metadata": {"name": "general", "uid": "pool-uid"},
            "spec": {"template": {
                "metadata": {"labels": {"team": "a"}, "annotations": {"note": "x"}},
                "spec": {
                    "nodeClassRef": {"group": "karpenter.cluster.x-k8s.io",
                        "kind": "ClusterAPINodeClass", "name": "default"},
                    "requirements": [],
                    "taints": [{"key": "dedicated", "value": "a", "effect": "NoSchedule"}],
                    "startupTaints": [{"key": "boot", "effect": "NoSchedule"}],
                    "expireAfter": "24h",
                    "terminationGracePeriod": "1h",
                }}}
        }))
        .unwrap()
    }

    fn planned() -> PlannedNodeClaim {
        let its = fake_instance_types(3).unwrap();
        let mut requirements = Requirements::new();
        requirements.add(Requirement::in_values("example.com/tier", ["gold"]));
        requirements.add(Requirement::in_values(NODECLASS, ["default"]));
        PlannedNodeClaim {
            node_pool: Arc::from("general"),
            requirements,
            instance_types: its,
            requests: Resources::parse([("cpu", "1500m"), ("memory", "1Gi"), ("pods", "3")])
                .unwrap(),
            labels: BTreeMap::from([(Arc::from(NODE_POOL), Arc::from("general"))]),
            taints: vec![],
            startup_taints: vec![],
            pods: vec![Arc::from("u1")],
            min_values_relaxed: false,
        }
    }

    #[test]
    fn overlay_annotations_follow_the_instance_types_marks() {
        let wk = WellKnownLabels::cluster_api();
        let v = serde_json::to_value(node_claim(&planned(), &pool(), &wk, None).unwrap()).unwrap();
        let annotations = v["metadata"]["annotations"].as_object().unwrap();
        assert!(!annotations.contains_key("karpenter.sh/price-overlay-applied"));
        assert!(!annotations.contains_key("karpenter.sh/capacity-overlay-applied"));
        let mut marked = planned();
        let first = (*marked.instance_types[0]).clone();
        marked.instance_types[0] = Arc::new(first.with_overlay_marks(
            scheduling::instance_type::OverlayMarks {
                price: true,
                capacity: false,
            },
        ));
        let v = serde_json::to_value(node_claim(&marked, &pool(), &wk, None).unwrap()).unwrap();
        let annotations = &v["metadata"]["annotations"];
        assert_eq!(annotations["karpenter.sh/price-overlay-applied"], "true");
        assert!(
            annotations
                .get("karpenter.sh/capacity-overlay-applied")
                .is_none()
        );
    }

    #[test]
    fn the_node_claim_carries_what_upstream_puts_on_it() {
        let hash = PoolHash {
            hash: "123".into(),
            version: "v1-rs".into(),
        };
        let nc = node_claim(
            &planned(),
            &pool(),
            &WellKnownLabels::cluster_api(),
            Some(&hash),
        )
        .unwrap();
        let v = serde_json::to_value(&nc).unwrap();
        assert_eq!(v["metadata"]["generateName"], "general-");
        assert_eq!(
            v["metadata"]["finalizers"],
            json!(["karpenter.sh/termination"])
        );
        assert_eq!(v["metadata"]["ownerReferences"][0]["uid"], "pool-uid");
        assert_eq!(v["metadata"]["ownerReferences"][0]["kind"], "NodePool");
        let labels = &v["metadata"]["labels"];
        assert_eq!(labels["team"], "a");
        assert_eq!(labels["karpenter.sh/nodepool"], "general");
        assert_eq!(labels["example.com/tier"], "gold");
        let annotations = &v["metadata"]["annotations"];
        assert_eq!(annotations["note"], "x");
        assert_eq!(annotations["karpenter.sh/nodepool-hash"], "123");
        assert_eq!(annotations["karpenter.sh/nodepool-hash-version"], "v1-rs");
        assert_eq!(
            annotations["karpenter.sh/nodeclaim-min-values-relaxed"],
            "false"
        );
        let spec = &v["spec"];
        assert_eq!(spec["taints"][0]["key"], "dedicated");
        assert_eq!(spec["startupTaints"][0]["key"], "boot");
        assert_eq!(spec["expireAfter"], "24h");
        assert_eq!(spec["terminationGracePeriod"], "1h");
        assert_eq!(spec["nodeClassRef"]["name"], "default");
        assert_eq!(spec["resources"]["requests"]["cpu"], "1500m");
        let reqs = spec["requirements"].as_array().unwrap();
        let it = reqs
            .iter()
            .find(|r| r["key"] == "node.kubernetes.io/instance-type")
            .unwrap();
        assert_eq!(it["operator"], "In");
        assert_eq!(it["values"].as_array().unwrap().len(), 3);
        assert!(reqs.iter().any(|r| r["key"] == "example.com/tier"));
        assert!(
            !reqs.iter().any(|r| r["key"] == NODECLASS),
            "the NodeClass label is not a requirement"
        );
        assert_eq!(labels[NODECLASS], "default");
    }

    #[test]
    fn a_pool_without_identity_is_an_error() {
        let mut p = pool();
        p.metadata.uid = None;
        assert_eq!(
            node_claim(&planned(), &p, &WellKnownLabels::cluster_api(), None).unwrap_err(),
            BuildError::NodePoolIdentity("general".into())
        );
    }
}
