//! Runtime validation of a NodePool (spec §1.1 "Runtime validation", §1.2
//! `ValidationSucceeded`).
//!
//! Responsibility: what the CRD's schema and CEL rules do not already reject — the one runtime
//! validation of NodePools, used by the `ValidationSucceeded` condition and by the provisioning
//! inputs (`provisioning::inputs::pools::scheduler_node_pool`, so `plan` too): every requirement
//! ([`validate_requirement`], including restricted keys of the Cluster API domain and
//! well-known values such as capacity types), no `karpenter.sh/nodepool` requirement, template
//! labels (qualified-name keys, label values, restricted keys), taints and startup taints
//! (keys, values, no duplicate key/effect pair across both lists) and parsable limits.
//!
//! Inputs: a NodePool and the well-known labels. Outputs: `Ok` or the error text written as the
//! condition message. Pure.

use api::NodePool;
use api::well_known::labels::NODEPOOL;
use scheduling::labels::{WellKnownLabels, validate_label_value, validate_qualified_name};
use scheduling::requirements::validate_requirement;
use scheduling::resources::Resources;
use scheduling::taints::{Taint, validate_taints};

/// Validates `pool`.
///
/// # Errors
/// Every problem found, joined by `"; "`, each naming its field.
pub fn validate(pool: &NodePool, well_known: &WellKnownLabels) -> Result<(), String> {
    let mut errors = Vec::new();
    let spec = &pool.spec.template.spec;
    for (i, r) in spec.requirements.iter().enumerate() {
        let field = format!("spec.template.spec.requirements[{i}]");
        if r.key == NODEPOOL {
            errors.push(format!("{field}: label {NODEPOOL:?} is restricted"));
            continue;
        }
        let min_values = match r.min_values.map(usize::try_from).transpose() {
            Ok(m) => m,
            Err(_) => {
                errors.push(format!("{field}.minValues: must not be negative"));
                continue;
            }
        };
        if let Err(e) = validate_requirement(
            &r.key,
            r.operator.as_str(),
            r.values(),
            min_values,
            well_known,
        ) {
            errors.push(format!("{field}: {e}"));
        }
    }
    let labels = pool
        .spec
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.as_ref());
    for (key, value) in labels.into_iter().flatten() {
        let field = format!("spec.template.metadata.labels[{key:?}]");
        if let Err(e) = validate_qualified_name(key) {
            errors.push(format!("{field}: {e}"));
        }
        if let Err(e) = validate_label_value(value) {
            errors.push(format!("{field}: {e}"));
        }
        if key == NODEPOOL || well_known.is_restricted_label(key) {
            errors.push(format!("{field}: label {key:?} is restricted"));
        }
    }
    let (plain, startup) = (
        taints(spec.taints.as_deref()),
        taints(spec.startup_taints.as_deref()),
    );
    if let Err(e) = validate_taints(&plain, &startup) {
        errors.push(format!("spec.template.spec: {e}"));
    }
    if let Some(limits) = &pool.spec.limits
        && let Err(e) = Resources::parse(limits.iter().map(|(k, v)| (k.as_str(), v.0.as_str())))
    {
        errors.push(format!("spec.limits: {e}"));
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}

fn taints(taints: Option<&[api::common::Taint]>) -> Vec<Taint> {
    taints
        .unwrap_or_default()
        .iter()
        .filter_map(|t| {
            Some(Taint {
                key: t.key.clone(),
                value: t.value_or_empty().to_owned(),
                effect: t.effect.as_str().parse().ok()?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;
    use serde_json::{Value, json};

    fn pool(spec: Value, labels: Value) -> NodePool {
        let mut template_spec = json!({
            "nodeClassRef": {"group": "karpenter.cluster.x-k8s.io",
                "kind": "ClusterAPINodeClass", "name": "default"},
            "requirements": [],
        });
        for (k, v) in spec.as_object().unwrap() {
            template_spec[k] = v.clone();
        }
        serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "metadata": {"name": "p"},
            "spec": {"template": {"metadata": {"labels": labels}, "spec": template_spec}},
        }))
        .unwrap()
    }

    fn check(spec: Value, labels: Value) -> Result<(), String> {
        validate(&pool(spec, labels), &WellKnownLabels::cluster_api())
    }

    #[test]
    fn a_plain_pool_is_valid() {
        let ok = check(
            json!({"requirements": [
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
            ],
            "taints": [{"key": "a", "effect": "NoSchedule"}]}),
            json!({"team": "a"}),
        );
        assert_eq!(ok, Ok(()));
    }

    #[test]
    fn unknown_capacity_types_fail() {
        let err = check(
            json!({"requirements": [
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["cheap"]},
            ]}),
            json!({}),
        )
        .unwrap_err();
        assert!(
            err.starts_with("spec.template.spec.requirements[0]: "),
            "{err}"
        );
    }

    #[test]
    fn restricted_and_nodepool_keys_fail() {
        let err = check(
            json!({"requirements": [
                {"key": "karpenter.sh/nodepool", "operator": "In", "values": ["x"]},
                {"key": "karpenter.cluster.x-k8s.io/foo", "operator": "Exists"},
            ]}),
            json!({"karpenter.cluster.x-k8s.io/bar": "x"}),
        )
        .unwrap_err();
        assert!(err.contains("requirements[0]"), "{err}");
        assert!(err.contains("requirements[1]"), "{err}");
        assert!(
            err.contains("labels[\"karpenter.cluster.x-k8s.io/bar\"]"),
            "{err}"
        );
    }

    #[test]
    fn duplicate_taints_across_lists_fail() {
        let err = check(
            json!({"taints": [{"key": "a", "effect": "NoSchedule"}],
                "startupTaints": [{"key": "a", "value": "v", "effect": "NoSchedule"}]}),
            json!({}),
        )
        .unwrap_err();
        assert!(err.contains("duplicate taint"), "{err}");
    }
}
