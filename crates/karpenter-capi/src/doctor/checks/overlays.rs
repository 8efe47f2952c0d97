//! NodeOverlays in `doctor`: which prices they change, and the ones that change nothing.
//!
//! Responsibility: with the `NodeOverlay` gate on, evaluate every NodeOverlay against every
//! NodePool of ours exactly as the controller does ([`cloudprovider::overlay::evaluate`] over
//! the catalogue's instance types) and record, per NodePool, each offering whose price an
//! overlay sets: the MachineDeployment behind it, its listed price and where that came from,
//! the effective price and the overlay. Findings: an overlay invalid or in conflict
//! (`nodeoverlay-not-applied`), overlays present while the gate is off
//! (`nodeoverlay-gate-off`), NodeOverlays that could not be listed (`nodeoverlays-not-checked`).
//! Inputs: the NodeOverlays, the gate, the NodePools, the catalogues. Outputs: findings and
//! [`OverlaidPrice`]s on the NodePool reports.

use std::collections::BTreeMap;

use api::{NodeOverlay, NodePool};
use cloudprovider::overlay::{Outcome, OverlayStore, PoolInput, evaluate, validate_all};
use controllers::provisioning::inputs;
use scheduling::labels::WellKnownLabels;

use super::super::report::{Finding, NodePoolReport, OverlaidPrice, Severity};

/// Adds the NodeOverlay findings and the overlaid prices of `reports` (one per pool, by name).
pub(super) fn node_overlays(
    overlays: &Result<Vec<NodeOverlay>, String>,
    gate: bool,
    pools: &[NodePool],
    catalogues: &inputs::Catalogues,
    reports: &mut [NodePoolReport],
    findings: &mut Vec<Finding>,
) {
    let overlays = match overlays {
        Ok(o) if o.is_empty() => return,
        Ok(o) => o,
        Err(e) => {
            findings.push(Finding::new(
                Severity::Info,
                "nodeoverlays-not-checked",
                "NodeOverlays",
                format!("NodeOverlays were not checked: {e}"),
            ));
            return;
        }
    };
    if !gate {
        findings.push(
            Finding::new(
                Severity::Warning,
                "nodeoverlay-gate-off",
                "NodeOverlays",
                format!(
                    "{} NodeOverlay(s) exist, but the NodeOverlay feature gate is off: they change no price or capacity",
                    overlays.len()
                ),
            )
            .hint("run with --feature-gates NodeOverlay=true (chart: settings.featureGates.nodeOverlay), or delete them"),
        );
        return;
    }
    let well_known = WellKnownLabels::cluster_api();
    let checked = validate_all(overlays, &well_known);
    // Our NodePools with a usable catalogue: (pool name, its catalogue).
    let ours: Vec<(&NodePool, &clusterapi::Catalogue)> = pools
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| {
            let class = inputs::node_class_of(p)?;
            Some((p, catalogues.get(class)?.as_ref().ok()?))
        })
        .collect();
    let pool_inputs: Vec<PoolInput> = ours
        .iter()
        .map(|(p, catalogue)| PoolInput::of(p, catalogue.instance_types()))
        .collect();
    let evaluation = evaluate(&checked, &pool_inputs, &well_known);
    for (name, outcome) in &evaluation.outcomes {
        let message = match outcome {
            Outcome::Applied => continue,
            Outcome::Invalid(m) | Outcome::Conflict(m) => m,
        };
        findings.push(Finding::new(
            Severity::Warning,
            "nodeoverlay-not-applied",
            format!("NodeOverlay {name}"),
            format!("applied nowhere: {message}"),
        ));
    }
    let store = OverlayStore::new();
    store.swap(evaluation.evaluated.clone());
    let by_name: BTreeMap<String, usize> = reports
        .iter()
        .enumerate()
        .map(|(i, r)| (r.name.clone(), i))
        .collect();
    for (pool, catalogue) in ours {
        let name = pool.metadata.name.clone().unwrap_or_default();
        let (Some(&index), Some(updates)) = (by_name.get(&name), evaluation.evaluated.pool(&name))
        else {
            continue;
        };
        let Ok(overlaid) = store.apply(&name, catalogue.instance_types()) else {
            continue;
        };
        let mut prices = Vec::new();
        for (entry, it) in catalogue.entries().iter().zip(&overlaid) {
            for ((listed, origin), effective) in entry.offerings().zip(it.offerings().iter()) {
                let Some(overlay) = updates.price_overlay(entry.name(), listed) else {
                    continue;
                };
                prices.push(OverlaidPrice {
                    instance_type: entry.name().to_owned(),
                    machine_deployment: origin.machine_deployment.to_string(),
                    zone: origin.zone.clone(),
                    capacity_type: origin.capacity_type.clone(),
                    listed: listed.price,
                    listed_source: origin.price_source.to_string(),
                    price: effective.price,
                    overlay: overlay.to_owned(),
                });
            }
        }
        if let Some(report) = reports.get_mut(index) {
            report.overlaid_prices = prices;
        }
    }
}
