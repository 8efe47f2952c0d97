//! NodeClaim → scheduling values, and the "cheapest compatible offering" choice.
//!
//! Responsibility: read a NodeClaim's `spec.requirements` and `spec.resources.requests` into
//! [`Requirements`] and [`Resources`], and pick, among instance types, the cheapest available
//! offering that satisfies both (ties: instance type name, then offering order), which is what
//! every provider's Create needs. Bad input is a [`CloudProviderError::Create`], never a panic.

use std::sync::Arc;

use api::NodeClaim;
use api::common::NodeSelectorOperator;
use scheduling::instance_type::{InstanceType, PriceRank};
use scheduling::labels::WellKnownLabels;
use scheduling::requirements::{Operator, Requirements, SelectorRequirement};
use scheduling::resources::Resources;

use crate::CloudProviderError;

pub(crate) fn operator(op: NodeSelectorOperator) -> Operator {
    match op {
        NodeSelectorOperator::In => Operator::In,
        NodeSelectorOperator::NotIn => Operator::NotIn,
        NodeSelectorOperator::Exists => Operator::Exists,
        NodeSelectorOperator::DoesNotExist => Operator::DoesNotExist,
        NodeSelectorOperator::Gt => Operator::Gt,
        NodeSelectorOperator::Lt => Operator::Lt,
        NodeSelectorOperator::Gte => Operator::Gte,
        NodeSelectorOperator::Lte => Operator::Lte,
    }
}

fn invalid(message: String) -> CloudProviderError {
    CloudProviderError::Create {
        reason: "InvalidNodeClaim".into(),
        message,
    }
}

/// The NodeClaim's `spec.requirements` (minValues included).
///
/// # Errors
/// [`CloudProviderError::Create`] (`InvalidNodeClaim`) for a malformed numeric requirement.
pub fn requirements_of(node_claim: &NodeClaim) -> Result<Requirements, CloudProviderError> {
    let entries: Vec<SelectorRequirement> = node_claim
        .spec
        .requirements
        .iter()
        .map(|r| SelectorRequirement {
            key: r.key.clone(),
            operator: operator(r.operator),
            values: r.values().to_vec(),
            min_values: r.min_values.and_then(|m| usize::try_from(m).ok()),
        })
        .collect();
    Requirements::from_selector(&entries).map_err(|e| invalid(format!("spec.requirements: {e}")))
}

/// The NodeClaim's `spec.resources.requests` (empty when unset).
///
/// # Errors
/// [`CloudProviderError::Create`] (`InvalidNodeClaim`) for an unparsable quantity.
pub fn requests_of(node_claim: &NodeClaim) -> Result<Resources, CloudProviderError> {
    let Some(requests) = node_claim
        .spec
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
    else {
        return Ok(Resources::new());
    };
    Resources::parse(requests.iter().map(|(k, v)| (k.as_str(), v.0.as_str())))
        .map_err(|e| invalid(format!("spec.resources.requests: {e}")))
}

/// A launchable choice: instance type `instance_type` (index into the input) through its
/// offering `offering` (index into its offerings), at `price` (0 when unpriced).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Choice {
    /// Index of the instance type.
    pub instance_type: usize,
    /// Index of the offering within it.
    pub offering: usize,
    /// The offering's price.
    pub price: f64,
    /// Where it stands cheapest-first (unpriced after every priced offering).
    pub rank: PriceRank,
}

/// Every available offering that satisfies `requirements` and whose instance type fits
/// `requests`, cheapest first by [`PriceRank`] (unpriced offerings after every priced one;
/// ties: instance type name, then offering order).
#[must_use]
pub fn compatible_offerings(
    instance_types: &[Arc<InstanceType>],
    requirements: &Requirements,
    requests: &Resources,
    well_known: &WellKnownLabels,
) -> Vec<Choice> {
    let mut choices = Vec::new();
    for (i, it) in instance_types.iter().enumerate() {
        // Every key both define must have a common value. A key only the NodeClaim has (a
        // NodePool template's custom label) does not make the instance type unfit: the
        // scheduler already placed the pods with it, and the label goes on the node.
        if it.requirements().intersects(requirements).is_err() || !it.fits(requests) {
            continue;
        }
        for (o, offering) in it.offerings().iter().enumerate() {
            if offering.available && offering.is_compatible(requirements, well_known) {
                choices.push(Choice {
                    instance_type: i,
                    offering: o,
                    price: offering.price,
                    rank: offering.rank(),
                });
            }
        }
    }
    choices.sort_by(|a, b| {
        a.rank
            .cmp(&b.rank)
            .then_with(|| {
                let name = |c: &Choice| instance_types.get(c.instance_type).map(|it| it.name());
                name(a).cmp(&name(b))
            })
            .then(a.offering.cmp(&b.offering))
    });
    choices
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use scheduling::fixtures::FakeInstanceType;
    use scheduling::instance_type::Offering;
    use scheduling::requirements::Requirement;

    #[test]
    fn a_node_claims_own_labels_need_not_be_defined_by_the_instance_type() {
        let it = Arc::new(
            FakeInstanceType::new("m")
                .offering(Offering::new("on-demand", "z1", 0.2))
                .build()
                .unwrap(),
        );
        let wk = WellKnownLabels::default();
        let mut reqs = Requirements::new();
        reqs.add(Requirement::in_values("team", ["blue"]));
        let choices =
            compatible_offerings(std::slice::from_ref(&it), &reqs, &Resources::new(), &wk);
        assert_eq!(
            choices.len(),
            1,
            "a NodePool template label does not stop the launch"
        );
        reqs.add(Requirement::in_values(
            scheduling::labels::INSTANCE_TYPE,
            ["other"],
        ));
        assert!(compatible_offerings(&[it], &reqs, &Resources::new(), &wk).is_empty());
    }

    #[test]
    fn a_launch_takes_a_priced_offering_before_an_unpriced_one() {
        let free = Arc::new(
            FakeInstanceType::new("a-free")
                .offering(Offering::unpriced("on-demand", "z1"))
                .build()
                .unwrap(),
        );
        let priced = Arc::new(
            FakeInstanceType::new("b-priced")
                .offering(Offering::new("on-demand", "z1", 3.0))
                .build()
                .unwrap(),
        );
        let wk = WellKnownLabels::default();
        let choices = compatible_offerings(
            &[free, priced],
            &Requirements::new(),
            &Resources::new(),
            &wk,
        );
        let order: Vec<usize> = choices.iter().map(|c| c.instance_type).collect();
        assert_eq!(order, [1, 0], "unpriced is not cheaper than 3.0");
    }
}
