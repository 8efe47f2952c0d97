//! Which NodeOverlays apply where, and which conflict: one pass over every overlay, NodePool and
//! instance type, as upstream's NodeOverlay controller makes it.
//!
//! Responsibility:
//! - order the valid overlays by weight (highest first), equal weights by name, the name later
//!   in the alphabet first (upstream's order);
//! - match: an overlay selects an instance type of a NodePool when the pool's side —
//!   `karpenter.sh/nodepool In [pool]`, the pool template's labels and the instance type's own
//!   requirements — is strictly compatible with the overlay's requirements (a key the overlay
//!   requires that the pool's side lacks fails unless the overlay's operator is negative), and
//!   then each offering (zone, capacity type) whose requirements intersect the overlay's;
//! - conflicts: an overlay conflicts when an overlay of the **same weight** already set the
//!   price of one of its offerings (price and priceAdjustment are one slot), or one of the same
//!   capacity resources of one of its instance types, in any NodePool. A conflicting overlay is
//!   applied nowhere (no partial application). Unlike upstream, capacity conflicts are found
//!   against every same-weight overlay that set the resource, not only the last one recorded;
//! - the winners: per offering the highest-weight price (no composition); per instance type and
//!   resource the highest-weight quantity, so capacities of several overlays merge.
//!
//! Inputs: overlays (valid or not), the NodePools with their instance types, the well-known
//! labels. Outputs: [`Evaluation`]: each overlay's [`Outcome`] and the [`Evaluated`] updates
//! that [`super::store::OverlayStore`] applies.

use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use scheduling::instance_type::InstanceType;
use scheduling::labels::{NODE_POOL, WellKnownLabels};
use scheduling::requirements::Requirements;
use scheduling::resources::{ResourceName, Resources};

use super::price::PriceChange;
use super::validate::Overlay;

/// One NodePool as the evaluation sees it.
#[derive(Debug, Clone)]
pub struct PoolInput {
    /// The NodePool's name.
    pub name: String,
    /// `spec.template.metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// The instance types the (undecorated) provider gives the pool.
    pub instance_types: Vec<Arc<InstanceType>>,
}

impl PoolInput {
    /// The evaluation's view of `pool` with these instance types.
    #[must_use]
    pub fn of(pool: &api::NodePool, instance_types: Vec<Arc<InstanceType>>) -> Self {
        Self {
            name: pool.metadata.name.clone().unwrap_or_default(),
            labels: pool
                .spec
                .template
                .metadata
                .as_ref()
                .and_then(|m| m.labels.clone())
                .unwrap_or_default(),
            instance_types,
        }
    }
}

/// What became of one overlay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Valid and free of conflicts: applied wherever it matches (perhaps nowhere).
    Applied,
    /// Runtime validation failed (the message names the fields).
    Invalid(String),
    /// An overlay of the same weight sets the same price or capacity on an instance type both
    /// select; the message names it.
    Conflict(String),
}

/// The price an overlay gives one offering.
#[derive(Debug, Clone, PartialEq)]
pub struct PriceUpdate {
    /// How the price changes.
    pub change: PriceChange,
    /// The overlay it comes from.
    pub overlay: Arc<str>,
}

/// What the overlays change on one instance type of one NodePool.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InstanceTypeUpdates {
    /// Per offering (keyed by its requirements as displayed), the winning price.
    pub prices: HashMap<String, PriceUpdate>,
    /// The added or replaced extended resources.
    pub capacity: Resources,
    /// Per resource in [`Self::capacity`], the overlay it comes from.
    pub capacity_from: BTreeMap<ResourceName, Arc<str>>,
}

/// The updates of one NodePool.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PoolUpdates {
    /// Every instance type evaluated, with a fingerprint of its offerings: one missing or
    /// changed since means the evaluation is stale for it.
    pub(crate) seen: HashMap<Arc<str>, u64>,
    /// The instance types some overlay changes.
    pub(crate) updates: HashMap<Arc<str>, InstanceTypeUpdates>,
}

impl PoolUpdates {
    /// The updates of the instance type `name`, if any overlay changes it.
    #[must_use]
    pub fn updates(&self, name: &str) -> Option<&InstanceTypeUpdates> {
        self.updates.get(name)
    }

    /// The overlay that sets the price of `offering` of instance type `instance_type` (as
    /// applying does: a relative change leaves an unpriced offering alone), if any.
    #[must_use]
    pub fn price_overlay(
        &self,
        instance_type: &str,
        offering: &scheduling::instance_type::Offering,
    ) -> Option<&str> {
        let update = self
            .updates(instance_type)?
            .prices
            .get(&offering_key(&offering.requirements))?;
        (offering.priced || !update.change.is_relative()).then_some(&*update.overlay)
    }

    /// The price `offering` of `instance_type` has once the overlays apply, and the overlay
    /// that set it (as applying does); `None` when no overlay changes its price.
    #[must_use]
    pub fn overlaid_price(
        &self,
        instance_type: &str,
        offering: &scheduling::instance_type::Offering,
    ) -> Option<(f64, &str)> {
        let update = self
            .updates(instance_type)?
            .prices
            .get(&offering_key(&offering.requirements))?;
        (offering.priced || !update.change.is_relative())
            .then(|| (update.change.apply(offering.price), &*update.overlay))
    }
}

/// The result the store serves: per evaluated NodePool, its updates.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Evaluated {
    pub(crate) pools: HashMap<String, PoolUpdates>,
}

impl Evaluated {
    /// The updates of `pool`; `None` when the pool was not evaluated.
    #[must_use]
    pub fn pool(&self, pool: &str) -> Option<&PoolUpdates> {
        self.pools.get(pool)
    }
}

/// Every overlay's outcome, and the updates of every evaluated NodePool.
#[derive(Debug, Clone, Default)]
pub struct Evaluation {
    /// By overlay name.
    pub outcomes: BTreeMap<String, Outcome>,
    /// What the store serves.
    pub evaluated: Evaluated,
}

/// The key an offering's price is recorded under.
pub(crate) fn offering_key(requirements: &Requirements) -> String {
    requirements.to_string()
}

/// The fingerprint of an instance type's offerings.
pub(crate) fn fingerprint(it: &InstanceType) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for o in it.offerings().iter() {
        offering_key(&o.requirements).hash(&mut h);
    }
    h.finish()
}

/// Where one overlay matches: per (pool, instance type), the keys of its matching offerings.
struct Match {
    pool: usize,
    instance_type: Arc<str>,
    offerings: Vec<String>,
}

/// Recording state of one (pool, instance type) during the pass.
#[derive(Default)]
struct Slots {
    /// Per offering key, the weight of the last overlay that set its price.
    price_weight: HashMap<String, i32>,
    /// Per resource, the weight of the last overlay that set it.
    capacity_weight: HashMap<ResourceName, (i32, Arc<str>)>,
    /// Per offering key, the last overlay that set its price.
    price_by: HashMap<String, Arc<str>>,
}

/// Evaluates `overlays` (each a name with its validation result) against `pools`.
#[must_use]
pub fn evaluate(
    overlays: &[(String, Result<Overlay, String>)],
    pools: &[PoolInput],
    well_known: &WellKnownLabels,
) -> Evaluation {
    let mut outcomes = BTreeMap::new();
    let mut valid: Vec<&Overlay> = Vec::new();
    for (name, result) in overlays {
        match result {
            Ok(o) => valid.push(o),
            Err(e) => {
                outcomes.insert(name.clone(), Outcome::Invalid(e.clone()));
            }
        }
    }
    valid.sort_by(|a, b| b.weight.cmp(&a.weight).then_with(|| b.name.cmp(&a.name)));

    // The pool side of every (pool, instance type), built once.
    let sides: Vec<Vec<Requirements>> = pools
        .iter()
        .map(|p| {
            let base = Requirements::from_labels(
                std::iter::once((NODE_POOL, p.name.as_str()))
                    .chain(p.labels.iter().map(|(k, v)| (k.as_str(), v.as_str()))),
            );
            p.instance_types
                .iter()
                .map(|it| {
                    let mut side = base.clone();
                    side.add_all(it.requirements());
                    side
                })
                .collect()
        })
        .collect();

    let mut evaluated = Evaluated::default();
    for p in pools {
        let pool = evaluated.pools.entry(p.name.clone()).or_default();
        for it in &p.instance_types {
            pool.seen.insert(it.name_arc().clone(), fingerprint(it));
        }
    }
    let mut slots: HashMap<(usize, Arc<str>), Slots> = HashMap::new();

    for overlay in valid {
        let matches = matches_of(overlay, pools, &sides, well_known);
        if let Some(other) = conflict(overlay, &matches, &slots) {
            outcomes.insert(
                overlay.name.to_string(),
                Outcome::Conflict(format!(
                    "conflict with another overlay: {other} has the same weight ({}) and sets the \
                     same {} on an instance type both select",
                    overlay.weight,
                    if overlay.price.is_some() && !overlay.capacity.is_empty() {
                        "price or capacity"
                    } else if overlay.price.is_some() {
                        "price"
                    } else {
                        "capacity"
                    }
                )),
            );
            continue;
        }
        for m in &matches {
            let Some(pool) = pools.get(m.pool) else {
                continue;
            };
            let s = slots.entry((m.pool, m.instance_type.clone())).or_default();
            let updates = evaluated
                .pools
                .entry(pool.name.clone())
                .or_default()
                .updates
                .entry(m.instance_type.clone())
                .or_default();
            if let Some(change) = overlay.price {
                for key in &m.offerings {
                    s.price_weight.insert(key.clone(), overlay.weight);
                    s.price_by.insert(key.clone(), overlay.name.clone());
                    updates
                        .prices
                        .entry(key.clone())
                        .or_insert_with(|| PriceUpdate {
                            change,
                            overlay: overlay.name.clone(),
                        });
                }
            }
            for (name, quantity) in &overlay.capacity {
                s.capacity_weight
                    .insert(name.clone(), (overlay.weight, overlay.name.clone()));
                if updates.capacity.get(name).is_none() {
                    updates.capacity.insert(name.clone(), quantity);
                    updates
                        .capacity_from
                        .insert(name.clone(), overlay.name.clone());
                }
            }
        }
        outcomes.insert(overlay.name.to_string(), Outcome::Applied);
    }
    for pool in evaluated.pools.values_mut() {
        pool.updates
            .retain(|_, u| !u.prices.is_empty() || !u.capacity.is_empty());
    }
    Evaluation {
        outcomes,
        evaluated,
    }
}

fn matches_of(
    overlay: &Overlay,
    pools: &[PoolInput],
    sides: &[Vec<Requirements>],
    well_known: &WellKnownLabels,
) -> Vec<Match> {
    let mut out = Vec::new();
    for (pi, (pool, pool_sides)) in pools.iter().zip(sides).enumerate() {
        for (it, side) in pool.instance_types.iter().zip(pool_sides) {
            if !side.is_compatible_strict(&overlay.requirements) {
                continue;
            }
            let offerings: Vec<String> = it
                .offerings()
                .iter()
                .filter(|o| {
                    overlay
                        .requirements
                        .is_compatible(&o.requirements, well_known)
                })
                .map(|o| offering_key(&o.requirements))
                .collect();
            if !offerings.is_empty() {
                out.push(Match {
                    pool: pi,
                    instance_type: it.name_arc().clone(),
                    offerings,
                });
            }
        }
    }
    out
}

/// The same-weight overlay `overlay` conflicts with, if any.
fn conflict(
    overlay: &Overlay,
    matches: &[Match],
    slots: &HashMap<(usize, Arc<str>), Slots>,
) -> Option<Arc<str>> {
    for m in matches {
        let Some(s) = slots.get(&(m.pool, m.instance_type.clone())) else {
            continue;
        };
        if overlay.price.is_some() {
            for key in &m.offerings {
                if s.price_weight.get(key) == Some(&overlay.weight) {
                    return s.price_by.get(key).cloned();
                }
            }
        }
        for name in overlay.capacity.names() {
            if let Some((w, by)) = s.capacity_weight.get(name)
                && *w == overlay.weight
            {
                return Some(by.clone());
            }
        }
    }
    None
}
