//! NodeOverlays (`karpenter.sh/v1alpha1`, feature gate `NodeOverlay`): prices and extended
//! resources users give instance types, applied where every consumer of instance types sees
//! them.
//!
//! Responsibility, one module each:
//! - [`price`]: `price` / `priceAdjustment` parsing and arithmetic;
//! - [`validate`]: runtime validation of one overlay;
//! - [`evaluate`]: matching, upstream's weight order and conflict rule, the winning updates;
//! - [`store`]: the latest evaluation, applied to a NodePool's instance types;
//! - [`decorator`]: [`Overlaid`], the provider wrapper that applies the store.
//!
//! The NodeOverlay controller (`controllers::nodeoverlay`) evaluates and writes statuses.
//! Inputs: NodeOverlays, NodePools, instance types. Outputs: overlaid instance types.

pub mod decorator;
pub mod evaluate;
pub mod price;
pub mod store;
pub mod validate;

#[cfg(test)]
mod tests;

pub use decorator::Overlaid;
pub use evaluate::{Evaluated, Evaluation, Outcome, PoolInput, evaluate};
pub use price::PriceChange;
pub use store::{OverlayStore, Unevaluated};
pub use validate::{Overlay, validate, validate_all};
