//! `bench scheduling --overlays N`: NodeOverlays over the benchmark catalogue.
//!
//! Responsibility: generate `N` overlays — each a price adjustment on one offering (instance
//! type, capacity type, zone) of the catalogue, the first of each instance type also adding
//! an extended resource — evaluate them as the NodeOverlay controller does, and apply the
//! result to the catalogue as every instance-type query does; time both. The solve then runs
//! on the overlaid catalogue, so its figures compare with a run without overlays.
//! Inputs: the catalogue, `N`. Outputs: the overlaid catalogue and [`OverlayFigures`].

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use api::nodeoverlay::OverlayRequirement;
use api::{NodeOverlay, NodeOverlaySpec};
use cloudprovider::overlay::{Outcome, OverlayStore, PoolInput, evaluate, validate_all};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use scheduling::fixtures::{DISCOVERY_LABEL, FAKE_ZONES, fake_well_known_labels};
use scheduling::instance_type::InstanceType;
use scheduling::labels::{CAPACITY_TYPE, INSTANCE_TYPE, TOPOLOGY_ZONE};

/// What the overlays cost.
#[derive(Debug, Clone, serde::Serialize)]
pub struct OverlayFigures {
    /// How many overlays.
    pub overlays: usize,
    /// How many were applied (valid, without conflict).
    pub applied: usize,
    /// The controller's evaluation of all of them against the catalogue, seconds.
    pub evaluation_seconds: f64,
    /// One application of the evaluation to the catalogue (what each provisioning loop and
    /// launch pays), seconds.
    pub apply_seconds: f64,
    /// Instance types the overlays changed.
    pub instance_types_changed: usize,
}

fn requirement(key: &str, value: &str) -> OverlayRequirement {
    OverlayRequirement {
        key: key.into(),
        operator: api::common::NodeSelectorOperator::In,
        values: Some(vec![value.into()]),
    }
}

/// Overlay `i` of a catalogue of `types` instance types: instance type `i mod types`, then
/// capacity type and zone by `i / types`, so no two overlays select the same offering until
/// every offering has one.
fn overlay(i: usize, types: usize) -> NodeOverlay {
    let round = i / types.max(1);
    let capacity_type = if round.is_multiple_of(2) {
        "on-demand"
    } else {
        "spot"
    };
    let zone = FAKE_ZONES
        .get((round / 2) % FAKE_ZONES.len())
        .copied()
        .unwrap_or_default();
    let weight = i32::try_from(1 + round / (2 * FAKE_ZONES.len())).unwrap_or(10_000);
    let capacity = (round == 0)
        .then(|| BTreeMap::from([("example.com/fuse".to_owned(), Quantity("1".into()))]));
    NodeOverlay::new(
        &format!("overlay-{i:05}"),
        NodeOverlaySpec {
            capacity,
            price: None,
            price_adjustment: Some(format!("-{}%", i % 50 + 1)),
            requirements: vec![
                requirement(INSTANCE_TYPE, &format!("fake-it-{}", i % types.max(1))),
                requirement(CAPACITY_TYPE, capacity_type),
                requirement(TOPOLOGY_ZONE, zone),
            ],
            weight: Some(weight.min(10_000)),
        },
    )
}

/// The catalogue with `n` overlays evaluated and applied, and what that cost.
pub fn overlaid(
    instance_types: Vec<Arc<InstanceType>>,
    n: usize,
    pool: &str,
) -> anyhow::Result<(Vec<Arc<InstanceType>>, OverlayFigures)> {
    let well_known = fake_well_known_labels();
    let overlays: Vec<NodeOverlay> = (0..n).map(|i| overlay(i, instance_types.len())).collect();
    let start = Instant::now();
    let checked = validate_all(&overlays, &well_known);
    let pools = [PoolInput {
        name: pool.to_owned(),
        labels: BTreeMap::from([(DISCOVERY_LABEL.0.to_owned(), DISCOVERY_LABEL.1.to_owned())]),
        instance_types: instance_types.clone(),
    }];
    let evaluation = evaluate(&checked, &pools, &well_known);
    let evaluation_seconds = start.elapsed().as_secs_f64();
    let applied = evaluation
        .outcomes
        .values()
        .filter(|o| **o == Outcome::Applied)
        .count();
    let store = OverlayStore::new();
    store.swap(evaluation.evaluated);
    let start = Instant::now();
    let out = store
        .apply(pool, instance_types)
        .context("applying the overlays")?;
    let apply_seconds = start.elapsed().as_secs_f64();
    let instance_types_changed = out
        .iter()
        .filter(|it| it.overlay_marks() != Default::default())
        .count();
    Ok((
        out,
        OverlayFigures {
            overlays: n,
            applied,
            evaluation_seconds,
            apply_seconds,
            instance_types_changed,
        },
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use scheduling::fixtures::fake_instance_types;

    #[test]
    fn generated_overlays_are_valid_free_of_conflicts_and_change_the_catalogue() {
        let its = fake_instance_types(10).unwrap();
        let (out, figures) = overlaid(its.clone(), 35, "benchmark").unwrap();
        assert_eq!((figures.overlays, figures.applied), (35, 35));
        assert_eq!(figures.instance_types_changed, 10);
        assert_eq!(out.len(), its.len());
        let cheaper = out
            .iter()
            .zip(&its)
            .filter(|(a, b)| {
                a.offerings().iter().map(|o| o.price).sum::<f64>()
                    < b.offerings().iter().map(|o| o.price).sum::<f64>()
            })
            .count();
        assert_eq!(cheaper, 10, "every type got a discount");
    }
}
