//! The scheduler's [`Results`] joined back to names: what provisioning would do.
//!
//! Responsibility: for each planned NodeClaim, its NodePool and NodeClass, its instance-type
//! options cheapest first (with the cheapest compatible available price of each) and, for the
//! cheapest, the offering that would be launched — zone, capacity type, price and the backing
//! MachineDeployment (`namespace/name`, from the catalogue's offering origin), and where its
//! price came from (a NodeOverlay, else the MachineDeployment's price source) — plus its pods
//! (`namespace/name`) and requests; the pods that bind to existing nodes; and every pod that
//! cannot schedule with the reason, including pods ignored by validation. NodePools dropped
//! before scheduling are listed in [`Plan::ignored_node_pools`] and named in the reasons of the
//! unschedulable pods.
//!
//! Inputs: [`Results`] and a [`PlanContext`]. Output: a [`Plan`], serializable as JSON with the
//! top-level keys `nodeClaims`, `bindings` and `unschedulable`.

use std::collections::BTreeMap;

use clusterapi::OfferingOrigin;
use scheduling::instance_type::Offering;
use scheduling::labels::WellKnownLabels;
use scheduling::pod::Pod;
use scheduling::scheduler::{DroppedPool, Results};
use serde::Serialize;

use super::pods::IgnoredPod;
use super::pools::{Catalogues, DroppedNodePool, node_class_of};

/// What the plan is built from besides the results.
#[derive(Clone, Copy, Debug)]
pub struct PlanContext<'a> {
    /// The pods the scheduler was given (to name UIDs).
    pub pods: &'a [Pod],
    /// Pending pods left out by validation.
    pub ignored_pods: &'a [IgnoredPod],
    /// NodePools left out before scheduling.
    pub dropped_pools: &'a [DroppedNodePool],
    /// NodePools the scheduler dropped (no compatible instance types).
    pub scheduler_dropped: &'a [DroppedPool],
    /// The NodePool objects (for their NodeClass).
    pub node_pools: &'a [api::NodePool],
    /// The catalogues (for the MachineDeployment behind each offering).
    pub catalogues: &'a Catalogues,
    /// The well-known labels the scheduler ran with.
    pub well_known: &'a WellKnownLabels,
    /// The NodeOverlay evaluation the NodePools' instance types were overlaid with, if any
    /// (names the overlay behind a price).
    pub overlays: Option<&'a cloudprovider::overlay::Evaluated>,
}

/// What provisioning would do.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    /// NodeClaims to create.
    pub node_claims: Vec<PlannedNodeClaim>,
    /// Pods that fit on existing nodes.
    pub bindings: Vec<Binding>,
    /// Pods that cannot schedule, with the reason.
    pub unschedulable: Vec<UnschedulablePod>,
    /// NodePools not used, with the reason (not part of the JSON document).
    #[serde(skip)]
    pub ignored_node_pools: Vec<IgnoredNodePool>,
}

/// One NodeClaim to create.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PlannedNodeClaim {
    /// The NodePool.
    pub node_pool: String,
    /// Its ClusterAPINodeClass.
    pub node_class: String,
    /// The cheapest instance type option.
    pub instance_type: String,
    /// The MachineDeployment (`namespace/name`) behind the chosen offering.
    pub machine_deployment: Option<String>,
    /// The chosen offering's zone (`None`: no zone known).
    pub zone: Option<String>,
    /// The chosen offering's capacity type.
    pub capacity_type: Option<String>,
    /// The chosen offering's price per hour (after NodeOverlays).
    pub price: Option<f64>,
    /// Where that price came from: `NodeOverlay <name>`, else the MachineDeployment's
    /// (`annotation`, `legacy annotation`, `nodeclass spec.prices[N]`, `none (0)`).
    pub price_source: Option<String>,
    /// Every option, cheapest first.
    pub instance_types: Vec<InstanceTypeOption>,
    /// The pods planned onto it (`namespace/name`), in placement order.
    pub pods: Vec<String>,
    /// Summed pod requests plus daemon overhead.
    pub requests: BTreeMap<String, String>,
}

/// One instance-type option of a planned NodeClaim.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct InstanceTypeOption {
    /// The instance type.
    pub name: String,
    /// Its cheapest available offering compatible with the NodeClaim.
    pub price: Option<f64>,
}

/// Pods that fit on an existing node.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Binding {
    /// The node (or launched NodeClaim).
    pub node: String,
    /// The pods (`namespace/name`).
    pub pods: Vec<String>,
}

/// A pod that cannot schedule.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct UnschedulablePod {
    /// `namespace/name`.
    pub pod: String,
    /// Why.
    pub reason: String,
}

/// A NodePool that was not used.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct IgnoredNodePool {
    /// The NodePool.
    pub name: String,
    /// Why.
    pub reason: String,
}

impl Plan {
    /// Joins `results` back to names.
    #[must_use]
    pub fn build(results: &Results, ctx: &PlanContext<'_>) -> Self {
        let names: BTreeMap<&str, String> = ctx.pods.iter().map(|p| (&*p.uid, p.key())).collect();
        let name_of = |uid: &str| names.get(uid).cloned().unwrap_or_else(|| uid.to_owned());
        let classes: BTreeMap<&str, &str> = ctx
            .node_pools
            .iter()
            .filter_map(|p| Some((p.metadata.name.as_deref()?, node_class_of(p)?)))
            .collect();
        let node_claims = results
            .new_node_claims
            .iter()
            .map(|claim| {
                let node_class = classes.get(&*claim.node_pool).copied().unwrap_or_default();
                let catalogue = ctx.catalogues.get(node_class).and_then(|c| c.as_ref().ok());
                let instance_types: Vec<InstanceTypeOption> = claim
                    .instance_types
                    .iter()
                    .map(|it| {
                        let price = it
                            .offerings()
                            .cheapest_compatible_price(&claim.requirements, ctx.well_known);
                        InstanceTypeOption {
                            name: it.name().to_owned(),
                            price: price.is_finite().then_some(price),
                        }
                    })
                    .collect();
                let cheapest = claim.instance_types.first();
                // The claim's instance types carry the overlaid prices; their offerings are in
                // the catalogue entry's order (overlays change prices, not offerings).
                let chosen = cheapest
                    .and_then(|it| Some((it, catalogue?.get(it.name())?)))
                    .and_then(|(it, entry)| {
                        it.offerings()
                            .iter()
                            .zip(entry.offerings())
                            .filter(|(o, _)| {
                                o.available && o.is_compatible(&claim.requirements, ctx.well_known)
                            })
                            .fold(
                                None,
                                |best: Option<(&Offering, (&Offering, &OfferingOrigin))>,
                                 (o, listed)| match best {
                                    Some((b, _)) if b.price <= o.price => best,
                                    _ => Some((o, listed)),
                                },
                            )
                    });
                let price_source = chosen.map(|(_, (listed, origin))| {
                    ctx.overlays
                        .and_then(|e| e.pool(&claim.node_pool))
                        .and_then(|p| p.price_overlay(cheapest.map_or("", |it| it.name()), listed))
                        .map_or_else(
                            || origin.price_source.to_string(),
                            |name| format!("NodeOverlay {name}"),
                        )
                });
                let chosen = chosen.map(|(o, (_, origin))| (o, origin));
                PlannedNodeClaim {
                    node_pool: claim.node_pool.to_string(),
                    node_class: node_class.to_owned(),
                    instance_type: cheapest.map(|it| it.name().to_owned()).unwrap_or_default(),
                    machine_deployment: chosen.map(|(_, origin)| origin.machine_deployment.key()),
                    zone: chosen
                        .map(|(_, origin)| origin.zone.clone())
                        .filter(|z| !z.is_empty()),
                    capacity_type: chosen.map(|(_, origin)| origin.capacity_type.clone()),
                    price: chosen.map(|(o, _)| o.price),
                    price_source,
                    instance_types,
                    pods: claim.pods.iter().map(|uid| name_of(uid)).collect(),
                    requests: claim
                        .requests
                        .iter()
                        .map(|(name, q)| (name.to_string(), q.to_string()))
                        .collect(),
                }
            })
            .collect();
        let bindings = results
            .existing_nodes
            .iter()
            .map(|b| Binding {
                node: b.node.to_string(),
                pods: b.pods.iter().map(|uid| name_of(uid)).collect(),
            })
            .collect();
        let mut ignored_node_pools: Vec<IgnoredNodePool> = ctx
            .dropped_pools
            .iter()
            .map(|d| IgnoredNodePool {
                name: d.name.clone(),
                reason: d.reason.clone(),
            })
            .collect();
        ignored_node_pools.extend(ctx.scheduler_dropped.iter().map(|d| IgnoredNodePool {
            name: d.name.to_string(),
            reason: d.reason.clone(),
        }));
        let dropped_note = if ctx.dropped_pools.is_empty() {
            String::new()
        } else {
            let list: Vec<String> = ctx
                .dropped_pools
                .iter()
                .map(|d| format!("{:?} ({})", d.name, d.reason))
                .collect();
            format!("; nodepools not considered: {}", list.join(", "))
        };
        let mut unschedulable: Vec<UnschedulablePod> = results
            .errors
            .iter()
            .map(|e| UnschedulablePod {
                pod: e.pod.clone(),
                reason: format!("{}{dropped_note}", e.message),
            })
            .collect();
        unschedulable.extend(ctx.ignored_pods.iter().map(|p| UnschedulablePod {
            pod: p.pod.clone(),
            reason: p.reason.to_string(),
        }));
        Self {
            node_claims,
            bindings,
            unschedulable,
            ignored_node_pools,
        }
    }
}

#[cfg(test)]
mod tests;
