//! Drift and expiration of a NodeClaim (spec §1.6, §4.9, §5.1), the pure parts.
//!
//! Responsibility:
//! - [`static_drift`]: `NodePoolDrifted` when the NodeClaim and its NodePool both carry
//!   `karpenter.sh/nodepool-hash` and `karpenter.sh/nodepool-hash-version`, the versions are
//!   equal and the hashes differ (the template changed after the NodeClaim was made);
//! - [`requirements_drift`]: `RequirementsDrifted` when a label the NodeClaim carries is no
//!   longer allowed by the NodePool's requirements (a value outside `In`, inside `NotIn`, a
//!   number outside `Gt`/`Lt`, or a label `DoesNotExist` forbids). A requirement on a label the
//!   NodeClaim does not carry is not drift here: our NodeClaims carry only the labels their
//!   MachineDeployment gives, and replacing every node over a key it never had would be a
//!   surprise (upstream treats a missing label as drifted);
//! - [`instance_type_not_found`]: `InstanceTypeNotFound` when a NodeClaim older than an hour
//!   names an instance type its NodePool no longer offers, or one none of whose offerings
//!   (available or not) matches the NodeClaim's zone and capacity type. With Cluster API this
//!   is a MachineDeployment that left the NodeClass's selection or changed its zone; the hour
//!   keeps a NodeClaim launched from a catalogue that is still catching up from being drifted.
//!   The NodePool's instance types come from the provider's in-memory catalogue, so unlike
//!   upstream the check is not cached between passes;
//! - [`expires_at`]: creation time + `spec.expireAfter` (`Never`: none).
//!
//! The provider's drift (MachineDeployment no longer selected, Kubernetes version or templates
//! changed) comes from [`cloudprovider::CloudProvider::is_drifted`] in the controller.
//!
//! Inputs: a NodeClaim and its NodePool. Outputs: reasons and times. Pure.

use api::common::NodeSelectorOperator;
use api::well_known::annotations::{NODEPOOL_HASH, NODEPOOL_HASH_VERSION};
use api::well_known::conditions::reasons::{
    INSTANCE_TYPE_NOT_FOUND, NODEPOOL_DRIFTED, REQUIREMENTS_DRIFTED,
};
use api::{NodeClaim, NodePool};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use scheduling::instance_type::InstanceType;
use scheduling::labels::{CAPACITY_TYPE, INSTANCE_TYPE, TOPOLOGY_ZONE};
use std::sync::Arc;

/// How old a NodeClaim must be before a missing instance type counts as drift (upstream's).
pub const INSTANCE_TYPE_GRACE: SignedDuration = SignedDuration::from_hours(1);

fn annotation<'a>(meta: &'a kube::api::ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

/// `NodePoolDrifted` when the template hash changed under the same hash version.
#[must_use]
pub fn static_drift(nc: &NodeClaim, pool: &NodePool) -> Option<&'static str> {
    let (nc_hash, nc_version) = (
        annotation(&nc.metadata, NODEPOOL_HASH)?,
        annotation(&nc.metadata, NODEPOOL_HASH_VERSION)?,
    );
    let (pool_hash, pool_version) = (
        annotation(&pool.metadata, NODEPOOL_HASH)?,
        annotation(&pool.metadata, NODEPOOL_HASH_VERSION)?,
    );
    (nc_version == pool_version && nc_hash != pool_hash).then_some(NODEPOOL_DRIFTED)
}

/// `RequirementsDrifted` when a label of the NodeClaim is no longer allowed.
#[must_use]
pub fn requirements_drift(nc: &NodeClaim, pool: &NodePool) -> Option<&'static str> {
    let labels = nc.metadata.labels.as_ref()?;
    let violated = pool.spec.template.spec.requirements.iter().any(|r| {
        let Some(value) = labels.get(&r.key) else {
            return false;
        };
        let values = r.values();
        let number = |v: &str| v.parse::<i64>().ok();
        match r.operator {
            NodeSelectorOperator::In => !values.iter().any(|v| v == value),
            NodeSelectorOperator::NotIn => values.iter().any(|v| v == value),
            NodeSelectorOperator::Exists => false,
            NodeSelectorOperator::DoesNotExist => true,
            NodeSelectorOperator::Gt => {
                match (number(value), values.first().and_then(|v| number(v))) {
                    (Some(have), Some(bound)) => have <= bound,
                    _ => true,
                }
            }
            NodeSelectorOperator::Lt => {
                match (number(value), values.first().and_then(|v| number(v))) {
                    (Some(have), Some(bound)) => have >= bound,
                    _ => true,
                }
            }
            NodeSelectorOperator::Gte => {
                match (number(value), values.first().and_then(|v| number(v))) {
                    (Some(have), Some(bound)) => have < bound,
                    _ => true,
                }
            }
            NodeSelectorOperator::Lte => {
                match (number(value), values.first().and_then(|v| number(v))) {
                    (Some(have), Some(bound)) => have > bound,
                    _ => true,
                }
            }
        }
    });
    violated.then_some(REQUIREMENTS_DRIFTED)
}

/// `InstanceTypeNotFound` when the NodeClaim (older than [`INSTANCE_TYPE_GRACE`]) names an
/// instance type `offered` lacks, or one with no offering in its zone and capacity type.
/// A NodeClaim without an instance-type label is not judged.
#[must_use]
pub fn instance_type_not_found(
    nc: &NodeClaim,
    offered: &[Arc<InstanceType>],
    now: Timestamp,
) -> Option<&'static str> {
    let created = nc.metadata.creation_timestamp.as_ref()?.0;
    if created.checked_add(INSTANCE_TYPE_GRACE).ok()? > now {
        return None;
    }
    let labels = nc.metadata.labels.as_ref()?;
    let name = labels.get(INSTANCE_TYPE)?;
    let zone = labels.get(TOPOLOGY_ZONE).map(String::as_str);
    let capacity_type = labels.get(CAPACITY_TYPE).map(String::as_str);
    let found = offered.iter().filter(|it| it.name() == name).any(|it| {
        it.offerings().iter().any(|o| {
            zone.is_none_or(|z| o.zone() == Some(z))
                && capacity_type.is_none_or(|c| o.capacity_type() == Some(c))
        })
    });
    (!found).then_some(INSTANCE_TYPE_NOT_FOUND)
}

/// The drift computable from the objects alone, in upstream's order: static, requirements,
/// then (when the pool's instance types resolved: `offered`) the instance type gone.
#[must_use]
pub fn computable(
    nc: &NodeClaim,
    pool: &NodePool,
    offered: Option<&[Arc<InstanceType>]>,
    now: Timestamp,
) -> Option<&'static str> {
    static_drift(nc, pool)
        .or_else(|| requirements_drift(nc, pool))
        .or_else(|| offered.and_then(|o| instance_type_not_found(nc, o, now)))
}

/// When the NodeClaim expires (`None`: no `expireAfter`, or `Never`).
///
/// # Errors
/// A message naming the field when `spec.expireAfter` does not parse.
pub fn expires_at(nc: &NodeClaim) -> Result<Option<Timestamp>, String> {
    let Some(after) = nc.spec.expire_after.as_ref() else {
        return Ok(None);
    };
    let Some(after) = after
        .parse()
        .map_err(|e| format!("spec.expireAfter: {e}"))?
    else {
        return Ok(None);
    };
    let Some(created) = nc.metadata.creation_timestamp.as_ref() else {
        return Ok(None);
    };
    let after = SignedDuration::try_from(after).unwrap_or(SignedDuration::MAX);
    Ok(Some(created.0.checked_add(after).unwrap_or(Timestamp::MAX)))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn nc(annotations: serde_json::Value, labels: serde_json::Value) -> NodeClaim {
        serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": "c", "annotations": annotations, "labels": labels,
                "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"nodeClassRef": {"group": "g", "kind": "k", "name": "n"}, "requirements": []}
        }))
        .unwrap()
    }

    fn pool(annotations: serde_json::Value, requirements: serde_json::Value) -> NodePool {
        serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
            "metadata": {"name": "p", "annotations": annotations},
            "spec": {"template": {"spec": {"nodeClassRef": {"group": "g", "kind": "k", "name": "n"},
                "requirements": requirements}}}
        }))
        .unwrap()
    }

    #[test]
    fn a_changed_hash_under_the_same_version_is_drift() {
        let stamped = |h: &str, v: &str| json!({NODEPOOL_HASH: h, NODEPOOL_HASH_VERSION: v});
        let p = pool(stamped("2", "v1-rs"), json!([]));
        assert_eq!(
            static_drift(&nc(stamped("1", "v1-rs"), json!({})), &p),
            Some(NODEPOOL_DRIFTED)
        );
        assert_eq!(
            static_drift(&nc(stamped("2", "v1-rs"), json!({})), &p),
            None
        );
        assert_eq!(
            static_drift(&nc(stamped("1", "v0"), json!({})), &p),
            None,
            "another version is re-stamped, not drifted"
        );
        assert_eq!(static_drift(&nc(json!({}), json!({})), &p), None);
    }

    #[test]
    fn a_label_no_longer_allowed_is_drift_but_a_missing_one_is_not() {
        let p = pool(
            json!({}),
            json!([
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["a", "b"]},
                {"key": "gen", "operator": "Gt", "values": ["3"]},
                {"key": "legacy", "operator": "DoesNotExist"}
            ]),
        );
        let labels = |it: &str, generation: &str| json!({"node.kubernetes.io/instance-type": it, "gen": generation});
        assert_eq!(
            requirements_drift(&nc(json!({}), labels("a", "4")), &p),
            None
        );
        assert_eq!(
            requirements_drift(&nc(json!({}), labels("c", "4")), &p),
            Some(REQUIREMENTS_DRIFTED)
        );
        assert_eq!(
            requirements_drift(&nc(json!({}), labels("a", "3")), &p),
            Some(REQUIREMENTS_DRIFTED)
        );
        assert_eq!(
            requirements_drift(&nc(json!({}), json!({"legacy": "x"})), &p),
            Some(REQUIREMENTS_DRIFTED)
        );
        assert_eq!(requirements_drift(&nc(json!({}), json!({})), &p), None);
    }

    #[test]
    fn an_instance_type_gone_or_without_the_zone_is_drift_after_an_hour() {
        use scheduling::fixtures::FakeInstanceType;
        use scheduling::instance_type::Offering;
        let it = |name: &str, available: bool| {
            Arc::new(
                FakeInstanceType::new(name)
                    .offering(Offering::new("on-demand", "z1", 1.0).with_available(available))
                    .build()
                    .unwrap(),
            )
        };
        let labels = |name: &str, zone: &str| json!({INSTANCE_TYPE: name, TOPOLOGY_ZONE: zone, CAPACITY_TYPE: "on-demand"});
        let later = |hours: i64| {
            Timestamp::from_second(1_767_225_600 + hours * 3600).unwrap() // 2026-01-01 + h
        };
        let offered = vec![it("md-a", true), it("md-b", false)];
        let claim = nc(json!({}), labels("md-a", "z1"));
        assert_eq!(instance_type_not_found(&claim, &offered, later(2)), None);
        assert_eq!(
            instance_type_not_found(&nc(json!({}), labels("md-b", "z1")), &offered, later(2)),
            None,
            "an offering that is unavailable (max size reached) still exists"
        );
        let gone = nc(json!({}), labels("md-c", "z1"));
        assert_eq!(
            instance_type_not_found(&gone, &offered, later(2)),
            Some(INSTANCE_TYPE_NOT_FOUND)
        );
        assert_eq!(
            instance_type_not_found(&gone, &offered, later(0)),
            None,
            "a NodeClaim younger than an hour is not judged"
        );
        assert_eq!(
            instance_type_not_found(&nc(json!({}), labels("md-a", "z2")), &offered, later(2)),
            Some(INSTANCE_TYPE_NOT_FOUND),
            "the MachineDeployment moved to another zone"
        );
        assert_eq!(
            instance_type_not_found(&nc(json!({}), json!({})), &offered, later(2)),
            None
        );
    }

    #[test]
    fn expiry_is_creation_plus_expire_after() {
        let mut c = nc(json!({}), json!({}));
        assert_eq!(expires_at(&c), Ok(None));
        c.spec.expire_after = Some(api::common::NillableDuration("1h".into()));
        assert_eq!(
            expires_at(&c).unwrap().unwrap().to_string(),
            "2026-01-01T01:00:00Z"
        );
        c.spec.expire_after = Some(api::common::NillableDuration("Never".into()));
        assert_eq!(expires_at(&c), Ok(None));
        c.spec.expire_after = Some(api::common::NillableDuration("soon".into()));
        assert!(expires_at(&c).unwrap_err().starts_with("spec.expireAfter"));
    }
}
