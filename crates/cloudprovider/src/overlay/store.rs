//! The NodeOverlay store: the last evaluation, applied to the instance types a provider gives.
//!
//! Responsibility: hold the latest [`Evaluated`] (swapped whole, so a reader sees one
//! evaluation or the next, never a mix) and apply it to a NodePool's instance types:
//! - an offering with a recorded price gets it, computed from the provider's **current** price
//!   (so a price annotation changed since still counts). An adjustment needs a known price: an
//!   unpriced offering stays unpriced (ranked after every priced one) rather than being given
//!   a price made up from nothing; an absolute `price` prices it;
//! - the recorded extended resources are added to the capacity (replacing a quantity of the
//!   same name the provider reported);
//! - a changed instance type is rebuilt (so its allocatable follows) and carries
//!   [`OverlayMarks`]; an unchanged one is passed through as is;
//! - a NodePool not evaluated yet is an error ([`Unevaluated`]): until the first evaluation
//!   nothing launches at prices overlays would change;
//! - an instance type the evaluation did not see (a MachineDeployment added since) is passed
//!   through unchanged and the store is marked stale, so the controller evaluates again.
//!
//! Inputs: evaluations, instance types. Outputs: overlaid instance types.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use scheduling::instance_type::{InstanceType, OverlayMarks};

use super::evaluate::{Evaluated, PoolUpdates, fingerprint, offering_key};

/// A NodePool the store has no evaluation for (yet).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("NodeOverlays are not evaluated for NodePool {0} yet")]
pub struct Unevaluated(pub String);

/// The shared store: written by the NodeOverlay controller, read by every instance-type query.
#[derive(Debug, Default)]
pub struct OverlayStore {
    current: RwLock<Option<Arc<Evaluated>>>,
    stale: AtomicBool,
}

impl OverlayStore {
    /// An empty store: every NodePool is unevaluated.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Replaces the evaluation and clears the stale mark.
    pub fn swap(&self, evaluated: Evaluated) {
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = Some(Arc::new(evaluated));
        self.stale.store(false, Ordering::Release);
    }

    /// The current evaluation, if any.
    #[must_use]
    pub fn current(&self) -> Option<Arc<Evaluated>> {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Whether an instance type the evaluation did not see was asked for since the last swap;
    /// clears the mark.
    pub fn take_stale(&self) -> bool {
        self.stale.swap(false, Ordering::AcqRel)
    }

    /// `instance_types` of `pool` with the overlays applied, in the same order.
    ///
    /// # Errors
    /// [`Unevaluated`] when `pool` has not been evaluated.
    pub fn apply(
        &self,
        pool: &str,
        instance_types: Vec<Arc<InstanceType>>,
    ) -> Result<Vec<Arc<InstanceType>>, Unevaluated> {
        let current = self.current();
        let updates = current
            .as_deref()
            .and_then(|e| e.pool(pool))
            .ok_or_else(|| Unevaluated(pool.to_owned()))?;
        let mut stale = false;
        let out = instance_types
            .into_iter()
            .map(|it| {
                if updates.seen.get(it.name()) != Some(&fingerprint(&it)) {
                    stale = true;
                }
                apply_one(updates, it)
            })
            .collect();
        if stale {
            self.stale.store(true, Ordering::Release);
        }
        Ok(out)
    }
}

/// `it` with its updates, or `it` itself when there are none (or they cannot be applied).
fn apply_one(pool: &PoolUpdates, it: Arc<InstanceType>) -> Arc<InstanceType> {
    let Some(updates) = pool.updates(it.name()) else {
        return it;
    };
    let mut spec = it.to_spec();
    let mut marks = OverlayMarks::default();
    for offering in &mut spec.offerings {
        let Some(update) = updates.prices.get(&offering_key(&offering.requirements)) else {
            continue;
        };
        if update.change.is_relative() && !offering.priced {
            continue;
        }
        offering.price = update.change.apply(offering.price);
        offering.priced = true;
        marks.price = true;
    }
    for (name, quantity) in &updates.capacity {
        spec.capacity.insert(name.clone(), quantity);
        marks.capacity = true;
    }
    if marks == OverlayMarks::default() {
        return it;
    }
    match InstanceType::new(spec) {
        Ok(changed) => Arc::new(changed.with_overlay_marks(marks)),
        // Validation keeps overlays from making an instance type invalid (a negative
        // extended resource is the one way left); such an update is left out whole.
        Err(e) => {
            tracing::warn!(instance_type = it.name(), error = %e,
                "a NodeOverlay would make this instance type invalid; not applied");
            it
        }
    }
}
