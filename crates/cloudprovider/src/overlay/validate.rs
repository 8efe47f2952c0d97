//! Runtime validation of a NodeOverlay: what the API server's schema cannot check.
//!
//! Responsibility: turn a `NodeOverlay` into an [`Overlay`] the evaluation can use, or say
//! every problem at once (joined with "; ", as upstream does): each requirement through the
//! same validation a NodePool's requirements get (operator, restricted labels, known values,
//! key and value syntax, single integer for `Gt`/`Lt`/`Gte`/`Lte`), `NotIn` without values,
//! `price` and `priceAdjustment` both set or malformed, a capacity naming a resource an overlay
//! may not change (cpu, memory, ephemeral-storage, pods) or an unparsable quantity.
//! Inputs: a `NodeOverlay`, the well-known labels. Outputs: [`Overlay`] or the message.

use std::sync::Arc;

use api::NodeOverlay;
use api::common::NodeSelectorOperator;
use scheduling::labels::WellKnownLabels;
use scheduling::requirements::{Requirements, SelectorRequirement, validate_requirement};
use scheduling::resources::Resources;

use super::price::PriceChange;
use crate::convert::operator;

/// Resources an overlay may not set: it only adds extended resources.
pub const RESTRICTED_CAPACITY: [&str; 4] = ["cpu", "memory", "ephemeral-storage", "pods"];

/// A NodeOverlay that passed runtime validation.
#[derive(Debug, Clone)]
pub struct Overlay {
    /// `metadata.name`.
    pub name: Arc<str>,
    /// `spec.weight` (0 when unset).
    pub weight: i32,
    /// `spec.requirements`.
    pub requirements: Requirements,
    /// `spec.price` or `spec.priceAdjustment`.
    pub price: Option<PriceChange>,
    /// `spec.capacity` (extended resources only).
    pub capacity: Resources,
}

/// Validates `overlay`.
///
/// # Errors
/// Every overlay validated, by name: what [`super::evaluate`] takes.
pub fn validate_all<'a>(
    overlays: impl IntoIterator<Item = &'a NodeOverlay>,
    well_known: &WellKnownLabels,
) -> Vec<(String, Result<Overlay, String>)> {
    overlays
        .into_iter()
        .map(|o| {
            (
                o.metadata.name.clone().unwrap_or_default(),
                validate(o, well_known),
            )
        })
        .collect()
}

/// Every problem found, joined with "; ", each naming its field.
pub fn validate(overlay: &NodeOverlay, well_known: &WellKnownLabels) -> Result<Overlay, String> {
    let spec = &overlay.spec;
    let mut errors = Vec::new();
    let mut entries = Vec::new();
    for (i, r) in spec.requirements.iter().enumerate() {
        let op = operator(r.operator);
        if let Err(e) = validate_requirement(&r.key, op.as_str(), r.values(), None, well_known) {
            errors.push(format!("spec.requirements[{i}]: {e}"));
        }
        if r.operator == NodeSelectorOperator::NotIn && r.values().is_empty() {
            errors.push(format!(
                "spec.requirements[{i}]: key {:?} with operator NotIn must have a value defined",
                r.key
            ));
        }
        entries.push(SelectorRequirement {
            key: r.key.clone(),
            operator: op,
            values: r.values().to_vec(),
            min_values: None,
        });
    }
    let requirements = match Requirements::from_selector(&entries) {
        Ok(r) => r,
        Err(e) => {
            errors.push(format!("spec.requirements: {e}"));
            Requirements::new()
        }
    };
    let price = match (&spec.price, &spec.price_adjustment) {
        (Some(_), Some(_)) => {
            errors.push("cannot set both spec.price and spec.priceAdjustment".to_owned());
            None
        }
        (Some(p), None) => PriceChange::price(p)
            .map_err(|e| errors.push(format!("spec.price: {e}")))
            .ok(),
        (None, Some(a)) => PriceChange::adjustment(a)
            .map_err(|e| errors.push(format!("spec.priceAdjustment: {e}")))
            .ok(),
        (None, None) => None,
    };
    let mut capacity = Resources::new();
    if let Some(map) = &spec.capacity {
        for name in map
            .keys()
            .filter(|n| RESTRICTED_CAPACITY.contains(&n.as_str()))
        {
            errors.push(format!(
                "spec.capacity: invalid capacity: {name} in resource, restricted (an overlay \
                 only adds extended resources)"
            ));
        }
        match Resources::parse(
            map.iter()
                .filter(|(n, _)| !RESTRICTED_CAPACITY.contains(&n.as_str()))
                .map(|(n, q)| (n.as_str(), q.0.as_str())),
        ) {
            Ok(r) => capacity = r,
            Err(e) => errors.push(format!("spec.capacity: {e}")),
        }
    }
    if !errors.is_empty() {
        return Err(errors.join("; "));
    }
    Ok(Overlay {
        name: overlay.metadata.name.as_deref().unwrap_or_default().into(),
        weight: spec.weight(),
        requirements,
        price,
        capacity,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use api::NodeOverlaySpec;
    use api::nodeoverlay::OverlayRequirement;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    fn overlay(requirements: Vec<OverlayRequirement>) -> NodeOverlay {
        NodeOverlay::new(
            "o",
            NodeOverlaySpec {
                capacity: None,
                price: None,
                price_adjustment: None,
                requirements,
                weight: None,
            },
        )
    }

    fn req(key: &str, op: NodeSelectorOperator, values: &[&str]) -> OverlayRequirement {
        OverlayRequirement {
            key: key.into(),
            operator: op,
            values: Some(values.iter().map(|v| (*v).to_owned()).collect()),
        }
    }

    fn check(o: &NodeOverlay) -> Result<Overlay, String> {
        validate(o, &WellKnownLabels::default())
    }

    #[test]
    fn a_plain_overlay_passes_with_its_weight_price_and_capacity() {
        let mut o = overlay(vec![req(
            "node.kubernetes.io/instance-type",
            NodeSelectorOperator::In,
            &["m5.large"],
        )]);
        o.spec.weight = Some(10);
        o.spec.price_adjustment = Some("-10%".into());
        o.spec.capacity = Some([("smarter-devices/fuse".to_owned(), Quantity("2".into()))].into());
        let v = check(&o).unwrap();
        assert_eq!((&*v.name, v.weight), ("o", 10));
        assert_eq!(v.price, Some(PriceChange::Percent(-10.0)));
        assert_eq!(v.capacity.to_string(), "{smarter-devices/fuse: 2}");
        assert_eq!(v.requirements.len(), 1);
        assert_eq!(
            check(&overlay(vec![])).unwrap().weight,
            0,
            "unset weight is 0"
        );
    }

    #[test]
    fn karpenter_sh_nodepool_and_capacity_type_are_allowed_other_karpenter_keys_are_not() {
        let ok = overlay(vec![
            req("karpenter.sh/nodepool", NodeSelectorOperator::In, &["a"]),
            req(
                "karpenter.sh/capacity-type",
                NodeSelectorOperator::In,
                &["spot"],
            ),
        ]);
        check(&ok).unwrap();
        let bad = overlay(vec![req(
            "karpenter.sh/custom",
            NodeSelectorOperator::In,
            &["x"],
        )]);
        let e = check(&bad).unwrap_err();
        assert!(
            e.contains("spec.requirements[0]") && e.contains("restricted"),
            "{e}"
        );
        let host = overlay(vec![req(
            "kubernetes.io/hostname",
            NodeSelectorOperator::In,
            &["n"],
        )]);
        assert!(check(&host).unwrap_err().contains("restricted"));
    }

    #[test]
    fn malformed_requirements_fail_each_named() {
        let long = format!("example.com/{}", "a".repeat(64));
        let o = overlay(vec![
            req(&long, NodeSelectorOperator::Exists, &[]),
            req("Test.com/test", NodeSelectorOperator::Exists, &[]),
            req("a", NodeSelectorOperator::NotIn, &[]),
            req("b", NodeSelectorOperator::In, &[]),
            req("c", NodeSelectorOperator::Gt, &["x"]),
        ]);
        let e = check(&o).unwrap_err();
        for i in 0..5 {
            assert!(e.contains(&format!("spec.requirements[{i}]")), "{i}: {e}");
        }
        assert!(e.contains("NotIn must have a value"), "{e}");
    }

    #[test]
    fn price_fields_are_checked() {
        let mut both = overlay(vec![]);
        both.spec.price = Some("1".into());
        both.spec.price_adjustment = Some("+1".into());
        assert!(check(&both).unwrap_err().contains("cannot set both"));
        let mut unsigned = overlay(vec![]);
        unsigned.spec.price_adjustment = Some("10%".into());
        assert!(
            check(&unsigned)
                .unwrap_err()
                .contains("spec.priceAdjustment")
        );
        let mut bad = overlay(vec![]);
        bad.spec.price = Some("-1".into());
        assert!(check(&bad).unwrap_err().contains("spec.price:"));
        let mut set = overlay(vec![]);
        set.spec.price = Some("80.0".into());
        assert_eq!(check(&set).unwrap().price, Some(PriceChange::Set(80.0)));
    }

    #[test]
    fn capacity_may_not_name_standard_resources_or_bad_quantities() {
        for name in RESTRICTED_CAPACITY {
            let mut o = overlay(vec![]);
            o.spec.capacity = Some([(name.to_owned(), Quantity("1".into()))].into());
            let e = check(&o).unwrap_err();
            assert!(e.contains(&format!("invalid capacity: {name}")), "{e}");
        }
        let mut o = overlay(vec![]);
        o.spec.capacity = Some([("example.com/gpu".to_owned(), Quantity("lots".into()))].into());
        assert!(check(&o).unwrap_err().contains("spec.capacity"));
    }
}
